/* loadgen.c - see loadgen.h. */
#include "autoconfig.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "loadgen.h"
#include "proto.h"

enum cstate {
	IDLE,
	WANTED,
	RUNNING,
	DOWN
};

struct job {
	int conn;     /* owner client index */
	int sleepy;   /* service "sleep" (else "cat", command "true") */
	int sent_job; /* the JOB was sent */
	int dropped;  /* its connection dropped before its DONE */
	int dones;
	int lost; /* a DONE with exec_lost came */
};

struct client {
	struct tclient *tc; /* NULL while down */
	enum cstate state;
	int job;              /* index in jobs[] of the current want or job */
	long long down_since; /* ms, while down */
	char id[48];
};

struct loadgen {
	int port;
	int stopping;
	struct client *c;
	int n;
	struct job *jobs;
	int njobs, jobs_cap;
	unsigned long long *tokens;
	int ntokens, tokens_cap;
	int declines, reconnects, errors, unknown_dones, bad_receipts;
	struct pollfd *pfd;
	int *idx;
};

static int grow(void **p, int *cap, size_t size)
{
	int ncap = *cap ? 2 * *cap : 4096;
	void *np = realloc(*p, size * (size_t)ncap);
	if (!np)
		return -1;
	*p = np;
	*cap = ncap;
	return 0;
}

struct loadgen *loadgen_new(int port, int nconns, const char *prefix)
{
	struct loadgen *lg = calloc(1, sizeof *lg);
	if (!lg)
		return NULL;
	lg->port = port;
	lg->n = nconns;
	lg->c = calloc((size_t)nconns, sizeof *lg->c);
	lg->pfd = calloc((size_t)nconns, sizeof *lg->pfd);
	lg->idx = calloc((size_t)nconns, sizeof *lg->idx);
	if (!lg->c || !lg->pfd || !lg->idx) {
		loadgen_free(lg);
		return NULL;
	}
	for (int i = 0; i < nconns; i++) {
		snprintf(lg->c[i].id, sizeof lg->c[i].id, "%s%d", prefix, i);
		lg->c[i].state = DOWN;
	}
	return lg;
}

void loadgen_free(struct loadgen *lg)
{
	if (!lg)
		return;
	loadgen_close_all(lg);
	free(lg->c);
	free(lg->pfd);
	free(lg->idx);
	free(lg->jobs);
	free(lg->tokens);
	free(lg);
}

int loadgen_size(const struct loadgen *lg)
{
	return lg->n;
}

static void send_want(struct loadgen *lg, int ci)
{
	struct client *c = &lg->c[ci];
	if (lg->njobs == lg->jobs_cap && grow((void **)&lg->jobs, &lg->jobs_cap, sizeof *lg->jobs))
		return;
	struct job *j = &lg->jobs[lg->njobs];
	memset(j, 0, sizeof *j);
	j->conn = ci;
	j->sleepy = random() % 4 == 0;
	c->job = lg->njobs++;
	c->state = WANTED;
	tc_send(c->tc, "{\"type\":\"WANT\",\"job_id\":\"%d\",\"service\":\"%s\",\"priority\":%d}",
		c->job, j->sleepy ? "sleep" : "cat", (int)(random() % 3) - 1);
}

static void on_offer(struct loadgen *lg, struct client *c, struct json_object *m)
{
	const char *token = tc_str(m, "token"), *id = tc_str(m, "job_id");
	int j = id ? atoi(id) : -1;

	if (!token || c->state != WANTED || j != c->job) {
		lg->errors++;
		return;
	}
	if (lg->ntokens == lg->tokens_cap &&
	    grow((void **)&lg->tokens, &lg->tokens_cap, sizeof *lg->tokens))
		return;
	lg->tokens[lg->ntokens++] = strtoull(token, NULL, 16);
	if (random() % 10 == 0) {
		tc_send(c->tc, "{\"type\":\"DECLINE\",\"job_id\":\"%d\",\"token\":\"%s\"}", j,
			token);
		lg->declines++;
		c->state = IDLE;
		return;
	}
	lg->jobs[j].sent_job = 1;
	c->state = RUNNING;
	tc_send(c->tc, "{\"type\":\"JOB\",\"job_id\":\"%d\",\"token\":\"%s\",\"job\":%s}", j, token,
		lg->jobs[j].sleepy ? "{\"command\":\"sleep\",\"args\":[\"0.02\"]}"
				   : "{\"command\":\"true\"}");
}

