/*
 * book.h - the want-book: who waits for which slot, who holds which slot.
 *
 * The book lives in one shared-memory segment created by the master before
 * it forks the handlers.  It is a pure data structure: no sockets, no
 * libevent, no clock reads, no allocation after book_init().  Every function
 * below except book_size/book_init/book_lock/book_unlock must be called with
 * the book locked.  Time comes in as `now_ms` (monotonic milliseconds).
 *
 * Entities (all fixed tables, referenced by index + generation):
 *   handler  a forked connection handler, slot 0..nhandlers-1
 *   conn     one websocket connection, owned by one handler
 *   client   the party behind connections: a named client (?client=<id>)
 *            may have several connections and outlives them for the resume
 *            grace; an unnamed connection is its own anonymous client
 *   want     one job_id of one client, through its whole life:
 *            PARKED -> OFFERED -> RUNNING -> FINISHED -> (freed)
 *            (see "The life of a want" below)
 *   waitgroup  a pool of `processes` slots; each service belongs to one
 *
 * Grant rule (book_grant, called internally whenever a slot may be free or a
 * want arrives): while a waitgroup has a free slot, the taker is the
 * eligible parked want (every want, unless auto-balance: see struct
 * book_autobalance) with the smallest key
 *     ( -priority, stamp(conn, waitgroup), seq(want) )
 * where stamp(conn, wg) is the waitgroup's grant counter value when that
 * connection last received an offer in that waitgroup (0 if never) and seq is
 * the book-wide arrival number of the want.  So: highest priority first;
 * within a priority the connection served least recently goes next (round
 * robin across connections; a connection with one want is served before one
 * that was just served, however many wants the latter parked); within one
 * connection, FIFO.  Exactly one want is offered each free slot.
 *
 * Slot accounting: a slot of a waitgroup is held by each want in state
 * OFFERED or RUNNING of a service of that waitgroup, plus legacy tokens
 * (book_token_*); never by a FINISHED one.  running + offered + tokens <=
 * processes at all times.
 *
 * Mail: decisions that another process must act on (send an OFFER, tell a
 * connection its offer expired, cancel a running job, send the DONE of a
 * finished one, re-send HELLO) are
 * queued in the target handler's mailbox inside the segment.  book_unlock()
 * returns the set of handlers that received mail during the critical
 * section; the caller then pokes their eventfds.  The book never does I/O.
 *
 * The life of a want:
 *   PARKED    book_want; waits in its connection's queue for a slot.
 *   OFFERED   the grant rule gave it a slot; MAIL_OFFER to its conn's
 *             handler; book_accept (JOB) or book_decline / book_unwant /
 *             offer expiry (slot re-granted, want gone).
 *   RUNNING   book_accept: the job runs on `runner`, holding its slot.  It
 *             belongs to the client now (every conn of the client sees it);
 *             its owner conn is the one that placed it, then the newest
 *             other conn of the client, or none while the client is away.
 *   FINISHED  book_job_finished: the process ended; or the purge of its
 *             runner: the job was lost with that handler (outcome
 *             BOOK_ERROR_LOST, see book_purge_handler).  The slot is freed
 *             (and re-granted) at once; the want keeps the compact outcome and,
 *             if the receipt store had room, the receipt text, and stays
 *             in the client's job-id index (WANT of the same id:
 *             duplicate_job).  MAIL_DONE goes to the handler of its owner
 *             conn; that handler sends DONE and calls book_done_delivered
 *             (protocol 1), which frees the want, or leaves it until the
 *             client's ACK, book_done_ack (protocol 2).  It no longer
 *             depends on its runner.
 *   (freed)   after book_done_delivered or book_done_ack; or silently when its client ends
 *             (anonymous conn closed, resume grace over, client record
 *             reclaimed); a RUNNING job whose client ended first is an
 *             orphan (MAIL_CANCEL to its runner) and is freed when it ends
 *             (or when its runner is purged).
 * A purge of a handler ends the RUNNING jobs it ran as lost (they become
 * FINISHED and their DONE follows the rules below, so the client learns
 * that the job is lost and can requeue it), leaves the FINISHED ones it ran
 * alone, then closes its conns (their jobs are re-homed like any others).
 *
 * DONE exactly once: a FINISHED want is mailed (MAIL_DONE) to at most one
 * handler at a time, to the handler of its owner conn at that moment.
 * When the owner conn closes before book_done_delivered (the send failed,
 * or the handler took the mail and could not deliver it: it then simply
 * does not call book_done_delivered), the want follows the connection rules
 * of running jobs: the client's newest other live conn becomes the owner
 * and gets MAIL_DONE; a named client without live conns keeps it for the
 * resume grace, and a conn of that client opened within the grace adopts it
 * and gets MAIL_DONE (on whichever handler); when the grace ends, or an
 * anonymous client's conn closes, the want is freed without DONE.  A mail
 * taken is never re-queued while its conn lives; after book_done_delivered
 * the want is gone (a pending re-mail is dropped).  The one window for a
 * second DONE: a handler that dies after sending a DONE and before its
 * book_done_delivered; the purge re-homes the job and its next owner is
 * mailed again (the client may have got the first one: at least once
 * across a handler crash, exactly once otherwise).
 *
 * Protocol 2 (the client acknowledges): the handler does not call
 * book_done_delivered; the want stays FINISHED, its mail taken, until
 * book_done_ack.  A close of its owner conn re-homes and re-mails it as
 * above, and book_conn_adopt (a new conn of the client) takes it over and
 * re-mails it at once: the DONE goes out at least once to a client that
 * comes back within its grace, and the client keeps the first copy.
 *
 * Receipt store: max_receipts slots of receipt_bytes bytes.  A FINISHED
 * want owns at most one slot, holding the receipt text the job layer gave
 * to book_job_finished.  If the store is full, or the text is longer than
 * receipt_bytes (it is never truncated: it is JSON), only the compact
 * outcome (struct book_outcome) is kept and book_done_read reports
 * receipt_lost, so the job layer can build a reduced receipt and say so.
 */
