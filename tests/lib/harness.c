/* harness.c - see harness.h. */
#include "autoconfig.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "wsclient.h"

void harness_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

long long harness_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long harness_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int harness_free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sa;
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

struct evconnlistener *harness_listen(struct event_base *base, evconnlistener_cb cb, void *arg,
				      int *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sa;
	struct evconnlistener *lis = evconnlistener_new_bind(
		base, cb, arg, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_REUSEABLE,
		16, (struct sockaddr *)&sa, sizeof sa);

	if (lis && getsockname(evconnlistener_get_fd(lis), (struct sockaddr *)&sa, &len) != 0) {
		evconnlistener_free(lis);
		lis = NULL;
	}
	if (lis)
		*port = ntohs(sa.sin_port);
	return lis;
}

const char *harness_default_body(int slots)
{
	static char body[1024];
	snprintf(body, sizeof body,
		 "waitgroups:\n"
		 "  wg:\n"
		 "    processes: %d\n"
		 "services:\n"
		 "  cat:\n"
		 "    waitgroup: wg\n"
		 "    commands:\n"
		 "      cat: {prog: cat}\n"
		 "      true: {prog: \"true\"}\n"
		 "      false: {prog: \"false\"}\n"
		 "      echo: {prog: echo}\n"
		 "  sleep:\n"
		 "    waitgroup: wg\n"
		 "    commands:\n"
		 "      sleep: {prog: sleep}\n",
		 slots);
	return body;
}

const char *harness_tools_body(const char *head, int slots, const char *progs, const char *tail)
{
	static char body[4096];
	size_t n = (size_t)snprintf(body, sizeof body,
				    "%s"
				    "waitgroups:\n"
				    "  wg: {processes: %d}\n"
				    "services:\n"
				    "  tools:\n"
				    "    waitgroup: wg\n"
				    "    commands:\n",
				    head ? head : "", slots);

	for (const char *p = progs; *p && n < sizeof body;) {
		size_t len = strcspn(p, " ");

		if (len > 0)
			n += (size_t)snprintf(body + n, sizeof body - n,
					      "      %.*s: {prog: \"%.*s\"}\n", (int)len, p,
					      (int)len, p);
		p += len + (p[len] == ' ');
	}
	if (n < sizeof body)
		snprintf(body + n, sizeof body - n, "%s", tail ? tail : "");
	return body;
}

void harness_tail(const char *what, const char *file, int lines)
{
	char cmd[400];
	snprintf(cmd, sizeof cmd, "tail -n %d '%s' >&2", lines, file);
	fprintf(stderr, "---- %s (%s) ----\n", what, file);
	if (system(cmd) != 0)
		fprintf(stderr, "(no log)\n");
}

void harness_dump_log(const struct es_daemon *d)
{
	harness_tail("execserver log", d->log, 40);
}

int harness_netns_enter(const char *netns)
{
	char path[96];

	if (!netns || !netns[0])
		return -2;
	snprintf(path, sizeof path, "/run/netns/%s", netns);
	int prev = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (prev < 0 || fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
		fprintf(stderr, "harness: cannot enter network namespace %s: %s\n", netns,
			strerror(errno));
		if (prev >= 0)
			close(prev);
		prev = -1;
	}
	if (fd >= 0)
		close(fd);
	return prev;
}

void harness_netns_return(int handle)
{
	if (handle < 0)
		return;
	if (setns(handle, CLONE_NEWNET) != 0)
		fprintf(stderr, "harness: cannot return to the network namespace: %s\n",
			strerror(errno));
	close(handle);
}

const char *harness_host(const struct es_daemon *d)
{
	return d->host[0] ? d->host : "127.0.0.1";
}

pid_t harness_spawn(const char *log, const char *extra_env, char *const argv[])
{
	return harness_spawn_in(NULL, log, extra_env, argv);
}

