"""Long lab points: run in rounds until the mean sojourn is known to within 5 % (or a cap).

A *point* (one configuration: workers, rate, tuning, ...) is recorded in *rounds*; each round is
one :func:`sipperf.lab.run.run_lab` (fresh proxy, new seed), joined by
:func:`sipperf.ingest.lab_runs.run.read_run` and reduced at once to compact statistics, so no round's
raw files are kept.  Per round:

1. the relayed messages in arrival order (``t_wire_in``, the pcap instant);
2. the warm-up cut: MSER-5 (:func:`sipperf.stats.mser5`) on the sojourn series
   ``t_dep - t_arr`` of the forwarded messages; everything that arrived before the cut is dropped;
3. the cool-down cut: messages arriving after the round's last INVITE (the tail of the last
   calls, at a falling load) are dropped.

The rounds' steady-state windows are pooled.  The point stops when

* at least ``min_calls`` calls were offered, and
* the batch-means 95 % CI half-width (:func:`sipperf.stats.batch_means_ci`, 30 batches) of the
  mean sojourn is at most ``ci_target`` (5 %) of the mean,

or when a cap (``max_calls`` calls or ``max_load_s`` seconds of load) is reached; the reason is
recorded (``stop_reason``: ``ci``, ``cap_calls``, ``cap_time``, ``no_sojourn``).

What is kept: one summary row, per-(message type, component) statistics (n, mean and its
batch-means CI, p50/p90/p99, max) and histograms on fixed log-spaced bins
(:func:`sipperf.ingest.lab_runs.dataset.hist_edges_ns`) -- the format of ``datasets/lab/long/``.
"""
from __future__ import annotations

import dataclasses
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from sipperf import stats
from sipperf.ingest.lab_runs.dataset import (HIST_COMPONENTS, hist_counts, save_run)
from sipperf.lab import machine, sipp
from sipperf.lab.run import LabConfig, run_lab
from sipperf.timeline import MSG_TYPES

CI_LEVEL = 0.95


class MachineBusy(RuntimeError):
    """The machine was busy with other work and the recorder was not told to --force."""


@dataclass
class PointSpec:
    """One point of a series and its stopping rule."""

    run_id: str
    series: str
    cfg: LabConfig                      #: the configuration; ``calls`` and ``seed`` set per round
    min_calls: int = 20000              #: at least this many calls offered in all
    round_calls: int = 10000            #: calls of each round after the first (the first: min_calls)
    max_calls: int = 80000              #: cap on calls offered
    max_load_s: float = 400.0           #: cap on seconds of load (all rounds)
    ci_target: float = 0.05             #: stop when CI half-width / mean <= this
    keep_timeline_calls: int = 0        #: store a window of this many calls (after the warm-up)
    label: dict = field(default_factory=dict)   #: extra columns for the summary row (fraction of knee...)

    def round_cfg(self, k: int, calls: int) -> LabConfig:
        return dataclasses.replace(self.cfg, calls=int(calls), seed=int(self.cfg.seed) * 100 + k)


# ---- one round ---------------------------------------------------------------------------------

def _ns(s: pd.Series) -> np.ndarray:
    return s.astype("Float64").to_numpy(dtype="float64", na_value=np.nan)


def steady_window(tl: pd.DataFrame) -> dict:
    """The relayed messages of one round, its MSER-5 warm-up cut and cool-down cut.

    Returns the relayed rows in arrival order (``rows``), the boolean mask of the steady window
    (``keep``) and what was cut."""
    rel = tl[tl["origin"] == "relayed"]
    t_in = _ns(rel["t_wire_in"].fillna(rel["t_arr"]))
    order = np.argsort(t_in, kind="stable")
    rows = rel.iloc[order]
    t_in = t_in[order]
    soj = _ns(rows["t_dep"]) - _ns(rows["t_arr"])
    fwd = np.isfinite(soj)
    fwd_idx = np.flatnonzero(fwd)
    d = stats.mser5(soj[fwd]) if fwd.sum() >= 20 else 0
    t_cut = t_in[fwd_idx[d]] if len(fwd_idx) > d else (t_in[0] if len(t_in) else np.nan)
    inv = (rows["msg_type"] == "INVITE").to_numpy()
    t_last_inv = np.nanmax(t_in[inv]) if inv.any() else np.nanmax(t_in) if len(t_in) else np.nan
    keep = (t_in >= t_cut) & (t_in <= t_last_inv)
    return {"rows": rows, "t_in": t_in, "keep": keep, "warmup_msgs": int(d),
            "warmup_s": float((t_cut - t_in[0]) / 1e9) if len(t_in) else 0.0,
            "cooldown_msgs": int((t_in > t_last_inv).sum()),
            "t_cut": t_cut, "t_last_invite": t_last_inv}


