"""CPU seconds and CPU placement of the lab's processes, from ``/proc``.

Utilisation and service demand need the CPU a process *used*, not only the time its messages
spent on the traced path (issue 21): :class:`GroupCpu` reads ``utime + stime`` of every process
of a group (the proxy: Kamailio's main process and every process it forked; the load generator:
SIPp UAC and UAS) from ``/proc/<pid>/stat`` at the start and at the end of the load window.
A process's ``stat`` line sums all its threads; the unit is the clock tick (``SC_CLK_TCK``,
normally 10 ms), so the accounting is exact to one tick per process and window.

A process that ends inside the window (the SIPp UAC ends with its last call) is read with
:func:`wait_rusage` when it is reaped: ``wait4(2)`` returns the child's own resource usage
(µs), the same kernel counters ``/proc/<pid>/stat`` shows in ticks.

:func:`placement_of` records where a process may run and at what priority: its allowed CPUs
(``Cpus_allowed_list`` in ``/proc/<pid>/status``), nice value, scheduling policy and thread
count.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
SOURCE = "/proc/<pid>/stat utime + stime (all threads of each process), in clock ticks of 1/%d s" % CLK_TCK

_POLICIES = {0: "SCHED_OTHER", 1: "SCHED_FIFO", 2: "SCHED_RR", 3: "SCHED_BATCH", 5: "SCHED_IDLE",
             6: "SCHED_DEADLINE"}


def _stat_fields(pid: int) -> list[str] | None:
    try:
        s = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the fields after the command name (which may hold spaces and parentheses)
    return s.rsplit(")", 1)[1].split()


def proc_cpu_s(pid: int) -> tuple[float, float] | None:
    """(user, system) CPU seconds of ``pid`` so far (all its threads), or None if it is gone."""
    f = _stat_fields(pid)
    if f is None:
        return None
    # after ")": state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14) ... nice(16)
    return int(f[11]) / CLK_TCK, int(f[12]) / CLK_TCK


def _status(pid: int) -> dict[str, str]:
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            k, _, v = line.partition(":")
            out[k] = v.strip()
    except OSError:
        pass
    return out


def placement_of(pid: int, role: str = "") -> dict:
    """Where ``pid`` may run and at what priority (read back from the kernel, not assumed)."""
    d: dict = {"role": role, "pid": pid}
    st = _status(pid)
    if not st:
        d["error"] = "gone"
        return d
    f = _stat_fields(pid) or []
    d["comm"] = st.get("Name")
    d["cpus_allowed"] = st.get("Cpus_allowed_list")
    d["threads"] = int(st["Threads"]) if st.get("Threads", "").isdigit() else None
    d["nice"] = int(f[16]) if len(f) > 16 else None
    try:
        d["policy"] = _POLICIES.get(os.sched_getscheduler(pid), "?")
        d["rt_priority"] = os.sched_getparam(pid).sched_priority
    except OSError as e:
        d["policy_error"] = e.strerror
    return d


def cpus_of(placements: list[dict], role_prefix: str) -> list[str]:
    """The distinct allowed-CPU lists of the processes whose role starts with ``role_prefix``."""
    return sorted({p.get("cpus_allowed") or "?" for p in placements if p.get("role", "").startswith(role_prefix)})


def wait_rusage(popen) -> dict | None:
    """Reap ``popen`` if it has ended (non-blocking ``wait4``) and return its CPU use
    (``{"user_s", "system_s"}``, from the kernel's rusage of that child), else None.  Sets the
    Popen's ``returncode`` so that ``poll()`` keeps working."""
    if popen.returncode is not None:
        return None
    try:
        pid, status, ru = os.wait4(popen.pid, os.WNOHANG)
    except ChildProcessError:
        return None
    if pid == 0:
        return None
    popen.returncode = os.waitstatus_to_exitcode(status)
    return {"user_s": ru.ru_utime, "system_s": ru.ru_stime}


@dataclass
class GroupCpu:
    """CPU seconds of a group of processes over a window (see the module doc).

    ``start(pids)`` reads every process; ``add(pid)`` adds a process started inside the window
    (counted from zero: its whole life is inside); ``ended(pid, rusage)`` records the final use
    of a process reaped inside the window; ``stop()`` reads the rest and returns the record
    stored in ``meta.json`` (``cpu_s``, ``window_s``, ``processes``, ``source``, ...)."""

    name: str
    t0: float = 0.0
    first: dict[int, tuple[float, float]] = field(default_factory=dict)
    last: dict[int, tuple[float, float]] = field(default_factory=dict)
    how: dict[int, str] = field(default_factory=dict)

    def start(self, pids) -> "GroupCpu":
        self.t0 = time.monotonic()
        for p in pids:
            self._first(p)
        return self

    def _first(self, pid: int, zero: bool = False) -> None:
        v = (0.0, 0.0) if zero else proc_cpu_s(pid)
        if v is not None:
            self.first[pid] = v
            self.how[pid] = "stat"

    def add(self, pid: int) -> None:
        """A process started inside the window: its CPU counts from zero."""
        self._first(pid, zero=True)

    def total_s(self) -> float:
        """CPU seconds used so far by the group (from its latest samples), rounded to 0.1 ms."""
        tot = 0.0
        for p, (u0, s0) in self.first.items():
            u1, s1 = self.last.get(p, (u0, s0))
            tot += (u1 - u0) + (s1 - s0)
        return round(tot, 4)

    def sample(self) -> None:
        """Remember the latest reading of every live process (a process that disappears without
        being reaped by us keeps its last reading)."""
        for p in self.first:
            if self.how.get(p) == "rusage":
                continue
            v = proc_cpu_s(p)
            if v is not None:
                self.last[p] = v

    def ended(self, pid: int, rusage: dict | None) -> None:
        if rusage is not None and pid in self.first:
            self.last[pid] = (rusage["user_s"], rusage["system_s"])
            self.how[pid] = "rusage"

    def stop(self) -> dict:
        window = time.monotonic() - self.t0
        self.sample()
        per = []
        for p, (u0, s0) in self.first.items():
            u1, s1 = self.last.get(p, (u0, s0))
            per.append({"pid": p, "user_s": round(u1 - u0, 4), "system_s": round(s1 - s0, 4),
                        "read": self.how.get(p, "stat")})
        user = sum(r["user_s"] for r in per)
        system = sum(r["system_s"] for r in per)
        return {"cpu_s": round(user + system, 4), "user_s": round(user, 4), "system_s": round(system, 4),
                "window_s": round(window, 4), "processes": len(per),
                "utilisation": round((user + system) / window, 4) if window > 0 else None,
                "source": SOURCE + "; a process reaped inside the window: wait4(2) rusage",
                "resolution_s": round(1.0 / CLK_TCK, 4), "per_process": per}
