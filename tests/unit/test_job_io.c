/*
 * test_job_io.c - the I/O of one job (src/job/job_io.c) against the pipe
 * server (tests/lib/pipe_server.c) on loopback, with real processes
 * started by spawn_process (cat, sh) or with the test itself playing the
 * program on the pipes job_io_child_fds returns.
 *
 * The test plays the job runner: spawn with the child's fds, close them,
 * reap the leader (waitpid on its pid from a 5 ms tick), kill its group,
 * job_io_process_ended.  Invariants checked throughout: each completion
 * once, never from inside a job_io_* call (in_api), nothing after abort,
 * no transfer left once the loop ran (transfer_loop_count).
 *
 * JOB_IO_TEST_MIB sets the size of the big round trip (default 100), e.g.
 * 2 under valgrind.  Figures are printed as "figure:".
 * Exit status: 0 when every test passed, 1 otherwise.
 */
#include "autoconfig.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <curl/curl.h>
#include <event2/event.h>
#include <openssl/evp.h>

#include "harness.h"
#include "job/job_io.h"
#include "job/job_spec.h"
#include "job/spawn.h"
#include "job/transfer.h"
#include "pipe_server.h"
#include "suite.h"

#define MiB (1024ULL * 1024ULL)
#define CAP JOB_IO_STDOUT_CAP

/* RSS says nothing under AddressSanitizer (quarantine, shadow memory). */
#ifdef __SANITIZE_ADDRESS__
#define RSS_LIMIT_KIB LONG_MAX
#else
#define RSS_LIMIT_KIB (16 * 1024L)
#endif

static struct pipe_server srv;
static uint64_t big_bytes = 100 * MiB;
static int in_api; /* set around job_io_* calls: no completion may run then */
static char tmproot[64];
static char *const envp[] = { "PATH=/usr/bin:/bin", NULL };

static uint64_t now_ms(void)
{
	return (uint64_t)harness_now_ms();
}

/* This process's resident set (KiB). */
static long rss_kib(void)
{
	return harness_proc_kib(getpid(), "VmRSS");
}

static void sha256_hex(const void *data, size_t len, char hex[65])
{
	unsigned char md[32];
	unsigned int mdlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();

	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	EVP_DigestUpdate(ctx, data, len);
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	EVP_MD_CTX_free(ctx);
	pipe_sha256_hex(md, hex);
}

/* A port on which nothing listens. */
static int closed_port(void)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof sa;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

static int fd_is_open(int fd)
{
	return fcntl(fd, F_GETFD) != -1;
}

/* Writes len bytes into a non-blocking pipe, running the loop while it is
 * full; returns how many times it was full, or -1 on an error. */
static long write_all(struct event_base *base, int fd, const char *buf, size_t len)
{
	long full = 0;

	while (len > 0) {
		ssize_t w = write(fd, buf, len);

		if (w < 0 && errno == EAGAIN) {
			full++;
			event_base_loop(base, EVLOOP_ONCE);
			continue;
		}
		if (w <= 0)
			return -1;
		buf += w;
		len -= (size_t)w;
	}
	return full;
}

/* ---- the test's job runner ------------------------------------------------- */

struct rec {
	int n, ok, retryable, from_api;
	char code[32], msg[1024];
	uint64_t bytes;
	uint64_t at_ms;
};

struct job;

struct fixture {
	struct event_base *base;
	struct transfer_loop *loop;
	struct event *tick;
	struct job *job;
	long rss0, rss_max;
	char dir[128];
};

struct job {
	struct fixture *fx;
	struct job_spec spec;
	struct job_file ins[8], outs[8];
	char urls[20][256];
	unsigned nurls;
	struct job_io *io;
	struct rec inputs, in, out, outputs;
	pid_t pid;
	int status, reaped, ended_called;
	int kill_on_stdin_fail; /* the runner's reaction to stdin_failed */
	int kill_on_stdout_fail;
	int ended_before_kill; /* the program ended before that kill */
	int free_in_stdout_cb;
	int in_fd, out_fd; /* the child's ends, when the test plays it */
	int fds_rc;
};

static void record(struct rec *c, const struct job_io_result *r)
{
	c->n++;
	if (in_api)
		c->from_api = 1;
	c->ok = r->ok;
	c->retryable = r->retryable;
	snprintf(c->code, sizeof c->code, "%s", r->code ? r->code : "");
	snprintf(c->msg, sizeof c->msg, "%s", r->message ? r->message : "(null)");
	c->bytes = r->bytes;
	c->at_ms = now_ms();
	/* the contract's shape of a result */
	CU_ASSERT_TRUE(r->message != NULL);
	if (r->ok) {
		CU_ASSERT_PTR_NULL(r->code);
		CU_ASSERT_STRING_EQUAL(r->message, "");
		CU_ASSERT_EQUAL(r->retryable, 0);
	} else {
		CU_ASSERT_PTR_NOT_NULL(r->code);
		CU_ASSERT_TRUE(r->message[0] != '\0');
	}
}

/* waitpid for the leader (flags: WNOHANG or 0); 1 if it was reaped.  Every
 * program here exists: spawn_reaped must report that it ran. */
static int reap(struct job *j, int flags)
{
	if (waitpid(j->pid, &j->status, flags) != j->pid)
		return 0;
	j->reaped = 1;
	CU_ASSERT_EQUAL(spawn_reaped(j->pid, j->status), 0);
	return 1;
}

/* Waits up to ms for the leader to end on its own; 1 if it did. */
static int leader_ends_within(struct job *j, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	while (now_ms() < end) {
		if (j->reaped || reap(j, WNOHANG))
			return 1;
		usleep(5000);
	}
	return 0;
}

static void cb_inputs(void *arg, const struct job_io_result *r)
{
	record(&((struct job *)arg)->inputs, r);
}

static void cb_stdin(void *arg, const struct job_io_result *r)
{
	struct job *j = arg;

	record(&j->in, r);
	if (!r->ok && j->kill_on_stdin_fail && j->pid > 0 && !j->reaped) {
		/* a program that got EOF here would end at once: give it time */
		j->ended_before_kill = leader_ends_within(j, 300);
		kill(-j->pid, SIGKILL);
	}
}

static void cb_stdout(void *arg, const struct job_io_result *r)
{
	struct job *j = arg;

	record(&j->out, r);
	if (!r->ok && j->kill_on_stdout_fail && j->pid > 0 && !j->reaped)
		kill(-j->pid, SIGKILL);
	if (j->free_in_stdout_cb) {
		job_io_free(j->io);
		j->io = NULL;
	}
}

static void cb_outputs(void *arg, const struct job_io_result *r)
{
	record(&((struct job *)arg)->outputs, r);
}

/* The runner's SIGCHLD: reap the leader, kill its group, tell job_io. */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct fixture *fx = arg;
	struct job *j = fx->job;
	long rss = rss_kib();

	if (rss > fx->rss_max)
		fx->rss_max = rss;
	if (j == NULL || j->pid <= 0 || j->ended_called)
		return;
	if (!j->reaped && !reap(j, WNOHANG))
		return;
	kill(-j->pid, SIGKILL);
	j->ended_called = 1;
	if (j->io) {
		in_api = 1;
		job_io_process_ended(j->io, WIFEXITED(j->status) && WEXITSTATUS(j->status) == 0);
		in_api = 0;
	}
}

static void job_init(struct job *j, struct fixture *fx)
{
	memset(j, 0, sizeof *j);
	j->fx = fx;
	j->spec.inputs = j->ins;
	j->spec.outputs = j->outs;
	j->in_fd = j->out_fd = -1;
	j->pid = -1;
	fx->job = j;
}

/* A fixture (event base, transfer loop, private directory) and j, its
 * job, made empty.  Returns 0, or -1. */
static int fx_open(struct fixture *fx, struct job *j)
{
	struct timeval tv = { 0, 5000 };
	static unsigned seq;

	memset(fx, 0, sizeof *fx);
	fx->base = event_base_new();
	fx->loop = fx->base ? transfer_loop_new(fx->base) : NULL;
	if (fx->loop == NULL)
		return -1;
	fx->tick = event_new(fx->base, -1, EV_PERSIST, on_tick, fx);
	event_add(fx->tick, &tv);
	snprintf(fx->dir, sizeof fx->dir, "%s/job%u", tmproot, ++seq);
	if (mkdir(fx->dir, 0700) != 0)
		return -1;
	fx->rss0 = fx->rss_max = rss_kib();
	job_init(j, fx);
	return 0;
}

static void run_for(struct fixture *fx, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	while (now_ms() < end)
		event_base_loop(fx->base, EVLOOP_ONCE);
}

static void rm_tree(const char *dir)
{
	char cmd[300];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
}

static void job_close(struct job *j);

