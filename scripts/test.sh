#!/bin/sh
# test.sh - the whole test suite, from a fresh Debian 12 machine:
# installs what is missing, builds, and runs
#   1. `make check` (unit tests, integration tests against real daemons)
#      and `make distcheck` (the tarball's build, with the tests that read
#      the source tree);
#   2. the whole of `make check` again in a build with AddressSanitizer and
#      UndefinedBehaviorSanitizer (any report, from any process, fails);
#   3. the unit suites, and the fuzz targets over their seed corpora, under
#      valgrind memcheck (errors or leaks fail);
#   4. each libFuzzer target for a fixed 200,000 inputs from seed 1 in a
#      clang build (build-fuzz): the same inputs on every run, never a
#      random search (docs/security.md); any crash, leak, timeout or
#      sanitizer report fails;
#   5. the Debian packages (scripts/test-debs.sh, root only).
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/setup.sh"
cd "$top/build"

# The CUnit run summaries of every test program, added up into one line,
# with the tests that programs left out (the test bed when not root: "prog:
# N tests left out: why").
summary() {
	awk '$1 == "tests" && NF == 6 { passed += $4; failed += $5 }
	     $3 == "tests" && $4 == "left" && $5 == "out:" { skipped += $2 }
	     END { printf "%d passed, %d failed, %d skipped\n", passed, failed, skipped }' tests/*/*.log
}

# The tail of every failing test's log, in the build directory at hand.
failed_logs() {
	for f in tests/*/*.log; do
		grep -q -E "FAILED|^FAIL" "$f" 2>/dev/null && { echo "==== $f"; tail -n 60 "$f"; }
	done
}

if ! make -j"$(nproc)" check; then
	failed_logs
	summary
	exit 1
fi
# The slot model (model/check.sh) was checked by the make check above; it
# does not depend on the build, so the later passes leave it out.
# The same holds for the in-tree build check of scripts/setup.sh, for the
# console's browser test (tests/browser/: HTML and JavaScript, which a
# sanitizer build does not change) and for the statements' plans on a
# million rows (test_dispatch_explain: the plans are PostgreSQL's, whatever
# the build's sanitizers).
SLOT_MODEL_SKIP="checked by the first make check of scripts/test.sh"
SETUP_INTREE_SKIP="$SLOT_MODEL_SKIP"
BROWSER_TEST_SKIP="$SLOT_MODEL_SKIP"
DISPATCH_EXPLAIN_SKIP="$SLOT_MODEL_SKIP"
export SLOT_MODEL_SKIP SETUP_INTREE_SKIP BROWSER_TEST_SKIP DISPATCH_EXPLAIN_SKIP
# distcheck is there to catch what the tarball lacks: it builds everything
# from it and runs the tests that would miss a file (the unit tests, the
# fuzz replays of the seed corpora, the layering check and the integration
# tests that read the source tree). The whole suite ran above and runs
# again under the sanitizers below.
dist_tests=""
for t in $(make -s print-tests); do
	case "$t" in
	tests/unit/* | tests/fuzz/* | tests/layering.sh | tests/install_files.sh | \
		tests/integration/test_daemon | \
		tests/integration/test_bad_input | tests/integration/test_example | \
		tests/integration/test_metrics | tests/integration/test_dispatch_sql)
		dist_tests="$dist_tests $t" ;;
	esac
done
make -j"$(nproc)" distcheck TESTS="$dist_tests"
make check-style
echo "test.sh: every C file is as clang-format (.clang-format) writes it"
echo "test.sh: make check and make distcheck passed"
summary

# 2. ASan + UBSan.  Reports go to files, so that one from a handler or a
# job helper is not lost in a log that a test removed.
san="$top/build-san"
reports="$san/reports"
mkdir -p "$san"
rm -rf "$reports"
mkdir -p "$reports"
# Daemons that drop to another user (test_privileges: nobody) write their
# reports here too.
chmod 1777 "$reports"
cd "$san"
[ -f Makefile ] || ../configure --enable-asan --enable-ubsan
make -j"$(nproc)"
if ! ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1" \
     UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1" \
     make -j"$(nproc)" check; then
	failed_logs
	echo "test.sh: the sanitizer build failed its tests"
	exit 1
fi
if [ -n "$(ls -A "$reports")" ]; then
	echo "test.sh: sanitizer reports:"
	head -n 60 "$reports"/*
	exit 1
fi
echo "test.sh: make check under ASan+UBSan passed, no reports"

# 3. valgrind memcheck of the unit suites (smaller sizes: memcheck is slow).
cd "$top/build"
vg="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect --child-silent-after-fork=yes"
export TOP_SRCDIR="$top"
for t in test_book test_book_lockstats test_book_token test_config test_net test_job_spec test_book_class \
	test_book_autobalance test_profile test_addr_rule test_job_dir test_book_usage test_transfer_guard \
	test_client_url test_ws_client test_execctl test_job test_spawn test_spawn_vfork test_proxy_header \
	test_prom_text; do
	$vg "tests/unit/$t" > /dev/null || { echo "test.sh: valgrind: $t failed"; exit 1; }
done
$vg tests/unit/test_book_diff 7 30000 > /dev/null || { echo "test.sh: valgrind: test_book_diff failed"; exit 1; }
ES_CRASH_ROUNDS=60 $vg tests/unit/test_book_crash > /dev/null ||
	{ echo "test.sh: valgrind: test_book_crash failed"; exit 1; }
TRANSFER_TEST_MIB=2 $vg tests/unit/test_transfer > /dev/null ||
	{ echo "test.sh: valgrind: test_transfer failed"; exit 1; }
JOB_IO_TEST_MIB=2 $vg tests/unit/test_job_io > /dev/null ||
	{ echo "test.sh: valgrind: test_job_io failed"; exit 1; }
CRON_ORACLE_SPECS=40 $vg tests/unit/test_cron > /dev/null ||
	{ echo "test.sh: valgrind: test_cron failed"; exit 1; }
for t in ws_frames messages http_head job_spec config proxy_header cron; do
	$vg "tests/fuzz/fuzz_$t" > /dev/null || { echo "test.sh: valgrind: fuzz_$t (replay) failed"; exit 1; }
done
echo "test.sh: valgrind memcheck of the unit suites passed"

# 4. Fuzz pass: each target runs the same 200,000 inputs from seed 1 on a
# copy of its seed corpus (about a minute); long random searches are
# `make fuzz FUZZ_SECONDS=N`, not part of the test command.
fz="$top/build-fuzz"
mkdir -p "$fz"
cd "$fz"
[ -f Makefile ] || ../configure --enable-fuzz CC=clang
if ! make -j"$(nproc)" fuzz FUZZ_RUNS=200000 FUZZ_SEED=1 > fuzz.log 2>&1; then
	grep -E "^fuzz: |fuzz check failed|ERROR: |SUMMARY: " fuzz.log
	echo "test.sh: the fuzz pass failed (see $fz/fuzz.log; findings under $fz/tests/fuzz/run/*/artifacts)"
	exit 1
fi
grep "^fuzz: " fuzz.log
echo "test.sh: fuzz pass green: $(grep '^fuzz: [0-9]* targets' fuzz.log)"
# 5. The Debian packages (scripts/test-debs.sh): built without their test
# suite (it ran above), checked by lintian, installed, upgraded with a job
# running, removed and purged in a throw-away Debian 12 root; as root only
# (else one line says it was skipped).
"$top/scripts/test-debs.sh"
echo "test.sh: all passes green"
cd "$top/build"
summary
