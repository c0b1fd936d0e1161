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

import numpy as np
import pandas as pd

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


def summary(timeline: pd.DataFrame, unit: str = "us", *, alpha: float | None = None,
            k_sockq_s_base_ns: float | None = None, quantile: float = 0.99) -> pd.DataFrame:
    """One row per message type present (canonical order) plus ``ALL``: for every component it
    could derive (at least one non-null value), ``<comp>_count``, ``_mean``, ``_median``,
    ``_p99`` in ``unit`` (ns, us, ms, s); ``count`` is the number of messages.  With ``alpha``
    and ``k_sockq_s_base_ns`` also ``x`` (service, eq. 4.1) and ``w`` (wait)."""
    if unit not in UNIT_NS:
        raise ValueError(f"unit {unit!r} not in {list(UNIT_NS)}")
    scale = UNIT_NS[unit]
    codes, uniq = pd.factorize(timeline["msg_type"], use_na_sentinel=True)
    uniq = [str(u) for u in uniq]
    groups = [(t, codes == uniq.index(t)) for t in MSG_TYPES if t in uniq]
    groups.append(("ALL", np.ones(len(timeline), bool)))
    del codes  # int64 per message: not needed once the group masks exist
    rows = [{"msg_type": name, "count": int(m.sum())} for name, m in groups]
    pct = quantile * 100

    def arrays():  # one component at a time keeps memory at one float column
        for name, (a, b) in COMPONENTS.items():
            v, na = _diff(timeline, a, b)
            f = v.astype(np.float64)
            del v
            f[na] = np.nan
            yield name, f
        if alpha is not None and k_sockq_s_base_ns is not None:
            sw = service_wait(timeline, alpha, k_sockq_s_base_ns)
            yield "x", sw["x"].to_numpy()
            yield "w", sw["w"].to_numpy()

    for c, v in arrays():
        fin = np.isfinite(v)
        if not fin.any():
            continue
        for row, (name, m) in zip(rows, groups):
            x = v[m & fin]
            x /= scale
            row[f"{c}_count"] = int(len(x))
            if len(x):  # order statistics need no copy of x: reorder it in place after the mean
                row[f"{c}_mean"] = float(x.mean())
                row[f"{c}_median"] = float(np.median(x, overwrite_input=True))
                row[f"{c}_p99"] = float(np.percentile(x, pct, overwrite_input=True))
            else:
                row[f"{c}_mean"] = row[f"{c}_median"] = row[f"{c}_p99"] = np.nan
            del x
    return pd.DataFrame(rows)
