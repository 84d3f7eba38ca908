/*
 * test_spawn.c - unit tests of src/job/spawn.c with real processes.
 *
 * Owns: the proof that spawn_process returns while its child has not
 * exec'd yet (the child is held in a system call by a seccomp user
 * notification that only this process answers: a spawn that waits for the
 * exec never returns, and the watchdog fails the test), that the job's
 * process group exists when it returns (the child held before its own
 * setpgid, a kill of the group ends it), that a step failing in the child
 * reaches the spawner's errno never (a libc wrapper in a CLONE_VM child
 * would write it) and spawn_reaped always, with the step's errno (missing
 * program, no permission, no format, missing or non-directory working
 * directory, a bad limit), that a program's own exit 127 is not taken for
 * a failed spawn, that the spawner's errno stays its own, and that
 * hundreds of spawns with failures, many alive at once, leave no
 * descriptor behind.  The held tests need the clone without CLONE_VFORK,
 * so they do not run under valgrind (spawn.c: a vfork there).  Built a
 * second time as test_spawn_vfork with -DES_SPAWN_VFORK=1: the vfork of
 * the architectures without raw system calls in spawn.c, on this one.
 */
#include "autoconfig.h"

#include <CUnit/Basic.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/valgrind_probe.h"
#include "job/spawn.h"
#include "suite.h"

static char dir[64];
static char *envp[] = { "PATH=/usr/bin:/bin", NULL };

/* Writes dir/name with text and mode; returns the path (static). */
static const char *make_file(const char *name, const char *text, mode_t mode)
{
	static char path[128];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0 || chmod(path, mode) != 0)
		return NULL;
	return path;
}

static pid_t spawn(const char *path, char *const argv[], const char *cwd,
		   const struct spawn_rlimit *limits, size_t nlimits)
{
	struct spawn_request req = { .path = path,
				     .argv = argv,
				     .envp = envp,
				     .cwd = cwd,
				     .stdin_fd = -1,
				     .stdout_fd = -1,
				     .stderr_fd = -1,
				     .limits = limits,
				     .nlimits = nlimits };
	int err = 0;
	pid_t pid = spawn_process(&req, &err);
	CU_ASSERT(pid > 0);
	CU_ASSERT_EQUAL(err, 0);
	return pid;
}

/* waitpid, then spawn_reaped; *status gets the status. */
static int reap(pid_t pid, int *status)
{
	CU_ASSERT_EQUAL_FATAL(waitpid(pid, status, 0), pid);
	return spawn_reaped(pid, *status);
}

static int open_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* ---- failures, told by spawn_reaped ---------------------------------- */

enum kind {
	K_OK,
	K_MISSING,
	K_NOPERM,
	K_NOFORMAT,
	K_NOCWD,
	K_CWDFILE,
	K_BADLIMIT,
	K_EXIT127,
	NK
};

static const int kind_errno[NK] = { 0, ENOENT, EACCES, ENOEXEC, ENOENT, ENOTDIR, EINVAL, 0 };

static pid_t spawn_kind(enum kind k)
{
	static char *argv_true[] = { "true", NULL };
	static char *argv_127[] = { "sh", "-c", "exit 127", NULL };
	static const struct spawn_rlimit bad = { 9999, 1 }; /* no such resource */
	char path[128], cwd[128];

	snprintf(cwd, sizeof cwd, "%s", dir);
	switch (k) {
	case K_MISSING: snprintf(path, sizeof path, "%s/missing", dir); break;
	case K_NOPERM: snprintf(path, sizeof path, "%s/noperm", dir); break;
	case K_NOFORMAT: snprintf(path, sizeof path, "%s/noformat", dir); break;
	case K_NOCWD:
		snprintf(cwd, sizeof cwd, "%s/nodir", dir);
		snprintf(path, sizeof path, "/bin/true");
		break;
	case K_CWDFILE:
		snprintf(cwd, sizeof cwd, "%s/noperm", dir);
		snprintf(path, sizeof path, "/bin/true");
		break;
	case K_EXIT127: return spawn("/bin/sh", argv_127, cwd, NULL, 0);
	default: snprintf(path, sizeof path, "/bin/true"); break;
	}
	/* path and cwd are copied by spawn_process: gone when this returns */
	return spawn(path, argv_true, cwd, k == K_BADLIMIT ? &bad : NULL, k == K_BADLIMIT);
}

