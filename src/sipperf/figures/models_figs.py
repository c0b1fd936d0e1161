"""Curves and tables for the model chapters of the book (ch. 5–8).

Each function returns plain numpy arrays or pandas frames built from :mod:`sipperf.models`,
:mod:`sipperf.thesis` and :mod:`sipperf.audit`; the chapters only choose what to plot.  Slider
figures call the ``*_curves`` functions once per slider value (see :func:`sipperf.viz.slider_figure`).
Nothing here hard-codes a thesis number: every input is read from ``datasets/thesis``.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from sipperf import audit, thesis
from sipperf.models.capacity import capacity, traffic_requests_per_s
from sipperf.models.mg1 import ALPHA_BREAKPOINTS, K_COPY_US, mg1_wait
from sipperf.models.mmck import mmck
from sipperf.models.overhead import beta

__all__ = [
    "TABLE_FOR_ARRIVALS", "table43_overall", "scaled_alpha_breakpoints", "scaled_alpha",
    "implied_t_sip", "median_scv", "mg1_w_curve", "mg1_w_curves", "measured_w_points",
    "ex1_reference_us", "drop_curves", "measured_drop_points", "comparison", "gain_curves",
    "servers_needed", "servers_curves", "pdr_from_counts", "COMPARISON_SOURCES", "comparison_from_counts",
    "gain_curves_with_counts",
]

_F = NDArray[np.float64]

#: Table holding the M/G/1 comparison for each arrival process (thesis ch. 4)
TABLE_FOR_ARRIVALS = {"poisson": "4.4", "deterministic": "4.5"}


# --------------------------------------------------------------------------- ch. 5: M/G/1

def table43_overall() -> dict[str, float]:
    """Overall means of Table 4.3 (µs): ``k_stack_us``, ``k_sockq_s_base_us``, ``k_snd_us``."""
    df = thesis.load_table("4.3")
    allrows = df[df["msg_type"] == "all"].set_index("quantity")["value"]
    return {q: float(allrows[q]) for q in ("k_stack_us", "k_sockq_s_base_us", "k_snd_us")}


def scaled_alpha_breakpoints(scale: float, arrivals: str = "poisson") -> tuple[_F, _F]:
    """α breakpoints with the overhead above 1 multiplied by ``scale``: α_s = 1 + s(α − 1).

    ``scale = 1`` is the thesis's curve, ``scale = 0`` removes the interrupt overhead.
    """
    if scale < 0:
        raise ValueError("scale must be >= 0")
    xp, fp = (np.asarray(v, dtype=float) for v in ALPHA_BREAKPOINTS[arrivals])
    return xp, 1.0 + scale * (fp - 1.0)


def scaled_alpha(lam_pps: ArrayLike, scale: float, arrivals: str = "poisson") -> _F:
    """α_s(λ) of :func:`scaled_alpha_breakpoints`, flat beyond the last breakpoint."""
    xp, fp = scaled_alpha_breakpoints(scale, arrivals)
    return np.interp(np.asarray(lam_pps, dtype=float), xp, fp)


def implied_t_sip(arrivals: str = "poisson") -> tuple[_F, _F]:
    """(λ pkt/s, mean T_sip µs) implied by the printed E[X] of Table 4.4/4.5 (see
    :func:`sipperf.audit.implied_t_sip`), sorted by λ."""
    tid = TABLE_FOR_ARRIVALS[arrivals]
    t = audit.implied_t_sip()
    t = t[t["table"] == tid].sort_values("cps")
    return 6.0 * t["cps"].to_numpy(float), t["t_sip_implied_us"].to_numpy(float)


def median_scv(arrivals: str = "poisson") -> float:
    """Median SCV E[X²]/E[X]² − 1 implied by the printed W (model) of Table 4.4/4.5."""
    chk = audit.w_model_check(TABLE_FOR_ARRIVALS[arrivals])
    return float(np.nanmedian(chk["scv_implied"]))


def mg1_w_curve(lam_pps: ArrayLike, alpha_scale: float = 1.0, arrivals: str = "poisson",
                scv: float | None = None) -> _F:
    """Model W(λ) in µs for the thesis's single-thread proxy, NaN where ρ ≥ 1.

    E[X](λ) = α_s(λ)·K^{s,base}_sockq + K_snd + K_copy + T_sip(λ) (eq. 4.1, 4.4) with the Table 4.3
    overall means, T_sip(λ) interpolated between the values the printed E[X] imply, and
    E[X²] = (1 + scv)·E[X]² (``scv`` defaults to :func:`median_scv`); W from eq. 4.2.
    """
    lam = np.asarray(lam_pps, dtype=float)
    m = table43_overall()
    lam_pts, tsip_pts = implied_t_sip(arrivals)
    tsip = np.interp(lam, lam_pts, tsip_pts)
    ex_us = scaled_alpha(lam, alpha_scale, arrivals) * m["k_sockq_s_base_us"] + m["k_snd_us"] + K_COPY_US + tsip
    s = median_scv(arrivals) if scv is None else scv
    r = mg1_wait(lam, ex_us * 1e-6, (1.0 + s) * (ex_us * 1e-6) ** 2)
    return np.where(r.stable, r.W_s * 1e6, np.nan)


def mg1_w_curves(lam_pps: ArrayLike, alpha_scale: float) -> dict[str, _F]:
    """Slider curves for ch. 5: model W(λ) for Poisson and deterministic arrivals."""
    return {"model W, Poisson": mg1_w_curve(lam_pps, alpha_scale, "poisson"),
            "model W, deterministic": mg1_w_curve(lam_pps, alpha_scale, "deterministic")}


def measured_w_points(arrivals: str = "poisson") -> tuple[_F, _F]:
    """(λ, measured W = K^w_sockq µs) printed in Table 4.4/4.5."""
    w = thesis.wide(TABLE_FOR_ARRIVALS[arrivals]).sort_values("cps")
    return w["lam_pps"].to_numpy(float), w["w_measured_us"].to_numpy(float)


# --------------------------------------------------------------------------- ch. 6: M/M/c/K

def ex1_reference_us(cps: int = 2000) -> float:
    """Single-thread mean service time E[X_1] (µs) printed in Table 5.1 at ``cps`` calls/s."""
    w = thesis.wide("5.1").set_index("cps")
    return float(w.loc[cps, "ex_us"])


def drop_curves(cps: ArrayLike, c: int, ex1_us: float, K: float = 200) -> dict[str, _F]:
    """M/M/c/K drop probability over call rates (λ = 6 × cps) with E[X_c] = β·c·E[X_1] (eq. 5.5).

    Two curves: β from eq. 5.6 floored at 1 (eq. 5.6 falls below 1, even below 0, at low rates
    and few threads), and β = 1 (threads add no overhead: c servers each c times slower).
    """
    lam = 6.0 * np.asarray(cps, dtype=float)
    b56 = beta(lam, c, clip_min=1.0) if c > 1 else np.ones_like(lam)
    out = {}
    for name, b in (("M/M/c/K, β from eq. 5.6 (≥ 1)", b56), ("M/M/c/K, β = 1", np.ones_like(lam))):
        mu = 1.0 / (b * c * ex1_us * 1e-6)
        out[name] = mmck(lam, mu, c, K).p_block
    return out


def measured_drop_points() -> dict[str, tuple[_F, _F]]:
    """Measured drop rate (RCVErrors / TotalMessages) of Tables 5.1–5.6, keyed by thread count."""
    out = {}
    for tid in ("5.1", "5.2", "5.3", "5.4", "5.5", "5.6"):
        w = thesis.wide(tid).sort_values("cps")
        c = int(w["threads"].iloc[0])
        out[f"measured, c = {c}"] = (w["cps"].to_numpy(float),
                                     (w["rcv_errors"] / w["total_messages"]).to_numpy(float))
    return out


# --------------------------------------------------------------------------- ch. 7: scheduler

def comparison(tid: str) -> pd.DataFrame:
    """One comparison table (6.3/6.6/6.9/7.3/7.6/7.9) with the printed and recomputed % lower.

    Columns: threads, cps, pdr/k_rcv baseline and enhanced, printed and recomputed reductions.
    """
    w = thesis.wide(tid).sort_values("threads").reset_index(drop=True)
    out = pd.DataFrame({"threads": w["threads"].astype(int), "cps": w["cps"].astype(int)})
    for q, label in (("pdr", "PDR"), ("k_rcv_us", "K_rcv (µs)")):
        b, e = w[f"{q}_baseline"], w[f"{q}_enhanced"]
        out[f"{label} baseline"] = b
        out[f"{label} enhanced"] = e
        pct = "pdr_pct_lower" if q == "pdr" else "k_rcv_pct_lower"
        out[f"{label} % lower, printed"] = w[pct] if pct in w else np.nan
        out[f"{label} % lower, recomputed"] = 100.0 * (b - e) / b
    return out


#: Measured tables (baseline, enhanced) behind each comparison table of thesis ch. 6–7
COMPARISON_SOURCES = {"6.3": ("6.1", "6.2"), "6.6": ("6.4", "6.5"), "6.9": ("6.7", "6.8"),
                      "7.3": ("7.1", "7.2"), "7.6": ("7.4", "7.5"), "7.9": ("7.7", "7.8")}


def comparison_from_counts(tid: str) -> pd.DataFrame:
    """The PDR comparison of table ``tid`` (6.3/6.6/6.9/7.3/7.6/7.9) recomputed from the drop and
    message counts of its two measurement tables (:data:`COMPARISON_SOURCES`), at the same thread
    count and call rate.  NaN where a measurement table does not print that load.

    Columns: threads, cps, ``PDR baseline`` / ``PDR enhanced`` (from counts) and
    ``PDR % lower, from counts`` = 100·(baseline − enhanced)/baseline (negative: enhanced worse).
    """
    base_t, enh_t = COMPARISON_SOURCES[tid]
    c = thesis.wide(tid).sort_values("threads").reset_index(drop=True)
    out = pd.DataFrame({"threads": c["threads"].astype(int), "cps": c["cps"].astype(int)})
    for label, t in (("baseline", base_t), ("enhanced", enh_t)):
        w = thesis.wide(t)
        pdr = pd.Series(pdr_from_counts(w).to_numpy(), index=pd.MultiIndex.from_arrays(
            [w["threads"].astype(int), w["cps"].astype(int)]))
        out[f"PDR {label}"] = [float(pdr.get((th, cp), np.nan)) for th, cp in zip(out["threads"], out["cps"])]
    out["PDR % lower, from counts"] = 100.0 * (out["PDR baseline"] - out["PDR enhanced"]) / out["PDR baseline"]
    return out


def gain_curves(tid: str) -> dict[str, _F]:
    """Recomputed % reductions (enhanced vs baseline) of one comparison table, by thread count."""
    c = comparison(tid)
    return {"PDR, % lower": c["PDR % lower, recomputed"].to_numpy(float),
            "K_rcv, % lower": c["K_rcv (µs) % lower, recomputed"].to_numpy(float)}


def gain_curves_with_counts(tid: str) -> dict[str, _F]:
    """:func:`gain_curves` plus the PDR reduction recomputed from the measurement tables' counts
    (:func:`comparison_from_counts`; NaN where they do not print the load)."""
    return {**gain_curves(tid),
            "PDR, % lower, from counts": comparison_from_counts(tid)["PDR % lower, from counts"].to_numpy(float)}


# --------------------------------------------------------------------------- ch. 8: capacity

def servers_needed(subscribers: ArrayLike, p: int, c: int, *, c11_cps: float = 1000.0,
                   headroom: float = 0.8, erlang_per_sub: float = 0.1, holding_s: float = 180.0,
                   reg_interval_s: float = 3600.0, messages_per_call: int = 6) -> _F:
    """Servers needed for a subscriber population (NaN if p > c).

    Offered SIP messages/s from the traffic model of seed ``tcp``
    (:func:`~sipperf.models.capacity.traffic_requests_per_s`), converted to *call equivalents*
    (messages / ``messages_per_call``, i.e. every message costs the same), divided by the usable
    capacity ``headroom`` × C_{p,c} (eq. 7.1) of one server, rounded up.
    """
    subs = np.atleast_1d(np.asarray(subscribers, dtype=float))
    if p > c:
        return np.full(subs.shape, np.nan)
    cap = headroom * capacity(p, c, c11_cps)
    out = np.empty(subs.shape)
    for i, s in enumerate(subs):
        load = traffic_requests_per_s(s, erlang_per_sub, holding_s, reg_interval_s)
        out[i] = math.ceil(load.packets_per_s / messages_per_call / cap) if s > 0 else 0
    return out


def servers_curves(subscribers: ArrayLike, c: int, **kw) -> dict[str, _F]:
    """Slider curves for ch. 8: servers needed with c cores (the book's m) on one processor and on two."""
    return {"one processor (T = m + 2)": servers_needed(subscribers, 1, c, **kw),
            "two processors (T = m)": servers_needed(subscribers, 2, c, **kw)}


#: Enhanced-mode table of each core count (thesis ch. 6 for 1 core, ch. 7 for 2/4/6 cores)
ENHANCED_TABLE = {1: "6.2", 2: "7.2", 4: "7.5", 6: "7.8"}
#: Processors spanned by the cores of each configuration (thesis Figure 7.1: two quad-core Xeons)
PROCESSORS = {1: 1, 2: 1, 4: 1, 6: 2}


def min_granularity_check() -> pd.DataFrame:
    """sched_min_granularity_ns the thesis used vs :func:`~sipperf.models.scheduler.enhanced_recipe`
    fed with the mean T_sip at the last load with PDR ≤ 1 % (from the counts, :func:`pdr_from_counts`)
    of the enhanced-mode table."""
    from sipperf.models.scheduler import THESIS_MIN_GRANULARITY_NS, enhanced_recipe

    rows = []
    for (ncpus, threads), used in THESIS_MIN_GRANULARITY_NS.items():
        w = thesis.wide(ENHANCED_TABLE[ncpus])
        w = w[(w["threads"] == threads) & (pdr_from_counts(w) <= 0.01)].sort_values("cps")
        if w.empty:
            continue
        last = w.iloc[-1]
        rec = enhanced_recipe(ncpus, PROCESSORS[ncpus], threads, float(last["t_sip_us"]) * 1e-6)
        rows.append({"cores": ncpus, "threads": threads, "table": ENHANCED_TABLE[ncpus],
                     "cps": int(last["cps"]), "t_sip_us": float(last["t_sip_us"]),
                     "thesis_ns": used, "rule_ns": rec.sched_min_granularity_ns,
                     "agree": used == rec.sched_min_granularity_ns})
    return pd.DataFrame(rows)


#: Measured-performance tables by (cores, mode), thesis ch. 6 (1 core, 1 % PDR) and ch. 7
MEASURED_TABLES = {(1, "baseline"): "6.1", (1, "enhanced"): "6.2", (2, "baseline"): "7.1",
                   (2, "enhanced"): "7.2", (4, "baseline"): "7.4", (4, "enhanced"): "7.5",
                   (6, "baseline"): "7.7", (6, "enhanced"): "7.8"}


def pdr_from_counts(w: pd.DataFrame) -> pd.Series:
    """PDR of each row of a wide ch. 6/7 measurement table recomputed from its counts,
    call-setup drops / call-setup messages (the definition the printed PDR follows).  The printed
    PDR is rounded: Table 7.1 prints 0.0100 for 3364/335899 = 1.0015 %, the first load of that
    configuration above 1 % (bold in the thesis)."""
    return w["call_setup_drops"] / w["call_setup_messages"]


def highest_stable_load(pdr_max: float = 0.01) -> pd.DataFrame:
    """Highest printed call rate whose PDR, recomputed from the counts (:func:`pdr_from_counts`),
    is ≤ ``pdr_max``, by cores, threads and scheduler mode.

    Each table prints only the two loads around its 1 % crossing, so this is the last load
    below the crossing (a lower bound on the true threshold, at 200 calls/s resolution).
    """
    rows = []
    for (cores, mode), tid in MEASURED_TABLES.items():
        w = thesis.wide(tid)
        ok = w[pdr_from_counts(w) <= pdr_max].groupby("threads")["cps"].max()
        for th, cps in ok.items():
            rows.append({"cores": cores, "threads": int(th), "mode": mode, "cps": int(cps)})
    out = pd.DataFrame(rows).pivot_table(index=["cores", "threads"], columns="mode", values="cps")
    out.columns.name = None
    return out.reset_index()
