#!/usr/bin/env python3
"""What faultline's fault filesystem costs a server, side by side with the bare disk, in one run.

Three otherwise equal Redis targets with an AOF in one faultline run: `bare` on the plain disk and,
alternating with it cell by cell (so drift on a noisy host falls on both alike), `write-back` on the fault filesystem as faultline mounts it by default (the kernel caches
the server's writes until an fsync, a close or writeback); then `write-through`, on it as a target with
a fault on each write gets it (every write a FUSE round trip; made so by a `slow-disk` of 0 ms on writes at
the window's very end, which changes no timing). SET of 64 B values, 4 clients, depth 1 and 16,
`appendfsync always` and `everysec`. Prints each one's median throughput and p99 and its ratio to the
bare disk's.

Usage: scripts/bench-fault-filesystem.py [--faultline PATH] [--repeats 4] [--seconds 5]
(as root: the mount needs /dev/fuse.)
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

SPEC = """name: fault-filesystem-cost
targets:
  bare: {{kind: redis, provider: process, args: [--appendonly, "yes", --appendfsync, "{{fsync}}"]}}
  write-back: {{kind: redis, provider: process, fault_filesystem: true, args: [--appendonly, "yes", --appendfsync, "{{fsync}}"]}}
  write-through: {{kind: redis, provider: process, fault_filesystem: true, args: [--appendonly, "yes", --appendfsync, "{{fsync}}"]}}
workloads:
  set: {{ops: {{set: 1}}, keys: {{count: 100000}}, value_size: 64B}}
profiles:
  pipelined: {{closed: "4x{{depth}}"}}
timing: {{warmup: 1s, duration: {seconds}s, repeats: {repeats}}}
checkers: []
scenarios:
  - name: bare
    target: [bare, write-back]
    workload: set
    profiles: [pipelined]
    matrix: {{fsync: [always, everysec], depth: [1, 16]}}
  # Alone: a scenario's faults fall on each of its targets.
  - name: through
    target: write-through
    workload: set
    profiles: [pipelined]
    matrix: {{fsync: [always, everysec], depth: [1, 16]}}
    faults:
      - {{name: through, at: {last_ms}ms, action: slow-disk, delay: 0ms, on: write, target: write-through}}
"""


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(here, "..", "target")), "release", "faultline")
    p = argparse.ArgumentParser()
    p.add_argument("--faultline", default=default)
    p.add_argument("--repeats", type=int, default=4)
    p.add_argument("--seconds", type=int, default=5)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        spec = os.path.join(d, "cost.yaml")
        with open(spec, "w") as f:
            f.write(SPEC.format(seconds=a.seconds, repeats=a.repeats, last_ms=a.seconds * 1000 - 1))
        out = os.path.join(d, "runs")
        subprocess.run([a.faultline, "run", spec, "--out", out], stdout=subprocess.DEVNULL)
        (run,) = os.listdir(out)
        with open(os.path.join(out, run, "results.json")) as f:
            results = json.load(f)
    runs = {}
    for c in results["cells"]:
        if c["status"] != "completed":
            continue
        m = c.get("matrix", {})
        s = c["stats"]
        runs.setdefault((m.get("fsync"), m.get("depth"), c["target"]), []).append(
            (s["throughput"], s["per_op"]["set"]["latency_ms"]["p99"]))
    print("| appendfsync | depth | target | ops/s | ratio | p99 ms | p99 ratio |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for fsync in ["always", "everysec"]:
        for depth in ["1", "16"]:
            def median(target, i):
                got = runs.get((fsync, depth, target), [])
                return statistics.median(r[i] for r in got) if got else float("nan")
            bare = (median("bare", 0), median("bare", 1))
            for target in ["bare", "write-back", "write-through"]:
                ops, p99 = median(target, 0), median(target, 1)
                print(f"| {fsync} | {depth} | {target} | {ops:,.0f} | {ops / bare[0]:.2f} | {p99:.2f} | {p99 / bare[1]:.2f} |")


if __name__ == "__main__":
    main()