#ifndef ES_BOOK_H
#define ES_BOOK_H

#include <stddef.h>
#include <stdint.h>

#include "common/histogram.h"

#define BOOK_ID_MAX 64 /* job_id and client_id: at most 64 bytes */
#define BOOK_MAX_HANDLERS 64
#define BOOK_MAX_WAITGROUPS 32
#define BOOK_MAX_SERVICES 256
#define BOOK_NAME_MAX 64 /* service / waitgroup names incl. NUL */

/* Result codes.  Each maps to one protocol ERROR code (docs/protocol.md). */
enum book_rc {
	BOOK_OK = 0,
	BOOK_E_UNKNOWN_SERVICE, /* unknown_service */
	BOOK_E_DUPLICATE,       /* duplicate_job: job_id already known for this client */
	BOOK_E_UNKNOWN_JOB,     /* unknown_job: no such job_id for this client */
	BOOK_E_BAD_STATE,       /* not_offered / already_running: wrong state for the request */
	BOOK_E_BAD_TOKEN,       /* bad_token: token does not match the current offer */
	BOOK_E_LIMIT_CONN,      /* limit_reached: maxWantsPerConnection */
	BOOK_E_LIMIT_WANTS,     /* limit_reached: maxWants (book full) */
	BOOK_E_LIMIT_CONNS,     /* limit_reached: maxConnections */
	BOOK_E_DRAINING,        /* draining: no new wants while the instance drains */
	BOOK_E_STALE,           /* a ref whose generation no longer matches */
	BOOK_E_DISABLED,        /* service_disabled: failed its startup check */
	BOOK_E_LIMIT_JOBS,      /* limit_reached: maxJobsPerClient (book_accept) */
	BOOK_E_INVALID,         /* bad_request: job/client id empty or > BOOK_ID_MAX
				   * bytes, handler or runner out of range (the
				   * protocol layer should have refused it) */
	BOOK_E_BUSY,            /* legacy token: no free slot, or wants are parked */
};
const char *book_rc_name(enum book_rc rc);

/* Reference to a table entry; generation catches reuse of the index. */
struct book_ref {
	uint32_t idx;
	uint32_t gen;
};

enum want_state {
	WANT_FREE = 0,
	WANT_PARKED,
	WANT_OFFERED,
	WANT_RUNNING,
	WANT_FINISHED, /* ended, its DONE not delivered yet (holds no slot) */
};

/* book_outcome.error of a job whose runner was purged: the handler running
 * the job died; the job layer names it exec_lost (a value it never uses for
 * its own codes). */
#define BOOK_ERROR_LOST 255

/* Sizing, fixed at book_init. */
struct book_limits {
	uint32_t max_connections; /* conns and clients tables */
	uint32_t max_wants;       /* wants table (parked + offered + running + finished) */
	uint32_t max_wants_per_connection;
	uint32_t max_jobs_per_client; /* RUNNING + FINISHED jobs of one client; 0 = no limit */
	uint32_t nhandlers;           /* <= BOOK_MAX_HANDLERS */
	uint32_t offer_timeout_ms;
	uint32_t resume_grace_ms;
	uint32_t max_receipts;  /* receipt store slots; 0 = compact outcomes only */
	uint32_t receipt_bytes; /* bytes per slot, 1..BOOK_RECEIPT_MAX (if max_receipts) */
	uint32_t max_tokens;    /* legacy token table (book_token_*); 0 = no tokens */
};
#define BOOK_RECEIPT_MAX (1u << 20)  /* largest receipt_bytes */
#define BOOK_MAX_RECEIPTS (1u << 22) /* largest max_receipts */

/* Static description of waitgroups and services, copied in at book_init. */
struct book_topology {
	uint32_t nwaitgroups;
	struct {
		char name[BOOK_NAME_MAX];
		uint32_t processes;
	} waitgroups[BOOK_MAX_WAITGROUPS];
	uint32_t nservices;
	struct {
		char name[BOOK_NAME_MAX];
		uint32_t waitgroup; /* index into waitgroups */
		int enabled;        /* 0: startup check failed, WANT refused */
	} services[BOOK_MAX_SERVICES];
	/* Auto-balance (the configuration has no waitgroups block, so there is
	 * one waitgroup, the pool).  When enabled, a parked want is eligible
	 * for a free slot by its service's class (book_class.h):
	 *   light    always;
	 *   heavy    only while more than `reserve` slots of the waitgroup are
	 *            free (running + offered + tokens < processes - reserve);
	 *   unknown  only while the service holds (offered + running) fewer
	 *            than `unknown_cap` slots.
	 * Among the eligible wants the grant rule is unchanged; an ineligible
	 * want never blocks an eligible one.  Disabled: every want is
	 * eligible (fixed waitgroups). */
	struct book_autobalance {
		uint32_t enabled;
		uint32_t reserve;
		uint32_t unknown_cap;
		uint32_t min_samples;        /* >= 1 when enabled */
		uint64_t heavy_threshold_ms; /* > 0 when enabled */
	} autobalance;
};

struct book; /* opaque; layout in book_layout.h for the book's own files */

/* ---- lifecycle (master) ------------------------------------------------ */

/* Bytes needed for a book with these limits (the receipt store included:
 * about max_receipts * (receipt_bytes + 8)).  0 if the limits are out of
 * range (max_receipts > BOOK_MAX_RECEIPTS, or receipt_bytes 0 or >
 * BOOK_RECEIPT_MAX while max_receipts > 0, ...). */
