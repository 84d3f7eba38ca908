/*
 * esbench.c - the load generator of `make bench`: runs the measurements of
 * docs/benchmarks.md against real execserver daemons and writes one
 * markdown fragment per row (and data files for the plots) into an output
 * directory; bench/run.sh puts them together.
 *
 * Usage: esbench [-o DIR] [-p PEERS] [-q] [-k K,...] [-H N] [ROW...]
 *   ROW: wake handover idle throughput gearman grant book stream fair auto
 *        (default all)
 *   -q: a quick run (fewer samples, shorter windows) to try the tool out
 *   -k: the slot counts K of rows 3 and 7 (default 1,2,4,8)
 *   -H: the handlers of rows 3 and 7's daemon (default one per CPU)
 */
#include "autoconfig.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_rows.h"
#include "bench_util.h"

struct row {
	const char *name;
	void (*fn)(const struct bench_opts *o);
};

static const struct row ROWS[] = {
	{ "wake", row_wake },       { "handover", row_handover },
	{ "idle", row_idle },       { "throughput", row_throughput },
	{ "gearman", row_gearman }, { "grant", row_grant_rate },
	{ "book", row_book_size },  { "stream", row_stream },
	{ "fair", row_fairness },   { "auto", row_autobalance },
};
#define NROWS (sizeof ROWS / sizeof ROWS[0])

/* "1,4" -> o->ks = {1, 4}: the slot counts of rows 3 and 7. */
static int parse_ks(const char *arg, struct bench_opts *o)
{
	o->nk = 0;
	while (*arg) {
		char *end;
		long k = strtol(arg, &end, 10);
		if (end == arg || k < 1 || k > 64 || o->nk == (int)(sizeof o->ks / sizeof o->ks[0]))
			return -1;
		o->ks[o->nk++] = (int)k;
		if (*end == ',')
			end++;
		else if (*end)
			return -1;
		arg = end;
	}
	return o->nk ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct bench_opts o = {
		.out = "bench-out",
		.peers = "bench/peers",
		.handlers = 0,
		.job_handlers = 0,
		.grants = 10000,
		.legacy_samples = 320,
		.idle_sec = 60,
		.idle_conns = 10000,
		.idle_big = 100000,
		.repeats = 3,
		.rate_sec = 3.0,
		.stream_bytes = 1LL << 30,
		.fair_jobs = 10000,
		.ks = { 1, 2, 4, 8 },
		.nk = 4,
	};
	int opt;
	signal(SIGPIPE, SIG_IGN);
	while ((opt = getopt(argc, argv, "o:p:qk:H:")) != -1) {
		switch (opt) {
		case 'o': o.out = optarg; break;
		case 'p': o.peers = optarg; break;
		case 'q':
			o.grants = 2000;
			o.legacy_samples = 32;
			o.idle_sec = 16;
			o.idle_conns = 2000;
			o.idle_big = 20000;
			o.repeats = 1;
			o.rate_sec = 1.0;
			o.stream_bytes = 1LL << 27;
			o.fair_jobs = 2000;
			break;
		case 'k':
			if (parse_ks(optarg, &o) != 0) {
				fprintf(stderr,
					"esbench: -k wants slot counts 1..64, comma-separated\n");
				return 2;
			}
			break;
		case 'H': {
			char *end;
			long h = strtol(optarg, &end, 10);
			if (end == optarg || *end || h < 1 || h > 64) {
				fprintf(stderr, "esbench: -H wants a handler count 1..64\n");
				return 2;
			}
			o.job_handlers = (int)h;
			break;
		}
		default:
			fprintf(stderr, "usage: esbench [-o DIR] [-p PEERS] [-q] [-k K,...] [-H N] "
					"[ROW...]\n");
			return 2;
		}
	}
	mkdir(o.out, 0755);
	bu_raise_nofile();
	for (size_t r = 0; r < NROWS; r++) {
		int run = optind == argc;
		for (int i = optind; i < argc; i++)
			run |= strcmp(argv[i], ROWS[r].name) == 0;
		if (!run)
			continue;
		long long t0 = bu_now_us();
		fprintf(stderr, "esbench: %s ...\n", ROWS[r].name);
		ROWS[r].fn(&o);
		fprintf(stderr, "esbench: %s took %.1f s\n", ROWS[r].name,
			(double)(bu_now_us() - t0) / 1e6);
	}
	return 0;
}
