/*
 * wsclient.h - a small blocking websocket and HTTP client for the tests.
 *
 * Owns: one socket per struct wsc and its receive buffer.
 * Invariants: every wait is bounded by a poll() timeout (no call blocks
 * forever); it never raises SIGPIPE (send with MSG_NOSIGNAL); it checks
 * what the server sends strictly (masked server frames, bad lengths are
 * reported as WSC_ERROR) but sends whatever it is told to, including
 * hostile frames, through the raw writers.  TLS (wss) where asked, with
 * certificate verification; the raw-socket helpers (wsc_fd with poll,
 * wsc_wait_closed, wsc_slow_connect) are for plain connections.  Not thread-safe per client;
 * separate clients may live in separate threads.
 */
#ifndef ES_TEST_WSCLIENT_H
#define ES_TEST_WSCLIENT_H

#include <stddef.h>
#include <stdint.h>

struct wsc;

/* wsc_recv() results (the opcodes for messages). */
enum wsc_type {
	WSC_ERROR = -2, /* I/O error or server broke the protocol */
	WSC_EOF = -1,   /* the server closed the connection */
	WSC_TIMEOUT = 0,
	WSC_TEXT = 0x1,
	WSC_BINARY = 0x2,
	WSC_CLOSE = 0x8, /* close_code set (1005 if none) */
	WSC_PING = 0x9,  /* only with WSC_OPT_REPORT_PINGS */
	WSC_PONG = 0xA,  /* only with WSC_OPT_REPORT_PONGS */
};

/* Options (wsc_set_options). */
enum {
	WSC_OPT_NO_AUTO_PONG = 1 << 0,   /* do not answer pings */
	WSC_OPT_REPORT_PINGS = 1 << 1,   /* return pings from wsc_recv */
	WSC_OPT_REPORT_PONGS = 1 << 2,   /* return pongs from wsc_recv */
	WSC_OPT_NO_CLOSE_REPLY = 1 << 3, /* do not answer a close frame */
};

struct wsc_msg {
	int type;            /* enum wsc_type */
	uint16_t close_code; /* WSC_CLOSE */
	char *data;          /* payload (close: the reason), NUL-terminated, malloc'd */
	size_t len;
};

void wsc_msg_free(struct wsc_msg *m);

/*
 * TCP connection to host:port with a timeout.  Returns a connected
 * non-blocking socket, or -1.
 */
int wsc_tcp_connect(const char *host, int port, int timeout_ms);

/* The IPv4 source address of the connections wsc_tcp_connect makes from
 * now on (NULL: the kernel's choice): bound with IP_BIND_ADDRESS_NO_PORT,
 * so that each source address has its own ephemeral ports (the benchmark's
 * 100,000 connections to one port).  Process-wide; not thread-safe. */
void wsc_set_source_addr(const char *ipv4);

struct wsc_connect_opts {
	const char *extra_headers; /* NULL or CRLF-terminated lines */
	int timeout_ms;            /* for the whole handshake; 0: 5000 */
	const char *version;       /* Sec-WebSocket-Version; NULL: "13" */
	const char *key;           /* Sec-WebSocket-Key; NULL: random */
	int omit_key;              /* send no Sec-WebSocket-Key */
	const void *early;         /* bytes sent in the same write as the */
	size_t early_len;          /* request (e.g. a first frame) */
	const char *tls_ca;        /* wss: verify the server against this
					 * PEM file and the host; NULL: plain */
	const char *tls_name;      /* the name (or address) to verify;
					 * NULL: the host dialled */
};

/*
 * Websocket handshake for path_and_query ("/broker?client=a").  *status
 * gets the HTTP status (101 on success, 0 if no response could be read).
 * A 101 whose Sec-WebSocket-Accept is wrong fails with *status 101.
 * Returns the client, or NULL.
 */
struct wsc *wsc_connect(const char *host, int port, const char *path_and_query,
			const char *extra_headers, int timeout_ms, int *status);
struct wsc *wsc_connect_opts(const char *host, int port, const char *path_and_query,
			     const struct wsc_connect_opts *opts, int *status);

/* A client on an already connected socket (no handshake); takes fd. */
struct wsc *wsc_from_fd(int fd);

/* Closes the socket and frees the client.  NULL ok. */
void wsc_free(struct wsc *c);

int wsc_fd(const struct wsc *c);
void wsc_set_options(struct wsc *c, int options);
/* Timeout for sends (default 5000 ms). */
void wsc_set_send_timeout(struct wsc *c, int timeout_ms);

/*
 * The next message, waiting at most timeout_ms (0: only what is already
 * there).  Fragmented messages are reassembled; pings are answered unless
 * disabled; a close frame is answered (same code) unless disabled.
 * Returns m->type.  Free m with wsc_msg_free.
 */
int wsc_recv(struct wsc *c, int timeout_ms, struct wsc_msg *m);

/* Masked, final frames.  Return 0, or -1. */
int wsc_send_text(struct wsc *c, const char *msg, size_t len);
int wsc_send_binary(struct wsc *c, const void *msg, size_t len);
int wsc_send_ping(struct wsc *c, const void *payload, size_t len);
int wsc_send_close(struct wsc *c, uint16_t code, const char *reason);

/* A frame exactly as described: nothing is checked. */
struct wsc_frame {
	int fin;
	int rsv;    /* the three RSV bits, 0-7 */
	int opcode; /* 0-15 */
	int masked;
	int len_form; /* 0: shortest; 7, 16 or 64: that length field */
	const void *payload;
	size_t len;
};

/*
 * Encodes f into out (capacity cap).  Returns the frame size, or 0 if it
 * does not fit.  Use with wsc_send_bytes to send part of a frame.
 */
size_t wsc_build_frame(const struct wsc_frame *f, unsigned char *out, size_t cap);
int wsc_send_frame(struct wsc *c, const struct wsc_frame *f);
int wsc_send_raw_frame(struct wsc *c, int fin, int opcode, int masked, const void *payload,
		       size_t len);
/* Sends raw bytes. */
int wsc_send_bytes(struct wsc *c, const void *data, size_t len);

/*
 * Slowloris helper: connects and sends partial (e.g. the first lines of a
 * request) without ever finishing it.  Returns the socket, or -1.
 */
int wsc_slow_connect(const char *host, int port, const char *partial, int timeout_ms);

/*
 * Waits until the peer closes the connection (EOF or reset), discarding
 * what it sends.  Returns 1 if it did within timeout_ms, 0 if not, -1 on
 * error.  Works on any socket (slowloris tests: wsc_tcp_connect, send part
 * of a request, then wait here).
 */
int wsc_wait_closed(int fd, int timeout_ms);

/*
 * One HTTP request: request is sent as is (use "Connection: close").  The
 * status goes to *status, the body (de-chunked, truncated to bodycap - 1,
 * NUL-terminated) to body (may be NULL).  Returns the body length, or -1.
 */
int wsc_http_request(const char *host, int port, const char *request, int timeout_ms, int *status,
		     char *body, size_t bodycap);
/* The same over TLS, verifying the server against the PEM file tls_ca
 * (NULL: plain, as wsc_http_request). */
int wsc_https_request(const char *host, int port, const char *tls_ca, const char *request,
		      int timeout_ms, int *status, char *body, size_t bodycap);
/* GET path with Host and Connection: close. */
int wsc_http_get(const char *host, int port, const char *path, int timeout_ms, int *status,
		 char *body, size_t bodycap);

#endif
