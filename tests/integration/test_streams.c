/*
 * test_streams.c - jobs with pipes and files by URL through a real daemon,
 * with the pipe server playing the client's endpoints: a 100 MiB cat round
 * trip checked by SHA-256, a failing command with small output (nothing is
 * PUT), an input answering 404, an output upload, and an in-pipe that
 * drops mid-stream.
 */
#include "autoconfig.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "harness.h"
#include "pipe_server.h"
#include "proto.h"
#include "suite.h"

static struct es_daemon D;
static struct pipe_server P;

static void start(void)
{
	CU_ASSERT_FATAL(
		harness_start(&D, 2,
			      harness_tools_body("jobRemovalPolicy: all\n", 2, "cat sh", NULL),
			      NULL) == 0);
	CU_ASSERT_FATAL(pipe_server_start(&P) > 0);
}

static void stop(void)
{
	pipe_server_stop(&P);
	CU_ASSERT(harness_stop_clean(&D) == 0);
}

static const char *error_code(struct json_object *done)
{
	struct json_object *e;
	if (!json_object_object_get_ex(tc_receipt(done), "error", &e))
		return NULL;
	return tc_str(e, "code");
}

/* 1 when a connection to the port (*arg) is established: an upload or
 * fetch under way. */
static int upload_open(void *arg)
{
	return harness_tcp_connected(*(int *)arg) > 0;
}

static void test_cat_round_trip_100mib(void)
{
	const uint64_t size = 100ull << 20, seed = 42;
	struct pipe_endpoint in = PIPE_ENDPOINT_INIT, out = PIPE_ENDPOINT_INIT;
	char in_url[256], out_url[256], job[700], want[65];
	struct pipe_result r;

	start();
	in.seed = seed;
	in.size = size;
	CU_ASSERT_FATAL(pipe_server_in(&P, "in", &in, in_url, sizeof in_url) == 0);
	CU_ASSERT_FATAL(pipe_server_out(&P, "out", &out, out_url, sizeof out_url) == 0);
	struct tclient *c = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	snprintf(job, sizeof job, "{\"command\":\"cat\",\"stdin\":\"%s\",\"stdout\":\"%s\"}",
		 in_url, out_url);
	long long t0 = harness_now_ms();
	struct json_object *d = tc_run_job(c, "big", "tools", job, 120000);
	long long ms = harness_now_ms() - t0;
	CU_ASSERT_FATAL(d != NULL);
	CU_ASSERT_EQUAL(tc_int(tc_receipt(d), "exit_code"), 0);
	CU_ASSERT(error_code(d) == NULL);
	/* streamed stdout is not repeated in the receipt */
	CU_ASSERT(tc_str(tc_receipt(d), "stdout") == NULL);
	json_object_put(d);
	CU_ASSERT_FATAL(pipe_server_result(&P, "out", &r) == 0);
	pipe_random_sha256(seed, size, want);
	CU_ASSERT_EQUAL(r.length, size);
	CU_ASSERT_STRING_EQUAL(r.sha256, want);
	CU_ASSERT(r.chunked);
	CU_ASSERT_EQUAL(r.requests, 1);
	CU_ASSERT_FATAL(pipe_server_result(&P, "in", &r) == 0);
	CU_ASSERT_EQUAL(r.requests, 1);
	fprintf(stderr,
		"  100 MiB stdin -> cat -> stdout through the pipes: %lld ms (%.0f MiB/s)\n", ms,
		100.0 * 1000.0 / (double)(ms ? ms : 1));
	tc_close(c);
	stop();
}

