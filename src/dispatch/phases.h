/*
 * phases.h - the phases a held row goes through, the stages of the
 * dispatcher's life, of its stop, of the sweep of lost claims, of the
 * beat's lane and of one database connection (struct db, db.h), each as
 * one enum and one table of the legal transitions, and the mover that
 * checks each transition against its table and counts it.  Pure (no
 * database, no client, no clock; linked by execdispatch and execctl with
 * db.c): tests/unit/test_phases.c holds the tables to the code's courses.
 *
 * Invariant: a held row changes phase only through held_to, the
 * dispatcher's stages only through life_to, stop_to, sweep_to and beat_to
 * (dispatch_impl.h), a connection only through db_to (db.c), all through
 * phase_move or phase_move_named; a transition not in its
 * table is logged as an error and counted as illegal
 * (execdispatch_illegal_transitions_total; the tree builds its daemons
 * with assert on, so an assert would end a dispatcher that holds rows),
 * and the phase is set anyway, so that the code's own course does not
 * change.
 *
 * The facts of a held row that are not a phase stay fields of struct
 * held: started (written running in the table: a row at the execserver or
 * lost may be either), given_back (its outcome is requeued with no delay),
 * unsure (a statement writing it lost its reply), cut and refused (the
 * form its outcome is written in, cut_outcome).
 */
#ifndef ES_DISPATCH_PHASES_H
#define ES_DISPATCH_PHASES_H

#include <stdint.h>

/* A held row's phase (struct held, dispatch_impl.h). */
enum held_phase {
	HELD_NEW,       /* claimed, its run not handed on yet (start_row) */
	HELD_RUNNING,   /* at the execserver (xj set) or spawned here (lr set) */
	HELD_RELEASING, /* at the execserver, its want parked, given back at a stop */
	HELD_LOST,      /* not ours any more: its run is stopped, its result dropped */
	HELD_DUE,       /* the run ended; its outcome waits to be written (retry_at_ms) */
	HELD_WRITING,   /* its outcome in a statement on the wire (struct fin) */
	HELD_CARRIED,   /* ...in one that also claims: its reservation is the place */
	HELD_ASKING,    /* whether a statement whose reply was lost wrote it (ask_landed) */
	HELD_GONE,      /* freed (held_free): its outcome written, dropped or given up */
	HELD_PHASES
};

/* The legal transitions of a held row, X(from, to), each with where it is
 * made and why. */
#define HELD_TABLE(X)                                                                              \
	X(HELD_NEW, HELD_RUNNING)       /* start_row: handed to libexecclient, or spawned */       \
	X(HELD_NEW, HELD_DUE)           /* start_row: refused, or claimed as a stop began */       \
	X(HELD_RUNNING, HELD_RELEASING) /* release_waiting: a stop gives a parked want back */     \
	X(HELD_RUNNING, HELD_LOST)      /* drop_claim: cancelled or rescued; a stop's timeout */   \
	X(HELD_RELEASING, HELD_LOST)    /* drop_claim: lost while being given back */              \
	X(HELD_RUNNING, HELD_DUE)       /* run_ended: the receipt gives the outcome */             \
	X(HELD_RELEASING, HELD_DUE)     /* run_ended: queued again, the attempt not counted */     \
	X(HELD_LOST, HELD_GONE)         /* run_ended: the result dropped; stop_cb */               \
	X(HELD_RUNNING, HELD_GONE)      /* stop_cb: left held under the instance for the rescue */ \
	X(HELD_RELEASING, HELD_GONE)    /* stop_cb: the same, its cancel not answered */           \
	X(HELD_DUE, HELD_WRITING)       /* fin_build: into a finish statement */                   \
	X(HELD_WRITING, HELD_CARRIED)   /* send_turn: that statement also claims */                \
	X(HELD_WRITING, HELD_DUE)       /* fin_abort: not sent, refused, or its reply lost */      \
	X(HELD_CARRIED, HELD_DUE)       /* fin_abort: the same for a claiming statement */         \
	X(HELD_WRITING, HELD_GONE)      /* fin_apply: written, or its claim found lost */          \
	X(HELD_CARRIED, HELD_GONE)      /* fin_apply: the same for a claiming statement */         \
	X(HELD_WRITING, HELD_ASKING)    /* fin_apply: not ours, but an earlier reply was lost */   \
	X(HELD_CARRIED, HELD_ASKING)    /* fin_apply: the same for a claiming statement */         \
	X(HELD_ASKING, HELD_DUE)  /* on_landed_result: no answer: written again, asked again */    \
	X(HELD_ASKING, HELD_GONE) /* on_landed_result: landed (counted) or not ours (dropped) */   \
	X(HELD_DUE, HELD_GONE)    /* give_up: stopping, not written in time */

