"""``sipperf model``: evaluate the thesis's queueing models and print JSON.

    sipperf model mmck --c 2 --K 200 --lam 13200 --service-us 151
    sipperf model mg1 --lam 600 1200 --service-us 133.4 --scv 0.03
    sipperf model mg1 --thesis --lam 600 1200 --t-sip-us 102.1 102.8 --arrivals poisson
    sipperf model mgck --c 8 --K 200 --lam 9600 --service-us 800 --scv 4
    sipperf model capacity --p 1 --c 4 [--c11 1000] [--subscribers 300000 --erlang 0.1 ...]

Rates are packets per second, times microseconds unless the option name says otherwise.
Several ``--lam`` values give a list per output field.
"""
# The library behind it: sipperf.models.evaluate (and sipperf.fit.FitFile for --fit).
from __future__ import annotations

import argparse
import json


def _print(obj: dict) -> int:
    print(json.dumps(obj, indent=2))
    return 0


def _run_mmck(a: argparse.Namespace) -> int:
    from sipperf.models.evaluate import mmck_report

    service_us, K, fitted = a.service_us, a.K, None
    if a.fit:  # service time per server from a fit.json: E[X_c] = beta(lam, c) * c * E[X_1](lam) (eq. 5.5)
        from sipperf.fit import FitFile

        ff = FitFile(a.fit)
        fitted = ff.service_us_c(a.lam, a.c)
        service_us = service_us if service_us is not None else float(fitted.ravel()[0])
        K = K if K is not None else ff.k_pkts
    return _print(mmck_report(a.lam, service_us, a.c, K, target_pdr=a.target_pdr, fitted_service_us=fitted,
                              fit=a.fit))


def _run_mg1(a: argparse.Namespace) -> int:
    from sipperf.models.evaluate import mg1_report, thesis_mg1_report

    if a.thesis:
        return _print(thesis_mg1_report(a.lam, a.t_sip_us, a.arrivals, a.k_copy_us))
    if a.fit:  # E[X](lam) and its SCV from a fit.json (sipperf fit / sipperf report)
        from sipperf.fit import FitFile

        ff = FitFile(a.fit)
        return _print(mg1_report(a.lam, ff.ex1_us(a.lam) if a.service_us is None else a.service_us,
                                 ff.scv(a.lam) if a.scv is None else a.scv, fit=a.fit))
    return _print(mg1_report(a.lam, a.service_us, a.scv))


def _run_mgck(a: argparse.Namespace) -> int:
    from sipperf.models.evaluate import mgck_report

    return _print(mgck_report(a.lam, a.service_us, a.scv, a.c, a.K))


def _run_capacity(a: argparse.Namespace) -> int:
    from sipperf.models.evaluate import capacity_report

    c11 = a.c11
    if a.fit:
        from sipperf.fit import FitFile

        c11 = FitFile(a.fit).c11()
    return _print(capacity_report(a.p, a.c, c11, subscribers=a.subscribers, erlang=a.erlang, holding_s=a.holding_s,
                                  reg_interval_s=a.reg_interval_s, mid_call_requests=a.mid_call_requests))


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
