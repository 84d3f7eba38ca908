/*
 * test_guard.c - the callback guard against a real daemon (docs/security.md,
 * "Callback guard"): a job's URLs may reach the address of the broker
 * connection that placed it, and what callbackAllow names; nothing else,
 * decided on the address curl actually connects to.
 *
 * The peer is varied by binding the test client's socket to 127.0.0.2 (the
 * daemon listens on 127.0.0.1, and so does the pipe server playing the
 * client's URLs): from there the pipe server is not the peer any more.  A
 * refused URL must not even reach the server (its request count stays 0),
 * and the other clients keep working.
 */
#include "autoconfig.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "harness.h"
#include "pipe_server.h"
#include "proto.h"
#include "suite.h"

static struct es_daemon D;
static struct pipe_server P;

static void start(const char *extra)
{
	CU_ASSERT_FATAL(harness_start_default(&D, 1, 2, extra, NULL) == 0);
	CU_ASSERT_FATAL(pipe_server_start(&P) > 0);
}

static void stop(void)
{
	CU_ASSERT(harness_finish(&D, 0) == 0);
	pipe_server_stop(&P);
}

/* A broker client whose socket is bound to src (so that the daemon sees
 * src as the peer).  The upgrade is spoken by hand, byte by byte up to the
 * end of the head, so no frame byte is read past it. */
static struct tclient *connect_from(const char *src, const char *client_id)
{
	struct sockaddr_in sa = { .sin_family = AF_INET }, to = { .sin_family = AF_INET };
	char req[512], head[1024];
	size_t n = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return NULL;
	inet_pton(AF_INET, src, &sa.sin_addr);
	inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
	to.sin_port = htons((uint16_t)D.port);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
	    connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
		close(fd);
		return NULL;
	}
	snprintf(req, sizeof req,
		 "GET /broker?client=%s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
		 "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
		 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
		 client_id);
	if (write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
		close(fd);
		return NULL;
	}
	while (n < sizeof head - 1 && (n < 4 || memcmp(head + n - 4, "\r\n\r\n", 4) != 0)) {
		if (read(fd, head + n, 1) != 1) {
			close(fd);
			return NULL;
		}
		n++;
	}
	head[n] = '\0';
	if (strncmp(head, "HTTP/1.1 101", 12) != 0) {
		close(fd);
		return NULL;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	struct tclient *c = calloc(1, sizeof *c);
	c->ws = wsc_from_fd(fd);
	snprintf(c->name, sizeof c->name, "%s", client_id);
	struct json_object *h = tc_expect(c, "HELLO", 5000);
	if (!h) {
		tc_close(c);
		return NULL;
	}
	json_object_put(h);
	return c;
}

/* Registers GET /in/<name> serving `size` bytes; url gets its URL. */
static void serve(const char *name, char *url, size_t len)
{
	struct pipe_endpoint in = PIPE_ENDPOINT_INIT;
	in.seed = 7;
	in.size = 5;
	CU_ASSERT_FATAL(pipe_server_in(&P, name, &in, url, len) == 0);
}

static unsigned requests(const char *name)
{
	struct pipe_result r;
	return pipe_server_result(&P, name, &r) == 0 ? r.requests : 999;
}

/* Runs `cat in` with the input fetched from url; returns the DONE. */
static struct json_object *fetch_job(struct tclient *c, const char *job_id, const char *url)
{
	char job[1024];
	snprintf(job, sizeof job,
		 "{\"command\":\"cat\",\"args\":[\"in\"],\"inputs\":"
		 "[{\"name\":\"in\",\"url\":\"%s\"}]}",
		 url);
	return tc_run_job(c, job_id, "cat", job, 10000);
}

static int ran_ok(struct json_object *done)
{
	struct json_object *e;
	return done && tc_int(tc_receipt(done), "exit_code") == 0 &&
	       !json_object_object_get_ex(tc_receipt(done), "error", &e);
}

/* The receipt error code of a DONE, or "" (static). */
static const char *error_code(struct json_object *done, int *retryable, const char **message)
{
	struct json_object *e, *r;
	if (!done || !json_object_object_get_ex(tc_receipt(done), "error", &e))
		return "";
	if (retryable)
		*retryable = json_object_object_get_ex(e, "retryable", &r) &&
			     json_object_get_boolean(r);
	if (message)
		*message = tc_str(e, "message");
	return tc_str(e, "code");
}

