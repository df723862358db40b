#!/usr/bin/env python3
"""faultline's load generator against redis-benchmark and memtier_benchmark, side by side.

All three drive the same redis-server in rotated order (round r starts with the
r-th client of the three), with 50 connections (memtier: -t 2 -c 25) at
pipeline depth 1 and 16, GET and SET, 100,000 keys, 64 B values; plus the mixed
workload (GET 80 / SET 20) at 10x32 (memtier: -t 2 -c 5, --ratio 1:4;
redis-benchmark has no mixed mode). Every key each client reads is set
first (their key names differ), so every GET hits. Prints, per case, each client's median
ops/s with the spread over rounds (min-max), the ratios faultline / memtier and
faultline / redis-benchmark, and each client's CPU seconds per million ops
(user + system of the client process, from rusage). With --soak SECONDS it also
samples faultline's RSS over one long run.

memtier_benchmark is not packaged in Debian: build it with
../shared/tools/build-memtier.sh (it prints the binary's path) and pass
--memtier PATH; without it the memtier columns are skipped.

With --baseline BINARY it compares faultline with another build of itself
instead (the same cases, the two taking turns in rotated order): the ratio
this build / baseline, and each one's CPU per million ops. Add --instructions
to count instead of time: each build runs under valgrind's callgrind for 2 s
and for 2 + --seconds s, and the difference in instructions executed over the
difference in ops is its instructions per op, start-up and report excluded.
Counted instructions repeat from run to run whatever else the machine does,
where CPU seconds per op on a shared VM spread by several per cent.

Usage: scripts/bench-load-generators.py [--rounds 3] [--seconds 6] [--memtier PATH]
       [--faultline-args "--load-threads 1"] [--soak 300] [--baseline BINARY [--instructions]]
"""
import argparse
import json
import os
import re
import resource
import shlex
import socket
import statistics
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
    """Runs cmd; returns (stdout + stderr, client cpu s) with cpu from the child's rusage."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True, **kw)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode not in (0, 1, 2):
        sys.exit(f"{cmd[0]} failed ({out.returncode}):\n{out.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out.stdout + out.stderr, cpu


def faultline_spec(port, ops, clients, depth, seconds, target=None):
    """The spec of one case; `target` replaces the plain external target on `port`."""
    target = target or f'{{kind: redis, provider: external, uri: "redis://127.0.0.1:{port}"}}'
    return f"""name: bench
targets:
  r: {target}
workloads:
  w: {{ops: {ops}, keys: {{count: {KEYS}, prefix: "key:"}}, value_size: {VALUE}B}}
profiles:
  p: {{closed: {clients}x{depth}}}
timing: {{warmup: 0s, duration: {seconds}s}}
scenarios:
  - {{name: bench, target: r, workload: w, profiles: [p]}}
gates:
  no-errors: errors == 0
"""


class Case:
    def __init__(self, name, ops, clients, depth, memtier_ratio, redis_benchmark_test):
        self.name, self.ops, self.clients, self.depth = name, ops, clients, depth
        self.memtier_ratio, self.redis_benchmark_test = memtier_ratio, redis_benchmark_test


CASES = [
    Case("GET P1", "{get: 1}", CONNECTIONS, 1, "0:1", "get"),
    Case("GET P16", "{get: 1}", CONNECTIONS, 16, "0:1", "get"),
    Case("SET P1", "{set: 1}", CONNECTIONS, 1, "1:0", "set"),
    Case("SET P16", "{set: 1}", CONNECTIONS, 16, "1:0", "set"),
    Case("mixed 10x32", "{get: 80, set: 20}", 10, 32, "1:4", None),
]


def write_spec(workdir, port, case, seconds, target=None):
    spec = os.path.join(workdir, "spec.yaml")
    with open(spec, "w") as f:
        f.write(faultline_spec(port, case.ops, case.clients, case.depth, seconds, target))
    return spec


def cell_stats(out_dir):
    """The one cell's stats of the run written under `out_dir`; exits on errors."""
    run_dir = os.path.join(out_dir, os.listdir(out_dir)[0])
    with open(os.path.join(run_dir, "results.json")) as f:
        stats = json.load(f)["cells"][0]["stats"]
    if stats["failed"]:
        sys.exit(f"faultline saw {stats['failed']} errors")
    return stats


def run_faultline(binary, extra, port, case, seconds, workdir, target=None):
    spec = write_spec(workdir, port, case, seconds, target)
    out_dir = tempfile.mkdtemp(dir=workdir)
    _, cpu = timed([binary, "run", spec, "--out", out_dir] + extra)
    stats = cell_stats(out_dir)
    return stats["throughput"], stats["ok"], cpu


