"""browser_lib.py - what the consoles' browser tests share: the step log,
waits by polling with a deadline, a free port, plain HTTP asks, headless
Debian chromium through chromedriver, and the browser console's errors
(every SEVERE entry fails a test unless the test names it as expected)."""
import shutil
import socket
import sys
import time
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service

DEADLINE = 30.0  # seconds for any one condition on a loaded machine
T0 = time.monotonic()


def step(msg):
    print(f"{time.monotonic() - T0:6.1f}s {msg}", flush=True)


def fail(msg):
    step("FAIL: " + msg)
    sys.exit(1)


def wait_for(what, cond, timeout=DEADLINE):
    step("waiting for " + what)
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            v = cond()
            if v:
                return v
        except (StaleElementReferenceException, WebDriverException) as e:
            last = e  # the page redrew under us: look again
        time.sleep(0.1)
    fail("timed out waiting for " + what + (f" (last error: {last})" if last else ""))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(url, token=None, method="GET", headers=None):
    """(status, body) of one request, the bearer token added when given."""
    req = urllib.request.Request(url, method=method, headers=headers or {})
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def browser():
    o = webdriver.ChromeOptions()
    o.binary_location = shutil.which("chromium")
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1280,1000", "--no-first-run", "--disable-extensions"):
        o.add_argument(a)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=o)


def js_errors(drv, seen, expected):
    """The browser console's SEVERE entries so far, but the network errors
    the test expects: expected is a list of (url part, status text) pairs,
    e.g. ("/status", "(Unauthorized)").  Every entry is appended to seen."""
    bad = []
    for e in drv.get_log("browser"):
        seen.append(e)
        if e["level"] != "SEVERE":
            continue
        if e["source"] == "network" and any(
                part in e["message"] and status in e["message"] for part, status in expected):
            continue
        bad.append(e)
    return bad
