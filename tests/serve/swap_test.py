#!/usr/bin/env python3
"""tests/serve/swap_test.py: `oar serve` swapping and unloading a model while clients keep asking it.

    swap_test.py --oar OAR_BINARY --fixture-out FIXTURE_DIR

FIXTURE_DIR is what `serve_fixture FIXTURE_DIR` wrote (repo/, stage/, ref.json and the reference tensors); it
is left as it is: the server serves a copy of FIXTURE_DIR/repo. Python 3 standard library only.

Phase 1, swap: CLIENTS threads, each on its own keep-alive connection, POST /v2/models/mlp/infer (batch 1,
JSON, the mlp_v1_b1 input) for SWAP_SECONDS; after SWAP_AT seconds the main thread copies
FIXTURE_DIR/stage/mlp/2 into the copy's mlp/ and POSTs /v2/repository/models/mlp/load (200). Every answer
must be 200 with the output of version 1 or of version 2, bit for bit (the JSON numbers rounded to float32
against the reference float32s), and model_version saying which; answers read before the load was asked
are version 1, requests sent after the load answered are version 2 (a request is taken by the version served
when it arrives), and the last version 1 answer comes at most SETTLE_S after the load answered. Then GET
/v2/models/mlp lists version "2", and /metrics counts per version exactly the answers the clients read, with
no failure.

Phase 2, unload: the clients again, and the main thread POSTs /v2/repository/models/mlp/unload (200) after
UNLOAD_AT seconds. Every answer is either 200 with version 2's output or 404 with a JSON {"error": "..."}
body, never a connection error, another status or a 5xx; answers read before the unload was asked are 200,
requests sent after the unload answered are 404. Then GET /v2/models/mlp answers 404, a load brings
version 2 back, and SIGTERM stops the server with exit status 0.

Prints the counts; exit status 0 when every check passed, 1 otherwise. The whole test is bounded
(TEST_SECONDS, by SIGALRM) and kills its server however it ends (and the kernel does, through
PR_SET_PDEATHSIG, if the test itself is killed).
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import struct
import sys
import tempfile
import threading
import time
import traceback

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_common  # noqa: E402
from serve_common import TestTimeout, Server, check, fail, time_limit, verdict  # noqa: E402

TEST_SECONDS = 85     # the whole test
CLIENTS = 8
SWAP_SECONDS = 6.0    # phase 1: the clients' time
SWAP_AT = 2.0         # phase 1: when the main thread loads version 2
UNLOAD_SECONDS = 4.0  # phase 2: the clients' time
UNLOAD_AT = 1.5       # phase 2: when the main thread unloads mlp
SETTLE_S = 1.0        # the last version 1 answer comes at most this long after the load answered
REQUEST_TIMEOUT = 10  # one client request


def request(port, method, path, body=None, headers=None):
    """(status, body) of one request on a new connection, within 30 s."""
    r = serve_common.request(port, method, path, body, headers, timeout=30)
    return r.status, r.body


def mlp_metrics(port):
    """{(version, status): count} of oar_inference_requests_total for mlp."""
    status, body = request(port, "GET", "/metrics")
    if status != 200:
        raise RuntimeError(f"GET /metrics: HTTP {status}")
    out = {}
    for m in re.finditer(r'^oar_inference_requests_total\{model="mlp",version="(\d+)",status="(\w+)"\} (\S+)$', body.decode(), re.M):
        out[(m.group(1), m.group(2))] = int(float(m.group(3)))
    return out


def f32_bytes(values):
    return struct.pack(f"<{len(values)}f", *values)


# ---------------------------------------------------------------------------------------------------------
# The clients.

class Clients:
    """CLIENTS threads posting `body` on keep-alive connections until stop(); every answer is classified and
    recorded as (sent, read, kind, detail) with monotonic times: kind "v1" / "v2" (200 with that version's
    output and model_version), "404" (with a JSON error body), or "bad" (anything else: a connection error,
    another status, an output that is neither version's)."""

    def __init__(self, port, body, refs):
        self.port, self.body, self.refs = port, body, refs
        self.halt = threading.Event()
        self.records = [[] for _ in range(CLIENTS)]
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True) for i in range(CLIENTS)]

    def start(self):
        for t in self.threads:
            t.start()

    def stop(self):
        self.halt.set()
        for t in self.threads:
            t.join(timeout=REQUEST_TIMEOUT + 5)
        hung = [i for i, t in enumerate(self.threads) if t.is_alive()]
        check(not hung, "every client thread ended", f"clients {hung} still waiting for an answer")
        return sorted((r for rs in self.records for r in rs), key=lambda r: r[0])

    def classify(self, status, data):
        if status == 404:
            try:
                j = json.loads(data)
            except ValueError:
                return "bad", f"404 without a JSON body: {data[:200]!r}"
            if isinstance(j, dict) and isinstance(j.get("error"), str) and j["error"]:
                return "404", j["error"]
            return "bad", f"404 without an \"error\" string: {data[:200]!r}"
        if status != 200:
            return "bad", f"HTTP {status} {data[:200]!r}"
        try:
            j = json.loads(data)
            out = [o for o in j["outputs"] if o["name"] == "prediction"][0]
            got = f32_bytes([float(v) for v in out["data"]])
        except (ValueError, KeyError, IndexError, TypeError, struct.error) as e:
            return "bad", f"200 with an unreadable answer ({type(e).__name__}: {e}): {data[:200]!r}"
        for version, ref in self.refs.items():
            if got == ref:
                if j.get("model_version") != version:
                    return "bad", f"version {version}'s output, but model_version {j.get('model_version')!r}"
                return f"v{version}", ""
        return "bad", f"200 with an output that is neither version's: {out['data']}"

    def run(self, i):
        rec = self.records[i]
        conn = None
        while not self.halt.is_set():
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT)
            sent = time.monotonic()
            try:
                conn.request("POST", "/v2/models/mlp/infer", self.body, {"Content-Type": "application/json"})
                r = conn.getresponse()
                data = r.read()
                kind, detail = self.classify(r.status, data)
                if r.will_close:
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as e:
                kind, detail = "bad", f"connection error: {type(e).__name__}: {e}"
                conn.close()
                conn = None
            rec.append((sent, time.monotonic(), kind, detail))
        if conn is not None:
            conn.close()


