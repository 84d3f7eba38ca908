/*
 * segment.c - see segment.h.
 *
 * The segment is a POSIX shared-memory object (shm_open + ftruncate + mmap
 * MAP_SHARED) that is unlinked right after mapping: every process of the
 * instance holds it through the inherited mapping, and nothing is left in
 * /dev/shm if the whole tree dies.  Pages are touched only as tables fill,
 * so a large maxWants costs address space, not memory.
 */
#include "autoconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "job/receipt.h"
#include "master/segment.h"

static void fill_topology(const struct es_config *cfg, struct book_topology *topo)
{
	memset(topo, 0, sizeof *topo);
	topo->nwaitgroups = (uint32_t)cfg->nwaitgroups;
	for (size_t i = 0; i < cfg->nwaitgroups; i++) {
		snprintf(topo->waitgroups[i].name, BOOK_NAME_MAX, "%s", cfg->waitgroups[i].name);
		topo->waitgroups[i].processes = (uint32_t)cfg->waitgroups[i].processes;
	}
	topo->nservices = (uint32_t)cfg->nservices;
	for (size_t i = 0; i < cfg->nservices; i++) {
		snprintf(topo->services[i].name, BOOK_NAME_MAX, "%s", cfg->services[i].name);
		topo->services[i].waitgroup = (uint32_t)cfg->services[i].wg_index;
		topo->services[i].enabled = cfg->services[i].enabled;
	}
	if (cfg->auto_balance) {
		topo->autobalance.enabled = 1;
		topo->autobalance.reserve = (uint32_t)cfg->fast_reserve;
		topo->autobalance.unknown_cap = (uint32_t)cfg->unknown_cap;
		topo->autobalance.min_samples = (uint32_t)cfg->min_samples;
		topo->autobalance.heavy_threshold_ms = (uint64_t)cfg->heavy_threshold_ms;
	}
}

static uint32_t total_processes(const struct es_config *cfg)
{
	uint32_t processes = 0;
	for (size_t i = 0; i < cfg->nwaitgroups; i++)
		processes += (uint32_t)cfg->waitgroups[i].processes;
	return processes;
}

/* Receipts waiting for their DONE (protocol 2: for its ACK): a few per
 * slot is plenty (they leave as soon as the client is told, a round trip
 * later; only a client that is away keeps them longer, at most for its
 * resume grace), never fewer than 64.  A receipt that finds the store
 * full is kept compact (receipt_lost), never dropped. */
static uint32_t receipt_slots(const struct es_config *cfg)
{
	uint32_t processes = total_processes(cfg);
	return processes * 4 > 64 ? processes * 4 : 64;
}

