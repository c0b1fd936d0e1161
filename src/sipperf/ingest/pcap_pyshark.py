"""The pyshark (tshark) path: per-message SIP fields of a capture, as in the design card.

Same records as :mod:`sipperf.ingest.pcapfast` (columns :data:`pcapfast.COLUMNS`), slower
(~600 packets/s in pyshark's default mode) but dissected by Wireshark itself.

Traps handled here:

* timestamps come from ``sniff_timestamp`` (``frame.time_epoch``) parsed as a decimal string to
  exact ns — ``sniff_time`` drops the ns and is local time;
* tshark's SDP dissector is disabled (it makes many-call captures superlinearly slow);
* pyshark runs its own asyncio loop and fails with "This event loop is already running" inside
  Jupyter (and with "no current event loop" after an ``asyncio.run``); the read always runs in
  a worker thread with a fresh loop, so a notebook just calls :func:`read_packets`;
* a truncated capture makes tshark crash after the last good packet (TSharkCrashException):
  re-raised as :class:`IngestError` naming the packet; a file that is not a capture (pyshark
  silently yields nothing) is refused up front by its magic number.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import os
from pathlib import Path

import pandas as pd

from ..timeline import IngestError, IngestReport
from .pcapfast import COLUMNS, _to_frame, scan_structure

#: tshark options common to every mode
DISABLED_PROTOCOLS = "sdp"


def epoch_ns(stamp: str) -> int:
    """'1795290735.881107182' -> 1795290735881107182 exactly (no float rounding)."""
    sec, _, frac = str(stamp).partition(".")
    return int(sec) * 1_000_000_000 + int((frac + "000000000")[:9])


def run_outside_loop(fn, *args, **kwargs):
    """Call ``fn(..., eventloop=loop)`` in a worker thread with a fresh event loop of its own.

    Always, not only when the caller's thread runs a loop (Jupyter): after ``asyncio.run`` the
    main thread has no current loop either and pyshark's ``get_event_loop`` would fail."""

    def work():
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            return fn(*args, eventloop=loop, **kwargs)
        finally:
            loop.close()

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as ex:
        return ex.submit(work).result()


def _str(layer, name: str) -> str | None:
    f = layer.get_field(name)
    return None if f is None else str(f)


def _int(layer, name: str) -> int | None:
    f = layer.get_field(name)
    if f is None:
        return None
    try:
        return int(str(f))
    except ValueError:
        return None


def _start(layer) -> int | None:
    line = layer.get_field("Request-Line") or layer.get_field("Status-Line")
    return None if line is None else int(line.pos)


def _sip_size(layer, next_start: int | None = None) -> int | None:
    """Bytes of the SIP message: start line through headers (msg_hdr ends at the body) + body.

    With several messages in one TCP segment tshark's msg_hdr of a body-less message runs
    to the end of the segment: it is cut at the next message's start line."""
    start = _start(layer)
    hdr = layer.get_field("msg_hdr")
    if start is None or hdr is None:
        return None
    body = layer.get_field("msg_body")
    hend = int(hdr.pos) + int(hdr.size)
    if next_start is not None and body is None:
        hend = min(hend, next_start)
    return hend + (int(body.size) if body is not None else 0) - start


def _read(path: str, report: IngestReport, on_truncated: str, limit: int | None,
          decode_as: dict | None, eventloop=None) -> pd.DataFrame:
    import pyshark
    from pyshark.capture.capture import TSharkCrashException

    cols: dict[str, list] = {c: [] for c in COLUMNS}
    cap = pyshark.FileCapture(path, keep_packets=False, disable_protocol=DISABLED_PROTOCOLS,
                              decode_as=decode_as, eventloop=eventloop)
    last = 0
    try:
        for pkt in cap:
            if limit is not None and int(pkt.number) > limit:
                break  # tshark's reading of a truncated last record: counted by the caller
            report.read += 1
            last = int(pkt.number)
            sips = pkt.get_multiple_layers("sip")
            if not sips:
                report.skip("no SIP layer (tshark)")
                continue
            report.parsed += 1
            ts = epoch_ns(pkt.sniff_timestamp)
            if "ip" in pkt:
                src, dst = pkt.ip.src, pkt.ip.dst
            else:
                src, dst = pkt.ipv6.src, pkt.ipv6.dst
            tr = "udp" if "udp" in pkt else "tcp"
            l4 = pkt[tr]
            starts = [_start(s) for s in sips[1:]] + [None]
            for s, nxt in zip(sips, starts):
                cols["frame"].append(last)
                cols["ts_ns"].append(ts)
                cols["src"].append(str(src))
                cols["sport"].append(int(l4.srcport))
                cols["dst"].append(str(dst))
                cols["dport"].append(int(l4.dstport))
                cols["transport"].append(tr)
                cols["size"].append(_sip_size(s, nxt))
                cols["call_id"].append(_str(s, "Call-ID"))
                cols["cseq"].append(_int(s, "CSeq.seq"))
                cols["cseq_method"].append(_str(s, "CSeq.method"))
                cols["method"].append(_str(s, "Method"))
                cols["status"].append(_int(s, "Status-Code"))
                cols["via_branch"].append(_str(s, "Via.branch"))
    except TSharkCrashException as e:
        if on_truncated == "skip":
            report.read += 1
            report.skip("truncated record")
            report.notes.append(f"{path}: tshark stopped after packet {last}: {e}")
        else:
            raise IngestError(path, f"packet {last + 1}",
                              f"tshark failed after packet {last} (truncated or corrupt capture): "
                              f"{str(e).strip()[:200]}") from e
    finally:
        try:
            cap.close()
        except Exception:  # the crash may surface again at close; already reported above
            pass
        # pyshark's __del__ would close again at garbage collection, on a loop that may be gone
        if hasattr(cap, "_running_processes"):
            cap._running_processes.clear()
    return _to_frame(cols)


def read_packets(path: str | os.PathLike, *, on_truncated: str = "raise",
                 decode_as: dict[str, str] | None = None) -> tuple[pd.DataFrame, IngestReport]:
    """All SIP messages of a capture via pyshark, one row each, and the account.

    Works from plain Python and from inside a running event loop (Jupyter).  SIP on
    non-standard ports is found by tshark's heuristic dissector; for SIP over TCP whose messages
    span segments on such ports, name them, e.g. ``decode_as={"tcp.port==15062": "sip"}``
    (the heuristic cannot ask for TCP reassembly).
    """
    path = Path(path)
    if not path.exists():
        raise IngestError(path, "open", "no such file")
    # pyshark silently yields 0 packets for non-captures, and tshark reports a truncated
    # capture only sometimes (TSharkCrashException, or at garbage collection): check first
    n_ok, problem = scan_structure(path)
    if problem is not None and on_truncated != "skip":
        raise IngestError(path, f"packet {n_ok + 1}", f"truncated capture: {problem}")
    report = IngestReport(source="pcap-pyshark", path=str(path))
    df = run_outside_loop(_read, str(path), report, on_truncated,
                          n_ok if problem is not None else None, decode_as)
    if problem is not None and "truncated record" not in report.skipped:
        report.read += 1
        report.skip("truncated record")
        report.notes.append(f"{path}: stopped after packet {n_ok}: {problem}")
    report.messages = len(df)
    report.check()
    return df, report
