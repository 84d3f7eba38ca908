/*
 * test_client.c - libexecclient against real daemons: a job end to end
 * (stdin from a buffer and from a pipe, stdout to a file and to a pipe,
 * bytes compared), input and output files, placement on a mixed pair,
 * a surplus OFFER declined, ERRORs that answer older messages about a
 * job not taken for its JOB's refusal (it runs once), connectTimeoutSec
 * -> no_slot, cancel while waiting and while running, query, claim share
 * (in all and per service with several waitgroups), idle silence on the
 * wire, pipe URLs on the local address when it differs from the one
 * dialled, reconnect after the handler is killed, a lost owner, one-time
 * pipe endpoints (GET and PUT), pool growth stopped by a repeated
 * instance_id and resumed by the re-probe, unknown service,
 * /job/<service> addresses, a refused token, stdin/stdout given as URLs,
 * a JOB refused limit_reached waiting again, caller fds on /dev/null, a
 * broken stdout pipe ending the job local_io,
 * the pipe server's head deadline and its cap on waiting connections,
 * exc_client_free cancelling what it held, a program that closes its
 * stdin and runs on (the caller's pipe let go of at once), and an owner
 * sought while every connect fails at once (no descriptor left), and
 * streams quiet for longer than the pipe server's head deadline (no idle
 * limit by default; pipe_idle_timeout_ms cuts them), the longest bearer
 * token and the refused ones, and a PUT endpoint that stops reading once
 * its body is complete; and, against a scripted broker (fakebroker.h), a
 * DONE without a readable receipt: lost, or cancelled after a cancel.
 */
#include "autoconfig.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <event2/event.h>
#include <json-c/json.h>

#include "client_fixture.h"
#include "fakebroker.h"
#include "harness.h"
#include "pipe_server.h"
#include "proto.h"
#include "suite.h"
#include "wsclient.h"
#include "wstap.h"

/* A daemon with one handler and the service "tools" (cat, cp, sleep, sh) on
 * `slots` processes; extra: YAML lines after it (NULL for none). */
static int start(struct es_daemon *d, int slots, const char *extra)
{
	return harness_start(
		d, 1,
		harness_tools_body("jobRemovalPolicy: all\n", slots, "cat cp sleep sh", extra),
		NULL);
}

/* stdin from a 3 MiB buffer, stdout to a regular file: the same bytes. */
static void test_buffer_to_file(void)
{
	struct es_daemon d;
	struct fx_done done = { 0 };
	struct exc_job_spec s;
	size_t n = 3 << 20;
	unsigned char *data = harness_pattern(n);
	char path[300];
	exc_client *c;
	int fd;

	CU_ASSERT_FATAL(start(&d, 2, NULL) == 0);
	snprintf(path, sizeof path, "%s/out.bin", d.dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	c = fx_client(NULL, &d, 1, NULL);
	CU_ASSERT_FATAL(c != NULL);
	fx_cat_spec(&s, &done, data, n, fd);
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&done.called, 30000));
	CU_ASSERT(done.ok);
	CU_ASSERT_EQUAL(done.stdin_bytes, n);
	CU_ASSERT_EQUAL(done.stdout_bytes, n);
	close(fd);
	fx_expect_file(path, data, n);
	free(data);
	fx_stop(c, &d);
}

/* stdin from a pipe fed by a child, stdout into a pipe drained by a child. */
static void test_pipe_fds(void)
{
	struct es_daemon d;
	struct fx_done done = { 0 };
	struct exc_job_spec s;
	int in[2], out[2], status;
	size_t n = 5 << 20;
	unsigned char *data = harness_pattern(n);
	char path[300];
	pid_t wr, rd;
	exc_client *c;

	CU_ASSERT_FATAL(start(&d, 2, NULL) == 0);
	snprintf(path, sizeof path, "%s/piped.bin", d.dir);
	CU_ASSERT_FATAL(pipe(in) == 0 && pipe(out) == 0);
	wr = fork();
	if (wr == 0) {
		close(in[0]);
		for (size_t off = 0; off < n;) {
			ssize_t w = write(in[1], data + off, n - off > 65536 ? 65536 : n - off);
			if (w <= 0)
				_exit(1);
			off += (size_t)w;
		}
		_exit(0);
	}
	rd = fork();
	if (rd == 0) {
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		char buf[8192];
		ssize_t r;

		close(out[1]);
		close(in[0]);
		close(in[1]);
		while ((r = read(out[0], buf, sizeof buf)) > 0) {
			usleep(200); /* a slow consumer: back-pressure */
			if (write(fd, buf, (size_t)r) != r)
				_exit(1);
		}
		_exit(0);
	}
	close(in[1]);
	close(out[0]);
	c = fx_client(NULL, &d, 1, NULL);
	fx_spec(&s, "tools", "{\"command\":\"cat\"}", &done);
	s.in.kind = EXC_IO_FD;
	s.in.fd = in[0];
	s.out.kind = EXC_IO_FD;
	s.out.fd = out[1];
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&done.called, 60000));
	CU_ASSERT(done.ok);
	close(in[0]);
	close(out[1]);
	waitpid(wr, &status, 0);
	waitpid(rd, &status, 0);
	fx_expect_file(path, data, n);
	free(data);
	fx_stop(c, &d);
}

/* Caller fds on /dev/null (a character device epoll refuses) are read
 * and written directly; a stdout pipe whose reader is gone (EPIPE) ends
 * the job local_io at once, cancelled on the server. */
static void test_devnull_and_broken_pipe(void)
{
	struct es_daemon d;
	struct fx_done a = { 0 }, b = { 0 }, e = { 0 };
	struct exc_job_spec s;
	size_t n = 100000;
	unsigned char *data = harness_pattern(n);
	int null = open("/dev/null", O_RDWR), p[2];
	long long t0;
	exc_client *c;

	CU_ASSERT_FATAL(null >= 0);
	CU_ASSERT_FATAL(start(&d, 1, NULL) == 0);
	c = fx_client(NULL, &d, 1, NULL);
	/* 100 kB from a buffer into /dev/null */
	fx_cat_spec(&s, &a, data, n, null);
	t0 = harness_now_ms();
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&a.called, 10000));
	CU_ASSERT(a.ok);
	CU_ASSERT_EQUAL(a.stdout_bytes, n);
	/* stdin read from /dev/null: empty */
	fx_spec(&s, "tools", "{\"command\":\"cat\"}", &b);
	s.in.kind = EXC_IO_FD;
	s.in.fd = null;
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&b.called, 10000));
	CU_ASSERT(b.ok);
	CU_ASSERT_EQUAL(b.stdin_bytes, 0);
	CU_ASSERT(harness_now_ms() - t0 < 8000);
	/* 8 MiB into a pipe nobody reads any more */
	free(data);
	n = 8 << 20;
	data = harness_pattern(n);
	CU_ASSERT_FATAL(pipe(p) == 0);
	close(p[0]);
	fx_cat_spec(&s, &e, data, n, p[1]);
	{
		void (*old)(int) = signal(SIGPIPE, SIG_IGN);

		t0 = harness_now_ms();
		CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
		CU_ASSERT(fx_wait(&e.called, 20000));
		CU_ASSERT(harness_now_ms() - t0 < 5000);
		signal(SIGPIPE, old);
	}
	CU_ASSERT(!e.ok);
	CU_ASSERT_STRING_EQUAL(e.error_code, "local_io");
	CU_ASSERT_PTR_NOT_NULL(strstr(e.error_message, "Broken pipe"));
	/* the slot was given back: the cancelled job does not hold it */
	fx_spec(&s, "tools", "{\"command\":\"cat\"}", &b);
	memset(&b, 0, sizeof b);
	s.connect_timeout_sec = 5;
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&b.called, 8000));
	CU_ASSERT(b.ok);
	close(p[1]);
	close(null);
	free(data);
	fx_stop(c, &d);
}

/* A TCP connection to 127.0.0.1:port (non-blocking connect), or -1. */
static int connect_local(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

/* Local peers that dawdle on the pipe server: one dripping a byte every
 * 300 ms is cut 10 s after its accept (the head deadline, not an idle
 * timeout); 300 idle connections against a process limited to ~40 more
 * fds do not keep a job's own pipe connections out. */
static void test_pipe_dawdlers(void)
{
	struct es_daemon d;
	struct fx_done a = { 0 }, b = { 0 };
	struct exc_job_spec s;
	struct rlimit old, low;
	unsigned char *data = harness_pattern(200000);
	const char *at;
	char url[200];
	int port = 0, status;
	pid_t drip, flood;
	exc_job *ja;
	exc_client *c;

	CU_ASSERT_FATAL(start(&d, 2, NULL) == 0);
	c = fx_client(NULL, &d, 1, NULL);
	fx_log_clear();
	fx_spec(&s, "tools", "{\"command\":\"sleep\",\"args\":[\"30\"]}", &a);
	s.in.kind = EXC_IO_BUFFER;
	s.in.data = "x";
	s.in.len = 1;
	ja = exc_submit(c, &s);
	CU_ASSERT_FATAL(ja != NULL);
	while (!(at = fx_log_find("stdin GET at ")) && !a.called)
		fx_spin(20);
	CU_ASSERT_FATAL(at != NULL);
	CU_ASSERT_FATAL(sscanf(at + strlen("stdin GET at "), "%199s", url) == 1);
	CU_ASSERT_FATAL(sscanf(url, "http://127.0.0.1:%d", &port) == 1);
	CU_ASSERT_FATAL(getrlimit(RLIMIT_NOFILE, &old) == 0);
	low = old;
	low.rlim_cur = (rlim_t)open_fds() + 40;
	CU_ASSERT_FATAL(setrlimit(RLIMIT_NOFILE, &low) == 0);
	flood = fork();
	if (flood == 0) {
		setrlimit(RLIMIT_NOFILE, &old);
		for (int i = 0; i < 300; i++)
			connect_local(port);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		pause(); /* holds the connections until killed */
		_exit(0);
	}
	fx_spin(500); /* the flood is in */
	fx_cat_spec(&s, &b, data, 200000, -1);
	s.out.kind = EXC_IO_DISCARD;
	s.connect_timeout_sec = 5;
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&b.called, 6000));
	CU_ASSERT(b.ok);
	CU_ASSERT_EQUAL(b.stdout_bytes, 200000);
	setrlimit(RLIMIT_NOFILE, &old);
	kill(flood, SIGKILL);
	waitpid(flood, &status, 0);
	fx_spin(1500); /* what is left of the flood is accepted and closed */
	drip = fork();
	if (drip == 0) {
		static const char head[] = "GET /p/00000000000000000000000000000000 HTTP/1.1\r\n"
					   "X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
		long long t0 = harness_now_ms();
		int fd = connect_local(port);

		for (int i = 0; fd >= 0 && i < 50; i++) {
			usleep(300000);
			if (send(fd, head + i, 1, MSG_NOSIGNAL) != 1)
				_exit((int)((harness_now_ms() - t0) / 1000));
		}
		_exit(255);
	}
	while (waitpid(drip, &status, WNOHANG) == 0)
		fx_spin(100);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) >= 9 && WEXITSTATUS(status) <= 12);
	if (!WIFEXITED(status) || WEXITSTATUS(status) < 9 || WEXITSTATUS(status) > 12)
		fprintf(stderr, "\ndrip: exit %d (seconds until cut; 255: never cut)\n",
			WEXITSTATUS(status));
	CU_ASSERT(exc_cancel(ja) == 0);
	CU_ASSERT(fx_wait(&a.called, 15000));
	free(data);
	fx_stop(c, &d);
}

