/* suite.c - see suite.h. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "suite.h"

int run_suite(const char *suite, const struct test_case *cases)
{
	signal(SIGPIPE, SIG_IGN);
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	CU_pSuite s = CU_add_suite(suite, NULL, NULL);
	const char *only = getenv("TEST_ONLY");
	for (const struct test_case *c = cases; c->name; c++)
		if (only == NULL || strstr(c->name, only) != NULL)
			CU_add_test(s, c->name, c->fn);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
