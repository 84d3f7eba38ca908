/*
 * bench_misc.c - rows 2, 5 (memory), 6 and the auto-balance row of
 * docs/benchmarks.md: what idle clients cost (traffic, CPU, memory), the
 * size of the shared segment per want, streaming through a job's pipes
 * against curl alone, and the start latency of light jobs during a flood
 * of heavy ones with auto-balance and with one fixed waitgroup.
 */
#include "autoconfig.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "bench_fleet.h"
#include "bench_http.h"
#include "bench_rows.h"
#include "bench_util.h"
#include "harness.h"
#include "proto.h"
#include "wsclient.h"

/* ---- row 2: idle traffic, broker against legacy ---- */

struct idle_count {
	long long msgs[4], bytes_in, bytes_out; /* 0 ping, 1 HELLO, 2 other */
};

static void idle_msg(struct fleet *f, struct fleet_conn *c, const struct fleet_msg *m)
{
	struct idle_count *ic = f->user;
	(void)c;
	/* server frames: 2-byte header (+2 from 126 bytes on), unmasked */
	long long in = 2 + (long long)m->len + (m->len >= 126 ? 2 : 0);
	ic->bytes_in += in;
	if (strcmp(m->type, "PING") == 0) {
		ic->msgs[0]++;
		ic->bytes_out += 6 + (long long)m->len; /* the pong, masked */
	} else if (strcmp(m->type, "HELLO") == 0) {
		ic->msgs[1]++;
	} else {
		ic->msgs[2]++;
	}
}

/* The window of row 2's CPU figures: whole ping intervals (15 s), four of
 * them (one in a quick run), so that every connection is pinged the same
 * number of times in it whatever the phase of the sweeps. */
static int idle_cpu_window(const struct bench_opts *o)
{
	return o->idle_sec >= 60 ? 60 : 15;
}

/* Clients that ping on their own, every 10 s as libexecclient does: each
 * tick (100 ms) a hundredth of the connections pings. */
static int g_ping_turn;
static long long g_client_pings;

static void client_ping_tick(struct fleet *f)
{
	for (int i = g_ping_turn; i < f->n; i += 100)
		g_client_pings += !f->c[i].dead && wsc_send_ping(f->c[i].tc->ws, "c", 1) == 0;
	g_ping_turn = (g_ping_turn + 1) % 100;
}

struct poller_arg {
	int port, clients, sec;
	long long requests;
	struct http_count bytes;
	int statuses[600];
};

/* clients legacy pollers, each GET /token once a second, staggered. */
static void *poller_thread(void *p)
{
	struct poller_arg *a = p;
	long long t0 = bu_now_ns(), step = 1000000000LL / a->clients;
	for (long long i = 0;; i++) {
		long long at = t0 + i * step;
		if (at >= t0 + (long long)a->sec * 1000000000LL)
			break;
		long long d = at - bu_now_ns();
		if (d > 0)
			usleep((useconds_t)(d / 1000));
		int st = http_raw(
			a->port,
			"GET /token/idle HTTP/1.1\r\nHost: execserver\r\nConnection: close\r\n\r\n",
			&a->bytes, NULL, 0);
		a->requests++;
		a->statuses[st > 0 && st < 600 ? st : 0]++;
	}
	return NULL;
}

static long long segment_bytes(int pid)
{
	char path[64], line[512];
	snprintf(path, sizeof path, "/proc/%d/maps", pid);
	FILE *f = fopen(path, "r");
	long long total = 0;
	while (f && fgets(line, sizeof line, f)) {
		unsigned long long a, b;
		if (strstr(line, "/execserver-") && sscanf(line, "%llx-%llx", &a, &b) == 2)
			total += (long long)(b - a);
	}
	if (f)
		fclose(f);
	return total;
}

static const char *idle_body(int max_conns, int max_wants)
{
	static char b[1024];
	snprintf(b, sizeof b,
		 "maxConnections: %d\n"
		 "maxWants: %d\n"
		 "maxWantsPerConnection: %d\n"
		 "waitgroups:\n"
		 "  idle: {processes: 1}\n"
		 "services:\n"
		 "  idle:\n"
		 "    waitgroup: idle\n"
		 "    commands:\n"
		 "      sleep: {prog: /bin/sleep}\n",
		 max_conns, max_wants, max_wants < 4096 ? max_wants : 4096);
	return b;
}

