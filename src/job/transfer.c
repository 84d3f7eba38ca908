/*
 * transfer.c - see transfer.h: libcurl's multi interface on a libevent loop.
 *
 * Owns the CURLM of each loop, one event per curl socket (assigned to the
 * socket with curl_multi_assign), curl's one timer, and every transfer
 * object from transfer_get/put until done returns or the object is reaped
 * after transfer_abort.
 *
 * Invariants:
 *  - Nothing that calls into the multi (add, remove) runs inside a curl
 *    callback: starting, resuming and reaping a transfer go through the
 *    loop's kick queue, run by a zero-delay timer, i.e. from the loop
 *    itself.  A zero-delay timer (not event_active) so that a sink that
 *    keeps asking to resume cannot starve the loop's I/O.
 *  - A transfer object is freed (release) only after its done in finish(),
 *    when the kick queue reaps it after transfer_abort, by
 *    transfer_loop_free, or when its creation fails: always with no caller
 *    up the stack holding it.
 *  - user callbacks (sink, source, done) never run once state is
 *    T_ABORTED; done runs once, in finish(), which sets T_FINISHING first.
 *  - held[] holds the bytes of one write callback that the sink did not
 *    take: it is filled only while empty, so it never exceeds one callback
 *    (CURL_MAX_WRITE_SIZE), and it is offered to the sink before any newer
 *    byte.  Returning CURL_WRITEFUNC_PAUSE makes curl keep and re-deliver
 *    the whole data of that call, so it is returned only when the sink took
 *    none of it; a partial take is held here and the call is acknowledged.
 */
#include "autoconfig.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <event2/event.h>

#include "common/clock.h"
#include "job/transfer.h"

#if LIBCURL_VERSION_NUM < 0x075500
#error "libcurl 7.85 or newer is required (CURLOPT_PROTOCOLS_STR)"
#endif

#define TRANSFER_UA_DEFAULT "execserver/" PACKAGE_VERSION

enum {
	K_ADD = 1,
	K_RESUME = 2,
	K_REAP = 4
};

enum tstate {
	T_QUEUED,    /* created, not yet in the multi */
	T_RUNNING,   /* in the multi */
	T_DRAINING,  /* curl finished; held bytes still to hand to the sink */
	T_FINISHING, /* done is being called */
	T_ABORTED,   /* transfer_abort: waiting to be reaped */
};

struct transfer {
	struct transfer_loop *loop;
	TAILQ_ENTRY(transfer) all_link;
	TAILQ_ENTRY(transfer) kick_link;
	unsigned kick; /* K_* pending; non-zero iff on the kick queue */
	enum tstate state;
	CURL *easy;
	int attached; /* easy is in the multi */
	int is_put;
	struct transfer_sink sink;
	struct transfer_source src;
	void *arg;
	int64_t put_size;
	int paused; /* curl was told to pause (by a callback) */
	int status_checked;
	char *held;
	size_t held_off, held_len, held_cap;
	CURLcode code; /* curl's result, kept while T_DRAINING */
	uint64_t bytes, start_ms, last_move_ms;
	unsigned pauses;
	long stall_ms;
	struct event *stall_ev;
	void *helper; /* helper state, freed with the transfer */
	int (*helper_end)(void *helper, int ok);
	char errbuf[CURL_ERROR_SIZE];
	char local_err[512];
	transfer_guard_fn guard; /* NULL: every address */
	void *guard_arg;
	int refused; /* the guard refused an address */
	int allowed; /* the guard allowed an address */
	char guard_err[256];
};

struct tsock {
	struct transfer_loop *loop;
	curl_socket_t fd;
	struct event *ev;
	LIST_ENTRY(tsock) link;
};

