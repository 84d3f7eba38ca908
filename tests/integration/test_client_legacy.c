/*
 * test_client_legacy.c - libexecclient's fallback to the legacy token
 * transport (protocol section 9) against real daemons started with
 * "broker: off" (GET /broker answers 404): a job with 3 MiB through stdin
 * and stdout, bytes compared; a failing job's exit code and decisive
 * stderr line in the receipt; input and output files served from the
 * library's pipe endpoints; polling once per second until
 * connect_timeout_sec, then the retryable no_slot; a mixed pool (one
 * broker instance, one legacy instance) running jobs on both; cancel of a
 * job running over a PUT; execctl run against a legacy-only address;
 * token polls whose connect fails at once (no descriptor left); and a PUT
 * whose connection ends after its head left, before 100 Continue (played
 * by a fake legacy server): lost, never placed again.
 */
#include "autoconfig.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <json-c/json.h>

#include "client_fixture.h"
#include "harness.h"
#include "suite.h"

/* A daemon with one handler and the service "tools" (cat, cp, sh, sleep)
 * on `slots` processes; legacy: 1 starts it without the broker. */
static int start(struct es_daemon *d, int slots, int legacy)
{
	const char *head = legacy ? "jobRemovalPolicy: all\n"
				    "broker: off\n"
				    "legacyTokenValiditySec: 3\n"
				  : "jobRemovalPolicy: all\n";

	return harness_start(d, 1, harness_tools_body(head, slots, "cat cp sh sleep", NULL), NULL);
}

static int count_log(const char *needle)
{
	int n = 0;

	for (const char *p = fx_log_find(needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* /broker is off (404): the library falls back; 3 MiB through cat. */
static void test_fallback_bytes(void)
{
	struct es_daemon d;
	struct fx_done done = { 0 };
	struct exc_job_spec s;
	size_t n = 3 << 20;
	unsigned char *data = harness_pattern(n);
	char path[300];
	exc_client *c;
	int fd;

	CU_ASSERT_FATAL(start(&d, 1, 1) == 0);
	snprintf(path, sizeof path, "%s/out.bin", d.dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	fx_log_clear();
	c = fx_client(NULL, &d, 1, NULL);
	CU_ASSERT_FATAL(c != NULL);
	fx_cat_spec(&s, &done, data, n, fd);
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&done.called, 30000));
	CU_ASSERT(done.ok);
	CU_ASSERT_EQUAL(done.exit_code, 0);
	CU_ASSERT_STRING_EQUAL(done.error_code, "");
	CU_ASSERT_EQUAL(done.stdin_bytes, n);
	CU_ASSERT_EQUAL(done.stdout_bytes, n);
	CU_ASSERT(fx_log_find("using the legacy token transport") != NULL);
	CU_ASSERT(fx_log_find("(legacy token)") != NULL);
	close(fd);
	fx_expect_file(path, data, n);
	free(data);
	/* the instance ran it as a token job */
	CU_ASSERT_EQUAL(harness_status_int(&d, "services", "tools", "finished", NULL), 1);
	fx_stop(c, &d);
}

/* A failing job: exit code, decisive stderr line and small output in the
 * receipt; a large failing output streamed, the outcome from the trailer;
 * a refused description is bad_job, not retryable. */
static void test_fallback_receipt(void)
{
	struct es_daemon d;
	struct fx_done a = { 0 }, b = { 0 }, e = { 0 };
	struct exc_job_spec s;
	exc_client *c;

	CU_ASSERT_FATAL(start(&d, 2, 1) == 0);
	c = fx_client(NULL, &d, 1, NULL);
	fx_spec(&s, "tools",
		"{\"command\":\"sh\",\"args\":[\"-c\","
		"\"echo some output; echo the decisive line >&2; exit 3\"]}",
		&a);
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&a.called, 20000));
	CU_ASSERT(!a.ok);
	CU_ASSERT(a.exited);
	CU_ASSERT_EQUAL(a.exit_code, 3);
	CU_ASSERT_STRING_EQUAL(a.stdout_text, "some output\n");
	CU_ASSERT_EQUAL(a.stdout_bytes, 0); /* not streamed: kept in the receipt */

	/* 100000 bytes, then a failure: streamed, outcome in the trailer
	 * (exit code 7 can only come from there) */
	fx_spec(&s, "tools",
		"{\"command\":\"sh\",\"args\":[\"-c\","
		"\"head -c 100000 /dev/zero; echo broken >&2; exit 7\"]}",
		&b);
	s.out.kind = EXC_IO_DISCARD;
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&b.called, 20000));
	CU_ASSERT(!b.ok);
	CU_ASSERT_EQUAL(b.exit_code, 7);
	/* streamed (the program cannot exit before the server read 100000 -
	 * 64 KiB of pipe, past the 4000-byte commit point); protocol 9: the body of
	 * a job that failed after the commit may hold less than it wrote */
	CU_ASSERT(b.stdout_bytes > 4000 && b.stdout_bytes <= 100000);

	fx_spec(&s, "tools", "{\"command\":\"rm\"}", &e);
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&e.called, 20000));
	CU_ASSERT_STRING_EQUAL(e.error_code, "unknown_command");
	CU_ASSERT_EQUAL(e.retryable, 0);
	fx_stop(c, &d);
}

