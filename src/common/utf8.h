/*
 * utf8.h - strict UTF-8 validation (RFC 3629): no overlongs, no surrogates,
 * nothing above U+10FFFF.  wslay leaves text-frame validation to us
 * (RFC 6455 section 8.1 requires closing with 1007 on invalid UTF-8).
 */
#ifndef ES_UTF8_H
#define ES_UTF8_H

#include <stddef.h>

/* Returns 1 if buf[0..len) is valid UTF-8, else 0. */
int utf8_valid(const unsigned char *buf, size_t len);
/* Copies buf into a new NUL-terminated string, replacing each invalid
 * sequence and each NUL by U+FFFD, so that any bytes (a program's output)
 * can travel in a JSON text frame.  Returns NULL on allocation failure. */
char *utf8_sanitize(const unsigned char *buf, size_t len);
/* The length of the longest prefix of s (NUL-terminated) of at most max
 * bytes that does not end inside a multi-byte sequence: where to cut a
 * valid string so that it stays valid. */
size_t utf8_cut(const char *s, size_t max);
/* 1 if buf[0..len) (valid UTF-8) holds a control character: C0
 * (U+0000-U+001F), DEL (U+007F) or C1 (U+0080-U+009F, bytes C2 80 to
 * C2 9F; CSI U+009B starts terminal escapes as ESC [ does). */
int utf8_has_control(const char *buf, size_t len);

#endif
