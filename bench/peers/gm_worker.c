#define _GNU_SOURCE
/*
 * gm_worker.c - the gearmand peer's worker (row 7 of docs/benchmarks.md):
 * registers the function "run" with the gearmand at 127.0.0.1:PORT; each
 * job posix_spawns PROG (no arguments), reads its standard output through
 * a pipe, waits for it and returns that output as the job's result, the
 * same work the execserver does for a job without stdin.  One job at a
 * time per process; the benchmark starts K of them.
 *
 * Usage: gm_worker PORT PROG
 */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libgearman-1.0/gearman.h>

extern char **environ;

static void *run_job(gearman_job_st *job, void *context, size_t *result_size, gearman_return_t *ret)
{
	const char *prog = context;
	char *const argv[] = { (char *)prog, NULL };
	int p[2];
	(void)job;
	*result_size = 0;
	*ret = GEARMAN_WORK_FAIL;
	if (pipe2(p, O_CLOEXEC) != 0)
		return NULL;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	pid_t pid;
	int rc = posix_spawn(&pid, prog, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (rc != 0) {
		close(p[0]);
		return NULL;
	}
	char *out = malloc(4096);
	size_t len = 0;
	ssize_t r;
	while (out && len < 4095 && (r = read(p[0], out + len, 4095 - len)) > 0)
		len += (size_t)r;
	close(p[0]);
	int st;
	waitpid(pid, &st, 0);
	if (!out || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		free(out);
		return NULL;
	}
	*result_size = len;
	*ret = GEARMAN_SUCCESS;
	return out;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: gm_worker PORT PROG\n");
		return 2;
	}
	gearman_worker_st *w = gearman_worker_create(NULL);
	if (!w ||
	    gearman_worker_add_server(w, "127.0.0.1", (in_port_t)atoi(argv[1])) !=
		    GEARMAN_SUCCESS ||
	    gearman_worker_add_function(w, "run", 0, run_job, argv[2]) != GEARMAN_SUCCESS) {
		fprintf(stderr, "gm_worker: %s\n", w ? gearman_worker_error(w) : "no memory");
		return 1;
	}
	for (;;) {
		gearman_return_t rc = gearman_worker_work(w);
		if (rc != GEARMAN_SUCCESS && rc != GEARMAN_WORK_FAIL) {
			fprintf(stderr, "gm_worker: %s\n", gearman_worker_error(w));
			usleep(100000);
		}
	}
}
