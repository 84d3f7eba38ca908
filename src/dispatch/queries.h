/*
 * queries.h - every statement execdispatch sends, as text with the
 * placeholder @schema@ (dq_expand puts in the configured schema).  The
 * race tests send these very texts from two sessions, so what they prove
 * is about the daemon's own statements.
 *
 * Each statement is one unnamed PQexecParams: no session state (no SET,
 * no advisory lock, no prepared statement, no LISTEN), so they run through
 * a transaction-mode pooler.  Every change of a held row carries its claim
 * (runner_instance, claims, state) in its WHERE clause: claims counts the
 * claims of a row and is never decremented, so (id, claims) names one
 * claim for good (attempts does not: "no slot" gives an attempt back).
 *
 * A dispatcher's row is named by its instance and its life's token, the
 * row's started_at as the dispatcher chose it when registering (one life
 * of a process, until a rescue removes its row): every statement that
 * acts on "my" rows (the claims, the beat, the sweep of lost claims and
 * the requeue of an earlier life's rows, both their look and their
 * requeue, the leave) carries both, and does nothing when that row is not
 * there (another life of the instance
 * took it over, or a rescue removed it).
 */
#ifndef ES_DISPATCH_QUERIES_H
#define ES_DISPATCH_QUERIES_H

/* The text with every @schema@ replaced by "schema" (double-quoted);
 * malloc'd, NULL when out of memory. */
char *dq_expand(const char *text, const char *schema);

/* Highest applied migration: () -> (version) */
extern const char DQ_SCHEMA_VERSION[];

/* Register this dispatcher, or take over a stale row of the same
 * instance, or our own row again (the same token: a register whose reply
 * was lost): ($1 instance, $2 host, $3 pid, $4 staleAfterSec, $5 token)
 * -> one row, or none when another live dispatcher holds the instance. */
extern const char DQ_REGISTER[];

/* The heartbeat: refresh our row, touching no other table (so that no
 * lock on job can hold it back): ($1 instance, $2 token) -> one row, or
 * none when our row is gone (a rescue removed it, or another life of the
 * instance took it over). */
extern const char DQ_BEAT[];

/* The rescue, its own statement and transaction after a written beat:
 * delete the rows of dispatchers silent for staleAfterSec as of the
 * statement's start (now()) and requeue their held jobs (failed with
 * error dispatcher_lost once attempts >= maxAttempts).  It never waits
 * for a row lock: a silent dispatcher one of whose jobs (or its own row)
 * another transaction has locked is left whole for the next heartbeat
 * (put off; one whose row another rescue or a takeover is taking is not
 * counted).  Also requeued: held rows whose instance has no dispatcher
 * row at all (claimed by a dispatcher whose row a rescue deleted after
 * the claim committed, unseen by that rescue's snapshot).
 * ($1 instance, $2 staleAfterSec, $3 maxAttempts)
 * -> (requeued, failed, put off) */
extern const char DQ_RESCUE[];

/* The requeue of claims nobody will run is two statements: a look for
 * them, (id, claims) per row, that changes nothing, then DQ_REQUEUE_CLAIMS
 * of exactly those claims.  One UPDATE of "every held row of the
 * instance [not in my list]" would, run late by the backend of a
 * connection given up (the cancel lost), requeue the claims this
 * dispatcher made since under the same row and token while their jobs
 * run: they would run twice.  A late look changes nothing, and a late
 * requeue touches only the claims it names, which a new claim of the
 * row (claims + 1) is not.
 *
 * After each registration (at start, and again after a rescue removed
 * our row): the held rows an earlier life of this instance left, if our
 * row of this life is there: ($1 instance, $2 token) -> (id, claims) */
extern const char DQ_FIND_OWN[];

/* After a reconnection: the rows claimed by this instance under a claim
 * it does not hold (a claim whose result was lost with the connection),
 * if our row of this life is there: ($1 instance, $2 ids held, $3 their
 * claims, $4 token) -> (id, claims) */
extern const char DQ_FIND_LOST[];

/* Requeue the held rows under exactly the claims named (what DQ_FIND_OWN
 * or DQ_FIND_LOST found; the outcome rule of the rescue), if our row of
 * this life is there (locked FOR KEY SHARE meanwhile): ($1 instance, $2
 * ids[], $3 claims[], $4 maxAttempts, $5 token) -> (id) per row requeued
 * or failed */
