/*
 * test_book_token.c - unit tests of the want-book's legacy tokens
 * (book_token_*, src/book/book_token.c): a token holds a slot, is never
 * issued while a want is parked, expires and returns its slot to the grant
 * rule, is single use and bound to its service, survives the purge of a
 * handler unless that handler ran its job, and is rebuilt by the repair
 * after a crash inside book_token_issue.  Each test ends with book_check.
 */
#include "autoconfig.h"

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "book/book.h"
#include "book_fixture.h"
#include "suite.h"

#define OK(x) CU_ASSERT_EQUAL((x), BOOK_OK)
#define RC(x, rc) CU_ASSERT_EQUAL((x), (rc))

/* wg0 (p0 slots): services 0 and 1; wg1 (1 slot): service 2; service 3
 * (wg0) disabled. */
static void mk(struct fx *f, uint32_t p0)
{
	struct book_limits l;
	struct book_topology t;
	uint32_t procs[2] = { p0, 1 }, wgs[4] = { 0, 0, 1, 0 };
	fx_limits(&l);
	l.max_tokens = p0 + 1;
	fx_topo(&t, 2, procs, 4, wgs);
	t.services[3].enabled = 0;
	CU_ASSERT_FATAL(fx_init(f, &l, &t, 777) == 0);
}

static void done(struct fx *f)
{
	char why[256];
	int rc = fx_check(f, why, sizeof why);
	if (rc)
		printf("\n  book_check: %s\n", why);
	CU_ASSERT_EQUAL(rc, 0);
	fx_fini(f);
}

static enum book_rc issue(struct fx *f, uint32_t svc, uint64_t now, struct book_ref *tok,
			  uint64_t *secret)
{
	fx_lock(f);
	enum book_rc rc = book_token_issue(f->b, svc, now, 1000, tok, secret);
	fx_unlock(f);
	return rc;
}

static enum book_rc use(struct fx *f, struct book_ref tok, uint64_t secret, uint32_t svc,
			uint32_t runner, uint64_t now)
{
	fx_lock(f);
	enum book_rc rc = book_token_use(f->b, tok, secret, svc, runner, now);
	fx_unlock(f);
	return rc;
}

static enum book_rc finished(struct fx *f, struct book_ref tok, int failed)
{
	struct book_outcome o = { .exit_code = failed,
				  .failed = (uint8_t)failed,
				  .duration_ms = 40 };
	fx_lock(f);
	enum book_rc rc = book_token_finished(f->b, tok, &o);
	fx_unlock(f);
	return rc;
}

static uint32_t tokens(struct fx *f, uint32_t wg)
{
	struct book_wg_status st;
	fx_wg(f, wg, &st);
	return st.tokens;
}

static void test_issue_holds_a_slot(void)
{
	struct fx f;
	struct book_ref t1, t2, t3, c;
	uint64_t s1, s2, s3;
	mk(&f, 2);
	OK(issue(&f, 0, 0, &t1, &s1));
	OK(issue(&f, 1, 0, &t2, &s2)); /* another service of wg0 */
	CU_ASSERT_EQUAL(tokens(&f, 0), 2);
	CU_ASSERT(s1 != s2);
	RC(issue(&f, 0, 0, &t3, &s3), BOOK_E_BUSY);
	OK(issue(&f, 2, 0, &t3, &s3)); /* wg1 is separate */
	RC(issue(&f, 9, 0, &t3, &s3), BOOK_E_UNKNOWN_SERVICE);
	RC(issue(&f, 3, 0, &t3, &s3), BOOK_E_DISABLED);
	/* a WANT finds no slot: it parks */
	OK(fx_open(&f, 0, NULL, 0, &c));
	OK(fx_want(&f, c, "w", 0, 0, 0));
	struct book_wg_status st;
	fx_wg(&f, 0, &st);
	CU_ASSERT_EQUAL(st.waiting, 1);
	CU_ASSERT_EQUAL(st.offered, 0);
	done(&f);
}

/* A parked want blocks tokens, also when a slot frees: the slot goes to
 * the want. */
