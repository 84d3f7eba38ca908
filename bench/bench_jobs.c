/*
 * bench_jobs.c - rows 3, 7 and 8 of docs/benchmarks.md and the
 * auto-balance row: whole jobs through the broker (WANT, OFFER, JOB,
 * DONE), against the host's limit (a K-parallel posix_spawn + waitpid
 * loop), against gearmand with K libgearman workers (bench/peers/), and
 * the grant rule's fairness promises.
 *
 * Submission-to-start latency (row 7) uses bench/peers/stamp as the job on
 * both sides: it prints CLOCK_MONOTONIC when it starts, and the client
 * subtracts the moment it submitted (broker: the WANT; gearman: the call
 * of gearman_client_do), on the same host clock.
 */
#include "autoconfig.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "bench_fleet.h"
#include "bench_rows.h"
#include "bench_util.h"
#include "harness.h"
#include "proto.h"

extern char **environ;

/* ---- the job loop ---- */

struct jobrun {
	const char *job; /* the JOB's job object */
	int depth;       /* wants each connection keeps */
	int pipeline;    /* the next WANT goes with the JOB (one write),
				   * not after the DONE */
	int stop_new;
	long long done, failed, issued, limit; /* limit: 0 = none */
	struct samples *lat;                   /* submission -> start (us), from stamp */
	struct samples *wait;                  /* WANT -> OFFER (us) */
	struct samples *to_start;              /* OFFER -> start (us), from stamp */
	int draining;
};

static void job_want(struct jobrun *jr, struct fleet_conn *c)
{
	c->t_mark = bu_now_ns();
	jr->issued++;
	fleet_want(c);
}

static void job_msg(struct fleet *f, struct fleet_conn *c, const struct fleet_msg *m)
{
	struct jobrun *jr = f->user;
	if (strcmp(m->type, "OFFER") == 0) {
		c->t_offer = m->t_ns;
		if (jr->wait && c->outstanding == 1)
			bs_add(jr->wait, (double)(m->t_ns - c->t_mark) / 1000.0);
		fleet_cork(c);
		fleet_send(c, "{\"type\":\"JOB\",\"job_id\":\"%s\",\"token\":\"%s\",\"job\":%s}",
			   m->job_id, m->token, jr->job);
		if (jr->pipeline && !jr->stop_new && (!jr->limit || jr->issued < jr->limit))
			job_want(jr, c);
		fleet_uncork(c);
	} else if (strcmp(m->type, "DONE") == 0) {
		c->outstanding--;
		c->count++;

		jr->done++;
		if (!strstr(m->raw, "\"exit_code\":0") || strstr(m->raw, "\"error\""))
			jr->failed++;
		if (jr->lat) {
			char out[64];
			long long start = atoll(fleet_field(m->raw, "stdout", out, sizeof out));
			if (start > 0)
				bs_add(jr->lat, (double)(start - c->t_mark) / 1000.0);
			if (start > 0 && jr->to_start)
				bs_add(jr->to_start, (double)(start - c->t_offer) / 1000.0);
		}
		if (!jr->pipeline && !jr->stop_new && (!jr->limit || jr->issued < jr->limit))
			job_want(jr, c);
	} else if (strcmp(m->type, "ERROR") == 0) {
		fprintf(stderr, "esbench: %s\n", m->raw);
	}
}

static void drain_tick(struct fleet *f)
{
	for (int i = 0; i < f->n; i++)
		if (f->c[i].outstanding > 0 && !f->c[i].dead)
			return;
	f->stop = 1;
}

static void limit_tick(struct fleet *f)
{
	struct jobrun *jr = f->user;
	if (jr->limit && jr->done >= jr->limit)
		f->stop = 1;
}

/* Runs jobs on every connection of f (service s, depth wants each) for
 * sec seconds after a short warm-up; returns jobs/s, the daemon's CPU per
 * job (us) in *cpu_per_job and this load generator's in *client_cpu_per_job
 * (either may be NULL).  Drains before returning. */