static void check_end(enum kind k, int report, int status)
{
	CU_ASSERT_EQUAL(report, kind_errno[k]);
	CU_ASSERT(WIFEXITED(status));
	CU_ASSERT_EQUAL(WEXITSTATUS(status), k == K_OK ? 0 : 127);
}

static void test_each_failure_reported(void)
{
	for (enum kind k = 0; k < NK; k++) {
		int status;
		pid_t pid = spawn_kind(k);
		int report = reap(pid, &status);
		check_end(k, report, status);
		if (report != kind_errno[k])
			fprintf(stderr, "kind %d: %s\n", k, strerror(report));
		/* told once: the slot is free again */
		CU_ASSERT_EQUAL(spawn_reaped(pid, status), 0);
	}
}

/* The spawner's errno is its own after every kind of spawn: where the
 * spawn waits for the exec (ES_SPAWN_VFORK: test_spawn_vfork), the child's
 * failed steps set it through libc and spawn_process puts it back. */
static void test_spawners_errno_kept(void)
{
	for (enum kind k = 0; k < NK; k++) {
		int status;
		errno = EDOM;
		pid_t pid = spawn_kind(k);
		CU_ASSERT_EQUAL(errno, EDOM);
		int report = reap(pid, &status);
		check_end(k, report, status);
	}
}

/* 4 rounds of 64 children alive at once, every kind, reaped in the order
 * they end: each report belongs to its own pid, and no descriptor is left.
 * None is made per child either (the report is written into the child's
 * stack slot; a pipe per child only under valgrind, whose vfork is a
 * fork): no pipe2 and two close per job. */
static void test_many_with_failures(void)
{
	enum {
		ROUNDS = 4,
		AT_ONCE = 64
	};
	int fds = open_fds();

	for (int round = 0; round < ROUNDS; round++) {
		pid_t pids[AT_ONCE];
		enum kind kinds[AT_ONCE];
		for (int i = 0; i < AT_ONCE; i++) {
			kinds[i] = (enum kind)((i + round) % NK);
			pids[i] = spawn_kind(kinds[i]);
		}
		if (!RUNNING_ON_VALGRIND)
			CU_ASSERT_EQUAL(open_fds(), fds);
		for (int n = 0; n < AT_ONCE; n++) {
			int status;
			pid_t pid = waitpid(-1, &status, 0);
			int i = 0;
			while (i < AT_ONCE && pids[i] != pid)
				i++;
			CU_ASSERT_FATAL(i < AT_ONCE);
			check_end(kinds[i], spawn_reaped(pid, status), status);
			pids[i] = 0;
		}
	}
	CU_ASSERT_EQUAL(open_fds(), fds);
}

static void test_too_long(void)
{
	char *argv[] = { "true", NULL };
	char *path = malloc(PATH_MAX + 8);
	CU_ASSERT_FATAL(path != NULL);
	memset(path, 'a', PATH_MAX + 7);
	path[0] = '/';
	path[PATH_MAX + 7] = '\0';
	struct spawn_request req = { .path = path,
				     .argv = argv,
				     .envp = envp,
				     .stdin_fd = -1,
				     .stdout_fd = -1,
				     .stderr_fd = -1 };
	int err = 0;
	CU_ASSERT_EQUAL(spawn_process(&req, &err), -1);
	CU_ASSERT_EQUAL(err, ENAMETOOLONG);
	req.path = "/bin/true";
	req.cwd = path;
	CU_ASSERT_EQUAL(spawn_process(&req, &err), -1);
	CU_ASSERT_EQUAL(err, ENAMETOOLONG);
	free(path);
}

/* ---- held children ---------------------------------------------------- */

