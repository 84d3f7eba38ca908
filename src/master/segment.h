/*
 * segment.h - creation of everything a handler inherits (struct instance):
 * the POSIX shared-memory segment with the want-book, the eventfds and the
 * listening sockets.  Called once by the master before the first fork (the
 * listeners even before the daemon detaches).
 */
#ifndef ES_SEGMENT_H
#define ES_SEGMENT_H

#include "handler/instance.h"

/* Returns 0, or -1 after logging why (exit status 2 territory). */
int segment_create(struct instance *inst, struct es_config *cfg, int nhandlers);
/* One listening socket per handler of inst (cfg and nhandlers set) on
 * cfg->addr, all with SO_REUSEPORT; refused when another process holds the
 * address (port_probe.h).  0, or -1 with why. */
int listeners_create(struct instance *inst, char *why, size_t whylen);

#endif
