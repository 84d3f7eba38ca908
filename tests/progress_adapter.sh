#!/bin/sh
# progress_adapter.sh - the ffmpeg and ImageMagick adapters of
# docs/progress.md, run as written there against stand-ins that print what
# `ffmpeg -progress pipe:1` and `convert -monitor` print: the adapter's
# lines must be the values docs/progress.md promises (each a good progress
# line); a failing converter must leave the adapter failing with the
# converter's status and its message on stderr.  No ffmpeg or ImageMagick
# needed.
set -eu
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
doc="$(dirname "$0")/../docs/progress.md"
fail() {
	echo "progress_adapter.sh: $*"
	exit 1
}

# the stand-in ffmpeg: 4 blocks of a 10 s input, then the end; with
# FAIL set, one block, a message on stderr, status 3
cat >"$dir/ffmpeg" <<'FAKE'
#!/bin/sh
for us in 2500000 5000000 7500000 10000000; do
	printf 'frame=%d\nfps=25.0\nout_time_us=%d\nout_time=00:00:0x\nprogress=continue\n' \
		$((us / 40000)) "$us"
	if [ -n "${FAIL-}" ]; then
		echo "Error while decoding stream #0:0" >&2
		exit 3
	fi
done
printf 'out_time_us=N/A\nprogress=end\n'
FAKE
# the stand-in convert: monitor lines (CR-ended) and, with FAIL set, an
# error message and status 1
cat >"$dir/convert" <<'FAKE'
#!/bin/sh
printf 'resize image[a.jpg]: 25 of 100, 25%% complete\r' >&2
printf 'resize image[a.jpg]: 50 of 100, 50%% complete\r' >&2
if [ -n "${FAIL-}" ]; then
	printf '\nconvert: unable to write image b.png\n' >&2
	exit 1
fi
printf 'resize image[a.jpg]: 100 of 100, 100%% complete\n' >&2
FAKE
chmod +x "$dir/ffmpeg" "$dir/convert"

# run NAME FAIL: the adapter line of NAME from the docs, fd 3 into a file;
# sets rc, got (fd 3), err (stderr)
run() {
	line=$(sed -n "s/^    \\(s=.* $1 -.*\\)\$/\\1/p" "$doc")
	[ -n "$line" ] || fail "no $1 adapter line in docs/progress.md"
	rc=0
	(cd "$dir" && FAIL=$2 PATH="$dir:$PATH" DUR_US=10000000 EXECSERVER_PROGRESS_FD=3 \
		sh -c "$line" sh -i in out 3>"$dir/progress" 2>"$dir/err") || rc=$?
	got=$(cat "$dir/progress")
	err=$(cat "$dir/err")
}
check() { # what want got
	[ "$3" = "$2" ] || fail "$1: got [$3], expected [$2]"
}

run ffmpeg ""
check "ffmpeg status" 0 "$rc"
check "ffmpeg values" "$(printf '0.2500\n0.5000\n0.7500\n1.0000\n1 done')" "$got"
run ffmpeg 1
check "failing ffmpeg status" 3 "$rc"
check "failing ffmpeg values" 0.2500 "$got"
check "failing ffmpeg stderr" "Error while decoding stream #0:0" "$err"

run convert ""
check "convert status" 0 "$rc"
check "convert values" "$(printf '25%%\n50%%\n100%%')" "$got"
check "convert stderr" "" "$err"
run convert 1
check "failing convert status" 1 "$rc"
check "failing convert values" "$(printf '25%%\n50%%')" "$got"
check "failing convert stderr" "convert: unable to write image b.png" "$err"
echo "progress_adapter.sh: ok"
