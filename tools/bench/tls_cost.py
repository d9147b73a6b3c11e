#!/usr/bin/env python3
"""What mutual TLS costs the TCP all-reduce (issue 23): Strata's cross_process_bench,
2 processes over loopback, with and without --tls_* (certificates made here by
Debian's openssl: a P-256 CA and one certificate for 127.0.0.1), in interleaved
rounds; per size each side's median bus bandwidth and the ratio TLS / plaintext.

  python3 tools/bench/tls_cost.py --strata=bazel-bin/runtime/collective/cross_process_bench \
      [--quick] [--json_out=FILE]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

RESULT = re.compile(r"RESULT impl=(\S+) ranks=(\d+) bytes=(\d+) time_us=([\d.]+) busbw_gbps=([\d.]+)")


def make_certs(d):
    def run(*cmd):
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("openssl", "req", "-x509", *ec, "-days", "2", "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.crt",
        "-subj", "/CN=bench-ca", "-addext", "basicConstraints=critical,CA:TRUE")
    run("openssl", "req", *ec, "-keyout", f"{d}/n.key", "-out", f"{d}/n.csr", "-subj", "/CN=bench")
    with open(f"{d}/ext", "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    run("openssl", "x509", "-req", "-in", f"{d}/n.csr", "-CA", f"{d}/ca.crt", "-CAkey", f"{d}/ca.key",
        "-set_serial", "7", "-days", "1", "-out", f"{d}/n.crt", "-extfile", f"{d}/ext")
    return [f"--tls_cert_file={d}/n.crt", f"--tls_key_file={d}/n.key", f"--tls_ca_file={d}/ca.crt"]


def run_once(strata, extra, a):
    cmd = [strata, "--transport=tcp", "--ranks=2", f"--min_bytes={a.min_bytes}", f"--max_bytes={a.max_bytes}",
           f"--budget_bytes={a.budget_bytes}"] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600).stdout
    return {int(m.group(3)): float(m.group(5)) for m in RESULT.finditer(out)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--strata", required=True)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--rounds", type=int, default=0)
    p.add_argument("--json_out", default="")
    a = p.parse_args()
    a.rounds = a.rounds or (2 if a.quick else 4)
    a.min_bytes = 64 << 10 if a.quick else 4 << 10
    a.max_bytes = 64 << 20
    a.budget_bytes = (256 if a.quick else 1024) << 20
    with tempfile.TemporaryDirectory(prefix="tls_cost.") as d:
        tls = make_certs(d)
        plain, secure = {}, {}
        for r in range(a.rounds):
            for side, extra in ((plain, []), (secure, tls)) if r % 2 == 0 else ((secure, tls), (plain, [])):
                for b, v in run_once(a.strata, extra, a).items():
                    side.setdefault(b, []).append(v)
    rows = []
    print(f"{'bytes':>10} {'plain GB/s':>11} {'TLS GB/s':>9} {'TLS/plain':>9}")
    for b in sorted(plain):
        pm, tm = statistics.median(plain[b]), statistics.median(secure.get(b, [0.0]))
        rows.append({"bytes": b, "plain_busbw_gbps": pm, "tls_busbw_gbps": tm, "ratio": tm / pm if pm else 0.0})
        print(f"{b:>10} {pm:>11.3f} {tm:>9.3f} {tm / pm if pm else 0:>9.2f}")
    cipher = "TLS 1.3, AES-128-GCM"
    speed = subprocess.run(["openssl", "speed", "-evp", "aes-128-gcm", "-seconds", "1", "-bytes", "16384"],
                           capture_output=True, text=True).stdout.strip().splitlines()
    aes = None
    if speed:
        m = re.search(r"([\d.]+)k\s*$", speed[-1])
        aes = float(m.group(1)) * 1000 / 1e9 if m else None
    result = {"rounds": a.rounds, "ranks": 2, "cipher": cipher, "aes_gcm_gbps_one_core": aes, "results": rows}
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
