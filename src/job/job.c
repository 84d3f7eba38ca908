/*
 * job.c - see job.h.
 *
 * Life of a job here: validate -> mkdtemp its directory -> spawn (own
 * process group, jobLimits) -> read stdout (first JOB_STDOUT_CAP bytes kept)
 * and stderr (last non-empty line kept) -> reap (the group goes with its
 * leader) -> build the receipt -> book_job_finished, which frees the slot
 * and mails the DONE to the handler of the owner connection.  A job is
 * complete when the process was reaped AND both pipes reached EOF or the
 * linger after the reap ran out (so no output is lost to a race between
 * SIGCHLD and the last read).
 */
#include "autoconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <event2/event.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/utf8.h"
#include "execserver/protocol.h"
#include "handler/broker.h"
#include "handler/handler.h"
#include "job/janitor.h"
#include "job/job.h"
#include "job/job_spec.h"
#include "job/receipt.h"
#include "job/spawn.h"
#include "master/startup_check.h"

#define JOB_STDOUT_CAP 4000
#define JOB_STDERR_LINE_CAP 1024
#define JOB_KILL_GRACE_MS 3000
/* After the leader exits, its process group is killed (background children
 * are part of the job); output still in flight may drain for this long
 * before the pipes are closed, in case a descendant left the group. */
#define JOB_LINGER_MS 1000

struct job {
	struct job *next, *prev;
	struct book_ref want;
	char job_id[BOOK_ID_MAX + 1];
	uint32_t service;
	pid_t pid;
	uint64_t start_ms;
	int status, reaped;
	enum job_cancel_reason cancelled;
	char dir[512];
	struct event *out_ev, *err_ev, *kill_ev, *timeout_ev, *linger_ev;
	int out_fd, err_fd;
	char out[JOB_STDOUT_CAP];
	size_t out_len;
	int out_truncated;
	char err_line[JOB_STDERR_LINE_CAP]; /* last complete non-empty line */
	char err_cur[JOB_STDERR_LINE_CAP];  /* line being read */
	size_t err_cur_len;
	int spawn_errno;
};

static struct job *jobs;
static unsigned njobs;
static uint64_t job_counter;

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
	return 0;
}

/* A quarter of janitorFileAge, between 1 s and 10 min. */
static struct timeval janitor_interval(void)
{
	uint64_t ms = (uint64_t)handler.inst->cfg->janitor_file_age_ms / 4;
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
	snprintf(path, sizeof path, "%s/job", handler.inst->cfg->temp_dir);
	unsigned n = janitor_sweep(path, handler.slot, handler.inst->nhandlers,
				   (uint64_t)handler.inst->cfg->janitor_file_age_ms, clock_wall_ms(),
				   dir_in_use);
	if (n)
		log_info("janitor: removed %u job director%s older than janitorFileAge", n,
			 n == 1 ? "y" : "ies");
	struct timeval tv = janitor_interval();
	evtimer_add(janitor_ev, &tv);
}

int job_init(void)
{
	janitor_ev = evtimer_new(handler.base, janitor_cb, NULL);
	if (!janitor_ev)
		return -1;
	struct timeval tv = janitor_interval();
	evtimer_add(janitor_ev, &tv);
	return 0;
}

unsigned job_running_count(void) { return njobs; }

static struct job *find_job(struct book_ref want)
{
	for (struct job *j = jobs; j; j = j->next)
		if (j->want.idx == want.idx && j->want.gen == want.gen)
			return j;
	return NULL;
}

/* A directory name as long as any real one, for validating a JOB before
 * its directory exists (the argv size limit counts the expanded text). */
static void sample_jobdir(char *out, size_t len)
{
	snprintf(out, len, "%s/job/%d-%llu-XXXXXX", handler.inst->cfg->temp_dir,
		 BOOK_MAX_HANDLERS, (unsigned long long)UINT64_MAX);
}

/* Streams and files by URL come with the transfer layer (next release of
 * this file); until then a job that names them is refused, not half-run. */
static int refuse_unsupported(const struct job_spec *spec, const char **code, char *msg,
			      size_t msglen)
{
	const char *field = spec->stdin_url ? "job.stdin" : spec->stdout_url ? "job.stdout"
			  : spec->ninputs ? "job.inputs" : spec->noutputs ? "job.outputs" : NULL;
	if (!field)
		return 0;
	*code = PROTO_E_BAD_JOB;
	snprintf(msg, msglen, "%s: not supported by this execserver yet", field);
	return -1;
}

int job_validate(uint32_t service, struct json_object *job, const char **code, char *msg,
		 size_t msglen)
{
	const struct es_config *cfg = handler.inst->cfg;
	struct job_spec spec;
	char dir[512];

	sample_jobdir(dir, sizeof dir);
	if (job_spec_parse(cfg, &cfg->services[service], job, dir, &spec, code, msg, msglen) != 0)
		return -1;
	int rc = refuse_unsupported(&spec, code, msg, msglen);
	job_spec_free(&spec);
	return rc;
}

/* ---- completion -------------------------------------------------------- */

