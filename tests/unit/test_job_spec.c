/*
 * test_job_spec.c - unit tests of the job payload parser (job_spec.c).
 *
 * Owns: the proof that every field of the payload is accepted when valid
 * and refused with the right code and a message naming the field when not;
 * that argv and envp come out exactly as documented (placeholders, merge
 * order); that every limit holds exactly at its boundary and fails one
 * past it; that every allocation failure (ours and libcurl's) ends in
 * `internal` with nothing leaked.  Fixtures are built in memory: a YAML
 * configuration through config_load_buffer, JSON through json-c.  JSON
 * text in this file is written with ' for " to stay readable.  Exits
 * non-zero if any test fails; run it under valgrind for the leak proof.
 */
#include "autoconfig.h"

#include <CUnit/Basic.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "config/config.h"
#include "execserver/protocol.h"
#include "failalloc.h"
#include "job/job_spec.h"

#define JOBDIR "/var/lib/execserver/job/0a1b-0-7"

/* Allocation failures come from tests/lib/failalloc.c; libcurl's allocator
 * is routed through the same wrappers by curl_global_init_mem. */

static void curl_free_cb(void *p)
{
	free(p);
}

/* ---- fixtures ---- */

static struct es_config cfg, cfg_plain;
static const struct config_service *svc, *svc_plain;

static const char config_text[] =
	"env:\n"
	"  - PATH=/opt/bin\n"
	"  - LC_ALL=C.UTF-8\n"
	"  - GLOBAL=g\n"
	"  - SHARED=global\n"
	"waitgroups:\n"
	"  w: {processes: 1}\n"
	"services:\n"
	"  s:\n"
	"    waitgroup: w\n"
	"    commands:\n"
	"      echo: {prog: echo}\n"
	"      conv:\n"
	"        prog: /usr/bin/convert\n"
	"        args: ['-in', '%jobdir%/in', '100%']\n"
	"        env: [SHARED=command, CMD=c]\n"
	"      percent:\n"
	"        prog: x\n"
	"        args: ['%jobdir%%jobdir%', 'in=%jobdir%/a,out=%jobdir%/b', '%%', '50%',\n"
	"               '%03d', '%home%', '%jobdir', '%JOBDIR%', '%jobdir%%']\n";

static const char config_plain_text[] = "waitgroups:\n"
					"  w: {processes: 1}\n"
					"services:\n"
					"  p:\n"
					"    waitgroup: w\n"
					"    commands:\n"
					"      echo: {prog: echo}\n";

static int suite_init(void)
{
	struct config_error err;

	if (config_load_buffer("t.yml", config_text, strlen(config_text), &cfg, &err) != 0 ||
	    config_load_buffer("p.yml", config_plain_text, strlen(config_plain_text), &cfg_plain,
			       &err) != 0) {
		fprintf(stderr, "fixture: %s\n", err.text);
		return 1;
	}
	svc = config_find_service(&cfg, "s");
	svc_plain = config_find_service(&cfg_plain, "p");
	return svc && svc_plain ? 0 : 1;
}

static int suite_clean(void)
{
	config_free(&cfg);
	config_free(&cfg_plain);
	return 0;
}

/* JSON from text written with ' for ". */
static struct json_object *jparse(const char *text)
{
	size_t len = strlen(text);
	char *t = malloc(len + 1);
	struct json_tokener *tok = json_tokener_new();
	struct json_object *o;

	for (size_t i = 0; i <= len; i++)
		t[i] = text[i] == '\'' ? '"' : text[i];
	o = json_tokener_parse_ex(tok, t, -1); /* through the NUL */
	if (json_tokener_get_error(tok) != json_tokener_success) {
		fprintf(stderr, "\n  test JSON does not parse: %s\n", text);
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
	free(t);
	return o;
}

static int is_zero(const struct job_spec *s)
{
	static const struct job_spec zero;
	return memcmp(s, &zero, sizeof zero) == 0;
}

/* Parses obj (consumed) for service sv; the JSON is released before the
 * caller looks at the spec, which must not point into it. */
static int run_obj(const struct es_config *c, const struct config_service *sv,
		   struct json_object *obj, struct job_spec *s, const char **code, char *msg,
		   size_t msglen)
{
	int rc = job_spec_parse(c, sv, obj, JOBDIR, s, code, msg, msglen);
	json_object_put(obj);
	return rc;
}

#define expect_ok(text, s) expect_ok_at(__LINE__, &cfg, svc, jparse(text), s)
#define expect_ok_obj(obj, s) expect_ok_at(__LINE__, &cfg, svc, obj, s)
static int expect_ok_at(int line, const struct es_config *c, const struct config_service *sv,
			struct json_object *obj, struct job_spec *s)
{
	const char *code = NULL;
	char msg[256];
	int rc;

	CU_ASSERT_PTR_NOT_NULL_FATAL(obj);
	rc = run_obj(c, sv, obj, s, &code, msg, sizeof msg);
	CU_ASSERT_EQUAL(rc, 0);
	if (rc != 0) {
		fprintf(stderr, "\n  line %d: refused: %s: %s\n", line, code, msg);
		CU_ASSERT(is_zero(s));
	}
	return rc;
}

#define expect_fail(text, code, part) expect_fail_at(__LINE__, jparse(text), code, part)
#define expect_fail_obj(obj, code, part) expect_fail_at(__LINE__, obj, code, part)
static void expect_fail_at(int line, struct json_object *obj, const char *want_code,
			   const char *part)
{
	struct job_spec s;
	const char *code = NULL;
	char msg[256];
	int rc;

	CU_ASSERT_PTR_NOT_NULL_FATAL(obj);
	memset(&s, 0x5a, sizeof s); /* the parser must zero it */
	rc = run_obj(&cfg, svc, obj, &s, &code, msg, sizeof msg);
	CU_ASSERT_EQUAL(rc, -1);
	if (rc == 0) {
		fprintf(stderr, "\n  line %d: accepted, expected %s (%s)\n", line, want_code, part);
		job_spec_free(&s);
		return;
	}
	CU_ASSERT(is_zero(&s));
	CU_ASSERT_PTR_NOT_NULL_FATAL(code);
	CU_ASSERT_STRING_EQUAL(code, want_code);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, part));
	if (strcmp(code, want_code) != 0 || !strstr(msg, part))
		fprintf(stderr, "\n  line %d: got %s: %s\n  expected %s: ...%s...\n", line, code,
			msg, want_code, part);
}

/* The entry every job's environment ends with (docs/progress.md). */
#define PFD "EXECSERVER_PROGRESS_FD=3"

/* Compares a NULL-terminated vector with the expected strings. */
#define expect_vec(v, ...) expect_vec_at(__LINE__, v, (const char *[]){ __VA_ARGS__, NULL })
static void expect_vec_at(int line, char **v, const char **want)
{
	size_t i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(v);
	for (i = 0; want[i] && v[i]; i++) {
		CU_ASSERT_STRING_EQUAL(v[i], want[i]);
		if (strcmp(v[i], want[i]) != 0)
			fprintf(stderr, "\n  line %d: [%zu] is \"%s\", expected \"%s\"\n", line, i,
				v[i], want[i]);
	}
	CU_ASSERT_PTR_NULL(v[i]);
	CU_ASSERT_PTR_NULL(want[i]);
	if (v[i] || want[i])
		fprintf(stderr, "\n  line %d: length differs at [%zu]\n", line, i);
}

/* A job {command: cmd, <key>: <value>} built with json-c. */
static struct json_object *job_with(const char *cmd, const char *key, struct json_object *value)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "command", json_object_new_string(cmd));
	if (key)
		json_object_object_add(o, key, value);
	return o;
}

/* A string of n copies of ch. */
static char *repeat(char ch, size_t n)
{
	char *s = malloc(n + 1);
	memset(s, ch, n);
	s[n] = '\0';
	return s;
}

/* ---- command ---- */

