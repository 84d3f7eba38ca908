/*
 * floor.c - the floor of row 3 (docs/benchmarks.md): a minimal broker that
 * does per job only the work the protocol's structure makes irreducible
 * with a process per job and loopback TCP, so that the execserver's CPU
 * per job can be read against what no broker of this shape can go below
 * on the same machine.  It models one handler with K slots and parked
 * wants served in arrival order: a WANT parks (or is offered a free slot
 * at once), a JOB runs /bin/true (vfork + execve, stdout and stderr
 * through pipes watched by epoll and read to EOF, SIGCHLD through a
 * signalfd, reaped with waitpid), and a job's end sends DONE to its
 * connection and then OFFER to the next parked want.  No websocket, no
 * JSON, no book, no job directory, no receipt, no logging: every message
 * is 4 bytes ("WANT", "JOB_", "DONE", "OFFR"), and a client answers an
 * OFFER with "JOB_WANT" in one write (a JOB and its next WANT, as row 3's
 * client does).  One process, one thread, epoll level-triggered.
 *
 * Usage: floor K   (the listening socket is descriptor 3, made by esbench)
 * Runs until killed.  Invariants: a slot is free, offered or running;
 * a connection's bytes are parsed in 4-byte messages, a partial one kept.
 */
#include "autoconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXFD 4096
#define MAXK 64
#define LISTEN_FD 3

enum {
	T_LISTEN,
	T_SIGNAL,
	T_CONN,
	T_PIPE
};

struct job {
	pid_t pid;
	int conn;  /* the connection that sent the JOB */
	int pipes; /* pipe ends still open (2, 1, 0) */
	int reaped;
};

static int ep, sig_fd, k_free;
static struct job jobs[MAXK];
static int nslots;
static int queue[MAXFD], q_head, q_len; /* parked wants: connection fds */
static int pipe_slot[MAXFD];            /* the job of a pipe's read end */
static char carry[MAXFD][4];
static unsigned char carry_len[MAXFD];

static void watch(int fd, int type, int idx)
{
	struct epoll_event ev = { .events = EPOLLIN,
				  .data.u64 = (unsigned long long)type << 32 | (unsigned)idx };
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
		perror("floor: epoll_ctl");
		exit(1);
	}
}

/* Out of the epoll set, then closed.  close alone does not suffice: the
 * registration lives as long as the open file does, and a child vforked
 * while fd was open holds a copy of it until its exec has closed its
 * close-on-exec descriptors, which the kernel does after the parent has
 * been let go (so the parent may close fd, reuse its number for another
 * file, and still get events of the old one with fd's data). */
static void unwatch_close(int fd)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
	close(fd);
}

static void say(int fd, const char *msg)
{
	(void)send(fd, msg, 4, MSG_NOSIGNAL);
}

/* A slot becomes available: offer it to the next parked want, or free it. */
static void slot_available(void)
{
	if (q_len) {
		int c = queue[q_head];
		q_head = (q_head + 1) % MAXFD;
		q_len--;
		say(c, "OFFR");
	} else {
		k_free++;
	}
}

static void want(int c)
{
	if (k_free) {
		k_free--;
		say(c, "OFFR");
	} else if (q_len < MAXFD) {
		queue[(q_head + q_len++) % MAXFD] = c;
	}
}

static void run_job(int c)
{
	int slot = 0, out[2], err[2];
	while (slot < nslots && jobs[slot].pid)
		slot++;
	if (slot == nslots || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
		fprintf(stderr, "floor: JOB without an offered slot, or pipe2: %s\n",
			strerror(errno));
		exit(1);
	}
	pid_t pid = vfork();
	if (pid == 0) {
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		dup2(out[1], 1);
		dup2(err[1], 2);
		char *argv[] = { "/bin/true", NULL }, *envp[] = { NULL };
		execve(argv[0], argv, envp);
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	if (pid < 0) {
		perror("floor: vfork");
		exit(1);
	}
	jobs[slot] = (struct job){ .pid = pid, .conn = c, .pipes = 2 };
	pipe_slot[out[0]] = pipe_slot[err[0]] = slot;
	watch(out[0], T_PIPE, out[0]);
	watch(err[0], T_PIPE, err[0]);
}

static void job_check_end(struct job *j)
{
	if (j->pipes || !j->reaped)
		return;
	say(j->conn, "DONE");
	j->pid = 0;
	slot_available();
}

static void on_conn(int c)
{
	char buf[256];
	memcpy(buf, carry[c], carry_len[c]);
	ssize_t n = recv(c, buf + carry_len[c], sizeof buf - carry_len[c], 0);
	if (n <= 0) {
		unwatch_close(c); /* its parked wants stay: not in row 3 */
		return;
	}
	size_t len = carry_len[c] + (size_t)n, i = 0;
	for (; i + 4 <= len; i += 4) {
		if (memcmp(buf + i, "WANT", 4) == 0)
			want(c);
		else if (memcmp(buf + i, "JOB_", 4) == 0)
			run_job(c);
	}
	carry_len[c] = (unsigned char)(len - i);
	memcpy(carry[c], buf + i, len - i);
}

static void on_signal(void)
{
	struct signalfd_siginfo si[16];
	(void)read(sig_fd, si, sizeof si);
	pid_t pid;
	while ((pid = waitpid(-1, NULL, WNOHANG)) > 0)
		for (int s = 0; s < nslots; s++)
			if (jobs[s].pid == pid) {
				jobs[s].reaped = 1;
				job_check_end(&jobs[s]);
			}
}

static void on_pipe(int fd)
{
	char buf[4096];
	if (read(fd, buf, sizeof buf) > 0)
		return;
	unwatch_close(fd);
	jobs[pipe_slot[fd]].pipes--;
	job_check_end(&jobs[pipe_slot[fd]]);
}

int main(int argc, char **argv)
{
	nslots = argc == 2 ? atoi(argv[1]) : 0;
	if (nslots < 1 || nslots > MAXK) {
		fprintf(stderr, "usage: floor K (1..%d), listening socket on descriptor 3\n", MAXK);
		return 2;
	}
	k_free = nslots;
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	ep = epoll_create1(EPOLL_CLOEXEC);
	sig_fd = signalfd(-1, &chld, SFD_CLOEXEC);
	if (ep < 0 || sig_fd < 0) {
		perror("floor: epoll_create1/signalfd");
		return 1;
	}
	watch(LISTEN_FD, T_LISTEN, 0);
	watch(sig_fd, T_SIGNAL, 0);
	for (;;) {
		struct epoll_event ev[64];
		int n = epoll_wait(ep, ev, 64, -1);
		for (int i = 0; i < n; i++) {
			int type = (int)(ev[i].data.u64 >> 32), idx = (int)(unsigned)ev[i].data.u64;
			if (type == T_LISTEN) {
				int c = accept4(LISTEN_FD, NULL, NULL, SOCK_CLOEXEC), one = 1;
				if (c < 0 || c >= MAXFD) {
					if (c >= 0)
						close(c);
					continue;
				}
				setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
				carry_len[c] = 0;
				watch(c, T_CONN, c);
			} else if (type == T_SIGNAL) {
				on_signal();
			} else if (type == T_CONN) {
				on_conn(idx);
			} else {
				on_pipe(idx);
			}
		}
	}
}
