/*
 * queries.c - see queries.h.  The statements as the database sees them;
 * docs/dispatch.md explains each against the state machine.
 */
#include "autoconfig.h"
#include "dispatch/queries.h"

#include <stdlib.h>
#include <string.h>

#define HELD "('claimed', 'running')"

/* What a rescue does to one held row of a vanished dispatcher: requeued
 * (the attempt it used stays counted), or failed when it has no attempt
 * left.  $MAX is the parameter holding maxAttempts. */
#define RESCUE_SET(MAX)                                                                  \
	"state = CASE WHEN j.attempts >= " MAX " THEN 'failed' ELSE 'queued' END, "      \
	"runner_instance = CASE WHEN j.attempts >= " MAX " THEN j.runner_instance END, " \
	"finished_at = CASE WHEN j.attempts >= " MAX " THEN now() END, "                 \
	"error = CASE WHEN j.attempts >= " MAX " THEN 'dispatcher_lost' END, "           \
	"start_after = now() "

const char DQ_SCHEMA_VERSION[] = "SELECT max(version) FROM @schema@.schema_version";

/* A takeover names instance among the columns it sets: ON CONFLICT DO
 * UPDATE then locks the row as for a key update (FOR UPDATE strength), so
 * it waits for a claim of the life before that holds the row FOR KEY
 * SHARE (OUR_ROW), and that claim, once committed, is seen by the new
 * life's DQ_FIND_OWN.  A live row is taken only by the same life (its
 * own register whose reply was lost, sent again): same started_at. */
const char DQ_REGISTER[] =
	"INSERT INTO @schema@.dispatcher (instance, host, pid, started_at) "
	"VALUES ($1, $2, $3::int, $5::timestamptz) "
	"ON CONFLICT (instance) DO UPDATE SET instance = EXCLUDED.instance, host = EXCLUDED.host, "
	"pid = EXCLUDED.pid, started_at = EXCLUDED.started_at, heartbeat_at = now() "
	"WHERE @schema@.dispatcher.heartbeat_at < now() - make_interval(secs => $4::int) "
	"OR @schema@.dispatcher.started_at = EXCLUDED.started_at "
	"RETURNING 1";

/* The beat ($3: why we claim nothing, or NULL; position() says it) touches
 * the dispatcher table alone (no trigger, no foreign
 * key reaches job from it), so no lock on job, however long an
 * application holds it, ever holds a beat back.  It changes no key
 * column: a claim's FOR KEY SHARE on the row does not hold it back
 * either. */
const char DQ_BEAT[] = "UPDATE @schema@.dispatcher SET heartbeat_at = now(), claiming_nothing = $3"
		       " WHERE instance = $1 AND started_at = $2::timestamptz RETURNING 1";

/* Our dispatcher row of this life (instance INST, started_at TOKEN),
 * locked FOR KEY SHARE: a statement that acts on the rows of "me" does
 * nothing unless it is there, and while it runs no rescue can take the
 * row (the rescue's FOR UPDATE skips it, its DELETE waits) and no other
 * life of the instance can take it over (DQ_REGISTER waits); the beat,
 * a non-key update, is not held back. */
#define OUR_ROW(INST, TOKEN)                                                                  \
	"me AS MATERIALIZED (SELECT instance FROM @schema@.dispatcher WHERE instance = " INST \
	" AND started_at = " TOKEN "::timestamptz FOR KEY SHARE)"

/* The held rows of instances that have no dispatcher row at all, as the
 * statement's snapshot sees them (id, claims): a claim takes its
 * dispatcher's row FOR KEY SHARE, so such a row was claimed by a
 * dispatcher whose row was deleted after the claim committed, by a
 * rescue whose snapshot was taken before that commit (or by a leave of
 * an older execdispatch).  Nobody would ever free it. */
#define ORPHANS                                                                          \
	"orphan AS MATERIALIZED (SELECT j.id, j.claims FROM @schema@.job j"              \
	" WHERE j.state IN " HELD " AND NOT EXISTS (SELECT 1 FROM @schema@.dispatcher d" \
	" WHERE d.instance = j.runner_instance)), "                                      \
	"ofree AS MATERIALIZED (SELECT j.id FROM @schema@.job j JOIN orphan o"           \
	" ON j.id = o.id AND j.claims = o.claims WHERE j.state IN " HELD                 \
	" FOR NO KEY UPDATE OF j SKIP LOCKED), "

