/*
 * schedules.c - see schedules.h.  The times are the database's: the due
 * look answers now() in whole seconds and every occurrence is computed
 * from it, so dispatchers whose clocks disagree still agree on what is
 * due.  Each row's statement carries the row's next_run_at and
 * updated_at as read (microseconds): a row another dispatcher moved on,
 * or a schedule() replaced, meanwhile is left alone.  Every statement
 * locks its row with SKIP LOCKED: the chores lane never waits for a
 * schedule's lock (a row held elsewhere is looked at again next pass).
 * A fire that fails other than by a refusal of its job moves the row's
 * back-off on (DQ_SCHED_FAILED); the due look leaves it out until then.
 */
#include "autoconfig.h"
#include "dispatch/schedules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cron.h"
#include "common/log.h"
#include "dispatch/dispatch_impl.h"
#include "dispatch/queries.h"
#include "dispatch/schedule_check.h"

#define SCHEDULE_ROW_NAME_MAX 65 /* a schedule's name (64) and its '\0' */
/* schedules_latest: how far before now the walk may start, widest last
 * (an hour, a day, a month and a bit, a year and a bit, eight years: a
 * Feb 29), and the most cron_next calls of one walk */
static const time_t windows[] = { 3600, 86400, 32 * 86400, 367 * 86400, 8 * 367 * 86400 };
#define WALK_MAX 20000

struct schedules {
	struct dispatcher *d;
	struct event *ev;
	char *q_due, *q_first, *q_fire, *q_refuse, *q_failed;
	int out;           /* a pass is queued or on the wire (its rows' statements too) */
	int rows_out;      /* the rows' statements not answered yet */
	int again;         /* the pass changed rows: the next one at once */
	int failed;        /* a statement of the pass failed: the next one after the period */
	long long wake_ms; /* the due look's wake_ms, -1: none */
};

time_t schedules_latest(const struct cron *c, const char *tz, time_t next, time_t now)
{
	char err[200];

	for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++) {
		time_t from = now - windows[w], t, n;

		if (from < next - 1)
			from = next - 1;
		if (cron_next(c, tz, from, &t, err, sizeof err) < 0 || t > now) {
			if (from == next - 1)
				break; /* the whole span [next, now] looked at */
			continue;
		}
		for (int k = 0;
		     k < WALK_MAX && cron_next(c, tz, t, &n, err, sizeof err) == 0 && n <= now; k++)
			t = n;
		return t;
	}
	return next;
}

static void pass_end(struct schedules *s);

/* The period: scheduleCheckSec with +-10 %. */
static int64_t period_ms(struct schedules *s)
{
	return jittered(s->d, s->d->cfg->schedule_check_sec * 1000);
}

static void row_answered(struct schedules *s)
{
	if (--s->rows_out == 0)
		pass_end(s);
}

static void refuse_done(void *arg, PGresult *res, int away, const void *note)
{
	struct schedules *s = arg;

	if (res && PQntuples(res) == 1)
		log_error("schedule %s: refused: %s (set in its error column; schedule() with a "
			  "corrected spec replaces it)",
			  (const char *)note, (const char *)note + SCHEDULE_ROW_NAME_MAX);
	else if (!res) {
		s->failed = 1;
		if (!away)
			log_error("schedule %s: its refusal not written: %s", (const char *)note,
				  chores_db(s->d->chores)->last_error);
	}
	row_answered(s);
}

/* Writes why the row cannot run; note: name (65 bytes) then the reason. */
static void refuse(struct schedules *s, const char *name, const char *updated_us, const char *why)
{
	char note[SCHEDULE_ROW_NAME_MAX + 300] = { 0 };
	const char *params[3] = { name, updated_us, note + SCHEDULE_ROW_NAME_MAX };

	snprintf(note, SCHEDULE_ROW_NAME_MAX, "%s", name);
	snprintf(note + SCHEDULE_ROW_NAME_MAX, sizeof note - SCHEDULE_ROW_NAME_MAX, "%s", why);
	s->rows_out++;
	if (chores_add(s->d->chores, s->q_refuse, 3, params, note, sizeof note, refuse_done, s) <
	    0) {
		s->rows_out--;
		s->failed = 1;
	}
}

static void first_done(void *arg, PGresult *res, int away, const void *note)
{
	struct schedules *s = arg;

	if (res) {
		/* its first occurrence may be due already; nothing written (the
		 * row changed meanwhile): the next pass after the period */
		if (strcmp(PQcmdTuples(res), "0") != 0)
			s->again = 1;
	} else {
		s->failed = 1;
		if (!away)
			log_error("schedule %s: next_run_at not written: %s", (const char *)note,
				  chores_db(s->d->chores)->last_error);
	}
	row_answered(s);
}

/* The FIRE's note: the name, then what refuse and failed need. */
struct fire_note {
	char name[SCHEDULE_ROW_NAME_MAX];
	char updated_us[24];
	char next_us[24];
	char due[32];    /* the occurrence, seconds since the epoch (a parameter) */
	char due_at[32]; /* the same in UTC, for the log */
};

