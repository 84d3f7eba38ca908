/* fleet.c - see fleet.h. */
#include "autoconfig.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "fleet.h"

static void read_id(struct fleet *f, int i)
{
	struct json_object *st = harness_status(&f->d[i]), *v;
	f->id[i][0] = '\0';
	if (st && json_object_object_get_ex(st, "instance_id", &v))
		snprintf(f->id[i], sizeof f->id[i], "%s", json_object_get_string(v));
	if (st)
		json_object_put(st);
}

/* Instance i's body as started: with the balancer in trustedProxies when
 * it sends the PROXY protocol. */
static int start_one(struct fleet *f, int i, const char *body)
{
	const struct fleet_place *p = f->placed ? &f->place : NULL;
	if (!p || !p->host[i])
		return harness_start(&f->d[i], 1, body, NULL);
	size_t len = strlen(body) + 128;
	char *full = malloc(len);
	if (!full)
		return -1;
	if (p->balancer && p->server_opts && strstr(p->server_opts, "send-proxy"))
		snprintf(full, len, "trustedProxies:\n  - %s\n%s", p->balancer->addr, body);
	else
		snprintf(full, len, "%s", body);
	int rc = harness_start_on(&f->d[i], p->host[i], 1, full, NULL);
	free(full);
	return rc;
}

int fleet_start(struct fleet *f, int n, int slots, const char *const *bodies)
{
	return fleet_start_placed(f, n, slots, bodies, NULL);
}

int fleet_start_placed(struct fleet *f, int n, int slots, const char *const *bodies,
		       const struct fleet_place *place)
{
	struct balancer_spec spec = { .n = n };

	memset(f, 0, sizeof *f);
	if (n < 1 || n > BALANCER_MAX_BACKENDS)
		return -1;
	if (place) {
		f->placed = 1;
		f->place = *place;
		spec.netns = place->balancer ? place->balancer->netns : NULL;
		spec.bind_addr = place->balancer ? place->balancer->addr : NULL;
		spec.server_opts = place->server_opts;
		spec.backend_lines = place->backend_lines;
		spec.http = place->http;
	}
	for (int i = 0; i < n; i++) {
		const char *body = bodies && bodies[i] ? bodies[i] : harness_default_body(slots);
		if (start_one(f, i, body) != 0) {
			fleet_stop(f);
			return -1;
		}
		f->n = i + 1;
		spec.addr[i] = place && place->host[i] ? place->host[i]->addr : NULL;
		spec.port[i] = f->d[i].port;
		read_id(f, i);
	}
	if (balancer_start_at(&f->lb, &spec) != 0) {
		fleet_stop(f);
		return -1;
	}
	snprintf(f->url, sizeof f->url, "ws://%s:%d", f->lb.bind_addr, f->lb.port);
	return 0;
}

int fleet_stop(struct fleet *f)
{
	int clean = 0;
	balancer_stop(&f->lb, 5000);
	balancer_cleanup(&f->lb);
	for (int i = 0; i < f->n; i++) {
		if (f->d[i].pid) {
			pid_t pid = f->d[i].pid;
			int status = harness_stop(&f->d[i], 25000);
			if (!(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
				harness_dump_log(&f->d[i]);
				fprintf(stderr, "fleet_stop: instance %d (pid %d): ", i, (int)pid);
				if (status == -1)
					fprintf(stderr,
						"still running 25 s after SIGTERM: killed\n");
				else if (WIFEXITED(status))
					fprintf(stderr, "exit status %d\n", WEXITSTATUS(status));
				else
					fprintf(stderr, "ended by signal %d\n", WTERMSIG(status));
				clean = -1;
			}
		}
		harness_cleanup(&f->d[i]);
	}
	f->n = 0;
	return clean;
}

int fleet_restart(struct fleet *f, int i, const char *body)
{
	if (i < 0 || i >= f->n)
		return -1;
	harness_stop(&f->d[i], 25000);
	harness_cleanup(&f->d[i]);
	if (start_one(f, i, body) != 0)
		return -1;
	read_id(f, i);
	return balancer_set_port(&f->lb, i, f->d[i].port);
}

int fleet_index(const struct fleet *f, const char *instance_id)
{
	for (int i = 0; instance_id && i < f->n; i++)
		if (strcmp(f->id[i], instance_id) == 0)
			return i;
	return -1;
}

static long long status_vint(const struct fleet *f, int i, va_list ap)
{
	struct json_object *st = harness_status(&f->d[i]);
	long long v = harness_json_vint(st, ap);
	if (st)
		json_object_put(st);
	return v;
}

long long fleet_status_int(const struct fleet *f, int i, ...)
{
	va_list ap;
	va_start(ap, i);
	long long v = status_vint(f, i, ap);
	va_end(ap);
	return v;
}

long long fleet_sum(const struct fleet *f, ...)
{
	long long sum = 0;
	for (int i = 0; i < f->n; i++) {
		va_list ap;
		va_start(ap, f);
		long long v = status_vint(f, i, ap);
		va_end(ap);
		sum += v > 0 ? v : 0;
	}
	return sum;
}
