/* suite.c - see suite.h. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "suite.h"

/* Whether name contains one of the |-separated texts of only. */
static int selected(const char *name, const char *only)
{
	for (const char *p = only;; p++) {
		size_t len = strcspn(p, "|");
		for (const char *q = name; len && *q; q++)
			if (strncmp(q, p, len) == 0)
				return 1;
		p += len;
		if (*p == '\0')
			return 0;
	}
}

void suite_left_out(const char *prog, int ntests, const char *why)
{
	const char *slash = strrchr(prog, '/');

	printf("%s: %d tests left out: %s\n", slash ? slash + 1 : prog, ntests, why);
	fflush(stdout);
}

int run_suite(const char *suite, const struct test_case *cases)
{
	signal(SIGPIPE, SIG_IGN);
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	CU_pSuite s = CU_add_suite(suite, NULL, NULL);
	const char *only = getenv("TEST_ONLY");
	for (const struct test_case *c = cases; c->name; c++)
		if (only == NULL || *only == '\0' || selected(c->name, only))
			CU_add_test(s, c->name, c->fn);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	if (failed) {
		/* again at the very end: a CI page shows a log's tail, and the
		 * daemons' logs dumped by a failed case push the first report out */
		printf("\nFailures of suite %s:", suite);
		CU_basic_show_failures(CU_get_failure_list());
		printf("\n");
		fflush(stdout);
	}
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
