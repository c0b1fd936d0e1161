"""Controlled background load: bounded CPU-bound busy loops that compete with the proxy.

A stand-in for the unrelated work of a shared server (the ``sched_load`` series and the
"with load" scheduler runs).  Each loop is a plain Python process at nice 0, not pinned, started
in a session of its own (as work from another login would be, which matters when
``sched_autogroup_enabled`` groups tasks by session), stopped by pid, and exits by itself after
``limit_s`` even if nobody stops it.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys

_HOG = "import time\nend = time.monotonic() + {limit}\nwhile time.monotonic() < end:\n    pass\n"


def _any_cpu() -> None:
    """In the child: free to run on every CPU (the recorder itself may be pinned)."""
    os.sched_setaffinity(0, range(os.cpu_count() or 1))


def start_hogs(n: int, limit_s: float = 120.0, new_session: bool = True) -> list[subprocess.Popen]:
    """Start ``n`` busy loops; stop them with :func:`stop_hogs`."""
    return [subprocess.Popen([sys.executable, "-c", _HOG.format(limit=float(limit_s))],
                             start_new_session=new_session, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             preexec_fn=_any_cpu)
            for _ in range(n)]


def stop_hogs(hogs: list[subprocess.Popen]) -> None:
    for h in hogs:
        if h.poll() is None:
            try:
                os.kill(h.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    for h in hogs:
        try:
            h.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.kill(h.pid, signal.SIGKILL)
            h.wait()


def describe(n: int, limit_s: float, new_session: bool = True) -> dict:
    return {"busy_loops": n, "nice": 0, "pinned": False, "limit_s": limit_s,
            "own_session": new_session,
            "what": "python busy loops started before and stopped (by pid) after the load phase"}
