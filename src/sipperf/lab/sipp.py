"""The load: SIPp UAS and UAC command lines, Poisson arrival offsets, SIPp statistics.

Arrivals.  SIPp 3.6 starts calls deterministically (``-r RATE``: evenly spaced) and has no
Poisson rate option (seed 000 patched SIPp for it).  Poisson arrivals here come from the
scenario instead: ``uac_poisson.xml`` starts every call at once (``-users N -m N``) and makes
call *k* wait ``offset[k]`` ms before its INVITE; the offsets are the cumulative sums of
i.i.d. exponential gaps with mean ``1000/rate`` ms drawn with a recorded seed and passed in
an injection file (``-inf``).  SIPp's timer has 1 ms resolution, so each arrival is late by
< 1 ms (uniform), which leaves the process Poisson to within that jitter.
"""
from __future__ import annotations

import csv
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
UAC_XML = HERE / "uac.xml"
UAC_POISSON_XML = HERE / "uac_poisson.xml"
UAS_XML = HERE / "uas.xml"


@dataclass
class LoadConfig:
    rate_cps: float = 20.0
    calls: int = 200
    arrivals: str = "deterministic"   #: or "poisson"
    hold_ms: int = 250
    seed: int = 1
    uac_addr: str = "127.0.0.1"
    uac_port: int = 5061
    uas_addr: str = "127.0.0.1"
    uas_port: int = 5080
    retransmissions: bool = True    #: False: SIPp -nr on both ends (seed 000 ran without them)
    recv_timeout_ms: int = 5000     #: with -nr, a call waiting longer than this for a reply fails


def binary() -> str | None:
    return shutil.which("sipp")


def poisson_offsets_ms(rate_cps: float, calls: int, seed: int) -> np.ndarray:
    """Arrival offsets (ms from the start) of a Poisson process of ``rate_cps``: cumsum of Exp gaps."""
    if rate_cps <= 0 or calls <= 0:
        raise ValueError("rate and calls must be positive")
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1000.0 / rate_cps, size=calls)
    return np.cumsum(gaps) - gaps[0]   # first call at t = 0


def write_injection(path: Path, offsets_ms: np.ndarray) -> None:
    # one field per line, "\n" only: SIPp's <todouble> rejects a trailing "\r"
    with open(path, "w", newline="\n") as f:
        f.write("SEQUENTIAL\n")
        for x in offsets_ms:
            f.write(f"{x:.3f};\n")


def uas_argv(cfg: LoadConfig) -> list[str]:
    exe = binary()
    if not exe:
        raise RuntimeError("sipp not found (apt-get install sip-tester)")
    return [exe, "-sf", str(UAS_XML), "-i", cfg.uas_addr, "-p", str(cfg.uas_port),
            "-nostdin", "-trace_err", "-error_file", "uas_errors.log", "-max_recv_loops", "100000",
            "-trace_stat", "-stf", "uas_stats.csv", "-fd", "1", "-trace_counts",
            *_WATCHDOG, *_retrans_args(cfg)]


#: SIPp ends a test after 120 "minor" watchdog trips (its main loop late by > 500 ms), which a
#: long run on a shared machine can reach; the trips are still counted (stats WatchdogMinor).
_WATCHDOG = ["-watchdog_minor_maxtriggers", "1000000", "-watchdog_major_maxtriggers", "1000000"]


def _retrans_args(cfg: LoadConfig) -> list[str]:
    return [] if cfg.retransmissions else ["-nr", "-recv_timeout", str(int(cfg.recv_timeout_ms))]


