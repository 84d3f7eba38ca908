/*
 * test_transfer.c - the transfer layer (src/job/transfer.c) against the
 * pipe server (tests/lib/pipe_server.c) on loopback: streams through pipes
 * with back-pressure both ways, files, failures (status, dropped and
 * stalled connections, refused connections, protocols, redirects), abort,
 * pause/resume corner cases and many concurrent transfers.
 *
 * Invariants checked throughout: done exactly once per transfer that was
 * not aborted, never from inside a transfer_* call; nothing after abort;
 * no transfer object left once the loop has run (transfer_loop_count).
 *
 * TRANSFER_TEST_MIB sets the size of the big streams (default 100), e.g. 4
 * under valgrind.  Throughput and RSS figures are printed as "figure:".
 * Exit status: 0 when every test passed, 1 otherwise.
 */
#include "autoconfig.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <curl/curl.h>
#include <event2/event.h>
#include <openssl/evp.h>

#include "harness.h"
#include "job/transfer.h"
#include "pipe_server.h"
#include "suite.h"
#include "transfer_files.h"

#define MiB (1024ULL * 1024ULL)

/* RSS says nothing under AddressSanitizer (quarantine, shadow memory). */
#ifdef __SANITIZE_ADDRESS__
#define RSS_LIMIT_KIB LONG_MAX
#else
#define RSS_LIMIT_KIB (8 * 1024L)
#endif

static struct pipe_server srv;
static uint64_t big_bytes = 100 * MiB;
static int in_api; /* set around transfer_* calls: done must not run then */

static uint64_t now_ms(void)
{
	return (uint64_t)harness_now_ms();
}

/* This process's resident set (KiB). */
static long rss_kib(void)
{
	return harness_proc_kib(getpid(), "VmRSS");
}

/* ---- fixtures ------------------------------------------------------------ */

struct fixture {
	struct event_base *base;
	struct transfer_loop *loop;
	struct event *tick;
};

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
}

static int fx_open(struct fixture *fx, const struct transfer_options *o)
{
	struct timeval tv = { 0, 20000 };

	fx->base = event_base_new();
	fx->loop = fx->base ? transfer_loop_new(fx->base) : NULL;
	if (fx->loop == NULL)
		return -1;
	if (o && transfer_loop_set_defaults(fx->loop, o) != 0)
		return -1;
	/* keeps EVLOOP_ONCE from blocking forever while nothing is pending */
	fx->tick = event_new(fx->base, -1, EV_PERSIST, on_tick, NULL);
	event_add(fx->tick, &tv);
	return 0;
}

/* Frees the loop; checks that nothing is left. */
static void fx_close(struct fixture *fx)
{
	if (fx->loop) {
		CU_ASSERT_EQUAL(transfer_loop_count(fx->loop), 0);
		transfer_loop_free(fx->loop);
	}
	if (fx->tick)
		event_free(fx->tick);
	if (fx->base)
		event_base_free(fx->base);
	memset(fx, 0, sizeof *fx);
}

/* Runs the loop until *flag >= want or timeout; returns 0 or -1. */
static int run_until(struct fixture *fx, const int *flag, int want, int timeout_ms)
{
	uint64_t end = now_ms() + (uint64_t)timeout_ms;

	while (*flag < want) {
		if (now_ms() > end)
			return -1;
		event_base_loop(fx->base, EVLOOP_ONCE);
	}
	return 0;
}

static void run_for(struct fixture *fx, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	while (now_ms() < end)
		event_base_loop(fx->base, EVLOOP_ONCE);
}

/* ---- completion record ---------------------------------------------------- */

struct rec {
	int done;
	struct transfer_result r;
	char error[512];
	int from_api; /* done ran inside a transfer_* call */
};

static void rec_done(void *arg, const struct transfer_result *r)
{
	struct rec *c = arg;

	c->done++;
	if (in_api)
		c->from_api = 1;
	c->r = *r;
	snprintf(c->error, sizeof c->error, "%s", r->error ? r->error : "(null)");
	c->r.error = c->error;
}

/* ---- a sink that hashes, with knobs --------------------------------------- */

struct hsink {
	struct rec rec;
	EVP_MD_CTX *md;
	uint64_t n;
	unsigned calls, calls_after_abort;
	struct transfer *t;
	struct fixture *fx;
	size_t max_take;     /* take at most this per call (0: all) */
	unsigned zero_every; /* every Nth call takes nothing ... */
	int resume_inside;   /* ... and resumes from inside the call */
	struct event *resume_ev;
	int refuse_ms;     /* the first call takes nothing, resumes after */
	uint64_t abort_at; /* abort from inside once n >= this */
	uint64_t fail_at;  /* fail (sink error) once n >= this */
	int aborted;
};

static void hs_resume(evutil_socket_t fd, short what, void *arg)
{
	struct hsink *h = arg;

	/* a resume scheduled before the sink aborted or the transfer ended
	 * must not touch the handle: it is gone (freed) by then */
	if (h->aborted || h->rec.done)
		return;
	transfer_resume(h->t);
}

static size_t hs_write(void *arg, const char *data, size_t len)
{
	struct hsink *h = arg;

	if (h->aborted) {
		h->calls_after_abort++;
		return 0;
	}
	h->calls++;
	if (h->refuse_ms && h->calls == 1) {
		struct timeval tv = { h->refuse_ms / 1000, (h->refuse_ms % 1000) * 1000 };

		evtimer_add(h->resume_ev, &tv);
		return 0;
	}
	if (h->zero_every && h->calls % h->zero_every == 0) {
		if (h->resume_inside) {
			transfer_resume(h->t);
		} else {
			struct timeval tv = { 0, 1000 };

			evtimer_add(h->resume_ev, &tv);
		}
		return 0;
	}
	if (h->fail_at && h->n >= h->fail_at) {
		transfer_set_error(h->t, "disk full (test)");
		return TRANSFER_SINK_ERROR;
	}
	if (h->max_take && len > h->max_take) {
		len = h->max_take;
		/* a partial take: the sink must resume the transfer */
		if (h->resume_inside) {
			transfer_resume(h->t);
		} else {
			struct timeval tv = { 0, 0 };

			evtimer_add(h->resume_ev, &tv);
		}
	}
	EVP_DigestUpdate(h->md, data, len);
	h->n += len;
	if (h->abort_at && h->n >= h->abort_at) {
		h->aborted = 1;
		transfer_abort(h->t);
	}
	return len;
}

static void hs_done(void *arg, const struct transfer_result *r)
{
	rec_done(&((struct hsink *)arg)->rec, r);
}

static void hs_init(struct hsink *h, struct fixture *fx)
{
	memset(h, 0, sizeof *h);
	h->fx = fx;
	h->md = EVP_MD_CTX_new();
	EVP_DigestInit_ex(h->md, EVP_sha256(), NULL);
	h->resume_ev = evtimer_new(fx->base, hs_resume, h);
}

static void hs_hex(struct hsink *h, char hex[65])
{
	unsigned char md[32];
	unsigned int len = 0;

	EVP_DigestFinal_ex(h->md, md, &len);
	pipe_sha256_hex(md, hex);
}

static void hs_free(struct hsink *h)
{
	EVP_MD_CTX_free(h->md);
	event_free(h->resume_ev);
}

static struct transfer *hs_get(struct fixture *fx, struct hsink *h, const char *url)
{
	static const struct transfer_sink sink = { hs_write, hs_done };

	in_api = 1;
	h->t = transfer_get(fx->loop, url, &sink, h);
	in_api = 0;
	return h->t;
}

/* ---- a source of pseudo-random bytes, with knobs -------------------------- */

struct msrc {
	struct rec rec;
	uint64_t seed, size, off;
	struct transfer *t;
	struct event *resume_ev;
	int pause_ms; /* the first read pauses, resumes after */
	unsigned calls;
	int short_eof; /* EOF at size/2 (for a Content-Length PUT) */
	int fail;      /* TRANSFER_ERROR at size/2 */
};

