/*
 * job_io.h - the I/O of one job around its process: input files fetched
 * before the start, standard input streamed from a URL, standard output
 * kept as a prefix and/or streamed to a URL, output files uploaded after a
 * successful run.  Driven by the job runner, on the handler's libevent loop
 * and its transfer loop (transfer.h); no threads, no blocking call (except
 * read(2)/write(2) on the job's regular files).
 *
 * Owns, per job: the parent's ends of the stdin/stdout pipes, an fd on the
 * job directory, the open input/output files of a running phase, the
 * transfers of this job, and a JOB_IO_STDOUT_CAP-byte buffer.  Memory per
 * job is that buffer, a few fixed message buffers and one small record per
 * input/output file, whatever the sizes streamed: a slow consumer of stdout
 * slows the program down (its pipe fills up), a slow program slows the
 * stdin download down (the download pauses).
 *
 * The runner's side, in order:
 *
 *   io = job_io_new(...)                      after job_spec_parse + mkdtemp
 *   job_io_fetch_inputs(io)                -> inputs_done (once)
 *   job_io_child_fds(io, &in, &out)           then spawn with them, close them
 *                                          -> stdin_done (once), stdout_done (once)
 *   job_io_process_ended(io, success)         after reaping the leader
 *   job_io_stdout_close(io)                   (only if the output does not end
 *                                              in time, e.g. the runner's linger)
 *   job_io_upload_outputs(io)              -> outputs_done (once)   if successful
 *   job_io_stdout_prefix(io, ...)             for the receipt
 *   job_io_free(io)
 *
 * Contract:
 *  - every phase that was started (a call above that returned 0) gets
 *    exactly one completion, unless job_io_abort/job_io_free comes first;
 *  - completions run from the event loop only: never from inside a job_io_*
 *    call, never from inside a transfer callback.  Inside a completion the
 *    runner may call anything here, job_io_abort and job_io_free included;
 *  - job_io_abort: nothing is called back afterwards, every transfer is
 *    cancelled, every fd job_io owns is closed, partial input files are
 *    removed.  The stdout prefix stays readable until job_io_free;
 *  - a program never takes a truncated standard input for a complete one:
 *    the stdin pipe is closed (EOF) only after the whole body arrived; when
 *    the download fails, stdin_done reports it with the pipe still open, and
 *    the pipe is closed only by job_io_process_ended/abort/free (the runner
 *    kills the process group in between);
 *  - a consumer of stdout never gets a complete body from a failed run: the
 *    upload is committed only once the output outgrows JOB_IO_STDOUT_CAP
 *    (then streamed, chunked) or the program ended successfully (then the
 *    buffer, with Content-Length).  A streamed upload gets its last chunk
 *    only after job_io_process_ended(io, 1); a failure aborts it (the
 *    consumer sees a body without its final chunk).  A failed program whose
 *    output fits the buffer uploads nothing;
 *  - the process must ignore SIGPIPE (a program that stops reading its
 *    stdin makes the writer get EPIPE).
 *
 * Failure codes (receipt error codes) and retryable:
 *   input_failed, stdin_failed, stdout_failed, output_failed, and
 *   callback_refused in any phase when a guard (job_io_set_guard) refused
 *   the connection (never retryable).  Retryable
 *   when the cause may go away on a retry: a network error (connect, reset,
 *   timeout, stall), HTTP 5xx, 408, 429, a local resource shortage (no
 *   space, no fd, no memory); not retryable: other HTTP statuses (4xx, a
 *   3xx that is not followed), an input over the size cap, an output the
 *   program did not leave as a regular file, a name that exists already.
 *   Messages name the item and the reason: "inputs[2] (frame.png): HTTP
 *   404", "outputs[0] (out.pdf): no such file", "stdin: HTTP 503".
 */
#ifndef ES_JOB_IO_H
#define ES_JOB_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct event_base;
struct transfer_loop;
struct job_spec;
struct job_io;

/* Bytes of standard output kept for the receipt. */
#define JOB_IO_STDOUT_CAP 4000

