"""SIP overload in SimPy: retransmission timers, congestion collapse, and overload control (ch. 11).

The proxy of chapter 9 reduced to what decides overload: one worker thread that takes messages
from a socket buffer of ``K`` packets (a full buffer drops, as the kernel does) and spends an
exponential service time on each.  Around it the transaction layer of RFC 3261 over UDP:

* the UAC's INVITE is retransmitted by Timer A (T1, 2 T1, 4 T1, ...) until any response arrives,
  and the call fails when Timer B (64 T1) expires without a final response (§17.1.1.2);
* BYEs are retransmitted by Timer E (T1 doubling up to T2) until the final response, Timer F =
  64 T1 (§17.1.2.2);
* the UAS retransmits its 200 OK (T1 doubling up to T2) until the ACK arrives (§13.3.1.4), and the
  UAC answers every 200 with an ACK;
* the proxy is transaction-stateful: a retransmitted request of a transaction it knows costs it
  only ``absorb`` of a service time and is answered from the transaction (100 Trying, or the final
  response it has); its own client transactions retransmit INVITE and BYE towards the UAS.

``retransmissions=False`` switches every timer off (seed 000's SIPp set-up): a lost message
then simply ends its call.  Controls (``control``): ``"503"`` (reject new INVITEs with 503 and
Retry-After while the socket queue is long; the upstream client then stops sending new calls for
that time), ``"ratelimit"`` (a token bucket admits at most ``limit_cps`` new INVITEs per second,
the rest get a 503 — what Kamailio's ``ratelimit`` does with a pipe, and ``pike`` per source
address) and ``"loss"`` (RFC 7339 loss-based feedback: the server computes from its measured
utilisation the share of new calls the client must not send, and the client throttles them
before they reach the server).  Times are seconds.

Priorities (chapter "Priorities, and overload control that uses them"), added without changing
any of the scenarios above: ``priority=True`` serves in-dialog requests (ACK, BYE) and responses
before new INVITEs -- the socket becomes a two-class priority queue (FIFO within a class; an
INVITE is "new" when it has no To tag, which its retransmissions lack too), bounded by the same
``K`` packets in all; ``pushout=True`` makes room in a full buffer for any other message by
discarding the newest waiting INVITE (rejecting new INVITEs first; the model assumes the proxy
classifies a datagram for free as it reads it); control ``"ratelimit-all"`` is a token bucket
over *every* request (INVITE, ACK, BYE; three per call, so ``3 limit_cps`` per second) that
answers an INVITE or BYE over the rate with 503 and discards an ACK -- the all-message limit the
INVITE-only ``"ratelimit"`` is compared with.  ``python -m sipperf.sim.overload --priority``
writes ``sim_priority.csv`` (:data:`PRIORITY_SCENARIOS`, replicated).
"""
from __future__ import annotations

import heapq
import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import simpy

CONTROLS = ("none", "503", "ratelimit", "loss", "ratelimit-all")

#: the scenarios of chapter 11: name -> OverloadParams overrides
SCENARIOS: dict[str, dict] = {
    "no retransmissions": {"retransmissions": False},
    "retransmissions": {},
    "retransmissions, small buffer": {"buffer_pkts": 50},
    "ratelimit": {"control": "ratelimit"},
    "503 + Retry-After": {"control": "503"},
    "loss-based (RFC 7339)": {"control": "loss"},
}

#: the scenarios of the priorities chapter (retransmissions on, default buffer): name -> overrides
PRIORITY_SCENARIOS: dict[str, dict] = {
    "no guard": {},
    "INVITE-only limit": {"control": "ratelimit"},
    "all-request limit": {"control": "ratelimit-all"},
    "priority": {"priority": True},
    "priority + INVITE push-out": {"priority": True, "pushout": True},
    "priority + INVITE-only limit": {"priority": True, "control": "ratelimit"},
}


