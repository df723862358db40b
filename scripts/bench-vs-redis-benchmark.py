#!/usr/bin/env python3
"""faultline's load generator against redis-benchmark, side by side.

Both drive the same redis-server, in alternated rounds (faultline, redis-benchmark,
redis-benchmark, faultline, ...), with 50 connections at pipeline depth 1 and 16
(faultline: 50 clients x 1 or 16 ops in flight), the same key space and value
size. Prints, per case, the ops/s ratio faultline / redis-benchmark and each
side's client CPU seconds per million ops (user + system of the client process,
from rusage). With --soak SECONDS it also samples faultline's RSS over one long run.

Usage: scripts/bench-vs-redis-benchmark.py [--rounds 3] [--seconds 5] [--soak 300]
"""
import argparse
import json
import os
import re
import resource
import socket
import subprocess
import sys
import tempfile
import time

KEYS = 100_000
VALUE = 64
CONNECTIONS = 50


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(cmd, **kw):
    """Runs cmd; returns (stdout, wall s, client cpu s) with cpu from the child's rusage."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, **kw)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode not in (0, 1, 2):
        sys.exit(f"{cmd[0]} failed ({out.returncode}):\n{out.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out.stdout + out.stderr, wall, cpu


def faultline_spec(port, op, depth, seconds):
    return f"""name: bench-{op}-p{depth}
targets:
  r: {{kind: redis, provider: external, uri: "redis://127.0.0.1:{port}"}}
workloads:
  w: {{ops: {{{op}: 1}}, keys: {{count: {KEYS}, prefix: "key:"}}, value_size: {VALUE}B}}
profiles:
  p: {{closed: {CONNECTIONS}x{depth}}}
timing: {{warmup: 0s, duration: {seconds}s}}
scenarios:
  - {{name: bench, target: r, workload: w, profiles: [p]}}
gates:
  no-errors: errors == 0
"""


def run_faultline(binary, port, op, depth, seconds, workdir):
    spec = os.path.join(workdir, f"{op}-{depth}.yaml")
    with open(spec, "w") as f:
        f.write(faultline_spec(port, op, depth, seconds))
    out_dir = tempfile.mkdtemp(dir=workdir)
    text, wall, cpu = timed([binary, "run", spec, "--out", out_dir])
    run_dir = os.path.join(out_dir, os.listdir(out_dir)[0])
    with open(os.path.join(run_dir, "results.json")) as f:
        stats = json.load(f)["cells"][0]["stats"]
    ops = stats["ok"] + stats["failed"]
    if stats["failed"]:
        sys.exit(f"faultline saw {stats['failed']} errors")
    return stats["throughput"], ops, cpu


def run_redis_benchmark(port, op, depth, requests):
    cmd = ["redis-benchmark", "-p", str(port), "-c", str(CONNECTIONS), "-P", str(depth), "-n", str(requests),
           "-r", str(KEYS), "-d", str(VALUE), "-t", op, "-q"]
    text, wall, cpu = timed(cmd)
    m = re.search(r"([0-9.]+) requests per second", text.replace("\r", "\n").split("\n")[-2] if "\n" in text else text)
    m = m or re.search(r"([0-9.]+) requests per second", text)
    if not m:
        sys.exit(f"cannot read redis-benchmark output:\n{text}")
    return float(m.group(1)), requests, cpu


def soak(binary, port, seconds, workdir):
    spec = os.path.join(workdir, "soak.yaml")
    with open(spec, "w") as f:
        f.write(faultline_spec(port, "get", 32, seconds).replace("get: 1", "get: 80, set: 20").replace(
            f"{CONNECTIONS}x32", "10x32"))
    out_dir = tempfile.mkdtemp(dir=workdir)
    proc = subprocess.Popen([binary, "run", spec, "--out", out_dir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    samples = []
    while proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/status") as f:
                rss = int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) / 1024
            samples.append((time.monotonic(), rss))
        except (FileNotFoundError, AttributeError):
            pass
        time.sleep(5)
    # Skip the first 10 s (allocation of histograms and connections).
    start = samples[0][0]
    steady = [r for t, r in samples if t - start >= 10]
    print(f"\nRSS over a {seconds}s run at 10x32 (get 80 / set 20): first steady sample {steady[0]:.1f} MiB, "
          f"last {steady[-1]:.1f} MiB, max {max(steady):.1f} MiB, growth {steady[-1] - steady[0]:+.1f} MiB "
          f"({len(samples)} samples every 5 s)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--soak", type=int, default=0)
    ap.add_argument("--faultline", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", "/var/cache/faultline/target"),
                                                         "release", "faultline"))
    args = ap.parse_args()
    port = free_port()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                              stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True).stdout.strip() == "PONG":
                break
            time.sleep(0.05)
        version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.split()[2]
        print(f"redis-server {version}, {os.cpu_count()} CPUs, {CONNECTIONS} connections, {KEYS} keys, {VALUE}B values, "
              f"{args.rounds} alternated rounds of {args.seconds}s")
        workdir = tempfile.mkdtemp()
        print(f"\n| case | faultline ops/s | redis-benchmark ops/s | ratio | faultline CPU s / M ops | redis-benchmark CPU s / M ops |")
        print("|---|---|---|---|---|---|")
        for op in ("get", "set"):
            for depth in (1, 16):
                fl, rb = [], []
                for r in range(args.rounds):
                    order = ("fl", "rb") if r % 2 == 0 else ("rb", "fl")
                    for who in order:
                        if who == "fl":
                            fl.append(run_faultline(args.faultline, port, op, depth, args.seconds, workdir))
                        else:
                            # Size the request count from the last faultline rate so both run about as long.
                            rate = fl[-1][0] if fl else 100_000 * depth ** 0.5
                            rb.append(run_redis_benchmark(port, op, depth, int(rate * args.seconds)))
                fl_rate = sum(x[0] for x in fl) / len(fl)
                rb_rate = sum(x[0] for x in rb) / len(rb)
                fl_cpu = sum(x[2] for x in fl) / sum(x[1] for x in fl) * 1e6
                rb_cpu = sum(x[2] for x in rb) / sum(x[1] for x in rb) * 1e6
                print(f"| {op.upper()} P{depth} | {fl_rate:,.0f} | {rb_rate:,.0f} | {fl_rate / rb_rate:.2f} | {fl_cpu:.2f} | {rb_cpu:.2f} |",
                      flush=True)
        if args.soak:
            soak(args.faultline, port, args.soak, workdir)
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
