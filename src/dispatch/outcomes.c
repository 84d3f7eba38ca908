/*
 * outcomes.c - the outcomes of held rows and their writing
 * (docs/dispatch.md, "Outcomes"): a finish statement's rows and arrays
 * (struct fin), applied once written; the landed check of an outcome
 * whose statement lost its reply (ask_landed); the flush, outcomes written
 * on the chores' lane apart from the hot path (a refused batch, the stop),
 * an outcome the database refuses cut down (cut_outcome) and, stopping,
 * given up.  Invariants: an outcome is written only under its row's claim;
 * a row refused in every form stays held (never dropped, never
 * requeued); d->pending counts the outcomes not written.  Calls held.c
 * and stopping.c (the file map in dispatch_impl.h).
 */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "dispatch/dispatch_impl.h"

/* Outcomes wait because the database is away or does not answer (why:
 * its last error): said at once and every WAITING_SAY_MS while it lasts;
 * they stay in memory and go out once it answers (docs/dispatch.md,
 * "Poolers and the database's health"). */
void outcomes_waiting(struct dispatcher *d, const char *why)
{
	int64_t now = now_ms();

	if (!d->pending)
		return;
	if (!d->waiting_since_ms)
		d->waiting_since_ms = now;
	if (d->waiting_said_ms && now - d->waiting_said_ms < WAITING_SAY_MS)
		return;
	d->waiting_said_ms = now;
	log_warn("%u outcomes wait for the database (for %lld s; %s): kept, written once it "
		 "answers; a stop gives them up %d s after the signal, to be rerun by the "
		 "rescue",
		 d->pending, (long long)((now - d->waiting_since_ms) / 1000), why,
		 STOP_GIVE_UP_MS / 1000);
}

/* Outcomes were written: the wait said by outcomes_waiting is over. */
void outcomes_flowing(struct dispatcher *d)
{
	if (!d->waiting_since_ms)
		return;
	log_info("outcomes written again after %lld s of waiting for the database",
		 (long long)((now_ms() - d->waiting_since_ms) / 1000));
	d->waiting_since_ms = d->waiting_said_ms = 0;
}

/* Whether h's outcome waits to be written now. */
int outcome_due(const struct held *h, int64_t now)
{
	return h->phase == HELD_DUE && now >= h->retry_at_ms;
}

/* f's text arrays freed (the statement has them). */
void fin_free_arrays(struct fin *f)
{
	free(f->states);
	free(f->errors);
	free(f->receipts);
	f->states = f->errors = f->receipts = NULL;
}

/* Up to n outcomes due now into f, marked writing: their number, 0 when
 * none is due, -1 when memory is short (they wait for the next turn). */
int fin_build(struct dispatcher *d, struct fin *f, int n)
{
	int64_t ids[FINISH_BATCH], claim[FINISH_BATCH], unc[FINISH_BATCH], delay[FINISH_BATCH];
	const char *states[FINISH_BATCH], *errors[FINISH_BATCH], *receipts[FINISH_BATCH];
	int64_t now = now_ms();
	int k = 0;

	for (struct held *h = d->list; h && k < n; h = h->next) {
		if (!outcome_due(h, now))
			continue;
		f->rows[k] = h;
		ids[k] = h->id;
		claim[k] = h->claim;
		unc[k] = h->uncount;
		delay[k] = h->given_back || strcmp(h->state, "queued") != 0
				   ? 0
				   : retry_delay_sec(dispatch_retry_policy(d->cfg, h->service),
						     h->attempts, &d->rnd);
		states[k] = h->state;
		errors[k] = h->error;
		receipts[k] = h->receipt;
		k++;
	}
	f->k = 0;
	if (k == 0)
		return 0;
	db_int_array(f->ids, ids, k);
	db_int_array(f->claim, claim, k);
	db_int_array(f->unc, unc, k);
	db_int_array(f->delay, delay, k);
	f->states = db_text_array(states, k);
	f->errors = db_text_array(errors, k);
	f->receipts = db_text_array(receipts, k);
	if (!f->states || !f->errors || !f->receipts) {
		fin_free_arrays(f);
		return -1;
	}
	f->k = k;
	for (int i = 0; i < k; i++)
		held_to(f->rows[i], HELD_WRITING);
	return k;
}

