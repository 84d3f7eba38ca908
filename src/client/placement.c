/*
 * placement.c - where a job's wants are parked and what the retry tick
 * decides: a want goes to every ready connection whose instance lists the
 * service (and whose address serves it); connections that come up get
 * the waiting jobs, and running jobs of their instance back (resume);
 * connections that go away take their copies with them and leave their
 * running jobs seeking.  The tick re-parks refused wants, marks
 * back-pressure for the pools, and gives the verdicts no_slot (timer),
 * lost, unknown_service, unauthorized and tls_verify.  A job resumed on a
 * new connection is asked about (QUERY) or cancelled there; a cancel that
 * could not reach its instance in time is owed to it (sent when a
 * connection reaches it, for a day).
 */
#include "autoconfig.h"
#include "client/fallback.h"
#include "client/job_impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

/* ---- placement ------------------------------------------------------------- */

void job_place_on(struct exc_job *j, struct exc_conn *k)
{
	if (j->state != J_WAITING || j->cancel_requested || j->local_code[0])
		return;
	if (!pool_serves(k->a, j->service) || !conn_has_service(k, j->service) ||
	    job_find_copy(j, k))
		return;
	if (conn_send(k, wire_want(j->id, j->service, j->priority)) == 0 && job_add_copy(j, k) == 0)
		j->since_ms = client_now_ms();
}

void job_place(struct exc_job *j)
{
	exc_client *c = j->c;

	for (unsigned i = 0; i < c->naddrs; i++)
		for (struct exc_conn *k = c->addrs[i]->conns; k; k = k->next)
			job_place_on(j, k);
	legacy_job_wait(j);
}

/* The running job j reports to k now, another connection than the one
 * its JOB went on: a CANCEL the caller asked for goes out; otherwise a
 * QUERY asks whether the instance still knows the job (POSITION running,
 * or finished in protocol 2: its DONE will come, and the POSITION is not
 * passed on; unknown_job: its receipt is gone, job_outcome_unknown).  In
 * protocol 1 a finished job whose DONE is still to come answers
 * unknown_job too: a DONE for this connection was queued when it opened,
 * before its HELLO, so it arrives before that answer; one for another
 * connection of ours went into a connection we gave up for dead, so lost
 * is the truth for us. */
static void job_resume_on(struct exc_job *j, struct exc_conn *k)
{
	j->owner = k;
	j->owner_addr = k->a;
	j->resumed = 1;
	if (j->cancel_requested) {
		conn_send(k, wire_job_msg(PROTO_CANCEL, j->id));
	} else if (conn_send(k, wire_job_msg(PROTO_QUERY, j->id)) == 0) {
		j->resume_queries++;
	}
}

void job_on_ready(exc_client *c, struct exc_conn *k)
{
	for (struct exc_job *j = c->jobs; j; j = j->next) {
		struct copy *cp = job_find_copy(j, k);

		if (j->state == J_WAITING && k->draining && cp) {
			/* protocol 6: move wants away from a draining instance */
			if (cp->state == CP_PARKED)
				conn_send(k, wire_job_msg(PROTO_UNWANT, j->id));
			job_drop_copy(j, cp);
		}
		if (j->state == J_WAITING)
			job_place_on(j, k);
		else if (j->state == J_SEEKING && strcmp(j->owner_instance, k->instance_id) == 0) {
			/* the server made this connection the owner (same client id) */
			j->state = J_RUNNING;
			client_log(c, EXC_LOG_INFO, "job %s: instance %s reached again", j->id,
				   k->instance_id);
			job_resume_on(j, k);
		}
	}
	for (struct owed_cancel **pp = &c->owed; *pp;) {
		struct owed_cancel *oc = *pp;

		if (strcmp(oc->instance_id, k->instance_id) != 0) {
			pp = &oc->next;
			continue;
		}
		client_log(c, EXC_LOG_INFO, "job %s: instance %s reached: CANCEL sent now",
			   oc->job_id, k->instance_id);
		conn_send(k, wire_job_msg(PROTO_CANCEL, oc->job_id));
		*pp = oc->next;
		free(oc);
	}
}

void owed_cancels_free(exc_client *c)
{
	while (c->owed) {
		struct owed_cancel *oc = c->owed;

		c->owed = oc->next;
		free(oc);
	}
}