#define JOB_IO_E_INPUT "input_failed"
#define JOB_IO_E_STDIN "stdin_failed"
#define JOB_IO_E_STDOUT "stdout_failed"
#define JOB_IO_E_OUTPUT "output_failed"
/* Any phase: the callback guard refused every address of a URL. */
#define JOB_IO_E_REFUSED "callback_refused"

struct job_io_result {
	int ok;
	const char *code;    /* NULL when ok, else one of JOB_IO_E_* */
	const char *message; /* "" when ok; valid during the call only */
	int retryable;       /* 0 when ok */
	/* inputs: bytes written to the files; stdin: bytes written to the
	 * pipe; stdout: bytes read from the pipe so far; outputs: bytes
	 * uploaded (of the finished uploads) */
	uint64_t bytes;
};

typedef void (*job_io_done_fn)(void *arg, const struct job_io_result *r);

struct job_io_callbacks {
	job_io_done_fn inputs_done;  /* after job_io_fetch_inputs */
	job_io_done_fn stdin_done;   /* after job_io_child_fds */
	job_io_done_fn stdout_done;  /* after job_io_child_fds */
	job_io_done_fn outputs_done; /* after job_io_upload_outputs */
	void *arg;
};

/*
 * The I/O of the job described by spec (its stdin_url, stdout_url, inputs
 * and outputs; spec must outlive io) in the directory jobdir.
 * input_max_bytes caps each input file (0: no cap).  cb is copied; a NULL
 * callback is simply not called.  Returns NULL with errno set (ENOMEM, or
 * why jobdir cannot be opened).
 */
struct job_io *job_io_new(struct event_base *base, struct transfer_loop *loop,
			  const struct job_spec *spec, const char *jobdir, uint64_t input_max_bytes,
			  const struct job_io_callbacks *cb);

/*
 * Fetches every input, in parallel, url -> the file name in the job
 * directory (created with O_EXCL|O_NOFOLLOW: an existing name, a symlink
 * included, fails the input).  inputs_done follows once: ok when every file
 * is complete, else the first failure (input_failed); the other downloads
 * are then aborted and every incomplete input file is removed.  With no
 * inputs, inputs_done(ok) follows from the loop.  Returns 0, or -1 with
 * errno EALREADY (called before, or after job_io_abort): no callback.
 */
int job_io_fetch_inputs(struct job_io *io);

/*
 * Creates the stdio pipes for the program and starts its streams.
 * *stdin_fd: the read end of the stdin pipe, or -1 when the job has no
 * stdin URL (give the program /dev/null); *stdout_fd: the write end of the
 * stdout pipe (always a pipe).  Both are close-on-exec, like the parent's
 * ends (spawn's dup2 onto 0/1 clears the flag for the program); the caller
 * closes them right after spawning.  stdin_done follows once: ok when the
 * body went into the pipe and the pipe was closed, when there is no stdin
 * URL, when the program stopped reading (EPIPE) or ended first; else
 * stdin_failed.  stdout_done follows once (see job_io_process_ended).
 * Returns 0, or -1 with errno (EALREADY when called before; pipe or
 * transfer creation failures): nothing was started, no callback.
 */
int job_io_child_fds(struct job_io *io, int *stdin_fd, int *stdout_fd);

/*
 * The program's leader was reaped; success: it exited 0 and the runner
 * counts the run as successful.  Stops the stdin download if it still
 * runs (stdin_done ok: nobody reads it any more) and closes the stdin
 * pipe.  stdout:
 *   - no stdout URL: stdout_done(ok) at EOF (the output is the prefix);
 *   - output <= JOB_IO_STDOUT_CAP: success -> PUT of the buffer with
 *     Content-Length once EOF was read, stdout_done when it ends; failure
 *     -> nothing is uploaded, stdout_done(ok) at EOF;
 *   - output streamed: success -> the final chunk is sent once EOF was
 *     read, stdout_done when the upload ends; failure -> the upload is
 *     aborted at once, stdout_done(stdout_failed, "the program failed: the
 *     upload ... was aborted", not retryable) at EOF: the runner should
 *     report the program's own failure first.
 * A streamed upload that fails while the program runs reports
 * stdout_failed at once (stop the program); the pipe is then still drained
 * so that the program never blocks on it.  Call once.
 */
