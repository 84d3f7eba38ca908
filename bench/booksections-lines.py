#!/usr/bin/env python3
# booksections-lines.py - reads the stderr of bench/booksections and the
# memory trace of `valgrind --tool=lackey --trace-mem=yes --log-file=TRACE`
# of the same run; prints, per kind of critical section, the distinct cache
# lines of the book's segment it touched and wrote (the first quarter of the
# sections left out as warm-up), and the lines by table.
# Usage: booksections-lines.py STDERR TRACE
import collections
import re
import sys

head = open(sys.argv[1]).read()
m = re.search(r"markers (\S+) (\S+) (\S+) (\S+) segment (\S+) (\d+)", head)
end_mark, *kinds = (int(x, 16) for x in m.groups()[:4])
names = dict(zip(kinds, ("mail take", "DECLINE", "WANT")))
seg, size = int(m.group(5), 16), int(m.group(6))
tables = sorted((int(v), k) for k, v in
                re.findall(r"(\w+) (\d+)", head.split("tables", 1)[1].splitlines()[0]))
tables = [(0, "header")] + tables


def table(line):
    off, name = (line << 6) - seg, "header"
    for start, t in tables:
        if off >= start:
            name = t
    return name


sections = collections.defaultdict(list)
cur, touched = None, {}
for row in open(sys.argv[2]):
    p = row.split()
    if len(p) < 2 or p[0] not in ("S", "L", "M"):
        continue
    a = int(p[1].split(",")[0], 16)
    if p[0] == "S" and a in names:
        cur, touched = names[a], {}
    elif p[0] == "S" and a == end_mark:
        if cur:
            sections[cur].append(touched)
        cur = None
    elif cur and seg <= a < seg + size:
        line = a >> 6
        touched[line] = touched.get(line, False) or p[0] != "L"
for kind, runs in sections.items():
    runs = runs[len(runs) // 4:]
    n = len(runs)
    lines = sum(len(r) for r in runs) / n
    written = sum(sum(r.values()) for r in runs) / n
    by = collections.Counter(table(l) for r in runs for l in r)
    print("%-9s %5d sections: %.1f lines touched, %.1f written; by table: %s" % (
        kind, n, lines, written,
        ", ".join("%s %.1f" % (t, c / n) for t, c in by.most_common())))
