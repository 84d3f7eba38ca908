/*
 * execctl.c - execctl, the command-line client of execserver (execctl(1)):
 * dispatches `execctl run` and `execctl status` to their modules, and the
 * database commands (submit, show, wait, cancel, position) to queue.c.  The
 * option parsing lives in options.c, the commands in run.c and status.c.
 */
#include "autoconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/exit_codes.h"
#include "cli/listing.h"
#include "cli/options.h"
#include "cli/queue.h"
#include "cli/run.h"
#include "cli/schedule.h"
#include "cli/status.h"

static const char *env(const char *name)
{
	return getenv(name);
}

/* The exit status of a parse that did not end in CLI_PARSED. */
static int parse_failed(int parsed, const char *cmd, const char *err)
{
	if (parsed == CLI_HELP)
		return EXECCTL_OK;
	fprintf(stderr, "execctl: %s\n(execctl %s --help for the options)\n", err, cmd);
	return EXECCTL_USAGE;
}

/* A closed fd 0, 1 or 2 (`>&-`) would be taken by the next open (an
 * epoll fd, a socket) and job output written into it: /dev/null stands
 * in for each, before anything else opens a file. */
static void fill_closed_stdio(void)
{
	for (int fd = 0; fd <= 2; fd++)
		if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
			int n = open("/dev/null", O_RDWR);

			if (n >= 0 && n != fd)
				close(n); /* not the lowest free fd: cannot happen */
		}
}

int main(int argc, char **argv)
{
	char err[512];

	fill_closed_stdio();
	if (argc < 2) {
		cli_usage(stderr);
		return EXECCTL_USAGE;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
		cli_usage(stdout);
		return EXECCTL_OK;
	}
	if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
		printf("execctl %s\n", PACKAGE_VERSION);
		return EXECCTL_OK;
	}
	if (strcmp(cmd, "run") == 0) {
		struct cli_run o;
		int p = cli_parse_run(argc - 1, argv + 1, &o, env, err, sizeof err);
		if (p != CLI_PARSED)
			return parse_failed(p, cmd, err);
		int rc = cli_run_job(&o);
		cli_run_free(&o);
		return rc;
	}
	if (strcmp(cmd, "status") == 0) {
		struct cli_status o;
		int p = cli_parse_status(argc - 1, argv + 1, &o, env, err, sizeof err);
		if (p != CLI_PARSED)
			return parse_failed(p, cmd, err);
		int rc = cli_status_run(&o);
		cli_status_free(&o);
		return rc;
	}
	if (cli_is_queue_command(cmd))
		return cli_queue_main(argc - 1, argv + 1);
	if (strcmp(cmd, "schedule") == 0)
		return cli_schedule_main(argc - 1, argv + 1);
	if (cli_is_listing_command(cmd))
		return cli_listing_main(argc - 1, argv + 1);
	fprintf(stderr,
		"execctl: unknown command '%s' (run, status, submit, show, wait, "
		"cancel, position, retry, pause, resume, schedule, jobs or stats)\n",
		cmd);
	cli_usage(stderr);
	return EXECCTL_USAGE;
}