/* The rescue's writes: the held rows of the silent dispatchers ready to
 * be rescued, and the orphans; all_moved: the states they got. */
#define RESCUE_SET_3 RESCUE_SET("$3::int")
#define RESCUE_MOVED                                                                  \
	"moved AS (UPDATE @schema@.job j SET " RESCUE_SET_3 " FROM ready"             \
	" WHERE j.id IN (SELECT id FROM free) AND j.runner_instance = ready.instance" \
	" RETURNING j.state), "
#define RESCUE_LONE                                                  \
	"lone AS (UPDATE @schema@.job j SET " RESCUE_SET_3           \
	" WHERE j.id IN (SELECT id FROM ofree) RETURNING j.state), " \
	"all_moved AS (SELECT state FROM moved UNION ALL SELECT state FROM lone) "

/* The rescue, a statement and transaction of its own after the beat.
 * Staleness is judged by its now(), the time its statement (and so its
 * transaction) started, never by the time it got its locks.  Two guards
 * keep a dispatcher that kept beating from being taken for silent: a
 * rescue that waited for a table lock on job (an application's LOCK
 * TABLE; taken while the statement is parsed) runs with a snapshot taken
 * after it, so it sees the beats written meanwhile, younger than its
 * now(); and the stale CTE's FOR UPDATE rechecks its condition on the
 * newest version of a dispatcher row, skipping one whose beat is under
 * way (test_dispatch_sql, "the beat passes a LOCK TABLE job", checks the
 * outcome).  A lock on the dispatcher table itself is not covered: it
 * holds every beat back (docs/dispatch.md, "Lock waits").
 * It takes no row lock it would have to wait for: the stale dispatchers'
 * rows (a live one's beat holds its row while it runs) and their held
 * jobs are locked SKIP LOCKED (the jobs FOR NO KEY UPDATE, the lock their
 * UPDATE takes: a foreign key's key-share lock does not stop it, so it is
 * not skipped), and a stale dispatcher one of whose held jobs another
 * transaction has locked (an application's open transaction after
 * cancel(), a finish racing the rescue) is left entirely, its row and
 * every job of it, for the next heartbeat: a deleted dispatcher row
 * always means every job it held was requeued.
 * Put off (the third column): the silent dispatchers seen and not
 * removed: those left for a locked job, and those whose own row the
 * stale CTE skipped under a lock weaker than a removal's (passed: it
 * takes FOR KEY SHARE SKIP LOCKED, which a claim of theirs in flight, a
 * late beat of theirs under way or an application's FOR SHARE lets
 * through, and another rescue removing them or a takeover does not: a
 * dispatcher being removed is not counted). */
const char DQ_RESCUE[] =
	"WITH " ORPHANS "stale AS MATERIALIZED ("
	" SELECT instance FROM @schema@.dispatcher"
	" WHERE heartbeat_at < now() - make_interval(secs => $2::int) AND instance <> $1"
	" FOR UPDATE SKIP LOCKED), "
	"passed AS MATERIALIZED ("
	" SELECT instance FROM @schema@.dispatcher"
	" WHERE heartbeat_at < now() - make_interval(secs => $2::int) AND instance <> $1"
	" AND instance NOT IN (SELECT instance FROM stale) FOR KEY SHARE SKIP LOCKED), "
	"held AS MATERIALIZED ("
	" SELECT id, runner_instance FROM @schema@.job"
	" WHERE runner_instance IN (SELECT instance FROM stale) AND state IN " HELD "), "
	"free AS MATERIALIZED ("
	" SELECT id FROM @schema@.job WHERE id IN (SELECT id FROM held)"
	" AND runner_instance IN (SELECT instance FROM stale) AND state IN " HELD
	" FOR NO KEY UPDATE SKIP LOCKED), "
	"ready AS MATERIALIZED ("
	" SELECT instance FROM stale s WHERE NOT EXISTS (SELECT 1 FROM held h"
	" WHERE h.runner_instance = s.instance AND h.id NOT IN (SELECT id FROM free))), "
	"gone AS ("
	" DELETE FROM @schema@.dispatcher WHERE instance IN (SELECT instance FROM ready)"
	" RETURNING instance), " RESCUE_MOVED RESCUE_LONE
	"SELECT (SELECT count(*) FROM all_moved WHERE state = 'queued'), "
	"(SELECT count(*) FROM all_moved WHERE state = 'failed'), "
	"(SELECT count(*) FROM stale) - (SELECT count(*) FROM gone)"
	" + (SELECT count(*) FROM passed)";

