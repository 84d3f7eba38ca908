/*
 * dispatch_impl.h - the objects of execdispatch's loop and the calls
 * between its files (private to src/dispatch): the dispatcher's state
 * (struct dispatcher), the rows it holds (struct held), the hot path's
 * statements (struct turn, struct fin).  The invariants are dispatcher.c's
 * (its opening comment).
 *
 * The files of the loop, top to bottom: each calls only the files below
 * it (tests/dispatch_calls.sh checks it; a lower file that must tell an
 * upper one something sets a flag or an event the upper one acts on):
 *   dispatcher.c  the setup, the turn (poll_cb), the wiring of every timer,
 *                 signal and connection callback
 *   contact.c     the start's first contact: schema version, register,
 *                 our earlier life's rows found and requeued, begin
 *   liveness.c    a life's identity; register, find-own and requeue
 *                 (parameters and answers, used at the start and after a
 *                 rescue); the heartbeat, registering again, the rescue;
 *                 the sweep of lost claims
 *   hot.c         admission's figures, the turns (finish and claim on the
 *                 hot connections) and their results, limbo, local claims
 *   runs.c        a claimed row's run: submitted or spawned, its end, the
 *                 outcome from its receipt, its POSITIONs
 *   watch.c       start writes, the cancel poll, positions written
 *   outcomes.c    the finish statement's arrays and result, the landed
 *                 check, the flush, the cut-down, the give-up
 *   stopping.c    the signals, the stop and its bound, the leave; the
 *                 janitor
 *   held.c        the held rows' list: due, freed, found, runs stopped
 *
 * Below all of them, calling none of them: phases.c (the state machines:
 * held rows, the life, the stop, the lanes; pure), admission.c (the claim
 * share's arithmetic, pure), chores.c (a lane: the queue of chores on one
 * connection), db.c (one database connection: back-off, send, deadline),
 * queries.c (the statements' text in the configured schema); listen.c,
 * local_run.c, metrics.c, migrate.c, dispatch_config.c, retry_policy.c,
 * schedules.c (periodic jobs, on the chores lane), schedule_check.c: see
 * their headers; attempt_end.c (a lost claim's run ended: its attempt's
 * end written, on the chores lane); progress_write.c (the running jobs'
 * progress into their rows, one statement per progressWriteSec).
 * The small helpers and the state moves (life_to, held_to...) are inline
 * below; the prototypes are grouped by file, top to bottom.
 *
 * Words used throughout:
 *   held      a row this dispatcher holds under its claim (struct held)
 *   claim     one taking of a row, named (id, claims): every write carries it
 *   share     the places the execservers offer us (exc_claim_share);
 *             admission keeps the rows held under it
 *   other     the class of services no execserver offers yet, claimed one
 *             row at a time outside the share
 *   turn      one statement of the hot path on a hot connection: the
 *             outcomes due and the claims admission allows (struct turn)
 *   fin       the outcomes of one finish statement (struct fin)
 *   carried   an outcome in a turn that also claims (HELD_CARRIED)
 *   unsure    an outcome whose statement lost its reply: it may be written
 *   landed    the check whether such an outcome was written (ask_landed)
 *   limbo     the places of a claim lost with its connection, kept counted
 *             until a sweep shows what it did (struct limbo)
 *   sweep     the look for claims lost with their connection and their
 *             requeue (sweep_lost_claims)
 *   chore     a statement off the hot path, queued on a lane (chores.h)
 *   lane      a connection with its queue of chores: the chores', the
 *             beat's, the rescue's
 *   contact   the first statements at the start (contact.c)
 *   life      one registration of our dispatcher row; token: its started_at,
 *             in every statement about our row
 *   own       the rows an earlier life left under our instance, requeued
 *             before this life claims (LIFE_FINDING_OWN, LIFE_OWNING)
 *   rescue    the requeue of the rows of dispatchers silent for staleAfterSec
 */