static void test_small_failure_puts_nothing(void)
{
	struct pipe_endpoint out = PIPE_ENDPOINT_INIT;
	char out_url[256], job[600];
	struct pipe_result r;

	start();
	CU_ASSERT_FATAL(pipe_server_out(&P, "o", &out, out_url, sizeof out_url) == 0);
	struct tclient *c = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	snprintf(job, sizeof job,
		 "{\"command\":\"sh\",\"args\":[\"-c\",\"echo partial; echo "
		 "'convert: no such format' >&2; exit 2\"],\"stdout\":\"%s\"}",
		 out_url);
	struct json_object *d = tc_run_job(c, "f", "tools", job, 10000);
	CU_ASSERT_FATAL(d != NULL);
	CU_ASSERT_EQUAL(tc_int(tc_receipt(d), "exit_code"), 2);
	CU_ASSERT_STRING_EQUAL(tc_str(tc_receipt(d), "stdout"), "partial\n");
	CU_ASSERT_STRING_EQUAL(tc_str(tc_receipt(d), "stderr"), "convert: no such format");
	json_object_put(d);
	/* the out-pipe was never used: no empty "success" */
	CU_ASSERT(pipe_server_result(&P, "o", &r) != 0 || r.requests == 0);

	/* the same with success: the small output is PUT, with its length */
	snprintf(job, sizeof job,
		 "{\"command\":\"sh\",\"args\":[\"-c\",\"echo fine\"],"
		 "\"stdout\":\"%s\"}",
		 out_url);
	d = tc_run_job(c, "s", "tools", job, 10000);
	CU_ASSERT(d && tc_int(tc_receipt(d), "exit_code") == 0);
	if (d)
		json_object_put(d);
	CU_ASSERT_FATAL(pipe_server_result(&P, "o", &r) == 0);
	CU_ASSERT_EQUAL(r.requests, 1);
	CU_ASSERT_EQUAL(r.length, 5);
	CU_ASSERT_EQUAL(r.content_length, 5);
	tc_close(c);
	stop();
}

static void test_inputs_and_outputs(void)
{
	struct pipe_endpoint in = PIPE_ENDPOINT_INIT, out = PIPE_ENDPOINT_INIT;
	char in_url[256], out_url[256], job[900];
	struct pipe_result r;

	start();
	in.seed = 7;
	in.size = 12345;
	CU_ASSERT_FATAL(pipe_server_in(&P, "a.bin", &in, in_url, sizeof in_url) == 0);
	CU_ASSERT_FATAL(pipe_server_out(&P, "res", &out, out_url, sizeof out_url) == 0);
	struct tclient *c = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	/* the input is in the job directory before start; the output goes up after */
	snprintf(job, sizeof job,
		 "{\"command\":\"sh\",\"args\":[\"-c\",\"cat a.bin a.bin > r.out\"],"
		 "\"inputs\":[{\"name\":\"a.bin\",\"url\":\"%s\"}],"
		 "\"outputs\":[{\"name\":\"r.out\",\"url\":\"%s\"}]}",
		 in_url, out_url);
	struct json_object *d = tc_run_job(c, "io", "tools", job, 10000);
	CU_ASSERT_FATAL(d != NULL);
	CU_ASSERT_EQUAL(tc_int(tc_receipt(d), "exit_code"), 0);
	CU_ASSERT(error_code(d) == NULL);
	json_object_put(d);
	CU_ASSERT_FATAL(pipe_server_result(&P, "res", &r) == 0);
	CU_ASSERT_EQUAL(r.length, 2 * 12345);

	/* an input answering 404: the program never runs */
	snprintf(job, sizeof job,
		 "{\"command\":\"sh\",\"args\":[\"-c\",\"echo ran\"],"
		 "\"inputs\":[{\"name\":\"x\",\"url\":\"http://127.0.0.1:%d/in/missing\"}]}",
		 P.port);
	d = tc_run_job(c, "miss", "tools", job, 10000);
	CU_ASSERT_FATAL(d != NULL);
	CU_ASSERT_STRING_EQUAL(error_code(d), "input_failed");
	CU_ASSERT(tc_int(tc_receipt(d), "exit_code") == -1);
	json_object_put(d);

	/* an output the program did not write */
	snprintf(job, sizeof job,
		 "{\"command\":\"sh\",\"args\":[\"-c\",\"true\"],"
		 "\"outputs\":[{\"name\":\"nothing\",\"url\":\"%s\"}]}",
		 out_url);
	d = tc_run_job(c, "nout", "tools", job, 10000);
	CU_ASSERT_FATAL(d != NULL);
	CU_ASSERT_STRING_EQUAL(error_code(d), "output_failed");
	json_object_put(d);
	tc_close(c);
	stop();
}

