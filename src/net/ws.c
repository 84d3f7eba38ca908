/*
 * ws.c - see ws.h.  One session type for both roles: the server side
 * (the daemon's handlers) and the client side (libexecclient), which
 * differ only in wslay's context (a client masks its frames with keys from
 * getrandom and refuses masked server frames).  wslay parses and builds frames; its recv callback
 * pulls bytes from the bufferevent's input buffer (on a plain socket the
 * session fills it itself, read_socket) and its send callback
 * appends to the output buffer (which never refuses, so wslay never holds
 * a half-written frame between two calls).  Everything else - states,
 * timers, back-pressure, the end of the connection - is here.
 *
 * States:
 *   OPEN     messages flow.
 *   CLOSING  we queued a close frame (ws_close, ping timeout); still
 *            reading, text dropped, until the peer's close frame arrives.
 *   LINGER   the websocket is over (close handshake done, or the connection
 *            failed and our close frame is queued).  Our last bytes drain,
 *            then the write side is shut (FIN) and input is discarded until
 *            the peer closes too: closing with unread input would make the
 *            kernel send a reset that can destroy our close frame before
 *            the peer reads it.
 *   ENDED    on_closed was called; the bufferevent is disabled.
 * Leaving OPEN arms close_ev (close_timeout_ms); when it fires the session
 * ends whatever the state.
 *
 * wslay answers most protocol errors itself with a close frame carrying
 * the right code (unmasked frame, RSV bits, bad opcode, broken
 * fragmentation: 1002; bad UTF-8: 1007; too big: 1009).  For errors found
 * by its frame layer (control frame longer than 125 bytes or fragmented,
 * non-minimal length) it queues a close frame without a code and fails;
 * that one is replaced here by a close frame with 1002 written directly.
 * The same happens to a close frame with a 1-byte body (RFC 6455 5.5.1:
 * the body is empty or starts with a 2-byte code), which wslay takes for
 * one without a code and answers in kind: msg_cb marks it (bad_close) and
 * the connection fails with 1002 once wslay_event_recv returns.
 *
 * Re-entrancy: every libevent callback counts itself in busy; owner
 * callbacks run only there, ws_* calls from the owner only queue and kick
 * the event loop, and ws_session_free inside a callback is deferred until
 * busy drops to zero.
 *
 * Memory: wslay's context is about 8.6 KiB (two fixed 4 KiB buffers, one
 * for input in its frame layer and one for output), more than everything
 * else an idle connection costs.  So it exists only while there is
 * websocket work in flight: it is created when bytes arrive or something
 * is to be sent, and released again (release_ctx_if_idle) once, in the
 * OPEN state, wslay holds nothing: its send queues are empty (flush hands
 * everything to the output buffer at once), the input buffer is empty, and
 * the bytes handed to it so far end on a frame boundary outside a
 * fragmented message (tracked by rx_scan over exactly those bytes; that
 * wslay's last read found nothing more, rx_starved, follows from it and is
 * kept as a guard).  Between frames, in the OPEN state, a context holds
 * nothing but its configuration, which ctx_get sets again.  Out of OPEN
 * the context stays until the end.  An idle connection's pings and pongs,
 * and small whole text messages either way, never create one (take_frames,
 * add_frame).  When the
 * context cannot be allocated, the peer still gets a close frame (1011),
 * written without wslay.
 */
#include "autoconfig.h"
#include "net/ws.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <wslay/wslay.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/utf8.h"
#include "net/ws_ping.h"

enum ws_state {
	ST_OPEN,
	ST_CLOSING,
	ST_LINGER,
	ST_ENDED
};

struct ws_session {
	struct bufferevent *bev;
	wslay_event_context_ptr ctx;
	struct ws_options opt;
	struct ws_callbacks cb;
	void *owner;
	enum ws_state state;
	uint16_t code;       /* what on_closed will report */
	uint16_t peer_code;  /* code of the peer's close frame */
	int bad_close;       /* the peer's close frame has a 1-byte body */
	uint64_t last_rx_ms; /* last frame activity */
	int heard;           /* a frame other than a pong came since the last
			      * tick: the peer is alive, no ping is due */
	/* pings and the liveness check: a place in the pinger's queue */
	struct ws_ping_entry ping;
	struct event *close_ev; /* deadline once out of OPEN */
	struct event *kick_ev;  /* run ws_process from the loop; on a plain
				 * socket also the read event (read_socket) */
	int busy;               /* libevent callbacks of ours on the stack */
	int free_pending;       /* ws_session_free called while busy */
	int read_paused;        /* back-pressure: EV_READ disabled */
	int direct;             /* plain socket: output written from flush, EV_WRITE
				 * only while a rest waits (see push_out); input
				 * read by kick_ev, not by the bufferevent */
	int wr_shut;            /* LINGER: write side shut down */
	uint32_t ping_seq;
	int out_dirty;     /* output written since the last on_drained */
	int close_pending; /* CLOSING: our close frame still to queue */
	int in_flush_now;  /* ws_session_flush_now runs: it writes itself,
				 * push_out must not (no callback from there) */
	/* Input handed to wslay, scanned for frame boundaries (rx_scan):
	 * header bytes of the frame under way, payload bytes still to come,
	 * inside a fragmented message, and "wslay's last read found no more
	 * bytes" (so it has parsed every whole frame it was given). */
	uint8_t rx_hdr_len;
	uint8_t rx_hdr[14];
	uint8_t rx_in_msg;
	uint8_t rx_starved;
	uint64_t rx_left;
	size_t reason_len;
	char reason[124];
};

/* A line about the session: to the owner's on_log, or else to the
 * process's log (log.h). */
