"""Read the lab proxy's xlog lines (``proxy.log``, Kamailio stderr) into a table.

The lab config (``sipperf/lab/kamailio.cfg``) writes, per SIP message, lines like::

    1(16050) NOTICE: <script>: SIPPERF|in|1795290835.809706|16050|1-16099@127.0.0.1|1|INVITE|0|127.0.0.1|5061|447

fields after ``SIPPERF|``: tag (``in`` script entry, ``c`` common processing done, ``out``
onsend_route, just before sendto), wall clock ``sec.usec`` ($TV(Sn), not cached), pid, Call-ID,
CSeq number, method (the CSeq method for replies), status (0 for requests), peer address,
peer port (the sender for in/c, the destination for out) and message length in bytes.
Every other line of the log is skipped as ``other proxy output``.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from sipperf.timeline import IngestError, IngestReport
from sipperf.ingest.lab_runs.tracelog import iter_lines

MARK = "SIPPERF|"
TAGS = ("in", "c", "out")
COLUMNS = ("line", "tag", "t_ns", "pid", "call_id", "cseq", "method", "status", "peer", "peer_port", "length")


def _clock_ns(s: str) -> int:
    sec, _, usec = s.partition(".")
    if not sec.isdigit() or not usec.isdigit() or len(usec) != 6:
        raise ValueError(s)
    return int(sec) * 1_000_000_000 + int(usec) * 1_000


def read_xlog(path: str | Path) -> tuple[pd.DataFrame, IngestReport]:
    """Parse the SIPPERF lines of a proxy log: ``(DataFrame[COLUMNS], report)``, in file order."""
    path = Path(path)
    report = IngestReport(source="lab-xlog", path=str(path))
    recs: list[tuple] = []
    for lineno, line in iter_lines(path):
        report.read += 1
        i = line.find(MARK)
        if i < 0:
            report.skip("other proxy output")
            continue
        f = line[i + len(MARK):].rstrip("\n").split("|")
        if len(f) != 10 or f[0] not in TAGS:
            report.skip("malformed xlog record")
            continue
        try:
            recs.append((lineno, f[0], _clock_ns(f[1]), int(f[2]), f[3], int(f[4]), f[5],
                         int(f[6]), f[7], int(f[8]), int(f[9])))
        except ValueError:
            report.skip("malformed xlog record")
            continue
        report.parsed += 1
    df = pd.DataFrame(recs, columns=list(COLUMNS))
    df = df.astype({"line": "int64", "tag": "string", "t_ns": "int64", "pid": "int64",
                    "call_id": "string", "cseq": "int64", "method": "string", "status": "int64",
                    "peer": "string", "peer_port": "int64", "length": "int64"})
    report.messages = len(df)
    return df, report.check()
