/*
 * test_addr_rule.c - unit tests of the callback guard's address matcher
 * (src/config/addr_rule.c) and of the callbackAllow key of the loader.
 *
 * Owns: the proof that entries parse as documented (host names, IPv4,
 * IPv6, CIDR, brackets; bad ones refused with a reason), that matching
 * treats an IPv4 address and its IPv4-mapped IPv6 form as one address,
 * that /0 and /32 (/128) cover exactly what they should, that the peer and
 * host-name rules decide as docs/security.md says, and that configuration
 * errors name file:line:column.
 */
#include "autoconfig.h"

#include <CUnit/Basic.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "config/addr_rule.h"
#include "config/config.h"
#include "suite.h"

static struct ip_addr ip(const char *text)
{
	struct ip_addr a;
	CU_ASSERT_FATAL(ip_addr_parse(text, &a) == 0);
	return a;
}

static struct addr_rule rule(const char *text)
{
	struct addr_rule r;
	const char *why = NULL;
	int rc = addr_rule_parse(text, &r, &why);
	if (rc != 0)
		fprintf(stderr, "rule %s: %s\n", text, why);
	CU_ASSERT_FATAL(rc == 0);
	return r;
}

static int matches(const char *entry, const char *addr)
{
	struct addr_rule r = rule(entry);
	struct ip_addr a = ip(addr);
	return addr_rule_match_addr(&r, &a);
}

static void test_parse(void)
{
	struct addr_rule r;
	const char *why;

	r = rule("10.0.0.7");
	CU_ASSERT_EQUAL(r.kind, ADDR_RULE_NET);
	CU_ASSERT_EQUAL(r.prefix, 32);
	r = rule("fe80::1");
	CU_ASSERT_EQUAL(r.net.family, AF_INET6);
	CU_ASSERT_EQUAL(r.prefix, 128);
	r = rule("[2001:db8::5]");
	CU_ASSERT_EQUAL(r.prefix, 128);
	r = rule("10.1.2.3/8"); /* host bits dropped */
	char text[64];
	CU_ASSERT_STRING_EQUAL(ip_addr_format(&r.net, text, sizeof text), "10.0.0.0");
	CU_ASSERT_EQUAL(r.prefix, 8);
	r = rule("::ffff:10.0.0.0/104"); /* the mapped block is the IPv4 block */
	CU_ASSERT_EQUAL(r.net.family, AF_INET);
	CU_ASSERT_EQUAL(r.prefix, 8);
	r = rule("Files.Example.COM.");
	CU_ASSERT_EQUAL(r.kind, ADDR_RULE_HOST);
	CU_ASSERT_STRING_EQUAL(r.host, "files.example.com");
	r = rule("localhost");
	CU_ASSERT_EQUAL(r.kind, ADDR_RULE_HOST);

	static const char *const bad[] = {
		"",
		".",
		"10.0.0.0/33",
		"::/129",
		"10.0.0.0/",
		"10.0.0.0/-1",
		"10.0.0.0/x",
		"fe80::1::2",
		"host name",
		"exa*mple.com",
		"10.1",
		"2130706433",
		"[10.0.0.1]",
		"[fe80::1",
		"::ffff:10.0.0.0/95",
		"a/8",
		"fe80::1%eth0",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		why = NULL;
		CU_ASSERT_EQUAL(addr_rule_parse(bad[i], &r, &why), -1);
		CU_ASSERT(why != NULL && why[0] != '\0');
	}
}

