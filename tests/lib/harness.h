/*
 * harness.h - starting and stopping a real execserver for integration
 * tests: a private directory, a generated configuration on a free loopback
 * port, the daemon in the foreground with its log in a file, and helpers to
 * read /status.  Nothing depends on a fixed port or on running as root.
 */
#ifndef ES_HARNESS_H
#define ES_HARNESS_H

#include <stdarg.h>
#include <sys/types.h>

#include <event2/listener.h>
#include <json-c/json.h>

struct es_daemon {
	pid_t pid;
	int port;
	char dir[256]; /* private directory, removed by harness_cleanup */
	char config[300];
	char log[300];
	char tls_ca[256]; /* the listener has TLS: /status over https, verified
			     * against this PEM file; "" for plain HTTP */
	char host[16];    /* the address it listens on; "" is 127.0.0.1 */
	char netns[40];   /* the network namespace it runs in (a bed host,
			     * bed.h); "" for the test's own */
};

/* The address d listens on (d->host, or 127.0.0.1). */
const char *harness_host(const struct es_daemon *d);

/* A configuration body with one waitgroup "wg" of `slots` processes and
 * services "cat" (commands cat, true, false, sh-free helpers) and "sleep". */
const char *harness_default_body(int slots);
/* A configuration body: head (YAML lines, NULL for none), one waitgroup
 * "wg" of `slots` processes and a service "tools" in it with one command
 * per program named in progs (space-separated; the command is named as its
 * program), then tail (more YAML lines, NULL for none: further commands of
 * tools when indented as they are, other services, top-level keys).  In a
 * static buffer, replaced by the next call. */
const char *harness_tools_body(const char *head, int slots, const char *progs, const char *tail);

/* Writes DIR/execserver.yml = addr + tempDir + handlers + body, starts the
 * daemon and waits until /status answers.  extra_env: "K=V" or NULL.
 * Returns 0 or -1 (the log is printed). */
int harness_start(struct es_daemon *d, int handlers, const char *body, const char *extra_env);
/* The same for a body that configures tls: the readiness and status
 * requests go over https, verifying the server against the PEM file tls_ca. */
int harness_start_tls(struct es_daemon *d, int handlers, const char *body, const char *extra_env,
		      const char *tls_ca);
/* harness_start_tls in network namespace netns (NULL: this thread's),
 * listening on host (NULL: 127.0.0.1); tls_ca NULL for plain HTTP.
 * bed.h's harness_start_on wraps it. */
int harness_start_at(struct es_daemon *d, const char *netns, const char *host, int handlers,
		     const char *body, const char *extra_env, const char *tls_ca);
/* Starts the daemon again in the same directory (tempDir and log kept, a
 * new port) after harness_stop, with a new configuration body. */
int harness_restart(struct es_daemon *d, int handlers, const char *body, const char *extra_env);
/* SIGTERM, then waits up to timeout_ms; returns the exit status as from
 * waitpid, or -1 on timeout (then the daemon is killed). */
int harness_stop(struct es_daemon *d, int timeout_ms);
/* Kills whatever is left and removes the directory. */
void harness_cleanup(struct es_daemon *d);
/* harness_start with harness_default_body(slots), after extra (YAML lines
 * of the configuration, NULL or "" for none). */
int harness_start_default(struct es_daemon *d, int handlers, int slots, const char *extra,
			  const char *extra_env);
/* Stops the daemon (within 15 s; its log is printed unless it exited 0)
 * and cleans up.  Returns 0 when it exited 0, else -1. */
int harness_stop_clean(struct es_daemon *d);
/* The end of a test's daemon: GET /status, then stopped (within 15 s; its
 * log is printed unless it exited 0) and cleaned up.  Returns 0 when
 * /status said book_consistent (with status_optional: or did not answer)
 * and the daemon exited 0; else -1, saying which on stderr. */
int harness_finish(struct es_daemon *d, int status_optional);
/* Prints the last lines of the daemon's log to stderr. */
void harness_dump_log(const struct es_daemon *d);
/* 1 if the log contains text. */
int harness_log_contains(const struct es_daemon *d, const char *text);
/* How many lines of the log contain text. */
int harness_log_count(const struct es_daemon *d, const char *text);
/* Waits until at least count lines of the log contain text; 0, or -1
 * after timeout_ms. */
int harness_wait_log_count(const struct es_daemon *d, const char *text, int count, int timeout_ms);
/* harness_wait_log_count for one line. */
int harness_wait_log(const struct es_daemon *d, const char *text, int timeout_ms);

/* Polls cond(arg) every 20 ms until it returns non-zero (0) or timeout_ms
 * pass (-1): the wait for a condition that no other helper names. */
int harness_wait_until(int (*cond)(void *arg), void *arg, int timeout_ms);
/* 1 while process pid exists and is not a zombie (/proc/PID/stat). */
int harness_pid_alive(pid_t pid);
/* Waits until pid is gone or a zombie; 0, or -1 after timeout_ms. */
int harness_wait_gone(pid_t pid, int timeout_ms);
/* Waits until the shell command (a pgrep, e.g. "pgrep -f '^sleep 30.123$'
 * > /dev/null") finds its process (found 1: exit status 0) or finds none
 * (found 0: exit status 1; 127, no pgrep, never counts); 0, or -1 after
 * timeout_ms. */
