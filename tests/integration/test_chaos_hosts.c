/*
 * test_chaos_hosts.c - chaos across hosts (docs/security.md, "Chaos across
 * hosts"), in the test bed: three execservers (hosts c, d, e) behind
 * haproxy (host b, send-proxy-v2), three client hosts (f, g, h), each a
 * process running libexecclient that keeps jobs in flight through the
 * balancer's address.  Meanwhile, from a fixed seed: loss bursts and cuts
 * (restored after 1-3 s) on random hosts' links, a random handler killed
 * every few seconds, and once a whole execserver killed (master and
 * handlers, SIGKILL) and started again on its host.
 *
 * Every job appends its id to a ledger file when it runs (the hosts share
 * the file system), so a job that ran twice shows.  Checked:
 *  - every job the application submitted got exactly one receipt;
 *  - a receipt that says the job ran (ok) has exactly one ledger line; an
 *    error receipt is retryable (the job may or may not have run: at most
 *    one line); no other error;
 *  - no ledger line without a receipt that allows it;
 *  - at the end, every slot is grantable again (as many sleepers as slots
 *    run at once on each instance), the books are consistent, and the
 *    masters that were not killed are the ones that started.
 *
 * make check runs it for 20 s, `make chaos-hosts` for 60
 * (CHAOS_HOSTS_SECONDS, default 20; CHAOS_HOSTS_SEED, default 19: the
 * sequence of faults; their timing relative to the jobs is the machine's).
 * As root only (bed.h: otherwise one line and skipped).  The client logs
 * and the ledger of a failed run are kept and named.
 */
#include "autoconfig.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <event2/event.h>

#include "client_fixture.h"
#include "fleet.h"
#include "suite.h"

#define SERVERS 3
#define CLIENTS 3
#define SLOTS 4
#define IN_FLIGHT 8
#define MAX_JOBS 20000

static struct bed B;
#define LB (&B.host[1])
#define SERVER_HOST(i) (&B.host[2 + (i)])
#define CLIENT_HOST(i) (&B.host[5 + (i)])

static struct fleet F;
static char ledger[128], results_dir[64];

static int env_int(const char *name, int def)
{
	const char *v = getenv(name);
	return v && *v ? atoi(v) : def;
}

static const char *body(void)
{
	static char b[1024];
	snprintf(b, sizeof b,
		 "waitgroups:\n"
		 "  wg:\n"
		 "    processes: %d\n"
		 "services:\n"
		 "  chaos:\n"
		 "    waitgroup: wg\n"
		 "    commands:\n"
		 "      mark: {prog: sh}\n"
		 "  sleep:\n"
		 "    waitgroup: wg\n"
		 "    commands:\n"
		 "      sleep: {prog: sleep}\n"
		 /* a job of a killed instance ends lost after 15 + 10 + 3 +
		  * 5 = 33 s (its HELLO's deadlines), within the settling */
		 "resumeGraceSec: 15\n"
		 "pingIntervalSec: 3\n"
		 "pingTimeoutSec: 10\n",
		 SLOTS);
	return b;
}

/* ---- one client host (a child process) ---------------------------------- */

struct cjob {
	char id[32];
	struct fx_done d;
};

static struct cjob *jobs;
static int njobs, ndone, deadline_passed;
static exc_client *cl;

static void submit_next(int host);

static void on_done(exc_job *j, const struct exc_receipt *r, void *arg)
{
	struct cjob *cj = arg;
	fx_on_done(j, r, &cj->d);
	ndone++;
}

static void submit_next(int host)
{
	if (njobs >= MAX_JOBS)
		return;
	struct cjob *cj = &jobs[njobs++];
	static char job[256];
	struct exc_job_spec s;
	snprintf(cj->id, sizeof cj->id, "h%d-%d", host, njobs);
	snprintf(job, sizeof job,
		 "{\"command\":\"mark\",\"args\":[\"-c\",\"echo $1 >> %s; sleep 0.05\",\"mark\","
		 "\"%s\"]}",
		 ledger, cj->id);
	fx_spec(&s, "chaos", job, &cj->d);
	s.on_done = on_done;
	s.arg = cj;
	if (!exc_submit(cl, &s)) {
		fprintf(stderr, "client %d: exc_submit failed\n", host);
		njobs--;
	}
}

static FILE *client_log;

