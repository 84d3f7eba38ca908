/*
 * test_proxy.c - the real client address behind a balancer (docs/balancers.md),
 * in the test bed (bed.h): the client on host a, haproxy on host b, the
 * execserver on host c; the job's stdin and stdout are URLs of a pipe
 * server on a, at a's address, as a client library makes them.
 *
 *  - without trustedProxies the guard sees b as the client and refuses
 *    a's URLs, and the receipt names both ways out (trustedProxies,
 *    callbackAllow): the failure a new user meets first;
 *  - with trustedProxies: [b] and haproxy's send-proxy or send-proxy-v2,
 *    the job reaches a's URLs and the log names a as the client;
 *  - a trusted proxy's connection without a header is refused, a header
 *    from an address that is not trusted is refused (400, naming
 *    trustedProxies), a header that does not come in time or is too long
 *    ends the connection, and a direct client keeps working beside it.
 *
 * As root only (bed.h); otherwise one line says how many tests it left out.
 */
#include "autoconfig.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "balancer.h"
#include "bed.h"
#include "harness.h"
#include "pipe_server.h"
#include "proto.h"
#include "suite.h"
#include "testca.h"
#include "wsclient.h"

static struct bed B;
#define A (&B.host[0])
#define LB (&B.host[1])
#define C (&B.host[2])

static struct es_daemon D;
static struct es_balancer L;
static struct pipe_server P;

/* The execserver on c (trusting b when trust; with TLS when cert, key are
 * given, signed by ca), haproxy on b in front of it with server_opts, and a
 * pipe server on a. */
static void start_tls(int trust, const char *server_opts, const char *cert, const char *key,
		      const char *ca)
{
	char body[4096], tls[512] = "";
	if (cert)
		snprintf(tls, sizeof tls, "tls:\n  cert: %s\n  key: %s\n", cert, key);
	snprintf(body, sizeof body, "handshakeTimeoutSec: 2\n%s%s%s%s%s",
		 trust ? "trustedProxies:\n  - " : "", trust ? LB->addr : "", trust ? "\n" : "",
		 tls, harness_default_body(2));
	CU_ASSERT_FATAL(harness_start_at(&D, C->netns, C->addr, 1, body, NULL, ca) == 0);
	struct balancer_spec spec = { .netns = LB->netns,
				      .bind_addr = LB->addr,
				      .n = 1,
				      .addr = { C->addr },
				      .port = { D.port },
				      .server_opts = server_opts };
	CU_ASSERT_FATAL(balancer_start_at(&L, &spec) == 0);
	CU_ASSERT_FATAL(pipe_server_start_at(&P, A->netns, A->addr) > 0);
}

static void start(int trust, const char *server_opts)
{
	start_tls(trust, server_opts, NULL, NULL, NULL);
}

static void stop(void)
{
	balancer_stop(&L, 5000);
	balancer_cleanup(&L);
	pipe_server_stop(&P);
	CU_ASSERT(harness_stop_clean(&D) == 0);
}

/* A client on a, through the balancer. */
static struct tclient *via_balancer(const char *id)
{
	CU_ASSERT_FATAL(bed_enter(A) == 0);
	struct tclient *c = tc_connect_at(LB->addr, L.port, id, 5000);
	bed_leave();
	return c;
}

/* A cat job whose stdin and stdout are a's URLs; returns its DONE. */
static struct json_object *cat_job(struct tclient *c, const char *name)
{
	char in[256], out[256], job[700], oname[64];
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	e.seed = 7;
	e.size = 100000;
	snprintf(oname, sizeof oname, "%s-out", name);
	CU_ASSERT_FATAL(pipe_server_in(&P, name, &e, in, sizeof in) == 0);
	CU_ASSERT_FATAL(pipe_server_out(&P, oname, NULL, out, sizeof out) == 0);
	snprintf(job, sizeof job, "{\"command\":\"cat\",\"stdin\":\"%s\",\"stdout\":\"%s\"}", in,
		 out);
	return tc_run_job(c, name, "cat", job, 20000);
}

