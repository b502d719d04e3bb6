#!/usr/bin/env python3
"""tests/serve/test_serve.py: `oar serve` end to end, as KServe v2 clients see it.

    test_serve.py --oar OAR_BINARY --data FIXTURE_DIR --venv VENV_DIR

FIXTURE_DIR is what `serve_fixture FIXTURE_DIR` wrote (repo/, stage/, ref.json and the reference tensors).
The test first makes VENV_DIR (python3 -m venv; pip install tritonclient[http] numpy) unless it is there, and
runs again with its python; when pip cannot install them (no network) it prints `SKIP: ...` and exits 77.

It then copies FIXTURE_DIR/repo, starts two servers on free ports (--port 0 --port-file):
  A  the plain one (--max-elements 50000 so that a 64-row MLP request is too big)
  B  --api-key secret --max-body-bytes 100000 --max-elements 100000 --idle-timeout 1 --request-timeout 2
and checks with tritonclient.http and with raw http.client: health, metadata, inference (binary tensor data
and JSON, flat and nested; batches of 1 and 4 rows equal to the references bit for bit), every error status
with a JSON body holding "error" (and the server still answering after each), concurrent requests, the
Prometheus metrics, unload / load / swap to version 2, the API key, the limits, and a graceful stop
(SIGTERM / SIGINT: exit 0). Every check prints a line; any failure makes the exit status 1. The servers are
killed when the test ends, however it ends (and by the kernel if the test itself is killed).
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import traceback

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import pyvenv  # noqa: E402
from serve_common import TestTimeout, Server, check, fail, failures, ok, request, time_limit, verdict  # noqa: E402

TEST_SECONDS = 120   # the whole run against the servers
PIP_SECONDS = 150    # creating the venv and installing into it


# ---------------------------------------------------------------------------------------------------------
# Reporting: every check prints a line (serve_common); failures are counted and the run goes on with the next
# section.

def section(name, fn, *a):
    print(f"\n== {name}", flush=True)
    t0 = time.monotonic()
    try:
        fn(*a)
        print(f"   ({time.monotonic() - t0:.1f} s)", flush=True)
    except TestTimeout:
        raise
    except Exception as e:  # a section that raises is one failure; the next section still runs
        fail(f"{name}: {type(e).__name__}: {e}")
        traceback.print_exc(file=sys.stdout)


# ---------------------------------------------------------------------------------------------------------
# Raw HTTP (request() and its Reply: serve_common).

def is_error_reply(reply):
    try:
        j = reply.json()
    except ValueError:
        return False
    return isinstance(j, dict) and isinstance(j.get("error"), str) and j["error"] != ""


def expect_error(port, status, what, method, path, body=None, headers=None):
    r = request(port, method, path, body, headers)
    good = r.status == status and is_error_reply(r)
    check(good, f"{what}: {status} with a JSON error", repr(r))
    if r.status == status and is_error_reply(r):
        print(f"         error: {r.json()['error']}")
    return r


def infer_body_json(inputs, outputs=None, binary_output=False, request_id=None, nested=False):
    """A JSON infer request: inputs = [(name, array)]."""
    req = {"inputs": [{"name": n, "shape": list(a.shape), "datatype": "FP32", "data": a.tolist() if nested else a.reshape(-1).tolist()}
                      for n, a in inputs]}
    if outputs is not None:
        req["outputs"] = [{"name": n, "parameters": {"binary_data": binary_output}} for n in outputs]
    elif binary_output:
        req["parameters"] = {"binary_data_output": True}
    if request_id is not None:
        req["id"] = request_id
    return json.dumps(req).encode(), {"Content-Type": "application/json"}


def infer_body_binary(inputs, outputs=None, binary_output=True):
    """A binary-tensor-data request: JSON header, then each input's raw little-endian bytes."""
    req = {"inputs": [{"name": n, "shape": list(a.shape), "datatype": "FP32", "parameters": {"binary_data_size": a.nbytes}} for n, a in inputs]}
    if outputs is not None:
        req["outputs"] = [{"name": n, "parameters": {"binary_data": binary_output}} for n in outputs]
    elif binary_output:
        req["parameters"] = {"binary_data_output": True}
    header = json.dumps(req).encode()
    raw = b"".join(a.astype("<f4").tobytes() for _, a in inputs)
    return header + raw, {"Inference-Header-Content-Length": str(len(header)), "Content-Type": "application/octet-stream"}


