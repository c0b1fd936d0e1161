"""Reproduction audit of the thesis's tables (seed 000): recompute every model and arithmetic cell.

Every cell of ``datasets/thesis`` whose role is *model* or *derived* (see :mod:`sipperf.thesis`)
is recomputed from the same table's own printed inputs.  The audit separates two kinds of cell,
because they deserve different standards:

**arithmetic** — plain arithmetic of other printed cells.  It must hold *exactly*, up to the
printed precision: the recomputed value may differ from the printed one by at most one unit of
the printed last digit (the thesis both rounds and truncates) plus what the rounding of the
printed inputs can move the result (half a unit of each input's last digit, propagated to first
order).  Anything beyond is a ``mismatch``: a wrong cell, however small the relative error.

=============================  ==========================================================
cell                           recomputed as
=============================  ==========================================================
λ (pkt/s), Tables 4–7          6 × call rate (six SIP messages per call)
ρ, Tables 4.4/4.5/5.1          λ·E[X] from the printed λ and E[X]
E[X], Tables 5.2–5.6           eq. 5.5 as printed: β × printed E[X_c] (= c·E[X_1])
drop rate, 5.1–5.6             RCVErrors / TotalMessages
PDR, Tables 6.x/7.x            call-setup drops / call-setup messages
%Lower, Tables 6.3–7.9         100·(baseline − enhanced)/baseline of the *printed* values (the
                               thesis computed them so: all but four cells agree to one unit)
=============================  ==========================================================

**model** — the output of a model whose inputs are not all printed.  Verdict ``match`` within one
unit of the last printed digit or 1 %, ``close`` within 5 %, ``mismatch`` beyond;
``unstable-agree`` when the thesis prints N/A and ρ ≥ 1.

=============================  ==========================================================
α(λ), Tables 4.4/4.5           :func:`sipperf.models.mg1.alpha` (thesis §4.3.1)
W (model), Tables 4.4/4.5/5.1  eq. 4.2 with E[X²] = (1 + s)·E[X]²; s is the median squared
                               coefficient of variation implied by the *other* stable cells of
                               the same table (leave-one-out: E[X²] per type is not printed)
β, Tables 5.2–5.6              eq. 5.6, :func:`sipperf.models.overhead.beta`
drop prob. (model), 5.2–5.6    M/M/c/K P_B (eq. 5.3/5.4), :func:`sipperf.models.mmck.mmck`,
                               λ and E[X] as printed, c threads, K = 200
=============================  ==========================================================

Plus cross-checks (kind ``cross``, same verdicts as model cells) of measured/input cells: overall
means of Tables 4.1–4.3 against the mean of the six message types, β = 1 in Table 5.1, α of
Table 5.1 against the ch. 4 Poisson α curve, the printed E[X_c] = c·E[X_1] against Table 5.1
(exactly: some printed Table 5.1 E[X] times c), and
Tables 4.4/4.5 "W (measured)" against ``K_rcv`` of Tables 4.1/4.2 minus the modelled service
components.

Beyond single cells: :func:`errata` (one row per root cause, with the symptoms it explains),
:func:`text_claims` (numbers the thesis's prose states about its own tables),
:func:`recomputed_gains` (the baseline-vs-enhanced comparisons with every PDR recomputed),
:func:`same_load_comparisons` (every load both modes print, against "the enhanced mode always
improves"), :func:`copied_columns` (a column printed in another's place), :func:`beta_trend`
(how the printed β moves with λ), :func:`drop_model_cells` (model drop probabilities the
table's own inputs do not give) and :func:`c11_check` (§7.6's C₁,₁ against the one-thread tables).
For the book's chapters 7–8: :func:`comparison` (a comparison table's "% lower" recomputed from
its own row), :func:`comparison_from_counts` (the same from the counts of the measurement tables
behind it) and :func:`highest_stable_load` (the highest printed load with PDR ≤ 1 %).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from sipperf import thesis
from sipperf.models.mg1 import alpha as alpha_fn
from sipperf.models.mmck import mmck
from sipperf.models.overhead import beta as beta_eq56

__all__ = ["K_THESIS", "K_STACK_US", "K_COPY_US", "KS_BASE_US", "K_SND_US", "AUDIT_COLUMNS", "KINDS", "verdict", "arith_verdict", "audit", "summary", "headline",
           "worst", "w_model_check", "md1_bound_check", "beta_check", "ex1_check", "model_vs_measured",
           "cross_table", "capacity_check", "implied_t_sip", "table_6_5_block", "text_claims",
           "recomputed_gains", "errata", "COMPARISON_SOURCES", "MEASURED_TABLES", "pdr_from_counts",
           "comparison", "comparison_from_counts", "highest_stable_load", "thesis_breakdown",
           "copied_columns", "same_load_comparisons", "beta_trend", "beta_trend_text", "c11_check",
           "drop_model_cells"]

K_THESIS = 200  #: socket-queue capacity (packets in system) used by Tables 5.1–5.6
K_STACK_US = 2.4  #: Table 4.3 overall mean K_stack
K_COPY_US = 2.0  #: §4.2.1: K_copy ≈ 2 µs
KS_BASE_US = float(thesis.load_table("4.3").query(  #: Table 4.3 overall mean K^{s,base}_sockq
    "quantity == 'k_sockq_s_base_us' and msg_type == 'all'")["value"].iloc[0])
K_SND_US = float(thesis.load_table("4.3").query(  #: Table 4.3 overall mean K_snd
    "quantity == 'k_snd_us' and msg_type == 'all'")["value"].iloc[0])
AUDIT_COLUMNS = ["table", "row", "column", "quantity", "kind", "method", "published", "text",
                 "recomputed", "allowed_err", "abs_err", "rel_err", "verdict"]
KINDS = ("arithmetic", "model", "cross")
_MEASURED_SPS = ["6.1", "6.2", "6.4", "6.5", "6.7", "6.8", "7.1", "7.2", "7.4", "7.5", "7.7", "7.8"]
_COMPARISON = ["6.3", "6.6", "6.9", "7.3", "7.6", "7.9"]
#: comparison table -> (baseline source table, enhanced source table), thesis ch. 6–7
COMPARISON_SOURCES = {"6.3": ("6.1", "6.2"), "6.6": ("6.4", "6.5"), "6.9": ("6.7", "6.8"),
                       "7.3": ("7.1", "7.2"), "7.6": ("7.4", "7.5"), "7.9": ("7.7", "7.8")}
_DROP_TABLES = ("5.2", "5.3", "5.4", "5.5", "5.6")


def _ulp(text: str) -> float:
    """One unit of the last printed digit."""
    return 10.0 ** -thesis.decimals(text)


def verdict(published: float, recomputed: float, text: str, *, unstable: bool = False) -> str:
    """Verdict of a *model* or *cross* cell (see the module docstring)."""
    if published is None or pd.isna(published):
        return "unstable-agree" if unstable else "published-missing"
    if recomputed is None or pd.isna(recomputed) or not np.isfinite(recomputed):
        return "unstable-disagree" if unstable or recomputed == np.inf else "not-recomputed"
    diff = abs(recomputed - published)
    rel = diff / abs(published) if published != 0 else (0.0 if diff == 0 else np.inf)
    if diff <= _ulp(text) * (1 + 1e-9) or rel <= 0.01:
        return "match"
    return "close" if rel <= 0.05 else "mismatch"


def arith_verdict(published: float, recomputed: float, text: str, input_err: float = 0.0) -> str:
    """Verdict of an *arithmetic* cell: ``match`` iff |recomputed − printed| ≤ one unit of the
    printed last digit + ``input_err`` (what the rounding of the printed inputs allows)."""
    if published is None or pd.isna(published):
        return "published-missing"
    if recomputed is None or pd.isna(recomputed) or not np.isfinite(recomputed):
        return "not-recomputed"
    allowed = (_ulp(text) + input_err) * (1 + 1e-9)
    return "match" if abs(recomputed - published) <= allowed else "mismatch"


def _rows(tid: str, quantity: str) -> pd.DataFrame:
    df = thesis.load_table(tid)
    return df[df["quantity"] == quantity]


def _cell_row(df: pd.DataFrame, quantity: str, **keys) -> pd.Series:
    m = df["quantity"] == quantity
    for k, v in keys.items():
        m &= df[k] == v
    s = df.loc[m]
    if len(s) != 1:
        raise KeyError((quantity, keys, len(s)))
    return s.iloc[0]


def _cell(df: pd.DataFrame, quantity: str, **keys) -> float:
    return float(_cell_row(df, quantity, **keys)["value"])


def _half(df: pd.DataFrame, quantity: str, **keys) -> float:
    """Half a unit of the printed last digit of a cell: its rounding uncertainty."""
    return 0.5 * _ulp(_cell_row(df, quantity, **keys)["text"])


def _rec(r: pd.Series, kind: str, method: str, recomputed: float, unstable: bool = False,
         input_err: float = 0.0, exact: bool = False) -> dict:
    pub = r["value"]
    rec = float(recomputed) if recomputed is not None else np.nan
    ok = pd.notna(pub) and np.isfinite(rec)
    abs_err = abs(rec - pub) if ok else np.nan
    rel_err = abs_err / abs(pub) if ok and pub != 0 else (0.0 if ok and abs_err == 0 else np.nan)
    if kind == "arithmetic" or exact:
        v = arith_verdict(pub, rec, r["text"], input_err)
        allowed = _ulp(r["text"]) + input_err
    else:
        v = verdict(pub, rec, r["text"], unstable=unstable)
        allowed = max(_ulp(r["text"]), 0.01 * abs(pub)) if pd.notna(pub) else np.nan
    return {"table": r["table"], "row": r["row"], "column": r["column"], "quantity": r["quantity"],
            "kind": kind, "method": method, "published": pub, "text": r["text"], "recomputed": rec,
            "allowed_err": allowed, "abs_err": abs_err, "rel_err": rel_err, "verdict": v}


def _scv_implied(lam: np.ndarray, ex_us: np.ndarray, w_us: np.ndarray) -> np.ndarray:
    """E[X²]/E[X]² − 1 implied by a printed W through eq. 4.2 (NaN where ρ ≥ 1 or W missing)."""
    rho = lam * ex_us * 1e-6
    with np.errstate(invalid="ignore", divide="ignore"):
        ex2 = np.where(rho < 1, 2 * w_us * (1 - rho) / lam * 1e6, np.nan)  # µs²
        return ex2 / ex_us ** 2 - 1


def _md1_us(lam: np.ndarray, ex_us: np.ndarray) -> np.ndarray:
    """M/D/1 wait λE[X]²/(2(1−ρ)) in µs (inf where ρ ≥ 1): the least W any service law allows."""
    rho = lam * ex_us * 1e-6
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(rho < 1, lam * (ex_us * 1e-6) ** 2 / (2 * (1 - rho)) * 1e6, np.inf)


def w_model_check(tid: str) -> pd.DataFrame:
    """Per column of Table 4.4/4.5/5.1: printed λ, E[X], ρ, W (model), the SCV the printed W
    implies, the leave-one-out SCV used to recompute W, and the recomputed W (µs)."""
    w = thesis.wide(tid).sort_values("cps").reset_index(drop=True)
    lam, ex, wp = (w[c].to_numpy(float) for c in ("lam_pps", "ex_us", "w_model_us"))
    scv = _scv_implied(lam, ex, wp)
    loo = np.array([np.nanmedian(np.delete(scv, i)) for i in range(len(scv))])
    rho = lam * ex * 1e-6
    with np.errstate(divide="ignore", invalid="ignore"):
        w_rec = np.where(rho < 1, lam * (1 + loo) * (ex * 1e-6) ** 2 / (2 * (1 - rho)) * 1e6, np.inf)
    return pd.DataFrame({"cps": w["cps"], "lam_pps": lam, "ex_us": ex, "rho_recomputed": rho,
                         "w_model_us": wp, "scv_implied": scv, "scv_used": loo,
                         "w_recomputed_us": w_rec, "w_md1_us": _md1_us(lam, ex)})


def md1_bound_check(tid: str) -> pd.DataFrame:
    """Is a printed W (model) below the M/D/1 bound *whatever* the rounding of the printed E[X]?

    E[X] printed with d decimals lies in [E − h, E + h], h = half a unit of the last digit, and the
    M/D/1 wait increases with E[X], so the smallest bound the printed E[X] allows is at E − h.
    ``below_printed``: W < bound at the printed E[X]; ``below_for_sure``: W + its own half-unit
    < bound at E − h; ``ex_at_bound_us``: the E[X] at which the bound equals the printed W."""
    df = thesis.load_table(tid)
    w = w_model_check(tid)
    rows = []
    for r in w.itertuples():
        if not (r.rho_recomputed < 1) or pd.isna(r.w_model_us):
            continue
        h_ex = _half(df, "ex_us", cps=r.cps)
        h_w = _half(df, "w_model_us", cps=r.cps)
        lo = float(_md1_us(np.array(r.lam_pps), np.array(r.ex_us - h_ex)))
        # E[X] where λE²/(2(1−λE)) = W: the positive root of λE² + 2W λE − 2W = 0 (seconds)
        lam, W = r.lam_pps, r.w_model_us * 1e-6
        e_at = (-2 * W * lam + np.sqrt((2 * W * lam) ** 2 + 8 * lam * W)) / (2 * lam)
        rows.append({"table": tid, "cps": r.cps, "ex_us": r.ex_us, "ex_half_unit_us": h_ex,
                     "w_model_us": r.w_model_us, "w_md1_us": r.w_md1_us, "w_md1_min_us": lo,
                     "below_printed": bool(r.w_model_us < r.w_md1_us),
                     "below_for_sure": bool(r.w_model_us + h_w < lo), "ex_at_bound_us": e_at * 1e6})
    return pd.DataFrame(rows)


def _ex1_table51() -> pd.Series:
    w = thesis.wide("5.1").set_index("cps")
    return w["ex_us"]


def _ex1_for(cps_min: int) -> tuple[int, float]:
    ex1 = _ex1_table51()
    d = np.abs(ex1.index.to_numpy() - cps_min)
    cand = ex1.index.to_numpy()[d == d.min()]
    c = int(cand.max())
    return c, float(ex1.loc[c])


def audit() -> pd.DataFrame:
    """Every recomputable model/arithmetic cell of every thesis table, one row each."""
    out: list[dict] = []
    # --- overall means, Tables 4.1-4.3
    for tid, q_list in (("4.1", ["k_rcv_us"]), ("4.2", ["k_rcv_us"]),
                        ("4.3", ["k_stack_us", "k_sockq_s_base_us", "k_snd_us"])):
        df = thesis.load_table(tid)
        for q in q_list:
            sub = df[df["quantity"] == q]
            for _, r in sub[sub["msg_type"] == "all"].iterrows():
                same = sub[(sub["msg_type"] != "all") & (sub["cps"] == r["cps"])]
                out.append(_rec(r, "cross", "mean of the six message types", same["value"].mean()))
    # --- Tables 4.4 / 4.5
    for tid, arr, kr in (("4.4", "poisson", "4.1"), ("4.5", "deterministic", "4.2")):
        df = thesis.load_table(tid)
        chk = w_model_check(tid).set_index("cps")
        krcv = thesis.load_table(kr)
        for _, r in df.iterrows():
            cps, q = int(r["cps"]), r["quantity"]
            lam = _cell(df, "lam_pps", cps=cps)
            if q == "lam_pps":
                out.append(_rec(r, "arithmetic", "6 x call rate", 6 * cps))
            elif q == "alpha":
                out.append(_rec(r, "model", f"alpha(lambda), {arr} curve (§4.3.1)",
                                float(alpha_fn(lam, arr))))
            elif q == "rho":
                out.append(_rec(r, "arithmetic", "lambda * E[X]", chk.loc[cps, "rho_recomputed"],
                                input_err=lam * 1e-6 * _half(df, "ex_us", cps=cps)))
            elif q == "w_model_us":
                c = chk.loc[cps]
                out.append(_rec(r, "model", f"eq. 4.2, E[X^2]=(1+s)E[X]^2, s={c['scv_used']:.4f} (leave-one-out)",
                                c["w_recomputed_us"], unstable=c["rho_recomputed"] >= 1))
            elif q == "w_measured_us":
                k = _cell(krcv, "k_rcv_us", msg_type="all", cps=cps)
                a = float(alpha_fn(lam, arr))
                out.append(_rec(r, "cross", "K_rcv(overall) - K_stack - K_copy - alpha*K_sockq^{s,base}",
                                k - K_STACK_US - K_COPY_US - a * KS_BASE_US))
    # --- Table 5.1
    df = thesis.load_table("5.1")
    chk = w_model_check("5.1").set_index("cps")
    for _, r in df.iterrows():
        cps, q = int(r["cps"]), r["quantity"]
        if q == "lam_pps" and r["role"] == "derived":
            out.append(_rec(r, "arithmetic", "6 x call rate", 6 * cps))
        elif q == "alpha":
            lam = _cell(df, "lam_pps", cps=cps)
            out.append(_rec(r, "cross", "ch. 4 Poisson alpha curve at the printed lambda",
                            float(alpha_fn(lam, "poisson"))))
        elif q == "beta":
            out.append(_rec(r, "cross", "beta = 1 for one thread (§5.3.3)", 1.0))
        elif q == "rho":
            lam = _cell(df, "lam_pps", cps=cps)
            out.append(_rec(r, "arithmetic", "lambda * E[X]", chk.loc[cps, "rho_recomputed"],
                            input_err=lam * 1e-6 * _half(df, "ex_us", cps=cps)))
        elif q == "w_model_us":
            c = chk.loc[cps]
            out.append(_rec(r, "model", f"eq. 4.2, E[X^2]=(1+s)E[X]^2, s={c['scv_used']:.4f} (leave-one-out)",
                            c["w_recomputed_us"], unstable=c["rho_recomputed"] >= 1))
        elif q == "drop_rate":
            out.append(_rec(r, "arithmetic", "RCVErrors / TotalMessages",
                            _cell(df, "rcv_errors", cps=cps) / _cell(df, "total_messages", cps=cps)))
    # --- Tables 5.2-5.6
    for tid in _DROP_TABLES:
        df = thesis.load_table(tid)
        c_thr = int(df["threads"].iloc[0])
        ref_cps, ex1 = _ex1_for(int(df["cps"].min()))
        for _, r in df.iterrows():
            cps, q = int(r["cps"]), r["quantity"]
            lam = _cell(df, "lam_pps", cps=cps)
            if q == "lam_pps":
                out.append(_rec(r, "arithmetic", "6 x call rate", 6 * cps))
            elif q == "beta":
                out.append(_rec(r, "model", "eq. 5.6", float(beta_eq56(lam, c_thr))))
            elif q == "ex_us":
                b, ec = _cell(df, "beta", cps=cps), _cell(df, "c_ex1_us", cps=cps)
                err = ec * _half(df, "beta", cps=cps) + b * _half(df, "c_ex1_us", cps=cps)
                out.append(_rec(r, "arithmetic", "eq. 5.5 as printed: beta * printed E[X_c]", b * ec,
                                input_err=err))
            elif q == "c_ex1_us":
                # exact: c x some printed Table 5.1 E[X]; if none fits, the nearest call rate's
                t51 = _ex1_table51()
                fits = [k for k, v in t51.items() if abs(c_thr * v - r["value"]) <= _ulp(r["text"]) * (1 + 1e-9)]
                k = fits[0] if fits else ref_cps
                out.append(_rec(r, "cross", f"{c_thr} x Table 5.1 E[X] at {k} cps ({t51.loc[k]:g})"
                                + ("" if fits else ", the nearest call rate; no Table 5.1 value fits"),
                                c_thr * float(t51.loc[k]), exact=True))
            elif q == "drop_prob_model":
                ex = _cell(df, "ex_us", cps=cps)
                res = mmck(lam, 1e6 / ex, c_thr, K_THESIS)
                out.append(_rec(r, "model", f"M/M/c/K P_B, c={c_thr}, K={K_THESIS}, printed lambda and E[X]",
                                float(res.p_block)))
            elif q == "drop_rate":
                out.append(_rec(r, "arithmetic", "RCVErrors / TotalMessages",
                                _cell(df, "rcv_errors", cps=cps) / _cell(df, "total_messages", cps=cps)))
    # --- Tables 6.x / 7.x measured
    for tid in _MEASURED_SPS:
        df = thesis.load_table(tid)
        for _, r in df[df["quantity"].isin(["lam_pps", "pdr"])].iterrows():
            key = dict(threads=int(r["threads"]), cps=int(r["cps"]))
            if r["quantity"] == "lam_pps":
                out.append(_rec(r, "arithmetic", "6 x call rate", 6 * key["cps"]))
            else:
                out.append(_rec(r, "arithmetic", "call-setup drops / call-setup messages",
                                _cell(df, "call_setup_drops", **key) / _cell(df, "call_setup_messages", **key)))
    # --- comparison tables
    for tid in _COMPARISON:
        df = thesis.load_table(tid)
        for _, r in df[df["role"] == "derived"].iterrows():
            base_q = "pdr" if r["quantity"] == "pdr_pct_lower" else "k_rcv_us"
            th = int(r["threads"])
            b = _cell(df, base_q, threads=th, mode="baseline")
            e = _cell(df, base_q, threads=th, mode="enhanced")
            hb = _half(df, base_q, threads=th, mode="baseline")
            he = _half(df, base_q, threads=th, mode="enhanced")
            # computed from the *printed* PDR / K_rcv (54 of the 58 cells follow from them to one unit
            # of the last digit), so checked against them with no allowance for their rounding
            out.append(_rec(r, "arithmetic", "100 (baseline - enhanced) / baseline, printed values",
                            100 * (b - e) / b))
    return pd.DataFrame(out, columns=AUDIT_COLUMNS)


def summary(a: pd.DataFrame | None = None) -> pd.DataFrame:
    """Counts per kind: cells, within 1 % / 5 % (or within printed precision), verdicts."""
    a = audit() if a is None else a
    rows = []
    groups = [(k, a[a["kind"] == k]) for k in KINDS if (a["kind"] == k).any()] + [("all", a)]
    for kind, g in groups:
        v = g["verdict"].value_counts()
        rows.append({"kind": kind, "cells": len(g),
                     "within_1pct": int(((g["rel_err"] <= 0.01) | (g["verdict"] == "match")).sum()),
                     "within_5pct": int(((g["rel_err"] <= 0.05) | g["verdict"].isin(["match", "close"])).sum()),
                     **{k: int(v.get(k, 0)) for k in ("match", "close", "mismatch", "unstable-agree",
                                                        "unstable-disagree")}})
    return pd.DataFrame(rows)


def headline(a: pd.DataFrame | None = None) -> dict:
    """The audit in a few numbers, arithmetic and model cells apart (for the appendix's glue)."""
    a = audit() if a is None else a
    ar, mo, cr = (a[a["kind"] == k] for k in KINDS)
    hidden = ar[(ar["verdict"] == "mismatch") & (ar["rel_err"] <= 0.01)]
    return {
        "cells": len(a),
        "arith_cells": len(ar), "arith_exact": int((ar["verdict"] == "match").sum()),
        "arith_wrong": int((ar["verdict"] == "mismatch").sum()),
        "arith_wrong_within_1pct": len(hidden),
        "model_cells": len(mo), "model_1pct": int((mo["verdict"] == "match").sum()),
        "model_5pct": int(mo["verdict"].isin(["match", "close"]).sum()),
        "model_beyond_5pct": int((mo["verdict"] == "mismatch").sum()),
        "model_unstable_agree": int((mo["verdict"] == "unstable-agree").sum()),
        "cross_cells": len(cr), "cross_agree": int((cr["verdict"] == "match").sum()),
        "cross_disagree": int(cr["verdict"].isin(["close", "mismatch"]).sum()),
    }


def worst(a: pd.DataFrame | None = None, n: int = 10, kind: str | None = None) -> pd.DataFrame:
    """The n largest relative errors among non-matching cells."""
    a = audit() if a is None else a
    m = a[a["verdict"].isin(["mismatch", "close", "unstable-disagree"])]
    if kind:
        m = m[m["kind"] == kind]
    return m.sort_values("rel_err", ascending=False).head(n).reset_index(drop=True)


def beta_check() -> pd.DataFrame:
    """Tables 5.2–5.6: printed β vs eq. 5.6, and the E[X_1] each printed E[X] implies (E[X]/(β c))."""
    rows = []
    for tid in _DROP_TABLES:
        w = thesis.wide(tid).sort_values("cps")
        for _, r in w.iterrows():
            c = int(r["threads"])
            b56 = float(beta_eq56(r["lam_pps"], c))
            rows.append({"table": tid, "c": c, "cps": int(r["cps"]), "lam_pps": r["lam_pps"],
                         "beta_printed": r["beta"], "beta_eq56": b56,
                         "rel_err": abs(b56 - r["beta"]) / r["beta"],
                         "ex1_implied_us": r["ex_us"] / (r["beta"] * c),
                         "ex1_from_c_ex1_us": r["c_ex1_us"] / c})
    return pd.DataFrame(rows)


def ex1_check() -> pd.DataFrame:
    """Tables 5.2–5.6: which single-thread E[X_1] each printed E[X] was computed from.

    E[X] = β·c·E[X_1] (eq. 5.5); with β and E[X] rounded, E[X_1] = E[X]/(β c) lies in an interval
    (``ex1_lo_us``–``ex1_hi_us``).  ``own_ex1_us`` is the table's own E[X_c]/c; ``consistent`` says
    whether it lies in the interval; ``table51_match`` lists the Table 5.1 E[X] values (with their
    call rate) that do."""
    t51 = _ex1_table51()
    rows = []
    for tid in _DROP_TABLES:
        df = thesis.load_table(tid)
        for cps in sorted(df["cps"].unique()):
            cps = int(cps)
            c = int(df["threads"].iloc[0])
            ex, b = _cell(df, "ex_us", cps=cps), _cell(df, "beta", cps=cps)
            hx, hb = _half(df, "ex_us", cps=cps), _half(df, "beta", cps=cps)
            lo, hi = (ex - hx) / ((b + hb) * c), (ex + hx) / ((b - hb) * c)
            own = _cell(df, "c_ex1_us", cps=cps) / c
            hits = [f"{v:g} ({k} cps)" for k, v in t51.items() if lo <= v <= hi]
            rows.append({"table": tid, "c": c, "cps": cps, "ex_us": ex, "beta": b,
                         "ex1_lo_us": lo, "ex1_hi_us": hi, "own_ex1_us": own,
                         "consistent": bool(lo <= own <= hi), "table51_match": ", ".join(hits),
                         "rel_diff_own": abs(ex - b * c * own) / ex})
    return pd.DataFrame(rows)


def model_vs_measured() -> pd.DataFrame:
    """Tables 5.2–5.6: M/M/c/K P_B (recomputed from the printed λ, E[X]) vs the measured drop rate,
    and the printed model value; ``ratio`` = model / measured.  ``p_block_eq56_chain`` is what the
    published recipe gives with no fitted β: β from eq. 5.6, E[X] = β·(printed c·E[X_1]) (eq. 5.5)."""
    rows = []
    for tid in _DROP_TABLES:
        w = thesis.wide(tid).sort_values("cps")
        for _, r in w.iterrows():
            c = int(r["threads"])
            res = mmck(r["lam_pps"], 1e6 / r["ex_us"], c, K_THESIS)
            meas = r["rcv_errors"] / r["total_messages"]
            pb = float(res.p_block)
            ex_chain = float(beta_eq56(r["lam_pps"], c)) * r["c_ex1_us"]  # eq. 5.6 -> eq. 5.5
            pb_chain = float(mmck(r["lam_pps"], 1e6 / ex_chain, c, K_THESIS).p_block)
            rows.append({"table": tid, "c": c, "cps": int(r["cps"]), "rho": float(res.rho),
                         "p_block_recomputed": pb, "p_block_printed": r["drop_prob_model"],
                         "p_block_eq56_chain": pb_chain,
                         "drop_rate_measured": meas,
                         "ratio": pb / meas if meas > 0 else np.nan})
    return pd.DataFrame(rows)


def cross_table() -> pd.DataFrame:
    """Same configuration (mode, cores, threads, cps, quantity) printed in several tables with
    different values."""
    allt = thesis.load_all()
    s = allt[allt["table"].isin(_MEASURED_SPS + _COMPARISON) & allt["mode"].notna()
             & ~allt["quantity"].isin(["lam_pps"])]
    rows = []
    for key, g in s.groupby(["mode", "cores", "threads", "cps", "quantity"]):
        if g["table"].nunique() > 1 and g["value"].nunique() > 1:
            rows.append({"mode": key[0], "cores": key[1], "threads": key[2], "cps": key[3],
                         "quantity": key[4],
                         "values": "; ".join(f"T{t}: {x}" for t, x in zip(g["table"], g["text"])),
                         "max_rel_diff": float((g["value"].max() - g["value"].min()) / g["value"].min())})
    return pd.DataFrame(rows)


def capacity_check() -> pd.DataFrame:
    """Eq. 7.1 against Tables 7.2/7.5/7.8 (enhanced mode): best thread count T_{p,m} and the
    highest printed load with PDR ≤ 1 %, vs T = m + 2 (p = 1) or m (p = 2) and C = T · C_{1,1}."""
    rows = []
    for tid, cores, procs in (("7.2", 2, 1), ("7.5", 4, 1), ("7.8", 6, 2)):
        w = thesis.wide(tid)
        ok = w[w["pdr"] <= 0.01]
        best = ok.loc[ok["cps"].idxmax()]
        t_model = cores + 2 if procs == 1 else cores
        rows.append({"table": tid, "cores": cores, "processors": procs,
                     "best_threads_measured": int(best["threads"]), "best_cps_measured": int(best["cps"]),
                     "threads_eq71": t_model, "capacity_eq71_cps": t_model * 1000,
                     "rel_err": abs(t_model * 1000 - best["cps"]) / best["cps"]})
    return pd.DataFrame(rows)


def implied_t_sip() -> pd.DataFrame:
    """Tables 4.4/4.5: the overall mean T_sip each printed E[X] implies
    (E[X] − α·K^{s,base}_sockq − K_snd − K_copy, Table 4.3 overall means); T_sip itself is only in
    Figures 4.6/4.7."""
    frames = []
    for tid in ("4.4", "4.5"):
        w = thesis.wide(tid)
        frames.append(pd.DataFrame({"table": tid, "cps": w["cps"],
                                    "t_sip_implied_us": w["ex_us"] - w["alpha"] * KS_BASE_US - K_SND_US - K_COPY_US}))
    return pd.concat(frames, ignore_index=True)


def thesis_breakdown(arrivals: str = "poisson") -> pd.DataFrame:
    """The mean time budget of a message in the proxy (µs) per call rate, rebuilt from the tables:
    Table 4.1 (Poisson) or 4.2 (deterministic) for the overall K_rcv, Table 4.4 or 4.5 for α,
    E[X] and the measured wait W = K^w_sockq, Table 4.3 for the overall K_stack, K^{s,base}_sockq
    and K_snd at 1 call/s.  The thesis printed T_sip only in figures and never split T¹/T².

    Columns: cps, lam_pps, alpha, k_stack, k_sockq_w, k_sockq_s, k_rcv, k_copy, ex_us, t_sip,
    k_snd, sojourn.
    """
    t_rcv, t_mg1 = {"poisson": ("4.1", "4.4"), "deterministic": ("4.2", "4.5")}[arrivals]
    t43 = thesis.wide("4.3").query("msg_type == 'all'").iloc[0]         # overall means at 1 call/s
    m = thesis.wide(t_mg1).set_index("cps")                              # α, E[X], measured W
    k_rcv = thesis.wide(t_rcv).query("msg_type == 'all'").set_index("cps")["k_rcv_us"]
    b = pd.DataFrame({"cps": m.index.astype(int), "lam_pps": m["lam_pps"].to_numpy(),
                      "alpha": m["alpha"].to_numpy()})
    b["k_stack"] = t43["k_stack_us"]
    b["k_sockq_w"] = m["w_measured_us"].to_numpy()                       # W = K^w_sockq
    b["k_sockq_s"] = b["alpha"] * t43["k_sockq_s_base_us"]               # eq. 4.4
    b["k_rcv"] = k_rcv.reindex(m.index).to_numpy()
    b["k_copy"] = b["k_rcv"] - b["k_stack"] - b["k_sockq_w"] - b["k_sockq_s"]   # eq. 3.1
    b["ex_us"] = m["ex_us"].to_numpy()
    b["t_sip"] = b["ex_us"] - b["k_sockq_s"] - t43["k_snd_us"] - K_COPY_US      # eq. 4.1
    b["k_snd"] = t43["k_snd_us"]
    b["sojourn"] = b["k_rcv"] + b["t_sip"] + b["k_snd"]                  # t_dep − t_arr
    return b


def table_6_5_block() -> pd.DataFrame:
    """Table 6.5's 16-thread block (enhanced, 2 % threshold), cell by cell: the call rate its λ
    implies and where else each printed value appears (Table 6.2's 16-thread columns, Table 6.6's
    16-thread enhanced row)."""
    t65 = thesis.load_table("6.5")
    t62 = thesis.load_table("6.2")
    t66 = thesis.load_table("6.6")
    blk = t65[t65["threads"] == 16]
    o62 = t62[t62["threads"] == 16]
    o66 = t66[(t66["threads"] == 16) & (t66["mode"] == "enhanced").fillna(False)]
    rows = []
    for _, r in blk.iterrows():
        same62 = o62[(o62["quantity"] == r["quantity"]) & (o62["value"] == r["value"])]
        same66 = o66[(o66["quantity"] == r["quantity"]) & (o66["value"] == r["value"])]
        rows.append({"label_cps": int(r["cps"]), "quantity": r["quantity"], "text": r["text"],
                     "rate_implied_cps": r["value"] / 6 if r["quantity"] == "lam_pps" else np.nan,
                     "equals_table_6_2": ", ".join(f"{int(c)} cps" for c in same62["cps"]),
                     "equals_table_6_6": ", ".join(f"{int(c)} cps" for c in same66["cps"])})
    return pd.DataFrame(rows)


#: Numbers the thesis's *prose* states about its own tables (seed 000: §5.3.3, §6.4, §7.5),
#: transcribed as facts: (where, what, claimed low, claimed high, table, quantity, row filter).
_CLAIMS = [
    ("§5.3.3", "beta at the 1 % drop point, 2 to 16 threads", 1.08, 2.69, "beta_1pct", "beta", None),
    ("§6.4", "PDR improvement, 1 % threshold", 26, 40, "6.3", "pdr_pct_lower", None),
    ("§6.4", "K_rcv improvement, 1 % threshold", 7, 34, "6.3", "k_rcv_pct_lower", None),
    ("§6.4", "PDR improvement, 2 % threshold", 3, 18, "6.6", "pdr_pct_lower", None),
    ("§6.4", "K_rcv improvement, 2 % threshold", 3, 21, "6.6", "k_rcv_pct_lower", None),
    ("§6.4", "PDR improvement, 5 % threshold", 0.5, 17, "6.9", "pdr_pct_lower", None),
    ("§6.4", "K_rcv improvement, 5 % threshold", 4.5, 16, "6.9", "k_rcv_pct_lower", None),
    ("§7.5", "PDR improvement, 2 cores", 4, 53, "7.3", "pdr_pct_lower", None),
    ("§7.5", "K_rcv improvement, 2 cores", 1, 72, "7.3", "k_rcv_pct_lower", None),
    ("§7.5", "PDR improvement, 4 cores", 14, 42, "7.6", "pdr_pct_lower", None),
    ("§7.5", "K_rcv improvement, 4 cores", 2, 42, "7.6", "k_rcv_pct_lower", None),
    ("§7.5", "PDR improvement, 6 cores", 33, 58, "7.9", "pdr_pct_lower", None),
    ("§7.5", "K_rcv improvement, 6 cores", 12, 45, "7.9", "k_rcv_pct_lower", None),
]


def text_claims() -> pd.DataFrame:
    """Ranges the thesis's text states against the range of the cells they summarise.

    The text contradicts its table when the table's values leave the stated range by more than one
    unit of the stated bound's last digit (so "about 0.5 %" covers 0.45 % and "40 %" covers 40.87 %,
    a truncation; a stated lower bound below every cell is loose, not wrong).  For β the cells are the printed β of the first column of each of
    Tables 5.2–5.6 whose measured drop rate exceeds 1 % (the point the sentence names)."""
    rows = []
    for where, what, lo, hi, tid, q, _ in _CLAIMS:
        if tid == "beta_1pct":
            vals, texts = [], []
            for t in _DROP_TABLES:
                w = thesis.wide(t).sort_values("cps")
                first = w[w["rcv_errors"] / w["total_messages"] > 0.01].iloc[0]
                vals.append(float(first["beta"]))
                texts.append(f"{t}: {first['beta']:g} at {int(first['cps'])} cps")
            src = "Tables 5.2-5.6"
        else:
            d = _rows(tid, q)
            vals = d["value"].astype(float).tolist()
            texts = [f"{r.threads} thr: {r.text}" for r in d.itertuples()]
            src = f"Table {tid}"
        vmin, vmax = min(vals), max(vals)
        unit = lambda x: 10.0 ** -thesis.decimals(f"{x:g}")  # noqa: E731
        ok_lo, ok_hi = vmin >= lo - unit(lo) * (1 + 1e-9), vmax <= hi + unit(hi) * (1 + 1e-9)
        rows.append({"where": where, "claim": what, "text_says": f"{lo:g}–{hi:g}", "source": src,
                     "table_min": vmin, "table_max": vmax, "cells": "; ".join(texts),
                     "agrees": bool(ok_lo and ok_hi),
                     "contradiction": "" if ok_lo and ok_hi else
                     ("; ".join(([f"text says {lo:g}, table min {vmin:g}"] if not ok_lo else [])
                                + ([f"text says {hi:g}, table max {vmax:g}"] if not ok_hi else [])))})
    return pd.DataFrame(rows)


#: measured-performance tables by (cores, scheduler mode): thesis ch. 6 (1 core, 1 % PDR) and ch. 7
MEASURED_TABLES = {(1, "baseline"): "6.1", (1, "enhanced"): "6.2", (2, "baseline"): "7.1",
                   (2, "enhanced"): "7.2", (4, "baseline"): "7.4", (4, "enhanced"): "7.5",
                   (6, "baseline"): "7.7", (6, "enhanced"): "7.8"}


def pdr_from_counts(w: pd.DataFrame) -> pd.Series:
    """PDR of each row of a wide ch. 6/7 measurement table (:func:`sipperf.thesis.wide`) recomputed
    from its counts: call-setup drops / call-setup messages, the ratio the printed PDR follows
    (§6.2 defines it over all messages).  The printed PDR is rounded: Table 7.1 prints 0.0100 for
    3364/335899 = 1.0015 %, the first load of that configuration above 1 % (bold in the thesis)."""
    return w["call_setup_drops"] / w["call_setup_messages"]


def comparison(tid: str) -> pd.DataFrame:
    """Comparison table ``tid`` (6.3/6.6/6.9/7.3/7.6/7.9) with its "% lower" recomputed from the
    baseline and enhanced values printed in the same row, 100·(baseline − enhanced)/baseline.

    Columns: threads, cps, then for PDR and K_rcv (µs): ``<q> baseline``, ``<q> enhanced``,
    ``<q> % lower, printed`` (NaN where the table prints none) and ``<q> % lower, recomputed``.
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


def comparison_from_counts(tid: str) -> pd.DataFrame:
    """The PDR comparison of table ``tid`` recomputed from the drop and message counts of its two
    measurement tables (:data:`COMPARISON_SOURCES`, :func:`pdr_from_counts`) at the same thread
    count and call rate; NaN where a measurement table does not print that load.

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


def highest_stable_load(pdr_max: float = 0.01) -> pd.DataFrame:
    """Highest printed call rate whose PDR, recomputed from the counts (:func:`pdr_from_counts`),
    is ≤ ``pdr_max``, by cores, threads and scheduler mode (:data:`MEASURED_TABLES`).

    Each table prints only the two loads around its 1 % crossing, so this is the last load below
    the crossing (a lower bound on the true threshold, at 200 calls/s resolution).
    Columns: cores, threads, baseline, enhanced (calls/s).
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


def recomputed_gains() -> pd.DataFrame:
    """The PDR comparisons of Tables 6.3–7.9 with each PDR recomputed as drops/messages from the
    measurement tables the comparison quotes (printed value kept where the configuration is not in
    them).  ``pct_lower_recomputed`` < 0 means the enhanced mode dropped *more* packets."""
    rows = []
    for tid, (tb, te) in COMPARISON_SOURCES.items():
        comp = thesis.load_table(tid)
        srcs = {"baseline": thesis.wide(tb), "enhanced": thesis.wide(te)}
        for th in sorted(comp["threads"].dropna().unique()):
            th = int(th)
            rec, printed, from_counts = {}, {}, {}
            for mode in ("baseline", "enhanced"):
                c = comp[(comp["threads"] == th) & (comp["mode"] == mode).fillna(False)
                         & (comp["quantity"] == "pdr")]
                cps, pdr = int(c["cps"].iloc[0]), float(c["value"].iloc[0])
                printed[mode] = pdr
                s = srcs[mode]
                s = s[(s["threads"] == th) & (s["cps"] == cps)]
                if len(s) == 1:
                    rec[mode] = float(s["call_setup_drops"].iloc[0] / s["call_setup_messages"].iloc[0])
                    from_counts[mode] = True
                else:
                    rec[mode], from_counts[mode] = pdr, False
            pct = comp[(comp["threads"] == th) & (comp["quantity"] == "pdr_pct_lower")]["value"]
            rows.append({"table": tid, "threads": th, "cps": cps,
                         "pdr_baseline_printed": printed["baseline"], "pdr_enhanced_printed": printed["enhanced"],
                         "pdr_baseline_recomputed": rec["baseline"], "pdr_enhanced_recomputed": rec["enhanced"],
                         "recomputed_from_counts": from_counts["baseline"] and from_counts["enhanced"],
                         "pct_lower_printed": float(pct.iloc[0]) if len(pct) else np.nan,
                         "pct_lower_recomputed": 100 * (rec["baseline"] - rec["enhanced"]) / rec["baseline"]})
    return pd.DataFrame(rows)


#: the measured quantities of a ch. 6/7 column (λ follows from the column's label)
_MEASURED_Q = ("call_setup_drops", "call_setup_messages", "k_rcv_us", "pdr", "t_sip_us", "total_messages")
#: baseline/enhanced measurement tables that print the same cores and PDR threshold, with the
#: comparison table that quotes them
_MODE_PAIRS = (("6.1", "6.2", "6.3"), ("6.4", "6.5", "6.6"), ("6.7", "6.8", "6.9"),
               ("7.1", "7.2", "7.3"), ("7.4", "7.5", "7.6"), ("7.7", "7.8", "7.9"))


def copied_columns(min_equal: int = 4) -> pd.DataFrame:
    """Pairs of columns of the ch. 6/7 measurement tables that carry different labels (mode, cores,
    threads or call rate) but print at least ``min_equal`` of the same six measured values
    (:data:`_MEASURED_Q`): one column copied into another's place.

    Columns: table, threads, cps (the copy's label), source_table, source_threads, source_cps,
    equal (the quantities printed alike), values (their text)."""
    cols = []
    for tid in _MEASURED_SPS:
        for r in thesis.wide(tid).itertuples():
            cols.append((tid, r.mode, int(r.cores), int(r.threads), int(r.cps),
                         {q: getattr(r, q) for q in _MEASURED_Q}))
    rows = []
    for i, a in enumerate(cols):
        for b in cols[i + 1:]:
            if a[1:5] == b[1:5]:
                continue  # the same configuration printed twice is no copy
            equal = [q for q in _MEASURED_Q if pd.notna(a[5][q]) and a[5][q] == b[5][q]]
            if len(equal) >= min_equal:
                src, cp = sorted([a, b], key=lambda c: float(c[0]))  # the earlier table is the source
                rows.append({"table": cp[0], "threads": cp[3], "cps": cp[4], "source_table": src[0],
                             "source_threads": src[3], "source_cps": src[4], "equal": equal,
                             "values": "; ".join(f"{_QNAME.get(q, q)} {src[5][q]:g}" for q in equal)})
    return pd.DataFrame(rows, columns=["table", "threads", "cps", "source_table", "source_threads",
                                       "source_cps", "equal", "values"])


def same_load_comparisons() -> pd.DataFrame:
    """Every load that a baseline and an enhanced measurement table both print (same cores, PDR
    threshold, threads and call rate), with both PDRs recomputed from the counts and both K_rcv,
    and what the comparison table quotes for it, if anything.

    ``pdr_worse`` / ``k_rcv_worse``: the enhanced mode dropped more / waited longer — against the
    thesis's "for the same load value, the enhanced mode always improves the SPS performance in
    terms of drop rate and waiting time" (§6.4.2, §7.5).  ``in_comparison``: the comparison table
    quotes this thread count at this load; ``k_rcv_enhanced_quoted`` is its enhanced K_rcv."""
    rows = []
    for tb, te, tc in _MODE_PAIRS:
        wb, we, wc = thesis.wide(tb), thesis.wide(te), thesis.wide(tc)
        m = wb.merge(we, on=["threads", "cps"], suffixes=("_b", "_e"))
        for r in m.itertuples():
            c = wc[(wc["threads"] == r.threads) & (wc["cps"] == r.cps)]
            rows.append({"baseline_table": tb, "enhanced_table": te, "comparison_table": tc,
                         "cores": int(r.cores_b), "threads": int(r.threads), "cps": int(r.cps),
                         "drops_b": int(r.call_setup_drops_b), "msgs_b": int(r.call_setup_messages_b),
                         "drops_e": int(r.call_setup_drops_e), "msgs_e": int(r.call_setup_messages_e),
                         "pdr_b": r.call_setup_drops_b / r.call_setup_messages_b,
                         "pdr_e": r.call_setup_drops_e / r.call_setup_messages_e,
                         "k_rcv_b": float(r.k_rcv_us_b), "k_rcv_e": float(r.k_rcv_us_e),
                         "in_comparison": len(c) == 1,
                         "k_rcv_enhanced_quoted": float(c["k_rcv_us_enhanced"].iloc[0]) if len(c) == 1 else np.nan})
    out = pd.DataFrame(rows)
    out["pdr_worse"] = out["pdr_e"] > out["pdr_b"]
    out["k_rcv_worse"] = out["k_rcv_e"] > out["k_rcv_b"]
    return out


def beta_trend() -> pd.DataFrame:
    """Tables 5.2–5.6: how the printed β moves with λ at fixed c, against eq. 5.6 (which rises
    with λ in every table).  Columns: table, c, cps (list), beta (list), falls_overall (last <
    first), steps_down / steps_equal / steps_up (between neighbouring columns), eq56_rises."""
    rows = []
    for tid in _DROP_TABLES:
        w = thesis.wide(tid).sort_values("cps")
        b = w["beta"].to_numpy(float)
        c = int(w["threads"].iloc[0])
        d = np.diff(b)
        rows.append({"table": tid, "c": c, "cps": w["cps"].astype(int).tolist(), "beta": b.tolist(),
                     "falls_overall": bool(b[-1] < b[0]), "steps_down": int((d < 0).sum()),
                     "steps_equal": int((d == 0).sum()), "steps_up": int((d > 0).sum()),
                     "eq56_rises": bool((np.diff(beta_eq56(w["lam_pps"].to_numpy(float), c)) > 0).all())})
    return pd.DataFrame(rows)


def beta_trend_text(bt: pd.DataFrame | None = None) -> str:
    """One sentence on :func:`beta_trend`, its words chosen by the printed values."""
    bt = beta_trend() if bt is None else bt
    assert bt["eq56_rises"].all()
    falls = bt[bt["falls_overall"]]
    head = ("the printed β falls from the lowest to the highest rate of every table"
            if len(falls) == len(bt) else
            f"the printed β falls from the lowest to the highest rate in {len(falls)} of the {len(bt)} tables")
    odd = []
    for r in bt.itertuples():
        for (c0, c1), (b0, b1) in zip(zip(r.cps, r.cps[1:]), zip(r.beta, r.beta[1:])):
            if b1 == b0:
                odd.append(f"Table {r.table} prints {b0:g} at both {c0} and {c1} cps")
            elif b1 > b0:
                odd.append(f"Table {r.table} rises from {b0:g} to {b1:g} between {c0} and {c1} cps")
    tail = (", though not step by step (" + "; ".join(odd) + ")") if odd else ", at every step"
    return head + tail + "; eq. 5.6 rises with λ in every table"


def c11_check() -> dict:
    """§7.6's C₁,₁ = 1000 calls/s ("established in earlier chapters") against the two one-thread
    tables: where Table 4.4's ρ (Poisson, the ch. 4 machine) crosses 1, and where Table 5.1's
    measured drop rate (one thread on the machine of chs. 5–6) crosses 1 %, both interpolated
    linearly between the printed columns."""
    t44 = thesis.wide("4.4").sort_values("cps")
    i = int(np.argmax(t44["rho"].to_numpy() >= 1))
    a, b = t44.iloc[i - 1], t44.iloc[i]
    rho_cross = a["cps"] + (1 - a["rho"]) * (b["cps"] - a["cps"]) / (b["rho"] - a["rho"])
    t51 = thesis.wide("5.1").sort_values("cps")
    dr = (t51["rcv_errors"] / t51["total_messages"]).to_numpy()
    j = int(np.argmax(dr > 0.01))
    c0, c1 = t51["cps"].iloc[j - 1], t51["cps"].iloc[j]
    drop_cross = c0 + (0.01 - dr[j - 1]) * (c1 - c0) / (dr[j] - dr[j - 1])
    return {"c11_cps": 1000.0, "t44_cps_lo": int(a["cps"]), "t44_rho_lo": float(a["rho"]),
            "t44_cps_hi": int(b["cps"]), "t44_rho_hi": float(b["rho"]), "t44_rho1_cps": float(rho_cross),
            "t51_cps_lo": int(c0), "t51_drop_lo": float(dr[j - 1]), "t51_cps_hi": int(c1),
            "t51_drop_hi": float(dr[j]), "t51_drop1_cps": float(drop_cross),
            "t51_last_zero_cps": int(t51["cps"][dr == 0].max())}


def drop_model_cells(a: pd.DataFrame | None = None) -> pd.DataFrame:
    """Tables 5.2–5.6: the printed model drop probabilities that the table's own λ and E[X] do not
    give (verdict ``mismatch``), with the E[X] that would give the printed value and whether the
    printed E[X] could round to it."""
    from scipy.optimize import brentq

    a = audit() if a is None else a
    bad = a[(a["quantity"] == "drop_prob_model") & (a["verdict"] == "mismatch")]
    rows = []
    for r in bad.itertuples():
        cps = _cps(r.column)
        w = thesis.wide(r.table).set_index("cps").loc[cps]
        c, lam, ex = int(w["threads"]), float(w["lam_pps"]), float(w["ex_us"])
        pb = lambda e: float(mmck(lam, 1e6 / e, c, K_THESIS).p_block)  # noqa: E731
        ex_needed = brentq(lambda e: pb(e) - r.published, 0.5 * ex, 1.5 * ex)
        half = _half(thesis.load_table(r.table), "ex_us", cps=cps)
        rows.append({"table": r.table, "cps": cps, "c": c, "lam_pps": lam, "ex_us": ex,
                     "ex_text": thesis.load_table(r.table).query("quantity == 'ex_us' and cps == @cps")["text"].iloc[0],
                     "printed": r.text, "recomputed": r.recomputed, "rho": float(mmck(lam, 1e6 / ex, c, K_THESIS).rho),
                     "ex_needed_us": ex_needed, "within_rounding": abs(ex_needed - ex) <= half,
                     "measured": float(w["rcv_errors"] / w["total_messages"])})
    return pd.DataFrame(rows)


#: reader's names of the quantities, for the errata's text
_QNAME = {"lam_pps": "λ", "t_sip_us": "T_sip", "k_rcv_us": "K_rcv", "call_setup_drops": "call-setup drops",
          "call_setup_messages": "call-setup messages", "total_messages": "total messages", "pdr": "PDR"}


def _fmt(x: float, nd: int = 4) -> str:
    return f"{x:.{nd}g}"


def _cps(col: str) -> int:
    """'16 Threads, 1400cps' / '1400cps' -> 1400."""
    return int(str(col).split(",")[-1].strip().replace("cps", ""))


def _threads(col: str) -> int | None:
    s = str(col)
    return int(s.split("Threads")[0].strip()) if "Threads" in s else None


def errata(a: pd.DataFrame | None = None) -> pd.DataFrame:
    """The errata list: one row per root cause, with the evidence computed from the datasets.

    ``symptoms`` counts the single-cell findings a root cause explains (several wrong cells or
    cross-table disagreements can come from one slip); ``cells`` lists them."""
    a = audit() if a is None else a
    items: list[dict] = []

    def add(tables: str, finding: str, evidence: str, severity: str, symptoms: int = 1) -> None:
        items.append({"id": len(items) + 1, "tables": tables, "finding": finding, "evidence": evidence,
                      "severity": severity, "symptoms": symptoms})

    # ---- symptoms of Table 6.5's 16-thread block are collected first and reported once
    def in_65_block(tables: set[str], threads, mode) -> bool:
        return bool(tables & {"6.5", "6.6"}) and threads == 16 and mode in (None, "enhanced")

    block: list[str] = []
    lam = a[(a["quantity"] == "lam_pps") & (a["verdict"] != "match")]
    pdr = a[(a["quantity"].isin(["pdr", "drop_rate"])) & (a["verdict"] != "match")]
    ct = cross_table()
    singles_lam, singles_pdr = [], []
    for _, r in lam.iterrows():
        (block if in_65_block({r["table"]}, _threads(r["column"]), None) else singles_lam).append(
            r if not in_65_block({r["table"]}, _threads(r["column"]), None)
            else f"λ of '{r['column']}' printed {r['text']} (6 × call rate = {r['recomputed']:.0f})")
    for _, r in pdr.iterrows():
        (block if in_65_block({r["table"]}, _threads(r["column"]), None) else singles_pdr).append(
            r if not in_65_block({r["table"]}, _threads(r["column"]), None)
            else f"PDR of '{r['column']}' printed {r['text']}, drops/messages {_fmt(r['recomputed'])}")
    ct_groups = []

    def _copied_pdr(r: pd.Series):
        """(other table, key, cross-table rows) if a mismatching PDR equals the drops/messages of
        the same configuration printed in another table, else None."""
        own = thesis.load_table(r["table"])
        meta = own[(own["column"] == r["column"]) & (own["quantity"] == "pdr")].iloc[0]
        key = (meta["mode"], meta["cores"], meta["threads"], meta["cps"])
        for k, g, tabs in ct_groups:
            if k != key:
                continue
            for t2 in tabs:
                if t2 == r["table"] or t2 not in _MEASURED_SPS:
                    continue
                w2 = thesis.wide(t2)
                w2 = w2[(w2["threads"] == key[2]) & (w2["cps"] == key[3])]
                if len(w2) == 1 and abs(float(w2["call_setup_drops"].iloc[0] / w2["call_setup_messages"].iloc[0])
                                        - r["published"]) <= 0.5 * _ulp(r["text"]):
                    return t2, k, g
        return None

    for key, g in ct.groupby(["mode", "cores", "threads", "cps"], sort=False):
        tabs = sorted({v.split(":")[0].strip()[1:] for vals in g["values"] for v in vals.split(";")})
        if key[1] == 1 and in_65_block(set(tabs), key[2], key[0]):
            block.append(f"{key[0]} {key[2]} threads {key[3]} cps differs between Tables {', '.join(tabs)} "
                         f"(up to {g['max_rel_diff'].max():.0%})")
        else:
            ct_groups.append((key, g, tabs))

    for r in singles_lam:
        ratio = r["published"] / r["recomputed"]
        add(r["table"], f"arrival rate of column '{r['column']}' is not 6 x call rate",
            f"printed {r['text']}, 6 × call rate = {r['recomputed']:.0f} (ratio {ratio:.3g})",
            "typo" if ratio in (10.0, 0.1) else "label/column mix-up")
    if block:
        b = table_6_5_block()
        lamr = b[b["quantity"] == "lam_pps"]
        c1 = b[b["label_cps"] == b["label_cps"].min()]
        c2 = b[b["label_cps"] == b["label_cps"].max()]
        same62 = lambda d, cps: ", ".join(sorted(_QNAME.get(q, q) for q in  # noqa: E731
                                                 d.loc[d["equals_table_6_2"] == f"{cps} cps", "quantity"]))
        lo, hi = int(c1["label_cps"].iloc[0]), int(c2["label_cps"].iloc[0])
        add("6.5 (6.2, 6.6, 6.8)", f"Table 6.5's 16-thread block is mislabelled: the columns headed {lo} and {hi} cps "
            f"carry the λ of {lamr['rate_implied_cps'].min():.0f} and {lamr['rate_implied_cps'].max():.0f} cps, "
            "and the first one mixes two columns of Table 6.2",
            f"first column: {same62(c1, lo)} equal Table 6.2's {lo} cps column, {same62(c1, hi)} its {hi} cps column; "
            f"second column: {', '.join(sorted(_QNAME.get(q, q) for q in c2.loc[c2['equals_table_6_6'] != '', 'quantity']))} are what Table 6.6 "
            f"quotes for 16 threads at {c2.loc[c2['equals_table_6_6'] != '', 'equals_table_6_6'].iloc[0]}. "
            f"One root cause, {len(block)} symptoms: " + "; ".join(block),
            "label/column mix-up", symptoms=len(block))
    cc = copied_columns()
    for r in cc.itertuples():
        add(f"{r.table}, {r.source_table}", f"Table {r.table}'s column '{r.threads} Threads, {r.cps}cps' repeats "
            f"Table {r.source_table}'s '{r.source_threads} Threads, {r.source_cps}cps' in all {len(r.equal)} "
            "measured cells", f"{r.values} in both; only λ ({6 * r.cps} = 6 × {r.cps}) follows the label, so "
            f"Table {r.table} holds no measurement of {r.threads} threads at {r.cps} cps",
            "copied cell", symptoms=len(r.equal))
    copied = {(r.table, r.threads, r.cps) for r in cc.itertuples()}
    for r in singles_pdr:
        src = _copied_pdr(r)
        if src is not None:
            tid2, key, g = src
            ct_groups[:] = [x for x in ct_groups if x[0] != key]
            add(f"{r['table']}, {tid2}", f"Table {r['table']}'s column '{r['column']}' repeats Table {tid2}'s "
                f"PDR for the same configuration but prints other counts",
                f"printed {r['text']} = Table {tid2}'s drops/messages, while its own drops/messages = "
                f"{_fmt(r['recomputed'])}; " + "; ".join(f"{_QNAME.get(x.quantity, x.quantity)}: {x.values}" for x in g.itertuples()),
                "copied cell", symptoms=1 + len(g))
            continue
        add(r["table"], f"printed drop rate of '{r['column']}' does not equal drops/messages",
            f"printed {r['text']}, recomputed {_fmt(r['recomputed'])} (rel. error {r['rel_err']:.1%})",
            "inconsistent cell")
    pct = a[a["quantity"].str.endswith("pct_lower") & (a["verdict"] != "match")]
    for _, r in pct.iterrows():
        add(r["table"], f"'%Lower' of '{r['row']}' ({r['column']}) does not follow from its own row",
            f"printed {r['text']}, 100(b-e)/b of the printed b and e = {r['recomputed']:.3f} % "
            f"(one unit of the printed last digit is {r['allowed_err']:g})",
            "arithmetic" if r["abs_err"] > 3 * r["allowed_err"] else "last-digit slip")
    rho = a[(a["quantity"] == "rho") & (a["verdict"] != "match")]
    for _, r in rho.iterrows():
        add(r["table"], f"ρ at {r['column']} is not λ·E[X]",
            f"printed {r['text']}, λ·E[X] = {r['recomputed']:.6f} (allowed: one unit of the last digit plus "
            f"the rounding of E[X], {r['allowed_err']:.6f})",
            "arithmetic" if r["abs_err"] > 3 * r["allowed_err"] else "last-digit slip")
    # ---- E[X] of Tables 5.2-5.6 and the E[X_1] behind it
    x1 = ex1_check()
    own = x1.groupby("table").first()
    t51 = _ex1_table51()
    not51 = [f"{t} ({own.loc[t, 'own_ex1_us'] * own.loc[t, 'c']:g}/{own.loc[t, 'c']} = {own.loc[t, 'own_ex1_us']:.4g})"
             for t in own.index if not np.isclose(t51.to_numpy(), own.loc[t, "own_ex1_us"], rtol=0, atol=1e-9).any()]
    from51 = [f"{t}: {own.loc[t, 'own_ex1_us']:.4g} = Table 5.1 at "
              f"{int(t51.index[np.isclose(t51.to_numpy(), own.loc[t, 'own_ex1_us'], rtol=0, atol=1e-9)][0])} cps"
              for t in own.index if np.isclose(t51.to_numpy(), own.loc[t, "own_ex1_us"], rtol=0, atol=1e-9).any()]
    add("5.2-5.6", "the 'E[X_c]' row is c × E[X_1] with E[X_1] from different Table 5.1 columns, and one "
        "value from none",
        "E[X_c]/c = " + "; ".join(from51) + (f"; {', '.join(not51)} is no Table 5.1 value (its E[X] row: "
                                           + ", ".join(f"{v:g}" for v in t51) + ")" if not51 else ""),
        "undocumented input")
    bad = x1[~x1["consistent"]]
    if len(bad):
        hidden = bad[bad["rel_diff_own"] <= 0.01]
        add(", ".join(sorted(bad["table"].unique())), f"{len(bad)} printed E[X] cells are β × c × an E[X_1] other "
            "than their own table's E[X_c]/c",
            "; ".join(f"{r.table} at {r.cps} cps: E[X] {r.ex_us:g} = β {r.beta:g} × {r.c} × E[X_1] in "
                      f"[{r.ex1_lo_us:.2f}, {r.ex1_hi_us:.2f}], own {r.own_ex1_us:.4g} ({r.rel_diff_own:.2%} off); "
                      f"fits Table 5.1's {r.table51_match or 'nothing'}" for r in bad.itertuples())
            + (f". {len(hidden)} of them are within 1 % and pass any 1 % tolerance: 65.16 and 65.61 "
               "(Table 5.1 at 2000 and 1500 cps) are the same digits swapped" if len(hidden) else ""),
            "inconsistent cell", symptoms=len(bad))
    # ---- eq. 5.6 and the drop model
    bc = beta_check()
    reproduced = bc[bc["rel_err"] <= 0.001]
    add("5.2-5.6", "eq. 5.6 reproduces only the beta of the highest-rate column of each table",
        f"{len(reproduced)} of {len(bc)} printed beta within 0.1 % of eq. 5.6, at "
        + ", ".join(f"c={r.c}/{r.cps} cps" for r in reproduced.itertuples())
        + f"; the others differ by up to {bc['rel_err'].max():.0%}; at fixed c {beta_trend_text()}", "model")
    # eq. 5.6's λ: the text calls it the call-arrival rate; only packets/s gives the printed β
    units = []
    for r in reproduced.itertuples():
        units.append(f"c={r.c}, {r.cps} cps: {float(beta_eq56(r.lam_pps, r.c)):.4g} with λ = {r.lam_pps:.0f} "
                     f"packets/s, {float(beta_eq56(r.cps, r.c)):.3f} with λ = {r.cps} calls/s "
                     f"(printed {r.beta_printed:g})")
    add("5.2-5.6", "eq. 5.6 calls its λ the call-arrival rate, but only λ in packets/s (6 × the call rate) "
        "reproduces the printed β", "; ".join(units), "text vs equation")
    mvm = model_vs_measured()
    meas = mvm[mvm["drop_rate_measured"] > 0]
    far = meas[(meas["ratio"] > 1.5) | (meas["ratio"] < 1 / 1.5)]
    add("5.2-5.6", "where M/M/c/K and the measured drop rate part ways",
        "model/measured ratio " + ", ".join(f"{r.table} {r.cps} cps: {r.ratio:.3g} (rho {r.rho:.3f})"
                                          for r in far.itertuples())
        + f"; within ×1.5 in the other {len(meas) - len(far)} of the {len(meas)} columns with a measured "
          f"drop rate ({len(mvm) - len(meas)} column(s) measured no drop)", "model validity")
    tiny = meas[meas["p_block_eq56_chain"] < 1e-4]
    add("5.2-5.6", "with beta from eq. 5.6 (instead of the printed beta) the drop model predicts no drops "
        "where drops were measured",
        f"{len(tiny)} of {len(meas)} columns with a measured drop rate "
        f"({tiny['drop_rate_measured'].min():.4g}-{tiny['drop_rate_measured'].max():.4g}) get P_B between "
        f"{tiny['p_block_eq56_chain'].min():.1e} and {tiny['p_block_eq56_chain'].max():.1e}; so the printed beta of "
        "those columns were fitted, not computed from eq. 5.6", "model")
    dp = a[(a["quantity"] == "drop_prob_model")]
    big = dp.loc[dp["published"].idxmax()]
    mb = mvm[(mvm["table"] == big["table"]) & (mvm["cps"] == _cps(big["column"]))].iloc[0]
    add(big["table"], f"drop probability (model) {big['text']} at {big['column']} is "
        f"{big['published'] / mb['drop_rate_measured']:.1f} times the measured rate",
        f"M/M/c/K with the printed E[X] gives {big['recomputed']:.4g} (rho = {mb['rho']:.3f} > 1), "
        f"measured {mb['drop_rate_measured']:.4g}: not a typo for {big['published'] / 10:g} but the model overshooting",
        "model validity")
    dmc = drop_model_cells(a)
    others = dp[~dp.set_index(["table", "column"]).index.isin(
        [(r.table, f"{r.cps}cps") for r in dmc.itertuples()]) & dp["published"].gt(0)]
    for r in dmc.itertuples():
        add(r.table, f"drop probability (model) {r.printed} at {r.cps} cps does not follow from the table's own "
            "λ and E[X]", f"M/M/c/K with λ = {r.lam_pps:.0f} packets/s, E[X] = {r.ex_text} µs, c = {r.c}, K = "
            f"{K_THESIS} gives {r.recomputed:.4f} (ρ = {r.rho:.3f}); {r.printed} needs E[X] = {r.ex_needed_us:.2f} µs, "
            + ("which prints as the same" if r.within_rounding else f"which the printed {r.ex_text} excludes")
            + f"; the other {len(others)} non-zero model cells of Tables 5.2-5.6 are within "
            f"{others['rel_err'].max():.0%} of their recomputation; the measured drop rate was {r.measured:.4f}",
            "inconsistent cell")
    # ---- M/G/1 tables
    for tid in ("4.4", "4.5", "5.1"):
        w = w_model_check(tid)
        st = w[w["rho_recomputed"] < 1]
        bnd = md1_bound_check(tid)
        below = bnd[bnd["below_printed"]]
        sure = bnd[bnd["below_for_sure"]]
        extra = ""
        if len(below):
            extra = "; " + ", ".join(
                f"at {r.cps} cps the printed W {r.w_model_us:g} is below the M/D/1 value {r.w_md1_us:.1f} for the "
                f"printed E[X] {r.ex_us:g}, but E[X] = {r.ex_at_bound_us:.3f} (which prints as {r.ex_us:g}) gives "
                f"exactly the printed W" for r in below.itertuples() if not r.below_for_sure)
            extra += (f"; {len(sure)} cell(s) below the bound whatever the rounding" if len(sure)
                      else "; so no printed W is below the bound beyond rounding (SCV ≥ 0 holds)")
        add(tid, "W (model) needs E[X^2] per message type, which is not printed; the printed W imply a "
            "near-deterministic service time",
            f"implied SCV E[X^2]/E[X]^2-1 from {st['scv_implied'].min():.3f} to {st['scv_implied'].max():.3f} "
            f"at the printed E[X]" + extra, "not reproducible exactly")
    wm = a[(a["quantity"] == "w_measured_us")]
    good = wm[wm["table"].isin(["4.4", "4.5"]) & (wm["published"] > 20)]
    add("4.4, 4.5", "'W (measured)' is K_rcv minus the modelled service components, so it depends on alpha",
        f"K_rcv(T4.1/4.2) - {K_STACK_US} - {K_COPY_US} - alpha*{KS_BASE_US} reproduces {int((good['verdict'] == 'match').sum())} "
        f"of {len(good)} cells above 20 us within 1 % (median rel. error {good['rel_err'].median():.2%})",
        "circularity")
    al = a[(a["table"] == "5.1") & (a["quantity"] == "alpha")]
    add("5.1", "alpha of Table 5.1 is not the ch. 4 curve and no formula is given",
        f"{int((al['verdict'] != 'match').sum())} of {len(al)} cells differ from the ch. 4 Poisson curve "
        f"(e.g. {al.iloc[0]['text']} vs {al.iloc[0]['recomputed']:.3g} at {al.iloc[0]['column']})",
        "undocumented input")
    for key, g, tabs in ct_groups:
        flip = _comparison_flip(key, g, tabs)
        add(", ".join(tabs), f"{key[0]} mode, {key[1]} core(s), {key[2]} threads, {key[3]} cps printed with "
            f"different values in different tables" + (flip[0] if flip else ""),
            "; ".join(f"{_QNAME.get(r.quantity, r.quantity)}: {r.values}" for r in g.itertuples())
            + f" (largest difference {g['max_rel_diff'].max():.1%})" + (flip[1] if flip else ""),
            "conclusion" if flip else "cross-table", symptoms=len(g))
    # ---- the text against its own tables
    for r in text_claims().query("not agrees").itertuples():
        add(r.source.replace("Tables ", "").replace("Table ", ""), f"the text ({r.where}) states {r.claim} "
            f"as {r.text_says}, its table says otherwise", f"{r.contradiction} ({r.cells})", "text vs table")
    slc = same_load_comparisons()
    in_block = lambda r: r.cores == 1 and r.threads == 16 and "6.5" in (r.baseline_table, r.enhanced_table)  # noqa: E731
    rev = [r for r in slc.itertuples() if (r.pdr_worse or r.k_rcv_worse) and not r.in_comparison
           and (r.baseline_table, r.threads, r.cps) not in copied and not in_block(r)]
    if rev:
        def one(r):
            parts = []
            if r.pdr_worse:
                parts.append(f"PDR {r.drops_b}/{r.msgs_b} = {100 * r.pdr_b:.3f} % baseline, {r.drops_e}/{r.msgs_e} = "
                             f"{100 * r.pdr_e:.3f} % enhanced ({100 * (r.pdr_e / r.pdr_b - 1):+.1f} %)")
            if r.k_rcv_worse:
                parts.append(f"K_rcv {r.k_rcv_b:g} against {r.k_rcv_e:g} µs ({100 * (r.k_rcv_e / r.k_rcv_b - 1):+.1f} %)")
            return (f"Tables {r.baseline_table}/{r.enhanced_table}, {r.threads} threads at {r.cps} cps: "
                    + ", ".join(parts))
        tabs = sorted({t for r in rev for t in (r.baseline_table, r.enhanced_table)}, key=float)
        add(", ".join(tabs), "at the same load the enhanced mode is not always better, against \"for the same load "
            "value, ... always improves the SPS performance in terms of drop rate and waiting time\" (§6.4.2, §7.5)",
            "; ".join(one(r) for r in rev) + ". The comparison tables (6.3-7.9) quote only the load where the "
            "baseline crosses the threshold, so none of these loads is compared there", "text vs table",
            symptoms=len(rev))
    g = recomputed_gains()
    worse = g[(g["pct_lower_recomputed"] < 0) & g["recomputed_from_counts"]]
    for r in worse.itertuples():
        add(r.table, f"with every PDR recomputed from its counts, the enhanced mode drops more than the baseline "
            f"at {r.threads} threads, {r.cps} cps, against the thesis's claim of an improvement",
            f"baseline {r.pdr_baseline_recomputed:.4f} (printed {r.pdr_baseline_printed:g}), enhanced "
            f"{r.pdr_enhanced_recomputed:.4f} (printed {r.pdr_enhanced_printed:g}): {-r.pct_lower_recomputed:.1f} % "
            f"higher instead of the printed {r.pct_lower_printed:g} % lower; §6.4 states improvements from about "
            f"0.5 % upwards for this threshold", "conclusion")
    cap = capacity_check()
    add("7.2, 7.5, 7.8", "eq. 7.1 capacity vs the highest load with PDR <= 1 % (enhanced mode)",
        "; ".join(f"{r.cores} cores: T={r.threads_eq71} -> {r.capacity_eq71_cps} cps vs measured "
                  f"{r.best_threads_measured} threads at {r.best_cps_measured} cps ({r.rel_err:.0%})"
                  for r in cap.itertuples()), "model validity")
    c = c11_check()
    add("4.4, 5.1, 7.2, 7.5, 7.8", f"C₁,₁ = {c['c11_cps']:.0f} calls/s (§7.6, \"established in earlier chapters\") fits "
        "the chapter-4 machine, not the one-thread runs on the Xeon of chapters 5-6",
        f"Table 4.4 (one thread, Core i3, Poisson): ρ = {c['t44_rho_lo']:g} at {c['t44_cps_lo']} and "
        f"{c['t44_rho_hi']:g} at {c['t44_cps_hi']} cps, so ρ = 1 near {c['t44_rho1_cps']:.0f} cps; Table 5.1 (one "
        f"thread, Xeon E5540): no drop up to {c['t51_last_zero_cps']} cps, drop rate {100 * c['t51_drop_lo']:.3f} % at "
        f"{c['t51_cps_lo']} and {100 * c['t51_drop_hi']:.3f} % at {c['t51_cps_hi']} cps, so 1 % near "
        f"{c['t51_drop1_cps']:.0f} cps (linear interpolation): {c['t51_drop1_cps'] / c['c11_cps']:.1f} times the "
        "C₁,₁ eq. 7.1 multiplies", "undocumented input")
    return pd.DataFrame(items)


def _comparison_flip(key, g: pd.DataFrame, tabs: list[str]) -> tuple[str, str] | None:
    """If a cross-table disagreement involves a comparison table's K_rcv or PDR and the two printed
    values give "% lower" of opposite sign, (finding suffix, evidence suffix) saying so."""
    mode, cores, threads, cps = key
    comp = [t for t in tabs if t in _COMPARISON]
    if not comp:
        return None
    w = thesis.wide(comp[0])
    row = w[(w["threads"] == threads) & (w["cps"] == cps)]
    if len(row) != 1:
        return None
    other = "baseline" if mode == "enhanced" else "enhanced"
    for q in ("k_rcv_us", "pdr"):
        gq = g[g["quantity"] == q]
        if not len(gq):
            continue
        vals = [(v.split(":")[0].strip()[1:], float(v.split(":")[1])) for v in gq["values"].iloc[0].split(";")]
        ref = float(row[f"{q}_{other}"].iloc[0])
        pct = {t: 100 * ((ref - x) if mode == "enhanced" else (x - ref)) / (ref if mode == "enhanced" else x)
               for t, x in vals}
        if min(pct.values()) < 0 < max(pct.values()):
            name = _QNAME.get(q, q)
            return (f"; the two {name} values decide whether the enhanced mode improved there",
                    f". Against the {other} {name} of {ref:g}, the enhanced {name} is "
                    + " and ".join(f"{abs(p):.1f} % {'lower' if p > 0 else 'higher'} with Table {t}'s value"
                                   for t, p in pct.items())
                    + "; the thesis states that for the same load the enhanced mode always improves the waiting "
                      "time (§7.5)")
    return None
