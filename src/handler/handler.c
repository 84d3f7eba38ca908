/*
 * handler.c - the handler process cycle (see handler.h): set up the loop,
 * accept, react to mail and signals, drain and exit.
 *
 * Signals: SIGTERM/SIGINT start the drain (stop accepting; running jobs may
 * finish until drainTimeoutSec; then the rest is stopped and every
 * connection closed with 1001); SIGHUP reloads the reloadable keys from the
 * configuration file; SIGCHLD reaps jobs.
 */
#include "autoconfig.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "config/reload.h"
#include "handler/broker.h"
#include "handler/handler.h"
#include "handler/http_conn.h"
#include "handler/instance.h"
#include "handler/listener.h"
#include "handler/mailbox.h"
#include "job/job.h"
#include "job/job_dir.h"
#include "net/http_head.h"
#include "net/ws.h"

struct handler handler;

int handler_host_trusted(const struct http_head *h)
{
	return handler.inst->cfg->auth_token || handler.inst->tls_ctx || http_host_is_address(h);
}

struct book *handler_book_lock(void)
{
	struct book *b = handler.inst->book;
	uint64_t now = clock_mono_ms(); /* read before, not while holding the lock */
	book_handler_asleep(b, (uint32_t)handler.slot, 0); /* at work: mail waits for run_loop */
	int rc = book_lock(b);
	if (rc >= 0)
		book_set_now(b, now);
	if (rc == 1)
		log_warn("want-book repaired: a process died inside the critical section");
	else if (rc < 0) {
		log_error("want-book mutex unusable; exiting");
		_exit(3);
	}
	return b;
}

void handler_book_unlock(void)
{
	uint64_t wake = book_unlock(handler.inst->book);
	uint64_t self = 1ull << handler.slot;

	if (wake & self)
		event_active(handler.mail_ev, EV_READ, 0);
	instance_wake(handler.inst, book_wake_needed(handler.inst->book, wake & ~self));
}

/* The event loop, one turn at a time: before a turn may block, this
 * handler is marked asleep and looks at its mailbox (book.h: whoever mails
 * after the look sees the mark and writes the eventfd); while it works
 * (handler_book_lock) it is marked awake, and a mail for it costs no
 * eventfd write: the next turn's look finds it.  A turn blocks at most
 * once, before any callback has run (EVLOOP_ONCE). */
static void run_loop(void)
{
	struct book *b = handler.inst->book;

	for (;;) {
		book_handler_asleep(b, (uint32_t)handler.slot, 1);
		if (book_mail_pending(b, (uint32_t)handler.slot))
			event_active(handler.mail_ev, EV_READ, 0);
		if (event_base_loop(handler.base, EVLOOP_ONCE) != 0 ||
		    event_base_got_exit(handler.base))
			return;
	}
}

/* EXECSERVER_FAULT=book:<point>[:<n>]: die at the n-th pass (default 1)
 * through <point> inside the book's critical section (first generation of
 * handlers only).  EXECSERVER_FAULT=book:random:<n>[:<seed>]: every
 * generation dies at any point with probability 1/n per pass (the chaos
 * test); with a seed, the draws of the handler in slot i come from seed + i,
 * so that a test run repeats its draws (which pass they meet still depends
 * on the traffic). */
static const char *fault_point;
static long fault_countdown;
static long fault_one_in; /* random mode: 1/n per pass; 0: off */

static void fault_hook(const char *point)
{
	int die;

	if (fault_one_in > 0)
		die = random() % fault_one_in == 0;
	else
		die = fault_point && strcmp(point, fault_point) == 0 && --fault_countdown == 0;
	if (die) {
		log_warn("fault injection: dying at %s", point);
		_exit(86);
	}
}

int fault_spec_every_generation(const char *env)
{
	return env && strncmp(env, "book:random", 11) == 0 && (env[11] == '\0' || env[11] == ':');
}

static void setup_fault_injection(void)
{
	static char spec[128];
	const char *env = getenv("EXECSERVER_FAULT");

	if (!env || strncmp(env, "book:", 5) != 0)
		return;
	snprintf(spec, sizeof spec, "%s", env + 5);
	char *colon = strchr(spec, ':');
	char *seed = NULL;
	long n = 1;
	if (colon) {
		*colon = '\0';
		n = strtol(colon + 1, &seed, 10);
		if (n < 1)
			n = 1;
		seed = *seed == ':' ? seed + 1 : NULL;
	}
	if (fault_spec_every_generation(env)) {
		fault_one_in = n;
		srandom(seed ? (unsigned)strtoul(seed, NULL, 10) + (unsigned)handler.slot
			     : (unsigned)getpid() ^ (unsigned)clock_mono_ms());
		log_info("fault injection armed: book:random, 1 in %ld passes", n);
	} else {
		fault_point = spec;
		fault_countdown = n;
		log_info("fault injection armed: book:%s pass %ld", fault_point, n);
	}
	book_set_fault_hook(fault_hook);
}

static int is_draining(void)
{
	return handler.draining;
}

