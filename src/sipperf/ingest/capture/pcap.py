"""Captures -> timeline: ``read_pcap(path, proxy=None, engine="bulk"|"pyshark")``.

The packet table comes from the bulk byte-level reader (:mod:`.fast`, default, a
compiled single pass) or from pyshark (:mod:`.pyshark_engine`, Wireshark's dissectors, slow); both give
identical records.  :func:`.pairing.pair_at_proxy` turns it into the timeline with ``t_arr``
(ingress copy at the proxy) and ``t_dep`` (egress copy).
"""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from sipperf.timeline import IngestReport
from sipperf.ingest.capture import fast, pyshark_engine, tls
from sipperf.ingest.pairing.proxy import pair_at_proxy

ENGINES = ("bulk", "pyshark")


def read_packets(path: str | os.PathLike, engine: str = "bulk", *, on_truncated: str = "skip",
                 tls_keys: list | None = None) -> tuple[pd.DataFrame, IngestReport]:
    """The per-message packet table of a capture (columns :data:`fast.COLUMNS`); SIP over TLS
    decrypted with ``tls_keys`` (key logs) or the capture's own secrets (:mod:`.tls`)."""
    if engine == "bulk":
        return tls.read_packets(path, tls_keys, on_truncated=on_truncated)
    if engine == "pyshark":
        return pyshark_engine.read_packets(path, on_truncated=on_truncated, tls_keys=tls_keys)
    raise ValueError(f"engine must be one of {ENGINES}, not {engine!r}")


def read_pcap(path: str | os.PathLike, proxy=None, engine: str = "bulk", *,
              on_truncated: str = "skip", stateful: bool = True) -> tuple[pd.DataFrame, IngestReport]:
    """Timeline of the SIP messages through the proxy in a pcap/pcapng capture.

    ``proxy``: ``"ip:port"`` (IPv6 as ``"[::1]:5060"``) or ``(ip, port)``; found from the
    traffic when ``None``.  ``stateful``: see :func:`.pairing.pair_at_proxy` (how the proxy's
    own retransmissions are told apart).  ``on_truncated``: ``"skip"`` (default: count the
    cut-off or corrupt last record and keep the rest) or ``"raise"`` (for ``--strict``).  The report accounts for packets (read = packets in
    the file); the pairing's account is in its notes.
    """
    packets, report = read_packets(path, engine, on_truncated=on_truncated)
    timeline, prep = pair_at_proxy(packets, proxy, stateful=stateful, run_id=Path(path).stem)
    report.messages = len(timeline)
    report.notes.append(f"pairing: {prep}")
    report.notes.extend(prep.notes)
    return timeline, report.check()
