"""Where was a capture taken?  Find the forwarding elements (proxies) in a packet table.

A capture is only sometimes taken at a proxy.  This module looks at who forwards what:

* a **forwarding edge** R -> S means: a message copy received on socket R (its ``dst``) is
  next sent on, as the same message (same Call-ID, CSeq number and method, or status and CSeq
  method), from socket S, later, by someone other than its sender, with another top-Via
  branch and (when the capture shows it) one Via more for a request, one less for a response
  -- what a proxy does, RFC 3261 §16.6 step 8 (it pushes its own Via) and §16.7 step 3 (it
  pops it).  A retransmission by the original sender is not an edge, nor are two hop-by-hop
  messages that only look alike (the proxy's own ACK of a 487 and the caller's, each with
  one Via);
* a UDP proxy forwards from the socket it receives on (edge R -> R); a TCP proxy opens
  connections from ephemeral ports (R -> E for requests, E -> R for responses); a multi-homed
  proxy receives on one address and sends from another.  The sockets joined by significant
  edges (each at least 10 % of the forwarding its receiving socket does) are one **node**;
* two chained proxies are two nodes: the message P1 sends is next sent by P2, so P1 -> P1
  and P2 -> P2, never P1 -> P2.

Vantage classes (``Vantage.kind``):

``proxy``      one node: the proxy of today's path (per-message sojourn, the drop rule)
``multi-hop``  several nodes: each is a hop with its own sojourn and its own counts
``b2bua``      no node, but a socket receives INVITEs and sends *other* INVITEs (another
               Call-ID) that correlate with them (:mod:`.b2bua`): its per-leg delay
``endpoint``   none of these: a user agent, SIPp, or a plain endpoint; no sojourn, but the
               call-level view of what the capture point saw (:mod:`.endpoint`)

``--proxy`` (``proxy=``) overrides the search: one socket, or several separated by commas
(one per hop, caller side first).
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from sipperf.timeline import IngestError

KINDS = ("proxy", "multi-hop", "b2bua", "endpoint")
#: an edge is significant if it carries at least this share of its receiving socket's forwarding
EDGE_SHARE = 0.10
#: how many later copies of the same message are looked at to find the forwarded one
LOOKAHEAD = 8


def endpoint(addr: pd.Series, port: pd.Series) -> pd.Series:
    """'ip:port', IPv6 in brackets."""
    a = addr.astype("string")
    br = a.str.contains(":", regex=False).fillna(False)
    a = a.where(~br, "[" + a + "]")
    return a + ":" + port.astype("int64").astype("string")


def message_keys(p: pd.DataFrame) -> pd.Series:
    """Call-ID NUL CSeq number NUL CSeq method NUL method-or-status: one message's identity."""
    what = p["method"].astype("string").fillna(p["status"].astype("string"))
    return (p["call_id"].astype("string").fillna("") + "\x00" + p["cseq"].astype("string").fillna("")
            + "\x00" + p["cseq_method"].astype("string").fillna("") + "\x00" + what.fillna(""))


def prep(packets: pd.DataFrame) -> pd.DataFrame:
    """The packet table with ``src_ep``, ``dst_ep`` ('ip:port') and ``key`` added."""
    p = packets.reset_index(drop=True).copy()
    p["src_ep"] = endpoint(p["src"], p["sport"]).astype(str)
    p["dst_ep"] = endpoint(p["dst"], p["dport"]).astype(str)
    p["key"] = message_keys(p).astype(str)
    return p


def forwarding_edges(p: pd.DataFrame) -> pd.DataFrame:
    """(recv, send, n): message copies received on ``recv`` and next sent on from ``send``."""
    if not len(p):
        return pd.DataFrame({"recv": [], "send": [], "n": []})
    order = np.lexsort((p["frame"].to_numpy(np.int64), p["ts_ns"].to_numpy(np.int64),
                        pd.factorize(p["key"])[0]))
    key = pd.factorize(p["key"])[0][order]
    ts = p["ts_ns"].to_numpy(np.int64)[order]
    codes, uniq = pd.factorize(pd.concat([p["src_ep"], p["dst_ep"]], ignore_index=True))
    src, dst = codes[:len(p)][order], codes[len(p):][order]
    br = p["via_branch"].astype("string").fillna("").to_numpy(object)[order]
    # Via count: a forwarded request has one Via more than the copy received, a forwarded
    # response one less (§16.6 step 8, §16.7 step 3); -1 where unknown (then not checked)
    if "via_count" in p.columns:
        vc = pd.to_numeric(p["via_count"], errors="coerce").fillna(-1).to_numpy(np.int64)[order]
    else:
        vc = np.full(len(p), -1, np.int64)
    step = np.where(p["method"].notna().to_numpy()[order], 1, -1)
    n = len(order)
    nxt = np.full(n, -1, np.int64)
    for s in range(1, LOOKAHEAD + 1):
        i = np.arange(n - s)
        j = i + s
        ok = ((nxt[i] < 0) & (key[j] == key[i]) & (src[j] != src[i]) & (ts[j] >= ts[i])
              & ((br[j] != br[i]) | (br[i] == ""))
              & ((vc[i] < 0) | (vc[j] < 0) | (vc[j] == vc[i] + step[i])))
        nxt[i[ok]] = j[ok]
    have = nxt >= 0
    e = pd.DataFrame({"recv": dst[have], "send": src[nxt[have]]})
    e = e.groupby(["recv", "send"]).size().rename("n").reset_index()
    e["recv"] = uniq[e["recv"].to_numpy()]
    e["send"] = uniq[e["send"].to_numpy()]
    return e.sort_values("n", ascending=False, kind="stable").reset_index(drop=True)


