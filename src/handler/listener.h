/*
 * listener.h - accepting connections on this handler's listening socket
 * (one SO_REUSEPORT socket per handler slot, created by the master).
 * Accepting goes on while the handler drains (the HTTP layer answers 503),
 * and pauses briefly when the process runs out of descriptors.
 */
#ifndef ES_LISTENER_H
#define ES_LISTENER_H

int listener_start(int fd);

#endif
