/*
 * test_progress.c - progress of running jobs, end to end through the
 * daemon (docs/progress.md, docs/protocol.md PROGRESS): a script job
 * writes fractions, percentages, text and junk to EXECSERVER_PROGRESS_FD;
 * a protocol-3 client gets PROGRESS in order, coalesced to at most one
 * per 250 ms (a burst's earlier values never appear, the last value
 * before the end always does), never after DONE; a protocol-2 client of
 * the same job gets none; the job's output is unchanged; bad lines (junk,
 * a 200 kB line) are counted in /status and change nothing else; the DONE
 * does not wait for a descendant still holding fd 3, whose unfinished
 * line is no value.
 */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <CUnit/Basic.h>

#include "harness.h"
#include "proto.h"
#include "suite.h"

static struct es_daemon D;

static void start(void)
{
	CU_ASSERT_FATAL(harness_start(&D, 1, harness_tools_body(NULL, 2, "sh", NULL), NULL) == 0);
}

static void stop(void)
{
	CU_ASSERT(harness_stop_clean(&D) == 0);
}

static struct tclient *connect_v(int protocol, const char *id)
{
	char q[96];
	snprintf(q, sizeof q, "client=%s&protocol=%d", id, protocol);
	struct tclient *c = tc_connect_query(D.port, q, id);
	CU_ASSERT_FATAL(c != NULL);
	CU_ASSERT_EQUAL(tc_int(c->hello, "protocol"), protocol);
	return c;
}

/* 0.25 first; a burst (0.3, 0.35, 40%) in one write, so that no read
 * splits it; junk, a 200 kB line (3 read windows of 64 kB), 50% with text
 * (the last line of its read whatever the chunking); then 0.7 and 1.0 at
 * the very end; "out" on stdout. */
#define SCRIPT                                                                        \
	"[ \\\"$EXECSERVER_PROGRESS_FD\\\" = 3 ] || exit 9; "                         \
	"echo '0.25 first' >&3; printf '0.3\\\\n0.35\\\\n40%%\\\\n' >&3; sleep 0.5; " \
	"echo junk >&3; head -c 200000 /dev/zero | tr '\\\\0' 7 >&3; echo >&3; "      \
	"echo '50% half' >&3; sleep 1; echo 0.7 >&3; echo '1.0 done' >&3; echo out"

static const char *job_json(void)
{
	return "{\"command\":\"sh\",\"args\":[\"-c\",\"" SCRIPT "\"]}";
}

/* The `progress` of the running job job_id in /status?detail=1, or -1
 * when it has none (or is not listed). */
static double detail_progress(const char *job_id)
{
	static char body[1 << 16];
	int status = 0;
	double p = -1;
	if (wsc_http_get("127.0.0.1", D.port, "/status?detail=1", 2000, &status, body,
			 sizeof body) < 0 ||
	    status != 200)
		return -2;
	struct json_object *st = json_tokener_parse(body), *jobs, *v;
	if (st && json_object_object_get_ex(st, "jobs", &jobs))
		for (size_t i = 0; i < json_object_array_length(jobs); i++) {
			struct json_object *j = json_object_array_get_idx(jobs, i);
			if (strcmp(tc_str(j, "job_id"), job_id) == 0 &&
			    json_object_object_get_ex(j, "progress", &v))
				p = json_object_get_double(v);
		}
	json_object_put(st);
	return p;
}

