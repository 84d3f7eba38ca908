/*
 * receipt.h - the receipt of a job (the `receipt` of DONE, docs/protocol.md)
 * and the DONE around it: every receipt, whatever ended the job, is built
 * here.  Built as JSON text by the handler that ran the job, kept in the
 * want-book until its DONE goes out, possibly from another handler.  The
 * compact outcome (struct book_outcome) travels with it, so that a receipt
 * the book had no room for can still be answered in a reduced form.
 */
#ifndef ES_RECEIPT_H
#define ES_RECEIPT_H

#include <stddef.h>
#include <stdint.h>

#include "book/book.h"

/* Room for the largest receipt: a 4000-byte stdout prefix and a 1023-byte
 * stderr line, each byte escaped at worst to 6 ("\u00XX"), plus fields. */
#define RECEIPT_MAX_BYTES 32768

/* book_outcome.error values; 0 = none.  Names are the protocol's codes. */
enum job_error_code {
	JOB_ERR_NONE = 0,
	JOB_ERR_EXEC_FAILED,      /* exec_failed */
	JOB_ERR_CANCELLED,        /* cancelled */
	JOB_ERR_TIMEOUT,          /* timeout */
	JOB_ERR_EXEC_STOPPED,     /* exec_stopped (retryable) */
	JOB_ERR_INPUT_FAILED,     /* input_failed: an input file could not be fetched */
	JOB_ERR_STDIN_FAILED,     /* stdin_failed: the in-pipe GET failed */
	JOB_ERR_STDOUT_FAILED,    /* stdout_failed: the out-pipe PUT failed */
	JOB_ERR_OUTPUT_FAILED,    /* output_failed: an output file could not be uploaded */
	JOB_ERR_CALLBACK_REFUSED, /* callback_refused: a URL's address is not allowed */
	JOB_ERR_LOST = 255,       /* exec_lost (retryable): the book's BOOK_ERROR_LOST */
};

/* The protocol name of a code, or NULL for none/unknown. */
const char *receipt_error_name(uint8_t code);

struct receipt_parts {
	const struct book_outcome *outcome;
	const char *error_message; /* with outcome->error */
	const char *stdout_prefix; /* raw bytes; NULL: no "stdout" field */
	size_t stdout_len;
	int stdout_truncated;
	const char *stderr_line; /* raw bytes, may be NULL */
	size_t stderr_len;
};

/* The receipt as JSON text (malloc'ed, NUL-terminated, *len its length),
 * or NULL when out of memory. */
char *receipt_build(const struct receipt_parts *p, size_t *len);
/* A receipt from the compact outcome alone: for a job whose full receipt
 * did not fit in the book's store ("receipt_lost": true), or that never had
 * one (lost with its handler). */
char *receipt_compact(const struct book_outcome *o, size_t *len);
/* The receipt of a job cancelled before it ran: `error` only
 * (docs/protocol.md, DONE). */
char *receipt_cancelled_before_run(size_t *len);
/* The DONE message around a receipt's JSON text: the one encoder of DONE. */
char *receipt_done_message(const char *job_id, const char *receipt_json, size_t len);

#endif
