#!/bin/sh
# demo-dispatch.sh - two execdispatch daemons sharing one queue in
# PostgreSQL: builds, starts a private PostgreSQL cluster (initdb in a
# temporary directory, as the user postgres when run as root), one
# execserver on the default configuration, migrates the schema, starts
# dispatchers "a" and "b", submits 40 jobs with one SQL statement, cancels
# one, shows a position while they wait, and shows which dispatcher ran
# which jobs.  Everything it started is stopped at the end.
#
#   scripts/demo-dispatch.sh
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/setup.sh"
build="$top/build"
bindir=""
for d in /usr/lib/postgresql/*/bin; do bindir=$d; done	# the newest (glob order)

work=$(mktemp -d /tmp/execdispatch-demo.XXXXXX)
chmod 755 "$work"
as_pg=""
if [ "$(id -u)" -eq 0 ]; then
	chown postgres "$work"
	as_pg="runuser -u postgres --"
fi
pgport=$((50000 + $$ % 10000))
espid=""; apid=""; bpid=""
cleanup() {
	for p in $apid $bpid $espid; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	$as_pg "$bindir/pg_ctl" -D "$work/pg" -m immediate stop >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

echo "demo: PostgreSQL on 127.0.0.1:$pgport (a private cluster in $work/pg)"
$as_pg "$bindir/initdb" -A trust -U postgres --no-sync -D "$work/pg" >/dev/null
$as_pg "$bindir/pg_ctl" -w -D "$work/pg" -l "$work/pg.log" \
	-o "-p $pgport -k $work -c listen_addresses=127.0.0.1" start >/dev/null
db="host=127.0.0.1 port=$pgport user=postgres dbname=postgres"
export PGHOST=127.0.0.1 PGPORT=$pgport PGUSER=postgres PGDATABASE=postgres
psql="psql -X -q -v ON_ERROR_STOP=1"

# the execserver: the default configuration, a private tempDir, as this user
sed -e "s|^tempDir:.*|tempDir: $work/tmp|" -e '/^user:/d' -e '/^group:/d' \
	"$top/etc/execserver.yml" > "$work/execserver.yml"
[ "$(id -u)" -ne 0 ] || echo "allowRootJobs: true" >> "$work/execserver.yml"
addr=$(sed -n 's/^addr:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}.*/\1/p' "$work/execserver.yml")
"$build/execserver" -f -c "$work/execserver.yml" 2>"$work/execserver.log" &
espid=$!
i=0
until curl -sf "http://$addr/status" >/dev/null 2>&1; do
	i=$((i + 1)); [ $i -lt 100 ] || { echo "demo: execserver did not come up" >&2; exit 1; }
	sleep 0.1
done

cat > "$work/execdispatch.yml" <<EOT
database: "$db"
execservers: [ws://$addr]
pollMs: 200
EOT
export EXECDISPATCH_SQL_DIR="$top/sql/migrations"
echo "demo: execdispatch --migrate -c execdispatch.yml"
"$build/execdispatch" --migrate -c "$work/execdispatch.yml"
echo "demo: starting dispatchers a and b (one configuration, two instance ids)"
EXECDISPATCH_INSTANCE_ID=a "$build/execdispatch" -f -c "$work/execdispatch.yml" 2>"$work/a.log" &
apid=$!
EXECDISPATCH_INSTANCE_ID=b "$build/execdispatch" -f -c "$work/execdispatch.yml" 2>"$work/b.log" &
bpid=$!
sleep 1

echo "demo: 40 jobs of the sleep service, one SQL statement:"
echo "      SELECT execdispatch.submit('sleep', '{\"command\":\"sleep\",\"args\":[\"0.3\"]}') FROM generate_series(1, 40)"
$psql -c "SELECT execdispatch.submit('sleep', '{\"command\":\"sleep\",\"args\":[\"0.3\"]}') FROM generate_series(1, 40)" >/dev/null
last=$($psql -At -c "SELECT max(id) FROM execdispatch.job")
sleep 0.3
echo "demo: execctl position $last:  $("$build/execctl" position -c "$work/execdispatch.yml" "$last")"
echo "demo: execctl cancel $last:    $("$build/execctl" cancel -c "$work/execdispatch.yml" "$last")"
echo "demo: execctl wait $((last - 1)) (the last one left)"
"$build/execctl" wait -q -c "$work/execdispatch.yml" "$((last - 1))" || true
i=0
until [ "$($psql -At -c "SELECT count(*) FROM execdispatch.job WHERE state IN ('queued','claimed','running')")" = 0 ]; do
	i=$((i + 1)); [ $i -lt 300 ] || { echo "demo: jobs did not finish" >&2; exit 1; }
	sleep 0.1
done
echo "demo: who ran what:"
$psql -c "SELECT runner_instance AS dispatcher, state, count(*) AS jobs FROM execdispatch.job GROUP BY 1, 2 ORDER BY 1, 2"
echo "demo: stopping the dispatchers (SIGTERM: they remove their heartbeat rows)"
kill -TERM $apid $bpid
wait $apid $bpid || true
apid=""; bpid=""
$psql -c "SELECT count(*) AS dispatchers_left FROM execdispatch.dispatcher"
