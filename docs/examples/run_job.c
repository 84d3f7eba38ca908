/*
 * run_job.c - the smallest complete libexecclient program: runs one job of
 * SERVICE (the configured command COMMAND with ARGS) on the execserver(s)
 * at URL, streams this process's stdin into the job and the job's stdout
 * to this process's stdout, and exits with the job's exit code.
 *
 *   cc run_job.c $(pkg-config --cflags --libs execclient) -o run_job
 *   ./run_job ws://exec.example:8083 demo cat < in.txt > out.txt
 *
 * docs/client.md explains each step; make check builds this file against
 * an installed copy of the library and runs it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <execserver/client.h>

struct run {
	struct event_base *base;
	int exit_code;
};

/* Called once, from the event loop, however the job ended. */
static void on_done(exc_job *job, const struct exc_receipt *r, void *arg)
{
	struct run *run = arg;

	if (r->ok) {
		run->exit_code = 0;
	} else if (r->error_code) {
		fprintf(stderr, "run_job: %s: %s%s\n", r->error_code, r->error_message,
			r->retryable ? " (try again later)" : "");
		run->exit_code = 1;
	} else {
		fprintf(stderr, "run_job: exit code %d, signal %d: %s\n", r->exit_code, r->signal,
			r->stderr_line ? r->stderr_line : "");
		run->exit_code = r->exited && r->exit_code ? r->exit_code : 1;
	}
	fprintf(stderr, "run_job: job %s ran on instance %s, %lld ms, %llu bytes in, %llu out\n",
		exc_job_id(job), r->instance_id ? r->instance_id : "(none)",
		(long long)r->duration_ms, (unsigned long long)r->stdin_bytes,
		(unsigned long long)r->stdout_bytes);
	event_base_loopbreak(run->base);
}

/* Appends s to out as a JSON string (quotes, backslashes and control
 * characters escaped). */
static void json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(out, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(out, "\\u%04x", ch);
		else
			fputc(ch, out);
	}
	fputc('"', out);
}

/* The job description (docs/job-payload.md): {"command": ..., "args": [...]}. */
static char *job_json(int argc, char **argv)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);

	fputs("{\"command\":", out);
	json_string(out, argv[0]);
	fputs(",\"args\":[", out);
	for (int i = 1; i < argc; i++) {
		if (i > 1)
			fputc(',', out);
		json_string(out, argv[i]);
	}
	fputs("]}", out);
	fclose(out);
	return text;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: run_job URL SERVICE COMMAND [ARGS...]\n");
		return 2;
	}
	/* a peer gone must be an error, not the end of the program (client.h) */
	signal(SIGPIPE, SIG_IGN);
	struct run run = { .base = event_base_new(), .exit_code = 1 };

	/* 1. A client on our event base, with default options (a random
	 *    client id, no timeout while waiting for a slot). */
	struct exc_options opt;
	exc_options_init(&opt);
	opt.connect_timeout_sec = 600; /* no slot in 10 min: no_slot */
	exc_client *client = exc_client_new(run.base, &opt);
	if (!client || exc_client_add_address(client, argv[1]) != 0) {
		fprintf(stderr, "run_job: %s: %s\n", argv[1],
			client ? exc_client_last_error(client) : "out of memory");
		return 2;
	}

	/* 2. The job: stdin from our fd 0, stdout to our fd 1. */
	char *job = job_json(argc - 3, argv + 3);
	struct exc_job_spec spec;
	exc_job_spec_init(&spec);
	spec.service = argv[2];
	spec.job_json = job;
	spec.in.kind = EXC_IO_FD;
	spec.in.fd = STDIN_FILENO;
	spec.out.kind = EXC_IO_FD;
	spec.out.fd = STDOUT_FILENO;
	spec.on_done = on_done;
	spec.arg = &run;
	if (!exc_submit(client, &spec)) {
		fprintf(stderr, "run_job: %s\n", exc_client_last_error(client));
		return 2;
	}

	/* 3. Run the loop until on_done breaks it, then clean up. */
	event_base_dispatch(run.base);
	exc_client_free(client);
	event_base_free(run.base);
	free(job);
	return run.exit_code;
}
