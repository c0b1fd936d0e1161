"""Figure helpers for the ingest chapter (ch. 4): one real call's ladder, component ECDFs, MSER-5.

Data flows one way: these functions take timelines (:mod:`sipperf.timeline`) or arrays and
return tables, curves or matplotlib axes; they never read a chapter.
"""
from __future__ import annotations

import gzip
import logging
import shutil
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from sipperf.components import COMPONENTS
from sipperf.timeline import CALL_FLOW

__all__ = ["quiet_asyncio", "gunzip_to", "call_messages", "complete_call", "draw_call_ladder", "ecdf_on_grid",
           "component_ecdfs", "mser_curve"]


@contextmanager
def quiet_asyncio(level: int = logging.ERROR):
    """Raise the ``asyncio`` logger's level for the duration of the block.

    When pyshark runs inside a Jupyter kernel its event loop lives on a helper thread, and
    asyncio's child watcher may log "Unknown child process pid ..., will report returncode
    255" after tshark has exited and been reaped elsewhere.  The packets are complete (the
    account balances); the message is noise on a book page."""
    log = logging.getLogger("asyncio")
    old = log.level
    log.setLevel(level)
    try:
        yield
    finally:
        log.setLevel(old)


def gunzip_to(path_gz: str | Path, out_dir: str | Path) -> Path:
    """Decompress ``path_gz`` into ``out_dir`` (name without ``.gz``); returns the new path.

    The capture readers take plain pcap/pcapng files; the lab dataset ships them gzipped."""
    src = Path(path_gz)
    dst = Path(out_dir) / (src.name[:-3] if src.name.endswith(".gz") else src.name)
    with gzip.open(src, "rb") as fi, open(dst, "wb") as fo:
        shutil.copyfileobj(fi, fo)
    return dst


def call_messages(timeline: pd.DataFrame, call_id: str) -> pd.DataFrame:
    """The six call-flow messages of one call relayed by the proxy, in call order.

    Columns: ``msg_type``, ``t_in_ms`` (``t_arr`` relative to the INVITE's ``t_arr``),
    ``t_out_ms`` (``t_dep``, same origin), ``in_proxy_us`` (``t_dep - t_arr``) and every
    component of :data:`sipperf.components.COMPONENTS` in µs (NaN where an instant is missing).
    Rows the proxy originated (e.g. its 100 Trying) and types outside the six are left out."""
    tl = timeline[(timeline["call_id"] == call_id) & timeline["msg_type"].isin(CALL_FLOW)]
    tl = tl[tl["t_arr"].notna()].sort_values("t_arr", kind="stable")
    if tl.empty:
        raise KeyError(f"no relayed call-flow messages for call {call_id!r}")
    t0 = int(tl.loc[tl["msg_type"] == "INVITE", "t_arr"].min()) if (tl["msg_type"] == "INVITE").any() \
        else int(tl["t_arr"].min())
    f = lambda c: tl[c].to_numpy(dtype="float64", na_value=np.nan)  # noqa: E731
    out = pd.DataFrame({"msg_type": tl["msg_type"].astype(str).to_numpy(),
                        "t_in_ms": (f("t_arr") - t0) / 1e6,
                        "t_out_ms": (f("t_dep") - t0) / 1e6,
                        "in_proxy_us": (f("t_dep") - f("t_arr")) / 1e3})
    for name, (a, b) in COMPONENTS.items():
        out[name] = (f(a) - f(b)) / 1e3
    return out.reset_index(drop=True)


def complete_call(timeline: pd.DataFrame) -> str:
    """The first call (by INVITE arrival) whose six messages all passed the proxy with t_arr and t_dep."""
    tl = timeline[timeline["msg_type"].isin(CALL_FLOW) & timeline["t_arr"].notna()
                  & timeline["t_dep"].notna()]
    n = tl.groupby("call_id", observed=True)["msg_type"].nunique()
    ok = n[n == len(CALL_FLOW)].index
    if not len(ok):
        raise ValueError("no call with all six messages relayed")
    inv = tl[tl["call_id"].isin(ok) & (tl["msg_type"] == "INVITE")].sort_values("t_arr")
    return str(inv["call_id"].iloc[0])


def draw_call_ladder(msgs: pd.DataFrame, ax=None, *, trying: bool = True):
    """Ladder diagram of one measured call (output of :func:`call_messages`).

    Reuses :func:`sipperf.figures.ladder.draw_ladder`, annotating each message's time inside the
    proxy (µs, red) and, on the caller's side, when it reached the proxy (ms after the INVITE)."""
    from sipperf.figures import ladder

    first = msgs.drop_duplicates("msg_type").set_index("msg_type")
    ax = ladder.draw_ladder(ax, proxy_us=first["in_proxy_us"].to_dict(), trying=trying)
    # the rows of draw_ladder: one unit per message, the holding gap before BYE
    y, hold = 0.0, 1.2
    for m in CALL_FLOW:
        if m == "BYE":
            y += hold
        if m in first.index:
            ax.text(-0.33, y + 0.05, f"t = {first.loc[m, 't_in_ms']:.2f} ms", fontsize=7.5,
                    color="0.3", va="center", ha="left")
        y += 1.0
    return ax


def ecdf_on_grid(x: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Empirical CDF of the finite values of ``x`` evaluated on ``grid`` (fraction ≤ grid value)."""
    a = np.sort(np.asarray(x, dtype="float64")[np.isfinite(np.asarray(x, dtype="float64"))])
    if not len(a):
        return np.full(len(grid), np.nan)
    return np.searchsorted(a, np.asarray(grid, dtype="float64"), side="right") / len(a)


def component_ecdfs(timeline: pd.DataFrame, grid_us: np.ndarray,
                    comps=("k_stack", "k_sockq", "t_sip", "k_snd", "sojourn"),
                    relayed_only: bool = True) -> dict[str, np.ndarray]:
    """{component: ECDF over ``grid_us``} of the six call-flow message types of a timeline."""
    from sipperf.components import derive_arrays

    tl = timeline[timeline["msg_type"].isin(CALL_FLOW)] if relayed_only else timeline
    arr = derive_arrays(tl)
    return {c: ecdf_on_grid(arr[c] / 1e3, grid_us) for c in comps}


def mser_curve(x, batch: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """(truncation d in observations, MSER(d)) for d = 0, batch, ..., up to half the series.

    The same statistic :func:`sipperf.stats.mser5` minimises, for plotting."""
    a = np.asarray(x, dtype="float64")
    a = a[np.isfinite(a)]
    k = len(a) // batch
    z = a[:k * batch].reshape(k, batch).mean(axis=1)
    d = np.arange(k // 2 + 1)
    vals = np.array([np.var(z[j:]) / (k - j) for j in d])  # = SSE/(k-d)^2
    return d * batch, vals
