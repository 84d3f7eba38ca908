/*
 * failalloc.h - allocation failure injection for unit tests.  A test
 * program linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,
 * --wrap=strdup (see Makefile.am) gets these wrappers: while
 * failalloc_budget >= 0, that many more allocations succeed and the next
 * ones fail; failalloc_count counts the allocations made.
 */
#ifndef ES_TEST_FAILALLOC_H
#define ES_TEST_FAILALLOC_H

extern long failalloc_budget; /* -1: no limit (the default) */
extern long failalloc_count;

#include <stddef.h>

/* The wrappers themselves, e.g. for curl_global_init_mem. */
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);

#endif
