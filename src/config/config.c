/*
 * config.c - the execserver schema: defaults, loading, validation, lookups.
 * See config.h and execserver.yml(5).
 *
 * Owns: what each key of execserver.yml means and which values it takes.
 * Generic YAML handling (tree, positions, typed getters, duplicate keys) is
 * in config_yaml.c.
 *
 * Loading is two passes over the YAML tree:
 *  1. every mapping is walked in document order; each key is checked for its
 *     type and range as it is met, so the first error in the file wins;
 *  2. cross references (service -> waitgroup, service command -> common
 *     command) and checks between keys (pingTimeoutSec > pingIntervalSec)
 *     are resolved once everything has been read.  Without a `waitgroups`
 *     block the configuration is auto-balanced: pass 2 makes the one pool
 *     (CONFIG_AUTO_POOL; the arithmetic is in config_auto.c) and resolves
 *     cpus, fastReserve and unknownShare against it; with the block, the
 *     auto-balance keys (struct topkey's auto_balance flag) are an error.
 * Every allocation goes into the es_config at once, so config_free() cleans
 * up after an error at any point.
 */
#include "autoconfig.h"
#include "config/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <regex.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "config/config_auto.h"
#include "config/config_yaml.h"
#include "config/duration.h"

#define CONFIG_MAX_FILE_BYTES (16 * 1024 * 1024)
#define WHAT_MAX 320 /* "services.<name>.commands.<name>.startupCheck.args[n]" */
#define NAME_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"

/* Flags of what a service command entry gave itself (the rest may be
 * inherited from the common command of the same name). */
enum {
	GIVEN_PROG = 1,
	GIVEN_ARGS = 2,
	GIVEN_ENV = 4,
	GIVEN_CHECK = 8,
};

/* What pass 2 needs of each service besides the es_config itself. */
struct service_extra {
	const struct cy_node *wg_node; /* the `waitgroup` value */
	unsigned char *given;          /* per command, GIVEN_* */
};

struct loader {
	struct cy_ctx cy;
	struct es_config *cfg;
	const struct cy_node *block;      /* the execserver mapping */
	const struct cy_node *block_at;   /* where "missing key" errors point */
	const struct cy_node *waitgroups; /* NULL if the key is absent */
	const struct cy_node *ping_interval, *ping_timeout;
	const struct cy_node *max_wants, *max_wants_per_conn;
	const struct cy_node *ab_key;       /* first auto-balance key, or NULL */
	const struct cy_node *fast_reserve; /* its value, or NULL */
	struct config_share unknown_share;  /* exact; cfg->unknown_share shows it */
	struct service_extra *extra;        /* one per cfg->services */
};

/* ---- defaults ---- */

/* The defaults; -1 if a string could not be allocated (cfg then holds what
 * was, for config_free). */
static int set_defaults(struct es_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->job_removal_policy = JOB_REMOVAL_DONE;
	cfg->janitor_file_age_ms = 24 * 3600 * INT64_C(1000);
	cfg->job_limits.nice = CONFIG_JOB_NICE_DEFAULT;
	cfg->handlers = 0;
	cfg->offer_timeout_sec = 10;
	cfg->resume_grace_sec = 30;
	cfg->broker = 1;
	cfg->legacy_token = 1;
	cfg->legacy_token_validity_sec = 10;
	cfg->job_log = 1;
	cfg->console_enabled = -1;
	cfg->drain_timeout_sec = 20;
	cfg->ping_interval_sec = 15;
	cfg->ping_timeout_sec = 45;
	cfg->max_connections = 4096;
	cfg->max_wants = 65536;
	cfg->max_wants_per_connection = 4096;
	cfg->max_frame_bytes = 1024 * 1024;
	cfg->handshake_timeout_sec = 10;
	cfg->log_level = LOG_LVL_INFO;
	cfg->heavy_threshold_ms = 10000;
	cfg->unknown_share = config_share_value(CONFIG_SHARE_DEFAULT);
	cfg->min_samples = 3;
	cfg->addr = strdup("127.0.0.1:8083");
	cfg->temp_dir = strdup("/var/lib/execserver");
	cfg->pid_file = strdup("/run/execserver.pid");
	return cfg->addr && cfg->temp_dir && cfg->pid_file ? 0 : -1;
}

/* Out of memory for three short strings at startup: nothing sensible is
 * left to do, and the caller has no error channel here. */
void config_defaults(struct es_config *cfg)
{
	if (set_defaults(cfg) < 0) {
		fputs("execserver: out of memory\n", stderr);
		abort();
	}
}

/* ---- freeing ---- */

static void command_free(struct config_command *cmd)
{
	free(cmd->name);
	free(cmd->prog);
	strlist_free(&cmd->args);
	strlist_free(&cmd->env);
	strlist_free(&cmd->startup_check.args);
	free(cmd->startup_check.regex);
	memset(cmd, 0, sizeof *cmd);
}

static void commands_free(struct config_command *cmds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		command_free(&cmds[i]);
	free(cmds);
}

void config_free(struct es_config *cfg)
{
	free(cfg->file);
	free(cfg->addr);
	free(cfg->temp_dir);
	strlist_free(&cfg->env);
	commands_free(cfg->commands, cfg->ncommands);
	for (size_t i = 0; i < cfg->nwaitgroups; i++)
		free(cfg->waitgroups[i].name);
	free(cfg->waitgroups);
	for (size_t i = 0; i < cfg->nservices; i++) {
		free(cfg->services[i].name);
		free(cfg->services[i].waitgroup);
		commands_free(cfg->services[i].commands, cfg->services[i].ncommands);
	}
	free(cfg->services);
	addr_rules_free(&cfg->callback_allow);
	addr_rules_free(&cfg->trusted_proxies);
	free(cfg->auth_token);
	free(cfg->instance_id);
	free(cfg->user);
	free(cfg->group);
	free(cfg->pid_file);
	free(cfg->tls_cert);
	free(cfg->tls_key);
	memset(cfg, 0, sizeof *cfg);
}

/* ---- value checks ---- */

/* dst = a "." b, cut short to fit (names are at most CONFIG_NAME_MAX). */
static void path_join(char *dst, size_t n, const char *a, const char *b)
{
	size_t la = strnlen(a, n - 1), lb;

	memcpy(dst, a, la);
	if (la + 1 < n)
		dst[la++] = '.';
	lb = strnlen(b, n - 1 - la);
	memcpy(dst + la, b, lb);
	dst[la + lb] = '\0';
}

