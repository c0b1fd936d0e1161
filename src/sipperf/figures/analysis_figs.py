"""The quick-look figures of ``sipperf analyze``: components.png and timeline.png, or
transactions.png for a capture at an endpoint (no time component).

:func:`write_figures` draws them for an :class:`~sipperf.analysis.Analysis` (in memory or
streamed) into a directory and returns their paths.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["write_figures", "draw_figures", "transaction_figure"]


def write_figures(analysis, out_dir) -> list[Path]:
    """components.png and timeline.png (or transactions.png at an endpoint) of ``analysis``
    into ``out_dir``; their paths."""
    t_key, arrays = analysis.figure_data()
    return draw_figures(t_key, arrays, analysis.components, Path(out_dir), analysis.transactions)


def draw_figures(t_key: np.ndarray, arrays: dict, comp, out: Path, tx: pd.DataFrame | None = None) -> list[Path]:
    """components.png and timeline.png (or transactions.png at an endpoint).  ``t_key``: each
    row's first instant (float ns, :func:`sipperf.analysis.result.order_key`), ``arrays``: each
    component's values (float ns, NaN where absent) on the same rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    names = [c for c in arrays if np.isfinite(arrays[c]).any()]
    if not names:  # no time component (a capture at an endpoint): request -> response instead
        return transaction_figure(tx, out, plt) if tx is not None and len(tx) else []
    allrow = comp[comp["msg_type"] == "ALL"].iloc[0]
    types = [t for t in comp["msg_type"] if t != "ALL"]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.8 / max(len(types), 1)
    x = np.arange(len(names))
    for i, t in enumerate(types):
        row = comp[comp["msg_type"] == t].iloc[0]
        ax.bar(x + i * width, [row.get(f"{c}_mean", np.nan) for c in names], width, label=t)
    ax.plot(x + 0.4 - width / 2, [allrow.get(f"{c}_mean", np.nan) for c in names], "k_", ms=20, label="ALL")
    ax.set_xticks(x + 0.4 - width / 2, names, rotation=30)
    ax.set_ylabel("mean (µs)")
    ax.set_yscale("log")
    ax.set_title("Time components per message type")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    p = out / "components.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    files.append(p)
    key = "sojourn" if np.isfinite(arrays.get("sojourn", np.array([np.nan]))).any() else (names[0] if names else None)
    if key is not None:
        t = t_key
        v = arrays[key]
        m = np.isfinite(v) & np.isfinite(t)
        fig, ax = plt.subplots(figsize=(8, 3.5))
        if m.any():
            step = max(1, int(m.sum() // 200_000))
            ax.plot((t[m][::step] - t[m].min()) / 1e9, v[m][::step] / 1e3, ",", alpha=0.5)
        ax.set_xlabel("time since first message (s)")
        ax.set_ylabel(f"{key} (µs)")
        ax.set_title(f"{key} over the run")
        fig.tight_layout()
        p = out / "timeline.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        files.append(p)
    return files


def transaction_figure(tx: pd.DataFrame, out: Path, plt) -> list[Path]:
    """Median and p99 of request -> final response per transaction type, retransmissions apart."""
    t = tx[np.isfinite(tx["final_clean_median_us"]) | np.isfinite(tx["final_retrans_median_us"])]
    if not len(t):
        return []
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(t) + 1.8))
    y = np.arange(len(t))
    for off, kind, label in ((-0.2, "clean", "no retransmission"), (0.2, "retrans", "with retransmissions")):
        med = t[f"final_{kind}_median_us"].to_numpy(dtype="float64") / 1e3
        p99 = t[f"final_{kind}_p99_us"].to_numpy(dtype="float64") / 1e3
        ax.barh(y + off, med, 0.4, label=f"median, {label}")
        ax.plot(p99, y + off, "k|", ms=12)
    ax.set_yticks(y, t["method"])
    ax.set_xscale("log")
    ax.set_xlabel("request -> final response (ms, log scale); | = p99")
    ax.set_title("Transactions seen at the capture point")
    ax.legend(fontsize=8)
    fig.tight_layout()
    p = out / "transactions.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return [p]
