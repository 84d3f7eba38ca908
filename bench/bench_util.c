/* bench_util.c - see bench_util.h. */
#include "autoconfig.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "harness.h"
#include "wsclient.h"

#include <json-c/json.h>

long long bu_now_us(void)
{
	return bu_now_ns() / 1000;
}

long long bu_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void bs_add(struct samples *s, double x)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 1024;
		s->v = realloc(s->v, s->cap * sizeof *s->v);
		if (!s->v) {
			perror("realloc");
			exit(1);
		}
	}
	s->v[s->n++] = x;
}

void bs_free(struct samples *s)
{
	free(s->v);
	memset(s, 0, sizeof *s);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double bs_pct(struct samples *s, double q)
{
	if (!s->n)
		return 0;
	qsort(s->v, s->n, sizeof *s->v, cmp_d);
	size_t i = (size_t)(q * (double)s->n);
	return s->v[i >= s->n ? s->n - 1 : i];
}

double bs_max(struct samples *s)
{
	return bs_pct(s, 1.0);
}

double bs_min(struct samples *s)
{
	return bs_pct(s, 0.0);
}

int bs_write(struct samples *s, const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	bs_pct(s, 0.5);
	for (size_t i = 0; i < s->n; i++)
		fprintf(f, "%.3f %.6f\n", s->v[i], (double)(i + 1) / (double)s->n);
	return fclose(f);
}

int bu_daemon_pids(const struct es_daemon *d, int *pids, int max)
{
	/* plain /status: harness_handler_pids asks for ?check=1, whose
	 * consistency check holds the book's lock while it runs */
	static char body[1 << 16];
	int status = 0, n = 1;
	pids[0] = d->pid;
	if (wsc_http_get("127.0.0.1", d->port, "/status", 2000, &status, body, sizeof body) < 0 ||
	    status != 200)
		return n;
	struct json_object *st = json_tokener_parse(body), *hs;
	if (st && json_object_object_get_ex(st, "handlers", &hs))
		for (size_t i = 0; i < json_object_array_length(hs) && n < max; i++) {
			struct json_object *pid;
			if (json_object_object_get_ex(json_object_array_get_idx(hs, i), "pid",
						      &pid))
				pids[n++] = json_object_get_int(pid);
		}
	json_object_put(st);
	return n;
}

void bu_handler_spread(const struct es_daemon *d, char *out, size_t len)
{
	struct json_object *st = harness_status(d), *hs;
	size_t k = 0;
	out[0] = '\0';
	if (st && json_object_object_get_ex(st, "handlers", &hs))
		for (size_t i = 0; i < json_object_array_length(hs) && k < len; i++)
			k += (size_t)snprintf(out + k, len - k, "%s%lld", i ? " / " : "",
					      harness_json_int(json_object_array_get_idx(hs, i),
							       "connections", NULL));
	if (st)
		json_object_put(st);
}

long long bu_self_cpu_us(void)
{
	struct rusage r;
	getrusage(RUSAGE_SELF, &r);
	return (long long)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1000000LL + r.ru_utime.tv_usec +
	       r.ru_stime.tv_usec;
}

long long bu_proc_ticks(int pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* fields after the command's closing parenthesis: state is field 3,
	 * utime 14, stime 15 */
	char *p = strrchr(buf, ')');
	unsigned long long ut = 0, st = 0;
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	return (long long)(ut + st);
}

long long bu_daemon_cpu_us(const struct es_daemon *d)
{
	int pids[65], n = bu_daemon_pids(d, pids, 65);
	long long ticks = 0;
	for (int i = 0; i < n; i++)
		ticks += bu_proc_ticks(pids[i]);
	return ticks * 1000000LL / sysconf(_SC_CLK_TCK);
}

long bu_daemon_kib(const struct es_daemon *d, const char *field)
{
	int pids[65], n = bu_daemon_pids(d, pids, 65);
	long kib = 0;
	for (int i = 0; i < n; i++)
		kib += harness_proc_kib(pids[i], field);
	return kib;
}

long bu_raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -1;
	rlim_t soft = rl.rlim_max;
	/* the hard limit too, as far as fs.nr_open allows (root only); the
	 * soft one stays at the old hard limit: bu_nofile_at_least raises it
	 * where a row needs more, and daemons raise theirs (master.c) */
	FILE *f = fopen("/proc/sys/fs/nr_open", "r");
	unsigned long long nr_open = 0;
	if (f && fscanf(f, "%llu", &nr_open) == 1 && nr_open > rl.rlim_max) {
		struct rlimit up = { soft, (rlim_t)nr_open };
		if (setrlimit(RLIMIT_NOFILE, &up) == 0)
			rl = up;
	}
	if (f)
		fclose(f);
	rl.rlim_cur = soft;
	setrlimit(RLIMIT_NOFILE, &rl);
	return (long)rl.rlim_cur;
}

