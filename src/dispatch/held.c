/*
 * held.c - the rows this dispatcher holds (struct held, dispatch_impl.h):
 * the list, a row's outcome set due, a row freed, found by its claim,
 * its run stopped when its claim is lost, and the runs given back at a
 * stop.  Invariants: a row's phase changes only through held_to (its
 * checked transition); a row is freed only here (held_free), out of the
 * list in the same step.  Calls nothing above it (dispatch_impl.h, the
 * file map).
 */
#include "autoconfig.h"

#include <stdlib.h>
#include <string.h>

#include <execserver/client.h>

#include "common/log.h"
#include "dispatch/dispatch_impl.h"

/* h's outcome is set: it waits to be written from now on. */
void outcome_pending(struct dispatcher *d, struct held *h)
{
	held_to(h, HELD_DUE);
	d->pending++;
	h->due_ms = now_ms();
}

/* h out of the list and freed, whatever its phase (held_free; the end). */
void held_discard(struct dispatcher *d, struct held *h)
{
	if (h->prev)
		h->prev->next = h->next;
	else
		d->list = h->next;
	if (h->next)
		h->next->prev = h->prev;
	free(h->service);
	free(h->error);
	free(h->receipt);
	free(h->orig_error);
	free(h->orig_receipt);
	free(h->position);
	free(h);
}

/* h is done with (its outcome written, or not ours): out of the list and
 * freed. */
void held_free(struct dispatcher *d, struct held *h)
{
	held_to(h, HELD_GONE);
	held_discard(d, h);
}

/* The row's claim was lost (cancelled or rescued): stop its run. */
void drop_claim(struct dispatcher *d, struct held *h, const char *why)
{
	if (h->phase == HELD_LOST || (!h->xj && !h->lr))
		return;
	held_to(h, HELD_LOST);
	log_info("job %lld attempt %d: %s; stopping its run", (long long)h->id, h->attempts, why);
	if (h->xj)
		exc_cancel(h->xj);
	else
		local_cancel(h->lr);
}

/* Stop: the claims whose want is still parked are given back. */
void release_waiting(struct dispatcher *d)
{
	for (struct held *h = d->list; h; h = h->next)
		if (h->xj && h->phase == HELD_RUNNING &&
		    strcmp(exc_job_state(h->xj), "waiting") == 0) {
			held_to(h, HELD_RELEASING);
			h->given_back = 1;
			exc_cancel(h->xj);
		}
}

/* The held row named (id, claim), or NULL (its run ended and its outcome
 * is written, or it was never ours). */
struct held *held_find(struct dispatcher *d, int64_t id, int claim)
{
	for (struct held *h = d->list; h; h = h->next)
		if (h->id == id && h->claim == claim)
			return h;
	return NULL;
}

/* Our dispatcher row was removed by a rescue: every run is stopped. */
void lose_everything(struct dispatcher *d, const char *why)
{
	for (struct held *h = d->list; h; h = h->next)
		drop_claim(d, h, why);
}
