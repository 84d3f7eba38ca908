/*
 * config_yaml.c - see config_yaml.h.  The tree is built from libyaml events
 * with an explicit stack (no recursion while parsing); each node is attached
 * to its parent as soon as it is created, so freeing the root releases
 * everything on every error path.  Duplicate keys are detected when a key is
 * added, so the error points at the second occurrence in document order.
 */
#include "autoconfig.h"
#include "config/config_yaml.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "config/duration.h"

int cy_error_at(const struct cy_ctx *ctx, int line, int column, const char *fmt, ...)
{
	char *out = ctx->err->text;
	size_t len = sizeof ctx->err->text;
	int n;
	va_list ap;

	if (line > 0)
		n = snprintf(out, len, "%s:%d:%d: ", ctx->file, line, column);
	else
		n = snprintf(out, len, "%s: ", ctx->file);
	if (n < 0 || (size_t)n >= len)
		return -1;
	va_start(ap, fmt);
	vsnprintf(out + n, len - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

int cy_error(const struct cy_ctx *ctx, const struct cy_node *at, const char *fmt, ...)
{
	char msg[sizeof ctx->err->text];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return cy_error_at(ctx, at ? at->line : 0, at ? at->column : 0, "%s", msg);
}

/* "what: " or "" so that messages read "handlers: ..." or just "...". */
static const char *pfx(const char *what)
{
	return what && *what ? ": " : "";
}

static const char *nz(const char *what)
{
	return what ? what : "";
}

/* ---- the tree ---- */

void cy_free(struct cy_node *node)
{
	if (!node)
		return;
	for (size_t i = 0; i < node->nkids; i++)
		cy_free(node->kids[i]);
	free(node->kids);
	free(node->value);
	free(node);
}

struct builder {
	const struct cy_ctx *ctx;
	struct cy_node *root;
	struct cy_node *stack[CY_MAX_DEPTH];
	size_t capacity[CY_MAX_DEPTH]; /* of stack[i]->kids */
	int depth;
	int documents;
};

static int out_of_memory(const struct cy_ctx *ctx)
{
	return cy_error_at(ctx, 0, 0, "out of memory");
}

static int same_key(const struct cy_node *a, const struct cy_node *b)
{
	return a->len == b->len && memcmp(a->value, b->value, a->len) == 0;
}

/* Attaches node to the innermost open collection (or makes it the root). */
static int attach(struct builder *b, struct cy_node *node)
{
	struct cy_node *parent;
	size_t *cap;

	if (b->depth == 0) {
		b->root = node;
		return 0;
	}
	parent = b->stack[b->depth - 1];
	cap = &b->capacity[b->depth - 1];
	if (parent->nkids == *cap) {
		size_t ncap = *cap ? *cap * 2 : 8;
		struct cy_node **kids = realloc(parent->kids, ncap * sizeof *kids);
		if (!kids) {
			cy_free(node);
			return out_of_memory(b->ctx);
		}
		parent->kids = kids;
		*cap = ncap;
	}
	parent->kids[parent->nkids++] = node;

	if (parent->type == CY_MAPPING && parent->nkids % 2 == 1) {
		if (node->type != CY_SCALAR)
			return cy_error(b->ctx, node, "mapping keys must be scalars, found %s",
					cy_kind(node));
		for (size_t i = 0; i + 1 < parent->nkids; i += 2) {
			const struct cy_node *k = parent->kids[i];
			if (same_key(k, node)) {
				char q[64];
				return cy_error(b->ctx, node,
						"duplicate key %s (first at line %d column %d)",
						cy_quote(node, q, sizeof q), k->line, k->column);
			}
		}
	}
	return 0;
}

/* Anchors, aliases and tags are refused (see config_yaml.h). */
static int check_properties(struct builder *b, const yaml_mark_t *mark, const yaml_char_t *anchor,
			    const yaml_char_t *tag)
{
	int line = (int)mark->line + 1, column = (int)mark->column + 1;

	if (anchor)
		return cy_error_at(b->ctx, line, column, "YAML anchors (&%.40s) are not supported",
				   (const char *)anchor);
	if (tag)
		return cy_error_at(b->ctx, line, column, "YAML tags (%.40s) are not supported",
				   (const char *)tag);
	return 0;
}

static struct cy_node *new_node(enum cy_type type, const yaml_mark_t *mark)
{
	struct cy_node *n = calloc(1, sizeof *n);

	if (n) {
		n->type = type;
		n->line = (int)mark->line + 1;
		n->column = (int)mark->column + 1;
	}
	return n;
}

static int on_event(struct builder *b, const yaml_event_t *ev, int *done)
{
	const yaml_mark_t *mark = &ev->start_mark;
	struct cy_node *node;

	switch (ev->type) {
	case YAML_STREAM_START_EVENT:
	case YAML_DOCUMENT_END_EVENT:
	case YAML_NO_EVENT: return 0;
	case YAML_STREAM_END_EVENT: *done = 1; return 0;
	case YAML_DOCUMENT_START_EVENT:
		if (b->documents++ > 0)
			return cy_error_at(b->ctx, (int)mark->line + 1, (int)mark->column + 1,
					   "only one YAML document is allowed in the file");
		return 0;
	case YAML_ALIAS_EVENT:
		return cy_error_at(b->ctx, (int)mark->line + 1, (int)mark->column + 1,
				   "YAML aliases (*%.40s) are not supported",
				   (const char *)ev->data.alias.anchor);
	case YAML_SCALAR_EVENT:
		if (check_properties(b, mark, ev->data.scalar.anchor, ev->data.scalar.tag) < 0)
			return -1;
		node = new_node(CY_SCALAR, mark);
		if (!node)
			return out_of_memory(b->ctx);
		node->value = malloc(ev->data.scalar.length + 1);
		if (!node->value) {
			free(node);
			return out_of_memory(b->ctx);
		}
		memcpy(node->value, ev->data.scalar.value, ev->data.scalar.length);
		node->value[ev->data.scalar.length] = '\0';
		node->len = ev->data.scalar.length;
		node->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
		return attach(b, node);
	case YAML_SEQUENCE_START_EVENT:
	case YAML_MAPPING_START_EVENT: {
		int seq = ev->type == YAML_SEQUENCE_START_EVENT;
		const yaml_char_t *anchor = seq ? ev->data.sequence_start.anchor
						: ev->data.mapping_start.anchor;
		const yaml_char_t *tag = seq ? ev->data.sequence_start.tag
					     : ev->data.mapping_start.tag;
		if (check_properties(b, mark, anchor, tag) < 0)
			return -1;
		if (b->depth == CY_MAX_DEPTH)
			return cy_error_at(b->ctx, (int)mark->line + 1, (int)mark->column + 1,
					   "nesting deeper than %d levels", CY_MAX_DEPTH);
		node = new_node(seq ? CY_SEQUENCE : CY_MAPPING, mark);
		if (!node)
			return out_of_memory(b->ctx);
		if (attach(b, node) < 0)
			return -1;
		b->stack[b->depth] = node;
		b->capacity[b->depth] = 0;
		b->depth++;
		return 0;
	}
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
		if (b->depth > 0)
			b->depth--;
		return 0;
	}
	return 0;
}

/* 1-based line and column of a byte offset, for reader (encoding) errors. */
static void offset_position(const char *text, size_t len, size_t offset, int *line, int *column)
{
	*line = 1;
	*column = 1;
	for (size_t i = 0; i < offset && i < len; i++) {
		if (text[i] == '\n') {
			(*line)++;
			*column = 1;
		} else {
			(*column)++;
		}
	}
}

static int parser_error(const struct cy_ctx *ctx, const yaml_parser_t *p, const char *text,
			size_t len)
{
	int line, column;
	const char *problem = p->problem ? p->problem : "unknown error";

	switch (p->error) {
	case YAML_MEMORY_ERROR: return out_of_memory(ctx);
	case YAML_READER_ERROR:
		offset_position(text, len, p->problem_offset, &line, &column);
		return cy_error_at(ctx, line, column, "invalid YAML input: %s", problem);
	default:
		line = (int)p->problem_mark.line + 1;
		column = (int)p->problem_mark.column + 1;
		/* libyaml's words for a tab where a token should start */
		if (p->problem_mark.index < len && text[p->problem_mark.index] == '\t')
			return cy_error_at(ctx, line, column,
					   "a tab character: YAML does not allow tabs for "
					   "indentation; indent with spaces");
		if (p->context)
			return cy_error_at(ctx, line, column,
					   "YAML syntax error: %s (%s at line %d column %d)",
					   problem, p->context, (int)p->context_mark.line + 1,
					   (int)p->context_mark.column + 1);
		return cy_error_at(ctx, line, column, "YAML syntax error: %s", problem);
	}
}

int cy_parse(const struct cy_ctx *ctx, const char *text, size_t len, struct cy_node **root)
{
	yaml_parser_t parser;
	struct builder b;
	int done = 0, rc = 0;

	*root = NULL;
	memset(&b, 0, sizeof b);
	b.ctx = ctx;
	if (!yaml_parser_initialize(&parser))
		return out_of_memory(ctx);
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	while (!done) {
		yaml_event_t ev;
		if (!yaml_parser_parse(&parser, &ev)) {
			rc = parser_error(ctx, &parser, text, len);
			break;
		}
		rc = on_event(&b, &ev, &done);
		yaml_event_delete(&ev);
		if (rc < 0)
			break;
	}
	yaml_parser_delete(&parser);
	if (rc < 0) {
		cy_free(b.root);
		return -1;
	}
	if (b.root && cy_is_null(b.root)) {
		cy_free(b.root);
		b.root = NULL;
	}
	*root = b.root;
	return 0;
}

/* ---- inspection ---- */

int cy_is_null(const struct cy_node *node)
{
	static const char *const nulls[] = { "", "~", "null", "Null", "NULL" };

	if (!node || node->type != CY_SCALAR || node->quoted)
		return 0;
	for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++)
		if (strcmp(node->value, nulls[i]) == 0)
			return 1;
	return 0;
}

/* What a node of the type is called in messages ("a mapping"). */
static const char *type_name(enum cy_type type)
{
	switch (type) {
	case CY_MAPPING: return "a mapping";
	case CY_SEQUENCE: return "a sequence";
	case CY_SCALAR: break;
	}
	return "a scalar";
}

const char *cy_kind(const struct cy_node *node)
{
	if (!node)
		return "nothing";
	if (node->type != CY_SCALAR)
		return type_name(node->type);
	return cy_is_null(node) ? "null" : node->quoted ? "a quoted string" : "a scalar";
}

const char *cy_quote(const struct cy_node *node, char *buf, size_t len)
{
	const size_t shown = 40;
	size_t o = 0;

	if (len < 8) {
		if (len)
			buf[0] = '\0';
		return buf;
	}
	if (!node || node->type != CY_SCALAR) {
		snprintf(buf, len, "%s", cy_kind(node));
		return buf;
	}
	buf[o++] = '"';
	for (size_t i = 0; i < node->len && o + 5 < len; i++) {
		unsigned char c = (unsigned char)node->value[i];
		if (i == shown) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		buf[o++] = (c >= 0x20 && c != 0x7f) ? (char)c : '?';
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}

size_t cy_map_size(const struct cy_node *map)
{
	return map && map->type == CY_MAPPING ? map->nkids / 2 : 0;
}

const struct cy_node *cy_map_key(const struct cy_node *map, size_t i)
{
	return map->kids[2 * i];
}

const struct cy_node *cy_map_value(const struct cy_node *map, size_t i)
{
	return map->kids[2 * i + 1];
}

const struct cy_node *cy_map_find(const struct cy_node *map, const char *key,
				  const struct cy_node **keynode)
{
	size_t n = cy_map_size(map), klen = strlen(key);

	for (size_t i = 0; i < n; i++) {
		const struct cy_node *k = cy_map_key(map, i);
		if (k->len == klen && memcmp(k->value, key, klen) == 0) {
			if (keynode)
				*keynode = k;
			return cy_map_value(map, i);
		}
	}
	return NULL;
}

/* ---- typed getters ---- */

int cy_expect(const struct cy_ctx *ctx, const struct cy_node *node, enum cy_type type,
	      const char *what)
{
	char q[64];

	if (node->type == type && !(type == CY_SCALAR && cy_is_null(node)))
		return 0;
	if (node->type == CY_SCALAR && !cy_is_null(node))
		return cy_error(ctx, node, "%s%sexpected %s, found %s %s", nz(what), pfx(what),
				type_name(type), cy_kind(node), cy_quote(node, q, sizeof q));
	return cy_error(ctx, node, "%s%sexpected %s, found %s", nz(what), pfx(what),
			type_name(type), cy_kind(node));
}

int cy_key_is(const struct cy_node *key, const char *name)
{
	return key->type == CY_SCALAR && key->len == strlen(name) && strcmp(key->value, name) == 0;
}

int cy_unknown_key(const struct cy_ctx *ctx, const struct cy_node *key, const char *what,
		   const char *const *allowed)
{
	char list[200] = "", q[64];
	size_t used = 0;

	for (size_t j = 0; allowed[j]; j++)
		if (strlen(allowed[j]) == key->len && strcasecmp(allowed[j], key->value) == 0)
			return cy_error(ctx, key, "%s%sunknown key %s (did you mean \"%s\"?)",
					nz(what), pfx(what), cy_quote(key, q, sizeof q),
					allowed[j]);
	for (size_t j = 0; allowed[j]; j++) {
		int w = snprintf(list + used, sizeof list - used, "%s%s", j ? ", " : "",
				 allowed[j]);
		if (w < 0 || (size_t)w >= sizeof list - used)
			return cy_error(ctx, key,
					"%s%sunknown key %s (the keys are listed in "
					"execserver.yml(5))",
					nz(what), pfx(what), cy_quote(key, q, sizeof q));
		used += (size_t)w;
	}
	return cy_error(ctx, key, "%s%sunknown key %s (expected one of: %s)", nz(what), pfx(what),
			cy_quote(key, q, sizeof q), list);
}

int cy_check_keys(const struct cy_ctx *ctx, const struct cy_node *map, const char *what,
		  const char *const *allowed)
{
	size_t n = cy_map_size(map);

	for (size_t i = 0; i < n; i++) {
		const struct cy_node *k = cy_map_key(map, i);
		size_t j;

		for (j = 0; allowed[j]; j++)
			if (cy_key_is(k, allowed[j]))
				break;
		if (!allowed[j])
			return cy_unknown_key(ctx, k, what, allowed);
	}
	return 0;
}

int cy_get_string(const struct cy_ctx *ctx, const struct cy_node *node, const char *what,
		  char **out)
{
	if (cy_expect(ctx, node, CY_SCALAR, what) < 0)
		return -1;
	if (strlen(node->value) != node->len)
		return cy_error(ctx, node, "%s%sthe string must not contain NUL characters",
				nz(what), pfx(what));
	*out = strdup(node->value);
	if (!*out)
		return out_of_memory(ctx);
	return 0;
}

int cy_get_int(const struct cy_ctx *ctx, const struct cy_node *node, const char *what,
	       long long min, long long max, long long *out)
{
	const char *p;
	unsigned long long mag = 0, limit;
	int neg = 0;
	char q[64];

	if (node->type != CY_SCALAR || cy_is_null(node) || node->quoted)
		goto not_int;
	p = node->value;
	if (*p == '-' || *p == '+')
		neg = *p++ == '-';
	if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] != '\0'))
		goto not_int; /* no digits, or a leading zero (octal in YAML 1.1) */
	limit = neg ? (unsigned long long)LLONG_MAX + 1 : (unsigned long long)LLONG_MAX;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			goto not_int;
		unsigned d = (unsigned)(*p - '0');
		if (mag > (limit - d) / 10)
			goto range; /* overflow */
		mag = mag * 10 + d;
	}
	if (neg)
		*out = mag == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)mag;
	else
		*out = (long long)mag;
	if (*out < min || *out > max)
		goto range;
	return 0;
