"""The HTML report opened from disk (file://) in a real headless Chromium (Debian's), driven by
Playwright: it must render with no JavaScript error, load nothing from the network (plotly.js is
inlined), and draw every figure; the verdict is on the first screen."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    from sipperf.report import build_report

    out = tmp_path_factory.mktemp("report")
    runs = [ROOT / "datasets/lab/runs" / r for r in ("rate-0025", "rate-0300", "rate-0900", "rate-2000")]
    # a mixed set: a lab sweep (tracepoints) and a capture taken at an endpoint (no proxy)
    build_report([*runs, ROOT / "tests/fixtures/endpoint.pcapng"], out, n_boot=40, n_slowest=2)
    return out


#: the markers drawn outside their plot's area: [figure, trace, x, y] (Plotly's c2p: the pixel of
#: a data value, relative to the plotting area)
_POINTS_OFF_PLOT = """() => {
  const off = [];
  document.querySelectorAll('.js-plotly-plot').forEach((g, i) => {
    const fl = g._fullLayout;
    if (!fl || !fl.xaxis || !fl.yaxis) return;
    (g._fullData || []).forEach(tr => {
      if (!tr.x || !tr.y || !String(tr.mode || '').includes('markers') || tr.visible === false) return;
      const xa = fl.xaxis, ya = fl.yaxis;
      for (let k = 0; k < tr.x.length; k++) {
        const x = tr.x[k], y = tr.y[k];
        if (x === null || y === null || !isFinite(x) || !isFinite(y)) continue;
        const px = xa.c2p(x), py = ya.c2p(y);
        if (!(px >= 0 && px <= xa._length && py >= 0 && py <= ya._length)) off.push([i + 1, tr.name, x, y]);
      }
    });
  });
  return off;
}"""


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield b
        b.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_report_renders_offline(browser, report_dir, width):
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors, remote = [], []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("request", lambda r: remote.append(r.url) if not r.url.startswith(("file:", "data:", "blob:")) else None)
    page.goto((report_dir / "index.html").as_uri(), wait_until="load")
    page.wait_for_timeout(500)
    try:
        assert not errors, errors
        assert "could not be drawn" not in page.content()
        assert not remote, f"the report fetched from the network: {remote[:5]}"
        # the verdict is the first section, with its sentences
        h2 = page.locator("article h2").first.inner_text()
        assert h2.strip() == "Verdict"
        assert page.locator(".verdict li").count() >= 3
        # every Plotly figure is drawn (an SVG, with traces or annotations)
        plots = page.locator(".js-plotly-plot")
        n = plots.count()
        assert n >= 10, n
        for i in range(n):
            assert plots.nth(i).locator(".main-svg").count() >= 1, f"figure {i + 1} not drawn"
        # the load curves have their measured points and the model curve
        n_traces = page.evaluate("() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(g => g.data.length)")
        assert max(n_traces) >= 3
        # ladders: arrows drawn as annotations
        n_ann = page.evaluate("() => Array.from(document.querySelectorAll('.js-plotly-plot'))"
                              ".map(g => (g.layout.annotations || []).length)")
        assert max(n_ann) >= 10
        # the page fits the phone width (tables scroll inside their own box)
        overflow = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 1, f"page wider than the viewport by {overflow} px"
        # every figure fits the screen, and no measured point falls off its plot (each marker's
        # pixel position, by Plotly's own axis mapping, lies inside the plotting area)
        widths = page.evaluate("() => Array.from(document.querySelectorAll('.js-plotly-plot'))"
                               ".map(g => g.getBoundingClientRect().right)")
        assert max(widths) <= width, (width, max(widths))
        off = page.evaluate(_POINTS_OFF_PLOT)
        assert not off, off[:5]
        # the verdict's first screen shows the knee as the runs allow: an interval, not a point
        assert page.locator(".card").filter(has_text="1 %-drop knee").count() >= 1
        # the endpoint capture says it has no proxy
        assert "no proxy" in page.locator("article").inner_text()
    finally:
        page.screenshot(path=str(report_dir / f"shot-{width}.png"), full_page=False)
        page.close()
