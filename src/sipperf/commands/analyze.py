"""``sipperf analyze PATH... --out DIR``: your own logs -> components, call metrics, report, figures.

Writes into ``DIR``:

* ``components.csv``: one row per msg_type plus ``ALL``: count and mean/median/p99 in µs of
  every derivable component, incl. ``sojourn``; plus the batch-means 95% CI half-width of each
  ALL mean (a capture at an endpoint has no component: counts only);
* ``components_by_hop.csv`` (several hops in one capture): the same per hop;
* ``calls.csv``: RFC 6076 metrics and the PDR (:mod:`sipperf.calls`), at the caller side;
* ``transactions.csv``: request -> response times per transaction type, retransmissions apart;
* ``counts.csv``: messages by method / status (and, at a proxy, by disposition);
* ``report.json``: the ingest account (read, parsed, skipped by reason, per input file), what
  each capture's vantage point is and what follows from it, and the drop rule's counts;
* ``components.png`` / ``timeline.png``.

Large captures are streamed (bounded memory, the same numbers: :mod:`sipperf.analysis.stream`);
the files of a ring buffer (``dumpcap -b``: PREFIX_NNNNN_YYYYmmddHHMMSS.pcapng) are one
capture, read in parallel on Dask (``--workers``, ``--scheduler``) and paired across files.

Unusable input (or an unusable ``--out`` / ``--proxy``) -> exit code 2 and a message naming the
file and position; never a traceback.
"""
# The library behind it: sipperf.analysis (the tables, the account, the files) and
# sipperf.figures.analysis_figs (the figures); this module parses, calls and prints.
from __future__ import annotations

import argparse
import os
import sys


def _run(args: argparse.Namespace) -> int:
    from sipperf.analysis import analyze, check_options, prepare_out_dir
    from sipperf.figures.analysis_figs import write_figures
    from sipperf.ingest.paths import display_path
    from sipperf.timeline import IngestError

    stream = True if args.stream else (False if args.in_memory else None)
    try:
        check_options(proxy=args.proxy, workers=args.workers, offered=args.offered)
        out = prepare_out_dir(args.out)  # before any work is done
        res = analyze(args.paths, proxy=args.proxy, strict=args.strict, offered=args.offered, stream=stream,
                      workers=args.workers, scheduler=args.scheduler, progress=True if args.progress else None)
        files = res.write(out)
    except IngestError as e:
        print(f"sipperf analyze: unusable input: {_safe(str(e))}", file=sys.stderr)
        return 2
    try:
        for line in res.describe():  # the answer first; the figures take a moment (matplotlib)
            print(_safe(line))
        print(_safe(f"wrote {', '.join(display_path(f) for f in files)}"))
        sys.stdout.flush()
        if not args.no_figures:
            figs = write_figures(res, out)
            if figs:
                print(_safe(f"figures: {', '.join(display_path(f) for f in figs)}"))
        sys.stdout.flush()
    except BrokenPipeError:  # `sipperf analyze ... | head`: the reader left; the files are written
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        if not args.no_figures:
            write_figures(res, out)
    return 0


def _safe(s: str) -> str:
    """Printable on any terminal encoding (a file name that is not UTF-8 is shown escaped)."""
    enc = getattr(sys.stdout, "encoding", None) or "utf-8"
    return s.encode(enc, "backslashreplace").decode(enc, "replace")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analyze", help="analyse logs/captures: components.csv, calls.csv, report.json, figures",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or directories, any mix of formats")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--proxy", default=None,
                   help="proxy ip:port (IPv6: [addr]:port) for captures, several comma-separated for several "
                        "hops, caller side first (default: found from the traffic)")
    p.add_argument("--strict", action="store_true",
                   help="fail on the first skipped record of any kind instead of counting it")
    p.add_argument("--offered", type=int, default=None, help="messages offered (PDR denominator)")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    eng = p.add_mutually_exclusive_group()
    eng.add_argument("--stream", action="store_true",
                     help="stream the capture (bounded memory; default for one capture of 64 MB or more, "
                          "or one ring buffer's files)")
    eng.add_argument("--in-memory", action="store_true", help="build the whole timeline in memory")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="ring buffer (dumpcap -b files): read its files on N local Dask workers "
                        "(default: a local cluster for 256 MB or more; 0: no Dask)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="ring buffer: read its files on this Dask cluster (e.g. tcp://10.0.0.5:8786); "
                        "its workers need sipperf installed and the files at the same paths")
    p.add_argument("--progress", action="store_true", help="show a progress bar (Dask)")
    p.set_defaults(func=_run)
