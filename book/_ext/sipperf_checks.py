"""Build-time checks on what a reader of the book sees (used by :mod:`sipperf_book`).

A missing value rendered as text — ``nan``, ``inf``, ``None``, ``<NA>``, ``NaT`` — is always a
bug: a lookup that missed, a division by zero, a model outside its range. It reads as a number
("the model nan % of its capacity"), so a reader cannot tell it from data. These checks turn
each such rendering into a Sphinx warning; the book is built with ``-W``, so the build fails,
naming the page and line.

What is checked, and where (``docs/claims.md`` lists them for chapter authors):

1. **Prose** (:func:`check_doctree`, on ``doctree-resolved``, after glue values are pasted):
   every paragraph, title, caption, list item, definition and admonition, including the
   Markdown a cell displays, but not code (literal blocks, inline code, cell inputs, text/plain
   outputs) and not mathematics. A token ``nan``/``NaN``, ``inf``/``-inf``/``Inf``, ``<NA>``,
   ``NaT`` fails. ``None`` fails unless it is the English word: the first word of a sentence,
   followed by a lower-case word ("None of them …"). Markdown shown literally (`` `x` ``,
   ``*x*``, an unresolved ``{glue:…}``) fails too: a Markdown string glued with ``{glue:text}``
   instead of ``{glue:md}``.
2. **Table cells** (docutils tables, and the HTML tables of cell outputs, ``sipperf.viz.table``
   among them): any of the tokens above, ``None`` included, fails.
3. **Glued numbers** (:func:`check_glue_text`, wrapped around myst-nb's ``{glue:text}`` role):
   a value pasted with a numeric format (``:.1f``, ``:,.0f``, ``:d``, ``:%`` …) must be a finite
   number; the warning names the glue key.
4. **Code cells** (:func:`lint_code_cells`, on ``source-read``): a data row looked up by a
   float with ``==``/``!=`` or ``.loc[<float>]``, or ``np.isclose`` against a ``round(...)``,
   fails: compare with a tolerance (``np.isclose``) and assert that exactly one row matched, or
   look the row up by an integer/string key.
5. **Exercises** (:func:`lint_exercises`, on ``source-read``): every ``{exercise}`` has a title
   that ends in its grade (``★``, ``★★`` or ``★★★``), and a page with exercises states the
   grading (:data:`GRADING`) before the first one.

6. **Course text** (on the pages of the numbered parts, Measure, Model and Simulate, read from
   ``_toc.yml``): no Markdown produced by code (``{glue:md}``, ``Markdown(...)``:
   :func:`lint_course_source`), since a sentence assembled from data by ``if``/``else`` cannot be
   checked by a reader; and no provenance in the main text (:func:`check_provenance`): run
   identifiers, lab or precomputed dataset paths, ``python -m`` command lines. Code cells, their
   outputs, captions and folded solutions are excepted; provenance lives in the lab appendix,
   captions and the datasets' READMEs.

Everything here is plain Python on strings and docutils nodes, so ``tests/test_book_checks.py``
feeds it small documents directly.
"""
from __future__ import annotations

import ast
import math
import re
from html.parser import HTMLParser

from docutils import nodes

#: tokens that are never data a reader should see (case as pandas/numpy/Python print them)
_BAD = re.compile(r"(?<![\w<])(?:-?(?:nan|NaN|NAN|inf|Inf|INF)|NaT|<NA>|<NaT>)(?![\w>])")
_NONE = re.compile(r"(?<!\w)None(?!\w)")
#: Markdown or MyST syntax that reached the reader unparsed (a string glued with {glue:text})
_MARKUP = re.compile(r"`[^`\n]+`|(?<![\w*])\*{1,2}[^\s*][^*\n]*?(?<=\S)\*{1,2}(?![\w*])|\{(?:glue|ref|doc|numref|cite)[:}]")
#: the sentence that states the grading on every page with exercises
GRADING = "The stars grade the effort"
_GRADE = re.compile(r"\S.*\S\s★{1,3}$")

_SKIP_NODES = (nodes.literal_block, nodes.literal, nodes.math, nodes.math_block, nodes.comment,
               nodes.raw, nodes.system_message, nodes.doctest_block, nodes.target,
               nodes.substitution_definition)
_SKIP_CLASSES = {"cell_input", "text_plain", "stream", "highlight"}
_CODE = "\u27e8code\u27e9"  # stands in for inline code inside a sentence


