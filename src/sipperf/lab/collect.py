"""What a production proxy's host can tell during a load test, without tracepoints: the proxy's CPU
and the kernel's UDP/TCP counters, sampled from ``/proc`` into the file ``sipperf report --cpu``
reads (``sipperf collect``).

* **CPU**: ``utime + stime`` of every process of the proxy (the pids given and every process they
  forked, found again at each sample, or every process whose ``comm`` is the name given), from
  ``/proc/<pid>/stat`` in clock ticks (:mod:`sipperf.lab.cpuacct`).  A process that ends inside the
  window keeps its last reading; one that starts inside it counts from zero.
* **UDP**: ``Udp:`` of ``/proc/net/snmp`` and ``Udp6`` of ``/proc/net/snmp6`` (datagrams in,
  receive-buffer errors, other input errors; host-wide), and the ``drops`` column of every socket
  of ``/proc/net/udp`` and ``udp6`` bound to the proxy's port (that socket only).
* **TCP**: ``Tcp:`` of ``/proc/net/snmp`` (segments retransmitted, resets) and ``TcpExt:`` of
  ``/proc/net/netstat`` (accept-queue overflows, backlog and receive-queue drops, zero windows
  advertised): TCP never drops a datagram, it pushes back, so these are its overload signals.

A run's row is the difference of two samples (:func:`delta`), per counter; the host-wide counters
include every other program's traffic, which the report says.  Counters are read, never reset.
"""
from __future__ import annotations

import csv
import datetime as _dt
import os
import time
from dataclasses import dataclass
from pathlib import Path

from sipperf.lab.cpuacct import CLK_TCK, proc_cpu_s
from sipperf.lab.procs import children_of

#: kernel counters -> the column names of the collected file: (file, section, field)
COUNTERS: dict[str, tuple[str, str, str]] = {
    "udp_in_datagrams": ("snmp", "Udp", "InDatagrams"),
    "udp_rcvbuf_errors": ("snmp", "Udp", "RcvbufErrors"),
    "udp_in_errors": ("snmp", "Udp", "InErrors"),
    "udp_no_ports": ("snmp", "Udp", "NoPorts"),
    "udp6_in_datagrams": ("snmp6", "Udp6", "InDatagrams"),
    "udp6_rcvbuf_errors": ("snmp6", "Udp6", "RcvbufErrors"),
    "tcp_in_segs": ("snmp", "Tcp", "InSegs"),
    "tcp_retrans_segs": ("snmp", "Tcp", "RetransSegs"),
    "tcp_estab_resets": ("snmp", "Tcp", "EstabResets"),
    "tcp_out_rsts": ("snmp", "Tcp", "OutRsts"),
    "tcp_listen_overflows": ("netstat", "TcpExt", "ListenOverflows"),
    "tcp_listen_drops": ("netstat", "TcpExt", "ListenDrops"),
    "tcp_backlog_drops": ("netstat", "TcpExt", "TCPBacklogDrop"),
    "tcp_rcvq_drops": ("netstat", "TcpExt", "TCPRcvQDrop"),
    "tcp_zero_window_drops": ("netstat", "TcpExt", "TCPZeroWindowDrop"),
    "tcp_to_zero_window_adv": ("netstat", "TcpExt", "TCPToZeroWindowAdv"),
    "tcp_timeouts": ("netstat", "TcpExt", "TCPTimeouts"),
}
#: the counters that mean a message was lost at the proxy's host (UDP) or pushed back (TCP)
LOSS = ("socket_drops", "udp_rcvbuf_errors", "udp6_rcvbuf_errors", "tcp_listen_overflows", "tcp_listen_drops",
        "tcp_backlog_drops", "tcp_rcvq_drops", "tcp_zero_window_drops")
#: every counter column of the collected file, in order
COLUMNS = ("socket_drops", *COUNTERS)


