"""The run options shared by ``sipperf report`` and ``sipperf fit``, and their checks.

:func:`add_run_options` declares them on a parser (they are arguments of
:func:`~sipperf.report.build.build_report`), :func:`check_run_options` refuses out-of-range
values before any work is done, :func:`build_options` does both for parsed arguments, and
:func:`printable` makes a message printable on any terminal encoding.
"""
from __future__ import annotations

import argparse
import sys

__all__ = ["add_run_options", "check_run_options", "build_options", "printable"]


def add_run_options(p: argparse.ArgumentParser) -> None:
    """Options shared by ``report`` and ``fit``."""
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or directories, any mix of formats")
    p.add_argument("--group-by", default="auto", metavar="RULE",
                   help="auto | file | dir | none | regex:PATTERN | gap:SECONDS (default auto)")
    p.add_argument("--proxy", default=None, help="proxy ip:port for captures (default: found from the traffic)")
    p.add_argument("--strict", action="store_true", help="fail on the first skipped record or unreadable input")
    p.add_argument("--offered", type=int, default=None, help="messages offered per run (PDR denominator)")
    p.add_argument("--threads", type=int, default=None, help="worker threads c of every run (default: from run "
                                                                  "metadata, else 1)")
    p.add_argument("--cores", type=int, default=None,
                   help="cores m the proxy ran on (the capacity rule; C₁,₁ read off a multi-worker knee needs them, "
                        "or --cpu)")
    p.add_argument("--processors", type=int, default=None, help="processors p of the machine (default 1)")
    p.add_argument("--buffer-pkts", type=float, default=None,
                   help="socket-queue capacity K in packets (default: what drops show, else 200)")
    p.add_argument("--cpu", default=None, metavar="FILE",
                   help="the proxy's CPU accounting, a CSV with a header: run (a run's label) and/or rate_cps "
                        "(calls/s), and cpu_s + window_s (CPU seconds, user + system, of all the proxy's processes, "
                        "and the seconds they were counted over) or cpu_share (CPU-seconds per second); optional "
                        "threads.  Rows naming a run give its utilisation; all rows of light-load runs give the CPU "
                        "per call and the capacity by the utilisation law.  (sipperf lab records this in each "
                        "run's meta.json: proxy_cpu.)")
    eng = p.add_mutually_exclusive_group()
    eng.add_argument("--stream", action="store_true",
                     help="stream every capture (bounded memory; default for a capture of 64 MB or more)")
    eng.add_argument("--in-memory", action="store_true",
                     help="read every capture into memory (the whole timeline: ladder diagrams of the slowest calls)")
    p.add_argument("--bootstrap", type=int, default=200, help="bootstrap replicates for the 95 %% intervals")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")


def check_run_options(*, threads=None, cores=None, processors=None, buffer_pkts=None, bootstrap: int = 200,
                      proxy=None) -> None:
    """ValueError for an out-of-range number, IngestError for an unusable ``proxy``."""
    for name, v in (("threads", threads), ("cores", cores), ("processors", processors)):
        if v is not None and not 1 <= v <= 4096:
            raise ValueError(f"--{name} must be between 1 and 4096, not {v}")
    if buffer_pkts is not None and not (1 <= buffer_pkts <= 1e7):
        raise ValueError(f"--buffer-pkts must be between 1 and 1e7, not {buffer_pkts}")
    if not 0 <= bootstrap <= 10000:
        raise ValueError(f"--bootstrap must be between 0 and 10000, not {bootstrap}")
    if proxy is not None:
        from sipperf.analysis import check_options

        check_options(proxy=proxy)


def build_options(a: argparse.Namespace) -> dict:
    """The parsed run options, checked (:func:`check_run_options`), as keyword arguments of
    :func:`~sipperf.report.build.build_report` (paths apart)."""
    check_run_options(threads=a.threads, cores=a.cores, processors=a.processors, buffer_pkts=a.buffer_pkts,
                      bootstrap=a.bootstrap, proxy=a.proxy)
    return {"group_by": a.group_by, "proxy": a.proxy, "strict": a.strict, "offered": a.offered,
            "threads": a.threads, "cores": a.cores, "processors": a.processors, "buffer_pkts": a.buffer_pkts,
            "n_boot": a.bootstrap, "seed": a.seed, "cpu": getattr(a, "cpu", None),
            "stream": True if getattr(a, "stream", False) else (False if getattr(a, "in_memory", False) else None)}


def printable(s: str) -> str:
    """``s`` printable on stdout's encoding (a file name that is not UTF-8 is shown escaped)."""
    enc = getattr(sys.stdout, "encoding", None) or "utf-8"
    return s.encode(enc, "backslashreplace").decode(enc, "replace")
