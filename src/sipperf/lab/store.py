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
    # the recording protocol (absent from the recordings before it)
    "tracer", "tracer_pair", "placement", "load_nice", "proxy_cpu_s", "proxy_cpu_window_s",
    "proxy_cpu_us_per_call", "generator_cpu_s", "generator_bound", "generator_bound_why",
    # issue 25: replicated points, BYEs refused by an all-request limit, the goodput series used
    "replicate", "bye_refused_503", "goodput_series",
)

#: columns of ``overload.csv`` added by :func:`overload_table` (one row per guard and load)
OVERLOAD_POINT_COLUMNS = ("replicates", "replicate_run_ids", "goodput_sd_cps", "goodput_ci_source")

#: counts summed over a point's replicates in ``overload.csv``
_OVERLOAD_SUMS = ("calls_offered", "successful_calls", "failed_calls", "rejected_503", "bye_refused_503",
                  "uac_retransmissions", "uas_retransmissions", "proxy_read", "proxy_socket_drops",
                  "watchdog_minor", "proxy_cpu_s", "proxy_cpu_window_s", "generator_cpu_s")
_OVERLOAD_MEANS = ("goodput_series_mean_cps", "cpu_busy_mean", "foreign_cpu_mean")
_OVERLOAD_ANY = ("machine_busy", "forced", "pilot", "generator_bound")


