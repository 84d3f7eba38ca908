/*
 * book.c - the book's lifecycle, locking, clock, token generator, fault
 * hook, status and drain.  See book.h for the interface and book_layout.h
 * for the segment.
 *
 * Owns the header scalars (clock, draining, counters), the robust mutex
 * and the PRNG.  Invariants: the segment size recorded in the header equals
 * book_size(limits); book_lock clears mail_mask and now_valid, so both only
 * describe the current critical section.
 *
 * Time: the book never reads a clock.  Calls that carry now_ms (and
 * book_set_now) advance b->clock to max(clock, now_ms) and make it valid
 * for the rest of the critical section.  An offer granted, or a grace begun,
 * while no time is valid (inside book_job_finished, book_unwant, ... without a
 * preceding book_set_now) gets its deadline at the next call that brings
 * the time: its timer starts then.  book_next_deadline reports such a
 * pending stamp as due at once, so a daemon that re-arms its timer from it
 * stamps them within one timer tick.
 */
#include "autoconfig.h"
#include "book/book.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "book/book_class.h"
#include "book/book_impl.h"
#include "book/book_index.h"

static book_fault_fn fault_hook; /* process-local on purpose */

void book_set_fault_hook(book_fault_fn fn)
{
	fault_hook = fn;
}

void bk_fault(const char *point)
{
	if (fault_hook)
		fault_hook(point);
}

const char *book_rc_name(enum book_rc rc)
{
	switch (rc) {
	case BOOK_OK: return "ok";
	case BOOK_E_UNKNOWN_SERVICE: return "unknown_service";
	case BOOK_E_DUPLICATE: return "duplicate_job";
	case BOOK_E_UNKNOWN_JOB: return "unknown_job";
	case BOOK_E_BAD_STATE: return "bad_state";
	case BOOK_E_BAD_TOKEN: return "bad_token";
	case BOOK_E_LIMIT_CONN: return "limit_reached";
	case BOOK_E_LIMIT_WANTS: return "limit_reached";
	case BOOK_E_LIMIT_CONNS: return "limit_reached";
	case BOOK_E_LIMIT_JOBS: return "limit_reached";
	case BOOK_E_DRAINING: return "draining";
	case BOOK_E_STALE: return "stale";
	case BOOK_E_DISABLED: return "service_disabled";
	case BOOK_E_INVALID: return "bad_request";
	case BOOK_E_BUSY: return "busy";
	}
	return "unknown";
}

/* ---- sizing ---- */

struct layout {
	uint64_t conns, clients, wants, nodes, scratch, qconn, widx, cidx, nidx, rslots, rbytes,
		tokens, end;
	uint32_t nclient_tab, scratch_len;
};

static uint64_t align64(uint64_t x)
{
	return (x + 63) & ~(uint64_t)63;
}

static int plan(const struct book_limits *lim, struct layout *l)
{
	if (!lim || lim->max_connections == 0 || lim->max_connections > BK_MAX_CONNECTIONS ||
	    lim->max_wants == 0 || lim->max_wants > BK_MAX_WANTS ||
	    lim->max_wants_per_connection == 0 || lim->nhandlers == 0 ||
	    lim->nhandlers > BOOK_MAX_HANDLERS || lim->max_receipts > BOOK_MAX_RECEIPTS ||
	    lim->max_tokens > BK_MAX_TOKENS ||
	    (lim->max_receipts > 0 &&
	     (lim->receipt_bytes == 0 || lim->receipt_bytes > BOOK_RECEIPT_MAX)))
		return -1;
	l->nclient_tab = 2 * lim->max_connections;
	l->scratch_len = lim->max_wants > l->nclient_tab ? lim->max_wants : l->nclient_tab;
	uint64_t o = align64(sizeof(struct book));
	l->conns = o;
	o = align64(o + (uint64_t)lim->max_connections * sizeof(struct bk_conn));
	l->clients = o;
	o = align64(o + (uint64_t)l->nclient_tab * sizeof(struct bk_client));
	l->wants = o;
	o = align64(o + (uint64_t)lim->max_wants * sizeof(struct bk_want));
	l->nodes = o;
	o = align64(o + (uint64_t)lim->max_wants * sizeof(struct bk_node));
	l->scratch = o;
	o = align64(o + ((uint64_t)l->scratch_len + l->nclient_tab) * sizeof(uint32_t));
	l->qconn = o;
	o = align64(o + (uint64_t)lim->max_connections * sizeof(struct bk_qconn));
	l->widx = o;
	o = align64(o + (uint64_t)bk_index_slots(lim->max_wants) * sizeof(struct bk_slot));
	l->cidx = o;
	o = align64(o + (uint64_t)bk_index_slots(l->nclient_tab) * sizeof(struct bk_slot));
	l->nidx = o;
	o = align64(o + (uint64_t)bk_index_slots(lim->max_wants) * sizeof(struct bk_slot));
	l->rslots = o;
	o = align64(o + (uint64_t)lim->max_receipts * sizeof(struct bk_rslot));
	l->rbytes = o;
	o = align64(o + (uint64_t)lim->max_receipts * lim->receipt_bytes);
	l->tokens = o;
	o = align64(o + (uint64_t)lim->max_tokens * sizeof(struct bk_token));
	l->end = o;
	return 0;
}