static void test_command(void)
{
	struct job_spec s;

	if (expect_ok("{'command':'echo'}", &s) == 0) {
		CU_ASSERT_PTR_EQUAL(s.command, config_find_command(svc, "echo"));
		expect_vec(s.argv, "echo");
		CU_ASSERT_EQUAL(s.argc, 1);
		CU_ASSERT_PTR_NULL(s.stdin_url);
		CU_ASSERT_PTR_NULL(s.stdout_url);
		CU_ASSERT_PTR_NULL(s.inputs);
		CU_ASSERT_PTR_NULL(s.outputs);
		CU_ASSERT_EQUAL(s.ninputs, 0);
		CU_ASSERT_EQUAL(s.noutputs, 0);
		CU_ASSERT_EQUAL(s.timeout_sec, 0);
		job_spec_free(&s);
		CU_ASSERT(is_zero(&s));
		job_spec_free(&s); /* harmless twice */
	}
	expect_fail("{}", PROTO_E_BAD_JOB, "job.command: a string is required");
	expect_fail("{'command':null}", PROTO_E_BAD_JOB, "job.command: a string is required");
	expect_fail("{'command':7}", PROTO_E_BAD_JOB, "job.command: a string is required");
	expect_fail("{'command':['echo']}", PROTO_E_BAD_JOB, "job.command: a string is required");
	expect_fail("{'command':'cat'}", PROTO_E_UNKNOWN_COMMAND,
		    "job.command: not configured for service s");
	expect_fail("{'command':''}", PROTO_E_UNKNOWN_COMMAND, "job.command: not configured");
	expect_fail("{'command':'ECHO'}", PROTO_E_UNKNOWN_COMMAND, "job.command: not configured");
	expect_fail("{'command':'echo\\u0000x'}", PROTO_E_BAD_JOB,
		    "job.command: must not contain NUL");
	/* a command of another service */
	expect_fail("{'command':'conv '}", PROTO_E_UNKNOWN_COMMAND, "job.command");
}

static void test_job_not_object(void)
{
	expect_fail("['echo']", PROTO_E_BAD_JOB, "job: an object is required");
	expect_fail("'echo'", PROTO_E_BAD_JOB, "job: an object is required");
	expect_fail("12", PROTO_E_BAD_JOB, "job: an object is required");

	struct job_spec s;
	const char *code;
	char msg[128];
	CU_ASSERT_EQUAL(job_spec_parse(&cfg, svc, NULL, JOBDIR, &s, &code, msg, sizeof msg), -1);
	CU_ASSERT_STRING_EQUAL(code, PROTO_E_BAD_JOB);
	CU_ASSERT(is_zero(&s));
}

static void test_jobdir_and_message_buffer(void)
{
	struct json_object *o = jparse("{'command':'echo'}");
	struct job_spec s;
	const char *code = NULL;
	char msg[64];

	CU_ASSERT_EQUAL(job_spec_parse(&cfg, svc, o, "relative/dir", &s, &code, msg, sizeof msg),
			-1);
	CU_ASSERT_STRING_EQUAL(code, PROTO_E_INTERNAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "absolute"));
	CU_ASSERT(is_zero(&s));
	CU_ASSERT_EQUAL(job_spec_parse(&cfg, svc, o, "", &s, &code, msg, sizeof msg), -1);
	CU_ASSERT_STRING_EQUAL(code, PROTO_E_INTERNAL);
	CU_ASSERT_EQUAL(job_spec_parse(&cfg, svc, o, NULL, &s, &code, msg, sizeof msg), -1);
	CU_ASSERT_STRING_EQUAL(code, PROTO_E_INTERNAL);
	/* no message buffer at all */
	code = NULL;
	CU_ASSERT_EQUAL(job_spec_parse(&cfg, svc, o, "x", &s, &code, NULL, 0), -1);
	CU_ASSERT_STRING_EQUAL(code, PROTO_E_INTERNAL);
	/* a short buffer is truncated, still terminated */
	CU_ASSERT_EQUAL(job_spec_parse(&cfg, svc, o, "x", &s, &code, msg, 8), -1);
	CU_ASSERT_EQUAL(strlen(msg), 7);
	json_object_put(o);
}

static void test_unknown_fields_ignored(void)
{
	struct job_spec s;

	if (expect_ok("{'command':'echo','future':{'x':[1,2]},'priority':3,'Args':7,"
		      "'ENV':'x'}",
		      &s) == 0) {
		expect_vec(s.argv, "echo");
		job_spec_free(&s);
	}
}

/* ---- args and placeholders ---- */

static void test_args(void)
{
	struct job_spec s;

	if (expect_ok("{'command':'echo','args':null}", &s) == 0) {
		expect_vec(s.argv, "echo");
		job_spec_free(&s);
	}
	if (expect_ok("{'command':'echo','args':[]}", &s) == 0) {
		expect_vec(s.argv, "echo");
		job_spec_free(&s);
	}
	/* no shell: metacharacters, spaces, quotes, empty strings are plain bytes */
	if (expect_ok("{'command':'echo','args':['a b','$(id)',';','','\\\"x\\\"','*','-n',"
		      "'\\u00fc\\n']}",
		      &s) == 0) {
		expect_vec(s.argv, "echo", "a b", "$(id)", ";", "", "\"x\"", "*", "-n",
			   "\xc3\xbc\n");
		CU_ASSERT_EQUAL(s.argc, 9);
		job_spec_free(&s);
	}
	/* configured args first, then the job's */
	if (expect_ok("{'command':'conv','args':['-out','%jobdir%/out.png']}", &s) == 0) {
		expect_vec(s.argv, "/usr/bin/convert", "-in", JOBDIR "/in", "100%", "-out",
			   JOBDIR "/out.png");
		CU_ASSERT_EQUAL(s.argc, 6);
		job_spec_free(&s);
	}
	expect_fail("{'command':'echo','args':'-n'}", PROTO_E_BAD_JOB,
		    "job.args: an array of strings is required");
	expect_fail("{'command':'echo','args':{'a':1}}", PROTO_E_BAD_JOB,
		    "job.args: an array of strings is required");
	expect_fail("{'command':'echo','args':['a',1]}", PROTO_E_BAD_JOB,
		    "job.args[1]: a string is required");
	expect_fail("{'command':'echo','args':[null]}", PROTO_E_BAD_JOB,
		    "job.args[0]: a string is required");
	expect_fail("{'command':'echo','args':[['a']]}", PROTO_E_BAD_JOB,
		    "job.args[0]: a string is required");
	expect_fail("{'command':'echo','args':['a','b\\u0000c']}", PROTO_E_BAD_JOB,
		    "job.args[1]: must not contain NUL");
}

static void test_placeholders(void)
{
	struct job_spec s;

	/* every %jobdir% is replaced, however often and wherever it appears */
	if (expect_ok("{'command':'echo','args':['%jobdir%','x%jobdir%y','%jobdir%%jobdir%',"
		      "'a%jobdir%b%jobdir%c%jobdir%','%jobdir%/%jobdir%/',"
		      "'%jobdir%%jobdir%%jobdir%','%jobdir%/frame-%03d.png']}",
		      &s) == 0) {
		expect_vec(s.argv, "echo", JOBDIR, "x" JOBDIR "y", JOBDIR JOBDIR,
			   "a" JOBDIR "b" JOBDIR "c" JOBDIR, JOBDIR "/" JOBDIR "/",
			   JOBDIR JOBDIR JOBDIR, JOBDIR "/frame-%03d.png");
		job_spec_free(&s);
	}
	/* every other % is literal text, "%%" included */
	if (expect_ok("{'command':'echo','args':['%%','%d','%03d','50%','%','%%%','%jobdir',"
		      "'jobdir%','%JOBDIR%','%Jobdir%','%jobdir %','%home%','%Y-%m-%d','%w',"
		      "'a%%%%b','-resize','50%x50%']}",
		      &s) == 0) {
		expect_vec(s.argv, "echo", "%%", "%d", "%03d", "50%", "%", "%%%", "%jobdir",
			   "jobdir%", "%JOBDIR%", "%Jobdir%", "%jobdir %", "%home%", "%Y-%m-%d",
			   "%w", "a%%%%b", "-resize", "50%x50%");
		job_spec_free(&s);
	}
	/* literal % next to %jobdir%: one pass from the left, first match wins */
	if (expect_ok("{'command':'echo','args':['%jobdir%%','%%jobdir%','%%jobdir%%',"
		      "'%%%jobdir%','x%jobdir%%d','%jobdir%jobdir%','%jobdir%%jobdir']}",
		      &s) == 0) {
		expect_vec(s.argv, "echo", JOBDIR "%", "%" JOBDIR, "%" JOBDIR "%", "%%" JOBDIR,
			   "x" JOBDIR "%d", JOBDIR "jobdir%", JOBDIR "%jobdir");
		job_spec_free(&s);
	}
	/* configured args follow the same rule, before the job's */
	if (expect_ok("{'command':'percent','args':['%jobdir%','%%','%jobdir%%jobdir%']}", &s) ==
	    0) {
		expect_vec(s.argv, "x", JOBDIR JOBDIR, "in=" JOBDIR "/a,out=" JOBDIR "/b", "%%",
			   "50%", "%03d", "%home%", "%jobdir", "%JOBDIR%", JOBDIR "%", JOBDIR, "%%",
			   JOBDIR JOBDIR);
		CU_ASSERT_EQUAL(s.argc, 13);
		job_spec_free(&s);
	}

	/* the job directory is inserted as it is, never scanned again */
	static const char *const dirs[] = { "/tmp/a%b%%c%", "/tmp/%jobdir%/x%jobdir%" };
	for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
		struct json_object *o = jparse("{'command':'echo','args':['%jobdir%','%%']}");
		const char *code;
		char msg[128];
		CU_ASSERT_EQUAL_FATAL(
			job_spec_parse(&cfg, svc, o, dirs[i], &s, &code, msg, sizeof msg), 0);
		expect_vec(s.argv, "echo", dirs[i], "%%");
		job_spec_free(&s);
		json_object_put(o);
	}

	/* a literal % is one byte of the limit: "echo\0" and 131066 of them fill it
	 * exactly ("%%" is two bytes now, not one), one more is refused */
	struct json_object *args;
	char *pct = repeat('%', 131066);
	args = json_object_new_array();
	json_object_array_add(args, json_object_new_string(pct));
	if (expect_ok_obj(job_with("echo", "args", args), &s) == 0) {
		CU_ASSERT_EQUAL(strlen(s.argv[1]), 131066);
		CU_ASSERT_EQUAL(strspn(s.argv[1], "%"), 131066);
		job_spec_free(&s);
	}
	free(pct);
	pct = repeat('%', 131067);
	args = json_object_new_array();
	json_object_array_add(args, json_object_new_string(pct));
	expect_fail_obj(job_with("echo", "args", args), PROTO_E_BAD_JOB,
			"job.args[0]: the command line would be longer than 131072 bytes");
	free(pct);

	/* many placeholders among literal %: still counted expanded, and refused
	 * without building it ("%jobdir%%" is 9 bytes that expand to 33) */
	size_t copies = 100000;
	char *arg = malloc(copies * 9 + 1);
	for (size_t i = 0; i < copies; i++)
		memcpy(arg + i * 9, "%jobdir%%", 10);
	args = json_object_new_array();
	json_object_array_add(args, json_object_new_string("ok"));
	json_object_array_add(args, json_object_new_string(arg));
	expect_fail_obj(job_with("echo", "args", args), PROTO_E_BAD_JOB,
			"job.args[1]: the command line would be longer than 131072 bytes");
	/* just below the limit: 3971 copies are 131043 bytes, + "echo\0" + "ok\0" */
	arg[3971 * 9] = '\0';
	args = json_object_new_array();
	json_object_array_add(args, json_object_new_string("ok"));
	json_object_array_add(args, json_object_new_string(arg));
	if (expect_ok_obj(job_with("echo", "args", args), &s) == 0) {
		CU_ASSERT_EQUAL(strlen(s.argv[2]), 3971 * 33);
		CU_ASSERT_EQUAL(strncmp(s.argv[2], JOBDIR "%" JOBDIR "%", 66), 0);
		job_spec_free(&s);
	}
	free(arg);
}

