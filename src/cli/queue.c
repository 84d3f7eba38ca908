/*
 * queue.c - see queue.h.
 *
 * Every command is one or a few statements of execdispatch's SQL API
 * (docs/dispatch.md) on one connection: submit(), cancel(), position(),
 * retry(), pause(), resume(), the job row and its attempts.  `wait` polls the row every 250 ms (no LISTEN: it works
 * through a transaction-mode pooler like the dispatchers) and keeps the
 * position line on a terminal while the job is queued.  The statements are
 * sql/queries/ctl_*.sql (DQ_CTL_* of dispatch/queries.h), beside the
 * daemon's.
 */
#include "autoconfig.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <libpq-fe.h>

#include "cli/exit_codes.h"
#include "cli/options.h"
#include "cli/outcome.h"
#include "cli/progress.h"
#include "cli/queue.h"
#include "cli/queue_target.h"
#include "dispatch/dispatch_config.h"
#include "dispatch/queries.h"

#define WAIT_TICK_MS 250
#define AFTER_MAX_SEC 315360000  /* --after: ten years */
#define TIMEOUT_MAX_SEC 10000000 /* --timeout: as execctl run's */
/* submit()'s range (sql/migrations/001_queue.sql, job_priority) */
#define PRIORITY_MIN -1000
#define PRIORITY_MAX 1000

struct qopts {
	char *conninfo;
	char *schema;
	char *service;
	int priority;
	char *job; /* --job JSON */
	char **env;
	size_t nenv;
	unsigned after_sec;
	unsigned timeout_sec; /* wait: 0 forever */
	int json, quiet, wait;
	long long id;
	char **command;
	size_t ncommand;
};

static void usage(FILE *out, const char *cmd)
{
	fprintf(out,
		"usage: execctl submit (--db CONNINFO | -c FILE) -s SERVICE [-P P] [--after S]\n"
		"                      [--env NAME=VALUE] [-w] (--job JSON | -- COMMAND "
		"[ARGS...])\n"
		"       execctl show     (--db CONNINFO | -c FILE) [--json] ID\n"
		"       execctl wait     (--db CONNINFO | -c FILE) [--wait-timeout S] [-q] ID\n"
		"       execctl cancel   (--db CONNINFO | -c FILE) ID\n"
		"       execctl position (--db CONNINFO | -c FILE) ID\n"
		"       execctl retry    (--db CONNINFO | -c FILE) ID\n"
		"       execctl pause    (--db CONNINFO | -c FILE) SERVICE\n"
		"       execctl resume   (--db CONNINFO | -c FILE) SERVICE\n"
		"\n"
		"The database side of execdispatch (docs/dispatch.md): enqueue a job, show its\n"
		"row, wait for its outcome (with its queue position on a terminal), cancel it,\n"
		"show its position, retry it once failed or cancelled, or pause and resume a\n"
		"service's claims (execctl %s --help: this text).\n"
		"\n"
		"      --db CONNINFO     a libpq connection string or URI (default: $EXECCTL_DB)\n"
		"  -c, --config FILE     take database and schema from execdispatch.yml FILE\n"
		"      --schema NAME     the queue's schema (default execdispatch)\n"
		"  -s, --service NAME    submit: the service (required)\n"
		"  -P, --priority P      submit: an integer, or background (-2), normal (0),\n"
		"                        interactive (2), synchronous (4)\n"
		"      --after S         submit: not before S seconds from now\n"
		"      --env NAME=VALUE  submit: an environment variable (repeatable)\n"
		"      --job JSON        submit: the whole job payload (a JSON object)\n"
		"                        instead of COMMAND\n"
		"  -w, --wait            submit: then wait as `execctl wait` does\n"
		"      --wait-timeout S  wait: give up after S seconds (exit 121)\n"
		"  -q, --quiet           wait: no position line\n"
		"      --json            show: the row as JSON\n"
		"  -h, --help            this text\n",
		cmd);
}

static void qopts_free(struct qopts *o)
{
	free(o->conninfo);
	free(o->schema);
	free(o->service);
	free(o->job);
	for (size_t i = 0; i < o->nenv; i++)
		free(o->env[i]);
	free(o->env);
	memset(o, 0, sizeof *o);
}

