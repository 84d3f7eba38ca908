/*
 * config_yaml.h - a small YAML tree (built with libyaml's event API) and
 * typed getters that report errors as "file:line:column: message".
 *
 * Owns: turning YAML text into a tree of cy_node, and the generic checks
 * every schema needs (types, integers, strings, string lists, durations,
 * booleans, unknown keys).  It knows nothing of the execserver schema.
 *
 * Invariants of a tree from cy_parse():
 *  - exactly one document; NULL root for an empty stream or a document that
 *    is only a null scalar;
 *  - every mapping key is a scalar and keys are unique within each mapping
 *    (libyaml does not check this; cy_parse does, at every level);
 *  - no anchors, aliases or explicit tags (they are rejected, so the tree is
 *    a tree and positions always point at what was written);
 *  - line and column are 1-based, from libyaml's start marks.
 * Every function that fails writes err and returns -1; the first error wins.
 */
#ifndef ES_CONFIG_YAML_H
#define ES_CONFIG_YAML_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

#define CY_MAX_DEPTH 64 /* deepest nesting accepted */

enum cy_type {
	CY_SCALAR,
	CY_SEQUENCE,
	CY_MAPPING
};

struct cy_node {
	enum cy_type type;
	int line, column;      /* 1-based */
	char *value;           /* scalar: NUL-terminated text */
	size_t len;            /* scalar: bytes (differs from strlen if it holds NUL) */
	int quoted;            /* scalar was quoted or a block scalar (never null) */
	struct cy_node **kids; /* sequence: items; mapping: key, value, key, value... */
	size_t nkids;
};

struct cy_ctx {
	const char *file; /* name used in messages */
	struct config_error *err;
};

/* Parses text into *root (NULL for an empty document). */
int cy_parse(const struct cy_ctx *ctx, const char *text, size_t len, struct cy_node **root);
void cy_free(struct cy_node *node);

/* Formats "file:line:column: " + message into ctx->err; returns -1. */
int cy_error_at(const struct cy_ctx *ctx, int line, int column, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int cy_error(const struct cy_ctx *ctx, const struct cy_node *at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* "a mapping", "a sequence", "a string", "null" - for messages. */
const char *cy_kind(const struct cy_node *node);
int cy_is_null(const struct cy_node *node);
/* Writes the scalar as a short quoted, printable string for messages. */
const char *cy_quote(const struct cy_node *node, char *buf, size_t len);

size_t cy_map_size(const struct cy_node *map);
const struct cy_node *cy_map_key(const struct cy_node *map, size_t i);
const struct cy_node *cy_map_value(const struct cy_node *map, size_t i);
/* The value under key, or NULL; *keynode (if not NULL) gets the key node. */
const struct cy_node *cy_map_find(const struct cy_node *map, const char *key,
				  const struct cy_node **keynode);

/* Type checks; `what` names the thing in the message ("services.demo"). */
int cy_expect(const struct cy_ctx *ctx, const struct cy_node *node, enum cy_type type,
	      const char *what);
/* 1 if the key node is the scalar `name`. */
int cy_key_is(const struct cy_node *key, const char *name);
/* Reports key as unknown: "did you mean" for a match in another case, else
 * listing `allowed` (NULL-terminated) if it fits. */
int cy_unknown_key(const struct cy_ctx *ctx, const struct cy_node *key, const char *what,
		   const char *const *allowed);
/* Fails on the first key of map not in the NULL-terminated list `allowed`. */
int cy_check_keys(const struct cy_ctx *ctx, const struct cy_node *map, const char *what,
		  const char *const *allowed);

/* A non-null scalar without NUL bytes, copied into *out (malloc'ed). */
int cy_get_string(const struct cy_ctx *ctx, const struct cy_node *node, const char *what,
		  char **out);
/* A plain decimal integer in min..max (the range is named on any error). */
int cy_get_int(const struct cy_ctx *ctx, const struct cy_node *node, const char *what,
	       long long min, long long max, long long *out);
/* A plain yes/no/true/false/on/off (any case). */
int cy_get_bool(const struct cy_ctx *ctx, const struct cy_node *node, const char *what, int *out);
/* A duration (duration.h) in min_ms..max_ms. */
int cy_get_duration_ms(const struct cy_ctx *ctx, const struct cy_node *node, const char *what,
		       int64_t min_ms, int64_t max_ms, int64_t *out);
/* A sequence of strings (null = empty).  *out must be empty; it is filled
 * even on error so that strlist_free() releases what was copied. */
int cy_get_strlist(const struct cy_ctx *ctx, const struct cy_node *node, const char *what,
		   struct strlist *out);

void strlist_free(struct strlist *list);
/* Deep copy; returns -1 on out of memory (dst then holds a partial copy). */
int strlist_copy(struct strlist *dst, const struct strlist *src);

#endif