@dataclass(frozen=True)
class Sample:
    t_s: float                      #: time.monotonic() when read
    cpu_s: float                    #: user + system seconds of the proxy's processes (see :func:`cpu_seconds`)
    processes: int                  #: how many processes were counted
    counters: dict                  #: COLUMNS -> value (None where this kernel has no such counter)
    rx_queue_bytes: int | None      #: the proxy's UDP socket's receive queue (bytes) at the sample


def _table(text: str, numbered: bool) -> dict[str, dict[str, int]]:
    """``/proc/net/snmp`` and ``netstat`` (pairs of lines: names, values) or ``snmp6`` (name value)."""
    out: dict[str, dict[str, int]] = {}
    lines = text.splitlines()
    if numbered:
        for names, values in zip(lines[0::2], lines[1::2]):
            sec, _, ns = names.partition(":")
            _, _, vs = values.partition(":")
            out[sec] = {n: int(v) for n, v in zip(ns.split(), vs.split()) if v.lstrip("-").isdigit()}
    else:
        for line in lines:
            f = line.split()
            if len(f) == 2 and f[1].isdigit():
                for sec in ("Udp6", "Tcp6", "Ip6", "Icmp6", "UdpLite6"):
                    if f[0].startswith(sec):
                        out.setdefault(sec, {})[f[0][len(sec):]] = int(f[1])
    return out


def kernel_counters(proc: Path = Path("/proc/net")) -> dict[str, int | None]:
    """The host's UDP and TCP counters of :data:`COUNTERS` (None where this kernel has none)."""
    tables = {}
    for name, numbered in (("snmp", True), ("snmp6", False), ("netstat", True)):
        try:
            tables[name] = _table((proc / name).read_text(), numbered)
        except OSError:
            tables[name] = {}
    return {col: tables[f].get(sec, {}).get(field) for col, (f, sec, field) in COUNTERS.items()}


def socket_counters(port: int, proc: Path = Path("/proc/net")) -> tuple[int | None, int | None]:
    """(drops, receive queue bytes) summed over the UDP sockets (IPv4 and IPv6) bound to ``port``;
    (None, None) when none is."""
    drops = queue = None
    for name in ("udp", "udp6"):
        try:
            lines = (proc / name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) < 13 or int(f[1].rsplit(":", 1)[1], 16) != port:
                continue
            drops = (drops or 0) + int(f[12])
            queue = (queue or 0) + int(f[4].split(":")[1], 16)
    return drops, queue


def proxy_pids(pids=(), comm: str | None = None) -> list[int]:
    """The proxy's processes: ``pids`` and every process they forked (recursively), or every
    process whose ``/proc/<pid>/comm`` is ``comm``."""
    if comm is not None:
        out = []
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    if (d / "comm").read_text().strip() == comm:
                        out.append(int(d.name))
                except OSError:
                    pass
        return sorted(out)
    seen: set[int] = set()
    todo = [int(p) for p in pids]
    while todo:
        p = todo.pop()
        if p in seen or not Path(f"/proc/{p}").exists():
            continue
        seen.add(p)
        todo.extend(children_of(p))
    return sorted(seen)


class Collector:
    """Samples the proxy's CPU and the kernel's counters; ``sample()`` at each interval."""

    def __init__(self, pids=(), comm: str | None = None, port: int | None = None):
        self.pids, self.comm, self.port = list(pids), comm, port
        self.first_cpu: dict[int, float] = {}    # per process: its CPU at the first sample it was seen in
        self.last_cpu: dict[int, float] = {}
        self.samples: list[Sample] = []

    def sample(self) -> Sample:
        now = time.monotonic()
        first = not self.samples
        for p in proxy_pids(self.pids, self.comm):
            c = proc_cpu_s(p)
            if c is None:
                continue
            if p not in self.first_cpu:
                self.first_cpu[p] = sum(c) if first else 0.0   # started inside the window: from zero
            self.last_cpu[p] = sum(c)
        cpu = sum(self.last_cpu[p] - self.first_cpu[p] for p in self.first_cpu)
        counters = kernel_counters()
        drops, queue = socket_counters(self.port) if self.port else (None, None)
        counters = {"socket_drops": drops, **counters}
        s = Sample(now, round(cpu, 4), len(self.first_cpu), counters, queue)
        self.samples.append(s)
        return s


