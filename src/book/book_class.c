/*
 * book_class.c - the classification arithmetic of auto-balance (see
 * book_class.h for the rule and its invariant).  Pure functions: the
 * want-book calls them under its lock, the profile snapshot and the tests
 * call them directly.
 */
#include "autoconfig.h"
#include "book/book_class.h"

#include <string.h>

double class_ema_next(double ema_ms, uint64_t nsamples, uint32_t duration_ms)
{
	if (nsamples == 0)
		return (double)duration_ms;
	return ema_ms + CLASS_EMA_ALPHA * ((double)duration_ms - ema_ms);
}

int class_takes_sample(unsigned error, uint32_t duration_ms, double ema_ms, uint64_t nsamples)
{
	if (error == 0)
		return 1;
	return nsamples > 0 && (double)duration_ms > ema_ms;
}

int class_ema_valid(double ema_ms)
{
	return ema_ms >= 0 && ema_ms <= CLASS_EMA_MAX; /* false for NaN */
}

uint64_t class_ema_round(double ema_ms)
{
	if (!class_ema_valid(ema_ms))
		return ema_ms > CLASS_EMA_MAX ? UINT32_MAX : 0;
	double r = ema_ms + 0.5;
	return r >= CLASS_EMA_MAX ? UINT32_MAX : (uint64_t)r;
}

static double upper_edge(const struct class_params *p)
{
	return (double)p->heavy_threshold_ms * (1.0 + CLASS_HYSTERESIS);
}

static double lower_edge(const struct class_params *p)
{
	return (double)p->heavy_threshold_ms * (1.0 - CLASS_HYSTERESIS);
}

enum svc_class class_next(enum svc_class cur, double ema_ms, uint64_t nsamples,
			  const struct class_params *p)
{
	if (nsamples < p->min_samples)
		return SVC_UNKNOWN;
	switch (cur) {
	case SVC_LIGHT: return ema_ms > upper_edge(p) ? SVC_HEAVY : SVC_LIGHT;
	case SVC_HEAVY: return ema_ms < lower_edge(p) ? SVC_LIGHT : SVC_HEAVY;
	default: return ema_ms > (double)p->heavy_threshold_ms ? SVC_HEAVY : SVC_LIGHT;
	}
}

int class_consistent(unsigned cls, double ema_ms, uint64_t nsamples, const struct class_params *p)
{
	if (nsamples < p->min_samples)
		return cls == SVC_UNKNOWN;
	if (cls == SVC_LIGHT)
		return ema_ms <= upper_edge(p);
	if (cls == SVC_HEAVY)
		return ema_ms >= lower_edge(p);
	return 0;
}

uint32_t class_usable_slots(unsigned cls, uint32_t processes, uint32_t reserve,
			    uint32_t unknown_cap)
{
	if (cls == SVC_HEAVY)
		return processes > reserve ? processes - reserve : 0;
	if (cls == SVC_UNKNOWN)
		return unknown_cap < processes ? unknown_cap : processes;
	return processes;
}

static const char *const names[] = { "unknown", "light", "heavy" };

const char *class_name(unsigned cls)
{
	return cls < sizeof names / sizeof names[0] ? names[cls] : NULL;
}

int class_parse(const char *name)
{
	for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strcmp(name, names[i]) == 0)
			return (int)i;
	return -1;
}
