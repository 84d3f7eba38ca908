/*
 * suite.h - the main() of a CUnit test program: one suite of named tests,
 * run verbosely, exit status 1 if any assertion failed.
 *
 * Skips: CUnit has none.  A program that cannot run some of its tests
 * here (not root, no valgrind-free spawn...) leaves them out of the list
 * it runs and says so in one line, "PROG: N tests left out: why"
 * (suite_left_out), which scripts/test.sh adds up in its summary; one that
 * leaves out all of them also exits 77, automake's SKIP.
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
/* Prints "prog: ntests tests left out: why" (prog: the program's name,
 * without its directory). */
void suite_left_out(const char *prog, int ntests, const char *why);

#endif