/* In this process from now on: system call nr (with its first argument's
 * low word == arg0, if match_arg0) waits for the answer of the returned
 * listener. */
static int hold_syscall(int nr, int match_arg0, unsigned arg0)
{
	struct sock_filter f[6];
	unsigned short n = 0;

	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, nr));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0,
					      match_arg0 ? 3 : 1);
	if (match_arg0) {
		f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
						      offsetof(struct seccomp_data, args[0]));
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arg0, 0, 1);
	}
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = { .len = n, .filter = f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
			    &prog);
}

/* The next held call: its pid and number. */
static int held(int listener, struct seccomp_notif *n)
{
	memset(n, 0, sizeof *n);
	return ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, n);
}

/* Lets the held call run (error 0) or fail with error. */
static int answer(int listener, const struct seccomp_notif *n, int error)
{
	struct seccomp_notif_resp r = { .id = n->id,
					.error = error ? -error : 0,
					.flags = error ? 0 : SECCOMP_USER_NOTIF_FLAG_CONTINUE };
	return ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &r);
}

/* Runs body in a child process (the filter stays there) under a watchdog;
 * the test fails unless it exits 0.  body returns the number of failed
 * checks. */
static void in_subprocess(int (*body)(void))
{
	pid_t p = fork();
	CU_ASSERT_FATAL(p >= 0);
	if (p == 0) {
		/* a group of its own: a child held before its own setpgid (and
		 * its PR_SET_PDEATHSIG) keeps the listener open and would wait
		 * forever once this is gone; the group's kill below ends it */
		setpgid(0, 0);
		alarm(20); /* a spawn that waits for the held child never returns */
		_exit(body());
	}
	int status;
	CU_ASSERT_EQUAL_FATAL(waitpid(p, &status, 0), p);
	kill(-p, SIGKILL);
	CU_ASSERT(WIFEXITED(status));
	if (!WIFEXITED(status))
		fprintf(stderr, "subprocess: signal %d (watchdog: the spawn waited)\n",
			WTERMSIG(status));
	CU_ASSERT_EQUAL(WEXITSTATUS(status), 0);
}

#define CHECK(cond)                                                                \
	do {                                                                       \
		if (!(cond)) {                                                     \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond); \
			failed++;                                                  \
		}                                                                  \
	} while (0)

/* Spawns /bin/sh with argv (the caller's until the reap: spawn.h) with
 * the system call nr held (only with a first argument 0, if arg0_zero);
 * returns the pid once the held call's notification is in *n, or -1. */
static pid_t spawn_held(int nr, int arg0_zero, char *const argv[], const char *cwd, int *listener,
			struct seccomp_notif *n)
{
	struct spawn_request req = { .path = "/bin/sh",
				     .argv = argv,
				     .envp = envp,
				     .cwd = cwd,
				     .stdin_fd = -1,
				     .stdout_fd = -1,
				     .stderr_fd = -1 };
	int err = 0;

	if (*listener < 0 && (*listener = hold_syscall(nr, arg0_zero, 0)) < 0)
		return -1;
	pid_t pid = spawn_process(&req, &err);
	/* returned: the child is (or will be) in the held call, waiting */
	if (pid < 0 || held(*listener, n) != 0 || n->pid != (unsigned)pid || n->data.nr != nr)
		return -1;
	return pid;
}

/* The child sits in execve while spawn_process has returned; released,
 * the program runs. */
static int held_exec(void)
{
	int failed = 0, listener = -1, status;
	struct seccomp_notif n;
	char *argv[] = { "sh", "-c", "exit 7", NULL };
	pid_t pid = spawn_held(SYS_execve, 0, argv, NULL, &listener, &n);

	CHECK(pid > 0);
	CHECK(getpgid(pid) == pid);
	CHECK(waitpid(pid, &status, WNOHANG) == 0);
	CHECK(answer(listener, &n, 0) == 0);
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 7);
	CHECK(spawn_reaped(pid, status) == 0);
	return failed;
}

