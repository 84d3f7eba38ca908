/*
 * ws.h - a websocket session (RFC 6455 framing, via wslay's event API) on
 * a libevent bufferevent whose opening handshake is done: the server side
 * (the daemon) or, with ws_options.client_role, the client side
 * (libexecclient: frames masked, masked server frames refused).
 *
 * Owns: the bufferevent handed to ws_session_new() (freed, and its socket
 * closed if it was created with BEV_OPT_CLOSE_ON_FREE, by ws_session_free),
 * the wslay context (allocated only while frames are in flight) and the
 * session's timers.  The pings of many sessions run from one shared timer,
 * a struct ws_pinger (one per event loop, made by the owner of the loop);
 * a session given none gets one of its own.
 * Invariants:
 *  - the owner's callbacks (but on_log) run only from the event loop,
 *    never from inside a ws_* call, so the owner may call any ws_*
 *    function (including ws_session_free) from inside a callback;
 *  - on_text gets only complete text messages of valid UTF-8 no longer than
 *    max_msg_len, and only while the session is open;
 *  - on_closed is called exactly once, when the session is over (close
 *    handshake done, protocol error, EOF or socket error, timeout) and no
 *    other callback follows it; the only exception is a session the owner
 *    frees first, which calls nothing more;
 *  - every way out of the open state ends within close_timeout_ms.
 * Writes to a peer that went away must not kill the process: the process
 * ignores SIGPIPE (libevent writes with writev).
 */
#ifndef ES_WS_H
#define ES_WS_H

#include <stddef.h>
#include <stdint.h>

#include "common/log.h"

struct bufferevent;
struct ws_session;

/*
 * Close codes (RFC 6455 section 7.4).  on_closed reports one of these: the
 * code of the close frame that ended the session (ours when we closed
 * first, the peer's when it did), or 1005/1006 as described.
 */
enum ws_close_code {
	WS_CLOSE_NORMAL = 1000,           /* orderly end, either side */
	WS_CLOSE_GOING_AWAY = 1001,       /* server stopping, or the peer went
					 * silent for ping_timeout_ms */
	WS_CLOSE_PROTOCOL_ERROR = 1002,   /* bad framing: unmasked frame, bad
					 * opcode, control frame > 125 bytes or
					 * fragmented, broken fragmentation,
					 * RSV bits, non-minimal length, bad
					 * close code */
	WS_CLOSE_UNSUPPORTED_DATA = 1003, /* a binary message */
	WS_CLOSE_NO_STATUS = 1005,        /* reported only: the peer's close frame
					 * carried no code; never sent */
	WS_CLOSE_ABNORMAL = 1006,         /* reported only: the connection ended
					 * without a close frame; never sent */
	WS_CLOSE_INVALID_PAYLOAD = 1007,  /* text that is not UTF-8 */
	WS_CLOSE_POLICY_VIOLATION = 1008, /* generic refusal (e.g. auth
						 * lost, rate limits) */
	WS_CLOSE_MESSAGE_TOO_BIG = 1009,  /* message > max_msg_len */
	WS_CLOSE_INTERNAL_ERROR = 1011,   /* out of memory, internal failure */
	/* 4000-4999: private use; the broker protocol layer defines them
	 * (messages.h).  Nothing below 4000 is defined by this layer. */
	WS_CLOSE_APP_MIN = 4000,
	WS_CLOSE_APP_MAX = 4999,
};

struct ws_options {
	size_t max_msg_len;        /* largest message accepted, bytes
					 * (reassembled); bigger closes 1009 */
	unsigned ping_interval_ms; /* send a ping this often; 0: never */
	unsigned ping_timeout_ms;  /* close 1001 when no frame at all
					 * (pongs included) arrived for this
					 * long; 0: no liveness check.  Checked
					 * every ping interval (or every
					 * timeout if that is shorter; the
					 * pinger may do it up to an eighth
					 * of that, at most 1 s, early), so a
					 * dead peer is noticed between
					 * timeout and timeout + interval +
					 * min(interval / 8, 1 s). */
	unsigned close_timeout_ms; /* from leaving the open state to the
					 * end: wait for the peer's close frame
					 * and for our last bytes to drain */
	size_t out_high_water;     /* stop reading while more than this is
					 * waiting to be sent */
	int client_role;           /* 1: we are the client (mask our
					 * frames; the peer must not mask) */
	struct ws_pinger *pinger;  /* the shared ping timer of the
					 * session's event loop; NULL: one of
					 * the session's own */
};

#define WS_DEFAULT_MAX_MSG_LEN (1024 * 1024)
#define WS_DEFAULT_PING_INTERVAL_MS 20000
#define WS_DEFAULT_PING_TIMEOUT_MS 60000
#define WS_DEFAULT_CLOSE_TIMEOUT_MS 2000
#define WS_DEFAULT_OUT_HIGH_WATER (4 * 1024 * 1024)

