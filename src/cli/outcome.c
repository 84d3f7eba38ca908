/* outcome.c - see outcome.h. */
#include "autoconfig.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <stdlib.h>

#include "cli/exit_codes.h"
#include "cli/outcome.h"
#include "cli/table.h"

static void add(char *msg, size_t msglen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void add(char *msg, size_t msglen, const char *fmt, ...)
{
	size_t used = strlen(msg);
	va_list ap;
	if (used >= msglen)
		return;
	va_start(ap, fmt);
	vsnprintf(msg + used, msglen - used, fmt, ap);
	va_end(ap);
}

static int is(const char *code, const char *name)
{
	return code && strcmp(code, name) == 0;
}

/* The exit status a receipt error stands for. */
static int error_exit(const struct exc_receipt *r, int interrupted)
{
	const char *code = r->error_code;
	if (is(code, EXC_E_UNAUTHORIZED))
		return EXECCTL_UNAUTHORIZED;
	if (is(code, EXC_E_TLS_VERIFY))
		return EXECCTL_TLS_VERIFY;
	if (is(code, EXC_E_UNKNOWN_SERVICE) || is(code, "unknown_command") ||
	    is(code, EXC_E_SERVICE_DISABLED))
		return EXECCTL_UNKNOWN_SERVICE;
	if (is(code, EXC_E_NO_SLOT))
		return EXECCTL_NO_SLOT;
	if (is(code, EXC_E_LOCAL_IO))
		return EXECCTL_LOCAL_IO;
	if (is(code, EXC_E_CANCELLED) && interrupted)
		return EXECCTL_INTERRUPTED;
	return r->retryable ? EXECCTL_RETRYABLE : EXECCTL_FAILED;
}

const char *outcome_tls_hint(const char *reason, int have_cacert)
{
	if (reason && (strstr(reason, "mismatch") || strstr(reason, "host name")))
		return "the certificate is not for this host: give the name or address it was "
		       "issued for";
	return have_cacert ? "is --cacert the CA that signed the server's certificate?"
			   : "a private CA? give its certificate with --cacert or EXECCTL_CACERT";
}

int outcome_exit(const struct exc_receipt *r, int interrupted, const char *service, char *msg,
		 size_t msglen)
{
	int status;

	if (msglen)
		msg[0] = '\0';
	if (r->ok)
		return EXECCTL_OK;
	if (r->error_code) {
		/* the server's words may carry a job's or a payload's text */
		char *code = table_escape(r->error_code),
		     *text = r->error_message ? table_escape(r->error_message) : NULL;
		const char *m = r->error_message ? (text ? text : "?") : NULL;

		status = error_exit(r, interrupted);
		if (is(r->error_code, EXC_E_UNKNOWN_SERVICE))
			add(msg, msglen, "execctl: unknown service '%s': %s\n", service,
			    "no instance reached offers it");
		else if (is(r->error_code, EXC_E_NO_SLOT))
			add(msg, msglen, "execctl: service '%s': %s\n", service,
			    m && m[0] ? m : "no slot within --slot-timeout");
		else if (is(r->error_code, EXC_E_TLS_VERIFY))
			add(msg, msglen, "execctl: %s\n", m ? m : "certificate verify failed");
		else if (is(r->error_code, EXC_E_UNAUTHORIZED))
			add(msg, msglen,
			    "execctl: the server refused the token (give the right one "
			    "with --token-file or EXECCTL_TOKEN): %s\n",
			    m ? m : "401");
		else
			add(msg, msglen, "execctl: job failed: %s%s%s%s\n", code ? code : "?",
			    m ? ": " : "", m ? m : "",
			    r->retryable ? " (retryable: run it again)" : "");
		free(code);
		free(text);
	} else if (r->signal > 0) {
		status = 128 + r->signal;
		add(msg, msglen, "execctl: the job was killed by signal %d (%s)\n", r->signal,
		    strsignal(r->signal));
	} else if (r->exited) {
		status = r->exit_code;
		add(msg, msglen, "execctl: the job exited with status %d\n", r->exit_code);
		if (status == 0) /* exit 0 but not ok: a local stream broke */
			status = EXECCTL_LOCAL_IO;
	} else {
		status = EXECCTL_FAILED;
		add(msg, msglen, "execctl: the job ended without an exit status\n");
	}
	if (r->stderr_line && r->stderr_line[0]) {
		char *line = table_escape(r->stderr_line);
		add(msg, msglen, "execctl: its last stderr line: %s\n", line ? line : "?");
		free(line);
	}
	return status;
}

int outcome_show(const struct exc_receipt *r, const char *msg, FILE *out, FILE *err)
{
	int rc = 0;

	if (r->stdout_bytes == 0 && r->stdout_text && r->stdout_text[0]) {
		size_t len = strlen(r->stdout_text);
		if (fwrite(r->stdout_text, 1, len, out) != len || fflush(out) != 0)
			rc = -1;
		if (r->stdout_truncated)
			fputs("execctl: (standard output cut after its first 4000 bytes: the "
			      "receipt keeps no more)\n",
			      err);
	}
	fputs(msg, err);
	return rc;
}

static const char *text(struct json_object *o, const char *key)
{
	struct json_object *v;
	return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
		       ? json_object_get_string(v)
		       : NULL;
}

int outcome_parse(const char *json, struct exc_receipt *r, struct json_object **doc)
{
	struct json_object *o = json_tokener_parse(json), *v, *e;

	memset(r, 0, sizeof *r);
	*doc = o;
	if (!json_object_is_type(o, json_type_object))
		return -1;
	r->duration_ms = -1;
	if (json_object_object_get_ex(o, "exit_code", &v) &&
	    json_object_is_type(v, json_type_int)) {
		r->exited = 1;
		r->exit_code = json_object_get_int(v);
	}
	if (json_object_object_get_ex(o, "signal", &v))
		r->signal = json_object_get_int(v);
	if (json_object_object_get_ex(o, "duration_ms", &v))
		r->duration_ms = json_object_get_int64(v);
	r->stdout_text = text(o, "stdout");
	r->stdout_truncated = json_object_object_get_ex(o, "stdout_truncated", &v) &&
			      json_object_get_boolean(v);
	r->stderr_line = text(o, "stderr");
	if (json_object_object_get_ex(o, "error", &e) && json_object_is_type(e, json_type_object)) {
		r->error_code = text(e, "code") ? text(e, "code") : "internal";
		r->error_message = text(e, "message") ? text(e, "message") : "";
		r->retryable = json_object_object_get_ex(e, "retryable", &v) &&
			       json_object_get_boolean(v);
	}
	r->ok = !r->error_code && r->exited && r->exit_code == 0 && r->signal == 0;
	r->json = json;
	return 0;
}
