#!/usr/bin/env python3
"""tests/serve/load_test.py: `oar serve` under load, with wrk, and against slow clients.

    load_test.py --oar OAR_BINARY --fixture-out FIXTURE_DIR

FIXTURE_DIR is what `serve_fixture FIXTURE_DIR` wrote (repo/, stage/, ref.json and the reference tensors).
Python 3 standard library only; wrk (Debian's wrk 4.1, /usr/bin/wrk) drives the load: without it the test
prints `SKIP: ...` and exits 77.

1. Load. Serves FIXTURE_DIR/repo (mlp: one request at a time; conv: dynamic batching) and checks one answer
   of each against the references. Two warm-up rounds (wrk at 256 connections, 1 s per model each), then the
   server's VmRSS; then for each model `wrk -t1 -cN -d4s --latency --timeout 5s` at N = 64 and 256. Each run
   must have 0 non-2xx answers, 0 socket errors (connect, read, write, timeout), at least MIN_REQUESTS
   requests, a max latency under MAX_LATENCY_S; the server's /metrics must count 0 failures and as many
   successes as wrk counted (at most N more: the requests in flight when wrk stops are answered on connections
   wrk has closed), no HTTP status but 200, a request_seconds observation per answer, and batch_size
   histograms adding up to one row per request (mlp: one request per batch; conv: no batch over 8). VmRSS
   after the runs is within RSS_TOLERANCE of after the warm-up. Then SIGTERM under no load: the server exits 0.
   No throughput bound: the test machine is small and shared.
2. Slow clients. A second server with --idle-timeout 2 --request-timeout 2; a raw socket sends a request's
   header one byte every 0.5 s (slowloris), another sends a whole header then its body one byte every 0.5 s;
   meanwhile a normal client's requests are each answered within 1 s, and both slow sockets are closed by
   the server within SLOW_CLOSE_S.

Prints a summary table; exit status 0 when every check passed, 1 otherwise. The whole test is bounded
(TEST_SECONDS, by SIGALRM) and kills its servers and wrk however it ends (and the kernel does, through
PR_SET_PDEATHSIG, if the test itself is killed).
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_common  # noqa: E402
from serve_common import TestTimeout, check, die_with_parent, fail, kill, killed, request, time_limit, verdict  # noqa: E402

TEST_SECONDS = 85      # the whole test
WRK = "/usr/bin/wrk"
RUN_SECONDS = 4        # each measured wrk run
WARMUP_SECONDS = 1     # each warm-up wrk run (per model, per round)
CONNECTIONS = (64, 256)
MIN_REQUESTS = 2000    # per measured run: "some thousands" (a 2-core box does ~2000/s per model with one thread)
MAX_LATENCY_S = 2.0    # generous: the box is shared
RSS_TOLERANCE = 0.05
SLOW_CLOSE_S = 4.0     # a slow socket is closed within this (the timeouts are 2 s)
PROMPT_S = 1.0         # the normal client's requests during the slow-client check

children = []  # every process started: killed at the end
servers = []   # every server started: reported on when one died


# ---------------------------------------------------------------------------------------------------------
# The server.

class Server(serve_common.Server):
    """A server that listens once constructed, killed at the end of the test (and reported on if it dies)."""

    def __init__(self, oar, repo, work, name, extra=()):
        super().__init__(oar, repo, work, name, extra)
        children.append(self.proc)
        servers.append(self)
        self.wait_port()

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS in /proc/PID/status")


METRIC_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})?\s+(\S+)$')


def metrics(port):
    """{(name, frozenset of (label, value))): value} from GET /metrics."""
    r = request(port, "GET", "/metrics", timeout=10)
    if r.status != 200:
        raise RuntimeError(f"GET /metrics: HTTP {r.status}")
    out = {}
    for line in r.body.decode().splitlines():
        if not line or line.startswith("#"):
            continue
        m = METRIC_LINE.match(line)
        if not m:
            raise RuntimeError(f"GET /metrics: unreadable line {line!r}")
        labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def metric_sum(m, name, **labels):
    want = set(labels.items())
    return sum(v for (n, l), v in m.items() if n == name and want <= set(l))


def http_codes(m):
    return {dict(l)["code"]: v for (n, l), v in m.items() if n == "oar_http_requests_total"}


def settled_metrics(port, seconds=5):
    """/metrics once the server has answered everything: nothing in flight, and the answer counters unchanged
    for 0.3 s. When wrk stops, the answers to its last requests are still being made, and requests it wrote on
    connections it then closed may not even be read yet (those are not in flight: the HTTP layer has not
    handed them on)."""
    deadline = time.monotonic() + seconds
    last = None
    while True:
        m = metrics(port)
        done = metric_sum(m, "oar_inference_requests_total")
        if metric_sum(m, "oar_inference_in_flight") == 0 and done == last:
            return m
        if time.monotonic() > deadline:
            return m
        last = done if metric_sum(m, "oar_inference_in_flight") == 0 else None
        time.sleep(0.3)


# ---------------------------------------------------------------------------------------------------------
# The fixture.

def read_f32(path):
    data = open(path, "rb").read()
    return list(struct.unpack(f"<{len(data) // 4}f", data))


def load_fixture(data_dir):
    ref = json.load(open(os.path.join(data_dir, "ref.json")))
    if ref.get("conv_algorithm") != "im2col":
        raise RuntimeError(f"ref.json's conv_algorithm is {ref.get('conv_algorithm')!r}; this test runs the server with OAR_CONV=im2col")
    models = {}
    for served, tag in (("mlp", "mlp_v1"), ("conv", "conv")):
        r = ref["models"][tag]
        b1 = next(b for b in r["batches"] if b["rows"] == 1)
        x = read_f32(os.path.join(data_dir, b1["input_file"]))
        y = read_f32(os.path.join(data_dir, b1["output_file"]))
        body = json.dumps({"inputs": [{"name": r["input"]["name"], "shape": b1["input_shape"], "datatype": "FP32", "data": x}]})
        models[served] = {"body": body.encode(), "output": r["output"]["name"], "expect": y, "exact": served == "mlp",
                          "batching": os.path.exists(os.path.join(data_dir, "repo", served, "config.json"))}
    return models


def check_answer(port, name, m):
    r = request(port, "POST", f"/v2/models/{name}/infer", m["body"], {"Content-Type": "application/json"}, timeout=10)
    if not check(r.status == 200, f"{name}: a batch-1 JSON request answers 200", repr(r)):
        return
    outs = {o["name"]: o for o in r.json()["outputs"]}
    got = [float(v) for v in outs[m["output"]]["data"]]
    if m["exact"]:
        # float32 bit for bit: the JSON number rounded to float32 against the reference's float32
        same = struct.pack(f"<{len(got)}f", *got) == struct.pack(f"<{len(m['expect'])}f", *m["expect"])
        check(same, f"{name}: the answer equals the reference bit for bit", f"{got} vs {m['expect']}")
    else:
        err = max((abs(a - b) for a, b in zip(got, m["expect"])), default=1.0) if len(got) == len(m["expect"]) else 1.0
        check(err <= 1e-5, f"{name}: the answer equals the reference within 1e-5 (batched: last bits may differ)", f"max error {err}")


# ---------------------------------------------------------------------------------------------------------
# wrk.

LUA = r"""-- POSTs the JSON body of the file named by $OAR_BODY_FILE on every request.
local f = assert(io.open(os.getenv("OAR_BODY_FILE"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
"""

UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def seconds_of(text):
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text)
    if not m:
        raise ValueError(f"not a wrk duration: {text!r}")
    return float(m.group(1)) * UNITS[m.group(2)]


def parse_wrk(out):
    r = {}
    m = re.search(r"^\s*(\d+) requests in ([\d.]+\w+)", out, re.M)
    if not m:
        raise RuntimeError(f"wrk's output has no request count:\n{out}")
    r["requests"] = int(m.group(1))
    r["duration_s"] = seconds_of(m.group(2))
    m = re.search(r"^\s*Latency\s+(\S+)\s+(\S+)\s+(\S+)", out, re.M)
    r["avg_s"], r["max_s"] = (seconds_of(m.group(1)), seconds_of(m.group(3))) if m else (None, None)
    m = re.search(r"^\s*99%\s+(\S+)", out, re.M)
    r["p99_s"] = seconds_of(m.group(1)) if m else None
    m = re.search(r"^\s*50%\s+(\S+)", out, re.M)
    r["p50_s"] = seconds_of(m.group(1)) if m else None
    m = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", out)
    r["non2xx"] = int(m.group(1)) if m else 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    r["socket_errors"] = dict(zip(("connect", "read", "write", "timeout"), map(int, m.groups()))) if m else dict(connect=0, read=0, write=0, timeout=0)
    return r


def run_wrk(port, model, body_file, lua, connections, seconds):
    cmd = [WRK, "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", "--timeout", "5s", "-s", lua,
           f"http://127.0.0.1:{port}/v2/models/{model}/infer"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(os.environ, OAR_BODY_FILE=body_file),
                            preexec_fn=die_with_parent)
    children.append(proc)
    try:
        out, _ = proc.communicate(timeout=seconds + 20)
    finally:
        kill(proc)
    out = out.decode(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {proc.returncode}:\n{out}")
    return out


# ---------------------------------------------------------------------------------------------------------
# 1. Load.

def load_section(args, work, models, table):
    print("\n== load (wrk)", flush=True)
    lua = os.path.join(work, "post.lua")
    with open(lua, "w") as f:
        f.write(LUA)
    body_files = {}
    for name, m in models.items():
        body_files[name] = os.path.join(work, f"{name}_b1.json")
        with open(body_files[name], "wb") as f:
            f.write(m["body"])
    server = Server(args.oar, os.path.join(args.fixture_out, "repo"), work, "load")
    port = server.port
    for name, m in models.items():
        check_answer(port, name, m)

    # Warm-up. The first round grows the allocator's pools and the sessions' buffers (up to 256 connections at
    # once, each model's batches and answers); a second round shows whether they keep growing. The baseline is
    # the VmRSS after the second round.
    rss = {"start": server.rss_kib()}
    for rnd in (1, 2):
        for name in models:
            out = run_wrk(port, name, body_files[name], lua, max(CONNECTIONS), WARMUP_SECONDS)
            w = parse_wrk(out)
            check(w["non2xx"] == 0 and sum(w["socket_errors"].values()) == 0, f"warm-up {rnd} {name}: no errors",
                  f"non-2xx {w['non2xx']}, socket errors {w['socket_errors']}")
        settled_metrics(port)
        rss[f"warm-up {rnd}"] = server.rss_kib()
    base = rss["warm-up 2"]
    print(f"  VmRSS: start {rss['start']} KiB, after warm-up round 1 {rss['warm-up 1']} KiB, after round 2 {base} KiB", flush=True)

    for name in models:
        for n in CONNECTIONS:
            before = settled_metrics(port)
            out = run_wrk(port, name, body_files[name], lua, n, RUN_SECONDS)
            after = settled_metrics(port)
            w = parse_wrk(out)
            what = f"{name} -c{n}"
            ok_s = metric_sum(after, "oar_inference_requests_total", model=name, status="success") - \
                metric_sum(before, "oar_inference_requests_total", model=name, status="success")
            bad_s = metric_sum(after, "oar_inference_requests_total", status="failure") - metric_sum(before, "oar_inference_requests_total", status="failure")
            codes_before, codes_after = http_codes(before), http_codes(after)
            other_codes = {c: v - codes_before.get(c, 0) for c, v in codes_after.items() if c != "200" and v - codes_before.get(c, 0) > 0}
            in_flight = metric_sum(after, "oar_inference_in_flight")
            delta = lambda metric, **labels: metric_sum(after, metric, model=name, **labels) - metric_sum(before, metric, model=name, **labels)
            timed = delta("oar_inference_request_seconds_count")
            rows, batches, batches_le8 = delta("oar_inference_batch_size_sum"), delta("oar_inference_batch_size_count"), \
                delta("oar_inference_batch_size_bucket", le="8")
            rss_now = server.rss_kib()
            table.append((what, w["requests"], w["requests"] / w["duration_s"], w["p50_s"], w["p99_s"], w["max_s"], w["non2xx"],
                          sum(w["socket_errors"].values()), int(ok_s), int(bad_s), rows / batches if batches else 0.0, rss_now))
            check(server.alive(), f"{what}: the server is still running", server.output()[-2000:])
            check(w["non2xx"] == 0, f"{what}: 0 non-2xx answers", f"{w['non2xx']}")
            check(sum(w["socket_errors"].values()) == 0, f"{what}: 0 socket errors", f"{w['socket_errors']}")
            check(w["requests"] >= MIN_REQUESTS, f"{what}: at least {MIN_REQUESTS} requests ({w['requests']})", f"{w['requests']}")
            check(w["max_s"] is not None and w["max_s"] < MAX_LATENCY_S, f"{what}: max latency {ms(w['max_s'])} ms < {MAX_LATENCY_S} s")
            check(bad_s == 0, f"{what}: /metrics counts 0 failed inference requests", f"{bad_s}")
            check(not other_codes, f"{what}: /metrics counts no HTTP status but 200", f"{other_codes}")
            check(in_flight == 0, f"{what}: /metrics: nothing in flight once wrk has stopped", f"{in_flight}")
            # wrk counts the answers it read before its time was up; the server also answers the (at most N)
            # requests still in flight then, on connections wrk has closed
            check(w["requests"] <= ok_s <= w["requests"] + n, f"{what}: /metrics counts {int(ok_s)} successes, wrk {w['requests']} (+ at most {n} in flight)")
            check(timed == ok_s + bad_s, f"{what}: oar_inference_request_seconds counts every answer ({int(timed)})", f"{int(timed)} vs {int(ok_s + bad_s)}")
            check(rows == ok_s, f"{what}: oar_inference_batch_size adds up to one row per request ({int(rows)} rows in {int(batches)} batches)",
                  f"{int(rows)} rows, {int(ok_s)} requests")
            if models[name]["batching"]:
                check(batches_le8 == batches, f"{what}: no batch over max_batch_size 8", f"{int(batches - batches_le8)} batches over 8 rows")
            else:
                check(batches == rows, f"{what}: no dynamic batching configured: every batch is one request", f"{int(rows)} rows in {int(batches)} batches")
            if w["requests"] == 0:
                print(out, flush=True)

    rss["end"] = server.rss_kib()
    growth = (rss["end"] - base) / base
    check(abs(growth) <= RSS_TOLERANCE, f"VmRSS after the runs {rss['end']} KiB within {RSS_TOLERANCE:.0%} of after the warm-up {base} KiB ({growth:+.1%})")
    for name, m in models.items():
        check_answer(port, name, m)  # still right after the load

    server.terminate()
    return rss


# ---------------------------------------------------------------------------------------------------------
# 2. Slow clients.

def slow_socket(port, prefix, payload, every, result, key):
    """Sends `prefix` at once, then `payload` one byte every `every` seconds; records in result[key] how long
    until the server closes the connection (recv returns b'' or the connection is reset: None if it never
    does), what it answered, if anything, and how many bytes of `payload` went out."""
    t0 = time.monotonic()
    answer = b""
    sent = 0
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        if prefix:
            s.sendall(prefix)
        s.setblocking(False)
        next_send = t0
        while time.monotonic() - t0 < SLOW_CLOSE_S + 3:
            if time.monotonic() >= next_send and sent < len(payload):
                try:
                    s.send(payload[sent:sent + 1])
                except (BrokenPipeError, ConnectionResetError):
                    result[key] = (time.monotonic() - t0, answer, sent)
                    return
                sent += 1
                next_send += every
            try:
                chunk = s.recv(4096)
                if not chunk:
                    result[key] = (time.monotonic() - t0, answer, sent)
                    return
                answer += chunk
            except BlockingIOError:
                pass
            except ConnectionResetError:
                result[key] = (time.monotonic() - t0, answer, sent)
                return
            time.sleep(0.02)
        result[key] = (None, answer, sent)
    finally:
        s.close()


def slow_section(args, work, models, table):
    print("\n== slow clients (--idle-timeout 2 --request-timeout 2)", flush=True)
    server = Server(args.oar, os.path.join(args.fixture_out, "repo"), work, "slow", ["--idle-timeout", "2", "--request-timeout", "2"])
    port = server.port
    m = models["mlp"]
    body = m["body"]
    header = (f"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(body)}\r\n\r\n").encode()
    result = {}
    threads = [threading.Thread(target=slow_socket, args=(port, b"", header, 0.5, result, "header"), daemon=True),
               threading.Thread(target=slow_socket, args=(port, header, body, 0.5, result, "body"), daemon=True)]
    for t in threads:
        t.start()
    # the normal client, meanwhile: requests one after another on a keep-alive connection
    lat = []
    errors = []
    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        while time.monotonic() - t0 < SLOW_CLOSE_S + 1:
            s = time.monotonic()
            try:
                conn.request("POST", "/v2/models/mlp/infer", body, {"Content-Type": "application/json"})
                r = conn.getresponse()
                data = r.read()
                if r.status != 200:
                    errors.append(f"HTTP {r.status} {data[:200]!r}")
            except (OSError, http.client.HTTPException) as e:
                errors.append(f"{type(e).__name__}: {e}")
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            lat.append(time.monotonic() - s)
            time.sleep(0.02)
    finally:
        conn.close()
    for t in threads:
        t.join(timeout=SLOW_CLOSE_S + 5)
    check(not errors, f"normal client during the slow ones: {len(lat)} requests, all 200", "; ".join(errors[:5]))
    check(lat and max(lat) < PROMPT_S, f"normal client: each request answered within {PROMPT_S} s (max {max(lat):.3f} s)" if lat else "normal client ran")
    for key, what in (("header", "a header sent one byte every 0.5 s"), ("body", "a body sent one byte every 0.5 s")):
        closed_after, answer, sent = result.get(key, (None, b"", 0))
        check(closed_after is not None and closed_after <= SLOW_CLOSE_S,
              f"{what}: the server closes the connection within {SLOW_CLOSE_S} s" + (f" ({closed_after:.2f} s, {sent} bytes sent)" if closed_after else ""),
              f"still open after {SLOW_CLOSE_S + 3} s" if closed_after is None else f"{closed_after:.2f} s")
        if closed_after is not None:
            check(closed_after >= 1.5, f"{what}: not before the 2 s timeout is near ({closed_after:.2f} s)")
        if answer:
            print(f"         it answered {answer[:200]!r} before closing", flush=True)
        table.append((f"slow {key}", closed_after, sent))
    table.append(("normal client", len(lat), max(lat) if lat else None))
    check(server.alive(), "the server is still running", server.output()[-2000:])
    server.kill()


# ---------------------------------------------------------------------------------------------------------

def ms(x):
    return "-" if x is None else f"{x * 1e3:.1f}"


def summary(table, rss):
    print("\n== summary", flush=True)
    print(f"{'run':<12}{'requests':>9}{'req/s':>7}{'p50 ms':>8}{'p99 ms':>8}{'max ms':>8}{'non2xx':>7}{'sockerr':>8}{'srv ok':>8}{'srv fail':>9}"
          f"{'rows/batch':>11}{'VmRSS KiB':>10}")
    for row in table:
        if len(row) == 12:
            what, n, rps, p50, p99, mx, non2xx, sockerr, okc, badc, per_batch, r = row
            print(f"{what:<12}{n:>9}{rps:>7.0f}{ms(p50):>8}{ms(p99):>8}{ms(mx):>8}{non2xx:>7}{sockerr:>8}{okc:>8}{badc:>9}{per_batch:>11.2f}{r:>10}")
    if rss:
        print("VmRSS KiB: " + ", ".join(f"{k} {v}" for k, v in rss.items()))
    for row in table:
        if row[0].startswith("slow"):
            print(f"{row[0]}: closed by the server after {'-' if row[1] is None else f'{row[1]:.2f}'} s ({row[2]} bytes sent)")
        elif row[0] == "normal client":
            print(f"normal client during the slow ones: {row[1]} requests, max {ms(row[2])} ms")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--oar", required=True)
    p.add_argument("--fixture-out", required=True)
    args = p.parse_args()
    if not (os.path.isfile(WRK) and os.access(WRK, os.X_OK)):
        found = shutil.which("wrk")
        if not found:
            print("SKIP: wrk is not installed (apt-get install wrk)", flush=True)
            return 77
        globals()["WRK"] = found

    time_limit(TEST_SECONDS)
    work = tempfile.mkdtemp(prefix="oar_load_")
    table, rss = [], {}
    try:
        models = load_fixture(args.fixture_out)
        rss = load_section(args, work, models, table)
        slow_section(args, work, models, table)
    except TestTimeout as e:
        fail(str(e))
    except Exception as e:
        traceback.print_exc(file=sys.stdout)
        fail(f"{type(e).__name__}: {e}")
        for srv in servers:
            if srv.proc.poll() is not None and srv.proc.returncode != 0 and srv.proc.pid not in killed:
                fail(f"server {srv.name} died: exit status {srv.proc.returncode}; its output ends:\n{srv.output()[-3000:]}")
    finally:
        signal.alarm(0)
        for proc in children:
            kill(proc)
        shutil.rmtree(work, ignore_errors=True)
    summary(table, rss)
    return verdict()


if __name__ == "__main__":
    sys.exit(main())
