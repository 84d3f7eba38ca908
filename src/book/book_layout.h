/*
 * book_layout.h - the segment layout of the want-book; private to src/book/.
 *
 * Owns every struct stored in the segment and the accessors that turn an
 * index into a record.  Invariants:
 *  - the segment holds no pointers, only table indices (BK_NIL = none) and
 *    byte offsets from the segment start, because every process maps the
 *    segment at a different address;
 *  - fields marked (P) are PRIMARY: they are the truth and survive a repair.
 *    Fields marked (D) are DERIVED: book_repair() rebuilds all of them from
 *    the primary fields (lists, heaps, hash indexes, counters, free lists,
 *    mailbox links);
 *  - a record's `state` is written last when it is allocated (after every
 *    other primary field) and first when it is freed (then the generation is
 *    bumped), with a release store (bk_set_state), so a holder that dies at
 *    any point leaves each record wholly old or wholly new;
 *  - a struct book_ref is valid iff idx < table size, the record is not FREE
 *    and its generation equals ref.gen.
 *
 * Link fields of a want, by state (each want is in at most one list per
 * link pair):
 *                 q_prev/q_next            o_prev/o_next          m_*
 *   FREE          want free list (q_next)  -                      -
 *   PARKED        its node's FIFO          its conn's want list   -
 *   OFFERED       waitgroup offered list   its conn's want list   mailbox (OFFER pending)
 *   RUNNING       runner handler's list    its client's job list  mailbox (CANCEL pending)
 *                                          (none when orphaned)
 *   FINISHED      -                        its client's job list  mailbox (DONE pending)
 *   EXPIRED       book expired list        its conn's want list   mailbox (always)
 *
 * Fields of a want by state: conn/conn_gen is the placing conn (PARKED,
 * OFFERED, EXPIRED) or the owner conn (RUNNING, FINISHED; BK_NIL while the
 * client has no live conn); runner/pgid/token only mean something while
 * RUNNING; parked_at while PARKED (and OFFERED not yet stamped), deadline
 * and offer_no only while OFFERED; the outcome fields
 * (exit_code ... failed, receipt, receipt_len) only while FINISHED (the
 * first two groups share their bytes, see struct bk_want).  A want that is not FINISHED has receipt == BK_NIL (a crash
 * between writing it and the state is undone by repair).
 *
 * Statistics (started, finished, failed, the histograms, hand-overs,
 * handler starts, the ring of the last failures): counters that
 * only grow, each written with a store of its own after the state write
 * of the step they count, and read by nothing but the status calls
 * (book_service_status, book_status, book_failures).
 * Nothing is derived from them and repair leaves them alone; a holder
 * that dies in a step loses at most that step's count (a histogram's
 * _sum may lack the one observation whose bucket it counted, histogram.h),
 * never counts a step twice.
 *
 * The receipt store: max_receipts slots of receipt_bytes bytes (the text,
 * PRIMARY, written before the owning want turns FINISHED) and one bk_rslot
 * per slot (DERIVED: free list link and owner).  Each slot is owned by
 * exactly one FINISHED want (w->receipt, PRIMARY) or is on the free list.
 */
#ifndef ES_BOOK_LAYOUT_H
#define ES_BOOK_LAYOUT_H

#include <pthread.h>
#include <stdint.h>

#include "book/book.h"
#include "common/histogram.h"

#define BK_NIL UINT32_MAX
#define BK_NIL8 UINT8_MAX /* none, in a one-byte handler index */
_Static_assert(BOOK_MAX_HANDLERS < BK_NIL8, "handler indices fit a byte besides BK_NIL8");
_Static_assert(BOOK_MAX_SERVICES <= UINT16_MAX, "service indices fit 16 bits");
#define BK_MAGIC 0x4b4f4f4258455345ULL /* "ESEXBOOK" little endian */
#define BK_VERSION 8u
#define BK_MAX_CONNECTIONS (1u << 20)
#define BK_MAX_WANTS (1u << 22)
#define BK_MAX_TOKENS (1u << 16)

