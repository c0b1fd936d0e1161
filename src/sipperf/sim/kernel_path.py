"""The instrumented kernel path as a SimPy model (thesis Fig. 3.3, §3.3, eq. 3.1-3.3, 4.1).

NIC -> K_stack (pure delay, §4.3: "queuing at the ring buffer negligible") -> finite socket
receive queue (packets, or bytes like SO_RCVBUF; a full queue drops and counts RcvErrors,
§6.2) -> c worker threads on n cores, scheduled by :mod:`sipperf.sim.scheduler` -> per
message ``X = alpha(lambda) K^{s,base}_sockq + K_copy + T^1_sip + T^2_sip + K_snd`` (eq. 4.1,
4.4), with T_sip growing with the number of live calls (§4.2.2).

Speed: there are no per-packet processes.  Every event is a bare :class:`simpy.events.Timeout`
with one plain callback; a message costs two events (arrival at t_stack, service end);
randomness is pre-drawn in numpy arrays and instants go to preallocated lists.  A preempted
message keeps the (start, work-done) of each run segment so its instants can be placed on the
wall clock afterwards.
"""
from __future__ import annotations

from collections import deque

import numpy as np
import simpy
from simpy.events import Timeout

from sipperf.sim import scheduler as S
from sipperf.sim.params import SimParams, alpha
from sipperf.sim.workload import Workload

NAN = float("nan")
#: outcome codes per message
NOT_SENT, SERVED, DROPPED, IN_FLIGHT = 0, 1, 2, 3


