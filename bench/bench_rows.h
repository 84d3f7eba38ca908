/*
 * bench_rows.h - the measurements of docs/benchmarks.md, one function per
 * row (or group of rows that share a daemon).  Each starts its own
 * execserver (tests/lib/harness.c), drives it, and writes its markdown
 * fragment and data files into the output directory.
 */
#ifndef ES_BENCH_ROWS_H
#define ES_BENCH_ROWS_H

struct bench_opts {
	const char *out;        /* output directory */
	const char *peers;      /* directory of the peer programs (stamp, gm_*) */
	int handlers;           /* handlers of the daemons (0: one per CPU) */
	int job_handlers;       /* ... of rows 3 and 7's (-H; 0: one per CPU) */
	int grants;             /* hand-overs measured in row 1 */
	int legacy_samples;     /* legacy hand-overs in row 1 */
	int idle_sec;           /* the window of row 2's traffic count */
	int idle_conns;         /* idle connections of row 2's CPU figure */
	int idle_big;           /* ... and of its large row (0: none) */
	int repeats;            /* repeats of each rate */
	double rate_sec;        /* length of one rate measurement */
	long long stream_bytes; /* row 6 */
	int fair_jobs;          /* row 8 */
	int ks[8], nk;          /* slot counts K of rows 3 and 7 */
};

void row_wake(const struct bench_opts *o);        /* the machine's wake-up cost */
void row_handover(const struct bench_opts *o);    /* 1 */
void row_idle(const struct bench_opts *o);        /* 2, and memory of 5 */
void row_throughput(const struct bench_opts *o);  /* 3 */
void row_gearman(const struct bench_opts *o);     /* 7 */
void row_grant_rate(const struct bench_opts *o);  /* 4 */
void row_book_size(const struct bench_opts *o);   /* 5 */
void row_stream(const struct bench_opts *o);      /* 6 */
void row_fairness(const struct bench_opts *o);    /* 8 */
void row_autobalance(const struct bench_opts *o); /* auto-balance */

/* Keeps depth wants of service parked on every connection of f, running
 * job for each OFFER and wanting again after each DONE, while the fleet
 * runs (one flood at a time). */
struct fleet;
void bench_flood(struct fleet *f, int depth, const char *service, const char *job);

/* Shared by the rows: median, min and max of a few repeats. */
struct spread {
	double med, min, max;
};
struct spread spread_of(const double *v, int n);

#endif