/* An input file from a buffer copied by cp into an output file. */
static void test_files(void)
{
	struct es_daemon d;
	exc_client *c;

	CU_ASSERT_FATAL(start(&d, 2, NULL) == 0);
	c = fx_client(NULL, &d, 1, NULL);
	fx_files_job(c, &d);
	fx_stop(c, &d);
}

/* A service only the second instance offers runs there, with no config. */
static void test_placement_mixed(void)
{
	struct es_daemon d[2];
	struct fx_done done = { 0 };
	struct exc_job_spec s;
	char id2[65];
	exc_client *c;

	CU_ASSERT_FATAL(start(&d[0], 1, NULL) == 0);
	CU_ASSERT_FATAL(start(&d[1], 1,
			      "  special:\n    waitgroup: wg\n    commands:\n"
			      "      echo: {prog: echo}\n") == 0);
	fx_instance_id(&d[1], id2);
	c = fx_client(NULL, d, 2, NULL);
	fx_spec(&s, "special", "{\"command\":\"echo\",\"args\":[\"routed\"]}", &done);
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&done.called, 20000));
	CU_ASSERT(done.ok);
	CU_ASSERT_STRING_EQUAL(done.instance_id, id2);
	CU_ASSERT_STRING_EQUAL(done.stdout_text, "routed\n");
	/* the first instance never saw the want: no WANT was refused there */
	CU_ASSERT(fx_log_find("ERROR unknown_service") == NULL);
	exc_client_free(c);
	for (int i = 0; i < 2; i++) {
		harness_stop(&d[i], 10000);
		harness_cleanup(&d[i]);
	}
}

/* c reaches each of the two one-slot daemons d through a tap of its own,
 * both connections up (claim share 2 x (1 + 1)) when this returns. */
static void tap_both(exc_client *c, struct es_daemon d[2], struct wstap *tap[2])
{
	char url[64];

	for (int i = 0; i < 2; i++) {
		tap[i] = wstap_new(fx_base, d[i].port);
		CU_ASSERT_FATAL(tap[i] != NULL);
		snprintf(url, sizeof url, "ws://127.0.0.1:%d", wstap_port(tap[i]));
		CU_ASSERT_FATAL(exc_client_add_address(c, url) == 0);
	}
	for (int i = 0; i < 100 && exc_claim_share(c) < 4; i++)
		fx_spin(50);
	CU_ASSERT_EQUAL_FATAL(exc_claim_share(c), 4);
}

/* Parked on two idle instances: both offer, one runs, the other is
 * declined.  The order is forced with a tap in front of each: d[0]'s OFFER
 * is held on its way to the client until the job ran on d[1], and the
 * WANT to d[1] is held until d[0] has offered. */
static void test_surplus_declined(void)
{
	struct es_daemon d[2];
	struct fx_done done = { 0 };
	struct exc_job_spec s;
	struct wstap *tap[2];
	exc_client *c;
	int started = 0;

	CU_ASSERT_FATAL(start(&d[0], 1, NULL) == 0);
	CU_ASSERT_FATAL(start(&d[1], 1, NULL) == 0);
	c = fx_client(NULL, NULL, 0, NULL);
	/* both connections up before the job, so that it is parked on both */
	tap_both(c, d, tap);
	fx_log_clear();
	wstap_hold(tap[0], WSTAP_HOLD_TO_CLIENT);
	wstap_hold(tap[1], WSTAP_HOLD_TO_SERVER);
	fx_spec(&s, "tools", "{\"command\":\"cat\"}", &done);
	s.in.kind = EXC_IO_BUFFER;
	s.in.data = "once\n";
	s.in.len = 5;
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	for (int i = 0;
	     i < 200 && harness_status_int(&d[0], "waitgroups", "wg", "offered", NULL) != 1; i++)
		fx_spin(20);
	CU_ASSERT_EQUAL_FATAL(harness_status_int(&d[0], "waitgroups", "wg", "offered", NULL), 1);
	wstap_hold(tap[1], 0);
	CU_ASSERT(fx_wait(&done.called, 20000));
	CU_ASSERT(done.ok);
	CU_ASSERT_STRING_EQUAL(done.stdout_text, "once\n");
	wstap_hold(tap[0], 0);
	for (int i = 0; i < 100 && !fx_log_find("declining offer"); i++)
		fx_spin(20);
	CU_ASSERT(fx_log_find("declining offer") != NULL);
	fx_spin(300);
	for (int i = 0; i < 2; i++) {
		started += harness_status_int(&d[i], "services", "tools", "started", NULL);
		CU_ASSERT_EQUAL(harness_status_int(&d[i], "waitgroups", "wg", "offered", NULL), 0);
		CU_ASSERT_EQUAL(harness_status_int(&d[i], "waitgroups", "wg", "waiting", NULL), 0);
	}
	CU_ASSERT_EQUAL(started, 1);
	CU_ASSERT_EQUAL(harness_status_int(&d[1], "services", "tools", "started", NULL), 1);
	exc_client_free(c);
	for (int i = 0; i < 2; i++) {
		wstap_free(tap[i]);
		harness_stop(&d[i], 10000);
		harness_cleanup(&d[i]);
	}
}

/* Waits (spinning the client's loop) until d's waitgroup field is v. */
static int wait_wg(struct es_daemon *d, const char *field, long long v)
{
	for (int i = 0; i < 400 && harness_wg_field(d, "wg", field) != v; i++)
		fx_spin(20);
	return harness_wg_field(d, "wg", field) == v;
}

/*
 * Errors that answer older messages arrive after a JOB on the same
 * connection (the chaos-across-hosts double run, reproduced in order with
 * a tap in front of each of two instances, A and B, one slot each, offers
 * expiring after 2 s):
 *  - the job is parked on both; both OFFERs are held on their way to the
 *    client until both offers expired (A's slot then goes to another
 *    client's 3 s job, so A can only park the job for a while);
 *  - A's OFFER and offer_expired are let through: the client sends its JOB
 *    to A and UNWANT to B (answered unknown_job: the want there is gone,
 *    held); A refuses the JOB (unknown_job), the job waits again, its WANT
 *    to B is offered anew (held);
 *  - B's stream is let through: old OFFER, offer_expired, the UNWANT's
 *    unknown_job, the new OFFER.  The client sends a JOB for the old
 *    offer, which B refuses bad_token, and (its answer not read yet) a
 *    JOB for the new one, which B runs.
 * Each refusal must be taken for what it answers: the UNWANT's unknown_job
 * and the old JOB's bad_token are not the new JOB's refusal.  Before the
 * fix the client took them for it, waited again, and ran the job a
 * second time on A once A's slot was free (A and B both started it).
 */
static void test_stale_errors_not_job_refusal(void)
{
	struct es_daemon d[2];
	struct fx_done done = { 0 }, other = { 0 };
	struct exc_job_spec s;
	struct exc_options o;
	struct wstap *tap[2];
	exc_client *c, *blocker;
	long long started[2];

	for (int i = 0; i < 2; i++)
		CU_ASSERT_FATAL(start(&d[i], 1, "offerTimeoutSec: 2\n") == 0);
	fx_options(&o);
	o.pool_cap = 1; /* no growth while offers are held: one connection each */
	c = fx_client(&o, NULL, 0, NULL);
	tap_both(c, d, tap);
	exc_options_init(&o);
	o.retry_tick_ms = 200;
	blocker = fx_client(&o, &d[0], 1, NULL);
	fx_log_clear();
	for (int i = 0; i < 2; i++)
		wstap_hold(tap[i], WSTAP_HOLD_TO_CLIENT);
	fx_spec(&s, "tools", "{\"command\":\"sleep\",\"args\":[\"0.2\"]}", &done);
	s.connect_timeout_sec = 30;
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT_FATAL(wait_wg(&d[0], "offered", 1) && wait_wg(&d[1], "offered", 1));
	/* A's slot goes to this job when the offer there expires */
	fx_spec(&s, "tools", "{\"command\":\"sleep\",\"args\":[\"3\"]}", &other);
	CU_ASSERT_FATAL(exc_submit(blocker, &s) != NULL);
	CU_ASSERT_FATAL(wait_wg(&d[0], "waiting", 1));
	CU_ASSERT_FATAL(wait_wg(&d[0], "running", 1) && wait_wg(&d[1], "offered", 0));
	/* A's stream: JOB to A (refused), UNWANT to B, then WANT to B again */
	wstap_hold(tap[0], 0);
	for (int i = 0; i < 200 && !fx_log_find("ERROR unknown_job"); i++)
		fx_spin(10);
	CU_ASSERT_FATAL(fx_log_find("ERROR unknown_job") != NULL);
	CU_ASSERT_FATAL(wait_wg(&d[1], "offered", 1));
	CU_ASSERT_EQUAL(harness_wg_field(&d[0], "wg", "waiting"), 1); /* parked on A */
	/* B's stream */
	wstap_hold(tap[1], 0);
	CU_ASSERT(fx_wait(&done.called, 20000));
	CU_ASSERT(done.ok);
	CU_ASSERT(fx_wait(&other.called, 20000));
	fx_spin(500); /* a second run would have started on A by now */
	for (int i = 0; i < 2; i++)
		started[i] = harness_status_int(&d[i], "services", "tools", "started", NULL);
	printf("\n    started on A: %lld (the other client's job included), on B: %lld ",
	       started[0], started[1]);
	CU_ASSERT_EQUAL(started[0], 1); /* only the other client's job */
	CU_ASSERT_EQUAL(started[1], 1);
	CU_ASSERT_EQUAL(done.called, 1);
	exc_client_free(blocker);
	exc_client_free(c);
	for (int i = 0; i < 2; i++) {
		wstap_free(tap[i]);
		CU_ASSERT(harness_finish(&d[i], 0) == 0);
	}
}

