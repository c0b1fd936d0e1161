"""Three "hosts" on one machine: network namespaces joined by veth pairs (``LabConfig.netns``).

Seed 000's testbed had three machines: the UAC, the proxy and the UAS, on a switched network.
The default lab puts all three on the loopback interface of one network stack.  With
``netns=True`` each gets a network namespace of its own, joined to the proxy's by a veth pair::

    [sipperf-uac]  uac0 10.77.0.2  <-- veth -->  pxu  [sipperf-proxy]  pxs  <-- veth -->  uas0 10.77.0.3  [sipperf-uas]
                                                 10.77.0.1 (both ends, point to point)

The proxy keeps one address (10.77.0.1, on both of its interfaces, each a point-to-point link to
one peer), so Kamailio listens on one socket as on loopback.  What changes against loopback:
each datagram crosses a veth pair (``veth_xmit`` hands it to the peer namespace's receive path
on the sending CPU, as loopback does) and is routed by the proxy's namespace; the proxy's
socket, its ``/proc/net/udp`` row and ``/proc/net/snmp`` counters live in that namespace (read
through ``/proc/<proxy pid>/net/``).

Captures: dumpcap cannot cross namespaces, so three run: in the proxy's namespace on both
interfaces, keeping the datagrams *to* the proxy (stamped as they are received there, the
instant the tracer's ``netif_receive_skb`` sees), and one in each peer's namespace keeping the
datagrams *from* the proxy (stamped as the peer receives them, inside the proxy's ``sendto``,
the instant the tracer's ``net_dev_xmit`` sees) -- the same two instants loopback gives.  They
are merged (``mergecap``) into one ``capture.pcapng``.

Every namespace made is written to the lab's restore log first, so a killed run's namespaces are
deleted by the next start (``sipperf lab restore``).
"""
from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "sipperf"
PROXY_ADDR = "10.77.0.1"
UAC_ADDR = "10.77.0.2"
UAS_ADDR = "10.77.0.3"


@dataclass
class Topology:
    """The three namespaces; a context manager that makes them and always deletes them."""

    tag: str = "lab"                      #: suffix of the namespace names (several labs can coexist)
    log: object = None                    #: the sipperf.lab.knobs.RestoreLog to record in (required)
    made: list[str] = field(default_factory=list)
    record: dict = field(default_factory=dict)
    _rids: list[str] = field(default_factory=list)

    @property
    def proxy_ns(self) -> str:
        return f"{PREFIX}-{self.tag}-proxy"

    @property
    def uac_ns(self) -> str:
        return f"{PREFIX}-{self.tag}-uac"

    @property
    def uas_ns(self) -> str:
        return f"{PREFIX}-{self.tag}-uas"

    def exec_prefix(self, ns: str) -> list[str]:
        return ["ip", "netns", "exec", ns]

    def _ip(self, *args: str, ns: str | None = None) -> str:
        argv = (["ip", "-n", ns] if ns else ["ip"]) + list(args)
        r = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()}")
        return r.stdout

    def ifindex(self, ns: str, dev: str) -> int:
        return int(self._ip("-o", "link", "show", dev, ns=ns).split(":", 1)[0])

    def __enter__(self) -> "Topology":
        if self.log is None:
            raise ValueError("Topology needs a restore log (sipperf.lab.knobs.RestoreLog)")
        log = self.log
        existing = set(list_namespaces())
        for ns in (self.proxy_ns, self.uac_ns, self.uas_ns):
            if ns in existing:
                raise RuntimeError(f"network namespace {ns} exists (another lab running? "
                                   f"`sipperf lab restore` deletes a killed run's namespaces)")
        try:
            for ns in (self.proxy_ns, self.uac_ns, self.uas_ns):
                self._rids.append(log.record({"kind": "netns", "path": ns}))
                self._ip("netns", "add", ns)
                self.made.append(ns)
                self._ip("link", "set", "lo", "up", ns=ns)
            # veth pairs made in the proxy's namespace, one end moved to each peer
            for peer_ns, here, there, addr in ((self.uac_ns, "pxu", "uac0", UAC_ADDR),
                                               (self.uas_ns, "pxs", "uas0", UAS_ADDR)):
                self._ip("link", "add", here, "type", "veth", "peer", "name", there, ns=self.proxy_ns)
                self._ip("link", "set", there, "netns", peer_ns, ns=self.proxy_ns)
                self._ip("addr", "add", PROXY_ADDR, "peer", f"{addr}/32", "dev", here, ns=self.proxy_ns)
                self._ip("addr", "add", addr, "peer", f"{PROXY_ADDR}/32", "dev", there, ns=peer_ns)
                self._ip("link", "set", here, "up", ns=self.proxy_ns)
                self._ip("link", "set", there, "up", ns=peer_ns)
            self.record = {
                "namespaces": {"proxy": self.proxy_ns, "uac": self.uac_ns, "uas": self.uas_ns},
                "addresses": {"proxy": PROXY_ADDR, "uac": UAC_ADDR, "uas": UAS_ADDR},
                "links": {"uac": ["uac0", "pxu"], "uas": ["uas0", "pxs"]},
                "proxy_ifindex": {"pxu": self.ifindex(self.proxy_ns, "pxu"),
                                  "pxs": self.ifindex(self.proxy_ns, "pxs")},
                "what": "three network namespaces joined by veth pairs (sipperf.lab.netns)",
            }
        except Exception:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        log = self.log
        results = []
        for ns, rid in zip(reversed(self.made), reversed(self._rids[:len(self.made)])):
            res = delete_namespace(ns)
            log.done(rid, res)
            results.append({"ns": ns, **res})
        for rid in self._rids[len(self.made):]:    # recorded, never made
            log.done(rid, {"restored": True, "note": "never made"})
        if results or self._rids:
            self.record["deleted"] = results
        self.made = []
        self._rids = []


