/*
 * addr_rule.h - address rules: the matcher of the callback guard (which
 * network addresses a job's URLs may connect to, docs/security.md,
 * "Callback guard") and of trustedProxies (which peers must send a PROXY
 * protocol header, docs/balancers.md).
 *
 * Owns: parsing one allowlist entry (a host name, an IPv4 or IPv6 address,
 * or a CIDR block) and deciding whether a connection is allowed.
 *
 * Invariants:
 *  - an IPv4 address and its IPv4-mapped IPv6 form (::ffff:a.b.c.d) are the
 *    same address everywhere: in entries, in the peer address and in the
 *    address a connection goes to (so ::ffff:10.0.0.0/104 is 10.0.0.0/8);
 *  - a CIDR block keeps only its network bits (10.1.2.3/8 is 10.0.0.0/8);
 *    /0 covers every address of its family and only of its family;
 *  - a host name entry matches a URL host by text (ASCII, case-insensitive,
 *    one trailing dot ignored), never by address: the operator trusts what
 *    that name resolves to;
 *  - pure: no I/O, no allocation except in addr_rules_free's list.
 */
#ifndef ES_ADDR_RULE_H
#define ES_ADDR_RULE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define ADDR_RULE_HOST_MAX 256 /* host name buffer, NUL included */

/* An address in canonical form: family AF_INET (4 bytes used) or AF_INET6. */
struct ip_addr {
	int family;
	uint8_t b[16];
};

enum addr_rule_kind {
	ADDR_RULE_NET = 1,
	ADDR_RULE_HOST
};

struct addr_rule {
	enum addr_rule_kind kind;
	struct ip_addr net;            /* NET: network address, host bits zero */
	int prefix;                    /* NET: 0..32 (IPv4) or 0..128 (IPv6) */
	char host[ADDR_RULE_HOST_MAX]; /* HOST: lowercased, no trailing dot */
};

struct addr_rules {
	struct addr_rule *items;
	size_t count;
};

/* Parses "files.example.com", "10.0.0.7", "fe80::1", "[fe80::1]",
 * "10.0.0.0/8", "2001:db8::/32".  Returns 0, or -1 with *why (static). */
int addr_rule_parse(const char *text, struct addr_rule *out, const char **why);
void addr_rules_free(struct addr_rules *rules);

/* An address from a socket address (AF_INET or AF_INET6, v4-mapped IPv6
 * turned into IPv4).  Returns 0, or -1 for another family or a short len. */
int ip_addr_from_sockaddr(const struct sockaddr *sa, socklen_t len, struct ip_addr *out);
/* From text (IPv4 dotted quad or IPv6, no brackets).  0 or -1. */
int ip_addr_parse(const char *text, struct ip_addr *out);
int ip_addr_equal(const struct ip_addr *a, const struct ip_addr *b);
/* Text form for messages (INET6_ADDRSTRLEN is enough). */
const char *ip_addr_format(const struct ip_addr *a, char *buf, size_t len);

/* 1 if addr lies in the rule's block (a HOST rule matches no address). */
int addr_rule_match_addr(const struct addr_rule *rule, const struct ip_addr *addr);
/* 1 if addr lies in any rule's block (trustedProxies). */
int addr_rules_match_any(const struct addr_rules *rules, const struct ip_addr *addr);
/* 1 if url_host (as job_spec records it: lowercased, no brackets, no
 * trailing dot) is named by a HOST rule. */
int addr_rules_match_host(const struct addr_rules *rules, const char *url_host);

/*
 * The guard's decision for one connection of a job: to `dest`, for a URL
 * whose host is url_host, of a job placed over a broker connection from
 * `peer` (NULL: unknown, e.g. a unit test).  Allowed when dest is the peer
 * address, or lies in a NET rule, or url_host is named by a HOST rule.
 */
int addr_rules_allow(const struct addr_rules *rules, const struct ip_addr *peer,
		     const char *url_host, const struct ip_addr *dest);

#endif