/* Closes the fixture's job, then the fixture. */
static void fx_close(struct fixture *fx)
{
	if (fx->job)
		job_close(fx->job);
	/* released transfers go on the loop's next turn */
	run_for(fx, 30);
	CU_ASSERT_EQUAL(transfer_loop_count(fx->loop), 0);
	transfer_loop_free(fx->loop);
	event_free(fx->tick);
	event_base_free(fx->base);
	rm_tree(fx->dir);
}

static void add_file(struct job *j, int out, const char *name, const char *url)
{
	struct job_file *f = out ? &j->outs[j->spec.noutputs++] : &j->ins[j->spec.ninputs++];

	f->name = (char *)name;
	f->url = (char *)url;
}

static struct job_io *job_io_open(struct job *j, uint64_t input_max)
{
	struct job_io_callbacks cb = { cb_inputs, cb_stdin, cb_stdout, cb_outputs, j };

	j->io = job_io_new(j->fx->base, j->fx->loop, &j->spec, j->fx->dir, input_max, &cb);
	return j->io;
}

/* The runner's start: fds, spawn, close the child's ends. */
static int job_spawn(struct job *j, const char *path, char *const argv[])
{
	struct spawn_request req = {
		.path = path, .argv = argv, .envp = envp, .cwd = j->fx->dir, .stderr_fd = -1
	};
	int in = -1, out = -1, err = 0;

	in_api = 1;
	j->fds_rc = job_io_child_fds(j->io, &in, &out);
	in_api = 0;
	if (j->fds_rc != 0)
		return -1;
	req.stdin_fd = in;
	req.stdout_fd = out;
	j->pid = spawn_process(&req, &err);
	if (in >= 0)
		close(in);
	close(out);
	return j->pid > 0 ? 0 : -1;
}

static int sh(struct job *j, const char *script)
{
	char *argv[] = { "sh", "-c", (char *)script, NULL };

	return job_spawn(j, "/bin/sh", argv);
}

/* The test plays the program: it keeps the child's ends. */
static int job_fds(struct job *j)
{
	in_api = 1;
	j->fds_rc = job_io_child_fds(j->io, &j->in_fd, &j->out_fd);
	in_api = 0;
	return j->fds_rc;
}

static void job_ended(struct job *j, int success)
{
	in_api = 1;
	job_io_process_ended(j->io, success);
	in_api = 0;
}

enum {
	W_IN = 1,
	W_OUT = 2,
	W_REAP = 4,
	W_INPUTS = 8,
	W_OUTPUTS = 16
};

static int job_run(struct job *j, unsigned what, int timeout_ms)
{
	uint64_t end = now_ms() + (uint64_t)timeout_ms;

	for (;;) {
		int ok = (!(what & W_IN) || j->in.n) && (!(what & W_OUT) || j->out.n) &&
			 (!(what & W_REAP) || j->ended_called) &&
			 (!(what & W_INPUTS) || j->inputs.n) &&
			 (!(what & W_OUTPUTS) || j->outputs.n);

		if (ok)
			return 0;
		if (now_ms() > end)
			return -1;
		event_base_loop(j->fx->base, EVLOOP_ONCE);
	}
}

static void job_close(struct job *j)
{
	if (j->pid > 0 && !j->reaped) {
		kill(-j->pid, SIGKILL);
		reap(j, 0);
	}
	if (j->in_fd >= 0)
		close(j->in_fd);
	if (j->out_fd >= 0)
		close(j->out_fd);
	j->in_fd = j->out_fd = -1;
	job_io_free(j->io);
	j->io = NULL;
	j->fx->job = NULL;
}

static void check_once(struct job *j)
{
	CU_ASSERT_TRUE(j->inputs.n <= 1);
	CU_ASSERT_TRUE(j->in.n <= 1);
	CU_ASSERT_TRUE(j->out.n <= 1);
	CU_ASSERT_TRUE(j->outputs.n <= 1);
	CU_ASSERT_FALSE(j->inputs.from_api || j->in.from_api || j->out.from_api ||
			j->outputs.from_api);
}

/* urls[0] and urls[19] are the tests' own; 1..18 are handed out here. */
static char *next_url(struct job *j)
{
	CU_ASSERT_FATAL(j->nurls < 18);
	return j->urls[1 + j->nurls++];
}

static char *reg_in(struct job *j, const char *name, const struct pipe_endpoint *e)
{
	char *url = next_url(j);

	if (pipe_server_in(&srv, name, e, url, 256) != 0)
		return NULL;
	return url;
}

static char *reg_out(struct job *j, const char *name, const struct pipe_endpoint *e)
{
	char *url = next_url(j);

	if (pipe_server_out(&srv, name, e, url, 256) != 0)
		return NULL;
	return url;
}

static double mb_per_s(uint64_t bytes, uint64_t ms)
{
	return ms ? (double)bytes / (double)MiB / ((double)ms / 1000.0) : 0.0;
}

/* ====================================================================== */

/* stdin URL -> cat -> stdout URL, big: content, chunked, bounded memory. */
static void test_round_trip_big(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct job j;
	struct pipe_result pr;
	char want[65], *argv[] = { "cat", NULL };
	unsigned char head[CAP];
	const char *prefix;
	size_t len;
	int trunc, streamed;
	uint64_t t0;

	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	e.seed = 1;
	e.size = big_bytes;
	CU_ASSERT_FATAL((j.spec.stdin_url = reg_in(&j, "rt-in", &e)) != NULL);
	CU_ASSERT_FATAL((j.spec.stdout_url = reg_out(&j, "rt-out", NULL)) != NULL);
	pipe_random_sha256(e.seed, e.size, want);
	CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
	t0 = now_ms();
	CU_ASSERT_FATAL(job_spawn(&j, "/bin/cat", argv) == 0);
	CU_ASSERT_EQUAL(job_run(&j, W_IN | W_OUT | W_REAP, 300000), 0);
	t0 = now_ms() - t0;
	check_once(&j);
	CU_ASSERT_TRUE(j.in.ok);
	CU_ASSERT_EQUAL(j.in.bytes, big_bytes);
	CU_ASSERT_TRUE(j.out.ok);
	CU_ASSERT_EQUAL(j.out.bytes, big_bytes);
	CU_ASSERT_TRUE(WIFEXITED(j.status) && WEXITSTATUS(j.status) == 0);
	CU_ASSERT_EQUAL(pipe_server_result(&srv, "rt-out", &pr), 0);
	CU_ASSERT_EQUAL(pr.requests, 1);
	CU_ASSERT_EQUAL(pr.length, big_bytes);
	CU_ASSERT_STRING_EQUAL(pr.sha256, want);
	CU_ASSERT_TRUE(pr.chunked);
	CU_ASSERT_EQUAL(pr.content_length, -1);
	CU_ASSERT_EQUAL(pipe_server_result(&srv, "rt-in", &pr), 0);
	CU_ASSERT_EQUAL(pr.requests, 1);
	prefix = job_io_stdout_prefix(j.io, &len, &trunc, &streamed);
	pipe_random_fill(e.seed, 0, head, sizeof head);
	CU_ASSERT_EQUAL(len, CAP);
	CU_ASSERT_TRUE(memcmp(prefix, head, CAP) == 0);
	CU_ASSERT_TRUE(trunc);
	CU_ASSERT_TRUE(streamed);
	CU_ASSERT_TRUE(fx.rss_max - fx.rss0 < RSS_LIMIT_KIB);
	printf("\n    figure: stdin GET -> cat -> stdout chunked PUT, %llu MiB: %.1f MiB/s, "
	       "RSS growth %ld KiB ",
	       (unsigned long long)(big_bytes / MiB), mb_per_s(big_bytes, t0),
	       fx.rss_max - fx.rss0);
	fx_close(&fx);
}

/* stdin only, small: the program gets EOF and the exact body. */
static void test_stdin_small_no_stdout_url(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct job j;
	char *argv[] = { "cat", NULL };
	unsigned char want[3000];
	const char *prefix;
	size_t len;
	int trunc, streamed;

	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	e.seed = 2;
	e.size = sizeof want;
	e.chunked = 1;
	CU_ASSERT_FATAL((j.spec.stdin_url = reg_in(&j, "small-in", &e)) != NULL);
	CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
	CU_ASSERT_FATAL(job_spawn(&j, "/bin/cat", argv) == 0);
	CU_ASSERT_EQUAL(job_run(&j, W_IN | W_OUT | W_REAP, 20000), 0);
	check_once(&j);
	CU_ASSERT_TRUE(j.in.ok);
	CU_ASSERT_TRUE(j.out.ok);
	CU_ASSERT_EQUAL(j.out.bytes, sizeof want);
	pipe_random_fill(e.seed, 0, want, sizeof want);
	prefix = job_io_stdout_prefix(j.io, &len, &trunc, &streamed);
	CU_ASSERT_EQUAL(len, sizeof want);
	CU_ASSERT_TRUE(memcmp(prefix, want, sizeof want) == 0);
	CU_ASSERT_FALSE(trunc);
	CU_ASSERT_FALSE(streamed);
	fx_close(&fx);
}

