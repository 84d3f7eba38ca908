/*
 * test_tls.c - the listener with TLS (tls.cert, tls.key), against a real
 * daemon with two handlers and certificates made with the openssl command
 * for the test: wss and https work with a client that verifies the
 * certificate; a client that does not trust it, and a plain client on the
 * TLS port, fail without disturbing anybody; broken tls settings are
 * refused by -t with the file, line and column or the file and reason.
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
#include "proto.h"
#include "suite.h"

static char certdir[32];
static char cert[128], key[128], other_cert[128], other_key[128];

/* A self-signed P-256 certificate for 127.0.0.1 and localhost. */
static int make_cert(const char *crt, const char *k)
{
	char cmd[1024];
	snprintf(cmd, sizeof cmd,
		 "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
		 "-keyout '%s' -out '%s' -days 2 -subj /CN=execserver-test "
		 "-addext subjectAltName=IP:127.0.0.1,DNS:localhost >/dev/null 2>&1",
		 k, crt);
	return system(cmd) == 0 ? 0 : -1;
}

static void make_certs(void)
{
	snprintf(certdir, sizeof certdir, "/tmp/es-tls-XXXXXX");
	CU_ASSERT_FATAL(mkdtemp(certdir) != NULL);
	snprintf(cert, sizeof cert, "%s/cert.pem", certdir);
	snprintf(key, sizeof key, "%s/key.pem", certdir);
	snprintf(other_cert, sizeof other_cert, "%s/other.pem", certdir);
	snprintf(other_key, sizeof other_key, "%s/other.key", certdir);
	CU_ASSERT_FATAL(make_cert(cert, key) == 0);
	CU_ASSERT_FATAL(make_cert(other_cert, other_key) == 0);
}

static void remove_certs(void)
{
	unlink(cert);
	unlink(key);
	unlink(other_cert);
	unlink(other_key);
	rmdir(certdir);
}

/* wss to 127.0.0.1, verifying the certificate against ca and name. */
static struct tclient *tls_connect(int port, const char *name, const char *ca, const char *id)
{
	char path[64];
	int status = 0;
	struct wsc_connect_opts o = { .tls_ca = ca, .tls_name = name, .timeout_ms = 5000 };
	snprintf(path, sizeof path, "/broker?client=%s", id);
	struct wsc *ws = wsc_connect_opts("127.0.0.1", port, path, &o, &status);
	return ws ? tc_from_wsc(ws, id, 5000) : NULL;
}

static void run_true(struct tclient *c, const char *id)
{
	struct json_object *d = tc_run_job(c, id, "cat", "{\"command\":\"echo\",\"args\":[\"hi\"]}",
					   5000);
	CU_ASSERT_FATAL(d != NULL);
	CU_ASSERT_EQUAL(tc_int(tc_receipt(d), "exit_code"), 0);
	CU_ASSERT_STRING_EQUAL(tc_str(tc_receipt(d), "stdout"), "hi\n");
	json_object_put(d);
}

static void test_wss_and_https(void)
{
	struct es_daemon d;
	char body[4096], reply[8192];
	int status = 0;

	make_certs();
	snprintf(body, sizeof body, "tls:\n  cert: %s\n  key: %s\n%s", cert, key,
		 harness_default_body(2));
	CU_ASSERT_FATAL(harness_start_tls(&d, 2, body, NULL, cert) == 0);

	/* https /status, verified by IP address and by name */
	int n = wsc_https_request("127.0.0.1", d.port, cert,
				  "GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
				  5000, &status, reply, sizeof reply);
	CU_ASSERT(n > 0 && status == 200 && strstr(reply, "\"instance_id\"") != NULL);
	status = 0;
	n = wsc_https_request("localhost", d.port, cert,
			      "GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 5000,
			      &status, reply, sizeof reply);
	CU_ASSERT(status == 200);

	/* wss: several clients running jobs */
	struct tclient *a = tls_connect(d.port, "127.0.0.1", cert, "tls-a");
	struct tclient *b = tls_connect(d.port, "127.0.0.1", cert, "tls-b");
	CU_ASSERT_FATAL(a && b);
	run_true(a, "a1");
	run_true(b, "b1");

	/* a client that trusts another certificate gets nowhere */
	CU_ASSERT(tls_connect(d.port, "127.0.0.1", other_cert, "tls-x") == NULL);
	/* nor one that checks another name, or another address, though it
	 * reaches the right server */
	CU_ASSERT(tls_connect(d.port, "other.example", cert, "tls-y") == NULL);
	CU_ASSERT(tls_connect(d.port, "127.0.0.2", cert, "tls-z") == NULL);
	/* while the right name works */
	struct tclient *named = tls_connect(d.port, "localhost", cert, "tls-n");
	CU_ASSERT(named != NULL);
	tc_close(named);
	/* a plain websocket client on the TLS port: no upgrade */
	status = -1;
	struct wsc *plain = wsc_connect("127.0.0.1", d.port, "/broker", NULL, 3000, &status);
	CU_ASSERT(plain == NULL && status == 0);
	wsc_free(plain);

	/* and the others never noticed */
	run_true(a, "a2");
	run_true(b, "b2");

	/* a certificate renewed in place and a SIGHUP: the log says that it
	 * takes a restart, and the listener keeps the one it started with */
	char old[160], cmd[512];
	snprintf(old, sizeof old, "%s/old.pem", certdir);
	snprintf(cmd, sizeof cmd, "cp '%s' '%s'", cert, old);
	CU_ASSERT_FATAL(system(cmd) == 0);
	CU_ASSERT_FATAL(make_cert(cert, key) == 0);
	kill(d.pid, SIGHUP);
	for (int i = 0; i < 50 && !harness_log_contains(&d, "changed on disk"); i++)
		harness_sleep_ms(50);
	CU_ASSERT(harness_log_contains(&d, "the TLS certificate or key changed on disk"));
	struct tclient *o = tls_connect(d.port, "127.0.0.1", old, "tls-old");
	CU_ASSERT(o != NULL);
	tc_close(o);
	CU_ASSERT(tls_connect(d.port, "127.0.0.1", cert, "tls-new") == NULL);
	unlink(old);

	tc_close(a);
	tc_close(b);
	CU_ASSERT(harness_stop_clean(&d) == 0);
	remove_certs();
}