static void ws_log(const struct ws_session *s, enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void ws_log(const struct ws_session *s, enum log_level level, const char *fmt, ...)
{
	char line[256];
	va_list ap;

	if (!s->cb.on_log && level > log_get_level())
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (s->cb.on_log)
		s->cb.on_log(s->owner, level, line);
	else
		log_msg(level, "%s", line);
}

static void ws_process(struct ws_session *s);
static void push_out(struct ws_session *s);
static ssize_t recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags,
		       void *user);
static ssize_t send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
		       void *user);
static void frame_start_cb(wslay_event_context_ptr ctx,
			   const struct wslay_event_on_frame_recv_start_arg *arg, void *user);
static void frame_chunk_cb(wslay_event_context_ptr ctx,
			   const struct wslay_event_on_frame_recv_chunk_arg *arg, void *user);
static void msg_cb(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
		   void *user);
static int genmask_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user);

/* ---- small helpers ---------------------------------------------------- */

static struct evbuffer *in_buf(struct ws_session *s)
{
	return bufferevent_get_input(s->bev);
}

static struct evbuffer *out_buf(struct ws_session *s)
{
	return bufferevent_get_output(s->bev);
}

/* ---- wslay's context, on demand --------------------------------------- */

/* The context, created if the session has none (the OPEN state between
 * frames).  NULL only when out of memory. */
static wslay_event_context_ptr ctx_get(struct ws_session *s)
{
	static const struct wslay_event_callbacks wcb = {
		.recv_callback = recv_cb,
		.send_callback = send_cb,
		.on_frame_recv_start_callback = frame_start_cb,
		.on_frame_recv_chunk_callback = frame_chunk_cb,
		.on_msg_recv_callback = msg_cb,
		.genmask_callback = genmask_cb,
	};

	if (s->ctx)
		return s->ctx;
	if ((s->opt.client_role ? wslay_event_context_client_init(&s->ctx, &wcb, s)
				: wslay_event_context_server_init(&s->ctx, &wcb, s)) != 0) {
		s->ctx = NULL;
		return NULL;
	}
	wslay_event_config_set_max_recv_msg_length(s->ctx, s->opt.max_msg_len);
	s->rx_starved = 1; /* a new context has parsed all it was given */
	return s->ctx;
}

/* Follows the bytes handed to wslay: where frames end, and whether a
 * fragmented message is under way (a data frame without FIN starts or
 * continues one, a data frame with FIN ends it; control frames between
 * fragments change nothing). */
static void rx_scan(struct ws_session *s, const uint8_t *p, size_t n)
{
	while (n > 0) {
		if (s->rx_left > 0) {
			size_t take = n < s->rx_left ? n : (size_t)s->rx_left;

			s->rx_left -= take;
			p += take;
			n -= take;
			continue;
		}
		s->rx_hdr[s->rx_hdr_len++] = *p++;
		n--;
		if (s->rx_hdr_len < 2)
			continue;
		unsigned len7 = s->rx_hdr[1] & 0x7fu;
		unsigned ext = len7 == 126 ? 2 : len7 == 127 ? 8 : 0;
		unsigned need = 2 + ext + ((s->rx_hdr[1] & 0x80u) ? 4 : 0);

		if (s->rx_hdr_len < need)
			continue;
		uint64_t len = len7;

		if (ext) {
			len = 0;
			for (unsigned i = 0; i < ext; i++)
				len = (len << 8) | s->rx_hdr[2 + i];
		}
		if ((s->rx_hdr[0] & 0x0fu) < 8) /* continuation, text, binary */
			s->rx_in_msg = !(s->rx_hdr[0] & 0x80u);
		s->rx_left = len;
		s->rx_hdr_len = 0;
	}
}

/* Frees wslay's context when it holds nothing (see the top of the file). */
static void release_ctx_if_idle(struct ws_session *s)
{
	if (!s->ctx || s->state != ST_OPEN || s->close_pending || !s->rx_starved || s->rx_hdr_len ||
	    s->rx_left || s->rx_in_msg || evbuffer_get_length(in_buf(s)) > 0 ||
	    wslay_event_want_write(s->ctx) || wslay_event_get_queued_msg_count(s->ctx) > 0 ||
	    !wslay_event_get_read_enabled(s->ctx) || wslay_event_get_close_received(s->ctx) ||
	    wslay_event_get_close_sent(s->ctx))
		return;
	wslay_event_context_free(s->ctx);
	s->ctx = NULL;
}

