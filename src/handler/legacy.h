/*
 * legacy.h - the legacy token transport (docs/protocol.md section 9), for
 * clients that predate the broker: GET /token/{service} reserves a slot
 * for 10 seconds (legacyTokenValiditySec) and answers a one-time token;
 * PUT /job/{service}?token=..&job=.. redeems it and runs the job in body
 * mode (legacy_stream.h).  Switched by legacyToken (reloadable).
 */
#ifndef ES_LEGACY_H
#define ES_LEGACY_H

#include <event2/buffer.h>

#include "net/http_head.h"

struct bufferevent;

/* 1 when path is a legacy endpoint and legacyToken is on. */
int legacy_path(const char *path);

/* An answer for http_conn.c to send (when the request did not start a job). */
struct legacy_answer {
	int status;
	const char *content_type;
	struct evbuffer *body;   /* the caller's, filled here */
	char extra_headers[128]; /* "Name: value\r\n"... */
};

/* Handles a request on a legacy path (authorized already).  Returns 1
 * when a job started and bev now belongs to it; 0 with a filled in. */
struct ip_addr;
/* peer: the client's address for the job's callback guard (NULL if
 * unknown). */
int legacy_handle(const struct http_head *h, struct bufferevent *bev, const char *peer,
		  const struct ip_addr *peer_ip, struct legacy_answer *a);

#endif
