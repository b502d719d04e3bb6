"""tests/support/pyvenv.py: run a Python test inside a venv that holds the PyPI packages it needs.

    import pyvenv
    pyvenv.run_inside(venv_dir, ["onnxruntime", "numpy"], "import onnxruntime, numpy", __file__)

The first call makes the venv (python3 -m venv; pip install the packages) and marks it ready; every call then
runs the calling script again with the venv's python (os.execv, same arguments). When the venv or pip fails (no
python3-venv, no network) it prints `SKIP: ...` and exits 77, which ctest counts as skipped. Standard library only.
"""
import os
import shutil
import subprocess
import sys
import time


def skip(why):
    print(f"SKIP: {why}", flush=True)
    sys.exit(77)


def inside(venv):
    return os.path.realpath(sys.prefix) == os.path.realpath(venv)


def run_inside(venv, packages, check_import, script, pip_seconds=240):
    """Returns when already running in `venv`; otherwise makes it if needed and re-executes `script` in it."""
    if inside(venv):
        return
    venv = os.path.abspath(venv)
    python = os.path.join(venv, "bin", "python")
    marker = os.path.join(venv, ".oar_ready")
    if not os.path.exists(marker):
        print(f"creating {venv} ({', '.join(packages)})", flush=True)
        shutil.rmtree(venv, ignore_errors=True)
        deadline = time.monotonic() + pip_seconds
        r = subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, text=True)
        if r.returncode != 0:
            skip(f"python3 -m venv failed (is python3-venv installed?): {r.stderr.strip()[-500:]}")
        try:
            r = subprocess.run([python, "-m", "pip", "install", "--disable-pip-version-check", "-q", "--timeout", "15", "--retries", "1"] + packages,
                               capture_output=True, text=True, timeout=max(10, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            skip(f"pip install took over {pip_seconds} s")
        if r.returncode != 0:
            skip(f"pip cannot install {' '.join(packages)} (no network?): {r.stderr.strip()[-800:]}")
        r = subprocess.run([python, "-c", check_import], capture_output=True, text=True)
        if r.returncode != 0:
            skip(f"`{check_import}` fails after pip install: {r.stderr.strip()[-800:]}")
        open(marker, "w").close()
    sys.stdout.flush()
    os.execv(python, [python, os.path.abspath(script)] + sys.argv[1:])
