/*
 * hex.h - one hexadecimal digit, for every parser of hex text (tokens,
 * chunk sizes, %XX escapes): the one place that knows 0-9, a-f and A-F.
 */
#ifndef ES_HEX_H
#define ES_HEX_H

/* The value of c as a hex digit (either case), or -1 if it is none. */
int hex_digit(char c);

#endif
