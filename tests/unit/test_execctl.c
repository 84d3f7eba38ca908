/*
 * test_execctl.c - the pure parts of execctl: the command line (options,
 * defaults from the environment, every refusal and its message), the job
 * description it builds, the position line, the mapping of receipts to
 * exit statuses and messages, and the status tables.  The program itself
 * runs against real daemons in tests/integration/test_execctl.c.
 */
#include "autoconfig.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <json-c/json.h>

#include "cli/exit_codes.h"
#include "cli/options.h"
#include "cli/outcome.h"
#include "cli/progress.h"
#include "cli/status.h"
#include "cli/table.h"
#include "execserver/client.h"
#include "suite.h"

/* ---- a stand-in environment ------------------------------------------------ */

static const char *fake_addr, *fake_token, *fake_cacert;

static const char *fake_env(const char *name)
{
	if (strcmp(name, "EXECCTL_ADDR") == 0)
		return fake_addr;
	if (strcmp(name, "EXECCTL_TOKEN") == 0)
		return fake_token;
	if (strcmp(name, "EXECCTL_CACERT") == 0)
		return fake_cacert;
	return NULL;
}

/* argv from a NULL-terminated list of words (the first is the command). */
static int to_argv(const char *const *words, char **argv)
{
	int argc = 0;
	while (words[argc] && argc < 63) {
		argv[argc] = (char *)words[argc];
		argc++;
	}
	argv[argc] = NULL;
	return argc;
}

static int parse_run(struct cli_run *o, char *err, const char *const *words)
{
	char *argv[64];
	return cli_parse_run(to_argv(words, argv), argv, o, fake_env, err, 512);
}

static int parse_status(struct cli_status *o, char *err, const char *const *words)
{
	char *argv[64];
	return cli_parse_status(to_argv(words, argv), argv, o, fake_env, err, 512);
}

#define RUN(...) parse_run(&o, err, (const char *const[]){ "run", __VA_ARGS__, NULL })
#define STATUS(...) parse_status(&s, err, (const char *const[]){ "status", __VA_ARGS__, NULL })

/* ---- options ------------------------------------------------------------------ */

static void test_run_full(void)
{
	struct cli_run o;
	char err[512];
	fake_addr = fake_token = NULL;
	CU_ASSERT_EQUAL_FATAL(RUN("-a", "ws://a:1", "--address", "b:2", "-s", "conv", "-P",
				  "interactive", "--slot-timeout", "30", "--job-timeout", "600",
				  "--input", "in.png=/tmp/x.png", "--output", "out.jpg=/tmp/y.jpg",
				  "--env", "LANG=C", "--env", "X=a=b", "-n", "-q", "-v", "--client",
				  "me", "--", "convert", "-resize", "50%", "--", "in.png"),
			      CLI_PARSED);
	CU_ASSERT_EQUAL(o.c.naddresses, 2);
	CU_ASSERT_STRING_EQUAL(o.c.addresses[0], "ws://a:1");
	CU_ASSERT_STRING_EQUAL(o.c.addresses[1], "ws://b:2"); /* bare host:port gets ws:// */
	CU_ASSERT_STRING_EQUAL(o.service, "conv");
	CU_ASSERT_EQUAL(o.priority, 2);
	CU_ASSERT_EQUAL(o.timeout_sec, 30);
	CU_ASSERT_EQUAL(o.job_timeout_sec, 600);
	CU_ASSERT_EQUAL(o.ninputs, 1);
	CU_ASSERT_STRING_EQUAL(o.inputs[0].name, "in.png");
	CU_ASSERT_STRING_EQUAL(o.inputs[0].path, "/tmp/x.png");
	CU_ASSERT_EQUAL(o.noutputs, 1);
	CU_ASSERT_STRING_EQUAL(o.outputs[0].name, "out.jpg");
	CU_ASSERT_EQUAL(o.nenv, 2);
	CU_ASSERT_STRING_EQUAL(o.env[1], "X=a=b");
	CU_ASSERT(o.no_stdin && o.quiet && o.c.verbose == 1);
	CU_ASSERT_STRING_EQUAL(o.client_id, "me");
	/* everything after the first "--" belongs to the job, a later "--" too */
	CU_ASSERT_EQUAL(o.ncommand, 5);
	CU_ASSERT_STRING_EQUAL(o.command[0], "convert");
	CU_ASSERT_STRING_EQUAL(o.command[4], "in.png");
	CU_ASSERT_PTR_NULL(o.command[5]);

	char *json = cli_run_job_json(&o);
	struct json_object *j = json_tokener_parse(json);
	CU_ASSERT_FATAL(j != NULL);
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(j, "command")),
			       "convert");
	struct json_object *args = json_object_object_get(j, "args");
	CU_ASSERT_EQUAL(json_object_array_length(args), 4);
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_array_get_idx(args, 1)), "50%");
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_array_get_idx(args, 2)), "--");
	CU_ASSERT_EQUAL(json_object_array_length(json_object_object_get(j, "env")), 2);
	CU_ASSERT_EQUAL(json_object_get_int(json_object_object_get(j, "timeout_sec")), 600);
	json_object_put(j);
	free(json);
	cli_run_free(&o);
}