/* maxJobsPerClient 1, two slots: the second JOB is refused limit_reached
 * (the offer withdrawn); the job waits again and runs after the first. */
static void test_limit_reached_waits_again(void)
{
	struct es_daemon d;
	struct fx_done a = { 0 }, b = { 0 };
	struct exc_job_spec s;
	exc_client *c;

	CU_ASSERT_FATAL(start(&d, 2, "maxJobsPerClient: 1\n") == 0);
	c = fx_client(NULL, &d, 1, NULL);
	fx_log_clear();
	fx_spec(&s, "tools", "{\"command\":\"sleep\",\"args\":[\"1\"]}", &a);
	s.connect_timeout_sec = 5;
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	fx_spec(&s, "tools", "{\"command\":\"sleep\",\"args\":[\"1\"]}", &b);
	s.connect_timeout_sec = 5;
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&a.called, 8000));
	CU_ASSERT(fx_wait(&b.called, 8000));
	CU_ASSERT(a.ok);
	CU_ASSERT(b.ok);
	CU_ASSERT(fx_log_find("ERROR limit_reached") != NULL);
	fx_stop(c, &d);
}

/* One slot busy: connectTimeoutSec gives no_slot; cancel waiting and
 * running jobs; query positions. */
static void test_timeout_cancel_query(void)
{
	struct es_daemon d;
	struct fx_done a = { 0 }, b = { 0 }, w = { 0 };
	struct exc_job_spec s;
	exc_job *ja, *jw;
	exc_client *c;
	long long t0;

	CU_ASSERT_FATAL(start(&d, 1, NULL) == 0);
	c = fx_client(NULL, &d, 1, NULL);
	fx_spec(&s, "tools", "{\"command\":\"sleep\",\"args\":[\"30\"]}", &a);
	ja = exc_submit(c, &s);
	CU_ASSERT_FATAL(ja != NULL);
	while (strcmp(exc_job_state(ja), "running") != 0 && !a.called)
		fx_spin(50);
	/* no slot within 1 s */
	fx_spec(&s, "tools", "{\"command\":\"cat\"}", &b);
	s.connect_timeout_sec = 1;
	t0 = harness_now_ms();
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&b.called, 5000));
	CU_ASSERT(harness_now_ms() - t0 >= 900);
	CU_ASSERT_STRING_EQUAL(b.error_code, "no_slot");
	CU_ASSERT(b.retryable);
	CU_ASSERT(!b.ok);
	fx_spin(200);
	CU_ASSERT_EQUAL(harness_status_int(&d, "waitgroups", "wg", "waiting", NULL), 0);
	/* a waiting job: QUERY answers its position, then it is cancelled */
	fx_spec(&s, "tools", "{\"command\":\"cat\"}", &w);
	jw = exc_submit(c, &s);
	CU_ASSERT_FATAL(jw != NULL);
	fx_spin(300);
	CU_ASSERT_EQUAL(exc_query(jw), 1);
	CU_ASSERT(fx_wait(&w.pos_count, 3000));
	CU_ASSERT_STRING_EQUAL(w.pos_state, "waiting");
	CU_ASSERT_EQUAL(w.pos_running, 1);
	CU_ASSERT_EQUAL(w.pos_capacity, 1);
	CU_ASSERT_EQUAL(w.pos_ahead, 0);
	CU_ASSERT_EQUAL(harness_status_int(&d, "waitgroups", "wg", "waiting", NULL), 1);
	CU_ASSERT_EQUAL(exc_cancel(jw), 0);
	CU_ASSERT(fx_wait(&w.called, 5000));
	CU_ASSERT_STRING_EQUAL(w.error_code, "cancelled");
	CU_ASSERT(!w.retryable);
	fx_spin(200);
	CU_ASSERT_EQUAL(harness_status_int(&d, "waitgroups", "wg", "waiting", NULL), 0);
	/* the running job: QUERY says running, CANCEL ends it */
	CU_ASSERT_EQUAL(exc_query(ja), 1);
	CU_ASSERT(fx_wait(&a.pos_count, 3000));
	CU_ASSERT_STRING_EQUAL(a.pos_state, "running");
	t0 = harness_now_ms();
	CU_ASSERT_EQUAL(exc_cancel(ja), 0);
	CU_ASSERT(fx_wait(&a.called, 10000));
	CU_ASSERT(harness_now_ms() - t0 < 5000);
	CU_ASSERT_STRING_EQUAL(a.error_code, "cancelled");
	CU_ASSERT(!a.ok);
	fx_stop(c, &d);
}

struct share_wait {
	exc_client *c;
	unsigned want;
};

static int share_is(void *arg)
{
	struct share_wait *w = arg;

	return exc_claim_share(w->c) == w->want;
}

/* Claim share as instances and clients come and go. */
static void test_claim_share(void)
{
	struct es_daemon d[2];
	struct share_wait w;
	exc_client *c, *c2;

	CU_ASSERT_FATAL(start(&d[0], 2, NULL) == 0);
	CU_ASSERT_FATAL(start(&d[1], 4, NULL) == 0);
	c = fx_client(NULL, d, 2, NULL);
	CU_ASSERT_EQUAL(exc_claim_share(c), 0); /* nothing connected yet */
	w.c = c;
	w.want = 3 + 5; /* (floor(2/1) + 1) + (floor(4/1) + 1) */
	CU_ASSERT(fx_wait_pred(share_is, &w, 5000));
	c2 = fx_client(NULL, d, 1, NULL); /* a second client on the first */
	w.want = 2 + 5;                   /* floor(2/2) + 1 + 5 */
	CU_ASSERT(fx_wait_pred(share_is, &w, 5000));
	exc_client_free(c2);
	w.want = 8;
	CU_ASSERT(fx_wait_pred(share_is, &w, 5000));
	harness_stop(&d[1], 10000);
	w.want = 3;
	CU_ASSERT(fx_wait_pred(share_is, &w, 5000));
	harness_stop(&d[0], 10000);
	w.want = 0;
	CU_ASSERT(fx_wait_pred(share_is, &w, 5000));
	exc_client_free(c);
	for (int i = 0; i < 2; i++)
		harness_cleanup(&d[i]);
}

/* Four one-slot waitgroups (s1..s4) and one of three slots (s5). */
static const char body_waitgroups[] =
	"waitgroups:\n"
	"  a: {processes: 1}\n  b: {processes: 1}\n  c: {processes: 1}\n"
	"  d: {processes: 1}\n  e: {processes: 3}\n"
	"services:\n"
	"  s1: {waitgroup: a, commands: {true: {prog: \"true\"}}}\n"
	"  s2: {waitgroup: b, commands: {true: {prog: \"true\"}}}\n"
	"  s3: {waitgroup: c, commands: {true: {prog: \"true\"}}}\n"
	"  s4: {waitgroup: d, commands: {true: {prog: \"true\"}}}\n"
	"  s5: {waitgroup: e, commands: {true: {prog: \"true\"}}}\n";

/* Expected shares of n clients: total, s1..s5, and a service nobody runs. */
struct shares {
	exc_client **c;
	int n;
	unsigned total, svc[5];
};

static int shares_are(void *arg)
{
	const struct shares *w = arg;
	char name[4];

	for (int i = 0; i < w->n; i++) {
		if (exc_claim_share(w->c[i]) != w->total ||
		    exc_claim_share_service(w->c[i], "nope") != 0)
			return 0;
		for (int k = 0; k < 5; k++) {
			snprintf(name, sizeof name, "s%d", k + 1);
			if (exc_claim_share_service(w->c[i], name) != w->svc[k])
				return 0;
		}
	}
	return 1;
}

static void print_shares(const struct shares *w)
{
	fprintf(stderr, "claim shares: total %u s1 %u s5 %u (expected %u, %u, %u)\n",
		exc_claim_share(w->c[0]), exc_claim_share_service(w->c[0], "s1"),
		exc_claim_share_service(w->c[0], "s5"), w->total, w->svc[0], w->svc[4]);
}

/* Claim shares with several waitgroups (docs/client.md, "Claim share"):
 * per instance floor(slots / clients) + 1, per service over its own
 * waitgroup.  Five clients on two instances of four one-slot waitgroups
 * (and one of three) may hold one job of each one-slot service per
 * instance: 10 claimed for 2 slots of s1, every slot busy, one want of
 * each client parked; a ceiling per waitgroup gave each client 2 per
 * instance, and a total over the waitgroups 5. */
static void test_claim_share_waitgroups(void)
{
	enum {
		N = 5
	};
	struct es_daemon d[2];
	exc_client *c[N];
	char url[64];

	for (int i = 0; i < 2; i++)
		CU_ASSERT_FATAL(harness_start(&d[i], 1, body_waitgroups, NULL) == 0);
	for (int i = 0; i < N; i++)
		c[i] = fx_client(NULL, d, 2, NULL);
	struct shares w = { c, N, 2 * (7 / N + 1), { 2, 2, 2, 2, 2 * (3 / N + 1) } };
	if (!fx_wait_pred(shares_are, &w, 10000)) {
		print_shares(&w);
		CU_FAIL("five clients: 1 + 1 per instance for every service, 2 + 2 in all");
	}
	for (int i = 1; i < N; i++)
		exc_client_free(c[i]);
	w = (struct shares){ c, 1, 2 * (7 + 1), { 4, 4, 4, 4, 2 * (3 + 1) } };
	if (!fx_wait_pred(shares_are, &w, 10000)) {
		print_shares(&w);
		CU_FAIL("one client: slots + 1 per instance");
	}
	/* an address for s1 only counts for s1, and for no other service */
	c[1] = fx_client(NULL, &d[0], 1, "/job/s1");
	snprintf(url, sizeof url, "ws://127.0.0.1:%d", d[1].port);
	CU_ASSERT_FATAL(exc_client_add_address(c[1], url) == 0);
	w = (struct shares){ c + 1,
			     1,
			     2 * (7 / 2 + 1),
			     { 2 * (1 / 2 + 1), 1 / 2 + 1, 1 / 2 + 1, 1 / 2 + 1, 3 / 2 + 1 } };
	if (!fx_wait_pred(shares_are, &w, 10000)) {
		print_shares(&w);
		CU_FAIL("a /job/s1 address: counted for s1 only");
	}
	exc_client_free(c[1]);
	exc_client_free(c[0]);
	for (int i = 0; i < 2; i++) {
		harness_stop(&d[i], 10000);
		harness_cleanup(&d[i]);
	}
}

