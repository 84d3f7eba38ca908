/*
 * gm_client.c - the gearmand peer's client (row 7 of docs/benchmarks.md):
 * K threads, each with its own connection, submit the function "run" with
 * gearman_client_do (submit and wait for the result) one after another
 * for SECONDS.  Prints the jobs per second on stdout; writes to OUTFILE
 * one line per job: the microseconds from the submission to the start of
 * the job's program (the result is the program's CLOCK_MONOTONIC at start,
 * bench/peers/stamp).
 *
 * Usage: gm_client PORT K SECONDS OUTFILE
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libgearman-1.0/gearman.h>

static int g_port;
static double g_sec;

struct th {
	pthread_t t;
	long long jobs, failed;
	double *lat;
	size_t n, cap;
};

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *loop(void *p)
{
	struct th *t = p;
	gearman_client_st *c = gearman_client_create(NULL);
	if (!c || gearman_client_add_server(c, "127.0.0.1", (in_port_t)g_port) != GEARMAN_SUCCESS)
		return NULL;
	long long end = now_ns() + (long long)(g_sec * 1e9);
	while (now_ns() < end) {
		size_t len = 0;
		gearman_return_t rc;
		long long t0 = now_ns();
		char *res = gearman_client_do(c, "run", NULL, "x", 1, &len, &rc);
		if (rc != GEARMAN_SUCCESS || !res) {
			if (t->failed++ == 0)
				fprintf(stderr, "gm_client: %s\n", gearman_client_error(c));
			free(res);
			continue;
		}
		char buf[64];
		size_t k = len < sizeof buf - 1 ? len : sizeof buf - 1;
		memcpy(buf, res, k);
		buf[k] = '\0';
		free(res);
		long long start = atoll(buf);
		if (t->n == t->cap) {
			t->cap = t->cap ? t->cap * 2 : 1024;
			t->lat = realloc(t->lat, t->cap * sizeof *t->lat);
		}
		if (t->lat && start > 0)
			t->lat[t->n++] = (double)(start - t0) / 1000.0;
		t->jobs++;
	}
	gearman_client_free(c);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: gm_client PORT K SECONDS OUTFILE\n");
		return 2;
	}
	g_port = atoi(argv[1]);
	int k = atoi(argv[2]);
	g_sec = atof(argv[3]);
	struct th *t = calloc((size_t)k, sizeof *t);
	long long t0 = now_ns();
	for (int i = 0; i < k; i++)
		pthread_create(&t[i].t, NULL, loop, &t[i]);
	long long jobs = 0, failed = 0;
	FILE *out = fopen(argv[4], "w");
	for (int i = 0; i < k; i++) {
		pthread_join(t[i].t, NULL);
		jobs += t[i].jobs;
		failed += t[i].failed;
		for (size_t j = 0; out && j < t[i].n; j++)
			fprintf(out, "%.1f\n", t[i].lat[j]);
		free(t[i].lat);
	}
	if (out)
		fclose(out);
	double el = (double)(now_ns() - t0) / 1e9;
	printf("%.1f %lld\n", (double)jobs / el, failed);
	if (failed)
		fprintf(stderr, "gm_client: %lld jobs failed\n", failed);
	free(t);
	return 0;
}
