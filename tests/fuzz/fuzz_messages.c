/*
 * fuzz_messages.c - fuzz target of the client message decoder
 * (msg_decode, src/handler/messages.c): the input is one websocket text
 * message as a client sent it.
 *
 * Properties checked, beyond "no crash, no leak, no undefined behaviour":
 *  - a failure names one of the documented ERROR codes and a detail;
 *  - a success has a known type and a job_id of 1..64 printable ASCII
 *    characters; the type and WANT's service are whole strings (not cut
 *    short at a NUL they hold), JOB has a job object;
 *  - the job_id of a decoded message survives the server's encoders:
 *    OFFER and ERROR texts parse back as JSON carrying that same job_id.
 */
#include "autoconfig.h"

#include <string.h>

#include <json-c/json.h>

#include "execserver/protocol.h"
#include "fuzz.h"
#include "handler/messages.h"

static int is_decode_error(const char *code)
{
	static const char *const codes[] = { PROTO_E_BAD_JSON, PROTO_E_BAD_MESSAGE,
					     PROTO_E_UNKNOWN_TYPE, PROTO_E_UNKNOWN_SERVICE,
					     PROTO_E_INTERNAL };

	for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
		if (code && strcmp(code, codes[i]) == 0)
			return 1;
	return 0;
}

static int valid_id(const char *id)
{
	size_t len = strlen(id);

	if (len == 0 || len > BOOK_ID_MAX)
		return 0;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)id[i] < 0x21 || (unsigned char)id[i] > 0x7e)
			return 0;
	return 1;
}

/* text (consumed) must parse as a JSON object whose "job_id" is id. */
static void check_encoded(char *text, const char *id)
{
	struct json_object *o, *v;

	FUZZ_CHECK(text != NULL);
	o = json_tokener_parse(text);
	FUZZ_CHECK(o != NULL);
	FUZZ_CHECK(json_object_object_get_ex(o, "job_id", &v));
	FUZZ_CHECK(strcmp(json_object_get_string(v), id) == 0);
	json_object_put(o);
	free(text);
}

/* The OFFER is byte for byte what json-c prints for the same object
 * (messages.c builds it around json-c's escaping of the job id only). */
static void check_offer_bytes(const char *text, const char *id, uint64_t token)
{
	char hex[17];
	struct json_object *o = json_object_new_object();
	msg_token_format(token, hex);
	json_object_object_add(o, "type", json_object_new_string(PROTO_OFFER));
	json_object_object_add(o, "job_id", json_object_new_string(id));
	json_object_object_add(o, "token", json_object_new_string(hex));
	FUZZ_CHECK(text != NULL);
	FUZZ_CHECK(strcmp(text, json_object_to_json_string_ext(
					o, JSON_C_TO_STRING_PLAIN |
						   JSON_C_TO_STRING_NOSLASHESCAPE)) == 0);
	json_object_put(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct msg_in in;
	const char *code = NULL;
	char detail[256] = "";
	struct json_object *v;

	if (msg_decode((const char *)data, size, PROTO_VERSION, &in, &code, detail,
		       sizeof detail) != 0) {
		FUZZ_CHECK(is_decode_error(code));
		FUZZ_CHECK(detail[0] != '\0');
		FUZZ_CHECK(in.job_id[0] == '\0' || valid_id(in.job_id));
		if (in.job_id[0])
			check_encoded(msg_encode_error(code, detail, in.job_id, &in), in.job_id);
		msg_in_free(&in);
		return 0;
	}
	FUZZ_CHECK(in.type >= MSG_WANT && in.type <= MSG_ACK);
	FUZZ_CHECK(valid_id(in.job_id));
	FUZZ_CHECK(in.root != NULL);
	/* the type was the whole string, not a prefix up to a NUL */
	FUZZ_CHECK(json_object_object_get_ex(in.root, "type", &v));
	FUZZ_CHECK(strlen(json_object_get_string(v)) == (size_t)json_object_get_string_len(v));
	if (in.type == MSG_WANT) {
		FUZZ_CHECK(in.service[0] != '\0');
		FUZZ_CHECK(json_object_object_get_ex(in.root, "service", &v));
		FUZZ_CHECK((size_t)json_object_get_string_len(v) == strlen(in.service));
	}
	if (in.type == MSG_JOB)
		FUZZ_CHECK(json_object_is_type(in.job, json_type_object));
	char *offer = msg_encode_offer(in.job_id, in.token);
	check_offer_bytes(offer, in.job_id, in.token);
	check_encoded(offer, in.job_id);
	msg_in_free(&in);
	return 0;
}
