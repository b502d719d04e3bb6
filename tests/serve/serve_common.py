"""tests/serve/serve_common.py: what test_serve.py, load_test.py and swap_test.py share.

Python 3 standard library only (test_serve.py runs again inside a venv that holds tritonclient and numpy, and
nothing of this directory). The scripts import it from their own directory:

    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from serve_common import ...

Reporting: every check prints a line (`  ok   ...` or `  FAIL ...`); failures are collected in `failures` and
verdict() turns them into the exit status. The servers: Server starts `oar serve REPO --port 0 --port-file F`,
waits for the port file, reads its log and stops it; every child dies with the test (PR_SET_PDEATHSIG).
"""
import ctypes
import http.client
import json
import os
import signal
import subprocess
import time

PORT_SECONDS = 30  # how long a server may take to write its port file


# ---------------------------------------------------------------------------------------------------------
# Reporting.

failures = []


def ok(what):
    print(f"  ok   {what}", flush=True)


def fail(what):
    failures.append(what)
    print(f"  FAIL {what}", flush=True)


def check(cond, what, detail=""):
    if cond:
        ok(what)
    else:
        fail(what + (f": {detail}" if detail else ""))
    return cond


def verdict(passed="all checks passed"):
    """The exit status: 1 (listing the failures) when a check failed, else 0 (printing `passed`)."""
    if failures:
        print(f"\n{len(failures)} check(s) failed:", flush=True)
        for f in failures:
            print(f"  - {f}")
        return 1
    print(f"\n{passed}", flush=True)
    return 0


class TestTimeout(Exception):
    pass


def time_limit(seconds):
    """Raises TestTimeout in the main thread after `seconds` (signal.alarm(0) cancels it)."""
    def on_alarm(signum, frame):
        raise TestTimeout(f"the test ran over {seconds} s")
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)


# ---------------------------------------------------------------------------------------------------------
# Child processes.

def die_with_parent():
    # The kernel kills the child when this process dies, even by SIGKILL (ctest's timeout).
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


killed = set()  # the pids kill() killed: they did not die on their own


def kill(proc):
    if proc.poll() is None:
        killed.add(proc.pid)
        proc.kill()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


class Server:
    """`oar serve REPO --host 127.0.0.1 --port 0 --port-file WORK/NAME.port EXTRA...` with OAR_CONV=im2col, its
    output in WORK/NAME.log. It starts at once; wait_port() waits until it listens. `title` names it in the
    messages ("server NAME" unless given)."""

    def __init__(self, oar, repo, work, name, extra=(), title=None):
        self.name = name
        self.title = title or f"server {name}"
        self.port_file = os.path.join(work, f"{name}.port")
        self.log_path = os.path.join(work, f"{name}.log")
        for f in (self.port_file, self.port_file + ".tmp"):
            if os.path.exists(f):
                os.remove(f)
        self.cmd = [oar, "serve", repo, "--host", "127.0.0.1", "--port", "0", "--port-file", self.port_file] + list(extra)
        env = dict(os.environ, OAR_CONV="im2col")  # the fixture's convolution kernel (ref.json "conv_algorithm")
        self.log = open(self.log_path, "wb")
        print(f"starting {self.title}: {' '.join(self.cmd)}", flush=True)
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env, preexec_fn=die_with_parent)
        self.port = None

    def wait_port(self):
        deadline = time.monotonic() + PORT_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.title} exited with {self.proc.returncode} before listening:\n{self.output()}")
            if os.path.exists(self.port_file):
                text = open(self.port_file).read().strip()
                if text.isdigit() and int(text) > 0:
                    self.port = int(text)
                    return self.port
            time.sleep(0.05)
        raise RuntimeError(f"{self.title} wrote no port file in {PORT_SECONDS} s:\n{self.output()}")

    def output(self):
        self.log.flush()
        try:
            return open(self.log_path, "rb").read().decode(errors="replace")
        except OSError:
            return ""

    def alive(self):
        return self.proc.poll() is None

    def kill(self):
        kill(self.proc)

    def terminate(self, timeout=10):
        """SIGTERM: checks that the server exits 0 within `timeout` s; kills it if it does not."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
            check(rc == 0, "SIGTERM: the server exits 0", f"exit status {rc}:\n{self.output()[-2000:]}")
        except subprocess.TimeoutExpired:
            fail(f"SIGTERM: the server did not exit within {timeout} s")
            self.kill()


# ---------------------------------------------------------------------------------------------------------
# HTTP.

class Reply:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return f"HTTP {self.status} {self.body[:300]!r}"


def request(port, method, path, body=None, headers=None, timeout=15):
    """One request on a new connection to 127.0.0.1:port: a Reply."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        try:
            conn.request(method, path, body=body, headers=headers or {})
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer (413) and close before reading all the body: read what it answered
        r = conn.getresponse()
        return Reply(r.status, r.getheaders(), r.read())
    finally:
        conn.close()
