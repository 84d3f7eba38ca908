/*
 * wsclient.c - see wsclient.h.  Plain POSIX sockets, non-blocking, every
 * wait a poll() against a deadline; OpenSSL on the same socket for TLS.
 * The accept value is computed here independently of
 * src/net/ws_handshake.c so the tests check it.
 */
#include "autoconfig.h"
#include "wsclient.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#define WSC_MAX_BUF (64u * 1024 * 1024) /* refuse to buffer more */
#define WSC_MAX_HEAD 16384

struct wsc {
	int fd;
	SSL_CTX *ssl_ctx; /* TLS (wss://, https://): both set */
	SSL *ssl;
	int options;
	int send_timeout_ms;
	int eof;
	int close_replied;
	unsigned char *buf; /* received, not yet parsed */
	size_t len, cap;
	int frag_type; /* 0: no fragmented message in progress */
	char *frag;
	size_t frag_len;
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int remaining(int64_t deadline)
{
	int64_t r = deadline - now_ms();

	return r < 0 ? 0 : (int)r;
}

/* Waits for events on fd until deadline: 1 ready, 0 timeout, -1 error. */
static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		int r = poll(&p, 1, remaining(deadline));

		if (r > 0)
			return 1;
		if (r == 0)
			return 0;
		if (errno != EINTR)
			return -1;
	}
}

static int send_all_fd(int fd, const void *data, size_t len, int timeout_ms)
{
	const char *p = data;
	int64_t deadline = now_ms() + timeout_ms;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (wait_fd(fd, POLLOUT, deadline) != 1)
				return -1;
			continue;
		}
		return -1;
	}
	return 0;
}

/* Waits for what OpenSSL asked for after a call that returned r. */
static int tls_wait(struct wsc *c, int r, int64_t deadline)
{
	switch (SSL_get_error(c->ssl, r)) {
	case SSL_ERROR_WANT_READ: return wait_fd(c->fd, POLLIN, deadline) == 1 ? 0 : -1;
	case SSL_ERROR_WANT_WRITE: return wait_fd(c->fd, POLLOUT, deadline) == 1 ? 0 : -1;
	default: return -1;
	}
}

/* Sends everything on the connection, through TLS when it has it. */
static int send_all(struct wsc *c, const void *data, size_t len, int timeout_ms)
{
	const char *p = data;
	int64_t deadline = now_ms() + timeout_ms;

	if (!c->ssl)
		return send_all_fd(c->fd, data, len, timeout_ms);
	while (len > 0) {
		ERR_clear_error(); /* SSL_get_error reads the thread's queue */
		int n = SSL_write(c->ssl, p, len > INT32_MAX ? INT32_MAX : (int)len);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
		} else if (tls_wait(c, n, deadline) != 0) {
			return -1;
		}
	}
	return 0;
}

/*
 * TLS client handshake on c, verifying the server's certificate against the
 * PEM file ca and against host (an IP address or a DNS name).  0 or -1.
 */
static int start_tls(struct wsc *c, const char *host, const char *ca, int64_t deadline)
{
	c->ssl_ctx = SSL_CTX_new(TLS_client_method());
	if (!c->ssl_ctx || SSL_CTX_load_verify_locations(c->ssl_ctx, ca, NULL) != 1)
		return -1;
	SSL_CTX_set_verify(c->ssl_ctx, SSL_VERIFY_PEER, NULL);
	c->ssl = SSL_new(c->ssl_ctx);
	if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1)
		return -1;
	if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), host) != 1) {
		/* not an address: a name, also sent as SNI */
		if (SSL_set1_host(c->ssl, host) != 1 || SSL_set_tlsext_host_name(c->ssl, host) != 1)
			return -1;
	}
	for (;;) {
		ERR_clear_error();
		int r = SSL_connect(c->ssl);
		if (r == 1)
			return 0;
		if (tls_wait(c, r, deadline) != 0)
			return -1;
	}
}

static struct in_addr source_addr; /* wsc_set_source_addr; 0: none */

void wsc_set_source_addr(const char *ipv4)
{
	if (!ipv4 || inet_pton(AF_INET, ipv4, &source_addr) != 1)
		source_addr.s_addr = 0;
}

