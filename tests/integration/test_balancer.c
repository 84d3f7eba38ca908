/*
 * test_balancer.c - the load-balancer harness itself (tests/lib/balancer.c):
 * haproxy in TCP mode in front of real execserver instances passes
 * websockets and HTTP through, spreads connections over the instances
 * (HELLO.instance_id tells where one landed), and its runtime API takes a
 * backend out, puts it back, moves it to a restarted instance's port and
 * cuts its connections.  The multi-instance client tests build on exactly
 * these moves, so each is proved here against the instances' own view.
 */
#include "autoconfig.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <CUnit/Basic.h>

#include "fleet.h"
#include "proto.h"
#include "suite.h"

#define N 2

static struct fleet F;

static void start_all(void)
{
	CU_ASSERT_FATAL(fleet_start(&F, N, 2, NULL) == 0);
}

static void stop_all(void)
{
	/* haproxy's hard stop ends it by the signal itself */
	int status = balancer_stop(&F.lb, 5000);
	CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
	CU_ASSERT(fleet_stop(&F) == 0);
}

/* Index of the instance a connection's HELLO came from, or -1. */
static int landed(const struct tclient *c)
{
	return c ? fleet_index(&F, tc_str(c->hello, "instance_id")) : -1;
}

static int connections_are(struct json_object *st, void *arg)
{
	return harness_json_int(st, "connections", NULL) == *(int *)arg;
}

/* Two connections through the one address reach two instances, and each
 * instance counts exactly one connection. */
static void test_spread(void)
{
	start_all();
	struct tclient *a = tc_connect(F.lb.port, "a"), *b = tc_connect(F.lb.port, "b");
	CU_ASSERT_FATAL(a && b);
	int la = landed(a), lb = landed(b);
	CU_ASSERT(la >= 0 && lb >= 0);
	CU_ASSERT(la != lb);
	int one = 1;
	for (int i = 0; i < N; i++)
		CU_ASSERT(harness_wait_status(&F.d[i], 2000, connections_are, &one) == 0);
	CU_ASSERT_EQUAL(balancer_sessions(&F.lb, 0), 1);
	CU_ASSERT_EQUAL(balancer_sessions(&F.lb, 1), 1);

	/* the protocol passes through: a job runs via the balancer */
	struct json_object *done = tc_run_job(a, "j1", "cat",
					      "{\"command\":\"echo\",\"args\":[\"hi\"]}", 10000);
	CU_ASSERT_FATAL(done != NULL);
	CU_ASSERT_STRING_EQUAL(tc_str(tc_receipt(done), "stdout"), "hi\n");
	json_object_put(done);
	tc_close(a);
	tc_close(b);
	stop_all();
}

/* maint sends every new connection elsewhere and keeps the open ones;
 * ready brings the backend back; cut ends its connections. */
static void test_maint_and_cut(void)
{
	start_all();
	struct tclient *first = tc_connect(F.lb.port, "a");
	CU_ASSERT_FATAL(first != NULL);
	int home = landed(first), other = 1 - home;
	CU_ASSERT_FATAL(home >= 0);

	CU_ASSERT(balancer_set_state(&F.lb, other, "maint") == 0);
	struct tclient *c[3];
	for (int i = 0; i < 3; i++) {
		c[i] = tc_connect(F.lb.port, "b");
		CU_ASSERT_FATAL(c[i] != NULL);
		CU_ASSERT_EQUAL(landed(c[i]), home);
	}
	/* an unknown state is refused, not ignored */
	CU_ASSERT(balancer_set_state(&F.lb, other, "sideways") == -1);
	CU_ASSERT(balancer_set_state(&F.lb, 7, "ready") == -1);

	/* back in: leastconn sends the next connection to the empty one */
	CU_ASSERT(balancer_set_state(&F.lb, other, "ready") == 0);
	struct tclient *d = tc_connect(F.lb.port, "c");
	CU_ASSERT_FATAL(d != NULL);
	CU_ASSERT_EQUAL(landed(d), other);

	/* cut: the four connections through `home` end (no close frame),
	 * the one through `other` lives on */
	CU_ASSERT(balancer_cut(&F.lb, home) == 0);
	struct wsc_msg m;
	int t = wsc_recv(first->ws, 3000, &m);
	wsc_msg_free(&m);
	CU_ASSERT(t == WSC_EOF || t == WSC_ERROR);
	for (int i = 0; i < 3; i++) {
		t = wsc_recv(c[i]->ws, 3000, &m);
		wsc_msg_free(&m);
		CU_ASSERT(t == WSC_EOF || t == WSC_ERROR);
	}
	int zero = 0;
	CU_ASSERT(harness_wait_status(&F.d[home], 3000, connections_are, &zero) == 0);
	CU_ASSERT(tc_send(d, "{\"type\":\"QUERY\",\"job_id\":\"x\"}") == 0);
	struct json_object *e = tc_expect(d, "ERROR", 3000);
	CU_ASSERT(e && strcmp(tc_str(e, "code"), "unknown_job") == 0);
	if (e)
		json_object_put(e);

	tc_close(first);
	for (int i = 0; i < 3; i++)
		tc_close(c[i]);
	tc_close(d);
	stop_all();
}

/* An instance restarted on another port (a new instance_id) is reached
 * once the backend points there; while it is down, redispatch sends the
 * connection to the live one. */
static void test_restart_backend(void)
{
	start_all();
	CU_ASSERT(harness_stop(&F.d[0], 15000) >= 0);
	for (int i = 0; i < 3; i++) {
		struct tclient *c = tc_connect(F.lb.port, NULL);
		CU_ASSERT_FATAL(c != NULL);
		CU_ASSERT_EQUAL(landed(c), 1);
		tc_close(c);
	}
	char old_id[65];
	snprintf(old_id, sizeof old_id, "%s", F.id[0]);
	CU_ASSERT_FATAL(fleet_restart(&F, 0, harness_default_body(2)) == 0);
	CU_ASSERT(strcmp(old_id, F.id[0]) != 0);
	CU_ASSERT_EQUAL(F.lb.backend_port[0], F.d[0].port);

	/* with one connection held on instance 1, leastconn picks instance 0 */
	struct tclient *hold = tc_connect(F.lb.port, "h"), *c = tc_connect(F.lb.port, "c");
	CU_ASSERT_FATAL(hold && c);
	CU_ASSERT(landed(hold) >= 0 && landed(c) >= 0 && landed(hold) != landed(c));
	tc_close(hold);
	tc_close(c);
	stop_all();
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "two connections reach two instances", test_spread },
		{ "maint, ready and cut", test_maint_and_cut },
		{ "a restarted backend on a new port", test_restart_backend },
		{ NULL, NULL },
	};
	return run_suite("balancer harness", cases);
}
