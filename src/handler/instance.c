/* instance.c - see instance.h: waking handlers through their eventfds. */
#include "autoconfig.h"

#include <unistd.h>

#include "handler/instance.h"

void instance_wake(const struct instance *inst, uint64_t mask)
{
	for (int i = 0; mask && i < inst->nhandlers; i++, mask >>= 1) {
		if (mask & 1) {
			uint64_t one = 1;
			ssize_t n = write(inst->wake_fd[i], &one, sizeof one);
			(void)n; /* EAGAIN: the counter is already non-zero, the handler will look */
		}
	}
}
