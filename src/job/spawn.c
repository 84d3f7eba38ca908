/*
 * spawn.c - see spawn.h.
 *
 * clone(CLONE_VM) without CLONE_VFORK: like vfork, the child borrows the
 * handler's memory until execve (no page-table copy of a big handler); unlike
 * vfork, the handler does not sleep until the exec but returns to its loop
 * (the child may wait for a CPU behind the running jobs, and the WANTs of
 * the handler's other connections would wait with it).  Hence:
 *  - The child runs on a stack of its own, a slot of a pool (a mapping with
 *    a guard page; the program path, working directory and limits copied
 *    to its top), which returns to the pool only at spawn_reaped: by then
 *    the child has exec'd or exited.  The caller's argv and envp must stay
 *    until then as well.
 *  - The child writes no memory the handler uses, only its own stack: it
 *    makes raw system calls (inline syscall instructions, never a libc
 *    wrapper: glibc's errno is thread-local, and a CLONE_VM child without
 *    a TLS of its own would write the handler's errno at any moment), and
 *    no sanitizer instruments it.  A failed step is reported as its errno
 *    written into the slot's child_args (its own stack, in the memory it
 *    shares with the handler) before _exit(127); spawn_reaped reads it
 *    when the child ended with 127 (a program that exec'd and exited 127
 *    had its own memory by then: the report stays 0).  No pipe, so no
 *    pipe2 and two close per job.
 *  - What the child sets up that the handler relies on as soon as this
 *    returns is made sure of from both sides: the parent also calls
 *    setpgid (a kill of the job's group right after the spawn reaches the
 *    child), and the child, after PR_SET_PDEATHSIG, checks that its parent
 *    is still the spawner (if the spawner died before the prctl, no death
 *    signal would come: the child exits).
 * Under valgrind, which runs a CLONE_VM child only as a vfork (and that as
 * a fork), the clone adds CLONE_VFORK: the spawner waits for the exec as
 * vfork did; as valgrind's vfork is a fork, the child's memory is not the
 * spawner's there, so the report goes through a pipe of the slot's
 * (non-blocking, close-on-exec, above the extra descriptor's number; the
 * read end kept with the slot until spawn_reaped) instead.  Raw system calls are written
 * for x86-64 and AArch64.  Elsewhere (or built with -DES_SPAWN_VFORK=1, as
 * tests/unit/test_spawn_vfork is) the spawn is always such a vfork: the
 * child's system calls go through libc's syscall() (and its signal steps
 * through sigaction and sigprocmask), whose errno is the spawner's, which
 * sleeps until the exec and gets its errno back.
 * Where the process catches a signal, signals are blocked across the clone
 * so that no signal handler can run in the child; the child resets to the
 * default every disposition that is not (ignored ones survive execve,
 * caught ones would run on the borrowed memory if a signal came between
 * the unblock and the exec) and then unblocks everything.  Which
 * dispositions those are is read once (spawn_init): the handler takes its
 * signals through a signalfd and installs no handler after that, so it
 * catches none and spawns without the two sigprocmask calls around the
 * clone (a signal in the child before its exec then meets only default or
 * ignore dispositions, as it would after the child's unblock).
 */
#include "autoconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/close_range.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/valgrind_probe.h"
#include "job/spawn.h"

#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

static int is_executable_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int spawn_find_program(const char *prog, char *out, size_t outlen)
{
	const char *path, *dir;
	size_t plen;

	if (!prog || !*prog) {
		errno = ENOENT;
		return -1;
	}
	plen = strlen(prog);
	if (strchr(prog, '/')) {
		if (prog[0] != '/') {
			errno = EINVAL;
			return -1;
		}
		if (!is_executable_file(prog)) {
			errno = ENOENT;
			return -1;
		}
		if (plen >= outlen) {
			errno = ENAMETOOLONG;
			return -1;
		}
		memcpy(out, prog, plen + 1);
		return 0;
	}
	path = getenv("PATH");
	if (!path || !*path)
		path = DEFAULT_PATH;
	for (dir = path; dir;) {
		const char *end = strchr(dir, ':');
		size_t dlen = end ? (size_t)(end - dir) : strlen(dir);

		/* Empty and relative entries would search the working directory. */
		if (dlen > 0 && dir[0] == '/') {
			if (dlen + 1 + plen >= outlen) {
				errno = ENAMETOOLONG;
				return -1;
			}
			memcpy(out, dir, dlen);
			out[dlen] = '/';
			memcpy(out + dlen + 1, prog, plen + 1);
			if (is_executable_file(out))
				return 0;
		}
		dir = end ? end + 1 : NULL;
	}
	if (outlen)
		out[0] = '\0';
	errno = ENOENT;
	return -1;
}

