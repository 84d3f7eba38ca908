/* fakebroker.c - see fakebroker.h. */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <json-c/json.h>

#include "fakebroker.h"
#include "harness.h"
#include "net/http_head.h"
#include "net/ws.h"
#include "net/ws_handshake.h"

struct fb_conn {
	struct fakebroker *b;
	struct fb_conn *next;
	struct bufferevent *bev; /* until the upgrade */
	struct ws_session *ws;   /* after it; NULL once closed */
	struct http_head_parser head;
};

struct fakebroker {
	struct evconnlistener *lis;
	int port;
	char *hello;
	fakebroker_fn fn;
	void *arg;
	struct fb_conn *conns;
};

static void on_text(void *owner, const char *msg, size_t len)
{
	struct fb_conn *k = owner;
	struct json_tokener *tok = json_tokener_new();
	struct json_object *o = tok ? json_tokener_parse_ex(tok, msg, (int)len) : NULL;
	struct json_object *t;

	if (o && json_object_object_get_ex(o, "type", &t) &&
	    json_object_is_type(t, json_type_string))
		k->b->fn(k, json_object_get_string(t), o, k->b->arg);
	json_object_put(o);
	if (tok)
		json_tokener_free(tok);
}

static void on_closed(void *owner, uint16_t code)
{
	struct fb_conn *k = owner;

	ws_session_free(k->ws);
	k->ws = NULL;
}

static void head_read(struct bufferevent *bev, void *arg)
{
	static const struct ws_callbacks cb = { .on_text = on_text, .on_closed = on_closed };
	struct fb_conn *k = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	char accept[WS_ACCEPT_LEN + 1], resp[512];
	size_t n = evbuffer_get_length(in), used = 0;
	int rc = http_head_feed(&k->head, (const char *)evbuffer_pullup(in, -1), n, &used);
	int len;

	evbuffer_drain(in, used);
	if (rc == HTTP_HEAD_NEED_MORE)
		return;
	if (rc != HTTP_HEAD_DONE || ws_handshake_check(http_head_get(&k->head), accept) != 0 ||
	    (len = ws_handshake_response(accept, NULL, resp, sizeof resp)) < 0) {
		bufferevent_free(bev);
		k->bev = NULL;
		return;
	}
	bufferevent_write(bev, resp, (size_t)len);
	k->ws = ws_session_new(bev, NULL, &cb, k);
	k->bev = NULL;
	if (k->ws == NULL) {
		bufferevent_free(bev);
		return;
	}
	ws_send_text(k->ws, k->b->hello, strlen(k->b->hello));
}

static void head_event(struct bufferevent *bev, short what, void *arg)
{
	struct fb_conn *k = arg;

	bufferevent_free(bev);
	k->bev = NULL;
}

static void on_accept(struct evconnlistener *lis, evutil_socket_t fd, struct sockaddr *sa,
		      int salen, void *arg)
{
	struct fakebroker *b = arg;
	struct fb_conn *k = calloc(1, sizeof *k);

	if (k == NULL) {
		evutil_closesocket(fd);
		return;
	}
	k->b = b;
	k->next = b->conns;
	b->conns = k;
	http_head_parser_init(&k->head);
	k->bev = bufferevent_socket_new(evconnlistener_get_base(lis), fd, BEV_OPT_CLOSE_ON_FREE);
	if (k->bev == NULL) {
		evutil_closesocket(fd);
		return;
	}
	bufferevent_setcb(k->bev, head_read, NULL, head_event, k);
	bufferevent_enable(k->bev, EV_READ);
}

struct fakebroker *fakebroker_new(struct event_base *base, const char *hello, fakebroker_fn fn,
				  void *arg)
{
	struct fakebroker *b = calloc(1, sizeof *b);

	if (b == NULL)
		return NULL;
	b->fn = fn;
	b->arg = arg;
	b->hello = strdup(hello);
	b->lis = b->hello ? harness_listen(base, on_accept, b, &b->port) : NULL;
	if (b->lis == NULL) {
		fakebroker_free(b);
		return NULL;
	}
	return b;
}

int fakebroker_port(const struct fakebroker *b)
{
	return b->port;
}

int fakebroker_send(struct fb_conn *k, const char *msg)
{
	return k->ws ? ws_send_text(k->ws, msg, strlen(msg)) : -1;
}

void fakebroker_free(struct fakebroker *b)
{
	if (b == NULL)
		return;
	while (b->conns) {
		struct fb_conn *k = b->conns;

		b->conns = k->next;
		if (k->bev)
			bufferevent_free(k->bev);
		ws_session_free(k->ws);
		free(k);
	}
	if (b->lis)
		evconnlistener_free(b->lis);
	free(b->hello);
	free(b);
}
