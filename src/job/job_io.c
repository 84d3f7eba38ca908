/*
 * job_io.c - see job_io.h.
 *
 * Owns, per job: one record per phase (inputs, stdin, stdout, outputs)
 * with its completion waiting to be delivered, the parent's pipe ends and
 * their events, an O_DIRECTORY fd on the job directory, the stdout prefix
 * buffer, and during the file phases one struct xfile per file.
 *
 * Invariants:
 *  - completions are queued by report() and delivered by report_cb, an
 *    event of our own made active (event_active: it runs later in the
 *    same loop turn, without another epoll_wait): never from inside a
 *    job_io_* call or a transfer callback, one per event run (so that a
 *    callback that frees io cannot be followed by another), and nothing
 *    touches io after a callback returns;
 *  - a phase reports once: report() only acts on a P_RUNNING phase;
 *  - the stdin pipe is closed (EOF for the program) only after a complete
 *    download, when the program stopped reading (EPIPE), or by
 *    process_ended/abort/free; never after a failed download;
 *  - stdout: the pipe has one reader at a time: out_read_cb in O_BUFFER
 *    and O_DISCARD, the PUT's source in O_STREAM (out_read_cb then only
 *    resumes the PUT).  A streamed PUT ends its body (returns 0 from the
 *    source) only when EOF was read and the process ended successfully;
 *  - nothing is held for stdout but out_buf (the prefix, given to the PUT
 *    first) and one byte (out_extra, read to learn that the output
 *    outgrows the buffer): every other byte goes from the pipe straight
 *    into curl's upload buffer, or is discarded.
 */
#include "autoconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <event2/event.h>

#include "job/job_io.h"
#include "job/job_spec.h"
#include "job/transfer.h"

#define MSG_MAX 768
#define DISCARD_CHUNK 16384

enum phase {
	PH_INPUTS,
	PH_STDIN,
	PH_STDOUT,
	PH_OUTPUTS,
	PH_COUNT
};
enum pstate {
	P_IDLE,
	P_RUNNING,
	P_PENDING,
	P_DONE
};

struct phase_rec {
	enum pstate state;
	int ok, retryable;
	const char *code;
	uint64_t bytes;
	/* its message: the job_io's ph_msg */
};

/* What the guard of one transfer needs: its job and its URL's host. */
struct guard_ctx {
	struct job_io *io;
	const char *host;
};

/* One input (download into a file) or output (upload of a file). */
struct xfile {
	struct job_io *io;
	struct guard_ctx guard;
	size_t idx;
	int fd;
	struct transfer *t;
	uint64_t n;                 /* bytes written (input) or read (output) */
	uint64_t size;              /* output: its size when opened */
	int created;                /* input: we created the file */
	int complete;               /* its transfer succeeded */
	int local, local_retryable; /* our side failed the transfer */
};

enum out_mode {
	O_BUFFER,  /* reading into the prefix; beyond it: commit or discard */
	O_STREAM,  /* chunked PUT running; its source reads the pipe */
	O_SMALL,   /* PUT of the buffer with Content-Length running */
	O_DISCARD, /* no upload (any more): drain the pipe until EOF */
	O_DONE,    /* nothing left to do */
};

struct job_io {
	struct event_base *base;
	struct transfer_loop *loop;
	const struct job_spec *spec;
	struct job_io_callbacks cb;
	uint64_t input_max;
	int dirfd;
	int aborted;
	/* where stdin comes from and stdout goes: the spec's URLs, or the
	 * streams given by job_io_set_streams (body mode) */
	const struct job_stream_ops *streams;
	void *streams_ctx;
	int has_in, has_out;
	int proc;                 /* 0: running, 1: success, -1: failure */
	job_io_guard_fn guard_fn; /* NULL: no callback guard */
	void *guard_arg;
	struct guard_ctx in_guard, out_guard;
	struct event *report_ev;
	struct phase_rec ph[PH_COUNT];

	/* inputs / outputs */
	struct xfile *files[2]; /* [0] inputs, [1] outputs */
	size_t files_left[2];
	uint64_t files_bytes[2];

	/* stdin */
	int fds_made;
	int in_fd;           /* parent's write end, or -1 */
	struct event *in_ev; /* EV_WRITE: resume the download */
	void *in_t;          /* the stdin stream (a transfer for a URL) */
	uint64_t in_bytes;
	int in_reader_gone, in_local, in_local_retryable;