/* argv: at most 256 entries and 131072 bytes (strlen + 1 of each). */
static void test_argv_limits(void)
{
	struct job_spec s;
	struct json_object *args;

	/* "echo" + 255 args = 256 entries */
	args = json_object_new_array();
	for (int i = 0; i < 255; i++)
		json_object_array_add(args, json_object_new_string("a"));
	if (expect_ok_obj(job_with("echo", "args", args), &s) == 0) {
		CU_ASSERT_EQUAL(s.argc, 256);
		CU_ASSERT_PTR_NULL(s.argv[256]);
		CU_ASSERT_STRING_EQUAL(s.argv[255], "a");
		job_spec_free(&s);
	}
	args = json_object_new_array();
	for (int i = 0; i < 256; i++)
		json_object_array_add(args, json_object_new_string("a"));
	expect_fail_obj(job_with("echo", "args", args), PROTO_E_BAD_JOB,
			"job.args[255]: the command line would have more than 256 entries");
	/* conv has 3 configured args: 4 + 252 = 256 */
	args = json_object_new_array();
	for (int i = 0; i < 252; i++)
		json_object_array_add(args, json_object_new_string(""));
	if (expect_ok_obj(job_with("conv", "args", args), &s) == 0) {
		CU_ASSERT_EQUAL(s.argc, 256);
		job_spec_free(&s);
	}
	args = json_object_new_array();
	for (int i = 0; i < 253; i++)
		json_object_array_add(args, json_object_new_string(""));
	expect_fail_obj(job_with("conv", "args", args), PROTO_E_BAD_JOB,
			"job.args[252]: the command line would have more than 256 entries");

	/* bytes: "echo\0" is 5, so one argument of 131066 bytes fills it exactly */
	char *big = repeat('b', 131066);
	args = json_object_new_array();
	json_object_array_add(args, json_object_new_string(big));
	if (expect_ok_obj(job_with("echo", "args", args), &s) == 0) {
		CU_ASSERT_EQUAL(strlen(s.argv[1]), 131066);
		job_spec_free(&s);
	}
	big[131066 - 1] = '\0';
	args = json_object_new_array();
	json_object_array_add(args, json_object_new_string(big)); /* 131065 */
	json_object_array_add(args, json_object_new_string(""));  /* + 1 = exactly full */
	if (expect_ok_obj(job_with("echo", "args", args), &s) == 0) {
		CU_ASSERT_EQUAL(s.argc, 3);
		job_spec_free(&s);
	}
	args = json_object_new_array();
	json_object_array_add(args, json_object_new_string(big));
	json_object_array_add(args, json_object_new_string("c")); /* one byte past */
	expect_fail_obj(job_with("echo", "args", args), PROTO_E_BAD_JOB,
			"job.args[1]: the command line would be longer than 131072 bytes");
	free(big);
	big = repeat('b', 131067);
	args = json_object_new_array();
	json_object_array_add(args, json_object_new_string(big));
	expect_fail_obj(job_with("echo", "args", args), PROTO_E_BAD_JOB,
			"job.args[0]: the command line would be longer than 131072 bytes");
	free(big);

	/* the limit counts the expanded text: 4095 copies of the 32-byte JOBDIR
	 * (131040 bytes) and 26 more make the 131066 that fill it exactly */
	CU_ASSERT_EQUAL_FATAL(strlen(JOBDIR), 32);
	size_t copies = 4095, off = 0;
	char *arg = malloc(copies * 8 + 32);
	for (size_t i = 0; i < copies; i++, off += 8)
		memcpy(arg + off, "%jobdir%", 8);
	memcpy(arg + off, "01234567890123456789012345", 27);
	args = json_object_new_array();
	json_object_array_add(args, json_object_new_string(arg));
	if (expect_ok_obj(job_with("echo", "args", args), &s) == 0) {
		CU_ASSERT_EQUAL(strlen(s.argv[1]), 131066);
		CU_ASSERT_EQUAL(strncmp(s.argv[1], JOBDIR JOBDIR, 64), 0);
		job_spec_free(&s);
	}
	strcat(arg, "6"); /* one past */
	args = json_object_new_array();
	json_object_array_add(args, json_object_new_string(arg));
	expect_fail_obj(job_with("echo", "args", args), PROTO_E_BAD_JOB,
			"job.args[0]: the command line would be longer than 131072 bytes");
	/* far more copies than fit: refused without building it */
	arg = realloc(arg, 200000 * 8 + 1);
	arg[0] = '\0';
	for (size_t i = 0, n = 0; i < 200000; i++, n += 8)
		memcpy(arg + n, "%jobdir%", 9);
	args = json_object_new_array();
	json_object_array_add(args, json_object_new_string(arg));
	expect_fail_obj(job_with("echo", "args", args), PROTO_E_BAD_JOB,
			"longer than 131072 bytes");
	free(arg);
}

/* ---- env ---- */

static void test_env_merge(void)
{
	struct job_spec s;

	/* the fixed PATH alone */
	if (expect_ok_at(__LINE__, &cfg_plain, svc_plain, jparse("{'command':'echo'}"), &s) == 0) {
		expect_vec(s.envp, "PATH=/usr/local/bin:/usr/bin:/bin", PFD);
		CU_ASSERT_EQUAL(s.envc, 2);
		job_spec_free(&s);
	}
	/* the job's env after the fixed PATH */
	if (expect_ok_at(__LINE__, &cfg_plain, svc_plain,
			 jparse("{'command':'echo','env':['A=1','B=']}"), &s) == 0) {
		expect_vec(s.envp, "PATH=/usr/local/bin:/usr/bin:/bin", "A=1", "B=", PFD);
		job_spec_free(&s);
	}
	/* global env overrides the fixed PATH, keeps its place */
	if (expect_ok("{'command':'echo','env':null}", &s) == 0) {
		expect_vec(s.envp, "PATH=/opt/bin", "LC_ALL=C.UTF-8", "GLOBAL=g", "SHARED=global",
			   PFD);
		CU_ASSERT_EQUAL(s.envc, 5);
		job_spec_free(&s);
	}
	/* command env overrides global; job env overrides both */
	if (expect_ok("{'command':'conv'}", &s) == 0) {
		expect_vec(s.envp, "PATH=/opt/bin", "LC_ALL=C.UTF-8", "GLOBAL=g", "SHARED=command",
			   "CMD=c", PFD);
		job_spec_free(&s);
	}
	if (expect_ok("{'command':'conv','env':['SHARED=job','J=1','LC_ALL=de_DE.UTF-8',"
		      "'CMD=','X=a=b=c','NL=line1\\nline2','U=\\u00fc']}",
		      &s) == 0) {
		expect_vec(s.envp, "PATH=/opt/bin", "LC_ALL=de_DE.UTF-8", "GLOBAL=g", "SHARED=job",
			   "CMD=", "J=1", "X=a=b=c", "NL=line1\nline2", "U=\xc3\xbc", PFD);
		CU_ASSERT_EQUAL(s.envc, 10);
		job_spec_free(&s);
	}
	/* names are case-sensitive for the merge */
	if (expect_ok("{'command':'echo','env':['global=x']}", &s) == 0) {
		expect_vec(s.envp, "PATH=/opt/bin", "LC_ALL=C.UTF-8", "GLOBAL=g", "SHARED=global",
			   "global=x", PFD);
		job_spec_free(&s);
	}
}

