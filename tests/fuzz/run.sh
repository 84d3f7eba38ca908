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
# Why a seeded run repeats (docs/security.md, "The test command's pass"):
# libFuzzer mutates with the operands of the comparisons the target made,
# and some of those are addresses (heap, stack, globals).  So the run must
# see the same addresses every time, and nothing but the seed may steer it:
#   - no address-space randomization (setarch -R; where that is refused,
#     no comparison operands at all, -use_cmp=0);
#   - the same process image: the target starts in WORKDIR/NAME with a
#     fixed environment, fixed relative arguments (itself through a link,
#     the seeds as a sorted -seed_inputs list, so not in the file system's
#     directory order), descriptors 3-9 closed (make's jobserver pipes:
#     the target's sockets get the same numbers) and an 8 MiB stack limit
#     (it places the mmap area); the caller's environment would otherwise
#     shift the stack;
#   - one thread: libFuzzer's memory-limit thread allocates when it starts,
#     at a moment the scheduler picks, which moves later heap addresses
#     and can count as a leak to re-check (one more execution).  The limit
#     is ASan's instead (hard_rss_limit_mb, a thread of its own allocator),
#     plus -malloc_limit_mb for single allocations;
#   - nothing on the clock: no corpus reload (-reload=0), no allocator purge
#     once a second (-purge_allocator_interval=-1), no slow-unit reports.
# The only clocks left are the hang detectors (-timeout=10 per input, and
# the 5 s deadline of fuzz_ws_frames), which no input comes near.  One
# source is not found: fuzz_ws_frames (a socket pair through libevent)
# still saw different comparison operands in some seeded runs (5 passes of
# 12 took another path), with the same inputs and coverage before; its
# seeded runs go without comparison operands (-use_cmp=0) and repeat.
#
# Usage: run.sh FUZZDIR WORKDIR TARGET...
#   FUZZDIR  tests/fuzz of the source tree (corpus/NAME/, dict/NAME.dict)
#   WORKDIR  where each run happens (WORKDIR/NAME/): a copy of the seed
#            corpus, the corpus libFuzzer grows, its log, and the artifacts
#            of any finding (crash-*, leak-*, timeout-*, oom-*); the source
#            tree is never written
#   TARGET   a fuzz_NAME program
# Prints one line per target (executions, coverage, verdict) and a summary
# line; exits 1 if any target found a crash, leak, timeout or out-of-memory,
# or did not run.
set -u

: "${FUZZ_SECONDS:=30}"
: "${FUZZ_RUNS:=}"
: "${FUZZ_SEED:=1}"
if [ -n "$FUZZ_RUNS" ]; then
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
	mkdir "$dir/seeds"
	cp "$fuzzdir/corpus/$name"/* "$dir/seeds/"
	seeds=$(cd "$dir" && printf '%s\n' seeds/* | LC_ALL=C sort | paste -s -d, -)
	ln -s "$(cd "$(dirname "$t")" && pwd)/$(basename "$t")" "$dir/fuzz_$name"
	# shellcheck disable=SC2086 # $budget is two words or one, on purpose
	set -- $budget -timeout=10 -rss_limit_mb=0 -malloc_limit_mb=2048 \
		-purge_allocator_interval=-1 -report_slow_units=1000000 \
		-print_final_stats=1 -artifact_prefix=artifacts/ -seed_inputs="$seeds"
	# fuzz_ws_frames runs a socket pair through libevent: some of its
	# comparison operands (event-loop heap addresses) still differ from run
	# to run, so its seeded runs go without them (docs/security.md)
	[ -n "$FUZZ_RUNS" ] && [ "$name" = ws_frames ] && set -- "$@" -use_cmp=0
	if [ -f "$fuzzdir/dict/$name.dict" ]; then
		cp "$fuzzdir/dict/$name.dict" "$dir/dict"
		set -- "$@" -dict=dict
	fi
	(
		cd "$dir" || exit 1
		# shellcheck disable=SC3045 # dash and bash have ulimit -s
		ulimit -s 8192
		# shellcheck disable=SC2086 # $fixed is two words or none
		exec env -i PATH=/usr/bin:/bin ASAN_OPTIONS=hard_rss_limit_mb=2048 \
			$fixed "./fuzz_$name" "$@" corpus < /dev/null > log 2>&1 \
			3<&- 4<&- 5<&- 6<&- 7<&- 8<&- 9<&-
	)
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
