#!/bin/sh
# layering.sh - the layering of the source tree, checked: every #include of
# a project header in src/ and include/ must be allowed by the table under
# "## Layering" in docs/architecture.md (a row per folder: the folders its
# files may include besides their own).  Prints each include that breaks
# it as FILE:LINE and exits 1; exits 0 when there is none.
#
# An include that walks up with "../" is refused too: it would reach
# another folder without naming it.
#
# Run by make check (and so by make distcheck, where the sources are read
# only: the scratch copy is made writable).  It first proves that it can
# fail: a copy of the tree with two includes that climb (job/ including
# handler/, by name and by "../") must be refused, naming each file and line.
#
# Usage: layering.sh [TOP]   (default: $TOP_SRCDIR, else this file's ../)
set -eu

top=${1:-${TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}}

# check_tree TOP: the check itself; prints the violations, returns 1 if any.
check_tree() {
	awk '
	# The table of docs/architecture.md: | `src/job/` | `book`, `common` |
	FNR == NR {
		if ($0 ~ /^## /)
			in_layering = ($0 == "## Layering")
		if (!in_layering || $0 !~ /^\| `[a-z\/]+\/` \|/)
			next
		split($0, col, "|")
		folder = col[2]
		gsub(/[` ]/, "", folder)
		sub(/\/$/, "", folder)
		n = split(folder, part, "/")
		name = part[n]
		rows[name] = 1
		allowed[name, name] = 1
		rest = col[3]
		while (match(rest, /`[a-z_]+`/)) {
			allowed[name, substr(rest, RSTART + 1, RLENGTH - 2)] = 1
			rest = substr(rest, RSTART + RLENGTH)
		}
		next
	}
	FNR == 1 {
		n = split(FILENAME, part, "/")
		own = part[n - 1]
		if (!(own in rows)) {
			printf "%s: its folder has no row under \"## Layering\" in docs/architecture.md\n",
				FILENAME
			bad = 1
		}
	}
	# a header reached by walking up: its folder is not named
	/^[ \t]*#[ \t]*include[ \t]*["<][^">]*\.\.\// {
		inc = $0
		sub(/^[^"<]*["<]/, "", inc)
		sub(/[">].*/, "", inc)
		printf "%s:%d: includes %s: no \"../\" in an include (name the folder: docs/architecture.md, Layering)\n",
			FILENAME, FNR, inc
		bad = 1
	}
	# project headers: "dir/x.h", or <execserver/x.h>
	/^[ \t]*#[ \t]*include[ \t]*("[a-z_]+\/|<execserver\/)/ {
		inc = $0
		sub(/^[^"<]*["<]/, "", inc)
		dir = inc
		sub(/\/.*/, "", dir)
		sub(/[">].*/, "", inc)
		if ((own in rows) && !((own, dir) in allowed)) {
			printf "%s:%d: includes %s: %s/ may not include %s/ (docs/architecture.md, Layering)\n",
				FILENAME, FNR, inc, own, dir
			bad = 1
		}
	}
	END { exit bad }
	' "$1/docs/architecture.md" $(cd "$1" && find src include -name '*.[ch]' | sort | sed "s|^|$1/|")
}

# It can fail: one climbing include in a copy of the tree is found.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/docs"
cp "$top/docs/architecture.md" "$scratch/docs/"
cp -R "$top/src" "$top/include" "$scratch/"
chmod -R u+w "$scratch"
printf '#include "handler/handler.h"\n' >>"$scratch/src/job/job.c"
lines=$(wc -l <"$scratch/src/job/job.c" | tr -d ' ')
printf '#include "../handler/handler.h"\n' >>"$scratch/src/job/spawn.c"
up=$(wc -l <"$scratch/src/job/spawn.c" | tr -d ' ')
if out=$(check_tree "$scratch"); then
	echo "layering.sh: FAIL: an include of handler/ from job/ was not refused" >&2
	exit 1
fi
case "$out" in
*"src/job/job.c:$lines: includes handler/handler.h"*"src/job/spawn.c:$up: includes ../handler/handler.h"*) ;;
*)
	echo "layering.sh: FAIL: the climbing includes were not both named:" >&2
	echo "$out" >&2
	exit 1
	;;
esac

# The tree itself.
if ! check_tree "$top"; then
	echo "layering.sh: FAIL: includes above break the layering" >&2
	exit 1
fi
echo "layering.sh: every include of src/ and include/ keeps the layering"