int harness_wait_pgrep(const char *command, int found, int timeout_ms);

/* Sent as a bearer token with every /status request when not NULL (for
 * daemons configured with authToken). */
extern const char *harness_auth_token;

/* GET /status?check=1 parsed (with the book's consistency check), or NULL. */
struct json_object *harness_status(const struct es_daemon *d);
/* Pids of the handlers by slot (0 for an empty slot); returns the count. */
int harness_handler_pids(const struct es_daemon *d, int *pids, int max);
/* Waits until pred(status, arg) holds, polling /status; 0 or -1 on timeout. */
int harness_wait_status(const struct es_daemon *d, int timeout_ms,
			int (*pred)(struct json_object *status, void *arg), void *arg);
/* Integer at a path of keys in a JSON object ("waitgroups", "wg", "running", NULL). */
long long harness_json_int(struct json_object *o, ...);
/* The integer at a path of keys in GET /status (NULL-terminated:
 * "services", "cat", "started", NULL), or -1 when /status did not answer
 * or has no such field. */
long long harness_status_int(const struct es_daemon *d, ...);
/* The field of waitgroup wg in GET /status ("running", "offered", ...), or
 * -1 when /status did not answer or has no such field. */
long long harness_wg_field(const struct es_daemon *d, const char *wg, const char *field);
/* The same with the keys in a va_list. */
long long harness_json_vint(struct json_object *o, va_list ap);
/* Waits until the integer at a path of keys in GET /status (NULL-
 * terminated, as harness_status_int) equals want; 0, or -1 after
 * timeout_ms. */
int harness_wait_int(const struct es_daemon *d, long long want, int timeout_ms, ...);
/* harness_wait_int for field of waitgroup wg. */
int harness_wait_wg(const struct es_daemon *d, const char *wg, const char *field, long long want,
		    int timeout_ms);

/* Forks and execs argv (PATH searched) with stdout and stderr appended to
 * log and extra_env ("K=V" or NULL) added.  The process gets SIGTERM when
 * the caller dies (PR_SET_PDEATHSIG: call it from the main thread).
 * Returns the pid, or -1. */
pid_t harness_spawn(const char *log, const char *extra_env, char *const argv[]);
/* harness_spawn in network namespace netns (NULL or "": the caller's). */
pid_t harness_spawn_in(const char *netns, const char *log, const char *extra_env,
		       char *const argv[]);
/* Moves the calling thread into network namespace netns (/run/netns/NAME;
 * NULL or "": stays).  Returns a handle on the namespace it was in, for
 * harness_netns_return, or -1 (then it did not move); -2 when it stayed. */
int harness_netns_enter(const char *netns);
/* Moves the calling thread back (handle from harness_netns_enter). */
void harness_netns_return(int handle);
/* Sends sig (0: none) to *pid, waits up to timeout_ms for it to exit, else
 * kills it (SIGKILL).  Returns the wait status, or -1 on timeout or when
 * *pid is 0; *pid becomes 0. */
int harness_reap(pid_t *pid, int sig, int timeout_ms);
/* Polls ready(arg) every 20 ms until it returns non-zero (0), the process
 * *pid exits (1; *pid becomes 0) or timeout_ms pass (-1). */
int harness_await(pid_t *pid, int timeout_ms, int (*ready)(void *arg), void *arg);
/* Removes a directory tree (not when KEEP_TEST_DIRS is set). */
void harness_remove_dir(const char *dir);
/* Prints the last lines of a file to stderr under a title. */
void harness_tail(const char *what, const char *file, int lines);
/* How many IPv4 TCP connections of this network namespace to remote port
 * `port` are established (/proc/net/tcp). */
int harness_tcp_connected(int port);
/* A loopback TCP port that was free a moment ago, or -1. */
int harness_free_port(void);
/* A listener of base on a free loopback port (bound, so no race for
 * it), calling cb with arg for each connection; the port into *port.
 * NULL on error.  evconnlistener_free closes it. */
struct evconnlistener *harness_listen(struct event_base *base, evconnlistener_cb cb, void *arg,
				      int *port);

/* The execctl program under test: $EXECCTL_BIN, else the one next to
 * $EXECSERVER_BIN (the build directory), else ./execctl. */
const char *harness_execctl(void);

/* Runs `execserver -t -c config`; its output (stdout and stderr) goes to
 * out.  Returns its exit status, or -1. */
int harness_check_config(const char *config, char *out, size_t outlen);

/* A "Field:  123 kB" line of /proc/<pid>/status (VmRSS, RssAnon, ...), in
 * KiB, or -1. */
long harness_proc_kib(int pid, const char *field);

/* n bytes of a fixed, non-repeating-looking pattern (malloc'd; NULL when
 * out of memory): test data to stream through jobs and compare. */
unsigned char *harness_pattern(size_t n);
/* A whole file, malloc'd and NUL-terminated; its length in *len (0 and
 * NULL when it cannot be opened). */
unsigned char *harness_read_file(const char *path, size_t *len);

/* Milliseconds of sleep. */
void harness_sleep_ms(int ms);
long long harness_now_ms(void);
long long harness_now_us(void);

#endif