/* Signals whose disposition is not the default in this process (bit
 * sig - 1; the child reads it as plain memory, no sigismember). */
static uint64_t not_default;
static int any_caught; /* a disposition is a handler function */
static int initialised;
/* /dev/null for reading and for writing, open once (close-on-exec): the
 * stdio of a job that has none, without an open in every child */
static int devnull[2] = { -1, -1 };
/* /proc/thread-self/children of the thread that called spawn_init, open
 * once: a read at offset 0 lists the children anew (seq_file) */
static int children_fd = -1;

void spawn_init(void)
{
	/* Orphans of jobs (a daemonising converter, a setsid child) become
	 * children of this process instead of init's: job_reap reaps them,
	 * spawn_other_children sees them. */
	(void)prctl(PR_SET_CHILD_SUBREAPER, 1);
	not_default = 0;
	for (int sig = 1; sig < NSIG && sig <= 64; sig++) {
		struct sigaction sa;
		if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &sa) != 0)
			continue;
		if (sa.sa_handler != SIG_DFL)
			not_default |= 1ull << (sig - 1);
		if ((sa.sa_flags & SA_SIGINFO) ||
		    (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN))
			any_caught = 1;
	}
	if (devnull[0] < 0)
		devnull[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (devnull[1] < 0)
		devnull[1] = open("/dev/null", O_WRONLY | O_CLOEXEC);
	/* the process's main thread is where orphans are reparented; the
	 * handler calls this from it (thread-self: no getpid) */
	if (children_fd < 0)
		children_fd = open("/proc/thread-self/children", O_RDONLY | O_CLOEXEC);
	initialised = 1;
}

/* ---- the child: raw system calls on its own stack ---------------------- */

/* ES_SPAWN_VFORK: the child runs while the spawner sleeps (CLONE_VFORK),
 * and may call libc (see the top of this file). */
#ifndef ES_SPAWN_VFORK
#if defined(__x86_64__) || defined(__aarch64__)
#define ES_SPAWN_VFORK 0
#else
#define ES_SPAWN_VFORK 1
#endif
#endif

/* A system call: returns the result or -errno.  The raw ones write no
 * memory but what the call itself writes. */
static inline __attribute__((always_inline)) long sys6(long n, long a, long b, long c, long d,
						       long e, long f)
{
#if ES_SPAWN_VFORK
	long ret = syscall(n, a, b, c, d, e, f);
	return ret == -1 ? -errno : ret;
#elif defined(__x86_64__)
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
#else /* __aarch64__ */
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;
	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory", "cc");
	return x0;
#endif
}

#define SYS(n, a, b, c, d) sys6((n), (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)

#if ES_SPAWN_VFORK
/* libc's: the kernel's struct sigaction and sigset size vary by
 * architecture */
static void default_disposition(int sig)
{
	struct sigaction sa = { .sa_handler = SIG_DFL };
	sigaction(sig, &sa, NULL);
}

static void unblock_all(void)
{
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}
#else
/* The kernel's struct sigaction for rt_sigaction (x86-64, AArch64); all
 * zero is SIG_DFL with no flags and an empty mask. */
struct kernel_sigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	uint64_t mask;
};

static const struct kernel_sigaction default_action;
static const uint64_t no_signals;

static inline __attribute__((always_inline)) void default_disposition(int sig)
{
	SYS(SYS_rt_sigaction, sig, &default_action, 0, sizeof no_signals);
}

