#!/bin/sh
# screenshots.sh [BUILDDIR] - makes docs/console-execserver.png (and
# docs/console-execserver-dark.png, the dark scheme) again, and
# docs/console-execdispatch.png (-dark.png) from the execdispatch
# console's test (test_console_execdispatch.py, on a private PostgreSQL,
# after its pages and its cancel).  The execserver's: the
# browser test's scenario (tests/browser/test_console_execserver.py) with
# real data (a real execserver, jobs from execctl run), a few more wants in
# the line, saved by headless Chromium at 1280 px.  Needs chromium,
# chromium-driver and python3-selenium (scripts/setup.sh installs them)
# and a built tree (default ./build).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
EXECSERVER_BIN="$build/execserver"
export EXECSERVER_BIN
"$top/tests/browser/console_execserver.sh" --screenshot "$top/docs/console-execserver.png"
EXECDISPATCH_BIN="$build/execdispatch"
export EXECDISPATCH_BIN
"$top/tests/browser/console_execdispatch.sh" --screenshot "$top/docs/console-execdispatch.png"
