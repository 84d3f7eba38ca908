/*
 * test_client_tls.c - libexecclient on wss:// addresses against a real
 * daemon with `tls: {cert, key}`, its certificate signed by a CA the test
 * makes with the openssl command (tests/lib/testca.c).  Proves: a job runs
 * end to end over wss (3 MiB of stdin through `cat`, bytes compared; the
 * pipe endpoints stay plain HTTP) and freeing the client ends it with a
 * close frame the daemon reads (1000); a client trusting another CA, one on
 * the system's trust store, and one dialling a name the certificate does
 * not carry all fail with "certificate verify failed", on_conn says so
 * (tls_verify_failed), the job ends with tls_verify and nothing ran on
 * the daemon; a CA directory made by `openssl rehash` works as well as a
 * file; errors other code leaves on OpenSSL's per-thread queue while the
 * loop runs fail no connection; an unreadable CA file is refused by
 * exc_client_add_address; a ws:// client on the TLS port fails with a
 * clear message and the daemon goes on serving; a wss:// client on a
 * plain port fails its handshake (not a verification failure).
 */
#include "autoconfig.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <event2/event.h>
#include <json-c/json.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "client_fixture.h"
#include "harness.h"
#include "suite.h"
#include "testca.h"

/* The service "tools" (cat) on 2 processes, with tls (YAML lines, NULL
 * for none). */
static const char *body(const char *tls)
{
	return harness_tools_body("jobRemovalPolicy: all\n", 2, "cat", tls);
}

static struct testca CA, OTHER;
static struct es_daemon D;

/* What on_conn saw. */
struct conn_seen {
	int up, failed, tls_verify_failed;
	char message[300];
};

static void on_conn(void *arg, enum exc_conn_event ev, const struct exc_conn_info *info)
{
	struct conn_seen *s = arg;

	if (ev == EXC_CONN_UP)
		s->up++;
	if (ev != EXC_CONN_FAILED)
		return;
	s->failed++;
	s->tls_verify_failed = info->tls_verify_failed;
	snprintf(s->message, sizeof s->message, "%s", info->message ? info->message : "");
}

static int start(void)
{
	char cert[96], key[96], tls[256];

	if (testca_new(&CA) != 0 || testca_new(&OTHER) != 0 ||
	    testca_server(&CA, "server", "IP:127.0.0.1,DNS:execserver.invalid", cert, key) != 0)
		return -1;
	snprintf(tls, sizeof tls, "tls:\n  cert: %s\n  key: %s\n", cert, key);
	return harness_start_tls(&D, 2, body(tls), NULL, CA.ca);
}

static int stop(void)
{
	harness_stop(&D, 10000);
	harness_cleanup(&D);
	testca_remove(&CA);
	testca_remove(&OTHER);
	return 0;
}

/* A client trusting ca (NULL: the system's store) on url. */
static exc_client *client(const char *ca, const char *url, struct conn_seen *seen)
{
	struct exc_options o;
	exc_client *c;

	if (fx_base == NULL)
		fx_base = event_base_new();
	fx_options(&o);
	o.tls_ca_file = ca;
	o.on_conn = on_conn;
	o.arg = seen;
	c = exc_client_new(fx_base, &o);
	CU_ASSERT_FATAL(c != NULL);
	if (exc_client_add_address(c, url) != 0) {
		fprintf(stderr, "add %s: %s\n", url, exc_client_last_error(c));
		exc_client_free(c);
		return NULL;
	}
	return c;
}

static long long started_jobs(void)
{
	return harness_status_int(&D, "services", "tools", "started", NULL);
}

static void test_job_over_wss(void)
{
	char url[96], path[300];
	struct conn_seen seen = { 0 };
	struct fx_done done = { 0 };
	struct exc_job_spec s;
	size_t n = 3 << 20;
	unsigned char *data = harness_pattern(n), *back = malloc(n + 1);
	long long before = started_jobs();

	snprintf(url, sizeof url, "wss://127.0.0.1:%d", D.port);
	snprintf(path, sizeof path, "%s/out.bin", D.dir);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CU_ASSERT_FATAL(fd >= 0 && data && back);
	exc_client *c = client(CA.ca, url, &seen);
	CU_ASSERT_FATAL(c != NULL);
	fx_cat_spec(&s, &done, data, n, fd);
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&done.called, 30000));
	CU_ASSERT(done.ok);
	CU_ASSERT_EQUAL(seen.up, 1);
	CU_ASSERT_EQUAL(seen.failed, 0);
	CU_ASSERT_EQUAL(done.stdin_bytes, n);
	CU_ASSERT_EQUAL(done.stdout_bytes, n);
	CU_ASSERT_EQUAL(pread(fd, back, n + 1, 0), (ssize_t)n);
	CU_ASSERT(memcmp(back, data, n) == 0);
	CU_ASSERT_EQUAL(started_jobs(), before + 1);
	close(fd);
	free(back);
	free(data);
	/* freeing the client sends the close frame through TLS: the daemon
	 * sees a normal close (1000), not a dropped connection (1006) */
	int closed = harness_log_count(&D, "connection closed (1000)");
	exc_client_free(c);
	for (int i = 0; i < 50 && harness_log_count(&D, "connection closed (1000)") == closed; i++)
		fx_spin(100);
	CU_ASSERT_EQUAL(harness_log_count(&D, "connection closed (1000)"), closed + 1);
}

