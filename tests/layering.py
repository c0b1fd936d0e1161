"""The import graph of a package, read with ``ast`` (nothing is imported), and its rules.

Used by tests/test_layers.py (no cycle, no upward import) and tests/test_package_map.py (the
map in docs/package.md names every module).  An import statement anywhere in a module -- at
module level or inside a function -- is an edge from that module to the *most specific module*
it names:

- ``import a.b.c``                 -> ``a.b.c``
- ``from a.b import c``            -> ``a.b.c`` when ``a/b/c.py`` (or ``a/b/c/``) exists, else ``a.b``
  (``c`` is then a name defined in ``a/b/__init__.py``)
- ``from . import c``, ``from ..x import y``: resolved against the importing module's package

Importing ``a.b.c`` also runs ``a/b/__init__.py``: that package is an edge too, unless it is the
importer's own package or an enclosing one (those have run already, before the importer).
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path


def modules(src: Path, top: str) -> dict[str, Path]:
    """Dotted name -> file of every module under ``src/top`` (a package is its ``__init__.py``)."""
    out = {}
    for path in sorted((src / top).rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


@dataclass(frozen=True)
class Edge:
    source: str   #: the importing module
    target: str   #: the module imported (the most specific one that exists, see the docstring)
    line: int     #: line of the import statement in the importing module
    exists: bool  #: False: the import names a module of the package that does not exist
    implicit: bool = False  #: a package whose ``__init__`` runs because a submodule is imported


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def edges(mods: dict[str, Path], top: str) -> list[Edge]:
    """Every import of a module of ``top`` by a module of ``top`` (module- and function-level)."""
    out: list[Edge] = []
    for name, path in mods.items():
        pkg = _package_of(name, path)
        own = {name, *_ancestors(name)}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")
                    if node.level - 1 > len(base) - 1:
                        raise ValueError(f"{path}:{node.lineno}: relative import beyond {top}")
                    base = base[:len(base) - (node.level - 1)]
                    frm = ".".join(base + ([node.module] if node.module else []))
                else:
                    frm = node.module or ""
                targets = [f"{frm}.{a.name}" if f"{frm}.{a.name}" in mods else frm for a in node.names]
            for t in targets:
                if t != top and not t.startswith(top + "."):
                    continue
                for anc in _ancestors(t):  # packages whose __init__ runs on the way
                    if anc != top and anc not in own and anc in mods:
                        out.append(Edge(name, anc, node.lineno, True, implicit=True))
                if t != name:
                    out.append(Edge(name, t, node.lineno, t in mods))
    return sorted(set(out), key=lambda e: (e.source, e.target, e.line))


def graph(es: list[Edge]) -> dict[str, set[str]]:
    g: dict[str, set[str]] = {}
    for e in es:
        if e.exists:
            g.setdefault(e.source, set()).add(e.target)
    return g


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative), each as one
    closed path through the component: [a, b, ..., a]."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[list[str]] = []
    nodes = sorted(set(g) | {t for ts in g.values() for t in ts})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(g.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return sorted(_closed_path(g, set(c)) for c in comps)


def _closed_path(g: dict[str, set[str]], comp: set[str]) -> list[str]:
    """A shortest closed path from the component's first module back to itself (BFS)."""
    start = min(comp)
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(g.get(v, ())):
                if w not in comp:
                    continue
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return path[::-1] + [start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError("not a strongly connected component")  # pragma: no cover


def parse_layers(markdown: str) -> dict[str, int]:
    """The layer table of docs/package.md: rows ``| 3 | `pkg.a`, `pkg.b` | ... |`` -> {name: 3}."""
    table: dict[str, int] = {}
    for line in markdown.splitlines():
        m = re.match(r"\|\s*(\d+)\s*\|([^|]*)\|", line)
        if not m:
            continue
        for name in re.findall(r"`([\w.]+)`", m.group(2)):
            if name in table:
                raise ValueError(f"{name} is in the layer table twice")
            table[name] = int(m.group(1))
    return table


def layer_of(name: str, table: dict[str, int]) -> int | None:
    """The layer of a module: that of the longest table entry it is or lies in."""
    best = None
    for entry, layer in table.items():
        if name == entry or name.startswith(entry + "."):
            if best is None or len(entry) > len(best):
                best = entry
    return None if best is None else table[best]


def problems(src: Path, top: str, table: dict[str, int], *, shared: tuple[str, ...] = (),
             private: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    """Every break of the rules, one message each (empty: the package is layered).

    ``shared``: modules anyone may import (no layer).  ``private``: {module: importers allowed}
    -- a module only the listed ones (and its own submodules) may import."""
    mods = modules(src, top)
    es = edges(mods, top)
    where = {m: p.relative_to(src) for m, p in mods.items()}
    out = []
    for m in sorted(mods):
        if m not in shared and layer_of(m, table) is None:
            out.append(f"{where[m]}: module {m} is in no layer: add it (or its top-level package) "
                       "to the layer table in docs/package.md")
    for entry in sorted(table):
        if entry not in mods:
            out.append(f"the layer table names {entry}, which is not a module of {top}")
    lines: dict[tuple[str, str], list[int]] = {}
    for e in es:  # one message per (importer, imported), naming every line
        if not e.implicit:
            lines.setdefault((e.source, e.target), []).append(e.line)
    for (src_mod, tgt), at_lines in lines.items():
        at = f"{where[src_mod]}:{','.join(map(str, at_lines))}"
        if tgt not in mods:
            out.append(f"{at}: {src_mod} imports {tgt}, which does not exist")
            continue
        owner = next((p for p in (private or {}) if tgt == p or tgt.startswith(p + ".")), None)
        if owner and not any(src_mod == w or src_mod.startswith(w + ".")
                             for w in (owner, *private[owner])):
            out.append(f"{at}: {src_mod} imports {tgt}: only {', '.join(private[owner])} may "
                       f"import {owner}; move what it needs into a library module")
            continue
        ls, lt = layer_of(src_mod, table), layer_of(tgt, table)
        if tgt not in shared and ls is not None and lt is not None and lt > ls:
            out.append(f"{at}: {src_mod} (layer {ls}) imports {tgt} (layer {lt}): "
                       "a lower layer must not import a higher one")
    g = graph(es)
    first = {(e.source, e.target): e.line for e in reversed(es)}
    for cyc in cycles(g):
        steps = " -> ".join(f"{a} (line {first[a, b]})" for a, b in zip(cyc, cyc[1:]))
        out.append(f"import cycle: {steps} -> {cyc[-1]}  (line N: where a module imports the next)")
    return out
