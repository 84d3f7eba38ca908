/*
 * local_run.c - see local_run.h.  One run: the child, two pipes (stdout
 * kept up to STDOUT_MAX bytes, stderr's last line), a timeout timer.  The
 * run ends when both pipes are closed and the exit status is known; then
 * the receipt is built and done() called, and the run frees itself.
 */
#include "autoconfig.h"
#include "dispatch/local_run.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <json-c/json.h>

#include "common/clock.h"

#define STDOUT_MAX 4000
#define STDERR_LINE_MAX 512
#define MAX_ARGS 256
#define MAX_ENV 64
#define LOCAL_PROGRESS_ENV "EXECSERVER_PROGRESS_FD"

struct local_run {
	struct event_base *base;
	pid_t pid;
	int status, exited; /* exited: status is valid */
	struct event *out_ev, *err_ev, *timer;
	int out_fd, err_fd;
	char out[STDOUT_MAX + 1];
	size_t out_len;
	int truncated;
	char err_line[STDERR_LINE_MAX + 1], err_cur[STDERR_LINE_MAX + 1];
	size_t err_cur_len;
	const char *error_code; /* "timeout", "cancelled" or NULL */
	uint64_t start_ms;
	local_done_cb done;
	void *arg;
};

static void finish_if_over(struct local_run *r)
{
	struct exc_receipt rc;
	struct json_object *j;
	int64_t dur;

	if (r->out_fd >= 0 || r->err_fd >= 0 || !r->exited)
		return;
	if (r->timer)
		event_free(r->timer);
	r->timer = NULL;
	dur = (int64_t)(clock_mono_ms() - r->start_ms);
	memset(&rc, 0, sizeof rc);
	rc.exited = WIFEXITED(r->status);
	rc.exit_code = rc.exited ? WEXITSTATUS(r->status) : -1;
	rc.signal = WIFSIGNALED(r->status) ? WTERMSIG(r->status) : 0;
	rc.duration_ms = dur;
	r->out[r->out_len] = '\0';
	rc.stdout_text = r->out;
	rc.stdout_truncated = r->truncated;
	if (r->err_cur_len) {
		memcpy(r->err_line, r->err_cur, r->err_cur_len);
		r->err_line[r->err_cur_len] = '\0';
	}
	rc.stderr_line = r->err_line[0] ? r->err_line : NULL;
	rc.error_code = r->error_code;
	rc.error_message = r->error_code;
	rc.ok = !r->error_code && rc.exited && rc.exit_code == 0;
	j = json_object_new_object();
	if (rc.exited)
		json_object_object_add(j, "exit_code", json_object_new_int(rc.exit_code));
	if (rc.signal)
		json_object_object_add(j, "signal", json_object_new_int(rc.signal));
	json_object_object_add(j, "stdout", json_object_new_string_len(r->out, (int)r->out_len));
	if (r->truncated)
		json_object_object_add(j, "stdout_truncated", json_object_new_boolean(1));
	if (rc.stderr_line)
		json_object_object_add(j, "stderr", json_object_new_string(rc.stderr_line));
	json_object_object_add(j, "duration_ms", json_object_new_int64(dur));
	json_object_object_add(j, "local", json_object_new_boolean(1));
	if (r->error_code) {
		struct json_object *e = json_object_new_object();
		json_object_object_add(e, "code", json_object_new_string(r->error_code));
		json_object_object_add(j, "error", e);
	}
	rc.json = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN);
	r->done(r, &rc, r->arg);
	json_object_put(j);
	free(r);
}