def _none_is_english(text: str, start: int, end: int) -> bool:
    """``None`` at text[start:end] opens a sentence and a lower-case word follows it."""
    before = text[:start].rstrip()
    opens = (not before) or before[-1] in ".!?:;(\u2014\u2013\u201c\"'*"
    after = text[end:]
    return opens and re.match(r"\s+[a-z]", after) is not None


def find_problems(text: str, *, cell: bool = False) -> list[str]:
    """The non-finite renderings in one block of reader-facing text, each with its context.

    ``cell=True`` is for a table cell: there ``None`` is never the English word."""
    out = []
    for m in _BAD.finditer(text):
        out.append(_context(text, m.start(), m.end()))
    for m in _NONE.finditer(text):
        if cell or not _none_is_english(text, m.start(), m.end()):
            out.append(_context(text, m.start(), m.end()))
    return out


def find_markup(text: str) -> list[str]:
    """Markdown/MyST syntax shown literally in reader-facing text: `code`, *emphasis*,
    **strong**, an unresolved {glue}/{ref} role — what a Markdown string glued with
    ``{glue:text}`` (instead of ``{glue:md}``) looks like."""
    return ["unparsed markup: " + _context(text, m.start(), m.end()) for m in _MARKUP.finditer(text)]


def _context(text: str, start: int, end: int, width: int = 40) -> str:
    lo, hi = max(0, start - width), min(len(text), end + width)
    return ("…" if lo else "") + " ".join(text[lo:hi].split()) + ("…" if hi < len(text) else "")


# ----------------------------------------------------------------------------- HTML


