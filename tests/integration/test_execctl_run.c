/*
 * test_execctl_run.c - execctl run and execctl status as real processes
 * (fork + exec, no shell) against real daemons: bytes streamed from its
 * stdin through `cat` to its stdout compared, the job's exit code and
 * failing output passed on, files in and out, and each documented exit
 * status with its message: unknown service, unreachable server, refused
 * token, no slot within --timeout, interrupt; the queue position drawn on
 * a terminal (a pty) and only there; the status tables and --json; run
 * and status over wss/https against a TLS daemon with --cacert or
 * EXECCTL_CACERT, and exit 119 for a certificate that does not verify;
 * stdin/stdout on /dev/null, a closed stdout, a reader that goes away.
 */
#include "autoconfig.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <json-c/json.h>

#include "fleet.h"
#include "harness.h"
#include "proto.h"
#include "relay.h"
#include "suite.h"
#include "testca.h"

#include "cli/exit_codes.h"

static const char body[] =
	"waitgroups:\n"
	"  wg: {processes: 1}\n"
	"services:\n"
	"  cat:\n"
	"    waitgroup: wg\n"
	"    commands:\n"
	"      cat: {prog: cat}\n"
	"      cp: {prog: cp}\n"
	"      fail3: {prog: sh, args: [\"-c\", \"echo partial; echo oops >&2; exit 3\"]}\n"
	"      slow5: {prog: sh, args: [\"-c\", \"sleep 1.5; echo slow; exit 5\"]}\n"
	"      prog3: {prog: sh, args: [\"-c\", \"echo 25% start >&3; sleep 0.6; "
	"echo 0.5 half >&3; sleep 0.6; echo out\"]}\n"
	"      ff: {prog: sh, args: [\"-c\", \"tr '\\\\000' '\\\\377' </dev/zero | tee "
	"/dev/stderr\"]}\n"
	"  sleep:\n"
	"    waitgroup: wg\n"
	"    commands:\n"
	"      sleep: {prog: sleep}\n";

static struct es_daemon D;
static char execctl[512];
static char addr[64];

static void start(const char *extra)
{
	char b[2048];
	snprintf(b, sizeof b, "%s%s", extra ? extra : "", body);
	CU_ASSERT_FATAL(harness_start(&D, 2, b, NULL) == 0);
	snprintf(addr, sizeof addr, "ws://127.0.0.1:%d", D.port);
}

static void stop(void)
{
	CU_ASSERT(harness_stop_clean(&D) == 0);
}

/* ---- running execctl ----------------------------------------------------------- */

struct proc {
	int status; /* exit status, or 128+signal */
	char *out;  /* stdout, NUL-terminated */
	size_t outlen;
	char err[16384]; /* stderr (or the pty's output), cut */
	long long ms;    /* how long it ran */
};

struct run_opts {
	const void *in; /* stdin bytes; NULL: /dev/null */
	size_t inlen;
	const char *env[4];      /* "K=V" added to the environment */
	int stderr_pty;          /* stderr is a terminal (read from its master) */
	int stdout_pty;          /* with stderr_pty: stdout on the same terminal */
	const char *stdout_file; /* stdout into this file (p->out read from it) */
	int interrupt_after_ms;  /* > 0: SIGINT then */
	int stdout_after_ms;     /* stdout is not read before then (a slow reader) */
	void (*during)(void);    /* called once, during_ms after the start */
	int during_ms;
};

static void append(char **buf, size_t *len, const char *data, size_t n)
{
	char *grown = realloc(*buf, *len + n + 1);
	if (!grown)
		return;
	memcpy(grown + *len, data, n);
	*len += n;
	grown[*len] = '\0';
	*buf = grown;
}

static int exit_of(int wait_status)
{
	if (WIFEXITED(wait_status))
		return WEXITSTATUS(wait_status);
	return WIFSIGNALED(wait_status) ? 128 + WTERMSIG(wait_status) : -1;
}