#ifndef ES_DISPATCH_DISPATCH_IMPL_H
#define ES_DISPATCH_DISPATCH_IMPL_H

#include <stdint.h>
#include <sys/time.h>

#include <event2/event.h>

#include <execserver/client.h>

#include "common/clock.h"
#include "dispatch/chores.h"
#include "dispatch/db.h"
#include "dispatch/dispatch_config.h"
#include "dispatch/listen.h"
#include "dispatch/local_run.h"
#include "dispatch/metrics.h"
#include "dispatch/phases.h"
#include "dispatch/timing.h"

#define CLAIM_MAX 100      /* most rows of one claim */
#define START_CHECK_MS 100 /* how often held rows are looked at for a started run */
#define FLUSH_RETRY_MS 250 /* outcomes waiting for the database: retry */
#define JANITOR_SEC 3600
#define JANITOR_BATCH 1000    /* DQ_JANITOR's LIMIT */
#define JANITOR_AGAIN_MS 1000 /* after a full batch */
#define FINISH_BATCH 100      /* most outcomes written by one statement */
#define OUTCOME_RETRY_MS 5000 /* an outcome refused in every form: next try */
#define HOT_CONNS 2           /* connections carrying the hot path's statements */
#define STOP_GIVE_UP_MS 10000 /* stopping: an outcome not written is given up */
#define WAITING_SAY_MS 60000  /* outcomes waiting for the database: said again */
#define CONTACT_CHECK_MS 250  /* start: how often the first contact is looked after */

struct held {
	struct held *next, *prev;
	struct dispatcher *d;
	int64_t id;
	int claim; /* the row's claims at our claim: (id, claim) names it */
	int attempts;
	int priority;
	char *service;
	exc_job *xj;           /* NULL once the run ended */
	struct local_run *lr;  /* a local service's run, or NULL */
	enum held_phase phase; /* changed by held_to alone (phases.h) */
	int started;           /* written as running */
	int given_back;        /* given back at a stop: requeued with no delay */
	/* the outcome, once xj is NULL */
	const char *state; /* "done", "failed", "queued" */
	int uncount;       /* 1: the attempt does not count (no slot) */
	char *error;
	char *receipt; /* JSON text or NULL */
	char job_id[48];
	int local;  /* a local service's row: outside the claim share */
	int unsure; /* a statement writing it lost its reply: it may be written */
	/* an outcome the database refused alone: how far it was cut down
	 * (flush_outcomes), the original kept, and when to try it again */
	int cut;
	const char *orig_state;
	char *orig_error, *orig_receipt;
	int64_t retry_at_ms;
	int said_locked; /* "row locked" said for its start */
	int64_t due_ms;  /* when its outcome was set (waits to be written) */
	int refused;     /* the database refused it in every form (cut_outcome) */
	/* a POSITION not written yet (its row locked by another transaction):
	 * written again at the next cancel poll; position_out: on the wire;
	 * position_gen: counts the positions set, so that the answer for an
	 * older one does not drop a newer one */
	char *position;
	int position_out;
	unsigned position_gen;
	/* its run's latest progress (progress_write.c): not written yet
	 * while progress_dirty */
	double progress;
	char progress_text[201];
	int progress_dirty;
};

/* The outcomes of one finish statement: the rows and their arrays. */
struct fin {
	struct held *rows[FINISH_BATCH];
	int k;
	char ids[21 * FINISH_BATCH + 3], claim[21 * FINISH_BATCH + 3], unc[21 * FINISH_BATCH + 3],
		delay[21 * FINISH_BATCH + 3];
	char *states, *errors, *receipts;
};

/* One statement of the hot path on one of the hot connections (db_send):
 * its outcomes, and the claims it may make.  What it may claim is
 * reserved against admission from its send until its result is handled
 * (on_turn_result), so that the rows at the execservers plus the claims on the
 * wire never exceed the claim share (docs/dispatch.md, "The event loop"). */