/* Unpredictable bytes for masking keys.  0, or -1 (getrandom failed). */
static int mask_key(uint8_t *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = getrandom(buf + got, len - got, 0);

		if (n < 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

/*
 * Frames without wslay's context.  An idle connection's only traffic is a
 * ping and its pong every pingIntervalSec, and a busy broker connection's
 * is small whole text messages (a WANT, a JOB, an OFFER, a DONE); creating
 * an 8.6 KiB context for each burst (and freeing it again) cost more CPU
 * than the rest of the frame's work.  So, while a session has no context
 * (OPEN, between frames, nothing queued in wslay), our frames go straight
 * into the output buffer behind what is there (add_frame: pings, pongs,
 * text messages), and whole ping and pong frames and whole unfragmented
 * text frames of at most TEXT_DIRECT_MAX bytes at the start of the input
 * are taken here (take_frames).  Anything else, or a frame not yet whole,
 * goes to wslay as before, which so decides every frame that breaks a
 * rule: a text frame is taken here only when it is final, has no RSV bit,
 * is masked exactly when the peer is a client, states its length in the
 * shortest form, is within max_msg_len and is valid UTF-8.  Frames written
 * here: FIN, no RSV, masked exactly when this is the client side.
 */
#define TEXT_DIRECT_MAX 4096

static int add_frame(struct ws_session *s, uint8_t opcode, const uint8_t *payload, size_t len)
{
	size_t hlen = len < 126 ? 2 : len <= 0xffff ? 4 : 10, mlen = s->opt.client_role ? 4 : 0;
	struct evbuffer_iovec v;
	uint8_t *p;

	if (evbuffer_reserve_space(out_buf(s), (ev_ssize_t)(hlen + mlen + len), &v, 1) != 1)
		return -1;
	p = v.iov_base;
	p[0] = (uint8_t)(0x80u | opcode);
	p[1] = (uint8_t)(len < 126 ? len : len <= 0xffff ? 126 : 127);
	for (size_t i = 2; i < hlen; i++)
		p[i] = (uint8_t)((uint64_t)len >> (8 * (hlen - 1 - i)));
	if (mlen) {
		p[1] |= 0x80u;
		if (mask_key(p + hlen, 4) != 0)
			return -1; /* nothing committed */
		for (size_t i = 0; i < len; i++)
			p[hlen + 4 + i] = payload[i] ^ p[hlen + i % 4];
	} else {
		memcpy(p + hlen, payload, len);
	}
	v.iov_len = hlen + mlen + len;
	if (evbuffer_commit_space(out_buf(s), &v, 1) != 0)
		return -1;
	s->out_dirty = 1;
	return 0;
}

/* The whole text frame at the start of the input, if take_frames may take
 * it (see above): its length on the wire, and its payload unmasked and
 * NUL-terminated in buf with its length in *len; else 0. */
static size_t text_frame(struct ws_session *s, const uint8_t *hdr, size_t have,
			 uint8_t buf[TEXT_DIRECT_MAX + 1], size_t *len)
{
	unsigned masked = (hdr[1] & 0x80u) != 0, len7 = hdr[1] & 0x7fu;
	size_t hlen = len7 == 126 ? 4 : 2, n = len7;
	uint8_t head[8];

	if (len7 == 127 || masked != (unsigned)!s->opt.client_role || have < hlen + 4 * masked)
		return 0;
	if (evbuffer_copyout(in_buf(s), head, hlen + 4 * masked) != (ev_ssize_t)(hlen + 4 * masked))
		return 0;
	if (len7 == 126 && (n = (size_t)head[2] << 8 | head[3]) < 126)
		return 0; /* not the shortest form: wslay fails it */
	size_t whole = hlen + 4 * masked + n;

	struct evbuffer_ptr payload;

	if (n > TEXT_DIRECT_MAX || n > s->opt.max_msg_len || have < whole)
		return 0;
	/* the payload alone: with its header the frame is longer than buf */
	if (evbuffer_ptr_set(in_buf(s), &payload, whole - n, EVBUFFER_PTR_SET) != 0 ||
	    evbuffer_copyout_from(in_buf(s), &payload, buf, n) != (ev_ssize_t)n)
		return 0;
	for (size_t i = 0; masked && i < n; i++)
		buf[i] ^= head[hlen + i % 4];
	buf[n] = '\0';
	if (!utf8_valid(buf, n))
		return 0;
	*len = n;
	return whole;
}

/* Takes whole ping, pong and text frames from the start of the input
 * while the session has no context (a ping is answered with its pong, a
 * text message goes to on_text).  Returns 1 when the input holds the start
 * of a ping or pong, not yet whole (it waits there, at most 131 bytes, for
 * the rest), 0 when the input is empty or starts with something for
 * wslay, -1 when an answer could not be queued. */
static int take_frames(struct ws_session *s)
{
	struct evbuffer *in = in_buf(s);
	uint8_t frame[2 + 4 + 125], text[TEXT_DIRECT_MAX + 1];

	while (!s->ctx && s->state == ST_OPEN) {
		size_t have = evbuffer_get_length(in), tlen, whole;
		ev_ssize_t got = evbuffer_copyout(in, frame, have < 2 ? have : 2);

		if (got < 1)
			return 0;
		if (frame[0] == 0x81 && got == 2 &&
		    (whole = text_frame(s, frame, have, text, &tlen))) {
			evbuffer_drain(in, whole);
			s->last_rx_ms = clock_mono_ms();
			s->heard = 1;
			if (!s->free_pending && s->cb.on_text)
				s->cb.on_text(s->owner, (const char *)text, tlen);
			continue;
		}
		/* FIN, no RSV bits, ping or pong, short form, masked as the
		 * role wants: else wslay decides (and refuses what is wrong) */
		if (frame[0] != 0x89 && frame[0] != 0x8A)
			return 0;
		if (got < 2)
			return 1;
		unsigned masked = (frame[1] & 0x80u) != 0, len = frame[1] & 0x7fu;

		whole = 2 + (masked ? 4 : 0) + len;
		if (len > 125 || masked != (unsigned)!s->opt.client_role)
			return 0;
		if (have < whole)
			return 1;
		if (evbuffer_remove(in, frame, whole) != (int)whole)
			return 0;
		s->last_rx_ms = clock_mono_ms();
		if (frame[0] == 0x89) {
			uint8_t *payload = frame + 2 + (masked ? 4 : 0);

			s->heard = 1;
			for (unsigned i = 0; masked && i < len; i++)
				payload[i] ^= frame[2 + i % 4];
			if (add_frame(s, 0x0A, payload, len) != 0)
				return -1;
		}
	}
	return 0;
}

/* ---- the ping sweep (ws_ping.c) ------------------------------------------ */

/* A due tick of the session that holds entry e. */
static void tick(struct ws_session *s);

static void tick_entry(struct ws_ping_entry *e)
{
	tick((struct ws_session *)(void *)((char *)e - offsetof(struct ws_session, ping)));
}

static void destroy(struct ws_session *s)
{
	if (s->ping.pinger) {
		ws_ping_stop(&s->ping);
		ws_pinger_release(s->ping.pinger);
	}
	if (s->close_ev)
		event_free(s->close_ev);
	if (s->kick_ev)
		event_free(s->kick_ev);
	if (s->bev)
		bufferevent_free(s->bev);
	if (s->ctx)
		wslay_event_context_free(s->ctx);
	free(s);
}

static void enter(struct ws_session *s)
{
	s->busy++;
}

/* After leave() the session may be gone. */
static void leave(struct ws_session *s)
{
	if (--s->busy == 0 && s->free_pending)
		destroy(s);
}

/* Runs ws_process from the loop soon (harmless if a dispatch is running). */
static void kick(struct ws_session *s)
{
	event_active(s->kick_ev, EV_TIMEOUT, 1);
}

/* Reading on or off: kick_ev's EV_READ on a plain socket, else the
 * bufferevent's.  Taking kick_ev out of the loop would drop a kick
 * pending on it: that one is kept. */
static void set_reading(struct ws_session *s, int on)
{
	if (!s->direct) {
		if (on)
			bufferevent_enable(s->bev, EV_READ);
		else
			bufferevent_disable(s->bev, EV_READ);
	} else if (on) {
		event_add(s->kick_ev, NULL);
	} else {
		int kicked = event_pending(s->kick_ev, EV_TIMEOUT, NULL) != 0;

		event_del(s->kick_ev);
		if (kicked)
			kick(s);
	}
}

static int code_sendable(unsigned code)
{
	return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1011) ||
	       (code >= 3000 && code <= 4999);
}

static void arm_close_timer(struct ws_session *s)
{
	struct timeval tv = {
		.tv_sec = s->opt.close_timeout_ms / 1000,
		.tv_usec = (s->opt.close_timeout_ms % 1000) * 1000,
	};

	if (!evtimer_pending(s->close_ev, NULL))
		evtimer_add(s->close_ev, &tv);
}

/* The session is over: tell the owner, once.  Only from callbacks. */
static void ws_end(struct ws_session *s, uint16_t code)
{
	assert(s->busy > 0);
	if (s->state == ST_ENDED)
		return;
	s->state = ST_ENDED;
	s->code = code;
	ws_ping_stop(&s->ping);
	evtimer_del(s->close_ev);
	event_del(s->kick_ev);
	bufferevent_disable(s->bev, EV_READ | EV_WRITE);
	bufferevent_setcb(s->bev, NULL, NULL, NULL, NULL);
	ws_log(s, LOG_LVL_DEBUG, "websocket: session over, code %u", (unsigned)code);
	if (!s->free_pending && s->cb.on_closed)
		s->cb.on_closed(s->owner, code);
}

void ws_tls_close_notify(struct bufferevent *bev)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);

	/* best effort: the output is drained, so the alert normally fits in
	 * the socket buffer; the FIN follows either way.  Whatever it queues
	 * on OpenSSL's per-thread error queue is dropped: a stale entry there
	 * would make the next SSL_get_error of another connection on this
	 * thread report a failure */
	if (ssl) {
		ERR_clear_error();
		SSL_shutdown(ssl);
		ERR_clear_error();
	}
}