struct stderr_seen {
	int called;
	char line[200];
	char json[600];
};

static void on_done_stderr(exc_job *j, const struct exc_receipt *r, void *arg)
{
	struct stderr_seen *s = arg;

	s->called = 1;
	snprintf(s->line, sizeof s->line, "%s", r->stderr_line ? r->stderr_line : "");
	snprintf(s->json, sizeof s->json, "%s", r->json ? r->json : "");
}

/* The decisive stderr line and the server's receipt JSON reach on_done. */
static void test_fallback_stderr_line(void)
{
	struct es_daemon d;
	struct stderr_seen seen = { 0 };
	struct exc_job_spec s;
	exc_client *c;

	CU_ASSERT_FATAL(start(&d, 1, 1) == 0);
	c = fx_client(NULL, &d, 1, NULL);
	exc_job_spec_init(&s);
	s.service = "tools";
	s.job_json = "{\"command\":\"sh\",\"args\":[\"-c\",\"echo first >&2; "
		     "echo the decisive line >&2; exit 2\"]}";
	s.on_done = on_done_stderr;
	s.arg = &seen;
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&seen.called, 20000));
	CU_ASSERT_STRING_EQUAL(seen.line, "the decisive line");
	CU_ASSERT_PTR_NOT_NULL(strstr(seen.json, "\"exit_code\":2"));
	fx_stop(c, &d);
}

/* Named input and output files go through the library's pipe endpoints. */
static void test_fallback_files(void)
{
	struct es_daemon d;
	exc_client *c;

	CU_ASSERT_FATAL(start(&d, 1, 1) == 0);
	c = fx_client(NULL, &d, 1, NULL);
	fx_files_job(c, &d);
	fx_stop(c, &d);
}

/* A legacy daemon d with one slot and a client c on it; a job of `sleep
 * secs` (done into busy) holds the slot by a token: every GET /token
 * answers 503 until it ends.  The client's log is cleared. */
static exc_client *busy_legacy(struct es_daemon *d, struct fx_done *busy, const char *secs)
{
	struct exc_job_spec s;
	char job[100];
	exc_client *c;

	CU_ASSERT_FATAL(start(d, 1, 1) == 0);
	c = fx_client(NULL, d, 1, NULL);
	snprintf(job, sizeof job, "{\"command\":\"sleep\",\"args\":[\"%s\"]}", secs);
	fx_spec(&s, "tools", job, busy);
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	for (int i = 0; i < 200 && harness_status_int(d, "waitgroups", "wg", "tokens", NULL) < 1;
	     i++)
		fx_spin(50);
	CU_ASSERT_EQUAL_FATAL(harness_status_int(d, "waitgroups", "wg", "tokens", NULL), 1);
	fx_log_clear();
	return c;
}

/* The only slot stays taken: the second job polls GET /token about once a
 * second and ends after connect_timeout_sec with the retryable no_slot. */
