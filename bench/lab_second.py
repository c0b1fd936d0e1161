"""How close ``sipperf report`` comes on a lab it never saw, per rate (issue 21, item 8).

    sudo .venv/bin/python bench/lab_second.py [--repeats 3] [--out /tmp/lab2-bench]

Each repeat builds the second lab of ``tests/lab2/`` (its own Kamailio configuration with 2
workers, its own SIPp scenarios with 10 % 486 Busy Here, retransmissions on, constant-rate
arrivals, nothing pinned), sweeps it past its knee, bisects the knee on the kernel's drop
counter, and runs ``sipperf report --threads 2 --cpu`` on the sweep's captures.  Printed per run:
the call rate as it reached the proxy, the kernel's PDR against the report's, /proc's CPU per
worker against the report's utilisation, and the 1-minute load before the run; per repeat, the
report's knee interval against the bisection's knee and bracket, and the CPU per call the report
fits on the light runs (utilisation law) with the capacity it implies.  Medians over the repeats
at the end.  Loopback only; every process stopped by its pid.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from lab2.driver import Lab2Config, SecondLab, missing_tools, sweep  # noqa: E402

SIPPERF = str(Path(sys.executable).with_name("sipperf"))


def one(out: Path, cfg: Lab2Config) -> dict | None:
    with SecondLab(cfg, out / "lab") as lab:
        sw = sweep(lab)
    if sw.knee_cps is None:
        print(f"  not swept across 1 % drops (last run: {sw.runs[-1].kernel_pdr:.2%} at "
              f"{sw.runs[-1].nominal_cps:g} calls/s)")
        return None
    cpu = sw.cpu_csv(out / "cpu.csv")
    p = subprocess.run([SIPPERF, "report", *[str(r.capture) for r in sw.runs], "--threads", str(cfg.workers),
                        "--cpu", str(cpu), "--out", str(out / "report")], capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stderr[-2000:])
        return None
    import pandas as pd

    rep = json.loads((out / "report" / "report.json").read_text())
    n = rep["verdict"]["numbers"]
    runs = pd.read_csv(out / "report" / "runs.csv").set_index("run")
    print(f"  {'run':>10} {'calls/s':>8} {'kernel PDR':>11} {'report PDR':>11} {'/proc per worker':>17} "
          f"{'report util.':>13} {'load':>5}")
    rows = []
    for r in sw.runs:
        got = runs.loc[r.label]
        rows.append({"pdr_err": got["pdr_percent"] / 100 - r.kernel_pdr,
                     "util_err": got["utilisation"] / (r.cpu_share / cfg.workers) - 1})
        print(f"  {r.label:>10} {r.rate_cps:8.0f} {r.kernel_pdr:11.4%} {got['pdr_percent'] / 100:11.4%} "
              f"{r.cpu_share / cfg.workers:17.3f} {got['utilisation']:13.3f} {r.loadavg:5.2f}")
    lo, hi = n.get("knee_measured_ci95") or (None, None)
    b_lo, b_hi = sw.bracket
    demand = n.get("cpu_demand_ms")
    print(f"  knee: report {lo:,.0f}-{hi:,.0f} calls/s; bisection {sw.knee_cps:,.0f} (bracket {b_lo:,.0f}-{b_hi:,.0f}, "
          f"{len(sw.bisection)} steps); meets: {lo <= b_hi and hi >= b_lo}")
    if demand is not None:
        print(f"  utilisation law on the light runs: {demand:.3f} ms of CPU per call, capacity "
              f"{n.get('cpu_capacity_cps', float('nan')):,.0f} calls/s")
    return {"knee": sw.knee_cps, "lo": lo, "hi": hi, "meets": lo <= b_hi and hi >= b_lo,
            "pdr_err_max": max(abs(x["pdr_err"]) for x in rows),
            "util_err_max": max(abs(x["util_err"]) for x in rows)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    missing = missing_tools()
    if missing:
        print(f"skipped: lab tools not installed: {', '.join(missing)}")
        return 0
    base = a.out or Path(tempfile.mkdtemp(prefix="lab2-bench-"))
    res = []
    for i in range(a.repeats):
        print(f"repeat {i + 1}/{a.repeats} (load before: {Path('/proc/loadavg').read_text().split()[0]})")
        r = one(base / f"rep{i}", Lab2Config())
        if r:
            res.append(r)
    if res:
        med = lambda k: statistics.median(x[k] for x in res)  # noqa: E731
        print(f"medians over {len(res)} repeats: bisection knee {med('knee'):,.0f} calls/s, report interval "
              f"{med('lo'):,.0f}-{med('hi'):,.0f}; largest PDR error {100 * med('pdr_err_max'):.3f} points; "
              f"largest utilisation error {100 * med('util_err_max'):.1f} %; intervals meeting the bisection: "
              f"{sum(x['meets'] for x in res)}/{len(res)}")
    print(f"load after: {Path('/proc/loadavg').read_text().strip()}; runs kept in {base}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