/* Binds fd to the source address, its port left to connect(). */
static int bind_source(int fd)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = source_addr };
	int one = 1;

	if (setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one) != 0)
		return -1;
	return bind(fd, (struct sockaddr *)&sa, sizeof sa);
}

int wsc_tcp_connect(const char *host, int port, int timeout_ms)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	char portstr[16];
	int64_t deadline = now_ms() + timeout_ms;
	int fd = -1;

	snprintf(portstr, sizeof portstr, "%d", port);
	if (getaddrinfo(host, portstr, &hints, &res) != 0)
		return -1;
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		int err = 0;
		socklen_t elen = sizeof err;

		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    ai->ai_protocol);
		if (fd < 0)
			continue;
		if (source_addr.s_addr && ai->ai_family == AF_INET && bind_source(fd) != 0) {
			close(fd);
			fd = -1;
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		if (errno == EINPROGRESS && wait_fd(fd, POLLOUT, deadline) == 1 &&
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err == 0)
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

/* ---- client lifetime ---------------------------------------------------- */

struct wsc *wsc_from_fd(int fd)
{
	struct wsc *c = calloc(1, sizeof *c);

	if (c == NULL) {
		close(fd);
		return NULL;
	}
	c->fd = fd;
	c->send_timeout_ms = 5000;
	return c;
}

void wsc_free(struct wsc *c)
{
	if (c == NULL)
		return;
	SSL_free(c->ssl);
	SSL_CTX_free(c->ssl_ctx);
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
	free(c->frag);
	free(c);
}

int wsc_fd(const struct wsc *c)
{
	return c->fd;
}

void wsc_set_options(struct wsc *c, int options)
{
	c->options = options;
}

void wsc_set_send_timeout(struct wsc *c, int timeout_ms)
{
	c->send_timeout_ms = timeout_ms;
}

void wsc_msg_free(struct wsc_msg *m)
{
	free(m->data);
	m->data = NULL;
	m->len = 0;
}

/* Appends what can be read now (after waiting until deadline):
 * >0 bytes read, 0 EOF, -1 error, -2 timeout. */
static int fill(struct wsc *c, int64_t deadline)
{
	ssize_t n;
	int w;

	if (c->eof)
		return 0;
	if (c->cap - c->len < 65536) {
		size_t ncap = c->cap ? c->cap * 2 : 131072;
		unsigned char *nb;

		if (ncap > WSC_MAX_BUF)
			return -1;
		nb = realloc(c->buf, ncap);
		if (nb == NULL)
			return -1;
		c->buf = nb;
		c->cap = ncap;
	}
	while (c->ssl) {
		size_t room = c->cap - c->len;
		ERR_clear_error();
		int r = SSL_read(c->ssl, c->buf + c->len, room > INT32_MAX ? INT32_MAX : (int)room);
		if (r > 0) {
			c->len += (size_t)r;
			return r;
		}
		int e = SSL_get_error(c->ssl, r);
		if (e == SSL_ERROR_ZERO_RETURN ||
		    (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)) {
			c->eof = 1; /* close_notify, or the TCP end without it */
			return 0;
		}
		if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
			return -1;
		w = wait_fd(c->fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline);
		if (w == 0)
			return -2;
		if (w < 0)
			return -1;
	}
	for (;;) {
		n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
		if (n > 0) {
			c->len += (size_t)n;
			return (int)n;
		}
		if (n == 0) {
			c->eof = 1;
			return 0;
		}
		if (errno == EINTR)
			continue;
		if (errno == ECONNRESET) {
			c->eof = 1;
			return 0;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		w = wait_fd(c->fd, POLLIN, deadline);
		if (w == 0)
			return -2;
		if (w < 0)
			return -1;
	}
}

static void consume(struct wsc *c, size_t n)
{
	memmove(c->buf, c->buf + n, c->len - n);
	c->len -= n;
}

/* ---- frames ------------------------------------------------------------- */

size_t wsc_build_frame(const struct wsc_frame *f, unsigned char *out, size_t cap)
{
	int form = f->len_form;
	size_t h = 2;
	unsigned char key[4] = { 0x12, 0x34, 0x56, 0x78 };

	if (form == 0)
		form = f->len < 126 ? 7 : f->len < 65536 ? 16 : 64;
	if ((form == 7 && f->len > 125) || (form == 16 && f->len > 65535) ||
	    (form != 7 && form != 16 && form != 64))
		return 0;
	h += form == 16 ? 2 : form == 64 ? 8 : 0;
	h += f->masked ? 4 : 0;
	if (cap < h || cap - h < f->len)
		return 0;
	out[0] = (unsigned char)((f->fin ? 0x80 : 0) | (f->rsv & 7) << 4 | (f->opcode & 0xf));
	out[1] = f->masked ? 0x80 : 0;
	if (form == 7) {
		out[1] |= (unsigned char)f->len;
	} else if (form == 16) {
		out[1] |= 126;
		out[2] = (unsigned char)(f->len >> 8);
		out[3] = (unsigned char)f->len;
	} else {
		out[1] |= 127;
		for (int i = 0; i < 8; i++)
			out[2 + i] = (unsigned char)((uint64_t)f->len >> (56 - 8 * i));
	}
	if (f->masked) {
		if (getrandom(key, sizeof key, 0) != (ssize_t)sizeof key)
			key[0] ^= (unsigned char)now_ms();
		memcpy(out + h - 4, key, 4);
	}
	for (size_t i = 0; i < f->len; i++) {
		unsigned char b = ((const unsigned char *)f->payload)[i];
		out[h + i] = f->masked ? b ^ key[i % 4] : b;
	}
	return h + f->len;
}

int wsc_send_bytes(struct wsc *c, const void *data, size_t len)
{
	return send_all(c, data, len, c->send_timeout_ms);
}

int wsc_send_frame(struct wsc *c, const struct wsc_frame *f)
{
	size_t cap = f->len + 14, n;
	unsigned char *buf = malloc(cap);
	int r;

	if (buf == NULL)
		return -1;
	n = wsc_build_frame(f, buf, cap);
	r = n ? wsc_send_bytes(c, buf, n) : -1;
	free(buf);
	return r;
}

int wsc_send_raw_frame(struct wsc *c, int fin, int opcode, int masked, const void *payload,
		       size_t len)
{
	struct wsc_frame f = {
		.fin = fin, .opcode = opcode, .masked = masked, .payload = payload, .len = len
	};

	return wsc_send_frame(c, &f);
}

int wsc_send_text(struct wsc *c, const char *msg, size_t len)
{
	return wsc_send_raw_frame(c, 1, WSC_TEXT, 1, msg, len);
}

int wsc_send_binary(struct wsc *c, const void *msg, size_t len)
{
	return wsc_send_raw_frame(c, 1, WSC_BINARY, 1, msg, len);
}

int wsc_send_ping(struct wsc *c, const void *payload, size_t len)
{
	return wsc_send_raw_frame(c, 1, WSC_PING, 1, payload, len);
}

int wsc_send_close(struct wsc *c, uint16_t code, const char *reason)
{
	unsigned char p[125];
	size_t rlen = reason ? strlen(reason) : 0;

	if (code == 0)
		return wsc_send_raw_frame(c, 1, WSC_CLOSE, 1, NULL, 0);
	if (rlen > 123)
		rlen = 123;
	p[0] = (unsigned char)(code >> 8);
	p[1] = (unsigned char)code;
	if (rlen)
		memcpy(p + 2, reason, rlen);
	return wsc_send_raw_frame(c, 1, WSC_CLOSE, 1, p, rlen + 2);
}

/*
 * Parses one server frame at the start of the buffer: 1 complete (fields
 * set), 0 incomplete, -1 not a valid server frame.
 */
static int parse_frame(struct wsc *c, int *fin, int *op, size_t *hlen, uint64_t *plen)
{
	const unsigned char *b = c->buf;
	uint64_t len;
	size_t h = 2;

	if (c->len < 2)
		return 0;
	*fin = b[0] >> 7;
	*op = b[0] & 0xf;
	if ((b[0] & 0x70) || (b[1] & 0x80)) /* RSV bits, masked */
		return -1;
	len = b[1] & 0x7f;
	if (len == 126) {
		h = 4;
		if (c->len < h)
			return 0;
		len = (uint64_t)b[2] << 8 | b[3];
	} else if (len == 127) {
		h = 10;
		if (c->len < h)
			return 0;
		len = 0;
		for (int i = 0; i < 8; i++)
			len = len << 8 | b[2 + i];
	}
	if ((*op & 8) && (len > 125 || !*fin))
		return -1;
	if (len > WSC_MAX_BUF)
		return -1;
	if (c->len - h < len)
		return 0;
	*hlen = h;
	*plen = len;
	return 1;
}

static char *dup_payload(const unsigned char *p, size_t len)
{
	char *s = malloc(len + 1);

	if (s) {
		memcpy(s, p, len);
		s[len] = '\0';
	}
	return s;
}

int wsc_recv(struct wsc *c, int timeout_ms, struct wsc_msg *m)
{
	int64_t deadline = now_ms() + timeout_ms;

	memset(m, 0, sizeof *m);
	for (;;) {
		int fin, op, r;
		size_t h;
		uint64_t plen;

		r = parse_frame(c, &fin, &op, &h, &plen);
		if (r < 0)
			return m->type = WSC_ERROR;
		if (r == 1) {
			const unsigned char *p = c->buf + h;
			size_t len = (size_t)plen;

			switch (op) {
			case WSC_TEXT:
			case WSC_BINARY:
				if (c->frag_type)
					return m->type = WSC_ERROR;
				if (fin) {
					m->type = op;
					m->data = dup_payload(p, len);
					m->len = len;
					consume(c, h + len);
					return m->type;
				}
				c->frag_type = op;
				c->frag = dup_payload(p, len);
				c->frag_len = len;
				break;
			case 0: {
				char *nf;

				if (!c->frag_type)
					return m->type = WSC_ERROR;
				nf = realloc(c->frag, c->frag_len + len + 1);
				if (nf == NULL)
					return m->type = WSC_ERROR;
				memcpy(nf + c->frag_len, p, len);
				c->frag = nf;
				c->frag_len += len;
				c->frag[c->frag_len] = '\0';
				if (fin) {
					m->type = c->frag_type;
					m->data = c->frag;
					m->len = c->frag_len;
					c->frag = NULL;
					c->frag_len = 0;
					c->frag_type = 0;
					consume(c, h + len);
					return m->type;
				}
				break;
			}
			case WSC_CLOSE:
				m->type = WSC_CLOSE;
				m->close_code = len >= 2 ? (uint16_t)(p[0] << 8 | p[1]) : 1005;
				m->data = dup_payload(p + (len >= 2 ? 2 : 0),
						      len >= 2 ? len - 2 : 0);
				m->len = len >= 2 ? len - 2 : 0;
				consume(c, h + len);
				if (!(c->options & WSC_OPT_NO_CLOSE_REPLY) && !c->close_replied) {
					c->close_replied = 1;
					wsc_send_close(c, m->close_code == 1005 ? 0 : m->close_code,
						       NULL);
				}
				return m->type;
			case WSC_PING:
				if (!(c->options & WSC_OPT_NO_AUTO_PONG))
					wsc_send_raw_frame(c, 1, WSC_PONG, 1, p, len);
				if (c->options & WSC_OPT_REPORT_PINGS) {
					m->type = WSC_PING;
					m->data = dup_payload(p, len);
					m->len = len;
					consume(c, h + len);
					return m->type;
				}
				break;
			case WSC_PONG:
				if (c->options & WSC_OPT_REPORT_PONGS) {
					m->type = WSC_PONG;
					m->data = dup_payload(p, len);
					m->len = len;
					consume(c, h + len);
					return m->type;
				}
				break;
			default: return m->type = WSC_ERROR;
			}
			consume(c, h + len);
			continue;
		}
		r = fill(c, deadline);
		if (r == 0)
			return m->type = WSC_EOF;
		if (r == -1)
			return m->type = WSC_ERROR;
		if (r == -2)
			return m->type = WSC_TIMEOUT;
	}
}

int wsc_slow_connect(const char *host, int port, const char *partial, int timeout_ms)
{
	int fd = wsc_tcp_connect(host, port, timeout_ms);

	if (fd >= 0 && partial != NULL &&
	    send_all_fd(fd, partial, strlen(partial), timeout_ms) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int wsc_wait_closed(int fd, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	char scratch[4096];

	for (;;) {
		ssize_t n = recv(fd, scratch, sizeof scratch, MSG_DONTWAIT);
		int w;

		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return 1;
		if (n > 0 || (n < 0 && errno == EINTR))
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		w = wait_fd(fd, POLLIN, deadline);
		if (w == 0)
			return 0;
		if (w < 0)
			return -1;
	}
}

/* ---- handshake ---------------------------------------------------------- */

static void expected_accept(const char *key, char out[29])
{
	static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
	char in[128];
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	int n = snprintf(in, sizeof in, "%s%s", key, guid);

	out[0] = '\0';
	if (n < 0 || (size_t)n >= sizeof in ||
	    EVP_Digest(in, (size_t)n, md, &mdlen, EVP_sha1(), NULL) != 1)
		return;
	EVP_EncodeBlock((unsigned char *)out, md, (int)mdlen);
}

/* Finds header name in a response head; copies its value (trimmed). */
static int find_header(const char *head, const char *name, char *out, size_t cap)
{
	size_t nlen = strlen(name);
	const char *line = strstr(head, "\r\n");

	while (line != NULL && line[2] != '\0' && line[2] != '\r') {
		const char *l = line + 2, *end = strstr(l, "\r\n");
		size_t vlen;

		if (end == NULL)
			return 0;
		if (strncasecmp(l, name, nlen) == 0 && l[nlen] == ':') {
			const char *v = l + nlen + 1;

			while (*v == ' ' || *v == '\t')
				v++;
			vlen = (size_t)(end - v);
			while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
				vlen--;
			if (vlen >= cap)
				vlen = cap - 1;
			memcpy(out, v, vlen);
			out[vlen] = '\0';
			return 1;
		}
		line = end;
	}
	return 0;
}

/* Reads a response head into c->buf; returns its length or -1. */
static int read_head(struct wsc *c, int64_t deadline)
{
	for (;;) {
		if (c->len > 0) {
			unsigned char *e = memmem(c->buf, c->len, "\r\n\r\n", 4);

			if (e != NULL)
				return (int)(e - c->buf) + 4;
			if (c->len > WSC_MAX_HEAD)
				return -1;
		}
		if (fill(c, deadline) <= 0)
			return -1;
	}
}

static int parse_status(const char *head)
{
	int major, minor, status;

	if (sscanf(head, "HTTP/%d.%d %d", &major, &minor, &status) != 3)
		return 0;
	return status;
}

struct wsc *wsc_connect_opts(const char *host, int port, const char *path_and_query,
			     const struct wsc_connect_opts *o, int *status)
{
	int timeout = o->timeout_ms ? o->timeout_ms : 5000;
	int64_t deadline = now_ms() + timeout;
	unsigned char raw[16];
	char key[32], accept[29], got[64], *head = NULL, *req = NULL;
	struct wsc *c = NULL;
	int fd, n, hlen, st = 0;
	size_t reqcap;

	*status = 0;
	if (o->key) {
		snprintf(key, sizeof key, "%s", o->key);
	} else {
		if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
			return NULL;
		EVP_EncodeBlock((unsigned char *)key, raw, sizeof raw);
	}
	fd = wsc_tcp_connect(host, port, timeout);
	if (fd < 0)
		return NULL;
	c = wsc_from_fd(fd);
	if (c == NULL)
		return NULL;
	if (o->tls_ca && start_tls(c, o->tls_name ? o->tls_name : host, o->tls_ca, deadline) != 0)
		goto fail;
	reqcap = 512 + strlen(path_and_query) + strlen(host) + strlen(key) +
		 (o->extra_headers ? strlen(o->extra_headers) : 0) + o->early_len;
	req = malloc(reqcap);
	if (req == NULL)
		goto fail;
	n = snprintf(req, reqcap,
		     "GET %s HTTP/1.1\r\n"
		     "Host: %s:%d\r\n"
		     "Upgrade: websocket\r\n"
		     "Connection: Upgrade\r\n"
		     "%s%s%s"
		     "Sec-WebSocket-Version: %s\r\n"
		     "%s"
		     "\r\n",
		     path_and_query, host, port,
		     o->omit_key ? "" : "Sec-WebSocket-Key: ", o->omit_key ? "" : key,
		     o->omit_key ? "" : "\r\n", o->version ? o->version : "13",
		     o->extra_headers ? o->extra_headers : "");
	if (n < 0 || (size_t)n + o->early_len >= reqcap)
		goto fail;
	if (o->early_len)
		memcpy(req + n, o->early, o->early_len);
	if (send_all(c, req, (size_t)n + o->early_len, remaining(deadline)) != 0)
		goto fail;
	hlen = read_head(c, deadline);
	if (hlen < 0)
		goto fail;
	head = dup_payload(c->buf, (size_t)hlen);
	if (head == NULL)
		goto fail;
	st = parse_status(head);
	if (st != 101)
		goto fail;
	expected_accept(key, accept);
	if (!find_header(head, "Sec-WebSocket-Accept", got, sizeof got) ||
	    strcmp(got, accept) != 0 || o->omit_key)
		goto fail;
	consume(c, (size_t)hlen); /* frames that came with the 101 stay */
	free(head);
	free(req);
	*status = st;
	return c;
fail:
	*status = st;
	free(head);
	free(req);
	wsc_free(c);
	return NULL;
}

struct wsc *wsc_connect(const char *host, int port, const char *path_and_query,
			const char *extra_headers, int timeout_ms, int *status)
{
	struct wsc_connect_opts o = { .extra_headers = extra_headers, .timeout_ms = timeout_ms };

	return wsc_connect_opts(host, port, path_and_query, &o, status);
}

/* ---- plain HTTP ---------------------------------------------------------- */

/* De-chunks body[0..len) in place; returns the new length or -1. */
static long dechunk(char *body, size_t len)
{
	size_t in = 0, out = 0;

	for (;;) {
		char *end;
		unsigned long sz;

		if (in >= len)
			return -1;
		sz = strtoul(body + in, &end, 16);
		end = memmem(body + in, len - in, "\r\n", 2);
		if (end == NULL)
			return -1;
		in = (size_t)(end - body) + 2;
		if (sz == 0)
			return (long)out;
		if (len - in < sz + 2)
			return -1;
		memmove(body + out, body + in, sz);
		out += sz;
		in += sz + 2;
	}
}

int wsc_http_request(const char *host, int port, const char *request, int timeout_ms, int *status,
		     char *body, size_t bodycap)
{
	return wsc_https_request(host, port, NULL, request, timeout_ms, status, body, bodycap);
}

int wsc_https_request(const char *host, int port, const char *tls_ca, const char *request,
		      int timeout_ms, int *status, char *body, size_t bodycap)
{
	int64_t deadline = now_ms() + timeout_ms;
	struct wsc *c;
	char *head = NULL, val[64];
	int fd, hlen, ret = -1;
	long blen;

	*status = 0;
	fd = wsc_tcp_connect(host, port, timeout_ms);
	if (fd < 0)
		return -1;
	c = wsc_from_fd(fd);
	if (c == NULL)
		return -1;
	if (tls_ca && start_tls(c, host, tls_ca, deadline) != 0)
		goto out;
	if (send_all(c, request, strlen(request), timeout_ms) != 0)
		goto out;
	hlen = read_head(c, deadline);
	if (hlen < 0)
		goto out;
	head = dup_payload(c->buf, (size_t)hlen);
	if (head == NULL)
		goto out;
	*status = parse_status(head);
	consume(c, (size_t)hlen);
	if (find_header(head, "Content-Length", val, sizeof val)) {
		size_t want = strtoul(val, NULL, 10);

		while (c->len < want) {
			int r = fill(c, deadline);
			if (r <= 0)
				goto out;
		}
		blen = (long)want;
	} else {
		int r;

		while ((r = fill(c, deadline)) > 0)
			;
		if (r != 0)
			goto out;
		blen = (long)c->len;
		if (find_header(head, "Transfer-Encoding", val, sizeof val) &&
		    strcasecmp(val, "chunked") == 0)
			blen = dechunk((char *)c->buf, c->len);
		if (blen < 0)
			goto out;
	}
	if (body != NULL && bodycap > 0) {
		size_t n = (size_t)blen < bodycap - 1 ? (size_t)blen : bodycap - 1;

		memcpy(body, c->buf, n);
		body[n] = '\0';
	}
	ret = (int)blen;
out:
	free(head);
	wsc_free(c);
	return ret;
}

int wsc_http_get(const char *host, int port, const char *path, int timeout_ms, int *status,
		 char *body, size_t bodycap)
{
	char req[2048];
	int n = snprintf(req, sizeof req,
			 "GET %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n", path, host,
			 port);

	if (n < 0 || (size_t)n >= sizeof req)
		return -1;
	return wsc_http_request(host, port, req, timeout_ms, status, body, bodycap);
}