static int parse(int argc, char **argv, struct qopts *o, char *err, size_t len)
{
	static const struct option longs[] = { { "db", required_argument, NULL, 'D' },
					       { "config", required_argument, NULL, 'c' },
					       { "schema", required_argument, NULL, 'S' },
					       { "service", required_argument, NULL, 's' },
					       { "priority", required_argument, NULL, 'p' },
					       { "after", required_argument, NULL, 'A' },
					       { "env", required_argument, NULL, 'E' },
					       { "job", required_argument, NULL, 'J' },
					       { "wait", no_argument, NULL, 'w' },
					       { "wait-timeout", required_argument, NULL, 'T' },
					       /* the old spelling, kept for scripts */
					       { "timeout", required_argument, NULL, 'T' },
					       { "quiet", no_argument, NULL, 'q' },
					       { "json", no_argument, NULL, 'j' },
					       { "help", no_argument, NULL, 'h' },
					       { NULL, 0, NULL, 0 } };
	const char *cmd = argv[0];
	int c;

	memset(o, 0, sizeof *o);
	optind = 1;
	opterr = 0;
	/* -p: the old short priority, kept for scripts (-p is the pid file of
	 * the daemons) */
	while ((c = getopt_long(argc, argv, "+c:s:p:P:wqh", longs, NULL)) != -1) {
		switch (c) {
		case 'D':
			free(o->conninfo);
			o->conninfo = strdup(optarg);
			break;
		case 'c':
			if (queue_target_config(cmd, optarg, &o->conninfo, &o->schema, err, len) <
			    0)
				return CLI_BAD;
			break;
		case 'S':
			free(o->schema);
			o->schema = strdup(optarg);
			break;
		case 's':
			free(o->service);
			o->service = strdup(optarg);
			break;
		case 'p':
		case 'P':
			if (cli_parse_priority(optarg, &o->priority) < 0 ||
			    o->priority < PRIORITY_MIN || o->priority > PRIORITY_MAX) {
				snprintf(err, len,
					 "%s: --priority %.64s: expected an integer in %d..%d or "
					 "background, normal, interactive, synchronous",
					 cmd, optarg, PRIORITY_MIN, PRIORITY_MAX);
				return CLI_BAD;
			}
			break;
		case 'A':
			if (cli_parse_uint(optarg, 0, AFTER_MAX_SEC, &o->after_sec) < 0) {
				snprintf(err, len, "%s: --after %.64s: expected seconds, 0 to %d",
					 cmd, optarg, AFTER_MAX_SEC);
				return CLI_BAD;
			}
			break;
		case 'E': {
			char **n = realloc(o->env, (o->nenv + 1) * sizeof *n);
			if (!n || !strchr(optarg, '=')) {
				snprintf(err, len, "%s: --env: NAME=VALUE is required", cmd);
				return CLI_BAD;
			}
			o->env = n;
			o->env[o->nenv++] = strdup(optarg);
			break;
		}
		case 'J': {
			/* checked here: a payload the database would refuse with
			 * a parser's CONTEXT lines gets one line, nothing sent */
			enum json_tokener_error jerr;
			struct json_object *j = json_tokener_parse_verbose(optarg, &jerr);
			int object = json_object_is_type(j, json_type_object);

			json_object_put(j);
			if (!object) {
				snprintf(err, len, "%s: --job: %s%s", cmd,
					 j ? "a JSON object is required ({\"command\": ...})"
					   : "not JSON: ",
					 j ? "" : json_tokener_error_desc(jerr));
				return CLI_BAD;
			}
			free(o->job);
			o->job = strdup(optarg);
			break;
		}
		case 'w': o->wait = 1; break;
		case 'T':
			if (cli_parse_uint(optarg, 0, TIMEOUT_MAX_SEC, &o->timeout_sec) < 0) {
				snprintf(err, len,
					 "%s: --wait-timeout %.64s: expected seconds, 0 (no limit) "
					 "to %d",
					 cmd, optarg, TIMEOUT_MAX_SEC);
				return CLI_BAD;
			}
			break;
		case 'q': o->quiet = 1; break;
		case 'j': o->json = 1; break;
		case 'h': usage(stdout, cmd); return CLI_HELP;
		default:
			snprintf(err, len, "%s: unknown option or missing value: %s", cmd,
				 argv[optind - 1]);
			return CLI_BAD;
		}
	}
	if (queue_target_finish(cmd, &o->conninfo, &o->schema, err, len) < 0)
		return CLI_BAD;
	if (strcmp(cmd, "submit") == 0) {
		if (!o->service) {
			snprintf(err, len, "submit: -s SERVICE is required");
			return CLI_BAD;
		}
		o->command = argv + optind;
		o->ncommand = (size_t)(argc - optind);
		if (!o->job == !o->ncommand) {
			snprintf(err, len, "submit: either --job JSON or -- COMMAND [ARGS...]");
			return CLI_BAD;
		}
		/* a payload given as the command (no command name is JSON):
		 * it would be queued as a command of that name and fail */
		if (o->ncommand && o->command[0][0] == '{') {
			snprintf(err, len,
				 "submit: COMMAND %.40s... looks like a JSON job: give it with "
				 "--job",
				 o->command[0]);
			return CLI_BAD;
		}
		return CLI_PARSED;
	}
	if (strcmp(cmd, "pause") == 0 || strcmp(cmd, "resume") == 0) {
		if (optind != argc - 1) {
			snprintf(err, len, "%s: one SERVICE is required", cmd);
			return CLI_BAD;
		}
		free(o->service);
		o->service = strdup(argv[optind]);
		return CLI_PARSED;
	}
	if (optind != argc - 1 || (o->id = strtoll(argv[optind], NULL, 10)) <= 0) {
		snprintf(err, len, "%s: one job id (a positive integer) is required", cmd);
		return CLI_BAD;
	}
	return CLI_PARSED;
}

