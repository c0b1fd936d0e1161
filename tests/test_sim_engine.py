"""The kernel-path engine's event mechanics against schedules worked out by hand.

The expected instants below are derived in the comments from the model's rules (FIFO socket
queue, CFS slices of ``max(latency / nr, min_granularity)``, least-vruntime pick), not taken
from the code's output.  They pin the fast engine (SimPy events pushed directly on the
environment's queue, inlined scheduler) to the scheduler's documented behaviour.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
from sipperf.sim import scheduler as S
from sipperf.sim.kernel_path import KernelPath
from sipperf.sim.params import SchedParams
from sipperf.sim.run import _instants, to_timeline
from sipperf.sim.validate import queue_only
from sipperf.sim.workload import Workload


def _engine(t0_us, x_us: float, threads: int, cores: int, sched: SchedParams | None = None) -> KernelPath:
    """Packets of type 0 arriving at ``t0_us`` (no K_stack), each needing ``x_us`` of work."""
    n = len(t0_us)
    p = queue_only((x_us,) * 6, 1000.0, n, "det", threads=threads)
    p = replace(p, kernel=replace(p.kernel, cores=cores, thread_overhead_us=0.0, contention=0.0))
    if sched is not None:
        p = replace(p, sched=sched)
    z = np.zeros(0)
    wl = Workload(n, n, np.asarray(t0_us, float), np.zeros(n, np.int64), np.ones(n), z, z, z, z)
    kp = KernelPath(p, wl)
    kp.run()
    return kp


def test_one_thread_fifo_by_hand():
    # arrivals 0, 10, 20 us, 100 us each, one thread: a FIFO queue -> departures 100, 200, 300;
    # exactly two SimPy events per message (arrival, service end), no switches
    kp = _engine([0.0, 10.0, 20.0], 100.0, threads=1, cores=1)
    assert kp.t_dep == [100.0, 200.0, 300.0]
    assert kp.t_start == [0.0, 100.0, 200.0]
    assert kp.events == 6 and kp.env.now == 300.0
    assert kp.switches == kp.preemptions == kp.migrations == 0


def test_two_threads_two_cores_by_hand():
    # two idle cores: packets 0 and 1 start at once, packet 2 waits for the first free thread
    kp = _engine([0.0, 10.0, 20.0], 100.0, threads=2, cores=2)
    assert kp.t_dep == [100.0, 110.0, 200.0]
    assert kp.events == 6


def test_cfs_slices_by_hand():
    # Two threads on one core, free switches, latency 1000 us, no wake-up preemption.
    # A takes packet 0 at 0 (1000 us of work); B wakes at 1 with packet 1 and waits.
    # slice = max(1000 / 2, 100) = 500: tick at 500 -> B (vruntime 0 < A's 500) runs packet 1;
    # tick at 1000 -> A (500) and B (500) tie, A is first in the run queue -> A resumes packet 0
    # (500 us left) and ends at 1500; B resumes packet 1 at 1500 and ends at 2000.
    sp = SchedParams(latency_us=1000.0, min_granularity_us=100.0, wakeup_granularity_us=1e9,
                     migration_cost_us=0.0, cs_us=0.0, cache_us_per_thread=0.0)
    kp = _engine([0.0, 1.0], 1000.0, threads=2, cores=1, sched=sp)
    assert kp.t_dep == [1500.0, 2000.0]
    assert kp.segs == {0: [(0.0, 0.0), (1000.0, 500.0)], 1: [(500.0, 0.0), (1500.0, 500.0)]}
    assert kp.preemptions == 2 and kp.switches == 3
    # events: 2 arrivals; ends at 1000 (A, stale), 1500 (B, stale), 1500 (A), 2000 (B);
    # ticks at 500, 1000, 1500 (stale)
    assert kp.events == 9
    # T_sip^1 is 60 % of the work: packet 0 reaches 600 us of work at 1000 + 100, packet 1 at 1600
    ins = _instants(kp)
    np.testing.assert_array_equal(ins["t_sip_c"], [1100.0, 1600.0])
    np.testing.assert_array_equal(ins["t_sockq"], [0.0, 500.0])
    tl = to_timeline(kp)
    assert tl["t_dep"].tolist() == [1_500_000, 2_000_000]


def test_wakeup_preemption_by_hand():
    # As above with wake-up granularity 0.  B wakes at 1 with vruntime max(0, min_vr - 500) = 0;
    # A has run 1 us: 1 - 0 > 0 -> B preempts A at once (A keeps 999 us of packet 0).
    # tick 1 + 500 = 501: B has vruntime 500 > A's 1 -> A resumes; tick 501 + 500 = 1001: A (501)
    # > B (500) -> B resumes packet 1 (500 left) and ends at 1501; A resumes (499 left) -> 2000.
    sp = SchedParams(latency_us=1000.0, min_granularity_us=100.0, wakeup_granularity_us=0.0,
                     migration_cost_us=0.0, cs_us=0.0, cache_us_per_thread=0.0)
    kp = _engine([0.0, 1.0], 1000.0, threads=2, cores=1, sched=sp)
    assert kp.t_dep == [2000.0, 1501.0]
    assert kp.t_start == [0.0, 1.0]
    assert kp.segs == {0: [(0.0, 0.0), (501.0, 1.0), (1501.0, 501.0)], 1: [(1.0, 0.0), (1001.0, 500.0)]}
    assert kp.preemptions == 3 and kp.switches == 4
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
