/*
 * daemonize.h - moving a daemon into the background so that the command
 * that started it still tells how the start went: it returns only once the
 * daemon reports that it is ready (its exit status 0) or that it failed
 * (the status the daemon gives), so an init script learns of a failure
 * after detaching from the exit code, and the pid file is written by then.
 */
#ifndef ES_DAEMONIZE_H
#define ES_DAEMONIZE_H

/* Opens /dev/null on each of the descriptors 0, 1 and 2 that is closed
 * (a daemon started with them closed), so that none of what the daemon
 * opens before it detaches (the locked pid file, a listener, the pipe of
 * daemonize) gets one of them and is replaced by /dev/null there.  Call
 * it first.  0, or -1 (errno). */
int daemonize_std_fds(void);
/* Detaches (double fork, new session, chdir /, stdio on /dev/null).
 * Returns 0 in the daemon with *ready_fd set for daemonize_ready, or -1
 * (errno) before the first fork or in the daemon; the starting process
 * never returns (a failure reported after detaching: one line on its
 * stderr naming program, as the reason went to syslog). */
int daemonize(const char *program, int *ready_fd);
/* Tells the starting process to exit with status (0: started); closes
 * *ready_fd and sets it to -1.  Nothing when *ready_fd is -1 (in the
 * foreground).  0, or -1 when the report could not be written. */
int daemonize_ready(int *ready_fd, int status);

#endif