static void test_poll_until_timeout(void)
{
	struct es_daemon d;
	struct fx_done busy = { 0 }, late = { 0 };
	struct exc_job_spec s;
	exc_client *c;
	long long t0, took;
	int polls;

	c = busy_legacy(&d, &busy, "8");
	fx_spec(&s, "tools", "{\"command\":\"cat\"}", &late);
	s.connect_timeout_sec = 3;
	t0 = harness_now_ms();
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&late.called, 10000));
	took = harness_now_ms() - t0;
	CU_ASSERT_STRING_EQUAL(late.error_code, "no_slot");
	CU_ASSERT_EQUAL(late.retryable, 1);
	CU_ASSERT(took >= 2900 && took < 4500);
	/* at 0, 1 and 2 s (and maybe 3 s): once a second, no more */
	polls = count_log("GET /token at");
	CU_ASSERT(polls >= 3 && polls <= 4);
	if (polls < 3 || polls > 4)
		fprintf(stderr, "\n%d polls in %lld ms\n", polls, took);
	CU_ASSERT(fx_log_find("HTTP 503") != NULL);
	CU_ASSERT_EQUAL(busy.called, 0);
	/* the first job still runs to its end */
	CU_ASSERT(fx_wait(&busy.called, 15000));
	CU_ASSERT(busy.ok);
	fx_stop(c, &d);
}

/* Cancel of a job running over a PUT: the connection closes, the server
 * kills the job and frees the slot. */
static void test_cancel_running(void)
{
	struct es_daemon d;
	struct fx_done done = { 0 };
	struct exc_job_spec s;
	exc_client *c;
	exc_job *j;

	CU_ASSERT_FATAL(start(&d, 1, 1) == 0);
	c = fx_client(NULL, &d, 1, NULL);
	fx_spec(&s, "tools", "{\"command\":\"sleep\",\"args\":[\"30\"]}", &done);
	j = exc_submit(c, &s);
	CU_ASSERT_FATAL(j != NULL);
	for (int i = 0; i < 200 && harness_status_int(&d, "waitgroups", "wg", "tokens", NULL) < 1;
	     i++)
		fx_spin(50);
	CU_ASSERT_STRING_EQUAL(exc_job_state(j), "running");
	CU_ASSERT_EQUAL(exc_cancel(j), 0);
	CU_ASSERT(fx_wait(&done.called, 5000));
	CU_ASSERT_STRING_EQUAL(done.error_code, "cancelled");
	for (int i = 0; i < 100 && harness_status_int(&d, "waitgroups", "wg", "tokens", NULL) != 0;
	     i++)
		fx_spin(50);
	CU_ASSERT_EQUAL(harness_status_int(&d, "waitgroups", "wg", "tokens", NULL), 0);
	fx_stop(c, &d);
}

/* One broker instance and one legacy instance, one slot each: six jobs of
 * a second each run on both, each exactly once. */
static void test_mixed_pool(void)
{
	struct es_daemon d[2];
	struct fx_done done[6];
	struct exc_job_spec s;
	char broker_id[65];
	exc_client *c;
	int on_broker = 0, on_legacy = 0, all = 0;

	memset(done, 0, sizeof done);
	CU_ASSERT_FATAL(start(&d[0], 1, 0) == 0);
	CU_ASSERT_FATAL(start(&d[1], 1, 1) == 0);
	fx_instance_id(&d[0], broker_id);
	fx_log_clear();
	c = fx_client(NULL, d, 2, NULL);
	for (int i = 0; i < 6; i++) {
		fx_spec(&s, "tools", "{\"command\":\"sh\",\"args\":[\"-c\",\"sleep 1; echo ran\"]}",
			&done[i]);
		CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	}
	for (int t = 0; t < 600 && all < 6; t++) {
		fx_spin(50);
		all = 0;
		for (int i = 0; i < 6; i++)
			all += done[i].called;
	}
	CU_ASSERT_EQUAL(all, 6);
	for (int i = 0; i < 6; i++) {
		CU_ASSERT_EQUAL(done[i].called, 1);
		CU_ASSERT(done[i].ok);
		CU_ASSERT_STRING_EQUAL(done[i].stdout_text, "ran\n");
		if (strcmp(done[i].instance_id, broker_id) == 0)
			on_broker++;
		else if (done[i].instance_id[0] == '\0')
			on_legacy++;
	}
	CU_ASSERT(on_broker >= 1);
	CU_ASSERT(on_legacy >= 1);
	CU_ASSERT_EQUAL(on_broker + on_legacy, 6);
	CU_ASSERT_EQUAL(harness_status_int(&d[0], "services", "tools", "started", NULL), on_broker);
	CU_ASSERT_EQUAL(harness_status_int(&d[1], "services", "tools", "started", NULL), on_legacy);
	exc_client_free(c);
	for (int i = 0; i < 2; i++)
		fx_stop(NULL, &d[i]);
}

