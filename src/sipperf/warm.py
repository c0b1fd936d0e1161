"""Compile the package's numba kernels into their on-disk cache once, at set-up.

``python -m sipperf.warm`` (``make setup``, ``binder/postBuild``) pays the compilation -- about
a minute, mostly the capture scanner -- so that no chapter, test or ``sipperf`` command pays it
on its first call.  Every kernel is ``@njit(cache=True)``: numba keeps its machine code in
``__pycache__/*.nbi`` (index) and ``*.nbc`` (code) next to the source, or under
``$NUMBA_CACHE_DIR``, one entry per argument signature and CPU target, dropped when the source
file changes.

How: :data:`STEPS` call the package's public reading paths on the repository's small files
(``tests/fixtures``, ``datasets/``) -- the calls the chapters make, so the kernels are compiled
for exactly the argument types the chapters pass.  Then :func:`kernels` lists every cached
kernel of every module that uses numba (inlined helpers excepted: they are compiled into their
callers) with the entries of its on-disk cache this process could load, and the run fails,
naming it, if a kernel has none -- a kernel added without a step that reaches it is caught at
set-up, not by a reader waiting for the compiler.
"""
from __future__ import annotations

import importlib
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import sipperf


def _root() -> Path:
    """The repository (the parent of ``datasets/``; ``$SIPPERF_DATASETS`` is honoured)."""
    from sipperf.thesis import datasets_dir

    return datasets_dir().parent


# ------------------------------------------------------------------------------ the steps
def _capture() -> None:
    from sipperf import components
    from sipperf.ingest.capture.pcap import read_pcap

    tl = read_pcap(_root() / "tests" / "fixtures" / "udp4.pcapng")[0]
    components.summary(tl)
    components.summary(tl, alpha=1.0, k_sockq_s_base_ns=1000.0)  # + service and wait (any values)


#: an egress-only line whose CSeq method needs case folding, a reader path of its own
#: (the format: docs/formats.md section 2; written to a temporary file, never kept)
_ODD_LINE = ("Mar 13 07:06:40 sps opensips[4242]: ERROR:tm:t_forward_nonack: ramekris "
             "now=1300000000000130 ip_out=6 request 1 callid=warm@h cseq=7 invite\n")


def _thesis_log() -> None:
    from sipperf import components
    from sipperf.ingest.thesis_logs.read import read_thesis_log

    components.summary(read_thesis_log(_root() / "tests" / "fixtures" / "thesis_small.log")[0])
    with tempfile.TemporaryDirectory(prefix="sipperf-warm-") as d:
        (Path(d) / "odd.log").write_text(_ODD_LINE)
        read_thesis_log(Path(d) / "odd.log")


def _lab_raw() -> None:
    from sipperf import components
    from sipperf.ingest import load

    components.summary(load([_root() / "datasets" / "lab" / "raw" / "rate-0025"])[0])


def _lab_dataset() -> None:
    from sipperf import components
    from sipperf.ingest.lab_runs.dataset import load_run

    components.summary(load_run(_root() / "datasets" / "lab" / "runs" / "rate-0100")[0])


def _stream(name: str) -> Callable[[], None]:
    def step() -> None:
        from sipperf.analysis.stream import stream_capture

        stream_capture([_root() / "tests" / "fixtures" / name], run_id="warm", label=name,
                       mode="inline", figures=False)
    return step


def _overload() -> None:
    from sipperf.analysis.stream import stream_capture
    from sipperf.ingest.capture.read import read_capture

    cap = _root() / "tests" / "fixtures" / "overload_pairing" / "capture.pcapng.gz"
    read_capture(cap)   # retransmissions of dropped copies: the pairing's second pass
    stream_capture([cap], run_id="warm", label=cap.name, mode="inline", figures=False)


#: (what, call): the public reading paths the chapters and ``sipperf analyze`` take
STEPS: list[tuple[str, Callable[[], None]]] = [
    ("capture -> timeline -> components (tests/fixtures/udp4.pcapng)", _capture),
    ("thesis-format logs (tests/fixtures/thesis_small.log, one odd line)", _thesis_log),
    ("lab run as recorded (datasets/lab/raw/rate-0025)", _lab_raw),
    ("lab dataset timeline (datasets/lab/runs/rate-0100)", _lab_dataset),
    ("streaming analysis at a proxy (tests/fixtures/udp4.pcapng)", _stream("udp4.pcapng")),
    ("streaming analysis at an endpoint (tests/fixtures/endpoint.pcapng)", _stream("endpoint.pcapng")),
    ("pairing past a proxy's knee, in memory and streamed (tests/fixtures/overload_pairing)", _overload),
]


