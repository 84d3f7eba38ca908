#!/usr/bin/python3
"""metrics_check.py - a /metrics page against Prometheus' parsers, its
conventions and the table that documents it.

    metrics_check.py PAGE DOC HEADING [--auto-balance yes|no]

PAGE is the page's text (version 0.0.4), DOC the markdown file and
HEADING the line that begins its section (up to the next heading of the
same or a higher level).  The section's table whose header starts with
"| metric |" lists every family: `name` | type | labels | meaning, the
labels as code spans, a label's values (when they are fixed) after it in
parentheses: `outcome` (`succeeded`, `failed`); of such a label, each
value is on the page when the family has series.  A row whose meaning
starts with "auto-balance only" is on the page exactly when
--auto-balance yes (either way without the option).  The section's line
starting the paragraph "Buckets" lists the bucket layout of every histogram (the `le`
values, seconds); without one, that of docs/protocol.md's "### GET
/metrics" (the one layout of both daemons).

Checks, each failure printed on a line of its own (exit status 1):
  - Debian's python3-prometheus-client parses the page (the 0.0.4
    parser), and every sample belongs to the family of the TYPE line
    before it;
  - its OpenMetrics parser, which is strict, takes the page (counters'
    family names without _total, "# EOF" added): one type per family, no
    series name used by two families, histograms with ordered cumulative
    buckets, +Inf equal to _count, integer counts;
  - conventions: no label named instance or job, counters end in _total
    and nothing else does, no unit but base units in a name, histograms
    in seconds with the documented buckets;
  - the page's families are the table's, with the table's types, label
    names and fixed label values.
Used by tests/integration/test_metrics.c.
"""
import os
import re
import sys

from prometheus_client.openmetrics import parser as om_parser
from prometheus_client.parser import text_string_to_metric_families

problems = []


def problem(text):
    problems.append(text)


def doc_section(path, heading):
    lines = open(path, encoding="utf-8").read().split("\n")
    try:
        start = lines.index(heading)
    except ValueError:
        problem("%s: no line %r" % (path, heading))
        return []
    level = len(heading) - len(heading.lstrip("#"))
    end = start + 1
    while end < len(lines):
        m = re.match(r"(#+) ", lines[end])
        if m and len(m.group(1)) <= level:
            break
        end += 1
    return lines[start + 1:end]


def doc_table(section):
    """{name: (type, {label: [values] or None}, auto_only)}, buckets"""
    rows, buckets, in_table, in_buckets = {}, None, False, False
    for line in section:
        in_buckets = line.startswith("Buckets") or (in_buckets and line != "")
        if in_buckets:
            buckets = (buckets or []) + [b for b in re.findall(r"`([^`]+)`", line)
                                         if re.fullmatch(r"[0-9.]+|\+Inf", b)]
        if line.startswith("| metric |"):
            in_table = True
            continue
        if not line.startswith("|"):
            in_table = False
            continue
        if not in_table or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4:
            problem("doc: a row without four cells: " + line)
            continue
        name = re.fullmatch(r"`([a-z_:][a-z0-9_:]*)`", cells[0])
        if not name:
            problem("doc: the first cell is not one metric name: " + line)
            continue
        labels = {}
        for lab, _, vals in re.findall(r"`([a-z_]+)`(\s*\(([^)]*)\))?", cells[2]):
            labels[lab] = re.findall(r"`([^`]+)`", vals) if vals else None
        auto = cells[3].startswith("auto-balance only")
        rows[name.group(1)] = (cells[1], labels, auto)
    if not rows:
        problem("doc: no table starting with '| metric |' in the section")
    return rows, buckets


def openmetrics_text(page):
    """The page as OpenMetrics: counters' family names lose _total."""
    counters = set()
    for line in page.split("\n"):
        parts = line.split()
        if len(parts) == 4 and parts[:2] == ["#", "TYPE"] and parts[3] == "counter":
            counters.add(parts[2])
    out = []
    for line in page.split("\n"):
        parts = line.split(" ", 3)
        if line.startswith("#") and len(parts) >= 3 and parts[2] in counters:
            if parts[2].endswith("_total"):
                parts[2] = parts[2][:-len("_total")]
            line = " ".join(parts)
        if line:
            out.append(line)
    return "\n".join(out) + "\n# EOF\n"


