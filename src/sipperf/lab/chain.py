"""A chain of SIP proxies, each in a network namespace of its own, timed by one capture (issue 25).

::

    SIPp UAC ──> edge (Kamailio) ──> core (Kamailio: registrar lookup, more script) ──> SIPp UAS
    10.78.0.2    10.78.0.11:5060     10.78.0.12:5060                                   10.78.0.3:5080

Every element has a network namespace and one address on a Linux bridge
(:class:`sipperf.lab.netns.ChainTopology`).  **One capture sees every hop**: dumpcap on the
bridge in the switch's namespace (a mirror port) records each datagram once, as it crosses the
switch, with one clock, so the capture holds both copies of every message at each proxy
(in, then out) and ``sipperf analyze --proxy 10.78.0.11:5060,10.78.0.12:5060`` -- or the search
for forwarding elements without it -- pairs them per hop (``components_by_hop.csv``).  The
alternative, one capture per veth merged with ``mergecap``, would stamp a datagram on both ends
of a veth (twice, on two clocks of the same kernel) and need direction filters per interface to
keep one copy per link; the bridge gives exactly one copy per link with no filter but the
subnet's.

**The hops differ, so the chain has a bottleneck.**  The edge record-routes and relays to the
core; the core record-routes, looks the callee up in a registrar (``usrloc`` in memory; the
UAS's contact is added over the ctl socket before the load) and runs ``core_work`` rounds of
per-message script work (chained MD5 digests of the Call-ID: a stand-in for an application
server's or a routing database's work, sized in CPU seconds).  Its CPU per call is then the
larger one, and the forced-flow and bottleneck laws (a hop's utilisation U_i = X D_i, the
chain's throughput X <= 1 / max D_i, and <= 1 / sum D_i for hops sharing one CPU) say where
the queue grows first; the per-hop drops and sojourns of the capture confirm it.

**Placement (two CPUs).**  Both proxies run on CPU 0 (``proxy_cpu``): they *share* it, so
the CPU is one device whose demand per call is D_edge + D_core, and each proxy, one worker,
is a queue of its own in front of it.  SIPp's UAC and UAS, dumpcap and the recorder run on
CPU 1 (``load_cpu``), all at nice 0, as in :mod:`sipperf.lab.protocol`.  Each proxy's CPU
seconds (every Kamailio process of that hop, ``/proc/<pid>/stat``), each CPU's busy share and
the generator's own CPU are recorded (:mod:`sipperf.lab.cpuacct`).  Receive processing of a
datagram runs on the *sender's* CPU (veth and bridge forwarding happen in the sender's
softirq), so CPU 0 also carries the delivery of what the proxies send, CPU 1 that of what SIPp
sends.

Per hop, from its own namespace: datagrams its socket received (``/proc/<pid>/net/snmp``
``Udp: InDatagrams``) and dropped (``RcvbufErrors``, and the socket's ``/proc/net/udp`` drops),
Kamailio's own counters over its ctl socket.  A **closed population** (``users`` > 0: SIPp
``-users N``, a new call as soon as one ends) gives throughput and response time against N for
the MVA of a closed network.

:func:`run_chain` records one run into a directory; :func:`reduce_run` turns it into the rows of
``datasets/lab/protocol/chain/`` (:class:`sipperf.lab.store.ChainDataset`).
"""
from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from sipperf.lab import capture, cpuacct, kamailio, knobs, machine, meta, netns, protocol, sipp
from sipperf.lab.netutil import snmp_udp, udp_socket_info, wait_udp_bound
from sipperf.lab.procs import ProcessGroup

TEMPLATE = Path(__file__).with_name("kamailio_chain.cfg")
HOPS = ("edge", "core")            #: caller side first
#: the core's script work per message (MD5 rounds) by default: in the pilot (busy machine) the
#: core then used about twice the edge's CPU per call
CORE_WORK = 60
SUBNET_FILTER = f"udp and net {netns.CHAIN_SUBNET}"


