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

#include <stdint.h>

#include <json-c/json.h>

#include "book/book.h"
#include "common/addr_rule.h"

enum job_cancel_reason {
	JOB_CANCEL_REQUESTED = 1, /* CANCEL, or the client's grace ran out */
	JOB_CANCEL_TIMEOUT,       /* timeout_sec elapsed */
	JOB_CANCEL_DRAIN,         /* the instance stopped before the job ended */
};

int job_init(void);

/* Checks a JOB's description against the service's configuration.
 * Returns 0, or -1 with *code (PROTO_E_*) and a message. */
int job_validate(uint32_t service, struct json_object *job, const char **code, char *msg,
		 size_t msglen);

/* Starts an accepted (RUNNING in the book) job.  Whatever happens — even a
 * failure to spawn — exactly one DONE follows.  peer: the address of the
 * broker connection that placed it (its URLs may call back there, see the
 * callback guard), NULL if unknown. */
void job_start(struct book_ref want, const char *job_id, uint32_t service,
	       struct json_object *job, const struct ip_addr *peer);

/* SIGTERM to the job's process group, SIGKILL after a grace. */
void job_cancel(struct book_ref want, enum job_cancel_reason why);
void job_stop_all(void);
void job_reap(void);
unsigned job_running_count(void);

#endif
