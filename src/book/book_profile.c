/*
 * book_profile.c - what the book learns about each service's runtime: the
 * moving average, its sample count and (auto-balance) the service's class.
 *
 * Owns svcs[].ema_ms, nsamples, klass and the header counters
 * profile_samples / class_changes.  Invariants:
 *  - klass is SVC_UNKNOWN unless auto-balance is enabled;
 *  - with auto-balance, klass is consistent with ema_ms and nsamples
 *    (class_consistent, book_class.h): a sample writes the EMA, then the
 *    count, then the class, and repair re-classifies a class left behind by
 *    a process that died between those writes (an EMA that is not a finite
 *    non-negative number is forgotten: the service is learned again).
 * The arithmetic is in book_class.c; this file only applies it.
 */
#include "autoconfig.h"
#include "book/book.h"

#include <math.h>

#include "book/book_class.h"
#include "book/book_impl.h"

static struct class_params params(const struct book *b)
{
	struct class_params p = {
		.heavy_threshold_ms = b->topo.autobalance.heavy_threshold_ms,
		.min_samples = b->topo.autobalance.min_samples,
	};
	return p;
}

static void set_class(struct book *b, struct bk_service *s, enum svc_class cls)
{
	if (s->klass != (uint32_t)cls) {
		s->klass = (uint32_t)cls;
		b->class_changes++;
	}
}

void bk_profile_sample(struct book *b, uint32_t svc, uint32_t duration_ms)
{
	struct bk_service *s = &b->svcs[svc];
	s->ema_ms = class_ema_next(s->ema_ms, s->nsamples, duration_ms);
	s->nsamples++;
	b->profile_samples++;
	if (b->topo.autobalance.enabled) {
		struct class_params p = params(b);
		set_class(b, s, class_next((enum svc_class)s->klass, s->ema_ms, s->nsamples, &p));
	}
}

int bk_class_ok(const struct book *b, uint32_t svc)
{
	const struct bk_service *s = &b->svcs[svc];
	if (!b->topo.autobalance.enabled)
		return s->klass == SVC_UNKNOWN;
	struct class_params p = params(b);
	return class_consistent(s->klass, s->ema_ms, s->nsamples, &p);
}

void bk_class_repair(struct book *b)
{
	for (uint32_t i = 0; i < b->topo.nservices; i++) {
		struct bk_service *s = &b->svcs[i];
		if (!isfinite(s->ema_ms) || s->ema_ms < 0) {
			/* not an average any more: learn it again */
			s->ema_ms = 0;
			s->nsamples = 0;
		}
		if (bk_class_ok(b, i))
			continue;
		struct class_params p = params(b);
		b->svcs[i].klass = b->topo.autobalance.enabled
			? (uint32_t)class_next(SVC_UNKNOWN, b->svcs[i].ema_ms, b->svcs[i].nsamples, &p)
			: SVC_UNKNOWN;
	}
}

void book_profile_get(const struct book *b, uint32_t svc, struct book_profile *p)
{
	p->ema_ms = 0;
	p->samples = 0;
	p->klass = SVC_UNKNOWN;
	if (svc >= b->topo.nservices)
		return;
	p->ema_ms = b->svcs[svc].ema_ms;
	p->samples = b->svcs[svc].nsamples;
	p->klass = b->svcs[svc].klass;
}

enum book_rc book_profile_set(struct book *b, uint32_t svc, const struct book_profile *p)
{
	if (svc >= b->topo.nservices || !p || !isfinite(p->ema_ms) || p->ema_ms < 0)
		return BOOK_E_INVALID;
	struct bk_service *s = &b->svcs[svc];
	s->ema_ms = p->samples ? p->ema_ms : 0;
	s->nsamples = p->samples;
	s->klass = p->klass;
	if (!bk_class_ok(b, svc)) {
		struct class_params cp = params(b);
		s->klass = b->topo.autobalance.enabled
			? (uint32_t)class_next(SVC_UNKNOWN, s->ema_ms, s->nsamples, &cp)
			: SVC_UNKNOWN;
	}
	bk_grant(b, s->wg);
	return BOOK_OK;
}

void book_profile_changes(const struct book *b, uint64_t *samples, uint64_t *class_changes)
{
	if (samples)
		*samples = b->profile_samples;
	if (class_changes)
		*class_changes = b->class_changes;
}