struct turn {
	struct dispatcher *d;
	struct db *db;
	struct fin fin;
	int claims;     /* it claims (its reservation below is held) */
	unsigned bound; /* rows of services with a share it may claim */
	unsigned total; /* all it may claim (bound + the other class) */
	int other;      /* it may claim a row of the "other" class */
	unsigned life;  /* d->life when it was sent */
	size_t k;       /* per service: names (into d->services), limits */
	const char **names;
	int64_t *lims;
};

/* The statements the dispatcher sends, each named by its Q_ (d->sql[Q_x],
 * filled by expand_all from the DQ_ text of queries.h it names). */
enum q {
	Q_REGISTER,     /* DQ_REGISTER */
	Q_BEAT,         /* DQ_BEAT */
	Q_RESCUE,       /* DQ_RESCUE */
	Q_FIND_OWN,     /* DQ_FIND_OWN */
	Q_FIND_LOST,    /* DQ_FIND_LOST */
	Q_REQUEUE,      /* DQ_REQUEUE_CLAIMS */
	Q_CLAIM,        /* DQ_CLAIM */
	Q_START,        /* DQ_START */
	Q_FINISH,       /* DQ_FINISH */
	Q_HELD,         /* DQ_HELD */
	Q_LEAVE,        /* DQ_LEAVE */
	Q_JANITOR,      /* DQ_JANITOR */
	Q_POSITION,     /* DQ_POSITION */
	Q_FINISH_CLAIM, /* DQ_FINISH_CLAIM */
	Q_CLAIM_EXEC,   /* DQ_CLAIM_EXEC */
	Q_LANDED,       /* DQ_LANDED */
	Q_VERSION,      /* DQ_SCHEMA_VERSION */
	Q_SETTLED,      /* DQ_CLAIMS_SETTLED */
	Q_ENDED,        /* DQ_ATTEMPT_ENDED */
	Q_PROGRESS,     /* DQ_PROGRESS_WRITE */
	Q_COUNT
};

/* The reservation of a claim lost with its connection (on_turn_result): its
 * backend may still commit it, so its places stay counted by admission
 * (held_of) until a probe of our dispatcher row finds no statement of ours
 * holding it (the backend committed or ended: limbo_probed) and the sweep
 * after the probe has requeued what such a claim left (on_sweep_result). */
struct limbo {
	unsigned total; /* all it may have claimed */
	int other;      /* it may have claimed a row of the "other" class */
	size_t k;       /* per service, as struct turn's */
	const char **names;
	int64_t *lims;
};

