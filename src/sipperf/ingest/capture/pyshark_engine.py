"""The pyshark (tshark) path: per-message SIP fields of a capture, as in the design card.

Same records as :mod:`sipperf.ingest.capture.fast` (columns :data:`fast.COLUMNS`), slower
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
  silently yields nothing) is refused up front by its magic number;
* TCP segments captured out of order are reassembled by sequence number
  (``tcp.reassemble_out_of_order``, off by default in Wireshark 4.0): as the bulk reader does;
* SIP over WebSocket is dissected after the HTTP Upgrade (transport ``ws``); HEP, which tshark
  4.0 does not know, is decoded by :mod:`sipperf.ingest.capture.hep` from the UDP payload.

Known differences, where the bulk reader is the reference: tshark reads only the first SIP
message of a WebSocket message that holds several, and when one WebSocket message or one
out-of-order TCP segment completes several SIP messages its ``msg_hdr`` runs past the first
one's header block, so the size column is not reliable there.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import os
from pathlib import Path

import pandas as pd

from sipperf.timeline import IngestError, IngestReport
from sipperf.ingest.capture import hep as hepmod
from sipperf.ingest.capture import sipmsg
from sipperf.ingest.capture.fast import COLUMNS, _to_frame, scan_structure

#: tshark options common to every mode
DISABLED_PROTOCOLS = "sdp"
PREFS = {"tcp.reassemble_out_of_order": "TRUE"}
#: skip reasons shared with the bulk reader
TRUNCATED, CORRUPT = "truncated record", "corrupt record"
NO_TIMESTAMP = "pcapng simple packet block (no timestamp)"


def epoch_ns(stamp: str) -> int:
    """'1795290735.881107182' -> 1795290735881107182 exactly (no float rounding)."""
    sec, _, frac = str(stamp).partition(".")
    return int(sec) * 1_000_000_000 + int((frac + "000000000")[:9])


def _thread_safe_child_watcher() -> None:
    """Make asyncio's subprocess support usable from any thread's event loop.

    pyshark, when it runs on the main thread, installs a ``SafeChildWatcher`` attached to the
    main thread's loop; a later subprocess started from a worker thread's loop then fails with
    "asyncio.get_child_watcher() is not activated".  asyncio's default, threaded watcher
    serves every loop in every thread; pyshark installs its own again when it next runs on
    the main thread.  (Child watchers are gone in Python 3.14: nothing to do there.)"""
    import threading
    import warnings
    policy = asyncio.get_event_loop_policy()
    threaded = getattr(asyncio, "ThreadedChildWatcher", None)
    if threaded is None or not hasattr(policy, "set_child_watcher"):
        return
    old = getattr(policy, "_watcher", None)
    if old is None or isinstance(old, threaded):
        return  # asyncio's default (threaded) watcher is created on first use
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # deprecated since Python 3.12
        w = threaded()
        if threading.current_thread() is threading.main_thread():
            try:
                policy.set_child_watcher(w)  # closes the old one (signal handler: main thread only)
                return
            except (RuntimeError, ValueError, OSError):
                pass
        policy._watcher = w  # off the main thread the old watcher cannot be closed: replace it


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

    _thread_safe_child_watcher()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as ex:
        return ex.submit(work).result()


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


def _header_lines(layer) -> list[tuple[bytes, bytes]]:
    """Every header line Wireshark delimited in this SIP layer, in message order, as
    ``(lower-case name, raw value)``: the fields whose raw bytes are a whole line (known
    headers by name, unknown ones as unnamed fields), continuation lines included."""
    lines: dict[int, bytes] = {}
    fields = getattr(layer, "_all_fields", None)  # pyshark's XML layer: name -> container
    items = fields.items() if fields is not None else ((n, layer.get_field(n)) for n in layer.field_names)
    for name, cont in items:
        if cont is None or name.rpartition(".")[2] in ("msg_hdr", "msg_body", "Request-Line",
                                                       "Status-Line", "request_line", "status_line"):
            continue
        for f in cont.all_fields:
            raw = f.raw_value
            if not raw or f.pos is None:
                continue
            try:
                b = bytes.fromhex(raw)
            except ValueError:
                continue
            if b.endswith(b"\n"):
                lines.setdefault(int(f.pos), b)
    out = []
    for _pos, b in sorted(lines.items()):
        hl = sipmsg.split_header_line(b)
        if hl is not None:
            out.append(hl)
    return out


def _fields(layer, next_start: int | None) -> tuple[sipmsg.SipFields, int | None]:
    m = layer.get_field("Method")
    st = layer.get_field("Status-Code")
    f = sipmsg.fields_from_headers(None if m is None else str(m),
                                   None if st is None else int(str(st)), _header_lines(layer), 0)
    return f, _sip_size(layer, next_start)


def _read(path: str, report: IngestReport, on_truncated: str, limit: int | None,
          decode_as: dict | None, prefs: dict, eventloop=None) -> pd.DataFrame:
    import pyshark
    from pyshark.capture.capture import TSharkCrashException

    cols: dict[str, list] = {c: [] for c in COLUMNS}
    cap = pyshark.FileCapture(path, keep_packets=False, disable_protocol=DISABLED_PROTOCOLS,
                              decode_as=decode_as, eventloop=eventloop, override_prefs=prefs)
    last = 0
    try:
        for pkt in cap:
            if limit is not None and int(pkt.number) > limit:
                break  # tshark's reading of a truncated last record: counted by the caller
            report.read += 1
            last = int(pkt.number)
            sips = pkt.get_multiple_layers("sip")
            stamp = pkt.frame_info.get_field("time_epoch")
            if not sips:
                if stamp is not None and str(stamp).strip() and _hep_rows(pkt, last, epoch_ns(stamp),
                                                                           cols, report):
                    continue
                report.skip("no SIP layer (tshark)")
                continue
            if stamp is None or not str(stamp).strip():
                report.skip(NO_TIMESTAMP)  # a pcapng simple packet block: as the bulk reader
                continue
            ts = epoch_ns(stamp)
            if "ip" in pkt:
                src, dst = pkt.ip.src, pkt.ip.dst
            else:
                src, dst = pkt.ipv6.src, pkt.ipv6.dst
            tr = "udp" if "udp" in pkt else "tcp"
            l4 = pkt[tr]
            if "websocket" in pkt:
                tr = "ws"
            if "tls" in pkt:
                tr = "wss" if tr == "ws" else "tls"
            starts = [_start(s) for s in sips[1:]] + [None]
            good = 0
            bad = None
            for s, nxt in zip(sips, starts):
                f, size = _fields(s, nxt)
                if f.error:
                    bad = bad or f.error
                    continue
                good += 1
                row = {"frame": last, "ts_ns": ts, "src": str(src), "sport": int(l4.srcport),
                       "dst": str(dst), "dport": int(l4.dstport), "transport": tr, "size": size,
                       "iface": _iface(pkt)}
                fd = f._asdict()
                for c in COLUMNS:
                    cols[c].append(row[c] if c in row else fd[c])
            if good:
                report.parsed += 1
            else:
                report.skip(bad)
    except TSharkCrashException as e:
        if on_truncated == "skip":
            report.read += 1
            report.skip(TRUNCATED)
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


def _iface(pkt) -> int:
    """The packet's capture interface as tshark numbers them (0 in a pcap)."""
    v = pkt.frame_info.get_field("interface_id")
    return int(v) if v is not None and str(v).strip() else 0