class _HTMLText(HTMLParser):
    """Collects reader-facing text blocks of an HTML fragment: (text, is_table_cell)."""

    _VOID = {"br", "img", "input", "meta", "link", "hr", "col", "wbr", "source", "area", "base"}
    _SKIP_TAGS = {"script", "style", "pre", "code", "textarea", "svg", "math", "kbd", "samp"}
    _BLOCK = {"p", "li", "div", "caption", "h1", "h2", "h3", "h4", "h5", "h6", "dt", "dd",
              "figcaption", "blockquote", "tr", "table", "section", "ul", "ol", "dl", "summary"}
    _SKIP_CLASSES = {"cell_input", "highlight", "math", "MathJax", "text_plain", "stream",
                     "output_stderr", "plotly-graph-div", "sd-card-header"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.blocks: list[tuple[str, bool]] = []
        self._stack: list[tuple[str, bool]] = []   # (tag, skipping)
        self._buf: list[str] = []
        self._cell: list[str] | None = None

    def _skipping(self) -> bool:
        return bool(self._stack) and self._stack[-1][1]

    def _flush(self):
        text = "".join(self._buf)
        if text.strip():
            self.blocks.append((text, False))
        self._buf = []

    def handle_starttag(self, tag, attrs):
        if tag in self._VOID:
            return
        cls = set((dict(attrs).get("class") or "").split())
        skip = self._skipping() or tag in self._SKIP_TAGS or bool(cls & self._SKIP_CLASSES)
        if not self._skipping():
            if tag in ("td", "th"):
                self._flush()
                self._cell = []
            elif tag in self._BLOCK and self._cell is None:
                self._flush()
        self._stack.append((tag, skip))

    def handle_endtag(self, tag):
        if tag in self._VOID:
            return
        # pop to the matching tag (tolerates unclosed inner tags)
        for i in range(len(self._stack) - 1, -1, -1):
            if self._stack[i][0] == tag:
                del self._stack[i:]
                break
        else:
            return
        if self._skipping():
            return
        if tag in ("td", "th") and self._cell is not None:
            text = "".join(self._cell)
            if text.strip():
                self.blocks.append((text, True))
            self._cell = None
        elif tag in self._BLOCK and self._cell is None:
            self._flush()

    def handle_data(self, data):
        if self._skipping():
            return
        (self._cell if self._cell is not None else self._buf).append(data)

    def close(self):
        super().close()
        self._flush()


def check_html(html: str) -> list[str]:
    """Problems in an HTML fragment or page: prose blocks and table cells, code and maths left
    out (``<pre>``, ``<code>``, ``<script>``, cell inputs, text/plain outputs, MathJax)."""
    p = _HTMLText()
    p.feed(html)
    p.close()
    out = []
    for text, cell in p.blocks:
        out += [("table cell: " if cell else "") + s for s in find_problems(text, cell=cell) + find_markup(text)]
    return out


# ----------------------------------------------------------------------------- doctree


def _skipped(node: nodes.Node) -> bool:
    if isinstance(node, _SKIP_NODES):
        return True
    return isinstance(node, nodes.Element) and bool(set(node.get("classes", [])) & _SKIP_CLASSES)


def _prose(node: nodes.Node, parts: list[str]) -> None:
    """The text of ``node`` with code replaced by a placeholder and skipped nodes left out."""
    if isinstance(node, nodes.Text):
        parts.append(str(node))
        return
    if isinstance(node, (nodes.literal, nodes.math)):
        parts.append(_CODE)
        return
    if _skipped(node):
        return
    for child in node.children:
        _prose(child, parts)


def _in_skipped(node: nodes.Node) -> bool:
    p = node.parent
    while p is not None:
        if _skipped(p):
            return True
        p = p.parent
    return False


def _in_table_cell(node: nodes.Node) -> bool:
    p = node.parent
    while p is not None:
        if isinstance(p, nodes.entry):
            return True
        p = p.parent
    return False


def check_doctree(doctree: nodes.Node) -> list[tuple[nodes.Node, str]]:
    """(node, problem) for every non-finite rendering in a resolved doctree."""
    found: list[tuple[nodes.Node, str]] = []
    for el in doctree.findall(nodes.TextElement):
        if isinstance(el, (nodes.FixedTextElement, nodes.literal, nodes.math)) or _skipped(el):
            continue
        # only outermost text elements: a paragraph, not the inline nodes inside it
        if isinstance(el.parent, nodes.TextElement) or _in_skipped(el):
            continue
        parts: list[str] = []
        _prose(el, parts)
        cell = _in_table_cell(el)
        text = "".join(parts)
        for s in find_problems(text, cell=cell) + find_markup(text):
            found.append((el, ("table cell: " if cell else "") + s))
    for raw in doctree.findall(nodes.raw):
        if "html" in raw.get("format", "").split() and not _in_skipped(raw):
            found += [(raw, s) for s in check_html(raw.astext())]
    return found


# ----------------------------------------------------------------------------- glue

_NUMERIC_SPEC = set("bcdoxXeEfFgGn%")


def check_glue_text(key: str, fmt_spec: str, rendered: str) -> str | None:
    """A message if a value pasted by ``{glue:text}`key:fmt_spec``` is not a finite number where
    its format asks for one, or renders as a missing value whatever its format; else None."""
    numeric = bool(fmt_spec) and fmt_spec[-1] in _NUMERIC_SPEC
    if numeric:
        s = rendered.strip().replace(",", "").replace("_", "").rstrip("%").replace("\u2212", "-")
        try:
            ok = math.isfinite(float(s))
        except ValueError:
            ok = False
        if not ok:
            return (f"glued value {key!r} renders as {rendered!r} where the text expects a number "
                    f"(format {fmt_spec!r})")
    if find_problems(rendered, cell=True):
        return f"glued value {key!r} renders as {rendered!r}, a missing value"
    return None


# ----------------------------------------------------------------------------- source lint

_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```\s*$", re.S | re.M)
_EXERCISE = re.compile(r"^```\{exercise\}[ \t]*(.*)$", re.M)


def _float_const(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, float)


def _strip_cell_header(body: str) -> str:
    """Drop a code cell's ``:tags:`` lines or ``---`` front matter."""
    lines = body.split("\n")
    if lines and lines[0].strip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), 0)
        lines = lines[end + 1:]
    while lines and lines[0].startswith(":"):
        lines = lines[1:]
    return "\n".join(lines)


def lint_code(code: str) -> list[tuple[int, str]]:
    """(line in the cell, message) for float lookups in one code cell's Python source."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []  # IPython magics and the like: executed, not linted
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Compare) and any(isinstance(op, (ast.Eq, ast.NotEq)) for op in n.ops):
            if any(_float_const(x) for x in [n.left, *n.comparators]):
                out.append((n.lineno, "compares with a float by ==/!=: use np.isclose (and assert "
                                      "one row matched) or an integer/string key"))
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Attribute) \
                and n.value.attr in ("loc", "at"):
            keys = n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]
            if keys and _float_const(keys[0]):
                out.append((n.lineno, f".{n.value.attr}[<float>] looks a row up by a float: use "
                                      "np.isclose on the column, or an integer/string key"))
        if isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", "")) == "isclose":
            for a in n.args:
                if isinstance(a, ast.Call) and getattr(a.func, "id", "") == "round":
                    out.append((n.lineno, "np.isclose against round(...): the rounding, not the "
                                          "tolerance, decides the match; compare the unrounded "
                                          "value with a tolerance"))
    return out


def lint_code_cells(source: str) -> list[tuple[int, str]]:
    """(line in the file, message) for every float lookup in a MyST notebook's code cells."""
    out = []
    for m in _CELL.finditer(source):
        body = m.group(1)
        first = source.count("\n", 0, m.start(1)) + 1
        code = _strip_cell_header(body)
        offset = first + body.count("\n") - code.count("\n")
        out += [(offset + ln - 1, msg) for ln, msg in lint_code(code)]
    return out