/* While a job polls, every GET /token fails inside the connect call (no
 * descriptor left: socket() says EMFILE): the failure comes from the
 * loop, after the request was linked to the job, so that it is unlinked
 * and freed once (the sanitizer pass runs this), and polling goes on
 * once descriptors are back; the job ends no_slot at its connect
 * timeout. */
static void test_poll_connect_fails_at_once(void)
{
	struct es_daemon d;
	struct fx_done busy = { 0 }, late = { 0 };
	struct exc_job_spec s;
	exc_client *c;

	c = busy_legacy(&d, &busy, "7");
	fx_spec(&s, "tools", "{\"command\":\"cat\"}", &late);
	s.connect_timeout_sec = 5;
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	while (!fx_log_find("HTTP 503") && !late.called)
		fx_spin(20);
	CU_ASSERT_FATAL(fx_fds_exhaust() >= 0);
	fx_spin(2200); /* two polls */
	fx_fds_release();
	CU_ASSERT(count_log("no answer: Too many open files") >= 1);
	fx_log_clear();
	CU_ASSERT(fx_wait(&late.called, 10000));
	CU_ASSERT_STRING_EQUAL(late.error_code, "no_slot");
	/* the failed requests are gone: polling went on (a freed one taken
	 * for a request in flight would have stopped it) */
	CU_ASSERT(fx_log_find("HTTP 503") != NULL);
	CU_ASSERT(fx_wait(&busy.called, 15000));
	CU_ASSERT(busy.ok);
	fx_stop(c, &d);
}

/* ---- a legacy execserver that loses the PUT's answer ------------------------------ */

/* Plays an execserver without the broker on fx_base: GET /broker answers
 * 404, GET /token/<svc> a token; a PUT /job is counted and its connection
 * closed once its head arrived, without an answer (as if the 100 Continue
 * of a started program were lost with the connection). */
struct fake_legacy {
	struct evconnlistener *lis;
	int port;
	unsigned tokens, puts;
};

static void fake_written(struct bufferevent *bev, void *arg)
{
	if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		bufferevent_free(bev);
}

static void fake_event(struct bufferevent *bev, short what, void *arg)
{
	bufferevent_free(bev);
}

static void fake_read(struct bufferevent *bev, void *arg)
{
	static const char token[] = "{\"token\":\"00000001000000020123456789abcdef\","
				    "\"service\":\"tools\",\"valid_ms\":10000}";
	struct fake_legacy *f = arg;
	struct evbuffer *in = bufferevent_get_input(bev), *out = bufferevent_get_output(bev);
	char line[16] = "";

	if (evbuffer_search(in, "\r\n\r\n", 4, NULL).pos < 0)
		return;
	evbuffer_copyout(in, line, sizeof line - 1);
	evbuffer_drain(in, evbuffer_get_length(in));
	if (strncmp(line, "PUT ", 4) == 0) {
		f->puts++;
		bufferevent_free(bev);
		return;
	}
	if (strncmp(line, "GET /token/", 11) == 0) {
		f->tokens++;
		evbuffer_add_printf(out,
				    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
				    "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
				    strlen(token), token);
	} else {
		evbuffer_add_printf(out, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n"
					 "Connection: close\r\n\r\n");
	}
	/* closed once the answer is out */
	bufferevent_setcb(bev, NULL, fake_written, fake_event, f);
	bufferevent_disable(bev, EV_READ);
}

static void fake_accept(struct evconnlistener *lis, evutil_socket_t fd, struct sockaddr *sa,
			int salen, void *arg)
{
	struct bufferevent *bev = bufferevent_socket_new(evconnlistener_get_base(lis), fd,
							 BEV_OPT_CLOSE_ON_FREE);

	bufferevent_setcb(bev, fake_read, NULL, fake_event, arg);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
}

static int fake_legacy_start(struct fake_legacy *f)
{
	memset(f, 0, sizeof *f);
	if (fx_base == NULL)
		fx_base = event_base_new();
	f->lis = harness_listen(fx_base, fake_accept, f, &f->port);
	return f->lis ? 0 : -1;
}

/* The PUT's connection ends after its whole head left, before any answer
 * (no 100 Continue): the program may have started, so the job is not
 * placed again: it ends lost (retryable, "it may have run"), after one
 * PUT.  (A connection that fails before its head left goes back to
 * waiting: test_poll_connect_fails_at_once's jobs never send one.) */
