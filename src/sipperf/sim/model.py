"""The kernel-path model of chapter 9, written as plain SimPy processes.

This is the model the book teaches, and the reference for the fast twin
(:mod:`sipperf.sim.fast_twin`, same rules, hand-written event loop, used for sweeps).  A packet
travels the path of thesis Fig. 3.3: the NIC and the IP/UDP layers (``K_stack``, a pure delay),
the socket receive queue (bounded: a full queue drops the packet and the kernel counts a
``RcvbufError``), then one of ``c`` worker threads, which shares ``m`` CPU cores with the others
under a CFS-like scheduler, does the five steps of the service time ``X`` (eq. 4.1) and sends the
message on.  Each step ends at one of the instants the thesis recorded, which go to the timeline.

SimPy pieces: a :class:`simpy.PriorityResource` of capacity 1 per core is the CFS run queue
(requests sorted by virtual runtime, ties first come first served); a thread blocked in
``recvfrom`` waits on a :class:`simpy.Event` in the socket's wait queue; time slices, wake-up
preemption and idle balancing are :meth:`simpy.Process.interrupt` calls.  All random numbers
come pre-drawn in a :class:`~sipperf.sim.workload.Workload`, so both engines can run the same
inputs.  Times are microseconds.
"""
from __future__ import annotations

import math
from collections import deque

import numpy as np
import simpy

from sipperf.sim.params import SimParams, alpha
from sipperf.sim.workload import Workload

#: message types in call order (indices into the per-type parameters)
INVITE, RINGING, OK, ACK, BYE, OK_BYE = range(6)
#: the instant at the end of each of the five steps of X (eq. 4.1)
STEPS = ("t_sockq", "t_sip_in", "t_sip_c", "t_sip_out", "t_dep")
#: outcome of a message (the fast twin uses the same codes)
SERVED, DROPPED = 1, 2


class Socket:
    """The proxy's UDP socket: a bounded FIFO of packets and a wait queue of blocked threads."""

    def __init__(self, env: simpy.Environment, capacity_pkts: float, capacity_bytes: float):
        self.env = env
        self.packets: deque[tuple[int, int]] = deque()   # (message, bytes it is charged)
        self.capacity_pkts, self.capacity_bytes = capacity_pkts, capacity_bytes
        self.bytes = 0
        self.sleepers: deque[simpy.Event] = deque()      # threads blocked in recvfrom()

    def deliver(self, m: int, truesize: int) -> bool:
        """The softirq appends packet ``m``; False if the queue is full (the packet is dropped)."""
        if len(self.packets) >= self.capacity_pkts or self.bytes + truesize > self.capacity_bytes:
            return False
        self.packets.append((m, truesize))
        self.bytes += truesize
        if self.sleepers:                      # wake one blocked thread (an exclusive wake-up)
            self.sleepers.popleft().succeed()
        return True

    def recv(self) -> int:
        """``recvfrom()`` on a non-empty queue: the packet at the head."""
        m, truesize = self.packets.popleft()
        self.bytes -= truesize
        return m

    def sleep(self) -> simpy.Event:
        """Block in ``recvfrom()``: an event that succeeds when a packet wakes this thread."""
        ev = self.env.event()
        self.sleepers.append(ev)
        return ev


class Core:
    """A CPU core: one thread runs, the others wait in ``cpu.queue`` by virtual runtime."""

    def __init__(self, env: simpy.Environment, cid: int, socket: int):
        self.cid, self.socket = cid, socket
        self.cpu = simpy.PriorityResource(env, capacity=1)
        self.running: Thread | None = None
        self.run_start = 0.0        # when the running thread got the core
        self.run = 0                # serial number of the current run (slice timers check it)
        self.timer_for = -1         # the run a slice timer is armed for
        self.min_vruntime = 0.0
        self.last: Thread | None = None   # who ran here last (another thread pays a switch)
        self.threads = 0            # threads that live on this core

    def idle(self) -> bool:
        return self.running is None and not self.cpu.queue