size_t book_size(const struct book_limits *lim);
/* Initialises a zeroed region of book_size() bytes: process-shared robust
 * mutex, tables, free lists.  seed feeds the token generator and the keyed
 * hash.  Returns 0 or -1 (limits out of range). */
int book_init(void *mem, const struct book_limits *lim, const struct book_topology *topo,
	      const uint8_t instance_id[16], uint64_t seed);
struct book *book_from_mem(void *mem);

/* ---- locking ------------------------------------------------------------ */

/* Locks the book.  Returns 0, or 1 when the previous holder died inside the
 * critical section: the book has then been checked and repaired (all derived
 * structures rebuilt from the primary tables) and marked consistent.
 * Returns -1 only if the mutex is unusable. */
int book_lock(struct book *b);
/* Unlocks; returns the bitmask of handlers that got mail since book_lock. */
uint64_t book_unlock(struct book *b);

/*
 * Work done before the lock, so that the section does not (issue 18: the
 * hold).  book_prepare_job: the want index's key of job_id for the
 * connection (its client and the id); book_prepare_park: the node index's
 * key of a WANT of the connection (connection, service, priority).  Each
 * computes the key's SipHash without the lock into a small process-local
 * memo, which the section's index operations read instead of hashing, and
 * prefetches the index slot (and for a job, the want record it names) that
 * the section will touch.  Safe without the lock: a hash is a pure function
 * of the key and the segment's SipHash key, which book_init writes once and
 * nothing changes, so a memo entry is right whatever happened since (at
 * worst unused); the connection's client (the key's first half) is fixed
 * while the connection is open, and is read again inside the section,
 * where only a key that matches finds its memo entry; the other reads only
 * warm the cache.  Up to BOOK_PREPARED_MAX keys are kept, more are ignored;
 * book_prepared_clear() empties the memo (after the section).
 */
#define BOOK_PREPARED_MAX 32
void book_prepare_job(const struct book *b, struct book_ref conn, const char *job_id);
void book_prepare_park(const struct book *b, struct book_ref conn, uint32_t service,
		       int32_t priority);
void book_prepared_clear(void);

/* Fault injection for tests: when set, book operations call it at named
 * points inside the critical section; a test hook may _exit() there to
 * simulate a crash holding the lock.  The hook is process-local.  Points
 * (each in the middle of a multi-step update, after the primary record
 * changed and before the derived structures follow):
 *   "open.mid"    book_conn_open: client record taken, conn not yet live
 *   "close.mid"   conn close/purge: conn freed, its wants not yet dropped
 *   "want.mid"    book_want: want PARKED, not yet indexed/queued
 *   "grant.mid"   any grant: want OFFERED, not yet dequeued/mailed
 *   "unwant.mid"  book_unwant: want freed, not yet unlinked
 *   "accept.mid"  book_accept: want RUNNING, lists not yet moved
 *   "decline.mid" book_decline: want freed, not yet unlinked
 *   "finish.outcome" book_job_finished (and the other ends of a job): its
 *                 outcome and receipt written over the offer's fields, the
 *                 want still RUNNING
 *   "finished.mid" book_job_finished: want FINISHED (outcome and receipt
 *                 written), slot not yet freed, DONE not yet queued (an
 *                 orphan's record: freed, not yet unlinked)
 *   "delivered.mid" book_done_delivered: want freed, not yet unlinked
 *   "expire.mid"  book_expire: offer EXPIRED, not yet unlinked
 *   "grace.mid"   client end (grace expiry, anonymous close): a running
 *                 job orphaned or a finished one freed
 *   "purge.mid"   book_purge_handler: the jobs it ran ended as lost
 *                 (FINISHED, slots freed, DONE queued at their owner
 *                 conns' handlers, its own included; orphans freed), its
 *                 conns not yet dropped
 *   "mail.mid"    book_mail_take: mail unlinked, pending flag not cleared
 *   "cancel.mid"  book_cancel: owner cancel flagged, mail not yet queued
 *   "repair.mid"  book_repair: derived state cleared, not yet rebuilt
 *   "token.mid"   book_token_issue: token ISSUED, not yet counted
 *   "sample.mid"  a job's end (book_job_finished, book_token_finished,
 *                 the purge's lost jobs): its end written and counted in
 *                 the statistics and the profile, its slot not granted */
typedef void (*book_fault_fn)(const char *point);
void book_set_fault_hook(book_fault_fn fn);

/* ---- handlers ----------------------------------------------------------- */

void book_handler_started(struct book *b, uint32_t handler, int32_t pid);
/* A handler died (master, after waitpid).  Its running jobs are lost and
 * its conns are dropped.  Precisely, in this order:
 *  1. each RUNNING job whose runner is this handler (in the order they
 *     were accepted; after a repair, in arrival order) has its pgid (if
 *     > 0) written to pgids (up to max), so the master can kill the
 *     process group, and then ends exactly as if its runner had called
 *     book_job_finished with the outcome
 *       {exit_code -1, signal 0, error BOOK_ERROR_LOST, retryable 1,
 *        failed 1, duration_ms 0}
 *     and no receipt text (book_done_read: len 0, receipt_lost 0), except
 *     that it adds no runtime sample (it counts as finished and failed)
 *     and that its freed slot is granted in step 3 (once the wants of the
 *     dead conns are gone): the want becomes WANT_FINISHED and MAIL_DONE
 *     goes to the handler of its owner conn; a job whose client is away
 *     (grace) waits for it; an orphan (client ended) is freed.  FINISHED
 *     jobs it ran are not touched (their outcome is in the book);
 *  2. its conns are closed as by book_conn_close, oldest first: parked
 *     wants removed, offered slots freed, and the jobs (running or
 *     finished, the ones lost in step 1 included) they owned re-homed per
 *     the connection rules: the client's newest other live conn adopts
 *     them (finished ones: MAIL_DONE at its handler); a named client
 *     without live conns keeps them for the resume grace (a conn opened
 *     within it adopts them and gets the DONEs); an anonymous client's are
 *     freed (running ones cancelled);
 *  3. its mailbox and HELLO flag are emptied (the DONE mails it had taken
 *     but not delivered were re-mailed through the re-homing), its pid is
 *     reset to 0 and the freed slots are granted.
 * So the client of a lost job gets one DONE saying so, wherever it is
 * connected by then.  Purging it again (before it runs anything) changes
 * nothing and returns 0.
 * Returns the number of pgids written. */