static int wg_waiting_is(struct json_object *st, void *arg)
{
	return harness_json_int(st, "waitgroups", "wg", "waiting", NULL) == *(long long *)arg;
}

/* Idle silence (protocol.md, "An idle connection exchanges nothing but
 * pings"), observed on the wire by a tap between the client and a real
 * daemon that pings every second: with no jobs the client sends no
 * message at all, only pongs; with two wants parked it sends the two
 * WANTs once, then through fifteen retry ticks again nothing but pongs. */
/* The client's broker connections send each message at once
 * (TCP_NODELAY): without it a JOB or WANT written while the previous one
 * is unacknowledged waits for the server's delayed ACK (up to 40 ms).
 * Looks at this process's own sockets connected to the daemon's port. */
static void test_nodelay(void)
{
	struct es_daemon d;
	struct share_wait w;
	exc_client *c;
	int found = 0, nodelay = 0;
	DIR *dir;
	struct dirent *e;

	CU_ASSERT_FATAL(start(&d, 2, NULL) == 0);
	c = fx_client(NULL, &d, 1, NULL);
	w.c = c;
	w.want = 3;
	CU_ASSERT_FATAL(fx_wait_pred(share_is, &w, 5000));
	dir = opendir("/proc/self/fd");
	CU_ASSERT_FATAL(dir != NULL);
	while ((e = readdir(dir))) {
		struct sockaddr_in peer;
		socklen_t len = sizeof peer;
		int fd = atoi(e->d_name), on = 0;
		socklen_t olen = sizeof on;
		if (getpeername(fd, (struct sockaddr *)&peer, &len) != 0 ||
		    peer.sin_family != AF_INET || ntohs(peer.sin_port) != d.port)
			continue;
		found++;
		if (getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, &olen) == 0 && on)
			nodelay++;
	}
	closedir(dir);
	CU_ASSERT(found >= 1);
	CU_ASSERT_EQUAL(nodelay, found);
	exc_client_free(c);
	harness_stop(&d, 10000);
}

static void test_idle_silence(void)
{
	struct es_daemon d;
	struct fx_done a = { 0 }, b = { 0 };
	struct exc_job_spec s;
	struct exc_options o;
	struct wstap *tap;
	char url[64];
	long long two = 2;

	CU_ASSERT_FATAL(start(&d, 1, "pingIntervalSec: 1\npingTimeoutSec: 30\n") == 0);
	tap = wstap_new(fx_base ? fx_base : (fx_base = event_base_new()), d.port);
	CU_ASSERT_FATAL(tap != NULL);
	fx_options(&o);
	o.pool_cap = 1; /* the pool's own growth is test_balancer_pool's */
	exc_client *c = fx_client(&o, NULL, 0, NULL);
	snprintf(url, sizeof url, "ws://127.0.0.1:%d", wstap_port(tap));
	CU_ASSERT_FATAL(c != NULL && exc_client_add_address(c, url) == 0);
	while (exc_claim_share(c) == 0 && wstap_connections(tap) < 5)
		fx_spin(20);
	CU_ASSERT_EQUAL_FATAL(exc_claim_share(c), 2); /* connected, HELLO read */

	/* no jobs: nothing but pongs */
	wstap_reset(tap);
	fx_spin(3000);
	CU_ASSERT_EQUAL(wstap_messages(tap), 0);
	CU_ASSERT(wstap_frames(tap, 0xA) >= 2); /* the tap sees the client's frames */

	/* the only slot held elsewhere; two jobs wait */
	struct tclient *holder = tc_connect(d.port, "holder");
	CU_ASSERT_FATAL(holder != NULL);
	const char *token = tc_want_offer(holder, "hold", "tools", 0, 5000);
	CU_ASSERT_FATAL(token != NULL);
	CU_ASSERT(tc_send(holder,
			  "{\"type\":\"JOB\",\"job_id\":\"hold\",\"token\":\"%s\","
			  "\"job\":{\"command\":\"sleep\",\"args\":[\"30\"]}}",
			  token) == 0);
	wstap_reset(tap);
	fx_spec(&s, "tools", "{\"command\":\"cat\"}", &a);
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	fx_spec(&s, "tools", "{\"command\":\"cat\"}", &b);
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	for (long long end = harness_now_ms() + 5000;
	     wstap_frames(tap, 0x1) < 2 && harness_now_ms() < end;)
		fx_spin(20);
	CU_ASSERT(harness_wait_status(&d, 5000, wg_waiting_is, &two) == 0);
	CU_ASSERT_EQUAL(wstap_frames(tap, 0x1), 2);
	CU_ASSERT(strstr(wstap_last_text(tap), "\"WANT\"") != NULL);
	wstap_reset(tap);
	fx_spin(3000); /* 15 retry ticks of 200 ms */
	CU_ASSERT_EQUAL(wstap_messages(tap), 0);
	if (wstap_messages(tap))
		fprintf(stderr,
			"the client sent %u messages while its wants were parked, the last %s\n",
			wstap_messages(tap), wstap_last_text(tap));
	CU_ASSERT(wstap_frames(tap, 0xA) >= 2);
	CU_ASSERT_FALSE(a.called || b.called);
	CU_ASSERT(harness_wait_status(&d, 1000, wg_waiting_is, &two) == 0); /* still parked */

	exc_client_free(c);
	CU_ASSERT(tc_send(holder, "{\"type\":\"CANCEL\",\"job_id\":\"hold\"}") == 0);
	struct json_object *done = tc_expect(holder, "DONE", 10000);
	CU_ASSERT(done != NULL); /* so that the stop need not wait for it */
	json_object_put(done);
	tc_close(holder);
	fx_spin(100);
	wstap_free(tap);
	harness_stop(&d, 10000);
	harness_cleanup(&d);
}

/* A JOB larger than the maxFrameBytes the instance announces (4096 here)
 * is not sent: the job ends bad_job (not retryable) naming both sizes,
 * and the connection stays up for the job running beside it and the one
 * after (the server would have closed it with 1009, and those with it). */
static void test_job_over_frame(void)
{
	struct es_daemon d;
	struct fx_done a = { 0 }, big = { 0 }, b = { 0 };
	struct exc_job_spec s;
	struct exc_address_stats st;
	char json[6000];
	exc_job *ja;
	exc_client *c;

	CU_ASSERT_FATAL(start(&d, 2, "maxFrameBytes: 4096\n") == 0);
	c = fx_client(NULL, &d, 1, NULL);
	fx_spec(&s, "tools", "{\"command\":\"sleep\",\"args\":[\"1\"]}", &a);
	ja = exc_submit(c, &s);
	while (strcmp(exc_job_state(ja), "running") != 0 && !a.called)
		fx_spin(50);
	int n = snprintf(json, sizeof json, "{\"command\":\"sleep\",\"args\":[\"0\"],\"pad\":\"");
	memset(json + n, 'x', 5000);
	strcpy(json + n + 5000, "\"}");
	fx_spec(&s, "tools", json, &big);
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&big.called, 10000));
	CU_ASSERT_STRING_EQUAL(big.error_code, "bad_job");
	CU_ASSERT_FALSE(big.retryable);
	CU_ASSERT(strstr(big.error_message, "more than the 4096 bytes instance") != NULL);
	CU_ASSERT(strstr(big.error_message, "(its maxFrameBytes)") != NULL);
	fx_spec(&s, "tools", "{\"command\":\"sleep\",\"args\":[\"0\"]}", &b);
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&a.called, 10000));
	CU_ASSERT(fx_wait(&b.called, 10000));
	CU_ASSERT(a.ok && b.ok);
	CU_ASSERT(exc_address_stats(c, 0, &st) == 0);
	CU_ASSERT_EQUAL(st.opened, 1);
	CU_ASSERT_EQUAL(harness_status_int(&d, "services", "tools", "started", NULL), 2);
	fx_stop(c, &d);
}

/* The handler is killed: the client reconnects, parks its waiting want
 * again, and gets the running job's DONE (exec_lost) by its client id. */
static void test_reconnect(void)
{
	struct es_daemon d;
	struct fx_done a = { 0 }, b = { 0 };
	struct exc_job_spec s;
	struct exc_address_stats st;
	exc_job *ja;
	exc_client *c;
	int pids[4];

	CU_ASSERT_FATAL(start(&d, 1, NULL) == 0);
	c = fx_client(NULL, &d, 1, NULL);
	fx_spec(&s, "tools", "{\"command\":\"sleep\",\"args\":[\"30\"]}", &a);
	ja = exc_submit(c, &s);
	while (strcmp(exc_job_state(ja), "running") != 0 && !a.called)
		fx_spin(50);
	fx_spec(&s, "tools", "{\"command\":\"cat\"}", &b);
	s.in.kind = EXC_IO_BUFFER;
	s.in.data = "after\n";
	s.in.len = 6;
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	fx_spin(300);
	CU_ASSERT_EQUAL(harness_status_int(&d, "waitgroups", "wg", "waiting", NULL), 1);
	CU_ASSERT_FATAL(harness_handler_pids(&d, pids, 4) == 1);
	kill(pids[0], SIGKILL);
	CU_ASSERT(fx_wait(&a.called, 15000));
	CU_ASSERT_STRING_EQUAL(a.error_code, "exec_lost");
	CU_ASSERT(a.retryable);
	CU_ASSERT(fx_wait(&b.called, 15000));
	CU_ASSERT(b.ok);
	CU_ASSERT_STRING_EQUAL(b.stdout_text, "after\n");
	CU_ASSERT(exc_address_stats(c, 0, &st) == 0);
	CU_ASSERT(st.opened >= 2);
	CU_ASSERT_EQUAL(st.connections, 1);
	fx_stop(c, &d);
}

/* The instance running a job vanishes for good: lost, retryable, after
 * the owner grace (5 s) or, longer here, the time its HELLO said it keeps
 * a job after losing the client (pingTimeoutSec 2 + pingIntervalSec 1 +
 * resumeGraceSec 1 + 5 s = 9 s). */
