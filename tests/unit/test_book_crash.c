/*
 * test_book_crash.c - crash fuzz of the want-book under auto-balance: a
 * forked child runs random operations (conns opening and closing, wants of
 * three services at two priorities, accepts and declines, jobs finishing
 * after short and long runtimes, some cut short by an error, legacy
 * tokens, expiry) and _exits at the N-th fault point, inside the lock.  The
 * parent's next lock repairs the book, which must then pass book_check
 * (eager grants with eligibility, classes consistent with their averages)
 * and count no step twice in its statistics, and must stay usable: more
 * random operations, checked again.
 *
 * ES_CRASH_ROUNDS sets the number of rounds (default 600, a few seconds;
 * raise it for a longer run) and ES_CRASH_SEED the seed (default 1, so
 * that make check repeats the same rounds; printed, so a failing run with
 * another seed can be replayed).
 */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "book/book.h"
#include "book_fixture.h"
#include "suite.h"

#define NCONNS 4
#define MAXRUN 64

static uint64_t g_rng;

static uint64_t rnd(void)
{
	/* xorshift64 */
	g_rng ^= g_rng << 13;
	g_rng ^= g_rng >> 7;
	g_rng ^= g_rng << 17;
	return g_rng;
}

static uint32_t below(uint64_t n)
{
	return (uint32_t)(rnd() % n);
}

static long g_hits, g_target;

static void crash_hook(const char *point)
{
	(void)point;
	if (++g_hits == g_target)
		_exit(0);
}

/* What the driver knows of the book: its conns, running jobs and tokens
 * (refs may go stale: the book answers STALE and the driver forgets). */
struct driver {
	struct book_ref conn[NCONNS];
	int live[NCONNS];
	struct book_ref run[MAXRUN];
	int nrun;
	struct book_ref tok[MAXRUN];
	int ntok;
	int jobs;
	uint64_t now;
};

static void finish_one(struct fx *f, struct driver *d)
{
	int i = (int)below((uint64_t)d->nrun);
	struct book_outcome o;
	memset(&o, 0, sizeof o);
	o.duration_ms = below(3) == 0 ? 20000 + below(40000) : below(3000);
	if (below(4) == 0) { /* cut short: cancelled, timed out ... */
		o.error = (uint8_t)(1 + below(9));
		o.exit_code = -1;
	} else {
		o.exit_code = below(5) == 0;
	}
	o.failed = o.error || o.exit_code;
	fx_lock(f);
	if (book_job_finished(f->b, d->run[i], &o, "r", 1) == BOOK_OK &&
	    book_done_read(f->b, d->run[i], NULL, NULL, 0, NULL) == BOOK_OK)
		book_done_delivered(f->b, d->run[i]);
	fx_unlock(f);
	d->run[i] = d->run[--d->nrun];
}

static void accept_offers(struct fx *f, struct driver *d)
{
	size_t from = f->nlog;
	fx_pump(f);
	for (size_t i = from; i < f->nlog; i++) {
		const struct fx_mail *m = &f->log[i];
		struct book_ref w;
		if (m->m.kind != MAIL_OFFER)
			continue;
		if (below(4) == 0)
			fx_decline(f, m->m.conn, m->m.job_id, m->m.token);
		else if (fx_accept(f, m->m.conn, m->m.job_id, m->m.token, m->handler, &w) ==
				 BOOK_OK &&
			 d->nrun < MAXRUN)
			d->run[d->nrun++] = w;
	}
}

static void token_op(struct fx *f, struct driver *d)
{
	fx_lock(f);
	if (d->ntok > 0 && below(2) == 0) {
		int i = (int)below((uint64_t)d->ntok);
		struct book_outcome o;
		memset(&o, 0, sizeof o);
		o.duration_ms = below(30000);
		o.error = below(3) == 0 ? 2 : 0;
		o.failed = o.error != 0;
		book_token_finished(f->b, d->tok[i], &o);
		d->tok[i] = d->tok[--d->ntok];
	} else if (d->ntok < MAXRUN) {
		struct book_ref t;
		uint64_t secret;
		uint32_t svc = below(3);
		if (book_token_issue(f->b, svc, d->now, 1000, &t, &secret) == BOOK_OK &&
		    book_token_use(f->b, t, secret, svc, below(2), d->now) == BOOK_OK)
			d->tok[d->ntok++] = t;
	}
	fx_unlock(f);
}