def parse_infer_reply(reply):
    """{output name: np.float32 array} from a 200 infer reply, JSON or binary; and the JSON header."""
    import numpy as np
    n = reply.header("Inference-Header-Content-Length")
    body = reply.body
    header = json.loads(body[: int(n)] if n is not None else body)
    offset = int(n) if n is not None else len(body)
    out = {}
    for o in header["outputs"]:
        if o.get("datatype") != "FP32":
            raise ValueError(f"output {o.get('name')} has datatype {o.get('datatype')}, not FP32")
        size = (o.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            a = np.frombuffer(body[offset: offset + size], dtype="<f4")
            offset += size
        else:
            a = np.array(o["data"], dtype=np.float64).astype(np.float32).reshape(-1)
        out[o["name"]] = a.reshape(o["shape"])
    if offset != len(body):
        raise ValueError(f"{len(body) - offset} bytes after the last binary output")
    return out, header


# ---------------------------------------------------------------------------------------------------------
# The references of serve_fixture.

class Ref:
    def __init__(self, data_dir, tag, entry):
        import numpy as np
        self.tag = tag
        self.input = entry["input"]
        self.output = entry["output"]
        self.batch_invariant = entry["batch_invariant"]
        self.batches = {}
        for b in entry["batches"]:
            x = np.fromfile(os.path.join(data_dir, b["input_file"]), dtype="<f4").reshape(b["input_shape"])
            y = np.fromfile(os.path.join(data_dir, b["output_file"]), dtype="<f4").reshape(b["output_shape"])
            self.batches[b["rows"]] = (x, y)


def same(got, want):
    import numpy as np
    return got is not None and got.dtype == np.float32 and got.shape == want.shape and np.array_equal(got, want)


def describe_diff(got, want):
    import numpy as np
    if got is None:
        return "no output"
    if got.shape != want.shape:
        return f"shape {list(got.shape)}, want {list(want.shape)}"
    if got.dtype != np.float32:
        return f"dtype {got.dtype}"
    d = np.abs(got.astype(np.float64) - want.astype(np.float64))
    return f"{int((got != want).sum())} of {got.size} values differ, max |diff| {d.max():.3g}"


# ---------------------------------------------------------------------------------------------------------
# The checks.

class Ctx:
    conv_success = 0   # successful conv inferences sent (the metrics must count as many)
    conv_rows = 0      # rows in them


def triton_basics(ctx):
    import tritonclient.http as th
    c = ctx.client
    check(c.is_server_live(), "is_server_live")
    check(c.is_server_ready(), "is_server_ready")
    for m in ("mlp", "conv"):
        check(c.is_model_ready(m), f"is_model_ready({m})")
        check(c.is_model_ready(m, "1"), f"is_model_ready({m}, version 1)")
    check(not c.is_model_ready("nope"), "is_model_ready(nope) is false")
    check(not c.is_model_ready("mlp", "7"), "is_model_ready(mlp, version 7) is false")
    meta = c.get_server_metadata()
    check(meta.get("name") == "oar" and isinstance(meta.get("version"), str) and isinstance(meta.get("extensions"), list),
          "get_server_metadata: name oar, a version, extensions", meta)
    for m, ref in (("mlp", ctx.refs["mlp_v1"]), ("conv", ctx.refs["conv"])):
        for version in ("", "1"):
            md = c.get_model_metadata(m, version)
            want_in = [{"name": ref.input["name"], "datatype": "FP32", "shape": ref.input["shape"]}]
            want_out = [{"name": ref.output["name"], "datatype": "FP32", "shape": ref.output["shape"]}]
            got_in = [{k: t.get(k) for k in ("name", "datatype", "shape")} for t in md.get("inputs", [])]
            got_out = [{k: t.get(k) for k in ("name", "datatype", "shape")} for t in md.get("outputs", [])]
            check(md.get("name") == m and md.get("versions") == ["1"] and md.get("platform") == "oar" and got_in == want_in and got_out == want_out,
                  f"get_model_metadata({m}{', version 1' if version else ''}): {want_in[0]} -> {want_out[0]}", md)
    try:
        c.get_model_metadata("nope")
        fail("get_model_metadata(nope) raises")
    except th.InferenceServerException as e:
        check(e.status() == "404", "get_model_metadata(nope) raises a 404", f"status {e.status()}: {e}")
    index = c.get_model_repository_index()
    names = sorted(e.get("name") for e in index) if isinstance(index, list) else index
    check(isinstance(index, list) and {"mlp", "conv"} <= set(names), "get_model_repository_index lists mlp and conv", index)


def triton_infer_one(ctx, model, ref, rows, mode, version=""):
    import tritonclient.http as th
    x, want = ref.batches[rows]
    inp = th.InferInput(ref.input["name"], list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=(mode != "json"))
    outputs = None
    if mode == "json":
        outputs = [th.InferRequestedOutput(ref.output["name"], binary_data=False)]
    elif mode == "binary requested":
        outputs = [th.InferRequestedOutput(ref.output["name"], binary_data=True)]
    headers = {"Authorization": "Bearer secret"} if ctx.keyed else None
    res = ctx.client.infer(model, [inp], model_version=version, outputs=outputs, headers=headers)
    got = res.as_numpy(ref.output["name"])
    if model == "conv" and not ctx.keyed:
        ctx.conv_success += 1
        ctx.conv_rows += rows
    check(same(got, want), f"tritonclient infer {model}{' v' + version if version else ''}, {rows} row(s), {mode}: equal to the reference bit for bit",
          describe_diff(got, want))


def triton_infer(ctx):
    for model, tag in (("mlp", "mlp_v1"), ("conv", "conv")):
        for rows in (1, 4):
            for mode in ("binary (default)", "binary requested", "json"):
                triton_infer_one(ctx, model, ctx.refs[tag], rows, mode)
        triton_infer_one(ctx, model, ctx.refs[tag], 4, "binary (default)", version="1")


def good_request(ctx, after):
    """The server still answers correctly (a JSON infer of mlp, one row, on a new connection)."""
    ref = ctx.refs["mlp_v1"]
    x, want = ref.batches[1]
    body, headers = infer_body_json([(ref.input["name"], x)])
    r = request(ctx.port, "POST", "/v2/models/mlp/infer", body, headers)
    got = parse_infer_reply(r)[0].get(ref.output["name"]) if r.status == 200 else None
    check(r.status == 200 and same(got, want), f"  then a good request answers correctly (after {after})", repr(r) if r.status != 200 else describe_diff(got, want))


def raw_endpoints(ctx):
    p = ctx.port
    for path in ("/v2/health/live", "/v2/health/ready"):
        r = request(p, "GET", path)
        check(r.status == 200, f"GET {path}: 200", repr(r))
    r = request(p, "GET", "/v2")
    check(r.status == 200 and r.json().get("name") == "oar" and "version" in r.json() and isinstance(r.json().get("extensions"), list),
          "GET /v2: server metadata", repr(r))
    check((r.header("Content-Type") or "").startswith("application/json"), "GET /v2: Content-Type application/json", r.header("Content-Type"))
    for path in ("/v2/models/mlp", "/v2/models/mlp/versions/1", "/v2/models/conv", "/v2/models/conv/versions/1"):
        r = request(p, "GET", path)
        j = r.json() if r.status == 200 else {}
        model = path.split("/")[3]
        ref = ctx.refs["mlp_v1" if model == "mlp" else "conv"]
        check(r.status == 200 and j.get("name") == model and j.get("versions") == ["1"] and j.get("platform") == "oar"
              and [i.get("shape") for i in j.get("inputs", [])] == [ref.input["shape"]]
              and [o.get("name") for o in j.get("outputs", [])] == [ref.output["name"]], f"GET {path}: metadata", repr(r))
    for path in ("/v2/models/mlp/ready", "/v2/models/mlp/versions/1/ready", "/v2/models/conv/ready"):
        r = request(p, "GET", path)
        check(r.status == 200, f"GET {path}: 200", repr(r))
    for path in ("/v2/models/nope/ready", "/v2/models/mlp/versions/7/ready"):
        r = request(p, "GET", path)
        check(r.status == 404, f"GET {path}: 404", repr(r))
    r = request(p, "POST", "/v2/repository/index", b"{}", {"Content-Type": "application/json"})
    names = [e.get("name") for e in r.json()] if r.status == 200 and isinstance(r.json(), list) else []
    check({"mlp", "conv"} <= set(names), "POST /v2/repository/index: lists mlp and conv", repr(r))
    r = request(p, "POST", "/v2/repository/index")
    check(r.status == 200, "POST /v2/repository/index with an empty body: 200", repr(r))
    r = request(p, "GET", "/metrics")
    check(r.status == 200 and b"oar_inference_requests_total" in r.body, "GET /metrics: 200, Prometheus text", repr(r))
    # Several requests on one keep-alive connection.
    conn = http.client.HTTPConnection("127.0.0.1", p, timeout=15)
    try:
        statuses = []
        for path in ("/v2/health/live", "/v2", "/v2/models/mlp"):
            conn.request("GET", path)
            rr = conn.getresponse()
            rr.read()
            statuses.append(rr.status)
        check(statuses == [200, 200, 200], "three requests on one keep-alive connection", statuses)
    finally:
        conn.close()


def raw_infer(ctx):
    p = ctx.port
    for model, tag in (("mlp", "mlp_v1"), ("conv", "conv")):
        ref = ctx.refs[tag]
        iname, oname = ref.input["name"], ref.output["name"]
        for rows in (1, 4):
            x, want = ref.batches[rows]
            cases = [("JSON, flat data", infer_body_json([(iname, x)])),
                     ("JSON, nested data", infer_body_json([(iname, x)], nested=True)),
                     ("JSON, outputs named", infer_body_json([(iname, x)], outputs=[oname])),
                     ("JSON in, binary out (binary_data_output)", infer_body_json([(iname, x)], binary_output=True)),
                     ("binary in and out", infer_body_binary([(iname, x)], outputs=[oname])),
                     ("binary in, JSON out", infer_body_binary([(iname, x)], outputs=[oname], binary_output=False))]
            for what, (body, headers) in cases:
                for path in (f"/v2/models/{model}/infer", f"/v2/models/{model}/versions/1/infer"):
                    if "versions" in path and rows == 1:
                        continue
                    r = request(p, "POST", path, body, headers)
                    got, header = None, {}
                    if r.status == 200:
                        outs, header = parse_infer_reply(r)
                        got = outs.get(oname)
                        if model == "conv":
                            ctx.conv_success += 1
                            ctx.conv_rows += rows
                    named = header.get("model_name") == model and str(header.get("model_version", "1")) == "1"
                    check(r.status == 200 and same(got, want) and named,
                          f"POST {path} ({what}, {rows} row(s)): equal to the reference bit for bit, model_name and model_version",
                          repr(r) if r.status != 200 else describe_diff(got, want) if not same(got, want) else
                          f"model_name {header.get('model_name')!r}, model_version {header.get('model_version')!r}")
    # The request id comes back (KServe v2: "id" echoed in the response).
    ref = ctx.refs["mlp_v1"]
    body, headers = infer_body_json([(ref.input["name"], ref.batches[1][0])], request_id="req-42")
    r = request(p, "POST", "/v2/models/mlp/infer", body, headers)
    check(r.status == 200 and r.json().get("id") == "req-42", "the request's id comes back in the response", repr(r))


def errors(ctx):
    import numpy as np
    p = ctx.port
    ref = ctx.refs["mlp_v1"]
    iname = ref.input["name"]
    x1 = ref.batches[1][0]
    J = {"Content-Type": "application/json"}

    def infer(req):
        return json.dumps(req).encode()

    good_input = {"name": iname, "shape": [1, 784], "datatype": "FP32", "data": x1.reshape(-1).tolist()}
    cases = [
        (400, "bad JSON", "POST", "/v2/models/mlp/infer", b'{"inputs": [', J),
        (400, "JSON that is no object", "POST", "/v2/models/mlp/infer", b'[1, 2, 3]', J),
        (400, "no inputs", "POST", "/v2/models/mlp/infer", infer({"inputs": []}), J),
        (400, "missing input (another name)", "POST", "/v2/models/mlp/infer", infer({"inputs": [dict(good_input, name="not_an_input")]}), J),
        (400, "wrong shape (rank 1)", "POST", "/v2/models/mlp/infer", infer({"inputs": [dict(good_input, shape=[784])]}), J),
        (400, "wrong shape (783 columns)", "POST", "/v2/models/mlp/infer",
         infer({"inputs": [dict(good_input, shape=[1, 783], data=x1.reshape(-1)[:783].tolist())]}), J),
        (400, "wrong shape for conv ([1, 784])", "POST", "/v2/models/conv/infer",
         infer({"inputs": [dict(good_input, name=ctx.refs["conv"].input["name"])]}), J),
        (400, "wrong datatype (INT32)", "POST", "/v2/models/mlp/infer", infer({"inputs": [dict(good_input, datatype="INT32", data=[0] * 784)]}), J),
        (400, "unknown datatype", "POST", "/v2/models/mlp/infer", infer({"inputs": [dict(good_input, datatype="FLOAT")]}), J),
        (400, "data length mismatch (10 values for [1, 784])", "POST", "/v2/models/mlp/infer",
         infer({"inputs": [dict(good_input, data=[0.5] * 10)]}), J),
        (400, "data that is not numbers", "POST", "/v2/models/mlp/infer", infer({"inputs": [dict(good_input, data=["a"] * 784)]}), J),
    ]
    # Binary tensor data: binary_data_size larger than the bytes that follow, and a header length past the body.
    header = json.dumps({"inputs": [{"name": iname, "shape": [1, 784], "datatype": "FP32", "parameters": {"binary_data_size": 3136}}]}).encode()
    raw = x1.astype("<f4").tobytes()
    cases.append((400, "binary data shorter than binary_data_size", "POST", "/v2/models/mlp/infer", header + raw[:1000],
                  {"Inference-Header-Content-Length": str(len(header))}))
    header2 = json.dumps({"inputs": [{"name": iname, "shape": [1, 784], "datatype": "FP32", "parameters": {"binary_data_size": 1000}}]}).encode()
    cases.append((400, "binary_data_size not 4 x 784", "POST", "/v2/models/mlp/infer", header2 + raw[:1000],
                  {"Inference-Header-Content-Length": str(len(header2))}))
    cases.append((400, "Inference-Header-Content-Length past the body", "POST", "/v2/models/mlp/infer", header + raw,
                  {"Inference-Header-Content-Length": str(len(header) + len(raw) + 100)}))
    ok_body = infer({"inputs": [good_input]})
    cases += [
        (404, "unknown model (infer)", "POST", "/v2/models/nope/infer", ok_body, J),
        (404, "unknown version (infer)", "POST", "/v2/models/mlp/versions/7/infer", ok_body, J),
        (404, "unknown model (metadata)", "GET", "/v2/models/nope", None, None),
        (404, "unknown version (metadata)", "GET", "/v2/models/mlp/versions/7", None, None),
        (404, "unknown path", "GET", "/v2/nothing/here", None, None),
        (404, "unknown path outside /v2", "GET", "/index.html", None, None),
        (405, "GET on infer", "GET", "/v2/models/mlp/infer", None, None),
        (405, "POST on health/live", "POST", "/v2/health/live", b"", J),
        (405, "GET on repository load", "GET", "/v2/repository/models/mlp/load", None, None),
    ]
    # --max-elements 50000 on server A: 64 rows of 784 = 50176 elements (a 200 KB binary body, under the body limit).
    big = np.zeros((64, 784), dtype=np.float32)
    body, headers = infer_body_binary([(iname, big)])
    cases.append((413, "a tensor over --max-elements (64 x 784 > 50000)", "POST", "/v2/models/mlp/infer", body, headers))
    for status, what, method, path, body, headers in cases:
        expect_error(p, status, f"{method} {path} {what}", method, path, body, headers)
        good_request(ctx, what)
    # Bad requests on one keep-alive connection: the server answers each (or closes it) and the next connection works.
    conn = http.client.HTTPConnection("127.0.0.1", p, timeout=15)
    try:
        conn.request("POST", "/v2/models/mlp/infer", body=b"{oops", headers=J)
        r = conn.getresponse()
        r.read()
        check(r.status == 400, "bad JSON on a keep-alive connection: 400", r.status)
    finally:
        conn.close()
    good_request(ctx, "a bad request on a keep-alive connection")
    # Not HTTP at all.
    import socket
    s = socket.create_connection(("127.0.0.1", p), timeout=5)
    try:
        s.sendall(b"\x16\x03\x01 this is not HTTP\r\n\r\n")
        data = b""
        try:
            while b"\r\n" not in data:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        except (socket.timeout, ConnectionResetError):
            pass
        check(data == b"" or data.startswith(b"HTTP/1.1 400") or data.startswith(b"HTTP/1.0 400"), "garbage instead of HTTP: 400 or closed",
              data[:200])
    finally:
        s.close()
    good_request(ctx, "garbage instead of HTTP")


def pipelined(ctx):
    """Three requests written at once on one connection (HTTP/1.1 pipelining) come back in their order, each
    the right answer; then headers over the server's 16 KiB limit are answered 431."""
    import socket
    ref = ctx.refs["mlp_v1"]
    x, want = ref.batches[1]
    raw = b""
    for rid in ("first", "second", "third"):
        body, _ = infer_body_json([(ref.input["name"], x)], request_id=rid)
        raw += (b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    with socket.create_connection(("127.0.0.1", ctx.port), timeout=15) as s:
        s.sendall(raw)
        f = s.makefile("rb")
        ids, firsts = [], []
        for _ in range(3):
            status = f.readline()
            length = 0
            while True:
                line = f.readline()
                if line in (b"\r\n", b""):
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            j = json.loads(f.read(length))
            ids.append(j.get("id"))
            firsts.append(status.startswith(b"HTTP/1.1 200"))
        check(all(firsts) and ids == ["first", "second", "third"], "pipelined requests are answered in their order", f"{ids} {firsts}")
    big = {"X-Padding": "p" * 20000}
    r = request(ctx.port, "GET", "/v2/health/live", None, big)
    check(r.status == 431 and is_error_reply(r), "headers over 16 KiB: 431 with a JSON error", repr(r))
    good_request(ctx, "the 431")


def concurrency(ctx):
    import numpy as np
    p = ctx.port
    jobs = []
    for i in range(24):
        model, tag = (("conv", "conv") if i % 3 else ("mlp", "mlp_v1"))
        rows = 4 if i % 2 else 1
        jobs.append((model, tag, rows))

    def run(job):
        model, tag, rows = job
        ref = ctx.refs[tag]
        x, want = ref.batches[rows]
        body, headers = infer_body_binary([(ref.input["name"], x)], outputs=[ref.output["name"]])
        r = request(p, "POST", f"/v2/models/{model}/infer", body, headers, timeout=30)
        got = parse_infer_reply(r)[0].get(ref.output["name"]) if r.status == 200 else None
        return job, r, got, want

    with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
        results = list(pool.map(run, jobs))
    inexact = 0
    for (model, tag, rows), r, got, want in results:
        if r.status != 200:
            fail(f"concurrent {model} {rows} row(s): {r!r}")
            continue
        if model == "conv":
            ctx.conv_success += 1
            ctx.conv_rows += rows
        if ctx.refs[tag].batch_invariant or model == "mlp":
            # mlp has no dynamic batching: each request runs as its own batch, so it is exact even under load.
            if not same(got, want):
                fail(f"concurrent {model} {rows} row(s): {describe_diff(got, want)}")
                continue
        else:
            # conv's requests may be batched together, and oar's GEMM rounds a row differently in another batch
            # (ref.json: batch_invariant false): close, not bit for bit.
            if got is None or got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=1e-7):
                fail(f"concurrent {model} {rows} row(s): {describe_diff(got, want)}")
                continue
            inexact += not same(got, want)
    n_mlp = sum(1 for j in jobs if j[0] == "mlp")
    print(f"         {inexact} of {len(jobs) - n_mlp} conv answers differ from the reference in the last bits (batched with other requests)")
    check(not [1 for _, r, _, _ in results if r.status != 200], f"{len(jobs)} concurrent requests ({n_mlp} mlp exact, {len(jobs) - n_mlp} conv "
          "dynamically batched, within 1e-5) answer correctly")


def parse_metrics(text):
    samples = []
    types = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("# TYPE"):
            parts = line.split()
            if len(parts) >= 4:
                types[parts[2]] = parts[3]
            continue
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)', line)
        if not m:
            raise ValueError(f"not a Prometheus sample line: {line!r}")
        labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        samples.append((m.group(1), labels, float(m.group(3))))
    return samples, types