static double run_jobs(struct fleet *f, const struct es_daemon *d, struct jobrun *jr,
		       const char *service, double sec, double *cpu_per_job,
		       double *client_cpu_per_job)
{
	f->user = jr;
	f->on_msg = job_msg;
	f->stop = 0;
	for (int i = 0; i < f->n; i++) {
		f->c[i].service = service;
		for (int k = 0; k < jr->depth; k++)
			job_want(jr, &f->c[i]);
	}
	fleet_run(f, bu_now_ns() + 300000000LL, 0, NULL);
	long long d0 = jr->done, t0 = bu_now_ns(), cpu0 = bu_daemon_cpu_us(d),
		  self0 = bu_self_cpu_us();
	if (jr->lat)
		jr->lat->n = 0;
	if (jr->wait)
		jr->wait->n = 0;
	if (jr->to_start)
		jr->to_start->n = 0;
	fleet_run(f, t0 + (long long)(sec * 1e9), 0, NULL);
	long long jobs = jr->done - d0;
	double el = (double)(bu_now_ns() - t0) / 1e9;
	if (cpu_per_job)
		*cpu_per_job = (double)(bu_daemon_cpu_us(d) - cpu0) / (double)(jobs ? jobs : 1);
	if (client_cpu_per_job)
		*client_cpu_per_job = (double)(bu_self_cpu_us() - self0) /
				      (double)(jobs ? jobs : 1);
	jr->stop_new = 1;
	f->stop = 0;
	fleet_run(f, bu_now_ns() + 30000000000LL, 20, drain_tick);
	jr->stop_new = 0;
	return (double)jobs / el;
}

/* K children of argv at a time for sec seconds: jobs/s; the loop's own
 * CPU per job (us) in *cpu_per_job. */
static double spawn_limit(char *const argv[], int k, double sec, double *cpu_per_job)
{
	struct rusage r0, r1;
	getrusage(RUSAGE_SELF, &r0);
	long long t0 = bu_now_ns(), end = t0 + (long long)(sec * 1e9), jobs = 0;
	int running = 0;
	for (;;) {
		while (running < k && bu_now_ns() < end) {
			pid_t pid;
			if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) != 0) {
				perror("posix_spawn");
				exit(1);
			}
			running++;
		}
		if (!running)
			break;
		int st;
		if (waitpid(-1, &st, 0) > 0) {
			running--;
			jobs++;
		}
	}
	double el = (double)(bu_now_ns() - t0) / 1e9;
	getrusage(RUSAGE_SELF, &r1);
	double cpu = (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec + r1.ru_stime.tv_sec -
			      r0.ru_stime.tv_sec) *
			     1e6 +
		     (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec + r1.ru_stime.tv_usec -
			      r0.ru_stime.tv_usec);
	*cpu_per_job = cpu / (double)(jobs ? jobs : 1);
	return (double)jobs / el;
}

/* ---- the floor (bench/peers/floor.c) ---- */

/* bench/peers/floor with k slots on a listening socket made here (its
 * descriptor 3), driven the way row 3's fleet drives the broker: 2k
 * connections (TCP_NODELAY), each keeping one want parked, an OFFER
 * answered with the JOB and the next WANT in one write; sec seconds after
 * 0.3 s of warm-up.  Returns jobs/s; the floor's CPU per job (us, utime +
 * stime from /proc as for the daemon) in *cpu_per_job.  The floor is
 * killed at the end. */