def count(records, kind):
    return sum(1 for r in records if r[2] == kind)


def report_bad(records, what):
    bad = [r for r in records if r[2] == "bad"]
    check(not bad, f"{what}: no failed request ({len(records)} requests)", f"{len(bad)} failed, e.g. " + "; ".join(r[3] for r in bad[:5]))


def post_under_load(port, body, refs, seconds, at, path, first=lambda: None):
    """Runs the clients for `seconds`; `at` seconds in, the main thread calls first() and POSTs `path`, which must
    answer 200. Returns the clients' records and the monotonic times the POST was sent and answered."""
    clients = Clients(port, body, refs)
    t_start = time.monotonic()
    clients.start()
    time.sleep(at)
    first()
    t0 = time.monotonic()
    status, data = request(port, "POST", path)
    t1 = time.monotonic()
    check(status == 200, f"POST {path} under load: 200 ({t1 - t0:.3f} s)", f"HTTP {status} {data[:300]!r}")
    time.sleep(max(0.0, seconds - (time.monotonic() - t_start)))
    return clients.stop(), t0, t1


def check_switch(records, phase, action, t0, t1, old, new):
    """Checks that every answer read before `action` was asked (at t0) is of kind old[0] and that every request
    sent after it answered (at t1) is of kind new[0]; old[1] and new[1] say those kinds in words."""
    early = [r for r in records if r[1] < t0 and r[2] != old[0]]
    check(not early, f"{phase}: every answer read before the {action} was asked is {old[1]}", f"{len(early)} are not: {[r[2:] for r in early[:5]]}")
    late = [r for r in records if r[0] > t1]
    late_bad = [r for r in late if r[2] != new[0]]
    check(late and not late_bad, f"{phase}: every request sent after the {action} answered is {new[1]} ({len(late)} requests)",
          f"{len(late_bad)} are not: {[r[2:] for r in late_bad[:5]]}" if late else f"no request was sent after the {action} answered")


