/*
 * config.h - the execserver configuration, as loaded from YAML.
 *
 * The file has the shape of the services.execserver block of fylr.yml (an
 * operator can paste that block), plus this project's own keys.  Every key
 * is documented in execserver.yml(5).  A loaded config is immutable and
 * owned by one struct es_config; config_free() releases all of it.
 *
 * Invariants after a successful config_load():
 *  - every service names an existing waitgroup (wg_index is valid);
 *  - without a `waitgroups` block (auto_balance = 1) there is exactly one
 *    waitgroup, CONFIG_AUTO_POOL, of the resolved pool size (`cpus`, or
 *    the CPU count), every service belongs to it, 0 <= fast_reserve <
 *    its processes and 1 <= unknown_cap <= its processes;
 *  - names of waitgroups, services and of commands within one service are
 *    unique;
 *  - every service command has a non-empty prog (inherited from the common
 *    `commands` entry of the same name where the service entry has none).
 */
#ifndef ES_CONFIG_H
#define ES_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "config/addr_rule.h"

#define CONFIG_MAX_WAITGROUPS 32
#define CONFIG_MAX_SERVICES 256
#define CONFIG_MAX_HANDLERS 64
#define CONFIG_NAME_MAX 63            /* longest waitgroup, service or command name */
#define CONFIG_MAX_PROCESSES 1024     /* most slots (processes) of one waitgroup */
#define CONFIG_AUTO_POOL "auto"       /* the one waitgroup of auto-balance */
#define CONFIG_INSTANCE_ID_MAX 64     /* characters of instanceId */
#define CONFIG_MAX_CALLBACK_ALLOW 256 /* entries of callbackAllow, of trustedProxies */
#define CONFIG_DISABLED_WHY_MAX 200   /* bytes of a disabled service's reason */

/* A list of strings (args, env). */
struct strlist {
	char **items;
	size_t count;
};

struct config_startup_check {
	int present; /* the startupCheck block was given */
	struct strlist args;
	char *regex; /* POSIX extended regex matched against stdout+stderr, or NULL */
};

struct config_command {
	char *name;
	char *prog;          /* program name (looked up in PATH) or absolute path */
	struct strlist args; /* configured args, before the job's own */
	struct strlist env;  /* K=V */
	struct config_startup_check startup_check;
	int line, column; /* where it was defined, for messages */
};

struct config_service {
	char *name;
	char *waitgroup; /* name as written */
	int wg_index;    /* index into config.waitgroups */
	struct config_command *commands;
	size_t ncommands;
	int enabled; /* cleared by the startup check */
	int line, column;
	/* disabled: why ("command convert: program convert-not-here not found
	 * in PATH") and where (the command), from the startup check */
	char disabled_why[CONFIG_DISABLED_WHY_MAX];
	int disabled_line, disabled_column;
};

struct config_waitgroup {
	char *name;
	int processes; /* slots; >= 1 */
	int line, column;
};

enum job_removal_policy {
	JOB_REMOVAL_NONE, /* keep every job directory */
	JOB_REMOVAL_DONE, /* remove directories of successful jobs */
	JOB_REMOVAL_ALL,  /* remove every job directory when the job ends */
};

/* jobLimits: resource limits of every job process (setrlimit, soft = hard).
 * 0 = not set (the job inherits the daemon's limit). */
struct config_job_limits {
	long long cpu_sec;      /* RLIMIT_CPU */
	long long memory_mb;    /* RLIMIT_AS */
	long long file_size_mb; /* RLIMIT_FSIZE */
	long long open_files;   /* RLIMIT_NOFILE */
	long long core_mb;      /* RLIMIT_CORE; default 0 = no core files */
	int core_given;         /* coreMB was written (0 is meaningful) */
	long long nice;         /* added to the daemon's niceness for every
				   * job, 0-19; default CONFIG_JOB_NICE_DEFAULT */
};

/* Jobs run at the daemon's own priority unless jobLimits.nice says
 * otherwise (a positive value keeps the daemon's hand-overs and pings
 * ahead of converters on a saturated host, and makes every job start a
 * little later there: bench/notes/row3-throughput.md). */
#define CONFIG_JOB_NICE_DEFAULT 0

struct es_config {
	char *file;                   /* path it was loaded from */
	int block_line, block_column; /* where its keys start (the file, or the
					 * fylr.services.execserver key) */