static double floor_run(const struct bench_opts *o, int k, double sec, double *cpu_per_job)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof a;
	int lfd = socket(AF_INET, SOCK_STREAM, 0), n = 2 * k, fds[128], one = 1;
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(lfd, 256) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&a, &alen) != 0 || n > 128) {
		perror("esbench: the floor's socket");
		exit(1);
	}
	char prog[512], ks[16];
	snprintf(prog, sizeof prog, "%s/floor", o->peers);
	snprintf(ks, sizeof ks, "%d", k);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (lfd != 3 && (dup2(lfd, 3) != 3 || close(lfd) != 0))
			_exit(127);
		execl(prog, prog, ks, (char *)NULL);
		perror(prog);
		_exit(127);
	}
	close(lfd);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	for (int i = 0; i < n; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (unsigned)i };
		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fds[i] < 0 || connect(fds[i], (struct sockaddr *)&a, sizeof a) != 0) {
			perror("esbench: connecting to the floor");
			exit(1);
		}
		setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev);
		(void)send(fds[i], "WANT", 4, MSG_NOSIGNAL);
	}
	long long jobs = 0, d0 = 0, cpu0 = 0, t0 = 0, warm = bu_now_ns() + 300000000LL;
	long long end = warm + (long long)(sec * 1e9), now;
	char carry[128][4];
	size_t carry_len[128] = { 0 };
	while ((now = bu_now_ns()) < end) {
		if (!t0 && now >= warm) {
			t0 = now;
			d0 = jobs;
			cpu0 = bu_proc_ticks(pid);
		}
		struct epoll_event ev[64];
		int m = epoll_wait(ep, ev, 64, 100);
		for (int e = 0; e < m; e++) {
			int i = (int)ev[e].data.u32;
			char buf[512];
			memcpy(buf, carry[i], carry_len[i]);
			ssize_t r = recv(fds[i], buf + carry_len[i], sizeof buf - carry_len[i], 0);
			if (r <= 0) {
				fprintf(stderr, "esbench: the floor closed a connection\n");
				exit(1);
			}
			size_t len = carry_len[i] + (size_t)r, at = 0;
			for (; at + 4 <= len; at += 4) {
				if (memcmp(buf + at, "OFFR", 4) == 0)
					(void)send(fds[i], "JOB_WANT", 8, MSG_NOSIGNAL);
				else if (memcmp(buf + at, "DONE", 4) == 0)
					jobs++;
			}
			carry_len[i] = len - at;
			memcpy(carry[i], buf + at, len - at);
		}
	}
	long long ticks = bu_proc_ticks(pid) - cpu0;
	double el = (double)(now - t0) / 1e9;
	jobs -= d0;
	*cpu_per_job = (double)ticks * 1e6 / (double)sysconf(_SC_CLK_TCK) /
		       (double)(jobs ? jobs : 1);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	close(ep);
	return (double)jobs / el;
}

/* Starts the daemon of rows 3 and 7: a waitgroup of K slots and a service
 * tK for each K, with the commands true and stamp. */
static void jobs_daemon(struct es_daemon *d, const struct bench_opts *o)
{
	char b[8192], stamp[512];
	size_t len = sizeof b;
	snprintf(stamp, sizeof stamp, "%s/stamp", o->peers);
	int k = snprintf(b, len, "waitgroups:\n");
	for (int i = 0; i < o->nk; i++)
		k += snprintf(b + k, len - (size_t)k, "  k%d: {processes: %d}\n", o->ks[i],
			      o->ks[i]);
	k += snprintf(b + k, len - (size_t)k, "services:\n");
	for (int i = 0; i < o->nk; i++)
		k += snprintf(b + k, len - (size_t)k,
			      "  t%d:\n    waitgroup: k%d\n    commands:\n"
			      "      true: {prog: /bin/true}\n      stamp: {prog: \"%s\"}\n",
			      o->ks[i], o->ks[i], stamp);
	bu_start(d, o->job_handlers, b);
}

/* ---- gearmand ---- */

static pid_t spawn_argv(char *const argv[])
{
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int nul = open("/dev/null", 1);
		if (nul >= 0) {
			dup2(nul, 1);
			close(nul);
		}
		execv(argv[0], argv);
		perror(argv[0]);
		_exit(127);
	}
	return pid;
}

struct gm_result {
	double rate, p50, p99, max;
};

/* gearmand with K workers (bench/peers/gm_worker) and a client of K
 * threads (bench/peers/gm_client) for sec seconds. */