static inline __attribute__((always_inline)) void unblock_all(void)
{
	SYS(SYS_rt_sigprocmask, SIG_SETMASK, &no_signals, 0, sizeof no_signals);
}
#endif

/* What the child needs, copied by the spawner to the top of the child's
 * stack slot (argv and envp excepted: the caller keeps them). */
struct child_args {
	char path[PATH_MAX];
	char cwd[PATH_MAX]; /* "": inherit */
	struct spawn_rlimit limits[RLIM_NLIMITS];
	size_t nlimits;
	char *const *argv;
	char *const *envp;
	uint64_t reset; /* dispositions to reset (bit sig - 1) */
	int fds[3];
	int extra_fd; /* > 2: dup'ed to SPAWN_EXTRA_FD; else none */
	int nice;
	int report;    /* the failed step's errno, written by the child */
	int report_fd; /* where the child's memory is not ours: the pipe's
			* write end for report (else -1) */
	pid_t parent;
};

/* No instrumentation in the child: a sanitizer's checks, or the coverage
 * counters and hooks of --enable-fuzz (clang), would write the handler's
 * memory. */
#if defined(__clang__)
#define NOT_INSTRUMENTED __attribute__((no_sanitize("address", "undefined", "coverage")))
#else
#define NOT_INSTRUMENTED __attribute__((no_sanitize("address", "undefined")))
#endif

