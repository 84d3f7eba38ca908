/*
 * job.c - see job.h.
 *
 * Life of a job here (all on the handler's event loop, nothing blocks):
 *   mkdtemp its directory -> fetch inputs (job_io) -> spawn (own process
 *   group, jobLimits; stdin and stdout through job_io, stderr here: its last
 *   non-empty line is kept) -> reap (the group goes with its leader) ->
 *   upload outputs after a success -> build the receipt ->
 *   book_job_finished, which frees the slot and mails the DONE to the
 *   handler of the owner connection.
 * Body mode (job_start_body, the legacy transport's PUT /job) is the
 * same life with two differences: the slot is a legacy token
 * (book_token_*), and stdin/stdout are the caller's streams (job_io's
 * streams instead of URLs); its end goes to the caller's done, not to a
 * DONE through the book.
 * The process part is over when the leader was reaped AND stderr reached
 * EOF AND job_io reported stdin and stdout done (or the linger after the
 * reap ran out), so no output is lost to a race between SIGCHLD and the
 * last read.  The first failure around the process (input, stream, output)
 * is kept for the receipt; a stream failure while the program runs stops
 * it, because it would otherwise work on a truncated input or write into
 * nothing.
 */
#include "autoconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/utf8.h"
#include "execserver/protocol.h"
#include "job/janitor.h"
#include "job/job.h"
#include "job/job_dir.h"
#include "job/job_io.h"
#include "job/job_progress.h"
#include "job/job_spec.h"
#include "job/receipt.h"
#include "job/spawn.h"
#include "job/transfer.h"

#define JOB_STDERR_LINE_CAP 1024
#define JOB_KILL_GRACE_MS 3000
/* After the leader exits, its process group is killed (background children
 * are part of the job); output still in flight may drain for this long
 * before the pipes are closed, in case a descendant left the group. */
#define JOB_LINGER_MS 1000
/* The largest input file fetched by URL. */
#define JOB_INPUT_MAX_BYTES (64ull << 30)

struct job {
	struct job *next, *prev;
	struct book_ref want; /* the want, or in body mode the legacy token */
	/* body mode (PUT /job): the streams and whom to tell the end */
	int is_body;
	const struct job_stream_ops *streams;
	void *body_ctx;
	job_body_done_fn body_done;
	struct event *start_ev;   /* body mode: the deferred start */
	struct json_object *desc; /* body mode: the description until then */
	uint32_t service;
	struct job_spec spec;
	struct job_io *io;
	struct job_progress *progress; /* its progress descriptor, from the spawn */
	pid_t pid;                     /* 0 until spawned */
	uint64_t start_ms;
	int status, reaped;
	enum job_cancel_reason cancelled;
	struct job_dir_seen dir_seen; /* what dir looked like, empty (job_dir.h) */
	struct event *err_ev, *kill_ev, *timeout_ev, *linger_ev;
	int err_fd;
	size_t err_cur_len;
	int spawn_errno;
	int stdin_done, stdout_done, outputs_started, outputs_done, completing;
	int stopped_for_io; /* we stopped the program: a stream failed */
	int lingered;       /* output outlived the leader: a descendant
				     * may still use the directory */
	/* the first failure around the process */
	uint8_t io_error; /* JOB_ERR_* */
	uint8_t io_retryable;
	struct ip_addr peer;          /* of the placing connection (callback guard);
				     * family 0: unknown */
	uint64_t bytes_in, bytes_out; /* inputs and stdin; stdout and outputs */

	/* Last, and not zeroed by job_new (3 KiB of a record made per job):
	 * strings, each set there or written before it is read. */
	char job_id[BOOK_ID_MAX + 1];
	char client[BOOK_ID_MAX + 1]; /* its client's id, "" when unknown */
	char dir[512];
	char err_line[JOB_STDERR_LINE_CAP]; /* last complete non-empty line */
	char err_cur[JOB_STDERR_LINE_CAP];  /* line being read */
	char io_message[256];               /* read only with io_error */
};

static struct job_host host;
static struct job *jobs;
static unsigned njobs;
/* The last reap found this process without any child, and nothing was
 * spawned since: no process a job left behind can be alive (an orphan is
 * adopted only from among our descendants), so may_reuse_dir need not
 * read the list of children. */
static int childless;
static struct transfer_loop *transfers;

static struct event *janitor_ev;

/* Whether a directory name under tempDir/job is a job of ours still
 * running (janitor_sweep's question). */