static void close_pipe(int *fd, struct event **ev)
{
	if (*ev)
		event_free(*ev);
	*ev = NULL;
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Takes what the pipe fd (stdout or stderr of the run) has: stdout's
 * bytes up to STDOUT_MAX, stderr's lines (the last complete one kept).
 * At the end of the pipe it is closed, and the run may end (and free r). */
static void read_pipe(evutil_socket_t fd, short what, void *arg)
{
	struct local_run *r = arg;
	int is_out = fd == r->out_fd;
	char buf[4096];
	ssize_t n = read(fd, buf, sizeof buf);

	(void)what;
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		if (is_out)
			close_pipe(&r->out_fd, &r->out_ev);
		else
			close_pipe(&r->err_fd, &r->err_ev);
		finish_if_over(r);
		return;
	}
	if (is_out) {
		size_t room = STDOUT_MAX - r->out_len, take = (size_t)n < room ? (size_t)n : room;
		memcpy(r->out + r->out_len, buf, take);
		r->out_len += take;
		r->truncated |= take < (size_t)n;
		return;
	}
	for (ssize_t i = 0; i < n; i++) {
		if (buf[i] == '\n') {
			if (r->err_cur_len) {
				memcpy(r->err_line, r->err_cur, r->err_cur_len);
				r->err_line[r->err_cur_len] = '\0';
			}
			r->err_cur_len = 0;
		} else if (r->err_cur_len < STDERR_LINE_MAX) {
			r->err_cur[r->err_cur_len++] = buf[i];
		}
	}
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct local_run *r = arg;

	(void)fd;
	(void)what;
	r->error_code = "timeout";
	kill(-r->pid, SIGKILL);
}

void local_cancel(struct local_run *r)
{
	if (!r->error_code)
		r->error_code = "cancelled";
	kill(-r->pid, SIGKILL);
}

int local_reaped(struct local_run *r, pid_t pid, int status)
{
	if (pid != r->pid)
		return 0;
	r->status = status;
	r->exited = 1;
	finish_if_over(r);
	return 1;
}

/* argv and envp from the payload; -1 with err. */
static int build(const struct dispatch_local_service *svc, struct json_object *job, char **argv,
		 char **envp, int *timeout_sec, char *err, size_t errlen)
{
	static const char *const refused[] = { "stdin", "stdout", "inputs", "outputs", NULL };
	struct json_object *v;
	const struct dispatch_local_command *cmd = NULL;
	int n = 0, e = 0;

	for (size_t i = 0; refused[i]; i++)
		if (json_object_object_get_ex(job, refused[i], &v)) {
			snprintf(err, errlen,
				 "bad_job: job.%s: local services take command, args, env "
				 "and timeout_sec only",
				 refused[i]);
			return -1;
		}
	if (!json_object_object_get_ex(job, "command", &v) ||
	    !json_object_is_type(v, json_type_string)) {
		snprintf(err, errlen, "bad_job: job.command: a string is required");
		return -1;
	}
	for (size_t i = 0; i < svc->ncommands && !cmd; i++)
		if (strcmp(svc->commands[i].name, json_object_get_string(v)) == 0)
			cmd = &svc->commands[i];
	if (!cmd) {
		snprintf(err, errlen, "unknown_command: %.64s is not a command of local service %s",
			 json_object_get_string(v), svc->name);
		return -1;
	}
	argv[n++] = cmd->prog;
	for (size_t i = 0; i < cmd->args.count && n < MAX_ARGS; i++)
		argv[n++] = cmd->args.items[i];
	/* json-c aborts on the length of what is not an array */
	if (json_object_object_get_ex(job, "args", &v) &&
	    (!json_object_is_type(v, json_type_array) ||
	     json_object_array_length(v) > (size_t)(MAX_ARGS - n))) {
		snprintf(err, errlen,
			 "bad_job: job.args: an array of at most %d strings is required",
			 MAX_ARGS - n);
		return -1;
	}
	if (json_object_object_get_ex(job, "args", &v))
		for (size_t i = 0; i < json_object_array_length(v) && n < MAX_ARGS; i++) {
			struct json_object *a = json_object_array_get_idx(v, i);
			if (!json_object_is_type(a, json_type_string)) {
				snprintf(err, errlen,
					 "bad_job: job.args[%zu]: a string is required", i);
				return -1;
			}
			argv[n++] = (char *)json_object_get_string(a);
		}
	argv[n] = NULL;
	if (json_object_object_get_ex(job, "env", &v) &&
	    (!json_object_is_type(v, json_type_array) || json_object_array_length(v) > MAX_ENV)) {
		snprintf(err, errlen,
			 "bad_job: job.env: an array of at most %d strings is required", MAX_ENV);
		return -1;
	}
	if (json_object_object_get_ex(job, "env", &v))
		for (size_t i = 0; i < json_object_array_length(v) && e < MAX_ENV; i++) {
			struct json_object *a = json_object_array_get_idx(v, i);
			if (!json_object_is_type(a, json_type_string) ||
			    !strchr(json_object_get_string(a), '=')) {
				snprintf(err, errlen,
					 "bad_job: job.env[%zu]: NAME=value is required", i);
				return -1;
			}
			if (strncmp(json_object_get_string(a), LOCAL_PROGRESS_ENV "=",
				    sizeof LOCAL_PROGRESS_ENV) == 0) {
				snprintf(err, errlen,
					 "bad_job: job.env[%zu]: " LOCAL_PROGRESS_ENV
					 " is set by the dispatcher",
					 i);
				return -1;
			}
			envp[e++] = (char *)json_object_get_string(a);
		}
	/* as on an execserver: fd 3 takes progress lines (here /dev/null:
	 * a local run's progress goes nowhere), named last */
	envp[e++] = (char *)LOCAL_PROGRESS_ENV "=3";
	envp[e] = NULL;
	*timeout_sec = json_object_object_get_ex(job, "timeout_sec", &v) ? json_object_get_int(v)
									 : 0;
	return 0;
}

