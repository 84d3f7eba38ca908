/*
 * bench_util.h - what every benchmark of bench/ shares: the clock, sample
 * sets with their percentiles, the daemon's processes and what they cost
 * (CPU ticks and anonymous memory from /proc), and the markdown fragment
 * each measurement appends its rows to.
 *
 * Owns: sample arrays (grown with realloc, freed by bs_free) and the open
 * fragment file.  Not thread-safe except bu_now_us.
 */
#ifndef ES_BENCH_UTIL_H
#define ES_BENCH_UTIL_H

#include <stddef.h>
#include <stdio.h>

struct es_daemon;

long long bu_now_us(void);
long long bu_now_ns(void);

/* A growing set of samples (microseconds, or any unit). */
struct samples {
	double *v;
	size_t n, cap;
};
void bs_add(struct samples *s, double x);
void bs_free(struct samples *s);
/* Sorts in place; then the q-quantile (0..1, nearest rank). */
double bs_pct(struct samples *s, double q);
double bs_max(struct samples *s);
double bs_min(struct samples *s);
/* Writes the sorted samples, one a line, to path (for gnuplot). */
int bs_write(struct samples *s, const char *path);

/* The execserver's processes: the master and its handlers (from /status). */
int bu_daemon_pids(const struct es_daemon *d, int *pids, int max);
/* Which handler of d (0, 1, ...: the order of /status) holds the server
 * end of the loopback TCP connection whose client end is client_fd:
 * the socket's inode from /proc/net/tcp, found among the handlers'
 * descriptors.  -1 when it cannot tell. */
int bu_conn_handler(const struct es_daemon *d, int client_fd);
/* pin: this process, d's master and its handlers onto CPU 0 (no wake-up
 * crosses CPUs); 0: back onto every CPU. */
void bu_pin_all(const struct es_daemon *d, int pin);
/* The connections each handler of d holds, "a / b / ...", from /status. */
void bu_handler_spread(const struct es_daemon *d, char *out, size_t len);
/* This process's own CPU time (utime + stime, getrusage), in microseconds. */
long long bu_self_cpu_us(void);
/* utime+stime in clock ticks of pid (its own, not its children's). */
long long bu_proc_ticks(int pid);
/* The sum over the daemon's processes of bu_proc_ticks, in microseconds. */
long long bu_daemon_cpu_us(const struct es_daemon *d);
/* The sum of a /proc/<pid>/status field (KiB) over the daemon's processes. */
long bu_daemon_kib(const struct es_daemon *d, const char *field);

/* Raises RLIMIT_NOFILE's hard limit to fs.nr_open where allowed (root),
 * then the soft limit to the hard limit; returns the limit. */
long bu_raise_nofile(void);
/* Raises the soft RLIMIT_NOFILE to n (up to the hard limit); returns it. */
long bu_nofile_at_least(long n);

/* The output: the fragment file every row writes markdown to, and the
 * directory for data files.  bu_out opens OUTDIR/<name>.md. */
FILE *bu_out(const char *outdir, const char *name);
/* OUTDIR/<name> into buf. */
const char *bu_path(char *buf, size_t len, const char *outdir, const char *name);

/* Starts a daemon with `handlers` handlers and a configuration body,
 * logging at warn level (so logging does not weigh on the figures).
 * Exits the program when it cannot. */
void bu_start(struct es_daemon *d, int handlers, const char *body);
void bu_stop(struct es_daemon *d);

#endif