/* The dispatcher's life: the first contact (the schema's version, our
 * dispatcher row, the requeue of the rows an earlier run of the instance
 * left: contact.c), then claiming; a rescue that removed our row sends it
 * through registering again and the requeue of what it held (the beat's
 * lane: liveness.c).  Stopping is a machine of its own (enum
 * stop_stage): a stop may begin in any stage.  The first contact's stages come first
 * (first_contact() compares with LIFE_RUNNING). */
enum life_stage {
	LIFE_CHECKING,    /* first contact: the schema's version */
	LIFE_REGISTERING, /* ...our dispatcher row of this life */
	LIFE_FINDING_OWN, /* ...registered; the rows an earlier run left: the look */
	LIFE_REQUEUEING,  /* ...and their requeue */
	LIFE_RUNNING,     /* registered, claiming when admission allows */
	LIFE_RESCUED,     /* our row removed by a rescue: registering again */
	LIFE_OWNING,      /* registered again; the rows left under the instance not requeued yet */
	LIFE_STAGES
};

/* The legal transitions of the dispatcher's life, X(from, to). */
#define LIFE_TABLE(X)                                                                              \
	X(LIFE_CHECKING, LIFE_REGISTERING)    /* contact_step: the schema's version fits */        \
	X(LIFE_REGISTERING, LIFE_FINDING_OWN) /* contact_step: our row written */                  \
	X(LIFE_FINDING_OWN, LIFE_REQUEUEING)  /* contact_step: rows of an earlier run found */     \
	X(LIFE_FINDING_OWN, LIFE_FINDING_OWN) /* contact_retry: the look failed: again later */    \
	X(LIFE_REQUEUEING, LIFE_FINDING_OWN)  /* contact_retry: the requeue failed: look again */  \
	X(LIFE_FINDING_OWN, LIFE_RUNNING)     /* begin: nothing to requeue */                      \
	X(LIFE_REQUEUEING, LIFE_RUNNING)      /* begin: requeued */                                \
	X(LIFE_RUNNING, LIFE_RESCUED)         /* on_beat_result: a rescue removed our row */       \
	X(LIFE_OWNING, LIFE_RESCUED)          /* on_beat_result: the same, its requeue not done */ \
	X(LIFE_RESCUED, LIFE_OWNING)          /* on_reregister_result: our row of a new life */    \
	X(LIFE_OWNING, LIFE_RUNNING) /* on_requeue_own_result: what the instance left requeued */

/* The dispatcher's stop: a signal begins it (signal_cb; a second one ends
 * the loop at once), and once nothing is held, on the wire or waiting, our
 * dispatcher row is deleted (maybe_done_stopping, send_leave), whose
 * answer ends the loop. */
enum stop_stage {
	STOP_NONE,     /* no signal yet */
	STOP_STOPPING, /* giving back what waits, waiting for runs and outcomes */
	STOP_LEAVING,  /* the leave is on the wire: nothing new goes */
	STOP_STAGES
};

#define STOP_TABLE(X)                                                               \
	X(STOP_NONE, STOP_STOPPING)    /* signal_cb: the first SIGTERM or SIGINT */ \
	X(STOP_STOPPING, STOP_LEAVING) /* maybe_done_stopping: nothing left, the leave sent */

/* The sweep of claims lost with their connection (liveness.c): wanted
 * after a claim's reply was lost (and then every staleAfterSec, and
 * whenever a connection is back), out while its probe, its look or its
 * requeue is queued or on the wire.  A sweep out may become moot: the
 * requeue of every row the instance holds (on_requeue_own_result) did its
 * work, so its failure does not want it again.  No claim goes unless the
 * sweep is SWEEP_IDLE (may_claim_now). */
enum sweep_stage {
	SWEEP_IDLE,   /* nothing to sweep */
	SWEEP_WANTED, /* wanted: it goes at the next turn with nothing on the wire */
	SWEEP_OUT,    /* its probe, look or requeue is queued or on the wire */
	SWEEP_MOOT,   /* out, but no longer wanted should it fail */
	SWEEP_STAGES
};

