"""The report's tables as DataFrames with human headers and units (no index column): the same
tables in the HTML page, the notebook ``notebooks/analyze_your_logs.md`` and the book page
"Your own proxy".  Each takes a :class:`~sipperf.report.result.Report`."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

__all__ = ["account", "runs_compared", "constants", "service_demand", "predictions", "capacity",
           "components", "verdict_markdown", "ci_text"]


def ci_text(ci, nd: int = 1) -> str:
    """``lo – hi`` of a 95 % interval, or ``–`` when it is unknown."""
    if not ci or any(v is None or not (isinstance(v, (int, float)) and math.isfinite(v)) for v in ci):
        return "–"
    return f"{ci[0]:,.{nd}f} – {ci[1]:,.{nd}f}"


_FORMATS = {"thesis_log": "proxy (instrumented log)", "lab-run": "proxy (tracepoints)",
            "lab-dataset": "proxy (tracepoints)", "sim": "proxy (simulated)"}


def account(rep) -> pd.DataFrame:
    """Per input file: format, vantage point, records read / parsed / skipped (by reason)."""
    rows = []
    for r in rep.runs:
        acc = r.account
        for f in ((acc.files or [acc]) if acc is not None else []):
            v = (f.details or {}).get("vantage") or {}
            rows.append({"run": r.label, "file": f.path, "format": f.source,
                         "vantage": v.get("kind") or _FORMATS.get(f.source, f.source),
                         "read": f.read, "parsed": f.parsed,
                         "skipped": ", ".join(f"{k}: {c}" for k, c in f.skipped.items()) or "none",
                         "messages": f.messages, "what follows": v.get("what_follows", "")})
    return pd.DataFrame(rows)


RUN_COLUMNS = {"run": "run", "vantage": "vantage", "threads": "workers", "rate_cps": "calls/s",
               "rate_pps": "messages/s", "calls": "calls", "warmup_s": "warm-up (s)", "window_s": "window (s)",
               "q_kind": "Q", "q_mean_us": "mean Q (µs)", "q_ci95_us": "± 95 % (µs)",
               "sojourn_p50_us": "sojourn p50 (µs)", "sojourn_p99_us": "sojourn p99 (µs)",
               "pdr_percent": "drops (%)", "pdr_ci95_percent": "± 95 % (pp)", "utilisation": "utilisation ρ",
               "calls_ca2": "calls c_a²", "retransmissions": "retrans."}


def runs_compared(rep) -> pd.DataFrame:
    """One row per run, by call rate: rate, window, mean Q with its CI, sojourn p50/p99, drops with
    their CI, utilisation, the calls' inter-arrival SCV."""
    from sipperf.report.result import runs_table

    t = runs_table(rep)
    out = t[[c for c in RUN_COLUMNS if c in t.columns]].rename(columns=RUN_COLUMNS)
    if "rate_cps" in t.columns:
        out = out.iloc[np.argsort(t["rate_cps"].to_numpy(dtype=float), kind="stable")]
    return out.reset_index(drop=True)


def constants(rep) -> pd.DataFrame:
    """The fitted constants with their 95 % intervals and the runs they came from."""
    fit = rep.fit
    rows = []
    if fit is None:
        return pd.DataFrame(rows)
    for name, c in fit.constants.items():
        if name == "alpha":
            for x, y, ci in zip(c["knots_pps"], c["values"], c["values_ci95"]):
                rows.append({"constant": f"α at λ = {x:,.0f} packets/s ({c['family']})", "value": y,
                             "95 % interval": ci_text(ci, 2), "from runs": ", ".join(c["runs"]), "how": c["scope"]})
        elif name == "beta":
            for term, var, lab in (("c_coef", "c", "β: per thread c"), ("lam_coef", "lam", "β: per packet/s"),
                                   ("const", "", "β: constant")):
                if var and var in c.get("fixed", []):
                    continue
                rows.append({"constant": lab, "value": c[term], "95 % interval": ci_text(c.get(term + "_ci95"), 5),
                             "from runs": ", ".join(c["runs"]), "how": c["how"]})
        else:
            rows.append({"constant": {"service_demand_us": "service demand E[X] per message (µs)",
                                      "b_us": f"B = {c.get('what', '')} (µs)",
                                      "c11_cps": "C₁,₁ (calls/s)"}.get(name, name),
                         "value": c["value"], "95 % interval": ci_text(c.get("ci95"), 1),
                         "from runs": ", ".join(c.get("runs", [])), "how": c.get("how", c.get("what", ""))})
    return pd.DataFrame(rows)


