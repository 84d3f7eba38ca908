/*
 * httpc.c - see httpc.h.
 */
#include "autoconfig.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "httpc.h"

struct buf {
	char *p;
	size_t len, cap;
};

static int buf_add(struct buf *b, const void *data, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p)
			return -1;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

static long long now_ms(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static int build(struct buf *out, const char *method, const char *target, const char *headers,
		 const void *body, size_t len, size_t chunk)
{
	char head[8192];
	/* Host: 127.0.0.1 unless headers name one (first) */
	int own = headers && strncasecmp(headers, "Host:", 5) == 0;
	int n = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\n%s%s", method, target,
			 own ? "" : "Host: 127.0.0.1\r\n", headers ? headers : "");
	if (n < 0 || (size_t)n >= sizeof head)
		return -1;
	if (buf_add(out, head, (size_t)n) < 0)
		return -1;
	if (body && chunk > 0) {
		if (buf_add(out, "Transfer-Encoding: chunked\r\n\r\n", 30) < 0)
			return -1;
		for (size_t off = 0; off < len; off += chunk) {
			size_t k = len - off < chunk ? len - off : chunk;
			n = snprintf(head, sizeof head, "%zx\r\n", k);
			if (buf_add(out, head, (size_t)n) < 0 ||
			    buf_add(out, (const char *)body + off, k) < 0 ||
			    buf_add(out, "\r\n", 2) < 0)
				return -1;
		}
		return buf_add(out, "0\r\n\r\n", 5);
	}
	if (body) {
		n = snprintf(head, sizeof head, "Content-Length: %zu\r\n", len);
		if (buf_add(out, head, (size_t)n) < 0)
			return -1;
	}
	if (buf_add(out, "\r\n", 2) < 0)
		return -1;
	return body ? buf_add(out, body, len) : 0;
}

/* Reads every byte until the server closes (or the deadline). */
static int exchange(int port, const struct buf *out, int timeout_ms, struct buf *in)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		close(fd);
		return -1;
	}
	fcntl(fd, F_SETFL, O_NONBLOCK);
	size_t sent = 0;
	int can_send = 1, rc = -1;
	long long deadline = now_ms() + timeout_ms;
	char tmp[65536];
	for (;;) {
		long long left = deadline - now_ms();
		if (left <= 0)
			break;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (can_send && sent < out->len)
			p.events |= POLLOUT;
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
			break;
		if (p.revents & POLLOUT) {
			ssize_t w = send(fd, out->p + sent, out->len - sent, MSG_NOSIGNAL);
			if (w > 0)
				sent += (size_t)w;
			else if (w < 0 && errno != EAGAIN && errno != EINTR)
				can_send = 0; /* the server stopped reading: read its answer */
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t r = recv(fd, tmp, sizeof tmp, 0);
			if (r > 0) {
				if (buf_add(in, tmp, (size_t)r) < 0)
					break;
			} else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
				rc = 0; /* closed (or reset): the answer is what came */
				break;
			}
		}
	}
	close(fd);
	return rc;
}

/* Parses in into r; 0 or -1. */
static int parse(struct buf *in, struct httpc_resp *r)
{
	char *p = in->p, *end = in->p + in->len;
	for (;;) {
		char *hend = p ? strstr(p, "\r\n\r\n") : NULL;
		if (!hend || sscanf(p, "HTTP/1.%*d %d", &r->status) != 1)
			return -1;
		if (r->status == 100) {
			r->interim_100 = 1;
			p = hend + 4;
			continue;
		}
		r->head = strndup(p, (size_t)(hend + 2 - p));
		p = hend + 4;
		break;
	}
	struct buf body = { 0 }, trailers = { 0 };
	char v[64];
	buf_add(&trailers, "", 0);
	buf_add(&body, "", 0);
	if (httpc_field(r->head, "Transfer-Encoding", v, sizeof v) &&
	    strcasecmp(v, "chunked") == 0) {
		r->chunked = 1;
		while (p < end) {
			char *eol = strstr(p, "\r\n");
			if (!eol)
				break;
			size_t size = strtoul(p, NULL, 16);
			p = eol + 2;
			if (size == 0) {
				char *tend = strstr(p, "\r\n\r\n");
				if (p + 2 <= end && p[0] == '\r' && p[1] == '\n') {
					r->complete = 1;
				} else if (tend) {
					buf_add(&trailers, p, (size_t)(tend + 2 - p));
					r->complete = 1;
				}
				break;
			}
			if ((size_t)(end - p) < size + 2) {
				buf_add(&body, p,
					(size_t)(end - p) < size ? (size_t)(end - p) : size);
				break;
			}
			buf_add(&body, p, size);
			p += size + 2;
		}
	} else {
		size_t n = (size_t)(end - p);
		if (httpc_field(r->head, "Content-Length", v, sizeof v)) {
			size_t cl = strtoul(v, NULL, 10);
			r->complete = n >= cl;
			if (n > cl)
				n = cl;
		}
		buf_add(&body, p, n);
	}
	r->body = body.p;
	r->body_len = body.len;
	r->trailers = trailers.p;
	return 0;
}

int httpc_request(int port, const char *method, const char *target, const char *headers,
		  const void *body, size_t len, size_t chunk, int timeout_ms, struct httpc_resp *r)
{
	struct buf out = { 0 }, in = { 0 };
	memset(r, 0, sizeof *r);
	int rc = build(&out, method, target, headers, body, len, chunk);
	if (rc == 0)
		rc = exchange(port, &out, timeout_ms, &in);
	if (rc == 0 && in.len)
		rc = parse(&in, r);
	else
		rc = -1;
	free(out.p);
	free(in.p);
	if (rc != 0)
		httpc_free(r);
	return rc;
}

void httpc_free(struct httpc_resp *r)
{
	free(r->head);
	free(r->trailers);
	free(r->body);
	memset(r, 0, sizeof *r);
}

const char *httpc_field(const char *block, const char *name, char *out, size_t outlen)
{
	size_t n = strlen(name);
	for (const char *line = block; line && *line;) {
		const char *eol = strstr(line, "\r\n");
		if (!eol)
			break;
		if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
			const char *v = line + n + 1;
			while (*v == ' ')
				v++;
			size_t k = (size_t)(eol - v);
			if (k >= outlen)
				k = outlen - 1;
			memcpy(out, v, k);
			out[k] = '\0';
			return out;
		}
		line = eol + 2;
	}
	return NULL;
}

const char *httpc_qs(const char *s)
{
	static char out[8192];
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;
	for (; *s && o + 4 < sizeof out; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.' || c == '~') {
			out[o++] = (char)c;
		} else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	out[o] = '\0';
	return out;
}
