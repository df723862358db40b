#!/usr/bin/env python3
"""Load on agents against the same load in one process (docs/performance.md#agents).

One redis-server (on its own core where there are two: taskset) is driven by faultline alone and by
faultline with `--agents local:N`, in rotated order, for --rounds rounds:

- exactness: an open loop at --rate ops/s over 4 connections (GET 80 / SET 20), low enough for one
  process: due, sent, ok, throughput and p99 alone and on 4 agents (sum of the agents' shares = the cell);
- scale: a closed loop of GETs at full speed (2 clients x 16 in flight, --load-threads 1 per process)
  alone, on 1 agent and on 2 agents: merged ops/s, and the coordinator's own CPU per op merged (its
  utime+stime from /proc, without its children).

With --swarm, the exactness rows include 4 agents in a Docker Swarm service (`--agents swarm:4`); the
script makes the engine a single-node swarm for the run if it is not one, and leaves it again after.

Usage: scripts/bench-agents.py [--rounds 3] [--seconds 5] [--rate 20000] [--swarm] [--faultline PATH]
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spec(port, profile, seconds):
    return f"""name: bench-agents
targets:
  t: {{kind: redis, provider: external, uri: "redis://127.0.0.1:{port}"}}
workloads:
  w: {{ops: {{get: 80, set: 20}}, keys: {{count: 10000}}, value_size: 64B}}
  gets: {{ops: {{get: 1}}, keys: {{count: 10000}}, value_size: 64B}}
profiles:
  p: {profile}
timing: {{warmup: 1s, duration: {seconds}s}}
scenarios:
  - {{name: s, target: t, workload: WORKLOAD, profiles: [p]}}
gates:
  any: ops >= 0
"""


def own_cpu(pid):
    """utime + stime of `pid` itself, in seconds (children not included)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(binary, text, extra, workdir):
    path = os.path.join(workdir, "spec.yaml")
    with open(path, "w") as f:
        f.write(text)
    out = tempfile.mkdtemp(dir=workdir)
    p = subprocess.Popen([binary, "run", path, "--out", out, *extra], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    cpu = 0.0
    while p.poll() is None:
        try:
            cpu = own_cpu(p.pid)
        except (OSError, IndexError):
            pass
        time.sleep(0.05)
    run_dir = os.path.join(out, os.listdir(out)[0])
    with open(os.path.join(run_dir, "results.json")) as f:
        results = json.load(f)
    cell = results["cells"][0]
    assert cell["status"] == "completed", cell.get("error")
    stats = cell["stats"]
    p99 = max(o["latency_ms"]["p99"] for o in stats["per_op"].values() if o.get("latency_ms"))
    return {"stats": stats, "p99": p99, "coordinator_cpu": cpu}


def median(xs):
    return statistics.median(xs), min(xs), max(xs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rate", type=int, default=20000)
    ap.add_argument("--swarm", action="store_true")
    ap.add_argument("--faultline", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", "/var/cache/faultline/target"),
                                                         "release", "faultline"))
    args = ap.parse_args()
    port = free_port()
    pin = ["taskset", "-c", "1"] if os.cpu_count() >= 2 else []
    server = subprocess.Popen(pin + ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                     "--appendonly", "no"], stdout=subprocess.DEVNULL)
    workdir = tempfile.mkdtemp()
    joined = False
    if args.swarm:
        state = subprocess.run(["docker", "info", "--format", "{{.Swarm.LocalNodeState}}"], capture_output=True,
                               text=True).stdout.strip()
        nets = subprocess.run(["docker", "network", "ls", "--format", "{{.Name}}"], capture_output=True, text=True).stdout
        had_gwbridge = "docker_gwbridge" in nets.split()
        if state != "active":
            subprocess.run(["docker", "swarm", "init", "--advertise-addr", "127.0.0.1"], check=True, capture_output=True)
            joined = True
    try:
        time.sleep(0.5)
        print(f"{os.cpu_count()} CPUs, redis-server {'on core 1' if pin else 'unpinned'}, {args.rounds} rotated rounds of "
              f"{args.seconds}s (+1s warm-up)")
        open_loop = spec(port, f"{{open: {{rate: {args.rate}, connections: 4, in_flight: 16}}}}", args.seconds)
        open_loop = open_loop.replace("WORKLOAD", "w")
        ways = {"one process": [], "4 local agents": ["--agents", "local:4"]}
        if args.swarm:
            ways["4 swarm agents"] = ["--agents", "swarm:4"]
        runs = {w: [] for w in ways}
        names = list(ways)
        for r in range(args.rounds):
            for w in names[r % len(names):] + names[:r % len(names)]:
                runs[w].append(run(args.faultline, open_loop, ways[w], workdir))
        print(f"\nExactness: open loop {args.rate:,}/s over 4 connections, GET 80 / SET 20\n")
        print("| way | due | sent | ok | ops/s median (min-max) | p99 ms median (min-max) | agents' ok summed = ok |")
        print("|---|---|---|---|---|---|---|")
        for w in names:
            rs = runs[w]
            due = {x["stats"]["open_loop"]["due"] for x in rs}
            sent = [x["stats"]["open_loop"]["sent"] for x in rs]
            ok = [x["stats"]["ok"] for x in rs]
            tput = median([x["stats"]["throughput"] for x in rs])
            p99 = median([x["p99"] for x in rs])
            summed = all(sum(a["ok"] for a in x["stats"].get("agents", [])) == x["stats"]["ok"] for x in rs) \
                if w != "one process" else "–"
            print(f"| {w} | {', '.join(map(str, sorted(due)))} | {', '.join(map(str, sent))} | {', '.join(map(str, ok))} | "
                  f"{tput[0]:,.0f} ({tput[1]:,.0f}-{tput[2]:,.0f}) | {p99[0]:.3f} ({p99[1]:.3f}-{p99[2]:.3f}) | {summed} |")

        closed = spec(port, "{closed: 2x16}", args.seconds).replace("WORKLOAD", "gets")
        ways = {"one process": ["--load-threads", "1"], "1 agent": ["--agents", "local:1", "--load-threads", "1"],
                "2 agents": ["--agents", "local:2", "--load-threads", "1"]}
        names = list(ways)
        runs = {w: [] for w in ways}
        for r in range(args.rounds):
            for w in names[r % 3:] + names[:r % 3]:
                runs[w].append(run(args.faultline, closed, ways[w], workdir))
        print("\nScale: closed loop of GETs, 2 clients x 16 in flight, one load thread per process\n")
        print("| way | ops/s median (min-max) | vs one process | coordinator CPU µs per op merged |")
        print("|---|---|---|---|")
        base = median([x["stats"]["throughput"] for x in runs["one process"]])[0]
        for w in names:
            rs = runs[w]
            tput = median([x["stats"]["throughput"] for x in rs])
            ops = [x["stats"]["ok"] + x["stats"]["failed"] for x in rs]
            per_op = statistics.median([x["coordinator_cpu"] / max(o, 1) * 1e6 for x, o in zip(rs, ops)])
            print(f"| {w} | {tput[0]:,.0f} ({tput[1]:,.0f}-{tput[2]:,.0f}) | {tput[0] / base:.2f} | {per_op:.2f} |")
    finally:
        server.kill()
        if joined:
            subprocess.run(["docker", "swarm", "leave", "--force"], capture_output=True)
            if not had_gwbridge:
                subprocess.run(["docker", "network", "rm", "docker_gwbridge"], capture_output=True)


if __name__ == "__main__":
    main()
