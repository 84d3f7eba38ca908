/*
 * listing.c - see listing.h.
 *
 * Each statement answers one JSON text (an array); --json prints it as
 * it came, otherwise it becomes a table (table.c: server strings are
 * escaped).  A page of `jobs` ends with the line to get the next one
 * (`next: --after ID`) when it was full: the keyset is the statement's
 * (created, claim order, or finished order; the id of the last job of a
 * page names where the next starts), never an OFFSET.
 */
#include "autoconfig.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <libpq-fe.h>

#include "cli/exit_codes.h"
#include "cli/listing.h"
#include "cli/options.h"
#include "cli/queue_target.h"
#include "cli/table.h"
#include "dispatch/dispatch_config.h"
#include "dispatch/queries.h"

#define LIMIT_DEFAULT 50
#define LIMIT_MAX 500

struct lopts {
	char *conninfo, *schema, *state, *service, *since, *after;
	unsigned limit;
	int json;
};

static void usage(FILE *out)
{
	fputs("usage: execctl jobs  (--db CONNINFO | -c FILE) [--state S] [--service S]\n"
	      "                     [--since T] [--after ID] [--limit N] [--json]\n"
	      "       execctl stats (--db CONNINFO | -c FILE) [--json]\n"
	      "\n"
	      "jobs: one page of execdispatch's jobs, newest first (queued ones in claim\n"
	      "order, finished ones by when they finished); the next page with --after the\n"
	      "last ID shown.  stats: per service queued, claimed, running, finished and\n"
	      "failed in the last hour, the oldest queued job's wait, p50/p95 of queue wait\n"
	      "and run time; and rows per state (finished ones estimated on a large table).\n"
	      "\n"
	      "      --db CONNINFO   a libpq connection string or URI (default: $EXECCTL_DB)\n"
	      "  -c, --config FILE   take database and schema from execdispatch.yml FILE\n"
	      "      --schema NAME   the queue's schema (default execdispatch)\n"
	      "      --state S       queued, claimed, running, done, failed or cancelled\n"
	      "  -s, --service S     one service (with --state)\n"
	      "      --since T       created (finished, for a finished state) at or after T,\n"
	      "                      a PostgreSQL timestamp ('2026-12-07 10:00', 'today')\n"
	      "      --after ID      the page after job ID (the last of the page before)\n"
	      "  -n, --limit N       jobs per page, 1 to 500 (default 50)\n"
	      "      --json          the statement's JSON as it came\n",
	      out);
}

static void lopts_free(struct lopts *o)
{
	free(o->conninfo);
	free(o->schema);
	free(o->state);
	free(o->service);
	free(o->since);
	free(o->after);
}

static int set(char **slot, const char *v)
{
	free(*slot);
	*slot = strdup(v);
	return *slot ? 0 : -1;
}

static int is_state(const char *s)
{
	static const char *const states[] = { "queued", "claimed",   "running", "done",
					      "failed", "cancelled", NULL };
	for (int i = 0; states[i]; i++)
		if (strcmp(s, states[i]) == 0)
			return 1;
	return 0;
}

