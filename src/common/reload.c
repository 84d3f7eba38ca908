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
			     cur->max_wants != fresh->max_wants || cur->handlers != fresh->handlers;

	if (!keep_log_level)
		cur->log_level = fresh->log_level;
	cur->job_removal_policy = fresh->job_removal_policy;
	cur->janitor_file_age_ms = fresh->janitor_file_age_ms;
	cur->ping_interval_sec = fresh->ping_interval_sec;
	cur->ping_timeout_sec = fresh->ping_timeout_sec;
	cur->legacy_token = fresh->legacy_token;
	cur->legacy_token_validity_sec = fresh->legacy_token_validity_sec;
	char *token = cur->auth_token;
	cur->auth_token = fresh->auth_token;
	fresh->auth_token = token;
	return restart_needed;
}
