/*
 * test_phases.c - unit tests of the dispatcher's state machines
 * (src/dispatch/phases.c), without a database: every course a held row
 * takes in src/dispatch is legal in HELD_TABLE, and every course of the
 * dispatcher's life, its stop, the sweep of lost claims and the beat's
 * lane in LIFE_TABLE, STOP_TABLE, SWEEP_TABLE and BEAT_TABLE, and of a
 * database connection (db.c) in DB_TABLE; the transitions that would break an
 * invariant are not (a lost row's result written, a row back at the
 * execserver, a freed row moved, a claim before the rows an earlier life
 * left are requeued, a leave without a stop, a sweep out twice or done
 * without being sent, two statements of the beat's lane at once, a
 * statement on a connection not up or beside another); each transition is counted, an illegal one too,
 * with the phase set anyway.
 */
#include "autoconfig.h"

#include <stdint.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "dispatch/phases.h"
#include "suite.h"

/* The legal cells of t: as many as its X list has lines when no line is
 * written twice. */
static int legal_cells(const struct phase_table *t)
{
	int cells = 0;

	for (int from = 0; from < t->n; from++)
		for (int to = 0; to < t->n; to++)
			cells += phase_legal(t, from, to);
	return cells;
}

/* Moves a row at *at along path (ending with -1), each step legal. */
static void walk(struct phase_counts *c, int *at, const int *path)
{
	for (; *path >= 0; path++)
		CU_ASSERT_EQUAL(phase_move(&held_phases, c, at, *path, 1), 0);
}

/* The courses a row takes, each step made and counted once. */
static void test_courses_are_legal(void)
{
	static const int written[] = { HELD_RUNNING, HELD_DUE,  HELD_WRITING,
				       HELD_CARRIED, HELD_GONE, -1 };
	static const int lost_reply[] = { HELD_RUNNING, HELD_DUE,    HELD_WRITING, HELD_DUE,
					  HELD_WRITING, HELD_ASKING, HELD_DUE,     HELD_WRITING,
					  HELD_CARRIED, HELD_ASKING, HELD_GONE,    -1 };
	static const int released[] = { HELD_RUNNING, HELD_RELEASING, HELD_DUE,
					HELD_WRITING, HELD_GONE,      -1 };
	static const int dropped[] = { HELD_RUNNING, HELD_RELEASING, HELD_LOST, HELD_GONE, -1 };
	static const int refused[] = { HELD_DUE, HELD_WRITING, HELD_DUE, HELD_GONE, -1 };
	static const int left[] = { HELD_RUNNING, HELD_GONE, -1 };
	struct phase_counts c;
	int at;

	memset(&c, 0, sizeof c);
	at = HELD_NEW;
	walk(&c, &at, written);
	CU_ASSERT_EQUAL(at, HELD_GONE);
	at = HELD_NEW;
	walk(&c, &at, lost_reply);
	at = HELD_NEW;
	walk(&c, &at, released);
	at = HELD_NEW;
	walk(&c, &at, dropped);
	at = HELD_NEW;
	walk(&c, &at, refused);
	at = HELD_NEW;
	walk(&c, &at, left);
	CU_ASSERT_EQUAL(c.illegal, 0);
	CU_ASSERT_EQUAL(c.moves[HELD_NEW][HELD_RUNNING], 5);
	CU_ASSERT_EQUAL(c.moves[HELD_NEW][HELD_DUE], 1);
	CU_ASSERT_EQUAL(c.moves[HELD_DUE][HELD_WRITING], 6);
	CU_ASSERT_EQUAL(c.moves[HELD_WRITING][HELD_ASKING], 1);
	CU_ASSERT_EQUAL(c.moves[HELD_CARRIED][HELD_ASKING], 1);
	CU_ASSERT_EQUAL(c.moves[HELD_RELEASING][HELD_LOST], 1);
}

/* Each of the n transitions bad[i] (from, to) in t: not legal; moved,
 * it returns -1, sets the phase, and is counted in its cell and as
 * illegal. */
