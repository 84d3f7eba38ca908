/*
 * test_job.c - unit tests of a job's life (src/job/job.c) without a daemon:
 * a real want-book in plain memory (tests/unit/book_fixture.c), a real
 * libevent loop with SIGCHLD, real processes (/bin/sh), and job.c's host
 * interface filled by the test instead of a handler.
 *
 * Owns: the proof that an accepted job runs in a directory of its own
 * under tempDir/job, that its end puts exactly one outcome and receipt
 * into the book (exit code, the last stderr line, the stdout prefix; a
 * signal; exec_failed for a program not found, also at an absolute path
 * that is no executable file, and for an execve that fails in the child
 * with that errno; cancelled, timeout and
 * exec_stopped with their retryable flags), that the book then mails the
 * DONE to the owner's handler and frees the slot, that the host hears of
 * each end once (job_ended) with the job no longer counted, and that a
 * job's process group is in the book while it runs and forgotten after;
 * and the exact text of the receipts no process ends and of a DONE.
 */
#include "autoconfig.h"

#include <CUnit/Basic.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "book_fixture.h"
#include "config/config.h"
#include "execserver/protocol.h"
#include "job/janitor.h"
#include "job/job.h"
#include "job/receipt.h"
#include "suite.h"

static struct fx F;
static struct es_config cfg;
static struct event_base *base;
static struct event *sigchld_ev;
static char root[64];
static unsigned ended;          /* job_ended calls */
static unsigned running_at_end; /* job_running_count() seen by job_ended */
static int draining;

static struct book *host_lock(void)
{
	fx_lock(&F);
	return F.b;
}

static void host_unlock(void)
{
	fx_unlock(&F);
}

static int host_draining(void)
{
	return draining;
}

static void host_job_ended(void)
{
	ended++;
	running_at_end = job_running_count();
	event_base_loopbreak(base);
}

static void on_sigchld(evutil_socket_t fd, short what, void *arg)
{
	job_reap();
}

static int suite_init(void)
{
	static const uint32_t procs[] = { 2 }, svc_wg[] = { 0 };
	char text[1024];
	struct config_error err;
	struct book_limits lim;
	struct book_topology topo;

	snprintf(root, sizeof root, "/tmp/es-job-XXXXXX");
	if (!mkdtemp(root))
		return -1;
	snprintf(text, sizeof text,
		 "tempDir: %s\n"
		 "jobRemovalPolicy: all\n"
		 "waitgroups:\n"
		 "  w: {processes: 2}\n"
		 "services:\n"
		 "  s:\n"
		 "    waitgroup: w\n"
		 "    commands:\n"
		 "      sh: {prog: /bin/sh}\n"
		 "      missing: {prog: es-no-such-program-xyz}\n"
		 "      gone: {prog: %s/gone}\n"
		 "      noexec: {prog: %s/noexec}\n"
		 "      badformat: {prog: %s/badformat}\n"
		 "      isdir: {prog: %s/isdir}\n",
		 root, root, root, root, root);
	/* absolute paths: the file that is removed before its job runs, one
	 * that is not executable, one that is but execve refuses (neither
	 * a script nor a binary: ENOEXEC, known only in the child), and a
	 * directory */
	static const char *const files[] = { "gone", "noexec", "badformat" };
	static const char *const texts[] = { "#!/bin/sh\nexit 0\n", "#!/bin/sh\nexit 0\n",
					     "not a program\n" };
	for (int i = 0; i < 3; i++) {
		char path[600];
		snprintf(path, sizeof path, "%s/%s", root, files[i]);
		FILE *f = fopen(path, "w");
		if (!f || fputs(texts[i], f) < 0 || fclose(f) != 0 ||
		    chmod(path, i == 1 ? 0644 : 0755) != 0)
			return -1;
	}
	char isdir[600];
	snprintf(isdir, sizeof isdir, "%s/isdir", root);
	if (mkdir(isdir, 0755) != 0)
		return -1;
	if (config_load_buffer("t.yml", text, strlen(text), &cfg, &err) != 0) {
		fprintf(stderr, "%s\n", err.text);
		return -1;
	}
	if (janitor_prepare(&cfg) != 0)
		return -1;
	fx_limits(&lim);
	lim.receipt_bytes = RECEIPT_MAX_BYTES; /* as the daemon's segment has it */
	fx_topo(&topo, 1, procs, 1, svc_wg);
	if (fx_init(&F, &lim, &topo, 1) != 0)
		return -1;
	base = event_base_new();
	sigchld_ev = evsignal_new(base, SIGCHLD, on_sigchld, NULL);
	if (!base || !sigchld_ev || event_add(sigchld_ev, NULL) != 0)
		return -1;
	/* after the SIGCHLD disposition is set: spawn_init reads it */
	struct job_host host = { .base = base,
				 .cfg = &cfg,
				 .slot = 0,
				 .nslots = 1,
				 .book_lock = host_lock,
				 .book_unlock = host_unlock,
				 .draining = host_draining,
				 .job_ended = host_job_ended };
	return job_init(&host);
}

