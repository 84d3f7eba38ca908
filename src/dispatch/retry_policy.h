/*
 * retry_policy.h - when a job whose run ended is queued again, and after
 * how long (docs/dispatch.md, "Retries"): the policy of a service (the
 * `services:` block of execdispatch.yml, else the top-level keys), the
 * decision from a receipt, the delay before the next attempt.  Pure: no
 * clock, no state but what the caller passes (the jitter's generator
 * state); tests/unit/test_retry_policy.c holds it to its formula.
 *
 * Invariants of a loaded policy: 1 <= max_attempts; 0 <= delay_sec <=
 * max_delay_sec; an exit code listed is 1 to 255.
 */
#ifndef ES_DISPATCH_RETRY_POLICY_H
#define ES_DISPATCH_RETRY_POLICY_H

#include <stddef.h>

#include <execserver/client.h>

#define RETRY_EXIT_TEMPFAIL 75 /* EX_TEMPFAIL: the default of retryExitCodes */

enum retry_backoff {
	RETRY_EXPONENTIAL, /* retryDelaySec * 2^(attempt-1), capped, +-10 % */
	RETRY_FIXED,       /* retryDelaySec, always */
};

struct retry_policy {
	int max_attempts;  /* maxAttempts: 3 */
	int delay_sec;     /* retryDelaySec: 60 */
	int max_delay_sec; /* retryMaxDelaySec: 3600 */
	enum retry_backoff backoff;
	unsigned char exit_codes[32]; /* retryExitCodes: a bit per exit code 0..255 */
};

/* A service's policy: one entry of the `services:` block. */
struct retry_service {
	char *name;
	struct retry_policy p;
	unsigned set; /* the keys its entry gives (dispatch_config.c's RK_ bits) */
};

/* The policy of service: its entry in services[0..n), else dflt. */
const struct retry_policy *retry_policy_for(const struct retry_policy *dflt,
					    const struct retry_service *services, size_t n,
					    const char *service);

void retry_exit_code_set(struct retry_policy *p, int code);
int retry_exit_code_has(const struct retry_policy *p, int code);

/* 1 if a run that ended with receipt r, the row's attempt number attempts
 * (1 for the first), is to be queued again: an error the receipt calls
 * retryable, or an exit with one of retryExitCodes, while attempts <
 * max_attempts.  "no slot" is decided before (it gives the attempt back). */
int retry_again(const struct retry_policy *p, int attempts, const struct exc_receipt *r);

/* The delay in seconds before the attempt after attempt number attempts:
 * fixed: delay_sec; exponential: d = min(delay_sec * 2^(attempts-1),
 * max_delay_sec), then d - span/2 + a draw in [0, span] with span = d / 5
 * (+-10 %, whole seconds: no jitter below 5 s), from *rnd (advanced). */
int retry_delay_sec(const struct retry_policy *p, int attempts, unsigned *rnd);

/* The per-service maxAttempts as a JSON object {"svc": n, ...} for the
 * statements that decide in SQL (rescue.sql, requeue_claims.sql,
 * leave.sql); malloc'd, NULL when out of memory.  Names are service
 * names (A-Z a-z 0-9 _ . -): nothing to escape. */
char *retry_limits_json(const struct retry_service *services, size_t n);

#endif
