/*
 * booksections.c - row 4's critical sections without the daemon: one
 * process runs the book operations of the WANT -> OFFER -> DECLINE cycle
 * (256 connections each keeping one want parked, one waitgroup of 32
 * slots, as esbench's row 4) straight on a book in shared memory: take
 * the handler's mail, DECLINE each OFFER, park the next WANT.  It prints
 * the time per section (rdtsc, hot caches: the instructions' share of a
 * hold) and, for a memory trace, stores to marker words around every
 * section: bench/booksections-lines.py reads the trace of
 * `valgrind --tool=lackey --trace-mem=yes` and counts the segment's cache
 * lines each kind of section touches and writes, by table
 * (bench/notes/row4-grant-rate.md).  A tool for analysis, not a row of docs/benchmarks.md.
 *
 * Usage: booksections [CYCLES]
 */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <x86intrin.h>

#include "book/book.h"
#include "book/book_layout.h"

#define NCONN 256
#define SLOTS 32

enum {
	SEC_END,
	SEC_TAKE,
	SEC_DECLINE,
	SEC_WANT,
	NSEC
};
static const char *const NAMES[NSEC] = { "", "mail take", "DECLINE", "WANT" };

/* One marker word per cache line: the trace tells them apart by address. */
static volatile uint64_t marker[NSEC * 8];
static struct book_ref conns[NCONN];
static int next_seq[NCONN];
static uint64_t ticks[NSEC], count[NSEC];

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void enter(struct book *b, int sec)
{
	marker[sec * 8] = 1;
	book_lock(b);
	book_set_now(b, 1000);
}

static void leave(struct book *b)
{
	book_unlock(b);
	marker[SEC_END] = 1;
}

static int conn_of(uint32_t idx)
{
	for (int k = 0; k < NCONN; k++)
		if (conns[k].idx == idx)
			return k;
	abort();
}

static void want(struct book *b, int k)
{
	char id[32];
	snprintf(id, sizeof id, "%d-%d", k, next_seq[k]++);
	if (book_want(b, conns[k], id, 0, 0, 1000) != BOOK_OK)
		abort();
}

static void cycles(struct book *b, long n)
{
	struct book_mail m[64];
	for (long done = 0; done < n;) {
		uint64_t t = __rdtsc();
		enter(b, SEC_TAKE);
		size_t got = book_mail_take(b, 0, m, 64);
		leave(b);
		ticks[SEC_TAKE] += __rdtsc() - t;
		count[SEC_TAKE]++;
		for (size_t i = 0; i < got; i++) {
			if (m[i].kind != MAIL_OFFER)
				continue; /* the HELLOs of the connections opened */
			int k = conn_of(m[i].conn.idx);
			done++;
			t = __rdtsc();
			enter(b, SEC_DECLINE);
			if (book_decline(b, m[i].conn, m[i].job_id, m[i].token) != BOOK_OK)
				abort();
			leave(b);
			ticks[SEC_DECLINE] += __rdtsc() - t;
			count[SEC_DECLINE]++;
			t = __rdtsc();
			enter(b, SEC_WANT);
			want(b, k);
			leave(b);
			ticks[SEC_WANT] += __rdtsc() - t;
			count[SEC_WANT]++;
		}
	}
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	struct book_limits l = { .max_connections = 2000,
				 .max_wants = 65536,
				 .max_wants_per_connection = 65536,
				 .nhandlers = 1,
				 .offer_timeout_ms = 60000,
				 .resume_grace_ms = 5000 };
	struct book_topology t;
	memset(&t, 0, sizeof t);
	t.nwaitgroups = 1;
	t.waitgroups[0].processes = SLOTS;
	strcpy(t.waitgroups[0].name, "bk");
	t.nservices = 1;
	t.services[0].enabled = 1;
	strcpy(t.services[0].name, "bk");
	size_t size = book_size(&l);
	void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	static const uint8_t iid[16] = { 1 };
	if (mem == MAP_FAILED || book_init(mem, &l, &t, iid, 7) != 0)
		return 1;
	struct book *b = book_from_mem(mem);
	for (int k = 0; k < NCONN; k++) {
		char id[32];
		snprintf(id, sizeof id, "gr%d", k);
		enter(b, SEC_END);
		if (book_conn_open(b, 0, id, 1000, &conns[k]) != BOOK_OK)
			return 1;
		want(b, k);
		leave(b);
	}
	/* for booksections-lines.py: the markers, the segment and its tables */
	fprintf(stderr, "markers %p %p %p %p segment %p %zu\n", (void *)&marker[0],
		(void *)&marker[8], (void *)&marker[16], (void *)&marker[24], mem, size);
	fprintf(stderr,
		"tables conns %lu clients %lu wants %lu nodes %lu scratch %lu widx %lu cidx %lu "
		"nidx %lu rslots %lu\n",
		(unsigned long)b->off_conns, (unsigned long)b->off_clients,
		(unsigned long)b->off_wants, (unsigned long)b->off_nodes,
		(unsigned long)b->off_scratch, (unsigned long)b->widx.off,
		(unsigned long)b->cidx.off, (unsigned long)b->nidx.off,
		(unsigned long)b->off_rslots);
	uint64_t c0 = __rdtsc(), t0 = now_ns();
	cycles(b, n);
	double ns_per_tick = (double)(now_ns() - t0) / (double)(__rdtsc() - c0);
	printf("%ld cycles; per section, lock and unlock included (hot caches):\n", n);
	for (int s = SEC_TAKE; s < NSEC; s++)
		printf("  %-9s %8.2f per cycle  %6.0f ns\n", NAMES[s], (double)count[s] / (double)n,
		       (double)ticks[s] * ns_per_tick / (double)count[s]);
	return 0;
}
