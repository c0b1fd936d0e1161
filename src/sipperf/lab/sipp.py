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
    buffer_bytes: int = 0           #: SIPp -buff_size (socket send/receive buffer); 0: SIPp's default
    late_counter: bool = True       #: SIPp's watchdog as a lateness counter (sipperf.lab.protocol)
    #: > 0: a closed population (``-users N`` with ``uac.xml``): N calls at all times, a new call
    #: as soon as one ends; the rate and the arrivals are then unused
    users: int = 0


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
            *_watchdog(cfg), *_buffer(cfg), *_retrans_args(cfg)]


#: SIPp ends a test after 120 "minor" watchdog trips (its main loop late by > 500 ms), which a
#: long run on a shared machine can reach; the trips are still counted (stats WatchdogMinor).
_WATCHDOG = ["-watchdog_minor_maxtriggers", "1000000", "-watchdog_major_maxtriggers", "1000000"]


def _watchdog(cfg: LoadConfig) -> list[str]:
    """SIPp's watchdog: with ``late_counter`` it fires every 10 ms and counts each time SIPp's
    main loop ran more than 20 ms late (:func:`sipperf.lab.protocol.watchdog_args`); otherwise
    SIPp's defaults (400 ms; a trip when > 500 ms late), never ending the test."""
    from sipperf.lab import protocol

    return protocol.watchdog_args() if cfg.late_counter else _WATCHDOG


def watchdog_record(cfg: LoadConfig) -> dict:
    """What SIPp's ``WatchdogMinor``/``WatchdogMajor`` counters mean in this run (meta.json)."""
    from sipperf.lab import protocol

    if cfg.late_counter:
        return {"interval_ms": protocol.WATCHDOG_INTERVAL_MS, "late_ms": protocol.LATE_MS,
                "major_late_ms": protocol.LATE_MAJOR_MS,
                "what": "a trip each time SIPp's main loop ran the 10-ms watchdog more than late_ms late"}
    return {"interval_ms": 400, "late_ms": None, "what": "SIPp defaults: a minor trip > 500 ms between runs"}


def _buffer(cfg: LoadConfig) -> list[str]:
    return ["-buff_size", str(int(cfg.buffer_bytes))] if cfg.buffer_bytes else []


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
              *_watchdog(cfg), *_buffer(cfg), *_retrans_args(cfg)]
    if cfg.users > 0:
        return [*common, "-sf", str(UAC_XML), "-users", str(int(cfg.users))]
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


def _index_of(key: str) -> int | None:
    head = key.split("_", 1)[0]
    return int(head) if head.isdigit() else None


def _bye_index(counts: dict[str, int]) -> int | None:
    idx = [_index_of(k) for k in counts if k.endswith("_BYE_Sent")]
    idx = [i for i in idx if i is not None]
    return min(idx) if idx else None


def invite_rejected(counts: dict[str, int]) -> int:
    """Calls whose INVITE was answered 503 (the UAC scenario's ``503`` received before its BYE)."""
    b = _bye_index(counts)
    return sum(v for k, v in counts.items() if k.endswith("_503_Recv")
               and (b is None or (_index_of(k) or 0) < b))


def bye_refused(counts: dict[str, int]) -> int:
    """Calls whose BYE was answered 503 (an all-request limit): set up, never torn down."""
    b = _bye_index(counts)
    if b is None:
        return 0
    return sum(v for k, v in counts.items() if k.endswith("_503_Recv") and (_index_of(k) or -1) > b)


def _counts_rows(run_dir: Path, side: str = "uac") -> list[dict[str, int]]:
    """Every row (cumulative, one per ``-fd`` period) of SIPp's ``-trace_counts`` file."""
    stem = "uac" if side == "uac" else "uas"
    files = sorted(p for p in Path(run_dir).glob("*_counts.csv")
                   if p.name.startswith(stem) and not p.name.startswith(stem + "_stats"))
    if not files:
        return []
    rows = list(csv.reader(files[-1].read_text(errors="replace").splitlines(), delimiter=";"))
    out = []
    for r in rows[1:]:
        d = {}
        for k, v in zip(rows[0], r):
            if k and k not in ("CurrentTime", "ElapsedTime"):
                try:
                    d[k] = int(v)
                except ValueError:
                    pass
        out.append(d)
    return out


def goodput_series(run_dir: Path) -> list[float]:
    """Calls completed per ``-fd`` period (1 s): SIPp's successful calls of the period minus the
    calls whose INVITE or BYE was answered 503 in it (SIPp's scenario ends both as successful).
    The statistics and counts files are written by the same periodic dump, row for row; [] when
    they do not line up."""
    succ = read_series(run_dir, columns=("SuccessfulCall(C)",)).get("SuccessfulCall(C)", [])
    rows = _counts_rows(run_dir, "uac")
    if not succ or len(rows) != len(succ):
        return []
    rej = [invite_rejected(r) + bye_refused(r) for r in rows]
    done = [s - r for s, r in zip(succ, rej)]
    return [float(b - a) for a, b in zip([0.0] + done[:-1], done)]


def duration_s(value) -> float:
    """SIPp's ``HH:MM:SS:uuuuuu`` statistics field (a response time, a call length) in seconds;
    NaN when it is not one."""
    parts = str(value).split(":")
    try:
        h, m, s, us = (int(x) for x in parts)
    except ValueError:
        return float("nan")
    return 3600.0 * h + 60.0 * m + s + us / 1e6
