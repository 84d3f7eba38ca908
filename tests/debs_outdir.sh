#!/bin/sh
# debs_outdir.sh - scripts/debs.sh OUTDIR replaces the packages of an
# earlier run there and leaves every other file of OUTDIR alone (a
# directory of the operator's own packages may be given).
#
# Runs debs.sh with stand-ins first in PATH for the Debian tools (the
# package build, lintian and the checks of installed packages), so that
# only its own file handling is under test; takes a second.
set -eu

top=${TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
if [ ! -f "$top/debian/control" ]; then
	echo "debs_outdir: no debian/ in $top (a release tarball): skipped"
	exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/debs-outdir.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
mkdir "$work/bin" "$work/out"

# dpkg-buildpackage: two packages and their .changes beside the source
cat > "$work/bin/dpkg-buildpackage" <<'EOT'
#!/bin/sh
v=$(sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' debian/changelog)
printf 'Files:\n' > "../execserver_${v}_amd64.changes"
for p in execserver execctl; do
	echo new > "../${p}_${v}_amd64.deb"
	printf ' 0 4 net optional %s\n' "${p}_${v}_amd64.deb" >> "../execserver_${v}_amd64.changes"
done
EOT
printf '#!/bin/sh\nprintf "install ok installed"\n' > "$work/bin/dpkg-query"
printf '#!/bin/sh\nexit 0\n' > "$work/bin/dpkg-checkbuilddeps"
cp "$work/bin/dpkg-checkbuilddeps" "$work/bin/lintian"
chmod 755 "$work"/bin/*

echo mine > "$work/out/other_1.0_all.deb"
echo old > "$work/out/execserver_0.0.1_amd64.deb"
if ! PATH="$work/bin:$PATH" sh "$top/scripts/debs.sh" "$work/out" > "$work/log" 2>&1; then
	cat "$work/log"
	exit 1
fi
fail=0
[ -f "$work/out/other_1.0_all.deb" ] || { echo "debs_outdir: debs.sh deleted another package of OUTDIR" >&2; fail=1; }
[ ! -e "$work/out/execserver_0.0.1_amd64.deb" ] ||
	{ echo "debs_outdir: debs.sh left the package of an earlier run" >&2; fail=1; }
[ "$(ls "$work/out"/execserver_*.deb "$work/out"/execctl_*.deb | wc -l)" -eq 2 ] ||
	{ echo "debs_outdir: the new packages are not in OUTDIR" >&2; fail=1; }
[ $fail -eq 0 ] && echo "debs_outdir: debs.sh replaced its own packages in OUTDIR and kept the others"
exit $fail
