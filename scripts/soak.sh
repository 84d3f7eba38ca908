#!/bin/sh
# soak.sh - the soak run of docs/security.md: builds (as setup.sh does),
# then holds 1,000 broker connections with continuous churn and jobs
# against a real daemon for 10 minutes, and prints the memory and open
# descriptors of every execserver process before and after.
#
#   scripts/soak.sh [soak options]     e.g. scripts/soak.sh -s 60 -n 200
#
# Options go to tests/tools/soak (-s SECONDS, -n CONNECTIONS,
# -c CHURN_PER_SECOND, -H HANDLERS).  Not part of scripts/test.sh.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/setup.sh"
make -C "$top/build" soak SOAK_ARGS="$*"
