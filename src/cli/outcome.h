/*
 * outcome.h - what `execctl run` makes of a receipt: its exit status
 * (exit_codes.h) and the lines it prints on stderr.  Pure (no I/O), so the
 * unit tests can pin every mapping with receipts made up in memory.
 *
 * Rules, in order: a successful job exits 0 and says nothing; a receipt
 * error decides over the exit code (unauthorized 112, tls_verify 119,
 * unknown_service and
 * unknown_command 113, no_slot 114, local_io 117, cancelled after an
 * interrupt 130, another retryable error 116, any other error 115); then a
 * signal gives 128+N; then the program's own exit code.  Every failure
 * prints what failed and, when the receipt has one, the decisive stderr
 * line (the error's text and that line with control characters as \xNN:
 * the job's bytes never reach the terminal raw).
 *
 * outcome_show prints a receipt as `execctl run`, `submit -w` and `wait`
 * do; outcome_parse reads a receipt's JSON (a queue row's) for it.
 */
#ifndef ES_CLI_OUTCOME_H
#define ES_CLI_OUTCOME_H

#include <stddef.h>
#include <stdio.h>

#include <json-c/json.h>

#include <execserver/client.h>

/* Exit status for r.  interrupted: the user asked to stop (SIGINT/SIGTERM).
 * msg gets the failure's lines (each ending in '\n', each starting with
 * "execctl: "), or "" on success.  service names the service in messages. */
int outcome_exit(const struct exc_receipt *r, int interrupted, const char *service, char *msg,
		 size_t msglen);

/* Prints r: the stdout it carries (its first 4000 bytes, the rest cut,
 * said on err) to out when none of the job's output reached out already
 * (r->stdout_bytes == 0: never after streamed bytes), then msg (the lines
 * of outcome_exit) on err.  0, or -1 when writing to out failed. */
int outcome_show(const struct exc_receipt *r, const char *msg, FILE *out, FILE *err);

/* r from the JSON text of a DONE receipt (docs/protocol.md, section 2);
 * its strings point into *doc, to be freed with json_object_put.  0, or -1
 * when json is not a JSON object. */
int outcome_parse(const char *json, struct exc_receipt *r, struct json_object **doc);

/* What to try after "certificate verify failed: <reason>" (wss or https):
 * a certificate not issued for the host, or one from an untrusted CA
 * (have_cacert: --cacert was given). */
const char *outcome_tls_hint(const char *reason, int have_cacert);

#endif
