/*
 * test_autobalance.c - auto-balance against a real daemon: a configuration
 * without waitgroups runs one pool; HELLO announces it; services are
 * classed by the runtimes of their finished jobs (/status, /metrics); an
 * unknown service stops at its share of the pool; a flood of heavy jobs
 * (sleeps) fills the pool only up to the reserve, so a light job starts at
 * once; the learned profile is written to tempDir, restored after a
 * restart, and discarded when the pool size changed; jobs cancelled
 * quickly do not make a heavy service light; a FIFO or an impossible mean
 * at tempDir/profile.json is discarded without hanging the start.
 *
 * It also measures the start latency of light jobs (WANT to OFFER, and
 * WANT to DONE of /bin/true) during a flood of heavy ones, with
 * auto-balance and with one fixed waitgroup of the same size, and prints
 * the figures (auto-balance is asserted to offer every light job a slot
 * within 250 ms, the fixed pool to make it wait for a heavy job to end:
 * longer than auto-balance's worst, and once more than 250 ms).
 */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "harness.h"
#include "proto.h"
#include "suite.h"

#define POOL 4
#define HEAVY_SEC "2" /* one heavy job */
#define FLOOD_WANTS 8 /* heavy wants the flood keeps in the book */
#define ROUNDS 5      /* light jobs measured per mode */

static const char *services_body(void)
{
	return "services:\n"
	       "  heavy:\n"
	       "    commands:\n"
	       "      sleep: {prog: sleep}\n"
	       "  light:\n"
	       "    commands:\n"
	       "      true: {prog: \"true\"}\n"
	       "  fresh:\n"
	       "    commands:\n"
	       "      sleep: {prog: sleep}\n";
}

static const char *auto_body(int cpus)
{
	static char b[1024];
	snprintf(b, sizeof b,
		 "cpus: %d\n"
		 "fastReserve: 1\n"
		 "heavyThreshold: 500ms\n"
		 "minSamples: 2\n"
		 "unknownShare: 0.5\n"
		 "%s",
		 cpus, services_body());
	return b;
}

static const char *fixed_body(void)
{
	static char b[1024];
	snprintf(b, sizeof b,
		 "waitgroups:\n"
		 "  pool: {processes: %d}\n"
		 "services:\n"
		 "  heavy:\n"
		 "    waitgroup: pool\n"
		 "    commands:\n"
		 "      sleep: {prog: sleep}\n"
		 "  light:\n"
		 "    waitgroup: pool\n"
		 "    commands:\n"
		 "      true: {prog: \"true\"}\n",
		 POOL);
	return b;
}

/* services.<svc>.<key> of /status as a string ("" if absent or null). */
static const char *svc_str(struct json_object *st, const char *svc, const char *key)
{
	struct json_object *s, *x;
	if (!st || !json_object_object_get_ex(st, "services", &s) ||
	    !json_object_object_get_ex(s, svc, &x))
		return "";
	const char *v = tc_str(x, key);
	return v ? v : "";
}

static char g_class[32];
static const char *class_of(const struct es_daemon *d, const char *svc)
{
	struct json_object *st = harness_status(d);
	snprintf(g_class, sizeof g_class, "%s", svc_str(st, svc, "class"));
	if (st)
		json_object_put(st);
	return g_class;
}

static void profile_path(const struct es_daemon *d, char *buf, size_t len)
{
	snprintf(buf, len, "%s/tmp/profile.json", d->dir);
}

static int file_contains(const char *path, const char *text)
{
	FILE *f = fopen(path, "r");
	char buf[8192];
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, text) != NULL;
}

/* ---- a flood of heavy jobs ---- */

struct flood {
	struct tclient *c;
	int next;    /* job number */
	int offers;  /* OFFERs answered so far */
	int running; /* JOBs sent and not DONE yet */
};

static int flood_want(struct flood *f)
{
	return tc_send(f->c, "{\"type\":\"WANT\",\"job_id\":\"h%d\",\"service\":\"heavy\"}",
		       f->next++);
}

