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
from sipperf.lab import machine, protocol, sipp
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


def invite_wire_and_plan(tl: pd.DataFrame, meta: dict) -> tuple[np.ndarray, np.ndarray] | None:
    """Each call's first INVITE on the wire (ns) and its planned offset (ms), matched by the
    call number in the Call-ID; None when the plan or the INVITEs are unknown."""
    cfg = meta.get("config") or {}
    try:
        rate, calls, seed = float(cfg["rate_cps"]), int(cfg["calls"]), int(cfg["seed"])
    except (KeyError, TypeError, ValueError):
        return None
    if "t_wire_in" not in tl or "call_id" not in tl:
        return None
    inv = tl[(tl["msg_type"] == "INVITE") & (tl["origin"] == "relayed")]
    if inv.empty:
        return None
    first = inv.groupby("call_id")["t_wire_in"].min().dropna()
    k = pd.to_numeric(first.index.to_series().str.split("-").str[0], errors="coerce")
    ok = k.notna().to_numpy() & (k.fillna(0).to_numpy() >= 1) & (k.fillna(0).to_numpy() <= calls)
    if not ok.any():
        return None
    kk = k.to_numpy()[ok].astype(int) - 1
    if cfg.get("arrivals") == "poisson":
        plan = sipp.poisson_offsets_ms(rate, calls, seed)
    else:
        plan = np.arange(calls) * 1000.0 / rate
    return first.to_numpy(dtype="float64")[ok], plan[kk]


def invite_lateness(tl: pd.DataFrame, meta: dict) -> dict:
    """How late each call's first INVITE reached the wire against the arrival plan
    (:func:`invite_wire_and_plan`, :func:`sipperf.lab.protocol.invite_lateness_ms`); {} when the
    plan is unknown."""
    got = invite_wire_and_plan(tl, meta)
    return protocol.invite_lateness_ms(*got) if got is not None else {}


def _cpu(meta: dict, key: str, field: str = "cpu_s"):
    return (meta.get(key) or {}).get(field)