/* The old spellings stay: -p for --priority, --timeout for --slot-timeout. */
static void test_run_old_spellings(void)
{
	struct cli_run o;
	char err[512];
	fake_addr = "ws://e:1";
	fake_token = NULL;
	CU_ASSERT_EQUAL_FATAL(RUN("-s", "c", "-p", "background", "--timeout", "7", "--", "true"),
			      CLI_PARSED);
	CU_ASSERT_EQUAL(o.priority, -2);
	CU_ASSERT_EQUAL(o.timeout_sec, 7);
	cli_run_free(&o);
	CU_ASSERT_EQUAL_FATAL(RUN("-s", "c", "--priority", "5", "--", "true"), CLI_PARSED);
	CU_ASSERT_EQUAL(o.priority, 5);
	cli_run_free(&o);
}

/* The job's options are not execctl's: scanning stops at COMMAND. */
static void test_run_stops_at_command(void)
{
	struct cli_run o;
	char err[512];
	fake_addr = "ws://e:1";
	fake_token = NULL;
	CU_ASSERT_EQUAL_FATAL(RUN("-s", "cat", "cat", "-n", "-a", "x"), CLI_PARSED);
	CU_ASSERT_EQUAL(o.no_stdin, 0);
	CU_ASSERT_EQUAL(o.c.naddresses, 1);
	CU_ASSERT_EQUAL(o.ncommand, 4);
	CU_ASSERT_STRING_EQUAL(o.command[1], "-n");
	char *json = cli_run_job_json(&o);
	CU_ASSERT_STRING_EQUAL(json, "{\"command\":\"cat\",\"args\":[\"-n\",\"-a\",\"x\"]}");
	free(json);
	cli_run_free(&o);
	/* no args, no env, no timeout: only the command */
	CU_ASSERT_EQUAL_FATAL(RUN("-s", "cat", "--", "true"), CLI_PARSED);
	json = cli_run_job_json(&o);
	CU_ASSERT_STRING_EQUAL(json, "{\"command\":\"true\"}");
	free(json);
	cli_run_free(&o);
}

