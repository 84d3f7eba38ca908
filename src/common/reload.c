/* reload.c - see reload.h. */
#include "autoconfig.h"

#include <string.h>

#include "common/reload.h"

int config_take_reloadable(struct es_config *cur, struct es_config *fresh, int keep_log_level)
{
	int restart_needed = strcmp(cur->addr, fresh->addr) != 0 ||
			     cur->nwaitgroups != fresh->nwaitgroups ||
			     cur->nservices != fresh->nservices ||
			     cur->max_connections != fresh->max_connections ||
			     cur->max_wants != fresh->max_wants || cur->handlers != fresh->handlers ||
			     cur->max_jobs_per_client != fresh->max_jobs_per_client;

	if (!keep_log_level)
		cur->log_level = fresh->log_level;
	cur->job_removal_policy = fresh->job_removal_policy;
	cur->janitor_file_age_ms = fresh->janitor_file_age_ms;
	cur->ping_interval_sec = fresh->ping_interval_sec;
	cur->ping_timeout_sec = fresh->ping_timeout_sec;
	cur->handshake_timeout_sec = fresh->handshake_timeout_sec;
	cur->idle_timeout_sec = fresh->idle_timeout_sec;
	struct addr_rules allow = cur->callback_allow;
	cur->callback_allow = fresh->callback_allow;
	fresh->callback_allow = allow;
	char *token = cur->auth_token;
	cur->auth_token = fresh->auth_token;
	fresh->auth_token = token;
	return restart_needed;
}