def _round_summary(meta: dict, win: dict | None, tl_rows: int | None) -> dict:
    st = meta.get("sipp_stats", {})
    ls = meta.get("load_samples", {})
    cnt = meta.get("sipp_counts", {})
    uac, uas = cnt.get("uac", {}), cnt.get("uas", {})
    gen = meta.get("generator") or {}
    pl = meta.get("placement") or {}
    return {
        "seed": meta["config"]["seed"], "calls": meta["config"]["calls"],
        "start_utc": meta["start_utc"], "load_seconds": meta.get("load_seconds"),
        "uac_timed_out": meta.get("uac_timed_out"),
        "successful_calls": st.get("SuccessfulCall(C)"), "failed_calls": st.get("FailedCall(C)"),
        "rejected_503": sipp.invite_rejected(uac), "bye_refused_503": sipp.bye_refused(uac),
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
        # the protocol: placement, CPU seconds, the generator's health
        "placement": pl.get("mode"), "placement_ok": (pl.get("check") or {}).get("ok"),
        "placement_problems": (pl.get("check") or {}).get("problems"),
        "proxy_cpu_s": _cpu(meta, "proxy_cpu"), "proxy_cpu_window_s": _cpu(meta, "proxy_cpu", "window_s"),
        "proxy_processes": _cpu(meta, "proxy_cpu", "processes"),
        "generator_cpu_s": _cpu(meta, "generator_cpu"),
        "generator_cpu_window_s": _cpu(meta, "generator_cpu", "window_s"),
        "observer_cpu_s": _cpu(meta, "observer_cpu"),
        "offered_s": (meta.get("offered_window") or {}).get("seconds"),
        "proxy_cpu_offered_s": (meta.get("offered_window") or {}).get("proxy_cpu_s"),
        "generator_cpus_busy": gen.get("generator_cpus_busy"),
        "generator_socket_drops": gen.get("generator_socket_drops"),
        "generator_late_trips": max(gen.get("late_trips_uac") or 0, gen.get("late_trips_uas") or 0)
        if "late_trips_uac" in gen else None,
        "invite_late_p99_ms": gen.get("invite_late_p99_ms"),
        "invite_burst_p99_ms": gen.get("invite_burst_p99_ms"),
        "rate_shortfall": gen.get("rate_shortfall"),
        "dead_call_msgs": st.get("DeadCallMsgs(C)"),
        "generator_bound": gen.get("bound"), "generator_bound_why": "; ".join(gen.get("why") or []) or None,
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
                late = invite_lateness(tl, meta)
                if late:        # the captured INVITEs against the plan: one more generator test
                    meta["invite_lateness"] = late
                    meta["generator"] = protocol.generator_verdict(meta)
                win = steady_window(tl)
                pool.add(win["rows"][win["keep"]])
                if spec.keep_timeline_calls and kept_timeline is None:
                    kept_timeline = _timeline_window(tl, win, spec.keep_timeline_calls)
                    kept_timeline["meta"] = meta
                    kept_timeline["report"] = rep.to_dict()
        else:
            for c, v in sipp.read_series(rd).items():
                overload_series.setdefault(c, []).extend(v)
            overload_series.setdefault("Goodput(P)", []).extend(sipp.goodput_series(rd))
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
        # replication index of the point (its rounds are listed in meta.json; a netns pair's index)
        "replicate": int(spec.label.get("replicate", spec.label.get("pair", 0))),
        **spec.label,
        "rounds": len(rounds), "calls_offered": offered,
        "successful_calls": sum_r("successful_calls"), "failed_calls": sum_r("failed_calls"),
        "rejected_503": sum_r("rejected_503"), "bye_refused_503": sum_r("bye_refused_503"),
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
    row.update(protocol_columns(cfg, rounds, offered))
    row["ci_reached"] = bool(np.isfinite(row["sojourn_ci_rel"]) and row["sojourn_ci_rel"] <= spec.ci_target) \
        if cfg.capture else None
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
    # goodput: completed calls per second of offered load (calls whose INVITE or BYE was answered
    # 503 excluded: SIPp's scenario ends both as successful)
    offered_s = offered / cfg.rate_cps
    row["goodput_cps"] = ((row["successful_calls"] - row["rejected_503"] - row["bye_refused_503"]) / offered_s
                          if offered_s else float("nan"))
    row["goodput_ci_hw_cps"] = float("nan")
    # its interval: batch means of the per-second completed calls (SIPp's successful calls less
    # the 503-answered ones; SuccessfulCall(P) itself where the counts file is missing)
    key = "Goodput(P)" if (overload_series or {}).get("Goodput(P)") else "SuccessfulCall(P)"
    if overload_series and key in overload_series:
        g = np.asarray(overload_series[key], dtype=float)
        g = g[np.isfinite(g)][: int(np.ceil(offered_s))]
        if len(g) >= 20:
            d = stats.mser5(g)
            ci = stats.batch_means_ci(g[d:], batches=10)
            row["goodput_series_mean_cps"] = ci.mean
            row["goodput_ci_hw_cps"] = ci.half_width
            row["goodput_series"] = key
    return row


def _max_or_nan(rounds: list[dict], key: str) -> float:
    """The largest of the rounds' ``key`` (the worst round), NaN when none has it."""
    return max([r[key] for r in rounds if r.get(key) is not None], default=float("nan"))


def _sum_or_nan(rounds: list[dict], key: str) -> float:
    v = [r.get(key) for r in rounds if r.get(key) is not None]
    return float(sum(v)) if v and len(v) == len(rounds) else float("nan")


def protocol_columns(cfg, rounds: list[dict], offered: int) -> dict:
    """The protocol's columns of a summary row: placement, priority, namespaces, the proxy's
    and the generator's CPU seconds over the load windows (summed over rounds), CPU per call,
    and the generator's verdict (any round generator-bound flags the point)."""
    cpu = _sum_or_nan(rounds, "proxy_cpu_s")
    win = _sum_or_nan(rounds, "proxy_cpu_window_s")
    gcpu = _sum_or_nan(rounds, "generator_cpu_s")
    gwin = _sum_or_nan(rounds, "generator_cpu_window_s")
    off_cpu = _sum_or_nan(rounds, "proxy_cpu_offered_s")
    off_s = _sum_or_nan(rounds, "offered_s")
    bound = [r for r in rounds if r.get("generator_bound")]
    pl = {r.get("placement") for r in rounds if r.get("placement")}
    return {
        "placement": "/".join(sorted(pl)) if pl else None,
        "proxy_cpus": str(cfg.proxy_cpu) if "split" in pl else "all",
        "generator_cpus": str(cfg.load_cpu) if "split" in pl else "all",
        "load_nice": cfg.load_nice, "netns": bool(getattr(cfg, "netns", False)),
        "placement_ok": all(r.get("placement_ok") is not False for r in rounds) if rounds else None,
        "proxy_cpu_s": cpu, "proxy_cpu_window_s": win,
        "proxy_cpu_util": cpu / win if win and np.isfinite(win) else float("nan"),
        "proxy_cpu_offered_util": off_cpu / off_s if off_s and np.isfinite(off_s) else float("nan"),
        "proxy_cpu_us_per_call": 1e6 * cpu / offered if offered and np.isfinite(cpu) else float("nan"),
        "generator_cpu_s": gcpu, "generator_cpu_window_s": gwin,
        "generator_cpu_util": gcpu / gwin if gwin and np.isfinite(gwin) else float("nan"),
        "generator_cpus_busy": _mean([r.get("generator_cpus_busy") for r in rounds]),
        "observer_cpu_s": _sum_or_nan(rounds, "observer_cpu_s"),
        "generator_socket_drops": _sum_or_nan(rounds, "generator_socket_drops"),
        "generator_late_trips": _sum_or_nan(rounds, "generator_late_trips"),
        "invite_late_p99_ms": _max_or_nan(rounds, "invite_late_p99_ms"),
        "invite_burst_p99_ms": _max_or_nan(rounds, "invite_burst_p99_ms"),
        "rate_shortfall": _max_or_nan(rounds, "rate_shortfall"),
        "dead_call_msgs": _sum_or_nan(rounds, "dead_call_msgs"),
        "generator_bound": bool(bound),
        "generator_bound_rounds": len(bound),
        "generator_bound_why": bound[0].get("generator_bound_why") if bound else None,
    }


def point_cpu(rounds: list[dict], key: str, offered: int) -> dict:
    """The point's ``proxy_cpu`` / ``generator_cpu`` record for its compact meta.json: the
    rounds' CPU seconds and load windows summed (same keys as a run's meta.json)."""
    cpu = _sum_or_nan(rounds, f"{key}_s")
    win = _sum_or_nan(rounds, f"{key}_window_s")
    n = [r.get("proxy_processes") for r in rounds if r.get("proxy_processes")] if key == "proxy_cpu" else []
    from sipperf.lab.cpuacct import SOURCE
    return {"cpu_s": None if not np.isfinite(cpu) else round(cpu, 4),
            "window_s": None if not np.isfinite(win) else round(win, 4),
            "processes": (max(n) if n else None) if key == "proxy_cpu" else 2,
            "source": SOURCE + ("; every Kamailio process" if key == "proxy_cpu" else "; SIPp UAC + UAS")
            + f"; summed over {len(rounds)} round(s)",
            "calls": offered}


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
        "placement": {k: (meta.get("placement") or {}).get(k)
                      for k in ("mode", "proxy_cpus", "generator_cpus", "generator_nice", "processes", "check")},
        "netns": meta.get("netns"), "sipp_watchdog": meta.get("sipp_watchdog"),
        "proxy_cpu": point_cpu(rounds, "proxy_cpu", summary.get("calls_offered") or 0),
        "generator_cpu": point_cpu(rounds, "generator_cpu", summary.get("calls_offered") or 0),
        "generator": {"bound": summary.get("generator_bound"), "rounds_bound": summary.get("generator_bound_rounds"),
                      "why": summary.get("generator_bound_why"),
                      "limits": (meta.get("generator") or {}).get("limits")},
        "ci": {"target": spec.ci_target, "reached": summary.get("ci_reached"),
               "half_width_rel": summary.get("sojourn_ci_rel")},
        "arrivals_method": meta.get("arrivals_method"),
        "rounds": rounds,
        "label": spec.label,
    }