/* A DONE may also be for an earlier job of this client, lost with a killed
 * handler and delivered after the reconnect. */
static void on_done(struct loadgen *lg, int ci, struct json_object *m)
{
	struct client *c = &lg->c[ci];
	const char *id = tc_str(m, "job_id");
	int j = id ? atoi(id) : -1;

	if (j < 0 || j >= lg->njobs || lg->jobs[j].conn != ci || !lg->jobs[j].sent_job) {
		lg->unknown_dones++;
		return;
	}
	lg->jobs[j].dones++;
	/* every program here exits 0: a DONE is that, or exec_lost for a
	 * job whose connection dropped with its handler */
	struct json_object *r = tc_receipt(m), *e;
	if (r && json_object_object_get_ex(r, "error", &e)) {
		const char *code = tc_str(e, "code");
		if (code && strcmp(code, "exec_lost") == 0 && lg->jobs[j].dropped)
			lg->jobs[j].lost = 1;
		else
			lg->bad_receipts++;
	} else if (!r || tc_int(r, "exit_code") != 0) {
		lg->bad_receipts++;
	}
	if (c->state == RUNNING && j == c->job)
		c->state = IDLE;
}

void loadgen_drop(struct loadgen *lg, int i)
{
	struct client *c = &lg->c[i];
	if (!c->tc)
		return;
	tc_close(c->tc);
	c->tc = NULL;
	if (c->state == RUNNING)
		lg->jobs[c->job].dropped = 1;
	c->state = DOWN;
	c->down_since = harness_now_ms();
}

/* Reads everything that is there on client ci's connection. */
static void read_client(struct loadgen *lg, int ci)
{
	struct client *c = &lg->c[ci];
	while (c->tc) {
		struct wsc_msg m;
		int t = wsc_recv(c->tc->ws, 0, &m);
		if (t == WSC_TIMEOUT) {
			wsc_msg_free(&m);
			return;
		}
		if (t != WSC_TEXT) { /* EOF, close (1006 is no frame), error */
			wsc_msg_free(&m);
			loadgen_drop(lg, ci);
			return;
		}
		struct json_object *o = json_tokener_parse(m.data);
		const char *type = o ? tc_str(o, "type") : NULL;
		if (!type) {
			lg->errors++;
		} else if (strcmp(type, "OFFER") == 0) {
			on_offer(lg, c, o);
		} else if (strcmp(type, "DONE") == 0) {
			on_done(lg, ci, o);
		} else if (strcmp(type, "ERROR") == 0) {
			fprintf(stderr, "loadgen: %s got %s\n", c->id, m.data);
			lg->errors++;
		}
		/* HELLO: nothing to do */
		if (o)
			json_object_put(o);
		wsc_msg_free(&m);
	}
}

/* A handler being replaced accepts late: a few reconnects per turn, each
 * with a short wait, so the other clients' traffic goes on. */
static void reconnect_some(struct loadgen *lg)
{
	int budget = 4;
	long long now = harness_now_ms();
	for (int i = 0; i < lg->n && budget > 0; i++) {
		struct client *c = &lg->c[i];
		if (c->tc || now - c->down_since < 50)
			continue;
		budget--;
		c->tc = tc_connect_within(lg->port, c->id, 300);
		if (c->tc) {
			lg->reconnects++;
			c->state = IDLE;
		} else {
			c->down_since = now;
		}
	}
}

void loadgen_turn(struct loadgen *lg, int poll_ms)
{
	int n = 0;

	reconnect_some(lg);
	for (int i = 0; i < lg->n; i++) {
		if (!lg->c[i].tc)
			continue;
		if (lg->c[i].state == IDLE && !lg->stopping)
			send_want(lg, i);
		lg->pfd[n].fd = wsc_fd(lg->c[i].tc->ws);
		lg->pfd[n].events = POLLIN;
		lg->pfd[n].revents = 0;
		lg->idx[n++] = i;
	}
	if (poll(lg->pfd, (nfds_t)n, poll_ms) > 0)
		for (int k = 0; k < n; k++)
			if (lg->pfd[k].revents)
				read_client(lg, lg->idx[k]);
}

