"""What one signature costs on the lab's CPU: ``openssl speed`` for the three certificate keys of
the TLS load series, pinned to the proxy's CPU, written to ``speed.csv`` here.

    .venv/bin/python datasets/lab/tls_load/speed.py [--seconds 3] [--reps 3]

A TLS 1.3 server signs once per full handshake (CertificateVerify) with its certificate's key;
``ms_per_sign`` is the CPU time of one such signature by OpenSSL alone, outside any proxy, on an
otherwise idle machine (``load``: the 1-minute load average before each measurement).
"""
from __future__ import annotations

import argparse
import csv
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: the series' keys and openssl speed's names for them
KEYS = {"rsa:2048": "rsa2048", "rsa:4096": "rsa4096", "ec:P-256": "ecdsap256"}


def one(name: str, seconds: int) -> tuple[float, float]:
    """(signatures per second, verifications per second) from ``openssl speed -mr``."""
    p = subprocess.run(["taskset", "-c", "0", "openssl", "speed", "-seconds", str(seconds), "-mr", name],
                       capture_output=True, text=True, check=True)
    for line in p.stdout.splitlines():
        # machine-readable result lines: +F2 (RSA) or +F4 (ECDSA): index, bits, sign/s, verify/s
        if line.startswith(("+F2:", "+F4:")):
            f = line.split(":")
            return float(f[3]), float(f[4])
    raise SystemExit(f"openssl speed {name}: no result line in its output")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args(argv)
    version = subprocess.run(["openssl", "version"], capture_output=True, text=True).stdout.strip()
    rows = []
    for rep in range(1, a.reps + 1):
        for key, name in KEYS.items():
            load = float(Path("/proc/loadavg").read_text().split()[0])
            sign, verify = one(name, a.seconds)
            rows.append({"rep": rep, "tls_key": key, "sign_per_s": round(sign, 1), "verify_per_s": round(verify, 1),
                         "ms_per_sign": round(1e3 / sign, 4), "openssl": version, "load": load})
            print(rows[-1], flush=True)
    with open(HERE / "speed.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
