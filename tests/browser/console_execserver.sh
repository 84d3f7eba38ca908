#!/bin/sh
# console_execserver.sh - make check's entry to the execserver console's
# browser test (test_console_execserver.py): skips (exit 77, with a line
# saying why) where headless Chromium, its driver or python3-selenium are
# missing (scripts/setup.sh installs them), and in the later passes of
# scripts/test.sh (BROWSER_TEST_SKIP: the sanitizer build adds nothing to
# a test of HTML and JavaScript).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${BROWSER_TEST_SKIP:-}" ]; then
	echo "console_execserver.sh: $BROWSER_TEST_SKIP: skipped"
	exit 77
fi
# Debian's python3, where python3-selenium lives (a python3 earlier in
# PATH, e.g. pyenv's, would not have it)
py=/usr/bin/python3
[ -x "$py" ] || py=python3
for tool in chromium chromedriver "$py"; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "console_execserver.sh: no $tool (apt-get install chromium chromium-driver python3-selenium): skipped"
		exit 77
	fi
done
if ! "$py" -c 'import selenium' 2>/dev/null; then
	echo "console_execserver.sh: no python3-selenium: skipped"
	exit 77
fi
exec "$py" "$here/test_console_execserver.py" "$@"