static int parse(int argc, char **argv, struct lopts *o, char *err, size_t len)
{
	static const struct option longs[] = { { "db", required_argument, NULL, 'D' },
					       { "config", required_argument, NULL, 'c' },
					       { "schema", required_argument, NULL, 'S' },
					       { "state", required_argument, NULL, 't' },
					       { "service", required_argument, NULL, 's' },
					       { "since", required_argument, NULL, 'T' },
					       { "after", required_argument, NULL, 'A' },
					       { "limit", required_argument, NULL, 'n' },
					       { "json", no_argument, NULL, 'j' },
					       { "help", no_argument, NULL, 'h' },
					       { NULL, 0, NULL, 0 } };
	const char *cmd = argv[0];
	int c, jobs = strcmp(cmd, "jobs") == 0;
	char *end;

	memset(o, 0, sizeof *o);
	o->limit = LIMIT_DEFAULT;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+c:s:n:h", longs, NULL)) != -1) {
		if (!jobs && strchr("tsTAn", c)) {
			snprintf(err, len, "%s: %s is an option of jobs", cmd, argv[optind - 1]);
			return CLI_BAD;
		}
		switch (c) {
		case 'D': set(&o->conninfo, optarg); break;
		case 'c':
			if (queue_target_config(cmd, optarg, &o->conninfo, &o->schema, err, len) <
			    0)
				return CLI_BAD;
			break;
		case 'S': set(&o->schema, optarg); break;
		case 't':
			if (!is_state(optarg)) {
				snprintf(err, len,
					 "%s: --state %.64s: expected queued, claimed, running, "
					 "done, "
					 "failed or cancelled",
					 cmd, optarg);
				return CLI_BAD;
			}
			set(&o->state, optarg);
			break;
		case 's': set(&o->service, optarg); break;
		case 'T': set(&o->since, optarg); break;
		case 'A':
			if (strtoll(optarg, &end, 10) <= 0 || *end) {
				snprintf(err, len, "%s: --after %.64s: a job id is required", cmd,
					 optarg);
				return CLI_BAD;
			}
			set(&o->after, optarg);
			break;
		case 'n':
			if (cli_parse_uint(optarg, 1, LIMIT_MAX, &o->limit) < 0) {
				snprintf(err, len, "%s: --limit %.64s: expected 1 to %d", cmd,
					 optarg, LIMIT_MAX);
				return CLI_BAD;
			}
			break;
		case 'j': o->json = 1; break;
		case 'h': usage(stdout); return CLI_HELP;
		default:
			snprintf(err, len, "%s: unknown option %s", cmd, argv[optind - 1]);
			return CLI_BAD;
		}
	}
	if (optind != argc) {
		snprintf(err, len, "%s: unexpected argument %s", cmd, argv[optind]);
		return CLI_BAD;
	}
	/* the list of every state walks job_pkey: a service there is a filter
	 * read row by row, a rare one the whole table (docs/dispatch.md) */
	if (o->service && !o->state) {
		snprintf(err, len,
			 "%s: --service needs --state (one service's jobs are listed "
			 "per state)",
			 cmd);
		return CLI_BAD;
	}
	if (queue_target_finish(cmd, &o->conninfo, &o->schema, err, len) < 0)
		return CLI_BAD;
	return CLI_PARSED;
}

/* One statement answering one JSON text: parsed (the caller puts it), or
 * NULL after printing why. */
static struct json_object *ask(PGconn *c, const struct lopts *o, const char *text, int n,
			       const char *const *params, char **raw)
{
	char *sql = dq_expand(text, o->schema);
	PGresult *r = sql ? PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0) : NULL;
	struct json_object *j = NULL;

	free(sql);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		const char *m = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
		fprintf(stderr, "execctl: %s%s", m ? m : PQerrorMessage(c), m ? "\n" : "");
	} else {
		j = json_tokener_parse(PQgetvalue(r, 0, 0));
		if (raw)
			*raw = strdup(PQgetvalue(r, 0, 0));
	}
	PQclear(r);
	return j;
}

static const char *field(struct json_object *o, const char *k, char *buf, size_t len)
{
	struct json_object *v;
	if (!json_object_object_get_ex(o, k, &v) || !v)
		return NULL;
	snprintf(buf, len, "%s", json_object_get_string(v));
	return buf;
}

/* "2026-12-07T21:55:25.557296+00:00" -> "2026-12-07 21:55:25" */
static const char *stamp(struct json_object *o, const char *k, char *buf, size_t len)
{
	if (!field(o, k, buf, len))
		return NULL;
	if (strlen(buf) >= 19) {
		buf[10] = ' ';
		buf[19] = '\0';
	}
	return buf;
}

static int do_jobs(PGconn *c, const struct lopts *o)
{
	char limit[16], *raw = NULL;
	const char *text, *params[5];
	int n = 0;

	snprintf(limit, sizeof limit, "%u", o->limit);
	if (o->state && strcmp(o->state, "queued") != 0)
		params[n++] = o->state;
	params[n++] = o->service;
	params[n++] = o->since;
	params[n++] = o->after;
	params[n++] = limit;
	if (!o->state)
		text = DQ_LIST_JOBS;
	else if (strcmp(o->state, "queued") == 0)
		text = DQ_LIST_QUEUED;
	else if (strcmp(o->state, "claimed") == 0 || strcmp(o->state, "running") == 0)
		text = DQ_LIST_HELD;
	else
		text = DQ_LIST_FINISHED;
	struct json_object *a = ask(c, o, text, n, params, &raw);
	if (!a) {
		free(raw);
		return EXECCTL_FAILED;
	}
	size_t rows = json_object_array_length(a);
	if (o->json) {
		printf("%s\n", raw);
	} else {
		static const char *const head[] = { "id",       "service",  "state",
						    "priority", "attempts", "created",
						    "finished", "runner",   "error" };
		struct table *t = table_new(9, head, 0x1e6);
		for (size_t i = 0; t && i < rows; i++) {
			struct json_object *j = json_object_array_get_idx(a, i);
			char b[9][256];
			const char *cells[9] = {
				field(j, "id", b[0], 256),
				field(j, "service", b[1], 256),
				field(j, "state", b[2], 256),
				field(j, "priority", b[3], 256),
				field(j, "attempts", b[4], 256),
				stamp(j, "created_at", b[5], 256),
				stamp(j, "finished_at", b[6], 256),
				field(j, "runner_instance", b[7], 256),
				field(j, "error", b[8], 256),
			};
			table_add(t, cells);
		}
		if (t)
			table_print(t, stdout);
		table_free(t);
		if (rows == o->limit) {
			char id[32];
			field(json_object_array_get_idx(a, rows - 1), "id", id, sizeof id);
			printf("next: --after %s\n", id);
		}
	}
	free(raw);
	json_object_put(a);
	return EXECCTL_OK;
}

