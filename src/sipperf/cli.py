"""The ``sipperf`` command.

Each subcommand lives in its own module in :mod:`sipperf.commands` and defines
``register(subparsers)``, which adds its parser and sets ``func`` (called with the parsed
arguments; returns the exit code).  Modules are discovered, so adding a command never
touches this file.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from sipperf import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sipperf",
        description="Measure, model and simulate the performance of a SIP proxy server.",
    )
    parser.add_argument("--version", action="version", version=f"sipperf {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    from sipperf import commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"sipperf.commands.{info.name}")
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, RuntimeError) as e:  # clear message, non-zero exit
        print(f"sipperf {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