static void log_line(void *arg, enum exc_log_level level, const char *line)
{
	(void)arg;
	(void)level;
	if (client_log)
		fprintf(client_log, "%lld %s\n", harness_now_ms(), line);
}

static void client_main(int host, int seconds)
{
	struct exc_options o;
	char logpath[160];
	fx_options(&o);
	snprintf(logpath, sizeof logpath, "%s/client%d.log", results_dir, host);
	client_log = fopen(logpath, "w");
	o.log = log_line;
	o.log_level = EXC_LOG_DEBUG;
	o.owner_grace_sec = 8;
	jobs = calloc(MAX_JOBS, sizeof *jobs);
	cl = jobs ? fx_client(&o, NULL, 0, NULL) : NULL;
	if (!cl || exc_client_add_address(cl, F.url) != 0)
		_exit(2);
	long long end = harness_now_ms() + seconds * 1000LL;
	while (harness_now_ms() < end) {
		while (njobs - ndone < IN_FLIGHT && njobs < MAX_JOBS)
			submit_next(host);
		fx_spin(20);
	}
	deadline_passed = 1;
	/* the jobs in flight end: seeking owners may take owner_grace_sec,
	 * or the 33 s their instance's HELLO says it keeps a job */
	long long settle = harness_now_ms() + 60000;
	while (ndone < njobs && harness_now_ms() < settle)
		fx_spin(50);
	char path[160];
	snprintf(path, sizeof path, "%s/client%d", results_dir, host);
	FILE *f = fopen(path, "w");
	if (!f)
		_exit(3);
	for (int i = 0; i < njobs; i++)
		fprintf(f, "%s %d %d %d %s\n", jobs[i].id, jobs[i].d.called, jobs[i].d.ok,
			jobs[i].d.retryable, jobs[i].d.error_code[0] ? jobs[i].d.error_code : "-");
	fclose(f);
	exc_client_free(cl);
	_exit(0);
}

/* ---- the checks ---------------------------------------------------------- */

/* The ledger's ids, sorted (one line per run of a job). */
struct ledger {
	char (*ids)[32];
	int n;
};

static int cmp_id(const void *a, const void *b)
{
	return strcmp(a, b);
}

static void read_ledger(struct ledger *l)
{
	FILE *f = fopen(ledger, "r");
	char line[64];
	l->n = 0;
	l->ids = calloc(CLIENTS * MAX_JOBS, sizeof *l->ids);
	while (f && l->ids && fgets(line, sizeof line, f) && l->n < CLIENTS * MAX_JOBS) {
		line[strcspn(line, "\n")] = '\0';
		snprintf(l->ids[l->n++], 32, "%.31s", line);
	}
	if (f)
		fclose(f);
	if (l->ids)
		qsort(l->ids, (size_t)l->n, sizeof *l->ids, cmp_id);
}

static int ledger_count(const struct ledger *l, const char *id)
{
	char key[32];
	snprintf(key, sizeof key, "%s", id);
	char(*hit)[32] = bsearch(key, l->ids, (size_t)l->n, sizeof *l->ids, cmp_id);
	if (!hit)
		return 0;
	int n = 0;
	for (char(*p)[32] = hit; p >= l->ids && strcmp(*p, id) == 0; p--)
		n++;
	for (char(*p)[32] = hit + 1; p < l->ids + l->n && strcmp(*p, id) == 0; p++)
		n++;
	return n;
}

struct tally {
	int jobs, ok, retryable, bad, no_receipt, no_receipt_ran, doubled, ran_twice,
		ran_unreported;
	char codes[256];
};

