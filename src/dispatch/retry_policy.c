/*
 * retry_policy.c - see retry_policy.h.  Pure functions of a policy, a
 * receipt and the caller's generator state.
 */
#include "autoconfig.h"
#include "dispatch/retry_policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/timing.h"

const struct retry_policy *retry_policy_for(const struct retry_policy *dflt,
					    const struct retry_service *services, size_t n,
					    const char *service)
{
	for (size_t i = 0; service && i < n; i++)
		if (strcmp(services[i].name, service) == 0)
			return &services[i].p;
	return dflt;
}

void retry_exit_code_set(struct retry_policy *p, int code)
{
	if (code >= 0 && code < 256)
		p->exit_codes[code / 8] |= (unsigned char)(1u << (code % 8));
}

int retry_exit_code_has(const struct retry_policy *p, int code)
{
	return code >= 0 && code < 256 && (p->exit_codes[code / 8] >> (code % 8)) & 1u;
}

int retry_again(const struct retry_policy *p, int attempts, const struct exc_receipt *r)
{
	int wanted;

	if (r->error_code)
		wanted = r->retryable;
	else
		wanted = !r->ok && r->exited && retry_exit_code_has(p, r->exit_code);
	return wanted && attempts < p->max_attempts;
}

int retry_delay_sec(const struct retry_policy *p, int attempts, unsigned *rnd)
{
	long long d = p->delay_sec;

	if (p->backoff == RETRY_FIXED)
		return p->delay_sec;
	for (int i = 1; i < attempts && d < p->max_delay_sec; i++)
		d *= 2;
	if (d > p->max_delay_sec)
		d = p->max_delay_sec;
	return (int)jitter_ms(rnd, (int)d);
}

char *retry_limits_json(const struct retry_service *services, size_t n)
{
	/* "name": 1000, per service: the name (64 at most) and 12 more */
	size_t len = 3 + n * 80, at = 0;
	char *s = malloc(len);

	if (!s)
		return NULL;
	s[at++] = '{';
	for (size_t i = 0; i < n; i++)
		at += (size_t)snprintf(s + at, len - at, "%s\"%.64s\": %d", i ? ", " : "",
				       services[i].name, services[i].p.max_attempts);
	snprintf(s + at, len - at, "}");
	return s;
}