int segment_create(struct instance *inst, struct es_config *cfg, int nhandlers)
{
	struct book_limits lim = {
		.max_connections = (uint32_t)cfg->max_connections,
		.max_wants = (uint32_t)cfg->max_wants,
		.max_wants_per_connection = (uint32_t)cfg->max_wants_per_connection,
		.max_jobs_per_client = (uint32_t)cfg->max_jobs_per_client,
		.nhandlers = (uint32_t)nhandlers,
		.offer_timeout_ms = (uint32_t)cfg->offer_timeout_sec * 1000u,
		.resume_grace_ms = (uint32_t)cfg->resume_grace_sec * 1000u,
		.max_receipts = receipt_slots(cfg),
		.receipt_bytes = RECEIPT_MAX_BYTES,
		/* a token holds a slot: never more than the slots; sized even
		 * with legacyToken off, which a reload may switch on */
		.max_tokens = total_processes(cfg),
	};
	struct book_topology *topo = calloc(1, sizeof *topo);
	uint64_t seed;
	char name[64];

	if (!topo)
		return -1;
	fill_topology(cfg, topo);
	if (getrandom(inst->instance_id, sizeof inst->instance_id, 0) != sizeof inst->instance_id ||
	    getrandom(&seed, sizeof seed, 0) != sizeof seed) {
		log_error("getrandom: %s", strerror(errno));
		free(topo);
		return -1;
	}
	for (int i = 0; i < 16; i++)
		snprintf(inst->instance_hex + 2 * i, 3, "%02x", inst->instance_id[i]);
	snprintf(inst->instance_name, sizeof inst->instance_name, "%s",
		 cfg->instance_id ? cfg->instance_id : inst->instance_hex);

	inst->segment_size = book_size(&lim);
	snprintf(name, sizeof name, "/execserver-%d-%.8s", (int)getpid(), inst->instance_hex);
	int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0) {
		log_error("shm_open %s: %s", name, strerror(errno));
		free(topo);
		return -1;
	}
	shm_unlink(name);
	if (ftruncate(fd, (off_t)inst->segment_size) != 0) {
		log_error("ftruncate shared segment (%zu bytes): %s", inst->segment_size,
			  strerror(errno));
		close(fd);
		free(topo);
		return -1;
	}
	inst->segment = mmap(NULL, inst->segment_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (inst->segment == MAP_FAILED) {
		log_error("mmap shared segment: %s", strerror(errno));
		free(topo);
		return -1;
	}
	if (book_init(inst->segment, &lim, topo, inst->instance_id, seed) != 0) {
		log_error("cannot initialise the want-book (limits out of range)");
		free(topo);
		return -1;
	}
	free(topo);
	inst->book = book_from_mem(inst->segment);
	inst->cfg = cfg;
	inst->nhandlers = nhandlers;
	inst->master_pid = (int32_t)getpid();
	inst->start_ms = clock_wall_ms();

	for (int i = 0; i < nhandlers; i++) {
		inst->wake_fd[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (inst->wake_fd[i] < 0) {
			log_error("eventfd: %s", strerror(errno));
			return -1;
		}
	}
	log_info("shared segment: %zu bytes for %d connections, %d wants, %d handlers",
		 inst->segment_size, cfg->max_connections, cfg->max_wants, nhandlers);
	if (cfg->auto_balance)
		log_info("auto-balance: one pool of %d slots, %d kept for light services, heavy "
			 "above %lld ms, unknown services up to %d slots, classified after %d jobs",
			 cfg->waitgroups[0].processes, cfg->fast_reserve,
			 (long long)cfg->heavy_threshold_ms, cfg->unknown_cap, cfg->min_samples);
	return 0;
}

static int bind_one(const struct addrinfo *ai, int port_override)
{
	struct sockaddr_storage ss;
	int one = 1;

	memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
	if (port_override > 0) {
		uint16_t p = htons((uint16_t)port_override);
		if (ss.ss_family == AF_INET)
			((struct sockaddr_in *)&ss)->sin_port = p;
		else
			((struct sockaddr_in6 *)&ss)->sin6_port = p;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0 ||
	    bind(fd, (struct sockaddr *)&ss, ai->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int listeners_create(struct instance *inst)
{
	char host[100], port[16];
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *res;
	const char *addr = inst->cfg->addr, *why;
	int portnum, bound_port = 0;

	if (config_addr_split(addr, host, sizeof host, &portnum, &why) != 0) {
		log_error("addr '%s': %s", addr, why);
		return -1;
	}
	snprintf(port, sizeof port, "%d", portnum);
	int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
	if (gai != 0) {
		log_error("addr '%s': %s", addr, gai_strerror(gai));
		return -1;
	}
	/* The first socket may bind port 0; the others join the port it got. */
	for (int i = 0; i < inst->nhandlers; i++) {
		inst->listen_fd[i] = bind_one(res, bound_port);
		if (inst->listen_fd[i] < 0) {
			log_error("cannot listen on %s: %s", addr, strerror(errno));
			freeaddrinfo(res);
			return -1;
		}
		if (i == 0) {
			struct sockaddr_storage ss;
			socklen_t len = sizeof ss;
			getsockname(inst->listen_fd[0], (struct sockaddr *)&ss, &len);
			uint16_t p = ss.ss_family == AF_INET
					     ? ((struct sockaddr_in *)&ss)->sin_port
					     : ((struct sockaddr_in6 *)&ss)->sin6_port;
			bound_port = ntohs(p);
		}
	}
	freeaddrinfo(res);
	if (strchr(host, ':'))
		snprintf(inst->listen_addr, sizeof inst->listen_addr, "[%s]:%d", host, bound_port);
	else
		snprintf(inst->listen_addr, sizeof inst->listen_addr, "%s:%d", host[0] ? host : "*",
			 bound_port);
	log_info("listening on %s (%d handlers)", inst->listen_addr, inst->nhandlers);
	return 0;
}