def lint_exercises(source: str) -> list[tuple[int, str]]:
    """(line, message): exercises without a graded title, or a page without the grading."""
    out = []
    first = None
    for m in _EXERCISE.finditer(source):
        line = source.count("\n", 0, m.start()) + 1
        first = line if first is None else first
        title = m.group(1).strip()
        if not _GRADE.match(title):
            out.append((line, f"exercise title {title!r} should be 'Title ★', 'Title ★★' or "
                              "'Title ★★★' (the grade last)"))
    if first is not None:
        at = source.find(GRADING)
        if at < 0 or source.count("\n", 0, at) + 1 > first:
            out.append((first, f"a page with exercises states the grading before the first one "
                               f"({GRADING!r} …)"))
    return out


# ----------------------------------------------------------------------------- course text

#: what a course chapter's main text never names (provenance belongs in the lab appendix)
PROVENANCE = re.compile(r"\br\d{5}\b|-r\d{5}\b|datasets/lab\b|datasets/precomputed\b|python -m ")
_GENERATED_MD = re.compile(r"\{glue:md\}|\bMarkdown\(")
_PROV_SKIP_CLASSES = {"cell_input", "cell_output", "solution", "dropdown", "toggle-hidden"}


def course_docs(toc_text: str) -> set[str]:
    """Docnames of the numbered parts (Measure, Model, Simulate): every part of ``_toc.yml`` but
    the practice part and the appendices."""
    out, part = set(), None
    for line in toc_text.splitlines():
        m = re.search(r"caption:\s*(.+)", line)
        if m:
            part = m.group(1).strip().lower()
            continue
        m = re.search(r"file:\s*(\S+)", line)
        if m and part and not any(k in part for k in ("practice", "appendi")):
            out.add(m.group(1))
    return out


def lint_course_source(source: str) -> list[tuple[int, str]]:
    """(line, message) for text produced by code in a course chapter: Markdown (``{glue:md}``,
    ``Markdown(...)``), and a glued value chosen by ``if``/``else`` (a word or a sentence that
    changes with the data: write the sentence for the data there is, and assert it)."""
    out = []
    for m in _GENERATED_MD.finditer(source):
        line = source.count("\n", 0, m.start()) + 1
        out.append((line, f"{m.group(0)!r}: Markdown produced by code in a course chapter; write the "
                          "sentence, glue its numbers with {glue:text}, and assert its claim"))
    for m in _CELL.finditer(source):
        body = m.group(1)
        code = _strip_cell_header(body)
        offset = source.count("\n", 0, m.start(1)) + 1 + body.count("\n") - code.count("\n")
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue
        for n in ast.walk(tree):
            if (isinstance(n, ast.Call) and getattr(n.func, "id", "") == "glue" and len(n.args) >= 2
                    and any(isinstance(x, ast.IfExp) for x in ast.walk(n.args[1]))):
                out.append((offset + n.lineno - 1, "a glued value chosen by if/else: write the sentence for "
                                                   "the data there is, and assert the condition instead"))
    return out


def _prov_skipped(node: nodes.Node) -> bool:
    p = node
    while p is not None:
        if isinstance(p, (nodes.caption, nodes.literal_block, nodes.comment, nodes.raw)):
            return True
        if isinstance(p, nodes.Element) and (set(p.get("classes", [])) & _PROV_SKIP_CLASSES):
            return True
        if "solution" in type(p).__name__.lower():
            return True
        p = p.parent
    return False


def find_provenance(text: str) -> list[str]:
    """Each provenance token in ``text``, with its context."""
    return [f"{m.group(0).strip()!r} in: {_context(text, m.start(), m.end())}"
            for m in PROVENANCE.finditer(text)]


def check_provenance(doctree: nodes.Node) -> list[tuple[nodes.Node, str]]:
    """(node, problem) for provenance in a course chapter's main text (inline code included)."""
    found = []
    for el in doctree.findall(nodes.TextElement):
        if isinstance(el.parent, nodes.TextElement) or _prov_skipped(el):
            continue
        found += [(el, s) for s in find_provenance(el.astext())]
    return found
