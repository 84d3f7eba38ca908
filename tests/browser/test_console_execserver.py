#!/usr/bin/env python3
"""test_console_execserver.py - the execserver's console in a real browser.

Starts a real execserver (2 slots, a token) and drives headless Chromium
through the page: without the token only the sign-in form shows and
/status answers 401; a wrong token is refused; with the token the page
shows the slots.  Two long jobs (execctl run, in the background) fill the
slots (one for a client id that is markup: shown as text).  POST
/jobs/ID/cancel without the token or from another site is refused (and
that job keeps running).  A third job waits: the test sees it in the
waiting line at #1, cancels a slot holder from the page, sees the waiting
job move to running, cancels it too and sees its failure (error
cancelled) in the last failures.  Any JavaScript error in the browser's
console fails the test.

Run by console_execserver.sh (make check).  EXECSERVER_BIN names the
daemon; execctl is beside it.  With --screenshot PATH it also fills the
line with a few more wants and saves the page, and PATH-dark.png in the
dark scheme (scripts/screenshots.sh).  Every wait is a poll with a
deadline; the one sleep is the screenshot's few seconds of rate samples.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from browser_lib import DEADLINE, browser, fail, free_port, http, js_errors, step, wait_for
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

TOKEN = "console-test-token-31"
# a client id that is markup: the page must show it as text
HOLDER2 = "holder-2<i>x</i>"


class Bench:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="console-test-")
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.procs = []
        bin_ = os.environ.get("EXECSERVER_BIN") or os.path.join(os.getcwd(), "execserver")
        self.execserver = bin_
        self.execctl = os.path.join(os.path.dirname(bin_), "execctl")
        cfg = os.path.join(self.dir, "execserver.yml")
        os.makedirs(os.path.join(self.dir, "tmp"))
        with open(cfg, "w") as f:
            f.write(f"""addr: 127.0.0.1:{self.port}
authToken: {TOKEN}
tempDir: {self.dir}/tmp
handlers: 2
drainTimeoutSec: 1
allowRootJobs: true
waitgroups:
  video:
    processes: 2
services:
  encode:
    waitgroup: video
    commands:
      sleep: {{ prog: sleep }}
