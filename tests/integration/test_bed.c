/*
 * test_bed.c - the test bed of hosts itself (tests/lib/bed.c) and the
 * first thing it is for: a job placed from host a on an execserver on host
 * c, across the bridge, with the job's streams fetched from and sent to a
 * pipe server on a at a's own address.  Then each link fault the later
 * tests rely on, proved by what the peers see: a cut is silent (the
 * daemon keeps the connection, a message sent meanwhile arrives after the
 * mend), loss drops about the share asked for, delay delays (where the
 * kernel has netem), and a run's namespaces are gone after it, even after
 * a crash.  As root only: otherwise one line says how many tests it left
 * out.
 */
#include "autoconfig.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "bed.h"
#include "harness.h"
#include "pipe_server.h"
#include "proto.h"
#include "suite.h"

static struct bed B;
#define A (&B.host[0])
#define C (&B.host[2])

static void stop_daemon(struct es_daemon *d)
{
	CU_ASSERT(harness_stop_clean(d) == 0);
}

/* A job from a to the execserver on c: stdin from a's pipe server, stdout
 * back to it; the daemon reached a at a's address, and the pipe server saw
 * the requests come from c's. */
static void test_job_across_bridge(void)
{
	struct es_daemon d;
	struct pipe_server ps;
	char in[256], out[256], job[700];
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;

	CU_ASSERT_FATAL(harness_start_on(&d, C, 1, harness_default_body(2), NULL) == 0);
	CU_ASSERT_STRING_EQUAL(harness_host(&d), C->addr);
	CU_ASSERT_FATAL(pipe_server_start_at(&ps, A->netns, A->addr) > 0);
	e.seed = 19;
	e.size = 300000;
	CU_ASSERT_FATAL(pipe_server_in(&ps, "in", &e, in, sizeof in) == 0);
	CU_ASSERT_FATAL(pipe_server_out(&ps, "out", NULL, out, sizeof out) == 0);
	CU_ASSERT(strstr(in, A->addr) != NULL);

	CU_ASSERT_FATAL(bed_enter(A) == 0);
	struct tclient *c = tc_connect_at(C->addr, d.port, "a1", 5000);
	CU_ASSERT_FATAL(c != NULL);
	snprintf(job, sizeof job, "{\"command\":\"cat\",\"stdin\":\"%s\",\"stdout\":\"%s\"}", in,
		 out);
	struct json_object *done = tc_run_job(c, "j1", "cat", job, 20000);
	CU_ASSERT_FATAL(done != NULL);
	struct json_object *r = tc_receipt(done);
	CU_ASSERT_EQUAL(tc_int(r, "exit_code"), 0);
	json_object_put(done);
	tc_close(c);
	CU_ASSERT(bed_leave() == 0);

	struct pipe_result got;
	char sha[65];
	pipe_random_sha256(19, 300000, sha);
	CU_ASSERT_FATAL(pipe_server_result(&ps, "out", &got) == 0);
	CU_ASSERT_EQUAL(got.length, 300000);
	CU_ASSERT_STRING_EQUAL(got.sha256, sha);
	CU_ASSERT_STRING_EQUAL(got.peer, C->addr);
	CU_ASSERT_FATAL(pipe_server_result(&ps, "in", &got) == 0);
	CU_ASSERT_EQUAL(got.requests, 1);
	CU_ASSERT_STRING_EQUAL(got.peer, C->addr);
	pipe_server_stop(&ps);
	stop_daemon(&d);
}

static int one_connection(struct json_object *st, void *arg)
{
	(void)arg;
	return harness_json_int(st, "connections", NULL) == 1;
}

/* A cut sends nothing: the daemon keeps the connection, a WANT sent during
 * the cut gets no OFFER until the link is mended, then gets it on the same
 * connection. */