static int dir_in_use(const char *name)
{
	for (struct job *j = jobs; j; j = j->next) {
		const char *base = strrchr(j->dir, '/');
		if (base && strcmp(base + 1, name) == 0)
			return 1;
	}
	return job_dir_is_spare(name);
}

/* A quarter of janitorFileAge, between 1 s and 10 min. */
static struct timeval janitor_interval(void)
{
	uint64_t ms = (uint64_t)host.cfg->janitor_file_age_ms / 4;
	if (ms < 1000)
		ms = 1000;
	if (ms > 600000)
		ms = 600000;
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
	return tv;
}

static void janitor_cb(evutil_socket_t fd, short what, void *arg)
{
	char path[512];
	snprintf(path, sizeof path, "%s/job", host.cfg->temp_dir);
	unsigned n = janitor_sweep(path, host.slot, host.nslots,
				   (uint64_t)host.cfg->janitor_file_age_ms, clock_wall_ms(),
				   dir_in_use);
	if (n)
		log_info("janitor: removed %u job director%s older than janitorFileAge", n,
			 n == 1 ? "y" : "ies");
	struct timeval tv = janitor_interval();
	evtimer_add(janitor_ev, &tv);
}

int job_init(const struct job_host *h)
{
	host = *h;
	spawn_init();
	janitor_ev = evtimer_new(host.base, janitor_cb, NULL);
	transfers = transfer_loop_new(host.base);
	if (!janitor_ev || !transfers)
		return -1;
	struct timeval tv = janitor_interval();
	evtimer_add(janitor_ev, &tv);
	return 0;
}

unsigned job_running_count(void)
{
	return njobs;
}

static struct job *find_job(struct book_ref want)
{
	for (struct job *j = jobs; j; j = j->next)
		if (!j->is_body && j->want.idx == want.idx && j->want.gen == want.gen)
			return j;
	return NULL;
}

/* A directory name as long as any real one, for validating a JOB before
 * its directory exists (the argv size limit counts the expanded text). */
static void sample_jobdir(char *out, size_t len)
{
	snprintf(out, len, "%s/job/%d-%llu-XXXXXX", host.cfg->temp_dir, BOOK_MAX_HANDLERS,
		 (unsigned long long)UINT64_MAX);
}

/* A JOB's description, parsed before the book accepts it (job.h). */
struct job_plan {
	uint32_t service;
	/* parsed with sample_jobdir: the job's own when it names no
	 * directory (the placeholder is the only use of jobdir) */
	struct job_spec spec;
	/* spec.uses_jobdir: the description, parsed again with the real
	 * directory name (a reference of ours) */
	struct json_object *desc;
};

struct job_plan *job_prepare(uint32_t service, struct json_object *job, const char **code,
			     char *msg, size_t msglen)
{
	const struct es_config *cfg = host.cfg;
	struct job_plan *p = malloc(sizeof *p);
	char dir[512];

	if (!p) {
		*code = PROTO_E_INTERNAL;
		snprintf(msg, msglen, "out of memory while reading the job description");
		return NULL;
	}
	sample_jobdir(dir, sizeof dir);
	if (job_spec_parse(cfg, &cfg->services[service], job, dir, &p->spec, code, msg, msglen) !=
	    0) {
		free(p);
		return NULL;
	}
	p->service = service;
	p->desc = p->spec.uses_jobdir ? json_object_get(job) : NULL;
	return p;
}

void job_plan_free(struct job_plan *p)
{
	if (!p)
		return;
	job_spec_free(&p->spec);
	if (p->desc)
		json_object_put(p->desc);
	free(p);
}

int job_validate(uint32_t service, struct json_object *job, const char **code, char *msg,
		 size_t msglen)
{
	struct job_plan *p = job_prepare(service, job, code, msg, msglen);
	job_plan_free(p);
	return p ? 0 : -1;
}

/* ---- completion -------------------------------------------------------- */

/* A job's process exited by itself with status 0 (no cancel). */
static int process_succeeded(const struct job *j)
{
	return j->pid > 0 && j->reaped && !j->spawn_errno && !j->cancelled &&
	       WIFEXITED(j->status) && WEXITSTATUS(j->status) == 0;
}

/* The compact outcome of an ended job (the receipt's decisive fields):
 * the program's own end first (cancel, timeout, drain), then the failures
 * around it. */