/* Internal want state beyond enum want_state: the offer expired, the record
 * only carries the job_id for the pending MAIL_OFFER_EXPIRED.  It is not a
 * want any more (not in the job index, holds no slot, not counted in
 * wants/limits); it is freed when the mail is taken, when its conn closes,
 * or when the want table is full and a new want needs the record (the oldest
 * EXPIRED record is then reused and that one mail is lost). */
#define BK_WANT_EXPIRED 5

/* want flags (P) */
#define BKW_OFFER_MAIL 0x01  /* OFFERED: the OFFER mail was not taken yet */
#define BKW_CANCEL_MAIL 0x02 /* RUNNING: the CANCEL mail was not taken yet */
#define BKW_STAMPED 0x04     /* OFFERED: deadline is set (see bk_tick) */
#define BKW_OWNER_CANCEL \
	0x08                  /* RUNNING: its own client asked to cancel it; the
			       * pending CANCEL mail does not make it an orphan */
#define BKW_DONE_MAIL 0x10    /* FINISHED: the DONE mail was not taken yet */
#define BKW_RECEIPT_LOST 0x20 /* FINISHED: a receipt text was given but not kept */

enum bk_conn_state {
	BKC_FREE = 0,
	BKC_LIVE
};
enum bk_client_state {
	BKK_FREE = 0,
	BKK_LIVE,
	BKK_GRACE
};

struct bk_want {
	uint32_t gen;                /* (P) bumped on free */
	uint8_t state;               /* (P) enum want_state or BK_WANT_EXPIRED */
	uint8_t flags;               /* (P) BKW_* */
	uint8_t idlen;               /* (P) */
	uint8_t m_handler;           /* (D) mailbox it is queued in, or BK_NIL8 */
	uint16_t service;            /* (P) < BOOK_MAX_SERVICES */
	uint8_t runner;              /* (P) RUNNING: handler that runs it (else BK_NIL8) */
	uint8_t command;             /* (P) RUNNING: 1 + command index, 0 unknown */
	int32_t priority;            /* (P) */
	uint32_t conn, conn_gen;     /* (P) placing conn; RUNNING: current owner or BK_NIL */
	uint32_t client, client_gen; /* (P) BK_NIL: orphaned running job */
	int32_t pgid;                /* (P) RUNNING: process group, 0 = unknown */
	uint32_t node;               /* (D) PARKED: its node */
	uint64_t seq;                /* (P) book-wide arrival number */
	uint64_t token;              /* (P) OFFERED/RUNNING: the offer's token */
	/* The offer's fields, the start and the outcome share their bytes:
	 * an offer means nothing once the want RUNs, and only RUNNING turns
	 * FINISHED (bk_job_end writes the outcome while the state still says
	 * RUNNING; only book_eta reads started_ms, as a hint that clamps what
	 * it reads), so a record is wholly old or wholly new at any crash
	 * point as before.  book_want zeroes all, then sets parked_at; the
	 * deadline takes its place only after the state says OFFERED
	 * (bk_offer_stamp), so a PARKED want's parked_at is never
	 * overwritten. */
	union {
		struct {
			union {
				uint64_t parked_at; /* (P) PARKED, and OFFERED without
						     * BKW_STAMPED: the book's clock
						     * at its WANT (the slot wait's
						     * start, bk_offer_stamp) */
				uint64_t deadline;  /* (P) OFFERED with BKW_STAMPED */
			};
			uint64_t offer_no; /* (P) OFFERED: book-wide grant number */
		};
		struct {
			uint64_t started_ms; /* (P) RUNNING: the book's clock at book_accept */
			uint16_t progress;   /* (P) RUNNING: 1 + its program's latest
					      * progress in 1/10000, 0 none yet
					      * (book_job_set_progress); a hint */
		};
		struct {
			int32_t exit_code;    /* (P) FINISHED: the compact outcome */
			uint32_t duration_ms; /* (P) FINISHED */
			uint8_t signal, error, retryable, failed; /* (P) FINISHED */
		};
	};
	char job_id[BOOK_ID_MAX]; /* (P) not NUL-terminated, idlen bytes */
	uint32_t receipt;         /* (P) FINISHED: its receipt slot, or BK_NIL */
	uint32_t receipt_len;     /* (P) FINISHED with a slot: bytes of text */
	uint32_t q_prev, q_next;  /* (D) see the table above */
	uint32_t o_prev, o_next;  /* (D) */
	uint32_t m_prev, m_next;  /* (D) */
};