class KernelPath:
    """One simulation run; call :meth:`run`, then read the arrays."""

    def __init__(self, p: SimParams, wl: Workload):
        self.p = p
        self.wl = wl
        self.env = simpy.Environment()
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
        for i in range(max(1, int(k.threads))):
            c = self.cores[i % nc]
            t = S.Thread(i, c)
            c.nthreads += 1
            self.threads.append(t)
            self.waiters.append(t)
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

    # ---------------------------------------------------------------- event plumbing
    def _at(self, t: float, cb, value) -> None:
        ev = Timeout(self.env, t - self.env._now, value)
        ev.callbacks.append(cb)
        self.events += 1

    def _send(self, m: int, t_arr: float) -> None:
        """Message ``m`` reaches the device layer at ``t_arr``; it is enqueued after K_stack."""
        self.outcome[m] = IN_FLIGHT
        self._at(t_arr + self.kstack[self.mtype[m]], self._arrive, m)

    # ---------------------------------------------------------------- arrivals / socket queue
    def _arrive(self, ev) -> None:
        m = ev._value
        now = self.env._now
        self.t_stack[m] = now
        k = self.mtype[m]
        if self.sip:
            if k == 0:
                self.n_live += 1
                c = m // 6 + 1
                if c < self.wl.n_calls:
                    self._send(6 * c, self.t0[c])
        elif m + 1 < self.wl.n_msgs:
            self._send(m + 1, self.t0[m + 1])
        if len(self.q) >= self.cap_pkts or self.q_bytes + self.skb[k] > self.cap_bytes:
            self.outcome[m] = DROPPED
            if self.sip and k in (0, 2, 4, 5):  # the call cannot continue (no retransmissions)
                self.n_live -= 1
            return
        self.q.append(m)
        self.q_bytes += self.skb[k]
        if len(self.q) > self.max_q:
            self.max_q = len(self.q)
        if self.waiters:
            self._wake(self.waiters.popleft(), now)

    def _dequeue(self) -> int:
        m = self.q.popleft()
        self.q_bytes -= self.skb[self.mtype[m]]
        return m

    def _work(self, m: int, core: S.Core) -> float:
        k = self.mtype[m]
        nl = self.n_live
        self.nlive[m] = nl
        x = self.u[m] * (self.fixed_us[k] + self.tsip_us[k] * (1.0 + self.growth * nl))
        extra = self.theta * (core.nthreads - 1)
        if self.kappa and len(self.cores) > 1:
            busy = 0
            for c in self.cores:
                if c is not core and c.curr is not None and c.curr.pkt >= 0:
                    busy += 1
            extra += self.kappa * busy * x
        if extra:
            self.extra[m] = extra
        return x + extra

    # ---------------------------------------------------------------- departures / workload
    def _departed(self, m: int, now: float) -> None:
        self.t_dep[m] = now
        self.outcome[m] = SERVED
        if not self.sip:
            return
        k = m % 6
        c = m // 6
        if k == 0:      # INVITE forwarded -> UAS answers 180, then 200
            t180 = now + self.net2 + self.uas_react[c]
            self._send(m + 1, t180)
            self._send(m + 2, t180 + self.uas_gap[c])
        elif k == 2:    # 200 forwarded -> UAC sends ACK, and BYE after the holding time
            tack = now + self.net2 + self.uac_react[c]
            self._send(m + 1, tack)
            self._send(m + 2, tack + self.hold)
        elif k == 4:    # BYE forwarded -> UAS answers 200
            self._send(m + 1, now + self.net2 + self.uas_bye[c])
        elif k == 5:
            self.n_live -= 1

    # ---------------------------------------------------------------- scheduler actions
    def _wake(self, thr: S.Thread, now: float) -> None:
        sp = self.sp
        core = S.select_core(sp, self.cores, thr, now) if len(self.cores) > 1 else thr.core
        if core is not thr.core:
            S.migrate(sp, thr, core)
            self.migrations += 1
        thr.vruntime = S.place_vruntime(sp, core, thr)
        thr.state = "runnable"
        curr = core.curr
        if curr is None:
            self._run(core, thr, now)
            return
        curr_vr = curr.vruntime + (now - core.run_start)
        if S.should_preempt_on_wakeup(sp, curr_vr, thr.vruntime):
            self._deschedule(core, now)
            self.preemptions += 1
            self._run(core, thr, now)
        else:
            core.rq.append(thr)
            self._arm_tick(core, now)

    def _arm_tick(self, core: S.Core, now: float) -> None:
        if core.tick_gen == core.gen or core.curr is None:
            return
        sl = S.time_slice_us(self.sp, len(core.rq) + 1)
        t = max(now, core.run_start + sl)
        core.tick_gen = core.gen
        self._at(t, self._tick, (core, core.gen))

    def _run(self, core: S.Core, thr: S.Thread, now: float) -> None:
        over = S.switch_cost_us(self.sp, core, thr)
        if core.last is not thr and core.last is not None:
            self.switches += 1
        thr.penalty_us = 0.0
        core.curr = thr
        core.gen += 1
        core.run_start = now
        core.eff = now + over
        core.last = thr
        thr.state = "running"
        if thr.vruntime > core.min_vr:
            core.min_vr = thr.vruntime if not core.rq else min(thr.vruntime, min(t.vruntime for t in core.rq))
        if thr.pkt < 0:
            if self.q:
                m = self._dequeue()
                thr.pkt = m
                thr.remaining = self._work(m, core)
                thr.done = 0.0
                self.t_start[m] = core.eff
            else:  # woken for nothing (another thread took the packet): pay the switch, re-block
                self._at(core.eff, self._end, (core, core.gen))
                if core.rq:
                    self._arm_tick(core, now)
                return
        else:
            self.segs.setdefault(thr.pkt, [(self.t_start[thr.pkt], 0.0)]).append((core.eff, thr.done))
        self._at(core.eff + thr.remaining, self._end, (core, core.gen))
        if core.rq:
            self._arm_tick(core, now)

    def _deschedule(self, core: S.Core, now: float) -> S.Thread:
        thr = core.curr
        thr.vruntime += now - core.run_start
        prog = min(now - core.eff, thr.remaining)
        if prog > 0 and thr.pkt >= 0:
            thr.remaining -= prog
            thr.done += prog
            if thr.pkt not in self.segs:
                self.segs[thr.pkt] = [(self.t_start[thr.pkt], 0.0)]
        thr.last_ran = now
        thr.state = "runnable"
        core.curr = None
        core.gen += 1
        core.rq.append(thr)
        return thr

    def _tick(self, ev) -> None:
        core, gen = ev._value
        if core.gen != gen or not core.rq:
            return
        now = self.env._now
        self._deschedule(core, now)
        self.preemptions += 1
        self._pick(core, now)

    def _pick(self, core: S.Core, now: float) -> None:
        if core.rq:
            thr = min(core.rq, key=lambda t: t.vruntime)
            core.rq.remove(thr)
            self._run(core, thr, now)
            return
        if len(self.cores) > 1:
            thr = S.pull_candidate(self.sp, self.cores, core, now)
            if thr is not None:
                thr.core.rq.remove(thr)
                S.migrate(self.sp, thr, core)
                self.migrations += 1
                self._run(core, thr, now)
                return
        core.curr = None
        core.gen += 1

    def _end(self, ev) -> None:
        """The running thread finished its message (or its spurious wake-up)."""
        core, gen = ev._value
        if core.gen != gen:
            return
        now = self.env._now
        thr = core.curr
        if thr.pkt >= 0:
            self._departed(thr.pkt, now)
            thr.pkt = -1
        # recvfrom() again: more work -> keep running unless the slice is used up
        if self.q and not (core.rq and now - core.run_start >= S.time_slice_us(self.sp, len(core.rq) + 1)):
            m = self._dequeue()
            thr.pkt = m
            thr.remaining = self._work(m, core)
            thr.done = 0.0
            self.t_start[m] = now
            core.eff = now
            self._at(now + thr.remaining, self._end, (core, gen))
            return
        thr.vruntime += now - core.run_start
        thr.last_ran = now
        core.curr = None
        core.gen += 1
        if self.q:          # preempted at the slice end: stays runnable
            thr.state = "runnable"
            core.rq.append(thr)
            self.preemptions += 1
        else:               # blocks in recvfrom
            thr.state = "blocked"
            self.waiters.append(thr)
        self._pick(core, now)

    # ---------------------------------------------------------------- run
    def run(self) -> None:
        if self.wl.n_msgs:
            self._send(0, self.t0[0])
        self.env.run()