NOT_INSTRUMENTED static int child(void *arg)
{
	struct child_args *a = arg;
	long rc;

	for (int sig = 1; sig <= 64; sig++)
		if ((a->reset >> (sig - 1)) & 1)
			default_disposition(sig);
	if ((rc = SYS(SYS_setpgid, 0, 0, 0, 0)) < 0 ||
	    (rc = SYS(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0)) < 0)
		goto fail;
	if (SYS(SYS_getppid, 0, 0, 0, 0) != a->parent)
		SYS(SYS_exit_group, 127, 0, 0, 0); /* the spawner is gone: nobody to tell */
	for (int i = 0; i < 3; i++) {
		long fd = a->fds[i], opened = 0;
		if (fd < 0)
			fd = devnull[i == 0 ? 0 : 1];
		if (fd < 0) {
			fd = SYS(SYS_openat, AT_FDCWD, "/dev/null",
				 (i == 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC, 0);
			if ((rc = fd) < 0)
				goto fail;
			opened = 1;
		}
		if (fd != i) {
			if ((rc = SYS(SYS_dup3, fd, i, 0, 0)) < 0)
				goto fail;
			if (opened)
				SYS(SYS_close, fd, 0, 0, 0);
		} else {
			/* already in place: keep it across exec */
			long fl = SYS(SYS_fcntl, fd, F_GETFD, 0, 0);
			if ((rc = fl) < 0 ||
			    (rc = SYS(SYS_fcntl, fd, F_SETFD, fl & ~FD_CLOEXEC, 0)) < 0)
				goto fail;
		}
	}
	/* The extra descriptor (the progress pipe) goes to SPAWN_EXTRA_FD,
	 * after stdio was placed: a stdio source numbered 3 was read by then. */
	if (a->extra_fd > 2) {
		if (a->extra_fd != SPAWN_EXTRA_FD) {
			if ((rc = SYS(SYS_dup3, a->extra_fd, SPAWN_EXTRA_FD, 0, 0)) < 0)
				goto fail;
		} else {
			long fl = SYS(SYS_fcntl, SPAWN_EXTRA_FD, F_GETFD, 0, 0);
			if ((rc = fl) < 0 ||
			    (rc = SYS(SYS_fcntl, SPAWN_EXTRA_FD, F_SETFD, fl & ~FD_CLOEXEC, 0)) < 0)
				goto fail;
		}
	}
	/* Nothing but stdio (and the extra descriptor) reaches the program,
	 * whatever the handler (or whoever started the daemon) had open
	 * without close-on-exec. */
	if ((rc = SYS(SYS_close_range, a->extra_fd > 2 ? SPAWN_EXTRA_FD + 1 : 3, ~0u,
		      CLOSE_RANGE_CLOEXEC, 0)) < 0)
		goto fail;
	if (a->cwd[0] && (rc = SYS(SYS_chdir, a->cwd, 0, 0, 0)) < 0)
		goto fail;
	if (a->nice > 0) {
		/* relative to the daemon's own niceness (never needs a
		 * privilege); the raw getpriority is 20 - nice */
		if ((rc = SYS(SYS_getpriority, PRIO_PROCESS, 0, 0, 0)) < 0 ||
		    (rc = SYS(SYS_setpriority, PRIO_PROCESS, 0, 20 - rc + a->nice, 0)) < 0)
			goto fail;
	}
	for (size_t i = 0; i < a->nlimits; i++) {
		uint64_t rl[2] = { a->limits[i].value, a->limits[i].value };
		if ((rc = SYS(SYS_prlimit64, 0, a->limits[i].resource, rl, 0)) < 0)
			goto fail;
	}
	/* a job starts with no signal blocked, whatever the handler had */
	unblock_all();
	rc = SYS(SYS_execve, a->path, a->argv, a->envp, 0);
fail:;
	a->report = rc < 0 ? (int)-rc : EIO;
	if (a->report_fd >= 0)
		SYS(SYS_write, a->report_fd, &a->report, sizeof a->report, 0);
	SYS(SYS_exit_group, 127, 0, 0, 0);
	return 127;
}

/* ---- the spawner: stack slots --------------------------------------- */

/* One mapping: a guard page, the child's stack, its child_args on top. */
#define SLOT_BYTES (64 * 1024)

struct slot {
	char *map;
	pid_t pid;     /* 0: free */
	int report_fd; /* the pipe's read end while pid != 0 (valgrind), or -1 */
};
static struct slot *slots;
static size_t nslots;

/* A free slot, mapped (NULL: out of memory). */
static struct slot *free_slot(void)
{
	for (size_t i = 0; i < nslots; i++)
		if (slots[i].pid == 0)
			return &slots[i];
	struct slot *more = realloc(slots, (nslots + 1) * sizeof *slots);
	if (!more)
		return NULL;
	slots = more;
	long page = sysconf(_SC_PAGESIZE);
	char *map = mmap(NULL, SLOT_BYTES, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (map == MAP_FAILED)
		return NULL;
	if (mprotect(map, (size_t)page, PROT_NONE) != 0) {
		munmap(map, SLOT_BYTES);
		return NULL;
	}
	slots[nslots] = (struct slot){ .map = map, .pid = 0, .report_fd = -1 };
	return &slots[nslots++];
}

/* The child_args at the top of the slot's stack. */
static struct child_args *slot_args(const struct slot *s)
{
	return (struct child_args *)(s->map +
				     ((SLOT_BYTES - sizeof(struct child_args)) & ~(size_t)63));
}

/* Fills the slot's child_args from req; returns it, or NULL with *err. */
static struct child_args *child_args(struct slot *s, const struct spawn_request *req, int *err)
{
	struct child_args *a = slot_args(s);
	size_t plen = strlen(req->path), clen = req->cwd ? strlen(req->cwd) : 0;

	if (plen >= sizeof a->path || clen >= sizeof a->cwd) {
		*err = ENAMETOOLONG;
		return NULL;
	}
	if (req->nlimits > RLIM_NLIMITS) {
		*err = EINVAL;
		return NULL;
	}
	memcpy(a->path, req->path, plen + 1);
	memcpy(a->cwd, clen ? req->cwd : "", clen + 1);
	if (req->nlimits)
		memcpy(a->limits, req->limits, req->nlimits * sizeof *req->limits);
	a->nlimits = req->nlimits;
	a->argv = req->argv;
	a->envp = req->envp;
	a->reset = initialised ? not_default
			       : ~0ull & ~((1ull << (SIGKILL - 1)) | (1ull << (SIGSTOP - 1)));
	a->fds[0] = req->stdin_fd;
	a->fds[1] = req->stdout_fd;
	a->fds[2] = req->stderr_fd;
	a->extra_fd = req->extra_fd > 2 ? req->extra_fd : 0;
	a->nice = req->nice;
	a->report = 0;
	a->report_fd = -1;
	return a;
}

/* Under valgrind (see the top): the report pipe, its write end in a and
 * kept clear of the child's 0-2; the read end, or -1 with *err. */
static int report_pipe(struct child_args *a, int *err)
{
	int report[2];

	if (pipe2(report, O_CLOEXEC | O_NONBLOCK) != 0) {
		*err = errno;
		return -1;
	}
	if (report[1] <= SPAWN_EXTRA_FD) {
		/* a daemon started without stdio: keep clear of the child's 0-2
		 * and of its extra descriptor */
		int fd = fcntl(report[1], F_DUPFD_CLOEXEC, SPAWN_EXTRA_FD + 1);
		close(report[1]);
		if (fd < 0) {
			*err = errno;
			close(report[0]);
			return -1;
		}
		report[1] = fd;
	}
	a->report_fd = report[1];
	return report[0];
}

int spawn_waits_for_exec(void)
{
	return ES_SPAWN_VFORK || RUNNING_ON_VALGRIND != 0;
}

pid_t spawn_process(const struct spawn_request *req, int *err)
{
	struct slot *s = free_slot();
	int report_rd = -1;

	if (!s) {
		*err = ENOMEM;
		return -1;
	}
	struct child_args *a = child_args(s, req, err);
	if (!a)
		return -1;
	if (RUNNING_ON_VALGRIND && (report_rd = report_pipe(a, err)) < 0)
		return -1;
	a->parent = getpid();

	int flags = CLONE_VM | SIGCHLD | (spawn_waits_for_exec() ? CLONE_VFORK : 0);
	int block = !initialised || any_caught;
	sigset_t all, old;
	if (block) {
		sigfillset(&all);
		sigprocmask(SIG_BLOCK, &all, &old);
	}
	int spawner_errno = errno;
	pid_t pid = clone(child, a, flags, a);
	int clone_errno = errno;
	errno = spawner_errno; /* the vfork child's (ES_SPAWN_VFORK) is not ours */
	if (block)
		sigprocmask(SIG_SETMASK, &old, NULL);
	if (a->report_fd >= 0)
		close(a->report_fd);
	if (pid < 0) {
		if (report_rd >= 0)
			close(report_rd);
		*err = clone_errno;
		return -1;
	}
	/* the group exists when this returns (the child may not have run
	 * yet); EACCES once the child has exec'd: it made the group itself */
	if (!(flags & CLONE_VFORK))
		setpgid(pid, pid);
	errno = spawner_errno; /* setpgid's EACCES or ESRCH is no failure */
	s->pid = pid;
	s->report_fd = report_rd;
	return pid;
}

int spawn_reaped(pid_t pid, int status)
{
	for (size_t i = 0; i < nslots; i++) {
		struct slot *s = &slots[i];
		if (s->pid != pid || pid <= 0)
			continue;
		int report = 0;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
			if (s->report_fd < 0) /* the child wrote it before it ended */
				report = __atomic_load_n(&slot_args(s)->report, __ATOMIC_ACQUIRE);
			else if (read(s->report_fd, &report, sizeof report) !=
				 (ssize_t)sizeof report)
				report = 0;
		}
		if (s->report_fd >= 0)
			close(s->report_fd);
		s->report_fd = -1;
		s->pid = 0;
		return report;
	}
	return 0;
}

int spawn_other_children(int (*is_job)(pid_t pid))
{
	char buf[8192];
	size_t len = 0;
	ssize_t n;

	if (children_fd < 0)
		return 1; /* cannot tell: assume the worst */
	for (;;) {
		/* from offset 0: the list as it is now, not a rest of the last */
		n = pread(children_fd, buf + len, sizeof buf - 1 - len, (off_t)len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == sizeof buf - 1) {
			n = -1; /* more children than the buffer holds */
			break;
		}
	}
	if (n < 0)
		return 1; /* cannot tell: assume the worst */
	buf[len] = '\0';
	for (char *p = buf, *end;; p = end) {
		long pid = strtol(p, &end, 10);
		if (end == p)
			return 0;
		if (!is_job((pid_t)pid))
			return 1;
	}
}
