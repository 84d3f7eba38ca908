/*
 * test_proxy_header.c - the PROXY protocol header parser
 * (src/net/proxy_header.c): versions 1 and 2 as haproxy sends them, the
 * client address each carries, every prefix of a valid header answered
 * "need more" (so a reader may consume it), the bytes that follow a header
 * never counted in it, and each malformed form refused with a reason.
 */
#include "autoconfig.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "net/proxy_header.h"
#include "suite.h"

static int parse(const void *buf, size_t len, struct proxy_header *ph, const char **why)
{
	return proxy_header_parse(buf, len, ph, why);
}

/* Every proper prefix of a complete header of length n needs more. */
static void prefixes_need_more(const unsigned char *buf, size_t n)
{
	struct proxy_header ph;
	const char *why;
	for (size_t i = 0; i < n; i++)
		CU_ASSERT_EQUAL(parse(buf, i, &ph, &why), PROXY_HEADER_MORE);
}

static const char *src_text(const struct proxy_header *ph, unsigned *port)
{
	static char text[INET6_ADDRSTRLEN];
	if (ph->src.ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)&ph->src;
		*port = ntohs(s4->sin_port);
		return inet_ntop(AF_INET, &s4->sin_addr, text, sizeof text);
	}
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&ph->src;
	*port = ntohs(s6->sin6_port);
	return inet_ntop(AF_INET6, &s6->sin6_addr, text, sizeof text);
}

static void test_v1(void)
{
	static const char h4[] =
		"PROXY TCP4 10.250.0.11 10.250.0.12 40000 8080\r\nGET / HTTP/1.1\r\n";
	static const char h6[] = "PROXY TCP6 2001:db8::1 2001:db8::2 65535 0\r\n";
	static const char hu[] = "PROXY UNKNOWN whatever follows\r\n";
	struct proxy_header ph;
	const char *why;
	unsigned port;
	size_t n4 = strlen("PROXY TCP4 10.250.0.11 10.250.0.12 40000 8080\r\n");

	CU_ASSERT_EQUAL(parse(h4, strlen(h4), &ph, &why), (int)n4);
	CU_ASSERT_EQUAL(ph.version, 1);
	CU_ASSERT_EQUAL(ph.local, 0);
	CU_ASSERT_STRING_EQUAL(src_text(&ph, &port), "10.250.0.11");
	CU_ASSERT_EQUAL(port, 40000);
	CU_ASSERT_EQUAL(ph.src_len, sizeof(struct sockaddr_in));
	prefixes_need_more((const unsigned char *)h4, n4);

	CU_ASSERT_EQUAL(parse(h6, strlen(h6), &ph, &why), (int)strlen(h6));
	CU_ASSERT_STRING_EQUAL(src_text(&ph, &port), "2001:db8::1");
	CU_ASSERT_EQUAL(port, 65535);
	CU_ASSERT_EQUAL(ph.src_len, sizeof(struct sockaddr_in6));

	CU_ASSERT_EQUAL(parse(hu, strlen(hu), &ph, &why), (int)strlen(hu));
	CU_ASSERT_EQUAL(ph.local, 1);
}

static void expect_error(const char *text, const char *word)
{
	struct proxy_header ph;
	const char *why = NULL;
	CU_ASSERT_EQUAL(parse(text, strlen(text), &ph, &why), PROXY_HEADER_ERROR);
	CU_ASSERT(why && strstr(why, word));
	if (!why || !strstr(why, word))
		fprintf(stderr, "\n  %s: %s (expected '%s')\n", text, why ? why : "(none)", word);
}

