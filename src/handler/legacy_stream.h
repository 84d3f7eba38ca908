/*
 * legacy_stream.h - the HTTP side of a body-mode job (PUT /job of the
 * legacy token transport, docs/protocol.md section 9): the request body
 * is the job's stdin, the response body its stdout, and the outcome goes
 * into X-Execserver-* header or trailer fields.
 *
 * Owns, per PUT: the connection's bufferevent from the moment the job is
 * started, the request-body decoder (Content-Length or chunked) and the
 * response writer.  It implements job_io's streams (job_io.h), so the job
 * runs through the same lifecycle as a broker job (job.c).
 */
#ifndef ES_LEGACY_STREAM_H
#define ES_LEGACY_STREAM_H

#include <stdint.h>

#include <json-c/json.h>

#include "book/book.h"
#include "net/http_head.h"

struct bufferevent;

/* Starts the validated job desc of service on the slot of the RUNNING
 * legacy token and takes over bev (with any body bytes that followed the
 * head).  Returns 0; or -1 when out of memory: the token was given back,
 * bev is still the caller's. */
struct ip_addr;
int legacy_stream_run(struct bufferevent *bev, const char *peer, const struct ip_addr *peer_ip,
		      const struct http_head *h, struct book_ref token, uint32_t service,
		      struct json_object *desc);

/* The answer to a PUT that did not start a job is queued in bev's output:
 * takes over bev, sends it, then reads (and drops) what the client still
 * sends for up to 2 s before closing, so that a client still sending its
 * body gets the answer instead of a reset.  Returns 0, or -1 (out of
 * memory: bev is still the caller's). */
int legacy_stream_linger(struct bufferevent *bev);

#endif