def component_arrays(rows: pd.DataFrame) -> dict[str, np.ndarray]:
    """Every stored component (ns, NaN where an instant is missing) of ``rows``."""
    out = {}
    for name, (a, b) in HIST_COMPONENTS.items():
        if a in rows.columns and b in rows.columns:
            out[name] = _ns(rows[a]) - _ns(rows[b])
        else:
            out[name] = np.full(len(rows), np.nan)
    return out


@dataclass
class Pool:
    """Steady-state messages pooled over a point's rounds (arrival order within each round)."""

    msg_type: list[np.ndarray] = field(default_factory=list)
    dropped: list[np.ndarray] = field(default_factory=list)
    comps: dict[str, list[np.ndarray]] = field(default_factory=dict)

    def add(self, rows: pd.DataFrame) -> None:
        self.msg_type.append(rows["msg_type"].astype("string").fillna("OTHER").to_numpy(dtype=object))
        self.dropped.append(rows["dropped"].fillna(False).to_numpy(dtype=bool))
        for k, v in component_arrays(rows).items():
            self.comps.setdefault(k, []).append(v)

    def array(self, name: str) -> np.ndarray:
        parts = self.comps.get(name, [])
        return np.concatenate(parts) if parts else np.array([])

    @property
    def types(self) -> np.ndarray:
        return np.concatenate(self.msg_type) if self.msg_type else np.array([], dtype=object)

    @property
    def drops(self) -> np.ndarray:
        return np.concatenate(self.dropped) if self.dropped else np.array([], dtype=bool)


def mean_ci(x: np.ndarray, batches: int = stats.DEFAULT_BATCHES) -> tuple[float, float]:
    """(mean, batch-means 95 % half-width) of the finite values; half-width NaN below 2 per batch."""
    a = x[np.isfinite(x)]
    if len(a) == 0:
        return float("nan"), float("nan")
    if len(a) < 2 * batches:
        return float(a.mean()), float("nan")
    ci = stats.batch_means_ci(a, batches, CI_LEVEL)
    return ci.mean, ci.half_width


def sojourn_ci(pool: Pool) -> tuple[float, float, int]:
    """(mean, half-width, n) of the pooled sojourn of forwarded messages (ns)."""
    s = pool.array("sojourn")
    s = s[np.isfinite(s)]
    m, hw = mean_ci(s)
    return m, hw, len(s)


def component_rows(run_id: str, pool: Pool) -> tuple[list[dict], list[dict]]:
    """Per (message type, component): statistics rows and histogram rows (nonzero bins)."""
    types = pool.types
    stat_rows, hist_rows = [], []
    groups = [("ALL", np.ones(len(types), bool))] + [(t, types == t) for t in MSG_TYPES if (types == t).any()]
    for comp in HIST_COMPONENTS:
        v_all = pool.array(comp)
        for mt, mask in groups:
            v = v_all[mask]
            v = v[np.isfinite(v)]
            if not len(v):
                continue
            mean, hw = mean_ci(v)
            p50, p90, p99 = np.percentile(v, (50, 90, 99))
            stat_rows.append({"run_id": run_id, "msg_type": mt, "component": comp, "n": int(len(v)),
                              "mean_us": mean / 1e3, "ci_hw_us": hw / 1e3, "p50_us": p50 / 1e3,
                              "p90_us": p90 / 1e3, "p99_us": p99 / 1e3, "max_us": float(v.max()) / 1e3})
            counts = hist_counts(v)
            for b in np.flatnonzero(counts):
                hist_rows.append({"run_id": run_id, "msg_type": mt, "component": comp,
                                  "bin": int(b), "count": int(counts[b])})
    return stat_rows, hist_rows


