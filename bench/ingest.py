"""Capture ingest speed: pyshark default, pyshark's fastest mode, tshark fields, and the bulk reader.

    .venv/bin/python bench/ingest.py [--calls 8000] [--rate 400] [--runs 3] [--pcap FILE]

Without ``--pcap`` it records a REAL capture first (not synthetic): Kamailio 5.6 (the
transaction-stateful config of tests/fixtures/lab/kam.cfg) relaying SIPp's built-in
uac/uas call flow on loopback UDP ports 15160/15180/15170, captured by dumpcap — 13
packets per call, so 8000 calls give ~104k packets.  Every process started is stopped by
pid.  Then it prints packets/s:

* bulk      — sipperf.ingest.pcapfast.read_packets, median of ``--runs`` runs on the whole file;
* pyshark-default — pyshark.FileCapture (PDML) on the first ``--subset`` packets only
  (it reads ~600 pkt/s; the whole file would take minutes), extrapolated: stated as such;
* pyshark-ek — pyshark's fastest mode (use_ek=True, SDP disabled) on the same subset;
* tshark-fields — ``tshark -T fields`` (what a pyshark custom-fields mode costs) on the whole file;
* pairing — sipperf.ingest.pairing.pair_at_proxy on the bulk reader's packet table.

The bulk figure is also given per CPU-second: the machine is shared, and wall-clock rates
move with the load average printed first.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KAM_CFG = ROOT / "tests" / "fixtures" / "lab" / "kam.cfg"
PORTS = dict(proxy=15160, uas=15180, uac=15170)


def record(out: Path, calls: int, rate: int) -> Path:
    """Record a real Kamailio + SIPp capture into ``out`` (pcapng); returns the path."""
    work = Path(tempfile.mkdtemp(prefix="sipperf-bench-"))
    cfg = work / "kam.cfg"
    cfg.write_text(KAM_CFG.read_text().replace("UASADDR", f"sip:127.0.0.1:{PORTS['uas']}"))
    filt = " or ".join(f"udp port {p}" for p in PORTS.values())
    procs = []
    try:
        cap = subprocess.Popen(["dumpcap", "-q", "-i", "lo", "-f", filt, "-w", str(out)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(cap)
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


def n_packets(path: Path) -> int:
    out = subprocess.run(["capinfos", "-M", "-c", "-T", str(path)], capture_output=True, text=True).stdout
    return int(out.strip().splitlines()[-1].split("\t")[-1])


def bench_bulk(path: Path, runs: int) -> tuple[float, float, int]:
    """Median wall and CPU (process) seconds of full reads; the CPU figure is the one that
    does not depend on how many other jobs share the cores."""
    from sipperf.ingest import pcapfast
    wall, cpu = [], []
    n = 0
    for _ in range(runs):
        t, c = time.perf_counter(), time.process_time()
        df, rep = pcapfast.read_packets(path, progress=False)
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
        n = rep.read
    return statistics.median(wall), statistics.median(cpu), n


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


def bench_tshark_fields(path: Path) -> float:
    cmd = ["tshark", "-n", "-r", str(path), "--disable-protocol", "sdp", "-T", "fields",
           "-e", "frame.number", "-e", "frame.time_epoch", "-e", "ip.src", "-e", "ipv6.src",
           "-e", "udp.srcport", "-e", "ip.dst", "-e", "udp.dstport", "-e", "sip.Call-ID",
           "-e", "sip.CSeq.seq", "-e", "sip.CSeq.method", "-e", "sip.Method", "-e", "sip.Status-Code",
           "-e", "sip.Via.branch"]
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, check=True).stdout
    dt = time.perf_counter() - t
    return out.count(b"\n") / dt


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pcap", type=Path, help="an existing capture (default: record one)")
    ap.add_argument("--calls", type=int, default=8000)
    ap.add_argument("--rate", type=int, default=400)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--subset", type=int, default=3000, help="packets for the pyshark modes")
    a = ap.parse_args(argv)
    path = a.pcap
    if path is None:
        path = Path(tempfile.gettempdir()) / f"sipperf-bench-{a.calls}x{a.rate}.pcapng"
        if not path.exists():
            print(f"recording a real capture: {a.calls} calls at {a.rate} cps -> {path}", flush=True)
            record(path, a.calls, a.rate)
    total = n_packets(path)
    print(f"capture: {path} ({total} packets, {path.stat().st_size / 1e6:.1f} MB)")
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    dt, ct, n = bench_bulk(path, a.runs)
    print(f"bulk (pcapfast)      : {n / dt:10.0f} pkt/s wall, {n / ct:.0f} pkt/s per CPU-second "
          f"(median of {a.runs} full reads: {dt:.2f} s wall, {ct:.2f} s CPU)")
    import resource
    print(f"  peak RSS after the bulk reads: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB "
          f"(includes the mmapped file pages)")
    from sipperf.ingest import pcapfast
    from sipperf.ingest.pairing import pair_at_proxy
    packets, _ = pcapfast.read_packets(path, progress=False)
    times = []
    for _ in range(a.runs):
        t = time.perf_counter()
        tl, _rep = pair_at_proxy(packets)
        times.append(time.perf_counter() - t)
    dt = statistics.median(times)
    print(f"pairing at the proxy : {len(packets) / dt:10.0f} pkt/s  (median of {a.runs}; "
          f"{len(tl)} timeline rows)")
    r = bench_tshark_fields(path)
    print(f"tshark -T fields     : {r:10.0f} pkt/s  (1 full read)")
    r = bench_pyshark(path, a.subset, use_ek=True)
    print(f"pyshark use_ek       : {r:10.0f} pkt/s  (first {a.subset} packets)")
    r = bench_pyshark(path, min(a.subset, 1500))
    print(f"pyshark default      : {r:10.0f} pkt/s  (first {min(a.subset, 1500)} packets only; "
          f"the whole file extrapolates to {total / r / 60:.1f} min)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