/* Our dispatcher row of this life is there, read and not locked: the
 * look for rows to requeue (DQ_FIND_OWN, DQ_FIND_LOST) changes nothing,
 * so a copy of it that a given-up connection's backend runs late does
 * nothing either; the requeue of what it found locks the row (OUR_ROW). */
#define OUR_ROW_THERE(INST, TOKEN)                                         \
	"EXISTS (SELECT 1 FROM @schema@.dispatcher WHERE instance = " INST \
	" AND started_at = " TOKEN "::timestamptz)"

const char DQ_FIND_OWN[] = "SELECT j.id, j.claims FROM @schema@.job j WHERE j.runner_instance = $1"
			   " AND j.state IN " HELD " AND " OUR_ROW_THERE("$1", "$2");

const char DQ_FIND_LOST[] =
	"SELECT j.id, j.claims FROM @schema@.job j WHERE j.runner_instance = $1"
	" AND j.state = 'claimed' AND NOT EXISTS (SELECT 1 FROM unnest($2::bigint[],"
	" $3::int[]) AS h(id, claims) WHERE h.id = j.id AND h.claims = j.claims)"
	" AND " OUR_ROW_THERE("$1", "$4");

/* Each row under exactly the claim found (id, claims): a claim made after
 * the look bumped claims and is not touched, however late this runs. */
const char DQ_REQUEUE_CLAIMS[] =
	"WITH " OUR_ROW("$1", "$5") " UPDATE @schema@.job j SET " RESCUE_SET(
		"$4::int") "FROM unnest($2::bigint[], $3::int[]) AS u(id, claims)"
			   " WHERE j.id = u.id AND j.claims = u.claims AND j.runner_instance = $1"
			   " AND j.state IN " HELD " AND EXISTS (SELECT 1 FROM me) RETURNING j.id";

/* The claim's two halves: the rows picked (LIMIT from the parameter
 * named), and their change to claimed by $1. */
/* The class of a claim: the services in the array LOCAL (the services
 * marked local) are claimed when IS_LOCAL is true, the others when false;
 * MINPRIO bounds the priority from below (the reserved local slots). */
#define CLAIM_PICK(LIMIT, LOCAL, IS_LOCAL, MINPRIO)                                             \
	"SELECT id FROM @schema@.job"                                                           \
	" WHERE state = 'queued' AND start_after <= now() AND EXISTS (SELECT 1 FROM me)"        \
	" AND (service = ANY(" LOCAL "::text[])) = " IS_LOCAL "::bool AND priority >= " MINPRIO \
	"::int ORDER BY priority DESC, id"                                                      \
	" LIMIT " LIMIT " FOR UPDATE SKIP LOCKED"
/* A new claim starts without the POSITION written under the one before
 * (position() answers "ahead": null until this claim's holder writes).
 * The rows by primary key from an array, not a join: the planner
 * estimates a CTE of LIMIT $n at a tenth of the table and hash-joins it
 * with a sequential scan of the whole table (done rows included) at every
 * claim. */
#define CLAIM_SET_FROM(CTE)                                                        \
	"UPDATE @schema@.job j SET state = 'claimed', runner_instance = $1, "      \
	"attempts = j.attempts + 1, claims = j.claims + 1, started_at = NULL, "    \
	"exec_position = NULL "                                                    \
	"WHERE j.id = ANY(ARRAY(SELECT id FROM " CTE ")) "                         \
	"RETURNING j.id, j.attempts, j.priority, j.service, j.job::text, j.claims" \
	", floor(extract(epoch FROM now() - j.start_after) * 1000)::bigint"        \
	" AS waited"
#define CLAIM_SET CLAIM_SET_FROM("picked")

