/*
 * test_ws_client.c - the client side of the shared websocket code
 * (src/net): the upgrade request and the check of the answer, against the
 * server side's own functions, and a client-role session talking to a
 * server-role session over a socketpair (a server session refuses
 * unmasked frames with 1002, so every delivered message proves the
 * client masked it); and that a session's log lines go to its owner.
 */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "execserver/client.h"
#include "net/http_head.h"
#include "net/ws.h"
#include "net/ws_handshake.h"
#include "suite.h"

static void test_request_and_answer(void)
{
	char key[WS_KEY_LEN + 1], key2[WS_KEY_LEN + 1], accept[WS_ACCEPT_LEN + 1];
	struct evbuffer *req = evbuffer_new();
	char resp[512];
	struct http_head_parser *p = malloc(sizeof *p);
	const struct http_head *h;
	size_t used = 0;
	int n, status = -1;

	CU_ASSERT_FATAL(ws_handshake_client_key(key) == 0);
	CU_ASSERT_FATAL(ws_handshake_client_key(key2) == 0);
	CU_ASSERT_EQUAL(strlen(key), WS_KEY_LEN);
	CU_ASSERT(strcmp(key, key2) != 0); /* random */
	CU_ASSERT_FATAL(
		ws_handshake_client_request(req, "[::1]", 8083, "/broker?client=a", key, "t") == 0);
	n = (int)evbuffer_get_length(req);
	/* the server's parser and check accept it */
	http_head_parser_init(p);
	CU_ASSERT_FATAL(http_head_feed(p, (const char *)evbuffer_pullup(req, -1), (size_t)n,
				       &used) == HTTP_HEAD_DONE);
	CU_ASSERT_EQUAL(used, (size_t)n);
	h = http_head_get(p);
	CU_ASSERT_STRING_EQUAL(http_header_get(h, "Host"), "[::1]:8083");
	CU_ASSERT(ws_bearer_ok(http_header_get(h, "Authorization"), "t"));
	CU_ASSERT_EQUAL(ws_handshake_check(h, accept), 0);
	/* and its answer passes the client's check */
	n = ws_handshake_response(accept, NULL, resp, sizeof resp);
	CU_ASSERT_FATAL(n > 0);
	CU_ASSERT_EQUAL(ws_handshake_client_check(resp, (size_t)n, key, &status), 0);
	CU_ASSERT_EQUAL(status, 101);
	/* the answer to another key is refused */
	CU_ASSERT_EQUAL(ws_handshake_client_check(resp, (size_t)n, key2, &status), -1);
	CU_ASSERT_EQUAL(status, 101);
	/* a refusal reports its status */
	n = ws_handshake_error_response(401, NULL, resp, sizeof resp);
	CU_ASSERT_EQUAL(ws_handshake_client_check(resp, (size_t)n, key, &status), -1);
	CU_ASSERT_EQUAL(status, 401);
	/* no token: no Authorization; the longest token libexecclient takes
	 * (EXC_AUTH_TOKEN_MAX) goes whole, and the server's parser takes it */
	evbuffer_drain(req, evbuffer_get_length(req));
	CU_ASSERT_FATAL(ws_handshake_client_request(req, "h", 1, "/", key, NULL) == 0);
	http_head_parser_init(p);
	CU_ASSERT_FATAL(http_head_feed(p, (const char *)evbuffer_pullup(req, -1),
				       evbuffer_get_length(req), &used) == HTTP_HEAD_DONE);
	CU_ASSERT_PTR_NULL(http_header_get(http_head_get(p), "Authorization"));
	{
		char tok[EXC_AUTH_TOKEN_MAX + 1], target[300];

		memset(tok, 'x', EXC_AUTH_TOKEN_MAX);
		tok[EXC_AUTH_TOKEN_MAX] = '\0';
		/* the longest target the client builds: client id and hint of 64 */
		memset(target, 'c', 200);
		target[0] = '/';
		target[200] = '\0';
		evbuffer_drain(req, evbuffer_get_length(req));
		CU_ASSERT_FATAL(ws_handshake_client_request(req, "h", 1, target, key, tok) == 0);
		http_head_parser_init(p);
		CU_ASSERT_FATAL(http_head_feed(p, (const char *)evbuffer_pullup(req, -1),
					       evbuffer_get_length(req), &used) == HTTP_HEAD_DONE);
		CU_ASSERT(ws_bearer_ok(http_header_get(http_head_get(p), "Authorization"), tok));
	}
	/* garbage */
	CU_ASSERT_EQUAL(ws_handshake_client_check("HTTP", 4, key, &status), -1);
	CU_ASSERT_EQUAL(status, 0);
	evbuffer_free(req);
	free(p);
}

struct end {
	struct ws_session *s;
	char got[64];
	int texts;
	int closed;
	unsigned code;
	int echo;
	int nlog; /* lines its session logged through it */
	enum log_level log_level;
	char log_line[128]; /* the last one */
};

static void on_text(void *arg, const char *msg, size_t len)
{
	struct end *e = arg;

	e->texts++;
	snprintf(e->got, sizeof e->got, "%.*s", (int)len, msg);
	if (e->echo)
		ws_send_text(e->s, msg, len);
}

static void on_closed(void *arg, uint16_t code)
{
	struct end *e = arg;

	e->closed = 1;
	e->code = code;
}

static void on_log(void *arg, enum log_level level, const char *line)
{
	struct end *e = arg;

	e->nlog++;
	e->log_level = level;
	snprintf(e->log_line, sizeof e->log_line, "%s", line);
}