static void test_parked_want_blocks(void)
{
	struct fx f;
	struct book_ref c, r, tok;
	uint64_t sec;
	mk(&f, 1);
	OK(fx_open(&f, 0, NULL, 0, &c));
	OK(fx_want(&f, c, "a", 0, 0, 0));
	OK(fx_want(&f, c, "b", 0, 0, 0)); /* parked */
	RC(issue(&f, 0, 0, &tok, &sec), BOOK_E_BUSY);
	OK(fx_take_job(&f, c, "a", &r));
	OK(fx_finish(&f, r, 5, 0));
	CU_ASSERT_EQUAL(fx_token(&f, "b") != 0, 1); /* b got the slot */
	RC(issue(&f, 0, 0, &tok, &sec), BOOK_E_BUSY);
	OK(fx_unwant(&f, c, "b")); /* slot free, nothing parked */
	OK(issue(&f, 0, 0, &tok, &sec));
	done(&f);
}

/* An unused token expires at its deadline and its slot goes to a want
 * parked after it was issued. */
static void test_expiry_returns_the_slot(void)
{
	struct fx f;
	struct book_ref c, tok;
	uint64_t sec;
	mk(&f, 1);
	OK(issue(&f, 0, 100, &tok, &sec));
	fx_lock(&f);
	CU_ASSERT_EQUAL(book_next_deadline(f.b), 1100);
	fx_unlock(&f);
	OK(fx_open(&f, 0, NULL, 200, &c));
	OK(fx_want(&f, c, "late", 1, 0, 200));
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER, "late"), 0);
	CU_ASSERT_EQUAL(fx_expire(&f, 1099), 0);
	CU_ASSERT_EQUAL(tokens(&f, 0), 1);
	CU_ASSERT_EQUAL(fx_expire(&f, 1100), 1);
	CU_ASSERT_EQUAL(tokens(&f, 0), 0);
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER, "late"), 1);
	/* the expired token is gone */
	RC(use(&f, tok, sec, 0, 0, 1100), BOOK_E_UNKNOWN_JOB);
	done(&f);
}

static void test_use_single_and_bound(void)
{
	struct fx f;
	struct book_ref tok, stale;
	uint64_t sec;
	mk(&f, 1);
	OK(issue(&f, 0, 0, &tok, &sec));
	RC(use(&f, tok, sec + 1, 0, 0, 10), BOOK_E_UNKNOWN_JOB); /* wrong secret */
	RC(use(&f, tok, sec, 1, 0, 10), BOOK_E_BAD_TOKEN);       /* other service */
	RC(use(&f, tok, sec, 0, 99, 10), BOOK_E_INVALID);        /* runner */
	stale = tok;
	stale.gen++;
	RC(use(&f, stale, sec, 0, 0, 10), BOOK_E_UNKNOWN_JOB);
	stale = tok;
	stale.idx = 1000;
	RC(use(&f, stale, sec, 0, 0, 10), BOOK_E_UNKNOWN_JOB);
	OK(use(&f, tok, sec, 0, 1, 999));
	RC(use(&f, tok, sec, 0, 1, 999), BOOK_E_UNKNOWN_JOB); /* single use */
	CU_ASSERT_EQUAL(fx_expire(&f, 5000), 0);              /* a running token does not expire */
	CU_ASSERT_EQUAL(tokens(&f, 0), 1);
	OK(finished(&f, tok, 1));
	RC(finished(&f, tok, 0), BOOK_E_STALE);
	CU_ASSERT_EQUAL(tokens(&f, 0), 0);
	fx_lock(&f);
	struct book_service_status ss;
	book_service_status(f.b, 0, &ss);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(ss.started, 1);
	CU_ASSERT_EQUAL(ss.finished, 1);
	CU_ASSERT_EQUAL(ss.failed, 1);
	CU_ASSERT_EQUAL(ss.mean_runtime_ms, 40);
	/* the slot is free again */
	OK(issue(&f, 0, 5000, &tok, &sec));
	/* at the deadline it is gone, even before book_expire */
	RC(use(&f, tok, sec, 0, 0, 6000), BOOK_E_UNKNOWN_JOB);
	done(&f);
}

