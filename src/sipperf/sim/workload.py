"""The SIPp workload: call inter-arrival times and UAC/UAS reaction times, drawn up front.

Thesis §4.1.2: the patched SIPp reads a file of inter-arrival times (one per line); here
"poisson", "deterministic" or "file:PATH" (seconds, one per line, cycled if shorter than the
run).  Each call produces INVITE, 180, 200, ACK, BYE, 200 through the proxy (Fig. 2.2);
the follow-up messages are timed from the proxy's own departures (see sipperf.sim.model), so the
packet stream at the proxy is the superposition the thesis describes, not a Poisson stream.
The UA reaction times (INVITE -> 180, 180 -> 200, 200 -> ACK, BYE -> 200) are exponential by
default, or constant / gamma (``WorkloadParams.react_dist``, ``react_cv``); ``tick_us`` moves each
INVITE to SIPp's next timer tick.  All random numbers are drawn here, in numpy arrays, from one
seeded generator (with the defaults the draws are exactly those of earlier versions).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sipperf.sim.params import ServiceParams, WorkloadParams


def read_iat_file(path: str | Path) -> np.ndarray:
    """Inter-arrival times (seconds) from a SIPp ``-iat_file`` style file: one number per line.

    Refuses (``ValueError`` naming the file and line) anything that is not a finite number >= 0:
    text, NaN, inf, negative values; and a file that is not UTF-8 text."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not a UTF-8 text file of inter-arrival times") from e
    vals = []
    for i, line in enumerate(text.splitlines(), 1):
        s = line.split("#", 1)[0].strip()
        if not s:
            continue
        try:
            v = float(s)
        except ValueError as e:
            raise ValueError(f"{path}:{i}: not a number: {s[:40]!r}") from e
        if not np.isfinite(v):
            raise ValueError(f"{path}:{i}: not a finite inter-arrival time: {s[:40]!r}")
        if v < 0:
            raise ValueError(f"{path}:{i}: negative inter-arrival time {v}")
        vals.append(v)
    if not vals:
        raise ValueError(f"{path}: no inter-arrival times")
    return np.asarray(vals, dtype=float)


def interarrivals_us(w: WorkloadParams, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` inter-arrival times in microseconds for the configured arrival process."""
    if w.mode == "packets":
        if not (np.isfinite(w.packet_rate_pps) and w.packet_rate_pps > 0):
            raise ValueError(f"packet_rate_pps must be a finite number > 0, not {w.packet_rate_pps!r}")
        return rng.exponential(1e6 / w.packet_rate_pps, n)
    if not (np.isfinite(w.rate_cps) and w.rate_cps > 0):
        raise ValueError(f"rate_cps must be a finite number > 0, not {w.rate_cps!r}")
    mean_us = 1e6 / w.rate_cps
    if w.arrivals == "poisson":
        return rng.exponential(mean_us, n)
    if w.arrivals == "deterministic":
        return np.full(n, mean_us)
    if w.arrivals.startswith("file:"):
        iat = read_iat_file(w.arrivals[5:]) * 1e6
        return np.resize(iat, n)
    raise ValueError(f"unknown arrivals {w.arrivals!r} (poisson, deterministic, file:PATH)")


def service_multipliers(s: ServiceParams, n: int, rng: np.random.Generator) -> np.ndarray:
    """Unit-mean multipliers of the service time X (one per message)."""
    if s.dist == "exp":
        return rng.exponential(1.0, n)
    if s.dist == "det":
        return np.ones(n)
    if s.dist == "gamma":
        if s.cv <= 0:
            return np.ones(n)
        k = 1.0 / s.cv ** 2
        return rng.gamma(k, 1.0 / k, n)
    raise ValueError(f"unknown service distribution {s.dist!r} (gamma, exp, det)")


@dataclass
class Workload:
    """Pre-drawn randomness of one run (all times in microseconds)."""

    n_calls: int
    n_msgs: int
    #: arrival instant of each call's INVITE (or of each packet, mode "packets")
    t0_us: np.ndarray
    #: message type 0..5 of each message index (mode "sip": index = 6 * call + type)
    mtype: np.ndarray
    u: np.ndarray
    uas_react_us: np.ndarray
    uas_gap_us: np.ndarray
    uac_react_us: np.ndarray
    uas_bye_react_us: np.ndarray


def draw(w: WorkloadParams, s: ServiceParams, rng: np.random.Generator) -> Workload:
    n = int(w.calls)
    if n <= 0:
        raise ValueError("calls must be positive")
    t0 = np.cumsum(interarrivals_us(w, n, rng))
    if w.tick_us > 0 and w.mode == "sip":
        t0 = np.ceil(t0 / w.tick_us) * w.tick_us
    if w.mode == "packets":
        m = n
        mtype = rng.integers(0, 6, m).astype(np.int64)
        z = np.zeros(0)
        return Workload(n, m, t0, mtype, service_multipliers(s, m, rng), z, z, z, z)
    m = 6 * n
    mtype = np.tile(np.arange(6, dtype=np.int64), n)
    u = service_multipliers(s, m, rng)

    def ex(mean: float) -> np.ndarray:
        return reaction_times_us(w, mean, n, rng)

    bye = w.uas_react_us if w.uas_bye_react_us is None else w.uas_bye_react_us
    return Workload(n, m, t0, mtype, u, ex(w.uas_react_us), ex(w.uas_gap_us), ex(w.uac_react_us),
                    ex(bye))


def packets_at(t_us, mtype=None, u=None) -> Workload:
    """A packet-mode workload (``WorkloadParams(mode="packets")``) whose packets arrive at the
    instants ``t_us`` (µs), for schedules worked out by hand: message types ``mtype`` (default
    all 0, INVITE) and unit-mean service multipliers ``u`` (default 1: every packet costs exactly
    its type's mean service time)."""
    t = np.asarray(t_us, dtype=float)
    n = len(t)
    none = np.zeros(0)  # no calls: no UA reaction times
    return Workload(n_calls=n, n_msgs=n, t0_us=t,
                    mtype=np.zeros(n, np.int64) if mtype is None else np.asarray(mtype, np.int64),
                    u=np.ones(n) if u is None else np.asarray(u, float),
                    uas_react_us=none, uas_gap_us=none, uac_react_us=none, uas_bye_react_us=none)


def reaction_times_us(w: WorkloadParams, mean_us: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` UA reaction times (us) with mean ``mean_us`` and the distribution ``w.react_dist``."""
    if mean_us <= 0:
        return np.zeros(n)
    if w.react_dist == "exp":
        return rng.exponential(mean_us, n)
    if w.react_dist == "det":
        return np.full(n, float(mean_us))
    if w.react_dist == "gamma":
        if w.react_cv <= 0:
            return np.full(n, float(mean_us))
        k = 1.0 / w.react_cv ** 2
        return rng.gamma(k, mean_us / k, n)
    raise ValueError(f"unknown reaction-time distribution {w.react_dist!r} (exp, det, gamma)")
