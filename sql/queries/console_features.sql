-- console_features.sql - DQ_CONSOLE_FEATURES: which optional parts of
-- the SQL API this database has (added by later migrations): the table
-- job_attempt (and the name of its column naming the job), and the
-- functions retry(bigint), pause(text), resume(text).  The console shows
-- a part, or a button, only where it exists.
--
-- Parameters: none.
-- Result:     one row: (attempts column name or NULL, retry, pause, resume
--             as booleans).
-- Guard:      reads only the catalogs.
-- Index:      the catalogs'.
-- Sent:       the console's lane, when a page of the console asks.
-- On failure: the console answers 503.
SELECT (SELECT a.attname::text FROM pg_attribute a
        WHERE a.attrelid = to_regclass('@schema@.job_attempt') AND a.attname IN ('job_id', 'job')
            AND NOT a.attisdropped
        ORDER BY a.attname DESC LIMIT 1),
    to_regprocedure('@schema@.retry(bigint)') IS NOT NULL,
    to_regprocedure('@schema@.pause(text)') IS NOT NULL,
    to_regprocedure('@schema@.resume(text)') IS NOT NULL
