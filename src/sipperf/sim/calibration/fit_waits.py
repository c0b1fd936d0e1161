"""Fit the unreported UA reaction times to one waiting-time table, test them on the other.

``python -m sipperf.sim.calibration.fit_waits [--calls 12000]`` runs a grid of UAC/UAS reaction times
(one process, no Dask) on the chapter 4 set-up (one thread, one core) at the call rates of
Table 4.4 (Poisson calls) and Table 4.5 (deterministic calls), and writes
``datasets/precomputed/sim_calibration.reaction_fit.csv`` (one row per grid point, table and
rate) with a provenance note.

What is fitted.  The thesis (seed 000, §4.1.2-4.2) gives the call holding time (250 ms) and says
the UAS answers every INVITE with 180 and 200, but not how long the UAs take to react, nor how
much that time varies.  Those times decide how the packets of one call space out at the proxy,
i.e. the burstiness of the packet stream, and so the waiting time.  Three free parameters:

* ``react_us``: mean UA reaction time, used for INVITE -> 180 (UAS), 200 -> ACK (UAC) and
  BYE -> 200 (UAS);
* ``gap_us``: mean gap between the UAS's 180 and 200;
* ``react_cv``: coefficient of variation of all four (0 = constant, 1 = exponential, the old
  default; gamma in between).

Procedure (no per-row tuning): every grid point is run at every rate of a table with common
random numbers (same seed per rate); the score of a grid point on a table is the RMS of
``ln(sim W / measured W)`` over the table's rates with measured W >= :data:`W_MIN_US` (the
0.31 µs of Table 4.5 at 100 cps is below what the alpha-dependent definition of W resolves, see
:func:`sipperf.sim.calibration.calibrate.w_definition_check`).  The parameters chosen on Table 4.4 are
tested on Table 4.5 (out of sample) and, as a second fold, the reverse.
"""
from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sipperf import thesis
from sipperf.sim.sweep import OUT_DIR, write_with_provenance

#: the stable region of Tables 4.4 / 4.5: rates whose printed utilisation rho is below this
RHO_STABLE = 0.95


def measured_w(table: str) -> dict[int, float]:
    """Table 4.4 / 4.5 row "W (measured) = K^w_sockq" (us) by call rate, stable region only
    (printed rho < :data:`RHO_STABLE`), read from ``datasets/thesis``."""
    w = thesis.wide(table).set_index("cps")
    w = w[w["rho"] < RHO_STABLE]
    return {int(c): float(v) for c, v in w["w_measured_us"].items()}


W_MEASURED_POISSON = measured_w("4.4")
W_MEASURED_DET = measured_w("4.5")
W_TABLES: dict[str, tuple[str, dict[int, float]]] = {
    "4.4": ("poisson", W_MEASURED_POISSON), "4.5": ("deterministic", W_MEASURED_DET)}
#: rates whose measured W is below this are left out of the score (see module docstring)
W_MIN_US = 1.0
#: the grid (us, us, -)
GRID: dict[str, tuple[float, ...]] = {
    "react_us": (250.0, 1000.0, 2500.0, 5000.0),
    "gap_us": (150.0, 500.0, 1000.0, 2500.0),
    "react_cv": (0.0, 0.25, 0.5, 1.0),
}
OUT = OUT_DIR / "sim_calibration.reaction_fit.csv"


def react_over(react_us: float, gap_us: float, react_cv: float) -> dict[str, Any]:
    """``WorkloadParams`` overrides for one grid point."""
    return {"react_dist": "det" if react_cv <= 0 else "gamma", "react_cv": float(react_cv),
            "uas_react_us": float(react_us), "uac_react_us": float(react_us),
            "uas_bye_react_us": float(react_us), "uas_gap_us": float(gap_us)}


def calls_for(cps: float, calls: int) -> int:
    """More calls near saturation, where the batch-means CI of W is widest."""
    return int(calls * (1 if cps <= 400 else 2 if cps <= 700 else 3))


def wait_points(table: str, calls: int, seed: int, over: dict[str, Any] | None) -> list[dict[str, Any]]:
    """``run_point`` dicts of one waiting-time table (one thread, one core, ch. 4 machine)."""
    arrivals, meas = W_TABLES[table]
    return [{"rate_cps": cps, "calls": calls_for(cps, calls), "threads": 1, "cores": 1, "machine": "ch4",
             "arrivals": arrivals, "seed": seed + i, "workload_over": dict(over or {})}
            for i, cps in enumerate(meas)]


def run_points(points: list[dict[str, Any]], workers: int = 0, scheduler: str | None = None) -> pd.DataFrame:
    """Run ``points`` in this process (``workers <= 0``) or on Dask; rows in input order."""
    if workers > 0 or scheduler:
        from sipperf.sim.sweep import run_sweep

        return run_sweep(points, scheduler, max(workers, 1), progress=False)
    from sipperf.sim.sweep import run_point

    return pd.DataFrame([run_point(p) for p in points])


