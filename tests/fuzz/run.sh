#!/bin/sh
# run.sh - runs fuzz targets (libFuzzer builds) for FUZZ_SECONDS each; the
# engine of `make fuzz`.
#
# Usage: run.sh FUZZDIR WORKDIR TARGET...
#   FUZZDIR  tests/fuzz of the source tree (corpus/NAME/, dict/NAME.dict)
#   WORKDIR  where each run happens (WORKDIR/NAME/): a copy of the seed
#            corpus that libFuzzer grows, its log, and the artifacts of any
#            finding (crash-*, leak-*, timeout-*, oom-*); the source tree is
#            never written
#   TARGET   a fuzz_NAME program
# Prints one line per target (executions, coverage, verdict) and a summary
# line; exits 1 if any target found a crash, leak, timeout or out-of-memory,
# or did not run.
set -u

: "${FUZZ_SECONDS:=30}"
fuzzdir=$1
work=$2
shift 2

failed=0
total=0
runs=0
for t in "$@"; do
	name=$(basename "$t")
	name=${name#fuzz_}
	dir="$work/$name"
	rm -rf "$dir"
	mkdir -p "$dir/corpus" "$dir/artifacts"
	cp "$fuzzdir/corpus/$name"/* "$dir/corpus/"
	set -- -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$dir/artifacts/"
	[ -f "$fuzzdir/dict/$name.dict" ] && set -- "$@" -dict="$fuzzdir/dict/$name.dict"
	"$t" "$@" "$dir/corpus" > "$dir/log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -n 1)
	cov=$(sed -n 's/^#[0-9]*[	 ]*DONE *cov: *\([0-9]*\).*/\1/p' "$dir/log" | tail -n 1)
	found=$(ls "$dir/artifacts" | wc -l)
	runs=$((runs + 1))
	total=$((total + ${execs:-0}))
	if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ] || [ -z "$execs" ]; then
		failed=$((failed + 1))
		echo "fuzz: $name: FAILED (exit $rc, $found artifacts in $dir/artifacts); log: $dir/log"
		grep -E "ERROR: |SUMMARY: |fuzz check failed" "$dir/log" | head -n 5
	else
		echo "fuzz: $name: ${execs} executions in ${FUZZ_SECONDS} s, coverage ${cov:-?} edges, nothing found"
	fi
done
echo "fuzz: $runs targets, $total executions, $failed with findings"
[ "$failed" -eq 0 ]
