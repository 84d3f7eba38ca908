/*
 * book_impl.h - functions shared between the book's own files; private to
 * src/book/.  Every function here runs with the book locked.
 *
 * Owns the intrusive doubly linked list macros.  Invariant of every list: a
 * member's prev/next are BK_NIL exactly at the ends, a non-member's links
 * are BK_NIL, and head (and tail, where kept) name the ends.
 */
#ifndef ES_BOOK_IMPL_H
#define ES_BOOK_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "book/book_layout.h"

/* Append record i to a list with head and tail; ACC(b, i) yields the record,
 * P/N are its link fields. */
#define BK_DL_APPEND(ACC, b, head, tail, i, P, N) \
	do {                                      \
		uint32_t i_ = (i);                \
		ACC(b, i_)->P = (tail);           \
		ACC(b, i_)->N = BK_NIL;           \
		if ((tail) != BK_NIL)             \
			ACC(b, (tail))->N = i_;   \
		else                              \
			(head) = i_;              \
		(tail) = i_;                      \
	} while (0)

#define BK_DL_UNLINK(ACC, b, head, tail, i, P, N)                          \
	do {                                                               \
		uint32_t i_ = (i), p_ = ACC(b, i_)->P, n_ = ACC(b, i_)->N; \
		if (p_ != BK_NIL)                                          \
			ACC(b, p_)->N = n_;                                \
		else                                                       \
			(head) = n_;                                       \
		if (n_ != BK_NIL)                                          \
			ACC(b, n_)->P = p_;                                \
		else                                                       \
			(tail) = p_;                                       \
		ACC(b, i_)->P = BK_NIL;                                    \
		ACC(b, i_)->N = BK_NIL;                                    \
	} while (0)

/* Lists that keep only a head: push in front, unlink anywhere. */
#define BK_DL_PUSH(ACC, b, head, i, P, N)       \
	do {                                    \
		uint32_t i_ = (i);              \
		ACC(b, i_)->P = BK_NIL;         \
		ACC(b, i_)->N = (head);         \
		if ((head) != BK_NIL)           \
			ACC(b, (head))->P = i_; \
		(head) = i_;                    \
	} while (0)

/* Unlinks from a head-only list: BK_DL_UNLINK with a throwaway tail. */
#define BK_DL_UNLINK_H(ACC, b, head, i, P, N)                  \
	do {                                                   \
		uint32_t no_tail_ = BK_NIL;                    \
		BK_DL_UNLINK(ACC, b, head, no_tail_, i, P, N); \
		(void)no_tail_;                                \
	} while (0)

static inline uint32_t bk_want_wg(const struct book *b, const struct bk_want *w)
{
	return b->svcs[w->service].wg;
}

/* book.c */
void bk_fault(const char *point);
uint64_t bk_token(struct book *b);
/* Advances the book's clock to max(clock, now) and makes it "now" for the
 * rest of the critical section; stamps the deadlines of offers and graces
 * begun by calls that had no time (they start now). */
void bk_tick(struct book *b, uint64_t now_ms);

/* book_want.c */
uint32_t bk_want_get(const struct book *b, struct book_ref ref);
uint32_t bk_want_alloc(struct book *b);
/* Frees a want in any state, unlinking it from everything; calls the fault
 * hook at `point` (may be NULL) right after the record is marked FREE. */
void bk_want_free(struct book *b, uint32_t wi, const char *point);
/* A running job loses its client: MAIL_CANCEL to its runner, forgotten
 * by the job index, no owner any more.  It keeps its slot until
 * book_job_finished or the purge of its runner (either frees it). */
void bk_want_orphan(struct book *b, uint32_t wi);
/* A finished job whose client ends: freed without DONE (the client record
 * is not released from here: the caller is ending it). */
void bk_want_forget(struct book *b, uint32_t wi);
/* The end of the RUNNING want wi with outcome o and receipt text (may be
 * NULL), as book_job_finished (which calls it) but without the statistics
 * and without the grant: an orphan is freed; else the want turns FINISHED
 * (outcome, receipt slot or receipt_lost, a pending CANCEL dropped), leaves
 * its runner's list and its slot, and gets MAIL_DONE at its owner conn's
 * handler if it has an owner.  Counts the service statistics
 * (bk_service_sample) right after the state write, then calls the fault
 * hook at `point` (may be NULL).  Returns the waitgroup whose slot was
 * freed (the caller grants). */
uint32_t bk_job_end(struct book *b, uint32_t wi, const struct book_outcome *o, const char *receipt,
		    size_t len, const char *point);
/* A FINISHED want with an owner conn: MAIL_DONE (flag set) to the owner
 * conn's handler; a DONE still pending elsewhere moves there. */
void bk_done_mail(struct book *b, uint32_t wi);
void bk_park(struct book *b, uint32_t wi);
void bk_unpark(struct book *b, uint32_t wi);

