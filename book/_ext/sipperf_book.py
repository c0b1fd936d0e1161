"""Small Sphinx fixes for the book.

sphinx-thebe registers its inline configuration script (``const THEBE_JS_URL = …``) once per
``env-before-read-docs`` event, and Jupyter Book 1 fires that event twice with slightly
different selectors, so every page declared the constant twice: a JavaScript error on every
page.  Before each page is written, keep only the first inline script that declares a given
``const``/``let`` name, and drop exact duplicates of any script entry.

It also installs :mod:`sipperf_execute` (chapter execution without stalls, a per-chapter time
budget ``sipperf_chapter_timeout``) before any chapter runs.
"""
from __future__ import annotations

import re

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


def setup(app):
    import sipperf_execute

    app.add_config_value("sipperf_chapter_timeout", 600, "", [int, float])
    app.connect("config-inited", sipperf_execute.install)
    app.connect("html-page-context", _dedupe_scripts, priority=1)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