/* The client whose job holds the slot: read (so that it answers pings)
 * while the window runs; a connection that stops answering is closed
 * after pingTimeoutSec, and the changed client count re-sends HELLO to
 * every other connection. */
static struct tclient *g_holder;

static void holder_tick(struct fleet *f)
{
	struct wsc_msg m;
	(void)f;
	while (g_holder && wsc_recv(g_holder->ws, 0, &m) > 0)
		wsc_msg_free(&m);
}

/* Kernel memory of TCP buffers (pages, /proc/net/sockstat "TCP: ... mem"). */
static long tcp_mem_pages(void)
{
	FILE *f = fopen("/proc/net/sockstat", "r");
	char line[256];
	long pages = -1;
	while (f && fgets(line, sizeof line, f)) {
		const char *m = strstr(line, " mem ");
		if (strncmp(line, "TCP:", 4) == 0 && m)
			pages = atol(m + 5);
	}
	if (f)
		fclose(f);
	return pages;
}

/* One client process of the large row: its share of the connections from
 * a source address of its own, answering pings until told to stop.  Pipes:
 * cmd (from the parent: 'w' opens the window, 'q' ends it) and rep (to the
 * parent: 'c' once connected, then the pings answered in the window, the
 * other messages that came in it and the connections still open). */
struct idle_child {
	pid_t pid;
	int cmd, rep;
};

static int g_cmd; /* the child's end of cmd */

static void child_tick(struct fleet *f)
{
	char c;
	while (read(g_cmd, &c, 1) == 1) {
		struct idle_count *ic = f->user;
		if (c == 'w') {
			memset(ic->msgs, 0, sizeof ic->msgs);
		} else {
			f->stop = 1;
		}
	}
}

static struct idle_child idle_spawn(int port, int n, const char *source)
{
	int cmd[2], rep[2];
	struct idle_child ch = { -1, -1, -1 };
	if (pipe(cmd) != 0 || pipe(rep) != 0)
		return ch;
	fflush(NULL);
	ch.pid = fork();
	if (ch.pid == 0) {
		close(cmd[1]);
		close(rep[0]);
		fcntl(cmd[0], F_SETFL, O_NONBLOCK);
		g_cmd = cmd[0];
		struct fleet *f = fleet_open_from(port, n, "c", 100, 1, source);
		struct idle_count ic = { 0 };
		f->user = &ic;
		f->on_msg = idle_msg;
		if (write(rep[1], "c", 1) != 1)
			_exit(1);
		fleet_run(f, bu_now_ns() + 600000000000LL, 100, child_tick);
		long long counts[3] = { ic.msgs[0], ic.msgs[1] + ic.msgs[2], 0 };
		for (int i = 0; i < f->n; i++)
			counts[2] += !f->c[i].dead;
		if (write(rep[1], counts, sizeof counts) != (ssize_t)sizeof counts)
			_exit(1);
		_exit(0); /* the kernel closes the connections */
	}
	close(cmd[0]);
	close(rep[1]);
	ch.cmd = cmd[1];
	ch.rep = rep[0];
	return ch;
}

/* Row 2, 100,000 idle connections: the daemon's memory per connection and
 * its CPU over whole ping intervals.  Every process here may hold at most
 * RLIMIT_NOFILE descriptors, so the client ends are spread over processes
 * (each from its own source address) and, when the limit is below what one
 * handler would need, over more handlers. */