size_t book_purge_handler(struct book *b, uint32_t handler, int32_t *pgids, size_t max);

/* ---- connections -------------------------------------------------------- */

/* Registers a connection of `handler`.  client_id NULL or "" = anonymous.
 * A named client that is in its resume grace re-adopts its jobs: running
 * and finished ones are re-attached to this connection, and each finished
 * one gets MAIL_DONE at `handler` (in the order the jobs were accepted).  A second connection of a named client that is already
 * connected joins it (wants are per connection, job_ids per client).
 * When the number of distinct clients with a live connection changes,
 * HELLO is marked dirty for every handler with live connections (a new
 * connection's own HELLO is the handler's business).  BOOK_E_LIMIT_CONNS
 * at max_connections.  The client table has 2 * max_connections records;
 * if a new client finds it full, the client whose grace began first loses
 * the rest of its grace (its running jobs get MAIL_CANCEL, its finished
 * ones are freed). */
enum book_rc book_conn_open(struct book *b, uint32_t handler, const char *client_id,
			    uint64_t now_ms, struct book_ref *conn);
/* Connection gone: its parked wants are dropped, its offered slots freed,
 * its undelivered OFFER/OFFER_EXPIRED mail dropped; the running and
 * finished jobs it owned stay with its client: the client's newest other
 * live connection adopts them (finished ones: MAIL_DONE to its handler,
 * moved there if still pending); without one, a named client keeps them
 * for the resume grace (pending DONE mail withdrawn), an anonymous one's
 * running jobs get MAIL_CANCEL to their runner and its finished ones are
 * freed.  A stale ref is ignored. */
void book_conn_close(struct book *b, struct book_ref conn, uint64_t now_ms);

/* ---- wants -------------------------------------------------------------- */

/* Parks a want (and grants at once if a slot is free).  Checks, in order:
 * STALE (conn), INVALID (job_id), DRAINING, UNKNOWN_SERVICE, DISABLED,
 * DUPLICATE (job_id known for this client in any state, FINISHED
 * included: until its DONE was delivered), LIMIT_CONN
 * (max_wants_per_connection counts the conn's PARKED + OFFERED wants),
 * LIMIT_WANTS (max_wants counts PARKED + OFFERED + RUNNING + FINISHED).
 *
 * The requests below name a job by (conn, job_id): a PARKED or OFFERED
 * want is only visible to the conn that placed it (else UNKNOWN_JOB); a
 * RUNNING or FINISHED job to every conn of its client. */
enum book_rc book_want(struct book *b, struct book_ref conn, const char *job_id, uint32_t service,
		       int32_t priority, uint64_t now_ms);
/* Removes a parked want, or frees the slot of an offered one (the want is
 * gone either way).  RUNNING or FINISHED: BOOK_E_BAD_STATE. */
enum book_rc book_unwant(struct book *b, struct book_ref conn, const char *job_id);
/* CANCEL: a parked or offered want is removed as by book_unwant; a running
 * job gets MAIL_CANCEL to its runner once (until that mail is taken; the
 * runner ends the job and reports it with book_job_finished, its receipt
 * saying cancelled).  *was tells which (and *want names the running job).
 * Visibility as for book_unwant/book_query: a job of another client, or
 * one already FINISHED (its outcome is decided; its one DONE is on its
 * way), is BOOK_E_UNKNOWN_JOB; for a FINISHED one *was says WANT_FINISHED
 * (protocol 2 answers nothing then: the DONE is the answer). */
enum book_rc book_cancel(struct book *b, struct book_ref conn, const char *job_id,
			 enum want_state *was, struct book_ref *want);
/* JOB: the offered want becomes RUNNING on `runner` (the handler that got
 * the JOB).  Token must match the current offer.  BOOK_E_LIMIT_JOBS (the
 * want stays OFFERED) when its client already runs max_jobs_per_client
 * jobs, on any handler: counted from the client's job list, which repair
 * rebuilds from the want records, so the count survives a crash.  PARKED, RUNNING or
 * FINISHED: BOOK_E_BAD_STATE (not_offered / already_running); after the offer
 * expired the want is gone: BOOK_E_UNKNOWN_JOB (or BOOK_E_BAD_TOKEN if the
 * job_id was wanted and offered again). */
enum book_rc book_accept(struct book *b, struct book_ref conn, const char *job_id, uint64_t token,
			 uint32_t runner, struct book_ref *want);
/* DECLINE: frees the offered slot at once; the want is gone.  Not OFFERED:
 * BOOK_E_BAD_STATE. */
enum book_rc book_decline(struct book *b, struct book_ref conn, const char *job_id, uint64_t token);
/* Records the process group of a running job (for kill on handler crash). */
void book_job_set_pgid(struct book *b, struct book_ref want, int32_t pgid);