static void test_owner_lost(void)
{
	struct es_daemon d;
	struct fx_done a = { 0 };
	struct exc_job_spec s;
	exc_job *ja;
	exc_client *c;
	int pids[4], n;
	long long t0;

	CU_ASSERT_FATAL(
		start(&d, 1, "resumeGraceSec: 1\npingIntervalSec: 1\npingTimeoutSec: 2\n") == 0);
	c = fx_client(NULL, &d, 1, NULL); /* owner grace 5 s */
	fx_spec(&s, "tools", "{\"command\":\"sleep\",\"args\":[\"30\"]}", &a);
	ja = exc_submit(c, &s);
	while (strcmp(exc_job_state(ja), "running") != 0 && !a.called)
		fx_spin(50);
	n = harness_handler_pids(&d, pids, 4);
	kill(d.pid, SIGKILL);
	for (int i = 0; i < n; i++)
		kill(pids[i], SIGKILL);
	t0 = harness_now_ms();
	CU_ASSERT(fx_wait(&a.called, 20000));
	CU_ASSERT(harness_now_ms() - t0 >= 8500);
	CU_ASSERT_STRING_EQUAL(a.error_code, "lost");
	CU_ASSERT(strstr(a.error_message, "not reached again within 9 s") != NULL);
	CU_ASSERT(a.retryable);
	exc_client_free(c);
	harness_cleanup(&d);
}

static int nothing_held(struct json_object *st, void *arg)
{
	return harness_json_int(st, "waitgroups", "wg", "running", NULL) == 0 &&
	       harness_json_int(st, "waitgroups", "wg", "offered", NULL) == 0 &&
	       harness_json_int(st, "waitgroups", "wg", "waiting", NULL) == 0;
}

struct covered_wait {
	exc_client *c;
	unsigned duplicates;
};

static int duplicates_reach(void *arg)
{
	struct covered_wait *w = arg;
	struct exc_address_stats st;

	return exc_address_stats(w->c, 0, &st) == 0 && st.duplicates >= w->duplicates;
}

/* Back-pressure against one instance: one more connection, which repeats
 * the instance_id: closed, covered, growth stops until the re-probe. */
static void test_pool_covered(void)
{
	struct es_daemon d;
	struct fx_done a = { 0 }, b = { 0 };
	struct exc_job_spec s;
	struct exc_address_stats st, st2;
	struct covered_wait w;
	exc_client *c;
	long long t0;

	CU_ASSERT_FATAL(start(&d, 1, NULL) == 0);
	c = fx_client(NULL, &d, 1, NULL); /* cap 8, growth 300 ms, re-probe 3 s */
	fx_spec(&s, "tools", "{\"command\":\"sleep\",\"args\":[\"30\"]}", &a);
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	fx_spec(&s, "tools", "{\"command\":\"sleep\",\"args\":[\"30\"]}", &b);
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL); /* waits: back-pressure */
	w.c = c;
	w.duplicates = 1;
	t0 = harness_now_ms();
	CU_ASSERT(fx_wait_pred(duplicates_reach, &w, 5000));
	CU_ASSERT(exc_address_stats(c, 0, &st) == 0);
	CU_ASSERT(st.covered);
	CU_ASSERT_EQUAL(st.connections, 1);
	CU_ASSERT_EQUAL(st.instances, 1);
	CU_ASSERT_EQUAL(st.opened, 2);
	/* covered: no growth for the rest of the re-probe interval */
	fx_spin(2000);
	CU_ASSERT(exc_address_stats(c, 0, &st2) == 0);
	if (harness_now_ms() - t0 < 2900)
		CU_ASSERT_EQUAL(st2.opened, 2);
	/* the re-probe clears the mark: one more attempt, a duplicate again */
	w.duplicates = 2;
	CU_ASSERT(fx_wait_pred(duplicates_reach, &w, 6000));
	CU_ASSERT(exc_address_stats(c, 0, &st2) == 0);
	CU_ASSERT_EQUAL(st2.opened, 3);
	CU_ASSERT_EQUAL(st2.connections, 1);
	/* free cancels the running job at once (no resume grace wait) and
	 * drops the waiting one */
	CU_ASSERT_EQUAL(harness_status_int(&d, "waitgroups", "wg", "running", NULL), 1);
	exc_client_free(c);
	CU_ASSERT(harness_wait_status(&d, 5000, nothing_held, NULL) == 0);
	if (getenv("FX_VERBOSE")) {
		struct json_object *sj = harness_status(&d);
		fprintf(stderr, "STATUS %s\n", json_object_to_json_string(sj));
		json_object_put(sj);
		harness_dump_log(&d);
	}
	harness_stop(&d, 10000);
	harness_cleanup(&d);
}

/* A service no instance offers: unknown_service once the pool is covered. */
static void test_unknown_service(void)
{
	struct es_daemon d;
	struct fx_done a = { 0 };
	struct exc_job_spec s;
	exc_client *c;

	CU_ASSERT_FATAL(start(&d, 1, NULL) == 0);
	c = fx_client(NULL, &d, 1, NULL);
	fx_spec(&s, "nosuch", "{\"command\":\"cat\"}", &a);
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&a.called, 10000));
	CU_ASSERT_STRING_EQUAL(a.error_code, "unknown_service");
	CU_ASSERT(!a.retryable);
	/* the address, covered, loses its connection: a job of a service it
	 * had is not unknown_service while nothing is up to ask, it waits
	 * (here until its connect timeout) */
	harness_stop(&d, 10000);
	fx_spin(300);
	memset(&a, 0, sizeof a);
	fx_spec(&s, "tools", "{\"command\":\"cat\"}", &a);
	s.connect_timeout_sec = 2;
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&a.called, 6000));
	CU_ASSERT_STRING_EQUAL(a.error_code, "no_slot");
	CU_ASSERT(a.retryable);
	exc_client_free(c);
	harness_cleanup(&d);
}

/* A /job/<service> address carries only that service; a wrong token is
 * reported as unauthorized. */
static void test_address_filter_and_token(void)
{
	struct es_daemon d;
	struct fx_done a = { 0 }, b = { 0 };
	struct exc_job_spec s;
	struct exc_options o;
	exc_client *c;

	harness_auth_token = "s3cret";
	CU_ASSERT_FATAL(start(&d, 1, "authToken: s3cret\n") == 0);
	fx_options(&o);
	o.auth_token = "s3cret";
	c = fx_client(&o, &d, 1, "/job/other");
	fx_spec(&s, "tools", "{\"command\":\"cat\"}", &a);
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&a.called, 5000));
	CU_ASSERT_STRING_EQUAL(a.error_code, "unknown_service"); /* no address for it */
	exc_client_free(c);
	c = fx_client(&o, &d, 1, "/job/tools");
	memset(&a, 0, sizeof a);
	fx_spec(&s, "tools", "{\"command\":\"cat\"}", &a);
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&a.called, 10000));
	CU_ASSERT(a.ok);
	exc_client_free(c);
	o.auth_token = "wrong";
	c = fx_client(&o, &d, 1, NULL);
	fx_spec(&s, "tools", "{\"command\":\"cat\"}", &b);
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&b.called, 5000));
	CU_ASSERT_STRING_EQUAL(b.error_code, "unauthorized");
	CU_ASSERT(!b.retryable);
	fx_stop(c, &d);
	harness_auth_token = NULL;
}

/*
 * The HTTP status of a GET of path, asked from a child process while this
 * one runs the event loop that serves it (exit code: status - 300).
 */
static int status_async(const char *method, const char *host, int port, const char *path)
{
	int st = 0;
	pid_t pid = fork();

	if (pid == 0) {
		char body[256], req[512];
		int status = 0;

		snprintf(req, sizeof req,
			 "%s %s HTTP/1.1\r\nHost: %s:%d\r\n"
			 "Content-Length: 0\r\nConnection: close\r\n\r\n",
			 method, path, host, port);
		if (wsc_http_request(host, port, req, 10000, &status, body, sizeof body) < 0)
			_exit(0);
		_exit(status >= 300 && status < 556 ? status - 300 : 0);
	}
	for (long long end = harness_now_ms() + 15000;
	     waitpid(pid, &st, WNOHANG) == 0 && harness_now_ms() < end;)
		fx_spin(20);
	return WIFEXITED(st) && WEXITSTATUS(st) ? WEXITSTATUS(st) + 300 : -1;
}

/* Runs the loop until the library logged that the endpoint of url was
 * taken by a request (the execserver's). */
static int wait_taken(const char *url)
{
	const char *id = strrchr(url, '/');
	char needle[80];
	long long end = harness_now_ms() + 15000;

	snprintf(needle, sizeof needle, "pipe endpoint %s: ", id ? id + 1 : "");
	while (!fx_log_find(needle) && harness_now_ms() < end)
		fx_spin(20);
	return fx_log_find(needle) != NULL;
}

/* Runs the loop until the library logged the URL of a job's endpoint
 * (what: "stdin GET at ", "stdout PUT at "), or the job (done) ended;
 * the URL and its host, port and path into the arguments.  0 or -1. */
static int endpoint_url(const char *what, const struct fx_done *done, char url[200], char host[64],
			int *port, char path[160])
{
	const char *at;

	while (!(at = fx_log_find(what)) && !done->called)
		fx_spin(20);
	if (at == NULL || sscanf(at + strlen(what), "%199s", url) != 1 ||
	    sscanf(url, "http://%63[^:]:%d%159s", host, port, path) != 3)
		return -1;
	return 0;
}

/* Pipe endpoints: each URL serves one request; a wrong id is refused. */
static void test_pipe_once(void)
{
	struct es_daemon d;
	struct fx_done a = { 0 };
	struct exc_job_spec s;
	exc_client *c;
	char url[200], path[160], host[64];
	int port = 0;

	CU_ASSERT_FATAL(start(&d, 1, NULL) == 0);
	c = fx_client(NULL, &d, 1, NULL);
	fx_log_clear();
	fx_spec(&s, "tools", "{\"command\":\"sleep\",\"args\":[\"2\"]}", &a);
	s.in.kind = EXC_IO_BUFFER;
	s.in.data = "not read\n";
	s.in.len = 9;
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT_FATAL(endpoint_url("stdin GET at ", &a, url, host, &port, path) == 0);
	CU_ASSERT_STRING_EQUAL(host, "127.0.0.1"); /* the broker connection's local address */
	CU_ASSERT(wait_taken(url));                /* the execserver fetched it */
	CU_ASSERT_EQUAL(status_async("GET", host, port, path), 410);
	path[strlen(path) - 1] = path[strlen(path) - 1] == '0' ? '1' : '0';
	CU_ASSERT_EQUAL(status_async("GET", host, port, path), 404);
	CU_ASSERT(fx_wait(&a.called, 10000));
	CU_ASSERT(a.ok);
	CU_ASSERT_EQUAL(a.stdin_bytes, 9);
	fx_stop(c, &d);
}

