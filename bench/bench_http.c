/* bench_http.c - see bench_http.h. */
#include "autoconfig.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_http.h"
#include "wsclient.h"

static int write_all(int fd, const void *p, size_t n)
{
	const char *b = p;
	while (n) {
		ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

int http_raw(int port, const char *request, struct http_count *count, char *body, size_t cap)
{
	int fd = wsc_tcp_connect("127.0.0.1", port, 5000);
	if (fd < 0)
		return 0;
	/* blocking from here (wsc_tcp_connect leaves it non-blocking), every
	 * read bounded by SO_RCVTIMEO */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	struct timeval tv = { 10, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	size_t len = strlen(request);
	char buf[8192];
	size_t got = 0;
	int status = 0;
	if (write_all(fd, request, len) == 0) {
		for (;;) {
			ssize_t r = recv(fd, buf + got, sizeof buf - 1 - got, 0);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
			if (count)
				count->rx += r;
			got += (size_t)r;
			if (got == sizeof buf - 1)
				got = 0; /* only the head and a short body matter */
		}
		buf[got] = '\0';
		sscanf(buf, "HTTP/1.%*d %d", &status);
		if (body && cap) {
			char *b = strstr(buf, "\r\n\r\n");
			snprintf(body, cap, "%s", b ? b + 4 : "");
		}
	}
	if (count)
		count->tx += (long long)len;
	close(fd);
	return status;
}

/* ---- the source and sink ---- */

static char g_block[1 << 16];

static int read_head(int fd, char *head, size_t cap, size_t *have)
{
	*have = 0;
	for (;;) {
		ssize_t r = recv(fd, head + *have, cap - 1 - *have, 0);
		if (r <= 0)
			return -1;
		*have += (size_t)r;
		head[*have] = '\0';
		if (strstr(head, "\r\n\r\n"))
			return 0;
		if (*have + 1 >= cap)
			return -1;
	}
}

static void serve_get(int fd, long long n)
{
	char h[128];
	int hl = snprintf(h, sizeof h,
			  "HTTP/1.1 200 OK\r\nContent-Length: %lld\r\nConnection: close\r\n\r\n",
			  n);
	if (write_all(fd, h, (size_t)hl) != 0)
		return;
	while (n > 0) {
		size_t k = n > (long long)sizeof g_block ? sizeof g_block : (size_t)n;
		if (write_all(fd, g_block, k) != 0)
			return;
		n -= (long long)k;
	}
}

/* The body is 'x' bytes, so the chunked end "0\r\n\r\n" cannot occur in
 * the data: the body ends when the last five bytes are that. */
static void serve_put(int fd, const char *head, size_t have)
{
	const char *end = strstr(head, "\r\n\r\n") + 4;
	size_t extra = have - (size_t)(end - head);
	long long total = (long long)extra, clen = -1;
	const char *cl = strcasestr(head, "\r\nContent-Length:");
	if (cl)
		clen = atoll(cl + 17);
	char tail[8] = "";
	size_t tl = 0;
	static __thread char buf[1 << 17];
	if (strcasestr(head, "100-continue"))
		write_all(fd, "HTTP/1.1 100 Continue\r\n\r\n", 25);
	memcpy(buf, end, extra);
	ssize_t r = (ssize_t)extra;
	for (;;) {
		if (r > 0) {
			/* keep the last five bytes seen */
			for (ssize_t i = r > 5 ? r - 5 : 0; i < r; i++) {
				if (tl == 5) {
					memmove(tail, tail + 1, 4);
					tl = 4;
				}
				tail[tl++] = buf[i];
			}
		}
		if (clen >= 0 ? total >= clen : (tl == 5 && memcmp(tail, "0\r\n\r\n", 5) == 0))
			break;
		r = recv(fd, buf, sizeof buf, 0);
		if (r <= 0)
			return;
		total += r;
	}
	char h[160], b[32];
	int bl = snprintf(b, sizeof b, "%lld", total);
	int hl = snprintf(h, sizeof h,
			  "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
			  bl, b);
	write_all(fd, h, (size_t)hl);
}

static void *serve(void *arg)
{
	int fd = (int)(long)arg;
	char head[8192];
	size_t have;
	if (read_head(fd, head, sizeof head, &have) == 0) {
		if (strncmp(head, "GET /in/", 8) == 0)
			serve_get(fd, atoll(head + 8));
		else if (strncmp(head, "PUT /out/", 9) == 0)
			serve_put(fd, head, have);
		else
			write_all(fd,
				  "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: "
				  "close\r\n\r\n",
				  66);
	}
	shutdown(fd, SHUT_WR);
	close(fd);
	return NULL;
}

int http_sink_start(struct http_sink *s)
{
	memset(g_block, 'x', sizeof g_block);
	int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof sa;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(lfd, 128) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) != 0)
		return -1;
	s->port = ntohs(sa.sin_port);
	s->pid = fork();
	if (s->pid < 0)
		return -1;
	if (s->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;) {
			int fd = accept(lfd, NULL, NULL);
			if (fd < 0)
				continue;
			pthread_t t;
			if (pthread_create(&t, NULL, serve, (void *)(long)fd) == 0)
				pthread_detach(t);
			else
				close(fd);
		}
	}
	close(lfd);
	return s->port;
}

void http_sink_stop(struct http_sink *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGKILL);
		waitpid(s->pid, NULL, 0);
		s->pid = 0;
	}
}