static int oom(struct loader *ld)
{
	return cy_error_at(&ld->cy, 0, 0, "out of memory");
}

/* Names of waitgroups, services and commands: 1..CONFIG_NAME_MAX of [A-Za-z0-9_.-]. */
static int check_name(struct loader *ld, const struct cy_node *key, const char *what)
{
	char q[64];

	if (key->len >= 1 && key->len <= CONFIG_NAME_MAX &&
	    strspn(key->value, NAME_CHARS) == key->len)
		return 0;
	return cy_error(&ld->cy, key,
			"%s: invalid name %s: use 1 to %d of the characters "
			"A-Z a-z 0-9 _ . -",
			what, cy_quote(key, q, sizeof q), CONFIG_NAME_MAX);
}

static int env_name_len(const char *entry)
{
	const char *eq = strchr(entry, '=');
	size_t n;

	if (!eq || eq == entry)
		return -1;
	n = (size_t)(eq - entry);
	if (entry[0] >= '0' && entry[0] <= '9')
		return -1;
	if (strspn(entry, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") != n)
		return -1;
	return (int)n;
}

/* A list of K=V: K a valid environment name, each K at most once. */
static int get_env(struct loader *ld, const struct cy_node *node, const char *what,
		   struct strlist *out)
{
	if (cy_get_strlist(&ld->cy, node, what, out) < 0)
		return -1;
	for (size_t i = 0; i < out->count; i++) {
		const struct cy_node *item = node->kids[i];
		char q[64];
		int n = env_name_len(out->items[i]);

		if (n < 0)
			return cy_error(&ld->cy, item,
					"%s[%zu]: invalid environment entry %s: "
					"expected NAME=value with NAME of A-Z a-z 0-9 _ not "
					"starting with a digit",
					what, i, cy_quote(item, q, sizeof q));
		for (size_t j = 0; j < i; j++)
			if (strncmp(out->items[j], out->items[i], (size_t)n + 1) == 0)
				return cy_error(&ld->cy, item,
						"%s[%zu]: duplicate environment "
						"name %.*s (first at line %d column %d)",
						what, i, n, out->items[i], node->kids[j]->line,
						node->kids[j]->column);
	}
	return 0;
}

static int get_int(struct loader *ld, const struct cy_node *node, const char *what, long long min,
		   long long max, int *out)
{
	long long v;

	if (cy_get_int(&ld->cy, node, what, min, max, &v) < 0)
		return -1;
	*out = (int)v;
	return 0;
}

static int get_abs_path(struct loader *ld, const struct cy_node *node, const char *what, char **out)
{
	char *s;

	if (cy_get_string(&ld->cy, node, what, &s) < 0)
		return -1;
	if (s[0] != '/') {
		char q[64];
		free(s);
		return cy_error(&ld->cy, node, "%s: %s is not an absolute path", what,
				cy_quote(node, q, sizeof q));
	}
	free(*out);
	*out = s;
	return 0;
}

/* An optional non-empty string: null leaves *out NULL. */
static int get_opt_string(struct loader *ld, const struct cy_node *node, const char *what,
			  char **out)
{
	char *s;

	if (cy_is_null(node))
		return 0;
	if (cy_get_string(&ld->cy, node, what, &s) < 0)
		return -1;
	if (s[0] == '\0') {
		free(s);
		return cy_error(&ld->cy, node, "%s: must not be empty (leave the key out instead)",
				what);
	}
	*out = s;
	return 0;
}

int config_addr_split(const char *addr, char *host, size_t hostlen, int *port, const char **why)
{
	const char *colon = strrchr(addr, ':'), *h = addr, *p;
	size_t hl;
	long v = 0;
	const char *dummy;

	if (!why)
		why = &dummy;
	if (!colon) {
		*why = "expected host:port (or :port for all interfaces)";
		return -1;
	}
	p = colon + 1;
	if (*p == '\0' || strlen(p) > 5 || strspn(p, "0123456789") != strlen(p)) {
		*why = "the port must be a number in 0..65535";
		return -1;
	}
	for (; *p; p++)
		v = v * 10 + (*p - '0');
	if (v > 65535) {
		*why = "the port must be a number in 0..65535";
		return -1;
	}
	hl = (size_t)(colon - addr);
	if (hl > 0 && addr[0] == '[') {
		if (addr[hl - 1] != ']' || hl < 3) {
			*why = "an IPv6 host must be written as [address]:port";
			return -1;
		}
		const char *zone;
		size_t al;

		h = addr + 1;
		hl -= 2;
		zone = memchr(h, '%', hl); /* fe80::1%eth0 */
		al = zone ? (size_t)(zone - h) : hl;
		if (al == 0 || strspn(h, "0123456789abcdefABCDEF:.") < al ||
		    (zone && (al + 1 == hl || strspn(zone + 1, NAME_CHARS) < hl - al - 1))) {
			*why = "invalid IPv6 address";
			return -1;
		}
	} else if (strspn(addr, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				"0123456789.-_") < hl) {
		*why = memchr(addr, ':', hl) ? "an IPv6 host must be written as [address]:port"
					     : "invalid character in the host name";
		return -1;
	}
	if (hl >= hostlen) {
		*why = "the host name is too long";
		return -1;
	}
	memcpy(host, h, hl);
	host[hl] = '\0';
	*port = (int)v;
	return 0;
}

/* ---- commands ---- */

static int parse_startup_check(struct loader *ld, const struct cy_node *node, const char *what,
			       struct config_startup_check *sc)
{
	static const char *const keys[] = { "args", "regex", NULL };
	char sub[WHAT_MAX];

	sc->present = 1;
	if (cy_is_null(node))
		return 0;
	if (cy_expect(&ld->cy, node, CY_MAPPING, what) < 0)
		return -1;
	for (size_t i = 0; i < cy_map_size(node); i++) {
		const struct cy_node *k = cy_map_key(node, i), *v = cy_map_value(node, i);

		path_join(sub, sizeof sub, what, k->value);
		if (cy_key_is(k, "args")) {
			if (cy_get_strlist(&ld->cy, v, sub, &sc->args) < 0)
				return -1;
		} else if (cy_key_is(k, "regex")) {
			regex_t re;
			int rc;
			if (cy_get_string(&ld->cy, v, sub, &sc->regex) < 0)
				return -1;
			rc = regcomp(&re, sc->regex, REG_EXTENDED | REG_NOSUB | REG_NEWLINE);
			if (rc != 0) {
				char msg[128];
				regerror(rc, &re, msg, sizeof msg);
				return cy_error(&ld->cy, v, "%s: invalid regular expression: %s",
						sub, msg);
			}
			regfree(&re);
		} else {
			return cy_unknown_key(&ld->cy, k, what, keys);
		}
	}
	return 0;
}

/* One command entry; `key` is its name.  *given collects GIVEN_*. */
static int parse_command(struct loader *ld, const struct cy_node *key, const struct cy_node *body,
			 const char *what, struct config_command *cmd, unsigned char *given)
{
	static const char *const keys[] = { "prog", "args", "env", "startupCheck", NULL };
	char sub[WHAT_MAX];

	*given = 0;
	cmd->line = key->line;
	cmd->column = key->column;
	cmd->name = strdup(key->value);
	if (!cmd->name)
		return oom(ld);
	if (cy_is_null(body))
		return 0; /* "name:" alone: everything inherited */
	if (cy_expect(&ld->cy, body, CY_MAPPING, what) < 0)
		return -1;
	for (size_t i = 0; i < cy_map_size(body); i++) {
		const struct cy_node *k = cy_map_key(body, i), *v = cy_map_value(body, i);

		path_join(sub, sizeof sub, what, k->value);
		if (cy_key_is(k, "prog")) {
			char q[64];
			if (cy_get_string(&ld->cy, v, sub, &cmd->prog) < 0)
				return -1;
			if (cmd->prog[0] == '\0')
				return cy_error(&ld->cy, v, "%s: must not be empty", sub);
			if (strchr(cmd->prog, '/') && cmd->prog[0] != '/')
				return cy_error(&ld->cy, v,
						"%s: %s must be a program name (looked "
						"up in PATH) or an absolute path",
						sub, cy_quote(v, q, sizeof q));
			*given |= GIVEN_PROG;
		} else if (cy_key_is(k, "args")) {
			if (cy_get_strlist(&ld->cy, v, sub, &cmd->args) < 0)
				return -1;
			*given |= GIVEN_ARGS;
		} else if (cy_key_is(k, "env")) {
			if (get_env(ld, v, sub, &cmd->env) < 0)
				return -1;
			*given |= GIVEN_ENV;
		} else if (cy_key_is(k, "startupCheck")) {
			if (parse_startup_check(ld, v, sub, &cmd->startup_check) < 0)
				return -1;
			*given |= GIVEN_CHECK;
		} else {
			return cy_unknown_key(&ld->cy, k, what, keys);
		}
	}
	return 0;
}

/* A mapping name -> command, into a fresh array; `common` requires prog. */
static int parse_commands(struct loader *ld, const struct cy_node *node, const char *what,
			  struct config_command **out, size_t *nout, unsigned char **given,
			  int common)
{
	size_t n;
	unsigned char dummy;

	if (cy_is_null(node) && common)
		return 0;
	if (cy_expect(&ld->cy, node, CY_MAPPING, what) < 0)
		return -1;
	n = cy_map_size(node);
	if (n == 0)
		return common ? 0 : cy_error(&ld->cy, node, "%s: no commands defined", what);
	*out = calloc(n, sizeof **out);
	if (!*out)
		return oom(ld);
	if (given) {
		*given = calloc(n, 1);
		if (!*given)
			return oom(ld);
	}
	for (size_t i = 0; i < n; i++) {
		const struct cy_node *k = cy_map_key(node, i), *v = cy_map_value(node, i);
		char sub[WHAT_MAX];
		unsigned char *g = given ? &(*given)[i] : &dummy;

		if (check_name(ld, k, what) < 0)
			return -1;
		path_join(sub, sizeof sub, what, k->value);
		(*nout)++;
		if (parse_command(ld, k, v, sub, &(*out)[i], g) < 0)
			return -1;
		if (common && !((*out)[i].prog))
			return cy_error(&ld->cy, k, "%s: missing required key \"prog\"", sub);
	}
	return 0;
}

/* ---- waitgroups and services ---- */

static int parse_waitgroups(struct loader *ld, const struct cy_node *node)
{
	struct es_config *cfg = ld->cfg;
	size_t n;

	ld->waitgroups = node;
	if (cy_is_null(node))
		return 0;
	if (cy_expect(&ld->cy, node, CY_MAPPING, "waitgroups") < 0)
		return -1;
	n = cy_map_size(node);
	if (n == 0)
		return 0;
	if (n > CONFIG_MAX_WAITGROUPS)
		return cy_error(&ld->cy, cy_map_key(node, CONFIG_MAX_WAITGROUPS),
				"waitgroups: too many waitgroups (at most %d)",
				CONFIG_MAX_WAITGROUPS);
	cfg->waitgroups = calloc(n, sizeof *cfg->waitgroups);
	if (!cfg->waitgroups)
		return oom(ld);
	for (size_t i = 0; i < n; i++) {
		static const char *const keys[] = { "processes", NULL };
		const struct cy_node *k = cy_map_key(node, i), *v = cy_map_value(node, i);
		struct config_waitgroup *wg = &cfg->waitgroups[i];
		char what[WHAT_MAX], sub[WHAT_MAX];
		int have_processes = 0;

		if (check_name(ld, k, "waitgroups") < 0)
			return -1;
		snprintf(what, sizeof what, "waitgroups.%s", k->value);
		wg->name = strdup(k->value);
		if (!wg->name)
			return oom(ld);
		cfg->nwaitgroups++;
		wg->line = k->line;
		wg->column = k->column;
		if (cy_expect(&ld->cy, v, CY_MAPPING, what) < 0)
			return -1;
		for (size_t j = 0; j < cy_map_size(v); j++) {
			const struct cy_node *wk = cy_map_key(v, j), *wv = cy_map_value(v, j);
			path_join(sub, sizeof sub, what, wk->value);
			if (!cy_key_is(wk, "processes"))
				return cy_unknown_key(&ld->cy, wk, what, keys);
			if (get_int(ld, wv, sub, 1, CONFIG_MAX_PROCESSES, &wg->processes) < 0)
				return -1;
			have_processes = 1;
		}
		if (!have_processes)
			return cy_error(&ld->cy, k, "%s: missing required key \"processes\"", what);
	}
	return 0;
}

static int parse_service(struct loader *ld, const struct cy_node *key, const struct cy_node *body,
			 struct config_service *svc, struct service_extra *extra)
{
	static const char *const keys[] = { "waitgroup", "commands", NULL };
	char what[WHAT_MAX], sub[WHAT_MAX];
	int have_commands = 0;

	snprintf(what, sizeof what, "services.%s", key->value);
	svc->line = key->line;
	svc->column = key->column;
	svc->wg_index = -1;
	svc->enabled = 1;
	svc->name = strdup(key->value);
	if (!svc->name)
		return oom(ld);
	if (cy_expect(&ld->cy, body, CY_MAPPING, what) < 0)
		return -1;
	for (size_t i = 0; i < cy_map_size(body); i++) {
		const struct cy_node *k = cy_map_key(body, i), *v = cy_map_value(body, i);

		path_join(sub, sizeof sub, what, k->value);
		if (cy_key_is(k, "waitgroup")) {
			if (cy_get_string(&ld->cy, v, sub, &svc->waitgroup) < 0)
				return -1;
			extra->wg_node = v;
		} else if (cy_key_is(k, "commands")) {
			if (parse_commands(ld, v, sub, &svc->commands, &svc->ncommands,
					   &extra->given, 0) < 0)
				return -1;
			have_commands = 1;
		} else {
			return cy_unknown_key(&ld->cy, k, what, keys);
		}
	}
	/* A later issue lets a service without a waitgroup be balanced
	 * automatically; until then the key is required (see resolve_services). */
	if (!have_commands)
		return cy_error(&ld->cy, key, "%s: missing required key \"commands\"", what);
	return 0;
}

static int parse_services(struct loader *ld, const struct cy_node *node)
{
	struct es_config *cfg = ld->cfg;
	size_t n;

	if (cy_is_null(node))
		return 0;
	if (cy_expect(&ld->cy, node, CY_MAPPING, "services") < 0)
		return -1;
	n = cy_map_size(node);
	if (n == 0)
		return 0;
	if (n > CONFIG_MAX_SERVICES)
		return cy_error(&ld->cy, cy_map_key(node, CONFIG_MAX_SERVICES),
				"services: too many services (at most %d)", CONFIG_MAX_SERVICES);
	cfg->services = calloc(n, sizeof *cfg->services);
	ld->extra = calloc(n, sizeof *ld->extra);
	if (!cfg->services || !ld->extra)
		return oom(ld);
	for (size_t i = 0; i < n; i++) {
		const struct cy_node *k = cy_map_key(node, i);

		if (check_name(ld, k, "services") < 0)
			return -1;
		cfg->nservices++;
		if (parse_service(ld, k, cy_map_value(node, i), &cfg->services[i], &ld->extra[i]) <
		    0)
			return -1;
	}
	return 0;
}

/* ---- the top level ---- */

struct topkey;
typedef int (*topkey_fn)(struct loader *ld, const struct topkey *tk, const struct cy_node *v);

struct topkey {
	const char *name;
	topkey_fn fn;
	size_t off;         /* int fields: offset in es_config */
	long long min, max; /* int fields: range */
	int auto_balance;   /* 1: only without a waitgroups block */
};

static int top_int(struct loader *ld, const struct topkey *tk, const struct cy_node *v)
{
	return get_int(ld, v, tk->name, tk->min, tk->max, (int *)((char *)ld->cfg + tk->off));
}

static int top_addr(struct loader *ld, const struct topkey *tk, const struct cy_node *v)
{
	char host[256], q[64];
	const char *why;
	int port;
	char *s;

	if (cy_get_string(&ld->cy, v, tk->name, &s) < 0)
		return -1;
	if (config_addr_split(s, host, sizeof host, &port, &why) < 0) {
		free(s);
		return cy_error(&ld->cy, v, "%s: invalid address %s: %s", tk->name,
				cy_quote(v, q, sizeof q), why);
	}
	free(ld->cfg->addr);
	ld->cfg->addr = s;
	return 0;
}

static int top_temp_dir(struct loader *ld, const struct topkey *tk, const struct cy_node *v)
{
	return get_abs_path(ld, v, tk->name, &ld->cfg->temp_dir);
}

static int top_pid_file(struct loader *ld, const struct topkey *tk, const struct cy_node *v)
{
	return get_abs_path(ld, v, tk->name, &ld->cfg->pid_file);
}

static int top_policy(struct loader *ld, const struct topkey *tk, const struct cy_node *v)
{
	static const char *const names[] = { "none", "done", "all" };
	char q[64];

	if (cy_expect(&ld->cy, v, CY_SCALAR, tk->name) < 0)
		return -1;
	for (int i = 0; i < 3; i++)
		if (cy_key_is(v, names[i])) {
			ld->cfg->job_removal_policy = (enum job_removal_policy)i;
			return 0;
		}
	return cy_error(&ld->cy, v, "%s: invalid value %s: expected none, done or all", tk->name,
			cy_quote(v, q, sizeof q));
}

static int top_janitor(struct loader *ld, const struct topkey *tk, const struct cy_node *v)
{
	return cy_get_duration_ms(&ld->cy, v, tk->name, 1000, 87600 * 3600 * INT64_C(1000),
				  &ld->cfg->janitor_file_age_ms);
}

static int top_env(struct loader *ld, const struct topkey *tk, const struct cy_node *v)
{
	return get_env(ld, v, tk->name, &ld->cfg->env);
}

static int top_commands(struct loader *ld, const struct topkey *tk, const struct cy_node *v)
{
	return parse_commands(ld, v, tk->name, &ld->cfg->commands, &ld->cfg->ncommands, NULL, 1);
}

static int top_waitgroups(struct loader *ld, const struct topkey *tk, const struct cy_node *v)
{
	return parse_waitgroups(ld, v);
}

static int top_services(struct loader *ld, const struct topkey *tk, const struct cy_node *v)
{
	return parse_services(ld, v);
}

static int top_heavy_threshold(struct loader *ld, const struct topkey *tk, const struct cy_node *v)
{
	return cy_get_duration_ms(&ld->cy, v, tk->name, 1, 7 * 24 * 3600 * INT64_C(1000),
				  &ld->cfg->heavy_threshold_ms);
}

/* A plain decimal number in (0, 1], kept exact (config_auto.h). */
static int top_unknown_share(struct loader *ld, const struct topkey *tk, const struct cy_node *v)
{
	char q[64];

	if (cy_expect(&ld->cy, v, CY_SCALAR, tk->name) < 0)
		return -1;
	if (config_share_parse(v->value, v->len, &ld->unknown_share) < 0)
		return cy_error(&ld->cy, v,
				"%s: invalid value %s: expected a number above 0 and at "
				"most 1 (the share of the pool, like 0.5; at most %d digits after "
				"the point)",
				tk->name, cy_quote(v, q, sizeof q), CONFIG_SHARE_MAX_DIGITS);
	ld->cfg->unknown_share = config_share_value(ld->unknown_share);
	return 0;
}

static int top_auth_token(struct loader *ld, const struct topkey *tk, const struct cy_node *v)
{
	if (get_opt_string(ld, v, tk->name, &ld->cfg->auth_token) < 0)
		return -1;
	for (const char *p = ld->cfg->auth_token; p && *p; p++)
		if (*p < 0x21 || *p > 0x7e)
			return cy_error(&ld->cy, v,
					"%s: only visible ASCII characters (no spaces) "
					"are allowed in a token",
					tk->name);
	return 0;
}

/* instanceId: 1 to 64 of [A-Za-z0-9_.-] (it goes into URLs unescaped). */
static int top_instance_id(struct loader *ld, const struct topkey *tk, const struct cy_node *v)
{
	char q[80];
	if (get_opt_string(ld, v, tk->name, &ld->cfg->instance_id) < 0)
		return -1;
	const char *id = ld->cfg->instance_id;
	if (id && strlen(id) > CONFIG_INSTANCE_ID_MAX)
		return cy_error(&ld->cy, v, "%s: %s is longer than %d characters", tk->name,
				cy_quote(v, q, sizeof q), CONFIG_INSTANCE_ID_MAX);
	for (const char *p = id; p && *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' || *p == '-'))
			return cy_error(&ld->cy, v,
					"%s: %s: only letters, digits, '_', '.' and "
					"'-' are allowed",
					tk->name, cy_quote(v, q, sizeof q));
	return 0;
}

static int top_user(struct loader *ld, const struct topkey *tk, const struct cy_node *v)
{
	ld->cfg->user_line = v->line;
	ld->cfg->user_column = v->column;
	return get_opt_string(ld, v, tk->name, &ld->cfg->user);
}

static int top_group(struct loader *ld, const struct topkey *tk, const struct cy_node *v)
{
	ld->cfg->group_line = v->line;
	ld->cfg->group_column = v->column;
	return get_opt_string(ld, v, tk->name, &ld->cfg->group);
}

static int top_bool(struct loader *ld, const struct topkey *tk, const struct cy_node *v)
{
	return cy_get_bool(&ld->cy, v, tk->name, (int *)((char *)ld->cfg + tk->off));
}

/* A list of address rules (addr_rule.h) into rules; host names only when
 * hosts_too. */
static int get_addr_rules(struct loader *ld, const struct topkey *tk, const struct cy_node *v,
			  struct addr_rules *rules, int hosts_too)
{
	if (cy_is_null(v))
		return 0;
	if (cy_expect(&ld->cy, v, CY_SEQUENCE, tk->name) < 0)
		return -1;
	if (v->nkids > CONFIG_MAX_CALLBACK_ALLOW)
		return cy_error(&ld->cy, v, "%s: at most %d entries", tk->name,
				CONFIG_MAX_CALLBACK_ALLOW);
	rules->items = calloc(v->nkids ? v->nkids : 1, sizeof *rules->items);
	if (!rules->items)
		return oom(ld);
	for (size_t i = 0; i < v->nkids; i++) {
		const struct cy_node *item = v->kids[i];
		char what[64], q[64];
		const char *why;
		char *s;

		snprintf(what, sizeof what, "%s[%zu]", tk->name, i);
		if (cy_get_string(&ld->cy, item, what, &s) < 0)
			return -1;
		int rc = addr_rule_parse(s, &rules->items[i], &why);
		free(s);
		if (rc == 0 && !hosts_too && rules->items[i].kind == ADDR_RULE_HOST)
			return cy_error(&ld->cy, item,
					"%s: %s is not an IP address or CIDR block "
					"(a proxy is known by the address it connects from)",
					what, cy_quote(item, q, sizeof q));
		if (rc == 0 && !hosts_too && rules->items[i].kind == ADDR_RULE_NET &&
		    rules->items[i].prefix == 0)
			return cy_error(&ld->cy, item,
					"%s: %s trusts every address to tell any client address "
					"(list the balancers' own addresses)",
					what, cy_quote(item, q, sizeof q));
		if (rc < 0)
			return cy_error(&ld->cy, item, "%s: %s is not %s: %s", what,
					cy_quote(item, q, sizeof q),
					hosts_too ? "a host name, IP address or CIDR block"
						  : "an IP address or CIDR block",
					why);
		rules->count++;
	}
	return 0;
}

/* callbackAllow: host names, IP addresses and CIDR blocks. */
static int top_callback_allow(struct loader *ld, const struct topkey *tk, const struct cy_node *v)
{
	return get_addr_rules(ld, tk, v, &ld->cfg->callback_allow, 1);
}

/* trustedProxies: IP addresses and CIDR blocks. */
static int top_trusted_proxies(struct loader *ld, const struct topkey *tk, const struct cy_node *v)
{
	return get_addr_rules(ld, tk, v, &ld->cfg->trusted_proxies, 0);
}

static int top_log_level(struct loader *ld, const struct topkey *tk, const struct cy_node *v)
{
	char q[64];
	int level;

	if (cy_expect(&ld->cy, v, CY_SCALAR, tk->name) < 0)
		return -1;
	level = strlen(v->value) == v->len ? log_level_parse(v->value) : -1;
	if (level < 0)
		return cy_error(&ld->cy, v,
				"%s: invalid value %s: expected error, warn, info or "
				"debug",
				tk->name, cy_quote(v, q, sizeof q));
	ld->cfg->log_level = level;
	return 0;
}

static int top_job_limits(struct loader *ld, const struct topkey *tk, const struct cy_node *v)
{
	static const char *const allowed[] = { "cpuSec", "memoryMB", "fileSizeMB", "openFiles",
					       "coreMB", "nice",     NULL };
	static const struct {
		const char *key;
		size_t off;
		long long min, max;
	} fields[] = {
		{ "cpuSec", offsetof(struct config_job_limits, cpu_sec), 1, 31536000 },
		{ "memoryMB", offsetof(struct config_job_limits, memory_mb), 16, 16777216 },
		{ "fileSizeMB", offsetof(struct config_job_limits, file_size_mb), 1, 16777216 },
		{ "openFiles", offsetof(struct config_job_limits, open_files), 16, 1048576 },
		{ "coreMB", offsetof(struct config_job_limits, core_mb), 0, 16777216 },
		{ "nice", offsetof(struct config_job_limits, nice), 0, 19 },
	};
	char what[64];

	if (cy_is_null(v))
		return 0;
	if (cy_expect(&ld->cy, v, CY_MAPPING, tk->name) < 0 ||
	    cy_check_keys(&ld->cy, v, tk->name, allowed) < 0)
		return -1;
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
		const struct cy_node *f = cy_map_find(v, fields[i].key, NULL);
		if (!f)
			continue;
		snprintf(what, sizeof what, "%s.%s", tk->name, fields[i].key);
		long long *out = (long long *)((char *)&ld->cfg->job_limits + fields[i].off);
		if (cy_get_int(&ld->cy, f, what, fields[i].min, fields[i].max, out) < 0)
			return -1;
		if (strcmp(fields[i].key, "coreMB") == 0)
			ld->cfg->job_limits.core_given = 1;
	}
	return 0;
}

/* tls: {cert, key}: both or neither (the files are read at start, by
 * tls_context.c, which names them in its errors). */
static int top_tls(struct loader *ld, const struct topkey *tk, const struct cy_node *v)
{
	static const char *const allowed[] = { "cert", "key", NULL };
	const struct cy_node *cert, *key;

	if (cy_is_null(v))
		return 0;
	if (cy_expect(&ld->cy, v, CY_MAPPING, tk->name) < 0 ||
	    cy_check_keys(&ld->cy, v, tk->name, allowed) < 0)
		return -1;
	cert = cy_map_find(v, "cert", NULL);
	key = cy_map_find(v, "key", NULL);
	if (!cert || !key)
		return cy_error(&ld->cy, v,
				"%s: needs both cert (the certificate chain, PEM) and "
				"key (its private key, PEM)",
				tk->name);
	if (get_opt_string(ld, cert, "tls.cert", &ld->cfg->tls_cert) < 0 ||
	    get_opt_string(ld, key, "tls.key", &ld->cfg->tls_key) < 0)
		return -1;
	return 0;
}

#define INTKEY(name, field, min, max)                                         \
	{                                                                     \
		name, top_int, offsetof(struct es_config, field), min, max, 0 \
	}
#define AB_INTKEY(name, field, min, max)                                      \
	{                                                                     \
		name, top_int, offsetof(struct es_config, field), min, max, 1 \
	}

static const struct topkey topkeys[] = {
	{ "addr", top_addr, 0, 0, 0, 0 },
	{ "tempDir", top_temp_dir, 0, 0, 0, 0 },
	{ "jobRemovalPolicy", top_policy, 0, 0, 0, 0 },
	{ "janitorFileAge", top_janitor, 0, 0, 0, 0 },
	{ "env", top_env, 0, 0, 0, 0 },
	{ "commands", top_commands, 0, 0, 0, 0 },
	{ "waitgroups", top_waitgroups, 0, 0, 0, 0 },
	{ "services", top_services, 0, 0, 0, 0 },
	INTKEY("handlers", handlers, 0, CONFIG_MAX_HANDLERS),
	INTKEY("offerTimeoutSec", offer_timeout_sec, 1, 3600),
	INTKEY("resumeGraceSec", resume_grace_sec, 0, 86400),
	INTKEY("drainTimeoutSec", drain_timeout_sec, 0, 3600),
	INTKEY("pingIntervalSec", ping_interval_sec, 1, 3600),
	INTKEY("pingTimeoutSec", ping_timeout_sec, 2, 86400),
	INTKEY("maxConnections", max_connections, 1, 1048576),
	INTKEY("maxWants", max_wants, 1, 4194304),
	INTKEY("maxWantsPerConnection", max_wants_per_connection, 1, 4194304),
	INTKEY("maxFrameBytes", max_frame_bytes, 1024, 64 * 1024 * 1024),
	INTKEY("handshakeTimeoutSec", handshake_timeout_sec, 1, 3600),
	INTKEY("idleTimeoutSec", idle_timeout_sec, 0, 604800),
	INTKEY("maxJobsPerClient", max_jobs_per_client, 0, 4194304),
	{ "callbackAllow", top_callback_allow, 0, 0, 0, 0 },
	{ "trustedProxies", top_trusted_proxies, 0, 0, 0, 0 },
	{ "allowRootJobs", top_bool, offsetof(struct es_config, allow_root_jobs), 0, 0, 0 },
	{ "authToken", top_auth_token, 0, 0, 0, 0 },
	{ "instanceId", top_instance_id, 0, 0, 0, 0 },
	{ "user", top_user, 0, 0, 0, 0 },
	{ "group", top_group, 0, 0, 0, 0 },
	{ "pidFile", top_pid_file, 0, 0, 0, 0 },
	{ "logLevel", top_log_level, 0, 0, 0, 0 },
	{ "jobLimits", top_job_limits, 0, 0, 0, 0 },
	{ "tls", top_tls, 0, 0, 0, 0 },
	{ "broker", top_bool, offsetof(struct es_config, broker), 0, 0, 0 },
	{ "legacyToken", top_bool, offsetof(struct es_config, legacy_token), 0, 0, 0 },
	{ "jobLog", top_bool, offsetof(struct es_config, job_log), 0, 0, 0 },
	{ "consoleEnabled", top_bool, offsetof(struct es_config, console_enabled), 0, 0, 0 },
	INTKEY("legacyTokenValiditySec", legacy_token_validity_sec, 1, 3600),
	/* auto-balance (no waitgroups block) */
	AB_INTKEY("cpus", cpus, 0, CONFIG_MAX_PROCESSES),
	AB_INTKEY("fastReserve", fast_reserve, 0, CONFIG_MAX_PROCESSES - 1),
	{ "heavyThreshold", top_heavy_threshold, 0, 0, 0, 1 },
	{ "unknownShare", top_unknown_share, 0, 0, 0, 1 },
	AB_INTKEY("minSamples", min_samples, 1, 1000),
};

#define NTOPKEYS (sizeof topkeys / sizeof topkeys[0])

/* Each key appears at most once (cy_parse rejects duplicate keys), so every
 * handler below fills a field that still holds its default. */
static int parse_block(struct loader *ld)
{
	const struct cy_node *block = ld->block;

	for (size_t i = 0; i < cy_map_size(block); i++) {
		const struct cy_node *k = cy_map_key(block, i), *v = cy_map_value(block, i);
		size_t t;

		for (t = 0; t < NTOPKEYS; t++)
			if (cy_key_is(k, topkeys[t].name))
				break;
		if (t == NTOPKEYS) {
			const char *names[NTOPKEYS + 1] = { NULL };
			for (size_t j = 0; j < NTOPKEYS; j++)
				names[j] = topkeys[j].name;
			return cy_unknown_key(&ld->cy, k, "", names);
		}
		if (topkeys[t].fn(ld, &topkeys[t], v) < 0)
			return -1;
		if (cy_key_is(k, "pingIntervalSec"))
			ld->ping_interval = v;
		else if (cy_key_is(k, "pingTimeoutSec"))
			ld->ping_timeout = v;
		else if (cy_key_is(k, "maxWants"))
			ld->max_wants = v;
		else if (cy_key_is(k, "maxWantsPerConnection"))
			ld->max_wants_per_conn = v;
		if (topkeys[t].auto_balance && !ld->ab_key)
			ld->ab_key = k;
		if (cy_key_is(k, "fastReserve"))
			ld->fast_reserve = v;
	}
	return 0;
}

/* ---- pass 2: references and relations ---- */

static const struct config_command *find_common(const struct es_config *cfg, const char *name)
{
	for (size_t i = 0; i < cfg->ncommands; i++)
		if (strcmp(cfg->commands[i].name, name) == 0)
			return &cfg->commands[i];
	return NULL;
}

/* A service command without prog takes prog, and whatever it did not give
 * itself, from the common command of the same name. */
static int inherit(struct loader *ld, const struct config_service *svc, struct config_command *cmd,
		   unsigned char given)
{
	const struct config_command *common;

	if (given & GIVEN_PROG)
		return 0;
	common = find_common(ld->cfg, cmd->name);
	if (!common)
		return cy_error_at(&ld->cy, cmd->line, cmd->column,
				   "services.%s.commands.%s: no "
				   "\"prog\", and no common command \"%s\" under the top-level "
				   "\"commands\" to inherit it from",
				   svc->name, cmd->name, cmd->name);
	cmd->prog = strdup(common->prog);
	if (!cmd->prog)
		return oom(ld);
	if (!(given & GIVEN_ARGS) && strlist_copy(&cmd->args, &common->args) < 0)
		return oom(ld);
	if (!(given & GIVEN_ENV) && strlist_copy(&cmd->env, &common->env) < 0)
		return oom(ld);
	if (!(given & GIVEN_CHECK) && common->startup_check.present) {
		cmd->startup_check.present = 1;
		if (strlist_copy(&cmd->startup_check.args, &common->startup_check.args) < 0)
			return oom(ld);
		if (common->startup_check.regex) {
			cmd->startup_check.regex = strdup(common->startup_check.regex);
			if (!cmd->startup_check.regex)
				return oom(ld);
		}
	}
	return 0;
}

static int resolve_services(struct loader *ld)
{
	struct es_config *cfg = ld->cfg;

	for (size_t i = 0; i < cfg->nservices; i++) {
		struct config_service *svc = &cfg->services[i];
		const struct service_extra *x = &ld->extra[i];
		char q[64];

		if (cfg->auto_balance && svc->waitgroup)
			return cy_error(
				&ld->cy, x->wg_node,
				"services.%s.waitgroup: there is no "
				"\"waitgroups\" block, so all services share one auto-balanced "
				"pool; remove this key, or define the waitgroups",
				svc->name);
		if (cfg->auto_balance) {
			svc->waitgroup = strdup(CONFIG_AUTO_POOL);
			if (!svc->waitgroup)
				return oom(ld);
		}
		if (!svc->waitgroup)
			return cy_error_at(&ld->cy, svc->line, svc->column,
					   "services.%s: missing "
					   "required key \"waitgroup\" (a \"waitgroups\" block is "
					   "defined, so every service names its waitgroup)",
					   svc->name);
		for (size_t w = 0; w < cfg->nwaitgroups; w++)
			if (strcmp(cfg->waitgroups[w].name, svc->waitgroup) == 0)
				svc->wg_index = (int)w;
		if (svc->wg_index < 0)
			return cy_error(&ld->cy, x->wg_node,
					"services.%s.waitgroup: no waitgroup "
					"named %s is defined under \"waitgroups\"",
					svc->name, cy_quote(x->wg_node, q, sizeof q));
		for (size_t c = 0; c < svc->ncommands; c++)
			if (inherit(ld, svc, &svc->commands[c], x->given[c]) < 0)
				return -1;
	}
	return 0;
}

/* No waitgroups block: one pool of cpus (or the CPU count) slots. */
static int make_pool(struct loader *ld)
{
	long pool;
	int rc = config_auto_make_pool(ld->cfg, ld->unknown_share, &pool);
	if (rc == -2)
		return cy_error(&ld->cy, ld->fast_reserve,
				"fastReserve (%d) must be smaller than "
				"the pool (%ld slots%s), or heavy jobs could never run",
				ld->cfg->fast_reserve, pool,
				ld->cfg->cpus ? "" : ": the number of CPUs");
	return rc < 0 ? oom(ld) : 0;
}

/* Whether addr's host is a loopback address (127.0.0.0/8, ::1) or
 * "localhost": then only this machine reaches the port. */
static int addr_is_loopback(const char *addr)
{
	char host[256];
	int port;
	const char *why;
	unsigned char a[16];
	static const unsigned char v6_loopback[16] = { [15] = 1 };
	if (!addr || config_addr_split(addr, host, sizeof host, &port, &why) < 0)
		return 0;
	if (strcmp(host, "localhost") == 0)
		return 1;
	if (inet_pton(AF_INET, host, a) == 1)
		return a[0] == 127;
	return inet_pton(AF_INET6, host, a) == 1 && memcmp(a, v6_loopback, 16) == 0;
}

int config_console_default(const struct es_config *cfg)
{
	return cfg->auth_token || addr_is_loopback(cfg->addr);
}

static int check_relations(struct loader *ld)
{
	const struct es_config *cfg = ld->cfg;

	if (!ld->waitgroups) {
		if (make_pool(ld) < 0)
			return -1;
	} else if (ld->ab_key) {
		return cy_error(&ld->cy, ld->ab_key,
				"%s: an auto-balance key, but the "
				"\"waitgroups\" block turns auto-balance off; remove one of them",
				ld->ab_key->value);
	}
	if (resolve_services(ld) < 0)
		return -1;
	if (cfg->console_enabled < 0) {
		ld->cfg->console_default = 1;
		ld->cfg->console_enabled = config_console_default(cfg);
	}
	if (cfg->ping_timeout_sec <= cfg->ping_interval_sec)
		return cy_error(&ld->cy, ld->ping_timeout ? ld->ping_timeout : ld->ping_interval,
				"pingTimeoutSec (%d) must be greater than pingIntervalSec (%d)",
				cfg->ping_timeout_sec, cfg->ping_interval_sec);
	if (cfg->max_wants_per_connection > cfg->max_wants)
		return cy_error(&ld->cy,
				ld->max_wants_per_conn ? ld->max_wants_per_conn : ld->max_wants,
				"maxWantsPerConnection (%d) must not exceed maxWants (%d)",
				cfg->max_wants_per_connection, cfg->max_wants);
	return 0;
}

/* ---- entry points ---- */

/* Finds the execserver block: the root, or fylr.services.execserver. */
static int find_block(struct loader *ld, const struct cy_node *root)
{
	const struct cy_node *fylr_key, *fylr, *services_key, *services, *block_key, *block;

	ld->block = root;
	ld->block_at = root;
	fylr = cy_map_find(root, "fylr", &fylr_key);
	if (!fylr)
		return 0;
	if (cy_expect(&ld->cy, fylr, CY_MAPPING, "fylr") < 0)
		return -1;
	services = cy_map_find(fylr, "services", &services_key);
	if (!services)
		return cy_error(&ld->cy, fylr_key,
				"fylr: no \"services\" key, so no "
				"fylr.services.execserver block to read");
	if (cy_expect(&ld->cy, services, CY_MAPPING, "fylr.services") < 0)
		return -1;
	block = cy_map_find(services, "execserver", &block_key);
	if (!block)
		return cy_error(&ld->cy, services_key,
				"fylr.services: no \"execserver\" key, "
				"so no fylr.services.execserver block to read");
	if (cy_expect(&ld->cy, block, CY_MAPPING, "fylr.services.execserver") < 0)
		return -1;
	ld->block = block;
	ld->block_at = block_key;
	return 0;
}

int config_load_buffer(const char *name, const char *text, size_t len, struct es_config *cfg,
		       struct config_error *err)
{
	struct loader ld;
	struct cy_node *root = NULL;
	int rc = -1;

	memset(&ld, 0, sizeof ld);
	ld.unknown_share = CONFIG_SHARE_DEFAULT;
	ld.cy.file = name;
	ld.cy.err = err;
	ld.cfg = cfg;
	err->text[0] = '\0';
	if (set_defaults(cfg) == 0)
		cfg->file = strdup(name);
	if (!cfg->file) {
		oom(&ld);
		goto out;
	}
	if (cy_parse(&ld.cy, text, len, &root) < 0)
		goto out;
	if (!root) {
		cy_error_at(&ld.cy, 1, 1,
			    "the file is empty: expected a mapping of configuration "
			    "keys (at least \"services\")");
		goto out;
	}
	if (cy_expect(&ld.cy, root, CY_MAPPING, "the top level") < 0 || find_block(&ld, root) < 0 ||
	    parse_block(&ld) < 0 || check_relations(&ld) < 0)
		goto out;
	cfg->block_line = ld.block_at->line;
	cfg->block_column = ld.block_at->column;
	rc = 0;
out:
	if (ld.extra) {
		for (size_t i = 0; i < cfg->nservices; i++)
			free(ld.extra[i].given);
		free(ld.extra);
	}
	cy_free(root);
	if (rc < 0)
		config_free(cfg);
	return rc;
}

int config_load(const char *path, struct es_config *cfg, struct config_error *err)
{
	struct cy_ctx ctx = { .file = path, .err = err };
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int rc;

	memset(cfg, 0, sizeof *cfg);
	if (!f)
		return cy_error_at(&ctx, 0, 0, "cannot open: %s", strerror(errno));
	for (;;) {
		size_t got;
		if (len == cap) {
			char *nb;
			if (cap >= CONFIG_MAX_FILE_BYTES) {
				fclose(f);
				free(buf);
				return cy_error_at(&ctx, 0, 0, "file larger than %d bytes",
						   CONFIG_MAX_FILE_BYTES);
			}
			cap = cap ? cap * 2 : 16384;
			nb = realloc(buf, cap + 1);
			if (!nb) {
				fclose(f);
				free(buf);
				return cy_error_at(&ctx, 0, 0, "out of memory");
			}
			buf = nb;
		}
		got = fread(buf + len, 1, cap - len, f);
		len += got;
		if (got == 0)
			break;
	}
	if (ferror(f)) {
		fclose(f);
		free(buf);
		return cy_error_at(&ctx, 0, 0, "read error");
	}
	fclose(f);
	rc = config_load_buffer(path, buf ? buf : "", len, cfg, err);
	free(buf);
	return rc;
}

/* ---- lookups ---- */

int config_service_index(const struct es_config *cfg, const char *name)
{
	for (size_t i = 0; i < cfg->nservices; i++)
		if (strcmp(cfg->services[i].name, name) == 0)
			return (int)i;
	return -1;
}

const struct config_service *config_find_service(const struct es_config *cfg, const char *name)
{
	int i = config_service_index(cfg, name);

	return i < 0 ? NULL : &cfg->services[i];
}

const struct config_command *config_find_command(const struct config_service *svc, const char *name)
{
	for (size_t i = 0; i < svc->ncommands; i++)
		if (strcmp(svc->commands[i].name, name) == 0)
			return &svc->commands[i];
	return NULL;
}

int config_effective_handlers(const struct es_config *cfg)
{
	return (int)config_cpu_count(cfg->handlers, CONFIG_MAX_HANDLERS);
}
