/*
 * test_pinning.c - pinning for real (docs/balancers.md): libexecclient on
 * host a, given only the address of haproxy on host b, in front of
 * execservers on hosts c and d that trust b (send-proxy-v2).  The jobs'
 * pipe URLs are the client's own, on a's address as the broker connection
 * has it; the execservers fetch stdin from and send stdout to a directly,
 * so the megabytes of the streams never pass b: the balancer's byte
 * counters stay at the size of the broker messages, while every byte of
 * every stream arrives whole.  A second balancer in HTTP mode that refuses
 * every path but /broker (403) proves the same by construction.
 *
 * As root only (bed.h); otherwise one line says how many tests it left out.
 */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>
#include <event2/event.h>

#include "client_fixture.h"
#include "fleet.h"
#include "fleet_client.h"
#include "suite.h"
#include "wsclient.h"

#define JOBS 6
#define MIB (1u << 20)
#define JOB_BYTES (2 * MIB)

static struct bed B;
#define A (&B.host[0])

static struct fleet F;

static void start(const char *backend_lines, int http)
{
	struct fleet_place p = { .balancer = &B.host[1],
				 .host = { &B.host[2], &B.host[3] },
				 .server_opts = "send-proxy-v2",
				 .backend_lines = backend_lines,
				 .http = http };
	CU_ASSERT_FATAL(fleet_start_placed(&F, 2, 1, NULL, &p) == 0);
}

struct run {
	struct fx_done d[JOBS];
	int n;
};

static int all_done(void *arg)
{
	struct run *r = arg;
	for (int i = 0; i < r->n; i++)
		if (!r->d[i].called)
			return 0;
	return 1;
}

/* JOBS cat jobs of JOB_BYTES each from a through the balancer, stdin from
 * memory, stdout streamed back and counted; every byte must come back. */
static void run_jobs(struct run *r)
{
	unsigned char *data = harness_pattern(JOB_BYTES);
	struct exc_options o;
	CU_ASSERT_FATAL(data != NULL);
	fx_options(&o);
	CU_ASSERT_FATAL(bed_enter(A) == 0); /* the client's sockets are a's */
	fx_log_clear();
	exc_client *c = fx_client(&o, NULL, 0, NULL);
	CU_ASSERT_FATAL(c != NULL);
	CU_ASSERT_FATAL(exc_client_add_address(c, F.url) == 0);
	/* two sleepers first, one slot per instance: the pool grows to both
	 * (back-pressure), so the balancer carries a broker connection to c
	 * and one to d while the streams run */
	struct run sl = { .n = 2 };
	struct fx_done *sleepers = sl.d;
	for (int i = 0; i < 2; i++) {
		struct exc_job_spec s;
		fx_spec(&s, "sleep", "{\"command\":\"sleep\",\"args\":[\"1\"]}", &sleepers[i]);
		CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	}
	struct pool_goal both = { .c = c, .connections = 2, .instances = 2 };
	CU_ASSERT(fx_wait_pred(pool_reached, &both, 10000));
	memset(r, 0, sizeof *r);
	r->n = JOBS;
	for (int i = 0; i < JOBS; i++) {
		struct exc_job_spec s;
		fx_spec(&s, "cat", "{\"command\":\"cat\"}", &r->d[i]);
		s.in.kind = EXC_IO_BUFFER;
		s.in.data = data;
		s.in.len = JOB_BYTES;
		s.out.kind = EXC_IO_DISCARD;
		CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	}
	CU_ASSERT(fx_wait_pred(all_done, r, 60000));
	/* the pipe URLs are on a's address, as the broker connection has it */
	char pipes[64];
	snprintf(pipes, sizeof pipes, "pipe server on %s:", A->addr);
	CU_ASSERT(fx_log_find(pipes) != NULL);
	CU_ASSERT(fx_log_find("pipe server on 127.") == NULL);
	CU_ASSERT(fx_wait_pred(all_done, &sl, 10000));
	CU_ASSERT(sleepers[0].ok && sleepers[1].ok);
	CU_ASSERT(strcmp(sleepers[0].instance_id, sleepers[1].instance_id) != 0);
	exc_client_free(c);
	fx_spin(50); /* the freed connections close */
	bed_leave();
	free(data);
	int on[2] = { 0, 0 };
	for (int i = 0; i < JOBS; i++) {
		int k = fleet_index(&F, r->d[i].instance_id);
		if (k >= 0 && k < 2)
			on[k]++;
		CU_ASSERT(r->d[i].ok);
		CU_ASSERT_EQUAL(r->d[i].stdin_bytes, JOB_BYTES);
		CU_ASSERT_EQUAL(r->d[i].stdout_bytes, JOB_BYTES);
		CU_ASSERT(k >= 0);
		if (!r->d[i].ok)
			fprintf(stderr, "\n  job %d: %s: %s\n", i, r->d[i].error_code,
				r->d[i].error_message);
	}
	printf("\n  stream jobs on c: %d, on d: %d ", on[0], on[1]);
}

/* 24 MiB of streams, and the balancer carried less than 256 KiB (the
 * broker messages: a few hundred bytes per job); the client's address as
 * the execservers saw it was a's. */
static void test_streams_bypass_balancer(void)
{
	struct run r;
	start(NULL, 0);
	run_jobs(&r);
	long long carried = balancer_bytes(&F.lb);
	printf("\n  streams %u MiB, through the balancer %lld bytes ", 2 * JOBS * JOB_BYTES / MIB,
	       carried);
	CU_ASSERT(carried > 1000); /* the broker traffic did pass it */
	CU_ASSERT(carried < 256 * 1024);
	char line[96];
	snprintf(line, sizeof line, "PROXY v2 header: client %s:", A->addr);
	CU_ASSERT(harness_log_contains(&F.d[0], line) || harness_log_contains(&F.d[1], line));
	CU_ASSERT(fleet_stop(&F) == 0);
}

/* A balancer that forwards /broker only (HTTP mode, anything else 403):
 * the jobs still stream, and the balancer refused nothing, so nothing but
 * /broker was ever sent to it. */
static void test_balancer_forwards_broker_only(void)
{
	struct run r;
	start("    http-request deny deny_status 403 unless { path /broker }\n", 1);
	run_jobs(&r);
	CU_ASSERT(balancer_denied(&F.lb) == 0);
	/* and the rule works: another path from a is denied, and counted */
	char req[256], body[1024];
	int status = 0;
	snprintf(req, sizeof req, "GET /status HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
		 F.lb.bind_addr);
	CU_ASSERT_FATAL(bed_enter(A) == 0);
	wsc_https_request(F.lb.bind_addr, F.lb.port, NULL, req, 3000, &status, body, sizeof body);
	bed_leave();
	CU_ASSERT_EQUAL(status, 403);
	CU_ASSERT(balancer_denied(&F.lb) == 1);
	CU_ASSERT(fleet_stop(&F) == 0);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "streams bypass the balancer", test_streams_bypass_balancer },
		{ "a balancer that forwards /broker only", test_balancer_forwards_broker_only },
		{ NULL, NULL },
	};
	return bed_run_suite("test_pinning", "pinning", cases, &B, 4);
}