void handler_maybe_exit(void)
{
	if (handler.draining && job_running_count() == 0 && handler.nbroker == 0 &&
	    handler.nhttp == 0)
		event_base_loopexit(handler.base, NULL);
}

static void drain_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	log_info("drain timeout: stopping %u running job(s)", job_running_count());
	job_stop_all();
}

static void start_drain(void)
{
	if (handler.draining)
		return;
	/* Keep accepting: a client that connects now is told 503 (and may
	 * read /status) rather than left to a refused or reset connection. */
	handler.draining = 1;
	struct timeval tv = { handler.inst->cfg->drain_timeout_sec, 0 };
	evtimer_add(handler.drain_ev, &tv);
	log_info("draining: %u job(s) running, %u connection(s)", job_running_count(),
		 handler.nbroker);
	broker_drain_check();
}

static void handle_signal(int sig)
{
	switch (sig) {
	case SIGTERM:
	case SIGINT: start_drain(); break;
	case SIGHUP: {
		struct es_config fresh;
		struct config_error err;
		log_reopen();
		if (config_load(handler.inst->config_path, &fresh, &err) != 0) {
			log_error("reload refused: %s", err.text);
			break;
		}
		config_take_reloadable(handler.inst->cfg, &fresh, handler.inst->log_level_fixed);
		log_set_level((enum log_level)handler.inst->cfg->log_level);
		config_free(&fresh);
		break;
	}
	case SIGCHLD: job_reap(); break;
	}
}

/* Signals arrive through a signalfd: the master's libevent signal
 * handlers, inherited across fork, then never run in a handler. */
static void on_signalfd(evutil_socket_t fd, short what, void *arg)
{
	/* everything pending in one read: a short read means no more (no
	 * second read to meet EAGAIN) */
	struct signalfd_siginfo si[8];
	ssize_t n;
	do {
		n = read(fd, si, sizeof si);
		for (ssize_t i = 0; i < n / (ssize_t)sizeof si[0]; i++)
			handle_signal((int)si[i].ssi_signo);
	} while (n == (ssize_t)sizeof si);
}

void handler_main(struct instance *inst, int slot)
{
	static const int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGCHLD };
	sigset_t mask;

	sigemptyset(&mask);
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		sigaddset(&mask, sigs[i]);
		signal(sigs[i], SIG_DFL);
	}
	/* The master forked us with every signal blocked: keep ours blocked
	 * (they come through the signalfd) and unblock the rest. */
	sigprocmask(SIG_SETMASK, &mask, NULL);
	int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);

	memset(&handler, 0, sizeof handler);
	handler.inst = inst;
	handler.slot = slot;
	snprintf(handler.name, sizeof handler.name, "handler %d", slot);
	log_set_process(handler.name);
	setup_fault_injection();

	/* Only our own listener; the master keeps the others. */
	for (int i = 0; i < inst->nhandlers; i++)
		if (i != slot)
			close(inst->listen_fd[i]);

	handler.base = event_base_new();
	handler.by_book_idx = calloc((size_t)inst->cfg->max_connections,
				     sizeof *handler.by_book_idx);
	if (!handler.base || !handler.by_book_idx) {
		log_error("out of memory at start");
		_exit(2);
	}
	handler.wake_ev = event_new(handler.base, inst->wake_fd[slot], EV_READ | EV_PERSIST,
				    mailbox_on_wake, NULL);
	handler.mail_ev = event_new(handler.base, -1, 0, mailbox_on_wake, NULL);
	handler.hello_ev = evtimer_new(handler.base, broker_hello_cb, NULL);
	handler.drain_ev = evtimer_new(handler.base, drain_deadline_cb, NULL);
	handler.pinger = ws_pinger_new(handler.base);
	if (!handler.pinger) {
		log_error("out of memory at start");
		_exit(2);
	}
	event_add(handler.wake_ev, NULL);
	handler.sig_ev = event_new(handler.base, sfd, EV_READ | EV_PERSIST, on_signalfd, NULL);
	if (sfd < 0 || !handler.sig_ev || event_add(handler.sig_ev, NULL) != 0) {
		log_error("signalfd: %s", strerror(errno));
		_exit(2);
	}
	/* job_init reads the signal dispositions for spawning (spawn.c): no
	 * sigaction after it */
	struct job_host host = { .base = handler.base,
				 .cfg = inst->cfg,
				 .slot = slot,
				 .nslots = inst->nhandlers,
				 .default_nofile = inst->jobs_nofile,
				 .book_lock = handler_book_lock,
				 .book_unlock = handler_book_unlock,
				 .draining = is_draining,
				 .progress = broker_job_progress,
				 .job_ended = broker_drain_check };
	if (job_init(&host) != 0 || listener_start(inst->listen_fd[slot]) != 0)
		_exit(2);

	/* Mail may have been queued for this slot before we existed. */
	event_active(handler.mail_ev, EV_READ, 0);
	run_loop();

	job_dir_drop_spares();
	log_info("stopped");
	_exit(0);
}