def _round_summary(meta: dict, win: dict | None, tl_rows: int | None) -> dict:
    st = meta.get("sipp_stats", {})
    ls = meta.get("load_samples", {})
    cnt = meta.get("sipp_counts", {})
    uac, uas = cnt.get("uac", {}), cnt.get("uas", {})
    return {
        "seed": meta["config"]["seed"], "calls": meta["config"]["calls"],
        "start_utc": meta["start_utc"], "load_seconds": meta.get("load_seconds"),
        "uac_timed_out": meta.get("uac_timed_out"),
        "successful_calls": st.get("SuccessfulCall(C)"), "failed_calls": st.get("FailedCall(C)"),
        "rejected_503": sipp.count_of(uac, "503", "Recv"),
        "uac_retransmissions": st.get("Retransmissions(C)"),
        "uas_retransmissions": meta.get("sipp_uas_stats", {}).get("Retransmissions(C)"),
        "watchdog_minor": st.get("WatchdogMinor(C)"), "watchdog_major": st.get("WatchdogMajor(C)"),
        "proxy_socket_drops": meta.get("proxy_socket", {}).get("drops"),
        "proxy_read": meta.get("proxy_xlog_in"),
        "rcvbuf_errors": meta.get("udp_snmp_delta", {}).get("RcvbufErrors"),
        "cpu_busy": meta.get("cpu_busy_during_load", {}).get("cpu"),
        "foreign_cpu_mean": ls.get("foreign_mean"), "foreign_cpu_max": ls.get("foreign_max"),
        "lab_cpu_mean": ls.get("lab_mean"), "busy_during_run": ls.get("busy"),
        "loadavg_before": meta.get("load_before", {}).get("loadavg"),
        "warmup_msgs": win["warmup_msgs"] if win else None,
        "warmup_s": round(win["warmup_s"], 3) if win else None,
        "cooldown_msgs": win["cooldown_msgs"] if win else None,
        "steady_msgs": int(win["keep"].sum()) if win else None,
        "timeline_rows": tl_rows,
        "tracer_lost_events": meta.get("tracer", {}).get("lost_events"),
        "tuning_restored": all(r.get("restored", False) for r in meta.get("tuning", {}).get("restored", []))
        if meta.get("tuning", {}).get("restored") else None,
    }


# ---- the point ---------------------------------------------------------------------------------

def wait_until_idle(force: bool, wait_s: float, log, check_s: float = 3.0) -> dict:
    """Measure the machine; if busy, poll every 15 s for up to ``wait_s``; then refuse (raise
    :class:`MachineBusy`) unless ``force`` (the run goes ahead and is flagged)."""
    deadline = time.monotonic() + wait_s
    while True:
        chk = machine.idle_check(check_s)
        if not chk["busy"]:
            return chk
        if force:
            log(f"   machine busy ({chk['why']}): --force, recording and flagging")
            return chk
        if time.monotonic() >= deadline:
            raise MachineBusy(f"machine busy: {chk['why']}; top: "
                              + ", ".join(f"{t['comm']}({t['pid']}) {t['pcpu']:.0f}%" for t in chk["top"][:4]))
        log(f"   machine busy ({chk['why']}); waiting")
        time.sleep(15)