static const char *ms_text(struct json_object *o, const char *k, char *buf, size_t len)
{
	struct json_object *v;
	if (!json_object_object_get_ex(o, k, &v) || !v)
		return NULL;
	long long ms = json_object_get_int64(v);
	if (ms < 10000)
		snprintf(buf, len, "%lld ms", ms);
	else
		snprintf(buf, len, "%.1f s", ms / 1000.0);
	return buf;
}

static int do_stats(PGconn *c, const struct lopts *o)
{
	char *raw = NULL, *raw2 = NULL;
	struct json_object *a = ask(c, o, DQ_STATS, 0, NULL, &raw);
	struct json_object *s = a ? ask(c, o, DQ_STATE_COUNTS, 0, NULL, &raw2) : NULL;
	int rc = a && s ? EXECCTL_OK : EXECCTL_FAILED;

	if (rc == EXECCTL_OK && o->json) {
		printf("{\"services\": %s, \"states\": %s}\n", raw, raw2);
	} else if (rc == EXECCTL_OK) {
		static const char *const head[] = { "service",  "queued",   "claimed", "running",
						    "done/h",   "failed/h", "oldest",  "wait p50",
						    "wait p95", "run p50",  "run p95" };
		static const char *const keys[] = {
			"service", "queued",         "claimed",
			"running", "done_last_hour", "failed_last_hour"
		};
		static const char *const ms[] = { "oldest_queued_ms", "wait_p50_ms", "wait_p95_ms",
						  "run_p50_ms", "run_p95_ms" };
		struct table *t = table_new(11, head, 0);
		for (size_t i = 0; t && i < json_object_array_length(a); i++) {
			struct json_object *j = json_object_array_get_idx(a, i);
			char b[11][128];
			const char *cells[11];
			for (int k = 0; k < 6; k++)
				cells[k] = field(j, keys[k], b[k], 128);
			for (int k = 0; k < 5; k++)
				cells[6 + k] = ms_text(j, ms[k], b[6 + k], 128);
			table_add(t, cells);
		}
		if (t)
			table_print(t, stdout);
		table_free(t);
		printf("\n");
		static const char *const head2[] = { "state", "rows", "" };
		t = table_new(3, head2, 0x4);
		for (size_t i = 0; t && i < json_object_array_length(s); i++) {
			struct json_object *j = json_object_array_get_idx(s, i), *v;
			char b[2][64];
			int est = json_object_object_get_ex(j, "estimated", &v) &&
				  json_object_get_boolean(v);
			const char *cells[3] = { field(j, "state", b[0], 64),
						 field(j, "rows", b[1], 64),
						 est ? "estimated" : "" };
			table_add(t, cells);
		}
		if (t)
			table_print(t, stdout);
		table_free(t);
		printf("(finished and failed per hour: the last hour; percentiles: the jobs "
		       "finished in the last hour, at most the 10,000 newest)\n");
	}
	free(raw);
	free(raw2);
	json_object_put(a);
	json_object_put(s);
	return rc;
}

int cli_listing_main(int argc, char **argv)
{
	struct lopts o;
	char err[512];
	int rc = parse(argc, argv, &o, err, sizeof err);

	if (rc != CLI_PARSED) {
		if (rc == CLI_BAD)
			fprintf(stderr, "execctl: %s\n(execctl %s --help for the options)\n", err,
				argv[0]);
		lopts_free(&o);
		return rc == CLI_HELP ? EXECCTL_OK : EXECCTL_USAGE;
	}
	PGconn *c = PQconnectdb(o.conninfo);
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "execctl: cannot connect to the database: %s", PQerrorMessage(c));
		rc = EXECCTL_UNREACHABLE;
	} else {
		rc = strcmp(argv[0], "jobs") == 0 ? do_jobs(c, &o) : do_stats(c, &o);
	}
	PQfinish(c);
	lopts_free(&o);
	return rc;
}

int cli_is_listing_command(const char *cmd)
{
	return strcmp(cmd, "jobs") == 0 || strcmp(cmd, "stats") == 0;
}
