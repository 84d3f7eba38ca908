/* options.c - see options.h. */
#include "autoconfig.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "cli/options.h"
#include "execserver/client.h"

/* ---- usage ---------------------------------------------------------------- */

void cli_usage(FILE *out)
{
	fputs("usage: execctl run -a URL [-a URL ...] -s SERVICE [options] -- COMMAND [ARGS...]\n"
	      "       execctl status -a URL [-a URL ...] [--json]\n"
	      "       execctl submit|show|wait|cancel|position|retry|pause|resume|jobs|stats "
	      "--db CONNINFO ... (execdispatch's "
	      "queue)\n"
	      "       execctl schedule list|add|remove --db CONNINFO ... (periodic jobs)\n"
	      "       execctl --help | --version\n"
	      "\n"
	      "Runs one job on an execserver (its stdin and stdout streamed through it), or\n"
	      "shows an instance's slots and queues.  `execctl COMMAND --help` for the\n"
	      "options of a command; execctl(1) for everything.\n",
	      out);
}

void cli_run_usage(FILE *out)
{
	fputs("usage: execctl run -a URL [-a URL ...] -s SERVICE [options] -- COMMAND [ARGS...]\n"
	      "\n"
	      "Runs COMMAND (a command configured for SERVICE) on the first execserver that\n"
	      "has a free slot, with this process's stdin as its stdin and its stdout\n"
	      "written to this process's stdout; exits with the job's exit code.\n"
	      "\n"
	      "  -a, --address URL       ws[s]://host:port[/job/SERVICE] (repeatable; default:\n"
	      "                          $EXECCTL_ADDR, several separated by spaces or commas)\n"
	      "  -s, --service NAME      the service to run COMMAND under (required)\n"
	      "  -P, --priority P        an integer, or background (-2), normal (0, default),\n"
	      "                          interactive (2), synchronous (4)\n"
	      "      --slot-timeout S    give up when no slot is free within S seconds\n"
	      "                          (exit 114); default: wait as long as it takes\n"
	      "      --job-timeout S     the server stops the job after S seconds (1-86400)\n"
	      "      --input NAME=FILE   FILE becomes the file NAME in the job's directory\n"
	      "      --output NAME=FILE  the job's file NAME is written to FILE afterwards\n"
	      "      --env NAME=VALUE    an environment variable for the job (repeatable)\n"
	      "  -n, --no-stdin          the job's stdin is empty (do not read this stdin)\n"
	      "  -q, --quiet             no queue position on the terminal while waiting\n"
	      "      --client ID         client id (default: a random one)\n"
	      "      --ping-timeout S    a connection silent for S seconds is taken for\n"
	      "                          dead and replaced (1-3600; default 30)\n"
	      "      --token-file FILE   bearer token in FILE's first line (default:\n"
	      "                          $EXECCTL_TOKEN)\n"
	      "      --cacert FILE       verify wss:// servers against the CA certificates\n"
	      "                          in FILE (PEM; default: $EXECCTL_CACERT, else the\n"
	      "                          system's trust store); exit 119 if one fails\n"
	      "  -v, --verbose           connection events and the library's log on stderr\n"
	      "  -h, --help              this text\n",
	      out);
}

void cli_status_usage(FILE *out)
{
	fputs("usage: execctl status -a URL [-a URL ...] [--json]\n"
	      "\n"
	      "Prints the waitgroups (slots, running, waiting), the services and the\n"
	      "connected clients of the instance each URL reaches (GET /status).\n"
	      "\n"
	      "  -a, --address URL       ws[s]://host:port or http[s]://host:port\n"
	      "                          (repeatable; default: $EXECCTL_ADDR)\n"
	      "      --json              the status object instead of tables, one line per\n"
	      "                          address\n"
	      "      --token-file FILE   bearer token in FILE's first line (default:\n"
	      "                          $EXECCTL_TOKEN)\n"
	      "      --cacert FILE       verify https servers against the CA certificates\n"
	      "                          in FILE (PEM; default: $EXECCTL_CACERT, else the\n"
	      "                          system's trust store); exit 119 if one fails\n"
	      "  -v, --verbose           say which address is asked\n"
	      "  -h, --help              this text\n",
	      out);
}

/* ---- small parsers ---------------------------------------------------------- */