def record_point(spec: PointSpec, out_root: Path, scratch: Path, *, force: bool = False,
                 wait_idle_s: float = 300.0, pilot: bool = False, log=print) -> dict:
    """Record one point (rounds until the CI target or a cap); return its summary, component
    and histogram rows and the compact meta (``{"summary", "components", "hist", "meta"}``)."""
    pool = Pool()
    rounds: list[dict] = []
    offered = 0
    load_s = 0.0
    k = 0
    stop_reason = None
    first_meta: dict | None = None
    kept_timeline: dict | None = None
    busy_retries = 0
    failed_ingests = 0
    overload_series: dict[str, list[float]] = {}
    while stop_reason is None:
        calls = spec.min_calls if k == 0 else spec.round_calls
        calls = max(1, min(calls, spec.max_calls - offered))
        cfg = spec.round_cfg(k, calls)
        cfg = dataclasses.replace(cfg, idle_check_s=0.0)
        idle = wait_until_idle(force, wait_idle_s, log)
        rd = Path(scratch) / f"{spec.run_id}-r{k}"
        shutil.rmtree(rd, ignore_errors=True)
        log(f"   round {k}: {calls} calls at {cfg.rate_cps:g} cps, seed {cfg.seed}")
        run_lab(cfg, rd, log=lambda s: None)
        meta = json.loads((rd / "meta.json").read_text())
        meta["idle_check"] = idle
        busy_run = bool(meta.get("load_samples", {}).get("busy"))
        if busy_run and not force:
            shutil.rmtree(rd, ignore_errors=True)
            busy_retries += 1
            if busy_retries > 2:
                raise MachineBusy(f"{spec.run_id}: other processes used "
                                  f"{100 * meta['load_samples']['foreign_mean']:.0f} % of the CPUs "
                                  f"during three attempts")
            log("   round discarded: the machine got busy during it; retrying")
            continue
        win = None
        tl_rows = None
        ingest_error = None
        if cfg.capture:
            from sipperf.ingest.lab_runs.run import read_run
            try:
                tl, rep = read_run(rd, run_id=spec.run_id)
            except Exception as e:  # a join that fails must not lose the recording: keep counters
                ingest_error = f"{type(e).__name__}: {e}"
                failed_ingests += 1
                keep = Path(scratch) / "failed" / rd.name
                if failed_ingests <= 2 and not keep.exists():
                    keep.parent.mkdir(parents=True, exist_ok=True)
                    shutil.move(str(rd), str(keep))        # kept for whoever fixes the join
                log(f"   round {k}: the join failed ({ingest_error}); counters kept"
                    + (f", raw files in {keep}" if keep.exists() else ""))
            else:
                tl_rows = len(tl)
                win = steady_window(tl)
                pool.add(win["rows"][win["keep"]])
                if spec.keep_timeline_calls and kept_timeline is None:
                    kept_timeline = _timeline_window(tl, win, spec.keep_timeline_calls)
                    kept_timeline["meta"] = meta
                    kept_timeline["report"] = rep.to_dict()
        else:
            for c, v in sipp.read_series(rd).items():
                overload_series.setdefault(c, []).extend(v)
        rs = _round_summary(meta, win, tl_rows)
        rs["idle_check_busy"] = idle["busy"]
        rs["ingest_error"] = ingest_error
        rounds.append(rs)
        first_meta = first_meta or meta
        offered += calls
        load_s += float(meta.get("load_seconds") or 0.0)
        shutil.rmtree(rd, ignore_errors=True)
        k += 1
        m, hw, n = sojourn_ci(pool)
        rel = hw / m if m and np.isfinite(hw) else float("nan")
        log(f"   after {k} round(s): {offered} calls, mean sojourn "
            f"{m / 1e3:.1f} us +- {hw / 1e3:.1f} ({100 * rel:.1f} %)" if np.isfinite(m) else
            f"   after {k} round(s): {offered} calls (no sojourn measured)")
        if not cfg.capture:
            stop_reason = "fixed"           # counters-only runs (overload): one round of fixed length
        elif not np.isfinite(m) and failed_ingests >= 2:
            stop_reason = "ingest_failed"
        elif not np.isfinite(m) and failed_ingests == 0:
            stop_reason = "no_sojourn"
        elif offered >= spec.min_calls and np.isfinite(rel) and rel <= spec.ci_target:
            stop_reason = "ci"
        elif offered >= spec.max_calls:
            stop_reason = "cap_calls"
        elif load_s >= spec.max_load_s:
            stop_reason = "cap_time"
    summary = summarize_point(spec, pool, rounds, stop_reason, offered, load_s, force, pilot,
                              overload_series)
    comp_rows, hist_rows = component_rows(spec.run_id, pool) if len(pool.types) else ([], [])
    cmeta = compact_meta(spec, first_meta, rounds, summary)
    if kept_timeline is not None:
        save_run(kept_timeline["tl"], {**kept_timeline["meta"], "ingest_report": kept_timeline["report"],
                                       "stored": kept_timeline["stored"]},
                 out_root / "runs" / spec.run_id)
        # the stored meta.json of a timeline run is the full round meta; keep the compact one too
        (out_root / "runs" / spec.run_id / "point.json").write_text(
            json.dumps(cmeta, separators=(",", ":"), default=str))
    else:
        d = out_root / "runs" / spec.run_id
        d.mkdir(parents=True, exist_ok=True)
        for stale in ("timeline.parquet", "point.json"):
            (d / stale).unlink(missing_ok=True)
        (d / "meta.json").write_text(json.dumps(cmeta, separators=(",", ":"), default=str))
    return {"summary": summary, "components": comp_rows, "hist": hist_rows, "meta": cmeta}