/* The FAILED's note: the name, the occurrence and the fire's error. */
struct failed_note {
	char name[SCHEDULE_ROW_NAME_MAX];
	char due_at[32];
	char why[400];
};

static void failed_done(void *arg, PGresult *res, int away, const void *note_)
{
	struct schedules *s = arg;
	const struct failed_note *note = note_;

	if (res && PQntuples(res) == 1)
		log_error("schedule %s: occurrence %s not submitted (failure %s in a row; tried "
			  "again in %s s): %s",
			  note->name, note->due_at, PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1),
			  note->why);
	else if (res)
		log_error("schedule %s: occurrence %s not submitted (the row changed or is held "
			  "meanwhile; again at the next pass): %s",
			  note->name, note->due_at, note->why);
	else {
		s->failed = 1;
		log_error("schedule %s: occurrence %s not submitted (again at the next pass): %s; "
			  "its back-off not written: %s",
			  note->name, note->due_at, note->why,
			  away ? "connection lost" : chores_db(s->d->chores)->last_error);
	}
	row_answered(s);
}

/* A fire failed other than by a refusal: the row backed off. */
static void backoff(struct schedules *s, const struct fire_note *fn, const char *why)
{
	struct failed_note note;
	char base[16];
	const char *params[4] = { fn->name, fn->updated_us, fn->next_us, base };

	memset(&note, 0, sizeof note);
	snprintf(note.name, sizeof note.name, "%s", fn->name);
	snprintf(note.due_at, sizeof note.due_at, "%s", fn->due_at);
	snprintf(note.why, sizeof note.why, "%s", why);
	snprintf(base, sizeof base, "%d", s->d->cfg->schedule_check_sec);
	s->rows_out++;
	if (chores_add(s->d->chores, s->q_failed, 4, params, &note, sizeof note, failed_done, s) <
	    0) {
		s->rows_out--;
		log_error("schedule %s: occurrence %s not submitted (again at the next pass): %s",
			  fn->name, fn->due_at, why);
	}
}

static void fire_done(void *arg, PGresult *res, int away, const void *note_)
{
	struct schedules *s = arg;
	const struct fire_note *note = note_;
	struct db *db = chores_db(s->d->chores);

	if (res && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0)) {
		s->again = 1;
		log_info("schedule %s: occurrence %s submitted as job %s", note->name, note->due_at,
			 PQgetvalue(res, 0, 0));
	} else if (res && PQntuples(res) == 1 && !strcmp(PQgetvalue(res, 0, 1), "t")) {
		s->again = 1;
		log_warn("schedule %s: occurrence %s is at or before its last_run_at (submitted "
			 "already): next_run_at moved on, nothing submitted",
			 note->name, note->due_at);
	} else if (res) {
		log_debug("schedule %s: occurrence %s submitted by another dispatcher, held by "
			  "another session, or the row changed meanwhile",
			  note->name, note->due_at);
	} else if (!away && (!strncmp(db->sqlstate, "22", 2) || !strncmp(db->sqlstate, "23", 2))) {
		/* the server's message alone: "ERROR:  " and the CONTEXT lines
		 * of the triggers it came through left out */
		const char *msg = db->last_error, *ctx = strstr(msg, " CONTEXT: ");
		char why[300];

		if (!strncmp(msg, "ERROR:  ", 8))
			msg += 8;
		snprintf(why, sizeof why, "job refused: %.*s",
			 ctx && ctx > msg ? (int)(ctx - msg) : (int)strlen(msg), msg);
		refuse(s, note->name, note->updated_us, why);
	} else {
		s->failed = 1;
		if (!away)
			backoff(s, note, db->last_error);
	}
	row_answered(s);
}