/* A finished token job grants its slot to a parked want. */
static void test_finish_grants(void)
{
	struct fx f;
	struct book_ref c, tok;
	uint64_t sec;
	mk(&f, 1);
	OK(issue(&f, 0, 0, &tok, &sec));
	OK(use(&f, tok, sec, 0, 0, 1));
	OK(fx_open(&f, 1, NULL, 0, &c));
	OK(fx_want(&f, c, "w", 0, 0, 2));
	OK(finished(&f, tok, 0));
	CU_ASSERT(f.mask & (1u << 1)); /* the OFFER went to handler 1 */
	fx_pump(&f);
	CU_ASSERT_EQUAL(fx_count(&f, MAIL_OFFER, "w"), 1);
	done(&f);
}

/* The purge of a handler frees the tokens whose job it ran (their pgids
 * are returned), not the issued ones (a PUT may reach another handler). */
static void test_purge(void)
{
	struct fx f;
	struct book_ref t1, t2;
	uint64_t s1, s2;
	int32_t pgids[4];
	mk(&f, 2);
	OK(issue(&f, 0, 0, &t1, &s1));
	OK(issue(&f, 0, 0, &t2, &s2));
	OK(use(&f, t1, s1, 0, 2, 1));
	fx_lock(&f);
	book_token_set_pgid(f.b, t1, 4242);
	fx_unlock(&f);
	CU_ASSERT_EQUAL(fx_purge(&f, 1, pgids, 4), 0); /* another handler */
	CU_ASSERT_EQUAL(tokens(&f, 0), 2);
	CU_ASSERT_EQUAL(fx_purge(&f, 2, pgids, 4), 1);
	CU_ASSERT_EQUAL(pgids[0], 4242);
	CU_ASSERT_EQUAL(tokens(&f, 0), 1);
	RC(finished(&f, t1, 0), BOOK_E_STALE);
	OK(use(&f, t2, s2, 0, 0, 2)); /* t2 survived */
	done(&f);
}

static void test_draining(void)
{
	struct fx f;
	struct book_ref tok;
	uint64_t sec;
	mk(&f, 1);
	fx_lock(&f);
	book_set_draining(f.b);
	fx_unlock(&f);
	RC(issue(&f, 0, 0, &tok, &sec), BOOK_E_DRAINING);
	done(&f);
}

static void fault_hook(const char *point)
{
	if (strcmp(point, "token.mid") == 0)
		_exit(0);
}

/* A crash inside book_token_issue, after the record was written: the
 * repair counts the token (it holds its slot) and the book is consistent;
 * with repairs of a corrupt record freed. */
static void test_crash_in_issue(void)
{
	struct fx f;
	struct book_ref tok, t2;
	uint64_t sec, s2;
	mk(&f, 2);
	fflush(stdout);
	pid_t pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		book_set_fault_hook(fault_hook);
		if (book_lock(f.b) < 0)
			_exit(2);
		book_token_issue(f.b, 0, 0, 1000, &tok, &sec);
		_exit(3);
	}
	int status = 0;
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	fx_lock(&f);
	CU_ASSERT_EQUAL(f.last_lock, 1); /* repaired */
	fx_unlock(&f);
	CU_ASSERT_EQUAL(tokens(&f, 0), 1);
	OK(issue(&f, 0, 0, &t2, &s2));
	RC(issue(&f, 0, 0, &t2, &s2), BOOK_E_BUSY);
	CU_ASSERT_EQUAL(fx_expire(&f, 1000), 2);
	CU_ASSERT_EQUAL(tokens(&f, 0), 0);
	fx_lock(&f);
	book_repair(f.b); /* idempotent */
	fx_unlock(&f);
	CU_ASSERT_EQUAL(tokens(&f, 0), 0);
	done(&f);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "a token holds a slot", test_issue_holds_a_slot },
		{ "a parked want blocks tokens", test_parked_want_blocks },
		{ "expiry returns the slot", test_expiry_returns_the_slot },
		{ "single use, bound to its service", test_use_single_and_bound },
		{ "a finished token job grants", test_finish_grants },
		{ "purge frees only the tokens it ran", test_purge },
		{ "draining issues nothing", test_draining },
		{ "crash inside issue is repaired", test_crash_in_issue },
		{ NULL, NULL },
	};
	return run_suite("book tokens", cases);
}
