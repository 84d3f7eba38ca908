#!/bin/sh
# attempt_cost.sh - what the trigger job_attempt_record costs the finish
# statement (sql/queries/finish.sql), side by side in one run on one
# table: no trigger, the trigger that records every claim that ends
# ("every"), and the one of migration 009 that leaves done and failed to
# the row ("009").  docs/dispatch.md "Their cost", bench/notes/attempt-cost.md.
#
# A throw-away PostgreSQL cluster (initdb in a temporary directory, a
# Unix socket only, removed at the end), the migrations of sql/migrations
# applied as execdispatch does, ROWS held rows of one dispatcher.  Each
# batch finishes 100 rows with one EXECUTE of finish.sql, under psql's
# \timing (the statement and its round trip on the socket); the six
# series (3 triggers x done, failed) take turns batch by batch, each on
# rows of its own, so that the table's growth falls on all alike.
#
# Usage: bench/attempt_cost.sh [batches]   (default 150; run from the tree)
# Needs PostgreSQL's initdb/pg_ctl (PG_BINDIR, else the newest under
# /usr/lib/postgresql) and psql; as root it runs them as postgres.
set -eu

BATCHES=${1:-150}
ROWS=$((BATCHES * 600))
top=$(cd "$(dirname "$0")/.." && pwd)
bindir=${PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)}
as=""
[ "$(id -u)" = 0 ] && as="runuser -u postgres --"
dir=$(mktemp -d /tmp/attempt_cost.XXXXXX)
chmod 777 "$dir"
trap '$as "$bindir/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT

$as "$bindir/initdb" -A trust -U postgres -E UTF8 --no-sync -D "$dir/data" >"$dir/initdb.log" 2>&1
$as "$bindir/pg_ctl" -w -D "$dir/data" -l "$dir/pg.log" \
	-o "-c listen_addresses='' -k $dir -c fsync=off" start >/dev/null
export PGOPTIONS='-c client_min_messages=warning'
psql() { $as "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -U postgres -d postgres "$@"; }

psql -c "CREATE SCHEMA execdispatch"
for f in "$top"/sql/migrations/[0-9]*.sql; do
	sed 's/@schema@/execdispatch/g' "$f" | psql -1 >/dev/null
done

# The trigger that records every held row that leaves its claim, beside
# migration 009's; each series enables the one it measures.
psql <<EOF >/dev/null
CREATE FUNCTION execdispatch.attempt_every() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN
    IF NEW.attempts < OLD.attempts THEN
        RETURN NULL;
    END IF;
    INSERT INTO execdispatch.job_attempt (job, claim, attempt, runner, life, state, started,
                                          finished, error, receipt)
    VALUES (NEW.id, OLD.claims, OLD.attempts, OLD.runner_instance,
            CASE WHEN NEW.state = 'cancelled' THEN
                (SELECT started_at FROM execdispatch.dispatcher WHERE instance = OLD.runner_instance) END,
            NEW.state, NEW.started_at,
            CASE WHEN NEW.state <> 'cancelled' THEN now() END, NEW.error, NEW.receipt)
    ON CONFLICT (job, claim) DO NOTHING;
    RETURN NULL;
END \$\$;
CREATE TRIGGER attempt_every AFTER UPDATE OF state ON execdispatch.job FOR EACH ROW
    WHEN (OLD.state IN ('claimed', 'running') AND NEW.state NOT IN ('claimed', 'running'))
    EXECUTE FUNCTION execdispatch.attempt_every();
INSERT INTO execdispatch.dispatcher (instance, host, pid) VALUES ('bench', 'h', 1);
INSERT INTO execdispatch.job (service, job, state, attempts, claims, runner_instance, started_at)
SELECT 'work', '{"command": "true"}', 'running', 1, 1, 'bench', now()
FROM generate_series(1, $ROWS);
VACUUM ANALYZE execdispatch.job;
EOF

# The script: PREPARE fin AS finish.sql, then per batch the six series.
{
	printf 'PREPARE fin(text, bigint[], int[], text[], int[], int[], text[], jsonb[]) AS\n'
	grep -v '^--' "$top/sql/queries/finish.sql" | sed 's/@schema@/execdispatch/g'
	printf ';\n'
	b=0
	while [ "$b" -lt "$BATCHES" ]; do
		s=0
		for trig in none every 009; do
			for out in done failed; do
				case $trig in
				none) en="DISABLE TRIGGER attempt_every; ALTER TABLE execdispatch.job DISABLE TRIGGER job_attempt_record" ;;
				every) en="ENABLE TRIGGER attempt_every; ALTER TABLE execdispatch.job DISABLE TRIGGER job_attempt_record" ;;
				009) en="DISABLE TRIGGER attempt_every; ALTER TABLE execdispatch.job ENABLE TRIGGER job_attempt_record" ;;
				esac
				if [ "$out" = done ]; then err=NULL; else err=exit_status; fi
				first=$(((b * 6 + s) * 100 + 1))
				printf '\\timing off\nALTER TABLE execdispatch.job %s;\n' "$en"
				printf '\\echo series %s/%s\n\\timing on\n' "$trig" "$out"
				printf "EXECUTE fin('bench', '{%s}', " "$(seq -s, "$first" $((first + 99)))"
				printf "array_fill(1, ARRAY[100]), array_fill('%s'::text, ARRAY[100]), " "$out"
				printf "array_fill(0, ARRAY[100]), array_fill(0, ARRAY[100]), "
				printf "array_fill(%s::text, ARRAY[100]), " \
					"$([ "$err" = NULL ] && echo NULL || echo "'$err'")"
				printf "array_fill('{\"exit_code\": 1, \"stderr\": \"a line\"}'::jsonb, ARRAY[100]));\n"
				s=$((s + 1))
			done
		done
		b=$((b + 1))
	done
} >"$dir/run.sql"
chmod 644 "$dir/run.sql"

psql -f "$dir/run.sql" | awk '
	/^series / { s = $2; next }
	/^Time: / { t = $2 + 0; n[s]++; sum[s] += t; v[s, n[s]] = t }
	END {
		printf "%-14s %8s %10s %10s\n", "series", "batches", "mean ms", "median ms"
		split("none/done none/failed every/done every/failed 009/done 009/failed", order, " ")
		for (i = 1; i <= 6; i++) {
			k = order[i]; m = n[k]
			for (a = 1; a <= m; a++) x[a] = v[k, a]
			for (a = 2; a <= m; a++) { y = x[a]; c = a - 1
				while (c >= 1 && x[c] > y) { x[c + 1] = x[c]; c-- } x[c + 1] = y }
			med = m % 2 ? x[(m + 1) / 2] : (x[m / 2] + x[m / 2 + 1]) / 2
			printf "%-14s %8d %10.2f %10.2f\n", k, m, sum[k] / m, med
		}
	}'
psql -At -c "SELECT 'job_attempt rows: ' || count(*) FROM execdispatch.job_attempt"
