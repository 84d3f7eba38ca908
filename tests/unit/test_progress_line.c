/*
 * test_progress_line.c - unit tests of src/job/progress_line.c: which
 * lines are progress (fractions, percentages, text) and which are bad,
 * the text cut as UTF-8, and the reader's bounded buffer (a line over
 * PROGRESS_LINE_MAX is dropped whole, the lines around it survive, in
 * any chunking; of a chunk only its last complete line is parsed).
 */
#include "autoconfig.h"

#include <CUnit/Basic.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/json_text.h"
#include "job/job_progress.h"
#include "job/progress_line.h"
#include "suite.h"

static int parse(const char *s, struct progress_value *v)
{
	return progress_parse_line(s, strlen(s), v);
}

static void test_fractions_and_percentages(void)
{
	static const struct {
		const char *line;
		double want;
	} ok[] = {
		{ "0", 0 },         { "0.42", 0.42 },   { "1", 1 },       { "1.0", 1 },
		{ "1.000", 1 },     { "42%", 0.42 },    { "0%", 0 },      { "100%", 1 },
		{ "12.5%", 0.125 }, { "0.25\r", 0.25 }, { "007%", 0.07 },
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		struct progress_value v;
		CU_ASSERT_EQUAL_FATAL(parse(ok[i].line, &v), 0);
		CU_ASSERT_DOUBLE_EQUAL(v.fraction, ok[i].want, 1e-9);
		CU_ASSERT_STRING_EQUAL(v.text, "");
	}
}

static void test_text(void)
{
	struct progress_value v;
	CU_ASSERT_EQUAL(parse("0.5 frame 12 of 24", &v), 0);
	CU_ASSERT_DOUBLE_EQUAL(v.fraction, 0.5, 1e-9);
	CU_ASSERT_STRING_EQUAL(v.text, "frame 12 of 24");
	CU_ASSERT_EQUAL(parse("50% Bild 3 – groß\r", &v), 0);
	CU_ASSERT_STRING_EQUAL(v.text, "Bild 3 – groß");
	CU_ASSERT_EQUAL(parse("0.5 a\xc2\xa0"
			      "b",
			      &v),
			0);                  /* U+00A0 is no control */
	CU_ASSERT_EQUAL(parse("1 ", &v), 0); /* a space and no text: no text */
	CU_ASSERT_STRING_EQUAL(v.text, "");
}

static void test_junk(void)
{
	static const char *bad[] = {
		"",
		"junk",
		" 0.5",
		"0.5x",
		"1.5",
		"101%",
		"-0.1",
		"+0.5",
		".5",
		"1.",
		"0,5",
		"1e-1",
		"50%%",
		"nan",
		"inf",
		"0.5\ttab",
		"0.5 bell\a",
		"0.5 del\x7f",
		"0.5 \xff",
		"0.5 \xc3",
		"0.5\r\r",
		"1234567890123%",
		"0.5  ",
		"50 %",
		"0.5 \xc2\x85",
		"0.5 a\xc2\x9b[2Jb", /* C1 controls (NEL, CSI) */
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct progress_value v;
		if (strcmp(bad[i], "0.5  ") == 0) {
			/* two spaces: the text is one space, allowed */
			CU_ASSERT_EQUAL(parse(bad[i], &v), 0);
			continue;
		}
		int rc = parse(bad[i], &v);
		if (rc != -1)
			fprintf(stderr, "taken for progress: \"%s\"\n", bad[i]);
		CU_ASSERT_EQUAL(rc, -1);
	}
}

/* The text is cut to PROGRESS_TEXT_MAX bytes, never inside a character. */
static void test_text_cut_as_utf8(void)
{
	char line[PROGRESS_LINE_MAX + 1] = "0.5 a"; /* then 'ä' (2 bytes) x 150 */
	size_t n = strlen(line);
	for (int i = 0; i < 150; i++) {
		line[n++] = '\xc3';
		line[n++] = '\xa4';
	}
	line[n] = '\0';
	struct progress_value v;
	CU_ASSERT_EQUAL_FATAL(parse(line, &v), 0);
	/* "a" + 99 x 2 bytes = 199: the 100th 'ä' would end at byte 201 */
	CU_ASSERT_EQUAL(strlen(v.text), 199);
	CU_ASSERT_EQUAL((unsigned char)v.text[198], 0xa4);
}

struct seen {
	int n;
	double f[16];
	char text[16][PROGRESS_TEXT_MAX + 1];
};

static void on_good(void *arg, const struct progress_value *v)
{
	struct seen *s = arg;
	if (s->n < 16) {
		s->f[s->n] = v->fraction;
		strcpy(s->text[s->n], v->text);
	}
	s->n++;
}