static void test_environment(void)
{
	struct cli_run o;
	struct cli_status s;
	char err[512];
	char path[] = "/tmp/execctl-token-XXXXXX";

	fake_addr = " ws://a:1, b:2\tws://c:3/job/cat ,";
	fake_token = "from-env";
	CU_ASSERT_EQUAL_FATAL(RUN("-s", "cat", "--", "true"), CLI_PARSED);
	CU_ASSERT_EQUAL(o.c.naddresses, 3);
	CU_ASSERT_STRING_EQUAL(o.c.addresses[1], "ws://b:2");
	CU_ASSERT_STRING_EQUAL(o.c.addresses[2], "ws://c:3/job/cat");
	CU_ASSERT_STRING_EQUAL(o.c.token, "from-env");
	CU_ASSERT_PTR_NULL(o.c.cacert);
	cli_run_free(&o);

	/* --cacert, else EXECCTL_CACERT; an empty one is refused */
	fake_cacert = "/etc/env-ca.pem";
	CU_ASSERT_EQUAL_FATAL(RUN("-s", "cat", "--", "true"), CLI_PARSED);
	CU_ASSERT_STRING_EQUAL(o.c.cacert, "/etc/env-ca.pem");
	cli_run_free(&o);
	CU_ASSERT_EQUAL_FATAL(STATUS("-a", "wss://h:1", "--cacert", "/x/ca.pem"), CLI_PARSED);
	CU_ASSERT_STRING_EQUAL(s.c.cacert, "/x/ca.pem");
	cli_status_free(&s);
	CU_ASSERT_EQUAL(RUN("-s", "cat", "--cacert", "", "--", "true"), CLI_BAD);
	CU_ASSERT(strstr(err, "--cacert") != NULL);
	fake_cacert = NULL;

	/* -a replaces EXECCTL_ADDR; --token-file replaces EXECCTL_TOKEN */
	int fd = mkstemp(path);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT(write(fd, "s3cret\nignored\n", 15) == 15);
	close(fd);
	CU_ASSERT_EQUAL_FATAL(STATUS("-a", "http://h:9", "--token-file", path, "--json"),
			      CLI_PARSED);
	CU_ASSERT_EQUAL(s.c.naddresses, 1);
	CU_ASSERT_STRING_EQUAL(s.c.addresses[0], "http://h:9");
	CU_ASSERT_STRING_EQUAL(s.c.token, "s3cret");
	CU_ASSERT(s.json);
	cli_status_free(&s);

	/* an empty token file is refused */
	fd = open(path, O_WRONLY | O_TRUNC);
	close(fd);
	CU_ASSERT_EQUAL(STATUS("--token-file", path), CLI_BAD);
	CU_ASSERT(strstr(err, "first line is empty") != NULL);
	/* a token the library would refuse is refused here, whole (never cut
	 * at a buffer's size): too long, a space, a control character */
	{
		static char tok[EXC_AUTH_TOKEN_MAX + 2];

		memset(tok, 't', sizeof tok - 1);
		fd = open(path, O_WRONLY | O_TRUNC);
		CU_ASSERT(write(fd, tok, EXC_AUTH_TOKEN_MAX) == EXC_AUTH_TOKEN_MAX);
		close(fd);
		CU_ASSERT_EQUAL_FATAL(STATUS("-a", "x:1", "--token-file", path), CLI_PARSED);
		CU_ASSERT_EQUAL(strlen(s.c.token), EXC_AUTH_TOKEN_MAX);
		cli_status_free(&s);
		fd = open(path, O_WRONLY | O_TRUNC);
		CU_ASSERT(write(fd, tok, EXC_AUTH_TOKEN_MAX + 1) == EXC_AUTH_TOKEN_MAX + 1);
		close(fd);
		CU_ASSERT_EQUAL(STATUS("-a", "x:1", "--token-file", path), CLI_BAD);
		CU_ASSERT(strncmp(err, "status: --token-file ", 21) == 0);
		CU_ASSERT(strstr(err, "longer than") != NULL);
		fd = open(path, O_WRONLY | O_TRUNC);
		CU_ASSERT(write(fd, "two words\n", 10) == 10);
		close(fd);
		CU_ASSERT_EQUAL(STATUS("-a", "x:1", "--token-file", path), CLI_BAD);
		CU_ASSERT(strstr(err, "other than visible ASCII") != NULL);
		fake_token = "inject\r\nX-Evil: 1";
		CU_ASSERT_EQUAL(STATUS("-a", "x:1"), CLI_BAD);
		CU_ASSERT(strncmp(err, "status: EXECCTL_TOKEN: ", 23) == 0);
		CU_ASSERT(strstr(err, "other than visible ASCII") != NULL);
	}
	unlink(path);
	CU_ASSERT_EQUAL(STATUS("--token-file", path), CLI_BAD);
	CU_ASSERT(strstr(err, "No such file") != NULL);
	fake_addr = fake_token = NULL;
}

