/*
 * test_prom_text.c - unit tests of the Prometheus text both daemons write
 * (prom_text.c): a label value with the three characters the format
 * escapes (backslash, double quote, newline), and a histogram's samples
 * (cumulative buckets with le in seconds, +Inf equal to _count, _sum in
 * seconds from whole milliseconds).
 */
#include "autoconfig.h"

#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>
#include <event2/buffer.h>

#include "common/prom_text.h"
#include "suite.h"

/* out's text, NUL-terminated (freed by the caller). */
static char *text(struct evbuffer *out)
{
	size_t n = evbuffer_get_length(out);
	char *s = calloc(1, n + 1);
	CU_ASSERT_FATAL(s != NULL);
	evbuffer_remove(out, s, n);
	return s;
}

static void test_label_value(void)
{
	struct evbuffer *out = evbuffer_new();
	prom_label_value(out, "ws://a\"b\\c\nd:1");
	char *s = text(out);
	CU_ASSERT_STRING_EQUAL(s, "\"ws://a\\\"b\\\\c\\nd:1\"");
	free(s);
	evbuffer_free(out);
}

static void test_histogram(void)
{
	struct evbuffer *out = evbuffer_new();
	struct hist h;
	memset(&h, 0, sizeof h);
	hist_add(&h, 5);       /* on the first bound */
	hist_add(&h, 5001);    /* just above 5 s: the 10 s bucket */
	hist_add(&h, 3600001); /* above the last bound */
	prom_histogram(out, "x_seconds", "service", "a\"b", &h);
	char *s = text(out);
	CU_ASSERT(strstr(s, "x_seconds_bucket{service=\"a\\\"b\",le=\"0.005\"} 1\n") != NULL);
	CU_ASSERT(strstr(s, "x_seconds_bucket{service=\"a\\\"b\",le=\"5\"} 1\n") != NULL);
	CU_ASSERT(strstr(s, "x_seconds_bucket{service=\"a\\\"b\",le=\"10\"} 2\n") != NULL);
	CU_ASSERT(strstr(s, "x_seconds_bucket{service=\"a\\\"b\",le=\"3600\"} 2\n") != NULL);
	CU_ASSERT(strstr(s, "x_seconds_bucket{service=\"a\\\"b\",le=\"+Inf\"} 3\n") != NULL);
	CU_ASSERT(strstr(s, "x_seconds_sum{service=\"a\\\"b\"} 3605.007\n") != NULL);
	CU_ASSERT(strstr(s, "x_seconds_count{service=\"a\\\"b\"} 3\n") != NULL);
	free(s);
	prom_histogram(out, "y_seconds", NULL, NULL, &h); /* no label */
	s = text(out);
	CU_ASSERT(strncmp(s, "y_seconds_bucket{le=\"0.005\"} 1\n", 31) == 0);
	CU_ASSERT(strstr(s, "\ny_seconds_sum 3605.007\ny_seconds_count 3\n") != NULL);
	free(s);
	evbuffer_free(out);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "label value: backslash, quote and newline escaped", test_label_value },
		{ "histogram: cumulative buckets, +Inf, _sum in seconds", test_histogram },
		{ NULL, NULL },
	};
	return run_suite("prom_text", cases);
}