def list_namespaces() -> list[str]:
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def delete_namespace(ns: str) -> dict:
    """Delete namespace ``ns`` (its veth ends go with it); ``{"restored": True}`` once it is gone."""
    if ns not in list_namespaces():
        return {"restored": True, "note": "absent"}
    r = subprocess.run(["ip", "netns", "del", ns], capture_output=True, text=True, timeout=20)
    gone = ns not in list_namespaces()
    return {"restored": gone, **({} if gone else {"error": r.stderr.strip()})}


def merge_captures(parts: list[Path], out: Path) -> dict:
    """Merge the namespaces' captures chronologically into ``out`` (``mergecap -w``)."""
    parts = [p for p in parts if p.exists() and p.stat().st_size > 0]
    if not parts:
        return {"merged": 0}
    r = subprocess.run(["mergecap", "-w", str(out), *map(str, parts)], capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"mergecap: {r.stderr.strip()}")
    for p in parts:
        p.unlink()
    return {"merged": len(parts), "tool": "mergecap (chronological)"}


# ---- the chain of proxies: hosts on one bridge ------------------------------------------------

#: the chain's subnet and each element's address (sipperf.lab.chain)
CHAIN_SUBNET = "10.78.0.0/24"
CHAIN_ADDRS = {"uac": "10.78.0.2", "uas": "10.78.0.3", "edge": "10.78.0.11", "core": "10.78.0.12"}
BRIDGE = "br0"


