/*
 * broker.c - see broker.h.
 *
 * Data flows one way: the websocket texts of one read -> msg_decode each
 * -> their book operations in one section of the lock -> the replies, in
 * message order.  Decisions the book makes for connections of other
 * handlers travel as mail (mailbox.c), never as direct calls.
 *
 * A malformed or refused message costs the sender one ERROR and nothing
 * else: the connection and every other client go on.  Protocol violations
 * below the message level (bad frames, invalid UTF-8, oversize messages)
 * are the websocket layer's and end the connection with a close code.
 */
#include "autoconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "book/book_class.h"
#include "common/clock.h"
#include "common/log.h"
#include "config/addr_rule.h"
#include "execserver/protocol.h"
#include "handler/broker.h"
#include "handler/handler.h"
#include "handler/mailbox.h"
#include "handler/messages.h"
#include "job/job.h"
#include "job/receipt.h"
#include "net/ws.h"

#define HELLO_COALESCE_MS 100
#define MAX_PENDING_OUT (8u << 20) /* a peer that reads nothing is cut off here */

struct hello_pings {
	int interval_sec, timeout_sec;
};

struct broker_conn {
	struct broker_conn *next, *prev;
	struct ws_session *ws;
	struct book_ref ref;
	char client_id[BOOK_ID_MAX + 1];
	char peer[64];
	struct ip_addr peer_ip; /* family 0 when unknown (callback guard) */
	struct event *idle_ev;  /* idleTimeoutSec, re-armed by activity */
	int protocol; /* in effect (HELLO.protocol); >= PROTO_VERSION_ACK: DONEs are acknowledged */
	uint64_t hello_hash;      /* of the last HELLO sent: unchanged ones are not re-sent */
	struct hello_pings pings; /* this connection's, fixed when it opened: a reload
				   * changes only later connections' (its HELLO says so) */
};

static struct broker_conn *conns;

/* ---- the steps of one read (see "client messages" below) ---- */

#define STEPS_MAX 16
/* every key a batch prepares (a WANT two, any other message one) is kept */
_Static_assert(BOOK_PREPARED_MAX >= 2 * STEPS_MAX, "the memo holds a whole batch's keys");

struct step {
	struct msg_in in;
	const char *code; /* ERROR without a book result: decode error, unknown
			   * service, refused JOB description (with detail) */
	char detail[256];
	int svc; /* WANT: the service's index */
	enum book_rc rc;
	struct book_position pos;      /* JOB, QUERY */
	struct book_service_status ss; /* QUERY */
	int64_t eta_ms;                /* QUERY: book_eta, -1 unknown */
	struct book_ref want;          /* JOB: the running want */
	enum want_state was;           /* CANCEL */
	int invalid;                   /* JOB: description refused (code, detail) */
	struct job_plan *plan;         /* JOB: the description parsed (job_prepare) */
};

/* The steps of the read in progress (one connection's: reads do not nest). */
static struct {
	struct broker_conn *c;
	size_t n;
	struct step s[STEPS_MAX];
} batch;

static void idle_touch(struct broker_conn *c);
static void batch_apply(void);

static struct broker_conn *lookup(struct book_ref ref)
{
	if (ref.idx >= (uint32_t)handler.inst->cfg->max_connections)
		return NULL;
	struct broker_conn *c = handler.by_book_idx[ref.idx];
	return c && c->ref.gen == ref.gen ? c : NULL;
}

/* Queues text (and frees it).  -1 when it cannot go out: the session is
 * closing, the peer reads nothing, or memory ran out. */
static int send_text(struct broker_conn *c, char *text)
{
	int rc = -1;

	if (!text) {
		log_error("out of memory encoding a message");
		return -1;
	}
	if (ws_session_pending_out(c->ws) > MAX_PENDING_OUT) {
		log_warn("%s: peer reads nothing (%zu bytes pending); closing", c->peer,
			 ws_session_pending_out(c->ws));
		ws_close(c->ws, PROTO_CLOSE_POLICY, "not reading");
	} else {
		rc = ws_send_text(c->ws, text, strlen(text));
		idle_touch(c);
	}
	free(text);
	return rc;
}

/* ---- idle timeout ------------------------------------------------------ */

/* A message in either direction (not HELLO, not a ping or pong) restarts
 * the idle period. */