def metric(samples, name, **labels):
    """The sample of `name` with these labels (the sum of them where other labels tell several apart); None if none."""
    vals = [v for n, l, v in samples if n == name and all(l.get(k) == w for k, w in labels.items())]
    return sum(vals) if vals else None


def metrics(ctx):
    p = ctx.port
    deadline = time.monotonic() + 3  # a counter may be bumped just after its response went out
    while True:
        r = request(p, "GET", "/metrics")
        samples, types = parse_metrics(r.body.decode())
        n = metric(samples, "oar_inference_requests_total", model="conv", version="1", status="success")
        if n == ctx.conv_success or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    check(r.status == 200 and (r.header("Content-Type") or "").startswith("text/plain"), "GET /metrics: 200 text/plain", r.header("Content-Type"))
    check(n == ctx.conv_success, f'oar_inference_requests_total{{model="conv",version="1",status="success"}} == {ctx.conv_success} (the requests sent)', n)
    nm = metric(samples, "oar_inference_requests_total", model="mlp", version="1", status="success")
    check(isinstance(nm, float) and nm > 0, 'oar_inference_requests_total{model="mlp",version="1",status="success"} > 0', nm)
    nf = metric(samples, "oar_inference_requests_total", model="mlp", version="1", status="failure")
    check(isinstance(nf, float) and nf > 0, 'oar_inference_requests_total{model="mlp",version="1",status="failure"} > 0 (the bad requests)', nf)
    check(types.get("oar_inference_requests_total") == "counter", "oar_inference_requests_total is a counter", types.get("oar_inference_requests_total"))
    for h in ("oar_inference_queue_seconds", "oar_inference_compute_seconds", "oar_inference_request_seconds", "oar_inference_batch_size"):
        count = metric(samples, h + "_count", model="conv", version="1")
        inf = metric(samples, h + "_bucket", model="conv", version="1", le="+Inf")
        check(types.get(h) == "histogram" and isinstance(count, float) and count > 0 and inf == count,
              f"{h}{{model=\"conv\",version=\"1\"}}: a histogram, _count > 0, +Inf bucket == _count", f"type {types.get(h)}, count {count}, +Inf {inf}")
    rows = metric(samples, "oar_inference_batch_size_sum", model="conv", version="1")
    batches = metric(samples, "oar_inference_batch_size_count", model="conv", version="1")
    check(rows == ctx.conv_rows, f"oar_inference_batch_size_sum{{model=\"conv\"}} == {ctx.conv_rows} (the rows sent; batch size counted in rows)", rows)
    if isinstance(batches, float):
        print(f"         conv: {ctx.conv_success} requests ran as {int(batches)} batches")
        check(batches <= ctx.conv_success, "conv ran no more batches than requests", batches)
    g = metric(samples, "oar_inference_in_flight", model="conv", version="1")
    check(g == 0.0 and types.get("oar_inference_in_flight") == "gauge", 'oar_inference_in_flight{model="conv",version="1"}: a gauge, 0 at rest', g)
    for code in ("200", "400", "404", "405", "413"):
        v = metric(samples, "oar_http_requests_total", code=code)
        check(isinstance(v, float) and v > 0, f'oar_http_requests_total{{code="{code}"}} > 0', v)


