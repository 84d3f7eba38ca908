/*
 * messages.h - the broker protocol's JSON messages (docs/protocol.md):
 * decoding of client messages into a validated struct, encoding of server
 * messages into text.  No I/O and no book access here.
 *
 * A decoded message either is complete and well-typed, or decoding fails
 * with one ERROR code and a message naming the offending field.
 */
#ifndef ES_MESSAGES_H
#define ES_MESSAGES_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "book/book.h"
#include "execserver/protocol.h"

enum msg_type {
	MSG_WANT = 1,
	MSG_UNWANT,
	MSG_JOB,
	MSG_DECLINE,
	MSG_QUERY,
	MSG_CANCEL,
	MSG_ACK, /* protocol 2 */
};

struct msg_in {
	enum msg_type type;
	char job_id[BOOK_ID_MAX + 1];
	char service[BOOK_NAME_MAX];
	int32_t priority;
	uint64_t token;
	int has_token;            /* JOB, DECLINE: token read (also when
				   * another field failed) */
	struct json_object *job;  /* JOB only; owned by root */
	struct json_object *root; /* free with msg_in_free */
};

/* Decodes one text frame of a connection speaking `protocol` (a type of
 * a newer version is unknown_type there, as it was before that version
 * existed).  On failure returns -1 and sets *code (a
 * PROTO_E_* string) and detail (human-readable, names the field); when the
 * message carried a readable job_id it is copied to in->job_id. */
int msg_decode(const char *text, size_t len, int protocol, struct msg_in *in, const char **code,
	       char *detail, size_t detail_len);
/* Always call after msg_decode, whatever it returned. */
void msg_in_free(struct msg_in *in);

/* Encoders return a heap string (free()) or NULL on allocation failure. */
char *msg_encode_offer(const char *job_id, uint64_t token);
/* PROGRESS {job_id, fraction (at most 4 decimals), text (absent when
 * empty)}. */
char *msg_encode_progress(const char *job_id, double fraction, const char *text);
/* ERROR about job_id (NULL: none).  refused: the message it answers
 * (NULL for offer_expired, which answers none): its type when it was read
 * (`refused`) and the token of a JOB or DECLINE (`token`) go with it, so
 * that a client tells which of its messages about the job was refused. */
char *msg_encode_error(const char *code, const char *message, const char *job_id,
		       const struct msg_in *refused);
/* DONE: receipt_done_message (job/receipt.h), around the kept receipt text. */
char *msg_encode_position(const char *job_id, const struct book_position *pos, uint64_t eta_ms,
			  int has_eta);
/* Serializes obj with the settings every message uses (no slashes escaped,
 * compact) and releases obj. */
char *msg_to_text(struct json_object *obj);

/* Tokens travel as 16 lowercase hex digits. */
void msg_token_format(uint64_t token, char out[17]);
int msg_token_parse(const char *text, uint64_t *token);

/* PROTO_E_* for a book result code. */
const char *msg_book_error(enum book_rc rc);
/* The ERROR message text for a book result code, answering `about`. */
const char *msg_book_message(enum book_rc rc, enum msg_type about);

#endif
