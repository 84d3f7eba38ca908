/*
 * book_index.c - see book_index.h.  Owns the slot arrays of the three
 * indexes.  Invariants: every entry sits at or after its home slot
 * (home(), cyclically) with no empty slot between home and entry;
 * count = slots in use <= 3/4 of the slots, and at least one slot is
 * always empty (every probe ends).
 */
#include "autoconfig.h"
#include "book/book_index.h"

#include <string.h>

#include "book/book_siphash.h"

typedef int (*eq_fn)(const struct book *b, uint32_t idx, const void *key);

/* A load of at most 3/4: with linear probing a lookup of an entry takes
 * 2.5 probes on average at that load, a miss 8.5, all in one or two cache
 * lines of 8-byte slots; any table size works (ix_home scales the hash
 * instead of masking it), so the index costs 4/3 slots per entry rather
 * than 2 to 4 with power-of-two sizes kept half full. */
uint32_t bk_index_slots(uint32_t entries)
{
	uint64_t n = ((uint64_t)entries * 4 + 2) / 3 + 1;
	return n < 8 ? 8 : (uint32_t)n;
}

/* The home slot: the hash scaled to [0, n) (multiply and shift). */
static inline uint32_t ix_home(const struct bk_index *ix, uint32_t hash)
{
	return (uint32_t)(((uint64_t)hash * ix->n) >> 32);
}

static inline uint32_t ix_next(const struct bk_index *ix, uint32_t i)
{
	return i + 1 == ix->n ? 0 : i + 1;
}

/* Cyclic distance from slot a forward to slot b. */
static inline uint32_t ix_dist(const struct bk_index *ix, uint32_t a, uint32_t b)
{
	return b >= a ? b - a : b + ix->n - a;
}

void bk_index_clear(struct book *b, struct bk_index *ix)
{
	struct bk_slot *s = bk_slots(b, ix);
	for (uint32_t i = 0; i < ix->n; i++) {
		s[i].hash = 0;
		s[i].idx = BK_NIL;
	}
	ix->count = 0;
}

static uint32_t ix_find(const struct book *b, const struct bk_index *ix, uint32_t hash, eq_fn eq,
			const void *key)
{
	const struct bk_slot *s = bk_slots(b, ix);
	for (uint32_t i = ix_home(ix, hash);; i = ix_next(ix, i)) {
		if (s[i].idx == BK_NIL)
			return BK_NIL;
		if (s[i].hash == hash && eq(b, s[i].idx, key))
			return s[i].idx;
	}
}

static void ix_add(struct book *b, struct bk_index *ix, uint32_t hash, uint32_t idx)
{
	struct bk_slot *s = bk_slots(b, ix);
	uint32_t i = ix_home(ix, hash);
	while (s[i].idx != BK_NIL)
		i = ix_next(ix, i);
	s[i].hash = hash;
	s[i].idx = idx;
	ix->count++;
}

/* Slot holding idx, or BK_NIL. */
static uint32_t ix_slot_of(const struct book *b, const struct bk_index *ix, uint32_t hash,
			   uint32_t idx)
{
	const struct bk_slot *s = bk_slots(b, ix);
	for (uint32_t i = ix_home(ix, hash);; i = ix_next(ix, i)) {
		if (s[i].idx == BK_NIL)
			return BK_NIL;
		if (s[i].idx == idx)
			return i;
	}
}

static void ix_del(struct book *b, struct bk_index *ix, uint32_t hash, uint32_t idx)
{
	struct bk_slot *s = bk_slots(b, ix);
	uint32_t i = ix_slot_of(b, ix, hash, idx);
	if (i == BK_NIL)
		return;
	/* Backward shift: pull later entries of the probe run into the hole
	 * unless their home lies cyclically in (hole, their slot]. */
	for (uint32_t j = i;;) {
		j = ix_next(ix, j);
		if (s[j].idx == BK_NIL)
			break;
		if (ix_dist(ix, ix_home(ix, s[j].hash), j) >= ix_dist(ix, i, j)) {
			s[i] = s[j];
			i = j;
		}
	}
	s[i].hash = 0;
	s[i].idx = BK_NIL;
	ix->count--;
}

uint32_t bk_index_used(const struct book *b, const struct bk_index *ix)
{
	const struct bk_slot *s = bk_slots(b, ix);
	uint32_t n = 0;
	for (uint32_t i = 0; i < ix->n; i++)
		n += s[i].idx != BK_NIL;
	return n;
}

/* ---- keys ---- */

