/*
 * json_text.h - the head of the daemon's per-job messages (OFFER, DONE)
 * as JSON text, built around json-c's own string escaping instead of a
 * json-c object per message (an object, its hash table, a string object
 * per field, the serialisation and the frees: about 4 k instructions of
 * each OFFER and DONE).
 *
 * Invariant: the text is byte for byte what json-c prints for an object
 * with the same fields in the same order under JSON_C_TO_STRING_PLAIN |
 * JSON_C_TO_STRING_NOSLASHESCAPE, the flags of every message the daemon
 * sends (handler/messages.c), because json-c escapes the string.  One
 * string object of json-c is kept per process for that (a process builds
 * one message at a time).
 */
#ifndef ES_JSON_TEXT_H
#define ES_JSON_TEXT_H

#include <stddef.h>

/* {"type":"TYPE","job_id":JOB_ID without its closing brace, in a malloc'd
 * buffer with room for `extra` more bytes and a NUL; its length in *len.
 * TYPE is a message type of docs/protocol.md (capital letters, which JSON
 * prints as they are); JOB_ID is quoted and escaped by json-c.  NULL when
 * out of memory. */
char *json_text_head(const char *type, const char *job_id, size_t extra, size_t *len);

struct json_object;

/* A progress fraction (0 to 1, clamped; NaN is 0) as a JSON number of at
 * most 4 decimals without trailing zeros, as the PROGRESS message carries
 * it (docs/protocol.md): 0.42 prints "0.42", never 0.41999999999999998.
 * NULL when out of memory. */
struct json_object *json_fraction(double fraction);

#endif