long bu_nofile_at_least(long n)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -1;
	if ((long)rl.rlim_cur < n) {
		rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || (long)rl.rlim_max >= n ? (rlim_t)n
										     : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	return (long)rl.rlim_cur;
}

const char *bu_path(char *buf, size_t len, const char *outdir, const char *name)
{
	snprintf(buf, len, "%s/%s", outdir, name);
	return buf;
}

FILE *bu_out(const char *outdir, const char *name)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s.md", outdir, name);
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(1);
	}
	return f;
}

void bu_start(struct es_daemon *d, int handlers, const char *body)
{
	char full[8192];
	snprintf(full, sizeof full, "logLevel: warn\n%s", body);
	if (harness_start(d, handlers, full, NULL) != 0) {
		fprintf(stderr, "esbench: the execserver did not start\n");
		exit(1);
	}
}

void bu_stop(struct es_daemon *d)
{
	harness_stop(d, 30000);
	harness_cleanup(d);
}

/* The inode of the socket whose local port is lport and remote port
 * rport in /proc/net/tcp, or 0. */
static unsigned long tcp_inode(int lport, int rport)
{
	FILE *f = fopen("/proc/net/tcp", "r");
	char line[512];
	unsigned long found = 0;
	if (!f)
		return 0;
	while (!found && fgets(line, sizeof line, f)) {
		unsigned la, lp, ra, rp, st;
		unsigned long inode;
		if (sscanf(line, " %*d: %x:%x %x:%x %x %*x:%*x %*x:%*x %*x %*d %*d %lu", &la, &lp,
			   &ra, &rp, &st, &inode) == 6 &&
		    (int)lp == lport && (int)rp == rport)
			found = inode;
	}
	fclose(f);
	return found;
}

int bu_conn_handler(const struct es_daemon *d, int client_fd)
{
	struct sockaddr_in me;
	socklen_t len = sizeof me;
	if (getsockname(client_fd, (struct sockaddr *)&me, &len) != 0 || me.sin_family != AF_INET)
		return -1;
	unsigned long inode = tcp_inode(d->port, ntohs(me.sin_port));
	if (!inode)
		return -1;
	char want[64];
	snprintf(want, sizeof want, "socket:[%lu]", inode);
	int pids[65], n = bu_daemon_pids(d, pids, 65);
	for (int h = 1; h < n; h++) {
		char dir[64];
		snprintf(dir, sizeof dir, "/proc/%d/fd", pids[h]);
		DIR *dd = opendir(dir);
		struct dirent *e;
		int hit = 0;
		while (dd && !hit && (e = readdir(dd)) != NULL) {
			char path[320], link[64];
			snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
			ssize_t k = readlink(path, link, sizeof link - 1);
			if (k > 0) {
				link[k] = '\0';
				hit = strcmp(link, want) == 0;
			}
		}
		if (dd)
			closedir(dd);
		if (hit)
			return h - 1;
	}
	return -1;
}

void bu_pin_all(const struct es_daemon *d, int pin)
{
	cpu_set_t set;
	int pids[65], n = bu_daemon_pids(d, pids, 65);
	CPU_ZERO(&set);
	if (pin) {
		CPU_SET(0, &set);
	} else {
		for (int c = 0; c < CPU_SETSIZE && c < sysconf(_SC_NPROCESSORS_ONLN); c++)
			CPU_SET(c, &set);
	}
	sched_setaffinity(0, sizeof set, &set);
	for (int i = 0; i < n; i++)
		sched_setaffinity(pids[i], sizeof set, &set);
}
