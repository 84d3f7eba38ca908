/* embedded.c - see embedded.h.  A linear lookup: the table has a handful
 * of entries. */
#include "autoconfig.h"

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

const char *embedded_headers(void)
{
	return "Cache-Control: no-cache\r\n"
	       "Content-Security-Policy: default-src 'none'; script-src 'self'; "
	       "style-src 'self'; img-src 'self' data:; connect-src 'self'; "
	       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'\r\n"
	       "X-Content-Type-Options: nosniff\r\n"
	       "X-Frame-Options: DENY\r\n"
	       "Referrer-Policy: no-referrer\r\n";
}