def infer_mlp(ctx, version=""):
    """A binary infer of mlp (4 rows): (reply, output or None)."""
    ref = ctx.refs["mlp_v1"]
    body, headers = infer_body_binary([(ref.input["name"], ref.batches[4][0])])
    path = f"/v2/models/mlp/versions/{version}/infer" if version else "/v2/models/mlp/infer"
    r = request(ctx.port, "POST", path, body, headers)
    return r, (parse_infer_reply(r)[0].get(ref.output["name"]) if r.status == 200 else None)


def load_unload(ctx):
    c = ctx.client
    v1 = ctx.refs["mlp_v1"].batches[4][1]
    v2 = ctx.refs["mlp_v2"].batches[4][1]
    # Unload with tritonclient (it posts {"parameters": {"unload_dependents": false}}).
    c.unload_model("mlp")
    ok("unload_model(mlp)")
    check(not c.is_model_ready("mlp"), "is_model_ready(mlp) is false after unload")
    r = request(ctx.port, "GET", "/v2/models/mlp/ready")
    check(r.status != 200, "GET /v2/models/mlp/ready is not 200 after unload", repr(r))
    r, _ = infer_mlp(ctx)
    check(r.status == 404 and is_error_reply(r), "infer mlp after unload: 404 with a JSON error", repr(r))
    check(c.is_model_ready("conv"), "conv still ready")
    # Load it again with raw HTTP (still only version 1 in the repo).
    r = request(ctx.port, "POST", "/v2/repository/models/mlp/load", b"{}", {"Content-Type": "application/json"})
    check(r.status == 200, "POST /v2/repository/models/mlp/load: 200", repr(r))
    r, got = infer_mlp(ctx)
    check(r.status == 200 and same(got, v1), "after load: mlp predicts as version 1", repr(r) if r.status != 200 else describe_diff(got, v1))
    # Version 2 appears in the repo: load (while loaded) swaps to it.
    shutil.copytree(os.path.join(ctx.data, "stage", "mlp", "2"), os.path.join(ctx.repo, "mlp", "2"))
    c.load_model("mlp")
    ok("load_model(mlp) with version 2 in the repository")
    check(c.is_model_ready("mlp"), "is_model_ready(mlp)")
    check(c.is_model_ready("mlp", "2"), "is_model_ready(mlp, version 2)")
    md = c.get_model_metadata("mlp")
    check(md.get("versions") == ["2"], "get_model_metadata(mlp).versions == ['2']", md.get("versions"))
    r, got = infer_mlp(ctx)
    check(r.status == 200 and same(got, v2), "mlp predicts as version 2 bit for bit", repr(r) if r.status != 200 else describe_diff(got, v2))
    r, got = infer_mlp(ctx, "2")
    check(r.status == 200 and same(got, v2), "mlp version 2 (/versions/2/infer) predicts as version 2", repr(r) if r.status != 200 else describe_diff(got, v2))
    if r.status == 200:
        check(str(parse_infer_reply(r)[1].get("model_version")) == "2", "its reply says model_version 2", parse_infer_reply(r)[1].get("model_version"))
    r, _ = infer_mlp(ctx, "1")
    check(r.status == 404 and is_error_reply(r), "mlp version 1 is no longer served: 404", repr(r))
    ref = ctx.refs["mlp_v2"]
    for rows in (1, 4):
        triton_infer_one(ctx, "mlp", ref, rows, "binary (default)")
        triton_infer_one(ctx, "mlp", ref, rows, "json", version="2")
    # An unknown model cannot be loaded; unloading it fails too.
    r = request(ctx.port, "POST", "/v2/repository/models/nope/load", b"{}", {"Content-Type": "application/json"})
    check(r.status in (400, 404) and is_error_reply(r), "load of a model not in the repository: 400 or 404 with a JSON error", repr(r))
    r = request(ctx.port, "POST", "/v2/repository/models/nope/unload", b"{}", {"Content-Type": "application/json"})
    check(r.status in (400, 404) and is_error_reply(r), "unload of an unknown model: 400 or 404 with a JSON error", repr(r))
    r = request(ctx.port, "POST", "/v2/repository/index", b"{}", {"Content-Type": "application/json"})
    check(r.status == 200 and {"mlp", "conv"} <= {e.get("name") for e in r.json()}, "repository index still lists mlp and conv", repr(r))


