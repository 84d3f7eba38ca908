/*
 * test_config.c - unit tests of the configuration loader (config.c,
 * config_yaml.c, duration.c) and of the startup check (startup_check.c).
 *
 * Owns: the proof that every error path of the loader reports the first
 * error as "file:line:column: message" at the right place, that valid files
 * load with the right values, and that the startup check runs real programs
 * (coreutils only) as configured.  Each error case names its exact position
 * and a word of the message; the fixtures are built in memory or read from
 * tests/data/config/.  Exits non-zero if any test fails.
 */
#include "autoconfig.h"

#include <CUnit/Basic.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "config/config.h"
#include "config/config_yaml.h"
#include "config/duration.h"
#include "config/reload.h"
#include "failalloc.h"
#include "job/spawn.h"
#include "master/startup_check.h"

#ifndef TEST_TOP_SRCDIR
#define TEST_TOP_SRCDIR "."
#endif

static const char *top_srcdir(void)
{
	const char *d = getenv("TOP_SRCDIR");

	return d && *d ? d : TEST_TOP_SRCDIR;
}

static void data_path(char *buf, size_t len, const char *rel)
{
	snprintf(buf, len, "%s/%s", top_srcdir(), rel);
}

/* ---- helpers ---- */

static int load(const char *text, struct es_config *cfg, struct config_error *err)
{
	return config_load_buffer("t.yml", text, strlen(text), cfg, err);
}

/* Loads the file rel (below the source tree) into cfg, which must work;
 * returns its full name (in a static buffer). */
static const char *load_file(const char *rel, struct es_config *cfg)
{
	static char path[4096];
	struct config_error err;

	data_path(path, sizeof path, rel);
	if (config_load(path, cfg, &err) != 0) {
		fprintf(stderr, "\n  %s did not load: %s\n", rel, err.text);
		CU_FAIL_FATAL("a file that must load did not");
	}
	return path;
}

/* Loading text must fail with "t.yml:LINE:COLUMN: " and word in the message. */
static void expect_error(const char *text, int line, int column, const char *word)
{
	struct es_config cfg;
	struct config_error err;
	char prefix[64];
	int rc = load(text, &cfg, &err);

	CU_ASSERT_EQUAL(rc, -1);
	if (rc == 0) {
		fprintf(stderr, "\n  loaded, but expected an error at %d:%d (%s)\n", line, column,
			word);
		config_free(&cfg);
		return;
	}
	snprintf(prefix, sizeof prefix, "t.yml:%d:%d: ", line, column);
	CU_ASSERT_EQUAL(strncmp(err.text, prefix, strlen(prefix)), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.text, word));
	if (strncmp(err.text, prefix, strlen(prefix)) != 0 || !strstr(err.text, word))
		fprintf(stderr, "\n  got:      %s\n  expected: %s...%s\n", err.text, prefix, word);
	/* After an error the config holds nothing; freeing it again is harmless. */
	CU_ASSERT_PTR_NULL(cfg.addr);
	CU_ASSERT_PTR_NULL(cfg.services);
	config_free(&cfg);
}

/* Loading text must succeed; the caller checks and frees cfg. */
static int expect_ok(const char *text, struct es_config *cfg)
{
	struct config_error err;
	int rc = load(text, cfg, &err);

	CU_ASSERT_EQUAL(rc, 0);
	if (rc != 0)
		fprintf(stderr, "\n  unexpected error: %s\n", err.text);
	return rc;
}

/* The smallest valid file: three lines. */
#define WG "waitgroups:\n  a:\n    processes: 1\n"
/* A valid service block, appended after WG (lines 4..8). */
#define SVC "services:\n  s:\n    waitgroup: a\n    commands:\n      cat: {prog: cat}\n"

/*
 * Every error case: name, text, line, column, a word of the message.
 * Positions are 1-based and point at the offending key or value.
 */