/* Serves the flood's connection for ms: every OFFER gets its JOB (a
 * HEAVY_SEC sleep), every DONE a new WANT, so FLOOD_WANTS heavy jobs are
 * always wanted or running. */
static void flood_pump(struct flood *f, int ms)
{
	long long end = harness_now_ms() + ms;
	for (;;) {
		long long left = end - harness_now_ms();
		if (left <= 0)
			return;
		struct json_object *o = tc_expect(f->c, NULL, (int)left);
		if (!o)
			return;
		const char *type = tc_str(o, "type"), *id = tc_str(o, "job_id");
		if (type && id && strcmp(type, "OFFER") == 0) {
			tc_send(f->c,
				"{\"type\":\"JOB\",\"job_id\":\"%s\",\"token\":\"%s\","
				"\"job\":{\"command\":\"sleep\",\"args\":[\"" HEAVY_SEC "\"]}}",
				id, tc_str(o, "token"));
			f->offers++;
			f->running++;
		} else if (type && strcmp(type, "DONE") == 0) {
			f->running--;
			flood_want(f);
		}
		json_object_put(o);
	}
}

static struct tclient *flood_start(struct flood *f, int port)
{
	memset(f, 0, sizeof *f);
	f->c = tc_connect(port, "flood");
	if (!f->c)
		return NULL;
	for (int i = 0; i < FLOOD_WANTS; i++)
		flood_want(f);
	flood_pump(f, 500);
	return f->c;
}

struct latency {
	long long offer_us[ROUNDS], done_us[ROUNDS];
};

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;
	return (x > y) - (x < y);
}

static void summary(const char *mode, const char *what, const long long *v)
{
	long long s[ROUNDS];
	memcpy(s, v, sizeof s);
	qsort(s, ROUNDS, sizeof s[0], cmp_ll);
	printf("\n  %-34s %-14s median %8.1f ms  max %8.1f ms  (", mode, what,
	       (double)s[ROUNDS / 2] / 1000.0, (double)s[ROUNDS - 1] / 1000.0);
	for (int i = 0; i < ROUNDS; i++)
		printf("%s%.1f", i ? " " : "", (double)v[i] / 1000.0);
	printf(")");
}

/* ROUNDS light jobs during the flood: WANT -> OFFER and WANT -> DONE. */
static int measure_light(struct flood *f, int port, struct latency *lat)
{
	struct tclient *l = tc_connect(port, "light");
	if (!l)
		return -1;
	for (int r = 0; r < ROUNDS; r++) {
		flood_pump(f,
			   300 + 170 * r); /* rounds land at different points of the heavy jobs */
		char id[16];
		snprintf(id, sizeof id, "l%d", r);
		long long t0 = harness_now_us();
		const char *token = tc_want_offer(l, id, "light", 0, 10000);
		long long t1 = harness_now_us();
		if (!token)
			goto fail;
		tc_send(l,
			"{\"type\":\"JOB\",\"job_id\":\"%s\",\"token\":\"%s\","
			"\"job\":{\"command\":\"true\"}}",
			id, token);
		struct json_object *done = tc_expect(l, "DONE", 10000);
		long long t2 = harness_now_us();
		if (!done)
			goto fail;
		json_object_put(done);
		lat->offer_us[r] = t1 - t0;
		lat->done_us[r] = t2 - t0;
	}
	tc_close(l);
	return 0;
fail:
	tc_close(l);
	return -1;
}

/* ---- the daemon with auto-balance, through its life ---- */

static struct es_daemon D;
static struct latency g_auto, g_fixed;
static int g_have_auto, g_have_fixed;