static double ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void test_protocol_3_gets_progress(void)
{
	start();
	long long bad0 = harness_status_int(&D, "progress_lines", "bad", NULL);
	struct tclient *c = connect_v(3, "p3");
	CU_ASSERT_FATAL(tc_start_job(c, "j1", "tools", job_json()) == 0);
	double f[64];
	char text[64][64];
	int n = 0;
	double first_ms = 0;
	struct json_object *m, *done = NULL;
	while ((m = tc_expect(c, NULL, 10000)) != NULL) {
		const char *type = tc_str(m, "type");
		if (strcmp(type, "DONE") == 0) {
			done = m;
			break;
		}
		CU_ASSERT_STRING_EQUAL(type, "PROGRESS");
		CU_ASSERT_STRING_EQUAL(tc_str(m, "job_id"), "j1");
		struct json_object *v;
		if (n < 64 && json_object_object_get_ex(m, "fraction", &v)) {
			if (!n)
				first_ms = ms_now();
			f[n] = json_object_get_double(v);
			snprintf(text[n], sizeof text[n], "%s",
				 json_object_object_get_ex(m, "text", &v)
					 ? json_object_get_string(v)
					 : "");
			/* the console's data has it too (the next value is
			 * 1 s of the script away) */
			if (f[n] == 0.5)
				CU_ASSERT_EQUAL(detail_progress("j1"), 0.5);
			n++;
		}
		json_object_put(m);
	}
	double span_ms = ms_now() - first_ms;
	CU_ASSERT_PTR_NOT_NULL_FATAL(done);
	CU_ASSERT_EQUAL(tc_int(tc_receipt(done), "exit_code"), 0);
	CU_ASSERT_STRING_EQUAL(tc_str(tc_receipt(done), "stdout"), "out\n");
	json_object_put(done);
	/* in order, never back; the burst's earlier values coalesced away;
	 * 40% and 50% "half" there; the last one before DONE is 1.0 "done" */
	int saw40 = 0, saw50 = 0;
	for (int i = 0; i < n; i++) {
		if (i)
			CU_ASSERT(f[i] > f[i - 1]);
		CU_ASSERT(f[i] != 0.3 && f[i] != 0.35);
		saw40 |= f[i] == 0.4;
		saw50 |= f[i] == 0.5 && strcmp(text[i], "half") == 0;
	}
	CU_ASSERT(saw40);
	CU_ASSERT(saw50);
	CU_ASSERT_FATAL(n >= 3);
	CU_ASSERT_EQUAL(f[n - 1], 1.0);
	CU_ASSERT_STRING_EQUAL(text[n - 1], "done");
	/* the rate: at most one per 250 ms after the first (plus the last) */
	CU_ASSERT(n <= 2 + (int)(span_ms / 250));
	/* nothing after DONE */
	CU_ASSERT(tc_quiet(c, 400));
	tc_close(c);
	/* junk and the 200 kB line were counted, nothing else happened */
	CU_ASSERT_EQUAL(harness_status_int(&D, "progress_lines", "bad", NULL) - bad0, 2);
	stop();
}

/* A tight loop of 3000 lines: a handful of PROGRESS, the last one 100%. */
static void test_rate_limit(void)
{
	start();
	struct tclient *c = connect_v(3, "rate");
	const char *job = "{\"command\":\"sh\",\"args\":[\"-c\",\"i=0; while [ $i -lt 3000 ]; "
			  "do i=$((i+1)); echo \\\"$((i/30))% line $i\\\" >&3; done\"]}";
	double t0 = ms_now();
	CU_ASSERT_FATAL(tc_start_job(c, "r1", "tools", job) == 0);
	int n = 0;
	double last = -1, at[256];
	char last_text[64] = "";
	struct json_object *m;
	while ((m = tc_expect(c, NULL, 20000)) != NULL) {
		if (strcmp(tc_str(m, "type"), "DONE") == 0) {
			json_object_put(m);
			break;
		}
		struct json_object *v;
		if (json_object_object_get_ex(m, "fraction", &v))
			last = json_object_get_double(v);
		snprintf(last_text, sizeof last_text, "%s", tc_str(m, "text"));
		if (n < 256)
			at[n] = ms_now();
		n++;
		json_object_put(m);
	}
	double span_ms = ms_now() - t0;
	CU_ASSERT(n >= 1);
	CU_ASSERT(n <= 2 + (int)(span_ms / 250));
	/* the gap between two messages, not only their number: 250 ms apart
	 * as sent (150 ms as received: delivery jitter), except the last
	 * one, which goes out at the job's end at once */
	for (int i = 1; i < n - 1 && i < 256; i++)
		if (at[i] - at[i - 1] < 150) {
			fprintf(stderr, "PROGRESS %d came %.0f ms after the one before\n", i,
				at[i] - at[i - 1]);
			CU_FAIL("two PROGRESS closer than the interval");
		}
	CU_ASSERT_EQUAL(last, 1.0);
	CU_ASSERT_STRING_EQUAL(last_text, "line 3000");
	tc_close(c);
	stop();
}

