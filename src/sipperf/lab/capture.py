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


def start(group: ProcessGroup, run_dir: Path, port: int, *, iface: str = "lo",
          prefix: list[str] | None = None, buffer_mb: int = 64) -> Proc:
    exe = binary()
    if not exe:
        raise RuntimeError("dumpcap not found (apt-get install tshark)")
    out = Path(run_dir) / PCAP_NAME
    argv = [*(prefix or []), exe, "-i", iface, "-f", f"udp port {port}", "-B", str(buffer_mb),
            "-w", str(out)]
    proc = group.start("capture", argv, log="capture.log", stop_signal=signal.SIGINT)
    deadline = time.monotonic() + 10
    log = Path(run_dir) / "capture.log"
    while time.monotonic() < deadline:
        if log.exists() and "Capturing on" in log.read_text(errors="replace"):
            break
        if proc.popen.poll() is not None:
            raise RuntimeError(f"dumpcap exited: {log.read_text(errors='replace')[-1000:]}")
        time.sleep(0.05)
    time.sleep(0.3)
    return proc


def stats(run_dir: Path) -> dict:
    """Packets captured and dropped as dumpcap reports them on exit."""
    text = (Path(run_dir) / "capture.log").read_text(errors="replace") if (Path(run_dir) / "capture.log").exists() else ""
    out: dict = {}
    m = re.search(r"Packets captured:\s*(\d+)", text)
    if m:
        out["captured"] = int(m.group(1))
    m = re.search(r"Packets received/dropped on interface '[^']*':\s*(\d+)/(\d+)", text)
    if m:
        out["received"], out["dropped"] = int(m.group(1)), int(m.group(2))
    return out