/* The SQLSTATE of the last statement that failed ("" if none). */
static char failed_state[6];

/* Runs sql with $1.. params; NULL after printing the error on one line:
 * the server's primary message and its detail, without the CONTEXT lines
 * of the functions it came through. */
/* One of execctl's statements (sql/queries/ctl_*.sql) in o's schema. */
static PGresult *run(PGconn *c, const struct qopts *o, const char *text, int n,
		     const char *const *params)
{
	char *sql = dq_expand(text, o->schema);
	PGresult *r;
	const char *primary, *detail, *state;

	if (!sql) {
		fprintf(stderr, "execctl: out of memory\n");
		snprintf(failed_state, sizeof failed_state, "53200");
		return NULL;
	}
	r = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);
	free(sql);
	if (PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK)
		return r;
	primary = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
	detail = PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL);
	state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	snprintf(failed_state, sizeof failed_state, "%s", state ? state : "");
	if (primary)
		fprintf(stderr, "execctl: %s%s%s\n", primary, detail ? ": " : "",
			detail ? detail : "");
	else
		fprintf(stderr, "execctl: %s", r ? PQresultErrorMessage(r) : PQerrorMessage(c));
	PQclear(r);
	return NULL;
}

static char *job_json(const struct qopts *o)
{
	struct json_object *j, *args, *env;
	char *out;

	if (o->job)
		return strdup(o->job);
	j = json_object_new_object();
	args = json_object_new_array();
	env = json_object_new_array();
	json_object_object_add(j, "command", json_object_new_string(o->command[0]));
	for (size_t i = 1; i < o->ncommand; i++)
		json_object_array_add(args, json_object_new_string(o->command[i]));
	for (size_t i = 0; i < o->nenv; i++)
		json_object_array_add(env, json_object_new_string(o->env[i]));
	json_object_object_add(j, "args", args);
	json_object_object_add(j, "env", env);
	out = strdup(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
	json_object_put(j);
	return out;
}

static int do_wait(PGconn *c, const struct qopts *o);

static int do_submit(PGconn *c, struct qopts *o)
{
	char prio[16], after[16];
	char *job = job_json(o);
	const char *params[4] = { o->service, job, prio, after };
	PGresult *r;

	snprintf(prio, sizeof prio, "%d", o->priority);
	snprintf(after, sizeof after, "%u", o->after_sec);
	r = job ? run(c, o, DQ_CTL_SUBMIT, 4, params) : NULL;
	free(job);
	/* input the database refused (class 22: data exception, e.g. a bad
	 * payload or a service name submit() does not take): nothing queued */
	if (!r)
		return strncmp(failed_state, "22", 2) == 0 || strcmp(failed_state, "P0001") == 0
			       ? EXECCTL_USAGE
			       : EXECCTL_FAILED;
	o->id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	printf("%lld\n", o->id);
	fflush(stdout);
	PQclear(r);
	return o->wait ? do_wait(c, o) : EXECCTL_OK;
}

static int position_text(PGconn *c, const struct qopts *o, char *state, size_t slen, char *buf,
			 size_t len);
static void show_attempts(PGconn *c, const struct qopts *o);

/* A queued row that has run before (attempts > 0: a retry, a rescue):
 * "next attempt  at <start_after> (attempt N)"; no attempt is made before
 * start_after (docs/dispatch.md, "Retries"). */
static void show_next_attempt(PGresult *r, int width)
{
	int sf = PQfnumber(r, "state"), af = PQfnumber(r, "attempts"),
	    tf = PQfnumber(r, "start_after");

	if (sf < 0 || af < 0 || tf < 0 || strcmp(PQgetvalue(r, 0, sf), "queued") != 0 ||
	    atoi(PQgetvalue(r, 0, af)) <= 0)
		return;
	printf("%-*s  at %s (attempt %d)\n", width, "next attempt", PQgetvalue(r, 0, tf),
	       atoi(PQgetvalue(r, 0, af)) + 1);
}

/* The row, one column a line; a queued row that has run before says when
 * its next attempt is; a queued, claimed or running row ends with its
 * position line, as `execctl position` prints it (why it waits included;
 * a running one's progress, migration 010). */
static int do_show(PGconn *c, const struct qopts *o)
{
	char id[24];
	const char *params[1] = { id };
	PGresult *r;

	snprintf(id, sizeof id, "%lld", o->id);
	r = run(c, o, o->json ? DQ_CTL_SHOW_JSON : DQ_CTL_SHOW, 1, params);
	if (!r)
		return EXECCTL_FAILED;
	if (PQntuples(r) == 0) {
		fprintf(stderr, "execctl: job %lld: not found\n", o->id);
		PQclear(r);
		return EXECCTL_NOT_FOUND;
	}
	int width = (int)strlen("next attempt"), waits = 0;
	for (int f = 0; f < PQnfields(r); f++)
		if ((int)strlen(PQfname(r, f)) > width)
			width = (int)strlen(PQfname(r, f));
	if (o->json) {
		printf("%s\n", PQgetvalue(r, 0, 0));
	} else {
		for (int f = 0; f < PQnfields(r); f++)
			printf("%-*s  %s\n", width, PQfname(r, f),
			       PQgetisnull(r, 0, f) ? "" : PQgetvalue(r, 0, f));
		int sf = PQfnumber(r, "state");
		waits = sf >= 0 && (strcmp(PQgetvalue(r, 0, sf), "queued") == 0 ||
				    strcmp(PQgetvalue(r, 0, sf), "claimed") == 0 ||
				    strcmp(PQgetvalue(r, 0, sf), "running") == 0);
		show_next_attempt(r, width);
	}
	PQclear(r);
	if (waits) {
		char state[32], line[512];
		if (position_text(c, o, state, sizeof state, line, sizeof line) == EXECCTL_OK)
			printf("%-*s  %s\n", width, "position", line);
	}
	if (!o->json)
		show_attempts(c, o);
	return EXECCTL_OK;
}

/* The position text of a job from position(): "3 running, 7 ahead in the
 * queue" for a queued row (running: rows of its service; with why it
 * waits when it is not simply its turn), the execserver's "1 of 2 slots
 * busy, 0 ahead, about 3 s" for a claimed one, or the state.
 * EXECCTL_OK, EXECCTL_FAILED (printed), or EXECCTL_NOT_FOUND (printed). */
static int position_text(PGconn *c, const struct qopts *o, char *state, size_t slen, char *buf,
			 size_t len)
{
	char id[24];
	const char *params[1] = { id };
	struct json_object *p, *v;
	PGresult *r;

	snprintf(id, sizeof id, "%lld", o->id);
	r = run(c, o, DQ_CTL_POSITION, 1, params);
	if (!r)
		return EXECCTL_FAILED;
	if (PQgetisnull(r, 0, 0)) {
		PQclear(r);
		fprintf(stderr, "execctl: job %lld: not found\n", o->id);
		return EXECCTL_NOT_FOUND;
	}
	p = json_tokener_parse(PQgetvalue(r, 0, 0));
	PQclear(r);
	snprintf(state, slen, "%s",
		 json_object_object_get_ex(p, "state", &v) ? json_object_get_string(v) : "?");
	int64_t running = json_object_object_get_ex(p, "running", &v) ? json_object_get_int64(v)
								      : 0;
	int64_t eta = json_object_object_get_ex(p, "eta_ms", &v) && v ? json_object_get_int64(v)
								      : -1;
	int64_t capacity = json_object_object_get_ex(p, "capacity", &v) && v
				   ? json_object_get_int64(v)
				   : 0;
	int64_t ahead = json_object_object_get_ex(p, "ahead", &v) && v ? json_object_get_int64(v)
								       : -1;
	if (ahead >= 0 && strcmp(state, "claimed") == 0)
		progress_line(buf, len, running, capacity, ahead, eta);
	else if (ahead >= 0)
		snprintf(buf, len, "%lld running, %lld ahead in the queue", (long long)running,
			 (long long)ahead);
	else if (strcmp(state, "claimed") == 0)
		snprintf(buf, len, "claimed, waiting for a slot");
	else if (strcmp(state, "running") == 0 && json_object_object_get_ex(p, "progress", &v) &&
		 v) {
		/* migration 010: {"fraction", "text"} as the program reported it */
		struct json_object *f, *t;
		progress_running(
			buf, len,
			json_object_object_get_ex(v, "fraction", &f) ? json_object_get_double(f)
								     : 0,
			json_object_object_get_ex(v, "text", &t) ? json_object_get_string(t) : "");
	} else
		snprintf(buf, len, "%s", state);
	/* a queued row: why it waits, unless it is simply its turn (migration
	 * 007: "no dispatcher claims: d0: no execserver connected (...)") */
	if (json_object_object_get_ex(p, "waiting", &v) && v &&
	    strcmp(json_object_get_string(v), "its turn") != 0 && strlen(buf) + 4 < len)
		snprintf(buf + strlen(buf), len - strlen(buf), " (%s)", json_object_get_string(v));
	json_object_put(p);
	return EXECCTL_OK;
}

static int do_position(PGconn *c, const struct qopts *o)
{
	char state[32], line[512];
	int rc = position_text(c, o, state, sizeof state, line, sizeof line);

	if (rc == EXECCTL_OK)
		printf("%s\n", line);
	return rc;
}

static int do_cancel(PGconn *c, const struct qopts *o)
{
	char id[24];
	const char *params[1] = { id };
	PGresult *r;
	int rc;

	snprintf(id, sizeof id, "%lld", o->id);
	r = run(c, o, DQ_CTL_CANCEL, 1, params);
	if (!r)
		return EXECCTL_FAILED;
	printf("%s\n", PQgetvalue(r, 0, 0));
	rc = strcmp(PQgetvalue(r, 0, 0), "not_found_or_finished") == 0 ? EXECCTL_NOT_FOUND
								       : EXECCTL_OK;
	PQclear(r);
	return rc;
}

/* pause SERVICE, resume SERVICE (migration 009): the answer; resume of a
 * service that was not paused exits 122, a name pause() refuses 2. */
static int do_pause_resume(PGconn *c, const struct qopts *o, int pause)
{
	const char *params[1] = { o->service };
	PGresult *r = run(c, o, pause ? DQ_CTL_PAUSE : DQ_CTL_RESUME, 1, params);
	int rc;

	if (!r)
		return strncmp(failed_state, "22", 2) == 0 ? EXECCTL_USAGE : EXECCTL_FAILED;
	printf("%s\n", PQgetvalue(r, 0, 0));
	rc = strcmp(PQgetvalue(r, 0, 0), "not_paused") == 0 ? EXECCTL_NOT_FOUND : EXECCTL_OK;
	PQclear(r);
	return rc;
}

/* retry ID: requeued (0), not_found_or_not_finished (122), stopping or
 * unique_key_taken (115: try again later, or not at all). */
static int do_retry(PGconn *c, const struct qopts *o)
{
	char id[24];
	const char *params[1] = { id };
	PGresult *r;
	int rc;

	snprintf(id, sizeof id, "%lld", o->id);
	r = run(c, o, DQ_CTL_RETRY, 1, params);
	if (!r)
		return EXECCTL_FAILED;
	printf("%s\n", PQgetvalue(r, 0, 0));
	rc = strcmp(PQgetvalue(r, 0, 0), "requeued") == 0                    ? EXECCTL_OK
	     : strcmp(PQgetvalue(r, 0, 0), "not_found_or_not_finished") == 0 ? EXECCTL_NOT_FOUND
									     : EXECCTL_FAILED;
	PQclear(r);
	return rc;
}

/* show: the attempts that ended (attempts(id)), one line each:
 * "attempt N  STATE  RUNNER  started S  finished F  ERROR  RECEIPT". */
static void show_attempts(PGconn *c, const struct qopts *o)
{
	char id[24];
	const char *params[1] = { id };
	PGresult *r;

	snprintf(id, sizeof id, "%lld", o->id);
	r = run(c, o, DQ_CTL_ATTEMPTS, 1, params);
	if (!r)
		return;
	for (int i = 0; i < PQntuples(r); i++)
		printf("attempt %s  %s  %s  started %s  finished %s%s%s%s%s\n", PQgetvalue(r, i, 0),
		       PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
		       *PQgetvalue(r, i, 3) ? PQgetvalue(r, i, 3) : "-",
		       *PQgetvalue(r, i, 4) ? PQgetvalue(r, i, 4) : "-",
		       *PQgetvalue(r, i, 5) ? "  " : "", PQgetvalue(r, i, 5),
		       *PQgetvalue(r, i, 6) ? "  " : "", PQgetvalue(r, i, 6));
	PQclear(r);
}

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

/* Shows a finished row as `execctl run` shows a receipt (outcome_show:
 * the stdout the receipt keeps, the outcome, the last stderr line), after
 * "job N: STATE (ERROR)".  The exit status: done -> 0; failed -> the
 * program's exit code when it exited non-zero, else 115; cancelled ->
 * 120. */
static int final_status(PGconn *c, const struct qopts *o, const char *state)
{
	char id[24];
	const char *params[1] = { id };
	PGresult *r;
	int rc = EXECCTL_FAILED;

	snprintf(id, sizeof id, "%lld", o->id);
	r = run(c, o, DQ_CTL_FINAL, 1, params);
	if (!r)
		return EXECCTL_FAILED;
	if (PQntuples(r) == 0) { /* removed since (retainDoneDays) */
		fprintf(stderr, "execctl: job %lld: %s, then removed\n", o->id, state);
		PQclear(r);
		return EXECCTL_NOT_FOUND;
	}
	if (strcmp(state, "done") == 0)
		rc = EXECCTL_OK;
	else if (strcmp(state, "cancelled") == 0)
		rc = EXECCTL_CANCELLED;
	else if (!PQgetisnull(r, 0, 1) && atoi(PQgetvalue(r, 0, 1)) > 0)
		rc = atoi(PQgetvalue(r, 0, 1));
	const char *error = PQgetvalue(r, 0, 0);
	/* the error says more than the state only when it differs from it */
	int say_error = error[0] && strcmp(error, state) != 0;
	fprintf(stderr, "execctl: job %lld: %s%s%s%s\n", o->id, state, say_error ? " (" : "",
		say_error ? error : "", say_error ? ")" : "");
	if (!PQgetisnull(r, 0, 2)) {
		struct exc_receipt rc_;
		struct json_object *doc;
		char msg[2048];
		if (outcome_parse(PQgetvalue(r, 0, 2), &rc_, &doc) == 0) {
			outcome_exit(&rc_, 0, PQgetvalue(r, 0, 3), msg, sizeof msg);
			if (outcome_show(&rc_, msg, stdout, stderr) != 0 && rc == EXECCTL_OK)
				rc = EXECCTL_LOCAL_IO;
		}
		json_object_put(doc);
	}
	PQclear(r);
	return rc;
}

static int do_wait(PGconn *c, const struct qopts *o)
{
	int tty = !o->quiet && isatty(STDERR_FILENO), shown = 0;
	/* monotonic: a step of the wall clock does not move the deadline */
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	time_t end = o->timeout_sec > 0 ? now.tv_sec + (time_t)o->timeout_sec : 0;
	char state[32], line[128];

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	for (;;) {
		int rc = position_text(c, o, state, sizeof state, line, sizeof line);
		if (rc != EXECCTL_OK)
			return rc;
		if (strcmp(state, "done") == 0 || strcmp(state, "failed") == 0 ||
		    strcmp(state, "cancelled") == 0) {
			if (shown)
				fprintf(stderr, "\r\033[K");
			return final_status(c, o, state);
		}
		if (tty) {
			fprintf(stderr, "\r\033[Kexecctl: job %lld: %s", o->id, line);
			shown = 1;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (interrupted || (end && now.tv_sec >= end)) {
			if (shown)
				fprintf(stderr, "\r\033[K");
			fprintf(stderr,
				"execctl: job %lld: still %s (%s); not waiting any longer\n", o->id,
				state, interrupted ? "interrupted" : "--wait-timeout");
			return interrupted ? EXECCTL_INTERRUPTED : EXECCTL_WAIT_TIMEOUT;
		}
		usleep(WAIT_TICK_MS * 1000);
	}
}

int cli_queue_main(int argc, char **argv)
{
	struct qopts o;
	char err[512];
	int rc = parse(argc, argv, &o, err, sizeof err);
	PGconn *c;

	if (rc != CLI_PARSED) {
		if (rc == CLI_BAD)
			fprintf(stderr, "execctl: %s\n(execctl %s --help for the options)\n", err,
				argv[0]);
		qopts_free(&o);
		return rc == CLI_HELP ? EXECCTL_OK : EXECCTL_USAGE;
	}
	c = PQconnectdb(o.conninfo);
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "execctl: cannot connect to the database: %s", PQerrorMessage(c));
		PQfinish(c);
		qopts_free(&o);
		return EXECCTL_UNREACHABLE;
	}
	if (strcmp(argv[0], "submit") == 0)
		rc = do_submit(c, &o);
	else if (strcmp(argv[0], "show") == 0)
		rc = do_show(c, &o);
	else if (strcmp(argv[0], "wait") == 0)
		rc = do_wait(c, &o);
	else if (strcmp(argv[0], "cancel") == 0)
		rc = do_cancel(c, &o);
	else if (strcmp(argv[0], "retry") == 0)
		rc = do_retry(c, &o);
	else if (strcmp(argv[0], "pause") == 0 || strcmp(argv[0], "resume") == 0)
		rc = do_pause_resume(c, &o, strcmp(argv[0], "pause") == 0);
	else
		rc = do_position(c, &o);
	PQfinish(c);
	qopts_free(&o);
	return rc;
}

int cli_is_queue_command(const char *cmd)
{
	static const char *const cmds[] = { "submit", "show",  "wait",   "cancel", "position",
					    "retry",  "pause", "resume", NULL };

	for (size_t i = 0; cmds[i]; i++)
		if (strcmp(cmd, cmds[i]) == 0)
			return 1;
	return 0;
}
