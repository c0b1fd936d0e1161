"""A CFS-like scheduler for the proxy's worker threads (thesis §5.3.2, §6.3, §7.4).

Per core: one running thread and a run queue ordered by virtual run time (all threads have
the same weight, so vruntime = run time).  The decisions modelled:

* **time slice** ``max(sched_latency / nr_running, min_granularity)`` (§6.3: the period
  stretches to ``nr_running * min_granularity`` when there are many tasks);
* **wake-up placement** ``vruntime = max(own, min_vruntime - latency/2)`` (sleeper credit)
  and **wake-up preemption** when ``curr.vruntime - woken.vruntime > wakeup_granularity``;
* **migration**: a woken thread goes to its previous core if idle, else to an idle core if it
  is cache-cold (``now - last_ran >= sched_migration_cost``, §7.4); an idle core pulls a
  cache-cold runnable thread from a busy core.  Migrations cost a cache penalty, larger across
  processors (§7.5.1);
* **context switch cost**: a direct part plus a cache-refill part that grows with the number of
  threads sharing the core (§3.4, §5.3.2).
"""
from __future__ import annotations

from operator import attrgetter

from sipperf.sim.params import SchedParams

#: key of the run-queue order (``min(rq, key=VRUNTIME)`` picks the first task of least vruntime)
VRUNTIME = attrgetter("vruntime")


class Thread:
    __slots__ = ("tid", "core", "vruntime", "pkt", "remaining", "done", "last_ran", "penalty_us")

    def __init__(self, tid: int, core: "Core"):
        self.tid = tid
        self.core = core
        self.vruntime = 0.0
        self.pkt = -1          # message index being served, -1 none
        self.remaining = 0.0   # work left on pkt (us)
        self.done = 0.0        # work done on pkt (us)
        self.last_ran = -1e18
        self.penalty_us = 0.0  # pending migration penalty


class Core:
    __slots__ = ("cid", "socket", "curr", "rq", "gen", "run_start", "eff", "last", "nthreads",
                 "min_vr", "tick_gen", "others", "ovh")

    def __init__(self, cid: int, socket: int):
        self.cid = cid
        self.socket = socket
        self.curr: Thread | None = None
        self.rq: list[Thread] = []   # runnable threads, sorted by vruntime (ties: queueing order)
        self.gen = 0
        self.run_start = 0.0
        self.eff = 0.0
        self.last: Thread | None = None
        self.nthreads = 0
        self.min_vr = 0.0
        self.tick_gen = -1
        self.others: tuple[Core, ...] = ()  # the other cores of the machine (set by the engine)
        self.ovh = 0.0   # thread overhead (us) per message served here (kept by the engine)


def time_slice_us(sp: SchedParams, nr_running: int) -> float:
    """CFS ideal slice: the period ``max(latency, nr * min_gran)`` shared by ``nr`` tasks."""
    if nr_running <= 1:
        return float("inf")
    return max(sp.latency_us / nr_running, sp.min_granularity_us)


def slice_table_us(sp: SchedParams, max_running: int) -> list[float]:
    """``time_slice_us(sp, nr)`` for ``nr = 0 .. max_running`` (the engine indexes it by ``nr``)."""
    return [time_slice_us(sp, nr) for nr in range(max_running + 1)]


def switch_base_table_us(sp: SchedParams, max_threads: int) -> list[float]:
    """The thread-independent part of :func:`switch_cost_us` for ``nthreads = 0 .. max_threads``.

    ``switch_cost_us = table[core.nthreads] + thr.penalty_us`` (same floating-point operations).
    """
    return [sp.cs_us + sp.cache_us_per_thread * max(n - 1, 0) for n in range(max_threads + 1)]


def switch_cost_us(sp: SchedParams, core: Core, thr: Thread) -> float:
    """Non-productive time before ``thr`` makes progress on ``core``."""
    if core.last is thr or core.last is None:
        return thr.penalty_us
    return sp.cs_us + sp.cache_us_per_thread * max(core.nthreads - 1, 0) + thr.penalty_us


def place_vruntime(sp: SchedParams, core: Core, thr: Thread) -> float:
    """place_entity(): a sleeper gets at most half a latency of credit."""
    return max(thr.vruntime, core.min_vr - sp.latency_us / 2)


def should_preempt_on_wakeup(sp: SchedParams, curr_vr: float, woken_vr: float) -> bool:
    return curr_vr - woken_vr > sp.wakeup_granularity_us


def select_core(sp: SchedParams, cores: list[Core], thr: Thread, now: float) -> Core:
    """select_task_rq(): previous core if idle, else an idle core if the thread is cache-cold."""
    prev = thr.core
    if prev.curr is None or len(cores) == 1:
        return prev
    if now - thr.last_ran >= sp.migration_cost_us:
        same = [c for c in cores if c.curr is None and not c.rq]
        if same:
            same.sort(key=lambda c: c.socket != prev.socket)
            return same[0]
    return prev


def migrate(sp: SchedParams, thr: Thread, dst: Core) -> None:
    src = thr.core
    if src is dst:
        return
    src.nthreads -= 1
    dst.nthreads += 1
    thr.core = dst
    thr.penalty_us += sp.migrate_us if src.socket == dst.socket else sp.migrate_cross_us


def pull_candidate(sp: SchedParams, cores: list[Core], dst: Core, now: float) -> Thread | None:
    """Idle balancing: a cache-cold runnable thread waiting on another core."""
    best = None
    for c in cores:
        if c is dst or not c.rq:
            continue
        for t in c.rq:
            if now - t.last_ran >= sp.migration_cost_us:
                if best is None or t.vruntime < best.vruntime:
                    best = t
    return best
