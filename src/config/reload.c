/* reload.c - see reload.h. */
#include "autoconfig.h"

#include <string.h>

#include "config/reload.h"

/* Two optional strings differ (NULL is a value of its own). */
static int differ(const char *a, const char *b)
{
	return (a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0);
}

int config_take_reloadable(struct es_config *cur, struct es_config *fresh, int keep_log_level)
{
	int restart_needed =
		strcmp(cur->addr, fresh->addr) != 0 || differ(cur->tls_cert, fresh->tls_cert) ||
		differ(cur->tls_key, fresh->tls_key) || cur->nwaitgroups != fresh->nwaitgroups ||
		cur->nservices != fresh->nservices ||
		cur->max_connections != fresh->max_connections ||
		cur->max_wants != fresh->max_wants || cur->handlers != fresh->handlers ||
		cur->auto_balance != fresh->auto_balance || cur->cpus != fresh->cpus ||
		cur->fast_reserve != fresh->fast_reserve ||
		cur->heavy_threshold_ms != fresh->heavy_threshold_ms ||
		cur->unknown_cap != fresh->unknown_cap || cur->min_samples != fresh->min_samples ||
		cur->max_jobs_per_client != fresh->max_jobs_per_client ||
		differ(cur->instance_id, fresh->instance_id);

	if (!keep_log_level)
		cur->log_level = fresh->log_level;
	cur->job_removal_policy = fresh->job_removal_policy;
	cur->janitor_file_age_ms = fresh->janitor_file_age_ms;
	cur->ping_interval_sec = fresh->ping_interval_sec;
	cur->ping_timeout_sec = fresh->ping_timeout_sec;
	cur->broker = fresh->broker;
	cur->legacy_token = fresh->legacy_token;
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
	return restart_needed;
}