""")
        self.log = open(os.path.join(self.dir, "execserver.log"), "w")
        self.daemon = subprocess.Popen([bin_, "-f", "-c", cfg], stdout=self.log,
                                       stderr=subprocess.STDOUT)
        wait_for("the execserver to answer",
                 lambda: self._answers() and http(self.base + "/status")[0] == 401)

    def _answers(self):
        if self.daemon.poll() is not None:
            fail("the execserver exited: " + open(self.log.name).read()[-2000:])
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def run(self, client, seconds, priority=0):
        """execctl run in the background: a job of `seconds` of sleep."""
        env = dict(os.environ, EXECCTL_TOKEN=TOKEN)
        p = subprocess.Popen([self.execctl, "run", "-q", "-n", "-a", f"ws://127.0.0.1:{self.port}",
                              "-s", "encode", "-P", str(priority), "--client", client, "--",
                              "sleep", str(seconds)], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
        self.procs.append(p)
        return p

    def status(self):
        code, body = http(self.base + "/status?detail=1", TOKEN)
        return json.loads(body) if code == 200 else None

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        self.daemon.send_signal(signal.SIGTERM)
        try:
            self.daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.daemon.kill()
            self.daemon.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def text_of(drv, css):
    return drv.find_element(By.CSS_SELECTOR, css).text


def row_text(drv, css, needle):
    """The cells of the first row under css that holds needle, joined by
    "|", or "": read in one script, so a redraw cannot tear it."""
    return drv.execute_script("""
        for (const tr of document.querySelectorAll(arguments[0] + ' tbody tr'))
            if (tr.textContent.includes(arguments[1]))
                return Array.from(tr.cells, (c) => c.textContent).join('|');
        return '';""", css, needle)


def cancel_button(drv, client):
    return drv.execute_script("""
        for (const tr of document.querySelectorAll('#running tbody tr'))
            if (tr.textContent.includes(arguments[0])) return tr.querySelector('button');
        return null;""", client)


def click_cancel(drv, client):
    """Cancel, then confirm, on the running job of client (the table is
    redrawn each second: look the button up again for each click)."""
    def press(label):
        def go():
            b = cancel_button(drv, client)
            if not b or b.text != label:
                return False
            b.click()
            return True
        return go
    wait_for(f"the Cancel button of {client}", press("Cancel"))
    wait_for(f"the Confirm cancel button of {client}", press("Confirm cancel"))


def main():
    shot = None
    if len(sys.argv) == 3 and sys.argv[1] == "--screenshot":
        shot = sys.argv[2]
    bench = Bench()
    drv = None
    log = []
    try:
        # no token: /status refused, the page shows the sign-in form alone
        if http(bench.base + "/status?detail=1")[0] != 401:
            fail("/status?detail=1 without the token was not refused")
        for path, ctype in (("/console", "text/html"), ("/console/console.js", "text/javascript"),
                            ("/console/common.css", "text/css")):
            with urllib.request.urlopen(bench.base + path, timeout=5) as r:
                csp = r.headers.get("Content-Security-Policy", "")
                if not r.headers.get("Content-Type", "").startswith(ctype) or \
                        "script-src 'self'" not in csp or \
                        r.headers.get("X-Content-Type-Options") != "nosniff":
                    fail(f"{path}: headers {dict(r.headers)}")
        drv = browser()
        drv.get(bench.base + "/console")
        wait_for("the sign-in form", lambda: drv.find_element(By.ID, "signin").is_displayed())
        if drv.find_element(By.ID, "console").is_displayed() or \
                drv.find_elements(By.CSS_SELECTOR, "[data-waitgroup]"):
            fail("data shown without the token")
        got = drv.execute_async_script(
            "const done = arguments[0]; fetch('/status').then(r => done(r.status));")
        if got != 401:
            fail(f"the page's fetch of /status without the token: {got}")

        # a wrong token is refused, and still nothing shows
        drv.find_element(By.ID, "token").send_keys("wrong-token\n")
        wait_for("the refusal", lambda: "refused" in text_of(drv, "#signin-error"))
        if drv.find_element(By.ID, "console").is_displayed():
            fail("data shown with a wrong token")

        # the token: the slots of waitgroup video
        drv.find_element(By.ID, "token").send_keys(TOKEN + "\n")
        wait_for("the waitgroup", lambda: drv.find_elements(
            By.CSS_SELECTOR, '[data-waitgroup="video"]'))
        if TOKEN in drv.current_url:
            fail("the token went into a URL")

        # two jobs fill the slots, a third waits
        bench.run("holder-1", 120)
        holder2 = "holder-2" if shot else HOLDER2  # the screenshot shows ordinary names
        bench.run(holder2, 120)
        wait_for("both holders running", lambda: row_text(drv, "#running", "holder-1")
                 and row_text(drv, "#running", "holder-2"))
        if holder2 not in row_text(drv, "#running", "holder-2") or \
                drv.find_elements(By.CSS_SELECTOR, "#running i"):
            fail("a client id was not shown as text")
        # the action refuses a request without the token or from another site
        job = [j for j in bench.status()["jobs"] if j["client"] == holder2][0]
        url = f"{bench.base}/jobs/{job['id']}/cancel"
        for token, headers, want in ((None, {}, 401),
                                     (TOKEN, {"Origin": "http://evil.example"}, 403),
                                     (TOKEN, {"Sec-Fetch-Site": "cross-site"}, 403),
                                     (TOKEN, {"Origin": bench.base, "Sec-Fetch-Site": "same-site"},
                                      403)):
            got = http(url, token, "POST", headers)[0]
            if got != want:
                fail(f"POST {url} {headers} with token {token}: {got}, not {want}")
        waiter = bench.run("waiter", 120)
        wait_for("the waiter in the waiting line at #1", lambda: row_text(
            drv, '[data-waitgroup="video"]', "waiter").startswith("1|"))

        # a holder cancelled from the page: the waiter moves to running
        click_cancel(drv, "holder-1")
        wait_for("the waiter running", lambda: row_text(drv, "#running", "waiter"))
        if row_text(drv, '[data-waitgroup="video"]', "waiter"):
            fail("the waiter is still in the waiting line")

        # the waiter cancelled from the keyboard: Cancel pressed, the focus
        # stays on its button across a redraw, Enter confirms; its failure
        # is then listed
        wait_for("the Cancel button of waiter", lambda: cancel_button(drv, "waiter"))
        cancel_button(drv, "waiter").send_keys(Keys.ENTER)
        stamp = text_of(drv, "#updated")
        wait_for("a redraw", lambda: text_of(drv, "#updated") != stamp)
        row = drv.execute_script(
            "const b = document.activeElement;"
            "return b.tagName + '|' + b.textContent + '|' + (b.closest('tr') || b).textContent;")
        if not row.startswith("BUTTON|Confirm cancel|") or "waiter" not in row:
            fail(f"the focus left the waiter's button: {row[:200]!r}")
        drv.switch_to.active_element.send_keys(Keys.ENTER)
        wait_for("the waiter's failure",
                 lambda: "cancelled" in row_text(drv, "#failures", "waiter"))
        try:
            rc = waiter.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            fail("execctl of the waiter did not end after its cancel")
        err = waiter.stderr.read().decode()
        if rc == 0 or "cancelled" not in err:
            fail(f"execctl of the waiter: exit {rc}, {err!r}")

        # the rates come from counters: the hand-over of holder-1's slot
        wait_for("a hand-over counted", lambda: (bench.status() or {}).get("handovers", 0) >= 1)
        wait_for("the plots", lambda: len(drv.find_elements(By.CSS_SELECTOR, "[data-rate] svg")) == 4)

        # the refused cancels above left holder-2 alone, seconds later
        if not any(j["client"] == holder2 and j["state"] == "running"
                   for j in bench.status()["jobs"]):
            fail("a refused cancel stopped the job")

        # readable on a phone: nothing wider than the screen but the tables' own scroll
        drv.set_window_size(390, 844)
        wait_for("the narrow layout", lambda: drv.execute_script(
            "return document.documentElement.scrollWidth <= window.innerWidth + 1"))
        drv.set_window_size(1280, 1000)

        if shot:
            # one takes the slot the waiter left, three wait
            for client, prio in (("render-farm", 2), ("batch-7", -2), ("batch-8", -2),
                                 ("interactive-3", 2)):
                bench.run(client, 120, priority=prio)
            wait_for("three waiting", lambda: len((bench.status() or {}).get("waiting", [])) == 3)
            time.sleep(6)  # a few seconds of rate samples for the plots (the time is the point)
            drv.set_window_size(1280, 1400)
            drv.save_screenshot(shot)
            print("screenshot: " + shot)
            dark = shot.replace(".png", "-dark.png")
            drv.execute_cdp_cmd("Emulation.setEmulatedMedia", {
                "features": [{"name": "prefers-color-scheme", "value": "dark"}]})
            drv.save_screenshot(dark)
            print("screenshot: " + dark)

        bad = js_errors(drv, log, [("/status", "(Unauthorized)")])
        if bad:
            fail("errors in the browser's console: " + json.dumps(bad))
        print(f"ok: sign-in, waiting line, running, cancel and failure seen in the browser "
              f"({len(log)} console entries, none an error)")
    finally:
        if drv:
            drv.quit()
        bench.close()


if __name__ == "__main__":
    main()
