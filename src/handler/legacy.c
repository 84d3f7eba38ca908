/*
 * legacy.c - the legacy token transport's two endpoints (see legacy.h and
 * docs/protocol.md section 9): routing, request checks, and the token's
 * text form.  The tokens themselves live in the book (book_token_*), so
 * a PUT may reach any handler of the instance.
 *
 * Invariants: a PUT is checked completely (service, token syntax, job
 * description) before its token is redeemed, so a bad request never uses
 * up a token; a token is redeemed at most once (the book says so).
 */
#include "autoconfig.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "common/clock.h"
#include "common/hex.h"
#include "common/log.h"
#include "config/config.h"
#include "execserver/protocol.h"
#include "handler/handler.h"
#include "handler/legacy.h"
#include "handler/legacy_stream.h"
#include "job/job.h"

#define TOKEN_PREFIX PROTO_LEGACY_TOKEN_PREFIX
#define JOB_PREFIX PROTO_LEGACY_JOB_PREFIX
#define TOKEN_HEX PROTO_LEGACY_TOKEN_HEX /* 8 hex index, 8 hex generation, 16 hex secret */

static const struct es_config *cfg(void)
{
	return handler.inst->cfg;
}

static int has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

int legacy_path(const char *path)
{
	return cfg()->legacy_token &&
	       (has_prefix(path, TOKEN_PREFIX) || has_prefix(path, JOB_PREFIX));
}