	/* stdout */
	int out_fd;           /* parent's read end, or -1 */
	struct event *out_ev; /* EV_READ|EV_PERSIST */
	enum out_mode out_mode;
	void *out_t;      /* the stdout stream (a transfer for a URL) */
	int out_eof;      /* EOF read, or job_io_stdout_close */
	int out_streamed; /* a PUT was started */
	int out_have_extra;
	char out_extra;
	int out_failed_after_commit; /* the process failed: report at EOF */
	int out_local, out_local_retryable;
	size_t out_put_off; /* bytes of out_buf given to the PUT */
	uint64_t out_total; /* bytes read from the pipe */
	uint64_t out_sent;  /* bytes given to the PUT */
	size_t out_len;

	/* Last, and not zeroed by job_io_new (7 KiB of a record made per job):
	 * each byte is written before it is read (a phase's message by
	 * report, out_buf up to out_len by the reads of stdout). */
	char ph_msg[PH_COUNT][MSG_MAX];
	char out_buf[JOB_IO_STDOUT_CAP];
};

/* ---- completions --------------------------------------------------------- */

static void report_cb(evutil_socket_t fd, short what, void *arg)
{
	struct job_io *io = arg;
	static const enum phase order[PH_COUNT] = { PH_INPUTS, PH_STDIN, PH_STDOUT, PH_OUTPUTS };
	char msg[MSG_MAX];

	for (int k = 0; k < PH_COUNT; k++) {
		struct phase_rec *p = &io->ph[order[k]];
		struct job_io_result r;
		job_io_done_fn fn;
		void *cbarg = io->cb.arg;

		if (p->state != P_PENDING)
			continue;
		p->state = P_DONE;
		memcpy(msg, io->ph_msg[order[k]], sizeof msg);
		r.ok = p->ok;
		r.code = p->ok ? NULL : p->code;
		r.message = msg;
		r.retryable = p->ok ? 0 : p->retryable;
		r.bytes = p->bytes;
		switch (order[k]) {
		case PH_INPUTS: fn = io->cb.inputs_done; break;
		case PH_STDIN: fn = io->cb.stdin_done; break;
		case PH_STDOUT: fn = io->cb.stdout_done; break;
		default: fn = io->cb.outputs_done; break;
		}
		for (int j = k + 1; j < PH_COUNT; j++)
			if (io->ph[order[j]].state == P_PENDING) {
				event_active(io->report_ev, EV_TIMEOUT, 1);
				break;
			}
		/* last: the callback may free io */
		if (fn)
			fn(cbarg, &r);
		return;
	}
}

/* Queues the completion of phase ph (only once, only while it runs). */
__attribute__((format(printf, 7, 8))) static void report(struct job_io *io, enum phase ph, int ok,
							 const char *code, int retryable,
							 uint64_t bytes, const char *fmt, ...)
{
	struct phase_rec *p = &io->ph[ph];
	va_list ap;

	if (io->aborted || p->state != P_RUNNING)
		return;
	p->state = P_PENDING;
	p->ok = ok;
	p->code = code;
	p->retryable = retryable;
	p->bytes = bytes;
	va_start(ap, fmt);
	vsnprintf(io->ph_msg[ph], sizeof io->ph_msg[ph], fmt, ap);
	va_end(ap);
	event_active(io->report_ev, EV_TIMEOUT, 1);
}

/* ---- failure classification ---------------------------------------------- */

/* Local failures that another try (here later, or elsewhere) may not meet. */
static int resource_errno(int e)
{
	return e == ENOSPC || e == EDQUOT || e == EMFILE || e == ENFILE || e == ENOMEM ||
	       e == EIO || e == EAGAIN || e == EINTR;
}

static int retryable_status(long s)
{
	return s >= 500 || s == 408 || s == 429;
}

/* The reason a transfer failed, and whether it is retryable. */
static int describe(const struct transfer_result *r, int local, int local_retryable, char *reason,
		    size_t len)
{
	long s = r->http_status;

	if (r->refused) {
		snprintf(reason, len, "%s", r->error);
		return 0;
	}
	if (local) {
		snprintf(reason, len, "%s", r->error && r->error[0] ? r->error : "local failure");
		return local_retryable;
	}
	if (s >= 300) {
		snprintf(reason, len, "HTTP %ld%s", s,
			 s <= 399 ? " (redirects are not followed)" : "");
		return retryable_status(s);
	}
	snprintf(reason, len, "%s", r->error && r->error[0] ? r->error : "transfer failed");
	switch (r->curl_code) {
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_URL_MALFORMAT:
	case CURLE_NOT_BUILT_IN:
	case CURLE_FILESIZE_EXCEEDED: return 0;
	default: return 1; /* the network: connect, reset, timeout, stall, TLS */
	}
}