static struct book_outcome outcome_of(const struct job *j, uint64_t duration_ms,
				      const char **message)
{
	struct book_outcome o = { .exit_code = -1, .duration_ms = (uint32_t)duration_ms };

	*message = NULL;
	if (j->spawn_errno) {
		o.error = JOB_ERR_EXEC_FAILED;
		*message = strerror(j->spawn_errno);
	} else if (j->pid > 0 && j->reaped && WIFEXITED(j->status)) {
		o.exit_code = WEXITSTATUS(j->status);
	} else if (j->pid > 0 && j->reaped && WIFSIGNALED(j->status)) {
		o.signal = (uint8_t)WTERMSIG(j->status);
	}
	switch (j->cancelled) {
	case JOB_CANCEL_REQUESTED:
		o.error = JOB_ERR_CANCELLED;
		*message = "cancelled";
		break;
	case JOB_CANCEL_TIMEOUT:
		o.error = JOB_ERR_TIMEOUT;
		*message = "timeout_sec exceeded";
		break;
	case JOB_CANCEL_DRAIN:
		o.error = JOB_ERR_EXEC_STOPPED;
		*message = "the execserver stopped before the job ended";
		o.retryable = 1;
		break;
	default:
		/* An upload cut off because the program failed is the program's
		 * failure, already told by exit_code/signal. */
		if (j->io_error && !o.error &&
		    (j->stopped_for_io || !(j->io_error == JOB_ERR_STDOUT_FAILED && j->reaped &&
					    !process_succeeded(j)))) {
			o.error = j->io_error;
			o.retryable = j->io_retryable;
			*message = j->io_message;
		}
		break;
	}
	o.failed = o.error != JOB_ERR_NONE || o.exit_code != 0;
	return o;
}

static void job_free(struct job *j)
{
	if (j->err_ev)
		event_free(j->err_ev);
	if (j->kill_ev)
		event_free(j->kill_ev);
	if (j->timeout_ev)
		event_free(j->timeout_ev);
	if (j->linger_ev)
		event_free(j->linger_ev);
	if (j->start_ev)
		event_free(j->start_ev);
	if (j->desc)
		json_object_put(j->desc);
	if (j->err_fd >= 0)
		close(j->err_fd);
	if (j->io)
		job_io_free(j->io);
	job_progress_free(j->progress);
	job_spec_free(&j->spec);
	free(j);
}

/* Whether pid is the leader of a job of ours still running. */
static int is_running_leader(pid_t pid)
{
	for (struct job *j = jobs; j; j = j->next)
		if (j->pid == pid && !j->reaped)
			return 1;
	return 0;
}

/* Whether j's directory may go to the next job: its program ran and was
 * reaped, nothing held its output past the leader (lingered), no process
 * any job left behind is alive (the handler is their reaper, spawn.c: one
 * of them may sit in this directory and write into it later), and the
 * handler is not stopping (spares would outlive it). */
static int may_reuse_dir(const struct job *j)
{
	return j->pid > 0 && j->reaped && !j->lingered && !host.draining() &&
	       (childless || !spawn_other_children(is_running_leader));
}

/* jobLog: one line per finished job, for the operator (who ran what, how
 * it ended, how long, how much went in and out). */
static void log_job(const struct job *j, const struct book_outcome *o, const char *message)
{
	const struct config_service *svc = &host.cfg->services[j->service];
	char peer[64], how[48];

	if (!host.cfg->job_log)
		return;
	if (o->exit_code >= 0)
		snprintf(how, sizeof how, "exit %d", o->exit_code);
	else if (o->signal)
		snprintf(how, sizeof how, "signal %d", o->signal);
	else
		snprintf(how, sizeof how, "no exit");
	log_info("job %s: service %s, command %s, client %s (%s): %s, %.3f s, %llu bytes in, "
		 "%llu bytes out%s%s%s%s",
		 j->job_id, svc->name, j->spec.command ? j->spec.command->name : "-",
		 j->client[0] ? j->client : "-",
		 j->peer.family ? ip_addr_format(&j->peer, peer, sizeof peer) : "unknown", how,
		 o->duration_ms / 1000.0, (unsigned long long)j->bytes_in,
		 (unsigned long long)j->bytes_out, o->error ? ", error " : "",
		 o->error ? receipt_error_name(o->error) : "", message && o->error ? ": " : "",
		 message && o->error ? message : "");
}

/* The job is over: its receipt goes into the book, which frees the slot
 * and mails the DONE to whichever handler holds the owner connection (this
 * one included), now or when the client comes back within its grace. */
