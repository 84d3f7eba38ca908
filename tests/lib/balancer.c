/* balancer.c - see balancer.h. */
#include "autoconfig.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "balancer.h"
#include "harness.h"

static int write_config(const struct es_balancer *b)
{
	FILE *f = fopen(b->config, "w");
	if (!f)
		return -1;
	fprintf(f,
		"global\n"
		"    nbthread 1\n"
		"    maxconn 2000\n"
		"    stats socket %s mode 600 level admin\n"
		"defaults\n"
		"    mode %s\n"
		"    timeout connect 1s\n"
		"    timeout client 1h\n"
		"    timeout server 1h\n"
		"    retries 2\n"
		"    option redispatch 1\n"
		"frontend fe\n"
		"    bind %s:%d\n"
		"    default_backend be\n"
		"backend be\n"
		"    balance leastconn\n"
		"%s",
		b->socket, b->http ? "http" : "tcp", b->bind_addr, b->port, b->backend_lines);
	for (int i = 0; i < b->nbackends; i++)
		fprintf(f, "    server s%d %s:%d %s\n", i + 1, b->backend_addr[i],
			b->backend_port[i], b->server_opts);
	return fclose(f);
}

int balancer_command(const struct es_balancer *b, const char *command, char *out, size_t cap)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len = 0;
	int fd;

	if (cap)
		out[0] = '\0';
	if (strlen(b->socket) >= sizeof sa.sun_path)
		return -1;
	strcpy(sa.sun_path, b->socket);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		close(fd);
		return -1;
	}
	/* Non-interactive mode: one command per connection, haproxy closes
	 * after the answer. */
	char line[512];
	int n = snprintf(line, sizeof line, "%s\n", command);
	if (n < 0 || (size_t)n >= sizeof line || send(fd, line, (size_t)n, MSG_NOSIGNAL) != n) {
		close(fd);
		return -1;
	}
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 3000) <= 0)
			break;
		char buf[4096];
		ssize_t r = read(fd, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		for (ssize_t i = 0; i < r && len + 1 < cap; i++)
			out[len++] = buf[i];
	}
	if (cap)
		out[len] = '\0';
	close(fd);
	return (int)len;
}

/* A command whose success answer is empty (haproxy prints only errors). */
static int quiet_command(const struct es_balancer *b, const char *command)
{
	char out[512];
	int n = balancer_command(b, command, out, sizeof out);
	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++)
		if (out[i] != '\n' && out[i] != ' ') {
			fprintf(stderr, "balancer: \"%s\": %s", command, out);
			return -1;
		}
	return 0;
}

static int valid_index(const struct es_balancer *b, int index)
{
	return index >= 0 && index < b->nbackends;
}

int balancer_set_state(const struct es_balancer *b, int index, const char *state)
{
	char cmd[128];
	if (!valid_index(b, index))
		return -1;
	snprintf(cmd, sizeof cmd, "set server be/s%d state %s", index + 1, state);
	return quiet_command(b, cmd);
}

int balancer_set_port(struct es_balancer *b, int index, int port)
{
	char cmd[128], out[512];
	if (!valid_index(b, index))
		return -1;
	snprintf(cmd, sizeof cmd, "set server be/s%d addr %s port %d", index + 1,
		 b->backend_addr[index], port);
	/* answers "IP changed from ... port changed from ..." on success */
	if (balancer_command(b, cmd, out, sizeof out) < 0 || !strstr(out, "changed"))
		return -1;
	b->backend_port[index] = port;
	return 0;
}

int balancer_cut(const struct es_balancer *b, int index)
{
	char cmd[128];
	if (!valid_index(b, index))
		return -1;
	snprintf(cmd, sizeof cmd, "shutdown sessions server be/s%d", index + 1);
	return quiet_command(b, cmd);
}

int balancer_cut_except(const struct es_balancer *b, int index, const int *keep_ports, int nkeep)
{
	static char out[1 << 16];
	char srv[32], cmd[128];
	int cut = 0;
	if (!valid_index(b, index) || balancer_command(b, "show sess", out, sizeof out) < 0)
		return -1;
	/* one line per session: "0x...: proto=tcpv4 src=127.0.0.1:40000 fe=fe
	 * be=be srv=s1 ..." */
	snprintf(srv, sizeof srv, " srv=s%d ", index + 1);
	for (char *line = out; line && *line;
	     line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		char *end = strchr(line, '\n'), *colon = strchr(line, ':'), *src;
		if (end)
			*end = '\0';
		if (!colon || !strstr(line, srv) || !(src = strstr(line, " src=")))
			goto next;
		char *port = strchr(src + 5, ' ');
		while (port && port > src && *port != ':')
			port--;
		int p = port && *port == ':' ? atoi(port + 1) : -1, keep = 0;
		for (int i = 0; i < nkeep; i++)
			keep |= keep_ports[i] == p;
		if (!keep) {
			snprintf(cmd, sizeof cmd, "shutdown session %.*s", (int)(colon - line),
				 line);
			if (quiet_command(b, cmd) == 0)
				cut++;
		}
next:
		if (end)
			*end = '\n';
	}
	return cut;
}

/* The value of CSV column `column` (0-based) on the line that starts
 * with prefix, or -1. */
