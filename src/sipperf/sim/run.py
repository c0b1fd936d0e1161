"""``simulate(params, seed, engine) -> (timeline, stats)``: one seeded run of the kernel-path model.

Two engines run the same model on the same pre-drawn inputs: ``"simpy"`` is the SimPy model the
book teaches (:mod:`sipperf.sim.model`), ``"twin"`` its fast twin (:mod:`sipperf.sim.fast_twin`),
validated against it by :mod:`sipperf.sim.calibration.twin_check`.  Both feed the functions below.

The timeline is in the schema of :mod:`sipperf.timeline` (int64 ns since ``epoch_ns``), one row
per message that reached the proxy; dropped messages have ``t_arr``/``t_stack`` only,
``dropped=True`` and ``drop_reason="rcvbuf full"`` (the kernel's RcvErrors, §6.2).
Extra columns: ``worker``-free by design; ``n_live`` (live calls when service started).
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd

from sipperf.sim.fast_twin import DROPPED, SERVED, FastTwin
from sipperf.sim.params import TYPES, SimParams
from sipperf.sim.workload import draw
from sipperf.timeline import make_timeline

DROP_REASON = "rcvbuf full"
UAC, PROXY, UAS = "192.0.2.1:5061", "192.0.2.2:5060", "192.0.2.3:5062"


def batch_means(x: np.ndarray, n_batches: int = 20, level: float = 0.95) -> tuple[float, float]:
    """Mean and CI half-width by the method of batch means (thesis §4.2: 95 % CI)."""
    from scipy import stats

    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if len(x) < 2 * n_batches:
        return float(np.mean(x)) if len(x) else float("nan"), float("nan")
    b = len(x) // n_batches
    means = x[: b * n_batches].reshape(n_batches, b).mean(axis=1)
    hw = stats.t.ppf(0.5 + level / 2, n_batches - 1) * means.std(ddof=1) / np.sqrt(n_batches)
    return float(means.mean()), float(hw)


#: the two engines: the SimPy model of the book and its fast twin
ENGINES = ("twin", "simpy")


def run_core(p: SimParams, seed: int, engine: str = "twin", count_events: bool = False):
    """Draw the inputs and run one engine; returns the finished run and the wall-clock seconds of
    its event loop (``run.cpu_s`` holds the CPU seconds)."""
    rng = np.random.default_rng(seed)
    wl = draw(p.workload, p.service, rng)
    return run_workload(p, wl, engine, count_events)


def run_workload(p: SimParams, wl, engine: str = "twin", count_events: bool = False):
    """Run ``engine`` on pre-drawn inputs ``wl`` (a :class:`~sipperf.sim.workload.Workload`).

    ``count_events`` makes the SimPy model step one event at a time to count them (slower); the
    twin always counts its events."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r} ({', '.join(ENGINES)})")
    t, c = time.perf_counter(), time.process_time()
    if engine == "twin":
        kp = FastTwin(p, wl)
        kp.run()
    else:
        from sipperf.sim.model import run_model

        kp = run_model(p, wl, count_events=count_events)
    kp.cpu_s = time.process_time() - c  # CPU seconds of the event loop (robust on a loaded box)
    kp.engine = engine
    return kp, time.perf_counter() - t


def message_arrays(kp) -> dict[str, np.ndarray]:
    """Per-message results of a finished run (as returned by :func:`run_workload`), numpy arrays
    indexed like the workload's messages, times in µs: ``t_stack``, ``t_start`` (service began),
    ``t_dep``, ``nlive``, ``extra`` (thread overhead charged) and ``outcome``; converted once."""
    arr = getattr(kp, "_arrays_cache", None)
    if arr is None:
        arr = kp._arrays_cache = {
            "t_stack": np.asarray(kp.t_stack, dtype=float), "t_start": np.asarray(kp.t_start, dtype=float),
            "t_dep": np.asarray(kp.t_dep, dtype=float), "nlive": np.asarray(kp.nlive),
            "extra": np.asarray(kp.extra, dtype=float),
            "outcome": np.frombuffer(bytes(kp.outcome), dtype=np.uint8).copy()}
    return arr


def _instants(kp) -> dict[str, np.ndarray]:
    """The five service instants of every served message on the wall clock (us), and K^s_sockq.

    The SimPy model records them as it goes (``kp.instants``); the fast twin's are placed from its
    run segments.  Computed once per finished run and cached on ``kp``.
    """
    cached = getattr(kp, "_instants_cache", None)
    if cached is None:
        if hasattr(kp, "instants"):
            steps = _steps(kp)
            cached = {**{k: np.asarray(v, float) for k, v in kp.instants.items()},
                      "k_sockq_s": steps[0], "work_us": steps.sum(axis=0)}
        else:
            cached = _place_instants(kp)
        kp._instants_cache = cached
    return cached