not_int:
	if (node->type == CY_SCALAR && !cy_is_null(node))
		return cy_error(ctx, node, "%s%sexpected an integer in %lld..%lld, found %s %s",
				nz(what), pfx(what), min, max, cy_kind(node),
				cy_quote(node, q, sizeof q));
	return cy_error(ctx, node, "%s%sexpected an integer in %lld..%lld, found %s", nz(what),
			pfx(what), min, max, cy_kind(node));
range:
	return cy_error(ctx, node, "%s%s%s is out of range %lld..%lld", nz(what), pfx(what),
			cy_quote(node, q, sizeof q), min, max);
}

int cy_get_bool(const struct cy_ctx *ctx, const struct cy_node *node, const char *what, int *out)
{
	static const char *const yes[] = { "yes", "true", "on" };
	static const char *const no[] = { "no", "false", "off" };
	char q[64];

	if (node->type == CY_SCALAR && !node->quoted) {
		for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
			if (strcasecmp(node->value, yes[i]) == 0) {
				*out = 1;
				return 0;
			}
			if (strcasecmp(node->value, no[i]) == 0) {
				*out = 0;
				return 0;
			}
		}
	}
	if (node->type == CY_SCALAR && !cy_is_null(node))
		return cy_error(ctx, node,
				"%s%sexpected a boolean (yes/no/true/false/on/off), found %s %s",
				nz(what), pfx(what), cy_kind(node), cy_quote(node, q, sizeof q));
	return cy_error(ctx, node, "%s%sexpected a boolean (yes/no/true/false/on/off), found %s",
			nz(what), pfx(what), cy_kind(node));
}

