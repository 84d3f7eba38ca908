/*
 * demo_job.c - one job through the broker protocol, spoken by hand over the
 * test websocket client: HELLO, WANT, OFFER, JOB, DONE.  It shows, in a
 * page, what a client does (docs/protocol.md); scripts/demo.sh uses execctl.
 *
 *   demo_job [-i FILE] HOST PORT SERVICE COMMAND [ARG...]
 *
 * With -i, the job's stdin and stdout are streamed through one-time pipe
 * endpoints served here (the test pipe server plays the client's side): the
 * execserver GETs FILE as the program's standard input and PUTs its
 * standard output back; the length and SHA-256 of what arrived are printed.
 * Prints every message it sends (>) and receives (<); exits with the job's
 * exit code, or 1 when the job failed around the process.
 */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "pipe_server.h"
#include "wsclient.h"

static struct json_object *recv_message(struct wsc *c, const char *want_type)
{
	for (;;) {
		struct wsc_msg m;
		int t = wsc_recv(c, 30000, &m);
		if (t != WSC_TEXT) {
			fprintf(stderr, "demo_job: connection ended while waiting for %s\n",
				want_type);
			wsc_msg_free(&m);
			return NULL;
		}
		printf("< %s\n", m.data);
		struct json_object *o = json_tokener_parse(m.data), *type;
		wsc_msg_free(&m);
		if (o && json_object_object_get_ex(o, "type", &type)) {
			if (strcmp(json_object_get_string(type), want_type) == 0)
				return o;
			if (strcmp(json_object_get_string(type), "ERROR") == 0) {
				json_object_put(o);
				return NULL;
			}
		}
		json_object_put(o);
	}
}

static int send_message(struct wsc *c, struct json_object *o)
{
	const char *text = json_object_to_json_string_ext(
		o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	printf("> %s\n", text);
	int rc = wsc_send_text(c, text, strlen(text));
	json_object_put(o);
	return rc;
}

int main(int argc, char **argv)
{
	const char *stream_file = NULL;
	struct pipe_server ps = { .pid = -1 };
	char in_url[256] = "", out_url[256] = "";

	if (argc > 2 && strcmp(argv[1], "-i") == 0) {
		stream_file = argv[2];
		argv += 2;
		argc -= 2;
	}
	if (argc < 5) {
		fprintf(stderr, "usage: demo_job [-i FILE] HOST PORT SERVICE COMMAND [ARG...]\n");
		return 2;
	}
	if (stream_file) {
		struct pipe_endpoint in = PIPE_ENDPOINT_INIT, out = PIPE_ENDPOINT_INIT;
		in.file = stream_file;
		if (pipe_server_start(&ps) <= 0 ||
		    pipe_server_in(&ps, "in", &in, in_url, sizeof in_url) != 0 ||
		    pipe_server_out(&ps, "out", &out, out_url, sizeof out_url) != 0) {
			fprintf(stderr, "demo_job: cannot start the pipe endpoints\n");
			return 1;
		}
	}
	int status = 0;
	struct wsc *c = wsc_connect(argv[1], atoi(argv[2]), "/broker?client=demo", NULL, 5000,
				    &status);
	if (!c) {
		fprintf(stderr, "demo_job: cannot connect to %s:%s (HTTP %d)\n", argv[1], argv[2],
			status);
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	char job_id[32];
	snprintf(job_id, sizeof job_id, "demo-%d", (int)getpid());

	struct json_object *hello = recv_message(c, "HELLO"), *o, *v;
	if (!hello)
		return 1;
	json_object_put(hello);

	o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("WANT"));
	json_object_object_add(o, "job_id", json_object_new_string(job_id));
	json_object_object_add(o, "service", json_object_new_string(argv[3]));
	json_object_object_add(o, "priority", json_object_new_int(2));
	send_message(c, o);

	struct json_object *offer = recv_message(c, "OFFER");
	if (!offer)
		return 1;
	json_object_object_get_ex(offer, "token", &v);
	struct json_object *job = json_object_new_object(), *args = json_object_new_array();
	json_object_object_add(job, "command", json_object_new_string(argv[4]));
	for (int i = 5; i < argc; i++)
		json_object_array_add(args, json_object_new_string(argv[i]));
	json_object_object_add(job, "args", args);
	if (stream_file) {
		json_object_object_add(job, "stdin", json_object_new_string(in_url));
		json_object_object_add(job, "stdout", json_object_new_string(out_url));
	}
	o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("JOB"));
	json_object_object_add(o, "job_id", json_object_new_string(job_id));
	json_object_object_add(o, "token", json_object_get(v));
	json_object_object_add(o, "job", job);
	json_object_put(offer);
	send_message(c, o);

	struct json_object *done = recv_message(c, "DONE"), *receipt, *code;
	if (!done)
		return 1;
	int rc = 1;
	if (json_object_object_get_ex(done, "receipt", &receipt) &&
	    json_object_object_get_ex(receipt, "exit_code", &code))
		rc = json_object_get_int(code);
	json_object_put(done);
	wsc_send_close(c, 1000, "bye");
	wsc_free(c);
	if (stream_file) {
		struct pipe_result r;
		if (pipe_server_result(&ps, "out", &r) == 0)
			printf("out-pipe received %llu bytes, sha256 %s\n",
			       (unsigned long long)r.length, r.sha256);
		pipe_server_stop(&ps);
	}
	return rc;
}
