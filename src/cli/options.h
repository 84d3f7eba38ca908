/*
 * options.h - the command line of execctl: `execctl run` and `execctl
 * status` parsed with getopt_long into plain structures, and the
 * environment variables that stand in for options (EXECCTL_ADDR,
 * EXECCTL_TOKEN, EXECCTL_CACERT).  No I/O beyond reading a --token-file; no library calls:
 * what is parsed here is checked by the unit tests.
 *
 * Invariants: a parsed structure owns every string it points to (copies),
 * freed by its *_free function; argv is not modified (getopt_long's
 * permutation is disabled with a leading '+', so the job's own options
 * after COMMAND are never taken for execctl's).
 */
#ifndef ES_CLI_OPTIONS_H
#define ES_CLI_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

/* A NAME=FILE pair of --input/--output. */
struct cli_file_arg {
	char *name;
	char *path;
};

struct cli_common {
	char **addresses; /* ws:// URLs (a bare host:port gets ws://) */
	size_t naddresses;
	char *token;  /* --token-file's first line, or EXECCTL_TOKEN */
	char *cacert; /* --cacert FILE or EXECCTL_CACERT: the CA
				 * certificates (PEM) that wss/https servers are
				 * verified against; NULL: the system's store */
	int verbose;  /* -v: library log and connection events on stderr */
};

struct cli_run {
	struct cli_common c;
	char *service;
	int priority;
	unsigned timeout_sec;      /* --slot-timeout: slot wait; 0 forever */
	unsigned job_timeout_sec;  /* --job-timeout: the job's timeout_sec */
	char *client_id;           /* --client */
	unsigned ping_timeout_sec; /* --ping-timeout; 0: the library's default */
	struct cli_file_arg *inputs;
	size_t ninputs;
	struct cli_file_arg *outputs;
	size_t noutputs;
	char **env; /* --env NAME=VALUE */
	size_t nenv;
	int no_stdin;   /* -n: the job's stdin is empty */
	int quiet;      /* -q: no position line */
	char **command; /* COMMAND [ARGS...], NULL-terminated */
	size_t ncommand;
};

struct cli_status {
	struct cli_common c;
	int json;
};

/* What a parse function returns. */
enum cli_parse_result {
	CLI_PARSED = 0, /* go on */
	CLI_HELP = 1,   /* --help was printed to stdout: exit 0 */
	CLI_BAD = -1,   /* err holds the message: exit EXECCTL_USAGE */
};

/* argv[0] is the subcommand ("run").  env: getenv, or a stand-in for
 * tests.  err gets one line without a newline. */
int cli_parse_run(int argc, char **argv, struct cli_run *o, const char *(*env)(const char *name),
		  char *err, size_t errlen);
int cli_parse_status(int argc, char **argv, struct cli_status *o,
		     const char *(*env)(const char *name), char *err, size_t errlen);
void cli_run_free(struct cli_run *o);
void cli_status_free(struct cli_status *o);

/* A priority: an integer (32-bit) or one of the names background (-2),
 * normal (0), interactive (2), synchronous (4).  0, or -1. */
int cli_parse_priority(const char *s, int *out);
/* An unsigned decimal in [min, max] (no sign, no space, no suffix, no
 * overflow); 0 or -1. */
int cli_parse_uint(const char *s, unsigned min, unsigned max, unsigned *out);

/* The job description of a run (command, args, env, timeout_sec) as JSON
 * text, malloc'd; NULL when out of memory. */
char *cli_run_job_json(const struct cli_run *o);

/* The usage texts (execctl --help, execctl run --help, ...). */
void cli_usage(FILE *out);
void cli_run_usage(FILE *out);
void cli_status_usage(FILE *out);

#endif