static void test_v1_errors(void)
{
	expect_error("GET / HTTP/1.1\r\n", "not a PROXY");
	expect_error("PROXY TCP4 10.0.0.1 10.0.0.2 1 2\n", "CRLF");
	expect_error("PROXY TCP4 10.0.0.1 10.0.0.2 1 2\rX", "CRLF");
	expect_error("PROXY UDP4 10.0.0.1 10.0.0.2 1 2\r\n", "protocol");
	expect_error("PROXY TCP4 10.0.0.1 10.0.0.2 1\r\n", "two ports");
	expect_error("PROXY TCP4 10.0.0.1 10.0.0.2 1 2 3\r\n", "extra");
	expect_error("PROXY TCP4 10.0.0.1  10.0.0.2 1 2\r\n", "two ports");
	expect_error("PROXY TCP4 10.0.0.1 10.0.0.2 65536 2\r\n", "port");
	expect_error("PROXY TCP4 10.0.0.1 10.0.0.2 01 2\r\n", "port");
	expect_error("PROXY TCP4 10.0.0.1 10.0.0.2 -1 2\r\n", "port");
	expect_error("PROXY TCP4 2001:db8::1 10.0.0.2 1 2\r\n", "IPv4");
	expect_error("PROXY TCP6 10.0.0.1 2001:db8::2 1 2\r\n", "IPv6");
	expect_error("PROXY TCP4 10.0.0.1 10.0.0.2 1 2 \r\n", "extra");
	char longline[200];
	memset(longline, 'x', sizeof longline);
	memcpy(longline, "PROXY UNKNOWN ", 14);
	longline[sizeof longline - 1] = '\0';
	expect_error(longline, "107");
	/* exactly 107 bytes with the CRLF is the longest line; 108 is not */
	struct proxy_header ph;
	const char *why;
	memcpy(longline + 105, "\r\n", 3);
	CU_ASSERT_EQUAL(parse(longline, 107, &ph, &why), 107);
	CU_ASSERT_EQUAL(ph.local, 1);
	memcpy(longline + 105, "x\r\n", 4);
	CU_ASSERT_EQUAL(parse(longline, 107, &ph, &why), PROXY_HEADER_ERROR);
	expect_error(longline, "107");
}

/* A version 2 header: command, family, addresses (alen bytes), then tlv
 * bytes of padding. */
static size_t v2(unsigned char *b, int cmd, int fam, const unsigned char *addr, size_t alen,
		 size_t tlv)
{
	static const unsigned char sig[12] = { 0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
					       0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a };
	memcpy(b, sig, 12);
	b[12] = (unsigned char)(0x20 | cmd);
	b[13] = (unsigned char)fam;
	b[14] = (unsigned char)((alen + tlv) >> 8);
	b[15] = (unsigned char)((alen + tlv) & 0xff);
	memcpy(b + 16, addr, alen);
	memset(b + 16 + alen, 0, tlv);
	return 16 + alen + tlv;
}

