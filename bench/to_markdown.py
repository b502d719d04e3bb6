#!/usr/bin/env python3
"""Turns `oar_bench --json` lines (stdin or files) into the markdown table of docs/benchmarks.md."""
import json
import sys


def fmt(v):
    if v >= 10000:
        return f"{v:,.0f}"
    return f"{v:.4g}"


def main():
    files = sys.argv[1:] or ["-"]
    print("| bench | thr | unit | oar | peer | peer value | ratio (>1: oar better) |")
    print("|---|---|---|---|---|---|---|")
    for name in files:
        stream = sys.stdin if name == "-" else open(name)
        for line in stream:
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            print(f"| {r['bench']} | {r['threads']} | {r['unit']} | {fmt(r['oar'])} | {r['peer'] or '-'} | "
                  f"{fmt(r['peer_value']) if r['peer'] else '-'} | {r['ratio']:.2f} |")


if __name__ == "__main__":
    main()