static void run_until(struct event_base *base, const int *flag)
{
	for (int i = 0; i < 200 && !*flag; i++) {
		struct timeval tv = { 0, 10000 };

		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
}

static void test_client_session(void)
{
	static const struct ws_callbacks cb = { .on_text = on_text, .on_closed = on_closed };
	struct event_base *base = event_base_new();
	struct end srv = { .echo = 1 }, cli = { 0 };
	struct ws_options so, co;
	int sv[2];

	CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	evutil_make_socket_nonblocking(sv[0]);
	evutil_make_socket_nonblocking(sv[1]);
	ws_options_default(&so);
	ws_options_default(&co);
	co.client_role = 1;
	srv.s = ws_session_new(bufferevent_socket_new(base, sv[0], BEV_OPT_CLOSE_ON_FREE), &so, &cb,
			       &srv);
	cli.s = ws_session_new(bufferevent_socket_new(base, sv[1], BEV_OPT_CLOSE_ON_FREE), &co, &cb,
			       &cli);
	CU_ASSERT_FATAL(srv.s && cli.s);
	CU_ASSERT_EQUAL(ws_send_text(cli.s, "hello", 5), 0);
	run_until(base, &cli.texts);
	CU_ASSERT_EQUAL(srv.texts, 1); /* masked: the server took it */
	CU_ASSERT_STRING_EQUAL(srv.got, "hello");
	CU_ASSERT_EQUAL(cli.texts, 1); /* unmasked: the client took it */
	CU_ASSERT_STRING_EQUAL(cli.got, "hello");
	ws_close(cli.s, WS_CLOSE_NORMAL, "bye");
	run_until(base, &cli.closed);
	run_until(base, &srv.closed);
	CU_ASSERT(cli.closed && srv.closed);
	CU_ASSERT_EQUAL(cli.code, WS_CLOSE_NORMAL);
	CU_ASSERT_EQUAL(srv.code, WS_CLOSE_NORMAL);
	ws_session_free(cli.s);
	ws_session_free(srv.s);
	event_base_free(base);
}

/* A client-role session with default options on fd (made non-blocking),
 * owned by e. */
static struct ws_session *client_session(struct event_base *base, int fd,
					 const struct ws_callbacks *cb, struct end *e)
{
	struct ws_options co;

	evutil_make_socket_nonblocking(fd);
	ws_options_default(&co);
	co.client_role = 1;
	return ws_session_new(bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE), &co, cb, e);
}

/* A frame from a server, masked: what a client-role session refuses. */
static const unsigned char masked[] = { 0x81, 0x82, 1, 2, 3, 4, 'h' ^ 1, 'i' ^ 2 };

/* A client-role session refuses a masked frame from the server (1002). */
static void test_client_refuses_masked(void)
{
	static const struct ws_callbacks cb = { .on_text = on_text, .on_closed = on_closed };
	struct event_base *base = event_base_new();
	struct end cli = { 0 };
	int sv[2];

	CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	cli.s = client_session(base, sv[1], &cb, &cli);
	CU_ASSERT_FATAL(write(sv[0], masked, sizeof masked) == (ssize_t)sizeof masked);
	shutdown(sv[0], SHUT_WR);
	run_until(base, &cli.closed);
	CU_ASSERT(cli.closed);
	CU_ASSERT_EQUAL(cli.texts, 0);
	CU_ASSERT_EQUAL(cli.code, WS_CLOSE_PROTOCOL_ERROR);
	ws_session_free(cli.s);
	close(sv[0]);
	event_base_free(base);
}

/* A session's log lines go to its own owner (on_log), whatever other
 * sessions live in the process: here two client-role sessions, one of
 * which ends on a protocol error while the other refuses to send text
 * that is not UTF-8. */
static void test_session_logs_through_owner(void)
{
	static const struct ws_callbacks cb = { .on_text = on_text,
						.on_closed = on_closed,
						.on_log = on_log };
	struct event_base *base = event_base_new();
	struct end a = { 0 }, b = { 0 };
	int sa[2], sb[2];

	CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sa) == 0);
	CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sb) == 0);
	a.s = client_session(base, sa[1], &cb, &a);
	b.s = client_session(base, sb[1], &cb, &b);
	CU_ASSERT_FATAL(a.s && b.s);

	CU_ASSERT_FATAL(write(sa[0], masked, sizeof masked) == (ssize_t)sizeof masked);
	run_until(base, &a.closed);
	CU_ASSERT_EQUAL(a.code, WS_CLOSE_PROTOCOL_ERROR);
	CU_ASSERT(a.nlog > 0);
	CU_ASSERT_EQUAL(b.nlog, 0);
	CU_ASSERT_EQUAL(a.log_level, LOG_LVL_DEBUG);
	CU_ASSERT_PTR_NOT_NULL(strstr(a.log_line, "websocket: "));

	int seen = a.nlog;
	CU_ASSERT_EQUAL(ws_send_text(b.s, "\xff", 1), -1);
	CU_ASSERT_EQUAL(b.nlog, 1);
	CU_ASSERT_EQUAL(b.log_level, LOG_LVL_ERROR);
	CU_ASSERT_STRING_EQUAL(b.log_line, "websocket: refusing to send invalid UTF-8");
	CU_ASSERT_EQUAL(a.nlog, seen);

	ws_session_free(a.s);
	ws_session_free(b.s);
	close(sa[0]);
	close(sb[0]);
	event_base_free(base);
}

static const struct test_case cases[] = {
	{ "client upgrade request and answer check", test_request_and_answer },
	{ "client session talks to a server session", test_client_session },
	{ "client session refuses a masked frame", test_client_refuses_masked },
	{ "a session logs through its owner", test_session_logs_through_owner },
	{ NULL, NULL },
};

int main(void)
{
	return run_suite("websocket client side", cases);
}