@dataclass
class ChainTopology:
    """A switch and its hosts: one network namespace per element (``hosts``) and one for the
    switch, a Linux bridge (``br0``) joined to every host by a veth pair::

        [uac] eth0 --- sw-uac ┐
        [edge] eth0 -- sw-edge ├─ br0 [sipperf-<tag>-sw] ─ capture here (dumpcap on br0)
        [core] eth0 -- sw-core ├
        [uas] eth0 --- sw-uas ┘

    Every host has one address on 10.78.0.0/24 (:data:`CHAIN_ADDRS`).  Each datagram between
    two elements crosses the bridge exactly once, so dumpcap on ``br0`` (promiscuous: the bridge
    then passes every frame it forwards up to its own device as well) sees every hop's ingress
    and egress copy once, time-stamped by one clock -- a switch's mirror (SPAN) port.  IPv6 is
    disabled in every namespace (no neighbour discovery in the capture), STP is off and the
    forward delay 0 (ports forward at once).  Every namespace is written to the restore log
    before it is made and deleted on exit (its veth ends go with it)."""

    tag: str = "chain"
    hosts: tuple[str, ...] = ("uac", "edge", "core", "uas")
    log: object = None
    made: list[str] = field(default_factory=list)
    record: dict = field(default_factory=dict)
    _rids: list[str] = field(default_factory=list)

    def ns(self, host: str) -> str:
        return f"{PREFIX}-{self.tag}-{host}"

    @property
    def switch_ns(self) -> str:
        return f"{PREFIX}-{self.tag}-sw"

    def exec_prefix(self, ns: str) -> list[str]:
        return ["ip", "netns", "exec", ns]

    def addr(self, host: str) -> str:
        return CHAIN_ADDRS[host]

    _ip = Topology._ip

    def _sysctl(self, ns: str, key: str, value: str) -> None:
        r = subprocess.run([*self.exec_prefix(ns), "sysctl", "-qw", f"{key}={value}"],
                           capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            raise RuntimeError(f"sysctl {key} in {ns}: {r.stderr.strip()}")

    def _add(self, ns: str) -> None:
        self._rids.append(self.log.record({"kind": "netns", "path": ns}))
        self._ip("netns", "add", ns)
        self.made.append(ns)
        self._ip("link", "set", "lo", "up", ns=ns)
        # per-namespace sysctls: they go with the namespace, nothing to restore
        for k in ("net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"):
            self._sysctl(ns, k, "1")

    def __enter__(self) -> "ChainTopology":
        if self.log is None:
            raise ValueError("ChainTopology needs a restore log (sipperf.lab.knobs.RestoreLog)")
        unknown = [h for h in self.hosts if h not in CHAIN_ADDRS]
        if unknown:
            raise ValueError(f"no chain address for {unknown} (known: {sorted(CHAIN_ADDRS)})")
        wanted = [self.switch_ns, *(self.ns(h) for h in self.hosts)]
        existing = set(list_namespaces())
        for ns in wanted:
            if ns in existing:
                raise RuntimeError(f"network namespace {ns} exists (another lab running? "
                                   f"`sipperf lab restore` deletes a killed run's namespaces)")
        try:
            sw = self.switch_ns
            self._add(sw)
            self._ip("link", "add", BRIDGE, "type", "bridge", "stp_state", "0", "forward_delay", "0", ns=sw)
            self._ip("link", "set", BRIDGE, "up", ns=sw)
            for h in self.hosts:
                ns = self.ns(h)
                self._add(ns)
                port = f"sw-{h}"[:15]
                self._ip("link", "add", port, "type", "veth", "peer", "name", "eth0", ns=sw)
                self._ip("link", "set", "eth0", "netns", ns, ns=sw)
                self._ip("link", "set", port, "master", BRIDGE, ns=sw)
                self._ip("link", "set", port, "up", ns=sw)
                self._ip("addr", "add", f"{CHAIN_ADDRS[h]}/24", "dev", "eth0", ns=ns)
                self._ip("link", "set", "eth0", "up", ns=ns)
            self.record = {
                "namespaces": {"switch": sw, **{h: self.ns(h) for h in self.hosts}},
                "addresses": {h: CHAIN_ADDRS[h] for h in self.hosts}, "subnet": CHAIN_SUBNET,
                "bridge": BRIDGE, "ports": {h: f"sw-{h}"[:15] for h in self.hosts},
                "what": "one network namespace per element, each joined by a veth pair to a Linux "
                        "bridge in a switch namespace (sipperf.lab.netns.ChainTopology)",
            }
        except Exception:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        results = []
        for ns, rid in zip(reversed(self.made), reversed(self._rids[:len(self.made)])):
            res = delete_namespace(ns)
            self.log.done(rid, res)
            results.append({"ns": ns, **res})
        for rid in self._rids[len(self.made):]:
            self.log.done(rid, {"restored": True, "note": "never made"})
        if results or self._rids:
            self.record["deleted"] = results
        self.made = []
        self._rids = []
