/*
 * soak.c - holds many broker connections against a real daemon for a long
 * time, with continuous churn and jobs, and records the resident memory
 * and open descriptors of every execserver process before and after
 * (`make soak`; scripts/soak.sh; not part of make check).
 *
 *   soak [-s SECONDS] [-n CONNECTIONS] [-c CHURN_PER_SECOND] [-H HANDLERS]
 *
 * Defaults: 600 s, 1000 connections, 20 connections closed and reopened
 * per second, 2 handlers, 4 slots.  "Cold" is the daemon just started,
 * "before" the daemon idle after a warm-up run of a tenth of the time (at
 * most a minute, at least 5 s), "after" the daemon idle again after the
 * run itself.  Memory is the private resident memory (RssAnon) of each
 * process, apart from the pages of the shared segment it touched
 * (RssShmem: the same pages in every process).  Prints a Markdown table
 * and the load's tally; exits 1 if a job was lost or answered twice or
 * failed, a token was given twice, a handler was replaced, or a process
 * holds more descriptors after than before.
 */
#include "autoconfig.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "harness.h"
#include "loadgen.h"

#define MAXPROC 65

struct proc_usage {
	int pid;
	long anon_kib;  /* private resident memory (RssAnon) */
	long shmem_kib; /* resident pages of the shared segment (RssShmem) */
	int fds;
};

static int open_fds(int pid)
{
	char path[64];
	int n = 0;
	snprintf(path, sizeof path, "/proc/%d/fd", pid);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* The master, then the handlers by slot. */
static int usage(const struct es_daemon *d, struct proc_usage *u)
{
	int pids[MAXPROC - 1], n = harness_handler_pids(d, pids, MAXPROC - 1);
	if (n < 0)
		return -1;
	u[0].pid = d->pid;
	for (int i = 0; i < n; i++)
		u[i + 1].pid = pids[i];
	/* the /status request above used a connection of one handler: let it
	 * close, and freed memory settle, before counting (sleep: no event
	 * says the allocator has returned its memory) */
	harness_sleep_ms(1000);
	for (int i = 0; i <= n; i++) {
		u[i].anon_kib = harness_proc_kib(u[i].pid, "RssAnon");
		u[i].shmem_kib = harness_proc_kib(u[i].pid, "RssShmem");
		u[i].fds = open_fds(u[i].pid);
	}
	return n + 1;
}

static int idle(struct json_object *st, void *arg)
{
	(void)arg;
	return harness_json_int(st, "connections", NULL) == 0 &&
	       harness_json_int(st, "wants", NULL) == 0;
}

/* The load for `seconds`, then every client closes and the daemon is idle
 * again; progress every 10 s on stderr. */
static void load(const struct es_daemon *d, struct loadgen *lg, int seconds, int churn,
		 const char *what)
{
	int nconns = loadgen_size(lg);
	long long start = harness_now_ms(), next_churn = start + 1000, next_report = start + 10000;
	loadgen_restart(lg);
	while (harness_now_ms() - start < seconds * 1000LL) {
		loadgen_turn(lg, 20);
		long long now = harness_now_ms();
		if (now >= next_churn) {
			for (int i = 0; i < churn; i++)
				loadgen_drop(lg, (int)(random() % nconns));
			next_churn += 1000;
		}
		if (now >= next_report) {
			struct loadgen_tally t;
			loadgen_tally(lg, &t);
			fprintf(stderr, "%s: %lld s: %d connected, %d jobs done, %d reconnects\n",
				what, (now - start) / 1000, nconns - loadgen_down(lg), t.done_jobs,
				t.reconnects);
			next_report += 10000;
		}
	}
	loadgen_settle(lg, 20000);
	loadgen_close_all(lg);
	if (harness_wait_status(d, 30000, idle, NULL) != 0)
		fprintf(stderr, "%s: the daemon did not become idle\n", what);
}

int main(int argc, char **argv)
{
	int seconds = 600, nconns = 1000, churn = 20, handlers = 2, opt;
	while ((opt = getopt(argc, argv, "s:n:c:H:")) != -1) {
		switch (opt) {
		case 's': seconds = atoi(optarg); break;
		case 'n': nconns = atoi(optarg); break;
		case 'c': churn = atoi(optarg); break;
		case 'H': handlers = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: soak [-s SECONDS] [-n CONNECTIONS] [-c CHURN] [-H "
					"HANDLERS]\n");
			return 2;
		}
	}
	/* one descriptor per connection here and in the daemon (inherited) */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	srandom((unsigned)getpid());

	struct es_daemon d;
	char body[4096];
	snprintf(body, sizeof body, "maxConnections: %d\nlogLevel: info\n%s", 2 * nconns + 64,
		 harness_default_body(4));
	if (harness_start(&d, handlers, body, NULL) != 0)
		return 1;
	struct proc_usage cold[MAXPROC], before[MAXPROC], after[MAXPROC];
	int nc = usage(&d, cold);
	struct loadgen *lg = loadgen_new(d.port, nconns, "soak");
	if (!lg || nc < 0)
		return 1;
	/* a warm-up tenth of the run (at most a minute) first: "before" is the
	 * daemon idle after it, so allocator warm-up is not taken for a leak */
	int warm = seconds / 10 < 60 ? seconds / 10 : 60;
	load(&d, lg, warm > 5 ? warm : 5, churn, "warm-up");
	int nb = usage(&d, before);
	load(&d, lg, seconds, churn, "soak");
	int na = usage(&d, after);
	struct loadgen_tally t;
	loadgen_tally(lg, &t);

	int bad = nb < 0 || na != nb || t.errors || t.unknown_dones || t.doubled || t.stray ||
		  t.missing || t.dup_tokens || t.bad_receipts;
	printf("soak: %d s, %d connections, %d closed and reopened per second, %d handlers\n",
	       seconds, nconns, churn, handlers);
	printf("jobs done %d, wants %d, offers %d, declines %d, reconnects %d; "
	       "errors %d, doubled %d, missing %d, duplicate tokens %d\n\n",
	       t.done_jobs, t.wants, t.offers, t.declines, t.reconnects, t.errors, t.doubled,
	       t.missing, t.dup_tokens);
	printf("| process | pid | private RSS cold (KiB) | private RSS before (KiB) | "
	       "private RSS after (KiB) | segment pages after (KiB) | fds before | fds after |\n");
	printf("|---|---|---|---|---|---|---|---|\n");
	for (int i = 0; i < nb && i < na; i++) {
		char name[32];
		if (i == 0)
			snprintf(name, sizeof name, "master");
		else
			snprintf(name, sizeof name, "handler %d", i - 1);
		printf("| %s | %d | %ld | %ld | %ld | %ld | %d | %d |\n", name, before[i].pid,
		       i < nc ? cold[i].anon_kib : -1, before[i].anon_kib, after[i].anon_kib,
		       after[i].shmem_kib, before[i].fds, after[i].fds);
		bad |= before[i].pid != after[i].pid || after[i].fds > before[i].fds;
	}
	loadgen_free(lg);
	int status = harness_stop(&d, 30000);
	harness_cleanup(&d);
	bad |= status < 0;
	printf("\nsoak: %s\n", bad ? "FAILED" : "passed");
	return bad;
}