/* ---- one job --------------------------------------------------------- */

struct ran {
	struct book_outcome o;
	struct json_object *receipt; /* parsed; NULL if none */
	int done_mailed;             /* a DONE mail for the owner's handler */
	int32_t pgid_running;        /* the pgid the book held while it ran */
};

static struct book_ref conn;
static unsigned njob;

/* The process group the book holds for handler 0's running job (0: none),
 * as the master would read it when purging the handler: from a copy of
 * the book, so that the real one goes on. */
static int32_t book_pgid(void)
{
	int32_t pgids[4];
	size_t n = 0;
	void *mem = malloc(F.size);

	if (!mem)
		return -1;
	memcpy(mem, F.mem, F.size);
	struct book *copy = book_from_mem(mem);
	if (copy)
		n = book_purge_handler(copy, 0, pgids, 4);
	free(mem);
	return n == 1 ? pgids[0] : 0;
}

static uint32_t wg_running(void)
{
	struct book_wg_status st;
	fx_wg(&F, 0, &st);
	return st.running;
}

static void limit_cb(evutil_socket_t fd, short what, void *arg)
{
	event_base_loopbreak(base);
}

static void pgid_cb(evutil_socket_t fd, short what, void *arg)
{
	*(int32_t *)arg = book_pgid();
}

struct cancel_at {
	struct book_ref want;
	enum job_cancel_reason why;
	int stop_all;
};

static void cancel_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cancel_at *c = arg;
	if (c->stop_all)
		job_stop_all();
	else
		job_cancel(c->want, c->why);
}

/* Runs {"command": command, "args": args, extra} as an accepted job and
 * waits (at most 20 s) for its end.  cancel: cancelled after 300 ms, or
 * NULL.  Returns 0 when it ended once. */
static int run_job(const char *command, const char *const *args, int timeout_sec,
		   struct cancel_at *cancel, struct ran *out)
{
	char id[32];
	struct book_ref want;

	memset(out, 0, sizeof *out);
	snprintf(id, sizeof id, "job-%u", ++njob);
	if (!conn.gen && fx_open(&F, 0, "client-a", 1, &conn) != BOOK_OK)
		return -1;
	if (fx_want(&F, conn, id, 0, 0, 1) != BOOK_OK ||
	    fx_take_job(&F, conn, id, &want) != BOOK_OK)
		return -1;

	struct json_object *desc = json_object_new_object(), *a = json_object_new_array();
	json_object_object_add(desc, "command", json_object_new_string(command));
	for (size_t i = 0; args && args[i]; i++)
		json_object_array_add(a, json_object_new_string(args[i]));
	json_object_object_add(desc, "args", a);
	if (timeout_sec)
		json_object_object_add(desc, "timeout_sec", json_object_new_int(timeout_sec));

	unsigned ended_before = ended;
	fx_log_clear(&F);
	const char *code = NULL;
	char why[256];
	struct job_plan *plan = job_prepare(0, desc, &code, why, sizeof why);
	CU_ASSERT_PTR_NOT_NULL_FATAL(plan);
	json_object_put(desc); /* the plan keeps what it needs */
	job_start(want, id, plan, NULL, NULL);
	job_plan_free(plan);
	/* running, unless it ended at once (a program not found) */
	CU_ASSERT_EQUAL(job_running_count(), ended == ended_before ? 1u : 0u);
	CU_ASSERT_EQUAL(wg_running(), ended == ended_before ? 1u : 0u);

