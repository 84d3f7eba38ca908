#!/usr/bin/env python3
"""test_console_execdispatch.py - execdispatch's console in a real browser.

Starts a private PostgreSQL (initdb in a temporary directory, as the
user postgres when run as root), migrates it, and runs execdispatch with
a token and its metrics address; no execserver answers, so the jobs stay
queued. 250 jobs of the service encode (priorities 2, 0, -2) and one of
thumb are submitted. Without the token the API answers 401 and the page
shows only the sign-in form; a wrong token is refused. With it the page
shows 251 queued jobs and the dispatcher; the list of encode's queued
jobs is paged through (5 pages of 50, keyset: every job once, in claim
order, then an empty page); encode's jobs of any state are refused (400,
said in the page); a job is opened by id, its payload shown, and
cancelled from the page (its state then cancelled, in the page and in
the database). A cancel without the token or from another site is
refused.

A service is paused and resumed from the page (the answer in
the page's status line, which the overview's re-render every 2 s leaves
alone; the row in paused_service); a failed job (its claim and failure
written as a dispatcher writes them) is retried from the page, fails
again, and its page shows both attempts with their receipts. No
horizontal overflow at 390 px; any JavaScript error fails the test (the
401 answers of the sign-in and the 400 of the refused list aside).

Run by console_execdispatch.sh (make check) in the build directory;
EXECDISPATCH_BIN names the daemon.  With --screenshot PATH it saves the
page (and PATH-dark.png) after adding jobs done and one running (written
as a dispatcher writes them) and pausing the service probe.  Every wait is a poll with a
deadline.
"""
import glob
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request

from browser_lib import browser, fail, free_port, http, js_errors, step, wait_for
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

