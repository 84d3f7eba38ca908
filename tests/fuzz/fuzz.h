/*
 * fuzz.h - the one entry point every fuzz target of tests/fuzz/ defines.
 *
 * A target is linked either with libFuzzer (configure --enable-fuzz, which
 * calls the entry point with generated inputs) or with replay.c (every
 * other build, which calls it once per file of the target's seed corpus,
 * so that `make check` keeps every seed and every past crash as a test).
 * A target reports a finding by aborting (assert, sanitizer report); it
 * must free everything it allocated for one input before returning.
 */
#ifndef ES_FUZZ_H
#define ES_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Runs one input; always returns 0 (libFuzzer's contract). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional: libFuzzer calls it once before the first input where a target
 * defines it (fuzz_json.c). */
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Aborts with a message naming the broken property when cond is false.
 * Unlike assert() it is never compiled out. */
#define FUZZ_CHECK(cond)                                                                      \
	do {                                                                                  \
		if (!(cond)) {                                                                \
			fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, \
				#cond);                                                       \
			abort();                                                              \
		}                                                                             \
	} while (0)

#endif
