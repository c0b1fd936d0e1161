"""Pair each SIP message's ingress and egress copy at the proxy: packets -> timeline.

A capture at the proxy sees every message twice: arriving (``t_arr``, thesis T1) and leaving
(``t_dep``, T7).  A transaction-stateful proxy with record-route rewrites Via (adds its own
branch), so copies are matched on what it keeps: Call-ID, CSeq number and method, and the
request method or response status — FIFO per key, in capture order, with the constraint that
the egress copy was sent after the ingress copy and not back to its sender (the direction).

Each copy makes its own timeline row, so

* retransmissions stay apart: a stateful proxy absorbs a retransmitted request (row with no
  egress) and retransmits on its own timer (egress-only rows, recognised by repeating the
  branch of a copy it already sent); other copies pair FIFO;
* repeated keys (two reliable 180s of RFC 3262 with the same CSeq) pair in order;
* egress copies with no ingress copy — the proxy's own ``100 Trying``, its retransmissions,
  locally generated replies (408) and ACKs — are rows with ``t_arr`` null;
* ingress copies that never leave (absorbed retransmissions, hop-by-hop ACKs of non-2xx
  replies, real drops) are rows with ``dropped=True``, ``drop_reason="no egress"`` and
  ``dst`` null.

The proxy address is given (``"127.0.0.1:5060"``, ``"[::1]:5060"``) or found from the traffic:
the socket that receives a message and later sends a copy of it most often.  Over TCP a
proxy sends from ephemeral ports; those sockets are found the same way (sockets that send,
later, messages the proxy received) and treated as the proxy.
"""
from __future__ import annotations

from collections import defaultdict, deque

import numpy as np
import pandas as pd

from ..timeline import IngestReport, make_timeline


def endpoint(addr: pd.Series, port: pd.Series) -> pd.Series:
    """'ip:port', IPv6 in brackets."""
    a = addr.astype("string")
    br = a.str.contains(":", regex=False).fillna(False)
    a = a.where(~br, "[" + a + "]")
    return a + ":" + port.astype("int64").astype("string")


def _norm_proxy(proxy) -> str:
    if isinstance(proxy, (tuple, list)):
        host, port = proxy
        host = str(host)
        return f"[{host}]:{int(port)}" if ":" in host else f"{host}:{int(port)}"
    s = str(proxy).strip()
    if s.count(":") > 1 and not s.startswith("["):  # bare IPv6 host:port, e.g. ::1:5060
        host, _, port = s.rpartition(":")
        return f"[{host}]:{port}"
    return s


def _keys(p: pd.DataFrame) -> pd.Series:
    what = p["method"].astype("string").fillna(p["status"].astype("string"))
    return (p["call_id"].astype("string").fillna("") + "\x00" + p["cseq"].astype("string").fillna("")
            + "\x00" + p["cseq_method"].astype("string").fillna("") + "\x00" + what.fillna(""))


def _forwarding(p: pd.DataFrame) -> pd.DataFrame:
    """(receiver socket, later sender socket) -> number of message keys forwarded that way."""
    recv = p.groupby(["key", "dst_ep"], sort=False)["ts_ns"].min().reset_index()
    send = p.groupby(["key", "src_ep"], sort=False)["ts_ns"].min().reset_index()
    m = recv.merge(send, on="key", suffixes=("_r", "_s"))
    m = m[m["ts_ns_s"] > m["ts_ns_r"]]
    return m.groupby(["dst_ep", "src_ep"]).size().rename("n").reset_index().sort_values(
        "n", ascending=False, kind="stable")


def find_proxy(packets: pd.DataFrame) -> tuple[str, set[str]]:
    """The proxy's socket and every socket it sends from (TCP ephemeral ports), from the traffic."""
    p = _prep(packets)
    fw = _forwarding(p)
    if fw.empty:
        raise ValueError("no message is received and later re-sent: no proxy in this capture")
    top = fw.iloc[0]
    proxy = str(top["dst_ep"])
    return proxy, _aliases(fw, proxy)


def _aliases(fw: pd.DataFrame, proxy: str) -> set[str]:
    socks = {proxy}
    if fw.empty:
        return socks
    mine = fw[fw["dst_ep"] == proxy]
    if not mine.empty:
        best = mine["n"].max()
        socks |= set(mine.loc[mine["n"] >= 0.05 * best, "src_ep"].astype(str))
    return socks


def _prep(packets: pd.DataFrame) -> pd.DataFrame:
    p = packets.reset_index(drop=True).copy()
    p["src_ep"] = endpoint(p["src"], p["sport"]).astype(str)
    p["dst_ep"] = endpoint(p["dst"], p["dport"]).astype(str)
    p["key"] = _keys(p).astype(str)
    return p


