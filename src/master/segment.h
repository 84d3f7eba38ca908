/*
 * segment.h - creation of everything a handler inherits (struct instance):
 * the POSIX shared-memory segment with the want-book, the eventfds and the
 * listening sockets.  Called once by the master before the first fork.
 */
#ifndef ES_SEGMENT_H
#define ES_SEGMENT_H

#include "handler/instance.h"

/* Returns 0, or -1 after logging why (exit status 2 territory). */
int segment_create(struct instance *inst, struct es_config *cfg, int nhandlers);
int listeners_create(struct instance *inst);

#endif