def api_key(ctx):
    import tritonclient.http as th
    p = ctx.port_b
    ref = ctx.refs["mlp_v1"]
    x, want = ref.batches[4]
    key = {"Authorization": "Bearer secret"}
    for path in ("/v2/health/live", "/v2/health/ready"):
        r = request(p, "GET", path)
        check(r.status == 200, f"{path} without a key: 200", repr(r))
    body, headers = infer_body_binary([(ref.input["name"], x)], outputs=[ref.output["name"]])
    for what, h in (("no key", {}), ("a wrong key", {"Authorization": "Bearer wrong"}), ("the key without Bearer", {"Authorization": "secret"}),
                    ("Basic auth", {"Authorization": "Basic c2VjcmV0OnNlY3JldA=="})):
        expect_error(p, 401, f"GET /v2 with {what}", "GET", "/v2", None, h)
        expect_error(p, 401, f"GET /v2/models/mlp with {what}", "GET", "/v2/models/mlp", None, h)
        expect_error(p, 401, f"POST /v2/models/mlp/infer with {what}", "POST", "/v2/models/mlp/infer", body, dict(headers, **h))
    expect_error(p, 401, "POST /v2/repository/models/mlp/unload with no key", "POST", "/v2/repository/models/mlp/unload", b"{}", {})
    r = request(p, "GET", "/v2", None, key)
    check(r.status == 200 and r.json().get("name") == "oar", "GET /v2 with Bearer secret: 200", repr(r))
    r = request(p, "GET", "/v2/models/mlp/ready", None, key)
    check(r.status == 200, "GET /v2/models/mlp/ready with Bearer secret: 200", repr(r))
    r = request(p, "POST", "/v2/models/mlp/infer", body, dict(headers, **key))
    got = parse_infer_reply(r)[0].get(ref.output["name"]) if r.status == 200 else None
    check(r.status == 200 and same(got, want), "infer with Bearer secret: equal to the reference", repr(r) if r.status != 200 else describe_diff(got, want))
    # tritonclient with the header (right after connecting: this server drops idle connections after 1 s).
    client = th.InferenceServerClient(url=f"127.0.0.1:{p}", connection_timeout=10, network_timeout=30)
    try:
        saved = (ctx.client, ctx.keyed)
        ctx.client, ctx.keyed = client, True
        triton_infer_one(ctx, "mlp", ref, 4, "binary (default)")
    finally:
        ctx.client, ctx.keyed = saved
        client.close()
    # --max-body-bytes 100000: a 32-row binary request is 100352 bytes of tensor alone.
    big = x.repeat(8, axis=0)
    body, headers = infer_body_binary([(ref.input["name"], big)])
    expect_error(p, 413, f"a body of {len(body)} bytes over --max-body-bytes 100000", "POST", "/v2/models/mlp/infer", body, dict(headers, **key))
    body, headers = infer_body_json([(ref.input["name"], big)])
    expect_error(p, 413, f"a JSON body of {len(body)} bytes over --max-body-bytes 100000", "POST", "/v2/models/mlp/infer", body, dict(headers, **key))
    r = request(p, "POST", "/v2/models/mlp/infer", *(lambda b, h: (b, dict(h, **key)))(*infer_body_binary([(ref.input["name"], x)])))
    check(r.status == 200, "then a good request with the key: 200", repr(r))


