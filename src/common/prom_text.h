/*
 * prom_text.h - the Prometheus text format (version 0.0.4) as both
 * daemons write their /metrics pages: a family's HELP and TYPE lines, a
 * label value escaped, a histogram of the one bucket layout
 * (histogram.h), and the identity every page starts with.
 *
 * The conventions both pages keep (docs/protocol.md, docs/dispatch.md):
 * one TYPE per family and no name that another family's series use;
 * counters end in _total; durations are histograms in seconds; no label
 * is named instance or job (Prometheus sets those for the target).
 */
#ifndef ES_PROM_TEXT_H
#define ES_PROM_TEXT_H

#include <stdint.h>

#include "common/histogram.h"

struct evbuffer;

/* "# HELP name help" and "# TYPE name type" (help: one line, no '\'). */
void prom_family(struct evbuffer *out, const char *name, const char *type, const char *help);
/* v between double quotes, with '\', '"' and newline escaped. */
void prom_label_value(struct evbuffer *out, const char *v);
/* The samples of histogram h: name_bucket{le=...} (cumulative, +Inf
 * last), name_sum in seconds and name_count; with one more label
 * lname="lvalue" first when lname is not NULL.  The family lines are the
 * caller's (prom_family, type "histogram"). */
void prom_histogram(struct evbuffer *out, const char *name, const char *lname, const char *lvalue,
		    const struct hist *h);
/* DAEMON_build_info{version,instance_id} 1 and
 * process_start_time_seconds (start_ms: wall clock ms since the epoch
 * when the counters of the page began), with their family lines. */
void prom_identity(struct evbuffer *out, const char *daemon, const char *instance_id,
		   uint64_t start_ms);

#endif