static void ms_resume(evutil_socket_t fd, short what, void *arg)
{
	struct msrc *m = arg;

	transfer_resume(m->t);
}

static ssize_t ms_read(void *arg, char *buf, size_t cap)
{
	struct msrc *m = arg;
	uint64_t end = m->short_eof || m->fail ? m->size / 2 : m->size;
	size_t n;

	m->calls++;
	if (m->pause_ms && m->calls == 1) {
		struct timeval tv = { m->pause_ms / 1000, (m->pause_ms % 1000) * 1000 };

		evtimer_add(m->resume_ev, &tv);
		return TRANSFER_PAUSE;
	}
	if (m->off >= end) {
		if (m->fail) {
			transfer_set_error(m->t, "source broke (test)");
			return TRANSFER_ERROR;
		}
		return 0;
	}
	n = end - m->off < cap ? (size_t)(end - m->off) : cap;
	pipe_random_fill(m->seed, m->off, buf, n);
	m->off += n;
	return (ssize_t)n;
}

static void ms_done(void *arg, const struct transfer_result *r)
{
	rec_done(&((struct msrc *)arg)->rec, r);
}

static void ms_init(struct msrc *m, struct fixture *fx, uint64_t seed, uint64_t size)
{
	memset(m, 0, sizeof *m);
	m->seed = seed;
	m->size = size;
	m->resume_ev = evtimer_new(fx->base, ms_resume, m);
}

static struct transfer *ms_put(struct fixture *fx, struct msrc *m, const char *url, int64_t size)
{
	static const struct transfer_source src = { ms_read, ms_done };

	in_api = 1;
	m->t = transfer_put(fx->loop, url, &src, m, size);
	in_api = 0;
	return m->t;
}

/* ---- pipe consumer / producer for the fd helpers ---------------------------- */

struct consumer {
	int fd;
	EVP_MD_CTX *md;
	uint64_t n;
	size_t burst; /* bytes per tick (slow mode) */
	struct event *ev;
	long rss_max;
	int eof;
	char buf[256 * 1024];
};

static void consume(struct consumer *c, size_t budget)
{
	while (budget > 0) {
		size_t want = budget < sizeof c->buf ? budget : sizeof c->buf;
		ssize_t r = read(c->fd, c->buf, want);

		if (r > 0) {
			EVP_DigestUpdate(c->md, c->buf, (size_t)r);
			c->n += (uint64_t)r;
			budget -= (size_t)r;
			continue;
		}
		if (r == 0)
			c->eof = 1;
		break;
	}
}

static void consumer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct consumer *c = arg;
	long rss;

	consume(c, c->burst ? c->burst : SIZE_MAX);
	rss = rss_kib();
	if (rss > c->rss_max)
		c->rss_max = rss;
}

struct producer {
	int fd;
	uint64_t seed, size, off;
	struct event *ev;
	unsigned blocked;
	size_t have, used; /* buf[used..have) is generated, not yet written */
	char buf[256 * 1024];
};

static void producer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct producer *p = arg;

	while (p->off < p->size) {
		ssize_t w;

		if (p->used == p->have) {
			uint64_t left = p->size - p->off;

			p->have = left < sizeof p->buf ? (size_t)left : sizeof p->buf;
			p->used = 0;
			pipe_random_fill(p->seed, p->off, p->buf, p->have);
		}
		w = write(p->fd, p->buf + p->used, p->have - p->used);
		if (w <= 0) {
			p->blocked++;
			return; /* EAGAIN: the event fires again when writable */
		}
		p->used += (size_t)w;
		p->off += (uint64_t)w;
	}
	event_del(p->ev);
	close(p->fd); /* EOF for the upload */
	p->fd = -1;
}

static int nonblocking(int fd)
{
	return fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static double mb_per_s(uint64_t bytes, uint64_t ms)
{
	return ms ? (double)bytes / (double)MiB / ((double)ms / 1000.0) : 0.0;
}

/* ====================================================================== */

/* GET a big stream through a pipe into a consumer that drains it slowly in
 * bursts: back-pressure must keep memory flat. */
static void get_pipe(int slow)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct consumer *c = calloc(1, sizeof *c);
	struct rec rec = { 0 };
	struct pipe_result pr;
	char url[256], want[65], got[65], name[32];
	unsigned char md[32];
	unsigned int mdlen;
	struct timeval tv = { 0, 10000 };
	struct transfer *t;
	int p[2];
	long rss0;
	uint64_t t0;

	CU_ASSERT_FATAL(c != NULL);
	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	snprintf(name, sizeof name, "big-get-%d", slow);
	e.seed = 11 + (uint64_t)slow;
	e.size = big_bytes;
	CU_ASSERT_FATAL(pipe_server_in(&srv, name, &e, url, sizeof url) == 0);
	pipe_random_sha256(e.seed, e.size, want);
	CU_ASSERT_FATAL(pipe(p) == 0);
	nonblocking(p[0]);
	if (slow) /* so that a burst can be larger than the default 64 KiB */
		fcntl(p[0], F_SETPIPE_SZ, 1024 * 1024);
	c->fd = p[0];
	c->md = EVP_MD_CTX_new();
	EVP_DigestInit_ex(c->md, EVP_sha256(), NULL);
	if (slow) {
		c->burst = 512 * 1024; /* ~50 MiB/s at most */
		c->ev = event_new(fx.base, -1, EV_PERSIST, consumer_cb, c);
		event_add(c->ev, &tv);
	} else {
		c->ev = event_new(fx.base, p[0], EV_READ | EV_PERSIST, consumer_cb, c);
		event_add(c->ev, NULL);
	}
	rss0 = rss_kib();
	c->rss_max = rss0;
	t0 = now_ms();
	in_api = 1;
	t = transfer_get_fd(fx.loop, url, p[1], rec_done, &rec);
	in_api = 0;
	CU_ASSERT_FATAL(t != NULL);
	CU_ASSERT_EQUAL(run_until(&fx, &rec.done, 1, 300000), 0);
	close(p[1]);
	while (!c->eof)
		consume(c, SIZE_MAX);
	t0 = now_ms() - t0;
	EVP_DigestFinal_ex(c->md, md, &mdlen);
	pipe_sha256_hex(md, got);
	CU_ASSERT_EQUAL(rec.done, 1);
	CU_ASSERT_FALSE(rec.from_api);
	CU_ASSERT_TRUE(rec.r.ok);
	CU_ASSERT_EQUAL(rec.r.http_status, 200);
	CU_ASSERT_EQUAL(rec.r.curl_code, CURLE_OK);
	CU_ASSERT_STRING_EQUAL(rec.error, "");
	CU_ASSERT_EQUAL(rec.r.bytes, big_bytes);
	CU_ASSERT_EQUAL(c->n, big_bytes);
	CU_ASSERT_STRING_EQUAL(got, want);
	CU_ASSERT_TRUE(rec.r.pauses > 0);
	CU_ASSERT_TRUE(c->rss_max - rss0 < RSS_LIMIT_KIB);
	CU_ASSERT_EQUAL(pipe_server_result(&srv, name, &pr), 0);
	CU_ASSERT_EQUAL(pr.requests, 1);
	printf("\n    figure: GET %llu MiB via pipe, %s consumer: %.1f MiB/s, %u pauses, "
	       "RSS growth %ld KiB ",
	       (unsigned long long)(big_bytes / MiB), slow ? "slow (512 KiB/10 ms)" : "fast",
	       mb_per_s(big_bytes, t0), rec.r.pauses, c->rss_max - rss0);
	event_free(c->ev);
	EVP_MD_CTX_free(c->md);
	close(p[0]);
	free(c);
	fx_close(&fx);
}

