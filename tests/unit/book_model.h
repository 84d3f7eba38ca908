/*
 * book_model.h - a reference model of the want-book for the differential
 * test: plain growing arrays, brute force everywhere (to grant, scan every
 * parked want for the smallest key; to answer a query, simulate grants).
 * It follows the book's documented behaviour (book.h), not its data
 * structures.  Conns and wants are named by model ids that are never
 * reused; the test keeps the book refs next to them.
 */
#ifndef ES_BOOK_MODEL_H
#define ES_BOOK_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "book/book.h"

enum {
	MW_FREE = 0,
	MW_PARKED,
	MW_OFFERED,
	MW_RUNNING,
	MW_FINISHED
};

#define M_RECEIPT_MAX 256 /* longest receipt text the tests give */

struct m_want {
	int state;
	int conn;   /* placing conn; RUNNING: owner or -1 */
	int client; /* -1: orphaned running job */
	char id[BOOK_ID_MAX + 1];
	uint32_t svc;
	int32_t prio;
	uint64_t seq;
	uint64_t token; /* known once the OFFER mail was taken */
	int token_known;
	struct book_ref ref; /* the book's ref, known from OFFER mail or JOB */
	int ref_known;
	int stamped;
	uint64_t deadline, offer_no;
	uint32_t runner;
	int32_t pgid;
	uint64_t jorder; /* RUNNING/FINISHED: place in its client's job list */
	/* FINISHED */
	struct book_outcome out; /* receipt_lost included */
	int kept;                /* the receipt text is in the store */
	size_t rlen;
	char rtext[M_RECEIPT_MAX];
	int done_taken; /* test bookkeeping: a DONE mail of it was taken */
};

struct m_conn {
	int live;
	uint32_t h;
	int client;
	uint64_t open_seq;
	uint64_t stamp[BOOK_MAX_WAITGROUPS];
	struct book_ref ref; /* the book's ref of this conn */
};

enum {
	MK_FREE = 0,
	MK_LIVE,
	MK_GRACE
};

struct m_client {
	int state;
	int named;
	char id[BOOK_ID_MAX + 1];
	int stamped;
	uint64_t deadline, grace_seq;
};

/* One queued mail: OFFER (want), OFFER_EXPIRED (conn, id), CANCEL (want)
 * or DONE (want, conn). */
struct m_mail {
	enum book_mail_kind kind;
	int want;
	int conn;
	char id[BOOK_ID_MAX + 1];
	uint64_t exp_seq;
};

/* A legacy token (book_token_*), never reused; ref/secret are the book's. */
enum {
	MT_FREE = 0,
	MT_ISSUED,
	MT_RUNNING
};
struct m_token {
	int state;
	uint32_t svc;
	uint64_t deadline;
	uint32_t runner;
	int32_t pgid;
	struct book_ref ref;
	uint64_t secret;
};

struct m_svc {
	uint64_t started, finished, failed, nsamples;
	double ema;
	unsigned klass; /* enum svc_class (auto-balance) */
};

struct model {
	struct book_limits lim;
	struct book_topology topo;
	struct m_want *w;
	size_t nw, capw;
	struct m_conn *c;
	size_t nc, capc;
	struct m_client *k;
	size_t nk, capk;
	struct m_mail *mail[BOOK_MAX_HANDLERS];
	size_t nmail[BOOK_MAX_HANDLERS], capmail[BOOK_MAX_HANDLERS];
	int hello[BOOK_MAX_HANDLERS];
	uint64_t mask;
	uint64_t clock;
	int now_valid, draining;
	uint64_t seq, open_seq, grace_seq, exp_seq, grants, jorder;
	uint64_t counter[BOOK_MAX_WAITGROUPS];
	struct m_svc svc[BOOK_MAX_SERVICES];
	struct m_token *t;
	size_t nt, capt;
};

struct model *model_new(const struct book_limits *l, const struct book_topology *t);
void model_free(struct model *m);
/* Start of a critical section (mask and time reset, like book_lock). */
void model_begin(struct model *m);

enum book_rc model_conn_open(struct model *m, uint32_t h, const char *client, uint64_t now,
			     int *conn);
void model_conn_close(struct model *m, int conn, uint64_t now);
enum book_rc model_want(struct model *m, int conn, const char *job, uint32_t svc, int32_t prio,
			uint64_t now);
enum book_rc model_unwant(struct model *m, int conn, const char *job);
enum book_rc model_accept(struct model *m, int conn, const char *job, uint64_t token,
			  uint32_t runner, int *want);
enum book_rc model_decline(struct model *m, int conn, const char *job, uint64_t token);
/* want = -1: a stale ref.  o NULL: BOOK_E_INVALID. */
enum book_rc model_finished(struct model *m, int want, const struct book_outcome *o,
			    const char *receipt, size_t len);
enum book_rc model_done_read(const struct model *m, int want, struct book_outcome *o, char *buf,
			     size_t cap, size_t *len);
enum book_rc model_done_delivered(struct model *m, int want);
enum book_rc model_cancel(struct model *m, int conn, const char *job, enum want_state *was,
			  int *want);
enum book_rc model_owner(const struct model *m, int want, int *conn);
uint32_t model_expire(struct model *m, uint64_t now);
/* The runner's running jobs end as lost (outcome error BOOK_ERROR_LOST,
 * DONE by the usual rules), then its conns are dropped. */
size_t model_purge(struct model *m, uint32_t h, int32_t *pgids, size_t max);
enum book_rc model_query(const struct model *m, int conn, const char *job, struct book_position *p);
void model_set_now(struct model *m, uint64_t now);
void model_set_draining(struct model *m);
void model_repaired(struct model *m);
/* book_profile_set on the model. */
enum book_rc model_profile_set(struct model *m, uint32_t svc, const struct book_profile *p);

/* Legacy tokens.  issue: *tok = the new token's model id.  use: tok -1 =
 * a stale ref, secret_ok 0 = a wrong secret. */
enum book_rc model_token_issue(struct model *m, uint32_t svc, uint64_t now, uint32_t valid_ms,
			       int *tok);
enum book_rc model_token_use(struct model *m, int tok, int secret_ok, uint32_t svc, uint32_t runner,
			     uint64_t now);
enum book_rc model_token_finished(struct model *m, int tok, const struct book_outcome *o);
/* Earliest deadline of an issued token, or UINT64_MAX. */
uint64_t model_token_deadline(const struct model *m);

void model_wg(const struct model *m, uint32_t wg, struct book_wg_status *st);
void model_status(const struct model *m, uint32_t *conns, uint32_t *clients, uint32_t *wants);
void model_finished_counts(const struct model *m, uint32_t *finished, uint32_t *receipts);
/* Takes handler h's whole mailbox (HELLO flag in *hello); returns count. */
size_t model_mail_take(struct model *m, uint32_t h, struct m_mail *out, size_t max, int *hello);
/* Finds the want a conn's request would address, or -1. */
int model_lookup(const struct model *m, int conn, const char *job);

#endif
