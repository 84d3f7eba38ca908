/*
 * job_spec.h - the job payload of JOB (docs/job-payload.md): parsing and
 * validation of the `job` object into a ready-to-run struct job_spec.
 *
 * Owns: the rules for every field of the payload (command, args, env,
 * stdin, stdout, inputs, outputs, timeout_sec), the placeholder expansion
 * of arguments, the environment merge and its refused names, the URL rules
 * (http/https only, parsed by libcurl's URL API) and the file name rules.
 *
 * Invariants:
 *  - pure: no I/O, no global state, no logging; the same input always
 *    gives the same result or the same error;
 *  - job_spec_parse either fills the whole spec and returns 0, or returns
 *    -1 with the spec zeroed (nothing to free) and exactly one error;
 *  - a filled spec is fully owned by itself (it does not point into the
 *    JSON object) except `command`, which points into the configuration;
 *  - argv and envp are NULL-terminated; every URL in a spec is http or
 *    https, carries no user info, and is stored as libcurl normalized it,
 *    so its host is exactly the host recorded next to it.
 */
#ifndef ES_JOB_SPEC_H
#define ES_JOB_SPEC_H

#include <stddef.h>

struct json_object;
struct es_config;
struct config_service;
struct config_command;

#define JOB_SPEC_DEFAULT_PATH "PATH=/usr/local/bin:/usr/bin:/bin"

#define JOB_SPEC_MAX_ARGV 256          /* argv entries, argv[0] included */
#define JOB_SPEC_MAX_ARGV_BYTES 131072 /* sum of strlen + 1 over argv */
#define JOB_SPEC_MAX_ENV 64            /* entries of job.env */
#define JOB_SPEC_MAX_ENV_BYTES 4096    /* bytes of one job.env entry "K=V" */
#define JOB_SPEC_MAX_URL 4096          /* bytes of a URL as sent */
#define JOB_SPEC_MAX_FILES 64          /* entries of job.inputs, of job.outputs */
#define JOB_SPEC_MAX_NAME 255          /* bytes of a file name */
#define JOB_SPEC_MAX_TIMEOUT 86400     /* seconds */
#define JOB_SPEC_HOST_MAX 256          /* size of a host buffer, NUL included */

struct job_file {
	char *name;                   /* plain file name in the job directory */
	char *url;                    /* normalized http(s) URL */
	char host[JOB_SPEC_HOST_MAX]; /* its host (see job_spec_url_host) */
	unsigned port;                /* its port, the scheme's default if none */
};

struct job_spec {
	const struct config_command *command;
	char **argv; /* NULL-terminated; argv[0] = configured prog */
	size_t argc;
	char **envp; /* NULL-terminated, merged */
	size_t envc;
	char *stdin_url, *stdout_url; /* NULL when absent or null */
	char stdin_host[JOB_SPEC_HOST_MAX], stdout_host[JOB_SPEC_HOST_MAX];
	unsigned stdin_port, stdout_port;
	struct job_file *inputs, *outputs;
	size_t ninputs, noutputs;
	unsigned timeout_sec; /* 0 = none */
	int uses_jobdir;      /* an argument had %jobdir%: argv depends on jobdir */
};

/*
 * Parses and validates `job` for service `svc` of `cfg`.  jobdir is the
 * absolute path of the job's directory (for %jobdir%).  Returns 0 with *out
 * filled (free it with job_spec_free), or -1 with *out zeroed, *code one of
 * PROTO_E_BAD_JOB, PROTO_E_UNKNOWN_COMMAND or PROTO_E_INTERNAL (allocation
 * failure, or a jobdir that is not absolute) and msg naming the field, e.g.
 * "job.inputs[2].name: must be a plain file name".  msg may be NULL when
 * msglen is 0.  Thread-safe; needs no curl_global_init (works with it).
 */
int job_spec_parse(const struct es_config *cfg, const struct config_service *svc,
		   struct json_object *job, const char *jobdir, struct job_spec *out,
		   const char **code, char *msg, size_t msglen);

/* Frees everything a successful job_spec_parse filled in and zeroes the
 * spec; harmless on a zeroed spec and after a failed parse. */
void job_spec_free(struct job_spec *spec);

/*
 * The host of `url` under exactly the rules of job_spec_parse (http or
 * https, no user info, at most JOB_SPEC_MAX_URL bytes, a valid port, an
 * ASCII host): lowercased, IPv4 in dotted decimal as libcurl normalizes it
 * (so "http://0x7f.1/" gives "127.0.0.1"), IPv6 without brackets, one
 * trailing dot removed.  For the callback guard, e.g. on a redirect target.
 * Returns 0, or -1 with errno EINVAL (URL refused), ERANGE (hostlen too
 * small) or ENOMEM.
 */
int job_spec_url_host(const char *url, char *host, size_t hostlen);

#endif