pid_t harness_spawn_in(const char *netns, const char *log, const char *extra_env,
		       char *const argv[])
{
	pid_t parent = getpid(), pid = fork();
	if (pid != 0)
		return pid;
	/* a test or bench that dies (an assert, a crash, an error exit that
	 * skips its cleanup) takes what it started with it, instead of leaving
	 * a daemon holding its port and CPU */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(127);
	if (harness_netns_enter(netns) == -1)
		_exit(127);
	FILE *f = freopen(log, "a", stderr);
	(void)f;
	dup2(STDERR_FILENO, STDOUT_FILENO);
	if (extra_env)
		putenv((char *)extra_env);
	execvp(argv[0], argv);
	fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

int harness_reap(pid_t *pid, int sig, int timeout_ms)
{
	int status;

	if (*pid <= 0)
		return -1;
	if (sig)
		kill(*pid, sig);
	for (int waited = 0; waited < timeout_ms; waited += 10) {
		if (waitpid(*pid, &status, WNOHANG) == *pid) {
			*pid = 0;
			return status;
		}
		harness_sleep_ms(10);
	}
	kill(*pid, SIGKILL);
	waitpid(*pid, NULL, 0);
	*pid = 0;
	return -1;
}

int harness_log_count(const struct es_daemon *d, const char *text)
{
	FILE *f = fopen(d->log, "r");
	char line[2048];
	int found = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		found += strstr(line, text) != NULL;
	fclose(f);
	return found;
}

int harness_log_contains(const struct es_daemon *d, const char *text)
{
	return harness_log_count(d, text) > 0;
}

int harness_wait_until(int (*cond)(void *arg), void *arg, int timeout_ms)
{
	long long t0 = harness_now_ms();

	for (;;) {
		if (cond(arg))
			return 0;
		if (harness_now_ms() - t0 >= timeout_ms)
			return -1;
		harness_sleep_ms(20);
	}
}

struct log_goal {
	const struct es_daemon *d;
	const char *text;
	int count;
};

static int log_reached(void *arg)
{
	const struct log_goal *g = arg;
	return harness_log_count(g->d, g->text) >= g->count;
}

int harness_wait_log_count(const struct es_daemon *d, const char *text, int count, int timeout_ms)
{
	struct log_goal g = { d, text, count };
	return harness_wait_until(log_reached, &g, timeout_ms);
}

int harness_wait_log(const struct es_daemon *d, const char *text, int timeout_ms)
{
	return harness_wait_log_count(d, text, 1, timeout_ms);
}

int harness_pid_alive(pid_t pid)
{
	char path[64], state = 'Z';
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (pid <= 0 || !(f = fopen(path, "r")))
		return 0;
	if (fscanf(f, "%*d (%*[^)]) %c", &state) != 1)
		state = 'Z';
	fclose(f);
	return state != 'Z' && state != 'X';
}

static int pid_gone(void *arg)
{
	return !harness_pid_alive(*(pid_t *)arg);
}

int harness_wait_gone(pid_t pid, int timeout_ms)
{
	return harness_wait_until(pid_gone, &pid, timeout_ms);
}

int harness_tcp_connected(int port)
{
	FILE *f = fopen("/proc/net/tcp", "r");
	char line[512];
	int n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof line, f)) {
		unsigned rport, st;
		if (sscanf(line, " %*d: %*x:%*x %*x:%x %x", &rport, &st) == 2 &&
		    (int)rport == port && st == 1)
			n++;
	}
	fclose(f);
	return n;
}

struct pgrep_goal {
	const char *command;
	int status; /* pgrep's exit status awaited: 0 found, 1 none */
};

static int pgrep_says(void *arg)
{
	const struct pgrep_goal *g = arg;
	int st = system(g->command);
	return WIFEXITED(st) && WEXITSTATUS(st) == g->status;
}

int harness_wait_pgrep(const char *command, int found, int timeout_ms)
{
	struct pgrep_goal g = { command, found ? 0 : 1 };
	return harness_wait_until(pgrep_says, &g, timeout_ms);
}

