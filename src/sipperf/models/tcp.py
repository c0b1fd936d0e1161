"""TCP for large SIP servers (seed ``tcp``, Ono & Schulzrinne): the figures the book uses.

Transcribed from the paper (cited in the book; never read from the seeds at run time):

* 2.3 KB of kernel slab memory per open TCP connection; an echo server on a 2 GB-kernel 32-bit
  Linux held about 520 000 connections (abstract: 450 000+); opening a connection added about
  0.2 ms to the response time of the echo server.
* highest sustainable rates of the sipd server (requests/s at 100 % success): REGISTER test —
  transaction TCP 2900, persistent TCP with open 3300, persistent TCP 4100, UDP 5300; INVITE
  test — every TCP variant 700, UDP 900.
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["TCP_KB_PER_CONNECTION", "TCP_SETUP_MS", "ECHO_MAX_CONNECTIONS", "SUSTAINABLE_RPS",
           "tcp_kernel_memory_mb", "sustainable_ratio"]

#: kernel memory per open TCP connection (KB)
TCP_KB_PER_CONNECTION = 2.3
#: extra response time of the echo server for opening a connection (ms)
TCP_SETUP_MS = 0.2
#: connections the 32-bit echo server held with a 2 GB kernel
ECHO_MAX_CONNECTIONS = 520_000
#: highest request rate at 100 % success of sipd (requests/s): test -> transport -> rate
SUSTAINABLE_RPS: dict[str, dict[str, float]] = {
    "register": {"tcp_transaction": 2900.0, "tcp_persistent_open": 3300.0, "tcp_persistent": 4100.0,
                 "udp": 5300.0},
    "invite": {"tcp": 700.0, "udp": 900.0},
}


def tcp_kernel_memory_mb(connections: ArrayLike, kb_per_connection: float = TCP_KB_PER_CONNECTION
                         ) -> NDArray[np.float64]:
    """Kernel memory (MB, 1 MB = 1000 KB as in the paper) pinned by open TCP connections."""
    n = np.asarray(connections, dtype=float)
    if np.any(n < 0):
        raise ValueError("connections must be >= 0")
    return n * kb_per_connection / 1000.0


def sustainable_ratio(test: str = "invite") -> float:
    """Sustainable request rate of the best TCP variant over that of UDP, ``test`` = "invite" or
    "register" (:data:`SUSTAINABLE_RPS`)."""
    r = SUSTAINABLE_RPS[test]
    tcp = max(v for k, v in r.items() if k.startswith("tcp"))
    return tcp / r["udp"]
