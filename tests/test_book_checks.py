"""The book's build-time checks on what a reader sees (book/_ext/sipperf_checks.py).

Each check is fed small documents it must reject and legitimate text it must pass; a tiny
Sphinx build shows the warnings reach Sphinx (so the ``-W`` build fails); the lints run over
the book's own sources; and, when ``SIPPERF_BOOK_HTML`` points at a built book, every page of it
is scanned for rendered missing values.
"""
from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from docutils import nodes
from docutils.core import publish_doctree

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))

import sipperf_checks as C  # noqa: E402

BAD_PROSE = [
    "At three times the knee the model nan % of its capacity.",
    "the model NaN % of its capacity",
    "a wait of inf µs",
    "a wait of -inf µs",
    "its throughput was None calls/s",
    "the share is <NA> here",
    "started at NaT",
    "Until None.",
]
GOOD_PROSE = [
    "None of them changes the sequence of instants.",
    "Prerequisites. None beyond the introduction.",
    "(None of the runs dropped a packet.)",
    "information, infinite, infrastructure, nanoseconds, Nancy, inference, Info",
    "W = ∞ where ρ ≥ 1, shown as — where the thesis prints N/A.",
    "a financial model, a nano-second, the NaNo conference",
]


@pytest.mark.parametrize("text", BAD_PROSE)
def test_prose_with_a_missing_value_fails(text):
    assert C.find_problems(text), text


@pytest.mark.parametrize("text", GOOD_PROSE)
def test_legitimate_prose_passes(text):
    assert C.find_problems(text) == [], text


def test_markdown_shown_literally_fails():
    for text in ["`ratelimit`, admitting 2,500 INVITEs/s", "it counts requests *per source address*",
                 "a **strong** claim", "see {ref}`ch11-ex1`", "{glue:text}`x`"]:
        assert C.find_markup(text), text
    for text in ["2 * 3 * 4 = 24", "x ** 2 + y ** 2", "a footnote* mark", "λ = 6 × call rate"]:
        assert C.find_markup(text) == [], text


def test_none_in_a_table_cell_is_never_english():
    assert C.find_problems("None", cell=True)
    assert C.find_problems("None of them", cell=True)
    assert C.find_problems("—", cell=True) == []


HTML_BAD = [
    "<p>the model nan % of its capacity</p>",
    "<table><tr><td>1.0</td><td>nan</td></tr></table>",
    "<table><tr><td>inf</td></tr></table>",
    "<table><tr><th>x</th></tr><tr><td>None</td></tr></table>",
    "<table><tr><td>&lt;NA&gt;</td></tr></table>",
    "<div class='output text_html'><table><tr><td><div>NaN</div></td></tr></table></div>",
    "<p>value <span class='pasted-text'>inf</span> µs</p>",
]
HTML_GOOD = [
    "<p>None of the calls failed.</p><pre>x = float('nan')</pre>",
    "<p>The code <code>None</code> and <code>np.inf</code> mean nothing here.</p>",
    "<div class='cell_input'><p>nan inf None</p></div>",
    "<script>var a = NaN; var b = None;</script><style>.inf{}</style>",
    "<p>The bound <span class='math notranslate'>\\(\\inf_x f\\)</span> holds.</p>",
    "<table><tr><td>∞</td><td>—</td><td>12.5</td></tr></table>",
    "<div class='output text_plain'><p>nan</p></div>",
]


@pytest.mark.parametrize("html", HTML_BAD)
def test_html_with_a_missing_value_fails(html):
    assert C.check_html(html), html


@pytest.mark.parametrize("html", HTML_GOOD)
def test_legitimate_html_passes(html):
    assert C.check_html(html) == [], html


def _doctree(rst: str) -> nodes.document:
    return publish_doctree(rst, settings_overrides={"report_level": 5})