static void test_hello_single_pool(void)
{
	CU_ASSERT_FATAL(harness_start(&D, 2, auto_body(POOL), NULL) == 0);
	struct tclient *c = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	struct json_object *wgs, *svcs, *auto_wg;
	CU_ASSERT_FATAL(json_object_object_get_ex(c->hello, "waitgroups", &wgs));
	CU_ASSERT_EQUAL(json_object_object_length(wgs), 1);
	CU_ASSERT_FATAL(json_object_object_get_ex(wgs, "auto", &auto_wg));
	CU_ASSERT_EQUAL(tc_int(auto_wg, "processes"), POOL);
	CU_ASSERT_FATAL(json_object_object_get_ex(c->hello, "services", &svcs));
	CU_ASSERT_EQUAL(json_object_object_length(svcs), 3);
	CU_ASSERT_STRING_EQUAL(tc_str(svcs, "heavy"), "auto");
	CU_ASSERT_STRING_EQUAL(tc_str(svcs, "light"), "auto");
	CU_ASSERT_STRING_EQUAL(tc_str(svcs, "fresh"), "auto");
	tc_close(c);
	/* /status: the parameters in effect, every service unknown */
	CU_ASSERT_EQUAL(harness_status_int(&D, "auto_balance", "fast_reserve", NULL, NULL), 1);
	CU_ASSERT_EQUAL(harness_status_int(&D, "auto_balance", "unknown_cap", NULL, NULL), 2);
	CU_ASSERT_EQUAL(harness_status_int(&D, "auto_balance", "heavy_threshold_ms", NULL, NULL),
			500);
	CU_ASSERT_EQUAL(harness_status_int(&D, "auto_balance", "cpus", NULL, NULL), POOL);
	CU_ASSERT_STRING_EQUAL(class_of(&D, "heavy"), "unknown");
	CU_ASSERT(harness_log_contains(&D, "no profile snapshot"));
}

static void test_unknown_share_cap(void)
{
	struct tclient *c = tc_connect(D.port, NULL), *l = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL && l != NULL);
	for (int i = 0; i < 4; i++)
		tc_send(c, "{\"type\":\"WANT\",\"job_id\":\"f%d\",\"service\":\"fresh\"}", i);
	/* half the pool of 4: two offers, the others wait */
	for (int i = 0; i < 2; i++) {
		struct json_object *o = tc_expect(c, "OFFER", 3000);
		CU_ASSERT_PTR_NOT_NULL(o);
		if (o)
			json_object_put(o);
	}
	CU_ASSERT(tc_quiet(c, 400));
	CU_ASSERT_EQUAL(harness_status_int(&D, "waitgroups", "auto", "offered", NULL), 2);
	CU_ASSERT_EQUAL(harness_status_int(&D, "waitgroups", "auto", "waiting", NULL), 2);
	/* the rest of the pool is there for other services (light is unknown
	 * too, with its own cap) */
	CU_ASSERT_PTR_NOT_NULL(tc_want_offer(l, "x1", "light", 0, 2000));
	CU_ASSERT_PTR_NOT_NULL(tc_want_offer(l, "x2", "light", 0, 2000));
	CU_ASSERT_EQUAL(harness_status_int(&D, "waitgroups", "auto", "offered", NULL), 4);
	tc_close(c);
	tc_close(l);
	CU_ASSERT_EQUAL(harness_wait_int(&D, 0, 5000, "wants", NULL), 0);
}