static int write_config(struct es_daemon *d, int handlers, const char *body)
{
	FILE *f = fopen(d->config, "w");
	if (!f)
		return -1;
	/* As root the daemon refuses to start without a user to switch to:
	 * tests that do not name one (or the key itself) run jobs as root. */
	int as_root = geteuid() == 0 && !strstr(body, "user:") && !strstr(body, "allowRootJobs");
	/* a daemon that drops to another user must reach its tempDir below */
	if (strstr(body, "user:") && chmod(d->dir, 0711) != 0) {
		fclose(f);
		return -1;
	}
	/* debug logging unless the body sets its own level */
	fprintf(f,
		"addr: %s:%d\n"
		"tempDir: %s/tmp\n"
		"pidFile: %s/execserver.pid\n"
		"handlers: %d\n"
		"%s"
		"%s"
		"%s",
		harness_host(d), d->port, d->dir, d->dir, handlers,
		strstr(body, "logLevel:") ? "" : "logLevel: debug\n",
		as_root ? "allowRootJobs: true\n" : "", body);
	return fclose(f);
}

static int launch(struct es_daemon *d, int handlers, const char *body, const char *extra_env);
const char *harness_auth_token;

struct json_object *harness_status(const struct es_daemon *d)
{
	char body[1 << 16];
	size_t cap = 512 + (harness_auth_token ? strlen(harness_auth_token) : 0);
	char *req = malloc(cap); /* a token of any length, whole */
	int status = 0;

	if (req == NULL)
		return NULL;
	snprintf(req, cap,
		 "GET /status?check=1 HTTP/1.1\r\nHost: %s\r\n"
		 "Connection: close\r\n%s%s%s\r\n",
		 harness_host(d), harness_auth_token ? "Authorization: Bearer " : "",
		 harness_auth_token ? harness_auth_token : "", harness_auth_token ? "\r\n" : "");
	/* from the daemon's own host: its link may be cut, and a bed address
	 * is never dialled from outside the bed */
	int home = harness_netns_enter(d->netns);
	if (home == -1) {
		free(req);
		return NULL;
	}
	int r = wsc_https_request(harness_host(d), d->port, d->tls_ca[0] ? d->tls_ca : NULL, req,
				  2000, &status, body, sizeof body);
	harness_netns_return(home);
	free(req);
	if (r < 0 || status != 200)
		return NULL;
	return json_tokener_parse(body);
}

int harness_await(pid_t *pid, int timeout_ms, int (*ready)(void *arg), void *arg)
{
	for (int waited = 0; waited < timeout_ms; waited += 20) {
		if (ready(arg))
			return 0;
		int status;
		if (waitpid(*pid, &status, WNOHANG) == *pid) {
			*pid = 0;
			return 1;
		}
		harness_sleep_ms(20);
	}
	return -1;
}

struct ready {
	const struct es_daemon *d;
	int handlers;
};

/* Ready: /status answers and every handler has started (one handler may
 * answer before the others are up). */
static int daemon_ready(void *arg)
{
	const struct ready *r = arg;
	int pids[64], n = harness_handler_pids(r->d, pids, 64), up = n > 0;
	for (int i = 0; i < n; i++)
		up = up && pids[i] > 0;
	return up && (r->handlers <= 0 || n == r->handlers);
}

int harness_start_default(struct es_daemon *d, int handlers, int slots, const char *extra,
			  const char *extra_env)
{
	char body[4096];
	snprintf(body, sizeof body, "%s%s", extra ? extra : "", harness_default_body(slots));
	return harness_start(d, handlers, body, extra_env);
}

int harness_stop_clean(struct es_daemon *d)
{
	int status = harness_stop(d, 15000);
	int exited_0 = WIFEXITED(status) && WEXITSTATUS(status) == 0;

	if (!exited_0) {
		fprintf(stderr, "harness: the daemon did not exit 0 (status %d)\n", status);
		harness_dump_log(d);
	}
	harness_cleanup(d);
	return exited_0 ? 0 : -1;
}

int harness_finish(struct es_daemon *d, int status_optional)
{
	struct json_object *st = harness_status(d), *v;
	int answered = st != NULL, consistent = status_optional;

	if (st) {
		consistent = json_object_object_get_ex(st, "book_consistent", &v) &&
			     json_object_get_boolean(v);
		json_object_put(st);
	}
	if (!consistent)
		fprintf(stderr, "harness: %s\n",
			answered ? "book_consistent is not true" : "/status did not answer");
	int stopped = harness_stop_clean(d);
	return consistent && stopped == 0 ? 0 : -1;
}