static void test_match(void)
{
	/* exact addresses: /32 and /128 */
	CU_ASSERT(matches("127.0.0.1", "127.0.0.1"));
	CU_ASSERT(!matches("127.0.0.1", "127.0.0.2"));
	CU_ASSERT(matches("10.0.0.0/32", "10.0.0.0"));
	CU_ASSERT(!matches("10.0.0.0/32", "10.0.0.1"));
	CU_ASSERT(matches("2001:db8::1/128", "2001:db8::1"));
	CU_ASSERT(!matches("2001:db8::1/128", "2001:db8::2"));
	/* IPv4-mapped IPv6 is the IPv4 address, both ways */
	CU_ASSERT(matches("127.0.0.1", "::ffff:127.0.0.1"));
	CU_ASSERT(matches("::ffff:127.0.0.1", "127.0.0.1"));
	CU_ASSERT(matches("127.0.0.0/8", "::ffff:127.9.9.9"));
	CU_ASSERT(matches("::ffff:192.168.0.0/112", "192.168.3.4"));
	/* CIDR edges */
	CU_ASSERT(matches("192.168.0.0/16", "192.168.255.255"));
	CU_ASSERT(!matches("192.168.0.0/16", "192.169.0.0"));
	CU_ASSERT(matches("10.0.0.0/31", "10.0.0.1"));
	CU_ASSERT(!matches("10.0.0.0/31", "10.0.0.2"));
	CU_ASSERT(matches("2001:db8::/33", "2001:db8:7fff::1"));
	CU_ASSERT(!matches("2001:db8::/33", "2001:db8:8000::1"));
	/* /0 covers its whole family, and only it */
	CU_ASSERT(matches("0.0.0.0/0", "255.255.255.255"));
	CU_ASSERT(matches("0.0.0.0/0", "::ffff:1.2.3.4"));
	CU_ASSERT(!matches("0.0.0.0/0", "::1"));
	CU_ASSERT(matches("::/0", "fe80::1"));
	CU_ASSERT(!matches("::/0", "1.2.3.4"));
	/* 0.0.0.0 is an address like any other, not "any" */
	CU_ASSERT(matches("0.0.0.0", "0.0.0.0"));
	CU_ASSERT(!matches("0.0.0.0", "127.0.0.1"));
	CU_ASSERT(!matches("127.0.0.1", "0.0.0.0"));
	/* a host name rule matches no address */
	struct addr_rule h = rule("localhost");
	struct ip_addr lo = ip("127.0.0.1");
	CU_ASSERT(!addr_rule_match_addr(&h, &lo));
}

static void test_sockaddr(void)
{
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in s4 = { .sin_family = AF_INET };
	struct ip_addr a, b;

	inet_pton(AF_INET6, "::ffff:10.1.2.3", &s6.sin6_addr);
	inet_pton(AF_INET, "10.1.2.3", &s4.sin_addr);
	CU_ASSERT(ip_addr_from_sockaddr((struct sockaddr *)&s6, sizeof s6, &a) == 0);
	CU_ASSERT(ip_addr_from_sockaddr((struct sockaddr *)&s4, sizeof s4, &b) == 0);
	CU_ASSERT(ip_addr_equal(&a, &b));
	CU_ASSERT_EQUAL(a.family, AF_INET);
	/* short length and other families are refused */
	CU_ASSERT(ip_addr_from_sockaddr((struct sockaddr *)&s6, 8, &a) == -1);
	struct sockaddr un = { .sa_family = AF_UNIX };
	CU_ASSERT(ip_addr_from_sockaddr(&un, sizeof un, &a) == -1);
}