static void test_refusals(void)
{
	struct cli_run o;
	struct cli_status s;
	char err[512];
	static const struct {
		const char *words[8];
		const char *message;
	} cases[] = {
		{ { "-s", "cat", "--", "true" },
		  "run: no address: give -a URL (or set EXECCTL_ADDR)" },
		{ { "-a", "x:1", "--", "true" }, "run: no service: give -s SERVICE" },
		{ { "-a", "x:1", "-s", "cat" },
		  "run: no command: give -- COMMAND [ARGS...] after the options" },
		{ { "-a", "x:1", "-s", "cat", "-P", "urgent", "--", "true" },
		  "run: --priority urgent: not an integer" },
		{ { "-a", "x:1", "-s", "cat", "-p", "99999999999", "--", "true" },
		  "run: --priority 99999999999" },
		{ { "-a", "x:1", "-s", "cat", "--slot-timeout", "-1", "--", "true" },
		  "run: --slot-timeout -1: expected seconds" },
		{ { "-a", "x:1", "-s", "cat", "--timeout", "1s", "--", "true" },
		  "run: --slot-timeout 1s: expected seconds" },
		{ { "-a", "x:1", "-s", "cat", "--job-timeout", "0", "--", "true" },
		  "run: --job-timeout 0" },
		{ { "-a", "x:1", "-s", "cat", "--job-timeout", "86401", "--", "true" },
		  "run: --job-timeout 86401" },
		{ { "-a", "x:1", "-s", "cat", "--input", "a", "--", "true" },
		  "run: --input a: expected NAME=FILE" },
		{ { "-a", "x:1", "-s", "cat", "--input", "=f", "--", "true" },
		  "run: --input =f: expected NAME=FILE" },
		{ { "-a", "x:1", "-s", "cat", "--output", "d/x=f", "--", "true" },
		  "run: --output d/x=f: NAME is a file name" },
		{ { "-a", "x:1", "-s", "cat", "--env", "NOEQ", "--", "true" },
		  "run: --env NOEQ: expected NAME=VALUE" },
		{ { "-a", "x:1", "-s", "cat", "-x", "--", "true" }, "run: unknown option -x" },
		{ { "-a", "x:1", "-s", "cat", "--frobnicate", "--", "true" },
		  "run: unknown option --frobnicate" },
		{ { "-a", "x:1", "-s" }, "run: option -s needs a value" },
		{ { "-a", "x:1", "-s", "cat", "--timeout" },
		  "run: option --timeout needs a value" },
		{ { "-a", "", "-s", "cat", "--", "true" }, "run: -a: empty address" },
		{ { "-a", "x:1", "-s", "cat", "--client", "a b", "--", "true" },
		  "run: --client a b: expected 1 to 64 visible ASCII characters" },
		{ { "-a", "x:1", "-s", "cat", "--client", "a&b", "--", "true" },
		  "run: --client a&b: expected 1 to 64" },
		{ { "-a", "x:1", "-s", "", "--", "true" }, "run: -s: empty service name" },
	};
	fake_addr = fake_token = NULL;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const char *w[10] = { "run" };
		memcpy(w + 1, cases[i].words, sizeof cases[i].words);
		int rc = parse_run(&o, err, w);
		CU_ASSERT_EQUAL(rc, CLI_BAD);
		if (strncmp(err, cases[i].message, strlen(cases[i].message)) != 0) {
			fprintf(stderr, "\ncase %zu: got \"%s\", expected \"%s...\"\n", i, err,
				cases[i].message);
			CU_FAIL("message");
		}
	}
	CU_ASSERT_EQUAL(STATUS("-a", "x:1", "extra"), CLI_BAD);
	CU_ASSERT_STRING_EQUAL(err, "status: unexpected argument: extra");
	CU_ASSERT_EQUAL(STATUS("-a", "x:1", "--jsn"), CLI_BAD);
	CU_ASSERT_STRING_EQUAL(err, "status: unknown option --jsn");
	CU_ASSERT_EQUAL(STATUS("-v"), CLI_BAD);
	CU_ASSERT_STRING_EQUAL(err, "status: no address: give -a URL (or set EXECCTL_ADDR)");
}