static void test_classification(void)
{
	struct tclient *c = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	/* two heavy jobs side by side (the unknown cap is 2), two light ones */
	const char *t0 = tc_want_offer(c, "s0", "heavy", 0, 2000);
	CU_ASSERT_FATAL(t0 != NULL);
	tc_send(c,
		"{\"type\":\"JOB\",\"job_id\":\"s0\",\"token\":\"%s\","
		"\"job\":{\"command\":\"sleep\",\"args\":[\"0.8\"]}}",
		t0);
	const char *t1 = tc_want_offer(c, "s1", "heavy", 0, 2000);
	CU_ASSERT_FATAL(t1 != NULL);
	tc_send(c,
		"{\"type\":\"JOB\",\"job_id\":\"s1\",\"token\":\"%s\","
		"\"job\":{\"command\":\"sleep\",\"args\":[\"0.8\"]}}",
		t1);
	for (int i = 0; i < 2; i++) {
		char id[8];
		snprintf(id, sizeof id, "t%d", i);
		struct json_object *d = tc_run_job(c, id, "light", "{\"command\":\"true\"}", 5000);
		CU_ASSERT_PTR_NOT_NULL(d);
		if (d)
			json_object_put(d);
	}
	CU_ASSERT_STRING_EQUAL(class_of(&D, "light"), "light");
	CU_ASSERT_STRING_EQUAL(class_of(&D, "heavy"), "unknown"); /* still running */
	for (int i = 0; i < 2; i++) {
		struct json_object *d = tc_expect(c, "DONE", 5000);
		CU_ASSERT_PTR_NOT_NULL(d);
		if (d)
			json_object_put(d);
	}
	tc_close(c);
	CU_ASSERT_STRING_EQUAL(class_of(&D, "heavy"), "heavy");
	CU_ASSERT_STRING_EQUAL(class_of(&D, "fresh"), "unknown");
	struct json_object *st = harness_status(&D);
	long long mean = harness_json_int(st, "services", "heavy", "mean_runtime_ms", NULL);
	CU_ASSERT(mean >= 800 && mean < 5000);
	CU_ASSERT_EQUAL(harness_json_int(st, "services", "heavy", "samples", NULL), 2);
	CU_ASSERT_EQUAL(harness_json_int(st, "services", "light", "samples", NULL), 2);
	if (st)
		json_object_put(st);
	char body[1 << 15];
	int status = 0;
	CU_ASSERT(wsc_http_get("127.0.0.1", D.port, "/metrics", 2000, &status, body, sizeof body) >=
		  0);
	CU_ASSERT(strstr(body, "execserver_service_class{service=\"heavy\",class=\"heavy\"} 1") !=
		  NULL);
	CU_ASSERT(strstr(body, "execserver_service_class{service=\"heavy\",class=\"light\"} 0") !=
		  NULL);
	CU_ASSERT(strstr(body, "execserver_service_class{service=\"light\",class=\"light\"} 1") !=
		  NULL);
	CU_ASSERT(strstr(body, "execserver_service_runtime_samples{service=\"heavy\"} 2") != NULL);
	/* a class change is written to the snapshot at once (next tick) */
	char path[400];
	profile_path(&D, path, sizeof path);
	for (int i = 0; i < 40 && !file_contains(path, "\"class\":\"heavy\""); i++)
		harness_sleep_ms(50);
	CU_ASSERT(file_contains(path, "\"class\":\"heavy\""));
	CU_ASSERT(file_contains(path, "\"pool\":4"));
}

static void test_flood_keeps_reserve(void)
{
	struct flood f;
	CU_ASSERT_FATAL(flood_start(&f, D.port) != NULL);
	flood_pump(&f, 700);
	/* 4 slots, 1 reserved: exactly 3 heavy jobs run, the others wait */
	CU_ASSERT_EQUAL(f.running, POOL - 1);
	CU_ASSERT_EQUAL(harness_status_int(&D, "waitgroups", "auto", "running", NULL), POOL - 1);
	CU_ASSERT_EQUAL(harness_status_int(&D, "waitgroups", "auto", "waiting", NULL),
			FLOOD_WANTS - (POOL - 1));
	g_have_auto = measure_light(&f, D.port, &g_auto) == 0;
	CU_ASSERT(g_have_auto);
	for (int r = 0; g_have_auto && r < ROUNDS; r++)
		CU_ASSERT(g_auto.offer_us[r] < 250000);
	CU_ASSERT(f.offers >= POOL - 1);
	/* the reserve held throughout: never more than 3 heavy at once */
	flood_pump(&f, 100);
	CU_ASSERT(f.running <= POOL - 1);
	tc_close(f.c); /* its running jobs end within HEAVY_SEC, inside the drain */
}

