"""Both engines' event mechanics against schedules worked out by hand.

The expected instants below are derived in the comments from the model's rules (FIFO socket
queue, CFS slices of ``max(latency / nr, min_granularity)``, least-vruntime pick), not taken
from the code's output.  Every schedule runs on the SimPy model of chapter 9
(:mod:`sipperf.sim.model`) and on its fast twin (:mod:`sipperf.sim.fast_twin`); the twin's
event counts and run segments are checked as well.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from sipperf.sim import scheduler as S
from sipperf.sim.params import SchedParams
from sipperf.sim.run import _instants, message_arrays, run_workload, to_timeline
from sipperf.sim.calibration.validate import queue_only
from sipperf.sim.workload import Workload

ENGINES = pytest.mark.parametrize("engine", ["twin", "simpy"])


def _engine(t0_us, x_us: float, threads: int, cores: int, sched: SchedParams | None = None,
            engine: str = "twin"):
    """Packets of type 0 arriving at ``t0_us`` (no K_stack), each needing ``x_us`` of work."""
    n = len(t0_us)
    p = queue_only((x_us,) * 6, 1000.0, n, "det", threads=threads)
    p = replace(p, kernel=replace(p.kernel, cores=cores, thread_overhead_us=0.0, contention=0.0))
    if sched is not None:
        p = replace(p, sched=sched)
    z = np.zeros(0)
    wl = Workload(n, n, np.asarray(t0_us, float), np.zeros(n, np.int64), np.ones(n), z, z, z, z)
    kp, _ = run_workload(p, wl, engine)
    return kp


def _dep(kp) -> list[float]:
    return message_arrays(kp)["t_dep"].tolist()


def _start(kp) -> list[float]:
    return message_arrays(kp)["t_start"].tolist()


@ENGINES
def test_one_thread_fifo_by_hand(engine):
    # arrivals 0, 10, 20 us, 100 us each, one thread: a FIFO queue -> departures 100, 200, 300;
    # the twin needs exactly two events per message (arrival, service end), no switches
    kp = _engine([0.0, 10.0, 20.0], 100.0, threads=1, cores=1, engine=engine)
    assert _dep(kp) == [100.0, 200.0, 300.0]
    assert _start(kp) == [0.0, 100.0, 200.0]
    if engine == "twin":
        assert kp.events == 6 and kp.now == 300.0
    assert kp.switches == kp.preemptions == kp.migrations == 0


@ENGINES
def test_two_threads_two_cores_by_hand(engine):
    # two idle cores: packets 0 and 1 start at once, packet 2 waits for the first free thread
    kp = _engine([0.0, 10.0, 20.0], 100.0, threads=2, cores=2, engine=engine)
    assert _dep(kp) == [100.0, 110.0, 200.0]
    if engine == "twin":
        assert kp.events == 6


@ENGINES
def test_cfs_slices_by_hand(engine):
    # Two threads on one core, free switches, latency 900 us, no wake-up preemption.
    # A takes packet 0 at 0 (1000 us of work); B wakes at 1 with packet 1 and waits.
    # slice = max(900 / 2, 100) = 450: tick at 450 -> B (vruntime 0 < A's 450) runs packet 1;
    # tick at 900 -> A (450) and B (450) tie, A queued first -> A resumes packet 0 (550 left);
    # tick at 1350 -> B (450 < A's 900) resumes packet 1 (550 left); tick at 1800 -> A resumes
    # (100 left) and ends at 1900; B resumes at 1900 (100 left) and ends at 2000.
    sp = SchedParams(latency_us=900.0, min_granularity_us=100.0, wakeup_granularity_us=1e9,
                     migration_cost_us=0.0, cs_us=0.0, cache_us_per_thread=0.0)
    kp = _engine([0.0, 1.0], 1000.0, threads=2, cores=1, sched=sp, engine=engine)
    assert _dep(kp) == [1900.0, 2000.0]
    assert kp.preemptions == 4 and kp.switches == 5
    if engine == "twin":
        assert kp.segs == {0: [(0.0, 0.0), (900.0, 450.0), (1800.0, 900.0)],
                           1: [(450.0, 0.0), (1350.0, 450.0), (1900.0, 900.0)]}
        # events: 2 arrivals; ends at 1000, 1450 (A), 1450, 1900 (B), all stale, then 1900 (A) and
        # 2000 (B); ticks at 450, 900, 1350, 1800 and 2250 (stale)
        assert kp.events == 13
    # 600 us of work (T_sip^1 is 60 %): packet 0 in its second run (900 + 150), packet 1 in its
    # second (1350 + 150)
    ins = _instants(kp)
    np.testing.assert_array_equal(ins["t_sip_c"], [1050.0, 1500.0])
    np.testing.assert_array_equal(ins["t_sockq"], [0.0, 450.0])
    tl = to_timeline(kp)
    assert tl["t_dep"].tolist() == [1_900_000, 2_000_000]


@ENGINES
def test_wakeup_preemption_by_hand(engine):
    # As above with wake-up granularity 0.  B wakes at 1 with vruntime max(0, min_vr - 500) = 0;
    # A has run 1 us: 1 - 0 > 0 -> B preempts A at once (A keeps 999 us of packet 0).
    # tick 1 + 500 = 501: B has vruntime 500 > A's 1 -> A resumes; tick 501 + 500 = 1001: A (501)
    # > B (500) -> B resumes packet 1 (500 left) and ends at 1501; A resumes (499 left) -> 2000.
    sp = SchedParams(latency_us=1000.0, min_granularity_us=100.0, wakeup_granularity_us=0.0,
                     migration_cost_us=0.0, cs_us=0.0, cache_us_per_thread=0.0)
    kp = _engine([0.0, 1.0], 1000.0, threads=2, cores=1, sched=sp, engine=engine)
    assert _dep(kp) == [2000.0, 1501.0]
    assert _start(kp) == [0.0, 1.0]
    assert kp.preemptions == 3 and kp.switches == 4
    if engine == "twin":
        assert kp.segs == {0: [(0.0, 0.0), (501.0, 1.0), (1501.0, 501.0)],
                           1: [(1.0, 0.0), (1001.0, 500.0)]}
        # events: 2 arrivals; ends A@1000, B@1001, A@1500 (all stale), B@1501, A@2000; ticks 501,
        # 1001, 1501 (stale)
        assert kp.events == 10
    # 600 us of work: packet 0 in its third run (1501 + 99), packet 1 in its second (1001 + 100)
    np.testing.assert_array_equal(_instants(kp)["t_sip_c"], [1600.0, 1101.0])


def test_tables_match_the_scheduler_functions():
    sp = SchedParams(latency_us=3000.0, min_granularity_us=300.0, cs_us=3.0, cache_us_per_thread=0.5)
    assert S.slice_table_us(sp, 17) == [S.time_slice_us(sp, n) for n in range(18)]
    core, thr = S.Core(0, 0), S.Thread(1, S.Core(1, 0))
    core.last = S.Thread(2, core)
    thr.penalty_us = 5.0
    for n in range(1, 17):
        core.nthreads = n
        assert S.switch_base_table_us(sp, 16)[n] + thr.penalty_us == S.switch_cost_us(sp, core, thr)


@ENGINES
def test_switch_cost_and_dequeue_after_switch_in_by_hand(engine):
    # Two threads on one core, 100 us per packet, switch cost 5 us, no wake-up preemption,
    # slices of max(1000 / 2, 100) = 500 us.  A takes p0 at 0 (no switch: the core never ran
    # anything); B wakes at 1 for p1 and waits.  At 100 A has used 100 < 500 us of its slice:
    # it keeps the core and serves p1 (100 -> 200).  At 200 A blocks; B switches in (200 -> 205).
    # p2 arrives at 202, during B's switch: it wakes A, which queues behind B.  At 205 B's
    # recvfrom() finds p2 and serves it (205 -> 305); at 305 B blocks, A switches in (-> 310)
    # and finds nothing.  Two switches, no preemption.
    sp = SchedParams(latency_us=1000.0, min_granularity_us=100.0, wakeup_granularity_us=1e9,
                     migration_cost_us=0.0, cs_us=5.0, cache_us_per_thread=0.0)
    kp = _engine([0.0, 1.0, 202.0], 100.0, threads=2, cores=1, sched=sp, engine=engine)
    assert _dep(kp) == [100.0, 200.0, 305.0]
    assert _start(kp) == [0.0, 100.0, 205.0]
    assert kp.switches == 2 and kp.preemptions == 0


@pytest.mark.parametrize("kw", [
    dict(rate_cps=2500, threads=8, cores=1),
    dict(rate_cps=4200, threads=16, cores=4, sched_mode="enhanced",
         kernel_over={"overhead_scope": "socket", "contention": 0.2}),
    dict(rate_cps=5000, threads=6, cores=6, kernel_over={"overhead_scope": "socket", "contention": 0.2}),
    dict(rate_cps=1300, threads=1, cores=1, kernel_over={"rcvbuf_pkts": None, "rcvbuf_bytes": 60000}),
])
def test_engines_agree_message_by_message(kw):
    """On the same inputs the SimPy model and the twin give every message the same fate and the
    same instants (to float rounding), with the same scheduler counts: two independent
    implementations of one set of rules."""
    from sipperf.sim.params import make_params
    from sipperf.sim.run import run_core

    p = make_params(calls=700, **kw)
    a, _ = run_core(p, 11, "twin")
    b, _ = run_core(p, 11, "simpy")
    oa, ob = message_arrays(a)["outcome"], message_arrays(b)["outcome"]
    np.testing.assert_array_equal(oa, ob)
    for k in ("t_sockq", "t_sip_in", "t_sip_c", "t_sip_out", "t_dep"):
        np.testing.assert_allclose(_instants(a)[k], _instants(b)[k], rtol=0, atol=1e-6)
    assert (a.preemptions, a.switches, a.migrations, a.max_q) == (b.preemptions, b.switches, b.migrations,
                                                                  b.max_q)
    if kw["threads"] > kw["cores"]:
        assert a.switches > 0