def metrics_delta(before, after):
    """(version 1 successes, version 2 successes, failures) counted between two mlp_metrics()."""
    successes = lambda version: after.get((version, "success"), 0) - before.get((version, "success"), 0)
    failed = lambda m: sum(v for (ver, st), v in m.items() if st == "failure")
    return successes("1"), successes("2"), failed(after) - failed(before)


# ---------------------------------------------------------------------------------------------------------

def swap_phase(server, fixture, repo, body, refs):
    print(f"\n== phase 1: {CLIENTS} clients for {SWAP_SECONDS} s, mlp version 2 loaded after {SWAP_AT} s", flush=True)
    port = server.port
    before = mlp_metrics(port)
    stage_v2 = lambda: shutil.copytree(os.path.join(fixture, "stage", "mlp", "2"), os.path.join(repo, "mlp", "2"))
    records, t_load0, t_load1 = post_under_load(port, body, refs, SWAP_SECONDS, SWAP_AT, "/v2/repository/models/mlp/load", stage_v2)
    v1, v2 = count(records, "v1"), count(records, "v2")
    print(f"  answers: {len(records)} in all, {v1} version 1, {v2} version 2, {count(records, 'bad')} failed, {count(records, '404')} 404", flush=True)
    report_bad(records, "phase 1")
    after = mlp_metrics(port)
    check(count(records, "404") == 0, "phase 1: no 404 (the model is served throughout)", f"{count(records, '404')}")
    check(v1 > 0 and v2 > 0, f"phase 1: answers from both versions ({v1} v1, {v2} v2)")
    check_switch(records, "phase 1", "load", t_load0, t_load1, ("v1", "version 1"), ("v2", "version 2"))
    last_v1 = max((r[1] for r in records if r[2] == "v1"), default=t_load0)
    check(last_v1 - t_load1 <= SETTLE_S, f"phase 1: the last version 1 answer {last_v1 - t_load1:+.3f} s after the load answered (at most {SETTLE_S} s)")
    in_window = [r for r in records if r[1] >= t_load0 and r[0] <= t_load1]
    print(f"  during the load ({t_load1 - t_load0:.3f} s): {count(in_window, 'v1')} v1, {count(in_window, 'v2')} v2 answers", flush=True)

    status, data = request(port, "GET", "/v2/models/mlp")
    versions = json.loads(data).get("versions") if status == 200 else None
    check(status == 200 and versions == ["2"], f"GET /v2/models/mlp lists version \"2\" ({versions})", f"HTTP {status} {data[:300]!r}")
    d1, d2, fails = metrics_delta(before, after)
    check(d1 == v1 and d2 == v2, f"/metrics counts the answers the clients read: version 1 {d1} (clients {v1}), version 2 {d2} (clients {v2})")
    check(fails == 0, "/metrics counts no failed mlp request", f"{fails}")
    check(server.alive(), "the server is still running", server.output()[-2000:])
    return {"requests": len(records), "v1": v1, "v2": v2, "load_s": t_load1 - t_load0, "last_v1_after_load_s": last_v1 - t_load1}