def _timeline_window(tl: pd.DataFrame, win: dict, n_calls: int) -> dict:
    """The messages of ``n_calls`` consecutive calls whose INVITE arrived after the warm-up cut."""
    rel = win["rows"]
    inv = rel[(rel["msg_type"] == "INVITE")]
    t_in = _ns(inv["t_wire_in"].fillna(inv["t_arr"]))
    first = pd.Series(t_in, index=inv["call_id"].to_numpy()).groupby(level=0).min().sort_values()
    calls = first[first >= win["t_cut"]].index[:n_calls]
    part = tl[tl["call_id"].isin(set(calls))]
    return {"tl": part, "stored": {"timeline": "window", "calls": int(len(calls)),
                                   "rows": int(len(part)),
                                   "what": f"every message of {len(calls)} consecutive calls whose "
                                           f"INVITE arrived after the MSER-5 warm-up cut of round 0"}}


def summarize_point(spec: PointSpec, pool: Pool, rounds: list[dict], stop_reason: str,
                    offered: int, load_s: float, force: bool, pilot: bool,
                    overload_series: dict | None = None) -> dict:
    cfg = spec.cfg
    m, hw, n = sojourn_ci(pool)
    drops = pool.drops
    pdr_mean, pdr_hw = mean_ci(drops.astype(float)) if len(drops) else (float("nan"), float("nan"))
    sum_r = lambda k: sum((r.get(k) or 0) for r in rounds)  # noqa: E731
    tuning = cfg.tuning or {}
    row = {
        "run_id": spec.run_id, "series": spec.series, "pilot": pilot,
        "workers": cfg.workers, "rate_cps": cfg.rate_cps, "arrivals": cfg.arrivals,
        "tracer": cfg.tracer, "capture": cfg.capture, "retransmissions": cfg.retransmissions,
        "guard": cfg.guard, "guard_cps": cfg.guard_cps, "sched": cfg.sched,
        "tuning": tuning.get("name", "default"), "background_hogs": cfg.background_hogs,
        **spec.label,
        "rounds": len(rounds), "calls_offered": offered,
        "successful_calls": sum_r("successful_calls"), "failed_calls": sum_r("failed_calls"),
        "rejected_503": sum_r("rejected_503"),
        "uac_retransmissions": sum_r("uac_retransmissions"),
        "uas_retransmissions": sum_r("uas_retransmissions"),
        "load_seconds": round(load_s, 3),
        "proxy_read": sum_r("proxy_read"), "proxy_socket_drops": sum_r("proxy_socket_drops"),
        "pdr_counters": (sum_r("proxy_socket_drops") / (sum_r("proxy_read") + sum_r("proxy_socket_drops"))
                         if (sum_r("proxy_read") + sum_r("proxy_socket_drops")) else float("nan")),
        "steady_msgs": int(len(drops)), "steady_dropped": int(drops.sum()) if len(drops) else 0,
        "pdr": pdr_mean, "pdr_ci_hw": pdr_hw, "pdr_source": "timeline (steady window)",
        "warmup_msgs": sum_r("warmup_msgs"), "warmup_s": round(sum_r("warmup_s"), 3),
        "cooldown_msgs": sum_r("cooldown_msgs"),
        "sojourn_n": n, "sojourn_mean_us": m / 1e3, "sojourn_ci_hw_us": hw / 1e3,
        "sojourn_ci_rel": hw / m if m else float("nan"), "ci_target": spec.ci_target,
        "stop_reason": stop_reason, "min_calls": spec.min_calls, "max_calls": spec.max_calls,
        "ingest_failed_rounds": sum(1 for r in rounds if r.get("ingest_error")),
        "max_load_s": spec.max_load_s,
        "watchdog_minor": sum_r("watchdog_minor"),
        "cpu_busy_mean": _mean([r.get("cpu_busy") for r in rounds]),
        "lab_cpu_mean": _mean([r.get("lab_cpu_mean") for r in rounds]),
        "foreign_cpu_mean": _mean([r.get("foreign_cpu_mean") for r in rounds]),
        "foreign_cpu_max": max([r.get("foreign_cpu_max") or 0 for r in rounds] or [0]),
        "machine_busy": any(bool(r.get("busy_during_run")) or bool(r.get("idle_check_busy")) for r in rounds),
        "forced": force,
        "tuning_restored": all(r.get("tuning_restored") in (True, None) for r in rounds),
        "start_utc": rounds[0]["start_utc"] if rounds else None,
    }
    if not len(drops):        # counters-only runs: the whole run, from the proxy's socket counters
        row["pdr"], row["pdr_source"] = row["pdr_counters"], "counters (whole run)"
    for comp in ("k_sockq", "t_sip", "k_rcv", "wire"):
        v = pool.array(comp)
        v = v[np.isfinite(v)]
        row[f"{comp}_mean_us"] = float(v.mean()) / 1e3 if len(v) else float("nan")
        row[f"{comp}_p99_us"] = float(np.percentile(v, 99)) / 1e3 if len(v) else float("nan")
    s = pool.array("sojourn")
    s = s[np.isfinite(s)]
    row["sojourn_p50_us"] = float(np.median(s)) / 1e3 if len(s) else float("nan")
    row["sojourn_p99_us"] = float(np.percentile(s, 99)) / 1e3 if len(s) else float("nan")
    # goodput: completed calls per second of offered load (503-rejected calls excluded)
    offered_s = offered / cfg.rate_cps
    row["goodput_cps"] = (row["successful_calls"] - row["rejected_503"]) / offered_s if offered_s else float("nan")
    row["goodput_ci_hw_cps"] = float("nan")
    if overload_series and "SuccessfulCall(P)" in overload_series:
        g = np.asarray(overload_series["SuccessfulCall(P)"], dtype=float)
        g = g[np.isfinite(g)][: int(np.ceil(offered_s))]
        if len(g) >= 20:
            d = stats.mser5(g)
            ci = stats.batch_means_ci(g[d:], batches=10)
            row["goodput_series_mean_cps"] = ci.mean
            row["goodput_ci_hw_cps"] = ci.half_width
    return row