static const char *error_field(struct json_object *done, const char *field)
{
	struct json_object *e;
	if (!done || !json_object_object_get_ex(tc_receipt(done), "error", &e))
		return "";
	return tc_str(e, field);
}

/* The stdout of job name arrived whole, from c. */
static void check_streamed(const char *name)
{
	struct pipe_result r;
	char oname[64], sha[65];
	snprintf(oname, sizeof oname, "%s-out", name);
	pipe_random_sha256(7, 100000, sha);
	CU_ASSERT_FATAL(pipe_server_result(&P, oname, &r) == 0);
	CU_ASSERT_EQUAL(r.length, 100000);
	CU_ASSERT_STRING_EQUAL(r.sha256, sha);
	CU_ASSERT_STRING_EQUAL(r.peer, C->addr);
}

static int requests(const char *name)
{
	struct pipe_result r;
	return pipe_server_result(&P, name, &r) == 0 ? (int)r.requests : -1;
}

/* Without trustedProxies the balancer is the client: a's URLs are refused
 * and the message says what to do about it. */
static void test_guard_names_ways_out(void)
{
	start(0, "");
	struct tclient *c = via_balancer("a1");
	CU_ASSERT_FATAL(c != NULL);
	struct json_object *done = cat_job(c, "j1");
	CU_ASSERT_STRING_EQUAL(error_field(done, "code"), "callback_refused");
	const char *msg = error_field(done, "message");
	CU_ASSERT(strstr(msg, A->addr) && strstr(msg, "trustedProxies") &&
		  strstr(msg, "callbackAllow") && strstr(msg, "PROXY protocol"));
	json_object_put(done);
	CU_ASSERT_EQUAL(requests("j1"), 0);
	/* the log names the address the guard took for the client's: b's */
	char seen[64];
	snprintf(seen, sizeof seen, "not the client's address (%s;", LB->addr);
	CU_ASSERT(harness_log_contains(&D, seen));
	tc_close(c);
	stop();
}

static void proxied_job(const char *opts, int version)
{
	start(1, opts);
	struct tclient *c = via_balancer("a1");
	CU_ASSERT_FATAL(c != NULL);
	struct json_object *done = cat_job(c, "j1");
	CU_ASSERT_FATAL(done != NULL);
	CU_ASSERT_EQUAL(tc_int(tc_receipt(done), "exit_code"), 0);
	CU_ASSERT_STRING_EQUAL(error_field(done, "code"), "");
	json_object_put(done);
	check_streamed("j1");
	char line[96];
	snprintf(line, sizeof line, "PROXY v%d header: client %s:", version, A->addr);
	CU_ASSERT(harness_log_contains(&D, line));
	tc_close(c);
	stop();
}

/* haproxy's send-proxy: the job reaches a's URLs through the guard. */
static void test_send_proxy_v1(void)
{
	proxied_job("send-proxy", 1);
}

static void test_send_proxy_v2(void)
{
	proxied_job("send-proxy-v2", 2);
}

/* Bytes to c's listener from host h (the first `split` of them in a
 * segment of their own, 200 ms before the rest, when split > 0); the
 * answer (up to cap - 1 bytes, until the server closes or wait_ms pass)
 * into out; returns its length, or -1 when the connection could not be
 * made.  *closed: the server ended the connection. */