static void idle_big(const struct bench_opts *o)
{
	int n = o->idle_big;
	if (n <= 0)
		return;
	FILE *md = bu_out(o->out, "row2b"), *sm = bu_out(o->out, "summary-2b");
	long nofile = bu_nofile_at_least(n + 1000);
	/* client processes of at most 15,000 connections (and under the
	 * limit); handlers enough for 1.3 times their even share */
	int per_proc = nofile - 1000 < 15000 ? (int)nofile - 1000 : 15000;
	int procs = (n + per_proc - 1) / per_proc;
	int handlers = o->handlers ? o->handlers : (int)sysconf(_SC_NPROCESSORS_ONLN);
	while ((double)n * 1.3 / handlers > (double)(nofile - 500) && handlers < 64)
		handlers++;
	if (procs > 250) {
		fprintf(md,
			"| %d idle connections | not measured: descriptor limit %ld |\n|---|---|\n",
			n, nofile);
		fclose(md);
		fclose(sm);
		return;
	}
	struct es_daemon d;
	bu_start(&d, handlers, idle_body(n + 500, 65536));
	sleep(1);
	long anon0 = bu_daemon_kib(&d, "RssAnon"), tcp0 = tcp_mem_pages();
	long long tc0 = bu_now_ns();
	struct idle_child ch[256];
	for (int p = 0; p < procs; p++) {
		char src[32];
		snprintf(src, sizeof src, "127.0.0.%d", 2 + p);
		ch[p] = idle_spawn(d.port, p < procs - 1 ? per_proc : n - per_proc * (procs - 1),
				   src);
	}
	int connected = 0;
	for (int p = 0; p < procs; p++) {
		char c;
		connected += ch[p].pid > 0 && read(ch[p].rep, &c, 1) == 1 && c == 'c';
	}
	double connect_sec = (double)(bu_now_ns() - tc0) / 1e9;
	sleep(3);
	long anon1 = bu_daemon_kib(&d, "RssAnon"), tcp1 = tcp_mem_pages();
	int win = idle_cpu_window(o);
	for (int p = 0; p < procs; p++)
		if (write(ch[p].cmd, "w", 1) != 1)
			fprintf(stderr, "esbench: client process %d is gone\n", p);
	long long cpu0 = bu_daemon_cpu_us(&d), t0 = bu_now_ns();
	sleep((unsigned)win);
	double el = (double)(bu_now_ns() - t0) / 1e9;
	long long cpu = bu_daemon_cpu_us(&d) - cpu0, pings = 0, other = 0, open = 0;
	char spread[256];
	bu_handler_spread(&d, spread, sizeof spread);
	/* every process is told at once, so that their windows end together */
	for (int p = 0; p < procs; p++)
		if (write(ch[p].cmd, "q", 1) != 1)
			fprintf(stderr, "esbench: client process %d is gone\n", p);
	for (int p = 0; p < procs; p++) {
		long long k[3] = { 0, 0, 0 };
		if (read(ch[p].rep, k, sizeof k) == (ssize_t)sizeof k) {
			pings += k[0];
			other += k[1];
			open += k[2];
		}
		waitpid(ch[p].pid, NULL, 0);
		close(ch[p].cmd);
		close(ch[p].rep);
	}
	double pct = 100.0 * (double)cpu / (el * 1e6),
	       per_conn = (double)(anon1 - anon0) * 1024.0 / n;
	fprintf(md, "| %d idle connections (100 client ids), window %.0f s | value |\n|---|---|\n",
		n, el);
	fprintf(md,
		"| execserver CPU (master + handlers, utime+stime) | **%.2f %%** of one CPU (%.0f "
		"ms; "
		"%.1f µs per ping and its pong) |\n",
		pct, (double)cpu / 1000.0, pings ? (double)cpu / (double)pings : 0.0);
	fprintf(md,
		"| pings answered in the window | %lld (one per connection per pingIntervalSec, 15 "
		"s); other messages: %lld; connections still open at the end: %lld |\n",
		pings, other, open);
	fprintf(md,
		"| daemon memory per connection: Δ(RssAnon of master + handlers) / %d (%ld KiB → "
		"%ld KiB) "
		"| **%.0f bytes** |\n",
		n, anon0, anon1, per_conn);
	fprintf(md,
		"| kernel TCP buffers of the machine, both ends (/proc/net/sockstat `mem`) "
		"| %ld → %ld pages |\n",
		tcp0, tcp1);
	fprintf(md,
		"| connecting them (%d client processes side by side, %d connected) | %.1f s |\n",
		procs, connected, connect_sec);
	fprintf(md,
		"\nLimits for this row: `maxConnections: %d` (every other setting is the "
		"default; the client processes answer pings while they connect); `RLIMIT_NOFILE` "
		"%ld for every process (the "
		"hard limit here; raising it needs CAP_SYS_RESOURCE, which this machine's root "
		"lacks), so "
		"the daemon runs %d handlers (holding %s connections) and the client ends come "
		"from %d "
		"processes of at most %d connections, each bound to a source address of its own "
		"(127.0.0.2–127.0.0.%d, `IP_BIND_ADDRESS_NO_PORT`: every source address has the "
		"28,232 "
		"ephemeral ports of net.ipv4.ip_local_port_range).\n",
		n + 500, nofile, handlers, spread, procs, per_proc, 1 + procs);
	fprintf(sm,
		"| 2 | %d idle connections: CPU; daemon memory per connection | (measured; issue "
		"18) "
		"| %.2f %% of one CPU (%.1f µs per ping), %.0f bytes per connection (%d handlers) "
		"|\n",
		n, pct, pings ? (double)cpu / (double)pings : 0.0, per_conn, handlers);
	fclose(md);
	fclose(sm);
	bu_stop(&d);
}