	struct timeval at_100ms = { 0, 100000 }, at_300ms = { 0, 300000 }, limit = { 20, 0 };
	struct event *pgid_ev = evtimer_new(base, pgid_cb, &out->pgid_running);
	evtimer_add(pgid_ev, &at_100ms);
	struct event *cancel_ev = NULL;
	if (cancel) {
		cancel->want = want;
		cancel_ev = evtimer_new(base, cancel_cb, cancel);
		evtimer_add(cancel_ev, &at_300ms);
	}
	struct event *limit_ev = evtimer_new(base, limit_cb, NULL);
	evtimer_add(limit_ev, &limit);
	while (ended == ended_before && evtimer_pending(limit_ev, NULL) &&
	       event_base_dispatch(base) == 0)
		;
	event_free(limit_ev);
	event_free(pgid_ev);
	if (cancel_ev)
		event_free(cancel_ev);
	if (ended != ended_before + 1)
		return -1;

	char text[RECEIPT_MAX_BYTES];
	size_t len = 0;
	if (fx_done_read(&F, want, &out->o, text, sizeof text - 1, &len) != BOOK_OK)
		return -1;
	text[len] = '\0';
	out->receipt = len ? json_tokener_parse(text) : NULL;
	fx_pump(&F);
	const struct fx_mail *m = fx_find(&F, MAIL_DONE, id);
	out->done_mailed = m && m->handler == 0;
	return fx_delivered(&F, want) == BOOK_OK ? 0 : -1;
}

/* The receipt's o[key] (or o[key][key2]) as text, "" when missing. */
static const char *str_at(struct json_object *o, const char *key, const char *key2)
{
	struct json_object *v;
	if (!o || !json_object_object_get_ex(o, key, &v))
		return "";
	if (key2 && !json_object_object_get_ex(v, key2, &v))
		return "";
	return json_object_get_string(v);
}

static int int_at(struct json_object *o, const char *key, int missing)
{
	struct json_object *v;
	if (!o || !json_object_object_get_ex(o, key, &v))
		return missing;
	return json_object_get_int(v);
}

static int retryable(struct json_object *o)
{
	struct json_object *e, *v;
	return o && json_object_object_get_ex(o, "error", &e) &&
	       json_object_object_get_ex(e, "retryable", &v) && json_object_get_boolean(v);
}

/* ---- tests ----------------------------------------------------------- */

static void test_exit_code_and_stderr_line(void)
{
	static const char *const args[] = { "-c",
					    "echo first >&2; echo last >&2; printf out; exit 3",
					    NULL };
	struct ran r;

	CU_ASSERT_FATAL(run_job("sh", args, 0, NULL, &r) == 0);
	CU_ASSERT_EQUAL(r.o.exit_code, 3);
	CU_ASSERT_EQUAL(r.o.failed, 1);
	CU_ASSERT_EQUAL(r.o.error, JOB_ERR_NONE);
	CU_ASSERT_EQUAL(int_at(r.receipt, "exit_code", -99), 3);
	CU_ASSERT_STRING_EQUAL(str_at(r.receipt, "stderr", NULL), "last");
	CU_ASSERT_STRING_EQUAL(str_at(r.receipt, "stdout", NULL), "out");
	CU_ASSERT_STRING_EQUAL(str_at(r.receipt, "error", NULL), "");
	CU_ASSERT(r.done_mailed);
	CU_ASSERT_EQUAL(running_at_end, 0);
	json_object_put(r.receipt);
}

/* The description is parsed once, before the job has its directory, with
 * a name as long as any: an argument naming %jobdir% is the directory the
 * job runs in all the same (parsed again with it), one without is run as
 * parsed. */
static void test_jobdir_argument_is_the_real_directory(void)
{
	static const char *const named[] = { "-c", "[ \"$1\" = \"$(pwd -P)\" ] || exit 3", "sh",
					     "%jobdir%", NULL };
	static const char *const plain[] = { "-c", "exit 4", NULL };
	struct ran r;

	CU_ASSERT_FATAL(run_job("sh", named, 0, NULL, &r) == 0);
	CU_ASSERT_EQUAL(r.o.exit_code, 0);
	json_object_put(r.receipt);
	CU_ASSERT_FATAL(run_job("sh", plain, 0, NULL, &r) == 0);
	CU_ASSERT_EQUAL(r.o.exit_code, 4);
	json_object_put(r.receipt);
}

