#!/bin/sh
# setup_intree.sh - scripts/setup.sh (behind the README's scripts/demo.sh
# and scripts/test.sh) builds in ./build even after the README's Install
# configured and built in the source tree itself: autoconf refuses a build
# directory while the source directory holds a config.status ("source
# directory already configured").
#
# On a copy of the tree it runs ./configure in the tree, then setup.sh, and
# checks that setup.sh cleaned the tree (no config.status, no autoconfig.h
# there) and configured ./build.  A `make` first in PATH runs the real one
# for the cleaning (distclean) and records the build instead of running it,
# so the check takes two configure runs (sharing a cache), not a build; a
# dpkg-query there says that setup.sh's packages are installed.
#
# Run by make check (and make distcheck, where the sources are read only:
# the copy is made writable).  Usage: setup_intree.sh [TOP]
set -eu

# scripts/test.sh runs it in its first make check only: it does not depend
# on the build, so the sanitizer pass sets SETUP_INTREE_SKIP.
if [ -n "${SETUP_INTREE_SKIP:-}" ]; then
	echo "setup_intree.sh: $SETUP_INTREE_SKIP: skipped"
	exit 77
fi

top=${1:-${TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}}
work=$(mktemp -d "${TMPDIR:-/tmp}/setup-intree.XXXXXX")
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT INT TERM

# the tree without its build directories and version control; times are
# kept, so that setup.sh finds configure newer than configure.ac
mkdir "$work/tree" "$work/bin"
entries=""
for e in "$top"/* "$top"/.[!.]*; do
	case ${e##*/} in
	build-aux) ;;
	build | build-* | _build | _inst | .git | autom4te.cache | '.[!.]*' | '*') continue ;;
	esac
	entries="$entries ${e##*/}"
done
# shellcheck disable=SC2086
tar -C "$top" --exclude=tests/fuzz/run -cf - $entries | tar -C "$work/tree" -xf -
chmod -R u+w "$work/tree"
if [ ! -x "$work/tree/configure" ]; then
	echo "setup_intree: $top has no configure (run autoreconf -fi first)" >&2
	exit 1
fi

real_make=$(command -v make)
cat > "$work/bin/make" <<EOT
#!/bin/sh
case " \$* " in
*" distclean "*) exec "$real_make" "\$@" ;;
*) echo "make \$*" >> "$work/built"; exit 0 ;;
esac
EOT
chmod 755 "$work/bin/make"
# setup.sh's check of its Debian packages is not under test (and a package
# build has no apt-get): every package counts as installed
printf '#!/bin/sh\nprintf "install ok installed"\n' > "$work/bin/dpkg-query"
chmod 755 "$work/bin/dpkg-query"

cd "$work/tree"
# both configure runs share one cache (a site file naming it), so that the
# second one takes seconds
echo "cache_file=$work/config.cache" > "$work/config.site"
CONFIG_SITE=$work/config.site
export CONFIG_SITE
# the README's Install, up to the build (the build itself changes nothing
# for autoconf's check, config.status does)
./configure --prefix=/usr --sysconfdir=/etc --localstatedir=/var > "$work/configure.log" 2>&1 ||
	{ tail -n 20 "$work/configure.log"; exit 1; }

if ! PATH="$work/bin:$PATH" sh scripts/setup.sh > "$work/setup.log" 2>&1; then
	echo "setup_intree: scripts/setup.sh failed after an in-tree configure:" >&2
	tail -n 20 "$work/setup.log" >&2
	exit 1
fi
fail=0
for f in config.status autoconfig.h Makefile; do
	if [ -e "$f" ]; then
		echo "setup_intree: $f is still in the tree" >&2
		fail=1
	fi
done
if [ ! -f build/config.status ] || [ ! -f build/Makefile ]; then
	echo "setup_intree: ./build was not configured" >&2
	fail=1
fi
if [ ! -s "$work/built" ]; then
	echo "setup_intree: setup.sh did not build in ./build" >&2
	fail=1
fi
grep -q "in-tree" "$work/setup.log" ||
	{ echo "setup_intree: setup.sh did not say that it cleaned the tree" >&2; fail=1; }
[ $fail -eq 0 ] && echo "setup_intree: setup.sh cleaned the in-tree build and configured ./build"
exit $fail