/* No stdin URL: stdin_fd is -1, stdin_done(ok) comes from the loop; big
 * output without a URL is counted and discarded. */
static void test_no_urls_big_output(void)
{
	struct fixture fx;
	struct job j;
	const char *prefix;
	size_t len;
	int trunc, streamed, in = 7, out = -1;

	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
	in_api = 1;
	CU_ASSERT_EQUAL(job_io_child_fds(j.io, &in, &out), 0);
	in_api = 0;
	CU_ASSERT_EQUAL(in, -1);
	CU_ASSERT_TRUE(out >= 0);
	CU_ASSERT_EQUAL(j.in.n, 0); /* not from inside the call */
	close(out);
	{
		char *argv[] = { "sh", "-c", "head -c 3000000 /dev/zero; echo tail", NULL };
		struct spawn_request req = { .path = "/bin/sh",
					     .argv = argv,
					     .envp = envp,
					     .cwd = fx.dir,
					     .stdin_fd = -1,
					     .stderr_fd = -1 };
		int err = 0, p[2];

		/* a second job_io_child_fds is refused; use a fresh pipe pair
		 * through a second job_io instead */
		in_api = 1;
		CU_ASSERT_EQUAL(job_io_child_fds(j.io, &in, &out), -1);
		in_api = 0;
		CU_ASSERT_EQUAL(errno, EALREADY);
		job_io_free(j.io);
		j.in.n = 0;
		CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
		in_api = 1;
		CU_ASSERT_FATAL(job_io_child_fds(j.io, &p[0], &p[1]) == 0);
		in_api = 0;
		req.stdout_fd = p[1];
		j.pid = spawn_process(&req, &err);
		close(p[1]);
		CU_ASSERT_FATAL(j.pid > 0);
	}
	CU_ASSERT_EQUAL(job_run(&j, W_IN | W_OUT | W_REAP, 20000), 0);
	check_once(&j);
	CU_ASSERT_TRUE(j.in.ok);
	CU_ASSERT_EQUAL(j.in.bytes, 0);
	CU_ASSERT_TRUE(j.out.ok);
	CU_ASSERT_EQUAL(j.out.bytes, 3000005);
	prefix = job_io_stdout_prefix(j.io, &len, &trunc, &streamed);
	CU_ASSERT_EQUAL(len, CAP);
	CU_ASSERT_TRUE(prefix[0] == 0 && prefix[CAP - 1] == 0);
	CU_ASSERT_TRUE(trunc);
	CU_ASSERT_FALSE(streamed);
	fx_close(&fx);
}

/* A failing program with small output: nothing is PUT. */
static void test_fail_small_output_no_put(void)
{
	struct fixture fx;
	struct job j;
	struct pipe_result pr;
	const char *prefix;
	size_t len;
	int trunc, streamed;

	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	CU_ASSERT_FATAL((j.spec.stdout_url = reg_out(&j, "fail-small", NULL)) != NULL);
	CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
	CU_ASSERT_FATAL(sh(&j, "echo hello; exit 3") == 0);
	CU_ASSERT_EQUAL(job_run(&j, W_IN | W_OUT | W_REAP, 20000), 0);
	run_for(&fx, 100);
	check_once(&j);
	CU_ASSERT_TRUE(WIFEXITED(j.status) && WEXITSTATUS(j.status) == 3);
	CU_ASSERT_TRUE(j.out.ok); /* dropped: nothing failed in stdout */
	prefix = job_io_stdout_prefix(j.io, &len, &trunc, &streamed);
	CU_ASSERT_EQUAL(len, 6);
	CU_ASSERT_TRUE(memcmp(prefix, "hello\n", 6) == 0);
	CU_ASSERT_FALSE(trunc);
	CU_ASSERT_FALSE(streamed);
	CU_ASSERT_EQUAL(pipe_server_result(&srv, "fail-small", &pr), 0);
	CU_ASSERT_EQUAL(pr.requests, 0);
	fx_close(&fx);
}

/* A program that fails after more than CAP bytes: the chunked PUT was
 * committed and is aborted; the consumer never sees a complete body. */
static void fail_after_commit(const char *script, const char *name, int want_signal)
{
	struct fixture fx;
	struct job j;
	struct pipe_result pr;
	const char *prefix;
	size_t len;
	int trunc, streamed;

	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	CU_ASSERT_FATAL((j.spec.stdout_url = reg_out(&j, name, NULL)) != NULL);
	CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
	CU_ASSERT_FATAL(sh(&j, script) == 0);
	CU_ASSERT_EQUAL(job_run(&j, W_IN | W_OUT | W_REAP, 20000), 0);
	run_for(&fx, 300); /* time for the server to see whatever it gets */
	check_once(&j);
	if (want_signal) {
		CU_ASSERT_TRUE(WIFSIGNALED(j.status));
	} else {
		CU_ASSERT_TRUE(WIFEXITED(j.status) && WEXITSTATUS(j.status) == 1);
	}
	CU_ASSERT_FALSE(j.out.ok);
	CU_ASSERT_STRING_EQUAL(j.out.code, JOB_IO_E_STDOUT);
	CU_ASSERT_FALSE(j.out.retryable);
	CU_ASSERT_TRUE(strstr(j.out.msg, "aborted") != NULL);
	prefix = job_io_stdout_prefix(j.io, &len, &trunc, &streamed);
	CU_ASSERT_EQUAL(len, CAP);
	CU_ASSERT_TRUE(prefix[0] == 'x' && prefix[CAP - 1] == 'x');
	CU_ASSERT_TRUE(trunc);
	CU_ASSERT_TRUE(streamed);
	/* evhttp hands a PUT over only once its body is complete */
	CU_ASSERT_EQUAL(pipe_server_result(&srv, name, &pr), 0);
	CU_ASSERT_EQUAL(pr.requests, 0);
	fx_close(&fx);
}

#define XS                                                                     \
	"x=$(printf '%01000d' 0 | tr 0 x); for i in 1 2 3 4 5 6 7 8 9 10; do " \
	"printf %s \"$x\"; done; "

/* The pause lets the output be read (and the upload committed) before the
 * failure, whatever the machine's speed; the other order has tests of its
 * own (test_fail_before_read_driven, test_fail_before_eof_driven). */
static void test_fail_after_commit_exit(void)
{
	fail_after_commit(XS "sleep 0.5; exit 1", "fail-big-exit", 0);
}

/* EOF first, the failure 300 ms later: the final chunk must wait. */
static void test_fail_after_commit_eof_first(void)
{
	fail_after_commit(XS "exec >&-; sleep 0.3; exit 1", "fail-big-eof", 0);
}

static void test_fail_after_commit_signal(void)
{
	fail_after_commit(XS "sleep 0.5; kill -9 $$", "fail-big-sig", 1);
}

/* The process failure is known before EOF (a descendant still holds the
 * pipe): the PUT is aborted at once, the pipe drained, stdout_done at EOF. */
static void test_fail_before_eof_driven(void)
{
	struct fixture fx;
	struct job j;
	struct pipe_result pr;
	char buf[6000];
	int streamed;

	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	CU_ASSERT_FATAL((j.spec.stdout_url = reg_out(&j, "fail-drv", NULL)) != NULL);
	CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
	CU_ASSERT_FATAL(job_fds(&j) == 0);
	memset(buf, 'y', sizeof buf);
	CU_ASSERT_EQUAL(write(j.out_fd, buf, sizeof buf), (ssize_t)sizeof buf);
	run_for(&fx, 200);
	job_io_stdout_prefix(j.io, NULL, NULL, &streamed);
	CU_ASSERT_TRUE(streamed);
	job_ended(&j, 0);
	run_for(&fx, 200);
	CU_ASSERT_EQUAL(j.out.n, 0); /* EOF not read yet */
	/* the pipe is drained: 1 MiB more goes through without a reader */
	fcntl(j.out_fd, F_SETFL, O_NONBLOCK);
	for (int i = 0; i < 175; i++)
		CU_ASSERT_TRUE(write_all(fx.base, j.out_fd, buf, sizeof buf) >= 0);
	close(j.out_fd);
	j.out_fd = -1;
	CU_ASSERT_EQUAL(job_run(&j, W_IN | W_OUT, 10000), 0);
	run_for(&fx, 200);
	check_once(&j);
	CU_ASSERT_TRUE(j.in.ok);
	CU_ASSERT_FALSE(j.out.ok);
	CU_ASSERT_STRING_EQUAL(j.out.code, JOB_IO_E_STDOUT);
	CU_ASSERT_EQUAL(j.out.bytes, 176 * sizeof buf);
	CU_ASSERT_EQUAL(pipe_server_result(&srv, "fail-drv", &pr), 0);
	CU_ASSERT_EQUAL(pr.requests, 0);
	fx_close(&fx);
}