/* Submits `cat` with text as stdin and waits (10 s) for its end. */
static void run_cat(exc_client *c, const char *text, struct fx_done *done)
{
	struct exc_job_spec s;

	fx_spec(&s, "tools", "{\"command\":\"cat\"}", done);
	s.in.kind = EXC_IO_BUFFER;
	s.in.data = text;
	s.in.len = strlen(text);
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&done->called, 10000));
}

/* A client that must not get through: FAILED with a verify error, the
 * job done with tls_verify, nothing started on the daemon. */
static void expect_refused(const char *ca, const char *url, const char *reason)
{
	struct conn_seen seen = { 0 };
	struct fx_done done = { 0 };
	long long before = started_jobs();
	exc_client *c = client(ca, url, &seen);

	CU_ASSERT_FATAL(c != NULL);
	run_cat(c, "never\n", &done);
	CU_ASSERT(seen.failed >= 1);
	CU_ASSERT_EQUAL(seen.up, 0);
	CU_ASSERT_EQUAL(seen.tls_verify_failed, 1);
	CU_ASSERT(strncmp(seen.message, "certificate verify failed: ", 27) == 0);
	CU_ASSERT(strstr(seen.message, reason) != NULL);
	CU_ASSERT(fx_log_find("certificate verify failed") != NULL);
	CU_ASSERT(!done.ok);
	CU_ASSERT_STRING_EQUAL(done.error_code, EXC_E_TLS_VERIFY);
	CU_ASSERT_STRING_EQUAL(done.error_message, seen.message);
	CU_ASSERT_EQUAL(done.retryable, 0);
	CU_ASSERT_STRING_EQUAL(done.instance_id, "");
	CU_ASSERT_EQUAL(started_jobs(), before);
	if (!strstr(seen.message, reason))
		fprintf(stderr, "\n%s: on_conn said \"%s\"\n", url, seen.message);
	exc_client_free(c);
	fx_log_clear();
}

/* The first address "localhost" resolves to (what libevent dials). */
static int localhost_is_127(void)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res;
	char text[64] = "";

	if (getaddrinfo("localhost", NULL, &hints, &res) != 0)
		return 0;
	if (res->ai_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, text,
			  sizeof text);
	freeaddrinfo(res);
	return strcmp(text, "127.0.0.1") == 0;
}

static void test_verify_failures(void)
{
	char url[96], name_url[96];

	snprintf(url, sizeof url, "wss://127.0.0.1:%d", D.port);
	/* a CA that did not sign the certificate */
	expect_refused(OTHER.ca, url, "unable to get local issuer certificate");
	/* no CA given: the system's store, which does not hold the test CA */
	expect_refused(NULL, url, "unable to get local issuer certificate");
	/* the right CA, a name the certificate does not carry (it has
	 * 127.0.0.1 and execserver.invalid) */
	CU_ASSERT_FATAL(localhost_is_127());
	snprintf(name_url, sizeof name_url, "wss://localhost:%d/job/tools", D.port);
	expect_refused(CA.ca, name_url, "hostname mismatch");
}

/* Another TLS user on this thread leaves errors on OpenSSL's per-thread
 * queue, every millisecond while the loop runs: the library's
 * connections must not take them for their own. */
static void stale_error(evutil_socket_t fd, short what, void *arg)
{
	ERR_raise(ERR_LIB_SSL, SSL_R_BAD_LENGTH);
	ERR_raise(ERR_LIB_SYS, 104);
}

static void test_stale_errors(void)
{
	struct timeval ms = { 0, 1000 };
	struct event *noise = event_new(fx_base, -1, EV_PERSIST, stale_error, NULL);
	struct conn_seen seen = { 0 };
	struct fx_done done = { 0 };
	char url[96];

	snprintf(url, sizeof url, "wss://127.0.0.1:%d", D.port);
	stale_error(-1, 0, NULL);
	CU_ASSERT_FATAL(noise != NULL && event_add(noise, &ms) == 0);
	exc_client *c = client(CA.ca, url, &seen);
	CU_ASSERT_FATAL(c != NULL);
	run_cat(c, "through the noise\n", &done);
	CU_ASSERT(done.ok);
	CU_ASSERT_STRING_EQUAL(done.stdout_text, "through the noise\n");
	CU_ASSERT_EQUAL(seen.up, 1);
	CU_ASSERT_EQUAL(seen.failed, 0);
	exc_client_free(c);
	event_free(noise);
	ERR_clear_error();
}