static void idle_touch(struct broker_conn *c)
{
	int sec = handler.inst->cfg->idle_timeout_sec;

	if (sec > 0) {
		struct timeval tv = { sec, 0 };
		evtimer_add(c->idle_ev, &tv);
	} else {
		evtimer_del(c->idle_ev);
	}
}

static void on_idle(evutil_socket_t fd, short what, void *arg)
{
	struct broker_conn *c = arg;

	if (handler.inst->cfg->idle_timeout_sec <= 0)
		return;
	struct book *b = handler_book_lock();
	int busy = book_conn_busy(b, c->ref);
	handler_book_unlock();
	if (busy) {
		idle_touch(c); /* the end of what keeps it busy is a message too */
		return;
	}
	log_debug("%s: idle for %d s; closing", c->peer, handler.inst->cfg->idle_timeout_sec);
	ws_close(c->ws, PROTO_CLOSE_NORMAL, "idle timeout");
}

/* ERROR answering `refused` (NULL: an unsolicited one, about job_id). */
static void send_error(struct broker_conn *c, const char *code, const char *message,
		       const struct msg_in *refused, const char *job_id)
{
	send_text(c, msg_encode_error(code, message, refused ? refused->job_id : job_id, refused));
}

/* ---- HELLO ---------------------------------------------------------- */

/* The liveness a connection's HELLO announces: its own (a reload leaves
 * an open session's pings as they were), so that a client's bound on how
 * long a job outlives a lost connection (protocol.md, HELLO) holds. */
static struct hello_pings current_pings(void)
{
	const struct es_config *cfg = handler.inst->cfg;
	return (struct hello_pings){ cfg->ping_interval_sec, cfg->ping_timeout_sec };
}

static int same_pings(struct hello_pings a, struct hello_pings b)
{
	return a.interval_sec == b.interval_sec && a.timeout_sec == b.timeout_sec;
}

static char *encode_hello(int protocol, struct hello_pings pings)
{
	const struct es_config *cfg = handler.inst->cfg;
	struct book_status st;
	struct book *b = handler_book_lock();
	book_status(b, &st);
	handler_book_unlock();

	struct json_object *o = json_object_new_object();
	struct json_object *svcs = json_object_new_object(), *wgs = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string(PROTO_HELLO));
	json_object_object_add(o, "instance_id",
			       json_object_new_string(handler.inst->instance_name));
	json_object_object_add(o, "version", json_object_new_string(PACKAGE_VERSION));
	json_object_object_add(o, "protocol", json_object_new_int(protocol));
	struct json_object *off = json_object_new_object();
	for (size_t i = 0; i < cfg->nservices; i++)
		if (cfg->services[i].enabled)
			json_object_object_add(svcs, cfg->services[i].name,
					       json_object_new_string(cfg->services[i].waitgroup));
		else
			json_object_object_add(
				off, cfg->services[i].name,
				json_object_new_string(cfg->services[i].disabled_why));
	for (size_t i = 0; i < cfg->nwaitgroups; i++) {
		struct json_object *wg = json_object_new_object();
		json_object_object_add(
			wg, "processes",
			json_object_new_int(st.draining ? 0 : cfg->waitgroups[i].processes));
		json_object_object_add(wgs, cfg->waitgroups[i].name, wg);
	}
	json_object_object_add(o, "services", svcs);
	json_object_object_add(o, "disabled", off);
	json_object_object_add(o, "waitgroups", wgs);
	json_object_object_add(o, "clients", json_object_new_int64(st.clients));
	json_object_object_add(o, "draining", json_object_new_boolean(st.draining != 0));
	json_object_object_add(o, "max_frame_bytes", json_object_new_int(cfg->max_frame_bytes));
	json_object_object_add(o, "resume_grace_sec", json_object_new_int(cfg->resume_grace_sec));
	json_object_object_add(o, "ping_timeout_sec", json_object_new_int(pings.timeout_sec));
	json_object_object_add(o, "ping_interval_sec", json_object_new_int(pings.interval_sec));
	return msg_to_text(o);
}

/* FNV-1a, to recognize a HELLO identical to the one a connection has. */
static uint64_t text_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static void send_hello(struct broker_conn *c, const char *hello)
{
	uint64_t h = text_hash(hello);
	if (h != c->hello_hash && ws_send_text(c->ws, hello, strlen(hello)) == 0)
		c->hello_hash = h;
}

