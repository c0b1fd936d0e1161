"""The built book, opened in a real headless Chromium (Debian's) driven by Playwright.

Visits every page listed in the table of contents and checks that it rendered: no error
output, images loaded, math typeset by the bundled MathJax, Plotly figures drawn, and that
dragging each page's first slider really changes the visible trace.  Screenshots are saved
under _build/screenshots/.

At a desktop width (1400 px) and a phone width (390 px) every page is also checked for horizontal
overflow (no output, table, equation, figure or diagram wider than the text column, nothing hidden
behind a horizontal scroll bar; the failure names each element and its width) and every Plotly
figure for a readable layout (legend, axis titles and slider clear of each other and of the plot).
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


# --------------------------------------------------------------------------------------------
# Horizontal overflow: at a desktop width (1400 px) and a phone width (390 px) nothing a reader
# needs (cell output, table, display or inline equation, figure, image, literal block such as a
# diagram) may be wider than the text column or hide part of itself behind a horizontal scroll
# bar.  Code *input* cells are exempt (code scrolls in its own box by convention).  Folded
# solutions and hidden inputs are unfolded first so that their outputs are measured too.
# --------------------------------------------------------------------------------------------

WIDTHS = {"desktop": 1400, "phone": 390}

_UNFOLD_JS = """() => {
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
  document.querySelectorAll('article details').forEach(d => { d.open = true; });
  window.dispatchEvent(new Event('resize'));
}"""

#: returns {column: [left, right], page_scroll: px, offenders: [{kind, where, what, width, column}]}
OVERFLOW_JS = r"""() => {
  const art = document.querySelector('article.bd-article');
  const ar = art.getBoundingClientRect(), acs = getComputedStyle(art);
  const L = ar.left + parseFloat(acs.paddingLeft), R = ar.right - parseFloat(acs.paddingRight);
  const TOL = 4;  // px: sub-pixel rounding and glyph overhang are not overflow
  const sel = ['.cell_output', '.cell_output *', 'table', 'mjx-container', 'mjx-container > svg',
               '.js-plotly-plot', '.js-plotly-plot .main-svg', 'img', 'figure', 'div.highlight',
               'pre', 'div.math', '.sd-card', 'div.admonition', 'div.graphviz'].join(',');
  const cands = Array.from(art.querySelectorAll(sel)).filter(e => !e.closest('.cell_input') &&
    !(e.closest('.js-plotly-plot') && !e.matches('.js-plotly-plot, .main-svg')));
  const kind = (e) => {
    if (e.closest('mjx-container')) return e.closest('mjx-container').getAttribute('display') === 'true'
                                            ? 'display equation' : 'inline equation';
    if (e.closest('.js-plotly-plot')) return 'plotly figure';
    if (e.closest('table')) return 'table';
    if (e.tagName === 'IMG' || e.querySelector && e.querySelector(':scope > img')) return 'image';
    if (e.closest('.cell_output')) return 'cell output';
    if (e.closest('div.highlight, pre')) return 'literal block';
    return e.tagName.toLowerCase();
  };
  const where = (e) => {
    const ex = e.closest('.solution, .exercise');
    const t = ex && ex.querySelector('.admonition-title');
    const pre = t ? t.textContent.replace(/\s+/g, ' ').trim().slice(0, 60) + ', ' : '';
    let s = e.closest('section'), h = null;
    while (s && !(h = s.querySelector(':scope > h1, :scope > h2, :scope > h3')))
      s = s.parentElement && s.parentElement.closest('section');
    return pre + 'section "' + (h ? h.textContent.replace(/[#¶]/g, '').trim() : '?') + '"';
  };
  const what = (e) => {
    const mj = e.closest('mjx-container');
    if (mj && window.MathJax && MathJax.startup && MathJax.startup.document) {
      try { const it = MathJax.startup.document.getMathItemsWithin(mj);
            if (it.length) return 'TeX: ' + it[0].math.replace(/\s+/g, ' ').slice(0, 90); } catch (err) {}
    }
    const fig = e.closest('figure');
    const cap = fig && fig.querySelector('figcaption');
    if (cap) return 'figure "' + cap.textContent.replace(/\s+/g, ' ').trim().slice(0, 70) + '"';
    const tab = e.closest('table') || (e.querySelector && e.querySelector('table'));
    if (tab) {
      const tc = tab.querySelector('caption');
      const hd = Array.from(tab.querySelectorAll('thead th')).map(t => t.textContent.trim()).filter(Boolean);
      return 'table ' + (tc ? '"' + tc.textContent.trim().slice(0, 60) + '" ' : '') +
             'columns [' + hd.slice(0, 8).join(' | ').slice(0, 90) + (hd.length > 8 ? ' …' : '') + ']';
    }
    return 'text "' + (e.innerText || e.textContent || '').replace(/\s+/g, ' ').trim().slice(0, 80) + '"';
  };
  const bad = new Map();
  for (const e of cands) {
    const r = e.getBoundingClientRect();
    if (r.width < 1 || r.height < 1) continue;
    const cs = getComputedStyle(e);
    if (cs.visibility === 'hidden' || cs.display === 'none') continue;
    let width = r.width, why = null;
    if (r.right > R + TOL || r.left < L - TOL)
      why = `sticks out of the column by ${Math.round(Math.max(r.right - R, L - r.left))} px`;
    const ox = cs.overflowX;
    if ((ox === 'auto' || ox === 'scroll' || ox === 'hidden') && e.scrollWidth > e.clientWidth + TOL) {
      why = why || `content ${e.scrollWidth} px wide in a ${e.clientWidth} px box, the rest behind a horizontal scroll`;
      width = Math.max(width, e.scrollWidth);
    }
    if (why) bad.set(e, {kind: kind(e), where: where(e), what: what(e), why: why,
                         width: Math.round(width), column: Math.round(R - L)});
  }
  // report the outermost offending element only
  const offenders = [];
  for (const [e, info] of bad) {
    let p = e.parentElement, inner = false;
    while (p && p !== art) { if (bad.has(p)) { inner = true; break; } p = p.parentElement; }
    if (!inner) offenders.push(info);
  }
  const se = document.scrollingElement;
  return {column: [Math.round(L), Math.round(R)], offenders: offenders,
          page_scroll: Math.max(0, se.scrollWidth - window.innerWidth)};
}"""


def measure_overflow(browser, url: str, width: int) -> dict:
    """Open ``url`` at ``width`` px, unfold everything, and return OVERFLOW_JS's findings."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    try:
        page.goto(url, wait_until="load")
        page.evaluate("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
        page.evaluate(_UNFOLD_JS)
        page.wait_for_timeout(400)  # let Plotly's responsive resize and the reflow settle
        return page.evaluate(OVERFLOW_JS)
    finally:
        page.close()


def format_overflow(page_name: str, width: int, res: dict) -> str:
    lines = [f"{page_name} at {width} px (text column {res['column'][1] - res['column'][0]} px):"]
    if res["page_scroll"] > 1:
        lines.append(f"  - the whole page scrolls sideways by {res['page_scroll']} px")
    for o in res["offenders"]:
        lines.append(f"  - {o['kind']} in {o['where']}: {o['what']} — {o['width']} px vs "
                     f"column {o['column']} px ({o['why']})")
    return "\n".join(lines)


@pytest.mark.parametrize("width_name", list(WIDTHS))
@pytest.mark.parametrize("page_name", toc_pages(Path(__file__).resolve().parents[1]))
def test_no_horizontal_overflow(browser, book_url, page_name, width_name):
    width = WIDTHS[width_name]
    res = measure_overflow(browser, f"{book_url}/{page_name}.html", width)
    assert not res["offenders"] and res["page_scroll"] <= 1, format_overflow(page_name, width, res)


#: for every Plotly figure: bounding boxes of its plot areas, axis titles, legend and sliders
PLOTLY_LAYOUT_JS = r"""() => Array.from(document.querySelectorAll('article .js-plotly-plot')).map((gd, i) => {
  const boxes = (sel, what) => Array.from(gd.querySelectorAll(sel)).map(e => {
    const r = e.getBoundingClientRect();
    return {what: what, l: r.left, t: r.top, r: r.right, b: r.bottom, w: r.width, h: r.height};
  }).filter(b => b.w > 0 && b.h > 0);
  const fig = gd.closest('figure'), cap = fig && fig.querySelector('figcaption');
  return {index: i, caption: cap ? cap.textContent.replace(/\s+/g, ' ').trim().slice(0, 60) : '',
          parts: [].concat(boxes('.nsewdrag', 'plot area'), boxes('.g-xtitle text, .g-x2title text', 'x-axis title'),
                           boxes('.g-ytitle text, .g-y2title text', 'y-axis title'), boxes('.legend .bg', 'legend'),
                           boxes('.slider-container', 'slider')),
          figure: (() => { const r = gd.getBoundingClientRect(); return {l: r.left, r: r.right}; })()};
})"""


def plotly_layout_problems(figs: list[dict], tol: float = 2.0, min_plot_share: float = 0.6) -> list[str]:
    """Overlaps between a figure's plot areas, axis titles, legend and slider (any two of them),
    and plot areas squeezed to less than ``min_plot_share`` of the figure's width (e.g. by a
    legend beside the plot on a phone)."""
    out = []
    for f in figs:
        parts = f["parts"]
        name = f"Plotly figure {f['index'] + 1} \"{f['caption']}\""
        plots = [a for a in parts if a["what"] == "plot area"]
        fig_w = f["figure"]["r"] - f["figure"]["l"]
        if plots and fig_w > 0:
            span = max(a["r"] for a in plots) - min(a["l"] for a in plots)
            if span < min_plot_share * fig_w:
                out.append(f"{name}: plot area only {span:.0f} of {fig_w:.0f} px wide "
                           f"(legend or margins beside it?)")
        for i, a in enumerate(parts):
            for b in parts[i + 1:]:
                if a["what"] == b["what"] == "plot area":
                    continue  # subplots may share edges
                ox = min(a["r"], b["r"]) - max(a["l"], b["l"])
                oy = min(a["b"], b["b"]) - max(a["t"], b["t"])
                if ox > tol and oy > tol:
                    out.append(f"{name}: {a['what']} overlaps {b['what']} ({ox:.0f}×{oy:.0f} px)")
    return out


@pytest.mark.parametrize("width_name", list(WIDTHS))
@pytest.mark.parametrize("page_name", toc_pages(Path(__file__).resolve().parents[1]))
def test_plotly_layout_readable(browser, book_url, page_name, width_name):
    """Legend, axis titles and slider of every Plotly figure stay clear of each other and of the
    plot area, on a desktop and on a phone (slider_figure puts the slider above and the legend
    below the plot)."""
    width = WIDTHS[width_name]
    page = browser.new_page(viewport={"width": width, "height": 900})
    try:
        page.goto(f"{book_url}/{page_name}.html", wait_until="load")
        page.evaluate(_UNFOLD_JS)
        page.wait_for_timeout(400)
        figs = page.evaluate(PLOTLY_LAYOUT_JS)
    finally:
        page.close()
    if not figs:
        pytest.skip(f"{page_name} has no Plotly figure")
    problems = plotly_layout_problems(figs)
    assert not problems, f"{page_name} at {width} px:\n" + "\n".join(problems)
