/*
 * job_progress.h - one job's progress descriptor, read on the handler's
 * event loop (docs/progress.md): the pipe whose write end the program gets
 * as fd 3 (EXECSERVER_PROGRESS_FD), its lines parsed (progress_line.h)
 * and the latest value passed on at most once per
 * JOB_PROGRESS_INTERVAL_MS; a value that comes sooner waits for the
 * interval, replaced by any newer one (only the latest matters).
 *
 * Invariants: memory per job is the struct (the line buffer is bounded);
 * the send callback is never called after job_progress_finish (so never
 * after the job's DONE); a bad line is counted, never fatal; the program
 * closing the descriptor or never writing to it changes nothing.
 */
#ifndef ES_JOB_PROGRESS_H
#define ES_JOB_PROGRESS_H

#include <stdint.h>

#define JOB_PROGRESS_INTERVAL_MS 250 /* at most 4 values a second per job */
/* bytes read per job per interval; beyond it the writer blocks */
#define JOB_PROGRESS_READ_BUDGET (64 * 1024)
#define JOB_PROGRESS_ENV "EXECSERVER_PROGRESS_FD"
/* the entry every job's environment ends with (SPAWN_EXTRA_FD) */
#define JOB_PROGRESS_ENV_ENTRY JOB_PROGRESS_ENV "=3"

struct event_base;
struct job_progress;

typedef void (*job_progress_send_fn)(void *arg, double fraction, const char *text);

/* A new reader and its pipe; *child_fd gets the write end for the spawn
 * (close-on-exec, above 2; the caller closes it once the program has it).
 * send(arg, ...) gets each value passed on.  NULL (errno set) when the
 * pipe or memory is not there. */
struct job_progress *job_progress_new(struct event_base *base, int *child_fd,
				      job_progress_send_fn send, void *arg);
/* The job ended: reads what the pipe still holds, to EAGAIN (a last line
 * without LF counts only after a real EOF: a descendant still holding
 * the write end may be mid-line), sends the latest value not sent yet at
 * once (the one exception to the interval), and stops: no send after
 * this.  Idempotent. */
void job_progress_finish(struct job_progress *p);
/* Lines read so far: good ones, and bad ones (ignored). */
void job_progress_counts(const struct job_progress *p, uint64_t *good, uint64_t *bad);
void job_progress_free(struct job_progress *p);

#endif