static void test_env_invalid(void)
{
	expect_fail("{'command':'echo','env':'A=1'}", PROTO_E_BAD_JOB,
		    "job.env: an array of NAME=value strings is required");
	expect_fail("{'command':'echo','env':{'A':'1'}}", PROTO_E_BAD_JOB,
		    "job.env: an array of NAME=value strings is required");
	expect_fail("{'command':'echo','env':['A=1',2]}", PROTO_E_BAD_JOB,
		    "job.env[1]: a string NAME=value is required");
	expect_fail("{'command':'echo','env':[null]}", PROTO_E_BAD_JOB,
		    "job.env[0]: a string NAME=value is required");
	static const char *const bad_names[] = {
		"A",     "=1",   "1A=x",       "A-B=x",       "A B=x",
		"A.B=x", " A=x", "\\u00fcA=x", "A\\u0000B=x", "",
	};
	for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
		char text[128];
		snprintf(text, sizeof text, "{'command':'echo','env':['OK=1','%s']}", bad_names[i]);
		expect_fail(
			text, PROTO_E_BAD_JOB,
			strstr(bad_names[i], "\\u0000")
				? "job.env[1]: must not contain NUL"
				: "job.env[1]: NAME=value is required, NAME of A-Z a-z 0-9 _ not "
				  "starting with a digit");
	}
	expect_fail("{'command':'echo','env':['A=1\\u0000']}", PROTO_E_BAD_JOB,
		    "job.env[0]: must not contain NUL");
	expect_fail("{'command':'echo','env':['A=1','B=2','A=3']}", PROTO_E_BAD_JOB,
		    "job.env[2]: duplicate name A (first at job.env[0])");
	/* A and AB are different names */
	struct job_spec s;
	if (expect_ok("{'command':'echo','env':['A=1','AB=2','_=3','_A1=4','a=5']}", &s) == 0)
		job_spec_free(&s);
}

static void test_env_limits(void)
{
	struct job_spec s;
	struct json_object *env;
	char entry[32];

	env = json_object_new_array();
	for (int i = 0; i < 64; i++) {
		snprintf(entry, sizeof entry, "V%d=%d", i, i);
		json_object_array_add(env, json_object_new_string(entry));
	}
	if (expect_ok_obj(job_with("echo", "env", env), &s) == 0) {
		CU_ASSERT_EQUAL(s.envc, 4 + 64 + 1);
		CU_ASSERT_STRING_EQUAL(s.envp[4 + 63], "V63=63");
		job_spec_free(&s);
	}
	env = json_object_new_array();
	for (int i = 0; i < 65; i++) {
		snprintf(entry, sizeof entry, "V%d=%d", i, i);
		json_object_array_add(env, json_object_new_string(entry));
	}
	expect_fail_obj(job_with("echo", "env", env), PROTO_E_BAD_JOB,
			"job.env: at most 64 entries");

	/* one entry: 4096 bytes, "K=" + 4094 */
	char *big = repeat('v', 4096);
	big[0] = 'K';
	big[1] = '=';
	env = json_object_new_array();
	json_object_array_add(env, json_object_new_string(big));
	if (expect_ok_obj(job_with("echo", "env", env), &s) == 0) {
		CU_ASSERT_EQUAL(strlen(s.envp[4]), 4096);
		job_spec_free(&s);
	}
	free(big);
	big = repeat('v', 4097);
	big[0] = 'K';
	big[1] = '=';
	env = json_object_new_array();
	json_object_array_add(env, json_object_new_string(big));
	expect_fail_obj(job_with("echo", "env", env), PROTO_E_BAD_JOB,
			"job.env[0]: longer than 4096 bytes");
	/* a name of 4095 bytes: "N...N=" */
	memset(big, 'N', 4095);
	big[4095] = '=';
	big[4096] = '\0';
	env = json_object_new_array();
	json_object_array_add(env, json_object_new_string(big));
	if (expect_ok_obj(job_with("echo", "env", env), &s) == 0)
		job_spec_free(&s);
	free(big);
}

/* Every refused name, written out here independently of the table in
 * job_spec.c, each alone and at a later index, in upper and lower case. */
static void test_env_refused(void)
{
	static const char *const refused[] = {
		"PATH",
		"LD_PRELOAD",
		"LD_LIBRARY_PATH",
		"LD_AUDIT",
		"LD_DEBUG",
		"LD_BIND_NOW",
		"LD_",
		"GCONV_PATH",
		"GETCONF_DIR",
		"GLIBC_TUNABLES",
		"MALLOC_CHECK_",
		"MALLOC_TRACE",
		"MALLOC_ARENA_MAX",
		"MALLOC_",
		"LOCPATH",
		"NLSPATH",
		"TZDIR",
		"HOSTALIASES",
		"LOCALDOMAIN",
		"RES_OPTIONS",
		"RESOLV_HOST_CONF",
		"http_proxy",
		"HTTP_PROXY",
		"https_proxy",
		"HTTPS_PROXY",
		"ALL_PROXY",
		"all_proxy",
		"no_proxy",
		"NO_PROXY",
		"ftp_proxy",
		"SSL_CERT_FILE",
		"SSL_CERT_DIR",
		"OPENSSL_CONF",
		"OPENSSL_ENGINES",
		"OPENSSL_MODULES",
		"TMPDIR",
		"HOME",
		"XDG_CONFIG_HOME",
		"XDG_DATA_DIRS",
		"XDG_CONFIG_DIRS",
		"IFS",
		"BASH_ENV",
		"ENV",
		"SHELLOPTS",
		"BASHOPTS",
		"PS4",
		"CDPATH",
		"PYTHONPATH",
		"PYTHONHOME",
		"PYTHONSTARTUP",
		"PYTHONUSERBASE",
		"PYTHONBREAKPOINT",
		"PERL5LIB",
		"PERLLIB",
		"PERL5OPT",
		"PERL5DB",
		"RUBYLIB",
		"RUBYOPT",
		"NODE_OPTIONS",
		"NODE_PATH",
		"CLASSPATH",
		"JAVA_TOOL_OPTIONS",
		"_JAVA_OPTIONS",
		"JDK_JAVA_OPTIONS",
		"GS_OPTIONS",
		"GS_LIB",
		"MAGICK_CONFIGURE_PATH",
		"MAGICK_CODER_MODULE_PATH",
		"MAGICK_HOME",
		"FFREPORT",
		"EXECSERVER_PROGRESS_FD",
	};
	for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
		char text[256], want[128], lower[64];
		size_t j;

		snprintf(text, sizeof text, "{'command':'echo','env':['%s=x']}", refused[i]);
		snprintf(want, sizeof want, "job.env[0]: %s may not be set by a job (", refused[i]);
		expect_fail(text, PROTO_E_BAD_JOB, want);
		snprintf(text, sizeof text, "{'command':'echo','env':['A=1','B=2','%s=']}",
			 refused[i]);
		snprintf(want, sizeof want, "job.env[2]: %s may not be set by a job (", refused[i]);
		expect_fail(text, PROTO_E_BAD_JOB, want);
		for (j = 0; refused[i][j] && j < sizeof lower - 1; j++)
			lower[j] = (char)(refused[i][j] >= 'A' && refused[i][j] <= 'Z'
						  ? refused[i][j] - 'A' + 'a'
						  : refused[i][j]);
		lower[j] = '\0';
		snprintf(text, sizeof text, "{'command':'echo','env':['%s=x']}", lower);
		snprintf(want, sizeof want, "job.env[0]: %s may not be set by a job (", lower);
		expect_fail(text, PROTO_E_BAD_JOB, want);
	}
	/* neighbours that are fine: the list is not broader than documented */
	struct job_spec s;
	if (expect_ok("{'command':'echo','env':['LANG=C','LC_ALL=C','TZ=Europe/Berlin','TERM=x',"
		      "'MYPATH=/x','PATH2=y','XPATH=z','ENVIRONMENT=prod','LD=1','XDG=1',"
		      "'HOMEDIR=/h','PS1=$','NODE_ENV=production','GS=1','MAGICK=1','PROXY=p',"
		      "'PROXY_HOST=h','SSL_VERIFY=1','JAVA_HOME=/j','IFS2=1','TMP=/t','TEMP=/t',"
		      "'MALLOC=1','PYTHO=1','PER=1','RUB=1']}",
		      &s) == 0) {
		CU_ASSERT_EQUAL(s.envc, 4 + 25 + 1); /* LC_ALL replaced; the progress fd */
		job_spec_free(&s);
	}
	/* the operator may set any of them in the configuration: PATH is set there */
	if (expect_ok("{'command':'echo'}", &s) == 0) {
		CU_ASSERT_STRING_EQUAL(s.envp[0], "PATH=/opt/bin");
		job_spec_free(&s);
	}
}

