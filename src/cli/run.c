/*
 * run.c - see run.h.
 *
 * One event loop runs until the job's on_done (or until execctl decides it
 * cannot get anywhere: every address refused or failed before any
 * connection came up).  Invariants: the client is freed only after the
 * loop has stopped (never from a callback); the position line is drawn
 * only while the job waits and stderr is a terminal, and it is erased
 * before any message and when the job starts (the library's on_start comes
 * before any byte of its output), never drawn again after that: on a
 * terminal that shows both stdout and stderr, the job's output never lands
 * behind a position line.  While the job runs, the line shows its
 * program's progress (exc_job_on_progress), but only when stdout is a
 * file or a device other than that terminal: the job's output is written
 * by the library as it comes, and could otherwise land behind the line (a
 * pipe or socket counts as that terminal: `| tee log` shows it there).
 */
#include "autoconfig.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include <execserver/client.h>

#include "cli/exit_codes.h"
#include "cli/outcome.h"
#include "cli/progress.h"
#include "cli/run.h"

#define TICK_MS 200   /* the first QUERY this soon after the start */
#define QUERY_EVERY 5 /* ticks between QUERYs: once a second */

struct address_state {
	int failed;     /* connecting failed at least once */
	int code;       /* the last failure's HTTP status (0: network) */
	int tls_verify; /* ... was a certificate that did not verify */
	char message[256];
};

struct run {
	const struct cli_run *o;
	struct event_base *base;
	exc_client *client;
	exc_job *job;
	struct address_state *addr;
	int ever_up; /* some connection got its HELLO */
	int status;  /* the exit status once decided, else -1 */
	int interrupted;
	int tty; /* stderr is a terminal and not -q */
	int line_shown;
	int started;      /* the job left waiting: no more position lines */
	int progress_tty; /* tty, and stdout is not the same terminal: the
			   * running job's progress is drawn */
	unsigned ticks;
	/* the best (fewest ahead) POSITION of the current round */
	int have_position;
	struct exc_position best;
};

static void finish(struct run *r, int status)
{
	if (r->status < 0)
		r->status = status;
	event_base_loopbreak(r->base);
}

static void erase_line(struct run *r)
{
	if (r->line_shown) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
		r->line_shown = 0;
	}
}

static void draw_line(struct run *r, const char *text)
{
	fprintf(stderr, "\r\033[Kexecctl: %s", text);
	fflush(stderr);
	r->line_shown = 1;
}

/* ---- library callbacks ------------------------------------------------------ */

static void on_log(void *arg, enum exc_log_level level, const char *line)
{
	struct run *r = arg;
	static const char *const names[] = { "error", "warn", "info", "debug" };
	erase_line(r);
	fprintf(stderr, "execctl: [%s] %s\n", names[level <= EXC_LOG_DEBUG ? level : EXC_LOG_DEBUG],
		line);
}

static int address_index(const struct run *r, const char *address)
{
	for (size_t i = 0; i < r->o->c.naddresses; i++)
		if (address && strcmp(address, r->o->c.addresses[i]) == 0)
			return (int)i;
	return -1;
}

/* Every address failed before anything came up: say why and stop. */
static void give_up_if_nothing_reachable(struct run *r)
{
	int refused = 0, untrusted = 0;
	if (r->ever_up)
		return;
	for (size_t i = 0; i < r->o->c.naddresses; i++) {
		if (!r->addr[i].failed)
			return;
		refused |= r->addr[i].code == 401;
		untrusted |= r->addr[i].tls_verify;
	}
	erase_line(r);
	for (size_t i = 0; i < r->o->c.naddresses; i++) {
		const struct address_state *a = &r->addr[i];
		if (a->code == 401)
			fprintf(stderr, "execctl: %s refused the token (401)%s\n",
				r->o->c.addresses[i],
				r->o->c.token ? ""
					      : ": it needs one (--token-file or EXECCTL_TOKEN)");
		else if (a->tls_verify)
			fprintf(stderr, "execctl: %s: %s (%s)\n", r->o->c.addresses[i], a->message,
				outcome_tls_hint(a->message, r->o->c.cacert != NULL));
		else if (a->code)
			fprintf(stderr,
				"execctl: %s answered HTTP %d to the websocket upgrade: "
				"not an execserver broker? %s\n",
				r->o->c.addresses[i], a->code, a->message);
		else
			fprintf(stderr, "execctl: cannot reach %s: %s\n", r->o->c.addresses[i],
				a->message);
	}
	finish(r, refused     ? EXECCTL_UNAUTHORIZED
		  : untrusted ? EXECCTL_TLS_VERIFY
			      : EXECCTL_UNREACHABLE);
}

