/*
 * test_balancer_pool.c - libexecclient in front of a real load balancer
 * (haproxy, tests/lib/fleet.c) with two or three execserver instances
 * behind one address, the deployment the demand-driven pool is made for:
 *  - pool growth under back-pressure reaches every instance, then a
 *    repeated instance_id marks the address covered and growth stops;
 *  - growth opens at most one connection per grow_interval_ms and stops
 *    at pool_cap, however many jobs wait;
 *  - a service that only one instance offers is routed there, and a
 *    service no instance offers ends with unknown_service;
 *  - a job parked on two instances whose slots free at the same moment
 *    gets two OFFERs, runs exactly once, and the surplus slot is given
 *    back at once (DECLINE), not after the offer timeout;
 *  - the claim share follows instances and clients as they come and go.
 * The client only ever gets the balancer's address.
 */
#include "autoconfig.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>
#include <event2/event.h>

#include "fleet_client.h"
#include "proto.h"
#include "suite.h"

static struct fleet F;

static exc_client *lb_client(struct exc_options *o)
{
	exc_client *c = fleet_client(&F, o);
	CU_ASSERT_FATAL(c != NULL);
	return c;
}

static int all_called(struct fx_done *d, int n)
{
	for (int i = 0; i < n; i++)
		if (!d[i].called)
			return 0;
	return 1;
}

struct done_set {
	struct fx_done *d;
	int n;
};

static int set_done(void *arg)
{
	struct done_set *s = arg;
	return all_called(s->d, s->n);
}

static exc_job *submit(exc_client *c, const char *service, const char *job_json, int priority,
		       struct fx_done *d)
{
	struct exc_job_spec s;
	fx_spec(&s, service, job_json, d);
	s.priority = priority;
	exc_job *j = exc_submit(c, &s);
	CU_ASSERT(j != NULL);
	return j;
}

/* ---- growth ------------------------------------------------------------------ */

static void test_growth_reaches_every_instance_then_stops(void)
{
	enum {
		JOBS = 5
	};
	struct fx_done done[JOBS];
	struct exc_options o;

	CU_ASSERT_FATAL(fleet_start(&F, 3, 1, NULL) == 0);
	fx_options(&o);
	o.reprobe_interval_ms = 600000; /* no re-probe within the test */
	exc_client *c = lb_client(&o);

	/* nothing waits: one connection, and it stays one */
	CU_ASSERT(fx_wait_pred(pool_reached, &(struct pool_goal){ c, 1, 1, 0 }, 5000));
	fx_spin(1000);
	struct exc_address_stats st = fleet_client_stats(c);
	CU_ASSERT_EQUAL(st.connections, 1);
	CU_ASSERT_EQUAL(st.opened, 1);
	CU_ASSERT_EQUAL(exc_claim_share(c), 2); /* ceil(1 / 1) + 1 */

	/* five 2-second jobs on three 1-slot instances: back-pressure */
	memset(done, 0, sizeof done);
	for (int i = 0; i < JOBS; i++)
		submit(c, "sleep", "{\"command\":\"sleep\",\"args\":[\"2\"]}", 0, &done[i]);
	CU_ASSERT(fx_wait_pred(pool_reached, &(struct pool_goal){ c, 3, 3, 1 }, 10000));
	/* every instance was reached and got a job */
	CU_ASSERT(fx_wait_pred(wg_reached, &(struct wg_goal){ &F, -1, "running", 1 }, 3000));
	st = fleet_client_stats(c);
	CU_ASSERT_EQUAL(st.connections, 3);
	CU_ASSERT_EQUAL(st.instances, 3);
	CU_ASSERT(st.covered);
	CU_ASSERT(st.duplicates >= 1);
	CU_ASSERT_EQUAL(st.opened, 3 + st.duplicates); /* nothing else was opened */
	CU_ASSERT_EQUAL(exc_claim_share(c), 6);

	/* two wants still wait, but the pool is covered: no more connections */
	unsigned opened = st.opened;
	fx_spin(1500);
	st = fleet_client_stats(c);
	CU_ASSERT_EQUAL(st.opened, opened);
	CU_ASSERT_EQUAL(st.connections, 3);

	CU_ASSERT(fx_wait_pred(set_done, &(struct done_set){ done, JOBS }, 20000));
	int per_instance[3] = { 0 };
	for (int i = 0; i < JOBS; i++) {
		CU_ASSERT(done[i].ok);
		int k = fleet_index(&F, done[i].instance_id);
		CU_ASSERT(k >= 0);
		if (k >= 0)
			per_instance[k]++;
	}
	for (int k = 0; k < 3; k++)
		CU_ASSERT(per_instance[k] >= 1);
	CU_ASSERT_EQUAL(fleet_sum(&F, "services", "sleep", "started", NULL), JOBS);
	exc_client_free(c);
	CU_ASSERT(fleet_stop(&F) == 0);
}

