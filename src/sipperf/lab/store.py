"""Write ``datasets/lab/long`` point by point, so that a recording can stop and resume.

Every file is rewritten whole through a temporary file and ``os.replace`` after each point, so an
interrupted recording leaves the previous consistent state.  A point is *done* when its row is in
``runs.csv``; the recorder skips done points (``--redo RUN_ID`` records one again).  The format
is read by :mod:`sipperf.ingest.lab_runs.dataset` (``load_points``, ``load_components``,
``load_histograms``).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

#: columns of ``overload.csv`` (the table the overload chapter reads)
OVERLOAD_COLUMNS = (
    "run_id", "guard", "guard_cps", "rate_cps", "knee_cps", "fraction_of_knee", "offered_seconds",
    "calls_offered", "successful_calls", "failed_calls", "rejected_503", "goodput_cps",
    "goodput_series_mean_cps", "goodput_ci_hw_cps", "uac_retransmissions", "uas_retransmissions",
    "proxy_read", "proxy_socket_drops", "pdr_counters", "watchdog_minor", "cpu_busy_mean",
    "foreign_cpu_mean", "machine_busy", "forced", "pilot", "start_utc",
)


def _write_csv(df: pd.DataFrame, p: Path) -> None:
    tmp = p.with_suffix(p.suffix + ".tmp")
    df.to_csv(tmp, index=False, float_format="%.6g")
    os.replace(tmp, p)


class Dataset:
    """The directory of a long recording (``datasets/lab/long`` or a pilot directory)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "runs").mkdir(exist_ok=True)

    # -- reading ---------------------------------------------------------------------------------
    def _csv(self, name: str) -> pd.DataFrame:
        p = self.root / name
        try:
            return pd.read_csv(p) if p.exists() and p.stat().st_size else pd.DataFrame()
        except pd.errors.EmptyDataError:   # a table with no rows and no header yet
            return pd.DataFrame()

    def points(self) -> pd.DataFrame:
        """The summary rows recorded so far (``runs.csv``; empty before the first point)."""
        return self._csv("runs.csv")

    def done(self) -> set[str]:
        d = self._csv("runs.csv")
        return set(d["run_id"]) if "run_id" in d else set()

    def knees(self) -> dict[int, float]:
        d = self._csv("knees.csv")
        if d.empty:
            return {}
        d = d[d["knee_cps"].notna()]
        return {int(w): float(k) for w, k in zip(d["workers"], d["knee_cps"])}

    # -- writing ---------------------------------------------------------------------------------
    def _upsert_csv(self, name: str, rows: list[dict], key: str, value) -> None:
        d = self._csv(name)
        if key in d:
            d = d[d[key] != value]
        new = pd.DataFrame(rows)
        if new.empty and d.empty and (self.root / name).exists():
            return   # nothing to add (an overload point has no components): keep the file as it is
        d = pd.concat([d, new], ignore_index=True) if len(d) else new
        _write_csv(d, self.root / name)

    def add_point(self, result: dict) -> None:
        rid = result["summary"]["run_id"]
        self._upsert_csv("components.csv", result["components"], "run_id", rid)
        hp = self.root / "histograms.parquet"
        h = pd.read_parquet(hp) if hp.exists() else pd.DataFrame()
        if len(h):
            h = h[h["run_id"] != rid]
        new = pd.DataFrame(result["hist"], columns=["run_id", "msg_type", "component", "bin", "count"])
        h = pd.concat([h, new], ignore_index=True) if len(h) else new
        h = h.astype({"run_id": "string", "msg_type": "string", "component": "string",
                      "bin": "int16", "count": "int32"})
        tmp = hp.with_suffix(".parquet.tmp")
        h.to_parquet(tmp, index=False, compression="zstd")
        os.replace(tmp, hp)
        # the summary row last: its presence marks the point done
        self._upsert_csv("runs.csv", [result["summary"]], "run_id", rid)
        self.write_overload()

    def add_probe(self, row: dict) -> None:
        d = self._csv("probes.csv")
        new = pd.DataFrame([row])
        _write_csv(pd.concat([d, new], ignore_index=True) if len(d) else new, self.root / "probes.csv")

    def set_knee(self, row: dict) -> None:
        self._upsert_csv("knees.csv", [row], "workers", row["workers"])

    def write_overload(self) -> None:
        d = self._csv("runs.csv")
        if d.empty or "series" not in d:
            return
        o = d[d["series"] == "overload"]
        if o.empty:
            return
        cols = [c for c in OVERLOAD_COLUMNS if c in o.columns]
        _write_csv(o[cols].sort_values(["guard", "rate_cps"]), self.root / "overload.csv")

    def write_json(self, name: str, obj) -> None:
        tmp = self.root / (name + ".tmp")
        tmp.write_text(json.dumps(obj, indent=1, default=str))
        os.replace(tmp, self.root / name)

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file())


def knee_from_probes(rates: list[float], pdrs: list[float], target: float = 0.01) -> dict:
    """The knee between the highest rate below ``target`` and the lowest rate at or above it,
    interpolated linearly in the drop rate.  ``knee_cps`` is None if the probes do not bracket it."""
    pts = sorted(zip(rates, pdrs))
    below = [(r, p) for r, p in pts if p < target]
    above = [(r, p) for r, p in pts if p >= target]
    if not below or not above:
        return {"knee_cps": None, "rate_below": below[-1][0] if below else None,
                "rate_above": above[0][0] if above else None}
    (r0, p0) = max(below)
    (r1, p1) = min(above)
    if r1 <= r0:      # non-monotone probes (noise): take the midpoint of the crossing
        return {"knee_cps": float(np.sqrt(r0 * r1)), "rate_below": r0, "rate_above": r1,
                "pdr_below": p0, "pdr_above": p1, "note": "non-monotone probes"}
    k = r0 + (target - p0) / (p1 - p0) * (r1 - r0)
    return {"knee_cps": float(k), "rate_below": r0, "rate_above": r1, "pdr_below": p0, "pdr_above": p1}