/* Runs execctl with args (NULL-terminated, without argv[0]); 60 s at most. */
static void run(struct proc *p, const struct run_opts *o, const char *const *args)
{
	int in[2], out[2], err[2], master = -1;
	char *argv[64] = { execctl };
	int argc = 1;

	memset(p, 0, sizeof *p);
	while (args[argc - 1] && argc < 63) {
		argv[argc] = (char *)args[argc - 1];
		argc++;
	}
	argv[argc] = NULL;
	CU_ASSERT_FATAL(pipe(in) == 0 && pipe(out) == 0);
	if (o && o->stderr_pty) {
		int slave;
		CU_ASSERT_FATAL(openpty(&master, &slave, NULL, NULL, NULL) == 0);
		err[0] = master;
		err[1] = slave;
	} else {
		CU_ASSERT_FATAL(pipe(err) == 0);
	}
	long long t0 = harness_now_ms();
	pid_t pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		if (o && o->stderr_pty)
			setsid(); /* the pty may become its terminal; no signal from ours */
		dup2(in[0], 0);
		int file = o && o->stdout_file
				   ? open(o->stdout_file, O_WRONLY | O_CREAT | O_TRUNC, 0600)
				   : -1;
		dup2(file >= 0 ? file : o && o->stdout_pty ? err[1] : out[1], 1);
		dup2(err[1], 2);
		for (int fd = 3; fd < 64; fd++)
			close(fd);
		for (int i = 0; o && i < 4 && o->env[i]; i++)
			putenv((char *)o->env[i]);
		execv(execctl, argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	close(err[1]);
	if (!o || !o->in) {
		close(in[1]);
		in[1] = -1;
	} else {
		fcntl(in[1], F_SETFL, O_NONBLOCK);
	}
	size_t sent = 0, errlen = 0;
	int out_open = 1, err_open = 1, signalled = 0, during_done = 0;
	while (out_open || err_open) {
		long long now = harness_now_ms() - t0;
		struct pollfd fds[3] = {
			{ .fd = out_open && (!o || now >= o->stdout_after_ms) ? out[0] : -1,
			  .events = POLLIN },
			{ .fd = err_open ? err[0] : -1, .events = POLLIN },
			{ .fd = in[1], .events = POLLOUT },
		};
		if (now > 60000)
			break;
		if (o && o->interrupt_after_ms > 0 && !signalled && now >= o->interrupt_after_ms) {
			kill(pid, SIGINT);
			signalled = 1;
		}
		if (o && o->during && !during_done && now >= o->during_ms) {
			o->during();
			during_done = 1;
		}
		if (poll(fds, 3, 50) < 0 && errno != EINTR)
			break;
		char buf[65536];
		if (fds[0].revents) {
			ssize_t n = read(out[0], buf, sizeof buf);
			if (n > 0)
				append(&p->out, &p->outlen, buf, (size_t)n);
			else
				out_open = 0;
		}
		if (fds[1].revents) {
			ssize_t n = read(err[0], buf, sizeof buf);
			if (n > 0) {
				size_t room = sizeof p->err - 1 - errlen;
				memcpy(p->err + errlen, buf, (size_t)n < room ? (size_t)n : room);
				errlen += (size_t)n < room ? (size_t)n : room;
			} else {
				err_open = 0; /* EOF, or EIO on a pty whose slave closed */
			}
		}
		if (in[1] >= 0 && fds[2].revents) {
			ssize_t n = write(in[1], (const char *)o->in + sent, o->inlen - sent);
			if (n > 0)
				sent += (size_t)n;
			if (n < 0 || sent == o->inlen) {
				close(in[1]);
				in[1] = -1;
			}
		}
	}
	int ws = harness_reap(&pid, 0, 30000);
	p->status = ws >= 0 ? exit_of(ws) : -1;
	p->ms = harness_now_ms() - t0;
	if (in[1] >= 0)
		close(in[1]);
	close(out[0]);
	close(err[0]);
	if (o && o->stdout_file) {
		FILE *f = fopen(o->stdout_file, "rb");
		char buf[4096];
		size_t n;
		while (f && (n = fread(buf, 1, sizeof buf, f)) > 0)
			append(&p->out, &p->outlen, buf, n);
		if (f)
			fclose(f);
		unlink(o->stdout_file);
	}
	if (!p->out)
		append(&p->out, &p->outlen, "", 0);
	p->err[errlen] = '\0';
}

static void expect(struct proc *p, int status, const char *err_text)
{
	CU_ASSERT_EQUAL(p->status, status);
	if (err_text)
		CU_ASSERT_PTR_NOT_NULL(strstr(p->err, err_text));
	if (p->status != status || (err_text && !strstr(p->err, err_text)))
		fprintf(stderr, "\nexecctl exited %d, expected %d; stderr:\n%s\n", p->status,
			status, p->err);
}

static void release(struct proc *p)
{
	free(p->out);
	p->out = NULL;
}

#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* A raw client holding the only slot with a long job; released by CANCEL. */
static struct tclient *blocker;

static void block_slot_at(int port)
{
	blocker = tc_connect(port, "blocker");
	CU_ASSERT_FATAL(blocker != NULL);
	const char *token = tc_want_offer(blocker, "hold", "sleep", 0, 5000);
	CU_ASSERT_FATAL(token != NULL);
	CU_ASSERT(tc_send(blocker,
			  "{\"type\":\"JOB\",\"job_id\":\"hold\",\"token\":\"%s\","
			  "\"job\":{\"command\":\"sleep\",\"args\":[\"60\"]}}",
			  token) == 0);
}

static void block_slot(void)
{
	block_slot_at(D.port);
}

static void unblock_slot(void)
{
	CU_ASSERT(tc_send(blocker, "{\"type\":\"CANCEL\",\"job_id\":\"hold\"}") == 0);
}

/* The blocker's job ends (a named client's job would outlive its
 * connection by resumeGraceSec) and its connection closes. */
static void blocker_done(void)
{
	struct json_object *done = tc_expect(blocker, "DONE", 5000);
	CU_ASSERT(done != NULL);
	if (done)
		json_object_put(done);
	tc_close(blocker);
	blocker = NULL;
}

static void drop_blocker(void)
{
	unblock_slot();
	blocker_done();
}

static int wg_waiting_is(struct json_object *st, void *arg)
{
	return harness_json_int(st, "waitgroups", "wg", "waiting", NULL) == *(long long *)arg &&
	       harness_json_int(st, "connections", NULL) == 1;
}

/* Runs execctl with stdin in_fd and stdout out_fd (-1: closed when it
 * starts; both closed here after the fork), stderr into err.  head_rd >= 0:
 * the read end of out_fd's pipe, read for 10 bytes and then closed (as
 * `| head -c 10`).  Returns the exit status (-1: not within 30 s). */
static int run_fds(const char *const *args, int in_fd, int out_fd, int head_rd, long long *ms,
		   char *err, size_t errcap)
{
	char *argv[16] = { execctl };
	int argc = 1, e[2];
	while (args[argc - 1] && argc < 15) {
		argv[argc] = (char *)args[argc - 1];
		argc++;
	}
	argv[argc] = NULL;
	CU_ASSERT_FATAL(pipe(e) == 0);
	long long t0 = harness_now_ms();
	pid_t pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		dup2(e[1], 2);
		if (in_fd >= 0)
			dup2(in_fd, 0);
		else
			close(0);
		if (out_fd >= 0)
			dup2(out_fd, 1);
		else
			close(1);
		for (int fd = 3; fd < 64; fd++)
			close(fd);
		execv(execctl, argv);
		_exit(127);
	}
	close(e[1]);
	if (in_fd >= 0)
		close(in_fd);
	if (out_fd >= 0)
		close(out_fd);
	if (head_rd >= 0) {
		char buf[10];
		size_t got = 0;
		struct pollfd pf = { .fd = head_rd, .events = POLLIN };
		while (got < sizeof buf && poll(&pf, 1, 30000) > 0) {
			ssize_t n = read(head_rd, buf + got, sizeof buf - got);
			if (n <= 0)
				break;
			got += (size_t)n;
		}
		CU_ASSERT_EQUAL(got, sizeof buf);
		close(head_rd);
	}
	int ws = harness_reap(&pid, 0, 30000);
	*ms = harness_now_ms() - t0;
	fcntl(e[0], F_SETFL, O_NONBLOCK);
	ssize_t n = read(e[0], err, errcap - 1);
	err[n > 0 ? n : 0] = '\0';
	close(e[0]);
	return ws >= 0 ? exit_of(ws) : -1;
}

static int devnull(void)
{
	int fd = open("/dev/null", O_RDWR);
	CU_ASSERT_FATAL(fd >= 0);
	return fd;
}

/* stdin and stdout on /dev/null (character devices epoll refuses), and a
 * closed stdout: execctl ends at once with the job's status. */
static void test_devnull_and_closed(void)
{
	char err[4096];
	long long ms;
	int st;

	start(NULL);
	st = run_fds(ARGS("run", "-a", addr, "-s", "cat", "--", "cat"), devnull(), devnull(), -1,
		     &ms, err, sizeof err);
	CU_ASSERT_EQUAL(st, 0);
	CU_ASSERT(ms < 10000);
	CU_ASSERT_STRING_EQUAL(err, "");
	if (st != 0 || ms >= 10000)
		fprintf(stderr, "\n/dev/null: status %d after %lld ms: %s\n", st, ms, err);
	st = run_fds(ARGS("run", "-a", addr, "-s", "cat", "--", "fail3"), devnull(), devnull(), -1,
		     &ms, err, sizeof err);
	CU_ASSERT_EQUAL(st, 3);
	/* stdout closed (>&-), 100 kB through cat from a regular file: the
	 * output is discarded, nothing else gets it */
	char path[300];
	snprintf(path, sizeof path, "%s/100k.in", D.dir);
	FILE *f = fopen(path, "wb");
	CU_ASSERT_FATAL(f != NULL);
	unsigned char *data = harness_pattern(100000);
	CU_ASSERT(fwrite(data, 1, 100000, f) == 100000);
	fclose(f);
	free(data);
	int in = open(path, O_RDONLY);
	CU_ASSERT_FATAL(in >= 0);
	st = run_fds(ARGS("run", "-a", addr, "-s", "cat", "--", "cat"), in, -1, -1, &ms, err,
		     sizeof err);
	CU_ASSERT_EQUAL(st, 0);
	CU_ASSERT(ms < 10000);
	if (st != 0 || ms >= 10000)
		fprintf(stderr, "\nstdout closed: status %d after %lld ms: %s\n", st, ms, err);
	stop();
}

