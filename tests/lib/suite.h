/*
 * suite.h - the main() of a CUnit test program: one suite of named tests,
 * run verbosely, exit status 1 if any assertion failed.
 */
#ifndef ES_TEST_SUITE_H
#define ES_TEST_SUITE_H

struct test_case {
	const char *name;
	void (*fn)(void);
};

/* cases ends with { NULL, NULL }.  Ignores SIGPIPE (tests write to peers
 * that may have gone).  With TEST_ONLY=text in the environment only the
 * tests whose name contains text run (for iterating on one test); texts
 * separated by | select each (TEST_ONLY='setup|the one|teardown').
 * Returns the process exit status. */
int run_suite(const char *suite, const struct test_case *cases);

#endif