/* Outcomes of claims of $1, from the arrays $2..$8.  A run that ended
 * before DQ_START saw it running (a short job) gets its started_at here:
 * every receipt of a run that started has duration_ms, the time from the
 * accepted JOB to its end, so the start is the finish less that.  The
 * receipt is the execserver's text: a duration_ms that is not a number
 * from 0 to DURATION_MAX_MS (a string, negative, beyond the range of an
 * interval) leaves started_at NULL rather than failing the statement,
 * which would cost the outcome its receipt (cut_outcome). */
#define DURATION_MAX_MS "1e12" /* about 31 years */
#define FINISH_SET                                                                                 \
	"UPDATE @schema@.job j SET state = u.state, "                                              \
	"runner_instance = CASE WHEN u.state = 'queued' THEN NULL ELSE j.runner_instance END, "    \
	"attempts = j.attempts - u.uncount, "                                                      \
	"start_after = CASE WHEN u.state = 'queued' "                                              \
	" THEN now() + make_interval(secs => u.delay) ELSE j.start_after END, "                    \
	"finished_at = CASE WHEN u.state = 'queued' THEN NULL ELSE now() END, "                    \
	"started_at = CASE WHEN j.started_at IS NOT NULL "                                         \
	" OR jsonb_typeof(u.receipt->'duration_ms') IS DISTINCT FROM 'number' THEN j.started_at "  \
	" WHEN (u.receipt->>'duration_ms')::numeric BETWEEN 0 AND " DURATION_MAX_MS " THEN now() " \
	" - make_interval(secs => (u.receipt->>'duration_ms')::float8 / 1000) END, "               \
	"error = u.error, receipt = u.receipt "                                                    \
	"FROM unnest($2::bigint[], $3::int[], $4::text[], $5::int[], $6::int[], $7::text[], "      \
	" $8::jsonb[]) AS u(id, claims, state, uncount, delay, error, receipt) "                   \
	"WHERE j.id = u.id AND j.runner_instance = $1 AND j.claims = u.claims "                    \
	"AND j.state IN " HELD " RETURNING j.id"

const char DQ_CLAIM[] = "WITH " OUR_ROW("$1", "$6") ", picked AS MATERIALIZED (" CLAIM_PICK(
	"$2::int", "$3", "$4", "$5") ") " CLAIM_SET;

/* The exec-bound claim, each service up to its own admission: the
 * services in the array SVC up to the matching LIM each (their claim
 * order, one index scan per service)... */
#define CLAIM_PICK_SERVICES(SVC, LIM)                                                  \
	"picked_s AS MATERIALIZED ("                                                   \
	" SELECT p.id FROM unnest(" SVC "::text[], " LIM "::int[]) AS s(service, lim)" \
	" CROSS JOIN LATERAL (SELECT id FROM @schema@.job"                             \
	"  WHERE state = 'queued' AND start_after <= now() AND service = s.service"    \
	"  AND EXISTS (SELECT 1 FROM me)"                                              \
	"  ORDER BY priority DESC, id LIMIT s.lim FOR UPDATE SKIP LOCKED) p) "
/* ...and the rows of every other service that is not local (OTHER at
 * most): a service not seen yet, or one no execserver runs, whose rows end
 * unknown_service.  Two CTEs, since FOR UPDATE does not go with UNION. */
#define CLAIM_PICK_EXEC(SVC, LIM, OTHER, LOCAL)                                        \
	CLAIM_PICK_SERVICES(SVC, LIM)                                                  \
	", picked_o AS MATERIALIZED ("                                                 \
	" SELECT id FROM @schema@.job WHERE state = 'queued' AND start_after <= now()" \
	" AND EXISTS (SELECT 1 FROM me) AND service <> ALL(" SVC                       \
	"::text[]) AND NOT service = ANY(" LOCAL "::text[])"                           \
	" ORDER BY priority DESC, id LIMIT " OTHER "::int FOR UPDATE SKIP LOCKED), "   \
	"picked AS (SELECT id FROM picked_s UNION ALL SELECT id FROM picked_o) "

const char DQ_CLAIM_EXEC[] = "WITH " OUR_ROW("$1", "$6") ", " CLAIM_PICK_EXEC("$2", "$3", "$4",
									      "$5") CLAIM_SET;

