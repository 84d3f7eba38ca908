/*
 * dispatch_fixture.h - what the execdispatch tests share: a private
 * PostgreSQL (tests/lib/pgtest) with the schema migrated by the real
 * `execdispatch --migrate`, execservers from tests/lib/harness with a
 * service "work", dispatchers as real processes with generated
 * configurations and their logs, and the test's own database session.
 */
#ifndef ES_DISPATCH_FIXTURE_H
#define ES_DISPATCH_FIXTURE_H

#include <sys/types.h>

#include <libpq-fe.h>

#include "harness.h"
#include "pgtest.h"

#define DF_MAX_EXEC 3
#define DF_MAX_DISP 4

struct dfix {
	struct pg_cluster pg;
	struct es_daemon es[DF_MAX_EXEC];
	int nes;
	char dir[256]; /* configurations and dispatcher logs */
	pid_t disp[DF_MAX_DISP];
	char log[DF_MAX_DISP][300];
	char cfg[DF_MAX_DISP][300];
	const char *conninfo; /* what the dispatchers use (direct or PgBouncer) */
	PGconn *c;            /* the test's session (direct) */
};

/* The execserver body: waitgroup "wg" of slots processes, service "work"
 * with commands true, false, sleep, sh (/bin/sh) and date. */
const char *df_exec_body(int slots);

/* PostgreSQL up, schema migrated, the session open; 0 or -1. */
int df_start(struct dfix *f);
/* Starts execserver i with df_exec_body(slots). */
int df_start_exec(struct dfix *f, int i, int slots);
/* Writes dispatcher i's configuration: every execserver started so far,
 * the timings of the tests (pollMs 100, heartbeatSec 1, staleAfterSec 3,
 * cancelPollMs 100, retryDelaySec 1, instanceId d<i>) and extra lines
 * (a key in extra replaces the default). */
int df_write_config(struct dfix *f, int i, const char *extra);
/* Starts dispatcher i (df_write_config first) and waits until its
 * heartbeat row exists and its start is complete (logged: an earlier
 * life's claims requeued), up to DF_START_MS; 0, or -1 (its log printed,
 * the dispatcher killed). */
#define DF_START_MS 20000
int df_start_disp(struct dfix *f, int i);
/* Writes dispatcher i's configuration with `metrics` on a free loopback
 * port (and extra) and starts it (df_start_disp): that port, or -1. */
int df_start_with_metrics(struct dfix *f, int i, const char *extra);
/* Starts dispatcher i without waiting for anything; 0 or -1. */
int df_spawn_disp(struct dfix *f, int i);
/* The value of a series of a dispatcher's /metrics on port: "name" (the
 * last series of the family) or "name{label=\"v\",...}" as the page
 * writes it; -1 when there is none (also when no answer came within
 * 2 s).  df_metric: the same cut to an integer. */
double df_metric_value(int port, const char *series);
long long df_metric(int port, const char *series);
/* Waits until df_metric(port, series) reads want; 0, or -1 after
 * timeout_ms. */
int df_wait_metric(int port, const char *series, long long want, int timeout_ms);
/* Waits until the dispatchers' sessions have begun statements at n
 * different times (pg_stat_activity.query_start seen to move n times: n
 * statements at least, most of them polls); 0, or -1 after timeout_ms. */
int df_wait_statements(struct dfix *f, int n, int timeout_ms);
/* Waits until dispatcher i's log holds text; 0, or -1 after timeout_ms. */
int df_wait_log(struct dfix *f, int i, const char *text, int timeout_ms);
/* Runs the build's execctl (beside $EXECDISPATCH_BIN) with args, a shell
 * fragment made by fmt; its stdout and stderr into out (len bytes); the
 * exit status, or -1. */
int df_execctl(char *out, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Sends sig to dispatcher i and waits for its exit (SIGKILL after
 * timeout_ms); the wait status. */
int df_stop_disp(struct dfix *f, int i, int sig, int timeout_ms);
/* Stops everything, removes the directories (prints logs if failed). */
void df_cleanup(struct dfix *f, int failed);

/* execdispatch with args (NULL-terminated) and the SQL directory of the
 * source tree; output into out; the exit status or -1. */
int df_run_tool(char *out, size_t outlen, const char *const *args);

/* Submits job (JSON text) to service "work" with priority; the id or -1. */
long long df_submit(struct dfix *f, const char *job, int priority);
/* Waits until no row is queued, claimed or running; 0 or -1 (timeout). */
int df_wait_final(struct dfix *f, int timeout_ms);
/* Held rows (claimed + running) of instance ("d0"...). */
long long df_held(struct dfix *f, const char *instance);

/* The ledger job: its program records each run in table ledger
 * (UNIQUE (job_id, attempt), started_at, finished_at), working ms
 * between the two: in one database session, or (split) in two with a
 * sleep between them, so that a database restart meanwhile does not fail
 * the program itself. */
const char *df_ledger_job(struct dfix *f, char *buf, size_t len, int ms, int split);
/* Creates the table ledger, and the table violations with a trigger that
 * records there every update of a job row that was already done, failed
 * or cancelled (a final outcome changed afterwards). */
int df_make_ledger(struct dfix *f);

#endif