/* The failure is known before the output that outgrows the buffer was
 * read: nothing is committed, nothing PUT; the prefix is still kept. */
static void test_fail_before_read_driven(void)
{
	struct fixture fx;
	struct job j;
	struct pipe_result pr;
	char buf[10000];
	const char *prefix;
	size_t len;
	int trunc, streamed;

	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	CU_ASSERT_FATAL((j.spec.stdout_url = reg_out(&j, "fail-unread", NULL)) != NULL);
	CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
	CU_ASSERT_FATAL(job_fds(&j) == 0);
	memset(buf, 'u', sizeof buf);
	CU_ASSERT_EQUAL(write(j.out_fd, buf, sizeof buf), (ssize_t)sizeof buf);
	close(j.out_fd);
	j.out_fd = -1;
	job_ended(&j, 0); /* before the loop read anything */
	CU_ASSERT_EQUAL(job_run(&j, W_IN | W_OUT, 10000), 0);
	run_for(&fx, 200);
	check_once(&j);
	CU_ASSERT_TRUE(j.out.ok);
	CU_ASSERT_EQUAL(j.out.bytes, sizeof buf);
	prefix = job_io_stdout_prefix(j.io, &len, &trunc, &streamed);
	CU_ASSERT_EQUAL(len, CAP);
	CU_ASSERT_TRUE(prefix[0] == 'u' && prefix[CAP - 1] == 'u');
	CU_ASSERT_TRUE(trunc);
	CU_ASSERT_FALSE(streamed);
	CU_ASSERT_EQUAL(pipe_server_result(&srv, "fail-unread", &pr), 0);
	CU_ASSERT_EQUAL(pr.requests, 0);
	fx_close(&fx);
}

/* Success known before the output is read, output > CAP: streamed, and
 * the final chunk follows EOF at once. */
static void test_success_before_read_driven(void)
{
	struct fixture fx;
	struct job j;
	struct pipe_result pr;
	char buf[10000], hex[65];

	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	CU_ASSERT_FATAL((j.spec.stdout_url = reg_out(&j, "ok-unread", NULL)) != NULL);
	CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
	CU_ASSERT_FATAL(job_fds(&j) == 0);
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (char)('a' + i % 26);
	CU_ASSERT_EQUAL(write(j.out_fd, buf, sizeof buf), (ssize_t)sizeof buf);
	close(j.out_fd);
	j.out_fd = -1;
	job_ended(&j, 1);
	CU_ASSERT_EQUAL(job_run(&j, W_IN | W_OUT, 10000), 0);
	check_once(&j);
	CU_ASSERT_TRUE(j.out.ok);
	CU_ASSERT_EQUAL(pipe_server_result(&srv, "ok-unread", &pr), 0);
	CU_ASSERT_EQUAL(pr.requests, 1);
	CU_ASSERT_EQUAL(pr.length, sizeof buf);
	CU_ASSERT_TRUE(pr.chunked);
	sha256_hex(buf, sizeof buf, hex);
	CU_ASSERT_STRING_EQUAL(pr.sha256, hex);
	fx_close(&fx);
}

/* Success with output <= CAP: a PUT with Content-Length, exact body. */
static void put_small(const char *script, const char *name, const char *want, size_t wlen)
{
	struct fixture fx;
	struct job j;
	struct pipe_result pr;
	char hex[65];
	const char *prefix;
	size_t len;
	int trunc, streamed;

	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	CU_ASSERT_FATAL((j.spec.stdout_url = reg_out(&j, name, NULL)) != NULL);
	CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
	CU_ASSERT_FATAL(sh(&j, script) == 0);
	CU_ASSERT_EQUAL(job_run(&j, W_IN | W_OUT | W_REAP, 20000), 0);
	check_once(&j);
	CU_ASSERT_TRUE(j.out.ok);
	CU_ASSERT_EQUAL(j.out.bytes, wlen);
	CU_ASSERT_EQUAL(pipe_server_result(&srv, name, &pr), 0);
	CU_ASSERT_EQUAL(pr.requests, 1);
	CU_ASSERT_EQUAL(pr.length, wlen);
	CU_ASSERT_FALSE(pr.chunked);
	CU_ASSERT_EQUAL(pr.content_length, (int64_t)wlen);
	sha256_hex(want, wlen, hex);
	CU_ASSERT_STRING_EQUAL(pr.sha256, hex);
	prefix = job_io_stdout_prefix(j.io, &len, &trunc, &streamed);
	CU_ASSERT_EQUAL(len, wlen);
	CU_ASSERT_TRUE(memcmp(prefix, want, wlen) == 0);
	CU_ASSERT_FALSE(trunc);
	CU_ASSERT_TRUE(streamed);
	fx_close(&fx);
}

static void test_success_small_put(void)
{
	put_small("printf 'small output'", "ok-small", "small output", 12);
}

static void test_success_empty_put(void)
{
	put_small("true", "ok-empty", "", 0);
}

/* Exactly CAP bytes: still Content-Length; CAP + 1: chunked. */
static void test_cap_boundary(void)
{
	struct fixture fx;
	struct pipe_result pr;
	char want[CAP + 1], hex[65];

	memset(want, 0, sizeof want);
	for (int extra = 0; extra <= 1; extra++) {
		struct job j;
		char script[64], name[32];
		int trunc, streamed;
		size_t n = CAP + (size_t)extra;

		CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
		snprintf(name, sizeof name, "cap-%d", extra);
		snprintf(script, sizeof script, "head -c %zu /dev/zero", n);
		CU_ASSERT_FATAL((j.spec.stdout_url = reg_out(&j, name, NULL)) != NULL);
		CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
		CU_ASSERT_FATAL(sh(&j, script) == 0);
		CU_ASSERT_EQUAL(job_run(&j, W_IN | W_OUT | W_REAP, 20000), 0);
		check_once(&j);
		CU_ASSERT_TRUE(j.out.ok);
		CU_ASSERT_EQUAL(pipe_server_result(&srv, name, &pr), 0);
		CU_ASSERT_EQUAL(pr.requests, 1);
		CU_ASSERT_EQUAL(pr.length, n);
		CU_ASSERT_EQUAL(pr.chunked, extra);
		CU_ASSERT_EQUAL(pr.content_length, extra ? -1 : (int64_t)n);
		sha256_hex(want, n, hex);
		CU_ASSERT_STRING_EQUAL(pr.sha256, hex);
		job_io_stdout_prefix(j.io, NULL, &trunc, &streamed);
		CU_ASSERT_EQUAL(trunc, extra);
		CU_ASSERT_TRUE(streamed);
		fx_close(&fx);
	}
}

/* stdin answered with an error status: stdin_failed, and the program did
 * not get EOF (it would have printed EOF-SEEN and exited 0). */
static void stdin_fails(const char *name, const struct pipe_endpoint *e, int want_retryable,
			const char *want_text)
{
	struct fixture fx;
	struct job j;
	const char *prefix;
	size_t len;

	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	if (e) {
		CU_ASSERT_FATAL((j.spec.stdin_url = reg_in(&j, name, e)) != NULL);
	} else {
		snprintf(j.urls[0], sizeof j.urls[0], "http://127.0.0.1:%d/in/%s", srv.port, name);
		j.spec.stdin_url = j.urls[0];
	}
	j.kill_on_stdin_fail = 1;
	CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
	CU_ASSERT_FATAL(sh(&j, "cat >/dev/null; echo EOF-SEEN") == 0);
	CU_ASSERT_EQUAL(job_run(&j, W_IN | W_OUT | W_REAP, 20000), 0);
	check_once(&j);
	CU_ASSERT_FALSE(j.in.ok);
	CU_ASSERT_STRING_EQUAL(j.in.code, JOB_IO_E_STDIN);
	CU_ASSERT_EQUAL(j.in.retryable, want_retryable);
	CU_ASSERT_TRUE(strncmp(j.in.msg, "stdin: ", 7) == 0);
	CU_ASSERT_TRUE(strstr(j.in.msg, want_text) != NULL);
	CU_ASSERT_FALSE(j.ended_before_kill);
	CU_ASSERT_TRUE(WIFSIGNALED(j.status) && WTERMSIG(j.status) == SIGKILL);
	CU_ASSERT_TRUE(j.out.ok);
	prefix = job_io_stdout_prefix(j.io, &len, NULL, NULL);
	CU_ASSERT_FALSE(len >= 8 && memmem(prefix, len, "EOF-SEEN", 8) != NULL);
	if (e && e->drop_after > 0)
		CU_ASSERT_TRUE(j.in.bytes > 0 && j.in.bytes <= (uint64_t)e->drop_after);
	printf("\n    stdin failure: \"%s\" ", j.in.msg);
	fx_close(&fx);
}

