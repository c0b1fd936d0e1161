"""Figure helpers for the simulation chapter (ch. 9): the sweep, validation and calibration tables."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["PRECOMPUTED", "load_precomputed", "sweep_curves", "calibration_view", "knee_cps", "twin_test",
           "twin_speeds", "calibration_by_role"]

PRECOMPUTED = Path(__file__).resolve().parents[3] / "datasets" / "precomputed"


def load_precomputed(name: str) -> pd.DataFrame:
    """``datasets/precomputed/sim_<name>.csv`` (``sweep``, ``validation``, ``calibration``,
    ``calibration.theta_fit``, ``twin_check``, ``overload``, ...)."""
    return pd.read_csv(PRECOMPUTED / f"sim_{name}.csv")


def sweep_curves(sweep: pd.DataFrame, threads: int, cores: int, column: str = "drop_rate"
                 ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{scheduler mode: (rates, mean of ``column`` over replications)} at one (threads, cores)."""
    d = sweep[(sweep["threads"] == threads) & (sweep["cores"] == cores)]
    out = {}
    for mode, g in d.groupby("sched_mode", sort=True):
        m = g.groupby("rate_cps")[column].mean()
        out[str(mode)] = (m.index.to_numpy(dtype=float), m.to_numpy(dtype=float))
    return out


def knee_cps(rates: np.ndarray, drop_rate: np.ndarray, level: float = 0.01) -> float:
    """Call rate where the drop rate first crosses ``level`` (linear interpolation); NaN if never."""
    r = np.asarray(rates, float)
    p = np.asarray(drop_rate, float)
    above = np.flatnonzero(p >= level)
    if not len(above):
        return float("nan")
    i = int(above[0])
    if i == 0:
        return float(r[0])
    return float(r[i - 1] + (level - p[i - 1]) * (r[i] - r[i - 1]) / (p[i] - p[i - 1]))


def calibration_view(cal: pd.DataFrame) -> pd.DataFrame:
    """Calibration rows grouped for the book: one row per (table group), with the worst gap and
    how many points are within 10 %."""
    g = cal.assign(group=cal["table"].astype(str).str.split(".").str[0])
    rows = []
    for (grp, q), d in g.groupby(["group", "quantity"], sort=True):
        rows.append({"thesis tables": f"{d['table'].astype(str).min()}–{d['table'].astype(str).max()}",
                     "quantity": q, "points": len(d),
                     "within 10 %": int(d["within_10pct"].sum()),
                     "median |gap| (%)": float(np.median(np.abs(d["gap_pct"]))),
                     "worst gap (%)": float(d.loc[d["gap_pct"].abs().idxmax(), "gap_pct"])})
    return pd.DataFrame(rows)


def twin_test(twin: pd.DataFrame) -> pd.DataFrame:
    """The statistical check of the fast twin against the SimPy model (Welch per case and metric,
    Holm over all tests): :func:`sipperf.sim.calibration.twin_check.twin_test` on the stored replications."""
    from sipperf.sim.calibration.twin_check import twin_test as _tt

    return _tt(twin)


def twin_speeds(twin: pd.DataFrame) -> pd.Series:
    """Median messages per CPU second of each engine's event loop over the twin-check grid."""
    from sipperf.sim.calibration.twin_check import speeds

    return speeds(twin)


#: order and reader's labels of the calibration roles (``fit_role`` in sim_calibration.csv)
ROLES = {
    "fitted (reaction times)": "waits, reaction times fitted here",
    "out of sample": "waits, out of sample",
    "service time from this table": "knee, service time from this table",
    "thesis regression (eq. 5.6)": "knees, the study's β regression",
    "fitted (thread overhead)": "knees, θ fitted here",
    "fitted (contention, best knee)": "knees, κ fitted here",
    "prediction": "knees, predictions",
}


def calibration_by_role(cal: pd.DataFrame) -> pd.DataFrame:
    """Waiting-time and knee rows of the calibration grouped by the role they played in the fit:
    tables, points, how many within 10 %, median |gap| and worst gap (%)."""
    d = cal[~cal["quantity"].str.startswith("socket")]
    rows = []
    for role, label in ROLES.items():
        g = d[d["fit_role"].astype(str) == role]
        if g.empty:
            continue
        tabs = sorted(g["table"].astype(str).unique(), key=lambda t: tuple(int(x) for x in t.split(".")))
        rows.append({"role": label, "tables": ", ".join(tabs), "points": len(g),
                     "within": int(g["within_10pct"].sum()),
                     "median": float(np.median(np.abs(g["gap_pct"]))),
                     "worst": float(g.loc[g["gap_pct"].abs().idxmax(), "gap_pct"])})
    return pd.DataFrame(rows)