def main(argv):
    args = argv[1:]
    auto = None
    if "--auto-balance" in args:
        i = args.index("--auto-balance")
        auto = args[i + 1] == "yes"
        del args[i:i + 2]
    page_path, doc_path, heading = args
    page = open(page_path, encoding="utf-8").read()
    doc, buckets = doc_table(doc_section(doc_path, heading))
    if buckets is None:
        # the one layout of both daemons is written in protocol.md
        proto = os.path.join(os.path.dirname(doc_path), "protocol.md")
        buckets = doc_table(doc_section(proto, "### GET /metrics"))[1]
    if not buckets:
        problem("doc: no line starting 'Buckets' lists the histograms' buckets")

    families = {}
    try:
        for fam in text_string_to_metric_families(page):
            if fam.type == "untyped":
                problem("page: %s has no TYPE line before it" % fam.name)
            families[fam.name] = fam
    except ValueError as e:
        problem("page: the 0.0.4 parser refuses it: %s" % e)
    try:
        list(om_parser.text_string_to_metric_families(openmetrics_text(page)))
    except ValueError as e:
        problem("page: the OpenMetrics parser refuses it: %s" % e)

    types = {}
    for line in page.split("\n"):
        parts = line.split()
        if len(parts) == 4 and parts[:2] == ["#", "TYPE"]:
            types[parts[2]] = parts[3]
    for name, typ in types.items():
        if (typ == "counter") != name.endswith("_total"):
            problem("page: %s is a %s: only counters end in _total" % (name, typ))
        if re.search(r"_(ms|us|ns|milliseconds|microseconds|minutes|hours|days|kb|mb|"
                     r"kilobytes|megabytes|percent)(_|$)", name):
            problem("page: %s: not a base unit (seconds, bytes, ratios)" % name)
        if typ == "histogram" and not name.endswith("_seconds"):
            problem("page: the histogram %s is not in seconds" % name)

    for fam in families.values():
        les = []
        for s in fam.samples:
            for lab in s.labels:
                if lab in ("instance", "job"):
                    problem("page: %s has a label %s (Prometheus renames it exported_%s)"
                            % (s.name, lab, lab))
            if s.name.endswith("_bucket") and "le" in s.labels:
                if s.labels["le"] not in les:
                    les.append(s.labels["le"])
        if fam.type == "histogram" and buckets is not None and les != buckets:
            problem("page: %s has buckets %s, the doc says %s" % (fam.name, les, buckets))

    # the doc's names are the TYPE lines' (counters with their _total)
    for name, typ in types.items():
        if name not in doc:
            problem("page: %s is not in the doc's table" % name)
            continue
        dtyp, dlabels, _ = doc[name]
        if dtyp != typ:
            problem("page: %s is a %s, the doc says %s" % (name, typ, dtyp))
        fam = families.get(name[:-len("_total")] if typ == "counter" else name)
        for s in fam.samples if fam else []:
            got = set(s.labels) - {"le"}
            if got != set(dlabels):
                problem("page: %s has labels %s, the doc says %s"
                        % (s.name, sorted(got), sorted(dlabels)))
            for lab, vals in dlabels.items():
                if vals is not None and s.labels.get(lab) not in vals:
                    problem("page: %s{%s=%r}: not a value the doc lists"
                            % (s.name, lab, s.labels.get(lab)))
        for lab, vals in dlabels.items():
            for v in vals or []:
                if fam and fam.samples and not any(s.labels.get(lab) == v
                                                   for s in fam.samples):
                    problem("page: %s has no series with %s=%r" % (name, lab, v))
    for name, (_, _, auto_only) in doc.items():
        if auto_only and auto is None:
            continue
        expected = not auto_only or auto
        if expected and name not in types:
            problem("doc: %s is not on the page" % name)
        if not expected and name in types:
            problem("page: %s is there without auto-balance" % name)

    for p in problems:
        print(p)
    if not problems:
        print("ok: %d families" % len(types))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