static void say(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void say(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int cli_parse_uint(const char *s, unsigned min, unsigned max, unsigned *out)
{
	char *end;
	if (!*s || *s == '-' || *s == '+' || *s == ' ')
		return -1;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = (unsigned)v;
	return 0;
}

int cli_parse_priority(const char *s, int *out)
{
	static const struct {
		const char *name;
		int value;
	} names[] = {
		{ "background", -2 },
		{ "normal", 0 },
		{ "interactive", 2 },
		{ "synchronous", 4 },
	};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strcmp(s, names[i].name) == 0) {
			*out = names[i].value;
			return 0;
		}
	char *end;
	if (!*s || *s == ' ')
		return -1;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v < INT32_MIN || v > INT32_MAX)
		return -1;
	*out = (int)v;
	return 0;
}

static int push(char ***list, size_t *n, const char *s)
{
	char **grown = realloc(*list, (*n + 2) * sizeof **list);
	if (!grown)
		return -1;
	*list = grown;
	if (!(grown[*n] = strdup(s)))
		return -1;
	grown[++*n] = NULL;
	return 0;
}

static void free_list(char **list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(list[i]);
	free(list);
}

/* A URL as given, with ws:// put in front of a bare host:port. */
static int push_address(struct cli_common *c, const char *a)
{
	if (strstr(a, "://"))
		return push(&c->addresses, &c->naddresses, a);
	char *url = malloc(strlen(a) + 6);
	if (!url)
		return -1;
	sprintf(url, "ws://%s", a);
	int rc = push(&c->addresses, &c->naddresses, url);
	free(url);
	return rc;
}

/* EXECCTL_ADDR: addresses separated by spaces, tabs, newlines or commas. */
static int addresses_from_env(struct cli_common *c, const char *value)
{
	char *copy = strdup(value), *save = NULL;
	if (!copy)
		return -1;
	for (char *t = strtok_r(copy, " \t\n,", &save); t; t = strtok_r(NULL, " \t\n,", &save))
		if (push_address(c, t) != 0) {
			free(copy);
			return -1;
		}
	free(copy);
	return 0;
}

static int read_token_file(struct cli_common *c, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	const char *why;

	if (!f) {
		say(err, errlen, "--token-file %s: %s", path, strerror(errno));
		return -1;
	}
	/* the whole first line, however long: never a truncated token */
	ssize_t got = getline(&line, &cap, f);
	int e = errno, eof = feof(f);
	fclose(f);
	if (got < 0 && !eof) {
		free(line);
		say(err, errlen, "--token-file %s: %s", path, strerror(e));
		return -1;
	}
	if (line)
		line[got > 0 ? strcspn(line, "\r\n") : 0] = '\0';
	if (!line || !line[0]) {
		free(line);
		say(err, errlen, "--token-file %s: the first line is empty", path);
		return -1;
	}
	if ((why = exc_auth_token_problem(line)) != NULL) {
		say(err, errlen, "--token-file %s: %s (at most %d visible ASCII characters)", path,
		    why, EXC_AUTH_TOKEN_MAX);
		free(line);
		return -1;
	}
	free(c->token);
	c->token = line;
	return 0;
}

/* NAME=FILE for --input/--output. */
static int push_file_arg(struct cli_file_arg **list, size_t *n, const char *opt, const char *arg,
			 char *err, size_t errlen)
{
	const char *eq = strchr(arg, '=');
	if (!eq || eq == arg || !eq[1]) {
		say(err, errlen, "%s %s: expected NAME=FILE", opt, arg);
		return -1;
	}
	if (memchr(arg, '/', (size_t)(eq - arg))) {
		say(err, errlen, "%s %s: NAME is a file name in the job's directory (no '/')", opt,
		    arg);
		return -1;
	}
	struct cli_file_arg *grown = realloc(*list, (*n + 1) * sizeof **list);
	if (!grown)
		return -1;
	*list = grown;
	grown[*n].name = strndup(arg, (size_t)(eq - arg));
	grown[*n].path = strdup(eq + 1);
	(*n)++;
	return grown[*n - 1].name && grown[*n - 1].path ? 0 : -1;
}

/* ---- the common part ------------------------------------------------------------ */

