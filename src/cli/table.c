/* table.c - see table.h.  Cells hold server strings: control characters
 * (C0, DEL, and C1 as UTF-8 U+0080-U+009F) are copied as \xNN, so that a
 * string like "\033[2J" never reaches the terminal raw. */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/table.h"

struct table {
	int ncols;
	unsigned text_cols;
	size_t nrows; /* row 0 is the header */
	char **cells; /* nrows * ncols */
};

char *table_escape(const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n = strlen(s);
	char *out = malloc(n * 4 + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (u[i] < 0x20 || u[i] == 0x7f) {
			o += sprintf(o, "\\x%02x", u[i]);
		} else if (u[i] == 0xc2 && i + 1 < n && u[i + 1] >= 0x80 && u[i + 1] <= 0x9f) {
			o += sprintf(o, "\\x%02x", u[i + 1]);
			i++;
		} else {
			*o++ = (char)u[i];
		}
	}
	*o = '\0';
	return out;
}

static int add_row(struct table *t, const char *const *cells)
{
	char **grown = realloc(t->cells, (t->nrows + 1) * (size_t)t->ncols * sizeof *grown);
	if (!grown)
		return -1;
	t->cells = grown;
	char **row = grown + t->nrows * (size_t)t->ncols;
	for (int i = 0; i < t->ncols; i++) {
		row[i] = table_escape(cells[i] ? cells[i] : "-");
		if (!row[i]) {
			while (i-- > 0)
				free(row[i]);
			return -1;
		}
	}
	t->nrows++;
	return 0;
}

struct table *table_new(int ncols, const char *const *headers, unsigned text_cols)
{
	struct table *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	t->ncols = ncols;
	t->text_cols = text_cols | 1u;
	if (add_row(t, headers) != 0) {
		free(t);
		return NULL;
	}
	return t;
}

void table_add(struct table *t, const char *const *cells)
{
	if (t)
		add_row(t, cells);
}

void table_print(const struct table *t, FILE *out)
{
	if (!t)
		return;
	size_t width[32] = { 0 };
	int ncols = t->ncols < 32 ? t->ncols : 32;
	for (size_t r = 0; r < t->nrows; r++)
		for (int c = 0; c < ncols; c++) {
			size_t w = strlen(t->cells[r * (size_t)t->ncols + (size_t)c]);
			if (w > width[c])
				width[c] = w;
		}
	for (size_t r = 0; r < t->nrows; r++) {
		for (int c = 0; c < ncols; c++) {
			const char *cell = t->cells[r * (size_t)t->ncols + (size_t)c];
			int left = (t->text_cols >> c) & 1u, last = c == ncols - 1;
			fprintf(out, "%s%*s", c ? "  " : "",
				left ? -(int)(last ? 0 : width[c]) : (int)width[c], cell);
		}
		fputc('\n', out);
	}
}

void table_free(struct table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t);
}
