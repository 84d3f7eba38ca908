/*
 * messages.c - see messages.h.
 *
 * Decoding is strict about what it reads and tolerant of what it does not:
 * unknown fields are ignored (so newer clients can add fields), but every
 * field a message needs must be present with the documented type.  JSON
 * nesting is capped so a hostile document cannot recurse the parser deep.
 */
#include "autoconfig.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hex.h"
#include "common/json_text.h"
#include "handler/messages.h"

#define JSON_MAX_DEPTH 16
/* the tokener is kept after messages up to this size */
#define TOKENER_KEEP_MAX 65536

static const struct {
	const char *name;
	enum msg_type type;
	int since; /* protocol version that introduced it */
} msg_types[] = {
	{ PROTO_WANT, MSG_WANT, 1 },
	{ PROTO_UNWANT, MSG_UNWANT, 1 },
	{ PROTO_JOB, MSG_JOB, 1 },
	{ PROTO_DECLINE, MSG_DECLINE, 1 },
	{ PROTO_QUERY, MSG_QUERY, 1 },
	{ PROTO_CANCEL, MSG_CANCEL, 1 },
	{ PROTO_ACK, MSG_ACK, PROTO_VERSION_ACK },
};

/* Job ids: 1..64 bytes of printable ASCII without space. */
static int valid_id(const char *s, size_t len)
{
	if (len == 0 || len > BOOK_ID_MAX)
		return 0;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
			return 0;
	return 1;
}

static int get_string(struct json_object *root, const char *key, const char **out, size_t *len)
{
	struct json_object *v;
	if (!json_object_object_get_ex(root, key, &v) || !json_object_is_type(v, json_type_string))
		return -1;
	*out = json_object_get_string(v);
	*len = (size_t)json_object_get_string_len(v);
	return 0;
}

#define FAIL(c, ...)                                       \
	do {                                               \
		*code = (c);                               \
		snprintf(detail, detail_len, __VA_ARGS__); \
		return -1;                                 \
	} while (0)

static int decode_fields(struct msg_in *in, const char **code, char *detail, size_t detail_len)
{
	const char *s;
	size_t len;
	struct json_object *v;

	if (get_string(in->root, "job_id", &s, &len) != 0)
		FAIL(PROTO_E_BAD_MESSAGE, "job_id: a string is required");
	if (!valid_id(s, len))
		FAIL(PROTO_E_BAD_MESSAGE, "job_id: 1 to 64 printable ASCII characters, no space");
	memcpy(in->job_id, s, len + 1);

	switch (in->type) {
	case MSG_WANT:
		if (get_string(in->root, "service", &s, &len) != 0)
			FAIL(PROTO_E_BAD_MESSAGE, "service: a string is required");
		/* a name with a NUL in it is none of ours (not a shorter one) */
		if (len == 0 || len >= sizeof in->service || strlen(s) != len)
			FAIL(PROTO_E_UNKNOWN_SERVICE, "service: no such service");
		memcpy(in->service, s, len + 1);
		in->priority = 0;
		if (json_object_object_get_ex(in->root, "priority", &v) &&
		    !json_object_is_type(v, json_type_null)) {
			if (!json_object_is_type(v, json_type_int))
				FAIL(PROTO_E_BAD_MESSAGE, "priority: an integer is required");
			errno = 0;
			int64_t p = json_object_get_int64(v);
			if (errno != 0 || p < INT32_MIN || p > INT32_MAX)
				FAIL(PROTO_E_BAD_MESSAGE,
				     "priority: out of range (32-bit signed integer)");
			in->priority = (int32_t)p;
		}
		break;
	case MSG_JOB:
	case MSG_DECLINE:
		if (get_string(in->root, "token", &s, &len) == 0 &&
		    msg_token_parse(s, &in->token) == 0)
			in->has_token = 1;
		break;
	default: break;
	}
	switch (in->type) {
	case MSG_JOB:
		if (!json_object_object_get_ex(in->root, "job", &in->job) ||
		    !json_object_is_type(in->job, json_type_object))
			FAIL(PROTO_E_BAD_MESSAGE, "job: an object is required");
		/* JOB carries the offer's token too */
		__attribute__((fallthrough));
	case MSG_DECLINE:
		if (!in->has_token)
			FAIL(PROTO_E_BAD_MESSAGE,
			     "token: the 16 hex digits of the OFFER are required");
		break;
	default: break;
	}
	return 0;
}

