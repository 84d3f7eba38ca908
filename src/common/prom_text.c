/* prom_text.c - see prom_text.h. */
#include "autoconfig.h"
#include "common/prom_text.h"

#include <inttypes.h>
#include <stdio.h>

#include <event2/buffer.h>

void prom_family(struct evbuffer *out, const char *name, const char *type, const char *help)
{
	evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void prom_label_value(struct evbuffer *out, const char *v)
{
	evbuffer_add(out, "\"", 1);
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			evbuffer_add_printf(out, "\\%c", *v);
		else if (*v == '\n')
			evbuffer_add(out, "\\n", 2);
		else
			evbuffer_add(out, v, 1);
	}
	evbuffer_add(out, "\"", 1);
}

/* name+suffix, then {lname="lvalue" when there is a label (the caller
 * closes the set, or opens it when there is none). */
static int series(struct evbuffer *out, const char *name, const char *suffix, const char *lname,
		  const char *lvalue)
{
	evbuffer_add_printf(out, "%s%s", name, suffix);
	if (!lname)
		return 0;
	evbuffer_add_printf(out, "{%s=", lname);
	prom_label_value(out, lvalue);
	return 1;
}

void prom_histogram(struct evbuffer *out, const char *name, const char *lname, const char *lvalue,
		    const struct hist *h)
{
	uint64_t cum = 0;

	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		cum += h->n[i];
		evbuffer_add(out, series(out, name, "_bucket", lname, lvalue) ? "," : "{", 1);
		if (i < HIST_FINITE)
			evbuffer_add_printf(out, "le=\"%g\"} %" PRIu64 "\n",
					    hist_bound_ms(i) / 1000.0, cum);
		else
			evbuffer_add_printf(out, "le=\"+Inf\"} %" PRIu64 "\n", cum);
	}
	if (series(out, name, "_sum", lname, lvalue))
		evbuffer_add(out, "}", 1);
	evbuffer_add_printf(out, " %" PRIu64 ".%03u\n", h->sum_ms / 1000,
			    (unsigned)(h->sum_ms % 1000));
	if (series(out, name, "_count", lname, lvalue))
		evbuffer_add(out, "}", 1);
	evbuffer_add_printf(out, " %" PRIu64 "\n", cum);
}

void prom_identity(struct evbuffer *out, const char *daemon, const char *instance_id,
		   uint64_t start_ms)
{
	char name[64];

	snprintf(name, sizeof name, "%s_build_info", daemon);
	prom_family(out, name, "gauge", "1, labelled with the version and the instance id.");
	evbuffer_add_printf(out, "%s{version=", name);
	prom_label_value(out, PACKAGE_VERSION);
	evbuffer_add(out, ",instance_id=", 13);
	prom_label_value(out, instance_id);
	evbuffer_add(out, "} 1\n", 4);
	prom_family(out, "process_start_time_seconds", "gauge",
		    "When the counters of this page began, in seconds since the epoch.");
	evbuffer_add_printf(out, "process_start_time_seconds %" PRIu64 ".%03u\n", start_ms / 1000,
			    (unsigned)(start_ms % 1000));
}