static int raw_exchange(const struct bed_host *h, const void *bytes, size_t len, size_t split,
			int wait_ms, char *out, size_t cap, int *closed)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)D.port) };
	inet_pton(AF_INET, C->addr, &sa.sin_addr);
	CU_ASSERT_FATAL(bed_enter(h) == 0);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bed_leave();
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (split > 0 && split < len) {
		if (send(fd, bytes, split, MSG_NOSIGNAL) != (ssize_t)split) {
			close(fd);
			return -1;
		}
		/* sleep: the two parts must arrive in separate reads */
		harness_sleep_ms(200);
		bytes = (const char *)bytes + split;
		len -= split;
	}
	if (len && send(fd, bytes, len, MSG_NOSIGNAL) != (ssize_t)len) {
		close(fd);
		return -1;
	}
	size_t got = 0;
	*closed = 0;
	long long end = harness_now_ms() + wait_ms;
	while (got + 1 < cap) {
		long long left = end - harness_now_ms();
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		ssize_t r = recv(fd, out + got, cap - 1 - got, 0);
		if (r <= 0) {
			*closed = 1;
			break;
		}
		got += (size_t)r;
	}
	out[got] = '\0';
	close(fd);
	return (int)got;
}

/* A trusted proxy that sends no header is refused; so is one whose header
 * does not come within handshakeTimeoutSec, or is longer than allowed.  A
 * client that connects directly is served all the while. */
static void test_trusted_needs_header(void)
{
	char out[1024];
	int closed;
	start(1, "");
	CU_ASSERT(via_balancer("a1") == NULL);
	CU_ASSERT(harness_log_contains(&D, "connection from a trusted proxy refused: not a PROXY "
					   "protocol header"));

	/* from b itself: a partial header, then nothing: closed at the
	 * deadline (2 s), not before */
	long long t0 = harness_now_ms();
	CU_ASSERT(raw_exchange(LB, "PROXY TCP4 10.", 14, 0, 6000, out, sizeof out, &closed) == 0);
	long long waited = harness_now_ms() - t0;
	CU_ASSERT(closed);
	CU_ASSERT(waited >= 1800 && waited < 5000);
	CU_ASSERT(harness_log_contains(&D, "no complete PROXY header within 2 s"));
	/* a version 2 header announcing more than 1024 bytes: closed at once */
	static const unsigned char big[16] = { 0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51,
					       0x55, 0x49, 0x54, 0x0a, 0x21, 0x11, 0x08, 0x00 };
	t0 = harness_now_ms();
	CU_ASSERT(raw_exchange(LB, big, sizeof big, 0, 6000, out, sizeof out, &closed) == 0);
	CU_ASSERT(closed && harness_now_ms() - t0 < 1500);
	CU_ASSERT(harness_log_contains(&D, "longer than 1024 bytes"));

	/* a direct client (a is not a proxy) is unaffected */
	CU_ASSERT_FATAL(bed_enter(A) == 0);
	struct tclient *c = tc_connect_at(C->addr, D.port, "direct", 5000);
	bed_leave();
	CU_ASSERT_FATAL(c != NULL);
	struct json_object *done = cat_job(c, "j2");
	CU_ASSERT(done && tc_int(tc_receipt(done), "exit_code") == 0);
	json_object_put(done);
	check_streamed("j2");
	tc_close(c);
	stop();
}

/* A header from an address that is not trusted is refused with a 400
 * that names trustedProxies: nobody claims another client's address. */
