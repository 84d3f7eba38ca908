/*
 * progress.h - the queue-position line execctl shows on a terminal while a
 * job waits for a slot: "3 of 4 slots busy, 7 ahead, about 2 min".  Pure
 * formatting (no I/O), so the unit tests pin the wording.
 *
 * Words: "busy" counts slots of the waitgroup in use (any service's jobs,
 * offers, legacy tokens); "running" is kept for jobs (execctl position's
 * rows).  The position is the hard number, the time a hint, rounded
 * coarsely; "time unknown" when the server cannot tell (eta_ms < 0).
 * Once the job runs, the line shows what its program reports instead
 * (progress_running).
 */
#ifndef ES_CLI_PROGRESS_H
#define ES_CLI_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

/* "about 40 s", "about 2 min", "about 3 h"; "" when eta_ms < 0. */
void progress_eta(char *buf, size_t len, int64_t eta_ms);

/* "3 of 4 slots busy, 7 ahead, about 2 min"; "... time unknown" without an
 * ETA; "3 slots busy, ..." when capacity <= 0 (not known). */
void progress_line(char *buf, size_t len, int64_t busy, int64_t capacity, int64_t ahead,
		   int64_t eta_ms);

/* The running job's own progress (exc_job_on_progress): "running: 42%"
 * and, with a text, "running: 42% frame 12 of 24" (the text cut to 100
 * bytes on a character boundary).  The percentage is rounded down, so
 * 100% means the program said it was done. */
void progress_running(char *buf, size_t len, double fraction, const char *text);

#endif
