/*
 * test_instance_route.c - stable instance ids and routing to the owner
 * (docs/balancers.md): three execservers with instanceId exec-1..exec-3
 * behind haproxy in HTTP mode, which routes an upgrade carrying
 * ?instance=<id> to that instance (`use-server ... if { urlp(instance)
 * ... }`) and any other by leastconn.
 *
 *  - the ids are the configured ones (HELLO, /status), and an upgrade with
 *    ?instance= is accepted as if it had none;
 *  - a client whose connection to the instance running its job is cut
 *    seeks that instance with ?instance=: its first new connection lands
 *    there, although leastconn alone would send it elsewhere (the owner
 *    is made the busiest instance first), and the job's receipt arrives;
 *  - a balancer that routes the hint to the wrong instance: after two
 *    hinted connections that missed, the client drops the hint, seeks by
 *    plain connections (today's pool growth) and still gets its receipt.
 */
#include "autoconfig.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <event2/event.h>

#include "client_fixture.h"
#include "fleet.h"
#include "fleet_client.h"
#include "proto.h"
#include "suite.h"

#define N 3

static struct fleet F;

/* The connection events of the client, in order. */
static struct {
	int n;
	enum exc_conn_event ev[64];
	char id[64][65];
} E;

static void on_conn(void *arg, enum exc_conn_event ev, const struct exc_conn_info *info)
{
	(void)arg;
	if (E.n >= 64)
		return;
	E.ev[E.n] = ev;
	snprintf(E.id[E.n], sizeof E.id[E.n], "%s", info->instance_id ? info->instance_id : "");
	E.n++;
}

/* routes[i]: the instance (index) that ?instance=exec-<i+1> goes to. */
static void start(const int *routes)
{
	static char bodies[N][1024];
	static char lines[1024];
	const char *b[N];
	size_t len = 0;
	for (int i = 0; i < N; i++) {
		snprintf(bodies[i], sizeof bodies[i], "instanceId: exec-%d\n%s", i + 1,
			 harness_default_body(1));
		b[i] = bodies[i];
		len += (size_t)snprintf(lines + len, sizeof lines - len,
					"    use-server s%d if { urlp(instance) -m str exec-%d }\n",
					routes[i] + 1, i + 1);
	}
	struct fleet_place p = { .backend_lines = lines, .http = 1 };
	CU_ASSERT_FATAL(fleet_start_placed(&F, N, 1, b, &p) == 0);
	for (int i = 0; i < N; i++) {
		char want[16];
		snprintf(want, sizeof want, "exec-%d", i + 1);
		CU_ASSERT_STRING_EQUAL(F.id[i], want);
	}
}

/* A client on the balancer's address with its events recorded. */
static exc_client *client(void)
{
	struct exc_options o;
	fx_options(&o);
	o.on_conn = on_conn;
	memset(&E, 0, sizeof E);
	return fleet_client(&F, &o);
}

static int running_on(const struct fleet *f)
{
	for (int i = 0; i < f->n; i++)
		if (fleet_status_int(f, i, "waitgroups", "wg", "running", NULL) == 1)
			return i;
	return -1;
}

static int job_running(void *arg)
{
	return running_on(arg) >= 0;
}

/* A sleep job of secs, running; returns the owner's index. */
static int run_sleeper(exc_client *c, struct fx_done *d, const char *secs)
{
	static char job[128];
	struct exc_job_spec s;
	snprintf(job, sizeof job, "{\"command\":\"sleep\",\"args\":[\"%s\"]}", secs);
	fx_spec(&s, "sleep", job, d);
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT_FATAL(fx_wait_pred(job_running, &F, 10000));
	return running_on(&F);
}

/* An idle broker connection through the balancer with ?instance=<id>: the
 * HELLO comes from that instance.  Returns it; *port: its local port. */
static struct tclient *idle_on(const char *id, int k, int *port)
{
	char cid[64];
	snprintf(cid, sizeof cid, "idle%d&instance=%s", k, id);
	struct tclient *t = tc_connect(F.lb.port, cid);
	CU_ASSERT_FATAL(t != NULL);
	CU_ASSERT_STRING_EQUAL(tc_str(t->hello, "instance_id"), id);
	struct sockaddr_in sa;
	socklen_t len = sizeof sa;
	getsockname(wsc_fd(t->ws), (struct sockaddr *)&sa, &len);
	*port = ntohs(sa.sin_port);
	return t;
}

