"""The verdict: what a VoIP operations engineer hands to a manager, in plain words, with the
numbers behind each sentence -- and no sentence the data cannot carry.

From the per-run measurements (:class:`sipperf.report.runs.RunMeasure`) and the fit
(:class:`sipperf.fit.Fit`) it states, in this order:

1. **what the data can carry**: with too few calls, no arrival rate or a single rate, the first
   sentence says so and what to record next, and any model number is labelled a model prediction
   from those runs;
2. **the utilisation** at the highest rate run below the knee, and where it comes from: the
   proxy's CPU accounting (a measurement), the traced service time (tracepoints), or the sojourn
   (an *upper bound*: it includes waiting for a CPU).  A run is called saturated only when its
   own data show it (a growing queue, drops or retransmissions); a worker count nobody gave is
   said to be assumed;
3. **the knee**: measured from replicated probes (:func:`sipperf.fit.knee_from_probes`) with an
   interval that includes the gap between the rates run and the run-to-run spread; a sweep too
   coarse or too short gives "between A and B calls/s" and what to run next; the capacity the
   utilisation law gives on CPU accounting beside it;
4. **the headroom**, with the knee's interval;
5. **the models**: each checked against the runs; a refuted one is declared so, with the size of
   its miss, and is used for no knee, headroom or capacity;
6. **the capacity rule** (eq. 7.1) for cores not measured: a model prediction, shown with the
   rule's own measured error on the lab (:func:`sipperf.report.runs.lab_rule_miss`), never as a capacity.

Thresholds for "fits": the median absolute error of the M/G/1 mean wait within
:data:`MG1_FITS_PCT` (roughly within :data:`MG1_ROUGH_PCT`, beyond: refuted), the M/M/c/K knee
within :data:`KNEE_FITS_PCT` of the measured one.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["verdict", "MG1_FITS_PCT", "MG1_ROUGH_PCT", "KNEE_FITS_PCT", "MIN_CALLS", "RECORD_NEXT"]

MG1_FITS_PCT = 20.0
MG1_ROUGH_PCT = 35.0
KNEE_FITS_PCT = 15.0
#: runs up to this utilisation are used to judge M/G/1 (beyond, the mean wait of a finite run
#: is far from its stationary value)
MG1_MAX_RHO = 0.95
#: fewer calls than this over all the proxy runs carry no utilisation, knee or C_{1,1}
MIN_CALLS = 100
#: what to record when the data carry no verdict
RECORD_NEXT = ("runs of at least 20,000 messages (about 3,300 calls) each at three or more call rates, "
               "from light load up to and past 1 % drops, captured on the proxy's host (both sides of it) or "
               "with its tracepoints, with the proxy's worker count (--threads) and its CPU seconds "
               "(sipperf lab records them; else --cpu FILE)")


def _f(x: float, nd: int = 0) -> str:
    if x is None or not math.isfinite(x):
        return "n/a"
    return f"{x:,.{nd}f}"


def _ci(c) -> str:
    if not c or any(v is None or not math.isfinite(v) for v in c):
        return ""
    return f" (95 % CI {_f(c[0])}–{_f(c[1])})"


def _pct(x: float) -> str:
    """A drop fraction as a percentage with two significant digits (0.0021 -> 0.21 %)."""
    if x is None or not math.isfinite(x):
        return "n/a"
    v = 100 * x
    return ("0 %" if v == 0 else "< 0.001 %" if v < 1e-3 else f"{v:.2g} %" if v < 10 else f"{v:.0f} %")


def _finite(x) -> bool:
    return x is not None and isinstance(x, (int, float, np.floating)) and math.isfinite(float(x))


def _overload_evidence(m) -> list[str]:
    """What in a run's own data shows the proxy falling behind: a growing queue, drops,
    retransmissions (empty: none of them)."""
    ev = []
    if getattr(m, "queue_growing", None):
        ev.append("its queue grew through the run")
    if m.dropped:
        ev.append(f"{m.dropped:,} messages dropped")
    if m.retransmissions:
        ev.append(f"{m.retransmissions:,} retransmissions")
    tcp = getattr(m, "tcp", None) or {}
    if tcp.get("resets_proxy") and getattr(m, "loss_kind", "") == "failed calls":
        ev.append(f"the proxy reset {tcp['resets_proxy']:,} TCP connections")
    hs = getattr(m, "setup", None) or {}
    if hs.get("tls_late") or hs.get("tls_unanswered"):
        ev.append(f"{hs.get('tls_late', 0) + hs.get('tls_unanswered', 0):,} new TLS connections waited past the "
                  "deadline for the proxy's handshake")
    if tcp.get("zero_window_proxy"):
        ev.append(f"the proxy advertised a zero TCP window {tcp['zero_window_proxy']:,} times")
    if tcp.get("retransmissions") and getattr(m, "transport", "") in ("tcp", "tls", "ws", "wss"):
        ev.append(f"{tcp['retransmissions']:,} TCP segments retransmitted")
    return ev


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
    unread = [(m.label, g) for m in measures for g in getattr(m, "tls_unread", [])]
    numbers["tls_unread_runs"] = sorted({lab for lab, _ in unread})
    if unread:
        early = [x for x in unread if not x[1].get("handshake_in_capture", True)]
        head.append(f"{len(unread)} TLS connection{'s' if len(unread) > 1 else ''} could not be decrypted "
                    f"(run{'s' if len(numbers['tls_unread_runs']) > 1 else ''} {', '.join(numbers['tls_unread_runs'][:6])}): their messages are missing from "
                    "everything below, and a proxy whose other leg they were is not seen as one. "
                    + (f"{len(early)} of them opened before the capture began (no handshake in it, so no key "
                       "log can open them): start the capture before the connections open. " if early else "")
                    + (f"{len(unread) - len(early)} have no secrets in the key log given: add the key log of "
                       "the side that made them." if len(unread) > len(early) else "")).rstrip()
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

    # ---- what a run loses: datagrams over UDP, calls over a stream transport -------------------
    kinds = {getattr(m, "loss_kind", "drops") for m in proxy_runs}
    loss = "drops" if kinds == {"drops"} else "failed calls" if kinds == {"failed calls"} else "losses"
    numbers["loss_kind"] = loss
    numbers["transports"] = sorted({getattr(m, "transport", "") or "unknown" for m in proxy_runs})
    if loss != "drops":
        dl = next((m.setup.get("deadline_s") for m in proxy_runs if getattr(m, "setup", None)), 2.0)
        srd = [(m.lam_cps, m.setup.get("srd_p99_ms")) for m in proxy_runs if getattr(m, "setup", None)
               and _finite(m.setup.get("srd_p99_ms")) and _finite(m.lam_cps)]
        srd_txt = "; setup delay p99 " + ", ".join(f"{_f(v)} ms at {_f(r)} calls/s" for r, v in sorted(srd)) if srd else ""
        head.append(f"Over {'/'.join(t.upper() for t in numbers['transports'] if t != 'unknown') or 'a stream transport'} "
                    "the proxy drops nothing a capture could count: here the knee and the headroom rest on the "
                    "failed calls — attempts ending in 408, 500, 503 or 504, timed out, or without an answer "
                    f"within {_f(dl, 1)} s, and connections the proxy reset{srd_txt}. The capture sees a request when it is on the wire: a backlog "
                    "waiting in a caller's socket buffer is not, so the callers' own setup delays can be longer "
                    "(compare the load generator's statistics).")
    # ---- 0. what the data can carry -------------------------------------------------------------
    rated = [m for m in proxy_runs if _finite(m.lam_pps) and m.lam_pps > 0 and _finite(m.lam_cps)]
    rates = sorted({round(m.lam_cps, -1 if m.lam_cps >= 100 else 0) for m in rated})
    calls = sum(int(m.calls or 0) for m in proxy_runs)
    short: list[str] = []
    if calls < MIN_CALLS:
        short.append(f"{calls:,} call{'s' if calls != 1 else ''} in all (at least {MIN_CALLS} are needed)")
    if not rated:
        short.append("no run long enough to measure its arrival rate")
    elif len(rates) < 2:
        short.append(f"one call rate only ({_f(rated[0].lam_cps)} calls/s)")
    weak = bool(short) and (calls < MIN_CALLS or not rated)
    numbers["data_limits"] = short
    if weak:
        head.append("These data cannot carry a utilisation, a knee or C₁,₁: " + "; ".join(short)
                    + ". What to record next: " + RECORD_NEXT + ".")
    c_top = None

    # ---- 1. utilisation ----------------------------------------------------------------------------
    assumed = sorted({m.label for m in proxy_runs if m.fit_input.threads is None})
    if assumed:
        numbers["threads_assumed"] = True
        note = ("No worker count was given" + ("" if len(assumed) == len(proxy_runs) else
                                              f" for {', '.join(assumed[:4])}{' …' if len(assumed) > 4 else ''}")
                + ": the report assumed one worker (give --threads N; with N workers the utilisation per "
                  "worker is about 1/N of the one shown).")
        (head if not weak else cannot).append(note)
    # the reference rate: the highest whose own data show no overload (under 1 % lost, no growing queue)
    below = [m for m in rated if not (math.isfinite(m.pdr) and m.pdr >= 0.01) and not m.queue_growing
             and not getattr(m, "pushed_back", False)]
    top = max(below or rated, key=lambda m: m.lam_cps) if rated else None
    if top is not None:
        d = pr.get(top.label, {})
        c_top = int(d.get("threads", 1))
        rho, src, upper = float("nan"), "", False
        if _finite(d.get("rho_cpu")):
            rho, src = d["rho_cpu"], (f"the proxy's own CPU accounting: {_f(100 * top.cpu_share, 1)} CPU-seconds per "
                                       f"100 s, {top.cpu_source or 'meta.json'}")
        else:
            rho = d.get("rho_run", float("nan"))
            if not _finite(rho):
                rho = d.get("rho", float("nan"))
            how = d.get("rho_how", "")
            kd = next((k for k in fit.knees if k["threads"] == c_top), {})
            if not _finite(d.get("rho_run")) and how.startswith("β") or (how.startswith("fitted β")
                                                                        and kd.get("model_refuted")):
                cannot.append(f"Run {top.label} ({c_top} workers): its utilisation would rest on "
                              + ("β = 1 assumed (β was not fitted)" if how.startswith("β") else
                                 f"the β of the M/M/{c_top}/K model, which the runs refute")
                              + f" (that reading: ρ = {_f(rho, 2)}); it is not stated. To measure it, " + _cpu_hint() + ".")
                rho = float("nan")
            if top.fit_input.q_kind == "sojourn" and _finite(rho) and rho <= 0:
                # a sojourn read as all waiting (B = 0): "busy at most 0 %" would be no bound at all
                cannot.append(f"Run {top.label}: its utilisation cannot be read off the capture: the sojourns' "
                              "spread is too wide to split them into service and waiting (the M/G/1 reading puts "
                              "them all down to waiting).")
                rho = float("nan")
            if top.fit_input.q_kind == "sojourn":
                src, upper = ("the service time read off the sojourn t_dep − t_arr: an UPPER BOUND, since a message's "
                              "sojourn also holds any wait for a CPU (shared with the load generator or other "
                              "work)"), True
            else:
                src = "the service time on the traced path (tracepoints: K_sockq, K_copy, T_sip, K_snd)"
        numbers.update({"top_run": top.label, "top_rate_cps": top.lam_cps, "top_rho": rho,
                        "rho_source": "cpu" if src.startswith("the proxy's own CPU") else
                        ("sojourn upper bound" if upper else "traced"), "rho_upper_bound": upper})
        ev = _overload_evidence(top)
        per = d.get("rho_per", "worker")
        workers = f"{c_top} worker{'s' if c_top > 1 else ''}" + (" (assumed)" if top.fit_input.threads is None else "")
        if per == "CPU":
            workers += f" sharing {d['cpus']} CPU{'s' if d['cpus'] > 1 else ''}"
        numbers["top_rho_per"] = per
        where = f"At {_f(top.lam_cps)} calls/s ({_f(top.lam_pps)} messages/s, run {top.label}"
        if not _finite(rho):
            if not any(x.startswith((f"Run {top.label} ", f"Run {top.label}:")) for x in cannot):
                cannot.append(f"Run {top.label}: its utilisation cannot be estimated.")
        elif weak:
            cannot.append(f"{where}) the model reading of the utilisation is ρ = {rho:.2f} ({workers}, from {src}): "
                          "a model prediction from too little data, not a measurement.")
        elif rho >= 1 and (top.queue_growing or (math.isfinite(top.pdr) and top.pdr >= 0.01)):
            head.append(f"{where}) the proxy is past saturation: ρ = {rho:.2f} per {per} ({workers}, from {src}), "
                        f"and its own data show it: {', '.join(ev)}.")
        elif rho >= 1 and ev:
            head.append(f"{where}) the estimate ρ = {rho:.2f} per {per} ({workers}, from {src}) says saturated; the "
                        f"run shows {', '.join(ev)}, but its queue did not grow and it lost less than 1 %: at "
                        "most at the edge of saturation.")
        elif rho >= 1:
            head.append(f"{where}) the estimate ρ = {rho:.2f} per {per} ({workers}, from {src}) would mean more "
                        "work arrives than the proxy can serve, but this run shows no growing queue, no drops and "
                        "no retransmissions: the proxy kept up, so it was NOT saturated, and the estimate is too "
                        "high" + (" (more than one worker, or waits for a CPU counted as service)" if upper or assumed
                                  else "") + ". To measure it, " + _cpu_hint() + ".")
            numbers["top_rho_contradicted"] = True
        else:
            head.append(f"{where}, the highest rate {'without' if below else 'with'} 1 % {loss} or a growing queue) "
                        f"the proxy is busy {'at most ' if upper else 'about '}{_f(100 * rho)} % of the time per {per} "
                        f"({workers}; from {src}).")
        if upper and not _finite(d.get("rho_cpu")):
            cannot.append("From a capture alone the service demand is an upper bound (the sojourn includes "
                          "waiting for a CPU). To measure the utilisation, " + _cpu_hint() + ".")
    elif not weak:
        cannot.append("No run is long enough to measure its arrival rate: the utilisation cannot be estimated.")
    # the load as offered against the load that reached the proxy (the --cpu file's rate_cps)
    short_of = [(m.label, m.offered_cps, m.lam_cps) for m in proxy_runs
                if getattr(m, "offered_cps", None) and _finite(m.lam_cps) and m.lam_cps < 0.9 * m.offered_cps]
    numbers["short_of_offered"] = [lab for lab, _, _ in short_of]
    held = {m.label for m in proxy_runs if getattr(m, "held_back", False)}
    numbers["held_back_runs"] = sorted(held)
    if short_of:
        head.append("The load did not reach the proxy as offered: " + "; ".join(
            f"{lab} offered {_f(o)} calls/s, {_f(r)} reached it ({_f(100 * (1 - r / o))} % short"
            + (", the proxy's CPU full: the proxy held it back" if lab in held else "") + ")"
            for lab, o, r in short_of)
            + (". Where the proxy's CPU was full, the calls not yet sent waited in the callers, where the capture "
               "cannot see them: those runs are past the knee however few of their calls failed." if held else ".")
            + (" Elsewhere either" if held else " Either") * bool({lab for lab, _, _ in short_of} - held)
            + (" the load generator could not send faster (check its own CPU and statistics) or the proxy "
               "pushed back (over TCP, a full receive window): such a run is labelled by the rate that reached "
               "the proxy, and its failures as the generator counts them are not the proxy's alone."
               ) * bool({lab for lab, _, _ in short_of} - held))
    sat = [m.label for m in proxy_runs if m.queue_growing or (math.isfinite(m.pdr) and m.pdr >= 0.01)
           or getattr(m, "pushed_back", False)]
    if sat:
        head.append(f"Runs whose own data show overload (a growing queue, 1 % {loss} or more, or a zero TCP window "
                    f"from the proxy): {', '.join(sat)}; "
                    "their waits grow for as long as the load lasts, and their means depend on the run's length.")
    numbers["saturated_runs"] = sat
    _cpu_sentences(fit, pr, proxy_runs, c_top, head, cannot, numbers)

    # ---- 2-4. knee, model knee, headroom ------------------------------------------------------------
    knees = {k["threads"]: k for k in fit.knees}
    kk = knees.get(c_top) if c_top is not None else None
    kk = kk or (next(iter(knees.values())) if knees else None)
    ref = top.lam_cps if top is not None else float("nan")
    if kk is not None:
        _knee_sentences(kk, ref, weak, head, cannot, numbers, models, proxy_runs, loss)
        cap, cci = numbers.get("cpu_capacity_cps"), numbers.get("cpu_capacity_ci95_cps") or [float("nan")] * 2
        k_lo = (kk.get("measured_ci95_cps") or [float("nan")])[0]
        top_cap = cci[1] if _finite(cci[1]) else cap
        if (numbers.get("cpu_capacity_bounds_knee") and _finite(top_cap) and _finite(k_lo)
                and kk.get("measured_censored") in ("", "above") and k_lo > top_cap):
            _cpu_ceiling_against_knee(fit, c_top, proxy_runs, k_lo, top_cap, loss, head, numbers)

    # ---- 5. the wait model -----------------------------------------------------------------------------
    mg1_rows = [d for d in fit.per_run if d.get("threads", 1) == 1 and math.isfinite(d.get("w_err_pct", float("nan")))
                and d.get("rho", 9) < MG1_MAX_RHO and d["run"] != (fit.base.run if fit.base else None)
                and (not math.isfinite(d.get("pdr_meas", float("nan"))) or d["pdr_meas"] <= 1e-3)]
    if len(mg1_rows) >= 2:
        err = np.array([abs(d["w_err_pct"]) for d in mg1_rows])
        med, mx = float(np.median(err)), float(err.max())
        worst = mg1_rows[int(np.argmax(err))]
        word = ("fits" if med <= MG1_FITS_PCT else "fits roughly" if med <= MG1_ROUGH_PCT else "is refuted by")
        models["mg1"] = {"verdict": {"is refuted by": "refuted"}.get(word, word), "median_abs_err_pct": med,
                         "max_abs_err_pct": mx, "runs": [d["run"] for d in mg1_rows], "worst_run": worst["run"]}
        if word == "is refuted by":
            head.append(f"M/G/1 with the fitted α(λ) is refuted by these runs' mean waits: median error {_f(med)} %, "
                        f"largest {_f(mx)} % (run {worst['run']}: {_f(worst['w_pred_us'])} µs predicted, "
                        f"{_f(worst['w_meas_us'])} µs measured), over {len(mg1_rows)} one-worker runs at ρ < "
                        f"{MG1_MAX_RHO}; it is used for no knee, headroom or capacity.")
        else:
            head.append(f"M/G/1 with the fitted α(λ) {word} the mean wait: median error {_f(med)} %, "
                        f"largest {_f(mx)} % over {len(mg1_rows)} one-worker runs at ρ < {MG1_MAX_RHO}.")
        ca = [m.ca2 for m in proxy_runs if math.isfinite(m.ca2)]
        if word != "fits" and ca and max(ca) > 1.3:
            head.append(f"Part of the misfit is the arrivals: call inter-arrival SCV up to {_f(max(ca), 1)} "
                        "(Poisson: 1), burstier than the model assumes.")
    else:
        cannot.append("M/G/1 cannot be tested: it needs one-worker runs without drops at two rates or more "
                      "besides the lightest one (each run's α is fitted to that run, so one run proves nothing).")

    # ---- 6. the capacity rule ------------------------------------------------------------------------
    _rule_sentences(fit, weak, head, cannot, numbers, loss)
    if "beta" not in fit.constants:
        cannot.append(next((n for n in fit.notes if n.startswith("β is not fitted")), "β is not fitted."))
    if not fit.constants.get("alpha", {}).get("identified"):
        cannot.append("α(λ) is not fitted: the report assumes the service time does not change with load "
                      "(it needs one-worker runs without drops at two rates or more).")
    if len(proxy_runs) == 1:
        cannot.append("One run only: the load–latency and load–drop curves, α(λ) and every model check need runs "
                      "at several rates; a model knee from it assumes the service time stays as measured at "
                      "this rate.")
    if fit.base is not None and fit.base.kind == "sojourn":
        cannot.append("No tracepoints: the sojourn cannot be split into wait and service, so the service demand "
                      "is the light-load sojourn minus its M/G/1 wait — an upper bound on the work per message, "
                      "since the sojourn includes any wait for a CPU — and α scales the whole service time "
                      "(service inflation) rather than only the socket-queue part (eq. 4.4).")
    return {"headline": head, "cannot": cannot, "warnings": _warnings(measures), "numbers": numbers,
            "models": models}


def _cpu_hint() -> str:
    return ("give the proxy's CPU seconds per run: sipperf lab records them in meta.json; for another set-up "
            "--cpu FILE, a CSV of rate_cps (or run), cpu_s and window_s")


def _cpu_ceiling_against_knee(fit, c_top, proxy_runs, k_lo, top_cap, loss, head, numbers) -> None:
    """The runs carried more than the CPU line's capacity below 1 % loss.  Only a measurement
    overturns the line: a run above that rate whose proxy left its CPUs short of full (then part
    of its work is not charged to its processes).  Where the CPUs were measured full instead, the
    line stands as a lower bound and the ceiling is the rate at which they were full."""
    from sipperf.fit import CPU_FULL

    cpu = next((x for x in getattr(fit, "cpu", []) if x["threads"] == c_top), None) or fit.cpu[0]
    ncpu = float(cpu["cpus"])
    above = [m for m in proxy_runs if _finite(m.cpu_share) and _finite(m.lam_cps) and m.lam_cps > top_cap]
    spare = [m for m in above if m.cpu_share < CPU_FULL * ncpu]
    full = cpu.get("full") or []
    if spare:
        m = max(spare, key=lambda m: m.lam_cps)
        head.append(f"The runs carried more than {_f(k_lo)} calls/s below 1 % {loss}, above the {_f(top_cap)} "
                    "calls/s at which the CPU accounting says the proxy's CPUs would be full, and at "
                    f"{_f(m.lam_cps)} calls/s (run {m.label}) its processes used {_f(m.cpu_share, 2)} of the "
                    f"{_f(ncpu)} CPU{'s' if ncpu != 1 else ''} they may run on: part of the proxy's work is not "
                    "charged to its processes (on loopback, the kernel's receive path runs in the sender's system "
                    "call), so here the CPU capacity is no ceiling.")
        numbers["cpu_capacity_contradicted"] = True
        return
    numbers["cpu_capacity_contradicted"] = False
    if full:
        lo, hi = min(full, key=lambda x: x["rate_cps"]), max(full, key=lambda x: x["rate_cps"])
        light = [m for m in proxy_runs if m.label in cpu.get("runs", []) and _finite(m.cpu_share) and m.lam_cps > 0]
        l0 = min(light, key=lambda m: m.lam_cps) if light else None
        fell = (f" The CPU per call fell with the load, from {1e3 * l0.cpu_share / l0.lam_cps:.3g} ms at "
                f"{_f(l0.lam_cps)} calls/s to {hi['cpu_per_call_ms']:.3g} ms at {_f(hi['rate_cps'])}: the light-load "
                "line overstates the demand at high load." if l0 is not None
                and 1e3 * l0.cpu_share / l0.lam_cps > hi["cpu_per_call_ms"] else "")
        head.append(f"The runs carried more than {_f(k_lo)} calls/s below 1 % {loss}, above the {_f(top_cap)} calls/s "
                    "the light-load CPU line gives, and the CPUs were measured full (at least "
                    f"{_f(100 * CPU_FULL)} % of {_f(ncpu)}) from {_f(lo['rate_cps'])} calls/s (run {lo['run']}): the "
                    "line is a lower bound on the capacity, and the ceiling is where the CPUs were full." + fell)
        numbers["cpu_full_from_cps"] = lo["rate_cps"]
    else:
        head.append(f"The runs carried more than {_f(k_lo)} calls/s below 1 % {loss}, above the {_f(top_cap)} calls/s "
                    "the light-load CPU line gives; no run above that rate has CPU accounting, so nothing measured "
                    "says whether its CPUs were full: the line stands as a lower bound on the capacity.")


def _cpu_sentences(fit, pr, proxy_runs, c_top, head, cannot, numbers) -> None:
    """The utilisation law on CPU accounting (capacity, service demand) and how much of the busy time
    the traced path accounts for."""
    cpu = next((x for x in getattr(fit, "cpu", []) if x["threads"] == c_top), None) or \
        (fit.cpu[0] if getattr(fit, "cpu", None) else None)
    if cpu is None:
        return
    d_s, ci = cpu["demand_s"], cpu["demand_ci95_s"]
    cap, cci = cpu["capacity_cps"], cpu["capacity_ci95_cps"]
    numbers.update({"cpu_demand_ms": 1e3 * d_s, "cpu_demand_ci95_ms": [1e3 * x for x in ci],
                    "cpu_capacity_cps": cap, "cpu_capacity_ci95_cps": cci, "cpu_cpus": cpu["cpus"],
                    "cpu_runs": cpu["runs"]})
    if cpu["n"] == 0:
        lo = min(cpu.get("full") or [{"rate_cps": float("nan"), "run": "?"}], key=lambda x: x["rate_cps"])
        cannot.append(f"Every run with CPU accounting had its CPUs full (from {_f(lo['rate_cps'])} calls/s, run "
                      f"{lo['run']}): no light-load point is left to read the CPU per call from. Add runs well "
                      "below that rate.")
        numbers["cpu_full_from_cps"] = lo["rate_cps"]
        return
    if not (_finite(d_s) and d_s > 0):
        cannot.append("The proxy's CPU accounting does not rise with the call rate over the light-load runs: no "
                      "service demand can be read from it.")
        return
    ci_txt = (f" (95 % CI {1e3 * ci[0]:.3g}–{1e3 * ci[1]:.3g})" if all(_finite(x) for x in ci) else "")
    cap_ci = ""
    if all(x is not None and not math.isnan(x) for x in cci):
        cap_ci = (f" (95 % CI {_f(cci[0])}–{_f(cci[1])})" if math.isfinite(cci[1])
                  else f" (95 % CI from {_f(cci[0])} up: the slope is not clearly positive)")
    origin = cpu["how"].startswith(("one rate", "rates within"))
    stream = numbers.get("loss_kind") == "failed calls"
    bound = ("a rate the CPUs cannot pass, so the knee lies below it ("
             + ("calls fail or wait past their deadline" if stream else "drops start")
             + " before the CPUs are 100 % busy)" if not origin else
             "with the CPU at no load taken as 0 this rate is too low, so it does not bound the knee")
    head.append(f"CPU accounting ({cpu['n']} light-load point{'s' if cpu['n'] != 1 else ''}: "
                f"{', '.join(cpu['runs'][:5])}{' …' if len(cpu['runs']) > 5 else ''}): the proxy spends "
                f"{1e3 * d_s:.3g} ms of CPU per call{ci_txt}, so by the utilisation law its {cpu['cpus_how']} "
                f"would be fully busy at about {_f(cap)} calls/s{cap_ci}: {bound}; " + cpu["how"] + ".")
    numbers["cpu_capacity_bounds_knee"] = not origin
    # the traced path against the CPU time: what lies outside it
    rows = [pr[m.label] for m in proxy_runs if m.label in pr and _finite(pr[m.label].get("outside_traced"))]
    if rows:
        out = [d["outside_traced"] for d in rows]
        kind = proxy_runs[0].fit_input.q_kind
        numbers["outside_traced_fraction"] = float(np.median(out))
        if kind == "sojourn" and float(np.median(out)) < 0:
            head.append(f"The sojourn-based service time accounts for {_f(100 * (1 - float(np.median(out))))} % of the "
                        "CPU time the proxy used (median over the runs): it counts waiting as work, which is why a "
                        "capture alone gives only an upper bound.")
        elif kind == "sojourn" and 1 - float(np.median(out)) < 0.005:
            cannot.append("The service time read off the lightest run's sojourn comes out at zero (M/G/1 puts all of "
                          "that sojourn down to waiting): the runs hold no light load to read it from. Add a run "
                          "well below the others' rates.")
        elif kind == "sojourn":
            head.append(f"The sojourn-based service time accounts for {_f(100 * (1 - float(np.median(out))))} % of the "
                        "CPU time the proxy used (median over the runs); where the rest goes, a capture cannot say "
                        "(timers, the other processes, logging, the kernel work charged to it).")
        else:
            head.append(f"The traced path (λ × the measured service time per message) accounts for "
                        f"{_f(100 * (1 - float(np.median(out))))} % of the proxy's CPU time (median over "
                        f"{len(rows)} run{'s' if len(rows) != 1 else ''}): {_f(100 * float(np.median(out)))} % of its "
                        "busy time lies outside it (timers, the other processes, logging, the kernel work charged "
                        "to it)." if float(np.median(out)) >= 0 else
                        f"The traced service time exceeds the CPU time the proxy used (by "
                        f"{_f(-100 * float(np.median(out)))} %, median): the traced path includes waits for a CPU.")


def _knee_sentences(kk, ref, weak, head, cannot, numbers, models, proxy_runs, loss: str = "drops") -> None:
    c = kk["threads"]
    mk, cen = kk["measured_cps"], kk["measured_censored"]
    lo, hi = kk.get("measured_ci95_cps") or [float("nan")] * 2
    located = bool(kk.get("measured_located"))
    model, refuted, usable = kk["model_cps"], bool(kk.get("model_refuted")), bool(kk.get("model_usable"))
    numbers.update({"knee_measured_cps": mk if not cen else float("nan"), "knee_measured_censored": cen,
                    "knee_measured_ci95": [lo, hi], "knee_located": located, "knee_threads": c,
                    "knee_model_cps": model, "knee_model_ci95": kk["model_ci95_cps"],
                    "knee_model_refuted": refuted, "knee_model_usable": usable,
                    "knee_next": kk.get("measured_next", "")})
    why = "; ".join(kk.get("measured_why") or [])
    nxt = kk.get("measured_next") or ""
    src = ""
    knee, k_lo, k_hi = float("nan"), float("nan"), float("nan")
    say = cannot if weak else head      # with too little data, the knee is among what cannot be told
    if cen != "no runs" and not (lo > 0) and not math.isfinite(hi):
        say.append(f"The runs' measurements of {loss} rest on too few messages to place the 1 % knee anywhere "
                   f"({kk.get('measured_probes', 0)} measurement(s)). Next: " + RECORD_NEXT + ".")
        cen = "none"
    if cen == "" and located:
        head.append(f"{loss.capitalize()} reach 1 % at about {_f(mk)} calls/s (95 % interval {_f(lo)}–{_f(hi)}: the rates "
                    f"around it and their replications, {kk.get('measured_probes', 0)} measurements in all).")
        knee, k_lo, k_hi, src = mk, lo, hi, "measured"
    elif cen == "":
        say.append(f"{loss.capitalize()} reach 1 % somewhere between {_f(lo)} and {_f(hi)} calls/s: these runs cannot locate "
                   f"the knee more closely — {why}. Next: {nxt}.")
        knee, k_lo, k_hi, src = mk, lo, hi, "measured, not located: between the rates run"
    elif cen == "above":
        say.append(f"No run reached 1 % {loss}: the knee lies above {_f(lo)} calls/s. Next: {nxt}.")
        k_lo = lo
    elif cen == "below":
        say.append(f"Even the lowest-rate run lost 1 % or more ({loss}): the knee lies below {_f(hi)} calls/s. "
                   f"Next: {nxt}.")
    if math.isfinite(model) and loss != "drops":
        cannot.append(f"The M/M/{c}/K model describes datagrams dropped at a full socket buffer; over a stream "
                      "transport nothing is dropped, so it predicts no knee here.")
        model = float("nan")
        numbers["knee_model_cps"] = model
    if math.isfinite(model):
        k_txt = f"M/M/{c}/K model (K = {_f(kk['k_pkts'])} packets, the fitted service demand)"
        chk = kk.get("model_check") or {}
        if refuted:
            w = chk.get("worst")
            miss = ""
            if w:
                miss = (f": at {_f(w['lam_cps'])} calls/s (run {w['run']}) it predicts {_pct(w['pred'])} drops where "
                        f"{_pct(w['meas'])} (95 % interval {_pct(w['lo'])}–{_pct(w['hi'])}) were measured")
            if chk.get("knee_above_overload_cps") is not None:
                miss += ("; " if miss else ": ") + (f"its knee, {_f(model)} calls/s, lies above "
                                                    f"{_f(chk['knee_above_overload_cps'])} calls/s, a rate the runs "
                                                    "show overloaded")
            head.append(f"The {k_txt} is refuted by the runs{miss}. It is used for no knee, headroom or capacity.")
            models["mmck"] = {"verdict": "refuted", "worst": w, "knee_cps": model}
        elif cen == "" and mk > 0:
            e = 100 * (model - mk) / mk
            fits = abs(e) <= KNEE_FITS_PCT or (math.isfinite(lo) and math.isfinite(hi) and lo <= model <= hi)
            models["mmck"] = {"verdict": "fits" if fits else "does not fit", "knee_err_pct": e}
            head.append(f"The {k_txt} predicts the knee at {_f(model)} calls/s{_ci(kk['model_ci95_cps'])}, "
                        f"{'+' if e >= 0 else ''}{_f(e)} % from the measured one: it "
                        f"{'fits' if fits else 'does not fit'} the knee.")
        elif usable and not weak:
            head.append(f"Model prediction (not a measurement): the {k_txt} puts the knee at {_f(model)} calls/s"
                        f"{_ci(kk['model_ci95_cps'])}; it is consistent with every run's drops so far, but "
                        "no run brackets 1 % drops to check it.")
            if src == "" and cen == "above" and model > (lo if math.isfinite(lo) else 0):
                knee, k_lo, k_hi, src = model, kk["model_ci95_cps"][0], kk["model_ci95_cps"][1], "model prediction"
            models["mmck"] = {"verdict": "not checked", "knee_cps": model}
        else:
            cannot.append(f"Model prediction from {'this one run' if len(proxy_runs) == 1 else 'these runs'} only "
                          f"(not a measurement, and not checked against any drop): the {k_txt} would put the knee "
                          f"at {_f(model)} calls/s, assuming the service time stays what "
                          f"{'this run' if len(proxy_runs) == 1 else 'the runs'} measured as the load grows.")
            models["mmck"] = {"verdict": "not checked", "knee_cps": model}
    if cen != "" and not refuted and math.isfinite(model):
        cannot.append("The M/M/c/K knee cannot be checked against a measurement: no set of runs brackets 1 % drops "
                      "(add runs at higher rates until the drop rate passes 1 %).")
    # headroom, with the knee's interval
    if math.isfinite(ref) and ref > 0 and not weak:
        if math.isfinite(knee):
            hr = knee / ref - 1
            hci = [k_lo / ref - 1 if math.isfinite(k_lo) else float("nan"),
                   k_hi / ref - 1 if math.isfinite(k_hi) else float("nan")]
            numbers.update({"headroom_fraction": hr, "headroom_ci95": hci, "headroom_from_cps": ref,
                            "headroom_knee_source": src})
            rng = (f" (95 % interval {_f(100 * hci[0]) if round(100 * hci[0]) != 0 else '0'} to "
                   f"{_f(100 * hci[1])} %)" if all(math.isfinite(x) for x in hci) else "")
            if not located and src.startswith("measured") and all(math.isfinite(x) for x in hci):
                # the knee is not located: so neither is the headroom; only its range is said
                head.append(f"Headroom over {_f(ref)} calls/s, the highest rate run without 1 % {loss}: somewhere "
                            f"between {_f(100 * hci[0]) if round(100 * hci[0]) != 0 else '0'} and "
                            f"{_f(100 * hci[1])} % (the knee is not located).")
            elif hr >= 0:
                head.append(f"Headroom: about {_f(100 * hr)} %{rng} above {_f(ref)} calls/s, the highest rate run "
                            f"without 1 % {loss} (knee: {src})" + (" — a model prediction, not a measurement." if
                                                         src.startswith("model") else "."))
            else:
                head.append(f"No headroom: {_f(ref)} calls/s is already {_f(-100 * hr)} % beyond the {src} knee.")
        elif cen == "above" and math.isfinite(k_lo) and k_lo <= ref:
            # the knee's lower bound lies below the reference run: that run cannot vouch for room above it
            numbers.update({"headroom_fraction": float("nan"), "headroom_at_least": float("nan"),
                            "headroom_from_cps": ref, "headroom_knee_source": "none shown"})
            why_k = "; ".join(kk.get("measured_why") or [])
            head.append(f"Headroom over {_f(ref)} calls/s: none shown. No run lost 1 %, but the knee is only known "
                        f"to lie above {_f(k_lo)} calls/s" + (f": {why_k}." if why_k else
                                                                 ", and no steady run above that rate shows more."))
        elif cen == "above" and math.isfinite(k_lo):
            numbers.update({"headroom_fraction": float("nan"), "headroom_at_least": k_lo / ref - 1,
                            "headroom_from_cps": ref, "headroom_knee_source": "lower bound"})
            head.append(f"Headroom: at least {_f(100 * (k_lo / ref - 1))} % above {_f(ref)} calls/s (the measured "
                        "knee is above the highest rate run); how much more, no run shows.")


def _rule_sentences(fit, weak, head, cannot, numbers, loss: str = "drops") -> None:
    """C_{1,1} and the capacity rule for cores not measured: a model prediction, with the rule's own
    measured error on the lab.  Not over a stream transport: the rule (thesis eq. 7.1) was fitted
    to the 1 %-drop knees of a UDP proxy, and a knee of failed calls over TCP is another quantity."""
    if loss != "drops":
        numbers["c11_cps"] = float("nan")
        numbers["c11_not_applicable"] = True
        cannot.append("C₁,₁ and the capacity rule C_p,m = T_p,m·C₁,₁ (thesis eq. 7.1) are not stated: the thesis "
                      "fitted them to the 1 %-drop knees of a UDP proxy bound by its CPU, and these runs' knee is "
                      f"one of {loss} over a stream transport, which the rule does not cover. Size a TCP or TLS "
                      "proxy from its own measured knee, per worker count and CPU.")
        return
    cc = fit.constants.get("c11_cps")
    if not cc:
        if not weak:
            cannot.append(next((n for n in fit.notes if n.startswith("C_{1,1} cannot")),
                               "C₁,₁ cannot be fitted: no measured knee."))
        return
    numbers["c11_cps"] = cc["value"]
    numbers["c11_ci95"] = cc["ci95"]
    numbers["c11_source"] = cc.get("source", "")
    numbers["c11_located"] = bool(cc.get("located", True))
    from sipperf.report.runs import lab_rule_miss

    miss = lab_rule_miss()
    cap4 = next((r for r in fit.capacity if r["processors"] == 1 and r["cores"] == 4), None)
    src = cc.get("source", "")
    what = ("from your runs' measured knee" if src == "measured" else
            "from the model's knee (a model prediction, not a measurement)")
    ci = cc.get("ci95") or [float("nan")] * 2
    ranged = src == "measured" and not cc.get("located", True) and all(_finite(x) for x in ci)
    val = (f"between {_f(ci[0])} and {_f(ci[1])} calls/s" if ranged else
           f"= {_f(cc['value'])} calls/s{_ci(cc['ci95'])}")
    s = (f"Capacity rule C_p,m = T_p,m·C₁,₁ (thesis eq. 7.1): C₁,₁ {val} {what} (the thesis: 1,000 for its own "
         "single-core, single-thread server).")
    if cap4:
        c4 = (f"between {_f(cap4['ci95_cps'][0])} and {_f(cap4['ci95_cps'][1])}" if ranged
              else f"about {_f(cap4['capacity_cps'])}")
        s += (f" For 4 cores on one processor the rule predicts {c4} calls/s — a model "
              "prediction for a machine you did not measure, not a capacity")
        if miss:
            numbers["rule_lab_ratio"] = miss["ratio"]
            numbers["rule_lab_ratio_range"] = [miss["ratio_lo"], miss["ratio_hi"]]
            s += (f": on the lab's own machine ({miss['source']}, the proxy on {miss['cores']} "
                  f"core{'s' if miss['cores'] != 1 else ''}) the rule promised "
                  f"{_f(miss['promise_cps'])} calls/s from its one-worker knee, {miss['ratio']:.1f}× "
                  f"({miss['ratio_lo']:.1f}–{miss['ratio_hi']:.1f}×) the best knee any worker count reached "
                  f"({_f(miss['best_cps'])} calls/s with {miss['best_workers']} worker"
                  f"{'s' if miss['best_workers'] != 1 else ''}). Measure before you buy.")
        else:
            s += " (the rule was fitted by the thesis to machines with at most 6 cores)."
    if weak:
        cannot.append(s)
    else:
        head.append(s)


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
