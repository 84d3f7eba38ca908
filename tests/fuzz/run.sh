#!/bin/sh
# run.sh - runs fuzz targets (libFuzzer builds); the engine of `make fuzz`.
#
# Two modes:
#   FUZZ_RUNS=N (with FUZZ_SEED, default 1): each target runs exactly N
#       inputs from a fixed random seed.  The same tree gives the same
#       inputs, so the same figures and the same verdict on every run: this
#       is the mode of the test command (scripts/test.sh), which must never
#       fail because a random search happened to find something that day.
#   otherwise: each target searches for FUZZ_SECONDS (default 30) from a
#       seed libFuzzer picks: the long, random runs of docs/security.md.
#       Whatever they find goes into corpus/NAME/ with its fix, so that the
#       replay in every `make check` holds it from then on.
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
: "${FUZZ_RUNS:=}"
: "${FUZZ_SEED:=1}"
if [ -n "$FUZZ_RUNS" ]; then
	# Two things make a seeded run differ from the last one: libFuzzer
	# rereads the corpus directory every second (-reload), so what it has
	# learned depends on the clock; and address-space randomization puts
	# heap and stack elsewhere each run, and libFuzzer records the operands
	# of comparisons (pointers among them) to mutate with.  Hence -reload=0
	# and the target run under `setarch -R`.  Where setarch -R is refused
	# (a container without the personality call), the comparison operands
	# are not used at all (-use_cmp=0): with them the inputs, and so the
	# verdict, changed from run to run (3 runs of fuzz_http_head, 100,000
	# inputs from seed 1: 790, 805, 829 features; with -use_cmp=0: 815
	# each time).
	budget="-runs=$FUZZ_RUNS -seed=$FUZZ_SEED -reload=0"
	if setarch -R true 2>/dev/null; then
		fixed="setarch -R"
	else
		fixed=""
		budget="$budget -use_cmp=0"
		echo "fuzz: setarch -R is refused here: seeded runs without comparison operands (-use_cmp=0)"
	fi
	what="$FUZZ_RUNS runs from seed $FUZZ_SEED"
else
	budget="-max_total_time=$FUZZ_SECONDS"
	fixed=""
	what="${FUZZ_SECONDS} s"
fi
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
	# shellcheck disable=SC2086 # $budget is two words or one, on purpose
	set -- $budget -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$dir/artifacts/"
	[ -f "$fuzzdir/dict/$name.dict" ] && set -- "$@" -dict="$fuzzdir/dict/$name.dict"
	$fixed "$t" "$@" "$dir/corpus" > "$dir/log" 2>&1
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
		echo "fuzz: $name: ${execs} executions ($what), coverage ${cov:-?} edges, nothing found"
	fi
done
echo "fuzz: $runs targets, $total executions, $failed with findings"
[ "$failed" -eq 0 ]
