/*
 * phases.c - see phases.h: the tables built from their X lists, and the
 * one mover every state machine of the dispatcher goes through.
 */
#include "autoconfig.h"
#include "dispatch/phases.h"

#include <stdio.h>

#include "common/log.h"

#define NAME(p) [p] = #p,
#define CELL(from, to, n) [(from) * (n) + (to)] = 1,

static const char *const held_names[HELD_PHASES] = { NAME(HELD_NEW) NAME(HELD_RUNNING) NAME(
	HELD_RELEASING) NAME(HELD_LOST) NAME(HELD_DUE) NAME(HELD_WRITING) NAME(HELD_CARRIED)
							     NAME(HELD_ASKING) NAME(HELD_GONE) };

#define HELD_CELL(from, to) CELL(from, to, HELD_PHASES)
static const uint8_t held_legal[HELD_PHASES * HELD_PHASES] = { HELD_TABLE(HELD_CELL) };

const struct phase_table held_phases = { "job", HELD_PHASES, held_names, held_legal };

static const char *const life_names[LIFE_STAGES] = { NAME(LIFE_CHECKING) NAME(
	LIFE_REGISTERING) NAME(LIFE_FINDING_OWN) NAME(LIFE_REQUEUEING) NAME(LIFE_RUNNING)
							     NAME(LIFE_RESCUED) NAME(LIFE_OWNING) };

#define LIFE_CELL(from, to) CELL(from, to, LIFE_STAGES)
static const uint8_t life_legal[LIFE_STAGES * LIFE_STAGES] = { LIFE_TABLE(LIFE_CELL) };

const struct phase_table life_stages = { "dispatcher", LIFE_STAGES, life_names, life_legal };

static const char *const stop_names[STOP_STAGES] = { NAME(STOP_NONE) NAME(STOP_STOPPING)
							     NAME(STOP_LEAVING) };

#define STOP_CELL(from, to) CELL(from, to, STOP_STAGES)
static const uint8_t stop_legal[STOP_STAGES * STOP_STAGES] = { STOP_TABLE(STOP_CELL) };

const struct phase_table stop_stages = { "dispatcher stop", STOP_STAGES, stop_names, stop_legal };

static const char *const sweep_names[SWEEP_STAGES] = { NAME(SWEEP_IDLE) NAME(SWEEP_WANTED)
							       NAME(SWEEP_OUT) NAME(SWEEP_MOOT) };

#define SWEEP_CELL(from, to) CELL(from, to, SWEEP_STAGES)
static const uint8_t sweep_legal[SWEEP_STAGES * SWEEP_STAGES] = { SWEEP_TABLE(SWEEP_CELL) };

const struct phase_table sweep_stages = { "dispatcher sweep", SWEEP_STAGES, sweep_names,
					  sweep_legal };

static const char *const beat_names[BEAT_STAGES] = { NAME(BEAT_IDLE) NAME(BEAT_BEATING)
							     NAME(BEAT_REGISTERING) };

#define BEAT_CELL(from, to) CELL(from, to, BEAT_STAGES)
static const uint8_t beat_legal[BEAT_STAGES * BEAT_STAGES] = { BEAT_TABLE(BEAT_CELL) };

const struct phase_table beat_stages = { "dispatcher beat lane", BEAT_STAGES, beat_names,
					 beat_legal };

static const char *const db_names[DB_STATES] = { NAME(DB_AWAY) NAME(DB_CONNECTING) NAME(DB_IDLE)
							 NAME(DB_BUSY) };

#define DB_CELL(from, to) CELL(from, to, DB_STATES)
static const uint8_t db_legal[DB_STATES * DB_STATES] = { DB_TABLE(DB_CELL) };

const struct phase_table db_states = { "database connection", DB_STATES, db_names, db_legal };

_Static_assert(LIFE_STAGES <= PHASES_MAX, "struct phase_counts holds the life's table");
_Static_assert(HELD_PHASES <= PHASES_MAX, "struct phase_counts holds the held row's table");

const char *phase_name(const struct phase_table *t, int phase)
{
	return phase >= 0 && phase < t->n && t->names[phase] ? t->names[phase] : "(none)";
}

int phase_legal(const struct phase_table *t, int from, int to)
{
	return from >= 0 && from < t->n && to >= 0 && to < t->n && t->legal[from * t->n + to];
}

/* *at becomes to, counted; an illegal one is logged naming the machine by
 * label ("job 12", "database connection (hot1)"). */
static int move(const struct phase_table *t, struct phase_counts *c, int *at, int to,
		const char *label)
{
	int from = *at, ok = phase_legal(t, from, to);

	if (from >= 0 && from < t->n && to >= 0 && to < t->n)
		c->moves[from][to]++;
	*at = to;
	if (ok)
		return 0;
	c->illegal++;
	log_error("%s: illegal transition %s -> %s (a bug: reported, and the code goes on)", label,
		  phase_name(t, from), phase_name(t, to));
	return -1;
}

int phase_move(const struct phase_table *t, struct phase_counts *c, int *at, int to, long long id)
{
	char label[96];

	if (phase_legal(t, *at, to))
		return move(t, c, at, to, "");
	snprintf(label, sizeof label, "%s %lld", t->what, id);
	return move(t, c, at, to, label);
}

int phase_move_named(const struct phase_table *t, struct phase_counts *c, int *at, int to,
		     const char *name)
{
	char label[96];

	if (phase_legal(t, *at, to))
		return move(t, c, at, to, "");
	snprintf(label, sizeof label, "%s (%s)", t->what, name);
	return move(t, c, at, to, label);
}
