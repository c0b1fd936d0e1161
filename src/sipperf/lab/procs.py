"""Start and stop the lab's processes by pid, never by name.

Every process the lab starts is registered in a :class:`ProcessGroup`; leaving the group
(normally or by an exception) stops each one, newest first: SIGINT/SIGTERM, wait, then
SIGKILL to that pid and to the children it was seen to have (Kamailio forks its workers).
Other programs on the machine (other kamailio/sipp instances) are never touched.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Sequence


def _default_signals() -> None:
    """In the child: SIGINT/SIGTERM back to their defaults (a background shell ignores SIGINT,
    and an ignored signal stays ignored across exec, so dumpcap/bpftrace could not be stopped)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def exit_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit so that open :class:`ProcessGroup` blocks stop their processes."""
    def _handler(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, _handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def children_of(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc/<pid>/task/*/children)."""
    kids: list[int] = []
    task_dir = Path(f"/proc/{pid}/task")
    try:
        for t in task_dir.iterdir():
            try:
                kids += [int(x) for x in (t / "children").read_text().split()]
            except OSError:
                pass
    except OSError:
        pass
    return sorted(set(kids))


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return False


def reap(pids, timeout_s: float) -> list[int]:
    """Wait up to ``timeout_s`` (in all) for ``pids`` to exit, then SIGKILL each still alive, by
    its pid; returns the pids killed (a forked worker that outlives its parent still holds its
    sockets)."""
    killed: list[int] = []
    deadline = time.monotonic() + timeout_s
    for c in pids:
        while alive(c) and time.monotonic() < deadline:
            time.sleep(0.05)
        if alive(c):
            try:
                os.kill(c, signal.SIGKILL)
                killed.append(c)
            except ProcessLookupError:
                pass
    return killed


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    stop_signal: int = signal.SIGTERM
    children: list[int] = field(default_factory=list)
    log: IO | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def refresh_children(self) -> list[int]:
        now = children_of(self.pid)
        self.children = sorted(set(self.children) | set(now))
        return now


class ProcessGroup:
    """The processes of one lab run; a context manager that always stops them."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.procs: list[Proc] = []
        self.stopped: dict[str, dict] = {}

    def start(self, name: str, argv: Sequence[str], *, log: str | None = None,
              stop_signal: int = signal.SIGTERM, cwd: Path | None = None,
              env: dict | None = None) -> Proc:
        out = open(self.run_dir / log, "ab") if log else subprocess.DEVNULL
        popen = subprocess.Popen(
            list(argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            cwd=str(cwd or self.run_dir), env=env, preexec_fn=_default_signals,
        )
        p = Proc(name, popen, stop_signal, log=out if log else None)
        self.procs.append(p)
        return p

    def stop(self, p: Proc, timeout_s: float = 10.0) -> dict:
        """Signal ``p`` by pid, wait up to ``timeout_s``, then SIGKILL it and its children by pid."""
        if p.name in self.stopped:
            return self.stopped[p.name]
        p.refresh_children()
        info = {"pid": p.pid, "signal": signal.Signals(p.stop_signal).name, "killed": []}
        if p.popen.poll() is None:
            try:
                os.kill(p.pid, p.stop_signal)
            except ProcessLookupError:
                pass
            try:
                p.popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.kill(p.pid, signal.SIGKILL)
                info["killed"].append(p.pid)
                p.popen.wait(timeout=5)
        info["killed"] += reap(p.children, 3.0)
        info["returncode"] = p.popen.returncode
        if p.log:
            p.log.close()
        self.stopped[p.name] = info
        return info

    def stop_all(self) -> dict[str, dict]:
        for p in reversed(self.procs):
            self.stop(p)
        return self.stopped

    def __enter__(self) -> "ProcessGroup":
        return self

    def __exit__(self, *exc) -> None:
        self.stop_all()
