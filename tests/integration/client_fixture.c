/*
 * client_fixture.c - see client_fixture.h.
 */
#include "autoconfig.h"
#include "client_fixture.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <event2/event.h>
#include <json-c/json.h>

struct event_base *fx_base;
static char logbuf[1 << 20];
static size_t loglen;

static void fx_log(void *arg, enum exc_log_level level, const char *line)
{
	size_t n = strlen(line);

	if (getenv("FX_VERBOSE"))
		fprintf(stderr, "[client] %s\n", line);
	if (loglen + n + 2 < sizeof logbuf) {
		memcpy(logbuf + loglen, line, n);
		loglen += n;
		logbuf[loglen++] = '\n';
		logbuf[loglen] = '\0';
	}
}

const char *fx_log_find(const char *needle)
{
	return strstr(logbuf, needle);
}

void fx_log_clear(void)
{
	loglen = 0;
	logbuf[0] = '\0';
}

void fx_options(struct exc_options *o)
{
	exc_options_init(o);
	o->retry_tick_ms = 200;
	o->grow_interval_ms = 300;
	o->reprobe_interval_ms = 3000;
	o->owner_grace_sec = 5;
	o->log = fx_log;
	o->log_level = EXC_LOG_DEBUG;
}

exc_client *fx_client(const struct exc_options *o, struct es_daemon *d, int nd, const char *suffix)
{
	struct exc_options def;
	exc_client *c;

	if (fx_base == NULL)
		fx_base = event_base_new();
	if (o == NULL) {
		fx_options(&def);
		o = &def;
	}
	c = exc_client_new(fx_base, o);
	for (int i = 0; c && i < nd; i++) {
		char url[200];

		snprintf(url, sizeof url, "ws://%s:%d%s", harness_host(&d[i]), d[i].port,
			 suffix ? suffix : "");
		if (exc_client_add_address(c, url) != 0) {
			exc_client_free(c);
			return NULL;
		}
	}
	return c;
}

void fx_on_done(exc_job *j, const struct exc_receipt *r, void *arg)
{
	struct fx_done *d = arg;

	d->called++;
	d->ok = r->ok;
	d->exited = r->exited;
	d->exit_code = r->exit_code;
	d->retryable = r->retryable;
	snprintf(d->error_code, sizeof d->error_code, "%s", r->error_code ? r->error_code : "");
	snprintf(d->error_message, sizeof d->error_message, "%s",
		 r->error_message ? r->error_message : "");
	snprintf(d->instance_id, sizeof d->instance_id, "%s", r->instance_id ? r->instance_id : "");
	snprintf(d->stdout_text, sizeof d->stdout_text, "%s", r->stdout_text ? r->stdout_text : "");
	d->stdin_bytes = r->stdin_bytes;
	d->stdout_bytes = r->stdout_bytes;
	if (getenv("FX_VERBOSE"))
		fprintf(stderr, "[done] %s ok=%d code=%s msg=%s json=%s\n", exc_job_id(j), r->ok,
			d->error_code, d->error_message, r->json ? r->json : "-");
}

void fx_on_position(exc_job *j, const struct exc_position *p, void *arg)
{
	struct fx_done *d = arg;

	d->pos_count++;
	snprintf(d->pos_state, sizeof d->pos_state, "%s", p->state);
	d->pos_running = p->running;
	d->pos_ahead = p->ahead;
	d->pos_capacity = p->capacity;
}

void fx_spec(struct exc_job_spec *s, const char *service, const char *job_json, struct fx_done *d)
{
	exc_job_spec_init(s);
	s->service = service;
	s->job_json = job_json;
	s->on_done = fx_on_done;
	s->on_position = fx_on_position;
	s->arg = d;
}

