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
 *    a process that died between those writes, counting it in
 *    class_changes so the snapshot writer saves it soon (an EMA that is not
 *    a valid average, class_ema_valid, is forgotten: the service is learned
 *    again);
 *  - which finished jobs are samples is class_takes_sample's rule (a job
 *    cut short by an error never makes a service lighter).
 * The arithmetic is in book_class.c; this file only applies it.
 */
#include "autoconfig.h"
#include "book/book.h"

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

/* The class of s reconsidered from SVC_UNKNOWN (a class that no longer
 * fits its EMA and count, after a crash or from a snapshot); SVC_UNKNOWN
 * without auto-balance. */
static uint32_t fresh_class(const struct book *b, const struct bk_service *s)
{
	if (!b->topo.autobalance.enabled)
		return SVC_UNKNOWN;
	struct class_params p = params(b);
	return (uint32_t)class_next(SVC_UNKNOWN, s->ema_ms, s->nsamples, &p);
}

void bk_profile_sample(struct book *b, uint32_t svc, const struct book_outcome *o)
{
	struct bk_service *s = &b->svcs[svc];
	if (!class_takes_sample(o->error, o->duration_ms, s->ema_ms, s->nsamples))
		return;
	s->ema_ms = class_ema_next(s->ema_ms, s->nsamples, o->duration_ms);
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
		if (!class_ema_valid(s->ema_ms)) {
			/* not an average any more: learn it again */
			s->ema_ms = 0;
			s->nsamples = 0;
		}
		if (!bk_class_ok(b, i))
			set_class(b, s, fresh_class(b, s)); /* counted: the snapshot follows */
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
	if (svc >= b->topo.nservices || !p || !class_ema_valid(p->ema_ms))
		return BOOK_E_INVALID;
	struct bk_service *s = &b->svcs[svc];
	s->ema_ms = p->samples ? p->ema_ms : 0;
	s->nsamples = p->samples;
	s->klass = p->klass;
	if (!bk_class_ok(b, svc))
		s->klass = fresh_class(b, s);
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