static void on_conn(void *arg, enum exc_conn_event ev, const struct exc_conn_info *info)
{
	struct run *r = arg;
	int i = address_index(r, info->address);

	if (r->o->c.verbose) {
		static const char *const names[] = { "up", "down", "failed", "duplicate",
						     "legacy" };
		erase_line(r);
		fprintf(stderr,
			"execctl: %s: connection %s%s%s (code %d; %u live, %u instances%s)%s%s\n",
			info->address, names[ev], info->instance_id ? " to instance " : "",
			info->instance_id ? info->instance_id : "", info->code, info->connections,
			info->instances, info->covered ? ", covered" : "",
			info->message ? ": " : "", info->message ? info->message : "");
	}
	if (ev == EXC_CONN_UP || ev == EXC_CONN_LEGACY)
		r->ever_up = 1; /* a legacy address (no /broker) is reachable too */
	if (ev != EXC_CONN_FAILED || i < 0)
		return;
	/* 5xx (draining, full) is an instance that is there: keep trying */
	if (info->code >= 500)
		return;
	r->addr[i].failed = 1;
	r->addr[i].code = info->code;
	r->addr[i].tls_verify = info->tls_verify_failed;
	snprintf(r->addr[i].message, sizeof r->addr[i].message, "%s",
		 info->message ? info->message : "connection failed");
	give_up_if_nothing_reachable(r);
}

static void on_position(exc_job *job, const struct exc_position *p, void *arg)
{
	struct run *r = arg;
	if (!r->tty || r->started || !p->state || strcmp(p->state, "waiting") != 0)
		return;
	if (r->have_position && p->ahead >= r->best.ahead)
		return;
	r->best = *p;
	r->have_position = 1;
	char line[160];
	progress_line(line, sizeof line, p->running, p->capacity, p->ahead, p->eta_ms);
	draw_line(r, line);
}

static void on_start(exc_job *job, void *arg)
{
	struct run *r = arg;

	r->started = 1;
	erase_line(r);
}

static void on_progress(exc_job *job, double fraction, const char *text, void *arg)
{
	struct run *r = arg;
	char line[160];

	if (!r->progress_tty || !r->job)
		return;
	progress_running(line, sizeof line, fraction, text);
	draw_line(r, line);
}

static void on_done(exc_job *job, const struct exc_receipt *rc, void *arg)
{
	struct run *r = arg;
	char msg[2048];
	int status = outcome_exit(rc, r->interrupted, r->o->service, msg, sizeof msg);

	erase_line(r);
	r->job = NULL;
	/* A failed job whose output never reached the stream (at most 4000
	 * bytes, kept in the receipt) still shows it, as it would locally. */
	if (outcome_show(rc, msg, stdout, stderr) != 0 && status == 0)
		status = EXECCTL_LOCAL_IO;
	if (r->o->c.verbose && rc->json)
		fprintf(stderr, "execctl: receipt from instance %s: %s\n",
			rc->instance_id ? rc->instance_id : "-", rc->json);
	finish(r, status);
}

/* ---- the loop's own events ----------------------------------------------------- */

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct run *r = arg;
	if (!r->job || r->started)
		return;
	if (r->ticks++ % QUERY_EVERY != 0)
		return;
	r->have_position = 0;
	if (exc_query(r->job) == 0 && !r->line_shown) {
		char line[160];
		snprintf(line, sizeof line, "waiting for an instance that offers '%s'",
			 r->o->service);
		draw_line(r, line);
	}
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct run *r = arg;
	erase_line(r);
	if (r->interrupted || !r->job || exc_cancel(r->job) != 0) {
		fprintf(stderr, "execctl: interrupted\n");
		finish(r, EXECCTL_INTERRUPTED);
		return;
	}
	r->interrupted = 1;
	fprintf(stderr, "execctl: cancelling the job (again to quit at once)\n");
}

/* ---- setup ------------------------------------------------------------------------ */

static struct exc_file *file_args(const struct cli_file_arg *args, size_t n)
{
	struct exc_file *f = calloc(n ? n : 1, sizeof *f);
	for (size_t i = 0; f && i < n; i++) {
		f[i].name = args[i].name;
		f[i].io.kind = EXC_IO_FILE;
		f[i].io.fd = -1;
		f[i].io.path = args[i].path;
	}
	return f;
}