@dataclass
class ChainConfig:
    """Everything that defines a chain run (``meta.json`` ``config``)."""

    rate_cps: float = 100.0
    calls: int = 1000
    users: int = 0                      #: > 0: closed population (SIPp -users), rate unused
    arrivals: str = "poisson"           #: open runs: "poisson" or "deterministic"
    hold_ms: int = 250
    seed: int = 1
    edge_workers: int = 1
    core_workers: int = 1
    edge_work: int = 0                  #: MD5 rounds per message at the edge
    core_work: int = CORE_WORK          #: MD5 rounds per message at the core
    core_lookup: bool = True            #: registrar lookup (usrloc) at the core
    retransmissions: bool = False       #: False: SIPp -nr, tm's timers past fr_timer (the sweeps)
    capture: bool = True                #: dumpcap on the bridge
    proxy_cpu: int = 0                  #: both proxies
    load_cpu: int = 1                   #: SIPp UAC + UAS, dumpcap, the recorder
    load_nice: int = protocol.GENERATOR_NICE
    port: int = 5060                    #: every proxy's port (each has its own address)
    uas_port: int = 5080
    uac_port: int = 5061
    shm_mb: int = 512
    pkg_mb: int = 8
    max_seconds: float = 300.0
    idle_check_s: float = 2.0
    tag: str = "chain"                  #: namespace names: sipperf-<tag>-<element>

    def validate(self) -> None:
        if self.users < 0 or self.users > 20000:
            raise ValueError("users must be in [0, 20000]")
        if not self.users and not (0 < self.rate_cps <= 20000):
            raise ValueError("rate must be in (0, 20000] calls/s")
        if not (1 <= self.calls <= 500000):
            raise ValueError("calls must be in [1, 500000]")
        if self.arrivals not in ("deterministic", "poisson"):
            raise ValueError(f"arrivals must be deterministic or poisson, not {self.arrivals!r}")
        for w in (self.edge_workers, self.core_workers):
            if not (1 <= w <= 64):
                raise ValueError("workers must be in [1, 64]")
        for w in (self.edge_work, self.core_work):
            if not (0 <= w <= 100000):
                raise ValueError("script work must be in [0, 100000] rounds")
        if self.proxy_cpu == self.load_cpu:
            raise ValueError("proxy_cpu and load_cpu must differ")
        if len({self.port, self.uas_port, self.uac_port}) != 3:
            raise ValueError("proxy, UAS and UAC ports must differ")

    @property
    def closed(self) -> bool:
        return self.users > 0

    def hop(self, name: str) -> dict:
        """One hop's parameters: workers, script work, lookup, address, where it sends."""
        if name not in HOPS:
            raise ValueError(f"hop must be one of {HOPS}, not {name!r}")
        i = HOPS.index(name)
        return {"name": name, "hop": i + 1, "addr": netns.CHAIN_ADDRS[name], "port": self.port,
                "socket": f"{netns.CHAIN_ADDRS[name]}:{self.port}",
                "workers": self.edge_workers if name == "edge" else self.core_workers,
                "work_rounds": self.edge_work if name == "edge" else self.core_work,
                "lookup": bool(self.core_lookup and name == "core"),
                "next": (f"{netns.CHAIN_ADDRS[HOPS[i + 1]]}:{self.port}" if i + 1 < len(HOPS)
                         else f"{netns.CHAIN_ADDRS['uas']}:{self.uas_port}")}

    @property
    def sockets(self) -> list[str]:
        return [self.hop(h)["socket"] for h in HOPS]

    @property
    def expected_seconds(self) -> float:
        return self.calls / self.rate_cps + self.hold_ms / 1000.0 if not self.closed else float("nan")


def _work(rounds: int) -> str:
    if rounds <= 0:
        return "\treturn;"
    return ("\t$var(i) = 0;\n\t$var(h) = $ci;\n"
            f"\twhile ($var(i) < {int(rounds)}) {{\n\t\t$var(h) = $(var(h){{s.md5}});\n"
            "\t\t$var(i) = $var(i) + 1;\n\t}")


def render_hop(cfg: ChainConfig, name: str, run_dir: Path) -> str:
    """The Kamailio configuration of hop ``name`` (``kamailio_chain.cfg`` filled in)."""
    h = cfg.hop(name)
    if h["lookup"]:
        nxt = ('\tif (!lookup("location")) {\n\t\tsl_send_reply("404", "Not Found");\n\t\texit;\n\t}')
        mods = 'loadmodule "usrloc.so"\nloadmodule "registrar.so"\n'
        params = 'modparam("usrloc", "db_mode", 0)\n'
    else:
        nxt = f'\t$du = "sip:{h["next"]}";'
        mods = params = ""
    subs = {"CHILDREN": str(h["workers"]), "ADDR": h["addr"], "PORT": str(h["port"]),
            "SHM_MB": str(cfg.shm_mb), "CTL": str(Path(run_dir).resolve() / f"kamailio-{name}_ctl.sock"),
            "TM_RETR": ("" if cfg.retransmissions else
                        'modparam("tm", "retr_timer1", 60000)\nmodparam("tm", "retr_timer2", 60000)'),
            "LOOKUP_MODULES": mods, "LOOKUP_PARAMS": params, "NEXT": nxt, "WORK": _work(h["work_rounds"])}
    text = TEMPLATE.read_text()
    for k, v in subs.items():
        text = text.replace(f"@@{k}@@", v)
    if "@@" in text:
        raise ValueError("kamailio_chain.cfg has an unfilled @@placeholder@@")
    return text