static struct gm_result run_gearman(const struct bench_opts *o, int k, double sec, int port)
{
	char worker[512], client[512], stamp[512], ports[16], ks[16], secs[32], out[512];
	snprintf(worker, sizeof worker, "%s/gm_worker", o->peers);
	snprintf(client, sizeof client, "%s/gm_client", o->peers);
	snprintf(stamp, sizeof stamp, "%s/stamp", o->peers);
	snprintf(ports, sizeof ports, "%d", port);
	snprintf(ks, sizeof ks, "%d", k);
	snprintf(secs, sizeof secs, "%.1f", sec);
	bu_path(out, sizeof out, o->out, "gearman_lat.tmp");
	pid_t w[16];
	for (int i = 0; i < k; i++) {
		char *wa[] = { worker, ports, stamp, NULL };
		w[i] = spawn_argv(wa);
	}
	usleep(300000);
	char cmd[2048];
	snprintf(cmd, sizeof cmd, "'%s' %s %s %s '%s'", client, ports, ks, secs, out);
	struct gm_result r = { 0 };
	FILE *p = popen(cmd, "r");
	if (!p || fscanf(p, "%lf", &r.rate) != 1)
		fprintf(stderr, "esbench: gm_client gave nothing\n");
	if (p)
		pclose(p);
	struct samples s = { 0 };
	FILE *f = fopen(out, "r");
	double x;
	while (f && fscanf(f, "%lf", &x) == 1)
		bs_add(&s, x);
	if (f)
		fclose(f);
	r.p50 = bs_pct(&s, 0.5);
	r.p99 = bs_pct(&s, 0.99);
	r.max = bs_max(&s);
	bs_free(&s);
	for (int i = 0; i < k; i++) {
		kill(w[i], SIGKILL);
		waitpid(w[i], NULL, 0);
	}
	return r;
}

/* Row 3 at K slots: the broker against the floor (bench/peers/floor.c)
 * and the bare loop, o->repeats times alternating; one line into each
 * table (md: against the limit, fl: against the floor) and dat.  pin: the
 * daemon, this load generator and so the floor and the bare loop's
 * children on CPU 0.  Returns broker / limit at the median; the broker's
 * and the floor's median CPU per job in *cpu and *floor_cpu. */
static double throughput_at(const struct bench_opts *o, const struct es_daemon *d, int k, int pin,
			    FILE *md, FILE *fl, FILE *dat, double *cpu, double *floor_cpu)
{
	char svc[16];
	snprintf(svc, sizeof svc, "t%d", k);
	struct fleet *f = fleet_open(d->port, 2 * k, "tp", 0, 0);
	double rb[16], rl[16], rf[16], cb[16], cl[16], cf[16], cg[16];
	char *argv[] = { "/bin/true", NULL };
	if (pin)
		bu_pin_all(d, 1);
	for (int i = 0; i < o->repeats; i++) {
		struct jobrun jr = { .job = "{\"command\":\"true\"}", .depth = 1, .pipeline = 1 };
		rb[i] = run_jobs(f, d, &jr, svc, o->rate_sec, &cb[i], &cg[i]);
		if (jr.failed)
			fprintf(stderr, "esbench: %lld jobs failed\n", jr.failed);
		rf[i] = floor_run(o, k, o->rate_sec, &cf[i]);
		rl[i] = spawn_limit(argv, k, o->rate_sec, &cl[i]);
	}
	if (pin)
		bu_pin_all(d, 0);
	fleet_close(f);
	struct spread b = spread_of(rb, o->repeats), l = spread_of(rl, o->repeats),
		      fr = spread_of(rf, o->repeats), c = spread_of(cb, o->repeats),
		      c2 = spread_of(cl, o->repeats), cfl = spread_of(cf, o->repeats),
		      g = spread_of(cg, o->repeats);
	double ratio = b.med / l.med;
	const char *where = pin ? ", all on CPU 0" : "";
	fprintf(md,
		"| %d%s | **%.0f** (%.0f–%.0f) | %.0f (%.0f–%.0f) | **%.0f %%** | %.0f µs | %.0f "
		"µs | %.0f µs | %.0f µs |\n",
		k, where, b.med, b.min, b.max, l.med, l.min, l.max, 100 * ratio, c.med, c2.med,
		c.med - c2.med, g.med);
	fprintf(fl,
		"| %d%s | %.0f (%.0f–%.0f) | %.0f (%.0f–%.0f) | %.0f %% | **%.0f µs** (%.0f–%.0f) "
		"| **%.0f µs** (%.0f–%.0f) | %.0f µs | %.0f µs |\n",
		k, where, b.med, b.min, b.max, fr.med, fr.min, fr.max, 100 * fr.med / l.med, c.med,
		c.min, c.max, cfl.med, cfl.min, cfl.max, c.med - cfl.med, c2.med);
	if (dat)
		fprintf(dat, "%d %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f\n", k, b.med, b.min,
			b.max, l.med, l.min, l.max, fr.med, fr.min, fr.max);
	fprintf(stderr,
		"row3: K=%d%s broker %.0f/s %.0f us/job, floor %.0f/s %.0f us/job, limit %.0f/s\n",
		k, pin ? " pinned" : "", b.med, c.med, fr.med, cfl.med, l.med);
	*cpu = c.med;
	*floor_cpu = cfl.med;
	return ratio;
}

