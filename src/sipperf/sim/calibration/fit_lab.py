"""Fit the kernel-path model to the lab's own recordings (issue 6 item 4, last sentence).

``python -m sipperf.sim.calibration.fit_lab`` writes ``datasets/precomputed/sim_lab_fit.csv`` (one row per
run of the lab's 1-worker rate sweep) and ``sim_lab_fit.provenance.md`` beside it.

1. **Service inputs from measured data** (:func:`estimate_components`, :func:`service_from_lab`):
   from the light-load runs :data:`LIGHT_RUNS` (25 and 50 calls/s), per message type, the
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
   wake-up), as a *median*: the mean of that wake-up latency has a long tail (waits for a CPU
   held by other processes, e.g. SIPp or the tracer on this two-CPU machine), which the model
   does not contain.  K_copy itself is not observable on this kernel; the lab bounds it by
   ``0 <= K_copy <= recv_copied - t_sockq`` (reported as ``k_copy_max``).  The model's K_copy
   segment spans ``t_sockq .. t_sip_in`` (the rest of the recvfrom call included), so that is
   what the model is given.  The unit-mean service multiplier's CV is the SD of
   ``x / mean_type(x)`` with ``x = k_copy + t_sip + k_snd``.  alpha = 1: on loopback there is
   no NIC interrupt path (the softirq runs in the sender's context), so K^s_sockq is the
   measured light-load value at every rate.  T_sip growth with live calls: 0 (not identifiable
   from two light-load runs, and the lab's work per message *falls* with load; the table shows
   the lab's T_sip median per rate instead).
2. **Socket buffer**: ``rcvbuf_bytes`` from ``meta.json`` (``skmem rb``), the per-skb overhead
   from the queue length at the lab's own drop instants (:func:`estimate_rcvbuf`).
3. **Same workload** (:func:`lab_workload`): each call's INVITE arrives at the lab's recorded
   ``t_arr``; UAS/UAC reaction times are the lab's per call (loopback: ``net_us = 0``); the
   holding time is the lab's median ACK -> BYE gap.
4. **Compare** (:func:`compare_run`): per rate, median/mean/p99 of the socket-queue time
   ``K_sockq = t_sockq - t_stack`` and of the sojourn ``t_dep - t_arr``, and the drop rate.

What the model lacks: other load on the machine (none in the current recordings, which were
made on an otherwise idle machine; the ``sched_load`` series adds it on purpose and is not
fitted here); the fall of the proxy's work per message with load (shown by ``service_scale``);
Kamailio's loop outside the traced interval (``lab_cycle_gap_*``);
retransmissions (SIPp retransmits lost INVITE/BYE after 500 ms; the model's calls just end);
the proxy's own 100 Trying and timer processes.  The fit table quantifies the first with
``*_p_sockq_gt_1ms`` (share of messages that waited > 1 ms in the socket queue).
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
from sipperf.ingest.lab_runs.dataset import load_index, load_meta, load_run
from sipperf.sim.fast_twin import FastTwin
from sipperf.sim.params import TYPES, ServiceParams, SimParams, make_params
from sipperf.sim.run import stats_of, to_timeline
from sipperf.sim.workload import Workload, draw

ROOT = Path(__file__).resolve().parents[4]
LAB_DIR = ROOT / "datasets" / "lab"
OUT_CSV = ROOT / "datasets" / "precomputed" / "sim_lab_fit.csv"
#: the light-load runs the service inputs are estimated from (no drops, p99 lateness < 20 ms)
LIGHT_RUNS: tuple[str, ...] = ("rate-0025", "rate-0050")
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


def queue_at_drops(tl: pd.DataFrame, max_drops: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """(packets, payload bytes) waiting in the socket queue (t_stack <= t < t_sockq) at the first
    ``max_drops`` drop instants (``t_arr`` of dropped datagrams)."""
    tl = rebase(tl)
    d = tl["dropped"].fillna(False).to_numpy(bool)
    r = ~d & tl["t_sockq"].notna().to_numpy()
    ts, tq, sz = _f(tl["t_stack"])[r], _f(tl["t_sockq"])[r], _f(tl["size"])[r]
    td = _f(tl["t_arr"])[d]
    td = td[np.isfinite(td)][:max_drops]
    inq = (ts[None, :] <= td[:, None]) & (tq[None, :] > td[:, None])
    return inq.sum(axis=1), (inq * sz[None, :]).sum(axis=1)


def estimate_rcvbuf(root: Path, run_ids: list[str]) -> dict[str, float]:
    """Socket-buffer capacity: ``rcvbuf_bytes`` (meta) and the per-skb overhead that makes the
    median queue at the lab's drops fill it: ``overhead = rb / q_pkts - payload / q_pkts``."""
    qs, bs, rb = [], [], None
    for rid in run_ids:
        tl, _ = load_run(root / "runs" / rid)
        if not tl["dropped"].fillna(False).any():
            continue
        rb = rcvbuf_bytes_of(load_meta(root / "runs" / rid))
        q, b = queue_at_drops(tl)
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