@dataclass
class OverloadParams:
    offered_cps: float = 50.0       #: new calls per second (Poisson)
    warmup_s: float = 33.0          #: calls started before this are not counted (timers settle)
    measure_s: float = 30.0         #: calls started in [warmup, warmup + measure) are counted
    #: mean service time of one message at the proxy (exponential).  A slow proxy (say, one that
    #: queries a database for every request) keeps the simulation small; what matters below is
    #: the load relative to capacity and the buffer's drain time K E[X] relative to T1
    service_ms: float = 4.0
    absorb: float = 0.5             #: cost of an absorbed retransmission, share of a service time
    reject: float = 0.3             #: cost of answering 503, share of a service time
    buffer_pkts: int = 500          #: socket buffer K (packets waiting; the one in service is out)
    net_ms: float = 0.5             #: one-way network delay between any two elements
    react_ms: float = 1.0           #: UAS reaction time to INVITE (180), 180 -> 200, and to BYE
    hold_s: float = 0.25            #: call holding time, ACK -> BYE (seed 000)
    retransmissions: bool = True
    t1_s: float = 0.5               #: RFC 3261 T1 (RTT estimate)
    t2_s: float = 4.0               #: RFC 3261 T2 (cap of the non-INVITE retransmission interval)
    control: str = "none"
    limit_cps: float | None = None  #: ratelimit: admitted new INVITEs per second (None: 0.9 capacity)
    queue_hi: int | None = None     #: 503: reject new INVITEs while this many wait (None: K / 10)
    retry_after_s: float = 2.0      #: 503: Retry-After
    target_load: float = 0.9        #: loss: offered work per second the server steers to
    feedback_s: float = 0.5         #: loss: how often the server recomputes its percentage
    seed: int = 0
    priority: bool = False          #: serve in-dialog requests and responses before new INVITEs
    pushout: bool = False           #: a full buffer discards its newest new INVITE to admit anything else

    def capacity_cps(self) -> float:
        """Calls per second one worker can serve with no loss and no retransmission (6 messages)."""
        return 1000.0 / (6 * self.service_ms)


class Call:
    """What each element knows about one call (one dialog, three transactions)."""

    def __init__(self, env: simpy.Environment, cid: int):
        self.cid, self.start = cid, env.now
        self.responded = env.event()    # UAC: any response to the INVITE (stops Timer A)
        self.final = env.event()        # UAC: 200 or 503; value "200" / "503"
        self.acked = env.event()        # UAS: the ACK arrived (stops the 200 retransmissions)
        self.bye_done = env.event()     # UAC: 200 to the BYE
        self.proxy_inv = self.proxy_bye = False        # proxy knows the server transaction
        self.proxy_provisional = env.event()           # proxy: a response from the UAS came
        self.proxy_bye_final = env.event()             # proxy: the UAS answered the BYE
        self.uas_last = None            # UAS: last response sent ("180" or "200")
        self.outcome = "timeout"        # "set up", "rejected" (503), "throttled" (never sent), "timeout"
        self.setup_s = self.bye_s = math.nan
        self.bye_refused = False        # UAC: the BYE was answered 503 (an all-request limit)


