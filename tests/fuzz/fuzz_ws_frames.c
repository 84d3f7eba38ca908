/*
 * fuzz_ws_frames.c - fuzz target of the websocket frame path: the server
 * side session of src/net/ws.c (wslay under a libevent bufferevent).
 * The input is every byte a client sent after the opening handshake.
 *
 * One input = one session on a fresh event_base over a socketpair: the
 * peer end writes the input (as fast as the socket takes it), then shuts
 * its write side (EOF), and reads and drops whatever the server sends.  The
 * owner echoes every text message, and answers the text "close" with
 * ws_close(4000) and "free" with ws_session_free from inside the callback,
 * so the owner's paths are fuzzed too.  The loop runs until the session
 * ended or was freed; a session that has not ended within a deadline is a
 * finding.  The close timeout is set past that deadline: the peer always
 * ends with EOF, on which the session must end by itself, and a timer that
 * fired only when the machine stalled a run would make the seeded runs of
 * tests/fuzz/run.sh differ from one another.
 *
 * Properties checked, beyond "no crash, no leak, no undefined behaviour":
 *  - on_text gets only whole valid UTF-8 of at most max_msg_len bytes,
 *    and never after on_closed;
 *  - on_closed is called exactly once, with a code ws.h documents;
 *  - after the input and EOF the session always ends, without the close
 *    timer;
 *  - what the server sent is well framed (unmasked, no RSV bits, text,
 *    close, ping or pong only), nothing follows its close frame, and that
 *    close frame carries the code on_closed reported (no code: 1005).
 */
#include "autoconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/log.h"
#include "common/utf8.h"
#include "fuzz.h"
#include "net/ws.h"

/* Above the direct path's 4096 bytes (TEXT_DIRECT_MAX, src/net/ws.c), so
 * that text frames of every length it takes reach it (and those between
 * the two go to wslay and are taken there), and small enough that 1009 is
 * reachable with inputs near libFuzzer's default length. */
#define MAX_MSG 5120
#define DEADLINE_MS 5000
#define CLOSE_TIMEOUT_MS (2 * DEADLINE_MS) /* never fires: see above */

struct run {
	struct event_base *base;
	struct ws_session *s;
	int peer; /* the client's end of the socketpair */
	const uint8_t *in;
	size_t in_len, in_off;
	struct event *peer_rd, *peer_wr, *deadline;
	struct evbuffer *from_server; /* every byte the server sent */
	int closed;                   /* on_closed calls */
	uint16_t code;
	int freed; /* the owner freed the session in a callback */
	int timed_out;
};

/* Codes ws.h says on_closed reports: ours, an echo of a valid peer code
 * (RFC 6455 7.4: 1000-1003, 1007-1011, 3000-4999), 1005, 1006. */
static int documented_code(unsigned code)
{
	return (code >= 1000 && code <= 1003) || code == 1005 || code == 1006 ||
	       (code >= 1007 && code <= 1011) || (code >= 3000 && code <= 4999);
}

static void on_text(void *owner, const char *msg, size_t len)
{
	struct run *r = owner;

	FUZZ_CHECK(!r->closed && !r->freed);
	FUZZ_CHECK(len <= MAX_MSG);
	FUZZ_CHECK(utf8_valid((const unsigned char *)msg, len));
	if (len == 5 && memcmp(msg, "close", 5) == 0) {
		ws_close(r->s, 4000, "closing as asked");
	} else if (len == 4 && memcmp(msg, "free", 4) == 0) {
		ws_session_free(r->s);
		r->s = NULL;
		r->freed = 1;
		event_base_loopbreak(r->base);
	} else {
		FUZZ_CHECK(ws_send_text(r->s, msg, len) == 0);
	}
}

static void on_closed(void *owner, uint16_t code)
{
	struct run *r = owner;

	FUZZ_CHECK(!r->freed);
	FUZZ_CHECK(r->closed == 0);
	FUZZ_CHECK(documented_code(code));
	r->closed++;
	r->code = code;
	event_base_loopbreak(r->base);
}

static void peer_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct run *r = arg;

	while (r->in_off < r->in_len) {
		ssize_t n = write(fd, r->in + r->in_off, r->in_len - r->in_off);

		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return; /* EV_PERSIST: called again when writable */
			break;          /* the server closed its end: the rest is lost */
		}
		r->in_off += (size_t)n;
	}
	event_del(r->peer_wr);
	shutdown(fd, SHUT_WR);
}

static void peer_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct run *r = arg;
	char buf[4096];
	ssize_t n = read(fd, buf, sizeof buf);

	if (n > 0)
		FUZZ_CHECK(evbuffer_add(r->from_server, buf, (size_t)n) == 0);
	else if (n == 0 || (errno != EAGAIN && errno != EINTR))
		event_del(r->peer_rd);
}

