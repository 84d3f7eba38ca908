/*
 * master.h - the master process cycle: create the instance, fork one
 * handler per slot, supervise (reap, purge, replace with back-off), expire
 * offers and grace periods, drain on SIGTERM, reload on SIGHUP.
 */
#ifndef ES_MASTER_H
#define ES_MASTER_H

#include "config/config.h"

struct privileges;

struct master_options {
	const char *config_path;
	int foreground;
	int strict;
	int ready_fd;                  /* daemon: write one status byte when listening, -1: none */
	int log_level_override;        /* -l given: keeps it across reloads; -1: none */
	const char *pid_file_override; /* -p given: the pid file whatever the file says */
	const struct privileges *priv; /* the user to drop to once bound */
};

/* What must be checked while the starting process can still say why it
 * failed, before the daemon detaches: locks the pid file (a daemon only;
 * pidfile.h) and creates the listening sockets (refused when another
 * process holds the address).  0, or -1 with why (exit status 2). */
int master_prepare(const struct master_options *opt, struct es_config *cfg, char *why, size_t len);
/* Runs until stopped, after master_prepare; returns the process exit
 * status.  Takes cfg. */
int master_run(const struct master_options *opt, struct es_config *cfg);

#endif
