"""What a run's ``meta.json`` records about the machine: versions, CPU, scheduler knobs,
clocks, load, UDP counters."""
from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import time
from pathlib import Path

SCHED_DEBUGFS = Path("/sys/kernel/debug/sched")


def _first_line(argv: list[str]) -> str | None:
    if not shutil.which(argv[0]):
        return None
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in (r.stdout + "\n" + r.stderr).splitlines():
        line = line.strip()
        if line and not line.startswith("Running as user"):
            return line
    return None


def versions() -> dict:
    out = {
        "kamailio": _first_line(["kamailio", "-v"]),
        "sipp": _first_line(["sipp", "-v"]),
        "tshark": _first_line(["tshark", "-v"]),
        "dumpcap": _first_line(["dumpcap", "-v"]),
        "bpftrace": _first_line(["bpftrace", "--version"]),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "python": platform.python_version(),
    }
    try:
        from sipperf import __version__
        out["sipperf"] = __version__
    except ImportError:
        pass
    return out


def cpu() -> dict:
    models = re.findall(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
    return {
        "model": models[0] if models else platform.processor(),
        "count": os.cpu_count(),
        "affinity_of_runner": sorted(os.sched_getaffinity(0)),
    }


def _probe_file(path: Path) -> dict:
    """Readable? (and the value) Writable? -- tested by opening for writing, never writing."""
    d: dict = {"path": str(path)}
    try:
        d["value"] = path.read_text().strip()[:200]
        d["readable"] = True
    except OSError as e:
        d["readable"] = False
        d["read_error"] = e.strerror
    try:
        fd = os.open(path, os.O_WRONLY)
        os.close(fd)
        d["writable"] = True
    except OSError as e:
        d["writable"] = False
        d["write_error"] = e.strerror
    return d


def sched_knobs(mount_debugfs: bool = True) -> dict:
    """The scheduler knobs this kernel exposes: /proc/sys/kernel/sched_* and debugfs sched/*."""
    out: dict = {"proc_sys": {}, "debugfs": {}, "debugfs_mounted": False}
    for p in sorted(Path("/proc/sys/kernel").glob("sched_*")):
        out["proc_sys"][p.name] = _probe_file(p)
    if not Path("/sys/kernel/debug").joinpath("sched").exists() and mount_debugfs and os.geteuid() == 0:
        subprocess.run(["mount", "-t", "debugfs", "none", "/sys/kernel/debug"], capture_output=True)
        out["debugfs_mount_attempted"] = True
    if SCHED_DEBUGFS.is_dir():
        out["debugfs_mounted"] = True
        for p in sorted(SCHED_DEBUGFS.iterdir()):
            if p.is_file():
                out["debugfs"][p.name] = _probe_file(p)
            else:
                out["debugfs"][p.name + "/"] = "directory"
    out["tools"] = {t: bool(shutil.which(t)) for t in ("chrt", "taskset", "renice")}
    return out


def clock_offset_ns(samples: int = 200) -> dict:
    """CLOCK_REALTIME - CLOCK_MONOTONIC (ns), from the tightest of ``samples`` bracketed reads.

    bpftrace's ``nsecs`` is CLOCK_MONOTONIC; pcap, skb->tstamp and Kamailio's $TV are
    CLOCK_REALTIME; this offset converts the former into the latter.
    """
    best = None
    for _ in range(samples):
        m1 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        r = time.clock_gettime_ns(time.CLOCK_REALTIME)
        m2 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        if best is None or m2 - m1 < best[0]:
            best = (m2 - m1, r - (m1 + m2) // 2)
    return {"offset_ns": int(best[1]), "uncertainty_ns": int(best[0])}


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def cpu_times() -> dict[str, list[int]]:
    """Per-CPU jiffies from /proc/stat: user nice system idle iowait irq softirq steal."""
    out = {}
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("cpu"):
            f = line.split()
            out[f[0]] = [int(x) for x in f[1:9]]
    return out


def busy_fraction(before: dict, after: dict) -> dict[str, float]:
    """Fraction of each CPU's time that was not idle/iowait between two :func:`cpu_times`."""
    out = {}
    for k in after:
        if k in before:
            d = [a - b for a, b in zip(after[k], before[k])]
            tot = sum(d)
            out[k] = round(1.0 - (d[3] + d[4]) / tot, 4) if tot else 0.0
    return out


def top_processes(n: int = 8) -> list[dict]:
    """The processes using most CPU right now (ps), to describe other load on the machine."""
    try:
        r = subprocess.run(["ps", "-eo", "pid,pcpu,comm", "--sort=-pcpu"], capture_output=True,
                           text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return []
    rows = []
    for line in r.stdout.splitlines()[1:n + 1]:
        f = line.split(None, 2)
        if len(f) == 3:
            rows.append({"pid": int(f[0]), "pcpu": float(f[1]), "comm": f[2]})
    return rows


def net_sysctls() -> dict:
    out = {}
    for name in ("rmem_default", "rmem_max", "wmem_default", "wmem_max", "netdev_max_backlog",
                 "netdev_tstamp_prequeue"):
        p = Path("/proc/sys/net/core") / name
        try:
            out[name] = int(p.read_text())
        except (OSError, ValueError):
            pass
    return out


def socket_memory(port: int, prefix: list[str] | None = None) -> str | None:
    """``ss -uamn`` for the proxy's socket (skmem: rb = the receive buffer limit in bytes);
    ``prefix``: run it in the proxy's network namespace (``ip netns exec NS``)."""
    if not shutil.which("ss"):
        return None
    r = subprocess.run([*(prefix or []), "ss", "-uamnH", f"sport = :{port}"], capture_output=True, text=True)
    return " ".join(r.stdout.split()) or None
