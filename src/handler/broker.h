/*
 * broker.h - the broker protocol on one websocket (docs/protocol.md):
 * HELLO on connect and when it changes, client messages turned into book
 * operations, OFFER / ERROR / DONE / POSITION out.  Each connection speaks
 * the protocol version it negotiated in the upgrade URL (1, 2 or 3: 2 adds
 * ACK and keeps receipts until acknowledged, 3 adds PROGRESS).
 *
 * A broker connection exists from the 101 response until its websocket
 * session ends; it is registered in the book for exactly that time
 * (book_conn_open at upgrade, book_conn_close when the session ends).
 */
#ifndef ES_BROKER_H
#define ES_BROKER_H

#include <sys/socket.h>

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <json-c/json.h>

#include "book/book.h"

/* Registers a connection in the book before the upgrade is answered;
 * protocol is the version in effect (from PROTO_VERSION_ACK on, the new
 * connection takes over its client's jobs: book_conn_adopt).  Returns 0,
 * or the HTTP status to refuse the upgrade with (503). */
int broker_register(const char *client_id, int protocol, struct book_ref *ref);
/* Undoes broker_register when the 101 could not be sent. */
void broker_unregister(struct book_ref ref);
/* Takes over bev (the 101 is already queued on it) and sends HELLO.
 * peer_sa: the peer's socket address (jobs placed on this connection may
 * call back to it, see the callback guard). */
int broker_attach(struct bufferevent *bev, struct book_ref ref, const char *client_id, int protocol,
		  const char *peer, const struct sockaddr *peer_sa, socklen_t peer_len);

/* Mail from the book. */
void broker_deliver_offer(struct book_ref conn, const char *job_id, uint64_t token);
void broker_deliver_offer_expired(struct book_ref conn, const char *job_id);
void broker_schedule_hello(void);
void broker_hello_cb(evutil_socket_t fd, short what, void *arg);

/* MAIL_DONE: sends the DONE of a finished job (its receipt read from the
 * book) on conn; protocol 1: tells the book it went out; protocol 2: the
 * book keeps it until the client's ACK.  When conn is closing, the book
 * hands the job to the client's next connection instead. */
void broker_deliver_done(struct book_ref conn, struct book_ref want, const char *job_id);

/* A progress value of a running job this handler runs (job_host.progress):
 * sent as PROGRESS to its owner connection when that one is on this
 * handler and speaks protocol 3 (docs/progress.md says why only there). */
void broker_job_progress(struct book_ref want, const char *job_id, double fraction,
			 const char *text);

/* While draining: once no job runs here, closes every connection (1001). */
void broker_drain_check(void);

#endif
