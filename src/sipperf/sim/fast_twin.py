"""The fast twin of the kernel-path model: the same rules, a hand-written event loop.

:mod:`sipperf.sim.model` is the model the book teaches, in SimPy processes.  Parameter sweeps
and calibration fits need millions of messages, so this module runs the *same* model as a plain
discrete-event loop: a heap of ``(time, seq, handler, value, gen)`` tuples, no processes, no
resources.  It is checked against the SimPy model statistically on a grid of cases
(:mod:`sipperf.sim.calibration.twin_check`, ``datasets/precomputed/sim_twin_check.csv``) and event by event
on hand-worked schedules (``tests/test_sim_engine.py``, run on both engines).

The rules, as in the SimPy model: NIC -> K_stack (pure delay) -> finite socket receive queue
(packets, or bytes like SO_RCVBUF; a full queue drops, thesis §6.2) -> c worker threads on m
cores under a CFS-like scheduler (:mod:`sipperf.sim.scheduler`: slices, wake-up preemption with
the least-vruntime thread running next, migration, idle pulls, switch costs) -> per message
``X = alpha(lambda) K^{s,base}_sockq + K_copy + T^1_sip + T^2_sip + K_snd`` (eq. 4.1, 4.4),
with T_sip growing with the number of live calls (§4.2.2).  A woken thread dequeues its packet
once it has switched in.

Speed: a message costs two events (arrival at t_stack, service end) plus the scheduler's slice
ticks and the stale ends of preempted runs; randomness is pre-drawn in numpy arrays, instants go
to preallocated lists, and the scheduler's decisions are inlined with precomputed tables.  A
preempted message keeps the (start, work-done) of each run segment so its instants can be placed
on the wall clock afterwards (:func:`sipperf.sim.run._place_instants`).
"""
from __future__ import annotations

import gc
from bisect import insort
from collections import deque
from heapq import heappop, heappush
from itertools import count

from sipperf.sim import scheduler as S
from sipperf.sim.params import SimParams, alpha
from sipperf.sim.workload import Workload

NAN = float("nan")
#: outcome codes per message
NOT_SENT, SERVED, DROPPED, IN_FLIGHT = 0, 1, 2, 3


