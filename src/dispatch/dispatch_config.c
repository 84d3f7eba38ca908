/*
 * dispatch_config.c - see dispatch_config.h.  One flat mapping of keys;
 * each key has one entry in the table below (name, range, where it goes),
 * so the check, the default and the message stay together.
 */
#include "autoconfig.h"
#include "dispatch/dispatch_config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "common/log.h"
#include "config/config_yaml.h"

#define MAX_FILE_BYTES (1 << 20)

struct int_key {
	const char *name;
	long long min, max;
	size_t offset; /* of the int in struct dispatch_config */
};

#define INT_KEY(n, lo, hi, field)                                  \
	{                                                          \
		n, lo, hi, offsetof(struct dispatch_config, field) \
	}
static const struct int_key int_keys[] = {
	INT_KEY("pollMs", 10, 600000, poll_ms),
	INT_KEY("heartbeatSec", 1, 3600, heartbeat_sec),
	INT_KEY("staleAfterSec", 2, 86400, stale_after_sec),
	INT_KEY("cancelPollMs", 0, 600000, cancel_poll_ms),
	INT_KEY("progressWriteSec", 1, 3600, progress_write_sec),
	INT_KEY("maxAttempts", 1, 1000, retry.max_attempts),
	INT_KEY("retryDelaySec", 0, 86400, retry.delay_sec),
	INT_KEY("retryMaxDelaySec", 0, 604800, retry.max_delay_sec),
	INT_KEY("connectTimeoutSec", 0, 86400, connect_timeout_sec),
	INT_KEY("retainDoneDays", 0, 36500, retain_done_days),
	INT_KEY("localSlots", 1, 4096, local_slots),
	INT_KEY("stopTimeoutSec", 1, 86400, stop_timeout_sec),
	INT_KEY("scheduleCheckSec", 1, 3600, schedule_check_sec),
};

static const char *const allowed_keys[] = { "database",
					    "execservers",
					    "authToken",
					    "instanceId",
					    "schema",
					    "logLevel",
					    "pollMs",
					    "heartbeatSec",
					    "staleAfterSec",
					    "cancelPollMs",
					    "progressWriteSec",
					    "maxAttempts",
					    "retryDelaySec",
					    "retryMaxDelaySec",
					    "retryBackoff",
					    "retryExitCodes",
					    "services",
					    "localSlots",
					    "connectTimeoutSec",
					    "retainDoneDays",
					    "stopTimeoutSec",
					    "scheduleCheckSec",
					    "metrics",
					    "notify",
					    "consoleEnabled",
					    NULL };

static void set_defaults(struct dispatch_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->poll_ms = 1000;
	cfg->console_enabled = -1;
	cfg->heartbeat_sec = 5;
	cfg->stale_after_sec = 30;
	cfg->cancel_poll_ms = 1000;
	cfg->progress_write_sec = 5;
	cfg->retry.max_attempts = 3;
	cfg->retry.delay_sec = 60;
	cfg->retry.max_delay_sec = 3600;
	cfg->retry.backoff = RETRY_EXPONENTIAL;
	retry_exit_code_set(&cfg->retry, RETRY_EXIT_TEMPFAIL);
	cfg->connect_timeout_sec = 120;
	cfg->retain_done_days = 7;
	cfg->stop_timeout_sec = 240;
	cfg->schedule_check_sec = 10;
	cfg->log_level = LOG_LVL_INFO;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	cfg->local_slots = cpus > 0 ? (int)cpus : 1;
}

/* An instance id: 1-64 of A-Z a-z 0-9 _ . : - (it is logged and stored). */
/* 1 when metrics ("host:port") listens on a loopback address only. */
static int metrics_on_loopback(const char *metrics)
{
	const char *colon = metrics ? strrchr(metrics, ':') : NULL;
	size_t n = colon ? (size_t)(colon - metrics) : 0;

	if (!colon)
		return 0;
	return (n == 9 && strncmp(metrics, "localhost", 9) == 0) ||
	       (n >= 4 && strncmp(metrics, "127.", 4) == 0) ||
	       (n == 5 && strncmp(metrics, "[::1]", 5) == 0) ||
	       (n == 3 && strncmp(metrics, "::1", 3) == 0);
}