void row_throughput(const struct bench_opts *o)
{
	char path[512];
	struct es_daemon d;
	jobs_daemon(&d, o);
	FILE *md = bu_out(o->out, "row3");
	FILE *fl = bu_out(o->out, "row3b");
	FILE *dat = fopen(bu_path(path, sizeof path, o->out, "throughput.dat"), "w");
	fprintf(md, "| K slots | broker jobs/s (median, min–max) | limit: posix_spawn+waitpid "
		    "jobs/s | broker / limit | "
		    "execserver CPU per job | the limit loop's CPU per job | broker's own cost per "
		    "job | "
		    "load generator's CPU per job |\n"
		    "|---|---|---|---|---|---|---|---|\n");
	fprintf(fl, "| K slots | broker jobs/s | floor jobs/s | floor / limit | execserver CPU "
		    "per job (median, min–max) | the floor's CPU per job | execserver − floor | "
		    "the limit loop's CPU per job |\n"
		    "|---|---|---|---|---|---|---|---|\n");
	double rmin = 1e9, cmax = 0, fmin = 1e9, fmax = 0, cpu, floor_cpu;
	for (int ki = 0; ki < o->nk; ki++) {
		double ratio = throughput_at(o, &d, o->ks[ki], 0, md, fl, dat, &cpu, &floor_cpu);
		if (ratio < rmin)
			rmin = ratio;
		if (cpu > cmax)
			cmax = cpu;
		if (floor_cpu < fmin)
			fmin = floor_cpu;
		if (floor_cpu > fmax)
			fmax = floor_cpu;
	}
	/* K = 1 once more with everything on CPU 0: the broker and the bare
	 * loop without wake-ups across CPUs (row `wake`) */
	for (int ki = 0; ki < o->nk; ki++)
		if (o->ks[ki] == 1)
			throughput_at(o, &d, 1, 1, md, fl, NULL, &cpu, &floor_cpu);
	fclose(dat);
	fprintf(md, "\nWorst ratio: %.0f %% of the limit (target ≥ 90 %%: %s).\n", 100 * rmin,
		rmin >= 0.9 ? "met" : "missed");
	fprintf(fl,
		"\nThe execserver's CPU per job at its worst K: %.0f µs (target ≤ 100 µs: %s); "
		"the floor's: %.0f–%.0f µs over the K (%s 100 µs).\n",
		cmax, cmax <= 100 ? "met" : "missed", fmin, fmax,
		fmax <= 100  ? "within"
		: fmin > 100 ? "above"
			     : "partly above");
	fclose(fl);
	fclose(md);
	md = bu_out(o->out, "summary-3");
	fprintf(md,
		"| 3 | /bin/true jobs/s, K = 1, 2, 4, 8, against a K-parallel posix_spawn loop | ≥ "
		"90 %% of the limit "
		"| worst K: %.0f %% of the limit (table in section 3) — **%s** |\n",
		100 * rmin, rmin >= 0.9 ? "met" : "missed");
	fprintf(md,
		"| 3b | the execserver's CPU per /bin/true job, every K; the floor (a minimal "
		"broker, bench/peers/floor.c) beside it | ≤ 100 µs "
		"| worst K: %.0f µs; the floor %.0f–%.0f µs — **%s** |\n",
		cmax, fmin, fmax, cmax <= 100 ? "met" : "missed");
	fclose(md);
	bu_stop(&d);
}

