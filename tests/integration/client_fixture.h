/*
 * client_fixture.h - helpers for the libexecclient tests: a client with
 * fast timers on a private event_base, receipts captured into plain
 * structs, and an event loop run until a condition holds or a deadline.
 */
#ifndef ES_CLIENT_FIXTURE_H
#define ES_CLIENT_FIXTURE_H

#include <stdint.h>

#include <execserver/client.h>

#include "harness.h"

struct fx_done {
	int called;
	int ok, exited, exit_code, retryable;
	char error_code[40];
	char error_message[300];
	char instance_id[65];
	char stdout_text[4200];
	uint64_t stdin_bytes, stdout_bytes;
	/* the last POSITION */
	int pos_count;
	char pos_state[16];
	long long pos_running, pos_ahead, pos_capacity;
};

extern struct event_base *fx_base;

/* Options with short timers (tick 200 ms, growth every 300 ms). */
void fx_options(struct exc_options *o);
/* A client on fx_base with o (NULL: fx_options) and one address per
 * daemon ("ws://127.0.0.1:port" + suffix). */
exc_client *fx_client(const struct exc_options *o, struct es_daemon *d, int nd, const char *suffix);
/* The on_done / on_position callbacks: arg is a struct fx_done. */
void fx_on_done(exc_job *j, const struct exc_receipt *r, void *arg);
void fx_on_position(exc_job *j, const struct exc_position *p, void *arg);
/* A spec for service running job_json, done into d. */
void fx_spec(struct exc_job_spec *s, const char *service, const char *job_json, struct fx_done *d);
/* A spec for `cat` in service "tools" (done into d): stdin the n bytes at
 * data, stdout into the caller's out_fd. */
void fx_cat_spec(struct exc_job_spec *s, struct fx_done *d, const unsigned char *data, size_t n,
		 int out_fd);
/* Runs `cp a.txt b.txt` in service "tools" through c, a.txt from a buffer
 * and b.txt into a file in daemon d's directory: asserts that the job ends
 * ok and that the file holds the buffer's bytes. */
void fx_files_job(exc_client *c, const struct es_daemon *d);
/* Asserts that the file at path holds exactly the n bytes at data. */
void fx_expect_file(const char *path, const void *data, size_t n);
/* Frees client c (NULL: none), then stops daemon d and removes its
 * directory. */
void fx_stop(exc_client *c, struct es_daemon *d);
/* Runs the loop until *flag != 0 or timeout_ms; returns *flag. */
int fx_wait(const int *flag, int timeout_ms);
/* Runs the loop until pred(arg) or timeout_ms; returns pred(arg). */
int fx_wait_pred(int (*pred)(void *arg), void *arg, int timeout_ms);
/* Runs the loop for ms. */
void fx_spin(int ms);
/* instance_id of a daemon (from /status) into out[65]. */
void fx_instance_id(const struct es_daemon *d, char out[65]);
/* The log lines of the last client made with fx_options, searchable. */
const char *fx_log_find(const char *needle);
void fx_log_clear(void);
/* Leaves the process no free descriptor: lowers RLIMIT_NOFILE's soft
 * limit to just above the highest open one and fills every hole below
 * with /dev/null, so that each socket() or open() fails with EMFILE at
 * once.  Returns the descriptors taken, or -1.  fx_fds_release undoes it. */
int fx_fds_exhaust(void);
void fx_fds_release(void);

#endif