static void test_peer_only(void)
{
	char url[256], local_url[256], job[1024];
	start("");
	/* from the pipe server's own address: allowed */
	struct tclient *near = tc_connect(D.port, "near");
	CU_ASSERT_FATAL(near != NULL);
	serve("a", url, sizeof url);
	struct json_object *d = fetch_job(near, "j1", url);
	CU_ASSERT(ran_ok(d));
	if (d)
		json_object_put(d);
	CU_ASSERT_EQUAL(requests("a"), 1);

	/* from 127.0.0.2: the same server is not the peer; input refused
	 * before any connection (even one left over from the job above) */
	struct tclient *far = connect_from("127.0.0.2", "far");
	CU_ASSERT_FATAL(far != NULL);
	serve("b", url, sizeof url);
	int retryable = -1;
	const char *msg = NULL;
	d = fetch_job(far, "j2", url);
	CU_ASSERT_STRING_EQUAL(error_code(d, &retryable, &msg), "callback_refused");
	CU_ASSERT_EQUAL(retryable, 0);
	CU_ASSERT(msg && strstr(msg, "inputs[0] (in)") && strstr(msg, "127.0.0.1") &&
		  strstr(msg, "callbackAllow"));
	if (d)
		json_object_put(d);
	CU_ASSERT_EQUAL(requests("b"), 0);

	/* stdin and stdout URLs alike */
	serve("c", url, sizeof url);
	snprintf(job, sizeof job, "{\"command\":\"cat\",\"stdin\":\"%s\"}", url);
	d = tc_run_job(far, "j3", "cat", job, 10000);
	CU_ASSERT_STRING_EQUAL(error_code(d, NULL, &msg), "callback_refused");
	CU_ASSERT(msg && strncmp(msg, "stdin:", 6) == 0);
	if (d)
		json_object_put(d);
	CU_ASSERT_EQUAL(requests("c"), 0);
	struct pipe_endpoint out = PIPE_ENDPOINT_INIT;
	CU_ASSERT_FATAL(pipe_server_out(&P, "o", &out, local_url, sizeof local_url) == 0);
	snprintf(job, sizeof job, "{\"command\":\"echo\",\"args\":[\"hi\"],\"stdout\":\"%s\"}",
		 local_url);
	d = tc_run_job(far, "j4", "cat", job, 10000);
	CU_ASSERT_STRING_EQUAL(error_code(d, NULL, &msg), "callback_refused");
	CU_ASSERT(msg && strncmp(msg, "stdout:", 7) == 0);
	if (d)
		json_object_put(d);
	CU_ASSERT_EQUAL(requests("o"), 0);

	/* a host name is judged by what it resolves to: localhost is
	 * 127.0.0.1 (or ::1), neither of them 127.0.0.2 */
	serve("d", url, sizeof url);
	snprintf(local_url, sizeof local_url, "http://localhost%s", strchr(url + 7, ':'));
	d = fetch_job(far, "j5", local_url);
	CU_ASSERT_STRING_EQUAL(error_code(d, NULL, NULL), "callback_refused");
	if (d)
		json_object_put(d);
	CU_ASSERT_EQUAL(requests("d"), 0);

	/* the refusals cost nothing else: both clients still work */
	serve("e", url, sizeof url);
	d = fetch_job(near, "j6", url);
	CU_ASSERT(ran_ok(d));
	if (d)
		json_object_put(d);
	d = tc_run_job(far, "j7", "cat", "{\"command\":\"true\"}", 5000);
	CU_ASSERT(ran_ok(d));
	if (d)
		json_object_put(d);
	CU_ASSERT(harness_log_contains(&D, "refused: not the client's address"));
	tc_close(near);
	tc_close(far);
	stop();
}