int cy_get_duration_ms(const struct cy_ctx *ctx, const struct cy_node *node, const char *what,
		       int64_t min_ms, int64_t max_ms, int64_t *out)
{
	const char *why;
	char q[64], lo[32], hi[32];
	int64_t ms;

	if (node->type != CY_SCALAR || cy_is_null(node))
		return cy_error(ctx, node,
				"%s%sexpected a duration (like 90s, 1h30m or 500ms), "
				"found %s",
				nz(what), pfx(what), cy_kind(node));
	if (strlen(node->value) != node->len || duration_parse_ms(node->value, &ms, &why) < 0) {
		if (strlen(node->value) != node->len)
			why = "contains a NUL character";
		return cy_error(ctx, node, "%s%sinvalid duration %s: %s", nz(what), pfx(what),
				cy_quote(node, q, sizeof q), why);
	}
	if (ms < min_ms || ms > max_ms)
		return cy_error(ctx, node, "%s%sduration %s is out of range %s..%s", nz(what),
				pfx(what), cy_quote(node, q, sizeof q),
				duration_format_ms(min_ms, lo, sizeof lo),
				duration_format_ms(max_ms, hi, sizeof hi));
	*out = ms;
	return 0;
}

void strlist_free(struct strlist *list)
{
	for (size_t i = 0; i < list->count; i++)
		free(list->items[i]);
	free(list->items);
	list->items = NULL;
	list->count = 0;
}

int strlist_copy(struct strlist *dst, const struct strlist *src)
{
	dst->items = NULL;
	dst->count = 0;
	if (src->count == 0)
		return 0;
	dst->items = calloc(src->count, sizeof *dst->items);
	if (!dst->items)
		return -1;
	for (size_t i = 0; i < src->count; i++) {
		dst->items[i] = strdup(src->items[i]);
		if (!dst->items[i])
			return -1;
		dst->count++;
	}
	return 0;
}

int cy_get_strlist(const struct cy_ctx *ctx, const struct cy_node *node, const char *what,
		   struct strlist *out)
{
	if (cy_is_null(node))
		return 0;
	if (cy_expect(ctx, node, CY_SEQUENCE, what) < 0)
		return -1;
	if (node->nkids == 0)
		return 0;
	out->items = calloc(node->nkids, sizeof *out->items);
	if (!out->items)
		return out_of_memory(ctx);
	for (size_t i = 0; i < node->nkids; i++) {
		char item[CONFIG_NAME_MAX * 4 + 32];
		snprintf(item, sizeof item, "%s[%zu]", nz(what), i);
		if (cy_get_string(ctx, node->kids[i], item, &out->items[i]) < 0)
			return -1;
		out->count++;
	}
	return 0;
}
