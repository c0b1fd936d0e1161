"""Observer effect of the kernel tracer on the proxy (needs root, kamailio, sip-tester, tshark, bpftrace).

    .venv/bin/python bench/observer.py [--rate 150] [--calls 600] [--reps 3]

The same lab run (1 worker, Poisson arrivals) under five tracer set-ups:

* ``none``        no tracer (capture and xlog only)
* ``print``       bpftrace printf per event (perf ring buffer, formatted in user space)
* ``print@cpu1``  the same, bpftrace pinned to CPU 1 (taskset)
* ``map``         every event kept in BPF hash maps, written out once at the end (the default)
* ``hist``        aggregation in BPF only (counts, histograms), no per-message records

The figure of merit does not depend on the tracer: the proxy's median time per relayed
message measured on the wire, ``t_wire_out - t_wire_in`` (pcap timestamps of the message in
and of its relayed copy).  Prints, per set-up, the median over ``reps`` runs of that median
(and of the p90), plus the drop rate.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from sipperf.ingest.lab_runs.run import read_run
from sipperf.lab.procs import exit_on_sigterm
from sipperf.lab.run import LabConfig, run_lab
from sipperf.lab.tracer import can_trace

SETUPS = {
    "none": dict(tracer="none"),
    "print": dict(tracer="print"),
    "print@cpu1": dict(tracer="print", tracer_cpu=1),
    "map": dict(tracer="map"),
    "hist": dict(tracer="hist"),
}


def one(setup: str, rate: float, calls: int, seed: int, scratch: Path, ports: dict) -> dict:
    rd = scratch / f"{setup.replace('@', '_')}-{seed}"
    shutil.rmtree(rd, ignore_errors=True)
    cfg = LabConfig(rate_cps=rate, calls=calls, workers=1, arrivals="poisson", seed=seed,
                    **ports, **SETUPS[setup])
    run_lab(cfg, rd, log=lambda s: None)
    tl, rep = read_run(rd)
    rel = tl[(tl["origin"] == "relayed")]
    ok = rel[~rel["dropped"].fillna(False)]
    wire = (ok["t_wire_out"] - ok["t_wire_in"]).dropna().astype("float64").to_numpy() / 1000.0
    meta = json.loads((rd / "meta.json").read_text())
    out = {
        "median_us": float(np.median(wire)) if len(wire) else float("nan"),
        "p90_us": float(np.percentile(wire, 90)) if len(wire) else float("nan"),
        "pdr": float(rel["dropped"].fillna(False).mean()) if len(rel) else float("nan"),
        "lost_events": meta["tracer"].get("lost_events", 0),
        "trace_bytes": (rd / "trace.log").stat().st_size if (rd / "trace.log").exists() else 0,
        "cpu_busy": meta.get("cpu_busy_during_load", {}).get("cpu"),
    }
    shutil.rmtree(rd, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=150.0)
    ap.add_argument("--calls", type=int, default=600)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--setups", nargs="*", default=list(SETUPS))
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--proxy-port", type=int, default=5060)
    ap.add_argument("--uas-port", type=int, default=5080)
    ap.add_argument("--uac-port", type=int, default=5061)
    a = ap.parse_args(argv)
    ok, why = can_trace()
    if not ok:
        print(f"bench/observer.py: cannot trace here ({why}); nothing measured")
        return 0
    exit_on_sigterm()
    results: dict[str, list[dict]] = {s: [] for s in a.setups}
    with tempfile.TemporaryDirectory(prefix="sipperf-observer-") as tmp:
        for rep in range(a.reps):          # interleave set-ups so background load hits all alike
            for s in a.setups:
                r = one(s, a.rate, a.calls, seed=100 + rep, scratch=Path(tmp),
                        ports=dict(proxy_port=a.proxy_port, uas_port=a.uas_port, uac_port=a.uac_port))
                results[s].append(r)
                print(f"  rep {rep} {s:11s} median {r['median_us']:8.1f} us  p90 {r['p90_us']:8.1f} us"
                      f"  pdr {r['pdr']:.4f}  lost {r['lost_events']}", flush=True)
    print(f"\nobserver effect: {a.rate:g} cps, {a.calls} calls, 1 worker, {a.reps} runs each")
    print(f"{'tracer':12s} {'median(us)':>11s} {'p90(us)':>9s} {'x none':>7s} {'pdr':>7s}")
    base = np.median([r["median_us"] for r in results.get("none", [])]) if results.get("none") else None
    summary = {}
    for s, rs in results.items():
        med = float(np.median([r["median_us"] for r in rs]))
        p90 = float(np.median([r["p90_us"] for r in rs]))
        pdr = float(np.median([r["pdr"] for r in rs]))
        ratio = med / base if base else float("nan")
        summary[s] = {"median_us": med, "p90_us": p90, "ratio_to_none": ratio, "pdr": pdr, "runs": rs}
        print(f"{s:12s} {med:11.1f} {p90:9.1f} {ratio:7.2f} {pdr:7.4f}")
    if a.json:
        Path(a.json).write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
