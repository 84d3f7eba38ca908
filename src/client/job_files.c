/*
 * job_files.c - a job's stdin, stdout and named files: their local
 * sources and sinks (stream.c) set up at submit, the one-time endpoints
 * (pipes.c) created on the connection that won the OFFER, and the JOB's
 * job object with their URLs.  A file whose endpoint was taken but did
 * not complete makes the receipt local_io.
 */
#include "autoconfig.h"
#include "client/job_impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

void job_free_pipes(struct exc_job *j)
{
	for (size_t i = 0; i < j->nfiles; i++) {
		endpoint_free(j->files[i].ep);
		j->files[i].ep = NULL;
	}
}

/* The first local stream that failed, or NULL.  An output that did not
 * arrive whole failed; an input (stdin, a file the job reads) failed only
 * when our own source did: the execserver may close an input's connection
 * early because the program ended without reading all of it, and whether
 * that matters is the program's outcome, in the receipt. */
const struct jfile *job_failed_stream(const struct exc_job *j)
{
	for (size_t i = 0; i < j->nfiles; i++) {
		const struct jfile *f = &j->files[i];

		if (!f->ep || !endpoint_used(f->ep) || (f->finished && f->ok))
			continue;
		if (f->is_out || (f->st && stream_error(f->st)[0]))
			return f;
	}
	return NULL;
}

/* ---- pipes ------------------------------------------------------------------ */

static void file_done(void *arg, int ok, uint64_t bytes, const char *why)
{
	struct jfile *f = arg;

	struct exc_job *j = f->job;

	f->finished = 1;
	f->ok = ok;
	f->bytes = bytes;
	if (why)
		snprintf(f->why, sizeof f->why, "%s", why);
	/* our own source or sink failed (a closed reader, a full disk): the
	 * job cannot deliver, so it is cancelled now and ends local_io */
	if (!ok && f->st && stream_error(f->st)[0] && j && j->state == J_RUNNING &&
	    !j->local_code[0]) {
		if (j->owner)
			conn_send(j->owner, wire_job_msg(PROTO_CANCEL, j->id));
		job_finish_local(j, EXC_E_LOCAL_IO, 0, "%s: %s", f->name, f->why);
	}
}

/* A URL for f: an endpoint on k's local address, or the caller's URL.
 * NULL: nothing to send (EXC_IO_NONE). */
static struct json_object *file_url(struct exc_job *j, struct jfile *f,
				    const struct sockaddr_storage *local)
{
	char url[160];

	if (f->io.kind == EXC_IO_NONE)
		return NULL;
	if (f->io.kind == EXC_IO_URL)
		return json_object_new_string(f->io.url);
	f->finished = f->ok = 0;
	f->why[0] = '\0';
	f->job = j;
	f->ep = endpoint_new(j->c, local, f->is_out, f->st, file_done, f, url, sizeof url);
	if (f->ep == NULL)
		return NULL;
	client_log(j->c, EXC_LOG_DEBUG, "job %s: %s %s at %s", j->id, f->name,
		   f->is_out ? "PUT" : "GET", url);
	return json_object_new_string(url);
}

static struct json_object *file_entry(const char *name, struct json_object *url)
{
	struct json_object *e = json_object_new_object();

	json_object_object_add(e, "name", json_object_new_string(name));
	json_object_object_add(e, "url", url);
	return e;
}

/* The JOB's job object (creates the endpoints on local). */
struct json_object *job_build(struct exc_job *j, const struct sockaddr_storage *local,
			      int body_mode)
{
	struct json_object *o = json_object_new_object(), *in, *out, *v;

	if (o == NULL)
		return NULL;
	json_object_object_foreach(j->payload, key, val) if (strcmp(key, "inputs") != 0 &&
							     strcmp(key, "outputs") != 0)
		json_object_object_add(o, key, json_object_get(val));
	in = json_object_object_get_ex(j->payload, "inputs", &v) &&
			     json_object_is_type(v, json_type_array)
		     ? json_object_get(v)
		     : json_object_new_array();
	out = json_object_object_get_ex(j->payload, "outputs", &v) &&
			      json_object_is_type(v, json_type_array)
		      ? json_object_get(v)
		      : json_object_new_array();
	json_object_object_add(o, "inputs", in);
	json_object_object_add(o, "outputs", out);
	for (size_t i = 0; i < j->nfiles; i++) {
		struct jfile *f = &j->files[i];
		struct json_object *url;

		if (f->io.kind == EXC_IO_NONE || (body_mode && i < 2 && f->io.kind != EXC_IO_URL))
			continue;
		url = file_url(j, f, local);
		if (url == NULL) {
			json_object_put(o);
			return NULL;
		}
		if (i < 2)
			json_object_object_add(o, i == 0 ? "stdin" : "stdout", url);
		else
			json_object_array_add(f->is_out ? out : in, file_entry(f->name, url));
	}
	return o;
}

int job_id_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n > max)
		return 0;
	for (; *s; s++)
		if (*s < 0x21 || *s > 0x7e)
			return 0;
	return 1;
}

int job_name_ok(const char *s)
{
	return s && *s && strchr(s, '/') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

/* Sets up files[i] from io; -1 with the client's error set. */
int job_file_init(exc_client *c, struct jfile *f, const char *name, int is_out,
		  const struct exc_io *io)
{
	f->is_out = is_out;
	f->io.kind = io->kind;
	f->name = strdup(name);
	if (f->name == NULL)
		return -1;
	switch (io->kind) {
	case EXC_IO_NONE: return 0;
	case EXC_IO_URL:
		if (io->url == NULL ||
		    (strncmp(io->url, "http://", 7) != 0 && strncmp(io->url, "https://", 8) != 0)) {
			client_fail(c, EINVAL, "%s: not an http(s) URL", name);
			return -1;
		}
		f->io.url = strdup(io->url);
		return f->io.url ? 0 : -1;
	case EXC_IO_BUFFER:
		if (is_out || (io->data == NULL && io->len)) {
			client_fail(c, EINVAL, "%s: a buffer is a source only", name);
			return -1;
		}
		break;
	case EXC_IO_DISCARD:
		if (!is_out) {
			client_fail(c, EINVAL, "%s: discard is a sink only", name);
			return -1;
		}
		break;
	case EXC_IO_FD:
	case EXC_IO_FILE:
		if (io->kind == EXC_IO_FILE && io->path == NULL) {
			client_fail(c, EINVAL, "%s: no path", name);
			return -1;
		}
		break;
	default: client_fail(c, EINVAL, "%s: unknown source/sink kind", name); return -1;
	}
	f->st = is_out ? stream_sink(c->base, io) : stream_source(c->base, io);
	if (f->st == NULL) {
		client_fail(c, errno, "%s: %s%s%s", name, io->path ? io->path : "",
			    io->path ? ": " : "", strerror(errno));
		return -1;
	}
	return 0;
}
