"""Record the TLS lab's series into this directory (issue 39, item 3, in part).

    sudo .venv/bin/python datasets/lab/tls/record.py [--reps 6] [--calls 1500] [--cps 75]
    sudo .venv/bin/python datasets/lab/tls/record.py --memory [--reps 3] [--connections 2000]

Per replication, in one interleaved order: the same proxy (``sipperf.lab.tls``: Kamailio 5.6,
UDP, TCP and TLS listeners) carrying ``--calls`` calls at ``--cps`` calls/s over UDP, over TCP
and over TLS on one connection for all calls, and over TCP and TLS on a new connection per
call. Kamailio is pinned to CPU 0, the user agents and dumpcap run on CPU 1. Each run's capture is read by
``sipperf.ingest.load`` with the agents' key logs, then deleted (captures stay out of git):
``runs.csv`` keeps one row per run, ``README.md`` says what the columns are.

``--memory``: per replication, ``--connections`` idle TCP, then TLS, connections held open to the
same proxy (:func:`sipperf.lab.tls.hold`): the kernel's slab bytes and the proxy's memory (PSS)
per connection, into ``memory.csv``.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from sipperf.ingest import load
from sipperf.lab import tls

HERE = Path(__file__).resolve().parent
MODES = (("udp", False), ("tcp", False), ("tls", False), ("tcp", True), ("tls", True))
COLUMNS = ("rep", "transport", "connection", "calls", "cps", "seconds", "proxy_cpu_s", "idle_cpu_s", "idle_seconds",
           "cpu_ms_per_call", "messages_relayed", "messages_written", "sojourn_median_us", "sojourn_p99_us",
           "first_invite_us", "load_before", "load_after")


def one(rep: int, transport: str, new: bool, calls: int, cps: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="sipperf-tls-") as tmp:
        out = Path(tmp)
        cap = tls.record(out, calls=calls, cps=cps, transport=transport, new_connection=new,
                         proxy_cpu=0, idle_s=5.0)
        run = json.loads((out / "run.json").read_text())
        keys = [out / "keys_uac.txt", out / "keys_uas.txt"] if transport == "tls" else []
        tl, _ = load([cap, *keys])
        sent = (out / "sent.csv").read_text().splitlines()[1:]
    rel = tl[tl.disposition == "relayed"]
    soj = (rel.t_dep - rel.t_arr).to_numpy(float) / 1e3
    inv = rel[rel.method == "INVITE"].sort_values("t_arr")
    idle_rate = run["idle_cpu_s"] / run["idle_seconds"]
    busy = run["proxy_cpu_s"] - idle_rate * run["seconds"]
    return {"rep": rep, "transport": transport, "connection": "per call" if new else "one for all",
            "calls": calls, "cps": cps, "seconds": round(run["seconds"], 3), "proxy_cpu_s": round(run["proxy_cpu_s"], 3),
            "idle_cpu_s": round(run["idle_cpu_s"], 3), "idle_seconds": round(run["idle_seconds"], 3),
            "cpu_ms_per_call": round(1e3 * busy / calls, 4), "messages_relayed": len(rel),
            "messages_written": sum(",out," in line for line in sent),
            "sojourn_median_us": round(float(np.median(soj)), 1), "sojourn_p99_us": round(float(np.percentile(soj, 99)), 1),
            "first_invite_us": round(float((inv.t_dep - inv.t_arr).iloc[0]) / 1e3, 1),
            "load_before": run["load_before"][0], "load_after": run["load_after"][0]}


MEMORY_COLUMNS = ("rep", "transport", "connections", "proxy_side_sockets", "kernel_bytes_per_connection",
                  "proxy_bytes_per_connection", "load")


def memory(reps: int, connections: int, out: Path) -> int:
    rows = []
    for rep in range(1, reps + 1):
        for transport in (("tcp", "tls") if rep % 2 else ("tls", "tcp")):
            with tempfile.TemporaryDirectory(prefix="sipperf-tls-") as tmp:
                r = tls.hold(Path(tmp), transport, connections)
            rows.append({"rep": rep, **{k: r[k] for k in MEMORY_COLUMNS[1:-1]}, "load": r["load"][0]})
            rows[-1]["kernel_bytes_per_connection"] = round(rows[-1]["kernel_bytes_per_connection"])
            rows[-1]["proxy_bytes_per_connection"] = round(rows[-1]["proxy_bytes_per_connection"])
            print(rows[-1], flush=True)
    with open(out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=MEMORY_COLUMNS)
        w.writeheader()
        w.writerows(rows)
    print(out)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--calls", type=int, default=1500)
    ap.add_argument("--cps", type=float, default=75.0)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--memory", action="store_true", help="the memory idle connections hold, into memory.csv")
    ap.add_argument("--connections", type=int, default=2000)
    a = ap.parse_args(argv)
    if tls.missing():
        print("missing: " + ", ".join(tls.missing()), file=sys.stderr)
        return 2
    if (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {1})   # the agents (this process) and dumpcap on CPU 1
    if a.memory:
        return memory(a.reps, a.connections, a.out or HERE / "memory.csv")
    a.out = a.out or HERE / "runs.csv"
    rows = []
    for rep in range(1, a.reps + 1):
        order = MODES if rep % 2 else tuple(reversed(MODES))
        for transport, new in order:
            rows.append(one(rep, transport, new, a.calls, a.cps))
            print(rows[-1], flush=True)
    with open(a.out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