def _steps(kp) -> np.ndarray:
    """(5, n) CPU work of the five steps of X per message (µs): K^s_sockq, K_copy, T^1_sip, T^2_sip,
    K_snd, with the thread overhead and contention in T_sip (as both engines compute them)."""
    s = kp.p.service
    mt, u = kp.wl.mtype, kp.wl.u
    arr = message_arrays(kp)
    nl = arr["nlive"].astype(float)
    ks = u * kp.alpha * np.asarray(s.ks_base_us)[mt]
    cp = u * s.k_copy_us
    tsip = u * np.asarray(s.t_sip_us)[mt] * (1.0 + s.t_sip_growth_per_call * nl) + arr["extra"]
    t1 = tsip * s.t_sip1_share
    snd = u * np.asarray(s.k_snd_us)[mt]
    return np.stack([ks, cp, t1, tsip - t1, snd])


def _place_instants(kp: FastTwin) -> dict[str, np.ndarray]:
    t_start = message_arrays(kp)["t_start"]
    steps = _steps(kp)
    ks = steps[0]
    cum = np.cumsum(steps, axis=0)  # (5, n) work thresholds
    out = t_start[None, :] + cum
    if kp.segs:
        # preempted messages: threshold w lies in the last run segment whose work-done is < w
        # (segments are in run order, work-done non-decreasing: searchsorted(done, w, "left") - 1)
        ms = np.fromiter(kp.segs.keys(), dtype=np.int64, count=len(kp.segs))
        lens = np.fromiter(map(len, kp.segs.values()), dtype=np.int64, count=len(ms))
        flat = np.array([x for seg in kp.segs.values() for x in seg], dtype=float).reshape(-1, 2)
        st, dn = flat[:, 0], flat[:, 1]
        off = np.zeros(len(ms), dtype=np.int64)
        np.cumsum(lens[:-1], out=off[1:])
        w = cum[:, ms]                                            # (5, M)
        below = (dn[None, :] < np.repeat(w, lens, axis=1)).astype(np.int64)
        i = off + np.clip(np.add.reduceat(below, off, axis=1) - 1, 0, lens - 1)
        out[:, ms] = st[i] + (w - dn[i])
    t_dep = message_arrays(kp)["t_dep"]
    out[4] = np.where(np.isfinite(t_dep), t_dep, out[4])
    out = np.minimum(out, out[4][None, :])
    return {"t_sockq": out[0], "t_sip_in": out[1], "t_sip_c": out[2], "t_sip_out": out[3], "t_dep": out[4],
            "k_sockq_s": ks, "work_us": cum[4]}


def _ns(x_us: np.ndarray, mask: np.ndarray, epoch_ns: int) -> pd.arrays.IntegerArray:
    v = np.where(mask, np.round(np.nan_to_num(x_us) * 1000.0), 0).astype(np.int64) + epoch_ns
    return pd.arrays.IntegerArray(v, ~mask)


def _strings(cats: list[str], codes: np.ndarray) -> pd.api.extensions.ExtensionArray:
    """A "string" column from a few values ``cats`` and per-row codes (-1 = null): one take,
    no per-row Python objects."""
    return pd.array(list(cats), dtype="string").take(np.asarray(codes, dtype=np.intp), allow_fill=True)


