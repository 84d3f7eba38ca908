/*
 * pipe_server.c - see pipe_server.h.
 *
 * Owns the server child (all of its state lives in that process: the
 * endpoint list, one evhttp per rate-limited endpoint plus the main one)
 * and, in the test process, only the child's pid and port.
 *
 * Invariants (child):
 *  - a GET being served has one struct serve, freed exactly once: by the
 *    end of the reply (after clearing the connection's close callback) or
 *    by that close callback when the connection goes away first;
 *  - at most CHUNK bytes of a GET body are queued at a time, so serving
 *    100 MiB+ needs no memory for the body;
 *  - results are only written by the request handler, after a request is
 *    complete.
 */
#include "autoconfig.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <json-c/json.h>
#include <openssl/evp.h>

#include "harness.h"
#include "pipe_server.h"

#define CHUNK (256 * 1024)
#define NAME_MAX_LEN 64

/* ---- the pseudo-random stream ------------------------------------------ */

static uint64_t mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t word_at(uint64_t seed, uint64_t i)
{
	return mix64(seed * 0xd1b54a32d192ed03ULL + i);
}

static void put_le(unsigned char *p, uint64_t w)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(w >> (8 * i));
}

void pipe_random_fill(uint64_t seed, uint64_t offset, void *buf, size_t len)
{
	unsigned char *p = buf, tmp[8];

	while (len > 0) {
		uint64_t i = offset / 8;
		size_t skip = (size_t)(offset % 8);

		if (skip == 0 && len >= 8) {
			put_le(p, word_at(seed, i));
			p += 8;
			offset += 8;
			len -= 8;
		} else {
			size_t n = 8 - skip < len ? 8 - skip : len;

			put_le(tmp, word_at(seed, i));
			memcpy(p, tmp + skip, n);
			p += n;
			offset += n;
			len -= n;
		}
	}
}

void pipe_sha256_hex(const unsigned char md[32], char hex[65])
{
	static const char digits[] = "0123456789abcdef";

	for (int i = 0; i < 32; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[64] = '\0';
}

int pipe_file_sha256(const char *path, char hex[65], uint64_t *size)
{
	unsigned char md[32], buf[65536];
	unsigned int mdlen = 0;
	EVP_MD_CTX *ctx;
	ssize_t r;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	ctx = EVP_MD_CTX_new();
	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	*size = 0;
	while ((r = read(fd, buf, sizeof buf)) > 0) {
		EVP_DigestUpdate(ctx, buf, (size_t)r);
		*size += (uint64_t)r;
	}
	close(fd);
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	EVP_MD_CTX_free(ctx);
	pipe_sha256_hex(md, hex);
	return 0;
}

int pipe_server_run_suite(struct pipe_server *srv, const char *name, const struct test_case *cases,
			  char *dir, size_t len)
{
	int rc;

	dir[0] = '\0';
	if (pipe_server_start(srv) < 0) {
		fprintf(stderr, "test_%s: cannot start the pipe server\n", name);
		return 1;
	}
	snprintf(dir, len, "/tmp/test_%s.XXXXXX", name);
	if (mkdtemp(dir) == NULL) {
		dir[0] = '\0';
		pipe_server_stop(srv);
		return 1;
	}
	rc = run_suite(name, cases);
	pipe_server_stop(srv);
	return rc;
}

void pipe_random_sha256(uint64_t seed, uint64_t size, char hex[65])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char *buf = malloc(CHUNK), md[32];
	unsigned int mdlen = 0;
	uint64_t off = 0;

	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	while (off < size) {
		size_t n = size - off < CHUNK ? (size_t)(size - off) : CHUNK;

		pipe_random_fill(seed, off, buf, n);
		EVP_DigestUpdate(ctx, buf, n);
		off += n;
	}
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	EVP_MD_CTX_free(ctx);
	free(buf);
	pipe_sha256_hex(md, hex);
}

/* ======================================================================
 * The server (child process)
 * ====================================================================== */

struct ep {
	struct ep *next;
	char name[NAME_MAX_LEN + 1];
	int registered;
	/* configuration */
	char *file;
	char *location;
	uint64_t seed, size, rate;
	int status, chunked;
	int64_t drop_after, stall_after;
	int port; /* the listener to use */
	/* results */
	unsigned requests;
	uint64_t length, sent;
	char sha256[65];
	int put_chunked;
	int64_t content_length;
	char user_agent[128]; /* of the last request */
	char peer[48];        /* its peer's address */
};