void broker_schedule_hello(void)
{
	if (!evtimer_pending(handler.hello_ev, NULL)) {
		struct timeval tv = { 0, HELLO_COALESCE_MS * 1000 };
		evtimer_add(handler.hello_ev, &tv);
	}
}

void broker_hello_cb(evutil_socket_t fd, short what, void *arg)
{
	char *hello[PROTO_VERSION + 1] = { NULL };
	struct hello_pings now = current_pings();
	for (struct broker_conn *c = conns; c; c = c->next) {
		if (!same_pings(c->pings, now)) {
			/* opened before a reload that changed them: rare, its own */
			char *own = encode_hello(c->protocol, c->pings);
			if (own)
				send_hello(c, own);
			free(own);
			continue;
		}
		if (!hello[c->protocol])
			hello[c->protocol] = encode_hello(c->protocol, now);
		if (hello[c->protocol])
			send_hello(c, hello[c->protocol]);
	}
	for (int v = 0; v <= PROTO_VERSION; v++)
		free(hello[v]);
}

/* ---- connection lifetime --------------------------------------------- */

int broker_register(const char *client_id, int protocol, struct book_ref *ref)
{
	struct book *b = handler_book_lock();
	enum book_rc rc = book_conn_open(b, (uint32_t)handler.slot, client_id, clock_mono_ms(),
					 ref);
	/* A client that acknowledges receipts takes its jobs (and their
	 * unacknowledged DONEs) over from its older connections, which may
	 * be half-open: it reconnected because it no longer hears them. */
	if (rc == BOOK_OK && protocol >= PROTO_VERSION_ACK)
		book_conn_adopt(b, *ref);
	handler_book_unlock();
	if (rc != BOOK_OK) {
		log_warn("connection refused: %s", book_rc_name(rc));
		return 503;
	}
	return 0;
}

void broker_unregister(struct book_ref ref)
{
	struct book *b = handler_book_lock();
	book_conn_close(b, ref, clock_mono_ms());
	handler_book_unlock();
}

static void on_closed(void *owner, uint16_t code)
{
	struct broker_conn *c = owner;

	log_debug("%s: connection closed (%u)", c->peer, code);
	if (batch.c == c)
		batch_apply(); /* what it said before it ended is done */
	broker_unregister(c->ref);
	handler.by_book_idx[c->ref.idx] = NULL;
	if (c->prev)
		c->prev->next = c->next;
	else
		conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	handler.nbroker--;
	ws_session_free(c->ws);
	event_free(c->idle_ev);
	free(c);
	handler_maybe_exit();
}

/* ---- client messages: the book operations of one read in one section ---- */

/*
 * A client often writes messages back to back (a DECLINE and its next
 * WANT, a JOB and the next WANT), and they arrive in one read.  on_text
 * only decodes each into a step (and prepares the hashes of its book
 * operation, book_prepare_job); on_read_end (ws.h) applies the steps of
 * the read in their order: every book operation in one critical section,
 * which also takes this handler's mail; then, without the lock, the
 * replies in message order, then the mail.  A JOB's description is checked
 * against the service of its offer, which the section reads: the lock is
 * left for that check (it may look at the file system) and taken again for
 * the accept and the steps after it.
 *
 * The book sees the same operations in the same order as with a section
 * each, only with no other process between them.  Each operation is
 * crash-safe on its own (book.h: a death inside one is repaired), so a
 * handler that dies inside the section leaves the operations before it
 * done and the rest not begun, as if the read had ended there; the
 * handler's connections are purged with it either way.
 */
static void reply_book_error(struct broker_conn *c, enum book_rc rc, const struct msg_in *in)
{
	send_error(c, msg_book_error(rc), msg_book_message(rc, in->type), in, NULL);
}

/* Under the lock: the step's book operation.  1 when it is a JOB whose
 * offer was found: its description is to be checked without the lock. */