static void refused_all(const struct phase_table *t, const int (*bad)[2], size_t n)
{
	struct phase_counts c;

	memset(&c, 0, sizeof c);
	for (size_t i = 0; i < n; i++) {
		int at = bad[i][0];
		CU_ASSERT_FALSE(phase_legal(t, bad[i][0], bad[i][1]));
		CU_ASSERT_EQUAL(phase_move(t, &c, &at, bad[i][1], 7), -1);
		CU_ASSERT_EQUAL(at, bad[i][1]);
		CU_ASSERT_EQUAL(c.moves[bad[i][0]][bad[i][1]], 1);
		CU_ASSERT_EQUAL(c.illegal, i + 1);
	}
}

/* Transitions that would break an invariant are illegal: each returns
 * -1, is counted as illegal and in its cell, and sets the phase. */
static void test_illegal_counted(void)
{
	static const int bad[][2] = {
		{ HELD_LOST, HELD_DUE },        /* a lost claim's result written */
		{ HELD_LOST, HELD_RUNNING },    /* a lost row run again */
		{ HELD_DUE, HELD_RUNNING },     /* an ended run at the execserver again */
		{ HELD_NEW, HELD_GONE },        /* a claimed row neither run nor written */
		{ HELD_GONE, HELD_DUE },        /* a freed row used */
		{ HELD_DUE, HELD_CARRIED },     /* carried without being in a statement */
		{ HELD_CARRIED, HELD_WRITING }, /* a claiming statement's row un-claimed */
		{ HELD_ASKING, HELD_WRITING },  /* written while the question is out */
		{ HELD_WRITING, HELD_WRITING }, /* in two statements at once */
		{ HELD_RUNNING, HELD_NEW },     /* nothing enters NEW */
	};
	refused_all(&held_phases, bad, sizeof bad / sizeof bad[0]);
}

/* The table's shape: nothing leaves GONE, nothing enters NEW, every
 * phase but NEW is entered and every phase but GONE is left; the count
 * of legal cells is that of HELD_TABLE's lines. */
static void test_table_shape(void)
{
#define ONE(from, to) +1
	const int lines = 0 HELD_TABLE(ONE);
#undef ONE
	int cells = 0;

	for (int from = 0; from < HELD_PHASES; from++) {
		int out = 0, in = 0;
		for (int to = 0; to < HELD_PHASES; to++) {
			cells += phase_legal(&held_phases, from, to);
			out += phase_legal(&held_phases, from, to);
			in += phase_legal(&held_phases, to, from);
		}
		CU_ASSERT_EQUAL(out > 0, from != HELD_GONE);
		CU_ASSERT_EQUAL(in > 0, from != HELD_NEW);
	}
	CU_ASSERT_EQUAL(cells, lines);
	CU_ASSERT_EQUAL(lines, 21);
}

/* The dispatcher's life: the start with and without rows to requeue and
 * a failed requeue, then a rescue that removed our row, twice. */
static void test_life_courses(void)
{
	static const int start[] = { LIFE_REGISTERING, LIFE_FINDING_OWN, LIFE_FINDING_OWN,
				     LIFE_REQUEUEING,  LIFE_FINDING_OWN, LIFE_REQUEUEING,
				     LIFE_RUNNING,     LIFE_RESCUED,     LIFE_OWNING,
				     LIFE_RESCUED,     LIFE_OWNING,      LIFE_RUNNING };
	struct phase_counts c;
	int at = LIFE_CHECKING;

	memset(&c, 0, sizeof c);
	for (size_t i = 0; i < sizeof start / sizeof start[0]; i++)
		CU_ASSERT_EQUAL(phase_move(&life_stages, &c, &at, start[i], 0), 0);
	CU_ASSERT_EQUAL(at, LIFE_RUNNING);
	CU_ASSERT_EQUAL(c.illegal, 0);
	CU_ASSERT_EQUAL(c.moves[LIFE_RESCUED][LIFE_OWNING], 2);
	CU_ASSERT_EQUAL(c.moves[LIFE_FINDING_OWN][LIFE_FINDING_OWN], 1);
	CU_ASSERT_EQUAL(c.moves[LIFE_REQUEUEING][LIFE_FINDING_OWN], 1);
#define ONE(from, to) +1
	const int lines = 0 LIFE_TABLE(ONE);
#undef ONE
	CU_ASSERT_EQUAL(legal_cells(&life_stages), lines);
	CU_ASSERT_EQUAL(lines, 11);
}