enum {
	OPT_TIMEOUT = 256,
	OPT_JOB_TIMEOUT,
	OPT_INPUT,
	OPT_OUTPUT,
	OPT_ENV,
	OPT_CLIENT,
	OPT_TOKEN_FILE,
	OPT_JSON,
	OPT_CACERT,
	OPT_PING_TIMEOUT,
};

/* The options both commands take; 0 handled, 1 not one of them, -1 error. */
static int common_option(struct cli_common *c, int opt, const char *arg, char *err, size_t errlen)
{
	switch (opt) {
	case 'a':
		if (!*arg) {
			say(err, errlen, "-a: empty address");
			return -1;
		}
		return push_address(c, arg) == 0 ? 0 : -1;
	case OPT_TOKEN_FILE: return read_token_file(c, arg, err, errlen);
	case OPT_CACERT:
		if (!*arg) {
			say(err, errlen, "--cacert: empty file name");
			return -1;
		}
		free(c->cacert);
		return (c->cacert = strdup(arg)) ? 0 : -1;
	case 'v': c->verbose++; return 0;
	default: return 1;
	}
}

/* Defaults from the environment, after the options of command cmd. */
static int common_finish(struct cli_common *c, const char *cmd, const char *(*env)(const char *),
			 char *err, size_t errlen)
{
	const char *v, *why;
	if (c->naddresses == 0 && (v = env("EXECCTL_ADDR")) && addresses_from_env(c, v) != 0)
		return -1;
	if (c->naddresses == 0) {
		say(err, errlen, "%s: no address: give -a URL (or set EXECCTL_ADDR)", cmd);
		return -1;
	}
	if (!c->token && (v = env("EXECCTL_TOKEN")) && *v) {
		if ((why = exc_auth_token_problem(v)) != NULL) {
			say(err, errlen,
			    "%s: EXECCTL_TOKEN: %s (at most %d visible ASCII characters)", cmd, why,
			    EXC_AUTH_TOKEN_MAX);
			return -1;
		}
		if (!(c->token = strdup(v)))
			return -1;
	}
	if (!c->cacert && (v = env("EXECCTL_CACERT")) && *v && !(c->cacert = strdup(v)))
		return -1;
	return 0;
}

static void common_free(struct cli_common *c)
{
	free_list(c->addresses, c->naddresses);
	free(c->token);
	free(c->cacert);
	memset(c, 0, sizeof *c);
}

/* What a command's own option handler answers. */
enum {
	OWN_DONE = 0,
	OWN_HELP = 1,
	OWN_BAD = -1,
	OWN_UNKNOWN = 2
};

/* Puts "cmd: " before a message that does not begin with it. */
static void name_command(char *err, size_t errlen, const char *cmd)
{
	size_t n = strlen(cmd);
	char *copy;

	if (strncmp(err, cmd, n) == 0 && err[n] == ':')
		return;
	copy = strdup(err);
	if (copy)
		say(err, errlen, "%s: %s", cmd, copy);
	free(copy);
}

/*
 * The scan both commands share: getopt_long over argv (argv[0] is the
 * command's name) with a fresh state, the common options handled here,
 * the rest passed to own(o, opt, optarg).  Leaves optind at the first
 * operand.  Returns CLI_PARSED, CLI_HELP (usage printed) or CLI_BAD.
 */
static int scan(int argc, char **argv, const char *shortopts, const struct option *longopts,
		struct cli_common *c,
		int (*own)(void *o, int opt, const char *arg, char *err, size_t errlen), void *o,
		void (*usage)(FILE *), char *err, size_t errlen)
{
	const char *cmd = argv[0];
	int opt;

	optind = 0; /* a fresh scan (GNU) */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		int rc = common_option(c, opt, optarg, err, errlen);
		if (rc == 1)
			rc = opt == 'h' ? OWN_HELP : own(o, opt, optarg, err, errlen);
		if (rc == OWN_DONE)
			continue;
		if (rc == OWN_HELP) {
			usage(stdout);
			return CLI_HELP;
		}
		if (rc == OWN_UNKNOWN && opt == ':')
			say(err, errlen, "%s: option %s needs a value", cmd, argv[optind - 1]);
		else if (rc == OWN_UNKNOWN && optopt)
			say(err, errlen, "%s: unknown option -%c", cmd, optopt);
		else if (rc == OWN_UNKNOWN)
			say(err, errlen, "%s: unknown option %s", cmd, argv[optind - 1]);
		else if (!err[0])
			say(err, errlen, "%s: out of memory", cmd);
		else
			name_command(err, errlen, cmd);
		return CLI_BAD;
	}
	return CLI_PARSED;
}