void row_idle(const struct bench_opts *o)
{
	struct es_daemon d;
	FILE *md = bu_out(o->out, "row2");
	bu_raise_nofile();

	/* (a) 100 broker clients with parked wants, 100 legacy pollers for
	 * the same waitgroup, in the same window */
	bu_start(&d, o->handlers, idle_body(2000, 65536));
	struct tclient *holder = tc_connect(d.port, "holder");
	const char *tok = holder ? tc_want_offer(holder, "hold", "idle", 0, 5000) : NULL;
	if (!tok || tc_send(holder,
			    "{\"type\":\"JOB\",\"job_id\":\"hold\",\"token\":\"%s\","
			    "\"job\":{\"command\":\"sleep\",\"args\":[\"3600\"]}}",
			    tok) != 0) {
		fprintf(stderr, "esbench: the holder got no slot\n");
		exit(1);
	}
	struct fleet *f = fleet_open(d.port, 100, "idle", 0, 1);
	for (int i = 0; i < f->n; i++) {
		f->c[i].service = "idle";
		fleet_want(&f->c[i]);
	}
	/* read what connecting caused (HELLO re-sends with the client count)
	 * before the window opens */
	fleet_run(f, bu_now_ns() + 1500000000LL, 0, NULL);
	struct idle_count ic = { 0 };
	f->user = &ic;
	f->on_msg = idle_msg;
	struct poller_arg pa = { .port = d.port, .clients = 100, .sec = o->idle_sec };
	pthread_t th;
	long long cpu0 = bu_daemon_cpu_us(&d), t0 = bu_now_ns();
	pthread_create(&th, NULL, poller_thread, &pa);
	g_holder = holder;
	fleet_run(f, t0 + (long long)o->idle_sec * 1000000000LL, 1000, holder_tick);
	g_holder = NULL;
	pthread_join(th, NULL);
	double el = (double)(bu_now_ns() - t0) / 1e9, per_min = 60.0 / el;
	long long cpu = bu_daemon_cpu_us(&d) - cpu0;
	fprintf(md,
		"| 100 waiting clients, window %.0f s | requests/min | bytes/min (both ways) | "
		"what |\n"
		"|---|---|---|---|\n",
		el);
	fprintf(md,
		"| broker (parked WANTs) | %.0f pings + %.0f pongs | %.0f | %lld pings, %lld "
		"HELLOs, %lld other messages "
		"from the server; nothing from the clients but pongs |\n",
		ic.msgs[0] * per_min, ic.msgs[0] * per_min, (ic.bytes_in + ic.bytes_out) * per_min,
		ic.msgs[0], ic.msgs[1], ic.msgs[2]);
	fprintf(md,
		"| legacy (`GET /token` every 1 s) | %.0f | %.0f | %d answers 503, %d answers 200 "
		"|\n",
		pa.requests * per_min, (pa.bytes.tx + pa.bytes.rx) * per_min, pa.statuses[503],
		pa.statuses[200]);
	double ratio = (double)(pa.bytes.tx + pa.bytes.rx) /
		       (double)(ic.bytes_in + ic.bytes_out + 1);
	fprintf(md,
		"\nLegacy / broker bytes: **%.0f×**; messages other than pings and pongs from idle "
		"broker "
		"clients: %lld (target: nothing but pings: %s).  The execserver's CPU in that "
		"window "
		"(pings and the legacy polls together): %.2f %% of one CPU.\n\n",
		ratio, ic.msgs[1] + ic.msgs[2], ic.msgs[1] + ic.msgs[2] == 0 ? "met" : "missed",
		100.0 * (double)cpu / (el * 1e6));
	fleet_close(f);
	tc_close(holder);
	bu_stop(&d);
	FILE *sm = bu_out(o->out, "summary-2");
	long long other = ic.msgs[1] + ic.msgs[2];

	/* (b) 10,000 idle connections: CPU and memory */
	int n = o->idle_conns;
	bu_start(&d, o->handlers, idle_body(n + 500, 65536));
	sleep(1);
	long anon0 = bu_daemon_kib(&d, "RssAnon");
	long long tc0 = bu_now_ns();
	f = fleet_open(d.port, n, "c", 100, 1);
	double connect_sec = (double)(bu_now_ns() - tc0) / 1e9;
	struct idle_count ic2 = { 0 };
	f->user = &ic2;
	f->on_msg = idle_msg;
	fleet_run(f, bu_now_ns() + 3000000000LL, 0, NULL);
	long anon1 = bu_daemon_kib(&d, "RssAnon");
	int win = idle_cpu_window(o);
	memset(&ic2, 0, sizeof ic2);
	cpu0 = bu_daemon_cpu_us(&d);
	t0 = bu_now_ns();
	fleet_run(f, t0 + (long long)win * 1000000000LL, 0, NULL);
	el = (double)(bu_now_ns() - t0) / 1e9;
	cpu = bu_daemon_cpu_us(&d) - cpu0;
	double pct = 100.0 * (double)cpu / (el * 1e6);
	double per_ping = ic2.msgs[0] ? (double)cpu / (double)ic2.msgs[0] : 0.0;
	double per_conn = (double)(anon1 - anon0) * 1024.0 / n;
	fprintf(md,
		"| %d idle connections (100 client ids), window %.0f s | value | target "
		"|\n|---|---|---|\n",
		n, el);
	fprintf(md,
		"| execserver CPU (master + handlers, utime+stime) | **%.2f %%** of one CPU (%.0f "
		"ms) | < 1 %%: %s |\n",
		pct, cpu / 1000.0, pct < 1 ? "met" : "missed");
	fprintf(md, "| execserver CPU per ping and its pong | %.1f µs | |\n", per_ping);
	fprintf(md,
		"| pings answered in the window; other messages | %lld; %lld | one per connection "
		"per pingIntervalSec (15 s); none |\n",
		ic2.msgs[0], ic2.msgs[1] + ic2.msgs[2]);
	fprintf(md, "| connecting them (one client thread, in series) | %.1f s | |\n", connect_sec);

	/* the same connections, their clients pinging every 10 s: the server
	 * then has no ping of its own to send (protocol.md, "Liveness") */
	fleet_run(f, bu_now_ns() + 15000000000LL, 100, client_ping_tick);
	memset(&ic2, 0, sizeof ic2);
	g_client_pings = 0;
	cpu0 = bu_daemon_cpu_us(&d);
	t0 = bu_now_ns();
	fleet_run(f, t0 + (long long)win * 1000000000LL, 100, client_ping_tick);
	el = (double)(bu_now_ns() - t0) / 1e9;
	cpu = bu_daemon_cpu_us(&d) - cpu0;
	long long client_pings = g_client_pings ? g_client_pings : 1;
	fprintf(md,
		"| the same, each client pinging every 10 s (as libexecclient does): execserver "
		"CPU | %.2f %% of one CPU (%.1f µs per client ping and its pong); server pings "
		"in the window: %lld | |\n",
		100.0 * (double)cpu / (el * 1e6), (double)cpu / (double)client_pings, ic2.msgs[0]);
	fclose(md);
	fprintf(sm,
		"| 2 | idle: 100 clients with parked wants; CPU with %d idle connections | nothing "
		"but pings; < 1 %% CPU "
		"| broker %.0f bytes/min (pings and pongs only: %s), legacy %.0f bytes/min "
		"(%.0f×); CPU %.2f %% (%.1f µs per ping) — **%s** |\n",
		n, (ic.bytes_in + ic.bytes_out) * per_min, other ? "no" : "yes",
		(pa.bytes.tx + pa.bytes.rx) * per_min, ratio, pct, per_ping,
		!other && pct < 1 ? "met" : "missed");
	fclose(sm);

	md = bu_out(o->out, "row5a");
	fprintf(md, "| memory | value | target |\n|---|---|---|\n");
	fprintf(md,
		"| per idle connection: Δ(sum of RssAnon of master + handlers) / %d connections "
		"(%ld KiB → %ld KiB) | **%.0f bytes** | ≤ 8 KiB: %s |\n",
		n, anon0, anon1, per_conn, per_conn <= 8192 ? "met" : "missed");
	fleet_close(f);
	bu_stop(&d);

	/* the segment: its size with 1,000 and with 101,000 wants */
	long long seg[2];
	int wants[2] = { 1000, 101000 };
	for (int i = 0; i < 2; i++) {
		bu_start(&d, 1, idle_body(2000, wants[i]));
		seg[i] = segment_bytes(d.pid);
		bu_stop(&d);
	}
	double per_want = (double)(seg[1] - seg[0]) / (double)(wants[1] - wants[0]);
	fprintf(md,
		"| per want: Δ(shared segment size) / Δ(maxWants) (%lld bytes at maxWants %d, %lld "
		"at %d; "
		"the segment is sized for maxWants at start) | **%.0f bytes** | ≤ 256 bytes: %s "
		"|\n",
		seg[0], wants[0], seg[1], wants[1], per_want, per_want <= 256 ? "met" : "missed");
	fclose(md);
	sm = bu_out(o->out, "summary-5a");
	fprintf(sm,
		"| 5 | memory per idle connection; per want (segment) | ≤ 8 KiB; ≤ 256 bytes | "
		"%.0f bytes; %.0f bytes — **%s** |\n",
		per_conn, per_want, per_conn <= 8192 && per_want <= 256 ? "met" : "missed");
	fclose(sm);
	idle_big(o);
}

