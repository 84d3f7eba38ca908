-- console_job.sql - DQ_CONSOLE_JOB: the console's page of one job: the
-- whole row (every column, so one added by a later migration such as a
-- progress column shows too), with position() while it is not finished,
-- and the job's attempts.  The attempts are asked here and nowhere else in
-- the console: attempts(id) (migration 009: the rows of job_attempt and
-- the row's own last attempt; state, runner, times, error, receipt), in
-- claim order (claims only grow, while attempt starts again at 1 after
-- retry()).
--
-- Parameters: $1 id.
-- Result:     one JSON object as text ({"job": row, "position": ...,
--             "attempts": [...]}), or none (no such job).
-- Guard:      reads only.
-- Index:      job_pkey; attempts(id) reads job_attempt_pkey (job, claim)
--             and the row itself.
-- Sent:       the console's lane.
-- On failure: the console answers 503; no row: 404.
SELECT jsonb_build_object('job', to_jsonb(j), 'position',
    CASE WHEN j.state IN ('queued', 'claimed', 'running') THEN @schema@.position(j.id) END,
    'attempts', (SELECT coalesce(jsonb_agg(to_jsonb(a) ORDER BY a.claim), '[]')
                 FROM @schema@.attempts(j.id) a))::text
FROM @schema@.job j WHERE j.id = $1::bigint
