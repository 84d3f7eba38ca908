/*
 * progress_line.h - the progress lines a job writes to its progress
 * descriptor (EXECSERVER_PROGRESS_FD, docs/progress.md): parsing one line,
 * and cutting a byte stream into lines with a bounded buffer.  No I/O, no
 * allocation.
 *
 * A line is `<number>` or `<number>%`, optionally followed by one space and
 * a text, ended by LF (a CR before it is dropped).  The number is digits
 * with an optional fraction (`0.42`, `1`, `.5` is not one); a fraction must
 * be 0 to 1, a percentage 0 to 100.  The text must be UTF-8 without
 * control characters (C0, DEL, C1); it is cut to PROGRESS_TEXT_MAX bytes on a
 * character boundary.  Anything else is a bad line: counted, never fatal.
 * A line longer than PROGRESS_LINE_MAX bytes is bad as a whole (its bytes
 * are skipped up to its LF), so a job that writes megabytes costs the
 * reader PROGRESS_LINE_MAX bytes at most.
 */
#ifndef ES_PROGRESS_LINE_H
#define ES_PROGRESS_LINE_H

#include <stddef.h>
#include <stdint.h>

#define PROGRESS_LINE_MAX 1024 /* bytes of a line without its LF */
#define PROGRESS_TEXT_MAX 200  /* bytes of its text kept */

struct progress_value {
	double fraction;                  /* 0 to 1 */
	char text[PROGRESS_TEXT_MAX + 1]; /* "" when none */
};

/* Parses one line (without its LF; a trailing CR is allowed).  Returns 0
 * and fills *out, or -1 for a bad line. */
int progress_parse_line(const char *line, size_t len, struct progress_value *out);

/* Cuts a stream into lines.  Zero it to start. */
struct progress_reader {
	char buf[PROGRESS_LINE_MAX + 1]; /* the line being read (+ its CR) */
	size_t len;
	int overlong;     /* the line being read outgrew buf: skipped to its LF */
	uint64_t good;    /* lines parsed */
	uint64_t bad;     /* lines refused (malformed, out of range, too long) */
	uint64_t skipped; /* lines replaced by a later line of the same chunk */
};

/* Feeds n bytes.  Only the last complete line of the chunk is parsed
 * (only the latest value matters): good(arg, value) is called for it when
 * it is good; the complete lines before it are counted as skipped without
 * being parsed, so the cost per chunk is a byte scan plus one parse.
 * Returns the number of good lines parsed (0 or 1). */
unsigned progress_reader_feed(struct progress_reader *r, const char *bytes, size_t n,
			      void (*good)(void *arg, const struct progress_value *v), void *arg);
/* The stream ended: a last line without LF counts as a line. */
unsigned progress_reader_end(struct progress_reader *r,
			     void (*good)(void *arg, const struct progress_value *v), void *arg);

#endif
