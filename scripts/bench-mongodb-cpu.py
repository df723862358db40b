#!/usr/bin/env python3
"""faultline's client CPU per op next to the MongoDB server's, in one run.

Starts secantusd-rs (or the server named by --server) on a free port, seeds
10,000 documents, then runs faultline against it as an external target at
10x32 (and any --profiles given) for --seconds, reading user + system CPU of
both processes from /proc before and after. Prints, per profile and read
concern, ops/s and each side's CPU microseconds per op, and their ratio: the
load generator must cost a small fraction of what the server does.

Usage: scripts/bench-mongodb-cpu.py [--seconds 10] [--profiles 10x32,3x32]
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

TICKS = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    """user + system CPU of a process and its reaped children, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime, stime, cutime, cstime are fields 14-17 (1-based) of stat.
    return sum(int(x) for x in fields[11:15]) / TICKS


def spec(port, profile, concern, seconds, seed):
    return f"""name: bench-mongodb
targets:
  db:
    kind: mongodb
    provider: external
    uri: "mongodb://127.0.0.1:{port}/?directConnection=true"
    options: {{database: bench, read_concern: {concern}, seed_documents: {seed}}}
workloads:
  reads: {{ops: {{get: 99, set: 1}}, keys: {{count: 10000, distribution: hotset, hot_fraction: 0.0064, hot_op_fraction: 0.5}}, value_size: 96B}}
profiles:
  p: {{closed: {profile}}}
timing: {{warmup: 0s, duration: {seconds}s, deadline: 5s}}
scenarios:
  - {{name: bench, target: db, workload: reads, profiles: [p]}}
gates:
  no-errors: errors == 0
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--profiles", default="10x32")
    ap.add_argument("--concerns", default="linearizable,majority")
    ap.add_argument("--server", default="secantusd-rs")
    ap.add_argument("--faultline", default=os.environ.get("FAULTLINE", "/var/cache/faultline/target/release/faultline"))
    args = ap.parse_args()
    if not shutil.which(args.server):
        sys.exit(f"{args.server} is not on PATH (scripts/install-deps.sh all installs secantusd-rs)")
    work = tempfile.mkdtemp(prefix="fl-bench-mongo-")
    port = free_port()
    server = subprocess.Popen([args.server, "--port", str(port), "--storage-path", os.path.join(work, "data")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(2)
        print(f"| profile | read concern | ops/s | faultline µs CPU/op | server µs CPU/op | client/server |")
        print("|---|---|---|---|---|---|")
        def run(profile, concern, seconds, seed):
            path = os.path.join(work, "spec.yaml")
            with open(path, "w") as f:
                f.write(spec(port, profile, concern, seconds, seed))
            out = os.path.join(work, "runs")
            server_before = cpu_seconds(server.pid)
            client = subprocess.Popen([args.faultline, "run", path, "--out", out],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            # The client's own CPU, read until just before it is reaped.
            client_cpu = 0.0
            while client.poll() is None:
                try:
                    client_cpu = cpu_seconds(client.pid)
                except (FileNotFoundError, ProcessLookupError):
                    break
                time.sleep(0.02)
            client.wait()
            server_cpu = cpu_seconds(server.pid) - server_before
            with open(os.path.join(out, sorted(os.listdir(out))[-1], "results.json")) as f:
                return json.load(f)["cells"][0]["stats"], client_cpu, server_cpu

        run("1x1", "local", 1, 10000)  # seeds the documents; not measured
        for profile in args.profiles.split(","):
            for concern in args.concerns.split(","):
                stats, client_cpu, server_cpu = run(profile, concern, args.seconds, 0)
                # No warm-up: both CPU figures cover the ops counted (plus
                # faultline's start and the connections, a few ms).
                ops = max(stats["ok"] + stats["failed"], 1)
                c, s = client_cpu * 1e6 / ops, server_cpu * 1e6 / ops
                print(f"| {profile} | {concern} | {stats['throughput']:,.0f} | {c:.1f} | {s:.1f} | {c / s:.3f} |")
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
