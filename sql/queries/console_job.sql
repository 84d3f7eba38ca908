-- console_job.sql - DQ_CONSOLE_JOB: the console's page of one job: the
-- whole row (every column, so one added by a later migration such as a
-- progress column shows too), with position() while it is not finished.
--
-- Parameters: $1 id.
-- Result:     one JSON object as text ({"job": row, "position": ...}), or
--             none (no such job).
-- Guard:      reads only.
-- Index:      job_pkey.
-- Sent:       the console's lane.
-- On failure: the console answers 503; no row: 404.
SELECT jsonb_build_object('job', to_jsonb(j), 'position',
    CASE WHEN j.state IN ('queued', 'claimed', 'running') THEN @schema@.position(j.id) END)::text
FROM @schema@.job j WHERE j.id = $1::bigint
