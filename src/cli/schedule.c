/*
 * schedule.c - see schedule.h.  One connection, one statement
 * (sql/queries/ctl_schedule_*.sql); the options of the database are
 * queue.c's (--db, -c, --schema, $EXECCTL_DB).
 */
#include "autoconfig.h"
#include "cli/schedule.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <libpq-fe.h>

#include "cli/exit_codes.h"
#include "cli/options.h"
#include "cli/queue_target.h"
#include "cli/table.h"
#include "dispatch/dispatch_config.h"
#include "dispatch/queries.h"
#include "dispatch/schedule_check.h"

/* schedule()'s ranges (sql/migrations/008_schedule.sql) */
#define PRIORITY_MIN -1000
#define PRIORITY_MAX 1000

struct sopts {
	char *conninfo, *schema, *tz;
	int priority;
	char **args; /* the operands after the subcommand */
	int nargs;
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: execctl schedule list   (--db CONNINFO | -c FILE)\n"
		"       execctl schedule add    (--db CONNINFO | -c FILE) [-P P] [--tz ZONE]\n"
		"                               NAME CRON SERVICE JOB\n"
		"       execctl schedule remove (--db CONNINFO | -c FILE) NAME\n"
		"\n"
		"execdispatch's periodic jobs (docs/dispatch.md, \"Periodic jobs\"): list them\n"
		"with their next and last run, create or replace one (CRON: five crontab(5)\n"
		"fields or @hourly, @daily, @weekly, @monthly, @yearly; docs/cron.md; JOB: the\n"
		"job payload, a JSON object with a \"command\"), or remove one.\n"
		"\n"
		"      --db CONNINFO     a libpq connection string or URI (default: $EXECCTL_DB)\n"
		"  -c, --config FILE     take database and schema from execdispatch.yml FILE\n"
		"      --schema NAME     the queue's schema (default execdispatch)\n"
		"  -P, --priority P      add: the jobs' priority, -1000..1000 (default 0)\n"
		"      --tz ZONE         add: the time zone of the spec (default UTC)\n"
		"  -h, --help            this text\n");
}

static void sopts_free(struct sopts *o)
{
	free(o->conninfo);
	free(o->schema);
	free(o->tz);
}

static int parse(int argc, char **argv, struct sopts *o, char *err, size_t len)
{
	static const struct option longs[] = { { "db", required_argument, NULL, 'D' },
					       { "config", required_argument, NULL, 'c' },
					       { "schema", required_argument, NULL, 'S' },
					       { "priority", required_argument, NULL, 'P' },
					       { "tz", required_argument, NULL, 'Z' },
					       { "help", no_argument, NULL, 'h' },
					       { NULL, 0, NULL, 0 } };
	int c;

	memset(o, 0, sizeof *o);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "c:P:h", longs, NULL)) != -1) {
		switch (c) {
		case 'D':
			free(o->conninfo);
			o->conninfo = strdup(optarg);
			break;
		case 'c':
			if (queue_target_config("schedule", optarg, &o->conninfo, &o->schema, err,
						len) < 0)
				return CLI_BAD;
			break;
		case 'S':
			free(o->schema);
			o->schema = strdup(optarg);
			break;
		case 'P':
			if (cli_parse_priority(optarg, &o->priority) < 0 ||
			    o->priority < PRIORITY_MIN || o->priority > PRIORITY_MAX) {
				snprintf(err, len,
					 "schedule: --priority %.64s: expected an integer in "
					 "%d..%d or "
					 "background, normal, interactive, synchronous",
					 optarg, PRIORITY_MIN, PRIORITY_MAX);
				return CLI_BAD;
			}
			break;
		case 'Z':
			free(o->tz);
			o->tz = strdup(optarg);
			break;
		case 'h': usage(stdout); return CLI_HELP;
		default:
			snprintf(err, len, "schedule: unknown option or missing value: %s",
				 argv[optind - 1]);
			return CLI_BAD;
		}
	}
	if (queue_target_finish("schedule", &o->conninfo, &o->schema, err, len) < 0)
		return CLI_BAD;
	if (!o->tz)
		o->tz = strdup("UTC");
	o->args = argv + optind;
	o->nargs = argc - optind;
	return CLI_PARSED;
}

/* The subcommand's operands checked before anything is sent; 0 or -1
 * with the reason in err. */
static int check(const char *sub, const struct sopts *o, char *err, size_t len)
{
	int want = strcmp(sub, "list") == 0 ? 0 : strcmp(sub, "add") == 0 ? 4 : 1;
	char why[300];

	if (o->nargs != want) {
		snprintf(err, len, "schedule %s: %s", sub,
			 want == 0   ? "no operand expected"
			 : want == 4 ? "NAME CRON SERVICE JOB are required"
				     : "NAME is required");
		return -1;
	}
	if (want != 4)
		return 0;
	if (schedule_check(o->args[1], o->tz, why, sizeof why) < 0) {
		snprintf(err, len, "schedule add: %s (docs/cron.md)", why);
		return -1;
	}
	enum json_tokener_error jerr;
	struct json_object *j = json_tokener_parse_verbose(o->args[3], &jerr);
	int object = json_object_is_type(j, json_type_object);
	json_object_put(j);
	if (!object) {
		snprintf(err, len, "schedule add: JOB: %s%s",
			 j ? "a JSON object is required ({\"command\": ...})" : "not JSON: ",
			 j ? "" : json_tokener_error_desc(jerr));
		return -1;
	}
	return 0;
}