int harness_start(struct es_daemon *d, int handlers, const char *body, const char *extra_env)
{
	return harness_start_tls(d, handlers, body, extra_env, NULL);
}

/* A fresh d with its private directory. */
static int prepare(struct es_daemon *d, const char *netns, const char *host, const char *tls_ca)
{
	memset(d, 0, sizeof *d);
	snprintf(d->tls_ca, sizeof d->tls_ca, "%s", tls_ca ? tls_ca : "");
	snprintf(d->netns, sizeof d->netns, "%s", netns ? netns : "");
	snprintf(d->host, sizeof d->host, "%s", host ? host : "");
	snprintf(d->dir, sizeof d->dir, "/tmp/es-test-XXXXXX");
	if (!mkdtemp(d->dir))
		return -1;
	snprintf(d->config, sizeof d->config, "%s/execserver.yml", d->dir);
	snprintf(d->log, sizeof d->log, "%s/execserver.log", d->dir);
	return 0;
}

int harness_start_tls(struct es_daemon *d, int handlers, const char *body, const char *extra_env,
		      const char *tls_ca)
{
	return harness_start_at(d, NULL, NULL, handlers, body, extra_env, tls_ca);
}

int harness_start_at(struct es_daemon *d, const char *netns, const char *host, int handlers,
		     const char *body, const char *extra_env, const char *tls_ca)
{
	if (prepare(d, netns, host, tls_ca) != 0)
		return -1;
	return launch(d, handlers, body, extra_env);
}

/* A port free on the daemon's host a moment ago. */
static int free_port_of(const struct es_daemon *d)
{
	int home = harness_netns_enter(d->netns);
	if (home == -1)
		return -1;
	int port = harness_free_port();
	harness_netns_return(home);
	return port;
}

int harness_restart(struct es_daemon *d, int handlers, const char *body, const char *extra_env)
{
	if (d->pid || !d->dir[0])
		return -1;
	return launch(d, handlers, body, extra_env);
}

/* Writes the configuration on a free port and starts the daemon in d->dir. */
static int launch(struct es_daemon *d, int handlers, const char *body, const char *extra_env)
{
	const char *bin = getenv("EXECSERVER_BIN");
	if (!bin)
		bin = "./execserver";

	for (int attempt = 0; attempt < 5; attempt++) {
		d->port = free_port_of(d);
		if (d->port < 0 || write_config(d, handlers, body) != 0)
			return -1;
		char *argv[] = { (char *)bin, "-f", "-c", d->config, NULL };
		d->pid = harness_spawn_in(d->netns, d->log, extra_env, argv);
		if (d->pid < 0)
			return -1;
		struct ready ready = { d, handlers };
		int up = harness_await(&d->pid, 10000, daemon_ready, &ready);
		if (up == 0)
			return 0;
		if (up < 0) {
			harness_dump_log(d);
			harness_reap(&d->pid, SIGKILL, 5000);
			return -1;
		}
		/* died: perhaps the port was taken meanwhile */
	}
	harness_dump_log(d);
	return -1;
}

