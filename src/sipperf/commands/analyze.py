"""``sipperf analyze PATH... --out DIR``: your own logs -> components, call metrics, report, figures.

Writes ``DIR/components.csv`` (one row per msg_type plus ``ALL``: count and mean/median/p99
in µs of every derivable component, incl. ``sojourn``; plus the batch-means 95% CI half-width
of each ALL mean), ``DIR/calls.csv`` (RFC 6076 metrics and PDR, :mod:`sipperf.calls`),
``DIR/report.json`` (the ingest account: read, parsed, skipped by reason, per input file) and
``DIR/components.png`` / ``DIR/timeline.png``.  Unusable input -> exit code 2 and a message
naming the file and position.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd


def analyze(paths, out_dir, *, proxy=None, strict: bool = False, offered: int | None = None,
            figures: bool = True) -> dict:
    """Do what ``sipperf analyze`` does; returns {"timeline", "components", "calls", "report", "files"}."""
    from sipperf import calls, components, stats
    from sipperf.ingest import load

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tl, report = load(paths, strict=strict, proxy=proxy)
    comp = components.summary(tl, unit="us")
    arrays = components.derive_arrays(tl)
    order = np.argsort(_order_key(tl), kind="stable")
    for c, v in arrays.items():
        col = f"{c}_ci95_hw"
        vals = v[order]
        vals = vals[np.isfinite(vals)] / 1e3
        hw = stats.batch_means_ci(vals).half_width if len(vals) >= 2 * stats.DEFAULT_BATCHES else np.nan
        if f"{c}_mean" in comp.columns:
            comp[col] = np.where(comp["msg_type"] == "ALL", hw, np.nan)
    comp.to_csv(out / "components.csv", index=False)
    cm = calls.metrics(tl, offered=offered)
    cm.to_csv(out / "calls.csv", index=False)
    (out / "report.json").write_text(report.to_json())
    files = [out / "components.csv", out / "calls.csv", out / "report.json"]
    if figures:
        files += _figures(tl, arrays, comp, out)
    return {"timeline": tl, "components": comp, "calls": cm, "report": report, "files": files}


def _order_key(tl: pd.DataFrame) -> np.ndarray:
    from sipperf.timeline import INSTANTS

    key = np.full(len(tl), np.inf)
    for c in reversed(INSTANTS):
        v = tl[c].to_numpy(dtype="float64", na_value=np.nan)
        key = np.where(np.isfinite(v), v, key)
    return key


def _figures(tl, arrays, comp, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    names = [c for c in arrays if np.isfinite(arrays[c]).any()]
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
        t = _order_key(tl)
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


def _run(args: argparse.Namespace) -> int:
    from sipperf.timeline import IngestError

    try:
        res = analyze(args.paths, args.out, proxy=args.proxy, strict=args.strict, offered=args.offered,
                      figures=not args.no_figures)
    except IngestError as e:
        print(f"sipperf analyze: unusable input: {e}", file=sys.stderr)
        return 2
    rep = res["report"]
    print(str(rep))
    print(f"wrote {', '.join(str(f) for f in res['files'])}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analyze", help="analyse logs/captures: components.csv, calls.csv, report.json, figures",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or directories, any mix of formats")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--proxy", default=None, help="proxy ip:port for pcaps (default: found from traffic)")
    p.add_argument("--strict", action="store_true", help="fail on the first bad record instead of skipping")
    p.add_argument("--offered", type=int, default=None, help="messages offered (PDR denominator)")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    p.set_defaults(func=_run)
