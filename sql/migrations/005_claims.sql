-- 005_claims.sql - a claim's identity that never repeats
-- (docs/dispatch.md, "States and guards").
--
-- claims counts the claims of a row; every claim adds one and nothing
-- takes one away, so (id, claims) names one claim for good.  attempts
-- cannot: a "no slot" requeue gives its attempt back, and the same
-- dispatcher's next claim of the row then has the same (runner_instance,
-- attempts) as the claim before it, which a second writing of the lost
-- requeue would have matched (and requeued the new claim while it ran).
-- Every guarded statement carries claims instead of attempts.
--
-- Idempotent, and an upgrade with rows in flight: the column comes with
-- its default (no table rewrite); the rows not finished start at their
-- attempts (claims >= attempts holds for them), finished rows keep 0.  A
-- row held while this runs is rescued as before (by runner_instance); a
-- dispatcher of this version writes it only under a claim it made itself.

ALTER TABLE @schema@.job ADD COLUMN IF NOT EXISTS claims integer NOT NULL DEFAULT 0;

UPDATE @schema@.job SET claims = attempts
WHERE state IN ('queued', 'claimed', 'running') AND claims < attempts;