static int step_book(struct book *b, struct broker_conn *c, struct step *s, uint64_t now)
{
	struct msg_in *in = &s->in;

	if (s->code)
		return 0;
	switch (in->type) {
	case MSG_WANT:
		s->rc = book_want(b, c->ref, in->job_id, (uint32_t)s->svc, in->priority, now);
		break;
	case MSG_UNWANT: s->rc = book_unwant(b, c->ref, in->job_id); break;
	case MSG_DECLINE: s->rc = book_decline(b, c->ref, in->job_id, in->token); break;
	case MSG_JOB: s->rc = book_query(b, c->ref, in->job_id, &s->pos); return s->rc == BOOK_OK;
	case MSG_QUERY:
		s->rc = book_query(b, c->ref, in->job_id, &s->pos);
		/* Protocol 1: a finished job is answered like one that never
		 * existed (its DONE is the only thing still to say about it).
		 * Protocol 2: "finished" until its DONE is acknowledged, so that
		 * a client that lost a DONE knows it comes again. */
		if (s->rc == BOOK_OK && s->pos.state == WANT_FINISHED &&
		    c->protocol < PROTO_VERSION_ACK)
			s->rc = BOOK_E_UNKNOWN_JOB;
		if (s->rc == BOOK_OK) {
			/* the slots the service may take: auto-balance keeps the
			 * reserve from heavy and caps unknown services */
			const struct es_config *cfg = handler.inst->cfg;
			book_service_status(b, s->pos.service, &s->ss);
			uint32_t usable = cfg->auto_balance
						  ? class_usable_slots(s->ss.klass, s->pos.capacity,
								       (uint32_t)cfg->fast_reserve,
								       (uint32_t)cfg->unknown_cap)
						  : s->pos.capacity;
			s->eta_ms = book_eta(b, &s->pos, usable);
		}
		break;
	case MSG_CANCEL: s->rc = book_cancel(b, c->ref, in->job_id, &s->was, &s->want); break;
	case MSG_ACK: s->rc = book_done_ack(b, c->ref, in->job_id); break;
	}
	return 0;
}

/* Under the lock again: a JOB's accept, or the withdrawal of its offer. */
static void step_accept(struct book *b, struct broker_conn *c, struct step *s)
{
	struct msg_in *in = &s->in;

	if (s->invalid) {
		/* An unusable description withdraws the offer: the slot goes
		 * on to the next taker instead of waiting for the offer
		 * timeout. */
		s->rc = book_decline(b, c->ref, in->job_id, in->token);
		return;
	}
	s->rc = book_accept(b, c->ref, in->job_id, in->token, (uint32_t)handler.slot, &s->want);
	/* Over maxJobsPerClient: the offer is withdrawn at once (the slot
	 * goes to the next taker), as for an unusable description. */
	if (s->rc == BOOK_E_LIMIT_JOBS && book_decline(b, c->ref, in->job_id, in->token) != BOOK_OK)
		s->rc = BOOK_E_STALE;
}

static void reply_position(struct broker_conn *c, const struct step *s)
{
	/* the estimate was made under the lock (book_eta) */
	send_text(c, msg_encode_position(s->in.job_id, &s->pos,
					 s->eta_ms >= 0 ? (uint64_t)s->eta_ms : 0, s->eta_ms >= 0));
}

static void reply_cancel(struct broker_conn *c, const struct step *s)
{
	if (s->rc == BOOK_E_UNKNOWN_JOB && s->was == WANT_FINISHED &&
	    c->protocol >= PROTO_VERSION_ACK)
		return; /* its DONE (sent, or on its way) is the answer */
	if (s->rc != BOOK_OK) {
		reply_book_error(c, s->rc, &s->in);
		return;
	}
	if (s->was == WANT_RUNNING)
		return; /* the runner answers with DONE {error: cancelled} */
	size_t len = 0;
	char *receipt = receipt_cancelled_before_run(&len);
	send_text(c, receipt ? receipt_done_message(s->in.job_id, receipt, len) : NULL);
	free(receipt);
}

/* Without the lock, after the section: what the client is told (and a
 * JOB's start). */
