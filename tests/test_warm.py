"""``python -m sipperf.warm`` finds every cached kernel and fails when one is not in the cache.

Neither test compiles anything: the full run (about a minute on an empty cache) is
tests/test_project.py::test_binder_warm_up_runs (slow).
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from sipperf import warm

ROOT = Path(__file__).resolve().parents[1]


def _cached_kernels_by_reading() -> set[str]:
    """module.function of every ``@njit(cache=True)`` / ``@jit(cache=True)`` definition that is
    not ``inline="always"``, read from the sources with ast (independent of numba)."""
    src = ROOT / "src"
    out = set()
    for path in (src / "sipperf").rglob("*.py"):
        parts = path.relative_to(src).with_suffix("").parts
        mod = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef):
                continue
            for d in node.decorator_list:
                if not isinstance(d, ast.Call):
                    continue
                fn = d.func.attr if isinstance(d.func, ast.Attribute) else getattr(d.func, "id", "")
                kw = {k.arg: k.value for k in d.keywords}
                if fn in ("njit", "jit") and isinstance(kw.get("cache"), ast.Constant) and kw["cache"].value \
                        and not (isinstance(kw.get("inline"), ast.Constant) and kw["inline"].value == "always"):
                    out.add(f"{mod}.{node.name}")
    return out


def test_kernels_finds_every_cached_kernel():
    expected = _cached_kernels_by_reading()
    assert len(expected) >= 10  # the scanner, the thesis-log reader, components, order_stats, ...
    assert {k.name for k in warm.kernels()} == expected


def test_a_kernel_missing_from_the_cache_fails_the_run(tmp_path):
    """No step, an empty cache directory: every kernel is reported missing and the exit is 1."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    code = "import sys, sipperf.warm as w; w.STEPS.clear(); sys.exit(w.main([]))"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    missing = r.stderr.split("(add one that does): ", 1)[1].strip().split(", ")
    assert set(missing) == _cached_kernels_by_reading()
    assert "0 in cache" in r.stdout and "kernels in the cache" not in r.stdout
