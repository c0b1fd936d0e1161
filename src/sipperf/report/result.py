"""What a report is: :class:`Report` (its runs, fit and verdict), :class:`RunResult` (one run),
and the two tables every view of it shares -- :func:`runs_table` (runs.csv) and :func:`fit_json`
(fit.json).  :mod:`.build` makes a :class:`Report`; :mod:`.tables`, :mod:`.html` and the
commands read it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sipperf.fit import cpu_utilisation
from sipperf.report.runs import RunMeasure

__all__ = ["RunResult", "Report", "runs_table", "fit_json", "clean"]


@dataclass
class RunResult:
    """One run: its inputs, timeline (None for a stored summary), ingest account, the tables
    ``analyze`` writes, metadata, measurement (None when it could not be measured: ``error``
    says why) and its directory ``DIR/runs/<run>``."""

    label: str
    paths: list[str]
    timeline: pd.DataFrame | None
    account: Any
    tables: dict[str, pd.DataFrame]
    meta: dict[str, Any]
    measure: RunMeasure | None
    error: str = ""
    out: Path | None = None


@dataclass
class Report:
    """A report: the runs, the inputs that could not be read (``failed``) or were not inputs
    (``ignored``), the fit (:class:`sipperf.fit.Fit` or None, ``fit_error`` why), the verdict,
    messages per call, the files written and the HTML page."""

    runs: list[RunResult]
    failed: list[dict]
    ignored: list[dict]
    fit: Any
    fit_error: str
    verdict: dict[str, Any]
    msgs_per_call: float
    files: list[Path] = field(default_factory=list)
    html: Path | None = None
    title: str = ""


def runs_table(rep: Report) -> pd.DataFrame:
    """One row per run: what was measured and what the models say about it."""
    per = {d["run"]: d for d in (rep.fit.per_run if rep.fit else [])}
    rows = []
    for r in rep.runs:
        m = r.measure
        d: dict[str, Any] = {"run": r.label, "inputs": ";".join(r.paths), "error": r.error}
        if m is not None:
            d.update({"vantage": m.vantage, "tracepoints": m.tracepoints, "messages": m.n_messages,
                      "calls": m.calls, "threads": m.fit_input.threads, "duration_s": m.duration_s,
                      "warmup_messages": m.warmup_n, "warmup_s": m.warmup_s, "steady_messages": m.steady_n,
                      "window_s": m.window_s, "rate_cps": m.lam_cps, "offered_cps": m.offered_cps if m.offered_cps is not None else r.meta.get("offered_cps"),
                      "rate_pps": m.lam_pps, "calls_ca2": m.ca2, "messages_ca2": m.ca2_msgs,
                      "q_kind": m.fit_input.q_kind, "q_mean_us": m.fit_input.q_mean_us,
                      "q_ci95_us": 1.96 * m.fit_input.q_se_us, "sojourn_p50_us": _comp(m, "sojourn", "median_us"),
                      "sojourn_mean_us": _comp(m, "sojourn", "mean_us"),
                      "sojourn_ci95_us": _comp(m, "sojourn", "ci95_hw_us"),
                      "sojourn_p99_us": _comp(m, "sojourn", "p99_us"), "pdr_percent": 100 * m.pdr if m.loss_kind == "drops" else float("nan"),
                      "pdr_ci95_percent": 100 * m.pdr_ci95 if m.loss_kind == "drops" else float("nan"), "dropped": m.dropped,
                      "retransmissions": m.retransmissions, "warnings": len(m.warnings),
                      "cpu_share": m.cpu_share if m.cpu_share is not None else float("nan"),
                      "queue_growing": m.queue_growing, "transport": m.transport, "loss_kind": m.loss_kind,
                      "calls_decided": m.setup.get("attempts"), "calls_failed": m.setup.get("failed"),
                      "connections_reset": m.setup.get("reset_connections", 0 if m.loss_kind == "failed calls" else None),
                      "calls_late": m.setup.get("late"), "failed_percent": 100 * m.failed_fraction,
                      "tls_hello_p50_ms": m.setup.get("tls_hello_p50_ms"), "tls_hello_p99_ms": m.setup.get("tls_hello_p99_ms"),
                      "tls_handshakes_late": m.setup.get("tls_late"), "tls_handshakes_unanswered": m.setup.get("tls_unanswered"),
                      "srd_p50_ms": m.setup.get("srd_p50_ms"), "srd_p99_ms": m.setup.get("srd_p99_ms"),
                      "setup_deadline_s": m.setup.get("deadline_s"), "cpus": m.cpus})
            d.update({f"kernel_{k}": v for k, v in m.kernel.items()})
            hs = r.meta.get("tls_handshakes") or {}
            # the capture's TLS connections by handshake (a capture split into runs: its whole count)
            d.update({"tls_full_handshakes": hs.get("full"), "tls_resumed_handshakes": hs.get("resumed")})
            tcp = getattr(m, "tcp", None) or {}
            d.update({f"tcp_{k}": tcp.get(k, 0 if tcp else None) for k in
                      ("zero_window_proxy", "zero_window_peers", "resets_proxy", "resets_peers", "retransmissions")})
        p = per.get(r.label)
        # a measured utilisation needs no model: the fit may have failed, or have no row for the run
        fi = m.fit_input if m is not None else None
        rc = cpu_utilisation(fi.cpu_share, fi.threads, fi.cpus)[0] if fi is not None else float("nan")
        if math.isfinite(rc):
            d["utilisation"], d["utilisation_from"] = rc, "CPU accounting"
        if p:
            # one ρ per run, "utilisation" below; the model's λE[X] is its load, not a second ρ
            named = {"rho": "model_load", "rho_run": "model_load_own_alpha", "pdr_pred": "pdr_pred_percent"}
            for k in ("rho", "rho_run", "ex_us", "scv", "alpha_run", "alpha_fit", "w_meas_us", "w_pred_us", "w_err_pct",
                      "beta_run", "beta_fit", "k_pkts", "pdr_pred"):
                if k in p:
                    d[named.get(k, k)] = 100 * p[k] if k == "pdr_pred" else p[k]
            ru = p.get("rho_run", float("nan"))
            if not math.isfinite(rc):                   # no CPU accounting: the model's reading
                d["utilisation"] = ru if ru is not None and math.isfinite(ru) else p.get("rho", float("nan"))
                d["utilisation_from"] = ("sojourn (upper bound)" if m is not None and m.fit_input.q_kind == "sojourn"
                                         else "traced service time")
        rows.append(d)
    return pd.DataFrame(rows)


def _comp(m: RunMeasure, comp: str, col: str) -> float:
    c = m.components
    if c is None or not len(c):
        return float("nan")
    x = c[(c["component"] == comp) & (c["msg_type"] == "ALL")]
    return float(x[col].iloc[0]) if len(x) else float("nan")


def clean(x):
    if isinstance(x, dict):
        return {str(k): clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(float(x)) else None
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, Path):
        return str(x)
    return x


def fit_json(rep: Report) -> dict[str, Any]:
    """``fit.json``: the constants for reuse (``sipperf model ... --fit``)."""
    from sipperf import __version__
    from sipperf.fit import to_json_dict

    d: dict[str, Any] = {"format": "sipperf-fit-v1", "sipperf": __version__,
                         "runs": [r.label for r in rep.runs if r.measure is not None],
                         "msgs_per_call": rep.msgs_per_call}
    if rep.fit is not None:
        d.update(to_json_dict(rep.fit))
    else:
        d["error"] = rep.fit_error or "no run with a proxy: nothing to fit"
    return clean(d)
