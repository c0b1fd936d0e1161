"""slider_figure's layout and fixed y-range, and the chapter table helper (sipperf.viz).

The rendered layout (no overlap at 390 and 1400 px) is checked in a real browser by
tests/test_book_browser.py::test_plotly_layout_readable; here the figure specification."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sipperf.viz import slider_figure, table

X = np.linspace(1.0, 10.0, 20)


def _fig(**kw):
    return slider_figure(X, [1, 2, 5], lambda v: {"a": v * X, "b": v * X ** 2},
                         slider_label="scale", x_title="x (s)", y_title="y (µs)", **kw)


def test_slider_above_legend_below_and_responsive_margins():
    lay = _fig().layout
    s = lay.sliders[0]
    assert s.yanchor == "bottom" and s.y >= 1  # above the plot area: never on the x-axis title
    assert lay.legend.orientation == "h" and lay.legend.yref == "container" and lay.legend.y == 0
    assert lay.margin.autoexpand is not False and lay.xaxis.automargin and lay.yaxis.automargin
    assert lay.width is None  # width follows the page


def test_fixed_y_range_covers_every_step_linear_and_log():
    fig = _fig()
    allv = np.concatenate([t.y for t in fig.data])
    lo, hi = fig.layout.yaxis.range
    assert lo <= allv.min() and hi >= allv.max() and hi - lo < 1.2 * (allv.max() - allv.min())
    flog = _fig(log_y=True)
    lo, hi = flog.layout.yaxis.range
    assert 10 ** lo <= allv.min() and 10 ** hi >= allv.max()


def test_fixed_y_ignores_nonfinite_and_can_be_turned_off_or_set():
    fig = slider_figure(X, [1, 2], lambda v: {"a": np.where(X > 9, np.inf, v * X)},
                        slider_label="s", x_title="x", y_title="y")
    lo, hi = fig.layout.yaxis.range
    assert np.isfinite(lo) and np.isfinite(hi) and hi < 2 * 9 * 1.1
    assert _fig(fixed_y=False).layout.yaxis.range is None
    assert list(_fig(y_range=(0, 50)).layout.yaxis.range) == [0, 50]
    assert list(_fig(log_y=True, y_range=(1, 100)).layout.yaxis.range) == [0, 2]
    for bad in [(5, 1), (0, np.nan)]:
        with pytest.raises(ValueError):
            _fig(y_range=bad)
    with pytest.raises(ValueError):
        _fig(log_y=True, y_range=(0, 10))


def test_steps_toggle_the_right_traces():
    fig = _fig(static_traces={"measured": (X[:3], X[:3])})
    steps = fig.layout.sliders[0].steps
    assert len(steps) == 3 and len(fig.data) == 3 * 2 + 1
    vis = steps[1].args[0]["visible"]
    assert vis == [False, False, True, True, False, False, True]
    with pytest.raises(ValueError):
        _fig(active=3)


def test_table_caption_headers_no_index_formats():
    df = pd.DataFrame({"cps": [100, 200], "k_rcv_us": [12.3456, np.nan], "mode": ["a", "b"]})
    html = table(df, caption="Receive path by call rate", headers={"cps": "call rate (calls/s)",
                 "k_rcv_us": "K_rcv (µs)"}, formats={"k_rcv_us": "{:.1f}"}).to_html()
    assert "<caption>Receive path by call rate</caption>" in html
    assert "call rate (calls/s)" in html and "K_rcv (µs)" in html and "k_rcv_us" not in html
    assert ">12.3<" in html.replace(" ", "") and "—" in html
    assert "row_heading" not in html  # the 0..n index is hidden
    kept = table(df.set_index("mode"), caption="c", index=True, headers={"mode": "mode of operation"})
    assert "mode of operation" in kept.to_html() and "row_heading" not in kept.to_html()


def test_table_refuses_missing_caption_and_unknown_columns():
    df = pd.DataFrame({"a": [1.0]})
    with pytest.raises(ValueError):
        table(df, caption=" ")
    with pytest.raises(KeyError):
        table(df, caption="x", headers={"b": "B"})


def test_table_with_a_repeated_index_and_phone_rule():
    df = pd.concat({"4.4": pd.DataFrame({"w": [1.0, 2.0]}), "4.5": pd.DataFrame({"w": [3.0, 4.0]})},
                   names=["table"]).reset_index(level=0)  # index 0, 1, 0, 1
    html = table(df, caption="c")._repr_html_()  # rendering must not raise
    assert "@media (max-width: 600px)" in html and html.count("<tr>") == 5
    t = table(pd.DataFrame({"note": ["a long text"], "x": [1.5]}), caption="c")
    css = t.to_html()
    assert "white-space: normal" in css and "white-space: nowrap" in css