/* DQ_FINISH's parameters $1..$8 of f. */
void fin_params(const struct dispatcher *d, const struct fin *f, const char **params)
{
	params[0] = d->cfg->instance_id;
	params[1] = f->ids;
	params[2] = f->claim;
	params[3] = f->states;
	params[4] = f->unc;
	params[5] = f->delay;
	params[6] = f->errors;
	params[7] = f->receipts;
}

/* f was not written, or (away: the connection was lost with it on the
 * wire) maybe written with its reply lost: its rows wait again. */
void fin_abort(struct fin *f, int away)
{
	for (int i = 0; i < f->k; i++) {
		held_to(f->rows[i], HELD_DUE);
		f->rows[i]->unsure |= away;
	}
	f->k = 0;
}

/* An outcome written: counted by its state (/metrics). */
void count_outcome(struct dispatcher *d, const char *state, int uncount)
{
	if (strcmp(state, "done") == 0)
		d->st.done++;
	else if (strcmp(state, "failed") == 0)
		d->st.failed++;
	else if (uncount)
		d->st.no_slot++;
	else
		d->st.requeued++;
}

/* f was written: res lists the rows whose claim was still ours (column 0,
 * or with tagged the rows tagged 'f', id in column 1); the others were
 * cancelled or rescued meanwhile and are dropped, but for those an
 * earlier statement wrote before its reply was lost (ask_landed).  Every row
 * of f is freed. */
void fin_apply(struct dispatcher *d, struct fin *f, PGresult *res, int tagged)
{
	for (int i = 0; i < f->k; i++) {
		struct held *h = f->rows[i];
		int ours = 0;
		for (int r = 0; r < PQntuples(res) && !ours; r++)
			ours = (!tagged || PQgetvalue(res, r, 0)[0] == 'f') &&
			       strtoll(PQgetvalue(res, r, tagged), NULL, 10) == h->id;
		if (ours) {
			count_outcome(d, h->state, h->uncount);
		} else if (h->unsure && ask_landed(d, h) == 0) {
			held_to(h,
				HELD_ASKING); /* kept until the answer comes (on_landed_result) */
			continue;
		} else {
			d->st.dropped++;
			log_info("job %lld attempt %d: claim lost before its outcome (%s) was "
				 "written (cancelled or rescued); dropped",
				 (long long)h->id, h->attempts, h->state);
			attempt_ended(d, h->id, h->claim);
		}
		d->pending--;
		held_free(d, h);
	}
	if (f->k)
		outcomes_flowing(d);
	f->k = 0;
}

/* What ask_landed asked about (state: one of set_outcome's literals). */
struct landed_note {
	int64_t id;
	int claim, attempts, uncount;
	const char *state;
};

/* The answer of ask_landed.  The row is kept (marked writing) until it
 * comes; no answer (the database away, the statement failed) is not "not
 * landed": the outcome is due again, written again at the next turn, and
 * asked about again. */
static void on_landed_result(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;
	const struct landed_note *n = note;
	struct held *h = held_find(d, n->id, n->claim);

	if (!h)
		return;
	if (!res) {
		if (!away)
			log_error("job %lld: whether its outcome was written: %s", (long long)n->id,
				  chores_db(d->chores)->last_error);
		held_to(h, HELD_DUE);
		if (stopping(d) && !evtimer_pending(d->flush_ev, NULL))
			arm(d->flush_ev, FLUSH_RETRY_MS);
		else if (!stopping(d))
			event_active(d->poll_ev, EV_TIMEOUT, 0); /* due: the next turn carries it */
		return;
	}
	if (PQntuples(res) == 1) {
		count_outcome(d, n->state, n->uncount);
		log_info("job %lld attempt %d: outcome %s written by a statement whose reply the "
			 "lost connection took",
			 (long long)n->id, n->attempts, n->state);
	} else {
		d->st.dropped++;
		log_info("job %lld attempt %d: claim lost before its outcome (%s) was written "
			 "(cancelled or rescued); dropped",
			 (long long)n->id, n->attempts, n->state);
		attempt_ended(d, n->id, n->claim);
	}
	d->pending--;
	held_free(d, h);
	if (!stopping(d))
		event_active(d->poll_ev, EV_TIMEOUT, 0); /* its place is free now */
	maybe_done_stopping(d);
}

