"""KernelParams.overhead_scope: the thread overhead theta * (m - 1) per message, with m the threads
on the message's core ("core") or on its processor ("socket"), worked out by hand below, on both
engines (the SimPy model and its fast twin)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from sipperf.sim.fast_twin import FastTwin
from sipperf.sim.params import SchedParams
from sipperf.sim.run import message_arrays, run_workload
from sipperf.sim.calibration.validate import queue_only
from sipperf.sim.workload import Workload

THETA = 2.0
#: no switch, cache or migration costs; an idle core takes any cache-cold waking thread
FREE = SchedParams(migration_cost_us=0.0, cs_us=0.0, cache_us_per_thread=0.0, migrate_us=0.0,
                   migrate_cross_us=0.0)


def _run(scope: str, engine: str = "twin"):
    # 4 threads on 3 cores, 2 cores per processor: cores 0, 1 on socket 0, core 2 on socket 1.
    # Threads go round-robin: T0 -> c0, T1 -> c1, T2 -> c2, T3 -> c0 (socket counts 3 and 1).
    t0 = [0.0, 1000.0, 2000.0, 3000.0, 3001.0, 3002.0, 5000.0, 6000.0]
    n = len(t0)
    p = queue_only((100.0,) * 6, 1000.0, n, "det", threads=4)
    p = replace(p, sched=FREE, kernel=replace(p.kernel, cores=3, cores_per_socket=2, contention=0.0,
                                              thread_overhead_us=THETA, overhead_scope=scope))
    z = np.zeros(0)
    wl = Workload(n, n, np.asarray(t0, float), np.zeros(n, np.int64), np.ones(n), z, z, z, z)
    return run_workload(p, wl, engine)[0]


# Walk-through (100 us of work per packet; waiters are woken in FIFO order):
#  p0 @0     T0 on idle c0.           socket 0 holds 3 threads, c0 holds 2
#  p1 @1000  T1 on idle c1.           socket 0: 3, c1: 1
#  p2 @2000  T2 on idle c2.           socket 1: 1, c2: 1
#  p3 @3000  T3 on idle c0.           socket 0: 3, c0: 2
#  p4 @3001  T0's core c0 is busy -> migrates to idle c1 (same socket): socket 0: 3, c1: 2
#  p5 @3002  T1's core c1 is busy, c0 busy -> migrates to idle c2 (other socket):
#            sockets now 2 and 2; c2: 2 (T2, T1)
#  ends: T3 @3000+100+x3, T1 @3002+100+x5, T0 @3001+100+x4 -> waiters T2, then T3 first among
#  the others, so p6 @5000 wakes T2 on c2 (socket 1: 2, c2: 2) and p7 @6000 T3 on c0
#  (socket 0: 2 after T1 left; c0: 1)
# extra = theta * (m - 1):
SOCKET = [2 * THETA, 2 * THETA, 0.0, 2 * THETA, 2 * THETA, THETA, THETA, THETA]
CORE = [THETA, 0.0, 0.0, THETA, THETA, THETA, THETA, 0.0]


@pytest.mark.parametrize("engine", ["twin", "simpy"])
@pytest.mark.parametrize("scope, expected", [("socket", SOCKET), ("core", CORE)])
def test_overhead_scope_by_hand(scope, expected, engine):
    kp = _run(scope, engine)
    assert kp.migrations == 2
    assert message_arrays(kp)["extra"].tolist() == expected
    # no queueing, no costs: each packet leaves 100 us + its overhead after it arrives
    t0 = kp.wl.t0_us
    np.testing.assert_allclose(message_arrays(kp)["t_dep"], t0 + 100.0 + np.array(expected), rtol=0, atol=1e-9)
    if engine == "twin":
        assert [c.nthreads for c in kp.cores] == [1, 1, 2]
        if scope == "socket":   # the per-processor counts are kept only where they are used
            assert kp.sock_n == [2, 2]
    else:
        assert [c.threads for c in kp.cores] == [1, 1, 2]
        assert kp.per_socket == [2, 2]


def test_overhead_scope_rejects_unknown():
    p = queue_only((100.0,) * 6, 1000.0, 1, "det", threads=1)
    p = replace(p, kernel=replace(p.kernel, overhead_scope="cache"))
    z = np.zeros(0)
    with pytest.raises(ValueError, match="overhead_scope"):
        FastTwin(p, Workload(1, 1, np.zeros(1), np.zeros(1, np.int64), np.ones(1), z, z, z, z))