/* The URL of one endpoint from the client's log ("stdin GET at ") into
 * url; its host into host.  0 or -1. */
static int endpoint_host(const char *what, char url[200], char host[64])
{
	const char *at = fx_log_find(what);
	int port;

	if (at == NULL || sscanf(at + strlen(what), "%199s", url) != 1 ||
	    sscanf(url, "http://%63[^:]:%d", host, &port) != 2)
		return -1;
	return 0;
}

#define PIN_CHECK(cond) \
	(ok &= (cond) ? 1 : (fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond), 0))

/* Runs in a child with a network namespace of its own, where the route of
 * 127.0.0.1 has source address 127.0.0.2: the client dials 127.0.0.1 and
 * its broker socket's local address is 127.0.0.2.  The pipe URLs must
 * carry 127.0.0.2 (the execserver's callback guard accepts no other host
 * from that peer, so the job also fails if they do not).  Exit status 0:
 * all held; 1: a check failed; 2: the namespace could not be made. */
static int pinned_child(void)
{
	struct es_daemon d;
	struct fx_done a = { 0 };
	struct exc_job_spec s;
	char url[200], host[64], out[300];
	int ok = 1;
	uid_t uid = getuid();
	gid_t gid = getgid();

	if (unshare(CLONE_NEWNET) != 0) { /* not root: as root of a user namespace */
		char map[64];
		int fd;

		if (unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0)
			return 2;
		snprintf(map, sizeof map, "0 %u 1", (unsigned)uid);
		if ((fd = open("/proc/self/uid_map", O_WRONLY)) < 0 ||
		    write(fd, map, strlen(map)) < 0)
			return 2;
		close(fd);
		if ((fd = open("/proc/self/setgroups", O_WRONLY)) >= 0) {
			if (write(fd, "deny", 4) < 0)
				return 2;
			close(fd);
		}
		snprintf(map, sizeof map, "0 %u 1", (unsigned)gid);
		if ((fd = open("/proc/self/gid_map", O_WRONLY)) < 0 ||
		    write(fd, map, strlen(map)) < 0)
			return 2;
		close(fd);
	}
	if (system("ip link set lo up && ip route replace local 127.0.0.1 dev lo table local "
		   "proto kernel scope host src 127.0.0.2") != 0)
		return 2;
	fx_base = event_base_new(); /* not the parent's: its epoll is shared */
	if (start(&d, 1, NULL) != 0)
		return 1;
	snprintf(out, sizeof out, "%s/pinned.out", d.dir);
	exc_client *c = fx_client(NULL, &d, 1, NULL);
	fx_log_clear();
	fx_spec(&s, "tools", "{\"command\":\"cat\"}", &a);
	s.in.kind = EXC_IO_BUFFER;
	s.in.data = "pinned\n";
	s.in.len = 7;
	s.out.kind = EXC_IO_FILE;
	s.out.path = out;
	PIN_CHECK(exc_submit(c, &s) != NULL);
	PIN_CHECK(fx_wait(&a.called, 15000));
	PIN_CHECK(a.ok);
	if (!a.ok)
		fprintf(stderr, "pinned job: %s: %s\n", a.error_code, a.error_message);
	PIN_CHECK(endpoint_host("stdin GET at ", url, host) == 0 && strcmp(host, "127.0.0.2") == 0);
	fprintf(stderr, "pinned: stdin endpoint %s\n", url);
	PIN_CHECK(endpoint_host("stdout PUT at ", url, host) == 0 &&
		  strcmp(host, "127.0.0.2") == 0);
	size_t len = 0;
	unsigned char *back = harness_read_file(out, &len);
	PIN_CHECK(back != NULL && len == 7 && memcmp(back, "pinned\n", 7) == 0);
	free(back);
	fx_stop(c, &d);
	return ok ? 0 : 1;
}

/* Pipe URL pinning with a local address that differs from the address
 * dialled (docs/client.md, "Where the execserver connects back"). */
static void test_pipe_local_address(void)
{
	int status = -1;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0)
		_exit(pinned_child());
	CU_ASSERT(waitpid(pid, &status, 0) == pid);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 2)
		fprintf(stderr,
			"no network namespace with ip(8) here (needs root or user namespaces)\n");
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* A stdout endpoint being streamed refuses a second PUT; the stream
 * itself completes. */
static void test_pipe_put_once(void)
{
	struct es_daemon d;
	struct fx_done a = { 0 };
	struct exc_job_spec s;
	exc_client *c;
	char url[200], path[160], host[64], out[300], chunk[6000];
	int port = 0, in[2], fd;
	size_t got = 0;
	unsigned char *back;

	CU_ASSERT_FATAL(start(&d, 1, NULL) == 0);
	snprintf(out, sizeof out, "%s/put-once.out", d.dir);
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CU_ASSERT_FATAL(pipe(in) == 0);
	memset(chunk, 'x', sizeof chunk);
	CU_ASSERT_FATAL(write(in[1], chunk, sizeof chunk) == (ssize_t)sizeof chunk);
	c = fx_client(NULL, &d, 1, NULL);
	fx_log_clear();
	fx_spec(&s, "tools", "{\"command\":\"cat\"}", &a);
	s.in.kind = EXC_IO_FD;
	s.in.fd = in[0];
	s.out.kind = EXC_IO_FD;
	s.out.fd = fd;
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT_FATAL(endpoint_url("stdout PUT at ", &a, url, host, &port, path) == 0);
	CU_ASSERT(wait_taken(url)); /* 6000 bytes > 4000: the PUT is streaming */
	CU_ASSERT_EQUAL(status_async("PUT", host, port, path), 410);
	CU_ASSERT(!a.called); /* stdin is still open: the job still runs */
	close(in[1]);
	CU_ASSERT(fx_wait(&a.called, 10000));
	CU_ASSERT(a.ok);
	CU_ASSERT_EQUAL(a.stdout_bytes, sizeof chunk);
	close(in[0]);
	close(fd);
	back = harness_read_file(out, &got);
	CU_ASSERT(back && got == sizeof chunk && memcmp(back, chunk, got) == 0);
	free(back);
	fx_stop(c, &d);
}

/* stdin and stdout given as URLs (here the test pipe server's): passed to
 * the execserver as they are; the library serves nothing for them. */
static void test_url_passthrough(void)
{
	struct es_daemon d;
	struct pipe_server ps;
	struct pipe_endpoint pe = PIPE_ENDPOINT_INIT;
	struct pipe_result res;
	struct fx_done done = { 0 };
	struct exc_job_spec s;
	char in_url[256], out_url[256], want[65];
	exc_client *c;

	CU_ASSERT_FATAL(start(&d, 1, NULL) == 0);
	CU_ASSERT_FATAL(pipe_server_start(&ps) > 0);
	pe.seed = 7;
	pe.size = 1 << 20;
	CU_ASSERT_FATAL(pipe_server_in(&ps, "src", &pe, in_url, sizeof in_url) == 0);
	CU_ASSERT_FATAL(pipe_server_out(&ps, "dst", &pe, out_url, sizeof out_url) == 0);
	c = fx_client(NULL, &d, 1, NULL);
	fx_log_clear();
	fx_spec(&s, "tools", "{\"command\":\"cat\"}", &done);
	s.in.kind = EXC_IO_URL;
	s.in.url = in_url;
	s.out.kind = EXC_IO_URL;
	s.out.url = out_url;
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&done.called, 20000));
	CU_ASSERT(done.ok);
	CU_ASSERT_EQUAL(done.stdin_bytes, 0); /* nothing went through the library */
	CU_ASSERT(fx_log_find(" GET at ") == NULL);
	CU_ASSERT(pipe_server_result(&ps, "dst", &res) == 0);
	pipe_random_sha256(7, 1 << 20, want);
	CU_ASSERT_EQUAL(res.length, 1 << 20);
	CU_ASSERT_STRING_EQUAL(res.sha256, want);
	exc_client_free(c);
	pipe_server_stop(&ps);
	harness_stop(&d, 10000);
	harness_cleanup(&d);
}

/* The connection to the instance running a job is closed by the server
 * (the client went silent past pingTimeoutSec): the job is sought, the
 * pool reconnects to the same instance, the job is resumed there by the
 * client id and its DONE arrives normally. */
static void test_owner_found_again(void)
{
	struct es_daemon d;
	struct fx_done a = { 0 };
	struct exc_job_spec s;
	exc_job *ja;
	exc_client *c;

	CU_ASSERT_FATAL(start(&d, 1, "pingIntervalSec: 1\npingTimeoutSec: 2\n") == 0);
	c = fx_client(NULL, &d, 1, NULL);
	fx_log_clear();
	fx_spec(&s, "tools", "{\"command\":\"sleep\",\"args\":[\"5\"]}", &a);
	ja = exc_submit(c, &s);
	while (strcmp(exc_job_state(ja), "running") != 0 && !a.called)
		fx_spin(50);
	/* no loop: no pong; the server closes the connection */
	CU_ASSERT(harness_wait_int(&d, 0, 10000, "clients", NULL) == 0);
	CU_ASSERT(fx_wait(&a.called, 15000));
	CU_ASSERT(a.ok);
	CU_ASSERT_EQUAL(a.exit_code, 0);
	CU_ASSERT(fx_log_find("seeking") != NULL);
	CU_ASSERT(fx_log_find("reached again") != NULL);
	fx_stop(c, &d);
}

/* The program closes its stdin and runs on (it reads only part of its
 * input): the execserver's next write into it fails (EPIPE) and it closes
 * the stdin GET while the library's source waits for the caller's pipe.
 * The library lets go of the pipe then: bytes written to it afterwards
 * stay there for the caller (no freed request is woken by them: the
 * sanitizer pass of scripts/test.sh runs this), and the job ends ok. */