/* A 64-bit heap key field aligned to 4 bytes, so that a node is 60 bytes
 * rather than 64 (the segment's memory per want stays within 256 bytes). */
typedef uint64_t bk_key64 __attribute__((aligned(4)));

/* A node: the parked wants of one (conn, service, priority), FIFO by seq,
 * and its place in the service's pairing heap.  All (D).  The node carries
 * its heap key (priority, stamp, seq), so that a comparison in the heap
 * reads two nodes and no conn or want record: the grant's heap work stays
 * in the node table (issue 18: the lock's hold is mostly cache misses). */
struct bk_node {
	uint16_t used;
	uint16_t service; /* < BOOK_MAX_SERVICES */
	uint32_t conn;
	int32_t priority;
	uint32_t count;
	bk_key64 stamp;                /* = conn's stamp[wg of service] */
	bk_key64 seq;                  /* = seq of the head want */
	uint32_t head, tail;           /* FIFO through want q_prev/q_next */
	uint32_t child, sibling, prev; /* pairing heap; prev = parent when leftmost child */
	uint32_t c_prev, c_next;       /* conn's node list; c_next = free list */
};

struct bk_conn {
	uint32_t gen;  /* (P) */
	uint8_t state; /* (P) enum bk_conn_state */
	uint8_t pad[3];
	uint32_t handler;            /* (P) */
	uint32_t client, client_gen; /* (P) */
	uint64_t open_seq;           /* (P) book-wide open number (newest conn of a client) */
	uint64_t stamp[BOOK_MAX_WAITGROUPS]; /* (P) grant counter at its last offer per wg */
	uint32_t nwants;                     /* (D) PARKED + OFFERED wants it placed */
	uint32_t want_head, want_tail;       /* (D) PARKED/OFFERED/EXPIRED wants (o links) */
	uint32_t node_head;                  /* (D) its nodes (c links) */
	uint32_t h_prev, h_next; /* (D) handler's conns (open order); h_next = free list */
	uint32_t k_prev, k_next; /* (D) client's conns */
};

struct bk_client {
	uint32_t gen;                /* (P) */
	uint8_t state;               /* (P) enum bk_client_state */
	uint8_t named;               /* (P) 0 = anonymous (one conn, freed with it) */
	uint8_t stamped;             /* (P) GRACE: grace_deadline is set */
	uint8_t idlen;               /* (P) */
	uint64_t grace_deadline;     /* (P) */
	uint64_t grace_seq;          /* (P) order of entering the grace */
	char id[BOOK_ID_MAX];        /* (P) */
	uint32_t nconns, njobs;      /* (D) njobs: RUNNING + FINISHED wants it owns */
	uint32_t conn_head;          /* (D) k links */
	uint32_t job_head, job_tail; /* (D) its RUNNING and FINISHED wants (o links) */
	uint32_t g_prev, g_next;     /* (D) grace list; g_next = free list */
};

struct bk_handler {
	int32_t pid;                   /* (P) */
	uint32_t hello;                /* (P) a MAIL_HELLO is pending */
	uint32_t nconns;               /* (D) */
	uint32_t conn_head, conn_tail; /* (D) h links, in open order */
	uint32_t mail_head, mail_tail; /* (D) m links */
	uint32_t run_head, run_tail;   /* (D) wants it runs (q links) */
	uint32_t asleep; /* neither: written and read without the lock (book_handler_asleep) */
	uint32_t starts; /* (P) statistics: book_handler_started calls (restarts + 1) */
};

struct bk_wg {
	uint32_t processes;                 /* (P) from the topology */
	uint32_t tokens;                    /* (D) legacy tokens held (ISSUED + RUNNING) */
	uint32_t running, offered, waiting; /* (D) */
	uint32_t svc_head;                  /* (P) services of this wg (static, set at init) */
	uint64_t grant_counter;             /* (P) >= every conn stamp of this wg */
	uint32_t off_head, off_tail;        /* (D) offered wants by offer_no (q links) */
};

