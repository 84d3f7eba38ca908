/*
 * book_class.h - auto-balance classification of a service by its measured
 * runtime: pure arithmetic, no state of its own (the state lives in the
 * want-book's service records), no I/O, no clock.
 *
 * A service's runtime is an exponential moving average (EMA) of the wall
 * time of its finished jobs, alpha CLASS_EMA_ALPHA, the first sample
 * initialising it.  Its class is
 *   unknown  while fewer than min_samples jobs have finished;
 *   then     heavy if the EMA is above heavy_threshold_ms, else light (the
 *            first classification compares with the threshold itself);
 *   later    a light service turns heavy only when the EMA rises above
 *            threshold * (1 + CLASS_HYSTERESIS), a heavy one turns light
 *            only when it falls below threshold * (1 - CLASS_HYSTERESIS),
 *            so a service whose runtime hovers near the threshold keeps
 *            its class instead of flapping.
 * Which jobs are samples (class_takes_sample): a job that ended on its own
 * (no error: any exit code, or a signal not sent by the execserver) always;
 * a job that ended with an error (cancelled, timed out, its process lost,
 * its I/O failed ...) only when it ran longer than the current EMA and not
 * as the first sample, so a job cut short can make a service heavier (it
 * ran at least that long) but never lighter.
 * An EMA is a finite number in [0, CLASS_EMA_MAX] (durations are uint32_t,
 * so no average of them is larger).
 * Invariant (class_consistent): unknown iff samples < min_samples; a light
 * service's EMA is at most the upper band edge, a heavy one's at least the
 * lower band edge.
 */
#ifndef ES_BOOK_CLASS_H
#define ES_BOOK_CLASS_H

#include <stdint.h>

#define CLASS_EMA_ALPHA 0.2
#define CLASS_HYSTERESIS 0.2
#define CLASS_EMA_MAX 4294967295.0 /* UINT32_MAX ms */

enum svc_class {
	SVC_UNKNOWN = 0,
	SVC_LIGHT = 1,
	SVC_HEAVY = 2,
};

struct class_params {
	uint64_t heavy_threshold_ms; /* > 0 */
	uint32_t min_samples;        /* >= 1 */
};

/* The EMA after one more sample (nsamples: samples before this one). */
double class_ema_next(double ema_ms, uint64_t nsamples, uint32_t duration_ms);
/* 1 if a finished job is a runtime sample (the rule above): error is the
 * outcome's error code (0 = none), ema_ms and nsamples the service's
 * average before it. */
int class_takes_sample(unsigned error, uint32_t duration_ms, double ema_ms, uint64_t nsamples);
/* 1 if ema_ms is a valid average: finite, in [0, CLASS_EMA_MAX]. */
int class_ema_valid(double ema_ms);
/* An average in whole milliseconds, rounded, saturating at UINT32_MAX (0
 * for a value that is not a valid average). */
uint64_t class_ema_round(double ema_ms);
/* The class after the EMA or the sample count changed, from the current
 * class (SVC_UNKNOWN for a first classification). */
enum svc_class class_next(enum svc_class cur, double ema_ms, uint64_t nsamples,
			  const struct class_params *p);
/* 1 if cls is a class that class_next could have produced for this EMA and
 * count (see the invariant above), 0 otherwise (also for values outside
 * the enum). */
int class_consistent(unsigned cls, double ema_ms, uint64_t nsamples, const struct class_params *p);
/* The slots of a pool of `processes` that a want of class cls may take
 * when the pool is otherwise idle (for POSITION's estimate): all of them
 * for light, processes - reserve for heavy, at most unknown_cap for
 * unknown. */
uint32_t class_usable_slots(unsigned cls, uint32_t processes, uint32_t reserve,
			    uint32_t unknown_cap);
/* "unknown", "light", "heavy" (NULL for other values). */
const char *class_name(unsigned cls);
/* The class of a name, or -1. */
int class_parse(const char *name);

#endif