def _call_ids(call: np.ndarray) -> pd.api.extensions.ExtensionArray:
    """``"sim-<call>"`` for every row, as a "string" column."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:  # pragma: no cover - pandas' string dtype normally brings pyarrow
        return pd.array([f"sim-{c}" for c in call.tolist()], dtype="string")
    return pd.array(pc.binary_join_element_wise("sim-", pc.cast(pa.array(call), pa.string()), ""),
                    dtype="string")


def to_timeline(kp, epoch_ns: int = 0) -> pd.DataFrame:
    """The schema-conforming timeline of one run (rows in message-index order)."""
    wl = kp.wl
    arr = message_arrays(kp)
    oc = arr["outcome"]
    sent = (oc == SERVED) | (oc == DROPPED)
    idx = np.flatnonzero(sent)
    n = len(idx)
    served = (oc == SERVED)[idx]
    mt = wl.mtype[idx]
    ins = _instants(kp)
    t_stack = arr["t_stack"][idx]
    t_arr = t_stack - np.asarray(kp.p.service.k_stack_us)[mt]
    call = idx // 6 if kp.sip else idx
    is_req = np.isin(mt, (0, 3, 4))
    status = np.select([mt == 1, (mt == 2) | (mt == 5)], [180, 200], -1)
    cseq = np.where(mt >= 4, 2, 1)
    zeros = np.zeros(n, dtype=np.intp)
    all_true = np.ones(n, bool)
    data = {
        "run_id": _strings([kp.p.run_id], zeros),
        "call_id": _call_ids(call),
        "cseq": cseq,
        "cseq_method": _strings(["INVITE", "ACK", "BYE"], np.where(mt >= 4, 2, np.where(mt == 3, 1, 0))),
        "kind": _strings(["response", "request"], is_req),
        "method": _strings(list(TYPES), np.where(is_req, mt, -1)),
        "status": pd.arrays.IntegerArray(np.maximum(status, 0), status < 0),
        "msg_type": _strings(list(TYPES), mt),
        "src": _strings([UAS, UAC], is_req),
        "dst": _strings([PROXY], zeros),
        "size": np.asarray(kp.p.service.size_b)[mt],
        "t_arr": _ns(t_arr, all_true, epoch_ns),
        "t_stack": _ns(t_stack, all_true, epoch_ns),
    }
    for name in ("t_sockq", "t_sip_in", "t_sip_c", "t_sip_out", "t_dep"):
        data[name] = _ns(ins[name][idx], served, epoch_ns)
    data["dropped"] = pd.arrays.BooleanArray(~served, np.zeros(n, bool))
    data["drop_reason"] = _strings([DROP_REASON], np.where(served, -1, 0))
    data["n_live"] = arr["nlive"][idx]
    return make_timeline(pd.DataFrame(data))


def stats_of(kp, loop_s: float, warmup: float = 0.02) -> dict[str, Any]:
    """Summary of one run: drops, waiting time K^w (mean with a batch-means CI, 99th percentile),
    service, speed.  The first ``warmup`` share of the messages (by t_stack) is left out."""
    arr = message_arrays(kp)
    oc = arr["outcome"]
    ts = arr["t_stack"]
    sent = (oc == SERVED) | (oc == DROPPED)
    idx = np.flatnonzero(sent)
    t_stack = ts[idx]
    order = idx[np.argsort(t_stack, kind="stable")]
    skip = int(len(order) * warmup)
    order = order[skip:]
    served = oc[order] == SERVED
    ins = _instants(kp)
    srv = order[served]
    # K^w = K_sockq - K^s_sockq = time from enqueue to the thread starting on the packet
    kw = ins["t_sockq"][srv] - ts[srv] - ins["k_sockq_s"][srv]
    tsip = ins["t_sip_out"][srv] - ins["t_sip_in"][srv]
    krcv = ins["t_sip_in"][srv] - (ts[srv] - np.asarray(kp.p.service.k_stack_us)[kp.wl.mtype[srv]])
    w_mean, w_hw = batch_means(kw)
    d_mean, d_hw = batch_means((~served).astype(float))
    n_sent = int(sent.sum())
    n_drop = int((oc == DROPPED).sum())
    t_dep = arr["t_dep"]
    dur_us = float(np.nanmax(t_dep)) if np.isfinite(t_dep).any() else 0.0
    busy = float(np.sum(ins["work_us"][oc == SERVED]))    # CPU work of X (switch costs excluded)
    p = kp.p
    return {
        "rate_cps": p.workload.rate_cps, "calls": kp.wl.n_calls, "threads": p.kernel.threads,
        "cores": p.kernel.cores, "sched_mode": p.sched.mode, "arrivals": p.workload.arrivals,
        "offered_pps": p.offered_pps(), "alpha": kp.alpha,
        "messages": n_sent, "served": n_sent - n_drop, "dropped": n_drop,
        "drop_rate": n_drop / n_sent if n_sent else float("nan"),
        "drop_rate_bm": d_mean, "drop_rate_ci": d_hw,
        "calls_completed": int((oc[5::6] == SERVED).sum()) if kp.sip else None,
        "w_us": w_mean, "w_ci_us": w_hw,
        "w_p99_us": float(np.percentile(kw, 99)) if len(kw) else float("nan"),
        "k_rcv_us": float(np.mean(krcv)) if len(krcv) else float("nan"),
        "t_sip_us": float(np.mean(tsip)) if len(tsip) else float("nan"),
        "busy_frac": busy / dur_us / max(1, p.kernel.cores) if dur_us else float("nan"),
        "max_queue": kp.max_q, "preemptions": kp.preemptions, "switches": kp.switches,
        "migrations": kp.migrations, "events": kp.events, "loop_s": loop_s,
        "engine": getattr(kp, "engine", "twin"),
        "events_per_s": kp.events / loop_s if loop_s > 0 else float("nan"),
    }


def simulate(params: SimParams, seed: int = 0, *, timeline: bool = True, epoch_ns: int = 0,
             engine: str = "twin") -> tuple[pd.DataFrame | None, dict[str, Any]]:
    """Run the model once; returns ``(timeline, stats)`` (timeline None if ``timeline=False``).

    ``engine``: ``"twin"`` (fast, the default) or ``"simpy"`` (the model of chapter 9); the same
    seed gives both engines the same inputs."""
    p = params
    if p.sched.model == "ideal":  # one core per thread, switches free: the M/M/c/K reference
        from dataclasses import replace
        p = replace(p, kernel=replace(p.kernel, cores=p.kernel.threads, thread_overhead_us=0.0,
                                      contention=0.0))
        p = replace(p, sched=replace(p.sched, cs_us=0.0, cache_us_per_thread=0.0, migrate_us=0.0,
                                  migrate_cross_us=0.0))
    kp, loop_s = run_core(p, seed, engine)
    st = stats_of(kp, loop_s)
    st["seed"] = seed
    tl = to_timeline(kp, epoch_ns) if timeline else None
    return tl, st