/* ---- run ------------------------------------------------------------------------ */

static int run_option(void *arg, int opt, const char *optarg_, char *err, size_t errlen)
{
	struct cli_run *o = arg;
	const char *why;
	switch (opt) {
	case 's':
		if (!*optarg_) {
			say(err, errlen, "run: -s: empty service name");
			return OWN_BAD;
		}
		free(o->service);
		return (o->service = strdup(optarg_)) ? OWN_DONE : OWN_BAD;
	case 'p':
	case 'P':
		if (cli_parse_priority(optarg_, &o->priority) == 0)
			return OWN_DONE;
		say(err, errlen,
		    "run: --priority %s: not an integer nor background, normal, "
		    "interactive, synchronous",
		    optarg_);
		return OWN_BAD;
	case OPT_TIMEOUT:
		if (cli_parse_uint(optarg_, 0, 10000000, &o->timeout_sec) == 0)
			return OWN_DONE;
		say(err, errlen,
		    "run: --slot-timeout %s: expected seconds, 0 (no limit) to 10000000", optarg_);
		return OWN_BAD;
	case OPT_JOB_TIMEOUT:
		if (cli_parse_uint(optarg_, 1, 86400, &o->job_timeout_sec) == 0)
			return OWN_DONE;
		say(err, errlen, "run: --job-timeout %s: expected seconds, 1 to 86400", optarg_);
		return OWN_BAD;
	case OPT_INPUT:
		return push_file_arg(&o->inputs, &o->ninputs, "--input", optarg_, err, errlen);
	case OPT_OUTPUT:
		return push_file_arg(&o->outputs, &o->noutputs, "--output", optarg_, err, errlen);
	case OPT_ENV:
		if (!strchr(optarg_, '=') || optarg_[0] == '=') {
			say(err, errlen, "run: --env %s: expected NAME=VALUE", optarg_);
			return OWN_BAD;
		}
		return push(&o->env, &o->nenv, optarg_) == 0 ? OWN_DONE : OWN_BAD;
	case OPT_PING_TIMEOUT:
		if (cli_parse_uint(optarg_, 1, 3600, &o->ping_timeout_sec) == 0)
			return OWN_DONE;
		say(err, errlen, "run: --ping-timeout %s: expected seconds, 1 to 3600", optarg_);
		return OWN_BAD;
	case OPT_CLIENT:
		/* exc_options.client_id, checked as the library does */
		if ((why = exc_client_id_problem(optarg_)) != NULL) {
			say(err, errlen, "run: --client %s: %s", optarg_, why);
			return OWN_BAD;
		}
		free(o->client_id);
		return (o->client_id = strdup(optarg_)) ? OWN_DONE : OWN_BAD;
	case 'n': o->no_stdin = 1; return OWN_DONE;
	case 'q': o->quiet = 1; return OWN_DONE;
	default: return OWN_UNKNOWN;
	}
}