static void test_in_pipe_drops_mid_stream(void)
{
	struct pipe_endpoint in = PIPE_ENDPOINT_INIT, out = PIPE_ENDPOINT_INIT;
	char in_url[256], out_url[256], job[700];
	struct pipe_result r;

	start();
	in.seed = 3;
	in.size = 10 << 20;
	in.drop_after = 1 << 20; /* the client went away after 1 MiB */
	CU_ASSERT_FATAL(pipe_server_in(&P, "in", &in, in_url, sizeof in_url) == 0);
	CU_ASSERT_FATAL(pipe_server_out(&P, "out", &out, out_url, sizeof out_url) == 0);
	struct tclient *c = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	snprintf(job, sizeof job, "{\"command\":\"cat\",\"stdin\":\"%s\",\"stdout\":\"%s\"}",
		 in_url, out_url);
	struct json_object *d = tc_run_job(c, "drop", "tools", job, 20000);
	CU_ASSERT_FATAL(d != NULL);
	CU_ASSERT_STRING_EQUAL(error_code(d), "stdin_failed");
	json_object_put(d);
	/* and the consumer never got a complete body */
	CU_ASSERT(pipe_server_result(&P, "out", &r) != 0 || r.length < (10u << 20));
	tc_close(c);
	stop();
}

static void test_slow_consumer_gets_everything(void)
{
	struct pipe_endpoint out = PIPE_ENDPOINT_INIT;
	char out_url[256], job[600];
	struct pipe_result r;

	start();
	out.rate = 30000; /* 60 000 bytes take 2 s: longer than the linger */
	CU_ASSERT_FATAL(pipe_server_out(&P, "slow", &out, out_url, sizeof out_url) == 0);
	struct tclient *c = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	snprintf(job, sizeof job,
		 "{\"command\":\"sh\",\"args\":[\"-c\",\"head -c 60000 /dev/zero\"],"
		 "\"stdout\":\"%s\"}",
		 out_url);
	struct json_object *d = tc_run_job(c, "slow", "tools", job, 20000);
	CU_ASSERT_FATAL(d != NULL);
	CU_ASSERT_EQUAL(tc_int(tc_receipt(d), "exit_code"), 0);
	CU_ASSERT(error_code(d) == NULL);
	json_object_put(d);
	/* the program's whole output arrived, not what was read before a cut */
	CU_ASSERT_FATAL(pipe_server_result(&P, "slow", &r) == 0);
	CU_ASSERT_EQUAL(r.length, 60000);
	tc_close(c);
	stop();
}

