"""The book read live: a real JupyterLab from the venv, driven by Debian's Chromium (Playwright).

JupyterLab runs with the Binder viewer settings (binder/jupyter-config: MyST .md files open as
Jupytext notebooks), on 127.0.0.1, over a scratch copy of book/ (a notebook view may save back
to its .md file).  For a model chapter and the simulation chapter, opened as Binder's launch
button opens them (``/lab/tree/book/<chapter>.md``): Run All, then no cell error, no page
error, every Plotly figure drawn (its SVG present), the reading aids shown, and moving the
chapter's ipywidgets slider redraws the live figure.  JupyterLab is stopped by its pid.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
#: a model chapter and the simulation chapter
CHAPTERS = ["book/ch05_one_thread.md", "book/ch09_simulation.md"]
RUN_TIMEOUT_S = 300  # Run All of one chapter (they take 5-40 s when the machine is not busy)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed (make test installs it with apt-get as root)")
    tmp = tmp_path_factory.mktemp("jupyterlab")
    work = tmp / "work"
    shutil.copytree(ROOT / "book", work / "book", ignore=shutil.ignore_patterns("_static", "_ext"))
    for d in ("config", "data", "runtime", "settings", "workspaces"):
        (tmp / d).mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SIPPERF_", "JUPYTER", "JPY_"))}
    env.update({
        "JUPYTER_CONFIG_DIR": str(tmp / "config"),           # nothing from ~/.jupyter
        "JUPYTER_CONFIG_PATH": str(ROOT / "binder" / "jupyter-config"),  # the Binder settings
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"),
        "PYTHONUNBUFFERED": "1",
    })
    port, token = _free_port(), secrets.token_hex(16)
    cmd = [str(Path(sys.executable).with_name("jupyter-lab")), "--no-browser",
           "--ip=127.0.0.1", f"--port={port}", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={work}",
           "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    log = open(tmp / "jupyterlab.log", "w")
    proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"JupyterLab exited ({proc.returncode}): {(tmp / 'jupyterlab.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("JupyterLab did not answer within 90 s")
            time.sleep(0.5)
        yield {"base": base, "token": token, "pid": proc.pid, "log": tmp / "jupyterlab.log"}
    finally:
        proc.terminate()  # by its pid; JupyterLab shuts its kernels down on SIGTERM
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


@pytest.fixture(scope="module")
def browser(lab):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield b
        b.close()


_NOTEBOOK_STATE = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.content || !panel.sessionContext) return null;
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  const cells = panel.content.widgets.map(c => c.model.toJSON());
  const code = cells.filter(c => c.cell_type === 'code');
  const outs = code.flatMap(c => c.outputs || []);
  return {
    path: panel.context.path,
    kernel: kernel ? kernel.status : null,
    n_code: code.length,
    n_done: code.filter(c => c.execution_count !== null).length,
    errors: outs.filter(o => o.output_type === 'error').map(o => o.ename + ': ' + o.evalue),
    n_plotly: outs.filter(o => o.data && o.data['application/vnd.plotly.v1+json']).length,
    text: outs.map(o => (o.data && o.data['text/plain']) || o.text || '').join('\\n'),
  };
}"""


def _wait(page, what: str, cond, timeout_s: float, poll_ms: int = 500):
    deadline = time.monotonic() + timeout_s
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}")
        page.wait_for_timeout(poll_ms)


def _run_chapter(browser, lab, chapter: str):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    # the URL of the book's launch button (urlpath=lab/tree/<chapter>.md)
    page.goto(f"{lab['base']}/lab/tree/{chapter}?token={lab['token']}", wait_until="load")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=90_000)
    state = _wait(page, f"{chapter} to open as a notebook with an idle kernel",
                  lambda: (s := page.evaluate(_NOTEBOOK_STATE)) and s["path"] == chapter
                  and s["kernel"] == "idle" and s, 120)
    assert state["n_code"] > 0, f"{chapter} opened without code cells: not as a Jupytext notebook?"
    t0 = time.monotonic()
    # start Run All without awaiting its promise, so that the wait below is bounded
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")

    def finished():
        s = page.evaluate(_NOTEBOOK_STATE)
        if s["errors"]:
            return s  # Run All stops at an error: report it
        return s if s["n_done"] == s["n_code"] and s["kernel"] == "idle" else None

    state = _wait(page, f"Run All of {chapter}", finished, RUN_TIMEOUT_S)
    return page, errors, state, time.monotonic() - t0