def register_uas(run_dir: Path, cfg: ChainConfig) -> dict:
    """Put the UAS's contact in the core's location table (``ul.add`` over its ctl socket), as a
    REGISTER would: AOR ``uas`` (SIPp's request URI user), never expiring."""
    contact = f"sip:uas@{netns.CHAIN_ADDRS['uas']}:{cfg.uas_port}"
    kamailio.rpc(run_dir, "kamailio-core_ctl.sock", "ul.add", "location", "uas", contact,
                 "0", "1.0", ".", "0", "0", "0")
    dump = kamailio.rpc(run_dir, "kamailio-core_ctl.sock", "ul.lookup", "location", "uas")
    if contact not in dump:
        raise RuntimeError(f"the core's location table has no {contact}: {dump[:300]}")
    return {"aor": "uas", "contact": contact, "how": "kamcmd ul.add (usrloc db_mode 0), checked by ul.lookup"}


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def run_chain(cfg: ChainConfig, out_dir: Path, *, log=print) -> Path:
    """Run one bounded chain experiment into ``out_dir`` (created; must be empty): the topology,
    the capture on the bridge, the core then the edge, the UAS, the UAC; every process stopped
    by pid and every namespace deleted, also on an error.  Writes ``meta.json``."""
    cfg.validate()
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} is not empty")
    if os.geteuid() != 0:
        raise RuntimeError("the chain needs root (network namespaces)")
    for tool, mod in (("kamailio", kamailio), ("sipp", sipp), ("dumpcap", capture)):
        if not mod.binary():
            raise RuntimeError(f"{tool} not installed; the chain needs kamailio, sip-tester and tshark")
    if not shutil.which("kamcmd"):
        raise RuntimeError("kamcmd not installed (kamailio's ctl client)")
    if (os.cpu_count() or 1) < 2:
        raise RuntimeError("the chain's placement needs two CPUs")
    out.mkdir(parents=True, exist_ok=True)
    idle = machine.idle_check(cfg.idle_check_s) if cfg.idle_check_s > 0 else None
    uac_addr, uas_addr = netns.CHAIN_ADDRS["uac"], netns.CHAIN_ADDRS["uas"]
    edge = cfg.hop("edge")
    lcfg = sipp.LoadConfig(rate_cps=cfg.rate_cps if not cfg.closed else 1.0, calls=cfg.calls,
                           arrivals=cfg.arrivals, hold_ms=cfg.hold_ms, seed=cfg.seed, uac_addr=uac_addr,
                           uac_port=cfg.uac_port, uas_addr=uas_addr, uas_port=cfg.uas_port,
                           retransmissions=cfg.retransmissions, users=cfg.users)
    drain_s = 0.0 if cfg.retransmissions else lcfg.recv_timeout_ms / 1000.0
    if cfg.closed:
        bound_s = cfg.max_seconds
        offered_s = None
    else:
        bound_s = min(cfg.max_seconds, cfg.expected_seconds * 1.5 + 40.0 + drain_s)
        offered_s = cfg.calls / cfg.rate_cps
    m: dict = {
        "source": "lab-chain", "format": "lab-chain-run-v1", "config": asdict(cfg),
        "hops": [cfg.hop(h) for h in HOPS],
        "uac": {"addr": uac_addr, "port": cfg.uac_port}, "uas": {"addr": uas_addr, "port": cfg.uas_port},
        "load": ({"kind": "closed", "users": cfg.users, "calls": cfg.calls,
                  "what": "SIPp -users N (uac.xml): N calls at all times, a new one as soon as one ends"}
                 if cfg.closed else
                 {"kind": "open", "offered_cps": cfg.rate_cps, "calls": cfg.calls, "arrivals": cfg.arrivals,
                  "expected_seconds": round(cfg.expected_seconds, 3)}),
        "start_utc": _now(), "versions": meta.versions(), "cpu": meta.cpu(), "root": True,
        "net_sysctls": meta.net_sysctls(), "idle_check": idle, "machine": machine.describe(),
        "load_before": {"loadavg": meta.loadavg(), "top": meta.top_processes()},
        "retransmissions": ({"sipp": "on (scenario retrans=500 ms)", "tm": "on"} if cfg.retransmissions else
                            {"sipp": f"off (-nr; -recv_timeout {lcfg.recv_timeout_ms} ms)",
                             "tm": "off (retr_timer1 = retr_timer2 = 60 s > fr_timer)"}),
        "sipp_watchdog": sipp.watchdog_record(lcfg),
        "capture_point": {"where": "dumpcap on the bridge br0 in the switch namespace (a mirror port)",
                          "filter": SUBNET_FILTER, "why": "one copy of every datagram per link, one clock"},
    }
    proxy_prefix = ["taskset", "-c", str(cfg.proxy_cpu)]
    load_prefix = ["taskset", "-c", str(cfg.load_cpu)]
    gen_prefix = (["nice", "-n", str(cfg.load_nice)] if cfg.load_nice else []) + load_prefix
    m["placement"] = {"mode": "split", "proxy_cpus": [cfg.proxy_cpu], "generator_cpus": [cfg.load_cpu],
                      "generator_nice": cfg.load_nice,
                      "what": (f"both proxies (edge and core) share CPU {cfg.proxy_cpu}; SIPp UAC + UAS, "
                               f"dumpcap and the recorder on CPU {cfg.load_cpu}; all at nice {cfg.load_nice}")}
    own_affinity = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cfg.load_cpu})
    m["placement"]["recorder"] = {"pid": os.getpid(), "cpus": [cfg.load_cpu]}
    topo = netns.ChainTopology(tag=cfg.tag, log=knobs.RestoreLog())
    sampler = None
    try:
        with ProcessGroup(out) as group:
            topo.__enter__()
            m["netns"] = topo.record
            nsx = {h: topo.exec_prefix(topo.ns(h)) for h in topo.hosts}
            cap = None
            if cfg.capture:
                cap = capture.start(group, out, cfg.port, iface=netns.BRIDGE,
                                    prefix=[*load_prefix, *topo.exec_prefix(topo.switch_ns)],
                                    bpf=SUBNET_FILTER)
            procs = {}
            for h in reversed(HOPS):          # the core first: the edge relays to it
                hp = cfg.hop(h)
                procs[h] = kamailio.start_text(
                    group, render_hop(cfg, h, out), out, addr=hp["addr"], port=hp["port"],
                    workers=hp["workers"], shm_mb=cfg.shm_mb, pkg_mb=cfg.pkg_mb,
                    prefix=[*proxy_prefix, *nsx[h]], name=f"kamailio-{h}")
            if cfg.core_lookup:
                m["registrar"] = register_uas(out, cfg)
            for hp in m["hops"]:
                p = procs[hp["name"]]
                hp.update({"pid": p.pid, "pids": kamailio.pids(p),
                           "processes": kamailio.process_table(out, sock_name=f"kamailio-{hp['name']}_ctl.sock")})
            uas = group.start("uas", [*gen_prefix, *nsx["uas"], *sipp.uas_argv(lcfg)], log="uas.out")
            if not wait_udp_bound(uas_addr, cfg.uas_port, 10, pid=uas.pid):
                raise RuntimeError("the SIPp UAS did not bind its port")
            snmp0 = {h: snmp_udp(procs[h].pid) for h in HOPS}
            sampler = machine.LoadSampler(lab_pids=lambda: {p.pid for p in group.procs}).start()
            hop_acct = {h: cpuacct.GroupCpu(h).start(kamailio.pids(procs[h])) for h in HOPS}
            gen_acct = cpuacct.GroupCpu("generator").start([uas.pid])
            obs_acct = cpuacct.GroupCpu("observers").start([cap.pid] if cap else [])
            ct0 = meta.cpu_times()
            m["load_start_utc"] = _now()
            t0 = time.monotonic()
            uac = group.start("uac", [*gen_prefix, *nsx["uac"], *sipp.uac_argv(
                lcfg, edge["addr"], edge["port"], out, timeout_s=bound_s)], log="uac.out")
            gen_acct.add(uac.pid)
            log(f"chain uac pid {uac.pid}: " + (f"{cfg.users} users, {cfg.calls} calls" if cfg.closed else
                                                f"{cfg.calls} calls at {cfg.rate_cps:g} cps")
                + f", bound {bound_s:.0f} s")
            placements: list[dict] = []
            uac_sock: dict = {}
            offered_mark = None
            timed_out = False
            next_sample = 0.0
            while True:
                ru = cpuacct.wait_rusage(uac.popen)
                if ru is not None:
                    gen_acct.ended(uac.pid, ru)
                    break
                if uac.popen.poll() is not None:
                    break
                now = time.monotonic() - t0
                if not placements and now > 0.3:
                    placements = _placements(group)
                if now >= next_sample:
                    info = udp_socket_info(uac_addr, cfg.uac_port, uac.pid)
                    if info:
                        uac_sock = info
                    for a in (*hop_acct.values(), gen_acct, obs_acct):
                        a.sample()
                    next_sample = now + 0.2
                if offered_s is not None and offered_mark is None and now >= offered_s:
                    offered_mark = {"t_s": round(now, 3), "cpu_times": meta.cpu_times(),
                                    **{f"{h}_cpu_s": a.total_s() for h, a in hop_acct.items()},
                                    "generator_cpu_s": gen_acct.total_s(),
                                    "observer_cpu_s": obs_acct.total_s()}
                if now > bound_s + 5:
                    timed_out = True
                    break
                time.sleep(0.05)
            if offered_s is not None and offered_mark is None:
                # the UAC ended before calls / rate (the Poisson offsets summed to less): the
                # offered window ends with it
                for a in (*hop_acct.values(), gen_acct, obs_acct):
                    a.sample()
                offered_mark = {"t_s": round(time.monotonic() - t0, 3), "cpu_times": meta.cpu_times(),
                                **{f"{h}_cpu_s": a.total_s() for h, a in hop_acct.items()},
                                "generator_cpu_s": gen_acct.total_s(), "observer_cpu_s": obs_acct.total_s()}
            if not placements:
                placements = _placements(group)
            time.sleep(0.5)
            m["load_stop_utc"] = _now()
            m["load_seconds"] = round(time.monotonic() - t0, 3)
            ct1 = meta.cpu_times()
            for hp in m["hops"]:
                h = hp["name"]
                hp["cpu"] = hop_acct[h].stop()
                s1 = snmp_udp(procs[h].pid)
                hp["udp_snmp_delta"] = {k: s1[k] - snmp0[h].get(k, 0) for k in s1}
                sock = udp_socket_info(hp["addr"], hp["port"], procs[h].pid) or {}
                hp["udp_socket"] = {"drops": sock.get("drops"), "rx_queue_bytes_at_end": sock.get("rx_queue_bytes"),
                                "what": "/proc/net/udp of the hop's namespace (since the socket was made)"}
                hp["stats"] = kamailio.statistics(out, sock_name=f"kamailio-{h}_ctl.sock")
            m["generator_cpu"] = gen_acct.stop()
            m["observer_cpu"] = obs_acct.stop()
            m["cpu_busy_during_load"] = meta.busy_fraction(ct0, ct1)
            if offered_mark is not None:
                m["offered_window"] = {
                    "seconds": offered_mark["t_s"], "cpu_busy": meta.busy_fraction(ct0, offered_mark["cpu_times"]),
                    **{f"{h}_cpu_s": offered_mark[f"{h}_cpu_s"] for h in HOPS},
                    "generator_cpu_s": offered_mark["generator_cpu_s"],
                    "observer_cpu_s": offered_mark["observer_cpu_s"],
                    "what": "from the load start to the planned last INVITE (calls / rate), or to the "
                            "UAC's end if it ended before"}
            m["load_samples"] = sampler.stop() | {"series": sampler.samples}
            uas_sock = udp_socket_info(uas_addr, cfg.uas_port, uas.pid) or {}
            m["generator_sockets"] = {
                "uac": {"drops": uac_sock.get("drops"), "read": "last sample before the UAC ended (0.2 s)"},
                "uas": {"drops": uas_sock.get("drops"), "read": "at the end of the load"},
                "what": "/proc/net/udp drops of SIPp's own sockets"}
            # the generator's verdict compares its socket drops with what the first hop read
            m["proxy_xlog_in"] = m["hops"][0]["udp_snmp_delta"].get("InDatagrams")
            m["placement"]["processes"] = placements
            m["placement"]["check"] = protocol.check_placement(placements, [cfg.proxy_cpu], [cfg.load_cpu],
                                                               nice=cfg.load_nice)
            m["load_after"] = {"loadavg": meta.loadavg(), "top": meta.top_processes()}
            m["uac_timed_out"] = timed_out
            stops = {}
            for name in ("uac", "uas", "kamailio-edge", "kamailio-core", "capture"):
                for p in group.procs:
                    if p.name == name:
                        stops[name] = group.stop(p, timeout_s=10.0)
            m["stopped"] = stops
    finally:
        os.sched_setaffinity(0, own_affinity)
        if sampler is not None:
            sampler.stop()
        topo.__exit__(None, None, None)
        m["netns"] = topo.record
    m["sipp_stats"] = sipp.read_stats(out)
    m["sipp_uas_stats"] = sipp.read_stats(out, "uas_stats.csv")
    m["sipp_counts"] = {"uac": sipp.read_counts(out, "uac"), "uas": sipp.read_counts(out, "uas")}
    m["capture_stats"] = capture.stats(out) if cfg.capture else {}
    m["generator"] = protocol.generator_verdict(m)
    m["stop_utc"] = _now()
    (out / "meta.json").write_text(json.dumps(m, indent=2, default=str))
    for h in HOPS:
        (out / f"kamailio-{h}_ctl.sock").unlink(missing_ok=True)
    return out


