/* wstap.c - see wstap.h. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "harness.h"
#include "wstap.h"

struct relay {
	struct wstap *t;
	struct relay *next;
	struct bufferevent *client, *server;
	struct evbuffer *seen; /* client bytes not yet decoded */
	struct evbuffer *up;   /* client bytes held (wstap_hold) */
	struct evbuffer *down; /* server bytes held */
	int head_done;         /* the upgrade request has passed */
};

struct wstap {
	struct event_base *base;
	struct evconnlistener *lis;
	int server_port, port;
	struct relay *relays;
	unsigned accepted;
	unsigned frames[16];
	char last_text[512];
	int hold; /* WSTAP_HOLD_* */
};

static void relay_free(struct relay *r)
{
	for (struct relay **p = &r->t->relays; *p; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			break;
		}
	bufferevent_free(r->client);
	bufferevent_free(r->server);
	evbuffer_free(r->seen);
	if (r->up)
		evbuffer_free(r->up);
	if (r->down)
		evbuffer_free(r->down);
	free(r);
}

/* Counts the complete frames at the start of r->seen and drains them. */
static void decode(struct relay *r)
{
	struct wstap *t = r->t;

	if (!r->head_done) {
		struct evbuffer_ptr end = evbuffer_search(r->seen, "\r\n\r\n", 4, NULL);
		if (end.pos < 0)
			return;
		evbuffer_drain(r->seen, (size_t)end.pos + 4);
		r->head_done = 1;
	}
	for (;;) {
		size_t have = evbuffer_get_length(r->seen), hdr = 2;
		unsigned char h[14];
		uint64_t len;

		if (have < 2)
			return;
		evbuffer_copyout(r->seen, h, have < sizeof h ? have : sizeof h);
		len = h[1] & 0x7f;
		hdr += len == 126 ? 2 : len == 127 ? 8 : 0;
		hdr += (h[1] & 0x80) ? 4 : 0;
		if (have < hdr)
			return;
		if (len == 126)
			len = (uint64_t)h[2] << 8 | h[3];
		else if (len == 127)
			for (int i = (int)(len = 0); i < 8; i++)
				len = len << 8 | h[2 + i];
		if (have - hdr < len)
			return;
		t->frames[h[0] & 0x0f]++;
		if ((h[0] & 0x0f) == 0x1) {
			size_t n = len < sizeof t->last_text - 1 ? (size_t)len
								 : sizeof t->last_text - 1;
			unsigned char *p = evbuffer_pullup(r->seen, (ev_ssize_t)(hdr + n));
			const unsigned char *mask = (h[1] & 0x80) ? h + hdr - 4 : NULL;

			for (size_t i = 0; i < n; i++)
				t->last_text[i] = (char)(p[hdr + i] ^ (mask ? mask[i % 4] : 0));
			t->last_text[n] = '\0';
		}
		evbuffer_drain(r->seen, hdr + (size_t)len);
	}
}

/* Forwards what is held in the directions not held (all with force). */
static void flush(struct relay *r, int force)
{
	if (force || !(r->t->hold & WSTAP_HOLD_TO_SERVER))
		bufferevent_write_buffer(r->server, r->up);
	if (force || !(r->t->hold & WSTAP_HOLD_TO_CLIENT))
		bufferevent_write_buffer(r->client, r->down);
}

static void on_read(struct bufferevent *from, void *arg)
{
	struct relay *r = arg;
	struct evbuffer *in = bufferevent_get_input(from);

	if (from == r->client) {
		size_t n = evbuffer_get_length(in);

		evbuffer_add(r->seen, evbuffer_pullup(in, (ev_ssize_t)n), n);
		decode(r);
		evbuffer_add_buffer(r->up, in);
	} else {
		evbuffer_add_buffer(r->down, in);
	}
	flush(r, 0);
}

/* The other side has taken everything: the relay ends. */
static void on_drained(struct bufferevent *to, void *arg)
{
	(void)to;
	relay_free(arg);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	struct relay *r = arg;
	struct bufferevent *other = bev == r->client ? r->server : r->client;

	if (what & BEV_EVENT_CONNECTED)
		return;
	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
		return;
	on_read(bev, r);
	flush(r, 1); /* a side closing: nothing held is lost */
	bufferevent_disable(bev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_output(other)) == 0)
		relay_free(r);
	else
		bufferevent_setcb(other, NULL, on_drained, NULL, r);
}

static void on_accept(struct evconnlistener *lis, evutil_socket_t fd, struct sockaddr *sa,
		      int salen, void *arg)
{
	struct wstap *t = arg;
	struct relay *r = calloc(1, sizeof *r);
	struct sockaddr_in to = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)t->server_port) };

	(void)lis;
	(void)sa;
	(void)salen;
	if (r == NULL) {
		evutil_closesocket(fd);
		return;
	}
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	r->t = t;
	r->seen = evbuffer_new();
	r->up = evbuffer_new();
	r->down = evbuffer_new();
	r->client = bufferevent_socket_new(t->base, fd, BEV_OPT_CLOSE_ON_FREE);
	r->server = bufferevent_socket_new(t->base, -1, BEV_OPT_CLOSE_ON_FREE);
	r->next = t->relays;
	t->relays = r;
	t->accepted++;
	if (r->seen == NULL || r->up == NULL || r->down == NULL || r->client == NULL ||
	    r->server == NULL ||
	    bufferevent_socket_connect(r->server, (struct sockaddr *)&to, sizeof to) != 0) {
		relay_free(r);
		return;
	}
	bufferevent_setcb(r->client, on_read, NULL, on_event, r);
	bufferevent_setcb(r->server, on_read, NULL, on_event, r);
	bufferevent_enable(r->client, EV_READ);
	bufferevent_enable(r->server, EV_READ);
}

struct wstap *wstap_new(struct event_base *base, int server_port)
{
	struct wstap *t = calloc(1, sizeof *t);

	if (t == NULL)
		return NULL;
	t->base = base;
	t->server_port = server_port;
	t->lis = harness_listen(base, on_accept, t, &t->port);
	if (t->lis == NULL) {
		wstap_free(t);
		return NULL;
	}
	return t;
}

int wstap_port(const struct wstap *t)
{
	return t->port;
}

unsigned wstap_frames(const struct wstap *t, int opcode)
{
	return opcode >= 0 && opcode < 16 ? t->frames[opcode] : 0;
}

unsigned wstap_messages(const struct wstap *t)
{
	unsigned n = 0;

	for (int op = 0; op < 16; op++)
		if (op != 0x9 && op != 0xA)
			n += t->frames[op];
	return n;
}

const char *wstap_last_text(const struct wstap *t)
{
	return t->last_text;
}

unsigned wstap_connections(const struct wstap *t)
{
	return t->accepted;
}

void wstap_reset(struct wstap *t)
{
	memset(t->frames, 0, sizeof t->frames);
	t->last_text[0] = '\0';
}

void wstap_hold(struct wstap *t, int what)
{
	t->hold = what;
	for (struct relay *r = t->relays; r; r = r->next)
		flush(r, 0);
}

void wstap_free(struct wstap *t)
{
	if (t == NULL)
		return;
	while (t->relays)
		relay_free(t->relays);
	if (t->lis)
		evconnlistener_free(t->lis);
	free(t);
}