/* ---- URLs ---- */

struct url_case {
	const char *url;
	const char *host; /* NULL: refused */
	unsigned port;
	const char *norm; /* the stored URL (when accepted) or a word of the message */
};

static const struct url_case url_cases[] = {
	{ "http://example.com/x", "example.com", 80, "http://example.com/x" },
	{ "https://example.com/a/b?c=d#e", "example.com", 443, "https://example.com/a/b?c=d#e" },
	{ "HTTP://EXAMPLE.COM:8080", "example.com", 8080, "http://EXAMPLE.COM:8080/" },
	{ "Https://Files.Example.COM./x", "files.example.com", 443,
	  "https://Files.Example.COM./x" },
	{ "http://10.1.2.3:65535/p", "10.1.2.3", 65535, "http://10.1.2.3:65535/p" },
	{ "http://0x7f.1/", "127.0.0.1", 80, "http://127.0.0.1/" },
	{ "http://2130706433/", "127.0.0.1", 80, "http://127.0.0.1/" },
	{ "http://127.1:1/", "127.0.0.1", 1, "http://127.0.0.1:1/" },
	{ "http://[::1]:8080/x", "::1", 8080, "http://[::1]:8080/x" },
	{ "http://[FE80::A:1]/", "fe80::a:1", 80, NULL },
	{ "http://[::FFFF:127.0.0.1]/", "::ffff:127.0.0.1", 80, NULL },
	{ "http://%6c%6fcalhost/", "localhost", 80, "http://localhost/" },
	{ "http://xn--bcher-kva.de/", "xn--bcher-kva.de", 80, NULL },
	{ "http://a_b-c.d/", "a_b-c.d", 80, NULL },
	{ "http://h:/", "h", 80, "http://h/" },
	{ "http:/h/x", "h", 80, "http://h/x" },
	{ "http://h/%2e%2e/x y", NULL, 0, "not a valid URL" },
	/* %-escapes in the host: libcurl 7.88 decodes them after it has
	 * normalized numeric IPv4 forms, so these would be written out as
	 * http://3/, http://0x7f.1/, http://2130706433/ and connect to 0.0.0.3
	 * and 127.0.0.1 (the fuzz finding of issue 17); an escaped host that
	 * reads the same again is fine */
	{ "http:/%33/127.0.0.1:8080/1", NULL, 0,
	  "the host changes when the normalized URL is read again (write the host without "
	  "%-escapes)" },
	{ "http://%33/", NULL, 0, "the host changes when the normalized URL is read again" },
	{ "http://%30x7f.1/", NULL, 0, "the host changes when the normalized URL is read again" },
	{ "http://%32130706433:81/", NULL, 0, "the host changes when the normalized URL" },
	{ "http://%31%32%37.0.0.1/x", "127.0.0.1", 80, "http://127.0.0.1/x" },
	/* an empty label: with one trailing dot removed here and one more by
	 * callbackAllow's name match, files.example.com.. would pass as
	 * files.example.com, a name libcurl does not resolve */
	{ "http://files.example.com../", NULL, 0, "the host has an empty label" },
	{ "http://files..example.com/", NULL, 0, "the host has an empty label" },
	{ "http://.example.com/", NULL, 0, "the host has an empty label" },
	{ "http://%2eexample.com./", NULL, 0, "the host has an empty label" },
	/* refused schemes */
	{ "file:///etc/passwd", NULL, 0, "the scheme must be http or https" },
	{ "FILE:///etc/passwd", NULL, 0, "the scheme must be http or https" },
	{ "file://localhost/etc/passwd", NULL, 0, "the scheme must be http or https" },
	{ "ftp://example.com/x", NULL, 0, "the scheme must be http or https" },
	{ "gopher://example.com/_x", NULL, 0, "the scheme must be http or https" },
	{ "dict://example.com:11211/", NULL, 0, "the scheme must be http or https" },
	{ "ws://example.com/", NULL, 0, "the scheme must be http or https" },
	{ "javascript:alert(1)", NULL, 0, "the scheme must be http or https" },
	{ "data:text/plain,hi", NULL, 0, "the scheme must be http or https" },
	{ "example.com/x", NULL, 0, "the scheme must be http or https" },
	{ "//example.com/x", NULL, 0, "the scheme must be http or https" },
	{ "/x", NULL, 0, "the scheme must be http or https" },
	{ "", NULL, 0, "the scheme must be http or https" },
	{ " http://h/", NULL, 0, "the scheme must be http or https" },
	{ "httpx://h/", NULL, 0, "the scheme must be http or https" },
	/* credentials */
	{ "http://user:pw@example.com/", NULL, 0, "must not contain a user name or password" },
	{ "http://user@example.com/", NULL, 0, "must not contain a user name or password" },
	{ "http://@example.com/", NULL, 0, "must not contain a user name or password" },
	{ "http://:@example.com/", NULL, 0, "must not contain a user name or password" },
	{ "http://:pw@example.com/", NULL, 0, "must not contain a user name or password" },
	{ "http://example.com:80@evil.test/", NULL, 0, "must not contain a user name" },
	{ "https://u%40x:p@h/", NULL, 0, "must not contain a user name or password" },
	/* hosts */
	{ "http://[fe80::1%25eth0]/", NULL, 0, "IPv6 zone ids are not accepted" },
	{ "http://b\xc3\xbc"
	  "cher.de/",
	  NULL, 0, "the host must be an ASCII host name" },
	{ "http://h;opt/", NULL, 0, "not a valid URL" },
	{ "http://exa mple.com/", NULL, 0, "not a valid URL" },
	{ "http://[::1/", NULL, 0, "not a valid URL" },
	{ "http://h%2fx/", NULL, 0, "not a valid URL" },
	{ "http:h", NULL, 0, "not a valid URL" },
	{ "http://./", NULL, 0, "the host is empty" },
	/* ports */
	{ "http://h:0/", NULL, 0, "the port must be from 1 to 65535" },
	{ "http://h:65536/", NULL, 0, "not a valid URL" },
	{ "http://h:-1/", NULL, 0, "not a valid URL" },
	{ "http://h:8o/", NULL, 0, "not a valid URL" },
};