/* The compact outcome of an ended job (the receipt's decisive fields). */
static struct book_outcome outcome_of(const struct job *j, uint64_t duration_ms,
				      const char **message)
{
	struct book_outcome o = { .exit_code = -1, .duration_ms = (uint32_t)duration_ms };

	*message = NULL;
	if (j->spawn_errno) {
		o.error = JOB_ERR_EXEC_FAILED;
		*message = strerror(j->spawn_errno);
	} else if (WIFEXITED(j->status)) {
		o.exit_code = WEXITSTATUS(j->status);
	} else if (WIFSIGNALED(j->status)) {
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
		break;
	}
	o.failed = o.error != JOB_ERR_NONE || o.exit_code != 0;
	return o;
}

static void job_free(struct job *j)
{
	if (j->out_ev)
		event_free(j->out_ev);
	if (j->err_ev)
		event_free(j->err_ev);
	if (j->kill_ev)
		event_free(j->kill_ev);
	if (j->timeout_ev)
		event_free(j->timeout_ev);
	if (j->linger_ev)
		event_free(j->linger_ev);
	if (j->out_fd >= 0)
		close(j->out_fd);
	if (j->err_fd >= 0)
		close(j->err_fd);
	free(j);
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
	struct receipt_parts parts = {
		.outcome = &o, .error_message = message,
		.stdout_prefix = j->out, .stdout_len = j->out_len,
		.stdout_truncated = j->out_truncated,
		.stderr_line = line, .stderr_len = strlen(line),
	};
	size_t len = 0;
	char *text = receipt_build(&parts, &len);

	struct book *b = handler_book_lock();
	enum book_rc rc = book_job_finished(b, j->want, &o, text, text ? len : 0);
	handler_book_unlock();
	free(text);
	if (rc != BOOK_OK)
		log_warn("job %s: finished, but the book says %s", j->job_id, book_rc_name(rc));

	enum job_removal_policy pol = handler.inst->cfg->job_removal_policy;
	if (j->dir[0] && (pol == JOB_REMOVAL_ALL || (pol == JOB_REMOVAL_DONE && !o.failed)))
		janitor_remove_tree(j->dir);

	if (j->prev)
		j->prev->next = j->next;
	else
		jobs = j->next;
	if (j->next)
		j->next->prev = j->prev;
	njobs--;
	job_free(j);
	broker_drain_check();
}

static void maybe_complete(struct job *j)
{
	if (j->reaped && j->out_fd < 0 && j->err_fd < 0)
		complete(j);
}

static void close_pipe(struct job *j, int which)
{
	struct event **ev = which ? &j->err_ev : &j->out_ev;
	int *fd = which ? &j->err_fd : &j->out_fd;
	event_free(*ev);
	*ev = NULL;
	close(*fd);
	*fd = -1;
}

static void on_stdout(evutil_socket_t fd, short what, void *arg)
{
	struct job *j = arg;
	char buf[16384];
	ssize_t n = read(fd, buf, sizeof buf);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		close_pipe(j, 0);
		maybe_complete(j);
		return;
	}
	size_t room = JOB_STDOUT_CAP - j->out_len;
	size_t take = (size_t)n < room ? (size_t)n : room;
	memcpy(j->out + j->out_len, buf, take);
	j->out_len += take;
	if (take < (size_t)n)
		j->out_truncated = 1;
}

static void on_stderr(evutil_socket_t fd, short what, void *arg)
{
	struct job *j = arg;
	char buf[8192];
	ssize_t n = read(fd, buf, sizeof buf);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		close_pipe(j, 1);
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
	kill(-j->pid, SIGKILL);
}

/* The leader is gone and the output did not end within JOB_LINGER_MS: a
 * descendant that left the process group holds the pipes.  Stop reading. */
static void linger_cb(evutil_socket_t fd, short what, void *arg)
{
	struct job *j = arg;
	if (j->out_fd >= 0)
		close_pipe(j, 0);
	if (j->err_fd >= 0)
		close_pipe(j, 1);
	maybe_complete(j);
}

static void timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct job *j = arg;
	job_cancel(j->want, JOB_CANCEL_TIMEOUT);
}

void job_cancel(struct book_ref want, enum job_cancel_reason why)
{
	struct job *j = find_job(want);
	/* A job whose leader already exited keeps the outcome it has. */
	if (!j || j->cancelled || j->reaped || j->pid <= 0)
		return;
	j->cancelled = why;
	kill(-j->pid, SIGTERM);
	struct timeval tv = { JOB_KILL_GRACE_MS / 1000, (JOB_KILL_GRACE_MS % 1000) * 1000 };
	evtimer_add(j->kill_ev, &tv);
}

void job_stop_all(void)
{
	for (struct job *j = jobs; j; j = j->next)
		job_cancel(j->want, JOB_CANCEL_DRAIN);
}

