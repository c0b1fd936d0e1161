"""One lab run: proxy + UAS + capture + tracer + UAC on loopback, bounded, stopped by pid.

``run_lab(LabConfig(...), out_dir)`` writes a run directory::

    meta.json           versions, kernel, CPU, knobs, rates, scheduler policy, UDP counters,
                        clock offset, load, what was skipped and why
    kamailio.cfg        the rendered proxy config;  proxy.log  its stderr (the SIPPERF xlog lines)
    capture.pcapng      dumpcap on lo, "udp port <proxy port>"
    tracer.bt           the rendered bpftrace program;  trace.log  its records
    uac_stats.csv ...   SIPp's statistics, screens and error logs (poisson_offsets.csv)

:func:`sipperf.ingest.lab_runs.run.read_run` joins it into one timeline.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sipperf.lab import background, capture, kamailio, knobs, machine, meta, sipp, tracer
from sipperf.lab.netutil import port_in_use, snmp_udp, udp_socket_info, wait_udp_bound
from sipperf.lab.procs import ProcessGroup

SCHED_POLICIES = ("default", "fifo", "pinned")
TRACER_MODES = ("map", "print", "hist", "none")


@dataclass
class LabConfig:
    """Everything that defines a run (stored in meta.json as ``config``)."""

    rate_cps: float = 20.0
    calls: int = 200
    workers: int = 1
    arrivals: str = "deterministic"     #: "deterministic" (SIPp -r) or "poisson"
    sched: str = "default"              #: "default", "fifo" (SCHED_FIFO proxy), "pinned"
    tracer: str = "map"                 #: "map", "print", "hist" or "none"
    tracer_cpu: int | None = None       #: pin bpftrace to this CPU (pinned policy: load_cpu)
    hold_ms: int = 250
    seed: int = 1
    proxy_port: int = 5060
    uas_port: int = 5080
    uac_port: int = 5061
    addr: str = "127.0.0.1"
    fifo_priority: int = 50
    proxy_cpu: int = 0                  #: the proxy's CPU under the pinned policy
    load_cpu: int = 1                   #: SIPp, dumpcap and the tracer under the pinned policy
    load_nice: int = -10                #: nice of the SIPp UAC/UAS (0: unchanged), see run_lab
    max_seconds: float = 300.0          #: hard bound on the load phase
    retransmissions: bool = True        #: False: SIPp -nr and no tm retransmissions (seed 000)
    guard: str = "none"                 #: overload guard: "none", "ratelimit", "pike" (503 + Retry-After)
    guard_cps: float = 0.0              #: initial INVITEs per second the guard lets through
    absorb_early: bool = False          #: absorb request retransmissions before routing (overload runs)
    tuning: dict | None = None          #: a sipperf.lab.knobs.Tuning as a dict (applied, then restored)
    capture: bool = True                #: dumpcap on lo (off: counters only, no timeline)
    background_hogs: int = 0            #: CPU-bound busy loops competing during the load phase
    idle_check_s: float = 2.0           #: measure other processes' CPU use this long before the run

    def validate(self) -> None:
        if self.arrivals not in ("deterministic", "poisson"):
            raise ValueError(f"arrivals must be deterministic or poisson, not {self.arrivals!r}")
        if self.sched not in SCHED_POLICIES:
            raise ValueError(f"sched must be one of {SCHED_POLICIES}, not {self.sched!r}")
        if self.tracer not in TRACER_MODES:
            raise ValueError(f"tracer must be one of {TRACER_MODES}, not {self.tracer!r}")
        if not (0 < self.rate_cps <= 20000):
            raise ValueError("rate must be in (0, 20000] calls/s")
        if not (1 <= self.calls <= 500000):   # 30 s at 3x a knee of ~3,000 calls/s is 280,000 calls
            raise ValueError("calls must be in [1, 500000]")
        if not (1 <= self.workers <= 64):
            raise ValueError("workers must be in [1, 64]")
        if len({self.proxy_port, self.uas_port, self.uac_port}) != 3:
            raise ValueError("proxy, UAS and UAC ports must differ")
        if self.guard not in kamailio.GUARDS:
            raise ValueError(f"guard must be one of {kamailio.GUARDS}, not {self.guard!r}")
        if self.guard != "none" and self.guard_cps < 1:
            raise ValueError("a guard needs guard_cps >= 1")
        if not (0 <= self.background_hogs <= 16):
            raise ValueError("background_hogs must be in [0, 16]")
        if self.tuning is not None:
            knobs.Tuning(**self.tuning).validate()

    @property
    def expected_seconds(self) -> float:
        return self.calls / self.rate_cps + self.hold_ms / 1000.0


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def _prefixes(cfg: LabConfig) -> tuple[list[str], list[str]]:
    """Command prefixes (proxy, load generators) that apply the scheduler policy."""
    ncpu = os.cpu_count() or 1
    if cfg.sched == "fifo":
        return ["chrt", "-f", str(cfg.fifo_priority)], []
    if cfg.sched == "pinned":
        if ncpu < 2:
            return ["taskset", "-c", str(cfg.proxy_cpu)], ["taskset", "-c", str(cfg.proxy_cpu)]
        return ["taskset", "-c", str(cfg.proxy_cpu)], ["taskset", "-c", str(cfg.load_cpu)]
    return [], []


def _policy_of(pid: int) -> dict:
    d: dict = {"pid": pid}
    try:
        d["policy"] = {0: "SCHED_OTHER", 1: "SCHED_FIFO", 2: "SCHED_RR", 3: "SCHED_BATCH",
                       5: "SCHED_IDLE", 6: "SCHED_DEADLINE"}.get(os.sched_getscheduler(pid), "?")
        d["priority"] = os.sched_getparam(pid).sched_priority
        d["affinity"] = sorted(os.sched_getaffinity(pid))
    except OSError as e:
        d["error"] = e.strerror
    return d


def _count_xlog_in(path: Path) -> int:
    """Messages the proxy read from its socket (``SIPPERF|in|`` xlog lines)."""
    n = 0
    try:
        with open(path, "rb") as f:
            for line in f:
                if b"SIPPERF|in|" in line:
                    n += 1
    except OSError:
        return 0
    return n


def run_lab(cfg: LabConfig, out_dir: Path, *, log=print) -> Path:
    """Run one bounded lab experiment into ``out_dir`` (created; must be empty) and return it."""
    cfg.validate()
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} is not empty")
    out.mkdir(parents=True, exist_ok=True)
    for tool, mod in (("kamailio", kamailio), ("sipp", sipp), ("dumpcap", capture)):
        if not mod.binary():
            raise RuntimeError(f"{tool} not installed; the lab needs kamailio, sip-tester and tshark")
    for port in (cfg.proxy_port, cfg.uas_port, cfg.uac_port):
        if port_in_use(cfg.addr, port):
            raise RuntimeError(f"udp {cfg.addr}:{port} is already in use (another lab running?)")

    skipped: dict[str, str] = {}
    # how busy the machine was before we started anything (other people's processes)
    idle = machine.idle_check(cfg.idle_check_s) if cfg.idle_check_s > 0 else None
    m: dict = {
        "source": "lab",
        "config": asdict(cfg),
        "rates": {"offered_cps": cfg.rate_cps, "calls": cfg.calls, "arrivals": cfg.arrivals,
                  "expected_seconds": round(cfg.expected_seconds, 3)},
        "proxy": {"addr": cfg.addr, "port": cfg.proxy_port, "workers": cfg.workers},
        "uas": {"addr": cfg.addr, "port": cfg.uas_port},
        "uac": {"addr": cfg.addr, "port": cfg.uac_port},
        "start_utc": _now(),
        "versions": meta.versions(),
        "cpu": meta.cpu(),
        "root": os.geteuid() == 0,
        "sched": {"policy": cfg.sched, "knobs": meta.sched_knobs()},
        "net_sysctls": meta.net_sysctls(),
        "load_before": {"loadavg": meta.loadavg(), "top": meta.top_processes()},
        "idle_check": idle,
        "machine": machine.describe(),
        "arrivals_method": ("SIPp -r (evenly spaced)" if cfg.arrivals == "deterministic" else
                            "uac_poisson.xml: all calls start at once (-users N), call k pauses "
                            "offset[k] ms (cumsum of Exp(1000/rate) gaps, seed) read by -inf"),
    }
    tracer_mode = cfg.tracer
    if tracer_mode != "none":
        ok, why = tracer.can_trace()
        if not ok:
            skipped["tracer"] = why
            tracer_mode = "none"
        else:
            m["tracefs"] = why
    else:
        skipped["tracer"] = "disabled (--tracer none)"
    if cfg.sched == "fifo" and os.geteuid() != 0:
        raise RuntimeError("SCHED_FIFO needs root (chrt)")
    m["tracer"] = {"mode": tracer_mode}

    proxy_prefix, load_prefix = _prefixes(cfg)
    # The load generators had hosts of their own in seed 000; here they share two CPUs with the
    # proxy and with whatever else runs.  A higher weight (nice < 0) keeps SIPp on schedule so
    # the offered arrivals stay as requested; the proxy keeps the policy under test.
    gen_prefix = (["nice", "-n", str(cfg.load_nice)] if cfg.load_nice else []) + load_prefix
    m["load_generators"] = {"nice": cfg.load_nice, "prefix": gen_prefix}
    tracer_cpu = cfg.tracer_cpu
    if tracer_cpu is None and cfg.sched == "pinned" and (os.cpu_count() or 1) > 1:
        tracer_cpu = cfg.load_cpu
    pcfg = kamailio.ProxyConfig(workers=cfg.workers, addr=cfg.addr, port=cfg.proxy_port,
                                uas_addr=cfg.addr, uas_port=cfg.uas_port,
                                retransmissions=cfg.retransmissions, guard=cfg.guard,
                                guard_cps=cfg.guard_cps, absorb_early=cfg.absorb_early)
    lcfg = sipp.LoadConfig(rate_cps=cfg.rate_cps, calls=cfg.calls, arrivals=cfg.arrivals,
                           hold_ms=cfg.hold_ms, seed=cfg.seed, uac_addr=cfg.addr,
                           uac_port=cfg.uac_port, uas_addr=cfg.addr, uas_port=cfg.uas_port,
                           retransmissions=cfg.retransmissions)
    m["retransmissions"] = ({"sipp": "on (scenario retrans=500 ms, SIPp defaults)", "tm": "on (defaults)"}
                            if cfg.retransmissions else
                            {"sipp": f"off (-nr on UAC and UAS; -recv_timeout {lcfg.recv_timeout_ms} ms)",
                             "tm": "off (retr_timer1 = retr_timer2 = 60 s > fr_timer)"})
    m["guard"] = {"kind": cfg.guard, "admitted_invites_per_s": cfg.guard_cps,
                  "absorb_retransmissions_first": cfg.absorb_early or cfg.guard != "none"}
    # a run with -nr can end with calls waiting for their receive timeout
    drain_s = 0.0 if cfg.retransmissions else lcfg.recv_timeout_ms / 1000.0
    bound_s = min(cfg.max_seconds, cfg.expected_seconds * 1.5 + 40.0 + drain_s)
    tuning = knobs.Tuning(**cfg.tuning) if cfg.tuning else knobs.Tuning()
    hogs: list = []
    sampler = None
    try:
        with knobs.TuningSession(tuning) as tsess, ProcessGroup(out) as group:
            if cfg.capture:
                cap = capture.start(group, out, cfg.proxy_port, prefix=load_prefix)
                log(f"capture pid {cap.pid}")
            else:
                skipped["capture"] = "disabled (capture=False): counters only"
            proxy = kamailio.start(group, pcfg, out, prefix=proxy_prefix)
            kpids = kamailio.pids(proxy)
            table = kamailio.process_table(out)
            if not tuning.is_default:
                tsess.apply_processes(kpids)
                log(f"tuning {tuning.name} applied to {len(kpids)} kamailio processes")
            m["proxy"].update({"pid": proxy.pid, "pids": kpids, "processes": table,
                               "receivers": kamailio.receiver_pids(table),
                               "sched": [_policy_of(p) for p in kpids],
                               "socket": meta.socket_memory(cfg.proxy_port)})
            log(f"kamailio pid {proxy.pid} children {kpids[1:]}")
            if tracer_mode != "none":
                tr = tracer.start(group, out, tracer_mode, cfg.proxy_port, kpids, cpu=tracer_cpu,
                                  map_entries=max(32768, int(cfg.calls * 18)))
                m["tracer"].update({"pid": tr.pid, "cpu": tracer_cpu})
                log(f"tracer pid {tr.pid} ({tracer_mode})")
            uas = group.start("uas", [*gen_prefix, *sipp.uas_argv(lcfg)], log="uas.out")
            if not wait_udp_bound(cfg.addr, cfg.uas_port, 10):
                raise RuntimeError("the SIPp UAS did not bind its port")
            m["clock_before"] = meta.clock_offset_ns()
            m["udp_snmp_before"] = snmp_udp()
            if cfg.background_hogs:
                limit = bound_s + 60.0
                hogs = background.start_hogs(cfg.background_hogs, limit_s=limit)
                m["background"] = {**background.describe(cfg.background_hogs, limit),
                                   "pids": [h.pid for h in hogs]}
                log(f"{len(hogs)} busy loops {[h.pid for h in hogs]}")
            sampler = machine.LoadSampler(
                lab_pids=lambda: {p.pid for p in group.procs} | {h.pid for h in hogs}).start()
            ct0 = meta.cpu_times()
            m["load_start_utc"] = _now()
            t0 = time.monotonic()
            uac = group.start("uac", [*gen_prefix, *sipp.uac_argv(lcfg, cfg.addr, cfg.proxy_port, out,
                                                                     timeout_s=bound_s)], log="uac.out")
            log(f"uac pid {uac.pid}: {cfg.calls} calls at {cfg.rate_cps:g} cps ({cfg.arrivals}), "
                f"bound {bound_s:.0f} s")
            timed_out = False
            while uac.popen.poll() is None:
                if time.monotonic() - t0 > bound_s + 5:
                    timed_out = True
                    break
                time.sleep(0.1)
            time.sleep(0.5)   # let the last replies cross the proxy
            m["load_stop_utc"] = _now()
            m["load_seconds"] = round(time.monotonic() - t0, 3)
            m["udp_snmp_after"] = snmp_udp()
            ct1 = meta.cpu_times()
            m["cpu_busy_during_load"] = meta.busy_fraction(ct0, ct1)
            m["load_samples"] = sampler.stop() | {"series": sampler.samples}
            background.stop_hogs(hogs)
            sock = udp_socket_info(cfg.addr, cfg.proxy_port)
            m["proxy_socket"] = {"drops": sock.get("drops") if sock else None,
                                 "rx_queue_bytes_at_end": sock.get("rx_queue_bytes") if sock else None,
                                 "what": "/proc/net/udp drops of the proxy's socket (since it was created)"}
            m["proxy_stats"] = kamailio.statistics(out)
            m["load_after"] = {"loadavg": meta.loadavg(), "top": meta.top_processes()}
            m["clock_after"] = meta.clock_offset_ns()
            m["uac_timed_out"] = timed_out
            stops = {}
            for name in ("uac", "tracer", "uas", "kamailio", "capture"):
                for p in group.procs:
                    if p.name == name:
                        stops[name] = group.stop(p, timeout_s=180.0 if name == "tracer" else 10.0)
            m["stopped"] = stops
    finally:  # even on an error or Ctrl-C: no busy loop outlives the run
        background.stop_hogs(hogs)
        if sampler is not None:
            sampler.stop()
    before, after = m["udp_snmp_before"], m["udp_snmp_after"]
    m["udp_snmp_delta"] = {k: after[k] - before.get(k, 0) for k in after}
    m["sipp_stats"] = sipp.read_stats(out)
    m["sipp_uas_stats"] = sipp.read_stats(out, "uas_stats.csv")
    m["sipp_counts"] = {"uac": sipp.read_counts(out, "uac"), "uas": sipp.read_counts(out, "uas")}
    m["proxy_xlog_in"] = _count_xlog_in(out / "proxy.log")
    m["tuning"] = tsess.record
    m["capture_stats"] = capture.stats(out) if cfg.capture else {}
    if tracer_mode != "none":
        m["tracer"]["lost_events"] = tracer.lost_events(out)
    m["skipped"] = skipped
    m["stop_utc"] = _now()
    (out / "meta.json").write_text(json.dumps(m, indent=2, default=str))
    for junk in ("kamailio_ctl.sock",):
        try:
            (out / junk).unlink()
        except OSError:
            pass
    return out