struct ws_callbacks {
	/* A complete text message: valid UTF-8, NOT NUL-terminated. */
	void (*on_text)(void *owner, const char *msg, size_t len);
	/* The session is over (see enum ws_close_code); exactly once. */
	void (*on_closed)(void *owner, uint16_t code);
	/* Optional: output was written and has now all been handed to the
	 * kernel (resume producing after ws_session_pending_out was high). */
	void (*on_drained)(void *owner);
	/* Optional: every complete text message of one read has gone to
	 * on_text; called once after them (even when the read then fails the
	 * session), before the replies they queued are flushed, so that a
	 * receiver can do the work of one read at once. */
	void (*on_read_end)(void *owner);
	/* Optional: the session's log lines (of every level: the owner
	 * filters), instead of the process's log (common/log.h).  The one
	 * callback that may run from inside a ws_* call: it must not call
	 * ws_* functions. */
	void (*on_log)(void *owner, enum log_level level, const char *line);
};

/*
 * The ping sweep of one event loop: one timer that, when it fires, pings
 * (or finds silent) every session whose tick is due within an eighth of
 * its period (at most 1 s), instead of one timer per session waking the
 * process for each.  Sessions given it in ws_options hold a reference;
 * ws_pinger_release drops the creator's, and the pinger goes with the last.
 */
struct event_base;
struct ws_pinger;
struct ws_pinger *ws_pinger_new(struct event_base *base);
void ws_pinger_release(struct ws_pinger *p);
/* How often the pinger's timer has fired (for tests and measurements). */
uint64_t ws_pinger_sweeps(const struct ws_pinger *p);

/* Fills opt with the WS_DEFAULT_* values (no shared pinger). */
void ws_options_default(struct ws_options *opt);

/*
 * Starts a session on bev (handshake response already queued or sent).
 * The session replaces bev's callbacks and timeouts and takes ownership of
 * bev; bytes already in bev's input buffer (frames that came right behind
 * the upgrade request) are processed from the event loop.  opt NULL means
 * defaults; a zero max_msg_len, close_timeout_ms or out_high_water takes
 * the default too.  TCP keepalive is switched on for bev's socket.
 * Returns NULL (bev still the caller's) if out of memory.
 */
struct ws_session *ws_session_new(struct bufferevent *bev, const struct ws_options *opt,
				  const struct ws_callbacks *cb, void *owner);

/*
 * Queues a text message (must be valid UTF-8; checked, -1 if not).  Sent
 * from the event loop.  Returns 0, or -1 if the session is no longer open.
 */
int ws_send_text(struct ws_session *s, const char *msg, size_t len);

/*
 * Starts the closing handshake with code (1000-1003, 1007-1011 or
 * 3000-4999; anything else sends 1011) and reason (NULL or UTF-8, cut to
 * 123 bytes).  Text arriving afterwards is dropped.  The session ends when
 * the peer answers, or after close_timeout_ms; on_closed then reports
 * code.  No effect unless the session is open.
 */
void ws_close(struct ws_session *s, uint16_t code, const char *reason);

/*
 * Best effort, for an owner about to free the session: hands what is
 * queued (messages, a close frame) to the socket now with one
 * non-blocking write, so that it is not lost with the bufferevent, and
 * shuts the write side (FIN after those bytes), so that the peer learns
 * the end even before libevent's deferred close runs.  No callback is
 * called; nothing may be sent afterwards.  NULL ok.
 */
void ws_session_flush_now(struct ws_session *s);

/* Frees the session and its bufferevent; no callback follows.  NULL ok. */
void ws_session_free(struct ws_session *s);

/* Bytes queued for the peer and not yet handed to the kernel. */
size_t ws_session_pending_out(const struct ws_session *s);

/* 1 while the session is open (no close sent or received). */
int ws_session_is_open(const struct ws_session *s);

/* 1 while wslay's frame parser (about 8.6 KiB) is allocated: only while
 * websocket work for wslay is in flight (pings, pongs and small whole text
 * frames need none), or once the session left the open state; an idle
 * open session holds none (the memory of an idle connection). */
int ws_session_has_parser(const struct ws_session *s);

/* Switches on TCP keepalive (probes after 60 s idle, every 10 s, 6 tries).
 * Returns 0, or -1 if SO_KEEPALIVE could not be set. */
int ws_set_keepalive(int fd);

/* TLS (an OpenSSL bufferevent): sends close_notify, once the output has
 * drained, before the connection is shut or freed.  No-op for plain
 * bufferevents. */
void ws_tls_close_notify(struct bufferevent *bev);

#endif
