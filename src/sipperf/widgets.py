"""Live ipywidgets versions of the book's slider figures (for Binder or a local JupyterLab).

In the static HTML book these widgets show only their first state; the Plotly figures from
:mod:`sipperf.viz` are the static equivalent.
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np


def live_slider(
    x: np.ndarray,
    values: Sequence[float],
    curves: Callable[[float], Mapping[str, np.ndarray]],
    *,
    slider_label: str,
    x_title: str,
    y_title: str,
    log_y: bool = False,
):
    """An ipywidgets slider driving a matplotlib plot of ``curves(v)`` over ``x``; same
    arguments as :func:`sipperf.viz.slider_figure`.  Returns the widget."""
    import ipywidgets as W
    import matplotlib.pyplot as plt

    values = list(values)
    out = W.Output()
    slider = W.SelectionSlider(options=values, value=values[0], description=slider_label,
                               continuous_update=False)

    def draw(change=None):
        with out:
            out.clear_output(wait=True)
            fig, ax = plt.subplots(figsize=(7, 4))
            for name, y in curves(slider.value).items():
                ax.plot(x, y, label=name)
            ax.set_xlabel(x_title)
            ax.set_ylabel(y_title)
            if log_y:
                ax.set_yscale("log")
            ax.legend()
            plt.show()

    slider.observe(draw, names="value")
    draw()
    return W.VBox([slider, out])