def uac_argv(cfg: LoadConfig, proxy_addr: str, proxy_port: int, run_dir: Path,
             timeout_s: float) -> list[str]:
    exe = binary()
    if not exe:
        raise RuntimeError("sipp not found (apt-get install sip-tester)")
    common = [exe, f"{proxy_addr}:{proxy_port}", "-i", cfg.uac_addr, "-p", str(cfg.uac_port),
              "-m", str(cfg.calls), "-d", str(cfg.hold_ms), "-nostdin",
              "-timeout", f"{int(timeout_s)}s", "-trace_err", "-error_file", "uac_errors.log",
              "-trace_stat", "-stf", "uac_stats.csv", "-fd", "1",
              "-trace_screen", "-screen_file", "uac_screen.log",
              "-max_recv_loops", "100000", "-max_sched_loops", "100000", "-trace_counts",
              *_WATCHDOG, *_retrans_args(cfg)]
    if cfg.arrivals == "deterministic":
        return [*common, "-sf", str(UAC_XML), "-r", f"{cfg.rate_cps:g}",
                "-l", str(max(cfg.calls, 1))]
    if cfg.arrivals == "poisson":
        inj = Path(run_dir) / "poisson_offsets.csv"
        # every offset + 1 ms (a shift of the whole process): with -nr, SIPp 3.6 never wakes a
        # call whose pause is 0 ms, so the first call (offset 0) would hang until the timeout
        write_injection(inj, poisson_offsets_ms(cfg.rate_cps, cfg.calls, cfg.seed) + 1.0)
        return [*common, "-sf", str(UAC_POISSON_XML), "-users", str(cfg.calls),
                "-inf", str(inj)]
    raise ValueError(f"arrivals must be deterministic or poisson, not {cfg.arrivals!r}")


def read_stats(run_dir: Path, name: str = "uac_stats.csv") -> dict:
    """The last row of SIPp's -trace_stat CSV (cumulative counters), as a dict of numbers/strings."""
    p = Path(run_dir) / name
    if not p.exists():
        return {}
    rows = list(csv.reader(p.read_text(errors="replace").splitlines(), delimiter=";"))
    if len(rows) < 2:
        return {}
    head, last = rows[0], rows[-1]
    out = {}
    for k, v in zip(head, last):
        if not k:
            continue
        try:
            out[k] = float(v) if "." in v else int(v)
        except ValueError:
            out[k] = v
    return out


def read_series(run_dir: Path, name: str = "uac_stats.csv",
                columns: tuple[str, ...] = ("SuccessfulCall(P)", "FailedCall(P)", "OutgoingCall(P)",
                                            "Retransmissions(P)")) -> dict[str, list[float]]:
    """Per-period (``-fd 1``: per second) counters of SIPp's -trace_stat CSV, oldest first."""
    p = Path(run_dir) / name
    if not p.exists():
        return {}
    rows = list(csv.reader(p.read_text(errors="replace").splitlines(), delimiter=";"))
    if len(rows) < 2:
        return {}
    head = rows[0]
    out: dict[str, list[float]] = {}
    for c in columns:
        if c in head:
            i = head.index(c)
            vals = []
            for r in rows[1:]:
                try:
                    vals.append(float(r[i]))
                except (ValueError, IndexError):
                    vals.append(float("nan"))
            out[c] = vals
    return out


def read_counts(run_dir: Path, side: str = "uac") -> dict[str, int]:
    """The last row of SIPp's ``-trace_counts`` file for the UAC or UAS scenario: per scenario
    message ``<index>_<msg>_<Sent|Recv|Retrans|Timeout|Unexp>`` counters."""
    stem = "uac" if side == "uac" else "uas"
    files = sorted(p for p in Path(run_dir).glob("*_counts.csv")
                   if p.name.startswith(stem) and not p.name.startswith(stem + "_stats"))
    if not files:
        return {}
    rows = list(csv.reader(files[-1].read_text(errors="replace").splitlines(), delimiter=";"))
    if len(rows) < 2:
        return {}
    out = {}
    for k, v in zip(rows[0], rows[-1]):
        if k and k not in ("CurrentTime", "ElapsedTime"):
            try:
                out[k] = int(v)
            except ValueError:
                pass
    return out


def count_of(counts: dict[str, int], message: str, what: str) -> int:
    """Sum of ``<i>_<message>_<what>`` over the scenario (e.g. ``count_of(c, "503", "Recv")``)."""
    return sum(v for k, v in counts.items()
               if k.split("_", 1)[-1] == f"{message}_{what}")