static void test_get_pipe_slow(void)
{
	get_pipe(1);
}
static void test_get_pipe_fast(void)
{
	get_pipe(0);
}

/* A chunked PUT of a big stream read from a pipe that a producer fills;
 * optionally into a slow (rate limited) endpoint. */
static void put_pipe(uint64_t size, uint64_t rate)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct producer *pd = calloc(1, sizeof *pd);
	struct rec rec = { 0 };
	struct pipe_result pr;
	char url[256], want[65], name[32];
	struct transfer *t;
	int p[2];
	long rss0, rss1;
	uint64_t t0;

	CU_ASSERT_FATAL(pd != NULL);
	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	snprintf(name, sizeof name, "big-put-%llu", (unsigned long long)rate);
	e.rate = rate;
	CU_ASSERT_FATAL(pipe_server_out(&srv, name, &e, url, sizeof url) == 0);
	CU_ASSERT_FATAL(pipe(p) == 0);
	nonblocking(p[1]);
	pd->fd = p[1];
	pd->seed = 21;
	pd->size = size;
	pipe_random_sha256(pd->seed, size, want);
	pd->ev = event_new(fx.base, p[1], EV_WRITE | EV_PERSIST, producer_cb, pd);
	event_add(pd->ev, NULL);
	rss0 = rss_kib();
	t0 = now_ms();
	in_api = 1;
	t = transfer_put_fd(fx.loop, url, p[0], -1, rec_done, &rec);
	in_api = 0;
	CU_ASSERT_FATAL(t != NULL);
	CU_ASSERT_EQUAL(run_until(&fx, &rec.done, 1, 300000), 0);
	t0 = now_ms() - t0;
	rss1 = rss_kib();
	close(p[0]);
	CU_ASSERT_EQUAL(rec.done, 1);
	CU_ASSERT_FALSE(rec.from_api);
	CU_ASSERT_TRUE(rec.r.ok);
	CU_ASSERT_EQUAL(rec.r.http_status, 200);
	CU_ASSERT_EQUAL(rec.r.bytes, size);
	CU_ASSERT_TRUE(pd->blocked > 0); /* the producer was held back */
	CU_ASSERT_TRUE(rss1 - rss0 < RSS_LIMIT_KIB);
	CU_ASSERT_EQUAL(pipe_server_result(&srv, name, &pr), 0);
	CU_ASSERT_EQUAL(pr.requests, 1);
	CU_ASSERT_EQUAL(pr.length, size);
	CU_ASSERT_STRING_EQUAL(pr.sha256, want);
	CU_ASSERT_TRUE(pr.chunked);
	CU_ASSERT_EQUAL(pr.content_length, -1);
	if (rate)
		CU_ASSERT_TRUE(t0 * rate >= size * 1000 / 2); /* it was held back */
	printf("\n    figure: chunked PUT %llu KiB via pipe%s: %.1f MiB/s, %u source pauses, "
	       "producer blocked %u times, RSS growth %ld KiB ",
	       (unsigned long long)(size / 1024), rate ? " to a rate-limited server" : "",
	       mb_per_s(size, t0), rec.r.pauses, pd->blocked, rss1 - rss0);
	if (pd->fd >= 0)
		close(pd->fd);
	event_free(pd->ev);
	free(pd);
	fx_close(&fx);
}

static void test_put_pipe_chunked(void)
{
	put_pipe(big_bytes, 0);
}
static void test_put_pipe_slow_server(void)
{
	put_pipe(2 * MiB, MiB);
}

static void test_get_404(void)
{
	struct fixture fx;
	struct hsink h;
	char url[256];
	struct pipe_result pr;

	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	hs_init(&h, &fx);
	snprintf(url, sizeof url, "http://127.0.0.1:%d/in/missing-404", srv.port);
	CU_ASSERT_FATAL(hs_get(&fx, &h, url) != NULL);
	CU_ASSERT_EQUAL(h.rec.done, 0); /* never from inside transfer_get */
	CU_ASSERT_EQUAL(run_until(&fx, &h.rec.done, 1, 10000), 0);
	run_for(&fx, 200);
	CU_ASSERT_EQUAL(h.rec.done, 1);
	CU_ASSERT_FALSE(h.rec.from_api);
	CU_ASSERT_FALSE(h.rec.r.ok);
	CU_ASSERT_EQUAL(h.rec.r.http_status, 404);
	CU_ASSERT_EQUAL(h.rec.r.curl_code, CURLE_HTTP_RETURNED_ERROR);
	CU_ASSERT_TRUE(strstr(h.rec.error, "404") != NULL);
	CU_ASSERT_EQUAL(h.calls, 0); /* the error body never reaches the sink */
	CU_ASSERT_EQUAL(h.rec.r.bytes, 0);
	CU_ASSERT_EQUAL(pipe_server_result(&srv, "missing-404", &pr), -1);
	hs_free(&h);
	fx_close(&fx);
}

static void test_put_500(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct msrc m;
	struct pipe_result pr;
	char url[256];

	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	e.status = 500;
	CU_ASSERT_FATAL(pipe_server_out(&srv, "refuse-500", &e, url, sizeof url) == 0);
	ms_init(&m, &fx, 5, 300 * 1024);
	CU_ASSERT_FATAL(ms_put(&fx, &m, url, -1) != NULL);
	CU_ASSERT_EQUAL(run_until(&fx, &m.rec.done, 1, 10000), 0);
	run_for(&fx, 100);
	CU_ASSERT_EQUAL(m.rec.done, 1);
	CU_ASSERT_FALSE(m.rec.from_api);
	CU_ASSERT_FALSE(m.rec.r.ok);
	CU_ASSERT_EQUAL(m.rec.r.http_status, 500);
	CU_ASSERT_TRUE(m.rec.error[0] != '\0');
	CU_ASSERT_EQUAL(pipe_server_result(&srv, "refuse-500", &pr), 0);
	CU_ASSERT_EQUAL(pr.requests, 1);
	CU_ASSERT_EQUAL(pr.length, 300 * 1024);
	event_free(m.resume_ev);
	fx_close(&fx);
}

static void test_put_302(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct msrc m;
	char url[256];

	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	e.status = 302;
	e.location = "http://127.0.0.1:1/elsewhere";
	CU_ASSERT_FATAL(pipe_server_out(&srv, "put-302", &e, url, sizeof url) == 0);
	ms_init(&m, &fx, 6, 1000);
	CU_ASSERT_FATAL(ms_put(&fx, &m, url, 1000) != NULL);
	CU_ASSERT_EQUAL(run_until(&fx, &m.rec.done, 1, 10000), 0);
	CU_ASSERT_EQUAL(m.rec.done, 1);
	CU_ASSERT_FALSE(m.rec.r.ok);
	CU_ASSERT_EQUAL(m.rec.r.http_status, 302);
	CU_ASSERT_EQUAL(m.rec.r.curl_code, CURLE_OK);
	CU_ASSERT_TRUE(strstr(m.rec.error, "redirect") != NULL);
	event_free(m.resume_ev);
	fx_close(&fx);
}

static void test_drop_mid_stream(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct hsink h;
	char url[256];

	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	e.seed = 3;
	e.size = 4 * MiB;
	e.drop_after = MiB;
	CU_ASSERT_FATAL(pipe_server_in(&srv, "drop", &e, url, sizeof url) == 0);
	hs_init(&h, &fx);
	CU_ASSERT_FATAL(hs_get(&fx, &h, url) != NULL);
	CU_ASSERT_EQUAL(run_until(&fx, &h.rec.done, 1, 10000), 0);
	run_for(&fx, 100);
	CU_ASSERT_EQUAL(h.rec.done, 1);
	CU_ASSERT_FALSE(h.rec.r.ok);
	CU_ASSERT_EQUAL(h.rec.r.http_status, 200);
	CU_ASSERT_EQUAL(h.rec.r.curl_code, CURLE_PARTIAL_FILE);
	CU_ASSERT_TRUE(h.rec.error[0] != '\0');
	CU_ASSERT_EQUAL(h.rec.r.bytes, MiB);
	CU_ASSERT_EQUAL(h.n, MiB);
	hs_free(&h);
	fx_close(&fx);
}

