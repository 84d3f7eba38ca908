#!/bin/sh
# dispatch_calls.sh - the order of execdispatch's loop files, checked: the
# file map of src/dispatch/dispatch_impl.h lists them top to bottom, and
# no file may name a function defined in a file above it (a call, or a
# callback handed on).  Names in comments and strings do not count; a
# name a file defines itself is its own.  Prints each use that breaks the
# order as FILE:LINE and exits 1; exits 0 when there is none.
#
# Run by make check (and so by make distcheck, where the sources are read
# only: the scratch copy is made writable).  It first proves that it can
# fail: a copy of the files with held.c (the bottom) calling contact_next
# (contact.c, near the top) must be refused, naming the file and line.
#
# Usage: dispatch_calls.sh [TOP]   (default: $TOP_SRCDIR, else this file's ../)
set -eu

top=${1:-${TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}}

# order DIR: the files of the map, top first, one a line.
order() {
	awk '
	/top to bottom/ { on = 1; next }
	on && /^ \*$/ { exit }
	on && /^ \*   [a-z_]+\.c / { print $2 }
	' "$1/dispatch_impl.h"
}

# check_dir DIR: the check itself; prints the violations, returns 1 if any.
check_dir() {
	dir=$1
	files=$(order "$dir")
	if [ -z "$files" ]; then
		echo "$dir/dispatch_impl.h: no file map (\"top to bottom\") found"
		return 1
	fi
	# each file twice: the first pass collects the definitions, the
	# second the uses
	set --
	for f in $files; do
		set -- "$@" "$dir/$f"
	done
	n=$#
	for f in $files; do
		set -- "$@" "$dir/$f"
	done
	awk -v n="$n" '
	FNR == 1 {
		file++
		pass = file > n ? 2 : 1
		rank = pass == 1 ? file : file - n
		name = FILENAME
		sub(/.*\//, "", name)
		incom = 0
	}
	{
		line = strip($0)
		gsub(/"([^"\\]|\\.)*"/, "\"\"", line)
		gsub(/'\''([^'\''\\]|\\.)'\''/, "0", line)
		# a member (h->started, t.claims) is no function
		gsub(/(->|\.)[ \t]*[A-Za-z_][A-Za-z_0-9]*/, "", line)
	}
	# a definition: at the start of a line, a name and its "(", no ";"
	pass == 1 && $0 ~ /^[a-z]/ && line ~ /^[a-z][^;=]*[ *][a-z_0-9]+\(/ && line !~ /;[ \t]*$/ {
		d = line
		sub(/\(.*/, "", d)
		sub(/.*[ *]/, "", d)
		if (!(d in where) || where[d] > rank) {
			where[d] = rank
			wfile[d] = name
		}
		own[name, d] = 1
		next
	}
	pass == 2 {
		rest = line
		while (match(rest, /[A-Za-z_][A-Za-z_0-9]*/)) {
			id = substr(rest, RSTART, RLENGTH)
			rest = substr(rest, RSTART + RLENGTH)
			if ((id in where) && !((name, id) in own) && where[id] < rank) {
				printf "%s:%d: %s is defined in %s, above %s in the file map of dispatch_impl.h\n",
					FILENAME, FNR, id, wfile[id], name
				bad = 1
			}
		}
	}
	function strip(s,   out, i) {
		out = ""
		while (s != "") {
			if (incom) {
				i = index(s, "*/")
				if (!i)
					return out
				s = substr(s, i + 2)
				incom = 0
				continue
			}
			i = index(s, "/*")
			if (!i)
				return out s
			out = out substr(s, 1, i - 1)
			s = substr(s, i + 2)
			incom = 1
		}
		return out
	}
	END { exit bad }
	' "$@"
}

# It can fail: an upward call in a copy of the files is found.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp "$top"/src/dispatch/*.c "$top"/src/dispatch/*.h "$scratch/"
chmod -R u+w "$scratch"
printf 'void up(struct dispatcher *d)\n{\n\tcontact_next(d); /* held_free( */\n}\n' >>"$scratch/held.c"
line=$(($(wc -l <"$scratch/held.c" | tr -d ' ') - 1))
if out=$(check_dir "$scratch"); then
	echo "dispatch_calls.sh: FAIL: a call of contact_next from held.c was not refused" >&2
	exit 1
fi
case "$out" in
*"held.c:$line: contact_next is defined in contact.c"*) ;;
*)
	echo "dispatch_calls.sh: FAIL: the upward call was not named:" >&2
	echo "$out" >&2
	exit 1
	;;
esac

# The tree itself.
if ! check_dir "$top/src/dispatch"; then
	echo "dispatch_calls.sh: FAIL: calls above go up the file map of src/dispatch/dispatch_impl.h" >&2
	exit 1
fi
echo "dispatch_calls.sh: src/dispatch's loop files call only downward"