/* No claim before the rows an earlier life left are requeued: the
 * stages that would claim early are not reached from before it. */
static void test_life_illegal(void)
{
	static const int bad[][2] = {
		{ LIFE_CHECKING, LIFE_RUNNING },    /* the schema not checked */
		{ LIFE_REGISTERING, LIFE_RUNNING }, /* the earlier run's rows not looked for */
		{ LIFE_RESCUED, LIFE_RUNNING },     /* what the instance left not requeued */
		{ LIFE_RUNNING, LIFE_OWNING },      /* owning without registering again */
		{ LIFE_RUNNING, LIFE_CHECKING },    /* nothing enters CHECKING */
		{ LIFE_RESCUED, LIFE_FINDING_OWN }, /* the first contact is over */
	};
	refused_all(&life_stages, bad, sizeof bad / sizeof bad[0]);
	CU_ASSERT_STRING_EQUAL(phase_name(&life_stages, LIFE_OWNING), "LIFE_OWNING");
}

/* The stop: a signal, then the leave; never back, never leaving without
 * a stop, and a second signal is no transition (it ends the loop). */
static void test_stop(void)
{
	static const int bad[][2] = {
		{ STOP_NONE, STOP_LEAVING },     /* the leave without a stop */
		{ STOP_LEAVING, STOP_STOPPING }, /* back from leaving */
		{ STOP_STOPPING, STOP_NONE },    /* a stop called off */
		{ STOP_STOPPING, STOP_STOPPING } /* a second stop */
	};
	struct phase_counts c;
	int at = STOP_NONE;

	memset(&c, 0, sizeof c);
	CU_ASSERT_EQUAL(phase_move(&stop_stages, &c, &at, STOP_STOPPING, 0), 0);
	CU_ASSERT_EQUAL(phase_move(&stop_stages, &c, &at, STOP_LEAVING, 0), 0);
	CU_ASSERT_EQUAL(c.illegal, 0);
	refused_all(&stop_stages, bad, sizeof bad / sizeof bad[0]);
}

/* The sweep's courses (liveness.c, through the helpers of
 * dispatch_impl.h): wanted, sent (the probe), answered, sent again (the
 * look), done; made moot while out, wanted again; and the moves that
 * would send two sweeps at once or end one never sent are refused. */
static void test_sweep(void)
{
	static const int course[] = { SWEEP_WANTED, SWEEP_OUT,    SWEEP_WANTED, SWEEP_OUT,
				      SWEEP_IDLE,   SWEEP_WANTED, SWEEP_OUT,    SWEEP_MOOT,
				      SWEEP_OUT,    SWEEP_MOOT,   SWEEP_IDLE,   SWEEP_MOOT,
				      SWEEP_IDLE,   SWEEP_WANTED, SWEEP_IDLE };
	static const int bad[][2] = {
		{ SWEEP_IDLE, SWEEP_OUT },     /* out without being wanted or moot */
		{ SWEEP_OUT, SWEEP_OUT },      /* a second sweep beside the first */
		{ SWEEP_WANTED, SWEEP_MOOT },  /* moot without being out */
		{ SWEEP_MOOT, SWEEP_WANTED },  /* wanted with one still out */
		{ SWEEP_WANTED, SWEEP_WANTED } /* a self move: the helpers make none */
	};
	struct phase_counts c;
	int at = SWEEP_IDLE;

	memset(&c, 0, sizeof c);
	for (size_t i = 0; i < sizeof course / sizeof course[0]; i++)
		CU_ASSERT_EQUAL(phase_move(&sweep_stages, &c, &at, course[i], 0), 0);
	CU_ASSERT_EQUAL(at, SWEEP_IDLE);
	CU_ASSERT_EQUAL(c.illegal, 0);
	CU_ASSERT_EQUAL(c.moves[SWEEP_WANTED][SWEEP_OUT], 3);
#define ONE(from, to) +1
	const int lines = 0 SWEEP_TABLE(ONE);
#undef ONE
	CU_ASSERT_EQUAL(legal_cells(&sweep_stages), lines);
	CU_ASSERT_EQUAL(lines, 9);
	refused_all(&sweep_stages, bad, sizeof bad / sizeof bad[0]);
	CU_ASSERT_STRING_EQUAL(phase_name(&sweep_stages, SWEEP_MOOT), "SWEEP_MOOT");
}

