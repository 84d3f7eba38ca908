/*
 * ws_handshake.h - the server side of the websocket opening handshake
 * (RFC 6455 section 4.2) and the bearer-token check done on it.
 *
 * Owns: nothing but pure functions over a parsed request head.
 * Invariants: no allocation; every output goes to a caller buffer whose
 * size is checked; secrets are compared in constant time.
 */
#ifndef ES_WS_HANDSHAKE_H
#define ES_WS_HANDSHAKE_H

#include <stddef.h>

#include "net/http_head.h"

#define WS_KEY_LEN 24    /* base64 of 16 bytes */
#define WS_ACCEPT_LEN 28 /* base64 of a SHA-1 digest */

/*
 * Checks that head is a valid websocket upgrade request (RFC 6455 4.2.1):
 * GET; HTTP/1.1 or later; exactly one Host; Upgrade containing the token
 * "websocket"; Connection containing the token "upgrade";
 * Sec-WebSocket-Version 13; exactly one Sec-WebSocket-Key that is base64 of
 * 16 bytes.  Returns 0 and fills accept (WS_ACCEPT_LEN + 1 bytes) with the
 * Sec-WebSocket-Accept value, or the HTTP status to answer:
 * 405 (not GET), 426 (version other than 13: answer with
 * ws_handshake_error_response(), which adds Sec-WebSocket-Version: 13), or
 * 400 (anything else).  accept may be NULL.
 */
int ws_handshake_check(const struct http_head *head, char *accept);

/* Sec-WebSocket-Accept for a key: base64(SHA-1(key GUID)).  Returns 0, or
 * -1 if key is not a well-formed key. */
int ws_handshake_accept(const char *key, char accept[WS_ACCEPT_LEN + 1]);

/*
 * Writes the 101 Switching Protocols response for accept into buf.
 * subprotocol, if not NULL, is echoed in Sec-WebSocket-Protocol (the caller
 * must have picked it from the client's list).  Returns the length
 * (excluding the NUL), or -1 if buf is too small.
 */
int ws_handshake_response(const char *accept, const char *subprotocol, char *buf, size_t buflen);

/*
 * Writes a complete error response for status (plain-text body, the
 * reason phrase; "Connection: close"), with Sec-WebSocket-Version: 13 on
 * 426 and Allow: GET on 405.  extra_headers (NULL or CRLF-terminated
 * lines, e.g. a WWW-Authenticate) are inserted as given.  Returns the
 * length, or -1 if buf is too small.
 */
int ws_handshake_error_response(int status, const char *extra_headers, char *buf, size_t buflen);

/*
 * 1 if authorization (the Authorization header value, may be NULL) is
 * "Bearer <token>" (scheme case-insensitive, RFC 6750) and the credential
 * equals token; else 0.  An empty token never matches.  The credential and
 * the token are compared through their SHA-256 digests with CRYPTO_memcmp,
 * so the time taken depends on neither the token's content nor its length.
 */
int ws_bearer_ok(const char *authorization, const char *token);

/* ---- the client side (libexecclient), ws_handshake_client.c ---- */

/* A fresh Sec-WebSocket-Key: base64 of 16 random bytes.  0 or -1. */
int ws_handshake_client_key(char key[WS_KEY_LEN + 1]);

/*
 * Appends to out the upgrade request for target (path and query) on
 * host:port (host as it goes into the Host header: a name, IPv4, or
 * [IPv6]) with key, and "Authorization: Bearer <bearer>" unless bearer is
 * NULL (the caller checked it: visible ASCII).  0, or -1 (out of memory).
 */
struct evbuffer;
int ws_handshake_client_request(struct evbuffer *out, const char *host, int port,
				const char *target, const char *key, const char *bearer);

/*
 * Checks a complete response head (status line to the empty line, len
 * bytes, need not be NUL-terminated) to the request made with key: 101,
 * "Upgrade: websocket", "Connection: upgrade" and the right
 * Sec-WebSocket-Accept.  Returns 0, or -1 with *status set to the HTTP
 * status (0 if the status line is unreadable; 101 when the 101 lacked
 * something).
 */
int ws_handshake_client_check(const char *head, size_t len, const char *key, int *status);

#endif
