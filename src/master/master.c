/*
 * master.c - the master process cycle (see master.h).
 *
 * The master never touches a client socket.  It owns the lifetime of the
 * instance: it creates the segment and listeners, forks the handlers, and
 * when one dies it purges that handler's connections from the book, kills
 * the process groups of its jobs, re-grants the freed slots (book_purge
 * does it under the lock) and forks a replacement.  A handler that dies
 * again within a second of its start is replaced after a doubling back-off
 * (0.1 s up to 10 s) so a crash loop cannot spin the CPU.
 *
 * Stopping (SIGTERM/SIGINT): the book is marked draining (no new grants;
 * HELLO tells the clients), the handlers get SIGTERM and finish their
 * running jobs for up to drainTimeoutSec, then exit; the master exits 0
 * when the last one is gone, or kills stragglers drainTimeoutSec + 5 s
 * after the signal, after writing the auto-balance profile snapshot
 * (profile_keeper.c, which also restores it at start and writes it while
 * running).
 */
#include "autoconfig.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/clock.h"
#include "common/daemonize.h"
#include "common/log.h"
#include "common/pidfile.h"
#include "config/reload.h"
#include "handler/handler.h"
#include "handler/instance.h"
#include "job/janitor.h"
#include "master/master.h"
#include "master/privileges.h"
#include "master/profile_keeper.h"
#include "master/segment.h"
#include "master/tls_context.h"

#define EXPIRE_TICK_MS 100
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 10000
#define QUICK_DEATH_MS 1000

struct handler_slot {
	pid_t pid; /* 0 while not running */
	uint64_t started_ms;
	uint32_t backoff_ms;   /* delay before the next respawn */
	struct event *respawn; /* pending delayed respawn */
	unsigned restarts;
};

static struct master {
	struct instance inst;
	const struct master_options *opt;
	struct event_base *base;
	struct handler_slot slots[BOOK_MAX_HANDLERS];
	int stopping;
	struct event *stop_deadline;
	struct tls_files tls_files; /* what the TLS context was made from */
	int pid_fd;                 /* the locked pid file (pidfile.h), or -1 */
	int ready_fd;               /* daemonize_ready's, or -1 */
} M = { .pid_fd = -1, .ready_fd = -1 };

static int spawn_handler(int slot);

/* Locks the book; a repair is logged, an unusable mutex is fatal (nothing
 * can be decided without the book). */
static struct book *lock_book(void)
{
	int rc = book_lock(M.inst.book);
	if (rc < 0) {
		log_error("want-book mutex unusable; stopping");
		for (int i = 0; i < M.inst.nhandlers; i++)
			if (M.slots[i].pid)
				kill(M.slots[i].pid, SIGKILL);
		_exit(2);
	}
	if (rc == 1)
		log_warn("want-book repaired: a process died inside its critical section");
	book_set_now(M.inst.book, clock_mono_ms());
	return M.inst.book;
}

/* Unlocks the book and wakes the handlers that have mail from the section
 * (a repair by lock_book queues mail too, whatever the section did). */
static void unlock_book(void)
{
	instance_wake(&M.inst, book_unlock(M.inst.book));
}

static const struct keeper_lock keeper_lock = { lock_book, unlock_book };

static void respawn_cb(evutil_socket_t fd, short what, void *arg)
{
	int slot = (int)(intptr_t)arg;
	if (!M.stopping)
		spawn_handler(slot);
}

