"""``sipperf report PATH... --out DIR``: from your captures or logs to a shareable HTML report and a verdict.

Each input is analysed as its own run (a lab or sim run directory, a file; ``--group-by`` for
other rules) and never pooled silently; the runs are shown side by side, a sweep of rates gives
the load-latency and load-drop curves, and the models of the book are fitted to them (service
demand per message type, alpha(lambda), beta, C_{1,1}, each with its 95 % interval and the runs it
came from).  Writes DIR/index.html (self-contained: plotly.js inlined, opens from disk, offline),
DIR/runs.csv, the CSVs of ``sipperf analyze`` for every run (DIR/runs/<run>/ and, with a ``run``
column, DIR/components.csv, calls.csv, transactions.csv, counts.csv), DIR/components_ci.csv,
DIR/fit.json (for ``sipperf model ... --fit DIR/fit.json``) and DIR/report.json.

--group-by: auto (default; each run directory and file is a run, several run_id in a file are
split), file, dir (the files of a directory form one run), none (pool everything, explicitly),
regex:PATTERN (same match -- or first group -- = same run), gap:SECONDS (read everything, cut
into runs where no message arrives for SECONDS).

Exit codes: 0 report written; 2 unusable input, --out or --proxy (a message naming the file and
position); never a Python traceback.
"""
from __future__ import annotations

import argparse
import sys


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
    p.add_argument("--cores", type=int, default=None, help="cores m of the proxy's machine (capacity rule)")
    p.add_argument("--processors", type=int, default=None, help="processors p of the machine (default 1)")
    p.add_argument("--buffer-pkts", type=float, default=None,
                   help="socket-queue capacity K in packets (default: what drops show, else 200)")
    p.add_argument("--bootstrap", type=int, default=200, help="bootstrap replicates for the 95 %% intervals")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")


def check_options(a: argparse.Namespace) -> None:
    for name in ("threads", "cores", "processors"):
        v = getattr(a, name)
        if v is not None and not 1 <= v <= 4096:
            raise ValueError(f"--{name} must be between 1 and 4096, not {v}")
    if a.buffer_pkts is not None and not (1 <= a.buffer_pkts <= 1e7):
        raise ValueError(f"--buffer-pkts must be between 1 and 1e7, not {a.buffer_pkts}")
    if not 0 <= a.bootstrap <= 10000:
        raise ValueError(f"--bootstrap must be between 0 and 10000, not {a.bootstrap}")
    if a.proxy is not None:
        from sipperf.ingest.pairing.vantage import parse_proxies
        from sipperf.timeline import IngestError

        try:
            parse_proxies(a.proxy)
        except ValueError as e:
            raise IngestError("--proxy", repr(a.proxy), f"unusable proxy address: {e}") from None


def _safe(s: str) -> str:
    enc = getattr(sys.stdout, "encoding", None) or "utf-8"
    return s.encode(enc, "backslashreplace").decode(enc, "replace")


def _run(a: argparse.Namespace) -> int:
    from sipperf.ingest.paths import display_path
    from sipperf.report import build_report
    from sipperf.timeline import IngestError

    try:
        check_options(a)
        if getattr(a, "slowest", 0) < 0:
            raise ValueError(f"--slowest must be >= 0, not {a.slowest}")
        rep = build_report(a.paths, a.out, group_by=a.group_by, proxy=a.proxy, strict=a.strict, offered=a.offered,
                           threads=a.threads, cores=a.cores, processors=a.processors, buffer_pkts=a.buffer_pkts,
                           n_slowest=a.slowest, n_boot=a.bootstrap, seed=a.seed, title=a.title)
    except IngestError as e:
        print(_safe(f"sipperf report: unusable input: {e}"), file=sys.stderr)
        return 2
    except ValueError as e:
        print(_safe(f"sipperf report: error: {e}"), file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - a bug must not show as a traceback to the user
        print(_safe(f"sipperf report: internal error ({type(e).__name__}: {e}); please report it with the "
                    "command line"), file=sys.stderr)
        return 1
    try:
        print(_safe(f"{len(rep.runs)} run(s): " + ", ".join(r.label for r in rep.runs)))
        for f in rep.failed:
            print(_safe(f"  not read: {f['run']}: {f['error']}"))
        for s in rep.verdict.get("headline", []):
            print(_safe(f"* {s}"))
        for s in rep.verdict.get("cannot", []):
            print(_safe(f"- cannot tell: {s}"))
        print(_safe(f"report: {display_path(rep.html)}" if rep.html else ""))
        sys.stdout.flush()
    except BrokenPipeError:
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="HTML report, runs side by side, fitted models and a verdict",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_options(p)
    p.add_argument("--out", required=True, help="output directory (index.html and the CSV/JSON files)")
    p.add_argument("--slowest", type=int, default=5, help="ladder diagrams of the N slowest calls per run "
                                                           "(default 5; 0: none)")
    p.add_argument("--title", default=None, help="title of the report")
    p.set_defaults(func=_run)