/* TLS: what flush_now would send raw goes through the SSL object instead
 * (best effort, the socket is non-blocking), then close_notify. */
static void tls_flush_now(struct ws_session *s, SSL *ssl)
{
	struct evbuffer *out = out_buf(s);
	size_t len = evbuffer_get_length(out);

	ERR_clear_error();
	if (len > 0 && len <= INT_MAX) {
		int n = SSL_write(ssl, evbuffer_pullup(out, (ssize_t)len), (int)len);

		if (n > 0)
			evbuffer_drain(out, (size_t)n);
	}
	ERR_clear_error();
	ws_tls_close_notify(s->bev);
}

static void shut_write(struct ws_session *s)
{
	evutil_socket_t fd = bufferevent_getfd(s->bev);

	ws_tls_close_notify(s->bev); /* TLS: close_notify before the FIN */
	s->wr_shut = 1;
	bufferevent_disable(s->bev, EV_WRITE);
	if (fd < 0 || shutdown(fd, SHUT_WR) != 0)
		ws_end(s, s->code);
}

/* Enter LINGER: no more websocket input, flush, then FIN. */
static void linger(struct ws_session *s)
{
	s->state = ST_LINGER;
	if (s->ctx)
		wslay_event_shutdown_read(s->ctx);
	arm_close_timer(s);
	ws_ping_stop(&s->ping);
	if (s->read_paused) {
		s->read_paused = 0;
		set_reading(s, 1);
	}
	evbuffer_drain(in_buf(s), evbuffer_get_length(in_buf(s)));
	if (evbuffer_get_length(out_buf(s)) == 0)
		shut_write(s);
	else
		push_out(s);
}

/*
 * Fails the connection with code after an error wslay reported from
 * wslay_event_recv: its own close frame (if any) carries no code, so it is
 * dropped and ours written directly - unless a close frame already went.
 */
static void fail_raw(struct ws_session *s, uint16_t code)
{
	uint8_t payload[2] = { (uint8_t)(code >> 8), (uint8_t)(code & 0xff) };

	ws_log(s, LOG_LVL_DEBUG, "websocket: protocol error, closing with %u", (unsigned)code);
	if (s->ctx)
		wslay_event_shutdown_read(s->ctx);
	s->close_pending = 0;
	if (!s->ctx || !wslay_event_get_close_sent(s->ctx)) {
		if (s->ctx)
			wslay_event_shutdown_write(s->ctx);
		(void)add_frame(s, 0x08, payload, sizeof payload);
		s->code = code;
	}
	linger(s);
}

/* Rejects the message being delivered: close with code, read no more. */
static void fail_msg(struct ws_session *s, uint16_t code)
{
	ws_log(s, LOG_LVL_DEBUG, "websocket: closing with %u", (unsigned)code);
	wslay_event_queue_close(s->ctx, code, NULL, 0);
	wslay_event_shutdown_read(s->ctx);
}

/* The output buffer was written (maybe not all of it): lift the
 * back-pressure, and once it is empty shut the write side (LINGER) or
 * tell the owner.  libevent also calls write_cb when nothing was written:
 * the checks filter that. */