void job_io_process_ended(struct job_io *io, int success);

/* The runner's linger ran out after the leader was reaped: closes the
 * stdout pipe (a descendant that left the process group keeps it open) and
 * ends the stream -- but only when the pipe is empty: output the program
 * wrote and a slow consumer has not taken yet is never cut.  Returns 0, or
 * -1 when output is still pending (try again later). */
int job_io_stdout_close(struct job_io *io);

/*
 * The first JOB_IO_STDOUT_CAP (or fewer) bytes of standard output, for the
 * receipt: *len bytes (not NUL-terminated), *truncated: the output was
 * longer, *streamed: an upload to the stdout URL was started (its outcome
 * is stdout_done's).  Any pointer may be NULL.  Valid until job_io_free;
 * final once stdout_done was called (or after job_io_abort).
 */
const char *job_io_stdout_prefix(struct job_io *io, size_t *len, int *truncated, int *streamed);

/*
 * Uploads every output, in parallel: the regular file name of the job
 * directory (opened O_NOFOLLOW|O_NONBLOCK: a symlink, FIFO, directory or
 * device is refused, never followed nor waited for) with its size as
 * Content-Length.  All files are opened first: a missing one fails the
 * phase before any upload starts.  outputs_done follows once: ok when every
 * upload succeeded, else the first failure (output_failed), the other
 * uploads aborted.  Returns 0, or -1 with errno EALREADY: no callback.
 */
int job_io_upload_outputs(struct job_io *io);

/*
 * Where stdin comes from and stdout goes.  By default the spec's stdin and
 * stdout URLs (a GET and a PUT on the transfer loop).  Body mode (PUT
 * /job, handler/legacy.c) gives its own streams: the request body and the
 * response.  A stream keeps the contract of a transfer (transfer.h): its
 * sink/source is called, and its done called exactly once, only from the
 * event loop, never from inside one of these calls; after abort nothing is
 * called back.  open_in pushes the body into sink (sink->write may take
 * fewer bytes: then resume is called when it can take more); open_out
 * pulls from src (TRANSFER_PAUSE: resume is called when there is more),
 * size is the body length (-1: unknown, streamed) and the body is
 * complete only when src->read returned 0.  set_error gives the reason a
 * sink/source is about to fail the stream.  A NULL return from an open
 * fails the stream with errno.
 */
struct transfer_sink;
struct transfer_source;
struct job_stream_ops {
	void *(*open_in)(void *ctx, const struct transfer_sink *sink, void *arg);
	void *(*open_out)(void *ctx, const struct transfer_source *src, void *arg, int64_t size);
	void (*resume)(void *ctx, void *stream);
	void (*abort)(void *ctx, void *stream);
	void (*set_error)(void *ctx, void *stream, const char *msg);
};

/* Body mode: stdin and stdout are ops' streams (the job always has both,
 * whatever its spec says).  Before job_io_child_fds; returns 0, or -1 with
 * errno EALREADY. */
int job_io_set_streams(struct job_io *io, const struct job_stream_ops *ops, void *ctx);

/*
 * The callback guard: fn(arg, url_host, sa, len) is asked for every
 * address a transfer of this job is about to connect to, with the host of
 * the URL as job_spec recorded it; 1 allows, 0 refuses.  Set it before the
 * first phase starts; without one every address is allowed.
 */
typedef int (*job_io_guard_fn)(void *arg, const char *url_host, const struct sockaddr *sa,
			       socklen_t len);
void job_io_set_guard(struct job_io *io, job_io_guard_fn fn, void *arg);

/* Cancels everything; no callback runs afterwards.  Idempotent. */
void job_io_abort(struct job_io *io);

/* job_io_abort and frees io; NULL is fine.  Also from inside a callback. */
void job_io_free(struct job_io *io);

#endif
