/*
 * test_balancer_resume.c - libexecclient with several clients and
 * instances behind a real load balancer (haproxy, tests/lib/fleet.c):
 *  - cross-client priority: a high-priority want from client B beats
 *    client A's earlier background wants on the same instance;
 *  - owner-seeking reconnect: the connection to the instance running a
 *    job is cut and the balancer sends the reconnect to the other
 *    instance; the pool keeps opening connections until one reaches the
 *    owner again, and the job's DONE arrives (it ran exactly once);
 *  - when the owner never comes back within the grace, the job is
 *    reported lost and retryable;
 *  - exc_cancel while the owner is sought: the CANCEL goes out once the
 *    owner is reached (the server's DONE says cancelled); when it is not
 *    reached within the grace, the job ends cancelled ("not confirmed")
 *    and the CANCEL goes out when a connection reaches the owner later.
 */
#include "autoconfig.h"

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

static int connected(void *arg)
{
	return pool_reached(&(struct pool_goal){ arg, 1, 1, 0 });
}

/* ---- priority across clients ---------------------------------------------- */

/* Completion order, recorded by the on_done below. */
static int finish_seq;

struct ordered {
	struct fx_done d;
	int seq;
};

static void ordered_done(exc_job *j, const struct exc_receipt *r, void *arg)
{
	struct ordered *o = arg;
	o->seq = ++finish_seq;
	fx_on_done(j, r, &o->d);
}

static void submit_ordered(exc_client *c, const char *word, int priority, struct ordered *o)
{
	char job[128];
	struct exc_job_spec s;
	snprintf(job, sizeof job, "{\"command\":\"echo\",\"args\":[\"%s\"]}", word);
	fx_spec(&s, "cat", job, &o->d);
	s.priority = priority;
	s.on_done = ordered_done;
	s.arg = o;
	CU_ASSERT(exc_submit(c, &s) != NULL);
}

static void test_priority_across_clients(void)
{
	struct ordered a[3], b;
	struct exc_options oa, ob;

	CU_ASSERT_FATAL(fleet_start(&F, 2, 1, NULL) == 0);
	/* everything goes to instance 0: instance 1 is out of the balancer */
	CU_ASSERT(balancer_set_state(&F.lb, 1, "maint") == 0);
	struct tclient *blocker = tc_connect(F.d[0].port, "blocker");
	CU_ASSERT_FATAL(blocker != NULL);
	const char *token = tc_want_offer(blocker, "x", "sleep", 0, 5000);
	CU_ASSERT_FATAL(token != NULL);
	CU_ASSERT(tc_send(blocker,
			  "{\"type\":\"JOB\",\"job_id\":\"x\",\"token\":\"%s\","
			  "\"job\":{\"command\":\"sleep\",\"args\":[\"30\"]}}",
			  token) == 0);
	CU_ASSERT(fx_wait_pred(wg_reached, &(struct wg_goal){ &F, 0, "running", 1 }, 5000));

	/* client A parks three background wants first ... */
	fx_options(&oa);
	oa.client_id = "client-a";
	exc_client *ca = lb_client(&oa);
	CU_ASSERT_FATAL(fx_wait_pred(connected, ca, 5000));
	memset(a, 0, sizeof a);
	finish_seq = 0;
	submit_ordered(ca, "a1", -2, &a[0]);
	submit_ordered(ca, "a2", -2, &a[1]);
	submit_ordered(ca, "a3", -2, &a[2]);
	CU_ASSERT(fx_wait_pred(wg_reached, &(struct wg_goal){ &F, 0, "waiting", 3 }, 5000));
	/* ... then client B one interactive want */
	fx_options(&ob);
	ob.client_id = "client-b";
	exc_client *cb = lb_client(&ob);
	CU_ASSERT_FATAL(fx_wait_pred(connected, cb, 5000));
	memset(&b, 0, sizeof b);
	submit_ordered(cb, "b", 2, &b);
	CU_ASSERT(fx_wait_pred(wg_reached, &(struct wg_goal){ &F, 0, "waiting", 4 }, 5000));

	/* the slot frees: B first, then A's in their order */
	CU_ASSERT(tc_send(blocker, "{\"type\":\"CANCEL\",\"job_id\":\"x\"}") == 0);
	CU_ASSERT(fx_wait(&a[2].d.called, 15000));
	CU_ASSERT(b.d.called && b.d.ok);
	CU_ASSERT_EQUAL(b.seq, 1);
	CU_ASSERT_STRING_EQUAL(b.d.stdout_text, "b\n");
	for (int i = 0; i < 3; i++) {
		CU_ASSERT(a[i].d.ok);
		CU_ASSERT_EQUAL(a[i].seq, i + 2);
		CU_ASSERT_STRING_EQUAL(a[i].d.instance_id, F.id[0]);
	}
	CU_ASSERT_STRING_EQUAL(b.d.instance_id, F.id[0]);
	tc_close(blocker);
	exc_client_free(ca);
	exc_client_free(cb);
	CU_ASSERT(fleet_stop(&F) == 0);
}

