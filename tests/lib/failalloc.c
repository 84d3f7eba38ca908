/* failalloc.c - see failalloc.h. */
#include <stddef.h>

#include "failalloc.h"

long failalloc_budget = -1;
long failalloc_count;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);

static int alloc_fails(void)
{
	failalloc_count++;
	if (failalloc_budget < 0)
		return 0;
	if (failalloc_budget == 0)
		return 1;
	failalloc_budget--;
	return 0;
}

void *__wrap_malloc(size_t n)
{
	return alloc_fails() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
	return alloc_fails() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
	return alloc_fails() ? NULL : __real_realloc(p, n);
}

char *__wrap_strdup(const char *s)
{
	return alloc_fails() ? NULL : __real_strdup(s);
}