/* The beat's lane: one statement of ours at a time, the heartbeat or
 * registering again, and back to idle at its answer; never one beside
 * the other. */
static void test_beat_lane(void)
{
	static const int course[] = { BEAT_BEATING, BEAT_IDLE,    BEAT_REGISTERING,
				      BEAT_IDLE,    BEAT_BEATING, BEAT_IDLE };
	static const int bad[][2] = {
		{ BEAT_BEATING, BEAT_REGISTERING }, /* a register beside a beat */
		{ BEAT_REGISTERING, BEAT_BEATING }, /* a beat before the register answered */
		{ BEAT_BEATING, BEAT_BEATING },     /* a second beat */
		{ BEAT_IDLE, BEAT_IDLE }            /* an answer with nothing out */
	};
	struct phase_counts c;
	int at = BEAT_IDLE;

	memset(&c, 0, sizeof c);
	for (size_t i = 0; i < sizeof course / sizeof course[0]; i++)
		CU_ASSERT_EQUAL(phase_move(&beat_stages, &c, &at, course[i], 0), 0);
	CU_ASSERT_EQUAL(c.illegal, 0);
	CU_ASSERT_EQUAL(c.moves[BEAT_IDLE][BEAT_BEATING], 2);
	refused_all(&beat_stages, bad, sizeof bad / sizeof bad[0]);
}

/* A database connection (db.c): every course its code takes, each step
 * legal and counted once; each line of DB_TABLE is one of them. */
static void test_db_courses(void)
{
	/* connected at once, two statements, lost with one on the wire (or
	 * abandoned at its deadline), a failed attempt, connected again, lost
	 * between statements (db_exec, a send refused), connecting when
	 * closed */
	static const int course[] = { DB_CONNECTING, DB_IDLE, DB_BUSY, DB_IDLE,       DB_BUSY,
				      DB_IDLE,       DB_BUSY, DB_AWAY, DB_CONNECTING, DB_AWAY,
				      DB_CONNECTING, DB_IDLE, DB_AWAY, DB_CONNECTING, DB_AWAY };
	struct phase_counts c;
	int at = DB_AWAY;

	memset(&c, 0, sizeof c);
	for (size_t i = 0; i < sizeof course / sizeof course[0]; i++)
		CU_ASSERT_EQUAL(phase_move_named(&db_states, &c, &at, course[i], "hot1"), 0);
	CU_ASSERT_EQUAL(at, DB_AWAY);
	CU_ASSERT_EQUAL(c.illegal, 0);
	CU_ASSERT_EQUAL(c.moves[DB_AWAY][DB_CONNECTING], 4);
	CU_ASSERT_EQUAL(c.moves[DB_CONNECTING][DB_IDLE], 2);
	CU_ASSERT_EQUAL(c.moves[DB_CONNECTING][DB_AWAY], 2);
	CU_ASSERT_EQUAL(c.moves[DB_IDLE][DB_BUSY], 3);
	CU_ASSERT_EQUAL(c.moves[DB_BUSY][DB_IDLE], 2);
	CU_ASSERT_EQUAL(c.moves[DB_BUSY][DB_AWAY], 1);
	CU_ASSERT_EQUAL(c.moves[DB_IDLE][DB_AWAY], 1);
	/* every line of the table is walked above: a line deleted from
	 * DB_TABLE fails the walk, one added (a state with no course)
	 * fails this count */
	for (int from = 0; from < DB_STATES; from++)
		for (int to = 0; to < DB_STATES; to++)
			CU_ASSERT_EQUAL(phase_legal(&db_states, from, to), c.moves[from][to] > 0);
#define ONE(from, to) +1
	const int lines = 0 DB_TABLE(ONE);
#undef ONE
	CU_ASSERT_EQUAL(legal_cells(&db_states), lines);
	CU_ASSERT_EQUAL(lines, 7);
}

