/*
 * relay.c - see relay.h.
 *
 * The relay process runs one poll() loop over its listening socket, its
 * command pipe and the two sockets of every live pair.  Commands are one
 * byte each, answered with one line: 'f' freezes the live pairs ("<n>\n"),
 * 'a' asks for the number of pairs accepted ("<n>\n").  End of file on the
 * command pipe (the test ended) ends the relay.
 */
#include "autoconfig.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "relay.h"
#include "wsclient.h"

#define RELAY_MAX_PAIRS 64
#define RELAY_BUF 65536

struct pair {
	int fd[2]; /* client side, backend side; -1: closed */
	int frozen;
};

/* Moves what fd `from` has to fd `to` (blocking write: loopback, small
 * amounts).  0, or -1 when the pair is over. */
static int forward(int from, int to)
{
	static char buf[RELAY_BUF];
	ssize_t n = read(from, buf, sizeof buf);
	if (n <= 0)
		return -1;
	for (ssize_t off = 0; off < n;) {
		ssize_t w = send(to, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		off += w;
	}
	return 0;
}

static void answer(int fd, int n)
{
	char line[32];
	int len = snprintf(line, sizeof line, "%d\n", n);
	if (write(fd, line, (size_t)len) != len)
		_exit(1);
}

static void relay_main(int lfd, int backend_port, int ctl, int reply)
{
	struct pair p[RELAY_MAX_PAIRS];
	int npairs = 0, accepted = 0;

	for (;;) {
		struct pollfd pf[2 + 2 * RELAY_MAX_PAIRS];
		int map[2 + 2 * RELAY_MAX_PAIRS], n = 0;
		pf[n] = (struct pollfd){ .fd = ctl, .events = POLLIN };
		map[n++] = -1;
		pf[n] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		map[n++] = -2;
		for (int i = 0; i < npairs; i++)
			if (!p[i].frozen && p[i].fd[0] >= 0)
				for (int side = 0; side < 2; side++) {
					pf[n] = (struct pollfd){ .fd = p[i].fd[side],
								 .events = POLLIN };
					map[n++] = 2 * i + side;
				}
		if (poll(pf, (nfds_t)n, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		for (int k = 0; k < n; k++) {
			if (!(pf[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (map[k] == -1) {
				char cmd;
				if (read(ctl, &cmd, 1) != 1)
					_exit(0); /* the test is gone */
				int frozen = 0;
				if (cmd == 'f')
					for (int i = 0; i < npairs; i++)
						if (p[i].fd[0] >= 0 && !p[i].frozen) {
							p[i].frozen = 1;
							frozen++;
						}
				answer(reply, cmd == 'f' ? frozen : accepted);
			} else if (map[k] == -2) {
				int c = accept(lfd, NULL, NULL);
				if (c < 0)
					continue;
				int b = npairs < RELAY_MAX_PAIRS
						? wsc_tcp_connect("127.0.0.1", backend_port, 3000)
						: -1;
				if (b < 0) {
					close(c);
					continue;
				}
				/* blocking I/O from here: forward() writes whole */
				fcntl(b, F_SETFL, fcntl(b, F_GETFL) & ~O_NONBLOCK);
				p[npairs++] = (struct pair){ { c, b }, 0 };
				accepted++;
			} else {
				struct pair *q = &p[map[k] / 2];
				int side = map[k] % 2;
				if (q->fd[0] >= 0 && forward(q->fd[side], q->fd[1 - side]) != 0) {
					close(q->fd[0]);
					close(q->fd[1]);
					q->fd[0] = q->fd[1] = -1;
				}
			}
		}
		/* a closed pair's poll entries of this round were skipped
		 * above (fd[0] < 0); compact the table only between rounds */
		int live = 0;
		for (int i = 0; i < npairs; i++)
			if (p[i].fd[0] >= 0)
				p[live++] = p[i];
		npairs = live;
	}
}

int relay_start(struct relay *r, int backend_port)
{
	int to_relay[2], from_relay[2];
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof sa;

	memset(r, 0, sizeof *r);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(lfd, 64) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &len) != 0) {
		if (lfd >= 0)
			close(lfd);
		return -1;
	}
	if (pipe2(to_relay, O_CLOEXEC) != 0) {
		close(lfd);
		return -1;
	}
	if (pipe2(from_relay, O_CLOEXEC) != 0) {
		close(lfd);
		close(to_relay[0]);
		close(to_relay[1]);
		return -1;
	}
	r->pid = fork();
	if (r->pid == 0) {
		/* nothing of the test's but its own ends: a socket of the
		 * test held open here would outlive the test's close */
		for (int fd = 3; fd < 4096; fd++)
			if (fd != lfd && fd != to_relay[0] && fd != from_relay[1])
				close(fd);
		signal(SIGPIPE, SIG_IGN);
		relay_main(lfd, backend_port, to_relay[0], from_relay[1]);
		_exit(0);
	}
	close(lfd);
	close(to_relay[0]);
	close(from_relay[1]);
	r->ctl_out = to_relay[1];
	r->ctl_in = from_relay[0];
	if (r->pid < 0) {
		close(r->ctl_out);
		close(r->ctl_in);
		return -1;
	}
	r->port = ntohs(sa.sin_port);
	return 0;
}

/* One command, its one-line answer. */
static int command(struct relay *r, char cmd)
{
	char line[32];
	size_t n = 0;
	if (write(r->ctl_out, &cmd, 1) != 1)
		return -1;
	while (n < sizeof line - 1) {
		struct pollfd pf = { .fd = r->ctl_in, .events = POLLIN };
		if (poll(&pf, 1, 3000) != 1 || read(r->ctl_in, line + n, 1) != 1)
			return -1;
		if (line[n++] == '\n')
			break;
	}
	line[n] = '\0';
	return atoi(line);
}

int relay_freeze(struct relay *r)
{
	return command(r, 'f');
}

int relay_accepted(struct relay *r)
{
	return command(r, 'a');
}

void relay_stop(struct relay *r)
{
	if (r->pid <= 0)
		return;
	kill(r->pid, SIGKILL);
	waitpid(r->pid, NULL, 0);
	close(r->ctl_out);
	close(r->ctl_in);
	r->pid = 0;
}
