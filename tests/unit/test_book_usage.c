/*
 * test_book_usage.c - unit tests of what the book tells the handlers for
 * the limits (src/book/book_usage.c, book_accept's maxJobsPerClient):
 * the running jobs of a client across its connections and handlers, the
 * JOB refused beyond max_jobs_per_client (running jobs and finished ones
 * whose DONE is not delivered) with the offer left standing, the
 * count right after a crash inside book_accept (repair), and when a
 * connection is busy for the idle timeout.
 */
#include "autoconfig.h"

#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "book_fixture.h"
#include "suite.h"

#define RC(call, want) CU_ASSERT_EQUAL((call), (want))

/* one waitgroup of `procs` slots, one service */
static void mk(struct fx *f, uint32_t procs, uint32_t max_jobs)
{
	struct book_limits l;
	struct book_topology t;
	uint32_t p[1] = { procs }, wg[1] = { 0 };

	fx_limits(&l);
	l.max_jobs_per_client = max_jobs;
	fx_topo(&t, 1, p, 1, wg);
	CU_ASSERT_FATAL(fx_init(f, &l, &t, 99) == 0);
}

static uint32_t running(struct fx *f, struct book_ref conn)
{
	fx_lock(f);
	uint32_t n = book_client_running(f->b, conn);
	fx_unlock(f);
	return n;
}

static int busy(struct fx *f, struct book_ref conn)
{
	fx_lock(f);
	int n = book_conn_busy(f->b, conn);
	fx_unlock(f);
	return n;
}

/* The book passes book_check (the first violation is printed if not). */
static void checked(struct fx *f)
{
	char why[256] = "";

	if (fx_check(f, why, sizeof why) == 0)
		return;
	printf("\n  book_check: %s\n", why);
	CU_FAIL("the book is inconsistent");
}

static void test_limit_across_conns(void)
{
	struct fx f;
	struct book_ref k1, k2, m, wa, wb, wm, wc;
	struct book_position pos;

	mk(&f, 4, 2);
	RC(fx_open(&f, 0, "k", 0, &k1), BOOK_OK);
	RC(fx_open(&f, 1, "k", 0, &k2), BOOK_OK);
	RC(fx_open(&f, 2, "m", 0, &m), BOOK_OK);
	RC(fx_want(&f, k1, "a", 0, 0, 0), BOOK_OK);
	RC(fx_want(&f, k2, "b", 0, 0, 0), BOOK_OK);
	RC(fx_want(&f, k1, "c", 0, 0, 0), BOOK_OK);
	RC(fx_want(&f, m, "x", 0, 0, 0), BOOK_OK);
	CU_ASSERT_EQUAL(running(&f, k1), 0);
	RC(fx_take_job(&f, k1, "a", &wa), BOOK_OK);
	RC(fx_take_job(&f, k2, "b", &wb), BOOK_OK);
	/* both connections see the client's two */
	CU_ASSERT_EQUAL(running(&f, k1), 2);
	CU_ASSERT_EQUAL(running(&f, k2), 2);
	/* the third is refused and stays offered (the caller withdraws it) */
	RC(fx_take_job(&f, k1, "c", &wc), BOOK_E_LIMIT_JOBS);
	RC(fx_query(&f, k1, "c", &pos), BOOK_OK);
	CU_ASSERT_EQUAL(pos.state, WANT_OFFERED);
	checked(&f);
	/* another client is not affected */
	RC(fx_take_job(&f, m, "x", &wm), BOOK_OK);
	CU_ASSERT_EQUAL(running(&f, m), 1);
	/* a finished job counts until its DONE is delivered (protocol 2:
	 * acknowledged), so a client that never acknowledges is stopped here */
	RC(fx_finished(&f, wa, 0, 5, NULL), BOOK_OK);
	CU_ASSERT_EQUAL(running(&f, k1), 1);
	RC(fx_take_job(&f, k1, "c", &wc), BOOK_E_LIMIT_JOBS);
	RC(fx_delivered(&f, wa), BOOK_OK);
	RC(fx_take_job(&f, k1, "c", &wc), BOOK_OK);
	CU_ASSERT_EQUAL(running(&f, k2), 2);
	checked(&f);
	/* stale refs count nothing */
	fx_close(&f, k1, 0);
	CU_ASSERT_EQUAL(running(&f, k1), 0);
	CU_ASSERT_EQUAL(running(&f, k2), 2);
	checked(&f);
	fx_fini(&f);

	/* 0: no limit */
	mk(&f, 3, 0);
	RC(fx_open(&f, 0, "k", 0, &k1), BOOK_OK);
	for (int i = 0; i < 3; i++) {
		char id[4];
		snprintf(id, sizeof id, "j%d", i);
		RC(fx_want(&f, k1, id, 0, 0, 0), BOOK_OK);
		RC(fx_take_job(&f, k1, id, &wa), BOOK_OK);
	}
	CU_ASSERT_EQUAL(running(&f, k1), 3);
	fx_fini(&f);
}

