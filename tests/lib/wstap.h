/*
 * wstap.h - a tap on websocket traffic for the tests: a TCP relay on a
 * loopback port in front of one server port, run on the caller's libevent
 * base.  It forwards every byte both ways unchanged and decodes the frames
 * each client sends after its upgrade request, counting them by opcode,
 * so that a test observes what a websocket client really puts on the wire
 * (libexecclient's idle silence) with a real server behind it.
 *
 * A test may hold the bytes of one direction back for a while
 * (wstap_hold), to force an order of messages between two servers.
 *
 * Owns: its listener and the two bufferevents of each relayed connection.
 * Invariants: bytes are never altered, dropped or reordered (held ones are
 * delayed, and forwarded when the hold ends or a side closes); a side that
 * closes has what it sent delivered before the other side is closed; the
 * counts cover every complete frame a client sent since wstap_reset.
 */
#ifndef ES_TEST_WSTAP_H
#define ES_TEST_WSTAP_H

struct event_base;
struct wstap;

/* A relay to 127.0.0.1:server_port on a free loopback port; NULL on error. */
struct wstap *wstap_new(struct event_base *base, int server_port);
/* The port clients connect to. */
int wstap_port(const struct wstap *t);
/* Frames with this opcode (0-15) that clients sent since the last reset. */
unsigned wstap_frames(const struct wstap *t, int opcode);
/* Frames of any opcode other than ping (0x9) and pong (0xA). */
unsigned wstap_messages(const struct wstap *t);
/* The payload of the last text frame (up to 511 bytes), "" if none. */
const char *wstap_last_text(const struct wstap *t);
/* Connections accepted since wstap_new. */
unsigned wstap_connections(const struct wstap *t);
/* Zeroes the frame counts and the last text. */
void wstap_reset(struct wstap *t);
#define WSTAP_HOLD_TO_SERVER 1
#define WSTAP_HOLD_TO_CLIENT 2
/* From now on holds back the bytes of the directions in what (0: none;
 * what was held in a direction no longer held is forwarded now). */
void wstap_hold(struct wstap *t, int what);
/* Closes the listener and every relayed connection.  NULL ok. */
void wstap_free(struct wstap *t);

#endif
