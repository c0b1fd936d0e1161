"""``sipperf info``: versions and what this machine offers the lab (tshark, kamailio, sipp, tracefs)."""
from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys


def machine_info() -> dict:
    import os

    import numpy
    import pandas

    from sipperf import __version__

    tools = {t: shutil.which(t) for t in ("tshark", "kamailio", "sipp", "bpftrace", "chromium")}
    return {
        "sipperf": __version__,
        "python": sys.version.split()[0],
        "numpy": numpy.__version__,
        "pandas": pandas.__version__,
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "tools": tools,
        "tracefs": os.path.isdir("/sys/kernel/tracing/events"),
        "root": hasattr(os, "geteuid") and os.geteuid() == 0,
    }


def _run(args: argparse.Namespace) -> int:
    print(json.dumps(machine_info(), indent=2))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="print versions and the lab tools this machine has (JSON)")
    p.set_defaults(func=_run)