def _mean(v: list) -> float:
    v = [x for x in v if x is not None]
    return float(np.mean(v)) if v else float("nan")


def compact_meta(spec: PointSpec, meta: dict | None, rounds: list[dict], summary: dict) -> dict:
    """What a point keeps of its rounds' meta.json: config, versions, tuning record (applied
    and restored), guard, retransmissions, load, and one line per round."""
    meta = meta or {}
    return {
        "source": "lab", "format": "lab-point-v1", "run_id": spec.run_id, "series": spec.series,
        "stored": {"timeline": "window" if spec.keep_timeline_calls else "none",
                   "summaries": "runs.csv, components.csv, histograms.parquet (datasets/lab/long)"},
        "config": dataclasses.asdict(spec.cfg),
        "stopping_rule": {"min_calls": spec.min_calls, "round_calls": spec.round_calls,
                          "max_calls": spec.max_calls, "max_load_s": spec.max_load_s,
                          "ci_target": spec.ci_target, "ci": "batch means, 30 batches, 95 %",
                          "warmup": "MSER-5 per round on the sojourn series",
                          "cooldown": "messages after the round's last INVITE dropped"},
        "stop_reason": summary["stop_reason"],
        "versions": meta.get("versions"), "cpu": meta.get("cpu"),
        "machine": _machine_brief(meta.get("machine") or {}),
        "tuning": meta.get("tuning"), "guard": meta.get("guard"),
        "retransmissions": meta.get("retransmissions"), "background": meta.get("background"),
        "proxy": {k: meta.get("proxy", {}).get(k) for k in ("workers", "socket", "sched", "processes")},
        "load_generators": meta.get("load_generators"), "net_sysctls": meta.get("net_sysctls"),
        "arrivals_method": meta.get("arrivals_method"),
        "rounds": rounds,
        "label": spec.label,
    }


# ---- the knee search ---------------------------------------------------------------------------