/* A row another transaction has locked is skipped, not waited for, and
 * answered as still claimed (0), so that its start is tried again (FOR NO
 * KEY UPDATE, the UPDATE's own lock: a key-share lock is not skipped). */
const char DQ_START[] =
	"WITH u AS (SELECT * FROM unnest($2::bigint[], $3::int[]) AS u(id, claims)), "
	"mine AS (SELECT j.id FROM @schema@.job j JOIN u ON j.id = u.id AND j.claims = u.claims "
	" WHERE j.runner_instance = $1 AND j.state = 'claimed'), "
	"free AS MATERIALIZED (SELECT j.id FROM @schema@.job j JOIN u ON j.id = u.id "
	" AND j.claims = u.claims WHERE j.runner_instance = $1 AND j.state = 'claimed' "
	" FOR NO KEY UPDATE OF j SKIP LOCKED), "
	"run AS (UPDATE @schema@.job j SET state = 'running', started_at = now() "
	" WHERE j.id IN (SELECT id FROM free) RETURNING j.id) "
	"SELECT id, 1 FROM run "
	"UNION ALL SELECT id, 0 FROM mine WHERE id NOT IN (SELECT id FROM free)";

const char DQ_FINISH[] = FINISH_SET;

/* Both in one round trip (the known services only: the hot path after
 * outcomes).  The rows being finished are held (not queued) in the
 * statement's snapshot, so the claim never picks one of them. */
const char DQ_FINISH_CLAIM[] =
	"WITH fin AS (" FINISH_SET "), " OUR_ROW("$1", "$11") ", " CLAIM_PICK_SERVICES(
		"$9",
		"$10") ", claimed AS (" CLAIM_SET_FROM("picked_s") ") "
								   "SELECT 'c', id, attempts, "
								   "priority, service, job, "
								   "claims, "
								   "waited FROM claimed "
								   "UNION ALL SELECT 'f', id, "
								   "NULL, NULL, NULL, NULL, NULL, "
								   "NULL "
								   "FROM fin";

const char DQ_LANDED[] =
	"SELECT 1 FROM @schema@.job WHERE id = $1::bigint AND claims = $2::int AND state = $3 "
	"AND error IS NOT DISTINCT FROM $4 AND receipt IS NOT DISTINCT FROM $5::jsonb "
	"AND (runner_instance = $6 OR (state = 'queued' AND runner_instance IS NULL))";

const char DQ_HELD[] =
	"SELECT id, claims, (runner_instance = $1 AND state IN " HELD ")::int, "
	"CASE WHEN state = 'cancelled' THEN "
	" floor(extract(epoch FROM clock_timestamp() - finished_at) * 1000)::bigint END, "
	"(position_wanted_at > now() - interval '5 seconds')::int "
	"FROM @schema@.job WHERE id = ANY($2::bigint[])";

/* A row another transaction has locked is skipped, not waited for:
 * (written 0, ours 1) says to write it again later. */
const char DQ_POSITION[] =
	"WITH mine AS (SELECT id FROM @schema@.job WHERE id = $1::bigint AND runner_instance = $2 "
	" AND claims = $3::int AND state = 'claimed'), "
	"free AS MATERIALIZED (SELECT id FROM @schema@.job WHERE id = $1::bigint "
	" AND runner_instance = $2 AND claims = $3::int AND state = 'claimed' "
	" FOR NO KEY UPDATE SKIP LOCKED), "
	"pos AS (UPDATE @schema@.job SET exec_position = $4::jsonb "
	" WHERE id IN (SELECT id FROM free) RETURNING 1) "
	"SELECT (SELECT count(*) FROM pos), (SELECT count(*) FROM mine)";

/* Our row deleted and, in the same statement, the rows still held under
 * our instance requeued (the leaving dispatcher holds none it knows of:
 * these are claims whose result a lost connection took), so that a
 * deleted dispatcher row still means every job it held was requeued. */
const char DQ_LEAVE[] = "WITH gone AS (DELETE FROM @schema@.dispatcher WHERE instance = $1"
			" AND started_at = $2::timestamptz RETURNING instance) "
			"UPDATE @schema@.job j SET " RESCUE_SET_3 "FROM gone"
			" WHERE j.runner_instance = gone.instance AND j.state IN " HELD
			" RETURNING j.id";

