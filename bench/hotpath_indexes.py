#!/usr/bin/env python3
"""hotpath_indexes.py - what the job table's indexes cost the queue's hot
path: claim, start and finish of ROWS jobs, each phase one UPDATE of every
row (bench/notes/console.md).

A private PostgreSQL (initdb in a temporary directory, fsync off, on
loopback; as the user postgres when run as root).  One schema per variant:
migrations 001 to 007 of SQL_DIR, then the variant's extra files (none for
the base; several joined by "+"), @schema@ replaced.  Each round, the variants in turn (the same
conditions for each, interleaved against the machine's drift): the table
emptied, ROWS queued jobs inserted (triggers off), VACUUM ANALYZE,
CHECKPOINT; then timed by psql's \\timing, triggers on, one statement each:
claim (queued -> claimed by d0), start (-> running), finish (-> done).
Prints per variant the median of the three phases' sum over the rounds,
its min and max, the WAL they wrote (the work done, steadier than the
time on a shared machine), and the heap-only (HOT) updates counted by
pg_stat_user_tables (of 3 x ROWS x ROUNDS).

usage: hotpath_indexes.py [-n ROWS] [-r ROUNDS] SQL_DIR [NAME=FILE[+FILE...] ...]
  e.g. hotpath_indexes.py sql/migrations console=sql/migrations/011_console.sql
"""
import glob
import os
import pwd
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    args = sys.argv[1:]
    rows, rounds = 50000, 5
    while args and args[0] in ("-n", "-r"):
        if args[0] == "-n":
            rows = int(args[1])
        else:
            rounds = int(args[1])
        args = args[2:]
    if not args:
        raise SystemExit(__doc__)
    sqldir = args[0]
    variants = [("base", None)] + [tuple(a.split("=", 1)) for a in args[1:]]
    base = sorted(glob.glob(os.path.join(sqldir, "00[1-7]_*.sql")))
    d = tempfile.mkdtemp(prefix="hotpath-")
    as_user = []
    if os.getuid() == 0:
        pw = pwd.getpwnam("postgres")
        os.chown(d, pw.pw_uid, pw.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    pgbin = sorted(glob.glob("/usr/lib/postgresql/*/bin"))[-1]
    pgport = free_port()
    data = os.path.join(d, "data")
    subprocess.run(as_user + [pgbin + "/initdb", "-A", "trust", "-U", "postgres", "-E", "UTF8",
                              "--no-sync", "-D", data], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(as_user + [pgbin + "/pg_ctl", "-w", "-t", "30", "-D", data, "-l",
                              d + "/postgres.log", "-o", f"-p {pgport} -k {d} "
                              "-c listen_addresses=127.0.0.1 -c fsync=off", "start"],
                   check=True, stdout=subprocess.DEVNULL)
    conninfo = f"host=127.0.0.1 port={pgport} user=postgres dbname=postgres"

    def psql(text, one=False):
        r = subprocess.run([pgbin + "/psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"]
                           + (["-1"] if one else []) + [conninfo],
                           input=text, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit("psql: " + r.stderr)
        return r.stdout
    try:
        for name, extra in variants:
            s = f'"v_{name}"'
            psql(f"CREATE SCHEMA {s}")
            for f in base + (extra.split("+") if extra else []):
                psql(open(f).read().replace("@schema@", s), one=True)
            psql(f"INSERT INTO {s}.dispatcher (instance, host, pid) VALUES ('d0', 'h', 1)")
            idx = psql(f"SELECT string_agg(indexname, ' ' ORDER BY indexname) FROM pg_indexes "
                       f"WHERE schemaname = 'v_{name}' AND tablename = 'job'").strip()
            print(f"{name}: {idx}", flush=True)
        sums = {n: [] for n, _ in variants}
        wal = {n: [] for n, _ in variants}
        for r in range(rounds):
            for name, _ in variants:
                s = f'"v_{name}"'
                psql(f"""TRUNCATE {s}.job RESTART IDENTITY;
SET session_replication_role = replica;
INSERT INTO {s}.job (service, priority, job)
SELECT 'svc' || (g % 20), g % 5, jsonb_build_object('command', 'convert', 'args',
    jsonb_build_array('in' || g || '.png')) FROM generate_series(1, {rows}) g;
RESET session_replication_role;
VACUUM ANALYZE {s}.job;
CHECKPOINT;""")
                out = psql(f"""SELECT pg_current_wal_lsn() AS lsn0 \\gset
\\timing on
UPDATE {s}.job SET state = 'claimed', runner_instance = 'd0', attempts = attempts + 1,
    claims = claims + 1 WHERE state = 'queued';
UPDATE {s}.job SET state = 'running', started_at = now() WHERE state = 'claimed';
UPDATE {s}.job SET state = 'done', finished_at = now(),
    receipt = '{{"exit_code": 0}}' WHERE state = 'running';
\\timing off
SELECT 'wal ' || pg_wal_lsn_diff(pg_current_wal_lsn(), :'lsn0');
""")
                ms = [float(x) for x in re.findall(r"Time: ([0-9.]+) ms", out)]
                if len(ms) != 3:
                    raise SystemExit("no timing: " + out)
                sums[name].append(sum(ms))
                wal[name].append(int(re.search(r"wal ([0-9]+)", out).group(1)))
                print(f"round {r + 1} {name}: claim {ms[0]:.0f} start {ms[1]:.0f} "
                      f"finish {ms[2]:.0f} ms, WAL {wal[name][-1] / 1e6:.1f} MB", flush=True)
        print(f"\n| variant | claim+start+finish of {rows} rows, median of {rounds} | min | max "
              f"| WAL, median | HOT updates |\n|---|---|---|---|---|---|")
        for name, _ in variants:
            hot = psql(f"SELECT n_tup_hot_upd || ' of ' || n_tup_upd FROM pg_stat_user_tables "
                       f"WHERE schemaname = 'v_{name}' AND relname = 'job'").strip()
            v = sums[name]
            print(f"| {name} | {statistics.median(v) / 1000:.2f} s | {min(v) / 1000:.2f} s "
                  f"| {max(v) / 1000:.2f} s | {statistics.median(wal[name]) / 1e6:.1f} MB "
                  f"| {hot} |")
    finally:
        subprocess.run(as_user + [pgbin + "/pg_ctl", "-D", data, "-m", "immediate", "stop"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
