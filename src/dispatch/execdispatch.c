/*
 * execdispatch.c - execdispatch(8): options, the configuration, --migrate, the
 * pid file and the move into the background; the loop itself is
 * dispatcher.c.  Exit status: 0 ok, 1 configuration or schema error,
 * 2 runtime error.
 */
#include "autoconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
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
	int foreground = 0, test = 0, do_migrate = 0, c, rc;
	struct dispatch_config cfg;
	struct config_error err;

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
	if (level && log_level_parse(level) < 0) {
		fprintf(stderr, "execdispatch: -l: one of error, warn, info, debug is required\n");
		return 1;
	}
	if (dispatch_config_load(config, getenv("EXECDISPATCH_INSTANCE_ID"), &cfg, &err) < 0) {
		fprintf(stderr, "execdispatch: %s\n", err.text);
		return 1;
	}
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
	log_set_process("execdispatch");
	log_set_level(level ? (enum log_level)log_level_parse(level)
			    : (enum log_level)cfg.log_level);
	log_open(!foreground);
	signal(SIGPIPE, SIG_IGN);
	if (!foreground && daemon(0, 0) < 0) {
		fprintf(stderr, "execdispatch: cannot go into the background: %s\n",
			strerror(errno));
		return 2;
	}
	if (pidfile) {
		FILE *f = fopen(pidfile, "w");
		if (!f || fprintf(f, "%ld\n", (long)getpid()) < 0 || fclose(f) != 0) {
			log_error("pid file %s: %s", pidfile, strerror(errno));
			return 2;
		}
	}
	rc = dispatcher_run(&cfg);
	if (pidfile)
		unlink(pidfile);
	dispatch_config_free(&cfg);
	return rc == 0 ? 0 : 1;
}
