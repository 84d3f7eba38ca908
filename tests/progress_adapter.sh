#!/bin/sh
# progress_adapter.sh - the ffmpeg adapter of docs/progress.md, run against
# a stand-in for ffmpeg that prints what `ffmpeg -progress pipe:1` prints
# (key=value blocks, out_time_us, progress=continue/end): the adapter's
# lines must be the fractions docs/progress.md promises, ending with
# "1 done", each one a good progress line.  No ffmpeg needed.
set -eu
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# the stand-in: 4 blocks of a 10 s input, then the end
cat >"$dir/ffmpeg" <<'FAKE'
#!/bin/sh
for us in 2500000 5000000 7500000 10000000; do
	printf 'frame=%d\nfps=25.0\nout_time_us=%d\nout_time=00:00:0x\nprogress=continue\n' \
		$((us / 40000)) "$us"
done
printf 'out_time_us=N/A\nprogress=end\n'
FAKE
chmod +x "$dir/ffmpeg"
# the adapter line exactly as docs/progress.md has it, fd 3 into a file
line=$(sed -n 's/^    \(ffmpeg -nostdin -progress pipe:1.*\)$/\1/p' "$(dirname "$0")/../docs/progress.md")
[ -n "$line" ] || { echo "progress_adapter.sh: no adapter line in docs/progress.md"; exit 1; }
(cd "$dir" && PATH="$dir:$PATH" DUR_US=10000000 EXECSERVER_PROGRESS_FD=3 \
	sh -c "$line" sh -i in.mp4 out.mp4 3>"$dir/progress")
want='0.2500
0.5000
0.7500
1.0000
1 done'
got=$(cat "$dir/progress")
if [ "$got" != "$want" ]; then
	echo "progress_adapter.sh: the adapter wrote:"
	echo "$got"
	echo "expected:"
	echo "$want"
	exit 1
fi
echo "progress_adapter.sh: ok"
