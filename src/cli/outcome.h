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
 * line.
 */
#ifndef ES_CLI_OUTCOME_H
#define ES_CLI_OUTCOME_H

#include <stddef.h>

#include <execserver/client.h>

/* Exit status for r.  interrupted: the user asked to stop (SIGINT/SIGTERM).
 * msg gets the failure's lines (each ending in '\n', each starting with
 * "execctl: "), or "" on success.  service names the service in messages. */
int outcome_exit(const struct exc_receipt *r, int interrupted, const char *service, char *msg,
		 size_t msglen);

/* What to try after "certificate verify failed: <reason>" (wss or https):
 * a certificate not issued for the host, or one from an untrusted CA
 * (have_cacert: --cacert was given). */
const char *outcome_tls_hint(const char *reason, int have_cacert);

#endif