/* ---- row 6: streaming ---- */

static double curl_rate(int port, long long bytes)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd,
		 "curl -sS http://127.0.0.1:%d/in/%lld | curl -sS -T - -o /dev/null "
		 "http://127.0.0.1:%d/out/c",
		 port, bytes, port);
	long long t0 = bu_now_ns();
	if (system(cmd) != 0)
		fprintf(stderr, "esbench: curl failed\n");
	return (double)bytes / 1e6 / ((double)(bu_now_ns() - t0) / 1e9);
}

void row_stream(const struct bench_opts *o)
{
	struct es_daemon d;
	bu_start(&d, o->handlers,
		 "waitgroups:\n  s: {processes: 1}\nservices:\n  s:\n    waitgroup: s\n"
		 "    commands:\n      cat: {prog: /bin/cat}\n");
	struct http_sink sink;
	if (http_sink_start(&sink) < 0) {
		fprintf(stderr, "esbench: no sink\n");
		exit(1);
	}
	struct tclient *c = tc_connect(d.port, "stream");
	double rb[16], rc[16];
	char job[512];
	for (int i = 0; i < o->repeats; i++) {
		snprintf(job, sizeof job,
			 "{\"command\":\"cat\",\"stdin\":\"http://127.0.0.1:%d/in/%lld\","
			 "\"stdout\":\"http://127.0.0.1:%d/out/e%d\"}",
			 sink.port, o->stream_bytes, sink.port, i);
		char id[16];
		snprintf(id, sizeof id, "s%d", i);
		long long t0 = bu_now_ns();
		struct json_object *done = tc_run_job(c, id, "s", job, 600000);
		double el = (double)(bu_now_ns() - t0) / 1e9;
		struct json_object *rec = tc_receipt(done);
		if (!done || tc_int(rec, "exit_code") != 0 ||
		    json_object_object_get_ex(rec, "error", NULL))
			fprintf(stderr, "esbench: stream job failed: %s\n",
				done ? json_object_to_json_string(done) : "(no DONE)");
		if (done)
			json_object_put(done);
		rb[i] = (double)o->stream_bytes / 1e6 / el;
		rc[i] = curl_rate(sink.port, o->stream_bytes);
		fprintf(stderr, "row6: execserver %.0f MB/s, curl %.0f MB/s\n", rb[i], rc[i]);
	}
	tc_close(c);
	http_sink_stop(&sink);
	bu_stop(&d);
	struct spread b = spread_of(rb, o->repeats), cu = spread_of(rc, o->repeats);
	FILE *md = bu_out(o->out, "row6");
	fprintf(md,
		"| %.2f GiB, %d repeats each, alternating | MB/s median | min–max "
		"|\n|---|---|---|\n",
		(double)o->stream_bytes / (1 << 30), o->repeats);
	fprintf(md,
		"| execserver: GET stdin URL → `cat` → chunked PUT to the stdout URL (JOB → DONE) "
		"| **%.0f** | %.0f–%.0f |\n",
		b.med, b.min, b.max);
	fprintf(md,
		"| curl alone: `curl GET \\| curl -T - PUT`, same source and sink | %.0f | "
		"%.0f–%.0f |\n",
		cu.med, cu.min, cu.max);
	fprintf(md, "\nexecserver / curl: **%.0f %%** (target ≥ 50 %%: %s).\n",
		100 * b.med / cu.med, b.med / cu.med >= 0.5 ? "met" : "missed");
	fclose(md);
	md = bu_out(o->out, "summary-6");
	fprintf(md,
		"| 6 | streaming stdin → cat → stdout, %.0f MiB | ≥ 50 %% of curl alone | %.0f "
		"against %.0f MB/s: %.0f %% — **%s** |\n",
		(double)o->stream_bytes / (1 << 20), b.med, cu.med, 100 * b.med / cu.med,
		b.med / cu.med >= 0.5 ? "met" : "missed");
	fclose(md);
}