/* The compact outcome of a finished job, kept in the want record. */
struct book_outcome {
	int32_t exit_code; /* -1 if none */
	uint8_t signal;    /* 0 if none */
	uint8_t error;     /* job layer's code, 0 = none */
	uint8_t retryable;
	uint8_t failed; /* for the statistics */
	uint32_t duration_ms;
	/* out only (book_done_read; ignored by book_job_finished): 1 when a
	 * receipt text was given but not kept (store full, or longer than
	 * receipt_bytes), so only this compact outcome is left. */
	uint8_t receipt_lost;
};

/* The process of a running job ended.  Frees its slot (re-granted), updates
 * the service statistics (finished; failed if o->failed; runtime EMA of
 * duration_ms with alpha 0.2, the first sample initialises it, if the job
 * is a sample: class_takes_sample, book_class.h; with
 * auto-balance the service's class follows, book_class.h), stores the
 * receipt text (len bytes, not NUL-terminated; may be NULL) if the store
 * has room (else the want is flagged receipt_lost, see book_done_read), and
 * queues MAIL_DONE for the handler of the job's owner connection when the
 * client has a live connection; otherwise the job waits for its client
 * (resume grace) and is freed when the grace ends.  An orphan (its client
 * ended: anonymous conn closed, grace over) has nobody to tell: it is freed
 * at once (statistics still count it).  The want ref stays valid (the
 * FINISHED want) until book_done_delivered or the client's end.
 * BOOK_E_INVALID if o is NULL; BOOK_E_STALE for a stale ref (e.g. an
 * orphan whose runner was purged); BOOK_E_BAD_STATE unless RUNNING (e.g.
 * its runner was purged: the job was ended as lost).  (Replaces
 * book_job_finish, which freed the want at once and is gone.) */
enum book_rc book_job_finished(struct book *b, struct book_ref want, const struct book_outcome *o,
			       const char *receipt, size_t len);
/* After MAIL_DONE: copies the kept receipt text into buf (NUL-terminated,
 * truncated to cap-1; buf may be NULL when cap is 0; returns its full
 * length in *len, 0 when only the compact outcome was kept) and the outcome
 * into *o (o->receipt_lost set as described there).  BOOK_E_STALE if the
 * want is gone; BOOK_E_BAD_STATE unless FINISHED.  Changes nothing. */
enum book_rc book_done_read(const struct book *b, struct book_ref want, struct book_outcome *o,
			    char *buf, size_t cap, size_t *len);
/* ACK (protocol 2): the client acknowledged the DONE of job_id, on any of
 * its conns: the FINISHED want is freed exactly as by book_done_delivered
 * (a DONE mail still pending for it, e.g. after book_conn_adopt, is
 * dropped).  BOOK_E_UNKNOWN_JOB when the client has no such job (never
 * existed, or acknowledged already), BOOK_E_BAD_STATE when it has not
 * ended; nothing changes then. */
enum book_rc book_done_ack(struct book *b, struct book_ref conn, const char *job_id);
/* The DONE went out on conn: frees the want (and its receipt slot), forgets
 * the id (the client may WANT it again), drops a MAIL_DONE still pending
 * for it (never a second DONE).  BOOK_E_STALE if the want is gone (then
 * nothing happens), BOOK_E_BAD_STATE unless FINISHED. */
enum book_rc book_done_delivered(struct book *b, struct book_ref want);

/* A conn of protocol 2 (its client acknowledges each DONE) takes over
 * every RUNNING and FINISHED job of its client that another live conn
 * owns: the client reconnected, most likely because it lost that other
 * conn without the book knowing yet (a half-open connection, closed only
 * at its ping deadline).  Each FINISHED one is mailed to this conn, also
 * when its DONE was sent on the other conn already and is not
 * acknowledged (the client recognises the second copy and acknowledges
 * it); a DONE mail still pending for the old owner is withdrawn.  Every
 * OFFERED want of the client on another conn is withdrawn as if its offer
 * had expired (OFFER_EXPIRED mailed to that conn, slot granted again): a
 * JOB for it still on its way on the old conn then gets
 * BOOK_E_UNKNOWN_JOB, as does a QUERY for it; parked wants stay.  Call
 * right after book_conn_open.  Returns the number of jobs taken over
 * (withdrawn offers not counted); 0 for a stale ref. */
uint32_t book_conn_adopt(struct book *b, struct book_ref conn);

/* Who should receive the DONE of a running or finished job: the connection
 * that placed it, or after a resume the connection that re-adopted it
 * (when the placing conn closes while its client has other live conns, the
 * newest of them adopts the job at once).  BOOK_E_STALE when the client has
 * no live connection (grace running) or the job was cancelled (client
 * gone). */
enum book_rc book_job_owner(const struct book *b, struct book_ref want, struct book_ref *conn,
			    uint32_t *handler);

/* For the idle timeout: 1 when conn has parked or offered wants, or owns a
 * RUNNING or FINISHED job (its DONE not delivered yet); 0 when it has none,
 * or the ref is stale. */
int book_conn_busy(const struct book *b, struct book_ref conn);
/* RUNNING jobs of the client of conn (all its connections, all handlers);
 * 0 for a stale ref. */
uint32_t book_client_running(const struct book *b, struct book_ref conn);

/* Expires offers whose deadline passed (mail OFFER_EXPIRED to the conn's
 * handler; want removed; slot re-granted), legacy tokens still ISSUED at
 * their deadline (slot re-granted), and named clients whose grace
 * ran out (mail CANCEL for each of their running jobs to its runner; the
 * jobs keep their slots until book_job_finished, which then frees them;
 * their finished jobs are freed without DONE).  Deadline <= now expires.
 * Returns the number of offers, tokens and clients expired. */