/* ---- the streams: URLs (transfers) or the caller's ----------------------------- */

static int guard_transfer(struct job_io *io, struct transfer *t, struct guard_ctx *g,
			  const char *host);

/* The URL streams carry the callback guard like the file transfers. */
static void *url_open_in(void *ctx, const struct transfer_sink *sink, void *arg)
{
	struct job_io *io = ctx;
	struct transfer *t = transfer_get(io->loop, io->spec->stdin_url, sink, arg);
	if (t && guard_transfer(io, t, &io->in_guard, io->spec->stdin_host) != 0)
		return NULL;
	return t;
}

static void *url_open_out(void *ctx, const struct transfer_source *src, void *arg, int64_t size)
{
	struct job_io *io = ctx;
	struct transfer *t = transfer_put(io->loop, io->spec->stdout_url, src, arg, size);
	if (t && guard_transfer(io, t, &io->out_guard, io->spec->stdout_host) != 0)
		return NULL;
	return t;
}

static void url_resume(void *ctx, void *h)
{
	(void)ctx;
	transfer_resume(h);
}
static void url_abort(void *ctx, void *h)
{
	(void)ctx;
	transfer_abort(h);
}
static void url_set_error(void *ctx, void *h, const char *msg)
{
	(void)ctx;
	transfer_set_error(h, "%s", msg);
}

static const struct job_stream_ops url_streams = {
	url_open_in, url_open_out, url_resume, url_abort, url_set_error,
};

static void st_resume(struct job_io *io, void *h)
{
	io->streams->resume(io->streams_ctx, h);
}
static void st_abort(struct job_io *io, void *h)
{
	io->streams->abort(io->streams_ctx, h);
}
__attribute__((format(printf, 3, 4))) static void st_error(struct job_io *io, void *h,
							   const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	io->streams->set_error(io->streams_ctx, h, msg);
}

int job_io_set_streams(struct job_io *io, const struct job_stream_ops *ops, void *ctx)
{
	if (io->fds_made || io->aborted || !ops) {
		errno = EALREADY;
		return -1;
	}
	io->streams = ops;
	io->streams_ctx = ctx;
	io->has_in = io->has_out = 1;
	return 0;
}

/* ---- creation, abort, free -------------------------------------------------- */

