/* proxy_header.c - see proxy_header.h.  The formats are those of the
 * PROXY protocol specification (haproxy's proxy-protocol.txt): version 1
 * is one text line, version 2 a binary block after a 12-byte signature. */
#include "autoconfig.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>

#include "net/proxy_header.h"

#define V1_MAX 107  /* the longest line, CRLF included */
#define V2_FIXED 16 /* signature, ver_cmd, family, length */

static const unsigned char v2_sig[12] = { 0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
					  0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a };
static const char v1_sig[] = "PROXY ";

static size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

int proxy_header_looks_like(const unsigned char *buf, size_t len)
{
	return memcmp(buf, v1_sig, min_size(len, 6)) == 0 ||
	       memcmp(buf, v2_sig, min_size(len, sizeof v2_sig)) == 0;
}

static int fail(const char **why, const char *text)
{
	*why = text;
	return PROXY_HEADER_ERROR;
}

/* A decimal port: 0, or 1-5 digits without a leading zero, at most 65535. */
static int parse_port(const char *s, size_t n, uint16_t *port)
{
	unsigned long v = 0;
	if (n == 0 || n > 5 || (n > 1 && s[0] == '0'))
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v > 65535)
		return -1;
	*port = (uint16_t)v;
	return 0;
}

/* The next space-separated field of line[*pos..end) (exactly one space
 * between fields): its start and length. */
static int next_field(const char *line, size_t end, size_t *pos, const char **f, size_t *n)
{
	size_t start = *pos, i = start;
	while (i < end && line[i] != ' ')
		i++;
	if (i == start)
		return -1;
	*f = line + start;
	*n = i - start;
	*pos = i < end ? i + 1 : i;
	return 0;
}

static int v1_addr(int family, const char *f, size_t n, void *raw)
{
	char text[INET6_ADDRSTRLEN + 1];
	if (n >= sizeof text)
		return -1;
	memcpy(text, f, n);
	text[n] = '\0';
	return inet_pton(family, text, raw) == 1 ? 0 : -1;
}

/* line[0..end) is the line without CRLF, starting with "PROXY ". */
static int parse_v1_line(const char *line, size_t end, struct proxy_header *out, const char **why)
{
	size_t pos = 6, n[4];
	const char *proto, *f[4];
	size_t proto_len;

	if (next_field(line, end, &pos, &proto, &proto_len) != 0)
		return fail(why, "v1: no protocol");
	if (proto_len == 7 && memcmp(proto, "UNKNOWN", 7) == 0) {
		out->local = 1; /* the rest of the line is ignored */
		return 0;
	}
	int family = proto_len == 4 && memcmp(proto, "TCP4", 4) == 0   ? AF_INET
		     : proto_len == 4 && memcmp(proto, "TCP6", 4) == 0 ? AF_INET6
								       : 0;
	if (!family)
		return fail(why, "v1: protocol not TCP4, TCP6 or UNKNOWN");
	for (int i = 0; i < 4; i++)
		if (next_field(line, end, &pos, &f[i], &n[i]) != 0)
			return fail(why, "v1: expected source, destination and two ports");
	if (pos != end || line[end - 1] == ' ')
		return fail(why, "v1: extra fields");
	unsigned char dst[16];
	uint16_t sport, dport;
	if (parse_port(f[2], n[2], &sport) != 0 || parse_port(f[3], n[3], &dport) != 0)
		return fail(why, "v1: invalid port");
	if (family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&out->src;
		if (v1_addr(AF_INET, f[0], n[0], &s4->sin_addr) != 0 ||
		    v1_addr(AF_INET, f[1], n[1], dst) != 0)
			return fail(why, "v1: invalid IPv4 address");
		s4->sin_family = AF_INET;
		s4->sin_port = htons(sport);
		out->src_len = sizeof *s4;
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&out->src;
		if (v1_addr(AF_INET6, f[0], n[0], &s6->sin6_addr) != 0 ||
		    v1_addr(AF_INET6, f[1], n[1], dst) != 0)
			return fail(why, "v1: invalid IPv6 address");
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(sport);
		out->src_len = sizeof *s6;
	}
	return 0;
}

static int parse_v1(const unsigned char *buf, size_t len, struct proxy_header *out,
		    const char **why)
{
	/* the CR is at most at V1_MAX - 2, the LF after it at V1_MAX - 1 */
	size_t limit = min_size(len, V1_MAX - 1);
	for (size_t i = 0; i < limit; i++) {
		if (buf[i] == '\n')
			return fail(why, "v1: line does not end with CRLF");
		if (buf[i] != '\r')
			continue;
		if (i + 1 == len)
			return PROXY_HEADER_MORE;
		if (buf[i + 1] != '\n')
			return fail(why, "v1: line does not end with CRLF");
		out->version = 1;
		int rc = parse_v1_line((const char *)buf, i, out, why);
		return rc < 0 ? rc : (int)(i + 2);
	}
	return len >= V1_MAX - 1 ? fail(why, "v1: line longer than 107 bytes") : PROXY_HEADER_MORE;
}

static int parse_v2(const unsigned char *buf, size_t len, struct proxy_header *out,
		    const char **why)
{
	if (len < V2_FIXED)
		return PROXY_HEADER_MORE;
	unsigned ver = buf[12] >> 4, cmd = buf[12] & 0x0f, fam = buf[13];
	size_t total = V2_FIXED + ((size_t)buf[14] << 8 | buf[15]);
	if (ver != 2)
		return fail(why, "v2: version is not 2");
	if (cmd > 1)
		return fail(why, "v2: command is not LOCAL or PROXY");
	if (total > PROXY_HEADER_MAX)
		return fail(why, "v2: header longer than 1024 bytes");
	if (len < total)
		return PROXY_HEADER_MORE;
	const unsigned char *a = buf + V2_FIXED;
	size_t alen = total - V2_FIXED;
	out->version = 2;
	/* LOCAL, PROXY with UNSPEC, or PROXY over a UNIX stream socket (no
	 * IP client: taken as UNSPEC, as the specification asks of a
	 * receiver without UNIX support) */
	if (cmd == 0 || fam == 0x00 || fam == 0x31) {
		out->local = 1;
		return (int)total;
	}
	if (fam == 0x11) { /* TCP over IPv4 */
		struct sockaddr_in *s4 = (struct sockaddr_in *)&out->src;
		if (alen < 12)
			return fail(why, "v2: IPv4 addresses cut short");
		s4->sin_family = AF_INET;
		memcpy(&s4->sin_addr, a, 4);
		memcpy(&s4->sin_port, a + 8, 2);
		out->src_len = sizeof *s4;
	} else if (fam == 0x21) { /* TCP over IPv6 */
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&out->src;
		if (alen < 36)
			return fail(why, "v2: IPv6 addresses cut short");
		s6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, a, 16);
		memcpy(&s6->sin6_port, a + 32, 2);
		out->src_len = sizeof *s6;
	} else {
		return fail(why, "v2: not TCP over IPv4 or IPv6");
	}
	return (int)total;
}

int proxy_header_parse(const unsigned char *buf, size_t len, struct proxy_header *out,
		       const char **why)
{
	memset(out, 0, sizeof *out);
	*why = NULL;
	if (len == 0)
		return PROXY_HEADER_MORE;
	if (!proxy_header_looks_like(buf, len))
		return fail(why, "not a PROXY protocol header");
	return buf[0] == 'P' ? parse_v1(buf, len, out, why) : parse_v2(buf, len, out, why);
}
