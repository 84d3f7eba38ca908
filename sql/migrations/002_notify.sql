-- 002_notify.sql - a notification per submitting statement, for
-- dispatchers configured with notify: true (docs/dispatch.md).
--
-- The channel is "<schema>_submit"; the payload is empty.  FOR EACH
-- STATEMENT: one notification however many rows a statement inserts, and
-- PostgreSQL folds equal notifications of one transaction into one.
-- Dispatchers that poll only (the default, and always through a
-- transaction-mode pooler, which cannot LISTEN) ignore it.

CREATE FUNCTION @schema@.notify_submit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_TABLE_SCHEMA || '_submit', '');
    RETURN NULL;
END $$;

CREATE TRIGGER job_notify_submit AFTER INSERT ON @schema@.job
    FOR EACH STATEMENT EXECUTE FUNCTION @schema@.notify_submit();