static int spawn_handler(int slot)
{
	sigset_t all, old;

	/* Signals stay blocked across fork until the child has replaced the
	 * master's libevent handlers (which would write to the master's
	 * signal pipe) with the defaults. */
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	pid_t pid = fork();
	if (pid == 0) {
		static const int sigs[] = { SIGCHLD, SIGTERM, SIGINT, SIGHUP };
		for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
			signal(sigs[i], SIG_DFL);
		/* still blocked: handler_main takes them over with a signalfd
		 * and unblocks the rest */
	} else {
		sigprocmask(SIG_SETMASK, &old, NULL);
	}

	if (pid < 0) {
		log_error("fork handler %d: %s", slot, strerror(errno));
		/* try again later rather than give up on the slot */
		struct timeval tv = { 1, 0 };
		evtimer_add(M.slots[slot].respawn, &tv);
		return -1;
	}
	if (pid == 0) {
		/* The child never runs the master's loop and must not free it:
		 * its epoll registrations are shared with the parent. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != M.inst.master_pid)
			_exit(0);
		handler_main(&M.inst, slot);
	}
	M.slots[slot].pid = pid;
	M.slots[slot].started_ms = clock_mono_ms();
	book_handler_started(lock_book(), (uint32_t)slot, (int32_t)pid);
	unlock_book();
	log_info("handler %d started, pid %d", slot, (int)pid);
	return 0;
}

static int slot_of(pid_t pid)
{
	for (int i = 0; i < M.inst.nhandlers; i++)
		if (M.slots[i].pid == pid)
			return i;
	return -1;
}

static int all_stopped(void)
{
	for (int i = 0; i < M.inst.nhandlers; i++)
		if (M.slots[i].pid)
			return 0;
	return 1;
}

/* A handler is gone: drop its connections and jobs from the book. */
static void purge_handler(int slot)
{
	int32_t pgids[4096];
	size_t n = book_purge_handler(lock_book(), (uint32_t)slot, pgids,
				      sizeof pgids / sizeof pgids[0]);
	unlock_book();
	for (size_t i = 0; i < n; i++)
		if (pgids[i] > 1)
			kill(-pgids[i], SIGKILL);
	if (n)
		log_info("killed %zu job process group(s) of handler %d", n, slot);
}

static void reap(void)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		int slot = slot_of(pid);
		if (slot < 0)
			continue;
		struct handler_slot *s = &M.slots[slot];
		s->pid = 0;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && M.stopping)
			log_info("handler %d (pid %d) stopped", slot, (int)pid);
		else if (WIFEXITED(status))
			log_warn("handler %d (pid %d) exited with status %d", slot, (int)pid,
				 WEXITSTATUS(status));
		else if (WIFSIGNALED(status))
			log_warn("handler %d (pid %d) killed by signal %d (%s)", slot, (int)pid,
				 WTERMSIG(status), strsignal(WTERMSIG(status)));
		purge_handler(slot);

		if (M.stopping)
			continue;
		uint64_t lived = clock_mono_ms() - s->started_ms;
		if (lived < QUICK_DEATH_MS)
			s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : BACKOFF_MIN_MS;
		else
			s->backoff_ms = 0;
		if (s->backoff_ms > BACKOFF_MAX_MS)
			s->backoff_ms = BACKOFF_MAX_MS;
		s->restarts++;
		if (s->backoff_ms == 0) {
			spawn_handler(slot);
		} else {
			struct timeval tv = { s->backoff_ms / 1000, (s->backoff_ms % 1000) * 1000 };
			log_warn("handler %d dies quickly; replacing it in %u ms", slot,
				 s->backoff_ms);
			evtimer_add(s->respawn, &tv);
		}
	}
	if (M.stopping && all_stopped())
		event_base_loopexit(M.base, NULL);
}

static void on_sigchld(evutil_socket_t sig, short what, void *arg)
{
	reap();
}

static void stop_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	for (int i = 0; i < M.inst.nhandlers; i++)
		if (M.slots[i].pid) {
			log_warn("handler %d did not stop in time; killing it", i);
			kill(M.slots[i].pid, SIGKILL);
		}
}

static void on_sigterm(evutil_socket_t sig, short what, void *arg)
{
	if (M.stopping)
		return;
	M.stopping = 1;
	log_info("stopping: draining (up to %d s)", M.inst.cfg->drain_timeout_sec);
	book_set_draining(lock_book());
	unlock_book();
	for (int i = 0; i < M.inst.nhandlers; i++) {
		if (M.slots[i].respawn)
			evtimer_del(M.slots[i].respawn);
		if (M.slots[i].pid)
			kill(M.slots[i].pid, SIGTERM);
	}
	struct timeval tv = { M.inst.cfg->drain_timeout_sec + 5, 0 };
	M.stop_deadline = evtimer_new(M.base, stop_deadline_cb, NULL);
	evtimer_add(M.stop_deadline, &tv);
	if (all_stopped())
		event_base_loopexit(M.base, NULL);
}