/* When the pool opened each connection: the library's log line
 * "opening connection N", written as the attempt starts. */
struct opens {
	long long at[16];
	int n;
};

static void record_open(void *arg, enum exc_log_level level, const char *line)
{
	struct opens *o = arg;
	(void)level;
	if (strstr(line, ": opening connection ") && o->n < 16)
		o->at[o->n++] = harness_now_ms();
}

/* The pool's cap and growth rate (docs/client.md, "Several instances
 * behind one address"): four instances behind the balancer and twelve
 * jobs waiting, yet at most one new connection per grow_interval_ms, and
 * never more than pool_cap live or opening, seen by the client and by the
 * instances.  Without the rate limit the pool grows at every retry tick
 * (200 ms); without the cap it reaches the fourth instance. */
static void test_growth_rate_and_cap(void)
{
	enum {
		JOBS = 12,
		CAP = 3,
		GROW_MS = 1000
	};
	struct fx_done done[JOBS];
	struct exc_options o;
	struct opens opens = { .n = 0 };

	CU_ASSERT_FATAL(fleet_start(&F, 4, 1, NULL) == 0);
	fx_options(&o);
	o.pool_cap = CAP;
	o.grow_interval_ms = GROW_MS;
	o.reprobe_interval_ms = 600000;
	o.log = record_open;
	o.arg = &opens;
	exc_client *c = lb_client(&o);
	CU_ASSERT_FATAL(fx_wait_pred(pool_reached, &(struct pool_goal){ c, 1, 1, 0 }, 5000));

	memset(done, 0, sizeof done);
	for (int i = 0; i < JOBS; i++)
		submit(c, "sleep", "{\"command\":\"sleep\",\"args\":[\"10\"]}", 0, &done[i]);
	/* long enough for two more connections at the rate limit, and for
	 * more than CAP at the tick's pace */
	unsigned most = 0;
	for (long long end = harness_now_ms() + (CAP + 1) * GROW_MS + 500;
	     harness_now_ms() < end;) {
		fx_spin(20);
		struct exc_address_stats st = fleet_client_stats(c);
		if (st.connections + st.connecting > most)
			most = st.connections + st.connecting;
	}
	struct exc_address_stats st = fleet_client_stats(c);
	CU_ASSERT_EQUAL(most, CAP);
	CU_ASSERT_EQUAL(st.connections, CAP);
	CU_ASSERT_EQUAL(st.instances, CAP);
	CU_ASSERT_EQUAL(st.opened, CAP);
	CU_ASSERT_EQUAL(fleet_sum(&F, "connections", NULL), CAP); /* as the instances see it */
	CU_ASSERT_EQUAL(opens.n, CAP);
	for (int i = 1; i < opens.n; i++) {
		long long gap = opens.at[i] - opens.at[i - 1];
		if (gap < GROW_MS - 5)
			fprintf(stderr, "connection %d opened %lld ms after the one before\n",
				i + 1, gap);
		CU_ASSERT(gap >= GROW_MS - 5); /* two clocks read a moment apart */
	}
	exc_client_free(c);
	CU_ASSERT(fleet_stop(&F) == 0);
}

/* ---- placement ---------------------------------------------------------------------- */

