#!/bin/sh
# test.sh - the whole test suite, from a fresh Debian 12 machine:
# installs what is missing, builds, and runs `make check` (unit tests,
# integration tests against real daemons) and `make distcheck`.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/setup.sh"
cd "$top/build"

# The CUnit run summaries of every test program, added up into one line.
summary() {
	awk '$1 == "tests" && NF == 6 { passed += $4; failed += $5 }
	     END { printf "%d passed, %d failed\n", passed, failed }' tests/*/*.log
}

if ! make -j"$(nproc)" check; then
	for f in tests/*/*.log; do
		grep -q -E "FAILED|^FAIL" "$f" 2>/dev/null && { echo "==== $f"; tail -n 60 "$f"; }
	done
	summary
	exit 1
fi
make -j"$(nproc)" distcheck
echo "test.sh: make check and make distcheck passed"
summary