static void test_stdin_404(void)
{
	stdin_fails("stdin-missing", NULL, 0, "HTTP 404");
}

static void test_stdin_503(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;

	e.status = 503;
	stdin_fails("stdin-503", &e, 1, "HTTP 503");
}

static void test_stdin_drop_mid_stream(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;

	e.seed = 3;
	e.size = 4 * MiB;
	e.drop_after = (int64_t)MiB;
	stdin_fails("stdin-drop", &e, 1, "after");
}

static void test_stdin_drop_chunked(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;

	e.seed = 4;
	e.size = 4 * MiB;
	e.chunked = 1;
	e.drop_after = 100000;
	stdin_fails("stdin-drop-ch", &e, 1, "after");
}

/* A program that stops reading early is not a stdin failure. */
static void test_stdin_reader_stops_early(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct job j;
	size_t len;

	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	e.seed = 5;
	e.size = 16 * MiB;
	CU_ASSERT_FATAL((j.spec.stdin_url = reg_in(&j, "stdin-head", &e)) != NULL);
	CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
	CU_ASSERT_FATAL(sh(&j, "head -c 100") == 0);
	CU_ASSERT_EQUAL(job_run(&j, W_IN | W_OUT | W_REAP, 20000), 0);
	check_once(&j);
	CU_ASSERT_TRUE(j.in.ok);
	CU_ASSERT_TRUE(j.in.bytes < e.size);
	CU_ASSERT_TRUE(j.out.ok);
	CU_ASSERT_TRUE(WIFEXITED(j.status) && WEXITSTATUS(j.status) == 0);
	job_io_stdout_prefix(j.io, &len, NULL, NULL);
	CU_ASSERT_EQUAL(len, 100);
	fx_close(&fx);
}

/* The process ends while the stdin download is still waiting on the
 * network: the download stops, stdin_done(ok). */
static void test_stdin_stalled_process_ends(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct job j;

	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	e.seed = 6;
	e.size = MiB;
	e.stall_after = 1000;
	CU_ASSERT_FATAL((j.spec.stdin_url = reg_in(&j, "stdin-stall", &e)) != NULL);
	CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
	CU_ASSERT_FATAL(sh(&j, "head -c 10 >/dev/null; sleep 0.2") == 0);
	CU_ASSERT_EQUAL(job_run(&j, W_IN | W_OUT | W_REAP, 20000), 0);
	check_once(&j);
	CU_ASSERT_TRUE(j.in.ok);
	CU_ASSERT_TRUE(j.out.ok);
	fx_close(&fx);
}

/* ---- inputs ----------------------------------------------------------------- */

static void test_inputs_ok(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct job j;
	static const uint64_t sizes[3] = { 0, 1000, 3 * MiB };
	static const char *names[3] = { "empty", "frame 1.png", "-big.bin" };
	char *url, path[400], want[65], got[65];
	uint64_t size;

	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	for (int i = 0; i < 3; i++) {
		char ep[16];

		snprintf(ep, sizeof ep, "inok-%d", i);
		e.seed = 10 + (uint64_t)i;
		e.size = sizes[i];
		e.chunked = i == 1;
		CU_ASSERT_FATAL((url = reg_in(&j, ep, &e)) != NULL);
		add_file(&j, 0, names[i], url);
	}
	CU_ASSERT_FATAL(job_io_open(&j, 10 * MiB) != NULL);
	in_api = 1;
	CU_ASSERT_EQUAL(job_io_fetch_inputs(j.io), 0);
	CU_ASSERT_EQUAL(job_io_fetch_inputs(j.io), -1);
	CU_ASSERT_EQUAL(errno, EALREADY);
	in_api = 0;
	CU_ASSERT_EQUAL(job_run(&j, W_INPUTS, 20000), 0);
	run_for(&fx, 50);
	check_once(&j);
	CU_ASSERT_TRUE(j.inputs.ok);
	CU_ASSERT_EQUAL(j.inputs.bytes, 1000 + 3 * MiB);
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof path, "%s/%s", fx.dir, names[i]);
		CU_ASSERT_EQUAL(pipe_file_sha256(path, got, &size), 0);
		pipe_random_sha256(10 + (uint64_t)i, sizes[i], want);
		CU_ASSERT_EQUAL(size, sizes[i]);
		CU_ASSERT_STRING_EQUAL(got, want);
	}
	fx_close(&fx);
}

/* No inputs: inputs_done(ok) from the loop, not from inside the call. */
static void test_inputs_none(void)
{
	struct fixture fx;
	struct job j;

	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
	in_api = 1;
	CU_ASSERT_EQUAL(job_io_fetch_inputs(j.io), 0);
	in_api = 0;
	CU_ASSERT_EQUAL(j.inputs.n, 0);
	CU_ASSERT_EQUAL(job_run(&j, W_INPUTS, 5000), 0);
	check_once(&j);
	CU_ASSERT_TRUE(j.inputs.ok);
	fx_close(&fx);
}

/* One input fails while two slow ones run: input_failed naming it, the
 * others aborted at once, no partial file left. */
static void input_fails(const char *bad_name, const struct pipe_endpoint *bad, const char *url,
			int want_retryable, const char *want_msg)
{
	struct pipe_endpoint slow = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct job j;
	struct stat st;
	char *u0, *u1, *u2, path[400];
	uint64_t t0;

	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	slow.size = 4 * MiB;
	slow.rate = 256 * 1024;
	CU_ASSERT_FATAL((u0 = reg_in(&j, "in-slow-a", &slow)) != NULL);
	add_file(&j, 0, "a.bin", u0);
	if (url) {
		u1 = j.urls[19];
		snprintf(u1, 256, "%s", url);
	} else {
		CU_ASSERT_FATAL((u1 = reg_in(&j, bad_name, bad)) != NULL);
	}
	add_file(&j, 0, "b.bin", u1);
	CU_ASSERT_FATAL((u2 = reg_in(&j, "in-slow-c", &slow)) != NULL);
	add_file(&j, 0, "c.bin", u2);
	CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
	t0 = now_ms();
	in_api = 1;
	CU_ASSERT_EQUAL(job_io_fetch_inputs(j.io), 0);
	in_api = 0;
	CU_ASSERT_EQUAL(job_run(&j, W_INPUTS, 20000), 0);
	t0 = now_ms() - t0;
	run_for(&fx, 100);
	check_once(&j);
	CU_ASSERT_FALSE(j.inputs.ok);
	CU_ASSERT_STRING_EQUAL(j.inputs.code, JOB_IO_E_INPUT);
	CU_ASSERT_EQUAL(j.inputs.retryable, want_retryable);
	CU_ASSERT_TRUE(strstr(j.inputs.msg, want_msg) != NULL);
	CU_ASSERT_TRUE(t0 < 5000); /* did not wait for the slow ones */
	CU_ASSERT_EQUAL(transfer_loop_count(fx.loop), 0);
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof path, "%s/%c.bin", fx.dir, 'a' + i);
		CU_ASSERT_EQUAL(lstat(path, &st), -1);
	}
	printf("\n    input failure: \"%s\" after %llu ms ", j.inputs.msg, (unsigned long long)t0);
	fx_close(&fx);
}

static void test_input_404(void)
{
	char url[128];

	snprintf(url, sizeof url, "http://127.0.0.1:%d/in/never-registered", srv.port);
	input_fails(NULL, NULL, url, 0, "inputs[1] (b.bin): HTTP 404");
}

static void test_input_503(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;

	e.status = 503;
	input_fails("in-503", &e, NULL, 1, "inputs[1] (b.bin): HTTP 503");
}

static void test_input_refused(void)
{
	char url[128];

	snprintf(url, sizeof url, "http://127.0.0.1:%d/x", closed_port());
	input_fails(NULL, NULL, url, 1, "inputs[1] (b.bin): ");
}

static void test_input_drop(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;

	e.size = MiB;
	e.drop_after = 1000;
	input_fails("in-drop", &e, NULL, 1, "inputs[1] (b.bin): ");
}

static void test_input_over_cap(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct job j;
	struct stat st;
	char *u, path[400];

	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	e.size = 300000;
	e.chunked = 1;
	CU_ASSERT_FATAL((u = reg_in(&j, "in-cap", &e)) != NULL);
	add_file(&j, 0, "big.bin", u);
	CU_ASSERT_FATAL(job_io_open(&j, 100000) != NULL);
	in_api = 1;
	CU_ASSERT_EQUAL(job_io_fetch_inputs(j.io), 0);
	in_api = 0;
	CU_ASSERT_EQUAL(job_run(&j, W_INPUTS, 10000), 0);
	check_once(&j);
	CU_ASSERT_FALSE(j.inputs.ok);
	CU_ASSERT_FALSE(j.inputs.retryable);
	CU_ASSERT_TRUE(strstr(j.inputs.msg, "inputs[0] (big.bin): larger than 100000 bytes") !=
		       NULL);
	snprintf(path, sizeof path, "%s/big.bin", fx.dir);
	CU_ASSERT_EQUAL(lstat(path, &st), -1);
	fx_close(&fx);
}

