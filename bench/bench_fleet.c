/* bench_fleet.c - see bench_fleet.h. */
#include "autoconfig.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_fleet.h"
#include "bench_util.h"
#include "proto.h"
#include "wsclient.h"

struct fleet *fleet_open(int port, int n, const char *prefix, int groups, int report_pings)
{
	return fleet_open_from(port, n, prefix, groups, report_pings, NULL);
}

#define FLEET_EVENTS 256

static int fleet_poll(struct fleet *f, int wait_ms);

struct fleet *fleet_open_from(int port, int n, const char *prefix, int groups, int report_pings,
			      const char *source)
{
	struct fleet *f = calloc(1, sizeof *f);
	if (!f || !(f->c = calloc((size_t)n, sizeof *f->c)) || (f->ep = epoll_create1(0)) < 0) {
		perror("fleet");
		exit(1);
	}
	f->n = n;
	wsc_set_source_addr(source);
	for (int i = 0; i < n; i++) {
		char id[64];
		snprintf(id, sizeof id, "%s%d", prefix, groups ? i % groups : i);
		struct tclient *tc = tc_connect_within(port, id, 60000);
		if (!tc) {
			fprintf(stderr, "esbench: connection %d of %d failed (%s)\n", i, n,
				strerror(errno));
			exit(1);
		}
		if (report_pings)
			wsc_set_options(tc->ws, WSC_OPT_REPORT_PINGS);
		/* as websocket libraries do: a small message goes out at once */
		int one = 1;
		setsockopt(wsc_fd(tc->ws), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		f->c[i].tc = tc;
		f->c[i].idx = i;
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &f->c[i] };
		epoll_ctl(f->ep, EPOLL_CTL_ADD, wsc_fd(tc->ws), &ev);
		/* the connections opened so far answer their pings meanwhile:
		 * opening many takes longer than a ping deadline */
		if (i % 64 == 63)
			while (fleet_poll(f, 0) == FLEET_EVENTS)
				;
	}
	wsc_set_source_addr(NULL);
	return f;
}

void fleet_close(struct fleet *f)
{
	if (!f)
		return;
	for (int i = 0; i < f->n; i++) {
		tc_close(f->c[i].tc);
		free(f->c[i].cork);
	}
	free(f->c);
	close(f->ep);
	free(f);
}

const char *fleet_field(const char *raw, const char *key, char *out, size_t cap)
{
	char pat[48];
	snprintf(pat, sizeof pat, "\"%s\":\"", key);
	const char *p = strstr(raw, pat);
	size_t k = 0;
	if (p)
		for (p += strlen(pat); *p && *p != '"' && k + 1 < cap; p++)
			out[k++] = *p;
	out[k] = '\0';
	return out;
}

static void read_conn(struct fleet *f, struct fleet_conn *c)
{
	for (;;) {
		struct wsc_msg m;
		int t = wsc_recv(c->tc->ws, 0, &m);
		if (t == WSC_TIMEOUT)
			return;
		if (t != WSC_TEXT && t != WSC_PING) {
			wsc_msg_free(&m);
			c->dead = 1;
			epoll_ctl(f->ep, EPOLL_CTL_DEL, wsc_fd(c->tc->ws), NULL);
			return;
		}
		char type[16], job[80], token[40];
		struct fleet_msg fm = { .raw = m.data ? m.data : "",
					.len = m.len,
					.t_ns = bu_now_ns() };
		if (t == WSC_PING) {
			fm.type = "PING";
			fm.job_id = fm.token = "";
		} else {
			fm.type = fleet_field(fm.raw, "type", type, sizeof type);
			fm.job_id = fleet_field(fm.raw, "job_id", job, sizeof job);
			fm.token = fleet_field(fm.raw, "token", token, sizeof token);
		}
		f->msgs++;
		if (f->on_msg)
			f->on_msg(f, c, &fm);
		wsc_msg_free(&m);
	}
}

/* Reads the connections that have input (at most FLEET_EVENTS), waiting
 * up to wait_ms for one; returns how many had. */
static int fleet_poll(struct fleet *f, int wait_ms)
{
	struct epoll_event evs[FLEET_EVENTS];
	int n = epoll_wait(f->ep, evs, FLEET_EVENTS, wait_ms);
	for (int i = 0; i < n && !f->stop; i++) {
		struct fleet_conn *c = evs[i].data.ptr;
		if (!c->dead)
			read_conn(f, c);
	}
	return n;
}

void fleet_run(struct fleet *f, long long deadline_ns, int tick_ms, void (*tick)(struct fleet *f))
{
	long long next_tick = bu_now_ns() + (long long)tick_ms * 1000000LL;
	while (!f->stop) {
		long long now = bu_now_ns();
		if (deadline_ns && now >= deadline_ns)
			return;
		if (tick && now >= next_tick) {
			tick(f);
			next_tick = now + (long long)tick_ms * 1000000LL;
			if (f->stop)
				return;
		}
		int wait_ms = tick ? tick_ms : 100;
		if (deadline_ns) {
			long long left_ms = (deadline_ns - now + 999999) / 1000000;
			if (left_ms < wait_ms)
				wait_ms = (int)left_ms;
		}
		fleet_poll(f, wait_ms);
	}
}

int fleet_send(struct fleet_conn *c, const char *fmt, ...)
{
	char buf[2048];
	va_list ap;
	va_start(ap, fmt);
	int len = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (c->dead || len < 0 || (size_t)len >= sizeof buf) {
		c->dead = 1;
		return -1;
	}
	if (c->corked) {
		struct wsc_frame fr = { .fin = 1,
					.opcode = WSC_TEXT,
					.masked = 1,
					.payload = buf,
					.len = (size_t)len };
		size_t need = c->cork_len + (size_t)len + 14;
		if (need > c->cork_cap) {
			unsigned char *grown = realloc(c->cork, need * 2);
			if (!grown) {
				c->dead = 1;
				return -1;
			}
			c->cork = grown;
			c->cork_cap = need * 2;
		}
		c->cork_len += wsc_build_frame(&fr, c->cork + c->cork_len,
					       c->cork_cap - c->cork_len);
		return 0;
	}
	if (wsc_send_text(c->tc->ws, buf, (size_t)len) != 0) {
		c->dead = 1;
		return -1;
	}
	return 0;
}

void fleet_cork(struct fleet_conn *c)
{
	c->corked = 1;
	c->cork_len = 0;
}

int fleet_uncork(struct fleet_conn *c)
{
	c->corked = 0;
	if (c->dead || c->cork_len == 0)
		return c->dead ? -1 : 0;
	if (wsc_send_bytes(c->tc->ws, c->cork, c->cork_len) != 0) {
		c->dead = 1;
		return -1;
	}
	return 0;
}

int fleet_want(struct fleet_conn *c)
{
	c->outstanding++;
	return fleet_send(
		c, "{\"type\":\"WANT\",\"job_id\":\"%d-%d\",\"service\":\"%s\",\"priority\":%d}",
		c->idx, c->seq++, c->service, c->priority);
}

struct json_object *fleet_expect_on(struct fleet *f, struct tclient *c, const char *type,
				    long long deadline_ns)
{
	struct json_object *m = NULL;
	while (!m && bu_now_ns() < deadline_ns) {
		m = tc_expect(c, type, 2);
		if (!m)
			fleet_run(f, bu_now_ns() + 1000000LL, 0, NULL);
	}
	return m;
}