static void test_stdin_closed_early(void)
{
	struct es_daemon d;
	struct fx_done done = { 0 };
	struct exc_job_spec s;
	char job[600], mark[300], back[16];
	int in[2];
	exc_client *c;

	CU_ASSERT_FATAL(start(&d, 1, NULL) == 0);
	snprintf(mark, sizeof mark, "%s/stdin-closed", d.dir);
	snprintf(job, sizeof job,
		 "{\"command\":\"sh\",\"args\":[\"-c\",\"exec 0<&-; : > %s; sleep 2\"]}", mark);
	CU_ASSERT_FATAL(pipe(in) == 0);
	c = fx_client(NULL, &d, 1, NULL);
	fx_log_clear();
	fx_spec(&s, "tools", job, &done);
	s.in.kind = EXC_IO_FD;
	s.in.fd = in[0];
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	while (!(access(mark, F_OK) == 0 && fx_log_find("GET taken")) && !done.called)
		fx_spin(20);
	CU_ASSERT_FATAL(!done.called);
	/* passed on by the library; the execserver cannot deliver it (EPIPE)
	 * and closes the GET, which the library notices at once */
	CU_ASSERT_FATAL(write(in[1], "a", 1) == 1);
	while (!fx_log_find("pipe connection closed early") && !done.called)
		fx_spin(20);
	CU_ASSERT(fx_log_find("pipe connection closed early") != NULL);
	CU_ASSERT(!done.called);
	CU_ASSERT_FATAL(write(in[1], "later", 5) == 5);
	fx_spin(300); /* the pipe is readable now: nobody may take it */
	CU_ASSERT(fx_wait(&done.called, 15000));
	CU_ASSERT(done.ok);
	CU_ASSERT_EQUAL(done.stdin_bytes, 1);
	CU_ASSERT(fcntl(in[0], F_SETFL, O_NONBLOCK) == 0);
	CU_ASSERT(read(in[0], back, sizeof back) == 5 && memcmp(back, "later", 5) == 0);
	close(in[0]);
	close(in[1]);
	fx_stop(c, &d);
}

/* A running job's connection drops and every attempt to reach its
 * instance again fails inside the connect call (no descriptor left:
 * socket() says EMFILE): the failure still comes from the loop, after the
 * pool wrote the ?instance= hint into the connection (no write into a
 * freed one: the sanitizer pass runs this), and the job ends lost after
 * the owner grace. */
static void test_seek_connect_fails_at_once(void)
{
	struct es_daemon d;
	struct fx_done done = { 0 };
	struct exc_job_spec s;
	struct exc_options o;
	struct wstap *tap;
	char url[100];
	exc_client *c;
	exc_job *j;

	/* short server graces: "lost" waits for the instance's own bound
	 * (pingTimeout + pingInterval + resumeGrace + 5 s = 9 s) */
	CU_ASSERT_FATAL(
		start(&d, 1, "resumeGraceSec: 1\npingIntervalSec: 1\npingTimeoutSec: 2\n") == 0);
	fx_options(&o);
	o.owner_grace_sec = 3;
	c = fx_client(&o, NULL, 0, NULL);
	tap = wstap_new(fx_base, d.port);
	CU_ASSERT_FATAL(tap != NULL);
	snprintf(url, sizeof url, "ws://127.0.0.1:%d", wstap_port(tap));
	CU_ASSERT_FATAL(exc_client_add_address(c, url) == 0);
	fx_log_clear();
	fx_spec(&s, "tools", "{\"command\":\"sleep\",\"args\":[\"6\"]}", &done);
	j = exc_submit(c, &s);
	CU_ASSERT_FATAL(j != NULL);
	while (strcmp(exc_job_state(j), "running") != 0 && !done.called)
		fx_spin(50);
	CU_ASSERT_FATAL(!done.called);
	wstap_free(tap); /* the connection drops: the job is sought */
	/* once the dropped connection's descriptor is closed */
	while (!fx_log_find("seeking") && !done.called)
		fx_spin(20);
	CU_ASSERT_FATAL(fx_fds_exhaust() >= 0);
	fx_wait(&done.called, 20000);
	fx_fds_release();
	CU_ASSERT(done.called == 1);
	CU_ASSERT_STRING_EQUAL(done.error_code, "lost");
	CU_ASSERT(fx_log_find("?instance=") != NULL);
	CU_ASSERT(fx_log_find("cannot connect: Too many open files") != NULL);
	/* each attempt carried the hint and counts as a miss of it */
	CU_ASSERT(fx_log_find("hint dropped, seeking without it") != NULL);
	fx_stop(c, &d);
}

/* Streams that go quiet longer than any timer the pipe server keeps (the
 * 10 s head deadline): a job's stdout commits (5000 bytes) and then says
 * nothing for 11 s, while its stdin (32 MiB, more than the pipes and
 * socket buffers hold) is not read for those 11 s either.  With the
 * default options both streams survive and the job ends ok with every
 * byte.  Beside it, a client with pipe_idle_timeout_ms = 1000 runs a job
 * whose stdout (100000 bytes into a pipe nobody reads yet) then goes
 * quiet: its PUT is cut after 1 s ("timed out"), and from then on the
 * library writes nothing more into that pipe (the cut request's sink
 * callback is gone: the sanitizer pass runs this), and the job does not
 * end ok. */
static void test_quiet_streams(void)
{
	struct es_daemon d;
	struct fx_done quiet = { 0 }, cut = { 0 };
	struct exc_job_spec s;
	struct exc_options o;
	size_t n = 32u << 20, got = 0;
	unsigned char *data = harness_pattern(n);
	char path[300], buf[65536];
	exc_client *c, *c_idle;
	int fd, out[2];
	ssize_t r;

	CU_ASSERT_FATAL(start(&d, 2, NULL) == 0);
	snprintf(path, sizeof path, "%s/quiet.out", d.dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CU_ASSERT_FATAL(fd >= 0 && pipe(out) == 0);
	c = fx_client(NULL, &d, 1, NULL);
	fx_spec(&s, "tools",
		"{\"command\":\"sh\",\"args\":[\"-c\",\"head -c 5000 /dev/zero; sleep 11; "
		"cat > /dev/null; echo more\"]}",
		&quiet);
	s.in.kind = EXC_IO_BUFFER;
	s.in.data = data;
	s.in.len = n;
	s.out.kind = EXC_IO_FD;
	s.out.fd = fd;
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);

	fx_options(&o);
	o.pipe_idle_timeout_ms = 1000;
	c_idle = fx_client(&o, &d, 1, NULL);
	fx_spec(&s, "tools",
		"{\"command\":\"sh\",\"args\":[\"-c\",\"head -c 100000 /dev/zero; sleep 3\"]}",
		&cut);
	s.out.kind = EXC_IO_FD;
	s.out.fd = out[1];
	CU_ASSERT_FATAL(exc_submit(c_idle, &s) != NULL);
	while (!fx_log_find("pipe connection timed out") && !cut.called && !quiet.called)
		fx_spin(50);
	CU_ASSERT_FATAL(fx_log_find("pipe connection timed out") != NULL);
	/* what the library wrote before the cut; nothing comes after it */
	CU_ASSERT(fcntl(out[0], F_SETFL, O_NONBLOCK) == 0);
	while ((r = read(out[0], buf, sizeof buf)) > 0)
		got += (size_t)r;
	fx_spin(500);
	while ((r = read(out[0], buf, sizeof buf)) > 0)
		got += (size_t)r;
	CU_ASSERT(got > 0 && got < 100000);
	CU_ASSERT(fx_wait(&cut.called, 10000));
	CU_ASSERT(!cut.ok);
	CU_ASSERT(cut.error_code[0] != '\0');
	fprintf(stderr, "\nidle-cut job: %s: %s (%zu bytes before the cut)\n", cut.error_code,
		cut.error_message, got);

	CU_ASSERT(fx_wait(&quiet.called, 30000));
	CU_ASSERT(quiet.ok);
	if (!quiet.ok)
		fprintf(stderr, "quiet job: %s: %s\n", quiet.error_code, quiet.error_message);
	CU_ASSERT_EQUAL(quiet.stdin_bytes, n);
	CU_ASSERT_EQUAL(quiet.stdout_bytes, 5005);
	close(fd);
	close(out[0]);
	close(out[1]);
	free(data);
	exc_client_free(c_idle);
	fx_stop(c, &d);
}

/* Bearer tokens: the longest the library takes (EXC_AUTH_TOKEN_MAX
 * visible characters) goes whole into the upgrade request and runs a job
 * (it was cut at 600 bytes, without its CRLF, and the upgrade never
 * ended); one character more, or a CR/LF (header injection), a space or
 * an empty token, and exc_client_new refuses the options (EINVAL). */
static void test_long_token(void)
{
	static char tok[EXC_AUTH_TOKEN_MAX + 2], extra[EXC_AUTH_TOKEN_MAX + 40];
	static const char *const bad[] = { "a\r\nX-Injected: 1", "two words", "", "tab\t" };
	struct es_daemon d;
	struct fx_done done = { 0 };
	struct exc_job_spec s;
	struct exc_options o;
	exc_client *c;

	for (size_t i = 0; i < sizeof tok - 1; i++)
		tok[i] = (char)('!' + i % 94); /* every visible character */
	tok[EXC_AUTH_TOKEN_MAX] = '\0';
	fx_options(&o);
	o.auth_token = tok;
	c = fx_client(&o, NULL, 0, NULL);
	CU_ASSERT_PTR_NOT_NULL(c);
	exc_client_free(c);
	tok[EXC_AUTH_TOKEN_MAX] = 'x';
	errno = 0;
	CU_ASSERT_PTR_NULL(exc_client_new(fx_base, &o));
	CU_ASSERT_EQUAL(errno, EINVAL);
	tok[EXC_AUTH_TOKEN_MAX] = '\0';
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		o.auth_token = bad[i];
		errno = 0;
		CU_ASSERT_PTR_NULL(exc_client_new(fx_base, &o));
		CU_ASSERT_EQUAL(errno, EINVAL);
	}

	/* letters only in the daemon's YAML: no quoting to get wrong */
	memset(tok, 'k', EXC_AUTH_TOKEN_MAX);
	snprintf(extra, sizeof extra, "authToken: %s\n", tok);
	harness_auth_token = tok;
	CU_ASSERT_FATAL(start(&d, 1, extra) == 0);
	o.auth_token = tok;
	o.handshake_timeout_ms = 3000;
	c = fx_client(&o, &d, 1, NULL);
	CU_ASSERT_FATAL(c != NULL);
	fx_spec(&s, "tools", "{\"command\":\"cat\"}", &done);
	s.connect_timeout_sec = 8;
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&done.called, 15000));
	CU_ASSERT(done.ok);
	fx_stop(c, &d);
	harness_auth_token = NULL;
}