static void test_service_of_one_instance(void)
{
	char only_body[2048];
	struct fx_done done, missing;
	struct exc_options o;

	/* instance 1 also offers "only" */
	snprintf(only_body, sizeof only_body,
		 "%s"
		 "  only:\n"
		 "    waitgroup: wg\n"
		 "    commands:\n"
		 "      echo: {prog: echo}\n",
		 harness_default_body(2));
	const char *bodies[2] = { NULL, only_body };
	CU_ASSERT_FATAL(fleet_start(&F, 2, 2, bodies) == 0);

	/* the first connection lands on instance 0, which lacks the service */
	CU_ASSERT(balancer_set_state(&F.lb, 1, "maint") == 0);
	fx_options(&o);
	exc_client *c = lb_client(&o);
	CU_ASSERT_FATAL(fx_wait_pred(pool_reached, &(struct pool_goal){ c, 1, 1, 0 }, 5000));
	CU_ASSERT(balancer_set_state(&F.lb, 1, "ready") == 0);

	memset(&done, 0, sizeof done);
	submit(c, "only", "{\"command\":\"echo\",\"args\":[\"routed\"]}", 0, &done);
	CU_ASSERT(fx_wait(&done.called, 10000));
	CU_ASSERT(done.ok);
	CU_ASSERT_STRING_EQUAL(done.instance_id, F.id[1]);
	CU_ASSERT_STRING_EQUAL(done.stdout_text, "routed\n");
	/* instance 0 was never asked for it (it would have answered
	 * unknown_service): it saw no want at all */
	CU_ASSERT_EQUAL(fleet_status_int(&F, 0, "grants", NULL), 0);
	CU_ASSERT_EQUAL(fleet_status_int(&F, 1, "services", "only", "finished", NULL), 1);

	/* a service nobody offers: unknown_service, not retryable */
	memset(&missing, 0, sizeof missing);
	submit(c, "nosuch", "{\"command\":\"echo\"}", 0, &missing);
	CU_ASSERT(fx_wait(&missing.called, 15000));
	CU_ASSERT_FALSE(missing.ok);
	CU_ASSERT_STRING_EQUAL(missing.error_code, "unknown_service");
	CU_ASSERT_FALSE(missing.retryable);
	exc_client_free(c);
	CU_ASSERT(fleet_stop(&F) == 0);
}

/* ---- surplus offers ----------------------------------------------------------------------- */

/* A raw client on instance i's own port holding its only slot. */
static struct tclient *block_slot(int i, const char *job_id)
{
	struct tclient *b = tc_connect(F.d[i].port, "blocker");
	CU_ASSERT_FATAL(b != NULL);
	const char *token = tc_want_offer(b, job_id, "sleep", 0, 5000);
	CU_ASSERT_FATAL(token != NULL);
	CU_ASSERT(tc_send(b,
			  "{\"type\":\"JOB\",\"job_id\":\"%s\",\"token\":\"%s\","
			  "\"job\":{\"command\":\"sleep\",\"args\":[\"30\"]}}",
			  job_id, token) == 0);
	return b;
}

/* Every instance shows its slot offered; /status is polled without
 * running the client's loop. */
static int all_offered(void)
{
	long long end = harness_now_ms() + 5000;
	do {
		if (wg_reached(&(struct wg_goal){ &F, -1, "offered", 1 }))
			return 1;
		harness_sleep_ms(20);
	} while (harness_now_ms() < end);
	return 0;
}

static int wg_idle(struct json_object *st, void *arg)
{
	return harness_json_int(st, "waitgroups", "wg", "offered", NULL) == 0 &&
	       harness_json_int(st, "waitgroups", "wg", "running", NULL) == 0 &&
	       harness_json_int(st, "waitgroups", "wg", "waiting", NULL) == 0;
}

static void test_surplus_offer_declined(void)
{
	struct fx_done done;
	struct exc_options o;

	CU_ASSERT_FATAL(fleet_start(&F, 2, 1, NULL) == 0);
	struct tclient *b0 = block_slot(0, "b0"), *b1 = block_slot(1, "b1");
	CU_ASSERT(fx_wait_pred(wg_reached, &(struct wg_goal){ &F, -1, "running", 1 }, 5000));

	fx_options(&o);
	o.reprobe_interval_ms = 600000;
	exc_client *c = lb_client(&o);
	memset(&done, 0, sizeof done);
	submit(c, "cat", "{\"command\":\"echo\",\"args\":[\"once\"]}", 0, &done);
	/* no slot anywhere: the pool grows and the want is parked on both */
	CU_ASSERT_FATAL(fx_wait_pred(pool_reached, &(struct pool_goal){ c, 2, 2, 0 }, 10000));
	CU_ASSERT_FATAL(fx_wait_pred(wg_reached, &(struct wg_goal){ &F, -1, "waiting", 1 }, 5000));

	/* Both slots free while the client's loop stands still, so both
	 * OFFERs are in its sockets before it reads either. */
	CU_ASSERT(tc_send(b0, "{\"type\":\"CANCEL\",\"job_id\":\"b0\"}") == 0);
	CU_ASSERT(tc_send(b1, "{\"type\":\"CANCEL\",\"job_id\":\"b1\"}") == 0);
	CU_ASSERT_FATAL(all_offered());
	fx_log_clear();
	long long t0 = harness_now_ms();
	CU_ASSERT(fx_wait(&done.called, 10000));
	CU_ASSERT(done.ok);
	CU_ASSERT_STRING_EQUAL(done.stdout_text, "once\n");
	int ran = fleet_index(&F, done.instance_id), other = 1 - ran;
	CU_ASSERT_FATAL(ran >= 0);
	/* exactly once, on one instance */
	CU_ASSERT_EQUAL(fleet_sum(&F, "services", "cat", "started", NULL), 1);
	CU_ASSERT_EQUAL(fleet_status_int(&F, ran, "services", "cat", "started", NULL), 1);
	/* the other offer was given back at once: its slot is free long
	 * before offerTimeoutSec (10 s), and nothing waits anywhere */
	CU_ASSERT(harness_wait_status(&F.d[other], 1000, wg_idle, NULL) == 0);
	CU_ASSERT(harness_now_ms() - t0 < 3000);
	CU_ASSERT(fx_log_find("declining offer") != NULL);
	CU_ASSERT_EQUAL(fleet_sum(&F, "wants", NULL), 0);

	tc_close(b0);
	tc_close(b1);
	exc_client_free(c);
	CU_ASSERT(fleet_stop(&F) == 0);
}