/*
 * Hashes prepared before the lock (book.h, book_prepare_job): the last
 * keys' SipHash, process-local on purpose (each handler prepares its own
 * section's keys).  An entry holds the key's bytes as hashed and the
 * segment's SipHash key it was hashed with, so it is found only by the same
 * key of the same segment, and then it is that key's hash: never wrong,
 * whatever changed in the book meanwhile.
 */
struct prepared {
	uint64_t sipkey[2];
	uint32_t hash, len;
	uint8_t key[5 + BOOK_ID_MAX];
};

static struct prepared prepared[BOOK_PREPARED_MAX];
static unsigned nprepared;

#ifdef BOOK_LOCK_STATS
static uint64_t hashed; /* in this process's section (book_lock_stats) */

uint64_t bk_hashed_take(void)
{
	uint64_t n = hashed;
	hashed = 0;
	return n;
}
#define COUNT_HASH() (hashed++)
#else
#define COUNT_HASH() ((void)0)
#endif

/* Inside a section: the key's hash, from the memo when it was prepared. */
static uint32_t key_hash(const struct book *b, const uint8_t *key, size_t len)
{
	for (unsigned i = 0; i < nprepared; i++) {
		const struct prepared *p = &prepared[i];
		if (p->len == len && memcmp(p->key, key, len) == 0 &&
		    p->sipkey[0] == b->sipkey[0] && p->sipkey[1] == b->sipkey[1])
			return p->hash;
	}
	COUNT_HASH();
	return (uint32_t)bk_siphash24(b->sipkey, key, len);
}

/* Hashes with the copy of the SipHash key it keeps (one read of the
 * segment's), so that an entry's hash is always of the key it records. */
static uint32_t key_prepare(const struct book *b, const uint8_t *key, size_t len)
{
	uint64_t sipkey[2];
	memcpy(sipkey, b->sipkey, sizeof sipkey);
	uint32_t h = (uint32_t)bk_siphash24(sipkey, key, len);
	if (nprepared < BOOK_PREPARED_MAX) {
		struct prepared *p = &prepared[nprepared++];
		memcpy(p->sipkey, sipkey, sizeof p->sipkey);
		p->hash = h;
		p->len = (uint32_t)len;
		memcpy(p->key, key, len);
	}
	return h;
}

void book_prepared_clear(void)
{
	nprepared = 0;
}

static size_t want_key(uint8_t *buf, uint32_t client, const char *id, size_t len)
{
	buf[0] = 'W';
	memcpy(buf + 1, &client, 4);
	memcpy(buf + 5, id, len);
	return 5 + len;
}

static size_t node_key(uint8_t *buf, uint32_t conn, uint32_t service, int32_t priority)
{
	buf[0] = 'N';
	memcpy(buf + 1, &conn, 4);
	memcpy(buf + 5, &service, 4);
	memcpy(buf + 9, &priority, 4);
	return 13;
}

uint32_t bk_hash_want(const struct book *b, uint32_t client, const char *id, size_t len)
{
	uint8_t buf[5 + BOOK_ID_MAX];
	return key_hash(b, buf, want_key(buf, client, id, len));
}

uint32_t bk_hash_client(const struct book *b, const char *id, size_t len)
{
	uint8_t buf[1 + BOOK_ID_MAX];
	buf[0] = 'C';
	memcpy(buf + 1, id, len);
	COUNT_HASH();
	return (uint32_t)bk_siphash24(b->sipkey, buf, 1 + len);
}

uint32_t bk_hash_node(const struct book *b, uint32_t conn, uint32_t service, int32_t priority)
{
	uint8_t buf[13];
	return key_hash(b, buf, node_key(buf, conn, service, priority));
}

/* Without the lock: brings the key's home slot, and the record its first
 * entry names, into this CPU's cache (for writing: the section's operation
 * may write both).  A racy read of the slot is harmless: it only picks what
 * to warm. */
static void warm_slot(const struct book *b, const struct bk_index *ix, uint32_t hash, uint32_t *idx)
{
	const struct bk_slot *s = &bk_slots(b, ix)[ix_home(ix, hash)];
	__builtin_prefetch(s, 1);
	*idx = __atomic_load_n(&s->idx, __ATOMIC_RELAXED);
}