static void test_snapshot_restored(void)
{
	int st = harness_stop(&D, 30000);
	CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	char path[400];
	profile_path(&D, path, sizeof path);
	CU_ASSERT(file_contains(path, "execserver-profile"));
	CU_ASSERT_FATAL(harness_restart(&D, 2, auto_body(POOL), NULL) == 0);
	CU_ASSERT(harness_log_contains(&D, "restored"));
	CU_ASSERT_STRING_EQUAL(class_of(&D, "heavy"), "heavy");
	CU_ASSERT_STRING_EQUAL(class_of(&D, "light"), "light");
	CU_ASSERT(harness_status_int(&D, "services", "heavy", "samples", NULL) >= 2);
	/* and it acts on it at once: four heavy wants, three slots */
	struct tclient *c = tc_connect(D.port, NULL);
	CU_ASSERT_FATAL(c != NULL);
	for (int i = 0; i < 4; i++)
		tc_send(c, "{\"type\":\"WANT\",\"job_id\":\"r%d\",\"service\":\"heavy\"}", i);
	for (int i = 0; i < POOL - 1; i++) {
		struct json_object *o = tc_expect(c, "OFFER", 3000);
		CU_ASSERT_PTR_NOT_NULL(o);
		if (o)
			json_object_put(o);
	}
	CU_ASSERT(tc_quiet(c, 400));
	/* QUERY of the waiting one: ETA from the three offered heavy wants */
	tc_send(c, "{\"type\":\"QUERY\",\"job_id\":\"r3\"}");
	struct json_object *p = tc_expect(c, "POSITION", 2000);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_STRING_EQUAL(tc_str(p, "state"), "waiting");
	long long mean = harness_status_int(&D, "services", "heavy", "mean_runtime_ms", NULL);
	/* ahead 0: the two slots a heavy want needs (its own and the reserve)
	 * are free when the first of the three offered wants ends: their mean */
	CU_ASSERT_EQUAL(tc_int(p, "ahead"), 0);
	CU_ASSERT_EQUAL(tc_int(p, "eta_ms"), mean);
	json_object_put(p);
	tc_close(c);
}

static void test_snapshot_discarded_on_pool_change(void)
{
	int st = harness_stop(&D, 30000);
	CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CU_ASSERT_FATAL(harness_restart(&D, 2, auto_body(POOL + 2), NULL) == 0);
	CU_ASSERT(harness_log_contains(&D,
				       "discarded: taken with a pool of 4 slots, this pool has 6"));
	CU_ASSERT_STRING_EQUAL(class_of(&D, "heavy"), "unknown");
	CU_ASSERT_EQUAL(harness_status_int(&D, "services", "heavy", "samples", NULL), 0);
	st = harness_stop(&D, 30000);
	CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* the shutdown wrote a snapshot for the new pool */
	char path[400];
	profile_path(&D, path, sizeof path);
	CU_ASSERT(file_contains(path, "\"pool\":6"));
	harness_cleanup(&D);
}

/* tempDir/profile.json is not to be trusted: a FIFO there does not hang
 * the start, and a snapshot with a mean beyond any uint32_t duration is
 * discarded (it used to show as a negative mean in /status). */
static void test_hostile_snapshot(void)
{
	struct es_daemon A;
	CU_ASSERT_FATAL(harness_start(&A, 1, auto_body(POOL), NULL) == 0);
	int st = harness_stop(&A, 30000);
	CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	char path[400];
	profile_path(&A, path, sizeof path);
	unlink(path);
	CU_ASSERT_FATAL(mkfifo(path, 0600) == 0);
	long long t0 = harness_now_ms();
	CU_ASSERT_FATAL(harness_restart(&A, 1, auto_body(POOL), NULL) == 0);
	CU_ASSERT(harness_now_ms() - t0 < 5000);
	CU_ASSERT(harness_log_contains(&A, "discarded: not a regular file"));
	CU_ASSERT_STRING_EQUAL(class_of(&A, "heavy"), "unknown");
	st = harness_stop(&A, 30000);
	CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* the shutdown replaced the FIFO with a snapshot */
	struct stat sb;
	CU_ASSERT(lstat(path, &sb) == 0 && S_ISREG(sb.st_mode));
	struct utsname u;
	CU_ASSERT_FATAL(uname(&u) == 0);
	FILE *f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fprintf(f,
		"{\"format\":\"execserver-profile\",\"version\":1,\"arch\":\"%s\","
		"\"pool\":%d,\"services\":{\"heavy\":{\"class\":\"heavy\","
		"\"mean_runtime_ms\":1e300,\"samples\":5}}}\n",
		u.machine, POOL);
	fclose(f);
	CU_ASSERT_FATAL(harness_restart(&A, 1, auto_body(POOL), NULL) == 0);
	CU_ASSERT(harness_log_contains(&A, "service \"heavy\": malformed entry"));
	CU_ASSERT_STRING_EQUAL(class_of(&A, "heavy"), "unknown");
	CU_ASSERT_EQUAL(harness_status_int(&A, "services", "heavy", "samples", NULL), 0);
	harness_stop(&A, 30000);
	harness_cleanup(&A);
}