struct bk_service {
	uint32_t wg, enabled;               /* (P) static */
	uint32_t wg_next;                   /* (P) static: next service of the same wg */
	uint32_t root;                      /* (D) pairing heap of its nodes */
	uint32_t waiting, running, offered; /* (D) */
	uint64_t started, finished, failed; /* (P) statistics */
	uint64_t nsamples;                  /* (P) */
	double ema_ms;                      /* (P) runtime EMA (book_class.h) */
	uint32_t klass;                     /* (P) enum svc_class; written after ema_ms and
				  * nsamples, repaired when not consistent with them */
	struct hist runtime;   /* (P) statistics: finished jobs' duration_ms (bk_service_sample) */
	struct hist slot_wait; /* (P) statistics: WANT to grant (bk_offer_stamp) */
};

/* A legacy token (book_token_*): holds one slot of its service's
 * waitgroup while ISSUED or RUNNING. */
enum bk_token_state {
	BKT_FREE = 0,
	BKT_ISSUED,
	BKT_RUNNING
};
struct bk_token {
	uint32_t gen;  /* (P) bumped on free */
	uint8_t state; /* (P) enum bk_token_state */
	uint8_t pad[3];
	uint32_t service;  /* (P) */
	uint32_t runner;   /* (P) RUNNING: handler running its job */
	int32_t pgid;      /* (P) RUNNING: process group, 0 = unknown */
	uint32_t next;     /* (D) free list */
	uint64_t secret;   /* (P) */
	uint64_t deadline; /* (P) ISSUED: expires at */
};

/* One slot of the receipt store; the text lives in the byte area. */
struct bk_rslot {
	uint32_t next;  /* (D) free list link */
	uint32_t owner; /* (D) FINISHED want holding it, or BK_NIL */
};

/* Open-addressing hash index: n slots (any n), linear probing,
 * backward-shift deletion, at most 3/4 full (book_index.c). */
struct bk_slot {
	uint32_t hash; /* low 32 bits of the keyed hash */
	uint32_t idx;  /* BK_NIL = empty */
};
struct bk_index {
	uint64_t off;      /* byte offset of the slot array */
	uint32_t n, count; /* slots, slots in use */
};

/* The header; the tables follow at the recorded offsets. */
struct book {
	uint64_t magic;
	uint32_t version, pad0;
	uint64_t size;
	struct book_limits lim;
	uint32_t nclient_tab; /* max_connections + sum of processes */
	uint32_t scratch_len; /* entries of scratch array 0 */
	struct book_topology topo;
	uint8_t instance_id[16];
	uint64_t sipkey[2]; /* (P) SipHash key */

	/* The lock and what nearly every critical section writes, in three
	 * cache lines of their own (issue 18: a line written in a section is
	 * a transfer from the CPU of the section before; a DECLINE wrote
	 * eight header lines, now six). */
	pthread_mutex_t mtx __attribute__((aligned(64)));
	uint32_t now_valid;            /* clock is "now" for this critical section */
	uint32_t nwants;               /* (D) */
	uint64_t clock;                /* (P) latest now_ms seen (time never goes back) */
	uint64_t mail_mask;            /* (D) handlers mailed since book_lock */
	uint64_t seq, grants;          /* (P) */
	uint64_t rng[4];               /* (P) xoshiro256** state for tokens */
	uint32_t want_free, node_free; /* (D) */
	struct bk_index widx;          /* (client idx, job_id) -> want */
	struct bk_index nidx;          /* (conn, service, priority) -> node */
	struct bk_index cidx;          /* client_id -> named client */

	/* primary scalars */
	uint32_t draining; /* (P) */
	uint32_t pad0b;
	uint64_t open_seq, grace_seq;            /* (P) */
	uint64_t repairs;                        /* (P) */
	uint64_t profile_samples, class_changes; /* (P) book_profile_changes */
	uint64_t handovers; /* (P) statistics: grants made by book_job_finished */
	/* (P) statistics: progress lines of ended jobs, good and bad
	 * (book_progress_lines) */
	uint64_t progress_good, progress_bad;
	/* (P) statistics: the last BOOK_FAILURES failed jobs (book_failures);
	 * fail_next counts all, the entry written last is (fail_next - 1) %
	 * BOOK_FAILURES.  A holder dying mid-write leaves one torn entry. */
	uint64_t fail_next;
	struct book_failure failures[BOOK_FAILURES];