def allowed_cpus(pids) -> int | None:
    """How many CPUs the processes ``pids`` may run on between them (the union of their affinity
    masks, ``sched_getaffinity``): workers that share one CPU share its time, whatever their count.
    None when no process is left to ask."""
    cpus: set[int] = set()
    for p in pids:
        try:
            cpus |= os.sched_getaffinity(p)
        except OSError:
            continue
    return len(cpus) or None


def delta(a: Sample, b: Sample) -> dict[str, float | None]:
    """What happened between two samples: CPU seconds, window, the CPU share, every counter's change."""
    w = b.t_s - a.t_s
    out: dict = {"cpu_s": round(b.cpu_s - a.cpu_s, 4), "window_s": round(w, 4),
                 "cpu_share": round((b.cpu_s - a.cpu_s) / w, 4) if w > 0 else None, "processes": b.processes}
    for c in COLUMNS:
        x, y = a.counters.get(c), b.counters.get(c)
        out[c] = y - x if x is not None and y is not None else None
    return out


def append_row(path: Path, row: dict) -> None:
    """Add ``row`` to the CSV ``path`` (written with its header when new); a file whose header
    differs is an error naming it (rows of two layouts are never mixed)."""
    path = Path(path)
    cols = list(row)
    if path.exists() and path.stat().st_size:
        with open(path, newline="") as fh:
            head = next(csv.reader(fh), [])
        if head != cols:
            raise ValueError(f"{path}: its header ({', '.join(head[:5])}, …) is not the collector's; "
                             "give a new file")
    new = not path.exists() or not path.stat().st_size
    with open(path, "a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        if new:
            w.writeheader()
        w.writerow({k: ("" if v is None else v) for k, v in row.items()})


def collect(*, pids=(), comm: str | None = None, port: int | None = None, seconds: float, interval_s: float = 1.0,
            out: Path, run: str | None = None, rate_cps: float | None = None, threads: int | None = None,
            samples: Path | None = None, stop=lambda: False, on_start=None) -> dict:
    """Sample for ``seconds`` (or until ``stop()`` is true), every ``interval_s``; append the run's
    row to ``out`` (the ``--cpu`` file of ``sipperf report``) and, with ``samples``, one row per
    interval to that file.  ``on_start(sample)`` is called once the first sample is taken (start
    the load after it).  Returns the run's row."""
    if not pids and comm is None:
        raise ValueError("name the proxy: --pid PID (its main process; the ones it forked are found) or --comm NAME")
    if seconds <= 0 or interval_s <= 0:
        raise ValueError("--seconds and --interval must be positive")
    col = Collector(pids, comm, port)
    s0 = col.sample()
    if not s0.processes:
        raise ValueError(f"no such process: {'comm ' + repr(comm) if comm else ', '.join(map(str, pids))}")
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    if on_start is not None:
        on_start(s0)                     # the first sample is taken: the load may start
    end = s0.t_s + seconds
    prev = s0
    while True:
        # sleep in short slices: a stop (SIGTERM, Ctrl-C) is sampled at once, so the row covers the
        # whole run up to the stop, not only up to the last full interval before it
        wake = min(time.monotonic() + interval_s, end)
        while not stop() and time.monotonic() < wake:
            time.sleep(min(0.05, max(0.0, wake - time.monotonic())))
        s = col.sample()
        if samples is not None:
            append_row(samples, {"run": run or "", "t_s": round(s.t_s - s0.t_s, 3), **delta(prev, s),
                                 "rx_queue_bytes": s.rx_queue_bytes})
        prev = s
        if stop() or s.t_s >= end:
            break
    row = {"run": run or "", "rate_cps": rate_cps if rate_cps is not None else "", "threads": threads or "",
           **delta(s0, prev), "cpus": allowed_cpus(col.first_cpu) or "",
           "port": port or "", "started_utc": started, "clock_tick_s": 1 / CLK_TCK,
           "host": os.uname().nodename}
    append_row(out, row)
    return row