void job_reap(void)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (struct job *j = jobs; j; j = j->next) {
			if (j->pid == pid) {
				j->status = status;
				j->reaped = 1;
				/* background children of the job end with it */
				kill(-j->pid, SIGKILL);
				struct timeval tv = { 0, JOB_LINGER_MS * 1000 };
				evtimer_add(j->linger_ev, &tv);
				maybe_complete(j);
				break;
			}
		}
	}
}

/* jobLimits as setrlimit calls (out has room for 5).  Core files are off
 * unless coreMB says otherwise: a crashing converter must not fill tempDir. */
static size_t job_limits(const struct config_job_limits *l, struct spawn_rlimit *out)
{
	size_t n = 0;
	const unsigned long long mb = 1024ull * 1024ull;

	if (l->cpu_sec)
		out[n++] = (struct spawn_rlimit){ RLIMIT_CPU, (unsigned long long)l->cpu_sec };
	if (l->memory_mb)
		out[n++] = (struct spawn_rlimit){ RLIMIT_AS, (unsigned long long)l->memory_mb * mb };
	if (l->file_size_mb)
		out[n++] = (struct spawn_rlimit){ RLIMIT_FSIZE,
						  (unsigned long long)l->file_size_mb * mb };
	if (l->open_files)
		out[n++] = (struct spawn_rlimit){ RLIMIT_NOFILE, (unsigned long long)l->open_files };
	out[n++] = (struct spawn_rlimit){ RLIMIT_CORE, (unsigned long long)l->core_mb * mb };
	return n;
}

static int open_pipe(int fds[2])
{
	if (pipe2(fds, O_CLOEXEC) != 0)
		return -1;
	fcntl(fds[0], F_SETFL, O_NONBLOCK);
	return 0;
}

void job_start(struct book_ref want, const char *job_id, uint32_t service,
	       struct json_object *desc)
{
	const struct es_config *cfg = handler.inst->cfg;
	struct job *j = calloc(1, sizeof *j);
	struct job_spec spec = { 0 };
	const char *code;
	char path[4096], why[256];
	int out[2] = { -1, -1 }, err[2] = { -1, -1 };

	j->want = want;
	j->service = service;
	j->out_fd = j->err_fd = -1;
	j->start_ms = clock_mono_ms();
	snprintf(j->job_id, sizeof j->job_id, "%s", job_id);
	j->next = jobs;
	if (jobs)
		jobs->prev = j;
	jobs = j;
	njobs++;
	j->kill_ev = evtimer_new(handler.base, kill_timer_cb, j);
	j->timeout_ev = evtimer_new(handler.base, timeout_cb, j);
	j->linger_ev = evtimer_new(handler.base, linger_cb, j);

	/* mkdtemp: unique even across handler restarts and leftovers */
	snprintf(j->dir, sizeof j->dir, "%s/job/%d-%llu-XXXXXX", cfg->temp_dir, handler.slot,
		 (unsigned long long)++job_counter);
	if (!mkdtemp(j->dir)) {
		j->spawn_errno = errno;
		j->dir[0] = '\0';
		goto failed;
	}
	/* validated before the JOB was accepted; parsed again for the real
	 * directory name */
	if (job_spec_parse(cfg, &cfg->services[service], desc, j->dir, &spec, &code, why,
			   sizeof why) != 0) {
		log_error("job %s: %s", job_id, why);
		j->spawn_errno = EINVAL;
		goto failed;
	}
	if (startup_check_find_program(spec.argv[0], path, sizeof path) != 0) {
		j->spawn_errno = ENOENT;
		goto failed;
	}
	if (open_pipe(out) != 0 || open_pipe(err) != 0) {
		j->spawn_errno = errno;
		goto failed;
	}
	struct spawn_rlimit limits[5];
	struct spawn_request req = { .path = path, .argv = spec.argv, .envp = spec.envp,
				     .cwd = j->dir, .stdin_fd = -1, .stdout_fd = out[1],
				     .stderr_fd = err[1], .limits = limits,
				     .nlimits = job_limits(&cfg->job_limits, limits) };
	j->pid = spawn_process(&req, &j->spawn_errno);
	close(out[1]);
	close(err[1]);
	out[1] = err[1] = -1;
	if (j->pid < 0)
		goto failed;
	j->out_fd = out[0];
	j->err_fd = err[0];
	j->out_ev = event_new(handler.base, j->out_fd, EV_READ | EV_PERSIST, on_stdout, j);
	j->err_ev = event_new(handler.base, j->err_fd, EV_READ | EV_PERSIST, on_stderr, j);
	event_add(j->out_ev, NULL);
	event_add(j->err_ev, NULL);
	if (spec.timeout_sec > 0) {
		struct timeval tv = { (time_t)spec.timeout_sec, 0 };
		evtimer_add(j->timeout_ev, &tv);
	}
	{
		struct book *b = handler_book_lock();
		book_job_set_pgid(b, want, j->pid);
		handler_book_unlock();
	}
	job_spec_free(&spec);
	/* The child may already have exited before we recorded its pid. */
	job_reap();
	return;

failed:
	for (int i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (err[i] >= 0)
			close(err[i]);
	}
	job_spec_free(&spec);
	j->reaped = 1;
	complete(j);
}
