/*
 * test_client_wire.c - libexecclient's readers of server messages
 * (src/client/wire.c): the counts of a HELLO that the claim share adds up
 * are held to their range, whatever a broken or hostile server sends.
 */
#include "autoconfig.h"

#include <limits.h>
#include <stdint.h>

#include <CUnit/Basic.h>
#include <json-c/json.h>

#include "client/client_impl.h"
#include "suite.h"

static int64_t read_in(const char *text, int64_t lo, int64_t hi)
{
	struct json_object *o = json_tokener_parse(text);
	int64_t v = wire_int_in(o, "n", 7, lo, hi);

	json_object_put(o);
	return v;
}

static void test_int_in_range(void)
{
	CU_ASSERT_EQUAL(read_in("{\"n\": 5}", 0, WIRE_SLOTS_MAX), 5);
	CU_ASSERT_EQUAL(read_in("{}", 0, WIRE_SLOTS_MAX), 7);             /* absent: the default */
	CU_ASSERT_EQUAL(read_in("{\"n\": \"5\"}", 0, WIRE_SLOTS_MAX), 7); /* not an integer */
	CU_ASSERT_EQUAL(read_in("{\"n\": -3}", 0, WIRE_SLOTS_MAX), 0);
	CU_ASSERT_EQUAL(read_in("{\"n\": 9223372036854775807}", 0, WIRE_SLOTS_MAX), WIRE_SLOTS_MAX);
	CU_ASSERT_EQUAL(read_in("{\"n\": -9223372036854775808}", 1, INT_MAX), 1);
	CU_ASSERT_EQUAL(read_in("{\"n\": 4294967297}", 1, INT_MAX),
			INT_MAX); /* not 1 after a cast */
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "integers held to their range", test_int_in_range },
		{ NULL, NULL },
	};
	return run_suite("client wire", cases);
}