/* The child held before its own setpgid: the group is there already, and
 * a kill of it ends the child. */
static int held_before_setpgid(void)
{
	int failed = 0, listener = -1, status;
	struct seccomp_notif n;
	char *argv[] = { "sh", "-c", "exit 0", NULL };
	pid_t pid = spawn_held(SYS_setpgid, 1, argv, NULL, &listener, &n);

	CHECK(pid > 0);
	CHECK(getpgid(pid) == pid);
	CHECK(kill(-pid, SIGKILL) == 0 || kill(pid, SIGKILL) != 0);
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	CHECK(spawn_reaped(pid, status) == 0);
	return failed;
}

/* A chdir that fails in the child while the spawner runs on: its errno
 * reaches spawn_reaped and not the spawner's errno. */
static int held_failing_chdir(void)
{
	int failed = 0, listener = -1, status;
	struct seccomp_notif n;
	char *argv[] = { "sh", "-c", "exit 0", NULL };

	for (int i = 0; i < 20; i++) {
		pid_t pid = spawn_held(SYS_chdir, 0, argv, "/", &listener, &n);
		CHECK(pid > 0);
		errno = EDOM;
		CHECK(answer(listener, &n, ENOTDIR) == 0);
		CHECK(waitpid(pid, &status, 0) == pid);
		CHECK(errno == EDOM);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 127);
		CHECK(spawn_reaped(pid, status) == ENOTDIR);
	}
	return failed;
}

static void test_returns_before_the_exec(void)
{
	in_subprocess(held_exec);
}

static void test_group_before_the_child_runs(void)
{
	in_subprocess(held_before_setpgid);
}

static void test_child_errno_not_the_spawners(void)
{
	in_subprocess(held_failing_chdir);
}

/* ---- the extra descriptor ------------------------------------------- */

/* Spawns sh -c script with extra as the extra descriptor and stdout into a
 * pipe; returns what the program wrote there (static) after it ended. */
static const char *run_extra(const char *script, int extra)
{
	static char out[512];
	char *argv[] = { "sh", "-c", (char *)script, NULL };
	int p[2];
	CU_ASSERT_FATAL(pipe2(p, O_CLOEXEC) == 0);
	struct spawn_request req = {
		.path = "/bin/sh",
		.argv = argv,
		.envp = envp,
		.stdin_fd = -1,
		.stdout_fd = p[1],
		.stderr_fd = -1,
		.extra_fd = extra,
	};
	int err = 0, status;
	pid_t pid = spawn_process(&req, &err);
	close(p[1]);
	CU_ASSERT_FATAL(pid > 0);
	size_t len = 0;
	ssize_t n;
	while ((n = read(p[0], out + len, sizeof out - 1 - len)) > 0)
		len += (size_t)n;
	out[len] = '\0';
	close(p[0]);
	CU_ASSERT_EQUAL(reap(pid, &status), 0);
	return out;
}

/* The extra descriptor (the progress pipe, job.c) reaches the program as
 * fd 3 and is a copy of the spawner's: what the program writes there
 * arrives; a descriptor the spawner left without close-on-exec does not
 * reach it; with extra_fd 0 fd 3 is closed in the program. */
static void test_extra_fd(void)
{
	int pp[2], leak = open("/dev/null", O_RDONLY); /* no O_CLOEXEC */
	CU_ASSERT_FATAL(leak >= 0);
	CU_ASSERT_FATAL(pipe2(pp, O_CLOEXEC) == 0);
	int hi = fcntl(pp[1], F_DUPFD_CLOEXEC, 40);
	CU_ASSERT_FATAL(hi >= 40);
	char script[256];
	snprintf(script, sizeof script,
		 "echo 0.5 >&3 && ls /proc/self/fd | sort -n | tr '\\n' ' '; "
		 "[ -e /proc/self/fd/%d ] && echo leaked",
		 leak);
	const char *out = run_extra(script, hi);
	/* sh's own fds: 0-3, and the one ls lists its directory with */
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "0 1 2 3 "));
	CU_ASSERT_PTR_NULL(strstr(out, "leaked"));
	char got[16] = "";
	close(hi);
	close(pp[1]);
	ssize_t n = read(pp[0], got, sizeof got - 1);
	CU_ASSERT_EQUAL(n, 4);
	CU_ASSERT_EQUAL(memcmp(got, "0.5\n", 4), 0);
	close(pp[0]);

	/* without an extra descriptor, 3 is closed in the program */
	out = run_extra("[ -e /proc/self/fd/3 ] && readlink /proc/self/fd/3 || echo none", 0);
	CU_ASSERT_STRING_EQUAL(out, "none\n");
	close(leak);
}