static int answer(struct legacy_answer *a, int status, const char *extra, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int answer(struct legacy_answer *a, int status, const char *extra, const char *fmt, ...)
{
	va_list ap;
	a->status = status;
	a->content_type = "text/plain; charset=utf-8";
	snprintf(a->extra_headers, sizeof a->extra_headers, "%s", extra ? extra : "");
	va_start(ap, fmt);
	evbuffer_add_vprintf(a->body, fmt, ap);
	va_end(ap);
	evbuffer_add(a->body, "\n", 1);
	return 0;
}

/* The service named by the rest of the path, or -1. */
static int service_of(const char *path, const char *prefix)
{
	const char *name = path + strlen(prefix);
	if (!*name || strchr(name, '/'))
		return -1;
	return config_service_index(cfg(), name);
}

static int parse_token(const char *s, struct book_ref *ref, uint64_t *secret)
{
	uint64_t v[3] = { 0, 0, 0 };
	static const int width[3] = { 8, 8, 16 };
	if (strlen(s) != TOKEN_HEX)
		return -1;
	for (int part = 0, pos = 0; part < 3; part++)
		for (int i = 0; i < width[part]; i++, pos++) {
			int d = hex_digit(s[pos]);
			if (d < 0)
				return -1;
			v[part] = v[part] << 4 | (uint64_t)d;
		}
	ref->idx = (uint32_t)v[0];
	ref->gen = (uint32_t)v[1];
	*secret = v[2];
	return 0;
}

/* 200 {"token":"<32 hex>","service":"<name>","valid_ms":N} */
static int token_answer(struct legacy_answer *a, struct book_ref ref, uint64_t secret,
			const char *service, uint32_t valid_ms)
{
	char tok[TOKEN_HEX + 1];
	snprintf(tok, sizeof tok, "%08x%08x%016llx", ref.idx, ref.gen, (unsigned long long)secret);
	struct json_object *o = json_object_new_object();
	if (!o)
		return answer(a, 500, NULL, "internal error: out of memory");
	json_object_object_add(o, "token", json_object_new_string(tok));
	json_object_object_add(o, "service", json_object_new_string(service));
	json_object_object_add(o, "valid_ms", json_object_new_int64(valid_ms));
	a->status = 200;
	a->content_type = "application/json";
	evbuffer_add_printf(a->body, "%s\n",
			    json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return 0;
}

static int get_token(const struct http_head *h, struct legacy_answer *a)
{
	if (strcmp(h->method, "GET") != 0)
		return answer(a, 405, "Allow: GET\r\n", "GET only");
	int svc = service_of(h->path, TOKEN_PREFIX);
	if (svc < 0)
		return answer(a, 404, NULL, "unknown service");
	struct book_ref ref;
	uint64_t secret;
	uint32_t valid_ms = (uint32_t)cfg()->legacy_token_validity_sec * 1000u;
	struct book *b = handler_book_lock();
	enum book_rc rc = book_token_issue(b, (uint32_t)svc, clock_mono_ms(), valid_ms, &ref,
					   &secret);
	handler_book_unlock();
	switch (rc) {
	case BOOK_OK:
		log_debug("legacy token %08x%08x issued for %s", ref.idx, ref.gen,
			  cfg()->services[svc].name);
		return token_answer(a, ref, secret, cfg()->services[svc].name, valid_ms);
	case BOOK_E_BUSY: return answer(a, 503, "Retry-After: 1\r\n", PROTO_LEGACY_BUSY);
	case BOOK_E_DRAINING:
		return answer(a, 503, "Retry-After: 1\r\n", "the execserver is stopping");
	case BOOK_E_DISABLED: return answer(a, 503, NULL, "the service failed its startup check");
	default: return answer(a, 500, NULL, "internal error: %s", book_rc_name(rc));
	}
}

/* The job description of a PUT, checked; NULL with an answer. */
static struct json_object *job_of(const struct http_head *h, int svc, struct legacy_answer *a)
{
	static char text[HTTP_URI_MAX + 1];
	int n = http_query_param(h->query, "job", text, sizeof text);
	if (n == HTTP_QP_ABSENT || n == 0) {
		answer(a, 400, NULL, "job: missing (the job description, URL-encoded JSON)");
		return NULL;
	}
	if (n < 0) {
		answer(a, 400, NULL,
		       "job: bad percent-encoding, a control character or invalid UTF-8");
		return NULL;
	}
	enum json_tokener_error jerr;
	struct json_object *desc = json_tokener_parse_verbose(text, &jerr);
	if (!desc || !json_object_is_type(desc, json_type_object)) {
		answer(a, 400, NULL, "bad_job: job: not a JSON object%s%s", desc ? "" : ": ",
		       desc ? "" : json_tokener_error_desc(jerr));
		json_object_put(desc);
		return NULL;
	}
	static const char *const body_fields[] = { "stdin", "stdout" };
	for (int i = 0; i < 2; i++) {
		struct json_object *v;
		if (json_object_object_get_ex(desc, body_fields[i], &v) && v) {
			answer(a, 400, NULL,
			       "bad_job: %s: not in body mode (the request body is stdin, "
			       "the response body stdout)",
			       body_fields[i]);
			json_object_put(desc);
			return NULL;
		}
	}
	const char *code;
	char msg[256];
	if (job_validate((uint32_t)svc, desc, &code, msg, sizeof msg) != 0) {
		answer(a, 400, NULL, "%s: %s", code, msg);
		json_object_put(desc);
		return NULL;
	}
	return desc;
}

static int put_job(const struct http_head *h, struct bufferevent *bev, const char *peer,
		   const struct ip_addr *peer_ip, struct legacy_answer *a)
{
	if (strcmp(h->method, "PUT") != 0)
		return answer(a, 405, "Allow: PUT\r\n", "PUT only");
	int svc = service_of(h->path, JOB_PREFIX);
	if (svc < 0)
		return answer(a, 404, NULL, "unknown service");
	if (handler.draining)
		return answer(a, 503, "Retry-After: 1\r\n", "the execserver is stopping");
	if (http_header_get(h, "Transfer-Encoding") && !h->chunked)
		return answer(a, 501, NULL, "Transfer-Encoding: only chunked is supported");
	char text[TOKEN_HEX + 2];
	struct book_ref ref;
	uint64_t secret;
	int n = http_query_param(h->query, "token", text, sizeof text);
	if (n == HTTP_QP_ABSENT || n == 0)
		return answer(a, 400, NULL, "token: missing (the token of GET /token/{service})");
	if (n < 0 || parse_token(text, &ref, &secret) != 0)
		return answer(a, 403, NULL, "%s", PROTO_LEGACY_TOKEN_NOT_FOUND);
	struct json_object *desc = job_of(h, svc, a);
	if (!desc)
		return 0;
	struct book *b = handler_book_lock();
	enum book_rc rc = book_token_use(b, ref, secret, (uint32_t)svc, (uint32_t)handler.slot,
					 clock_mono_ms());
	handler_book_unlock();
	int started = 0;
	if (rc == BOOK_E_UNKNOWN_JOB)
		answer(a, 403, NULL, "%s", PROTO_LEGACY_TOKEN_NOT_FOUND);
	else if (rc == BOOK_E_BAD_TOKEN)
		answer(a, 403, NULL, "%s: it was issued for another service",
		       PROTO_LEGACY_TOKEN_NOT_FOUND);
	else if (rc != BOOK_OK)
		answer(a, 500, NULL, "internal error: %s", book_rc_name(rc));
	else if (legacy_stream_run(bev, peer, peer_ip, h, ref, (uint32_t)svc, desc) != 0)
		answer(a, 500, NULL, "internal error: out of memory");
	else
		started = 1;
	if (rc == BOOK_OK)
		log_debug("legacy token %08x%08x redeemed by %s", ref.idx, ref.gen, peer);
	json_object_put(desc);
	return started;
}

int legacy_handle(const struct http_head *h, struct bufferevent *bev, const char *peer,
		  const struct ip_addr *peer_ip, struct legacy_answer *a)
{
	if (has_prefix(h->path, TOKEN_PREFIX))
		return get_token(h, a);
	return put_job(h, bev, peer, peer_ip, a);
}
