-- 003_position.sql - the execserver's POSITION of a claimed job, readable
-- from any host (docs/dispatch.md, "position").
--
-- position() of a claimed row asks for it by setting position_wanted_at
-- (at most once a second); the dispatcher holding the row sees that in its
-- cancel poll, sends QUERY to the execservers and writes their answer into
-- exec_position under its claim.  Nothing is written while nobody asks.

ALTER TABLE @schema@.job
    ADD COLUMN position_wanted_at timestamptz,
    ADD COLUMN exec_position jsonb;

-- position(id): {"state", "service", "running", "ahead", "capacity",
-- "eta_ms"} (capacity and eta_ms only from an execserver).
--   queued:  ahead = the queued rows of its service before it in claim
--            order plus the claimed rows of its service (their wants are
--            parked before it); running = the running rows of its service
--   claimed: the execserver's POSITION (running, ahead, capacity, eta_ms)
--            once its dispatcher wrote it (within cancelPollMs of the
--            first ask), else ahead null
--   other states: running of its service, ahead null
-- NULL for an unknown id.
CREATE OR REPLACE FUNCTION @schema@.position(p_id bigint) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    j @schema@.job%ROWTYPE;
    running bigint;
BEGIN
    SELECT * INTO j FROM @schema@.job WHERE id = p_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT count(*) INTO running FROM @schema@.job r
    WHERE r.state = 'running' AND r.service = j.service;
    IF j.state = 'queued' THEN
        RETURN jsonb_build_object('state', j.state, 'service', j.service, 'running', running,
            'ahead', (SELECT count(*) FROM @schema@.job q
                      WHERE q.service = j.service AND
                            ((q.state = 'queued' AND (q.priority > j.priority OR
                              (q.priority = j.priority AND q.id < j.id)))
                             OR q.state = 'claimed')));
    END IF;
    IF j.state = 'claimed' THEN
        IF j.position_wanted_at IS NULL OR j.position_wanted_at < now() - interval '1 second' THEN
            UPDATE @schema@.job SET position_wanted_at = now()
            WHERE id = p_id AND state = 'claimed';
        END IF;
        IF j.exec_position IS NOT NULL THEN
            RETURN jsonb_build_object('state', j.state, 'service', j.service)
                || (j.exec_position - 'instance_id');
        END IF;
    END IF;
    RETURN jsonb_build_object('state', j.state, 'service', j.service, 'running', running,
                              'ahead', NULL);
END $$;