/* Same with a chunked response: the missing last chunk is the error. */
static void test_drop_mid_chunked(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct hsink h;
	char url[256];

	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	e.seed = 4;
	e.size = 4 * MiB;
	e.chunked = 1;
	e.drop_after = MiB + 5;
	CU_ASSERT_FATAL(pipe_server_in(&srv, "drop-chunked", &e, url, sizeof url) == 0);
	hs_init(&h, &fx);
	CU_ASSERT_FATAL(hs_get(&fx, &h, url) != NULL);
	CU_ASSERT_EQUAL(run_until(&fx, &h.rec.done, 1, 10000), 0);
	CU_ASSERT_EQUAL(h.rec.done, 1);
	CU_ASSERT_FALSE(h.rec.r.ok);
	CU_ASSERT_NOT_EQUAL(h.rec.r.curl_code, CURLE_OK);
	CU_ASSERT_EQUAL(h.n, MiB + 5);
	hs_free(&h);
	fx_close(&fx);
}

/* Abort from inside the sink, mid-stream of a slow endpoint. */
static void test_abort_inside_sink(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct hsink h;
	struct pipe_result pr;
	char url[256];
	int never = 0;

	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	e.seed = 7;
	e.size = 64 * MiB;
	e.rate = 4 * MiB;
	CU_ASSERT_FATAL(pipe_server_in(&srv, "abort-in", &e, url, sizeof url) == 0);
	hs_init(&h, &fx);
	h.abort_at = 256 * 1024;
	CU_ASSERT_FATAL(hs_get(&fx, &h, url) != NULL);
	run_until(&fx, &h.aborted, 1, 10000);
	CU_ASSERT_TRUE(h.aborted);
	run_until(&fx, &never, 1, 500);
	CU_ASSERT_EQUAL(h.rec.done, 0);
	CU_ASSERT_EQUAL(h.calls_after_abort, 0);
	CU_ASSERT_EQUAL(transfer_loop_count(fx.loop), 0);
	CU_ASSERT_EQUAL(pipe_server_result(&srv, "abort-in", &pr), 0);
	CU_ASSERT_TRUE(pr.sent < 64 * MiB);
	hs_free(&h);
	fx_close(&fx);
}

struct abort_ctx {
	struct transfer *t;
	int fired;
};

static void abort_cb(evutil_socket_t fd, short what, void *arg)
{
	struct abort_ctx *a = arg;

	transfer_abort(a->t);
	a->fired = 1;
}

/* Abort from the loop: a GET paused by its sink and a PUT paused by its
 * source, both via the fd helpers (their fd events must go too). */
static void test_abort_paused(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct rec rg = { 0 }, rp = { 0 };
	struct abort_ctx ag = { 0 }, ap = { 0 };
	struct event *eg, *ep;
	struct timeval tv = { 0, 300000 };
	char url[256], url2[256];
	int pg[2], pp[2], never = 0;

	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	e.seed = 8;
	e.size = 32 * MiB;
	CU_ASSERT_FATAL(pipe_server_in(&srv, "abort-paused", &e, url, sizeof url) == 0);
	CU_ASSERT_FATAL(pipe_server_out(&srv, "abort-put", NULL, url2, sizeof url2) == 0);
	CU_ASSERT_FATAL(pipe(pg) == 0 && pipe(pp) == 0);
	/* nobody reads pg[0]: the GET fills the pipe and pauses;
	 * nobody writes pp[1]: the PUT pauses on its first read */
	ag.t = transfer_get_fd(fx.loop, url, pg[1], rec_done, &rg);
	ap.t = transfer_put_fd(fx.loop, url2, pp[0], -1, rec_done, &rp);
	CU_ASSERT_FATAL(ag.t && ap.t);
	eg = evtimer_new(fx.base, abort_cb, &ag);
	ep = evtimer_new(fx.base, abort_cb, &ap);
	evtimer_add(eg, &tv);
	evtimer_add(ep, &tv);
	run_until(&fx, &ap.fired, 1, 5000);
	run_until(&fx, &ag.fired, 1, 5000);
	/* the fds may be closed at once; then make them "ready" to prove that
	 * no helper event is left on them */
	close(pg[1]);
	close(pp[0]);
	run_until(&fx, &never, 1, 300);
	CU_ASSERT_EQUAL(rg.done, 0);
	CU_ASSERT_EQUAL(rp.done, 0);
	CU_ASSERT_EQUAL(transfer_loop_count(fx.loop), 0);
	event_free(eg);
	event_free(ep);
	close(pg[0]);
	close(pp[1]);
	fx_close(&fx);
}

static char tmpdir[256];

static void test_get_file_max_bytes(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct rec r1 = { 0 }, r2 = { 0 }, r3 = { 0 };
	char url1[256], url2[256], p1[300], p2[300], p3[300], hex[65], want[65];
	struct stat st;
	uint64_t len;

	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	e.seed = 9;
	e.size = 2 * MiB;
	CU_ASSERT_FATAL(pipe_server_in(&srv, "file-big", &e, url1, sizeof url1) == 0);
	e.chunked = 1;
	CU_ASSERT_FATAL(pipe_server_in(&srv, "file-big-chunked", &e, url2, sizeof url2) == 0);
	snprintf(p1, sizeof p1, "%s/f1", tmpdir);
	snprintf(p2, sizeof p2, "%s/f2", tmpdir);
	snprintf(p3, sizeof p3, "%s/f3", tmpdir);
	in_api = 1;
	CU_ASSERT_FATAL(transfer_get_file(fx.loop, url1, p1, MiB, rec_done, &r1) != NULL);
	CU_ASSERT_FATAL(transfer_get_file(fx.loop, url2, p2, MiB, rec_done, &r2) != NULL);
	/* exactly the limit is fine */
	CU_ASSERT_FATAL(transfer_get_file(fx.loop, url2, p3, 2 * MiB, rec_done, &r3) != NULL);
	in_api = 0;
	CU_ASSERT_EQUAL(run_until(&fx, &r1.done, 1, 10000), 0);
	CU_ASSERT_EQUAL(run_until(&fx, &r2.done, 1, 10000), 0);
	CU_ASSERT_EQUAL(run_until(&fx, &r3.done, 1, 10000), 0);
	/* Content-Length over the limit: refused before any byte */
	CU_ASSERT_FALSE(r1.r.ok);
	CU_ASSERT_EQUAL(r1.r.curl_code, CURLE_FILESIZE_EXCEEDED);
	CU_ASSERT_EQUAL(r1.r.bytes, 0);
	CU_ASSERT_NOT_EQUAL(stat(p1, &st), 0);
	/* chunked: refused when the limit is passed */
	CU_ASSERT_FALSE(r2.r.ok);
	CU_ASSERT_TRUE(strstr(r2.error, "larger than") != NULL);
	CU_ASSERT_TRUE(r2.r.bytes <= MiB);
	CU_ASSERT_NOT_EQUAL(stat(p2, &st), 0);
	CU_ASSERT_TRUE(r3.r.ok);
	pipe_random_sha256(9, 2 * MiB, want);
	CU_ASSERT_EQUAL(pipe_file_sha256(p3, hex, &len), 0);
	CU_ASSERT_EQUAL(len, 2 * MiB);
	CU_ASSERT_STRING_EQUAL(hex, want);
	CU_ASSERT_EQUAL(r1.done + r2.done + r3.done, 3);
	CU_ASSERT_FALSE(r1.from_api || r2.from_api || r3.from_api);
	fx_close(&fx);
}

