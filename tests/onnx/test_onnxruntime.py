#!/usr/bin/env python3
"""tests/onnx/test_onnxruntime.py: oar's ONNX exports, run in ONNX Runtime.

    test_onnxruntime.py --cases DIR --venv VENV_DIR

Each DIR (--cases may repeat) holds what `onnx_fixture DIR [SEQ_DIR]` wrote: one directory per exported model, in the layout of ONNX's node tests
(model.onnx, test_data_set_0/input_K.pb, output_K.pb: oar's outputs). The test first makes VENV_DIR
(python3 -m venv; pip install onnxruntime onnx numpy) unless it is there, and runs again with its python;
when pip cannot install them (no network) it prints `SKIP: ...` and exits 77.

For each model: ONNX's full checker (check_model with full_check), then ONNX Runtime's outputs on the stored
inputs against oar's, |ort - oar| <= 1e-5 * |oar| + ATOL elementwise (ATOL 1e-6: float32 sums in another
order). Every check prints a line; any failure makes the exit status 1.
"""
import argparse
import os
import sys

PIP_SECONDS = 240
RTOL, ATOL = 1e-5, 1e-6

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import pyvenv  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", required=True, action="append", help="a directory of exported models (repeatable)")
    ap.add_argument("--venv", required=True)
    args = ap.parse_args()
    pyvenv.run_inside(args.venv, ["onnxruntime", "onnx", "numpy"], "import onnxruntime, onnx, numpy", __file__, PIP_SECONDS)

    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}", flush=True)
    failures = 0
    cases = sorted(os.path.join(root, d) for root in args.cases for d in os.listdir(root) if os.path.isfile(os.path.join(root, d, "model.onnx")))
    if not cases:
        print(f"FAIL: no exported models in {', '.join(args.cases)}")
        return 1
    for path in cases:
        case = os.path.basename(path)
        try:
            model = onnx.load(os.path.join(path, "model.onnx"))
            onnx.checker.check_model(model, full_check=True)
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = 1
            sess = ort.InferenceSession(os.path.join(path, "model.onnx"), opts, providers=["CPUExecutionProvider"])
            data = os.path.join(path, "test_data_set_0")

            def load(prefix):
                out, k = [], 0
                while os.path.exists(os.path.join(data, f"{prefix}_{k}.pb")):
                    t = onnx.TensorProto()
                    with open(os.path.join(data, f"{prefix}_{k}.pb"), "rb") as f:
                        t.ParseFromString(f.read())
                    out.append(numpy_helper.to_array(t))
                    k += 1
                return out

            inputs, expected = load("input"), load("output")
            feeds = {i.name: v for i, v in zip(sess.get_inputs(), inputs)}
            got = sess.run(None, feeds)
            if len(got) != len(expected):
                raise AssertionError(f"{len(got)} outputs, expected {len(expected)}")
            worst = 0.0
            for k, (g, e) in enumerate(zip(got, expected)):
                if g.shape != e.shape:
                    raise AssertionError(f"output {k}: shape {g.shape}, oar's {e.shape}")
                excess = np.abs(g.astype(np.float64) - e) - (RTOL * np.abs(e) + ATOL)
                excess[np.isnan(g.astype(np.float64)) != np.isnan(e.astype(np.float64))] = np.inf  # NaN compares false: a NaN on one side only fails
                if (excess > 0).any():
                    i = np.unravel_index(np.argmax(excess), e.shape)
                    raise AssertionError(f"output {k}: at {i} ONNX Runtime gives {g[i]!r}, oar {e[i]!r}")
                worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - e) / (np.abs(e) + ATOL / RTOL))))
            ops = sorted({n.op_type for n in model.graph.node})
            print(f"ok   {case}: {len(model.graph.node)} nodes ({', '.join(ops)}); worst relative difference {worst:.2e}", flush=True)
        except Exception as ex:  # noqa: BLE001 (every failure is reported, then the next model runs)
            failures += 1
            print(f"FAIL {case}: {type(ex).__name__}: {ex}", flush=True)
    print(f"{len(cases) - failures} of {len(cases)} exported models agree with ONNX Runtime", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