extern const char DQ_REQUEUE_CLAIMS[];

/* Claim a batch: ($1 instance, $2 limit, $3 the local services text[],
 * $4 true: claim those, false: the others, $5 the lowest priority,
 * $6 token) -> (id, attempts, priority, service, job, claims, waited:
 * ms from its start_after to the claim); nothing unless our row of this
 * life is there (locked FOR KEY SHARE meanwhile). */
extern const char DQ_CLAIM[];

/* Claim exec-bound rows, each service up to its admission: ($1 instance,
 * $2 services text[], $3 their limits int[], $4 at most this many rows of
 * services not in $2, $5 the local services text[] (never claimed here),
 * $6 token) -> (id, attempts, priority, service, job, claims, waited);
 * nothing unless our row of this life is there, as DQ_CLAIM. */
extern const char DQ_CLAIM_EXEC[];

/* Claimed rows whose run started: ($1 instance, $2 ids[], $3 claims[])
 * -> (id, 1) per row changed, (id, 0) per row still ours that another
 * transaction has locked (not waited for: to be tried again) */
extern const char DQ_START[];

/* The outcomes of claims, a batch in one statement: ($1 instance, $2 ids[],
 * $3 claims[], $4 states[] (done, failed, queued), $5 uncount[] (1: the
 * attempt does not count), $6 retry delay sec[], $7 errors[], $8 receipts
 * jsonb[]) -> (id) of the rows whose claim was still ours */
extern const char DQ_FINISH[];

/* DQ_FINISH and DQ_CLAIM_EXEC's claim of the listed services (not the
 * other class) in one statement: ($1..$8 as DQ_FINISH, $9 services
 * text[], $10 limits int[], $11 token; the claim as DQ_CLAIM's) -> ('f', id) per outcome written and ('c', id, attempts,
 * priority, service, job, claims, waited) per row claimed */
extern const char DQ_FINISH_CLAIM[];

/* Whether an outcome whose reply the lost connection took was written:
 * the row carries it under its claim ($1 id, $2 claims, $3 state, $4
 * error, $5 receipt jsonb, $6 instance) -> one row if so */
extern const char DQ_LANDED[];

/* Which held rows are still ours: ($1 instance, $2 ids[]) -> (id,
 * claims, ours 0|1, ms since the cancel's commit for a cancelled row,
 * position asked for in the last 5 s 0|1) */
extern const char DQ_HELD[];

/* The execserver's POSITION of a claimed row, under its claim:
 * ($1 id, $2 instance, $3 claims, $4 position jsonb) -> (written 0|1,
 * ours 0|1); a row another transaction has locked is not waited for
 * (written 0, ours 1: to be written again) */
extern const char DQ_POSITION[];

/* Leave: delete our row of this life and requeue the held rows left
 * under our instance (claims whose result was lost; same outcome rule as
 * the rescue) in the same statement: ($1 instance, $2 token, $3
 * maxAttempts) -> rows requeued */
extern const char DQ_LEAVE[];

/* Retention janitor: ($1 days) delete at most 1000 finished rows older;
 * a row another transaction has locked is skipped, never waited for (the
 * chores queued behind the janitor, the heartbeat among them, would wait
 * with it). */
extern const char DQ_JANITOR[];

/* The queue's figures for /metrics: () -> (service, state, rows, for
 * queued rows the ms the one due longest has waited), one row per service
 * and state of the rows not finished (metrics.c, every METRICS_QUEUE_MS). */
extern const char DQ_QUEUE_STATS[];

/* DQ_START that may be sent again: ($1 instance, $2 ids[], $3 claims[])
 * -> (id, 1) per row changed or already running under the same claim,
 * (id, 0) per row still claimed that another transaction has locked (not
 * waited for: to be tried again).  A START whose reply was lost, sent
 * again, finds its runs started, not their claims lost. */
extern const char DQ_START_ONCE[];

/* No statement holds our dispatcher row of this life locked: ($1
 * instance, $2 token) -> one row if so; none while a claim (ours, on a
 * lost connection too) or our heartbeat's update has it, or if it is
 * gone.  Asked with no claim of ours on the wire (sweep_lost_claims). */
extern const char DQ_CLAIMS_SETTLED[];

#endif