static void test_file_round_trip(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct rec r1 = { 0 }, r2 = { 0 };
	struct pipe_result pr;
	char url1[256], url2[256], path[300], want[65];
	const uint64_t size = 3 * MiB + 17;

	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	e.seed = 10;
	e.size = size;
	CU_ASSERT_FATAL(pipe_server_in(&srv, "rt-in", &e, url1, sizeof url1) == 0);
	CU_ASSERT_FATAL(pipe_server_out(&srv, "rt-out", NULL, url2, sizeof url2) == 0);
	snprintf(path, sizeof path, "%s/rt", tmpdir);
	CU_ASSERT_FATAL(transfer_get_file(fx.loop, url1, path, UINT64_MAX, rec_done, &r1) != NULL);
	CU_ASSERT_EQUAL(run_until(&fx, &r1.done, 1, 10000), 0);
	CU_ASSERT_TRUE(r1.r.ok);
	CU_ASSERT_EQUAL(r1.r.bytes, size);
	CU_ASSERT_FATAL(transfer_put_file(fx.loop, url2, path, rec_done, &r2) != NULL);
	CU_ASSERT_EQUAL(run_until(&fx, &r2.done, 1, 10000), 0);
	CU_ASSERT_TRUE(r2.r.ok);
	CU_ASSERT_EQUAL(r2.r.bytes, size);
	pipe_random_sha256(10, size, want);
	CU_ASSERT_EQUAL(pipe_server_result(&srv, "rt-out", &pr), 0);
	CU_ASSERT_EQUAL(pr.length, size);
	CU_ASSERT_STRING_EQUAL(pr.sha256, want);
	CU_ASSERT_FALSE(pr.chunked);
	CU_ASSERT_EQUAL(pr.content_length, (int64_t)size);
	CU_ASSERT_EQUAL(pr.requests, 1);
	/* files that cannot be opened: NULL and errno, no done */
	errno = 0;
	CU_ASSERT_PTR_NULL(transfer_put_file(fx.loop, url2, "/nonexistent/x", rec_done, &r2));
	CU_ASSERT_EQUAL(errno, ENOENT);
	CU_ASSERT_PTR_NULL(transfer_put_file(fx.loop, url2, tmpdir, rec_done, &r2));
	CU_ASSERT_EQUAL(errno, EINVAL);
	CU_ASSERT_PTR_NULL(transfer_get_file(fx.loop, url1, "/nonexistent/x", 10, rec_done, &r1));
	run_for(&fx, 50);
	CU_ASSERT_EQUAL(r1.done, 1);
	CU_ASSERT_EQUAL(r2.done, 1);
	unlink(path);
	fx_close(&fx);
}

static void test_redirect_not_followed(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct hsink h;
	struct pipe_result pr;
	char target[256], url[256];

	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	e.size = 100;
	CU_ASSERT_FATAL(pipe_server_in(&srv, "redir-target", &e, target, sizeof target) == 0);
	e.status = 302;
	e.location = target;
	CU_ASSERT_FATAL(pipe_server_in(&srv, "redir", &e, url, sizeof url) == 0);
	hs_init(&h, &fx);
	CU_ASSERT_FATAL(hs_get(&fx, &h, url) != NULL);
	CU_ASSERT_EQUAL(run_until(&fx, &h.rec.done, 1, 10000), 0);
	CU_ASSERT_EQUAL(h.rec.done, 1);
	CU_ASSERT_FALSE(h.rec.r.ok);
	CU_ASSERT_EQUAL(h.rec.r.http_status, 302);
	CU_ASSERT_TRUE(strstr(h.rec.error, "redirects are not followed") != NULL);
	CU_ASSERT_EQUAL(h.n, 0); /* the 302's body ("status 302") is not delivered */
	CU_ASSERT_EQUAL(pipe_server_result(&srv, "redir-target", &pr), 0);
	CU_ASSERT_EQUAL(pr.requests, 0);
	CU_ASSERT_EQUAL(pipe_server_result(&srv, "redir", &pr), 0);
	CU_ASSERT_EQUAL(pr.requests, 1);
	hs_free(&h);
	fx_close(&fx);
}

#define NCONC 50

static void test_many_concurrent(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct hsink *hs = calloc(NCONC / 2, sizeof *hs);
	struct msrc *ms = calloc(NCONC / 2, sizeof *ms);
	char url[256], name[32], want[65], got[65];
	int done = 0;

	CU_ASSERT_FATAL(hs && ms);
	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	for (int i = 0; i < NCONC / 2; i++) {
		snprintf(name, sizeof name, "conc-in-%d", i);
		e.seed = 100 + (uint64_t)i;
		e.size = 1000 + (uint64_t)i * 7919;
		e.chunked = i % 2;
		CU_ASSERT_FATAL(pipe_server_in(&srv, name, &e, url, sizeof url) == 0);
		hs_init(&hs[i], &fx);
		CU_ASSERT_FATAL(hs_get(&fx, &hs[i], url) != NULL);
		snprintf(name, sizeof name, "conc-out-%d", i);
		CU_ASSERT_FATAL(pipe_server_out(&srv, name, NULL, url, sizeof url) == 0);
		ms_init(&ms[i], &fx, 200 + (uint64_t)i, 500 + (uint64_t)i * 6007);
		CU_ASSERT_FATAL(ms_put(&fx, &ms[i], url, i % 2 ? -1 : (int64_t)ms[i].size) != NULL);
	}
	CU_ASSERT_EQUAL(transfer_loop_count(fx.loop), NCONC);
	for (uint64_t end = now_ms() + 20000; done < NCONC && now_ms() < end;) {
		event_base_loop(fx.base, EVLOOP_ONCE);
		done = 0;
		for (int i = 0; i < NCONC / 2; i++)
			done += hs[i].rec.done + ms[i].rec.done;
	}
	run_for(&fx, 100);
	for (int i = 0; i < NCONC / 2; i++) {
		struct pipe_result pr;

		CU_ASSERT_EQUAL(hs[i].rec.done, 1);
		CU_ASSERT_TRUE(hs[i].rec.r.ok);
		pipe_random_sha256(100 + (uint64_t)i, 1000 + (uint64_t)i * 7919, want);
		hs_hex(&hs[i], got);
		CU_ASSERT_STRING_EQUAL(got, want);
		CU_ASSERT_EQUAL(ms[i].rec.done, 1);
		CU_ASSERT_TRUE(ms[i].rec.r.ok);
		snprintf(name, sizeof name, "conc-out-%d", i);
		CU_ASSERT_EQUAL(pipe_server_result(&srv, name, &pr), 0);
		pipe_random_sha256(200 + (uint64_t)i, ms[i].size, want);
		CU_ASSERT_STRING_EQUAL(pr.sha256, want);
		CU_ASSERT_EQUAL(pr.requests, 1);
		CU_ASSERT_EQUAL(pr.chunked, i % 2);
		hs_free(&hs[i]);
		event_free(ms[i].resume_ev);
	}
	free(hs);
	free(ms);
	fx_close(&fx);
}