/* The events after index from: the first UP, and how many connections
 * reached another instance than id (UP or DUPLICATE). */
static void after(int from, const char *id, char *first_up, int *elsewhere)
{
	first_up[0] = '\0';
	*elsewhere = 0;
	for (int i = from; i < E.n; i++) {
		if (E.ev[i] == EXC_CONN_UP && !first_up[0])
			snprintf(first_up, 65, "%s", E.id[i]);
		if ((E.ev[i] == EXC_CONN_UP || E.ev[i] == EXC_CONN_DUPLICATE) &&
		    strcmp(E.id[i], id) != 0)
			(*elsewhere)++;
	}
}

/* The owner is the busiest instance (three idle connections routed to it
 * by ?instance=), the client's connection to it is cut: its first new
 * connection carries the hint and lands on the owner; no connection goes
 * elsewhere; the receipt arrives from the owner. */
static void test_routed_to_owner(void)
{
	const int routes[N] = { 0, 1, 2 };
	start(routes);
	exc_client *c = client();
	struct fx_done d = { 0 };
	int owner = run_sleeper(c, &d, "2");
	CU_ASSERT_FATAL(owner >= 0);

	struct tclient *idle[3];
	int ports[3];
	for (int k = 0; k < 3; k++)
		idle[k] = idle_on(F.id[owner], k, &ports[k]);
	int mark = E.n;
	CU_ASSERT(balancer_cut_except(&F.lb, owner, ports, 3) == 1);
	CU_ASSERT(fx_wait(&d.called, 15000));
	CU_ASSERT(d.ok && d.exit_code == 0);
	CU_ASSERT_STRING_EQUAL(d.instance_id, F.id[owner]);

	char first[65];
	int elsewhere;
	after(mark, F.id[owner], first, &elsewhere);
	CU_ASSERT_STRING_EQUAL(first, F.id[owner]);
	CU_ASSERT_EQUAL(elsewhere, 0);
	char hinted[96];
	snprintf(hinted, sizeof hinted, "?instance=%s)", F.id[owner]);
	CU_ASSERT(fx_log_find(hinted) != NULL);
	for (int k = 0; k < 3; k++)
		tc_close(idle[k]);
	exc_client_free(c);
	CU_ASSERT(fleet_stop(&F) == 0);
}

/* A balancer that sends ?instance=exec-N to the wrong instance: two hinted
 * connections miss, the hint is dropped, plain connections find the
 * owner, the receipt arrives. */
static void test_wrong_route_dropped(void)
{
	const int routes[N] = { 1, 2, 0 }; /* exec-1 -> s2, exec-2 -> s3, exec-3 -> s1 */
	start(routes);
	exc_client *c = client();
	struct fx_done d = { 0 };
	int owner = run_sleeper(c, &d, "3");
	CU_ASSERT_FATAL(owner >= 0);
	int mark = E.n;
	fx_log_clear();
	CU_ASSERT(balancer_cut(&F.lb, owner) == 0);
	CU_ASSERT(fx_wait(&d.called, 20000));
	CU_ASSERT(d.ok && d.exit_code == 0);
	CU_ASSERT_STRING_EQUAL(d.instance_id, F.id[owner]);

	/* the first two connections after the cut reached the instance the
	 * hint was (wrongly) routed to */
	int wrong = routes[owner], seen = 0;
	for (int i = mark; i < E.n && seen < 2; i++)
		if (E.ev[i] == EXC_CONN_UP || E.ev[i] == EXC_CONN_DUPLICATE) {
			CU_ASSERT_STRING_EQUAL(E.id[i], F.id[wrong]);
			seen++;
		}
	CU_ASSERT_EQUAL(seen, 2);
	CU_ASSERT(fx_log_find("hint dropped, seeking without it") != NULL);
	exc_client_free(c);
	CU_ASSERT(fleet_stop(&F) == 0);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "routed to the owner by ?instance=", test_routed_to_owner },
		{ "a hint that misses twice is dropped", test_wrong_route_dropped },
		{ NULL, NULL },
	};
	return run_suite("instance_route", cases);
}
