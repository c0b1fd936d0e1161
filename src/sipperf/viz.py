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
    fixed_y: bool = True,
    y_range: tuple[float, float] | None = None,
    height: int = 480,
) -> go.Figure:
    """A Plotly figure with one slider step per entry of ``values``.

    ``curves(v)`` returns ``{trace name: y array over x}`` for slider value ``v``; every
    step must return the same trace names.  All traces are computed now (build time) and
    the slider only switches visibility, so the figure works in static HTML.
    ``static_traces`` (name -> (x, y)) stay visible at every step, e.g. measured points.

    Layout (readable from a 390 px phone to a desktop): the slider sits *above* the plot, so
    it can never cover the x-axis title; the legend is horizontal and *below* the plot, under
    the x-axis title, and wraps onto more lines on a narrow screen (Plotly enlarges the bottom
    margin to fit it); the width follows the page (``show`` renders it responsive).

    ``fixed_y`` (default) keeps one y-range for every slider step, computed from all finite
    values of all steps and static traces (positive ones on a log axis), so that moving the
    slider shows the curves move rather than the axis rescale; pass ``fixed_y=False`` when the
    steps have incomparable scales, or ``y_range=(lo, hi)`` (data units, also on a log axis)
    to set the range yourself.
    """
    values = list(values)
    if not values:
        raise ValueError("slider_figure needs at least one slider value")
    if not 0 <= active < len(values):
        raise ValueError(f"active={active} is not a step index (0..{len(values) - 1})")
    fig = go.Figure()
    names: list[str] | None = None
    all_y: list[np.ndarray] = []
    for i, v in enumerate(values):
        ys = curves(v)
        if names is None:
            names = list(ys)
        elif list(ys) != names:
            raise ValueError(f"curves({v!r}) returned traces {list(ys)}, expected {names}")
        for name in names:
            y = np.asarray(ys[name], dtype=float)
            all_y.append(y.ravel())
            fig.add_trace(go.Scatter(
                x=np.asarray(x), y=y, mode="lines", name=name,
                visible=(i == active), legendgroup=name,
                meta={"slider_value": float(v)},
            ))
    n = len(names or [])
    for name, (sx, sy) in (static_traces or {}).items():
        sy = np.asarray(sy, dtype=float)
        all_y.append(sy.ravel())
        fig.add_trace(go.Scatter(x=np.asarray(sx), y=sy, mode="markers", name=name, visible=True))
    n_static = len(static_traces or {})
    steps = []
    for i, v in enumerate(values):
        vis = [False] * (n * len(values)) + [True] * n_static
        vis[i * n:(i + 1) * n] = [True] * n
        steps.append({"method": "update", "args": [{"visible": vis}],
                      "label": value_format.format(v)})
    yaxis: dict = {"type": "log" if log_y else "linear", "automargin": True,
                   "title": {"text": y_title}}
    rng = _y_range(all_y, log_y) if y_range is None and fixed_y else None
    if y_range is not None:
        lo, hi = (float(v) for v in y_range)
        if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi) or (log_y and lo <= 0):
            raise ValueError(f"y_range must be finite, increasing (and > 0 on a log axis): {y_range}")
        rng = [np.log10(lo), np.log10(hi)] if log_y else [lo, hi]
    if rng is not None:
        yaxis["range"] = rng
    fig.update_layout(
        title={"text": title, "automargin": True, "y": 1, "yref": "container", "yanchor": "top"}
        if title else None,
        xaxis={"automargin": True, "title": {"text": x_title}},
        yaxis=yaxis,
        sliders=[{"active": active, "currentvalue": {"prefix": f"{slider_label} = "},
                  "x": 0, "len": 1, "y": 1, "yanchor": "bottom", "pad": {"t": 0, "b": 10},
                  "steps": steps}],
        legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 0, "yanchor": "bottom",
                "yref": "container"},
        margin={"l": 10, "r": 10, "t": 10, "b": 10, "autoexpand": True},
        height=height,
        template="plotly_white",
    )
    return fig


def _y_range(ys: Sequence[np.ndarray], log_y: bool) -> list[float] | None:
    """One y-axis range covering every finite value (5 % padding); None if there is none."""
    y = np.concatenate(ys) if ys else np.array([])
    y = y[np.isfinite(y)]
    if log_y:
        y = y[y > 0]
        if y.size == 0:
            return None
        lo, hi = np.log10(y.min()), np.log10(y.max())
    else:
        if y.size == 0:
            return None
        lo, hi = float(y.min()), float(y.max())
    if hi == lo:
        pad = abs(lo) * 0.05 or (0.05 if log_y else 1.0)
    else:
        pad = 0.05 * (hi - lo)
    return [float(lo - pad), float(hi + pad)]