static void test_priority(void)
{
	int p = 99;
	CU_ASSERT(cli_parse_priority("background", &p) == 0 && p == -2);
	CU_ASSERT(cli_parse_priority("normal", &p) == 0 && p == 0);
	CU_ASSERT(cli_parse_priority("synchronous", &p) == 0 && p == 4);
	CU_ASSERT(cli_parse_priority("-2147483648", &p) == 0 && p == -2147483647 - 1);
	CU_ASSERT(cli_parse_priority("2147483648", &p) == -1);
	CU_ASSERT(cli_parse_priority("", &p) == -1);
	CU_ASSERT(cli_parse_priority("3x", &p) == -1);
	CU_ASSERT(cli_parse_priority("Interactive", &p) == -1);
}

/* ---- position line ------------------------------------------------------------------ */

static void test_progress(void)
{
	char b[160];
	progress_running(b, sizeof b, 0.42, "");
	CU_ASSERT_STRING_EQUAL(b, "running: 42%");
	progress_running(b, sizeof b, 0.999, "frame 12");
	CU_ASSERT_STRING_EQUAL(b, "running: 99% frame 12");
	progress_running(b, sizeof b, 0.29, NULL); /* 28.999..% in binary: still 29 */
	CU_ASSERT_STRING_EQUAL(b, "running: 29%");
	char t[256];
	memset(t, 'a', 99);
	strcpy(t + 99, "\xc3\xa4 and more"); /* the 100-byte cut falls inside the 'ä' */
	progress_running(b, sizeof b, 1, t);
	CU_ASSERT_EQUAL(strlen(b), strlen("running: 100% ") + 99);
	progress_line(b, sizeof b, 3, 4, 7, 2 * 60 * 1000);
	CU_ASSERT_STRING_EQUAL(b, "3 of 4 slots busy, 7 ahead, about 2 min");
	progress_line(b, sizeof b, 1, 1, 0, -1);
	CU_ASSERT_STRING_EQUAL(b, "1 of 1 slot busy, 0 ahead, time unknown");
	progress_line(b, sizeof b, 4, 0, 0, 1000);
	CU_ASSERT_STRING_EQUAL(b, "4 slots busy, 0 ahead, about 1 s");
	progress_eta(b, sizeof b, 0);
	CU_ASSERT_STRING_EQUAL(b, "about 1 s");
	progress_eta(b, sizeof b, 40200);
	CU_ASSERT_STRING_EQUAL(b, "about 41 s");
	progress_eta(b, sizeof b, 89 * 1000);
	CU_ASSERT_STRING_EQUAL(b, "about 1 min");
	progress_eta(b, sizeof b, 150 * 1000);
	CU_ASSERT_STRING_EQUAL(b, "about 3 min");
	progress_eta(b, sizeof b, 89LL * 60 * 1000);
	CU_ASSERT_STRING_EQUAL(b, "about 89 min");
	progress_eta(b, sizeof b, 5LL * 3600 * 1000 + 1);
	CU_ASSERT_STRING_EQUAL(b, "about 5 h");
	progress_eta(b, sizeof b, -1);
	CU_ASSERT_STRING_EQUAL(b, "");
}

/* ---- outcomes -------------------------------------------------------------------------- */

static struct exc_receipt receipt(void)
{
	struct exc_receipt r;
	memset(&r, 0, sizeof r);
	r.job_id = "j";
	r.duration_ms = 5;
	return r;
}