static const struct error_case {
	const char *name;
	const char *text;
	int line, column;
	const char *word;
} error_cases[] = {
	/* YAML syntax and document structure */
	{ "empty_file", "", 1, 1, "empty" },
	{ "comment_only", "# nothing here\n", 1, 1, "empty" },
	{ "null_document", "~\n", 1, 1, "empty" },
	{ "syntax_mapping_in_value", "a: b: c\n", 1, 5, "mapping values are not allowed" },
	{ "syntax_unclosed_quote", "addr: \"127.0.0.1\n", 2, 1,
	  "quoted scalar at line 1 column 7" },
	{ "syntax_unclosed_flow", "addr: [a\n", 2, 1, "YAML syntax error" },
	{ "syntax_tab_indent", "\taddr: x\n", 1, 1, "tabs for indentation" },
	{ "syntax_tab_nested", WG "services:\n\ts:\n", 5, 1, "indent with spaces" },
	{ "invalid_utf8", "addr: \xff\n", 1, 7, "UTF-8" },
	{ "top_sequence",
	  "- a\n"
	  "- b\n",
	  1, 1, "expected a mapping, found a sequence" },
	{ "top_scalar", "hello\n", 1, 1, "expected a mapping, found a scalar" },
	{ "two_documents", WG "---\n" WG, 4, 1, "one YAML document" },
	{ "anchor", WG "handlers: &h 2\n", 4, 11, "anchors" },
	{ "alias", WG "handlers: *h\n", 4, 11, "aliases" },
	{ "tag", WG "handlers: !!int 2\n", 4, 11, "tags" },
	{ "complex_key",
	  WG "? [a]\n"
	     ": 1\n",
	  4, 3, "keys must be scalars" },
	/* duplicate keys at every level */
	{ "dup_top",
	  WG "handlers: 1\n"
	     "handlers: 2\n",
	  5, 1, "duplicate key \"handlers\" (first at line 4 column 1)" },
	{ "dup_top_block",
	  WG "waitgroups:\n"
	     "  b:\n"
	     "    processes: 1\n",
	  4, 1, "duplicate key \"waitgroups\"" },
	{ "dup_waitgroup_name",
	  "waitgroups:\n"
	  "  a: {processes: 1}\n"
	  "  a: {processes: 2}\n",
	  3, 3, "duplicate key \"a\"" },
	{ "dup_in_waitgroup",
	  "waitgroups:\n"
	  "  a:\n"
	  "    processes: 1\n"
	  "    processes: 2\n",
	  4, 5, "duplicate key \"processes\"" },
	{ "dup_flow", "waitgroups: {a: {processes: 1}, a: {processes: 1}}\n", 1, 33, "duplicate" },
	{ "dup_service",
	  WG "services:\n"
	     "  s: {waitgroup: a, commands: {c: {prog: cat}}}\n"
	     "  s: {waitgroup: a, commands: {c: {prog: cat}}}\n",
	  6, 3, "duplicate key \"s\"" },
	{ "dup_in_service",
	  WG "services:\n"
	     "  s:\n"
	     "    waitgroup: a\n"
	     "    waitgroup: a\n",
	  7, 5, "duplicate key \"waitgroup\"" },
	{ "dup_service_command",
	  WG "services:\n"
	     "  s:\n"
	     "    waitgroup: a\n"
	     "    commands:\n"
	     "      cat: {prog: cat}\n"
	     "      cat: {prog: cat}\n",
	  9, 7, "duplicate key \"cat\"" },
	{ "dup_in_command",
	  WG "services:\n"
	     "  s:\n"
	     "    waitgroup: a\n"
	     "    commands:\n"
	     "      cat:\n"
	     "        prog: cat\n"
	     "        prog: dog\n",
	  10, 9, "duplicate key \"prog\"" },
	{ "dup_in_startup_check",
	  WG "commands:\n"
	     "  cat:\n"
	     "    prog: cat\n"
	     "    startupCheck: {regex: a, regex: b}\n",
	  7, 30, "duplicate key \"regex\"" },
	{ "dup_common_command",
	  WG "commands:\n"
	     "  cat: {prog: cat}\n"
	     "  cat: {prog: cat}\n",
	  6, 3, "duplicate key \"cat\"" },
	{ "dup_fylr_block_key",
	  "fylr:\n"
	  "  services:\n"
	  "    execserver:\n"
	  "      handlers: 1\n"
	  "      handlers: 2\n",
	  5, 7, "duplicate key \"handlers\"" },
	{ "dup_outside_fylr_block",
	  "fylr:\n"
	  "  other: 1\n"
	  "  other: 2\n",
	  3, 3, "duplicate key \"other\"" },
	{ "dup_env_name", WG "env: [A=1, B=2, A=3]\n", 4, 17,
	  "duplicate environment name A (first at line 4 column 7)" },
	{ "dup_command_env_name",
	  WG "commands:\n"
	     "  cat:\n"
	     "    prog: cat\n"
	     "    env:\n"
	     "      - X_1=a\n"
	     "      - X_1=b\n",
	  9, 9, "duplicate environment name X_1" },
	/* unknown keys, at each place */
	{ "unknown_top", WG "bogus: 1\n", 4, 1,
	  "unknown key \"bogus\" (the keys are listed in execserver.yml(5))" },
	{ "unknown_top_case", WG "TempDir: /x\n", 4, 1,
	  "unknown key \"TempDir\" (did you mean \"tempDir\"?)" },
	{ "unknown_in_waitgroup",
	  "waitgroups:\n"
	  "  a:\n"
	  "    processes: 1\n"
	  "    cpus: 2\n",
	  4, 5, "waitgroups.a: unknown key \"cpus\" (expected one of: processes)" },
	{ "unknown_in_service",
	  WG "services:\n"
	     "  s:\n"
	     "    waitgroup: a\n"
	     "    commandz: {}\n",
	  7, 5, "services.s: unknown key \"commandz\"" },
	{ "unknown_in_service_command",
	  WG "services:\n"
	     "  s:\n"
	     "    waitgroup: a\n"
	     "    commands:\n"
	     "      cat:\n"
	     "        prog: cat\n"
	     "        argv: []\n",
	  10, 9,
	  "services.s.commands.cat: unknown key \"argv\" (expected one of: prog, args, "
	  "env, startupCheck)" },
	{ "unknown_case_in_command",
	  WG "commands:\n"
	     "  cat:\n"
	     "    prog: cat\n"
	     "    startupcheck: {}\n",
	  7, 5, "commands.cat: unknown key \"startupcheck\" (did you mean \"startupCheck\"?)" },
	{ "unknown_in_common_command",
	  WG "commands:\n"
	     "  cat:\n"
	     "    prog: cat\n"
	     "    timeout: 5\n",
	  7, 5, "commands.cat: unknown key \"timeout\"" },
	{ "unknown_in_startup_check",
	  WG "commands:\n"
	     "  cat:\n"
	     "    prog: cat\n"
	     "    startupCheck:\n"
	     "      args: []\n"
	     "      match: x\n",
	  9, 7,
	  "commands.cat.startupCheck: unknown key \"match\" "
	  "(expected one of: args, regex)" },
	{ "unknown_in_fylr_block",
	  "fylr:\n"
	  "  services:\n"
	  "    execserver:\n"
	  "      bogus: 1\n",
	  4, 7, "unknown key \"bogus\"" },
	/* wrong types */
	{ "addr_sequence", WG "addr: [a]\n", 4, 7, "addr: expected a scalar, found a sequence" },
	{ "addr_mapping", WG "addr: {a: 1}\n", 4, 7, "addr: expected a scalar, found a mapping" },
	{ "addr_null", WG "addr: ~\n", 4, 7, "addr: expected a scalar, found null" },
	{ "addr_empty_value", "addr:\n" WG, 1, 6, "found null" },
	{ "temp_dir_sequence", WG "tempDir: []\n", 4, 10, "tempDir: expected a scalar" },
	{ "policy_mapping", WG "jobRemovalPolicy: {a: 1}\n", 4, 19,
	  "jobRemovalPolicy: expected a scalar" },
	{ "janitor_sequence", WG "janitorFileAge: [1h]\n", 4, 17, "expected a duration" },
	{ "env_scalar", WG "env: A=1\n", 4, 6, "env: expected a sequence, found a scalar" },
	{ "env_mapping", WG "env: {A: 1}\n", 4, 6, "env: expected a sequence, found a mapping" },
	{ "env_item_mapping", WG "env: [{A: 1}]\n", 4, 7, "env[0]: expected a scalar" },
	{ "commands_sequence", WG "commands: [cat]\n", 4, 11, "commands: expected a mapping" },
	{ "common_command_scalar",
	  WG "commands:\n"
	     "  cat: cat\n",
	  5, 8, "commands.cat: expected a mapping" },
	{ "waitgroups_sequence", "waitgroups: [a]\n", 1, 13,
	  "waitgroups: expected a mapping, found a sequence" },
	{ "waitgroups_scalar", "waitgroups: 4\n", 1, 13,
	  "waitgroups: expected a mapping, found a scalar" },
	{ "waitgroup_scalar",
	  "waitgroups:\n"
	  "  a: 4\n",
	  2, 6, "waitgroups.a: expected a mapping" },
	{ "waitgroup_null",
	  "waitgroups:\n"
	  "  a:\n",
	  2, 5, "waitgroups.a: expected a mapping, found null" },
	{ "processes_word",
	  "waitgroups:\n"
	  "  a:\n"
	  "    processes: four\n",
	  3, 16, "expected an integer in 1..1024" },
	{ "processes_quoted",
	  "waitgroups:\n"
	  "  a:\n"
	  "    processes: \"4\"\n",
	  3, 16, "found a quoted string" },
	{ "processes_sequence",
	  "waitgroups:\n"
	  "  a:\n"
	  "    processes: [4]\n",
	  3, 16, "expected an integer in 1..1024, found a sequence" },
	{ "services_scalar", WG "services: x\n", 4, 11, "services: expected a mapping" },
	{ "service_sequence",
	  WG "services:\n"
	     "  s: [a]\n",
	  5, 6, "services.s: expected a mapping, found a sequence" },
	{ "service_null",
	  WG "services:\n"
	     "  s:\n",
	  5, 5, "services.s: expected a mapping, found null" },
	{ "service_waitgroup_mapping",
	  WG "services:\n"
	     "  s:\n"
	     "    waitgroup: {a: 1}\n"
	     "    commands: {c: {prog: cat}}\n",
	  6, 16, "services.s.waitgroup: expected a scalar" },
	{ "service_waitgroup_null",
	  WG "services:\n"
	     "  s:\n"
	     "    waitgroup: ~\n"
	     "    commands: {c: {prog: cat}}\n",
	  6, 16, "found null" },
	{ "service_commands_sequence",
	  WG "services:\n"
	     "  s:\n"
	     "    waitgroup: a\n"
	     "    commands: [cat]\n",
	  7, 15, "services.s.commands: expected a mapping" },
	{ "service_commands_null",
	  WG "services:\n"
	     "  s:\n"
	     "    waitgroup: a\n"
	     "    commands: ~\n",
	  7, 15, "services.s.commands: expected a mapping, found null" },
	{ "service_command_scalar",
	  WG "services:\n"
	     "  s:\n"
	     "    waitgroup: a\n"
	     "    commands:\n"
	     "      cat: cat\n",
	  8, 12, "services.s.commands.cat: expected a mapping" },
	{ "prog_sequence",
	  WG "commands:\n"
	     "  cat:\n"
	     "    prog: [cat]\n",
	  6, 11, "commands.cat.prog: expected a scalar" },
	{ "args_scalar",
	  WG "commands:\n"
	     "  cat:\n"
	     "    prog: cat\n"
	     "    args: -n\n",
	  7, 11, "commands.cat.args: expected a sequence" },
	{ "args_item_sequence",
	  WG "commands:\n"
	     "  cat:\n"
	     "    prog: cat\n"
	     "    args: [a, [x]]\n",
	  7, 15, "commands.cat.args[1]: expected a scalar" },
	{ "command_env_scalar",
	  WG "commands:\n"
	     "  cat:\n"
	     "    prog: cat\n"
	     "    env: A=1\n",
	  7, 10, "commands.cat.env: expected a sequence" },
	{ "startup_check_scalar",
	  WG "commands:\n"
	     "  cat:\n"
	     "    prog: cat\n"
	     "    startupCheck: yes\n",
	  7, 19, "commands.cat.startupCheck: expected a mapping" },
	{ "startup_args_mapping",
	  WG "commands:\n"
	     "  cat:\n"
	     "    prog: cat\n"
	     "    startupCheck:\n"
	     "      args: {a: b}\n",
	  8, 13, "commands.cat.startupCheck.args: expected a sequence" },
	{ "startup_regex_sequence",
	  WG "commands:\n"
	     "  cat:\n"
	     "    prog: cat\n"
	     "    startupCheck:\n"
	     "      regex: [a]\n",
	  8, 14, "commands.cat.startupCheck.regex: expected a scalar" },
	{ "service_prog_mapping",
	  WG "services:\n"
	     "  s:\n"
	     "    waitgroup: a\n"
	     "    commands:\n"
	     "      cat: {prog: {x: 1}}\n",
	  8, 19, "services.s.commands.cat.prog: expected a scalar" },
	{ "handlers_quoted", WG "handlers: \"4\"\n", 4, 11,
	  "handlers: expected an integer in 0..64, found a quoted string \"4\"" },
	{ "handlers_float", WG "handlers: 1.5\n", 4, 11,
	  "handlers: expected an integer in 0..64, found a scalar \"1.5\"" },
	{ "handlers_hex", WG "handlers: 0x10\n", 4, 11, "expected an integer in 0..64" },
	{ "handlers_leading_zero", WG "handlers: 010\n", 4, 11, "expected an integer in 0..64" },
	{ "handlers_sign_only", WG "handlers: +\n", 4, 11,
	  "expected an integer in 0..64, found a scalar \"+\"" },
	{ "handlers_mapping", WG "handlers: {a: 1}\n", 4, 11,
	  "expected an integer in 0..64, found a mapping" },
	{ "handlers_null", WG "handlers:\n", 4, 10, "expected an integer in 0..64, found null" },
	{ "log_level_sequence", WG "logLevel: [info]\n", 4, 11, "logLevel: expected a scalar" },
	{ "auth_token_sequence", WG "authToken: [a]\n", 4, 12, "authToken: expected a scalar" },
	{ "user_mapping", WG "user: {a: 1}\n", 4, 7, "user: expected a scalar" },
	{ "group_sequence", WG "group: [a]\n", 4, 8, "group: expected a scalar" },
	{ "pid_file_null", WG "pidFile: ~\n", 4, 10, "pidFile: expected a scalar, found null" },
	{ "string_with_nul", WG "tempDir: \"/var/a\\0b\"\n", 4, 10, "NUL" },
	/* values out of range or malformed */
	{ "addr_port_too_big", WG "addr: 127.0.0.1:65536\n", 4, 7, "0..65535" },
	{ "addr_port_word", WG "addr: localhost:http\n", 4, 7, "0..65535" },
	{ "addr_port_negative", WG "addr: localhost:-1\n", 4, 7, "0..65535" },
	{ "addr_port_empty", WG "addr: \"127.0.0.1:\"\n", 4, 7, "0..65535" },
	{ "addr_no_colon", WG "addr: localhost\n", 4, 7, "expected host:port" },
	{ "addr_ipv6_unbracketed", WG "addr: \"::1:8083\"\n", 4, 7, "[address]:port" },
	{ "addr_ipv6_empty", WG "addr: \"[]:8083\"\n", 4, 7, "[address]:port" },
	{ "addr_ipv6_unclosed", WG "addr: \"[::1:8083\"\n", 4, 7, "[address]:port" },
	{ "addr_ipv6_garbage", WG "addr: \"[zz]:8083\"\n", 4, 7, "IPv6" },
	{ "addr_bad_host", WG "addr: \"a b:80\"\n", 4, 7, "invalid character in the host name" },
	{ "handlers_negative", WG "handlers: -1\n", 4, 11,
	  "handlers: \"-1\" is out of range 0..64" },
	{ "handlers_too_big", WG "handlers: 65\n", 4, 11,
	  "handlers: \"65\" is out of range 0..64" },
	{ "handlers_overflow", WG "handlers: 99999999999999999999\n", 4, 11, "out of range 0..64" },
	{ "handlers_overflow_negative", WG "handlers: -99999999999999999999\n", 4, 11,
	  "out of range 0..64" },
	{ "broker_not_boolean", WG "broker: maybe\n", 4, 9,
	  "broker: expected a boolean (yes/no/true/false/on/off)" },
	{ "offer_timeout_zero", WG "offerTimeoutSec: 0\n", 4, 18,
	  "offerTimeoutSec: \"0\" is out of range 1..3600" },
	{ "resume_grace_negative", WG "resumeGraceSec: -5\n", 4, 17, "out of range 0..86400" },
	{ "drain_timeout_too_big", WG "drainTimeoutSec: 3601\n", 4, 18, "out of range 0..3600" },
	{ "ping_interval_zero", WG "pingIntervalSec: 0\n", 4, 18, "out of range 1..3600" },
	{ "ping_timeout_one", WG "pingTimeoutSec: 1\n", 4, 17, "out of range 2..86400" },
	{ "ping_timeout_not_greater",
	  WG "pingIntervalSec: 30\n"
	     "pingTimeoutSec: 30\n",
	  5, 17, "pingTimeoutSec (30) must be greater than pingIntervalSec (30)" },
	{ "ping_interval_above_default_timeout", WG "pingIntervalSec: 60\n", 4, 18,
	  "must be greater than pingIntervalSec (60)" },
	{ "max_connections_zero", WG "maxConnections: 0\n", 4, 17, "out of range 1..1048576" },
	{ "max_wants_zero", WG "maxWants: 0\n", 4, 11, "out of range 1..4194304" },
	{ "max_wants_per_conn_zero", WG "maxWantsPerConnection: 0\n", 4, 24,
	  "out of range 1..4194304" },
	{ "max_wants_per_conn_exceeds",
	  WG "maxWants: 100\n"
	     "maxWantsPerConnection: 200\n",
	  5, 24, "maxWantsPerConnection (200) must not exceed maxWants (100)" },
	{ "max_wants_below_default_per_conn", WG "maxWants: 100\n", 4, 11,
	  "must not exceed maxWants (100)" },
	{ "max_frame_small", WG "maxFrameBytes: 1023\n", 4, 16, "out of range 1024..67108864" },
	{ "max_frame_big", WG "maxFrameBytes: 67108865\n", 4, 16, "out of range 1024..67108864" },
	{ "processes_zero",
	  "waitgroups:\n"
	  "  a:\n"
	  "    processes: 0\n",
	  3, 16, "waitgroups.a.processes: \"0\" is out of range 1..1024" },
	{ "processes_too_big",
	  "waitgroups:\n"
	  "  a:\n"
	  "    processes: 1025\n",
	  3, 16, "out of range 1..1024" },
	{ "policy_bad", WG "jobRemovalPolicy: some\n", 4, 19, "expected none, done or all" },
	{ "policy_case", WG "jobRemovalPolicy: Done\n", 4, 19, "expected none, done or all" },
	{ "log_level_bad", WG "logLevel: verbose\n", 4, 11, "expected error, warn, info or debug" },
	{ "temp_dir_relative", WG "tempDir: tmp/x\n", 4, 10, "not an absolute path" },
	{ "temp_dir_empty", WG "tempDir: \"\"\n", 4, 10, "not an absolute path" },
	{ "pid_file_relative", WG "pidFile: execserver.pid\n", 4, 10, "not an absolute path" },
	{ "auth_token_space", WG "authToken: \"a b\"\n", 4, 12, "visible ASCII" },
	{ "auth_token_empty", WG "authToken: \"\"\n", 4, 12, "authToken: must not be empty" },
	{ "user_empty", WG "user: \"\"\n", 4, 7, "user: must not be empty" },
	{ "group_empty", WG "group: ''\n", 4, 8, "group: must not be empty" },
	{ "prog_empty",
	  WG "commands:\n"
	     "  cat:\n"
	     "    prog: \"\"\n",
	  6, 11, "commands.cat.prog: must not be empty" },
	{ "prog_relative_path",
	  WG "commands:\n"
	     "  x:\n"
	     "    prog: ./bin/x\n",
	  6, 11, "program name (looked up in PATH) or an absolute path" },
	{ "regex_invalid",
	  WG "commands:\n"
	     "  cat:\n"
	     "    prog: cat\n"
	     "    startupCheck:\n"
	     "      regex: \"(\"\n",
	  8, 14, "invalid regular expression" },
	/* names and limits */
	{ "waitgroup_name_space",
	  "waitgroups:\n"
	  "  \"a b\": {processes: 1}\n",
	  2, 3, "waitgroups: invalid name \"a b\"" },
	{ "waitgroup_name_empty",
	  "waitgroups:\n"
	  "  \"\": {processes: 1}\n",
	  2, 3, "invalid name \"\"" },
	{ "waitgroup_name_too_long",
	  "waitgroups:\n"
	  "  a234567890123456789012345678901234567890123456789012345678901234: {processes: 1}\n",
	  2, 3, "1 to 63" },
	{ "service_name_slash",
	  WG "services:\n"
	     "  s/x:\n"
	     "    waitgroup: a\n",
	  5, 3, "services: invalid name \"s/x\"" },
	{ "service_command_name_bad",
	  WG "services:\n"
	     "  s:\n"
	     "    waitgroup: a\n"
	     "    commands:\n"
	     "      \"c*t\": {prog: cat}\n",
	  8, 7, "services.s.commands: invalid name" },
	{ "common_command_name_bad",
	  WG "commands:\n"
	     "  \"c:t\": {prog: cat}\n",
	  5, 3, "commands: invalid name \"c:t\"" },
	/* required keys and references */
	/* auto-balance (no waitgroups block) and its keys */
	{ "waitgroup_without_waitgroups",
	  "services:\n"
	  "  s:\n"
	  "    waitgroup: a\n"
	  "    commands: {c: {prog: cat}}\n",
	  3, 16, "services.s.waitgroup: there is no \"waitgroups\" block" },
	{ "service_without_waitgroup",
	  WG "services:\n"
	     "  s:\n"
	     "    commands: {c: {prog: cat}}\n",
	  5, 3, "services.s: missing required key \"waitgroup\"" },
	{ "auto_balance_key_with_waitgroups",
	  WG "handlers: 1\n"
	     "heavyThreshold: 5s\n"
	     "cpus: 2\n",
	  5, 1, "heavyThreshold: an auto-balance key, but the \"waitgroups\" block" },
	{ "fast_reserve_whole_pool",
	  "cpus: 2\n"
	  "fastReserve: 2\n",
	  2, 14, "fastReserve (2) must be smaller than the pool (2 slots)" },
	{ "cpus_negative", "cpus: -1\n", 1, 7, "cpus" },
	{ "cpus_too_many", "cpus: 1025\n", 1, 7, "cpus" },
	{ "fast_reserve_negative", "fastReserve: -1\n", 1, 14, "fastReserve" },
	{ "unknown_share_zero", "unknownShare: 0\n", 1, 15, "unknownShare: invalid value" },
	{ "unknown_share_above_one", "unknownShare: 1.5\n", 1, 15, "above 0 and at most 1" },
	{ "unknown_share_negative", "unknownShare: -0.5\n", 1, 15, "unknownShare" },
	{ "unknown_share_text", "unknownShare: half\n", 1, 15, "unknownShare" },
	{ "unknown_share_two_points", "unknownShare: 0.5.1\n", 1, 15, "unknownShare" },
	{ "unknown_share_mapping", "unknownShare: {a: 1}\n", 1, 15, "unknownShare" },
	{ "unknown_share_above_one_by_a_digit", "unknownShare: 1.0000001\n", 1, 15,
	  "above 0 and at most 1" },
	{ "unknown_share_too_many_digits", "unknownShare: 0.1234567890123456\n", 1, 15,
	  "at most 15 digits after the point" },
	{ "unknown_share_just_a_point", "unknownShare: .\n", 1, 15, "unknownShare" },
	{ "unknown_share_exponent", "unknownShare: 5e-1\n", 1, 15, "unknownShare" },
	{ "unknown_share_big_integer", "unknownShare: 100000000000000000001\n", 1, 15,
	  "unknownShare" },
	{ "heavy_threshold_text", "heavyThreshold: slow\n", 1, 17, "invalid duration" },
	{ "heavy_threshold_zero", "heavyThreshold: 0s\n", 1, 17, "heavyThreshold" },
	{ "min_samples_zero", "minSamples: 0\n", 1, 13, "minSamples" },
	{ "missing_processes",
	  "waitgroups:\n"
	  "  a: {}\n",
	  2, 3, "waitgroups.a: missing required key \"processes\"" },
	{ "missing_service_waitgroup",
	  WG "services:\n"
	     "  s:\n"
	     "    commands: {cat: {prog: cat}}\n",
	  5, 3, "services.s: missing required key \"waitgroup\"" },
	{ "missing_service_commands",
	  WG "services:\n"
	     "  s:\n"
	     "    waitgroup: a\n",
	  5, 3, "services.s: missing required key \"commands\"" },
	{ "empty_service_commands",
	  WG "services:\n"
	     "  s:\n"
	     "    waitgroup: a\n"
	     "    commands: {}\n",
	  7, 15, "services.s.commands: no commands" },
	{ "service_waitgroup_unknown",
	  WG "services:\n"
	     "  s:\n"
	     "    waitgroup: b\n"
	     "    commands: {cat: {prog: cat}}\n",
	  6, 16, "services.s.waitgroup: no waitgroup named \"b\"" },
	{ "service_waitgroup_case",
	  WG "services:\n"
	     "  s:\n"
	     "    waitgroup: A\n"
	     "    commands: {cat: {prog: cat}}\n",
	  6, 16, "no waitgroup named \"A\"" },
	{ "service_waitgroup_empty_block",
	  "waitgroups: {}\n"
	  "services:\n"
	  "  s:\n"
	  "    waitgroup: a\n"
	  "    commands: {cat: {prog: cat}}\n",
	  4, 16, "no waitgroup named \"a\"" },
	{ "service_no_prog_no_common",
	  WG "services:\n"
	     "  s:\n"
	     "    waitgroup: a\n"
	     "    commands:\n"
	     "      cat: {args: [x]}\n",
	  8, 7, "services.s.commands.cat: no \"prog\", and no common command \"cat\"" },
	{ "service_null_command_no_common",
	  WG "commands:\n"
	     "  dog: {prog: dog}\n"
	     "services:\n"
	     "  s:\n"
	     "    waitgroup: a\n"
	     "    commands:\n"
	     "      cat:\n",
	  10, 7, "no common command \"cat\"" },
	{ "common_command_no_prog",
	  WG "commands:\n"
	     "  cat: {args: [x]}\n",
	  5, 3, "commands.cat: missing required key \"prog\"" },
	{ "common_command_null",
	  WG "commands:\n"
	     "  cat:\n",
	  5, 3, "commands.cat: missing required key \"prog\"" },
	/* durations */
	{ "duration_negative", WG "janitorFileAge: -1h\n", 4, 17, "negative" },
	{ "duration_garbage", WG "janitorFileAge: abc\n", 4, 17, "invalid duration \"abc\"" },
	{ "duration_unknown_unit", WG "janitorFileAge: 5d\n", 4, 17, "unknown unit" },
	{ "duration_microseconds", WG "janitorFileAge: 500us\n", 4, 17, "unknown unit" },
	{ "duration_missing_unit", WG "janitorFileAge: 1h30\n", 4, 17, "missing unit" },
	{ "duration_fraction_without_unit", WG "janitorFileAge: 1.5\n", 4, 17, "missing unit" },
	{ "duration_space", WG "janitorFileAge: 1h 30m\n", 4, 17, "spaces are not allowed" },
	{ "duration_sign", WG "janitorFileAge: +1h\n", 4, 17, "invalid duration" },
	{ "duration_overflow", WG "janitorFileAge: 9999999999999999999h\n", 4, 17, "too large" },
	{ "duration_overflow_seconds", WG "janitorFileAge: 99999999999999999\n", 4, 17,
	  "too large" },
	{ "duration_overflow_sum", WG "janitorFileAge: 2562047788015h2562047788015h\n", 4, 17,
	  "too large" },
	{ "duration_zero", WG "janitorFileAge: 0\n", 4, 17, "out of range 1s..87600h" },
	{ "duration_too_small", WG "janitorFileAge: 500ms\n", 4, 17, "out of range 1s..87600h" },
	{ "duration_too_big", WG "janitorFileAge: 87600h1ms\n", 4, 17, "out of range" },
	{ "duration_empty", WG "janitorFileAge: \"\"\n", 4, 17, "empty duration" },
	{ "duration_null", WG "janitorFileAge: ~\n", 4, 17, "found null" },
	/* environment entries */
	{ "env_no_equals", WG "env: [FOO]\n", 4, 7, "env[0]: invalid environment entry \"FOO\"" },
	{ "env_digit_first", WG "env: [A=1, 1A=x]\n", 4, 12, "env[1]: invalid environment entry" },
	{ "env_empty_name", WG "env: [\"=x\"]\n", 4, 7, "invalid environment entry" },
	{ "env_bad_char", WG "env: [A-B=x]\n", 4, 7, "invalid environment entry" },
	{ "env_space_in_name", WG "env: [\"A B=x\"]\n", 4, 7, "invalid environment entry" },
	{ "command_env_bad",
	  WG "services:\n"
	     "  s:\n"
	     "    waitgroup: a\n"
	     "    commands:\n"
	     "      cat:\n"
	     "        prog: cat\n"
	     "        env: [OK=1, \"no\"]\n",
	  10, 21, "services.s.commands.cat.env[1]: invalid environment entry" },
	/* jobLimits */
	{ "job_limits_scalar", WG "jobLimits: 5\n", 4, 12, "jobLimits: expected a mapping" },
	{ "job_limits_unknown", WG "jobLimits: {cpuSec: 5, stackMB: 1}\n", 4, 24, "stackMB" },
	{ "job_limits_range", WG "jobLimits: {openFiles: 3}\n", 4, 24, "jobLimits.openFiles" },
	{ "job_limits_type", WG "jobLimits: {memoryMB: lots}\n", 4, 23, "jobLimits.memoryMB" },
	{ "job_limits_nice", WG "jobLimits: {nice: 20}\n", 4, 19, "jobLimits.nice" },
	/* the fylr.yml wrapper */
	{ "fylr_scalar", "fylr: 1\n", 1, 7, "fylr: expected a mapping" },
	{ "fylr_no_services",
	  "fylr:\n"
	  "  other: 1\n",
	  1, 1, "no \"services\" key" },
	{ "fylr_services_sequence",
	  "fylr:\n"
	  "  services: [a]\n",
	  2, 13, "fylr.services: expected a mapping" },
	{ "fylr_no_execserver",
	  "fylr:\n"
	  "  services:\n"
	  "    api: {}\n",
	  2, 3, "no \"execserver\" key" },
	{ "fylr_execserver_null",
	  "fylr:\n"
	  "  services:\n"
	  "    execserver:\n",
	  3, 16, "fylr.services.execserver: expected a mapping, found null" },
	{ "fylr_error_inside",
	  "fylr:\n"
	  "  services:\n"
	  "    execserver:\n"
	  "      waitgroups:\n"
	  "        a: {processes: 0}\n",
	  5, 24, "out of range 1..1024" },
	{ "fylr_auto_balance_key_with_waitgroups",
	  "x: 1\n"
	  "fylr:\n"
	  "  services:\n"
	  "    execserver:\n"
	  "      minSamples: 4\n"
	  "      waitgroups: {a: {processes: 1}}\n",
	  5, 7, "minSamples: an auto-balance key" },
	/* a /0 block would let every address claim any client's address */
	{ "trusted_proxies_everyone_v4", WG "trustedProxies: [10.0.0.7, 0.0.0.0/0]\n", 4, 28,
	  "trustedProxies[1]: \"0.0.0.0/0\" trusts every address" },
	{ "trusted_proxies_everyone_v6", WG "trustedProxies:\n  - ::/0\n", 5, 5,
	  "trustedProxies[0]: \"::/0\" trusts every address" },
};