static void on_sighup(evutil_socket_t sig, short what, void *arg)
{
	struct es_config fresh;
	struct config_error err;

	log_reopen();
	if (config_load(M.opt->config_path, &fresh, &err) != 0) {
		log_error("reload refused: %s", err.text);
		return;
	}
	char changed[512];
	if (M.opt->pid_file_override) { /* -p wins over the file, as at the start */
		free(fresh.pid_file);
		fresh.pid_file = strdup(M.opt->pid_file_override);
	}
	if (config_restart_keys(M.inst.cfg, &fresh, changed, sizeof changed) > 0)
		log_warn("reload: %s changed in the file and keep their old values until a "
			 "restart",
			 changed);
	config_take_reloadable(M.inst.cfg, &fresh, M.opt->log_level_override >= 0);
	if (M.inst.tls_ctx && tls_files_changed(M.inst.cfg, &M.tls_files))
		log_warn("reload: the TLS certificate or key changed on disk; the listener "
			 "keeps the one it started with until a restart");
	log_set_level((enum log_level)M.inst.cfg->log_level);
	config_free(&fresh);
	for (int i = 0; i < M.inst.nhandlers; i++)
		if (M.slots[i].pid)
			kill(M.slots[i].pid, SIGHUP);
	log_info("configuration reloaded from %s", M.opt->config_path);
}

static void expire_cb(evutil_socket_t fd, short what, void *arg)
{
	book_expire(lock_book(), clock_mono_ms());
	unlock_book();
	profile_keeper_tick(&M.inst, &keeper_lock, clock_mono_ms(), 0);
}

/* Tells the process that started a daemon how the start went. */
static void report_ready(int status)
{
	if (daemonize_ready(&M.ready_fd, status) != 0)
		log_warn("could not report the start to the starting process");
}

/*
 * Every connection is a descriptor in the handler that holds it, and the
 * kernel may give one handler most of them; each running job adds a few
 * (its pipes, its transfers).  Raise the soft limit to what maxConnections
 * needs, up to the hard limit, so that the configured limit, not EMFILE,
 * is what clients meet.
 */
static void raise_descriptor_limit(const struct es_config *cfg)
{
	struct rlimit rl;
	rlim_t need = (rlim_t)cfg->max_connections + 256, before;

	for (size_t i = 0; i < cfg->nwaitgroups; i++)
		need += 8 * (rlim_t)cfg->waitgroups[i].processes;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need)
		return;
	before = rl.rlim_cur;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
	if (rl.rlim_cur > before && setrlimit(RLIMIT_NOFILE, &rl) == 0) {
		log_info("descriptor limit raised to %llu", (unsigned long long)rl.rlim_cur);
		/* jobs get the limit the daemon was started with, not this one */
		M.inst.jobs_nofile = (unsigned long long)before;
	} else {
		rl.rlim_cur = before;
	}
	if (rl.rlim_cur < need)
		log_warn("maxConnections %d needs about %llu descriptors, but the hard limit is "
			 "%llu: raise it (ulimit -n, LimitNOFILE) or lower maxConnections",
			 cfg->max_connections, (unsigned long long)need,
			 (unsigned long long)rl.rlim_max);
}

int master_prepare(const struct master_options *opt, struct es_config *cfg, char *why, size_t len)
{
	M.inst.cfg = cfg;
	M.inst.nhandlers = config_effective_handlers(cfg);
	if (!opt->foreground && cfg->pid_file &&
	    (M.pid_fd = pidfile_lock(cfg->pid_file, why, len)) < 0)
		return -1;
	if (listeners_create(&M.inst, why, len) == 0)
		return 0;
	if (M.pid_fd >= 0) { /* ours, still empty: the running instance has another */
		unlink(cfg->pid_file);
		close(M.pid_fd);
		M.pid_fd = -1;
	}
	return -1;
}

