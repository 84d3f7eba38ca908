/*
 * queue.h - execctl's database side, for people at a shell: `execctl
 * submit | show | wait | cancel | position | retry | pause | resume` on execdispatch's queue in
 * PostgreSQL (docs/dispatch.md), given --db CONNINFO or the -c FILE of
 * execdispatch.  Exit status: execctl(1) (0, 2 usage, 111 database
 * unreachable, 115 failed, 120 cancelled, 121 wait timed out, 122 no such
 * job or cancel too late, or the program's exit code after wait).
 */
#ifndef ES_CLI_QUEUE_H
#define ES_CLI_QUEUE_H

/* 1 when cmd is one of the database commands. */
int cli_is_queue_command(const char *cmd);
/* argv[0] is the command; returns the exit status. */
int cli_queue_main(int argc, char **argv);

#endif
