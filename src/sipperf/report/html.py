"""Render a :class:`~sipperf.report.result.Report` as one self-contained HTML page.

plotly.js is inlined once (no CDN, no server: the file opens from disk and works offline), the
style sheet too.  The first screen is the verdict in plain words with its key numbers; then the
evidence: warnings, what was read, the runs side by side, the load curves, the fitted model and
its checks, and each run in detail (time components per message type with medians, p99 and
batch-means CIs, ECDFs, the sojourn over time with MSER-5's warm-up cut, RFC 6076 metrics, the
slowest calls as ladder diagrams).  A section that cannot be drawn says why instead.
"""
from __future__ import annotations

import datetime as _dt
import html as _html
import math
import traceback
from typing import Any, Callable

import numpy as np
import pandas as pd

__all__ = ["render"]

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#222;background:#fafafa}
main{max-width:1100px;margin:0 auto;padding:1rem 1.2rem 3rem;background:#fff}
h1{font-size:1.6rem;margin:.4rem 0}h2{font-size:1.3rem;border-bottom:2px solid #ddd;padding-bottom:.2rem;margin-top:2rem}
h3{font-size:1.1rem;margin-top:1.4rem}p,li{line-height:1.45}.muted{color:#666;font-size:.9rem}
.verdict{background:#f3f8ff;border-left:5px solid #1f77b4;padding:.6rem 1rem;margin:1rem 0}
.verdict li{margin:.35rem 0}.cannot{background:#fff8e6;border-left:5px solid #e0a000;padding:.4rem 1rem}
.warn{background:#fff0f0;border-left:5px solid #d62728;padding:.4rem 1rem}
.cards{display:flex;flex-wrap:wrap;gap:.6rem;margin:.8rem 0}
.card{flex:1 1 10rem;border:1px solid #ddd;border-radius:6px;padding:.5rem .7rem;background:#fff}
.card .v{font-size:1.35rem;font-weight:600}.card .l{font-size:.8rem;color:#555}
.tw{overflow-x:auto;margin:.5rem 0 1rem}table.tbl{border-collapse:collapse;font-size:.85rem}
table.tbl th,table.tbl td{border:1px solid #ddd;padding:.2rem .45rem;text-align:right;white-space:nowrap}
table.tbl th{background:#f0f0f0}table.tbl td:first-child,table.tbl th:first-child{text-align:left}
figure{margin:.6rem 0 1.4rem}figcaption{font-size:.85rem;color:#444;margin-top:.2rem}
nav.toc a{margin-right:.8rem}details{margin:.4rem 0}summary{cursor:pointer;font-weight:600}
.err{color:#a00}
"""

_TOGGLE_JS = """
document.addEventListener('toggle', function (e) {
  if (e.target.tagName === 'DETAILS' && e.target.open && window.Plotly) {
    e.target.querySelectorAll('.js-plotly-plot').forEach(function (p) { Plotly.Plots.resize(p); });
  }
}, true);
"""


def _e(s: Any) -> str:
    return _html.escape(str(s))


def _num(x: Any, nd: int = 1) -> str:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return _e(x)
    if not math.isfinite(v):
        return "–"
    if abs(v) >= 1e5 or (0 < abs(v) < 1e-3):
        return f"{v:.3g}"
    return f"{v:,.{nd}f}"


def _table(df: pd.DataFrame, fmt: dict[str, int] | None = None, rename: dict[str, str] | None = None,
           max_rows: int = 200) -> str:
    if df is None or not len(df):
        return "<p class='muted'>(empty)</p>"
    d = df.head(max_rows).copy()
    fmt = fmt or {}
    for c in d.columns:
        if c in fmt or pd.api.types.is_float_dtype(d[c]):
            nd = fmt.get(c, 1)
            d[c] = [_num(v, nd) for v in d[c]]
    if rename:
        d = d.rename(columns=rename)
    more = f"<p class='muted'>first {max_rows} of {len(df)} rows (all in the CSV)</p>" if len(df) > max_rows else ""
    return "<div class='tw'>" + d.to_html(index=False, classes="tbl", na_rep="–", border=0) + "</div>" + more


class _Fig:
    """Collects Plotly figures as divs (plotly.js is inlined once by :func:`render`)."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, fig, caption: str) -> str:
        import plotly.io as pio

        self.n += 1
        div = pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=f"fig{self.n}", validate=False,
                          config={"responsive": True, "displaylogo": False})
        return f"<figure>{div}<figcaption>Figure {self.n}. {_e(caption)}</figcaption></figure>"


def _guard(title: str, fn: Callable[[], str]) -> str:
    """A section; if it fails, a note saying which and why instead of the section."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - the rest of the report still renders
        tb = traceback.extract_tb(e.__traceback__)[-1]
        return (f"<p class='err'>This part ({_e(title)}) could not be drawn: {_e(type(e).__name__)}: {_e(e)} "
                f"<span class='muted'>({_e(tb.name)}, line {tb.lineno})</span></p>")


def render(rep, n_slowest: int = 5) -> str:
    """The whole page as a string."""
    from plotly.offline import get_plotlyjs

    from sipperf import __version__

    fig = _Fig()
    parts: list[str] = []
    parts.append(f"<h1>{_e(rep.title)}</h1><p class='muted'>sipperf {__version__}, "
                 f"{_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}; "
                 f"{len(rep.runs)} run{'s' if len(rep.runs) != 1 else ''}. Every number below is computed from "
                 "the inputs listed in <a href='#read'>What was read</a>; the CSV and JSON files next to this "
                 "page hold them all.</p>")
    parts.append("<nav class='toc'><a href='#verdict'>Verdict</a><a href='#read'>What was read</a>"
                 "<a href='#runs'>Runs compared</a><a href='#model'>Model fit</a><a href='#detail'>Each run</a></nav>")
    parts.append(_guard("verdict", lambda: _verdict(rep)))
    parts.append(_guard("what was read", lambda: _read(rep)))
    parts.append(_guard("runs compared", lambda: _runs(rep, fig)))
    parts.append(_guard("model fit", lambda: _model(rep, fig)))
    parts.append("<h2 id='detail'>Each run</h2>")
    for i, r in enumerate(rep.runs):
        parts.append(_guard(f"run {r.label}", lambda r=r, i=i: _run_detail(r, fig, n_slowest, open_=(i == 0))))
    body = "\n".join(parts)
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{_e(rep.title)}</title><style>{_CSS}</style>"
            f"<script>{get_plotlyjs()}</script></head><body><main><article>{body}</article></main>"
            f"<script>{_TOGGLE_JS}</script></body></html>")


def _signed_pct(x: float) -> str:
    """A fraction as a signed whole percentage, 0 without a sign (never "-0 %")."""
    v = round(100 * x)
    return "0" if v == 0 else f"{v:+,d}"


def _card(value: str, label: str) -> str:
    return f"<div class='card'><div class='v'>{_e(value)}</div><div class='l'>{_e(label)}</div></div>"


def _verdict(rep) -> str:
    v = rep.verdict
    n = v.get("numbers", {})
    out = ["<h2 id='verdict'>Verdict</h2>"]
    cards = []

    def fin(x) -> bool:
        return x is not None and isinstance(x, (int, float)) and math.isfinite(x)

    weak = bool(n.get("data_limits")) and any(("call" in x and "in all" in x) or "arrival rate" in x
                                               for x in n.get("data_limits", []))
    if fin(n.get("top_rho")) and not weak and not n.get("top_rho_contradicted"):
        src = {"cpu": "measured from CPU accounting", "sojourn upper bound": "upper bound (from the sojourn)",
               "traced": "from the traced service time"}.get(n.get("rho_source", ""), "")
        cards.append(_card(f"{'≤ ' if n.get('rho_upper_bound') else ''}{100 * n['top_rho']:.0f} %",
                           f"utilisation per {n.get('top_rho_per', 'worker')} at {n['top_rate_cps']:,.0f} calls/s, {src}"))
    km, (lo, hi) = n.get("knee_measured_cps", float("nan")), (n.get("knee_measured_ci95") or [float("nan")] * 2)
    kname = {"drops": "1 %-drop knee", "failed calls": "1 %-failed-calls knee"}.get(n.get("loss_kind", "drops"),
                                                                                  "1 %-loss knee")
    if fin(km) and n.get("knee_located"):
        cards.append(_card(f"{km:,.0f} calls/s", f"{kname}, measured (95 %: {lo:,.0f}–{hi:,.0f})"))
    elif fin(km) and fin(lo) and fin(hi):
        cards.append(_card(f"{lo:,.0f}–{hi:,.0f} calls/s", f"{kname}: between these (not located)"))
    elif n.get("knee_measured_censored") == "above" and fin(lo):
        cards.append(_card(f"> {lo:,.0f} calls/s", f"{kname}: above every rate run"))
    kd = n.get("knee_model_cps", float("nan"))
    if fin(kd) and n.get("knee_model_usable") and not weak:
        cards.append(_card(f"{kd:,.0f} calls/s", "1 %-drop knee, model prediction"))
    if fin(n.get("cpu_capacity_cps")):
        cards.append(_card(f"{n['cpu_capacity_cps']:,.0f} calls/s", "CPUs full at (utilisation law on CPU accounting"
                           + (")" if n.get("cpu_capacity_bounds_knee") else "; no-load CPU taken as 0: too low)")))
    hr = n.get("headroom_fraction")
    if fin(hr):
        hci = n.get("headroom_ci95") or [float("nan")] * 2
        both = fin(hci[0]) and fin(hci[1])
        if n.get("knee_located") or not both:
            rng = f" (95 %: {_signed_pct(hci[0])} to {_signed_pct(hci[1])} %)" if both else ""
            cards.append(_card(f"{_signed_pct(hr)} %", f"headroom over {n['headroom_from_cps']:,.0f} calls/s{rng}"
                               + (", model prediction" if str(n.get("headroom_knee_source", "")).startswith("model")
                                  else "")))
        else:
            cards.append(_card(f"{_signed_pct(hci[0])} to {_signed_pct(hci[1])} %",
                               f"headroom over {n['headroom_from_cps']:,.0f} calls/s (knee not located)"))
    elif fin(n.get("headroom_at_least")):
        cards.append(_card(f"≥ {_signed_pct(n['headroom_at_least'])} %", f"headroom over {n['headroom_from_cps']:,.0f} calls/s"))
    if fin(n.get("c11_cps")):
        cc = n.get("c11_ci95") or [float("nan")] * 2
        val = (f"{n['c11_cps']:,.0f} calls/s" if n.get("c11_located", True) or n.get("c11_source") != "measured"
               or not (fin(cc[0]) and fin(cc[1])) else f"{cc[0]:,.0f}–{cc[1]:,.0f} calls/s")
        cards.append(_card(val, "C₁,₁ fitted (thesis: 1,000)"
                           + ("" if n.get("c11_source") == "measured" else ", model prediction")))
    for k, m in v.get("models", {}).items():
        cards.append(_card(m["verdict"], {"mg1": "M/G/1 (mean wait)", "mmck": "M/M/c/K (knee)"}.get(k, k)))
    if cards:
        out.append("<div class='cards'>" + "".join(cards) + "</div>")
    out.append("<div class='verdict'><ul>" + "".join(f"<li>{_e(s)}</li>" for s in v.get("headline", [])) + "</ul></div>")
    if v.get("cannot"):
        out.append("<div class='cannot'><p><b>What these data cannot tell, and why</b></p><ul>"
                   + "".join(f"<li>{_e(s)}</li>" for s in v["cannot"]) + "</ul></div>")
    if v.get("warnings"):
        out.append("<h3>Warnings</h3><div class='warn'><ul>"
                   + "".join(f"<li>{_e(s)}</li>" for s in v["warnings"]) + "</ul></div>")
    if rep.fit_error:
        out.append(f"<p class='err'>The model fit failed: {_e(rep.fit_error)}</p>")
    return "\n".join(out)


def _checks(f) -> list[str]:
    """What the capture checks found in one input (the resolution only when it is coarse)."""
    from sipperf.analysis.account import input_checks
    out = input_checks(f.details or {})
    return [c for c in out if not (c.startswith("clock resolution") and c.endswith(" ns"))]


def _read(rep) -> str:
    out = ["<h2 id='read'>What was read</h2>",
           "<p>Each input, how it was read (every record parsed or skipped with a reason: read = parsed + "
           "skipped) and where it was taken (the vantage point decides what can be measured).</p>"]
    from sipperf.report import tables as T

    out.append(_table(T.account(rep)))
    if rep.failed:
        out.append("<h3>Inputs that could not be read</h3><div class='warn'><ul>"
                   + "".join(f"<li>{_e(f['run'])}: {_e(f['error'])}</li>" for f in rep.failed) + "</ul></div>")
    if rep.ignored:
        out.append("<p class='muted'>Inputs that are not runs: "
                   + ", ".join(f"{_e(f['path'])} ({_e(f.get('reason', 'unknown format'))})" for f in rep.ignored[:20])
                   + (" …" if len(rep.ignored) > 20 else "") + "</p>")
    checks = [(r.label, c) for r in rep.runs if r.account is not None
              for f in (r.account.files or [r.account]) for c in _checks(f)]
    if checks:
        out.append("<h3>What the checks of the captures found</h3><p>Copies of a packet, impossible stamps, "
                   "clock steps, the clock's resolution and datagrams holding several messages: each found, "
                   "named and handled by a stated rule (docs/formats.md, section 8), never averaged in.</p><ul>"
                   + "".join(f"<li>{_e(lab)}: {_e(c)}</li>" for lab, c in checks) + "</ul>")
    return "\n".join(out)


def _runs(rep, fig) -> str:
    from sipperf.report import figures as F

    out = ["<h2 id='runs'>Runs compared</h2>",
           "<p>Every run is analysed on its own (never pooled): its steady-state window starts after the "
           "MSER-5 warm-up cut and ends at its last INVITE; the means carry 95 % batch-means confidence "
           "intervals (30 batches). Q is the socket-queue time K_sockq with tracepoints, else the sojourn "
           "t_dep − t_arr.</p>"]
    from sipperf.report import tables as T

    t2 = T.runs_compared(rep)
    out.append(_table(t2, fmt={"messages/s": 0, "calls/s": 1, "utilisation ρ": 3, "drops (%)": 3,
                               "± 95 % (pp)": 3, "calls c_a²": 2}))
    fit = rep.fit
    ok = [r for r in rep.runs if r.measure is not None and r.measure.has_sojourn]
    if len(ok) >= 2 and fit is not None and fit.per_run:
        pr = F.per_run_frame(rep)
        curve = F.mg1_curve(rep)
        qk = ok[0].measure.fit_input.q_kind
        ql = "K_sockq" if qk == "k_sockq" else "sojourn"
        bad = rep.verdict.get("models", {}).get("mg1", {}).get("verdict") == "refuted"
        out.append(fig(F.load_latency_figure(pr, curve, ql, refuted=bad),
                       f"Load–latency: measured mean {ql} per run with its 95 % CI (error bars), the p99 of the "
                       f"sojourn (triangles), and the M/G/1 prediction with the fitted α(λ) (dashed, one worker)."))
        out.append(fig(F.load_drop_figure(pr, F.drop_curves(rep), fit.knees),
                       "Load–drop: measured drop rate per run with its 95 % batch-means CI, the M/M/c/K "
                       "prediction (dashed; dotted and so labelled where the runs refute it) and the 1 % line; the "
                       "grey band is the measured knee's 95 % interval, a vertical line its estimate where the "
                       "runs locate it."))
        samples = {r.label: _steady_sojourn(r) for r in sorted(ok, key=lambda r: r.measure.lam_cps)[:10]}
        out.append(fig(F.ecdf_figure(samples),
                       "ECDF of the time in the proxy per run (steady state; at most 10 runs, the lowest rates)."))
    elif len(ok) < 2:
        out.append("<p class='muted'>One run with a proxy: no load curves (they need runs at several rates).</p>")
    return "\n".join(out)


def _steady_sojourn(r) -> np.ndarray:
    s = r.measure.series
    if not s:
        return np.array([])
    t = np.asarray(s["t_s"])
    m = (t >= s["warmup_t_s"]) & (t <= s["end_t_s"])
    return np.asarray(s["sojourn_us"])[m]


def _model(rep, fig) -> str:
    from sipperf.models.mg1 import ALPHA_BREAKPOINTS
    from sipperf.report import figures as F

    fit = rep.fit
    out = ["<h2 id='model'>Model fit</h2>"]
    if fit is None:
        out.append("<p>No model was fitted: " + _e(rep.fit_error or "no run shows a proxy (no sojourn)") + ".</p>")
        return "\n".join(out)
    out.append("<p>The thesis's constants, fitted to <em>these</em> runs (95 % intervals from a parametric "
               "bootstrap over each run's batch means). Service time per message X = R + α(λ)·B (eq. 4.1, 4.4): "
               "R = K_copy + T_sip + K_snd measured per message, B = K<sup>s,base</sup><sub>sockq</sub> from the "
               "lightest run (without tracepoints: B is the whole light-load service time and R = 0).</p>")
    from sipperf.report import tables as T

    out.append(_table(T.constants(rep), fmt={"value": 4}))
    if fit.notes:
        out.append("<ul class='muted'>" + "".join(f"<li>{_e(n)}</li>" for n in fit.notes) + "</ul>")
    if fit.service:
        sv = T.service_demand(rep)
        out.append("<h3>Service demand per message type</h3>")
        out.append(_table(sv, fmt={"share of messages": 3}))
    pr = pd.DataFrame(fit.per_run)
    if len(pr):
        d = T.predictions(rep)
        out.append("<h3>Predictions next to the measurements</h3>"
                   "<p>W is the mean wait in the socket queue, measured as Q − α·B and predicted by "
                   "Pollaczek–Khinchine (eq. 4.2) with each run's measured SCV and the fitted α(λ) (not the "
                   "run's own α). Drops: the M/M/c/K blocking probability (eq. 5.3/5.4, E[X_c] = β·c·E[X_1]). "
                   "The model load λE[X] is what these predictions are computed at, from the fitted service "
                   "time; it is not the run's utilisation. The run's one ρ is the measured one in the table of "
                   "runs (its source beside it): a model load far from it says the fitted E[X] holds more than "
                   "the proxy's work.</p>")
        out.append(_table(d, fmt={"messages/s": 0, "model load λE[X]": 3, "SCV of X": 3, "α of run": 2, "α fitted": 2,
                                  "error (%)": 1, "drops measured": 4, "drops M/M/c/K": 4, "β of run": 3,
                                  "β fitted": 3, "K (packets)": 0}))
        if fit.alpha_curve is not None and pr["alpha_run"].notna().sum() >= 2:
            xs, ys = fit.alpha_curve.breakpoints()
            th = ALPHA_BREAKPOINTS["poisson"]
            out.append(fig(F.alpha_figure(pr, (xs, ys), (th[0], th[1])),
                           "α of each one-worker run (the value for which M/G/1 reproduces it) and the fitted "
                           "α(λ); the thesis's Poisson curve (its OpenSIPS on its own machine) for comparison."))
    kt = T.knees(rep)
    if len(kt):
        out.append("<h3>The 1 %-drop knee</h3><p>Measured from every drop measurement (each run, each round of a "
                   "stored point, each knee-search probe): a monotone fit of the drop fraction against the rate, "
                   "bootstrapped over the replications; its 95 % interval always spans the gap between the two "
                   "rates that bracket 1 %, since nothing between them was measured. The model's knee is checked "
                   "against every run's drops and not used when they refute it.</p>")
        out.append(_table(kt, fmt={"M/M/c/K knee (calls/s)": 0}))
        for k in fit.knees:
            kr = T.knee_rates(rep, k["threads"])
            if len(kr):
                out.append(f"<details><summary>Drop fraction by rate, {k['threads']} worker"
                           f"{'s' if k['threads'] > 1 else ''}</summary>"
                           + _table(kr, fmt={"calls/s": 0, "drops (%)": 3, "monotone fit (%)": 3, "messages": 0})
                           + "</details>")
    ct = T.cpu(rep)
    if len(ct):
        out.append("<h3>Utilisation law on the proxy's CPU accounting</h3><p>CPU-seconds per second of all the "
                   "proxy's processes against the call rate over the light-load runs (no drops, no growing "
                   "queue): the slope is the CPU per call, and the rate at which the CPUs the proxy can use "
                   "would be full bounds the knee from above (drops start before).</p>")
        out.append(_table(ct, fmt={"CPU per call (ms)": 3, "CPU at no load (CPU-s per s)": 3,
                                   "CPUs full at (calls/s)": 0}))
        out.append(fig(F.cpu_figure(rep), "CPU-seconds per second of the proxy's processes per light-load run "
                                          "against the call rate, the least-squares line (with its 95 % band when "
                                          "three or more rates give one), and the CPUs it can use (dotted)."))
    if fit.capacity:
        cp = T.capacity(rep)
        from sipperf.report.runs import lab_rule_miss

        miss = lab_rule_miss()
        err = (f" Its own measured error: on the lab's machine ({miss['source']}, the proxy on {miss['cores']} "
               f"core{'s' if miss['cores'] != 1 else ''}) it promised "
               f"{miss['promise_cps']:,.0f} calls/s from the one-worker knee, {miss['ratio']:.1f}× "
               f"({miss['ratio_lo']:.1f}–{miss['ratio_hi']:.1f}×) the best knee measured "
               f"({miss['best_cps']:,.0f} calls/s).") if miss else ""
        out.append("<h3>Capacity rule C_p,m = T_p,m · C₁,₁ (thesis eq. 7.1): model predictions</h3>"
                   "<p class='muted'>T₁,m = m + 2 on one processor, T_p,m = m on p ≥ 2 (thesis §7.6). The rule was "
                   "fitted by the thesis to three machines with at most 6 cores; for a machine you did not measure "
                   "it is a model prediction, never a capacity." + _e(err) + "</p>")
        out.append(_table(cp, fmt={"C_p,m predicted (calls/s)": 0}))
    return "\n".join(out)


def _run_detail(r, fig, n_slowest: int, open_: bool) -> str:
    from sipperf.report import figures as F

    out = [f"<details{' open' if open_ else ''}><summary>{_e(r.label)}</summary>"]
    if r.error:
        out.append(f"<p class='err'>{_e(r.error)}</p>")
    m = r.measure
    if m is None:
        out.append("</details>")
        return "\n".join(out)
    what = (f"vantage: {m.vantage}; {m.n_messages:,} messages, {m.calls:,} calls over {m.duration_s:,.2f} s; "
            f"{'tracepoints (all seven instants)' if m.tracepoints else 'no tracepoints'}")
    out.append(f"<p>{_e(what)}.</p>")
    if m.warnings:
        out.append("<div class='warn'><ul>" + "".join(f"<li>{_e(w)}</li>" for w in m.warnings) + "</ul></div>")
    if m.components is not None and len(m.components):
        c = m.components.rename(columns={"component": "component", "msg_type": "message type", "n": "n",
                                         "mean_us": "mean (µs)", "ci95_hw_us": "± 95 % (µs)", "ci_method": "CI",
                                         "median_us": "median (µs)", "p99_us": "p99 (µs)"})
        out.append("<h3>Time components per message type (steady state)</h3>" + _table(c))
    if m.has_sojourn and m.series and r.timeline is not None:
        out.append(_guard("time series", lambda: fig(F.series_figure(m.series),
                   f"{r.label}: time in the proxy of each message in arrival order (thinned to ≤ 4,000 points); "
                   f"red: the warm-up MSER-5 cut ({m.warmup_n} messages, {m.warmup_s:.2f} s), grey: the cool-down "
                   "after the last INVITE. Both are left out of the statistics.")))
        by = {}
        tl = r.timeline
        soj = (tl["t_dep"].to_numpy(dtype="float64", na_value=np.nan)
               - tl["t_arr"].to_numpy(dtype="float64", na_value=np.nan)) / 1e3
        from sipperf.calls import class_order, message_class

        cls = message_class(tl).to_numpy(object)
        for t in class_order(pd.unique(cls)):
            v = soj[cls == t]
            if np.isfinite(v).sum() >= 2:
                by[t] = v
        out.append(_guard("ECDF", lambda: fig(F.ecdf_figure(by),
                   f"{r.label}: ECDF of the time in the proxy per message type (all messages of the run).")))
    cm = r.tables.get("calls")
    if cm is not None and len(cm):
        out.append("<h3>Call-level metrics (RFC 6076)</h3>"
                   + _table(cm[["metric", "unit", "count", "value", "median", "p99", "definition"]],
                            fmt={"value": 2, "median": 1, "p99": 1}))
    tx = r.tables.get("transactions")
    if tx is not None and len(tx):
        out.append("<h3>Request → response per transaction type (µs)</h3>" + _table(tx))
    if n_slowest > 0 and r.timeline is not None and "src" not in r.timeline.columns:
        out.append("<p class='muted'>No ladder diagrams: this capture was streamed (the default at 64 MB or "
                   "more), which keeps only the columns the statistics need; <code>sipperf report "
                   "--in-memory</code> draws them.</p>")
    elif n_slowest > 0 and r.timeline is not None:
        out.append(_guard("slowest calls", lambda: _ladders(r, fig, n_slowest)))
    out.append("</details>")
    return "\n".join(out)


def _ladders(r, fig, n: int) -> str:
    from sipperf.report import figures as F

    tl = r.timeline
    slow = F.slowest_calls(tl, n)
    if not slow:
        return ""
    out = [f"<h3>The {len(slow)} slowest calls</h3><p class='muted'>Ranked by {_e(slow[0][2])}.</p>"]
    cid = tl["call_id"].astype("string")
    for k, (c, us, _) in enumerate(slow, 1):
        call = tl[(cid == c).fillna(False).to_numpy(bool)]
        out.append(fig(F.ladder_figure(call, f"{c}: {us:,.0f} µs"),
                       f"{r.label}, call {k} of the slowest: {c} ({us:,.0f} µs). Each arrow into the proxy is "
                       "a message's arrival, the one out of it its departure; the red label is its sojourn."))
    return "\n".join(out)