/* Each case is registered as a test under its own name; the one function
 * finds its case by the name of the test CUnit is running. */
static void test_error_case(void)
{
	const char *name = CU_get_current_test()->pName + strlen("error ");

	for (size_t i = 0; i < sizeof error_cases / sizeof error_cases[0]; i++) {
		const struct error_case *c = &error_cases[i];
		if (strcmp(c->name, name) == 0) {
			expect_error(c->text, c->line, c->column, c->word);
			return;
		}
	}
	CU_FAIL("no such error case");
}

/* ---- errors that need generated input ---- */

/* "waitgroups:" with n entries w0..w(n-1), or WG plus "services:" with n. */
static char *many(int n, int services)
{
	size_t cap = 64 + (size_t)n * 96, used;
	char *s = malloc(cap);

	if (!s)
		return NULL;
	used = (size_t)snprintf(s, cap, "%s", services ? WG "services:\n" : "waitgroups:\n");
	for (int i = 0; i < n; i++) {
		if (services)
			used += (size_t)snprintf(s + used, cap - used,
						 "  s%d: {waitgroup: a, "
						 "commands: {c%d: {prog: cat}}}\n",
						 i, i);
		else
			used += (size_t)snprintf(s + used, cap - used, "  w%d: {processes: %d}\n",
						 i, i + 1);
	}
	return s;
}