static void test_allow(void)
{
	struct addr_rule items[3] = { rule("10.0.0.0/8"), rule("files.example.com"),
				      rule("2001:db8::7") };
	struct addr_rules rules = { items, 3 };
	struct addr_rules none = { NULL, 0 };
	struct ip_addr peer = ip("192.0.2.10"), d;

	/* the peer: by address, whatever the URL's host */
	d = ip("192.0.2.10");
	CU_ASSERT(addr_rules_allow(&none, &peer, "client.example.net", &d));
	d = ip("::ffff:192.0.2.10");
	CU_ASSERT(addr_rules_allow(&none, &peer, "192.0.2.10", &d));
	/* another address of the same network is not the peer */
	d = ip("192.0.2.11");
	CU_ASSERT(!addr_rules_allow(&none, &peer, "192.0.2.11", &d));
	CU_ASSERT(!addr_rules_allow(&rules, &peer, "192.0.2.11", &d));
	/* without a known peer only the allowlist counts */
	d = ip("192.0.2.10");
	CU_ASSERT(!addr_rules_allow(&none, NULL, "192.0.2.10", &d));
	/* CIDR and address entries */
	d = ip("10.200.0.1");
	CU_ASSERT(addr_rules_allow(&rules, &peer, "10.200.0.1", &d));
	d = ip("2001:db8::7");
	CU_ASSERT(addr_rules_allow(&rules, &peer, "2001:db8::7", &d));
	/* a host name entry: by the URL's host text, any address */
	d = ip("203.0.113.5");
	CU_ASSERT(addr_rules_allow(&rules, &peer, "files.example.com", &d));
	CU_ASSERT(addr_rules_allow(&rules, &peer, "files.example.com.", &d));
	CU_ASSERT(addr_rules_allow(&rules, &peer, "FILES.example.com", &d));
	/* ... but not for another name resolving to the same address, nor a
	 * name that only ends like it */
	CU_ASSERT(!addr_rules_allow(&rules, &peer, "evil.example.org", &d));
	CU_ASSERT(!addr_rules_allow(&rules, &peer, "xfiles.example.com", &d));
	CU_ASSERT(!addr_rules_allow(&rules, &peer, "files.example.com.evil", &d));
	CU_ASSERT(!addr_rules_allow(&rules, &peer, NULL, &d));
	/* loopback is not special: not the peer, not listed, refused */
	d = ip("127.0.0.1");
	CU_ASSERT(!addr_rules_allow(&rules, &peer, "localhost", &d));
	d = ip("0.0.0.0");
	CU_ASSERT(!addr_rules_allow(&rules, &peer, "0.0.0.0", &d));
}

static void test_config_key(void)
{
	static const char base[] = "waitgroups: {wg: {processes: 1}}\n";
	struct es_config cfg;
	struct config_error err;
	char text[512];

	snprintf(text, sizeof text,
		 "%scallbackAllow:\n  - 10.0.0.0/8\n  - files.example.com\n"
		 "  - \"[::1]\"\n",
		 base);
	CU_ASSERT_FATAL(config_load_buffer("t.yml", text, strlen(text), &cfg, &err) == 0);
	CU_ASSERT_EQUAL(cfg.callback_allow.count, 3);
	CU_ASSERT_EQUAL(cfg.callback_allow.items[1].kind, ADDR_RULE_HOST);
	config_free(&cfg);

	/* default: empty (the peer only) */
	CU_ASSERT_FATAL(config_load_buffer("t.yml", base, strlen(base), &cfg, &err) == 0);
	CU_ASSERT_EQUAL(cfg.callback_allow.count, 0);
	CU_ASSERT_EQUAL(cfg.handshake_timeout_sec, 10);
	CU_ASSERT_EQUAL(cfg.idle_timeout_sec, 0);
	CU_ASSERT_EQUAL(cfg.max_jobs_per_client, 0);
	CU_ASSERT_EQUAL(cfg.allow_root_jobs, 0);
	config_free(&cfg);

	/* a bad entry names its position and the reason */
	snprintf(text, sizeof text, "%scallbackAllow:\n  - 10.0.0.0/8\n  - 10.0.0.0/40\n", base);
	CU_ASSERT(config_load_buffer("t.yml", text, strlen(text), &cfg, &err) == -1);
	CU_ASSERT(strstr(err.text, "t.yml:4:5:") != NULL);
	CU_ASSERT(strstr(err.text, "callbackAllow[1]") != NULL);
	CU_ASSERT(strstr(err.text, "prefix length") != NULL);
	snprintf(text, sizeof text, "%scallbackAllow: 10.0.0.0/8\n", base);
	CU_ASSERT(config_load_buffer("t.yml", text, strlen(text), &cfg, &err) == -1);
	CU_ASSERT(strstr(err.text, "t.yml:2:16:") != NULL);
	snprintf(text, sizeof text, "%sallowRootJobs: maybe\n", base);
	CU_ASSERT(config_load_buffer("t.yml", text, strlen(text), &cfg, &err) == -1);
	CU_ASSERT(strstr(err.text, "t.yml:2:16:") != NULL);
	snprintf(text, sizeof text, "%shandshakeTimeoutSec: 0\n", base);
	CU_ASSERT(config_load_buffer("t.yml", text, strlen(text), &cfg, &err) == -1);
	CU_ASSERT(strstr(err.text, "t.yml:2:22:") != NULL);
	snprintf(text, sizeof text, "%smaxJobsPerClient: -1\n", base);
	CU_ASSERT(config_load_buffer("t.yml", text, strlen(text), &cfg, &err) == -1);
	snprintf(text, sizeof text,
		 "%sidleTimeoutSec: 5\nmaxJobsPerClient: 3\nallowRootJobs: "
		 "true\nhandshakeTimeoutSec: 2\n",
		 base);
	CU_ASSERT_FATAL(config_load_buffer("t.yml", text, strlen(text), &cfg, &err) == 0);
	CU_ASSERT_EQUAL(cfg.idle_timeout_sec, 5);
	CU_ASSERT_EQUAL(cfg.max_jobs_per_client, 3);
	CU_ASSERT_EQUAL(cfg.allow_root_jobs, 1);
	CU_ASSERT_EQUAL(cfg.handshake_timeout_sec, 2);
	config_free(&cfg);
}

