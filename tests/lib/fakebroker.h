/*
 * fakebroker.h - a scripted broker peer for the libexecclient tests: it
 * takes websocket upgrades on a loopback port (any path, no token
 * check), sends each connection a HELLO the test chose, and hands every
 * text message the client sends to the test, which answers with whatever
 * it likes, also what a real execserver never sends (a DONE whose receipt
 * is not an object).  Frames are the daemon's own (src/net/ws.c), on the
 * caller's libevent base.
 *
 * Owns: its listener and, per connection, the bufferevent until the
 * upgrade, then the websocket session.
 * Invariants: on_message runs from the loop only, with the connection it
 * came on, which stays valid until fakebroker_free; the test's replies
 * go out on that connection in the order sent.
 */
#ifndef ES_TEST_FAKEBROKER_H
#define ES_TEST_FAKEBROKER_H

struct event_base;
struct json_object;
struct fakebroker;
struct fb_conn;

/* A message from the client, parsed (not NULL), with its "type". */
typedef void (*fakebroker_fn)(struct fb_conn *k, const char *type, struct json_object *msg,
			      void *arg);

/* A peer on a free loopback port that greets each connection with hello
 * (a JSON text) and passes each message to fn; NULL on error. */
struct fakebroker *fakebroker_new(struct event_base *base, const char *hello, fakebroker_fn fn,
				  void *arg);
/* The port to connect to. */
int fakebroker_port(const struct fakebroker *b);
/* Sends the text msg on k: 0, or -1 if k is closed. */
int fakebroker_send(struct fb_conn *k, const char *msg);
/* Closes the listener and every connection.  NULL ok. */
void fakebroker_free(struct fakebroker *b);

#endif
