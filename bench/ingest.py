"""Capture ingest speed: the bulk reader against tshark, dpkt, pyshark and `sipperf analyze`.

    .venv/bin/python bench/ingest.py [--packets 1000000] [--runs 3] [--source CAPTURE]
                                     [--slice 200000] [--subset 3000] [--skip analyze,dpkt,...]
                                     [--framings udp,tcp,ws,hep]

The capture is REAL lab traffic replicated, never synthetic SIP: ``--source`` (default
``datasets/lab/raw/rate-0025/capture.pcapng.gz``, Kamailio 5.6 relaying SIPp calls on
loopback UDP, recorded by ``sipperf lab``; or ``--record`` to record a fresh one the way
tests/fixtures/lab/run.sh does) is copied over and over, each copy shifted in time by the
source's duration and every Call-ID rewritten in place (same length, so no length field
changes) to a unique value per replicated call: copy ``k`` of call ``c`` gets the 12 hex digits
``k`` (6) + ``c`` (6) as the first characters of its Call-ID.  UDP checksums are zeroed
(IPv4 allows it; nothing verifies them).  The file goes to ``/tmp`` (up to 12 M packets,
about 5.5 GB) and is reused when it exists; it is never committed.

Printed, with /proc/loadavg before and after each measurement (medians of ``--runs``):

* bulk          — sipperf.ingest.capture.fast.read_packets on the whole file, in a fresh process
                  per run (the time of the read itself; the process's own peak RSS, VmHWM);
* bulk-stream   — iter_packets, chunks consumed and dropped (bounded memory);
* analyze       — sipperf.analysis.analyze + Analysis.write (no figures) end to end, fresh process;
* tshark-fields — ``tshark -T fields`` with the packet table's SIP fields, on ``--slice`` packets;
* dpkt          — dpkt's pcapng reader + Ethernet/IP/UDP + dpkt.sip on ``--slice`` packets
                  (skipped with a message when dpkt is not installed);
* pyshark-ek / pyshark-default — on the first ``--subset`` / ``--subset``/2 packets;
* framings (``--framings``, issue 23) — the bulk read of the same calls carried otherwise,
  each capture made from the source by ``tests/capgen.py`` and replicated like it: ``tcp``
  (both legs SIP over TCP, one connection each, with handshakes and ACKs), ``ws`` (both legs
  SIP over WebSocket: HTTP Upgrade, masked client frames -- masked with the key 0 so that the
  Call-IDs stay patchable), ``hep`` (every message HEPv3-encapsulated by one capture agent);
  each rate also as packets/s and SIP messages/s, with its ratio to ``udp``.

and each rate's ratio to the bulk rate.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT / "datasets" / "lab" / "raw" / "rate-0025" / "capture.pcapng.gz"
KAM_CFG = ROOT / "tests" / "fixtures" / "lab" / "kam.cfg"
PORTS = dict(proxy=15160, uas=15180, uac=15170)


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


# ------------------------------------------------------------------ recording (optional)
def record(out: Path, calls: int, rate: int) -> Path:
    """Record a real Kamailio + SIPp capture into ``out`` (pcapng); returns the path."""
    work = Path(tempfile.mkdtemp(prefix="sipperf-bench-"))
    cfg = work / "kam.cfg"
    cfg.write_text(KAM_CFG.read_text().replace("UASADDR", f"sip:127.0.0.1:{PORTS['uas']}"))
    filt = " or ".join(f"udp port {p}" for p in PORTS.values())
    procs = []
    try:
        procs.append(subprocess.Popen(["dumpcap", "-q", "-i", "lo", "-f", filt, "-w", str(out)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1.0)
        procs.append(subprocess.Popen(
            ["kamailio", "-f", str(cfg), "-DD", "-E", "-l", f"udp:127.0.0.1:{PORTS['proxy']}",
             "-w", str(work)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen(
            ["sipp", "-sn", "uas", "-i", "127.0.0.1", "-p", str(PORTS["uas"]), "-nostdin",
             "-timeout", str(calls // rate + 60)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1.0)
        subprocess.run(
            ["sipp", "-sn", "uac", f"127.0.0.1:{PORTS['proxy']}", "-i", "127.0.0.1",
             "-p", str(PORTS["uac"]), "-s", "service", "-r", str(rate), "-m", str(calls),
             "-d", "250", "-nostdin", "-timeout", str(calls // rate + 30)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=calls // rate + 60)
        time.sleep(1.5)
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)
    return out


# --------------------------------------------------------------------------- replication
def _plain(source: Path) -> bytes:
    data = source.read_bytes()
    if data[:2] == b"\x1f\x8b":
        import gzip
        data = gzip.decompress(data)
    return data


def tag_of(source: Path) -> str:
    """A short name for a source capture ('rate-0025' for datasets/lab/raw/rate-0025/capture...,
    the run directory's name when the file is a lab run's capture.pcapng)."""
    stem = source.name.split(".")[0]
    return source.parent.name if stem == "capture" else stem


def _capgen():
    sys.path.insert(0, str(ROOT / "tests"))
    import capgen
    return capgen


def sockets(recs) -> tuple[tuple[str, int], tuple[str, int], tuple[str, int]]:
    """(UAC, proxy, UAS) of a proxy capture: the sender and receiver of the first INVITE, and
    the receiver of the first INVITE the proxy sends on."""
    import ipaddress
    G = _capgen()
    ep = lambda ip, port: (str(ipaddress.ip_address(ip)), port)  # noqa: E731
    first = None
    for p in G.packets(recs):
        if p.payload.startswith(b"INVITE "):
            if first is None:
                first = p
            elif (p.src, p.sport) == (first.dst, first.dport):
                return ep(first.src, first.sport), ep(first.dst, first.dport), ep(p.dst, p.dport)
    raise SystemExit("no proxy found in the source capture (an INVITE received and sent on)")


def reframe(source: Path, framing: str, out: Path) -> Path:
    """The source capture with its calls carried as ``framing`` (see the module docstring),
    written to ``out`` (pcapng)."""
    G = _capgen()
    from sipperf.ingest.capture.fast import iter_records

    tmp_src = out.with_suffix(".src.pcapng")
    tmp_src.write_bytes(_plain(source))
    recs = list(iter_records(tmp_src))
    tmp_src.unlink()
    if framing == "hep":
        recs, _ = G.to_hep(recs, G.HepOpt())
    elif framing in ("tcp", "ws"):
        uac, proxy, uas = sockets(recs)
        recs, _ = G.to_websocket(recs, uac, proxy, G.WsLeg(framing=framing, zero_mask=True))
        recs, _ = G.to_websocket(recs, proxy, uas, G.WsLeg(framing=framing, zero_mask=True,
                                                           client_port=51001, ws_port=uas[1] + 1))
    elif framing != "udp":
        raise SystemExit(f"unknown framing {framing!r}")
    return G.write_records(out, recs)


def replicate(source: Path, out: Path, packets: int) -> Path:
    """Write ``out``: the source capture's packets repeated until ``packets`` packets, each copy
    shifted by the source's duration, Call-IDs made unique per copy and call (see the module
    docstring).  pcapng, one interface of the source's (single) link type, ns timestamps."""
    from sipperf.ingest.capture.fast import iter_records

    tmp_src = out.with_suffix(".src.pcapng")
    tmp_src.write_bytes(_plain(source))
    recs = list(iter_records(tmp_src))
    tmp_src.unlink()
    links = {link for _, link, _ in recs}
    if len(links) != 1:
        raise SystemExit(f"{source}: replication needs a capture of one link type (link types {links})")
    (link,) = links
    ts0 = recs[0][0]
    span = recs[-1][0] - ts0 + 1_000_000  # 1 ms between copies
    # one copy as a byte template of EPBs, with the positions to patch
    blocks, ts_pos, cid_pos, cid_call = [], [], [], []
    calls: dict[bytes, int] = {}
    off = 0
    for ts, _, data in recs:
        data = bytearray(data)
        if link == 1 and data[12:14] == b"\x08\x00" and data[23] == 17:  # IPv4/UDP: zero the UDP checksum
            ihl = (data[14] & 15) * 4
            data[14 + ihl + 6:14 + ihl + 8] = b"\0\0"
        pad = (-len(data)) % 4
        blen = 32 + len(data) + pad
        rel = ts - ts0
        blk = struct.pack("<IIIIIII", 6, blen, 0, rel >> 32, rel & 0xFFFFFFFF, len(data), len(data))
        blk += bytes(data) + b"\0" * pad + struct.pack("<I", blen)
        ts_pos.append((off + 12) // 4)
        for name in (b"\r\nCall-ID:", b"\r\ni:", b"\r\nCall-Id:", b"\r\nCALL-ID:"):
            i = data.find(name)
            if i >= 0:
                v = i + len(name)
                while data[v] in (32, 9):
                    v += 1
                e = data.find(b"\r\n", v)
                cid = bytes(data[v:e])
                if len(cid) >= 12:
                    cid_pos.append(off + 28 + v)
                    cid_call.append(calls.setdefault(cid, len(calls)))
                break
        blocks.append(blk)
        off += blen
    template = np.frombuffer(b"".join(blocks), np.uint8)
    ts_rel = np.array([ts - ts0 for ts, _, _ in recs], np.int64)
    ts_pos = np.array(ts_pos, np.int64)
    cid_pos = np.array(cid_pos, np.int64)
    hexd = np.frombuffer(b"0123456789abcdef", np.uint8)
    call_hex = np.stack([hexd[(np.array(cid_call) >> (4 * (5 - j))) & 15] for j in range(6)], axis=1)
    shb = struct.pack("<IIIHHq", 0x0A0D0D0A, 28, 0x1A2B3C4D, 1, 0, -1) + struct.pack("<I", 28)
    opt = struct.pack("<HH", 9, 1) + bytes([9, 0, 0, 0]) + struct.pack("<HH", 0, 0)
    idb_len = 20 + len(opt)
    idb = struct.pack("<IIHHI", 1, idb_len, link, 0, 0) + opt + struct.pack("<I", idb_len)
    n_copies = -(-packets // len(recs))
    tmp = out.with_suffix(".part")
    with open(tmp, "wb") as fh:
        fh.write(shb + idb)
        for k in range(n_copies):
            cp = template.copy()
            w = cp.view(np.uint32)
            t = ts0 + k * span + ts_rel
            w[ts_pos] = (t >> 32).astype(np.uint32)
            w[ts_pos + 1] = (t & 0xFFFFFFFF).astype(np.uint32)
            kh = hexd[[(k >> (4 * (5 - j))) & 15 for j in range(6)]]
            cp[cid_pos[:, None] + np.arange(6)] = kh
            cp[cid_pos[:, None] + np.arange(6, 12)] = call_hex
            if k == n_copies - 1 and packets % len(recs):
                keep = packets % len(recs)
                cut = (ts_pos[keep] * 4 - 12) if keep < len(ts_pos) else len(cp)
                cp = cp[:cut]
            fh.write(cp.tobytes())
    tmp.rename(out)
    return out


# -------------------------------------------------------------------------- measurements
CHILD_BULK = r"""
import json, sys, time
t0 = time.perf_counter()
from sipperf.ingest.capture import fast as pcapfast
pcapfast.read_packets(sys.argv[2])  # load the compiled code (numba cache) on a tiny file
t1 = time.perf_counter()
c0 = time.process_time()
if sys.argv[3] == "table":
    df, rep = pcapfast.read_packets(sys.argv[1], progress=False)
    rows = len(df)
else:
    from sipperf.timeline import IngestReport
    scan, spent, spent_cpu = pcapfast.ps.scan, [0.0], [0.0]
    def timed_scan(*a):  # the compiled pass alone: records -> SIP columns, no DataFrame
        s0, p0 = time.perf_counter(), time.process_time()
        r = scan(*a)
        spent[0] += time.perf_counter() - s0; spent_cpu[0] += time.process_time() - p0
        return r
    pcapfast.ps.scan = timed_scan
    rep = IngestReport(source="x")
    rows = sum(len(c) for c in pcapfast.iter_packets(sys.argv[1], rep, progress=False))
dt = time.perf_counter() - t1
cpu = time.process_time() - c0
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(json.dumps({"seconds": dt, "cpu": cpu, "read": rep.read, "rows": rows, "startup": t1 - t0,
                  "hwm_mb": int(hwm) / 1024, "scan_s": spent[0] if sys.argv[3] != "table" else None,
                  "scan_cpu_s": spent_cpu[0] if sys.argv[3] != "table" else None}))
"""

CHILD_ANALYZE = r"""
import json, sys, tempfile, time
t0 = time.perf_counter()
from sipperf.analysis import analyze
with tempfile.TemporaryDirectory() as out:
    res = analyze([sys.argv[1]])
    res.write(out)
dt = time.perf_counter() - t0
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(json.dumps({"seconds": dt, "read": res.report.read, "hwm_mb": int(hwm) / 1024}))
"""


def _child(code: str, *args: str, timeout: float = 3600) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         timeout=timeout, cwd=ROOT)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_tshark_fields(path: Path) -> tuple[float, int]:
    cmd = ["tshark", "-n", "-r", str(path), "--disable-protocol", "sdp", "-T", "fields"]
    for f in ("frame.number", "frame.time_epoch", "ip.src", "ipv6.src", "udp.srcport", "ip.dst",
              "udp.dstport", "sip.Call-ID", "sip.CSeq.seq", "sip.CSeq.method", "sip.Method",
              "sip.Status-Code", "sip.Via.branch", "sip.from.addr", "sip.from.tag", "sip.to.addr",
              "sip.to.tag", "sip.contact.uri", "sip.User-Agent", "sip.Max-Forwards"):
        cmd += ["-e", f]
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, check=True).stdout
    return time.perf_counter() - t, out.count(b"\n")