def worker_cycle(tl: pd.DataFrame) -> dict[str, float]:
    """The worker's back-to-back cycles: pairs of consecutive messages where the next one was
    already queued when the worker came back (``sockq_src == "recv_enter"``).  ``gap`` is
    ``t_sockq[i+1] - t_dep[i]``: time outside the traced interval (Kamailio's loop between
    sendto and the next recvfrom, plus any preemption by other jobs; the model has none of it).
    ``share`` = traced work ``sum(t_dep - t_sockq)`` / cycle time ``sum(t_sockq[i+1] - t_sockq[i])``."""
    tl = rebase(tl)
    m = served_mask(tl) & tl["t_sockq"].notna().to_numpy()
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


def simulate_lab(p: SimParams, wl: dict[str, Any], seed: int) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Run the model on the lab's arrivals and reaction times; returns (timeline, stats)."""
    rng = np.random.default_rng(seed)
    w = draw(p.workload, p.service, rng)  # service multipliers u (seeded); arrivals replaced
    w = Workload(w.n_calls, w.n_msgs, wl["t0_us"], w.mtype, w.u, wl["uas_react"], wl["uas_gap"],
                 wl["uac_react"], wl["uas_bye"])
    kp = FastTwin(p, w)
    t = time.perf_counter()
    kp.run()
    st = stats_of(kp, time.perf_counter() - t)
    return to_timeline(kp), st


def metrics(tl: pd.DataFrame) -> dict[str, float]:
    """K_sockq and sojourn (µs) over served messages, drop rate over messages from the UAs."""
    tl = rebase(tl)
    ua = (tl["origin"] != "proxy").to_numpy() if "origin" in tl.columns else np.ones(len(tl), bool)
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


def fit_table(root: Path = LAB_DIR, light: tuple[str, ...] = LIGHT_RUNS
              ) -> tuple[pd.DataFrame, pd.DataFrame, ServiceParams, dict[str, float]]:
    """(fit table one row per rate-sweep run, component estimates, service inputs, socket buffer)."""
    idx = load_index(root)
    sweep = idx[idx["series"] == "rate"].sort_values("rate_cps")
    lab = {rid: load_run(root / "runs" / rid)[0] for rid in sweep["run_id"]}
    light_tls = [lab[r] if r in lab else load_run(root / "runs" / r)[0] for r in light]
    est = estimate_components(light_tls)
    service = service_from_lab(est, service_cv(light_tls))
    rcv = estimate_rcvbuf(root, [r for r in sweep["run_id"]])
    x_light = per_call_x_us(pd.concat(light_tls, ignore_index=True))
    scale = {rid: per_call_x_us(lab[rid]) / x_light for rid in sweep["run_id"]}
    scale_cv = loo_scale(sweep["rate_cps"].to_numpy(float), np.array([scale[r] for r in sweep["run_id"]]))
    rows = []
    for (_, r), f_cv in zip(sweep.iterrows(), scale_cv):
        rid = r["run_id"]
        meta = load_meta(root / "runs" / rid)
        wl = lab_workload(lab[rid])
        seed = int(meta["config"]["seed"])
        p = lab_params(service, rcv, wl, float(r["rate_cps"]), rid)
        stl, st = simulate_lab(p, wl, seed)
        lm, sm = metrics(lab[rid]), metrics(stl)
        row: dict[str, Any] = {"run_id": rid, "rate_cps": int(r["rate_cps"]), "calls": len(wl["t0_us"]),
                               "seed": seed, "light_load_input": rid in light,
                               "cpu_busy": r["cpu_busy"], "loadavg_1m": r["loadavg_1m"],
                               "arrival_late_p99_ms": r["arrival_late_p99_ms"]}
        for k in ("k_sockq_median_us", "k_sockq_mean_us", "k_sockq_p99_us", "sojourn_median_us",
                  "sojourn_mean_us", "sojourn_p99_us", "p_sockq_gt_1ms", "drop_rate", "t_sip_median_us"):
            row[f"lab_{k}"] = lm[k]
            row[f"sim_{k}"] = sm[k]
        row["sojourn_median_gap_pct"] = 100.0 * (sm["sojourn_median_us"] / lm["sojourn_median_us"] - 1.0)
        # variant: the service inputs rescaled to this run's own measured per-call work
        f = scale[rid]
        p2 = replace(p, service=scaled_service(service, f))
        sm2 = metrics(simulate_lab(p2, wl, seed)[0])
        row["service_scale"] = f
        # variant: the work per call predicted from the *other* runs (leave-one-out)
        p3 = replace(p, service=scaled_service(service, f_cv))
        sm3 = metrics(simulate_lab(p3, wl, seed)[0])
        row["service_scale_loo"] = f_cv
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