struct dispatcher {
	const struct dispatch_config *cfg;
	struct event_base *base;
	exc_client *client;
	struct db db;
	char *sql[Q_COUNT]; /* each statement in the configured schema (expand_all) */
	char host[65];
	char pid[16];
	struct held *list;
	struct phase_counts held_moves; /* the held rows' transitions (held_to) */
	unsigned at_exec;               /* held rows whose xj is set */
	unsigned claimed_unstarted;     /* at the execserver, not yet written running */
	unsigned pending;               /* outcomes waiting to be written */
	struct event *poll_ev, *beat_ev, *cancel_ev, *start_ev, *flush_ev, *janitor_ev;
	struct event *sig_term, *sig_int, *sig_hup;
	struct event *stop_ev; /* stopping: runs still going are left for the rescue then */
	/* the client id the execservers see: the instanceId and a random tag
	 * of this process (make_client_id; docs/dispatch.md, "Identity") */
	char client_id[EXC_CLIENT_ID_MAX + 1];
	int64_t beat_ok_ms; /* monotonic time of the last written heartbeat */
	/* this life's token: our dispatcher row's started_at as we set it
	 * (new_token), in every statement about our row; life counts the
	 * registrations lost (a claim sent in an earlier one is not run);
	 * stage: where the life is (changed by life_to alone, phases.h): in
	 * LIFE_OWNING (registered again, the requeue of the rows the instance
	 * left, DQ_FIND_OWN then DQ_REQUEUE_CLAIMS, not done yet) no claim
	 * and no sweep goes; own_out: its look or its requeue is queued or out
	 * (a fact beside the stage, not a stage: a rescue may end LIFE_OWNING
	 * while one is out, whose answer, of an earlier life, still clears it) */
	char token[48];
	unsigned life;
	enum life_stage stage;
	struct phase_counts life_moves; /* the stages' transitions (life_to) */
	int own_out;
	enum stop_stage stop;           /* changed by stop_to alone (phases.h) */
	struct phase_counts stop_moves; /* its transitions */
	int64_t give_up_ms; /* stopping: outcomes refused in every form are given up then */
	int gave_up;        /* outcomes or runs were given up: our row stays for the rescue */
	int exit_status;
	int said_stale;
	int said_login_retry; /* PgBouncer's login retry said (say_login_retry) */
	/* no execserver connected: the last reason a connection failed or
	 * closed, and when "claiming nothing" was said last */
	char exec_why[300];
	int64_t no_exec_said_ms;
	unsigned rnd;
	struct dispatch_stats st;
	/* transitions of its own machines not in their table (move_to);
	 * st.illegal_transitions adds its connections' (db.h) */
	uint64_t illegal;
	struct metrics *metrics;
	struct listener *listener; /* notify: true */
	char *local_names;         /* the local services as a text[] literal */
	char **services;           /* exec-bound services seen in claims */
	size_t nservices;
	size_t rotate;          /* which service goes first in the next claim */
	int64_t other_due_ms;   /* the "other" class is looked for from then on */
	unsigned local_running; /* held rows of local services running */
	struct event *sig_chld;
	/* the hot path's statements on the wire, one per hot connection
	 * (db, db2); poll_again: poll_cb ran while both were busy */
	struct db db2;
	struct turn turns[HOT_CONNS];
	int poll_again;
	/* the sweep of lost claims: wanted, out (changed by sweep_to alone,
	 * through sweep_want, sweep_sent, sweep_answered, sweep_done and
	 * sweep_moot; phases.h) */
	enum sweep_stage sweep;
	struct phase_counts sweep_moves; /* its transitions */
	/* a claim was lost with its connection: its backend may commit it at
	 * any later time, so the sweep runs every staleAfterSec from then on
	 * (swept_ms: the last one answered); a fact that stays, not a stage */
	int lost_claims;
	int64_t swept_ms;
	/* the reservations of the claims lost with their connections, oldest
	 * first; limbo_probed: the first ones the sweep on the wire frees
	 * when it answers (its probe found our row held by nobody) */
	struct limbo *limbo;
	size_t nlimbo, limbo_probed;
	/* the statements off the hot path (chores.h); each flag: a chore of
	 * that kind is queued or on the wire, so that no kind piles up (one
	 * bit each, independent of the others: a flag is the whole state; the
	 * sweep, which has more, is enum sweep_stage, and the beat's lane,
	 * which carries two kinds, enum beat_stage) */
	struct chores *chores;
	int start_out, cancel_out, local_out, flush_out;
	/* the heartbeat's own lane: the beat and registering again,
	 * statements of the dispatcher table alone, and at the end the leave
	 * (which also requeues what the stop left held), on a connection no other
	 * statement (or its lock wait) can hold; the rescue follows each
	 * written beat on a lane of its own (it may wait for a lock on job:
	 * the next beat does not wait with it); rescue_out: on the wire */
	struct chores *beat_lane;
	enum beat_stage beat;           /* on it: changed by beat_to alone (phases.h) */
	struct phase_counts beat_moves; /* its transitions */
	struct chores *rescue_lane;
	int rescue_out;
	int said_put_off; /* "rescue put off" said since the last rescue done */
	/* outcomes waiting for a database that is away: since, last said */
	int64_t waiting_since_ms, waiting_said_ms;
	int flush_per;        /* flush_outcomes: rows per statement (1 after a refusal) */
	struct fin flush_fin; /* flush_outcomes' statement */
	/* start: the first contact on the main connection (contact_cb) */
	struct event *contact_ev;
	struct event *progress_ev; /* progress_write.c: the next write, armed by a new value */
	int64_t contact_t0_ms;
	int contact_failed;       /* failed attempts said (contact_cb) */
	int64_t held_since_ms;    /* our row first found held by a fresh heartbeat (held_wait) */
	int64_t contact_retry_ms; /* a statement of it failed: sent again then */
	char *contact_ids, *contact_claims; /* what LIFE_FINDING_OWN found, to requeue */
	struct schedules *schedules;        /* periodic jobs (schedules.h) */
};