def bench_dpkt(path: Path) -> tuple[float, int, str]:
    import dpkt
    t = time.perf_counter()
    n = 0
    msgs = 0
    with open(path, "rb") as fh:
        for _ts, buf in dpkt.pcapng.Reader(fh):
            n += 1
            try:
                ip = dpkt.ethernet.Ethernet(buf).data
                udp = ip.data
                if not isinstance(udp, dpkt.udp.UDP):
                    continue
                payload = udp.data
                m = (dpkt.sip.Response(payload) if payload[:8] == b"SIP/2.0 "
                     else dpkt.sip.Request(payload))
                h = m.headers
                (h.get("call-id"), h.get("cseq"), h.get("via"), h.get("from"), h.get("to"),
                 h.get("contact"), h.get("user-agent"))
                msgs += 1
            except (dpkt.UnpackError, ValueError, AttributeError):
                continue
    return time.perf_counter() - t, n, dpkt.__version__


def bench_pyshark(path: Path, subset: int, **kw) -> float:
    import pyshark
    cap = pyshark.FileCapture(str(path), keep_packets=False, disable_protocol="sdp", **kw)
    t = time.perf_counter()
    n = 0
    try:
        for pkt in cap:
            n += 1
            _ = pkt.sniff_timestamp
            if n >= subset:
                break
    finally:
        cap.close()
    return n / (time.perf_counter() - t)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--packets", type=int, default=1_000_000, help="packets in the big capture (<= 12 M)")
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="real capture to replicate")
    ap.add_argument("--record", action="store_true", help="record a fresh source capture first")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--slice", type=int, default=200_000, help="packets for tshark and dpkt")
    ap.add_argument("--subset", type=int, default=3000, help="packets for the pyshark modes")
    ap.add_argument("--skip", default="", help="comma list of: bulk,stream,analyze,tshark,dpkt,pyshark")
    ap.add_argument("--framings", default="", help="comma list of udp,tcp,ws,hep: the bulk read of "
                    "the same calls in each framing (issue 23)")
    a = ap.parse_args(argv)
    skip = set(filter(None, a.skip.split(",")))
    if a.packets > 12_000_000:
        ap.error("--packets is at most 12 000 000")
    source = a.source
    if a.record:
        source = Path(tempfile.gettempdir()) / "sipperf-bench-recorded.pcapng"
        print(f"recording a real capture (8000 calls at 400 cps) -> {source}", flush=True)
        record(source, 8000, 400)
    tmp = Path(tempfile.gettempdir())
    tag = tag_of(source) + ("-rec" if a.record else "")
    big = tmp / f"sipperf-bench-{tag}-{a.packets}.pcapng"
    small = tmp / f"sipperf-bench-{tag}-{min(a.slice, a.packets)}.pcapng"
    tiny = tmp / f"sipperf-bench-{tag}-100.pcapng"
    need_big = not {"bulk", "stream", "analyze"} <= skip
    need_small = not {"tshark", "dpkt", "pyshark"} <= skip
    for p, n, need in ((big, a.packets, need_big), (small, min(a.slice, a.packets), need_small), (tiny, 100, True)):
        if need and not p.exists():
            t = time.perf_counter()
            replicate(source, p, n)
            print(f"wrote {p} ({n} packets, {p.stat().st_size / 1e6:.0f} MB) in "
                  f"{time.perf_counter() - t:.1f} s", flush=True)
    print(f"source: {source} (real lab traffic); capture: {big} ({a.packets} packets"
          + (f", {big.stat().st_size / 1e6:.0f} MB" if big.exists() else "") + f"); {os.cpu_count()} CPUs")
    print(f"{'path':<16} {'pkt/s':>12} {'ratio':>8}  detail")
    rows = []

    def show(name, rate, detail):
        base = rows[0][1] if rows else rate
        rows.append((name, rate))
        print(f"{name:<16} {rate:12,.0f} {rate / base:8.3f}  {detail}", flush=True)

    if a.framings:
        framings(source, tag, a, tiny)
    if "bulk" not in skip:
        res = []
        for _ in range(a.runs):
            la = loadavg()
            r = _child(CHILD_BULK, str(big), str(tiny), "table")
            r["load"] = la
            res.append(r)
        sec = statistics.median(r["seconds"] for r in res)
        show("bulk", a.packets / sec,
             f"read_packets, median of {a.runs}: {sec:.2f} s wall, "
             f"{statistics.median(r['cpu'] for r in res):.2f} s CPU, peak RSS "
             f"{statistics.median(r['hwm_mb'] for r in res):.0f} MB, {res[0]['rows']} rows; "
             f"process start + compiled-code load {statistics.median(r['startup'] for r in res):.2f} s "
             f"(not included); load {', '.join(r['load'] for r in res)}")
    if "stream" not in skip:
        res = []
        for _ in range(a.runs):
            la = loadavg()
            r = _child(CHILD_BULK, str(big), str(tiny), "stream")
            r["load"] = la
            res.append(r)
        sec = statistics.median(r["seconds"] for r in res)
        show("bulk-stream", a.packets / sec,
             f"iter_packets chunks, median of {a.runs}: {sec:.2f} s, peak RSS "
             f"{statistics.median(r['hwm_mb'] for r in res):.0f} MB; load "
             f"{', '.join(r['load'] for r in res)}")
    if "analyze" not in skip:
        res = []
        try:
            for _ in range(a.runs):
                la = loadavg()
                r = _child(CHILD_ANALYZE, str(big))
                r["load"] = la
                res.append(r)
            sec = statistics.median(r["seconds"] for r in res)
            show("analyze", a.packets / sec,
                 f"sipperf analyze end to end incl. imports, median of {a.runs}: {sec:.2f} s, peak RSS "
                 f"{statistics.median(r['hwm_mb'] for r in res):.0f} MB; load "
                 f"{', '.join(r['load'] for r in res)}")
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print(f"{'analyze':<16} {'failed':>12}           {e}")
    n_slice = min(a.slice, a.packets)
    if "tshark" not in skip:
        if shutil.which("tshark") is None:
            print("tshark-fields    skipped: tshark not installed")
        else:
            la = loadavg()
            ts = [bench_tshark_fields(small) for _ in range(a.runs)]
            sec = statistics.median(t for t, _ in ts)
            show("tshark-fields", n_slice / sec, f"-T fields, {n_slice} packets, median of {a.runs}: "
                 f"{sec:.2f} s; load {la}")
    if "dpkt" not in skip:
        try:
            import dpkt  # noqa: F401
        except ImportError:
            print("dpkt             skipped: dpkt is not installed (pip install dpkt)")
        else:
            la = loadavg()
            ds = [bench_dpkt(small) for _ in range(a.runs)]
            sec = statistics.median(t for t, _, _ in ds)
            show("dpkt", n_slice / sec, f"dpkt {ds[0][2]} pcapng+Ethernet+IP+UDP+dpkt.sip, {n_slice} "
                 f"packets, median of {a.runs}: {sec:.2f} s; load {la}")
    if "pyshark" not in skip:
        la = loadavg()
        r = statistics.median(bench_pyshark(small, a.subset, use_ek=True) for _ in range(a.runs))
        show("pyshark-ek", r, f"use_ek=True, SDP off, first {a.subset} packets, median of {a.runs}; load {la}")
        la = loadavg()
        r = statistics.median(bench_pyshark(small, a.subset // 2) for _ in range(a.runs))
        show("pyshark", r, f"default (PDML), first {a.subset // 2} packets, median of {a.runs}; load {la}")
    print(f"load average after: {loadavg()}")


def framings(source: Path, tag: str, a, tiny: Path) -> None:
    """The same calls in each framing, replicated to ``--packets`` packets: the compiled pass
    alone (wall and CPU seconds inside scan.scan) and the whole streamed read (iter_packets)."""
    tmp = Path(tempfile.gettempdir())
    print(f"\nframings of the same calls ({source.name}), {a.packets:,} packets each; compiled pass alone "
          f"(time inside scan.scan: wall, and CPU -- less sensitive to the machine's load) and the whole "
          f"streamed read (iter_packets); median of {a.runs} fresh processes")
    print(f"{'framing':<8} {'scan pkt/s':>12} {'ratio':>6} {'scan pkt/CPU-s':>15} {'ratio':>6} "
          f"{'read pkt/s':>12} {'SIP msgs':>10}  detail")
    base = None
    for fr in a.framings.split(","):
        one = tmp / f"sipperf-bench-{tag}-{fr}-source.pcapng"
        if not one.exists():
            reframe(source, fr, one)
        big = tmp / f"sipperf-bench-{tag}-{fr}-{a.packets}.pcapng"
        if not big.exists():
            replicate(one, big, a.packets)
        res = []
        for _ in range(a.runs):
            la = loadavg()
            r = _child(CHILD_BULK, str(big), str(tiny), "stream")
            r["load"] = la
            res.append(r)
        assert all(r["read"] == a.packets for r in res)
        scan = a.packets / statistics.median(r["scan_s"] for r in res)
        scan_cpu = a.packets / statistics.median(r["scan_cpu_s"] for r in res)
        read = a.packets / statistics.median(r["seconds"] for r in res)
        base = base or (scan, scan_cpu)
        print(f"{fr:<8} {scan:12,.0f} {scan / base[0]:6.2f} {scan_cpu:15,.0f} {scan_cpu / base[1]:6.2f} "
              f"{read:12,.0f} {res[0]['rows']:10,}  load {', '.join(r['load'] for r in res)}", flush=True)


if __name__ == "__main__":
    main()
