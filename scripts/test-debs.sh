#!/bin/sh
# test-debs.sh - the Debian packages, installed as an operator would: builds
# them (scripts/debs.sh with DEB_BUILD_OPTIONS=nocheck: the suite ran
# already; lintian must find no error or warning), then in a throw-away
# Debian 12 root made by mmdebstrap from Debian's archive (cached as
# build-deb/root-*.tar), in network and mount namespaces of its own:
#  1. installs a previous build (the same packages repacked with version
#     VERSION~0) and checks that execserver runs under its own user and
#     answers /status, that `execctl run` streams a file through a job,
#     that execdispatch can read its configuration as that user and was
#     not started;
#  2. changes the conffile execserver.yml, starts a job of 3 s, and upgrades
#     to the new build: the job ends with exit 0 (the restart drains it), the
#     change is kept, the file stays 0640 root:execserver, a new daemon
#     answers; execdispatch, enabled and started as its README.Debian
#     says, is restarted too;
#  3. removes the packages (no daemon left, the configuration kept), then
#     purges them: no file or state directory is left that was not there
#     before the first install; the system user and group stay
#     (debian/execserver.postrm says why).
# The root stands for a sysvinit host booted to runlevel 2 (a /sbin/runlevel
# that says so), so that the maintainer scripts start the service through
# invoke-rc.d as on a sysvinit host; systemd does not run in it.
# Needs root (chroot, namespaces); otherwise it prints one line and exits 0,
# as it does after the build when no root can be made (no mmdebstrap, the
# archive not reachable).  It never installs on the machine itself.
#
#   scripts/test-debs.sh [--no-build]   --no-build: the packages that
#                                        scripts/debs.sh left in ./build-deb
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
if [ "$(id -u)" -ne 0 ]; then
	echo "test-debs: skipped: needs root (chroot and namespaces)"
	exit 0
fi
start=$(date +%s)
out="$top/build-deb"
if [ "${1:-}" != --no-build ]; then
	DEB_BUILD_OPTIONS="nocheck ${DEB_BUILD_OPTIONS:-}" "$top/scripts/debs.sh" "$out"
fi
# skip WHY: the packages were built and checked; the install test cannot run
skip() {
	echo "test-debs: packages built, lintian clean; install test skipped: $1"
	exit 0
}
dpkg-query -W -f='${Status}' mmdebstrap 2>/dev/null | grep -q "install ok installed" ||
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q mmdebstrap ||
	skip "mmdebstrap cannot be installed"

work=$(mktemp -d /tmp/execserver-test-debs.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM
mkdir "$work/new" "$work/prev"
cp "$out"/*.deb "$work/new/"

# The previous build: the same packages under a lower version.
version=$(dpkg-deb -f "$(ls "$work"/new/execserver_*.deb)" Version)
for deb in "$work"/new/*.deb; do
	rm -rf "$work/x"
	dpkg-deb -R "$deb" "$work/x"
	sed -i -e "s/^Version: .*/Version: $version~0/" -e "s/ $version)/ $version~0)/g" \
		"$work/x/DEBIAN/control"
	dpkg-deb -b -Zgzip "$work/x" "$work/prev/" > /dev/null
done
rm -rf "$work/x"

# The root: Debian 12 with the packages' dependencies (all but ours), curl
# and sysvinit (an init system for invoke-rc.d), cached by that list.
deps=$(for deb in "$work"/new/*.deb; do
	dpkg-deb -f "$deb" Pre-Depends
	dpkg-deb -f "$deb" Depends
done |
	tr ',' '\n' | sed -e 's/|.*//' -e 's/(.*)//' -e 's/:any//' -e 's/[[:space:]]//g' |
	grep -v -x -e '' -e execserver -e execdispatch -e execctl -e 'libexecclient.*' |
	sort -u | tr '\n' ',')
deps="${deps}curl,procps,sysvinit-core"
key=$(printf '%s' "$deps" | sha256sum | cut -c1-12)
tarball="$out/root-$key.tar"
if [ ! -f "$tarball" ]; then
	rm -f "$out"/root-*.tar
	echo "test-debs: mmdebstrap bookworm ($deps)"
	if ! mmdebstrap --quiet --variant=minbase --include="$deps" bookworm "$tarball.tmp.tar" \
		http://deb.debian.org/debian; then
		rm -f "$tarball.tmp.tar"
		skip "no Debian 12 root (mmdebstrap from deb.debian.org failed, above)"
	fi
	mv "$tarball.tmp.tar" "$tarball"
fi
root="$work/root"
mkdir "$root"
tar -C "$root" -xf "$tarball"
cp -r "$work/new" "$work/prev" "$root/tmp/"
printf '#!/bin/sh\necho "N 2"\n' > "$root/sbin/runlevel"
chmod 755 "$root/sbin/runlevel"