/* tls_ca_dir: a directory made with `openssl rehash` instead of a file. */
static void test_ca_dir(void)
{
	char dir[128], cmd[1024], url[96];
	struct conn_seen seen = { 0 };
	struct fx_done done = { 0 };
	struct exc_options o;

	snprintf(dir, sizeof dir, "%s/hashed", CA.dir);
	snprintf(cmd, sizeof cmd, "mkdir '%s' && cp '%s' '%s/ca.pem' && openssl rehash '%s'", dir,
		 CA.ca, dir, dir);
	CU_ASSERT_FATAL(system(cmd) == 0);
	snprintf(url, sizeof url, "wss://127.0.0.1:%d", D.port);
	fx_options(&o);
	o.tls_ca_dir = dir;
	o.on_conn = on_conn;
	o.arg = &seen;
	exc_client *c = exc_client_new(fx_base, &o);
	CU_ASSERT_FATAL(c != NULL && exc_client_add_address(c, url) == 0);
	run_cat(c, "hashed\n", &done);
	CU_ASSERT(done.ok);
	CU_ASSERT_STRING_EQUAL(done.stdout_text, "hashed\n");
	CU_ASSERT_EQUAL(seen.failed, 0);
	exc_client_free(c);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	CU_ASSERT(system(cmd) == 0);
}

static void test_bad_ca_file(void)
{
	struct exc_options o;
	char url[96], missing[128];

	snprintf(url, sizeof url, "wss://127.0.0.1:%d", D.port);
	snprintf(missing, sizeof missing, "%s/missing.pem", CA.dir);
	fx_options(&o);
	o.tls_ca_file = missing;
	exc_client *c = exc_client_new(fx_base, &o);
	CU_ASSERT_FATAL(c != NULL);
	CU_ASSERT_EQUAL(exc_client_add_address(c, url), -1);
	CU_ASSERT(strstr(exc_client_last_error(c), missing) != NULL);
	/* plain addresses do not need the CA */
	snprintf(url, sizeof url, "ws://127.0.0.1:%d", D.port);
	CU_ASSERT_EQUAL(exc_client_add_address(c, url), 0);
	exc_client_free(c);
}

/* A client on url whose connection fails, but not for its certificate. */
static void expect_no_handshake(const char *ca, const char *url, struct conn_seen *seen)
{
	exc_client *c = client(ca, url, seen);

	CU_ASSERT_FATAL(c != NULL);
	for (int i = 0; i < 50 && !seen->failed; i++)
		fx_spin(100);
	CU_ASSERT(seen->failed >= 1);
	CU_ASSERT_EQUAL(seen->up, 0);
	CU_ASSERT_EQUAL(seen->tls_verify_failed, 0);
	fprintf(stderr, "\n  %s: %s\n", url, seen->message);
	exc_client_free(c);
}

static void test_plain_client_on_tls_port(void)
{
	char url[96];
	struct conn_seen seen = { 0 };

	snprintf(url, sizeof url, "ws://127.0.0.1:%d", D.port);
	expect_no_handshake(NULL, url, &seen);
	CU_ASSERT(strstr(seen.message, "use wss://") != NULL);
	/* the daemon goes on serving wss */
	test_job_over_wss();
}

/* The other way round: wss:// on a plain port is a failed handshake,
 * not a verification failure. */
static void test_tls_client_on_plain_port(void)
{
	struct es_daemon plain;
	struct conn_seen seen = { 0 };
	char url[96];

	/* the same services, without the tls section */
	CU_ASSERT_FATAL(harness_start(&plain, 1, body(NULL), NULL) == 0);
	snprintf(url, sizeof url, "wss://127.0.0.1:%d", plain.port);
	expect_no_handshake(CA.ca, url, &seen);
	CU_ASSERT(strncmp(seen.message, "TLS handshake failed: ", 22) == 0);
	harness_stop(&plain, 10000);
	harness_cleanup(&plain);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "a job end to end over wss (3 MiB through cat)", test_job_over_wss },
		{ "other CA, system store, wrong name: certificate verify failed",
		  test_verify_failures },
		{ "a CA directory (openssl rehash) instead of a file", test_ca_dir },
		{ "stale errors on OpenSSL's thread queue fail no connection", test_stale_errors },
		{ "an unreadable CA file is refused when the wss address is added",
		  test_bad_ca_file },
		{ "a ws:// client on the TLS port fails cleanly", test_plain_client_on_tls_port },
		{ "a wss:// client on a plain port: handshake failed",
		  test_tls_client_on_plain_port },
		{ NULL, NULL },
	};
	if (start() != 0) {
		fprintf(stderr, "cannot start a TLS daemon\n");
		return 1;
	}
	int rc = run_suite("client_tls", cases);
	stop();
	if (fx_base)
		event_base_free(fx_base);
	return rc;
}