/* ---- owner-seeking reconnect ---------------------------------------------------- */

struct state_goal {
	exc_job *job;
	const char *state;
};

static int job_state_is(void *arg)
{
	struct state_goal *g = arg;
	return strcmp(exc_job_state(g->job), g->state) == 0;
}

/* Starts a 2-instance fleet and a client "seeker" with a running job of
 * `seconds`; returns the instance running it (*job, *c set). */
static int start_running_job_with(exc_client **c, exc_job **job, struct fx_done *done,
				  unsigned grace_sec, const char *seconds, int slots,
				  const char *extra)
{
	struct exc_options o;
	char json[128], body[4096];
	struct exc_job_spec s;

	snprintf(body, sizeof body, "%s%s", harness_default_body(slots), extra);
	CU_ASSERT_FATAL(fleet_start(&F, 2, slots, (const char *const[]){ body, body }) == 0);
	fx_options(&o);
	o.client_id = "seeker";
	o.owner_grace_sec = grace_sec;
	*c = lb_client(&o);
	CU_ASSERT_FATAL(fx_wait_pred(connected, *c, 5000));
	snprintf(json, sizeof json, "{\"command\":\"sleep\",\"args\":[\"%s\"]}", seconds);
	memset(done, 0, sizeof *done);
	fx_spec(&s, "sleep", json, done);
	*job = exc_submit(*c, &s);
	CU_ASSERT_FATAL(*job != NULL);
	CU_ASSERT_FATAL(fx_wait_pred(job_state_is, &(struct state_goal){ *job, "running" }, 5000));
	int owner = -1;
	for (int i = 0; i < F.n; i++)
		if (fleet_status_int(&F, i, "waitgroups", "wg", "running", NULL) == 1)
			owner = i;
	CU_ASSERT_FATAL(owner >= 0);
	return owner;
}

static int start_running_job(exc_client **c, exc_job **job, struct fx_done *done,
			     unsigned grace_sec, const char *seconds, int slots)
{
	return start_running_job_with(c, job, done, grace_sec, seconds, slots, "");
}

/* The owner leaves the balancer and its connections are cut: every
 * reconnect lands on the other instance. */
static void lose_owner(int owner)
{
	CU_ASSERT(balancer_set_state(&F.lb, owner, "maint") == 0);
	CU_ASSERT(balancer_cut(&F.lb, owner) == 0);
}