static void test_stream_failures_and_deadlines(void)
{
	struct pipe_endpoint out = PIPE_ENDPOINT_INIT, in = PIPE_ENDPOINT_INIT;
	char out_url[256], in_url[256], job[1200], name[300];
	struct json_object *d;

	start();
	struct tclient *c = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	/* the out-pipe cannot be reached while the program writes endlessly:
	 * the program is stopped, and the receipt says why */
	(void)out;
	snprintf(job, sizeof job,
		 "{\"command\":\"sh\",\"args\":[\"-c\",\"yes\"],"
		 "\"stdout\":\"http://127.0.0.1:1/out\"}");
	d = tc_run_job(c, "o500", "tools", job, 10000);
	CU_ASSERT_FATAL(d != NULL);
	CU_ASSERT_STRING_EQUAL(error_code(d), "stdout_failed");
	json_object_put(d);

	/* timeout_sec counts while inputs trickle in */
	in.seed = 1;
	in.size = 100000;
	in.rate = 200;
	CU_ASSERT_FATAL(pipe_server_in(&P, "trickle", &in, in_url, sizeof in_url) == 0);
	snprintf(job, sizeof job,
		 "{\"command\":\"sh\",\"args\":[\"-c\",\"true\"],\"timeout_sec\":1,"
		 "\"inputs\":[{\"name\":\"t\",\"url\":\"%s\"}]}",
		 in_url);
	long long t0 = harness_now_ms();
	d = tc_run_job(c, "tmo", "tools", job, 10000);
	CU_ASSERT_FATAL(d != NULL);
	CU_ASSERT_STRING_EQUAL(error_code(d), "timeout");
	CU_ASSERT(harness_now_ms() - t0 < 4000);
	json_object_put(d);

	/* CANCEL while the output of an ended program is still uploading */
	struct pipe_endpoint slow = PIPE_ENDPOINT_INIT;
	slow.rate = 100000;
	CU_ASSERT_FATAL(pipe_server_out(&P, "up", &slow, out_url, sizeof out_url) == 0);
	snprintf(job, sizeof job,
		 "{\"command\":\"sh\",\"args\":[\"-c\",\"head -c 3000000 /dev/zero > f\"],"
		 "\"outputs\":[{\"name\":\"f\",\"url\":\"%s\"}]}",
		 out_url);
	const char *token = tc_want_offer(c, "up", "tools", 0, 3000);
	CU_ASSERT_FATAL(token != NULL);
	tc_send(c, "{\"type\":\"JOB\",\"job_id\":\"up\",\"token\":\"%s\",\"job\":%s}", token, job);
	/* the program has ended and the upload is under way: connected to
	 * the slow endpoint (3 MB at 100 kB/s: 30 s to go) */
	int up_port = 0;
	CU_ASSERT_FATAL(sscanf(out_url, "http://127.0.0.1:%d/", &up_port) == 1);
	CU_ASSERT_FATAL(harness_wait_until(upload_open, &up_port, 10000) == 0);
	t0 = harness_now_ms();
	tc_send(c, "{\"type\":\"CANCEL\",\"job_id\":\"up\"}");
	d = tc_expect(c, "DONE", 5000);
	CU_ASSERT_FATAL(d != NULL);
	CU_ASSERT_STRING_EQUAL(error_code(d), "cancelled");
	CU_ASSERT(harness_now_ms() - t0 < 1000);
	json_object_put(d);

	/* a long non-ASCII input name in an error message stays valid UTF-8 */
	char *p = name;
	for (int i = 0; i < 85; i++) {
		memcpy(p, "\xe2\x82\xac", 3); /* U+20AC */
		p += 3;
	}
	*p = '\0';
	snprintf(job, sizeof job,
		 "{\"command\":\"sh\",\"args\":[\"-c\",\"true\"],"
		 "\"inputs\":[{\"name\":\"%s\",\"url\":\"http://127.0.0.1:%d/in/none\"}]}",
		 name, P.port);
	d = tc_run_job(c, "utf", "tools", job, 5000);
	CU_ASSERT_FATAL(d != NULL);
	CU_ASSERT_STRING_EQUAL(error_code(d), "input_failed");
	json_object_put(d);
	tc_close(c);
	stop();
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "100 MiB cat round trip through the pipes", test_cat_round_trip_100mib },
		{ "a failure with small output PUTs nothing", test_small_failure_puts_nothing },
		{ "inputs and outputs by URL", test_inputs_and_outputs },
		{ "the in-pipe drops mid-stream", test_in_pipe_drops_mid_stream },
		{ "a slow consumer gets the whole output", test_slow_consumer_gets_everything },
		{ "stream failures and deadlines", test_stream_failures_and_deadlines },
		{ NULL, NULL },
	};
	return run_suite("streams", cases);
}
