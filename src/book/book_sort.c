/*
 * book_sort.c - in-place heapsort of an array of table indices with a
 * caller's order; used by book_repair and book_query, which must not
 * allocate.  O(n log n), not stable (callers order by unique keys).
 */
#include "autoconfig.h"
#include "book/book_impl.h"

static void sift(const struct book *b, uint32_t *a, size_t i, size_t n, bk_less_fn less,
		 const void *ctx)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		if (l < n && less(b, ctx, a[m], a[l]))
			m = l;
		if (l + 1 < n && less(b, ctx, a[m], a[l + 1]))
			m = l + 1;
		if (m == i)
			return;
		uint32_t t = a[i];
		a[i] = a[m];
		a[m] = t;
		i = m;
	}
}

void bk_sort(const struct book *b, uint32_t *a, size_t n, bk_less_fn less, const void *ctx)
{
	if (n < 2)
		return;
	for (size_t i = n / 2; i-- > 0;)
		sift(b, a, i, n, less, ctx);
	for (size_t end = n - 1; end > 0; end--) {
		uint32_t t = a[0];
		a[0] = a[end];
		a[end] = t;
		sift(b, a, 0, end, less, ctx);
	}
}