/* h's outcome was found not ours when written again after a statement
 * writing it lost its reply: a chore asks whether that statement's write
 * landed (the row carries h's outcome under h's claim), so that it counts
 * as written, not dropped (on_landed_result).  0 when asked. */
int ask_landed(struct dispatcher *d, const struct held *h)
{
	char id[24], claim[16];
	const char *params[6] = { id, claim, h->state, h->error, h->receipt, d->cfg->instance_id };
	struct landed_note n = { h->id, h->claim, h->attempts, h->uncount, h->state };

	snprintf(id, sizeof id, "%lld", (long long)h->id);
	snprintf(claim, sizeof claim, "%d", h->claim);
	return chores_add(d->chores, d->sql[Q_LANDED], 6, params, &n, sizeof n, on_landed_result,
			  d);
}

/* Replaces the bytes of s outside printable ASCII by '?'; 1 if any was. */
static int scrub_to_ascii(char *s)
{
	int changed = 0;

	for (; s && *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e) {
			*s = '?';
			changed = 1;
		}
	return changed;
}

/* Stopping, and h's outcome was refused in every form until give_up_ms:
 * logged whole and dropped.  The row stays held under our instance, and
 * our dispatcher row stays too (maybe_done_stopping), so that the rescue
 * requeues it after staleAfterSec and it runs again (docs/dispatch.md,
 * "Stopping"). */
static void give_up(struct dispatcher *d, struct held *h, const char *how)
{
	log_error("job %lld attempt %d: stopping: outcome %s (error %s, receipt %s) not written "
		  "%s within %d s (%s); given up: the row stays held by %s and is "
		  "rerun by the rescue after staleAfterSec (%d s)",
		  (long long)h->id, h->attempts, h->state, h->error ? h->error : "none",
		  h->receipt ? h->receipt : "none", how, STOP_GIVE_UP_MS / 1000,
		  chores_db(d->chores)->last_error, d->cfg->instance_id, d->cfg->stale_after_sec);
	d->pending--;
	d->gave_up = 1;
	held_free(d, h);
}

/* The database refused h's outcome alone: the next, smaller form of it
 * (docs/dispatch.md, "Outcomes the database refuses"): 1. without the
 * receipt, 2. with the error text in ASCII, 3. failed with error
 * outcome_not_stored; refused in every form (a trigger, a permission, a
 * statement timeout: not the outcome's fault), the original outcome is
 * kept and tried again after OUTCOME_RETRY_MS.  The row stays held by this
 * dispatcher meanwhile: never dropped (its run would be lost with the
 * claim still ours, so nobody would rescue it) and never requeued (it ran
 * already). */
static void cut_outcome(struct dispatcher *d, struct held *h)
{
	if (h->cut == 0) {
		h->orig_state = h->state;
		h->orig_error = h->error ? strdup(h->error) : NULL;
		h->orig_receipt = h->receipt ? strdup(h->receipt) : NULL;
	}
	switch (++h->cut) {
	case 1:
		if (h->receipt)
			log_warn("job %lld: receipt not storable (%s); writing the outcome "
				 "without it",
				 (long long)h->id, d->db.last_error);
		free(h->receipt);
		h->receipt = NULL;
		break;
	case 2:
		/* e.g. a name cut to a length in the middle of a character: not
		 * UTF-8, refused as text */
		if (scrub_to_ascii(h->error))
			log_warn("job %lld: error text not storable (%s); writing it with '?' "
				 "for its non-ASCII bytes",
				 (long long)h->id, d->db.last_error);
		break;
	case 3:
		log_warn("job %lld attempt %d: outcome %s not storable (%s); writing it as "
			 "failed, error outcome_not_stored",
			 (long long)h->id, h->attempts, h->orig_state, d->db.last_error);
		h->state = "failed";
		free(h->error);
		h->error = strdup("outcome_not_stored");
		break;
	default:
		free(h->error);
		free(h->receipt);
		h->state = h->orig_state;
		h->error = h->orig_error;
		h->receipt = h->orig_receipt;
		h->orig_error = h->orig_receipt = NULL;
		h->cut = 0;
		h->refused = 1;
		if (stopping(d) && now_ms() >= d->give_up_ms) {
			give_up(d, h, "in any form");
			break;
		}
		log_error("job %lld attempt %d: outcome %s not written in any form (%s); kept, "
			  "trying again in %d s (the row stays held by this dispatcher)",
			  (long long)h->id, h->attempts, h->state, d->db.last_error,
			  OUTCOME_RETRY_MS / 1000);
		h->retry_at_ms = now_ms() + OUTCOME_RETRY_MS;
		if (stopping(d) && h->retry_at_ms > d->give_up_ms)
			h->retry_at_ms = d->give_up_ms;
		break;
	}
}

