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
import os
import sys


def _run(a: argparse.Namespace) -> int:
    from sipperf.ingest.paths import display_path
    from sipperf.report import build_report
    from sipperf.report.options import build_options, printable as _safe
    from sipperf.timeline import IngestError

    try:
        options = build_options(a)
        if getattr(a, "slowest", 0) < 0:
            raise ValueError(f"--slowest must be >= 0, not {a.slowest}")
        rep = build_report(a.paths, a.out, n_slowest=a.slowest, title=a.title, **options)
    except IngestError as e:
        print(_safe(f"sipperf report: unusable input: {e}"), file=sys.stderr)
        return 2
    except ValueError as e:
        print(_safe(f"sipperf report: error: {e}"), file=sys.stderr)
        return 2
    except ModuleNotFoundError:
        raise  # an optional package: sipperf.cli says which extra installs it
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
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    from sipperf.report.options import add_run_options

    p = sub.add_parser("report", help="HTML report, runs side by side, fitted models and a verdict",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_options(p)
    p.add_argument("--out", required=True, help="output directory (index.html and the CSV/JSON files)")
    p.add_argument("--slowest", type=int, default=5, help="ladder diagrams of the N slowest calls per run "
                                                           "(default 5; 0: none)")
    p.add_argument("--title", default=None, help="title of the report")
    p.set_defaults(func=_run)