static void test_urls(void)
{
	for (size_t i = 0; i < sizeof url_cases / sizeof url_cases[0]; i++) {
		const struct url_case *uc = &url_cases[i];
		struct json_object *o;
		struct job_spec s;
		char host[JOB_SPEC_HOST_MAX];

		/* stdin, stdout, an input and an output each follow the same rules */
		for (int field = 0; field < 4; field++) {
			static const char *const labels[] = { "job.stdin: ", "job.stdout: ",
							      "job.inputs[0].url: ",
							      "job.outputs[0].url: " };
			struct json_object *v = json_object_new_string(uc->url), *arr, *f;
			switch (field) {
			case 0: o = job_with("echo", "stdin", v); break;
			case 1: o = job_with("echo", "stdout", v); break;
			default:
				f = json_object_new_object();
				json_object_object_add(f, "name", json_object_new_string("f"));
				json_object_object_add(f, "url", v);
				arr = json_object_new_array();
				json_object_array_add(arr, f);
				o = job_with("echo", field == 2 ? "inputs" : "outputs", arr);
				break;
			}
			if (!uc->host) {
				char want[160];
				snprintf(want, sizeof want, "%s%s", labels[field], uc->norm);
				expect_fail_obj(o, PROTO_E_BAD_JOB, want);
				continue;
			}
			if (expect_ok_obj(o, &s) != 0) {
				fprintf(stderr, "  (url %s)\n", uc->url);
				continue;
			}
			const char *url = field == 0   ? s.stdin_url
					  : field == 1 ? s.stdout_url
					  : field == 2 ? s.inputs[0].url
						       : s.outputs[0].url;
			const char *h = field == 0   ? s.stdin_host
					: field == 1 ? s.stdout_host
					: field == 2 ? s.inputs[0].host
						     : s.outputs[0].host;
			unsigned port = field == 0   ? s.stdin_port
					: field == 1 ? s.stdout_port
					: field == 2 ? s.inputs[0].port
						     : s.outputs[0].port;
			CU_ASSERT_STRING_EQUAL(h, uc->host);
			CU_ASSERT_EQUAL(port, uc->port);
			/* the stored URL, which libcurl connects to, names the same host */
			CU_ASSERT_EQUAL(job_spec_url_host(url, host, sizeof host), 0);
			CU_ASSERT_STRING_EQUAL(host, h);
			if (uc->norm)
				CU_ASSERT_STRING_EQUAL(url, uc->norm);
			if (strcmp(h, uc->host) != 0 || port != uc->port ||
			    (uc->norm && strcmp(url, uc->norm) != 0))
				fprintf(stderr, "\n  url %s: host %s port %u url %s\n", uc->url, h,
					port, url);
			job_spec_free(&s);
		}
		/* job_spec_url_host applies the same rules */
		errno = 0;
		int rc = job_spec_url_host(uc->url, host, sizeof host);
		CU_ASSERT_EQUAL(rc, uc->host ? 0 : -1);
		if (uc->host && rc == 0)
			CU_ASSERT_STRING_EQUAL(host, uc->host);
		if (!uc->host)
			CU_ASSERT_EQUAL(errno, EINVAL);
		if (rc != (uc->host ? 0 : -1))
			fprintf(stderr, "\n  job_spec_url_host(%s) = %d\n", uc->url, rc);
	}
}

static void test_url_fields(void)
{
	struct job_spec s;

	if (expect_ok("{'command':'echo','stdin':null,'stdout':null}", &s) == 0) {
		CU_ASSERT_PTR_NULL(s.stdin_url);
		CU_ASSERT_PTR_NULL(s.stdout_url);
		CU_ASSERT_STRING_EQUAL(s.stdin_host, "");
		job_spec_free(&s);
	}
	if (expect_ok("{'command':'echo','stdin':'http://In.example/a',"
		      "'stdout':'https://[2001:DB8::1]:8443/put?x=1'}",
		      &s) == 0) {
		CU_ASSERT_STRING_EQUAL(s.stdin_url, "http://In.example/a");
		CU_ASSERT_STRING_EQUAL(s.stdin_host, "in.example");
		CU_ASSERT_EQUAL(s.stdin_port, 80);
		CU_ASSERT_STRING_EQUAL(s.stdout_url, "https://[2001:DB8::1]:8443/put?x=1");
		CU_ASSERT_STRING_EQUAL(s.stdout_host, "2001:db8::1");
		CU_ASSERT_EQUAL(s.stdout_port, 8443);
		job_spec_free(&s);
	}
	static const char *const not_strings[] = { "7", "true", "{}", "['http://h/']", "1.5" };
	for (size_t i = 0; i < sizeof not_strings / sizeof not_strings[0]; i++) {
		char text[128];
		snprintf(text, sizeof text, "{'command':'echo','stdin':%s}", not_strings[i]);
		expect_fail(text, PROTO_E_BAD_JOB, "job.stdin: a URL string or null is required");
		snprintf(text, sizeof text, "{'command':'echo','stdout':%s}", not_strings[i]);
		expect_fail(text, PROTO_E_BAD_JOB, "job.stdout: a URL string or null is required");
	}
	expect_fail("{'command':'echo','stdin':'http://h/\\u0000x'}", PROTO_E_BAD_JOB,
		    "job.stdin: must not contain NUL");
	expect_fail("{'command':'echo','stdout':'http://h\\u0000.evil/'}", PROTO_E_BAD_JOB,
		    "job.stdout: must not contain NUL");
}

static void test_url_limits(void)
{
	struct job_spec s;
	char host[JOB_SPEC_HOST_MAX];

	/* 4096 bytes exactly, then one more */
	char *url = repeat('a', 4097);
	memcpy(url, "http://h/", 9);
	url[4096] = '\0';
	if (expect_ok_obj(job_with("echo", "stdin", json_object_new_string(url)), &s) == 0) {
		CU_ASSERT_EQUAL(strlen(s.stdin_url), 4096);
		job_spec_free(&s);
	}
	CU_ASSERT_EQUAL(job_spec_url_host(url, host, sizeof host), 0);
	url[4096] = 'a';
	expect_fail_obj(job_with("echo", "stdin", json_object_new_string(url)), PROTO_E_BAD_JOB,
			"job.stdin: longer than 4096 bytes");
	errno = 0;
	CU_ASSERT_EQUAL(job_spec_url_host(url, host, sizeof host), -1);
	CU_ASSERT_EQUAL(errno, EINVAL);
	free(url);

	/* a host of 255 bytes, then 256 */
	char buf[300], name[260];
	memset(name, 'h', 255);
	for (int i = 50; i < 255; i += 50)
		name[i] = '.';
	name[255] = '\0';
	snprintf(buf, sizeof buf, "http://%s/", name);
	if (expect_ok_obj(job_with("echo", "stdout", json_object_new_string(buf)), &s) == 0) {
		CU_ASSERT_STRING_EQUAL(s.stdout_host, name);
		job_spec_free(&s);
	}
	/* the buffer must hold the host and its NUL */
	CU_ASSERT_EQUAL(job_spec_url_host(buf, host, 256), 0);
	CU_ASSERT_STRING_EQUAL(host, name);
	errno = 0;
	CU_ASSERT_EQUAL(job_spec_url_host(buf, host, 255), -1);
	CU_ASSERT_EQUAL(errno, ERANGE);
	name[255] = 'h';
	name[256] = '\0';
	snprintf(buf, sizeof buf, "http://%s/", name);
	expect_fail_obj(job_with("echo", "stdout", json_object_new_string(buf)), PROTO_E_BAD_JOB,
			"job.stdout: the host is longer than 255 bytes");
	/* a 255-byte host with the trailing dot that is removed */
	name[255] = '.';
	snprintf(buf, sizeof buf, "http://%s/", name);
	CU_ASSERT_EQUAL(job_spec_url_host(buf, host, sizeof host), -1);
	name[254] = '.';
	name[255] = '\0';
	snprintf(buf, sizeof buf, "http://%s/", name);
	CU_ASSERT_EQUAL(job_spec_url_host(buf, host, sizeof host), 0);
	CU_ASSERT_EQUAL(strlen(host), 254);

	CU_ASSERT_EQUAL(job_spec_url_host("http://a/", host, 2), 0);
	CU_ASSERT_STRING_EQUAL(host, "a");
	errno = 0;
	CU_ASSERT_EQUAL(job_spec_url_host("http://ab/", host, 2), -1);
	CU_ASSERT_EQUAL(errno, ERANGE);
	errno = 0;
	CU_ASSERT_EQUAL(job_spec_url_host(NULL, host, sizeof host), -1);
	CU_ASSERT_EQUAL(errno, EINVAL);
}

/* ---- inputs and outputs ---- */