/* A stream of good, junk and a 1 MiB line, fed whole and byte by byte:
 * the same lines come out, the long one is bad once, memory stays the
 * reader's struct. */
static void test_reader_long_lines(void)
{
	size_t big = 1u << 20;
	size_t cap = big + 4096;
	char *stream = malloc(cap);
	CU_ASSERT_PTR_NOT_NULL_FATAL(stream);
	size_t n = 0;
	n += (size_t)sprintf(stream + n, "0.25 first\njunk\n");
	memset(stream + n, '7', big); /* digits: only its length makes it bad */
	n += big;
	n += (size_t)sprintf(stream + n, "\n50%%\n");
	/* exactly PROGRESS_LINE_MAX bytes: still a line, and a good one
	 * (its text is cut to PROGRESS_TEXT_MAX) */
	n += (size_t)sprintf(stream + n, "1 ");
	memset(stream + n, 'x', PROGRESS_LINE_MAX - 2);
	n += PROGRESS_LINE_MAX - 2;
	stream[n++] = '\n';
	n += (size_t)sprintf(stream + n, "1.0");

	/* byte by byte: every line is the last of its chunk, all parsed */
	for (int chunking = 0; chunking < 1; chunking++) {
		struct progress_reader *r = calloc(1, sizeof *r);
		struct seen s = { 0 };
		size_t step = 1;
		for (size_t i = 0; i < n; i += step)
			progress_reader_feed(r, stream + i, n - i < step ? n - i : step, on_good,
					     &s);
		CU_ASSERT_EQUAL(s.n, 3);
		progress_reader_end(r, on_good, &s);
		CU_ASSERT_EQUAL_FATAL(s.n, 4);
		CU_ASSERT_DOUBLE_EQUAL(s.f[0], 0.25, 1e-9);
		CU_ASSERT_STRING_EQUAL(s.text[0], "first");
		CU_ASSERT_DOUBLE_EQUAL(s.f[1], 0.5, 1e-9);
		CU_ASSERT_DOUBLE_EQUAL(s.f[2], 1, 1e-9);
		CU_ASSERT_EQUAL(strlen(s.text[2]), PROGRESS_TEXT_MAX);
		CU_ASSERT_DOUBLE_EQUAL(s.f[3], 1, 1e-9);
		CU_ASSERT_EQUAL(r->good, 4);
		CU_ASSERT_EQUAL(r->bad, 2); /* junk, the 1 MiB line */
		CU_ASSERT_EQUAL(r->skipped, 0);
		free(r);
	}
	/* whole, and in 4093-byte chunks: fewer lines parsed, none lost from
	 * the count, the last value the same */
	for (int chunking = 0; chunking < 2; chunking++) {
		struct progress_reader *r = calloc(1, sizeof *r);
		struct seen s = { 0 };
		size_t step = chunking == 0 ? n : 4093;
		for (size_t i = 0; i < n; i += step)
			progress_reader_feed(r, stream + i, n - i < step ? n - i : step, on_good,
					     &s);
		progress_reader_end(r, on_good, &s);
		CU_ASSERT_EQUAL(r->good + r->bad + r->skipped, 6);
		CU_ASSERT_FATAL(s.n >= 2 && s.n <= 16);
		CU_ASSERT_DOUBLE_EQUAL(s.f[s.n - 1], 1, 1e-9);
		if (chunking == 0) {
			CU_ASSERT_EQUAL(s.n, 2); /* "1 xx...", then "1.0" at the end */
			CU_ASSERT_EQUAL(r->skipped, 4);
		}
		free(r);
	}
	/* one byte more than PROGRESS_LINE_MAX: bad */
	struct progress_reader *r = calloc(1, sizeof *r);
	memset(stream, '1', PROGRESS_LINE_MAX + 1);
	stream[0] = '0';
	stream[1] = ' ';
	stream[PROGRESS_LINE_MAX + 1] = '\n';
	CU_ASSERT_EQUAL(progress_reader_feed(r, stream, PROGRESS_LINE_MAX + 2, NULL, NULL), 0);
	CU_ASSERT_EQUAL(r->bad, 1);
	free(r);
	free(stream);
}

/* A chunk of many lines: only its last complete line is parsed (the one
 * value that matters); the others are counted as skipped, the half line
 * after it waits for its LF. */
