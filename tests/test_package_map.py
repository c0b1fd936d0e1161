"""docs/package.md stays in step with src/sipperf (issue 26 item 6).

The map ("## What lives where") must name every package folder and every module of the tree;
every path the page names must exist; every ``sipperf.x.y`` name it gives must be a module or a
name defined at the top of one.  How a line of the map is read: a backticked name ending in
``.py`` or ``/``, or holding a ``/``, is a path; on a line that starts with a folder (`` `x/` ``)
it is looked up in that folder first, then in src/sipperf/, then in the repository; ``<...>``
marks a template (``ingest/<family>/``): only the folder before it must exist.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from layering import modules

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "package.md"
MAP_HEADING = "## What lives where"
_PATH = re.compile(r"^[\w.<>-]+(/[\w.<>-]+)*/?$")


def _paths(line: str) -> list[str]:
    return [t for t in re.findall(r"`([^`\s]+)`", line)
            if _PATH.match(t) and (t.endswith(("/", ".py", ".md", ".yml")) or "/" in t)]


def _resolve(token: str, bases: list[Path]) -> Path | None:
    if "<" in token:  # a template: the folder before the placeholder must exist
        token = token[:token.index("<")].rpartition("/")[0] + "/"
    for base in bases:
        p = base / token.rstrip("/")
        if p.exists() and (p.is_dir() or not token.endswith("/")):
            return p.resolve()
    return None


def _split(md: str) -> tuple[list[str], str]:
    """(the map's bullets with continuation lines joined, the rest of the page); comments dropped."""
    md = re.sub(r"<!--.*?-->", "", md, flags=re.S)
    head, body = md.split(MAP_HEADING, 1)
    body, _, tail = body.partition("\n## ")
    bullets: list[str] = []
    for line in body.splitlines():
        if line.startswith("- "):
            bullets.append(line)
        elif line.startswith("  ") and bullets:
            bullets[-1] += " " + line.strip()
    return bullets, head + "\n## " + tail


def check_map(md: str, root: Path, pkg: Path) -> list[str]:
    """Every break of the map's rules, one message each (empty: in step)."""
    if MAP_HEADING not in md:
        return [f"no '{MAP_HEADING}' section"]
    out: list[str] = []
    named: set[Path] = set()
    bullets, rest = _split(md)
    for line in bullets:
        first = re.match(r"- `([^`]+)`", line)
        folder = first.group(1) if first and first.group(1).endswith("/") else None
        bases = ([pkg / folder] if folder else []) + [pkg, root]
        for t in _paths(line):
            p = _resolve(t, [pkg] if t == folder else bases)
            if p is None:
                where = f" (in `{folder}`)" if folder and t != folder else ""
                out.append(f"the map names `{t}`{where}, which does not exist")
            else:
                named.add(p)
    for t in _paths(rest):  # the rest of the page: relative to src/sipperf, src or the repository
        if _resolve(t, [pkg, pkg.parent, root]) is None:
            out.append(f"the page names `{t}`, which does not exist")
    for p in sorted(pkg.rglob("*")):
        if "__pycache__" in p.parts:
            continue
        rel = p.relative_to(pkg)
        if p.is_dir() and (p / "__init__.py").exists() and p.resolve() not in named:
            out.append(f"folder {rel}/ is not in the map: add a line `- `{rel}/` what it owns: ...`")
        elif p.suffix == ".py" and p.resolve() not in named and not (p.name == "__init__.py" and p.parent != pkg):
            out.append(f"module {rel} is not in the map: name `{p.name}` on its folder's line")
    out += check_names(re.sub(r"<!--.*?-->", "", md, flags=re.S), pkg.parent, pkg.name)
    return list(dict.fromkeys(out))  # each message once


def _top_names(tree: ast.Module) -> dict[str, ast.AST]:
    names: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(t, ast.Name):
                    names[t.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                names[(a.asname or a.name).split(".")[0]] = node
    return names


def check_names(md: str, src: Path, top: str) -> list[str]:
    """Every ``top.x.y`` name on the page is a module, or a name defined at the top of one (a
    class's attribute one level down)."""
    mods = modules(src, top)
    out = []
    for name in sorted(set(re.findall(rf"`({top}(?:\.\w+)+)`", md))):
        parts = name.split(".")
        k = max(i for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in mods)
        rest = parts[k:]
        if not rest:
            continue
        scope = _top_names(ast.parse(mods[".".join(parts[:k])].read_text()))
        node = scope.get(rest[0])
        if node is not None and len(rest) == 2 and isinstance(node, ast.ClassDef):
            node = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))} & {rest[1]} or None
        elif len(rest) > 2 or (len(rest) == 2 and node is not None):
            node = None
        if node is None:
            out.append(f"the page names `{name}`: {'.'.join(rest)} is not defined in {'.'.join(parts[:k])}")
    return out


# ------------------------------------------------------------------ the checker can fail
def _tree(tmp_path: Path) -> tuple[Path, Path]:
    pkg = tmp_path / "src" / "pkg"
    for f, text in {"__init__.py": "", "core.py": "def run():\n    pass\nclass Box:\n    def put(self):\n        pass\n",
                    "io/__init__.py": "from pkg.io.read import load\n", "io/read.py": "def load(): pass\n",
                    "io/write.py": ""}.items():
        (pkg / f).parent.mkdir(parents=True, exist_ok=True)
        (pkg / f).write_text(text)
    (tmp_path / "docs").mkdir()
    return tmp_path, pkg


GOOD = """# map
## What lives where
- `__init__.py` the version; `core.py` the core (`pkg.core.run`, `pkg.core.Box.put`).
- `io/` reading and writing: `read.py` (`pkg.io.load`),
  `write.py` on a continuation line.
## Recipes
- a new reader goes in `io/<name>.py`, documented in `docs/`.
"""


def test_a_map_in_step_passes(tmp_path):
    root, pkg = _tree(tmp_path)
    assert check_map(GOOD, root, pkg) == []


def test_every_gap_is_reported(tmp_path):
    root, pkg = _tree(tmp_path)
    (pkg / "io" / "extra.py").write_text("")
    (pkg / "new").mkdir()
    (pkg / "new" / "__init__.py").write_text("")
    md = GOOD.replace("`write.py`", "`gone.py`").replace("`pkg.core.run`", "`pkg.core.walk`") \
        .replace("`docs/`", "`doc/`").replace("`pkg.core.Box.put`", "`pkg.core.Box.take`")
    out = check_map(md, root, pkg)
    assert sorted(out) == sorted([
        "the map names `gone.py` (in `io/`), which does not exist",
        "the page names `doc/`, which does not exist",
        "module io/extra.py is not in the map: name `extra.py` on its folder's line",
        "module io/write.py is not in the map: name `write.py` on its folder's line",
        "folder new/ is not in the map: add a line `- `new/` what it owns: ...`",
        "the page names `pkg.core.Box.take`: Box.take is not defined in pkg.core",
        "the page names `pkg.core.walk`: walk is not defined in pkg.core",
    ]), "\n".join(out)
    # a module named only on the wrong folder's line does not count for its own folder
    assert any("io/read.py is not in the map" in m for m in
               check_map(GOOD.replace("- `io/` reading and writing: `read.py`", "- `io/` see `core.py`"), root, pkg))


# ---------------------------------------------------------------------------- the real page
def test_package_map_is_in_step_with_the_tree():
    out = check_map(DOC.read_text(), ROOT, ROOT / "src" / "sipperf")
    assert not out, "docs/package.md is out of step with src/sipperf:\n" + "\n".join(out)