class Thread:
    """A worker thread: block in recvfrom, wake up, get a core, serve packets, block again."""

    def __init__(self, proxy: "Proxy", tid: int, core: Core):
        self.proxy, self.env, self.tid, self.core = proxy, proxy.env, tid, core
        self.vruntime = 0.0
        self.last_ran = -math.inf
        self.penalty = 0.0          # cache penalty of a migration, paid at the next switch-in
        self.req = None             # our request on core.cpu (waiting or granted)
        self.msg = -1               # message in service, -1 none
        core.threads += 1
        self.process = self.env.process(self.life())

    def life(self):
        """Sleep in recvfrom(); once woken and on a core, serve packets while the socket has any,
        letting the next thread run whenever the time slice is used up."""
        while True:
            yield from self.block()                        # recvfrom() finds nothing: sleep
            while self.proxy.socket.packets:
                if self.core.cpu.queue and self.slice_used():
                    self.proxy.preemptions += 1
                    yield from self.requeue()              # slice used up: the next one's turn
                    continue
                yield from self.serve(self.proxy.socket.recv())

    def slice_used(self) -> bool:
        n = len(self.core.cpu.queue) + 1                   # runnable threads on this core
        return self.env.now - self.core.run_start >= self.proxy.time_slice(n)

    # -- the service time X, step by step -------------------------------------------------------
    def serve(self, m: int):
        """The five steps of X (eq. 4.1); each ends at one of the thesis's instants."""
        p = self.proxy
        self.msg = m
        p.t_start[m] = self.env.now
        for name, work in zip(STEPS, p.steps_of(m, self.core)):
            yield from self.compute(work)
            p.instants[name][m] = self.env.now
        self.msg = -1
        p.depart(m)

    def compute(self, work: float):
        """Use ``work`` µs of CPU; when preempted, wait for the core again and finish the rest."""
        while work > 0:
            start = self.env.now
            try:
                yield self.env.timeout(work)
                return
            except simpy.Interrupt:
                work -= self.env.now - start
                yield from self.requeue()

    # -- the scheduler, from the thread's side -----------------------------------------------------
    def block(self):
        """Give the core up (if we hold one), sleep until a packet wakes us, then get a core."""
        if self.req is not None:
            self.leave_core()
        yield self.proxy.socket.sleep()
        self.wake_up()
        yield from self.get_core()

    def wake_up(self):
        """try_to_wake_up(): pick a core, place our vruntime, maybe preempt the running thread."""
        p, now, sp = self.proxy, self.env.now, self.proxy.sp
        if p.multicore and self.core.running is not None and now - self.last_ran >= sp.migration_cost_us:
            idle = p.idle_core_near(self.core)             # a cache-cold thread may move
            if idle is not None:
                self.migrate(idle)
        core = self.core
        self.vruntime = max(self.vruntime, core.min_vruntime - sp.latency_us / 2)   # sleeper credit
        self.req = core.cpu.request(priority=self.vruntime)
        curr = core.running
        if curr is not None:
            if curr.vruntime + (now - core.run_start) - self.vruntime > sp.wakeup_granularity_us:
                p.preemptions += 1
                curr.process.interrupt("wake-up preemption")
            else:
                p.arm_slice_timer(core)

    def get_core(self):
        """Wait on the run queue until the core is ours, then pay the cost of switching in."""
        while True:
            try:
                yield self.req
            except simpy.Interrupt as irq:
                if not isinstance(irq.cause, Core):        # stale: we left that core already
                    continue
                if self.req.triggered:                     # an idle core pulls us over
                    self.core.cpu.release(self.req)
                else:
                    self.req.cancel()
                self.migrate(irq.cause)
                self.req = self.core.cpu.request(priority=self.vruntime)
                continue
            cost = self.proxy.on_core(self, self.core)
            try:
                if cost:
                    yield self.env.timeout(cost)
                return
            except simpy.Interrupt:                        # preempted while switching in
                yield from self.requeue()
                return

    def requeue(self):
        """Back on the run queue: ask for the core again, then let go of it."""
        core = self.core
        self.vruntime += self.env.now - core.run_start
        self.last_ran = self.env.now
        old, self.req = self.req, core.cpu.request(priority=self.vruntime)
        core.running = None
        core.cpu.release(old)
        yield from self.get_core()

    def leave_core(self):
        """Block: the core goes to the next thread, or, if none waits here, pulls one over."""
        core = self.core
        self.vruntime += self.env.now - core.run_start
        self.last_ran = self.env.now
        core.running = None
        core.cpu.release(self.req)
        self.req = None
        if not core.cpu.queue and self.proxy.multicore:
            self.proxy.balance(core)

    def migrate(self, dst: Core):
        src = self.core
        src.threads -= 1
        dst.threads += 1
        self.proxy.per_socket[src.socket] -= 1
        self.proxy.per_socket[dst.socket] += 1
        self.core = dst
        sp = self.proxy.sp
        self.penalty += sp.migrate_us if src.socket == dst.socket else sp.migrate_cross_us
        self.proxy.migrations += 1


