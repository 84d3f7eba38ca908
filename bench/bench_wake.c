/*
 * bench_wake.c - the `wake` row: what waking a sleeping process costs on
 * this machine, the unit of most latencies in docs/benchmarks.md.  Two
 * processes bounce a byte over two pipes (each hop wakes the other), once
 * both on CPU 0 and once free to sit on different CPUs; the figure is
 * microseconds per round trip (two wake-ups), median of five runs.
 * Virtual machines pay dearly for waking an idle virtual CPU (an
 * inter-processor interrupt through the hypervisor), and every hop of a
 * job between client, handler and program can be such a wake-up.
 */
#include "autoconfig.h"

#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_rows.h"
#include "bench_util.h"

#define ROUND_TRIPS 20000

/* Microseconds per round trip; pin: both processes on CPU 0. */
static double round_trip_us(int pin)
{
	int ab[2], ba[2];
	char c = 'x';
	if (pipe(ab) != 0 || pipe(ba) != 0)
		return -1;
	cpu_set_t one, all;
	sched_getaffinity(0, sizeof all, &all);
	CPU_ZERO(&one);
	CPU_SET(0, &one);
	if (pin)
		sched_setaffinity(0, sizeof one, &one);
	pid_t pid = fork();
	if (pid == 0) {
		for (int i = 0; i < ROUND_TRIPS; i++)
			if (read(ab[0], &c, 1) != 1 || write(ba[1], &c, 1) != 1)
				_exit(1);
		_exit(0);
	}
	long long t0 = bu_now_ns();
	for (int i = 0; i < ROUND_TRIPS && pid > 0; i++)
		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
			break;
	long long t1 = bu_now_ns();
	if (pid > 0)
		waitpid(pid, NULL, 0);
	sched_setaffinity(0, sizeof all, &all);
	close(ab[0]);
	close(ab[1]);
	close(ba[0]);
	close(ba[1]);
	return (double)(t1 - t0) / 1000.0 / ROUND_TRIPS;
}

void row_wake(const struct bench_opts *o)
{
	double one[5], two[5];
	for (int i = 0; i < 5; i++) {
		one[i] = round_trip_us(1);
		two[i] = round_trip_us(0);
	}
	struct spread a = spread_of(one, 5), b = spread_of(two, 5);
	FILE *md = bu_out(o->out, "wake");
	fprintf(md,
		"Waking a sleeping process is dear here: a pipe round trip between two "
		"processes (two wake-ups) takes %.1f µs when both share CPU 0 and %.1f µs when "
		"they may "
		"sit on different CPUs (esbench row `wake`, median of 5 × %d; %.1f–%.1f and "
		"%.1f–%.1f)",
		a.med, b.med, ROUND_TRIPS, a.min, a.max, b.min, b.max);
	fclose(md);
	fprintf(stderr, "wake: one CPU %.1f us, two CPUs %.1f us per round trip\n", a.med, b.med);
}
