/*
 * job.h - running the jobs this handler accepted.
 *
 * A job runs on the handler that received its JOB message, from spawn until
 * its program ended; then its receipt goes into the book
 * (book_job_finished, once per job), which frees the slot and has the DONE
 * delivered to the client's owner connection, on whichever handler, now or
 * after a reconnect within the resume grace.
 */
#ifndef ES_JOB_H
#define ES_JOB_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "book/book.h"
#include "config/addr_rule.h"
#include "config/config.h"

enum job_cancel_reason {
	JOB_CANCEL_REQUESTED = 1, /* CANCEL, or the client's grace ran out */
	JOB_CANCEL_TIMEOUT,       /* timeout_sec elapsed */
	JOB_CANCEL_DRAIN,         /* the instance stopped before the job ended */
};

struct event_base;

/* What job/ needs from the process that runs the jobs (the handler, or a
 * test): job/ includes nothing of handler/ or master/. */
struct job_host {
	struct event_base *base;
	const struct es_config *cfg;       /* stays valid: a reload changes it in place */
	int slot;                          /* this handler's slot (job directory names) */
	int nslots;                        /* handler slots of the instance (janitor) */
	unsigned long long default_nofile; /* RLIMIT_NOFILE of a job without
					    * jobLimits.openFiles (0: leave it) */
	/* the want-book, locked and unlocked (waking whom it mailed) */
	struct book *(*book_lock)(void);
	void (*book_unlock)(void);
	/* whether the host stops (an empty job directory is then not kept for
	 * the next job) */
	int (*draining)(void);
	/* a progress value of a running broker job (docs/progress.md), at
	 * most one per JOB_PROGRESS_INTERVAL_MS, never after its end; NULL:
	 * none are passed on */
	void (*progress)(struct book_ref want, const char *job_id, double fraction,
			 const char *text);
	/* a job ended and is gone (its receipt is in the book, or its body-mode
	 * done ran): the host may have drained */
	void (*job_ended)(void);
};

/* Once, before the first job, after the process set its signal
 * dispositions (spawn_init); the host is copied.  Returns 0 or -1. */
int job_init(const struct job_host *host);

/* Checks a JOB's description against the service's configuration.
 * Returns 0, or -1 with *code (PROTO_E_*) and a message. */
int job_validate(uint32_t service, struct json_object *job, const char **code, char *msg,
		 size_t msglen);

/* job_validate, keeping what it parsed for job_start, so that a job's
 * description is parsed once (twice only where an argument names
 * %jobdir%, whose directory is made when the job starts): the plan, or
 * NULL with *code (PROTO_E_*; PROTO_E_INTERNAL when out of memory) and a
 * message.  The plan keeps a reference to job only in that case.  Free it
 * with job_plan_free, after job_start or instead. */
struct job_plan;
struct job_plan *job_prepare(uint32_t service, struct json_object *job, const char **code,
			     char *msg, size_t msglen);
void job_plan_free(struct job_plan *plan);

/* Starts an accepted (RUNNING in the book) job of plan (job_prepare: the
 * job takes what it needs; the caller still frees the plan).  Whatever
 * happens — even a failure to spawn — exactly one DONE follows.  peer: the
 * address of the broker connection that placed it (its URLs may call back
 * there, see the callback guard), NULL if unknown; client: its client id
 * for the log (jobLog), NULL if unknown. */
void job_start(struct book_ref want, const char *job_id, struct job_plan *plan,
	       const struct ip_addr *peer, const char *client);

/* Body mode (PUT /job of the legacy token transport, handler/legacy.c):
 * runs desc (validated by job_validate) on the slot of the RUNNING legacy
 * token `token`, with stdin and stdout on the caller's streams (job_io.h).
 * When it ends, the token is finished in the book (slot freed) and done
 * is called once, from the event loop (never from inside this call), with
 * the outcome, the receipt JSON (without "stdout": that is the response
 * body) and the output that was never given to the stdout stream (the
 * at most JOB_IO_STDOUT_CAP bytes of a failed run); the job is gone by
 * then.  peer: the client's address (callback guard), or NULL.  Returns
 * the job, or NULL when
 * out of memory (the token was finished, done is not called). */
struct job;
struct job_stream_ops;
typedef void (*job_body_done_fn)(void *ctx, const struct book_outcome *o, const char *receipt,
				 size_t len, const char *unstreamed, size_t unstreamed_len);
struct job *job_start_body(struct book_ref token, uint32_t service, struct json_object *desc,
			   const struct ip_addr *peer, const struct job_stream_ops *streams,
			   job_body_done_fn done, void *ctx);
/* The client of a body-mode job went away: stop it (as CANCEL); done
 * follows. */
void job_body_cancel(struct job *j);

/* SIGTERM to the job's process group, SIGKILL after a grace. */
void job_cancel(struct book_ref want, enum job_cancel_reason why);
void job_stop_all(void);
void job_reap(void);
unsigned job_running_count(void);

#endif