# ---- the knee search ---------------------------------------------------------------------------

def probe_rate(cfg: LabConfig, rate: float, seconds: float, scratch: Path, *, force: bool,
               wait_idle_s: float, log=print, run_id: str = "probe", replicate: int = 0) -> dict:
    """One short run at ``rate``: the proxy's drop rate from its counters (socket drops over
    datagrams that reached its socket = read + dropped); nothing is joined or kept.  The seed
    depends on the rate and the replicate, so replicates are independent.  The row carries the
    generator's verdict (a generator-bound probe is never used for a knee) and the proxy's and
    the generator's CPU seconds."""
    calls = max(200, int(round(rate * seconds)))
    for attempt in range(3):
        c = dataclasses.replace(cfg, rate_cps=float(rate), calls=calls, idle_check_s=0.0,
                                seed=int(rate) + 100003 * int(replicate) + attempt)
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
        rs = _round_summary(meta, None, None)
        return {"workers": cfg.workers, "replicate": int(replicate), "rate_cps": float(rate), "calls": calls,
                "seed": c.seed, "seconds": meta.get("load_seconds"), "proxy_read": read,
                "proxy_socket_drops": drops,
                "pdr": drops / (read + drops) if read + drops else float("nan"),
                "successful_calls": st.get("SuccessfulCall(C)"), "failed_calls": st.get("FailedCall(C)"),
                "uac_retransmissions": rs["uac_retransmissions"],
                "kernel": (meta.get("versions") or {}).get("kernel"),
                "tracer": cfg.tracer, "capture": cfg.capture, "placement": rs["placement"],
                "load_nice": cfg.load_nice, "netns": cfg.netns,
                "proxy_cpu_s": rs["proxy_cpu_s"], "proxy_cpu_window_s": rs["proxy_cpu_window_s"],
                "proxy_cpu_offered_s": rs["proxy_cpu_offered_s"], "offered_s": rs["offered_s"],
                "generator_cpu_s": rs["generator_cpu_s"], "generator_cpus_busy": rs["generator_cpus_busy"],
                "generator_socket_drops": rs["generator_socket_drops"],
                "generator_late_trips": rs["generator_late_trips"],
                "generator_bound": bool(rs["generator_bound"]), "generator_bound_why": rs["generator_bound_why"],
                "cpu_busy": meta.get("cpu_busy_during_load", {}).get("cpu"),
                "foreign_cpu_mean": ls.get("foreign_mean"),
                "machine_busy": bool(ls.get("busy")) or bool(idle.get("busy")), "forced": force,
                "start_utc": meta.get("start_utc")}
    raise MachineBusy(f"probe at {rate:g} cps: the machine was busy during three attempts")