def overload_table(runs: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """``overload.csv``: one row per (guard, load) of the tracer-off overload runs, its
    replicates combined (each a fresh proxy and seed, :func:`sipperf.lab.plan.overload_points`).
    Counts are summed over the replicates (``calls_offered`` too, so ratios stay right),
    ``pdr_counters`` and ``proxy_cpu_us_per_call`` recomputed from the sums, ``goodput_cps`` is
    the replicates' mean with ``goodput_ci_hw_cps`` the Student-t half-width over them
    (``level``, n - 1 degrees of freedom; ``goodput_ci_source`` says so); a point with one run
    keeps that run's batch-means half-width (per-second SIPp counts).  The tracer-on twin of
    the ``tracer_pair`` stays in ``runs.csv`` and ``overload_replicates.csv``."""
    from scipy import stats as sps

    o = runs[runs["series"] == "overload"].copy() if "series" in runs else runs.iloc[0:0]
    if "tracer" in o:
        o = o[o["tracer"].fillna("none") == "none"]
    if o.empty:
        return o
    cols = [c for c in OVERLOAD_COLUMNS if c in o.columns]
    rows = []
    for (g, f), d in o.groupby(["guard", "fraction_of_knee"], sort=True):
        d = d.sort_values("replicate") if "replicate" in d else d
        first = d.iloc[0]
        row = {c: first[c] for c in cols}
        n = len(d)
        row["run_id"] = (str(first["run_id"]).rsplit("-rep", 1)[0] if n > 1 or "-rep" in str(first["run_id"])
                         else first["run_id"])
        for c in _OVERLOAD_SUMS:
            if c in d:
                row[c] = d[c].sum(min_count=1)
        for c in _OVERLOAD_MEANS:
            if c in d:
                row[c] = d[c].mean()
        for c in _OVERLOAD_ANY:
            if c in d:
                row[c] = bool(d[c].fillna(False).astype(bool).any())
        if "start_utc" in d:
            row["start_utc"] = d["start_utc"].min()
        if "generator_bound_why" in d:
            why = d["generator_bound_why"].dropna()
            row["generator_bound_why"] = why.iloc[0] if len(why) else None
        if "replicate" in row:
            row["replicate"] = None
        rd = row.get("proxy_read", np.nan) + row.get("proxy_socket_drops", np.nan)
        row["pdr_counters"] = row["proxy_socket_drops"] / rd if rd and np.isfinite(rd) else np.nan
        if "proxy_cpu_us_per_call" in row and row.get("calls_offered"):
            row["proxy_cpu_us_per_call"] = 1e6 * row.get("proxy_cpu_s", np.nan) / row["calls_offered"]
        gp = d["goodput_cps"].to_numpy(dtype=float)
        row["goodput_cps"] = float(np.nanmean(gp)) if np.isfinite(gp).any() else np.nan
        row["replicates"] = n
        row["replicate_run_ids"] = " ".join(map(str, d["run_id"]))
        if n >= 2:
            sd = float(np.std(gp, ddof=1))
            row["goodput_sd_cps"] = sd
            row["goodput_ci_hw_cps"] = float(sps.t.ppf(0.5 + level / 2, n - 1)) * sd / np.sqrt(n)
            row["goodput_ci_source"] = f"replications: Student t, {n - 1} df"
        else:
            row["goodput_sd_cps"] = np.nan
            row["goodput_ci_source"] = ("batch means of per-second SIPp counts (one run)"
                                        if np.isfinite(row.get("goodput_ci_hw_cps", np.nan)) else "none (one run)")
        rows.append(row)
    out = pd.DataFrame(rows)
    return out[[c for c in (*OVERLOAD_COLUMNS, *OVERLOAD_POINT_COLUMNS) if c in out.columns]]


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

    def knees(self, setup: str = "protocol") -> dict[int, float]:
        """{workers: knee_cps}; in a protocol recording (``knees.csv`` has a ``setup`` column)
        the knees of ``setup``."""
        d = self._csv("knees.csv")
        if d.empty:
            return {}
        if "setup" in d:
            d = d[d["setup"] == setup]
        d = d[d["knee_cps"].notna()]
        return {int(w): float(k) for w, k in zip(d["workers"], d["knee_cps"])}

    def knee_replicates(self, setup: str, workers: int) -> dict[int, dict]:
        """The knee searches recorded so far for (setup, workers): {replicate: row}."""
        d = self._csv("knee_replicates.csv")
        if d.empty:
            return {}
        d = d[(d["setup"] == setup) & (d["workers"] == workers)]
        out = {}
        for r in d.to_dict("records"):
            out[int(r["replicate"])] = {k: (None if isinstance(v, float) and np.isnan(v) else v)
                                        for k, v in r.items()}
        return out

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
        if "setup" not in row:
            self._upsert_csv("knees.csv", [row], "workers", row["workers"])
            return
        self._upsert_keys("knees.csv", row, ("setup", "workers"))

    def add_knee_replicate(self, row: dict) -> None:
        """One knee search of a protocol recording (``knee_replicates.csv``)."""
        self._upsert_keys("knee_replicates.csv", row, ("setup", "workers", "replicate"))

    def _upsert_keys(self, name: str, row: dict, keys: tuple[str, ...]) -> None:
        d = self._csv(name)
        if len(d) and all(k in d for k in keys):
            same = np.ones(len(d), bool)
            for k in keys:
                same &= (d[k] == row[k]).to_numpy()
            d = d[~same]
        new = pd.DataFrame([row])
        _write_csv(pd.concat([d, new], ignore_index=True) if len(d) else new, self.root / name)

    def write_overload(self) -> None:
        """``overload.csv`` (one row per guard and load, replicates combined:
        :func:`overload_table`) and, when a point has replicates or a tracer twin,
        ``overload_replicates.csv`` (one row per run, with its ``replicate`` index)."""
        d = self._csv("runs.csv")
        if d.empty or "series" not in d:
            return
        o = d[d["series"] == "overload"]
        if o.empty:
            return
        _write_csv(overload_table(d).sort_values(["guard", "rate_cps"]), self.root / "overload.csv")
        replicated = ("replicate" in o and (o["replicate"].fillna(0) > 0).any()) or \
            ("tracer" in o and (o["tracer"].fillna("none") != "none").any())
        if replicated:
            cols = [c for c in OVERLOAD_COLUMNS if c in o.columns]
            sort = [c for c in ("guard", "rate_cps", "replicate", "tracer") if c in o.columns]
            _write_csv(o[cols].sort_values(sort), self.root / "overload_replicates.csv")

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


class ChainDataset(Dataset):
    """``datasets/lab/protocol/chain/``: the chain of proxies (:mod:`sipperf.lab.chain`), one row
    per run in ``runs.csv``, per run and hop in ``hops.csv``, the capture's per-hop components in
    ``components.csv``, each run's compact meta in ``runs/<run_id>.json``, the raw files of the
    runs it keeps in ``raw/<run_id>/``.  A run is done when its row is in ``runs.csv``."""

    def add_run(self, result: dict) -> None:
        rid = result["run"]["run_id"]
        self._upsert_csv("components.csv", result["components"], "run_id", rid)
        self._upsert_csv("hops.csv", result["hops"], "run_id", rid)
        self.write_json(f"runs/{rid}.json", result["meta"])
        self._upsert_csv("runs.csv", [result["run"]], "run_id", rid)

    def hops(self) -> pd.DataFrame:
        return self._csv("hops.csv")

    def keep_raw(self, run_id: str, run_dir: Path) -> None:
        """The run's capture (gzipped), meta.json and Kamailio configurations under raw/<run_id>/."""
        import gzip
        import shutil

        raw = self.root / "raw" / run_id
        shutil.rmtree(raw, ignore_errors=True)
        raw.mkdir(parents=True)
        cap = Path(run_dir) / "capture.pcapng"
        if cap.exists():
            with open(cap, "rb") as src, gzip.open(raw / "capture.pcapng.gz", "wb", 9) as dst:
                shutil.copyfileobj(src, dst)
        for p in sorted(Path(run_dir).glob("kamailio-*.cfg")) + [Path(run_dir) / "meta.json"]:
            if p.exists():
                shutil.copy(p, raw / p.name)
