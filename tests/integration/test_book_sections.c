/*
 * test_book_sections.c - how many critical sections of the want-book a
 * client's read costs, counted by the daemon whose book keeps the lock's
 * figures (bench/execserver-lockstat, BOOK_LOCK_STATS; /status "lock").
 * A DECLINE and the next WANT written together are one read: their book
 * operations and the mail the DECLINE sends to the same handler take one
 * section (handler/broker.c), where a section each would take three.
 */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "harness.h"
#include "proto.h"
#include "suite.h"

static void test_decline_want_one_section(void)
{
	struct es_daemon d;
	const char *bin = getenv("EXECSERVER_LOCKSTAT_BIN");
	CU_ASSERT_FATAL(bin != NULL);
	setenv("EXECSERVER_BIN", bin, 1);
	CU_ASSERT_FATAL(harness_start_default(&d, 1, 1, NULL, NULL) == 0);
	struct tclient *c[2] = { tc_connect(d.port, "sa"), tc_connect(d.port, "sb") };
	CU_ASSERT_FATAL(c[0] && c[1]);
	const char *t = tc_want_offer(c[0], "s0", "cat", 0, 3000);
	CU_ASSERT_FATAL(t != NULL);
	char tok[32], msg[2][160];
	const char *two[2] = { msg[0], msg[1] };
	snprintf(tok, sizeof tok, "%s", t);
	tc_send(c[1], "{\"type\":\"WANT\",\"job_id\":\"s1\",\"service\":\"cat\"}");
	tc_send(c[1], "{\"type\":\"QUERY\",\"job_id\":\"s1\"}");
	struct json_object *p = tc_expect(c[1], "POSITION", 3000);
	CU_ASSERT_FATAL(p != NULL);
	json_object_put(p);

	/* Sections of a round minus those of a /status read alone, each the
	 * fewest of several (other work of the daemon, a timer, only adds). */
	long long status_min = -1, round_min = -1;
	int holder = 0;
	for (int round = 0; round < 6; round++) {
		long long s0 = harness_status_int(&d, "lock", "ops", NULL),
			  s1 = harness_status_int(&d, "lock", "ops", NULL);
		snprintf(msg[0], sizeof msg[0],
			 "{\"type\":\"DECLINE\",\"job_id\":\"s%d\",\"token\":\"%s\"}", holder, tok);
		snprintf(msg[1], sizeof msg[1],
			 "{\"type\":\"WANT\",\"job_id\":\"s%d\",\"service\":\"cat\"}", holder);
		CU_ASSERT_FATAL(tc_send_together(c[holder], two, 2) == 0);
		holder = 1 - holder;
		struct json_object *o = tc_expect(c[holder], "OFFER", 3000);
		CU_ASSERT_FATAL(o != NULL);
		CU_ASSERT_STRING_EQUAL(tc_str(o, "job_id"), holder ? "s1" : "s0");
		snprintf(tok, sizeof tok, "%s", tc_str(o, "token"));
		json_object_put(o);
		long long s2 = harness_status_int(&d, "lock", "ops", NULL);
		CU_ASSERT_FATAL(s0 >= 0 && s1 >= 0 && s2 >= 0);
		if (status_min < 0 || s1 - s0 < status_min)
			status_min = s1 - s0;
		if (round_min < 0 || s2 - s1 < round_min)
			round_min = s2 - s1;
	}
	long long best = round_min - status_min;
	if (best != 1)
		fprintf(stderr, "the pair took %lld sections (a /status read: %lld)\n", best,
			status_min);
	CU_ASSERT_EQUAL(best, 1);
	tc_close(c[0]);
	tc_close(c[1]);
	CU_ASSERT(harness_finish(&d, 0) == 0);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "DECLINE + WANT in one read: one section", test_decline_want_one_section },
		{ NULL, NULL },
	};
	return run_suite("book_sections", cases);
}
