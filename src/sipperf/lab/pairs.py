"""Paired comparisons of two set-ups: the tracer on and off, loopback and network namespaces.

* :func:`paired_difference` -- replicated pairs (the ``netns`` series: each pair shares a seed,
  the order alternates): the mean of the within-pair differences with Student's t interval on
  ``n - 1`` degrees of freedom (the paired t interval).
* :func:`ci_difference` -- one point against one point, each with its own batch-means 95 %
  half-width (the tracer on/off pair of a series): the difference with the half-width
  ``sqrt(hw_a^2 + hw_b^2)`` (independent runs, normal approximation).
* :func:`tracer_pairs` and :func:`netns_pairs` -- the same read off a recording's ``runs.csv``
  (:func:`sipperf.ingest.lab_runs.dataset.load_points`).
* :func:`treatment_effects` -- the ``sched`` series: every scheduler tuning against the default,
  quiet and under competing load, on the mean sojourn and on the drop rate
  (:func:`ci_difference` on each).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats as sps


def paired_difference(a, b, level: float = 0.95) -> dict:
    """Mean of ``a - b`` over pairs and its t interval (None below two pairs)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    d = a - b
    d = d[np.isfinite(d)]
    n = len(d)
    out = {"n": n, "diff": float(d.mean()) if n else float("nan"),
           "rel": float(d.mean() / np.mean(b[np.isfinite(b)])) if n else float("nan"),
           "low": None, "high": None, "level": level}
    if n >= 2:
        half = float(sps.t.ppf(0.5 + level / 2, n - 1) * d.std(ddof=1) / np.sqrt(n))
        out["low"], out["high"] = out["diff"] - half, out["diff"] + half
        out["shown"] = bool(out["low"] > 0 or out["high"] < 0)
    else:
        out["shown"] = None
    return out


def ci_difference(a: float, hw_a: float, b: float, hw_b: float) -> dict:
    """``a - b`` of two independent estimates with 95 % half-widths ``hw_a``, ``hw_b``."""
    d = a - b
    hw = float(np.hypot(hw_a, hw_b)) if np.isfinite(hw_a) and np.isfinite(hw_b) else float("nan")
    return {"diff": d, "half_width": hw, "low": d - hw, "high": d + hw,
            "ratio": a / b if b else float("nan"),
            "shown": bool(np.isfinite(hw) and (d - hw > 0 or d + hw < 0))}


def tracer_pairs(points: pd.DataFrame, value: str = "sojourn_mean_us") -> pd.DataFrame:
    """One row per ``tracer_pair``: the point with the tracer on (``map``) against its twin with
    it off, on ``value`` (and its ``..._ci_hw_us`` where there is one) and on the proxy's CPU
    per call."""
    if "tracer_pair" not in points:
        return pd.DataFrame()
    rows = []
    for name, g in points[points["tracer_pair"].notna()].groupby("tracer_pair"):
        on, off = g[g["tracer"] != "none"], g[g["tracer"] == "none"]
        if on.empty or off.empty:
            continue
        a, b = on.iloc[0], off.iloc[0]
        hw = value.replace("_mean_us", "_ci_hw_us")
        r = {"pair": name, "series": a["series"], "rate_cps": a["rate_cps"], "workers": a["workers"],
             "tracer_on": a["tracer"], f"{value}_on": a[value], f"{value}_off": b[value]}
        c = ci_difference(a[value], a.get(hw, np.nan), b[value], b.get(hw, np.nan))
        r.update({"diff": c["diff"], "low": c["low"], "high": c["high"], "ratio": c["ratio"],
                  "shown": c["shown"]})
        if "proxy_cpu_us_per_call" in g:
            r["cpu_us_per_call_on"] = a["proxy_cpu_us_per_call"]
            r["cpu_us_per_call_off"] = b["proxy_cpu_us_per_call"]
        if "pdr" in g:
            r["pdr_on"], r["pdr_off"] = a["pdr"], b["pdr"]
        rows.append(r)
    return pd.DataFrame(rows)


def netns_pairs(points: pd.DataFrame, values=("sojourn_mean_us", "wire_mean_us", "proxy_cpu_us_per_call"),
                level: float = 0.95) -> dict:
    """The ``netns`` series: per value, namespaces minus loopback over the pairs
    (:func:`paired_difference`)."""
    d = points[points["series"] == "netns"] if "series" in points else pd.DataFrame()
    if d.empty or "network" not in d:
        return {}
    w = d.pivot_table(index="pair", columns="network", values=list(values), aggfunc="first")
    out = {}
    for v in values:
        if (v, "netns") in w and (v, "loopback") in w:
            out[v] = paired_difference(w[(v, "netns")], w[(v, "loopback")], level)
    return out


def treatment_effects(points: pd.DataFrame, baseline: str = "default", tracer: str = "map") -> pd.DataFrame:
    """The ``sched`` series as differences from ``baseline``: one row per (condition, treatment)
    with condition ``quiet`` (no competing load) or ``load`` (``background_hogs`` > 0), the mean
    sojourn and drop rate (in %) with their 95 % half-widths, and each one's difference from the
    baseline of the same condition (:func:`ci_difference`; ``*_shown`` says whether the interval
    excludes zero).  Only points with the tracer ``tracer`` (the series' own setting; the tracer-off
    twin is :func:`tracer_pairs`' business) and not generator-bound enter; a condition without its
    baseline gives no rows."""
    need = {"series", "treatment", "background_hogs", "sojourn_mean_us", "sojourn_ci_hw_us", "pdr"}
    if points.empty or not need <= set(points.columns):
        return pd.DataFrame()
    d = points[(points["series"] == "sched") & points["treatment"].notna()].copy()
    if "tracer" in d:
        d = d[d["tracer"] == tracer]
    if "generator_bound" in d:
        d = d[~d["generator_bound"].fillna(False).astype(bool)]
    d["condition"] = np.where(d["background_hogs"].fillna(0) > 0, "load", "quiet")
    d["drops_pct"] = 100 * d["pdr"]
    d["drops_ci_hw_pct"] = 100 * d["pdr_ci_hw"] if "pdr_ci_hw" in d else np.nan
    rows = []
    for cond, g in d.groupby("condition", sort=False):
        g = g.set_index("treatment")
        if baseline not in g.index:
            continue
        b = g.loc[baseline]
        for name, r in g.iterrows():
            row = {"condition": cond, "treatment": name, "treatment_what": r.get("treatment_what"),
                   "rate_cps": r.get("rate_cps"), "stop_reason": r.get("stop_reason"),
                   "calls": r.get("calls_offered")}
            for v, hw in (("sojourn_mean_us", "sojourn_ci_hw_us"), ("drops_pct", "drops_ci_hw_pct")):
                row[v], row[hw] = float(r[v]), float(r[hw])
                c = ci_difference(float(r[v]), float(r[hw]), float(b[v]), float(b[hw]))
                key = "sojourn" if v.startswith("sojourn") else "drops"
                row.update({f"{key}_diff": c["diff"], f"{key}_low": c["low"], f"{key}_high": c["high"],
                            f"{key}_shown": c["shown"] if name != baseline else False})
            rows.append(row)
    return pd.DataFrame(rows)