void book_prepare_job(const struct book *b, struct book_ref conn, const char *job_id)
{
	uint8_t buf[5 + BOOK_ID_MAX];
	size_t len = job_id ? strnlen(job_id, BOOK_ID_MAX + 1) : 0;
	if (conn.idx >= b->lim.max_connections || len == 0 || len > BOOK_ID_MAX)
		return;
	uint32_t client = __atomic_load_n(&bk_conn(b, conn.idx)->client, __ATOMIC_RELAXED);
	uint32_t wi, h = key_prepare(b, buf, want_key(buf, client, job_id, len));
	warm_slot(b, &b->widx, h, &wi);
	if (wi < b->lim.max_wants) {
		const struct bk_want *w = bk_want(b, wi);
		__builtin_prefetch(w, 1);
		__builtin_prefetch(w->job_id, 0);
	}
}

void book_prepare_park(const struct book *b, struct book_ref conn, uint32_t service,
		       int32_t priority)
{
	uint8_t buf[13];
	if (conn.idx >= b->lim.max_connections)
		return;
	uint32_t ni, h = key_prepare(b, buf, node_key(buf, conn.idx, service, priority));
	warm_slot(b, &b->nidx, h, &ni);
	if (ni < b->lim.max_wants)
		__builtin_prefetch(bk_node(b, ni), 1);
}

struct want_key {
	uint32_t client;
	const char *id;
	size_t len;
};

static int want_eq(const struct book *b, uint32_t idx, const void *key)
{
	const struct want_key *k = key;
	const struct bk_want *w = bk_want(b, idx);
	return w->client == k->client && w->idlen == k->len &&
	       memcmp(w->job_id, k->id, k->len) == 0;
}

uint32_t bk_find_want_hashed(const struct book *b, uint32_t hash, uint32_t client, const char *id,
			     size_t len)
{
	struct want_key k = { client, id, len };
	return ix_find(b, &b->widx, hash, want_eq, &k);
}

uint32_t bk_find_want(const struct book *b, uint32_t client, const char *id, size_t len)
{
	return bk_find_want_hashed(b, bk_hash_want(b, client, id, len), client, id, len);
}

void bk_want_index_add_hashed(struct book *b, uint32_t wi, uint32_t hash)
{
	ix_add(b, &b->widx, hash, wi);
}

void bk_want_index_add(struct book *b, uint32_t wi)
{
	const struct bk_want *w = bk_want(b, wi);
	bk_want_index_add_hashed(b, wi, bk_hash_want(b, w->client, w->job_id, w->idlen));
}

void bk_want_index_del(struct book *b, uint32_t wi)
{
	const struct bk_want *w = bk_want(b, wi);
	ix_del(b, &b->widx, bk_hash_want(b, w->client, w->job_id, w->idlen), wi);
}

struct client_key {
	const char *id;
	size_t len;
};

static int client_eq(const struct book *b, uint32_t idx, const void *key)
{
	const struct client_key *k = key;
	const struct bk_client *c = bk_client(b, idx);
	return c->idlen == k->len && memcmp(c->id, k->id, k->len) == 0;
}

uint32_t bk_find_client(const struct book *b, const char *id, size_t len)
{
	struct client_key k = { id, len };
	return ix_find(b, &b->cidx, bk_hash_client(b, id, len), client_eq, &k);
}

void bk_client_index_add(struct book *b, uint32_t ci)
{
	const struct bk_client *c = bk_client(b, ci);
	ix_add(b, &b->cidx, bk_hash_client(b, c->id, c->idlen), ci);
}

void bk_client_index_del(struct book *b, uint32_t ci)
{
	const struct bk_client *c = bk_client(b, ci);
	ix_del(b, &b->cidx, bk_hash_client(b, c->id, c->idlen), ci);
}

struct node_key {
	uint32_t conn, service;
	int32_t priority;
};

static int node_eq(const struct book *b, uint32_t idx, const void *key)
{
	const struct node_key *k = key;
	const struct bk_node *n = bk_node(b, idx);
	return n->conn == k->conn && n->service == k->service && n->priority == k->priority;
}

uint32_t bk_find_node_hashed(const struct book *b, uint32_t hash, uint32_t conn, uint32_t service,
			     int32_t priority)
{
	struct node_key k = { conn, service, priority };
	return ix_find(b, &b->nidx, hash, node_eq, &k);
}

uint32_t bk_find_node(const struct book *b, uint32_t conn, uint32_t service, int32_t priority)
{
	return bk_find_node_hashed(b, bk_hash_node(b, conn, service, priority), conn, service,
				   priority);
}

void bk_node_index_add_hashed(struct book *b, uint32_t ni, uint32_t hash)
{
	ix_add(b, &b->nidx, hash, ni);
}

void bk_node_index_del(struct book *b, uint32_t ni)
{
	const struct bk_node *n = bk_node(b, ni);
	ix_del(b, &b->nidx, bk_hash_node(b, n->conn, n->service, n->priority), ni);
}