/* `execctl run ... | head -c 10` with MiBs of output: the failed write
 * cancels the job; execctl exits 117 within 2 s of the reader leaving. */
static void test_reader_goes_away(void)
{
	char err[4096], path[300];
	long long ms;
	size_t n = 8 << 20;
	unsigned char *data = harness_pattern(n);
	int p[2];

	start(NULL);
	snprintf(path, sizeof path, "%s/big.in", D.dir);
	FILE *f = fopen(path, "wb");
	CU_ASSERT_FATAL(f != NULL);
	CU_ASSERT(fwrite(data, 1, n, f) == n);
	fclose(f);
	free(data);
	int in = open(path, O_RDONLY);
	CU_ASSERT_FATAL(in >= 0);
	CU_ASSERT_FATAL(pipe(p) == 0);
	long long t0 = harness_now_ms();
	int st = run_fds(ARGS("run", "-a", addr, "-s", "cat", "--", "cat"), in, p[1], p[0], &ms,
			 err, sizeof err);
	(void)t0;
	CU_ASSERT_EQUAL(st, EXECCTL_LOCAL_IO);
	CU_ASSERT(ms < 4000);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "local_io"));
	if (st != EXECCTL_LOCAL_IO || ms >= 4000)
		fprintf(stderr, "\nhead -c 10: status %d after %lld ms: %s\n", st, ms, err);
	/* the slot is free again at once: the job was cancelled */
	st = run_fds(ARGS("run", "-a", addr, "-s", "cat", "--timeout", "5", "--", "fail3"),
		     devnull(), devnull(), -1, &ms, err, sizeof err);
	CU_ASSERT_EQUAL(st, 3);
	stop();
}

/* ---- tests ------------------------------------------------------------------------ */

/* 3 MiB through stdin -> cat -> stdout: the same bytes, exit 0, silent. */
static void test_stream(void)
{
	size_t n = 3 << 20;
	unsigned char *data = harness_pattern(n);
	struct proc p;
	struct run_opts o = { .in = data, .inlen = n };

	start(NULL);
	run(&p, &o, ARGS("run", "-a", addr, "-s", "cat", "--", "cat"));
	expect(&p, 0, NULL);
	CU_ASSERT_EQUAL(p.outlen, n);
	CU_ASSERT(p.outlen == n && memcmp(p.out, data, n) == 0);
	CU_ASSERT_STRING_EQUAL(p.err, "");
	release(&p);

	/* EXECCTL_ADDR stands in for -a; -n gives the job an empty stdin */
	char env[80];
	snprintf(env, sizeof env, "EXECCTL_ADDR=%s", addr);
	struct run_opts o2 = { .in = data, .inlen = 1000, .env = { env } };
	run(&p, &o2, ARGS("run", "-s", "cat", "-n", "--", "cat"));
	expect(&p, 0, NULL);
	CU_ASSERT_EQUAL(p.outlen, 0);
	release(&p);
	free(data);
	stop();
}

/* The job's exit code is execctl's; a failing job's small output (kept in
 * the receipt, never streamed) and its decisive stderr line are shown. */
static void test_exit_code(void)
{
	struct proc p;
	start(NULL);
	run(&p, NULL, ARGS("run", "-a", addr, "-s", "cat", "--", "fail3"));
	expect(&p, 3, "execctl: the job exited with status 3\n");
	CU_ASSERT_PTR_NOT_NULL(strstr(p.err, "execctl: its last stderr line: oops\n"));
	CU_ASSERT_STRING_EQUAL(p.out, "partial\n");
	release(&p);
	/* a command the service does not have */
	run(&p, NULL, ARGS("run", "-a", addr, "-s", "cat", "--", "rm", "-rf", "/"));
	expect(&p, EXECCTL_UNKNOWN_SERVICE, "unknown_command");
	release(&p);
	stop();
}

/* The connection goes silent right after the JOB (a relay freezes it: no
 * byte, no FIN, no RST): execctl notices by its ping deadline, reconnects,
 * gets the receipt once and exits with the job's status; the job ran
 * once. */
static struct relay R;

static void freeze(void)
{
	/* Freeze once the job runs (the JOB has crossed the relay), not at a
	 * fixed time: a loaded machine may take longer to get there. */
	long long t0 = harness_now_ms();
	while (harness_status_int(&D, "services", "cat", "started", NULL) < 1 &&
	       harness_now_ms() - t0 < 10000)
		usleep(10000);
	CU_ASSERT_EQUAL(relay_freeze(&R), 1);
}

static void test_silent_connection(void)
{
	struct proc p;
	char via[64];
	start(NULL);
	CU_ASSERT_FATAL(relay_start(&R, D.port) == 0);
	snprintf(via, sizeof via, "ws://127.0.0.1:%d", R.port);
	struct run_opts o = { .during = freeze, .during_ms = 1 };
	run(&p, &o,
	    ARGS("run", "-a", via, "-s", "cat", "-n", "-q", "--ping-timeout", "1", "--", "slow5"));
	expect(&p, 5, "execctl: the job exited with status 5\n");
	CU_ASSERT_STRING_EQUAL(p.out, "slow\n");
	CU_ASSERT(relay_accepted(&R) >= 2);
	struct json_object *st = harness_status(&D), *v, *c, *n;
	CU_ASSERT(st && json_object_object_get_ex(st, "services", &v) &&
		  json_object_object_get_ex(v, "cat", &c) &&
		  json_object_object_get_ex(c, "started", &n) && json_object_get_int(n) == 1);
	if (st)
		json_object_put(st);
	release(&p);
	/* a bad value is a usage error */
	run(&p, NULL, ARGS("run", "-a", via, "-s", "cat", "--ping-timeout", "0", "--", "cat"));
	expect(&p, 2, "--ping-timeout 0: expected seconds, 1 to 3600");
	release(&p);
	relay_stop(&R);
	stop();
}

/* How many jobs the service cat started. */
static long long cat_started(void)
{
	return harness_status_int(&D, "services", "cat", "started", NULL);
}