int harness_stop(struct es_daemon *d, int timeout_ms)
{
	return harness_reap(&d->pid, SIGTERM, timeout_ms);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

void harness_remove_dir(const char *dir)
{
	if (dir[0] && !getenv("KEEP_TEST_DIRS"))
		nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void harness_cleanup(struct es_daemon *d)
{
	harness_reap(&d->pid, SIGKILL, 5000);
	harness_remove_dir(d->dir);
}

int harness_handler_pids(const struct es_daemon *d, int *pids, int max)
{
	struct json_object *st = harness_status(d), *hs;
	int n = 0;

	if (!st)
		return -1;
	if (json_object_object_get_ex(st, "handlers", &hs)) {
		for (size_t i = 0; i < json_object_array_length(hs) && n < max; i++) {
			struct json_object *pid;
			json_object_object_get_ex(json_object_array_get_idx(hs, i), "pid", &pid);
			pids[n++] = json_object_get_int(pid);
		}
	}
	json_object_put(st);
	return n;
}

const char *harness_execctl(void)
{
	static char path[512];
	const char *bin = getenv("EXECCTL_BIN"), *server = getenv("EXECSERVER_BIN");
	char dir[512];

	if (bin) {
		snprintf(path, sizeof path, "%s", bin);
	} else {
		snprintf(dir, sizeof dir, "%s", server ? server : "./execserver");
		snprintf(path, sizeof path, "%s/execctl", dirname(dir));
	}
	return path;
}

int harness_wait_status(const struct es_daemon *d, int timeout_ms,
			int (*pred)(struct json_object *status, void *arg), void *arg)
{
	long long end = harness_now_ms() + timeout_ms;
	do {
		struct json_object *st = harness_status(d);
		int ok = st && pred(st, arg);
		if (st)
			json_object_put(st);
		if (ok)
			return 0;
		harness_sleep_ms(20);
	} while (harness_now_ms() < end);
	return -1;
}

long long harness_status_int(const struct es_daemon *d, ...)
{
	struct json_object *st = harness_status(d);
	va_list ap;

	va_start(ap, d);
	long long v = harness_json_vint(st, ap);
	va_end(ap);
	if (st)
		json_object_put(st);
	return v;
}

long long harness_wg_field(const struct es_daemon *d, const char *wg, const char *field)
{
	return harness_status_int(d, "waitgroups", wg, field, NULL);
}

struct int_goal {
	const char *keys[8]; /* NULL-terminated */
	long long want;
};

static int int_reached(struct json_object *st, void *arg)
{
	const struct int_goal *g = arg;
	struct json_object *o = st;

	for (int i = 0; o && g->keys[i]; i++)
		if (!json_object_object_get_ex(o, g->keys[i], &o))
			o = NULL;
	return o && json_object_get_int64(o) == g->want;
}

int harness_wait_int(const struct es_daemon *d, long long want, int timeout_ms, ...)
{
	struct int_goal g = { .want = want };
	va_list ap;
	int n = 0;

	va_start(ap, timeout_ms);
	while (n < 7 && (g.keys[n] = va_arg(ap, const char *)) != NULL)
		n++;
	va_end(ap);
	g.keys[n] = NULL;
	return harness_wait_status(d, timeout_ms, int_reached, &g);
}

int harness_wait_wg(const struct es_daemon *d, const char *wg, const char *field, long long want,
		    int timeout_ms)
{
	return harness_wait_int(d, want, timeout_ms, "waitgroups", wg, field, NULL);
}

long long harness_json_vint(struct json_object *o, va_list ap)
{
	const char *key;

	while (o && (key = va_arg(ap, const char *)) != NULL)
		if (!json_object_object_get_ex(o, key, &o))
			o = NULL;
	return o ? json_object_get_int64(o) : -1;
}

int harness_check_config(const char *config, char *out, size_t outlen)
{
	char cmd[1024];
	const char *bin = getenv("EXECSERVER_BIN");
	snprintf(cmd, sizeof cmd, "'%s' -t -c '%s' 2>&1", bin ? bin : "./execserver", config);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	size_t n = fread(out, 1, outlen - 1, p);
	out[n] = '\0';
	int status = pclose(p);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

long harness_proc_kib(int pid, const char *field)
{
	char path[64], line[256];
	size_t len = strlen(field);
	long kib = -1;
	snprintf(path, sizeof path, "/proc/%d/status", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, field, len) == 0 && line[len] == ':')
			kib = atol(line + len + 1);
	fclose(f);
	return kib;
}

long long harness_json_int(struct json_object *o, ...)
{
	va_list ap;

	va_start(ap, o);
	long long v = harness_json_vint(o, ap);
	va_end(ap);
	return v;
}

unsigned char *harness_pattern(size_t n)
{
	unsigned char *b = malloc(n ? n : 1);

	for (size_t i = 0; b && i < n; i++)
		b[i] = (unsigned char)((i * 2654435761u) >> 13);
	return b;
}

unsigned char *harness_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *b;
	long n;

	*len = 0;
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	b = n >= 0 ? malloc((size_t)n + 1) : NULL;
	if (b) {
		*len = fread(b, 1, (size_t)n, f);
		b[*len] = '\0';
	}
	fclose(f);
	return b;
}
