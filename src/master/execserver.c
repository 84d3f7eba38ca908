/*
 * execserver.c - the execserver command line: parse options, load and check the
 * configuration, daemonize, and hand over to the master cycle (master.c).
 *
 * Exit status: 0 ok, 1 configuration error, 2 runtime error.
 */
#include "autoconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/daemonize.h"
#include "common/log.h"
#include "common/pidfile.h"
#include "common/secret_file.h"
#include "config/config.h"
#include "master/master.h"
#include "master/privileges.h"
#include "master/startup_check.h"
#include "master/tls_context.h"

#define DEFAULT_CONFIG SYSCONFDIR "/execserver/execserver.yml"

static void usage(FILE *out)
{
	fprintf(out, "usage: execserver [-f] [-c FILE] [-t] [--strict] [-p PIDFILE] [-l LEVEL]\n"
		     "  -f, --foreground     stay in the foreground and log to stderr\n"
		     "  -c, --config FILE    configuration file (default " DEFAULT_CONFIG ")\n"
		     "  -t, --test-config    check the configuration and exit (0 ok, 1 error)\n"
		     "      --strict         a failing startup check is fatal\n"
		     "  -p, --pid-file FILE  pid file (overrides pidFile)\n"
		     "  -l, --log-level LVL  error|warn|info|debug (overrides logLevel)\n"
		     "  -V, --version        print the version\n"
		     "  -h, --help           this text\n");
}

/* The startup check runs the configured programs: started as root, it runs
 * them in a child that has dropped to the configured user first, as the
 * jobs will run.  The child sends back which services stay enabled, and
 * why the others do not; the parent logs that (startup_check_report), so
 * that the warnings reach the log as well as the terminal. */
struct verdict {
	unsigned char enabled;
	int line, column;
	char why[CONFIG_DISABLED_WHY_MAX];
};

static int checked_startup(struct es_config *cfg, const struct privileges *priv, int strict)
{
	int fds[2], status;
	struct verdict *v;
	size_t size = cfg->nservices * sizeof *v;
	char why[512];

	if (!priv->drop) {
		if (startup_check_run(cfg, strict) != 0)
			return -1;
		startup_check_report(cfg);
		return 0;
	}
	v = calloc(cfg->nservices + 1, sizeof *v);
	if (!v || pipe2(fds, O_CLOEXEC) != 0) {
		free(v);
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		free(v);
		return -1;
	}
	if (pid == 0) {
		close(fds[0]);
		if (privileges_drop(priv, why, sizeof why) != 0) {
			log_error("%s", why);
			_exit(2);
		}
		int rc = startup_check_run(cfg, strict);
		for (size_t i = 0; i < cfg->nservices; i++) {
			const struct config_service *svc = &cfg->services[i];
			v[i].enabled = (unsigned char)svc->enabled;
			v[i].line = svc->disabled_line;
			v[i].column = svc->disabled_column;
			memcpy(v[i].why, svc->disabled_why, sizeof v[i].why);
		}
		for (size_t done = 0; done < size;) {
			ssize_t n = write(fds[1], (char *)v + done, size - done);
			if (n <= 0)
				_exit(2);
			done += (size_t)n;
		}
		_exit(rc == 0 ? 0 : 1);
	}
	close(fds[1]);
	ssize_t n;
	size_t got = 0;
	while (got < size && (n = read(fds[0], (char *)v + got, size - got)) > 0)
		got += (size_t)n;
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || got != size) {
		free(v);
		return -1;
	}
	for (size_t i = 0; i < cfg->nservices; i++) {
		struct config_service *svc = &cfg->services[i];
		svc->enabled = v[i].enabled;
		svc->disabled_line = v[i].line;
		svc->disabled_column = v[i].column;
		memcpy(svc->disabled_why, v[i].why, sizeof svc->disabled_why);
		svc->disabled_why[sizeof svc->disabled_why - 1] = '\0';
	}
	free(v);
	startup_check_report(cfg);
	return 0;
}

/* What a valid file may still get wrong, said at -t and at the start (the
 * log gets it too: log_open replays it). */