/* --input and --output: local files in and out of the job's directory. */
static void test_files(void)
{
	struct proc p;
	char in_path[400], out_path[400];
	start(NULL);
	snprintf(in_path, sizeof in_path, "%s/local-in.txt", D.dir);
	snprintf(out_path, sizeof out_path, "%s/local-out.txt", D.dir);
	FILE *f = fopen(in_path, "w");
	CU_ASSERT_FATAL(f != NULL);
	fputs("file contents\n", f);
	fclose(f);
	char in_arg[500], out_arg[500];
	snprintf(in_arg, sizeof in_arg, "a.txt=%s", in_path);
	snprintf(out_arg, sizeof out_arg, "b.txt=%s", out_path);
	run(&p, NULL,
	    ARGS("run", "-a", addr, "-s", "cat", "--input", in_arg, "--output", out_arg, "--", "cp",
		 "a.txt", "b.txt"));
	expect(&p, 0, NULL);
	release(&p);
	char back[100] = "";
	f = fopen(out_path, "r");
	CU_ASSERT_FATAL(f != NULL);
	CU_ASSERT(fgets(back, sizeof back, f) != NULL);
	fclose(f);
	CU_ASSERT_STRING_EQUAL(back, "file contents\n");
	/* an input that does not exist: a local error, nothing runs */
	run(&p, NULL,
	    ARGS("run", "-a", addr, "-s", "cat", "--input", "x=/nonexistent/file", "--", "cat",
		 "x"));
	expect(&p, EXECCTL_LOCAL_IO, "/nonexistent/file");
	release(&p);
	CU_ASSERT_EQUAL(cat_started(), 1);
	stop();
}

/* dir holds only keep.txt, with its old bytes and mode: nothing of a
 * failed job's --output reached it, no temporary file is left. */
static void expect_kept(const char *dir, const char *what)
{
	char path[400];
	struct stat st;
	size_t len = 0, entries = 0;
	DIR *d = opendir(dir);
	struct dirent *e;

	CU_ASSERT_FATAL(d != NULL);
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
			entries++;
			if (strcmp(e->d_name, "keep.txt") != 0)
				fprintf(stderr, "\n%s: left behind: %s\n", what, e->d_name);
		}
	closedir(d);
	snprintf(path, sizeof path, "%s/keep.txt", dir);
	unsigned char *back = harness_read_file(path, &len);
	int same = back && len == 9 && memcmp(back, "precious\n", 9) == 0;
	CU_ASSERT(same);
	CU_ASSERT_EQUAL(entries, 1);
	CU_ASSERT(stat(path, &st) == 0 && (st.st_mode & 07777) == 0640);
	if (!same)
		fprintf(stderr, "\n%s: keep.txt is now %zu bytes\n", what, len);
	free(back);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	CU_ASSERT_FATAL(f != NULL);
	fputs(text, f);
	fclose(f);
}

/* A new directory dir holding keep.txt (path keep): "precious\n", 0640. */
static void make_keep(const char *dir, const char *keep)
{
	CU_ASSERT_FATAL(mkdir(dir, 0755) == 0);
	write_file(keep, "precious\n");
	CU_ASSERT_FATAL(chmod(keep, 0640) == 0);
}

/* --output NAME=FILE on every way a job can fail: FILE keeps its bytes,
 * no temporary file stays beside it; a job that succeeds replaces it
 * (mode kept). */
static void test_output_kept_on_failure(void)
{
	char dir[400], keep[420], arg[440];
	struct proc p;
	struct run_opts interrupt = { .interrupt_after_ms = 800 };

	start(NULL);
	snprintf(dir, sizeof dir, "%s/outdir", D.dir);
	snprintf(keep, sizeof keep, "%s/keep.txt", dir);
	snprintf(arg, sizeof arg, "b.txt=%s", keep);
	make_keep(dir, keep);

	run(&p, NULL, ARGS("run", "-a", addr, "-s", "nosuch", "--output", arg, "--", "cat"));
	expect(&p, EXECCTL_UNKNOWN_SERVICE, NULL);
	expect_kept(dir, "unknown service");
	release(&p);
	run(&p, NULL, ARGS("run", "-a", addr, "-s", "cat", "--output", arg, "--", "fail3"));
	expect(&p, 3, NULL);
	expect_kept(dir, "exit 3");
	release(&p);
	run(&p, NULL,
	    ARGS("run", "-a", addr, "-s", "sleep", "--job-timeout", "1", "--output", arg, "--",
		 "sleep", "30"));
	expect(&p, EXECCTL_FAILED, "timeout");
	expect_kept(dir, "job timeout");
	release(&p);
	run(&p, &interrupt,
	    ARGS("run", "-a", addr, "-s", "sleep", "--output", arg, "--", "sleep", "30"));
	expect(&p, EXECCTL_INTERRUPTED, NULL);
	expect_kept(dir, "interrupted while running");
	release(&p);
	block_slot();
	run(&p, NULL,
	    ARGS("run", "-a", addr, "-s", "cat", "--timeout", "1", "--output", arg, "--", "cat"));
	expect(&p, EXECCTL_NO_SLOT, NULL);
	expect_kept(dir, "no slot");
	release(&p);
	drop_blocker();

	/* success: the job's file takes the place of keep.txt, mode kept */
	char in_path[420], in_arg[440];
	snprintf(in_path, sizeof in_path, "%s/new.txt", D.dir);
	snprintf(in_arg, sizeof in_arg, "a.txt=%s", in_path);
	write_file(in_path, "new\n");
	run(&p, NULL,
	    ARGS("run", "-a", addr, "-s", "cat", "--input", in_arg, "--output", arg, "-n", "--",
		 "cp", "a.txt", "b.txt"));
	expect(&p, 0, NULL);
	release(&p);
	size_t len = 0;
	unsigned char *back = harness_read_file(keep, &len);
	CU_ASSERT(back && len == 4 && memcmp(back, "new\n", 4) == 0);
	free(back);
	struct stat st;
	CU_ASSERT(stat(keep, &st) == 0 && (st.st_mode & 07777) == 0640);
	stop();
}

/* The directory of test_output_held_dir: moved while execctl waits. */
static char held_dir[400], held_moved[420];

static int one_waiting(struct json_object *st, void *arg)
{
	(void)arg;
	return harness_json_int(st, "waitgroups", "wg", "waiting", NULL) == 1;
}

/* Once execctl's want waits (its temporary file made), the directory
 * moves. */
static void move_held_dir(void)
{
	CU_ASSERT(harness_wait_status(&D, 5000, one_waiting, NULL) == 0);
	CU_ASSERT(rename(held_dir, held_moved) == 0);
}

static void move_held_dir_and_unblock(void)
{
	move_held_dir();
	unblock_slot();
}

/* FILE's directory is held from the submit: moved while the job waits,
 * an interrupt leaves no temporary file in it, and a success puts the
 * file there.  An existing FILE keeps its owner and group (root can give
 * them) and its permission bits, set-id bits dropped.  A symbolic link
 * to nothing is refused before anything is sent, and stays a link. */