static void complete(struct job *j)
{
	uint64_t duration = clock_mono_ms() - j->start_ms;
	const char *message;
	struct book_outcome o = outcome_of(j, duration, &message);
	const char *line = j->err_cur_len ? j->err_cur : j->err_line;
	size_t out_len = 0;
	int truncated = 0, streamed = 0;
	const char *out = j->io ? job_io_stdout_prefix(j->io, &out_len, &truncated, &streamed)
				: NULL;
	/* stdout that went to its URL is not repeated, unless the job failed;
	 * in body mode it is the response body */
	int show_stdout = !j->is_body && (!streamed || o.failed);
	struct receipt_parts parts = {
		.outcome = &o,
		.error_message = message,
		.stdout_prefix = show_stdout ? out : NULL,
		.stdout_len = show_stdout ? out_len : 0,
		.stdout_truncated = show_stdout && truncated,
		.stderr_line = line,
		.stderr_len = strlen(line),
	};
	size_t len = 0;
	char *text = receipt_build(&parts, &len);

	log_job(j, &o, message);

	/* the last progress goes out before the DONE is mailed: same
	 * connection, in order */
	job_progress_finish(j->progress);
	uint64_t good, bad;
	job_progress_counts(j->progress, &good, &bad);

	struct book *b = host.book_lock();
	if (good || bad)
		book_progress_lines(b, good, bad);
	enum book_rc rc = j->is_body ? book_token_finished(b, j->want, &o)
				     : book_job_finished(b, j->want, &o, text, text ? len : 0);
	host.book_unlock();
	if (!j->is_body) {
		free(text);
		text = NULL;
	}
	if (rc != BOOK_OK)
		log_warn("job %s: finished, but the book says %s", j->job_id, book_rc_name(rc));

	enum job_removal_policy pol = host.cfg->job_removal_policy;
	if (j->dir[0] && (pol == JOB_REMOVAL_ALL || (pol == JOB_REMOVAL_DONE && !o.failed)))
		job_dir_release(j->dir, may_reuse_dir(j), &j->dir_seen);

	if (j->prev)
		j->prev->next = j->next;
	else
		jobs = j->next;
	if (j->next)
		j->next->prev = j->prev;
	njobs--;
	job_body_done_fn body_done = j->body_done;
	void *body_ctx = j->body_ctx;
	/* body mode: output that was not streamed is the response body */
	char prefix[JOB_IO_STDOUT_CAP];
	size_t plen = body_done && !streamed && out ? out_len : 0;
	if (plen)
		memcpy(prefix, out, plen);
	job_free(j);
	if (body_done)
		body_done(body_ctx, &o, text, text ? len : 0, prefix, plen);
	free(text);
	host.job_ended();
}

/* The process group of the job, in the book (0: forget it), and at its
 * start its command (for the console's list of running jobs). */
static void record_pgid(struct job *j, int32_t pgid)
{
	struct book *b = host.book_lock();
	if (j->is_body) {
		book_token_set_pgid(b, j->want, pgid);
	} else {
		book_job_set_pgid(b, j->want, pgid);
		if (pgid > 0 && j->spec.command)
			book_job_set_command(b, j->want,
					     (unsigned)(j->spec.command -
							host.cfg->services[j->service].commands));
	}
	host.book_unlock();
}

/* Signals the job's process group (if it has one). */
static void stop_process(struct job *j, int sig)
{
	if (j->pid > 0) {
		kill(-j->pid, sig);
		if (sig != SIGKILL) {
			struct timeval tv = { JOB_KILL_GRACE_MS / 1000,
					      (JOB_KILL_GRACE_MS % 1000) * 1000 };
			evtimer_add(j->kill_ev, &tv);
		}
	}
}

/* No process runs (any more) for this job and none will report: nothing
 * to reap, no stream to wait for. */
static void no_process(struct job *j)
{
	j->reaped = j->stdin_done = j->stdout_done = 1;
}

/* Keeps the first failure around the process. */
static void io_failed(struct job *j, uint8_t code, const struct job_io_result *r)
{
	if (j->io_error)
		return;
	if (r->code && strcmp(r->code, JOB_IO_E_REFUSED) == 0)
		code = JOB_ERR_CALLBACK_REFUSED;
	j->io_error = code;
	j->io_retryable = (uint8_t)(r->retryable != 0);
	/* cut on a character boundary: the message goes into a text frame */
	size_t n = utf8_cut(r->message, sizeof j->io_message - 1);
	memcpy(j->io_message, r->message, n);
	j->io_message[n] = '\0';
}

