/*
 * listing.h - `execctl jobs` and `execctl stats`: execdispatch's queue
 * listed and counted (docs/dispatch.md, "Listing and statistics"), with
 * the statements the console sends (sql/queries/list_*.sql, stats.sql,
 * state_counts.sql), on one connection given by --db or -c FILE.
 * Exit status: 0, 2 (usage), 111 (database unreachable), 115 (a statement
 * failed).
 */
#ifndef ES_CLI_LISTING_H
#define ES_CLI_LISTING_H

/* 1 when cmd is "jobs" or "stats". */
int cli_is_listing_command(const char *cmd);
/* argv[0] is the command; returns the exit status. */
int cli_listing_main(int argc, char **argv);

#endif
