"""numba's on-disk cache, made safe for a compiled pass spread over several files.

numba (``cache=True``) decides whether a cached function is fresh from the source of the ONE
file that defines it (a hash of it, in numba 0.68; its mtime and size before).  Functions it
calls from other files -- compiled into its machine code, inlined or linked -- are not tracked:
after an edit to ``sip.py``, ``records.scan`` would still load its old code (a limitation
numba's documentation states in its notes on caching; numba issue #1833).

The fix here: every compiled function defined in a file of THIS directory gets, as its cache's
source stamp, a fingerprint of all the directory's ``*.py`` files (names and contents).  An edit
to any of them makes every index file of the package stale at once, so the next call
recompiles; numba then overwrites the stale entries in place.  Where the cache lives is
unchanged (whatever numba would choose: ``NUMBA_CACHE_DIR``, else ``__pycache__`` next to the
file, else the user-wide cache directory).

The mechanism is numba's own extension point: a cache locator (``numba.core.caching``,
``CacheImpl._locator_classes``, the classes asked in turn which of them handles a function's
file; the chosen one supplies the directory and the source stamp).  :class:`FingerprintLocator`
is put first in that list; for a file of this directory it wraps the locator numba would
have chosen and only replaces the stamp; for any other file it declines, so the rest of the
program is not affected.  If ``NUMBA_CACHE_LOCATOR_CLASSES`` is set, numba uses that list
instead: name ``sipperf.ingest.capture.scan.cache.FingerprintLocator`` first in it.

This module imports nothing from the package (the package imports it first, before any
compiled function is defined), so a copy of it works the same in any directory
(tests/test_scan_cache.py does that).
"""
from __future__ import annotations

import hashlib
import os

from numba.core.caching import CacheImpl, _CacheLocator

PACKAGE_DIR = os.path.dirname(os.path.realpath(__file__))


def fingerprint(directory: str = PACKAGE_DIR) -> str:
    """sha256 over the names and contents of the ``*.py`` files of ``directory`` (sorted)."""
    h = hashlib.sha256()
    for name in sorted(n for n in os.listdir(directory) if n.endswith(".py")):
        with open(os.path.join(directory, name), "rb") as fh:
            data = fh.read()
        h.update(name.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    return h.hexdigest()


FINGERPRINT = fingerprint()  # the sources this process compiles (or loads) code for


class FingerprintLocator(_CacheLocator):
    """numba's usual locator for a function of this directory, with the package fingerprint
    as the source stamp (see the module docstring)."""

    def __init__(self, inner: _CacheLocator):
        self._inner = inner

    def ensure_cache_path(self):
        self._inner.ensure_cache_path()

    def get_cache_path(self):
        return self._inner.get_cache_path()

    def get_source_stamp(self):
        return ("package-fingerprint", FINGERPRINT)

    def get_disambiguator(self):
        return self._inner.get_disambiguator()

    @classmethod
    def from_function(cls, py_func, py_file):
        if os.path.dirname(os.path.realpath(py_file)) != PACKAGE_DIR:
            return None
        for other in CacheImpl._locator_classes:
            if other is cls:
                continue
            inner = other.from_function(py_func, py_file)
            if inner is not None:
                return cls(inner)
        return None


def install() -> None:
    """Put :class:`FingerprintLocator` first in numba's locator list (once per class)."""
    if FingerprintLocator not in CacheImpl._locator_classes:
        CacheImpl._locator_classes.insert(0, FingerprintLocator)


install()


def compile_pending(dispatcher) -> bool:
    """Whether ``dispatcher`` (a ``cache=True`` kernel) has no fresh entry in its on-disk cache, so
    that its first call compiles it (after an install or an upgrade).  False when that cannot be
    told."""
    try:
        return not dispatcher._cache._cache_file._load_index()
    except Exception:  # noqa: BLE001 - numba's internals moved: say nothing rather than guess
        return False