/* trustedProxies: addresses and blocks, matched by addr_rules_match_any;
 * a host name is refused (a proxy is known by its address) at its
 * position. */
static void test_trusted_proxies_key(void)
{
	static const char base[] = "waitgroups: {wg: {processes: 1}}\n";
	struct es_config cfg;
	struct config_error err;
	char text[512];

	snprintf(text, sizeof text, "%strustedProxies:\n  - 10.250.0.12\n  - 192.168.7.0/24\n",
		 base);
	CU_ASSERT_FATAL(config_load_buffer("t.yml", text, strlen(text), &cfg, &err) == 0);
	CU_ASSERT_EQUAL(cfg.trusted_proxies.count, 2);
	struct ip_addr a = ip("10.250.0.12"), b = ip("192.168.7.200"), c = ip("10.250.0.13");
	CU_ASSERT(addr_rules_match_any(&cfg.trusted_proxies, &a));
	CU_ASSERT(addr_rules_match_any(&cfg.trusted_proxies, &b));
	CU_ASSERT(!addr_rules_match_any(&cfg.trusted_proxies, &c));
	CU_ASSERT_EQUAL(cfg.callback_allow.count, 0);
	config_free(&cfg);

	CU_ASSERT_FATAL(config_load_buffer("t.yml", base, strlen(base), &cfg, &err) == 0);
	CU_ASSERT_EQUAL(cfg.trusted_proxies.count, 0);
	config_free(&cfg);

	snprintf(text, sizeof text, "%strustedProxies:\n  - 10.0.0.1\n  - lb.example.com\n", base);
	CU_ASSERT(config_load_buffer("t.yml", text, strlen(text), &cfg, &err) == -1);
	CU_ASSERT(strstr(err.text, "t.yml:4:5:") != NULL);
	CU_ASSERT(strstr(err.text, "trustedProxies[1]") != NULL);
	CU_ASSERT(strstr(err.text, "not an IP address or CIDR block") != NULL);
	snprintf(text, sizeof text, "%strustedProxies:\n  - 10.0.0.0/33\n", base);
	CU_ASSERT(config_load_buffer("t.yml", text, strlen(text), &cfg, &err) == -1);
	CU_ASSERT(strstr(err.text, "t.yml:3:5:") != NULL);
	snprintf(text, sizeof text, "%strustedProxies: 10.0.0.1\n", base);
	CU_ASSERT(config_load_buffer("t.yml", text, strlen(text), &cfg, &err) == -1);
	CU_ASSERT(strstr(err.text, "t.yml:2:17:") != NULL);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "entries parse (and bad ones are refused)", test_parse },
		{ "address matching: mapped, /0, /32, 0.0.0.0", test_match },
		{ "socket addresses", test_sockaddr },
		{ "the guard's decision", test_allow },
		{ "trustedProxies", test_trusted_proxies_key },
		{ "configuration keys", test_config_key },
		{ NULL, NULL },
	};
	return run_suite("addr_rule", cases);
}
