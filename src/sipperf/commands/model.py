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
    if a.service_us <= 0:
        raise ValueError("--service-us must be > 0")
    r = mmck(lam, 1e6 / a.service_us, a.c, a.K)
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
    if a.service_us is None:
        raise ValueError("mg1 needs --service-us (mean) with --scv, or --thesis")
    ex = a.service_us * 1e-6
    r = mg1_wait(lam, ex, ex * ex * (1.0 + a.scv))
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
    q.add_argument("--K", type=float, required=True, help="system capacity in packets (incl. in service)")
    q.add_argument("--lam", type=float, nargs="+", required=True, metavar="PKTS_PER_S")
    q.add_argument("--service-us", type=float, required=True, help="mean service time per server, µs")
    q.add_argument("--target-pdr", type=float, help="also report the highest λ with drop probability <= this")
    q.set_defaults(func=_run_mmck)

    g = msub.add_parser("mg1", help="M/G/1 Pollaczek-Khinchine waiting time")
    g.add_argument("--lam", type=float, nargs="+", required=True, metavar="PKTS_PER_S")
    g.add_argument("--service-us", type=float, help="mean service time E[X], µs")
    g.add_argument("--scv", type=float, default=0.0, help="squared coefficient of variation of X (default 0)")
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
    c.add_argument("--subscribers", type=float)
    c.add_argument("--erlang", type=float, default=0.1, help="erlangs per subscriber")
    c.add_argument("--holding-s", type=float, default=180.0)
    c.add_argument("--reg-interval-s", type=float, default=3600.0)
    c.add_argument("--mid-call-requests", type=int, default=0)
    c.set_defaults(func=_run_capacity)