cat > "$root/tmp/steps.sh" <<'EOT'
set -eu
export DEBIAN_FRONTEND=noninteractive PATH=/usr/sbin:/usr/bin:/sbin:/bin
fail() { echo "test-debs: $*" >&2; exit 1; }
# listing: the files of the root that a purge must restore
listing() {
	find / -xdev \( -path /proc -o -path /dev -o -path /run -o -path /tmp -o -path /var/log \
		-o -path /var/lib/dpkg -o -path /var/cache -o -path /sbin/runlevel \) -prune -o -print |
		grep -v -x -e '/etc/passwd-' -e '/etc/group-' -e '/etc/shadow-' -e '/etc/gshadow-' |
		sort
}
# up: waits (10 s at most) for /status to answer
up() {
	i=0
	until curl -sf http://127.0.0.1:8083/status > /dev/null; do
		i=$((i + 1)); [ $i -lt 100 ] || fail "execserver does not answer /status"
		sleep 0.1
	done
}
master() { cat /run/execserver.pid; }
# dispatcher: waits (10 s at most) for an execdispatch other than $1 to run
dispatcher() {
	i=0
	until p=$(pgrep -u execserver -x execdispatch) && [ "$p" != "$1" ]; do
		i=$((i + 1)); [ $i -lt 100 ] || fail "execdispatch does not run (or was not restarted)"
		sleep 0.1
	done
	echo "$p"
}
conf=/etc/execserver/execserver.yml
listing > /tmp/before

echo "test-debs: install the previous build"
dpkg -i /tmp/prev/*.deb > /tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; fail "dpkg -i failed"; }
up
getent passwd execserver > /dev/null || fail "no user execserver"
[ "$(ps -o user= -p "$(master)")" = execserver ] || fail "the master does not run as execserver"
[ "$(stat -c '%a %U %G' $conf)" = "640 root execserver" ] || fail "$conf: $(stat -c '%a %U %G' $conf)"
[ "$(stat -c '%a %U %G' /etc/execserver/execdispatch.yml)" = "640 root execserver" ] ||
	fail "execdispatch.yml: $(stat -c '%a %U %G' /etc/execserver/execdispatch.yml)"
runuser -u execserver -- execdispatch -t -c /etc/execserver/execdispatch.yml ||
	fail "execdispatch cannot read its configuration as execserver"
execctl run -a ws://127.0.0.1:8083 -s demo -- cat < /usr/bin/execctl > /tmp/copy ||
	fail "execctl run failed"
cmp -s /usr/bin/execctl /tmp/copy || fail "execctl run: other bytes came back"
echo "test-debs: running as execserver, /status answers, execctl run streams a file"
# execdispatch: installed disabled, then enabled as README.Debian says (it
# waits for its database, which is not there)
! pgrep -x execdispatch > /dev/null || fail "execdispatch was started before it was enabled"
{ update-rc.d execdispatch enable && service execdispatch start; } > /tmp/dispatch.log 2>&1 ||
	{ cat /tmp/dispatch.log; fail "execdispatch cannot be enabled and started"; }
dispatch_old=$(dispatcher none)

echo "# changed by the operator" >> $conf
execctl run -a ws://127.0.0.1:8083 -s sleep -- sleep 3 > /tmp/job.out 2>&1 &
job=$!
i=0
until pgrep -u execserver -x sleep > /dev/null; do
	i=$((i + 1)); [ $i -lt 100 ] || fail "the job did not start"
	sleep 0.1
done
old=$(master)
echo "test-debs: upgrade with a job running"
dpkg -i /tmp/new/*.deb > /tmp/dpkg.log 2>&1 || { cat /tmp/dpkg.log; fail "the upgrade failed"; }
wait $job || { cat /tmp/job.out; fail "the job running across the upgrade failed"; }
grep -q '^# changed by the operator' $conf || fail "the upgrade lost the change of $conf"
[ "$(stat -c '%a %U %G' $conf)" = "640 root execserver" ] || fail "$conf: $(stat -c '%a %U %G' $conf)"
up
[ "$(master)" != "$old" ] || fail "the daemon was not restarted"
dispatcher "$dispatch_old" > /dev/null
[ "$(dpkg-query -W -f='${Version}' execserver)" = "$(dpkg-deb -f /tmp/new/execserver_*.deb Version)" ] ||
	fail "not upgraded"
echo "test-debs: the job drained, the conffile kept its change, new daemons run"

echo "test-debs: remove"
dpkg -r libexecclient-dev execctl execdispatch libexecclient0 execserver > /tmp/dpkg.log 2>&1 ||
	{ cat /tmp/dpkg.log; fail "dpkg -r failed"; }
! pgrep -x execserver > /dev/null || fail "execserver still runs after remove"
! pgrep -x execdispatch > /dev/null || fail "execdispatch still runs after remove"
[ -f $conf ] || fail "remove took the configuration"
[ ! -e /usr/sbin/execserver ] || fail "remove left the daemon"
echo "test-debs: purge"
dpkg -P libexecclient-dev execctl execdispatch libexecclient0 execserver > /tmp/dpkg.log 2>&1 ||
	{ cat /tmp/dpkg.log; fail "dpkg -P failed"; }
getent passwd execserver > /dev/null || fail "purge removed the system user (debian/execserver.postrm)"
getent group execserver > /dev/null || fail "purge removed the system group"
listing > /tmp/after
if ! diff /tmp/before /tmp/after > /tmp/diff; then
	cat /tmp/diff
	fail "purge left the root changed"
fi
echo "test-debs: remove stopped the services and kept the configuration; purge left only the user"
EOT

unshare --net --mount --pid --fork --propagation private sh -c '
	set -e
	ip link set lo up
	mount --rbind /dev "$1/dev"
	mount -t tmpfs tmpfs "$1/dev/shm"
	mount -t proc proc "$1/proc"
	mount -t tmpfs tmpfs "$1/run"
	chroot "$1" /bin/sh /tmp/steps.sh' sh "$root"
echo "test-debs: passed in $(($(date +%s) - start)) s"