void loadgen_stop(struct loadgen *lg)
{
	lg->stopping = 1;
}

void loadgen_restart(struct loadgen *lg)
{
	lg->stopping = 0;
}

int loadgen_running(const struct loadgen *lg)
{
	int busy = 0;
	for (int i = 0; i < lg->n; i++)
		busy += lg->c[i].tc && lg->c[i].state == RUNNING;
	return busy;
}

int loadgen_down(const struct loadgen *lg)
{
	int down = 0;
	for (int i = 0; i < lg->n; i++)
		down += lg->c[i].tc == NULL;
	return down;
}

void loadgen_close_all(struct loadgen *lg)
{
	for (int i = 0; i < lg->n; i++)
		if (lg->c[i].tc) {
			tc_close(lg->c[i].tc);
			lg->c[i].tc = NULL;
		}
}

void loadgen_settle(struct loadgen *lg, int wait_ms)
{
	long long until = harness_now_ms() + wait_ms;

	loadgen_stop(lg);
	while (loadgen_running(lg) && harness_now_ms() < until)
		loadgen_turn(lg, 20);
	for (int round = 0; round < 200 && loadgen_down(lg); round++)
		loadgen_turn(lg, 20);
	for (int round = 0; round < 25; round++)
		loadgen_turn(lg, 20); /* 0.5 s for late DONEs */
}

static int cmp_u64(const void *a, const void *b)
{
	unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
	return x < y ? -1 : x > y;
}

void loadgen_tally(struct loadgen *lg, struct loadgen_tally *t)
{
	memset(t, 0, sizeof *t);
	for (int j = 0; j < lg->njobs; j++) {
		const struct job *x = &lg->jobs[j];
		t->doubled += x->dones > 1;
		t->stray += !x->sent_job && x->dones;
		t->missing += x->sent_job && x->dones == 0 && !x->dropped;
		t->dropped += x->sent_job && x->dropped;
		t->lost += x->sent_job && x->dropped && x->dones == 0;
		t->done_jobs += x->dones == 1;
		t->exec_lost += x->lost;
	}
	qsort(lg->tokens, (size_t)lg->ntokens, sizeof *lg->tokens, cmp_u64);
	for (int i = 1; i < lg->ntokens; i++)
		t->dup_tokens += lg->tokens[i] == lg->tokens[i - 1];
	t->wants = lg->njobs;
	t->offers = lg->ntokens;
	t->declines = lg->declines;
	t->reconnects = lg->reconnects;
	t->errors = lg->errors;
	t->unknown_dones = lg->unknown_dones;
	t->bad_receipts = lg->bad_receipts;
}

int loadgen_query_lost(struct loadgen *lg)
{
	int known = 0;
	for (int j = 0; j < lg->njobs; j++) {
		const struct job *x = &lg->jobs[j];
		struct client *c = &lg->c[x->conn];
		if (!x->sent_job || x->dones)
			continue;
		if (!c->tc)
			return -1;
		tc_send(c->tc, "{\"type\":\"QUERY\",\"job_id\":\"%d\"}", j);
		struct json_object *m;
		const char *type;
		/* a late DONE (of this job or another) is taken as one */
		while ((m = tc_expect(c->tc, NULL, 3000)) && (type = tc_str(m, "type")) &&
		       strcmp(type, "DONE") == 0) {
			on_done(lg, x->conn, m);
			json_object_put(m);
		}
		type = m ? tc_str(m, "type") : NULL;
		const char *code = m ? tc_str(m, "code") : NULL;
		if (!type || strcmp(type, "ERROR") != 0 || !code ||
		    strcmp(code, "unknown_job") != 0) {
			fprintf(stderr, "loadgen: job %d without DONE is still known: %s\n", j,
				m ? json_object_to_json_string(m) : "(no answer)");
			known++;
		}
		if (m)
			json_object_put(m);
	}
	return known;
}
