#!/bin/sh
# demo.sh - from a fresh Debian 12 machine: build execserver, start it in
# the foreground on the default configuration (etc/execserver.yml), stream
# a file through one job with `execctl run` (its SHA-256 compared), show
# `execctl status`, and stop it (SIGTERM, clean drain).
#
#   scripts/demo.sh [--keep]     --keep leaves the daemon running
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/setup.sh"
build="$top/build"
config="$top/etc/execserver.yml"

# The demo runs on a copy of the default configuration with a private
# tempDir.  The default configuration switches to the user "execserver"
# (created by the installation, see README): as root without that account
# the demo runs as nobody instead; as another user it stays that user (only
# root can switch).
work=$(mktemp -d /tmp/execserver-demo.XXXXXX)
chmod 711 "$work"
if [ "$(id -u)" -ne 0 ]; then
	sed -e "s|^tempDir:.*|tempDir: $work/tmp|" -e '/^user:/d' -e '/^group:/d' \
		"$config" > "$work/execserver.yml"
elif getent passwd execserver > /dev/null; then
	sed "s|^tempDir:.*|tempDir: $work/tmp|" "$config" > "$work/execserver.yml"
else
	sed -e "s|^tempDir:.*|tempDir: $work/tmp|" -e 's|^user:.*|user: nobody|' \
		-e 's|^group:.*|group: nogroup|' "$config" > "$work/execserver.yml"
fi
config="$work/execserver.yml"

addr=$(sed -n 's/^addr:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}.*/\1/p' "$config")
host=${addr%:*}
port=${addr##*:}
[ -n "$host" ] || host=127.0.0.1

echo "demo: starting execserver -f -c $config (listening on $host:$port)"
"$build/execserver" -f -c "$config" &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT INT TERM

i=0
until curl -sf "http://$host:$port/status" > /dev/null 2>&1; do
	i=$((i + 1))
	if [ $i -gt 100 ] || ! kill -0 $pid 2>/dev/null; then
		echo "demo: execserver did not come up" >&2
		exit 1
	fi
	sleep 0.1
done

echo "demo: one job: execctl run -a ws://$host:$port -s demo -- cat"
echo "      (its stdin and stdout streamed through the job's one-time pipe URLs)"
"$build/execctl" run -a "ws://$host:$port" -s demo -- cat \
	< "$top/etc/execserver.yml" > "$work/copy.yml"
in_sum=$(sha256sum < "$top/etc/execserver.yml" | cut -d' ' -f1)
out_sum=$(sha256sum < "$work/copy.yml" | cut -d' ' -f1)
echo "demo: sha256 of the file sent:     $in_sum"
echo "demo: sha256 of what came back:    $out_sum"
if [ "$in_sum" != "$out_sum" ]; then
	echo "demo: the bytes differ" >&2
	exit 1
fi
echo "demo: the same bytes came back"

echo "demo: execctl status -a ws://$host:$port"
"$build/execctl" status -a "ws://$host:$port"


if [ "${1:-}" = "--keep" ]; then
	trap - EXIT INT TERM
	echo "demo: execserver keeps running as pid $pid (stop it with: kill $pid)"
	exit 0
fi
echo "demo: stopping (SIGTERM)"
kill -TERM $pid
wait $pid
echo "demo: execserver exited with status $?"