/* A name planted as a symlink (or existing at all) is never followed nor
 * overwritten; a name with a slash is refused; no transfer starts. */
static void test_input_symlink_and_traversal(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct pipe_result pr;
	char *u, target[300], link[400], buf[64];
	const char *names[2] = { "evil", "../escape" };

	for (int k = 0; k < 2; k++) {
		struct job j;
		ssize_t n;
		int fd;

		CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
		snprintf(target, sizeof target, "%s/precious", tmproot);
		fd = open(target, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		CU_ASSERT_FATAL(fd >= 0);
		CU_ASSERT_EQUAL(write(fd, "precious", 8), 8);
		close(fd);
		snprintf(link, sizeof link, "%s/evil", fx.dir);
		CU_ASSERT_FATAL(symlink(target, link) == 0);
		e.size = 100;
		CU_ASSERT_FATAL((u = reg_in(&j, "in-evil", &e)) != NULL);
		add_file(&j, 0, "fine", u);
		add_file(&j, 0, names[k], u);
		CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
		in_api = 1;
		CU_ASSERT_EQUAL(job_io_fetch_inputs(j.io), 0);
		in_api = 0;
		CU_ASSERT_EQUAL(job_run(&j, W_INPUTS, 10000), 0);
		run_for(&fx, 100);
		check_once(&j);
		CU_ASSERT_FALSE(j.inputs.ok);
		CU_ASSERT_FALSE(j.inputs.retryable);
		CU_ASSERT_TRUE(strncmp(j.inputs.msg, "inputs[1] (", 11) == 0);
		CU_ASSERT_TRUE(strstr(j.inputs.msg, k ? "not a plain file name" : "exists") !=
			       NULL);
		fd = open(target, O_RDONLY);
		n = read(fd, buf, sizeof buf);
		close(fd);
		CU_ASSERT_EQUAL(n, 8);
		CU_ASSERT_TRUE(memcmp(buf, "precious", 8) == 0);
		CU_ASSERT_EQUAL(readlink(link, buf, sizeof buf), (ssize_t)strlen(target));
		snprintf(link, sizeof link, "%s/fine", fx.dir);
		CU_ASSERT_EQUAL(access(link, F_OK), -1); /* the other was never fetched */
		CU_ASSERT_EQUAL(pipe_server_result(&srv, "in-evil", &pr), 0);
		CU_ASSERT_EQUAL(pr.requests, 0);
		printf("\n    \"%s\" ", j.inputs.msg);
		fx_close(&fx);
		unlink(target);
	}
}

/* ---- outputs ---------------------------------------------------------------- */

static int make_file(const char *dir, const char *name, uint64_t seed, uint64_t size)
{
	char path[400], *buf = malloc(65536);
	uint64_t off = 0;
	int fd;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || buf == NULL) {
		free(buf);
		return -1;
	}
	while (off < size) {
		size_t n = size - off < 65536 ? (size_t)(size - off) : 65536;

		pipe_random_fill(seed, off, buf, n);
		if (write(fd, buf, n) != (ssize_t)n)
			break;
		off += n;
	}
	free(buf);
	close(fd);
	return off == size ? 0 : -1;
}

static void test_outputs_ok(void)
{
	struct fixture fx;
	struct job j;
	struct pipe_result pr;
	char *u, want[65];
	static const uint64_t sizes[2] = { 0, 2 * MiB + 3 };

	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	CU_ASSERT_FATAL(make_file(fx.dir, "empty.txt", 30, sizes[0]) == 0);
	CU_ASSERT_FATAL(make_file(fx.dir, "out.pdf", 31, sizes[1]) == 0);
	CU_ASSERT_FATAL((u = reg_out(&j, "outok-0", NULL)) != NULL);
	add_file(&j, 1, "empty.txt", u);
	CU_ASSERT_FATAL((u = reg_out(&j, "outok-1", NULL)) != NULL);
	add_file(&j, 1, "out.pdf", u);
	CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
	in_api = 1;
	CU_ASSERT_EQUAL(job_io_upload_outputs(j.io), 0);
	CU_ASSERT_EQUAL(job_io_upload_outputs(j.io), -1);
	in_api = 0;
	CU_ASSERT_EQUAL(job_run(&j, W_OUTPUTS, 20000), 0);
	check_once(&j);
	CU_ASSERT_TRUE(j.outputs.ok);
	CU_ASSERT_EQUAL(j.outputs.bytes, sizes[1]);
	for (int i = 0; i < 2; i++) {
		char ep[16];

		snprintf(ep, sizeof ep, "outok-%d", i);
		CU_ASSERT_EQUAL(pipe_server_result(&srv, ep, &pr), 0);
		CU_ASSERT_EQUAL(pr.requests, 1);
		CU_ASSERT_EQUAL(pr.length, sizes[i]);
		CU_ASSERT_EQUAL(pr.content_length, (int64_t)sizes[i]);
		CU_ASSERT_FALSE(pr.chunked);
		pipe_random_sha256(30 + (uint64_t)i, sizes[i], want);
		CU_ASSERT_STRING_EQUAL(pr.sha256, want);
	}
	fx_close(&fx);
}

/* A missing, symlinked, FIFO or directory output fails the phase before
 * any upload starts (and never blocks). */
static void test_outputs_refused_files(void)
{
	static const char *kinds[4] = { "missing", "symlink", "fifo", "dir" };
	static const char *want[4] = { "outputs[1] (res.pdf): no such file",
				       "outputs[1] (res.pdf): a symbolic link",
				       "outputs[1] (res.pdf): not a regular file",
				       "outputs[1] (res.pdf): not a regular file" };

	for (int k = 0; k < 4; k++) {
		struct fixture fx;
		struct job j;
		struct pipe_result pr;
		char *u, path[400];
		uint64_t t0;

		CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
		CU_ASSERT_FATAL(make_file(fx.dir, "first.txt", 40, 5000) == 0);
		snprintf(path, sizeof path, "%s/res.pdf", fx.dir);
		if (k == 1)
			CU_ASSERT_FATAL(symlink("first.txt", path) == 0);
		if (k == 2)
			CU_ASSERT_FATAL(mkfifo(path, 0600) == 0);
		if (k == 3)
			CU_ASSERT_FATAL(mkdir(path, 0700) == 0);
		CU_ASSERT_FATAL((u = reg_out(&j, "outref-0", NULL)) != NULL);
		add_file(&j, 1, "first.txt", u);
		CU_ASSERT_FATAL((u = reg_out(&j, "outref-1", NULL)) != NULL);
		add_file(&j, 1, "res.pdf", u);
		CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
		t0 = now_ms();
		in_api = 1;
		CU_ASSERT_EQUAL(job_io_upload_outputs(j.io), 0);
		in_api = 0;
		CU_ASSERT_TRUE(now_ms() - t0 < 1000);
		CU_ASSERT_EQUAL(job_run(&j, W_OUTPUTS, 5000), 0);
		run_for(&fx, 100);
		check_once(&j);
		CU_ASSERT_FALSE(j.outputs.ok);
		CU_ASSERT_STRING_EQUAL(j.outputs.code, JOB_IO_E_OUTPUT);
		CU_ASSERT_FALSE(j.outputs.retryable);
		CU_ASSERT_TRUE(strstr(j.outputs.msg, want[k]) != NULL);
		CU_ASSERT_EQUAL(pipe_server_result(&srv, "outref-0", &pr), 0);
		CU_ASSERT_EQUAL(pr.requests, 0);
		printf("\n    %s: \"%s\" ", kinds[k], j.outputs.msg);
		fx_close(&fx);
	}
}

static void output_status(int status, int want_retryable)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct job j;
	char *u, want[64];

	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	CU_ASSERT_FATAL(make_file(fx.dir, "out.pdf", 50, 100000) == 0);
	e.status = status;
	CU_ASSERT_FATAL((u = reg_out(&j, "out-status", &e)) != NULL);
	add_file(&j, 1, "out.pdf", u);
	CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
	in_api = 1;
	CU_ASSERT_EQUAL(job_io_upload_outputs(j.io), 0);
	in_api = 0;
	CU_ASSERT_EQUAL(job_run(&j, W_OUTPUTS, 10000), 0);
	check_once(&j);
	CU_ASSERT_FALSE(j.outputs.ok);
	CU_ASSERT_STRING_EQUAL(j.outputs.code, JOB_IO_E_OUTPUT);
	CU_ASSERT_EQUAL(j.outputs.retryable, want_retryable);
	snprintf(want, sizeof want, "outputs[0] (out.pdf): HTTP %d", status);
	CU_ASSERT_STRING_EQUAL(j.outputs.msg, want);
	fx_close(&fx);
}