def find_knee(cfg: LabConfig, *, start_cps: float, factor: float, refine_steps: int,
              probe_s: float, max_rate_cps: float, scratch: Path, force: bool,
              wait_idle_s: float, on_probe=lambda row: None, log=print,
              target: float = 0.01, replicate: int = 0, min_step_cps: float = 10.0) -> dict:
    """One knee search (a replicate): multiply the rate by ``factor`` until the drop rate reaches
    ``target`` (or divide it while it is above at the start), then bisect (geometric mean)
    ``refine_steps`` times between the last clean rate below and the first at or above;
    interpolate the knee (:func:`sipperf.lab.knees.replicate_knee`).  A generator-bound probe
    stops the climb: above it the set-up measures the generator, and the knee is censored."""
    from sipperf.lab.knees import replicate_knee

    rates: list[float] = []
    pdrs: list[float] = []
    bound: list[bool] = []

    def probe(r: float) -> tuple[float, bool]:
        row = probe_rate(cfg, r, probe_s, scratch, force=force, wait_idle_s=wait_idle_s, log=log,
                         run_id=f"probe-c{cfg.workers}", replicate=replicate)
        on_probe(row)
        rates.append(r)
        pdrs.append(row["pdr"])
        bound.append(row["generator_bound"])
        log(f"   probe c={cfg.workers} rep {replicate} {r:7.0f} cps: pdr {row['pdr']:.4f}"
            + (f"  GENERATOR-BOUND ({row['generator_bound_why']})" if row["generator_bound"] else ""))
        return row["pdr"], row["generator_bound"]

    r = float(start_cps)
    p, gb = probe(r)
    if p >= target and not gb:
        while p >= target and not gb and r > 20:
            r = max(20.0, r / factor)
            p, gb = probe(r)
    else:
        while p < target and not gb and r < max_rate_cps:
            r = min(max_rate_cps, r * factor)
            p, gb = probe(r)
    for _ in range(refine_steps):
        k = replicate_knee(rates, pdrs, target=target, generator_bound=bound)
        lo = k.rate_below
        hi = k.rate_above
        if lo is None:
            break
        if hi is None:      # censored by the generator: bisect towards the first bound probe
            gbr = [x for x, b in zip(rates, bound) if b and x > lo]
            if not gbr:
                break
            hi = min(gbr)
        mid = float(round(np.sqrt(lo * hi)))
        if abs(mid - lo) < min_step_cps or mid in rates:
            break       # too fine, or that rate was probed and left out (generator-bound)
        probe(mid)
    k = replicate_knee(rates, pdrs, target=target, generator_bound=bound, replicate=replicate)
    return {"workers": cfg.workers, "replicate": replicate, "knee_cps": k.knee_cps,
            "rate_below": k.rate_below, "rate_above": k.rate_above, "probes": len(rates),
            "excluded_generator_bound": k.excluded, "censored": k.censored,
            "probe_s": probe_s, "target_pdr": target}