def counted_faultline(binary, extra, port, case, seconds, workdir):
    """(ops, instructions) of one run under callgrind."""
    spec = write_spec(workdir, port, case, seconds)
    out_dir = tempfile.mkdtemp(dir=workdir)
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={workdir}/callgrind.out",
           binary, "run", spec, "--out", out_dir] + extra
    out = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode not in (0, 1, 2) or not m:
        sys.exit(f"callgrind run failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return cell_stats(out_dir)["ok"], int(m.group(1))


def instructions_per_op(binary, extra, port, case, seconds, workdir):
    """Instructions per op: the longer run's extra instructions over its extra ops."""
    short_ops, short_ir = counted_faultline(binary, extra, port, case, 2, workdir)
    long_ops, long_ir = counted_faultline(binary, extra, port, case, 2 + seconds, workdir)
    if long_ops <= short_ops:
        sys.exit(f"{binary}: the longer run did no more ops ({long_ops} vs {short_ops})")
    return (long_ir - short_ir) / (long_ops - short_ops), long_ops - short_ops


def run_redis_benchmark(port, case, requests):
    cmd = ["redis-benchmark", "-p", str(port), "-c", str(CONNECTIONS), "-P", str(case.depth), "-n", str(requests),
           "-r", str(KEYS), "-d", str(VALUE), "-t", case.redis_benchmark_test, "-q"]
    text, cpu = timed(cmd)
    m = re.findall(r"([0-9.]+) requests per second", text)
    if not m:
        sys.exit(f"cannot read redis-benchmark output:\n{text}")
    return float(m[-1]), requests, cpu


def run_memtier(memtier, port, case, seconds):
    threads = 2
    cmd = [memtier, "-s", "127.0.0.1", "-p", str(port), "-t", str(threads), "-c", str(case.clients // threads),
           f"--pipeline={case.depth}", f"--ratio={case.memtier_ratio}", f"--key-maximum={KEYS}",
           "--key-minimum=1", "--key-prefix=key:", f"--data-size={VALUE}", f"--test-time={seconds}",
           "--hide-histogram", "--distinct-client-seed", "--key-pattern=R:R"]
    text, cpu = timed(cmd)
    m = re.search(r"^Totals\s+([0-9.]+)", text, re.M)
    if not m:
        sys.exit(f"cannot read memtier_benchmark output:\n{text}")
    rate = float(m.group(1))
    return rate, rate * seconds, cpu


def soak(binary, extra, port, seconds, workdir):
    spec = os.path.join(workdir, "soak.yaml")
    with open(spec, "w") as f:
        f.write(faultline_spec(port, "{get: 80, set: 20}", 10, 32, seconds))
    out_dir = tempfile.mkdtemp(dir=workdir)
    proc = subprocess.Popen([binary, "run", spec, "--out", out_dir] + extra,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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


def preload(port):
    """Sets every key the clients read (faultline key:0.., memtier key:1.., redis-benchmark key:000000000000..,
    zero-padded), so every GET hits from the first case."""
    value = "v" * VALUE
    keys = [f"key:{i}" for i in range(KEYS + 1)] + [f"key:{i:012}" for i in range(KEYS)]
    commands = "".join(f"*3\r\n$3\r\nSET\r\n${len(k)}\r\n{k}\r\n${VALUE}\r\n{value}\r\n" for k in keys)
    subprocess.run(["redis-cli", "-p", str(port), "--pipe"], input=commands, text=True, capture_output=True, check=True)


def summary(runs):
    """(median ops/s, min, max, CPU s per M ops) over a client's rounds."""
    rates = [r[0] for r in runs]
    cpu = sum(r[2] for r in runs) / max(sum(r[1] for r in runs), 1) * 1e6
    return statistics.median(rates), min(rates), max(rates), cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=6)
    ap.add_argument("--soak", type=int, default=0)
    ap.add_argument("--memtier", default=None, help="memtier_benchmark binary (../shared/tools/build-memtier.sh)")
    ap.add_argument("--faultline-args", default="", help="extra arguments for faultline run, e.g. --load-threads 1")
    ap.add_argument("--cases", default=",".join(c.name for c in CASES))
    ap.add_argument("--faultline", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", "/var/cache/faultline/target"),
                                                         "release", "faultline"))
    ap.add_argument("--baseline", default=None, help="another faultline build to compare with, instead of the others")
    ap.add_argument("--instructions", action="store_true",
                    help="with --baseline: count instructions per op under callgrind instead of timing")
    args = ap.parse_args()
    if args.instructions and not args.baseline:
        ap.error("--instructions compares two builds: give --baseline too")
    extra = shlex.split(args.faultline_args)
    cases = [c for c in CASES if c.name in args.cases.split(",")]
    port = free_port()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                              stdout=subprocess.DEVNULL)
    if args.baseline:
        clients = ["fl", "base"]
    else:
        clients = ["fl", "rb"] + (["mt"] if args.memtier else [])
    try:
        for _ in range(100):
            if subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True).stdout.strip() == "PONG":
                break
            time.sleep(0.05)
        preload(port)
        version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.split()[2]
        print(f"redis-server {version}, {os.cpu_count()} CPUs, {KEYS} keys, {VALUE}B values, {args.rounds} rotated "
              f"rounds of {args.seconds}s; faultline {' '.join(extra) or '(defaults)'}")
        workdir = tempfile.mkdtemp()
        if args.instructions:
            print(f"\nthis build: {args.faultline}\nbaseline: {args.baseline}")
            print("\n| case | this build instructions/op | baseline instructions/op | this build / baseline | ops counted |")
            print("|---|---|---|---|---|")
            for case in cases:
                counts = {}
                for r in range(args.rounds):
                    for who in (["fl", "base"] if r % 2 == 0 else ["base", "fl"]):
                        binary = args.faultline if who == "fl" else args.baseline
                        counts.setdefault(who, []).append(instructions_per_op(binary, extra, port, case, args.seconds, workdir))
                med = {w: statistics.median(c[0] for c in cs) for w, cs in counts.items()}
                spread = lambda w: f"{min(c[0] for c in counts[w]):,.0f}–{max(c[0] for c in counts[w]):,.0f}"
                ops = " · ".join(f"{sum(c[1] for c in counts[w]):,}" for w in ("fl", "base"))
                print(f"| {case.name} | {med['fl']:,.0f} ({spread('fl')}) | {med['base']:,.0f} ({spread('base')}) | "
                      f"{med['fl'] / med['base']:.3f} | {ops} |", flush=True)
            return
        if args.baseline:
            print(f"\nthis build: {args.faultline}\nbaseline: {args.baseline}")
            print("\n| case | this build ops/s | baseline ops/s | this build / baseline | CPU s/M: this build · baseline |")
            print("|---|---|---|---|---|")
        else:
            print("\n| case | faultline ops/s | redis-benchmark ops/s | memtier ops/s | faultline / memtier | "
                  "faultline / redis-benchmark | CPU s/M: faultline · redis-benchmark · memtier |")
            print("|---|---|---|---|---|---|---|")
        for case in cases:
            runs = {c: [] for c in clients}
            for r in range(args.rounds):
                order = clients[r % len(clients):] + clients[:r % len(clients)]
                for who in order:
                    if who == "fl":
                        runs["fl"].append(run_faultline(args.faultline, extra, port, case, args.seconds, workdir))
                    elif who == "base":
                        runs["base"].append(run_faultline(args.baseline, extra, port, case, args.seconds, workdir))
                    elif who == "rb" and case.redis_benchmark_test:
                        # Sized from faultline's last rate so both run about as long.
                        rate = runs["fl"][-1][0] if runs["fl"] else 100_000 * case.depth ** 0.5
                        runs["rb"].append(run_redis_benchmark(port, case, int(rate * args.seconds)))
                    elif who == "mt":
                        runs["mt"].append(run_memtier(args.memtier, port, case, args.seconds))
            cell = {}
            for who, rs in runs.items():
                cell[who] = summary(rs) if rs else None
            fmt = lambda s: f"{s[0]:,.0f} ({s[1]:,.0f}–{s[2]:,.0f})" if s else "–"
            ratio = lambda a, b: f"{cell[a][0] / cell[b][0]:.2f}" if cell.get(a) and cell.get(b) else "–"
            if args.baseline:
                cpu = f"{cell['fl'][3]:.2f} · {cell['base'][3]:.2f}"
                print(f"| {case.name} | {fmt(cell['fl'])} | {fmt(cell['base'])} | {ratio('fl', 'base')} | {cpu} |",
                      flush=True)
                continue
            cpu = " · ".join(f"{cell[w][3]:.2f}" if cell.get(w) else "–" for w in ("fl", "rb", "mt"))
            print(f"| {case.name} | {fmt(cell['fl'])} | {fmt(cell.get('rb'))} | {fmt(cell.get('mt'))} | "
                  f"{ratio('fl', 'mt')} | {ratio('fl', 'rb')} | {cpu} |", flush=True)
        if args.soak:
            soak(args.faultline, extra, port, args.soak, workdir)
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
