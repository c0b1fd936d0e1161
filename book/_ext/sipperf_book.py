"""Small Sphinx fixes for the book.

sphinx-thebe registers its inline configuration script (``const THEBE_JS_URL = …``) once per
``env-before-read-docs`` event, and Jupyter Book 1 fires that event twice with slightly
different selectors, so every page declared the constant twice: a JavaScript error on every
page.  Before each page is written, keep only the first inline script that declares a given
``const``/``let`` name, and drop exact duplicates of any script entry.

It also installs :mod:`sipperf_execute` (chapter execution without stalls, a per-chapter time
budget ``sipperf_chapter_timeout``) before any chapter runs, and the checks of
:mod:`sipperf_checks` on what a reader sees (no ``nan``/``inf``/``None`` rendered as data, no
non-finite glued number, no row looked up by a float, exercises graded alike): each finding is a
warning, so the ``-W`` build fails.

Exercises of pages outside the numbered part (*Your own proxy*, the appendices) are numbered on
their own, from 1 on each page: Sphinx numbers everything without a section number with one
counter across the book, so the audit appendix's exercises came out as "Exercise 4–7".
"""
from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from sphinx.util import logging

LOGGER = logging.getLogger(__name__)

_DECL = re.compile(r"^\s*(?:const|let)\s+([A-Za-z_$][\w$]*)")


def _dedupe_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen: set = set()
    unique = []
    for js in scripts:
        attrs = getattr(js, "attributes", {}) or {}
        m = _DECL.match(attrs.get("body") or "")
        key = ("decl", m.group(1)) if m else (getattr(js, "filename", str(js)), repr(sorted(attrs.items())))
        if key in seen:
            continue
        seen.add(key)
        unique.append(js)
    scripts[:] = unique


def _renumber_unnumbered(app, env):
    """``env-get-updated`` (after Sphinx assigned figure numbers): on a page without a section
    number, number each kind of enumerable (exercise, figure, table) from 1, in page order."""
    changed = []
    for docname, kinds in env.toc_fignumbers.items():
        if env.toc_secnumbers.get(docname, {}).get(""):
            continue  # a numbered chapter: "Exercise 9.3" is right
        for numbers in kinds.values():
            if not numbers or any(len(n) != 1 for n in numbers.values()):
                continue
            order = sorted(numbers, key=lambda k: numbers[k])
            new = {fid: (i + 1,) for i, fid in enumerate(order)}
            if new != numbers:
                numbers.update(new)
                changed.append(docname)
    return sorted(set(changed))


def _report(location, message):
    LOGGER.warning(message, location=location, type="sipperf", subtype="reader")


def _course(app) -> set:
    """Docnames of the numbered parts (Measure, Model, Simulate), from the project's _toc.yml."""
    import sipperf_checks

    if not hasattr(app, "_sipperf_course"):
        toc = Path(app.srcdir) / "_toc.yml"
        app._sipperf_course = sipperf_checks.course_docs(toc.read_text()) if toc.is_file() else set()
    return app._sipperf_course


def _check_source(app, docname, source):
    """``source-read``: float lookups in code cells, exercise format; in a course chapter, no
    Markdown produced by code."""
    import sipperf_checks

    text = source[0]
    found = sipperf_checks.lint_code_cells(text) + sipperf_checks.lint_exercises(text)
    if docname in _course(app):
        found += sipperf_checks.lint_course_source(text)
    for line, msg in found:
        _report((docname, line), msg)


def _check_doctree(app, doctree, docname):
    """``doctree-resolved``: nothing non-finite rendered in prose or a table cell; in a course
    chapter, no provenance in the main text."""
    import sipperf_checks

    for node, problem in sipperf_checks.check_doctree(doctree):
        _report(node, f"renders a missing value as text: {problem}")
    if docname in _course(app):
        for node, problem in sipperf_checks.check_provenance(doctree):
            _report(node, f"provenance in a course chapter's main text (move it to the lab appendix, a "
                          f"caption or a dataset README): {problem}")


def _wrap_glue_text():
    """Make ``{glue:text}`` warn when a value pasted with a numeric format is not a finite
    number (the warning names the key)."""
    from myst_nb.ext.glue.roles import PasteTextRole

    import sipperf_checks

    run = getattr(PasteTextRole.run, "__wrapped__", PasteTextRole.run)

    def checked_run(self):
        out, msgs = run(self)
        key, _, spec = self.text.rpartition(":") if ":" in self.text else (self.text, "", "s")
        for node in out:
            problem = sipperf_checks.check_glue_text(key, spec, node.astext()) \
                if isinstance(node, nodes.inline) else None
            if problem:
                _report((self.source, self.line), problem)
        return out, msgs

    checked_run.__wrapped__ = run
    PasteTextRole.run = checked_run


def setup(app):
    import sipperf_execute

    app.add_config_value("sipperf_chapter_timeout", 600, "", [int, float])
    app.connect("config-inited", sipperf_execute.install)
    app.connect("html-page-context", _dedupe_scripts, priority=1)
    app.connect("env-get-updated", _renumber_unnumbered, priority=900)
    app.connect("source-read", _check_source)
    app.connect("doctree-resolved", _check_doctree, priority=900)
    _wrap_glue_text()
    return {"parallel_read_safe": True, "parallel_write_safe": True}