static void test_owner_seeking_reconnect(void)
{
	exc_client *c;
	exc_job *job;
	struct fx_done done;
	int owner = start_running_job(&c, &job, &done, 30, "4", 2), other = 1 - owner;

	lose_owner(owner);
	CU_ASSERT(fx_wait_pred(job_state_is, &(struct state_goal){ job, "seeking" }, 3000));
	/* the pool reaches the other instance and keeps trying, each new
	 * connection landing there again (closed as a duplicate) */
	fx_spin(1500);
	struct exc_address_stats st = fleet_client_stats(c);
	CU_ASSERT(st.opened >= 3);
	CU_ASSERT(st.duplicates >= 1);
	CU_ASSERT_EQUAL(st.instances, 1);
	CU_ASSERT_STRING_EQUAL(exc_job_state(job), "seeking");
	CU_ASSERT_FALSE(done.called);
	CU_ASSERT(fleet_status_int(&F, other, "connections", NULL) >= 1);

	/* the owner is back in the balancer: the next connection reaches it
	 * (leastconn: it has none), the job is resumed and its DONE arrives */
	CU_ASSERT(balancer_set_state(&F.lb, owner, "ready") == 0);
	CU_ASSERT(fx_wait_pred(job_state_is, &(struct state_goal){ job, "running" }, 5000) ||
		  done.called);
	CU_ASSERT(fx_wait(&done.called, 10000));
	CU_ASSERT(done.ok);
	CU_ASSERT_STRING_EQUAL(done.instance_id, F.id[owner]);
	CU_ASSERT_EQUAL(done.exit_code, 0);
	/* it ran once, where it started */
	CU_ASSERT_EQUAL(fleet_status_int(&F, owner, "services", "sleep", "started", NULL), 1);
	CU_ASSERT_EQUAL(fleet_status_int(&F, other, "services", "sleep", "started", NULL), 0);
	CU_ASSERT_EQUAL(fleet_client_stats(c).instances, 2);
	exc_client_free(c);
	CU_ASSERT(fleet_stop(&F) == 0);
}

/* The owner stays away longer than the client's grace: lost, retryable,
 * but not before the instance has stopped the job.  Its resumeGraceSec (6)
 * is longer than the client's owner_grace_sec (2): the job ends lost only
 * after the time HELLO announces (pingTimeoutSec 2 + pingIntervalSec 1 +
 * resumeGraceSec 6 + 5 s = 14 s), when the instance no longer runs it, so
 * that a retry cannot overlap it.  (Before: lost after 2 s, the job still
 * running there for 4 s more.) */
static void test_owner_never_back(void)
{
	exc_client *c;
	exc_job *job;
	struct fx_done done;
	int owner = start_running_job_with(
		&c, &job, &done, 2, "30", 2,
		"resumeGraceSec: 6\npingIntervalSec: 1\npingTimeoutSec: 2\n");

	long long t0 = harness_now_ms();
	lose_owner(owner);
	CU_ASSERT(fx_wait(&done.called, 20000));
	long long waited = harness_now_ms() - t0;
	CU_ASSERT_FALSE(done.ok);
	CU_ASSERT_STRING_EQUAL(done.error_code, "lost");
	CU_ASSERT(done.retryable);
	CU_ASSERT(strstr(done.error_message, "not reached again within 14 s") != NULL);
	CU_ASSERT(waited >= 13500 && waited < 17000);
	/* the instance stopped the job when the client's grace there ended */
	CU_ASSERT_EQUAL(fleet_status_int(&F, owner, "waitgroups", "wg", "running", NULL), 0);
	CU_ASSERT_EQUAL(fleet_status_int(&F, owner, "services", "sleep", "failed", NULL), 1);
	exc_client_free(c);
	CU_ASSERT(fleet_stop(&F) == 0);
}

/* ---- cancel while the owner is sought ------------------------------------------- */

/* exc_cancel while seeking: held, sent when the owner is reached; the
 * server's DONE says cancelled, long before the job would have ended. */
