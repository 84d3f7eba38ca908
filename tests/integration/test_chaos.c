/*
 * test_chaos.c - handlers die under load, and nothing is lost or given twice.
 *
 * A real daemon with three handlers and four slots serves a few hundred
 * named clients (one connection each) that loop WANT -> OFFER -> JOB (or
 * DECLINE) -> DONE with short jobs, while this test SIGKILLs a random
 * handler about once a second and the handlers themselves die inside the
 * want-book's critical section at random (EXECSERVER_FAULT=book:random:n).
 * A client whose connection drops reconnects with the same client id.
 *
 * Checked:
 *  - every JOB got exactly one DONE, unless its connection dropped before
 *    the DONE arrived (then at most one: the job's exec_lost DONE reaches
 *    the reconnected client, unless the handler died before it read the
 *    JOB); a want that never became a JOB gets no DONE;
 *  - no ERROR at all, and no DONE for a job the client does not know;
 *  - no OFFER token was ever given twice, and no /status sample shows more
 *    slots offered or running than the waitgroup has;
 *  - at quiescence no slot is held, no want is left, the book passes its
 *    consistency check, and the master is the one that started.
 *
 * Short by default (make check); CHAOS_SECONDS, CHAOS_CONNS and
 * CHAOS_FAULT_ONE_IN make the long run (`make chaos`).
 */
#include "autoconfig.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include <CUnit/Basic.h>

#include "harness.h"
#include "proto.h"
#include "suite.h"

#define SLOTS 4
#define HANDLERS 3

enum cstate { IDLE, WANTED, RUNNING, DEAD };

struct job {
	int conn;		/* owner connection index */
	int sleepy;		/* service "sleep" (else "cat", command "true") */
	int sent_job;		/* the JOB was sent */
	int dropped;		/* its connection dropped before its DONE */
	int dones;
};

struct cconn {
	struct tclient *tc;	/* NULL while down */
	enum cstate state;
	int job;		/* index in jobs[] of the current want or job */
	long long down_since;	/* ms, while down */
	char id[16];		/* the client id */
};

static struct es_daemon D;
static struct cconn *conns;
static int nconns;
static struct job *jobs;
static int njobs, jobs_cap;
static unsigned long long *tokens;
static int ntokens, tokens_cap;
static int errors, unknown_dones, over_capacity, reconnects, kills, declines, samples;
static int stopping;

static int env_int(const char *name, int def)
{
	const char *v = getenv(name);
	return v && *v ? atoi(v) : def;
}

static void *grow(void *p, int *cap, size_t size)
{
	*cap = *cap ? 2 * *cap : 4096;
	p = realloc(p, size * (size_t)*cap);
	CU_ASSERT_FATAL(p != NULL);
	return p;
}

static int new_job(int conn)
{
	if (njobs == jobs_cap)
		jobs = grow(jobs, &jobs_cap, sizeof *jobs);
	memset(&jobs[njobs], 0, sizeof jobs[njobs]);
	jobs[njobs].conn = conn;
	return njobs++;
}

static void note_token(const char *hex)
{
	if (ntokens == tokens_cap)
		tokens = grow(tokens, &tokens_cap, sizeof *tokens);
	tokens[ntokens++] = strtoull(hex, NULL, 16);
}

/* Job ids are the index in jobs[]: unique across all clients. */
static void send_want(struct cconn *c, int ci)
{
	c->job = new_job(ci);
	jobs[c->job].sleepy = random() % 4 == 0;
	c->state = WANTED;
	tc_send(c->tc, "{\"type\":\"WANT\",\"job_id\":\"%d\",\"service\":\"%s\",\"priority\":%d}",
		c->job, jobs[c->job].sleepy ? "sleep" : "cat", (int)(random() % 3) - 1);
}

