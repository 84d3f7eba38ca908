/* listener.c - see listener.h. */
#include "autoconfig.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <event2/listener.h>

#include "common/log.h"
#include "handler/handler.h"
#include "handler/http_conn.h"
#include "handler/listener.h"
#include "handler/proxy_gate.h"

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *addr,
		      int socklen, void *arg)
{
	proxy_gate_accept(fd, addr, socklen);
}

static struct event *resume_ev;

static void resume_accept(evutil_socket_t fd, short what, void *arg)
{
	if (handler.listener)
		evconnlistener_enable(handler.listener);
}

static void on_accept_error(struct evconnlistener *l, void *arg)
{
	int err = EVUTIL_SOCKET_ERROR();
	/* EMFILE/ENFILE: out of descriptors; back off for a moment instead of
	 * spinning on a listener that stays readable. */
	log_warn("accept: %s", evutil_socket_error_to_string(err));
	if (err == EMFILE || err == ENFILE) {
		struct timeval tv = { 0, 100 * 1000 };
		evconnlistener_disable(l);
		evtimer_add(resume_ev, &tv);
	}
}

int listener_start(int fd)
{
	handler.listener = evconnlistener_new(handler.base, on_accept, NULL,
					      LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_CLOSE_ON_FREE, -1,
					      fd);
	if (!handler.listener) {
		log_error("cannot watch the listening socket");
		return -1;
	}
	evconnlistener_set_error_cb(handler.listener, on_accept_error);
	resume_ev = evtimer_new(handler.base, resume_accept, NULL);
	return resume_ev ? 0 : -1;
}