/* ---- claim share --------------------------------------------------------------------------- */

struct share_goal {
	exc_client *c;
	unsigned value;
};

static int share_is(void *arg)
{
	struct share_goal *g = arg;
	return exc_claim_share(g->c) == g->value;
}

static void test_claim_share(void)
{
	struct fx_done done[3];
	struct exc_options o;

	CU_ASSERT_FATAL(fleet_start(&F, 2, 2, NULL) == 0);
	fx_options(&o);
	o.reprobe_interval_ms = 600000;
	exc_client *a = lb_client(&o);
	CU_ASSERT_EQUAL(exc_claim_share(a), 0); /* nothing connected yet */

	/* one instance of 2 slots, one client: ceil(2/1) + 1 */
	CU_ASSERT(fx_wait_pred(share_is, &(struct share_goal){ a, 3 }, 5000));
	/* three jobs on 2 slots: back-pressure reaches the second instance */
	memset(done, 0, sizeof done);
	for (int i = 0; i < 3; i++)
		submit(a, "sleep", "{\"command\":\"sleep\",\"args\":[\"4\"]}", 0, &done[i]);
	CU_ASSERT(fx_wait_pred(pool_reached, &(struct pool_goal){ a, 2, 2, 0 }, 10000));
	CU_ASSERT(fx_wait_pred(share_is, &(struct share_goal){ a, 6 }, 3000));

	/* a second client reaches one instance: there, each gets ceil(2/2) */
	exc_client *b = lb_client(&o);
	CU_ASSERT(fx_wait_pred(share_is, &(struct share_goal){ b, 2 }, 5000));
	CU_ASSERT(fx_wait_pred(share_is, &(struct share_goal){ a, 5 }, 3000));
	/* it goes: the share grows back */
	exc_client_free(b);
	CU_ASSERT(fx_wait_pred(share_is, &(struct share_goal){ a, 6 }, 3000));

	/* an instance drains: it counts 0 at once (its HELLO says so) */
	int drained = 1;
	CU_ASSERT(kill(F.d[drained].pid, SIGTERM) == 0);
	CU_ASSERT(fx_wait_pred(share_is, &(struct share_goal){ a, 3 }, 3000));
	/* the jobs end (the draining one finishes its job), then the other
	 * instance stops too: nothing connected, share 0 */
	CU_ASSERT(fx_wait_pred(set_done, &(struct done_set){ done, 3 }, 20000));
	for (int i = 0; i < 3; i++)
		CU_ASSERT(done[i].ok);
	CU_ASSERT(kill(F.d[1 - drained].pid, SIGTERM) == 0);
	CU_ASSERT(fx_wait_pred(share_is, &(struct share_goal){ a, 0 }, 10000));
	exc_client_free(a);
	CU_ASSERT(fleet_stop(&F) == 0);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "growth reaches every instance, then stops",
		  test_growth_reaches_every_instance_then_stops },
		{ "growth: one connection per interval, at most pool_cap",
		  test_growth_rate_and_cap },
		{ "a service of one instance is routed there", test_service_of_one_instance },
		{ "a surplus OFFER is declined, the job runs once", test_surplus_offer_declined },
		{ "claim share as instances and clients come and go", test_claim_share },
		{ NULL, NULL },
	};
	int rc = run_suite("libexecclient behind a load balancer", cases);
	if (fx_base)
		event_base_free(fx_base);
	return rc;
}
