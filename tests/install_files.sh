#!/bin/sh
# install_files.sh - what `make install` puts in place, as the README and
# the man pages promise it (run by make check from the build directory):
#  - execserver.yml and execdispatch.yml (authToken, database password) are
#    0640, group execserver when installed as root where that group exists;
#  - /etc/default/execdispatch (named by its init script and unit) is there;
#  - every docs/*.md that an installed man page names is installed in the
#    directory those pages give (/usr/share/doc/execserver for --prefix=/usr,
#    $(docdir)), the example of docs/client.md beside it;
#  - execserver(8) points to execdispatch(8); the README's Install names
#    all five man pages;
#  - a changed configuration survives a second make install and make
#    uninstall (an unchanged one is uninstalled).
# Installs with DESTDIR into a temporary directory; takes a few seconds.
set -eu

top=${TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
dest=$(mktemp -d "${TMPDIR:-/tmp}/install-files.XXXXXX")
trap 'rm -rf "$dest"' EXIT INT TERM
unset MAKEFLAGS MFLAGS MAKELEVEL
if ! ${MAKE:-make} -s install DESTDIR="$dest" > "$dest.log" 2>&1; then
	cat "$dest.log"; rm -f "$dest.log"; exit 1
fi
rm -f "$dest.log"

fail=0
bad() { echo "install_files: $*" >&2; fail=1; }
one() { find "$dest" -path "$1" | head -n 1; }

for name in execserver.yml execdispatch.yml; do
	f=$(one "*/execserver/$name")
	if [ -z "$f" ]; then bad "$name not installed"; continue; fi
	mode=$(stat -c %a "$f")
	[ "$mode" = 640 ] || bad "${f#"$dest"} is $mode, not 640"
	if [ "$(id -u)" -eq 0 ] && getent group execserver > /dev/null; then
		[ "$(stat -c %G "$f")" = execserver ] || bad "${f#"$dest"}: group $(stat -c %G "$f"), not execserver"
	fi
done
[ -n "$(one '*/default/execdispatch')" ] || bad "default/execdispatch not installed"

# the documents the man pages name, where the pages say they are
docdir=$(dirname "$(one '*/doc/execserver/protocol.md')")
[ "$docdir" != . ] || bad "docs not installed under \$(docdir)"
for page in $(find "$dest" -path '*/man/man[158]/*' -type f); do
	docs=$(grep -o 'docs/[a-z-]*\.md' "$page" | sort -u)
	[ -n "$docs" ] || continue
	grep -q '/usr/share/doc/execserver' "$page" ||
		bad "${page##*/} names docs/ but not where they are installed (/usr/share/doc/execserver)"
	for d in $docs; do
		[ -f "$docdir/${d#docs/}" ] || bad "${page##*/} names $d, not installed in ${docdir#"$dest"}"
	done
done
[ -f "$docdir/examples/run_job.c" ] || bad "docs/examples/run_job.c not installed"

sed -n '/^\.SH SEE ALSO/,/^\.SH/p' "$top/man/execserver.8" | grep -q 'execdispatch (8)' ||
	bad "execserver(8) SEE ALSO does not name execdispatch(8)"
install_text=$(sed -n '/^Install$/,/^Configure$/p' "$top/README")
for m in 'execserver(8)' 'execserver.yml(5)' 'execdispatch(8)' 'execdispatch.yml(5)' 'execctl(1)'; do
	printf '%s\n' "$install_text" | tr '\n' ' ' | grep -qF "$m" || bad "README's Install does not name $m"
done

# the operator's configuration: a second install keeps a changed file, and
# uninstall removes only the shipped one unchanged
conf=$(one '*/execserver/execserver.yml')
if [ -n "$conf" ]; then
	echo "# the operator's change" >> "$conf"
	if ! ${MAKE:-make} -s install DESTDIR="$dest" > "$dest.log" 2>&1 ||
		! ${MAKE:-make} -s uninstall DESTDIR="$dest" >> "$dest.log" 2>&1; then
		cat "$dest.log"; bad "make install or uninstall failed over an installed configuration"
	fi
	rm -f "$dest.log"
	grep -q "^# the operator's change" "$conf" 2> /dev/null ||
		bad "install or uninstall lost a changed ${conf#"$dest"}"
	[ -z "$(one '*/execserver/execdispatch.yml')" ] ||
		bad "uninstall left the unchanged execdispatch.yml"
fi
[ $fail -eq 0 ] && echo "install_files: modes, defaults, docs, references and a changed configuration as promised"
exit $fail