/* A connection: a statement on one not up or beside another, a result
 * with none out, connected without an attempt: refused, counted, and the
 * state set anyway. */
static void test_db_illegal(void)
{
	static const int bad[][2] = {
		{ DB_AWAY, DB_BUSY },       /* a statement sent while away */
		{ DB_CONNECTING, DB_BUSY }, /* ...while connecting */
		{ DB_BUSY, DB_BUSY },       /* a second statement beside the first */
		{ DB_AWAY, DB_IDLE },       /* up without an attempt */
		{ DB_IDLE, DB_IDLE },       /* a result with nothing on the wire */
		{ DB_AWAY, DB_AWAY },       /* lost twice */
		{ DB_IDLE, DB_CONNECTING }, /* an attempt beside a connection up */
		{ DB_BUSY, DB_CONNECTING }  /* ...or with a statement on the wire */
	};
	struct phase_counts c;
	int at = DB_AWAY;

	refused_all(&db_states, bad, sizeof bad / sizeof bad[0]);
	memset(&c, 0, sizeof c);
	CU_ASSERT_EQUAL(phase_move_named(&db_states, &c, &at, DB_BUSY, "beat"), -1);
	CU_ASSERT_EQUAL(at, DB_BUSY);
	CU_ASSERT_EQUAL(c.illegal, 1);
	CU_ASSERT_EQUAL(c.moves[DB_AWAY][DB_BUSY], 1);
	CU_ASSERT_STRING_EQUAL(phase_name(&db_states, DB_CONNECTING), "DB_CONNECTING");
}

/* Out of range: never legal, never counted outside the table, named. */
static void test_out_of_range(void)
{
	struct phase_counts c;
	int at = -1;

	memset(&c, 0, sizeof c);
	CU_ASSERT_FALSE(phase_legal(&held_phases, -1, HELD_DUE));
	CU_ASSERT_FALSE(phase_legal(&held_phases, HELD_DUE, HELD_PHASES));
	CU_ASSERT_EQUAL(phase_move(&held_phases, &c, &at, HELD_DUE, 1), -1);
	CU_ASSERT_EQUAL(c.illegal, 1);
	CU_ASSERT_STRING_EQUAL(phase_name(&held_phases, HELD_ASKING), "HELD_ASKING");
	CU_ASSERT_STRING_EQUAL(phase_name(&held_phases, HELD_PHASES), "(none)");
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "a held row's courses are legal and counted", test_courses_are_legal },
		{ "illegal transitions: refused, counted, phase set", test_illegal_counted },
		{ "the table: no way out of GONE, none into NEW", test_table_shape },
		{ "phases out of range", test_out_of_range },
		{ "the dispatcher's life: its courses are legal", test_life_courses },
		{ "the dispatcher's life: no claim before the requeue", test_life_illegal },
		{ "the stop: a signal, then the leave", test_stop },
		{ "the sweep: wanted, out, done; moot while out", test_sweep },
		{ "the beat's lane: one statement at a time", test_beat_lane },
		{ "a database connection: its courses are legal", test_db_courses },
		{ "a database connection: no statement unless idle", test_db_illegal },
		{ NULL, NULL },
	};
	return run_suite("phases", cases);
}