/* A PUT endpoint whose body is complete stops reading its connection
 * while its sink drains: a peer that goes on sending after the body (here
 * the test, on a stdout endpoint the execserver has not taken: the
 * program wrote nothing yet) is held back by TCP, not buffered by the
 * library.  The sink is a pipe nobody reads, so the body's last 134464
 * bytes stay queued; what the peer gets into the connection after the
 * body is bounded by the socket buffers (a few MiB), not 24 MiB. */
static void test_put_complete_stops_reading(void)
{
	static char chunk[1 << 16];
	const size_t body = 200000, junk_max = 24u << 20;
	struct es_daemon d;
	struct fx_done a = { 0 };
	struct exc_job_spec s;
	struct sockaddr_in sin = { .sin_family = AF_INET };
	char url[200], path[160], host[64], head[400];
	size_t sent = 0, junk = 0;
	int port = 0, out[2], sock;
	exc_client *c;

	CU_ASSERT_FATAL(start(&d, 1, NULL) == 0);
	CU_ASSERT_FATAL(pipe(out) == 0);
	memset(chunk, 'x', sizeof chunk);
	c = fx_client(NULL, &d, 1, NULL);
	fx_log_clear();
	fx_spec(&s, "tools", "{\"command\":\"sleep\",\"args\":[\"6\"]}", &a);
	s.out.kind = EXC_IO_FD;
	s.out.fd = out[1];
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT_FATAL(endpoint_url("stdout PUT at ", &a, url, host, &port, path) == 0);
	sock = socket(AF_INET, SOCK_STREAM, 0);
	CU_ASSERT_FATAL(sock >= 0);
	sin.sin_port = htons((uint16_t)port);
	CU_ASSERT_FATAL(inet_pton(AF_INET, host, &sin.sin_addr) == 1);
	CU_ASSERT_FATAL(connect(sock, (struct sockaddr *)&sin, sizeof sin) == 0);
	CU_ASSERT(fcntl(sock, F_SETFL, O_NONBLOCK) == 0);
	snprintf(head, sizeof head, "PUT %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Length: %zu\r\n\r\n",
		 path, host, port, body);
	CU_ASSERT_FATAL(write(sock, head, strlen(head)) == (ssize_t)strlen(head));
	for (long long end = harness_now_ms() + 4000; harness_now_ms() < end && junk < junk_max;) {
		ssize_t w;

		fx_spin(10);
		while (junk < junk_max) {
			size_t want = sent < body ? body - sent : sizeof chunk;

			w = write(sock, chunk, want < sizeof chunk ? want : sizeof chunk);
			if (w <= 0)
				break;
			if (sent < body)
				sent += (size_t)w;
			else
				junk += (size_t)w;
		}
	}
	fprintf(stderr, "\n%zu bytes after the body went into the connection\n", junk);
	CU_ASSERT_EQUAL(sent, body);
	CU_ASSERT(junk < 16u << 20);
	close(sock);
	CU_ASSERT(fx_wait(&a.called, 15000));
	close(out[0]);
	close(out[1]);
	fx_stop(c, &d);
}

/* The scripted broker of test_broken_done: every want gets an offer; the
 * JOB of a job whose command is "plain" is answered at once with a DONE
 * whose receipt is a string; the others' DONE (no receipt) answers their
 * CANCEL. */
struct broken_done {
	int jobs, cancels, acks;
	char cancelled[64];
};

static void broken_done_script(struct fb_conn *k, const char *type, struct json_object *o,
			       void *arg)
{
	struct broken_done *b = arg;
	struct json_object *v, *job;
	const char *id = json_object_object_get_ex(o, "job_id", &v) ? json_object_get_string(v)
								    : "";
	char msg[300];

	if (strcmp(type, "WANT") == 0) {
		snprintf(msg, sizeof msg,
			 "{\"type\":\"OFFER\",\"job_id\":\"%s\",\"token\":\"0123456789abcdef\"}",
			 id);
		fakebroker_send(k, msg);
	} else if (strcmp(type, "JOB") == 0) {
		b->jobs++;
		if (json_object_object_get_ex(o, "job", &job) &&
		    json_object_object_get_ex(job, "command", &v) &&
		    strcmp(json_object_get_string(v), "plain") == 0) {
			snprintf(msg, sizeof msg,
				 "{\"type\":\"DONE\",\"job_id\":\"%s\",\"receipt\":\"exit 0\"}",
				 id);
			fakebroker_send(k, msg);
		}
	} else if (strcmp(type, "CANCEL") == 0) {
		b->cancels++;
		snprintf(b->cancelled, sizeof b->cancelled, "%s", id);
		snprintf(msg, sizeof msg, "{\"type\":\"DONE\",\"job_id\":\"%s\"}", id);
		fakebroker_send(k, msg);
	} else if (strcmp(type, "ACK") == 0) {
		b->acks++;
	}
}

/* A DONE of a running job without a readable receipt (not an object, or
 * none): acknowledged, and the job ends lost (retryable: it may have
 * run), not left running for ever; after exc_cancel it ends cancelled
 * (not retryable), as a cancelled job whose receipt the instance dropped
 * (docs/client.md, "Receipts").  Before, the cancelled one ended lost. */
static void test_broken_done(void)
{
	static const char hello[] =
		"{\"type\":\"HELLO\",\"instance_id\":\"fake-1\",\"version\":\"0\",\"protocol\":2,"
		"\"services\":{\"tools\":\"wg\"},\"waitgroups\":{\"wg\":{\"processes\":2}},"
		"\"clients\":1,\"draining\":false}";
	struct broken_done b = { 0 };
	struct fx_done a = { 0 }, z = { 0 };
	struct fakebroker *fb;
	struct exc_job_spec s;
	exc_client *c;
	exc_job *jz;
	char url[64];

	c = fx_client(NULL, NULL, 0, NULL);
	CU_ASSERT_FATAL(c != NULL);
	fb = fakebroker_new(fx_base, hello, broken_done_script, &b);
	CU_ASSERT_FATAL(fb != NULL);
	snprintf(url, sizeof url, "ws://127.0.0.1:%d", fakebroker_port(fb));
	CU_ASSERT_FATAL(exc_client_add_address(c, url) == 0);
	/* not cancelled: lost */
	fx_spec(&s, "tools", "{\"command\":\"plain\"}", &a);
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&a.called, 5000));
	CU_ASSERT_STRING_EQUAL(a.error_code, "lost");
	CU_ASSERT(a.retryable);
	CU_ASSERT(strstr(a.error_message, "without a readable receipt") != NULL);
	/* cancelled while running: cancelled */
	fx_spec(&s, "tools", "{\"command\":\"sleep\",\"args\":[\"30\"]}", &z);
	jz = exc_submit(c, &s);
	CU_ASSERT_FATAL(jz != NULL);
	for (long long end = harness_now_ms() + 5000; b.jobs < 2 && harness_now_ms() < end;)
		fx_spin(20);
	CU_ASSERT_STRING_EQUAL(exc_job_state(jz), "running");
	/* the job is freed once its on_done has returned: its id kept here */
	char jid[128];
	snprintf(jid, sizeof jid, "%s", exc_job_id(jz));
	CU_ASSERT_EQUAL(exc_cancel(jz), 0);
	CU_ASSERT(fx_wait(&z.called, 5000));
	CU_ASSERT_EQUAL(b.cancels, 1);
	CU_ASSERT_STRING_EQUAL(b.cancelled, jid);
	CU_ASSERT_STRING_EQUAL(z.error_code, "cancelled");
	CU_ASSERT(!z.retryable);
	CU_ASSERT(!z.ok);
	if (strcmp(z.error_code, "cancelled") != 0)
		fprintf(stderr, "cancelled job ended %s: %s\n", z.error_code, z.error_message);
	for (long long end = harness_now_ms() + 5000; b.acks < 2 && harness_now_ms() < end;)
		fx_spin(20);
	CU_ASSERT_EQUAL(b.acks, 2); /* both DONEs acknowledged */
	exc_client_free(c);
	fakebroker_free(fb);
}

static const struct test_case cases[] = {
	{ "stdin buffer, stdout file", test_buffer_to_file },
	{ "stdin and stdout pipes", test_pipe_fds },
	{ "input and output files", test_files },
	{ "placement on a mixed pair", test_placement_mixed },
	{ "surplus offer declined", test_surplus_declined },
	{ "errors answering older messages are not the JOB's refusal",
	  test_stale_errors_not_job_refusal },
	{ "connect timeout, cancel, query", test_timeout_cancel_query },
	{ "claim share", test_claim_share },
	{ "claim share per service with several waitgroups", test_claim_share_waitgroups },
	{ "broker connections send at once (TCP_NODELAY)", test_nodelay },
	{ "idle silence: nothing but pongs, parked wants sent once", test_idle_silence },
	{ "pipe URLs carry the local address, not the one dialled", test_pipe_local_address },
	{ "reconnect after a handler is killed", test_reconnect },
	{ "owner never comes back: lost", test_owner_lost },
	{ "a JOB over the instance's maxFrameBytes: bad_job, not sent", test_job_over_frame },
	{ "pool growth stops when covered", test_pool_covered },
	{ "unknown service", test_unknown_service },
	{ "address filter and token", test_address_filter_and_token },
	{ "pipe endpoints are one-time", test_pipe_once },
	{ "a streaming PUT endpoint refuses a second PUT", test_pipe_put_once },
	{ "stdin and stdout as URLs", test_url_passthrough },
	{ "owner found again after a drop", test_owner_found_again },
	{ "a JOB refused limit_reached waits again", test_limit_reached_waits_again },
	{ "/dev/null fds and a broken stdout pipe", test_devnull_and_broken_pipe },
	{ "pipe server: slow heads and idle floods", test_pipe_dawdlers },
	{ "stdin closed early by the program", test_stdin_closed_early },
	{ "seeking: a connect that fails at once", test_seek_connect_fails_at_once },
	{ "quiet streams: no idle limit by default, pipe_idle_timeout_ms cuts",
	  test_quiet_streams },
	{ "bearer tokens: the longest runs, broken ones are refused", test_long_token },
	{ "a complete PUT body: the endpoint stops reading", test_put_complete_stops_reading },
	{ "a DONE without a readable receipt: lost, or cancelled after a cancel",
	  test_broken_done },
	{ NULL, NULL },
};

int main(void)
{
	int rc = run_suite("libexecclient", cases);

	/* libevent releases freed bufferevents from the loop or at base free */
	if (fx_base)
		event_base_free(fx_base);
	return rc;
}