struct local_run *local_start(struct event_base *base, const struct dispatch_local_service *svc,
			      const char *payload, local_done_cb done, void *arg, char *err,
			      size_t errlen)
{
	struct json_object *job = json_tokener_parse(payload);
	char *argv[MAX_ARGS + 1], *envp[MAX_ENV + 2];
	int out[2] = { -1, -1 }, errp[2] = { -1, -1 }, timeout_sec = 0;
	struct local_run *r = NULL;

	if (!job || !json_object_is_type(job, json_type_object)) {
		snprintf(err, errlen, "bad_job: the job is not a JSON object");
		goto fail;
	}
	if (build(svc, job, argv, envp, &timeout_sec, err, errlen) < 0)
		goto fail;
	r = calloc(1, sizeof *r);
	if (!r || pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "local_io: %s", strerror(errno ? errno : ENOMEM));
		goto fail;
	}
	r->base = base;
	r->done = done;
	r->arg = arg;
	r->start_ms = clock_mono_ms();
	r->pid = fork();
	if (r->pid < 0) {
		snprintf(err, errlen, "local_io: fork: %s", strerror(errno));
		goto fail;
	}
	if (r->pid == 0) {
		/* stdin and fd 3 (progress, EXECSERVER_PROGRESS_FD) are
		 * /dev/null; the descriptor itself does not reach the program */
		int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
		setpgid(0, 0);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		dup2(devnull, 0);
		dup2(out[1], 1);
		dup2(errp[1], 2);
		if (devnull != 3)
			dup2(devnull, 3);
		/* dup2 onto itself keeps CLOEXEC: clear it where that was so */
		fcntl(0, F_SETFD, 0);
		fcntl(3, F_SETFD, 0);
		execve(argv[0], argv, envp);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	setpgid(r->pid, r->pid);
	close(out[1]);
	close(errp[1]);
	r->out_fd = out[0];
	r->err_fd = errp[0];
	evutil_make_socket_nonblocking(r->out_fd);
	evutil_make_socket_nonblocking(r->err_fd);
	r->out_ev = event_new(base, r->out_fd, EV_READ | EV_PERSIST, read_pipe, r);
	r->err_ev = event_new(base, r->err_fd, EV_READ | EV_PERSIST, read_pipe, r);
	event_add(r->out_ev, NULL);
	event_add(r->err_ev, NULL);
	if (timeout_sec > 0) {
		struct timeval tv = { timeout_sec, 0 };
		r->timer = evtimer_new(base, on_timeout, r);
		evtimer_add(r->timer, &tv);
	}
	json_object_put(job);
	return r;
fail:
	for (int i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (errp[i] >= 0)
			close(errp[i]);
	}
	free(r);
	json_object_put(job);
	return NULL;
}