#define SWEEP_TABLE(X)                                                                           \
	X(SWEEP_IDLE, SWEEP_WANTED) /* sweep_want: a claim lost, a connection back, the timer */ \
	X(SWEEP_WANTED, SWEEP_OUT)  /* sweep_sent: the probe or the look queued */               \
	X(SWEEP_OUT, SWEEP_WANTED)  /* sweep_answered: the probe answered, or one failed */      \
	X(SWEEP_OUT, SWEEP_IDLE)    /* sweep_done: the requeue (or a look of none) answered */   \
	X(SWEEP_WANTED, SWEEP_IDLE) /* sweep_moot: every row of the instance requeued */         \
	X(SWEEP_OUT, SWEEP_MOOT)    /* sweep_moot: the same while one is out */                  \
	X(SWEEP_MOOT, SWEEP_OUT)    /* sweep_want: wanted again while it is out */               \
	X(SWEEP_MOOT, SWEEP_IDLE)   /* sweep_answered, sweep_done: its answer */                 \
	X(SWEEP_IDLE, SWEEP_MOOT)   /* sweep_sent: the look after a probe answered when moot */

/* The beat's lane (liveness.c): what of ours is on it, the heartbeat or
 * registering again (at most one: a tick with one out is let pass); the
 * leave at the end goes there too, as STOP_LEAVING. */
enum beat_stage {
	BEAT_IDLE,        /* nothing of the beat's on the lane */
	BEAT_BEATING,     /* DQ_BEAT queued or on the wire */
	BEAT_REGISTERING, /* DQ_REGISTER (our row was gone) queued or on the wire */
	BEAT_STAGES
};

#define BEAT_TABLE(X)                                                                 \
	X(BEAT_IDLE, BEAT_BEATING)     /* send_beat: the heartbeat queued */          \
	X(BEAT_IDLE, BEAT_REGISTERING) /* beat_cb: our row gone, registering again */ \
	X(BEAT_BEATING, BEAT_IDLE)     /* beat_answered: on_beat_result */            \
	X(BEAT_REGISTERING, BEAT_IDLE) /* beat_answered: on_reregister_result */

/* One database connection (struct db, db.c): away (no connection; the
 * next attempt once the back-off has passed), connecting (an attempt
 * under way: non-blocking on the loop, or db_ready's blocking one),
 * idle (up, nothing on the wire), busy (up, a db_send statement sent and
 * its result not all read).  The callback of a statement read or failed
 * but not delivered yet is not a state of the connection (db_busy). */
enum db_state {
	DB_AWAY,       /* conn NULL */
	DB_CONNECTING, /* conn: the attempt (db_connect, or PQconnectdbParams) */
	DB_IDLE,       /* conn up, no statement on the wire */
	DB_BUSY,       /* conn up, a db_send statement on the wire */
	DB_STATES
};

#define DB_TABLE(X)                                                                             \
	X(DB_AWAY, DB_CONNECTING) /* db_ready: the back-off has passed, an attempt begins */    \
	X(DB_CONNECTING, DB_IDLE) /* connected: the attempt succeeded */                        \
	X(DB_CONNECTING, DB_AWAY) /* went_away: every host failed, or timed out; db_close */    \
	X(DB_IDLE, DB_BUSY)       /* db_send: a statement sent */                               \
	X(DB_BUSY, DB_IDLE)       /* progress: its result read */                               \
	X(DB_BUSY, DB_AWAY)       /* went_away: lost, or abandoned at its deadline; db_close */ \
	X(DB_IDLE, DB_AWAY)       /* went_away: lost by db_exec, a send, or a result; db_close */

/* One table of a state machine: its name (in log lines), the names of its
 * states, and the legal transitions as a bit per (from, to). */
struct phase_table {
	const char *what;
	int n;
	const char *const *names;
	const uint8_t *legal; /* n * n: legal[from * n + to] */
};

#define PHASES_MAX 12 /* the most states of one table */

/* The transitions made, per (from, to), and the illegal ones among them. */
struct phase_counts {
	uint64_t moves[PHASES_MAX][PHASES_MAX];
	uint64_t illegal;
};

extern const struct phase_table held_phases, life_stages, stop_stages, sweep_stages, beat_stages,
	db_states;

const char *phase_name(const struct phase_table *t, int phase);
int phase_legal(const struct phase_table *t, int from, int to);

/* *at becomes to and the transition is counted in c->moves; one not in t
 * is also counted in c->illegal and logged as an error naming id (the
 * row's job id).  0 when legal, -1 when not. */
int phase_move(const struct phase_table *t, struct phase_counts *c, int *at, int to, long long id);
/* The same for a machine named by a string (a connection's lane: "hot1",
 * "beat"...) rather than a number. */
int phase_move_named(const struct phase_table *t, struct phase_counts *c, int *at, int to,
		     const char *name);

#endif
