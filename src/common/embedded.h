/*
 * embedded.h - static files compiled into a daemon (the console's HTML,
 * CSS and JavaScript from www/, by scripts/embed-files.sh) and the headers
 * they are served with.  Shared by every daemon with a console: each
 * serves the names its page needs.
 */
#ifndef ES_EMBEDDED_H
#define ES_EMBEDDED_H

#include <stddef.h>

struct embedded_file {
	const char *name; /* base name, e.g. "common.css"; NULL ends the table */
	const unsigned char *data;
	size_t len; /* bytes of data (a NUL follows them) */
};

/* The generated table (www_files.c). */
extern const struct embedded_file embedded_files[];

/* The file called name, or NULL. */
const struct embedded_file *embedded_find(const char *name);
/* Its Content-Type, from the name's extension (.html, .css, .js, .svg, .png). */
const char *embedded_type(const char *name);
/* The response headers of a console file: a strict Content-Security-Policy
 * (scripts and styles from the same origin only, no inline script, no
 * frames), nosniff, no framing, no referrer, and Cache-Control: no-cache
 * (a browser checks again after an upgrade).  As name/value pairs ending
 * with a NULL name (for evhttp_add_header), and as one block of lines each
 * ended by CRLF (for a hand-written response head). */
struct embedded_header {
	const char *name, *value;
};
extern const struct embedded_header embedded_header_list[];
const char *embedded_headers(void);

#endif
