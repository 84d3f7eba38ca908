/*
 * proxy_header.h - the PROXY protocol header (versions 1 and 2) that a
 * load balancer puts before a connection's first byte to tell the real
 * client's address (haproxy's send-proxy / send-proxy-v2, nginx's
 * proxy_protocol on; docs/balancers.md).
 *
 * Owns: deciding, from the bytes read so far, whether they are a complete
 * header (and how long it is), a valid beginning of one, or not one; and
 * the source address a complete header carries.
 *
 * Invariants: pure (no I/O, no allocation); never looks past
 * PROXY_HEADER_MAX bytes; "need more" is answered only when every byte
 * given is part of the header, so a reader may consume them all without
 * taking any byte of what follows; a header longer than PROXY_HEADER_MAX
 * (version 2 with large TLVs) is an error, not a wait.
 */
#ifndef ES_PROXY_HEADER_H
#define ES_PROXY_HEADER_H

#include <stddef.h>
#include <sys/socket.h>

/* Version 1 is at most 107 bytes; version 2 is 16 bytes plus addresses
 * (12 or 36) plus TLVs, bounded here. */
#define PROXY_HEADER_MAX 1024

struct proxy_header {
	int version;                 /* 1 or 2 */
	int local;                   /* no client address: v2 LOCAL (a
					 * balancer's health check), v1 UNKNOWN,
					 * v2 UNSPEC or UNIX stream; use the
					 * connection's own */
	struct sockaddr_storage src; /* the client's address and port */
	socklen_t src_len;
};

enum {
	PROXY_HEADER_ERROR = -1, /* not a valid header; *why says why */
	PROXY_HEADER_MORE = 0,   /* a valid beginning: read more */
};

/* Parses buf[0..len).  Returns the header's length (> 0, *out filled) when
 * it is complete, PROXY_HEADER_MORE, or PROXY_HEADER_ERROR with *why (a
 * static phrase). */
int proxy_header_parse(const unsigned char *buf, size_t len, struct proxy_header *out,
		       const char **why);

/* 1 if buf[0..len) could be the start of a PROXY header (v1 "PROXY " or
 * v2's signature; for fewer bytes, a prefix of either): used to refuse a
 * header from an address that is not a trusted proxy. */
int proxy_header_looks_like(const unsigned char *buf, size_t len);

#endif