/* job_prepare refuses what job_validate refuses, with the same code and
 * message, and keeps nothing then. */
static void test_prepare_refuses_as_validate(void)
{
	static const char *const jobs[] = {
		"{\"command\":\"rm\"}",
		"{\"command\":\"sh\",\"args\":[1]}",
		"{\"command\":\"sh\",\"env\":[\"LD_PRELOAD=/x\"]}",
		"{\"command\":\"sh\",\"stdin\":\"file:///etc/shadow\"}",
	};
	static const char *const codes[] = { PROTO_E_UNKNOWN_COMMAND, PROTO_E_BAD_JOB,
					     PROTO_E_BAD_JOB, PROTO_E_BAD_JOB };
	for (size_t i = 0; i < sizeof jobs / sizeof jobs[0]; i++) {
		struct json_object *desc = json_tokener_parse(jobs[i]);
		const char *vcode = NULL, *pcode = NULL;
		char vwhy[256], pwhy[256];
		CU_ASSERT_FATAL(desc != NULL);
		CU_ASSERT_EQUAL(job_validate(0, desc, &vcode, vwhy, sizeof vwhy), -1);
		CU_ASSERT_PTR_NULL(job_prepare(0, desc, &pcode, pwhy, sizeof pwhy));
		CU_ASSERT_PTR_NOT_NULL_FATAL(pcode);
		CU_ASSERT_STRING_EQUAL(pcode, codes[i]);
		CU_ASSERT_STRING_EQUAL(vcode, codes[i]);
		CU_ASSERT_STRING_EQUAL(pwhy, vwhy);
		/* only the caller's reference is left */
		CU_ASSERT_EQUAL(json_object_put(desc), 1);
	}
}

static void test_success_runs_in_its_directory(void)
{
	static const char *const args[] = { "-c", "pwd; exec sleep 0.5", NULL };
	char prefix[128];
	struct ran r;

	CU_ASSERT_FATAL(run_job("sh", args, 0, NULL, &r) == 0);
	CU_ASSERT_EQUAL(r.o.exit_code, 0);
	CU_ASSERT_EQUAL(r.o.failed, 0);
	/* the program's own process group was in the book while it ran */
	CU_ASSERT(r.pgid_running > 0);
	/* tempDir/job/<slot>-... */
	snprintf(prefix, sizeof prefix, "%s/job/0-", root);
	const char *out = str_at(r.receipt, "stdout", NULL);
	CU_ASSERT_EQUAL(strncmp(out, prefix, strlen(prefix)), 0);
	/* jobRemovalPolicy all: the directory is not left behind as it was
	 * (it is gone, or an empty spare for the next job) */
	char dir[256];
	snprintf(dir, sizeof dir, "%.*s", (int)strcspn(out, "\n"), out);
	struct stat st;
	char probe[300];
	snprintf(probe, sizeof probe, "%s/.", dir);
	CU_ASSERT(stat(probe, &st) != 0 || st.st_nlink == 2);
	CU_ASSERT(r.done_mailed);
	/* the slot is free again and the process group forgotten */
	CU_ASSERT_EQUAL(wg_running(), 0);
	CU_ASSERT_EQUAL(book_pgid(), 0);
	json_object_put(r.receipt);
}

static void test_signal(void)
{
	static const char *const args[] = { "-c", "kill -9 $$", NULL };
	struct ran r;

	CU_ASSERT_FATAL(run_job("sh", args, 0, NULL, &r) == 0);
	CU_ASSERT_EQUAL(r.o.signal, SIGKILL);
	CU_ASSERT_EQUAL(r.o.exit_code, -1);
	CU_ASSERT_EQUAL(r.o.failed, 1);
	CU_ASSERT_EQUAL(int_at(r.receipt, "signal", 0), SIGKILL);
	CU_ASSERT_EQUAL(int_at(r.receipt, "exit_code", -99), -99);
	json_object_put(r.receipt);
}