static const char *fault_target;

static void fault_hook(const char *point)
{
	if (fault_target && strcmp(point, fault_target) == 0)
		_exit(0);
}

static void test_count_after_repair(void)
{
	struct fx f;
	struct book_ref k, w;

	mk(&f, 3, 1);
	RC(fx_open(&f, 0, "k", 0, &k), BOOK_OK);
	RC(fx_want(&f, k, "a", 0, 0, 0), BOOK_OK);
	RC(fx_want(&f, k, "b", 0, 0, 0), BOOK_OK);
	uint64_t ta = fx_token(&f, "a");
	CU_ASSERT_FATAL(ta != 0);
	fflush(stdout);
	/* a child dies inside book_accept: the want RUNNING, the client's job
	 * list not updated yet */
	pid_t pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		fault_target = "accept.mid";
		book_set_fault_hook(fault_hook);
		struct book_ref want;
		if (book_lock(f.b) < 0)
			_exit(2);
		book_accept(f.b, k, "a", ta, 0, &want);
		_exit(3);
	}
	int status = 0;
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* the repair counts the job that was half accepted */
	CU_ASSERT_EQUAL(running(&f, k), 1);
	CU_ASSERT_EQUAL(f.last_lock, 1);
	checked(&f);
	RC(fx_take_job(&f, k, "b", &w), BOOK_E_LIMIT_JOBS);
	fx_fini(&f);
}

static void test_conn_busy(void)
{
	struct fx f;
	struct book_ref k1, k2, w;

	mk(&f, 1, 0);
	RC(fx_open(&f, 0, "k", 0, &k1), BOOK_OK);
	RC(fx_open(&f, 1, "k", 0, &k2), BOOK_OK);
	CU_ASSERT_EQUAL(busy(&f, k1), 0);
	RC(fx_want(&f, k1, "a", 0, 0, 0), BOOK_OK); /* offered */
	RC(fx_want(&f, k1, "b", 0, 0, 0), BOOK_OK); /* parked */
	CU_ASSERT_EQUAL(busy(&f, k1), 1);
	RC(fx_unwant(&f, k1, "b"), BOOK_OK);
	CU_ASSERT_EQUAL(busy(&f, k1), 1); /* still the offer */
	RC(fx_take_job(&f, k1, "a", &w), BOOK_OK);
	CU_ASSERT_EQUAL(busy(&f, k1), 1); /* owns a running job */
	CU_ASSERT_EQUAL(busy(&f, k2), 0); /* the other conn does not */
	RC(fx_finished(&f, w, 0, 1, NULL), BOOK_OK);
	CU_ASSERT_EQUAL(busy(&f, k1), 1); /* its DONE is still to come */
	RC(fx_delivered(&f, w), BOOK_OK);
	CU_ASSERT_EQUAL(busy(&f, k1), 0);
	/* a parked want on its own keeps it busy too */
	RC(fx_want(&f, k2, "c", 0, 0, 0), BOOK_OK);
	RC(fx_want(&f, k2, "d", 0, 0, 0), BOOK_OK);
	CU_ASSERT_EQUAL(busy(&f, k2), 1);
	fx_close(&f, k2, 0);
	CU_ASSERT_EQUAL(busy(&f, k2), 0); /* stale */
	checked(&f);
	fx_fini(&f);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "maxJobsPerClient across connections", test_limit_across_conns },
		{ "the count after a crash in book_accept", test_count_after_repair },
		{ "busy connections (idle timeout)", test_conn_busy },
		{ NULL, NULL },
	};
	return run_suite("book_usage", cases);
}