struct serve {
	struct evhttp_request *req;
	struct evhttp_connection *evcon;
	struct ep *ep;
	uint64_t size, sent, stop_at;
	int drop;
	int fd;
};

static struct event_base *srv_base;
static struct ep *eps;
static int main_port;
static char srv_host[16] = "127.0.0.1"; /* the address it listens on */

static int valid_name(const char *s, size_t n)
{
	if (n == 0 || n > NAME_MAX_LEN)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

static struct ep *find_ep(const char *name, size_t n, int create)
{
	struct ep *e;

	for (e = eps; e; e = e->next)
		if (strlen(e->name) == n && memcmp(e->name, name, n) == 0)
			return e;
	if (!create)
		return NULL;
	e = calloc(1, sizeof *e);
	if (e == NULL)
		return NULL;
	memcpy(e->name, name, n);
	e->port = main_port;
	e->content_length = -1;
	e->drop_after = e->stall_after = -1;
	e->next = eps;
	eps = e;
	return e;
}

static void reply_text(struct evhttp_request *req, int status, const char *text)
{
	struct evbuffer *b = evbuffer_new();

	if (b)
		evbuffer_add(b, text, strlen(text));
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/plain");
	evhttp_send_reply(req, status, NULL, b);
	if (b)
		evbuffer_free(b);
}

static void reply_json(struct evhttp_request *req, int status, struct json_object *o)
{
	struct evbuffer *b = evbuffer_new();
	const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);

	if (b)
		evbuffer_add(b, s, strlen(s));
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  "application/json");
	evhttp_send_reply(req, status, NULL, b);
	if (b)
		evbuffer_free(b);
}

/* ---- GET /in/<name> ----------------------------------------------------- */

static void serve_free(struct serve *s)
{
	if (s->fd >= 0)
		close(s->fd);
	free(s);
}

static void serve_closed(struct evhttp_connection *evcon, void *arg)
{
	serve_free(arg);
}

static void send_more(struct serve *s);

static void serve_flushed(struct evhttp_connection *evcon, void *arg)
{
	send_more(arg);
}

static void send_more(struct serve *s)
{
	struct evbuffer *b;
	struct evbuffer_iovec v;
	size_t n;

	if (s->sent == s->size) {
		evhttp_connection_set_closecb(s->evcon, NULL, NULL);
		evhttp_send_reply_end(s->req);
		serve_free(s);
		return;
	}
	if (s->sent == s->stop_at) {
		if (s->drop) /* the close callback frees s */
			evhttp_connection_free(s->evcon);
		/* else: stalled; the connection stays until the peer goes */
		return;
	}
	n = s->stop_at - s->sent < CHUNK ? (size_t)(s->stop_at - s->sent) : CHUNK;
	b = evbuffer_new();
	if (b == NULL || evbuffer_reserve_space(b, n, &v, 1) < 1) {
		if (b)
			evbuffer_free(b);
		evhttp_connection_free(s->evcon);
		return;
	}
	if (s->fd >= 0) {
		ssize_t r = pread(s->fd, v.iov_base, n, (off_t)s->sent);

		if (r <= 0) {
			evbuffer_free(b);
			evhttp_connection_free(s->evcon);
			return;
		}
		n = (size_t)r;
	} else {
		pipe_random_fill(s->ep->seed, s->sent, v.iov_base, n);
	}
	v.iov_len = n;
	evbuffer_commit_space(b, &v, 1);
	s->sent += n;
	s->ep->sent = s->sent;
	evhttp_send_reply_chunk_with_cb(s->req, b, serve_flushed, s);
	evbuffer_free(b);
}

static void note_agent(struct evhttp_request *req, struct ep *e)
{
	const char *ua = evhttp_find_header(evhttp_request_get_input_headers(req), "User-Agent");

	snprintf(e->user_agent, sizeof e->user_agent, "%s", ua ? ua : "");
	const char *peer = NULL;
	ev_uint16_t port;
	evhttp_connection_get_peer(evhttp_request_get_connection(req), (char **)&peer, &port);
	snprintf(e->peer, sizeof e->peer, "%s", peer ? peer : "");
}