#: CSS of :func:`table`: compact, long headers wrap, cells do not, the caption sits on top
TABLE_STYLES = [
    {"selector": "", "props": [("font-size", "0.85em"), ("width", "auto"), ("max-width", "100%"),
                               ("border-collapse", "collapse")]},
    {"selector": "caption", "props": [("caption-side", "top"), ("text-align", "left"),
                                      ("font-weight", "normal"), ("padding-bottom", "0.4em")]},
    {"selector": "th", "props": [("white-space", "normal"), ("text-align", "right"),
                                 ("padding", "0.25em 0.5em"), ("max-width", "9em")]},
    {"selector": "td", "props": [("text-align", "right"), ("padding", "0.25em 0.5em")]},
]

#: narrow screens (phones): smaller type, tighter cells
_NARROW_CSS = ("@media (max-width: 600px) {{ table#T_{uuid} {{ font-size: 0.72em; }} "
               "table#T_{uuid} th, table#T_{uuid} td {{ padding: 0.2em 0.3em; }} }}")


class ChapterTable:
    """What :func:`table` returns: displays as HTML (the Styler's, plus a phone-size rule) and
    otherwise behaves like the underlying pandas ``Styler`` (``.to_html()``, ``.data``, ...)."""

    def __init__(self, styler):
        self.styler = styler

    def __getattr__(self, name):
        return getattr(self.styler, name)

    def to_html(self, *args, **kwargs) -> str:
        html = self.styler.to_html(*args, **kwargs)
        return f"{html}\n<style>{_NARROW_CSS.format(uuid=self.styler.uuid)}</style>"

    def _repr_html_(self) -> str:
        return self.to_html()


def _infinity_as_symbol(f: str | Callable) -> Callable:
    """A cell formatter that prints ±infinity as ∞ / −∞ (an unstable queue's wait, an unbounded
    buffer), never as the "inf" a format string gives; everything else as ``f`` does."""
    def cell(v):
        if isinstance(v, (float, np.floating)) and np.isinf(v):
            return "∞" if v > 0 else "−∞"
        return f(v) if callable(f) else f.format(v)
    return cell


def table(
    df,
    *,
    caption: str,
    headers: Mapping[str, str] | None = None,
    formats: Mapping[str, str | Callable] | None = None,
    columns: Sequence[str] | None = None,
    index: bool = False,
    na_rep: str = "—",
    float_format: str = "{:.4g}",
):
    """A chapter table: a styled pandas table with a caption, human headers, no 0..n index.

    ``columns`` selects and orders columns (original names); ``headers`` renames them for the
    reader — put the unit in the header, e.g. ``{"k_rcv_us": "K_rcv (µs)"}``; ``formats`` maps
    original column names to a format string or callable (floats default to ``float_format``,
    missing values print as ``na_rep``).  ``index=True`` keeps a *meaningful* index (e.g. the
    message type) as the first column, under its renamed name; otherwise the index is hidden.
    Headers and text cells wrap, numbers do not, and the font is compact (smaller still below
    600 px) so that up to about eight columns fit the text column on a desktop and about five on
    a phone; wider tables should be split or transposed.  Returns a :class:`ChapterTable` (it
    displays itself; ``.styler`` is the pandas ``Styler``).
    """
    import pandas as pd

    if not caption or not str(caption).strip():
        raise ValueError("a table needs a caption")
    headers = dict(headers or {})
    formats = dict(formats or {})
    d = df if columns is None else df.loc[:, list(columns)]
    unknown = (set(headers) | set(formats)) - set(map(str, d.columns)) - {str(d.index.name)}
    if unknown:
        raise KeyError(f"headers/formats name columns the table does not have: {sorted(unknown)}")
    d = d.reset_index() if index else d.reset_index(drop=True)  # unique 0..n-1 index, hidden below
    fmt = {}
    for c in d.columns:
        if str(c) in formats:
            fmt[c] = _infinity_as_symbol(formats[str(c)])
        elif pd.api.types.is_float_dtype(d[c]):
            fmt[c] = _infinity_as_symbol(float_format)
    st = d.style.format(fmt, na_rep=na_rep)
    text_cols = [c for c in d.columns if not pd.api.types.is_numeric_dtype(d[c])]
    num_cols = [c for c in d.columns if c not in text_cols]
    if text_cols:  # words read from the left and wrap; numbers line up on the right, unbroken
        st = st.set_properties(subset=text_cols, **{"text-align": "left", "white-space": "normal",
                                                    "min-width": "5em"})
    if num_cols:
        st = st.set_properties(subset=num_cols, **{"white-space": "nowrap"})
    st = st.relabel_index([headers.get(str(c), str(c)) for c in d.columns], axis="columns")
    return ChapterTable(st.hide(axis="index").set_caption(str(caption)).set_table_styles(TABLE_STYLES)
                        .set_table_attributes('class="sipperf-table"'))