int msg_decode(const char *text, size_t len, int protocol, struct msg_in *in, const char **code,
	       char *detail, size_t detail_len)
{
	/* one tokener for every message (a process decodes one at a time):
	 * reset, not allocated and freed each time */
	static struct json_tokener *tok;
	const char *type;
	size_t tlen;

	memset(in, 0, sizeof *in);
	if (!tok && !(tok = json_tokener_new_ex(JSON_MAX_DEPTH)))
		FAIL(PROTO_E_INTERNAL, "out of memory");
	if (len > INT32_MAX)
		FAIL(PROTO_E_BAD_JSON, "message too long");
	json_tokener_reset(tok);
	in->root = json_tokener_parse_ex(tok, text, (int)len);
	enum json_tokener_error jerr = json_tokener_get_error(tok);
	size_t used = json_tokener_get_parse_end(tok);
	if (len > TOKENER_KEEP_MAX) {
		/* its string buffer grew with the message: not kept */
		json_tokener_free(tok);
		tok = NULL;
	}
	if (!in->root || jerr != json_tokener_success || used != len) {
		FAIL(PROTO_E_BAD_JSON, "not a single JSON document (%s)",
		     jerr != json_tokener_success ? json_tokener_error_desc(jerr)
						  : "trailing data");
	}
	if (!json_object_is_type(in->root, json_type_object))
		FAIL(PROTO_E_BAD_JSON, "a JSON object is required");
	/* Name the job in the error whenever the message names one. */
	const char *id;
	size_t idlen;
	if (get_string(in->root, "job_id", &id, &idlen) == 0 && valid_id(id, idlen))
		memcpy(in->job_id, id, idlen + 1);
	if (get_string(in->root, "type", &type, &tlen) != 0)
		FAIL(PROTO_E_BAD_MESSAGE, "type: a string is required");
	for (size_t i = 0; i < sizeof msg_types / sizeof msg_types[0]; i++)
		if (strlen(type) == tlen && strcmp(type, msg_types[i].name) == 0 &&
		    protocol >= msg_types[i].since)
			in->type = msg_types[i].type;
	if (!in->type)
		FAIL(PROTO_E_UNKNOWN_TYPE, "unknown message type");
	return decode_fields(in, code, detail, detail_len);
}

void msg_in_free(struct msg_in *in)
{
	if (in->root)
		json_object_put(in->root);
	in->root = NULL;
	in->job = NULL;
}

char *msg_to_text(struct json_object *obj)
{
	if (!obj)
		return NULL;
	const char *s = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN |
								    JSON_C_TO_STRING_NOSLASHESCAPE);
	char *out = s ? strdup(s) : NULL;
	json_object_put(obj);
	return out;
}

static struct json_object *new_message(const char *type, const char *job_id)
{
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string(type));
	if (job_id)
		json_object_object_add(o, "job_id", json_object_new_string(job_id));
	return o;
}

char *msg_encode_offer(const char *job_id, uint64_t token)
{
	/* one per job: the text around json-c's escaping of the job id
	 * (common/json_text.h), as json-c prints the object */
	static const char key[] = ",\"token\":\"";
	size_t n;
	char *out = json_text_head(PROTO_OFFER, job_id, sizeof key - 1 + 16 + 2, &n);
	if (!out)
		return NULL;
	memcpy(out + n, key, sizeof key - 1);
	n += sizeof key - 1;
	msg_token_format(token, out + n);
	memcpy(out + n + 16, "\"}", 3);
	return out;
}

char *msg_encode_progress(const char *job_id, double fraction, const char *text)
{
	struct json_object *o = new_message(PROTO_PROGRESS, job_id);
	json_object_object_add(o, "fraction", json_fraction(fraction));
	if (text && text[0])
		json_object_object_add(o, "text", json_object_new_string(text));
	return msg_to_text(o);
}

char *msg_encode_error(const char *code, const char *message, const char *job_id,
		       const struct msg_in *refused)
{
	struct json_object *o = new_message(PROTO_ERROR, NULL);
	json_object_object_add(o, "code", json_object_new_string(code));
	json_object_object_add(o, "message", json_object_new_string(message));
	if (job_id && job_id[0])
		json_object_object_add(o, "job_id", json_object_new_string(job_id));
	for (size_t i = 0; refused && i < sizeof msg_types / sizeof msg_types[0]; i++)
		if (msg_types[i].type == refused->type)
			json_object_object_add(o, "refused",
					       json_object_new_string(msg_types[i].name));
	if (refused && refused->has_token) {
		char hex[17];
		msg_token_format(refused->token, hex);
		json_object_object_add(o, "token", json_object_new_string(hex));
	}
	return msg_to_text(o);
}

