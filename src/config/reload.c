/* reload.c - see reload.h. */
#include "autoconfig.h"

#include <stdio.h>
#include <string.h>

#include "config/reload.h"

/* Two optional strings differ (NULL is a value of its own). */
static int differ(const char *a, const char *b)
{
	return (a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0);
}

static int strlists_differ(const struct strlist *a, const struct strlist *b)
{
	if (a->count != b->count)
		return 1;
	for (size_t i = 0; i < a->count; i++)
		if (strcmp(a->items[i], b->items[i]) != 0)
			return 1;
	return 0;
}

static int commands_differ(const struct config_command *a, size_t na,
			   const struct config_command *b, size_t nb)
{
	if (na != nb)
		return 1;
	for (size_t i = 0; i < na; i++) {
		const struct config_startup_check *ca = &a[i].startup_check,
						  *cb = &b[i].startup_check;
		if (strcmp(a[i].name, b[i].name) != 0 || differ(a[i].prog, b[i].prog) ||
		    strlists_differ(&a[i].args, &b[i].args) ||
		    strlists_differ(&a[i].env, &b[i].env) || ca->present != cb->present ||
		    strlists_differ(&ca->args, &cb->args) || differ(ca->regex, cb->regex))
			return 1;
	}
	return 0;
}

static int waitgroups_differ(const struct es_config *a, const struct es_config *b)
{
	if (a->auto_balance != b->auto_balance || a->nwaitgroups != b->nwaitgroups)
		return 1;
	for (size_t i = 0; i < a->nwaitgroups; i++)
		if (strcmp(a->waitgroups[i].name, b->waitgroups[i].name) != 0 ||
		    a->waitgroups[i].processes != b->waitgroups[i].processes)
			return 1;
	return 0;
}

static int services_differ(const struct es_config *a, const struct es_config *b)
{
	if (a->nservices != b->nservices)
		return 1;
	for (size_t i = 0; i < a->nservices; i++) {
		const struct config_service *sa = &a->services[i], *sb = &b->services[i];
		if (strcmp(sa->name, sb->name) != 0 || differ(sa->waitgroup, sb->waitgroup) ||
		    commands_differ(sa->commands, sa->ncommands, sb->commands, sb->ncommands))
			return 1;
	}
	return 0;
}

static int job_limits_differ(const struct config_job_limits *a, const struct config_job_limits *b)
{
	return a->cpu_sec != b->cpu_sec || a->memory_mb != b->memory_mb ||
	       a->file_size_mb != b->file_size_mb || a->open_files != b->open_files ||
	       a->core_mb != b->core_mb || a->core_given != b->core_given || a->nice != b->nice;
}

/* Appends key to the comma-separated list in out (cut short, never
 * overrun, when out is too small). */
static void name_key(char *out, size_t len, int *n, const char *key)
{
	size_t used = strnlen(out, len);

	if (used + 1 < len)
		snprintf(out + used, len - used, "%s%s", *n ? ", " : "", key);
	(*n)++;
}

int config_restart_keys(const struct es_config *cur, const struct es_config *fresh, char *out,
			size_t len)
{
	const struct {
		const char *key;
		int changed;
	} keys[] = {
		{ "addr", strcmp(cur->addr, fresh->addr) != 0 },
		{ "tempDir", differ(cur->temp_dir, fresh->temp_dir) },
		{ "env", strlists_differ(&cur->env, &fresh->env) },
		{ "commands", commands_differ(cur->commands, cur->ncommands, fresh->commands,
					      fresh->ncommands) },
		{ "waitgroups", waitgroups_differ(cur, fresh) },
		{ "services", services_differ(cur, fresh) },
		{ "handlers", cur->handlers != fresh->handlers },
		{ "offerTimeoutSec", cur->offer_timeout_sec != fresh->offer_timeout_sec },
		{ "resumeGraceSec", cur->resume_grace_sec != fresh->resume_grace_sec },
		{ "drainTimeoutSec", cur->drain_timeout_sec != fresh->drain_timeout_sec },
		{ "maxConnections", cur->max_connections != fresh->max_connections },
		{ "maxWants", cur->max_wants != fresh->max_wants },
		{ "maxWantsPerConnection",
		  cur->max_wants_per_connection != fresh->max_wants_per_connection },
		{ "maxFrameBytes", cur->max_frame_bytes != fresh->max_frame_bytes },
		{ "maxJobsPerClient", cur->max_jobs_per_client != fresh->max_jobs_per_client },
		{ "instanceId", differ(cur->instance_id, fresh->instance_id) },
		{ "user", differ(cur->user, fresh->user) },
		{ "group", differ(cur->group, fresh->group) },
		{ "allowRootJobs", cur->allow_root_jobs != fresh->allow_root_jobs },
		{ "pidFile", differ(cur->pid_file, fresh->pid_file) },
		{ "jobLimits", job_limits_differ(&cur->job_limits, &fresh->job_limits) },
		{ "tls",
		  differ(cur->tls_cert, fresh->tls_cert) || differ(cur->tls_key, fresh->tls_key) },
		{ "cpus", cur->cpus != fresh->cpus },
		{ "fastReserve", cur->fast_reserve != fresh->fast_reserve },
		{ "heavyThreshold", cur->heavy_threshold_ms != fresh->heavy_threshold_ms },
		{ "unknownShare", cur->unknown_cap != fresh->unknown_cap ||
					  cur->unknown_share != fresh->unknown_share },
		{ "minSamples", cur->min_samples != fresh->min_samples },
	};
	int n = 0;

	if (len)
		out[0] = '\0';
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (keys[i].changed)
			name_key(out, len, &n, keys[i].key);
	return n;
}

void config_take_reloadable(struct es_config *cur, struct es_config *fresh, int keep_log_level)
{
	if (!keep_log_level)
		cur->log_level = fresh->log_level;
	cur->job_removal_policy = fresh->job_removal_policy;
	cur->janitor_file_age_ms = fresh->janitor_file_age_ms;
	cur->ping_interval_sec = fresh->ping_interval_sec;
	cur->ping_timeout_sec = fresh->ping_timeout_sec;
	cur->broker = fresh->broker;
	cur->legacy_token = fresh->legacy_token;
	cur->job_log = fresh->job_log;
	cur->legacy_token_validity_sec = fresh->legacy_token_validity_sec;
	cur->handshake_timeout_sec = fresh->handshake_timeout_sec;
	cur->idle_timeout_sec = fresh->idle_timeout_sec;
	struct addr_rules allow = cur->callback_allow;
	cur->callback_allow = fresh->callback_allow;
	fresh->callback_allow = allow;
	struct addr_rules proxies = cur->trusted_proxies;
	cur->trusted_proxies = fresh->trusted_proxies;
	fresh->trusted_proxies = proxies;
	char *token = cur->auth_token;
	cur->auth_token = fresh->auth_token;
	fresh->auth_token = token;
	/* the default from the addr in force (a restart key, kept) and the
	 * new token: a file's new loopback addr does not open the console on
	 * the network address still listened on */
	cur->console_default = fresh->console_default;
	cur->console_enabled = fresh->console_default ? config_console_default(cur)
						      : fresh->console_enabled;
}