static void test_too_many_waitgroups(void)
{
	struct es_config cfg;
	char *ok = many(CONFIG_MAX_WAITGROUPS, 0), *bad = many(CONFIG_MAX_WAITGROUPS + 1, 0);

	CU_ASSERT_PTR_NOT_NULL_FATAL(ok);
	CU_ASSERT_PTR_NOT_NULL_FATAL(bad);
	if (expect_ok(ok, &cfg) == 0) {
		CU_ASSERT_EQUAL(cfg.nwaitgroups, CONFIG_MAX_WAITGROUPS);
		CU_ASSERT_EQUAL(cfg.waitgroups[31].processes, 32);
		config_free(&cfg);
	}
	/* The 33rd waitgroup is on line 34. */
	expect_error(bad, CONFIG_MAX_WAITGROUPS + 2, 3, "too many waitgroups (at most 32)");
	free(ok);
	free(bad);
}

static void test_too_many_services(void)
{
	struct es_config cfg;
	char *ok = many(CONFIG_MAX_SERVICES, 1), *bad = many(CONFIG_MAX_SERVICES + 1, 1);

	CU_ASSERT_PTR_NOT_NULL_FATAL(ok);
	CU_ASSERT_PTR_NOT_NULL_FATAL(bad);
	if (expect_ok(ok, &cfg) == 0) {
		CU_ASSERT_EQUAL(cfg.nservices, CONFIG_MAX_SERVICES);
		CU_ASSERT_EQUAL(config_service_index(&cfg, "s255"), 255);
		config_free(&cfg);
	}
	/* WG and "services:" take lines 1..4; the 257th service is on line 261. */
	expect_error(bad, 4 + CONFIG_MAX_SERVICES + 1, 3, "too many services (at most 256)");
	free(ok);
	free(bad);
}

static void test_nesting_too_deep(void)
{
	char text[512];
	size_t o = 0;

	o += (size_t)snprintf(text, sizeof text, "x: ");
	for (int i = 0; i < CY_MAX_DEPTH + 5; i++)
		text[o++] = '[';
	for (int i = 0; i < CY_MAX_DEPTH + 5; i++)
		text[o++] = ']';
	text[o++] = '\n';
	text[o] = '\0';
	/* The root mapping is level 1, so the 64th '[' (column 3 + 64) is too deep. */
	expect_error(text, 1, 3 + CY_MAX_DEPTH, "nesting deeper than 64");
}

static void test_name_max_length_ok(void)
{
	struct es_config cfg;
	char name[CONFIG_NAME_MAX + 1], text[512];

	memset(name, 'n', CONFIG_NAME_MAX);
	name[CONFIG_NAME_MAX] = '\0';
	snprintf(text, sizeof text,
		 "waitgroups:\n  %s: {processes: 1}\nservices:\n  %s:\n"
		 "    waitgroup: %s\n    commands:\n      %s: {prog: cat}\n",
		 name, name, name, name);
	if (expect_ok(text, &cfg) == 0) {
		CU_ASSERT_STRING_EQUAL(cfg.waitgroups[0].name, name);
		CU_ASSERT_STRING_EQUAL(cfg.services[0].commands[0].name, name);
		config_free(&cfg);
	}
	expect_ok("waitgroups:\n  A-z_0.9: {processes: 1}\n", &cfg);
	config_free(&cfg);
}

/* ---- files ---- */

static void test_file_missing(void)
{
	struct es_config cfg;
	struct config_error err;

	CU_ASSERT_EQUAL(config_load("/nonexistent/execserver.yml", &cfg, &err), -1);
	CU_ASSERT_STRING_EQUAL(err.text, "/nonexistent/execserver.yml: cannot open: "
					 "No such file or directory");
	config_free(&cfg);
}

static void expect_file_error(const char *rel, int line, int column, const char *word)
{
	struct es_config cfg;
	struct config_error err;
	char path[4096], prefix[4200];

	data_path(path, sizeof path, rel);
	CU_ASSERT_EQUAL_FATAL(config_load(path, &cfg, &err), -1);
	snprintf(prefix, sizeof prefix, "%s:%d:%d: ", path, line, column);
	CU_ASSERT_EQUAL(strncmp(err.text, prefix, strlen(prefix)), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err.text, word));
	if (strncmp(err.text, prefix, strlen(prefix)) != 0 || !strstr(err.text, word))
		fprintf(stderr, "\n  got:      %s\n  expected: %s...%s\n", err.text, prefix, word);
	config_free(&cfg);
}

static void test_file_empty(void)
{
	expect_file_error("tests/data/config/empty.yml", 1, 1, "empty");
}

static void test_file_syntax_error(void)
{
	/* The flow mapping opened on line 3 runs into the "services:" key. */
	expect_file_error("tests/data/config/syntax_error.yml", 4, 9, "YAML syntax error");
}

static void test_file_unknown_key(void)
{
	expect_file_error("tests/data/config/unknown_key.yml", 11, 9,
			  "services.s.commands.cat: unknown key \"arg\"");
}

static void test_file_full(void)
{
	struct es_config cfg;
	const struct config_service *images, *video;
	const struct config_command *convert, *identify, *ffmpeg;

	const char *path = load_file("tests/data/config/full.yml", &cfg);
	CU_ASSERT_STRING_EQUAL(cfg.file, path);
	CU_ASSERT_STRING_EQUAL(cfg.addr, "[::1]:9090");
	CU_ASSERT_STRING_EQUAL(cfg.temp_dir, "/tmp/execserver-test");
	CU_ASSERT_EQUAL(cfg.job_removal_policy, JOB_REMOVAL_ALL);
	CU_ASSERT_EQUAL(cfg.janitor_file_age_ms, 5400000);
	CU_ASSERT_EQUAL_FATAL(cfg.env.count, 2);
	CU_ASSERT_STRING_EQUAL(cfg.env.items[0], "LANG=C");
	CU_ASSERT_STRING_EQUAL(cfg.env.items[1], "TZ=UTC");

	CU_ASSERT_EQUAL_FATAL(cfg.ncommands, 2);
	CU_ASSERT_STRING_EQUAL(cfg.commands[0].name, "convert");
	CU_ASSERT_STRING_EQUAL(cfg.commands[0].prog, "/usr/bin/convert");
	CU_ASSERT_EQUAL(cfg.commands[0].args.count, 3);
	CU_ASSERT_EQUAL(cfg.commands[0].line, 11);
	CU_ASSERT_EQUAL(cfg.commands[0].column, 3);
	CU_ASSERT_STRING_EQUAL(cfg.commands[1].prog, "ffmpeg");

	CU_ASSERT_EQUAL_FATAL(cfg.nwaitgroups, 2);
	CU_ASSERT_STRING_EQUAL(cfg.waitgroups[0].name, "light");
	CU_ASSERT_EQUAL(cfg.waitgroups[0].processes, 8);
	CU_ASSERT_EQUAL(cfg.waitgroups[0].line, 21);
	CU_ASSERT_STRING_EQUAL(cfg.waitgroups[1].name, "heavy");
	CU_ASSERT_EQUAL(cfg.waitgroups[1].processes, 1);

	CU_ASSERT_EQUAL_FATAL(cfg.nservices, 2);
	images = config_find_service(&cfg, "images");
	video = config_find_service(&cfg, "video");
	CU_ASSERT_PTR_NOT_NULL_FATAL(images);
	CU_ASSERT_PTR_NOT_NULL_FATAL(video);
	CU_ASSERT_EQUAL(images->line, 26);
	CU_ASSERT_EQUAL(images->column, 3);
	CU_ASSERT_STRING_EQUAL(images->waitgroup, "heavy");
	CU_ASSERT_EQUAL(images->wg_index, 1);
	CU_ASSERT_EQUAL(video->wg_index, 0);
	CU_ASSERT_EQUAL(images->enabled, 1);
	CU_ASSERT_EQUAL(images->ncommands, 2);

	/* convert inherits prog, env and startupCheck; its own args win. */
	convert = config_find_command(images, "convert");
	CU_ASSERT_PTR_NOT_NULL_FATAL(convert);
	CU_ASSERT_STRING_EQUAL(convert->prog, "/usr/bin/convert");
	CU_ASSERT_EQUAL_FATAL(convert->args.count, 3);
	CU_ASSERT_STRING_EQUAL(convert->args.items[2], "1GiB");
	CU_ASSERT_EQUAL_FATAL(convert->env.count, 1);
	CU_ASSERT_STRING_EQUAL(convert->env.items[0], "MAGICK_THREAD_LIMIT=1");
	CU_ASSERT_EQUAL(convert->startup_check.present, 1);
	CU_ASSERT_EQUAL_FATAL(convert->startup_check.args.count, 1);
	CU_ASSERT_STRING_EQUAL(convert->startup_check.args.items[0], "-version");
	CU_ASSERT_STRING_EQUAL(convert->startup_check.regex, "^Version: ImageMagick");
	CU_ASSERT_EQUAL(convert->line, 29);
	CU_ASSERT_EQUAL(convert->column, 7);

	identify = config_find_command(images, "identify");
	CU_ASSERT_PTR_NOT_NULL_FATAL(identify);
	CU_ASSERT_STRING_EQUAL(identify->prog, "identify");
	CU_ASSERT_EQUAL(identify->args.count, 0);
	CU_ASSERT_EQUAL(identify->startup_check.present, 0);

	ffmpeg = config_find_command(video, "ffmpeg");
	CU_ASSERT_PTR_NOT_NULL_FATAL(ffmpeg);
	CU_ASSERT_STRING_EQUAL(ffmpeg->prog, "ffmpeg");
	CU_ASSERT_PTR_NULL(config_find_command(video, "convert"));

	CU_ASSERT_EQUAL(cfg.handlers, 3);
	CU_ASSERT_EQUAL(config_effective_handlers(&cfg), 3);
	CU_ASSERT_EQUAL(cfg.offer_timeout_sec, 5);
	CU_ASSERT_EQUAL(cfg.resume_grace_sec, 0);
	CU_ASSERT_EQUAL(cfg.drain_timeout_sec, 60);
	CU_ASSERT_EQUAL(cfg.ping_interval_sec, 10);
	CU_ASSERT_EQUAL(cfg.ping_timeout_sec, 25);
	CU_ASSERT_EQUAL(cfg.max_connections, 100);
	CU_ASSERT_EQUAL(cfg.max_wants, 1000);
	CU_ASSERT_EQUAL(cfg.max_wants_per_connection, 50);
	CU_ASSERT_EQUAL(cfg.max_frame_bytes, 65536);
	CU_ASSERT_STRING_EQUAL(cfg.auth_token, "s3cret-Token_1");
	CU_ASSERT_STRING_EQUAL(cfg.user, "nobody");
	CU_ASSERT_STRING_EQUAL(cfg.group, "nogroup");
	CU_ASSERT_STRING_EQUAL(cfg.pid_file, "/tmp/execserver-test.pid");
	CU_ASSERT_EQUAL(cfg.log_level, LOG_LVL_DEBUG);
	config_free(&cfg);
	CU_ASSERT_PTR_NULL(cfg.addr);
	config_free(&cfg); /* twice is harmless */
}

static void test_file_fylr_wrapper(void)
{
	struct es_config cfg;

	load_file("tests/data/config/fylr.yml", &cfg);
	CU_ASSERT_STRING_EQUAL(cfg.addr, ":8083");
	CU_ASSERT_EQUAL_FATAL(cfg.nwaitgroups, 1);
	CU_ASSERT_EQUAL(cfg.waitgroups[0].processes, 2);
	CU_ASSERT_EQUAL_FATAL(cfg.nservices, 1);
	CU_ASSERT_STRING_EQUAL(cfg.services[0].name, "exec");
	CU_ASSERT_EQUAL_FATAL(cfg.services[0].ncommands, 1);
	CU_ASSERT_STRING_EQUAL(cfg.services[0].commands[0].prog, "echo");
	CU_ASSERT_EQUAL(cfg.services[0].commands[0].line, 21);
	CU_ASSERT_EQUAL(cfg.services[0].commands[0].column, 13);
	CU_ASSERT_EQUAL(cfg.offer_timeout_sec, 10); /* defaults for the rest */
	config_free(&cfg);
}

