#!/bin/sh
# run.sh - the driver of `make bench`: records the machine and its load,
# runs every measurement of bench/esbench in one run, draws the plots
# (gnuplot) into docs/bench/ and writes docs/benchmarks.md from the
# fragments esbench wrote, followed by the index of bench/notes/ (the reading of the
# figures).  BENCH_BUILD: the build directory; BENCH_SRC: the source tree.
# BENCH_QUICK=1: a short run to try it out (writes to the build directory
# only, never to docs/).
set -eu

src=${BENCH_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
build=${BENCH_BUILD:-$(pwd)}
out="$build/bench-out"
export EXECSERVER_BIN="${EXECSERVER_BIN:-$build/execserver}" TOP_SRCDIR="$src"
export EXECSERVER_LOCKSTAT_BIN="${EXECSERVER_LOCKSTAT_BIN:-$build/bench/execserver-lockstat}"
if [ "${BENCH_QUICK:-0}" = 1 ]; then
	docs="$out/docs"; quick=-q
else
	docs="$src/docs"; quick=
fi
rm -rf "$out"
mkdir -p "$out" "$docs/bench"

# the load of the machine, every 5 s while the benchmark runs
cpu_busy() { awk '/^cpu /{print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat; }
(while :; do cut -d' ' -f1-3 /proc/loadavg >>"$out/loadavg.log"; sleep 5; done) &
sampler=$!
trap 'kill $sampler 2>/dev/null || true' EXIT INT TERM
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
busy0=$(cpu_busy)
start=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
t0=$(date +%s)

# perf (where supported) looks at the handlers during the grant-rate row
perf_env=
if command -v perf >/dev/null 2>&1 && perf stat -e task-clock true >/dev/null 2>&1; then
	perf_env="BENCH_PERF=1"
fi
env $perf_env "$build/bench/esbench" $quick -o "$out" -p "$build/bench/peers" 2>&1 | tee "$out/esbench.log"
# execdispatch's row: a private PostgreSQL, an execserver, the dispatcher
EXECDISPATCH_BIN="${EXECDISPATCH_BIN:-$build/execdispatch}" \
	"$build/bench/dispatchbench" $quick -o "$out" 2>&1 | tee "$out/dispatchbench.log"
# the execdispatch console's pages at a million rows (issue 31)
EXECDISPATCH_BIN="${EXECDISPATCH_BIN:-$build/execdispatch}" EXECDISPATCH_SQL_DIR="$src/sql/migrations" \
	python3 "$src/bench/consolebench.py" $quick -o "$out" 2>&1 | tee "$out/consolebench.log"

t1=$(date +%s)
busy1=$(cpu_busy)
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
kill $sampler 2>/dev/null || true
busy_pct=$(echo "$busy0 $busy1" | awk '{printf "%.0f", 100*($3-$1)/($4-$2)}')
load_range=$(awk '{if(min==""||$1<min)min=$1; if($1>max)max=$1} END{print min" – "max}' "$out/loadavg.log")

if [ -f "$out/perf.data" ]; then
	perf report -i "$out/perf.data" --stdio --no-children --sort sym 2>/dev/null |
		grep -E '^ +[0-9.]+%' | head -15 >"$out/perf-top.txt" || true
fi

gnuplot -e "data='$out'; out='$docs/bench'" "$src/bench/plots.gp"

model=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
cpus=$(nproc)
tpc=$(lscpu | sed -n 's/^Thread(s) per core: *//p')
kernel=$(uname -r)
debian=$(cat /etc/debian_version 2>/dev/null || echo '?')
gearmand_v="gearman-job-server $(dpkg-query -W -f='${Version}' gearman-job-server 2>/dev/null)"
mem=$(free -g | awk '/^Mem:/{print $2" GiB"}')
rev=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo '?')

{
cat <<EOT
# Benchmarks

Written by \`make bench\` (bench/run.sh) on $start, in $((t1 - t0)) s, at
commit $rev.  Every figure below comes from that one run; each comparison
was measured side by side in it, on the same machine, against execserver
daemons started by the benchmark itself (tests/lib/harness.c: a private
directory, a free loopback port, \`logLevel: warn\`, handlers = CPUs unless
a row says otherwise).

## The machine

| | |
|---|---|
| CPU | $model, $cpus CPUs ($tpc thread(s) per core) |
| memory | $mem |
| kernel | $kernel |
| Debian | $debian |
| gearmand | $gearmand_v |

**Noise.**  The machine is shared: other builds and test suites ran on
it during the benchmark.  Load average before: $load_before; after:
$load_after; sampled every 5 s during the run: $load_range.  All CPUs were
$busy_pct % busy over the run (from /proc/stat, everything on the machine,
the benchmark included).  The load generator is one thread on the same 2
CPUs as the daemon it measures, so every rate is a lower bound for the
daemon alone.  Nothing was pinned: with 2 CPUs, the daemon (master,
handlers and jobs) and the client need both; pinning the client to one CPU
leaves the daemon one CPU for everything and measured lower figures.
$(cat "$out/wake.md").  Which CPU the scheduler picks for each process
therefore moves latencies between two levels from one run to the next
(row 1 measures both ways; row 5 pins its processes to one CPU).

## How to run it

    scripts/setup.sh                 # packages (gearman, gnuplot-nox ...) and the build
    cd build && make bench           # about 10 minutes; rewrites this file and docs/bench/*.png

\`make bench\` builds \`bench/esbench\` (the load generator: C, one thread,
epoll, the lean websocket client of tests/lib), \`bench/peers/gm_worker\`,
\`gm_client\`, \`stamp\` and \`floor\` (row 3's minimal broker), then
runs \`bench/run.sh\`, which runs
\`bench/esbench -o bench-out -p bench/peers\` (all rows; \`esbench ROW...\`
runs some: wake handover idle throughput gearman grant book stream fair auto; \`-q\`
makes a short run; \`-k 1,4\` picks the slot counts of rows 3 and 7; \`-H 4\` gives
the daemon of rows 3 and 7 four handlers instead of one per CPU) and
writes this file.

## Summary

| # | measurement | target | result |
|---|---|---|---|
EOT
for n in 1 2 2b 3 3b 4 4b 5a 5b 6 7 8 9 dispatch; do cat "$out/summary-$n.md" 2>/dev/null || true; done
cat <<EOT

## 1. Hand-over latency

![hand-over latency](bench/handover.png)

$(cat "$out/row1.md")

## 2. Idle cost

$(cat "$out/row2.md")

$(cat "$out/row2b.md")

## 3. Throughput of /bin/true jobs against the host's limit

![throughput](bench/throughput.png)

$(cat "$out/row3.md")

**The floor.**  Beside each broker window the same 2K connections drive
bench/peers/floor.c, a minimal broker of the same shape (raw epoll,
4-byte messages, one process; per job a JOB read, vfork + execve of
/bin/true with stdout and stderr pipes read to EOF, SIGCHLD through a
signalfd, \`waitpid\`, DONE to one connection and OFFER to the next
parked want): no websocket, no JSON, no book, no job directory, no
receipt.  Its CPU per job is counted as the execserver's (utime + stime
from /proc, the jobs not included); the gap between the two is the
broker's own cost, and the floor against 100 µs says what a process per
job and loopback TCP leave on this machine.

$(cat "$out/row3b.md")

## 4. Grant rate without processes

$(cat "$out/row4.md")

EOT
if [ -s "$out/perf-top.txt" ]; then
	echo "Where the handlers spend their time at this rate (perf record -g on both handlers, 2 s, self time):"
	echo
	echo '```'
	cat "$out/perf-top.txt"
	echo '```'
	echo
fi
cat <<EOT
## 5. Memory, and grant cost against the size of the book

$(cat "$out/row5a.md")

![cost against book size](bench/book_size.png)

$(cat "$out/row5b.md")

## 6. Streaming through a job's pipes

$(cat "$out/row6.md")

## 7. A peer: gearmand

$(cat "$out/row7.md")

## 8. Fairness

$(cat "$out/row8.md")

## Auto-balance: light jobs during a flood of heavy ones (issue 9)

![auto-balance](bench/autobalance.png)

$(cat "$out/row9.md")

## execdispatch: a job queue in PostgreSQL (issue 15)

$(cat "$out/row-dispatch.md")

## execdispatch's console: pages at a million rows (issue 31)

$(cat "$out/row-console.md")

EOT
# the notes' index (bench/notes/README.md), its links made relative to docs/
printf '\n'
sed -e 's/^## /### /' -e '1s/^# .*/## Reading the figures/' \
    -e 's#](\([a-z0-9-]*\.md\))#](../bench/notes/\1)#g' "$src/bench/notes/README.md"
} >"$docs/benchmarks.md.tmp"
mv "$docs/benchmarks.md.tmp" "$docs/benchmarks.md"
echo "bench: wrote $docs/benchmarks.md and $docs/bench/*.png"