static exc_client *new_client(struct run *r)
{
	struct exc_options opt;
	exc_options_init(&opt);
	opt.client_id = r->o->client_id;
	opt.auth_token = r->o->c.token;
	opt.tls_ca_file = r->o->c.cacert;
	opt.connect_timeout_sec = r->o->timeout_sec;
	if (r->o->ping_timeout_sec)
		opt.ping_timeout_ms = r->o->ping_timeout_sec * 1000u;
	opt.on_conn = on_conn;
	opt.arg = r;
	if (r->o->c.verbose) {
		opt.log = on_log;
		opt.log_level = r->o->c.verbose > 1 ? EXC_LOG_DEBUG : EXC_LOG_INFO;
	}
	exc_client *c = exc_client_new(r->base, &opt);
	if (!c) {
		fprintf(stderr, "execctl: cannot create the client: %s\n", strerror(errno));
		return NULL;
	}
	for (size_t i = 0; i < r->o->c.naddresses; i++)
		if (exc_client_add_address(c, r->o->c.addresses[i]) != 0) {
			fprintf(stderr, "execctl: -a %s: %s\n", r->o->c.addresses[i],
				exc_client_last_error(c));
			exc_client_free(c);
			return NULL;
		}
	return c;
}

static exc_job *submit(struct run *r, char *job_json, struct exc_file *in, struct exc_file *out)
{
	struct exc_job_spec s;
	exc_job_spec_init(&s);
	s.service = r->o->service;
	s.priority = r->o->priority;
	s.job_json = job_json;
	if (!r->o->no_stdin) {
		s.in.kind = EXC_IO_FD;
		s.in.fd = STDIN_FILENO;
	}
	s.out.kind = EXC_IO_FD;
	s.out.fd = STDOUT_FILENO;
	s.inputs = in;
	s.ninputs = r->o->ninputs;
	s.outputs = out;
	s.noutputs = r->o->noutputs;
	s.on_done = on_done;
	s.on_position = on_position;
	s.arg = r;
	exc_job *j = exc_submit(r->client, &s);
	if (!j)
		fprintf(stderr, "execctl: %s\n", exc_client_last_error(r->client));
	else {
		exc_job_on_start(j, on_start);
		exc_job_on_progress(j, on_progress, r);
	}
	return j;
}

int cli_run_job(const struct cli_run *o)
{
	struct run r = { .o = o, .status = -1 };
	struct event *tick = NULL, *sigint = NULL, *sigterm = NULL;
	struct exc_file *in = NULL, *out = NULL;
	char *job_json = cli_run_job_json(o);

	r.tty = !o->quiet && isatty(STDERR_FILENO);
	/* progress only with stdout in a file, or on a device that is not
	 * this terminal: a pipe or socket (`| tee log`, `| less`) may well
	 * end up on this terminal, where redraws would overwrite the output */
	struct stat so, se;
	int same_tty = isatty(STDOUT_FILENO) && fstat(STDOUT_FILENO, &so) == 0 &&
		       fstat(STDERR_FILENO, &se) == 0 && so.st_rdev == se.st_rdev;
	r.progress_tty = r.tty && !same_tty && fstat(STDOUT_FILENO, &so) == 0 &&
			 (S_ISREG(so.st_mode) || S_ISCHR(so.st_mode));
	r.addr = calloc(o->c.naddresses, sizeof *r.addr);
	in = file_args(o->inputs, o->ninputs);
	out = file_args(o->outputs, o->noutputs);
	r.base = event_base_new();
	if (!job_json || !r.addr || !in || !out || !r.base) {
		fprintf(stderr, "execctl: out of memory\n");
		r.status = EXECCTL_FAILED;
		goto out;
	}
	/* a reader that goes away is an EPIPE on stdout, reported, not a kill */
	signal(SIGPIPE, SIG_IGN);
	if (!(r.client = new_client(&r))) {
		r.status = EXECCTL_USAGE;
		goto out;
	}
	if (!(r.job = submit(&r, job_json, in, out))) {
		r.status = errno == EINVAL ? EXECCTL_USAGE : EXECCTL_LOCAL_IO;
		goto out;
	}
	struct timeval tv = { 0, TICK_MS * 1000 };
	tick = event_new(r.base, -1, EV_PERSIST, on_tick, &r);
	sigint = evsignal_new(r.base, SIGINT, on_signal, &r);
	sigterm = evsignal_new(r.base, SIGTERM, on_signal, &r);
	if (!tick || !sigint || !sigterm || event_add(sigint, NULL) || event_add(sigterm, NULL) ||
	    (r.tty && event_add(tick, &tv))) {
		fprintf(stderr, "execctl: out of memory\n");
		r.status = EXECCTL_FAILED;
		goto out;
	}
	event_base_dispatch(r.base);
	erase_line(&r);
	if (r.status < 0)
		r.status = EXECCTL_FAILED;
out:
	if (tick)
		event_free(tick);
	if (sigint)
		event_free(sigint);
	if (sigterm)
		event_free(sigterm);
	exc_client_free(r.client); /* UNWANTs or CANCELs a job still open */
	if (r.base)
		event_base_free(r.base);
	free(in);
	free(out);
	free(r.addr);
	free(job_json);
	return r.status;
}