/* An extra descriptor that is fd 3 already (close-on-exec, as the
 * spawner's all are) stays open across the exec. */
static void test_extra_fd_numbered_3(void)
{
	int saved = fcntl(3, F_DUPFD_CLOEXEC, 50); /* whatever 3 is here */
	int pp[2];
	CU_ASSERT_FATAL(pipe2(pp, O_CLOEXEC) == 0);
	for (int i = 0; i < 2; i++) { /* both ends clear of 3 */
		int hi = fcntl(pp[i], F_DUPFD_CLOEXEC, 60);
		close(pp[i]);
		pp[i] = hi;
	}
	CU_ASSERT_FATAL(dup3(pp[1], 3, O_CLOEXEC) == 3);
	close(pp[1]);
	run_extra("echo 42% >&3", 3);
	close(3);
	char got[16] = "";
	ssize_t n = read(pp[0], got, sizeof got - 1);
	CU_ASSERT_EQUAL(n, 4);
	CU_ASSERT_EQUAL(memcmp(got, "42%\n", 4), 0);
	close(pp[0]);
	if (saved >= 0) {
		dup3(saved, 3, O_CLOEXEC);
		close(saved);
	}
}

int main(int argc, char **argv)
{
	/* the last HELD cases hold the child in its exec: not where the spawn
	 * waits for the exec (valgrind, ES_SPAWN_VFORK), so left out there */
	enum {
		HELD = 3
	};
	static struct test_case cases[] = {
		{ "each failed step reported by spawn_reaped with its errno",
		  test_each_failure_reported },
		{ "the spawner's errno kept, whatever failed in the child",
		  test_spawners_errno_kept },
		{ "4 x 64 children at once with failures: own reports, no fd left",
		  test_many_with_failures },
		{ "path or cwd of PATH_MAX: ENAMETOOLONG", test_too_long },
		{ "the extra descriptor reaches the program as fd 3, nothing else", test_extra_fd },
		{ "an extra descriptor that is fd 3 already stays open", test_extra_fd_numbered_3 },
		{ "returns while the child is held in execve", test_returns_before_the_exec },
		{ "the group exists before the child's own setpgid",
		  test_group_before_the_child_runs },
		{ "a failing step in the child leaves the spawner's errno",
		  test_child_errno_not_the_spawners },
		{ NULL, NULL },
	};
	snprintf(dir, sizeof dir, "/tmp/es-spawn-XXXXXX");
	if (!mkdtemp(dir) || !make_file("noperm", "#!/bin/sh\nexit 0\n", 0644) ||
	    !make_file("noformat", "not a program\n", 0755)) {
		fprintf(stderr, "test_spawn: set-up failed\n");
		return 1;
	}
	spawn_init();
	(void)argc;
	if (spawn_waits_for_exec()) {
		size_t n = sizeof cases / sizeof cases[0] - 1;
		cases[n - HELD] = cases[n];
		suite_left_out(argv[0], HELD,
			       "the spawn waits for the exec here (valgrind, ES_SPAWN_VFORK): no "
			       "child can be held in its exec");
	}
	int rc = run_suite("spawn", cases);
	char path[128];
	snprintf(path, sizeof path, "%s/noperm", dir);
	unlink(path);
	snprintf(path, sizeof path, "%s/noformat", dir);
	unlink(path);
	rmdir(dir);
	return rc;
}