def service_demand(rep) -> pd.DataFrame:
    """E[X] per message type at the light-load run, with its 95 % interval: B + R."""
    fit = rep.fit
    if fit is None or not fit.service:
        return pd.DataFrame()
    sv = pd.DataFrame(fit.service)
    sv["95 % interval"] = [ci_text(c, 1) for c in sv["ex_ci95_us"]]
    return sv[["msg_type", "share", "ex_us", "95 % interval", "b_us", "r_us", "run"]].rename(columns={
        "msg_type": "message type", "share": "share of messages", "ex_us": "E[X] (µs)",
        "b_us": "B (µs)", "r_us": "R (µs)", "run": "from run"})


PRED_COLUMNS = {"run": "run", "threads": "workers", "lam_pps": "messages/s", "rho": "ρ (model)",
                "scv": "SCV of X", "alpha_run": "α of run", "alpha_fit": "α fitted", "w_meas_us": "W measured (µs)",
                "w_pred_us": "W M/G/1 (µs)", "w_err_pct": "error (%)", "pdr_meas": "drops measured",
                "pdr_pred": "drops M/M/c/K", "beta_run": "β of run", "beta_fit": "β fitted", "k_pkts": "K (packets)"}


def predictions(rep) -> pd.DataFrame:
    """Per run: the M/G/1 mean wait and the M/M/c/K drop probability next to the measured ones."""
    fit = rep.fit
    if fit is None or not fit.per_run:
        return pd.DataFrame()
    pr = pd.DataFrame(fit.per_run)
    return pr[[k for k in PRED_COLUMNS if k in pr.columns]].rename(columns=PRED_COLUMNS)


def capacity(rep) -> pd.DataFrame:
    """C_{p,m} = T_{p,m} C_{1,1} (eq. 7.1) for a few machines, with the interval of C_{1,1}."""
    fit = rep.fit
    if fit is None or not fit.capacity:
        return pd.DataFrame()
    cp = pd.DataFrame(fit.capacity)
    cp["95 % interval"] = [ci_text(c, 0) for c in cp["ci95_cps"]]
    return cp[["processors", "cores", "threads", "capacity_cps", "95 % interval"]].rename(columns={
        "processors": "processors p", "cores": "cores m", "threads": "threads T_p,m",
        "capacity_cps": "C_p,m (calls/s)"})


def components(rep, run: str | None = None, component: str | None = None) -> pd.DataFrame:
    """Time components per message type (steady state): n, mean ± batch-means 95 % CI, median,
    p99 (µs); one run (default: the first) and optionally one component."""
    r = next((x for x in rep.runs if run is None or x.label == run), None)
    if r is None or r.measure is None or r.measure.components is None:
        return pd.DataFrame()
    c = r.measure.components
    if component is not None:
        c = c[c["component"] == component]
    return c.rename(columns={"msg_type": "message type", "mean_us": "mean (µs)", "ci95_hw_us": "± 95 % (µs)",
                             "ci_method": "CI", "median_us": "median (µs)", "p99_us": "p99 (µs)"}).reset_index(drop=True)


def verdict_markdown(rep) -> str:
    """The verdict as Markdown: the headline, what cannot be concluded, the warnings."""
    v = rep.verdict
    out = [f"- {s}" for s in v.get("headline", [])]
    if v.get("cannot"):
        out += ["", "**What these data cannot tell, and why**", ""] + [f"- {s}" for s in v["cannot"]]
    if v.get("warnings"):
        out += ["", "**Warnings**", ""] + [f"- {s}" for s in v["warnings"]]
    return "\n".join(out)
