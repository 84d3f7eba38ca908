#!/bin/sh
# fixed_sleeps.sh - the tests wait for conditions, not for time: every
# fixed sleep in tests/ outside a loop must say why a fixed time is the
# thing tested.  Prints each one that does not as FILE:LINE and exits 1;
# exits 0 when there is none.  The last line counts the fixed sleeps
# outside loops and those with a reason.
#
# What it reads: the C files (*.c, *.h) under tests/.  A fixed sleep is a
# call of harness_sleep_ms, usleep, sleep, nanosleep or clock_nanosleep
# (not the definition of harness_sleep_ms).  Comments, strings and
# character constants are skipped.
#
# Inside a loop: the call is in a polling loop - in the body of a for,
# while or do statement (a braced block, or the single statement after
# the header) or in a for header's step.  Such a sleep is a poll's
# interval: the loop re-checks its condition, and a deadline in the
# condition (harness_now_ms, a count of tries) bounds it.  A plain count,
# "for (i = 0; i < N; i++)" (the condition one comparison that calls
# nothing), is a poll only when its body leaves early (a break, return or
# goto before the sleep); else a sleep in it is a fixed sleep repeated.
# Everything else is a fixed sleep outside a loop.
#
# The reason: a comment containing "sleep:" on the call's line, or in the
# comment that ends on the line before (a comment of several lines counts
# when "sleep:" is anywhere in it), e.g.
#     /* sleep: the idle timeout (1 s) is what is tested: ... */
#     harness_sleep_ms(1500);
#
# Run by make check (and so by make distcheck).  It first proves that it
# can fail: a sample with a bare sleep outside a loop must be refused, and
# its sleeps in loops and with a reason must not.
#
# Usage: fixed_sleeps.sh [TOP]   (default: $TOP_SRCDIR, else this file's ../)
set -eu

top=${1:-${TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}}