int cli_parse_run(int argc, char **argv, struct cli_run *o, const char *(*env)(const char *name),
		  char *err, size_t errlen)
{
	static const struct option longopts[] = {
		{ "address", required_argument, NULL, 'a' },
		{ "service", required_argument, NULL, 's' },
		{ "priority", required_argument, NULL, 'P' },
		{ "slot-timeout", required_argument, NULL, OPT_TIMEOUT },
		/* the old spelling, kept for scripts */
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "job-timeout", required_argument, NULL, OPT_JOB_TIMEOUT },
		{ "input", required_argument, NULL, OPT_INPUT },
		{ "output", required_argument, NULL, OPT_OUTPUT },
		{ "env", required_argument, NULL, OPT_ENV },
		{ "client", required_argument, NULL, OPT_CLIENT },
		{ "ping-timeout", required_argument, NULL, OPT_PING_TIMEOUT },
		{ "token-file", required_argument, NULL, OPT_TOKEN_FILE },
		{ "cacert", required_argument, NULL, OPT_CACERT },
		{ "no-stdin", no_argument, NULL, 'n' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};

	memset(o, 0, sizeof *o);
	err[0] = '\0';
	/* -p: the old short priority, kept for scripts (-p is the pid file of
	 * the daemons) */
	int rc = scan(argc, argv, "+:a:s:p:P:nqvh", longopts, &o->c, run_option, o, cli_run_usage,
		      err, errlen);
	if (rc != CLI_PARSED)
		goto out;
	rc = CLI_BAD;
	for (int i = optind; i < argc; i++)
		if (push(&o->command, &o->ncommand, argv[i]) != 0)
			goto out;
	if (common_finish(&o->c, "run", env, err, errlen) != 0)
		goto out;
	if (!o->service)
		say(err, errlen, "run: no service: give -s SERVICE");
	else if (o->ncommand == 0)
		say(err, errlen, "run: no command: give -- COMMAND [ARGS...] after the options");
	else
		return CLI_PARSED;
out:
	if (rc == CLI_BAD && !err[0])
		say(err, errlen, "run: out of memory");
	cli_run_free(o);
	return rc;
}
void cli_run_free(struct cli_run *o)
{
	common_free(&o->c);
	free(o->service);
	free(o->client_id);
	for (size_t i = 0; i < o->ninputs; i++) {
		free(o->inputs[i].name);
		free(o->inputs[i].path);
	}
	free(o->inputs);
	for (size_t i = 0; i < o->noutputs; i++) {
		free(o->outputs[i].name);
		free(o->outputs[i].path);
	}
	free(o->outputs);
	free_list(o->env, o->nenv);
	free_list(o->command, o->ncommand);
	memset(o, 0, sizeof *o);
}

static struct json_object *string_array(char *const *list, size_t n)
{
	struct json_object *a = json_object_new_array();
	for (size_t i = 0; a && i < n; i++)
		json_object_array_add(a, json_object_new_string(list[i]));
	return a;
}

char *cli_run_job_json(const struct cli_run *o)
{
	struct json_object *job = json_object_new_object();
	if (!job)
		return NULL;
	json_object_object_add(job, "command", json_object_new_string(o->command[0]));
	if (o->ncommand > 1)
		json_object_object_add(job, "args", string_array(o->command + 1, o->ncommand - 1));
	if (o->nenv)
		json_object_object_add(job, "env", string_array(o->env, o->nenv));
	if (o->job_timeout_sec)
		json_object_object_add(job, "timeout_sec",
				       json_object_new_int64(o->job_timeout_sec));
	const char *text = json_object_to_json_string_ext(
		job, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	char *copy = text ? strdup(text) : NULL;
	json_object_put(job);
	return copy;
}

/* ---- status ----------------------------------------------------------------------- */

static int status_option(void *arg, int opt, const char *optarg_, char *err, size_t errlen)
{
	struct cli_status *o = arg;
	if (opt != OPT_JSON)
		return OWN_UNKNOWN;
	o->json = 1;
	return OWN_DONE;
}

int cli_parse_status(int argc, char **argv, struct cli_status *o,
		     const char *(*env)(const char *name), char *err, size_t errlen)
{
	static const struct option longopts[] = {
		{ "address", required_argument, NULL, 'a' },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "token-file", required_argument, NULL, OPT_TOKEN_FILE },
		{ "cacert", required_argument, NULL, OPT_CACERT },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};

	memset(o, 0, sizeof *o);
	err[0] = '\0';
	int rc = scan(argc, argv, "+:a:vh", longopts, &o->c, status_option, o, cli_status_usage,
		      err, errlen);
	if (rc == CLI_PARSED && optind < argc) {
		say(err, errlen, "status: unexpected argument: %s", argv[optind]);
		rc = CLI_BAD;
	} else if (rc == CLI_PARSED && common_finish(&o->c, "status", env, err, errlen) != 0) {
		rc = CLI_BAD;
	}
	if (rc == CLI_PARSED)
		return rc;
	if (rc == CLI_BAD && !err[0])
		say(err, errlen, "status: out of memory");
	cli_status_free(o);
	return rc;
}

void cli_status_free(struct cli_status *o)
{
	common_free(&o->c);
	memset(o, 0, sizeof *o);
}
