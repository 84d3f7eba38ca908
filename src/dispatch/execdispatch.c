/*
 * execdispatch.c - execdispatch(8): options, the configuration, --migrate, the
 * pid file and the move into the background; the loop itself is
 * dispatcher.c.  Exit status: 0 ok, 1 configuration or schema error,
 * 2 runtime error.
 *
 * What can be checked without the database is checked before the daemon
 * detaches, so that the starting process (an init script, a terminal)
 * gets the reason on stderr and a non-zero exit status: the configuration,
 * the pid file (locked for the daemon's life: a second start is refused,
 * pidfile.h) and the metrics address (refused when another process holds
 * it, port_probe.h).  The database is not among them: one that is not up
 * yet is waited for by the running daemon.
 */
#include "autoconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "common/daemonize.h"
#include "common/log.h"
#include "common/pidfile.h"
#include "common/port_probe.h"
#include "common/secret_file.h"
#include "dispatch/db.h"
#include "dispatch/dispatch_config.h"
#include "dispatch/dispatcher.h"
#include "dispatch/migrate.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: execdispatch [-f] [-c FILE] [-t] [--migrate] [-p PIDFILE] [-l LEVEL]\n"
		"  -f, --foreground     stay in the foreground and log to stderr\n"
		"  -c, --config FILE    configuration file (default " DISPATCH_CONFIG_DEFAULT ")\n"
		"  -t, --test-config    check the configuration and exit (0 ok, 1 error)\n"
		"      --migrate        create or upgrade the database schema and exit\n"
		"  -p, --pid-file FILE  write the daemon's pid there\n"
		"  -l, --log-level LVL  error|warn|info|debug (overrides logLevel)\n"
		"  -V, --version        print the version\n"
		"  -h, --help           this text\n");
}

static int migrate(const struct dispatch_config *cfg)
{
	struct db db;
	char msg[600];
	int n;

	if (db_init(&db, "migrate", cfg->database) < 0) {
		fprintf(stderr, "execdispatch: out of memory\n");
		return 2;
	}
	n = migrate_apply(&db, cfg->schema, migrate_dir(), msg, sizeof msg);
	db_close(&db);
	if (n < 0) {
		fprintf(stderr, "execdispatch: --migrate: %s\n", msg);
		return 1;
	}
	if (n == 0)
		printf("execdispatch: schema %s is current (version %d)\n", cfg->schema,
		       DISPATCH_SCHEMA_VERSION);
	else
		printf("execdispatch: schema %s migrated to version %d (%d migration%s applied)\n",
		       cfg->schema, DISPATCH_SCHEMA_VERSION, n, n == 1 ? "" : "s");
	return 0;
}

/* The metrics address ("host:port", checked by the configuration) is
 * free?  0, or -1 with why. */
static int metrics_free(const char *addr, char *why, size_t len)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *res;
	const char *colon = strrchr(addr, ':');
	char host[256];
	int gai, e;

	snprintf(host, sizeof host, "%.*s", (int)(colon - addr), addr);
	gai = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &res);
	if (gai != 0) {
		snprintf(why, len, "metrics: cannot listen on %s: %s", addr, gai_strerror(gai));
		return -1;
	}
	e = port_probe(res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	if (e == 0)
		return 0;
	snprintf(why, len, "metrics: cannot listen on %s: %s%s", addr, strerror(e),
		 e == EADDRINUSE ? " (another process listens there: is execdispatch already "
				   "running?)"
				 : "");
	return -1;
}

/* "authToken", "database password" or NULL: the secret cfg's file holds. */
static const char *secret_of(const struct dispatch_config *cfg)
{
	PQconninfoOption *opts = PQconninfoParse(cfg->database, NULL);
	int password = 0;

	for (PQconninfoOption *o = opts; o && o->keyword; o++)
		if (strcmp(o->keyword, "password") == 0 && o->val && *o->val)
			password = 1;
	PQconninfoFree(opts);
	return password ? "database password" : cfg->auth_token ? "authToken" : NULL;
}