static void test_program_not_found(void)
{
	struct ran r;

	CU_ASSERT_FATAL(run_job("missing", NULL, 0, NULL, &r) == 0);
	CU_ASSERT_EQUAL(r.o.error, JOB_ERR_EXEC_FAILED);
	CU_ASSERT_EQUAL(r.o.failed, 1);
	CU_ASSERT_STRING_EQUAL(str_at(r.receipt, "error", "code"), "exec_failed");
	CU_ASSERT_STRING_EQUAL(str_at(r.receipt, "error", "message"), strerror(ENOENT));
	CU_ASSERT(!retryable(r.receipt));
	CU_ASSERT(r.done_mailed);
	json_object_put(r.receipt);
}

/* An absolute program path goes to execve unchecked (no stat + access per
 * job), and what execve refuses is told as the check did: a program
 * removed after the configuration was read, a file that is not executable
 * and a directory end as a missing program does, once, with the same
 * message (ENOENT, not execve's EACCES).  A step that fails in the child
 * for a program that is there (execve itself: badformat) ends the same
 * way with that step's errno, not as the exit code 127 the child leaves. */
static void test_absolute_program_not_executable(void)
{
	static const char *const cmds[] = { "gone", "noexec", "badformat", "badformat", "isdir" };
	static const int errs[] = { ENOENT, ENOENT, ENOEXEC, ENOEXEC, ENOENT };
	char path[600];
	struct ran r;

	snprintf(path, sizeof path, "%s/gone", root);
	CU_ASSERT_FATAL(unlink(path) == 0);
	for (int i = 0; i < 5; i++) {
		unsigned ended_before = ended;
		CU_ASSERT_FATAL(run_job(cmds[i], NULL, 0, NULL, &r) == 0);
		CU_ASSERT_EQUAL(ended, ended_before + 1);
		CU_ASSERT_EQUAL(r.o.error, JOB_ERR_EXEC_FAILED);
		CU_ASSERT_EQUAL(r.o.exit_code, -1);
		CU_ASSERT_EQUAL(r.o.failed, 1);
		CU_ASSERT_STRING_EQUAL(str_at(r.receipt, "error", "code"), "exec_failed");
		CU_ASSERT_STRING_EQUAL(str_at(r.receipt, "error", "message"), strerror(errs[i]));
		CU_ASSERT_EQUAL(int_at(r.receipt, "exit_code", -99), -99);
		CU_ASSERT(r.done_mailed);
		CU_ASSERT_EQUAL(wg_running(), 0);
		CU_ASSERT_EQUAL(job_running_count(), 0);
		json_object_put(r.receipt);
	}
}

static void test_cancel(void)
{
	static const char *const args[] = { "-c", "exec sleep 30", NULL };
	struct cancel_at c = { .why = JOB_CANCEL_REQUESTED };
	struct ran r;

	CU_ASSERT_FATAL(run_job("sh", args, 0, &c, &r) == 0);
	CU_ASSERT_EQUAL(r.o.error, JOB_ERR_CANCELLED);
	CU_ASSERT_EQUAL(r.o.signal, SIGTERM);
	CU_ASSERT_STRING_EQUAL(str_at(r.receipt, "error", "code"), "cancelled");
	CU_ASSERT(!retryable(r.receipt));
	CU_ASSERT(r.o.duration_ms < 10000);
	json_object_put(r.receipt);
}

static void test_timeout(void)
{
	static const char *const args[] = { "-c", "exec sleep 30", NULL };
	struct ran r;

	CU_ASSERT_FATAL(run_job("sh", args, 1, NULL, &r) == 0);
	CU_ASSERT_EQUAL(r.o.error, JOB_ERR_TIMEOUT);
	CU_ASSERT_STRING_EQUAL(str_at(r.receipt, "error", "code"), "timeout");
	CU_ASSERT_STRING_EQUAL(str_at(r.receipt, "error", "message"), "timeout_sec exceeded");
	/* about the one second of timeout_sec: libevent's timers run on a
	 * coarse monotonic clock (a few ms early against clock_mono_ms) */
	CU_ASSERT(r.o.duration_ms >= 950 && r.o.duration_ms < 10000);
	if (r.o.duration_ms < 950)
		fprintf(stderr, "timeout after %u ms\n", (unsigned)r.o.duration_ms);
	json_object_put(r.receipt);
}

