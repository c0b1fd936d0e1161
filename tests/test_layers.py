"""The package's import rules (issue 26 item 2): layers, no cycle, commands only from the CLI.

The layer table is the one in docs/package.md (one source of truth, shown to readers there);
the import graph is read with ``ast`` by tests/layering.py -- module- and function-level
imports, ``import a.b``, ``from a import b`` (b a submodule or a name), relative imports.
The first tests run the checker on small synthetic packages, so it is known to catch what it
must; the last one runs it on ``src/sipperf``.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from layering import cycles, edges, graph, layer_of, modules, parse_layers, problems

ROOT = Path(__file__).resolve().parents[1]
SHARED = ("sipperf",)  # sipperf/__init__.py: the version, free for all
PRIVATE = {"sipperf.commands": ("sipperf.cli",)}


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    """Write a package under tmp_path/src (a ``__init__.py`` in every folder) and return src."""
    src = tmp_path / "src"
    for name, text in files.items():
        p = src / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    for d in [d for d in src.rglob("*") if d.is_dir()]:
        (d / "__init__.py").touch()
    return src


TABLE = {"pkg.low": 0, "pkg.mid": 1, "pkg.high": 2, "pkg.cmds": 3}


def test_edges_resolve_every_import_form(tmp_path):
    src = _package(tmp_path, {
        "pkg/low/a.py": "import os\nimport pkg.low.b\n",
        "pkg/low/b.py": "",
        "pkg/mid/__init__.py": "X = 1\n",
        "pkg/mid/c.py": textwrap.dedent("""\
            from . import d               # a sibling submodule, relative
            from .. import low            # a package, two levels
            from pkg.mid import X         # a name defined in the package's __init__
            from pkg.low import a as aa   # a submodule through 'from'
            def f():
                from ..low.b import thing  # function-level, relative, from a module
            """),
        "pkg/mid/d.py": "",
    })
    mods = modules(src, "pkg")
    assert {"pkg", "pkg.low", "pkg.low.a", "pkg.mid", "pkg.mid.c", "pkg.mid.d"} <= set(mods)
    got = {(e.source, e.target) for e in edges(mods, "pkg") if not e.implicit}
    assert got == {("pkg.low.a", "pkg.low.b"),
                   ("pkg.mid.c", "pkg.mid.d"), ("pkg.mid.c", "pkg.low"), ("pkg.mid.c", "pkg.mid"),
                   ("pkg.mid.c", "pkg.low.a"), ("pkg.mid.c", "pkg.low.b")}
    # importing pkg.low.b from pkg.mid runs pkg/low/__init__.py on the way: an implicit edge
    implicit = {(e.source, e.target) for e in edges(mods, "pkg") if e.implicit}
    assert ("pkg.mid.c", "pkg.low") in implicit and ("pkg.low.a", "pkg.low") not in implicit
    line = {e.target: e.line for e in edges(mods, "pkg") if e.source == "pkg.mid.c" and not e.implicit}
    assert line["pkg.low.b"] == 6


def test_cycles_tarjan():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"f"}, "f": {"e"}, "g": {"g"}}
    assert cycles(g) == [["a", "b", "c", "a"], ["e", "f", "e"]]
    assert cycles({"a": {"b"}, "b": {"c"}}) == []
    # deep chains do not hit the recursion limit
    chain = {str(i): {str(i + 1)} for i in range(5000)}
    chain["5000"] = {"0"}
    assert len(cycles(chain)[0]) == 5002


def test_layer_table_parsing_and_lookup():
    md = "| layer | modules |\n|---|---|\n| 0 | `pkg.low` | x |\n| 1 | `pkg.mid`, `pkg.mid2` | y |\n"
    t = parse_layers(md)
    assert t == {"pkg.low": 0, "pkg.mid": 1, "pkg.mid2": 1}
    assert layer_of("pkg.mid.sub.deep", t) == 1 and layer_of("pkg.middle", t) is None
    with pytest.raises(ValueError, match="twice"):
        parse_layers(md + "| 2 | `pkg.low` | z |\n")


def test_a_layered_package_passes(tmp_path):
    src = _package(tmp_path, {
        "pkg/low/a.py": "import pkg\n",
        "pkg/mid/b.py": "from pkg.low import a\n",
        "pkg/high/c.py": "from ..mid import b\nfrom pkg.low.a import *\n",
        "pkg/cmds/run.py": "from pkg.high import c\nfrom pkg.cmds import other\n",
        "pkg/cmds/other.py": "",
        "pkg/cli.py": "import pkg.cmds.run\n",
    })
    assert problems(src, "pkg", {**TABLE, "pkg.cli": 3}, shared=("pkg",),
                    private={"pkg.cmds": ("pkg.cli",)}) == []


def test_every_break_is_reported(tmp_path):
    src = _package(tmp_path, {
        "pkg/low/a.py": "def f():\n    from pkg.high import c  # upward, inside a function\n",
        "pkg/mid/b.py": "from . import b2\n",                       # cycle b -> b2 -> b
        "pkg/mid/b2.py": "from .b import X\n",
        "pkg/high/__init__.py": "from pkg.high.c import Y\n",      # __init__ <-> c
        "pkg/high/c.py": "from pkg.high import Z\nfrom .. import cmds\nimport pkg.low.gone\n",
        "pkg/cmds/run.py": "",
        "pkg/new.py": "",                                           # in no layer
    })
    out = problems(src, "pkg", TABLE, shared=("pkg",), private={"pkg.cmds": ("pkg.cli",)})
    text = "\n".join(out)
    assert len(out) == 6, text
    assert "pkg/new.py: module pkg.new is in no layer: add it" in text
    assert "pkg/low/a.py:2: pkg.low.a (layer 0) imports pkg.high.c (layer 2)" in text
    assert "pkg/high/c.py:2: pkg.high.c imports pkg.cmds: only pkg.cli may import pkg.cmds" in text
    assert "pkg/high/c.py:3: pkg.high.c imports pkg.low.gone, which does not exist" in text
    assert "import cycle: pkg.high (line 1) -> pkg.high.c (line 1) -> pkg.high" in text
    assert "import cycle: pkg.mid.b (line 1) -> pkg.mid.b2 (line 1) -> pkg.mid.b" in text
    assert "the layer table names pkg.gone, which is not a module of pkg" in \
        problems(src, "pkg", {**TABLE, "pkg.gone": 0}, shared=("pkg",))


def test_layer_table_of_the_package_map():
    table = parse_layers((ROOT / "docs" / "package.md").read_text())
    assert table["sipperf.models"] == 0 and table["sipperf.cli"] == 6 and table["sipperf.warm"] == 4
    assert sorted(set(table.values())) == list(range(7))


def test_sipperf_is_layered_without_cycles():
    table = parse_layers((ROOT / "docs" / "package.md").read_text())
    out = problems(ROOT / "src", "sipperf", table, shared=SHARED, private=PRIVATE)
    assert not out, "import rules broken (layers: docs/package.md):\n" + "\n".join(out)
