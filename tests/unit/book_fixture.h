/*
 * book_fixture.h - test helpers for the want-book: a book in a
 * MAP_SHARED|MAP_ANONYMOUS region (so forked children share it), wrappers
 * that lock, call, unlock and remember the mail mask, and a mail log.
 * Test code only; no CUnit dependency.
 */
#ifndef ES_BOOK_FIXTURE_H
#define ES_BOOK_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "book/book.h"

#define FX_LOG_MAX 65536

struct fx_mail {
	uint32_t handler;
	struct book_mail m;
};

struct fx {
	void *mem;
	size_t size;
	struct book *b;
	struct book_limits lim;
	struct book_topology topo;
	uint64_t mask;       /* returned by the last unlock */
	int last_lock;       /* returned by the last lock */
	struct fx_mail *log; /* every mail taken by fx_pump, in order */
	size_t nlog;
};

void fx_topo(struct book_topology *t, uint32_t nwg, const uint32_t *procs, uint32_t nsvc,
	     const uint32_t *svc_wg);
void fx_limits(struct book_limits *l);
int fx_init(struct fx *f, const struct book_limits *l, const struct book_topology *t,
	    uint64_t seed);
void fx_fini(struct fx *f);

void fx_lock(struct fx *f);
void fx_unlock(struct fx *f);
/* 0 or -1 with why filled; takes the lock. */
int fx_check(struct fx *f, char *why, size_t whylen);

enum book_rc fx_open(struct fx *f, uint32_t handler, const char *client, uint64_t now,
		     struct book_ref *conn);
void fx_close(struct fx *f, struct book_ref conn, uint64_t now);
enum book_rc fx_want(struct fx *f, struct book_ref conn, const char *job, uint32_t svc,
		     int32_t prio, uint64_t now);
enum book_rc fx_unwant(struct fx *f, struct book_ref conn, const char *job);
enum book_rc fx_accept(struct fx *f, struct book_ref conn, const char *job, uint64_t token,
		       uint32_t runner, struct book_ref *want);
enum book_rc fx_decline(struct fx *f, struct book_ref conn, const char *job, uint64_t token);
/* A job that ends and whose DONE goes out at once: book_job_finished (no
 * receipt), then book_done_delivered in the same critical section (unless
 * it was an orphan, freed already).  The mask includes the DONE's handler. */
enum book_rc fx_finish(struct fx *f, struct book_ref want, uint64_t ms, int failed);
/* book_job_finished with outcome {exit_code, failed = exit_code != 0, ms}
 * and receipt text (NULL: none). */
enum book_rc fx_finished(struct fx *f, struct book_ref want, int32_t exit_code, uint32_t ms,
			 const char *receipt);
enum book_rc fx_done_read(struct fx *f, struct book_ref want, struct book_outcome *o, char *buf,
			  size_t cap, size_t *len);
enum book_rc fx_delivered(struct fx *f, struct book_ref want);
enum book_rc fx_cancel(struct fx *f, struct book_ref conn, const char *job, enum want_state *was);
uint32_t fx_expire(struct fx *f, uint64_t now);
size_t fx_purge(struct fx *f, uint32_t handler, int32_t *pgids, size_t max);
enum book_rc fx_query(struct fx *f, struct book_ref conn, const char *job, struct book_position *p);
void fx_wg(struct fx *f, uint32_t wg, struct book_wg_status *st);

/* Job ids of the OFFER mails logged from index `from` (pumps first), comma
 * separated, in a static buffer. */
const char *fx_offers(struct fx *f, size_t from);
/* book_check (printing the violation), then fx_fini; returns the check's
 * result. */
int fx_fini_checked(struct fx *f);

/* Takes all mail of every handler into the log; returns how many. */
size_t fx_pump(struct fx *f);
void fx_log_clear(struct fx *f);
/* Newest logged mail of that kind for job (any conn), or NULL. */
const struct fx_mail *fx_find(const struct fx *f, enum book_mail_kind kind, const char *job);
size_t fx_count(const struct fx *f, enum book_mail_kind kind, const char *job);
/* Token of the newest logged OFFER for job (pumps first), 0 if none. */
uint64_t fx_token(struct fx *f, const char *job);
/* Accepts job with its logged token on the conn's handler; returns rc. */
enum book_rc fx_take_job(struct fx *f, struct book_ref conn, const char *job,
			 struct book_ref *want);

#endif