static void step_reply(struct broker_conn *c, const struct step *s)
{
	const struct msg_in *in = &s->in;

	if (s->code) {
		send_error(c, s->code, s->detail, in, NULL);
		return;
	}
	switch (in->type) {
	case MSG_JOB:
		if (s->rc != BOOK_OK)
			reply_book_error(c, s->rc, in);
		else /* (refused descriptions have their code) */
			job_start(s->want, in->job_id, s->plan,
				  c->peer_ip.family ? &c->peer_ip : NULL, c->client_id);
		break;
	case MSG_QUERY:
		if (s->rc != BOOK_OK)
			reply_book_error(c, s->rc, in);
		else
			reply_position(c, s);
		break;
	case MSG_CANCEL: reply_cancel(c, s); break;
	case MSG_ACK:
		/* ACK (protocol 2): no answer, whatever the book says: an ACK is
		 * idempotent (a second one, or one for a DONE that came twice,
		 * finds nothing and changes nothing). */
		if (s->rc != BOOK_OK)
			log_debug("%s: ACK of %s: %s (ignored)", c->peer, in->job_id,
				  book_rc_name(s->rc));
		break;
	default:
		if (s->rc != BOOK_OK)
			reply_book_error(c, s->rc, in);
		break;
	}
}

/* Applies the steps of the read (see above) and empties the batch. */
static void batch_apply(void)
{
	struct broker_conn *c = batch.c;
	size_t n = batch.n;
	struct book_mail mail[MAILBOX_BATCH];
	const char *jcode;

	if (n == 0)
		return;
	uint64_t now = clock_mono_ms(); /* read before, not while holding the lock */
	struct book *b = handler_book_lock();
	for (size_t i = 0; i < n; i++) {
		struct step *s = &batch.s[i];
		if (!step_book(b, c, s, now))
			continue;
		handler_book_unlock();
		jcode = NULL;
		s->plan = job_prepare(s->pos.service, s->in.job, &jcode, s->detail,
				      sizeof s->detail);
		if (!s->plan)
			s->invalid = 1;
		now = clock_mono_ms();
		b = handler_book_lock();
		step_accept(b, c, s);
		if (s->invalid && s->rc == BOOK_OK)
			s->code = jcode ? jcode : PROTO_E_BAD_JOB;
	}
	size_t nmail = mailbox_take(b, mail, MAILBOX_BATCH);
	handler_book_unlock();
	book_prepared_clear();
	batch.n = 0;
	batch.c = NULL;
	for (size_t i = 0; i < n; i++) {
		step_reply(c, &batch.s[i]);
		msg_in_free(&batch.s[i].in);
		job_plan_free(batch.s[i].plan);
	}
	mailbox_deliver(mail, nmail);
}

static void on_read_end(void *owner)
{
	(void)owner;
	batch_apply();
}

static void on_text(void *owner, const char *text, size_t len)
{
	struct broker_conn *c = owner;

	idle_touch(c);
	if (batch.n == STEPS_MAX || (batch.n > 0 && batch.c != c))
		batch_apply();
	struct step *s = &batch.s[batch.n++];
	memset(s, 0, sizeof *s);
	batch.c = c;
	if (msg_decode(text, len, c->protocol, &s->in, &s->code, s->detail, sizeof s->detail) != 0)
		return;
	if (s->in.type == MSG_WANT) {
		s->svc = config_service_index(handler.inst->cfg, s->in.service);
		if (s->svc < 0) {
			s->code = PROTO_E_UNKNOWN_SERVICE;
			snprintf(s->detail, sizeof s->detail, "no such service");
			return;
		}
		book_prepare_park(handler.inst->book, c->ref, (uint32_t)s->svc, s->in.priority);
	}
	/* the section's hashing, done here without the lock (book.h) */
	book_prepare_job(handler.inst->book, c->ref, s->in.job_id);
}