static void test_output_held_dir(void)
{
	char keep[440], arg[460], in_path[420], in_arg[440], link_path[440];
	struct proc p;
	struct run_opts interrupt = { .during = move_held_dir,
				      .during_ms = 1,
				      .interrupt_after_ms = 800 };
	struct run_opts moved = { .during = move_held_dir_and_unblock, .during_ms = 1 };
	struct stat st;

	start(NULL);
	snprintf(held_dir, sizeof held_dir, "%s/held", D.dir);
	snprintf(held_moved, sizeof held_moved, "%s/held.moved", D.dir);
	snprintf(keep, sizeof keep, "%s/keep.txt", held_dir);
	snprintf(arg, sizeof arg, "b.txt=%s", keep);
	make_keep(held_dir, keep);

	block_slot();
	run(&p, &interrupt, ARGS("run", "-a", addr, "-s", "cat", "--output", arg, "--", "cat"));
	expect(&p, EXECCTL_INTERRUPTED, NULL);
	expect_kept(held_moved, "interrupted after its directory moved");
	release(&p);
	CU_ASSERT_FATAL(rename(held_moved, held_dir) == 0);

	/* owned by another user, set-id bits: root gives the owner back */
	int root = geteuid() == 0;
	if (root)
		CU_ASSERT(chown(keep, 65534, 65534) == 0);
	CU_ASSERT(chmod(keep, 02750) == 0);
	snprintf(in_path, sizeof in_path, "%s/new.txt", D.dir);
	snprintf(in_arg, sizeof in_arg, "a.txt=%s", in_path);
	write_file(in_path, "new\n");
	run(&p, &moved,
	    ARGS("run", "-a", addr, "-s", "cat", "--input", in_arg, "--output", arg, "-n", "--",
		 "cp", "a.txt", "b.txt"));
	expect(&p, 0, NULL);
	release(&p);
	char moved_keep[460];
	snprintf(moved_keep, sizeof moved_keep, "%s/keep.txt", held_moved);
	size_t len = 0;
	unsigned char *back = harness_read_file(moved_keep, &len);
	CU_ASSERT(back && len == 4 && memcmp(back, "new\n", 4) == 0);
	free(back);
	CU_ASSERT_FATAL(stat(moved_keep, &st) == 0);
	CU_ASSERT_EQUAL(st.st_mode & 07777, 0750);
	if (root)
		CU_ASSERT(st.st_uid == 65534 && st.st_gid == 65534);
	blocker_done(); /* cancelled by move_held_dir_and_unblock */

	/* a link to a file that does not exist: refused, the link stays */
	snprintf(link_path, sizeof link_path, "%s/dangling", held_moved);
	CU_ASSERT_FATAL(symlink("nothere", link_path) == 0);
	snprintf(arg, sizeof arg, "b.txt=%s", link_path);
	run(&p, NULL, ARGS("run", "-a", addr, "-s", "cat", "--output", arg, "--", "cat"));
	expect(&p, EXECCTL_LOCAL_IO, "No such file or directory");
	release(&p);
	CU_ASSERT(lstat(link_path, &st) == 0 && S_ISLNK(st.st_mode));
	stop();
}

/* A job that streamed much binary output and then failed (its timeout,
 * while execctl's reader is slow, so the receipt arrives in the middle of
 * the stream): stdout holds only the job's bytes (all 0xff here), never the
 * receipt's UTF-8 copy of its first 4000 bytes; execctl's stderr holds only
 * its own lines, none of the job's raw bytes. */
static void test_binary_output_cut(void)
{
	struct proc p;
	struct run_opts slow = { .stdout_after_ms = 2500 };

	start(NULL);
	run(&p, &slow,
	    ARGS("run", "-a", addr, "-s", "cat", "-n", "--job-timeout", "1", "--", "ff"));
	expect(&p, EXECCTL_FAILED, "timeout");
	CU_ASSERT(p.outlen > 4000);
	size_t bad = 0;
	while (bad < p.outlen && (unsigned char)p.out[bad] == 0xff)
		bad++;
	CU_ASSERT_EQUAL(bad, p.outlen);
	if (bad != p.outlen)
		fprintf(stderr, "\nstdout: byte %zu of %zu is not the job's\n", bad, p.outlen);
	CU_ASSERT_PTR_NULL(strchr(p.err, '\xff'));
	for (const char *l = p.err; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : "")
		CU_ASSERT(strncmp(l, "execctl: ", 9) == 0);
	release(&p);
	stop();
}

static void test_unknown_service_and_unreachable(void)
{
	struct proc p;
	start(NULL);
	run(&p, NULL, ARGS("run", "-a", addr, "-s", "nosuch", "--", "cat"));
	expect(&p, EXECCTL_UNKNOWN_SERVICE, "execctl: unknown service 'nosuch'");
	release(&p);
	stop();
	/* the daemon is gone: nothing listens on its port */
	run(&p, NULL, ARGS("run", "-a", addr, "-s", "cat", "-n", "--", "cat"));
	expect(&p, EXECCTL_UNREACHABLE, "execctl: cannot reach ws://127.0.0.1:");
	CU_ASSERT(p.ms < 5000);
	release(&p);
	run(&p, NULL, ARGS("status", "-a", addr));
	expect(&p, EXECCTL_UNREACHABLE, "execctl: cannot reach ws://127.0.0.1:");
	release(&p);
	/* a name that does not resolve: the system's words, not libevent's BSD
	 * ones ("nodename nor servname provided") */
	run(&p, NULL,
	    ARGS("run", "-a", "ws://no-such-host.invalid:1", "-s", "cat", "-n", "--", "cat"));
	expect(&p, EXECCTL_UNREACHABLE, "cannot resolve no-such-host.invalid: ");
	CU_ASSERT_PTR_NULL(strstr(p.err, "nodename"));
	release(&p);
	/* one dead address among live ones is not "unreachable" */
	char dead[64];
	snprintf(dead, sizeof dead, "%s", addr);
	start(NULL);
	struct run_opts in = { .in = "both\n", .inlen = 5 };
	run(&p, &in, ARGS("run", "-a", dead, "-a", addr, "-s", "cat", "--", "cat"));
	expect(&p, 0, NULL);
	CU_ASSERT_STRING_EQUAL(p.out, "both\n");
	release(&p);
	stop();
	/* usage errors: 2, nothing sent */
	run(&p, NULL, ARGS("run", "-a", addr, "--", "cat"));
	expect(&p, EXECCTL_USAGE, "execctl: run: no service: give -s SERVICE");
	release(&p);
	run(&p, NULL, ARGS("frobnicate"));
	expect(&p, EXECCTL_USAGE, "execctl: unknown command 'frobnicate'");
	release(&p);
	run(&p, NULL, ARGS("run", "--help"));
	expect(&p, 0, NULL);
	CU_ASSERT_PTR_NOT_NULL(strstr(p.out, "usage: execctl run"));
	release(&p);
}

