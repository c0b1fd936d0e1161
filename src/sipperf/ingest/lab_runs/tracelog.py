"""Read the lab tracer's log (``trace.log`` from ``sipperf/lab/sipperf.bt``) into one table per record kind.

Two layouts carry the same records (see the header of ``sipperf.bt`` for their fields):

* ``print`` mode, one line per event: ``K cpu t a b c``
* ``map`` mode, one map entry per event, dumped at exit: ``@K[cpu, t]: (a, b, c)``

``hist`` mode leaves only counts (``@n_K: 12``) and histograms: no records, every line skipped
with its reason.  Times ``t`` are ns of CLOCK_MONOTONIC (bpftrace ``nsecs``); ``tstamp`` /
``key`` are ``skb->tstamp``, ns of CLOCK_REALTIME.
"""
from __future__ import annotations

import gzip
import zlib
import re
from pathlib import Path

import numpy as np
import pandas as pd

from sipperf.timeline import IngestError, IngestReport

#: kind -> column names after (cpu, t)
FIELDS: dict[str, tuple[str, ...]] = {
    "R": ("tstamp", "sport", "len", "tid"),
    "Q": ("key", "tid"),
    "D": ("key", "rc"),
    "B": ("key", "rmem", "rcvbuf"),
    "F": ("tid", "enter", "copied", "ret"),
    "S": ("tid", "enter", "len", "ret"),
    "T": ("tstamp", "dport", "len", "tid"),
    "W": ("pid", "target_cpu"),
    "C": ("prev_pid", "next_pid", "prev_state"),
}
_TRANS = str.maketrans({c: " " for c in "@[],:()"})
_COUNT = re.compile(r"^@n_(\w+):\s*(\d+)\s*$")


def open_text(path: Path):
    """Open a (possibly gzipped) text log; an unreadable file raises :class:`IngestError`."""
    path = Path(path)
    try:
        if path.suffix == ".gz":
            return gzip.open(path, "rt", errors="replace")
        return open(path, errors="replace")
    except OSError as e:
        raise IngestError(path, "open", str(e)) from e


def iter_lines(path: Path):
    """(line number, line) of a (possibly gzipped) text log; a read error (corrupt gzip, I/O)
    raises :class:`IngestError` naming the file and the line."""
    lineno = 0
    try:
        with open_text(path) as fh:
            for lineno, line in enumerate(fh, 1):
                yield lineno, line
    except (OSError, EOFError, zlib.error) as e:
        raise IngestError(path, f"line {lineno + 1}", f"cannot read: {e}") from None


def read_tracelog(path: str | Path) -> tuple[dict[str, pd.DataFrame], IngestReport]:
    """Parse a tracer log: ``({kind: DataFrame[cpu, t, ...]}, report)``.

    Every line is either a record (parsed) or skipped by reason: ``blank``, ``banner``
    (bpftrace's "Attaching N probes"), ``lost events``, ``aggregate`` (hist-mode counts and
    histograms), ``malformed`` (a record with the wrong number of fields).  Lost events are
    added to ``report.notes``.
    """
    path = Path(path)
    report = IngestReport(source="lab-trace", path=str(path))
    rows: dict[str, list[list[int]]] = {k: [] for k in FIELDS}
    counts: dict[str, int] = {}
    lost = 0
    for lineno, line in iter_lines(path):
        report.read += 1
        s = line.strip()
        if not s:
            report.skip("blank")
            continue
        if s.startswith("Attaching") or s.startswith("ERROR: Unknown error -1"):
            report.skip("banner")
            continue
        if s.startswith("Lost ") and "events" in s:
            report.skip("lost events")
            m = re.search(r"Lost (\d+)", s)
            lost += int(m.group(1)) if m else 0
            continue
        m = _COUNT.match(s)
        if m:
            counts[m.group(1)] = int(m.group(2))
            report.skip("aggregate")
            continue
        f = s.translate(_TRANS).split()
        kind = f[0] if f else ""
        if kind not in FIELDS:
            report.skip("aggregate" if s.startswith(("@", "[")) else "unknown line")
            continue
        if len(f) != 3 + len(FIELDS[kind]):
            report.skip("malformed")
            continue
        try:
            rows[kind].append([int(x) for x in f[1:]])
        except ValueError:
            report.skip("malformed")
            continue
        report.parsed += 1
    tables = {}
    for k, cols in FIELDS.items():
        names = ["cpu", "t", *cols]
        arr = np.array(rows[k], dtype="int64").reshape(-1, len(names))
        df = pd.DataFrame(arr, columns=names)
        tables[k] = df.sort_values(["t", "cpu"], kind="stable").reset_index(drop=True)
    if lost:
        report.notes.append(f"bpftrace lost {lost} events (perf ring buffer overrun)")
    if counts:
        report.notes.append("hist-mode counts: " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    report.messages = int(sum(len(t) for t in tables.values()))
    return tables, report.check()
