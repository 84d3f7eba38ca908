/*
 * dispatch_config.h - execdispatch's configuration (execdispatch.yml(5)):
 * the keys, their defaults and their checks.  Parsed with the project's
 * YAML tree (config/config_yaml.h), so every error names file:line:column.
 *
 * Invariants of a loaded configuration: database and at least one
 * execserver address are set; every number is inside its documented
 * range; schema is a plain lower-case SQL identifier; instance_id is
 * always set (configured, from EXECDISPATCH_INSTANCE_ID, or made of the
 * host name, the pid and a random part at load time, and made again by
 * the daemon once it has detached, so that it names the daemon's pid);
 * every retry policy is whole (retry_policy.h's invariants: a service's
 * keys left out are the top level's) and retry_limits is set.
 */
#ifndef ES_DISPATCH_CONFIG_H
#define ES_DISPATCH_CONFIG_H

#include "config/config.h"
#include "dispatch/retry_policy.h"

#define DISPATCH_CONFIG_DEFAULT SYSCONFDIR "/execserver/execdispatch.yml"
#define DISPATCH_INSTANCE_MAX 64 /* longest instanceId */
/* longest schema: "<schema>_submit" must fit a PostgreSQL name (63
 * bytes), or pg_notify in migration 002's trigger fails every insert */
#define DISPATCH_SCHEMA_MAX 56

/* A command of a local service: prog (absolute, or looked up nowhere:
 * execve takes it as given) and the args placed before the job's. */
struct dispatch_local_command {
	char *name;
	char *prog;
	struct strlist args;
};

/* A service marked local: run on the dispatcher's own host. */
struct dispatch_local_service {
	char *name;
	struct dispatch_local_command *commands;
	size_t ncommands;
};

struct dispatch_config {
	char *file;                 /* the path it was loaded from */
	char *database;             /* libpq connection string or URI */
	struct strlist execservers; /* ws:// or wss:// addresses */
	char *auth_token;           /* NULL: none */
	char *instance_id;
	int instance_configured; /* 1: from the file or the environment */
	char *schema;            /* default "execdispatch" */
	int poll_ms;             /* 1000 */
	int heartbeat_sec;       /* 5 */
	int stale_after_sec;     /* 30 */
	int cancel_poll_ms;      /* 1000; 0: no cancel poll */
	int progress_write_sec;  /* 5: running jobs' progress written at most this often */
	/* the top-level retry keys (maxAttempts, retryDelaySec,
	 * retryMaxDelaySec, retryBackoff, retryExitCodes): the policy of every
	 * service without its own; a service's own key in the services: block
	 * wins, each key it leaves out is the top level's */
	struct retry_policy retry;
	struct retry_service *retry_services; /* every service of the services: block */
	size_t nretry;
	char *retry_limits;                   /* retry_limits_json of retry_services */
	int connect_timeout_sec;              /* 120 */
	int retain_done_days;                 /* 7; 0: finished rows are kept */
	int log_level;                        /* enum log_level, default info */
	char *metrics;                        /* host:port of /metrics, or NULL */
	int notify;                           /* LISTEN for submissions (direct connections only) */
	struct dispatch_local_service *local; /* services marked local */
	size_t nlocal;
	int local_slots;      /* localSlots: default the CPU count */
	int stop_timeout_sec; /* 240: a stop waits this long for running jobs */
	/* 10: the schedules are looked at at least this often (schedules.h) */
	int schedule_check_sec;
	/* consoleEnabled: the console on the metrics address; default on
	 * where authToken is set or metrics listens on loopback only */
	int console_enabled;
};

/* The retry policy of service (its services: entry, else the top level's). */
static inline const struct retry_policy *dispatch_retry_policy(const struct dispatch_config *cfg,
							       const char *service)
{
	return retry_policy_for(&cfg->retry, cfg->retry_services, cfg->nretry, service);
}

/* Loads and checks path; 0, or -1 with err->text "file:line:column: ...".
 * env_instance: the value of EXECDISPATCH_INSTANCE_ID or NULL. */
int dispatch_config_load(const char *path, const char *env_instance, struct dispatch_config *cfg,
			 struct config_error *err);
/* The same from a buffer; name stands for the file in messages. */
int dispatch_config_load_buffer(const char *name, const char *text, size_t len,
				const char *env_instance, struct dispatch_config *cfg,
				struct config_error *err);
void dispatch_config_free(struct dispatch_config *cfg);
/* Makes instance_id anew (host, the caller's pid, random); 0, or -1 when
 * out of memory (the old one stays). */
int dispatch_config_new_instance_id(struct dispatch_config *cfg);
/* 1 if s is a schema name: a-z, 0-9, _, not starting with a digit, 1 to
 * DISPATCH_SCHEMA_MAX characters (it is put into SQL between double
 * quotes, so nothing else may be in it). */
int dispatch_schema_ok(const char *s);

#endif
