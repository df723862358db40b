#!/usr/bin/env python3
"""faultline's client CPU per call next to the DynamoDB-API server's, in one run.

Starts moto_server (or the server named by --server, started with `-H
127.0.0.1 -p PORT`) on a free port, then runs faultline against it as an
external target: racing PutItem calls on one key per round (the hot-key
campaign's put race) at each --writers count, with the hot-key checker on.
Reads user + system CPU of both processes from /proc before and after, and
faultline's peak RSS (VmHWM) while it runs. Prints, per writer count, calls/s,
each side's CPU microseconds per call, their ratio, and faultline's peak RSS:
the load generator must cost a small fraction of what the server does.

Usage: scripts/bench-dynamodb-cpu.py [--rounds 20] [--writers 32,64,256]
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
import urllib.request

TICKS = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    """user + system CPU of a process and its reaped children, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / TICKS


def peak_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def spec(port, writers, rounds):
    clients = max(writers // 32, 1)
    in_flight = writers // clients
    return f"""name: bench-dynamodb
targets:
  shim:
    kind: dynamodb
    provider: external
    uri: "http://127.0.0.1:{port}"
    options: {{table: {{name: bench-{writers}, index: {{name: by-group}}}}}}
workloads:
  race: {{ops: {{set: 1}}, keys: {{count: {rounds}, distribution: rounds}}, value_size: 64B}}
profiles:
  p: {{closed: {clients}x{in_flight}}}
timing: {{warmup: 0s, duration: 600s, deadline: 10s}}
checkers: [hot-key]
scenarios:
  - {{name: bench, target: shim, workload: race, profiles: [p]}}
gates:
  invariants: hot_key_violations == 0
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--writers", default="32,64,256")
    ap.add_argument("--server", default="moto_server")
    ap.add_argument("--faultline", default=os.environ.get("FAULTLINE", "/var/cache/faultline/target/release/faultline"))
    args = ap.parse_args()
    if not shutil.which(args.server):
        sys.exit(f"{args.server} is not on PATH (scripts/install-deps.sh all installs moto)")
    work = tempfile.mkdtemp(prefix="fl-bench-dynamo-")
    port = free_port()
    server = subprocess.Popen([args.server, "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except Exception as e:  # moto answers 4xx/5xx to a bare GET once it is up
                if hasattr(e, "code"):
                    break
                time.sleep(0.1)
        print("| writers | calls | calls/s | faultline µs CPU/call | server µs CPU/call | client/server | faultline peak RSS |")
        print("|---|---|---|---|---|---|---|")
        for writers in [int(w) for w in args.writers.split(",")]:
            path = os.path.join(work, f"spec-{writers}.yaml")
            with open(path, "w") as f:
                f.write(spec(port, writers, args.rounds))
            out = os.path.join(work, f"runs-{writers}")
            server_before = cpu_seconds(server.pid)
            client = subprocess.Popen([args.faultline, "run", path, "--out", out],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            client_cpu, rss = 0.0, 0.0
            while client.poll() is None:
                try:
                    client_cpu = cpu_seconds(client.pid)
                    rss = max(rss, peak_rss_mib(client.pid))
                except (FileNotFoundError, ProcessLookupError):
                    break
                time.sleep(0.02)
            client.wait()
            server_cpu = cpu_seconds(server.pid) - server_before
            with open(os.path.join(out, sorted(os.listdir(out))[-1], "results.json")) as f:
                stats = json.load(f)["cells"][0]["stats"]
            # The client's CPU also covers its start, the table's creation
            # and the checker's reads (a few hundred calls): an upper bound.
            calls = max(sum(stats["status_classes"].values()), 1)
            c, s = client_cpu * 1e6 / calls, server_cpu * 1e6 / calls
            print(f"| {writers} | {calls:,} | {stats['throughput']:,.0f} | {c:.0f} | {s:.0f} | {c / s:.3f} | {rss:.1f} MiB |")
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
