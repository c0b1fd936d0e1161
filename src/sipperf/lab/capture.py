"""The capture: dumpcap on the loopback interface, filtered to the proxy's UDP port."""
from __future__ import annotations

import re
import shutil
import signal
import time
from pathlib import Path

from sipperf.lab.procs import ProcessGroup, Proc

PCAP_NAME = "capture.pcapng"


def binary() -> str | None:
    return shutil.which("dumpcap")


def start(group: ProcessGroup, run_dir: Path, port: int, *, iface: str | list[str] = "lo",
          prefix: list[str] | None = None, buffer_mb: int = 64, bpf: str | None = None,
          name: str = "capture", out_name: str = PCAP_NAME) -> Proc:
    """dumpcap on ``iface`` (one or several interfaces) with the filter ``bpf`` (default: the
    proxy's UDP port) into ``out_name``; returns once it captures.  ``name`` names the process
    and its log (``<name>.log``)."""
    exe = binary()
    if not exe:
        raise RuntimeError("dumpcap not found (apt-get install tshark)")
    out = Path(run_dir) / out_name
    ifs = [iface] if isinstance(iface, str) else list(iface)
    flt = bpf or f"udp port {port}"
    # dumpcap's -f and -B apply to the -i before them: repeat them for every interface
    argv = [*(prefix or []), exe, *[a for i in ifs for a in ("-i", i, "-f", flt, "-B", str(buffer_mb))],
            "-w", str(out)]
    proc = group.start(name, argv, log=f"{name}.log", stop_signal=signal.SIGINT)
    deadline = time.monotonic() + 10
    log = Path(run_dir) / f"{name}.log"
    while time.monotonic() < deadline:
        if log.exists() and "Capturing on" in log.read_text(errors="replace"):
            break
        if proc.popen.poll() is not None:
            raise RuntimeError(f"dumpcap exited: {log.read_text(errors='replace')[-1000:]}")
        time.sleep(0.05)
    time.sleep(0.3)
    return proc


def stats(run_dir: Path, name: str = "capture") -> dict:
    """Packets captured and dropped as dumpcap reports them on exit (summed over interfaces)."""
    p = Path(run_dir) / f"{name}.log"
    text = p.read_text(errors="replace") if p.exists() else ""
    out: dict = {}
    m = re.findall(r"Packets captured:\s*(\d+)", text)
    if m:
        out["captured"] = sum(int(x) for x in m)
    m = re.findall(r"Packets received/dropped on interface '[^']*':\s*(\d+)/(\d+)", text)
    if m:
        out["received"] = sum(int(a) for a, _ in m)
        out["dropped"] = sum(int(b) for _, b in m)
    return out
