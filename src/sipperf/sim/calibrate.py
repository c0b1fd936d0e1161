"""Calibration of the simulator against the thesis's measurements (issue 6 item 4).

``python -m sipperf.sim.calibrate [--calls N] [--workers 2]`` writes
datasets/precomputed/sim_calibration.csv with, per row, the measured value, the simulated value
and the gap in percent:

* waiting time K^w in the stable region, Table 4.4 (Poisson) and Table 4.5 (deterministic),
  ch. 4 testbed (one thread, one core);
* the call rate of the 1 %-drop knee, Tables 5.1-5.6 (1 core, default scheduler), 6.1/6.2
  (1 core, baseline/enhanced "server" mode) and 7.1/7.2, 7.4/7.5, 7.7/7.8 (2/4/6 cores).

The measured knee is interpolated linearly in the drop rate between the two loads each table
gives (the last below and the first above 1 %); the simulated knee likewise from a grid of
rates around it.  Rows outside 10 % are flagged ``within_10pct = False``, not hidden.

Known gaps (see :data:`GAPS`).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from sipperf.sim.sweep import OUT_DIR, run_sweep, write_with_provenance

# Table 4.4 / 4.5 last row "W (measured) = K^w_sockq" (us), stable region 100-800 (900 det.) cps
W_MEASURED_POISSON = {100: 5.485, 200: 13.59, 400: 53.27, 600: 190.92, 700: 333.52, 800: 664.57}
W_MEASURED_DET = {100: 0.31, 200: 6.87, 400: 26.4, 600: 137.35, 700: 185.39, 800: 335.17, 900: 577.93}
# Table 4.4 / 4.5 row "W (model)" (P-K with alpha), for reference
W_PK_POISSON = {100: 6.0, 200: 16.89, 400: 64.21, 600: 169.19, 700: 293.98, 800: 617.77}

#: (table, cores, threads, scheduler mode, cps below, PDR below, cps above, PDR above)
#: transcribed from the rows "Droprate(measured)" (Tables 5.1-5.6) and "PDR" (Tables 6.1/6.2, 7.x)
KNEES: list[tuple[str, int, int, str, float, float, float, float]] = [
    ("5.1", 1, 1, "default", 2500, 0.00566, 3000, 0.02275),
    ("5.2", 1, 2, "default", 2200, 0.0039, 2400, 0.0139),
    ("5.3", 1, 4, "default", 1800, 0.00722, 2000, 0.0101),
    ("5.4", 1, 6, "default", 1600, 0.0084, 1800, 0.0100),
    ("5.5", 1, 8, "default", 1400, 0.0096, 1600, 0.0156),
    ("5.6", 1, 16, "default", 900, 0.00873, 1000, 0.0189),
    ("6.1", 1, 2, "baseline", 2200, 0.0062, 2400, 0.0133),
    ("6.1", 1, 4, "baseline", 2000, 0.0083, 2200, 0.0157),
    ("6.1", 1, 6, "baseline", 1800, 0.0072, 2000, 0.0159),
    ("6.1", 1, 8, "baseline", 1600, 0.0052, 1800, 0.0180),
    ("6.1", 1, 16, "baseline", 1200, 0.0074, 1400, 0.0137),
    ("6.2", 1, 2, "enhanced", 2400, 0.0098, 2600, 0.0169),
    ("6.2", 1, 4, "enhanced", 2000, 0.0090, 2200, 0.0115),
    ("6.2", 1, 6, "enhanced", 1800, 0.0074, 2000, 0.0110),
    ("6.2", 1, 8, "enhanced", 1600, 0.0039, 1800, 0.0113),
    ("6.2", 1, 16, "enhanced", 1400, 0.0081, 1600, 0.0233),
    ("7.1", 2, 2, "baseline", 3000, 0.0084, 3200, 0.0130),
    ("7.1", 2, 4, "baseline", 3600, 0.0053, 3800, 0.0119),
    ("7.1", 2, 6, "baseline", 3400, 0.0089, 3600, 0.0113),
    ("7.1", 2, 8, "baseline", 3000, 0.0087, 3200, 0.0137),
    ("7.1", 2, 16, "baseline", 2400, 0.0083, 2600, 0.0100),
    ("7.2", 2, 2, "enhanced", 3800, 0.0084, 4000, 0.0110),
    ("7.2", 2, 4, "enhanced", 4400, 0.0086, 4600, 0.0118),
    ("7.2", 2, 6, "enhanced", 3800, 0.0089, 4000, 0.0147),
    ("7.2", 2, 8, "enhanced", 3200, 0.0098, 3400, 0.0149),
    ("7.2", 2, 16, "enhanced", 2600, 0.0096, 2800, 0.0172),
    ("7.4", 4, 2, "baseline", 4000, 0.0091, 4200, 0.0135),
    ("7.4", 4, 4, "baseline", 4800, 0.0095, 5000, 0.0112),
    ("7.4", 4, 6, "baseline", 5000, 0.0092, 5200, 0.0102),
    ("7.4", 4, 8, "baseline", 4200, 0.0086, 4400, 0.0104),
    ("7.4", 4, 16, "baseline", 3800, 0.0084, 4000, 0.0103),
    ("7.5", 4, 2, "enhanced", 4200, 0.0092, 4400, 0.0139),
    ("7.5", 4, 4, "enhanced", 5000, 0.0096, 5200, 0.0130),
    ("7.5", 4, 6, "enhanced", 5400, 0.0066, 5600, 0.0159),
    ("7.5", 4, 8, "enhanced", 4600, 0.0088, 4800, 0.0119),
    ("7.5", 4, 16, "enhanced", 4600, 0.0064, 4800, 0.0138),
    ("7.7", 6, 4, "baseline", 5800, 0.0079, 6000, 0.0120),
    ("7.7", 6, 6, "baseline", 6000, 0.0069, 6200, 0.0170),
    ("7.7", 6, 8, "baseline", 6000, 0.0089, 6200, 0.0149),
    ("7.7", 6, 16, "baseline", 3800, 0.0071, 4000, 0.0127),
    ("7.8", 6, 4, "enhanced", 6000, 0.0080, 6200, 0.0130),
    ("7.8", 6, 6, "enhanced", 6600, 0.0072, 6800, 0.0117),
    ("7.8", 6, 8, "enhanced", 6400, 0.0090, 6600, 0.0146),
    ("7.8", 6, 16, "enhanced", 4200, 0.00935, 4400, 0.0157),
]

GAPS = """Known gaps and why:
- Tables 4.4/4.5 waiting times: not within 10 %. The simulated packet stream is the superposition of
  call flows (180+200 back to back, ACK right after 200), burstier than the Poisson packet stream the
  thesis's P-K model assumes; with Poisson arrivals the simulator sits 45-60 % above the measured W
  (the thesis's own P-K is within 7-24 %).  With deterministic call arrivals it is lower than measured
  at 600-900 cps (the thesis attributes the measured excess to INVITEs colliding with the previous
  calls' teardown under fixed holding times, which depends on UAC/UAS reaction times the thesis does
  not report; ours are assumptions).  The 0.31 us at 100 cps (det.) is below what any non-zero
  intra-call queueing gives.
- 1-core knees: Tables 6.1/6.2 (baseline/enhanced) all within 10 % after fitting two free constants
  (thread_overhead_us, contention) by hand; Table 5.x (default "desktop" scheduler, other kernel) is
  15-50 % too optimistic at >= 4 threads: in the model the desktop knobs (long slices) mean fewer
  switches, while the thesis measured worse capacity; the desktop-mode penalty is not modelled.
- Multi-core 16 threads: the model spreads threads over cores, so per-core thread overhead falls;
  the thesis measured a steep loss with 16 threads on 2/4/6 cores (sim 17-50 % optimistic).
- 2-core baseline, 2 threads: the thesis's 5 ms migration cost pins threads; in the model two threads
  already sit on two cores, so it misses the imbalance (sim +34 %).
"""

#: relative rates (x measured knee) at which the simulator is run to find its own knee
FACTORS = (0.6, 0.75, 0.85, 0.95, 1.05, 1.15, 1.3, 1.5)


def crossing(rates: np.ndarray, drops: np.ndarray, level: float = 0.01) -> tuple[float, str]:
    """Rate at which ``drops`` first crosses ``level`` (linear interpolation); with a bound flag."""
    o = np.argsort(rates)
    r, d = np.asarray(rates, float)[o], np.asarray(drops, float)[o]
    above = np.flatnonzero(d >= level)
    if len(above) == 0:
        return float(r[-1]), ">"
    i = int(above[0])
    if i == 0:
        return float(r[0]), "<"
    r0, r1, d0, d1 = r[i - 1], r[i], d[i - 1], d[i]
    return float(r0 + (level - d0) / (d1 - d0) * (r1 - r0)), "="


def measured_knee(lo: float, plo: float, hi: float, phi: float) -> float:
    return crossing(np.array([lo, hi]), np.array([plo, phi]))[0]


def calibration_table(calls: int = 8000, workers: int = 2, scheduler: str | None = None,
                      seed: int = 7) -> pd.DataFrame:
    pts: list[dict] = []
    for cps in W_MEASURED_POISSON:
        pts.append({"rate_cps": cps, "calls": calls * 2, "threads": 1, "cores": 1, "machine": "ch4",
                    "arrivals": "poisson", "seed": seed})
    for cps in W_MEASURED_DET:
        pts.append({"rate_cps": cps, "calls": calls * 2, "threads": 1, "cores": 1, "machine": "ch4",
                    "arrivals": "deterministic", "seed": seed})
    n_w = len(pts)
    for j, (tab, n, c, mode, lo, plo, hi, phi) in enumerate(KNEES):
        k = measured_knee(lo, plo, hi, phi)
        for f in FACTORS:
            pts.append({"rate_cps": round(k * f), "calls": calls, "threads": c, "cores": n, "machine": "ch5",
                        "sched_mode": mode, "arrivals": "poisson", "seed": seed + j, "_knee": j})
    res = run_sweep([{k: v for k, v in p.items() if k != "_knee"} for p in pts], scheduler, workers)
    rows = []
    for i in range(n_w):
        p, st = pts[i], res.iloc[i]
        tab = "4.4" if p["arrivals"] == "poisson" else "4.5"
        meas = (W_MEASURED_POISSON if tab == "4.4" else W_MEASURED_DET)[p["rate_cps"]]
        rows.append({"table": tab, "quantity": "waiting time K^w (us)", "cores": 1, "threads": 1,
                     "sched_mode": "-", "x_cps": p["rate_cps"], "measured": meas, "sim": st["w_us"],
                     "sim_ci": st["w_ci_us"], "bound": "="})
    knee_idx = np.array([p.get("_knee", -1) for p in pts])
    for j, (tab, n, c, mode, lo, plo, hi, phi) in enumerate(KNEES):
        sel = np.flatnonzero(knee_idx == j)
        sk, bound = crossing(res["rate_cps"].to_numpy()[sel], res["drop_rate"].to_numpy()[sel])
        rows.append({"table": tab, "quantity": "1%-drop knee (cps)", "cores": n, "threads": c,
                     "sched_mode": mode, "x_cps": np.nan, "measured": measured_knee(lo, plo, hi, phi),
                     "sim": sk, "sim_ci": np.nan, "bound": bound})
    df = pd.DataFrame(rows)
    df["gap_pct"] = 100 * (df["sim"] - df["measured"]) / df["measured"]
    df["within_10pct"] = (df["gap_pct"].abs() <= 10) & (df["bound"] == "=")
    return df


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=8000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--scheduler", default=None)
    ap.add_argument("--out", default=str(OUT_DIR / "sim_calibration.csv"))
    a = ap.parse_args(argv)
    df = calibration_table(a.calls, a.workers, a.scheduler)
    write_with_provenance(
        df, Path(a.out),
        "Calibration: simulated vs measured (thesis Tables 4.4/4.5 waiting times; 1%-drop knees of "
        "Tables 5.1-5.6, 6.1/6.2, 7.1/7.2, 7.4/7.5, 7.7/7.8). Measured knees are linear interpolations "
        "between the two loads each table reports. bound '>'/'<' = the simulated knee lies outside the "
        "simulated rate grid.\n\n" + GAPS,
        f"python -m sipperf.sim.calibrate --calls {a.calls}")
    with pd.option_context("display.width", 200):
        print(df.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