static void test_files(void)
{
	struct job_spec s;

	if (expect_ok("{'command':'echo','inputs':[{'name':'in.jpg','url':'http://A.test/1',"
		      "'size':12},{'name':'.hidden','url':'https://b.test/2'}],"
		      "'outputs':[{'name':'in.jpg','url':'http://c.test:81/put'}]}",
		      &s) == 0) {
		CU_ASSERT_EQUAL_FATAL(s.ninputs, 2);
		CU_ASSERT_EQUAL_FATAL(s.noutputs, 1);
		CU_ASSERT_STRING_EQUAL(s.inputs[0].name, "in.jpg");
		CU_ASSERT_STRING_EQUAL(s.inputs[0].url, "http://A.test/1");
		CU_ASSERT_STRING_EQUAL(s.inputs[0].host, "a.test");
		CU_ASSERT_EQUAL(s.inputs[0].port, 80);
		CU_ASSERT_STRING_EQUAL(s.inputs[1].name, ".hidden");
		CU_ASSERT_EQUAL(s.inputs[1].port, 443);
		CU_ASSERT_STRING_EQUAL(s.outputs[0].name, "in.jpg");
		CU_ASSERT_STRING_EQUAL(s.outputs[0].host, "c.test");
		CU_ASSERT_EQUAL(s.outputs[0].port, 81);
		job_spec_free(&s);
	}
	if (expect_ok("{'command':'echo','inputs':[],'outputs':null}", &s) == 0) {
		CU_ASSERT_EQUAL(s.ninputs, 0);
		CU_ASSERT_PTR_NULL(s.inputs);
		job_spec_free(&s);
	}
	/* names that are plain: dots, dashes, backslash, spaces, UTF-8, 255 bytes */
	if (expect_ok("{'command':'echo','inputs':[{'name':'...','url':'http://h/'},"
		      "{'name':'-rf','url':'http://h/'},{'name':'a\\\\b','url':'http://h/'},"
		      "{'name':' x y "
		      "','url':'http://h/'},{'name':'\\u00fcber.txt','url':'http://h/'},"
		      "{'name':'.x.','url':'http://h/'},{'name':'~','url':'http://h/'},"
		      "{'name':'%jobdir%','url':'http://h/'}]}",
		      &s) == 0) {
		CU_ASSERT_EQUAL(s.ninputs, 8);
		CU_ASSERT_STRING_EQUAL(s.inputs[2].name, "a\\b");
		CU_ASSERT_STRING_EQUAL(s.inputs[4].name, "\xc3\xbc"
							 "ber.txt");
		CU_ASSERT_STRING_EQUAL(s.inputs[7].name, "%jobdir%"); /* names are literal */
		job_spec_free(&s);
	}
	for (int out = 0; out < 2; out++) {
		const char *key = out ? "outputs" : "inputs";
		char text[512], want[160];
#define FILES(list) (snprintf(text, sizeof text, "{'command':'echo','%s':%s}", key, list), text)
#define WANT(fmt) (snprintf(want, sizeof want, fmt, key), want)
		expect_fail(FILES("{}"), PROTO_E_BAD_JOB, WANT("job.%s: an array of {name, url}"));
		expect_fail(FILES("'a'"), PROTO_E_BAD_JOB, WANT("job.%s: an array of {name, url}"));
		expect_fail(FILES("['a']"), PROTO_E_BAD_JOB,
			    WANT("job.%s[0]: an object {name, url} is required"));
		expect_fail(FILES("[{'name':'a','url':'http://h/'},null]"), PROTO_E_BAD_JOB,
			    WANT("job.%s[1]: an object {name, url} is required"));
		expect_fail(FILES("[{'url':'http://h/'}]"), PROTO_E_BAD_JOB,
			    WANT("job.%s[0].name: a string is required"));
		expect_fail(FILES("[{'name':null,'url':'http://h/'}]"), PROTO_E_BAD_JOB,
			    WANT("job.%s[0].name: a string is required"));
		expect_fail(FILES("[{'name':3,'url':'http://h/'}]"), PROTO_E_BAD_JOB,
			    WANT("job.%s[0].name: a string is required"));
		expect_fail(FILES("[{'name':'a'}]"), PROTO_E_BAD_JOB,
			    WANT("job.%s[0].url: a URL string is required"));
		expect_fail(FILES("[{'name':'a','url':null}]"), PROTO_E_BAD_JOB,
			    WANT("job.%s[0].url: a URL string is required"));
		expect_fail(FILES("[{'name':'a','url':['http://h/']}]"), PROTO_E_BAD_JOB,
			    WANT("job.%s[0].url: a URL string is required"));
		expect_fail(FILES("[{'name':'a','url':'file:///etc/shadow'}]"), PROTO_E_BAD_JOB,
			    WANT("job.%s[0].url: the scheme must be http or https"));
		snprintf(want, sizeof want, "job.%s[2].name: duplicate of job.%s[0]", key, key);
		expect_fail(FILES("[{'name':'a','url':'http://h/'},{'name':'b','url':'http://h/'},"
				  "{'name':'a','url':'http://h/'}]"),
			    PROTO_E_BAD_JOB, want);
		/* every path traversal form and every other non-plain name */
		static const struct {
			const char *name, *why;
		} bad[] = {
			{ "", "empty" },
			{ ".", ". and .. are not file names" },
			{ "..", ". and .. are not file names" },
			{ "/", "contains /" },
			{ "/etc/passwd", "contains /" },
			{ "../x", "contains /" },
			{ "../../etc/cron.d/x", "contains /" },
			{ "a/../../b", "contains /" },
			{ "./x", "contains /" },
			{ "x/", "contains /" },
			{ "a//b", "contains /" },
			{ "..\\/x", "contains /" }, /* JSON \/ is / */
			{ "\\u002e\\u002e", ". and .. are not file names" },
			{ "\\u002e\\u002e\\u002fx", "contains /" },
			{ "a\\u0000b", "contains NUL" },
			{ "..\\u0000", "contains NUL" },
			{ "\\u0000", "contains NUL" },
			{ "a\\nb", "contains a control character" },
			{ "a\\rb", "contains a control character" },
			{ "\\tx", "contains a control character" },
			{ "x\\u001b[2J", "contains a control character" },
			{ "\\u0001", "contains a control character" },
			{ "\\u001f", "contains a control character" },
			{ "a\\u007fb", "contains a control character" },
			{ "a\\u0085b", "contains a control character" },
			{ "\\u009f", "contains a control character" },
		};
		for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
			char list[160], w[192];
			snprintf(list, sizeof list,
				 "[{'name':'ok','url':'http://h/'},"
				 "{'name':'%s','url':'http://h/'}]",
				 bad[i].name);
			snprintf(w, sizeof w, "job.%s[1].name: must be a plain file name (%s)", key,
				 bad[i].why);
			expect_fail(FILES(list), PROTO_E_BAD_JOB, w);
		}
#undef FILES
#undef WANT
	}
	/* U+00A0 (C2 A0) is not a control character */
	if (expect_ok("{'command':'echo','inputs':[{'name':'a\\u00a0b','url':'http://h/'}]}", &s) ==
	    0)
		job_spec_free(&s);
}

static void test_file_limits(void)
{
	struct job_spec s;

	for (int out = 0; out < 2; out++) {
		const char *key = out ? "outputs" : "inputs";
		char want[128];

		for (int n = 64; n <= 65; n++) {
			struct json_object *arr = json_object_new_array();
			for (int i = 0; i < n; i++) {
				char name[16];
				struct json_object *f = json_object_new_object();
				snprintf(name, sizeof name, "f%d", i);
				json_object_object_add(f, "name", json_object_new_string(name));
				json_object_object_add(f, "url",
						       json_object_new_string("http://h/"));
				json_object_array_add(arr, f);
			}
			if (n == 64) {
				if (expect_ok_obj(job_with("echo", key, arr), &s) == 0) {
					CU_ASSERT_EQUAL(out ? s.noutputs : s.ninputs, 64);
					job_spec_free(&s);
				}
			} else {
				snprintf(want, sizeof want, "job.%s: at most 64 entries", key);
				expect_fail_obj(job_with("echo", key, arr), PROTO_E_BAD_JOB, want);
			}
		}
		/* names of 255 and 256 bytes */
		for (size_t len = 255; len <= 256; len++) {
			char *name = repeat('n', len);
			struct json_object *f = json_object_new_object(),
					   *arr = json_object_new_array();
			json_object_object_add(f, "name", json_object_new_string(name));
			json_object_object_add(f, "url", json_object_new_string("http://h/"));
			json_object_array_add(arr, f);
			if (len == 255) {
				if (expect_ok_obj(job_with("echo", key, arr), &s) == 0) {
					CU_ASSERT_EQUAL(
						strlen(out ? s.outputs[0].name : s.inputs[0].name),
						255);
					job_spec_free(&s);
				}
			} else {
				snprintf(want, sizeof want,
					 "job.%s[0].name: must be a plain file name "
					 "(longer than 255 bytes)",
					 key);
				expect_fail_obj(job_with("echo", key, arr), PROTO_E_BAD_JOB, want);
			}
			free(name);
		}
	}
}

/* ---- timeout ---- */

static void test_timeout(void)
{
	static const struct {
		const char *value;
		int ok;
		unsigned want;
	} cases[] = {
		{ "null", 1, 0 },
		{ "0", 1, 0 },
		{ "1", 1, 1 },
		{ "86400", 1, 86400 },
		{ "86401", 0, 0 },
		{ "-1", 0, 0 },
		{ "9223372036854775807", 0, 0 },
		{ "-9223372036854775808", 0, 0 },
		{ "4294967296", 0, 0 },
		{ "1.5", 0, 0 },
		{ "10.0", 0, 0 },
		{ "1e3", 0, 0 },
		{ "'10'", 0, 0 },
		{ "true", 0, 0 },
		{ "[10]", 0, 0 },
		{ "{}", 0, 0 },
	};
	struct job_spec s;

	if (expect_ok("{'command':'echo'}", &s) == 0) {
		CU_ASSERT_EQUAL(s.timeout_sec, 0);
		job_spec_free(&s);
	}
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char text[128];
		snprintf(text, sizeof text, "{'command':'echo','timeout_sec':%s}", cases[i].value);
		if (cases[i].ok) {
			if (expect_ok(text, &s) == 0) {
				CU_ASSERT_EQUAL(s.timeout_sec, cases[i].want);
				job_spec_free(&s);
			}
		} else {
			int is_int = strspn(cases[i].value, "-0123456789") ==
				     strlen(cases[i].value);
			expect_fail(text, PROTO_E_BAD_JOB,
				    is_int ? "job.timeout_sec: must be from 0 to 86400"
					   : "job.timeout_sec: an integer is required");
		}
	}
}

