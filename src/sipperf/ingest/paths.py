"""Paths, names and first bytes of the inputs: what every reader needs before it reads.

Kept apart from :mod:`sipperf.ingest` (the dispatcher) so that the readers can use these
helpers without importing the dispatcher that imports them.
"""
from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

from sipperf.timeline import IngestError

PCAP_MAGICS = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d",
               b"\x0a\x0d\x0d\x0a")
GZIP_MAGIC = b"\x1f\x8b"
SNIFF_BYTES = 64 * 1024

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


def regular(p: Path) -> os.stat_result:
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
    """The first ``n`` bytes of a file, decompressed if it is gzip, xz, bzip2 or zstd (fewer when
    the stream is cut short or corrupt: the reader then says where); errors as IngestError."""
    from sipperf.ingest.compression import read_head as _head
    try:
        return _head(p, n)[0]
    except OSError as e:
        raise IngestError(display_path(p), "byte 0", f"cannot read: {e.strerror or e}") from None


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


def unique_inputs(items: list[tuple[Path, str]]) -> tuple[list[tuple[Path, str]], list[dict]]:
    """``items`` (path, kind) without repeats: the same file given twice (by any path: links,
    ``./x`` and ``x``) or a file whose bytes are those of one given before (a copy) is read once.
    Returns (the items kept, one record per item left out: ``path``, ``same_as``, ``why``)."""
    import hashlib

    kept: list[tuple[Path, str]] = []
    dropped: list[dict] = []
    real: dict[str, Path] = {}
    by_size: dict[int, list[Path]] = {}
    digests: dict[Path, str] = {}

    def digest(q: Path) -> str:
        if q not in digests:
            h = hashlib.sha256()
            with open(q, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            digests[q] = h.hexdigest()
        return digests[q]

    for p, kind in items:
        rp = os.path.realpath(p)
        if rp in real:
            dropped.append({"path": display_path(p), "same_as": display_path(real[rp]), "why": "the same file"})
            continue
        real[rp] = p
        try:
            size = p.stat().st_size if p.is_file() else None
        except OSError:
            size = None
        if size is not None and size > 0:
            twin = None
            try:
                twin = next((q for q in by_size.get(size, []) if digest(q) == digest(p)), None)
            except OSError:
                twin = None
            if twin is not None:
                dropped.append({"path": display_path(p), "same_as": display_path(twin),
                                "why": "the same bytes (a copy)"})
                continue
            by_size.setdefault(size, []).append(p)
        kept.append((p, kind))
    return kept, dropped


def repeat_notes(dropped: list[dict]) -> list[str]:
    """One note per input left out by :func:`unique_inputs`."""
    return [f"{d['path']}: {d['why']} as {d['same_as']}, given again: read once, not counted twice"
            for d in dropped]