def answered_408_or_closed(port, timeout, talk, what, within, still_open):
    """On a new connection (socket timeout `timeout`), talk(socket) returns what the server sent: checks that it is
    nothing or a 408, within `within` seconds; fails with `still_open` when the socket times out first."""
    import socket
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    t0 = time.monotonic()
    try:
        data = talk(s)
        check(data == b"" or data.startswith(b"HTTP/1.1 408"), what, data[:100])
        check(time.monotonic() - t0 < within, f"  within {time.monotonic() - t0:.1f} s")
    except socket.timeout:
        fail(still_open)
    finally:
        s.close()


def timeouts(ctx):
    p = ctx.port_b
    # --idle-timeout 1: a connection that sends nothing is closed.
    answered_408_or_closed(p, 10, lambda s: s.recv(65536), "an idle connection is closed (--idle-timeout 1)", 8,
                           "an idle connection is still open after 10 s (--idle-timeout 1)")

    # --request-timeout 2: a request whose body never arrives is answered 408 or closed.
    def stalled_body(s):
        s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\nContent-Length: 1000\r\n\r\n{\"inputs\"")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk
    answered_408_or_closed(p, 12, stalled_body, "a request whose body stops is answered 408 or closed (--request-timeout 2)", 10,
                           "a request whose body stopped is still open after 12 s (--request-timeout 2)")
    r = request(p, "GET", "/v2/health/live")
    check(r.status == 200, "the server still answers", repr(r))