static void test_outcome(void)
{
	char msg[1024];
	struct exc_receipt r = receipt();

	r.ok = 1;
	r.exited = 1;
	CU_ASSERT_EQUAL(outcome_exit(&r, 0, "cat", msg, sizeof msg), 0);
	CU_ASSERT_STRING_EQUAL(msg, "");

	r = receipt();
	r.exited = 1;
	r.exit_code = 3;
	r.stderr_line = "cat: /nope: No such file or directory";
	CU_ASSERT_EQUAL(outcome_exit(&r, 0, "cat", msg, sizeof msg), 3);
	CU_ASSERT_STRING_EQUAL(
		msg, "execctl: the job exited with status 3\n"
		     "execctl: its last stderr line: cat: /nope: No such file or directory\n");

	r = receipt();
	r.signal = 9;
	CU_ASSERT_EQUAL(outcome_exit(&r, 0, "cat", msg, sizeof msg), 137);
	CU_ASSERT(strstr(msg, "killed by signal 9") != NULL);

	static const struct {
		const char *code;
		int retryable, interrupted, status;
		const char *text;
	} cases[] = {
		{ "unknown_service", 0, 0, EXECCTL_UNKNOWN_SERVICE,
		  "execctl: unknown service 'cat': " },
		{ "unknown_command", 0, 0, EXECCTL_UNKNOWN_SERVICE,
		  "execctl: job failed: unknown_command" },
		{ "unauthorized", 0, 0, EXECCTL_UNAUTHORIZED,
		  "execctl: the server refused the token" },
		{ "tls_verify", 0, 0, EXECCTL_TLS_VERIFY, "execctl: m\n" },
		{ "no_slot", 1, 0, EXECCTL_NO_SLOT, "execctl: service 'cat': m\n" },
		{ "local_io", 0, 0, EXECCTL_LOCAL_IO, "execctl: job failed: local_io: m" },
		{ "cancelled", 0, 1, EXECCTL_INTERRUPTED, "execctl: job failed: cancelled" },
		{ "cancelled", 0, 0, EXECCTL_FAILED, "execctl: job failed: cancelled" },
		{ "exec_lost", 1, 0, EXECCTL_RETRYABLE,
		  "execctl: job failed: exec_lost: m (retryable: run it again)" },
		{ "lost", 1, 0, EXECCTL_RETRYABLE, "execctl: job failed: lost" },
		{ "exec_failed", 0, 0, EXECCTL_FAILED, "execctl: job failed: exec_failed: m\n" },
		{ "timeout", 0, 0, EXECCTL_FAILED, "execctl: job failed: timeout" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		r = receipt();
		r.error_code = cases[i].code;
		r.error_message = "m";
		r.retryable = cases[i].retryable;
		r.signal = 15; /* an error decides over the signal */
		CU_ASSERT_EQUAL(outcome_exit(&r, cases[i].interrupted, "cat", msg, sizeof msg),
				cases[i].status);
		if (strncmp(msg, cases[i].text, strlen(cases[i].text)) != 0) {
			fprintf(stderr, "\ncase %s: got \"%s\"\n", cases[i].code, msg);
			CU_FAIL("message");
		}
	}
	/* the decisive stderr line follows an error too */
	r = receipt();
	r.error_code = "exec_failed";
	r.stderr_line = "boom";
	outcome_exit(&r, 0, "cat", msg, sizeof msg);
	CU_ASSERT(strstr(msg, "\nexecctl: its last stderr line: boom\n") != NULL);
	/* exit 0 that is not ok (a local stream broke without an error code) */
	r = receipt();
	r.exited = 1;
	CU_ASSERT_EQUAL(outcome_exit(&r, 0, "cat", msg, sizeof msg), EXECCTL_LOCAL_IO);
	/* the message is cut, never overrun */
	char small[20];
	r = receipt();
	r.error_code = "exec_failed";
	r.error_message = "a very long message that does not fit";
	outcome_exit(&r, 0, "cat", small, sizeof small);
	CU_ASSERT_EQUAL(strlen(small), sizeof small - 1);
}

/* The job's stderr line never reaches the terminal raw; a receipt's
 * stdout is shown only when nothing was streamed; a receipt read from
 * JSON (a queue row's) shows as run's. */
static void test_outcome_show(void)
{
	char msg[1024], *out = NULL, *err = NULL;
	size_t outlen = 0, errlen = 0;
	struct exc_receipt r = receipt();
	struct json_object *doc;

	r.exited = 1;
	r.exit_code = 1;
	r.stderr_line = "\033[2Jgone\x9b";
	outcome_exit(&r, 0, "cat", msg, sizeof msg);
	CU_ASSERT_STRING_EQUAL(msg, "execctl: the job exited with status 1\n"
				    "execctl: its last stderr line: \\x1b[2Jgone\x9b\n");
	/* the server's error text too (it may carry a payload's) */
	r.error_code = "output_failed";
	r.error_message = "PUT http://h/\033]0;owned\a: 500";
	outcome_exit(&r, 0, "cat", msg, sizeof msg);
	CU_ASSERT_PTR_NOT_NULL(strstr(
		msg, "execctl: job failed: output_failed: PUT http://h/\\x1b]0;owned\\x07: 500\n"));
	r.error_code = NULL;
	r.error_message = NULL;

	FILE *o = open_memstream(&out, &outlen), *e = open_memstream(&err, &errlen);
	r.stdout_text = "prefix\xef\xbf\xbd";
	r.stdout_bytes = 65536; /* streamed: the receipt's copy stays out */
	CU_ASSERT_EQUAL(outcome_show(&r, msg, o, e), 0);
	fflush(o);
	CU_ASSERT_EQUAL(outlen, 0);
	r.stdout_bytes = 0;
	r.stdout_truncated = 1;
	outcome_show(&r, "", o, e);
	fclose(o);
	fclose(e);
	CU_ASSERT_STRING_EQUAL(out, "prefix\xef\xbf\xbd");
	CU_ASSERT(strstr(err, "execctl: (standard output cut after its first 4000 bytes") != NULL);
	free(out);
	free(err);

	CU_ASSERT_EQUAL(
		outcome_parse("{\"exit_code\":3,\"stdout\":\"partial\\n\",\"stdout_truncated\":"
			      "true,\"stderr\":\"oops\",\"duration_ms\":12}",
			      &r, &doc),
		0);
	CU_ASSERT(r.exited && r.exit_code == 3 && !r.ok && r.stdout_truncated);
	CU_ASSERT_STRING_EQUAL(r.stdout_text, "partial\n");
	CU_ASSERT_STRING_EQUAL(r.stderr_line, "oops");
	json_object_put(doc);
	CU_ASSERT_EQUAL(outcome_parse("{\"exit_code\":0,\"error\":{\"code\":\"timeout\","
				      "\"message\":\"after 1 s\"}}",
				      &r, &doc),
			0);
	CU_ASSERT(!r.ok && r.error_code && strcmp(r.error_code, "timeout") == 0);
	CU_ASSERT_EQUAL(outcome_exit(&r, 0, "cat", msg, sizeof msg), EXECCTL_FAILED);
	json_object_put(doc);
	CU_ASSERT_EQUAL(outcome_parse("not json", &r, &doc), -1);
	json_object_put(doc);
}

/* ---- status ------------------------------------------------------------------------------ */

static char *print_to_string(void (*fn)(FILE *, void *), void *arg)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	fn(f, arg);
	fclose(f);
	return buf;
}