struct job_io *job_io_new(struct event_base *base, struct transfer_loop *loop,
			  const struct job_spec *spec, const char *jobdir, uint64_t input_max_bytes,
			  const struct job_io_callbacks *cb)
{
	struct job_io *io;
	int e;

	if (base == NULL || loop == NULL || spec == NULL || jobdir == NULL) {
		errno = EINVAL;
		return NULL;
	}
	io = malloc(sizeof *io);
	if (io == NULL)
		return NULL;
	memset(io, 0, offsetof(struct job_io, ph_msg));
	io->base = base;
	io->loop = loop;
	io->spec = spec;
	if (cb)
		io->cb = *cb;
	io->input_max = input_max_bytes;
	io->in_fd = io->out_fd = -1;
	io->streams = &url_streams;
	io->streams_ctx = io;
	io->has_in = spec->stdin_url != NULL;
	io->has_out = spec->stdout_url != NULL;
	/* the directory is only opened for files to fetch or upload */
	io->dirfd = -1;
	if ((spec->ninputs || spec->noutputs) &&
	    (io->dirfd = open(jobdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		e = errno;
		free(io);
		errno = e;
		return NULL;
	}
	io->report_ev = evtimer_new(base, report_cb, io);
	if (io->report_ev == NULL) {
		if (io->dirfd >= 0)
			close(io->dirfd);
		free(io);
		errno = ENOMEM;
		return NULL;
	}
	return io;
}

static const struct job_file *spec_files(const struct job_io *io, int which, size_t *n)
{
	*n = which ? io->spec->noutputs : io->spec->ninputs;
	return which ? io->spec->outputs : io->spec->inputs;
}

/* Ends a file phase: aborts what still runs, closes every file, removes
 * the incomplete inputs, frees the records. */
static void files_end(struct job_io *io, int which)
{
	struct xfile *fs = io->files[which];
	const struct job_file *jf;
	size_t n;

	if (fs == NULL)
		return;
	jf = spec_files(io, which, &n);
	for (size_t i = 0; i < n; i++) {
		struct xfile *f = &fs[i];

		if (f->t) {
			transfer_abort(f->t);
			f->t = NULL;
		}
		if (f->fd >= 0) {
			close(f->fd);
			f->fd = -1;
		}
		if (which == 0 && f->created && !f->complete)
			unlinkat(io->dirfd, jf[i].name, 0);
	}
	free(fs);
	io->files[which] = NULL;
}

static void close_in(struct job_io *io)
{
	if (io->in_ev)
		event_del(io->in_ev);
	if (io->in_fd >= 0) {
		close(io->in_fd);
		io->in_fd = -1;
	}
}

static void close_out(struct job_io *io)
{
	if (io->out_ev)
		event_del(io->out_ev);
	if (io->out_fd >= 0) {
		close(io->out_fd);
		io->out_fd = -1;
	}
}

void job_io_abort(struct job_io *io)
{
	if (io == NULL || io->aborted)
		return;
	io->aborted = 1;
	event_del(io->report_ev);
	for (int i = 0; i < PH_COUNT; i++)
		if (io->ph[i].state != P_IDLE)
			io->ph[i].state = P_DONE;
	files_end(io, 0);
	files_end(io, 1);
	if (io->in_t) {
		st_abort(io, io->in_t);
		io->in_t = NULL;
	}
	close_in(io);
	if (io->out_t) {
		st_abort(io, io->out_t);
		io->out_t = NULL;
	}
	close_out(io);
	io->out_mode = O_DONE;
}

void job_io_free(struct job_io *io)
{
	if (io == NULL)
		return;
	job_io_abort(io);
	event_free(io->report_ev);
	if (io->in_ev)
		event_free(io->in_ev);
	if (io->out_ev)
		event_free(io->out_ev);
	if (io->dirfd >= 0)
		close(io->dirfd);
	free(io);
}

/* ---- input and output files ------------------------------------------------ */

static const char *phase_word(int which)
{
	return which ? "outputs" : "inputs";
}

/* Fails file phase `which` because of file i (reason already formatted);
 * code NULL: the phase's own. */
static void files_fail_as(struct job_io *io, int which, size_t i, int retryable, const char *reason,
			  const char *code)
{
	size_t n;
	const struct job_file *jf = spec_files(io, which, &n);
	uint64_t bytes = io->files_bytes[which];

	if (!code)
		code = which ? JOB_IO_E_OUTPUT : JOB_IO_E_INPUT;
	files_end(io, which);
	report(io, which ? PH_OUTPUTS : PH_INPUTS, 0, code, retryable, bytes, "%s[%zu] (%s): %s",
	       phase_word(which), i, jf[i].name, reason);
}

static void files_fail(struct job_io *io, int which, size_t i, int retryable, const char *reason)
{
	files_fail_as(io, which, i, retryable, reason, NULL);
}

/* ---- the callback guard ---------------------------------------------------- */

static int guard_cb(void *arg, const struct sockaddr *sa, socklen_t len)
{
	const struct guard_ctx *g = arg;

	return g->io->guard_fn(g->io->guard_arg, g->host, sa, len);
}

void job_io_set_guard(struct job_io *io, job_io_guard_fn fn, void *arg)
{
	io->guard_fn = fn;
	io->guard_arg = arg;
}

/* Puts the guard (if any) on a transfer just created.  -1 (errno set) when
 * it could not be set: the caller fails the transfer's phase. */
static int guard_transfer(struct job_io *io, struct transfer *t, struct guard_ctx *g,
			  const char *host)
{
	g->io = io;
	g->host = host;
	if (!io->guard_fn || transfer_set_guard(t, guard_cb, g) == 0)
		return 0;
	transfer_abort(t);
	errno = ENOMEM;
	return -1;
}

static void file_done(struct xfile *f, int which, const struct transfer_result *r)
{
	struct job_io *io = f->io;
	char reason[512];
	int ok = r->ok, retryable;

	f->t = NULL;
	if (f->fd >= 0) {
		int rc = close(f->fd), e = errno;

		f->fd = -1;
		if (rc != 0 && ok && which == 0) {
			/* the data may not have reached the file */
			snprintf(reason, sizeof reason, "close: %s", strerror(e));
			files_fail(io, which, f->idx, resource_errno(e), reason);
			return;
		}
	}
	if (ok) {
		f->complete = 1;
		io->files_bytes[which] += f->n;
		if (--io->files_left[which] == 0) {
			files_end(io, which);
			report(io, which ? PH_OUTPUTS : PH_INPUTS, 1, NULL, 0,
			       io->files_bytes[which], "%s", "");
		}
		return;
	}
	retryable = describe(r, f->local, f->local_retryable, reason, sizeof reason);
	files_fail_as(io, which, f->idx, retryable, reason, r->refused ? JOB_IO_E_REFUSED : NULL);
}

static size_t input_write(void *arg, const char *data, size_t len)
{
	struct xfile *f = arg;
	struct job_io *io = f->io;

	if (io->input_max && (f->n + len > io->input_max || f->n + len < f->n)) {
		f->local = 1;
		f->local_retryable = 0;
		transfer_set_error(f->t, "larger than %llu bytes",
				   (unsigned long long)io->input_max);
		return TRANSFER_SINK_ERROR;
	}
	for (size_t off = 0; off < len;) {
		ssize_t w = write(f->fd, data + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int e = w < 0 ? errno : EIO;

			f->local = 1;
			f->local_retryable = resource_errno(e);
			transfer_set_error(f->t, "write: %s", strerror(e));
			return TRANSFER_SINK_ERROR;
		}
		off += (size_t)w;
	}
	f->n += len;
	return len;
}

static void input_done(void *arg, const struct transfer_result *r)
{
	file_done(arg, 0, r);
}

static ssize_t output_read(void *arg, char *buf, size_t cap)
{
	struct xfile *f = arg;

	for (;;) {
		ssize_t r = read(f->fd, buf, cap);

		if (r >= 0) {
			f->n += (uint64_t)r;
			return r;
		}
		if (errno != EINTR) {
			f->local = 1;
			f->local_retryable = resource_errno(errno);
			transfer_set_error(f->t, "read: %s", strerror(errno));
			return TRANSFER_ERROR;
		}
	}
}

static void output_done(void *arg, const struct transfer_result *r)
{
	file_done(arg, 1, r);
}

/* job_spec validated the names; checked again: nothing but a plain name
 * in the job directory is ever opened. */
static int plain_name(const char *s)
{
	return s && s[0] && strchr(s, '/') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static int files_start(struct job_io *io, int which)
{
	static const struct transfer_sink sink = { input_write, input_done };
	static const struct transfer_source src = { output_read, output_done };
	enum phase ph = which ? PH_OUTPUTS : PH_INPUTS;
	char reason[512];
	const struct job_file *jf;
	struct xfile *fs;
	size_t n;

	if (io->aborted || io->ph[ph].state != P_IDLE) {
		errno = EALREADY;
		return -1;
	}
	io->ph[ph].state = P_RUNNING;
	jf = spec_files(io, which, &n);
	if (n == 0) {
		report(io, ph, 1, NULL, 0, 0, "%s", "");
		return 0;
	}
	fs = calloc(n, sizeof *fs);
	if (fs == NULL) {
		report(io, ph, 0, which ? JOB_IO_E_OUTPUT : JOB_IO_E_INPUT, 1, 0,
		       "%s: out of memory", phase_word(which));
		return 0;
	}
	io->files[which] = fs;
	io->files_left[which] = n;
	io->files_bytes[which] = 0;
	for (size_t i = 0; i < n; i++) {
		fs[i].io = io;
		fs[i].idx = i;
		fs[i].fd = -1;
	}
	/* every file first: a local failure starts no transfer at all */
	for (size_t i = 0; i < n; i++) {
		struct xfile *f = &fs[i];
		struct stat st;
		int e;

		if (!plain_name(jf[i].name)) {
			files_fail(io, which, i, 0, "not a plain file name");
			return 0;
		}
		if (which == 0)
			f->fd = openat(io->dirfd, jf[i].name,
				       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC |
					       O_NOCTTY,
				       0644);
		else /* O_NONBLOCK: a FIFO must not make us wait for a writer */
			f->fd = openat(io->dirfd, jf[i].name,
				       O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
		if (f->fd < 0) {
			e = errno;
			if (which == 0 && e == EEXIST)
				snprintf(reason, sizeof reason,
					 "cannot create the file: it exists "
					 "already (never overwritten or followed)");
			else if (which == 0)
				snprintf(reason, sizeof reason, "cannot create the file: %s",
					 strerror(e));
			else if (e == ENOENT)
				snprintf(reason, sizeof reason, "no such file");
			else if (e == ELOOP)
				snprintf(reason, sizeof reason, "a symbolic link (not followed)");
			else
				snprintf(reason, sizeof reason, "cannot open: %s", strerror(e));
			files_fail(io, which, i, resource_errno(e), reason);
			return 0;
		}
		f->created = which == 0;
		if (which == 1) {
			if (fstat(f->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
				files_fail(io, which, i, 0, "not a regular file");
				return 0;
			}
			f->size = (uint64_t)st.st_size;
		}
	}
	for (size_t i = 0; i < n; i++) {
		struct xfile *f = &fs[i];

		if (which == 0)
			f->t = transfer_get(io->loop, jf[i].url, &sink, f);
		else
			f->t = transfer_put(io->loop, jf[i].url, &src, f, (int64_t)f->size);
		if (f->t && guard_transfer(io, f->t, &f->guard, jf[i].host) != 0)
			f->t = NULL;
		if (f->t == NULL) {
			int e = errno;

			snprintf(reason, sizeof reason, "cannot start the transfer: %s",
				 strerror(e));
			files_fail(io, which, i, resource_errno(e), reason);
			return 0;
		}
	}
	return 0;
}

int job_io_fetch_inputs(struct job_io *io)
{
	return files_start(io, 0);
}

int job_io_upload_outputs(struct job_io *io)
{
	return files_start(io, 1);
}

/* ---- stdin ------------------------------------------------------------------ */

static void in_ready(evutil_socket_t fd, short what, void *arg)
{
	struct job_io *io = arg;

	if (io->in_t)
		st_resume(io, io->in_t);
}

static size_t in_write(void *arg, const char *data, size_t len)
{
	struct job_io *io = arg;

	for (;;) {
		ssize_t w = write(io->in_fd, data, len);

		if (w >= 0) {
			if ((size_t)w < len)
				event_add(io->in_ev, NULL); /* the rest when writable */
			io->in_bytes += (uint64_t)w;
			return (size_t)w;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			event_add(io->in_ev, NULL);
			return 0;
		}
		if (errno == EPIPE) {
			/* the program closed its stdin (or ended): its choice */
			io->in_reader_gone = 1;
			st_error(io, io->in_t, "the program stopped reading its input");
			return TRANSFER_SINK_ERROR;
		}
		io->in_local = 1;
		io->in_local_retryable = resource_errno(errno);
		st_error(io, io->in_t, "write to the program: %s", strerror(errno));
		return TRANSFER_SINK_ERROR;
	}
}

static void in_done(void *arg, const struct transfer_result *r)
{
	struct job_io *io = arg;
	char reason[512];
	int retryable;

	io->in_t = NULL;
	if (io->in_ev)
		event_del(io->in_ev);
	if (r->ok || io->in_reader_gone) {
		close_in(io); /* EOF: the whole body is in the pipe */
		report(io, PH_STDIN, 1, NULL, 0, io->in_bytes, "%s", "");
		return;
	}
	/* The pipe stays open: the program must not take what it got for the
	 * whole input.  The runner stops it; process_ended closes the pipe. */
	retryable = describe(r, io->in_local, io->in_local_retryable, reason, sizeof reason);
	report(io, PH_STDIN, 0, r->refused ? JOB_IO_E_REFUSED : JOB_IO_E_STDIN, retryable,
	       io->in_bytes,
	       "stdin: %s (after %llu "
	       "bytes)",
	       reason, (unsigned long long)io->in_bytes);
}

/* ---- stdout ----------------------------------------------------------------- */

static void out_put_done(void *arg, const struct transfer_result *r);
static ssize_t out_src_read(void *arg, char *buf, size_t cap);

static const struct transfer_source out_src = { out_src_read, out_put_done };

static void out_report_ok(struct job_io *io)
{
	io->out_mode = O_DONE;
	report(io, PH_STDOUT, 1, NULL, 0, io->out_total, "%s", "");
}

static void out_report_aborted(struct job_io *io)
{
	io->out_mode = O_DONE;
	report(io, PH_STDOUT, 0, JOB_IO_E_STDOUT, 0, io->out_total,
	       "stdout: the program failed: the upload was aborted after %llu bytes",
	       (unsigned long long)io->out_sent);
}

/* Not uploading (any more): read the pipe until EOF, discarding. */
static void out_discard(struct job_io *io)
{
	io->out_mode = O_DISCARD;
	if (io->out_fd >= 0)
		event_add(io->out_ev, NULL);
}

static void out_start_put(struct job_io *io, int64_t size)
{
	io->out_streamed = 1;
	io->out_put_off = 0;
	io->out_mode = size < 0 ? O_STREAM : O_SMALL;
	io->out_t = io->streams->open_out(io->streams_ctx, &out_src, io, size);
	if (io->out_t == NULL) {
		int e = errno;

		io->out_streamed = 0;
		report(io, PH_STDOUT, 0, JOB_IO_E_STDOUT, resource_errno(e), io->out_total,
		       "stdout: cannot start the upload: %s", strerror(e));
		if (io->out_eof)
			io->out_mode = O_DONE;
		else
			out_discard(io);
	}
}

/* EOF (or stdout_close) outside O_STREAM. */
static void out_ended(struct job_io *io)
{
	close_out(io);
	io->out_eof = 1;
	switch (io->out_mode) {
	case O_BUFFER:
		if (!io->has_out || io->proc < 0)
			out_report_ok(io); /* the prefix is the output, or dropped */
		else if (io->proc > 0)
			out_start_put(io, (int64_t)io->out_len);
		/* else: the process decides (job_io_process_ended) */
		break;
	case O_DISCARD:
		if (io->out_failed_after_commit)
			out_report_aborted(io);
		io->out_mode = O_DONE; /* a PUT failure was reported already */
		break;
	default: break;
	}
}

static void out_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct job_io *io = arg;
	char scratch[DISCARD_CHUNK];
	int commit = 0;
	ssize_t r;

	if (io->out_mode == O_STREAM) {
		/* the PUT's source reads; it waits for this */
		event_del(io->out_ev);
		if (io->out_t)
			st_resume(io, io->out_t);
		return;
	}
	if (io->out_len < sizeof io->out_buf) {
		r = read(io->out_fd, io->out_buf + io->out_len, sizeof io->out_buf - io->out_len);
		if (r > 0)
			io->out_len += (size_t)r;
	} else if (io->out_mode == O_BUFFER && io->has_out && io->proc >= 0) {
		/* one byte more than the buffer: the output must be streamed */
		r = read(io->out_fd, &io->out_extra, 1);
		commit = r == 1;
	} else {
		r = read(io->out_fd, scratch, sizeof scratch);
	}
	if (r > 0) {
		io->out_total += (uint64_t)r;
		if (commit) {
			io->out_have_extra = 1;
			event_del(io->out_ev);
			out_start_put(io, -1);
		}
		return;
	}
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (r < 0 && io->out_mode != O_DISCARD) {
		/* a pipe read does not fail; if it did, the output is not whole */
		int e = errno;

		close_out(io);
		io->out_eof = 1;
		io->out_mode = O_DONE;
		report(io, PH_STDOUT, 0, JOB_IO_E_STDOUT, 1, io->out_total, "stdout: read: %s",
		       strerror(e));
		return;
	}
	out_ended(io);
}

static ssize_t out_src_read(void *arg, char *buf, size_t cap)
{
	struct job_io *io = arg;

	if (io->out_put_off < io->out_len) {
		size_t n = io->out_len - io->out_put_off;

		if (n > cap)
			n = cap;
		memcpy(buf, io->out_buf + io->out_put_off, n);
		io->out_put_off += n;
		io->out_sent += n;
		return (ssize_t)n;
	}
	if (io->out_mode == O_SMALL)
		return 0;
	if (io->out_have_extra) {
		buf[0] = io->out_extra;
		io->out_have_extra = 0;
		io->out_sent++;
		return 1;
	}
	while (!io->out_eof) {
		ssize_t r = read(io->out_fd, buf, cap);

		if (r > 0) {
			io->out_total += (uint64_t)r;
			io->out_sent += (uint64_t)r;
			return r;
		}
		if (r == 0) {
			close_out(io);
			io->out_eof = 1;
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			event_add(io->out_ev, NULL);
			return TRANSFER_PAUSE;
		}
		io->out_local = 1;
		io->out_local_retryable = 1;
		st_error(io, io->out_t, "read: %s", strerror(errno));
		return TRANSFER_ERROR;
	}
	/* EOF: the body is complete only if the program succeeded */
	if (io->proc > 0)
		return 0;
	return TRANSFER_PAUSE; /* job_io_process_ended resumes us */
}

static void out_put_done(void *arg, const struct transfer_result *r)
{
	struct job_io *io = arg;
	char reason[512];
	int retryable;

	io->out_t = NULL;
	if (r->ok) {
		out_report_ok(io);
		return;
	}
	retryable = describe(r, io->out_local, io->out_local_retryable, reason, sizeof reason);
	report(io, PH_STDOUT, 0, r->refused ? JOB_IO_E_REFUSED : JOB_IO_E_STDOUT, retryable,
	       io->out_total, "stdout: %s (after %llu bytes)", reason,
	       (unsigned long long)io->out_sent);
	/* reported at once (the runner stops the program); until then the
	 * pipe is drained so that the program does not block on it */
	if (io->out_eof)
		io->out_mode = O_DONE;
	else
		out_discard(io);
}

/* ---- the runner's calls ---------------------------------------------------- */

int job_io_child_fds(struct job_io *io, int *stdin_fd, int *stdout_fd)
{
	static const struct transfer_sink in_sink = { in_write, in_done };
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, e;

	if (io->aborted || io->fds_made) {
		errno = EALREADY;
		return -1;
	}
	if (pipe2(out, O_CLOEXEC) != 0)
		return -1;
	if (fcntl(out[0], F_SETFL, O_NONBLOCK) != 0)
		goto fail;
	io->out_ev = event_new(io->base, out[0], EV_READ | EV_PERSIST, out_read_cb, io);
	if (io->out_ev == NULL) {
		errno = ENOMEM;
		goto fail;
	}
	if (io->has_in) {
		if (pipe2(in, O_CLOEXEC) != 0 || fcntl(in[1], F_SETFL, O_NONBLOCK) != 0)
			goto fail;
		io->in_ev = event_new(io->base, in[1], EV_WRITE, in_ready, io);
		if (io->in_ev == NULL) {
			errno = ENOMEM;
			goto fail;
		}
		io->in_fd = in[1];
		io->in_t = io->streams->open_in(io->streams_ctx, &in_sink, io);
		if (io->in_t == NULL)
			goto fail;
	}
	io->out_fd = out[0];
	io->fds_made = 1;
	if (event_add(io->out_ev, NULL) != 0) {
		/* does not fail for a pipe on epoll; be safe anyway */
		e = errno;
		io->fds_made = 0;
		io->out_fd = -1;
		errno = e ? e : ENOMEM;
		goto fail;
	}
	io->ph[PH_STDIN].state = P_RUNNING;
	io->ph[PH_STDOUT].state = P_RUNNING;
	if (!io->has_in)
		report(io, PH_STDIN, 1, NULL, 0, 0, "%s", "");
	*stdin_fd = in[0];
	*stdout_fd = out[1];
	return 0;
fail:
	e = errno;
	if (io->in_t) {
		st_abort(io, io->in_t);
		io->in_t = NULL;
	}
	io->in_fd = -1;
	if (io->in_ev) {
		event_free(io->in_ev);
		io->in_ev = NULL;
	}
	if (io->out_ev) {
		event_free(io->out_ev);
		io->out_ev = NULL;
	}
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (out[i] >= 0)
			close(out[i]);
	}
	errno = e;
	return -1;
}

void job_io_process_ended(struct job_io *io, int success)
{
	if (io->aborted || io->proc)
		return;
	io->proc = success ? 1 : -1;
	if (!io->fds_made)
		return;
	/* stdin: nobody reads it any more */
	if (io->in_t) {
		st_abort(io, io->in_t);
		io->in_t = NULL;
		report(io, PH_STDIN, 1, NULL, 0, io->in_bytes, "%s", "");
	}
	close_in(io);
	switch (io->out_mode) {
	case O_BUFFER:
		if (io->out_eof && io->has_out) {
			if (success)
				out_start_put(io, (int64_t)io->out_len);
			else
				out_report_ok(io); /* a failed run uploads nothing */
		}
		break;
	case O_STREAM:
		if (success) {
			if (io->out_eof && io->out_t)
				st_resume(io, io->out_t); /* the final chunk */
			break;
		}
		/* the consumer must not see a complete body */
		if (io->out_t) {
			st_abort(io, io->out_t);
			io->out_t = NULL;
		}
		io->out_failed_after_commit = 1;
		if (io->out_eof)
			out_report_aborted(io);
		else
			out_discard(io);
		break;
	default: break;
	}
}

int job_io_stdout_close(struct job_io *io)
{
	if (io->aborted || !io->fds_made || io->out_eof)
		return 0;
	/* Output still in the pipe is the program's, held back by a slow
	 * consumer: never cut it.  Only an empty pipe that a stray descendant
	 * keeps open is closed. */
	int pending = 0;
	if (io->out_fd >= 0 && ioctl(io->out_fd, FIONREAD, &pending) == 0 && pending > 0)
		return -1;
	if (io->out_mode == O_STREAM) {
		close_out(io);
		io->out_eof = 1;
		if (io->out_t)
			st_resume(io, io->out_t); /* the source sees the end */
		return 0;
	}
	out_ended(io);
	return 0;
}

const char *job_io_stdout_prefix(struct job_io *io, size_t *len, int *truncated, int *streamed)
{
	if (len)
		*len = io->out_len;
	if (truncated)
		*truncated = io->out_total > io->out_len;
	if (streamed)
		*streamed = io->out_streamed;
	return io->out_buf;
}
