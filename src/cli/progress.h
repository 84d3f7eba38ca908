/*
 * progress.h - the queue-position line execctl shows on a terminal while a
 * job waits for a slot: "3 running, 7 ahead, about 2 min".  Pure
 * formatting (no I/O), so the unit tests pin the wording.
 *
 * The position is the hard number, the time a hint: the ETA is left out
 * when the server has none (eta_ms < 0), and rounded coarsely.
 */
#ifndef ES_CLI_PROGRESS_H
#define ES_CLI_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

/* "about 40 s", "about 2 min", "about 3 h"; "" when eta_ms < 0. */
void progress_eta(char *buf, size_t len, int64_t eta_ms);

/* "3 running, 7 ahead, about 2 min" (", about ..." only with an ETA). */
void progress_line(char *buf, size_t len, int64_t running, int64_t ahead, int64_t eta_ms);

#endif