static void output_drained(struct ws_session *s)
{
	if (s->read_paused && s->state != ST_ENDED) {
		s->read_paused = 0;
		set_reading(s, 1);
	}
	if (s->state == ST_LINGER && !s->wr_shut && evbuffer_get_length(out_buf(s)) == 0) {
		shut_write(s);
	} else if (s->state == ST_OPEN && s->out_dirty && evbuffer_get_length(out_buf(s)) == 0) {
		s->out_dirty = 0;
		if (!s->free_pending && s->cb.on_drained)
			s->cb.on_drained(s->owner);
	}
}

/*
 * Plain sockets: what was queued is written now, in one writev, instead
 * of arming EV_WRITE and writing on the next turn of the loop (two
 * epoll_ctl calls and a loop turn per message, on the path of every OFFER
 * and DONE).  Only a rest the kernel did not take arms EV_WRITE, and
 * write_cb disarms it once the rest is out; a write error is left to the
 * bufferevent, which meets it again and reports it through event_cb.
 * The socket bufferevent freezes the start of its output (only it drains
 * there): lifted for the write, single-threaded as everything here.
 */
static void push_out(struct ws_session *s)
{
	struct evbuffer *out = out_buf(s);
	evutil_socket_t fd = bufferevent_getfd(s->bev);
	struct evbuffer_iovec vec[16];
	struct iovec iov[16];
	struct msghdr mh = { .msg_iov = iov };
	int n;

	if (!s->direct || s->wr_shut || s->state == ST_ENDED || s->in_flush_now ||
	    evbuffer_get_length(out) == 0 || fd < 0)
		return;
	n = evbuffer_peek(out, -1, NULL, vec, 16);
	if (n > 16)
		n = 16;
	for (int i = 0; i < n; i++) {
		iov[i].iov_base = vec[i].iov_base;
		iov[i].iov_len = vec[i].iov_len;
	}
	mh.msg_iovlen = (size_t)(n > 0 ? n : 0);
	/* MSG_NOSIGNAL: a peer gone is an error here, never a SIGPIPE in a
	 * program that links libexecclient without ignoring it */
	ssize_t sent = n > 0 ? sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) : -1;
	if (sent > 0) {
		evbuffer_unfreeze(out, 1);
		evbuffer_drain(out, (size_t)sent);
		evbuffer_freeze(out, 1);
	}
	if (evbuffer_get_length(out) > 0)
		bufferevent_enable(s->bev, EV_WRITE);
	else
		output_drained(s);
}

/*
 * Hands wslay's queue to the output buffer; applies back-pressure.  Our
 * close frame is queued only once the messages before it went out: wslay
 * sends control frames ahead of queued messages, and nothing after a close.
 */
static void queue_out(struct ws_session *s)
{
	if (s->state == ST_ENDED)
		return;
	if (!s->ctx && s->close_pending && !ctx_get(s)) {
		/* no memory for wslay: our close frame goes out as it is, and
		 * the connection lingers (no callback from here: flush_now) */
		uint8_t payload[2 + sizeof s->reason];

		payload[0] = (uint8_t)(s->code >> 8);
		payload[1] = (uint8_t)(s->code & 0xff);
		memcpy(payload + 2, s->reason, s->reason_len);
		s->close_pending = 0;
		(void)add_frame(s, 0x08, payload, 2 + s->reason_len);
		linger(s);
		return;
	}
	for (int pass = 0; s->ctx && pass < 2; pass++) {
		if (wslay_event_want_write(s->ctx) && wslay_event_send(s->ctx) != 0) {
			ws_log(s, LOG_LVL_WARN, "websocket: cannot queue output");
			ws_end(s, WS_CLOSE_INTERNAL_ERROR);
			return;
		}
		if (!s->close_pending)
			break;
		s->close_pending = 0;
		/* fails only if wslay queued a close itself: settle() follows */
		wslay_event_queue_close(s->ctx, s->code, (const uint8_t *)s->reason, s->reason_len);
	}
	if (s->state != ST_LINGER && !s->read_paused &&
	    evbuffer_get_length(out_buf(s)) > s->opt.out_high_water) {
		s->read_paused = 1;
		set_reading(s, 0);
	}
}

/* queue_out, then the bytes go to the socket (plain sockets) or to the
 * bufferevent's next write. */
static void flush(struct ws_session *s)
{
	queue_out(s);
	push_out(s);
}

/*
 * Moves OPEN/CLOSING to LINGER when wslay is done reading: the peer's
 * close frame came (wslay queued the answer, which flush sent, unless ours
 * went first), or wslay or fail_msg failed the connection.  The code to
 * report is the one of the close frame that went out: ours, the echo of
 * the peer's (1005 when it had none), or the one of the failure.
 */
static void settle(struct ws_session *s)
{
	if ((s->state != ST_OPEN && s->state != ST_CLOSING) || !s->ctx)
		return;
	if (!wslay_event_get_close_received(s->ctx) && wslay_event_get_read_enabled(s->ctx))
		return;
	if (wslay_event_get_close_sent(s->ctx))
		s->code = wslay_event_get_status_code_sent(s->ctx);
	else if (s->state == ST_OPEN)
		s->code = wslay_event_get_close_received(s->ctx) && s->peer_code
				  ? s->peer_code
				  : WS_CLOSE_ABNORMAL;
	linger(s);
}

/* The read's messages are all delivered, by take_frames or by wslay:
 * on_read_end (ws.h) may act on them together. */
static void read_end(struct ws_session *s)
{
	if (s->cb.on_read_end && !s->free_pending && s->state != ST_ENDED)
		s->cb.on_read_end(s->owner);
}

