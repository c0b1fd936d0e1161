"""The live side of the book: ipywidgets sliders and reading aids for a chapter opened as a
notebook (JupyterLab, Binder, Notebook 7, VS Code).

Live widgets are made only in a kernel that an interactive frontend drives.  When nobody can
see them (the book build, papermill, ``jupyter nbconvert --execute``) they are not created at
all: a headless executor has no widget manager, and the comm messages an ipywidgets
``Output`` exchanges with nbclient's stand-in for one made chapter execution stall on a busy
machine (each stall lasted exactly the executor's per-cell timeout).  The static Plotly figure
of :func:`sipperf.viz.slider_figure`, shown just before each live slider, works everywhere.

How a kernel knows it has a frontend (:func:`frontend_present`):

- ``SIPPERF_STATIC=1`` in the environment: never live (the book build sets it);
- ``SIPPERF_LIVE=1``: always live (for a frontend the checks below do not recognise);
- otherwise live when the running cell came from a frontend that names its cells
  (``cellId`` in the execute request's metadata: JupyterLab sends it, tests/test_jupyterlab.py,
  and so does Notebook 7, built on JupyterLab's notebook), or when a frontend's widget manager has opened the
  ``jupyter.widget.control`` comm.  Another frontend that does neither gets the one-line note
  instead of the widget (the Plotly figure above it still has its slider); ``SIPPERF_LIVE=1``.
"""
from __future__ import annotations

import os
import re
from typing import Callable, Mapping, Sequence

import numpy as np

#: set to 1 to never create live widgets (the book build sets it)
STATIC_ENV = "SIPPERF_STATIC"
#: set to 1 to always create them
LIVE_ENV = "SIPPERF_LIVE"

_GLUE_PREFIX = "application/papermill.record/"


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def _kernel():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    ip = get_ipython()
    return getattr(ip, "kernel", None) if ip is not None else None


def frontend_present() -> bool:
    """True when this code runs in a kernel cell sent by a frontend that can show widgets
    (rules in the module docstring)."""
    if _flag(STATIC_ENV):
        return False
    if _flag(LIVE_ENV):
        return True
    kernel = _kernel()
    if kernel is None:
        return False
    try:
        parent = kernel.get_parent("shell") or {}
    except Exception:  # an older ipykernel without get_parent
        parent = {}
    if "cellId" in (parent.get("metadata") or {}):
        return True
    try:
        from ipywidgets import Widget
    except ImportError:
        return False
    return getattr(Widget, "_control_comm", None) is not None


class _NotLive:
    """What :func:`live_slider` returns when no frontend can show a widget."""

    def __repr__(self) -> str:
        return ("(live slider not created: no widget frontend detected; the figure above has the "
                f"same slider. Set {LIVE_ENV}=1 before starting the kernel to force it.)")


def live_slider(
    x: np.ndarray,
    values: Sequence[float],
    curves: Callable[[float], Mapping[str, np.ndarray]],
    *,
    slider_label: str,
    x_title: str,
    y_title: str,
    log_y: bool = False,
    **figure_kwargs,
):
    """An ipywidgets slider over ``values`` driving the same Plotly figure as
    :func:`sipperf.viz.slider_figure` (same arguments; extra keywords go to it).

    Returns the widget when a frontend can show it (:func:`frontend_present`); otherwise
    nothing at build time (``SIPPERF_STATIC=1``) or a one-line note."""
    if not frontend_present():
        return None if _flag(STATIC_ENV) else _NotLive()
    import ipywidgets as W
    from IPython.display import display

    from sipperf.viz import show, slider_figure

    values = list(values)
    fig = slider_figure(x, values, curves, slider_label=slider_label, x_title=x_title,
                        y_title=y_title, log_y=log_y, **figure_kwargs)
    # the ipywidgets slider replaces Plotly's own: keep each step's trace visibility
    steps = [list(step.args[0]["visible"]) for step in fig.layout.sliders[0].steps]
    fig.layout.sliders = ()
    out = W.Output()
    slider = W.SelectionSlider(options=values, value=values[0], description=slider_label,
                               continuous_update=False, style={"description_width": "initial"},
                               layout={"width": "min(100%, 40em)"})

    def draw(change=None):
        visible = steps[values.index(slider.value)]
        for trace, vis in zip(fig.data, visible):
            trace.visible = vis
        with out:
            out.clear_output(wait=True)
            display(show(fig))

    slider.observe(draw, names="value")
    draw()
    return W.VBox([slider, out])


_NOTE = """\
**Reading this chapter as a notebook.** The text is written for the built book, so some of its
markup shows here as written:

- {glue:text}`name` stands for a number computed by a code cell above it: once the cells have
  run, the value appears under the cell that computes it, as `name = value`;
- {numref}`fig-…` and {numref}`tab-…` point to the figure or table whose cell header has that
  `name:`; {doc}`ch05_one_thread` is another chapter (a file next to this one);
- `{exercise}` blocks are exercises, and the blocks between `{solution-start}` and
  `{solution-end}` their solutions (folded in the book: try the exercise first).

Run all cells (Run → Run All Cells). Each slider figure is followed by a cell that makes a live
ipywidgets version of it.
"""


def _show_glued(msg: dict) -> dict:
    """Display hook: a value glued with ``glue(name, v, display=False)`` is sent in a mime type
    no frontend draws; add a plain-text ``name = value`` line so the reader sees it."""
    if msg.get("msg_type") != "display_data":
        return msg
    content = msg.get("content") or {}
    book = (content.get("metadata") or {}).get("scrapbook") or {}
    data = content.get("data") or {}
    value = data.get(_GLUE_PREFIX + "text/plain")
    if book.get("mime_prefix") == _GLUE_PREFIX and value is not None and "text/plain" not in data:
        data["text/plain"] = f"{book.get('name')} = {_readable(value)}"
    return msg


_NP_SCALAR = re.compile(r"^np\.\w+\((.*)\)$")


def _readable(value: str) -> str:
    """A glued value's repr as a reader wants it: ``np.float64(0.1)`` -> ``0.1``, a float's
    digits cut to 6 significant ones (the text rounds further, e.g. ``{glue:text}`x:.2f```)."""
    text = str(value).strip()
    m = _NP_SCALAR.match(text)
    if m:
        text = m.group(1)
    try:
        number = float(text)
    except ValueError:
        return str(value)
    if re.fullmatch(r"[+-]?\d+", text):
        return text  # an integer stays exact
    return f"{number:.6g}"


def reading_aids():
    """Run first in a chapter opened as a notebook: explains the book's markup and makes every
    glued value visible under the cell that computes it.  Does nothing without a frontend
    (the book build), so the static book is unchanged."""
    if not frontend_present():
        return None
    from IPython import get_ipython
    from IPython.display import Markdown

    pub = get_ipython().display_pub
    if hasattr(pub, "register_hook") and _show_glued not in getattr(pub, "_hooks", []):
        pub.register_hook(_show_glued)
    return Markdown(_NOTE)
