/*
 * book_siphash.h - SipHash-2-4 (64-bit output), the keyed hash of the
 * book's indexes: with a secret key from the book's seed, peers cannot
 * choose job or client ids that collide in one bucket.
 */
#ifndef ES_BOOK_SIPHASH_H
#define ES_BOOK_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* key[0] holds key bytes 0..7, key[1] bytes 8..15 (little endian). */
uint64_t bk_siphash24(const uint64_t key[2], const void *data, size_t len);

#endif
