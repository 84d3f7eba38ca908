/*
 * fuzz_proxy_header.c - fuzz target of the PROXY protocol header parser
 * (src/net/proxy_header.c).  The input is the first bytes a trusted proxy
 * sent on a new connection (docs/balancers.md).
 *
 * Properties checked, beyond "no crash, no leak, no undefined behaviour":
 *  - the answer for the whole input and for each of its prefixes agree as
 *    a reader that peeks and consumes (proxy_gate.c) relies on: a complete
 *    header of length n is answered n for every prefix of at least n
 *    bytes and "need more" for every shorter one, so every byte of a "need
 *    more" prefix belongs to the header and none after it is consumed;
 *  - a header is at most PROXY_HEADER_MAX bytes, an error carries a
 *    reason, and "need more" never comes for PROXY_HEADER_MAX bytes;
 *  - a complete header names version 1 or 2 and either no client
 *    (local) or an IPv4/IPv6 address with the matching length;
 *  - proxy_header_looks_like is true for every accepted header.
 */
#include "autoconfig.h"

#include <netinet/in.h>
#include <string.h>

#include "fuzz.h"
#include "net/proxy_header.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proxy_header ph, prefix;
	const char *why;
	size_t len = size < PROXY_HEADER_MAX + 16 ? size : PROXY_HEADER_MAX + 16;
	int r = proxy_header_parse(data, len, &ph, &why);

	FUZZ_CHECK(r >= PROXY_HEADER_ERROR);
	if (r == PROXY_HEADER_ERROR)
		FUZZ_CHECK(why != NULL && why[0] != '\0');
	if (r == PROXY_HEADER_MORE)
		FUZZ_CHECK(len < PROXY_HEADER_MAX);
	if (r > 0) {
		FUZZ_CHECK((size_t)r <= len && r <= PROXY_HEADER_MAX);
		FUZZ_CHECK(ph.version == 1 || ph.version == 2);
		FUZZ_CHECK(proxy_header_looks_like(data, len));
		if (!ph.local)
			FUZZ_CHECK((ph.src.ss_family == AF_INET &&
				    ph.src_len == sizeof(struct sockaddr_in)) ||
				   (ph.src.ss_family == AF_INET6 &&
				    ph.src_len == sizeof(struct sockaddr_in6)));
	}
	/* every prefix: the reader's view of a header arriving in pieces */
	for (size_t i = 0; i < len; i++) {
		int p = proxy_header_parse(data, i, &prefix, &why);
		if (r > 0 && i >= (size_t)r)
			FUZZ_CHECK(p == r);
		else if (r > 0)
			FUZZ_CHECK(p == PROXY_HEADER_MORE);
		else if (r == PROXY_HEADER_MORE)
			FUZZ_CHECK(p == PROXY_HEADER_MORE);
		/* an error may show only once enough bytes came: no claim */
	}
	return 0;
}
