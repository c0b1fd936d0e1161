"""Fit the kernel-path model to the lab's own recordings (issue 6 item 4, last sentence).

``python -m sipperf.sim.calibration.fit_lab`` writes ``datasets/precomputed/sim_lab_fit.csv`` (one row per
point of the lab's 1-worker rate sweep) and ``sim_lab_fit.provenance.md`` beside it.

The recording is the protocol one (``--lab``, default ``datasets/lab/protocol``; :func:`lab_sweep`):
its ``runs.csv`` names the points, ``runs/<run_id>/timeline.parquet`` keeps every message of
1,500 consecutive calls of each 1-worker point, the first whose INVITE arrived after the point's
warm-up (the point itself ran >= 20,000 calls).  The model is compared with that kept window --
it runs on the window's own arrivals -- and the whole point's drop rate and sojourn from
``runs.csv`` are copied beside it as context (``point_*``), not as the target.

1. **Service inputs from measured data** (:func:`estimate_components`, :func:`service_from_lab`):
   from the light-load points :data:`LIGHT_RUNS` (25 and 50 calls/s), per message type, the
   components of eq. (3.1)-(3.3) of seed 000 on the relayed, not dropped messages::

       k_stack  = t_stack - t_arr                  -> ServiceParams.k_stack_us   (mean)
       ks_base  = t_sockq - t_stack, thread asleep  -> ServiceParams.ks_base_us  (median, see below)
       k_copy   = t_sip_in - t_sockq                -> ServiceParams.k_copy_us   (mean over all types)
       t_sip1   = t_sip_c - t_sip_in                \\
       t_sip2   = t_sip_out - t_sip_c               /-> t_sip_us = mean(t_sip1 + t_sip2),
                                                       t_sip1_share = sum t_sip1 / sum t_sip
       k_snd    = t_dep - t_sip_out                 -> ServiceParams.k_snd_us    (mean)

   ``ks_base`` (K^{s,base}_sockq, the socket-queue time without queueing) is taken from the
   messages that found the worker asleep (``sockq_src == "switch_in"``: ``t_sockq`` is the
   wake-up), as a *median*: the mean of that wake-up latency has a long tail (waits for the
   CPU, e.g. behind Kamailio's own timer processes, which share CPU 0 with the worker under the
   protocol), which the model does not contain.  K_copy itself is not observable on this kernel; the lab bounds it by
   ``0 <= K_copy <= recv_copied - t_sockq`` (reported as ``k_copy_max``).  The model's K_copy
   segment spans ``t_sockq .. t_sip_in`` (the rest of the recvfrom call included), so that is
   what the model is given.  The unit-mean service multiplier's CV is the SD of
   ``x / mean_type(x)`` with ``x = k_copy + t_sip + k_snd``.  alpha (the share of messages
   that pay K^s_sockq in their service): on loopback there is no NIC interrupt path (the softirq
   runs in the sender's context), and K^s_sockq is the worker's wake-up, so alpha is the share of
   messages that found it asleep (:func:`asleep_share`; light load for the model's inputs, per
   point for the variants).  T_sip growth with live calls: 0 (not identifiable
   from two light-load runs, and the lab's work per message *falls* with load; the table shows
   the lab's T_sip median per rate instead).
2. **Socket buffer**: ``rcvbuf_bytes`` from ``meta.json`` (``skmem rb``), the per-skb overhead
   from the queue length at the lab's own drop instants (:func:`estimate_rcvbuf`).
3. **Same workload** (:func:`lab_workload`): each call's INVITE arrives at the lab's recorded
   ``t_arr``; UAS/UAC reaction times are the lab's per call (loopback: ``net_us = 0``); the
   holding time is the lab's median ACK -> BYE gap.
4. **Compare** (:func:`metrics`): per rate, median/mean/p99 of the socket-queue time
   ``K_sockq = t_sockq - t_stack`` and of the sojourn ``t_dep - t_arr``, and the drop rate, over
   the window's messages up to its last INVITE (:func:`complete_span`); the model plays the
   window's calls twice and is measured on the second pass (:func:`simulate_lab`, ``warm``),
   since the window starts with the proxy already loaded by the point's earlier calls.

What the model lacks: other load on the machine (the protocol points were recorded on an idle
machine, ``foreign_cpu_mean``); the change of the proxy's work per message and of its sleeping
with load (shown by ``service_scale`` and ``lab_asleep_share``); Kamailio's loop outside the
traced interval (``lab_cycle_gap_*``); the proxy's own 100 Trying and timer processes; the late
ACKs/BYEs SIPp sends after its 5-s timeout for calls that lost a message (the protocol's worker
points run without retransmissions, SIPp ``-nr``; the model's calls just end).
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sipperf.components import derive_arrays
from sipperf.ingest.lab_runs.dataset import complete_span as lab_complete_span
from sipperf.ingest.lab_runs.dataset import load_meta, load_run
from sipperf.sim.fast_twin import FastTwin
from sipperf.sim.params import TYPES, ServiceParams, SimParams, make_params
from sipperf.sim.run import stats_of, to_timeline
from sipperf.sim.workload import Workload, draw

ROOT = Path(__file__).resolve().parents[4]
#: the protocol recording (runs.csv + runs/<run_id>/timeline.parquet)
LAB_DIR = ROOT / "datasets" / "lab" / "protocol"
OUT_CSV = ROOT / "datasets" / "precomputed" / "sim_lab_fit.csv"
#: the light-load points the service inputs are estimated from (no drops)
LIGHT_RUNS: tuple[str, ...] = ("workers-c1-r00025", "workers-c1-r00050")
#: runs.csv columns copied into the fit table: the machine during the point, and the whole
#: point's own numbers (>= 20,000 calls; context for the 1,500-call window the model is run on)
POINT_COLS: dict[str, str] = {
    "foreign_cpu_mean": "foreign_cpu_mean", "proxy_cpu_util": "proxy_cpu_util",
    "invite_burst_p99_ms": "invite_burst_p99_ms", "generator_bound": "generator_bound",
    "machine_busy": "machine_busy", "calls_offered": "point_calls", "pdr": "point_pdr",
    "pdr_ci_hw": "point_pdr_ci_hw", "sojourn_mean_us": "point_sojourn_mean_us",
    "sojourn_ci_hw_us": "point_sojourn_ci_hw_us", "sojourn_p50_us": "point_sojourn_p50_us",
    "sojourn_p99_us": "point_sojourn_p99_us"}
#: components estimated per message type (µs)
COMPS: tuple[str, ...] = ("k_stack", "ks_base", "k_copy", "k_copy_max", "t_sip1", "t_sip2", "t_sip",
                          "k_snd", "x")
NS_PER_US = 1e3


def _f(s: pd.Series) -> np.ndarray:
    """Nullable Int64 ns column -> float64 ns (NaN for null).  Use on :func:`rebase` d timelines:
    absolute epoch ns (~1.8e18) have only 256 ns resolution as float64."""
    return s.to_numpy(dtype="float64", na_value=np.nan)


TIME_COLS: tuple[str, ...] = ("t_arr", "t_stack", "t_sockq", "t_sip_in", "t_sip_c", "t_sip_out", "t_dep",
                              "recv_copied")


def rebase(tl: pd.DataFrame) -> pd.DataFrame:
    """A copy with every instant as exact integer ns since the run's first ``t_arr``."""
    t0 = int(tl["t_arr"].min())
    d = tl.copy(deep=False)
    for c in TIME_COLS:
        if c in d.columns:
            d[c] = d[c] - t0
    return d