/* ---- the auto-balance row ---- */

#define AB_POOL 4

/* The two services; wg: "" (auto-balance) or the waitgroup line. */
static void ab_services(char *b, size_t len, const char *wg)
{
	snprintf(b, len,
		 "services:\n"
		 "  heavy:\n%s"
		 "    commands:\n      sleep: {prog: /bin/sleep}\n"
		 "  light:\n%s"
		 "    commands:\n      true: {prog: /bin/true}\n",
		 wg, wg);
}

/* Light jobs during a flood of heavy ones (8 wants of `sleep 1`):
 * WANT -> OFFER of each light job, at random moments. */
static void ab_measure(int port, int rounds, struct samples *w)
{
	struct fleet *fl = fleet_open(port, 1, "flood", 0, 0);
	bench_flood(fl, 8, "heavy", "{\"command\":\"sleep\",\"args\":[\"1\"]}");
	fleet_run(fl, bu_now_ns() + 700000000LL, 0, NULL);
	struct tclient *l = tc_connect(port, "light");
	unsigned seed = 7;
	for (int r = 0; r < rounds && l; r++) {
		fleet_run(fl, bu_now_ns() + (100 + rand_r(&seed) % 400) * 1000000LL, 0, NULL);
		char id[16];
		snprintf(id, sizeof id, "l%d", r);
		long long t = bu_now_ns();
		tc_send(l, "{\"type\":\"WANT\",\"job_id\":\"%s\",\"service\":\"light\"}", id);
		struct json_object *offer = fleet_expect_on(fl, l, "OFFER", t + 10000000000LL);
		if (!offer)
			break;
		bs_add(w, (double)(bu_now_ns() - t) / 1000.0);
		tc_send(l,
			"{\"type\":\"JOB\",\"job_id\":\"%s\",\"token\":\"%s\",\"job\":{\"command\":"
			"\"true\"}}",
			id, tc_str(offer, "token"));
		json_object_put(offer);
		struct json_object *done = fleet_expect_on(fl, l, "DONE", t + 10000000000LL);
		if (done)
			json_object_put(done);
	}
	tc_close(l);
	fleet_close(fl);
}