struct transfer_loop {
	struct event_base *base;
	CURLM *multi;
	struct event *timer_ev;
	struct event *kick_ev;
	TAILQ_HEAD(, transfer) all;
	TAILQ_HEAD(, transfer) kq;
	unsigned count, nkick;
	LIST_HEAD(, tsock) socks;
	struct transfer_options opt; /* its strings point at the copies below */
	char *s_user_agent, *s_proxy, *s_ca_file, *s_ca_path;
	struct curl_slist *headers;
};

/* The one piece of process-wide state: libcurl is initialised once. */
static int curl_ready;

static void kick(struct transfer *t, unsigned what);
static void finish(struct transfer *t, CURLcode code);

/* ---- options ---------------------------------------------------------- */

void transfer_options_init(struct transfer_options *o)
{
	memset(o, 0, sizeof *o);
	o->connect_timeout_ms = 10000;
	o->stall_timeout_ms = 60000;
	o->total_timeout_ms = 0;
	o->keepalive_idle_sec = 60;
}

static int dup_opt(char **dst, const char *src)
{
	if (src == NULL) {
		*dst = NULL;
		return 0;
	}
	*dst = strdup(src);
	return *dst ? 0 : -1;
}

int transfer_loop_set_defaults(struct transfer_loop *loop, const struct transfer_options *o)
{
	char *ua = NULL, *proxy = NULL, *caf = NULL, *cap = NULL;
	int bad = dup_opt(&ua, o->user_agent);

	bad |= dup_opt(&proxy, o->proxy);
	bad |= dup_opt(&caf, o->ca_file);
	bad |= dup_opt(&cap, o->ca_path);
	if (bad) {
		free(ua);
		free(proxy);
		free(caf);
		free(cap);
		return -1;
	}
	free(loop->s_user_agent);
	free(loop->s_proxy);
	free(loop->s_ca_file);
	free(loop->s_ca_path);
	loop->opt = *o;
	loop->opt.user_agent = loop->s_user_agent = ua;
	loop->opt.proxy = loop->s_proxy = proxy;
	loop->opt.ca_file = loop->s_ca_file = caf;
	loop->opt.ca_path = loop->s_ca_path = cap;
	return 0;
}

/* ---- curl's sockets and timer ----------------------------------------- */

static void check_done(struct transfer_loop *loop);

static void on_sock_event(evutil_socket_t fd, short what, void *p)
{
	struct tsock *s = p;
	struct transfer_loop *loop = s->loop; /* s may be freed by the action */
	int flags = 0, running;

	if (what & EV_READ)
		flags |= CURL_CSELECT_IN;
	if (what & EV_WRITE)
		flags |= CURL_CSELECT_OUT;
	curl_multi_socket_action(loop->multi, fd, flags, &running);
	check_done(loop);
}

static int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
	struct transfer_loop *loop = userp;
	struct tsock *s = socketp;
	short ev = EV_PERSIST;

	if (what == CURL_POLL_REMOVE) {
		if (s) {
			curl_multi_assign(loop->multi, fd, NULL);
			LIST_REMOVE(s, link);
			event_free(s->ev);
			free(s);
		}
		return 0;
	}
	if (what & CURL_POLL_IN)
		ev |= EV_READ;
	if (what & CURL_POLL_OUT)
		ev |= EV_WRITE;
	if (s == NULL) {
		s = calloc(1, sizeof *s);
		if (s == NULL)
			return -1;
		s->loop = loop;
		s->fd = fd;
		s->ev = event_new(loop->base, fd, ev, on_sock_event, s);
		if (s->ev == NULL) {
			free(s);
			return -1;
		}
		LIST_INSERT_HEAD(&loop->socks, s, link);
		curl_multi_assign(loop->multi, fd, s);
	} else {
		event_del(s->ev);
		event_assign(s->ev, loop->base, fd, ev, on_sock_event, s);
	}
	return event_add(s->ev, NULL) == 0 ? 0 : -1;
}

