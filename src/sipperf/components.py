"""Time components of a message's stay in the proxy (seed 000, eq. 3.1–3.3 and 4.1, 4.4).

From the seven instants of :mod:`sipperf.timeline` (all ns)::

    k_stack = t_stack  - t_arr          (3.1)
    k_sockq = t_sockq  - t_stack        (3.1)  = K^s_sockq + K^w_sockq
    k_copy  = t_sip_in - t_sockq        (3.1)
    k_rcv   = t_sip_in - t_arr          (3.1)
    t_sip1  = t_sip_c  - t_sip_in       (3.2)
    t_sip2  = t_sip_out - t_sip_c       (3.2)
    t_sip   = t_sip1 + t_sip2           (3.2)  (= t_sip_out - t_sip_in)
    k_snd   = t_dep - t_sip_out         (3.3)
    sojourn = t_dep - t_arr             (black-box time in the proxy; all a pcap gives)

and, given the interrupt factor ``alpha`` and the no-queueing baseline ``K^{s,base}_sockq``
(eq. 4.4, supplied by the caller: this module does not import the models)::

    K^s_sockq = alpha * K^{s,base}_sockq                        (4.4)
    X = K^s_sockq + K_copy + T_sip + K_snd   (service time)      (4.1)
    W = K_sockq - K^s_sockq                  (waiting time, K^w_sockq)

Every component is nullable (``Int64``): null where an instant it needs is missing.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
from numba import njit

from sipperf.order_stats import median_percentile
from sipperf.timeline import MSG_TYPES

#: component -> (later instant, earlier instant)
COMPONENTS: dict[str, tuple[str, str]] = {
    "k_stack": ("t_stack", "t_arr"),
    "k_sockq": ("t_sockq", "t_stack"),
    "k_copy": ("t_sip_in", "t_sockq"),
    "k_rcv": ("t_sip_in", "t_arr"),
    "t_sip1": ("t_sip_c", "t_sip_in"),
    "t_sip2": ("t_sip_out", "t_sip_c"),
    "t_sip": ("t_sip_out", "t_sip_in"),
    "k_snd": ("t_dep", "t_sip_out"),
    "sojourn": ("t_dep", "t_arr"),
}
UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def _diff(tl: pd.DataFrame, a: str, b: str) -> tuple[np.ndarray, np.ndarray]:
    """(values int64, null mask) of tl[a] - tl[b] without going through float."""
    xa, xb = tl[a].array, tl[b].array
    va = np.asarray(getattr(xa, "_data", tl[a].to_numpy(dtype="int64", na_value=0)))
    vb = np.asarray(getattr(xb, "_data", tl[b].to_numpy(dtype="int64", na_value=0)))
    na = tl[a].isna().to_numpy() | tl[b].isna().to_numpy()
    return va - vb, na


def derive_arrays(timeline: pd.DataFrame) -> dict[str, np.ndarray]:
    """Components as float64 ns arrays (NaN where not derivable): the fast path for summaries."""
    out = {}
    for name, (a, b) in COMPONENTS.items():
        v, na = _diff(timeline, a, b)
        f = v.astype(np.float64)
        f[na] = np.nan
        out[name] = f
    return out


def derive(timeline: pd.DataFrame) -> pd.DataFrame:
    """The timeline with the nine components added as nullable ``Int64`` ns columns."""
    df = timeline.copy(deep=False)
    for name, (a, b) in COMPONENTS.items():
        v, na = _diff(timeline, a, b)
        df[name] = pd.arrays.IntegerArray(np.where(na, 0, v), na)
    return df


def service_wait(timeline: pd.DataFrame, alpha: float, k_sockq_s_base_ns: float) -> pd.DataFrame:
    """Per message: ``k_sockq_s`` = alpha·K^{s,base}_sockq (4.4), service ``x`` (4.1) and wait ``w``
    (= K_sockq − K^s_sockq), float ns; NaN where an instant is missing."""
    c = derive_arrays(timeline)
    ks = float(alpha) * float(k_sockq_s_base_ns)
    x = ks + c["k_copy"] + c["t_sip"] + c["k_snd"]
    w = c["k_sockq"] - ks
    return pd.DataFrame({"k_sockq_s": np.full(len(timeline), ks), "x": x, "w": w}, index=timeline.index)


def _values_mask(tl: pd.DataFrame, col: str) -> tuple[np.ndarray, np.ndarray]:
    """(int64 values, null mask) of an instant column, without copies for a numpy-backed Int64."""
    arr = tl[col].array
    data, mask = getattr(arr, "_data", None), getattr(arr, "_mask", None)
    if isinstance(data, np.ndarray) and data.dtype == np.int64 and isinstance(mask, np.ndarray):
        return data, mask
    return tl[col].to_numpy(dtype="int64", na_value=0), tl[col].isna().to_numpy()


@njit(cache=True, nogil=True)
def _bucket_diff(va, vb, ma, mb, gidx, scale, grouped, out, off):
    """(va - vb) / scale of the rows where both are present, into ``out``: in row order, or
    with ``grouped`` by ``gidx`` (row order kept inside a group; -1 = no group), ``off``
    getting the group offsets.  Returns the number of values (all groups)."""
    n_groups = off.shape[0] - 1
    cnt = np.zeros(n_groups, np.int64)
    n_all = 0
    for i in range(va.shape[0]):
        if not (ma[i] or mb[i]):
            n_all += 1
            if gidx[i] >= 0:
                cnt[gidx[i]] += 1
    off[0] = 0
    for g in range(n_groups):
        off[g + 1] = off[g] + cnt[g]
    pos = off[:n_groups].copy()
    j = 0
    for i in range(va.shape[0]):
        if not (ma[i] or mb[i]):
            x = np.float64(va[i] - vb[i]) / scale
            if not grouped:
                out[j] = x
                j += 1
            elif gidx[i] >= 0:
                out[pos[gidx[i]]] = x
                pos[gidx[i]] += 1
    return n_all


@njit(cache=True, nogil=True)
def _bucket_float(v, gidx, scale, grouped, out, off):
    """As :func:`_bucket_diff` for a float array (non-finite values are left out)."""
    n_groups = off.shape[0] - 1
    cnt = np.zeros(n_groups, np.int64)
    n_all = 0
    for i in range(v.shape[0]):
        if np.isfinite(v[i]):
            n_all += 1
            if gidx[i] >= 0:
                cnt[gidx[i]] += 1
    off[0] = 0
    for g in range(n_groups):
        off[g + 1] = off[g] + cnt[g]
    pos = off[:n_groups].copy()
    j = 0
    for i in range(v.shape[0]):
        if np.isfinite(v[i]):
            x = v[i] / scale
            if not grouped:
                out[j] = x
                j += 1
            elif gidx[i] >= 0:
                out[pos[gidx[i]]] = x
                pos[gidx[i]] += 1
    return n_all


def summary(timeline: pd.DataFrame, unit: str = "us", *, alpha: float | None = None,
            k_sockq_s_base_ns: float | None = None, quantile: float = 0.99) -> pd.DataFrame:
    """One row per message type present (canonical order) plus ``ALL``: for every component it
    could derive (at least one non-null value), ``<comp>_count``, ``_mean``, ``_median``,
    ``_p99`` in ``unit`` (ns, us, ms, s); ``count`` is the number of messages.  With ``alpha``
    and ``k_sockq_s_base_ns`` also ``x`` (service, eq. 4.1) and ``w`` (wait).

    The numbers are those of ``x.mean()``, ``np.median`` and ``np.percentile`` on each group's
    values (row order), bit for bit; one compiled pass per component groups the values and
    :mod:`sipperf.order_stats` selects the order statistics without sorting."""
    if unit not in UNIT_NS:
        raise ValueError(f"unit {unit!r} not in {list(UNIT_NS)}")
    scale = float(UNIT_NS[unit])
    n = len(timeline)
    codes, uniq = pd.factorize(timeline["msg_type"], use_na_sentinel=True)
    uniq = [str(u) for u in uniq]
    names = [t for t in MSG_TYPES if t in uniq]
    lut = np.full(len(uniq) + 1, -1, np.int8)  # last slot: the NA code -1
    for g, t in enumerate(names):
        lut[uniq.index(t)] = g
    gidx = lut[codes]
    del codes
    counts = np.bincount(gidx.astype(np.int64) + 1, minlength=len(names) + 1)[1:]

    def diff_filler(a: str, b: str):
        va, ma = _values_mask(timeline, a)
        vb, mb = _values_mask(timeline, b)
        return lambda grouped, out, off: _bucket_diff(va, vb, ma, mb, gidx, scale, grouped, out, off)

    jobs = [(name, diff_filler(a, b)) for name, (a, b) in COMPONENTS.items()]
    if alpha is not None and k_sockq_s_base_ns is not None:
        sw = service_wait(timeline, alpha, k_sockq_s_base_ns)
        for name in ("x", "w"):
            v = np.ascontiguousarray(sw[name].to_numpy(), dtype=np.float64)
            jobs.append((name, lambda grouped, out, off, v=v:
                         _bucket_float(v, gidx, scale, grouped, out, off)))
    return _summary_rows(names, counts, n, jobs, quantile)


def summary_from_values(type_counts: dict[str, int], values: dict[str, tuple[np.ndarray, np.ndarray]],
                        unit: str = "us", quantile: float = 0.99) -> pd.DataFrame:
    """:func:`summary` from what a streaming pass keeps: the number of messages per type
    (``type_counts``, msg_type -> count) and, per component, its int64 ns values in timeline
    row order with their message type (index into :data:`~sipperf.timeline.MSG_TYPES`).
    The same numbers as :func:`summary` on the timeline those values come from, bit for bit."""
    if unit not in UNIT_NS:
        raise ValueError(f"unit {unit!r} not in {list(UNIT_NS)}")
    scale = float(UNIT_NS[unit])
    names = [t for t in MSG_TYPES if type_counts.get(t, 0) > 0]
    counts = np.array([type_counts[t] for t in names], np.int64)
    lut = np.full(len(MSG_TYPES) + 1, -1, np.int8)
    for g, t in enumerate(names):
        lut[MSG_TYPES.index(t)] = g
    jobs = []
    for name, (v, types) in values.items():
        v = np.ascontiguousarray(v, dtype=np.int64)
        gi = lut[np.asarray(types, dtype=np.int64)]
        z = np.zeros(len(v), np.int64)
        m = np.zeros(len(v), bool)
        jobs.append((name, lambda grouped, out, off, v=v, gi=gi, z=z, m=m:
                     _bucket_diff(v, z, m, m, gi, scale, grouped, out, off)))
    return _summary_rows(names, counts, int(sum(type_counts.values())), jobs, quantile,
                         buf_len=max((len(v) for v, _ in values.values()), default=0))


def _summary_rows(names: list[str], counts: np.ndarray, n: int, jobs: list, quantile: float,
                  buf_len: int | None = None) -> pd.DataFrame:
    """The rows of :func:`summary`: ``jobs`` = [(component, fill(grouped, out, off))]."""
    rows = [{"msg_type": t, "count": int(c)} for t, c in zip(names, counts)]
    rows.append({"msg_type": "ALL", "count": n})
    pct = quantile * 100
    n_groups = len(names)
    local = threading.local()  # per worker thread: one float buffer, reused
    buf_len = n if buf_len is None else buf_len

    def one(x: np.ndarray) -> tuple[float, ...]:
        if not len(x):
            return (0, np.nan, np.nan, np.nan)
        return (len(x), float(x.mean()), *median_percentile(x, pct))

    def stats(c: str, fill) -> list[tuple[float, ...]] | None:
        """(count, mean, median, p) per group (ALL last) of one component, or None if empty;
        ``fill(grouped, out, off)`` writes the values (two passes: all, then by group)."""
        if not hasattr(local, "buf"):
            local.buf = np.empty(buf_len, np.float64)
        off = np.zeros(n_groups + 1, np.int64)
        n_all = fill(False, local.buf, off)
        if n_all == 0:
            return None
        res_all = one(local.buf[:n_all])
        fill(True, local.buf, off)
        return [one(local.buf[off[g]:off[g + 1]]) for g in range(n_groups)] + [res_all]

    # two threads (the compiled kernels and numpy's mean release the GIL); results in job order
    with ThreadPoolExecutor(max_workers=2) as ex:
        results = list(ex.map(lambda job: stats(*job), jobs))
    for (c, _), res in zip(jobs, results):
        if res is None:
            continue
        for row, (cnt, mean, med, p) in zip(rows, res):
            row[f"{c}_count"] = int(cnt)
            row[f"{c}_mean"] = mean
            row[f"{c}_median"] = med
            row[f"{c}_p99"] = p
    return pd.DataFrame(rows)