static void write_config(const char *path, const char *tls)
{
	FILE *f = fopen(path, "w");
	CU_ASSERT_FATAL(f != NULL);
	/* as root the daemon wants a user or allowRootJobs */
	fprintf(f, "addr: 127.0.0.1:0\n%s%s%s", tls, harness_default_body(1),
		geteuid() == 0 ? "allowRootJobs: true\n" : "");
	fclose(f);
}

static void test_bad_settings(void)
{
	char path[160], out[4096], tls[512], expect[256];

	make_certs();
	snprintf(path, sizeof path, "%s/c.yml", certdir);

	/* cert without key: the mapping's position */
	snprintf(tls, sizeof tls, "tls:\n  cert: %s\n", cert);
	write_config(path, tls);
	CU_ASSERT_EQUAL(harness_check_config(path, out, sizeof out), 1);
	snprintf(expect, sizeof expect, "%s:3:3: tls: needs both cert", path);
	CU_ASSERT(strstr(out, expect) != NULL);

	/* an unknown key in tls */
	snprintf(tls, sizeof tls, "tls:\n  cert: %s\n  key: %s\n  ciphers: ALL\n", cert, key);
	write_config(path, tls);
	CU_ASSERT_EQUAL(harness_check_config(path, out, sizeof out), 1);
	snprintf(expect, sizeof expect, "%s:5:3:", path);
	CU_ASSERT(strstr(out, expect) != NULL);

	/* a key file that does not exist: named */
	snprintf(tls, sizeof tls, "tls:\n  cert: %s\n  key: %s/missing.key\n", cert, certdir);
	write_config(path, tls);
	CU_ASSERT_EQUAL(harness_check_config(path, out, sizeof out), 1);
	snprintf(expect, sizeof expect, "tls.key: %s/missing.key", certdir);
	CU_ASSERT(strstr(out, expect) != NULL);

	/* a certificate file that is not PEM (the key file) */
	snprintf(tls, sizeof tls, "tls:\n  cert: %s\n  key: %s\n", path, key);
	write_config(path, tls);
	CU_ASSERT_EQUAL(harness_check_config(path, out, sizeof out), 1);
	snprintf(expect, sizeof expect, "tls.cert: %s", path);
	CU_ASSERT(strstr(out, expect) != NULL);

	/* a key that belongs to another certificate */
	snprintf(tls, sizeof tls, "tls:\n  cert: %s\n  key: %s\n", cert, other_key);
	write_config(path, tls);
	CU_ASSERT_EQUAL(harness_check_config(path, out, sizeof out), 1);
	CU_ASSERT(strstr(out, "does not belong to the certificate") != NULL);

	/* and the good pair passes */
	snprintf(tls, sizeof tls, "tls:\n  cert: %s\n  key: %s\n", cert, key);
	write_config(path, tls);
	CU_ASSERT_EQUAL(harness_check_config(path, out, sizeof out), 0);

	/* the daemon itself refuses to start with a bad pair, saying why */
	char cmd[512];
	snprintf(tls, sizeof tls, "tls:\n  cert: %s\n  key: %s\n", cert, other_key);
	write_config(path, tls);
	snprintf(cmd, sizeof cmd, "'%s' -f -c '%s' 2>&1", getenv("EXECSERVER_BIN"), path);
	FILE *p = popen(cmd, "r");
	CU_ASSERT_FATAL(p != NULL);
	size_t n = fread(out, 1, sizeof out - 1, p);
	out[n] = '\0';
	int status = pclose(p);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 2);
	CU_ASSERT(strstr(out, "does not belong to the certificate") != NULL);

	unlink(path);
	remove_certs();
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "wss and https with a verified certificate", test_wss_and_https },
		{ "bad tls settings are refused with a reason", test_bad_settings },
		{ NULL, NULL },
	};
	return run_suite("tls", cases);
}