static void test_shipped_config(void)
{
	struct es_config cfg;
	const struct config_service *demo, *sleep_svc;
	const struct config_command *cat, *sha, *wc;

	load_file("etc/execserver.yml", &cfg);
	CU_ASSERT_STRING_EQUAL(cfg.addr, "127.0.0.1:8083");
	CU_ASSERT_STRING_EQUAL(cfg.temp_dir, "/var/lib/execserver");
	/* auto-balance with the defaults: one pool of the host's CPUs */
	CU_ASSERT_EQUAL(cfg.auto_balance, 1);
	CU_ASSERT_EQUAL_FATAL(cfg.nwaitgroups, 1);
	CU_ASSERT_STRING_EQUAL(cfg.waitgroups[0].name, "auto");
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	CU_ASSERT_EQUAL(cfg.waitgroups[0].processes, ncpu < 1 ? 1 : ncpu);
	CU_ASSERT_EQUAL(cfg.heavy_threshold_ms, 10000);
	CU_ASSERT_EQUAL(cfg.min_samples, 3);
	CU_ASSERT_DOUBLE_EQUAL(cfg.unknown_share, 0.5, 1e-12);
	demo = config_find_service(&cfg, "demo");
	sleep_svc = config_find_service(&cfg, "sleep");
	CU_ASSERT_PTR_NOT_NULL_FATAL(demo);
	CU_ASSERT_PTR_NOT_NULL_FATAL(sleep_svc);
	CU_ASSERT_EQUAL(demo->wg_index, 0);
	CU_ASSERT_EQUAL(sleep_svc->wg_index, 0);
	cat = config_find_command(demo, "cat");
	sha = config_find_command(demo, "sha256sum");
	wc = config_find_command(demo, "wc");
	CU_ASSERT_PTR_NOT_NULL_FATAL(cat);
	CU_ASSERT_PTR_NOT_NULL_FATAL(sha);
	CU_ASSERT_PTR_NOT_NULL_FATAL(wc);
	CU_ASSERT_STRING_EQUAL(cat->prog, "cat");
	CU_ASSERT_EQUAL(cat->startup_check.present, 1);
	CU_ASSERT_STRING_EQUAL(sha->prog, "sha256sum");
	CU_ASSERT_STRING_EQUAL(wc->prog, "wc");
	CU_ASSERT_EQUAL_FATAL(wc->args.count, 1);
	CU_ASSERT_STRING_EQUAL(wc->args.items[0], "-c");
	CU_ASSERT_PTR_NOT_NULL(config_find_command(sleep_svc, "sleep"));
	/* it runs as its own user, never jobs as root, with the default limits */
	CU_ASSERT(cfg.user && strcmp(cfg.user, "execserver") == 0);
	CU_ASSERT(cfg.group && strcmp(cfg.group, "execserver") == 0);
	CU_ASSERT_EQUAL(cfg.allow_root_jobs, 0);
	CU_ASSERT_EQUAL(cfg.handshake_timeout_sec, 10);
	CU_ASSERT_EQUAL(cfg.idle_timeout_sec, 0);
	CU_ASSERT_EQUAL(cfg.max_jobs_per_client, 0);
	CU_ASSERT_EQUAL(cfg.callback_allow.count, 0);
	/* It must pass its own startup checks on a system with coreutils. */
	log_set_level(LOG_LVL_ERROR);
	CU_ASSERT_EQUAL(startup_check_run(&cfg, 1), 0);
	log_set_level(LOG_LVL_INFO);
	CU_ASSERT_EQUAL(demo->enabled, 1);
	CU_ASSERT_EQUAL(sleep_svc->enabled, 1);
	config_free(&cfg);
}

/* Fails the 1st, 2nd, ... allocation of a full load in turn: each run must
 * report "out of memory" and leave nothing allocated (valgrind checks). */
static void test_out_of_memory(void)
{
	struct es_config cfg;
	struct config_error err;
	char path[4096];
	FILE *f;
	char text[8192];
	size_t len;
	long n;
	int failures = 0;

	data_path(path, sizeof path, "tests/data/config/full.yml");
	f = fopen(path, "r");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	len = fread(text, 1, sizeof text - 1, f);
	fclose(f);
	text[len] = '\0';
	for (n = 0; n < 100000; n++) {
		int rc;
		failalloc_budget = n;
		rc = config_load_buffer("full.yml", text, len, &cfg, &err);
		failalloc_budget = -1;
		if (rc == 0)
			break;
		if (!strstr(err.text, "out of memory")) {
			failures++;
			fprintf(stderr, "\n  allocation %ld failed: %s\n", n, err.text);
		}
		config_free(&cfg);
	}
	CU_ASSERT_EQUAL(failures, 0);
	CU_ASSERT(n > 50 && n < 100000); /* it did get through, after many failures */
	if (n < 100000) {
		CU_ASSERT_EQUAL(cfg.nservices, 2);
		config_free(&cfg);
	}
}

/* ---- valid configurations ---- */

static void test_defaults(void)
{
	struct es_config cfg;

	config_defaults(&cfg);
	CU_ASSERT_STRING_EQUAL(cfg.addr, "127.0.0.1:8083");
	CU_ASSERT_STRING_EQUAL(cfg.temp_dir, "/var/lib/execserver");
	CU_ASSERT_EQUAL(cfg.job_removal_policy, JOB_REMOVAL_DONE);
	CU_ASSERT_EQUAL(cfg.janitor_file_age_ms, 86400000);
	CU_ASSERT_EQUAL(cfg.env.count, 0);
	CU_ASSERT_EQUAL(cfg.ncommands, 0);
	CU_ASSERT_EQUAL(cfg.nwaitgroups, 0);
	CU_ASSERT_EQUAL(cfg.nservices, 0);
	CU_ASSERT_EQUAL(cfg.handlers, 0);
	CU_ASSERT_EQUAL(cfg.offer_timeout_sec, 10);
	CU_ASSERT_EQUAL(cfg.broker, 1);
	CU_ASSERT_EQUAL(cfg.resume_grace_sec, 30);
	CU_ASSERT_EQUAL(cfg.drain_timeout_sec, 20);
	CU_ASSERT_EQUAL(cfg.ping_interval_sec, 15);
	CU_ASSERT_EQUAL(cfg.ping_timeout_sec, 45);
	CU_ASSERT_EQUAL(cfg.max_connections, 4096);
	CU_ASSERT_EQUAL(cfg.max_wants, 65536);
	CU_ASSERT_EQUAL(cfg.max_wants_per_connection, 4096);
	CU_ASSERT_EQUAL(cfg.max_frame_bytes, 1048576);
	CU_ASSERT_PTR_NULL(cfg.auth_token);
	CU_ASSERT_PTR_NULL(cfg.user);
	CU_ASSERT_PTR_NULL(cfg.group);
	CU_ASSERT_STRING_EQUAL(cfg.pid_file, "/run/execserver.pid");
	CU_ASSERT_EQUAL(cfg.log_level, LOG_LVL_INFO);
	config_free(&cfg);
}

static void test_minimal_keeps_defaults(void)
{
	struct es_config cfg, def;

	if (expect_ok(WG, &cfg) != 0)
		return;
	config_defaults(&def);
	CU_ASSERT_STRING_EQUAL(cfg.file, "t.yml");
	CU_ASSERT_STRING_EQUAL(cfg.addr, def.addr);
	CU_ASSERT_STRING_EQUAL(cfg.temp_dir, def.temp_dir);
	CU_ASSERT_STRING_EQUAL(cfg.pid_file, def.pid_file);
	CU_ASSERT_EQUAL(cfg.janitor_file_age_ms, def.janitor_file_age_ms);
	CU_ASSERT_EQUAL(cfg.max_frame_bytes, def.max_frame_bytes);
	CU_ASSERT_EQUAL(cfg.ping_timeout_sec, def.ping_timeout_sec);
	CU_ASSERT_EQUAL(cfg.nservices, 0);
	CU_ASSERT_EQUAL_FATAL(cfg.nwaitgroups, 1);
	CU_ASSERT_STRING_EQUAL(cfg.waitgroups[0].name, "a");
	CU_ASSERT_EQUAL(cfg.waitgroups[0].line, 2);
	CU_ASSERT_EQUAL(cfg.waitgroups[0].column, 3);
	config_free(&def);
	config_free(&cfg);
}

/* No waitgroups block: one pool "auto", every service in it, the keys
 * resolved against the pool. */
static void test_auto_balance(void)
{
	static const struct {
		const char *text;
		int pool, reserve, cap;
	} cases[] = {
		{ "cpus: 8\n", 8, 2, 4 }, /* defaults: pool/4, half */
		{ "cpus: 3\n", 3, 1, 1 }, /* max(1, 3/4); floor(1.5) */
		{ "cpus: 1\n", 1, 0, 1 }, /* never the whole pool; at least 1 */
		{ "cpus: 2\nunknownShare: 0.1\n", 2, 1, 1 },
		{ "cpus: 16\nfastReserve: 15\nunknownShare: 1\n", 16, 15, 16 },
		{ "cpus: 10\nunknownShare: .25\n", 10, 2, 2 },
		/* exactly floor(share x cpus), where binary floating point
		 * comes out just below the integer (0.29 x 100 = 28.999...) */
		{ "cpus: 100\nunknownShare: 0.29\n", 100, 25, 29 },
		{ "cpus: 100\nunknownShare: 0.57\n", 100, 25, 57 },
		{ "cpus: 1000\nunknownShare: 0.001\n", 1000, 250, 1 },
		{ "cpus: 1000\nunknownShare: 0.0029\n", 1000, 250, 2 },
		{ "cpus: 1024\nunknownShare: 0.999999999999999\n", 1024, 256, 1023 },
		{ "cpus: 1024\nunknownShare: 0.9990000000000000000\n", 1024, 256, 1022 },
		{ "cpus: 4\nunknownShare: 1.\n", 4, 1, 4 },
		{ "cpus: 4\nunknownShare: 1.000\n", 4, 1, 4 },
		{ "cpus: 7\nunknownShare: 0.3\n", 7, 1, 2 }, /* floor(2.1) */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct es_config cfg;
		if (expect_ok(cases[i].text, &cfg) != 0)
			continue;
		CU_ASSERT_EQUAL(cfg.auto_balance, 1);
		CU_ASSERT_EQUAL_FATAL(cfg.nwaitgroups, 1);
		CU_ASSERT_STRING_EQUAL(cfg.waitgroups[0].name, "auto");
		CU_ASSERT_EQUAL(cfg.waitgroups[0].processes, cases[i].pool);
		CU_ASSERT_EQUAL(cfg.fast_reserve, cases[i].reserve);
		CU_ASSERT_EQUAL(cfg.unknown_cap, cases[i].cap);
		if (cfg.fast_reserve != cases[i].reserve || cfg.unknown_cap != cases[i].cap)
			fprintf(stderr, "\n  case %zu: reserve %d cap %d\n", i, cfg.fast_reserve,
				cfg.unknown_cap);
		config_free(&cfg);
	}

	/* the defaults, the CPU count, services mapped to the pool */
	struct es_config cfg;
	if (expect_ok("services:\n  a: {commands: {c: {prog: cat}}}\n"
		      "  b: {commands: {c: {prog: cat}}}\n"
		      "heavyThreshold: 90s\nminSamples: 7\n",
		      &cfg) != 0)
		return;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	CU_ASSERT_EQUAL(cfg.cpus, 0);
	CU_ASSERT_EQUAL(cfg.waitgroups[0].processes, ncpu < 1 ? 1 : ncpu);
	CU_ASSERT_EQUAL(cfg.heavy_threshold_ms, 90000);
	CU_ASSERT_EQUAL(cfg.min_samples, 7);
	CU_ASSERT_DOUBLE_EQUAL(cfg.unknown_share, 0.5, 1e-12);
	CU_ASSERT_EQUAL_FATAL(cfg.nservices, 2);
	for (size_t i = 0; i < 2; i++) {
		CU_ASSERT_EQUAL(cfg.services[i].wg_index, 0);
		CU_ASSERT_STRING_EQUAL(cfg.services[i].waitgroup, "auto");
	}
	config_free(&cfg);

	/* an explicit waitgroups block keeps the fixed pools exactly */
	if (expect_ok(WG SVC, &cfg) != 0)
		return;
	CU_ASSERT_EQUAL(cfg.auto_balance, 0);
	CU_ASSERT_EQUAL(cfg.nwaitgroups, 1);
	CU_ASSERT_STRING_EQUAL(cfg.waitgroups[0].name, "a");
	CU_ASSERT_EQUAL(cfg.waitgroups[0].processes, 1);
	CU_ASSERT_STRING_EQUAL(cfg.services[0].waitgroup, "a");
	config_free(&cfg);
}