static void print_table(FILE *f, void *arg)
{
	static const char *const head[] = { "NAME", "KIND", "N" };
	struct table *t = table_new(3, head, 1u << 1);
	table_add(t, (const char *const[]){ "a", "long kind", "7" });
	table_add(t, (const char *const[]){ "longer", NULL, "12345" });
	table_print(t, f);
	table_free(t);
}

static void test_table(void)
{
	char *s = print_to_string(print_table, NULL);
	CU_ASSERT_STRING_EQUAL(s, "NAME    KIND           N\n"
				  "a       long kind      7\n"
				  "longer  -          12345\n");
	free(s);
}

static void print_hostile_table(FILE *f, void *arg)
{
	static const char *const head[] = { "NAME", "N" };
	struct table *t = table_new(2, head, 0);
	table_add(t, (const char *const[]){ "\033[2Jx\ty\x7f\xc2\x9bz\xc3\xa9", "1" });
	table_print(t, f);
	table_free(t);
}

/* Server strings in a table: control characters (C0, DEL, UTF-8 C1)
 * printed as \xNN, the rest (é) as it is; widths count the escapes. */
static void test_table_escapes(void)
{
	char *s = print_to_string(print_hostile_table, NULL);
	CU_ASSERT_STRING_EQUAL(s, "NAME                      N\n"
				  "\\x1b[2Jx\\x09y\\x7f\\x9bz\xc3\xa9  1\n");
	free(s);
}

static void print_status(FILE *f, void *arg)
{
	status_print_tables(f, arg);
}