static void test_cut_is_silent(void)
{
	struct es_daemon d;
	CU_ASSERT_FATAL(harness_start_on(&d, C, 1, harness_default_body(1), NULL) == 0);
	CU_ASSERT_FATAL(bed_enter(A) == 0);
	struct tclient *c = tc_connect_at(C->addr, d.port, "a2", 5000);
	CU_ASSERT_FATAL(c != NULL);

	CU_ASSERT_FATAL(bed_cut(A) == 0);
	CU_ASSERT(tc_send(c, "{\"type\":\"WANT\",\"job_id\":\"w1\",\"service\":\"cat\"}") == 0);
	CU_ASSERT(tc_quiet(c, 1500));
	CU_ASSERT(harness_wait_status(&d, 500, one_connection, NULL) == 0);
	CU_ASSERT(bed_mend(A) == 0);
	struct json_object *offer = tc_expect(c, "OFFER", 10000);
	CU_ASSERT(offer != NULL);
	CU_ASSERT_STRING_EQUAL(tc_str(offer, "job_id"), "w1");
	json_object_put(offer);
	tc_close(c);
	CU_ASSERT(bed_leave() == 0);
	stop_daemon(&d);
}

/* Datagrams from a to a socket on c: how many of n arrive. */
static int datagrams_through(int n)
{
	int home = harness_netns_enter(C->netns);
	CU_ASSERT_FATAL(home >= 0);
	int rx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	harness_netns_return(home);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof sa;
	inet_pton(AF_INET, C->addr, &sa.sin_addr);
	int rcvbuf = 4 << 20;
	setsockopt(rx, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
	CU_ASSERT_FATAL(bind(rx, (struct sockaddr *)&sa, sizeof sa) == 0);
	getsockname(rx, (struct sockaddr *)&sa, &len);

	CU_ASSERT_FATAL(bed_enter(A) == 0);
	int tx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	for (int i = 0; i < n; i++) {
		sendto(tx, &i, sizeof i, 0, (struct sockaddr *)&sa, sizeof sa);
		if (i % 50 == 49) /* sleep: paced, no queue overflow on the way */
			harness_sleep_ms(2);
	}
	close(tx);
	bed_leave();
	/* what arrives, until none has come for 200 ms (lost ones never do) */
	int got = 0, v;
	struct pollfd pfd = { .fd = rx, .events = POLLIN };
	while (poll(&pfd, 1, 200) == 1 && recv(rx, &v, sizeof v, MSG_DONTWAIT) == (ssize_t)sizeof v)
		got++;
	close(rx);
	return got;
}

/* 25 % loss drops about a quarter (1000 datagrams: the bounds are more
 * than 8 standard deviations wide); 100 % drops all; 0 none. */
static void test_loss(void)
{
	CU_ASSERT_EQUAL(datagrams_through(1000), 1000);
	CU_ASSERT_FATAL(bed_loss(A, 25) == 0);
	int got = datagrams_through(1000);
	CU_ASSERT(got > 640 && got < 860);
	CU_ASSERT_FATAL(bed_loss(A, 100) == 0);
	CU_ASSERT_EQUAL(datagrams_through(200), 0);
	CU_ASSERT_FATAL(bed_loss(A, 0) == 0);
	CU_ASSERT_EQUAL(datagrams_through(200), 200);
	CU_ASSERT(bed_loss(A, 101) == -1);
}

/* Milliseconds for a TCP connect from a to a listener on c. */
static long long connect_ms(void)
{
	int home = harness_netns_enter(C->netns);
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	harness_netns_return(home);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof sa;
	inet_pton(AF_INET, C->addr, &sa.sin_addr);
	CU_ASSERT_FATAL(bind(ls, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(ls, 4) == 0);
	getsockname(ls, (struct sockaddr *)&sa, &len);
	bed_enter(A);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bed_leave();
	long long t0 = harness_now_ms();
	int ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
	long long ms = harness_now_ms() - t0;
	close(fd);
	close(ls);
	return ok ? ms : -1;
}

/* 100 ms each way makes a connect take a round trip of at least 200 ms;
 * where this kernel has no netem, bed_delay says so (-1) and changes
 * nothing. */
static void test_delay(void)
{
	CU_ASSERT(connect_ms() < 100);
	if (!bed_has_netem()) {
		printf("\n  (this kernel has no sch_netem: delay cannot be shaped here) ");
		CU_ASSERT(bed_delay(A, 100) == -1);
		CU_ASSERT(connect_ms() < 100);
		return;
	}
	CU_ASSERT_FATAL(bed_delay(A, 100) == 0);
	CU_ASSERT(connect_ms() >= 200);
	CU_ASSERT(bed_delay(A, 0) == 0);
	CU_ASSERT(connect_ms() < 100);
}

static int netns_exists(const char *name)
{
	char path[96];
	struct stat st;
	snprintf(path, sizeof path, "/run/netns/%s", name);
	return stat(path, &st) == 0;
}

/* A run that crashes (SIGABRT) removes its namespaces on the way out; one
 * killed by SIGKILL leaves them, and the next bed_create removes them. */
static void test_cleanup(void)
{
	char names[2][40];
	for (int k = 0; k < 2; k++) {
		int fds[2];
		CU_ASSERT_FATAL(pipe(fds) == 0);
		pid_t pid = fork();
		if (pid == 0) {
			static struct bed child;
			close(fds[0]);
			int ok = bed_create(&child, 2) == 0;
			if (write(fds[1], ok ? child.host[1].netns : "", 40) != 40)
				_exit(1);
			pause(); /* until the parent's signal */
			_exit(0);
		}
		close(fds[1]);
		CU_ASSERT_FATAL(read(fds[0], names[k], 40) == 40);
		close(fds[0]);
		CU_ASSERT_FATAL(names[k][0] != '\0');
		CU_ASSERT(netns_exists(names[k]));
		kill(pid, k == 0 ? SIGABRT : SIGKILL);
		waitpid(pid, NULL, 0);
	}
	CU_ASSERT(!netns_exists(names[0]));
	CU_ASSERT(netns_exists(names[1]));
	/* the suite's own bed is made again: the sweep runs first */
	bed_destroy(&B);
	CU_ASSERT_FATAL(bed_create(&B, 3) == 0);
	CU_ASSERT(!netns_exists(names[1]));
	char own[48];
	snprintf(own, sizeof own, "esbed%ld-a", (long)getpid());
	CU_ASSERT_STRING_EQUAL(A->netns, own);
	CU_ASSERT(netns_exists(own));
}

/* A run killed with a daemon still up (an assert's abort, SIGKILL, an
 * error exit that skips the cleanup) does not leave it running: the
 * harness starts every process with PR_SET_PDEATHSIG, so the daemon gets
 * SIGTERM when the run dies and stops as it would for an operator.  The
 * run here is a child; this process adopts the orphan (a subreaper) to
 * see how it ended. */
static void test_daemon_dies_with_run(void)
{
	struct es_daemon d;
	int fds[2];

	CU_ASSERT_FATAL(pipe(fds) == 0);
	CU_ASSERT_FATAL(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
	pid_t run = fork();
	if (run == 0) {
		close(fds[0]);
		if (harness_start(&d, 1, harness_default_body(1), NULL) != 0)
			memset(&d, 0, sizeof d);
		if (write(fds[1], &d, sizeof d) != (ssize_t)sizeof d)
			_exit(1);
		pause(); /* until the parent's SIGKILL */
		_exit(0);
	}
	close(fds[1]);
	memset(&d, 0, sizeof d);
	CU_ASSERT(read(fds[0], &d, sizeof d) == (ssize_t)sizeof d);
	close(fds[0]);
	if (d.pid > 0) {
		struct json_object *status = harness_status(&d);
		CU_ASSERT(status != NULL); /* it serves */
		json_object_put(status);
	}
	kill(run, SIGKILL);
	waitpid(run, NULL, 0);
	CU_ASSERT_FATAL(d.pid > 0);
	/* adopted by this process now: its end is ours to see */
	int wstatus = -1;
	pid_t got = 0;
	for (int ms = 0; ms < 10000 && got == 0; ms += 20) {
		got = waitpid(d.pid, &wstatus, WNOHANG);
		if (got == 0)
			harness_sleep_ms(20);
	}
	if (got != d.pid)
		kill(d.pid, SIGKILL);
	CU_ASSERT(got == d.pid);
	CU_ASSERT(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
	prctl(PR_SET_CHILD_SUBREAPER, 0);
	harness_remove_dir(d.dir);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "job_across_bridge", test_job_across_bridge },
		{ "cut_is_silent", test_cut_is_silent },
		{ "loss", test_loss },
		{ "delay", test_delay },
		{ "cleanup", test_cleanup },
		{ "daemon_dies_with_run", test_daemon_dies_with_run },
		{ NULL, NULL },
	};
	return bed_run_suite("test_bed", "bed", cases, &B, 3);
}