def gaps_text(df: pd.DataFrame) -> str:
    """The "Gaps" paragraph of the provenance, every number computed from ``df``."""
    d = df.sort_values("rate_cps")
    light = d[d["light_load_input"]]
    hi = d[d["rate_cps"] >= 150]
    mid = d[(d["rate_cps"] >= 100) & (d["lab_drop_rate"] == 0) & (d["rate_cps"] <= 900)]
    first = lambda col: (int(d.loc[d[col] > 0, "rate_cps"].min()) if (d[col] > 0).any()  # noqa: E731
                         else None)
    lab_first, sim_first, simx_first = first("lab_drop_rate"), first("sim_drop_rate"), first("simx_drop_rate")
    ratio_x = mid["simx_sojourn_median_us"] / mid["lab_sojourn_median_us"]
    m2 = d[(d["rate_cps"] >= 150) & (d["rate_cps"] <= 600)]
    ksq_ratio = m2["lab_k_sockq_median_us"] / m2["simx_k_sockq_median_us"]
    over = d[d["lab_drop_rate"] > 0]
    over_txt = "; ".join(f"{int(r.rate_cps)} calls/s: lab {100 * r.lab_drop_rate:.1f} %, model "
                         f"{100 * r.sim_drop_rate:.1f} %, own-work model {100 * r.simx_drop_rate:.1f} %"
                         for r in over.itertuples())
    loaded = bool((d["cpu_busy"] > 0.9).any())
    out = [
        f"- **Machine load.** `cpu_busy` {_rng(d['cpu_busy'], '{:.2f}')}, 1-min load average "
        f"{_rng(d['loadavg_1m'], '{:.2f}')} during the runs"
        + (" (busy with other jobs: the model has no background load)." if loaded else
           " (an otherwise idle machine; the model has no background load, and needs none here)."),
        f"- **Light load fits.** At the runs the inputs come from ({', '.join(light['run_id'])}) the "
        f"model's median sojourn differs from the lab's by {_rng(light['sojourn_median_gap_pct'], '{:+.0f}')} %; "
        f"messages waiting > 1 ms in the socket queue: lab {_rng(100 * light['lab_p_sockq_gt_1ms'], '{:.1f}')} %, "
        f"model {_rng(100 * light['sim_p_sockq_gt_1ms'], '{:.1f}')} %.",
        f"- **The proxy's work per call falls with load.**  `service_scale` (this run's per-call "
        f"K_copy + T_sip + K_snd over the light-load runs') is {_rng(hi['service_scale'], '{:.2f}')} at "
        f">= 150 calls/s, and the lab's T_sip median falls from {d['lab_t_sip_median_us'].iloc[0]:.0f} µs "
        f"to {d['lab_t_sip_median_us'].min():.0f} µs (plausibly a worker that rarely sleeps keeps its "
        f"caches warm; seed 000 saw the opposite, T_sip growing with load).  With the light-load "
        f"inputs the model is therefore too slow: its sojourn median is "
        f"{_pct_list(d[(d.rate_cps >= 100) & (d.rate_cps <= 600)], 'sojourn_median_gap_pct')} off the "
        f"lab's, it saturates below 900 calls/s and first drops at {sim_first} calls/s, the lab at "
        f"{lab_first} calls/s.",
        f"- **Work curve, leave-one-out** (`simcv_*`, the honest prediction): each run's work scale "
        f"interpolated (in log rate) from the *other* runs' measured scales.  Sojourn median "
        f"{_pct_list(d, 'simcv_sojourn_median_gap_pct')} off the lab's; drop rate model vs lab: "
        + "; ".join(f"{int(r.rate_cps)}: {100 * r.simcv_drop_rate:.1f} vs {100 * r.lab_drop_rate:.1f} %"
                    for r in d[(d.simcv_drop_rate > 0) | (d.lab_drop_rate > 0)].itertuples()) + ".",
        f"- **Own-work variant** (`simx_*`, the run's own measured work: a diagnostic, it uses the "
        f"answer): sojourn median {_rng(100 * (ratio_x - 1), '{:+.0f}')} % off the lab's at 100-900 calls/s "
        f"without drops; first drops at {simx_first} calls/s.  What is left is the work the model does "
        f"not see: in back-to-back cycles the lab worker spent {_rng(100 * d['lab_worker_share'])} % of "
        f"its time in the traced path (mean gap between one message's t_dep and the next t_sockq "
        f"{_rng(d['lab_cycle_gap_mean_us'])} µs, median {_rng(d['lab_cycle_gap_median_us'])} µs: "
        f"Kamailio's loop outside the traced interval); the model spends 100 %.  And the lab's median "
        f"socket-queue time at 150-600 calls/s is {_rng(ksq_ratio, '{:.1f}')} times the own-work model's: "
        f"the worker waited for something the model lacks (candidates: the CPUs taken by the SIPp "
        f"UAC/UAS, which ran at nice -10 on the same two CPUs, and the untraced loop work above).",
        f"- **Overload runs.** {over_txt}.  The lab's overload runs offer their calls in under a "
        f"second (one burst each, see the lab README), so these are single samples, not a "
        f"steady-state loss curve." if len(over) else "- **No lab run dropped packets.**",
        "- **Retransmissions** (SIPp resends INVITE/BYE after 500 ms when a copy is lost) and the "
        "proxy's own 100 Trying are not modelled; the lab's drop rate counts retransmitted datagrams too.",
    ]
    return "\n".join(out)


