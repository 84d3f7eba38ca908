/* embedded.c - see embedded.h.  A linear lookup: the table has a handful
 * of entries.  The headers are one list; the CRLF block is made from it. */
#include "autoconfig.h"

#include <stdio.h>
#include <string.h>

#include "common/embedded.h"

const struct embedded_file *embedded_find(const char *name)
{
	for (const struct embedded_file *f = embedded_files; f->name; f++)
		if (strcmp(f->name, name) == 0)
			return f;
	return NULL;
}

const char *embedded_type(const char *name)
{
	static const struct {
		const char *ext, *type;
	} types[] = {
		{ ".html", "text/html; charset=utf-8" },
		{ ".css", "text/css; charset=utf-8" },
		{ ".js", "text/javascript; charset=utf-8" },
		{ ".svg", "image/svg+xml" },
		{ ".png", "image/png" },
	};
	const char *dot = strrchr(name, '.');
	for (size_t i = 0; dot && i < sizeof types / sizeof types[0]; i++)
		if (strcmp(dot, types[i].ext) == 0)
			return types[i].type;
	return "application/octet-stream";
}

const struct embedded_header embedded_header_list[] = {
	{ "Cache-Control", "no-cache" },
	{ "Content-Security-Policy",
	  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
	  "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'" },
	{ "X-Content-Type-Options", "nosniff" },
	{ "X-Frame-Options", "DENY" },
	{ "Referrer-Policy", "no-referrer" },
	{ NULL, NULL },
};

const char *embedded_headers(void)
{
	static char block[1024]; /* built once from the list; it fits (a constant) */
	if (!block[0]) {
		size_t n = 0;
		for (const struct embedded_header *h = embedded_header_list; h->name; h++)
			n += (size_t)snprintf(block + n, sizeof block - n, "%s: %s\r\n", h->name,
					      h->value);
	}
	return block;
}
