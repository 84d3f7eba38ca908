/*
 * progress_line.c - see progress_line.h.
 */
#include "autoconfig.h"

#include <string.h>

#include "common/utf8.h"
#include "job/progress_line.h"

/* Digits [. digits] at s[0..len): the value, or -1 when it is not one.
 * *used: the bytes it took. */
static double parse_number(const char *s, size_t len, size_t *used)
{
	size_t i = 0;
	double v = 0, scale = 1;
	int digits = 0;

	while (i < len && s[i] >= '0' && s[i] <= '9' && digits < 12) {
		v = v * 10 + (s[i++] - '0');
		digits++;
	}
	if (!digits || (i < len && s[i] >= '0' && s[i] <= '9'))
		return -1; /* none, or more than 12 integer digits */
	if (i < len && s[i] == '.') {
		int frac = 0;
		i++;
		while (i < len && s[i] >= '0' && s[i] <= '9') {
			if (frac < 15) {
				scale /= 10;
				v += (s[i] - '0') * scale;
			}
			frac++;
			i++;
		}
		if (!frac)
			return -1; /* "1." */
	}
	*used = i;
	return v;
}

int progress_parse_line(const char *line, size_t len, struct progress_value *out)
{
	size_t used = 0;

	if (len && line[len - 1] == '\r')
		len--;
	if (len > PROGRESS_LINE_MAX)
		return -1;
	double v = parse_number(line, len, &used);
	if (v < 0)
		return -1;
	if (used < len && line[used] == '%') {
		if (v > 100)
			return -1;
		v /= 100;
		used++;
	} else if (v > 1) {
		return -1;
	}
	const char *text = line + used;
	size_t tlen = len - used;
	if (tlen) {
		if (text[0] != ' ')
			return -1; /* "0.5x", "50%%" */
		text++;
		tlen--;
	}
	if (utf8_has_control(text, tlen))
		return -1;
	if (!utf8_valid((const unsigned char *)text, tlen))
		return -1;
	char tmp[PROGRESS_LINE_MAX + 1];
	memcpy(tmp, text, tlen);
	tmp[tlen] = '\0';
	size_t keep = utf8_cut(tmp, PROGRESS_TEXT_MAX);
	out->fraction = v;
	memcpy(out->text, tmp, keep);
	out->text[keep] = '\0';
	return 0;
}

/* The line in r->buf is complete: parse it (unless it outgrew the buffer). */
static unsigned line_done(struct progress_reader *r,
			  void (*good)(void *arg, const struct progress_value *v), void *arg)
{
	struct progress_value v;
	unsigned n = 0;

	if (!r->overlong && progress_parse_line(r->buf, r->len, &v) == 0) {
		r->good++;
		n = 1;
		if (good)
			good(arg, &v);
	} else {
		r->bad++;
	}
	r->len = 0;
	r->overlong = 0;
	return n;
}

/* Appends bytes of the line being read (or drops them once it outgrew buf). */
static void line_add(struct progress_reader *r, const char *bytes, size_t take)
{
	if (r->overlong)
		return;
	if (r->len + take > sizeof r->buf) {
		r->overlong = 1;
		r->len = 0;
		return;
	}
	memcpy(r->buf + r->len, bytes, take);
	r->len += take;
}

unsigned progress_reader_feed(struct progress_reader *r, const char *bytes, size_t n,
			      void (*good)(void *arg, const struct progress_value *v), void *arg)
{
	const char *end = bytes + n;
	const char *last = n ? memrchr(bytes, '\n', n) : NULL;

	if (!last) {
		line_add(r, bytes, n);
		return 0;
	}
	const char *start = bytes; /* where the chunk's last complete line starts */
	const char *first = memchr(bytes, '\n', n);
	if (first != last) {
		/* the lines before the chunk's last one (the line being read
		 * among them) are replaced by it: counted, not parsed (the
		 * line being read as bad when it already outgrew the buffer) */
		if (r->overlong)
			r->bad++;
		else
			r->skipped++;
		for (const char *p = first + 1; p < last; p++) {
			p = memchr(p, '\n', (size_t)(last - p));
			if (!p)
				break;
			r->skipped++;
		}
		r->len = 0;
		r->overlong = 0;
		start = (const char *)memrchr(bytes, '\n', (size_t)(last - bytes)) + 1;
	}
	line_add(r, start, (size_t)(last - start));
	unsigned lines = line_done(r, good, arg);
	line_add(r, last + 1, (size_t)(end - last - 1));
	return lines;
}

unsigned progress_reader_end(struct progress_reader *r,
			     void (*good)(void *arg, const struct progress_value *v), void *arg)
{
	if (!r->len && !r->overlong)
		return 0;
	return line_done(r, good, arg);
}