static const char *state_name(enum want_state s)
{
	switch (s) {
	case WANT_PARKED: return "waiting";
	case WANT_OFFERED: return "offered";
	case WANT_RUNNING: return "running";
	case WANT_FINISHED: return "finished";
	default: return "unknown";
	}
}

char *msg_encode_position(const char *job_id, const struct book_position *pos, uint64_t eta_ms,
			  int has_eta)
{
	struct json_object *o = new_message(PROTO_POSITION, job_id);
	json_object_object_add(o, "state", json_object_new_string(state_name(pos->state)));
	json_object_object_add(o, "running", json_object_new_int64(pos->running));
	json_object_object_add(o, "ahead", json_object_new_int64(pos->ahead));
	json_object_object_add(o, "capacity", json_object_new_int64(pos->capacity));
	json_object_object_add(o, "eta_ms",
			       has_eta ? json_object_new_int64((int64_t)eta_ms) : NULL);
	return msg_to_text(o);
}

void msg_token_format(uint64_t token, char out[17])
{
	static const char digits[] = "0123456789abcdef";
	for (int i = 15; i >= 0; i--, token >>= 4)
		out[i] = digits[token & 15];
	out[16] = '\0';
}

int msg_token_parse(const char *text, uint64_t *token)
{
	uint64_t v = 0;
	for (int i = 0; i < 16; i++) {
		int d = hex_digit(text[i]);
		if (d < 0)
			return -1;
		v = v << 4 | (uint64_t)d;
	}
	if (text[16] != '\0')
		return -1;
	*token = v;
	return 0;
}

const char *msg_book_message(enum book_rc rc, enum msg_type about)
{
	switch (rc) {
	case BOOK_E_UNKNOWN_SERVICE: return "no such service on this instance";
	case BOOK_E_DUPLICATE: return "this client already has a job with this job_id";
	case BOOK_E_UNKNOWN_JOB:
		return about == MSG_JOB || about == MSG_DECLINE
			       ? "no offer for this job_id on this connection (expired or never "
				 "made)"
			       : "no job with this job_id for this connection or client";
	case BOOK_E_BAD_STATE:
		return about == MSG_UNWANT ? "the job is running: use CANCEL"
					   : "the job is not in the offered state";
	case BOOK_E_BAD_TOKEN: return "token does not match the current offer";
	case BOOK_E_LIMIT_CONN: return "maxWantsPerConnection reached";
	case BOOK_E_LIMIT_WANTS: return "maxWants reached";
	case BOOK_E_LIMIT_CONNS: return "maxConnections reached";
	case BOOK_E_LIMIT_JOBS:
		return "maxJobsPerClient reached: this client already runs that many jobs; "
		       "the offer is withdrawn";
	case BOOK_E_DRAINING: return "the instance is stopping";
	case BOOK_E_DISABLED: return "the service failed its startup check";
	case BOOK_E_INVALID: return "job_id: 1 to 64 printable ASCII characters";
	case BOOK_E_STALE: return "the connection is no longer registered";
	case BOOK_E_BUSY: /* legacy tokens only */
	case BOOK_OK: break;
	}
	return "internal error";
}

const char *msg_book_error(enum book_rc rc)
{
	switch (rc) {
	case BOOK_OK: return NULL;
	case BOOK_E_UNKNOWN_SERVICE: return PROTO_E_UNKNOWN_SERVICE;
	case BOOK_E_DUPLICATE: return PROTO_E_DUPLICATE_JOB;
	case BOOK_E_UNKNOWN_JOB: return PROTO_E_UNKNOWN_JOB;
	case BOOK_E_BAD_STATE: return PROTO_E_NOT_OFFERED;
	case BOOK_E_BAD_TOKEN: return PROTO_E_BAD_TOKEN;
	case BOOK_E_LIMIT_CONN:
	case BOOK_E_LIMIT_WANTS:
	case BOOK_E_LIMIT_CONNS:
	case BOOK_E_LIMIT_JOBS: return PROTO_E_LIMIT_REACHED;
	case BOOK_E_DRAINING: return PROTO_E_DRAINING;
	case BOOK_E_DISABLED: return PROTO_E_SERVICE_DISABLED;
	case BOOK_E_STALE: return PROTO_E_INTERNAL;
	case BOOK_E_INVALID: return PROTO_E_BAD_MESSAGE;
	case BOOK_E_BUSY: break; /* legacy tokens only */
	}
	return PROTO_E_INTERNAL;
}
