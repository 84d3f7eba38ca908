/*
 * progress_write.c - the progress of the jobs this dispatcher runs, into
 * their rows (docs/dispatch.md, "Progress of running jobs").
 *
 * libexecclient hands each job's latest progress to progress_note (at
 * most 4 a second per job); it is kept in the held row and marked dirty.
 * The first dirty value arms a timer of progressWriteSec; when it fires,
 * every dirty row that is written as running goes into ONE statement
 * (DQ_PROGRESS_WRITE, a chore), guarded by each row's claim.  So the
 * database sees at most one progress statement per progressWriteSec per
 * dispatcher, however many jobs report.  A value is a hint: one the
 * statement did not write (the database away, the row locked) is not sent
 * again; the job's next value is.
 */
#include "autoconfig.h"

#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "common/json_text.h"
#include "common/log.h"
#include "common/utf8.h"
#include "dispatch/dispatch_impl.h"
#include "dispatch/queries.h"

static void progress_written(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;
	(void)note;
	if (!res && !away)
		log_warn("progress of running jobs not written: %s",
			 chores_db(d->chores)->last_error);
}

static void write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dispatcher *d = arg;
	struct json_object *rows = json_object_new_array();
	size_t n = 0;
	(void)fd;
	(void)what;

	for (struct held *h = d->list; h && rows; h = h->next) {
		if (!h->progress_dirty || !h->started || !h->xj)
			continue;
		struct json_object *r = json_object_new_object(), *p = json_object_new_object();
		json_object_object_add(r, "id", json_object_new_int64(h->id));
		json_object_object_add(r, "claims", json_object_new_int(h->claim));
		json_object_object_add(p, "fraction", json_fraction(h->progress));
		if (h->progress_text[0])
			json_object_object_add(p, "text", json_object_new_string(h->progress_text));
		json_object_object_add(r, "progress", p);
		json_object_array_add(rows, r);
		h->progress_dirty = 0;
		n++;
	}
	if (n) {
		const char *params[2] = { d->cfg->instance_id,
					  json_object_to_json_string_ext(rows,
									 JSON_C_TO_STRING_PLAIN) };
		chores_add(d->chores, d->sql[Q_PROGRESS], 2, params, NULL, 0, progress_written, d);
	}
	json_object_put(rows);
	/* rows written as running since the values came: next time */
	for (struct held *h = d->list; h; h = h->next)
		if (h->progress_dirty && h->xj) {
			struct timeval tv = { d->cfg->progress_write_sec, 0 };
			evtimer_add(d->progress_ev, &tv);
			break;
		}
}

void progress_note(exc_job *job, double fraction, const char *text, void *arg)
{
	struct held *h = arg;
	struct dispatcher *d = h->d;
	(void)job;

	h->progress = fraction;
	/* cut on a character boundary: a cut UTF-8 sequence would make
	 * PostgreSQL refuse the whole batched statement */
	size_t keep = text ? utf8_cut(text, sizeof h->progress_text - 1) : 0;
	memcpy(h->progress_text, text ? text : "", keep);
	h->progress_text[keep] = '\0';
	h->progress_dirty = 1;
	if (!d->progress_ev && !(d->progress_ev = evtimer_new(d->base, write_cb, d)))
		return;
	if (!evtimer_pending(d->progress_ev, NULL)) {
		struct timeval tv = { d->cfg->progress_write_sec, 0 };
		evtimer_add(d->progress_ev, &tv);
	}
}

void progress_write_stop(struct dispatcher *d)
{
	if (d->progress_ev)
		event_free(d->progress_ev);
	d->progress_ev = NULL;
}
