/*
 * book_heap.h - the per-service pairing heap of nodes, keyed by the grant
 * rule: (-priority, stamp(conn, wg), seq of the node's head want).
 *
 * Links live in the node table (child, sibling, prev; prev is the parent
 * for a leftmost child and the left sibling otherwise; the root has
 * prev = sibling = BK_NIL).  Amortized costs: insert O(1), remove (any
 * node, including the root) O(log n).  A key only ever grows (a head want
 * leaves, the conn's stamp advances); callers then remove the node, write
 * its new key (bk_node stamp / seq) and re-insert it.
 */
#ifndef ES_BOOK_HEAP_H
#define ES_BOOK_HEAP_H

#include <stdint.h>

#include "book/book_layout.h"

/* Grant-rule order of two nodes of the same waitgroup (their keys). */
int bk_node_less(const struct book *b, uint32_t x, uint32_t y);
void bk_heap_insert(struct book *b, uint32_t service, uint32_t n);
void bk_heap_remove(struct book *b, uint32_t service, uint32_t n);
/* Pre-order walk of a heap: start at the root, BK_NIL after the last. */
uint32_t bk_heap_next(const struct book *b, uint32_t x);

#endif