/* Checks the frames the server sent (a cut last frame is fine: the
 * session may end with output still queued). */
static void check_server_frames(struct run *r)
{
	size_t len = evbuffer_get_length(r->from_server);
	const uint8_t *p = evbuffer_pullup(r->from_server, -1);
	size_t off = 0;
	int closed = 0;

	while (len - off >= 2) {
		uint8_t op = p[off] & 0x0f;
		uint64_t n = p[off + 1] & 0x7f;
		size_t head = 2;

		FUZZ_CHECK(!closed);                  /* nothing after close */
		FUZZ_CHECK((p[off] & 0x70) == 0);     /* no RSV bits */
		FUZZ_CHECK((p[off + 1] & 0x80) == 0); /* servers never mask */
		FUZZ_CHECK(op == 0x1 || op == 0x8 || op == 0x9 || op == 0xA);
		if (n == 126 || n == 127) {
			size_t ext = n == 126 ? 2 : 8;

			if (len - off < 2 + ext)
				break;
			n = 0;
			for (size_t i = 0; i < ext; i++)
				n = n << 8 | p[off + 2 + i];
			head += ext;
		}
		if (len - off - head < n)
			break;
		if (op == 0x8) {
			uint16_t code = n >= 2 ? (uint16_t)(p[off + head] << 8 | p[off + head + 1])
					       : WS_CLOSE_NO_STATUS;

			FUZZ_CHECK(n != 1 && n <= 125);
			closed = 1;
			if (!r->freed)
				FUZZ_CHECK(r->closed && r->code == code);
		}
		off += head + (size_t)n;
	}
}

/* Collects what is still in the socket once the session is over. */
static void drain_peer(struct run *r)
{
	char buf[4096];
	ssize_t n;

	while ((n = read(r->peer, buf, sizeof buf)) > 0)
		FUZZ_CHECK(evbuffer_add(r->from_server, buf, (size_t)n) == 0);
}

static void deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct run *r = arg;

	r->timed_out = 1;
	event_base_loopbreak(r->base);
}

static void setup(void)
{
	static int done;

	if (done)
		return;
	done = 1;
	signal(SIGPIPE, SIG_IGN); /* as the daemon does */
	log_set_level(LOG_LVL_ERROR);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct ws_callbacks cb = { .on_text = on_text, .on_closed = on_closed };
	struct ws_options opt;
	struct run r;
	struct bufferevent *bev;
	struct timeval dl = { DEADLINE_MS / 1000, (DEADLINE_MS % 1000) * 1000 };
	int sv[2];

	setup();
	memset(&r, 0, sizeof r);
	r.in = data;
	r.in_len = size;
	ws_options_default(&opt);
	opt.max_msg_len = MAX_MSG;
	opt.ping_interval_ms = 0; /* no timers but the close timeout */
	opt.ping_timeout_ms = 0;
	opt.close_timeout_ms = CLOSE_TIMEOUT_MS;

	r.base = event_base_new();
	FUZZ_CHECK(r.base != NULL);
	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	evutil_make_socket_nonblocking(sv[0]);
	evutil_make_socket_nonblocking(sv[1]);
	r.peer = sv[1];
	bev = bufferevent_socket_new(r.base, sv[0], BEV_OPT_CLOSE_ON_FREE);
	FUZZ_CHECK(bev != NULL);
	r.s = ws_session_new(bev, &opt, &cb, &r);
	FUZZ_CHECK(r.s != NULL);
	r.peer_wr = event_new(r.base, r.peer, EV_WRITE | EV_PERSIST, peer_write_cb, &r);
	r.peer_rd = event_new(r.base, r.peer, EV_READ | EV_PERSIST, peer_read_cb, &r);
	r.deadline = evtimer_new(r.base, deadline_cb, &r);
	r.from_server = evbuffer_new();
	FUZZ_CHECK(r.peer_wr && r.peer_rd && r.deadline && r.from_server);
	event_add(r.peer_wr, NULL);
	event_add(r.peer_rd, NULL);
	evtimer_add(r.deadline, &dl);

	while (!r.closed && !r.freed && !r.timed_out)
		FUZZ_CHECK(event_base_loop(r.base, EVLOOP_ONCE) != -1);
	FUZZ_CHECK(!r.timed_out); /* every session ends after EOF */

	ws_session_free(r.s); /* NULL when the owner freed it */
	drain_peer(&r);
	check_server_frames(&r);
	evbuffer_free(r.from_server);
	event_free(r.peer_wr);
	event_free(r.peer_rd);
	event_free(r.deadline);
	close(r.peer);
	event_base_free(r.base);
	return 0;
}