#: the display options of every figure: no Plotly logo, width follows the page
PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}

#: where the HTML fallback fetches plotly.js when the page has none (not used by the book)
_PLOTLYJS_CDN = "https://cdn.plot.ly/plotly-{version}.min.js"

_FALLBACK_JS = """(function () {
  var id = "%(id)s", spec = %(spec)s, url = "%(url)s";
  function draw(P) { var el = document.getElementById(id); if (el) P.newPlot(el, spec.data, spec.layout, spec.config); }
  function fail() { var el = document.getElementById(id);
    if (el) el.textContent = "This figure needs plotly.js, which could not be loaded from " + url + "."; }
  function start() {
    if (window.Plotly) { draw(window.Plotly); return; }
    if (window.requirejs) { window.requirejs.config({paths: {plotly: url.slice(0, -3)}});
      window.requirejs(["plotly"], draw, fail); return; }
    var s = document.createElement("script"); s.src = url;
    s.onload = function () { draw(window.Plotly); }; s.onerror = fail;
    document.head.appendChild(s);
  }
  // a page that loads plotly.js with "defer" has it by DOMContentLoaded
  if (window.Plotly || document.readyState !== "loading") start();
  else document.addEventListener("DOMContentLoaded", start);
})();"""


class PlotlyOutput:
    """A Plotly figure as a cell output that draws wherever the chapter is read.

    Its mime bundle holds the same figure twice:

    - ``application/vnd.plotly.v1+json``, Plotly's own mime type, drawn by the Plotly
      extension of JupyterLab / Binder / Notebook 7 and by VS Code;
    - ``text/html``, for the static book (Jupyter Book keeps only this one): a ``<div>`` and a
      script that draws it with the page's ``window.Plotly`` (the book serves plotly.js once,
      ``book/_static/plotly.min.js``), or, on a page without plotly.js (classic notebook),
      loads plotly.js from its CDN first.
    """

    def __init__(self, fig: go.Figure):
        import json
        import uuid

        import plotly.io as pio
        from plotly.offline import get_plotlyjs_version

        self.figure = fig
        # plotly's own JSON encoder turns numpy arrays into lists; round-trip into plain objects
        fig_json = fig.to_plotly_json()
        self.spec = json.loads(pio.to_json({"data": fig_json["data"], "layout": fig_json["layout"],
                                            "config": PLOTLY_CONFIG}, validate=False))
        self._id = f"sipperf-plot-{uuid.uuid4().hex}"
        self._url = _PLOTLYJS_CDN.format(version=get_plotlyjs_version())

    def __repr__(self) -> str:
        return f"<Plotly figure, {len(self.spec['data'])} traces: drawn in a notebook or the book>"

    def _repr_html_(self) -> str:
        import json

        height = self.spec["layout"].get("height")
        style = f"height:{height}px; width:100%;" if height else "width:100%;"
        # "</" must not end the <script> early inside JSON strings
        spec = json.dumps(self.spec).replace("</", "<\\/")
        js = _FALLBACK_JS % {"id": self._id, "spec": spec, "url": self._url}
        return (f'<div id="{self._id}" class="plotly-graph-div" style="{style}"></div>\n'
                f'<script type="text/javascript">{js}</script>')

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"application/vnd.plotly.v1+json": self.spec, "text/html": self._repr_html_()}


def show(fig: go.Figure) -> PlotlyOutput:
    """Display a Plotly figure so that it draws in the static book, JupyterLab, Binder and
    VS Code alike (see :class:`PlotlyOutput`); the last expression of a cell, or
    ``display(show(fig))``."""
    return PlotlyOutput(fig)
