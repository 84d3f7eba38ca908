/*
 * fuzz_job_spec.c - fuzz target of the job payload validation
 * (job_spec_parse, src/job/job_spec.c).  The input is the JSON text of the
 * `job` object of a JOB message, parsed as the broker parses messages (the
 * same nesting cap); it is validated for a service with a few commands
 * (configured args with placeholders, global and command env).
 *
 * Properties checked, beyond "no crash, no leak, no undefined behaviour":
 *  - a refusal is bad_job or unknown_command (never internal: nothing fails
 *    to allocate here), with a message that starts with the field ("job",
 *    or "command " for the configured args);
 *    a refused spec is zeroed;
 *  - an accepted spec outlives the JSON (the object is released before the
 *    spec is read, so ASan sees any pointer into it), argv and envp are
 *    NULL-terminated with argv[0] the configured prog, every envp entry is
 *    NAME=value with a unique name, every URL is http(s) and its recorded
 *    host is what job_spec_url_host finds in it, and file names are plain.
 */
#include "autoconfig.h"

#include <string.h>

#include <json-c/json.h>

#include "config/config.h"
#include "execserver/protocol.h"
#include "fuzz.h"
#include "job/job_spec.h"

#define JOBDIR "/var/lib/execserver/job/0a1b-0-7"
#define JSON_MAX_DEPTH 16 /* as in src/handler/messages.c */

static const char config_text[] =
	"env: [PATH=/opt/bin, LC_ALL=C.UTF-8, SHARED=global]\n"
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
	"      ffmpeg: {prog: ffmpeg, args: ['-i', '%jobdir%%jobdir%', 'frame-%03d.png']}\n";

static struct es_config cfg;
static const struct config_service *svc;

static void setup(void)
{
	struct config_error err;

	if (svc)
		return;
	if (config_load_buffer("fuzz_job_spec.yml", config_text, strlen(config_text), &cfg, &err) !=
	    0) {
		fprintf(stderr, "fuzz_job_spec: fixture: %s\n", err.text);
		abort();
	}
	svc = config_find_service(&cfg, "s");
	FUZZ_CHECK(svc != NULL);
}

static void check_url(const char *url, const char *host, unsigned port)
{
	char again[JOB_SPEC_HOST_MAX];

	if (url == NULL)
		return;
	FUZZ_CHECK(strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0);
	FUZZ_CHECK(port > 0 && port < 65536);
	/* the stored (normalized) URL gives the same host again */
	FUZZ_CHECK(job_spec_url_host(url, again, sizeof again) == 0);
	FUZZ_CHECK(strcmp(again, host) == 0);
}

static void check_files(const struct job_file *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		FUZZ_CHECK(f[i].name[0] != '\0' && strchr(f[i].name, '/') == NULL);
		FUZZ_CHECK(strcmp(f[i].name, ".") != 0 && strcmp(f[i].name, "..") != 0);
		FUZZ_CHECK(strlen(f[i].name) <= JOB_SPEC_MAX_NAME);
		check_url(f[i].url, f[i].host, f[i].port);
	}
}

static void check_spec(const struct job_spec *s)
{
	FUZZ_CHECK(s->command != NULL && s->argv != NULL && s->envp != NULL);
	FUZZ_CHECK(s->argc >= 1 && s->argc <= JOB_SPEC_MAX_ARGV && s->argv[s->argc] == NULL);
	FUZZ_CHECK(strcmp(s->argv[0], s->command->prog) == 0);
	for (size_t i = 0; i < s->argc; i++)
		FUZZ_CHECK(s->argv[i] != NULL);
	FUZZ_CHECK(s->envp[s->envc] == NULL);
	for (size_t i = 0; i < s->envc; i++) {
		const char *eq = strchr(s->envp[i], '=');

		FUZZ_CHECK(eq != NULL && eq != s->envp[i]);
		for (size_t j = 0; j < i; j++)
			FUZZ_CHECK(strncmp(s->envp[j], s->envp[i], (size_t)(eq - s->envp[i]) + 1) !=
				   0);
	}
	check_url(s->stdin_url, s->stdin_host, s->stdin_port);
	check_url(s->stdout_url, s->stdout_host, s->stdout_port);
	check_files(s->inputs, s->ninputs);
	check_files(s->outputs, s->noutputs);
	FUZZ_CHECK(s->timeout_sec <= JOB_SPEC_MAX_TIMEOUT);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct job_spec zero;
	struct json_tokener *tok;
	struct json_object *job;
	struct job_spec spec;
	const char *code = NULL;
	char msg[256] = "";
	int rc;

	setup();
	if (size > 1024 * 1024)
		return 0;
	tok = json_tokener_new_ex(JSON_MAX_DEPTH);
	FUZZ_CHECK(tok != NULL);
	job = json_tokener_parse_ex(tok, (const char *)data, (int)size);
	json_tokener_free(tok);
	if (!json_object_is_type(job, json_type_object)) {
		json_object_put(job);
		return 0;
	}
	rc = job_spec_parse(&cfg, svc, job, JOBDIR, &spec, &code, msg, sizeof msg);
	json_object_put(job);
	if (rc != 0) {
		FUZZ_CHECK(code && (strcmp(code, PROTO_E_BAD_JOB) == 0 ||
				    strcmp(code, PROTO_E_UNKNOWN_COMMAND) == 0));
		FUZZ_CHECK(strncmp(msg, "job", 3) == 0 || strncmp(msg, "command ", 8) == 0);
		FUZZ_CHECK(memcmp(&spec, &zero, sizeof zero) == 0);
		return 0;
	}
	check_spec(&spec);
	job_spec_free(&spec);
	FUZZ_CHECK(memcmp(&spec, &zero, sizeof zero) == 0);
	return 0;
}
