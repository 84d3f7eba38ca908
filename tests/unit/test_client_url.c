/*
 * test_client_url.c - the address URLs libexecclient accepts
 * (src/client/addr.c): plain, /broker, /job/<service>, IPv6, wss://, and
 * the refusals.
 */
#include "autoconfig.h"

#include <string.h>

#include <CUnit/Basic.h>

#include "client/client_impl.h"
#include "suite.h"

static void test_good(void)
{
	struct exc_url u;

	CU_ASSERT(url_parse("ws://exec.example:8083", &u) == 0);
	CU_ASSERT_STRING_EQUAL(u.host, "exec.example");
	CU_ASSERT_EQUAL(u.port, 8083);
	CU_ASSERT_STRING_EQUAL(u.service, "");
	CU_ASSERT(url_parse("ws://10.0.0.1:1/broker", &u) == 0);
	CU_ASSERT_STRING_EQUAL(u.service, "");
	CU_ASSERT(url_parse("ws://h:2/", &u) == 0);
	CU_ASSERT(url_parse("ws://h:65535/job/convert_image", &u) == 0);
	CU_ASSERT_STRING_EQUAL(u.service, "convert_image");
	CU_ASSERT_EQUAL(u.port, 65535);
	CU_ASSERT(url_parse("ws://h:9/job/pdf/", &u) == 0);
	CU_ASSERT_STRING_EQUAL(u.service, "pdf");
	CU_ASSERT(url_parse("ws://[::1]:8083/job/x", &u) == 0);
	CU_ASSERT_STRING_EQUAL(u.host, "::1");
	CU_ASSERT_STRING_EQUAL(u.service, "x");
	CU_ASSERT_EQUAL(u.tls, 0);
	CU_ASSERT(url_parse("wss://exec.example:443/job/pdf", &u) == 0);
	CU_ASSERT_EQUAL(u.tls, 1);
	CU_ASSERT_STRING_EQUAL(u.host, "exec.example");
	CU_ASSERT_EQUAL(u.port, 443);
	CU_ASSERT_STRING_EQUAL(u.service, "pdf");
	CU_ASSERT(url_parse("wss://[::1]:8443", &u) == 0);
	CU_ASSERT_EQUAL(u.tls, 1);
	CU_ASSERT_STRING_EQUAL(u.host, "::1");
}

static void test_bad(void)
{
	static const char *const bad[] = {
		NULL,
		"",
		"http://h:1",
		"https://h:1",
		"wss://h",
		"wss:/h:1",
		"ws://h",
		"ws://h:",
		"ws://:80",
		"ws://h:0",
		"ws://h:65536",
		"ws://h:80x",
		"ws://h:80/other",
		"ws://h:80/job/",
		"ws://h:80/job/a b",
		"ws://h:80/job/a/b",
		"ws://[::1:80",
		"ws://::1:80",
	};
	struct exc_url u;

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CU_ASSERT(url_parse(bad[i], &u) == -1);
}

static const struct test_case cases[] = {
	{ "accepted addresses", test_good },
	{ "refused addresses", test_bad },
	{ NULL, NULL },
};

int main(void)
{
	return run_suite("client addresses", cases);
}