static void run_ops(struct fx *f, struct driver *d, int n)
{
	for (int k = 0; k < n; k++) {
		d->now += 7;
		int c = (int)below(NCONNS);
		switch (below(8)) {
		case 0:
			if (!d->live[c] && fx_open(f, (uint32_t)c % 2, below(2) ? "app" : NULL,
						   d->now, &d->conn[c]) == BOOK_OK)
				d->live[c] = 1;
			break;
		case 1:
		case 2:
			if (d->live[c]) {
				char id[16];
				snprintf(id, sizeof id, "j%d", d->jobs++);
				fx_want(f, d->conn[c], id, below(3), (int32_t)below(2), d->now);
			}
			break;
		case 3: accept_offers(f, d); break;
		case 4:
		case 5:
			if (d->nrun)
				finish_one(f, d);
			break;
		case 6: token_op(f, d); break;
		default:
			if (d->live[c] && below(3) == 0) {
				fx_close(f, d->conn[c], d->now);
				d->live[c] = 0;
			} else {
				fx_expire(f, d->now + 100000);
			}
			break;
		}
	}
}

static uint64_t hist_count(const struct hist *h)
{
	uint64_t n = 0;
	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		n += h->n[i];
	return n;
}

/* The statistics never count a step twice (book_layout.h): at most one
 * slot wait per offer made, one run time per finished job, one end per
 * start.  0, or -1 with why. */
static int stats_check(struct fx *f, char *why, size_t whylen)
{
	struct book_status st;
	struct book_service_status sv;
	uint64_t waits = 0;
	int rc = 0;

	fx_lock(f);
	book_status(f->b, &st);
	for (uint32_t s = 0; s < 3 && rc == 0; s++) {
		book_service_status(f->b, s, &sv);
		waits += hist_count(&sv.slot_wait);
		if (hist_count(&sv.runtime) > sv.finished || sv.finished > sv.started) {
			snprintf(why, whylen,
				 "service %u: %llu run times, %llu finished, %llu started", s,
				 (unsigned long long)hist_count(&sv.runtime),
				 (unsigned long long)sv.finished, (unsigned long long)sv.started);
			rc = -1;
		}
	}
	if (rc == 0 && waits > st.grants) {
		snprintf(why, whylen, "%llu slot waits for %llu offers", (unsigned long long)waits,
			 (unsigned long long)st.grants);
		rc = -1;
	}
	fx_unlock(f);
	return rc;
}

static void test_crash_fuzz(void)
{
	const char *env = getenv("ES_CRASH_ROUNDS");
	const char *seed_env = getenv("ES_CRASH_SEED");
	int rounds = env && atoi(env) > 0 ? atoi(env) : 600;
	uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) : 1;
	int reached = 0, bad = 0;

	printf("\n  seed %llu (ES_CRASH_SEED), %d rounds (ES_CRASH_ROUNDS)\n",
	       (unsigned long long)seed, rounds);
	g_rng = seed * 2654435761u + 88172645463325252ULL;
	for (int round = 0; round < rounds && !bad; round++) {
		struct fx f;
		struct book_topology t;
		struct book_limits l;
		uint32_t procs = 2 + below(5);
		fx_limits(&l);
		l.max_tokens = 4;
		fx_topo(&t, 1, &procs, 3, NULL);
		t.autobalance.enabled = 1;
		t.autobalance.reserve = below(procs);
		t.autobalance.unknown_cap = 1 + below(procs);
		t.autobalance.min_samples = 1 + below(3);
		t.autobalance.heavy_threshold_ms = 10000;
		CU_ASSERT_FATAL(fx_init(&f, &l, &t, (uint64_t)round) == 0);
		struct driver d;
		memset(&d, 0, sizeof d);
		run_ops(&f, &d, 40 + (int)below(80)); /* warm up in the parent */
		g_target = 1 + (long)below(120);
		fflush(stdout);
		pid_t pid = fork();
		CU_ASSERT_FATAL(pid >= 0);
		if (pid == 0) {
			g_hits = 0;
			book_set_fault_hook(crash_hook);
			run_ops(&f, &d, 200);
			_exit(3); /* no crash: the target was beyond the run */
		}
		int status = 0;
		CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
		CU_ASSERT(WIFEXITED(status) &&
			  (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 3));
		reached += WIFEXITED(status) && WEXITSTATUS(status) == 0;
		/* the child's view of the book is gone: start over, repaired */
		char why[256];
		if (fx_check(&f, why, sizeof why) != 0 || stats_check(&f, why, sizeof why) != 0) {
			printf("  round %d (crash at fault point %ld): %s\n", round, g_target, why);
			bad++;
		}
		struct driver again;
		memset(&again, 0, sizeof again);
		again.now = d.now + 1000;
		again.jobs = 100000;
		run_ops(&f, &again, 100);
		if (fx_check(&f, why, sizeof why) != 0 || stats_check(&f, why, sizeof why) != 0) {
			printf("  round %d, after more operations: %s\n", round, why);
			bad++;
		}
		fx_fini(&f);
	}
	printf("  %d rounds, %d crashed inside the lock\n", rounds, reached);
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT(reached > rounds / 4); /* the fuzz does reach fault points */
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "crash at any fault point, repair, check", test_crash_fuzz },
		{ NULL, NULL },
	};
	return run_suite("book crash fuzz", cases);
}
