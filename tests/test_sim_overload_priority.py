"""The priority additions to the SIP overload model (src/sipperf/sim/overload.py): a two-class
socket, INVITE push-out, an all-request rate limit, and replications.

Expected values come from the rules themselves (which message is served first, which one a full
buffer gives up, what a refused BYE means for a call), from conservation of calls, and from the
committed dataset sim_overload.csv, which the earlier scenarios must still reproduce exactly.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import simpy

from sipperf.sim.overload import (
    PRIORITY_SCENARIOS, SCENARIOS, Call, Overload, OverloadParams, replicate, run_overload, summarise,
)
from sipperf.sim.precomputed import PRECOMPUTED

PARAM_COLS = [f for f in OverloadParams.__dataclass_fields__ if f not in ("priority", "pushout")]


def _idle_proxy(**kw) -> tuple[simpy.Environment, Overload]:
    """An Overload whose processes never run (env.run is not called): arrive() and the socket only."""
    env = simpy.Environment()
    return env, Overload(env, OverloadParams(**kw))


def _order(m: Overload) -> list[tuple[str, int]]:
    """The order in which the worker would take the waiting messages: (kind, call id)."""
    items = sorted(m.socket.items) if m.p.priority else list(m.socket.items)
    return [(it.item[1], it.item[0].cid) if m.p.priority else (it[1], it[0].cid) for it in items]


def test_priority_socket_serves_in_dialog_first_fifo_within_class():
    env, m = _idle_proxy(priority=True)
    arrivals = [("INVITE", 0), ("180", 1), ("INVITE", 2), ("ACK", 3), ("BYE", 4), ("200", 5), ("INVITE", 6)]
    for kind, cid in arrivals:
        m.arrive(Call(env, cid), kind, False)
    in_dialog = [a for a in arrivals if a[0] != "INVITE"]
    invites = [a for a in arrivals if a[0] == "INVITE"]
    assert _order(m) == in_dialog + invites
    # without priority the same arrivals are served in arrival order
    env2, fifo = _idle_proxy()
    for kind, cid in arrivals:
        fifo.arrive(Call(env2, cid), kind, False)
    assert _order(fifo) == arrivals


def test_pushout_discards_the_newest_waiting_invite():
    env, m = _idle_proxy(priority=True, pushout=True, buffer_pkts=3)
    calls = [Call(env, i) for i in range(8)]
    for i in range(3):
        m.arrive(calls[i], "INVITE", False)               # the buffer is full of INVITEs
    m.arrive(calls[3], "ACK", False)                       # pushes out INVITE 2, the newest
    assert _order(m) == [("ACK", 3), ("INVITE", 0), ("INVITE", 1)]
    m.arrive(calls[4], "INVITE", False)                    # an INVITE never pushes out: dropped
    m.arrive(calls[5], "BYE", False)                       # pushes out INVITE 1
    assert _order(m) == [("ACK", 3), ("BYE", 5), ("INVITE", 0)]
    m.arrive(calls[6], "200", False)                       # pushes out INVITE 0
    m.arrive(calls[7], "200-BYE", False)                   # no INVITE left: the 200 is dropped
    assert _order(m) == [("ACK", 3), ("BYE", 5), ("200", 6)]
    drops = [(kind, cid) for _, ev, kind, _, cid in m.log if ev == "drop"]
    assert drops == [("INVITE", 2), ("INVITE", 4), ("INVITE", 1), ("INVITE", 0), ("200-BYE", 7)]
    assert m.arrived == 8


def test_earlier_scenarios_reproduce_the_committed_dataset():
    """Adding the priority options must not change a single number of sim_overload.csv."""
    ds = pd.read_csv(PRECOMPUTED / "sim_overload.csv")
    for name, f in (("503 + Retry-After", 1.0), ("ratelimit", 0.75)):
        row = ds[(ds["scenario"] == name) & np.isclose(ds["load_factor"], f)].iloc[0]
        kw = {c: row[c] for c in PARAM_COLS}
        kw = {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in kw.items()}
        kw["buffer_pkts"], kw["seed"] = int(kw["buffer_pkts"]), int(kw["seed"])
        kw["retransmissions"] = bool(kw["retransmissions"])
        p = OverloadParams(**kw)
        p = replace(p, offered_cps=f * p.capacity_cps())    # as sweep() set it (the CSV rounds it)
        s = summarise(run_overload(p))
        for col in ("calls", "goodput_cps", "drop_share", "setup_p95_s", "msgs_in_per_s", "served_per_s"):
            assert s[col] == pytest.approx(row[col], rel=1e-5), (name, col)
    assert set(PRIORITY_SCENARIOS) - set(SCENARIOS) and "ratelimit" in {v.get("control") for v in SCENARIOS.values()}


def test_all_request_limit_refuses_byes_and_those_calls_never_complete():
    p = replace(OverloadParams(control="ratelimit-all", warmup_s=10.0, measure_s=10.0, seed=4),
                offered_cps=2.0 * OverloadParams().capacity_cps())
    m = run_overload(p)
    s = summarise(m)
    counted = [c for c in m.calls if p.warmup_s <= c.start < p.warmup_s + p.measure_s]
    refused = [c for c in counted if c.bye_refused]
    assert refused and all(c.outcome == "set up" and np.isnan(c.bye_s) for c in refused)
    set_up = sum(c.outcome == "set up" for c in counted)
    assert s["bye_refused_share"] == pytest.approx(len(refused) / set_up)
    assert s["failed_after_setup_share"] >= s["bye_refused_share"]
    # every counted call ends in exactly one outcome
    outcomes = pd.Series([c.outcome for c in counted]).value_counts()
    assert outcomes.sum() == s["calls"] and set(outcomes.index) <= {"set up", "rejected", "timeout", "throttled"}
    # the INVITE-only limit never refuses a BYE
    m2 = run_overload(replace(p, control="ratelimit"))
    assert not any(c.bye_refused for c in m2.calls)


def test_light_load_priority_changes_nothing_for_the_caller():
    base = OverloadParams(offered_cps=0.3 * OverloadParams().capacity_cps(), warmup_s=5.0, measure_s=15.0, seed=3)
    for kw in ({}, {"priority": True}, {"priority": True, "pushout": True}):
        s = summarise(run_overload(replace(base, **kw)))
        assert s["goodput_cps"] * base.measure_s == s["calls"]        # every counted call completed
        assert s["drop_share"] == 0 and s["failed_after_setup_share"] == 0
        assert s["amplification"] == pytest.approx(1.0, abs=0.02)


@pytest.mark.slow
def test_controls_order_far_past_the_knee():
    """At 2.5 times the capacity: pushing out INVITEs keeps admitted calls alive, an all-request
    limit kills them, the INVITE-only limit is in between."""
    cap = OverloadParams().capacity_cps()
    g = {}
    for name in ("priority + INVITE push-out", "INVITE-only limit", "all-request limit"):
        p = replace(OverloadParams(**PRIORITY_SCENARIOS[name]), offered_cps=2.5 * cap, measure_s=10.0, seed=8)
        g[name] = summarise(run_overload(p))["goodput_cps"]
    assert g["priority + INVITE push-out"] > g["INVITE-only limit"] > g["all-request limit"]


def test_replicate_rows_and_seeds():
    d = replicate(2, factors=(0.5,), scenarios={"light": {}}, seed=7, warmup_s=0.0, measure_s=2.0)
    assert list(d["rep"]) == [0, 1] and list(d["seed"]) == [7, 1007]
    assert (d["scenario"] == "light").all() and np.allclose(d["load_factor"], 0.5)