void row_gearman(const struct bench_opts *o)
{
	char path[512];
	struct es_daemon d;
	jobs_daemon(&d, o);
	/* row 7: stamp jobs, against gearmand */
	FILE *md = bu_out(o->out, "row7");
	FILE *dat = fopen(bu_path(path, sizeof path, o->out, "gearman.dat"), "w");
	int gport = harness_free_port();
	char gp[16], gd[] = "/usr/sbin/gearmand";
	snprintf(gp, sizeof gp, "%d", gport);
	char *ga[] = { gd,   "-p",        gp,          "-L",    "127.0.0.1",
		       "-l", "/dev/null", "--verbose", "FATAL", NULL };
	pid_t g = spawn_argv(ga);
	usleep(500000);
	fprintf(md, "| K | broker jobs/s | gearmand jobs/s | broker / gearmand | broker "
		    "submit→start p50 / p99 / max | "
		    "gearmand submit→start p50 / p99 / max | broker p50: WANT→OFFER / OFFER→start "
		    "|\n|---|---|---|---|---|---|---|\n");
	int wins = 0, lat_wins = 0, pids[65];
	for (int ki = 0; ki < o->nk; ki++) {
		int k = o->ks[ki];
		char svc[16];
		snprintf(svc, sizeof svc, "t%d", k);
		struct fleet *f = fleet_open(d.port, k, "gm", 0, 0);
		double rb[16], rg[16];
		/* per repeat, for both sides alike: p50, p99 and max of its
		 * samples; the table shows the medians of the p50s and p99s
		 * over the repeats and the largest max */
		double b50[16], b99[16], bmax[16], w50[16], s50[16];
		struct gm_result gr[16];
		for (int i = 0; i < o->repeats; i++) {
			struct samples lat = { 0 }, wait = { 0 }, to_start = { 0 };
			struct jobrun jr = { .job = "{\"command\":\"stamp\"}",
					     .depth = 1,
					     .lat = &lat,
					     .wait = &wait,
					     .to_start = &to_start };
			rb[i] = run_jobs(f, &d, &jr, svc, o->rate_sec, NULL, NULL);
			b50[i] = bs_pct(&lat, 0.5);
			b99[i] = bs_pct(&lat, 0.99);
			bmax[i] = bs_max(&lat);
			w50[i] = bs_pct(&wait, 0.5);
			s50[i] = bs_pct(&to_start, 0.5);
			bs_free(&lat);
			bs_free(&wait);
			bs_free(&to_start);
			gr[i] = run_gearman(o, k, o->rate_sec, gport);
			rg[i] = gr[i].rate;
		}
		char conns[256];
		bu_handler_spread(&d, conns, sizeof conns);
		fleet_close(f);
		struct spread b = spread_of(rb, o->repeats), gs = spread_of(rg, o->repeats);
		double p50s[16], p99s[16], maxs[16];
		for (int i = 0; i < o->repeats; i++) {
			p50s[i] = gr[i].p50;
			p99s[i] = gr[i].p99;
			maxs[i] = gr[i].max;
		}
		struct spread g50 = spread_of(p50s, o->repeats), l50 = spread_of(b50, o->repeats);
		double g99 = spread_of(p99s, o->repeats).med,
		       gmax = spread_of(maxs, o->repeats).max;
		double l99 = spread_of(b99, o->repeats).med, lmax = spread_of(bmax, o->repeats).max;
		wins += b.med > gs.med;
		lat_wins += l50.med < g50.med;
		fprintf(md,
			"| %d | **%.0f** (%.0f–%.0f) | %.0f (%.0f–%.0f) | **%.2f×** | %.0f "
			"(%.0f–%.0f) "
			"/ %.0f / %.0f µs | %.0f (%.0f–%.0f) / %.0f / %.0f µs | %.0f / %.0f µs |\n",
			k, b.med, b.min, b.max, gs.med, gs.min, gs.max, b.med / gs.med, l50.med,
			l50.min, l50.max, l99, lmax, g50.med, g50.min, g50.max, g99, gmax,
			spread_of(w50, o->repeats).med, spread_of(s50, o->repeats).med);
		fprintf(dat, "%d %.0f %.0f %.0f %.0f\n", k, b.med, gs.med, l50.med, g50.med);
		fprintf(stderr,
			"row7: K=%d broker %.0f/s p50 %.0f us (WANT->OFFER %.0f, OFFER->start "
			"%.0f; "
			"connections per handler %s), gearmand %.0f/s p50 %.0f us\n",
			k, b.med, l50.med, spread_of(w50, o->repeats).med,
			spread_of(s50, o->repeats).med, conns, gs.med, g50.med);
	}
	fprintf(md,
		"\nMore jobs/s than gearmand at %d of %d K, lower median submission-to-start "
		"latency at %d of %d (the execserver with %d handlers).\n",
		wins, o->nk, lat_wins, o->nk, bu_daemon_pids(&d, pids, 65) - 1);
	kill(g, SIGTERM);
	waitpid(g, NULL, 0);
	FILE *sm = bu_out(o->out, "summary-7");
	fprintf(sm,
		"| 7 | gearmand with K libgearman workers against the broker, same K | more jobs/s "
		"and lower submission-to-start latency "
		"| more jobs/s at %d of %d K, lower median latency at %d of %d — **%s** |\n",
		wins, o->nk, lat_wins, o->nk,
		wins == o->nk && lat_wins == o->nk ? "met" : "missed");
	fclose(sm);
	fclose(dat);
	fclose(md);
	bu_stop(&d);
}