int broker_attach(struct bufferevent *bev, struct book_ref ref, const char *client_id, int protocol,
		  const char *peer, const struct sockaddr *peer_sa, socklen_t peer_len)
{
	const struct es_config *cfg = handler.inst->cfg;
	struct broker_conn *c = calloc(1, sizeof *c);
	struct ws_options opt;
	ws_options_default(&opt);
	opt.max_msg_len = (size_t)cfg->max_frame_bytes;
	struct hello_pings pings = current_pings();
	opt.ping_interval_ms = (unsigned)pings.interval_sec * 1000u;
	opt.ping_timeout_ms = (unsigned)pings.timeout_sec * 1000u;
	opt.pinger = handler.pinger;
	struct ws_callbacks cb = { .on_text = on_text,
				   .on_closed = on_closed,
				   .on_read_end = on_read_end };

	if (!c)
		return -1;
	c->ref = ref;
	c->protocol = protocol;
	c->pings = pings;
	snprintf(c->client_id, sizeof c->client_id, "%s", client_id ? client_id : "");
	snprintf(c->peer, sizeof c->peer, "%s", peer);
	if (!peer_sa || ip_addr_from_sockaddr(peer_sa, peer_len, &c->peer_ip) != 0)
		c->peer_ip.family = 0;
	c->idle_ev = evtimer_new(handler.base, on_idle, c);
	if (!c->idle_ev) {
		free(c);
		return -1;
	}
	c->ws = ws_session_new(bev, &opt, &cb, c);
	if (!c->ws) {
		event_free(c->idle_ev);
		free(c);
		return -1;
	}
	idle_touch(c);
	handler.by_book_idx[ref.idx] = c;
	c->next = conns;
	if (conns)
		conns->prev = c;
	conns = c;
	handler.nbroker++;
	char *hello = encode_hello(protocol, c->pings);
	if (hello)
		send_hello(c, hello);
	free(hello);
	return 0;
}

/* ---- mail ---------------------------------------------------------------- */

void broker_deliver_offer(struct book_ref ref, const char *job_id, uint64_t token)
{
	struct broker_conn *c = lookup(ref);
	if (c && send_text(c, msg_encode_offer(job_id, token)) == 0)
		return;
	/* The connection ended (or is closing) between the grant and this
	 * mail: give the slot back at once rather than after the timeout. */
	struct book *b = handler_book_lock();
	book_decline(b, ref, job_id, token);
	handler_book_unlock();
}

void broker_deliver_offer_expired(struct book_ref ref, const char *job_id)
{
	struct broker_conn *c = lookup(ref);
	if (c)
		send_error(c, PROTO_E_OFFER_EXPIRED, "no JOB or DECLINE within offerTimeoutSec",
			   NULL, job_id);
}

void broker_deliver_done(struct book_ref ref, struct book_ref want, const char *job_id)
{
	static char kept[RECEIPT_MAX_BYTES + 1];
	struct broker_conn *c = lookup(ref);
	struct book_outcome o;
	size_t len = 0;

	if (!c || !ws_session_is_open(c->ws))
		return; /* its close hands the job on (book_conn_close) */
	struct book *b = handler_book_lock();
	enum book_rc rc = book_done_read(b, want, &o, kept, sizeof kept, &len);
	handler_book_unlock();
	if (rc != BOOK_OK)
		return;
	char *compact = NULL;
	if (len == 0 || len >= sizeof kept) {
		compact = receipt_compact(&o, &len);
		if (!compact)
			return;
	}
	char *msg = receipt_done_message(job_id, compact ? compact : kept, len);
	free(compact);
	/* Protocol 2 keeps the receipt until the client's ACK (on_ack): a
	 * DONE queued on a connection that turns out half-open is sent again
	 * on the client's next one.  Protocol 1 counts it delivered here. */
	if (send_text(c, msg) == 0 && c->protocol < PROTO_VERSION_ACK) {
		b = handler_book_lock();
		book_done_delivered(b, want);
		handler_book_unlock();
	}
}

void broker_job_progress(struct book_ref want, const char *job_id, double fraction,
			 const char *text)
{
	struct book_ref conn;
	uint32_t h;
	struct book *b = handler_book_lock();
	book_job_set_progress(b, want, fraction); /* /status?detail=1, the console */
	enum book_rc rc = book_job_owner(b, want, &conn, &h);
	handler_book_unlock();
	if (rc != BOOK_OK || h != (uint32_t)handler.slot)
		return;
	struct broker_conn *c = lookup(conn);
	if (!c || !ws_session_is_open(c->ws) || c->protocol < PROTO_VERSION_PROGRESS)
		return;
	send_text(c, msg_encode_progress(job_id, fraction, text));
}

void broker_drain_check(void)
{
	if (!handler.draining || job_running_count() > 0)
		return;
	/* DONEs of the last jobs may still sit in our mailbox: out first */
	mailbox_on_wake(-1, 0, NULL);
	for (struct broker_conn *c = conns, *next; c; c = next) {
		next = c->next;
		ws_close(c->ws, PROTO_CLOSE_GOING_AWAY, "execserver stopping");
	}
	handler_maybe_exit();
}