def score(sim: np.ndarray, meas: np.ndarray) -> float:
    """RMS of ln(sim/meas) over the points with meas >= W_MIN_US."""
    sim, meas = np.asarray(sim, float), np.asarray(meas, float)
    ok = meas >= W_MIN_US
    return float(np.sqrt(np.mean(np.log(sim[ok] / meas[ok]) ** 2)))


def fit_grid(calls: int = 12000, seed: int = 7, tables: tuple[str, ...] = ("4.4", "4.5"),
             grid: dict[str, tuple[float, ...]] | None = None, workers: int = 0) -> pd.DataFrame:
    """One row per (grid point, table, rate): measured and simulated W with its CI."""
    grid = grid or GRID
    rows = []
    for react_us, gap_us, cv in itertools.product(grid["react_us"], grid["gap_us"], grid["react_cv"]):
        over = react_over(react_us, gap_us, cv)
        for tab in tables:
            pts = wait_points(tab, calls, seed, over)
            res = run_points(pts, workers)
            meas = W_TABLES[tab][1]
            for p, (_, r) in zip(pts, res.iterrows()):
                rows.append({"react_us": react_us, "gap_us": gap_us, "react_cv": cv, "table": tab,
                             "seed_set": seed,
                             "rate_cps": p["rate_cps"], "calls": p["calls"], "seed": p["seed"],
                             "alpha": r["alpha"], "measured_w_us": meas[p["rate_cps"]],
                             "sim_w_us": r["w_us"], "sim_w_ci_us": r["w_ci_us"]})
    return pd.DataFrame(rows)


def scores(fit: pd.DataFrame) -> pd.DataFrame:
    """Score of every grid point on every table (columns ``score_4.4``, ``score_4.5``): the mean over
    the seed sets a point was run with (the refined points of Table 4.4 have several)."""
    keys = ["react_us", "gap_us", "react_cv"]
    fit = fit.assign(table=fit["table"].astype(str))
    per = (fit.groupby(keys + ["table", "seed_set"])
           .apply(lambda d: score(d["sim_w_us"], d["measured_w_us"]), include_groups=False))
    g = per.groupby(keys + ["table"])
    out = g.mean().unstack("table")
    out.columns = [f"score_{c}" for c in out.columns]
    n = g.size().unstack("table")
    n.columns = [f"n_{c}" for c in n.columns]
    return out.join(n).reset_index()


def refine(fit: pd.DataFrame, table: str = "4.4", top: int = 8, seeds: tuple[int, ...] = (107, 207),
           calls: int = 12000) -> pd.DataFrame:
    """Re-run the ``top`` best grid points of ``table`` with further seed sets (same table only),
    so that the choice is not decided by the Monte Carlo noise of one replication."""
    s = scores(fit).sort_values(f"score_{table}").head(top)
    rows = []
    for r in s.itertuples():
        g = {"react_us": (r.react_us,), "gap_us": (r.gap_us,), "react_cv": (r.react_cv,)}
        for sd in seeds:
            rows.append(fit_grid(calls, sd, (table,), g))
    return pd.concat([fit, *rows], ignore_index=True)


def best(fit: pd.DataFrame, table: str) -> dict[str, float]:
    """The grid point with the lowest score on ``table`` among those run with the most seed sets
    (after :func:`refine`, the refined points: a single lucky replication cannot win)."""
    s = scores(fit)
    s = s[s[f"n_{table}"] == s[f"n_{table}"].max()]
    r = s.loc[s[f"score_{table}"].idxmin()]
    return {"react_us": float(r["react_us"]), "gap_us": float(r["gap_us"]), "react_cv": float(r["react_cv"])}


def within(fit: pd.DataFrame, point: dict[str, float], table: str, tol: float = 0.10) -> tuple[int, int]:
    """(rates within ``tol`` of the measured W, rates) of ``table`` at grid point ``point``."""
    d = fit[(fit["table"].astype(str) == table) & (fit["react_us"] == point["react_us"])
            & (fit["gap_us"] == point["gap_us"]) & (fit["react_cv"] == point["react_cv"])]
    d = d[d["seed_set"] == d["seed_set"].min()]     # the first replication (all points have it)
    g = np.abs(d["sim_w_us"] / d["measured_w_us"] - 1)
    return int((g <= tol).sum()), len(d)


