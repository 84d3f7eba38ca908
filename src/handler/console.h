/*
 * console.h - the web console of an instance (docs/console.md): GET
 * /console and its files (compiled in, common/embedded.h), and the one
 * action, POST /jobs/ID/cancel.  The page's data is GET /status?detail=1
 * (status_page.h), asked with the bearer token like any /status.
 */
#ifndef ES_CONSOLE_H
#define ES_CONSOLE_H

#include <event2/buffer.h>

#include "net/http_head.h"

struct console_answer {
	int status;
	const char *content_type;
	struct evbuffer *body; /* the caller's, filled here */
	const char *extra_headers;
};

/* 1 when h is a console request (the answer is in *a), else 0. */
int console_handle(const struct http_head *h, struct console_answer *a);

#endif