/* What the next exec-bound claim may take (DQ_CLAIM_EXEC's parameters). */
struct admission {
	unsigned total; /* rows in all; 0: no claim */
	unsigned bound; /* of them, rows of services with a share */
	unsigned share; /* exc_claim_share, for /metrics */
	char *services; /* text[] of the services seen, each with its limit in */
	char *limits;   /* int[] */
	char other[16]; /* rows of other services: 0 or 1 */
	size_t k;       /* the same as arrays (handed to the turn that claims) */
	const char **names;
	int64_t *lims;
};

/* ---- small helpers ---- */

static inline int64_t now_ms(void)
{
	return (int64_t)clock_mono_ms();
}

static inline void arm(struct event *ev, int64_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000) };

	evtimer_add(ev, &tv);
}

/* pollMs with +-10 % jitter, so that dispatchers started together spread. */
static inline int64_t jittered(struct dispatcher *d, int ms)
{
	return jitter_ms(&d->rnd, ms);
}

/* One transition of one of d's state machines (t, counted in c), from at
 * to to (id names the row or the life in the log): the state it is in
 * after it, to; an illegal one is also counted in d's statistics
 * (phases.h). */
static inline int move_to(struct dispatcher *d, const struct phase_table *t, struct phase_counts *c,
			  int at, int to, long long id)
{
	if (phase_move(t, c, &at, to, id) < 0)
		d->illegal++;
	return at;
}

/* The dispatcher moves to stage to: checked against LIFE_TABLE and
 * counted (phases.h). */
static inline void life_to(struct dispatcher *d, enum life_stage to)
{
	d->stage = (enum life_stage)move_to(d, &life_stages, &d->life_moves, (int)d->stage, (int)to,
					    (long long)d->life);
}

/* The dispatcher's stop moves to to: checked against STOP_TABLE and
 * counted (phases.h). */
static inline void stop_to(struct dispatcher *d, enum stop_stage to)
{
	d->stop = (enum stop_stage)move_to(d, &stop_stages, &d->stop_moves, (int)d->stop, (int)to,
					   (long long)d->life);
}

/* A signal asked the dispatcher to stop (docs/dispatch.md, "Stopping"). */
static inline int stopping(const struct dispatcher *d)
{
	return d->stop != STOP_NONE;
}

/* The first contact is under way (contact.c): nothing else goes. */
static inline int first_contact(const struct dispatcher *d)
{
	return d->stage < LIFE_RUNNING;
}

/* Our dispatcher row of this life is written. */
static inline int is_registered(const struct dispatcher *d)
{
	return d->stage != LIFE_CHECKING && d->stage != LIFE_REGISTERING &&
	       d->stage != LIFE_RESCUED;
}

static inline int beat_fresh(const struct dispatcher *d)
{
	return is_registered(d) && now_ms() - d->beat_ok_ms < d->cfg->stale_after_sec * 1000LL / 2;
}

/* h moves to phase to: checked against HELD_TABLE and counted (phases.h). */
static inline void held_to(struct held *h, enum held_phase to)
{
	h->phase = (enum held_phase)move_to(h->d, &held_phases, &h->d->held_moves, (int)h->phase,
					    (int)to, (long long)h->id);
}

/* The beat's lane moves to to: checked against BEAT_TABLE and counted
 * (phases.h). */