static void test_stop_all_is_retryable(void)
{
	static const char *const args[] = { "-c", "exec sleep 30", NULL };
	struct cancel_at c = { .stop_all = 1 };
	struct ran r;

	draining = 1;
	CU_ASSERT_FATAL(run_job("sh", args, 0, &c, &r) == 0);
	draining = 0;
	CU_ASSERT_EQUAL(r.o.error, JOB_ERR_EXEC_STOPPED);
	CU_ASSERT_EQUAL(r.o.retryable, 1);
	CU_ASSERT_STRING_EQUAL(str_at(r.receipt, "error", "code"), "exec_stopped");
	CU_ASSERT(retryable(r.receipt));
	json_object_put(r.receipt);
}

/* The two receipts no process ends: a CANCEL before the job ran (`error`
 * only, docs/protocol.md) and the compact one of a lost job; and the DONE
 * around a receipt, byte for byte. */
static void test_receipts_without_a_process(void)
{
	size_t len = 0;
	char *r = receipt_cancelled_before_run(&len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_STRING_EQUAL(r, "{\"error\":{\"code\":\"cancelled\",\"message\":"
				  "\"cancelled before it ran\",\"retryable\":false}}");
	CU_ASSERT_EQUAL(len, strlen(r));
	char *done = receipt_done_message("j/1", r, len);
	CU_ASSERT_STRING_EQUAL(done,
			       "{\"type\":\"DONE\",\"job_id\":\"j/1\",\"receipt\":{\"error\":"
			       "{\"code\":\"cancelled\",\"message\":\"cancelled before it ran\","
			       "\"retryable\":false}}}");
	free(done);
	free(r);
	/* a job id with what JSON escapes, as json-c prints it ('/' as is) */
	done = receipt_done_message("a\"b\\c/d", "{}", 2);
	CU_ASSERT_STRING_EQUAL(done,
			       "{\"type\":\"DONE\",\"job_id\":\"a\\\"b\\\\c/d\",\"receipt\":{}}");
	free(done);

	struct book_outcome lost = { .exit_code = -1, .error = JOB_ERR_LOST, .retryable = 1 };
	r = receipt_compact(&lost, &len);
	CU_ASSERT_STRING_EQUAL(
		r, "{\"duration_ms\":0,\"error\":{\"code\":\"exec_lost\",\"message\":"
		   "\"the execserver process running the job died\",\"retryable\":true}}");
	free(r);
}

static void test_book_consistent(void)
{
	char why[256];
	CU_ASSERT_EQUAL(ended, njob);
	CU_ASSERT_EQUAL(job_running_count(), 0);
	CU_ASSERT_EQUAL_FATAL(fx_check(&F, why, sizeof why), 0);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "exit code, last stderr line, stdout prefix", test_exit_code_and_stderr_line },
		{ "success in its own directory, pgid in the book",
		  test_success_runs_in_its_directory },
		{ "%jobdir% in an argument: the job's own directory",
		  test_jobdir_argument_is_the_real_directory },
		{ "job_prepare refuses as job_validate does", test_prepare_refuses_as_validate },
		{ "killed by a signal", test_signal },
		{ "program not found: exec_failed", test_program_not_found },
		{ "absolute path not executable: exec_failed, ENOENT; bad format: ENOEXEC",
		  test_absolute_program_not_executable },
		{ "cancel: SIGTERM, cancelled", test_cancel },
		{ "timeout_sec", test_timeout },
		{ "stop all (drain): exec_stopped, retryable", test_stop_all_is_retryable },
		{ "receipts without a process, DONE byte for byte",
		  test_receipts_without_a_process },
		{ "book consistent after every job", test_book_consistent },
		{ NULL, NULL },
	};
	if (suite_init() != 0) {
		fprintf(stderr, "test_job: set-up failed\n");
		return 1;
	}
	int rc = run_suite("job", cases);
	job_stop_all();
	event_free(sigchld_ev);
	event_base_free(base);
	fx_fini(&F);
	config_free(&cfg);
	janitor_remove_tree(root);
	return rc;
}
