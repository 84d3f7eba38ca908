/*
 * queries.c - see queries.h: dq_expand.  The statements themselves are
 * sql/queries/NAME.sql, compiled in as src/dispatch/queries_sql.c (the
 * build's sql/embed.sh).
 */
#include "autoconfig.h"
#include "dispatch/queries.h"

#include <stdlib.h>
#include <string.h>

char *dq_expand(const char *text, const char *schema)
{
	static const char mark[] = "@schema@";
	size_t n = 0, slen = strlen(schema) + 2;
	const char *p;
	char *out, *o;

	for (p = text; (p = strstr(p, mark)); p += sizeof mark - 1)
		n++;
	out = malloc(strlen(text) + n * slen + 1);
	if (!out)
		return NULL;
	o = out;
	for (p = text;;) {
		const char *m = strstr(p, mark);
		size_t len = m ? (size_t)(m - p) : strlen(p);
		memcpy(o, p, len);
		o += len;
		if (!m)
			break;
		*o++ = '"';
		memcpy(o, schema, slen - 2);
		o += slen - 2;
		*o++ = '"';
		p = m + sizeof mark - 1;
	}
	*o = '\0';
	return out;
}
