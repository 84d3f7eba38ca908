/*
 * wire.c - the messages a client sends (protocol section 2, "Client to
 * server"), built as json-c objects, and typed field readers for the
 * messages it receives.  No I/O, no state.
 */
#include "autoconfig.h"
#include "client/client_impl.h"

#include "execserver/protocol.h"

static struct json_object *msg(const char *type, const char *job_id)
{
	struct json_object *o = json_object_new_object();

	if (o == NULL)
		return NULL;
	json_object_object_add(o, "type", json_object_new_string(type));
	json_object_object_add(o, "job_id", json_object_new_string(job_id));
	return o;
}

struct json_object *wire_want(const char *job_id, const char *service, int priority)
{
	struct json_object *o = msg(PROTO_WANT, job_id);

	if (o) {
		json_object_object_add(o, "service", json_object_new_string(service));
		json_object_object_add(o, "priority", json_object_new_int(priority));
	}
	return o;
}

struct json_object *wire_job_msg(const char *type, const char *job_id)
{
	return msg(type, job_id);
}

struct json_object *wire_decline(const char *job_id, const char *token)
{
	struct json_object *o = msg(PROTO_DECLINE, job_id);

	if (o)
		json_object_object_add(o, "token", json_object_new_string(token));
	return o;
}

struct json_object *wire_job(const char *job_id, const char *token, struct json_object *job)
{
	struct json_object *o = msg(PROTO_JOB, job_id);

	if (o) {
		json_object_object_add(o, "token", json_object_new_string(token));
		json_object_object_add(o, "job", json_object_get(job));
	}
	return o;
}

const char *wire_str(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

int64_t wire_int(struct json_object *o, const char *key, int64_t def)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
		return def;
	return json_object_get_int64(v);
}

int64_t wire_int_in(struct json_object *o, const char *key, int64_t def, int64_t lo, int64_t hi)
{
	int64_t v = wire_int(o, key, def);

	return v < lo ? lo : v > hi ? hi : v;
}
