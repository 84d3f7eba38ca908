/*
 * ws_handshake_client.c - the client side of the websocket opening
 * handshake (RFC 6455 section 4.1): the key, the request, and the check
 * of the server's answer.  The accept value comes from the same function
 * the server uses (ws_handshake_accept).  Pure functions; the request is
 * appended to the caller's evbuffer (no fixed buffer: a long bearer token
 * is sent whole).
 */
#include "autoconfig.h"
#include "net/ws_handshake.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include <event2/buffer.h>
#include <openssl/evp.h>

int ws_handshake_client_key(char key[WS_KEY_LEN + 1])
{
	unsigned char raw[16];

	if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
		return -1;
	if (EVP_EncodeBlock((unsigned char *)key, raw, sizeof raw) != WS_KEY_LEN)
		return -1;
	key[WS_KEY_LEN] = '\0';
	return 0;
}

int ws_handshake_client_request(struct evbuffer *out, const char *host, int port,
				const char *target, const char *key, const char *bearer)
{
	if (evbuffer_add_printf(out,
				"GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\n"
				"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
				"Sec-WebSocket-Key: %s\r\n",
				target, host, port, key) < 0 ||
	    (bearer && evbuffer_add_printf(out, "Authorization: Bearer %s\r\n", bearer) < 0) ||
	    evbuffer_add(out, "\r\n", 2) != 0)
		return -1;
	return 0;
}

/*
 * Finds header name in head (lines after the status line); copies its
 * value without surrounding blanks into out.  1 if found.
 */
static int header_value(const char *head, size_t len, const char *name, char *out, size_t cap)
{
	const char *p = memchr(head, '\n', len), *end = head + len;
	size_t nlen = strlen(name);

	while (p && ++p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *v, *ve;

		if (eol == NULL)
			eol = end;
		if ((size_t)(eol - p) > nlen && strncasecmp(p, name, nlen) == 0 && p[nlen] == ':') {
			v = p + nlen + 1;
			ve = eol;
			while (v < ve && (*v == ' ' || *v == '\t'))
				v++;
			while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
				ve--;
			if ((size_t)(ve - v) >= cap)
				return 0;
			memcpy(out, v, (size_t)(ve - v));
			out[ve - v] = '\0';
			return 1;
		}
		p = eol;
	}
	return 0;
}

int ws_handshake_client_check(const char *head, size_t len, const char *key, int *status)
{
	char val[256], want[WS_ACCEPT_LEN + 1], line[64];
	int major, minor, code;
	size_t n = len < sizeof line - 1 ? len : sizeof line - 1;

	*status = 0;
	/* head need not be NUL-terminated: scan a terminated copy */
	memcpy(line, head, n);
	line[n] = '\0';
	if (len < 12 || sscanf(line, "HTTP/%d.%d %3d", &major, &minor, &code) != 3)
		return -1;
	*status = code;
	if (code != 101)
		return -1;
	if (!header_value(head, len, "Upgrade", val, sizeof val) ||
	    !http_token_list_has(val, "websocket"))
		return -1;
	if (!header_value(head, len, "Connection", val, sizeof val) ||
	    !http_token_list_has(val, "upgrade"))
		return -1;
	if (ws_handshake_accept(key, want) != 0 ||
	    !header_value(head, len, "Sec-WebSocket-Accept", val, sizeof val) ||
	    strcmp(val, want) != 0)
		return -1;
	return 0;
}