static void test_status_tables(void)
{
	struct json_object *st = json_tokener_parse(
		"{\"instance_id\":\"0123456789abcdef0123456789abcdef\",\"version\":\"0.1.0\","
		"\"listen\":\"127.0.0.1:8083\",\"draining\":false,\"clients\":2,\"connections\":3,"
		"\"wants\":12,\"grants\":40,"
		"\"waitgroups\":{\"light\":{\"processes\":4,\"running\":1,\"offered\":0,"
		"\"waiting\":0},"
		"\"heavy\":{\"processes\":2,\"running\":2,\"offered\":0,\"waiting\":7}},"
		"\"services\":{\"demo\":{\"waitgroup\":\"light\",\"enabled\":true,\"waiting\":0,"
		"\"running\":1,\"started\":10,\"finished\":9,\"failed\":0,\"mean_runtime_ms\":1234,"
		"\"samples\":9,\"class\":\"light\"},"
		"\"ffmpeg\":{\"waitgroup\":\"heavy\",\"enabled\":false,\"waiting\":7,\"running\":2,"
		"\"started\":2,\"finished\":0,\"failed\":0,\"mean_runtime_ms\":null},"
		"\"wc\":{\"waitgroup\":\"light\",\"enabled\":true,\"waiting\":0,\"running\":0,"
		"\"started\":1,\"finished\":1,\"failed\":1,\"mean_runtime_ms\":7}}}");
	CU_ASSERT_FATAL(st != NULL);
	char *s = print_to_string(print_status, st);
	CU_ASSERT_STRING_EQUAL(
		s,
		"instance 0123456789abcdef0123456789abcdef  version 0.1.0  listen 127.0.0.1:8083\n"
		"clients 2  connections 3  jobs 12  grants 40\n"
		"\n"
		"WAITGROUP  SLOTS  RUNNING  OFFERED  WAITING\n"
		"light          4        1        0        0\n"
		"heavy          2        2        0        7\n"
		"\n"
		"SERVICE  WAITGROUP  ENABLED  RUNNING  WAITING  STARTED  FINISHED  FAILED   MEAN  "
		"SAMPLES  CLASS\n"
		"demo     light      yes            1        0       10         9       0  1.2 s   "
		"     9  light\n"
		"ffmpeg   heavy      no             2        7        2         0       0      -   "
		"     -  -\n"
		"wc       light      yes            0        0        1         1       1   7 ms   "
		"     -  -\n");
	free(s);
	json_object_put(st);
}

static void test_status_url(void)
{
	char *u;
	CU_ASSERT_STRING_EQUAL((u = status_url("ws://h:8083")), "http://h:8083/status");
	free(u);
	CU_ASSERT_STRING_EQUAL((u = status_url("ws://h:8083/job/cat")), "http://h:8083/status");
	free(u);
	CU_ASSERT_STRING_EQUAL((u = status_url("http://[::1]:80/broker?x")),
			       "http://[::1]:80/status");
	free(u);
	CU_ASSERT_STRING_EQUAL((u = status_url("wss://h:1/job/x")), "https://h:1/status");
	free(u);
	CU_ASSERT_STRING_EQUAL((u = status_url("https://h:2")), "https://h:2/status");
	free(u);
	CU_ASSERT_PTR_NULL(status_url("ftp://h:1"));
	CU_ASSERT_PTR_NULL(status_url("ws:///x"));
	CU_ASSERT_PTR_NULL(status_url("h:1"));
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "run: every option", test_run_full },
		{ "run: scanning stops at the command", test_run_stops_at_command },
		{ "run: -p and --timeout still taken", test_run_old_spellings },
		{ "EXECCTL_ADDR, EXECCTL_TOKEN, EXECCTL_CACERT, --token-file, --cacert",
		  test_environment },
		{ "refusals and their messages", test_refusals },
		{ "priorities", test_priority },
		{ "the position line", test_progress },
		{ "receipts to exit statuses", test_outcome },
		{ "receipts shown, stderr line escaped", test_outcome_show },
		{ "tables", test_table },
		{ "table escapes control characters", test_table_escapes },
		{ "status tables", test_status_tables },
		{ "status URLs", test_status_url },
		{ NULL, NULL },
	};
	return run_suite("execctl", cases);
}