static void config_warnings(const struct es_config *cfg)
{
	if (cfg->nservices == 0)
		log_warn("%s:%d:%d: no \"services\" are defined: the daemon starts but runs no "
			 "job",
			 cfg->file, cfg->block_line, cfg->block_column);
	secret_file_check(cfg->file, cfg->auth_token ? "authToken" : NULL);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "foreground", no_argument, NULL, 'f' },
		{ "config", required_argument, NULL, 'c' },
		{ "test-config", no_argument, NULL, 't' },
		{ "strict", no_argument, NULL, 'S' },
		{ "pid-file", required_argument, NULL, 'p' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct master_options opt = { .config_path = DEFAULT_CONFIG };
	int test_only = 0, c, log_level = -1;
	const char *pid_file = NULL;

	if (daemonize_std_fds() != 0)
		return 2;

	while ((c = getopt_long(argc, argv, "fc:tp:l:Vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'f': opt.foreground = 1; break;
		case 'c': opt.config_path = optarg; break;
		case 't': test_only = 1; break;
		case 'S': opt.strict = 1; break;
		case 'p': pid_file = optarg; break;
		case 'l':
			log_level = log_level_parse(optarg);
			if (log_level < 0) {
				fprintf(stderr, "execserver: unknown log level '%s'\n", optarg);
				return 1;
			}
			break;
		case 'V': printf("execserver %s\n", PACKAGE_VERSION); return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 1;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 1;
	}
	/* the daemon changes to / and removes the file there at its end */
	char pid_path[PATH_MAX];
	if (pid_file && !(pid_file = pidfile_absolute(pid_file, pid_path, sizeof pid_path))) {
		fprintf(stderr, "execserver: -p: %s\n", strerror(errno));
		return 1;
	}

	/* The daemon runs in the C locale, as a program that never calls
	 * setlocale does, but as the thread's locale object: json-c 0.16
	 * switches to "C" around every parse (duplocale, newlocale and
	 * freelocale in each json_tokener_parse_ex, 2.3 k instructions per
	 * message), and glibc answers each of those with that same object when
	 * it is the one in use.  The master and the handlers inherit it. */
	uselocale(newlocale(LC_ALL_MASK, "C", (locale_t)0));

	log_set_process("master");
	log_open("execserver", 0);

	struct es_config *cfg = calloc(1, sizeof *cfg);
	struct config_error err;
	if (!cfg || config_load(opt.config_path, cfg, &err) != 0) {
		fprintf(stderr, "%s\n", cfg ? err.text : "out of memory");
		free(cfg);
		return 1;
	}
	if (log_level >= 0)
		cfg->log_level = log_level;
	if (pid_file) {
		free(cfg->pid_file);
		cfg->pid_file = strdup(pid_file);
	}
	log_set_level((enum log_level)cfg->log_level);

	struct privileges priv;
	char why[512];
	if (privileges_plan(cfg, test_only, &priv, why, sizeof why) != 0) {
		fprintf(stderr, "%s\n", why);
		config_free(cfg);
		free(cfg);
		return 1;
	}
	opt.priv = &priv;
	config_warnings(cfg);

	if (test_only) {
		/* -t runs the startup checks as a start does: a service that
		 * fails is a warning, an error with --strict */
		int rc = checked_startup(cfg, &priv, opt.strict);
		char tls_why[512];
		struct ssl_ctx_st *tls = tls_context_create(cfg, tls_why, sizeof tls_why);
		if (tls_why[0]) {
			fprintf(stderr, "execserver: %s\n", tls_why);
			rc = -1;
		}
		tls_context_free(tls);
		if (rc == 0)
			printf("execserver: configuration file %s test is successful\n",
			       opt.config_path);
		config_free(cfg);
		free(cfg);
		return rc == 0 ? 0 : 1;
	}

	/* The pid file and the address first: a second start fails at once,
	 * without running the startup checks. */
	if (master_prepare(&opt, cfg, why, sizeof why) != 0) {
		fprintf(stderr, "execserver: %s\n", why);
		config_free(cfg);
		free(cfg);
		return 2;
	}
	if (checked_startup(cfg, &priv, opt.strict) != 0) {
		config_free(cfg);
		free(cfg);
		return 1;
	}

	opt.ready_fd = -1;
	opt.log_level_override = log_level;
	opt.pid_file_override = pid_file;
	if (!opt.foreground) {
		if (daemonize("execserver", &opt.ready_fd) != 0) {
			log_error("cannot daemonize: %s", strerror(errno));
			return 2;
		}
		log_open("execserver", 1);
	}
	return master_run(&opt, cfg);
}
