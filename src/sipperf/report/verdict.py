"""The verdict: what a VoIP operations engineer hands to a manager, in plain words, with the
numbers behind each sentence.

From the per-run measurements (:class:`sipperf.report.runs.RunMeasure`) and the fit
(:class:`sipperf.fit.Fit`) it states the utilisation at the highest rate run, the 1 %-drop knee
(measured where the runs bracket it, and as the model predicts it), the headroom, which model
fits and by how much, and C_{1,1}; and, as plainly, what cannot be concluded from these data and
why.  Thresholds for "fits": the median absolute error of the M/G/1 mean wait within
:data:`MG1_FITS_PCT` (roughly within :data:`MG1_ROUGH_PCT`), the M/M/c/K knee within
:data:`KNEE_FITS_PCT` of the measured one.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["verdict", "MG1_FITS_PCT", "MG1_ROUGH_PCT", "KNEE_FITS_PCT"]

MG1_FITS_PCT = 20.0
MG1_ROUGH_PCT = 35.0
KNEE_FITS_PCT = 15.0
#: runs up to this utilisation are used to judge M/G/1 (beyond, the mean wait of a finite run
#: is far from its stationary value)
MG1_MAX_RHO = 0.95


def _f(x: float, nd: int = 0) -> str:
    if x is None or not math.isfinite(x):
        return "n/a"
    return f"{x:,.{nd}f}"


def _ci(c) -> str:
    if not c or any(v is None or not math.isfinite(v) for v in c):
        return ""
    return f" (95 % CI {_f(c[0])}–{_f(c[1])})"


def verdict(measures: list, fit, msgs_per_call: float) -> dict[str, Any]:
    """The verdict as ``{"headline": [sentences], "cannot": [sentences], "warnings": [...],
    "numbers": {...}, "models": {...}}``."""
    head: list[str] = []
    cannot: list[str] = []
    numbers: dict[str, Any] = {}
    models: dict[str, Any] = {}
    proxy_runs = [m for m in measures if m.has_sojourn]
    if not measures:
        return {"headline": ["No run could be read."], "cannot": [], "warnings": [], "numbers": {}, "models": {}}
    if not proxy_runs:
        kinds = sorted({m.vantage for m in measures})
        head.append("These captures hold no proxy (vantage: " + ", ".join(kinds) + "): the report shows what the "
                    "capture point saw — RFC 6076 call metrics, request→response times per transaction, "
                    "retransmissions and message counts.")
        cannot.append("Service demand, utilisation, the 1 %-drop knee, the headroom and the models need the "
                      "proxy's ingress and egress instants: capture on the proxy's host (both sides of it), or "
                      "give its instrumented logs or tracepoints. If a proxy is in the capture but was not "
                      "recognised, name it with --proxy ip:port.")
        return {"headline": head, "cannot": cannot, "warnings": _warnings(measures), "numbers": numbers,
                "models": models}
    if fit is None or not fit.per_run:
        cannot.append("The model fit failed (see the notes): only the measurements are shown.")
        return {"headline": head, "cannot": cannot, "warnings": _warnings(measures), "numbers": numbers,
                "models": models}
    pr = {d["run"]: d for d in fit.per_run}
    endpoint = [m.label for m in measures if not m.has_sojourn and m.vantage == "endpoint"]
    too_few = [m.label for m in measures if not m.has_sojourn and m.vantage != "endpoint"]
    if endpoint:
        head.append(f"Run{'s' if len(endpoint) > 1 else ''} {', '.join(endpoint)} hold{'' if len(endpoint) > 1 else 's'} "
                    f"no proxy (an endpoint's view): only {'their' if len(endpoint) > 1 else 'its'} call metrics are shown; "
                    "the rest is from the others.")
    if too_few:
        cannot.append(f"Run{'s' if len(too_few) > 1 else ''} {', '.join(too_few)}: fewer than two messages with both "
                      "their arrival and their departure at the proxy, so no time in the proxy to measure.")
    proxies = sorted({m.proxy_id for m in proxy_runs if getattr(m, "proxy_id", "")})
    if len(proxies) > 1:
        cannot.append("These runs come from different proxies (" + ", ".join(proxies[:6])
                      + (" …" if len(proxies) > 6 else "") + "): the fitted constants mix machines and "
                      "configurations. Fit each proxy's runs on their own (one report per proxy).")
    # utilisation at the highest rate run below the knee
    below = [m for m in proxy_runs if not (math.isfinite(m.pdr) and m.pdr >= 0.01)]
    top = max(below or proxy_runs, key=lambda m: m.lam_cps if math.isfinite(m.lam_cps) else -1)
    rho = pr.get(top.label, {}).get("rho_run", float("nan"))
    rho_src = "this run's own service time"
    if not math.isfinite(rho):
        rho = pr.get(top.label, {}).get("rho", float("nan"))
        rho_src = "the fitted service demand"
    numbers.update({"top_run": top.label, "top_rate_cps": top.lam_cps, "top_rho": rho})
    c = pr.get(top.label, {}).get("threads", 1)
    if math.isfinite(top.lam_pps) and math.isfinite(rho) and rho >= 1:
        head.append(f"At {_f(top.lam_cps)} calls/s ({_f(top.lam_pps)} messages/s, run {top.label}) the offered load "
                    f"is ρ = {rho:.2f} by {rho_src}: more work arrives than the proxy can serve; it is busy all "
                    "the time and its queue grows for as long as the load lasts.")
    elif math.isfinite(top.lam_pps) and math.isfinite(rho):
        head.append(f"At {_f(top.lam_cps)} calls/s ({_f(top.lam_pps)} messages/s, run {top.label}, the highest "
                    f"rate {'without' if below else 'with'} 1 % drops), the proxy is busy about {_f(100 * rho)} % of "
                    f"the time (utilisation ρ = λ·E[X]{'·β' if c > 1 else ''} from {rho_src}"
                    f"{'' if c == 1 else f', {c} workers'}).")
    else:
        cannot.append(f"Run {top.label} is too short to measure its arrival rate: its utilisation cannot be "
                      "estimated (the service time is then its mean time in the proxy, without a queueing "
                      "correction).")
    def _rho(lab):
        d = pr.get(lab, {})
        v = d.get("rho_run", float("nan"))
        return v if math.isfinite(v) else d.get("rho", 0.0)

    sat = [m.label for m in proxy_runs if _rho(m.label) >= 1]
    if sat:
        head.append(f"Runs at or beyond saturation (ρ ≥ 1): {', '.join(sat)}; their "
                    "waits grow for as long as the load lasts, and their means depend on the run's length.")
    numbers["saturated_runs"] = sat
    # knees and headroom
    knees = {k["threads"]: k for k in fit.knees}
    kk = knees.get(c) or (next(iter(knees.values())) if knees else None)
    if kk is not None:
        mk, cen = kk["measured_cps"], kk["measured_censored"]
        model = kk["model_cps"]
        numbers.update({"knee_measured_cps": mk if not cen else float("nan"), "knee_measured_censored": cen,
                        "knee_model_cps": model, "knee_model_ci95": kk["model_ci95_cps"],
                        "knee_measured_ci95": kk.get("measured_ci95_cps")})
        if not cen:
            head.append(f"Drops reach 1 % at about {_f(mk)} calls/s{_ci(kk.get('measured_ci95_cps'))} "
                        f"(measured: interpolated between the runs around it).")
            knee, src = mk, "measured"
        elif cen == "no runs":
            knee, src = model, "model"
        elif cen == "above":
            head.append(f"No run reached 1 % drops (highest rate {_f(kk['highest_rate_cps'])} calls/s).")
            knee, src = model, "model"
        else:
            head.append(f"Even the lowest-rate run dropped 1 % or more: the knee is below {_f(mk)} calls/s.")
            knee, src = float("nan"), ""
        if math.isfinite(model):
            head.append(f"The M/M/{c}/K model (K = {_f(kk['k_pkts'])} packets) with the fitted service demand "
                        f"predicts the knee at {_f(model)} calls/s{_ci(kk['model_ci95_cps'])}"
                        + (f", {_f(100 * (model - mk) / mk)} % from the measured one." if not cen and mk > 0 else "."))
        ref = top.lam_cps
        if kk["model_cps"] is not None and len(proxy_runs) == 1 and src == "model":
            cannot.append("The knee above is the model's, from a single run: it assumes the service time stays "
                          "what this run measured as the load grows.")
        if math.isfinite(knee) and math.isfinite(ref) and ref > 0:
            hr = knee / ref - 1
            numbers.update({"headroom_fraction": hr, "headroom_from_cps": ref, "headroom_knee_source": src})
            if hr >= 0:
                head.append(f"Headroom: the {src} knee is {_f(100 * hr)} % above {_f(ref)} calls/s, the highest "
                            f"rate run below it (about {_f(knee - ref)} calls/s more).")
            else:
                head.append(f"No headroom: {_f(ref)} calls/s is already {_f(-100 * hr)} % beyond the {src} knee.")
    # which model fits
    mg1_rows = [d for d in fit.per_run if d.get("threads", 1) == 1 and math.isfinite(d.get("w_err_pct", float("nan")))
                and d.get("rho", 9) < MG1_MAX_RHO and d["run"] != (fit.base.run if fit.base else None)
                and (not math.isfinite(d.get("pdr_meas", float("nan"))) or d["pdr_meas"] <= 1e-3)]
    if len(mg1_rows) >= 2:
        err = np.array([abs(d["w_err_pct"]) for d in mg1_rows])
        med, mx = float(np.median(err)), float(err.max())
        verdict_word = ("fits" if med <= MG1_FITS_PCT else "fits roughly" if med <= MG1_ROUGH_PCT else "does not fit")
        models["mg1"] = {"verdict": verdict_word, "median_abs_err_pct": med, "max_abs_err_pct": mx,
                         "runs": [d["run"] for d in mg1_rows]}
        head.append(f"M/G/1 with the fitted α(λ) {verdict_word} the mean wait: median error {_f(med)} %, "
                    f"largest {_f(mx)} % over {len(mg1_rows)} one-worker runs at ρ < {MG1_MAX_RHO}.")
        ca = [m.ca2 for m in proxy_runs if math.isfinite(m.ca2)]
        if verdict_word != "fits" and ca and max(ca) > 1.3:
            head.append(f"Part of the misfit is the arrivals: call inter-arrival SCV up to {_f(max(ca), 1)} "
                        "(Poisson: 1), burstier than the model assumes.")
    else:
        cannot.append("M/G/1 cannot be tested: it needs one-worker runs without drops at two rates or more "
                      "besides the lightest one (each run's α is fitted to that run, so one run proves nothing).")
    if kk is not None and not kk["measured_censored"] and math.isfinite(kk["model_cps"]) and kk["measured_cps"] > 0:
        e = 100 * (kk["model_cps"] - kk["measured_cps"]) / kk["measured_cps"]
        w = "fits" if abs(e) <= KNEE_FITS_PCT else "does not fit"
        models["mmck"] = {"verdict": w, "knee_err_pct": e}
        head.append(f"M/M/c/K {w} the knee ({'+' if e >= 0 else ''}{_f(e)} %).")
    elif kk is not None:
        cannot.append("The M/M/c/K knee cannot be checked against a measurement: no set of runs brackets 1 % drops "
                      "(add runs at higher rates until the drop rate passes 1 %).")
    # capacity rule
    cc = fit.constants.get("c11_cps")
    if cc:
        numbers["c11_cps"] = cc["value"]
        numbers["c11_ci95"] = cc["ci95"]
        cap4 = next((r for r in fit.capacity if r["processors"] == 1 and r["cores"] == 4), None)
        head.append(f"Capacity rule C_p,m = T_p,m·C_1,1 (thesis eq. 7.1): C_1,1 = {_f(cc['value'])} calls/s"
                    f"{_ci(cc['ci95'])} from your runs (the thesis: 1,000 on 2010 hardware)"
                    + (f"; 4 cores on one processor would give about {_f(cap4['capacity_cps'])} calls/s "
                       "(an extrapolation: the rule was fitted to at most 6 cores)." if cap4 else "."))
    if "beta" not in fit.constants:
        cannot.append(next((n for n in fit.notes if n.startswith("β is not fitted")), "β is not fitted."))
    if not fit.constants.get("alpha", {}).get("identified"):
        cannot.append("α(λ) is not fitted: the report assumes the service time does not change with load "
                      "(it needs one-worker runs without drops at two rates or more).")
    if len(proxy_runs) == 1:
        cannot.append("One run only: the load–latency and load–drop curves, α(λ) and every model check need runs "
                      "at several rates; the knee assumes the service time stays as measured at this rate.")
    if fit.base is not None and fit.base.kind == "sojourn":
        cannot.append("No tracepoints: the sojourn cannot be split into wait and service, so the service demand "
                      "is the light-load sojourn minus its M/G/1 wait, and α scales the whole service time "
                      "(service inflation) rather than only the socket-queue part (eq. 4.4).")
    return {"headline": head, "cannot": cannot, "warnings": _warnings(measures), "numbers": numbers,
            "models": models}


def _warnings(measures) -> list[str]:
    """Every run's warnings; the same kind of warning in several runs is said once, naming them."""
    import re

    out: list[str] = []
    merged: dict[str, list[str]] = {}
    for m in measures:
        for w in m.warnings:
            if w.startswith("non-Poisson call arrivals"):
                x = re.search(r"c_a² = ([0-9.]+)", w)
                merged.setdefault("arrivals", []).append(f"{m.label} ({x.group(1) if x else '?'})")
            else:
                out.append(f"{m.label}: {w}")
    if merged.get("arrivals"):
        out.insert(0, "non-Poisson call arrivals (inter-arrival SCV c_a²; Poisson gives 1) in "
                   + ", ".join(merged["arrivals"]) + ". M/G/1 (eq. 4.2) assumes Poisson arrivals: with burstier "
                   "ones (c_a² > 1) its predicted wait is too low, with more regular ones too high (Kingman: W "
                   "grows with (c_a² + c_s²)/2).")
    return out
