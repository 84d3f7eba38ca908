/*
 * listener.h - accepting connections on this handler's listening socket
 * (one SO_REUSEPORT socket per handler slot, created by the master).
 * Accepting pauses at maxConnections local connections and stops for good
 * when the handler drains.
 */
#ifndef ES_LISTENER_H
#define ES_LISTENER_H

int listener_start(int fd);
void listener_stop(void);

#endif