static void test_allowlist(void)
{
	char url[256], named[256];
	start("callbackAllow:\n  - 127.0.0.0/31\n  - localhost\n");
	struct tclient *far = connect_from("127.0.0.2", "far");
	CU_ASSERT_FATAL(far != NULL);
	/* 127.0.0.1 lies in 127.0.0.0/31 */
	serve("a", url, sizeof url);
	struct json_object *d = fetch_job(far, "j1", url);
	CU_ASSERT(ran_ok(d));
	if (d)
		json_object_put(d);
	/* a listed host name */
	serve("b", url, sizeof url);
	snprintf(named, sizeof named, "http://localhost%s", strchr(url + 7, ':'));
	d = fetch_job(far, "j2", named);
	CU_ASSERT(ran_ok(d));
	if (d)
		json_object_put(d);
	CU_ASSERT_EQUAL(requests("b"), 1);
	tc_close(far);
	stop();

	/* a /32 next door does not cover it */
	start("callbackAllow: [127.0.0.3/32, \"::1\"]\n");
	far = connect_from("127.0.0.2", "far");
	CU_ASSERT_FATAL(far != NULL);
	serve("c", url, sizeof url);
	d = fetch_job(far, "j3", url);
	CU_ASSERT_STRING_EQUAL(error_code(d, NULL, NULL), "callback_refused");
	if (d)
		json_object_put(d);
	CU_ASSERT_EQUAL(requests("c"), 0);
	tc_close(far);
	stop();
}

static void test_schemes_and_redirects(void)
{
	char url[256], target[128];
	start("");
	struct tclient *c = tc_connect(D.port, "s");
	CU_ASSERT_FATAL(c != NULL);
	/* file:// and ftp:// are refused when the JOB comes, and the offer is
	 * withdrawn */
	static const char *const urls[] = { "file:///etc/passwd", "ftp://127.0.0.1/x",
					    "gopher://127.0.0.1/", "dict://127.0.0.1:11211/" };
	for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
		char id[8], job[256];
		snprintf(id, sizeof id, "f%zu", i);
		const char *tok = tc_want_offer(c, id, "cat", 0, 3000);
		CU_ASSERT_FATAL(tok != NULL);
		snprintf(job, sizeof job,
			 "{\"command\":\"cat\",\"inputs\":[{\"name\":\"x\","
			 "\"url\":\"%s\"}]}",
			 urls[i]);
		tc_send(c, "{\"type\":\"JOB\",\"job_id\":\"%s\",\"token\":\"%s\",\"job\":%s}", id,
			tok, job);
		struct json_object *e = tc_expect(c, "ERROR", 3000);
		CU_ASSERT(e && strcmp(tc_str(e, "code"), "bad_job") == 0 &&
			  strstr(tc_str(e, "message"), "http or https") != NULL);
		if (e)
			json_object_put(e);
	}
	/* a redirect to a host that is not allowed: never followed, nothing
	 * reaches the target */
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof sa;
	inet_pton(AF_INET, "127.0.0.2", &sa.sin_addr);
	CU_ASSERT_FATAL(bind(lfd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(lfd, 4) == 0);
	getsockname(lfd, (struct sockaddr *)&sa, &sl);
	snprintf(target, sizeof target, "http://127.0.0.2:%d/secret", ntohs(sa.sin_port));
	struct pipe_endpoint in = PIPE_ENDPOINT_INIT;
	in.status = 302;
	in.location = target;
	CU_ASSERT_FATAL(pipe_server_in(&P, "r", &in, url, sizeof url) == 0);
	const char *msg = NULL;
	struct json_object *d = fetch_job(c, "r1", url);
	CU_ASSERT_STRING_EQUAL(error_code(d, NULL, &msg), "input_failed");
	CU_ASSERT(msg && strstr(msg, "302") && strstr(msg, "redirects are not followed"));
	if (d)
		json_object_put(d);
	CU_ASSERT_EQUAL(requests("r"), 1);
	int got = accept(lfd, NULL, NULL);
	CU_ASSERT(got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
	if (got >= 0)
		close(got);
	close(lfd);
	/* and the connection goes on */
	d = tc_run_job(c, "ok", "cat", "{\"command\":\"true\"}", 5000);
	CU_ASSERT(ran_ok(d));
	if (d)
		json_object_put(d);
	tc_close(c);
	stop();
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "the peer only, by address", test_peer_only },
		{ "callbackAllow: CIDR, host name, /32", test_allowlist },
		{ "other schemes and redirects", test_schemes_and_redirects },
		{ NULL, NULL },
	};
	return run_suite("guard", cases);
}
