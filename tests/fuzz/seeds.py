#!/usr/bin/env python3
"""seeds.py - writes the seed corpora of the fuzz targets (tests/fuzz/corpus/).

Run from anywhere: python3 tests/fuzz/seeds.py.  It rewrites the files it
owns (named seed-*) and leaves every other file alone, in particular the
crash-* inputs kept as regression tests.  The seeds are small and each
stands for one path: valid client frames (masked, fragmented, control
frames) and each kind of framing error; every message type of
docs/protocol.md; real request heads; PROXY protocol headers; the payloads
of docs/job-payload.md; the cron specs of docs/cron.md;
the configurations of etc/ and tests/data/config/.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# ---- websocket frames (client to server: masked) ----

MASK = b"\x37\xfa\x21\x3d"


def frame(opcode, payload, fin=True, masked=True, rsv=0, length=None):
    if isinstance(payload, str):
        payload = payload.encode()
    b0 = (0x80 if fin else 0) | (rsv << 4) | opcode
    n = len(payload) if length is None else length
    mbit = 0x80 if masked else 0
    if n < 126:
        head = bytes([b0, mbit | n])
    elif n < 65536:
        head = bytes([b0, mbit | 126]) + struct.pack(">H", n)
    else:
        head = bytes([b0, mbit | 127]) + struct.pack(">Q", n)
    if not masked:
        return head + payload
    body = bytes(c ^ MASK[i % 4] for i, c in enumerate(payload))
    return head + MASK + body


def close(code=None, reason=b""):
    return frame(8, b"" if code is None else struct.pack(">H", code) + reason)


WANT = '{"type":"WANT","job_id":"42","service":"demo","priority":2}'

ws = {
    "text": frame(1, "hello"),
    "text-then-close": frame(1, WANT) + close(1000, b"bye"),
    "fragmented": frame(1, '{"type":"QU', fin=False) + frame(0, 'ERY","job_id":"7"}'),
    "fragmented-ping-between": frame(1, "hel", fin=False) + frame(9, "p")
                               + frame(0, "lo", fin=False) + frame(0, "!"),
    "ping-pong": frame(9, "1234") + frame(10, "abcd") + frame(9, ""),
    "close-empty": close(),
    "close-normal": close(1000),
    "close-private": close(4001, "app".encode()),
    "close-bad-code": close(1005),
    "close-one-byte": frame(8, b"\x03"),
    "binary": frame(2, b"\x00\x01\x02"),
    "unmasked": frame(1, "hello", masked=False),
    "control-too-long": frame(9, b"x" * 126),
    "control-fragmented": frame(9, "p", fin=False),
    "bad-utf8": frame(1, b"\xc3\x28"),
    "bad-utf8-split": frame(1, b"\xe2\x82", fin=False) + frame(0, b"\x28"),
    "utf8-split-ok": frame(1, b"\xe2\x82", fin=False) + frame(0, b"\xac"),
    "too-big": frame(1, b"a" * 5200),
    "too-big-fragments": frame(1, b"a" * 2600, fin=False) + frame(0, b"a" * 2600),
    "len16": frame(1, b"b" * 200),
    "direct-long": frame(1, b"c" * 3000) + frame(1, "next"),
    "direct-max": frame(1, b"d" * 4096),
    "direct-long-bad-utf8": frame(1, b"e" * 2999 + b"\xc3"),
    "past-direct": frame(1, b"f" * 4097),
    "len64-nonminimal": frame(1, "x", length=None)[:1] + bytes([0x80 | 127])
                        + struct.pack(">Q", 5) + MASK + b"\x00" * 5,
    "len64-huge": bytes([0x81, 0x80 | 127]) + struct.pack(">Q", 1 << 62) + MASK,
    "rsv": frame(1, "x", rsv=4),
    "opcode-reserved": frame(3, "x"),
    "continuation-first": frame(0, "x"),
    "text-inside-text": frame(1, "a", fin=False) + frame(1, "b"),
    "truncated": frame(1, "hello world")[:9],
    "owner-close": frame(1, "close") + frame(1, "after"),
    "owner-free": frame(1, "free") + frame(1, "after"),
    "after-close": close(1000) + frame(1, "late"),
    "many-small": b"".join(frame(1, str(i)) for i in range(20)),
}
for k, v in ws.items():
    write("ws_frames", k, v)

# ---- client messages (and the server's, which a client must not send) ----

TOKEN = "9b1f03c2a7d4e655"
msgs = {
    "want": WANT,
    "want-no-priority": '{"type":"WANT","job_id":"a-1","service":"demo"}',
    "want-null-priority": '{"type":"WANT","job_id":"a-1","service":"demo","priority":null}',
    "want-priority-big": '{"type":"WANT","job_id":"a","service":"s","priority":2147483648}',
    "want-priority-float": '{"type":"WANT","job_id":"a","service":"s","priority":1.5}',
    "unwant": '{"type":"UNWANT","job_id":"42"}',
    "job": json.dumps({"type": "JOB", "job_id": "42", "token": TOKEN,
                       "job": {"command": "wc", "args": ["/etc/hostname"]}}),
    "job-no-job": '{"type":"JOB","job_id":"42","token":"%s"}' % TOKEN,
    "job-bad-token": '{"type":"JOB","job_id":"42","token":"xyz","job":{}}',
    "decline": '{"type":"DECLINE","job_id":"42","token":"%s"}' % TOKEN,
    "query": '{"type":"QUERY","job_id":"42"}',
    "cancel": '{"type":"CANCEL","job_id":"42"}',
    "ack": '{"type":"ACK","job_id":"42"}',
    "hello": '{"type":"HELLO","instance_id":"5f0c","version":"0.1.0","protocol":1,'
             '"services":{"demo":"light"},"waitgroups":{"light":{"processes":4}},'
             '"clients":1,"draining":false,"max_frame_bytes":1048576,'
             '"resume_grace_sec":30,"ping_timeout_sec":45,"ping_interval_sec":15}',
    "offer": '{"type":"OFFER","job_id":"42","token":"%s"}' % TOKEN,
    "done": '{"type":"DONE","job_id":"42","receipt":{"exit_code":0,"duration_ms":2,'
            '"stdout":"7 /etc/hostname\\n"}}',
    "position": '{"type":"POSITION","job_id":"42","state":"waiting","position":3}',
    "error": '{"type":"ERROR","code":"unknown_service","message":"no such service",'
             '"job_id":"43"}',
    "not-object": '["WANT"]',
    "trailing": WANT + " {}",
    "bad-json": '{"type":"WANT",',
    "deep": "[" * 40 + "]" * 40,
    "id-too-long": '{"type":"QUERY","job_id":"%s"}' % ("x" * 65),
    "id-space": '{"type":"QUERY","job_id":"a b"}',
    "type-nul": '{"type":"QUERY\\u0000x","job_id":"1"}',
    "service-nul": '{"type":"WANT","job_id":"1","service":"demo\\u0000x"}',
    "id-number": '{"type":"QUERY","job_id":42}',
    "unicode": '{"type":"WANT","job_id":"\\u00e9","service":"d\\u00e9mo"}',
    # the characters of a job id that JSON escapes (the OFFER quotes it)
    "id-escaped": '{"type":"WANT","job_id":"a\\"b\\\\c/d","service":"s"}',
}
for k, v in msgs.items():
    write("messages", k, v)

# ---- HTTP request heads ----

UPGRADE = ("GET /broker?client=fylr-a&token=s3cr%20t HTTP/1.1\r\n"
           "Host: localhost:8083\r\n"
           "Upgrade: websocket\r\n"
           "Connection: keep-alive, Upgrade\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
           "Sec-WebSocket-Version: 13\r\n"
           "Authorization: Bearer s3cret\r\n\r\n")
heads = {
    "upgrade": UPGRADE,
    "upgrade-then-frame": UPGRADE.encode() + frame(1, WANT),
    "upgrade-version-8": UPGRADE.replace("Version: 13", "Version: 8"),
    "upgrade-post": UPGRADE.replace("GET", "POST", 1),
    "status": "GET /status HTTP/1.1\r\nHost: x\r\n\r\n",
    "metrics-http10": "GET /metrics HTTP/1.0\r\n\r\n",
    "post-body": "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
    "chunked": "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    "pipelined": "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n",
    "folded": "GET / HTTP/1.1\r\nHost: x\r\nX-A: one\r\n two\r\n\r\n",
    "bare-lf": "GET / HTTP/1.1\nHost: x\n\n",
    "http2-version": "GET / HTTP/2.0\r\nHost: x\r\n\r\n",
    "word-after-version": "GET /broker HTTP/1.1 extra\r\nHost: x\r\n\r\n",
    "no-version": "GET /broker\r\nHost: x\r\n\r\n",
    "bad-method": "BREW /pot HTTP/1.1\r\n\r\n",
    "two-hosts": "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    "query-escapes": "GET /?token=%ZZ&a=%C3%A9&b=%00 HTTP/1.1\r\nHost: x\r\n\r\n",
    "incomplete": "GET /broker HTTP/1.1\r\nHost: loc",
    "absolute-uri": "GET http://example.com:8083/broker?x HTTP/1.1\r\nHost: x\r\n\r\n",
}
for k, v in heads.items():
    write("http_head", k, v)

# ---- PROXY protocol headers (docs/balancers.md) ----

SIG2 = b"\r\n\r\n\x00\r\nQUIT\n"


def proxy2(cmd, fam, addr, tail=b""):
    return SIG2 + bytes([0x20 | cmd, fam]) + struct.pack(">H", len(addr)) + addr + tail


A4 = bytes([10, 250, 0, 11, 10, 250, 0, 13]) + struct.pack(">HH", 40000, 8083)
A6 = bytes(15) + b"\x01" + bytes(15) + b"\x02" + struct.pack(">HH", 443, 8083)
proxies = {
    "v1-tcp4": "PROXY TCP4 10.250.0.11 10.250.0.13 40000 8083\r\nGET /broker HTTP/1.1\r\n",
    "v1-tcp6": "PROXY TCP6 2001:db8::1 2001:db8::2 443 8083\r\n",
    "v1-unknown": "PROXY UNKNOWN\r\n",
    "v1-bad-port": "PROXY TCP4 10.0.0.1 10.0.0.2 65536 1\r\n",
    "v1-lf": "PROXY TCP4 10.0.0.1 10.0.0.2 1 2\n",
    "v1-partial": "PROXY TCP4 10.0.0",
    "v2-tcp4": proxy2(1, 0x11, A4, b"GET"),
    "v2-tcp6": proxy2(1, 0x21, A6),
    "v2-local": proxy2(0, 0x00, b""),
    "v2-tlv": proxy2(1, 0x11, A4 + b"\x04\x00\x01\x00"),
    "v2-udp": proxy2(1, 0x12, A4),
    "v2-short": proxy2(1, 0x21, A4),
    "http": "GET / HTTP/1.1\r\n\r\n",
}
for k, v in proxies.items():
    write("proxy_header", k, v)

# ---- job payloads (docs/job-payload.md) ----

U = "http://127.0.0.1:8080"
jobs = {
    "minimal": {"command": "echo"},
    "args": {"command": "conv", "args": ["%jobdir%/a.png", "-resize", "50%", "%03d"]},
    "env": {"command": "echo", "env": ["LANG=C", "MULTI=a=b\nc", "EMPTY="]},
    "env-refused": {"command": "echo", "env": ["LD_PRELOAD=/x.so"]},
    "env-proxy": {"command": "echo", "env": ["https_proxy=http://evil"]},
    "env-duplicate": {"command": "echo", "env": ["A=1", "A=2"]},
    "streams": {"command": "echo", "stdin": U + "/pipe/in/1", "stdout": U + "/pipe/out/1"},
    "files": {"command": "ffmpeg",
              "inputs": [{"name": "in.mp4", "url": U + "/files/in.mp4"}],
              "outputs": [{"name": "out.png", "url": "https://files.example.com./up?x=1"}],
              "timeout_sec": 600},
    "url-forms": {"command": "echo", "stdin": "http://0x7f.1/", "stdout": "HTTP://[FE80::A]:81/"},
    "url-file": {"command": "echo", "stdin": "file:///etc/passwd"},
    "url-userinfo": {"command": "echo", "stdin": "http://user:pw@host/"},
    "url-zone": {"command": "echo", "stdin": "http://[fe80::1%25eth0]/"},
    "url-port": {"command": "echo", "stdout": "http://h:65536/"},
    "name-traversal": {"command": "echo", "inputs": [{"name": "../x", "url": U + "/"}]},
    "name-control": {"command": "echo", "outputs": [{"name": "a\u0085b", "url": U + "/"}]},
    "name-dup": {"command": "echo", "inputs": [{"name": "a", "url": U + "/1"},
                                               {"name": "a", "url": U + "/2"}]},
    "unknown-command": {"command": "rm"},
    "timeout-max": {"command": "echo", "timeout_sec": 86401},
    "nulls": {"command": "echo", "args": None, "env": None, "stdin": None,
              "stdout": None, "inputs": None, "outputs": None, "timeout_sec": None},
    "wrong-types": {"command": "echo", "args": "x", "env": [1]},
}
for k, v in jobs.items():
    write("job_spec", k, json.dumps(v, ensure_ascii=False))

# ---- cron specs (docs/cron.md) ----

crons = {
    "every-minute": "* * * * *",
    "every-20": "*/20 * * * *",
    "hourly": "0 * * * *",
    "daily-0230": "30 2 * * *",
    "gap-pair": "0,30 2,3 * * *",
    "repeat-hour": "*/20 1-2 * * *",
    "lists": "1,2,5-7 10-50/20 1-31/10 */5 *",
    "names": "0 0 1 JAN-mar,Dec Mon-FRI",
    "sunday-7": "0 0 * * 5-7",
    "both-days": "0 0 13 * fri",
    "star-days": "0 0 */10 * 1",
    "feb29": "0 0 29 2 *",
    "feb29-sunday": "0 0 29 2 */7",
    "month-end": "59 23 31 12 *",
    "blanks": " \t5\t 4  3 2 1 \t",
    "macro-daily": "@daily",
    "macro-annually": "@ANNUALLY",
    "macro-weekly": "  @weekly ",
    "err-range": "0 24 * * *",
    "err-step0": "*/0 * * * *",
    "err-reversed": "fri-mon 0 * * *",
    "err-single-step": "5/10 * * * *",
    "err-few": "0 0 * *",
    "err-many": "0 0 * * * x",
    "err-garbage": "0 0 * * 1x",
    "err-never": "0 0 30 2 *",
    "err-macro": "@reboot",
    "err-long": "1," * 100 + "2 * * * *",
    "err-digits": "99999999999999999999 * * * *",
}
for k, v in crons.items():
    write("cron", k, v)

# ---- configurations ----

for src in ["etc/execserver.yml"] + sorted(
        os.path.join("tests/data/config", f)
        for f in os.listdir(os.path.join(TOP, "tests/data/config"))):
    name = src.replace("/", "_")
    with open(os.path.join(TOP, src), "rb") as f:
        write("config", name, f.read())
write("config", "anchor", "waitgroups: &w\n  a: {processes: 1}\nx: *w\n")
write("config", "duplicate-key", "waitgroups:\n  a: {processes: 1}\n  a: {processes: 2}\n")
write("config", "flow", "{waitgroups: {w: {processes: 2}}, services: {s: {waitgroup: w, "
      "commands: {c: {prog: cat, args: [a, '%jobdir%'], env: [A=1]}}}}}\n")
write("config", "durations", "janitorFileAge: 1h30m\nwaitgroups: {w: {processes: 1}}\n"
      "jobLimits: {cpuSec: 10, memoryMB: 512, coreMB: 0}\n")
