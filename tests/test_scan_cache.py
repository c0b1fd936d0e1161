"""numba's on-disk cache stays correct across the files of the compiled scanner (issue 26).

numba judges a cached function fresh by the one file that defines it; code it took from other
files (inlined helpers, constants) is not tracked.  :mod:`sipperf.ingest.capture.scan.cache`
stamps every compiled function of the package with a fingerprint of all its files.  The tests
copy the REAL package to a temporary directory, compile two small functions of it in fresh
processes, edit a different file of the copy, and check what the next process runs:

* ``values._strip`` inlines ``primitives._ws`` (``inline="always"``, another file);
* ``records.pending_frames`` reads the column ``F_PEND``, a constant of ``layout.py``.

A control copy without the mechanism shows numba's own behaviour (the old code is loaded), so
the check can tell stale from fresh.  The whole scanner is not compiled here (45 s); the
mechanism is the same for every function of the package (the last test checks that each one
uses it).
"""
from __future__ import annotations

import importlib
import json
import os
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from numba.core.registry import CPUDispatcher

import sipperf.ingest.capture.scan as scanpkg
from sipperf.ingest.capture.scan import cache as scancache

PKG = Path(scanpkg.__file__).parent

CHILD = r"""
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import scancopy
from scancopy import layout, records, values

a = np.frombuffer(b"\r x \r", np.uint8).copy()
s, e = values._strip(a, 0, len(a))
fs = np.zeros((3, layout.NF), np.int64)
fs[:, 5] = 1   # F_PEND in the original layout
fs[:, 6] = 10  # F_SEEN in the original layout
frs = np.zeros((1, layout.NFR), np.int64)
pend = records.pending_frames(fs, 3, frs, 0)

def hits(d):
    return sum(d.stats.cache_hits.values()), sum(d.stats.cache_misses.values())

print(json.dumps({"strip": [int(s), int(e)], "pending": int(pend),
                  "strip_cache": hits(values._strip), "pending_cache": hits(records.pending_frames)}))
"""


def _copy(tmp: Path, with_mechanism: bool) -> Path:
    root = tmp / ("with" if with_mechanism else "without")
    dst = root / "scancopy"
    shutil.copytree(PKG, dst, ignore=shutil.ignore_patterns("__pycache__"))
    if not with_mechanism:
        init = dst / "__init__.py"
        text = init.read_text()
        line = next(l for l in text.splitlines() if l.startswith("from . import cache"))
        init.write_text(text.replace(line + "\n", ""))
        (dst / "cache.py").unlink()
    return root


def _run(root: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "NUMBA_DISABLE_JIT")}
    out = subprocess.run([sys.executable, "-c", CHILD, str(root)], capture_output=True, text=True,
                         timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{path.name}: {old!r} not found once"
    path.write_text(text.replace(old, new))


WS_OLD = "    return c == 32 or c == 9\n"
WS_NEW = "    return c == 32 or c == 9 or c == 13\n"  # CR becomes whitespace: _strip trims it
F_OLD = "F_NEXT, F_OFF, F_CAP, F_HEAD, F_LEN, F_PEND, F_SEEN = range(7)"
F_NEW = "F_NEXT, F_OFF, F_CAP, F_HEAD, F_LEN, F_SEEN, F_PEND = range(7)"  # F_PEND is column 6


def test_edit_to_another_file_recompiles(tmp_path):
    root = _copy(tmp_path, with_mechanism=True)
    pkg = root / "scancopy"
    first = _run(root)
    # b"\r x \r": only space and tab are stripped; 3 flows with F_PEND = 1
    assert first["strip"] == [0, 5] and first["pending"] == 3
    assert first["strip_cache"] == [0, 1] and first["pending_cache"] == [0, 1]  # compiled
    assert list((pkg / "__pycache__").glob("values._strip-*.nbi")), "no cache written in the copy"
    again = _run(root)
    assert again["strip_cache"] == [1, 0] and again["pending_cache"] == [1, 0]  # loaded
    assert again["strip"] == [0, 5] and again["pending"] == 3

    _edit(pkg / "primitives.py", WS_OLD, WS_NEW)  # a helper inlined into values._strip
    after = _run(root)
    assert after["strip"] == [2, 3], "values._strip ran its cached code after primitives.py changed"
    assert after["strip_cache"] == [0, 1]
    assert after["pending_cache"] == [0, 1]  # the whole package is recompiled, never less

    _edit(pkg / "layout.py", F_OLD, F_NEW)  # a constant frozen into records.pending_frames
    after = _run(root)
    assert after["pending"] == 30, "records.pending_frames kept the old F_PEND"
    assert after["strip"] == [2, 3]


def test_without_the_mechanism_numba_loads_stale_code(tmp_path):
    """The control: the same copy minus cache.py -- numba's default stamps see no change in
    values.py and load the old code.  (Should numba one day track dependencies, this fails and
    the mechanism may be retired.)"""
    root = _copy(tmp_path, with_mechanism=False)
    first = _run(root)
    assert first["strip"] == [0, 5] and first["strip_cache"] == [0, 1]
    _edit(root / "scancopy" / "primitives.py", WS_OLD, WS_NEW)
    after = _run(root)
    assert after["strip_cache"] == [1, 0] and after["strip"] == [0, 5]


def test_fingerprint_covers_every_source_file(tmp_path):
    """Any .py file of the directory changes the fingerprint; other files do not."""
    d = tmp_path / "pkg"
    shutil.copytree(PKG, d, ignore=shutil.ignore_patterns("__pycache__"))
    base = scancache.fingerprint(str(d))
    assert base == scancache.fingerprint(str(PKG)) == scancache.FINGERPRINT
    seen = {base}
    for f in sorted(d.glob("*.py")):
        text = f.read_bytes()
        f.write_bytes(text + b"\n# edited\n")
        fp = scancache.fingerprint(str(d))
        assert fp not in seen, f"an edit to {f.name} does not change the fingerprint"
        seen.add(fp)
        f.write_bytes(text)
    assert scancache.fingerprint(str(d)) == base
    (d / "notes.txt").write_text("not source")
    assert scancache.fingerprint(str(d)) == base
    (d / "new_layer.py").write_text("X = 1\n")  # a new file of the package counts too
    assert scancache.fingerprint(str(d)) != base


def test_every_compiled_function_of_the_package_uses_the_fingerprint():
    """Each cached dispatcher in each module of the package is located by FingerprintLocator,
    with the fingerprint of the sources as its stamp."""
    n = 0
    for mod in pkgutil.iter_modules([str(PKG)]):
        m = importlib.import_module(f"{scanpkg.__name__}.{mod.name}")
        for name, obj in vars(m).items():
            if isinstance(obj, CPUDispatcher) and obj.__module__ == m.__name__:
                cache = obj._cache
                assert isinstance(cache._impl.locator, scancache.FingerprintLocator), name
                assert cache._cache_file._source_stamp == ("package-fingerprint",
                                                           scancache.fingerprint(str(PKG))), name
                n += 1
    assert n >= 30  # the scanner's compiled functions (41 today), not a vacuous loop
    assert scanpkg.scan.py_func.__module__.endswith(".records")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