static void test_token(void)
{
	struct proc p;
	harness_auth_token = "s3cret-token";
	start("authToken: s3cret-token\n");
	run(&p, NULL, ARGS("run", "-a", addr, "-s", "cat", "-n", "--", "cat"));
	expect(&p, EXECCTL_UNAUTHORIZED, "refused the token (401): it needs one");
	CU_ASSERT(p.ms < 5000);
	release(&p);
	struct run_opts wrong = { .env = { "EXECCTL_TOKEN=wrong" } };
	run(&p, &wrong, ARGS("run", "-a", addr, "-s", "cat", "-n", "--", "cat"));
	expect(&p, EXECCTL_UNAUTHORIZED, "refused the token (401)");
	release(&p);
	run(&p, &wrong, ARGS("status", "-a", addr));
	expect(&p, EXECCTL_UNAUTHORIZED, "the token is wrong");
	release(&p);
	struct run_opts right = { .in = "tok\n",
				  .inlen = 4,
				  .env = { "EXECCTL_TOKEN=s3cret-token" } };
	run(&p, &right, ARGS("run", "-a", addr, "-s", "cat", "--", "cat"));
	expect(&p, 0, NULL);
	CU_ASSERT_STRING_EQUAL(p.out, "tok\n");
	release(&p);
	stop();
	harness_auth_token = NULL;
}

static void test_no_slot(void)
{
	struct proc p;
	start(NULL);
	block_slot();
	run(&p, NULL, ARGS("run", "-a", addr, "-s", "cat", "--timeout", "1", "-n", "--", "cat"));
	expect(&p, EXECCTL_NO_SLOT, "execctl: service 'cat': no slot within 1 s\n");
	CU_ASSERT(p.ms >= 900 && p.ms < 5000);
	release(&p);
	/* the want was withdrawn: only the blocker is left */
	long long zero = 0;
	CU_ASSERT(harness_wait_status(&D, 3000, wg_waiting_is, &zero) == 0);
	drop_blocker();
	stop();
}

/* SIGINT while waiting: the want is withdrawn, exit 130. */
static void test_interrupt(void)
{
	struct proc p;
	struct run_opts o = { .interrupt_after_ms = 800 };
	start(NULL);
	block_slot();
	run(&p, &o, ARGS("run", "-a", addr, "-s", "cat", "-n", "--", "cat"));
	expect(&p, EXECCTL_INTERRUPTED, "execctl: cancelling the job");
	release(&p);
	long long zero = 0;
	CU_ASSERT(harness_wait_status(&D, 3000, wg_waiting_is, &zero) == 0);
	drop_blocker();
	stop();
}

/* stdout and stderr on one terminal, as at a shell: the position line is
 * erased before the first byte of the job's output, not a moment later. */
static void test_line_erased_before_output(void)
{
	struct proc p;
	struct run_opts tty = { .in = "hello\n",
				.inlen = 6,
				.stderr_pty = 1,
				.stdout_pty = 1,
				.during = unblock_slot,
				.during_ms = 1500 };
	start(NULL);
	block_slot();
	run(&p, &tty, ARGS("run", "-a", addr, "-s", "cat", "--", "cat"));
	expect(&p, 0, NULL);
	const char *out = strstr(p.err, "hello"), *line = NULL;
	CU_ASSERT_FATAL(out != NULL);
	for (const char *l = p.err; (l = strstr(l, "execctl: ")) && l < out; l++)
		line = l;
	CU_ASSERT_PTR_NOT_NULL(line);
	/* the erase sequence comes after the last line drawn, before hello */
	const char *erase = line ? strstr(line, "\r\033[K") : NULL;
	CU_ASSERT(erase && erase < out);
	if (!erase || erase >= out)
		fprintf(stderr, "\nthe terminal got: %s\n", p.err);
	release(&p);
	tc_close(blocker);
	stop();
}

/* eta_ms of want job_id of c (QUERY); -1 for null, -2 without an answer. */
static long long eta_of(struct tclient *c, const char *job_id)
{
	struct json_object *p, *v;
	long long eta = -2;

	tc_send(c, "{\"type\":\"QUERY\",\"job_id\":\"%s\"}", job_id);
	if ((p = tc_expect(c, "POSITION", 3000)) == NULL)
		return -2;
	if (json_object_object_get_ex(p, "eta_ms", &v))
		eta = v ? json_object_get_int64(v) : -1;
	json_object_put(p);
	return eta;
}

/* The estimate comes from what holds the slot: a job of the slow service
 * `sleep` holds it, so a want of the quick service `cat` waits about the
 * rest of sleep's mean, not cat's own mean; once the holder has run past
 * its mean the server cannot tell (null). */
static void test_eta_from_holder(void)
{
	struct proc p;
	start(NULL);
	run(&p, NULL, ARGS("run", "-a", addr, "-s", "cat", "-n", "--", "cat"));
	expect(&p, 0, NULL);
	release(&p);
	run(&p, NULL, ARGS("run", "-a", addr, "-s", "sleep", "-n", "--", "sleep", "2"));
	expect(&p, 0, NULL);
	release(&p);
	long long mean = harness_status_int(&D, "services", "sleep", "mean_runtime_ms", NULL);
	long long quick = harness_status_int(&D, "services", "cat", "mean_runtime_ms", NULL);
	long long t0 = harness_now_ms();
	block_slot();
	struct tclient *c = tc_connect(D.port, "eta");
	CU_ASSERT_FATAL(c != NULL);
	tc_send(c, "{\"type\":\"WANT\",\"job_id\":\"quick\",\"service\":\"cat\"}");
	long long eta = eta_of(c, "quick"), ran = harness_now_ms() - t0;
	CU_ASSERT(eta >= mean - ran && eta <= mean);
	if (eta < mean - ran || eta > mean)
		fprintf(stderr, "\neta %lld ms: sleep's mean %lld, cat's %lld, %lld ms after\n",
			eta, mean, quick, ran);
	/* past the holder's mean: no estimate rather than a wrong one */
	long long deadline = t0 + mean + 5000;
	while ((eta = eta_of(c, "quick")) >= 0 && harness_now_ms() < deadline)
		usleep(100 * 1000); /* a poll: the answer changes when the mean is passed */
	CU_ASSERT_EQUAL(eta, -1);
	CU_ASSERT(harness_now_ms() - t0 >= mean);
	tc_close(c);
	drop_blocker();
	stop();
}

/* On a terminal the position is shown while waiting and erased before the
 * job's output; on a pipe it is not shown at all. */
static void test_position_on_terminal(void)
{
	struct proc p;
	struct run_opts tty = { .stderr_pty = 1, .during = unblock_slot, .during_ms = 2500 };
	start(NULL);
	block_slot();
	run(&p, &tty, ARGS("run", "-a", addr, "-s", "cat", "-n", "--", "cat"));
	expect(&p, 0, NULL);
	CU_ASSERT_PTR_NOT_NULL(strstr(p.err, "execctl: 1 of 1 slot busy, 0 ahead"));
	/* the last thing on the terminal erases the line */
	size_t len = strlen(p.err);
	CU_ASSERT(len >= 4 && strcmp(p.err + len - 4, "\r\033[K") == 0);
	release(&p);
	tc_close(blocker);

	block_slot();
	struct run_opts pipe_ = { .during = unblock_slot, .during_ms = 2000 };
	run(&p, &pipe_, ARGS("run", "-a", addr, "-s", "cat", "-n", "--", "cat"));
	expect(&p, 0, NULL);
	CU_ASSERT_STRING_EQUAL(p.err, "");
	release(&p);
	tc_close(blocker);
	stop();
}

