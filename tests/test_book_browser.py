"""The built book, opened in a real headless Chromium (Debian's) driven by Playwright.

Visits every page listed in the table of contents and checks that it rendered: no error
output, images loaded, math typeset by the bundled MathJax, Plotly figures drawn, and that
dragging each page's first slider really changes the visible trace.  Screenshots are saved
under _build/screenshots/.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


def toc_pages(root: Path) -> list[str]:
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    pages = [toc["root"]]
    for part in toc.get("parts", []):
        for ch in part.get("chapters", []):
            pages.append(ch["file"])
            pages.extend(s["file"] for s in ch.get("sections", []))
    return [p.removesuffix(".md") for p in pages]


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed (make test installs it with apt-get as root)")
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="sipperf-chromium-")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield b
        b.close()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def shots(root: Path) -> Path:
    d = root / "_build" / "screenshots"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _open(browser, url: str):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url, wait_until="load")
    # MathJax typesets asynchronously: wait for its startup promise when the page has math
    page.evaluate("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
    return page, errors


def test_toc_lists_every_chapter(browser, book_url, root, shots):
    page, errors = _open(browser, f"{book_url}/book/intro.html")
    nav = page.locator("nav.bd-docs-nav a.reference.internal")
    hrefs = [a.get_attribute("href") for a in nav.all()]
    for p in toc_pages(root)[1:]:
        assert any(h and h.endswith(Path(p).name + ".html") for h in hrefs), f"{p} missing from TOC"
    page.screenshot(path=str(shots / "index.png"), full_page=False)
    assert not errors, errors
    page.close()


@pytest.mark.parametrize("page_name", toc_pages(Path(__file__).resolve().parents[1]))
def test_page_renders(browser, book_url, shots, page_name):
    page, errors = _open(browser, f"{book_url}/{page_name}.html")
    body = page.locator("article.bd-article")
    assert body.count() == 1
    # no error output from executed cells
    assert page.locator(".cell_output .output.traceback, .cell_output .output.error").count() == 0
    text = body.inner_text()
    assert "Traceback (most recent call last)" not in text
    # every image decoded
    broken = page.evaluate(
        "() => Array.from(document.querySelectorAll('article img')).filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)")
    assert not broken, f"broken images: {broken}"
    # math typeset (raw TeX delimiters would remain visible otherwise)
    n_math = page.locator("article .math, article span.math").count()
    if n_math:
        assert page.locator("article mjx-container svg").count() >= 1, "math not typeset"
    # Plotly figures drawn
    n_plots = page.locator(".js-plotly-plot").count()
    for i in range(n_plots):
        assert page.locator(".js-plotly-plot").nth(i).locator(".main-svg").count() >= 1
    page.screenshot(path=str(shots / (page_name.replace("/", "_") + ".png")), full_page=True)
    assert not errors, errors
    page.close()


def _visible_state(page, idx: int):
    return page.evaluate(
        """(i) => { const gd = document.querySelectorAll('.js-plotly-plot')[i];
                    const vis = gd.data.map(t => t.visible === true);
                    const paths = Array.from(gd.querySelectorAll('.scatterlayer .trace path.js-line'))
                                       .map(p => p.getAttribute('d')).join('|');
                    return {vis: vis, paths: paths}; }""", idx)


@pytest.mark.parametrize("page_name", toc_pages(Path(__file__).resolve().parents[1]))
def test_sliders_respond(browser, book_url, shots, page_name):
    page, errors = _open(browser, f"{book_url}/{page_name}.html")
    plots = page.locator(".js-plotly-plot")
    with_slider = [i for i in range(plots.count())
                   if plots.nth(i).locator(".slider-rail-touch-rect").count()]
    if not with_slider:
        # every chapter must offer at least one static slider; other pages may not
        assert not Path(page_name).name.startswith("ch"), f"chapter {page_name} has no slider figure"
        pytest.skip(f"{page_name} is not a chapter and has no slider figure")
    for i in with_slider:
        plot = plots.nth(i)
        plot.scroll_into_view_if_needed()
        before = _visible_state(page, i)
        rail = plot.locator(".slider-rail-touch-rect").first.bounding_box()
        grip = plot.locator(".slider-grip-rect").first.bounding_box()
        # click the far end of the rail, or the near end if the grip already sits at the far end
        x = rail["x"] + rail["width"] * (0.98 if grip["x"] < rail["x"] + rail["width"] / 2 else 0.02)
        page.mouse.click(x, rail["y"] + rail["height"] / 2)
        page.wait_for_timeout(300)
        after = _visible_state(page, i)
        assert after["vis"] != before["vis"], f"slider {i} on {page_name} did not switch traces"
        assert after["paths"] != before["paths"], f"slider {i} on {page_name} did not redraw"
    page.screenshot(path=str(shots / (page_name.replace("/", "_") + "-slider.png")), full_page=False)
    assert not errors, errors
    page.close()
