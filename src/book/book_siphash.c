/*
 * book_siphash.c - SipHash-2-4 as specified by Aumasson and Bernstein
 * (2 compression rounds per 8-byte word, 4 finalization rounds).  Owns
 * nothing but the function; pure, no state.  Input words are read as
 * little-endian 64-bit loads (memcpy + le64toh: one instruction on x86),
 * so the result does not depend on host byte order; the book hashes a key
 * per index operation inside its critical section, where a byte-by-byte
 * load was a third of the hash's instructions.
 */
#include "autoconfig.h"
#include "book/book_siphash.h"

#include <endian.h>
#include <string.h>

static inline uint64_t rotl64(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static inline uint64_t load_le64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof v);
	return le64toh(v);
}

#define SIP_ROUND                    \
	do {                         \
		v0 += v1;            \
		v1 = rotl64(v1, 13); \
		v1 ^= v0;            \
		v0 = rotl64(v0, 32); \
		v2 += v3;            \
		v3 = rotl64(v3, 16); \
		v3 ^= v2;            \
		v0 += v3;            \
		v3 = rotl64(v3, 21); \
		v3 ^= v0;            \
		v2 += v1;            \
		v1 = rotl64(v1, 17); \
		v1 ^= v2;            \
		v2 = rotl64(v2, 32); \
	} while (0)

uint64_t bk_siphash24(const uint64_t key[2], const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t v0 = key[0] ^ 0x736f6d6570736575ULL;
	uint64_t v1 = key[1] ^ 0x646f72616e646f6dULL;
	uint64_t v2 = key[0] ^ 0x6c7967656e657261ULL;
	uint64_t v3 = key[1] ^ 0x7465646279746573ULL;
	size_t full = len & ~(size_t)7;

	for (size_t i = 0; i < full; i += 8) {
		uint64_t m = load_le64(p + i);
		v3 ^= m;
		SIP_ROUND;
		SIP_ROUND;
		v0 ^= m;
	}
	uint8_t tail[8] = { 0 };
	memcpy(tail, p + full, len & 7);
	uint64_t last = load_le64(tail) | (uint64_t)(len & 0xff) << 56;
	v3 ^= last;
	SIP_ROUND;
	SIP_ROUND;
	v0 ^= last;
	v2 ^= 0xff;
	SIP_ROUND;
	SIP_ROUND;
	SIP_ROUND;
	SIP_ROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}