static long long csv_field(const char *csv, const char *prefix, int column)
{
	for (const char *line = csv; line && *line;
	     line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		if (strncmp(line, prefix, strlen(prefix)) != 0)
			continue;
		const char *p = line;
		for (int field = 0; field < column && p; field++)
			p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
		return p ? atoll(p) : -1;
	}
	return -1;
}

/* haproxy's "show stat" columns: pxname,svname,qcur,qmax,scur,smax,slim,
 * stot,bin,bout,... */
enum {
	COL_SCUR = 4,
	COL_BIN = 8,
	COL_BOUT = 9,
	COL_DREQ = 10
};

int balancer_sessions(const struct es_balancer *b, int index)
{
	static char out[1 << 16];
	char prefix[32];
	if (!valid_index(b, index) || balancer_command(b, "show stat", out, sizeof out) < 0)
		return -1;
	snprintf(prefix, sizeof prefix, "be,s%d,", index + 1);
	return (int)csv_field(out, prefix, COL_SCUR);
}

long long balancer_denied(const struct es_balancer *b)
{
	static char out[1 << 16];
	if (balancer_command(b, "show stat", out, sizeof out) < 0)
		return -1;
	/* a deny in the backend counts on its line (and the frontend's) */
	return csv_field(out, "be,BACKEND,", COL_DREQ);
}

long long balancer_bytes(const struct es_balancer *b)
{
	static char out[1 << 16];
	if (balancer_command(b, "show stat", out, sizeof out) < 0)
		return -1;
	long long in = csv_field(out, "fe,FRONTEND,", COL_BIN),
		  outb = csv_field(out, "fe,FRONTEND,", COL_BOUT);
	return in < 0 || outb < 0 ? -1 : in + outb;
}

static int runtime_api_answers(void *arg)
{
	char out[256];
	return balancer_command(arg, "show info", out, sizeof out) > 0;
}

int balancer_start(struct es_balancer *b, const int *ports, int n)
{
	struct balancer_spec spec = { .n = n };
	if (n < 1 || n > BALANCER_MAX_BACKENDS)
		return -1;
	memcpy(spec.port, ports, sizeof ports[0] * (size_t)n);
	return balancer_start_at(b, &spec);
}

int balancer_start_at(struct es_balancer *b, const struct balancer_spec *spec)
{
	int n = spec->n;
	memset(b, 0, sizeof *b);
	if (n < 1 || n > BALANCER_MAX_BACKENDS)
		return -1;
	snprintf(b->netns, sizeof b->netns, "%s", spec->netns ? spec->netns : "");
	snprintf(b->bind_addr, sizeof b->bind_addr, "%s",
		 spec->bind_addr ? spec->bind_addr : "127.0.0.1");
	for (int i = 0; i < n; i++) {
		snprintf(b->backend_addr[i], sizeof b->backend_addr[i], "%s",
			 spec->addr[i] ? spec->addr[i] : "127.0.0.1");
		b->backend_port[i] = spec->port[i];
	}
	snprintf(b->server_opts, sizeof b->server_opts, "%s",
		 spec->server_opts ? spec->server_opts : "");
	snprintf(b->backend_lines, sizeof b->backend_lines, "%s",
		 spec->backend_lines ? spec->backend_lines : "");
	b->http = spec->http;
	snprintf(b->dir, sizeof b->dir, "/tmp/es-lb-XXXXXX");
	if (!mkdtemp(b->dir))
		return -1;
	snprintf(b->config, sizeof b->config, "%s/haproxy.cfg", b->dir);
	snprintf(b->socket, sizeof b->socket, "%s/admin.sock", b->dir);
	snprintf(b->log, sizeof b->log, "%s/haproxy.log", b->dir);
	b->nbackends = n;
	const char *bin = getenv("HAPROXY_BIN") ? getenv("HAPROXY_BIN") : "haproxy";

	for (int attempt = 0; attempt < 5; attempt++) {
		int home = harness_netns_enter(b->netns);
		if (home == -1)
			return -1;
		b->port = harness_free_port();
		harness_netns_return(home);
		if (b->port < 0 || write_config(b) != 0)
			return -1;
		/* -db: in the foreground; -q: quiet about the absent log targets */
		char *argv[] = { (char *)bin, "-db", "-q", "-f", b->config, NULL };
		b->pid = harness_spawn_in(b->netns, b->log, NULL, argv);
		if (b->pid < 0)
			return -1;
		/* The listeners are bound before the runtime API answers. */
		int up = harness_await(&b->pid, 10000, runtime_api_answers, b);
		if (up == 0)
			return 0;
		if (up < 0) {
			harness_reap(&b->pid, SIGKILL, 5000);
			break;
		}
		/* died: perhaps the port was taken meanwhile */
	}
	harness_tail("haproxy log", b->log, 20);
	return -1;
}

int balancer_stop(struct es_balancer *b, int timeout_ms)
{
	return harness_reap(&b->pid, SIGTERM, timeout_ms);
}

void balancer_cleanup(struct es_balancer *b)
{
	harness_reap(&b->pid, SIGKILL, 5000);
	harness_remove_dir(b->dir);
	b->dir[0] = '\0';
}