uint32_t book_expire(struct book *b, uint64_t now_ms);
/* Earliest pending deadline (offer, token or grace), or UINT64_MAX.  An offer or
 * grace begun in a call without time (see book_set_now) is reported as due
 * at the book's last known time, so the caller's timer fires at once and
 * its book_expire() starts that timeout. */
uint64_t book_next_deadline(const struct book *b);

/* Time for the rest of this critical section (optional, call right after
 * book_lock).  The book never reads a clock: calls with now_ms bring it.
 * Offers granted, and graces begun, by calls without now_ms
 * (book_job_finished, book_unwant, book_decline, book_purge_handler) get their deadline from the last time given in the
 * same critical section; without one they are stamped by the next call
 * that brings the time.
 * The book's time never goes back (max of all times seen). */
void book_set_now(struct book *b, uint64_t now_ms);

/* ---- queue position ----------------------------------------------------- */

struct book_position {
	enum want_state state;
	uint32_t running;  /* slots in use in the waitgroup (offered + running + tokens) */
	uint32_t ahead;    /* parked wants granted before this one by the grant rule
			       * (replayed as if slots kept freeing); 0 unless PARKED */
	uint32_t capacity; /* processes of the waitgroup */
	uint32_t service;
};
/* Position of a job the conn can see (book_want's visibility rule).  A
 * FINISHED job (DONE not delivered yet) answers BOOK_OK with state
 * WANT_FINISHED (ahead 0). */
enum book_rc book_query(const struct book *b, struct book_ref conn, const char *job_id,
			struct book_position *pos);
/*
 * The estimated wait of the PARKED want of pos (book_query's answer) until
 * it gets a slot, in ms, or -1 when the book cannot tell (docs/protocol.md,
 * POSITION eta_ms).  Each slot of its waitgroup in use frees, expectedly,
 * at its job's service mean minus how long it has run (an offered want's:
 * its service mean); a slot whose end is unknown (that service has no
 * mean yet, its job has run longer than the mean, a legacy token) is
 * taken never to free; a free slot frees now.  Of these, the `usable`
 * latest-freeing slots are the want's (auto-balance keeps the others for
 * lighter services; usable >= processes: all).  Each of the `ahead` wants
 * before it takes the next slot that frees and holds it for the want's
 * own service mean; the want gets the next one after them.  -1 when that
 * slot is one never to free, or when ahead > 0 and the service has no
 * mean.  Cost: one pass over the running wants of every handler.
 */
int64_t book_eta(const struct book *b, const struct book_position *pos, uint32_t usable);

/* ---- drain -------------------------------------------------------------- */

/* Stops granting and refuses new wants (BOOK_E_DRAINING); HELLO dirty. */
void book_set_draining(struct book *b);
int book_is_draining(const struct book *b);

/* ---- mail --------------------------------------------------------------- */

enum book_mail_kind {
	MAIL_OFFER = 1,     /* send OFFER {job_id, token} on conn */
	MAIL_OFFER_EXPIRED, /* send ERROR offer_expired {job_id} on conn */
	MAIL_CANCEL,        /* runner: stop the running job `want` */
	MAIL_HELLO,         /* re-send HELLO on every conn of the handler */
	MAIL_DONE,          /* send DONE of the finished job `want` on conn
				* (book_done_read, then book_done_delivered) */
};

struct book_mail {
	enum book_mail_kind kind;
	struct book_ref conn; /* OFFER, OFFER_EXPIRED, DONE */
	struct book_ref want; /* OFFER, CANCEL, DONE */
	char job_id[BOOK_ID_MAX + 1];
	uint64_t token;
};

/* Pops up to max mails for `handler` into out; returns how many.  HELLO
 * (at most one pending per handler) comes first, then the mailbox in the
 * order the mail was queued.  Mail is exactly-once, also across a repair:
 * a crash of another process never loses or repeats a mail; a mail for a
 * want that was freed before it was taken is never delivered; an OFFER not
 * yet taken when its offer expires is replaced by the OFFER_EXPIRED.  If
 * the want table is full of live wants and undelivered OFFER_EXPIRED mails,
 * a new WANT takes the record of the oldest such mail, which is then lost.
 * MAIL_OFFER_EXPIRED carries conn and job_id; MAIL_CANCEL want and job_id
 * (its conn.idx is UINT32_MAX); MAIL_DONE conn (the owner), want and
 * job_id.  A MAIL_DONE taken stays taken: if the handler cannot deliver it
 * it does not call book_done_delivered, and the want is mailed again only
 * when its owner conn closes and another conn of the client owns it. */
size_t book_mail_take(struct book *b, uint32_t handler, struct book_mail *out, size_t max);
/* Whether handler's mailbox holds mail (or a HELLO): read WITHOUT the
 * lock, so only a hint, but a safe one for the mailbox's owner: mail is
 * queued under the lock and the eventfd written after book_unlock, so a
 * handler that reads its eventfd and then finds nothing pending here will
 * be woken again for anything queued after that look. */
int book_mail_pending(const struct book *b, uint32_t handler);
/*
 * The doorbell only for a handler that may be blocked in its event loop.
 * A handler marks itself asleep (1) before it may block and awake (0)
 * when it works; book_handler_asleep stores the mark with a full fence
 * after it, so that a handler that then finds no mail (book_mail_pending)
 * is seen asleep by whoever queues mail after that look.  book_wake_needed
 * (after book_unlock, WITHOUT the lock: a full fence, then the marks)
 * keeps of a wake mask the handlers marked asleep: the others find their
 * mail before they next block.  Neither takes the lock.
 */
void book_handler_asleep(struct book *b, uint32_t handler, int asleep);
uint64_t book_wake_needed(const struct book *b, uint64_t mask);