class Proxy:
    """The whole path: receive, socket queue, threads on cores, send; it records every instant."""

    def __init__(self, env: simpy.Environment, p: SimParams, wl: Workload):
        self.env, self.p, self.wl, self.sp = env, p, wl, p.sched
        s, k = p.service, p.kernel
        if k.overhead_scope not in ("core", "socket"):
            raise ValueError(f"unknown overhead_scope {k.overhead_scope!r} (core, socket)")
        self.alpha = float(s.alpha_fixed) if s.alpha_fixed is not None else float(
            alpha(p.offered_pps(), s.alpha_profile))
        self.mtype = wl.mtype
        n = wl.n_msgs
        self.sip = p.workload.mode == "sip"
        self.outcome = np.zeros(n, np.uint8)
        self.t_stack, self.t_start = np.full(n, np.nan), np.full(n, np.nan)
        self.instants = {name: np.full(n, np.nan) for name in STEPS}
        self.t_dep = self.instants["t_dep"]
        self.relayed: dict[int, simpy.Event] = {}         # messages in the proxy
        self.nlive = np.zeros(n, np.int64)
        self.extra = np.zeros(n)                           # thread overhead + contention (µs)
        self.n_live = self.max_q = self.preemptions = self.switches = self.migrations = self.events = 0
        self.socket = Socket(env, k.rcvbuf_pkts if k.rcvbuf_pkts is not None else math.inf,
                             k.rcvbuf_bytes if k.rcvbuf_bytes is not None else math.inf)
        self.skb = [b + k.skb_overhead_b for b in s.size_b]
        self.cores = [Core(env, i, i // max(1, k.cores_per_socket)) for i in range(max(1, k.cores))]
        self.multicore = len(self.cores) > 1
        self.per_socket = [0] * (self.cores[-1].socket + 1)
        self.threads = []
        for i in range(max(1, k.threads)):
            core = self.cores[i % len(self.cores)]
            self.per_socket[core.socket] += 1
            self.threads.append(Thread(self, i, core))
        self.by_process = {t.process: t for t in self.threads}

    # -- the receive path --------------------------------------------------------------------
    def send(self, m: int) -> simpy.Event:
        """A UA sends message ``m``: it reaches the device layer now.  The returned event succeeds
        with True when the proxy has relayed it (t_dep), False when it was dropped."""
        relayed = self.env.event()
        self.env.process(self.receive(m, relayed))
        return relayed

    def receive(self, m: int, relayed: simpy.Event):
        k = self.mtype[m]
        yield self.env.timeout(self.p.service.k_stack_us[k])      # NIC, IP, UDP: K_stack
        self.t_stack[m] = self.env.now
        if self.sip and k == INVITE:
            self.n_live += 1
        if not self.socket.deliver(m, self.skb[k]):
            self.outcome[m] = DROPPED                          # RcvbufErrors
            if self.sip and k in (INVITE, OK, BYE, OK_BYE):    # the call cannot go on
                self.n_live -= 1
            relayed.succeed(False)
            return
        self.relayed[m] = relayed
        self.max_q = max(self.max_q, len(self.socket.packets))

    def depart(self, m: int):
        self.outcome[m] = SERVED
        if self.sip and self.mtype[m] == OK_BYE:
            self.n_live -= 1
        self.relayed.pop(m).succeed(True)

    # -- the work of one message --------------------------------------------------------------
    def steps_of(self, m: int, core: Core) -> list[float]:
        """K^s_sockq, K_copy, T^1_sip, T^2_sip, K_snd of message ``m`` served on ``core`` (µs):
        eq. 4.1 with alpha (eq. 4.4), T_sip growing with the live calls, plus the per-thread
        overhead theta (m - 1) and the contention kappa (busy other cores) X in T_sip."""
        s, k = self.p.service, self.p.kernel
        i, u = self.mtype[m], self.wl.u[m]
        self.nlive[m] = self.n_live
        ks, copy, snd = u * self.alpha * s.ks_base_us[i], u * s.k_copy_us, u * s.k_snd_us[i]
        tsip = u * s.t_sip_us[i] * (1.0 + s.t_sip_growth_per_call * self.n_live)
        sharing = core.threads if k.overhead_scope == "core" else self.per_socket[core.socket]
        extra = k.thread_overhead_us * (sharing - 1)
        if k.contention and self.multicore:
            busy = sum(1 for c in self.cores if c is not core and c.running is not None
                       and c.running.msg >= 0)
            extra += k.contention * busy * (ks + copy + tsip + snd)
        self.extra[m] = extra
        tsip += extra
        t1 = tsip * s.t_sip1_share
        return [ks, copy, t1, tsip - t1, snd]

    # -- the scheduler, from the cores' side ---------------------------------------------------
    def time_slice(self, n: int) -> float:
        """CFS slice with ``n`` runnable threads: max(latency / n, min_granularity)."""
        return math.inf if n <= 1 else max(self.sp.latency_us / n, self.sp.min_granularity_us)

    def on_core(self, thr: Thread, core: Core) -> float:
        """``thr`` got ``core``: a new run starts.  Returns the switch-in cost (µs)."""
        core.run += 1
        core.running, core.run_start = thr, self.env.now
        cost = thr.penalty
        if core.last is not None and core.last is not thr:          # a context switch
            cost += self.sp.cs_us + self.sp.cache_us_per_thread * max(core.threads - 1, 0)
            self.switches += 1
        thr.penalty = 0.0
        core.last = thr
        queue = core.cpu.queue
        lowest = min(thr.vruntime, queue[0].priority) if queue else thr.vruntime
        core.min_vruntime = max(core.min_vruntime, lowest)
        if queue:
            self.arm_slice_timer(core)
        return cost

    def arm_slice_timer(self, core: Core):
        if core.timer_for != core.run and core.running is not None:
            core.timer_for = core.run
            at = core.run_start + self.time_slice(len(core.cpu.queue) + 1)
            self.env.process(self.slice_timer(core, core.run, max(at, self.env.now)))

    def slice_timer(self, core: Core, run: int, at: float):
        """At the end of the slice, preempt the running thread if another one is waiting.
        (The zero timeout lets work that ends at the same instant finish first.)"""
        yield self.env.timeout(at - self.env.now)
        yield self.env.timeout(0)
        if core.run == run and core.running is not None and core.cpu.queue:
            self.preemptions += 1
            core.running.process.interrupt("slice end")

    def idle_core_near(self, core: Core) -> Core | None:
        """select_task_rq(): an idle core, on the same processor first."""
        others = [c for c in self.cores if c is not core and c.idle()]
        same = [c for c in others if c.socket == core.socket]
        return (same or others or [None])[0]

    def balance(self, core: Core):
        """Idle balancing: pull the cache-cold waiting thread of least vruntime to ``core``."""
        best = None
        for c in self.cores:
            if c is core:
                continue
            for req in c.cpu.queue:
                thr = self.by_process[req.proc]
                if self.env.now - thr.last_ran >= self.sp.migration_cost_us and (
                        best is None or thr.vruntime < best.vruntime):
                    best = thr
        if best is not None:
            best.process.interrupt(core)


# -- the user agents ---------------------------------------------------------------------------
def call(env: simpy.Environment, proxy: Proxy, wl: Workload, c: int, net2_us: float, hold_us: float):
    """One call through the proxy (thesis Fig. 2.2).  A UA answers once the proxy has relayed
    the message it answers; a dropped INVITE, 200 or BYE ends the call (no retransmissions)."""
    first = 6 * c
    if not (yield proxy.send(first + INVITE)):
        return
    yield env.timeout(net2_us + wl.uas_react_us[c])          # to the UAS and back
    proxy.send(first + RINGING)
    yield env.timeout(wl.uas_gap_us[c])
    if not (yield proxy.send(first + OK)):
        return
    yield env.timeout(net2_us + wl.uac_react_us[c])
    proxy.send(first + ACK)
    yield env.timeout(hold_us)                                 # the call holding time
    if not (yield proxy.send(first + BYE)):
        return
    yield env.timeout(net2_us + wl.uas_bye_react_us[c])
    yield proxy.send(first + OK_BYE)


def uac(env: simpy.Environment, proxy: Proxy, wl: Workload):
    """SIPp's UAC: start call ``c`` at ``t0[c]``."""
    w = proxy.p.workload
    for c in range(wl.n_calls):
        yield env.timeout(wl.t0_us[c] - env.now)
        env.process(call(env, proxy, wl, c, 2.0 * w.net_us, w.holding_us))


def packets(env: simpy.Environment, proxy: Proxy, wl: Workload):
    """Validation workload: independent packets of random type at ``t0[m]``."""
    for m in range(wl.n_msgs):
        yield env.timeout(wl.t0_us[m] - env.now)
        proxy.send(m)


def run_model(p: SimParams, wl: Workload, count_events: bool = False) -> Proxy:
    """Run the model to the end; the finished :class:`Proxy` holds every instant."""
    env = simpy.Environment()
    proxy = Proxy(env, p, wl)
    env.process((uac if proxy.sip else packets)(env, proxy, wl))
    if count_events:                  # the same run, one event at a time (for bench/sim.py)
        while env.peek() < math.inf:
            env.step()
            proxy.events += 1
    else:
        env.run()
    return proxy