static void test_values_accepted(void)
{
	struct es_config cfg;

	/* Quoted strings, ":port", IPv6, limits at both ends, null optionals. */
	if (expect_ok(WG "addr: \":0\"\nhandlers: 64\nofferTimeoutSec: 3600\nresumeGraceSec: 0\n"
			 "pingIntervalSec: 1\npingTimeoutSec: 2\nmaxWants: 1\n"
			 "maxWantsPerConnection: 1\nmaxFrameBytes: 1024\nauthToken: ~\nuser:\n"
			 "env: ~\ncommands: ~\nservices: ~\njanitorFileAge: \"1.5s\"\n"
			 "jobRemovalPolicy: none\nlogLevel: error\n",
		      &cfg) == 0) {
		CU_ASSERT_STRING_EQUAL(cfg.addr, ":0");
		CU_ASSERT_EQUAL(cfg.handlers, 64);
		CU_ASSERT_EQUAL(config_effective_handlers(&cfg), 64);
		CU_ASSERT_EQUAL(cfg.ping_timeout_sec, 2);
		CU_ASSERT_PTR_NULL(cfg.auth_token);
		CU_ASSERT_PTR_NULL(cfg.user);
		CU_ASSERT_EQUAL(cfg.env.count, 0);
		CU_ASSERT_EQUAL(cfg.nservices, 0);
		CU_ASSERT_EQUAL(cfg.janitor_file_age_ms, 1500);
		CU_ASSERT_EQUAL(cfg.job_removal_policy, JOB_REMOVAL_NONE);
		CU_ASSERT_EQUAL(cfg.log_level, LOG_LVL_ERROR);
		config_free(&cfg);
	}
	if (expect_ok(WG "addr: \"[::]:65535\"\nhandlers: +0\njanitorFileAge: 3600\n", &cfg) == 0) {
		CU_ASSERT_EQUAL(cfg.handlers, 0);
		CU_ASSERT_EQUAL(cfg.janitor_file_age_ms, 3600000);
		config_free(&cfg);
	}
	/* Keys in any order: services before the waitgroups they name. */
	if (expect_ok("services:\n  s: {waitgroup: b, commands: {c: {prog: cat}}}\n"
		      "waitgroups:\n  a: {processes: 1}\n  b: {processes: 2}\n",
		      &cfg) == 0) {
		CU_ASSERT_EQUAL(cfg.services[0].wg_index, 1);
		config_free(&cfg);
	}
}

static void test_inheritance(void)
{
	struct es_config cfg;
	const struct config_command *c;

	if (expect_ok(WG "commands:\n"
			 "  tool:\n    prog: /usr/bin/tool\n    args: [-a, -b]\n    env: [T=1]\n"
			 "    startupCheck: {args: [--version], regex: tool}\n"
			 "services:\n  s:\n    waitgroup: a\n    commands:\n"
			 "      tool: {}\n" /* line 14 */
			 "      other:\n        prog: other\n"
			 "  t:\n    waitgroup: a\n    commands:\n"
			 "      tool:\n        args: []\n        env: [T=2, U=3]\n"
			 "        startupCheck: {regex: x}\n"
			 "  u:\n    waitgroup: a\n    commands:\n"
			 "      tool:\n        prog: mytool\n"
			 "  v:\n    waitgroup: a\n    commands:\n      tool:\n",
		      &cfg) != 0)
		return;
	/* s.tool: everything inherited, as a deep copy. */
	c = config_find_command(config_find_service(&cfg, "s"), "tool");
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_STRING_EQUAL(c->prog, "/usr/bin/tool");
	CU_ASSERT_PTR_NOT_EQUAL(c->prog, cfg.commands[0].prog);
	CU_ASSERT_EQUAL_FATAL(c->args.count, 2);
	CU_ASSERT_STRING_EQUAL(c->args.items[1], "-b");
	CU_ASSERT_EQUAL_FATAL(c->env.count, 1);
	CU_ASSERT_STRING_EQUAL(c->env.items[0], "T=1");
	CU_ASSERT_EQUAL(c->startup_check.present, 1);
	CU_ASSERT_STRING_EQUAL(c->startup_check.regex, "tool");
	CU_ASSERT_EQUAL(c->startup_check.args.count, 1);
	CU_ASSERT_EQUAL(c->line, 14);
	CU_ASSERT_EQUAL(c->column, 7);
	/* t.tool: args, env and startupCheck given, so they replace. */
	c = config_find_command(config_find_service(&cfg, "t"), "tool");
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_STRING_EQUAL(c->prog, "/usr/bin/tool");
	CU_ASSERT_EQUAL(c->args.count, 0);
	CU_ASSERT_EQUAL_FATAL(c->env.count, 2);
	CU_ASSERT_STRING_EQUAL(c->env.items[0], "T=2");
	CU_ASSERT_STRING_EQUAL(c->startup_check.regex, "x");
	CU_ASSERT_EQUAL(c->startup_check.args.count, 0);
	/* u.tool: its own prog, so nothing is inherited. */
	c = config_find_command(config_find_service(&cfg, "u"), "tool");
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_STRING_EQUAL(c->prog, "mytool");
	CU_ASSERT_EQUAL(c->args.count, 0);
	CU_ASSERT_EQUAL(c->env.count, 0);
	CU_ASSERT_EQUAL(c->startup_check.present, 0);
	/* v.tool: "tool:" with no value inherits everything too. */
	c = config_find_command(config_find_service(&cfg, "v"), "tool");
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_STRING_EQUAL(c->prog, "/usr/bin/tool");
	CU_ASSERT_EQUAL(c->args.count, 2);
	config_free(&cfg);
}

static void test_lookups(void)
{
	struct es_config cfg;
	const struct config_service *svc;

	if (expect_ok(WG "services:\n  one: {waitgroup: a, commands: {x: {prog: cat}}}\n"
			 "  two: {waitgroup: a, commands: {y: {prog: cat}, z: {prog: wc}}}\n",
		      &cfg) != 0)
		return;
	CU_ASSERT_EQUAL(config_service_index(&cfg, "one"), 0);
	CU_ASSERT_EQUAL(config_service_index(&cfg, "two"), 1);
	CU_ASSERT_EQUAL(config_service_index(&cfg, "three"), -1);
	CU_ASSERT_EQUAL(config_service_index(&cfg, "on"), -1);
	svc = config_find_service(&cfg, "two");
	CU_ASSERT_PTR_EQUAL(svc, &cfg.services[1]);
	CU_ASSERT_PTR_NULL(config_find_service(&cfg, "nope"));
	CU_ASSERT_PTR_EQUAL(config_find_command(svc, "z"), &svc->commands[1]);
	CU_ASSERT_PTR_NULL(config_find_command(svc, "x"));
	config_free(&cfg);
}

static void test_effective_handlers(void)
{
	struct es_config cfg;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	config_defaults(&cfg);
	if (cpus > CONFIG_MAX_HANDLERS)
		cpus = CONFIG_MAX_HANDLERS;
	CU_ASSERT_EQUAL(config_effective_handlers(&cfg), cpus < 1 ? 1 : (int)cpus);
	cfg.handlers = 7;
	CU_ASSERT_EQUAL(config_effective_handlers(&cfg), 7);
	config_free(&cfg);
}

static void test_addr_split(void)
{
	char host[64];
	int port = -1;
	const char *why = NULL;

	CU_ASSERT_EQUAL(config_addr_split("127.0.0.1:8083", host, sizeof host, &port, &why), 0);
	CU_ASSERT_STRING_EQUAL(host, "127.0.0.1");
	CU_ASSERT_EQUAL(port, 8083);
	CU_ASSERT_EQUAL(config_addr_split(":8083", host, sizeof host, &port, NULL), 0);
	CU_ASSERT_STRING_EQUAL(host, "");
	CU_ASSERT_EQUAL(config_addr_split("[::1]:0", host, sizeof host, &port, NULL), 0);
	CU_ASSERT_STRING_EQUAL(host, "::1");
	CU_ASSERT_EQUAL(port, 0);
	CU_ASSERT_EQUAL(config_addr_split("[fe80::1%eth0]:80", host, sizeof host, &port, NULL), 0);
	CU_ASSERT_STRING_EQUAL(host, "fe80::1%eth0");
	CU_ASSERT_EQUAL(config_addr_split("my-host.example:65535", host, sizeof host, &port, NULL),
			0);
	CU_ASSERT_EQUAL(port, 65535);
	CU_ASSERT_EQUAL(config_addr_split("host:65536", host, sizeof host, &port, &why), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "0..65535"));
	CU_ASSERT_EQUAL(config_addr_split("host:123456", host, sizeof host, &port, NULL), -1);
	CU_ASSERT_EQUAL(config_addr_split("host", host, sizeof host, &port, NULL), -1);
	CU_ASSERT_EQUAL(config_addr_split("::1:80", host, sizeof host, &port, NULL), -1);
	CU_ASSERT_EQUAL(config_addr_split("[::1:80", host, sizeof host, &port, NULL), -1);
	CU_ASSERT_EQUAL(config_addr_split("[fe80::1%]:80", host, sizeof host, &port, NULL), -1);
	CU_ASSERT_EQUAL(config_addr_split("[%eth0]:80", host, sizeof host, &port, NULL), -1);
	CU_ASSERT_EQUAL(config_addr_split("[fe80::1%e/h]:80", host, sizeof host, &port, NULL), -1);
	CU_ASSERT_EQUAL(config_addr_split("abcdefgh:80", host, 4, &port, &why), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "too long"));
}

/* ---- durations and the generic getters ---- */

static void test_duration_parse(void)
{
	static const struct {
		const char *s;
		int64_t ms;
	} ok[] = {
		{ "0", 0 },
		{ "10", 10000 },
		{ "10s", 10000 },
		{ "500ms", 500 },
		{ "2m", 120000 },
		{ "24h", 86400000 },
		{ "1h30m", 5400000 },
		{ "1h30m15s250ms", 5415250 },
		{ "1.5h", 5400000 },
		{ ".5s", 500 },
		{ "1.0005s", 1000 },
		{ "0s", 0 },
		{ "3m3m", 360000 },
		{ "007s", 7000 },
		{ "9223372036854775s", INT64_C(9223372036854775000) },
	};
	static const char *const bad[] = {
		"",
		"-1s",
		"-5",
		"+1s",
		"abc",
		"1x",
		"5d",
		"1h 30m",
		" 1h",
		"1h30",
		"1.5",
		"s",
		".s",
		"1..5s",
		"500us",
		"9223372036854776s",
		"9223372036854775808",
		"2562047788015216h",
		"1e3s",
		"1m-",
		"h1",
	};
	int64_t ms;
	const char *why;

	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		int rc = duration_parse_ms(ok[i].s, &ms, &why);
		CU_ASSERT_EQUAL(rc, 0);
		CU_ASSERT_EQUAL(ms, ok[i].ms);
		if (rc != 0 || ms != ok[i].ms)
			fprintf(stderr, "\n  duration \"%s\" failed\n", ok[i].s);
	}
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int rc = duration_parse_ms(bad[i], &ms, &why);
		CU_ASSERT_EQUAL(rc, -1);
		if (rc != -1)
			fprintf(stderr, "\n  duration \"%s\" was accepted\n", bad[i]);
	}
}

static void test_duration_format(void)
{
	static const struct {
		int64_t ms;
		const char *s;
	} cases[] = {
		{ 0, "0s" },          { 500, "500ms" },
		{ 1000, "1s" },       { 90500, "1m30s500ms" },
		{ 86400000, "24h" },  { 5400000, "1h30m" },
		{ 3600001, "1h1ms" },
	};
	char buf[64];

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int64_t back = -1;
		const char *why;
		duration_format_ms(cases[i].ms, buf, sizeof buf);
		CU_ASSERT_STRING_EQUAL(buf, cases[i].s);
		CU_ASSERT_EQUAL(duration_parse_ms(buf, &back, &why), 0);
		CU_ASSERT_EQUAL(back, cases[i].ms);
	}
	CU_ASSERT_STRING_EQUAL(duration_format_ms(INT64_MAX, buf, sizeof buf),
			       "2562047788015h12m55s807ms");
	CU_ASSERT_STRING_EQUAL(duration_format_ms(5400000, buf, 4), "1h3");
}

/* Parses "v: <text>" and returns the value node through *root. */
static const struct cy_node *parse_value(const char *text, struct cy_node **root,
					 struct config_error *err)
{
	struct cy_ctx ctx = { .file = "v.yml", .err = err };

