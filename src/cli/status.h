/*
 * status.h - `execctl status`: GET /status of the instance each address
 * reaches (docs/protocol.md section 7) and print it as tables, or as the
 * JSON object (one line per address) for scripts.
 *
 * Behind a load balancer an address reaches one instance per request, so
 * the answer is that instance's (its instance_id is printed first).
 */
#ifndef ES_CLI_STATUS_H
#define ES_CLI_STATUS_H

#include <stdio.h>

#include <json-c/json.h>

#include "cli/options.h"

/* Runs the command; returns the exit status (exit_codes.h): the worst
 * over the addresses, 0 when every one answered. */
int cli_status_run(const struct cli_status *o);

/* The tables of one /status object (identity line, waitgroups, services). */
void status_print_tables(FILE *out, struct json_object *status);

/* http://host:port/status for a ws:// or http:// address, https://...
 * for wss:// or https:// (a path such as /job/<service> is dropped);
 * malloc'd, or NULL when it is not such a URL. */
char *status_url(const char *address);

#endif
