/*
 * book_token.c - legacy tokens: slots reserved by GET /token and redeemed
 * by PUT /job (docs/protocol.md section 9), in the book's token table.
 *
 * Owns the token records, their free list (b->token_free) and the
 * waitgroups' token counts (wgs[].tokens).  Invariants:
 *  - wgs[g].tokens == the ISSUED + RUNNING tokens of services of g, and
 *    counts in running + offered + tokens <= processes;
 *  - a token is only issued when a want of its service would be offered
 *    the slot at once (a free slot its class may take): since grants are
 *    eager, no parked want that may take a free slot exists, so a legacy
 *    client never takes a slot a broker want waits for; with auto-balance
 *    a parked want that may not take the free slot (a heavy one beside the
 *    reserve, an unknown one at its share) does not block the token, as
 *    it does not block a want (docs/protocol.md section 9);
 *  - a record's state is written last when it is issued and first when it
 *    is freed (then its generation is bumped), so a crash leaves it wholly
 *    old or wholly new; the counts and the free list are derived and
 *    rebuilt by bk_token_repair.
 * The table is small (the sum of all processes), so expiry and the next
 * deadline scan it.
 */
#include "autoconfig.h"
#include "book/book.h"

#include <stdarg.h>
#include <stdio.h>

#include "book/book_impl.h"

static uint32_t token_wg(const struct book *b, const struct bk_token *t)
{
	return b->svcs[t->service].wg;
}

static uint32_t token_get(const struct book *b, struct book_ref ref)
{
	if (ref.idx >= b->lim.max_tokens)
		return BK_NIL;
	const struct bk_token *t = bk_tok(b, ref.idx);
	if (t->state == BKT_FREE || t->gen != ref.gen)
		return BK_NIL;
	return ref.idx;
}

/* Frees token i: state first, then the count and the free list. */
static void token_free(struct book *b, uint32_t i)
{
	struct bk_token *t = bk_tok(b, i);
	uint32_t g = token_wg(b, t);
	bk_set_state(&t->state, BKT_FREE);
	t->gen++;
	t->pgid = 0;
	b->wgs[g].tokens--;
	t->next = b->token_free;
	b->token_free = i;
}

enum book_rc book_token_issue(struct book *b, uint32_t service, uint64_t now_ms, uint32_t valid_ms,
			      struct book_ref *tok, uint64_t *secret)
{
	bk_tick(b, now_ms);
	if (service >= b->topo.nservices)
		return BOOK_E_UNKNOWN_SERVICE;
	if (!b->svcs[service].enabled)
		return BOOK_E_DISABLED;
	if (b->draining)
		return BOOK_E_DRAINING;
	struct bk_wg *wg = &b->wgs[b->svcs[service].wg];
	/* with auto-balance a token obeys the service's class like a want:
	 * a heavy service never takes the reserve for light work */
	if ((uint64_t)wg->running + wg->offered + wg->tokens >= wg->processes ||
	    !bk_eligible(b, service) || b->token_free == BK_NIL)
		return BOOK_E_BUSY;
	uint32_t i = b->token_free;
	struct bk_token *t = bk_tok(b, i);
	b->token_free = t->next;
	t->next = BK_NIL;
	t->service = service;
	t->runner = BK_NIL;
	t->pgid = 0;
	t->secret = bk_token(b);
	t->deadline = b->clock + valid_ms;
	bk_set_state(&t->state, BKT_ISSUED);
	bk_fault("token.mid");
	wg->tokens++;
	tok->idx = i;
	tok->gen = t->gen;
	*secret = t->secret;
	return BOOK_OK;
}

enum book_rc book_token_use(struct book *b, struct book_ref tok, uint64_t secret, uint32_t service,
			    uint32_t runner, uint64_t now_ms)
{
	bk_tick(b, now_ms);
	uint32_t i = token_get(b, tok);
	if (i == BK_NIL)
		return BOOK_E_UNKNOWN_JOB;
	struct bk_token *t = bk_tok(b, i);
	/* a token whose deadline passed is gone, even before book_expire ran */
	if (t->state != BKT_ISSUED || t->secret != secret || t->deadline <= b->clock)
		return BOOK_E_UNKNOWN_JOB;
	if (t->service != service)
		return BOOK_E_BAD_TOKEN;
	if (runner >= b->lim.nhandlers)
		return BOOK_E_INVALID;
	t->runner = runner;
	t->pgid = 0;
	bk_set_state(&t->state, BKT_RUNNING);
	b->svcs[service].started++;
	return BOOK_OK;
}

void book_token_set_pgid(struct book *b, struct book_ref tok, int32_t pgid)
{
	uint32_t i = token_get(b, tok);
	if (i != BK_NIL && bk_tok(b, i)->state == BKT_RUNNING)
		bk_tok(b, i)->pgid = pgid;
}