static void test_reader_last_line_of_chunk(void)
{
	static const char chunk[] = "0.1\n0.2 two\njunk\n0.3 last\n0.4";
	struct progress_reader *r = calloc(1, sizeof *r);
	struct seen s = { 0 };
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_EQUAL(progress_reader_feed(r, chunk, strlen(chunk), on_good, &s), 1);
	CU_ASSERT_EQUAL_FATAL(s.n, 1);
	CU_ASSERT_DOUBLE_EQUAL(s.f[0], 0.3, 1e-9);
	CU_ASSERT_STRING_EQUAL(s.text[0], "last");
	CU_ASSERT_EQUAL(r->skipped, 3);
	CU_ASSERT_EQUAL(r->good, 1);
	CU_ASSERT_EQUAL(r->bad, 0);
	/* the pending "0.4" is completed by the next chunk, then replaced */
	CU_ASSERT_EQUAL(progress_reader_feed(r, "5\n0.6\n", 6, on_good, &s), 1);
	CU_ASSERT_EQUAL_FATAL(s.n, 2);
	CU_ASSERT_DOUBLE_EQUAL(s.f[1], 0.6, 1e-9);
	CU_ASSERT_EQUAL(r->skipped, 4);
	/* one LF: the pending line is the chunk's last line, parsed */
	CU_ASSERT_EQUAL(progress_reader_feed(r, "0.7", 3, on_good, &s), 0);
	CU_ASSERT_EQUAL(progress_reader_feed(r, "5\n", 2, on_good, &s), 1);
	CU_ASSERT_EQUAL_FATAL(s.n, 3);
	CU_ASSERT_DOUBLE_EQUAL(s.f[2], 0.75, 1e-9);
	free(r);
}

/* A fraction in JSON (the /status page, the dispatcher's job row): as the
 * PROGRESS message prints it, 4 decimals at most, no binary noise. */
static void test_json_fraction(void)
{
	static const struct {
		double f;
		const char *want;
	} cases[] = {
		{ 0.42, "0.42" },     { 0.5, "0.5" }, { 0, "0" },  { 1, "1" },
		{ 0.1234, "0.1234" }, { 2, "1" },     { -1, "0" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct json_object *o = json_fraction(cases[i].f);
		CU_ASSERT_PTR_NOT_NULL_FATAL(o);
		CU_ASSERT_STRING_EQUAL(json_object_to_json_string(o), cases[i].want);
		json_object_put(o);
	}
}

static void count_send(void *arg, double fraction, const char *text)
{
	(void)fraction;
	(void)text;
	(*(int *)arg)++;
}

/* A job that floods its descriptor: one read window takes at most
 * JOB_PROGRESS_READ_BUDGET bytes, the rest stays in the pipe (its writer
 * would block) until the window ends; job_progress_finish drains it. */
static void test_read_budget(void)
{
	struct event_base *base = event_base_new();
	int child = -1, sent = 0;
	CU_ASSERT_PTR_NOT_NULL_FATAL(base);
	struct job_progress *p = job_progress_new(base, &child, count_send, &sent);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	fcntl(child, F_SETPIPE_SZ, 1 << 20);
	fcntl(child, F_SETFL, O_NONBLOCK);
	static char chunk[4096];
	for (size_t i = 0; i < sizeof chunk; i += 4)
		memcpy(chunk + i, "0.5\n", 4);
	size_t written = 0;
	while (written < 4 * JOB_PROGRESS_READ_BUDGET) {
		ssize_t n = write(child, chunk, sizeof chunk);
		if (n <= 0)
			break;
		written += (size_t)n;
	}
	CU_ASSERT_FATAL(written >= 2 * JOB_PROGRESS_READ_BUDGET);
	/* a few turns of the loop, well inside one 250 ms window */
	for (int i = 0; i < 20; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	int left = 0;
	CU_ASSERT(ioctl(child, FIONREAD, &left) == 0);
	CU_ASSERT_EQUAL((size_t)left, written - JOB_PROGRESS_READ_BUDGET);
	CU_ASSERT_EQUAL(sent, 1); /* one value so far, the rest coalesced */
	job_progress_finish(p);
	uint64_t good = 0, bad = 0;
	job_progress_counts(p, &good, &bad);
	CU_ASSERT_EQUAL(good, written / 4); /* every line counted, drained */
	CU_ASSERT_EQUAL(bad, 0);
	close(child);
	job_progress_free(p);
	event_base_free(base);
}

int main(void)
{
	static const struct test_case cases[] = {
		{ "fractions and percentages", test_fractions_and_percentages },
		{ "a text after one space", test_text },
		{ "junk is refused", test_junk },
		{ "the text cut as UTF-8", test_text_cut_as_utf8 },
		{ "the reader: long lines dropped whole, in any chunking", test_reader_long_lines },
		{ "the reader: a chunk's last line only", test_reader_last_line_of_chunk },
		{ "a fraction in JSON: 0.42, not 0.41999999999999998", test_json_fraction },
		{ "a flooded descriptor: 64 KiB per window, drained at the end", test_read_budget },
		{ NULL, NULL },
	};
	return run_suite("progress_line", cases);
}
