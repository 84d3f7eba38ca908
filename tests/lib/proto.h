/*
 * proto.h - broker-protocol helpers for integration tests, on top of the
 * test websocket client: connect and read HELLO, send a message built from
 * a printf format, wait for the next message of a type (skipping HELLO
 * re-sends), and read fields.
 */
#ifndef ES_TEST_PROTO_H
#define ES_TEST_PROTO_H

#include <json-c/json.h>

#include "wsclient.h"

struct tclient {
	struct wsc *ws;
	struct json_object *hello; /* the latest HELLO */
	char name[32];
};

/* Connects to /broker[?client=id] and waits for HELLO.  NULL on failure. */
struct tclient *tc_connect(int port, const char *client_id);
/* Connects to /broker?<query> (e.g. "client=a&protocol=2") and waits for
 * HELLO; name is for messages.  NULL on failure. */
struct tclient *tc_connect_query(int port, const char *query, const char *name);
/* The same, giving up after timeout_ms (tc_connect: 5 s). */
struct tclient *tc_connect_within(int port, const char *client_id, int timeout_ms);
/* The same to host:port (a bed host's address, from a thread on the bed). */
struct tclient *tc_connect_at(const char *host, int port, const char *client_id, int timeout_ms);
/* Wraps an upgraded websocket (e.g. a TLS one) and waits for HELLO; takes
 * ws.  NULL on failure. */
struct tclient *tc_from_wsc(struct wsc *ws, const char *name, int timeout_ms);
struct es_daemon;
/* Connects until the connection lands on handler `slot` (of `handlers`),
 * judged by the per-handler connection counts of /status; connections that
 * land elsewhere are closed.  NULL if it never gets there. */
struct tclient *tc_connect_on_handler(const struct es_daemon *d, int handlers, int slot,
				      const char *client_id);
void tc_close(struct tclient *c);

/* Sends one text message, printf-style. */
int tc_send(struct tclient *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sends the n text messages as masked frames in one write, so that the
 * daemon reads them together (on loopback, one write of a few frames
 * arrives whole). */
int tc_send_together(struct tclient *c, const char *const *msgs, size_t n);

/* Next message whose type is `type` ("OFFER", "ERROR", ...), skipping HELLOs
 * (kept in c->hello).  Any other type is returned too when type is NULL.
 * NULL on timeout or connection end. */
struct json_object *tc_expect(struct tclient *c, const char *type, int timeout_ms);
/* 1 if no message other than HELLO arrives within ms. */
int tc_quiet(struct tclient *c, int ms);

const char *tc_str(struct json_object *o, const char *key);
long long tc_int(struct json_object *o, const char *key);

/* WANT, then wait for its OFFER; returns the token (static buffer) or NULL. */
const char *tc_want_offer(struct tclient *c, const char *job_id, const char *service, int priority,
			  int timeout_ms);

/* WANT, OFFER (within 3 s), JOB (job_json is the job object) on service:
 * the job is on its way.  Returns 0, or -1 (no offer, or the send failed). */
int tc_start_job(struct tclient *c, const char *job_id, const char *service, const char *job_json);
/* tc_start_job, then its DONE (or NULL). */
struct json_object *tc_run_job(struct tclient *c, const char *job_id, const char *service,
			       const char *job_json, int timeout_ms);
/* The receipt object of a DONE (NULL-safe). */
struct json_object *tc_receipt(struct json_object *done);

#endif