def summary_text(fit: pd.DataFrame) -> str:
    s = scores(fit)
    lines = ["Cross-validation (fit = lowest RMS ln(sim/measured) W on one table, test on the other):", ""]
    lines.append("| fitted on | react_us | gap_us | react_cv | score 4.4 | score 4.5 | within 10 % (4.4) | within 10 % (4.5) |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for tab in ("4.4", "4.5"):
        b = best(fit, tab)
        r = s[(s["react_us"] == b["react_us"]) & (s["gap_us"] == b["gap_us"]) & (s["react_cv"] == b["react_cv"])].iloc[0]
        w44, n44 = within(fit, b, "4.4")
        w45, n45 = within(fit, b, "4.5")
        lines.append(f"| {tab} | {b['react_us']:.0f} | {b['gap_us']:.0f} | {b['react_cv']:.2f} | "
                     f"{r['score_4.4']:.3f} | {r['score_4.5']:.3f} | {w44}/{n44} | {w45}/{n45} |")
    old = {"react_us": 1000.0, "gap_us": 1000.0, "react_cv": 1.0}
    if ((s["react_us"] == 1000) & (s["gap_us"] == 1000) & (s["react_cv"] == 1.0)).any():
        r = s[(s["react_us"] == 1000) & (s["gap_us"] == 1000) & (s["react_cv"] == 1.0)].iloc[0]
        lines.append(f"| (old default) | 1000 | 1000 | 1.00 | {r['score_4.4']:.3f} | {r['score_4.5']:.3f} | "
                     f"{within(fit, old, '4.4')[0]}/{within(fit, old, '4.4')[1]} | "
                     f"{within(fit, old, '4.5')[0]}/{within(fit, old, '4.5')[1]} |")
    return "\n".join(lines)


def reading_text(fit: pd.DataFrame) -> str:
    """What the grid says, every number computed from ``fit``."""
    s = scores(fit)
    ref = s[s["n_4.4"] == s["n_4.4"].max()]["score_4.4"]
    f = fit[(fit["table"].astype(str) == "4.5") & (fit["seed_set"] == fit["seed_set"].min())]
    ok = (f["sim_w_us"] / f["measured_w_us"] - 1).abs() <= 0.10
    most = int(ok.groupby([f["react_us"], f["gap_us"], f["react_cv"]]).sum().max())
    hi = f[f["rate_cps"] >= 800]
    best_hi = float((hi["sim_w_us"] / hi["measured_w_us"]).max())
    r = f[f["rate_cps"] >= 600]
    ratio = r["measured_w_us"] / r["sim_w_us"]
    b = best(fit, "4.4")
    chosen = s[(s["react_us"] == b["react_us"]) & (s["gap_us"] == b["gap_us"]) & (s["react_cv"] == b["react_cv"])]
    old = s[(s["react_us"] == 1000) & (s["gap_us"] == 1000) & (s["react_cv"] == 1.0)]
    txt = (f"Reading: the refined candidates on Table 4.4 score {ref.min():.2f}-{ref.max():.2f}, so Table 4.4 "
           f"hardly separates them; the best ones have reaction times with little spread (then the 180, "
           f"200 and ACK arrive as delayed copies of the proxy's own departures, a stream smoother than "
           f"Poisson).  No grid point gets more than {most} of the {f['rate_cps'].nunique()} rates of "
           f"Table 4.5 within 10 %, none at 800-900 calls/s (best {100 * best_hi:.0f} % of the measured W): "
           f"with deterministic calls the measured W at 600-900 calls/s exceeds the simulated one at "
           f"{int((ratio > 1).sum())} of the {len(ratio)} (grid point, rate) pairs, by a median factor of "
           f"{ratio.median():.1f} (quartiles {ratio.quantile(0.25):.1f} and {ratio.quantile(0.75):.1f}); a "
           f"spread-free choice also makes the low rates worse, through a resonance of the fixed 250 ms "
           f"holding time with the fixed call spacing (a BYE meets a later call's ACK).")
    if len(chosen) and len(old):
        txt += (f"  The out-of-sample score of the Table 4.4 choice on Table 4.5 "
                f"({chosen['score_4.5'].iloc[0]:.2f}) is to be compared with the old default's "
                f"({old['score_4.5'].iloc[0]:.2f}).")
    return txt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sipperf.sim.calibration.fit_waits", description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=12000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workers", type=int, default=0, help="0 = run in this process")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    t = time.perf_counter()
    fit = fit_grid(a.calls, a.seed, workers=a.workers)
    fit = refine(fit, "4.4", calls=a.calls)
    text = ("Fit of the UA reaction times (free parameters, not reported by the thesis) to the mean "
            "waiting times of Table 4.4, tested on Table 4.5, and the reverse; module "
            "`src/sipperf/sim/fit_waits.py` (read its docstring for the procedure).  Grid: "
            + ", ".join(f"{k} in {v}" for k, v in GRID.items())
            + f"; calls per run {a.calls} (x2 at 600-700, x3 at 800-900 calls/s), seed {a.seed} + rate index "
            f"(common random numbers across grid points; column `seed_set`).  Score = RMS of "
            f"ln(sim/measured W) over the rates with measured W >= {W_MIN_US} us.  The 8 best points on "
            f"Table 4.4 were re-run with two more seed sets (Table 4.4 only) and are ranked by their mean "
            f"score; the within-10 % counts use the first seed set.\n\n" + summary_text(fit)
            + "\n\nThe chosen values (fitted on Table 4.4) are `REACT_FIT` in `src/sipperf/sim/params.py`.\n\n"
            + reading_text(fit))
    write_with_provenance(fit, a.out, text, f"python -m sipperf.sim.calibration.fit_waits --calls {a.calls}")
    print(summary_text(fit))
    print(f"{len(fit)} rows in {time.perf_counter() - t:.0f} s -> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