static void handle_in(struct evhttp_request *req, struct ep *e)
{
	struct evkeyvalq *out = evhttp_request_get_output_headers(req);
	struct serve *s;
	char num[32];

	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
		reply_text(req, 405, "GET only\n");
		return;
	}
	e->requests++;
	e->sent = 0;
	note_agent(req, e);
	if (e->location)
		evhttp_add_header(out, "Location", e->location);
	if (e->status != 200) {
		char text[64];

		snprintf(text, sizeof text, "status %d\n", e->status);
		reply_text(req, e->status, text);
		return;
	}
	s = calloc(1, sizeof *s);
	if (s == NULL) {
		reply_text(req, 500, "out of memory\n");
		return;
	}
	s->req = req;
	s->evcon = evhttp_request_get_connection(req);
	s->ep = e;
	s->fd = -1;
	s->size = e->size;
	if (e->file) {
		struct stat st;

		s->fd = open(e->file, O_RDONLY | O_CLOEXEC);
		if (s->fd < 0 || fstat(s->fd, &st) != 0) {
			serve_free(s);
			reply_text(req, 500, "cannot open the file\n");
			return;
		}
		s->size = (uint64_t)st.st_size;
	}
	s->stop_at = s->size;
	if (e->drop_after >= 0 && (uint64_t)e->drop_after < s->stop_at) {
		s->stop_at = (uint64_t)e->drop_after;
		s->drop = 1;
	} else if (e->stall_after >= 0 && (uint64_t)e->stall_after < s->stop_at) {
		s->stop_at = (uint64_t)e->stall_after;
	}
	if (!e->chunked) {
		snprintf(num, sizeof num, "%llu", (unsigned long long)s->size);
		evhttp_add_header(out, "Content-Length", num);
	}
	evhttp_add_header(out, "Content-Type", "application/octet-stream");
	evhttp_connection_set_closecb(s->evcon, serve_closed, s);
	evhttp_send_reply_start(req, 200, "OK");
	send_more(s);
}

/* ---- PUT /out/<name> ---------------------------------------------------- */

static void handle_out(struct evhttp_request *req, struct ep *e)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	struct evkeyvalq *hdr = evhttp_request_get_input_headers(req);
	const char *te = evhttp_find_header(hdr, "Transfer-Encoding");
	const char *cl = evhttp_find_header(hdr, "Content-Length");
	EVP_MD_CTX *ctx;
	unsigned char md[32];
	unsigned int mdlen = 0;
	int n;

	if (evhttp_request_get_command(req) != EVHTTP_REQ_PUT) {
		reply_text(req, 405, "PUT only\n");
		return;
	}
	e->requests++;
	note_agent(req, e);
	e->length = evbuffer_get_length(in);
	e->put_chunked = te && strcasecmp(te, "chunked") == 0;
	e->content_length = cl ? strtoll(cl, NULL, 10) : -1;
	ctx = EVP_MD_CTX_new();
	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	n = evbuffer_peek(in, -1, NULL, NULL, 0);
	if (n > 0) {
		struct evbuffer_iovec *v = calloc((size_t)n, sizeof *v);

		if (v) {
			n = evbuffer_peek(in, -1, NULL, v, n);
			for (int i = 0; i < n; i++)
				EVP_DigestUpdate(ctx, v[i].iov_base, v[i].iov_len);
			free(v);
		}
	}
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	EVP_MD_CTX_free(ctx);
	pipe_sha256_hex(md, e->sha256);
	evbuffer_drain(in, evbuffer_get_length(in));
	if (e->location)
		evhttp_add_header(evhttp_request_get_output_headers(req), "Location", e->location);
	reply_text(req, e->status ? e->status : 200,
		   e->status && e->status != 200 ? "refused\n" : "stored\n");
}

/* ---- GET /result/<name> ------------------------------------------------- */

static void handle_result(struct evhttp_request *req, struct ep *e)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "requests", json_object_new_int64(e->requests));
	json_object_object_add(o, "length", json_object_new_int64((int64_t)e->length));
	json_object_object_add(o, "sha256", json_object_new_string(e->sha256));
	json_object_object_add(o, "chunked", json_object_new_boolean(e->put_chunked));
	json_object_object_add(o, "content_length", json_object_new_int64(e->content_length));
	json_object_object_add(o, "sent", json_object_new_int64((int64_t)e->sent));
	json_object_object_add(o, "user_agent", json_object_new_string(e->user_agent));
	json_object_object_add(o, "peer", json_object_new_string(e->peer));
	reply_json(req, 200, o);
	json_object_put(o);
}