@dataclass
class Node:
    """One forwarding element: its main socket, every socket it uses, what it forwarded."""

    socket: str
    sockets: set[str]
    forwarded: int

    def to_dict(self) -> dict[str, Any]:
        return {"socket": self.socket, "sockets": sorted(self.sockets), "forwarded": self.forwarded}


def find_nodes(p: pd.DataFrame, edges: pd.DataFrame | None = None) -> list[Node]:
    """The forwarding elements of a prepped packet table, most forwarding first."""
    e = forwarding_edges(p) if edges is None else edges
    if e.empty:
        return []
    tot = e.groupby("recv")["n"].transform("sum")
    sig = e[e["n"] >= EDGE_SHARE * tot]
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for r, s in zip(sig["recv"], sig["send"]):
        a, b = find(r), find(s)
        if a != b:
            parent[b] = a
    groups: dict[str, set[str]] = {}
    for x in list(parent):
        groups.setdefault(find(x), set()).add(x)
    nodes = []
    for members in groups.values():
        inside = sig[sig["recv"].isin(members) & sig["send"].isin(members)]
        fwd = int(inside["n"].sum())
        if fwd == 0:
            continue
        # the main socket: the member that receives from the most peers outside the node, then
        # the most messages -- a stream listener hears from every connection, while the port the
        # proxy opened to the next hop hears from one peer however many messages it carries
        inb = p[p["dst_ep"].isin(members) & ~p["src_ep"].isin(members)]
        ext = inb.groupby("dst_ep")["src_ep"].agg(["nunique", "size"])
        ext = ext.sort_values(["nunique", "size"], ascending=False, kind="stable")
        main = str(ext.index[0]) if len(ext) else str(inside["recv"].iloc[0])
        nodes.append(Node(main, set(members), fwd))
    return sorted(nodes, key=lambda nd: (-nd.forwarded, nd.socket))


def parse_socket(text: str) -> str:
    """'ip:port' / '[v6]:port' / '::1:5060' / ('ip', port) -> canonical 'ip:port' ('[v6]:port').

    Raises ValueError saying what is wrong (no port, port out of range, not an IP address).
    """
    if isinstance(text, (tuple, list)):
        if len(text) != 2:
            raise ValueError(f"{text!r}: give (address, port)")
        host, port = str(text[0]), str(text[1])
    else:
        s = str(text).strip()
        if not s:
            raise ValueError("empty proxy address: give ip:port, e.g. 10.0.0.3:5060 or [::1]:5060")
        if s.startswith("["):
            host, sep, rest = s[1:].partition("]")
            if not sep or not rest.startswith(":"):
                raise ValueError(f"{s!r}: an IPv6 proxy is written [address]:port, e.g. [::1]:5060")
            port = rest[1:]
        elif s.count(":") == 1:
            host, _, port = s.partition(":")
        elif s.count(":") > 1:  # bare IPv6 host:port, e.g. ::1:5060
            host, _, port = s.rpartition(":")
        else:
            raise ValueError(f"{s!r}: no port; give ip:port, e.g. {s}:5060")
    try:
        ip = ipaddress.ip_address(host.strip())
    except ValueError:
        raise ValueError(f"{host!r} is not an IP address (give the address as the capture shows it, "
                         f"not a host name)") from None
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"port {port!r} is not a number from 1 to 65535")
    return f"[{ip.compressed}]:{int(port)}" if ip.version == 6 else f"{ip.compressed}:{int(port)}"


def parse_proxies(proxy) -> list[str]:
    """One or several (comma-separated, or a list) proxy sockets, canonical."""
    if isinstance(proxy, tuple) and len(proxy) == 2 and not isinstance(proxy[0], (tuple, list)):
        return [parse_socket(proxy)]
    items = proxy if isinstance(proxy, (list, tuple)) else str(proxy).split(",")
    out = [parse_socket(x) for x in items if str(x).strip()]
    if not out:
        raise ValueError("empty proxy address: give ip:port, e.g. 10.0.0.3:5060 or [::1]:5060")
    return out


