/*
 * book_usage.c - what a connection or a client has in the book right now,
 * for the limits that the handlers enforce (idleTimeoutSec,
 * maxJobsPerClient).  Read-only: nothing here changes the book.
 *
 * Both answers are computed from the derived lists (a conn's want list, a
 * client's job list), which book_repair rebuilds from the primary want
 * records; so they are right after a crash inside the critical section as
 * well, without a counter of their own to repair.  Cost: O(jobs the client
 * owns), which maxJobsPerClient keeps small where it matters.
 */
#include "autoconfig.h"
#include "book/book.h"

#include "book/book_impl.h"

uint32_t bk_client_running(const struct book *b, uint32_t ci)
{
	uint32_t n = 0;

	if (ci == BK_NIL)
		return 0;
	for (uint32_t wi = bk_client(b, ci)->job_head; wi != BK_NIL; wi = bk_want(b, wi)->o_next)
		if (bk_want(b, wi)->state == WANT_RUNNING)
			n++;
	return n;
}

uint32_t book_client_running(const struct book *b, struct book_ref conn)
{
	uint32_t c = bk_conn_get(b, conn);

	return c == BK_NIL ? 0 : bk_client_running(b, bk_conn(b, c)->client);
}

int book_conn_busy(const struct book *b, struct book_ref conn)
{
	uint32_t c = bk_conn_get(b, conn);

	if (c == BK_NIL)
		return 0;
	const struct bk_conn *cn = bk_conn(b, c);
	if (cn->nwants > 0)
		return 1;
	for (uint32_t wi = bk_client(b, cn->client)->job_head; wi != BK_NIL;
	     wi = bk_want(b, wi)->o_next) {
		const struct bk_want *w = bk_want(b, wi);
		if (w->conn == c && w->conn_gen == cn->gen)
			return 1;
	}
	return 0;
}