class Overload:
    """UAC, proxy and UAS of one run; ``stats()`` after ``env.run()``."""

    def __init__(self, env: simpy.Environment, p: OverloadParams):
        self.env, self.p = env, p
        self.rng = np.random.default_rng(p.seed)
        self.socket = simpy.Store(env)             # the worker's FIFO; its bound is checked below
        if p.priority:                             # two classes: 0 in-dialog and responses, 1 new INVITEs
            self.socket = simpy.PriorityStore(env)
        self.seq = 0                               # arrival number: FIFO within a priority class
        self.calls: list[Call] = []
        self.log = []                 # (time, event, kind, retransmitted/absorbed, call) at the proxy
        self.busy = 0.0                             # worker busy time (s)
        self.arrived = 0                            # datagrams that reached the socket (kept or dropped)
        self.tokens, self.token_t = 0.0, 0.0        # ratelimit token bucket
        self.paused_until = 0.0                     # 503: the client honours Retry-After
        self.admit = 1.0                            # loss: share of new calls the client sends
        env.process(self.worker())
        env.process(self.uac())
        if p.control == "loss":
            env.process(self.feedback())

    # -- the network --------------------------------------------------------------------------
    def to_proxy(self, call: Call, kind: str, retrans: bool = False):
        """A message leaves a UA for the proxy and arrives one network delay later."""
        self.later(self.p.net_ms / 1000, self.arrive, call, kind, retrans)

    def arrive(self, call: Call, kind: str, retrans: bool):
        """The kernel appends the datagram to the socket buffer, or drops it if the buffer is full."""
        self.arrived += 1
        if len(self.socket.items) >= self.p.buffer_pkts and not (self.p.pushout and self.push_out(kind)):
            self.log.append((self.env.now, "drop", kind, retrans, call.cid))      # RcvbufErrors
            return
        self.log.append((self.env.now, "arrive", kind, retrans, call.cid))
        if self.p.priority:
            self.seq += 1
            self.socket.put(simpy.PriorityItem((int(kind == "INVITE"), self.seq), (call, kind)))
        else:
            self.socket.put((call, kind))

    def push_out(self, kind: str) -> bool:
        """Make room for ``kind`` in the full buffer by discarding the newest waiting new INVITE
        (its sender will retransmit it); False if ``kind`` is itself an INVITE or none waits."""
        waiting = [it for it in self.socket.items if it.item[1] == "INVITE"]
        if kind == "INVITE" or not waiting:
            return False
        newest = max(waiting, key=lambda it: it.priority)
        self.socket.items.remove(newest)
        heapq.heapify(self.socket.items)
        call = newest.item[0]
        self.log.append((self.env.now, "drop", "INVITE", call.proxy_inv, call.cid))
        return True

    def later(self, delay_s: float, fn, *args):
        """Call ``fn(*args)`` after ``delay_s``: a message on a lossless link.  (A timeout with a
        callback: one event, where a process per message would cost three.)"""
        self.env.timeout(delay_s).callbacks.append(lambda _: fn(*args))

    def retransmit(self, send, done: simpy.Event, cap_s: float):
        """A retransmission timer (Timer A, Timer E, the 2xx rule): send now, then again each time
        the timer fires -- after T1, 2 T1, 4 T1, ..., at most ``cap_s`` apart -- unless ``done`` has
        fired by then; give up after 64 T1 (Timer B / F)."""
        p, env = self.p, self.env
        send(False)
        if not p.retransmissions:
            return
        interval, deadline = p.t1_s, env.now + 64 * p.t1_s
        while True:
            yield env.timeout(min(interval, deadline - env.now))
            if done.triggered or env.now >= deadline:
                return
            send(True)
            interval = min(2 * interval, cap_s)

    # -- the user agents -------------------------------------------------------------------------
    def uac(self):
        """SIPp's UAC: Poisson calls until every counted call has had its 64 T1 to set up."""
        p, env = self.p, self.env
        end = p.warmup_s + p.measure_s + 2 * 64 * p.t1_s + p.hold_s + 1.0
        while env.now < end:
            yield env.timeout(self.rng.exponential(1.0 / p.offered_cps))
            call = Call(env, len(self.calls))
            self.calls.append(call)
            if env.now < self.paused_until or self.rng.random() > self.admit:
                call.outcome = "throttled"          # rejected by the client: never sent
                continue
            env.process(self.uac_call(call))

    def uac_call(self, call: Call):
        env, p = self.env, self.p
        env.process(self.retransmit(lambda r: self.to_proxy(call, "INVITE", r), call.responded, math.inf))
        yield call.final | env.timeout(64 * p.t1_s)  # a final response, or Timer B
        if not call.final.triggered:
            return                                   # Timer B: the call failed
        if call.final.value == "503":
            call.outcome = "rejected"
            return
        call.outcome = "set up"
        yield env.timeout(p.hold_s)
        call.bye_start = env.now
        env.process(self.retransmit(lambda r: self.to_proxy(call, "BYE", r), call.bye_done, p.t2_s))

    def uac_receives(self, call: Call, kind: str):
        if kind == "503-RA":                         # 503 with Retry-After: no new calls for a while
            self.paused_until = self.env.now + self.p.retry_after_s
            kind = "503"
        if kind in ("100", "180", "200", "503") and not call.responded.triggered:
            call.responded.succeed()
        if kind in ("200", "503") and not call.final.triggered:
            call.setup_s = self.env.now - call.start
            call.final.succeed(kind)
        if kind == "200":
            self.to_proxy(call, "ACK")               # an ACK for every 200 (§13.2.2.4)
        if kind == "200-BYE" and not call.bye_done.triggered:
            call.bye_s = self.env.now - call.bye_start
            call.bye_done.succeed()
        if kind == "503-BYE" and not call.bye_done.triggered:    # BYE refused: the call never completes
            call.bye_refused = True
            call.bye_done.succeed()

    def uas_receives(self, call: Call, kind: str):
        env, p = self.env, self.p
        if kind == "INVITE":
            if call.uas_last is None:
                call.uas_last = "180"
                self.later(p.react_ms / 1000, self.to_proxy, call, "180")
                self.later(2 * p.react_ms / 1000, self.uas_answers, call)
            else:                                    # a retransmission: send the last response again
                self.to_proxy(call, call.uas_last, True)
        elif kind == "ACK" and not call.acked.triggered:
            call.acked.succeed()
        elif kind == "BYE":
            self.later(p.react_ms / 1000, self.to_proxy, call, "200-BYE")

    def uas_answers(self, call: Call):
        call.uas_last = "200"
        self.env.process(self.retransmit(lambda r: self.to_proxy(call, "200", r), call.acked, self.p.t2_s))

    # -- the proxy ---------------------------------------------------------------------------------
    def worker(self):
        """One worker thread: take the next message, spend its service time, act on it."""
        p, env = self.p, self.env
        while True:
            got = yield self.socket.get()
            call, kind = got.item if p.priority else got     # a PriorityItem when priority is on
            cost, action = self.decide(call, kind)
            x = self.rng.exponential(p.service_ms / 1000) * cost
            yield env.timeout(x)
            self.busy += x
            self.log.append((env.now, "served", kind, cost < 1, call.cid))
            action()

    def decide(self, call: Call, kind: str):
        """What the transaction-stateful proxy does with ``kind``: (cost share, action at the end)."""
        p, net = self.p, self.p.net_ms / 1000
        to_uac = lambda k: self.later(net, self.uac_receives, call, k)       # noqa: E731
        to_uas = lambda k: self.later(net, self.uas_receives, call, k)       # noqa: E731
        if kind == "INVITE":
            if call.proxy_inv:                       # retransmission: answer from the transaction
                return p.absorb, lambda: to_uac("100")
            if self.overloaded():
                return p.reject, lambda: to_uac("503-RA" if p.control == "503" else "503")
            call.proxy_inv = True
            return 1.0, lambda: (to_uac("100"), self.env.process(self.retransmit(
                lambda r: to_uas("INVITE"), call.proxy_provisional, math.inf)))
        if kind in ("180", "200"):
            if not call.proxy_provisional.triggered:
                call.proxy_provisional.succeed()
            return 1.0, lambda: to_uac(kind)
        if kind == "ACK":
            if self.over_request_limit():            # an all-request limit discards an ACK over the rate
                return p.reject, lambda: None
            return 1.0, lambda: to_uas("ACK")
        if kind == "BYE":
            if call.proxy_bye:
                return p.absorb, (lambda: to_uac("200-BYE")) if call.proxy_bye_final.triggered else (lambda: None)
            if self.over_request_limit():            # ... and answers a BYE over the rate with 503
                return p.reject, lambda: to_uac("503-BYE")
            call.proxy_bye = True
            return 1.0, lambda: self.env.process(self.retransmit(
                lambda r: to_uas("BYE"), call.proxy_bye_final, p.t2_s))
        if kind == "200-BYE":
            if call.proxy_bye_final.triggered:
                return p.absorb, lambda: None
            call.proxy_bye_final.succeed()
            return 1.0, lambda: to_uac("200-BYE")
        raise ValueError(kind)

    def overloaded(self) -> bool:
        """Local overload control on a new INVITE: True = answer 503 instead of serving it."""
        p, now = self.p, self.env.now
        if p.control == "503":
            hi = p.queue_hi if p.queue_hi is not None else max(1, p.buffer_pkts // 10)
            return len(self.socket.items) >= hi
        if p.control == "ratelimit":                 # token bucket, depth 0.1 s of the rate
            rate = p.limit_cps if p.limit_cps is not None else 0.9 * p.capacity_cps()
            self.tokens = min(self.tokens + (now - self.token_t) * rate, max(1.0, 0.1 * rate))
            self.token_t = now
            if self.tokens < 1:
                return True
            self.tokens -= 1
        if p.control == "ratelimit-all":
            return self.over_request_limit()
        return False

    def over_request_limit(self) -> bool:
        """Control ``"ratelimit-all"``: True if this request (any method) finds the token bucket of
        ``3 limit_cps`` requests per second empty (depth 0.1 s of the rate); False for other controls."""
        p, now = self.p, self.env.now
        if p.control != "ratelimit-all":
            return False
        rate = 3 * (p.limit_cps if p.limit_cps is not None else 0.9 * p.capacity_cps())
        self.tokens = min(self.tokens + (now - self.token_t) * rate, max(1.0, 0.1 * rate))
        self.token_t = now
        if self.tokens < 1:
            return True
        self.tokens -= 1
        return False

    def feedback(self):
        """RFC 7339 loss-based control.  Every ``feedback_s`` the server estimates its offered load
        -- the datagrams that reached its socket, dropped ones included, times E[X], per second --
        and scales the share of new calls the client may send so that this load comes down to
        ``target_load``.  (The RFC carries the percentage in the ``oc`` parameter of the Via header
        of responses; the client here sees the latest value at once.)"""
        p, env = self.p, self.env
        while True:
            n0 = self.arrived
            yield env.timeout(p.feedback_s)
            load = (self.arrived - n0) * p.service_ms / 1000 / p.feedback_s
            self.admit = min(1.0, max(0.01, self.admit * p.target_load / max(load, 1e-3)))


def run_overload(p: OverloadParams) -> Overload:
    if p.control not in CONTROLS:
        raise ValueError(f"unknown control {p.control!r} ({', '.join(CONTROLS)})")
    if not (math.isfinite(p.offered_cps) and p.offered_cps > 0):
        raise ValueError(f"offered_cps must be a finite number > 0, not {p.offered_cps!r}")
    env = simpy.Environment()
    model = Overload(env, p)
    env.run(until=p.warmup_s + p.measure_s + 2 * 64 * p.t1_s + p.hold_s + 1.0)
    return model


def summarise(m: Overload) -> dict:
    """Goodput and load of the calls started in the measurement window, and the proxy's view."""
    p = m.p
    t0, t1 = p.warmup_s, p.warmup_s + p.measure_s
    calls = [c for c in m.calls if t0 <= c.start < t1]
    outcome = pd.Series([c.outcome for c in calls])
    setup = np.array([c.setup_s for c in calls if c.outcome == "set up"])
    bye = np.array([c.bye_s for c in calls if c.outcome == "set up" and c.bye_s <= 64 * p.t1_s])
    log = pd.DataFrame(m.log, columns=["t", "event", "kind", "flag", "call"])
    w = log[(log["t"] >= t0) & (log["t"] < t1)]
    arrive = w[w["event"] == "arrive"]
    drop = w[w["event"] == "drop"]
    served = w[w["event"] == "served"]
    offered_msgs = len(arrive) + len(drop)
    completed = sum(1 for c in calls if c.outcome == "set up" and c.bye_s <= 64 * p.t1_s)
    return {**asdict(p), "capacity_cps": p.capacity_cps(), "calls": len(calls),
            "goodput_cps": completed / p.measure_s,
            "setups_cps": float((outcome == "set up").sum()) / p.measure_s,
            "rejected_share": float((outcome == "rejected").mean()) if len(calls) else math.nan,
            "throttled_share": float((outcome == "throttled").mean()) if len(calls) else math.nan,
            "timeout_share": float((outcome == "timeout").mean()) if len(calls) else math.nan,
            "setup_median_s": float(np.median(setup)) if len(setup) else math.nan,
            "setup_p95_s": float(np.percentile(setup, 95)) if len(setup) else math.nan,
            "msgs_in_per_s": offered_msgs / p.measure_s,
            "retrans_per_s": float(w[w["event"].isin(["arrive", "drop"]) & w["flag"].astype(bool)].shape[0])
            / p.measure_s,
            "drop_share": len(drop) / offered_msgs if offered_msgs else math.nan,
            "served_per_s": len(served) / p.measure_s,
            "amplification": offered_msgs / (6 * len(calls)) if len(calls) else math.nan,
            # the priorities chapter: what happens to calls after their setup
            "failed_after_setup_share": 1 - completed / len(setup) if len(setup) else math.nan,
            "bye_refused_share": (sum(c.bye_refused for c in calls if c.outcome == "set up") / len(setup)
                                  if len(setup) else math.nan),
            "bye_median_s": float(np.median(bye)) if len(bye) else math.nan,
            "bye_p95_s": float(np.percentile(bye, 95)) if len(bye) else math.nan}


def timeseries(m: Overload, bin_s: float = 1.0) -> pd.DataFrame:
    """Per ``bin_s``: calls set up (by the time their 200 arrived), messages in, drops."""
    edges = np.arange(0.0, m.env.now + bin_s, bin_s)
    done = np.array([c.start + c.setup_s for c in m.calls if c.outcome == "set up"])
    log = pd.DataFrame(m.log, columns=["t", "event", "kind", "flag", "call"])
    h = lambda x: np.histogram(x, edges)[0] / bin_s       # noqa: E731
    return pd.DataFrame({"t_s": edges[:-1], "setups_per_s": h(done),
                         "msgs_in_per_s": h(log.loc[log["event"].isin(["arrive", "drop"]), "t"]),
                         "drops_per_s": h(log.loc[log["event"] == "drop", "t"])})


#: offered load as multiples of the capacity (the x-axis of chapter 11)
LOAD_FACTORS: tuple[float, ...] = (0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0)


def sweep(factors=LOAD_FACTORS, scenarios: dict[str, dict] | None = None, seed: int = 1,
          **over) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every scenario at every load: (summary rows, 1-s time series)."""
    from dataclasses import replace

    rows, series = [], []
    for name, sc in (scenarios or SCENARIOS).items():
        for i, f in enumerate(factors):
            p = OverloadParams(**{**sc, **over})
            p = replace(p, offered_cps=f * p.capacity_cps(), seed=seed + i)
            m = run_overload(p)
            rows.append({"scenario": name, "load_factor": f, **summarise(m)})
            series.append(timeseries(m).assign(scenario=name, load_factor=f))
    return pd.DataFrame(rows), pd.concat(series, ignore_index=True)


#: offered load as multiples of the capacity in the priorities chapter (0.5 to 3 times the knee)
PRIORITY_FACTORS: tuple[float, ...] = (0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 2.5, 3.0)


def replicate(reps: int, factors=PRIORITY_FACTORS, scenarios: dict[str, dict] | None = None,
              seed: int = 1, **over) -> pd.DataFrame:
    """:func:`sweep` ``reps`` times with independent seeds (replication r uses ``seed + 1000 r``
    plus the index of the load): one row per scenario, load and replication (column ``rep``)."""
    return pd.concat([sweep(factors, scenarios or PRIORITY_SCENARIOS, seed + 1000 * r, **over)[0].assign(rep=r)
                      for r in range(reps)], ignore_index=True)


def _write_replicated(a, out, write_with_provenance, factors, scenarios, flag: str, head: str, tail: str,
                      source: str) -> int:
    """Run :func:`replicate` for ``--priority`` or ``--replicated`` and write it with its provenance:
    ``head`` describes the scenarios, ``tail`` the columns beyond goodput."""
    import os
    import time

    t, load0 = time.perf_counter(), os.getloadavg()
    df = replicate(a.reps, factors, scenarios, seed=a.seed)
    load1 = os.getloadavg()
    cmd = f"python -m sipperf.sim.overload {flag} --reps {a.reps} --seed {a.seed}"
    what = (head + "; ".join(f"{k}: {v or 'defaults'}" for k, v in scenarios.items())
            + f".  Defaults: {asdict(OverloadParams())}.  Offered load = load_factor x capacity, load_factor in "
            f"{list(factors)}; {a.reps} independent replications per point (column rep; seed = --seed + "
            "1000 rep + index of the load" + tail + f"  {time.perf_counter() - t:.0f} s wall on one CPU; "
            f"/proc/loadavg 1/5/15-min {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} at the start, "
            f"{load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} at the end.")
    write_with_provenance(df, out, what, cmd, source=source)
    print(df.groupby(["scenario", "load_factor"])["goodput_cps"].agg(["mean", "std"]).round(2).to_string())
    return 0


def _priority_main(a, out, write_with_provenance) -> int:
    return _write_replicated(
        a, out, write_with_provenance, PRIORITY_FACTORS, PRIORITY_SCENARIOS, "--priority",
        "Priorities and INVITE-first rejection in the SIP overload model (src/sipperf/sim/overload.py, "
        "SimPy), for the chapter on priorities.  Scenarios (overrides of OverloadParams, retransmissions "
        "on): ",
        ").  goodput_cps = calls started in the measurement window that were set up within Timer B and "
        "torn down within Timer F, per second; failed_after_setup_share = set-up calls that did not "
        "complete; bye_*_s = BYE to its 200 OK at the caller, completed calls. ",
        "the SimPy overload model (src/sipperf/sim/overload.py), priority scenarios")


def _replicated_main(a, out, write_with_provenance) -> int:
    return _write_replicated(
        a, out, write_with_provenance, LOAD_FACTORS, SCENARIOS, "--replicated",
        "Chapter 11's overload scenarios (src/sipperf/sim/overload.py, SimPy), replicated: ",
        ", so rep 0 is the single run of sim_overload.csv with the same --seed).  goodput_cps = calls "
        "started in the measurement window that were set up within Timer B and torn down within Timer F, "
        "per second. ",
        "the SimPy overload model of chapter 11 (src/sipperf/sim/overload.py), replicated")


def main(argv: list[str] | None = None) -> int:
    import argparse
    import os
    import time
    from pathlib import Path

    from sipperf.sim.sweep import OUT_DIR, write_with_provenance

    ap = argparse.ArgumentParser(prog="python -m sipperf.sim.overload", description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None,
                    help="default datasets/precomputed/sim_overload.csv (sim_priority.csv with --priority)")
    ap.add_argument("--priority", action="store_true",
                    help="the priorities chapter's scenarios, replicated, into sim_priority.csv")
    ap.add_argument("--reps", type=int, default=5,
                    help="replications per point with --priority or --replicated")
    ap.add_argument("--replicated", action="store_true",
                    help="chapter 11's scenarios at every load, --reps replications, into sim_overload_reps.csv")
    a = ap.parse_args(argv)
    if a.priority:
        return _priority_main(a, a.out or OUT_DIR / "sim_priority.csv", write_with_provenance)
    if a.replicated:
        return _replicated_main(a, a.out or OUT_DIR / "sim_overload_reps.csv", write_with_provenance)
    a.out = a.out or OUT_DIR / "sim_overload.csv"
    t, load0 = time.perf_counter(), os.getloadavg()[0]
    summary, ts = sweep(seed=a.seed)
    cmd = f"python -m sipperf.sim.overload --seed {a.seed}"
    what = ("SIP overload scenarios of chapter 11 (src/sipperf/sim/overload.py, SimPy): one worker thread "
            "behind a socket buffer, RFC 3261 retransmission timers at the UAC, the UAS and the "
            "transaction-stateful proxy, and the overload controls.  Scenarios: "
            + "; ".join(f"{k}: {v or 'defaults'}" for k, v in SCENARIOS.items())
            + f".  Defaults: {asdict(OverloadParams())}.  Offered load = load_factor x capacity "
            "(capacity = 1 / (6 E[X]) calls/s).  One replication per point (seed = --seed + index of the "
            "load).  goodput_cps = calls started in the measurement window that were set up within Timer B "
            "and torn down within Timer F, per second.  "
            f"{time.perf_counter() - t:.0f} s wall, load average {load0:.2f} at the start.")
    src = "the SimPy overload model of chapter 11 (src/sipperf/sim/overload.py)"
    write_with_provenance(summary, a.out, what, cmd, source=src)
    write_with_provenance(ts, a.out.with_name(a.out.stem + "_ts.csv"),
                          "Time series (1-s bins) of the runs in sim_overload.csv: calls set up per second "
                          "(by the time their 200 OK reached the caller), datagrams arriving at the proxy's "
                          "socket per second (kept or dropped), drops per second.  " + what, cmd, source=src)
    print(summary[["scenario", "load_factor", "goodput_cps", "drop_share", "amplification",
                   "setup_p95_s"]].round(3).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
