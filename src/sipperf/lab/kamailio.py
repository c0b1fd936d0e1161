"""The proxy: render the Kamailio config template and start/identify its processes."""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from sipperf.lab.netutil import wait_udp_bound
from sipperf.lab.procs import ProcessGroup, Proc, children_of

TEMPLATE = Path(__file__).with_name("kamailio.cfg")


@dataclass
class ProxyConfig:
    """Knobs of the proxy under test."""

    workers: int = 1            #: UDP receiver processes (``children``)
    addr: str = "127.0.0.1"
    port: int = 5060
    uas_addr: str = "127.0.0.1"
    uas_port: int = 5080
    shm_mb: int = 128
    pkg_mb: int = 8


def render_config(cfg: ProxyConfig, run_dir: Path) -> str:
    text = TEMPLATE.read_text()
    subs = {
        "CHILDREN": str(cfg.workers), "ADDR": cfg.addr, "PORT": str(cfg.port),
        "UAS_ADDR": cfg.uas_addr, "UAS_PORT": str(cfg.uas_port), "SHM_MB": str(cfg.shm_mb),
        "CTL": str(Path(run_dir).resolve() / "kamailio_ctl.sock"),
    }
    for k, v in subs.items():
        text = text.replace(f"@@{k}@@", v)
    if "@@" in text:
        raise ValueError("kamailio.cfg template has an unfilled @@placeholder@@")
    return text


def binary() -> str | None:
    return shutil.which("kamailio")


def start(group: ProcessGroup, cfg: ProxyConfig, run_dir: Path,
          prefix: list[str] | None = None) -> Proc:
    """Start Kamailio in the foreground (-DD), logging to ``proxy.log``; wait until it listens."""
    exe = binary()
    if not exe:
        raise RuntimeError("kamailio not found (apt-get install kamailio)")
    cfg_path = Path(run_dir) / "kamailio.cfg"
    cfg_path.write_text(render_config(cfg, run_dir))
    argv = [*(prefix or []), exe, "-f", str(cfg_path), "-DD", "-E",
            "-m", str(cfg.shm_mb), "-M", str(cfg.pkg_mb),
            "-P", str(Path(run_dir) / "kamailio.pid")]
    proc = group.start("kamailio", argv, log="proxy.log")
    if not wait_udp_bound(cfg.addr, cfg.port, timeout_s=15):
        group.stop(proc)
        tail = (Path(run_dir) / "proxy.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"kamailio did not bind udp {cfg.addr}:{cfg.port}:\n{tail}")
    # wait for the forked processes (receivers, timers, ctl) to appear
    expected = cfg.workers + 3
    deadline = time.monotonic() + 5
    while len(children_of(proc.pid)) < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    proc.refresh_children()
    return proc


def pids(proc: Proc) -> list[int]:
    """The main pid and every forked Kamailio process."""
    return [proc.pid, *proc.refresh_children()]


def process_table(run_dir: Path, timeout_s: float = 5.0) -> list[dict]:
    """``kamcmd core.psx`` over the ctl socket: [{"pid", "desc"}]; [] when unavailable."""
    import subprocess

    exe = shutil.which("kamcmd")
    sock = Path(run_dir).resolve() / "kamailio_ctl.sock"
    if not exe or not sock.exists():
        return []
    try:
        out = subprocess.run([exe, "-s", f"unix:{sock}", "core.psx"], capture_output=True,
                             text=True, timeout=timeout_s).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    rows, cur = [], {}
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{"):
            cur = {}
        elif line.startswith("}"):
            if "pid" in cur:
                rows.append(cur)
        elif ":" in line:
            k, v = line.split(":", 1)
            k, v = k.strip().lower(), v.strip()
            if k in ("idx", "pid"):
                cur[k] = int(v)
            elif k in ("desc", "dsc"):
                cur["desc"] = v
    return rows


def receiver_pids(table: list[dict]) -> list[int]:
    return [r["pid"] for r in table if "receiver" in r.get("desc", "").lower()]