TOKEN = "dispatch-console-token-31"
JOBS = 250
PAGE = 50
class Bench:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="dconsole-test-")
        self.as_user = []
        if os.getuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        pgbin = sorted(glob.glob("/usr/lib/postgresql/*/bin"))[-1]
        self.psql_bin = os.path.join(pgbin, "psql")
        self.pgport = free_port()
        data = os.path.join(self.dir, "data")
        subprocess.run(self.as_user + [os.path.join(pgbin, "initdb"), "-A", "trust", "-U",
                                       "postgres", "-E", "UTF8", "--no-sync", "-D", data],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run(self.as_user + [os.path.join(pgbin, "pg_ctl"), "-w", "-t", "30", "-D", data,
                                       "-l", os.path.join(self.dir, "postgres.log"), "-o",
                                       f"-p {self.pgport} -k {self.dir} "
                                       "-c listen_addresses=127.0.0.1 -c fsync=off", "start"],
                       check=True, stdout=subprocess.DEVNULL)
        self.pgctl = (os.path.join(pgbin, "pg_ctl"), data)
        self.conninfo = f"host=127.0.0.1 port={self.pgport} user=postgres dbname=postgres"
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        cfg = os.path.join(self.dir, "execdispatch.yml")
        with open(cfg, "w") as f:
            f.write(f"""database: "{self.conninfo}"
execservers: [ws://127.0.0.1:1]
authToken: {TOKEN}
metrics: 127.0.0.1:{self.port}
""")
        os.chmod(cfg, 0o600)
        bin_ = os.environ.get("EXECDISPATCH_BIN") or os.path.join(os.getcwd(), "execdispatch")
        os.environ.setdefault("EXECDISPATCH_SQL_DIR", os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "..", "..", "sql", "migrations"))
        subprocess.run([bin_, "--migrate", "-c", cfg], check=True, stdout=subprocess.DEVNULL)
        self.log = open(os.path.join(self.dir, "execdispatch.log"), "w")
        self.daemon = subprocess.Popen([bin_, "-f", "-c", cfg], stdout=self.log,
                                       stderr=subprocess.STDOUT)
        wait_for("execdispatch to answer", self._answers)

    def _answers(self):
        if self.daemon.poll() is not None:
            fail("execdispatch exited: " + open(self.log.name).read()[-2000:])
        try:
            return http(self.base + "/console/api/overview")[0] == 401
        except OSError:
            return False

    def sql(self, text):
        r = subprocess.run([self.psql_bin, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                            self.conninfo, "-c", text], check=True, capture_output=True, text=True)
        return r.stdout.strip()

    def api(self, path):
        code, body = http(self.base + path, TOKEN)
        return json.loads(body) if code == 200 else None

    def close(self):
        self.daemon.send_signal(signal.SIGTERM)
        try:
            self.daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.daemon.kill()
            self.daemon.wait()
        self.log.close()
        subprocess.run(self.as_user + [self.pgctl[0], "-D", self.pgctl[1], "-m", "immediate",
                                       "stop"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(self.dir, ignore_errors=True)


def cell_text(drv, css):
    return drv.execute_script("""
        return Array.from(document.querySelectorAll(arguments[0] + ' tbody tr'),
            (tr) => Array.from(tr.cells, (c) => c.textContent).join('|'));""", css)


def press_twice(drv, key, label):
    """An action button: pressed, then its confirmation."""
    def press(want):
        def go():
            b = drv.find_elements(By.CSS_SELECTOR, f'[data-key="{key}"]')
            if not b or not b[0].text.startswith(want):
                return False
            b[0].click()
            return True
        return go
    wait_for(f"the {label} button", press(label))
    wait_for(f"the Confirm {label.lower()} button", press("Confirm " + label.lower()))


def main():
    shot = sys.argv[2] if len(sys.argv) == 3 and sys.argv[1] == "--screenshot" else None
    bench = Bench()
    drv = None
    log = []
    try:
        bench.sql(f"SELECT execdispatch.submit('encode', jsonb_build_object('command', 'ffmpeg', "
                  f"'args', jsonb_build_array('-i', 'clip' || g || '.mov')), (g % 3 - 1) * 2) "
                  f"FROM generate_series(1, {JOBS}) g")
        bench.sql("SELECT execdispatch.submit('thumb', '{\"command\": \"convert\"}')")
        for path in ("/console/api/overview", "/console/api/jobs", "/console/api/job?id=1"):
            if http(bench.base + path)[0] != 401:
                fail(path + " without the token was not refused")
        with urllib.request.urlopen(bench.base + "/console", timeout=5) as r:
            if "script-src 'self'" not in r.headers.get("Content-Security-Policy", ""):
                fail("/console: no CSP")

        drv = browser()
        drv.get(bench.base + "/console")
        wait_for("the sign-in form", lambda: drv.find_element(By.ID, "signin").is_displayed())
        if drv.find_element(By.ID, "console").is_displayed():
            fail("data shown without the token")
        drv.find_element(By.ID, "token").send_keys("wrong-token\n")
        wait_for("the refusal", lambda: "refused" in drv.find_element(By.ID, "signin-error").text)
        drv.find_element(By.ID, "token").send_keys(TOKEN + "\n")
        wait_for("251 queued", lambda: f"queued|{JOBS + 1}|" in cell_text(drv, "#states"))
        wait_for("the dispatcher", lambda: cell_text(drv, "#dispatchers"))
        wait_for("the service encode", lambda: any(r.startswith("encode|250|")
                                                   for r in cell_text(drv, "#services")))

        # encode's queued jobs, page by page
        Select(drv.find_element(By.ID, "f-state")).select_by_visible_text("queued")
        drv.find_element(By.ID, "f-service").send_keys("encode")
        drv.find_element(By.CSS_SELECTOR, "#filter button[type=submit]").click()
        seen = []
        for page in range(1, JOBS // PAGE + 1):
            wait_for(f"page {page}", lambda p=page: drv.find_element(By.ID, "pageinfo").text
                     == f"page {p}, {PAGE} jobs")
            rows = cell_text(drv, "#jobs")
            if len(rows) != PAGE:
                fail(f"page {page}: {len(rows)} rows")
            seen += [(-int(r.split("|")[3]), int(r.split("|")[0])) for r in rows]
            drv.find_element(By.ID, "next").click()
        wait_for("the empty page", lambda: "no jobs" in drv.find_element(By.ID, "jobs").text)
        if len(set(seen)) != JOBS or seen != sorted(seen):
            fail(f"the pages did not hold every job once in claim order: {seen[:5]}...")
        step(f"{JOBS} jobs seen once each over {JOBS // PAGE} pages, in claim order")

        # one service's jobs are listed per state: any state with a service
        # is refused (the list of every state walks job_pkey)
        got, body = http(f"{bench.base}/console/api/jobs?service=encode&limit=50", TOKEN)
        if got != 400 or b"with a state" not in body:
            fail(f"a service without a state: {got} {body[:80]!r}, not 400")
        Select(drv.find_element(By.ID, "f-state")).select_by_visible_text("any")
        drv.find_element(By.CSS_SELECTOR, "#filter button[type=submit]").click()
        wait_for("the refusal in the page", lambda: "with a state" in
                 drv.find_element(By.ID, "pageinfo").text)
        Select(drv.find_element(By.ID, "f-state")).select_by_visible_text("queued")
        step("a service without a state refused (400, said in the page)")

        # a job by id: shown, cancelled from the page
        jid = str(seen[7][1])
        drv.find_element(By.ID, "f-id").send_keys(jid)
        drv.find_element(By.ID, "f-open").click()
        wait_for("the job's page", lambda: drv.find_element(By.ID, "job-state").text
                 == f"Job {jid}: queued")
        if "clip" not in drv.find_element(By.ID, "job").text:
            fail("the payload is not shown")
        url = f"{bench.base}/console/api/cancel?id={jid}"
        for token, headers, want in ((None, {}, 401),
                                     (TOKEN, {"Origin": "http://evil.example"}, 403),
                                     (TOKEN, {"Sec-Fetch-Site": "cross-site"}, 403)):
            got = http(url, token, "POST", headers)[0]
            if got != want:
                fail(f"POST {url} {headers}: {got}, not {want}")
        if bench.sql(f"SELECT state FROM execdispatch.job WHERE id = {jid}") != "queued":
            fail("a refused cancel changed the job")
        press_twice(drv, "cancel-" + jid, "Cancel")
        wait_for("the job cancelled in the page", lambda: drv.find_element(
            By.ID, "job-state").text == f"Job {jid}: cancelled")
        if bench.sql(f"SELECT state FROM execdispatch.job WHERE id = {jid}") != "cancelled":
            fail("the job is not cancelled in the database")

        # pause and resume from the page: the answer in the page, the
        # service in paused_service, then out of it
        features = bench.api("/console/api/overview")["features"]
        if not (features.get("pause") and features.get("resume") and features.get("retry")
                and features.get("attempts")):
            fail(f"the console does not offer every action: {features}")
        paused = "SELECT count(*) FROM execdispatch.paused_service WHERE service = 'thumb'"
        press_twice(drv, "pause-thumb", "Pause")
        wait_for("the pause's answer", lambda: drv.find_element(By.ID, "answer").text
                 == "Pause thumb: paused")
        if bench.sql(paused) != "1":
            fail("thumb is not paused in the database")
        press_twice(drv, "resume-thumb", "Resume")
        wait_for("the resume's answer", lambda: drv.find_element(By.ID, "answer").text
                 == "Resume thumb: resumed")
        if bench.sql(paused) != "0":
            fail("thumb is still paused in the database")
        step("thumb paused and resumed from the page")

        # a failed job retried from the page, failed again: two attempts
        # with their receipts on its page (no execserver runs here, so the
        # claim and the failure are written as a dispatcher writes them)
        fid = bench.sql("SELECT execdispatch.submit('probe', '{\"command\": \"sh\"}')")
        runner = bench.sql("SELECT instance FROM execdispatch.dispatcher LIMIT 1")
        def run_and_fail(code):
            bench.sql(f"BEGIN; UPDATE execdispatch.job SET state = 'running', "
                      f"claims = claims + 1, attempts = attempts + 1, runner_instance = "
                      f"'{runner}', started_at = now() WHERE id = {fid}; "
                      f"UPDATE execdispatch.job SET state = 'failed', finished_at = now(), "
                      f"error = 'exit {code}', receipt = jsonb_build_object('exit_code', {code}) "
                      f"WHERE id = {fid}; COMMIT")
        run_and_fail(3)
        drv.find_element(By.ID, "f-id").clear()
        drv.find_element(By.ID, "f-id").send_keys(fid)
        drv.find_element(By.ID, "f-open").click()
        wait_for("the failed job's page", lambda: drv.find_element(By.ID, "job-state").text
                 == f"Job {fid}: failed")
        press_twice(drv, "retry-" + fid, "Retry")
        wait_for("the job queued again in the page", lambda: drv.find_element(
            By.ID, "job-state").text == f"Job {fid}: queued" and drv.find_element(
            By.ID, "answer").text == f"Retry {fid}: requeued")
        if bench.sql(f"SELECT state || ' ' || attempts FROM execdispatch.job WHERE id = {fid}") \
                != "queued 0":
            fail("the retried job is not queued (attempts 0) in the database")
        run_and_fail(4)
        drv.find_element(By.ID, "f-open").click()
        wait_for("the job failed again in the page", lambda: drv.find_element(
            By.ID, "job-state").text == f"Job {fid}: failed")
        shown = drv.execute_script(
            "const h = [...document.querySelectorAll('#job h3')].find(e => e.textContent "
            "=== 'Attempts'); return h ? h.nextElementSibling.textContent : null")
        if shown is None:
            fail("the job's page shows no attempts")
        tried = json.loads(shown)
        if [(a.get("state"), (a.get("receipt") or {}).get("exit_code")) for a in tried] \
                != [("failed", 3), ("failed", 4)]:
            fail(f"the attempts shown are not the two failures with receipts: {tried}")
        step("a failed job retried from the page; its two attempts shown with receipts")

        drv.set_window_size(390, 844)
        wait_for("the narrow layout", lambda: drv.execute_script(
            "return document.documentElement.scrollWidth <= window.innerWidth + 1"))
        drv.set_window_size(1280, 1000)
        if shot:  # jobs in every state, a paused service, the first page again
            bench.sql("SELECT execdispatch.submit('thumb', jsonb_build_object('command', "
                      "'convert', 'args', jsonb_build_array('img' || g || '.png'))) "
                      "FROM generate_series(1, 7) g")
            bench.sql(f"BEGIN; UPDATE execdispatch.job SET state = 'running', claims = 1, "
                      f"attempts = 1, runner_instance = '{runner}', created_at = now() - "
                      f"interval '30 s', start_after = now() - interval '30 s', "
                      f"started_at = now() - (id % 5 + 1) * interval '1 s' "
                      f"WHERE service = 'thumb'; "
                      f"UPDATE execdispatch.job SET state = 'done', finished_at = now(), "
                      f"receipt = jsonb_build_object('exit_code', 0) WHERE service = 'thumb' "
                      f"AND id <> (SELECT max(id) FROM execdispatch.job WHERE service = "
                      f"'thumb'); COMMIT")
            bench.sql("SELECT execdispatch.pause('probe')")
            drv.find_element(By.ID, "first").click()
            drv.find_element(By.ID, "first").click()
            wait_for("page 1 again", lambda: drv.find_element(By.ID, "pageinfo").text
                     == f"page 1, {PAGE} jobs")
            wait_for("the counts of every state", lambda: all(
                w in cell_text(drv, "#states") for w in ("cancelled|1|", "done|7|", "failed|1|",
                                                         "running|1|")))
            drv.set_window_size(1280, 1500)
            drv.execute_script("window.scrollTo(0, 0)")
            drv.save_screenshot(shot)
            print("screenshot: " + shot)
            drv.execute_cdp_cmd("Emulation.setEmulatedMedia", {
                "features": [{"name": "prefers-color-scheme", "value": "dark"}]})
            drv.save_screenshot(shot.replace(".png", "-dark.png"))
        bad = js_errors(drv, log, [("/console/api/", "(Unauthorized)"),
                                    ("/console/api/jobs?service=encode&limit=", "(Bad Request)")])
        if bad:
            fail("errors in the browser's console: " + json.dumps(bad))
        print(f"ok: sign-in, counts, {JOBS // PAGE} pages, a job cancelled, a service paused and resumed, a job "
              f"retried in the browser ({len(log)} console entries, none an error)")
    finally:
        if drv:
            drv.quit()
        bench.close()


if __name__ == "__main__":
    main()