static void test_put_lost_before_continue(void)
{
	struct fake_legacy f;
	struct fx_done done = { 0 };
	struct exc_job_spec s;
	struct exc_options o;
	char url[100];
	exc_client *c;

	CU_ASSERT_FATAL(fake_legacy_start(&f) == 0);
	fx_options(&o);
	c = fx_client(&o, NULL, 0, NULL);
	CU_ASSERT_FATAL(c != NULL);
	snprintf(url, sizeof url, "ws://127.0.0.1:%d", f.port);
	CU_ASSERT_FATAL(exc_client_add_address(c, url) == 0);
	fx_log_clear();
	fx_spec(&s, "tools", "{\"command\":\"cat\"}", &done);
	s.connect_timeout_sec = 5;
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&done.called, 10000));
	fx_spin(1500); /* a second PUT would come within a poll */
	CU_ASSERT_EQUAL(f.puts, 1);
	CU_ASSERT_STRING_EQUAL(done.error_code, "lost");
	CU_ASSERT(done.retryable);
	CU_ASSERT(strstr(done.error_message, "it may have run") != NULL);
	CU_ASSERT(fx_log_find("waiting again") == NULL);
	exc_client_free(c);
	evconnlistener_free(f.lis);
}

/* ---- execctl ---------------------------------------------------------------------- */

static char execctl[512];

/* execctl run -a addr -s tools -- cat, stdin from a file; returns its exit
 * status, stdout into outpath. */
static int run_execctl(const char *addr, const char *inpath, const char *outpath,
		       const char *errpath)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		int in = open(inpath, O_RDONLY),
		    out = open(outpath, O_WRONLY | O_CREAT | O_TRUNC, 0644),
		    err = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(in, 0);
		dup2(out, 1);
		dup2(err, 2);
		execl(execctl, execctl, "run", "--timeout", "20", "-a", addr, "-s", "tools", "--",
		      "cat", (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void test_execctl_legacy(void)
{
	struct es_daemon d;
	size_t n = 1 << 20, got = 0;
	unsigned char *data = harness_pattern(n), *back;
	char addr[64], in[300], out[300], err[300];
	FILE *f;
	int rc;

	CU_ASSERT_FATAL(start(&d, 1, 1) == 0);
	snprintf(addr, sizeof addr, "ws://127.0.0.1:%d", d.port);
	snprintf(in, sizeof in, "%s/in.bin", d.dir);
	snprintf(out, sizeof out, "%s/out.bin", d.dir);
	snprintf(err, sizeof err, "%s/err.txt", d.dir);
	f = fopen(in, "wb");
	CU_ASSERT_FATAL(f != NULL);
	CU_ASSERT(fwrite(data, 1, n, f) == n);
	fclose(f);
	rc = run_execctl(addr, in, out, err);
	CU_ASSERT_EQUAL(rc, 0);
	fx_expect_file(out, data, n);
	if (rc != 0) {
		back = harness_read_file(err, &got);
		fprintf(stderr, "\nexecctl: %d: %s\n", rc, back ? (char *)back : "");
		free(back);
	}
	free(data);
	fx_stop(NULL, &d);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "fallback: 3 MiB through stdin and stdout", test_fallback_bytes },
		{ "fallback: receipts of failing and refused jobs", test_fallback_receipt },
		{ "fallback: the decisive stderr line", test_fallback_stderr_line },
		{ "fallback: input and output files", test_fallback_files },
		{ "fallback: polling ends with no_slot", test_poll_until_timeout },
		{ "fallback: cancel of a running PUT", test_cancel_running },
		{ "mixed pool: broker and legacy instances", test_mixed_pool },
		{ "execctl run against a legacy-only address", test_execctl_legacy },
		{ "fallback: token polls whose connect fails at once",
		  test_poll_connect_fails_at_once },
		{ "fallback: a PUT lost before 100 Continue is not placed again",
		  test_put_lost_before_continue },
		{ NULL, NULL },
	};
	int rc;

	snprintf(execctl, sizeof execctl, "%s", harness_execctl());
	rc = run_suite("libexecclient legacy fallback", cases);
	if (fx_base)
		event_base_free(fx_base);
	return rc;
}