/* The running job's progress on the status line: drawn on a terminal
 * when stdout goes to a file, erased at the end, the output bytes
 * unchanged; not drawn when stdout is the same terminal or a pipe (the
 * output could land behind it: `| tee log`). */
static void test_progress_on_terminal(void)
{
	struct proc p;
	char file[64];
	snprintf(file, sizeof file, "/tmp/test_execctl_run.%d.out", (int)getpid());
	struct run_opts tty = { .stderr_pty = 1, .stdout_file = file };
	start(NULL);
	run(&p, &tty, ARGS("run", "-a", addr, "-s", "cat", "-n", "--", "prog3"));
	expect(&p, 0, NULL);
	CU_ASSERT_EQUAL(p.outlen, 4);
	CU_ASSERT_STRING_EQUAL(p.out ? p.out : "", "out\n");
	CU_ASSERT_PTR_NOT_NULL(strstr(p.err, "\r\033[Kexecctl: running: 25% start"));
	CU_ASSERT_PTR_NOT_NULL(strstr(p.err, "\r\033[Kexecctl: running: 50% half"));
	size_t len = strlen(p.err);
	CU_ASSERT(len >= 4 && strcmp(p.err + len - 4, "\r\033[K") == 0);
	if (!strstr(p.err, "running: 50% half"))
		fprintf(stderr, "\nthe terminal got: %s\n", p.err);
	release(&p);

	struct run_opts piped = { .stderr_pty = 1 };
	run(&p, &piped, ARGS("run", "-a", addr, "-s", "cat", "-n", "--", "prog3"));
	expect(&p, 0, NULL);
	CU_ASSERT_STRING_EQUAL(p.out ? p.out : "", "out\n");
	CU_ASSERT_PTR_NULL(strstr(p.err, "running:"));
	release(&p);

	struct run_opts one = { .stderr_pty = 1, .stdout_pty = 1 };
	run(&p, &one, ARGS("run", "-a", addr, "-s", "cat", "-n", "--", "prog3"));
	expect(&p, 0, NULL);
	CU_ASSERT_PTR_NOT_NULL(strstr(p.err, "out"));
	CU_ASSERT_PTR_NULL(strstr(p.err, "running:"));
	release(&p);
	stop();
}

/* This machine's host name when it resolves to 127.0.0.1 (a DNS name of
 * the loopback address, as a rebound one would be), else NULL. */
