/*
 * instance.h - what the master creates before it forks and every handler
 * inherits: the configuration, the shared segment holding the want-book,
 * one eventfd per handler slot (the "look at your mailbox" doorbell) and one
 * listening socket per handler slot (all bound to the same address with
 * SO_REUSEPORT, so the kernel spreads connections over the handlers and a
 * replacement handler takes over the queue of the one it replaces).
 *
 * Fields never change after master start, except cfg, which a SIGHUP
 * replaces in each process separately.
 */
#ifndef ES_INSTANCE_H
#define ES_INSTANCE_H

#include <stddef.h>
#include <stdint.h>

#include "book/book.h"
#include "config/config.h"

/* What the configuration admits must fit the book's narrow fields. */
_Static_assert(CONFIG_MAX_HANDLERS <= BOOK_MAX_HANDLERS, "handlers: config above the book");
_Static_assert(CONFIG_MAX_SERVICES <= BOOK_MAX_SERVICES, "services: config above the book");

struct ssl_ctx_st;

struct instance {
	struct es_config *cfg;
	const char *config_path;
	struct book *book;
	void *segment;
	size_t segment_size;
	int nhandlers;
	int wake_fd[BOOK_MAX_HANDLERS];
	int listen_fd[BOOK_MAX_HANDLERS];
	char listen_addr[128];   /* "host:port" actually bound */
	uint8_t instance_id[16]; /* random at each start (the book's) */
	char instance_hex[33];   /* ... in hex (the segment's name) */
	char instance_name[65];  /* the id clients see (HELLO, /status):
					 * instanceId, or instance_hex */
	int32_t master_pid;
	uint64_t start_ms;              /* wall clock when the segment was made: the zero of its
			    * counters (process_start_time_seconds) */
	int log_level_fixed;            /* -l given: reloads keep the log level */
	struct ssl_ctx_st *tls_ctx;     /* listener TLS (tls_context.h); NULL: plain */
	unsigned long long jobs_nofile; /* the open-files limit the daemon was started
					 * with, for jobs without jobLimits.openFiles
					 * (0: the daemon did not raise its own) */
};

/* Wakes every handler whose bit is set in mask (a write to its eventfd;
 * what woke it is in its mailbox in the book). */
void instance_wake(const struct instance *inst, uint64_t mask);

#endif