/* ---- the whole payload ---- */

static const char full_job[] =
	"{'command':'conv','args':['%jobdir%/in.jpg','-resize','50%','%jobdir%/out.png'],"
	"'env':['OMP_THREAD_LIMIT=1','SHARED=job'],"
	"'stdin':'http://app.test:8080/jobs/1/stdin','stdout':'https://app.test/jobs/1/stdout',"
	"'inputs':[{'name':'in.jpg','url':'http://files.test/a'}],"
	"'outputs':[{'name':'out.png','url':'http://files.test/b'},"
	"{'name':'log.txt','url':'http://[::1]:9/c'}],"
	"'timeout_sec':600}";

static void test_full(void)
{
	struct job_spec s;

	if (expect_ok(full_job, &s) != 0)
		return;
	CU_ASSERT_STRING_EQUAL(s.command->name, "conv");
	expect_vec(s.argv, "/usr/bin/convert", "-in", JOBDIR "/in", "100%", JOBDIR "/in.jpg",
		   "-resize", "50%", JOBDIR "/out.png");
	CU_ASSERT_EQUAL(s.argc, 8);
	expect_vec(s.envp, "PATH=/opt/bin", "LC_ALL=C.UTF-8", "GLOBAL=g", "SHARED=job", "CMD=c",
		   "OMP_THREAD_LIMIT=1", PFD);
	CU_ASSERT_EQUAL(s.envc, 7);
	CU_ASSERT_STRING_EQUAL(s.stdin_url, "http://app.test:8080/jobs/1/stdin");
	CU_ASSERT_STRING_EQUAL(s.stdin_host, "app.test");
	CU_ASSERT_EQUAL(s.stdin_port, 8080);
	CU_ASSERT_STRING_EQUAL(s.stdout_url, "https://app.test/jobs/1/stdout");
	CU_ASSERT_EQUAL(s.stdout_port, 443);
	CU_ASSERT_EQUAL(s.ninputs, 1);
	CU_ASSERT_EQUAL(s.noutputs, 2);
	CU_ASSERT_STRING_EQUAL(s.outputs[1].name, "log.txt");
	CU_ASSERT_STRING_EQUAL(s.outputs[1].host, "::1");
	CU_ASSERT_EQUAL(s.outputs[1].port, 9);
	CU_ASSERT_EQUAL(s.timeout_sec, 600);
	job_spec_free(&s);
	CU_ASSERT(is_zero(&s));
}

/* With several errors, the first in the documented order is reported. */
static void test_error_order(void)
{
	static const char *const fields[] = {
		"'args':[1]",
		"'env':['LD_PRELOAD=x']",
		"'stdin':'ftp://h/'",
		"'stdout':'ftp://h/'",
		"'inputs':[{'name':'..','url':'http://h/'}]",
		"'outputs':[{'name':'..','url':'http://h/'}]",
		"'timeout_sec':-1",
	};
	static const char *const first[] = {
		"job.args[0]",        "job.env[0]",          "job.stdin",       "job.stdout",
		"job.inputs[0].name", "job.outputs[0].name", "job.timeout_sec",
	};
	for (size_t i = 0; i < 7; i++) {
		char text[512] = "{";
		/* fields i..6, written in reverse order */
		for (size_t j = 7; j-- > i;) {
			strcat(text, fields[j]);
			strcat(text, ",");
		}
		strcat(text, "'command':'echo'}");
		expect_fail(text, PROTO_E_BAD_JOB, first[i]);
	}
	/* an unknown command beats every other error */
	expect_fail("{'args':[1],'timeout_sec':-1,'command':'nope'}", PROTO_E_UNKNOWN_COMMAND,
		    "job.command");
}

/* ---- allocation failure ---- */

/* Fails the k-th allocation for k = 0, 1, ... until the parse goes through
 * without running out; every failed run must answer `internal` (or, for a
 * job that is refused anyway, its own error) and leave the spec zeroed. */
static void oom_loop(const char *text, const char *final_code)
{
	struct json_object *o = jparse(text);
	long k, runs = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	for (k = 0; k < 100000; k++) {
		struct job_spec s;
		const char *code = NULL;
		char msg[256];

		failalloc_budget = k;
		failalloc_count = 0;
		int rc = job_spec_parse(&cfg, svc, o, JOBDIR, &s, &code, msg, sizeof msg);
		long used = failalloc_count;
		failalloc_budget = -1;
		runs++;
		if (used <= k) { /* nothing failed: the normal result */
			if (final_code) {
				CU_ASSERT_EQUAL(rc, -1);
				CU_ASSERT_STRING_EQUAL(code, final_code);
			} else {
				CU_ASSERT_EQUAL(rc, 0);
				if (rc == 0) {
					CU_ASSERT_STRING_EQUAL(s.argv[0], "/usr/bin/convert");
					job_spec_free(&s);
				}
			}
			break;
		}
		CU_ASSERT_EQUAL(rc, -1);
		CU_ASSERT(is_zero(&s));
		if (rc == 0) {
			job_spec_free(&s);
			continue;
		}
		CU_ASSERT_STRING_EQUAL(code, PROTO_E_INTERNAL);
		if (strcmp(code, PROTO_E_INTERNAL) != 0)
			fprintf(stderr, "\n  allocation %ld failed: got %s: %s\n", k, code, msg);
	}
	CU_ASSERT(runs > 20); /* the job does allocate, ours and libcurl's */
	json_object_put(o);
}

static void test_out_of_memory(void)
{
	oom_loop(full_job, NULL);
	/* refused at the last field, after everything else was allocated */
	char text[sizeof full_job + 8];
	snprintf(text, sizeof text, "%s", full_job);
	char *t = strstr(text, "600");
	memcpy(t, "-60", 3);
	oom_loop(text, PROTO_E_BAD_JOB);

	/* job_spec_url_host */
	char host[JOB_SPEC_HOST_MAX];
	int ok = 0;
	for (long k = 0; k < 1000 && !ok; k++) {
		failalloc_budget = k;
		failalloc_count = 0;
		errno = 0;
		int rc = job_spec_url_host("https://Example.test/x", host, sizeof host);
		failalloc_budget = -1;
		if (failalloc_count <= k) {
			CU_ASSERT_EQUAL(rc, 0);
			CU_ASSERT_STRING_EQUAL(host, "example.test");
			ok = 1;
		} else {
			CU_ASSERT_EQUAL(rc, -1);
			CU_ASSERT_EQUAL(errno, ENOMEM);
		}
	}
	CU_ASSERT(ok);
}

/* ---- runner ---- */

int main(void)
{
	static const struct {
		const char *name;
		CU_TestFunc fn;
	} tests[] = {
		{ "command", test_command },
		{ "job not an object", test_job_not_object },
		{ "jobdir and message buffer", test_jobdir_and_message_buffer },
		{ "unknown fields ignored", test_unknown_fields_ignored },
		{ "args", test_args },
		{ "placeholders", test_placeholders },
		{ "argv limits", test_argv_limits },
		{ "env merge order", test_env_merge },
		{ "env invalid", test_env_invalid },
		{ "env limits", test_env_limits },
		{ "env refused names", test_env_refused },
		{ "urls: schemes, credentials, hosts, ports", test_urls },
		{ "url fields", test_url_fields },
		{ "url limits", test_url_limits },
		{ "inputs and outputs", test_files },
		{ "inputs and outputs limits", test_file_limits },
		{ "timeout", test_timeout },
		{ "full payload", test_full },
		{ "error order", test_error_order },
		{ "out of memory at each allocation", test_out_of_memory },
	};
	CU_pSuite suite;
	unsigned failures;

	/* libcurl allocates through the wrapped functions too */
	if (curl_global_init_mem(CURL_GLOBAL_NOTHING, __wrap_malloc, curl_free_cb, __wrap_realloc,
				 __wrap_strdup, __wrap_calloc) != CURLE_OK)
		return 2;
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	suite = CU_add_suite("job spec", suite_init, suite_clean);
	if (!suite)
		goto fail;
	for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
		if (!CU_add_test(suite, tests[i].name, tests[i].fn))
			goto fail;
	CU_basic_set_mode(CU_BRM_NORMAL);
	CU_basic_run_tests();
	failures = CU_get_number_of_failures() + CU_get_number_of_tests_failed() +
		   CU_get_number_of_suites_failed();
	CU_cleanup_registry();
	curl_global_cleanup();
	return failures ? 1 : 0;
fail:
	fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
	CU_cleanup_registry();
	curl_global_cleanup();
	return 2;
}
