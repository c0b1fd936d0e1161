"""Loopback against three network namespaces: a small paired comparison (needs root and the lab tools).

    .venv/bin/python bench/lab_netns.py [--rate 300] [--calls 1500] [--pairs 6] [--out FILE.json]

The recording protocol's lab (``sipperf.lab``: proxy on CPU 0, SIPp, dumpcap and the tracer on
CPU 1, nice 0, tracer ``map``, SIPp ``-nr``) run ``pairs`` times on loopback and in three network
namespaces joined by veth pairs (``LabConfig.netns``, :mod:`sipperf.lab.netns`); the two runs of a
pair share a seed, their order alternates.  Per run: the proxy's median and mean time per
relayed message on the wire (``t_wire_out - t_wire_in``), its median sojourn ``t_dep - t_arr``
(kernel instants) and its CPU per call (``meta.json`` ``proxy_cpu``).  Prints the medians over
the pairs and the paired difference (namespaces - loopback) with its 95 % t interval
(:func:`sipperf.lab.pairs.paired_difference`), and the machine's load (``/proc/loadavg``, other
processes' CPU share) before and after: on a busy machine the interval says how little a
difference can be told apart.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from sipperf.ingest.lab_runs.run import read_run
from sipperf.lab.pairs import paired_difference
from sipperf.lab.procs import exit_on_sigterm
from sipperf.lab.run import LabConfig, run_lab

PORTS = dict(proxy_port=5360, uas_port=5380, uac_port=5361)
METRICS = ("wire_median_us", "wire_mean_us", "sojourn_median_us", "proxy_cpu_us_per_call")


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


def one(netns: bool, rate: float, calls: int, seed: int, scratch: Path) -> dict:
    rd = scratch / f"{'ns' if netns else 'lo'}-{seed}"
    shutil.rmtree(rd, ignore_errors=True)
    cfg = LabConfig(rate_cps=rate, calls=calls, arrivals="poisson", tracer="map", retransmissions=False,
                    netns=netns, seed=seed, idle_check_s=0.5, max_seconds=120, **PORTS)
    run_lab(cfg, rd, log=lambda s: None)
    meta = json.loads((rd / "meta.json").read_text())
    tl, _ = read_run(rd)
    rel = tl[(tl["origin"] == "relayed") & tl["t_wire_out"].notna()]
    wire = (rel["t_wire_out"] - rel["t_wire_in"]).astype("float64").to_numpy() / 1e3
    soj = (rel["t_dep"] - rel["t_arr"]).dropna().astype("float64").to_numpy() / 1e3
    out = {"netns": netns, "seed": seed, "messages": int(len(rel)),
           "wire_median_us": float(np.median(wire)), "wire_mean_us": float(np.mean(wire)),
           "sojourn_median_us": float(np.median(soj)) if len(soj) else float("nan"),
           "proxy_cpu_us_per_call": 1e6 * meta["proxy_cpu"]["cpu_s"] / calls,
           "pdr": meta["proxy_socket"]["drops"] / max(1, meta["proxy_xlog_in"] + meta["proxy_socket"]["drops"]),
           "foreign_cpu": meta["load_samples"].get("foreign_mean"),
           "generator_bound": meta["generator"]["bound"]}
    shutil.rmtree(rd, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=300.0)
    ap.add_argument("--calls", type=int, default=1500)
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--out", default=None, help="also write every run and the differences here (JSON)")
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench/lab_netns.py: needs root (network namespaces, bpftrace)")
        return 2
    exit_on_sigterm()
    before = loadavg()
    runs = []
    with tempfile.TemporaryDirectory(prefix="sipperf-netns-") as tmp:
        for i in range(a.pairs):
            order = (False, True) if i % 2 == 0 else (True, False)
            for ns in order:
                r = one(ns, a.rate, a.calls, 500 + i, Path(tmp))
                runs.append(r)
                print(f"pair {i} {'netns' if ns else 'loopback':8s} wire median {r['wire_median_us']:7.1f} us  "
                      f"cpu/call {r['proxy_cpu_us_per_call']:6.0f} us  pdr {r['pdr']:.4f}  "
                      f"other processes {100 * (r['foreign_cpu'] or 0):3.0f} %", flush=True)
    after = loadavg()
    lo = [r for r in runs if not r["netns"]]
    ns = [r for r in runs if r["netns"]]
    lo.sort(key=lambda r: r["seed"])
    ns.sort(key=lambda r: r["seed"])
    res = {"rate_cps": a.rate, "calls": a.calls, "pairs": a.pairs, "loadavg_before": before,
           "loadavg_after": after, "runs": runs, "differences": {}}
    print(f"\n{a.pairs} pairs, {a.calls} calls at {a.rate:g} calls/s; loadavg before: {before}; after: {after}")
    for m in METRICS:
        d = paired_difference([r[m] for r in ns], [r[m] for r in lo])
        res["differences"][m] = d
        print(f"{m:24s} loopback median {np.median([r[m] for r in lo]):8.1f}  namespaces median "
              f"{np.median([r[m] for r in ns]):8.1f}  difference {d['diff']:+8.1f} "
              f"(95 % {d['low']:+.1f} to {d['high']:+.1f})" if d["low"] is not None else
              f"{m:24s} difference {d['diff']:+.1f} (one pair: no interval)")
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