static void maybe_complete(struct job *j)
{
	if (j->completing || !j->reaped || j->err_fd >= 0 || !j->stdin_done || !j->stdout_done)
		return;
	if (process_succeeded(j) && !j->io_error && j->spec.noutputs > 0 && !j->outputs_started) {
		j->outputs_started = 1;
		if (job_io_upload_outputs(j->io) == 0)
			return; /* outputs_done completes */
		j->io_error = JOB_ERR_OUTPUT_FAILED;
		snprintf(j->io_message, sizeof j->io_message, "outputs: cannot start the uploads");
	}
	if (j->outputs_started && !j->outputs_done && !j->io_error)
		return;
	j->completing = 1;
	complete(j);
}

/* ---- job_io callbacks ------------------------------------------------- */

static void spawn_job(struct job *j);

static void on_inputs_done(void *arg, const struct job_io_result *r)
{
	struct job *j = arg;
	j->bytes_in += r->bytes;
	if (r->ok) {
		spawn_job(j);
		return;
	}
	io_failed(j, JOB_ERR_INPUT_FAILED, r);
	/* nothing ran: no streams, no process */
	no_process(j);
	maybe_complete(j);
}

static void on_stdin_done(void *arg, const struct job_io_result *r)
{
	struct job *j = arg;
	j->stdin_done = 1;
	j->bytes_in += r->bytes;
	if (!r->ok) {
		/* a truncated input must not pass for a complete one */
		io_failed(j, JOB_ERR_STDIN_FAILED, r);
		if (!j->reaped) {
			j->stopped_for_io = 1;
			stop_process(j, SIGKILL);
		}
	}
	maybe_complete(j);
}

static void on_stdout_done(void *arg, const struct job_io_result *r)
{
	struct job *j = arg;
	j->stdout_done = 1;
	j->bytes_out += r->bytes;
	if (!r->ok) {
		io_failed(j, JOB_ERR_STDOUT_FAILED, r);
		if (!j->reaped) {
			j->stopped_for_io = 1;
			stop_process(j, SIGTERM); /* its output goes nowhere */
		}
	}
	maybe_complete(j);
}

static void on_outputs_done(void *arg, const struct job_io_result *r)
{
	struct job *j = arg;
	j->outputs_done = 1;
	j->bytes_out += r->bytes;
	if (!r->ok)
		io_failed(j, JOB_ERR_OUTPUT_FAILED, r);
	maybe_complete(j);
}

/* ---- the process ------------------------------------------------------ */

static void close_stderr(struct job *j)
{
	if (j->err_ev) {
		event_free(j->err_ev);
		j->err_ev = NULL;
	}
	if (j->err_fd >= 0) {
		close(j->err_fd);
		j->err_fd = -1;
	}
}

static void on_stderr(evutil_socket_t fd, short what, void *arg)
{
	struct job *j = arg;
	char buf[8192];
	ssize_t n = read(fd, buf, sizeof buf);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		close_stderr(j);
		maybe_complete(j);
		return;
	}
	/* Keep the last non-empty line: it is the decisive one for most tools. */
	for (ssize_t i = 0; i < n; i++) {
		char c = buf[i];
		if (c == '\n') {
			if (j->err_cur_len) {
				memcpy(j->err_line, j->err_cur, j->err_cur_len);
				j->err_line[j->err_cur_len] = '\0';
			}
			j->err_cur_len = 0;
		} else if (j->err_cur_len < sizeof j->err_cur - 1) {
			j->err_cur[j->err_cur_len++] = c;
		}
	}
	j->err_cur[j->err_cur_len] = '\0';
}

static void kill_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct job *j = arg;
	if (!j->reaped)
		kill(-j->pid, SIGKILL);
}

/* The leader is gone and the output did not end within JOB_LINGER_MS: a
 * descendant that left the process group holds the pipes.  Stop reading. */
static void linger_cb(evutil_socket_t fd, short what, void *arg)
{
	struct job *j = arg;
	j->lingered = 1;
	close_stderr(j);
	if (j->io && !j->stdout_done && job_io_stdout_close(j->io) != 0) {
		/* the program's own output still waits for a slow consumer */
		struct timeval tv = { 0, JOB_LINGER_MS * 1000 };
		evtimer_add(j->linger_ev, &tv);
		return;
	}
	maybe_complete(j);
}

static void cancel_job(struct job *j, enum job_cancel_reason why);

static void timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	cancel_job(arg, JOB_CANCEL_TIMEOUT);
}

void job_cancel(struct book_ref want, enum job_cancel_reason why)
{
	struct job *j = find_job(want);
	if (j)
		cancel_job(j, why);
}

void job_body_cancel(struct job *j)
{
	cancel_job(j, JOB_CANCEL_REQUESTED);
}