static void test_output_500(void)
{
	output_status(500, 1);
}
static void test_output_403(void)
{
	output_status(403, 0);
}
static void test_output_429(void)
{
	output_status(429, 1);
}

/* ---- stdout: slow consumer, upload failure, linger ------------------------- */

/* The test writes 2 MiB into the program's stdout pipe as fast as it can;
 * the consumer takes 512 KiB/s: the writer must block, memory stays flat. */
static void test_slow_stdout_consumer(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct job j;
	struct pipe_result pr;
	char want[65], *buf = malloc(65536);
	uint64_t size = 2 * MiB, off = 0, t0;
	unsigned blocked = 0;

	CU_ASSERT_FATAL(buf != NULL);
	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	e.rate = 512 * 1024;
	CU_ASSERT_FATAL((j.spec.stdout_url = reg_out(&j, "slow-out", &e)) != NULL);
	CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
	CU_ASSERT_FATAL(job_fds(&j) == 0);
	fcntl(j.out_fd, F_SETFL, O_NONBLOCK);
	t0 = now_ms();
	while (off < size) {
		size_t n = size - off < 65536 ? (size_t)(size - off) : 65536;
		ssize_t w;

		pipe_random_fill(60, off, buf, n);
		w = write(j.out_fd, buf, n);
		if (w < 0 && errno == EAGAIN) {
			blocked++;
			event_base_loop(fx.base, EVLOOP_ONCE);
			continue;
		}
		CU_ASSERT_FATAL(w > 0);
		off += (uint64_t)w;
	}
	close(j.out_fd);
	j.out_fd = -1;
	job_ended(&j, 1);
	CU_ASSERT_EQUAL(job_run(&j, W_OUT, 60000), 0);
	t0 = now_ms() - t0;
	check_once(&j);
	CU_ASSERT_TRUE(j.out.ok);
	CU_ASSERT_TRUE(blocked > 0);
	CU_ASSERT_TRUE(t0 * e.rate >= size * 1000 / 2); /* held back by the consumer */
	CU_ASSERT_TRUE(fx.rss_max - fx.rss0 < RSS_LIMIT_KIB);
	CU_ASSERT_EQUAL(pipe_server_result(&srv, "slow-out", &pr), 0);
	CU_ASSERT_EQUAL(pr.length, size);
	pipe_random_sha256(60, size, want);
	CU_ASSERT_STRING_EQUAL(pr.sha256, want);
	CU_ASSERT_TRUE(pr.chunked);
	printf("\n    figure: 2 MiB to a 512 KiB/s consumer: %llu ms, the writer blocked %u "
	       "times, RSS growth %ld KiB ",
	       (unsigned long long)t0, blocked, fx.rss_max - fx.rss0);
	free(buf);
	fx_close(&fx);
}

/* The same with a real process: dd writing 2 MiB takes as long as the
 * consumer needs. */
static void test_slow_stdout_consumer_process(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct job j;
	struct pipe_result pr;
	uint64_t t0;

	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	e.rate = 1024 * 1024;
	CU_ASSERT_FATAL((j.spec.stdout_url = reg_out(&j, "slow-out-p", &e)) != NULL);
	CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
	t0 = now_ms();
	CU_ASSERT_FATAL(sh(&j, "head -c 3145728 /dev/zero; date +%s%N >&2") == 0);
	CU_ASSERT_EQUAL(job_run(&j, W_OUT | W_REAP, 60000), 0);
	t0 = now_ms() - t0;
	check_once(&j);
	CU_ASSERT_TRUE(j.out.ok);
	/* 3 MiB at 1 MiB/s: the program could not finish before ~2 s */
	CU_ASSERT_TRUE(t0 >= 1500);
	CU_ASSERT_EQUAL(pipe_server_result(&srv, "slow-out-p", &pr), 0);
	CU_ASSERT_EQUAL(pr.length, 3 * MiB);
	printf("\n    figure: 3 MiB from a process to a 1 MiB/s consumer: %llu ms ",
	       (unsigned long long)t0);
	fx_close(&fx);
}

/* The stream's upload fails while the program runs (nobody listens):
 * stdout_failed at once, retryable; the pipe keeps being drained. */
static void test_stdout_upload_fails_mid_run(void)
{
	struct fixture fx;
	struct job j;
	char buf[8192];

	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	snprintf(j.urls[0], sizeof j.urls[0], "http://127.0.0.1:%d/out/x", closed_port());
	j.spec.stdout_url = j.urls[0];
	CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
	CU_ASSERT_FATAL(job_fds(&j) == 0);
	memset(buf, 'z', sizeof buf);
	CU_ASSERT_EQUAL(write(j.out_fd, buf, sizeof buf), (ssize_t)sizeof buf);
	CU_ASSERT_EQUAL(job_run(&j, W_OUT, 10000), 0);
	CU_ASSERT_FALSE(j.out.ok);
	CU_ASSERT_STRING_EQUAL(j.out.code, JOB_IO_E_STDOUT);
	CU_ASSERT_TRUE(j.out.retryable);
	CU_ASSERT_TRUE(strncmp(j.out.msg, "stdout: ", 8) == 0);
	printf("\n    \"%s\" ", j.out.msg);
	/* 2 MiB more are drained, no one blocks */
	fcntl(j.out_fd, F_SETFL, O_NONBLOCK);
	for (int i = 0; i < 256; i++)
		CU_ASSERT_TRUE(write_all(fx.base, j.out_fd, buf, sizeof buf) >= 0);
	close(j.out_fd);
	j.out_fd = -1;
	job_ended(&j, 0);
	run_for(&fx, 200);
	check_once(&j);
	CU_ASSERT_EQUAL(j.out.n, 1);
	fx_close(&fx);
}

/* The output outlives the leader (a descendant holds the pipe): the
 * runner's linger ends it with job_io_stdout_close; small and streamed. */
static void test_stdout_close_linger(void)
{
	for (int big = 0; big <= 1; big++) {
		struct fixture fx;
		struct job j;
		struct pipe_result pr;
		char buf[5000], hex[65], name[16];
		size_t n = big ? sizeof buf : 100;

		CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
		snprintf(name, sizeof name, "linger-%d", big);
		CU_ASSERT_FATAL((j.spec.stdout_url = reg_out(&j, name, NULL)) != NULL);
		CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
		CU_ASSERT_FATAL(job_fds(&j) == 0);
		memset(buf, 'l', sizeof buf);
		CU_ASSERT_EQUAL(write(j.out_fd, buf, n), (ssize_t)n);
		run_for(&fx, 100);
		job_ended(&j, 1);
		run_for(&fx, 200);
		CU_ASSERT_EQUAL(j.out.n, 0); /* the pipe is still open */
		in_api = 1;
		job_io_stdout_close(j.io);
		job_io_stdout_close(j.io);
		in_api = 0;
		CU_ASSERT_EQUAL(job_run(&j, W_OUT | W_IN, 10000), 0);
		check_once(&j);
		CU_ASSERT_TRUE(j.out.ok);
		CU_ASSERT_EQUAL(pipe_server_result(&srv, name, &pr), 0);
		CU_ASSERT_EQUAL(pr.requests, 1);
		CU_ASSERT_EQUAL(pr.length, n);
		CU_ASSERT_EQUAL(pr.chunked, big);
		sha256_hex(buf, n, hex);
		CU_ASSERT_STRING_EQUAL(pr.sha256, hex);
		fx_close(&fx);
	}
}

/* ---- abort and free ---------------------------------------------------------- */

/* Abort with everything running: no callback afterwards, every fd of
 * job_io closed (the program sees EOF on stdin, EPIPE on stdout), no
 * transfer left, the partial input removed. */
