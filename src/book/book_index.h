/*
 * book_index.h - the book's three hash indexes: (client, job_id) -> want,
 * client_id -> named client, (conn, service, priority) -> node.
 *
 * Open addressing over n slots (4/3 of the entries the table can ever
 * hold, and one more, so probes stay short and always end at an empty
 * slot), linear probing, backward-shift deletion (no tombstones), keys
 * hashed with keyed
 * SipHash-2-4.  A slot stores the entry's table index and the low 32 bits
 * of its hash; the key itself is read from the table record.  The indexes
 * are derived data: book_repair() clears and refills them.  bk_hash_want
 * and bk_hash_node first look in the memo of hashes prepared before the
 * lock (book.h, book_prepare_job).
 */
#ifndef ES_BOOK_INDEX_H
#define ES_BOOK_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "book/book_layout.h"

/* Slots needed for up to `entries` entries. */
uint32_t bk_index_slots(uint32_t entries);
void bk_index_clear(struct book *b, struct bk_index *ix);

/* want index: key (w->client, w->job_id).  The _hashed forms take the
 * key's bk_hash_want, so that an operation that looks a key up and then
 * adds it (book_want) hashes it once. */
uint32_t bk_find_want(const struct book *b, uint32_t client, const char *id, size_t len);
uint32_t bk_find_want_hashed(const struct book *b, uint32_t hash, uint32_t client, const char *id,
			     size_t len);
void bk_want_index_add(struct book *b, uint32_t wi);
void bk_want_index_add_hashed(struct book *b, uint32_t wi, uint32_t hash);
void bk_want_index_del(struct book *b, uint32_t wi);

/* client index: key c->id, named clients only */
uint32_t bk_find_client(const struct book *b, const char *id, size_t len);
void bk_client_index_add(struct book *b, uint32_t ci);
void bk_client_index_del(struct book *b, uint32_t ci);

/* node index: key (n->conn, n->service, n->priority); _hashed as above
 * (bk_hash_node; bk_park hashes once) */
uint32_t bk_find_node(const struct book *b, uint32_t conn, uint32_t service, int32_t priority);
uint32_t bk_find_node_hashed(const struct book *b, uint32_t hash, uint32_t conn, uint32_t service,
			     int32_t priority);
void bk_node_index_add_hashed(struct book *b, uint32_t ni, uint32_t hash);
void bk_node_index_del(struct book *b, uint32_t ni);

/* For book_check: how many slots are in use (compared with ix->count and
 * the table). */
uint32_t bk_index_used(const struct book *b, const struct bk_index *ix);
uint32_t bk_hash_want(const struct book *b, uint32_t client, const char *id, size_t len);
uint32_t bk_hash_client(const struct book *b, const char *id, size_t len);
uint32_t bk_hash_node(const struct book *b, uint32_t conn, uint32_t service, int32_t priority);
#ifdef BOOK_LOCK_STATS
/* SipHash computations of this process since the last call (book_unlock
 * adds them to the lock's figures). */
uint64_t bk_hashed_take(void);
#endif

#endif
