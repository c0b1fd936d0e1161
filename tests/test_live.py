"""Figures and widgets for every place the book is read, and chapter execution without stalls.

- ``sipperf.viz.show``: Plotly's own mime bundle (JupyterLab, Binder, VS Code) plus the HTML the
  static book keeps, both holding the figure exactly as Plotly serialises it;
- ``sipperf.widgets``: live widgets only where a frontend can show them, never at build time;
- the book build's executor (book/_ext/sipperf_execute.py): a chapter's kernel sees
  ``SIPPERF_STATIC=1``, the live-slider cell creates no widget, and a chapter over its time
  budget fails with ``CellTimeoutError`` naming the cell;
- every book page, code or not, runs under papermill (kernelspec present).

The live side in a real JupyterLab is tests/test_jupyterlab.py.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PLOTLY_MIME = "application/vnd.plotly.v1+json"


def _fig():
    from sipperf.viz import slider_figure

    x = np.linspace(0.0, 1.0, 11)
    return slider_figure(x, [1.0, 2.0, 3.0], lambda a: {"a·x": a * x, "x^a": x ** a},
                         slider_label="a", x_title="x", y_title="y")


def test_show_bundle_holds_plotlys_own_serialisation():
    import plotly.io as pio

    from sipperf.viz import show

    fig = _fig()
    bundle = show(fig)._repr_mimebundle_()
    assert set(bundle) == {PLOTLY_MIME, "text/html"}
    ref = json.loads(pio.to_json(fig))  # Plotly's own JSON of the figure
    spec = bundle[PLOTLY_MIME]
    assert spec["data"] == ref["data"] and spec["layout"] == ref["layout"]
    assert spec["config"]["displaylogo"] is False
    json.dumps(bundle)  # a display_data message must be JSON
    html = bundle["text/html"]
    assert html.count("<script") == 1 and "plotly.min.js" not in html  # plotly.js is not inlined
    assert "window.Plotly" in html  # drawn with the page's plotly.js (the book serves it once)
    # the figure inside the HTML is the same figure
    start = html.index("spec = ") + len("spec = ")
    embedded, _ = json.JSONDecoder().raw_decode(html[start:].replace("<\\/", "</"))
    assert embedded == spec


def test_show_html_cannot_close_its_script_early():
    import plotly.graph_objects as go

    from sipperf.viz import show

    html = show(go.Figure(go.Scatter(x=[1], y=[2], name="</script><b>x")))._repr_html_()
    assert html.count("</script>") == 1 and html.rstrip().endswith("</script>")


def _no_flags(monkeypatch):
    from sipperf import widgets

    monkeypatch.delenv(widgets.STATIC_ENV, raising=False)
    monkeypatch.delenv(widgets.LIVE_ENV, raising=False)
    return widgets


def test_no_live_widget_without_a_frontend(monkeypatch):
    widgets = _no_flags(monkeypatch)
    x = np.linspace(0, 1, 5)
    args = (x, [1.0, 2.0], lambda a: {"y": a * x})
    kw = dict(slider_label="a", x_title="x", y_title="y")
    assert not widgets.frontend_present()  # plain Python: no kernel at all
    assert "no widget frontend" in repr(widgets.live_slider(*args, **kw))
    assert widgets.reading_aids() is None
    monkeypatch.setenv(widgets.STATIC_ENV, "1")
    monkeypatch.setenv(widgets.LIVE_ENV, "1")  # static wins: the book build
    assert widgets.live_slider(*args, **kw) is None


def test_live_widget_forced(monkeypatch):
    ipywidgets = pytest.importorskip("ipywidgets")
    widgets = _no_flags(monkeypatch)
    monkeypatch.setenv(widgets.LIVE_ENV, "1")
    fig = _fig()
    x = np.asarray(fig.data[0].x)
    w = widgets.live_slider(x, [1.0, 2.0, 3.0], lambda a: {"a·x": a * x, "x^a": x ** a},
                            slider_label="a", x_title="x", y_title="y")
    assert isinstance(w, ipywidgets.VBox)
    slider, out = w.children
    assert isinstance(slider, ipywidgets.SelectionSlider) and list(slider.options) == [1.0, 2.0, 3.0]
    assert isinstance(out, ipywidgets.Output)


def test_glue_hook_shows_hidden_values():
    from sipperf.widgets import _GLUE_PREFIX, _show_glued

    msg = {"msg_type": "display_data",
           "content": {"data": {_GLUE_PREFIX + "text/plain": "12.5"},
                       "metadata": {"scrapbook": {"name": "w_us", "mime_prefix": _GLUE_PREFIX}}}}
    assert _show_glued(msg)["content"]["data"]["text/plain"] == "w_us = 12.5"
    shown = {"msg_type": "display_data",  # glue(..., display=True) is visible already
             "content": {"data": {"text/plain": "3"},
                         "metadata": {"scrapbook": {"name": "n", "mime_prefix": ""}}}}
    assert _show_glued(shown)["content"]["data"] == {"text/plain": "3"}


@pytest.mark.parametrize("raw, seen", [
    ("0.039517593017469696", "0.0395176"),      # float repr cut to 6 significant digits
    ("np.float64(1.3899803805851096)", "1.38998"),  # numpy 2 scalar repr unwrapped
    ("np.int64(12345678901)", "12345678901"),   # integers stay exact
    ("1e-09", "1e-09"),
    ("'rate-0600'", "'rate-0600'"),             # text is left as it is
])
def test_glued_value_reads_like_a_number(raw, seen):
    from sipperf.widgets import _GLUE_PREFIX, _show_glued

    msg = {"msg_type": "display_data",
           "content": {"data": {_GLUE_PREFIX + "text/plain": raw},
                       "metadata": {"scrapbook": {"name": "v", "mime_prefix": _GLUE_PREFIX}}}}
    assert _show_glued(msg)["content"]["data"]["text/plain"] == f"v = {seen}"


# --- the book build's executor -----------------------------------------------------------------

def _executor(budget_s: float):
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        import sipperf_execute
    finally:
        sys.path.pop(0)
    from jupyter_cache.executors.utils import single_nb_execution

    return sipperf_execute, sipperf_execute._budgeted(single_nb_execution, budget_s)


def _nb(*sources: str):
    from nbformat.v4 import new_code_cell, new_notebook

    nb = new_notebook(cells=[new_code_cell(s) for s in sources])
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def test_build_kernel_creates_no_widget(monkeypatch, tmp_path):
    se, run = _executor(120)
    # what install() does for the build: the chapters' kernels inherit the flag
    monkeypatch.setenv(se.STATIC_ENV, "1")
    nb = _nb("import os, numpy as np\nfrom sipperf.widgets import live_slider\nx = np.linspace(0, 1, 5)",
             "os.environ.get('SIPPERF_STATIC')",
             "live_slider(x, [1.0, 2.0], lambda a: {'y': a * x}, slider_label='a', x_title='x', y_title='y')",
             "from sipperf.viz import show, slider_figure\n"
             "show(slider_figure(x, [1.0, 2.0], lambda a: {'y': a * x}, slider_label='a', x_title='x', y_title='y'))")
    result = run(nb, str(tmp_path), 60, False)
    assert result.err is None, result.exc_string
    assert nb.cells[1].outputs[0]["data"]["text/plain"] == "'1'"
    assert nb.cells[2].outputs == []  # no widget, no comm, nothing to wait for
    assert "widgets" not in nb.metadata  # nbclient saves widget state only if a widget existed
    # the static book keeps the HTML; the Plotly JSON (for live frontends) is dropped
    data = nb.cells[3].outputs[0]["data"]
    assert "text/html" in data and PLOTLY_MIME not in data


def test_headless_run_without_flags_creates_no_widget(monkeypatch, tmp_path):
    """papermill / nbconvert / nbclient send no cellId and open no widget comm: no widget."""
    from nbclient import NotebookClient

    _no_flags(monkeypatch)
    nb = _nb("import numpy as np\nfrom sipperf.widgets import live_slider, frontend_present\n"
             "x = np.linspace(0, 1, 5)\nfrontend_present()",
             "live_slider(x, [1.0, 2.0], lambda a: {'y': a * x}, slider_label='a', x_title='x', y_title='y')")
    NotebookClient(nb, timeout=120, resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert nb.cells[0].outputs[0]["data"]["text/plain"] == "False"
    out = nb.cells[1].outputs[0]["data"]
    assert "no widget frontend detected" in out["text/plain"]
    assert "application/vnd.jupyter.widget-view+json" not in out


def test_chapter_over_budget_fails_naming_the_cell(tmp_path):
    from nbclient.exceptions import CellTimeoutError

    _, run = _executor(8)
    nb = _nb("import time", "time.sleep(60)  # the stalled cell")
    result = run(nb, str(tmp_path), 600, False)  # the per-cell limit alone would wait 600 s
    assert isinstance(result.err, CellTimeoutError)
    assert result.time < 60
    assert "time.sleep(60)  # the stalled cell" in result.exc_string
    assert "chapter time budget of 8 s" in result.exc_string


def test_config_timeouts():
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    per_cell = cfg["execute"]["timeout"]
    budget = cfg["sphinx"]["config"]["sipperf_chapter_timeout"]
    assert 0 < per_cell <= budget <= 900, "a stall must fail well before the old 900 s per cell"
    assert "sipperf_book" in cfg["sphinx"]["local_extensions"]


# --- every page runs as a notebook -------------------------------------------------------------

def _pages():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [c["file"] for p in toc["parts"] for c in p["chapters"]]
    return [ROOT / f"{f}.md" for f in files]


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.name)
def test_page_has_kernelspec(page):
    import jupytext

    nb = jupytext.read(page)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3", \
        f"{page.name} has no kernelspec: it would not run as a notebook (papermill, JupyterLab)"


def test_pages_without_code_run_under_papermill(tmp_path):
    import jupytext

    pm = Path(sys.executable).with_name("papermill")
    if not pm.exists():
        pytest.skip("papermill not installed")
    pages = [p for p in _pages() if not any(c.cell_type == "code" for c in jupytext.read(p).cells)]
    assert pages, "expected some pages without code (intro, glossary, bibliography)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIPPERF_")}
    for page in pages:
        nb = tmp_path / f"{page.stem}.ipynb"
        jupytext.write(jupytext.read(page), nb)
        r = subprocess.run([str(pm), str(nb), str(tmp_path / f"{page.stem}.out.ipynb"), "--cwd",
                            str(page.parent)], capture_output=True, text=True, timeout=180, env=env)
        assert r.returncode == 0, f"{page.name}: {r.stderr[-1500:]}"