def test_doctree_prose_and_cells():
    doc = _doctree("""
The model nan % of its capacity.

The literal ``None`` and :math:`\\inf` are code and mathematics.

::

    print(float('nan'), None, np.inf)

+-------+------+
| load  | W    |
+=======+======+
| 1.0   | inf  |
+-------+------+
| 2.0   | 3.5  |
+-------+------+

None of the rows is empty.
""")
    found = [p for _, p in C.check_doctree(doc)]
    assert any("nan %" in p for p in found)
    assert any(p.startswith("table cell") and "inf" in p for p in found)
    assert len(found) == 2, found


def test_doctree_raw_html_output_and_cell_input_containers():
    doc = _doctree("Text.\n")
    out = nodes.container(classes=["cell_output"])
    out += nodes.raw("", "<table><tr><td>NaN</td></tr></table>", format="html")
    inp = nodes.container(classes=["cell_input"])
    inp += nodes.paragraph("", "x = None if nan else inf")
    doc += [inp, out]
    found = [p for _, p in C.check_doctree(doc)]
    assert found == ["table cell: NaN"]


def test_glue_text_numbers():
    assert C.check_glue_text("ch11_rel", ".0f", "nan")
    assert C.check_glue_text("k", ",.1f", "inf")
    assert C.check_glue_text("k", "d", "None")
    assert C.check_glue_text("k", "s", "None")          # a missing value, whatever the format
    assert C.check_glue_text("k", ".1f", "12.5") is None
    assert C.check_glue_text("k", ",.0f", "1,234") is None
    assert C.check_glue_text("k", ".1%", "12.0%") is None
    assert C.check_glue_text("k", "+.0f", "-3") is None
    assert C.check_glue_text("k", "s", "milder") is None


def test_lint_code_float_lookups():
    bad = ["g.loc[5.0]", "g.at[2.0, 'x']", "d[d['f'] == 0.9]", "x != -1.5",
           "np.isclose(ov['load_factor'], round(f, 2))"]
    for code in bad:
        assert C.lint_code(code), code
    good = ["g.loc[5]", "g.loc['a']", "d[d['n'] == 3]", "np.isclose(ov['f'], f)", "x < 0.9",
            "g.loc[np.isclose(g.index, 5.0)]", "%timeit f()"]
    for code in good:
        assert C.lint_code(code) == [], code


def test_lint_code_cells_line_numbers():
    src = ("# T\n\ntext\n\n```{code-cell} ipython3\n:tags: [remove-cell]\n\na = 1\nb = g.loc[2.0]\n```\n\n"
           "```{code-cell} ipython3\n---\ntags: [hide-input]\n---\nc = d[d.x == 1.0]\n```\n")
    assert [ln for ln, _ in C.lint_code_cells(src)] == [9, 16]


def test_lint_exercises():
    good = f"{C.GRADING}: ★ …\n\n```{{exercise}} Headroom ★\n:label: a\n```\n```{{exercise}} Two clocks ★★★\n```\n"
    assert C.lint_exercises(good) == []
    no_grade = "```{exercise}\n:label: a\n\n★ Do it.\n```\n"
    stars_first = f"{C.GRADING}\n```{{exercise}} ★ Headroom\n```\n"
    assert any("title" in m for _, m in C.lint_exercises(no_grade))
    assert any("grading" in m for _, m in C.lint_exercises(no_grade))
    assert [m for _, m in C.lint_exercises(stars_first)] and "title" in C.lint_exercises(stars_first)[0][1]


def test_unnumbered_pages_number_their_own_exercises():
    import sipperf_book

    env = SimpleNamespace(
        toc_secnumbers={"book/ch09": {"": (9,)}},
        toc_fignumbers={"book/ch09": {"exercise": {"a": (9, 1), "b": (9, 2)}},
                        "book/your_proxy": {"exercise": {"y1": (1,), "y2": (2,), "y3": (3,)}},
                        "book/appendix_audit": {"exercise": {"x2": (5,), "x1": (4,), "x3": (6,)}}})
    changed = sipperf_book._renumber_unnumbered(None, env)
    assert changed == ["book/appendix_audit"]
    assert env.toc_fignumbers["book/appendix_audit"]["exercise"] == {"x1": (1,), "x2": (2,), "x3": (3,)}
    assert env.toc_fignumbers["book/ch09"]["exercise"] == {"a": (9, 1), "b": (9, 2)}


