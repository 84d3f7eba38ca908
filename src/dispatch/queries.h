/*
 * queries.h - every statement execdispatch and execctl send, as text with
 * the placeholder @schema@ (dq_expand puts in the configured schema).
 * Each DQ_NAME is the file sql/queries/name.sql, whole and pasteable into
 * psql or EXPLAIN; its opening comment gives the parameters, the result,
 * the guard (what in its WHERE makes it safe), the index it uses and what
 * the sender does when it fails.  The build compiles them in
 * (sql/embed.sh: comments left out, lines joined by one space).  The race
 * tests send these very texts from two sessions, so what they prove is
 * about the daemon's own statements; test_dispatch_explain checks each
 * one's index on a table of a million rows.
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
 * there (another life of the instance took it over, or a rescue removed
 * it).  The ones that change rows lock it FOR KEY SHARE for their
 * duration (the CTE "me", written out in each: test_dispatch_explain
 * checks they read alike).
 */
#ifndef ES_DISPATCH_QUERIES_H
#define ES_DISPATCH_QUERIES_H

/* The text with every @schema@ replaced by "schema" (double-quoted);
 * malloc'd, NULL when out of memory. */
char *dq_expand(const char *text, const char *schema);

/* execdispatch's statements, sql/queries/<name in lower case>.sql. */
extern const char DQ_SCHEMA_VERSION[]; /* highest migration applied */
extern const char DQ_REGISTER[];       /* register, or take over a stale row */
extern const char DQ_BEAT[];           /* the heartbeat */
extern const char DQ_RESCUE[];         /* requeue silent dispatchers' rows */
extern const char DQ_FIND_OWN[];       /* an earlier life's held rows */
extern const char DQ_FIND_LOST[];      /* claims lost with a connection */
extern const char DQ_REQUEUE_CLAIMS[]; /* requeue exactly the claims found */
extern const char DQ_CLAIM[];          /* claim a class (local or not) */
extern const char DQ_CLAIM_EXEC[];     /* claim per service, and the others */
extern const char DQ_START[];          /* claimed -> running (or found so) */
extern const char DQ_FINISH[];         /* the outcomes of claims */
extern const char DQ_FINISH_CLAIM[];   /* DQ_FINISH and a claim, one trip */
extern const char DQ_LANDED[];         /* was an outcome written? */
extern const char DQ_HELD[];           /* the cancel poll */
extern const char DQ_POSITION[];       /* an execserver POSITION, stored */
extern const char DQ_PROGRESS_WRITE[]; /* running jobs' progress, all in one */
extern const char DQ_LEAVE[];          /* delete our row, requeue the rest */
extern const char DQ_JANITOR[];        /* delete old finished rows */
extern const char DQ_QUEUE_STATS[];    /* the queue's figures for /metrics */
extern const char DQ_CLAIMS_SETTLED[]; /* has every claim holding our row ended? */
extern const char DQ_SCHED_DUE[];      /* schedules to act on, the next wake */
extern const char DQ_SCHED_FIRST[];    /* a new schedule's first next_run_at */
extern const char DQ_SCHED_FIRE[];     /* one occurrence: moved on, job inserted */
extern const char DQ_SCHED_REFUSE[];   /* a schedule the dispatcher refuses */
extern const char DQ_SCHED_FAILED[];   /* a failed fire: the row's back-off */
extern const char DQ_ATTEMPT_ENDED[];  /* a cancelled claim's run ended */

/* execctl's (src/cli/queue.c), sql/queries/ctl_*.sql: the SQL API. */
extern const char DQ_CTL_SUBMIT[];
extern const char DQ_CTL_SHOW[];
extern const char DQ_CTL_SHOW_JSON[];
extern const char DQ_CTL_POSITION[];
extern const char DQ_CTL_CANCEL[];
extern const char DQ_CTL_FINAL[];
extern const char DQ_CTL_SCHEDULE_ADD[];
extern const char DQ_CTL_SCHEDULE_REMOVE[];
extern const char DQ_CTL_SCHEDULE_LIST[];
extern const char DQ_CTL_PAUSE[];
extern const char DQ_CTL_RESUME[];
extern const char DQ_CTL_RETRY[];
extern const char DQ_CTL_ATTEMPTS[];

/* Listing and statistics, shared by execctl (jobs, stats) and the console
 * (console.c), sql/queries/list_*.sql, stats.sql, state_counts.sql; each
 * answers one JSON text. */
extern const char DQ_LIST_JOBS[];     /* every state, newest first */
extern const char DQ_LIST_QUEUED[];   /* queued, in claim order */
extern const char DQ_LIST_HELD[];     /* claimed or running, newest first */
extern const char DQ_LIST_FINISHED[]; /* done, failed or cancelled, last first */
extern const char DQ_STATS[];         /* per service (the view service_stats) */
extern const char DQ_STATE_COUNTS[];  /* per state (the view state_counts) */
/* the console's alone (console.c) */
extern const char DQ_CONSOLE_DISPATCHERS[];
extern const char DQ_CONSOLE_JOB[];
extern const char DQ_CONSOLE_FEATURES[];

#endif