static void test_abort_everything(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct job j;
	struct stat st;
	char *u, buf[6000], path[400];
	int streamed;

	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	e.size = 4 * MiB;
	e.stall_after = 100000;
	CU_ASSERT_FATAL((j.spec.stdin_url = reg_in(&j, "abort-in", &e)) != NULL);
	CU_ASSERT_FATAL((u = reg_in(&j, "abort-file", &e)) != NULL);
	add_file(&j, 0, "partial.bin", u);
	CU_ASSERT_FATAL((j.spec.stdout_url = reg_out(&j, "abort-out", NULL)) != NULL);
	CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
	in_api = 1;
	CU_ASSERT_EQUAL(job_io_fetch_inputs(j.io), 0);
	in_api = 0;
	CU_ASSERT_FATAL(job_fds(&j) == 0);
	memset(buf, 'a', sizeof buf);
	CU_ASSERT_EQUAL(write(j.out_fd, buf, sizeof buf), (ssize_t)sizeof buf);
	run_for(&fx, 300);
	snprintf(path, sizeof path, "%s/partial.bin", fx.dir);
	CU_ASSERT_EQUAL(lstat(path, &st), 0);
	job_io_stdout_prefix(j.io, NULL, NULL, &streamed);
	CU_ASSERT_TRUE(streamed);
	CU_ASSERT_EQUAL(j.inputs.n + j.in.n + j.out.n, 0);
	in_api = 1;
	job_io_abort(j.io);
	job_io_abort(j.io);
	job_io_process_ended(j.io, 1);
	job_io_stdout_close(j.io);
	CU_ASSERT_EQUAL(job_io_upload_outputs(j.io), -1);
	in_api = 0;
	run_for(&fx, 300);
	CU_ASSERT_EQUAL(j.inputs.n + j.in.n + j.out.n + j.outputs.n, 0);
	CU_ASSERT_EQUAL(transfer_loop_count(fx.loop), 0);
	CU_ASSERT_EQUAL(lstat(path, &st), -1);
	/* the stdin pipe was closed by job_io: the program reads what was
	 * written, then EOF; its stdout write fails */
	fcntl(j.in_fd, F_SETFL, O_NONBLOCK);
	{
		ssize_t r;
		char tmp[65536];

		while ((r = read(j.in_fd, tmp, sizeof tmp)) > 0)
			;
		CU_ASSERT_EQUAL(r, 0);
	}
	CU_ASSERT_EQUAL(write(j.out_fd, buf, 1), -1);
	CU_ASSERT_EQUAL(errno, EPIPE);
	CU_ASSERT_EQUAL(job_io_stdout_prefix(j.io, NULL, NULL, NULL)[0], 'a');
	fx_close(&fx);
}

/* job_io_free from inside a completion, with other completions due. */
static void test_free_inside_callback(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct job j;

	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	e.size = 10;
	CU_ASSERT_FATAL((j.spec.stdin_url = reg_in(&j, "free-in", &e)) != NULL);
	j.free_in_stdout_cb = 1;
	CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
	CU_ASSERT_FATAL(job_fds(&j) == 0);
	close(j.out_fd);
	j.out_fd = -1;
	CU_ASSERT_EQUAL(job_run(&j, W_OUT, 5000), 0);
	run_for(&fx, 200);
	CU_ASSERT_PTR_NULL(j.io);
	CU_ASSERT_EQUAL(j.out.n, 1);
	CU_ASSERT_TRUE(j.in.n <= 1);
	fx_close(&fx);
}

/* fds: CLOEXEC on every end and on every other fd job_io opens (libcurl's
 * sockets are the transfer layer's: they lack it, spawn's close_range
 * covers them); the parent's ends do not block, the child's ends do; a
 * program started with them sees nothing but 0, 1 and 2. */
static void test_fd_flags(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct job j;
	char before[256], *argv[] = { "ls", "/proc/self/fd", NULL };
	const char *prefix;
	size_t len;
	int in = -1, out = -1;

	CU_ASSERT_FATAL(fx_open(&fx, &j) == 0);
	e.size = 10;
	CU_ASSERT_FATAL((j.spec.stdin_url = reg_in(&j, "flags-in", &e)) != NULL);
	for (int fd = 0; fd < 256; fd++)
		before[fd] = (char)fd_is_open(fd);
	CU_ASSERT_FATAL(job_io_open(&j, 0) != NULL);
	in_api = 1;
	CU_ASSERT_FATAL(job_io_child_fds(j.io, &in, &out) == 0);
	in_api = 0;
	run_for(&fx, 50); /* the download's socket exists */
	CU_ASSERT_TRUE(fcntl(in, F_GETFD) & FD_CLOEXEC);
	CU_ASSERT_TRUE(fcntl(out, F_GETFD) & FD_CLOEXEC);
	CU_ASSERT_FALSE(fcntl(in, F_GETFL) & O_NONBLOCK);
	CU_ASSERT_FALSE(fcntl(out, F_GETFL) & O_NONBLOCK);
	for (int fd = 3; fd < 256; fd++) {
		char link[64], target[256] = "";

		if (before[fd] || !fd_is_open(fd))
			continue;
		snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
		if (readlink(link, target, sizeof target - 1) < 0)
			target[0] = '\0';
		if (strncmp(target, "socket:", 7) != 0)
			CU_ASSERT_TRUE(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	}
	{
		struct spawn_request req = { .path = "/bin/ls",
					     .argv = argv,
					     .envp = envp,
					     .cwd = fx.dir,
					     .stdin_fd = in,
					     .stdout_fd = out,
					     .stderr_fd = -1 };
		int err = 0;

		j.pid = spawn_process(&req, &err);
		close(in);
		close(out);
		CU_ASSERT_FATAL(j.pid > 0);
	}
	CU_ASSERT_EQUAL(job_run(&j, W_IN | W_OUT | W_REAP, 5000), 0);
	prefix = job_io_stdout_prefix(j.io, &len, NULL, NULL);
	/* ls's own: 0, 1, 2 and the directory it lists */
	CU_ASSERT_EQUAL(len, 8);
	CU_ASSERT_TRUE(len == 8 && memcmp(prefix, "0\n1\n2\n3\n", 8) == 0);
	fx_close(&fx);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "big stdin -> cat -> stdout round trip, bounded memory", test_round_trip_big },
		{ "small stdin, stdout kept as prefix", test_stdin_small_no_stdout_url },
		{ "no URLs: stdin -1, big output counted and discarded", test_no_urls_big_output },
		{ "failing program, small output: no PUT", test_fail_small_output_no_put },
		{ "failing program after > 4000 bytes: PUT aborted", test_fail_after_commit_exit },
		{ "... EOF first, failure later: no final chunk",
		  test_fail_after_commit_eof_first },
		{ "... killed by a signal: PUT aborted", test_fail_after_commit_signal },
		{ "... failure known before EOF: aborted, drained", test_fail_before_eof_driven },
		{ "... failure known before the output was read: no PUT",
		  test_fail_before_read_driven },
		{ "success known before the output was read: streamed",
		  test_success_before_read_driven },
		{ "success, small output: PUT with Content-Length", test_success_small_put },
		{ "success, empty output: PUT of 0 bytes", test_success_empty_put },
		{ "4000 bytes: Content-Length; 4001: chunked", test_cap_boundary },
		{ "stdin 404: stdin_failed, not retryable, no EOF", test_stdin_404 },
		{ "stdin 503: stdin_failed, retryable", test_stdin_503 },
		{ "stdin dropped mid-stream: retryable, no EOF", test_stdin_drop_mid_stream },
		{ "stdin dropped mid-stream (chunked)", test_stdin_drop_chunked },
		{ "program stops reading stdin early: ok", test_stdin_reader_stops_early },
		{ "program ends while stdin stalls: ok", test_stdin_stalled_process_ends },
		{ "inputs fetched in parallel", test_inputs_ok },
		{ "no inputs: ok from the loop", test_inputs_none },
		{ "input 404: input_failed, others aborted", test_input_404 },
		{ "input 503: retryable", test_input_503 },
		{ "input connection refused: retryable", test_input_refused },
		{ "input dropped mid-body: retryable", test_input_drop },
		{ "input over the size cap", test_input_over_cap },
		{ "input name: symlink never followed, no traversal",
		  test_input_symlink_and_traversal },
		{ "outputs uploaded with Content-Length", test_outputs_ok },
		{ "outputs missing / symlink / FIFO / directory", test_outputs_refused_files },
		{ "output answered 500: retryable", test_output_500 },
		{ "output answered 403: not retryable", test_output_403 },
		{ "output answered 429: retryable", test_output_429 },
		{ "slow stdout consumer blocks the writer", test_slow_stdout_consumer },
		{ "slow stdout consumer slows a process", test_slow_stdout_consumer_process },
		{ "stdout upload fails mid-run: at once, drained",
		  test_stdout_upload_fails_mid_run },
		{ "stdout outlives the leader: stdout_close", test_stdout_close_linger },
		{ "abort with everything running", test_abort_everything },
		{ "free inside a callback", test_free_inside_callback },
		{ "fd flags", test_fd_flags },
		{ NULL, NULL },
	};
	const char *mib = getenv("JOB_IO_TEST_MIB");
	int rc;

	if (mib && atoi(mib) > 0)
		big_bytes = (uint64_t)atoi(mib) * MiB;
	rc = pipe_server_run_suite(&srv, "job_io", cases, tmproot, sizeof tmproot);
	if (tmproot[0])
		rm_tree(tmproot);
	curl_global_cleanup();
	return rc;
}
