/*
 * client_impl.h - the objects of libexecclient and the calls between its
 * files (not installed).
 *
 *   client.c   exc_client: options, addresses, claim share, stats, free
 *   addr.c     address URLs ("ws[s]://host:port[/job/<service>]")
 *   tls.c      wss: the client's SSL_CTX (made at the first wss address),
 *              one verifying SSL per connection, handshake failure texts
 *   pool.c     the connections of one address: start, growth under
 *              back-pressure, "covered", re-probe, back-off, owner seeking
 *   server_conn.c one broker connection: TCP, upgrade, HELLO, message dispatch
 *   wire.c     client messages encoded as JSON text
 *   client_job.c exc_job: offers, JOB, DONE, receipts, the job API
 *   placement.c where wants are parked, resume, the retry tick's verdicts
 *   job_files.c a job's sources/sinks and the URLs of its JOB
 *   pipes.c    the one-time HTTP endpoints (GET sources, PUT sinks)
 *   stream.c   local sources and sinks (fds, files, buffers)
 *   fallback.c the legacy token transport for addresses without /broker
 *
 * Ownership: the client owns its addresses (array), each address its
 * connections (list), the client its jobs (list) and pipe servers (list);
 * a job owns its copies (one per connection it is parked on) and its
 * endpoints.  A connection that ends is unlinked from every job (copies,
 * owner) before it is freed.  Everything runs on the client's event_base.
 */
#ifndef EXC_CLIENT_IMPL_H
#define EXC_CLIENT_IMPL_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "execserver/client.h"

struct event;
struct bufferevent;
struct ws_session;
struct pipe_srv;
struct endpoint;

/* ---- client.c ----------------------------------------------------------- */

struct exc_client {
	struct event_base *base;
	struct exc_options opt;
	char client_id[65];
	char *auth_token;
	struct exc_addr **addrs;
	unsigned naddrs;
	struct exc_job *jobs;     /* list */
	struct owed_cancel *owed; /* placement.c: cancels still to send */
	struct pipe_srv *pipes;   /* list, one per local address */
	struct event *tick_ev;    /* retry tick */
	unsigned job_seq;
	int freeing;
	char last_error[256];
	char *tls_ca_file, *tls_ca_dir; /* copies of the options */
	struct ssl_ctx_st *tls_ctx;     /* tls.c: NULL until a wss address */
};