void fx_cat_spec(struct exc_job_spec *s, struct fx_done *d, const unsigned char *data, size_t n,
		 int out_fd)
{
	fx_spec(s, "tools", "{\"command\":\"cat\"}", d);
	s->in.kind = EXC_IO_BUFFER;
	s->in.data = data;
	s->in.len = n;
	s->out.kind = EXC_IO_FD;
	s->out.fd = out_fd;
}

void fx_files_job(exc_client *c, const struct es_daemon *d)
{
	struct fx_done done = { 0 };
	struct exc_job_spec s;
	struct exc_file in = { "a.txt",
			       { .kind = EXC_IO_BUFFER, .data = "hello files\n", .len = 12 } };
	struct exc_file out = { "b.txt", { .kind = EXC_IO_FILE } };
	char path[300];

	snprintf(path, sizeof path, "%s/b-local.txt", d->dir);
	out.io.path = path;
	fx_spec(&s, "tools", "{\"command\":\"cp\",\"args\":[\"a.txt\",\"b.txt\"]}", &done);
	s.inputs = &in;
	s.ninputs = 1;
	s.outputs = &out;
	s.noutputs = 1;
	CU_ASSERT_FATAL(exc_submit(c, &s) != NULL);
	CU_ASSERT(fx_wait(&done.called, 20000));
	CU_ASSERT(done.ok);
	fx_expect_file(path, "hello files\n", 12);
}

void fx_expect_file(const char *path, const void *data, size_t n)
{
	size_t got = 0;
	unsigned char *back = harness_read_file(path, &got);

	CU_ASSERT_EQUAL(got, n);
	CU_ASSERT(back && got == n && memcmp(back, data, n) == 0);
	free(back);
}

void fx_stop(exc_client *c, struct es_daemon *d)
{
	if (c)
		exc_client_free(c);
	harness_stop(d, 10000);
	harness_cleanup(d);
}

static int flag_pred(void *arg)
{
	return *(const int *)arg;
}

int fx_wait_pred(int (*pred)(void *arg), void *arg, int timeout_ms)
{
	long long end = harness_now_ms() + timeout_ms;

	while (!pred(arg) && harness_now_ms() < end) {
		struct timeval tv = { 0, 20000 };

		event_base_loopexit(fx_base, &tv);
		event_base_dispatch(fx_base);
	}
	return pred(arg);
}

int fx_wait(const int *flag, int timeout_ms)
{
	return fx_wait_pred(flag_pred, (void *)flag, timeout_ms);
}

static int never(void *arg)
{
	return 0;
}

void fx_spin(int ms)
{
	fx_wait_pred(never, NULL, ms);
}

void fx_instance_id(const struct es_daemon *d, char out[65])
{
	struct json_object *st = harness_status(d), *v;

	out[0] = '\0';
	if (st && json_object_object_get_ex(st, "instance_id", &v))
		snprintf(out, 65, "%s", json_object_get_string(v));
	json_object_put(st);
}

/* ---- descriptor exhaustion ------------------------------------------------ */

#define FX_HOARD_MAX 256
static int hoard[FX_HOARD_MAX];
static int nhoard;
static struct rlimit saved_nofile;

int fx_fds_exhaust(void)
{
	struct rlimit low;
	int top = 0, fd;

	if (getrlimit(RLIMIT_NOFILE, &saved_nofile) != 0)
		return -1;
	for (int i = 0; i < (int)saved_nofile.rlim_cur && i < 4096; i++)
		if (fcntl(i, F_GETFD) >= 0)
			top = i;
	if (top + 1 >= FX_HOARD_MAX)
		return -1;
	low = saved_nofile;
	low.rlim_cur = (rlim_t)top + 1;
	if (setrlimit(RLIMIT_NOFILE, &low) != 0)
		return -1;
	while (nhoard < FX_HOARD_MAX && (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
		hoard[nhoard++] = fd;
	return nhoard;
}

void fx_fds_release(void)
{
	while (nhoard > 0)
		close(hoard[--nhoard]);
	setrlimit(RLIMIT_NOFILE, &saved_nofile);
}