# scan FILE...: prints "FILE:LINE: ..." for each sleep outside a loop
# without a reason, then "outside=N reasoned=M"; returns 1 if any lacks one.
scan() {
	# State, per file: sp the depth of open braces; kind[d] the block at
	# depth d (0 no loop, 1 a poll, 2 a plain count) and exits[d] (a break,
	# return or goto seen in it); pend a loop header under way (1 for or
	# while, 2 do, 3 the header closed and its body next, 4 the while that
	# ends a do); hdr the parenthesis depth in a header, head its text;
	# single the depth of a poll's one-statement body under way (-1: none);
	# dotail: the last "}" closed a do block.
	awk -v sq="'" '
	FNR == 1 { dotail = 0; sp = 0; incom = 0; pend = 0; hdr = 0; single = -1; prevcom = ""; run = 0 }
	{
		# Split the line into code (strings blanked) and comment text.
		line = $0; n = length(line); code = ""; linecom = ""; i = 1
		while (i <= n) {
			c = substr(line, i, 1); d = substr(line, i, 2)
			if (incom) {
				if (d == "*/") { incom = 0; i += 2; continue }
				linecom = linecom c; i++; continue
			}
			if (d == "/*") { incom = 1; linecom = linecom " "; i += 2; continue }
			if (d == "//") { linecom = linecom substr(line, i); break }
			if (c == "\"" || c == sq) {
				q = c; i++
				while (i <= n && substr(line, i, 1) != q) {
					if (substr(line, i, 1) == "\\") i++
					i++
				}
				i++; code = code " "; continue
			}
			code = code c; i++
		}
		reason = (linecom ~ /sleep:/) || (prevcom ~ /sleep:/)
		m = length(code); j = 1
		while (j <= m) {
			c = substr(code, j, 1)
			if (hdr > 0 && c != "(" && c != ")") head = head c
			if (pend == 3 && c !~ /[ \t{]/) {
				# a loop body of one statement, no braces
				if (ispoll(head) && single < 0) single = sp
				pend = 0
			}
			if (c ~ /[A-Za-z_]/) {
				k = j
				while (k <= m && substr(code, k, 1) ~ /[A-Za-z0-9_]/) k++
				w = substr(code, j, k - j); before = substr(code, 1, j - 1)
				if (hdr > 0) head = head substr(code, j + 1, k - j - 1)
				j = k
				if (hdr == 0 && (w == "for" || w == "while")) {
					# the while of "do { } while (x);" opens no body
					pend = dotail && w == "while" ? 4 : 1
					head = w ":"; dotail = 0; continue
				}
				dotail = 0
				if (hdr == 0 && w == "do") { pend = 2; continue }
				if (w == "break" || w == "return" || w == "goto")
					for (s = sp; s >= 1; s--) if (kind[s]) { exits[s] = 1; break }
				if (w !~ /^(harness_sleep_ms|usleep|sleep|nanosleep|clock_nanosleep)$/)
					continue
				if (substr(code, j) !~ /^[ \t]*\(/ || before ~ /(\.|->)[ \t]*$/ ||
				    before ~ /void[ \t]+$/)
					continue
				inloop = (single >= 0) || (hdr > 0 && ispoll(head))
				for (s = 1; s <= sp; s++)
					if (kind[s] == 1 || (kind[s] == 2 && exits[s])) inloop = 1
				if (inloop) continue
				outside++
				if (reason) { reasoned++; continue }
				printf "%s:%d: fixed sleep outside a loop without a \"sleep:\" reason\n",
				       FILENAME, FNR
				bad++
				continue
			}
			j++
			if (c !~ /[ \t}]/) dotail = 0
			if (c == "(") { if (pend == 1 || pend == 4) { hdr++; if (hdr > 1) head = head c } ; continue }
			if (c == ")") {
				if ((pend == 1 || pend == 4) && hdr > 0) {
					hdr--
					if (hdr > 0) head = head c
					else pend = pend == 1 ? 3 : 0
				}
				continue
			}
			if (hdr > 0) continue
			if (c == "{") {
				sp++; exits[sp] = 0
				kind[sp] = pend == 2 ? 1 : pend == 3 ? (ispoll(head) ? 1 : 2) : 0
				isdo[sp] = pend == 2; pend = 0; continue
			}
			if (c == "}") {
				if (sp > 0) { dotail = isdo[sp]; sp-- }
				if (single >= 0 && sp <= single) single = -1
				continue
			}
			if (c == ";") {
				if (single >= 0 && sp == single) single = -1
				pend = 0; continue
			}
		}
		# The comment run that ends on this line holds the next line'"'"'s reason.
		blank = (code !~ /[^ \t]/)
		if (blank && (linecom != "" || incom)) prevcom = (run ? prevcom : "") linecom
		else prevcom = linecom
		run = blank && incom
	}
	# A loop is a poll unless it is a plain count: "for (i = 0; i < N; i++)",
	# whose condition is one comparison and calls nothing.
	function ispoll(h,   part) {
		if (h !~ /^for:/) return 1
		split(substr(h, 5), part, ";")
		return part[2] ~ /&&|\|\||\(/ || part[2] !~ /[<>=]/
	}
	END {
		printf "outside=%d reasoned=%d\n", outside, reasoned
		exit bad > 0
	}' "$@"
}

# The check proves it can fail: a bare sleep (line 4) and one in a plain
# count (line 10) are refused, the others pass (polls, a reason before, a
# reason on the line).
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cat > "$scratch/sample.c" << 'EOF'
static void t(void)
{
	int i;
	harness_sleep_ms(200);
	while (!ready()) harness_sleep_ms(10);
	for (i = 0; i < 10 && !ready(); i++) {
		usleep(1000);
	}
	for (i = 0; i < 3; i++)
		sleep(1);
	/* sleep: the idle timeout is
	 * what is tested */
	sleep(2);
	usleep(5); /* sleep: the gap is the point */
}
EOF
out=$(scan "$scratch/sample.c" || true)
if [ "$out" != "$scratch/sample.c:4: fixed sleep outside a loop without a \"sleep:\" reason
$scratch/sample.c:10: fixed sleep outside a loop without a \"sleep:\" reason
outside=4 reasoned=2" ]; then
	echo "fixed_sleeps.sh: the self-check failed; it printed:"
	echo "$out"
	exit 1
fi

files=$(find "$top/tests" -name '*.[ch]' | LC_ALL=C sort)
# shellcheck disable=SC2086
if out=$(scan $files); then
	status=0
else
	status=1
fi
echo "$out" | sed "s|^$top/||"
exit $status