static void test_v2(void)
{
	unsigned char b[2048], a4[12] = { 10, 250, 0, 11, 10, 250, 0, 13, 0x9c, 0x40, 0x1f, 0x90 };
	unsigned char a6[36] = {
		0x20,        0x01,     0x0d,        0xb8,        [15] = 1, [16] = 0x20,
		[17] = 0x01, [31] = 2, [32] = 0x01, [33] = 0xbb, [34] = 0, [35] = 80
	};
	struct proxy_header ph;
	const char *why;
	unsigned port;

	size_t n = v2(b, 1, 0x11, a4, sizeof a4, 0);
	memcpy(b + n, "GET", 3);
	CU_ASSERT_EQUAL(parse(b, n + 3, &ph, &why), (int)n);
	CU_ASSERT_EQUAL(ph.version, 2);
	CU_ASSERT_EQUAL(ph.local, 0);
	CU_ASSERT_STRING_EQUAL(src_text(&ph, &port), "10.250.0.11");
	CU_ASSERT_EQUAL(port, 40000);
	prefixes_need_more(b, n);

	/* TLVs after the addresses are skipped */
	n = v2(b, 1, 0x11, a4, sizeof a4, 100);
	CU_ASSERT_EQUAL(parse(b, n, &ph, &why), (int)n);
	CU_ASSERT_STRING_EQUAL(src_text(&ph, &port), "10.250.0.11");

	n = v2(b, 1, 0x21, a6, sizeof a6, 0);
	CU_ASSERT_EQUAL(parse(b, n, &ph, &why), (int)n);
	CU_ASSERT_STRING_EQUAL(src_text(&ph, &port), "2001:db8::1");
	CU_ASSERT_EQUAL(port, 443);

	/* LOCAL (a health check) and UNSPEC carry no client */
	n = v2(b, 0, 0x00, a4, 0, 0);
	CU_ASSERT_EQUAL(parse(b, n, &ph, &why), (int)n);
	CU_ASSERT_EQUAL(ph.local, 1);
	n = v2(b, 1, 0x00, a4, 0, 0);
	CU_ASSERT_EQUAL(parse(b, n, &ph, &why), (int)n);
	CU_ASSERT_EQUAL(ph.local, 1);

	/* PROXY over a UNIX stream socket (haproxy with a unix@ bind): a
	 * valid combination without an IP client, taken as UNSPEC is, as
	 * the specification asks of a receiver that does not support it */
	unsigned char unix_addrs[216] = "/run/client.sock";
	n = v2(b, 1, 0x31, unix_addrs, sizeof unix_addrs, 0);
	memcpy(b + n, "GET", 3);
	CU_ASSERT_EQUAL(parse(b, n + 3, &ph, &why), (int)n);
	CU_ASSERT_EQUAL(ph.local, 1);
	prefixes_need_more(b, n);

	/* errors */
	n = v2(b, 1, 0x41, a4, sizeof a4, 0); /* no such family */
	CU_ASSERT_EQUAL(parse(b, n, &ph, &why), PROXY_HEADER_ERROR);
	n = v2(b, 1, 0x13, a4, sizeof a4, 0); /* no such transport */
	CU_ASSERT_EQUAL(parse(b, n, &ph, &why), PROXY_HEADER_ERROR);
	n = v2(b, 1, 0x11, a4, 8, 0);
	CU_ASSERT_EQUAL(parse(b, n, &ph, &why), PROXY_HEADER_ERROR);
	CU_ASSERT(strstr(why, "cut short") != NULL);
	n = v2(b, 1, 0x12, a4, sizeof a4, 0); /* UDP */
	CU_ASSERT_EQUAL(parse(b, n, &ph, &why), PROXY_HEADER_ERROR);
	n = v2(b, 2, 0x11, a4, sizeof a4, 0);
	CU_ASSERT_EQUAL(parse(b, n, &ph, &why), PROXY_HEADER_ERROR);
	CU_ASSERT(strstr(why, "command") != NULL);
	n = v2(b, 1, 0x11, a4, sizeof a4, 0);
	b[12] = 0x11; /* version 1 in the binary form */
	CU_ASSERT_EQUAL(parse(b, n, &ph, &why), PROXY_HEADER_ERROR);
	/* longer than PROXY_HEADER_MAX: refused as soon as the length is
	 * known, not waited for */
	v2(b, 1, 0x11, a4, sizeof a4, PROXY_HEADER_MAX);
	CU_ASSERT_EQUAL(parse(b, 16, &ph, &why), PROXY_HEADER_ERROR);
	CU_ASSERT(strstr(why, "1024") != NULL);
	b[5] = 'x'; /* a broken signature */
	CU_ASSERT_EQUAL(parse(b, 6, &ph, &why), PROXY_HEADER_ERROR);
}

static void test_looks_like(void)
{
	CU_ASSERT(proxy_header_looks_like((const unsigned char *)"PROXY", 5));
	CU_ASSERT(proxy_header_looks_like((const unsigned char *)"\r\n\r\n\0", 5));
	CU_ASSERT(!proxy_header_looks_like((const unsigned char *)"POST ", 5));
	CU_ASSERT(!proxy_header_looks_like((const unsigned char *)"GET /", 5));
	CU_ASSERT(!proxy_header_looks_like((const unsigned char *)"\r\n\r\nG", 5));
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "version 1", test_v1 }, { "version 1 errors", test_v1_errors },
		{ "version 2", test_v2 }, { "looks like a header", test_looks_like },
		{ NULL, NULL },
	};
	return run_suite("proxy_header", cases);
}
