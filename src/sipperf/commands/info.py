"""``sipperf info``: versions and what this machine offers the lab (tshark, kamailio, sipp, tracefs).

The library behind it: :func:`sipperf.lab.machine.machine_info`.
"""
from __future__ import annotations

import argparse
import json


def _run(args: argparse.Namespace) -> int:
    from sipperf.lab.machine import machine_info

    print(json.dumps(machine_info(), indent=2))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="print versions and the lab tools this machine has (JSON)")
    p.set_defaults(func=_run)