static inline void beat_to(struct dispatcher *d, enum beat_stage to)
{
	d->beat = (enum beat_stage)move_to(d, &beat_stages, &d->beat_moves, (int)d->beat, (int)to,
					   (long long)d->life);
}

/* The sweep moves to to: checked against SWEEP_TABLE and counted
 * (phases.h). */
static inline void sweep_to(struct dispatcher *d, enum sweep_stage to)
{
	d->sweep = (enum sweep_stage)move_to(d, &sweep_stages, &d->sweep_moves, (int)d->sweep,
					     (int)to, (long long)d->life);
}

/* A sweep is wanted (until it has answered), or out. */
static inline int sweep_wanted(const struct dispatcher *d)
{
	return d->sweep == SWEEP_WANTED || d->sweep == SWEEP_OUT;
}

static inline int sweep_is_out(const struct dispatcher *d)
{
	return d->sweep == SWEEP_OUT || d->sweep == SWEEP_MOOT;
}

/* A sweep of lost claims is wanted: it goes at the next turn with no
 * result outstanding (poll_cb), and no claim goes until it has answered. */
static inline void sweep_want(struct dispatcher *d)
{
	if (d->sweep == SWEEP_IDLE)
		sweep_to(d, SWEEP_WANTED);
	else if (d->sweep == SWEEP_MOOT)
		sweep_to(d, SWEEP_OUT);
}

/* A statement of the sweep (its probe or its look) is queued. */
static inline void sweep_sent(struct dispatcher *d)
{
	sweep_to(d, d->sweep == SWEEP_IDLE ? SWEEP_MOOT : SWEEP_OUT);
}

/* A statement of the sweep answered and no other of it is queued: a
 * sweep still wanted goes again at the next turn. */
static inline void sweep_answered(struct dispatcher *d)
{
	if (d->sweep == SWEEP_OUT)
		sweep_to(d, SWEEP_WANTED);
	else if (d->sweep == SWEEP_MOOT)
		sweep_to(d, SWEEP_IDLE);
}

/* The sweep's requeue (or a look that found none) answered: done. */
static inline void sweep_done(struct dispatcher *d)
{
	if (d->sweep != SWEEP_IDLE)
		sweep_to(d, SWEEP_IDLE);
}

/* Every row held under our instance was requeued: no sweep is wanted
 * (one out may still answer). */
static inline void sweep_moot(struct dispatcher *d)
{
	if (d->sweep == SWEEP_WANTED)
		sweep_to(d, SWEEP_IDLE);
	else if (d->sweep == SWEEP_OUT)
		sweep_to(d, SWEEP_MOOT);
}

/* Our heartbeat (or registration) answered: its transaction, which held
 * our dispatcher row, has ended, so the probe of claims in limbo that
 * waited for it (poll_cb: a probe beside it would always find the row
 * held) goes now. */
static inline void beat_answered(struct dispatcher *d)
{
	if (d->beat != BEAT_IDLE)
		beat_to(d, BEAT_IDLE);
	if (sweep_wanted(d) && d->nlimbo)
		event_active(d->poll_ev, EV_TIMEOUT, 0);
}

/* A claim's result was lost with its connection: swept now, and every
 * staleAfterSec from now on (its backend may commit it at any time). */
static inline void claims_lost(struct dispatcher *d)
{
	d->lost_claims = 1;
	sweep_want(d);
}

/* The claims may go: the heartbeat is fresh, the requeue of an earlier
 * life's rows is done, and no sweep of lost claims waits (it waits for
 * every claim on the wire; claims going on would put it off for good). */
static inline int may_claim_now(const struct dispatcher *d)
{
	return beat_fresh(d) && d->stage != LIFE_OWNING && d->sweep == SWEEP_IDLE;
}

/* A statement of the hot path is on the wire (a turn, or the leave). */
static inline int turn_busy(const struct dispatcher *d)
{
	for (int t = 0; t < HOT_CONNS; t++)
		if (db_busy(d->turns[t].db))
			return 1;
	return 0;
}