class FastTwin:
    """One simulation run; call :meth:`run`, then read the arrays."""

    def __init__(self, p: SimParams, wl: Workload):
        self.p = p
        self.wl = wl
        self.now = 0.0
        s, k, sp = p.service, p.kernel, p.sched
        self.sp = sp
        a = float(s.alpha_fixed) if s.alpha_fixed is not None else float(
            alpha(p.offered_pps(), s.alpha_profile))
        self.alpha = a
        # per-type fixed part and T_sip part of X (multiplied by u per message)
        self.fixed_us = [a * s.ks_base_us[i] + s.k_copy_us + s.k_snd_us[i] for i in range(6)]
        self.tsip_us = list(s.t_sip_us)
        self.growth = float(s.t_sip_growth_per_call)
        self.kstack = list(s.k_stack_us)
        self.size = list(s.size_b)
        self.skb = [b + k.skb_overhead_b for b in s.size_b]
        self.cap_pkts = k.rcvbuf_pkts if k.rcvbuf_pkts is not None else 1 << 62
        self.cap_bytes = k.rcvbuf_bytes if k.rcvbuf_bytes is not None else 1 << 62
        self.byte_cap = k.rcvbuf_bytes is not None   # else q_bytes is not tracked (always 0)
        n = wl.n_msgs
        self.t_stack = [NAN] * n
        self.t_start = [NAN] * n     # first productive instant of service (single segment)
        self.t_dep = [NAN] * n
        self.nlive = [0] * n
        self.extra = [0.0] * n       # thread overhead + contention added to T_sip (us)
        self.theta = float(k.thread_overhead_us)
        self.kappa = float(k.contention)
        self.outcome = bytearray(n)
        self.segs: dict[int, list[tuple[float, float]]] = {}
        self.mtype = wl.mtype.tolist()
        self.u = wl.u.tolist()
        self.q: deque[int] = deque()
        self.q_bytes = 0
        self.waiters: deque[S.Thread] = deque()
        nc = max(1, int(k.cores))
        self.cores = [S.Core(i, i // max(1, k.cores_per_socket)) for i in range(nc)]
        self.threads = []
        nthr = max(1, int(k.threads))
        #: threads per processor (``Core.socket``); with overhead_scope="socket" kept up to date
        #: on cross-socket migration
        self.sock_n = [0] * (self.cores[-1].socket + 1)
        for i in range(nthr):
            c = self.cores[i % nc]
            t = S.Thread(i, c)
            c.nthreads += 1
            self.sock_n[c.socket] += 1
            self.threads.append(t)
            self.waiters.append(t)
        if k.overhead_scope not in ("core", "socket"):
            raise ValueError(f"unknown overhead_scope {k.overhead_scope!r} (core, socket)")
        #: thread overhead theta * (m - 1) with m = threads on the message's core ("core") or on
        #: its processor ("socket": the cores of one E5540 share its cache, thesis Fig. 7.1)
        self.by_socket = k.overhead_scope == "socket"
        self.n_live = 0
        self.max_q = 0
        self.events = 0
        self.preemptions = 0
        self.switches = 0
        self.migrations = 0
        self.sip = wl.mtype is not None and p.workload.mode == "sip"
        w = p.workload
        self.net2 = 2.0 * w.net_us
        self.hold = w.holding_us
        self.t0 = wl.t0_us.tolist()
        self.uas_react = wl.uas_react_us.tolist()
        self.uas_gap = wl.uas_gap_us.tolist()
        self.uac_react = wl.uac_react_us.tolist()
        self.uas_bye = wl.uas_bye_react_us.tolist()
        # --- hot-path constants (each is the value the scheduler functions would compute)
        self.multicore = nc > 1
        self.slice_us = S.slice_table_us(sp, nthr + 1)                 # by nr_running
        self.sw_base_us = S.switch_base_table_us(sp, nthr)             # by core.nthreads
        # theta_n[m]: the overhead with m threads sharing the cache (-> Core.ovh, set_overhead)
        self.theta_n = [self.theta * (m - 1) for m in range(nthr + 1)]
        self.half_lat = sp.latency_us / 2
        self.wake_gran = sp.wakeup_granularity_us
        self.mig_cost = sp.migration_cost_us
        self.n_calls = wl.n_calls
        self.n_msgs = n
        self.contend = bool(self.kappa) and self.multicore
        for c in self.cores:
            c.others = tuple(o for o in self.cores if o is not c)
        self.set_overhead(self.cores)

    def set_overhead(self, cores) -> None:
        """``Core.ovh``, the thread overhead each message served on a core gets: theta * (m - 1) with
        m the threads on the core (``overhead_scope="core"``) or on its processor ("socket").  Called
        at the start and after every migration (for the cores whose m may have changed)."""
        theta_n, sock_n = self.theta_n, self.sock_n
        if self.by_socket:
            for c in cores:
                c.ovh = theta_n[sock_n[c.socket]]
        else:
            for c in cores:
                c.ovh = theta_n[c.nthreads]

    # ---------------------------------------------------------------- the engine
    def run(self) -> None:
        """Run the model to the end.

        The event handlers are closures over local variables (cell loads are cheaper than
        ``self.`` attribute loads on this hot path); counters are written back to ``self`` at the
        end.  Every push is ``heappush(queue, (now + (t - now), 0, next(eid), handler, value, gen))``:
        events run in time order, ties in the order they were scheduled (as SimPy's would).
        ``gen`` is the core generation an end/tick event belongs to (a stale event is ignored).
        """
        queue: list = []
        eid = count()
        now_ = 0.0                      # the clock, advanced by the loop below
        push = heappush
        sp = self.sp
        migrate = S.migrate
        pull_candidate = S.pull_candidate
        by_vruntime = S.VRUNTIME
        # per-message data (preallocated lists, shared with self)
        t_stack, t_start, t_dep = self.t_stack, self.t_start, self.t_dep
        nlive, extra_us, outcome, segs = self.nlive, self.extra, self.outcome, self.segs
        mtype, u, t0 = self.mtype, self.u, self.t0
        uas_react, uas_gap, uac_react, uas_bye = self.uas_react, self.uas_gap, self.uac_react, self.uas_bye
        # constants
        fixed_us, tsip_us, growth = self.fixed_us, self.tsip_us, self.growth
        kstack, skb, cap_pkts, cap_bytes = self.kstack, self.skb, self.cap_pkts, self.cap_bytes
        byte_cap = self.byte_cap
        kappa, contend = self.kappa, self.contend
        by_socket, sock_n, set_overhead = self.by_socket, self.sock_n, self.set_overhead
        slice_us, sw_base_us = self.slice_us, self.sw_base_us
        half_lat, wake_gran, mig_cost = self.half_lat, self.wake_gran, self.mig_cost
        net2, hold, sip, multicore = self.net2, self.hold, self.sip, self.multicore
        n_calls, n_msgs, cores = self.n_calls, self.n_msgs, self.cores
        q, waiters = self.q, self.waiters
        # state written back at the end
        n_live, q_bytes, max_q = self.n_live, self.q_bytes, self.max_q
        preemptions, switches, migrations = self.preemptions, self.switches, self.migrations

        def send(m: int, t_arr: float) -> None:
            """Message ``m`` reaches the device layer at ``t_arr``; it is enqueued after K_stack."""
            outcome[m] = IN_FLIGHT
            now = now_
            t = t_arr + kstack[mtype[m]]
            if t < now:  # a negative delay from the inputs
                raise ValueError(f"message {m} would arrive in the past ({t} < {now} us)")
            push(queue, (now + (t - now), 0, next(eid), arrive, m, 0))

        # ------------------------------------------------------------ arrivals / socket queue
        def arrive(m: int, _gen: int) -> None:
            """Message ``m`` leaves K_stack: next INVITE, socket queue (or drop), wake-up."""
            nonlocal n_live, q_bytes, max_q, preemptions, migrations
            now = now_
            t_stack[m] = now
            k = mtype[m]
            if sip:
                if k == 0:
                    n_live += 1
                    c = m // 6 + 1
                    if c < n_calls:         # the next call's INVITE
                        send(6 * c, t0[c])
            elif m + 1 < n_msgs:
                send(m + 1, t0[m + 1])
            if len(q) >= cap_pkts or (byte_cap and q_bytes + skb[k] > cap_bytes):
                outcome[m] = DROPPED
                if sip and k in (0, 2, 4, 5):  # the call cannot continue (no retransmissions)
                    n_live -= 1
                return
            q.append(m)
            if byte_cap:
                q_bytes += skb[k]
            if len(q) > max_q:
                max_q = len(q)
            if not waiters:
                return
            # ---- wake one blocked thread (try_to_wake_up)
            thr = waiters.popleft()
            core = thr.core
            if multicore and core.curr is not None and now - thr.last_ran >= mig_cost:
                # select_task_rq(): an idle core, same processor first (as S.select_core)
                dst = None
                for c in core.others:
                    if c.curr is None and not c.rq:
                        if c.socket == core.socket:
                            dst = c
                            break
                        if dst is None:
                            dst = c
                if dst is not None:
                    migrate(sp, thr, dst)
                    migrations += 1
                    if not by_socket:
                        set_overhead((core, dst))
                    elif dst.socket != core.socket:
                        sock_n[core.socket] -= 1
                        sock_n[dst.socket] += 1
                        set_overhead(cores)
                    core = dst
            v = core.min_vr - half_lat        # place_entity() (as S.place_vruntime)
            if v > thr.vruntime:
                thr.vruntime = v
            curr = core.curr
            if curr is None:
                run_on(core, thr, now)
            elif curr.vruntime + (now - core.run_start) - thr.vruntime > wake_gran:
                deschedule(core, now)         # wake-up preemption (S.should_preempt_on_wakeup):
                preemptions += 1              # the thread of least vruntime runs next
                insort(core.rq, thr, key=by_vruntime)
                pick(core, now)
            else:
                insort(core.rq, thr, key=by_vruntime)
                if core.tick_gen != core.gen:
                    arm_tick(core, now)

        # ------------------------------------------------------------ scheduler actions
        def arm_tick(core: S.Core, now: float) -> None:
            """A slice-end event for the current run of ``core`` (once per run)."""
            if core.tick_gen == core.gen or core.curr is None:
                return
            t = core.run_start + slice_us[len(core.rq) + 1]   # S.time_slice_us
            if not t > now:
                t = now
            gen = core.gen
            core.tick_gen = gen
            push(queue, (now + (t - now), 1, next(eid), tick, core, gen))

        def run_on(core: S.Core, thr: S.Thread, now: float) -> None:
            """Switch ``core`` to ``thr``; it takes a packet (or resumes one) and its end is scheduled.

            A thread without a packet that must first pay a switch gets an end event at the end of
            the switch, where :func:`end` dequeues (recvfrom() runs once the thread is on the CPU)."""
            nonlocal switches, q_bytes
            last = core.last
            pen = thr.penalty_us
            if last is thr or last is None:
                eff = now + pen
            else:                                    # S.switch_cost_us
                eff = now + (sw_base_us[core.nthreads] + pen)
                switches += 1
            if pen:
                thr.penalty_us = 0.0
            core.curr = thr
            gen = core.gen + 1
            core.gen = gen
            core.run_start = now
            core.eff = eff
            core.last = thr
            rq = core.rq
            vr = thr.vruntime
            if vr > core.min_vr:                      # min_vruntime only moves forward:
                if rq:                                # max(min_vr, min(curr, leftmost))
                    o = rq[0].vruntime                # the run queue is sorted by vruntime
                    if o < vr:
                        vr = o
                if vr > core.min_vr:
                    core.min_vr = vr
            m = thr.pkt
            if m < 0:
                if q and eff == now:
                    m = q.popleft()
                    k = mtype[m]
                    if byte_cap:
                        q_bytes -= skb[k]
                    thr.pkt = m
                    # ---- service work X of m on this core (eq. 4.1 + thread and contention
                    # terms); the same code is in end()
                    nl = n_live
                    nlive[m] = nl
                    x = u[m] * (fixed_us[k] + tsip_us[k] * (1.0 + growth * nl))
                    ex = core.ovh
                    if contend:
                        busy = 0
                        for c in core.others:
                            cu = c.curr
                            if cu is not None and cu.pkt >= 0:
                                busy += 1
                        ex += kappa * busy * x
                    if ex:
                        extra_us[m] = ex
                    rem = x + ex
                    # ----
                    thr.remaining = rem
                    thr.done = 0.0
                    t_start[m] = eff
                    t = eff + rem
                else:  # switch first (end() then dequeues), or woken for nothing: re-block
                    t = eff
            else:
                seg = segs.get(m)
                if seg is None:
                    segs[m] = [(t_start[m], 0.0), (eff, thr.done)]
                else:
                    seg.append((eff, thr.done))
                t = eff + thr.remaining
            push(queue, (now + (t - now), 0, next(eid), end, core, gen))
            if rq:
                arm_tick(core, now)

        def deschedule(core: S.Core, now: float) -> None:
            """Take the running thread off ``core``, book its progress, put it on the run queue."""
            thr = core.curr
            thr.vruntime += now - core.run_start
            prog = now - core.eff
            if thr.remaining < prog:
                prog = thr.remaining
            m = thr.pkt
            if prog > 0 and m >= 0:
                thr.remaining -= prog
                thr.done += prog
                if m not in segs:
                    segs[m] = [(t_start[m], 0.0)]
            thr.last_ran = now
            core.curr = None
            core.gen += 1
            insort(core.rq, thr, key=by_vruntime)

        def tick(core: S.Core, gen: int) -> None:
            """Slice end: preempt the running thread if another one is waiting."""
            nonlocal preemptions
            if core.gen != gen or not core.rq:
                return
            now = now_
            deschedule(core, now)
            preemptions += 1
            pick(core, now)

        def pick(core: S.Core, now: float) -> None:
            """pick_next_task(): least vruntime, else pull a cache-cold thread, else idle."""
            nonlocal migrations
            rq = core.rq
            if rq:
                thr = rq.pop(0)     # least vruntime, the earliest queued among equals
                run_on(core, thr, now)
                return
            if multicore:
                for c in core.others:
                    if c.rq:
                        thr = pull_candidate(sp, cores, core, now)
                        if thr is not None:
                            src = thr.core
                            src.rq.remove(thr)
                            migrate(sp, thr, core)
                            migrations += 1
                            if not by_socket:
                                set_overhead((src, core))
                            elif src.socket != core.socket:
                                sock_n[src.socket] -= 1
                                sock_n[core.socket] += 1
                                set_overhead(cores)
                            run_on(core, thr, now)
                            return
                        break
            core.curr = None
            core.gen += 1

        def end(core: S.Core, gen: int) -> None:
            """The running thread finished its message (or its switch-in, or a spurious wake-up)."""
            nonlocal n_live, q_bytes, preemptions
            if core.gen != gen:
                return
            now = now_
            thr = core.curr
            m = thr.pkt
            if m >= 0:
                # ---- departure; the UAs answer (call flow, Fig. 2.2)
                t_dep[m] = now
                outcome[m] = SERVED
                thr.pkt = -1
                if sip:
                    k = m % 6
                    if k == 0:      # INVITE forwarded -> UAS answers 180, then 200
                        c = m // 6
                        t1 = now + net2 + uas_react[c]
                        send(m + 1, t1)
                        send(m + 2, t1 + uas_gap[c])
                    elif k == 2:    # 200 forwarded -> UAC sends ACK, and BYE after the holding time
                        c = m // 6
                        t1 = now + net2 + uac_react[c]
                        send(m + 1, t1)
                        send(m + 2, t1 + hold)
                    elif k == 4:    # BYE forwarded -> UAS answers 200
                        send(m + 1, now + net2 + uas_bye[m // 6])
                    elif k == 5:
                        n_live -= 1
            # recvfrom() again: more work -> keep running unless the slice is used up
            rq = core.rq
            if q and not (rq and now - core.run_start >= slice_us[len(rq) + 1]):
                m = q.popleft()
                k = mtype[m]
                if byte_cap:
                    q_bytes -= skb[k]
                thr.pkt = m
                # ---- service work X of m on this core; the same code is in run_on()
                nl = n_live
                nlive[m] = nl
                x = u[m] * (fixed_us[k] + tsip_us[k] * (1.0 + growth * nl))
                ex = core.ovh
                if contend:
                    busy = 0
                    for c in core.others:
                        cu = c.curr
                        if cu is not None and cu.pkt >= 0:
                            busy += 1
                    ex += kappa * busy * x
                if ex:
                    extra_us[m] = ex
                rem = x + ex
                # ----
                thr.remaining = rem
                thr.done = 0.0
                t_start[m] = now
                core.eff = now
                t = now + rem
                push(queue, (now + (t - now), 0, next(eid), end, core, gen))
                return
            thr.vruntime += now - core.run_start
            thr.last_ran = now
            core.curr = None
            core.gen += 1
            if q:               # preempted at the slice end: stays runnable
                insort(rq, thr, key=by_vruntime)
                preemptions += 1
            else:               # blocks in recvfrom
                waiters.append(thr)
                if not rq:      # pick() without the call when nothing can be run or pulled
                    if multicore:
                        for c in core.others:
                            if c.rq:
                                break
                        else:
                            core.gen += 1
                            return
                    else:
                        core.gen += 1
                        return
            pick(core, now)

        if n_msgs:
            send(0, t0[0])
        # The loop makes no reference cycles (events, tuples and run segments are freed or kept
        # by reference counting), so the cyclic GC only walks the growing per-message data --
        # ~15 % of the loop under overload.  It is paused for the loop and restored after.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        pop = heappop
        events = 0
        try:
            while queue:
                now_, _, _, handler, value, gen = pop(queue)
                handler(value, gen)
                events += 1
        finally:
            if gc_was_enabled:
                gc.enable()
        self.now = now_
        self.events = events
        self.n_live, self.q_bytes, self.max_q = n_live, q_bytes, max_q
        self.preemptions, self.switches, self.migrations = preemptions, switches, migrations