enum book_rc book_token_finished(struct book *b, struct book_ref tok, const struct book_outcome *o)
{
	if (!o)
		return BOOK_E_INVALID;
	uint32_t i = token_get(b, tok);
	if (i == BK_NIL)
		return BOOK_E_STALE;
	struct bk_token *t = bk_tok(b, i);
	if (t->state != BKT_RUNNING)
		return BOOK_E_BAD_STATE;
	uint32_t g = token_wg(b, t), svc = t->service;
	token_free(b, i);
	bk_service_sample(b, svc, o); /* after the end, before the grant */
	bk_grant(b, g);
	return BOOK_OK;
}

uint32_t bk_token_expire(struct book *b)
{
	uint32_t n = 0;
	uint32_t freed[BOOK_MAX_WAITGROUPS] = { 0 };
	for (uint32_t i = 0; i < b->lim.max_tokens; i++) {
		const struct bk_token *t = bk_tok(b, i);
		if (t->state != BKT_ISSUED || t->deadline > b->clock)
			continue;
		freed[token_wg(b, t)]++;
		token_free(b, i);
		n++;
	}
	for (uint32_t g = 0; g < b->topo.nwaitgroups; g++)
		if (freed[g])
			bk_grant(b, g);
	return n;
}

uint64_t bk_token_next_deadline(const struct book *b)
{
	uint64_t best = UINT64_MAX;
	for (uint32_t i = 0; i < b->lim.max_tokens; i++) {
		const struct bk_token *t = bk_tok(b, i);
		if (t->state == BKT_ISSUED && t->deadline < best)
			best = t->deadline;
	}
	return best;
}

size_t bk_token_purge(struct book *b, uint32_t handler, int32_t *pgids, size_t max)
{
	size_t n = 0;
	for (uint32_t i = 0; i < b->lim.max_tokens; i++) {
		struct bk_token *t = bk_tok(b, i);
		if (t->state != BKT_RUNNING || t->runner != handler)
			continue;
		if (t->pgid > 0 && pgids && n < max)
			pgids[n++] = t->pgid;
		/* it ended, and failed (no runtime sample: it was cut short);
		 * counted after the end, as every statistic (book_layout.h) */
		uint32_t svc = t->service;
		token_free(b, i);
		b->svcs[svc].finished++;
		b->svcs[svc].failed++;
	}
	return n;
}

void bk_token_repair(struct book *b)
{
	b->token_free = BK_NIL;
	for (uint32_t i = b->lim.max_tokens; i-- > 0;) {
		struct bk_token *t = bk_tok(b, i);
		int valid = t->service < b->topo.nservices &&
			    (t->state == BKT_ISSUED ||
			     (t->state == BKT_RUNNING && t->runner < b->lim.nhandlers));
		if (t->state != BKT_FREE && valid) {
			b->wgs[token_wg(b, t)].tokens++;
			t->next = BK_NIL;
			continue;
		}
		if (t->state != BKT_FREE)
			bk_set_state(&t->state, BKT_FREE);
		/* a record freed by a crashed holder may have kept its
		 * generation: bump every free one */
		t->gen++;
		t->pgid = 0;
		t->next = b->token_free;
		b->token_free = i;
	}
}

__attribute__((format(printf, 3, 4))) static void say(char *why, size_t whylen, const char *fmt,
						      ...)
{
	if (!why || !whylen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
}

int bk_token_check(const struct book *b, char *why, size_t whylen)
{
	uint32_t held[BOOK_MAX_WAITGROUPS] = { 0 }, nfree = 0;
	for (uint32_t i = 0; i < b->lim.max_tokens; i++) {
		const struct bk_token *t = bk_tok(b, i);
		if (t->state == BKT_FREE)
			continue;
		if (t->state > BKT_RUNNING || t->service >= b->topo.nservices ||
		    (t->state == BKT_RUNNING && t->runner >= b->lim.nhandlers)) {
			say(why, whylen, "token %u: state %u, service %u, runner %u", i, t->state,
			    t->service, t->runner);
			return -1;
		}
		held[token_wg(b, t)]++;
	}
	for (uint32_t i = b->token_free; i != BK_NIL; i = bk_tok(b, i)->next) {
		if (i >= b->lim.max_tokens || bk_tok(b, i)->state != BKT_FREE ||
		    nfree++ > b->lim.max_tokens) {
			say(why, whylen, "token free list holds %u", i);
			return -1;
		}
	}
	uint32_t used = 0;
	for (uint32_t g = 0; g < BOOK_MAX_WAITGROUPS; g++) {
		used += held[g];
		if (b->wgs[g].tokens != held[g]) {
			say(why, whylen, "wg %u: %u tokens counted, %u in the table", g,
			    b->wgs[g].tokens, held[g]);
			return -1;
		}
	}
	if (used + nfree != b->lim.max_tokens) {
		say(why, whylen, "tokens: %u used + %u free of %u", used, nfree, b->lim.max_tokens);
		return -1;
	}
	return 0;
}