def unload_phase(server, body, refs):
    print(f"\n== phase 2: {CLIENTS} clients for {UNLOAD_SECONDS} s, mlp unloaded after {UNLOAD_AT} s", flush=True)
    port = server.port
    before = mlp_metrics(port)
    records, t_un0, t_un1 = post_under_load(port, body, refs, UNLOAD_SECONDS, UNLOAD_AT, "/v2/repository/models/mlp/unload")
    v1, v2, n404 = count(records, "v1"), count(records, "v2"), count(records, "404")
    print(f"  answers: {len(records)} in all, {v2} version 2, {n404} 404, {v1} version 1, {count(records, 'bad')} failed", flush=True)
    report_bad(records, "phase 2")
    after = mlp_metrics(port)
    check(v1 == 0, "phase 2: no version 1 answer", f"{v1}")
    check(v2 > 0 and n404 > 0, f"phase 2: version 2 answers, then 404s ({v2} v2, {n404} 404)")
    check_switch(records, "phase 2", "unload", t_un0, t_un1, ("v2", "version 2"), ("404", "404"))
    msgs = sorted({r[3] for r in records if r[2] == "404"})
    if msgs:
        print(f"  404 error: {msgs[0]}", flush=True)
    _, d2, fails = metrics_delta(before, after)
    check(d2 == v2, f"/metrics counts the version 2 answers the clients read: {d2} (clients {v2})")
    check(fails == 0, "/metrics counts no failed mlp request", f"{fails}")

    status, data = request(port, "GET", "/v2/models/mlp")
    check(status == 404, "GET /v2/models/mlp after the unload: 404", f"HTTP {status} {data[:300]!r}")
    status, data = request(port, "POST", "/v2/repository/models/mlp/load")
    check(status == 200, "POST /v2/repository/models/mlp/load again: 200", f"HTTP {status} {data[:300]!r}")
    status, data = request(port, "POST", "/v2/models/mlp/infer", body, {"Content-Type": "application/json"})
    kind, detail = Clients(port, body, refs).classify(status, data)
    check(kind == "v2", "after the load, mlp answers with version 2 again", detail)
    check(server.alive(), "the server is still running", server.output()[-2000:])
    return {"requests": len(records), "v2": v2, "404": n404, "unload_s": t_un1 - t_un0}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--oar", required=True)
    p.add_argument("--fixture-out", required=True)
    args = p.parse_args()

    time_limit(TEST_SECONDS)
    work = tempfile.mkdtemp(prefix="oar_swap_")
    server = None
    results = {}
    try:
        fixture = args.fixture_out
        ref = json.load(open(os.path.join(fixture, "ref.json")))["models"]
        b1 = {tag: next(b for b in ref[tag]["batches"] if b["rows"] == 1) for tag in ("mlp_v1", "mlp_v2")}
        read = lambda name: open(os.path.join(fixture, name), "rb").read()
        x = read(b1["mlp_v1"]["input_file"])
        if x != read(b1["mlp_v2"]["input_file"]):
            raise RuntimeError("the fixture's mlp_v1 and mlp_v2 batch-1 inputs differ: one request cannot check both versions")
        refs = {"1": read(b1["mlp_v1"]["output_file"]), "2": read(b1["mlp_v2"]["output_file"])}
        if refs["1"] == refs["2"]:
            raise RuntimeError("the fixture's mlp versions 1 and 2 predict the same")
        data = list(struct.unpack(f"<{len(x) // 4}f", x))
        body = json.dumps({"inputs": [{"name": ref["mlp_v1"]["input"]["name"], "shape": b1["mlp_v1"]["input_shape"], "datatype": "FP32",
                                       "data": data}]}).encode()
        repo = os.path.join(work, "repo")
        shutil.copytree(os.path.join(fixture, "repo"), repo)
        server = Server(args.oar, repo, work, "swap", title="the server")
        server.wait_port()
        status, reply = request(server.port, "POST", "/v2/models/mlp/infer", body, {"Content-Type": "application/json"})
        kind, detail = Clients(server.port, body, refs).classify(status, reply)
        if not check(kind == "v1", "mlp answers with version 1's output, bit for bit", detail):
            raise RuntimeError("the server does not answer as the fixture's version 1")
        results["swap"] = swap_phase(server, fixture, repo, body, refs)
        results["unload"] = unload_phase(server, body, refs)
        server.terminate()
    except TestTimeout as e:
        fail(str(e))
    except Exception as e:
        traceback.print_exc(file=sys.stdout)
        fail(f"{type(e).__name__}: {e}")
        if server is not None and server.proc.poll() is not None:
            fail(f"the server died: exit status {server.proc.returncode}; its output ends:\n{server.output()[-3000:]}")
    finally:
        signal.alarm(0)
        if server is not None:
            server.kill()
        shutil.rmtree(work, ignore_errors=True)

    print("\n== summary", flush=True)
    if "swap" in results:
        s = results["swap"]
        print(f"swap:   {s['requests']} requests: {s['v1']} version 1, {s['v2']} version 2; the load took {s['load_s'] * 1e3:.0f} ms; "
              f"last version 1 answer {s['last_v1_after_load_s'] * 1e3:+.0f} ms after it answered")
    if "unload" in results:
        s = results["unload"]
        print(f"unload: {s['requests']} requests: {s['v2']} version 2, {s['404']} 404; the unload took {s['unload_s'] * 1e3:.0f} ms")
    return verdict()


if __name__ == "__main__":
    sys.exit(main())
