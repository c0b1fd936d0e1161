"""SIP over TLS read with its key log: the decrypted streams, as the bulk reader reads clear TCP.

A capture of SIP over TLS holds only ciphertext; with the TLS secrets of its connections
(a key log in the NSS ``SSLKEYLOGFILE`` format, which OpenSSL, Python's ``ssl``, browsers and
Wireshark write, or a Decryption Secrets Block inside a pcapng, ``editcap --inject-secrets``)
Wireshark can decrypt it.  This module uses tshark for the cryptography only:

1. tshark decrypts the TLS streams the bulk reader refused (their server ports, from its
   scan), with SIP and HTTP dissection off, so each TCP segment's decrypted application data
   comes out as bytes (``data.data``), with the segment's time and addresses;
2. those bytes are written as TCP segments of a clear-text capture (raw IP, one segment per
   captured segment that completed TLS records, the same time stamps, sequence numbers counted
   on the clear text), which the bulk reader then reads as SIP over TCP: framing, reassembly
   and every SIP rule are the ones clear TCP gets;
3. the rows come back labelled ``tls`` (``wss`` for WebSocket inside TLS), numbered with the
   frames of the original capture, and the account moves each TLS segment from "encrypted SIP
   cannot be read" to what became of it.

The per-message instants are those of the captured segments that completed each TLS record,
as for a SIP message over clear TCP (the segment that completes it).  A connection whose
secrets are missing from the key log stays refused, by name, with the legs that were read and
the legs that were not in ``details["transports"]["tls"]``.

No key log, no decryption: :func:`read_packets` is then :func:`sipperf.ingest.capture.fast.read_packets`.
"""
from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from sipperf.timeline import IngestError, IngestReport

#: the labels a line of an NSS key log starts with (TLS 1.2's CLIENT_RANDOM, TLS 1.3's secrets)
KEYLOG_LABELS = (b"CLIENT_RANDOM", b"CLIENT_EARLY_TRAFFIC_SECRET", b"CLIENT_HANDSHAKE_TRAFFIC_SECRET",
                 b"SERVER_HANDSHAKE_TRAFFIC_SECRET", b"CLIENT_TRAFFIC_SECRET_0", b"SERVER_TRAFFIC_SECRET_0",
                 b"EARLY_EXPORTER_SECRET", b"EXPORTER_SECRET", b"RSA")
_KEYLOG_LINE = re.compile(rb"^(%s) [0-9A-Fa-f]+ [0-9A-Fa-f]+\s*$" % b"|".join(KEYLOG_LABELS))

#: the skip reasons of TLS segments once a key log was given
HANDSHAKE = "TLS handshake, ticket or alert (no SIP inside)"
NO_KEY = "TLS application data without its secrets in the key log: encrypted SIP cannot be read"
PARTIAL = "TLS record continued in a later segment (its SIP is read there)"
UNMATCHED = "TLS segment tshark did not decrypt (a retransmission, or outside tshark's reassembly)"
NO_HELLO = ("TLS connection opened before the capture began (its handshake is not in it, and a key log's "
            "secrets are found by the handshake's client random): encrypted SIP cannot be read")

_FIELDS = ("frame.number", "frame.time_epoch", "frame.interface_id", "ip.src", "ipv6.src", "ip.dst", "ipv6.dst",
           "tcp.srcport", "tcp.dstport", "tcp.stream", "tls.record.content_type", "tls.record.opaque_type", "tcp.analysis.retransmission",
           "tls.handshake.type", "tls.handshake.extension.type", "data.data")
_RAW_MAX = 65_000          # clear-text bytes per written IP packet


def sniff_keylog(head: bytes) -> bool:
    """True if ``head`` (a file's first bytes) is an NSS key log: comment or blank lines, and
    at least one line ``LABEL <hex> <hex>``, every complete non-comment line of that form."""
    lines = head.split(b"\n")
    if len(head) >= 4096:
        lines = lines[:-1]  # the last line may be cut by the sniff window
    seen = False
    for line in lines:
        s = line.strip()
        if not s or s.startswith(b"#"):
            continue
        if not _KEYLOG_LINE.match(s):
            return False
        seen = True
    return seen


