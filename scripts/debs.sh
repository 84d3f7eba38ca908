#!/bin/sh
# debs.sh - builds the Debian packages of this tree (debian/): execserver,
# execdispatch, execctl, libexecclient0 and libexecclient-dev, and checks
# them with lintian (any error or warning fails).
#
# Installs what is missing with apt-get (dpkg-dev, debhelper, lintian and
# the build dependencies of debian/control), copies the tree (its files
# that git knows or does not ignore, uncommitted changes included; without
# git, all but the build directories) and runs dpkg-buildpackage -b there,
# so the tree itself is left as it is.  DEB_BUILD_OPTIONS passes through:
# "nocheck" skips the test suite (which the build otherwise runs),
# "parallel=N" (default: the CPU count).  The .deb files go to OUTDIR,
# those of the debug symbols to OUTDIR/dbgsym.
#
#   scripts/debs.sh [OUTDIR]      (default: ./build-deb)
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$top/build-deb}
if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi

missing=""
for p in dpkg-dev debhelper lintian; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "debs: installing$missing"
	$SUDO apt-get update -q
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q $missing
fi

case " ${DEB_BUILD_OPTIONS:-} " in
*" parallel="*) ;;
*) DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-} parallel=$(nproc)" ;;
esac
export DEB_BUILD_OPTIONS
profiles=""
case " $DEB_BUILD_OPTIONS " in *" nocheck "*) profiles="nocheck" ;; esac

work=$(mktemp -d "${TMPDIR:-/tmp}/execserver-debs.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
version=$(sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' "$top/debian/changelog")
src="$work/execserver-$version"
mkdir "$src"
if git -C "$top" rev-parse --git-dir > /dev/null 2>&1; then
	(cd "$top" && git ls-files -co --exclude-standard -z | xargs -0 sh -c \
		'for f; do [ -e "$f" ] && printf "%s\n" "$f"; done' sh) |
		tar -C "$top" -cf - -T - | tar -C "$src" -xf -
else
	tar -C "$top" --exclude=./build --exclude='./build-[!a]*' --exclude=./debian/build \
		-cf - . | tar -C "$src" -xf -
fi

cd "$src"
if ! dpkg-checkbuilddeps ${profiles:+-P$profiles} > /dev/null 2>&1; then
	echo "debs: installing the build dependencies"
	$SUDO apt-get update -q
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get build-dep -y -q \
		${profiles:+-P $profiles} "$src"
fi
echo "debs: dpkg-buildpackage -b (DEB_BUILD_OPTIONS=$DEB_BUILD_OPTIONS)"
if ! dpkg-buildpackage -b -uc -us ${profiles:+-P$profiles} > "$work/build.log" 2>&1; then
	grep -v -e '^gcc ' -e '^libtool: ' -e '^/bin/bash .*libtool' "$work/build.log" | tail -n 60
	echo "debs: dpkg-buildpackage failed" >&2
	exit 1
fi
changes=$(ls "$work"/execserver_"$version"_*.changes)
echo "debs: lintian"
lintian --fail-on error,warning "$changes"

# the packages in OUTDIR, their debug symbols in OUTDIR/dbgsym, replacing
# those of an earlier run (and no other file: OUTDIR may hold others)
mkdir -p "$out/dbgsym"
for p in $(sed -n 's/^Package: *//p' "$top/debian/control"); do
	rm -f "$out/${p}_"*.deb "$out/dbgsym/${p}-dbgsym_"*.deb
done
for f in $(sed -n '/^Files:/,$s/^ [0-9a-f]* [0-9]* [^ ]* [^ ]* \(.*\.deb\)$/\1/p' "$changes"); do
	case $f in
	*-dbgsym_*) mv "$work/$f" "$out/dbgsym/" ;;
	*) mv "$work/$f" "$out/" && echo "debs: $out/$f" ;;
	esac
done