/* ---- POST /control ------------------------------------------------------ */

static void handle(struct evhttp_request *req, void *arg);

static struct bufferevent *limited_bev(struct event_base *base, void *arg)
{
	struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);

	if (bev)
		bufferevent_set_rate_limit(bev, arg);
	return bev;
}

/* A listener whose connections move at most rate bytes/s each way. */
static int limited_listener(uint64_t rate)
{
	struct timeval tick = { 0, 100000 };
	size_t per_tick = rate / 10 ? (size_t)(rate / 10) : 1;
	struct ev_token_bucket_cfg *cfg;
	struct evhttp_bound_socket *bs;
	struct sockaddr_in sa;
	socklen_t sl = sizeof sa;
	struct evhttp *h;

	/* both kept for the life of the process: connections refer to them */
	cfg = ev_token_bucket_cfg_new(per_tick, per_tick, per_tick, per_tick, &tick);
	h = evhttp_new(srv_base);
	if (cfg == NULL || h == NULL)
		return -1;
	evhttp_set_bevcb(h, limited_bev, cfg);
	evhttp_set_gencb(h, handle, NULL);
	bs = evhttp_bind_socket_with_handle(h, srv_host, 0);
	if (bs == NULL ||
	    getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&sa, &sl) != 0)
		return -1;
	return ntohs(sa.sin_port);
}

static const char *jstr(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

static int64_t jint(struct json_object *o, const char *key, int64_t dflt)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
		return dflt;
	return json_object_get_int64(v);
}

static void handle_control(struct evhttp_request *req)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	char *body = malloc(len + 1), url[256];
	struct json_object *o = NULL, *ans;
	const char *op, *name, *s;
	struct ep *e;
	int is_in;

	if (body == NULL) {
		reply_text(req, 500, "out of memory\n");
		return;
	}
	evbuffer_remove(in, body, len);
	body[len] = '\0';
	o = json_tokener_parse(body);
	free(body);
	op = o ? jstr(o, "op") : NULL;
	name = o ? jstr(o, "name") : NULL;
	if (op == NULL || name == NULL || (strcmp(op, "in") && strcmp(op, "out")) ||
	    !valid_name(name, strlen(name))) {
		json_object_put(o);
		reply_text(req, 400, "need op in|out and a valid name\n");
		return;
	}
	is_in = strcmp(op, "in") == 0;
	e = find_ep(name, strlen(name), 1);
	if (e == NULL) {
		json_object_put(o);
		reply_text(req, 500, "out of memory\n");
		return;
	}
	/* a new registration: configuration and results start afresh */
	free(e->file);
	free(e->location);
	s = jstr(o, "file");
	e->file = s ? strdup(s) : NULL;
	s = jstr(o, "location");
	e->location = s ? strdup(s) : NULL;
	e->seed = (uint64_t)jint(o, "seed", 0);
	e->size = (uint64_t)jint(o, "size", 0);
	e->rate = (uint64_t)jint(o, "rate", 0);
	e->status = (int)jint(o, "status", 200);
	if (e->status == 0)
		e->status = 200;
	e->chunked = (int)jint(o, "chunked", 0);
	e->drop_after = jint(o, "drop_after", -1);
	e->stall_after = jint(o, "stall_after", -1);
	e->registered = is_in ? 1 : 2;
	e->requests = 0;
	e->length = e->sent = 0;
	e->sha256[0] = '\0';
	e->put_chunked = 0;
	e->content_length = -1;
	e->user_agent[0] = '\0';
	e->peer[0] = '\0';
	e->port = e->rate ? limited_listener(e->rate) : main_port;
	json_object_put(o);
	if (e->port < 0) {
		reply_text(req, 500, "cannot open a listener\n");
		return;
	}
	snprintf(url, sizeof url, "http://%s:%d/%s/%s", srv_host, e->port, is_in ? "in" : "out",
		 e->name);
	ans = json_object_new_object();
	json_object_object_add(ans, "url", json_object_new_string(url));
	reply_json(req, 200, ans);
	json_object_put(ans);
}

/* ---- dispatch ------------------------------------------------------------ */

