/*
 * client_stream.c - a measurement through libexecclient: streams a file
 * through a job (its stdin from the file, its stdout to another file) and
 * prints (on stderr) the bytes served and received, the wall time, the throughput and this process's peak
 * RSS, so that "the library never holds a whole stream in memory" can be
 * checked with a number.
 *
 *   client_stream URL SERVICE COMMAND IN OUT
 *
 * IN and OUT may be pipes (/dev/stdin, /dev/stdout).  Exits 0 when the
 * job succeeded and, for regular files, OUT has as many bytes as IN.
 */
#include "autoconfig.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <event2/event.h>

#include <execserver/client.h>

static int finished, success;
static unsigned long long bytes_in, bytes_out;
static struct event_base *base;

static void on_done(exc_job *j, const struct exc_receipt *r, void *arg)
{
	finished = 1;
	success = r->ok;
	bytes_in = r->stdin_bytes;
	bytes_out = r->stdout_bytes;
	if (!r->ok)
		fprintf(stderr, "job failed: %s %s\n", r->error_code ? r->error_code : "",
			r->error_message ? r->error_message : "");
	event_base_loopbreak(base);
}

static double now_s(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

int main(int argc, char **argv)
{
	struct exc_job_spec s;
	struct rusage ru;
	struct stat st_in, st_out;
	char json[256];
	exc_client *c;
	int in, out;
	double t0;

	if (argc != 6) {
		fprintf(stderr, "usage: client_stream URL SERVICE COMMAND IN OUT\n");
		return 2;
	}
	in = open(argv[4], O_RDONLY);
	out = open(argv[5], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (in < 0 || out < 0 || fstat(in, &st_in) != 0) {
		perror("open");
		return 2;
	}
	base = event_base_new();
	c = exc_client_new(base, NULL);
	if (c == NULL || exc_client_add_address(c, argv[1]) != 0) {
		fprintf(stderr, "client: %s\n", c ? exc_client_last_error(c) : "cannot create");
		return 2;
	}
	snprintf(json, sizeof json, "{\"command\":\"%s\"}", argv[3]);
	exc_job_spec_init(&s);
	s.service = argv[2];
	s.job_json = json;
	s.in.kind = EXC_IO_FD;
	s.in.fd = in;
	s.out.kind = EXC_IO_FD;
	s.out.fd = out;
	s.on_done = on_done;
	t0 = now_s();
	if (exc_submit(c, &s) == NULL) {
		fprintf(stderr, "submit: %s\n", exc_client_last_error(c));
		return 2;
	}
	while (!finished)
		event_base_dispatch(base);
	t0 = now_s() - t0;
	fstat(out, &st_out);
	getrusage(RUSAGE_SELF, &ru);
	fprintf(stderr, "bytes %llu in, %llu out; %.2f s; %.1f MiB/s; peak RSS %ld KiB\n", bytes_in,
		bytes_out, t0, (double)bytes_out / 1048576.0 / t0, ru.ru_maxrss);
	exc_client_free(c);
	event_base_free(base);
	close(in);
	close(out);
	if (S_ISREG(st_in.st_mode) && S_ISREG(st_out.st_mode) && st_in.st_size != st_out.st_size)
		success = 0;
	return success ? 0 : 1;
}