def probe_rate(cfg: LabConfig, rate: float, seconds: float, scratch: Path, *, force: bool,
               wait_idle_s: float, log=print, run_id: str = "probe") -> dict:
    """One short run at ``rate``: the proxy's drop rate from its counters (socket drops over
    datagrams that reached its socket = read + dropped); nothing is joined or kept."""
    calls = max(200, int(round(rate * seconds)))
    for attempt in range(3):
        c = dataclasses.replace(cfg, rate_cps=float(rate), calls=calls, idle_check_s=0.0,
                                seed=int(rate) + attempt)
        idle = wait_until_idle(force, wait_idle_s, log)
        rd = Path(scratch) / f"{run_id}-{int(rate)}"
        shutil.rmtree(rd, ignore_errors=True)
        run_lab(c, rd, log=lambda s: None)
        meta = json.loads((rd / "meta.json").read_text())
        shutil.rmtree(rd, ignore_errors=True)
        ls = meta.get("load_samples", {})
        if ls.get("busy") and not force:
            log(f"   probe at {rate:g} cps discarded: the machine got busy during it")
            continue
        drops = meta.get("proxy_socket", {}).get("drops") or 0
        read = meta.get("proxy_xlog_in") or 0
        st = meta.get("sipp_stats", {})
        return {"workers": cfg.workers, "rate_cps": float(rate), "calls": calls,
                "seconds": meta.get("load_seconds"), "proxy_read": read, "proxy_socket_drops": drops,
                "pdr": drops / (read + drops) if read + drops else float("nan"),
                "successful_calls": st.get("SuccessfulCall(C)"), "failed_calls": st.get("FailedCall(C)"),
                "cpu_busy": meta.get("cpu_busy_during_load", {}).get("cpu"),
                "foreign_cpu_mean": ls.get("foreign_mean"),
                "machine_busy": bool(ls.get("busy")) or bool(idle.get("busy")), "forced": force,
                "start_utc": meta.get("start_utc")}
    raise MachineBusy(f"probe at {rate:g} cps: the machine was busy during three attempts")


def find_knee(cfg: LabConfig, *, start_cps: float, factor: float, refine_steps: int,
              probe_s: float, max_rate_cps: float, scratch: Path, force: bool,
              wait_idle_s: float, on_probe=lambda row: None, log=print,
              target: float = 0.01) -> dict:
    """Coarse then fine: multiply the rate by ``factor`` until the drop rate reaches ``target``
    (or divide it while it is above at the start), then bisect (geometric mean) ``refine_steps``
    times between the last rate below and the first at or above; interpolate the knee."""
    from sipperf.lab.store import knee_from_probes

    rates: list[float] = []
    pdrs: list[float] = []

    def probe(r: float) -> float:
        row = probe_rate(cfg, r, probe_s, scratch, force=force, wait_idle_s=wait_idle_s, log=log,
                         run_id=f"probe-c{cfg.workers}")
        on_probe(row)
        rates.append(r)
        pdrs.append(row["pdr"])
        log(f"   probe c={cfg.workers} {r:7.0f} cps: pdr {row['pdr']:.4f}")
        return row["pdr"]

    r = float(start_cps)
    p = probe(r)
    if p >= target:
        while p >= target and r > 20:
            r = max(20.0, r / factor)
            p = probe(r)
    else:
        while p < target and r < max_rate_cps:
            r = min(max_rate_cps, r * factor)
            p = probe(r)
    for _ in range(refine_steps):
        k = knee_from_probes(rates, pdrs, target)
        if k["rate_below"] is None or k["rate_above"] is None:
            break
        mid = float(np.sqrt(k["rate_below"] * k["rate_above"]))
        if abs(mid - k["rate_below"]) < 10:
            break
        probe(round(mid))
    k = knee_from_probes(rates, pdrs, target)
    k.update({"workers": cfg.workers, "probes": len(rates), "probe_s": probe_s, "target_pdr": target})
    return k


def _machine_brief(d: dict) -> dict:
    """The part of :func:`sipperf.lab.machine.describe` a point keeps (the whole is in the
    dataset's machine.json and in every round's meta.json)."""
    if not d:
        return {}
    v = d.get("virtualisation", {})
    return {"cpu_model": d.get("cpu", {}).get("model"), "cpus": d.get("cpu", {}).get("count"),
            "mhz": d.get("cpu", {}).get("mhz"), "frequency": d.get("frequency"),
            "idle_driver": d.get("idle", {}).get("driver"), "idle_governor": d.get("idle", {}).get("governor"),
            "virt": v.get("systemd_detect_virt"), "virt_vm": v.get("systemd_detect_virt_vm"),
            "hypervisor": v.get("kernel_hypervisor_detected"),
            "kernel": d.get("kernel", {}).get("release"), "clocksource": d.get("clocksource"),
            "lockdown": d.get("lockdown", {}).get("dmesg") or d.get("lockdown", {}).get("securityfs")}