def _placements(group: ProcessGroup) -> list[dict]:
    """Where every process may run, read back from /proc (roles proxy-<hop>-main, proxy-<hop>,
    uac, uas, capture)."""
    out = []
    for p in group.procs:
        if p.name.startswith("kamailio-"):
            hop = p.name.split("-", 1)[1]
            out.append(cpuacct.placement_of(p.pid, f"proxy-{hop}-main"))
            for c in p.refresh_children() or p.children:
                out.append(cpuacct.placement_of(c, f"proxy-{hop}"))
        elif p.popen.poll() is None:
            out.append(cpuacct.placement_of(p.pid, p.name))
    return out


# ---- one run -> rows of the dataset -------------------------------------------------------------

def _f(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def completed_calls(m: dict) -> int:
    """Calls that ended well: SIPp's successful calls (no 503 path in the chain's scenario)."""
    return int((m.get("sipp_stats") or {}).get("SuccessfulCall(C)") or 0)


def throughput(run_dir: Path, m: dict) -> dict:
    """The chain's throughput X (completed calls/s): over the offered seconds for an open run;
    for a closed one the mean of SIPp's per-second completions after the MSER-5 warm-up, with
    its batch-means 95 % half-width (10 batches) when 20 seconds or more remain."""
    from sipperf import stats

    done = completed_calls(m)
    cfg = m["config"]
    out = {"completed_calls": done}
    if not cfg.get("users"):
        off = cfg["calls"] / cfg["rate_cps"]
        out.update(throughput_cps=done / off, throughput_ci_hw_cps=float("nan"), throughput_source="completed / offered seconds")
        return out
    g = np.asarray(sipp.read_series(run_dir).get("SuccessfulCall(P)", []), dtype=float)
    g = g[np.isfinite(g)]
    if len(g) > 2:
        g = g[1:-1]                         # the first and last periods are partial
    if len(g) >= 20:
        d = stats.mser5(g)
        ci = stats.batch_means_ci(g[d:], batches=10)
        out.update(throughput_cps=ci.mean, throughput_ci_hw_cps=ci.half_width, warmup_s=int(d),
                   throughput_source="SIPp per-second completions after MSER-5, batch means (10)")
    else:
        win = _f(m.get("load_seconds")) - 0.5
        out.update(throughput_cps=done / win if win > 0 else float("nan"), throughput_ci_hw_cps=float("nan"),
                   throughput_source="completed / load seconds (short run)")
    return out


def reduce_run(run_dir: Path, run_id: str, label: dict | None = None) -> dict:
    """A recorded chain run as the dataset's rows: ``{"run", "hops", "components", "meta"}``.

    The capture is analysed once without ``--proxy`` (the forwarding elements found from the
    traffic, :mod:`sipperf.ingest.pairing.vantage`); ``hops_found_ok`` says whether those are
    the chain's two sockets, caller side first.  If not, it is analysed again with the sockets
    given.  Per hop: CPU seconds and utilisation (/proc), datagrams read and dropped (its
    namespace's counters), and from the capture its relayed and dropped messages and sojourn
    (mean with its batch-means half-width, median, p99; µs)."""
    from sipperf.analysis import analyze

    run_dir = Path(run_dir)
    m = json.loads((run_dir / "meta.json").read_text())
    cfg = m["config"]
    label = dict(label or {})
    expected = [h["socket"] for h in m["hops"]]
    an = None
    found: list[str] = []
    vantage = None
    cap = run_dir / capture.PCAP_NAME
    if cap.exists() and cap.stat().st_size > 0:
        an = analyze(cap)
        v = an.report.details.get("vantage") or {}
        found = [h["socket"] for h in v.get("hops", [])]
        vantage = v.get("kind")
        if found != expected:
            an = analyze(cap, proxy=",".join(expected))
    per_hop = {}
    if an is not None:
        for x in (an.report.details.get("vantage") or {}).get("per_hop", []):
            per_hop[x.get("proxy") or expected[x["hop"] - 1]] = x
    tp = throughput(run_dir, m)
    done = tp["completed_calls"]
    st = m.get("sipp_stats") or {}
    gen = m.get("generator") or {}
    ow = m.get("offered_window") or {}
    run = {"run_id": run_id, **label,
           "kind": "closed" if cfg.get("users") else "open",
           "rate_cps": float("nan") if cfg.get("users") else cfg["rate_cps"],
           "users": cfg.get("users") or 0, "calls": cfg["calls"], "seed": cfg["seed"],
           "hold_ms": cfg["hold_ms"], "arrivals": None if cfg.get("users") else cfg["arrivals"],
           "retransmissions": cfg["retransmissions"], "core_work": cfg["core_work"],
           "edge_work": cfg["edge_work"], "core_lookup": cfg["core_lookup"],
           "edge_workers": cfg["edge_workers"], "core_workers": cfg["core_workers"],
           "load_seconds": m.get("load_seconds"), "offered_s": ow.get("seconds"),
           "successful_calls": st.get("SuccessfulCall(C)"), "failed_calls": st.get("FailedCall(C)"),
           **tp,
           "setup_time_mean_ms": 1e3 * sipp.duration_s(st.get("ResponseTimesetup(C)")),
           "teardown_time_mean_ms": 1e3 * sipp.duration_s(st.get("ResponseTimeteardown(C)")),
           "call_length_mean_s": sipp.duration_s(st.get("CallLength(C)")),
           "vantage": vantage, "hops_found": " ".join(found), "hops_found_ok": found == expected,
           "capture_dropped": (m.get("capture_stats") or {}).get("dropped"),
           "cpu0_busy": (m.get("cpu_busy_during_load") or {}).get("cpu0"),
           "cpu1_busy": (m.get("cpu_busy_during_load") or {}).get("cpu1"),
           "generator_cpu_s": (m.get("generator_cpu") or {}).get("cpu_s"),
           "observer_cpu_s": (m.get("observer_cpu") or {}).get("cpu_s"),
           "placement_ok": (m.get("placement", {}).get("check") or {}).get("ok"),
           "generator_bound": gen.get("bound"), "generator_bound_why": "; ".join(gen.get("why") or []) or None,
           "machine_busy": bool((m.get("load_samples") or {}).get("busy")),
           "foreign_cpu_mean": (m.get("load_samples") or {}).get("foreign_mean"),
           "loadavg_before": ((m.get("load_before") or {}).get("loadavg") or [None])[0],
           "start_utc": m.get("start_utc")}
    hops = []
    pdrs = {}
    for hp in m["hops"]:
        c = hp.get("cpu") or {}
        snmp = hp.get("udp_snmp_delta") or {}
        read, drops = snmp.get("InDatagrams"), snmp.get("RcvbufErrors")
        ph = per_hop.get(hp["socket"], {})
        disp = ph.get("dispositions") or {}
        soj = ph.get("sojourn_us") or {}
        comp = an.components_by_hop if an is not None and an.components_by_hop is not None else None
        ci = float("nan")
        if comp is not None and "sojourn_ci95_hw" in comp:
            r = comp[(comp["hop"] == hp["hop"]) & (comp["msg_type"] == "ALL")]
            ci = _f(r["sojourn_ci95_hw"].iloc[0]) if len(r) else float("nan")
        off_cpu = ow.get(f"{hp['name']}_cpu_s")
        row = {"run_id": run_id, "hop": hp["hop"], "name": hp["name"], "socket": hp["socket"],
               "workers": hp["workers"], "work_rounds": hp["work_rounds"], "lookup": hp["lookup"],
               "cpu_s": c.get("cpu_s"), "window_s": c.get("window_s"), "utilisation": c.get("utilisation"),
               "cpu_offered_s": off_cpu, "offered_s": ow.get("seconds"),
               "utilisation_offered": (off_cpu / ow["seconds"]) if off_cpu is not None and ow.get("seconds") else float("nan"),
               "cpu_us_per_call": 1e6 * c["cpu_s"] / done if done and c.get("cpu_s") is not None else float("nan"),
               "processes": c.get("processes"),
               "datagrams_read": read, "rcvbuf_errors": drops,
               "socket_drops": (hp.get("udp_socket") or {}).get("drops"),
               "pdr_counters": drops / (read + drops) if read is not None and drops is not None and read + drops else float("nan"),
               "messages": ph.get("messages"), "relayed": disp.get("relayed"), "dropped": disp.get("dropped"),
               "pdr_capture": _f(ph.get("pdr_percent")) / 100.0,
               "relayed_per_call": disp.get("relayed", 0) / done if done and disp else float("nan"),
               "sojourn_n": soj.get("count"), "sojourn_mean_us": soj.get("mean"), "sojourn_ci_hw_us": ci,
               "sojourn_p50_us": soj.get("median"), "sojourn_p99_us": soj.get("p99"),
               "dispositions": json.dumps(disp, sort_keys=True) if disp else None,
               "stats_rcv_requests": (hp.get("stats") or {}).get("core:rcv_requests"),
               "stats_rcv_replies": (hp.get("stats") or {}).get("core:rcv_replies"),
               "stats_fwd_requests": (hp.get("stats") or {}).get("core:fwd_requests"),
               "stats_fwd_replies": (hp.get("stats") or {}).get("core:fwd_replies")}
        pdrs[hp["name"]] = row["pdr_counters"]
        hops.append(row)
    # the bottleneck by the measurement: the hop whose socket dropped the most
    worst = max(pdrs, key=lambda k: (np.nan_to_num(pdrs[k], nan=-1.0)), default=None)
    run["max_pdr"] = max([np.nan_to_num(v, nan=0.0) for v in pdrs.values()], default=float("nan"))
    run["max_pdr_hop"] = worst if run["max_pdr"] > 0 else None
    comp_rows = []
    if an is not None and an.components_by_hop is not None:
        c = an.components_by_hop.copy()
        c.insert(0, "run_id", run_id)
        comp_rows = c.to_dict("records")
    return {"run": run, "hops": hops, "components": comp_rows, "meta": compact_meta(m, run_id, label)}


def compact_meta(m: dict, run_id: str, label: dict) -> dict:
    """What the dataset keeps of a run's meta.json: configuration, hops (CPU, counters, the
    Kamailio counters), placement read back, the generator, versions, the machine in brief."""
    keep_hop = ("name", "hop", "addr", "port", "socket", "workers", "work_rounds", "lookup", "next",
                "cpu", "udp_snmp_delta", "udp_socket", "stats")
    return {"source": "lab-chain", "format": "lab-chain-point-v1", "run_id": run_id, "label": label,
            "config": m.get("config"), "load": m.get("load"),
            "hops": [{k: h.get(k) for k in keep_hop} for h in m.get("hops", [])],
            "registrar": m.get("registrar"), "netns": m.get("netns"), "capture_point": m.get("capture_point"),
            "capture_stats": m.get("capture_stats"), "placement": m.get("placement"),
            "generator_cpu": m.get("generator_cpu"), "observer_cpu": m.get("observer_cpu"),
            "offered_window": m.get("offered_window"), "cpu_busy_during_load": m.get("cpu_busy_during_load"),
            "generator": m.get("generator"), "generator_sockets": m.get("generator_sockets"),
            "sipp_watchdog": m.get("sipp_watchdog"), "retransmissions": m.get("retransmissions"),
            "versions": m.get("versions"), "cpu": m.get("cpu"),
            "load_samples": {k: v for k, v in (m.get("load_samples") or {}).items() if k != "series"},
            "idle_check": m.get("idle_check"), "load_before": m.get("load_before"),
            "load_after": m.get("load_after"), "load_seconds": m.get("load_seconds"),
            "start_utc": m.get("start_utc"), "stop_utc": m.get("stop_utc")}


# ---- the series: points, their recording -------------------------------------------------------

@dataclass
class ChainPoint:
    """One run of the chain series: its id, configuration, labels, whether its raw capture is kept."""

    run_id: str
    cfg: ChainConfig
    label: dict
    keep_raw: bool = False


def predicted_knee(hops: list[dict], level: float = 1.0) -> dict:
    """The chain's capacity by the bottleneck law from per-hop CPU per call (``cpu_us_per_call``
    of a light-load run): each single-worker hop can serve at most 1 / D_i calls/s, and the hops
    sharing one CPU at most 1 / sum D_i; the smaller bound is the prediction, its hop (or
    "cpu0 shared") the predicted bottleneck.  ``level`` scales it (1.0: the prediction)."""
    d = {h["name"]: float(h["cpu_us_per_call"]) / 1e6 for h in hops
         if h.get("cpu_us_per_call") is not None and np.isfinite(float(h["cpu_us_per_call"]))
         and float(h["cpu_us_per_call"]) > 0}
    if not d:
        return {"knee_cps": None, "why": "no hop CPU per call"}
    worst = max(d, key=d.get)
    per_hop = 1.0 / d[worst]
    shared = 1.0 / sum(d.values())
    knee = min(per_hop, shared)
    return {"knee_cps": level * knee, "demand_s_per_call": d, "bottleneck_hop": worst,
            "bound_hop_cps": per_hop, "bound_shared_cpu_cps": shared,
            "binding": "shared CPU" if shared <= per_hop else f"hop {worst}",
            "what": "min(1 / max_i D_i, 1 / sum_i D_i): D_i the CPU seconds per completed call of hop i "
                    "at light load (its /proc CPU over the load window); both hops on one CPU"}


def record_chain_point(pt: ChainPoint, ds, scratch: Path, *, force: bool = False, wait_idle_s: float = 300.0,
                       log=print) -> dict:
    """Record one chain run (the machine idle first; a run during which other processes were busy
    is taken again, at most twice, unless ``force``), reduce it (:func:`reduce_run`) and add it
    to the dataset ``ds`` (:class:`sipperf.lab.store.ChainDataset`); return the result."""
    from sipperf.lab.longrun import MachineBusy, wait_until_idle

    for attempt in range(3):
        idle = wait_until_idle(force, wait_idle_s, log)
        rd = Path(scratch) / pt.run_id
        shutil.rmtree(rd, ignore_errors=True)
        cfg = pt.cfg if attempt == 0 else _replace(pt.cfg, seed=pt.cfg.seed + 1000 * attempt)
        run_chain(_replace(cfg, idle_check_s=0.0), rd, log=lambda s: None)
        m = json.loads((rd / "meta.json").read_text())
        if (m.get("load_samples") or {}).get("busy") and not force:
            log(f"   {pt.run_id}: the machine got busy during the run; taking it again")
            continue
        m["idle_check"] = idle
        (rd / "meta.json").write_text(json.dumps(m, indent=1, default=str))
        res = reduce_run(rd, pt.run_id, {**pt.label, "forced": force,
                                         "idle_check_busy": bool(idle.get("busy"))})
        ds.add_run(res)
        if pt.keep_raw:
            ds.keep_raw(pt.run_id, rd)
        shutil.rmtree(rd, ignore_errors=True)
        return res
    raise MachineBusy(f"{pt.run_id}: other processes were busy during three attempts")


def _replace(cfg: ChainConfig, **kw) -> ChainConfig:
    import dataclasses

    return dataclasses.replace(cfg, **kw)