def _plots_drawn(page) -> tuple[int, int]:
    """Scroll every Plotly output into view (the notebook renders lazily); return
    (outputs with a Plotly figure, those whose SVG is drawn)."""
    plots = page.locator(".jp-OutputArea-output.jp-RenderedPlotly")  # the Plotly extension's
    n = plots.count()
    drawn = 0
    for i in range(n):
        out = plots.nth(i)
        out.scroll_into_view_if_needed()
        try:
            out.locator(".main-svg").first.wait_for(state="attached", timeout=20_000)
            drawn += 1
        except Exception:
            pass
    return n, drawn


def _live_figure_paths(widget) -> str:
    return widget.evaluate(
        "w => Array.from(w.querySelectorAll('.js-plotly-plot .scatterlayer .trace path.js-line'))"
        ".map(p => p.getAttribute('d')).join('|')")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_runs_live(browser, lab, chapter):
    page, errors, state, seconds = _run_chapter(browser, lab, chapter)
    try:
        assert not state["errors"], f"{chapter}: cell errors {state['errors']}"
        assert state["n_done"] == state["n_code"]

        # every Plotly figure arrived as Plotly's own mime type, and each is drawn
        assert state["n_plotly"] >= 1, f"{chapter}: no Plotly figure in the outputs"
        n_dom, drawn = _plots_drawn(page)
        assert n_dom >= state["n_plotly"], f"{chapter}: {state['n_plotly']} figures, {n_dom} rendered"
        assert drawn == n_dom, f"{chapter}: {n_dom - drawn} of {n_dom} Plotly figures not drawn"

        # the reading aids: the note, and glued values shown as `name = value`
        src = (ROOT / chapter).read_text()
        if "reading_aids()" in src:
            assert page.get_by_text("Reading this chapter as a notebook").count() >= 1
            hidden = re.findall(r"glue\(\s*[\"'](\w+)[\"'][^\n]*display\s*=\s*False", src)
            if hidden:
                assert any(f"{name} = " in state["text"] for name in hidden), \
                    f"{chapter}: no glued value shown (expected one of {hidden[:5]})"

        # the live ipywidgets slider redraws its figure
        widget = page.locator(".jp-OutputArea-output .widget-vbox").filter(
            has=page.locator(".widget-slider")).first
        widget.scroll_into_view_if_needed()
        widget.locator(".js-plotly-plot .main-svg").first.wait_for(state="attached", timeout=30_000)
        assert widget.locator(".slider-rail-touch-rect").count() == 0, \
            "the live figure still has Plotly's own slider besides the ipywidgets one"
        before = _live_figure_paths(widget)
        handle = widget.locator(".noUi-handle").first
        track = widget.locator(".noUi-target").first
        hb, tb = handle.bounding_box(), track.bounding_box()
        page.mouse.move(hb["x"] + hb["width"] / 2, hb["y"] + hb["height"] / 2)
        page.mouse.down()
        page.mouse.move(tb["x"] + tb["width"] * 0.99, hb["y"] + hb["height"] / 2, steps=8)
        page.mouse.up()
        _wait(page, f"the live slider of {chapter} to redraw its figure",
              lambda: (after := _live_figure_paths(widget)) and after != before, 60)

        assert not errors, f"{chapter}: page errors {errors}"
        print(f"{chapter}: Run All {seconds:.0f} s, {n_dom} Plotly figures drawn, "
              f"load {open('/proc/loadavg').read().split()[:3]}")
    finally:
        page.close()


def test_binder_settings_open_markdown_as_notebook(root):
    """The settings file the test and `make lab` use is the one Binder's postBuild installs."""
    post = (root / "binder" / "postBuild").read_text()
    assert "binder/jupyter-config/labconfig/default_setting_overrides.json" in post
    cfg = json.loads((root / "binder" / "jupyter-config" / "labconfig"
                      / "default_setting_overrides.json").read_text())
    viewers = cfg["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]
    assert viewers["markdown"] == viewers["myst"] == "Jupytext Notebook"
    assert "binder/jupyter-config" in (root / "Makefile").read_text()