static void on_flush_result(void *arg, PGresult *res, int away, const void *note);

/* Stopping: the outcomes that could not be written because the database
 * is away or does not answer in time, STOP_GIVE_UP_MS after the signal
 * (or after their run ended, if later), are given up as a refused one is
 * (give_up): the stop ends in bounded time, and the rescue reruns them, as
 * after a crash (docs/dispatch.md, "Stopping"). */
static void give_up_unwritten(struct dispatcher *d)
{
	int64_t now = now_ms();
	struct held *next;

	for (struct held *h = d->list; h; h = next) {
		next = h->next;
		if (h->phase == HELD_DUE && h->cut == 0 && now >= d->give_up_ms &&
		    now >= h->due_ms + STOP_GIVE_UP_MS)
			give_up(d, h,
				h->refused ? "in any form" : "because the database did not answer");
	}
}

/* Writes every outcome due, FINISH_BATCH per statement, one statement at
 * a time on the chores' connection (the stop, and a batch the database
 * refused).  The database away: the rest waits for FLUSH_RETRY_MS.  A
 * batch the database refuses is written one row at a time, and a row
 * refused alone is cut down (cut_outcome). */
void flush_outcomes(struct dispatcher *d)
{
	struct fin *f = &d->flush_fin;
	const char *params[8];
	int64_t next = 0;

	if (d->flush_out)
		return;
	if (stopping(d))
		give_up_unwritten(d);
	if (fin_build(d, f, d->flush_per) > 0) {
		fin_params(d, f, params);
		if (chores_add(d->chores, d->sql[Q_FINISH], 8, params, NULL, 0, on_flush_result,
			       d) == 0)
			d->flush_out = 1;
		fin_free_arrays(f);
		if (d->flush_out)
			return;
		fin_abort(f, 0);
		if (!evtimer_pending(d->flush_ev, NULL))
			arm(d->flush_ev, FLUSH_RETRY_MS);
		return;
	}
	d->flush_per = FINISH_BATCH;
	for (struct held *h = d->list; h; h = h->next)
		if (h->phase == HELD_DUE && (!next || h->retry_at_ms < next))
			next = h->retry_at_ms;
	if (next && !evtimer_pending(d->flush_ev, NULL))
		arm(d->flush_ev, next > now_ms() ? next - now_ms() : 0);
	maybe_done_stopping(d);
}

static void on_flush_result(void *arg, PGresult *res, int away, const void *note)
{
	struct dispatcher *d = arg;
	struct fin *f = &d->flush_fin;
	struct held *first = f->rows[0];

	(void)note;
	d->flush_out = 0;
	if (res) {
		fin_apply(d, f, res, 0);
	} else if (away) {
		fin_abort(f, 1);
		outcomes_waiting(d, chores_db(d->chores)->last_error);
		if (!evtimer_pending(d->flush_ev, NULL))
			arm(d->flush_ev, FLUSH_RETRY_MS);
		return;
	} else {
		fin_abort(f, 0);
		if (d->flush_per > 1)
			d->flush_per = 1;
		else
			cut_outcome(d, first); /* the row written alone */
	}
	flush_outcomes(d);
}

/* FLUSH_RETRY_MS after the database was away, at a retry time, or
 * stopping: the flush again. */
void flush_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	flush_outcomes(arg);
}
