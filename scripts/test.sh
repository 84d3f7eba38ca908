#!/bin/sh
# test.sh - the whole test suite, from a fresh Debian 12 machine:
# installs what is missing, builds, and runs `make check` (unit tests,
# integration tests against real daemons) and `make distcheck`.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/setup.sh"
cd "$top/build"
if ! make -j"$(nproc)" check; then
	for f in tests/*/*.log; do
		grep -q -E "FAIL|failed|Assertion" "$f" 2>/dev/null && { echo "==== $f"; tail -n 60 "$f"; }
	done
	exit 1
fi
make -j"$(nproc)" distcheck
echo "test.sh: all tests passed"