/* ---- status ------------------------------------------------------------- */

struct book_wg_status {
	uint32_t processes, running, offered, waiting, tokens;
};
struct book_service_status {
	uint64_t started, finished, failed;
	uint64_t
		mean_runtime_ms; /* exponential moving average, rounded, <= UINT32_MAX; 0 = no sample */
	uint64_t samples;        /* finished jobs in the average (class_takes_sample) */
	uint32_t waiting, running, offered;
	uint32_t klass; /* enum svc_class (book_class.h); SVC_UNKNOWN unless auto-balance */
	/* run time of the finished jobs (duration_ms; not those lost with
	 * their handler, whose run time is not known), and slot wait: from a
	 * want's WANT (book_want's now_ms) to its grant, for the wants that
	 * got an offer (legacy tokens wait for nothing: not counted) */
	struct hist runtime, slot_wait;
};
struct book_status {
	uint8_t instance_id[16];
	uint32_t clients; /* distinct clients with a live connection */
	uint32_t connections;
	uint32_t wants; /* records in use */
	uint32_t draining;
	uint64_t grants, repairs;
	int32_t handler_pids[BOOK_MAX_HANDLERS];
	uint32_t handler_conns[BOOK_MAX_HANDLERS]; /* live connections per handler */
	uint32_t finished;                         /* FINISHED wants (DONE not delivered yet) */
	uint32_t receipts; /* receipt store slots in use (of max_receipts) */
	uint32_t handler_starts[BOOK_MAX_HANDLERS]; /* book_handler_started calls */
	uint64_t handovers; /* grants made by book_job_finished: a freed slot's next taker */
	uint64_t progress_good, progress_bad; /* book_progress_lines */
};
/* Counts the progress lines an ended job wrote (docs/progress.md): good
 * ones, and bad ones (ignored).  Statistics only. */
void book_progress_lines(struct book *b, uint64_t good, uint64_t bad);
/* wants = PARKED + OFFERED + RUNNING + FINISHED; grants = offers made so far. */
void book_status(const struct book *b, struct book_status *st);

/*
 * The lock's own figures, kept only by a build compiled with
 * BOOK_LOCK_STATS (bench/execserver-lockstat of `make bench`; the daemon
 * of a normal build reads no clock here): critical sections, how many had
 * to wait for the lock (trylock failed) and for how long, and a histogram
 * of the time the lock was held, in ns, and the SipHash computations made
 * inside sections (the index keys not prepared before the lock,
 * book_prepare_job).  Bucket i counts holds of at most
 * book_lock_bucket_ns(i) ns (and more than bucket i - 1's): 8 ns steps up
 * to 64 ns, then 8 steps per power of two.  Returns 0 with the figures in
 * st (call it with the lock held, or accept a torn read), -1 when the
 * build keeps none.
 */
#define BOOK_LOCK_BUCKETS 256
struct book_lock_stats {
	uint64_t ops;     /* critical sections (book_lock calls) */
	uint64_t waits;   /* ... that found the lock taken */
	uint64_t wait_ns; /* time those spent waiting */
	uint64_t hold_ns; /* time the lock was held, in total */
	uint64_t hashes;  /* SipHash computed inside sections */
	uint64_t hold_hist[BOOK_LOCK_BUCKETS];
};
int book_lock_stats(const struct book *b, struct book_lock_stats *st);
uint64_t book_lock_bucket_ns(unsigned i);
void book_wg_status(const struct book *b, uint32_t wg, struct book_wg_status *st);
void book_service_status(const struct book *b, uint32_t svc, struct book_service_status *st);
const struct book_topology *book_topology(const struct book *b);

/* ---- learned profile (auto-balance) ------------------------------------ */

/* What the book learned about a service's runtime (book_profile.c): the
 * moving average and its sample count take the finished jobs that are
 * samples (book_job_finished, book_token_finished; class_takes_sample: a
 * job that ended with an error only when it ran longer than the average,
 * never as the first sample; a lost job never), the class follows them
 * (book_class.h) when auto-balance is enabled and stays SVC_UNKNOWN
 * otherwise. */
struct book_profile {
	double ema_ms;
	uint64_t samples;
	uint32_t klass; /* enum svc_class */
};
void book_profile_get(const struct book *b, uint32_t svc, struct book_profile *p);
/* Restores a service's profile (the master, from a snapshot, before any
 * job ran): EMA and samples are taken; the class is taken when it is
 * consistent with them and the book's parameters (class_consistent),
 * otherwise classified afresh (class_next from SVC_UNKNOWN); without
 * auto-balance it stays SVC_UNKNOWN.  Then grants.  BOOK_E_INVALID for a
 * service out of range or an EMA that is not a valid average (negative,
 * not finite, or above UINT32_MAX ms: class_ema_valid). */
enum book_rc book_profile_set(struct book *b, uint32_t svc, const struct book_profile *p);
/* Counters since book_init, for the snapshot writer: samples added (any
 * service) and class changes (auto-balance). */
void book_profile_changes(const struct book *b, uint64_t *samples, uint64_t *class_changes);

/* ---- legacy tokens (GET /token, PUT /job: docs/protocol.md section 9) ---- */

/* A token holds one slot of its service's waitgroup, like an offer, but
 * belongs to no connection: it is ISSUED until its deadline (book_expire
 * then frees the slot and grants it), and RUNNING from book_token_use
 * until book_token_finished (or the purge of its runner).  A handler that
 * dies leaves the ISSUED tokens alone (a PUT may still come to another
 * handler); the RUNNING ones it ran are freed by book_purge_handler (their
 * pgids are returned with the jobs' ones).  References are index +
 * generation; the secret is random per token.  Tokens take no part in the
 * grant rule: they only hold slots, and a slot is never taken by a token
 * while a want of the waitgroup is parked. */

