/*
 * port_probe.c - see port_probe.h.
 *
 * The probe sets SO_REUSEADDR, so that connections of a stopped instance
 * still in TIME_WAIT do not count as a holder, but not SO_REUSEPORT: with
 * that option the bind would succeed next to any listener of the same user
 * that set it too, which is the very case to detect.  Without it, Linux
 * refuses the bind (EADDRINUSE) whenever another socket listens on the
 * address, or on the wildcard address of the same port.
 */
#include "autoconfig.h"
#include "common/port_probe.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

int port_probe(const struct sockaddr *addr, socklen_t len)
{
	int one = 1, rc = 0;
	int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
	    bind(fd, addr, len) != 0)
		rc = errno;
	close(fd);
	return rc;
}