def pair_at_proxy(packets: pd.DataFrame, proxy=None, *, stateful: bool = True,
                  run_id: str | None = None) -> tuple[pd.DataFrame, IngestReport]:
    """Timeline (t_arr, t_dep per message copy) from a packet table of ``read_packets``.

    ``stateful`` (default, e.g. Kamailio/OpenSIPS with ``tm``): a request copy the proxy sends
    with the same key and top-Via branch as one it already sent is its own timer retransmission
    (egress only) — it never relays a retransmission it received, which stays "no egress".
    ``stateful=False`` pairs retransmissions FIFO like any other copy (a stateless proxy
    forwards each one).
    """
    rep = IngestReport(source="pcap-pairing")
    rep.read = len(packets)
    if len(packets) == 0:
        rep.check()
        return make_timeline({}), rep
    p = _prep(packets)
    fw = _forwarding(p)
    if proxy is None:
        if fw.empty:
            raise ValueError("no message is received and later re-sent: give the proxy address")
        proxy = str(fw.iloc[0]["dst_ep"])
        rep.notes.append(f"proxy found from the traffic: {proxy}")
    else:
        proxy = _norm_proxy(proxy)
    socks = _aliases(fw, proxy)
    if len(socks) > 1:
        rep.notes.append(f"proxy also sends from {sorted(socks - {proxy})}")
    src_in = p["src_ep"].isin(socks).to_numpy()
    dst_in = p["dst_ep"].isin(socks).to_numpy()
    ingress = dst_in & ~src_in
    egress = src_in & ~dst_in
    rep.skip("not to or from the proxy", int((~src_in & ~dst_in).sum()))
    rep.skip("proxy to itself", int((src_in & dst_in).sum()))
    rep.parsed = int((ingress | egress).sum())

    order = np.lexsort((np.arange(len(p)), p["frame"].to_numpy(), p["ts_ns"].to_numpy()))
    keys = p["key"].to_numpy(object)
    src_ep = p["src_ep"].to_numpy(object)
    dst_ep = p["dst_ep"].to_numpy(object)
    queues: dict[str, deque] = defaultdict(deque)
    partner = np.full(len(p), -1, dtype=np.int64)  # ingress row -> egress row
    egress_only = []
    is_req = p["method"].notna().to_numpy() & (p["method"].astype("string") != "ACK").fillna(False).to_numpy()
    branch = p["via_branch"].astype("string").fillna("").to_numpy(object)
    sent: set = set()
    for i in order:
        if ingress[i]:
            queues[keys[i]].append(i)
        elif egress[i]:
            if stateful and is_req[i]:
                tag = (keys[i], branch[i])
                if tag in sent:  # the proxy's own retransmission
                    egress_only.append(i)
                    continue
                sent.add(tag)
            q = queues.get(keys[i])
            hit = -1
            if q:
                d = dst_ep[i]
                for j, cand in enumerate(q):
                    if src_ep[cand] != d:
                        hit = cand
                        del q[j]
                        break
            if hit >= 0:
                partner[hit] = i
            else:
                egress_only.append(i)

    ins = np.flatnonzero(ingress)
    outs = partner[ins]
    paired = outs >= 0
    eo = np.asarray(egress_only, dtype=np.int64)

    def col(name, idx):
        return p[name].to_numpy(object)[idx] if len(idx) else np.array([], dtype=object)

    safe_out = np.where(paired, outs, ins)  # placeholder index where unpaired (masked below)
    ts = p["ts_ns"].to_numpy(np.int64)
    frame = p["frame"].to_numpy(np.int64)
    size = p["size"].to_numpy()

    def masked(values, mask):
        arr = pd.array(values, dtype="Int64")
        arr[~mask] = pd.NA
        return arr

    n_in, n_eo = len(ins), len(eo)
    t_arr = pd.array(np.concatenate([ts[ins], np.zeros(n_eo, np.int64)]), dtype="Int64")
    t_arr[n_in:] = pd.NA
    t_dep = pd.array(np.concatenate([ts[safe_out], ts[eo]]), dtype="Int64")
    t_dep_arr = t_dep.copy()
    t_dep_arr[np.flatnonzero(~np.concatenate([paired, np.ones(n_eo, bool)]))] = pd.NA
    frame_in = pd.array(np.concatenate([frame[ins], np.zeros(n_eo, np.int64)]), dtype="Int64")
    frame_in[n_in:] = pd.NA
    frame_out = pd.array(np.concatenate([frame[safe_out], frame[eo]]), dtype="Int64")
    frame_out[np.flatnonzero(~np.concatenate([paired, np.ones(n_eo, bool)]))] = pd.NA
    size_out = pd.array(np.concatenate([size[safe_out], size[eo]]), dtype="Int64")
    size_out[np.flatnonzero(~np.concatenate([paired, np.ones(n_eo, bool)]))] = pd.NA
    rows = np.concatenate([ins, eo])
    dst = np.concatenate([np.where(paired, dst_ep[safe_out], None), dst_ep[eo]])
    dropped = np.concatenate([~paired, np.zeros(n_eo, bool)])
    kind = np.where(p["method"].isna().to_numpy()[rows], "response", "request")
    tl = pd.DataFrame({
        "call_id": col("call_id", rows),
        "cseq": p["cseq"].to_numpy(object)[rows],
        "cseq_method": col("cseq_method", rows),
        "kind": kind,
        "method": col("method", rows),
        "status": p["status"].to_numpy(object)[rows],
        "src": src_ep[rows],
        "dst": dst,
        "size": pd.array(size[rows], dtype="Int64"),
        "t_arr": t_arr,
        "t_dep": t_dep_arr,
        "dropped": pd.array(dropped, dtype="boolean"),
        "drop_reason": np.where(dropped, "no egress", None),
        "via_branch": col("via_branch", rows),
        "transport": col("transport", rows),
        "proxy": proxy,
        "frame_in": frame_in,
        "frame_out": frame_out,
        "size_out": size_out,
    })
    if run_id is not None:
        tl["run_id"] = run_id
    first = tl["t_arr"].fillna(tl["t_dep"]).to_numpy(dtype=np.int64)
    tl = tl.iloc[np.lexsort((tl["frame_in"].fillna(tl["frame_out"]).to_numpy(np.int64), first))]
    tl = make_timeline(tl.reset_index(drop=True))
    rep.messages = len(tl)
    rep.notes.append(f"{int(paired.sum())} paired, {int((~paired).sum())} without egress, "
                     f"{n_eo} egress only (proxy-originated or retransmitted by the proxy)")
    rep.check()
    return tl, rep