static void cancel_job(struct job *j, enum job_cancel_reason why)
{
	if (j->cancelled || j->completing)
		return;
	if (j->pid > 0 && !j->reaped) {
		j->cancelled = why;
		stop_process(j, SIGTERM);
		return;
	}
	/* Nothing runs: the job still fetches its inputs, or its program ended
	 * and the output (stdout tail, output files) is still being uploaded.
	 * Stop the transfers; the job ends now with the reason. */
	j->cancelled = why;
	if (j->io)
		job_io_abort(j->io);
	if (j->linger_ev)
		evtimer_del(j->linger_ev);
	close_stderr(j);
	no_process(j);
	j->outputs_done = 1;
	j->completing = 1;
	complete(j);
}

void job_stop_all(void)
{
	for (struct job *j = jobs, *next; j; j = next) {
		next = j->next;
		cancel_job(j, JOB_CANCEL_DRAIN);
	}
}

static void exec_failed(struct job *j, int err);

void job_reap(void)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (struct job *j = jobs; j; j = j->next) {
			/* a job reaped earlier may still wait for its output while
			 * its pid number has gone to a new child of ours */
			if (j->pid == pid && !j->reaped) {
				int err = spawn_reaped(pid, status);
				j->status = status;
				/* background children of the job end with it; then the
				 * group id may be reused: forget it everywhere */
				kill(-j->pid, SIGKILL);
				evtimer_del(j->kill_ev);
				record_pgid(j, 0);
				if (err) {
					/* the program never ran: nothing to read */
					close_stderr(j);
					exec_failed(j, err);
					break;
				}
				j->reaped = 1;
				job_io_process_ended(j->io, process_succeeded(j) && !j->io_error);
				struct timeval tv = { 0, JOB_LINGER_MS * 1000 };
				evtimer_add(j->linger_ev, &tv);
				maybe_complete(j);
				break;
			}
		}
	}
	childless = pid < 0 && errno == ECHILD;
}

/* jobLimits as setrlimit calls (out has room for 5).  Core files are off
 * unless coreMB says otherwise: a crashing converter must not fill tempDir.
 * Without openFiles a job gets the open-files limit the daemon was started
 * with, not the one it raised for its connections. */
static size_t job_limits(const struct config_job_limits *l, unsigned long long default_nofile,
			 struct spawn_rlimit *out)
{
	size_t n = 0;
	const unsigned long long mb = 1024ull * 1024ull;

	if (l->cpu_sec)
		out[n++] = (struct spawn_rlimit){ RLIMIT_CPU, (unsigned long long)l->cpu_sec };
	if (l->memory_mb)
		out[n++] = (struct spawn_rlimit){ RLIMIT_AS,
						  (unsigned long long)l->memory_mb * mb };
	if (l->file_size_mb)
		out[n++] = (struct spawn_rlimit){ RLIMIT_FSIZE,
						  (unsigned long long)l->file_size_mb * mb };
	if (l->open_files)
		out[n++] = (struct spawn_rlimit){ RLIMIT_NOFILE,
						  (unsigned long long)l->open_files };
	else if (default_nofile)
		out[n++] = (struct spawn_rlimit){ RLIMIT_NOFILE, default_nofile };
	out[n++] = (struct spawn_rlimit){ RLIMIT_CORE, (unsigned long long)l->core_mb * mb };
	return n;
}

/* The program could not be started (err: why); the job ends with
 * exec_failed. */
static void not_started(struct job *j, int err)
{
	j->spawn_errno = err;
	if (j->io)
		job_io_abort(j->io);
	no_process(j);
	maybe_complete(j);
}

/* not_started for a program that failed to start (err: why).  A program
 * that is not there (or not an executable file) is ENOENT, whichever step
 * failed. */
static void exec_failed(struct job *j, int err)
{
	char path[4096];
	if (err != ENOENT && spawn_find_program(j->spec.argv[0], path, sizeof path) != 0)
		err = ENOENT;
	not_started(j, err);
}

/* A progress value of j's program (job_progress.h): to its owner. */
static void progress_send(void *arg, double fraction, const char *text)
{
	struct job *j = arg;
	if (!j->is_body && host.progress)
		host.progress(j->want, j->job_id, fraction, text);
}

_Static_assert(SPAWN_EXTRA_FD == 3, "JOB_PROGRESS_ENV_ENTRY names fd 3");

/* exec_failed, closing the descriptors made for the child so far (-1:
 * none). */