void bench_flood(struct fleet *f, int depth, const char *service, const char *job)
{
	static struct jobrun jr;
	memset(&jr, 0, sizeof jr);
	jr.job = job;
	jr.depth = depth;
	f->user = &jr;
	f->on_msg = job_msg;
	for (int i = 0; i < f->n; i++) {
		f->c[i].service = service;
		for (int k = 0; k < depth; k++)
			job_want(&jr, &f->c[i]);
	}
}

/* ---- row 8 ---- */

void row_fairness(const struct bench_opts *o)
{
	const char *body = "waitgroups:\n"
			   "  two: {processes: 2}\n"
			   "services:\n"
			   "  fair:\n"
			   "    waitgroup: two\n"
			   "    commands:\n"
			   "      true: {prog: /bin/true}\n"
			   "      sleep: {prog: /bin/sleep}\n";
	struct es_daemon d;
	bu_start(&d, o->handlers, body);
	FILE *md = bu_out(o->out, "row8");

	/* three clients at equal priority, four wants each */
	struct fleet *f = fleet_open(d.port, 3, "fair", 0, 0);
	struct jobrun jr = { .job = "{\"command\":\"true\"}", .depth = 4, .limit = o->fair_jobs };
	f->user = &jr;
	f->on_msg = job_msg;
	for (int i = 0; i < 3; i++) {
		f->c[i].service = "fair";
		for (int k = 0; k < 4; k++)
			job_want(&jr, &f->c[i]);
	}
	long long t0 = bu_now_ns();
	fleet_run(f, t0 + 300000000000LL, 20, limit_tick);
	double el = (double)(bu_now_ns() - t0) / 1e9;
	long long total = 0;
	for (int i = 0; i < 3; i++)
		total += f->c[i].count;
	fprintf(md, "| client | jobs | share | deviation from 1/3 |\n|---|---|---|---|\n");
	double worst = 0;
	for (int i = 0; i < 3; i++) {
		double share = (double)f->c[i].count / (double)total;
		double dev = (share - 1.0 / 3.0) * 3.0; /* relative to a third */
		if (dev < 0 ? -dev > worst : dev > worst)
			worst = dev < 0 ? -dev : dev;
		fprintf(md, "| %c | %lld | %.4f | %+.2f %% |\n", 'a' + i, f->c[i].count, share,
			100 * dev);
	}
	fprintf(md,
		"\n%lld jobs in %.1f s (%lld failed); largest deviation %.2f %% of a third "
		"(target within 2 %%: %s).\n\n",
		total, el, jr.failed, 100 * worst, worst <= 0.02 ? "met" : "missed");
	jr.stop_new = 1;
	f->stop = 0;
	fleet_run(f, bu_now_ns() + 10000000000LL, 20, drain_tick);
	fleet_close(f);

	/* an interactive client against a background flood of 200 ms jobs */
	struct fleet *bg = fleet_open(d.port, 1, "flood", 0, 0);
	struct jobrun fj = { .job = "{\"command\":\"sleep\",\"args\":[\"0.2\"]}", .depth = 8 };
	bg->user = &fj;
	bg->on_msg = job_msg;
	bg->c[0].service = "fair";
	bg->c[0].priority = -2;
	for (int k = 0; k < 8; k++)
		job_want(&fj, &bg->c[0]);
	fleet_run(bg, bu_now_ns() + 500000000LL, 0, NULL);
	struct tclient *ic = tc_connect(d.port, "interactive");
	struct samples w = { 0 };
	unsigned seed = 42;
	for (int s = 0; s < 30 && ic; s++) {
		fleet_run(bg, bu_now_ns() + (50 + rand_r(&seed) % 250) * 1000000LL, 0, NULL);
		char id[16];
		snprintf(id, sizeof id, "i%d", s);
		long long t = bu_now_ns();
		tc_send(ic,
			"{\"type\":\"WANT\",\"job_id\":\"%s\",\"service\":\"fair\",\"priority\":2}",
			id);
		struct json_object *offer = fleet_expect_on(bg, ic, "OFFER", t + 5000000000LL);
		if (!offer)
			break;
		bs_add(&w, (double)(bu_now_ns() - t) / 1000.0);
		tc_send(ic,
			"{\"type\":\"JOB\",\"job_id\":\"%s\",\"token\":\"%s\",\"job\":{\"command\":"
			"\"true\"}}",
			id, tc_str(offer, "token"));
		json_object_put(offer);
		struct json_object *done = fleet_expect_on(bg, ic, "DONE", t + 5000000000LL);
		if (done)
			json_object_put(done);
	}
	fprintf(md, "| interactive client (priority 2) against a flood (priority −2, 8 wants, "
		    "`sleep 0.2` jobs, 2 slots) "
		    "| samples | wait p50 | p99 | max | bound (one job: 200 ms) "
		    "|\n|---|---|---|---|---|---|\n");
	fprintf(md, "| WANT → OFFER | %zu | %.1f ms | %.1f ms | %.1f ms | %s |\n", w.n,
		bs_pct(&w, 0.5) / 1000, bs_pct(&w, 0.99) / 1000, bs_max(&w) / 1000,
		bs_max(&w) <= 200000 ? "met" : "missed");
	FILE *sm = bu_out(o->out, "summary-8");
	fprintf(sm,
		"| 8 | fairness: 3 clients, 2 slots, %lld jobs; interactive against a flood | "
		"shares within 2 %% of a third; wait ≤ one job (200 ms) "
		"| largest deviation %.2f %%; interactive wait p50 %.1f ms, max %.1f ms — **%s** "
		"|\n",
		total, 100 * worst, bs_pct(&w, 0.5) / 1000, bs_max(&w) / 1000,
		worst <= 0.02 && w.n && bs_max(&w) <= 200000 ? "met" : "missed");
	fclose(sm);
	tc_close(ic);
	fj.stop_new = 1;
	bg->stop = 0;
	fleet_run(bg, bu_now_ns() + 10000000000LL, 20, drain_tick);
	fleet_close(bg);
	bs_free(&w);
	fclose(md);
	bu_stop(&d);
}