def find_knee_replicated(cfg: LabConfig, *, replicates: int, start_cps: float, factor: float,
                         refine_steps: int, probe_s: float, max_rate_cps: float, scratch: Path,
                         force: bool, wait_idle_s: float, on_probe=lambda row: None,
                         on_replicate=lambda row: None, done: dict | None = None, log=print,
                         target: float = 0.01, level: float = 0.95):
    """``replicates`` independent knee searches (new seeds each) and their combined estimate
    (:func:`sipperf.lab.knees.knee_estimate`).  The first search starts at ``start_cps`` and
    climbs by ``factor``; the others start at 0.8 x the first knee found and climb by
    ``sqrt(factor)``, so each brackets the knee with its own probes.  A censored search
    (generator-bound, or not bracketed) is replaced by another, at most ``replicates`` extra
    searches in all.  ``done``: replicate -> search row already recorded (resuming)."""
    from sipperf.lab.knees import ReplicateKnee, knee_estimate

    rows = dict(done or {})
    # up to ``replicates`` more searches replace censored ones (a generator-bound or unbracketed
    # search says nothing about the proxy's knee); the count of each kind is kept in the rows
    for i in range(2 * replicates):
        valid = [r for r in rows.values() if r.get("knee_cps") is not None]
        if len(valid) >= replicates or (i >= replicates and not valid):
            break
        if i in rows:
            continue
        if not valid:
            start, fac = start_cps, factor
        else:
            start, fac = 0.8 * valid[0]["knee_cps"], float(np.sqrt(factor))
        res = find_knee(cfg, start_cps=start, factor=fac, refine_steps=refine_steps, probe_s=probe_s,
                        max_rate_cps=max_rate_cps, scratch=scratch, force=force, wait_idle_s=wait_idle_s,
                        on_probe=on_probe, log=log, target=target, replicate=i)
        rows[i] = res
        on_replicate(res)
        log(f"   replicate {i}: knee {res['knee_cps']} ({res['probes']} probes"
            + (f"; {res['censored']}" if res["censored"] else "") + ")")
    reps = [ReplicateKnee(i, r.get("knee_cps"), r.get("rate_below"), r.get("rate_above"),
                          int(r.get("probes") or 0), int(r.get("excluded_generator_bound") or 0),
                          r.get("censored")) for i, r in sorted(rows.items())]
    return knee_estimate(reps, level), rows


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