/* book_grant.c */
void bk_grant(struct book *b, uint32_t wg);
void bk_grant_all(struct book *b);
void bk_offered_append(struct book *b, uint32_t wi);
void bk_offered_unlink(struct book *b, uint32_t wi);
/* Stamps the OFFERED want w, not stamped yet, with the time (b->clock,
 * valid): its deadline takes the place of its parked_at, and the slot
 * wait from parked_at to now goes into its service's histogram, after
 * BKW_STAMPED, so once per offer (at the grant, or where bk_tick stamps
 * an offer granted without the time).  A holder that dies between the
 * deadline's store and BKW_STAMPED's leaves that one wait measured from
 * the deadline at the next stamp (0, or less than it was). */
void bk_offer_stamp(struct book *b, struct bk_want *w);
/* An OFFERED want's offer is withdrawn (it ran out, or its client's newer
 * conn superseded the conn): the want is gone, its slot free (the caller
 * grants), the record stays EXPIRED until its OFFER_EXPIRED mail is taken. */
void bk_offer_expire(struct book *b, uint32_t wi);

/* Auto-balance eligibility of service s's wants for a free slot of its
 * waitgroup now (book.h, struct book_autobalance); 1 without auto-balance. */
int bk_eligible(const struct book *b, uint32_t s);

/* book_profile.c */
/* One finished job's wall time into service svc's average, count and
 * class, if it is a sample (class_takes_sample). */
void bk_profile_sample(struct book *b, uint32_t svc, const struct book_outcome *o);
/* 1 if service svc's class is consistent (book_profile.c invariants). */
int bk_class_ok(const struct book *b, uint32_t svc);
/* Re-classifies every service whose class is not consistent. */
void bk_class_repair(struct book *b);

/* book_conn.c */
uint32_t bk_conn_get(const struct book *b, struct book_ref ref);
uint32_t bk_client_newest_conn(const struct book *b, uint32_t ci);
void bk_conn_drop(struct book *b, uint32_t c);
void bk_client_free(struct book *b, uint32_t ci);
/* Frees a client that has neither live conns nor running jobs. */
void bk_client_release_if_idle(struct book *b, uint32_t ci);

/* book_usage.c: RUNNING wants in client ci's job list. */
uint32_t bk_client_running(const struct book *b, uint32_t ci);

/* book_mail.c */
void bk_mail_push(struct book *b, uint32_t h, uint32_t wi);
void bk_mail_unlink(struct book *b, uint32_t wi);
/* MAIL_HELLO (coalesced) to every handler with a live conn. */
void bk_hello_dirty(struct book *b);

/* book_query.c */
uint32_t bk_query_ahead(const struct book *b, uint32_t wi);
/* ahead[t] = bk_query_ahead(b, ws[t]) for nw parked wants of one
 * waitgroup, with one replay of the grant rule for them all. */
void bk_query_ahead_many(const struct book *b, const uint32_t *ws, size_t nw, uint32_t *ahead);
/* The first max parked wants of waitgroup g in grant order: emit(wi,
 * position) for each, positions 1, 2, ... (bk_query_ahead + 1); returns
 * how many. */
size_t bk_query_head(const struct book *b, uint32_t g, size_t max,
		     void (*emit)(const struct book *b, uint32_t wi, uint32_t position, void *ctx),
		     void *ctx);
/* Keeps a failed job in the ring of book_failures (book_list.c). */
void bk_failure_note(struct book *b, const struct bk_want *w, const struct book_outcome *o);

/* book_token.c */
/* Frees ISSUED tokens whose deadline <= clock and grants their slots;
 * returns how many. */
uint32_t bk_token_expire(struct book *b);
uint64_t bk_token_next_deadline(const struct book *b);
/* Frees the RUNNING tokens of a dead handler (their pgids to pgids, up to
 * max; returns how many were written); the caller grants. */
size_t bk_token_purge(struct book *b, uint32_t handler, int32_t *pgids, size_t max);
/* Rebuilds the token free list and the waitgroups' token counts from the
 * token records; frees records that are invalid. */
void bk_token_repair(struct book *b);
/* Checks the token table against the counts; 0 or -1 with why. */
int bk_token_check(const struct book *b, char *why, size_t whylen);

/* book_want.c: statistics of a finished job of service svc (called after
 * the job's end is written, so a crash in between loses a sample rather
 * than counting one for a job repair may end otherwise). */
void bk_service_sample(struct book *b, uint32_t svc, const struct book_outcome *o);

/* book_sort.c: in-place heapsort of an index array (no allocation). */
typedef int (*bk_less_fn)(const struct book *b, const void *ctx, uint32_t x, uint32_t y);
void bk_sort(const struct book *b, uint32_t *a, size_t n, bk_less_fn less, const void *ctx);

#endif