/* ---- the same flood against one fixed waitgroup of the same size ---- */

static void test_fixed_pool_comparison(void)
{
	struct es_daemon F;
	CU_ASSERT_FATAL(harness_start(&F, 2, fixed_body(), NULL) == 0);
	struct flood f;
	CU_ASSERT_FATAL(flood_start(&f, F.port) != NULL);
	flood_pump(&f, 700);
	CU_ASSERT_EQUAL(f.running, POOL); /* heavy jobs take every slot */
	g_have_fixed = measure_light(&f, F.port, &g_fixed) == 0;
	CU_ASSERT(g_have_fixed);
	/* the light job waits for a heavy one to end (never a free slot: the
	 * parked heavy wants take each one), so it waits longer than with
	 * auto-balance, and at least once for a good part of a heavy job */
	long long s[ROUNDS], a[ROUNDS];
	memcpy(s, g_fixed.offer_us, sizeof s);
	memcpy(a, g_auto.offer_us, sizeof a);
	qsort(s, ROUNDS, sizeof s[0], cmp_ll);
	qsort(a, ROUNDS, sizeof a[0], cmp_ll);
	CU_ASSERT(g_have_fixed && s[ROUNDS - 1] > 250000);
	CU_ASSERT(g_have_fixed && g_have_auto && s[ROUNDS / 2] > a[ROUNDS - 1]);
	tc_close(f.c);
	harness_stop(&F, 30000);
	harness_cleanup(&F);
	if (g_have_auto && g_have_fixed) {
		printf("\n  light-job start latency during a flood of %d heavy jobs (sleep %s s), "
		       "pool %d:",
		       FLOOD_WANTS, HEAVY_SEC, POOL);
		summary("auto-balance (fastReserve 1)", "WANT->OFFER", g_auto.offer_us);
		summary("auto-balance (fastReserve 1)", "WANT->DONE", g_auto.done_us);
		summary("one fixed waitgroup of 4", "WANT->OFFER", g_fixed.offer_us);
		summary("one fixed waitgroup of 4", "WANT->DONE", g_fixed.done_us);
		printf("\n");
	}
}

/* Jobs cut short (CANCEL after 30 ms) of a heavy service are no samples:
 * however many there are, the service stays heavy and the reserve holds
 * (they used to drag the average down until the service turned light and
 * took every slot).  One cancelled after running longer than the average
 * is a sample and makes it heavier. */