static void on_offer(struct cconn *c, struct json_object *m)
{
	const char *token = tc_str(m, "token");
	int j = atoi(tc_str(m, "job_id"));

	if (!token || c->state != WANTED || j != c->job) {
		errors++;
		return;
	}
	note_token(token);
	if (random() % 10 == 0) {
		tc_send(c->tc, "{\"type\":\"DECLINE\",\"job_id\":\"%d\",\"token\":\"%s\"}", j, token);
		declines++;
		c->state = IDLE;
		return;
	}
	jobs[j].sent_job = 1;
	c->state = RUNNING;
	tc_send(c->tc, "{\"type\":\"JOB\",\"job_id\":\"%d\",\"token\":\"%s\",\"job\":%s}", j, token,
		jobs[j].sleepy ? "{\"command\":\"sleep\",\"args\":[\"0.02\"]}" : "{\"command\":\"true\"}");
}

/* A DONE may also be for an earlier job of this client, lost with a killed
 * handler and delivered after the reconnect. */
static void on_done(struct cconn *c, int ci, struct json_object *m)
{
	const char *id = tc_str(m, "job_id");
	int j = id ? atoi(id) : -1;

	if (j < 0 || j >= njobs || jobs[j].conn != ci || !jobs[j].sent_job) {
		unknown_dones++;
		return;
	}
	jobs[j].dones++;
	if (c->state == RUNNING && j == c->job)
		c->state = IDLE;
}

static void connection_down(struct cconn *c)
{
	tc_close(c->tc);
	c->tc = NULL;
	if (c->state == RUNNING)
		jobs[c->job].dropped = 1;
	c->state = DEAD;
	c->down_since = harness_now_ms();
}

/* Reads everything that is there on connection ci. */
static void drain_conn(int ci)
{
	struct cconn *c = &conns[ci];
	for (;;) {
		struct wsc_msg m;
		int t = wsc_recv(c->tc->ws, 0, &m);
		if (t == WSC_TIMEOUT) {
			wsc_msg_free(&m);
			return;
		}
		if (t != WSC_TEXT) {	/* EOF, close (1006 is no frame), error */
			wsc_msg_free(&m);
			connection_down(c);
			return;
		}
		struct json_object *o = json_tokener_parse(m.data);
		const char *type = o ? tc_str(o, "type") : NULL;
		if (!type)
			errors++;
		else if (strcmp(type, "OFFER") == 0)
			on_offer(c, o);
		else if (strcmp(type, "DONE") == 0)
			on_done(c, ci, o);
		else if (strcmp(type, "ERROR") == 0) {
			fprintf(stderr, "chaos: %s got %s\n", c->id, m.data);
			errors++;
		}
		/* HELLO: nothing to do */
		if (o)
			json_object_put(o);
		wsc_msg_free(&m);
		if (!c->tc)
			return;
	}
}

/* Handlers being replaced accept late: at most a few reconnects per turn,
 * each waits for its HELLO. */
static void reconnect_some(void)
{
	int budget = 4;
	long long now = harness_now_ms();
	for (int i = 0; i < nconns && budget > 0; i++) {
		struct cconn *c = &conns[i];
		if (c->tc || now - c->down_since < 50)
			continue;
		budget--;
		/* short: a handler that is being replaced must not stall the
		 * other connections' traffic */
		c->tc = tc_connect_within(D.port, c->id, 300);
		if (c->tc) {
			reconnects++;
			c->state = IDLE;
		} else {
			c->down_since = now;
		}
	}
}

/* Offered + running never exceed the slots (a cheap /status, no check). */
static void sample_status(void)
{
	static char body[1 << 16];
	int status = 0;
	if (wsc_http_get("127.0.0.1", D.port, "/status", 2000, &status, body, sizeof body) < 0 ||
	    status != 200)
		return;	/* the handler that took it may have died: fine */
	struct json_object *st = json_tokener_parse(body);
	if (!st)
		return;
	long long running = harness_json_int(st, "waitgroups", "wg", "running", NULL);
	long long offered = harness_json_int(st, "waitgroups", "wg", "offered", NULL);
	samples++;
	if (running + offered > SLOTS) {
		fprintf(stderr, "chaos: %lld running + %lld offered > %d slots\n", running, offered,
			SLOTS);
		over_capacity++;
	}
	json_object_put(st);
}

