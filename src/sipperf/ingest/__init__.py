"""Ingest: every source format -> the tidy timeline, with an account of every input record.

:func:`load` takes files and/or directories in any mix of formats and detects each file's
format from its content (never its name; a gzip file by its decompressed content):

=====================================  ==================================================
content                                reader
=====================================  ==================================================
pcap / pcapng magic number             :func:`sipperf.ingest.capture.read_capture`
                                       (``proxy=``; any vantage point)
directory with meta.json source "lab"  :func:`sipperf.ingest.lab_run.read_run`
directory with meta.json source "sim"  its ``timeline.parquet`` / ``timeline.csv`` (tidy)
thesis-format OpenSIPS syslog          :func:`sipperf.ingest.thesis_log.read_thesis_log`
tidy CSV (header with call_id, kind)   :func:`sipperf.ingest.tidy.read_tidy`
or Parquet (PAR1 magic)
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
sequence numbers, :func:`sipperf.ingest.capture.read_capture_set`), so calls that span a file
boundary pair as in the merged capture.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import stat
import zlib
from pathlib import Path
from typing import Iterable

import pandas as pd

from sipperf.timeline import IngestError, IngestReport, make_timeline

PCAP_MAGICS = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d",
               b"\x0a\x0d\x0d\x0a")
GZIP_MAGIC = b"\x1f\x8b"
SNIFF_BYTES = 64 * 1024

__all__ = ["load", "sniff", "IngestError", "IngestReport", "display_path", "capture_sets"]

#: dumpcap's ring-buffer file names: PREFIX_NNNNN_YYYYmmddHHMMSS.EXT
RING_NAME = re.compile(r"^(?P<prefix>.+)_(?P<seq>\d{5,})_(?P<ts>\d{14})(?P<ext>\.[A-Za-z0-9]+(?:\.gz)?)$")


def capture_sets(items: list[tuple[Path, str]]) -> list[tuple[object, str]]:
    """``items`` ((path, kind) from the walk) with the files of each ring buffer (two or more
    captures in one directory named ``PREFIX_NNNNN_YYYYmmddHHMMSS.EXT`` with one PREFIX and
    extension) replaced by one item ``(sorted list of paths, "pcap-set")`` at the place of
    its first file."""
    groups: dict[tuple, list[Path]] = {}
    for p, kind in items:
        m = RING_NAME.match(p.name) if kind == "pcap" else None
        if m:
            groups.setdefault((str(p.parent), m["prefix"], m["ext"]), []).append(p)
    sets = {k: sorted(v, key=lambda q: int(RING_NAME.match(q.name)["seq"])) for k, v in groups.items() if len(v) > 1}
    member = {q: k for k, v in sets.items() for q in v}
    out: list[tuple[object, str]] = []
    done = set()
    for p, kind in items:
        k = member.get(p)
        if k is None:
            out.append((p, kind))
        elif k not in done:
            done.add(k)
            out.append((sets[k], "pcap-set"))
    return out


def set_label(files: list[Path]) -> tuple[str, str]:
    """(label shown in reports, run_id) of a ring buffer's files."""
    m = RING_NAME.match(files[0].name)
    prefix, ext = (m["prefix"], m["ext"]) if m else (files[0].stem, files[0].suffix)
    return display_path(files[0].parent / f"{prefix}_*{ext}"), display_path(prefix)


def display_path(p) -> str:
    """A file name fit to print and to put in JSON: bytes that are not UTF-8 shown as \\xNN."""
    return os.fsencode(os.fspath(p)).decode("utf-8", "backslashreplace")


def _regular(p: Path) -> os.stat_result:
    """stat() of a path that must be a regular file or a directory (a FIFO would block a read)."""
    try:
        st = p.stat()
    except OSError as e:
        raise IngestError(display_path(p), "path", e.strerror or str(e)) from None
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        what = ("a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a regular file")
        raise IngestError(display_path(p), "path", f"{what}: give a file (save the stream to a file first)")
    return st


def read_head(p: Path, n: int = SNIFF_BYTES) -> bytes:
    """The first ``n`` bytes of a file, decompressed if it is gzip; errors as IngestError."""
    try:
        with open(p, "rb") as fh:
            head = fh.read(n)
        if head[:2] == GZIP_MAGIC:
            with gzip.open(p, "rb") as fh:
                head = fh.read(n)
    except (OSError, EOFError, zlib.error) as e:
        raise IngestError(display_path(p), "byte 0", f"cannot read: {getattr(e, 'strerror', None) or e}") from None
    return head


def meta_source(d: Path) -> str | None:
    """The ``source`` of a run directory's meta.json: None if there is none, ``"bad_meta"`` if
    meta.json is not a JSON object (unreadable, invalid JSON, a list ...)."""
    meta = d / "meta.json"
    if not meta.is_file():
        return None
    try:
        m = json.loads(meta.read_bytes())
    except (ValueError, OSError):
        return "bad_meta"
    return m.get("source") if isinstance(m, dict) else "bad_meta"


def sniff(path: str | os.PathLike) -> str:
    """Format of one file or directory: pcap, lab, sim, thesis_log, tidy, dir or unknown.

    A gzip file is judged by its decompressed content.  The first 64 KiB decide for captures,
    Parquet and CSV headers; a thesis-format log is also recognised when its first
    instrumentation line comes later (a syslog full of other daemons' lines first).
    """
    p = Path(path)
    st = _regular(p)
    if stat.S_ISDIR(st.st_mode):
        src = meta_source(p)
        return src if src in ("lab", "sim", "bad_meta") else "dir"
    head = read_head(p)
    if head[:4] in PCAP_MAGICS:
        return "pcap"
    from sipperf.ingest import thesis_log, tidy

    if tidy.sniff(head):
        return "tidy"
    if thesis_log.sniff(head):
        return "thesis_log"
    if len(head) >= SNIFF_BYTES and thesis_log.sniff_file(p):
        return "thesis_log"
    return "unknown"


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


def _expand(paths: Iterable[str | os.PathLike]) -> list[tuple[Path, str]]:
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

    ``proxy`` is passed to the capture reader (:func:`sipperf.ingest.capture.read_capture`);
    other keyword arguments go to every reader that accepts them (e.g. ``run_id``).  Raises
    :class:`IngestError` when nothing usable was found.  ``strict``: the first skip of any kind
    (a bad line, a non-SIP packet, a file of unknown format) is an error.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = list(paths)
    items = capture_sets(_expand(paths))
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
        from sipperf.ingest.capture import read_capture
        return read_capture(p, proxy=proxy, strict=strict,
                            **{k: v for k, v in kw.items() if k in ("run_id", "engine")})
    if kind == "pcap-set":
        from sipperf.ingest.capture import read_capture_set
        return read_capture_set(p, proxy=proxy, strict=strict,
                                **{k: v for k, v in kw.items() if k in ("run_id", "engine")})
    if kind == "lab":
        if (p / "capture.pcapng").exists() or (p / "capture.pcapng.gz").exists():
            from sipperf.ingest.lab_run import read_run
            return read_run(p)
        # a stored dataset run (the joined timeline), or a summary-only point (a clear error)
        from sipperf.ingest.lab_dataset import load_run
        return load_run(p)
    if kind == "sim":
        return _sim_dir(p, strict=strict, **kw)
    if kind == "thesis_log":
        from sipperf.ingest.thesis_log import read_thesis_log
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