/* Reserves a slot of service's waitgroup until now_ms + valid_ms.  Checks,
 * in order: UNKNOWN_SERVICE, DISABLED, DRAINING, BUSY (the waitgroup has a
 * parked want, or no free slot, or auto-balance's class rule keeps the
 * service from taking one (as for a want), or the token table is full). */
enum book_rc book_token_issue(struct book *b, uint32_t service, uint64_t now_ms, uint32_t valid_ms,
			      struct book_ref *tok, uint64_t *secret);
/* Redeems an ISSUED token whose deadline is still ahead, for service, on
 * runner: it becomes RUNNING (single use).  UNKNOWN_JOB when there is no
 * such token (never issued, expired, used, or the secret differs),
 * BAD_TOKEN when it was issued for another service (it stays ISSUED),
 * INVALID for a runner out of range. */
enum book_rc book_token_use(struct book *b, struct book_ref tok, uint64_t secret, uint32_t service,
			    uint32_t runner, uint64_t now_ms);
/* Records the process group of a token's running job (0: none any more). */
void book_token_set_pgid(struct book *b, struct book_ref tok, int32_t pgid);
/* The token's job ended: the token is freed, its slot granted; the
 * service statistics count it like a broker job.  STALE if the token is
 * gone (its runner was purged), BAD_STATE unless RUNNING. */
enum book_rc book_token_finished(struct book *b, struct book_ref tok, const struct book_outcome *o);

/* ---- views for the console (book_list.c) -------------------------------- */

/* One failed job (book_outcome.failed) of the last BOOK_FAILURES, kept by
 * book_job_finished and by the purge that ends jobs as lost. */
#define BOOK_FAILURES 16
struct book_failure {
	char job_id[BOOK_ID_MAX + 1];
	char client_id[BOOK_ID_MAX + 1]; /* "" for an anonymous client or an orphan */
	uint16_t service;
	uint8_t error, signal; /* book_outcome's */
	int32_t exit_code;
	uint32_t duration_ms;
	uint64_t at_ms; /* the book's clock when it ended */
};
/* The failures kept, newest first, at most max; returns how many. */
size_t book_failures(const struct book *b, struct book_failure *out, size_t max);

/* A want as the console shows it. */
struct book_want_info {
	struct book_ref ref; /* for book_cancel_ref */
	enum want_state state;
	char job_id[BOOK_ID_MAX + 1];
	char client_id[BOOK_ID_MAX + 1]; /* "" for an anonymous client */
	uint32_t conn;                   /* conn index (names an anonymous client); BK_NIL none */
	uint32_t service;
	uint32_t handler; /* PARKED/OFFERED: its conn's handler; RUNNING: the runner */
	int32_t priority;
	uint32_t position; /* PARKED: 1 + the wants granted before it (book_query) */
	uint64_t since_ms; /* PARKED: its WANT; RUNNING: its start (book clock); else 0 */
	int command;       /* RUNNING: index in the service's commands, -1 unknown */
	int32_t pgid;      /* RUNNING: process group, 0 unknown */
	int32_t progress;  /* RUNNING: its latest progress in 1/10000, -1 none */
};
/* The RUNNING and OFFERED wants (all of them), then the PARKED wants of
 * each waitgroup: the head of its line, the first max_parked in grant
 * order with positions 1, 2, ... (as book_query counts them), into out (at
 * most max in all); returns how many.  Cost: O(running + offered) plus,
 * per waitgroup, about one book_query (one replay of the grant rule,
 * stopped after the last want listed). */
size_t book_list_wants(const struct book *b, struct book_want_info *out, size_t max,
		       uint32_t max_parked);
/* Distinct clients with a live conn on each handler, into
 * out[BOOK_MAX_HANDLERS].  Cost: O(conns). */
void book_handler_clients(const struct book *b, uint32_t *out);
/* The running job's command (index in its service's commands), for
 * book_list_wants; a stale ref or a want not RUNNING is left alone. */
void book_job_set_command(struct book *b, struct book_ref want, unsigned command);
/* The running job's latest progress (docs/progress.md), 0 to 1, for
 * book_list_wants; a stale ref or a want not RUNNING is left alone. */
void book_job_set_progress(struct book *b, struct book_ref want, double fraction);
/* An operator's cancel (the console): a RUNNING want gets its CANCEL mail
 * as by its own client's book_cancel (its DONE then says cancelled).
 * BOOK_E_STALE when the want is gone, BOOK_E_BAD_STATE unless RUNNING. */
enum book_rc book_cancel_ref(struct book *b, struct book_ref want);

/* ---- consistency -------------------------------------------------------- */

/* Checks every invariant (counts match tables, each parked want in exactly
 * one queue, heaps ordered, each held slot has a live holder, each
 * service's class consistent with its runtime average, finished
 * wants hold no slot and are indexed and listed with their client, each
 * receipt slot owned by exactly one finished want or on the free list,
 * pending-mail flags match the mailboxes, indexes match the tables, lists
 * and free lists complete, grants eager).  Must be called
 * with the book locked.  Returns 0, or -1 with a description of the first
 * violation in why. */
int book_check(const struct book *b, char *why, size_t whylen);
/* Rebuilds every derived structure from the primary tables (used after
 * EOWNERDEAD; exposed for tests), drops records that reference dead
 * entries, re-queues pending mail (a finished job whose owner conn is gone
 * is re-homed and mailed), rebuilds the receipt store's free list from the
 * finished wants, marks HELLO for every handler with live connections,
 * then grants.  Idempotent. */
void book_repair(struct book *b);

#endif
