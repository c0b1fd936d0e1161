"""The queueing models evaluated for ``sipperf model``: plain JSON-able dicts.

Each function takes rates in packets per second and times in microseconds (as the command's
options), evaluates one model over one or several λ and returns what the command prints: the
model's name and units, then every field of its result (a list per field for several λ, a
scalar for one), arrays and NumPy numbers turned into JSON values (non-finite as "inf", "-inf",
"nan").  Bad parameters raise ValueError with a message naming the option.
"""
from __future__ import annotations

from dataclasses import asdict, fields, is_dataclass
from typing import Any

import numpy as np

__all__ = ["jsonable", "mmck_report", "mg1_report", "thesis_mg1_report", "mgck_report", "capacity_report"]


def jsonable(x: Any) -> Any:
    """Dataclasses, dicts, sequences, arrays and NumPy scalars as JSON values."""
    if is_dataclass(x):
        return {f.name: jsonable(getattr(x, f.name)) for f in fields(x)}
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        x = x.tolist() if x.ndim else x.item()
        return jsonable(x)
    if isinstance(x, (np.floating, float)):
        v = float(x)
        return v if np.isfinite(v) else ("inf" if v > 0 else "-inf" if v < 0 else "nan")
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def _squeeze(d: dict, n: int) -> dict:
    """Scalars instead of one-element lists when a single λ was given."""
    if n != 1:
        return d
    return {k: (v[0] if isinstance(v, list) and len(v) == 1 else v) for k, v in d.items()}


def mmck_report(lam_pps, service_us: float | None, c: int, K: float | None, *, target_pdr: float | None = None,
                fitted_service_us: np.ndarray | None = None, fit: str | None = None) -> dict:
    """M/M/c/K (thesis eq. 5.3/5.4) at each λ with mean service time ``service_us`` per server;
    ``target_pdr``: also the highest λ whose drop probability is at most this.
    ``fitted_service_us``: E[X_c] per λ from a fit (used for several λ, reported), ``fit`` its file."""
    from sipperf.models.mmck import mmck

    lam = np.asarray(lam_pps, dtype=float)
    if service_us is None or K is None:
        raise ValueError("mmck needs --service-us and --K (or --fit FILE)")
    if service_us <= 0:
        raise ValueError("--service-us must be > 0")
    svc = fitted_service_us if fitted_service_us is not None and lam.size > 1 else service_us
    r = mmck(lam, 1e6 / np.asarray(svc, dtype=float), c, K)
    out = jsonable(r)
    out["W_us"] = jsonable(r.W * 1e6)
    out["Wq_us"] = jsonable(r.Wq * 1e6)
    out = _squeeze(out, lam.size)
    if target_pdr is not None:
        from sipperf.models.capacity import max_rate

        mu = 1e6 / service_us
        hi = 100.0 * c * mu
        out["target_pdr"] = target_pdr
        out["max_lam_for_target"] = max_rate(lambda x: float(mmck(x, mu, c, K).p_block), target_pdr, 0.0, hi)
    out = {"model": "M/M/c/K (thesis eq. 5.3/5.4)", "units": "rates 1/s; W, Wq in s; W_us, Wq_us in µs", **out}
    if fitted_service_us is not None:
        out["service_us_from_fit"] = _squeeze({"v": jsonable(fitted_service_us)}, lam.size)["v"]
        out["fit"] = fit
    return out


def mg1_report(lam_pps, service_us, scv=None, *, fit: str | None = None) -> dict:
    """M/G/1 Pollaczek-Khinchine wait (thesis eq. 4.2) with mean service ``service_us`` and its
    SCV (default 0); with ``fit`` (the fit.json they came from) both may be arrays over λ."""
    from sipperf.models.mg1 import mg1_wait

    lam = np.asarray(lam_pps, dtype=float)
    if fit is None and service_us is None:
        raise ValueError("mg1 needs --service-us (mean) with --scv, or --thesis, or --fit FILE")
    ex = service_us * 1e-6
    r = mg1_wait(lam, ex, ex * ex * (1.0 + (scv if fit is not None else (scv or 0.0))))
    out = jsonable(r)
    out["W_us"] = jsonable(r.W_s * 1e6)
    if fit is not None:
        out["scv"] = jsonable(np.broadcast_to(scv, lam.shape))
        out = _squeeze(out, lam.size)
        return {"model": "M/G/1 Pollaczek-Khinchine (thesis eq. 4.2), E[X](lambda) and SCV from the fit",
                "fit": fit, "units": "rates 1/s; *_s in s", **out}
    out = _squeeze(out, lam.size)
    return {"model": "M/G/1 Pollaczek-Khinchine (thesis eq. 4.2)", "units": "rates 1/s; *_s in s", **out}


def thesis_mg1_report(lam_pps, t_sip_us, arrivals: str = "poisson", k_copy_us: float = 2.0) -> dict:
    """The thesis's M/G/1 (eq. 4.1-4.4, Table 4.3 inputs and α) at each λ, from the overall mean
    T_sip (µs): one value, or one per λ."""
    from sipperf.models.mg1 import thesis_mg1

    lam = np.asarray(lam_pps, dtype=float)
    if t_sip_us is None:
        raise ValueError("--thesis needs --t-sip-us (one value, or one per --lam)")
    t = np.asarray(t_sip_us, dtype=float)
    if t.size not in (1, lam.size):
        raise ValueError("--t-sip-us takes one value or one per --lam value")
    t = t.reshape(-1, 1) if t.size > 1 else t.reshape(-1)
    r = thesis_mg1(lam, t, arrivals, k_copy_us=k_copy_us)
    out = _squeeze(jsonable(r), lam.size)
    return {"model": "M/G/1 thesis eq. 4.1-4.4 (Table 4.3 inputs)", "units": "µs", **out}


def mgck_report(lam_pps, service_us: float, scv: float, c: int, K: float) -> dict:
    """The two-moment M/G/c/K approximation (:mod:`sipperf.models.mgck`) at each λ."""
    from sipperf.models.mgck import mgck

    lam = np.asarray(lam_pps, dtype=float)
    r = mgck(lam, service_us * 1e-6, scv, c, K)
    out = jsonable(r)
    out["W_us"] = jsonable(r.W * 1e6)
    out = _squeeze(out, lam.size)
    return {"model": "M/G/c/K two-moment effective-waiting-room approximation", "units": "rates 1/s; s", **out}


def capacity_report(p: int, c: int, c11_cps: float, *, subscribers: float | None = None, erlang: float = 0.1,
                    holding_s: float = 180.0, reg_interval_s: float = 3600.0, mid_call_requests: int = 0) -> dict:
    """C_{p,c} = T_{p,c} x C_{1,1} (thesis eq. 7.1); with ``subscribers``, their traffic and the
    share of the capacity it takes."""
    from sipperf.models.capacity import capacity, threads_for_capacity, traffic_requests_per_s

    out: dict[str, Any] = {"model": "C_{p,c} = T_{p,c} x C_{1,1} (thesis eq. 7.1)",
                           "p": p, "c": c, "c11_cps": c11_cps,
                           "threads": threads_for_capacity(p, c), "capacity_cps": capacity(p, c, c11_cps)}
    if subscribers is not None:
        t = traffic_requests_per_s(subscribers, erlang, holding_s, reg_interval_s, mid_call_requests=mid_call_requests)
        out["traffic"] = asdict(t)
        out["utilisation_of_capacity"] = t.calls_per_s / out["capacity_cps"]
    return out
