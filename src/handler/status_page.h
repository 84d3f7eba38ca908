/*
 * status_page.h - the read-only HTTP views of an instance: GET /status (JSON)
 * and GET /metrics (Prometheus text format 0.0.4), both documented in
 * docs/protocol.md.  Any handler answers for the whole instance: the
 * figures come from the shared book.
 */
#ifndef ES_STATUS_PAGE_H
#define ES_STATUS_PAGE_H

#include <event2/buffer.h>

/* check: include the book's consistency check (costly: on request only);
 * detail: the jobs, the waiting line and the last failures one by one
 * (the console's data: GET /status?detail=1). */
void status_json(struct evbuffer *out, int check, int detail);
void status_metrics(struct evbuffer *out);

#endif