const char DQ_JANITOR[] =
	"DELETE FROM @schema@.job WHERE id IN ("
	" SELECT id FROM @schema@.job WHERE state IN ('done', 'failed', 'cancelled')"
	" AND finished_at < now() - make_interval(days => $1::int) LIMIT 1000"
	" FOR UPDATE SKIP LOCKED)";

char *dq_expand(const char *text, const char *schema)
{
	static const char mark[] = "@schema@";
	size_t n = 0, slen = strlen(schema) + 2;
	const char *p;
	char *out, *o;

	for (p = text; (p = strstr(p, mark)); p += sizeof mark - 1)
		n++;
	out = malloc(strlen(text) + n * slen + 1);
	if (!out)
		return NULL;
	o = out;
	for (p = text;;) {
		const char *m = strstr(p, mark);
		size_t len = m ? (size_t)(m - p) : strlen(p);
		memcpy(o, p, len);
		o += len;
		if (!m)
			break;
		*o++ = '"';
		memcpy(o, schema, slen - 2);
		o += slen - 2;
		*o++ = '"';
		p = m + sizeof mark - 1;
	}
	*o = '\0';
	return out;
}

/* The queue's figures for /metrics: the rows not finished per service and
 * state, and for the queued ones how long the one due longest has waited
 * (ms on the database's clock; 0 while none is due), ordered by service.
 * Each half reads the rows of a partial index (queued: job_claim or
 * job_claim_service; held: job_holder), never the finished rows. */
const char DQ_QUEUE_STATS[] =
	"SELECT service, 'queued', count(*), "
	"greatest(0, floor(extract(epoch FROM now() - min(start_after)) * 1000))::bigint "
	"FROM @schema@.job WHERE state = 'queued' GROUP BY service "
	"UNION ALL SELECT service, state, count(*), 0 FROM @schema@.job "
	"WHERE state IN ('claimed', 'running') GROUP BY service, state ORDER BY 1";

/* DQ_START that may be sent again: a row of the same claim (id, claims)
 * already running under our instance is answered as started (1), so that
 * a START whose commit went through while the lost connection took its
 * reply counts its runs started the next time, never as claims lost.  A
 * row claimed that another transaction has locked is skipped, not waited
 * for, and answered as still claimed (0). */
const char DQ_START_ONCE[] =
	"WITH u AS (SELECT * FROM unnest($2::bigint[], $3::int[]) AS u(id, claims)), "
	"mine AS (SELECT j.id, j.state FROM @schema@.job j JOIN u ON j.id = u.id "
	" AND j.claims = u.claims WHERE j.runner_instance = $1 "
	" AND j.state IN ('claimed', 'running')), "
	"free AS MATERIALIZED (SELECT j.id FROM @schema@.job j JOIN u ON j.id = u.id "
	" AND j.claims = u.claims WHERE j.runner_instance = $1 AND j.state = 'claimed' "
	" FOR NO KEY UPDATE OF j SKIP LOCKED), "
	"run AS (UPDATE @schema@.job j SET state = 'running', started_at = now() "
	" WHERE j.id IN (SELECT id FROM free) RETURNING j.id) "
	"SELECT id, 1 FROM run "
	"UNION ALL SELECT id, 1 FROM mine WHERE state = 'running' "
	"UNION ALL SELECT id, 0 FROM mine WHERE state = 'claimed' "
	" AND id NOT IN (SELECT id FROM free)";

/* Whether every statement of ours that locked our dispatcher row of this
 * life has ended: a claim holds the row FOR KEY SHARE (OUR_ROW) until it
 * commits or ends, which FOR UPDATE conflicts with, so a claim whose
 * connection was lost while its backend goes on keeps this from answering
 * its row (so does our heartbeat's update for a moment: asked again).
 * Asked before the sweep of lost claims, with no claim of ours on the
 * wire, to know whether the sweep that follows sees every claim lost. */
const char DQ_CLAIMS_SETTLED[] = "SELECT 1 FROM @schema@.dispatcher WHERE instance = $1 "
				 "AND started_at = $2::timestamptz FOR UPDATE SKIP LOCKED";
