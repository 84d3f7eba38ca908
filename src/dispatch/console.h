/*
 * console.h - execdispatch's console (docs/console.md, "execdispatch"):
 * GET /console on the metrics address, its files (www/, compiled in),
 * the JSON it reads under /console/api/ and its actions (cancel, retry,
 * pause, resume).  Its statements go on a lane of their own (chores.h:
 * one connection, CONSOLE_TIMEOUT_MS per statement, then cancelled at the
 * server), never on the hot path's connections or the dispatcher's lanes,
 * so a slow page delays only the console; at most CONSOLE_PENDING_MAX
 * requests wait for the database at once (more: 503).
 */
#ifndef ES_DISPATCH_CONSOLE_H
#define ES_DISPATCH_CONSOLE_H

#include <stddef.h>

#include <execserver/client.h>

struct event_base;
struct evhttp;
struct dispatch_config;

#define CONSOLE_TIMEOUT_MS 5000
#define CONSOLE_PENDING_MAX 16

struct dconsole;

/* Adds the console's paths to http (NULL, with nothing added, when
 * cfg->console_enabled is 0).  *client as for metrics_start.  NULL with
 * err set when out of memory. */
struct dconsole *dconsole_start(struct event_base *base, struct evhttp *http,
				const struct dispatch_config *cfg, exc_client *const *client,
				char *err, size_t errlen);
void dconsole_stop(struct dconsole *c);

#endif
