"""The report's tables as DataFrames with human headers and units (no index column): the same
tables in the HTML page, the notebook ``notebooks/analyze_your_logs.md`` and the book page
"Your own proxy".  Each takes a :class:`~sipperf.report.result.Report`."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

__all__ = ["account", "runs_compared", "constants", "service_demand", "predictions", "capacity",
           "components", "verdict_markdown", "ci_text", "knees", "knee_rates", "cpu"]


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


RUN_COLUMNS = {"run": "run", "vantage": "vantage", "transport": "transport", "threads": "workers",
               "offered_cps": "offered calls/s", "rate_cps": "calls/s",
               "rate_pps": "messages/s", "calls": "calls", "warmup_s": "warm-up (s)", "window_s": "window (s)",
               "q_kind": "Q", "q_mean_us": "mean Q (µs)", "q_ci95_us": "± 95 % (µs)",
               "sojourn_p50_us": "sojourn p50 (µs)", "sojourn_p99_us": "sojourn p99 (µs)",
               "pdr_percent": "drops (%)", "pdr_ci95_percent": "± 95 % (pp)", "failed_percent": "failed calls (%)",
               "srd_p99_ms": "setup p99 (ms)", "utilisation": "utilisation ρ",
               "utilisation_from": "ρ from", "cpu_share": "CPU-s per s", "queue_growing": "queue grows",
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
            rows.append({"constant": {"service_demand_us": "service demand E[X] per message (µs)"
                                      + (", upper bound (from the sojourn)" if c.get("upper_bound") else ""),
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
    upper = bool(fit.constants.get("service_demand_us", {}).get("upper_bound"))
    return sv[["msg_type", "share", "ex_us", "95 % interval", "b_us", "r_us", "run"]].rename(columns={
        "msg_type": "message type", "share": "share of messages",
        "ex_us": "E[X] upper bound (µs)" if upper else "E[X] (µs)",
        "b_us": "B (µs)", "r_us": "R (µs)", "run": "from run"})


PRED_COLUMNS = {"run": "run", "threads": "workers", "lam_pps": "messages/s", "rho": "model load λE[X]",
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
    cp["what"] = "model prediction (eq. 7.1), not a measurement"
    return cp[["processors", "cores", "threads", "capacity_cps", "95 % interval", "what"]].rename(columns={
        "processors": "processors p", "cores": "cores m", "threads": "threads T_p,m",
        "capacity_cps": "C_p,m predicted (calls/s)"})


def knees(rep) -> pd.DataFrame:
    """Per worker count: the measured 1 %-drop knee with its 95 % interval and whether the runs
    locate it (else what to run next), and the M/M/c/K model's knee with its check."""
    fit = rep.fit
    if fit is None or not fit.knees:
        return pd.DataFrame()
    rows = []
    for k in fit.knees:
        lo, hi = k.get("measured_ci95_cps") or [float("nan")] * 2
        cen = k.get("measured_censored", "")
        if cen == "":
            meas = f"{k['measured_cps']:,.0f}" if k.get("measured_located") else f"between {lo:,.0f} and {hi:,.0f}"
        elif cen == "above":
            meas = f"above {lo:,.0f}"
        elif cen == "below":
            meas = f"below {hi:,.0f}"
        else:
            meas = "–"
        model = k.get("model_cps", float("nan"))
        status = ("refuted by the runs" if k.get("model_refuted") else
                  "prediction (not checked)" if cen else "checked against the measured knee")
        rows.append({"workers": k["threads"], "knee measured (calls/s)": meas,
                     "95 % interval": ci_text([lo, hi], 0) if cen in ("", "above", "below") else "–",
                     "located": "yes" if k.get("measured_located") else "no",
                     "drop measurements": k.get("measured_probes", 0),
                     "what to run next": k.get("measured_next") or "–",
                     "M/M/c/K knee (calls/s)": model if model is not None and math.isfinite(model) else float("nan"),
                     "model": status})
    return pd.DataFrame(rows)


def knee_rates(rep, threads: int | None = None) -> pd.DataFrame:
    """The drop fraction at each rate the knee of one worker count rests on: measured (pooled over
    its replications) and the monotone fit, with the messages and replications behind it."""
    fit = rep.fit
    if fit is None or not fit.knees:
        return pd.DataFrame()
    k = next((x for x in fit.knees if threads is None or x["threads"] == threads), None)
    if k is None or not k.get("measured_rates"):
        return pd.DataFrame()
    t = pd.DataFrame(k["measured_rates"])
    return pd.DataFrame({"calls/s": t["rate_cps"], "drops (%)": 100 * t["pdr"],
                         "monotone fit (%)": 100 * t["pdr_fit"], "messages": t["messages"],
                         "replications": t["probes"], "steady": np.where(t["steady"], "yes", "no")})


def cpu(rep) -> pd.DataFrame:
    """The utilisation law on the proxy's CPU accounting, per worker count: CPU per call with its
    interval, the CPU used at no load, and the rate at which the CPUs it can use would be full."""
    fit = rep.fit
    if fit is None or not getattr(fit, "cpu", None):
        return pd.DataFrame()
    rows = []
    for x in fit.cpu:
        rows.append({"workers": x["threads"], "CPUs": x["cpus_how"], "points": x["n"],
                     "CPU per call (ms)": 1e3 * x["demand_s"],
                     "95 % interval (ms)": ci_text([1e3 * v for v in x["demand_ci95_s"]], 3),
                     "CPU at no load (CPU-s per s)": x["idle_share"],
                     "CPUs full at (calls/s)": x["capacity_cps"],
                     "95 % interval (calls/s)": ci_text(x["capacity_ci95_cps"], 0),
                     "from": ", ".join(x["runs"])})
    return pd.DataFrame(rows)


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
