"""Ingest: every source format -> the tidy timeline, with an account of every input record.

:func:`load` takes files and/or directories in any mix of formats and detects each file's
format from its content (never its name; a gzip file by its decompressed content):

=====================================  ==================================================
content                                reader
=====================================  ==================================================
pcap / pcapng magic number             :func:`sipperf.ingest.capture.read.read_capture`
                                       (``proxy=``; any vantage point)
directory with meta.json source "lab"  :func:`sipperf.ingest.lab_runs.run.read_run`
directory with meta.json source "sim"  its ``timeline.parquet`` / ``timeline.csv`` (tidy)
thesis-format OpenSIPS syslog          :func:`sipperf.ingest.thesis_logs.read.read_thesis_log`
tidy CSV (header with call_id, kind)   :func:`sipperf.ingest.tidy.read_tidy`
or Parquet (PAR1 magic)
TLS key log (SSLKEYLOGFILE lines)      not a source: its secrets decrypt the SIP over TLS
                                       of every capture given with it
                                       (:mod:`sipperf.ingest.capture.tls`)
=====================================  ==================================================

Other directories are walked (sorted, recursively; hidden files ignored).  A file of unknown
format, an unreadable file, a FIFO or a run directory whose meta.json is not a JSON object met
in a walk is a counted skip (one record per file, with its reason) or, with ``strict=True``,
an :class:`~sipperf.timeline.IngestError`; given directly, a FIFO, socket or device is an
error at once (reading it would block).  The combined report keeps one report per input
file in ``report.files``.  File names that are not UTF-8 are shown with ``\\xNN`` escapes.

**Ring buffers.**  Two or more captures in one directory (or given together) named as
``dumpcap -b`` names its files, ``PREFIX_NNNNN_YYYYmmddHHMMSS.EXT`` with one PREFIX, are one
capture cut into files: they are read as one (:func:`capture_sets`, in the order of their
sequence numbers, :func:`sipperf.ingest.capture.read.read_capture_set`), so calls that span a file
boundary pair as in the merged capture.
"""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Iterable

import pandas as pd

from sipperf.ingest.paths import (GZIP_MAGIC, PCAP_MAGICS, RING_NAME, SNIFF_BYTES, capture_sets, display_path,
                                  meta_source, read_head, regular, repeat_notes, set_label, unique_inputs)
from sipperf.timeline import IngestError, IngestReport, make_timeline

__all__ = ["load", "sniff", "expand", "IngestError", "IngestReport", "display_path", "capture_sets",
           "unique_inputs"]


def sniff(path: str | os.PathLike) -> str:
    """Format of one file or directory: pcap, lab, sim, thesis_log, tidy, dir or unknown.

    A compressed file (gzip, xz, bzip2, zstd) is judged by its decompressed content; an archive
    (zip, 7-Zip, RAR) or another compressor's file is ``"error:..."`` naming it.  The first 64 KiB decide for captures,
    Parquet and CSV headers; a thesis-format log is also recognised when its first
    instrumentation line comes later (a syslog full of other daemons' lines first).
    """
    p = Path(path)
    st = regular(p)
    if stat.S_ISDIR(st.st_mode):
        src = meta_source(p)
        return src if src in ("lab", "sim", "bad_meta") else "dir"
    from sipperf.ingest import compression

    why = compression.refused(_raw_head(p))
    if why is not None:
        return "error:" + why
    head = read_head(p)
    if not head and compression.kind(_raw_head(p)):
        return (f"error:{compression.kind(_raw_head(p))} data that decompresses to nothing "
                "(cut short or corrupt before its first block)")
    if head[:4] in PCAP_MAGICS:
        return "pcap"
    from sipperf.ingest import tidy
    from sipperf.ingest.thesis_logs import read as thesis_log

    if tidy.sniff(head):
        return "tidy"
    if thesis_log.sniff(head):
        return "thesis_log"
    if len(head) >= SNIFF_BYTES and thesis_log.sniff_file(p):
        return "thesis_log"
    from sipperf.ingest.capture.tls import sniff_keylog
    if sniff_keylog(head):
        return "tls_keylog"
    return "unknown"


def _raw_head(p: Path) -> bytes:
    try:
        with open(p, "rb") as fh:
            return fh.read(8)
    except OSError as e:
        raise IngestError(display_path(p), "byte 0", f"cannot read: {e.strerror or e}") from None


def _sim_dir(d: Path, **kw) -> tuple[pd.DataFrame, IngestReport]:
    from sipperf.ingest.tidy import read_tidy

    for name in ("timeline.parquet", "timeline.csv"):
        if (d / name).is_file():
            meta = json.loads((d / "meta.json").read_text(errors="replace"))
            tl, rep = read_tidy(d / name, run_id=kw.get("run_id") or meta.get("run_id") or d.name,
                                strict=kw.get("strict", False))
            rep.source = "sim"
            rep.notes.append("simulated data (SimPy model)")
            return tl, rep
    raise IngestError(display_path(d), "directory", "sim output without timeline.parquet or timeline.csv")