def _glue_output(name: str, text: str) -> dict:
    prefix = "application/papermill.record/"
    return {"output_type": "display_data", "data": {prefix + "text/plain": text},
            "metadata": {"scrapbook": {"name": name, "mime_prefix": prefix}}}


def test_sphinx_build_reports_each_class(tmp_path):
    """A real (tiny) Sphinx build with myst-nb and the book's extension: a non-finite glued
    number, a rendered ``nan`` and ``inf`` table cell, a float lookup and an ungraded exercise
    each give a warning; a clean page gives none."""
    from sphinx.application import Sphinx

    src = tmp_path / "src"
    src.mkdir()
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "cells": [
              {"cell_type": "code", "id": "c1", "metadata": {}, "execution_count": 1,
               "source": "x = g.loc[3.0]",
               "outputs": [_glue_output("bad", "nan"), _glue_output("good", "41.5"),
                           _glue_output("story", "'`ratelimit` completed *less*'"),
                           {"output_type": "display_data", "metadata": {},
                            "data": {"text/html": "<table><tr><td>inf</td></tr></table>",
                                     "text/plain": "table"}}]},
              {"cell_type": "markdown", "id": "m1", "metadata": {},
               "source": "# Page\n\nThe model {glue:text}`bad:.0f` % and {glue:text}`good:.1f` calls/s.\n\n"
                         "{glue:text}`story`"}]}
    (src / "page.ipynb").write_text(json.dumps(nb))
    (src / "lint.md").write_text(
        "---\njupytext:\n  text_representation:\n    extension: .md\n    format_name: myst\n"
        "kernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n---\n\n"
        "# Lint\n\n```{code-cell} ipython3\ny = d.loc[2.0]\n```\n\n"
        "```{exercise}\n:label: lint-ex\n\nDo it.\n```\n")
    (src / "clean.md").write_text("# Clean\n\nNone of this is missing: 41.5 calls/s, ∞ where ρ ≥ 1.\n")
    (src / "index.md").write_text("# Book\n\n```{toctree}\npage\nlint\nclean\n```\n")
    (src / "conf.py").write_text('extensions = ["myst_nb", "sphinx_exercise", "sipperf_book"]\nnb_execution_mode = "off"\n'
                                 "sipperf_chapter_timeout = 0\n")
    warnings = io.StringIO()
    app = Sphinx(str(src), str(src), str(tmp_path / "out"), str(tmp_path / "doctrees"), "html",
                 status=io.StringIO(), warning=warnings, freshenv=True)
    app.build()
    log = warnings.getvalue()
    assert "glued value 'bad' renders as 'nan'" in log
    assert "nan %" in log and "table cell: inf" in log
    assert "unparsed markup: `ratelimit` completed *less*" in log
    assert "lint.md:15" in log and ".loc[<float>]" in log
    assert "exercise title ''" in log and "states the grading" in log
    assert "clean" not in log and "'good'" not in log
    os.environ.pop("SIPPERF_STATIC", None)   # set by the extension for the build's kernels


# ----------------------------------------------------------------------------- the book itself