static void test_cancel_while_seeking_reaches_job(void)
{
	exc_client *c;
	exc_job *job;
	struct fx_done done;
	int owner = start_running_job(&c, &job, &done, 30, "30", 2);

	lose_owner(owner);
	CU_ASSERT(fx_wait_pred(job_state_is, &(struct state_goal){ job, "seeking" }, 3000));
	CU_ASSERT_EQUAL(exc_cancel(job), 0);
	CU_ASSERT(fx_log_find("cancel held until instance") != NULL);
	fx_spin(500);
	CU_ASSERT_FALSE(done.called);
	long long t0 = harness_now_ms();
	CU_ASSERT(balancer_set_state(&F.lb, owner, "ready") == 0);
	CU_ASSERT(fx_wait(&done.called, 10000));
	CU_ASSERT(harness_now_ms() - t0 < 8000);
	CU_ASSERT_FALSE(done.ok);
	CU_ASSERT_STRING_EQUAL(done.error_code, "cancelled");
	CU_ASSERT_FALSE(done.retryable);
	CU_ASSERT_STRING_EQUAL(done.instance_id, F.id[owner]);
	/* the server's receipt (the job got SIGTERM), not one of the library */
	CU_ASSERT(strstr(done.error_message, "not confirmed") == NULL);
	CU_ASSERT_EQUAL(fleet_status_int(&F, owner, "waitgroups", "wg", "running", NULL), 0);
	CU_ASSERT_EQUAL(fleet_status_int(&F, owner, "services", "sleep", "failed", NULL), 1);
	exc_client_free(c);
	CU_ASSERT(fleet_stop(&F) == 0);
}

static void submit_sleep(exc_client *c, const char *secs, struct fx_done *d)
{
	char json[128];
	struct exc_job_spec s;
	snprintf(json, sizeof json, "{\"command\":\"sleep\",\"args\":[\"%s\"]}", secs);
	memset(d, 0, sizeof *d);
	fx_spec(&s, "sleep", json, d);
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
}

/* The owner is not reached within the client's grace: the job ends
 * cancelled (not confirmed, not retryable) at once; when a connection
 * reaches the owner later (here: the pool grows under back-pressure), the
 * CANCEL goes out and the job stops, long before the server's own
 * resumeGraceSec (30 s) would have stopped it. */
static void test_cancel_while_seeking_owner_away(void)
{
	exc_client *c;
	exc_job *job;
	struct fx_done done, more[2];
	int owner = start_running_job(&c, &job, &done, 2, "60", 1);

	lose_owner(owner);
	CU_ASSERT(fx_wait_pred(job_state_is, &(struct state_goal){ job, "seeking" }, 3000));
	CU_ASSERT_EQUAL(exc_cancel(job), 0);
	CU_ASSERT(fx_wait(&done.called, 6000));
	CU_ASSERT_FALSE(done.ok);
	CU_ASSERT_STRING_EQUAL(done.error_code, "cancelled");
	CU_ASSERT_FALSE(done.retryable);
	CU_ASSERT(strstr(done.error_message, "cancel not confirmed") != NULL);
	CU_ASSERT_EQUAL(fleet_status_int(&F, owner, "waitgroups", "wg", "running", NULL), 1);
	/* two more jobs for the other instance's one slot: the second waits,
	 * the pool grows (once the address's re-probe is due: 3 s) and the
	 * owner, back in the balancer, is reached */
	CU_ASSERT(balancer_set_state(&F.lb, owner, "ready") == 0);
	submit_sleep(c, "6", &more[0]);
	submit_sleep(c, "0.1", &more[1]);
	CU_ASSERT(fx_wait(&more[1].called, 15000));
	CU_ASSERT(fx_log_find("CANCEL sent now") != NULL);
	CU_ASSERT_EQUAL(fleet_status_int(&F, owner, "services", "sleep", "failed", NULL), 1);
	CU_ASSERT(fx_wait(&more[0].called, 10000));
	CU_ASSERT(more[0].ok && more[1].ok);
	exc_client_free(c);
	CU_ASSERT(fleet_stop(&F) == 0);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "interactive want of B beats A's earlier background wants",
		  test_priority_across_clients },
		{ "owner-seeking reconnect through the balancer", test_owner_seeking_reconnect },
		{ "owner never back within the grace: lost", test_owner_never_back },
		{ "cancel while seeking reaches the job", test_cancel_while_seeking_reaches_job },
		{ "cancel while seeking, owner away: cancelled, sent later",
		  test_cancel_while_seeking_owner_away },
		{ NULL, NULL },
	};
	int rc = run_suite("libexecclient: clients and reconnects behind a load balancer", cases);
	if (fx_base)
		event_base_free(fx_base);
	return rc;
}