def _hep_rows(pkt, frame: int, ts_pkt: int, cols: dict[str, list], report: IngestReport) -> bool:
    """A UDP packet tshark did not dissect as SIP that is HEP: its SIP rows (the agent's
    addresses, ports and time) and its account; False if it is not HEP."""
    if "udp" not in pkt:
        return False
    raw = pkt.udp.get_field("payload")
    if raw is None:
        return False
    data = bytes.fromhex(str(raw).replace(":", ""))
    try:
        h = hepmod.decode(data)
    except hepmod.HepError:
        report.skip("HEP packet malformed")
        return True
    if h is None:
        return False
    if h.proto_type not in (-1, hepmod.SIP):
        report.skip("HEP packet carrying no SIP (another payload type)")
        return True
    if h.payload is None:
        report.skip("HEP compressed payload (chunk 0x0010): not read" if h.compressed else "HEP packet malformed")
        return True
    msgs = hepmod.sip_messages(h)
    good = [(f, n) for f, n in msgs if not f.error]
    if not good:
        report.skip(next((f.error for f, _ in msgs if f.error), "HEP packet carrying no SIP (another payload type)"))
        return True
    for f, size in good:
        row = {"frame": frame, "ts_ns": h.ts_ns if h.ts_ns is not None else ts_pkt, "src": h.src,
               "sport": h.sport, "dst": h.dst, "dport": h.dport, "transport": "tcp" if h.ip_proto == 6 else "udp",
               "size": size, "iface": _iface(pkt)}
        fd = f._asdict()
        for c in COLUMNS:
            cols[c].append(row[c] if c in row else fd[c])
    report.parsed += 1
    return True


def read_packets(path: str | os.PathLike, *, on_truncated: str = "skip",
                 decode_as: dict[str, str] | None = None, tls_keys: list | None = None
                 ) -> tuple[pd.DataFrame, IngestReport]:
    """All SIP messages of a capture via pyshark, one row each, and the account.

    Works from plain Python and from inside a running event loop (Jupyter).  SIP on
    non-standard ports is found by tshark's heuristic dissector; for SIP over TCP whose messages
    span segments on such ports, name them, e.g. ``decode_as={"tcp.port==15062": "sip"}``
    (the heuristic cannot ask for TCP reassembly).  ``tls_keys``: one TLS key log (tshark's
    ``tls.keylog_file``; SIP over TLS on a port other than 5061 also needs ``decode_as``, e.g.
    ``{"tcp.port==5561": "tls"}``); transport "tls" for the messages it decrypts.  ``on_truncated``: as
    :func:`.fast.read_packets` (``"skip"`` keeps every complete packet, ``"raise"`` for
    ``--strict``).
    """
    path = Path(path)
    if not path.exists():
        raise IngestError(path, "open", "no such file")
    # pyshark silently yields 0 packets for non-captures, and tshark reports a truncated
    # capture only sometimes (TSharkCrashException, or at garbage collection): check first
    n_ok, problem = scan_structure(path)
    if problem is not None and on_truncated != "skip":
        raise IngestError(path, f"packet {n_ok + 1}", f"truncated or corrupt capture: {problem}")
    report = IngestReport(source="pcap-pyshark", path=str(path))
    prefs = dict(PREFS)
    if tls_keys:
        if len(tls_keys) != 1:
            raise ValueError("the pyshark engine takes one TLS key log")
        prefs["tls.keylog_file"] = str(tls_keys[0])
    df = run_outside_loop(_read, str(path), report, on_truncated,
                          n_ok if problem is not None else None, decode_as, prefs)
    if problem is not None and TRUNCATED not in report.skipped:
        report.read += 1
        report.skip(TRUNCATED if "truncated" in problem else CORRUPT)
        report.notes.append(f"{path}: stopped after packet {n_ok}: {problem}")
    report.messages = len(df)
    report.check()
    return df, report
