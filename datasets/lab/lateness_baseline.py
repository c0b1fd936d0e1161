"""The baseline of the generator-lateness rule: how late SIPp sends its INVITEs when nothing is wrong.

    sudo .venv/bin/python datasets/lab/lateness_baseline.py [--rates 300,1000,2000,3000]
        [--replicates 2] [--seconds 10] [--out datasets/lab/protocol/lateness_baseline.csv]

Runs exactly as the protocol records its captured points (``sipperf.lab.plan.base_config`` of
the ``protocol`` plan: one worker on CPU 0, SIPp UAC and UAS on CPU 1 at equal priority, 4-MB
socket buffers, Poisson arrivals from a recorded seed, dumpcap on), with the tracer off and the
proxy below its knee, so the generator is the only thing that could be late.  For every run,
each call's first INVITE on the wire is set against its planned instant
(:func:`sipperf.lab.longrun.invite_lateness`) and the lateness split into a smooth trend and the
burst around it (:func:`sipperf.lab.protocol.invite_lateness_ms`).

Writes one row per run (``--out``): rate, seed, the lateness's p99 (what the first rule
compared with 20 ms), the trend's rise and the rate shortfall it means, the burst's p99 and
max, SIPp's watchdog trips, the generator's CPU, the protocol's verdict; and the trend's knots
(``*_trend.csv``: run, planned instant, median lateness) for the figure in docs/lab.md.
Loopback only; every process stopped by its pid (``sipperf.lab.run``).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from sipperf.lab import plan as P
from sipperf.lab import protocol
from sipperf.lab.longrun import invite_lateness, invite_wire_and_plan
from sipperf.lab.run import run_lab

HERE = Path(__file__).resolve().parent


def _trend(tl: pd.DataFrame, meta: dict) -> tuple[np.ndarray, np.ndarray] | None:
    """The trend's knots of one run (the recorder's own join, :func:`invite_wire_and_plan`)."""
    got = invite_wire_and_plan(tl, meta)
    if got is None:
        return None
    wire_ns, plan = got
    late = wire_ns / 1e6 - plan
    return protocol.lateness_trend_knots(plan, late - late.min())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="300,1000,2000,3000")
    ap.add_argument("--replicates", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--out", type=Path, default=HERE / "protocol" / "lateness_baseline.csv")
    ap.add_argument("--scratch", type=Path, default=Path("/tmp/sipperf-lateness"))
    a = ap.parse_args(argv)
    from sipperf.ingest.lab_runs.run import read_run
    params = P.PLANS["protocol"]
    rows, knots = [], []
    for rep in range(a.replicates):
        for i, rate in enumerate(float(x) for x in a.rates.split(",")):
            seed = 30000 + 100 * rep + i + 1
            cfg = P.base_config(params, workers=1, rate_cps=rate, calls=int(round(rate * a.seconds)),
                                seed=seed, tracer="none", capture=True)
            rd = a.scratch / f"r{int(rate)}-rep{rep}"
            shutil.rmtree(rd, ignore_errors=True)
            run_lab(cfg, rd, log=lambda s: None)
            meta = json.loads((rd / "meta.json").read_text())
            tl, _ = read_run(rd, run_id=rd.name)
            meta["invite_lateness"] = invite_lateness(tl, meta)
            v = protocol.generator_verdict(meta)
            lat = meta["invite_lateness"]
            st = meta.get("sipp_stats") or {}
            row = {"run": rd.name, "rate_cps": rate, "replicate": rep, "seed": seed, "calls": cfg.calls,
                   "invites_matched": lat.get("n"), "late_p99_ms": lat.get("p99_ms"),
                   "late_max_ms": lat.get("max_ms"), "trend_rise_ms": lat.get("trend_rise_ms"),
                   "rate_shortfall": lat.get("rate_shortfall"), "burst_p99_ms": lat.get("burst_p99_ms"),
                   "burst_max_ms": lat.get("burst_max_ms"),
                   "watchdog_trips": v.get("late_trips_uac"), "load_seconds": meta.get("load_seconds"),
                   "generator_side_share": v.get("generator_side_share"),
                   "generator_cpus_busy": v.get("generator_cpus_busy"),
                   "generator_socket_drops": v.get("generator_socket_drops"),
                   "failed_calls": st.get("FailedCall(C)"),
                   "old_rule_flag": bool((lat.get("p99_ms") or 0) > 20.0),
                   "generator_bound": v["bound"], "generator_bound_why": "; ".join(v["why"]) or None,
                   "load_1min": float(Path("/proc/loadavg").read_text().split()[0])}
            rows.append(row)
            tk = _trend(tl, meta)
            if tk is not None:
                knots += [{"run": rd.name, "rate_cps": rate, "plan_ms": round(float(x), 1),
                           "trend_ms": round(float(y), 3)} for x, y in zip(*tk)]
            print(f"rep {rep} rate {rate:5.0f}: p99 {row['late_p99_ms']} ms, trend +{row['trend_rise_ms']} ms "
                  f"(shortfall {100 * (row['rate_shortfall'] or 0):.2f} %), burst p99 {row['burst_p99_ms']} ms, "
                  f"generator {100 * (row['generator_side_share'] or 0):.0f} % busy, bound {row['generator_bound']}",
                  flush=True)
            shutil.rmtree(rd, ignore_errors=True)
    df = pd.DataFrame(rows)
    df.insert(0, "recorded_utc", dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(a.out, index=False)
    pd.DataFrame(knots).to_csv(a.out.with_name(a.out.stem + "_trend.csv"), index=False)
    print(f"wrote {a.out} ({len(df)} runs) and its trend knots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
