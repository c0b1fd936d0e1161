"""Loopback helpers: who listens on a port, the receive-buffer account of a socket.

``pid``: read the tables of the network namespace ``pid`` lives in (``/proc/<pid>/net/``; the
lab's three-namespace option, :mod:`sipperf.lab.netns`); None: this process's own.
"""
from __future__ import annotations

import socket
import struct
import time
from pathlib import Path


def _hex_addr(addr: str, port: int) -> str:
    packed = socket.inet_aton(addr)
    return f"{struct.unpack('<I', packed)[0]:08X}:{port:04X}"


def _net(pid: int | None) -> Path:
    return Path(f"/proc/{pid}/net") if pid else Path("/proc/net")


def udp_socket_info(addr: str, port: int, pid: int | None = None) -> dict | None:
    """The /proc/net/udp row of the socket bound to addr:port (queue, drops, inode) or None."""
    key = _hex_addr(addr, port)
    try:
        lines = (_net(pid) / "udp").read_text().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        f = line.split()
        if f[1] == key:
            tx, rx = f[4].split(":")
            return {"rx_queue_bytes": int(rx, 16), "tx_queue_bytes": int(tx, 16),
                    "inode": int(f[9]), "drops": int(f[12]) if len(f) > 12 else None}
    return None


def port_in_use(addr: str, port: int, pid: int | None = None) -> bool:
    return (udp_socket_info(addr, port, pid) is not None
            or udp_socket_info("0.0.0.0", port, pid) is not None)


def listening(port: int) -> bool:
    """Whether any socket of this namespace listens on TCP ``port`` or is bound to UDP ``port``
    (any address; ``ss``)."""
    import subprocess
    got = subprocess.run(["ss", "-Hlntu", f"( sport = :{port} )"], capture_output=True, text=True).stdout
    return bool(got.strip())


def wait_udp_bound(addr: str, port: int, timeout_s: float = 10.0, pid: int | None = None) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if udp_socket_info(addr, port, pid) is not None:
            return True
        time.sleep(0.05)
    return False


def snmp_udp(pid: int | None = None) -> dict[str, int]:
    """The Udp: counters of /proc/net/snmp (InDatagrams, RcvbufErrors, ...)."""
    lines = [l.split() for l in (_net(pid) / "snmp").read_text().splitlines() if l.startswith("Udp:")]
    names, values = lines[0][1:], lines[1][1:]
    return {n: int(v) for n, v in zip(names, values)}