int master_run(const struct master_options *opt, struct es_config *cfg)
{
	int nhandlers = M.inst.nhandlers;
	int rc = 2;

	M.opt = opt;
	M.ready_fd = opt->ready_fd;
	M.inst.config_path = opt->config_path;
	M.inst.log_level_fixed = opt->log_level_override >= 0;
	signal(SIGPIPE, SIG_IGN);
	log_info("listening on %s (%d handlers)", M.inst.listen_addr, nhandlers);
	raise_descriptor_limit(cfg);
	if (segment_create(&M.inst, cfg, nhandlers) != 0 || janitor_prepare(cfg) != 0) {
		report_ready(2);
		goto out;
	}
	char why[512];
	M.inst.tls_ctx = tls_context_create(cfg, why, sizeof why);
	if (why[0]) {
		log_error("%s", why);
		report_ready(2);
		goto out;
	}
	tls_files_note(cfg, &M.tls_files);
	profile_keeper_restore(&M.inst, &keeper_lock);
	if (M.pid_fd >= 0 && pidfile_write(M.pid_fd, why, sizeof why) != 0) {
		log_error("%s: %s", cfg->pid_file, why);
		report_ready(2);
		goto out;
	}
	/* Everything that needs root is done: tempDir goes to the user, then
	 * the master becomes that user before it forks anything. */
	if (opt->priv &&
	    (privileges_give_temp_dir(opt->priv, cfg->temp_dir, why, sizeof why) != 0 ||
	     privileges_drop(opt->priv, why, sizeof why) != 0)) {
		log_error("%s; not starting", why);
		report_ready(2);
		goto out;
	}
	if (opt->priv && opt->priv->drop)
		log_info("running as user %s (uid %u, gid %u)", opt->priv->user,
			 (unsigned)opt->priv->uid, (unsigned)opt->priv->gid);

	M.base = event_base_new();
	if (!M.base)
		goto out;
	struct event *ev_chld = evsignal_new(M.base, SIGCHLD, on_sigchld, NULL);
	struct event *ev_term = evsignal_new(M.base, SIGTERM, on_sigterm, NULL);
	struct event *ev_int = evsignal_new(M.base, SIGINT, on_sigterm, NULL);
	struct event *ev_hup = evsignal_new(M.base, SIGHUP, on_sighup, NULL);
	struct event *ev_tick = event_new(M.base, -1, EV_PERSIST, expire_cb, NULL);
	struct timeval tick = { 0, EXPIRE_TICK_MS * 1000 };
	evsignal_add(ev_chld, NULL);
	evsignal_add(ev_term, NULL);
	evsignal_add(ev_int, NULL);
	evsignal_add(ev_hup, NULL);
	evtimer_add(ev_tick, &tick);

	log_info("execserver %s instance %s, %d handler(s)", PACKAGE_VERSION, M.inst.instance_name,
		 nhandlers);
	if (getenv("EXECSERVER_FAULT"))
		log_warn("EXECSERVER_FAULT=%s is set: handlers will die on purpose (fault "
			 "injection for the test suite; unset it)",
			 getenv("EXECSERVER_FAULT"));
	/* Listening: the starting process may exit now (and no handler keeps
	 * the pipe open). */
	report_ready(0);
	for (int i = 0; i < nhandlers; i++) {
		M.slots[i].respawn = evtimer_new(M.base, respawn_cb, (void *)(intptr_t)i);
		spawn_handler(i);
	}
	/* The fault switch is for the first generation only, so a test that
	 * kills a handler through it sees a healthy replacement; the random
	 * mode (the chaos test) is for every generation. */
	const char *fault = getenv("EXECSERVER_FAULT");
	if (fault && !fault_spec_every_generation(fault))
		unsetenv("EXECSERVER_FAULT");

	event_base_dispatch(M.base);
	/* Stopped: a second SIGTERM (an init script's retry, a supervisor)
	 * must not turn the clean exit into a death by signal once the
	 * events below are freed and libevent puts the default action back. */
	sigset_t stopping;
	sigemptyset(&stopping);
	sigaddset(&stopping, SIGTERM);
	sigaddset(&stopping, SIGINT);
	sigaddset(&stopping, SIGHUP);
	sigprocmask(SIG_BLOCK, &stopping, NULL);
	reap();
	profile_keeper_tick(&M.inst, &keeper_lock, clock_mono_ms(), 1);
	log_info("stopped");
	rc = 0;

	event_free(ev_chld);
	event_free(ev_term);
	event_free(ev_int);
	event_free(ev_hup);
	event_free(ev_tick);
	for (int i = 0; i < nhandlers; i++)
		if (M.slots[i].respawn)
			event_free(M.slots[i].respawn);
	if (M.stop_deadline)
		event_free(M.stop_deadline);
	event_base_free(M.base);
out:
	tls_context_free(M.inst.tls_ctx);
	M.inst.tls_ctx = NULL;
	if (M.pid_fd >= 0)
		unlink(cfg->pid_file); /* fails once privileges are dropped: harmless (pidfile.h) */
	config_free(cfg);
	free(cfg);
	return rc;
}
