"""The report's Plotly figures: ECDFs, the sojourn over time with the warm-up cut, load-latency
and load-drop curves with the models, α(λ), and the ladder of one call.

Every function returns a :class:`plotly.graph_objects.Figure` laid out like the book's
(:mod:`sipperf.viz`): legend horizontal below the plot, titles clear of it, width following the
page.  Times on axes in µs (ms for the ladder), rates in calls/s.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

__all__ = ["per_run_frame", "mg1_curve", "drop_curves", "ecdf_figure", "series_figure", "load_latency_figure",
           "load_drop_figure", "alpha_figure", "cpu_figure", "ladder_figure", "slowest_calls"]

_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
            "#bcbd22", "#17becf"]


def _layout(fig: go.Figure, x_title: str, y_title: str, *, height: int = 420, log_x: bool = False,
            log_y: bool = False) -> go.Figure:
    fig.update_layout(
        height=height, autosize=True, margin=dict(l=60, r=20, t=30, b=40),
        xaxis=dict(title=x_title, type="log" if log_x else "linear", automargin=True),
        yaxis=dict(title=y_title, type="log" if log_y else "linear", automargin=True),
        legend=dict(orientation="h", yanchor="top", y=-0.22, xanchor="left", x=0),
        template="plotly_white")
    return fig


def _ecdf_points(x: np.ndarray, n_max: int = 400) -> tuple[np.ndarray, np.ndarray]:
    x = np.sort(x[np.isfinite(x)])
    if x.size == 0:
        return x, x
    p = np.arange(1, x.size + 1) / x.size
    if x.size > n_max:
        idx = np.unique(np.round(np.linspace(0, x.size - 1, n_max)).astype(int))
        x, p = x[idx], p[idx]
    return x, p


def ecdf_figure(samples: dict[str, np.ndarray], x_title: str = "time in the proxy, t_dep − t_arr (µs)") -> go.Figure:
    """One ECDF per entry (run or message type), log x axis, median and p99 guides."""
    fig = go.Figure()
    for i, (name, v) in enumerate(samples.items()):
        x, p = _ecdf_points(np.asarray(v, dtype=float))
        if not x.size:
            continue
        fig.add_trace(go.Scatter(x=x, y=p, mode="lines", name=str(name),
                                 line=dict(color=_COLOURS[i % len(_COLOURS)], shape="hv")))
    for q, lab in ((0.5, "median"), (0.99, "p99")):
        fig.add_hline(y=q, line=dict(color="#999", dash="dot", width=1), annotation_text=lab,
                      annotation_position="top left")
    return _layout(fig, x_title, "fraction of messages ≤ x", log_x=True)


def series_figure(series: dict[str, Any]) -> go.Figure:
    """Sojourn (and K_sockq) of each message in arrival order, with the MSER-5 warm-up cut and
    the cool-down after the last INVITE shaded."""
    fig = go.Figure()
    t = np.asarray(series["t_s"])

    def positive(name: str, v) -> tuple[str, np.ndarray]:
        # a log axis cannot show 0 µs (a message that waited for nothing): say how many are left out
        v = np.asarray(v, dtype=float)
        zero = int((np.isfinite(v) & (v <= 0)).sum())
        return (name + (f"; {zero:,} at 0 µs not drawn" if zero else ""), np.where(v > 0, v, np.nan))

    name, y = positive("sojourn t_dep − t_arr", series["sojourn_us"])
    fig.add_trace(go.Scatter(x=t, y=y, mode="markers", name=name,
                             marker=dict(size=3, color=_COLOURS[0], opacity=0.5)))
    if "k_sockq_us" in series:
        name, y = positive("K_sockq (socket queue)", series["k_sockq_us"])
        fig.add_trace(go.Scatter(x=t, y=y, mode="markers", name=name,
                                 marker=dict(size=3, color=_COLOURS[1], opacity=0.5)))
    w, e = series.get("warmup_t_s", 0.0), series.get("end_t_s", float(t.max()) if t.size else 0.0)
    if t.size:
        if w > t.min():
            fig.add_vrect(x0=float(t.min()), x1=w, fillcolor="#d62728", opacity=0.12, line_width=0,
                          annotation_text=f"warm-up (MSER-5: {series.get('warmup_n', 0)} messages)",
                          annotation_position="top left")
        if e < t.max():
            fig.add_vrect(x0=e, x1=float(t.max()), fillcolor="#7f7f7f", opacity=0.15, line_width=0,
                          annotation_text="cool-down", annotation_position="top right")
    return _layout(fig, "time since the first message (s)", "µs", log_y=True)


def load_latency_figure(per_run: pd.DataFrame, curve: dict[str, np.ndarray] | None,
                        q_label: str, refuted: bool = False) -> go.Figure:
    """Measured mean Q (with its 95 % CI) and p99 sojourn against the call rate, one series per
    thread count, with the M/G/1 prediction (``curve``: ``{"cps", "q_us"}``) where given (dotted
    and so labelled when the runs refute it)."""
    fig = go.Figure()
    for i, (c, g) in enumerate(per_run.groupby("threads", sort=True)):
        g = g.sort_values("lam_cps")
        col = _COLOURS[i % len(_COLOURS)]
        fig.add_trace(go.Scatter(x=g["lam_cps"], y=g["q_meas_us"], mode="markers+lines",
                                 name=f"measured mean {q_label}, {c} worker{'s' if c > 1 else ''}",
                                 line=dict(color=col), error_y=dict(type="data", array=g["q_ci95_us"], visible=True)))
        if "p99_us" in g and g["p99_us"].notna().any():
            fig.add_trace(go.Scatter(x=g["lam_cps"], y=g["p99_us"], mode="markers", name=f"measured p99, {c}w",
                                     marker=dict(symbol="triangle-up", color=col)))
    if curve is not None and len(curve["cps"]):
        fig.add_trace(go.Scatter(x=curve["cps"], y=curve["q_us"], mode="lines",
                                 name="M/G/1 with fitted α(λ)" + (" (refuted by the runs)" if refuted else ""),
                                 line=dict(color="black", dash="dot" if refuted else "dash")))
    return _fit_ranges(_layout(fig, "call rate (calls/s)", f"{q_label} (µs)", log_y=True))


def load_drop_figure(per_run: pd.DataFrame, curves: dict[int, dict[str, np.ndarray]], knees: Sequence[dict],
                     target_pct: float = 1.0) -> go.Figure:
    """Measured drop rate (with its 95 % CI) against the call rate per thread count, the
    M/M/c/K prediction, the target line and the knees."""
    fig = go.Figure()
    for i, (c, g) in enumerate(per_run.groupby("threads", sort=True)):
        g = g.sort_values("lam_cps")
        col = _COLOURS[i % len(_COLOURS)]
        fig.add_trace(go.Scatter(x=g["lam_cps"], y=100 * g["pdr_meas"], mode="markers+lines",
                                 name=f"measured, {c} worker{'s' if c > 1 else ''}", line=dict(color=col),
                                 error_y=dict(type="data", array=100 * g["pdr_ci95"].fillna(0), visible=True)))
        cv = curves.get(int(c))
        if cv is not None:
            bad = any(k.get("model_refuted") for k in knees if int(k.get("threads", 0)) == int(c))
            fig.add_trace(go.Scatter(x=cv["cps"], y=100 * cv["p"], mode="lines",
                                     name=f"M/M/{c}/K model" + (" (refuted by the runs)" if bad else ""),
                                     line=dict(color=col, dash="dot" if bad else "dash", width=1 if bad else 2)))
    fig.add_hline(y=target_pct, line=dict(color="#d62728", dash="dot", width=1),
                  annotation_text=f"{target_pct:g} % drops", annotation_position="top left")
    for k in knees:
        lo, hi = (k.get("measured_ci95_cps") or [float("nan")] * 2)[:2]
        if not k.get("measured_censored") and math.isfinite(lo) and math.isfinite(hi) and hi > lo:
            # the knee's 95 % interval: the gap between the rates around it and the replication spread
            fig.add_vrect(x0=lo, x1=hi, fillcolor="#555", opacity=0.10, line_width=0)
        if math.isfinite(k.get("measured_cps", float("nan"))) and k.get("measured_located"):
            fig.add_vline(x=k["measured_cps"], line=dict(color="#555", dash="dot", width=1))
    return _fit_ranges(_layout(fig, "call rate (calls/s)", "dropped messages (%)"))


def alpha_figure(per_run: pd.DataFrame, knots: tuple[Sequence[float], Sequence[float]],
                 thesis: tuple[Sequence[float], Sequence[float]] | None = None) -> go.Figure:
    """Per-run α (the value that makes M/G/1 match that run) and the fitted α(λ); the thesis's
    Poisson curve (§4.3.1) for comparison."""
    fig = go.Figure()
    d = per_run[per_run["alpha_run"].notna()] if "alpha_run" in per_run else per_run.iloc[:0]
    fig.add_trace(go.Scatter(x=d["lam_pps"], y=d["alpha_run"], mode="markers", name="α of each run",
                             marker=dict(size=9, color=_COLOURS[0])))
    xs, ys = knots
    fig.add_trace(go.Scatter(x=list(xs), y=list(ys), mode="lines", name="fitted α(λ)",
                             line=dict(color="black")))
    if thesis is not None:
        fig.add_trace(go.Scatter(x=list(thesis[0]), y=list(thesis[1]), mode="lines",
                                 name="thesis α(λ), Poisson (§4.3.1)", line=dict(color="#999", dash="dot")))
    return _fit_ranges(_layout(fig, "message rate λ (packets/s)", "α (dimensionless)", height=380))


def cpu_figure(rep) -> go.Figure:
    """CPU-seconds per second of the proxy's processes per run against the call rate, the
    utilisation law's least-squares line with its 95 % confidence band, the CPUs the proxy can use
    (dotted) and the rate at which the line reaches them."""
    fig = go.Figure()
    fit = rep.fit
    for i, x in enumerate(getattr(fit, "cpu", []) if fit is not None else []):
        col = _COLOURS[i % len(_COLOURS)]
        pts = pd.DataFrame(x["points"])
        c = x["threads"]
        fig.add_trace(go.Scatter(x=pts["rate_cps"], y=pts["cpu_share"], mode="markers",
                                 name=f"measured, {c} worker{'s' if c > 1 else ''}", marker=dict(size=8, color=col)))
        d, a = x["demand_s"], x["idle_share"]
        if not (math.isfinite(d) and d > 0 and math.isfinite(a)):
            continue
        cap = x["capacity_cps"]
        top = float(max(pts["rate_cps"].max(), cap if math.isfinite(cap) else 0.0))
        grid = np.linspace(0.0, top * 1.05, 100)
        band = x.get("band")
        if band:    # the line's 95 % confidence band
            half = band["t"] * band["s"] * np.sqrt(1 / band["n"] + (grid - band["x_mean"]) ** 2 / band["sxx"])
            fig.add_trace(go.Scatter(x=np.concatenate([grid, grid[::-1]]),
                                     y=np.concatenate([a + d * grid + half, (a + d * grid - half)[::-1]]),
                                     fill="toself", fillcolor=col, opacity=0.15, line=dict(width=0),
                                     mode="lines", name="95 % band of the line", hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=grid, y=a + d * grid, mode="lines", name=f"U = U₀ + D·λ, {c}w",
                                 line=dict(color=col)))
        fig.add_hline(y=x["cpus"], line=dict(color=col, dash="dot", width=1),
                      annotation_text=f"{x['cpus']:g} CPU{'s' if x['cpus'] != 1 else ''}",
                      annotation_position="top left")
    return _fit_ranges(_layout(fig, "call rate (calls/s)", "CPU-seconds per second"))


def _fit_ranges(fig: go.Figure, pad: float = 0.06) -> go.Figure:
    """Set both linear axes' ranges from every trace's points (and error bars), with ``pad`` of the
    span on each side: no measured point falls off the plot or onto its border, on any screen."""
    xs, ys = [], []
    for tr in fig.data:
        x = np.asarray(tr.x if tr.x is not None else [], dtype=float)
        y = np.asarray(tr.y if tr.y is not None else [], dtype=float)
        if x.size != y.size:
            continue
        ok = np.isfinite(x) & np.isfinite(y)
        xs.append(x[ok])
        e = getattr(tr, "error_y", None)
        arr = np.asarray(e.array, dtype=float) if e is not None and e.array is not None else None
        if arr is not None and arr.size == y.size:
            ys += [y[ok] + np.nan_to_num(arr[ok]), y[ok] - np.nan_to_num(arr[ok])]
        ys.append(y[ok])
    for axis, vals in (("xaxis", xs), ("yaxis", ys)):
        v = np.concatenate(vals) if vals else np.array([])
        if not v.size or getattr(fig.layout, axis).type == "log":
            continue
        lo, hi = float(v.min()), float(v.max())
        span = hi - lo if hi > lo else max(abs(hi), 1.0)
        fig.update_layout({axis: dict(range=[lo - pad * span, hi + pad * span])})
    return fig


def slowest_calls(tl: pd.DataFrame, n: int = 5) -> list[tuple[str, float, str]]:
    """The ``n`` slowest calls: (Call-ID, µs, what the µs are).  Ranked by the time the proxy
    held the call's messages (sum of sojourns) when the data have a sojourn, else by the call's
    setup time (first INVITE to its first final response) at the capture point."""
    if not len(tl):
        return []
    cid = tl["call_id"].astype("string")
    ta = tl["t_arr"].to_numpy(dtype="float64", na_value=np.nan)
    td = tl["t_dep"].to_numpy(dtype="float64", na_value=np.nan)
    soj = td - ta
    if np.isfinite(soj).sum() >= 1:
        s = pd.Series(soj).groupby(cid.to_numpy()).sum(min_count=1).dropna().sort_values(ascending=False)
        return [(str(k), float(v) / 1e3, "time in the proxy (sum of its messages' sojourns)")
                for k, v in s.head(n).items()]
    t = np.where(np.isfinite(ta), ta, td)
    d = pd.DataFrame({"cid": cid.to_numpy(), "t": t, "mt": tl["msg_type"].astype("string").to_numpy(),
                      "st": tl["status"].to_numpy(dtype="float64", na_value=np.nan),
                      "cm": tl["cseq_method"].astype("string").fillna("").to_numpy()})
    inv = d[d.mt == "INVITE"].groupby("cid")["t"].min()
    fin = d[(d.st >= 200) & (d.cm == "INVITE")].groupby("cid")["t"].min()
    setup = (fin - inv).dropna().sort_values(ascending=False)
    return [(str(k), float(v) / 1e3, "setup time at the capture point (first INVITE to its final response)")
            for k, v in setup.head(n).items()]


def _label(row) -> str:
    def s(v) -> str:
        return "" if v is None or (not isinstance(v, str) and pd.isna(v)) else str(v)
    if row["kind"] == "request":
        return s(row["method"]) or s(row["cseq_method"]) or "request"
    st = row["status"]
    return f"{int(st) if pd.notna(st) else '?'} ({s(row['cseq_method'])})"


def ladder_figure(call: pd.DataFrame, title: str = "", max_messages: int = 60) -> dict:
    """The ladder (sequence) diagram of one call as the data saw it: time downwards (ms since the
    call's first message), caller | proxy | callee; each message enters the proxy at ``t_arr`` and
    leaves at ``t_dep``, annotated with its sojourn (µs).  Absorbed, dropped and proxy-originated
    messages are drawn as such.  At an endpoint (no proxy) the two parties only.  At most
    ``max_messages`` messages (the first ones).  Returned as a plain figure dict (many
    annotations: Plotly's validation would dominate the report's run time); draw it with
    ``plotly.io.to_html(fig, validate=False)`` or ``go.Figure(fig)``."""
    d = call.copy()
    ta = d["t_arr"].to_numpy(dtype="float64", na_value=np.nan)
    td = d["t_dep"].to_numpy(dtype="float64", na_value=np.nan)
    t0 = np.nanmin(np.concatenate([ta, td]))
    d["_ta"] = (ta - t0) / 1e6
    d["_td"] = (td - t0) / 1e6
    d["_t"] = np.where(np.isfinite(d["_ta"]), d["_ta"], d["_td"])
    d = d.sort_values("_t", kind="stable").head(max_messages)
    endpoint = "vantage" in d.columns and bool((d["vantage"].astype("string") == "endpoint").all())
    inv = d[(d["msg_type"] == "INVITE").fillna(False).to_numpy(bool)]
    caller = str(inv["src"].iloc[0]) if len(inv) and pd.notna(inv["src"].iloc[0]) else None
    lanes = {"caller": 0.0, "proxy": 1.0, "callee": 2.0} if not endpoint else {"caller": 0.0, "callee": 2.0}
    proxy_addr = str(d["proxy"].dropna().iloc[0]) if "proxy" in d.columns and d["proxy"].notna().any() else None
    allt = np.concatenate([d["_ta"].to_numpy(), d["_td"].to_numpy()])
    ymax = float(np.nanmax(allt)) if np.isfinite(allt).any() else 1.0
    shapes = [dict(type="line", x0=x, x1=x, y0=-0.02 * ymax - 0.01, y1=ymax * 1.03 + 0.01,
                   line=dict(color="#aaa", width=2)) for x in lanes.values()]
    ann: list[dict] = []

    def arrow(x0, x1, y, col, width=1.5):
        ann.append(dict(x=x1, y=y, ax=x0, ay=y, xref="x", yref="y", axref="x", ayref="y", showarrow=True,
                        arrowhead=2, arrowcolor=col, arrowwidth=width, text=""))

    def text(x, y, s, col, size=10, xshift=0, yshift=8):
        ann.append(dict(x=x, y=y, text=s, showarrow=False, xshift=xshift, yshift=yshift,
                        font=dict(size=size, color=col)))

    for r in d.to_dict("records"):
        src = str(r["src"]) if pd.notna(r["src"]) else ""
        from_caller = (src == caller) if caller else (r["kind"] == "request")
        is_proxy_src = proxy_addr is not None and src == proxy_addr
        disp = str(r.get("disposition")) if pd.notna(r.get("disposition", None)) else ""
        lab = _label(r)
        col = "#1f77b4" if r["kind"] == "request" else "#2ca02c"
        ya, yd = float(r["_ta"]), float(r["_td"])
        if endpoint:
            x0, x1 = (0.0, 2.0) if from_caller else (2.0, 0.0)
            arrow(x0, x1, ya, col)
            re_ = r.get("retrans", False)
            text(1.0, ya, lab + (" (retransmission)" if pd.notna(re_) and bool(re_) else ""), col)
            continue
        far, near = (2.0, 0.0) if from_caller else (0.0, 2.0)
        if is_proxy_src or (not math.isfinite(ya) and math.isfinite(yd)):
            dst = str(r["dst"]) if pd.notna(r["dst"]) else ""
            x1 = 0.0 if (caller and dst == caller) else 2.0
            arrow(1.0, x1, yd, "#777", 1)
            text((1.0 + x1) / 2, yd, f"{lab} (proxy's own)", "#777", 9)
            continue
        if not math.isfinite(ya):
            continue
        arrow(near, 1.0, ya, col)
        text((near + 1.0) / 2, ya, lab, col)
        if math.isfinite(yd):
            arrow(1.0, far, yd, col)
            shapes.append(dict(type="line", x0=1.0, x1=1.0, y0=ya, y1=yd, line=dict(color="#d62728", width=6)))
            text(1.0, yd, f"{(yd - ya) * 1e3:,.0f} µs", "#d62728", 10, xshift=36, yshift=0)
        else:
            why = "dropped" if bool(r["dropped"]) else (disp or "not forwarded")
            text(1.0, ya, f"✗ {why}", "#d62728", 9, xshift=60, yshift=0)
    names = {"caller": "caller (UAC)", "proxy": "proxy", "callee": "callee (UAS)"}
    layout = dict(
        height=max(320, min(900, 60 * len(d) + 120)), autosize=True, plot_bgcolor="white", paper_bgcolor="white",
        margin=dict(l=60, r=20, t=50, b=20), showlegend=False, title=dict(text=title, font=dict(size=12)),
        xaxis=dict(tickvals=list(lanes.values()), ticktext=[names[k] for k in lanes], range=[-0.35, 2.35],
                   side="top", showgrid=False, zeroline=False),
        yaxis=dict(title=dict(text="ms since the call's first message"), autorange="reversed", zeroline=False),
        shapes=shapes, annotations=ann)
    return {"data": [], "layout": layout}


def mg1_curve(rep) -> dict[str, np.ndarray] | None:
    """The M/G/1 prediction of the mean Q over the one-worker runs' rates (and 15 % beyond), with
    the fitted α(λ) and R interpolated between the runs: ``{"cps", "q_us"}``; None with < 2 runs."""
    from sipperf.fit import mg1_q_us, moments_at

    fit = rep.fit
    one = [r.measure.fit_input for r in rep.runs if r.measure is not None and r.measure.has_sojourn
           and r.measure.fit_input.c == 1]
    if fit is None or fit.base is None or len(one) < 2:
        return None
    lam = np.array([r.lam_pps for r in one])
    o = np.argsort(lam)
    one = [one[i] for i in o]
    lam = lam[o]
    grid = np.linspace(lam.min(), lam.max() * 1.15, 120)
    q = []
    for x in grid:
        j = int(np.clip(np.searchsorted(lam, x), 0, len(one) - 1))
        m = moments_at(one[j], fit.base)
        # R interpolated between the runs, as the fit does
        from dataclasses import replace as _r
        m = _r(m, r_mean_us=float(np.interp(x, lam, [r.r_mean_us for r in one])) if fit.base.kind == "k_sockq" else 0.0)
        v = mg1_q_us(float(x), m, float(fit.alpha_curve(x)))
        q.append(v if math.isfinite(v) else np.nan)
    return {"cps": grid / rep.msgs_per_call, "q_us": np.array(q)}


def drop_curves(rep) -> dict[int, dict[str, np.ndarray]]:
    """Per thread count with a model, the M/M/c/K drop probability over 0.3-1.3 × the highest rate
    (or knee): ``{c: {"cps", "p"}}``."""
    from sipperf.fit import drop_probability

    fit = rep.fit
    out = {}
    if fit is None or fit.ex1 is None:
        return out
    for k in fit.knees:
        c = int(k["threads"])
        if c > 1 and fit.beta_plane is None:
            continue
        hi = max(k.get("highest_rate_cps") or 0, k.get("model_cps") or 0)
        if not (hi and math.isfinite(hi)):
            continue
        grid = np.linspace(hi * 0.3, hi * 1.3, 120)
        p = []
        for cps in grid:
            lam = cps * rep.msgs_per_call
            b = 1.0 if c == 1 else max(float(fit.beta_plane(lam, c)), 1e-3)
            ex = float(fit.ex1(lam))
            p.append(drop_probability(lam, ex, c, k["k_pkts"], b) if ex > 0 else float("nan"))
        out[c] = {"cps": grid, "p": np.array(p)}
    return out


def per_run_frame(rep) -> pd.DataFrame:
    """The fit's per-run table plus each run's p99 sojourn (µs): the input of the load figures."""
    pr = pd.DataFrame(rep.fit.per_run if rep.fit is not None else [])
    p99 = {}
    for r in rep.runs:
        c = r.measure.components if r.measure is not None else None
        x = c[(c["component"] == "sojourn") & (c["msg_type"] == "ALL")] if c is not None and len(c) else []
        p99[r.label] = float(x["p99_us"].iloc[0]) if len(x) else float("nan")
    if len(pr):
        pr["p99_us"] = pr["run"].map(p99)
    return pr