static void on_timer_event(evutil_socket_t fd, short what, void *p)
{
	struct transfer_loop *loop = p;
	int running;

	curl_multi_socket_action(loop->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_done(loop);
}

/* timeout_ms -1: no timer; 0: as soon as the loop gets to it (never here). */
static int on_timer(CURLM *multi, long timeout_ms, void *userp)
{
	struct transfer_loop *loop = userp;
	struct timeval tv;

	if (timeout_ms < 0) {
		event_del(loop->timer_ev);
		return 0;
	}
	tv.tv_sec = timeout_ms / 1000;
	tv.tv_usec = (timeout_ms % 1000) * 1000;
	return evtimer_add(loop->timer_ev, &tv) == 0 ? 0 : -1;
}

/* ---- the loop ------------------------------------------------------------ */

static void on_kick(evutil_socket_t fd, short what, void *p);

struct transfer_loop *transfer_loop_new(struct event_base *base)
{
	struct transfer_loop *loop;
	struct transfer_options o;

	if (!curl_ready) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			return NULL;
		curl_ready = 1;
	}
	loop = calloc(1, sizeof *loop);
	if (loop == NULL)
		return NULL;
	loop->base = base;
	TAILQ_INIT(&loop->all);
	TAILQ_INIT(&loop->kq);
	LIST_INIT(&loop->socks);
	transfer_options_init(&o);
	if (transfer_loop_set_defaults(loop, &o) != 0)
		goto fail;
	/* No "Expect: 100-continue": a pipe upload starts at once. */
	loop->headers = curl_slist_append(NULL, "Expect:");
	loop->multi = curl_multi_init();
	loop->timer_ev = evtimer_new(base, on_timer_event, loop);
	loop->kick_ev = evtimer_new(base, on_kick, loop);
	if (!loop->headers || !loop->multi || !loop->timer_ev || !loop->kick_ev)
		goto fail;
	curl_multi_setopt(loop->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
	curl_multi_setopt(loop->multi, CURLMOPT_SOCKETDATA, loop);
	curl_multi_setopt(loop->multi, CURLMOPT_TIMERFUNCTION, on_timer);
	curl_multi_setopt(loop->multi, CURLMOPT_TIMERDATA, loop);
	return loop;
fail:
	if (loop->multi)
		curl_multi_cleanup(loop->multi);
	if (loop->timer_ev)
		event_free(loop->timer_ev);
	if (loop->kick_ev)
		event_free(loop->kick_ev);
	curl_slist_free_all(loop->headers);
	free(loop->s_user_agent);
	free(loop->s_proxy);
	free(loop->s_ca_file);
	free(loop->s_ca_path);
	free(loop);
	return NULL;
}

unsigned transfer_loop_count(const struct transfer_loop *loop)
{
	return loop->count;
}

/* ---- one transfer's life ---------------------------------------------- */

void transfer_set_error(struct transfer *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(t->local_err, sizeof t->local_err, fmt, ap);
	va_end(ap);
}

/* Takes t out of the multi and stops its stall timer. */
static void detach(struct transfer *t)
{
	if (t->attached) {
		curl_multi_remove_handle(t->loop->multi, t->easy);
		t->attached = 0;
	}
	if (t->stall_ev)
		event_del(t->stall_ev);
}

static void release(struct transfer *t)
{
	struct transfer_loop *loop = t->loop;

	detach(t);
	if (t->kick) {
		TAILQ_REMOVE(&loop->kq, t, kick_link);
		loop->nkick--;
		t->kick = 0;
	}
	TAILQ_REMOVE(&loop->all, t, all_link);
	loop->count--;
	if (t->easy)
		curl_easy_cleanup(t->easy);
	if (t->stall_ev)
		event_free(t->stall_ev);
	free(t->held);
	free(t->helper);
	free(t);
}

static void kick(struct transfer *t, unsigned what)
{
	struct transfer_loop *loop = t->loop;
	static const struct timeval now = { 0, 0 };

	if (t->kick == 0) {
		TAILQ_INSERT_TAIL(&loop->kq, t, kick_link);
		loop->nkick++;
	}
	t->kick |= what;
	if (!evtimer_pending(loop->kick_ev, NULL))
		evtimer_add(loop->kick_ev, &now);
}

static void arm_stall(struct transfer *t, long ms)
{
	struct timeval tv;

	if (t->stall_ev == NULL)
		return;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(t->stall_ev, &tv);
}

static void on_stall(evutil_socket_t fd, short what, void *p)
{
	struct transfer *t = p;
	uint64_t now = clock_mono_ms(), idle;

	if (t->state != T_RUNNING)
		return;
	if (t->paused || t->held_len) {
		/* waiting for the local side: its clock does not run */
		t->last_move_ms = now;
		arm_stall(t, t->stall_ms);
		return;
	}
	idle = now - t->last_move_ms;
	if (idle >= (uint64_t)t->stall_ms) {
		transfer_set_error(t, "no data moved for %llu ms", (unsigned long long)idle);
		finish(t, CURLE_OPERATION_TIMEDOUT);
		return;
	}
	arm_stall(t, t->stall_ms - (long)idle);
}

/* Reports t and frees it.  From the loop only. */
static void finish(struct transfer *t, CURLcode code)
{
	struct transfer_result r;
	transfer_done_fn done;
	long status = 0;
	int failed;

	t->state = T_FINISHING;
	detach(t);
	curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
	memset(&r, 0, sizeof r);
	r.http_status = status;
	r.curl_code = code;
	r.bytes = t->bytes;
	r.pauses = t->pauses;
	r.duration_ms = clock_mono_ms() - t->start_ms;
	failed = code != CURLE_OK || status < 200 || status > 299 || t->held_len;
	if (!failed && code == CURLE_OK && t->local_err[0])
		failed = 1; /* a callback reported an error curl did not see */
	if (t->helper_end) {
		if (t->helper_end(t->helper, !failed) != 0)
			failed = 1;
		t->helper_end = NULL;
	}
	if (!failed) {
		r.ok = 1;
		r.error = "";
	} else if (t->refused && !t->allowed && code == CURLE_COULDNT_CONNECT) {
		/* every address was refused (an allowed one that failed makes
		 * it a network failure like any other) */
		r.refused = 1;
		r.error = t->guard_err;
	} else if (t->local_err[0]) {
		r.error = t->local_err;
	} else if (code != CURLE_OK) {
		r.error = t->errbuf[0] ? t->errbuf : curl_easy_strerror(code);
	} else {
		snprintf(t->local_err, sizeof t->local_err, "HTTP status %ld%s", status,
			 status >= 300 && status <= 399 ? " (redirects are not followed)" : "");
		r.error = t->local_err;
	}
	done = t->is_put ? t->src.done : t->sink.done;
	if (done)
		done(t->arg, &r);
	release(t);
}

/* Offers the held bytes (there are some) to the sink once: if it takes
 * only part, it resumes us when it can take more.  -1: the sink failed. */
static int offer_held(struct transfer *t)
{
	size_t n = t->sink.write(t->arg, t->held + t->held_off, t->held_len);

	if (t->state == T_ABORTED)
		return 0;
	if (n == TRANSFER_SINK_ERROR || n > t->held_len)
		return -1;
	t->held_off += n;
	t->held_len -= n;
	t->bytes += n;
	if (t->held_len == 0)
		t->held_off = 0;
	return 0;
}

static int hold(struct transfer *t, const char *data, size_t len)
{
	if (len > t->held_cap) {
		char *p = realloc(t->held, len);

		if (p == NULL)
			return -1;
		t->held = p;
		t->held_cap = len;
	}
	memcpy(t->held, data, len);
	t->held_off = 0;
	t->held_len = len;
	return 0;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *p)
{
	struct transfer *t = p;
	size_t len = size * nmemb, n;

	if (t->state != T_RUNNING)
		return 0; /* aborted: curl fails it, nobody is told */
	t->last_move_ms = clock_mono_ms();
	if (t->is_put)
		return len; /* the response body of a PUT is dropped */
	if (!t->status_checked) {
		long status = 0;

		t->status_checked = 1;
		curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
		if (status < 200 || status > 299) {
			/* e.g. a 3xx: its body must not reach the sink */
			transfer_set_error(t, "HTTP status %ld%s", status,
					   status >= 300 && status <= 399
						   ? " (redirects are not followed)"
						   : "");
			return 0;
		}
	}
	if (t->held_len) {
		if (offer_held(t) != 0) {
			if (!t->local_err[0])
				transfer_set_error(t, "the sink failed");
			return 0;
		}
		if (t->state != T_RUNNING)
			return 0;
		if (t->held_len) {
			t->paused = 1;
			t->pauses++;
			return CURL_WRITEFUNC_PAUSE; /* curl keeps data, all of it */
		}
	}
	n = t->sink.write(t->arg, data, len);
	if (t->state != T_RUNNING)
		return 0;
	if (n == TRANSFER_SINK_ERROR || n > len) {
		if (!t->local_err[0])
			transfer_set_error(t, "the sink failed");
		return 0;
	}
	t->bytes += n;
	if (n == len)
		return len;
	if (n == 0) {
		t->paused = 1;
		t->pauses++;
		return CURL_WRITEFUNC_PAUSE;
	}
	/* A partial take: PAUSE would make curl deliver the taken part again,
	 * so the rest is held and the call acknowledged. */
	if (hold(t, data + n, len - n) != 0) {
		transfer_set_error(t, "out of memory");
		return 0;
	}
	t->pauses++;
	return len;
}

static size_t on_read(char *buf, size_t size, size_t nitems, void *p)
{
	struct transfer *t = p;
	size_t cap = size * nitems;
	ssize_t r;

	if (t->state != T_RUNNING)
		return CURL_READFUNC_ABORT;
	if (t->put_size >= 0) {
		uint64_t left = (uint64_t)t->put_size - t->bytes;

		if (left == 0)
			return 0;
		if (cap > left)
			cap = (size_t)left;
	}
	r = t->src.read(t->arg, buf, cap);
	if (t->state != T_RUNNING)
		return CURL_READFUNC_ABORT;
	if (r == TRANSFER_PAUSE) {
		t->paused = 1;
		t->pauses++;
		return CURL_READFUNC_PAUSE;
	}
	if (r < 0 || (size_t)r > cap) {
		if (!t->local_err[0])
			transfer_set_error(t, "the source failed");
		return CURL_READFUNC_ABORT;
	}
	if (r == 0 && t->put_size >= 0 && t->bytes < (uint64_t)t->put_size) {
		/* curl would send the short body and wait for the server */
		transfer_set_error(t, "the source ended after %llu of %lld bytes",
				   (unsigned long long)t->bytes, (long long)t->put_size);
		return CURL_READFUNC_ABORT;
	}
	t->last_move_ms = clock_mono_ms();
	t->bytes += (uint64_t)r;
	return (size_t)r;
}

/* Puts t into the multi.  0: running; -1: finished (t is gone). */
static int start(struct transfer *t)
{
	CURLMcode rc = curl_multi_add_handle(t->loop->multi, t->easy);

	if (rc != CURLM_OK) {
		transfer_set_error(t, "curl_multi_add_handle: %s", curl_multi_strerror(rc));
		finish(t, CURLE_FAILED_INIT);
		return -1;
	}
	t->attached = 1;
	t->state = T_RUNNING;
	t->last_move_ms = clock_mono_ms();
	if (t->stall_ms > 0)
		arm_stall(t, t->stall_ms);
	return 0;
}

static void do_resume(struct transfer *t)
{
	CURLcode rc;

	if (t->state != T_RUNNING && t->state != T_DRAINING)
		return;
	t->last_move_ms = clock_mono_ms();
	if (t->held_len) {
		if (offer_held(t) != 0) {
			if (!t->local_err[0])
				transfer_set_error(t, "the sink failed");
			finish(t, t->state == T_DRAINING ? t->code : CURLE_WRITE_ERROR);
			return;
		}
		if (t->state == T_ABORTED || t->held_len)
			return;
	}
	if (t->state == T_DRAINING) {
		finish(t, t->code);
		return;
	}
	if (!t->paused)
		return;
	t->paused = 0;
	/* may call on_write at once with the data curl kept */
	rc = curl_easy_pause(t->easy, CURLPAUSE_CONT);
	if (t->state == T_ABORTED)
		return;
	if (rc != CURLE_OK)
		finish(t, rc);
}

static void on_kick(evutil_socket_t fd, short what, void *p)
{
	struct transfer_loop *loop = p;
	unsigned n = loop->nkick; /* later kicks wait for the next turn */
	struct transfer *t;

	while (n-- > 0 && (t = TAILQ_FIRST(&loop->kq)) != NULL) {
		unsigned k = t->kick;

		TAILQ_REMOVE(&loop->kq, t, kick_link);
		loop->nkick--;
		t->kick = 0;
		if (k & K_REAP) {
			release(t);
			continue;
		}
		if ((k & K_ADD) && t->state == T_QUEUED && start(t) != 0)
			continue; /* finished: t is gone */
		if (k & K_RESUME)
			do_resume(t);
	}
	if (!TAILQ_EMPTY(&loop->kq)) {
		static const struct timeval now = { 0, 0 };

		evtimer_add(loop->kick_ev, &now);
	}
}

static void check_done(struct transfer_loop *loop)
{
	CURLMsg *m;
	int left;

	while ((m = curl_multi_info_read(loop->multi, &left)) != NULL) {
		struct transfer *t;
		CURL *easy = m->easy_handle;
		CURLcode code = m->data.result;
		char *priv = NULL;

		if (m->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(easy, CURLINFO_PRIVATE, &priv);
		t = (struct transfer *)priv;
		if (t == NULL || t->state != T_RUNNING)
			continue; /* an aborted one is reaped from the kick queue */
		if (code == CURLE_OK && !t->is_put && t->held_len) {
			/* the sink still owes us: done when it took the rest */
			t->state = T_DRAINING;
			t->code = code;
			detach(t);
			continue;
		}
		finish(t, code);
	}
}

/* ---- creating transfers ------------------------------------------------ */

#define SETOPT(e, o, v)                                          \
	do {                                                     \
		if (curl_easy_setopt((e), (o), (v)) != CURLE_OK) \
			goto bad;                                \
	} while (0)

static int setup_easy(struct transfer_loop *loop, struct transfer *t, const char *url)
{
	const struct transfer_options *o = &loop->opt;
	CURL *e = t->easy;

	SETOPT(e, CURLOPT_URL, url);
	SETOPT(e, CURLOPT_PRIVATE, (char *)t);
	SETOPT(e, CURLOPT_ERRORBUFFER, t->errbuf);
	SETOPT(e, CURLOPT_NOSIGNAL, 1L);
	SETOPT(e, CURLOPT_PROTOCOLS_STR, "http,https");
	SETOPT(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	SETOPT(e, CURLOPT_FOLLOWLOCATION, 0L);
	SETOPT(e, CURLOPT_FAILONERROR, 1L);
	/* pause/resume and chunked bodies are defined for HTTP/1.1 here */
	SETOPT(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	SETOPT(e, CURLOPT_HTTPHEADER, loop->headers);
	SETOPT(e, CURLOPT_USERAGENT, o->user_agent ? o->user_agent : TRANSFER_UA_DEFAULT);
	SETOPT(e, CURLOPT_PROXY, o->proxy ? o->proxy : "");
	SETOPT(e, CURLOPT_CONNECTTIMEOUT_MS, o->connect_timeout_ms);
	if (o->total_timeout_ms > 0)
		SETOPT(e, CURLOPT_TIMEOUT_MS, o->total_timeout_ms);
	if (o->keepalive_idle_sec > 0) {
		SETOPT(e, CURLOPT_TCP_KEEPALIVE, 1L);
		SETOPT(e, CURLOPT_TCP_KEEPIDLE, o->keepalive_idle_sec);
		SETOPT(e, CURLOPT_TCP_KEEPINTVL, o->keepalive_idle_sec);
	}
	if (o->ca_file)
		SETOPT(e, CURLOPT_CAINFO, o->ca_file);
	if (o->ca_path)
		SETOPT(e, CURLOPT_CAPATH, o->ca_path);
	if (o->insecure) {
		SETOPT(e, CURLOPT_SSL_VERIFYPEER, 0L);
		SETOPT(e, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	SETOPT(e, CURLOPT_WRITEFUNCTION, on_write);
	SETOPT(e, CURLOPT_WRITEDATA, t);
	if (t->is_put) {
		SETOPT(e, CURLOPT_UPLOAD, 1L);
		SETOPT(e, CURLOPT_READFUNCTION, on_read);
		SETOPT(e, CURLOPT_READDATA, t);
		/* -1: chunked, which curl does by itself for HTTP/1.1 */
		SETOPT(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)t->put_size);
	}
	if (o->setup && o->setup(e, o->setup_arg) != 0)
		goto bad;
	return 0;
bad:
	return -1;
}

/* curl is about to connect to an address it resolved (every address it
 * tries, a proxy's included): the guard sees the real destination, so a
 * host name that resolves somewhere unexpected is caught here. */
static curl_socket_t on_opensocket(void *clientp, curlsocktype purpose, struct curl_sockaddr *a)
{
	struct transfer *t = clientp;

	(void)purpose;
	if (t->guard && !t->guard(t->guard_arg, &a->addr, a->addrlen)) {
		char host[INET6_ADDRSTRLEN] = "?";
		const void *raw =
			a->family == AF_INET6
				? (const void *)&((struct sockaddr_in6 *)&a->addr)->sin6_addr
				: (const void *)&((struct sockaddr_in *)&a->addr)->sin_addr;
		inet_ntop(a->family, raw, host, sizeof host);
		t->refused = 1;
		/* the two ways out: the client's real address through a
		 * balancer, or the destination allowed by name */
		snprintf(t->guard_err, sizeof t->guard_err,
			 "connection to %s refused by the "
			 "callback guard: not the client's address (behind a balancer: list it in "
			 "trustedProxies and send the PROXY protocol), not in callbackAllow",
			 host);
		return CURL_SOCKET_BAD;
	}
	if (t->guard)
		t->allowed = 1;
	return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

int transfer_set_guard(struct transfer *t, transfer_guard_fn fn, void *arg)
{
	t->guard = fn;
	t->guard_arg = arg;
	if (curl_easy_setopt(t->easy, CURLOPT_OPENSOCKETFUNCTION, on_opensocket) != CURLE_OK ||
	    curl_easy_setopt(t->easy, CURLOPT_OPENSOCKETDATA, t) != CURLE_OK ||
	    /* a connection opened for another job was checked for that job */
	    curl_easy_setopt(t->easy, CURLOPT_FRESH_CONNECT, 1L) != CURLE_OK ||
	    curl_easy_setopt(t->easy, CURLOPT_FORBID_REUSE, 1L) != CURLE_OK)
		return -1;
	return 0;
}

static struct transfer *new_transfer(struct transfer_loop *loop, const char *url, int is_put,
				     void *arg)
{
	struct transfer *t;

	if (loop == NULL || url == NULL) {
		errno = EINVAL;
		return NULL;
	}
	t = calloc(1, sizeof *t);
	if (t == NULL)
		return NULL;
	t->loop = loop;
	t->is_put = is_put;
	t->arg = arg;
	t->put_size = -1;
	t->state = T_QUEUED;
	t->start_ms = clock_mono_ms();
	t->stall_ms = loop->opt.stall_timeout_ms;
	t->easy = curl_easy_init();
	if (t->easy == NULL) {
		free(t);
		errno = ENOMEM;
		return NULL;
	}
	if (t->stall_ms > 0) {
		t->stall_ev = evtimer_new(loop->base, on_stall, t);
		if (t->stall_ev == NULL) {
			curl_easy_cleanup(t->easy);
			free(t);
			errno = ENOMEM;
			return NULL;
		}
	}
	TAILQ_INSERT_TAIL(&loop->all, t, all_link);
	loop->count++;
	return t;
}

struct transfer *transfer_get(struct transfer_loop *loop, const char *url,
			      const struct transfer_sink *sink, void *arg)
{
	struct transfer *t;

	if (sink == NULL || sink->write == NULL) {
		errno = EINVAL;
		return NULL;
	}
	t = new_transfer(loop, url, 0, arg);
	if (t == NULL)
		return NULL;
	t->sink = *sink;
	if (setup_easy(loop, t, url) != 0) {
		release(t); /* never started: no callback ran */
		errno = EINVAL;
		return NULL;
	}
	kick(t, K_ADD);
	return t;
}

struct transfer *transfer_put(struct transfer_loop *loop, const char *url,
			      const struct transfer_source *src, void *arg, int64_t size)
{
	struct transfer *t;

	if (src == NULL || src->read == NULL || size < -1) {
		errno = EINVAL;
		return NULL;
	}
	t = new_transfer(loop, url, 1, arg);
	if (t == NULL)
		return NULL;
	t->src = *src;
	t->put_size = size;
	if (setup_easy(loop, t, url) != 0) {
		release(t); /* never started: no callback ran */
		errno = EINVAL;
		return NULL;
	}
	kick(t, K_ADD);
	return t;
}

void transfer_resume(struct transfer *t)
{
	if (t && (t->state == T_QUEUED || t->state == T_RUNNING || t->state == T_DRAINING))
		kick(t, K_RESUME);
}

void transfer_abort(struct transfer *t)
{
	if (t == NULL || t->state == T_ABORTED || t->state == T_FINISHING)
		return;
	t->state = T_ABORTED;
	if (t->stall_ev)
		event_del(t->stall_ev);
	if (t->helper_end) {
		t->helper_end(t->helper, 0);
		t->helper_end = NULL;
	}
	kick(t, K_REAP);
}

void transfer_loop_free(struct transfer_loop *loop)
{
	struct transfer *t;
	struct tsock *s;

	if (loop == NULL)
		return;
	while ((t = TAILQ_FIRST(&loop->all)) != NULL) {
		if (t->state != T_ABORTED) {
			t->state = T_ABORTED;
			if (t->helper_end) {
				t->helper_end(t->helper, 0);
				t->helper_end = NULL;
			}
		}
		release(t);
	}
	curl_multi_cleanup(loop->multi);
	while ((s = LIST_FIRST(&loop->socks)) != NULL) {
		LIST_REMOVE(s, link);
		event_free(s->ev);
		free(s);
	}
	event_free(loop->timer_ev);
	event_free(loop->kick_ev);
	curl_slist_free_all(loop->headers);
	free(loop->s_user_agent);
	free(loop->s_proxy);
	free(loop->s_ca_file);
	free(loop->s_ca_path);
	free(loop);
}

void transfer_set_end(struct transfer *t, int (*end)(void *helper, int ok), void *helper)
{
	t->helper = helper;
	t->helper_end = end;
}

void transfer_set_max_body(struct transfer *t, uint64_t max)
{
	if (max <= (uint64_t)INT64_MAX)
		curl_easy_setopt(t->easy, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)max);
}

struct event_base *transfer_loop_base(const struct transfer_loop *loop)
{
	return loop->base;
}
