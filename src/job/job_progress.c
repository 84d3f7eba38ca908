/*
 * job_progress.c - see job_progress.h.
 *
 * The latest good value is `held` until it goes out: at once when the
 * last one went out JOB_PROGRESS_INTERVAL_MS ago or longer, else when the
 * timer fires at that moment.  Fractions are floored to 1/10000 (what
 * the wire carries, 4 decimals) when read; a value equal to the last one
 * sent (same quantized fraction and text) is not sent again.
 *
 * Read budget: at most JOB_PROGRESS_READ_BUDGET bytes per
 * JOB_PROGRESS_INTERVAL_MS window.  Once a job has used it, its read
 * event is removed until the window ends (the pause timer); its pipe
 * fills and the writer blocks, so a job that floods fd 3 costs the
 * handler a bounded share of CPU however long it runs.  At the end
 * (job_progress_finish) the pipe is drained regardless, to EAGAIN.
 */
#include "autoconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/clock.h"
#include "job/job_progress.h"
#include "job/progress_line.h"

struct job_progress {
	struct progress_reader reader;
	struct event *read_ev, *timer_ev, *pause_ev;
	int fd; /* the read end, -1 once at EOF or finished */
	int finished;
	job_progress_send_fn send;
	void *arg;
	uint64_t last_sent_ms; /* 0: nothing sent yet */
	int held;              /* latest is newer than what was sent */
	uint64_t window_ms;    /* start of the current read window */
	size_t window_bytes;   /* read in it */
	int sent_any;
	struct progress_value latest, sent;
};

static void send_held(struct job_progress *p)
{
	if (!p->held)
		return;
	p->held = 0;
	if (p->sent_any && p->sent.fraction == p->latest.fraction &&
	    strcmp(p->sent.text, p->latest.text) == 0)
		return;
	p->sent = p->latest;
	p->sent_any = 1;
	p->last_sent_ms = clock_mono_ms();
	p->send(p->arg, p->sent.fraction, p->sent.text);
}

static void on_value(void *arg, const struct progress_value *v)
{
	struct job_progress *p = arg;
	p->latest = *v;
	/* floor to the wire's 4 decimals: 0.99996 is not yet 1 (done) */
	p->latest.fraction = (double)(uint64_t)(v->fraction * 10000 + 1e-6) / 10000;
	if (p->latest.fraction > 1)
		p->latest.fraction = 1;
	p->held = 1;
}

/* After new values: send now, or when the interval is over. */
static void schedule(struct job_progress *p)
{
	if (!p->held || p->finished || evtimer_pending(p->timer_ev, NULL))
		return;
	uint64_t now = clock_mono_ms();
	if (!p->sent_any || now - p->last_sent_ms >= JOB_PROGRESS_INTERVAL_MS) {
		send_held(p);
		return;
	}
	uint64_t wait = JOB_PROGRESS_INTERVAL_MS - (now - p->last_sent_ms);
	struct timeval tv = { 0, (suseconds_t)(wait * 1000) };
	evtimer_add(p->timer_ev, &tv);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	send_held(arg);
}

static void stop_reading(struct job_progress *p)
{
	if (p->read_ev) {
		event_free(p->read_ev);
		p->read_ev = NULL;
	}
	if (p->fd >= 0) {
		close(p->fd);
		p->fd = -1;
	}
}

/* Reads up to max bytes, or until EAGAIN; the bytes read are
 * added to *got.  1 when the stream ended (a real EOF or an error): only
 * then does a last line without LF count. */
static int read_some(struct job_progress *p, size_t max, size_t *got)
{
	char buf[16384];

	while (max) {
		ssize_t n = read(p->fd, buf, sizeof buf < max ? sizeof buf : max);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0) {
			progress_reader_end(&p->reader, on_value, p);
			return 1;
		}
		progress_reader_feed(&p->reader, buf, (size_t)n, on_value, p);
		max -= (size_t)n;
		*got += (size_t)n;
	}
	return 0;
}

