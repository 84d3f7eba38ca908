/*
 * addr_rule.c - see addr_rule.h.  Addresses are compared as bytes after
 * inet_pton, never as text, so every spelling of one address (127.1,
 * ::ffff:127.0.0.1, 0:0:0:0:0:ffff:7f00:1) is the same address.
 */
#include "autoconfig.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/addr_rule.h"

static const uint8_t v4_mapped_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

/* An IPv6 address that is IPv4-mapped becomes the IPv4 address. */
static void canonical(struct ip_addr *a)
{
	if (a->family == AF_INET6 && memcmp(a->b, v4_mapped_prefix, 12) == 0) {
		memmove(a->b, a->b + 12, 4);
		memset(a->b + 4, 0, 12);
		a->family = AF_INET;
	}
}

int ip_addr_parse(const char *text, struct ip_addr *out)
{
	memset(out, 0, sizeof *out);
	if (inet_pton(AF_INET, text, out->b) == 1) {
		out->family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, text, out->b) == 1) {
		out->family = AF_INET6;
		canonical(out);
		return 0;
	}
	return -1;
}

int ip_addr_from_sockaddr(const struct sockaddr *sa, socklen_t len, struct ip_addr *out)
{
	memset(out, 0, sizeof *out);
	if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
		out->family = AF_INET;
		memcpy(out->b, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return 0;
	}
	if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
		out->family = AF_INET6;
		memcpy(out->b, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
		canonical(out);
		return 0;
	}
	return -1;
}

int ip_addr_equal(const struct ip_addr *a, const struct ip_addr *b)
{
	return a->family == b->family && memcmp(a->b, b->b, a->family == AF_INET ? 4 : 16) == 0;
}

const char *ip_addr_format(const struct ip_addr *a, char *buf, size_t len)
{
	if (!inet_ntop(a->family, a->b, buf, (socklen_t)len))
		snprintf(buf, len, "?");
	return buf;
}

/* Keeps the first `prefix` bits of a. */
static void mask_to(struct ip_addr *a, int prefix)
{
	int bytes = a->family == AF_INET ? 4 : 16;
	for (int i = 0; i < bytes; i++) {
		int keep = prefix - 8 * i;
		if (keep >= 8)
			continue;
		a->b[i] &= keep <= 0 ? 0 : (uint8_t)(0xff << (8 - keep));
	}
}

static int parse_prefix(const char *s, int *out)
{
	int v = 0;
	if (*s == '\0' || strlen(s) > 3 || strspn(s, "0123456789") != strlen(s))
		return -1;
	for (; *s; s++)
		v = v * 10 + (*s - '0');
	*out = v;
	return 0;
}

static int parse_host(const char *text, struct addr_rule *out, const char **why)
{
	size_t n = strlen(text);

	if (n > 0 && text[n - 1] == '.')
		n--;
	if (n == 0 || n >= ADDR_RULE_HOST_MAX) {
		*why = n == 0 ? "empty" : "longer than 255 bytes";
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		char c = text[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '.' || c == '_')) {
			*why = "a host name has only letters, digits, '.', '-' and '_' "
			       "(punycode for international names)";
			return -1;
		}
		out->host[i] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
	}
	out->host[n] = '\0';
	if (strspn(out->host, "0123456789.") == n) {
		/* 10.1 or 2130706433 would be read as addresses by libcurl */
		*why = "looks like an incomplete IPv4 address: write four decimal numbers";
		return -1;
	}
	out->kind = ADDR_RULE_HOST;
	return 0;
}

int addr_rule_parse(const char *text, struct addr_rule *out, const char **why)
{
	char buf[ADDR_RULE_HOST_MAX];
	const char *slash;
	size_t n = strlen(text);

	memset(out, 0, sizeof *out);
	if (n >= sizeof buf) {
		*why = "longer than 255 bytes";
		return -1;
	}
	memcpy(buf, text, n + 1);
	if (buf[0] == '[' && n >= 2 && buf[n - 1] == ']') {
		memmove(buf, buf + 1, n - 2);
		buf[n - 2] = '\0';
		if (!strchr(buf, ':') || ip_addr_parse(buf, &out->net) != 0) {
			*why = "not an IPv6 address inside the brackets";
			return -1;
		}
		out->kind = ADDR_RULE_NET;
		out->prefix = out->net.family == AF_INET ? 32 : 128;
		return 0;
	}
	slash = strchr(buf, '/');
	if (slash) {
		int prefix, v6;
		buf[slash - buf] = '\0';
		v6 = strchr(buf, ':') != NULL;
		if (ip_addr_parse(buf, &out->net) != 0) {
			*why = "the part before / must be an IPv4 or IPv6 address";
			return -1;
		}
		if (parse_prefix(slash + 1, &prefix) != 0 || prefix > (v6 ? 128 : 32)) {
			*why = v6 ? "the prefix length must be 0 to 128"
				  : "the prefix length must be 0 to 32";
			return -1;
		}
		if (v6 && out->net.family == AF_INET) {
			/* ::ffff:a.b.c.d/n: the mapped block, as IPv4 */
			if (prefix < 96) {
				*why = "an IPv4-mapped block needs a prefix of at least 96";
				return -1;
			}
			prefix -= 96;
		}
		out->kind = ADDR_RULE_NET;
		out->prefix = prefix;
		mask_to(&out->net, prefix);
		return 0;
	}
	if (ip_addr_parse(buf, &out->net) == 0) {
		out->kind = ADDR_RULE_NET;
		out->prefix = out->net.family == AF_INET ? 32 : 128;
		return 0;
	}
	if (strchr(buf, ':')) {
		*why = "not a valid IPv6 address";
		return -1;
	}
	return parse_host(buf, out, why);
}

void addr_rules_free(struct addr_rules *rules)
{
	free(rules->items);
	rules->items = NULL;
	rules->count = 0;
}

int addr_rule_match_addr(const struct addr_rule *rule, const struct ip_addr *addr)
{
	struct ip_addr masked;

	if (rule->kind != ADDR_RULE_NET || rule->net.family != addr->family)
		return 0;
	masked = *addr;
	mask_to(&masked, rule->prefix);
	return ip_addr_equal(&masked, &rule->net);
}

int addr_rules_match_host(const struct addr_rules *rules, const char *url_host)
{
	size_t n = strlen(url_host);

	if (n > 0 && url_host[n - 1] == '.')
		n--;
	for (size_t i = 0; i < rules->count; i++) {
		const struct addr_rule *r = &rules->items[i];
		if (r->kind == ADDR_RULE_HOST && strlen(r->host) == n &&
		    strncasecmp(r->host, url_host, n) == 0)
			return 1;
	}
	return 0;
}

int addr_rules_match_any(const struct addr_rules *rules, const struct ip_addr *addr)
{
	for (size_t i = 0; i < rules->count; i++)
		if (addr_rule_match_addr(&rules->items[i], addr))
			return 1;
	return 0;
}

int addr_rules_allow(const struct addr_rules *rules, const struct ip_addr *peer,
		     const char *url_host, const struct ip_addr *dest)
{
	if (peer && ip_addr_equal(peer, dest))
		return 1;
	if (addr_rules_match_any(rules, dest))
		return 1;
	return url_host && addr_rules_match_host(rules, url_host);
}
