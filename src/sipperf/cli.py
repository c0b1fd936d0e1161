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


#: the optional packages and the extra that installs each (pyproject.toml [project.optional-dependencies])
EXTRAS = {
    "dask": "distributed", "distributed": "distributed",
    "pyshark": "lab", "dpkt": "lab",
    "ipywidgets": "book", "IPython": "book", "seaborn": "book", "jupyter_book": "book", "papermill": "book",
    "jupytext": "book", "nest_asyncio": "book",
}


def missing_extra(e: ModuleNotFoundError) -> str | None:
    """The one-line message for an optional package that is not installed, or None when the missing
    module is not one of the extras' (a broken installation, said as such by the caller)."""
    top = (e.name or "").split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return None
    return f"this needs the optional package {top!r}, which is not installed: pip install 'sipperf[{extra}]'"


def first_use_note(command: str) -> str | None:
    """The line said before a command whose first capture compiles the capture reader (numba, once
    per installation; ``make setup`` does it ahead with ``python -m sipperf.warm``)."""
    if command not in ("analyze", "report", "fit"):
        return None
    try:
        from sipperf.ingest.capture import scan
        from sipperf.ingest.capture.scan.cache import compile_pending
    except ModuleNotFoundError:
        return None
    if not compile_pending(scan.records.scan):
        return None
    return (f"sipperf {command}: first capture read since install: the compiled capture reader is being built "
            "into its cache (once, about 3 minutes on 2 cores; later runs start at once)")


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
    note = first_use_note(args.command)
    if note:
        print(note, file=sys.stderr, flush=True)
    try:
        return int(args.func(args) or 0)
    except ModuleNotFoundError as e:
        msg = missing_extra(e) or (f"the package {e.name!r} is missing: the installation is incomplete "
                                   "(pip install --force-reinstall sipperf)")
        print(f"sipperf {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError, RuntimeError) as e:  # clear message, non-zero exit
        print(f"sipperf {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
