/*
 * run.h - `execctl run`: one job through libexecclient on a private event
 * loop, with this process's stdin and stdout as the job's streams, the
 * queue position on a terminal while it waits, SIGINT/SIGTERM as a cancel,
 * and the receipt turned into an exit status (outcome.h).
 */
#ifndef ES_CLI_RUN_H
#define ES_CLI_RUN_H

#include "cli/options.h"

/* Runs the job; returns the exit status (exit_codes.h or the job's). */
int cli_run_job(const struct cli_run *o);

#endif