/* A descendant keeps fd 3 open (and writes half a line) after the
 * program ended: the DONE does not wait for it, and the half line is no
 * value: the last PROGRESS is the program's own.  The descendant leaves
 * the process group (setsid), else it is killed with it at the end and
 * the EOF makes its half line a line. */
static void test_descendant_holding_fd3(void)
{
	start();
	struct tclient *c = connect_v(3, "desc");
	const char *job = "{\"command\":\"sh\",\"args\":[\"-c\",\"echo '0.5 main' >&3; "
			  "setsid sh -c 'printf 0.9; exec sleep 5' </dev/null >&3 2>/dev/null & "
			  "sleep 0.2; echo out\"]}";
	double t0 = ms_now();
	CU_ASSERT_FATAL(tc_start_job(c, "d1", "tools", job) == 0);
	char last_text[64] = "";
	double last = -1;
	struct json_object *m, *done = NULL;
	while ((m = tc_expect(c, NULL, 10000)) != NULL) {
		if (strcmp(tc_str(m, "type"), "DONE") == 0) {
			done = m;
			break;
		}
		struct json_object *v;
		if (json_object_object_get_ex(m, "fraction", &v))
			last = json_object_get_double(v);
		snprintf(last_text, sizeof last_text, "%s", tc_str(m, "text"));
		json_object_put(m);
	}
	CU_ASSERT_PTR_NOT_NULL_FATAL(done);
	/* well before the descendant's 5 s */
	CU_ASSERT(ms_now() - t0 < 3000);
	CU_ASSERT_STRING_EQUAL(tc_str(tc_receipt(done), "stdout"), "out\n");
	json_object_put(done);
	if (last != 0.5)
		fprintf(stderr, "last PROGRESS: %g \"%s\"\n", last, last_text);
	CU_ASSERT_EQUAL(last, 0.5);
	CU_ASSERT_STRING_EQUAL(last_text, "main");
	tc_close(c);
	stop();
}

/* Protocol 2 (and 1): the same job, no PROGRESS, the same DONE. */
static void test_older_protocols_see_nothing(void)
{
	start();
	for (int v = 1; v <= 2; v++) {
		struct tclient *c = connect_v(v, v == 1 ? "p1" : "p2");
		CU_ASSERT_FATAL(tc_start_job(c, "j2", "tools", job_json()) == 0);
		struct json_object *m = tc_expect(c, NULL, 10000);
		CU_ASSERT_PTR_NOT_NULL_FATAL(m);
		CU_ASSERT_STRING_EQUAL(tc_str(m, "type"), "DONE");
		CU_ASSERT_STRING_EQUAL(tc_str(tc_receipt(m), "stdout"), "out\n");
		json_object_put(m);
		if (v == 2)
			tc_send(c, "{\"type\":\"ACK\",\"job_id\":\"j2\"}");
		tc_close(c);
	}
	stop();
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "protocol 3: PROGRESS in order, coalesced, the last before DONE",
		  test_protocol_3_gets_progress },
		{ "a tight loop of progress lines: at most 4 a second", test_rate_limit },
		{ "protocols 1 and 2 see no PROGRESS", test_older_protocols_see_nothing },
		{ "the DONE does not wait for a descendant holding fd 3; its half line is no value",
		  test_descendant_holding_fd3 },
		{ NULL, NULL },
	};
	return run_suite("progress", cases);
}