static void kill_random_handler(void)
{
	int pids[HANDLERS], n = harness_handler_pids(&D, pids, HANDLERS), live[HANDLERS], k = 0;
	for (int i = 0; i < n; i++)
		if (pids[i] > 0)
			live[k++] = pids[i];
	if (k == 0)
		return;
	if (kill(live[random() % k], SIGKILL) == 0)
		kills++;
}

/* One turn: poll every live connection, handle what came, start new
 * wants on idle ones. */
static void turn(void)
{
	static struct pollfd *pfd;
	static int *idx;
	if (!pfd) {
		pfd = calloc((size_t)nconns, sizeof *pfd);
		idx = calloc((size_t)nconns, sizeof *idx);
		CU_ASSERT_FATAL(pfd && idx);
	}
	int n = 0;
	for (int i = 0; i < nconns; i++) {
		if (!conns[i].tc)
			continue;
		if (conns[i].state == IDLE && !stopping)
			send_want(&conns[i], i);
		pfd[n].fd = wsc_fd(conns[i].tc->ws);
		pfd[n].events = POLLIN;
		idx[n++] = i;
	}
	if (poll(pfd, (nfds_t)n, 20) > 0)
		for (int k = 0; k < n; k++)
			if (pfd[k].revents)
				drain_conn(idx[k]);
	if (stopping) {
		free(pfd);
		free(idx);
		pfd = NULL;
		idx = NULL;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
	return x < y ? -1 : x > y;
}

static int quiet(struct json_object *st, void *arg)
{
	(void)arg;
	struct json_object *v;
	return harness_json_int(st, "wants", NULL) == 0 &&
	       harness_json_int(st, "connections", NULL) == 0 &&
	       harness_json_int(st, "waitgroups", "wg", "running", NULL) == 0 &&
	       harness_json_int(st, "waitgroups", "wg", "offered", NULL) == 0 &&
	       harness_json_int(st, "waitgroups", "wg", "waiting", NULL) == 0 &&
	       json_object_object_get_ex(st, "book_consistent", &v) && json_object_get_boolean(v);
}

static void test_chaos(void)
{
	int seconds = env_int("CHAOS_SECONDS", 12);
	int one_in = env_int("CHAOS_FAULT_ONE_IN", 3000);
	char fault[64], body[4096];

	nconns = env_int("CHAOS_CONNS", 200);
	srandom((unsigned)getpid());
	snprintf(fault, sizeof fault, "EXECSERVER_FAULT=book:random:%d", one_in);
	snprintf(body, sizeof body, "maxConnections: %d\nresumeGraceSec: 30\n%s", 2 * nconns + 64,
		 harness_default_body(SLOTS));
	CU_ASSERT_FATAL(harness_start(&D, HANDLERS, body, fault) == 0);

	conns = calloc((size_t)nconns, sizeof *conns);
	CU_ASSERT_FATAL(conns != NULL);
	for (int i = 0; i < nconns; i++) {
		snprintf(conns[i].id, sizeof conns[i].id, "chaos%d", i);
		conns[i].state = DEAD;
	}
	struct json_object *st = harness_status(&D);
	CU_ASSERT_FATAL(st != NULL);
	long long master = harness_json_int(st, "master_pid", NULL);
	json_object_put(st);

	long long start = harness_now_ms(), next_kill = start + 500, next_sample = start;
	while (harness_now_ms() - start < seconds * 1000LL) {
		reconnect_some();
		turn();
		long long now = harness_now_ms();
		if (now >= next_kill) {
			kill_random_handler();
			next_kill = now + 500 + random() % 1000;
		}
		if (now >= next_sample) {
			sample_status();
			next_sample = now + 200;
		}
	}

	/* Quiesce: no new wants; wait for the DONEs of the running jobs. */
	stopping = 1;
	long long until = harness_now_ms() + 20000;
	for (;;) {
		int busy = 0;
		for (int i = 0; i < nconns; i++)
			busy += conns[i].tc && conns[i].state == RUNNING;
		if (!busy || harness_now_ms() > until)
			break;
		reconnect_some();
		turn();
	}
	/* reconnect the rest, so that lost jobs' DONEs come home */
	for (int round = 0; round < 200; round++) {
		int down = 0;
		for (int i = 0; i < nconns; i++)
			down += conns[i].tc == NULL;
		if (!down)
			break;
		reconnect_some();
		turn();
	}
	for (int round = 0; round < 25; round++)
		turn();	/* 0.5 s for late DONEs */

	int done_jobs = 0, dropped = 0, lost = 0, missing = 0, doubled = 0, stray = 0;
	for (int j = 0; j < njobs; j++) {
		struct job *x = &jobs[j];
		if (x->dones > 1)
			doubled++;
		if (!x->sent_job && x->dones)
			stray++;
		if (x->sent_job && x->dones == 0 && !x->dropped)
			missing++;
		if (x->sent_job && x->dropped && x->dones == 0)
			lost++;
		dropped += x->sent_job && x->dropped;
		done_jobs += x->dones == 1;
	}
	qsort(tokens, (size_t)ntokens, sizeof *tokens, cmp_u64);
	int dup_tokens = 0;
	for (int i = 1; i < ntokens; i++)
		dup_tokens += tokens[i] == tokens[i - 1];

	fprintf(stderr, "chaos: %d s, %d connections, %d kills, %d reconnects, %d wants, %d offers, "
		"%d declines, %d DONEs, %d JOBs on dropped connections of which %d got no DONE "
		"(their handler died before it took them), %d status samples\n", seconds, nconns,
		kills, reconnects, njobs, ntokens, declines, done_jobs, dropped, lost, samples);
	CU_ASSERT_EQUAL(errors, 0);
	CU_ASSERT_EQUAL(unknown_dones, 0);
	CU_ASSERT_EQUAL(doubled, 0);
	CU_ASSERT_EQUAL(stray, 0);
	CU_ASSERT_EQUAL(missing, 0);
	CU_ASSERT_EQUAL(dup_tokens, 0);
	CU_ASSERT_EQUAL(over_capacity, 0);
	/* it did work under fire (loose: the machine may be loaded) */
	CU_ASSERT(samples >= 3);
	CU_ASSERT(kills >= seconds / 2);
	CU_ASSERT(reconnects > 0);
	CU_ASSERT(done_jobs >= 10 * seconds);

	for (int i = 0; i < nconns; i++)
		if (conns[i].tc)
			tc_close(conns[i].tc);
	CU_ASSERT(harness_wait_status(&D, 15000, quiet, NULL) == 0);
	st = harness_status(&D);
	CU_ASSERT_FATAL(st != NULL);
	CU_ASSERT_EQUAL(harness_json_int(st, "master_pid", NULL), master);
	json_object_put(st);
	CU_ASSERT(kill((pid_t)master, 0) == 0);
	int faults = harness_log_count(&D, "fault injection: dying at");
	fprintf(stderr, "chaos: %d handler deaths inside the book's critical section\n", faults);
	CU_ASSERT(faults > 0);
	if (CU_get_number_of_failures() > 0)
		harness_dump_log(&D);
	int status = harness_stop(&D, 30000);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	harness_cleanup(&D);
	free(conns);
	free(jobs);
	free(tokens);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "handlers killed at random under load lose nothing", test_chaos },
		{ NULL, NULL },
	};
	return run_suite("chaos", cases);
}
