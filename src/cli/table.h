/*
 * table.h - plain-text tables for terminals and logs: a header row and
 * data rows of strings, columns as wide as their widest cell, separated
 * by two spaces; the first column left-aligned, the others right-aligned
 * (they hold numbers) unless marked as text.
 *
 * Control characters in a cell are printed as \xNN (cells hold strings
 * from servers; an escape sequence must not reach the terminal).
 * Owns: copies of every cell until table_free.  Out of memory makes the
 * table print what it holds (never a crash, never a partial row).
 */
#ifndef ES_CLI_TABLE_H
#define ES_CLI_TABLE_H

#include <stdio.h>

struct table;

/* A malloc'd copy of s with its control characters as \xNN (also for
 * server text printed outside tables); NULL when out of memory. */
char *table_escape(const char *s);

/* ncols columns with these headers; text_cols: bit i set = column i is
 * left-aligned (column 0 always is). */
struct table *table_new(int ncols, const char *const *headers, unsigned text_cols);
/* One row of ncols cells (NULL prints "-"). */
void table_add(struct table *t, const char *const *cells);
void table_print(const struct table *t, FILE *out);
void table_free(struct table *t);

#endif
