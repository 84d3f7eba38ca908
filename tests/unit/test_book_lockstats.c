/*
 * test_book_lockstats.c - unit tests of the book lock's figures
 * (book_lock_stats, BOOK_LOCK_STATS in src/book/book.c), linked against
 * the book built with them (libesbook_lockstat.a, what
 * bench/execserver-lockstat uses): every critical section is counted once
 * and its hold time lands in the histogram bucket that contains it; a
 * book_lock that finds the lock taken by another process counts as a wait
 * of the right length; a section whose keys were prepared before the lock
 * (book_prepare_job) computes no SipHash of them.  (test_book checks that a
 * normal build keeps none.)
 */
#include "autoconfig.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "book/book.h"
#include "book_fixture.h"
#include "suite.h"

static void mk(struct fx *f)
{
	struct book_limits l;
	struct book_topology t;
	uint32_t procs[1] = { 1 }, wgs[1] = { 0 };
	fx_limits(&l);
	fx_topo(&t, 1, procs, 1, wgs);
	CU_ASSERT_FATAL(fx_init(f, &l, &t, 7) == 0);
}

static uint64_t hist_sum(const struct book_lock_stats *st)
{
	uint64_t n = 0;
	for (unsigned i = 0; i < BOOK_LOCK_BUCKETS; i++)
		n += st->hold_hist[i];
	return n;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0)
		;
}

static void test_bucket_edges(void)
{
	CU_ASSERT_EQUAL(book_lock_bucket_ns(0), 7);
	CU_ASSERT_EQUAL(book_lock_bucket_ns(7), 63);
	CU_ASSERT_EQUAL(book_lock_bucket_ns(8), 71);   /* 64..71 */
	CU_ASSERT_EQUAL(book_lock_bucket_ns(15), 127); /* 120..127 */
	CU_ASSERT_EQUAL(book_lock_bucket_ns(16), 143); /* 128..143 */
	for (unsigned i = 1; i < BOOK_LOCK_BUCKETS; i++)
		CU_ASSERT(book_lock_bucket_ns(i) > book_lock_bucket_ns(i - 1));
	/* a step is at most an eighth of the values it covers */
	for (unsigned i = 9; i < BOOK_LOCK_BUCKETS; i++)
		CU_ASSERT(8 * (book_lock_bucket_ns(i) - book_lock_bucket_ns(i - 1)) <=
			  book_lock_bucket_ns(i - 1) + 1);
}

static void test_counts_and_holds(void)
{
	struct fx f;
	struct book_lock_stats a, b;
	mk(&f);
	CU_ASSERT_EQUAL_FATAL(book_lock_stats(f.b, &a), 0);
	for (int i = 0; i < 1000; i++) {
		fx_lock(&f);
		fx_unlock(&f);
	}
	/* one long hold: 20 ms, in a bucket whose edge is at least that */
	fx_lock(&f);
	sleep_ms(20);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(book_lock_stats(f.b, &b), 0);
	CU_ASSERT_EQUAL(b.ops - a.ops, 1001);
	CU_ASSERT_EQUAL(hist_sum(&b) - hist_sum(&a), 1001);
	CU_ASSERT_EQUAL(b.waits, a.waits);
	CU_ASSERT(b.hold_ns - a.hold_ns >= 20000000);
	unsigned top = 0;
	for (unsigned i = 0; i < BOOK_LOCK_BUCKETS; i++)
		if (b.hold_hist[i] != a.hold_hist[i])
			top = i;
	CU_ASSERT_EQUAL(b.hold_hist[top] - a.hold_hist[top], 1);
	CU_ASSERT(book_lock_bucket_ns(top) >= 20000000);
	CU_ASSERT(book_lock_bucket_ns(top - 1) < b.hold_ns - a.hold_ns);
	fx_fini(&f);
}

static void test_wait_counted(void)
{
	struct fx f;
	struct book_lock_stats a, b;
	int ready[2];
	mk(&f);
	CU_ASSERT_FATAL(pipe(ready) == 0);
	book_lock_stats(f.b, &a);
	fflush(stdout);
	pid_t pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		if (book_lock(f.b) < 0)
			_exit(2);
		if (write(ready[1], "x", 1) != 1)
			_exit(3);
		sleep_ms(60);
		book_unlock(f.b);
		_exit(0);
	}
	char c;
	CU_ASSERT_EQUAL(read(ready[0], &c, 1), 1);
	fx_lock(&f); /* the child holds it for 60 ms */
	fx_unlock(&f);
	int status = 0;
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	book_lock_stats(f.b, &b);
	CU_ASSERT_EQUAL(b.ops - a.ops, 2);
	CU_ASSERT_EQUAL(b.waits - a.waits, 1);
	CU_ASSERT(b.wait_ns - a.wait_ns >= 40000000);
	CU_ASSERT(b.wait_ns - a.wait_ns < 5000000000ull);
	CU_ASSERT(b.hold_ns - a.hold_ns >= 60000000);
	close(ready[0]);
	close(ready[1]);
	fx_fini(&f);
}

