"""Figures for the book: static Plotly sliders over precomputed grids, and matplotlib helpers.

ipywidgets lose their callbacks in static HTML, so every interactive figure in the book is a
Plotly figure whose slider steps toggle the visibility of traces computed at build time.
It needs no kernel: the browser does all the work.  :mod:`sipperf.widgets` offers the live
ipywidgets version of the same figures for Binder / JupyterLab.
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

#: µs per second / per nanosecond, for axis conversions
US_PER_S = 1e6
US_PER_NS = 1e-3


def slider_figure(
    x: np.ndarray,
    values: Sequence[float],
    curves: Callable[[float], Mapping[str, np.ndarray]],
    *,
    slider_label: str,
    x_title: str,
    y_title: str,
    title: str = "",
    value_format: str = "{:g}",
    active: int = 0,
    log_y: bool = False,
    static_traces: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
) -> go.Figure:
    """A Plotly figure with one slider step per entry of ``values``.

    ``curves(v)`` returns ``{trace name: y array over x}`` for slider value ``v``; every
    step must return the same trace names.  All traces are computed now (build time) and
    the slider only switches visibility, so the figure works in static HTML.
    ``static_traces`` (name -> (x, y)) stay visible at every step, e.g. measured points.
    """
    values = list(values)
    if not values:
        raise ValueError("slider_figure needs at least one slider value")
    fig = go.Figure()
    names: list[str] | None = None
    for i, v in enumerate(values):
        ys = curves(v)
        if names is None:
            names = list(ys)
        elif list(ys) != names:
            raise ValueError(f"curves({v!r}) returned traces {list(ys)}, expected {names}")
        for name in names:
            fig.add_trace(go.Scatter(
                x=np.asarray(x), y=np.asarray(ys[name], dtype=float), mode="lines", name=name,
                visible=(i == active), legendgroup=name,
                meta={"slider_value": float(v)},
            ))
    n = len(names or [])
    for name, (sx, sy) in (static_traces or {}).items():
        fig.add_trace(go.Scatter(x=np.asarray(sx), y=np.asarray(sy, dtype=float),
                                 mode="markers", name=name, visible=True))
    n_static = len(static_traces or {})
    steps = []
    for i, v in enumerate(values):
        vis = [False] * (n * len(values)) + [True] * n_static
        vis[i * n:(i + 1) * n] = [True] * n
        steps.append({"method": "update", "args": [{"visible": vis}],
                      "label": value_format.format(v)})
    fig.update_layout(
        title=title or None,
        xaxis_title=x_title, yaxis_title=y_title,
        yaxis_type="log" if log_y else "linear",
        sliders=[{"active": active, "currentvalue": {"prefix": f"{slider_label} = "},
                  "pad": {"t": 50}, "steps": steps}],
        margin={"l": 60, "r": 20, "t": 50 if title else 20, "b": 40},
        height=460,
        template="plotly_white",
    )
    return fig


def show(fig: go.Figure):
    """Display a Plotly figure as self-contained HTML that works in the static book.

    plotly.js itself is served once by the book (``book/_static/plotly.min.js``), so the
    cell output holds only the figure's data and layout.  Returns an ``IPython.display.HTML``.
    """
    from IPython.display import HTML

    return HTML(fig.to_html(include_plotlyjs=False, full_html=False,
                            config={"displaylogo": False, "responsive": True}))
