#!/usr/bin/env python3
"""consolebench.py - the execdispatch console's pages at a million rows.

A private PostgreSQL (initdb in a temporary directory, fsync off, on
loopback; as the user postgres when run as root), migrated, filled with
1,000,000 jobs over the last 7 days in id order (93 % done, 5 % failed,
2 % cancelled among the finished; the newest 20,000 queued over 20
services and 5 priorities, 2,000 before them held by four dispatchers),
analyzed; then execdispatch with its console (no execserver answers: it
claims nothing, and its janitor keeps every row).  Each page of the
console is asked ROUNDS times over HTTP with the token after 3 warm-ups,
one at a time; its answer time (request to the last byte) gives p50 and
p95.  Writes OUT/row-console.md and prints it.

usage: consolebench.py [-q] -o OUT   (EXECDISPATCH_BIN, EXECDISPATCH_SQL_DIR)
"""
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

TOKEN = "consolebench"
ROUNDS = 100


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    quick = "-q" in sys.argv
    out = sys.argv[sys.argv.index("-o") + 1] if "-o" in sys.argv else "."
    rows = 100000 if quick else 1000000
    rounds = 20 if quick else ROUNDS
    d = tempfile.mkdtemp(prefix="consolebench-")
    as_user = []
    if os.getuid() == 0:
        pw = pwd.getpwnam("postgres")
        os.chown(d, pw.pw_uid, pw.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    pgbin = sorted(glob.glob("/usr/lib/postgresql/*/bin"))[-1]
    pgport, port = free_port(), free_port()
    data = os.path.join(d, "data")
    subprocess.run(as_user + [pgbin + "/initdb", "-A", "trust", "-U", "postgres", "-E", "UTF8",
                              "--no-sync", "-D", data], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(as_user + [pgbin + "/pg_ctl", "-w", "-t", "30", "-D", data, "-l",
                              d + "/postgres.log", "-o", f"-p {pgport} -k {d} "
                              "-c listen_addresses=127.0.0.1 -c fsync=off", "start"],
                   check=True, stdout=subprocess.DEVNULL)
    conninfo = f"host=127.0.0.1 port={pgport} user=postgres dbname=postgres"
    daemon = None
    try:
        cfg = d + "/execdispatch.yml"
        with open(cfg, "w") as f:
            f.write(f'database: "{conninfo}"\nexecservers: [ws://127.0.0.1:1]\n'
                    f"authToken: {TOKEN}\nmetrics: 127.0.0.1:{port}\nretainDoneDays: 0\n")
        os.chmod(cfg, 0o600)
        bin_ = os.environ.get("EXECDISPATCH_BIN", "./execdispatch")
        subprocess.run([bin_, "--migrate", "-c", cfg], check=True, stdout=subprocess.DEVNULL)

        def sql(text):
            r = subprocess.run([pgbin + "/psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                                conninfo, "-c", text], capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit("psql: " + r.stderr)
            return r.stdout.strip()
        t0 = time.monotonic()
        q0, h0 = rows - rows // 50, rows - rows // 50 - 2000
        sql(f"""SET session_replication_role = replica;
INSERT INTO execdispatch.dispatcher (instance, host, pid, heartbeat_at)
SELECT 'd' || g, 'h', g, now() + interval '1 day' FROM generate_series(0, 3) g;
INSERT INTO execdispatch.job (service, priority, job, state, attempts, claims, runner_instance,
    start_after, created_at, started_at, finished_at, error, receipt)
SELECT 'svc' || (g % 20), (g / 20 % 5 - 2) * 2,
    jsonb_build_object('command', 'convert', 'args', jsonb_build_array('in' || g || '.png')),
    s, CASE WHEN s = 'queued' THEN 0 ELSE 1 END, CASE WHEN s = 'queued' THEN 0 ELSE 1 END,
    CASE WHEN s IN ('claimed', 'running') THEN 'd' || (g % 4) END, c, c,
    CASE WHEN s NOT IN ('queued', 'claimed') THEN c + interval '1 s' END,
    CASE WHEN s IN ('done', 'failed', 'cancelled') THEN c + make_interval(secs => 1 + g % 7) END,
    CASE WHEN s = 'failed' THEN 'exit 1' END,
    CASE WHEN s IN ('done', 'failed') THEN '{{"exit_code": 0, "duration_ms": 2000}}'::jsonb END
FROM generate_series(1, {rows}) g,
    LATERAL (SELECT now() - make_interval(secs => ({rows} - g) * 604800.0 / {rows}) AS c,
        CASE WHEN g > {q0} THEN 'queued' WHEN g > {h0} THEN
            CASE WHEN g % 2 = 0 THEN 'running' ELSE 'claimed' END
            WHEN g % 100 < 93 THEN 'done' WHEN g % 100 < 98 THEN 'failed'
            ELSE 'cancelled' END AS s) x;
RESET session_replication_role;""")
        sql("VACUUM ANALYZE execdispatch.job")  # not in the INSERT's transaction
        fill = time.monotonic() - t0
        mid = sql(f"SELECT id FROM execdispatch.job WHERE id = {rows // 2}")
        since = urllib.parse.quote(sql("SELECT (now() - interval '1 day')::text"))
        tomorrow = urllib.parse.quote(sql("SELECT (now() + interval '1 day')::text"))
        qmid = sql(f"SELECT id FROM execdispatch.job WHERE state = 'queued' ORDER BY priority DESC, id "
                   f"LIMIT 1 OFFSET {rows // 100}")
        if os.environ.get("CONSOLEBENCH_EXPLAIN"):  # where an overview's time goes
            src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sql", "queries")
            for q in ("state_counts", "stats", "console_dispatchers", "console_features"):
                text = "".join(l for l in open(os.path.join(src, q + ".sql"))
                               if not l.lstrip().startswith("--"))
                text = text.replace("@schema@", '"execdispatch"')
                plan = sql("EXPLAIN (ANALYZE, SUMMARY) " + text)
                print(q, [l for l in plan.splitlines() if "Time:" in l], flush=True)
        log = open(d + "/execdispatch.log", "w")
        daemon = subprocess.Popen([bin_, "-f", "-c", cfg], stdout=log, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        pages = [
            ("overview (counts, services, dispatchers)", "/console/api/overview"),
            ("jobs, every state, first page", "/console/api/jobs?limit=50"),
            ("jobs, every state, after the middle row", f"/console/api/jobs?after={mid}&limit=50"),
            ("jobs, every state, since a day ago", f"/console/api/jobs?since={since}&limit=50"),
            ("jobs, every state, since tomorrow (none)", f"/console/api/jobs?since={tomorrow}&limit=50"),
            ("queued, first page", "/console/api/jobs?state=queued&limit=50"),
            ("queued, a page in the middle", f"/console/api/jobs?state=queued&after={qmid}&limit=50"),
            ("running", "/console/api/jobs?state=running&limit=50"),
            ("failed, first page", "/console/api/jobs?state=failed&limit=50"),
            ("cancelled of one service", "/console/api/jobs?state=cancelled&service=svc3&limit=50"),
            ("done, after the middle row", f"/console/api/jobs?state=done&after={mid}&limit=50"),
            ("a job", f"/console/api/job?id={mid}"),
            ("a queued job (with position)", f"/console/api/job?id={qmid}"),
        ]

        def ask(path):
            req = urllib.request.Request(base + path, headers={"Authorization": "Bearer " + TOKEN})
            t = time.monotonic()
            with urllib.request.urlopen(req, timeout=30) as r:
                r.read()
                if r.status != 200:
                    raise SystemExit(f"{path}: {r.status}")
            return (time.monotonic() - t) * 1000
        end = time.monotonic() + 30
        while True:
            try:
                ask("/console/api/overview")
                break
            except OSError:
                if time.monotonic() > end or daemon.poll() is not None:
                    raise SystemExit("execdispatch does not answer: " + open(log.name).read()[-2000:])
                time.sleep(0.2)
        lines = []
        for name, path in pages:
            for _ in range(3):
                ask(path)
            ms = sorted(ask(path) for _ in range(rounds))
            p50, p95 = ms[len(ms) // 2], ms[min(len(ms) - 1, int(len(ms) * 0.95))]
            lines.append(f"| {name} | {p50:.1f} ms | {p95:.1f} ms | {ms[-1]:.1f} ms |"
                         f" {'yes' if p95 < 200 else 'no'} |")
            print(lines[-1], flush=True)
        md = (f"The console's pages (docs/console.md) at {rows} rows (filled and analyzed in "
              f"{fill:.0f} s: most finished, the newest 2 % queued), each asked {rounds} times "
              f"one at a time over HTTP with the token (`bench/consolebench.py`): the answer "
              f"time from the request to its last byte, the dispatcher's console lane and "
              f"PostgreSQL included.  Target: p95 < 200 ms.\n\n"
              f"| page | p50 | p95 | max | p95 < 200 ms |\n|---|---|---|---|---|\n"
              + "\n".join(lines) + "\n")
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "row-console.md"), "w") as f:
            f.write(md)
        print(md)
    finally:
        if daemon:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                daemon.kill()
        subprocess.run(as_user + [pgbin + "/pg_ctl", "-D", data, "-m", "immediate", "stop"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
