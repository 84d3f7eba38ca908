/*
 * book_heap.c - see book_heap.h.  Owns the child/sibling/prev links of the
 * nodes and each service's root.  Invariant (checked by book_check): every
 * node of a service is reachable from its root exactly once, the links are
 * mutually consistent, and no child is less than its parent.
 */
#include "autoconfig.h"
#include "book/book_heap.h"

int bk_node_less(const struct book *b, uint32_t x, uint32_t y)
{
	const struct bk_node *nx = bk_node(b, x), *ny = bk_node(b, y);
	if (nx->priority != ny->priority)
		return nx->priority > ny->priority;
	if (nx->stamp != ny->stamp)
		return nx->stamp < ny->stamp;
	return nx->seq < ny->seq;
}

/* Melds two roots (prev and sibling BK_NIL); returns the new root. */
static uint32_t meld(struct book *b, uint32_t x, uint32_t y)
{
	if (x == BK_NIL)
		return y;
	if (y == BK_NIL)
		return x;
	if (bk_node_less(b, y, x)) {
		uint32_t t = x;
		x = y;
		y = t;
	}
	struct bk_node *nx = bk_node(b, x), *ny = bk_node(b, y);
	ny->sibling = nx->child;
	if (nx->child != BK_NIL)
		bk_node(b, nx->child)->prev = y;
	ny->prev = x;
	nx->child = y;
	return x;
}

/* Two-pass pairing of a sibling list starting at first; returns a root. */
static uint32_t merge_pairs(struct book *b, uint32_t first)
{
	uint32_t acc = BK_NIL; /* pair results, reversed, linked by sibling */
	while (first != BK_NIL) {
		uint32_t x = first, y = bk_node(b, x)->sibling, next = BK_NIL;
		if (y != BK_NIL) {
			next = bk_node(b, y)->sibling;
			bk_node(b, y)->prev = bk_node(b, y)->sibling = BK_NIL;
		}
		bk_node(b, x)->prev = bk_node(b, x)->sibling = BK_NIL;
		uint32_t m = meld(b, x, y);
		bk_node(b, m)->sibling = acc;
		acc = m;
		first = next;
	}
	uint32_t root = BK_NIL;
	while (acc != BK_NIL) {
		uint32_t next = bk_node(b, acc)->sibling;
		bk_node(b, acc)->sibling = BK_NIL;
		root = meld(b, root, acc);
		acc = next;
	}
	return root;
}

void bk_heap_insert(struct book *b, uint32_t service, uint32_t n)
{
	struct bk_service *s = &b->svcs[service];
	struct bk_node *nn = bk_node(b, n);
	nn->child = nn->sibling = nn->prev = BK_NIL;
	s->root = meld(b, s->root, n);
}

void bk_heap_remove(struct book *b, uint32_t service, uint32_t n)
{
	struct bk_service *s = &b->svcs[service];
	struct bk_node *nn = bk_node(b, n);
	uint32_t sub = merge_pairs(b, nn->child);
	nn->child = BK_NIL;
	if (s->root == n) {
		s->root = sub;
	} else {
		struct bk_node *p = bk_node(b, nn->prev);
		if (p->child == n)
			p->child = nn->sibling;
		else
			p->sibling = nn->sibling;
		if (nn->sibling != BK_NIL)
			bk_node(b, nn->sibling)->prev = nn->prev;
		s->root = meld(b, s->root, sub);
	}
	nn->prev = nn->sibling = BK_NIL;
}

uint32_t bk_heap_next(const struct book *b, uint32_t x)
{
	const struct bk_node *n = bk_node(b, x);
	if (n->child != BK_NIL)
		return n->child;
	for (;;) {
		n = bk_node(b, x);
		if (n->sibling != BK_NIL)
			return n->sibling;
		/* back over left siblings to the leftmost child, then up */
		while (n->prev != BK_NIL && bk_node(b, n->prev)->child != x) {
			x = n->prev;
			n = bk_node(b, x);
		}
		if (n->prev == BK_NIL)
			return BK_NIL;
		x = n->prev;
	}
}
