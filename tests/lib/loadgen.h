/*
 * loadgen.h - many broker clients in one thread, for the chaos test and the
 * soak run: each connection is a named client (one connection per client
 * id) that loops WANT -> OFFER -> JOB (one offer in ten DECLINEd) -> DONE
 * with short jobs ("true" of service "cat", or a 20 ms sleep of service
 * "sleep", at random priorities -1..1), and reconnects with the same id
 * when its connection drops.  Everything it saw is kept for the checks.
 *
 * Owns: the connections (tests/lib/proto.h clients), the job table (a job
 * id is the job's index, unique across all clients) and every OFFER token.
 * Not thread-safe.  Plain (non-TLS) connections only: it polls the sockets.
 */
#ifndef ES_TEST_LOADGEN_H
#define ES_TEST_LOADGEN_H

struct loadgen;

/* What a run came to (loadgen_tally). */
struct loadgen_tally {
	int wants, offers, declines, reconnects;
	int done_jobs;     /* JOBs with exactly one DONE */
	int dropped;       /* JOBs whose connection dropped before the DONE */
	int lost;          /* of those, with no DONE at all */
	int missing;       /* JOBs on connections that never dropped, no DONE */
	int doubled;       /* jobs with more than one DONE */
	int stray;         /* DONEs for wants that never became a JOB */
	int dup_tokens;    /* OFFER tokens given more than once */
	int errors;        /* ERROR messages and protocol surprises */
	int unknown_dones; /* DONEs for jobs the client does not know */
	int exec_lost;     /* DONEs with error exec_lost (jobs on dropped
				 * connections whose handler died) */
	int bad_receipts;  /* DONEs that are neither exit 0 without an
				 * error nor exec_lost of a dropped job */
};

/* nconns clients "<prefix><i>" against 127.0.0.1:port, none connected yet
 * (loadgen_turn connects them).  NULL on failure. */
struct loadgen *loadgen_new(int port, int nconns, const char *prefix);
void loadgen_free(struct loadgen *lg);

/* One turn: (re)connects a few clients that are down (each waits at most
 * 300 ms for its HELLO), starts a want on every idle client unless
 * stopping, waits up to poll_ms for traffic and handles what came. */
void loadgen_turn(struct loadgen *lg, int poll_ms);

/* From now on no new wants: loadgen_turn only finishes what runs. */
void loadgen_stop(struct loadgen *lg);
/* New wants again (after loadgen_stop or loadgen_settle). */
void loadgen_restart(struct loadgen *lg);
/* Clients with a JOB that has not got its DONE yet (on live connections). */
int loadgen_running(const struct loadgen *lg);
/* Clients whose connection is down. */
int loadgen_down(const struct loadgen *lg);
/* Closes client i's connection from the client side (churn); it
 * reconnects in a later turn. */
void loadgen_drop(struct loadgen *lg, int i);
/* Closes every connection. */
void loadgen_close_all(struct loadgen *lg);
int loadgen_size(const struct loadgen *lg);

/* Stops, waits up to wait_ms for running jobs' DONEs, reconnects the
 * clients that are down (so that DONEs of jobs lost with a handler come
 * home) and listens 0.5 s more. */
void loadgen_settle(struct loadgen *lg, int wait_ms);

/* Counts everything seen so far. */
void loadgen_tally(struct loadgen *lg, struct loadgen_tally *t);

/* After loadgen_settle: asks (QUERY) about every JOB that got no DONE on
 * its client's connection; returns how many the server still knows (each
 * should be unknown_job: gone with its handler, nothing orphaned), or -1
 * when a client is not connected.  DONEs that arrive meanwhile count as
 * usual (tally afterwards). */
int loadgen_query_lost(struct loadgen *lg);

#endif