/* Reads what arrived, sends what is queued, updates the state. */
static void ws_process(struct ws_session *s)
{
	if (s->state == ST_OPEN || s->state == ST_CLOSING) {
		int control = take_frames(s);

		if (control < 0) {
			read_end(s); /* after the messages taken before the failure */
			ws_end(s, WS_CLOSE_INTERNAL_ERROR);
			return;
		}
		if (control == 0 && evbuffer_get_length(in_buf(s)) > 0 && !s->ctx)
			/* the rest is for wslay: take_frames' texts are answered
			 * first, straight into the output, where nothing wslay
			 * then queues (a close for a frame over max_msg_len,
			 * which admits no message after it) can drop them */
			read_end(s);
		if (control == 0 && evbuffer_get_length(in_buf(s)) > 0 && !ctx_get(s)) {
			ws_log(s, LOG_LVL_WARN, "websocket: out of memory for a frame parser");
			fail_raw(s, WS_CLOSE_INTERNAL_ERROR);
			flush(s);
			return;
		}
		if (s->ctx && wslay_event_get_read_enabled(s->ctx) &&
		    evbuffer_get_length(in_buf(s)) > 0) {
			int r = wslay_event_recv(s->ctx);

			read_end(s);
			if (r != 0 || s->bad_close) {
				fail_raw(s, r == WSLAY_ERR_NOMEM ? WS_CLOSE_INTERNAL_ERROR
								 : WS_CLOSE_PROTOCOL_ERROR);
				flush(s);
				return;
			}
		} else {
			read_end(s); /* every message of the read came by take_frames */
		}
	} else if (s->state == ST_LINGER) {
		evbuffer_drain(in_buf(s), evbuffer_get_length(in_buf(s)));
	}
	flush(s);
	if (s->state != ST_ENDED)
		settle(s);
	release_ctx_if_idle(s);
}

/* Queues our close frame and enters CLOSING. */
static void begin_close(struct ws_session *s, uint16_t code, const char *reason)
{
	size_t rlen = reason ? strlen(reason) : 0;

	if (s->state != ST_OPEN || s->free_pending)
		return;
	if (!code_sendable(code)) {
		ws_log(s, LOG_LVL_ERROR, "websocket: close code %u cannot be sent, using 1011",
		       (unsigned)code);
		code = WS_CLOSE_INTERNAL_ERROR;
	}
	if (rlen > 123)
		rlen = 123;
	/* cut back to a whole UTF-8 sequence; give up on a bad reason */
	while (rlen > 0 && !utf8_valid((const unsigned char *)reason, rlen))
		rlen--;
	memcpy(s->reason, reason ? reason : "", rlen);
	s->reason_len = rlen;
	s->close_pending = 1; /* flush() queues it behind pending messages */
	s->code = code;
	s->state = ST_CLOSING;
	ws_ping_stop(&s->ping);
	arm_close_timer(s);
}

/* ---- wslay callbacks ---------------------------------------------------- */

static ssize_t recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
	struct ws_session *s = user;
	int n = evbuffer_remove(in_buf(s), buf, len);

	if (n <= 0) {
		s->rx_starved = 1;
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	s->rx_starved = 0;
	rx_scan(s, buf, (size_t)n);
	return n;
}

static ssize_t send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
		       void *user)
{
	struct ws_session *s = user;

	if (evbuffer_add(out_buf(s), data, len) != 0) {
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	s->out_dirty = 1;
	return (ssize_t)len;
}

static void frame_start_cb(wslay_event_context_ptr ctx,
			   const struct wslay_event_on_frame_recv_start_arg *arg, void *user)
{
	struct ws_session *s = user;

	s->last_rx_ms = clock_mono_ms();
	if (arg->opcode != WSLAY_PONG)
		s->heard = 1;
}

static void frame_chunk_cb(wslay_event_context_ptr ctx,
			   const struct wslay_event_on_frame_recv_chunk_arg *arg, void *user)
{
	struct ws_session *s = user;

	s->last_rx_ms = clock_mono_ms();
}

static void msg_cb(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
		   void *user)
{
	struct ws_session *s = user;
	const char *msg = arg->msg ? (const char *)arg->msg : "";

	switch (arg->opcode) {
	case WSLAY_TEXT_FRAME:
		if (s->state != ST_OPEN || s->free_pending)
			return;
		/* wslay checks UTF-8 as well; this is the contract of on_text */
		if (!utf8_valid((const unsigned char *)msg, arg->msg_length)) {
			fail_msg(s, WS_CLOSE_INVALID_PAYLOAD);
			return;
		}
		if (s->cb.on_text)
			s->cb.on_text(s->owner, msg, arg->msg_length);
		break;
	case WSLAY_BINARY_FRAME:
		if (s->state == ST_OPEN)
			fail_msg(s, WS_CLOSE_UNSUPPORTED_DATA);
		break;
	case WSLAY_CONNECTION_CLOSE:
		s->peer_code = arg->status_code;
		if (arg->msg_length == 1) {
			/* wslay queued a close without a code: fail_raw replaces it */
			s->bad_close = 1;
			wslay_event_shutdown_read(ctx);
		}
		break;
	default: /* ping (wslay queued the pong) or pong */ break;
	}
}

/* Masking keys of a client session (RFC 6455 5.3: unpredictable). */
static int genmask_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user)
{
	if (mask_key(buf, len) != 0) {
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	return 0;
}

/* ---- libevent callbacks ------------------------------------------------- */

static void read_cb(struct bufferevent *bev, void *arg)
{
	struct ws_session *s = arg;

	enter(s);
	ws_process(s);
	leave(s);
}

static void write_cb(struct bufferevent *bev, void *arg)
{
	struct ws_session *s = arg;

	enter(s);
	if (s->direct && s->state != ST_ENDED && evbuffer_get_length(out_buf(s)) == 0)
		bufferevent_disable(s->bev, EV_WRITE);
	output_drained(s);
	leave(s);
}

/* The peer closed (eof) or the connection failed. */
static void connection_lost(struct ws_session *s, int eof)
{
	if (s->state == ST_OPEN) {
		ws_log(s, LOG_LVL_DEBUG, "websocket: connection lost (%s)", eof ? "eof" : "error");
		ws_end(s, WS_CLOSE_ABNORMAL);
	} else {
		ws_end(s, s->code);
	}
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct ws_session *s = arg;

	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)))
		return;
	enter(s);
	connection_lost(s, (what & BEV_EVENT_EOF) != 0);
	leave(s);
}