static void pause_cb(evutil_socket_t fd, short what, void *arg)
{
	struct job_progress *p = arg;
	(void)fd;
	(void)what;
	p->window_ms = clock_mono_ms();
	p->window_bytes = 0;
	if (p->read_ev && !p->finished)
		event_add(p->read_ev, NULL);
}

static void read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct job_progress *p = arg;
	(void)fd;
	(void)what;
	uint64_t now = clock_mono_ms();
	if (now - p->window_ms >= JOB_PROGRESS_INTERVAL_MS) {
		p->window_ms = now;
		p->window_bytes = 0;
	}
	if (read_some(p, JOB_PROGRESS_READ_BUDGET - p->window_bytes, &p->window_bytes)) {
		stop_reading(p);
	} else if (p->window_bytes >= JOB_PROGRESS_READ_BUDGET) {
		/* budget used: no reading until the window ends */
		uint64_t wait = JOB_PROGRESS_INTERVAL_MS - (now - p->window_ms);
		struct timeval tv = { 0, (suseconds_t)(wait * 1000) };
		event_del(p->read_ev);
		evtimer_add(p->pause_ev, &tv);
	}
	schedule(p);
}

struct job_progress *job_progress_new(struct event_base *base, int *child_fd,
				      job_progress_send_fn send, void *arg)
{
	struct job_progress *p = calloc(1, sizeof *p);
	int fds[2];

	if (!p)
		return NULL;
	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
		free(p);
		return NULL;
	}
	/* the write end must not be a stdio number of the child (spawn.h) */
	if (fds[1] < 3) {
		int hi = fcntl(fds[1], F_DUPFD_CLOEXEC, 3);
		close(fds[1]);
		fds[1] = hi;
	}
	/* the program's end blocks as a pipe normally does */
	if (fds[1] >= 0)
		fcntl(fds[1], F_SETFL, 0);
	p->fd = fds[0];
	p->send = send;
	p->arg = arg;
	p->read_ev = event_new(base, p->fd, EV_READ | EV_PERSIST, read_cb, p);
	p->timer_ev = evtimer_new(base, timer_cb, p);
	p->pause_ev = evtimer_new(base, pause_cb, p);
	p->window_ms = clock_mono_ms();
	if (fds[1] < 0 || !p->read_ev || !p->timer_ev || !p->pause_ev ||
	    event_add(p->read_ev, NULL) != 0) {
		int err = errno ? errno : ENOMEM;
		if (fds[1] >= 0)
			close(fds[1]);
		job_progress_free(p);
		errno = err;
		return NULL;
	}
	*child_fd = fds[1];
	return p;
}

void job_progress_finish(struct job_progress *p)
{
	if (!p || p->finished)
		return;
	if (p->fd >= 0) {
		/* what the program wrote before it ended is in the pipe now:
		 * read to EAGAIN, at most what the pipe can hold (a descendant
		 * that still holds the write end and keeps writing is not
		 * waited for, and its unfinished line is not a value). */
		size_t got = 0;
		int cap = fcntl(p->fd, F_GETPIPE_SZ);
		read_some(p, cap > 0 ? (size_t)cap : 1024 * 1024, &got);
		stop_reading(p);
	}
	evtimer_del(p->timer_ev);
	evtimer_del(p->pause_ev);
	send_held(p);
	p->finished = 1;
}

void job_progress_counts(const struct job_progress *p, uint64_t *good, uint64_t *bad)
{
	/* a skipped line was replaced by a later one before it was parsed:
	 * counted as read (good), never as refused */
	*good = p ? p->reader.good + p->reader.skipped : 0;
	*bad = p ? p->reader.bad : 0;
}

void job_progress_free(struct job_progress *p)
{
	if (!p)
		return;
	stop_reading(p);
	if (p->timer_ev)
		event_free(p->timer_ev);
	if (p->pause_ev)
		event_free(p->pause_ev);
	free(p);
}
