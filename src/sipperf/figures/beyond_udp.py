"""Numbers and small queueing views for ch. 10 (TCP for large SIP servers; process models).

Transcribed figures (cited in the book; never read from the seeds at run time):

* seed ``tcp`` (Ono & Schulzrinne): 2.3 KB of kernel slab memory per open TCP connection; an
  echo server on a 2 GB-kernel 32-bit Linux held about 520 000 connections (abstract: 450 000+);
  highest sustainable rates of the sipd server (requests/s at 100 % success):
  REGISTER test — transaction TCP 2900, persistent TCP with open 3300, persistent TCP 4100,
  UDP 5300; INVITE test — every TCP variant 700, UDP 900; opening a connection added about
  0.2 ms to the response time of the echo server.
* seed ``process_models`` (Lundström) Table 6.1: CPU time per half call (five SIP messages:
  INVITE, 200, ACK, BYE, 200) on one TSP traffic processor: asynchronous (event driven, one
  process) 0.10 ms, pooling (100 pre-created processes) 0.11 ms, dynamic (a new process per
  message) 0.39 ms.
* seed ``process_models`` Appendix E: latency of each SIP message through the prototype (from
  receipt to send, Ethereal time stamps, ms), about 10 000 calls per half-call rate.  Transcribed:
  the "SUMMARY" tables (all messages: E.6 asynchronous, E.12 dynamic, E.18 pooling) mean and
  median, and the INVITE tables (E.1, E.7, E.13) mean and median, at 100–700 and 900 half calls/s.
  Lundström attributes the high BYE latencies to SIPp sending BYE requests in bursts (§7.3).
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["TCP_KB_PER_CONNECTION", "TCP_SETUP_MS", "ECHO_MAX_CONNECTIONS", "SUSTAINABLE_RPS", "PROCESS_MODEL_CPU_MS",
           "MESSAGES_PER_HALF_CALL", "LATENCY_RATES", "LATENCY_MS", "tcp_kernel_memory_mb", "md1_sojourn_ms", "cpu_utilisation",
           "sustainable_ratio"]

_F = NDArray[np.float64]

TCP_KB_PER_CONNECTION = 2.3
TCP_SETUP_MS = 0.2
ECHO_MAX_CONNECTIONS = 520_000
SUSTAINABLE_RPS: dict[str, dict[str, float]] = {
    "register": {"tcp_transaction": 2900.0, "tcp_persistent_open": 3300.0, "tcp_persistent": 4100.0,
                 "udp": 5300.0},
    "invite": {"tcp": 700.0, "udp": 900.0},
}
PROCESS_MODEL_CPU_MS: dict[str, float] = {"asynchronous": 0.10, "pooling": 0.11, "dynamic": 0.39}
MESSAGES_PER_HALF_CALL = 5

#: half-call rates (per s) of Appendix E of seed ``process_models``
LATENCY_RATES = (100, 200, 300, 400, 500, 600, 700, 900)
#: Appendix E latencies (ms per message): prototype -> statistic -> one value per LATENCY_RATES
LATENCY_MS: dict[str, dict[str, tuple[float, ...]]] = {
    "asynchronous": {  # Tables E.6 (summary) and E.1 (INVITE)
        "mean": (0.80, 0.87, 0.92, 0.97, 0.98, 0.99, 1.00, 1.00),
        "median": (0.80, 0.89, 0.91, 0.93, 0.91, 0.91, 0.90, 0.88),
        "invite_mean": (0.95, 0.96, 0.96, 0.96, 0.96, 0.97, 0.97, 0.99),
        "invite_median": (0.96, 0.96, 0.96, 0.96, 0.96, 0.97, 0.97, 0.97),
    },
    "pooling": {  # Tables E.18 and E.13
        "mean": (0.92, 1.39, 1.86, 2.17, 2.28, 2.37, 2.47, 2.65),
        "median": (0.93, 1.43, 1.84, 2.19, 2.34, 2.50, 2.58, 2.73),
        "invite_mean": (0.97, 0.99, 1.05, 1.03, 1.00, 1.01, 1.01, 1.05),
        "invite_median": (0.97, 0.97, 0.97, 0.97, 0.97, 0.97, 0.97, 0.98),
    },
    "dynamic": {  # Tables E.12 and E.7
        "mean": (1.01, 1.61, 2.31, 3.06, 4.26, 5.25, 6.25, 7.76),
        "median": (1.01, 1.62, 2.26, 3.07, 4.27, 5.18, 6.09, 7.32),
        "invite_mean": (0.83, 0.87, 0.97, 1.08, 1.42, 1.73, 2.25, 3.51),
        "invite_median": (0.82, 0.82, 0.82, 0.84, 0.84, 0.86, 0.89, 1.10),
    },
}


def tcp_kernel_memory_mb(connections: ArrayLike, kb_per_connection: float = TCP_KB_PER_CONNECTION) -> _F:
    """Kernel memory (MB, 1 MB = 1000 KB as in the paper) pinned by open TCP connections."""
    n = np.asarray(connections, dtype=float)
    if np.any(n < 0):
        raise ValueError("connections must be >= 0")
    return n * kb_per_connection / 1000.0


def cpu_utilisation(rate_per_s: ArrayLike, cpu_ms: float) -> _F:
    """Fraction of one CPU used at ``rate_per_s`` jobs/s costing ``cpu_ms`` each (ρ = λ·x)."""
    return np.asarray(rate_per_s, dtype=float) * cpu_ms * 1e-3


def md1_sojourn_ms(rate_per_s: ArrayLike, cpu_ms: float) -> _F:
    """Mean time in an M/D/1 server (ms): x + ρx / (2(1-ρ)) (Pollaczek–Khinchine with E[X²] = x²);
    NaN where ρ ≥ 1."""
    if not (cpu_ms > 0):
        raise ValueError("cpu_ms must be > 0")
    rho = cpu_utilisation(rate_per_s, cpu_ms)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = cpu_ms + rho * cpu_ms / (2.0 * (1.0 - rho))
    return np.where(rho < 1.0, t, np.nan)


def sustainable_ratio(test: str = "invite") -> float:
    """TCP / UDP sustainable request rate of seed ``tcp`` (best TCP variant)."""
    r = SUSTAINABLE_RPS[test]
    tcp = max(v for k, v in r.items() if k.startswith("tcp"))
    return tcp / r["udp"]