def expand(paths: Iterable[str | os.PathLike]) -> list[tuple[Path, str]]:
    out: list[tuple[Path, str]] = []
    for p in paths:
        p = Path(p)
        if not os.path.lexists(p):
            raise IngestError(display_path(p), "path", "no such file or directory")
        kind = sniff(p)
        if kind == "dir":
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                rp = Path(root)
                for d in list(dirs):
                    k = _sniff_soft(rp / d)
                    if k in ("lab", "sim", "bad_meta"):
                        out.append((rp / d, k))
                        dirs.remove(d)
                for f in sorted(files):
                    if not f.startswith("."):
                        out.append((rp / f, _sniff_soft(rp / f)))
        else:
            out.append((p, kind))
    return out


def _sniff_soft(p: Path) -> str:
    """:func:`sniff` inside a directory walk: a FIFO or unreadable file is a counted skip."""
    try:
        return sniff(p)
    except IngestError as e:
        return "error:" + str(e).split(": ", 2)[-1]


def load(paths, *, strict: bool = False, proxy=None, **kw) -> tuple[pd.DataFrame, IngestReport]:
    """Read files and directories (any mix of formats) into one timeline and a combined report.

    ``proxy`` is passed to the capture reader (:func:`sipperf.ingest.capture.read.read_capture`);
    other keyword arguments go to every reader that accepts them (e.g. ``run_id``).  Raises
    :class:`IngestError` when nothing usable was found.  ``strict``: the first skip of any kind
    (a bad line, a non-SIP packet, a file of unknown format) is an error.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = list(paths)
    unique, repeated = unique_inputs(expand(paths))
    keylogs = [q for q, k in unique if k == "tls_keylog"]
    items = capture_sets([(q, k) for q, k in unique if k != "tls_keylog"])
    if keylogs:
        kw["tls_keys"] = keylogs
    if not items:
        raise IngestError(";".join(display_path(p) for p in paths), "path", "no input files")
    frames, reports = [], []
    for p, kind in items:
        tl, rep = _read_one(p, kind, strict=strict, proxy=proxy, **kw)
        if tl is not None:
            frames.append(tl)
        rep.path = display_path(rep.path or (p if kind != "pcap-set" else set_label(p)[0]))
        reports.append(rep)
    report = IngestReport.combine(reports)
    if len(reports) == 1:
        report.details = dict(reports[0].details)
    if keylogs:
        report.details["tls_key_logs"] = [display_path(q) for q in keylogs]
        if not any("tls" in r.details.get("transports", {}) for r in reports):
            report.notes.append(f"TLS key log(s) {', '.join(display_path(q) for q in keylogs)} given, "
                                "but no capture among the inputs carries SIP over TLS")
    if repeated:
        report.details["repeated_inputs"] = repeated
        report.notes.extend(repeat_notes(repeated))
    if not frames or not sum(len(f) for f in frames):
        raise IngestError(report.path, "input", f"no usable messages ({dict(report.skipped) or 'empty'})")
    if len(frames) == 1:
        tl = frames[0]
    else:
        tl = pd.concat(frames, ignore_index=True)
        tl = make_timeline(tl)
    return tl, report.check()


def _read_one(p: Path, kind: str, *, strict: bool, proxy, **kw):
    """(timeline or None, report) of one input."""
    if kind == "pcap":
        from sipperf.ingest.capture.read import read_capture
        return read_capture(p, proxy=proxy, strict=strict,
                            **{k: v for k, v in kw.items() if k in ("run_id", "engine", "tls_keys")})
    if kind == "pcap-set":
        from sipperf.ingest.capture.read import read_capture_set
        return read_capture_set(p, proxy=proxy, strict=strict,
                                **{k: v for k, v in kw.items() if k in ("run_id", "engine", "tls_keys")})
    if kind == "lab":
        if (p / "capture.pcapng").exists() or (p / "capture.pcapng.gz").exists():
            from sipperf.ingest.lab_runs.run import read_run
            return read_run(p)
        # a stored dataset run (the joined timeline), or a summary-only point (a clear error)
        from sipperf.ingest.lab_runs.dataset import load_run
        return load_run(p)
    if kind == "sim":
        return _sim_dir(p, strict=strict, **kw)
    if kind == "thesis_log":
        from sipperf.ingest.thesis_logs.read import read_thesis_log
        return read_thesis_log(p, strict=strict, **{k: v for k, v in kw.items() if k in ("run_id", "progress")})
    if kind == "tidy":
        from sipperf.ingest.tidy import read_tidy
        return read_tidy(p, strict=strict, **{k: v for k, v in kw.items() if k == "run_id"})
    if kind == "bad_meta":
        kind = "error:meta.json is not a JSON object (a sipperf lab or sim run directory needs " \
               "meta.json = {\"source\": \"lab\" or \"sim\", ...})"
        p = p / "meta.json"
    if kind.startswith("error:"):
        why = kind[len("error:"):]
        if strict:
            raise IngestError(display_path(p), "path", why)
        rep = IngestReport(source="unreadable", path=str(p), read=1)
        rep.skip(f"unreadable: {why}")
        return None, rep
    if strict:
        raise IngestError(display_path(p), "file", "unknown format (not pcap/pcapng, thesis log, tidy CSV/Parquet, "
                                                    "lab or sim run directory)")
    rep = IngestReport(source="unknown", path=str(p), read=1)
    rep.skip("unknown format")
    return None, rep