def _fmt_tuple(t: tuple[float, ...]) -> str:
    return ", ".join(f"{v:.1f}" for v in t)


def provenance(df: pd.DataFrame, est: pd.DataFrame, s: ServiceParams, rcv: dict[str, float],
               cmd: str, light: tuple[str, ...]) -> str:
    e = est.loc[[*TYPES, "ALL"]]
    comp_rows = "\n".join(
        f"| {t} | " + " | ".join(f"{e.loc[t, f'{k}_mean']:.1f} ± {e.loc[t, f'{k}_sd']:.1f} "
                                 f"({e.loc[t, f'{k}_median']:.1f})" for k in
                                 ("k_stack", "ks_base", "k_copy", "k_copy_max", "t_sip1", "t_sip2", "k_snd"))
        + " |" for t in e.index)
    return f"""# sim_lab_fit.csv

SYNTHETIC model output compared with REAL measurements: the sipperf kernel-path model
(`src/sipperf/sim/`, fast twin engine) fitted to the lab's recorded Kamailio 5.6 runs (`datasets/lab/`, series
`rate`, 1 worker).  Each row is one lab run: `lab_*` columns are measured, `sim_*` columns are the
model run on the same call arrivals.

- made by: `{cmd}` (module `src/sipperf/sim/fit_lab.py`)
- when: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; python {platform.python_version()} on {platform.machine()}
- lab runs compared: {', '.join(df['run_id'])}
- service inputs estimated from: {', '.join(light)} (light load, no drops)

## Model inputs estimated from the light-load runs (µs: mean ± SD (median))

| type | K_stack | K^s,base_sockq (asleep) | K_copy model segment (t_sockq..t_sip_in) | K_copy upper bound | T¹_sip | T²_sip | K_snd |
|---|---|---|---|---|---|---|---|
{comp_rows}

Given to the model (`ServiceParams`): k_stack_us = ({_fmt_tuple(s.k_stack_us)}) (means);
ks_base_us = ({_fmt_tuple(s.ks_base_us)}) (medians of the wake-up latency of messages that found
the worker asleep; the mean has a long tail of waits for the CPU); k_copy_us = {s.k_copy_us:.1f}
(mean; the real copy is bounded by 0 ≤ K_copy ≤ recv_copied − t_sockq, median bound
{est.loc['ALL', 'k_copy_max_median']:.1f}); t_sip_us = ({_fmt_tuple(s.t_sip_us)}) with
T¹/T_sip = {s.t_sip1_share:.3f}; k_snd_us = ({_fmt_tuple(s.k_snd_us)}); service multiplier gamma,
CV = {s.cv:.3f} (SD of x / per-type mean of x = K_copy + T_sip + K_snd); alpha fixed at 1 (loopback:
no NIC interrupts); no T_sip growth with live calls.  Socket buffer: rcvbuf {int(rcv['rcvbuf_bytes'])} B
(`meta.json` skmem rb); median queue at the lab's drop instants {rcv['q_at_drop_pkts']:.0f} packets
({rcv['q_at_drop_payload_b']:.0f} B payload), hence a per-skb overhead of {rcv['skb_overhead_b']:.0f} B.
Workload: each call's INVITE at the lab's recorded arrival instant, the lab's per-call UAS/UAC
reaction times, net 0 (loopback), holding time the lab's median ACK→BYE gap; one worker, one core,
seed = the lab run's seed.

## Columns

`lab_*` measured, `sim_*` the model with the light-load inputs above, `simx_*` the same model
with K_copy, T_sip and K_snd rescaled by `service_scale` = this run's own per-call work (sum over
the six types of the median K_copy + T_sip + K_snd) / the light-load runs' (a diagnostic: it
separates "the proxy's work changed with load" from "the proxy did not get the CPU").  `simcv_*`: the same with the work scale predicted for each run from
the other runs' scales (`service_scale_loo`, leave-one-out interpolation in log rate).
`k_sockq` = t_sockq − t_stack (incl. K^s_sockq), `sojourn` = t_dep − t_arr, over relayed,
not-dropped messages; `drop_rate` = dropped / datagrams from the UAs; `p_sockq_gt_1ms` the share
of messages that spent > 1 ms in the socket queue.  `lab_cycle_gap_*_us`: in the lab worker's
back-to-back cycles (next message already queued), the time from one message's t_dep to the next
t_sockq (Kamailio's loop outside the traced interval plus preemption by other jobs; 0 in the
model); `lab_worker_share` = traced work / cycle time in those cycles.

## Gaps (read before comparing)

{gaps_text(df)}
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sipperf.sim.calibration.fit_lab", description=__doc__.splitlines()[0])
    ap.add_argument("--lab", type=Path, default=LAB_DIR)
    ap.add_argument("--out", type=Path, default=OUT_CSV)
    a = ap.parse_args(argv)
    t = time.perf_counter()
    df, est, s, rcv = fit_table(a.lab)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(a.out, index=False, float_format="%.6g")
    cmd = "python -m sipperf.sim.calibration.fit_lab" + ("" if argv is None and len(sys.argv) <= 1 else
                                             " " + " ".join(argv if argv is not None else sys.argv[1:]))
    a.out.with_suffix(".provenance.md").write_text(provenance(df, est, s, rcv, cmd, LIGHT_RUNS))
    cols = ["rate_cps", "lab_k_sockq_median_us", "sim_k_sockq_median_us", "lab_sojourn_median_us",
            "sim_sojourn_median_us", "lab_drop_rate", "sim_drop_rate"]
    print(df[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"wrote {a.out} ({len(df)} rows) in {time.perf_counter() - t:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