static const char *loopback_name(void)
{
	static char name[256];
	struct addrinfo hints = { .ai_family = AF_INET }, *ai;
	if (gethostname(name, sizeof name) != 0 || getaddrinfo(name, NULL, &hints, &ai) != 0)
		return NULL;
	int loop = ((struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr == htonl(INADDR_LOOPBACK);
	freeaddrinfo(ai);
	return loop ? name : NULL;
}

static void test_status(void)
{
	struct proc p;
	start(NULL);
	block_slot();
	struct json_object *st = harness_status(&D);
	CU_ASSERT_FATAL(st != NULL);
	const char *id = tc_str(st, "instance_id");

	run(&p, NULL, ARGS("status", "-a", addr));
	expect(&p, 0, NULL);
	char first[200];
	snprintf(first, sizeof first, "instance %s  version ", id);
	CU_ASSERT(strncmp(p.out, first, strlen(first)) == 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(p.out, "\nclients 1  connections 1  jobs 1  grants 1\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(p.out, "\nWAITGROUP  SLOTS  RUNNING  OFFERED  WAITING\n"
					     "wg             1        1        0        0\n"));
	CU_ASSERT_PTR_NOT_NULL(
		strstr(p.out, "\nsleep    wg         yes            1        0        1"));
	release(&p);

	run(&p, NULL, ARGS("status", "-a", addr, "--json"));
	expect(&p, 0, NULL);
	struct json_object *j = json_tokener_parse(p.out);
	CU_ASSERT_FATAL(j != NULL);
	CU_ASSERT_STRING_EQUAL(tc_str(j, "instance_id"), id);
	CU_ASSERT_EQUAL(harness_json_int(j, "waitgroups", "wg", "running", NULL), 1);
	CU_ASSERT_EQUAL(harness_json_int(j, "clients", NULL), 1);
	CU_ASSERT(strchr(p.out, '\n') == p.out + p.outlen - 1); /* one line */
	json_object_put(j);
	release(&p);

	/* no authToken: a host name in the URL is refused (403, DNS
	 * rebinding), localhost is not */
	char url[320];
	snprintf(url, sizeof url, "ws://localhost:%d", D.port);
	run(&p, NULL, ARGS("status", "-a", url));
	expect(&p, 0, NULL);
	release(&p);
	const char *name = loopback_name();
	if (name) {
		snprintf(url, sizeof url, "ws://%s:%d", name, D.port);
		run(&p, NULL, ARGS("status", "-a", url));
		expect(&p, EXECCTL_UNAUTHORIZED, "(403): without an authToken");
		release(&p);
	} else {
		fprintf(stderr, "  (no host name of 127.0.0.1 here: its 403 not tried)\n");
	}

	/* two addresses: one line each; the worst status wins */
	run(&p, NULL, ARGS("status", "-a", addr, "-a", "127.0.0.1:1", "--json"));
	expect(&p, EXECCTL_UNREACHABLE, "cannot reach ws://127.0.0.1:1");
	j = json_tokener_parse(p.out);
	CU_ASSERT_PTR_NOT_NULL(j);
	if (j)
		json_object_put(j);
	release(&p);
	json_object_put(st);
	drop_blocker();
	stop();
}

/* wss:// and https:// with a private CA: --cacert or EXECCTL_CACERT make
 * run and status work; without it, with another CA or for a name the
 * certificate does not carry, execctl exits 119 and no job runs. */
static void test_wss(void)
{
	struct testca ca, other;
	char cert[96], key[96], b[2048], wss[96], named[96], env[200], missing[128];
	struct proc p;
	size_t n = 1 << 20;
	unsigned char *data = harness_pattern(n);

	CU_ASSERT_FATAL(testca_new(&ca) == 0 && testca_new(&other) == 0);
	CU_ASSERT_FATAL(testca_server(&ca, "server", "IP:127.0.0.1,DNS:execserver.invalid", cert,
				      key) == 0);
	snprintf(b, sizeof b, "tls:\n  cert: %s\n  key: %s\n%s", cert, key, body);
	CU_ASSERT_FATAL(harness_start_tls(&D, 2, b, NULL, ca.ca) == 0);
	snprintf(wss, sizeof wss, "wss://127.0.0.1:%d", D.port);
	snprintf(named, sizeof named, "wss://localhost:%d", D.port);
	snprintf(missing, sizeof missing, "%s/missing.pem", ca.dir);

	struct run_opts o = { .in = data, .inlen = n };
	run(&p, &o, ARGS("run", "-a", wss, "--cacert", ca.ca, "-s", "cat", "--", "cat"));
	expect(&p, 0, NULL);
	CU_ASSERT(p.outlen == n && memcmp(p.out, data, n) == 0);
	release(&p);
	snprintf(env, sizeof env, "EXECCTL_CACERT=%s", ca.ca);
	struct run_opts o_env = { .in = "env ca\n", .inlen = 7, .env = { env } };
	run(&p, &o_env, ARGS("run", "-a", wss, "-s", "cat", "--", "cat"));
	expect(&p, 0, NULL);
	CU_ASSERT_STRING_EQUAL(p.out, "env ca\n");
	release(&p);
	long long started = cat_started();
	CU_ASSERT_EQUAL(started, 2);

	/* not trusted: the system's store, another CA, a name not carried */
	struct run_opts o_small = { .in = "no\n", .inlen = 3 };
	run(&p, &o_small, ARGS("run", "-a", wss, "-s", "cat", "--", "cat"));
	expect(&p, EXECCTL_TLS_VERIFY, "certificate verify failed: unable to get local issuer");
	CU_ASSERT_PTR_NOT_NULL(strstr(p.err, "--cacert"));
	fprintf(stderr, "\n  run, system store: %s", p.err);
	release(&p);
	run(&p, &o_small, ARGS("run", "-a", wss, "--cacert", other.ca, "-s", "cat", "--", "cat"));
	expect(&p, EXECCTL_TLS_VERIFY, "certificate verify failed");
	release(&p);
	run(&p, &o_small, ARGS("run", "-a", named, "--cacert", ca.ca, "-s", "cat", "--", "cat"));
	expect(&p, EXECCTL_TLS_VERIFY, "certificate verify failed: hostname mismatch");
	CU_ASSERT_PTR_NOT_NULL(strstr(p.err, "not for this host"));
	release(&p);
	CU_ASSERT_EQUAL(cat_started(), started);
	/* a CA file that is not there: a usage error, nothing sent */
	run(&p, &o_small, ARGS("run", "-a", wss, "--cacert", missing, "-s", "cat", "--", "cat"));
	expect(&p, EXECCTL_USAGE, missing);
	release(&p);
	/* ws:// on the TLS port: unreachable, with the hint */
	char plain[96];
	snprintf(plain, sizeof plain, "ws://127.0.0.1:%d", D.port);
	run(&p, &o_small, ARGS("run", "-a", plain, "-s", "cat", "--", "cat"));
	expect(&p, EXECCTL_UNREACHABLE, "use wss://");
	release(&p);

	/* status over https */
	run(&p, NULL, ARGS("status", "-a", wss, "--cacert", ca.ca, "--json"));
	expect(&p, 0, NULL);
	struct json_object *j = json_tokener_parse(p.out);
	CU_ASSERT(j && harness_json_int(j, "services", "cat", "started", NULL) == 2);
	json_object_put(j);
	release(&p);
	run(&p, NULL, ARGS("status", "-a", wss));
	expect(&p, EXECCTL_TLS_VERIFY, "certificate verify failed");
	release(&p);
	run(&p, NULL, ARGS("status", "-a", named, "--cacert", ca.ca));
	expect(&p, EXECCTL_TLS_VERIFY, "certificate verify failed");
	CU_ASSERT_PTR_NOT_NULL(strstr(p.err, "not for this host"));
	fprintf(stderr, "  status, wrong name: %s", p.err);
	release(&p);
	run(&p, NULL, ARGS("status", "-a", wss, "--cacert", missing));
	expect(&p, EXECCTL_USAGE, missing);
	release(&p);

	free(data);
	stop();
	testca_remove(&ca);
	testca_remove(&other);
}

/* Behind a load balancer: the first instance reached is busy, so the pool
 * grows through the one address and the job runs on the other. */
static struct fleet LB;

static void second_instance_ready(void)
{
	CU_ASSERT(balancer_set_state(&LB.lb, 1, "ready") == 0);
}

static void test_behind_balancer(void)
{
	struct proc p;
	char up[2][80];
	CU_ASSERT_FATAL(fleet_start(&LB, 2, 1, NULL) == 0);
	block_slot_at(LB.d[0].port);
	/* execctl's first connection can only reach instance 0; instance 1
	 * is back before its want has waited a retry tick (1 s) */
	CU_ASSERT(balancer_set_state(&LB.lb, 1, "maint") == 0);
	struct run_opts o = { .in = "via the balancer\n",
			      .inlen = 17,
			      .during = second_instance_ready,
			      .during_ms = 500 };
	run(&p, &o, ARGS("run", "-a", LB.url, "-s", "cat", "-v", "--", "cat"));
	expect(&p, 0, NULL);
	CU_ASSERT_STRING_EQUAL(p.out, "via the balancer\n");
	for (int i = 0; i < 2; i++) {
		snprintf(up[i], sizeof up[i], "connection up to instance %s", LB.id[i]);
		CU_ASSERT_PTR_NOT_NULL(strstr(p.err, up[i]));
	}
	CU_ASSERT_EQUAL(fleet_status_int(&LB, 1, "services", "cat", "finished", NULL), 1);
	CU_ASSERT_EQUAL(fleet_status_int(&LB, 0, "services", "cat", "started", NULL), 0);
	release(&p);
	run(&p, NULL, ARGS("status", "-a", LB.url, "--json"));
	expect(&p, 0, NULL);
	struct json_object *j = json_tokener_parse(p.out);
	CU_ASSERT(j && fleet_index(&LB, tc_str(j, "instance_id")) >= 0);
	if (j)
		json_object_put(j);
	release(&p);
	drop_blocker();
	CU_ASSERT(fleet_stop(&LB) == 0);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "stdin -> cat -> stdout, bytes compared", test_stream },
		{ "the running job's progress on a terminal's status line",
		  test_progress_on_terminal },
		{ "exit code and failing output passed on", test_exit_code },
		{ "--input and --output files", test_files },
		{ "--output FILE untouched when the job fails", test_output_kept_on_failure },
		{ "--output FILE: its directory held, owner and mode, a link to nothing",
		  test_output_held_dir },
		{ "binary output cut by a timeout: stdout byte-exact", test_binary_output_cut },
		{ "unknown service, unreachable, usage", test_unknown_service_and_unreachable },
		{ "refused token", test_token },
		{ "no slot within --timeout", test_no_slot },
		{ "SIGINT cancels", test_interrupt },
		{ "position on a terminal only", test_position_on_terminal },
		{ "the estimate comes from what holds the slot", test_eta_from_holder },
		{ "the position line is erased before the job's output",
		  test_line_erased_before_output },
		{ "status tables and --json", test_status },
		{ "run and status over wss/https, --cacert, exit 119", test_wss },
		{ "behind a load balancer", test_behind_balancer },
		{ "/dev/null and a closed stdout", test_devnull_and_closed },
		{ "a reader that goes away", test_reader_goes_away },
		{ "a silent connection: ping deadline, receipt once, exit status",
		  test_silent_connection },
		{ NULL, NULL },
	};
	snprintf(execctl, sizeof execctl, "%s", harness_execctl());
	return run_suite("execctl as a process", cases);
}