/* Remembers that j's cancel is still to be sent to its instance. */
static void owe_cancel(struct exc_job *j)
{
	struct owed_cancel *oc = calloc(1, sizeof *oc);

	if (oc == NULL)
		return;
	snprintf(oc->instance_id, sizeof oc->instance_id, "%s", j->owner_instance);
	snprintf(oc->job_id, sizeof oc->job_id, "%s", j->id);
	oc->until_ms = client_now_ms() + 86400 * 1000ull;
	oc->next = j->c->owed;
	j->c->owed = oc;
}

/* Another ready connection to instance id, or NULL. */
static struct exc_conn *conn_to(exc_client *c, const char *id, const struct exc_conn *except)
{
	for (unsigned i = 0; i < c->naddrs; i++)
		for (struct exc_conn *k = c->addrs[i]->conns; k; k = k->next)
			if (k != except && k->state == K_READY && strcmp(k->instance_id, id) == 0)
				return k;
	return NULL;
}

/* How long a job whose connection k dropped is sought before it ends
 * lost: owner_grace_sec, and never less than the instance may still run
 * it (keeps_jobs_ms), so that a job ended lost has stopped there and a
 * retry cannot overlap it.  (A job whose cancel is held ends "cancel not
 * confirmed" after owner_grace_sec: it is not run again.) */
static uint64_t seek_ms(const exc_client *c, const struct exc_conn *k)
{
	uint64_t ms = c->opt.owner_grace_sec * 1000ull;

	return k->keeps_jobs_ms > ms ? k->keeps_jobs_ms : ms;
}

void job_on_conn_gone(exc_client *c, struct exc_conn *k)
{
	for (struct exc_job *j = c->jobs; j; j = j->next) {
		struct copy *cp = job_find_copy(j, k);
		struct exc_conn *other;

		if (cp)
			job_drop_copy(j, cp);
		if (j->owner != k)
			continue;
		j->owner = NULL;
		other = conn_to(c, j->owner_instance, k);
		if (other && j->state == J_RUNNING && !c->freeing)
			job_resume_on(j, other);
		if (j->owner == NULL && j->state == J_RUNNING && !c->freeing) {
			j->state = J_SEEKING;
			j->seek_ms = seek_ms(c, k);
			j->seek_since_ms = client_now_ms();
			snprintf(j->owner_addr->seek, sizeof j->owner_addr->seek, "%s",
				 j->owner_instance);
			client_log(c, EXC_LOG_INFO,
				   "job %s: connection to its instance lost, seeking %s", j->id,
				   j->owner_instance);
		}
	}
}

/* ---- timers ----------------------------------------------------------------- */

void job_connect_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct exc_job *j = arg;
	exc_client *c = j->c;
	const char *why = "";

	if (j->state != J_WAITING)
		return;
	job_unwant_all(j);
	for (unsigned i = 0; i < c->naddrs; i++)
		if (pool_ready(c->addrs[i]) > 0 || c->addrs[i]->legacy)
			why = NULL;
	if (why && c->naddrs)
		why = " (no instance reachable)";
	job_finish_local(j, EXC_E_NO_SLOT, 1, "no slot within %u s%s", j->connect_timeout_sec,
			 why ? why : "");
}

/* Every address that serves j's service has been explored to the end
 * (reached and covered or full) and none offers it.  0 while unsure. */
static int service_unknown(const struct exc_job *j)
{
	exc_client *c = j->c;

	for (unsigned i = 0; i < c->naddrs; i++) {
		struct exc_addr *a = c->addrs[i];

		if (!pool_serves(a, j->service))
			continue;
		/* an address with no live connection right now (a cut, a
		 * restart) is not explored, whatever it was before */
		if (!a->reached || pool_connecting(a) || pool_ready(a) == 0 ||
		    !(a->covered || pool_ready(a) >= c->opt.pool_cap))
			return 0;
		for (struct exc_conn *k = a->conns; k; k = k->next)
			if (k->state == K_READY && (conn_has_service(k, j->service) || k->draining))
				return 0;
	}
	return c->naddrs > 0; /* no address at all: wait for one */
}

/* A connection whose instance has j's service but disabled it (its
 * startup check failed), with the reason in *why; NULL if none. */