int main(int argc, char **argv)
{
	static const struct option longs[] = { { "foreground", no_argument, NULL, 'f' },
					       { "config", required_argument, NULL, 'c' },
					       { "test-config", no_argument, NULL, 't' },
					       { "migrate", no_argument, NULL, 'm' },
					       { "pid-file", required_argument, NULL, 'p' },
					       { "log-level", required_argument, NULL, 'l' },
					       { "version", no_argument, NULL, 'V' },
					       { "help", no_argument, NULL, 'h' },
					       { NULL, 0, NULL, 0 } };
	const char *config = DISPATCH_CONFIG_DEFAULT, *pidfile = NULL, *level = NULL;
	int foreground = 0, test = 0, do_migrate = 0, c, rc, pid_fd = -1, ready_fd = -1;
	struct dispatch_config cfg;
	struct config_error err;
	char why[600];

	if (daemonize_std_fds() != 0)
		return 2;
	while ((c = getopt_long(argc, argv, "fc:tp:l:Vh", longs, NULL)) != -1) {
		switch (c) {
		case 'f': foreground = 1; break;
		case 'c': config = optarg; break;
		case 't': test = 1; break;
		case 'm': do_migrate = 1; break;
		case 'p': pidfile = optarg; break;
		case 'l': level = optarg; break;
		case 'V': printf("execdispatch %s\n", PACKAGE_VERSION); return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "execdispatch: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 1;
	}
	/* the daemon changes to / and removes the file there at its end */
	char pid_path[PATH_MAX];
	if (pidfile && !(pidfile = pidfile_absolute(pidfile, pid_path, sizeof pid_path))) {
		fprintf(stderr, "execdispatch: -p: %s\n", strerror(errno));
		return 1;
	}
	if (level && log_level_parse(level) < 0) {
		fprintf(stderr, "execdispatch: -l: one of error, warn, info, debug is required\n");
		return 1;
	}
	if (dispatch_config_load(config, getenv("EXECDISPATCH_INSTANCE_ID"), &cfg, &err) < 0) {
		fprintf(stderr, "execdispatch: %s\n", err.text);
		return 1;
	}
	log_set_process("execdispatch");
	secret_file_check(config, secret_of(&cfg));
	if (test) {
		printf("execdispatch: configuration file %s test is successful\n", config);
		dispatch_config_free(&cfg);
		return 0;
	}
	if (do_migrate) {
		rc = migrate(&cfg);
		dispatch_config_free(&cfg);
		return rc;
	}
	if ((pidfile && (pid_fd = pidfile_lock(pidfile, why, sizeof why)) < 0) ||
	    (cfg.metrics && metrics_free(cfg.metrics, why, sizeof why) < 0)) {
		fprintf(stderr, "execdispatch: %s\n", why);
		if (pid_fd >= 0)
			unlink(pidfile); /* ours, still empty */
		dispatch_config_free(&cfg);
		return 2;
	}
	log_set_level(level ? (enum log_level)log_level_parse(level)
			    : (enum log_level)cfg.log_level);
	log_open("execdispatch", !foreground);
	signal(SIGPIPE, SIG_IGN);
	if (!foreground && daemonize("execdispatch", &ready_fd) < 0) {
		log_error("cannot go into the background: %s", strerror(errno));
		return 2;
	}
	/* the made instanceId names the daemon's pid, not the starting one's */
	if (!foreground && !cfg.instance_configured && dispatch_config_new_instance_id(&cfg) < 0) {
		log_error("out of memory");
		daemonize_ready(&ready_fd, 2);
		return 2;
	}
	if (pid_fd >= 0 && pidfile_write(pid_fd, why, sizeof why) < 0) {
		log_error("%s: %s", pidfile, why);
		daemonize_ready(&ready_fd, 2);
		return 2;
	}
	/* started: the database is waited for by the running daemon */
	daemonize_ready(&ready_fd, 0);
	rc = dispatcher_run(&cfg);
	if (pid_fd >= 0)
		unlink(pidfile);
	dispatch_config_free(&cfg);
	return rc;
}