def _toc_pages() -> list[Path]:
    """The pages the book builds (``_toc.yml``; the build reads only those)."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [c["file"] for part in toc.get("parts", []) for c in part.get("chapters", [])]
    return [ROOT / f"{f}.md" for f in files]


BOOK = _toc_pages()


@pytest.mark.parametrize("path", BOOK, ids=lambda p: p.name)
def test_book_code_cells_do_not_look_rows_up_by_float(path):
    assert C.lint_code_cells(path.read_text()) == []


@pytest.mark.parametrize("path", BOOK, ids=lambda p: p.name)
def test_book_exercises_are_graded_alike(path):
    assert C.lint_exercises(path.read_text()) == []


COURSE = sorted(C.course_docs((ROOT / "_toc.yml").read_text()))
F3 = "`" * 3


def test_course_docs_are_the_numbered_parts():
    toc = ("parts:\n  - caption: Measure\n    chapters:\n      - file: book/a\n"
           "  - caption: Practice\n    chapters:\n      - file: book/p\n"
           "  - caption: Appendices\n    chapters:\n      - file: book/x\n")
    assert C.course_docs(toc) == {"book/a"}
    assert "book/ch05_one_thread" in COURSE and "book/your_proxy" not in COURSE and "book/appendix_lab" not in COURSE


def test_generated_markdown_and_if_else_glue_are_found():
    src = ("Text {glue:md}`story`.\n\n" + F3 + "{code-cell} ipython3\n:tags: [remove-cell]\n\n"
           "glue('a', Markdown(s), display=False)\n"
           "glue('b', 'rises' if x > y else 'falls', display=False)\n"
           "glue('c', f\"{n} {'call' if n == 1 else 'calls'}\", display=False)\n"
           "glue('d', float(x), display=False)\n" + F3 + "\n")
    found = C.lint_course_source(src)
    assert sorted(ln for ln, _ in found) == [1, 6, 7, 8], found


def test_written_prose_with_glued_numbers_passes():
    src = ("The knee is {glue:text}`k:,.0f` calls/s.\n\n" + F3 + "{code-cell} ipython3\n"
           "assert k > 0\nglue('k', float(k), display=False)\n" + F3 + "\n")
    assert C.lint_course_source(src) == []


def test_provenance_in_the_main_text_is_found_but_not_in_captions_or_outputs():
    doc = _doctree("""
The protocol recording (``datasets/lab/protocol``) ran run ``workers-c1-r00100``.

Made by ``python -m sipperf.sim.sweep``.

The lab appendix describes the recordings.
""")
    out = nodes.container(classes=["cell_output"])
    out += nodes.paragraph("", "datasets/precomputed/sim_sweep.csv")
    fig = nodes.figure()
    fig += nodes.caption("", "from datasets/lab/protocol/runs.csv")
    doc += [out, fig]
    found = [p for _, p in C.check_provenance(doc)]
    assert len(found) == 3, found
    assert any("datasets/lab" in p for p in found) and any("r00100" in p for p in found)
    assert any("python -m" in p for p in found)


@pytest.mark.parametrize("name", COURSE)
def test_course_chapters_hold_no_generated_text(name):
    assert C.lint_course_source((ROOT / f"{name}.md").read_text()) == []


HTML = os.environ.get("SIPPERF_BOOK_HTML")


@pytest.mark.skipif(not HTML, reason="set SIPPERF_BOOK_HTML to a built book's _build/html")
def test_built_book_renders_no_missing_value():
    pages = sorted(Path(HTML).glob("book/*.html"))
    assert pages
    problems = {p.name: C.check_html(p.read_text()) for p in pages}
    assert {k: v for k, v in problems.items() if v} == {}


def test_chapter_tables_print_infinity_as_a_symbol():
    """``sipperf.viz.table`` prints ±inf as ∞/−∞ and NaN as —, so its tables pass the check; a
    raw format string would have printed "inf"."""
    import numpy as np
    import pandas as pd

    from sipperf.viz import table

    df = pd.DataFrame({"K": [10.0, np.inf], "W (µs)": [3.25, np.nan], "d": [-np.inf, 1.0]})
    html = table(df, caption="c", formats={"K": "{:.0f}", "W (µs)": "{:.2f}"}).styler.to_html()
    assert "∞" in html and "−∞" in html and "—" in html
    assert C.check_html(html) == []
    assert C.check_html(df.to_html())      # pandas' own rendering would fail the build