static const struct exc_conn *disabled_at(const struct exc_job *j, const char **why)
{
	exc_client *c = j->c;

	for (unsigned i = 0; i < c->naddrs; i++)
		for (struct exc_conn *k = c->addrs[i]->conns; k; k = k->next)
			if ((*why = conn_disabled_why(k, j->service)) != NULL)
				return k;
	return NULL;
}

/* Every address that serves the job's service refused it the same way:
 * its last attempt got HTTP 401 (tls 0), or a certificate that did not
 * verify (tls 1), and it has no live connection. */
static int all_refused(const struct exc_job *j, int tls, const char **why)
{
	exc_client *c = j->c;
	int any = 0;

	for (unsigned i = 0; i < c->naddrs; i++) {
		struct exc_addr *a = c->addrs[i];

		if (!pool_serves(a, j->service))
			continue;
		if ((tls ? !a->tls_refused : a->last_status != 401) || pool_ready(a) > 0)
			return 0;
		if (!any)
			*why = tls ? a->tls_why : "HTTP 401";
		any = 1;
	}
	return any;
}

void job_tick(exc_client *c)
{
	uint64_t now = client_now_ms();
	const char *why = "";

	for (struct owed_cancel **pp = &c->owed; *pp;) {
		struct owed_cancel *oc = *pp;

		if (now < oc->until_ms) {
			pp = &oc->next;
			continue;
		}
		*pp = oc->next;
		free(oc);
	}

	for (unsigned i = 0; i < c->naddrs; i++)
		c->addrs[i]->seek[0] = '\0';
	for (struct exc_job *j = c->jobs; j; j = j->next) {
		if (j->local_code[0])
			continue;
		if (j->state == J_SEEKING) {
			if (j->cancel_requested &&
			    now >= j->seek_since_ms + c->opt.owner_grace_sec * 1000ull) {
				/* the instance cancels the job itself when the
				 * client's resume grace there ends; should a
				 * connection reach it before, CANCEL goes out */
				j->state = J_RUNNING;
				owe_cancel(j);
				job_finish_local(
					j, EXC_E_CANCELLED, 0,
					"cancel not confirmed: instance %s not reached again "
					"within %u s (it cancels the jobs of a client that "
					"stays away past its resumeGraceSec)",
					j->owner_instance, c->opt.owner_grace_sec);
			} else if (now >= j->seek_since_ms + j->seek_ms) {
				j->state = J_RUNNING; /* for finish: it may have run */
				job_finish_local(j, EXC_E_LOST, 1,
						 "instance %s not reached again within %llu s",
						 j->owner_instance,
						 (unsigned long long)j->seek_ms / 1000);
			} else {
				snprintf(j->owner_addr->seek, sizeof j->owner_addr->seek, "%s",
					 j->owner_instance);
			}
			continue;
		}
		if (j->state != J_WAITING)
			continue;
		for (size_t n = 0; n < j->ncopies;) {
			if (j->copies[n].state == CP_REFUSED)
				job_drop_copy(j, &j->copies[n]);
			else
				n++;
		}
		job_place(j);
		if (j->ncopies == 0 && all_refused(j, 0, &why)) {
			job_finish_local(j, EXC_E_UNAUTHORIZED, 0,
					 "every address refused the token (%s)", why);
			continue;
		}
		if (j->ncopies == 0 && all_refused(j, 1, &why)) {
			job_finish_local(j, EXC_E_TLS_VERIFY, 0, "%s", why);
			continue;
		}
		if (j->ncopies == 0 && service_unknown(j)) {
			const struct exc_conn *k = disabled_at(j, &why);
			if (k)
				job_finish_local(j, EXC_E_SERVICE_DISABLED, 0,
						 "service \"%s\" is disabled on instance %s: %s",
						 j->service, k->instance_id, why);
			else
				job_finish_local(j, EXC_E_UNKNOWN_SERVICE, 0,
						 "no reached instance offers service \"%s\"",
						 j->service);
			continue;
		}
		if (now - j->since_ms >= c->opt.retry_tick_ms) {
			for (unsigned i = 0; i < c->naddrs; i++)
				if (pool_serves(c->addrs[i], j->service))
					c->addrs[i]->pressure = 1;
			j->since_ms = now;
		}
	}
	for (unsigned i = 0; i < c->naddrs; i++)
		pool_kick(c->addrs[i]);
}