/* One row of the due look: its statement queued. */
static void act_on(struct schedules *s, PGresult *res, int row, time_t now)
{
	const char *name = PQgetvalue(res, row, 2), *spec = PQgetvalue(res, row, 3),
		   *tz = PQgetvalue(res, row, 4), *updated_us = PQgetvalue(res, row, 6);
	char err[200], why[300] = "cron: refused", when[24];
	struct cron c;
	time_t next;

	if (schedule_check(spec, tz, why, sizeof why) < 0 ||
	    cron_parse(spec, &c, err, sizeof err) < 0) {
		refuse(s, name, updated_us, why);
		return;
	}
	if (PQgetisnull(res, row, 5)) {
		/* new or replaced: the first occurrence after its schedule()
		 * and after the last one submitted (never one again) */
		time_t from = (time_t)strtoll(PQgetvalue(res, row, 7), NULL, 10);
		const char *params[3] = { name, updated_us, when };

		if (!PQgetisnull(res, row, 8)) {
			time_t last = (time_t)strtoll(PQgetvalue(res, row, 8), NULL, 10);
			if (last > from)
				from = last;
		}
		if (cron_next(&c, tz, from, &next, err, sizeof err) < 0) {
			snprintf(why, sizeof why, "cron: %s", err);
			refuse(s, name, updated_us, why);
			return;
		}
		snprintf(when, sizeof when, "%lld", (long long)next);
		s->rows_out++;
		if (chores_add(s->d->chores, s->q_first, 3, params, name, strlen(name) + 1,
			       first_done, s) < 0) {
			s->rows_out--;
			s->failed = 1;
		}
		return;
	}
	/* due: the latest occurrence not after now stands for all missed */
	long long next_us = strtoll(PQgetvalue(res, row, 5), NULL, 10);
	time_t old = (time_t)(next_us >= 0 ? next_us / 1000000 : (next_us - 999999) / 1000000);
	time_t due = schedules_latest(&c, tz, old, now);
	struct fire_note note;

	if (cron_next(&c, tz, now, &next, err, sizeof err) < 0) {
		snprintf(why, sizeof why, "cron: %s", err);
		refuse(s, name, updated_us, why);
		return;
	}
	memset(&note, 0, sizeof note);
	snprintf(note.name, sizeof note.name, "%s", name);
	snprintf(note.updated_us, sizeof note.updated_us, "%s", updated_us);
	snprintf(note.next_us, sizeof note.next_us, "%s", PQgetvalue(res, row, 5));
	snprintf(note.due, sizeof note.due, "%lld", (long long)due);
	struct tm tm;
	if (!gmtime_r(&due, &tm) ||
	    !strftime(note.due_at, sizeof note.due_at, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(note.due_at, sizeof note.due_at, "%s", note.due);
	snprintf(when, sizeof when, "%lld", (long long)next);
	const char *params[5] = { name, updated_us, PQgetvalue(res, row, 5), note.due, when };
	s->rows_out++;
	if (chores_add(s->d->chores, s->q_fire, 5, params, &note, sizeof note, fire_done, s) < 0) {
		s->rows_out--;
		s->failed = 1;
	}
}

static void due_done(void *arg, PGresult *res, int away, const void *note)
{
	struct schedules *s = arg;

	(void)note;
	s->wake_ms = -1;
	if (!res) {
		s->failed = 1;
		if (!away)
			log_error("schedules: %s", chores_db(s->d->chores)->last_error);
		pass_end(s);
		return;
	}
	time_t now = (time_t)strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	if (!PQgetisnull(res, 0, 1))
		s->wake_ms = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
	s->rows_out = 1; /* this pass's own, given back below */
	for (int i = 0; i < PQntuples(res); i++)
		if (!PQgetisnull(res, i, 2))
			act_on(s, res, i, now);
	row_answered(s);
}

static void pass_end(struct schedules *s)
{
	int64_t ms = period_ms(s);

	s->out = 0;
	if (!s->failed && s->again)
		ms = 0;
	else if (!s->failed && s->wake_ms >= 0 && s->wake_ms < ms)
		ms = s->wake_ms + 5; /* a little after it: now() has passed it then */
	s->again = s->failed = 0;
	arm(s->ev, ms);
}

static void pass_cb(evutil_socket_t fd, short what, void *arg)
{
	struct schedules *s = arg;

	(void)fd;
	(void)what;
	if (stopping(s->d) || s->out)
		return;
	if (first_contact(s->d)) {
		arm(s->ev, CONTACT_CHECK_MS);
		return;
	}
	s->out = 1;
	s->again = s->failed = 0;
	if (chores_add(s->d->chores, s->q_due, 0, NULL, NULL, 0, due_done, s) < 0) {
		s->out = 0;
		arm(s->ev, period_ms(s));
	}
}

struct schedules *schedules_start(struct dispatcher *d)
{
	struct schedules *s = calloc(1, sizeof *s);
	const char *schema = d->cfg->schema;

	if (!s)
		return NULL;
	s->d = d;
	s->wake_ms = -1;
	if (!(s->q_due = dq_expand(DQ_SCHED_DUE, schema)) ||
	    !(s->q_first = dq_expand(DQ_SCHED_FIRST, schema)) ||
	    !(s->q_fire = dq_expand(DQ_SCHED_FIRE, schema)) ||
	    !(s->q_refuse = dq_expand(DQ_SCHED_REFUSE, schema)) ||
	    !(s->q_failed = dq_expand(DQ_SCHED_FAILED, schema)) ||
	    !(s->ev = evtimer_new(d->base, pass_cb, s))) {
		schedules_stop(s);
		return NULL;
	}
	arm(s->ev, CONTACT_CHECK_MS);
	return s;
}

void schedules_stop(struct schedules *s)
{
	if (!s)
		return;
	if (s->ev)
		event_free(s->ev);
	free(s->q_due);
	free(s->q_first);
	free(s->q_fire);
	free(s->q_refuse);
	free(s->q_failed);
	free(s);
}
