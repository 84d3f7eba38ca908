/*
 * job_impl.h - the inside of exc_job, shared by client_job.c (life of a job:
 * messages, receipts, API), placement.c (where its wants are parked, the
 * retry tick, the verdicts) and job_files.c (its sources and sinks and the
 * JOB's URLs).  Not installed.
 */
#ifndef EXC_JOB_IMPL_H
#define EXC_JOB_IMPL_H

#include "client/client_impl.h"

#include <event2/util.h>

enum jstate {
	J_WAITING,
	J_RUNNING,
	J_SEEKING,
	J_DONE
};
enum copy_state {
	CP_PARKED,
	CP_REFUSED
};

struct copy {
	struct exc_conn *k;
	enum copy_state state;
};

struct jfile {
	struct exc_job *job; /* set when its endpoint is made */
	char *name;
	int is_out;
	struct exc_io io; /* kind, and url (copied) for EXC_IO_URL */
	struct stream *st;
	struct endpoint *ep;
	int finished, ok;
	uint64_t bytes;
	char why[200];
};

struct exc_job {
	exc_client *c;
	struct exc_job *next;
	enum jstate state;
	char id[65];
	char *service;
	int priority;
	struct json_object *payload; /* the caller's job object */
	struct jfile *files;         /* [0] stdin, [1] stdout, then named files */
	size_t nfiles;
	unsigned connect_timeout_sec;
	uint64_t since_ms; /* last placement progress (back-pressure) */
	struct copy *copies;
	size_t ncopies, capcopies;
	struct exc_conn *owner;
	char token[17]; /* the OFFER's token the JOB went with */
	char owner_instance[65];
	struct exc_addr *owner_addr;
	uint64_t seek_since_ms;  /* when it began to be sought */
	uint64_t seek_ms;        /* how long before it ends lost (placement.c, seek_ms) */
	int resumed;             /* the owner is not the connection the JOB went on */
	unsigned resume_queries; /* the library's QUERYs on resume, unanswered */
	int cancel_requested;
	unsigned owner_pending;      /* QUERY/CANCEL sent to the owner since the JOB, unanswered */
	struct exc_conn *stale_conn; /* a refused JOB's connection: its */
	unsigned stale_n;            /* unknown_job answers still to come */
	uint64_t submit_ms;          /* when exc_submit ran (connect timeout) */
	struct event *timer;         /* connect timeout */
	struct event *done_ev;       /* deferred local receipt */
	struct event *start_ev;      /* deferred on_start (exc_job_on_start) */
	exc_start_cb on_start;
	exc_progress_cb on_progress; /* exc_job_on_progress */
	void *progress_arg;
	int start_told; /* the start was announced */
	char local_code[32];
	char local_msg[256];
	int local_retryable;
	struct legacy_job *legacy; /* token polling / legacy PUT (fallback.c) */
	exc_done_cb on_done;
	exc_position_cb on_position;
	void *arg;
};

/* client_job.c */
struct exc_job *job_find(exc_client *c, const char *id);
struct copy *job_find_copy(struct exc_job *j, const struct exc_conn *k);
void job_drop_copy(struct exc_job *j, struct copy *cp);
int job_add_copy(struct exc_job *j, struct exc_conn *k);
/* UNWANT on every parked copy; forgets them. */
void job_unwant_all(struct exc_job *j);
void job_unlink_free(struct exc_job *j);
/* The job left waiting for the first time: on_start is due (deferred to
 * the loop, so that it runs outside the caller's work). */
void job_started(struct exc_job *j);
/* Calls on_done with receipt rj (the server's, or NULL for a local one)
 * and frees the job. */
void job_finish(struct exc_job *j, struct json_object *rj);
/* The instance that ran j cannot say how it ended (what: it no longer
 * knows it, unknown_job after a resume, its receipt dropped or its JOB
 * never arrived; or its DONE had no readable receipt): lost (retryable,
 * "it may have run"), or cancelled when the caller asked for that; never
 * run again. */
void job_outcome_unknown(struct exc_job *j, const char *instance, const char *what);
/* A receipt made by the library; delivered from the loop. */
void job_finish_local(struct exc_job *j, const char *code, int retryable, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* placement.c */
/* A cancel that could not be sent (the instance was not reached while
 * the job was sought): CANCEL goes out when a connection reaches the
 * instance, within a day (the longest resumeGraceSec). */
struct owed_cancel {
	struct owed_cancel *next;
	char instance_id[65];
	char job_id[65];
	uint64_t until_ms;
};
void owed_cancels_free(exc_client *c);
void job_place_on(struct exc_job *j, struct exc_conn *k);
void job_place(struct exc_job *j);
/* The connect timeout (evtimer callback, arg: the job). */
void job_connect_timeout(evutil_socket_t fd, short what, void *arg);

/* job_files.c */
/* Endpoints of the job's files freed (after the job, or a refused JOB). */
void job_free_pipes(struct exc_job *j);
/* The first local stream that failed, or NULL. */
const struct jfile *job_failed_stream(const struct exc_job *j);
/* The JOB's job object; endpoints are bound to local.  body_mode (the
 * legacy PUT): stdin and stdout are the request and response bodies, so
 * only a URL kind of them goes into the object. */
struct json_object *job_build(struct exc_job *j, const struct sockaddr_storage *local,
			      int body_mode);
/* Sets up f from io; -1 with the client's error set. */
int job_file_init(exc_client *c, struct jfile *f, const char *name, int is_out,
		  const struct exc_io *io);
/* 1-max printable ASCII characters. */
int job_id_ok(const char *s, size_t max);
/* A plain file name (no '/', not . or ..). */
int job_name_ok(const char *s);

#endif