def has_dsb(path: str | os.PathLike) -> bool:
    """True if the capture is a pcapng holding a Decryption Secrets Block (TLS key log)."""
    from sipperf.ingest.compression import open_stream
    try:
        with open_stream(Path(path)) as fh:
            head = fh.read(12)
            if head[:4] != b"\x0a\x0d\x0d\x0a" or len(head) < 12:
                return False
            endian = "<" if head[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
            (n,) = struct.unpack(endian + "I", head[4:8])
            fh.read(n - 12)
            while True:
                h = fh.read(8)
                if len(h) < 8:
                    return False
                btype, blen = struct.unpack(endian + "II", h)
                if btype == 0x0000000A:
                    return True
                if btype in (0x00000006, 0x00000003, 0x00000002) or blen < 12:
                    return False  # packets began: tshark reads secrets only from blocks before them here
                fh.read(blen - 8)
    except (OSError, struct.error, EOFError):
        return False


def tls_ports(report: IngestReport) -> tuple[list[int], list[int]]:
    """The server ports of the TLS (and wss) streams the bulk reader refused, from its account."""
    refused = report.details.get("transports", {}).get("refused", {})
    tls, wss = [], []
    for name in refused:
        m = re.search(r" on ports? ([\d, ]+):", name)
        ports = [int(p) for p in re.findall(r"\d+", m.group(1))] if m else []
        if not ports:  # no stream's start was seen: the registered ports
            ports = [443] if name.startswith("WebSocket over TLS") else [5061]
        (wss if name.startswith("WebSocket over TLS") else tls if name.startswith("TLS") else []).extend(ports)
    return tls, wss


def read_packets(path: str | os.PathLike, keylogs: list | None = None, *, on_truncated: str = "skip"
                 ) -> tuple[pd.DataFrame, IngestReport]:
    """The packet table of a capture (:func:`sipperf.ingest.capture.fast.read_packets`), its TLS
    streams decrypted with ``keylogs`` (NSS key log files) or the capture's own secrets block."""
    from sipperf.ingest.capture import fast
    packets, rep = fast.read_packets(path, on_truncated=on_truncated)
    keylogs = [Path(k) for k in (keylogs or [])]
    tls, wss = tls_ports(rep)
    if not (tls or wss):
        return packets, rep
    dsb = has_dsb(path)
    if not keylogs and not dsb:
        return packets, rep
    if shutil.which("tshark") is None:
        rep.notes.append(f"{path}: a TLS key log was given, but tshark (which decrypts) is not installed: "
                         "the TLS streams stay unread (apt-get install tshark)")
        return packets, rep
    with tempfile.TemporaryDirectory(prefix="sipperf-tls-") as tmp:
        keyfile = None
        if keylogs:
            keyfile = Path(tmp) / "keys.txt"
            keyfile.write_bytes(b"\n".join(_keylog_bytes(k) for k in keylogs) + b"\n")
        segs = _decrypt(_plain(path, Path(tmp)), keyfile, tls + wss)
        clear = Path(tmp) / "clear.pcap"
        written = _write_clear(segs, clear)
        if written:
            dec, _ = fast.read_packets(clear, on_truncated="raise")
        else:
            dec = fast.empty_packets()
    return _merge(path, packets, rep, dec, segs, written, set(tls + wss), keylogs, dsb)


def _plain(path, tmp: Path) -> Path:
    """The capture as a plain file tshark can read (a compressed one decompressed into ``tmp``)."""
    from sipperf.ingest.compression import kind, open_stream
    with open(path, "rb") as fh:
        if kind(fh.read(8)) is None:
            return Path(path)
    out = tmp / "capture"
    with open_stream(path) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    return out


def _keylog_bytes(path: Path) -> bytes:
    from sipperf.ingest.compression import open_stream
    try:
        with open_stream(path) as fh:
            return fh.read()
    except OSError as e:
        raise IngestError(str(path), "byte 0", f"cannot read the TLS key log: {e.strerror or e}") from None


def _decrypt(path, keyfile: Path | None, ports: list[int]) -> pd.DataFrame:
    """One row per captured TCP segment with payload on the TLS ports: tshark's decryption."""
    cmd = ["tshark", "-n", "-r", str(path), "-o", "tcp.reassemble_out_of_order:TRUE",
           "--disable-protocol", "sip", "--disable-protocol", "http", "--disable-protocol", "websocket"]
    if keyfile is not None:
        cmd += ["-o", f"tls.keylog_file:{keyfile}"]
    for p in sorted(set(ports)):
        cmd += ["-d", f"tcp.port=={p},tls"]
    cmd += ["-Y", "tcp.len > 0 && (" + " || ".join(f"tcp.port == {p}" for p in sorted(set(ports))) + ")",
            "-T", "fields", "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=,"]
    for f in _FIELDS:
        cmd += ["-e", f]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0 and not res.stdout:
        err = res.stderr.strip().splitlines()
        raise IngestError(str(path), "TLS", "tshark could not decrypt the capture: " + (err[-1] if err else "?"))
    rows = []
    for line in res.stdout.splitlines():
        v = line.split("\t")
        if len(v) < len(_FIELDS):
            v += [""] * (len(_FIELDS) - len(v))
        rows.append(v)
    df = pd.DataFrame(rows, columns=[f.replace(".", "_") for f in _FIELDS])
    return df


def _write_clear(segs: pd.DataFrame, out: Path) -> int:
    """Write the decrypted bytes of ``segs`` as a nanosecond raw-IP pcap; returns packets written.
    Sets ``segs["written"]`` (index of the first written packet of each segment, -1 if none)."""
    from sipperf.ingest.capture.pyshark_engine import epoch_ns
    seq: dict[tuple, int] = defaultdict(lambda: 1000)
    written = np.full(len(segs), -1, np.int64)
    n = 0
    with open(out, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 101))
        for i, r in enumerate(segs.itertuples(index=False)):
            data = r.data_data.replace(",", "")
            if not data or r.tcp_analysis_retransmission:
                continue
            payload = bytes.fromhex(data)
            src, dst = r.ip_src or r.ipv6_src, r.ip_dst or r.ipv6_dst
            sport, dport = int(r.tcp_srcport), int(r.tcp_dstport)
            ts = epoch_ns(r.frame_time_epoch)
            key = (src, sport, dst, dport)
            written[i] = n
            for k in range(0, len(payload), _RAW_MAX):
                piece = payload[k:k + _RAW_MAX]
                pkt = _ip_tcp(src, dst, sport, dport, seq[key], piece)
                seq[key] += len(piece)
                fh.write(struct.pack("<IIII", ts // 1_000_000_000, ts % 1_000_000_000, len(pkt), len(pkt)))
                fh.write(pkt)
                n += 1
    segs["written"] = written
    return n


def _ip_tcp(src: str, dst: str, sport: int, dport: int, seq: int, payload: bytes) -> bytes:
    import ipaddress
    tcp = struct.pack(">HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, 0, 5 << 4, 0x18, 65535, 0, 0) + payload
    a, b = ipaddress.ip_address(src), ipaddress.ip_address(dst)
    if a.version == 4:
        return struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0,
                           a.packed, b.packed) + tcp
    return struct.pack(">IHBB16s16s", 6 << 28, len(tcp), 6, 64, a.packed, b.packed) + tcp


def _merge(path, packets, rep, dec, segs, written, ports, keylogs, dsb):
    """The capture's packet table with the decrypted rows added, and the account moved: each TLS
    segment the bulk reader refused is now parsed (it completed a SIP message) or skipped with
    what it held (handshake, a record's first part, no secrets, not decrypted)."""
    refused_keys = [k for k in rep.skipped if k.startswith(("TLS on", "TLS:", "WebSocket over TLS"))]
    left = sum(rep.skipped.pop(k) for k in refused_keys)
    n = len(segs)
    has = segs["written"].to_numpy() >= 0 if n else np.zeros(0, bool)
    types = segs["tls_record_content_type"].fillna("") if n else pd.Series([], dtype=str)
    opaque = (segs["tls_record_opaque_type"].fillna("") != "").to_numpy() if n else np.zeros(0, bool)
    retrans = (segs["tcp_analysis_retransmission"].fillna("") != "").to_numpy() if n else np.zeros(0, bool)
    app = types.str.split(",").map(lambda t: "23" in t).to_numpy(bool) if n else np.zeros(0, bool)
    # a connection is decrypted if any of its segments gave clear text; in one that never did,
    # TLS 1.3's encrypted records (opaque type 23) are application data without secrets too
    opened = segs.groupby("tcp_stream")["written"].transform("max").to_numpy() >= 0 if n else np.zeros(0, bool)
    no_tls = (types == "").to_numpy() & ~opaque & ~retrans & ~has
    no_key = ~has & ~retrans & (app | (opaque & ~opened))
    # a connection whose ClientHello (handshake type 1) is not in the capture began before it:
    # no key log can open it, and that, not missing secrets, is what the engineer must be told
    hello = _hello_seen(segs) if n else np.zeros(0, bool)
    no_hello = no_key & ~hello
    no_key = no_key & hello
    handshake = ~has & ~retrans & ~no_tls & ~no_key
    if len(dec):
        orig = segs["frame_number"].astype(np.int64).to_numpy()
        ifc = pd.to_numeric(segs["frame_interface_id"], errors="coerce").fillna(0).astype(np.int64).to_numpy()
        first = segs["written"].to_numpy()[has]
        seg_of = np.repeat(np.flatnonzero(has), np.diff(np.append(first, written)))
        idx = dec["frame"].to_numpy(np.int64) - 1  # the bulk reader numbers frames from 1
        dec = dec.copy()
        dec["frame"] = orig[seg_of[idx]]
        dec["iface"] = ifc[seg_of[idx]]
        dec["transport"] = np.where(dec["transport"].astype(str) == "ws", "wss", "tls")
    parsed = int(dec["frame"].nunique()) if len(dec) else 0
    counts = [(None, parsed), ("decrypted TLS segment without the end of a SIP message", int(has.sum()) - parsed),
              (PARTIAL, int(no_tls.sum())), (NO_KEY, int(no_key.sum())), (NO_HELLO, int(no_hello.sum())),
              (HANDSHAKE, int(handshake.sum()))]
    for why, k in counts:
        k = min(k, left)
        if k <= 0:
            continue
        if why is None:
            rep.parsed += k
        else:
            rep.skipped[why] = rep.skipped.get(why, 0) + k
        left -= k
    if left > 0:  # segments the scanner refused that tshark did not list or flagged as retransmitted
        rep.skipped[UNMATCHED] = rep.skipped.get(UNMATCHED, 0) + left
    legs = _legs(segs, has, no_key | no_hello, ports, hello)
    full = sum(g["handshake"] == "full" for g in legs)
    resumed = sum(g["handshake"] == "resumed" for g in legs)
    waits = _hello_waits(segs, ports) if n else {}
    src = ([f"the key log {', '.join(Path(k).name for k in keylogs)}"] if keylogs else []) + (
        ["the capture's decryption secrets block"] if dsb else [])
    unread = [g for g in legs if not g["segments_decrypted"]]
    rep.details.setdefault("transports", {})["tls"] = {
        "secrets_from": src, "connections": len(legs), "connections_decrypted": len(legs) - len(unread),
        "sip_messages": int(len(dec)), "segments_decrypted": int(has.sum()),
        "handshakes_full": full, "handshakes_resumed": resumed, "hello_waits": waits, "legs": legs[:50],
        "legs_not_listed": max(0, len(legs) - 50)}
    msg = (f"{path}: TLS decrypted with {' and '.join(src)}: {len(legs) - len(unread)} of {len(legs)} "
           f"connections, {len(dec)} SIP messages (transport 'tls'; each at the captured segment that "
           f"completed its TLS record)")
    if full + resumed:
        msg += (f"; {full + resumed} handshakes in the capture: {full} full (the server sent its certificate "
                f"and signed), {resumed} resumed a session (a ticket or session id: no certificate, no signature)")
    early = [g for g in unread if not g["handshake_in_capture"]]
    unread = [g for g in unread if g["handshake_in_capture"]]
    if early:
        msg += ("; not decrypted, opened before the capture began (their handshake is not in it, so no key "
                "log can open them: start the capture before the connections open, or make them open "
                "again): " + ", ".join(f"{g['client']} -> {g['server']}" for g in early[:6])
                + (" ..." if len(early) > 6 else ""))
    if unread:
        msg += "; not decrypted, no secrets for them in the key log: " + ", ".join(
            f"{g['client']} -> {g['server']}" for g in unread[:6]) + (" ..." if len(unread) > 6 else "")
    rep.notes.append(msg)
    out = pd.concat([packets, dec], ignore_index=True) if len(dec) else packets
    if len(dec):
        out = out.sort_values(["ts_ns", "frame"], kind="stable", ignore_index=True)
    rep.messages = len(out)
    return out, rep.check()


def _hello_seen(segs: pd.DataFrame) -> np.ndarray:
    """Per segment: whether its TCP stream shows a ClientHello (TLS handshake type 1) in the capture."""
    kinds = segs["tls_handshake_type"].fillna("").astype(str).str.split(",")
    has_hello = kinds.map(lambda ks: "1" in ks)
    return has_hello.groupby(segs["tcp_stream"]).transform("any").to_numpy(bool)


def _hello_waits(segs: pd.DataFrame, ports) -> dict[str, dict]:
    """Per TLS server endpoint: how long each new connection's ClientHello waited for the
    server's ServerHello (ms, 0.1-ms steps; the server's handshake response, the first thing a
    busy proxy makes a new connection wait for), and how many ClientHellos had no ServerHello in
    the capture, with the time from each to the capture's end (``unanswered_ms``)."""
    kinds = segs["tls_handshake_type"].fillna("").astype(str).str.split(",")
    t = pd.to_numeric(segs["frame_time_epoch"], errors="coerce").to_numpy(float)
    end = float(np.nanmax(t)) if len(t) else float("nan")
    src = segs["ip_src"].where(segs["ip_src"] != "", segs["ipv6_src"])
    dst = segs["ip_dst"].where(segs["ip_dst"] != "", segs["ipv6_dst"])
    first: dict[str, dict] = {}
    for i, (stream, ks) in enumerate(zip(segs["tcp_stream"], kinds)):
        if "1" in ks and stream not in first:
            first[stream] = {"hello": t[i], "server": _ep(dst.iat[i], int(segs["tcp_dstport"].iat[i]))}
        elif "2" in ks and stream in first and "reply" not in first[stream]:
            first[stream]["reply"] = t[i]
    out: dict[str, dict] = {}
    for c in first.values():
        o = out.setdefault(c["server"], {"waits_ms": [], "unanswered_ms": []})
        if "reply" in c:
            o["waits_ms"].append(round(1e3 * (c["reply"] - c["hello"]), 1))
        else:
            o["unanswered_ms"].append(round(1e3 * (end - c["hello"]), 1))
    return out


def _handshake(g: pd.DataFrame) -> str:
    """How one TLS connection's handshake went, from its segments: "full" (the server sent its
    certificate and signed), "resumed" (a session resumed: TLS 1.3's ServerHello carries the
    pre_shared_key extension, 41; TLS 1.2's abbreviated handshake has no Certificate message,
    type 11), or "" (no ServerHello in the capture)."""
    kinds = g["tls_handshake_type"].fillna("").astype(str).str.split(",")
    ext = g["tls_handshake_extension_type"].fillna("").astype(str).str.split(",")
    sh = kinds.map(lambda ks: "2" in ks).to_numpy(bool)
    if not sh.any():
        return ""
    sh_ext = set().union(*ext[sh])
    if "41" in sh_ext:
        return "resumed"
    if "43" in sh_ext:               # TLS 1.3 (supported_versions) without a pre-shared key
        return "full"
    return "full" if kinds.map(lambda ks: "11" in ks).any() else "resumed"


def _legs(segs: pd.DataFrame, has: np.ndarray, no_key: np.ndarray, ports, hello=None) -> list[dict]:
    """Per TLS connection: its client and server (the end on a TLS port), how many of its
    segments were decrypted, or held application data without secrets, and its handshake
    (:func:`_handshake`)."""
    if not len(segs):
        return []
    src = segs["ip_src"].where(segs["ip_src"] != "", segs["ipv6_src"])
    dst = segs["ip_dst"].where(segs["ip_dst"] != "", segs["ipv6_dst"])
    df = pd.DataFrame({"stream": segs["tcp_stream"], "src": src, "sport": segs["tcp_srcport"].astype(int),
                       "dst": dst, "dport": segs["tcp_dstport"].astype(int), "has": has, "no_key": no_key,
                       "hello": np.ones(len(segs), bool) if hello is None else hello,
                       "tls_handshake_type": segs["tls_handshake_type"],
                       "tls_handshake_extension_type": segs.get("tls_handshake_extension_type",
                                                                pd.Series("", index=segs.index))})
    out = []
    for _s, g in df.groupby("stream", sort=False):
        r = g.iloc[0]
        a, b = (r.src, r.sport), (r.dst, r.dport)
        client, server = (b, a) if r.sport in ports and r.dport not in ports else (a, b)
        out.append({"client": _ep(*client), "server": _ep(*server), "segments_decrypted": int(g["has"].sum()),
                    "segments_without_secrets": int(g["no_key"].sum()),
                    "handshake_in_capture": bool(g["hello"].any()), "handshake": _handshake(g)})
    return out


def _ep(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
