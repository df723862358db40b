#!/usr/bin/env python3
"""faultline's Redis load over TLS against the same load in plain TCP, next to memtier_benchmark's --tls.

One redis-server listens on a plain port and a TLS port (certificates made here with openssl: a CA and a
server certificate for 127.0.0.1). Each case runs faultline plain, faultline TLS, memtier plain and
memtier TLS in rotated order for --rounds rounds, and prints each one's median ops/s and client CPU
per million ops, the TLS / plain ratio of each tool, and faultline TLS / memtier TLS. The cases,
keys and values are those of scripts/bench-load-generators.py, whose helpers this script uses.

Usage: scripts/bench-tls.py --memtier PATH [--rounds 3] [--seconds 6] [--cases "GET P16,SET P16"]
(memtier_benchmark: ../shared/tools/build-memtier.sh prints its path; it is built with OpenSSL.)
"""
import argparse
import importlib.util
import os
import subprocess
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("bench", os.path.join(here, "bench-load-generators.py"))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def certificates(d):
    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=bench CA",
            "-keyout", "ca.key", "-out", "ca.crt")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server.key",
            "-out", "server.csr")
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-extfile", "san.ext", "-out", "server.crt")


def run_faultline(binary, uri, ca, case, seconds, workdir):
    options = f', options: {{ca_file: "{ca}"}}' if uri.startswith("rediss://") else ""
    target = f'{{kind: redis, provider: external, uri: "{uri}"{options}}}'
    return bench.run_faultline(binary, [], 0, case, seconds, workdir, target)


def run_memtier(memtier, port, tls_args, case, seconds):
    real = bench.timed
    bench.timed = lambda cmd, **kw: real(cmd + tls_args, **kw)
    try:
        return bench.run_memtier(memtier, port, case, seconds)
    finally:
        bench.timed = real


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memtier", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=6)
    ap.add_argument("--cases", default="GET P1,GET P16,SET P16")
    ap.add_argument("--faultline", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", "/var/cache/faultline/target"),
                                                         "release", "faultline"))
    args = ap.parse_args()
    cases = [c for c in bench.CASES if c.name in args.cases.split(",")]
    certs = tempfile.mkdtemp()
    certificates(certs)
    ca = os.path.join(certs, "ca.crt")
    plain, tls = bench.free_port(), bench.free_port()
    server = subprocess.Popen(["redis-server", "--port", str(plain), "--tls-port", str(tls), "--bind", "127.0.0.1",
                               "--save", "", "--appendonly", "no", "--tls-auth-clients", "no",
                               "--tls-cert-file", os.path.join(certs, "server.crt"),
                               "--tls-key-file", os.path.join(certs, "server.key"), "--tls-ca-cert-file", ca],
                              stdout=subprocess.DEVNULL)
    memtier_tls = ["--tls", f"--cacert={ca}", "--sni=127.0.0.1"]
    runners = {
        "faultline plain": lambda c, w: run_faultline(args.faultline, f"redis://127.0.0.1:{plain}", ca, c, args.seconds, w),
        "faultline TLS": lambda c, w: run_faultline(args.faultline, f"rediss://127.0.0.1:{tls}", ca, c, args.seconds, w),
        "memtier plain": lambda c, w: run_memtier(args.memtier, plain, [], c, args.seconds),
        "memtier TLS": lambda c, w: run_memtier(args.memtier, tls, memtier_tls, c, args.seconds),
    }
    names = list(runners)
    try:
        for _ in range(100):
            if subprocess.run(["redis-cli", "-p", str(plain), "ping"], capture_output=True, text=True).stdout.strip() == "PONG":
                break
            time.sleep(0.05)
        bench.preload(plain)
        print(f"{os.cpu_count()} CPUs, {bench.KEYS} keys, {bench.VALUE}B values, {args.rounds} rotated rounds of "
              f"{args.seconds}s; ops/s median (min-max), CPU s per M ops")
        print("\n| case | " + " | ".join(names) + " | faultline TLS/plain | memtier TLS/plain | faultline TLS / memtier TLS |")
        print("|---|" + "---|" * (len(names) + 3))
        workdir = tempfile.mkdtemp()
        for case in cases:
            runs = {n: [] for n in names}
            for r in range(args.rounds):
                for n in names[r % len(names):] + names[:r % len(names)]:
                    runs[n].append(runners[n](case, workdir))
            s = {n: bench.summary(runs[n]) for n in names}
            cells = [f"{s[n][0]:,.0f} ({s[n][1]:,.0f}-{s[n][2]:,.0f}) · {s[n][3]:.2f}" for n in names]
            ratio = lambda a, b: f"{s[a][0] / s[b][0]:.2f}"
            print(f"| {case.name} | " + " | ".join(cells) + f" | {ratio('faultline TLS', 'faultline plain')} | "
                  f"{ratio('memtier TLS', 'memtier plain')} | {ratio('faultline TLS', 'memtier TLS')} |", flush=True)
    finally:
        server.kill()


if __name__ == "__main__":
    main()