/* One statement; NULL after printing the server's message on one line
 * (state: its SQLSTATE). */
static PGresult *run(PGconn *c, const struct sopts *o, const char *text, int n,
		     const char *const *params, char state[6])
{
	char *sql = dq_expand(text, o->schema);
	PGresult *r;

	state[0] = '\0';
	if (!sql) {
		fprintf(stderr, "execctl: out of memory\n");
		return NULL;
	}
	r = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);
	free(sql);
	if (PQresultStatus(r) == PGRES_TUPLES_OK)
		return r;
	const char *primary = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
	const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	snprintf(state, 6, "%s", st ? st : "");
	if (primary)
		fprintf(stderr, "execctl: %s\n", primary);
	else
		fprintf(stderr, "execctl: %s", r ? PQresultErrorMessage(r) : PQerrorMessage(c));
	PQclear(r);
	return NULL;
}

static int do_list(PGconn *c, const struct sopts *o)
{
	static const char *const heads[] = { "NAME",     "CRON",     "TZ",       "SERVICE",
					     "NEXT RUN", "LAST RUN", "LAST JOB", "ERROR" };
	char state[6];
	PGresult *r = run(c, o, DQ_CTL_SCHEDULE_LIST, 0, NULL, state);
	struct table *t;

	if (!r)
		return EXECCTL_FAILED;
	t = table_new(8, heads, 0xbf); /* all text but LAST JOB */
	for (int i = 0; t && i < PQntuples(r); i++) {
		const char *cells[8];
		for (int k = 0; k < 8; k++)
			cells[k] = PQgetisnull(r, i, k) ? NULL : PQgetvalue(r, i, k);
		table_add(t, cells);
	}
	if (t)
		table_print(t, stdout);
	table_free(t);
	PQclear(r);
	return EXECCTL_OK;
}

static int do_add(PGconn *c, const struct sopts *o)
{
	char prio[16], state[6];
	const char *params[6] = { o->args[0], o->args[1], o->args[2], o->args[3], prio, o->tz };
	PGresult *r;

	snprintf(prio, sizeof prio, "%d", o->priority);
	r = run(c, o, DQ_CTL_SCHEDULE_ADD, 6, params, state);
	if (!r)
		return strncmp(state, "22", 2) == 0 ? EXECCTL_USAGE : EXECCTL_FAILED;
	printf("%s\n", PQgetvalue(r, 0, 0));
	PQclear(r);
	return EXECCTL_OK;
}

static int do_remove(PGconn *c, const struct sopts *o)
{
	char state[6];
	const char *params[1] = { o->args[0] };
	PGresult *r = run(c, o, DQ_CTL_SCHEDULE_REMOVE, 1, params, state);
	int rc;

	if (!r)
		return EXECCTL_FAILED;
	rc = strcmp(PQgetvalue(r, 0, 0), "t") == 0 ? EXECCTL_OK : EXECCTL_NOT_FOUND;
	printf("%s\n", rc == EXECCTL_OK ? "removed" : "not_found");
	PQclear(r);
	return rc;
}

int cli_schedule_main(int argc, char **argv)
{
	struct sopts o;
	char err[512];
	const char *sub = argc > 1 ? argv[1] : "";
	int rc;
	PGconn *c;

	if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0) {
		usage(stdout);
		return EXECCTL_OK;
	}
	if (strcmp(sub, "list") != 0 && strcmp(sub, "add") != 0 && strcmp(sub, "remove") != 0) {
		fprintf(stderr, "execctl: schedule: list, add or remove is required\n");
		usage(stderr);
		return EXECCTL_USAGE;
	}
	rc = parse(argc - 1, argv + 1, &o, err, sizeof err);
	if (rc == CLI_PARSED && check(sub, &o, err, sizeof err) < 0)
		rc = CLI_BAD;
	if (rc != CLI_PARSED) {
		if (rc == CLI_BAD)
			fprintf(stderr, "execctl: %s\n(execctl schedule --help for the options)\n",
				err);
		sopts_free(&o);
		return rc == CLI_HELP ? EXECCTL_OK : EXECCTL_USAGE;
	}
	c = PQconnectdb(o.conninfo);
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "execctl: cannot connect to the database: %s", PQerrorMessage(c));
		PQfinish(c);
		sopts_free(&o);
		return EXECCTL_UNREACHABLE;
	}
	rc = strcmp(sub, "list") == 0  ? do_list(c, &o)
	     : strcmp(sub, "add") == 0 ? do_add(c, &o)
				       : do_remove(c, &o);
	PQfinish(c);
	sopts_free(&o);
	return rc;
}