static void test_stall_detected(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct transfer_options o;
	struct fixture fx;
	struct hsink h;
	char url[256];

	transfer_options_init(&o);
	o.stall_timeout_ms = 500;
	CU_ASSERT_FATAL(fx_open(&fx, &o) == 0);
	e.seed = 12;
	e.size = MiB;
	e.stall_after = 64 * 1024;
	CU_ASSERT_FATAL(pipe_server_in(&srv, "stall", &e, url, sizeof url) == 0);
	hs_init(&h, &fx);
	CU_ASSERT_FATAL(hs_get(&fx, &h, url) != NULL);
	CU_ASSERT_EQUAL(run_until(&fx, &h.rec.done, 1, 10000), 0);
	CU_ASSERT_EQUAL(h.rec.done, 1);
	CU_ASSERT_FALSE(h.rec.r.ok);
	CU_ASSERT_EQUAL(h.rec.r.curl_code, CURLE_OPERATION_TIMEDOUT);
	CU_ASSERT_TRUE(strstr(h.rec.error, "no data moved") != NULL);
	CU_ASSERT_EQUAL(h.n, 64 * 1024);
	CU_ASSERT_TRUE(h.rec.r.duration_ms >= 450 && h.rec.r.duration_ms < 5000);
	hs_free(&h);
	fx_close(&fx);
}

/* Paused by the local side for longer than the stall limit: not a stall. */
static void test_local_pause_is_not_stall(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct transfer_options o;
	struct fixture fx;
	struct hsink h;
	struct msrc m;
	char url[256], url2[256], want[65], got[65];
	struct pipe_result pr;

	transfer_options_init(&o);
	o.stall_timeout_ms = 300;
	CU_ASSERT_FATAL(fx_open(&fx, &o) == 0);
	e.seed = 13;
	e.size = MiB;
	CU_ASSERT_FATAL(pipe_server_in(&srv, "pause-get", &e, url, sizeof url) == 0);
	CU_ASSERT_FATAL(pipe_server_out(&srv, "pause-put", NULL, url2, sizeof url2) == 0);
	hs_init(&h, &fx);
	h.refuse_ms = 1000;
	ms_init(&m, &fx, 14, MiB);
	m.pause_ms = 1000;
	CU_ASSERT_FATAL(hs_get(&fx, &h, url) != NULL);
	CU_ASSERT_FATAL(ms_put(&fx, &m, url2, -1) != NULL);
	CU_ASSERT_EQUAL(run_until(&fx, &h.rec.done, 1, 10000), 0);
	CU_ASSERT_EQUAL(run_until(&fx, &m.rec.done, 1, 10000), 0);
	CU_ASSERT_TRUE(h.rec.r.ok);
	CU_ASSERT_TRUE(m.rec.r.ok);
	/* (libevent's timers may run a few ms early against CLOCK_MONOTONIC) */
	CU_ASSERT_TRUE(h.rec.r.duration_ms >= 950);
	CU_ASSERT_TRUE(m.rec.r.duration_ms >= 950);
	CU_ASSERT_TRUE(h.rec.r.pauses >= 1);
	CU_ASSERT_TRUE(m.rec.r.pauses >= 1);
	pipe_random_sha256(13, MiB, want);
	hs_hex(&h, got);
	CU_ASSERT_STRING_EQUAL(got, want);
	CU_ASSERT_EQUAL(pipe_server_result(&srv, "pause-put", &pr), 0);
	pipe_random_sha256(14, MiB, want);
	CU_ASSERT_STRING_EQUAL(pr.sha256, want);
	hs_free(&h);
	event_free(m.resume_ev);
	fx_close(&fx);
}

/* A sink that takes a little at a time and sometimes nothing: the bytes
 * it did not take are offered again, never lost nor doubled. */
static void partial_sink(int resume_inside, int chunked)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct hsink h;
	char url[256], want[65], got[65], name[32];

	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	snprintf(name, sizeof name, "partial-%d-%d", resume_inside, chunked);
	e.seed = 15;
	e.size = 4 * MiB + 3;
	e.chunked = chunked;
	CU_ASSERT_FATAL(pipe_server_in(&srv, name, &e, url, sizeof url) == 0);
	hs_init(&h, &fx);
	h.max_take = 5000;
	h.zero_every = 3;
	h.resume_inside = resume_inside;
	CU_ASSERT_FATAL(hs_get(&fx, &h, url) != NULL);
	CU_ASSERT_EQUAL(run_until(&fx, &h.rec.done, 1, 60000), 0);
	CU_ASSERT_EQUAL(h.rec.done, 1);
	CU_ASSERT_TRUE(h.rec.r.ok);
	CU_ASSERT_EQUAL(h.rec.r.bytes, 4 * MiB + 3);
	CU_ASSERT_EQUAL(h.n, 4 * MiB + 3);
	CU_ASSERT_TRUE(h.rec.r.pauses > 100);
	pipe_random_sha256(15, 4 * MiB + 3, want);
	hs_hex(&h, got);
	CU_ASSERT_STRING_EQUAL(got, want);
	hs_free(&h);
	fx_close(&fx);
}

static void test_partial_sink(void)
{
	partial_sink(0, 0);
}
static void test_partial_sink_resume_inside(void)
{
	partial_sink(1, 1);
}

/* The sink fails, and aborts, on bytes the transfer held for it. */
static void test_partial_sink_fails_or_aborts(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct hsink h1, h2;
	char url[256];
	int never = 0;

	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	e.seed = 24;
	e.size = 4 * MiB;
	CU_ASSERT_FATAL(pipe_server_in(&srv, "partial-fail", &e, url, sizeof url) == 0);
	hs_init(&h1, &fx);
	h1.max_take = 5000;
	h1.zero_every = 2;
	h1.fail_at = 100 * 1000 + 1;
	hs_init(&h2, &fx);
	h2.max_take = 5000;
	h2.zero_every = 2;
	h2.abort_at = 100 * 1000 + 1;
	CU_ASSERT_FATAL(hs_get(&fx, &h1, url) != NULL);
	CU_ASSERT_FATAL(hs_get(&fx, &h2, url) != NULL);
	CU_ASSERT_EQUAL(run_until(&fx, &h1.rec.done, 1, 10000), 0);
	run_until(&fx, &h2.aborted, 1, 10000);
	run_until(&fx, &never, 1, 200);
	CU_ASSERT_EQUAL(h1.rec.done, 1);
	CU_ASSERT_FALSE(h1.rec.r.ok);
	CU_ASSERT_STRING_EQUAL(h1.rec.error, "disk full (test)");
	CU_ASSERT_EQUAL(h1.rec.r.bytes, h1.n);
	CU_ASSERT_TRUE(h2.aborted);
	CU_ASSERT_EQUAL(h2.rec.done, 0);
	CU_ASSERT_EQUAL(h2.calls_after_abort, 0);
	CU_ASSERT_EQUAL(transfer_loop_count(fx.loop), 0);
	hs_free(&h1);
	hs_free(&h2);
	fx_close(&fx);
}

