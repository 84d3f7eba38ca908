/*
 * stamp.c - the job of the submission-to-start benchmark (row 7): prints
 * CLOCK_MONOTONIC in nanoseconds the moment it runs, and exits 0.  As
 * cheap as /bin/true otherwise, so throughput figures stay comparable.
 */
#include <stdio.h>
#include <time.h>

int main(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	printf("%lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
	return 0;
}