/*
 * Plain sockets: what arrived goes into the input buffer with one recv.
 * The bufferevent would ask FIONREAD first, then readv: two system calls
 * per read where one does, and an idle connection's only input is a pong
 * per ping interval.  At most 4096 bytes per call, as libevent reads.
 * The socket bufferevent freezes the end of its input (only it fills it
 * there): lifted for the read.  Returns -1 when the session ended.
 */
static int read_socket(struct ws_session *s)
{
	struct evbuffer *in = in_buf(s);
	struct evbuffer_iovec v;
	ssize_t n = -1;

	evbuffer_unfreeze(in, 0);
	if (evbuffer_reserve_space(in, 4096, &v, 1) == 1) {
		n = recv(bufferevent_getfd(s->bev), v.iov_base, v.iov_len, MSG_DONTWAIT);
		if (n > 0) {
			v.iov_len = (size_t)n;
			evbuffer_commit_space(in, &v, 1);
		}
	}
	evbuffer_freeze(in, 0);
	if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)))
		return 0;
	connection_lost(s, n == 0);
	return -1;
}

/*
 * A tick of the pinger: the liveness check, or a ping.  No ping when the
 * peer sent a frame other than a pong since the last tick (a message, or
 * a ping of its own): that already shows it alive, and a peer that pings
 * on its own (libexecclient does) then costs one exchange per interval,
 * not two.  A pong does not count: it is the answer to our last ping, and
 * counting it would halve the pings.  A ping is skipped only while the
 * peer's last frame leaves the next tick a period to spare before the
 * deadline: then that tick still finds the peer in time and pings it if
 * it has fallen silent, so a peer that answers pings gets as long for its
 * pong as without the skip (with pingTimeoutSec under twice the period, a
 * ping is never skipped).  The deadline is the same either way.
 */
static void tick(struct ws_session *s)
{
	enter(s);
	if (s->state == ST_OPEN && !s->free_pending) {
		uint64_t now = clock_mono_ms();
		int heard = s->heard && (!s->opt.ping_timeout_ms ||
					 now - s->last_rx_ms + 2ull * s->ping.period_ms <=
						 s->opt.ping_timeout_ms);

		s->heard = 0;
		if (s->opt.ping_timeout_ms && now - s->last_rx_ms >= s->opt.ping_timeout_ms) {
			ws_log(s, LOG_LVL_DEBUG, "websocket: peer silent for %llu ms",
			       (unsigned long long)(now - s->last_rx_ms));
			begin_close(s, WS_CLOSE_GOING_AWAY, "ping timeout");
		} else if (s->opt.ping_interval_ms && !heard) {
			uint8_t payload[4] = { (uint8_t)(s->ping_seq >> 24),
					       (uint8_t)(s->ping_seq >> 16),
					       (uint8_t)(s->ping_seq >> 8), (uint8_t)s->ping_seq };
			struct wslay_event_msg m = { WSLAY_PING, payload, sizeof payload };

			s->ping_seq++;
			if (s->ctx) {
				wslay_event_queue_msg(s->ctx, &m);
			} else if (add_frame(s, 0x09, payload, sizeof payload) != 0) {
				ws_end(s, WS_CLOSE_INTERNAL_ERROR);
				leave(s);
				return;
			}
		}
		flush(s);
		if (s->state != ST_ENDED)
			settle(s);
		release_ctx_if_idle(s);
	}
	leave(s);
}

static void close_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ws_session *s = arg;

	enter(s);
	if (s->state == ST_CLOSING || s->state == ST_LINGER) {
		ws_log(s, LOG_LVL_DEBUG, "websocket: close timeout");
		ws_end(s, s->code);
	}
	leave(s);
}

static void kick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ws_session *s = arg;

	enter(s);
	if (s->state != ST_ENDED && (!(what & EV_READ) || read_socket(s) == 0))
		ws_process(s);
	leave(s);
}

/* ---- public API --------------------------------------------------------- */

void ws_options_default(struct ws_options *opt)
{
	opt->max_msg_len = WS_DEFAULT_MAX_MSG_LEN;
	opt->ping_interval_ms = WS_DEFAULT_PING_INTERVAL_MS;
	opt->ping_timeout_ms = WS_DEFAULT_PING_TIMEOUT_MS;
	opt->close_timeout_ms = WS_DEFAULT_CLOSE_TIMEOUT_MS;
	opt->out_high_water = WS_DEFAULT_OUT_HIGH_WATER;
	opt->client_role = 0;
	opt->pinger = NULL;
}

int ws_set_keepalive(int fd)
{
	int on = 1, idle = 60, intvl = 10, cnt = 6;

	if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) != 0)
		return -1;
	/* TCP only; other sockets (tests use socketpairs) refuse, harmlessly */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
	return 0;
}