static void spawn_failed(struct job *j, int err, int in, int out, int errfds[2])
{
	int fds[4] = { in, out, errfds[0], errfds[1] };
	for (int i = 0; i < 4; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	exec_failed(j, err);
}

static void spawn_job(struct job *j)
{
	const struct es_config *cfg = host.cfg;
	char path[4096];
	int in = -1, out = -1, errfds[2] = { -1, -1 };

	/* a name is looked up in PATH here (execve takes a path); an absolute
	 * one goes to execve as it is (no stat + access per job): a missing or
	 * unusable program fails in the child, and exec_failed reports it as
	 * the check here would have (ENOENT) */
	const char *prog = j->spec.argv[0];
	if (prog[0] != '/' && spawn_find_program(prog, path, sizeof path) != 0) {
		spawn_failed(j, ENOENT, in, out, errfds);
		return;
	}
	if (job_io_child_fds(j->io, &in, &out) != 0 || pipe2(errfds, O_CLOEXEC) != 0) {
		spawn_failed(j, errno ? errno : EIO, in, out, errfds);
		return;
	}
	fcntl(errfds[0], F_SETFL, O_NONBLOCK);
	int prog_fd = -1;
	j->progress = job_progress_new(host.base, &prog_fd, progress_send, j);
	if (!j->progress) {
		spawn_failed(j, errno ? errno : EIO, in, out, errfds);
		return;
	}
	struct spawn_rlimit limits[5];
	struct spawn_request req = { .path = prog[0] == '/' ? prog : path,
				     .argv = j->spec.argv,
				     .envp = j->spec.envp,
				     .cwd = j->dir,
				     .stdin_fd = in,
				     .stdout_fd = out,
				     .stderr_fd = errfds[1],
				     .extra_fd = prog_fd,
				     .limits = limits,
				     .nlimits = job_limits(&cfg->job_limits, host.default_nofile,
							   limits),
				     .nice = (int)cfg->job_limits.nice };
	int err = 0;
	childless = 0;
	pid_t pid = spawn_process(&req, &err);
	if (in >= 0)
		close(in);
	close(out);
	close(errfds[1]);
	close(prog_fd);
	if (pid < 0) {
		errfds[1] = -1;
		spawn_failed(j, err, -1, -1, errfds);
		return;
	}
	j->pid = pid;
	j->err_fd = errfds[0];
	j->err_ev = event_new(host.base, j->err_fd, EV_READ | EV_PERSIST, on_stderr, j);
	event_add(j->err_ev, NULL);
	/* If the child exited already, the signalfd reports it to job_reap
	 * once this returns to the loop: the pid is recorded by then. */
	record_pgid(j, j->pid);
}

/* The callback guard (docs/security.md): a job's URLs may reach the
 * address of the connection that placed it and what callbackAllow names;
 * decided per address curl connects to, so DNS cannot route around it. */
static int job_guard(void *arg, const char *url_host, const struct sockaddr *sa, socklen_t len)
{
	const struct job *j = arg;
	struct ip_addr dest;
	char text[64];

	if (ip_addr_from_sockaddr(sa, len, &dest) != 0)
		return 0;
	if (addr_rules_allow(&host.cfg->callback_allow, j->peer.family ? &j->peer : NULL, url_host,
			     &dest))
		return 1;
	char peer[64];
	log_warn("job %s: callback to %s (%s) refused: not the client's address (%s; behind a "
		 "balancer: trustedProxies and the PROXY protocol), not in callbackAllow",
		 j->job_id, url_host, ip_addr_format(&dest, text, sizeof text),
		 j->peer.family ? ip_addr_format(&j->peer, peer, sizeof peer) : "unknown");
	return 0;
}

/* A new job record, linked, with its timers (NULL: out of memory).  peer:
 * the address of the client that placed it (the callback guard), or NULL. */
static struct job *job_new(struct book_ref want, const char *job_id, uint32_t service,
			   const struct ip_addr *peer, const char *client)
{
	struct job *j = malloc(sizeof *j);

	if (!j)
		return NULL;
	memset(j, 0, offsetof(struct job, job_id));
	j->dir[0] = j->err_line[0] = j->err_cur[0] = j->io_message[0] = '\0';
	j->want = want;
	j->service = service;
	if (peer)
		j->peer = *peer;
	j->err_fd = -1;
	j->start_ms = clock_mono_ms();
	snprintf(j->job_id, sizeof j->job_id, "%s", job_id);
	snprintf(j->client, sizeof j->client, "%s", client ? client : "");
	j->next = jobs;
	if (jobs)
		jobs->prev = j;
	jobs = j;
	njobs++;
	j->kill_ev = evtimer_new(host.base, kill_timer_cb, j);
	j->timeout_ev = evtimer_new(host.base, timeout_cb, j);
	j->linger_ev = evtimer_new(host.base, linger_cb, j);
	return j;
}

/* From the job directory to the spawn (or the input fetches first).
 * desc: the description, parsed here with the directory's name; NULL when
 * j->spec was parsed before and does not depend on it (job_start). */
static void job_run(struct job *j, struct json_object *desc)
{
	const struct es_config *cfg = host.cfg;
	const char *code;
	char why[256];

	if (!j->kill_ev || !j->timeout_ev || !j->linger_ev) {
		not_started(j, ENOMEM);
		return;
	}

	if (job_dir_take(cfg->temp_dir, host.slot, j->dir, sizeof j->dir, &j->dir_seen) != 0) {
		int err = errno;
		j->dir[0] = '\0';
		not_started(j, err);
		return;
	}
	/* validated before the JOB was accepted; parsed again for the real
	 * directory name where the description names it */
	if (desc && job_spec_parse(cfg, &cfg->services[j->service], desc, j->dir, &j->spec, &code,
				   why, sizeof why) != 0) {
		log_error("job %s: %s", j->job_id, why);
		not_started(j, EINVAL);
		return;
	}
	/* timeout_sec counts from the accepted JOB: inputs and uploads too */
	if (j->spec.timeout_sec > 0) {
		struct timeval tv = { (time_t)j->spec.timeout_sec, 0 };
		evtimer_add(j->timeout_ev, &tv);
	}
	struct job_io_callbacks cb = { .inputs_done = on_inputs_done,
				       .stdin_done = on_stdin_done,
				       .stdout_done = on_stdout_done,
				       .outputs_done = on_outputs_done,
				       .arg = j };
	j->io = job_io_new(host.base, transfers, &j->spec, j->dir, JOB_INPUT_MAX_BYTES, &cb);
	if (!j->io || (j->streams && job_io_set_streams(j->io, j->streams, j->body_ctx) != 0)) {
		not_started(j, ENOMEM);
		return;
	}
	job_io_set_guard(j->io, job_guard, j);
	if (j->spec.ninputs > 0) {
		if (job_io_fetch_inputs(j->io) != 0) {
			not_started(j, EIO);
		}
		return; /* on_inputs_done spawns */
	}
	spawn_job(j);
}

void job_start(struct book_ref want, const char *job_id, struct job_plan *plan,
	       const struct ip_addr *peer, const char *client)
{
	struct job *j = job_new(want, job_id, plan->service, peer, client);

	if (!j) {
		/* nothing to run it with: give the slot back with a failure */
		struct book_outcome o = { .exit_code = -1,
					  .error = JOB_ERR_EXEC_FAILED,
					  .failed = 1 };
		struct book *b = host.book_lock();
		book_job_finished(b, want, &o, NULL, 0);
		host.book_unlock();
		return;
	}
	if (!plan->desc) {
		/* the spec parsed before is the job's own: taken, not copied */
		j->spec = plan->spec;
		memset(&plan->spec, 0, sizeof plan->spec);
	}
	job_run(j, plan->desc);
}

static void body_start_cb(evutil_socket_t fd, short what, void *arg)
{
	struct job *j = arg;
	struct json_object *desc = j->desc;

	j->desc = NULL;
	job_run(j, desc);
	json_object_put(desc);
}

struct job *job_start_body(struct book_ref token, uint32_t service, struct json_object *desc,
			   const struct ip_addr *peer, const struct job_stream_ops *streams,
			   job_body_done_fn done, void *ctx)
{
	char id[32];
	snprintf(id, sizeof id, "token-%u.%u", token.idx, token.gen);
	struct job *j = job_new(token, id, service, peer, NULL);

	if (j) {
		j->is_body = 1;
		j->streams = streams;
		j->body_done = done;
		j->body_ctx = ctx;
		j->start_ev = evtimer_new(host.base, body_start_cb, j);
	}
	if (!j || !j->start_ev) {
		struct book_outcome o = { .exit_code = -1,
					  .error = JOB_ERR_EXEC_FAILED,
					  .failed = 1 };
		if (j) {
			j->body_done = NULL;
			j->completing = 1;
			no_process(j);
			complete(j); /* gives the slot back */
		} else {
			struct book *b = host.book_lock();
			book_token_finished(b, token, &o);
			host.book_unlock();
		}
		return NULL;
	}
	/* started from the loop, so that done never runs inside this call */
	j->desc = json_object_get(desc);
	static const struct timeval now = { 0, 0 };
	evtimer_add(j->start_ev, &now);
	return j;
}
