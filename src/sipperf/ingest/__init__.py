"""Ingest: every source format -> the tidy timeline, with an account of every input record.

:func:`load` takes files and/or directories in any mix of formats and detects each file's
format from its content (never its name):

=====================================  ==================================================
content                                reader
=====================================  ==================================================
pcap / pcapng magic number             :func:`sipperf.ingest.pcap.read_pcap` (``proxy=``)
directory with meta.json source "lab"  :func:`sipperf.ingest.lab_run.read_run`
directory with meta.json source "sim"  its ``timeline.parquet`` / ``timeline.csv`` (tidy)
thesis-format OpenSIPS syslog          :func:`sipperf.ingest.thesis_log.read_thesis_log`
tidy CSV (header with call_id, kind)   :func:`sipperf.ingest.tidy.read_tidy`
or Parquet (PAR1 magic)
=====================================  ==================================================

Other directories are walked (sorted, recursively; hidden files ignored).  A file of unknown
format is a counted skip (reason "unknown format", one record per file) or, with
``strict=True``, an :class:`~sipperf.timeline.IngestError`.  The combined report keeps one
report per input file in ``report.files``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

import pandas as pd

from sipperf.timeline import IngestError, IngestReport, empty, make_timeline

PCAP_MAGICS = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d",
               b"\x0a\x0d\x0d\x0a")
SNIFF_BYTES = 64 * 1024

__all__ = ["load", "sniff", "IngestError", "IngestReport"]


def sniff(path: str | os.PathLike) -> str:
    """Format of one file or directory: pcap, lab, sim, thesis_log, tidy, or unknown."""
    p = Path(path)
    if p.is_dir():
        meta = p / "meta.json"
        if meta.is_file():
            try:
                src = json.loads(meta.read_text()).get("source")
            except (ValueError, OSError):
                src = None
            if src in ("lab", "sim"):
                return src
        return "dir"
    with open(p, "rb") as fh:
        head = fh.read(SNIFF_BYTES)
    if head[:4] in PCAP_MAGICS:
        return "pcap"
    from sipperf.ingest import thesis_log, tidy

    if tidy.sniff(head):
        return "tidy"
    if thesis_log.sniff(head):
        return "thesis_log"
    return "unknown"


def _sim_dir(d: Path, **kw) -> tuple[pd.DataFrame, IngestReport]:
    from sipperf.ingest.tidy import read_tidy

    for name in ("timeline.parquet", "timeline.csv"):
        if (d / name).is_file():
            meta = json.loads((d / "meta.json").read_text())
            tl, rep = read_tidy(d / name, run_id=kw.get("run_id") or meta.get("run_id") or d.name)
            rep.source = "sim"
            rep.notes.append("simulated data (SimPy model)")
            return tl, rep
    raise IngestError(d, "directory", "sim output without timeline.parquet or timeline.csv")


def _expand(paths: Iterable[str | os.PathLike]) -> list[tuple[Path, str]]:
    out: list[tuple[Path, str]] = []
    for p in paths:
        p = Path(p)
        if not p.exists():
            raise IngestError(p, "path", "no such file or directory")
        kind = sniff(p)
        if kind == "dir":
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                rp = Path(root)
                for d in list(dirs):
                    k = sniff(rp / d)
                    if k in ("lab", "sim"):
                        out.append((rp / d, k))
                        dirs.remove(d)
                for f in sorted(files):
                    if not f.startswith("."):
                        out.append((rp / f, sniff(rp / f)))
        else:
            out.append((p, kind))
    return out


def load(paths, *, strict: bool = False, proxy=None, **kw) -> tuple[pd.DataFrame, IngestReport]:
    """Read files and directories (any mix of formats) into one timeline and a combined report.

    ``proxy`` is passed to the pcap reader; other keyword arguments go to every reader that
    accepts them (e.g. ``run_id``).  Raises :class:`IngestError` when nothing usable was found.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    items = _expand(paths)
    if not items:
        raise IngestError(";".join(map(str, paths)), "path", "no input files")
    frames, reports = [], []
    for p, kind in items:
        if kind == "pcap":
            from sipperf.ingest.pcap import read_pcap
            tl, rep = read_pcap(p, proxy=proxy)
        elif kind == "lab":
            if (p / "capture.pcapng").exists() or (p / "capture.pcapng.gz").exists() or not (p / "timeline.parquet").exists():
                from sipperf.ingest.lab_run import read_run
                tl, rep = read_run(p)
            else:  # a stored dataset run: the joined timeline without the raw files
                from sipperf.ingest.lab_dataset import load_run
                tl, rep = load_run(p)
        elif kind == "sim":
            tl, rep = _sim_dir(p, **kw)
        elif kind == "thesis_log":
            from sipperf.ingest.thesis_log import read_thesis_log
            tl, rep = read_thesis_log(p, strict=strict, **{k: v for k, v in kw.items() if k in ("run_id", "progress")})
        elif kind == "tidy":
            from sipperf.ingest.tidy import read_tidy
            tl, rep = read_tidy(p, strict=strict, **{k: v for k, v in kw.items() if k == "run_id"})
        else:
            if strict:
                raise IngestError(p, "file", "unknown format (not pcap/pcapng, thesis log, tidy CSV/Parquet, "
                                              "lab or sim run directory)")
            rep = IngestReport(source="unknown", path=str(p), read=1)
            rep.skip("unknown format")
            reports.append(rep)
            continue
        frames.append(tl)
        reports.append(rep)
    report = IngestReport.combine(reports)
    if not frames or not sum(len(f) for f in frames):
        raise IngestError(report.path, "input", f"no usable messages ({dict(report.skipped) or 'empty'})")
    if len(frames) == 1:
        tl = frames[0]
    else:
        tl = pd.concat(frames, ignore_index=True)
        tl = make_timeline(tl)
    return tl, report.check()