def served_mask(tl: pd.DataFrame) -> np.ndarray:
    """Messages that came from a UA (not the proxy's own 100 Trying) and were not dropped."""
    return (tl["origin"] != "proxy").to_numpy() & ~tl["dropped"].fillna(False).to_numpy(bool)


def complete_span(tl: pd.DataFrame) -> tuple[float, float]:
    """``(start, end)``, ns after the window's first arrival (as :func:`rebase`): the part of a
    kept window that holds (nearly) every datagram the proxy received
    (:func:`sipperf.ingest.lab_runs.dataset.complete_span`, which says how)."""
    t0 = int(tl["t_arr"].min())
    lo, hi = lab_complete_span(tl)
    return float(lo - t0), float(hi - t0)


def component_arrays(tl: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per-message components in µs (NaN where undefined), incl. ``ks_base`` (asleep only),
    ``k_copy_max`` (``recv_copied - t_sockq``) and ``x = k_copy + t_sip + k_snd``."""
    c = {k: v / NS_PER_US for k, v in derive_arrays(tl).items()}
    asleep = (tl["sockq_src"] == "switch_in").fillna(False).to_numpy(bool)
    c["ks_base"] = np.where(asleep, c["k_sockq"], np.nan)
    r = rebase(tl)
    c["k_copy_max"] = (_f(r["recv_copied"]) - _f(r["t_sockq"])) / NS_PER_US
    c["x"] = c["k_copy"] + c["t_sip"] + c["k_snd"]
    return c


def estimate_components(tls: list[pd.DataFrame]) -> pd.DataFrame:
    """One row per message type (call-flow order) plus ``ALL``: ``<comp>_{n,mean,sd,median}`` (µs)
    over the served messages of the given (light-load) timelines."""
    cs = [component_arrays(t) for t in tls]
    m = np.concatenate([served_mask(t) for t in tls])
    mt = np.concatenate([t["msg_type"].astype(str).to_numpy() for t in tls])
    arr = {k: np.concatenate([c[k] for c in cs]) for k in COMPS}
    rows = []
    for name in (*TYPES, "ALL"):
        sel = m & ((mt == name) if name != "ALL" else np.isin(mt, TYPES))
        row: dict[str, Any] = {"msg_type": name}
        for k in COMPS:
            v = arr[k][sel]
            v = v[np.isfinite(v)]
            row[f"{k}_n"] = len(v)
            row[f"{k}_mean"] = float(v.mean()) if len(v) else np.nan
            row[f"{k}_sd"] = float(v.std(ddof=1)) if len(v) > 1 else np.nan
            row[f"{k}_median"] = float(np.median(v)) if len(v) else np.nan
        rows.append(row)
    return pd.DataFrame(rows).set_index("msg_type")


def service_cv(tls: list[pd.DataFrame]) -> float:
    """SD of ``x / mean_type(x)`` over the served messages: the CV of the model's unit-mean
    service multiplier (one multiplier for the whole of X, as in the model)."""
    pooled = []
    xs = {n: [] for n in TYPES}
    for t in tls:
        c = component_arrays(t)
        m = served_mask(t)
        mt = t["msg_type"].astype(str).to_numpy()
        for name in TYPES:
            v = c["x"][m & (mt == name)]
            xs[name].append(v[np.isfinite(v)])
    for name in TYPES:
        v = np.concatenate(xs[name])
        pooled.append(v / v.mean())
    return float(np.concatenate(pooled).std(ddof=1))


def service_from_lab(est: pd.DataFrame, cv: float) -> ServiceParams:
    """The model's service inputs (:class:`ServiceParams`) from :func:`estimate_components`."""
    e = est.loc[list(TYPES)]
    t1, t2 = e["t_sip1_mean"].to_numpy(), e["t_sip2_mean"].to_numpy()
    n1 = e["t_sip1_n"].to_numpy()
    share = float((t1 * n1).sum() / ((t1 + t2) * n1).sum())
    return ServiceParams(
        k_stack_us=tuple(float(v) for v in e["k_stack_mean"]),
        ks_base_us=tuple(float(v) for v in e["ks_base_median"]),
        k_copy_us=float(est.loc["ALL", "k_copy_mean"]),
        t_sip_us=tuple(float(a + b) for a, b in zip(t1, t2)),
        t_sip1_share=share,
        k_snd_us=tuple(float(v) for v in e["k_snd_mean"]),
        t_sip_growth_per_call=0.0, dist="gamma", cv=cv, alpha_fixed=1.0)


def rcvbuf_bytes_of(meta: dict) -> int:
    """``rb`` of the proxy socket's ``skmem`` (ss -m) recorded in meta.json."""
    import re

    m = re.search(r"\brb(\d+)", meta["proxy"]["socket"])
    if not m:
        raise ValueError("no rb<bytes> in meta['proxy']['socket']")
    return int(m.group(1))


def queue_at_drops(tl: pd.DataFrame, max_drops: int = 300,
                   span: tuple[float, float] = (-np.inf, np.inf)) -> tuple[np.ndarray, np.ndarray]:
    """(packets, payload bytes) waiting in the socket queue (t_stack <= t < t_sockq) at the first
    ``max_drops`` drop instants (``t_arr`` of dropped datagrams) within ``span`` (ns after the
    first arrival, see :func:`complete_span`)."""
    tl = rebase(tl)
    d = tl["dropped"].fillna(False).to_numpy(bool)
    r = ~d & tl["t_sockq"].notna().to_numpy()
    ts, tq, sz = _f(tl["t_stack"])[r], _f(tl["t_sockq"])[r], _f(tl["size"])[r]
    td = _f(tl["t_arr"])[d]
    td = td[np.isfinite(td) & (td >= span[0]) & (td <= span[1])][:max_drops]
    inq = (ts[None, :] <= td[:, None]) & (tq[None, :] > td[:, None])
    return inq.sum(axis=1), (inq * sz[None, :]).sum(axis=1)


def estimate_rcvbuf(root: Path, run_ids: list[str]) -> dict[str, float]:
    """Socket-buffer capacity: ``rcvbuf_bytes`` (meta) and the per-skb overhead that makes the
    median queue at the lab's drops fill it: ``overhead = rb / q_pkts - payload / q_pkts``.  Only
    drops within :func:`complete_span` count: outside it datagrams of calls the window did not
    keep were queued too."""
    qs, bs, rb = [], [], None
    for rid in run_ids:
        tl, _ = load_run(root / "runs" / rid)
        if not tl["dropped"].fillna(False).any():
            continue
        rb = rcvbuf_bytes_of(load_meta(root / "runs" / rid))
        q, b = queue_at_drops(tl, span=complete_span(tl))
        qs.append(q)
        bs.append(b)
    if rb is None:
        raise ValueError("no run with drops to estimate the socket-buffer capacity from")
    q, b = np.concatenate(qs), np.concatenate(bs)
    qm, bm = float(np.median(q)), float(np.median(b))
    return {"rcvbuf_bytes": rb, "q_at_drop_pkts": qm, "q_at_drop_payload_b": bm,
            "skb_overhead_b": rb / qm - bm / qm}


def _first(tl: pd.DataFrame, mtype: str, col: str) -> pd.Series:
    s = tl.loc[tl["msg_type"] == mtype, ["call_id", col]].dropna()
    return s.groupby("call_id")[col].min().astype("float64")


def lab_workload(tl: pd.DataFrame) -> dict[str, Any]:
    """The lab run's call arrivals and per-call reaction times (µs), calls in INVITE order.

    ``t0_us`` INVITE ``t_arr`` (first copy), from 1 ms; ``uas_react`` 180 ``t_arr`` - INVITE
    ``t_dep``; ``uas_gap`` 200 - 180 ``t_arr``; ``uac_react`` ACK ``t_arr`` - 200 ``t_dep``;
    ``uas_bye`` 200-BYE ``t_arr`` - BYE ``t_dep``; ``hold_us`` the median BYE - ACK ``t_arr``.
    Missing values (lost messages) get the run's median."""
    tl = rebase(tl[tl["origin"] != "proxy"])
    inv = _first(tl, "INVITE", "t_arr").sort_values()
    calls = inv.index
    g = {k: _first(tl, k, "t_arr").reindex(calls) for k in TYPES}
    dep = {k: _first(tl, k, "t_dep").reindex(calls) for k in ("INVITE", "200-INVITE", "BYE")}

    def fill(v: pd.Series) -> np.ndarray:
        a = v.to_numpy(dtype=float) / NS_PER_US
        med = np.nanmedian(a)
        return np.clip(np.where(np.isfinite(a), a, med), 0.0, None)

    return {
        "t0_us": (inv.to_numpy() - inv.iloc[0]) / NS_PER_US + 1000.0,
        "uas_react": fill(g["180"] - dep["INVITE"]),
        "uas_gap": fill(g["200-INVITE"] - g["180"]),
        "uac_react": fill(g["ACK"] - dep["200-INVITE"]),
        "uas_bye": fill(g["200-BYE"] - dep["BYE"]),
        "hold_us": float(np.nanmedian((g["BYE"] - g["ACK"]).to_numpy(dtype=float)) / NS_PER_US),
    }


def per_call_x_us(tl: pd.DataFrame) -> float:
    """Sum over the six message types of the median ``x = k_copy + t_sip + k_snd`` (µs): the
    proxy's CPU work per call, without the socket-queue part."""
    c = component_arrays(tl)
    m = served_mask(tl)
    mt = tl["msg_type"].astype(str).to_numpy()
    return float(sum(np.nanmedian(c["x"][m & (mt == t)]) for t in TYPES))


def asleep_share(tl: pd.DataFrame) -> float:
    """Share of the served messages that found the worker asleep (``sockq_src == "switch_in"``):
    the messages that pay the wake-up K^{s,base}_sockq, the model's ``alpha``."""
    asleep = (tl["sockq_src"] == "switch_in").fillna(False).to_numpy(bool)
    return float(asleep[served_mask(tl)].mean())


def worker_cycle(tl: pd.DataFrame) -> dict[str, float]:
    """The worker's back-to-back cycles: pairs of consecutive messages where the next one was
    already queued when the worker came back (``sockq_src == "recv_enter"``).  ``gap`` is
    ``t_sockq[i+1] - t_dep[i]``: time outside the traced interval (Kamailio's loop between
    sendto and the next recvfrom, plus any preemption by other jobs; the model has none of it).
    ``share`` = traced work ``sum(t_dep - t_sockq)`` / cycle time ``sum(t_sockq[i+1] - t_sockq[i])``.
    Only messages that arrived within :func:`complete_span` count (outside it the worker also
    read messages of calls the window did not keep)."""
    lo, hi = complete_span(tl)
    tl = rebase(tl)
    t = _f(tl["t_arr"])
    m = served_mask(tl) & tl["t_sockq"].notna().to_numpy() & (t >= lo) & (t <= hi)
    d = tl[m].sort_values("t_sockq")
    tq, tdep = _f(d["t_sockq"]), _f(d["t_dep"])
    busy = (d["sockq_src"] == "recv_enter").fillna(False).to_numpy(bool)[1:]
    gap = (tq[1:] - tdep[:-1])[busy] / NS_PER_US
    work = (tdep - tq)[:-1][busy]
    cyc = (tq[1:] - tq[:-1])[busy]
    return {"cycles": int(busy.sum()), "gap_median_us": float(np.nanmedian(gap)),
            "gap_mean_us": float(np.nanmean(gap)), "share": float(np.nansum(work) / np.nansum(cyc))}


def scaled_service(s: ServiceParams, f: float) -> ServiceParams:
    """``s`` with K_copy, T_sip and K_snd multiplied by ``f`` (K_stack, K^s_sockq unchanged)."""
    return replace(s, k_copy_us=s.k_copy_us * f, t_sip_us=tuple(v * f for v in s.t_sip_us),
                   k_snd_us=tuple(v * f for v in s.k_snd_us))


def lab_params(service: ServiceParams, rcv: dict[str, float], wl: dict[str, Any], rate_cps: float,
               run_id: str) -> SimParams:
    """One worker on one core, the lab's socket buffer, the default scheduler preset."""
    p = make_params(rate_cps=rate_cps, calls=len(wl["t0_us"]), threads=1, cores=1,
                    sched_mode="default", machine="ch4")
    return replace(p, service=service, run_id=f"sim-{run_id}",
                   workload=replace(p.workload, net_us=0.0, holding_us=wl["hold_us"]),
                   kernel=replace(p.kernel, rcvbuf_pkts=None, rcvbuf_bytes=int(rcv["rcvbuf_bytes"]),
                                  skb_overhead_b=int(round(rcv["skb_overhead_b"]))))


def simulate_lab(p: SimParams, wl: dict[str, Any], seed: int, warm: bool = False
                 ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Run the model on the lab's arrivals and reaction times; returns (timeline, stats).

    ``warm``: play the window's calls twice, back to back (the second pass one mean inter-arrival
    after the first pass's last INVITE), and return the second pass's timeline only.  A kept
    window starts after its point's warm-up, with the proxy already loaded by earlier calls
    (not kept); the second pass starts from the state the first one left, not from empty."""
    t0, n = wl["t0_us"], len(wl["t0_us"])
    reps = 2 if warm else 1
    shift = t0[-1] - t0[0] + (t0[-1] - t0[0]) / max(n - 1, 1)
    t0 = np.concatenate([t0 + k * shift for k in range(reps)])
    rx = {k: np.tile(wl[k], reps) for k in ("uas_react", "uas_gap", "uac_react", "uas_bye")}
    p = replace(p, workload=replace(p.workload, calls=reps * n))
    rng = np.random.default_rng(seed)
    w = draw(p.workload, p.service, rng)  # service multipliers u (seeded); arrivals replaced
    w = Workload(w.n_calls, w.n_msgs, t0, w.mtype, w.u, rx["uas_react"], rx["uas_gap"],
                 rx["uac_react"], rx["uas_bye"])
    kp = FastTwin(p, w)
    t = time.perf_counter()
    kp.run()
    st = stats_of(kp, time.perf_counter() - t)
    tl = to_timeline(kp)
    if warm:  # the second pass: calls n .. 2n-1 ("sim-<call>")
        tl = tl[tl["call_id"].str.slice(4).astype(int) >= n].reset_index(drop=True)
    return tl, st


def metrics(tl: pd.DataFrame, complete_only: bool = True) -> dict[str, float]:
    """K_sockq and sojourn (µs) over served messages, drop rate over messages from the UAs; with
    ``complete_only`` over the messages that arrived by the window's last INVITE
    (:func:`complete_span`'s end): later, calls the window did not keep loaded the real proxy."""
    cut = complete_span(tl)[1] if complete_only else np.inf
    tl = rebase(tl)
    ua = (tl["origin"] != "proxy").to_numpy() if "origin" in tl.columns else np.ones(len(tl), bool)
    ua = ua & (_f(tl["t_arr"]) <= cut)
    d = tl["dropped"].fillna(False).to_numpy(bool)
    m = ua & ~d
    out: dict[str, float] = {"messages": int(ua.sum()), "dropped": int((ua & d).sum()),
                             "drop_rate": float((ua & d).sum() / ua.sum())}
    for name, (a, b) in {"k_sockq": ("t_sockq", "t_stack"), "sojourn": ("t_dep", "t_arr"),
                         "t_sip": ("t_sip_out", "t_sip_in")}.items():
        v = ((_f(tl[a]) - _f(tl[b])) / NS_PER_US)[m]
        v = v[np.isfinite(v)]
        out[f"{name}_median_us"] = float(np.median(v))
        out[f"{name}_mean_us"] = float(v.mean())
        out[f"{name}_p99_us"] = float(np.percentile(v, 99))
        if name == "k_sockq":
            out["p_sockq_gt_1ms"] = float((v > 1000.0).mean())
    return out


def lab_sweep(root: Path = LAB_DIR) -> pd.DataFrame:
    """The one-worker rate sweep of a protocol recording: the ``runs.csv`` rows of series
    ``workers``, 1 worker, tracer ``map``, that kept a timeline, by rate.  The tracer-off twin
    (``-tracer-off``) is not part of it: the model's inputs are measured with the tracer on."""
    pts = pd.read_csv(root / "runs.csv")
    sel = (pts["series"] == "workers") & (pts["workers"] == 1) & (pts["tracer"] == "map")
    kept = pts["run_id"].map(lambda r: (root / "runs" / r / "timeline.parquet").exists())
    return pts[sel & kept].sort_values("rate_cps").reset_index(drop=True)


def fit_table(root: Path = LAB_DIR, light: tuple[str, ...] = LIGHT_RUNS
              ) -> tuple[pd.DataFrame, pd.DataFrame, ServiceParams, dict[str, float]]:
    """(fit table one row per rate-sweep point, component estimates, service inputs, socket buffer)."""
    sweep = lab_sweep(root)
    lab = {rid: load_run(root / "runs" / rid)[0] for rid in sweep["run_id"]}
    light_tls = [lab[r] if r in lab else load_run(root / "runs" / r)[0] for r in light]
    est = estimate_components(light_tls)
    light_all = pd.concat(light_tls, ignore_index=True)
    # alpha: the share of light-load messages that woke the worker (paid K^s,base_sockq)
    service = replace(service_from_lab(est, service_cv(light_tls)), alpha_fixed=asleep_share(light_all))
    rcv = estimate_rcvbuf(root, [r for r in sweep["run_id"]])
    x_light = per_call_x_us(light_all)
    rates = sweep["rate_cps"].to_numpy(float)
    scale = {rid: per_call_x_us(lab[rid]) / x_light for rid in sweep["run_id"]}
    asleep = {rid: asleep_share(lab[rid]) for rid in sweep["run_id"]}
    scale_cv = loo_scale(rates, np.array([scale[r] for r in sweep["run_id"]]))
    asleep_cv = loo_scale(rates, np.array([asleep[r] for r in sweep["run_id"]]))
    rows = []
    for (_, r), f_cv, a_cv in zip(sweep.iterrows(), scale_cv, asleep_cv):
        rid = r["run_id"]
        meta = load_meta(root / "runs" / rid)
        wl = lab_workload(lab[rid])
        span = complete_span(lab[rid])
        seed = int(meta["config"]["seed"])
        p = lab_params(service, rcv, wl, float(r["rate_cps"]), rid)
        stl, st = simulate_lab(p, wl, seed, warm=True)
        lm, sm = metrics(lab[rid]), metrics(stl)
        row: dict[str, Any] = {"run_id": rid, "rate_cps": int(r["rate_cps"]), "calls": len(wl["t0_us"]),
                               "seed": seed, "light_load_input": rid in light,
                               "complete_from_ms": span[0] / 1e6, "compared_ms": span[1] / 1e6,
                               "lab_messages": lm["messages"],
                               "lab_window_drop_rate": metrics(lab[rid], complete_only=False)["drop_rate"],
                               **{new: r[old] for old, new in POINT_COLS.items()}}
        for k in ("k_sockq_median_us", "k_sockq_mean_us", "k_sockq_p99_us", "sojourn_median_us",
                  "sojourn_mean_us", "sojourn_p99_us", "p_sockq_gt_1ms", "drop_rate", "t_sip_median_us"):
            row[f"lab_{k}"] = lm[k]
            row[f"sim_{k}"] = sm[k]
        row["sojourn_median_gap_pct"] = 100.0 * (sm["sojourn_median_us"] / lm["sojourn_median_us"] - 1.0)
        # variant: this run's own measured per-call work and share of messages that woke the worker
        f = scale[rid]
        p2 = replace(p, service=replace(scaled_service(service, f), alpha_fixed=asleep[rid]))
        sm2 = metrics(simulate_lab(p2, wl, seed, warm=True)[0])
        row["service_scale"] = f
        row["lab_asleep_share"] = asleep[rid]
        # variant: both predicted from the *other* runs (leave-one-out)
        p3 = replace(p, service=replace(scaled_service(service, f_cv), alpha_fixed=a_cv))
        sm3 = metrics(simulate_lab(p3, wl, seed, warm=True)[0])
        row["service_scale_loo"] = f_cv
        row["asleep_share_loo"] = a_cv
        for k in ("k_sockq_median_us", "sojourn_median_us", "sojourn_mean_us", "p_sockq_gt_1ms", "drop_rate"):
            row[f"simcv_{k}"] = sm3[k]
        row["simcv_sojourn_median_gap_pct"] = 100.0 * (sm3["sojourn_median_us"] / lm["sojourn_median_us"] - 1.0)
        wc = worker_cycle(lab[rid])
        row["lab_cycle_gap_median_us"] = wc["gap_median_us"]
        row["lab_cycle_gap_mean_us"] = wc["gap_mean_us"]
        row["lab_worker_share"] = wc["share"]
        for k in ("k_sockq_median_us", "k_sockq_mean_us", "sojourn_median_us", "sojourn_mean_us",
                  "p_sockq_gt_1ms", "drop_rate"):
            row[f"simx_{k}"] = sm2[k]
        row["sim_alpha"] = service.alpha_fixed
        row["sim_busy_frac"] = st["busy_frac"]
        row["sim_max_queue_pkts"] = st["max_queue"]
        rows.append(row)
    return pd.DataFrame(rows), est, service, rcv


def loo_scale(rates_cps: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Leave-one-out prediction of each run's work scale from the other runs: linear
    interpolation in log(rate) between the neighbouring runs (constant beyond the ends)."""
    x = np.log(np.asarray(rates_cps, float))
    y = np.asarray(scale, float)
    o = np.argsort(x)
    x, y = x[o], y[o]
    out = np.empty_like(y)
    for i in range(len(x)):
        keep = np.arange(len(x)) != i
        out[i] = np.interp(x[i], x[keep], y[keep])
    res = np.empty_like(out)
    res[o] = out
    return res


def _rng(v: pd.Series, fmt: str = "{:.0f}") -> str:
    return f"{fmt.format(v.min())}–{fmt.format(v.max())}"


def _pct_list(d: pd.DataFrame, col: str) -> str:
    return ", ".join(f"{v:+.0f} %" + f" ({int(r)})" for r, v in zip(d["rate_cps"], d[col])) + " (calls/s)"


def regimes(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The rows the provenance's gaps talk about (ch. 9 selects the same): ``light`` (the input
    points), ``busy`` (the worker woken by fewer than 5 % of the messages), ``calm`` (above the
    light points, no drop in the window), ``over`` (drops in the window)."""
    d = df.sort_values("rate_cps")
    light = d[d["light_load_input"]]
    above = d[d["rate_cps"] > light["rate_cps"].max()]
    return {"light": light, "busy": d[d["lab_asleep_share"] < 0.05],
            "calm": above[above["lab_drop_rate"] == 0], "over": d[d["lab_drop_rate"] > 0]}


def gaps_text(df: pd.DataFrame) -> str:
    """The "Gaps" paragraph of the provenance, every number computed from ``df``."""
    d = df.sort_values("rate_cps")
    g = regimes(d)
    light, busy, calm, over = g["light"], g["busy"], g["calm"], g["over"]
    first = lambda col: (int(d.loc[d[col] > 0, "rate_cps"].min()) if (d[col] > 0).any()  # noqa: E731
                         else None)
    ratio_x = calm["simx_sojourn_median_us"] / calm["lab_sojourn_median_us"]
    ksq_ratio = calm["lab_k_sockq_median_us"] / calm["simx_k_sockq_median_us"]
    over_txt = "; ".join(
        f"{int(r.rate_cps)} calls/s: lab {100 * r.lab_drop_rate:.1f} % (the whole point "
        f"{100 * r.point_pdr:.1f} ± {100 * r.point_pdr_ci_hw:.1f} %), model {100 * r.sim_drop_rate:.1f} %, "
        f"work curve {100 * r.simcv_drop_rate:.1f} %, own work {100 * r.simx_drop_rate:.1f} %"
        for r in over.itertuples())
    out = [
        f"- **Machine.** Other processes used at most {100 * d['foreign_cpu_mean'].max():.1f} % of the "
        f"two CPUs during any point (`foreign_cpu_mean`); no point `machine_busy` "
        f"({int(d['machine_busy'].sum())}) or generator-bound ({int(d['generator_bound'].sum())}).  "
        "The proxy ran alone on CPU 0, SIPp, dumpcap and bpftrace on CPU 1; the tracer (`map`) was "
        "on at every point, so the inputs and the lab columns describe the traced proxy.",
        "- **Window, not point.** The model is compared with the 1,500-call window, run on its own "
        "arrivals, up to the window's last INVITE (`compared_ms`); the whole point's numbers "
        "(`point_*`, >= 20,000 calls, after the warm-up) are context.  The window starts after the "
        "point's warm-up, so the model plays the window's calls twice and is measured on the "
        f"second pass.  Overloaded points: {over_txt}."
        if len(over) else "- **No window dropped packets.**",
        f"- **Light load.** At the input points ({', '.join(light['run_id'])}) the model's median "
        f"sojourn differs from the lab's by {_rng(light['sojourn_median_gap_pct'], '{:+.0f}')} %: the two "
        f"points themselves differ (lab medians {_rng(light['lab_sojourn_median_us'])} µs, work per "
        f"call {_rng(light['service_scale'], '{:.2f}')} of their pool's), and the inputs are that pool.",
        f"- **Work per call and sleep both fall with load.**  Where the worker was woken by fewer "
        f"than 5 % of the messages ({_rng(busy['rate_cps'])} calls/s; {_rng(100 * d['lab_asleep_share'])} % "
        f"over the sweep) `service_scale` is {_rng(busy['service_scale'], '{:.2f}')} and the lab's "
        f"T_sip median {_rng(busy['lab_t_sip_median_us'])} µs against "
        f"{d['lab_t_sip_median_us'].iloc[0]:.0f} µs at {int(d['rate_cps'].iloc[0])} calls/s.  With the "
        f"light-load inputs at every rate (their work, and the wake-up K^s,base_sockq for "
        f"{100 * d['sim_alpha'].iloc[0]:.0f} % of the messages) the model first drops at "
        f"{first('sim_drop_rate')} calls/s, the lab's window at {first('lab_drop_rate')} calls/s.",
        f"- **Work curve, leave-one-out** (`simcv_*`, the honest prediction): each point's work scale "
        f"and wake-up share interpolated (in log rate) from the *other* points.  Sojourn median "
        f"{_pct_list(d, 'simcv_sojourn_median_gap_pct')} off the lab's; first drops at "
        f"{first('simcv_drop_rate')} calls/s.",
        f"- **Own-work variant** (`simx_*`, the point's own measured work and wake-up share: a "
        f"diagnostic, it uses the answer): sojourn median {_rng(100 * (ratio_x - 1), '{:+.0f}')} % off "
        f"the lab's where the window has no drop above the light points; first drops at "
        f"{first('simx_drop_rate')} calls/s; the lab's median socket-queue time there is "
        f"{_rng(ksq_ratio, '{:.1f}')} times the own-work model's.",
        f"- **Outside the traced path.** In back-to-back cycles within the complete part of the "
        f"window (`complete_from_ms` .. `compared_ms`) the lab worker spent "
        f"{_rng(100 * d['lab_worker_share'])} % of its time in the traced path (mean gap from one "
        f"message's t_dep to the next t_sockq {_rng(d['lab_cycle_gap_mean_us'], '{:.1f}')} µs); the model "
        "spends 100 %.",
        "- **Not modelled.** The proxy's own 100 Trying and timer processes (on CPU 0 with the "
        "worker); the late ACKs and BYEs of calls that lost a message (sent after SIPp's 5-s "
        "timeout: the worker points run without retransmissions, and the model's calls just end).",
    ]
    return "\n".join(out)


def _fmt_tuple(t: tuple[float, ...]) -> str:
    return ", ".join(f"{v:.1f}" for v in t)


def machine_text() -> str:
    """This machine, for the provenance: CPUs, model, memory, load average, python."""
    import os

    model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                  if ln.startswith("model name")), platform.processor() or "?") \
        if Path("/proc/cpuinfo").exists() else platform.processor() or "?"
    mem = next((f"{int(ln.split()[1]) / 2**20:.0f} GiB" for ln in Path("/proc/meminfo").read_text().splitlines()
                if ln.startswith("MemTotal")), "?") if Path("/proc/meminfo").exists() else "?"
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return (f"{os.cpu_count()} CPUs ({model}), {mem} memory, {platform.system()} {platform.release()} "
            f"{platform.machine()}, python {platform.python_version()}; 1/5/15-min load average {load}")


def provenance(df: pd.DataFrame, est: pd.DataFrame, s: ServiceParams, rcv: dict[str, float],
               cmd: str, light: tuple[str, ...], lab: Path = LAB_DIR, seconds: float = float("nan"),
               machine: str = "") -> str:
    e = est.loc[[*TYPES, "ALL"]]
    comp_rows = "\n".join(
        f"| {t} | " + " | ".join(f"{e.loc[t, f'{k}_mean']:.1f} ± {e.loc[t, f'{k}_sd']:.1f} "
                                 f"({e.loc[t, f'{k}_median']:.1f})" for k in
                                 ("k_stack", "ks_base", "k_copy", "k_copy_max", "t_sip1", "t_sip2", "k_snd"))
        + " |" for t in e.index)
    try:
        where = lab.resolve().relative_to(ROOT)
    except ValueError:
        where = lab
    return f"""# sim_lab_fit.csv

SYNTHETIC model output compared with REAL measurements: the sipperf kernel-path model
(`src/sipperf/sim/`, fast twin engine) fitted to the lab's protocol recording of a Kamailio 5.6
proxy (`{where}/`: `runs.csv` and the kept timelines `runs/<run_id>/timeline.parquet`; series
`workers`, 1 worker, tracer `map`).  Each row is one point of the one-worker rate sweep: `lab_*`
columns are measured on the point's kept window, `sim_*` (and `simcv_*`, `simx_*`) columns are the
model run on the same call arrivals, `point_*` columns are the whole point's own numbers from
`runs.csv` (context).

- made by: `{cmd}` (module `src/sipperf/sim/calibration/fit_lab.py`), in {seconds:.1f} s
- when: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}
- machine: {machine or machine_text()}
- lab points compared: {', '.join(df['run_id'])}; the tracer-off twin `workers-c1-r02300-tracer-off` is not part of the sweep (tracer off, and its timeline was not kept)
- service inputs estimated from: {', '.join(light)} (light load, no drops)

## What is compared: the kept window, not the whole point

Each point ran >= 20,000 calls; its timeline keeps every message of 1,500 consecutive calls whose
INVITE arrived after the point's MSER-5 warm-up cut (`meta.json` `stored`).  The model runs on
those calls' own arrival instants and reaction times, so what it must match is the window: its
drop rate and delays (`lab_*`) are taken over the messages that arrived up to the window's last
INVITE (`compared_ms` after its first); after that the point's later calls, which the window did
not keep, loaded the proxy too.  Because the window begins with the proxy already loaded by
earlier calls, the model plays the window's calls twice back to back and is measured on the second
pass.  The whole point's drop rate (`point_pdr` ± `point_pdr_ci_hw`, 95 %) and sojourn
(`point_sojourn_mean_us` ± `point_sojourn_ci_hw_us`, `_p50_`, `_p99_`) from `runs.csv` describe
>= 20,000 calls and are context: a 1,500-call window at overload lasts under a second.
Reconstructions from the window alone (the queue at drop instants, the worker's cycles) use only
its complete part, `complete_from_ms` .. `compared_ms`: before it, earlier calls not kept were still
sending (with drops, a few late ACKs/BYEs of calls that lost a message arrive inside it too).

## Model inputs estimated from the light-load points (µs: mean ± SD (median))

| type | K_stack | K^s,base_sockq (asleep) | K_copy model segment (t_sockq..t_sip_in) | K_copy upper bound | T¹_sip | T²_sip | K_snd |
|---|---|---|---|---|---|---|---|
{comp_rows}

Given to the model (`ServiceParams`): k_stack_us = ({_fmt_tuple(s.k_stack_us)}) (means);
ks_base_us = ({_fmt_tuple(s.ks_base_us)}) (medians of the wake-up latency of messages that found
the worker asleep; the mean has a long tail of waits for the CPU); k_copy_us = {s.k_copy_us:.1f}
(mean; the real copy is bounded by 0 ≤ K_copy ≤ recv_copied − t_sockq, median bound
{est.loc['ALL', 'k_copy_max_median']:.1f}); t_sip_us = ({_fmt_tuple(s.t_sip_us)}) with
T¹/T_sip = {s.t_sip1_share:.3f}; k_snd_us = ({_fmt_tuple(s.k_snd_us)}); service multiplier gamma,
CV = {s.cv:.3f} (SD of x / per-type mean of x = K_copy + T_sip + K_snd); alpha = {s.alpha_fixed:.3f},
the share of the light-load messages that found the worker asleep (the model adds alpha ·
K^s,base_sockq to every message's service; on loopback there is no NIC interrupt path, the
socket-queue base time is the worker's wake-up); no T_sip growth with live calls.  Socket buffer:
rcvbuf {int(rcv['rcvbuf_bytes'])} B (`meta.json` skmem rb); median queue at the lab's drop
instants {rcv['q_at_drop_pkts']:.0f} packets ({rcv['q_at_drop_payload_b']:.0f} B payload), hence a
per-skb overhead of {rcv['skb_overhead_b']:.0f} B.  Workload: each call's INVITE at the lab's
recorded arrival instant, the lab's per-call UAS/UAC reaction times, net 0 (loopback), holding
time the lab's median ACK→BYE gap; one worker, one core, seed = the point's round seed
(`meta.json`).

## Columns

`lab_*` measured on the window, `sim_*` the model with the light-load inputs above, `simx_*` the
same model with K_copy, T_sip and K_snd rescaled by `service_scale` = this point's own per-call
work (sum over the six types of the median K_copy + T_sip + K_snd) / the light-load points', and
alpha set to `lab_asleep_share`, this point's share of messages that found the worker asleep (a
diagnostic: it uses the answer).  `simcv_*`: the same with the work scale and the asleep share
predicted for each point from the other points' (`service_scale_loo`, `asleep_share_loo`,
leave-one-out interpolation in log rate): the honest prediction.  `k_sockq` = t_sockq − t_stack
(incl. K^s_sockq), `sojourn` = t_dep − t_arr, over relayed, not-dropped messages; `drop_rate` =
dropped / datagrams from the UAs, all up to `compared_ms`; `lab_window_drop_rate` the same over
the whole window; `p_sockq_gt_1ms` the share of messages that spent > 1 ms in the socket queue.
`lab_cycle_gap_*_us`: in the lab worker's back-to-back cycles (next message already queued)
within the complete part, the time from one message's t_dep to the next t_sockq (Kamailio's loop
outside the traced interval plus preemption; 0 in the model); `lab_worker_share` = traced work /
cycle time in those cycles.  From `runs.csv`: `foreign_cpu_mean`, `proxy_cpu_util`,
`invite_burst_p99_ms`, `generator_bound`, `machine_busy`, `point_calls` (`calls_offered`).

## Gaps (read before comparing)

{gaps_text(df)}
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sipperf.sim.calibration.fit_lab", description=__doc__.splitlines()[0])
    ap.add_argument("--lab", type=Path, default=LAB_DIR,
                    help="a protocol recording: runs.csv + runs/<run_id>/timeline.parquet (default %(default)s)")
    ap.add_argument("--out", type=Path, default=OUT_CSV)
    a = ap.parse_args(argv)
    machine = machine_text()  # before the fit: the load average of the machine it ran on
    t = time.perf_counter()
    df, est, s, rcv = fit_table(a.lab)
    seconds = time.perf_counter() - t
    a.out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(a.out, index=False, float_format="%.6g")
    cmd = "python -m sipperf.sim.calibration.fit_lab" + ("" if argv is None and len(sys.argv) <= 1 else
                                             " " + " ".join(argv if argv is not None else sys.argv[1:]))
    a.out.with_suffix(".provenance.md").write_text(
        provenance(df, est, s, rcv, cmd, LIGHT_RUNS, a.lab, seconds, machine))
    cols = ["rate_cps", "lab_sojourn_median_us", "sim_sojourn_median_us", "simcv_sojourn_median_us",
            "lab_drop_rate", "sim_drop_rate", "simcv_drop_rate", "point_pdr"]
    print(df[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"wrote {a.out} ({len(df)} rows) in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