# ---------------------------------------------------------------------------- the kernels
@dataclass
class Kernel:
    name: str        #: module.function
    cached: int      #: entries of its on-disk cache this process can load (this source, this CPU)
    compiled: int    #: signatures compiled in this process (cache misses)
    loaded: int      #: signatures loaded from the cache in this process (hits; a kernel called
    #: only by other kernels is not loaded: its code is inside theirs)
    cache_dir: Path  #: where numba keeps its index and code


def numba_modules() -> list[str]:
    """Every module of the package whose source uses numba (found by reading, not importing)."""
    src = Path(sipperf.__file__).resolve().parent
    out = []
    for path in sorted(src.rglob("*.py")):
        if "numba" in path.read_text(encoding="utf-8"):
            parts = path.relative_to(src.parent).with_suffix("").parts
            out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def _usable_entries(d) -> int:
    """Entries of a dispatcher's cache index that it would load now: numba's own test (same
    source file stamp, same CPU target and bytecode; ``numba.core.caching``, not public API)."""
    cache = d._cache
    codegen = d.targetctx.codegen()
    return sum(1 for key in cache._cache_file._load_index() if key == cache._index_key(key[0], codegen))


def kernels() -> list[Kernel]:
    """Every cached, not-inlined numba kernel defined in the package (imports the modules
    :func:`numba_modules` lists), with the state of its cache."""
    from numba.core.caching import NullCache
    from numba.core.dispatcher import Dispatcher

    out, seen = [], set()
    for mod_name in numba_modules():
        for obj in vars(importlib.import_module(mod_name)).values():
            if not isinstance(obj, Dispatcher) or id(obj) in seen or obj.py_func.__module__ != mod_name:
                continue
            seen.add(id(obj))
            if isinstance(obj._cache, NullCache) or obj.targetoptions.get("inline") == "always":
                continue  # not cached, or compiled into its callers
            st = obj.stats
            out.append(Kernel(f"{mod_name}.{obj.py_func.__name__}", _usable_entries(obj),
                              sum(st.cache_misses.values()), sum(st.cache_hits.values()),
                              Path(st.cache_path)))
    return out


def warm(log: Callable[[str], None] = print) -> tuple[list[Kernel], list[str]]:
    """Run every step; return the kernels and the steps that failed (each with its error)."""
    t0 = time.perf_counter()
    failed = []
    for what, step in STEPS:
        t = time.perf_counter()
        try:
            step()
            mark = ""
        except Exception as e:  # noqa: BLE001  (reported; the run fails)
            failed.append(f"{what}: {type(e).__name__}: {e}")
            mark = "  FAILED"
        log(f"{time.perf_counter() - t:7.1f} s  {what}{mark}")
    ks = kernels()
    log(f"{time.perf_counter() - t0:7.1f} s  in all")
    return ks, failed


def main(argv: list[str] | None = None) -> int:
    """``python -m sipperf.warm``: exit 0 when every step ran and every kernel is in the cache."""
    import argparse

    import numba

    argparse.ArgumentParser(prog="python -m sipperf.warm", description=__doc__.split("\n\n")[0]).parse_args(argv)
    print(f"sipperf {sipperf.__version__}: compiling the numba kernels into their cache "
          f"(numba {numba.__version__}, CPU {numba.config.CPU_NAME or 'of this host'})")
    ks, failed = warm()
    width = max(len(k.name) for k in ks)
    for k in ks:
        now = [f"{k.compiled} compiled now"] * bool(k.compiled) + [f"{k.loaded} loaded"] * bool(k.loaded)
        print(f"  {k.name:<{width}}  {k.cached} in cache  {', '.join(now)}")
    root = _root().resolve()
    dirs = sorted({str(k.cache_dir.relative_to(root)) if k.cache_dir.is_relative_to(root) else str(k.cache_dir)
                   for k in ks})
    print(f"cache: {', '.join(dirs)}")
    missing = [k.name for k in ks if not k.cached]
    for f in failed:
        print(f"step failed: {f}", file=sys.stderr)
    if missing:
        print("not in the cache, no step of sipperf.warm.STEPS reaches them (add one that does): "
              + ", ".join(missing), file=sys.stderr)
    if failed or missing:
        return 1
    print(f"{len(ks)} kernels in the cache ({sum(k.compiled for k in ks)} signatures compiled now)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