static void test_connection_refused(void)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof sa;
	struct fixture fx;
	struct hsink h;
	char url[256];
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	/* a port that was free a moment ago and has no listener */
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CU_ASSERT_FATAL(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
	CU_ASSERT_FATAL(getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
	snprintf(url, sizeof url, "http://127.0.0.1:%d/in/x", ntohs(sa.sin_port));
	close(fd);
	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	hs_init(&h, &fx);
	CU_ASSERT_FATAL(hs_get(&fx, &h, url) != NULL);
	CU_ASSERT_EQUAL(h.rec.done, 0);
	CU_ASSERT_EQUAL(run_until(&fx, &h.rec.done, 1, 10000), 0);
	run_for(&fx, 100);
	CU_ASSERT_EQUAL(h.rec.done, 1);
	CU_ASSERT_FALSE(h.rec.from_api);
	CU_ASSERT_FALSE(h.rec.r.ok);
	CU_ASSERT_EQUAL(h.rec.r.http_status, 0);
	CU_ASSERT_EQUAL(h.rec.r.curl_code, CURLE_COULDNT_CONNECT);
	hs_free(&h);
	fx_close(&fx);
}

static void test_protocols_refused(void)
{
	static const char *urls[] = {
		"file:///etc/hostname", "ftp://127.0.0.1/x", "gopher://127.0.0.1/x",
		"dict://127.0.0.1/x",   "not a url",
	};
	enum {
		N = sizeof urls / sizeof urls[0]
	};
	struct fixture fx;
	struct hsink h[N];

	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	for (int i = 0; i < N; i++) {
		hs_init(&h[i], &fx);
		CU_ASSERT_FATAL(hs_get(&fx, &h[i], urls[i]) != NULL);
	}
	for (int i = 0; i < N; i++) {
		CU_ASSERT_EQUAL(run_until(&fx, &h[i].rec.done, 1, 5000), 0);
		CU_ASSERT_EQUAL(h[i].rec.done, 1);
		CU_ASSERT_FALSE(h[i].rec.r.ok);
		CU_ASSERT_EQUAL(h[i].calls, 0);
		if (i < N - 1)
			CU_ASSERT_EQUAL(h[i].rec.r.curl_code, CURLE_UNSUPPORTED_PROTOCOL);
		hs_free(&h[i]);
	}
	fx_close(&fx);
}

static void test_sink_error(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct hsink h;
	char url[256];

	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	e.seed = 16;
	e.size = MiB;
	CU_ASSERT_FATAL(pipe_server_in(&srv, "sink-error", &e, url, sizeof url) == 0);
	hs_init(&h, &fx);
	h.fail_at = 100 * 1024;
	CU_ASSERT_FATAL(hs_get(&fx, &h, url) != NULL);
	CU_ASSERT_EQUAL(run_until(&fx, &h.rec.done, 1, 10000), 0);
	CU_ASSERT_EQUAL(h.rec.done, 1);
	CU_ASSERT_FALSE(h.rec.r.ok);
	CU_ASSERT_EQUAL(h.rec.r.curl_code, CURLE_WRITE_ERROR);
	CU_ASSERT_STRING_EQUAL(h.rec.error, "disk full (test)");
	hs_free(&h);
	fx_close(&fx);
}

/* The job closed its stdin: the pipe sink fails with EPIPE. */
static void test_pipe_reader_gone(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct rec rec = { 0 };
	char url[256];
	int p[2];

	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	e.seed = 17;
	e.size = MiB;
	CU_ASSERT_FATAL(pipe_server_in(&srv, "reader-gone", &e, url, sizeof url) == 0);
	CU_ASSERT_FATAL(pipe(p) == 0);
	close(p[0]);
	CU_ASSERT_FATAL(transfer_get_fd(fx.loop, url, p[1], rec_done, &rec) != NULL);
	CU_ASSERT_EQUAL(run_until(&fx, &rec.done, 1, 10000), 0);
	CU_ASSERT_EQUAL(rec.done, 1);
	CU_ASSERT_FALSE(rec.r.ok);
	CU_ASSERT_TRUE(strstr(rec.error, "Broken pipe") != NULL);
	close(p[1]);
	fx_close(&fx);
}

static void test_source_errors(void)
{
	struct fixture fx;
	struct msrc m1, m2;
	char url[256];

	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	CU_ASSERT_FATAL(pipe_server_out(&srv, "src-err", NULL, url, sizeof url) == 0);
	ms_init(&m1, &fx, 18, 200000);
	m1.fail = 1;
	ms_init(&m2, &fx, 19, 200000);
	m2.short_eof = 1;
	CU_ASSERT_FATAL(ms_put(&fx, &m1, url, -1) != NULL);
	CU_ASSERT_FATAL(ms_put(&fx, &m2, url, 200000) != NULL);
	CU_ASSERT_EQUAL(run_until(&fx, &m1.rec.done, 1, 10000), 0);
	CU_ASSERT_EQUAL(run_until(&fx, &m2.rec.done, 1, 10000), 0);
	CU_ASSERT_FALSE(m1.rec.r.ok);
	CU_ASSERT_EQUAL(m1.rec.r.curl_code, CURLE_ABORTED_BY_CALLBACK);
	CU_ASSERT_STRING_EQUAL(m1.rec.error, "source broke (test)");
	/* fewer bytes than the Content-Length announced */
	CU_ASSERT_FALSE(m2.rec.r.ok);
	CU_ASSERT_EQUAL(m2.rec.r.curl_code, CURLE_ABORTED_BY_CALLBACK);
	CU_ASSERT_TRUE(strstr(m2.rec.error, "ended after 100000 of 200000") != NULL);
	CU_ASSERT_EQUAL(m2.rec.r.bytes, 100000);
	event_free(m1.resume_ev);
	event_free(m2.resume_ev);
	fx_close(&fx);
}

/* done may start a transfer and abort another. */
struct chain {
	struct hsink h; /* first: hs_write works on a chain */
	struct fixture *fx;
	struct hsink *next;
	const char *next_url;
	struct hsink *victim;
};

static void chain_done(void *arg, const struct transfer_result *r)
{
	struct chain *c = arg;

	rec_done(&c->h.rec, r);
	hs_get(c->fx, c->next, c->next_url);
	c->victim->aborted = 1;
	transfer_abort(c->victim->t);
	transfer_abort(c->h.t); /* its own handle inside done: ignored */
	transfer_abort(NULL);   /* harmless */
}

static void test_done_reenters(void)
{
	static const struct transfer_sink sink = { hs_write, chain_done };
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct hsink next, victim;
	struct chain c;
	char url1[256], url2[256], url3[256];
	int never = 0;

	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	e.seed = 20;
	e.size = 1000;
	CU_ASSERT_FATAL(pipe_server_in(&srv, "chain-1", &e, url1, sizeof url1) == 0);
	CU_ASSERT_FATAL(pipe_server_in(&srv, "chain-2", &e, url2, sizeof url2) == 0);
	e.size = 64 * MiB;
	e.rate = MiB;
	CU_ASSERT_FATAL(pipe_server_in(&srv, "chain-victim", &e, url3, sizeof url3) == 0);
	hs_init(&next, &fx);
	hs_init(&victim, &fx);
	hs_init(&c.h, &fx);
	c.fx = &fx;
	c.next = &next;
	c.next_url = url2;
	c.victim = &victim;
	CU_ASSERT_FATAL(hs_get(&fx, &victim, url3) != NULL);
	c.h.t = transfer_get(fx.loop, url1, &sink, &c);
	CU_ASSERT_FATAL(c.h.t != NULL);
	CU_ASSERT_EQUAL(run_until(&fx, &next.rec.done, 1, 10000), 0);
	run_until(&fx, &never, 1, 300);
	CU_ASSERT_EQUAL(c.h.rec.done, 1);
	CU_ASSERT_TRUE(c.h.rec.r.ok);
	CU_ASSERT_EQUAL(c.h.n, 1000);
	CU_ASSERT_EQUAL(next.rec.done, 1);
	CU_ASSERT_TRUE(next.rec.r.ok);
	CU_ASSERT_EQUAL(victim.rec.done, 0);
	CU_ASSERT_EQUAL(victim.calls_after_abort, 0);
	CU_ASSERT_EQUAL(transfer_loop_count(fx.loop), 0);
	hs_free(&next);
	hs_free(&victim);
	hs_free(&c.h);
	fx_close(&fx);
}

/* Freeing the loop with transfers in every state: no callback, no leak. */
static void test_loop_free_with_transfers(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct fixture fx;
	struct hsink h1, h2;
	struct msrc m;
	char url[256], url2[256], path[300];
	struct rec rf = { 0 };
	struct stat st;

	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	e.seed = 22;
	e.size = 64 * MiB;
	e.rate = MiB;
	CU_ASSERT_FATAL(pipe_server_in(&srv, "free-1", &e, url, sizeof url) == 0);
	CU_ASSERT_FATAL(pipe_server_out(&srv, "free-2", NULL, url2, sizeof url2) == 0);
	hs_init(&h1, &fx);
	hs_init(&h2, &fx);
	ms_init(&m, &fx, 23, 10 * MiB);
	m.pause_ms = 10000;
	snprintf(path, sizeof path, "%s/free", tmpdir);
	CU_ASSERT_FATAL(hs_get(&fx, &h1, url) != NULL);     /* running */
	CU_ASSERT_FATAL(ms_put(&fx, &m, url2, -1) != NULL); /* paused */
	CU_ASSERT_FATAL(transfer_get_file(fx.loop, url, path, UINT64_MAX, rec_done, &rf) != NULL);
	run_for(&fx, 300);
	CU_ASSERT_FATAL(hs_get(&fx, &h2, url) != NULL); /* queued */
	CU_ASSERT_EQUAL(transfer_loop_count(fx.loop), 4);
	transfer_loop_free(fx.loop);
	fx.loop = NULL;
	CU_ASSERT_EQUAL(h1.rec.done + h2.rec.done + m.rec.done + rf.done, 0);
	CU_ASSERT_NOT_EQUAL(stat(path, &st), 0); /* the partial file is gone */
	hs_free(&h1);
	hs_free(&h2);
	event_free(m.resume_ev);
	fx_close(&fx);
}

static int setup_calls;

static int setup_hook(void *easy, void *arg)
{
	setup_calls++;
	return *(const int *)arg;
}

/* User-Agent default and override, the setup hook, TLS against a port
 * that does not speak it. */
static void test_options(void)
{
	struct pipe_endpoint e = PIPE_ENDPOINT_INIT;
	struct transfer_options o;
	struct pipe_result pr;
	struct fixture fx;
	struct hsink h1, h2, h3;
	char url[256], tls[256];
	int verdict = 0;

	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	e.size = 10;
	CU_ASSERT_FATAL(pipe_server_in(&srv, "opt", &e, url, sizeof url) == 0);
	hs_init(&h1, &fx);
	CU_ASSERT_FATAL(hs_get(&fx, &h1, url) != NULL);
	CU_ASSERT_EQUAL(run_until(&fx, &h1.rec.done, 1, 10000), 0);
	CU_ASSERT_TRUE(h1.rec.r.ok);
	CU_ASSERT_EQUAL(pipe_server_result(&srv, "opt", &pr), 0);
	CU_ASSERT_STRING_EQUAL(pr.user_agent, "execserver/" PACKAGE_VERSION);

	transfer_options_init(&o);
	{
		char ua[] = "probe/1";

		o.user_agent = ua;
		o.setup = setup_hook;
		o.setup_arg = &verdict;
		CU_ASSERT_EQUAL(transfer_loop_set_defaults(fx.loop, &o), 0);
		ua[0] = 'X'; /* copied: later changes do not matter */
	}
	hs_init(&h2, &fx);
	CU_ASSERT_FATAL(hs_get(&fx, &h2, url) != NULL);
	CU_ASSERT_EQUAL(setup_calls, 1);
	CU_ASSERT_EQUAL(run_until(&fx, &h2.rec.done, 1, 10000), 0);
	CU_ASSERT_TRUE(h2.rec.r.ok);
	CU_ASSERT_EQUAL(pipe_server_result(&srv, "opt", &pr), 0);
	CU_ASSERT_STRING_EQUAL(pr.user_agent, "probe/1");
	CU_ASSERT_EQUAL(pr.requests, 2);

	verdict = -1;
	errno = 0;
	CU_ASSERT_PTR_NULL(hs_get(&fx, &h2, url));
	CU_ASSERT_EQUAL(errno, EINVAL);
	CU_ASSERT_EQUAL(transfer_loop_count(fx.loop), 0);
	verdict = 0;

	/* TLS to a plain-HTTP port: a curl error, reported once */
	snprintf(tls, sizeof tls, "https://127.0.0.1:%d/in/opt", srv.port);
	hs_init(&h3, &fx);
	CU_ASSERT_FATAL(hs_get(&fx, &h3, tls) != NULL);
	CU_ASSERT_EQUAL(run_until(&fx, &h3.rec.done, 1, 10000), 0);
	run_for(&fx, 100);
	CU_ASSERT_EQUAL(h3.rec.done, 1);
	CU_ASSERT_FALSE(h3.rec.r.ok);
	CU_ASSERT_NOT_EQUAL(h3.rec.r.curl_code, CURLE_OK);
	CU_ASSERT_EQUAL(h3.calls, 0);
	hs_free(&h1);
	hs_free(&h2);
	hs_free(&h3);
	fx_close(&fx);
}

static void test_bad_arguments(void)
{
	static const struct transfer_sink nosink = { NULL, NULL };
	static const struct transfer_source nosrc = { NULL, NULL };
	struct fixture fx;

	CU_ASSERT_FATAL(fx_open(&fx, NULL) == 0);
	errno = 0;
	CU_ASSERT_PTR_NULL(transfer_get(fx.loop, "http://127.0.0.1/", &nosink, NULL));
	CU_ASSERT_EQUAL(errno, EINVAL);
	CU_ASSERT_PTR_NULL(transfer_put(fx.loop, "http://127.0.0.1/", &nosrc, NULL, -1));
	CU_ASSERT_PTR_NULL(transfer_get_fd(fx.loop, "http://127.0.0.1/", -1, NULL, NULL));
	CU_ASSERT_PTR_NULL(transfer_get_fd(fx.loop, NULL, 0, NULL, NULL));
	CU_ASSERT_EQUAL(transfer_loop_count(fx.loop), 0);
	fx_close(&fx);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "GET big stream through a pipe, slow consumer", test_get_pipe_slow },
		{ "GET big stream through a pipe, fast consumer", test_get_pipe_fast },
		{ "chunked PUT of a big stream from a pipe", test_put_pipe_chunked },
		{ "chunked PUT to a slow server: back-pressure", test_put_pipe_slow_server },
		{ "GET 404: failure, done once", test_get_404 },
		{ "PUT answered 500: failure", test_put_500 },
		{ "PUT answered 302: failure", test_put_302 },
		{ "server drops mid-stream (Content-Length)", test_drop_mid_stream },
		{ "server drops mid-stream (chunked)", test_drop_mid_chunked },
		{ "abort from inside the sink", test_abort_inside_sink },
		{ "abort paused GET and PUT (fd helpers)", test_abort_paused },
		{ "file download over max_bytes refused", test_get_file_max_bytes },
		{ "file download and upload round trip", test_file_round_trip },
		{ "302 not followed", test_redirect_not_followed },
		{ "50 concurrent GETs and PUTs", test_many_concurrent },
		{ "stall detected", test_stall_detected },
		{ "local pause is not a stall", test_local_pause_is_not_stall },
		{ "partial sink, resumed from a timer", test_partial_sink },
		{ "partial sink, resumed from inside (chunked)", test_partial_sink_resume_inside },
		{ "partial sink fails, or aborts, on held bytes",
		  test_partial_sink_fails_or_aborts },
		{ "connection refused", test_connection_refused },
		{ "only http and https", test_protocols_refused },
		{ "sink error", test_sink_error },
		{ "pipe reader gone: EPIPE", test_pipe_reader_gone },
		{ "source error and short body", test_source_errors },
		{ "done starts one transfer and aborts another", test_done_reenters },
		{ "loop freed with transfers in every state", test_loop_free_with_transfers },
		{ "options: User-Agent, setup hook, TLS", test_options },
		{ "bad arguments", test_bad_arguments },
		{ NULL, NULL },
	};
	const char *mib = getenv("TRANSFER_TEST_MIB");
	int rc;

	if (mib && atoi(mib) > 0)
		big_bytes = (uint64_t)atoi(mib) * MiB;
	rc = pipe_server_run_suite(&srv, "transfer", cases, tmpdir, sizeof tmpdir);
	if (tmpdir[0])
		rmdir(tmpdir);
	curl_global_cleanup();
	return rc;
}