/* The calls between the files, top to bottom (dispatcher.c calls them
 * all and is called by none). */

/* contact.c: the start's first contact */
void contact_next(struct dispatcher *d);
void contact_forget(struct dispatcher *d);
void contact_cb(evutil_socket_t fd, short what, void *arg);

/* liveness.c: identity, registering, our rows requeued, the beat, the
 * rescue, the sweep */
void new_token(struct dispatcher *d);
void make_client_id(struct dispatcher *d);
void taken_over(struct dispatcher *d);
void register_params(struct dispatcher *d, char *stale, size_t len, const char **params);
int took_register(struct dispatcher *d, PGresult *res, int away, int64_t sent_ms);
int claim_arrays(PGresult *res, char **ids, char **claims);
void requeue_params(struct dispatcher *d, const char *ids, const char *claims, char *maxa,
		    size_t len, const char **params);
void sweep_lost_claims(struct dispatcher *d);
void beat_cb(evutil_socket_t fd, short what, void *arg);
void on_chores_up(void *arg);
void on_beat_lane_up(void *arg);

/* hot.c: admission's figures, the turns, limbo, the local claims */
int admission(struct dispatcher *d, struct admission *a);
void admission_free(struct admission *a);
struct turn *idle_turn(struct dispatcher *d);
void turn_release(struct turn *t);
void limbo_free(struct dispatcher *d, size_t n); /* the n oldest claims in limbo */
int send_turn(struct dispatcher *d, struct turn *t, struct admission *a);
void claim_local(struct dispatcher *d);

/* runs.c: a claimed row's run */
void start_row(struct dispatcher *d, PGresult *res, int row, int col);

/* watch.c: starts written, the cancel poll, positions */
void write_position(struct dispatcher *d, struct held *h);
void start_cb(evutil_socket_t fd, short what, void *arg);
void cancel_cb(evutil_socket_t fd, short what, void *arg);

/* outcomes.c: outcomes written, landed, flushed, cut down, given up */
void outcomes_waiting(struct dispatcher *d, const char *why);
void outcomes_flowing(struct dispatcher *d);
int outcome_due(const struct held *h, int64_t now);
void fin_free_arrays(struct fin *f);
int fin_build(struct dispatcher *d, struct fin *f, int n);
void fin_params(const struct dispatcher *d, const struct fin *f, const char **params);
void fin_abort(struct fin *f, int away);
void count_outcome(struct dispatcher *d, const char *state, int uncount);
void fin_apply(struct dispatcher *d, struct fin *f, PGresult *res, int tagged);
int ask_landed(struct dispatcher *d, const struct held *h);
void flush_outcomes(struct dispatcher *d);
void flush_cb(evutil_socket_t fd, short what, void *arg);

/* stopping.c: the stop, the leave, the janitor */
void maybe_done_stopping(struct dispatcher *d);
void stop_cb(evutil_socket_t fd, short what, void *arg);
void signal_cb(evutil_socket_t sig, short what, void *arg);
void janitor_cb(evutil_socket_t fd, short what, void *arg);

/* progress_write.c: exc_job_on_progress's callback (arg: the held row);
 * the row's progress is written with every other dirty one at most every
 * progressWriteSec.  progress_write_stop frees the timer. */
void progress_note(exc_job *job, double fraction, const char *text, void *arg);
void progress_write_stop(struct dispatcher *d);

/* attempt_end.c: the run of the lost claim (id, claim) ended. */
void attempt_ended(struct dispatcher *d, int64_t id, int claim);

/* held.c: the held rows */
void outcome_pending(struct dispatcher *d, struct held *h);
void held_discard(struct dispatcher *d, struct held *h);
void held_free(struct dispatcher *d, struct held *h);
void drop_claim(struct dispatcher *d, struct held *h, const char *why);
void release_waiting(struct dispatcher *d);
struct held *held_find(struct dispatcher *d, int64_t id, int claim);
void lose_everything(struct dispatcher *d, const char *why);

#endif