static void check_client(int host, const struct ledger *l, struct tally *t)
{
	char path[160], line[256];
	snprintf(path, sizeof path, "%s/client%d", results_dir, host);
	FILE *f = fopen(path, "r");
	CU_ASSERT_FATAL(f != NULL);
	while (fgets(line, sizeof line, f)) {
		char id[32], code[32];
		int called, ok, retryable;
		if (sscanf(line, "%31s %d %d %d %31s", id, &called, &ok, &retryable, code) != 5)
			continue;
		t->jobs++;
		int ran = ledger_count(l, id);
		if (called == 0) {
			t->no_receipt++;
			t->no_receipt_ran += ran > 0;
			fprintf(stderr, "chaos: %s got no receipt (%s)\n", id,
				ran ? "it ran: its DONE was lost"
				    : "it never ran: its JOB was not taken by a live handler");
		} else if (called > 1) {
			t->doubled++;
		} else if (ok) {
			t->ok++;
			if (ran != 1) {
				t->ran_twice += ran > 1;
				t->ran_unreported += ran == 0;
				fprintf(stderr, "chaos: %s ok but ran %d times\n", id, ran);
			}
		} else if (retryable) {
			t->retryable++;
			if (ran > 1) {
				t->ran_twice++;
				fprintf(stderr, "chaos: %s (%s) ran %d times\n", id, code, ran);
			}
			if (!strstr(t->codes, code) &&
			    strlen(t->codes) + strlen(code) + 2 < sizeof t->codes)
				snprintf(t->codes + strlen(t->codes),
					 sizeof t->codes - strlen(t->codes), "%s%s",
					 t->codes[0] ? "," : "", code);
		} else {
			t->bad++;
			fprintf(stderr, "chaos: %s failed, not retryable: %s\n", id, code);
		}
	}
	fclose(f);
}

/* ---- the chaos ------------------------------------------------------------ */

static int all_slots_running(void *arg)
{
	(void)arg;
	for (int i = 0; i < F.n; i++)
		if (fleet_status_int(&F, i, "waitgroups", "wg", "running", NULL) != SLOTS)
			return 0;
	return 1;
}

static int quiet(struct json_object *st, void *arg)
{
	(void)arg;
	return harness_json_int(st, "waitgroups", "wg", "running", NULL) == 0 &&
	       harness_json_int(st, "waitgroups", "wg", "offered", NULL) == 0;
}

static void kill_handler(int i, unsigned *seed)
{
	int pids[8], n = harness_handler_pids(&F.d[i], pids, 8);
	if (n > 0 && pids[rand_r(seed) % n] > 0)
		kill(pids[rand_r(seed) % n], SIGKILL);
}