	if (cy_parse(&ctx, text, strlen(text), root) < 0 || !*root)
		return NULL;
	return cy_map_find(*root, "v", NULL);
}

static void test_yaml_bool(void)
{
	static const struct {
		const char *text;
		int ok, value;
	} cases[] = {
		{ "v: yes", 1, 1 },     { "v: no", 1, 0 }, { "v: true", 1, 1 },
		{ "v: FALSE", 1, 0 },   { "v: on", 1, 1 }, { "v: Off", 1, 0 },
		{ "v: \"yes\"", 0, 0 }, { "v: 1", 0, 0 },  { "v: y", 0, 0 },
		{ "v: [yes]", 0, 0 },   { "v:", 0, 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct config_error err;
		struct cy_ctx ctx = { .file = "v.yml", .err = &err };
		struct cy_node *root = NULL;
		const struct cy_node *v = parse_value(cases[i].text, &root, &err);
		int b = -1;

		CU_ASSERT_PTR_NOT_NULL_FATAL(v);
		CU_ASSERT_EQUAL(cy_get_bool(&ctx, v, "v", &b), cases[i].ok ? 0 : -1);
		if (cases[i].ok) {
			CU_ASSERT_EQUAL(b, cases[i].value);
		} else {
			CU_ASSERT(strncmp(err.text, "v.yml:1:", 8) == 0 &&
				  strstr(err.text,
					 ": v: expected a boolean (yes/no/true/false/on/off)"));
		}
		cy_free(root);
	}
}

static void test_yaml_int_limits(void)
{
	static const struct {
		const char *text;
		int ok;
		long long value;
	} cases[] = {
		{ "v: 9223372036854775807", 1, LLONG_MAX },
		{ "v: -9223372036854775808", 1, LLONG_MIN },
		{ "v: 9223372036854775808", 0, 0 },
		{ "v: -9223372036854775809", 0, 0 },
		{ "v: 0", 1, 0 },
		{ "v: -0", 1, 0 },
		{ "v: 1_000", 0, 0 },
		{ "v: 1e3", 0, 0 },
		{ "v: \" 1\"", 0, 0 },
		{ "v: 12a", 0, 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct config_error err;
		struct cy_ctx ctx = { .file = "v.yml", .err = &err };
		struct cy_node *root = NULL;
		const struct cy_node *v = parse_value(cases[i].text, &root, &err);
		long long n = 42;

		CU_ASSERT_PTR_NOT_NULL_FATAL(v);
		CU_ASSERT_EQUAL(cy_get_int(&ctx, v, "v", LLONG_MIN, LLONG_MAX, &n),
				cases[i].ok ? 0 : -1);
		if (cases[i].ok) {
			CU_ASSERT_EQUAL(n, cases[i].value);
		} else {
			CU_ASSERT_PTR_NOT_NULL(
				strstr(err.text, "-9223372036854775808..9223372036854775807"));
		}
		cy_free(root);
	}
}

static void test_yaml_tree(void)
{
	struct config_error err;
	struct cy_ctx ctx = { .file = "v.yml", .err = &err };
	struct cy_node *root = NULL;
	const struct cy_node *k, *v;
	char q[64];
	const char *text = "a: 1\nb: [x, 'y']\n\"c\": {d: ~}\n";

	CU_ASSERT_EQUAL_FATAL(cy_parse(&ctx, text, strlen(text), &root), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(root);
	CU_ASSERT_EQUAL(root->type, CY_MAPPING);
	CU_ASSERT_EQUAL(cy_map_size(root), 3);
	v = cy_map_find(root, "b", &k);
	CU_ASSERT_PTR_NOT_NULL_FATAL(v);
	CU_ASSERT_EQUAL(k->line, 2);
	CU_ASSERT_EQUAL(k->column, 1);
	CU_ASSERT_EQUAL(v->type, CY_SEQUENCE);
	CU_ASSERT_EQUAL(v->nkids, 2);
	CU_ASSERT_EQUAL(v->kids[1]->quoted, 1);
	CU_ASSERT_EQUAL(v->kids[1]->column, 8);
	v = cy_map_find(root, "c", NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(v);
	CU_ASSERT_TRUE(cy_is_null(cy_map_find(v, "d", NULL)));
	CU_ASSERT_PTR_NULL(cy_map_find(root, "z", NULL));
	CU_ASSERT_EQUAL(
		cy_check_keys(&ctx, root, "root", (const char *const[]){ "a", "b", "c", NULL }), 0);
	CU_ASSERT_EQUAL(cy_check_keys(&ctx, root, "root", (const char *const[]){ "a", "b", NULL }),
			-1);
	CU_ASSERT_STRING_EQUAL(err.text,
			       "v.yml:3:1: root: unknown key \"c\" (expected one of: a, b)");
	/* Long values are cut in messages. */
	CU_ASSERT_STRING_EQUAL(cy_quote(cy_map_find(root, "a", NULL), q, sizeof q), "\"1\"");
	cy_free(root);

	text = "v: \"0123456789012345678901234567890123456789XYZ\"\n";
	v = parse_value(text, &root, &err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(v);
	CU_ASSERT_STRING_EQUAL(cy_quote(v, q, sizeof q),
			       "\"0123456789012345678901234567890123456789...\"");
	cy_free(root);
}

/* ---- the startup check ---- */

static void test_find_program(void)
{
	char out[4096], tmpl[] = "/tmp/es-test-XXXXXX", prog[4200], cwd[4096];
	const char *old_path = getenv("PATH");
	char *saved = old_path ? strdup(old_path) : NULL;
	int fd;

	CU_ASSERT_EQUAL(spawn_find_program("echo", out, sizeof out), 0);
	CU_ASSERT_EQUAL(out[0], '/');
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "/echo"));
	CU_ASSERT_EQUAL(access(out, X_OK), 0);
	CU_ASSERT_EQUAL(spawn_find_program("/bin/echo", out, sizeof out), 0);
	CU_ASSERT_STRING_EQUAL(out, "/bin/echo");

	errno = 0;
	CU_ASSERT_EQUAL(spawn_find_program("es-no-such-program-xyz", out, sizeof out), -1);
	CU_ASSERT_EQUAL(errno, ENOENT);
	CU_ASSERT_EQUAL(spawn_find_program("./echo", out, sizeof out), -1);
	CU_ASSERT_EQUAL(errno, EINVAL);
	CU_ASSERT_EQUAL(spawn_find_program("/etc/passwd", out, sizeof out), -1);
	CU_ASSERT_EQUAL(spawn_find_program("/bin", out, sizeof out), -1);
	CU_ASSERT_EQUAL(spawn_find_program("", out, sizeof out), -1);
	CU_ASSERT_EQUAL(spawn_find_program("echo", out, 4), -1);
	CU_ASSERT_EQUAL(errno, ENAMETOOLONG);

	/* PATH: empty and relative entries are skipped, absolute ones searched. */
	setenv("PATH", "::relative/dir:/nonexistent:/bin", 1);
	CU_ASSERT_EQUAL(spawn_find_program("echo", out, sizeof out), 0);
	CU_ASSERT_STRING_EQUAL(out, "/bin/echo");

	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tmpl));
	snprintf(prog, sizeof prog, "%s/es-test-prog", tmpl);
	fd = open(prog, O_WRONLY | O_CREAT | O_EXCL, 0755);
	CU_ASSERT_FATAL(fd >= 0);
	close(fd);
	CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
	CU_ASSERT_EQUAL_FATAL(chdir(tmpl), 0);
	setenv("PATH", ".", 1);
	CU_ASSERT_EQUAL(spawn_find_program("es-test-prog", out, sizeof out), -1);
	setenv("PATH", tmpl, 1);
	CU_ASSERT_EQUAL(spawn_find_program("es-test-prog", out, sizeof out), 0);
	CU_ASSERT_STRING_EQUAL(out, prog);
	/* No execute bit at all: not a program, even for root. */
	CU_ASSERT_EQUAL(chmod(prog, 0644), 0);
	CU_ASSERT_EQUAL(spawn_find_program("es-test-prog", out, sizeof out), -1);
	CU_ASSERT_EQUAL(chdir(cwd), 0);
	unlink(prog);
	rmdir(tmpl);
	if (saved) {
		setenv("PATH", saved, 1);
		free(saved);
	} else {
		unsetenv("PATH");
	}
}

/* Loads a config whose service "s" holds the command under test. */
static int check_one(const char *command_yaml, int timeout_ms, char *why, size_t whylen)
{
	struct es_config cfg;
	char text[2048];
	int rc;

	snprintf(text, sizeof text,
		 WG "env: [ES_TEST_GLOBAL=g1, ES_TEST_X=global]\n"
		    "services:\n  s:\n    waitgroup: a\n    commands:\n      c: %s\n",
		 command_yaml);
	if (expect_ok(text, &cfg) != 0)
		return -2;
	why[0] = '\0';
	rc = startup_check_command(&cfg, &cfg.services[0].commands[0], timeout_ms, why, whylen);
	config_free(&cfg);
	return rc;
}

static void expect_check(const char *command_yaml, int rc_expected, const char *word)
{
	char why[512];
	int rc = check_one(command_yaml, STARTUP_CHECK_TIMEOUT_MS, why, sizeof why);

	CU_ASSERT_EQUAL(rc, rc_expected);
	if (word)
		CU_ASSERT_PTR_NOT_NULL(strstr(why, word));
	if (rc != rc_expected || (word && !strstr(why, word)))
		fprintf(stderr, "\n  check %s: rc %d, why \"%s\"\n", command_yaml, rc, why);
}

static void test_check_regex(void)
{
	expect_check("{prog: echo, startupCheck: {args: [hello, world], regex: '^hello world$'}}",
		     0, NULL);
	expect_check("{prog: cat, startupCheck: {args: [--version], regex: coreutils}}", 0, NULL);
	expect_check("{prog: echo, startupCheck: {args: [hello], regex: '^goodbye'}}", -1,
		     "did not match /^goodbye/ (it began: \"hello\")");
	/* Arguments are argv, never shell words. */
	expect_check("{prog: echo, startupCheck: {args: ['$HOME *'], regex: '^[$]HOME [*]$'}}", 0,
		     NULL);
	/* ^ and $ work per line. */
	expect_check("{prog: printf, startupCheck: {args: ['one\\ntwo\\nthree\\n'], "
		     "regex: '^two$'}}",
		     0, NULL);
}

static void test_check_exit_status(void)
{
	/* Without a regex the exit status decides; with one it does not. */
	expect_check("{prog: 'true', startupCheck: {}}", 0, NULL);
	expect_check("{prog: 'false', startupCheck: {}}", -1, "exited with status 1");
	expect_check("{prog: ls, env: [LC_ALL=C], startupCheck: {args: [/nonexistent-es-test], "
		     "regex: 'No such file'}}",
		     0, NULL);
	/* stdin is /dev/null: cat without arguments ends at once. */
	expect_check("{prog: cat, startupCheck: {args: []}}", 0, NULL);
	expect_check("{prog: cat, startupCheck: {regex: '.'}}", -1, "did not match");
}

static void test_check_program(void)
{
	/* Without a startupCheck the program is only looked up, not run. */
	expect_check("{prog: 'false'}", 0, NULL);
	expect_check("{prog: /bin/false}", 0, NULL);
	expect_check("{prog: es-no-such-program-xyz}", -1, "not found in PATH");
	expect_check("{prog: es-no-such-program-xyz, startupCheck: {regex: x}}", -1,
		     "not found in PATH");
	expect_check("{prog: /nonexistent/prog}", -1, "not an executable file");
}

static void test_check_env(void)
{
	expect_check("{prog: env, startupCheck: {regex: '^ES_TEST_GLOBAL=g1$'}}", 0, NULL);
	expect_check("{prog: env, env: [ES_TEST_X=cmd], startupCheck: {regex: '^ES_TEST_X=cmd$'}}",
		     0, NULL);
	expect_check("{prog: env, env: [ES_TEST_X=cmd], startupCheck: "
		     "{regex: '^ES_TEST_X=global$'}}",
		     -1, "did not match");
	/* The daemon's own environment is passed on. */
	setenv("ES_TEST_INHERITED", "yes", 1);
	expect_check("{prog: env, startupCheck: {regex: '^ES_TEST_INHERITED=yes$'}}", 0, NULL);
	unsetenv("ES_TEST_INHERITED");
}

static void test_check_timeout(void)
{
	char why[512];
	uint64_t t0 = clock_mono_ms();
	int rc = check_one("{prog: sleep, startupCheck: {args: ['5']}}", 300, why, sizeof why);

	CU_ASSERT_EQUAL(rc, -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "timed out after 300 ms"));
	CU_ASSERT(clock_mono_ms() - t0 < 3000);
}