static void test_untrusted_header_refused(void)
{
	char out[1024];
	int closed;
	start(1, "send-proxy");
	static const char v1[] = "PROXY TCP4 10.9.9.9 10.250.0.13 1234 80\r\n"
				 "GET /status HTTP/1.1\r\nHost: x\r\n\r\n";
	CU_ASSERT(raw_exchange(A, v1, strlen(v1), 0, 3000, out, sizeof out, &closed) > 0);
	CU_ASSERT(strncmp(out, "HTTP/1.1 400 ", 13) == 0);
	CU_ASSERT(strstr(out, "trustedProxies") != NULL);
	static const unsigned char v2[28] = { 0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a,
					      0x51, 0x55, 0x49, 0x54, 0x0a, 0x21, 0x11,
					      0x00, 0x0c, 10,   9,    9,    9,    10,
					      250,  0,    13,   4,    210,  0,    80 };
	CU_ASSERT(raw_exchange(A, v2, sizeof v2, 0, 3000, out, sizeof out, &closed) > 0);
	CU_ASSERT(strncmp(out, "HTTP/1.1 400 ", 13) == 0);
	CU_ASSERT(strstr(out, "trustedProxies") != NULL);
	CU_ASSERT(harness_log_count(&D, "PROXY protocol header refused: the address is not in "
					"trustedProxies") == 2);
	/* the same with the header's first bytes in a segment of their own:
	 * still told apart from a request, not fed to the HTTP parser */
	CU_ASSERT(raw_exchange(A, v1, strlen(v1), 3, 3000, out, sizeof out, &closed) > 0);
	CU_ASSERT(strncmp(out, "HTTP/1.1 400 ", 13) == 0);
	CU_ASSERT(strstr(out, "trustedProxies") != NULL);
	CU_ASSERT(raw_exchange(A, v2, sizeof v2, 2, 3000, out, sizeof out, &closed) > 0);
	CU_ASSERT(strncmp(out, "HTTP/1.1 400 ", 13) == 0);
	CU_ASSERT(strstr(out, "trustedProxies") != NULL);
	CU_ASSERT(harness_log_count(&D, "PROXY protocol header refused: the address is not in "
					"trustedProxies") == 4);
	/* the proxied path still works beside it */
	struct tclient *c = via_balancer("a1");
	CU_ASSERT_FATAL(c != NULL);
	struct json_object *done = cat_job(c, "j3");
	CU_ASSERT(done && tc_int(tc_receipt(done), "exit_code") == 0);
	json_object_put(done);
	tc_close(c);
	stop();
}

/* TLS through a TCP balancer: haproxy puts the PROXY header before the
 * client's TLS handshake, the execserver reads it before starting TLS, and
 * the job reaches a's URLs. */
static void test_tls_behind_proxy(void)
{
	struct testca ca;
	char cert[96], key[96], san[96], path[64];
	int status = 0;
	CU_ASSERT_FATAL(testca_new(&ca) == 0);
	snprintf(san, sizeof san, "IP:%s,IP:%s", LB->addr, C->addr);
	CU_ASSERT_FATAL(testca_server(&ca, "server", san, cert, key) == 0);
	start_tls(1, "send-proxy-v2", cert, key, ca.ca);

	struct wsc_connect_opts o = { .tls_ca = ca.ca, .timeout_ms = 5000 };
	snprintf(path, sizeof path, "/broker?client=tls1");
	CU_ASSERT_FATAL(bed_enter(A) == 0);
	struct wsc *ws = wsc_connect_opts(LB->addr, L.port, path, &o, &status);
	bed_leave();
	CU_ASSERT_FATAL(ws != NULL);
	struct tclient *c = tc_from_wsc(ws, "tls1", 5000);
	CU_ASSERT_FATAL(c != NULL);
	struct json_object *done = cat_job(c, "j4");
	CU_ASSERT(done && tc_int(tc_receipt(done), "exit_code") == 0);
	CU_ASSERT_STRING_EQUAL(error_field(done, "code"), "");
	json_object_put(done);
	check_streamed("j4");
	char line[96];
	snprintf(line, sizeof line, "PROXY v2 header: client %s:", A->addr);
	CU_ASSERT(harness_log_contains(&D, line));
	tc_close(c);
	stop();
	testca_remove(&ca);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "guard names the ways out", test_guard_names_ways_out },
		{ "send-proxy (v1)", test_send_proxy_v1 },
		{ "send-proxy-v2", test_send_proxy_v2 },
		{ "a trusted proxy must send a header", test_trusted_needs_header },
		{ "a header from elsewhere is refused", test_untrusted_header_refused },
		{ "TLS behind the balancer", test_tls_behind_proxy },
		{ NULL, NULL },
	};
	return bed_run_suite("test_proxy", "proxy", cases, &B, 3);
}