static void handle(struct evhttp_request *req, void *arg)
{
	const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
	const char *path = u ? evhttp_uri_get_path(u) : NULL;
	const char *name;
	struct ep *e;

	if (path == NULL) {
		reply_text(req, 400, "no path\n");
		return;
	}
	if (strcmp(path, "/control") == 0) {
		if (evhttp_request_get_command(req) != EVHTTP_REQ_POST)
			reply_text(req, 405, "POST only\n");
		else
			handle_control(req);
		return;
	}
	if (strncmp(path, "/in/", 4) == 0)
		name = path + 4;
	else if (strncmp(path, "/out/", 5) == 0)
		name = path + 5;
	else if (strncmp(path, "/result/", 8) == 0)
		name = path + 8;
	else {
		reply_text(req, 404, "unknown path\n");
		return;
	}
	if (!valid_name(name, strlen(name))) {
		reply_text(req, 404, "bad name\n");
		return;
	}
	/* PUT /out accepts any name; the others need it registered or used */
	e = find_ep(name, strlen(name), path[1] == 'o');
	if (e == NULL || (path[1] == 'i' && e->registered != 1)) {
		if (e && path[1] == 'i')
			e->requests++;
		reply_text(req, 404, "no such endpoint\n");
		return;
	}
	if (path[1] == 'i')
		handle_in(req, e);
	else if (path[1] == 'o')
		handle_out(req, e);
	else
		handle_result(req, e);
}

static void server_main(int report_fd, pid_t parent)
{
	struct evhttp *h;
	struct evhttp_bound_socket *bs;
	struct sockaddr_in sa;
	socklen_t sl = sizeof sa;
	int port = -1;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, SIG_DFL);
	srv_base = event_base_new();
	h = srv_base ? evhttp_new(srv_base) : NULL;
	if (h) {
		evhttp_set_gencb(h, handle, NULL);
		bs = evhttp_bind_socket_with_handle(h, srv_host, 0);
		if (bs &&
		    getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&sa, &sl) == 0)
			port = ntohs(sa.sin_port);
	}
	main_port = port;
	if (write(report_fd, &port, sizeof port) != (ssize_t)sizeof port || port < 0)
		_exit(1);
	close(report_fd);
	event_base_dispatch(srv_base);
	_exit(0);
}

/* ======================================================================
 * The test side
 * ====================================================================== */

int pipe_server_start(struct pipe_server *ps)
{
	return pipe_server_start_at(ps, NULL, NULL);
}