void row_autobalance(const struct bench_opts *o)
{
	char body[2048], svc[1024];
	struct samples wa = { 0 }, wf = { 0 };
	const int rounds = 20;

	/* auto-balance: one pool of 4, reserve 1; the classes learned first */
	ab_services(svc, sizeof svc, "");
	snprintf(body, sizeof body,
		 "cpus: %d\nfastReserve: 1\nheavyThreshold: 500ms\nminSamples: 2\n%s", AB_POOL,
		 svc);
	struct es_daemon d;
	bu_start(&d, o->handlers, body);
	struct tclient *c = tc_connect(d.port, "warm");
	for (int i = 0; i < 2; i++) {
		char id[16];
		snprintf(id, sizeof id, "w%d", i);
		struct json_object *x = tc_run_job(
			c, id, "heavy", "{\"command\":\"sleep\",\"args\":[\"1\"]}", 5000);
		if (x)
			json_object_put(x);
		snprintf(id, sizeof id, "v%d", i);
		x = tc_run_job(c, id, "light", "{\"command\":\"true\"}", 5000);
		if (x)
			json_object_put(x);
	}
	tc_close(c);
	ab_measure(d.port, rounds, &wa);
	bu_stop(&d);

	/* one fixed waitgroup of the same size */
	ab_services(svc, sizeof svc, "    waitgroup: pool\n");
	snprintf(body, sizeof body, "waitgroups:\n  pool: {processes: %d}\n%s", AB_POOL, svc);
	bu_start(&d, o->handlers, body);
	ab_measure(d.port, rounds, &wf);
	bu_stop(&d);

	char path[512];
	bs_write(&wa, bu_path(path, sizeof path, o->out, "ab_auto.dat"));
	bs_write(&wf, bu_path(path, sizeof path, o->out, "ab_fixed.dat"));
	FILE *md = bu_out(o->out, "row9");
	fprintf(md,
		"| light job WANT → OFFER during a flood of heavy jobs (8 wants of `sleep 1`), "
		"pool of %d "
		"| samples | p50 | p99 | max |\n|---|---|---|---|---|\n",
		AB_POOL);
	fprintf(md,
		"| auto-balance (`cpus: 4`, `fastReserve: 1`, classes learned) | %zu | **%.2f ms** "
		"| %.2f ms | %.2f ms |\n",
		wa.n, bs_pct(&wa, 0.5) / 1000, bs_pct(&wa, 0.99) / 1000, bs_max(&wa) / 1000);
	fprintf(md,
		"| one fixed waitgroup of 4 (`waitgroups: {pool: {processes: 4}}`) | %zu | **%.1f "
		"ms** | %.1f ms | %.1f ms |\n",
		wf.n, bs_pct(&wf, 0.5) / 1000, bs_pct(&wf, 0.99) / 1000, bs_max(&wf) / 1000);
	fprintf(md, "\nFixed / auto-balance at the median: **%.0f×**.\n",
		bs_pct(&wf, 0.5) / bs_pct(&wa, 0.5));
	fclose(md);
	md = bu_out(o->out, "summary-9");
	fprintf(md,
		"| + | auto-balance: light job start during a heavy flood, against one fixed "
		"waitgroup of 4 | (issue 9: a light job starts at once) "
		"| p50 %.2f ms against %.1f ms (%.0f×), max %.2f ms against %.1f ms |\n",
		bs_pct(&wa, 0.5) / 1000, bs_pct(&wf, 0.5) / 1000,
		bs_pct(&wf, 0.5) / bs_pct(&wa, 0.5), bs_max(&wa) / 1000, bs_max(&wf) / 1000);
	fclose(md);
	bs_free(&wa);
	bs_free(&wf);
}
