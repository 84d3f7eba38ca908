#!/bin/sh
# console_execdispatch.sh - make check's entry to the execdispatch
# console's browser test (test_console_execdispatch.py): skips (exit 77,
# with a line saying why) where headless Chromium, its driver,
# python3-selenium or PostgreSQL are missing, and in the later passes of
# scripts/test.sh (BROWSER_TEST_SKIP), as console_execserver.sh does.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${BROWSER_TEST_SKIP:-}" ]; then
	echo "console_execdispatch.sh: $BROWSER_TEST_SKIP: skipped"
	exit 77
fi
py=/usr/bin/python3
[ -x "$py" ] || py=python3
for tool in chromium chromedriver "$py"; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "console_execdispatch.sh: no $tool (apt-get install chromium chromium-driver python3-selenium): skipped"
		exit 77
	fi
done
if ! "$py" -c 'import selenium' 2>/dev/null; then
	echo "console_execdispatch.sh: no python3-selenium: skipped"
	exit 77
fi
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
	echo "console_execdispatch.sh: no PostgreSQL (apt-get install postgresql): skipped"
	exit 77
fi
exec "$py" "$here/test_console_execdispatch.py" "$@"