int pipe_server_start_at(struct pipe_server *ps, const char *netns, const char *host)
{
	int fds[2], port = -1;
	pid_t parent = getpid();
	ssize_t r;

	ps->pid = -1;
	ps->port = -1;
	snprintf(ps->netns, sizeof ps->netns, "%s", netns ? netns : "");
	snprintf(ps->host, sizeof ps->host, "%s", host ? host : "127.0.0.1");
	if (pipe2(fds, O_CLOEXEC) != 0)
		return -1;
	fflush(NULL);
	ps->pid = fork();
	if (ps->pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (ps->pid == 0) {
		close(fds[0]);
		snprintf(srv_host, sizeof srv_host, "%s", ps->host);
		if (harness_netns_enter(ps->netns) == -1)
			_exit(1);
		server_main(fds[1], parent);
	}
	close(fds[1]);
	do
		r = read(fds[0], &port, sizeof port);
	while (r < 0 && errno == EINTR);
	close(fds[0]);
	if (r != (ssize_t)sizeof port || port <= 0) {
		pipe_server_stop(ps);
		return -1;
	}
	ps->port = port;
	return port;
}

void pipe_server_stop(struct pipe_server *ps)
{
	if (ps->pid > 0) {
		kill(ps->pid, SIGKILL);
		while (waitpid(ps->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	ps->pid = -1;
	ps->port = -1;
}

/* One blocking HTTP/1.0 exchange; returns the status (body in resp) or -1. */
static int http_call(const struct pipe_server *ps, const char *method, const char *path,
		     const char *body, char *resp, size_t cap)
{
	struct sockaddr_in sa;
	struct timeval tv = { 10, 0 };
	char head[512], *p;
	size_t got = 0, blen = body ? strlen(body) : 0;
	int fd, status = -1, n;

	/* from the server's own host, like harness_status */
	int home = harness_netns_enter(ps->netns);
	if (home == -1)
		return -1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	harness_netns_return(home);
	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)ps->port);
	if (inet_pton(AF_INET, ps->host, &sa.sin_addr) != 1) {
		close(fd);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
		goto out;
	n = snprintf(head, sizeof head,
		     "%s %s HTTP/1.0\r\nHost: %s\r\nContent-Type: application/json\r\n"
		     "Content-Length: %zu\r\n\r\n",
		     method, path, ps->host, blen);
	if (n < 0 || (size_t)n >= sizeof head || write(fd, head, (size_t)n) != n ||
	    (blen && write(fd, body, blen) != (ssize_t)blen))
		goto out;
	for (;;) {
		ssize_t r = read(fd, resp + got, cap - 1 - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
		if (got == cap - 1)
			break;
	}
	resp[got] = '\0';
	if (sscanf(resp, "HTTP/1.%*d %d", &status) != 1)
		status = -1;
	p = strstr(resp, "\r\n\r\n");
	memmove(resp, p ? p + 4 : resp + got, strlen(p ? p + 4 : resp + got) + 1);
out:
	close(fd);
	return status;
}

static int register_ep(const struct pipe_server *ps, const char *op, const char *name,
		       const struct pipe_endpoint *e, char *url, size_t urllen)
{
	struct json_object *o = json_object_new_object(), *ans, *v;
	char resp[4096];
	int status, rc = -1;

	json_object_object_add(o, "op", json_object_new_string(op));
	json_object_object_add(o, "name", json_object_new_string(name));
	if (e) {
		if (e->file)
			json_object_object_add(o, "file", json_object_new_string(e->file));
		if (e->location)
			json_object_object_add(o, "location", json_object_new_string(e->location));
		json_object_object_add(o, "seed", json_object_new_int64((int64_t)e->seed));
		json_object_object_add(o, "size", json_object_new_int64((int64_t)e->size));
		json_object_object_add(o, "rate", json_object_new_int64((int64_t)e->rate));
		json_object_object_add(o, "status", json_object_new_int64(e->status));
		json_object_object_add(o, "chunked", json_object_new_int64(e->chunked));
		json_object_object_add(o, "drop_after", json_object_new_int64(e->drop_after));
		json_object_object_add(o, "stall_after", json_object_new_int64(e->stall_after));
	}
	status = http_call(ps, "POST", "/control",
			   json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN), resp,
			   sizeof resp);
	json_object_put(o);
	if (status != 200)
		return -1;
	ans = json_tokener_parse(resp);
	if (ans && json_object_object_get_ex(ans, "url", &v) &&
	    (size_t)snprintf(url, urllen, "%s", json_object_get_string(v)) < urllen)
		rc = 0;
	json_object_put(ans);
	return rc;
}

int pipe_server_in(const struct pipe_server *ps, const char *name, const struct pipe_endpoint *e,
		   char *url, size_t urllen)
{
	return register_ep(ps, "in", name, e, url, urllen);
}

int pipe_server_out(const struct pipe_server *ps, const char *name, const struct pipe_endpoint *e,
		    char *url, size_t urllen)
{
	return register_ep(ps, "out", name, e, url, urllen);
}

int pipe_server_result(const struct pipe_server *ps, const char *name, struct pipe_result *r)
{
	char path[128], resp[4096];
	struct json_object *o, *v;
	int status;

	memset(r, 0, sizeof *r);
	r->content_length = -1;
	snprintf(path, sizeof path, "/result/%s", name);
	status = http_call(ps, "GET", path, NULL, resp, sizeof resp);
	if (status != 200)
		return -1;
	o = json_tokener_parse(resp);
	if (o == NULL)
		return -1;
	if (json_object_object_get_ex(o, "requests", &v))
		r->requests = (unsigned)json_object_get_int64(v);
	if (json_object_object_get_ex(o, "length", &v))
		r->length = (uint64_t)json_object_get_int64(v);
	if (json_object_object_get_ex(o, "sha256", &v))
		snprintf(r->sha256, sizeof r->sha256, "%s", json_object_get_string(v));
	if (json_object_object_get_ex(o, "chunked", &v))
		r->chunked = json_object_get_boolean(v);
	if (json_object_object_get_ex(o, "content_length", &v))
		r->content_length = json_object_get_int64(v);
	if (json_object_object_get_ex(o, "sent", &v))
		r->sent = (uint64_t)json_object_get_int64(v);
	if (json_object_object_get_ex(o, "user_agent", &v))
		snprintf(r->user_agent, sizeof r->user_agent, "%s", json_object_get_string(v));
	if (json_object_object_get_ex(o, "peer", &v))
		snprintf(r->peer, sizeof r->peer, "%s", json_object_get_string(v));
	json_object_put(o);
	return 0;
}
