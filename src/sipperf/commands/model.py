"""``sipperf model``: evaluate the thesis's queueing models and print JSON.

    sipperf model mmck --c 2 --K 200 --lam 13200 --service-us 151
    sipperf model mg1 --lam 600 1200 --service-us 133.4 --scv 0.03
    sipperf model mg1 --thesis --lam 600 1200 --t-sip-us 102.1 102.8 --arrivals poisson
    sipperf model mgck --c 8 --K 200 --lam 9600 --service-us 800 --scv 4
    sipperf model capacity --p 1 --c 4 [--c11 1000] [--subscribers 300000 --erlang 0.1 ...]

Rates are packets per second, times microseconds unless the option name says otherwise.
Several ``--lam`` values give a list per output field.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import asdict, fields, is_dataclass
from typing import Any

import numpy as np


def _jsonable(x: Any) -> Any:
    if is_dataclass(x):
        return {f.name: _jsonable(getattr(x, f.name)) for f in fields(x)}
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        x = x.tolist() if x.ndim else x.item()
        return _jsonable(x)
    if isinstance(x, (np.floating, float)):
        v = float(x)
        return v if np.isfinite(v) else ("inf" if v > 0 else "-inf" if v < 0 else "nan")
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def _squeeze(d: dict, n: int) -> dict:
    """Scalars instead of one-element lists when a single --lam was given."""
    if n != 1:
        return d
    return {k: (v[0] if isinstance(v, list) and len(v) == 1 else v) for k, v in d.items()}


def _print(obj: dict) -> int:
    print(json.dumps(obj, indent=2))
    return 0


def _run_mmck(a: argparse.Namespace) -> int:
    from sipperf.models.mmck import mmck

    lam = np.asarray(a.lam, dtype=float)
    fitted = None
    if a.fit:  # service time per server from a fit.json: E[X_c] = beta(lam, c) * c * E[X_1](lam) (eq. 5.5)
        from sipperf.fit import FitFile

        ff = FitFile(a.fit)
        b = ff.beta(lam, a.c)
        if b is None:
            raise ValueError(f"--fit {a.fit} has no fitted beta: it cannot give the service time of {a.c} threads")
        fitted = np.asarray(b * a.c * ff.ex1_us(lam), dtype=float)
        a.service_us = a.service_us if a.service_us is not None else float(fitted.ravel()[0])
        a.K = a.K if a.K is not None else ff.k_pkts
    if a.service_us is None or a.K is None:
        raise ValueError("mmck needs --service-us and --K (or --fit FILE)")
    if a.service_us <= 0:
        raise ValueError("--service-us must be > 0")
    svc = fitted if fitted is not None and lam.size > 1 else a.service_us
    r = mmck(lam, 1e6 / np.asarray(svc, dtype=float), a.c, a.K)
    out = _jsonable(r)
    out["W_us"] = _jsonable(r.W * 1e6)
    out["Wq_us"] = _jsonable(r.Wq * 1e6)
    out = _squeeze(out, lam.size)
    if a.target_pdr is not None:
        from sipperf.models.capacity import max_rate

        mu = 1e6 / a.service_us
        hi = 100.0 * a.c * mu
        out["target_pdr"] = a.target_pdr
        out["max_lam_for_target"] = max_rate(lambda x: float(mmck(x, mu, a.c, a.K).p_block), a.target_pdr, 0.0, hi)
    out = {"model": "M/M/c/K (thesis eq. 5.3/5.4)", "units": "rates 1/s; W, Wq in s; W_us, Wq_us in µs", **out}
    if fitted is not None:
        out["service_us_from_fit"] = _squeeze({"v": _jsonable(fitted)}, lam.size)["v"]
        out["fit"] = a.fit
    return _print(out)


def _run_mg1(a: argparse.Namespace) -> int:
    from sipperf.models.mg1 import mg1_wait, thesis_mg1

    lam = np.asarray(a.lam, dtype=float)
    if a.thesis:
        if a.t_sip_us is None:
            raise ValueError("--thesis needs --t-sip-us (one value, or one per --lam)")
        t = np.asarray(a.t_sip_us, dtype=float)
        if t.size not in (1, lam.size):
            raise ValueError("--t-sip-us takes one value or one per --lam value")
        t = t.reshape(-1, 1) if t.size > 1 else t.reshape(-1)
        r = thesis_mg1(lam, t, a.arrivals, k_copy_us=a.k_copy_us)
        out = _squeeze(_jsonable(r), lam.size)
        return _print({"model": "M/G/1 thesis eq. 4.1-4.4 (Table 4.3 inputs)", "units": "µs", **out})
    if a.fit:  # E[X](lam) and its SCV from a fit.json (sipperf fit / sipperf report)
        from sipperf.fit import FitFile

        ff = FitFile(a.fit)
        ex = ff.ex1_us(lam) * 1e-6 if a.service_us is None else a.service_us * 1e-6
        scv = ff.scv(lam) if a.scv is None else a.scv
        r = mg1_wait(lam, ex, ex * ex * (1.0 + scv))
        out = _jsonable(r)
        out["W_us"] = _jsonable(r.W_s * 1e6)
        out["scv"] = _jsonable(np.broadcast_to(scv, lam.shape))
        out = _squeeze(out, lam.size)
        return _print({"model": "M/G/1 Pollaczek-Khinchine (thesis eq. 4.2), E[X](lambda) and SCV from the fit",
                       "fit": a.fit, "units": "rates 1/s; *_s in s", **out})
    if a.service_us is None:
        raise ValueError("mg1 needs --service-us (mean) with --scv, or --thesis, or --fit FILE")
    ex = a.service_us * 1e-6
    r = mg1_wait(lam, ex, ex * ex * (1.0 + (a.scv or 0.0)))
    out = _jsonable(r)
    out["W_us"] = _jsonable(r.W_s * 1e6)
    out = _squeeze(out, lam.size)
    return _print({"model": "M/G/1 Pollaczek-Khinchine (thesis eq. 4.2)", "units": "rates 1/s; *_s in s", **out})


def _run_mgck(a: argparse.Namespace) -> int:
    from sipperf.models.mgck import mgck

    lam = np.asarray(a.lam, dtype=float)
    r = mgck(lam, a.service_us * 1e-6, a.scv, a.c, a.K)
    out = _jsonable(r)
    out["W_us"] = _jsonable(r.W * 1e6)
    out = _squeeze(out, lam.size)
    return _print({"model": "M/G/c/K two-moment effective-waiting-room approximation", "units": "rates 1/s; s", **out})


def _run_capacity(a: argparse.Namespace) -> int:
    from sipperf.models.capacity import capacity, threads_for_capacity, traffic_requests_per_s

    if a.fit:
        from sipperf.fit import FitFile

        c11 = FitFile(a.fit).c11_cps
        if c11 is None:
            raise ValueError(f"--fit {a.fit} has no fitted C_1,1 (no run set with a knee)")
        a.c11 = float(c11)
    out: dict[str, Any] = {"model": "C_{p,c} = T_{p,c} x C_{1,1} (thesis eq. 7.1)",
                           "p": a.p, "c": a.c, "c11_cps": a.c11,
                           "threads": threads_for_capacity(a.p, a.c), "capacity_cps": capacity(a.p, a.c, a.c11)}
    if a.subscribers is not None:
        t = traffic_requests_per_s(a.subscribers, a.erlang, a.holding_s, a.reg_interval_s,
                                   mid_call_requests=a.mid_call_requests)
        out["traffic"] = asdict(t)
        out["utilisation_of_capacity"] = t.calls_per_s / out["capacity_cps"]
    return _print(out)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("model", help="evaluate the thesis's queueing models (JSON)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    msub = p.add_subparsers(dest="model", metavar="MODEL", required=True)

    q = msub.add_parser("mmck", help="M/M/c/K drop probability and delays")
    q.add_argument("--c", type=int, required=True, help="servers (threads)")
    q.add_argument("--K", type=float, default=None, help="system capacity in packets (incl. in service)")
    q.add_argument("--lam", type=float, nargs="+", required=True, metavar="PKTS_PER_S")
    q.add_argument("--service-us", type=float, default=None, help="mean service time per server, µs")
    q.add_argument("--fit", default=None, metavar="FIT_JSON",
                   help="take E[X_c] = beta*c*E[X_1](lam) and K from a fit.json (sipperf fit / report)")
    q.add_argument("--target-pdr", type=float, help="also report the highest λ with drop probability <= this")
    q.set_defaults(func=_run_mmck)

    g = msub.add_parser("mg1", help="M/G/1 Pollaczek-Khinchine waiting time")
    g.add_argument("--lam", type=float, nargs="+", required=True, metavar="PKTS_PER_S")
    g.add_argument("--service-us", type=float, help="mean service time E[X], µs")
    g.add_argument("--scv", type=float, default=None, help="squared coefficient of variation of X (default 0, "
                                                            "or the fit's with --fit)")
    g.add_argument("--fit", default=None, metavar="FIT_JSON", help="E[X](lam) and SCV from a fit.json")
    g.add_argument("--thesis", action="store_true", help="thesis eq. 4.1-4.4 with Table 4.3 inputs and alpha")
    g.add_argument("--t-sip-us", type=float, nargs="+", help="overall mean T_sip (µs), one or one per --lam")
    g.add_argument("--arrivals", choices=("poisson", "deterministic"), default="poisson")
    g.add_argument("--k-copy-us", type=float, default=2.0)
    g.set_defaults(func=_run_mg1)

    k = msub.add_parser("mgck", help="M/G/c/K two-moment approximation")
    k.add_argument("--c", type=int, required=True)
    k.add_argument("--K", type=float, required=True)
    k.add_argument("--lam", type=float, nargs="+", required=True, metavar="PKTS_PER_S")
    k.add_argument("--service-us", type=float, required=True)
    k.add_argument("--scv", type=float, required=True)
    k.set_defaults(func=_run_mgck)

    c = msub.add_parser("capacity", help="capacity C_{p,c} (eq. 7.1) and subscriber traffic")
    c.add_argument("--p", type=int, required=True, help="processors")
    c.add_argument("--c", type=int, required=True, help="cores")
    c.add_argument("--c11", type=float, default=1000.0, help="single-core single-thread capacity, cps")
    c.add_argument("--fit", default=None, metavar="FIT_JSON", help="take C_1,1 from a fit.json")
    c.add_argument("--subscribers", type=float)
    c.add_argument("--erlang", type=float, default=0.1, help="erlangs per subscriber")
    c.add_argument("--holding-s", type=float, default=180.0)
    c.add_argument("--reg-interval-s", type=float, default=3600.0)
    c.add_argument("--mid-call-requests", type=int, default=0)
    c.set_defaults(func=_run_capacity)