	/* derived */
	uint32_t nconns, nclients_live, nfinished;
	uint32_t conn_free, client_free;
	uint32_t rc_free, rc_used;       /* receipt store free list, slots owned */
	uint32_t exp_head, exp_tail;     /* EXPIRED wants, oldest first (q links) */
	uint32_t grace_head, grace_tail; /* GRACE clients by grace_seq (g links) */

	uint64_t off_conns, off_clients, off_wants, off_nodes, off_scratch, off_qconn;
	uint64_t off_rslots, off_rbytes; /* receipt store */
	uint64_t off_tokens;             /* legacy tokens, lim.max_tokens records */
	uint32_t token_free;             /* (D) free list of tokens */
	uint32_t pad1;

	struct bk_handler handlers[BOOK_MAX_HANDLERS];
	struct bk_wg wgs[BOOK_MAX_WAITGROUPS];
	struct bk_service svcs[BOOK_MAX_SERVICES];

	/* written only by a BOOK_LOCK_STATS build (book.h); zero otherwise */
	struct book_lock_stats lockstats;
};

static inline struct bk_want *bk_want(const struct book *b, uint32_t i)
{
	return (struct bk_want *)((char *)(uintptr_t)b + b->off_wants) + i;
}
static inline struct bk_node *bk_node(const struct book *b, uint32_t i)
{
	return (struct bk_node *)((char *)(uintptr_t)b + b->off_nodes) + i;
}
static inline struct bk_conn *bk_conn(const struct book *b, uint32_t i)
{
	return (struct bk_conn *)((char *)(uintptr_t)b + b->off_conns) + i;
}
static inline struct bk_client *bk_client(const struct book *b, uint32_t i)
{
	return (struct bk_client *)((char *)(uintptr_t)b + b->off_clients) + i;
}
static inline struct bk_token *bk_tok(const struct book *b, uint32_t i)
{
	return (struct bk_token *)((char *)(uintptr_t)b + b->off_tokens) + i;
}
static inline struct bk_rslot *bk_rslot(const struct book *b, uint32_t i)
{
	return (struct bk_rslot *)((char *)(uintptr_t)b + b->off_rslots) + i;
}
static inline char *bk_rbytes(const struct book *b, uint32_t i)
{
	return (char *)(uintptr_t)b + b->off_rbytes + (uint64_t)i * b->lim.receipt_bytes;
}
static inline struct bk_slot *bk_slots(const struct book *b, const struct bk_index *ix)
{
	return (struct bk_slot *)((char *)(uintptr_t)b + ix->off);
}
/* Two scratch arrays for repair and query (used only with the book
 * locked; their content is meaningless between calls): 0 has scratch_len
 * entries (wants, nodes or clients), 1 has nclient_tab entries (conns, in
 * book_query; 2 x max_connections, so bk_query_head keeps a second list of
 * conns in its upper half). */
static inline uint32_t *bk_scratch(const struct book *b, int which)
{
	return (uint32_t *)((char *)(uintptr_t)b + b->off_scratch) + (size_t)which * b->scratch_len;
}

/* Per-conn scratch of book_query's replay (one entry per conn slot). */
struct bk_qconn {
	uint64_t vs;         /* virtual stamp during the replay */
	uint64_t head;       /* smallest seq of its wants in the current phase */
	uint32_t n;          /* its wants in the current phase */
	uint32_t pos;        /* its turn in the phase's first round */
	uint32_t first, end; /* bk_query_head: its nodes' cursors in the replay's array */
	uint32_t left;       /* bk_query_head: its wants of the phase not yet listed */
};
static inline struct bk_qconn *bk_qconn(const struct book *b, uint32_t c)
{
	return (struct bk_qconn *)((char *)(uintptr_t)b + b->off_qconn) + c;
}

/* Release store of a state byte: every earlier write of the record is
 * visible before the new state is. */
static inline void bk_set_state(uint8_t *p, uint8_t s)
{
	__atomic_store_n(p, s, __ATOMIC_RELEASE);
}

#endif