static int instance_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > DISPATCH_INSTANCE_MAX)
		return 0;
	return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-") == n;
}

/* host-pid-random: unique per start, so that a restarted dispatcher never
 * takes over its previous life's claims (they are rescued instead). */
static char *made_instance_id(void)
{
	char host[65] = "host", buf[DISPATCH_INSTANCE_MAX + 1];
	unsigned rnd = 0;
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (read(fd, &rnd, sizeof rnd) != (ssize_t)sizeof rnd)
			rnd = 0;
		close(fd);
	}
	if (gethostname(host, sizeof host - 1) < 0)
		strcpy(host, "host");
	host[strspn(host, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")] =
		'\0';
	host[40] = '\0';
	snprintf(buf, sizeof buf, "%s-%ld-%08x", host[0] ? host : "host", (long)getpid(), rnd);
	return strdup(buf);
}

int dispatch_config_new_instance_id(struct dispatch_config *cfg)
{
	char *id = made_instance_id();

	if (!id)
		return -1;
	free(cfg->instance_id);
	cfg->instance_id = id;
	return 0;
}

int dispatch_schema_ok(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n <= DISPATCH_SCHEMA_MAX && strchr("abcdefghijklmnopqrstuvwxyz_", s[0]) &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

/* The retry keys, at the top level and in a service's entry; each sets
 * its bit in a service's mask (RK_*), the keys left out are taken from
 * the top level once the whole file is read (resolve_services). */
enum {
	RK_MAX = 1,
	RK_DELAY = 2,
	RK_MAX_DELAY = 4,
	RK_BACKOFF = 8,
	RK_CODES = 16
};

/* key is one of the retry keys: parsed into p, its bit into *set; 1 when
 * done, 0 when key is not one of them, -1 on an error (said). */
static int parse_retry_key(const struct cy_ctx *cy, const char *key, const struct cy_node *val,
			   struct retry_policy *p, unsigned *set)
{
	static const struct {
		const char *name;
		unsigned bit;
	} ints[] = { { "maxAttempts", RK_MAX },
		     { "retryDelaySec", RK_DELAY },
		     { "retryMaxDelaySec", RK_MAX_DELAY } };

	for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
		if (strcmp(key, ints[i].name) != 0)
			continue;
		for (size_t k = 0; k < sizeof int_keys / sizeof int_keys[0]; k++) {
			long long v;
			if (strcmp(int_keys[k].name, key) != 0)
				continue;
			if (cy_get_int(cy, val, key, int_keys[k].min, int_keys[k].max, &v) < 0)
				return -1;
			*(int *)((char *)p + int_keys[k].offset -
				 offsetof(struct dispatch_config, retry)) = (int)v;
		}
		*set |= ints[i].bit;
		return 1;
	}
	if (strcmp(key, "retryBackoff") == 0) {
		if (val->type != CY_SCALAR ||
		    (strcmp(val->value, "exponential") != 0 && strcmp(val->value, "fixed") != 0))
			return cy_error(cy, val, "retryBackoff: exponential or fixed is required");
		p->backoff = strcmp(val->value, "fixed") == 0 ? RETRY_FIXED : RETRY_EXPONENTIAL;
		*set |= RK_BACKOFF;
		return 1;
	}
	if (strcmp(key, "retryExitCodes") == 0) {
		if (cy_expect(cy, val, CY_SEQUENCE, "retryExitCodes") < 0)
			return -1;
		memset(p->exit_codes, 0, sizeof p->exit_codes);
		for (size_t i = 0; i < val->nkids; i++) {
			long long v;
			if (cy_get_int(cy, val->kids[i], "retryExitCodes[]", 1, 255, &v) < 0)
				return -1;
			retry_exit_code_set(p, (int)v);
		}
		*set |= RK_CODES;
		return 1;
	}
	return 0;
}

/* A service name as submit() takes it: 1 to 64 of A-Z a-z 0-9 _ . - */
static int service_name_ok(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n <= 64 &&
	       strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

/* The commands of a local service: {CMD: {prog: P, args: [...]}} */
static int parse_commands(const struct cy_ctx *cy, const struct cy_node *name,
			  const struct cy_node *svc, const struct cy_node *cmds,
			  struct dispatch_local_service *ls)
{
	static const char *const cmd_keys[] = { "prog", "args", NULL };

	if (!cmds || cy_expect(cy, cmds, CY_MAPPING, "commands") < 0 || !cy_map_size(cmds))
		return cy_error(cy, cmds ? cmds : svc,
				"services.%s.commands: a mapping of at "
				"least one command is required",
				name->value);
	ls->commands = calloc(cy_map_size(cmds), sizeof *ls->commands);
	if (!ls->commands)
		return cy_error(cy, cmds, "out of memory");
	for (size_t c = 0; c < cy_map_size(cmds); c++) {
		const struct cy_node *cn = cy_map_key(cmds, c), *cv = cy_map_value(cmds, c);
		struct dispatch_local_command *lc = &ls->commands[ls->ncommands++];
		const struct cy_node *prog, *args;
		lc->name = strdup(cn->value);
		if (cy_expect(cy, cv, CY_MAPPING, "commands.<name>") < 0 ||
		    cy_check_keys(cy, cv, "commands.<name>", cmd_keys) < 0)
			return -1;
		prog = cy_map_find(cv, "prog", NULL);
		if (!prog || cy_get_string(cy, prog, "prog", &lc->prog) < 0)
			return prog ? -1 : cy_error(cy, cv, "prog: required");
		if (lc->prog[0] != '/')
			return cy_error(cy, prog, "prog: an absolute path is required");
		args = cy_map_find(cv, "args", NULL);
		if (args && cy_get_strlist(cy, args, "args", &lc->args) < 0)
			return -1;
	}
	return 0;
}

/* services: NAME: {local: true, commands: {...}, maxAttempts: N, retry...}
 * Every entry is a retry policy (retry_services); one with local: true
 * also runs on this host (local), and only such an entry has commands. */
static int parse_services(const struct cy_ctx *cy, const struct cy_node *val,
			  struct dispatch_config *cfg)
{
	static const char *const svc_keys[] = { "local",
						"commands",
						"maxAttempts",
						"retryDelaySec",
						"retryMaxDelaySec",
						"retryBackoff",
						"retryExitCodes",
						NULL };

	if (cy_expect(cy, val, CY_MAPPING, "services") < 0)
		return -1;
	cfg->local = calloc(cy_map_size(val) + 1, sizeof *cfg->local);
	cfg->retry_services = calloc(cy_map_size(val) + 1, sizeof *cfg->retry_services);
	if (!cfg->local || !cfg->retry_services)
		return cy_error(cy, val, "out of memory");
	for (size_t i = 0; i < cy_map_size(val); i++) {
		const struct cy_node *name = cy_map_key(val, i), *svc = cy_map_value(val, i);
		const struct cy_node *local, *cmds;
		struct retry_service *rs = &cfg->retry_services[cfg->nretry];
		int is_local = 0;
		if (!service_name_ok(name->value))
			return cy_error(cy, name,
					"services: a service name is 1 to 64 of A-Z a-z 0-9 _ . - "
					"(got \"%.100s\")",
					name->value);
		if (cy_expect(cy, svc, CY_MAPPING, "services.<name>") < 0 ||
		    cy_check_keys(cy, svc, "services.<name>", svc_keys) < 0)
			return -1;
		rs->name = strdup(name->value);
		if (!rs->name)
			return cy_error(cy, name, "out of memory");
		cfg->nretry++;
		for (size_t k = 0; k < cy_map_size(svc); k++)
			if (parse_retry_key(cy, cy_map_key(svc, k)->value, cy_map_value(svc, k),
					    &rs->p, &rs->set) < 0)
				return -1;
		local = cy_map_find(svc, "local", NULL);
		if (local && cy_get_bool(cy, local, "local", &is_local) < 0)
			return -1;
		cmds = cy_map_find(svc, "commands", NULL);
		if (!is_local) {
			if (cmds)
				return cy_error(cy, cmds,
						"services.%s.commands: only a local service "
						"(local: true) has commands; every other service "
						"runs on the execservers, which configure it",
						name->value);
			continue;
		}
		struct dispatch_local_service *ls = &cfg->local[cfg->nlocal++];
		ls->name = strdup(name->value);
		if (parse_commands(cy, name, svc, cmds, ls) < 0)
			return -1;
	}
	return 0;
}

/* Each service's keys left out taken from the top level; each policy
 * checked (retryMaxDelaySec at least retryDelaySec); the limits for
 * SQL made.  0, or -1 with the error said at the service's entry. */
static int resolve_services(const struct cy_ctx *cy, const struct cy_node *root,
			    struct dispatch_config *cfg)
{
	const struct cy_node *svcs = cy_map_find(root, "services", NULL);

	/* the top level first (i 0), then each service (i - 1) */
	for (size_t i = 0; i <= cfg->nretry; i++) {
		struct retry_service *rs = i ? &cfg->retry_services[i - 1] : NULL;
		struct retry_policy *p = rs ? &rs->p : &cfg->retry;
		const struct cy_node *k = NULL, *at;
		if (rs) {
			if (!(rs->set & RK_MAX))
				p->max_attempts = cfg->retry.max_attempts;
			if (!(rs->set & RK_DELAY))
				p->delay_sec = cfg->retry.delay_sec;
			if (!(rs->set & RK_MAX_DELAY))
				p->max_delay_sec = cfg->retry.max_delay_sec;
			if (!(rs->set & RK_BACKOFF))
				p->backoff = cfg->retry.backoff;
			if (!(rs->set & RK_CODES))
				memcpy(p->exit_codes, cfg->retry.exit_codes, sizeof p->exit_codes);
		}
		if (p->max_delay_sec >= p->delay_sec)
			continue;
		if (rs) {
			cy_map_find(svcs, rs->name, &k);
			at = k ? k : svcs;
		} else {
			at = cy_map_find(root, "retryMaxDelaySec", &k);
			at = at ? at : cy_map_find(root, "retryDelaySec", &k);
			at = at ? at : root;
		}
		return cy_error(cy, at,
				"%s%s: retryMaxDelaySec (%d) must be at least retryDelaySec (%d)",
				rs ? "services." : "the top level", rs ? rs->name : "",
				p->max_delay_sec, p->delay_sec);
	}
	cfg->retry_limits = retry_limits_json(cfg->retry_services, cfg->nretry);
	return cfg->retry_limits ? 0 : cy_error(cy, root, "out of memory");
}

static int parse_key(const struct cy_ctx *cy, const struct cy_node *key, const struct cy_node *val,
		     struct dispatch_config *cfg)
{
	const char *k = key->value;
	unsigned set = 0;
	int rk = parse_retry_key(cy, k, val, &cfg->retry, &set);

	if (rk != 0)
		return rk < 0 ? -1 : 0;
	for (size_t i = 0; i < sizeof int_keys / sizeof int_keys[0]; i++) {
		if (strcmp(k, int_keys[i].name) != 0)
			continue;
		long long v;
		if (cy_get_int(cy, val, k, int_keys[i].min, int_keys[i].max, &v) < 0)
			return -1;
		*(int *)((char *)cfg + int_keys[i].offset) = (int)v;
		return 0;
	}
	if (strcmp(k, "database") == 0) {
		/* libpq's own parser, so that a misspelt keyword ("hots=x")
		 * is said here, with its place, not at each connection */
		char *why = NULL;
		PQconninfoOption *opts;
		if (cy_get_string(cy, val, k, &cfg->database) < 0)
			return -1;
		opts = PQconninfoParse(cfg->database, &why);
		PQconninfoFree(opts);
		if (opts)
			return 0;
		cy_error(cy, val, "database: not a libpq connection string or URI: %.*s",
			 why ? (int)strcspn(why, "\n") : 13, why ? why : "out of memory");
		PQfreemem(why);
		return -1;
	}
	if (strcmp(k, "authToken") == 0)
		return cy_get_string(cy, val, k, &cfg->auth_token);
	if (strcmp(k, "services") == 0)
		return parse_services(cy, val, cfg);
	if (strcmp(k, "notify") == 0)
		return cy_get_bool(cy, val, k, &cfg->notify);
	if (strcmp(k, "consoleEnabled") == 0)
		return cy_get_bool(cy, val, k, &cfg->console_enabled);
	if (strcmp(k, "metrics") == 0) {
		const char *colon;
		if (cy_get_string(cy, val, k, &cfg->metrics) < 0)
			return -1;
		colon = strrchr(cfg->metrics, ':');
		if (!colon || colon == cfg->metrics || atoi(colon + 1) <= 0 ||
		    atoi(colon + 1) > 65535 || strspn(colon + 1, "0123456789") != strlen(colon + 1))
			return cy_error(cy, val,
					"metrics: host:port is required (e.g. 127.0.0.1:9188)");
		return 0;
	}
	if (strcmp(k, "execservers") == 0) {
		if (cy_get_strlist(cy, val, k, &cfg->execservers) < 0)
			return -1;
		for (size_t i = 0; i < cfg->execservers.count; i++) {
			const char *a = cfg->execservers.items[i];
			if (strncmp(a, "ws://", 5) != 0 && strncmp(a, "wss://", 6) != 0)
				return cy_error(cy, val->kids[i],
						"execservers[%zu]: a ws:// or wss:// "
						"address is required (got \"%.100s\")",
						i, a);
		}
		if (cfg->execservers.count == 0)
			return cy_error(cy, val, "execservers: at least one address is required");
		return 0;
	}
	if (strcmp(k, "instanceId") == 0) {
		if (cy_get_string(cy, val, k, &cfg->instance_id) < 0)
			return -1;
		if (!instance_ok(cfg->instance_id))
			return cy_error(cy, val,
					"instanceId: 1 to %d of A-Z a-z 0-9 _ . : - is required",
					DISPATCH_INSTANCE_MAX);
		cfg->instance_configured = 1;
		return 0;
	}
	if (strcmp(k, "schema") == 0) {
		if (cy_get_string(cy, val, k, &cfg->schema) < 0)
			return -1;
		if (!dispatch_schema_ok(cfg->schema))
			return cy_error(cy, val,
					"schema: a lower-case SQL identifier is required "
					"(a-z, 0-9, _, not starting with a digit, at most %d)",
					DISPATCH_SCHEMA_MAX);
		return 0;
	}
	if (strcmp(k, "logLevel") == 0) {
		char *s = NULL;
		if (cy_get_string(cy, val, k, &s) < 0)
			return -1;
		cfg->log_level = log_level_parse(s);
		free(s);
		if (cfg->log_level < 0)
			return cy_error(cy, val,
					"logLevel: one of error, warn, info, debug is required");
		return 0;
	}
	return cy_unknown_key(cy, key, "the top level", allowed_keys);
}

int dispatch_config_load_buffer(const char *name, const char *text, size_t len,
				const char *env_instance, struct dispatch_config *cfg,
				struct config_error *err)
{
	struct cy_ctx cy = { .file = name, .err = err };
	struct cy_node *root = NULL;
	int rc = -1;

	set_defaults(cfg);
	err->text[0] = '\0';
	if (cy_parse(&cy, text, len, &root) < 0)
		goto out;
	if (!root) {
		cy_error_at(&cy, 1, 1,
			    "the file is empty: expected a mapping with at least "
			    "\"database\" and \"execservers\"");
		goto out;
	}
	if (cy_expect(&cy, root, CY_MAPPING, "the top level") < 0)
		goto out;
	for (size_t i = 0; i < cy_map_size(root); i++)
		if (parse_key(&cy, cy_map_key(root, i), cy_map_value(root, i), cfg) < 0)
			goto out;
	if (!cfg->database) {
		cy_error_at(&cy, root->line, root->column,
			    "database: a libpq connection string "
			    "or URI is required");
		goto out;
	}
	if (cfg->execservers.count == 0) {
		cy_error_at(&cy, root->line, root->column,
			    "execservers: at least one ws:// or "
			    "wss:// address is required");
		goto out;
	}
	if (cfg->stale_after_sec < 2 * cfg->heartbeat_sec) {
		const struct cy_node *k = NULL, *v = cy_map_find(root, "staleAfterSec", &k);
		cy_error(&cy, v ? v : root,
			 "staleAfterSec (%d) must be at least twice heartbeatSec "
			 "(%d)",
			 cfg->stale_after_sec, cfg->heartbeat_sec);
		goto out;
	}
	if (resolve_services(&cy, root, cfg) < 0)
		goto out;
	if (!cfg->instance_id && env_instance && *env_instance) {
		if (!instance_ok(env_instance)) {
			cy_error_at(&cy, 0, 0,
				    "EXECDISPATCH_INSTANCE_ID: 1 to %d of A-Z a-z 0-9 _ . : - "
				    "is required",
				    DISPATCH_INSTANCE_MAX);
			goto out;
		}
		cfg->instance_id = strdup(env_instance);
		cfg->instance_configured = 1;
	}
	if (!cfg->instance_id)
		cfg->instance_id = made_instance_id();
	if (!cfg->schema)
		cfg->schema = strdup("execdispatch");
	if (cfg->console_enabled < 0)
		cfg->console_enabled = cfg->auth_token || metrics_on_loopback(cfg->metrics);
	cfg->file = strdup(name);
	if (!cfg->instance_id || !cfg->schema || !cfg->file) {
		cy_error_at(&cy, 0, 0, "out of memory");
		goto out;
	}
	rc = 0;
out:
	cy_free(root);
	if (rc < 0)
		dispatch_config_free(cfg);
	return rc;
}

int dispatch_config_load(const char *path, const char *env_instance, struct dispatch_config *cfg,
			 struct config_error *err)
{
	struct cy_ctx cy = { .file = path, .err = err };
	struct stat st;
	char *buf;
	ssize_t got;
	int fd, rc;

	set_defaults(cfg);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return cy_error_at(&cy, 0, 0, "cannot open: %s", strerror(errno));
	if (fstat(fd, &st) < 0 || st.st_size > MAX_FILE_BYTES) {
		close(fd);
		return cy_error_at(&cy, 0, 0, "not a readable file of at most %d bytes",
				   MAX_FILE_BYTES);
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return cy_error_at(&cy, 0, 0, "out of memory");
	}
	got = read(fd, buf, (size_t)st.st_size);
	close(fd);
	if (got != (ssize_t)st.st_size) {
		free(buf);
		return cy_error_at(&cy, 0, 0, "cannot read: %s",
				   got < 0 ? strerror(errno) : "short read");
	}
	rc = dispatch_config_load_buffer(path, buf, (size_t)got, env_instance, cfg, err);
	free(buf);
	return rc;
}

void dispatch_config_free(struct dispatch_config *cfg)
{
	free(cfg->file);
	free(cfg->database);
	strlist_free(&cfg->execservers);
	free(cfg->auth_token);
	free(cfg->instance_id);
	free(cfg->schema);
	free(cfg->metrics);
	for (size_t i = 0; i < cfg->nlocal; i++) {
		for (size_t c = 0; c < cfg->local[i].ncommands; c++) {
			free(cfg->local[i].commands[c].name);
			free(cfg->local[i].commands[c].prog);
			strlist_free(&cfg->local[i].commands[c].args);
		}
		free(cfg->local[i].commands);
		free(cfg->local[i].name);
	}
	free(cfg->local);
	for (size_t i = 0; i < cfg->nretry; i++)
		free(cfg->retry_services[i].name);
	free(cfg->retry_services);
	free(cfg->retry_limits);
	memset(cfg, 0, sizeof *cfg);
}
