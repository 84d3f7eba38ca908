/*
 * ws_handshake.c - see ws_handshake.h.  The digests come from OpenSSL's
 * libcrypto (EVP interface; SHA-1 is what RFC 6455 prescribes for the
 * accept value, not a security choice).
 */
#include "autoconfig.h"
#include "net/ws_handshake.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

/* RFC 6455 section 1.3 */
static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

static int b64_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '+' || c == '/';
}

/* A key is base64 of exactly 16 bytes: 22 characters and "==". */
static int key_ok(const char *key)
{
	unsigned char raw[20];

	if (key == NULL || strlen(key) != WS_KEY_LEN)
		return 0;
	for (int i = 0; i < WS_KEY_LEN - 2; i++)
		if (!b64_char(key[i]))
			return 0;
	if (key[22] != '=' || key[23] != '=')
		return 0;
	/* 24 characters decode to 18 bytes, the last two being padding */
	return EVP_DecodeBlock(raw, (const unsigned char *)key, WS_KEY_LEN) == 18;
}

int ws_handshake_accept(const char *key, char accept[WS_ACCEPT_LEN + 1])
{
	unsigned char in[WS_KEY_LEN + sizeof ws_guid];
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	if (!key_ok(key))
		return -1;
	memcpy(in, key, WS_KEY_LEN);
	memcpy(in + WS_KEY_LEN, ws_guid, sizeof ws_guid - 1);
	if (EVP_Digest(in, WS_KEY_LEN + sizeof ws_guid - 1, md, &mdlen, EVP_sha1(), NULL) != 1 ||
	    mdlen != 20)
		return -1;
	if (EVP_EncodeBlock((unsigned char *)accept, md, 20) != WS_ACCEPT_LEN)
		return -1;
	accept[WS_ACCEPT_LEN] = '\0';
	return 0;
}

int ws_handshake_check(const struct http_head *h, char *accept)
{
	char tmp[WS_ACCEPT_LEN + 1];
	const char *version, *key;

	if (h->method_id != HTTP_GET)
		return 405;
	if (h->version_major != 1 || h->version_minor < 1)
		return 400;
	if (http_header_count(h, "Host") != 1)
		return 400;
	if (!http_header_has_token(h, "Upgrade", "websocket"))
		return 400;
	if (!http_header_has_token(h, "Connection", "upgrade"))
		return 400;
	version = http_header_get(h, "Sec-WebSocket-Version");
	if (http_header_count(h, "Sec-WebSocket-Version") != 1 || strcmp(version, "13") != 0)
		return 426;
	if (http_header_count(h, "Sec-WebSocket-Key") != 1)
		return 400;
	key = http_header_get(h, "Sec-WebSocket-Key");
	if (ws_handshake_accept(key, accept ? accept : tmp) != 0)
		return 400;
	return 0;
}

static int token_char(char c)
{
	return c > 0x20 && c < 0x7f && strchr("()<>@,;:\\\"/[]?={}", c) == NULL;
}

int ws_handshake_response(const char *accept, const char *subprotocol, char *buf, size_t buflen)
{
	int n;

	if (accept == NULL || strlen(accept) != WS_ACCEPT_LEN)
		return -1;
	if (subprotocol != NULL) {
		/* a token (RFC 6455 4.1): refuse anything that could split lines */
		if (subprotocol[0] == '\0')
			return -1;
		for (const char *c = subprotocol; *c != '\0'; c++)
			if (!token_char(*c))
				return -1;
	}
	n = snprintf(buf, buflen,
		     "HTTP/1.1 101 Switching Protocols\r\n"
		     "Upgrade: websocket\r\n"
		     "Connection: Upgrade\r\n"
		     "Sec-WebSocket-Accept: %s\r\n"
		     "%s%s%s"
		     "\r\n",
		     accept, subprotocol ? "Sec-WebSocket-Protocol: " : "",
		     subprotocol ? subprotocol : "", subprotocol ? "\r\n" : "");
	if (n < 0 || (size_t)n >= buflen)
		return -1;
	return n;
}

int ws_handshake_error_response(int status, const char *extra_headers, char *buf, size_t buflen)
{
	const char *reason = http_reason(status);
	const char *special = "";
	int n;

	if (status < 100 || status > 599)
		return -1;
	if (reason[0] == '\0')
		reason = "Error";
	if (status == 426)
		special = "Sec-WebSocket-Version: 13\r\nUpgrade: websocket\r\n";
	else if (status == 405)
		special = "Allow: GET\r\n";
	n = snprintf(buf, buflen,
		     "HTTP/1.1 %d %s\r\n"
		     "Content-Type: text/plain; charset=utf-8\r\n"
		     "Content-Length: %zu\r\n"
		     "Connection: close\r\n"
		     "%s%s"
		     "\r\n"
		     "%s\n",
		     status, reason, strlen(reason) + 1, special,
		     extra_headers ? extra_headers : "", reason);
	if (n < 0 || (size_t)n >= buflen)
		return -1;
	return n;
}

static int sha256(const char *s, size_t len, unsigned char out[32])
{
	unsigned int n = 0;

	return EVP_Digest(s, len, out, &n, EVP_sha256(), NULL) == 1 && n == 32 ? 0 : -1;
}

int ws_bearer_ok(const char *authorization, const char *token)
{
	unsigned char a[32], b[32];
	const char *cred;
	size_t len;

	if (authorization == NULL || token == NULL || token[0] == '\0')
		return 0;
	if (strncasecmp(authorization, "Bearer", 6) != 0 ||
	    (authorization[6] != ' ' && authorization[6] != '\t'))
		return 0;
	cred = authorization + 6;
	while (*cred == ' ' || *cred == '\t')
		cred++;
	len = strlen(cred);
	while (len > 0 && (cred[len - 1] == ' ' || cred[len - 1] == '\t'))
		len--;
	if (len == 0)
		return 0;
	if (sha256(cred, len, a) != 0 || sha256(token, strlen(token), b) != 0)
		return 0;
	return CRYPTO_memcmp(a, b, sizeof a) == 0;
}
