/*
 * receipt.c - see receipt.h.  Output bytes of a program are not text: they
 * go through utf8_sanitize so that the receipt is always valid JSON in a
 * websocket text frame.
 */
#include "autoconfig.h"

#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/json_text.h"
#include "common/utf8.h"
#include "execserver/protocol.h"
#include "job/job_io.h"
#include "job/receipt.h"

static const char *const error_names[] = {
	[JOB_ERR_EXEC_FAILED] = "exec_failed",
	[JOB_ERR_CANCELLED] = "cancelled",
	[JOB_ERR_TIMEOUT] = "timeout",
	[JOB_ERR_EXEC_STOPPED] = "exec_stopped",
	[JOB_ERR_INPUT_FAILED] = JOB_IO_E_INPUT,
	[JOB_ERR_STDIN_FAILED] = JOB_IO_E_STDIN,
	[JOB_ERR_STDOUT_FAILED] = JOB_IO_E_STDOUT,
	[JOB_ERR_OUTPUT_FAILED] = JOB_IO_E_OUTPUT,
	[JOB_ERR_CALLBACK_REFUSED] = JOB_IO_E_REFUSED,
};

const char *receipt_error_name(uint8_t code)
{
	/* set by the book when the handler running the job died */
	if (code == JOB_ERR_LOST)
		return "exec_lost";
	if (code == 0 || code >= sizeof error_names / sizeof error_names[0])
		return NULL;
	return error_names[code];
}

static char *to_text(struct json_object *o, size_t *len)
{
	size_t n;
	const char *s = json_object_to_json_string_length(
		o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
	char *out = s ? malloc(n + 1) : NULL;
	if (out) {
		memcpy(out, s, n + 1);
		*len = n;
	}
	json_object_put(o);
	return out;
}

/* "error": {code, message, retryable}, when code names an error. */
static void add_error(struct json_object *r, uint8_t code, const char *message, int retryable)
{
	const char *name = receipt_error_name(code);
	if (!name)
		return;
	struct json_object *e = json_object_new_object();
	json_object_object_add(e, "code", json_object_new_string(name));
	/* messages can quote input names and server text: keep them UTF-8 */
	const char *m = message ? message : name;
	char *clean = utf8_sanitize((const unsigned char *)m, strlen(m));
	json_object_object_add(e, "message", json_object_new_string(clean ? clean : name));
	free(clean);
	json_object_object_add(e, "retryable", json_object_new_boolean(retryable));
	json_object_object_add(r, "error", e);
}

static void add_outcome(struct json_object *r, const struct book_outcome *o, const char *message)
{
	if (o->exit_code >= 0)
		json_object_object_add(r, "exit_code", json_object_new_int(o->exit_code));
	if (o->signal)
		json_object_object_add(r, "signal", json_object_new_int(o->signal));
	json_object_object_add(r, "duration_ms", json_object_new_int64(o->duration_ms));
	add_error(r, o->error, message, o->retryable);
}

static void add_bytes(struct json_object *r, const char *key, const char *bytes, size_t len)
{
	char *s = utf8_sanitize((const unsigned char *)bytes, len);
	json_object_object_add(r, key, json_object_new_string(s ? s : ""));
	free(s);
}

char *receipt_build(const struct receipt_parts *p, size_t *len)
{
	struct json_object *r = json_object_new_object();
	if (!r)
		return NULL;
	add_outcome(r, p->outcome, p->error_message);
	if (p->stdout_prefix)
		add_bytes(r, "stdout", p->stdout_prefix, p->stdout_len);
	if (p->stdout_truncated)
		json_object_object_add(r, "stdout_truncated", json_object_new_boolean(1));
	if (p->stderr_line && p->stderr_len)
		add_bytes(r, "stderr", p->stderr_line, p->stderr_len);
	return to_text(r, len);
}

char *receipt_compact(const struct book_outcome *o, size_t *len)
{
	struct json_object *r = json_object_new_object();
	if (!r)
		return NULL;
	add_outcome(r, o,
		    o->error == JOB_ERR_LOST ? "the execserver process running the job died"
					     : NULL);
	if (o->receipt_lost)
		json_object_object_add(r, "receipt_lost", json_object_new_boolean(1));
	return to_text(r, len);
}

char *receipt_cancelled_before_run(size_t *len)
{
	struct json_object *r = json_object_new_object();
	if (!r)
		return NULL;
	add_error(r, JOB_ERR_CANCELLED, "cancelled before it ran", 0);
	return to_text(r, len);
}

char *receipt_done_message(const char *job_id, const char *receipt_json, size_t len)
{
	static const char key[] = ",\"receipt\":";
	size_t n;
	/* {"type":"DONE","job_id":"..." (common/json_text.h) */
	char *out = json_text_head(PROTO_DONE, job_id, sizeof key - 1 + len + 1, &n);
	if (out) {
		char *p = out + n;
		memcpy(p, key, sizeof key - 1);
		p += sizeof key - 1;
		memcpy(p, receipt_json, len);
		p += len;
		*p++ = '}';
		*p = '\0';
	}
	return out;
}