/* Records the message of a failed call and sets errno. */
void client_fail(exc_client *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void client_log(exc_client *c, enum exc_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* on_conn for a connection of a; duplicate/failed etc. */
void client_conn_event(exc_client *c, struct exc_addr *a, enum exc_conn_event ev,
		       const char *instance_id, int code, const char *message);
/* Random bytes (getrandom); 0 or -1. */
int client_random(void *buf, size_t len);
/* 2*len lowercase hex digits of random bytes into out (2*len+1 bytes). */
int client_random_hex(char *out, size_t len);
uint64_t client_now_ms(void);

/* ---- addr.c ------------------------------------------------------------- */

struct exc_url {
	char host[256]; /* without brackets */
	int port;
	char service[128]; /* "" unless /job/<service> */
	int tls;           /* wss:// */
};
/* Parses an address; 0 or -1. */
int url_parse(const char *url, struct exc_url *u);

/* ---- tls.c -------------------------------------------------------------- */

struct ssl_st;
/* Makes the client's SSL_CTX if it has none: the CA file/dir of the
 * options, else the system's trust store.  0, or -1 (client_fail). */
int tls_client_ctx(exc_client *c);
/* An SSL of the client's context for a connection to host, verifying the
 * peer's certificate against host (a name: SNI too; an IP address
 * literal: the certificate's IP entries).  NULL (why set) on failure. */
struct ssl_st *tls_new_ssl(exc_client *c, const char *host, char *why, size_t whylen);
/* Why the TLS connection of bev failed (verify result, else OpenSSL's
 * queued errors, else errno's text); empties the error queues.
 * Returns 1 when the certificate did not verify, else 0. */
int tls_failure(struct bufferevent *bev, int sock_err, char *why, size_t whylen);
void tls_client_free(exc_client *c);

/* ---- pool.c ------------------------------------------------------------- */

struct exc_addr {
	exc_client *c;
	char *url; /* as given */
	struct exc_url u;
	struct exc_conn *conns; /* list */
	int covered;
	uint64_t covered_at_ms;
	uint64_t last_open_ms; /* last connection attempt */
	unsigned backoff_ms;   /* next reconnect delay after a failure */
	uint64_t retry_at_ms;  /* no attempt before this (back-off) */
	int last_status;       /* HTTP status of the last failed attempt */
	int tls_refused;       /* the last attempt's certificate did not verify */
	char tls_why[400];     /* ... and why ("certificate verify failed: ...") */
	int reached;           /* a HELLO came at least once */
	int pressure;          /* a want waited a full tick without offer */
	int probing;           /* the newest connection is a re-probe */
	int legacy;            /* GET /broker answered 404: token transport */
	char seek[65];         /* instance_id sought for a running job */
	char hint_for[65];     /* the sought id that hint_misses count for */
	unsigned hint_misses;  /* ?instance= connections that did not
					 * reach it; 2 drop the hint */
	unsigned opened, duplicates;
	struct event *timer;
};

struct exc_addr *pool_new(exc_client *c, const char *url, const struct exc_url *u);
void pool_free(struct exc_addr *a);
/* Starts or continues the pool: opens a connection if one is due. */
void pool_kick(struct exc_addr *a);
/* Called by server_conn.c when a connection got its HELLO (0: keep it, -1: it
 * repeated an instance and was dropped by the pool: do not use it). */
int pool_on_hello(struct exc_addr *a, struct exc_conn *k, int first_hello);
/* Called by server_conn.c when a connection ended (before it is freed). */
void pool_on_closed(struct exc_addr *a, struct exc_conn *k, int was_ready, int http_status,
		    const char *why);
/* Live (HELLO received) connections; distinct instances. */
unsigned pool_ready(const struct exc_addr *a);
unsigned pool_instances(const struct exc_addr *a);
unsigned pool_connecting(const struct exc_addr *a);
/* The address may carry wants for service. */
int pool_serves(const struct exc_addr *a, const char *service);

/* ---- server_conn.c ------------------------------------------------------ */

enum conn_state {
	K_CONNECTING,
	K_TLS,
	K_UPGRADING,
	K_OPEN,
	K_READY,
	K_CLOSING
};

struct exc_conn {
	struct exc_addr *a;
	struct exc_conn *next;
	enum conn_state state;
	struct bufferevent *bev; /* until the upgrade is done */
	struct ws_session *ws;   /* after it */
	struct event *timer;     /* handshake deadline */
	char key[32];            /* Sec-WebSocket-Key */
	char instance_id[65];
	char hint[65];             /* opened with ?instance=<hint> (seeking) */
	struct json_object *hello; /* the last HELLO */
	int clients;
	int draining;
	int protocol;     /* HELLO.protocol: >= PROTO_VERSION_ACK: ACK each DONE */
	size_t max_frame; /* HELLO.max_frame_bytes (SIZE_MAX: not said): the largest JOB */
	/* how long the instance may run a job after losing this connection
	 * (keeps_jobs_ms(), from HELLO); 0: HELLO does not say */
	uint64_t keeps_jobs_ms;
	struct sockaddr_storage local; /* getsockname of the broker socket */
	socklen_t local_len;
};

/* What keeps_jobs_ms adds to the server's deadlines: its kill grace (a
 * cancelled job's SIGKILL follows its SIGTERM after 3 s) and the ticks
 * of its want-book. */
#define CONN_KILL_MARGIN_MS 5000

/* Opens a connection of a (TCP + upgrade); NULL if it cannot start. */
struct exc_conn *conn_open(struct exc_addr *a);
/* Closes and frees k now (no callback); unlinks it from the jobs. */
void conn_free(struct exc_conn *k, int flush);
/* Sends a message (consumes o); 0 or -1. */
int conn_send(struct exc_conn *k, struct json_object *o);
/* 1 if the instance's HELLO lists service (and it is not draining). */
int conn_has_service(const struct exc_conn *k, const char *service);
/* Why k's instance disabled service (its HELLO's "disabled"), or NULL. */
const char *conn_disabled_why(const struct exc_conn *k, const char *service);
/* Claim share of the instance, headroom included: floor(slots / clients)
 * + 1, where slots are those of the waitgroup running service (NULL: of
 * every waitgroup); 0 when it does not run the service or drains. */
unsigned conn_share(const struct exc_conn *k, const char *service);

/* ---- wire.c ------------------------------------------------------------- */

struct json_object *wire_want(const char *job_id, const char *service, int priority);
/* UNWANT, QUERY, CANCEL */
struct json_object *wire_job_msg(const char *type, const char *job_id);
/* DECLINE */
struct json_object *wire_decline(const char *job_id, const char *token);
/* JOB (takes a reference to job) */
struct json_object *wire_job(const char *job_id, const char *token, struct json_object *job);
/* String field of a message, or NULL. */
const char *wire_str(struct json_object *o, const char *key);
/* Integer field, or def when absent/not an integer. */
int64_t wire_int(struct json_object *o, const char *key, int64_t def);
/* The same, held to [lo, hi]: for counts a server sends that the client
 * adds up or narrows (a broken or hostile HELLO must not overflow them). */
int64_t wire_int_in(struct json_object *o, const char *key, int64_t def, int64_t lo, int64_t hi);
/* The most slots a client believes of one instance's HELLO (one waitgroup,
 * or all of them): far above any real host, far below any overflow. */
#define WIRE_SLOTS_MAX 1000000
/* How a message is written for the wire: compact, and `/` not escaped
 * (a payload full of paths would otherwise grow by a byte per slash, and
 * the JOB's size check, made on this same text, would refuse a payload
 * the database's cap let through). */
#define WIRE_TEXT (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

/* ---- client_job.c ------------------------------------------------------- */

/* The messages server_conn.c hands on (o: the whole message). */
void job_on_offer(exc_client *c, struct exc_conn *k, struct json_object *o);
void job_on_done(exc_client *c, struct exc_conn *k, struct json_object *o);
void job_on_position(exc_client *c, struct exc_conn *k, struct json_object *o);
/* PROGRESS (protocol 3): to the job's on_progress when k runs it. */
void job_on_progress(exc_client *c, struct exc_conn *k, struct json_object *o);
void job_on_error(exc_client *c, struct exc_conn *k, struct json_object *o);
/* A connection got (or changed) its HELLO: park waiting jobs, adopt
 * running jobs of its instance. */
void job_on_ready(exc_client *c, struct exc_conn *k);
/* A connection is going away: drop its copies, mark its jobs seeking. */
void job_on_conn_gone(exc_client *c, struct exc_conn *k);
/* Every retry tick: back-pressure, unknown service, lost, unauthorized. */
void job_tick(exc_client *c);
/* Frees every job without callbacks (client free): UNWANT/CANCEL first. */
void job_free_all(exc_client *c);

/* ---- pipes.c ------------------------------------------------------------ */

/* Completion of an endpoint's transfer (ok: body complete). */
typedef void (*endpoint_done_fn)(void *arg, int ok, uint64_t bytes, const char *why);

/*
 * Creates a one-time endpoint on the pipe server of the local address
 * local (created when needed); writes its URL (http://addr:port/p/<id>)
 * into url.  is_sink: PUT, else GET.  The stream (stream.c) is served or
 * filled by it; done is called once the transfer ended (not after
 * endpoint_free).  NULL on failure.
 */
struct stream;
struct endpoint *endpoint_new(exc_client *c, const struct sockaddr_storage *local, int is_sink,
			      struct stream *st, endpoint_done_fn done, void *arg, char *url,
			      size_t urlcap);
/* Forgets the endpoint; an ongoing transfer is cut. */
void endpoint_free(struct endpoint *e);
/* 1 once a request took the endpoint. */
int endpoint_used(const struct endpoint *e);
/* Body bytes moved so far (a transfer still going, or cut, included). */
uint64_t endpoint_bytes(const struct endpoint *e);
void pipes_free_all(exc_client *c);

/* ---- stream.c ----------------------------------------------------------- */

/*
 * A local source (read side) or sink (write side) of one endpoint:
 * an fd (polled, or a regular file read/written directly), a copied
 * buffer, or nothing (discard).
 */
struct stream;
struct evbuffer;
/* Source: NULL on failure (errno). */
struct stream *stream_source(struct event_base *base, const struct exc_io *io);
struct stream *stream_sink(struct event_base *base, const struct exc_io *io);
void stream_free(struct stream *s);
/* Source length when known (buffer, regular file), else -1. */
int64_t stream_length(const struct stream *s);
/*
 * Source: moves up to max bytes into out.  Returns bytes moved, 0 when
 * nothing is ready now (then ready() is called when it is), -1 on error,
 * -2 at EOF.
 */
long stream_read(struct stream *s, struct evbuffer *out, size_t max, void (*ready)(void *arg),
		 void *arg);
/*
 * Sink: takes all of in (queued); returns the bytes still queued after
 * writing what the fd took, or -1 on a write error.  drained() is called
 * when the queue empties again.
 */
long stream_write(struct stream *s, struct evbuffer *in, void (*drained)(void *arg), void *arg);
/* Forgets the ready/drained callback (its owner goes away); the stream
 * stays usable. */
void stream_detach(struct stream *s);
/* A file sink's bytes take the place of its file (rename of the
 * temporary file): 0, or -1 with the error set (stream_error).  Nothing
 * to do for other streams. */
int stream_commit(struct stream *s);
/* A file sink's temporary file is removed; the file stays as it was. */
void stream_discard(struct stream *s);
/* The last error of the stream ("" if none). */
const char *stream_error(const struct stream *s);

#endif