def stop(server, sig):
    server.proc.send_signal(sig)
    try:
        rc = server.proc.wait(timeout=15)
        check(rc == 0, f"server {server.name} stops on {signal.Signals(sig).name} with exit status 0", rc)
    except subprocess.TimeoutExpired:
        fail(f"server {server.name} still runs 15 s after {signal.Signals(sig).name}")


# ---------------------------------------------------------------------------------------------------------

def main(args):
    import tritonclient.http as th

    time_limit(TEST_SECONDS)

    data = os.path.abspath(args.data)
    ref_json = json.load(open(os.path.join(data, "ref.json")))
    ctx = Ctx()
    ctx.data = data
    ctx.keyed = False
    ctx.refs = {tag: Ref(data, tag, e) for tag, e in ref_json["models"].items()}
    if ref_json.get("conv_algorithm") != "im2col":
        fail(f"ref.json's conv_algorithm is {ref_json.get('conv_algorithm')}, the servers run im2col")
    work = os.path.join(data, "work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    ctx.repo = os.path.join(work, "repo")
    shutil.copytree(os.path.join(data, "repo"), ctx.repo)
    servers = []
    try:
        a = Server(args.oar, ctx.repo, work, "A", ["--max-elements", "50000", "--max-body-bytes", "10000000"])
        servers.append(a)
        b = Server(args.oar, ctx.repo, work, "B", ["--api-key", "secret", "--max-body-bytes", "100000", "--max-elements", "100000",
                                                   "--idle-timeout", "1", "--request-timeout", "2"])
        servers.append(b)
        ctx.port, ctx.port_b = a.wait_port(), b.wait_port()
        print(f"server A on port {ctx.port}, server B on port {ctx.port_b}", flush=True)
        for s in servers:
            line = f"oar serve: listening on http://127.0.0.1:{s.port}"
            deadline = time.monotonic() + 5
            while line not in s.output() and time.monotonic() < deadline:
                time.sleep(0.05)
            check(line in s.output(), f"server {s.name} prints '{line}'", s.output()[-500:])
        ctx.client = th.InferenceServerClient(url=f"127.0.0.1:{ctx.port}", connection_timeout=10, network_timeout=30)
        section("tritonclient: health and metadata", triton_basics, ctx)
        section("tritonclient: inference", triton_infer, ctx)
        section("http: endpoints", raw_endpoints, ctx)
        section("http: inference", raw_infer, ctx)
        section("http: errors", errors, ctx)
        section("pipelined requests, header limit", pipelined, ctx)
        section("concurrent requests", concurrency, ctx)
        section("metrics", metrics, ctx)
        section("unload, load, swap to version 2", load_unload, ctx)
        section("API key and body limit (server B)", api_key, ctx)
        section("idle and request timeouts (server B)", timeouts, ctx)
        ctx.client.close()
        print("\n== graceful stop", flush=True)
        stop(a, signal.SIGTERM)
        stop(b, signal.SIGINT)
    except TestTimeout as e:
        fail(str(e))
    except Exception as e:
        fail(f"{type(e).__name__}: {e}")
        traceback.print_exc(file=sys.stdout)
    finally:
        signal.alarm(0)
        for s in servers:
            s.kill()
    if failures:
        for s in servers:
            print(f"\n-- server {s.name} output (last 3000 characters):\n{s.output()[-3000:]}")
    return verdict("all serve checks passed")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--oar", required=True, help="the oar binary (oar serve)")
    ap.add_argument("--data", required=True, help="the directory serve_fixture wrote")
    ap.add_argument("--venv", required=True, help="the venv with tritonclient[http] and numpy (created when missing)")
    args = ap.parse_args()
    pyvenv.run_inside(args.venv, ["tritonclient[http]", "numpy"], "import tritonclient.http, numpy", __file__, PIP_SECONDS)
    sys.exit(main(args))