/* The token of the latest OFFER of job id in the mail log (pumped first). */
static uint64_t offer_token(struct fx *f, const char *id)
{
	fx_pump(f);
	for (size_t i = f->nlog; i-- > 0;)
		if (f->log[i].m.kind == MAIL_OFFER && strcmp(f->log[i].m.job_id, id) == 0)
			return f->log[i].m.token;
	CU_FAIL("no OFFER");
	return 0;
}

/* Row 4's cycle on connection a (one slot, held by a's offer of j<i>; b's
 * want parked): DECLINE j<i> and WANT j<i+1> in one section, which grants
 * the slot to b's want.  prepare: the keys hashed before the lock as the
 * broker does (book_prepare_job, book_prepare_park).  Returns the SipHash
 * computations the section made. */
static uint64_t cycle_hashes(struct fx *f, struct book_ref a, int i, int prepare)
{
	char old[16], next[16];
	struct book_lock_stats s0, s1;
	snprintf(old, sizeof old, "j%d", i);
	snprintf(next, sizeof next, "j%d", i + 1);
	uint64_t token = offer_token(f, old);
	if (prepare) {
		book_prepare_job(f->b, a, old);
		book_prepare_job(f->b, a, next);
		book_prepare_park(f->b, a, 0, 0);
	}
	book_lock_stats(f->b, &s0);
	fx_lock(f);
	CU_ASSERT_EQUAL(book_decline(f->b, a, old, token), BOOK_OK);
	CU_ASSERT_EQUAL(book_want(f->b, a, next, 0, 0, 1), BOOK_OK);
	fx_unlock(f);
	book_prepared_clear();
	book_lock_stats(f->b, &s1);
	return s1.hashes - s0.hashes;
}

/* The section of a DECLINE + WANT hashes five keys (the declined want's
 * look-up and removal, the new want's look-up and insertion: one key
 * each, and the nodes of the parked want and of the granted one); with
 * the keys prepared before the lock only the granted want's node is
 * hashed inside. */
static void test_prepared_hashes(void)
{
	struct fx f;
	struct book_limits l;
	struct book_topology t;
	uint32_t procs[1] = { 1 }, wgs[1] = { 0 };
	struct book_ref a, b;
	fx_limits(&l);
	fx_topo(&t, 1, procs, 1, wgs);
	CU_ASSERT_FATAL(fx_init(&f, &l, &t, 7) == 0);
	CU_ASSERT_FATAL(fx_open(&f, 0, "ca", 1, &a) == BOOK_OK);
	CU_ASSERT_FATAL(fx_open(&f, 1, "cb", 1, &b) == BOOK_OK);
	CU_ASSERT_FATAL(fx_want(&f, a, "j0", 0, 0, 1) == BOOK_OK); /* offered */
	CU_ASSERT_FATAL(fx_want(&f, b, "k0", 0, 0, 1) == BOOK_OK); /* parked */
	CU_ASSERT_EQUAL(cycle_hashes(&f, a, 0, 0), 5);
	/* the slot went to b's k0: b gives it back, a's j1 gets it */
	CU_ASSERT_EQUAL(fx_decline(&f, b, "k0", offer_token(&f, "k0")), BOOK_OK);
	CU_ASSERT_EQUAL(fx_want(&f, b, "k1", 0, 0, 1), BOOK_OK);
	CU_ASSERT_EQUAL(cycle_hashes(&f, a, 1, 1), 1);
	CU_ASSERT_EQUAL(fx_fini_checked(&f), 0);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "histogram buckets", test_bucket_edges },
		{ "sections counted, holds in their bucket", test_counts_and_holds },
		{ "a wait for another process is counted", test_wait_counted },
		{ "keys prepared before the lock are not hashed in it", test_prepared_hashes },
		{ NULL, NULL },
	};
	return run_suite("book lock figures", cases);
}