size_t book_size(const struct book_limits *lim)
{
	struct layout l;
	if (plan(lim, &l) < 0)
		return 0;
	return (size_t)l.end;
}

/* ---- randomness: splitmix64 to expand the seed, xoshiro256** for tokens ---- */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static inline uint64_t rotl64(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

uint64_t bk_token(struct book *b)
{
	uint64_t *s = b->rng, r;
	do {
		r = rotl64(s[1] * 5, 7) * 9;
		uint64_t t = s[1] << 17;
		s[2] ^= s[0];
		s[3] ^= s[1];
		s[1] ^= s[2];
		s[0] ^= s[3];
		s[2] ^= t;
		s[3] = rotl64(s[3], 45);
	} while (r == 0);
	return r;
}

/* ---- init ---- */

static int topo_ok(const struct book_topology *t)
{
	if (!t || t->nwaitgroups == 0 || t->nwaitgroups > BOOK_MAX_WAITGROUPS ||
	    t->nservices > BOOK_MAX_SERVICES)
		return 0;
	for (uint32_t s = 0; s < t->nservices; s++)
		if (t->services[s].waitgroup >= t->nwaitgroups)
			return 0;
	if (t->autobalance.enabled &&
	    (t->autobalance.min_samples == 0 || t->autobalance.heavy_threshold_ms == 0))
		return 0;
	return 1;
}

int book_init(void *mem, const struct book_limits *lim, const struct book_topology *topo,
	      const uint8_t instance_id[16], uint64_t seed)
{
	struct layout l;
	if (!mem || plan(lim, &l) < 0 || !topo_ok(topo))
		return -1;
	struct book *b = mem;
	memset(b, 0, sizeof *b);
	b->version = BK_VERSION;
	b->size = l.end;
	b->lim = *lim;
	if (lim->max_receipts == 0)
		b->lim.receipt_bytes = 0;
	b->nclient_tab = l.nclient_tab;
	b->scratch_len = l.scratch_len;
	b->topo = *topo;
	for (uint32_t i = 0; i < BOOK_MAX_WAITGROUPS; i++)
		b->topo.waitgroups[i].name[BOOK_NAME_MAX - 1] = '\0';
	for (uint32_t i = 0; i < BOOK_MAX_SERVICES; i++)
		b->topo.services[i].name[BOOK_NAME_MAX - 1] = '\0';
	if (instance_id)
		memcpy(b->instance_id, instance_id, 16);
	uint64_t x = seed;
	b->sipkey[0] = splitmix64(&x);
	b->sipkey[1] = splitmix64(&x);
	for (int i = 0; i < 4; i++)
		b->rng[i] = splitmix64(&x);

	pthread_mutexattr_t a;
	if (pthread_mutexattr_init(&a) != 0)
		return -1;
	int rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	if (rc == 0)
		rc = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	if (rc == 0)
		rc = pthread_mutex_init(&b->mtx, &a);
	pthread_mutexattr_destroy(&a);
	if (rc != 0)
		return -1;

	b->off_conns = l.conns;
	b->off_clients = l.clients;
	b->off_wants = l.wants;
	b->off_nodes = l.nodes;
	b->off_scratch = l.scratch;
	b->off_qconn = l.qconn;
	b->off_rslots = l.rslots;
	b->off_rbytes = l.rbytes;
	b->off_tokens = l.tokens;
	b->widx.off = l.widx;
	b->widx.n = bk_index_slots(lim->max_wants);
	b->cidx.off = l.cidx;
	b->cidx.n = bk_index_slots(l.nclient_tab);
	b->nidx.off = l.nidx;
	b->nidx.n = bk_index_slots(lim->max_wants);

	for (uint32_t g = 0; g < BOOK_MAX_WAITGROUPS; g++) {
		b->wgs[g].svc_head = BK_NIL;
		if (g < topo->nwaitgroups)
			b->wgs[g].processes = topo->waitgroups[g].processes;
	}
	for (uint32_t s = topo->nservices; s-- > 0;) {
		struct bk_service *sv = &b->svcs[s];
		sv->wg = topo->services[s].waitgroup;
		sv->enabled = topo->services[s].enabled != 0;
		sv->wg_next = b->wgs[sv->wg].svc_head;
		b->wgs[sv->wg].svc_head = s;
	}
	/* Everything else is derived: let repair lay it out from the empty
	 * primary tables (all records FREE). */
	for (uint32_t i = 0; i < lim->max_wants; i++)
		bk_want(b, i)->state = WANT_FREE;
	book_repair(b);
	b->mail_mask = 0;
	__atomic_store_n(&b->magic, BK_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

struct book *book_from_mem(void *mem)
{
	struct book *b = mem;
	if (!b || __atomic_load_n(&b->magic, __ATOMIC_ACQUIRE) != BK_MAGIC ||
	    b->version != BK_VERSION)
		return NULL;
	return b;
}

/* ---- locking ---- */

/*
 * BOOK_LOCK_STATS (bench builds only): two clock reads per critical
 * section and a trylock first, all recorded under the lock itself.  The
 * hold time includes one clock read (about 20 ns with the vDSO on TSC).
 */
#ifdef BOOK_LOCK_STATS
static uint64_t lock_clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t held_since; /* process-local: when this process took the lock */

static unsigned lock_bucket(uint64_t ns)
{
	if (ns < 64)
		return (unsigned)(ns >> 3);
	unsigned e = 63u - (unsigned)__builtin_clzll(ns); /* 6 and up */
	unsigned i = 8 + (e - 6) * 8 + (unsigned)((ns >> (e - 3)) & 7);
	return i < BOOK_LOCK_BUCKETS ? i : BOOK_LOCK_BUCKETS - 1;
}
#endif

uint64_t book_lock_bucket_ns(unsigned i)
{
	if (i < 8)
		return (uint64_t)(i + 1) * 8 - 1;
	unsigned e = 6 + (i - 8) / 8, sub = (i - 8) % 8;
	return ((8ull + sub + 1) << (e - 3)) - 1;
}

int book_lock_stats(const struct book *b, struct book_lock_stats *st)
{
#ifdef BOOK_LOCK_STATS
	*st = b->lockstats;
	return 0;
#else
	(void)b;
	(void)st;
	return -1;
#endif
}

int book_lock(struct book *b)
{
#ifdef BOOK_LOCK_STATS
	uint64_t asked = lock_clock_ns();
	int rc = pthread_mutex_trylock(&b->mtx);
	int waited = rc == EBUSY;
	if (waited)
		rc = pthread_mutex_lock(&b->mtx);
	held_since = lock_clock_ns();
#else
	int rc = pthread_mutex_lock(&b->mtx);
#endif
	if (rc != 0 && rc != EOWNERDEAD)
		return -1;
#ifdef BOOK_LOCK_STATS
	b->lockstats.ops++;
	if (waited) {
		b->lockstats.waits++;
		b->lockstats.wait_ns += held_since - asked;
	}
#endif
	b->mail_mask = 0;
	b->now_valid = 0;
	if (rc == EOWNERDEAD) {
		book_repair(b);
		b->repairs++;
		if (pthread_mutex_consistent(&b->mtx) != 0)
			return -1;
		return 1;
	}
	return 0;
}

uint64_t book_unlock(struct book *b)
{
	uint64_t m = b->mail_mask;
	b->mail_mask = 0;
	b->now_valid = 0;
#ifdef BOOK_LOCK_STATS
	uint64_t held = lock_clock_ns() - held_since;
	b->lockstats.hold_ns += held;
	b->lockstats.hashes += bk_hashed_take();
	b->lockstats.hold_hist[lock_bucket(held)]++;
#endif
	pthread_mutex_unlock(&b->mtx);
	return m;
}

/* ---- time ---- */

void bk_tick(struct book *b, uint64_t now_ms)
{
	if (now_ms > b->clock)
		b->clock = now_ms;
	b->now_valid = 1;
	/* Unstamped offers are a suffix of each offered list. */
	for (uint32_t g = 0; g < b->topo.nwaitgroups; g++) {
		uint32_t i = b->wgs[g].off_tail;
		while (i != BK_NIL && !(bk_want(b, i)->flags & BKW_STAMPED)) {
			bk_offer_stamp(b, bk_want(b, i));
			i = bk_want(b, i)->q_prev;
		}
	}
	for (uint32_t i = b->grace_tail; i != BK_NIL && !bk_client(b, i)->stamped;) {
		struct bk_client *k = bk_client(b, i);
		k->grace_deadline = b->clock + b->lim.resume_grace_ms;
		k->stamped = 1;
		i = k->g_prev;
	}
}

void book_set_now(struct book *b, uint64_t now_ms)
{
	bk_tick(b, now_ms);
}

uint64_t book_next_deadline(const struct book *b)
{
	uint64_t best = UINT64_MAX;
	for (uint32_t g = 0; g < b->topo.nwaitgroups; g++) {
		const struct bk_wg *wg = &b->wgs[g];
		if (wg->off_tail == BK_NIL)
			continue;
		if (!(bk_want(b, wg->off_tail)->flags & BKW_STAMPED))
			return b->clock;
		uint64_t d = bk_want(b, wg->off_head)->deadline;
		if (d < best)
			best = d;
	}
	if (b->grace_tail != BK_NIL) {
		if (!bk_client(b, b->grace_tail)->stamped)
			return b->clock;
		uint64_t d = bk_client(b, b->grace_head)->grace_deadline;
		if (d < best)
			best = d;
	}
	uint64_t d = bk_token_next_deadline(b);
	return d < best ? d : best;
}

/* ---- handlers, drain, status ---- */

void book_handler_started(struct book *b, uint32_t handler, int32_t pid)
{
	if (handler < b->lim.nhandlers) {
		b->handlers[handler].pid = pid;
		b->handlers[handler].starts++;
	}
}

void book_set_draining(struct book *b)
{
	b->draining = 1;
	bk_hello_dirty(b);
}

int book_is_draining(const struct book *b)
{
	return b->draining != 0;
}

void book_progress_lines(struct book *b, uint64_t good, uint64_t bad)
{
	b->progress_good += good;
	b->progress_bad += bad;
}

void book_status(const struct book *b, struct book_status *st)
{
	memset(st, 0, sizeof *st);
	memcpy(st->instance_id, b->instance_id, 16);
	st->clients = b->nclients_live;
	st->connections = b->nconns;
	st->wants = b->nwants;
	st->finished = b->nfinished;
	st->receipts = b->rc_used;
	st->draining = b->draining;
	st->grants = b->grants;
	st->repairs = b->repairs;
	st->handovers = b->handovers;
	st->progress_good = b->progress_good;
	st->progress_bad = b->progress_bad;
	for (uint32_t h = 0; h < BOOK_MAX_HANDLERS; h++) {
		st->handler_pids[h] = b->handlers[h].pid;
		st->handler_conns[h] = b->handlers[h].nconns;
		st->handler_starts[h] = b->handlers[h].starts;
	}
}

void book_wg_status(const struct book *b, uint32_t wg, struct book_wg_status *st)
{
	memset(st, 0, sizeof *st);
	if (wg >= b->topo.nwaitgroups)
		return;
	const struct bk_wg *w = &b->wgs[wg];
	st->processes = w->processes;
	st->running = w->running;
	st->offered = w->offered;
	st->waiting = w->waiting;
	st->tokens = w->tokens;
}

void book_service_status(const struct book *b, uint32_t svc, struct book_service_status *st)
{
	memset(st, 0, sizeof *st);
	if (svc >= b->topo.nservices)
		return;
	const struct bk_service *s = &b->svcs[svc];
	st->started = s->started;
	st->finished = s->finished;
	st->failed = s->failed;
	st->mean_runtime_ms = s->nsamples ? class_ema_round(s->ema_ms) : 0;
	st->samples = s->nsamples;
	st->waiting = s->waiting;
	st->running = s->running;
	st->offered = s->offered;
	st->klass = s->klass;
	st->runtime = s->runtime;
	st->slot_wait = s->slot_wait;
}

const struct book_topology *book_topology(const struct book *b)
{
	return &b->topo;
}