static void test_chaos_hosts(void)
{
	int seconds = env_int("CHAOS_HOSTS_SECONDS", 20);
	unsigned seed0 = (unsigned)env_int("CHAOS_HOSTS_SEED", 19), seed = seed0;
	const char *bodies[SERVERS];
	for (int i = 0; i < SERVERS; i++)
		bodies[i] = body();
	snprintf(results_dir, sizeof results_dir, "/tmp/es-chaos-XXXXXX");
	CU_ASSERT_FATAL(mkdtemp(results_dir) != NULL);
	snprintf(ledger, sizeof ledger, "%s/ledger", results_dir);
	struct fleet_place p = { .balancer = LB, .server_opts = "send-proxy-v2" };
	for (int i = 0; i < SERVERS; i++)
		p.host[i] = SERVER_HOST(i);
	CU_ASSERT_FATAL(fleet_start_placed(&F, SERVERS, SLOTS, bodies, &p) == 0);
	long long masters[SERVERS];
	for (int i = 0; i < SERVERS; i++)
		masters[i] = fleet_status_int(&F, i, "master_pid", NULL);

	pid_t kids[CLIENTS];
	for (int h = 0; h < CLIENTS; h++) {
		fflush(NULL);
		kids[h] = bed_fork(CLIENT_HOST(h));
		if (kids[h] == 0)
			client_main(h, seconds);
		CU_ASSERT_FATAL(kids[h] > 0);
	}

	/* the chaos: one action every 0.5-1.5 s */
	int bursts = 0, cuts = 0, handler_kills = 0, server_kills = 0, killed = -1;
	long long start = harness_now_ms(), end = start + seconds * 1000LL;
	const struct bed_host *shaped = NULL;
	long long restore_at = 0;
	while (harness_now_ms() < end) {
		long long now = harness_now_ms();
		if (shaped && now >= restore_at) {
			bed_mend(shaped);
			bed_loss(shaped, 0);
			shaped = NULL;
		}
		if (killed < 0 && now - start >= seconds * 1000LL / 2) {
			killed = (int)(rand_r(&seed) % SERVERS);
			kill(F.d[killed].pid, SIGKILL);
			harness_reap(&F.d[killed].pid, 0, 5000);
			server_kills++;
			CU_ASSERT(fleet_restart(&F, killed, bodies[killed]) == 0);
		}
		int action = (int)(rand_r(&seed) % 3);
		if (action < 2 && !shaped) {
			/* hosts b..h: the balancer, the servers, the clients */
			shaped = &B.host[1 + rand_r(&seed) % 7];
			fprintf(stderr, "chaos: +%lld ms: host %c: %s\n", now - start,
				shaped->label, action ? "cut" : "loss burst");
			if (action == 0) {
				bed_loss(shaped, 20 + (int)(rand_r(&seed) % 40));
				bursts++;
			} else {
				bed_cut(shaped);
				cuts++;
			}
			restore_at = now + 1000 + rand_r(&seed) % 2000;
		} else if (action == 2) {
			kill_handler((int)(rand_r(&seed) % SERVERS), &seed);
			handler_kills++;
		}
		harness_sleep_ms(500 + (int)(rand_r(&seed) % 1000));
	}
	if (shaped) {
		bed_mend(shaped);
		bed_loss(shaped, 0);
	}
	for (int h = 0; h < CLIENTS; h++) {
		int status = harness_reap(&kids[h], 0, 90000);
		CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}

	struct ledger l;
	struct tally t = { 0 };
	read_ledger(&l);
	CU_ASSERT_FATAL(l.ids != NULL);
	for (int h = 0; h < CLIENTS; h++)
		check_client(h, &l, &t);
	printf("\n  chaos across hosts: %d s, seed %u: %d jobs, %d ok, %d retryable (%s), "
	       "%d without a receipt (%d of them ran), %d loss bursts, %d cuts, %d handlers and "
	       "%d execserver killed ",
	       seconds, seed0, t.jobs, t.ok, t.retryable, t.codes[0] ? t.codes : "-", t.no_receipt,
	       t.no_receipt_ran, bursts, cuts, handler_kills, server_kills);
	CU_ASSERT_EQUAL(t.no_receipt, 0);
	CU_ASSERT_EQUAL(t.doubled, 0);
	CU_ASSERT_EQUAL(t.bad, 0);
	CU_ASSERT_EQUAL(t.ran_twice, 0);
	CU_ASSERT_EQUAL(t.ran_unreported, 0);
	CU_ASSERT_EQUAL(t.ok + t.retryable, t.jobs);
	CU_ASSERT(l.n <= t.jobs);
	/* It did work under fire: a floor far below an idle machine's rate
	 * (about 60 jobs/s), not a throughput figure (make bench has those). */
	CU_ASSERT(t.jobs >= 10 * seconds);
	free(l.ids);

	/* nothing held, every slot grantable, masters alive */
	for (int i = 0; i < F.n; i++) {
		CU_ASSERT(harness_wait_status(&F.d[i], 20000, quiet, NULL) == 0);
		struct json_object *st = harness_status(&F.d[i]), *v;
		CU_ASSERT(st && json_object_object_get_ex(st, "book_consistent", &v) &&
			  json_object_get_boolean(v));
		if (i != killed)
			CU_ASSERT_EQUAL(harness_json_int(st, "master_pid", NULL), masters[i]);
		if (st)
			json_object_put(st);
	}
	struct exc_options o;
	fx_options(&o);
	CU_ASSERT_FATAL(bed_enter(&B.host[0]) == 0);
	exc_client *c = fx_client(&o, F.d, F.n, NULL);
	CU_ASSERT_FATAL(c != NULL);
	struct fx_done sl[SERVERS * SLOTS];
	memset(sl, 0, sizeof sl);
	for (int i = 0; i < SERVERS * SLOTS; i++) {
		struct exc_job_spec s;
		fx_spec(&s, "sleep", "{\"command\":\"sleep\",\"args\":[\"3\"]}", &sl[i]);
		CU_ASSERT(exc_submit(c, &s) != NULL);
	}
	CU_ASSERT(fx_wait_pred(all_slots_running, NULL, 15000));
	exc_client_free(c);
	fx_spin(50);
	bed_leave();
	CU_ASSERT(fleet_stop(&F) == 0);
	if (CU_get_number_of_failures() == 0)
		harness_remove_dir(results_dir);
	else
		fprintf(stderr, "chaos: results kept in %s\n", results_dir);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "chaos across hosts loses no receipt and runs nothing twice", test_chaos_hosts },
		{ NULL, NULL },
	};
	return bed_run_suite("test_chaos_hosts", "chaos_hosts", cases, &B, 8);
}
