/*
 * console.c - see console.h.  The page and its files hold no data and are
 * served without a token; the data (/status) and the action need it.
 *
 * The action is guarded twice: the bearer token (compared in constant
 * time by ws_bearer_ok, as for /status) and a same-origin check against
 * cross-site requests: a browser's Sec-Fetch-Site must say same-origin
 * and its Origin must name this Host.  A request with neither header comes
 * from no browser (curl, a script): the token alone decides.  Without a
 * token, Host must be an address or localhost: a page whose DNS name was
 * rebound to this address is same-origin to the browser, and with no
 * token to hold back, only the name tells it apart.  A request with a
 * Content-Type is refused: the action takes no body, and a cross-site
 * HTML form (of a browser old enough to send no Origin) always has one.
 * The request is one head (http_head.c bounds its size); a body is not read.
 */
#include "autoconfig.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "book/book.h"
#include "common/embedded.h"
#include "common/log.h"
#include "config/config.h"
#include "handler/console.h"
#include "handler/handler.h"
#include "net/ws_handshake.h"

#define CONSOLE_PATH "/console"
#define CONSOLE_PAGE "execserver.html"
#define JOBS_PREFIX "/jobs/"
#define CANCEL_SUFFIX "/cancel"

/* The files the execserver's page loads, under /console/. */
static const char *const assets[] = { "common.css", "console.js", "execserver.js" };

static int answer(struct console_answer *a, int status, const char *extra, const char *text)
{
	a->status = status;
	a->content_type = "text/plain; charset=utf-8";
	a->extra_headers = extra;
	evbuffer_add_printf(a->body, "%s\n", text);
	return 1;
}

static int serve_file(struct console_answer *a, const char *name)
{
	const struct embedded_file *f = embedded_find(name);
	if (!f)
		return answer(a, 404, NULL, "not found");
	evbuffer_add_reference(a->body, f->data, f->len, NULL, NULL);
	a->status = 200;
	a->content_type = embedded_type(name);
	a->extra_headers = embedded_headers();
	return 1;
}

/* 1 when the request may act: no browser headers, or a same-origin one. */
static int same_origin(const struct http_head *h)
{
	const char *site = http_header_get(h, "Sec-Fetch-Site");
	const char *origin = http_header_get(h, "Origin");
	const char *host = http_header_get(h, "Host");
	if (site && strcmp(site, "same-origin") != 0)
		return 0;
	if (!origin)
		return 1;
	const char *rest = NULL;
	if (strncmp(origin, "http://", 7) == 0)
		rest = origin + 7;
	else if (strncmp(origin, "https://", 8) == 0)
		rest = origin + 8;
	return rest && host && strcmp(rest, host) == 0;
}

/* "IDX.GEN" of a book_ref, as /status?detail=1 writes it. */
static int parse_ref(const char *s, size_t len, struct book_ref *ref)
{
	char buf[32], *end;
	if (len == 0 || len >= sizeof buf)
		return -1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (buf[0] < '0' || buf[0] > '9')
		return -1;
	errno = 0;
	unsigned long idx = strtoul(buf, &end, 10);
	if (*end != '.' || end[1] < '0' || end[1] > '9' || errno || idx > UINT32_MAX)
		return -1;
	unsigned long gen = strtoul(end + 1, &end, 10);
	if (*end || errno || gen > UINT32_MAX)
		return -1;
	ref->idx = (uint32_t)idx;
	ref->gen = (uint32_t)gen;
	return 0;
}

static int cancel(const struct http_head *h, struct console_answer *a)
{
	const char *token = handler.inst->cfg->auth_token;
	size_t plen = strlen(h->path), pre = strlen(JOBS_PREFIX), suf = strlen(CANCEL_SUFFIX);
	struct book_ref ref;

	if (plen <= pre + suf || strcmp(h->path + plen - suf, CANCEL_SUFFIX) != 0 ||
	    parse_ref(h->path + pre, plen - pre - suf, &ref) < 0)
		return answer(a, 404, NULL,
			      "not found: POST /jobs/ID/cancel, ID from /status?detail=1");
	if (strcmp(h->method, "POST") != 0)
		return answer(a, 405, "Allow: POST\r\n", "POST only");
	if (token && !ws_bearer_ok(http_header_get(h, "Authorization"), token))
		return answer(a, 401, "WWW-Authenticate: Bearer realm=\"execserver\"\r\n",
			      "a valid Authorization: Bearer token is required");
	if (!same_origin(h))
		return answer(a, 403, NULL, "a cross-site request: refused");
	/* a body is never read, and an HTML form always says its type: so a
	 * cross-site form of a browser that sends no Origin cannot act */
	if (http_header_get(h, "Content-Type"))
		return answer(a, 415, NULL, "refused: the cancel takes no body (no Content-Type)");
	if (!handler_host_trusted(h))
		return answer(a, 403, NULL,
			      "refused: without authToken, Host must be an address or localhost");
	struct book *b = handler_book_lock();
	enum book_rc rc = book_cancel_ref(b, ref);
	handler_book_unlock();
	if (rc == BOOK_E_STALE)
		return answer(a, 404, NULL, "no such job: it ended, or the ID is stale");
	if (rc != BOOK_OK)
		return answer(a, 409, NULL, "the job is not running");
	log_info("console: cancel of running job %s asked", h->path + pre);
	return answer(a, 202, NULL, "cancel asked: the job's receipt will say cancelled");
}

int console_handle(const struct http_head *h, struct console_answer *a)
{
	size_t clen = strlen(CONSOLE_PATH);
	int page = strcmp(h->path, CONSOLE_PATH) == 0 || strcmp(h->path, CONSOLE_PATH "/") == 0;
	int file = !page && strncmp(h->path, CONSOLE_PATH "/", clen + 1) == 0;
	int action = strncmp(h->path, JOBS_PREFIX, strlen(JOBS_PREFIX)) == 0;

	if (!page && !file && !action)
		return 0;
	if (!handler.inst->cfg->console_enabled)
		return answer(a, 404, NULL,
			      "not found: the console is switched off (consoleEnabled)");
	if (action)
		return cancel(h, a);
	if (strcmp(h->method, "GET") != 0 && strcmp(h->method, "HEAD") != 0)
		return answer(a, 405, "Allow: GET, HEAD\r\n", "GET or HEAD only");
	if (page)
		return serve_file(a, CONSOLE_PAGE);
	for (size_t i = 0; i < sizeof assets / sizeof assets[0]; i++)
		if (strcmp(h->path + clen + 1, assets[i]) == 0)
			return serve_file(a, assets[i]);
	return answer(a, 404, NULL, "not found");
}