	/* keys shared with fylr.yml's services.execserver block */
	char *addr;                                 /* "host:port", default 127.0.0.1:8083 */
	char *temp_dir;                             /* default /var/lib/execserver */
	enum job_removal_policy job_removal_policy; /* default done */
	int64_t janitor_file_age_ms;                /* default 24h */
	struct strlist env;                         /* K=V for every program */
	struct config_command *commands;            /* common definitions */
	size_t ncommands;
	struct config_waitgroup *waitgroups;
	size_t nwaitgroups;
	struct config_service *services;
	size_t nservices;

	/* this project's keys */
	int handlers;                      /* 0 = number of CPUs */
	int offer_timeout_sec;             /* default 10 */
	int resume_grace_sec;              /* default 30 */
	int drain_timeout_sec;             /* default 20 */
	int ping_interval_sec;             /* default 15 */
	int ping_timeout_sec;              /* default 45: silence past this closes */
	int max_connections;               /* default 4096 */
	int max_wants;                     /* default 65536 */
	int max_wants_per_connection;      /* default 4096 */
	int max_frame_bytes;               /* default 1 MiB */
	int handshake_timeout_sec;         /* default 10: whole HTTP phase, from accept */
	int idle_timeout_sec;              /* default 0 = off: see execserver.yml(5) */
	int max_jobs_per_client;           /* default 0 = no limit */
	struct addr_rules callback_allow;  /* callbackAllow; empty = the peer only */
	struct addr_rules trusted_proxies; /* trustedProxies: addresses and CIDR
					    * blocks only; empty = none */
	char *auth_token;                  /* NULL = no authentication */
	char *instance_id;                 /* instanceId; NULL = random at start */
	char *user;                        /* NULL = keep the current user */
	char *group;                       /* NULL = the user's primary group */
	int user_line, user_column;        /* where user and group were given, for */
	int group_line, group_column;      /* the messages of the privilege plan */
	int allow_root_jobs;               /* allowRootJobs: jobs may run as root */
	char *pid_file;                    /* default /run/execserver.pid */
	int log_level;                     /* enum log_level, default info */
	struct config_job_limits job_limits;
	char *tls_cert; /* PEM chain; NULL = plain TCP */
	char *tls_key;  /* PEM private key (with tls_cert) */

	/* auto-balance: the file has no `waitgroups` block */
	int auto_balance;           /* 1: one pool, services classed by runtime */
	int cpus;                   /* as written; 0 = number of CPUs */
	int fast_reserve;           /* resolved: slots only light jobs take */
	int64_t heavy_threshold_ms; /* default 10 s */
	double unknown_share;       /* default 0.5, in (0, 1] */
	int unknown_cap;            /* resolved: max(1, floor(share * pool)) */
	int min_samples;            /* default 3 */

	int broker;                    /* broker: serve /broker (off: 404); default on */
	int legacy_token;              /* legacyToken: GET /token, PUT /job; default on */
	int legacy_token_validity_sec; /* legacyTokenValiditySec: default 10 */
	int job_log;                   /* jobLog: an info line per finished job; default on */
	/* consoleEnabled: GET /console and its action; default on with an
	 * authToken or a loopback addr (-1 while loading: not given) */
	int console_enabled;
	int console_default; /* consoleEnabled not given: console_enabled is
			      * config_console_default's, again at a reload */
};

/* Error reporting: "file:line:column: message".  Loaders fill this in and
 * return -1; the caller prints err.text. */
struct config_error {
	char text[512];
};

/* Fills *cfg with the defaults of every key. */
void config_defaults(struct es_config *cfg);
/* Loads and validates a YAML file.  Returns 0, or -1 with err filled (the
 * first error; *cfg is then left empty, so config_free on it is harmless). */
int config_load(const char *path, struct es_config *cfg, struct config_error *err);
/* Same from a buffer; `name` stands for the file in messages. */
int config_load_buffer(const char *name, const char *text, size_t len, struct es_config *cfg,
		       struct config_error *err);
void config_free(struct es_config *cfg);

/* Lookups; NULL / -1 when absent. */
const struct config_service *config_find_service(const struct es_config *cfg, const char *name);
int config_service_index(const struct es_config *cfg, const char *name);
const struct config_command *config_find_command(const struct config_service *svc,
						 const char *name);
/* The number of handlers to fork: cfg->handlers, or the CPU count for 0. */
int config_effective_handlers(const struct es_config *cfg);

/* consoleEnabled's default: on with an authToken or a loopback addr. */
int config_console_default(const struct es_config *cfg);

/* Splits "host:port" as accepted for `addr`: host is copied without IPv6
 * brackets, "" meaning all interfaces (":8083").  Returns 0, or -1 with *why
 * (if why is not NULL) set to a static explanation. */
int config_addr_split(const char *addr, char *host, size_t hostlen, int *port, const char **why);

#endif