@dataclass
class Vantage:
    """What a capture shows: its class, its hops (proxies), and what follows from that."""

    kind: str
    hops: list[Node] = field(default_factory=list)
    given: bool = False
    notes: list[str] = field(default_factory=list)
    b2bua: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "proxy_given": self.given,
                             "hops": [h.to_dict() for h in self.hops], "notes": list(self.notes),
                             "what_follows": what_follows(self.kind)}
        if self.b2bua:
            b = {k: v for k, v in self.b2bua.items() if k != "pairs"}
            delays = np.array([x[2] for x in self.b2bua.get("pairs", [])], dtype="float64") / 1e3
            b["invite_delay_us"] = ({"median": float(np.median(delays)), "p99": float(np.percentile(delays, 99))}
                                    if len(delays) else None)
            b["pairs_sample"] = [{"leg_a": a, "leg_b": bb} for a, bb, _ in self.b2bua.get("pairs", [])[:10]]
            d["b2bua"] = b
        return d


def what_follows(kind: str) -> str:
    return {
        "proxy": "per-message sojourn at the proxy (t_dep - t_arr), the drop rule and PDR, RFC 6076 "
                 "metrics at the proxy's caller side",
        "multi-hop": "per-hop sojourn and per-hop counts (hop column), PDR per hop; RFC 6076 metrics "
                     "at the first hop's caller side",
        "b2bua": "the B2BUA's per-leg delay (its legs correlated), RFC 6076 metrics on the caller leg",
        "endpoint": "no proxy: no sojourn and no PDR; RFC 6076 metrics, request->response times per "
                    "transaction type (retransmissions apart) and counts by method/status as seen "
                    "at the capture point",
    }[kind]


def order_hops(p: pd.DataFrame, nodes: list[Node]) -> list[Node]:
    """Caller side first: the hop that sees a request earliest (median over requests)."""
    if len(nodes) < 2:
        return nodes
    req = p[p["method"].notna()]
    t0 = req.groupby("key")["ts_ns"].min()
    rank = []
    for nd in nodes:
        at = req[req["dst_ep"].isin(nd.sockets)].groupby("key")["ts_ns"].min()
        d = (at - t0.reindex(at.index)).to_numpy(dtype="float64")
        rank.append(float(np.median(d)) if len(d) else np.inf)
    return [nodes[i] for i in np.argsort(rank, kind="stable")]


def classify(packets: pd.DataFrame, proxy=None, *, path: Any = "capture") -> tuple[Vantage, pd.DataFrame]:
    """Vantage of a packet table (and the prepped table).  ``proxy`` overrides the search;
    an unusable value raises :class:`IngestError` naming what is wrong."""
    from sipperf.ingest.pairing.b2bua import find_b2bua

    p = prep(packets)
    return classify_prepped(p, proxy, path=path, b2bua=lambda: find_b2bua(p))


def classify_prepped(p: pd.DataFrame, proxy=None, *, path: Any = "capture", b2bua=None
                     ) -> tuple[Vantage, pd.DataFrame]:
    """:func:`classify` on a prepped table (columns src_ep, dst_ep, key, ts_ns, frame,
    via_branch, via_count, method); ``b2bua()`` runs the B2BUA search when no proxy is found
    (:func:`.b2bua.find_b2bua`; None: no B2BUA search)."""
    edges = forwarding_edges(p)
    nodes = find_nodes(p, edges)
    if proxy is not None:
        try:
            socks = parse_proxies(proxy)
        except ValueError as e:
            raise IngestError(path, "--proxy", f"unusable proxy address: {e}") from None
        seen = set(p["src_ep"]) | set(p["dst_ep"])
        hops = []
        for s in socks:
            if s not in seen:
                top = pd.concat([p["src_ep"], p["dst_ep"]]).value_counts().head(6)
                found = ", ".join(n.socket for n in nodes) or "none"
                raise IngestError(path, "--proxy", f"{s} sends or receives no SIP message in this capture "
                                  f"(busiest sockets: {', '.join(top.index)}; proxies found from the "
                                  f"traffic: {found})")
            nd = next((n for n in nodes if s in n.sockets), None)
            hops.append(Node(s, nd.sockets if nd else {s}, nd.forwarded if nd else 0))
        v = Vantage("proxy" if len(hops) == 1 else "multi-hop", hops, given=True)
        for h in hops:
            if h.forwarded == 0:
                v.notes.append(f"{h.socket} (given) forwards no message in this capture: every message "
                               f"it received is unforwarded")
        return v, p
    if nodes:
        hops = order_hops(p, nodes)
        v = Vantage("proxy" if len(hops) == 1 else "multi-hop", hops)
        for h in hops:
            extra = sorted(h.sockets - {h.socket})
            v.notes.append(f"proxy found from the traffic: {h.socket} forwards {h.forwarded} message copies"
                           + (f"; it also uses {extra}" if extra else ""))
        return v, p
    b = b2bua() if b2bua is not None else None
    if b is not None:
        v = Vantage("b2bua", [Node(b["socket"], set(b["sockets"]), 0)], b2bua=b)
        v.notes.append(f"no message is forwarded as such, but {b['socket']} receives INVITEs and sends "
                       f"correlated INVITEs on another Call-ID: a B2BUA ({b['legs']} leg pairs, "
                       f"correlated by {b['by']})")
        return v, p
    v = Vantage("endpoint")
    v.notes.append("no message is received and later forwarded, and no B2BUA leg pair: a capture at a "
                   "user agent, SIPp or an endpoint")
    return v, p