static void test_check_large_output(void)
{
	/* seq prints about 1.3 MB: the first 64 KiB are matched, the rest read
	 * and dropped, so the child never blocks on the pipe. */
	uint64_t t0 = clock_mono_ms();

	expect_check("{prog: seq, startupCheck: {args: ['200000'], regex: '^1000$'}}", 0, NULL);
	expect_check("{prog: seq, startupCheck: {args: ['200000'], regex: '^199999$'}}", -1,
		     "did not match");
	CU_ASSERT(clock_mono_ms() - t0 < 5000);
}

static void test_run_disables_services(void)
{
	struct es_config cfg;

	if (expect_ok(WG "services:\n"
			 "  good:\n    waitgroup: a\n    commands:\n"
			 "      e: {prog: echo, startupCheck: {args: [ok], regex: ok}}\n"
			 "      t: {prog: 'true'}\n"
			 "  missing:\n    waitgroup: a\n    commands:\n"
			 "      e: {prog: echo}\n      x: {prog: es-no-such-program-xyz}\n"
			 "  mismatch:\n    waitgroup: a\n    commands:\n"
			 "      e: {prog: echo, startupCheck: {args: [abc], regex: xyz}}\n",
		      &cfg) != 0)
		return;
	log_set_level(LOG_LVL_ERROR); /* keep the expected warnings out of the output */
	CU_ASSERT_EQUAL(startup_check_run(&cfg, 0), 0);
	CU_ASSERT_EQUAL(cfg.services[0].enabled, 1);
	CU_ASSERT_EQUAL(cfg.services[1].enabled, 0);
	CU_ASSERT_EQUAL(cfg.services[2].enabled, 0);

	cfg.services[1].enabled = cfg.services[2].enabled = 1;
	fprintf(stderr, "\n  (one error line from the strict startup check is expected)\n");
	CU_ASSERT_EQUAL(startup_check_run(&cfg, 1), -1);
	log_set_level(LOG_LVL_INFO);
	config_free(&cfg);
}

static void test_job_limits(void)
{
	struct es_config cfg;
	struct config_error err;
	const char *text = WG "jobLimits: {cpuSec: 60, memoryMB: 2048, fileSizeMB: 100, "
			      "openFiles: 256, coreMB: 0}\n";

	CU_ASSERT_EQUAL_FATAL(config_load_buffer("t.yml", text, strlen(text), &cfg, &err), 0);
	CU_ASSERT_EQUAL(cfg.job_limits.cpu_sec, 60);
	CU_ASSERT_EQUAL(cfg.job_limits.memory_mb, 2048);
	CU_ASSERT_EQUAL(cfg.job_limits.file_size_mb, 100);
	CU_ASSERT_EQUAL(cfg.job_limits.open_files, 256);
	CU_ASSERT_EQUAL(cfg.job_limits.core_mb, 0);
	CU_ASSERT_EQUAL(cfg.job_limits.core_given, 1);
	config_free(&cfg);
	/* absent: nothing set */
	CU_ASSERT_EQUAL_FATAL(config_load_buffer("t.yml", WG, strlen(WG), &cfg, &err), 0);
	CU_ASSERT_EQUAL(cfg.job_limits.cpu_sec, 0);
	CU_ASSERT_EQUAL(cfg.job_limits.core_given, 0);
	config_free(&cfg);
}

static void test_run_all_good(void)
{
	struct es_config cfg;

	if (expect_ok(WG SVC, &cfg) != 0)
		return;
	CU_ASSERT_EQUAL(startup_check_run(&cfg, 1), 0);
	CU_ASSERT_EQUAL(cfg.services[0].enabled, 1);
	config_free(&cfg);
}

/* ---- runner ---- */

/* Where the keys start and where user and group were given, for the
 * messages said after loading (a user that does not exist, no services):
 * file:line:column like every other. */
static void test_places_for_later(void)
{
	struct es_config cfg;
	struct config_error err;
	const char *text = WG "user: someone\ngroup:   staff\n";

	CU_ASSERT_FATAL(load(text, &cfg, &err) == 0);
	CU_ASSERT_EQUAL(cfg.block_line, 1);
	CU_ASSERT_EQUAL(cfg.block_column, 1);
	CU_ASSERT_EQUAL(cfg.user_line, 4);
	CU_ASSERT_EQUAL(cfg.user_column, 7);
	CU_ASSERT_EQUAL(cfg.group_line, 5);
	CU_ASSERT_EQUAL(cfg.group_column, 10);
	CU_ASSERT_EQUAL(cfg.nservices, 0); /* valid: a warning at start, not an error */
	config_free(&cfg);
}

/* instanceId: 1 to 64 of [A-Za-z0-9_.-]; absent means random at start
 * (NULL here); errors name the position. */
static void test_instance_id(void)
{
	static const char base[] = "waitgroups: {wg: {processes: 1}}\n";
	struct es_config cfg;
	struct config_error err;
	char text[512], id[80];

	snprintf(text, sizeof text, "%sinstanceId: exec-1.rack_2\n", base);
	CU_ASSERT_FATAL(load(text, &cfg, &err) == 0);
	CU_ASSERT_STRING_EQUAL(cfg.instance_id, "exec-1.rack_2");
	config_free(&cfg);
	CU_ASSERT_FATAL(load(base, &cfg, &err) == 0);
	CU_ASSERT_PTR_NULL(cfg.instance_id);
	config_free(&cfg);
	memset(id, 'a', 64);
	id[64] = '\0';
	snprintf(text, sizeof text, "%sinstanceId: %s\n", base, id);
	CU_ASSERT_FATAL(load(text, &cfg, &err) == 0);
	config_free(&cfg);

	snprintf(text, sizeof text, "%sinstanceId: %sa\n", base, id);
	expect_error(text, 2, 13, "longer than 64");
	snprintf(text, sizeof text, "%sinstanceId: \"exec 1\"\n", base);
	expect_error(text, 2, 13, "only letters, digits");
	snprintf(text, sizeof text, "%sinstanceId: exec/1\n", base);
	expect_error(text, 2, 13, "only letters, digits");
	snprintf(text, sizeof text, "%sinstanceId: \"\"\n", base);
	expect_error(text, 2, 13, "must not be empty");
	snprintf(text, sizeof text, "%sinstanceId: [a]\n", base);
	expect_error(text, 2, 13, "instanceId");
}

/* consoleEnabled: on by default behind a token or on loopback only, off
 * on a network address without a token; the key decides when given. */
static void test_console_enabled(void)
{
	static const struct {
		const char *text;
		int want;
	} cases[] = {
		{ WG "addr: 127.0.0.1:8083\n", 1 },
		{ WG "addr: \"[::1]:8083\"\n", 1 },
		{ WG "addr: localhost:8083\n", 1 },
		{ WG "addr: 0.0.0.0:8083\n", 0 },
		{ WG "addr: 10.1.2.3:8083\n", 0 },
		{ WG "addr: 0.0.0.0:8083\nauthToken: abc\n", 1 },
		{ WG "addr: 0.0.0.0:8083\nconsoleEnabled: true\n", 1 },
		{ WG "addr: 127.0.0.1:8083\nconsoleEnabled: false\n", 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct es_config cfg;
		struct config_error err;
		CU_ASSERT_EQUAL_FATAL(load(cases[i].text, &cfg, &err), 0);
		if (cfg.console_enabled != cases[i].want)
			printf("\n  case %zu: consoleEnabled %d\n", i, cfg.console_enabled);
		CU_ASSERT_EQUAL(cfg.console_enabled, cases[i].want);
		config_free(&cfg);
	}
}

/* A reload takes consoleEnabled's default from the addr still listened
 * on (addr needs a restart) and the new authToken. */
static void test_console_enabled_reload(void)
{
	static const struct {
		const char *cur, *fresh;
		int want;
	} cases[] = {
		/* addr changed in the file to loopback, still on 0.0.0.0: off */
		{ WG "addr: 0.0.0.0:8083\n", WG "addr: 127.0.0.1:8083\n", 0 },
		{ WG "addr: 0.0.0.0:8083\n", WG "addr: 0.0.0.0:8083\nauthToken: abc\n", 1 },
		{ WG "addr: 0.0.0.0:8083\nauthToken: abc\n", WG "addr: 0.0.0.0:8083\n", 0 },
		{ WG "addr: 127.0.0.1:8083\n", WG "addr: 0.0.0.0:8083\n", 1 },
		{ WG "addr: 0.0.0.0:8083\n", WG "addr: 0.0.0.0:8083\nconsoleEnabled: true\n", 1 },
		{ WG "addr: 127.0.0.1:8083\n", WG "addr: 127.0.0.1:8083\nconsoleEnabled: false\n",
		  0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct es_config cur, fresh;
		struct config_error err;
		CU_ASSERT_EQUAL_FATAL(load(cases[i].cur, &cur, &err), 0);
		CU_ASSERT_EQUAL_FATAL(load(cases[i].fresh, &fresh, &err), 0);
		config_take_reloadable(&cur, &fresh, 0);
		if (cur.console_enabled != cases[i].want)
			printf("\n  case %zu: consoleEnabled %d\n", i, cur.console_enabled);
		CU_ASSERT_EQUAL(cur.console_enabled, cases[i].want);
		config_free(&fresh);
		config_free(&cur);
	}
}

int main(void)
{
	static const struct {
		const char *name;
		CU_TestFunc fn;
	} tests[] = {
		{ "defaults", test_defaults },
		{ "minimal file keeps defaults", test_minimal_keeps_defaults },
		{ "values accepted", test_values_accepted },
		{ "auto-balance: no waitgroups block", test_auto_balance },
		{ "inheritance from common commands", test_inheritance },
		{ "lookups", test_lookups },
		{ "effective handlers", test_effective_handlers },
		{ "addr split", test_addr_split },
		{ "name of maximal length", test_name_max_length_ok },
		{ "too many waitgroups", test_too_many_waitgroups },
		{ "too many services", test_too_many_services },
		{ "nesting too deep", test_nesting_too_deep },
		{ "file missing", test_file_missing },
		{ "file empty", test_file_empty },
		{ "file with a syntax error", test_file_syntax_error },
		{ "file with an unknown key", test_file_unknown_key },
		{ "file with every key", test_file_full },
		{ "file: fylr.yml wrapper", test_file_fylr_wrapper },
		{ "out of memory at each allocation", test_out_of_memory },
		{ "shipped etc/execserver.yml", test_shipped_config },
		{ "places kept for later messages: user, group, the keys", test_places_for_later },
		{ "duration parse", test_duration_parse },
		{ "duration format", test_duration_format },
		{ "yaml bool", test_yaml_bool },
		{ "yaml int limits", test_yaml_int_limits },
		{ "yaml tree", test_yaml_tree },
		{ "startup: find program", test_find_program },
		{ "startup: regex", test_check_regex },
		{ "startup: exit status", test_check_exit_status },
		{ "startup: program lookup only", test_check_program },
		{ "startup: environment", test_check_env },
		{ "startup: timeout", test_check_timeout },
		{ "startup: large output", test_check_large_output },
		{ "startup: run disables services", test_run_disables_services },
		{ "startup: run all good", test_run_all_good },
		{ "jobLimits", test_job_limits },
		{ "instanceId", test_instance_id },
		{ "consoleEnabled default", test_console_enabled },
		{ "consoleEnabled default at a reload", test_console_enabled_reload },
	};
	CU_pSuite errors, others;
	unsigned failures;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	errors = CU_add_suite("config errors", NULL, NULL);
	others = CU_add_suite("config", NULL, NULL);
	if (!errors || !others)
		goto fail;
	for (size_t i = 0; i < sizeof error_cases / sizeof error_cases[0]; i++) {
		char name[128];
		snprintf(name, sizeof name, "error %s", error_cases[i].name);
		if (!CU_add_test(errors, name, test_error_case)) /* CUnit copies the name */
			goto fail;
	}
	for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
		if (!CU_add_test(others, tests[i].name, tests[i].fn))
			goto fail;
	CU_basic_set_mode(CU_BRM_NORMAL);
	CU_basic_run_tests();
	failures = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return failures ? 1 : 0;
fail:
	fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
	CU_cleanup_registry();
	return 2;
}