static void test_cancels_keep_heavy(void)
{
	struct es_daemon A;
	if (harness_start(&A, 1, auto_body(POOL), NULL) != 0) {
		CU_FAIL("daemon did not start");
		return;
	}
	struct tclient *c = tc_connect(A.port, "app");
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	for (int i = 0; i < 2; i++) {
		char id[16];
		snprintf(id, sizeof id, "w%d", i);
		struct json_object *d = tc_run_job(
			c, id, "heavy", "{\"command\":\"sleep\",\"args\":[\"0.8\"]}", 5000);
		CU_ASSERT_PTR_NOT_NULL(d);
		if (d)
			json_object_put(d);
	}
	CU_ASSERT_STRING_EQUAL(class_of(&A, "heavy"), "heavy");
	long long mean = harness_status_int(&A, "services", "heavy", "mean_runtime_ms", NULL);
	CU_ASSERT(mean >= 800 && mean < 1500);
	for (int i = 0; i < 12; i++) {
		char id[16];
		snprintf(id, sizeof id, "c%d", i);
		const char *tok = tc_want_offer(c, id, "heavy", 0, 3000);
		CU_ASSERT_PTR_NOT_NULL_FATAL(tok);
		tc_send(c,
			"{\"type\":\"JOB\",\"job_id\":\"%s\",\"token\":\"%s\","
			"\"job\":{\"command\":\"sleep\",\"args\":[\"60\"]}}",
			id, tok);
		/* sleep: a run far shorter than the mean (800 ms) is what is tested */
		harness_sleep_ms(30);
		tc_send(c, "{\"type\":\"CANCEL\",\"job_id\":\"%s\"}", id);
		struct json_object *d = tc_expect(c, "DONE", 5000);
		CU_ASSERT_PTR_NOT_NULL(d);
		if (d)
			json_object_put(d);
	}
	CU_ASSERT_STRING_EQUAL(class_of(&A, "heavy"), "heavy");
	CU_ASSERT_EQUAL(harness_status_int(&A, "services", "heavy", "samples", NULL), 2);
	CU_ASSERT_EQUAL(harness_status_int(&A, "services", "heavy", "mean_runtime_ms", NULL), mean);
	CU_ASSERT_EQUAL(harness_status_int(&A, "services", "heavy", "finished", NULL), 14);
	/* the reserve holds: 4 heavy WANTs on a pool of 4 get 3 OFFERs */
	for (int i = 0; i < 4; i++)
		tc_send(c, "{\"type\":\"WANT\",\"job_id\":\"f%d\",\"service\":\"heavy\"}", i);
	int offers = 0;
	struct json_object *o;
	while ((o = tc_expect(c, "OFFER", 800)) != NULL) {
		offers++;
		json_object_put(o);
	}
	CU_ASSERT_EQUAL(offers, 3);
	for (int i = 4; i-- > 0;) /* the parked one first: no new OFFER */
		tc_send(c, "{\"type\":\"UNWANT\",\"job_id\":\"f%d\"}", i);
	/* cancelled after running longer than the average: a sample */
	const char *tok = tc_want_offer(c, "long", "heavy", 0, 3000);
	CU_ASSERT_PTR_NOT_NULL_FATAL(tok);
	tc_send(c,
		"{\"type\":\"JOB\",\"job_id\":\"long\",\"token\":\"%s\","
		"\"job\":{\"command\":\"sleep\",\"args\":[\"60\"]}}",
		tok);
	/* sleep: a run longer than the mean is what is tested */
	harness_sleep_ms((int)mean + 700);
	tc_send(c, "{\"type\":\"CANCEL\",\"job_id\":\"long\"}");
	struct json_object *d = tc_expect(c, "DONE", 5000);
	CU_ASSERT_PTR_NOT_NULL(d);
	if (d)
		json_object_put(d);
	CU_ASSERT_EQUAL(harness_status_int(&A, "services", "heavy", "samples", NULL), 3);
	CU_ASSERT(harness_status_int(&A, "services", "heavy", "mean_runtime_ms", NULL) > mean);
	tc_close(c);
	harness_stop(&A, 10000);
	harness_cleanup(&A);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "HELLO announces the single pool", test_hello_single_pool },
		{ "unknown service stops at its share", test_unknown_share_cap },
		{ "services classed by runtime", test_classification },
		{ "heavy flood keeps the reserve, light starts at once", test_flood_keeps_reserve },
		{ "quick cancels keep a heavy service heavy", test_cancels_keep_heavy },
		{ "snapshot restored after a restart", test_snapshot_restored },
		{ "snapshot discarded on a changed pool", test_snapshot_discarded_on_pool_change },
		{ "a FIFO or an impossible mean as snapshot", test_hostile_snapshot },
		{ "fixed waitgroup: light waits (comparison)", test_fixed_pool_comparison },
		{ NULL, NULL },
	};
	return run_suite("auto-balance", cases);
}