struct ws_session *ws_session_new(struct bufferevent *bev, const struct ws_options *opt,
				  const struct ws_callbacks *cb, void *owner)
{
	struct event_base *base = bufferevent_get_base(bev);
	struct ws_session *s = calloc(1, sizeof *s);
	unsigned period;
	evutil_socket_t fd;

	if (s == NULL)
		return NULL;
	if (opt)
		s->opt = *opt;
	else
		ws_options_default(&s->opt);
	if (s->opt.max_msg_len == 0)
		s->opt.max_msg_len = WS_DEFAULT_MAX_MSG_LEN;
	if (s->opt.close_timeout_ms == 0)
		s->opt.close_timeout_ms = WS_DEFAULT_CLOSE_TIMEOUT_MS;
	if (s->opt.out_high_water == 0)
		s->opt.out_high_water = WS_DEFAULT_OUT_HIGH_WATER;
	if (cb)
		s->cb = *cb;
	s->owner = owner;
	s->state = ST_OPEN;
	s->last_rx_ms = clock_mono_ms();

	/* wslay's context is created on demand (ctx_get) */
	if (s->opt.pinger) {
		s->ping.pinger = s->opt.pinger;
		ws_pinger_hold(s->ping.pinger);
	} else {
		s->ping.pinger = ws_pinger_new(base);
	}
	fd = bufferevent_getfd(bev);
	s->direct = fd >= 0 && bufferevent_openssl_get_ssl(bev) == NULL;
	s->close_ev = evtimer_new(base, close_timer_cb, s);
	s->kick_ev = s->direct ? event_new(base, fd, EV_READ | EV_PERSIST, kick_cb, s)
			       : event_new(base, -1, 0, kick_cb, s);
	if (!s->ping.pinger || !s->close_ev || !s->kick_ev ||
	    (s->direct && event_add(s->kick_ev, NULL) != 0))
		goto fail;
	period = s->opt.ping_interval_ms;
	if (s->opt.ping_timeout_ms && (period == 0 || s->opt.ping_timeout_ms < period))
		period = s->opt.ping_timeout_ms;
	ws_ping_start(&s->ping, period, tick_entry);

	if (fd >= 0 && ws_set_keepalive(fd) != 0)
		ws_log(s, LOG_LVL_DEBUG, "websocket: cannot enable keepalive on fd %d", (int)fd);
	bufferevent_setcb(bev, read_cb, write_cb, event_cb, s);
	bufferevent_setwatermark(bev, EV_READ | EV_WRITE, 0, 0);
	bufferevent_set_timeouts(bev, NULL, NULL);
	s->bev = bev;
	if (!s->direct) {
		bufferevent_enable(bev, EV_READ | EV_WRITE);
	} else {
		bufferevent_disable(bev, EV_READ); /* kick_ev reads */
		if (evbuffer_get_length(out_buf(s)) > 0)
			bufferevent_enable(bev, EV_WRITE);
		else
			bufferevent_disable(bev, EV_WRITE);
	}
	/* frames that came with the upgrade request, if any */
	event_active(s->kick_ev, EV_TIMEOUT, 1);
	return s;
fail:
	destroy(s); /* s->bev is still NULL: bev stays the caller's */
	return NULL;
}

int ws_send_text(struct ws_session *s, const char *msg, size_t len)
{
	struct wslay_event_msg m = { WSLAY_TEXT_FRAME, (const uint8_t *)msg, len };

	if (s->state != ST_OPEN || s->free_pending)
		return -1;
	if (!utf8_valid((const unsigned char *)msg, len)) {
		ws_log(s, LOG_LVL_ERROR, "websocket: refusing to send invalid UTF-8");
		return -1;
	}
	if (!s->ctx && add_frame(s, WSLAY_TEXT_FRAME, (const uint8_t *)msg, len) == 0) {
		kick(s); /* wslay holds nothing: straight behind the output */
		return 0;
	}
	if (!ctx_get(s)) {
		/* no memory for wslay: the peer is told (1011), not left waiting */
		begin_close(s, WS_CLOSE_INTERNAL_ERROR, NULL);
		kick(s);
		return -1;
	}
	if (wslay_event_queue_msg(s->ctx, &m) != 0)
		return -1;
	kick(s);
	return 0;
}

void ws_close(struct ws_session *s, uint16_t code, const char *reason)
{
	if (s->state != ST_OPEN || s->free_pending)
		return;
	begin_close(s, code, reason);
	kick(s);
}

void ws_session_free(struct ws_session *s)
{
	if (s == NULL)
		return;
	if (s->busy) {
		s->free_pending = 1;
		memset(&s->cb, 0, sizeof s->cb);
		return;
	}
	destroy(s);
}

size_t ws_session_pending_out(const struct ws_session *s)
{
	return evbuffer_get_length(bufferevent_get_output(s->bev)) +
	       (s->ctx ? wslay_event_get_queued_msg_length(s->ctx) : 0);
}

int ws_session_is_open(const struct ws_session *s)
{
	return s->state == ST_OPEN && !s->free_pending &&
	       (!s->ctx || wslay_event_get_read_enabled(s->ctx));
}

int ws_session_has_parser(const struct ws_session *s)
{
	return s->ctx != NULL;
}

void ws_session_flush_now(struct ws_session *s)
{
	struct evbuffer_iovec vec[16];
	struct iovec iov[16];
	struct msghdr mh = { 0 };
	evutil_socket_t fd;
	int n;

	if (s == NULL || s->state == ST_ENDED || s->free_pending)
		return;
	enter(s);
	s->in_flush_now = 1;
	queue_out(s); /* not flush: no callback from here (ws.h) */
	s->in_flush_now = 0;
	fd = bufferevent_getfd(s->bev);
	if (bufferevent_openssl_get_ssl(s->bev)) {
		tls_flush_now(s, bufferevent_openssl_get_ssl(s->bev));
		if (fd >= 0)
			(void)shutdown(fd, SHUT_WR);
		leave(s);
		return;
	}
	/* a socket bufferevent keeps the start of its output frozen (only it
	 * may drain it): peek at the bytes and send them directly */
	n = evbuffer_peek(out_buf(s), -1, NULL, vec, 16);
	if (fd >= 0 && n > 0) {
		if (n > 16)
			n = 16;
		for (int i = 0; i < n; i++) {
			iov[i].iov_base = vec[i].iov_base;
			iov[i].iov_len = vec[i].iov_len;
		}
		mh.msg_iov = iov;
		mh.msg_iovlen = (size_t)n;
		(void)sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	if (fd >= 0)
		(void)shutdown(fd, SHUT_WR);
	leave(s);
}
