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
* when several unpaired copies could be the one an egress copy forwards (a retransmission
  arrived before the egress), or the egress repeats a 2xx to INVITE, the egress is paired
  with the earliest copy consistent with a FIFO socket (:func:`choose`, :func:`resolver`): a
  copy overtaken by more messages than any certain pair shows, or held longer than any
  certain pair, was dropped by the kernel before the proxy read it (docs/formats.md,
  "Pairing at a proxy");
* repeated keys (two reliable 180s of RFC 3262 with the same CSeq) pair in order;
* egress copies with no ingress copy — the proxy's own ``100 Trying``, its retransmissions,
  locally generated replies (408) and ACKs — are rows with ``t_arr`` null;
* ingress copies that never leave are rows with ``t_dep`` and ``dst`` null, classified by
  the drop rule (:mod:`.hop`, extra column ``disposition``): hop-by-hop messages (a 100
  Trying, the ACK of a non-2xx final response, a CANCEL's response), absorbed
  retransmissions, requests the proxy answered itself, messages in flight when the capture
  ended — and real drops, the only rows with ``dropped=True`` (``drop_reason="no egress"``).

The proxy address is given (``"127.0.0.1:5060"``, ``"[::1]:5060"``) or found from the traffic
(:mod:`.vantage`: the forwarding element that forwards the most).  Over TCP a proxy sends
from ephemeral ports; those sockets are found with it and treated as the proxy.
"""
from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numba import njit

from sipperf.timeline import IngestReport, make_timeline
from sipperf.ingest.pairing import hop
from sipperf.ingest.pairing.vantage import endpoint, find_nodes, parse_socket, prep  # noqa: F401  (endpoint: re-exported)


# ------------------------------------------------------------------ several candidate copies
#: "no bound" for the sojourn test (no certain pair in the capture)
NO_BOUND = np.iinfo(np.int64).max


def overtaken_max(a: np.ndarray, d: np.ndarray) -> int:
    """The largest number of pairs that overtook one pair: max over i of #{j : a[j] > a[i] and
    d[j] < d[i]} (arrival ``a``, departure ``d``, int64 ns; 0 for no pair).  A Fenwick tree over
    the departures' ranks, pairs taken by decreasing arrival: O(n log n).  The sorts run in
    numpy (the pairs come nearly sorted both ways), the tree in :func:`_overtaken_fenwick`."""
    a = np.asarray(a, np.int64)
    d = np.asarray(d, np.int64)
    n = len(a)
    if n == 0:
        return 0
    order = np.argsort(a, kind="stable")
    d_o = d[order]
    # each pair's departure rank: the number of departures strictly smaller than its own
    by_d = np.argsort(d_o, kind="stable")
    ds = d_o[by_d]
    first = np.concatenate([[True], ds[1:] != ds[:-1]])
    rank = np.empty(n, np.int64)
    rank[by_d] = np.maximum.accumulate(np.where(first, np.arange(n, dtype=np.int64), 0))
    return int(_overtaken_fenwick(a[order], rank))


@njit(cache=True, nogil=True)
def _overtaken_fenwick(a_o: np.ndarray, rank: np.ndarray) -> int:
    """:func:`overtaken_max` on pairs sorted by arrival (``a_o``), with their departure ranks."""
    n = a_o.shape[0]
    tree = np.zeros(n + 1, np.int64)
    best = 0
    k = n - 1
    while k >= 0:
        # a block of equal arrivals: query all of it before inserting it (strict a[j] > a[i])
        lo = k
        while lo > 0 and a_o[lo - 1] == a_o[k]:
            lo -= 1
        for m in range(lo, k + 1):
            c = 0
            x = rank[m]
            while x > 0:
                c += tree[x]
                x -= x & (-x)
            if c > best:
                best = c
        for m in range(lo, k + 1):
            x = rank[m] + 1
            while x <= n:
                tree[x] += 1
                x += x & (-x)
        k = lo - 1
    return best


@njit(cache=True, nogil=True)
def overtaken_any(a: np.ndarray, d: np.ndarray) -> bool:
    """Whether any pair overtook another (some j with a[j] > a[i] and d[j] < d[i]): taken by
    arrival, a departure earlier than the latest departure of the strictly earlier arrivals.
    :func:`overtaken_max` > 0, in one pass after the sort."""
    n = a.shape[0]
    order = np.argsort(a, kind="mergesort")
    latest = np.iinfo(np.int64).min
    k = 0
    while k < n:
        hi = k
        while hi + 1 < n and a[order[hi + 1]] == a[order[k]]:
            hi += 1
        for m in range(k, hi + 1):
            if d[order[m]] < latest:
                return True
        for m in range(k, hi + 1):
            if d[order[m]] > latest:
                latest = d[order[m]]
        k = hi + 1
    return False


@njit(cache=True, nogil=True)
def overtakers(ref_a: np.ndarray, ref_d: np.ndarray, a: int, e: int, cap: int) -> int:
    """#{j : ref_a[j] > a and ref_d[j] < e}, counted up to ``cap + 1`` (``ref_a`` sorted)."""
    i = np.searchsorted(ref_a, a, side="right")
    end = np.searchsorted(ref_a, e, side="left")  # arrived at or after e: left after e
    c = 0
    while i < end:
        if ref_d[i] < e:
            c += 1
            if c > cap:
                return c
        i += 1
    return c


@njit(cache=True, nogil=True)
def choose(cand_t: np.ndarray, e: int, ref_a: np.ndarray, ref_d: np.ndarray, t_max: int, soj_max: int) -> int:
    """Index (into ``cand_t``, arrival instants in arrival order) of the copy an egress copy at
    ``e`` forwards: the earliest one held no longer than ``soj_max`` and overtaken by at most
    ``t_max`` certain pairs; -1 when none is (the proxy sent it of its own accord)."""
    for k in range(cand_t.shape[0]):
        if e - cand_t[k] <= soj_max and overtakers(ref_a, ref_d, cand_t[k], e, t_max) <= t_max:
            return k
    return -1


def concurrent(t_in: np.ndarray, t_out: np.ndarray) -> bool:
    """True when a relayed message overtook another (arrived later, left earlier): the proxy
    processes messages concurrently (several workers on one socket).  A single reader is FIFO
    and never shows it.  ``t_in``/``t_out``: instants of the relayed messages (NaN rows ignored)."""
    t_in = np.asarray(t_in, dtype=np.float64)
    t_out = np.asarray(t_out, dtype=np.float64)
    ok = ~np.isnan(t_in) & ~np.isnan(t_out)
    return bool(ok.any() and overtaken_any(t_in[ok].astype(np.int64), t_out[ok].astype(np.int64)))


@dataclass
class Resolver:
    """What the capture's certain pairs show (see :func:`resolver`)."""

    ref_a: np.ndarray      #: arrivals of the certain pairs, sorted (int64 ns)
    ref_d: np.ndarray      #: their departures, in the same order
    t_max: int             #: most certain pairs that overtook one certain pair
    soj_max: int           #: longest sojourn of a certain pair (ns; NO_BOUND without any)

    def choose(self, cand_t, e: int) -> int:
        return int(choose(np.asarray(cand_t, np.int64), int(e), self.ref_a, self.ref_d, self.t_max, self.soj_max))

    def note(self, n_amb: int, n_later: int, n_none: int) -> str:
        soj = "no bound" if self.soj_max == NO_BOUND else f"{self.soj_max / 1e3:.0f} µs"
        return (f"{n_amb} egress copies had several candidate ingress copies (retransmissions) or repeated a "
                f"2xx: {n_later} paired with a later copy than FIFO, {n_none} with none (a copy overtaken by "
                f"more than {self.t_max} certain pairs, or held longer than the longest certain sojourn, "
                f"{soj}, was not the one that left)")


def resolver(a: np.ndarray, d: np.ndarray) -> Resolver:
    """The FIFO evidence of the certain pairs (arrival ``a``, departure ``d``, int64 ns): pairs
    whose egress copy had one candidate ingress copy, in transactions where no egress copy had
    several."""
    a = np.asarray(a, np.int64)
    d = np.asarray(d, np.int64)
    o = np.argsort(a, kind="stable")
    return Resolver(a[o], d[o], int(overtaken_max(a, d)), int((d - a).max()) if len(a) else int(NO_BOUND))


#: an egress copy stamped before its ingress copy by at most this is still paired with it
INVERTED_MAX_NS = 1_000_000_000
#: the ``clock`` column of a message whose egress copy was stamped before its ingress copy
INVERTED = "egress stamped before ingress"
#: the ``clock`` column of a message whose stamps the clock check could not vouch for
STAMP_UNKNOWN = "stamp repaired or clock step between the copies"


def inverted_note(n: int) -> str:
    return (f"{n} messages left the proxy with an egress copy stamped before their ingress copy (by at most "
            f"{INVERTED_MAX_NS // 10**6} ms; the interfaces' clocks disagree, or a copy was stamped early): "
            "paired and counted as relayed, their sojourn left out (unknown)")


def _pair_inverted(egress_only: list, unpaired_in: np.ndarray, partner: np.ndarray, keys, src_ep, dst_ep,
                   frame: np.ndarray, ts: np.ndarray) -> tuple[list, np.ndarray]:
    """Pairs that FIFO in time order cannot make: an egress-only copy with the key of an unpaired
    ingress copy, written after it in the file (captured after it) but stamped before it, by at
    most :data:`INVERTED_MAX_NS`, and not sent back to its sender.  Sets ``partner``; returns
    (the egress-only copies left, the ingress rows paired so)."""
    inverted = np.zeros(len(partner), bool)
    if not egress_only or not unpaired_in.any():
        return egress_only, inverted
    by_key: dict = defaultdict(list)
    for i in np.flatnonzero(unpaired_in).tolist():
        by_key[keys[i]].append(i)
    left = []
    for e in egress_only:
        cands = by_key.get(keys[e])
        hit = -1
        if cands:
            for j, i in enumerate(cands):
                if src_ep[i] != dst_ep[e] and frame[e] > frame[i] and 0 < ts[i] - ts[e] <= INVERTED_MAX_NS:
                    hit = j
                    break
        if hit < 0:
            left.append(e)
            continue
        i = cands.pop(hit)
        partner[i] = e
        inverted[i] = True
    return left, inverted


def _norm_proxy(proxy) -> str:
    """The canonical 'ip:port' of a proxy given as text or (host, port); ValueError says what is wrong."""
    return parse_socket(proxy)


def hop_by_hop(p: pd.DataFrame) -> np.ndarray:
    """Rows that are hop-by-hop by RFC 3261: a 100 Trying, a response to CANCEL, and an ACK of an
    INVITE whose final response was 3xx-6xx (no 2xx seen for that Call-ID and CSeq)."""
    st = pd.to_numeric(p["status"], errors="coerce")
    cm = p["cseq_method"].astype("string").str.upper()
    resp = p["method"].isna()
    out = (resp & (st == 100)).fillna(False).to_numpy(bool)
    out |= (resp & (cm == "CANCEL")).fillna(False).to_numpy(bool)
    inv = resp & (cm == "INVITE") & (st >= 200)
    if inv.any():
        txk = p["call_id"].astype("string").fillna("") + "\x00" + p["cseq"].astype("string").fillna("")
        fin = pd.DataFrame({"k": txk[inv], "ok": (st[inv] < 300)}).groupby("k")["ok"].agg(["any", "size"])
        non2xx = set(fin.index[~fin["any"]])
        ack = (p["method"].astype("string").str.upper() == "ACK").fillna(False).to_numpy(bool)
        out |= ack & txk.isin(non2xx).to_numpy(bool)
    return out


def find_proxy(packets: pd.DataFrame) -> tuple[str, set[str]]:
    """The (busiest) proxy's socket and every socket it uses (TCP ephemeral ports), from the traffic."""
    nodes = find_nodes(prep(packets))
    if not nodes:
        raise ValueError("no message is received and later re-sent: no proxy in this capture")
    return nodes[0].socket, set(nodes[0].sockets)


def pair_at_proxy(packets: pd.DataFrame, proxy=None, *, stateful: bool = True,
                  run_id: str | None = None, sockets: set[str] | None = None,
                  capture_end: float | None = None) -> tuple[pd.DataFrame, IngestReport]:
    """Timeline (t_arr, t_dep per message copy) from a packet table of ``read_packets``.

    ``proxy``: its socket (``"ip:port"``, ``"[v6]:port"`` or ``(ip, port)``), found from the
    traffic when None (ValueError if nothing is forwarded).  ``sockets``: every socket the
    proxy uses (default: those found with it, :func:`.vantage.find_nodes`).
    ``stateful`` (default, e.g. Kamailio/OpenSIPS with ``tm``): a request copy the proxy sends
    with the same key and top-Via branch as one it already sent is its own timer retransmission
    (egress only) — it never relays a retransmission it received; so is a final response
    (other than a 2xx to INVITE) it sends again to the same receiver (its server transaction
    answering a request retransmission, RFC 3261 §17.2.1-2).
    ``stateful=False`` pairs retransmissions FIFO like any other copy (a stateless proxy
    forwards each one).  Unforwarded copies are classified by the drop rule (:mod:`.hop`,
    extra column ``disposition``); only real drops get ``dropped=True``.  ``capture_end``
    (ns; default: the last packet) bounds the "in flight at capture end" class.
    """
    rep = IngestReport(source="pcap-pairing")
    rep.read = len(packets)
    if len(packets) == 0:
        rep.check()
        return make_timeline({}), rep
    p = packets if {"src_ep", "dst_ep", "key"} <= set(packets.columns) else prep(packets)
    p = p.reset_index(drop=True)
    if proxy is None or sockets is None:
        nodes = find_nodes(p)
        if proxy is None:
            if not nodes:
                raise ValueError("no message is received and later re-sent: give the proxy address")
            proxy = nodes[0].socket
            rep.notes.append(f"proxy found from the traffic: {proxy}")
        else:
            proxy = _norm_proxy(proxy)
        node = next((nd for nd in nodes if proxy in nd.sockets), None)
        socks = set(node.sockets) if node is not None else {proxy}
    else:
        proxy = _norm_proxy(proxy)
        socks = set(sockets) | {proxy}
    if capture_end is None:
        capture_end = float(p["ts_ns"].max())
    if len(socks) > 1:
        rep.notes.append(f"proxy also uses {sorted(socks - {proxy})}")
    src_in = p["src_ep"].isin(socks).to_numpy()
    dst_in = p["dst_ep"].isin(socks).to_numpy()
    ingress = dst_in & ~src_in
    egress = src_in & ~dst_in
    rep.skip("not to or from the proxy", int((~src_in & ~dst_in).sum()))
    rep.skip("proxy to itself", int((src_in & dst_in).sum()))
    rep.parsed = int((ingress | egress).sum())

    order = np.lexsort((np.arange(len(p)), p["frame"].to_numpy(), p["ts_ns"].to_numpy()))
    keys = p["key"].to_numpy(object).copy()
    # hop-by-hop messages are never relayed: each ends at the proxy or starts there (§16.7 step 5,
    # §16.10, §17.1.1.3), so they are not paired even when one arrives before its look-alike leaves
    hbh = hop_by_hop(p)
    keys[hbh] = keys[hbh] + "\x00hop-by-hop\x00" + np.flatnonzero(hbh).astype(str).astype(object)
    src_ep = p["src_ep"].to_numpy(object)
    dst_ep = p["dst_ep"].to_numpy(object)
    partner = np.full(len(p), -1, dtype=np.int64)  # ingress row -> egress row
    is_req = p["method"].notna().to_numpy() & (p["method"].astype("string") != "ACK").fillna(False).to_numpy()
    st = pd.to_numeric(p["status"], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    inv = (p["cseq_method"].astype("string").str.upper() == "INVITE").to_numpy(dtype=bool, na_value=False)
    is_final = p["method"].isna().to_numpy(bool) & (st >= 200) & ~(inv & (st < 300))
    is_ok_inv = p["method"].isna().to_numpy(bool) & inv & (st >= 200) & (st < 300)
    branch = p["via_branch"].astype("string").fillna("").to_numpy(object)
    ts = p["ts_ns"].to_numpy(np.int64)
    group = (p["call_id"].astype("string").fillna("") + "\x00"
             + p["cseq"].astype("string").fillna("")).to_numpy(object)

    def pair(rows, res: Resolver | None):
        """FIFO pairing over ``rows`` (capture order); with ``res``, an egress copy with several
        candidate copies takes ``res.choose``'s.  Returns (egress only, transactions where an
        egress copy had several candidates, how many such egress copies, how many of them were
        paired with a later copy than the first)."""
        queues: dict[str, deque] = defaultdict(deque)
        egress_only, amb = [], set()
        sent: set = set()
        sent_2xx: set = set()
        n_amb = n_later = n_none = 0
        for i in rows:
            if ingress[i]:
                queues[keys[i]].append(i)
            elif egress[i]:
                if stateful and (is_req[i] or is_final[i]):
                    # the proxy's own retransmission: a request with the branch of one it sent, or a
                    # final response (not a 2xx to INVITE) it already sent to that receiver
                    tag = (keys[i], branch[i] if is_req[i] else dst_ep[i])
                    if tag in sent:
                        egress_only.append(i)
                        continue
                    sent.add(tag)
                # a 2xx to INVITE sent again to the same receiver: a relayed retransmission of the
                # callee's, or the proxy's own answer to a retransmitted INVITE -- ambiguous
                again = False
                if stateful and is_ok_inv[i]:
                    again = (keys[i], dst_ep[i]) in sent_2xx
                    sent_2xx.add((keys[i], dst_ep[i]))
                q = queues.get(keys[i])
                hit = -1
                if q:
                    d = dst_ep[i]
                    cands = [j for j, c in enumerate(q) if src_ep[c] != d]
                    if cands:
                        k = 0
                        if len(cands) > 1 or again:
                            amb.add(group[i])
                            n_amb += 1
                            if res is not None:
                                k = res.choose(ts[[q[j] for j in cands]], ts[i])
                                n_later += k > 0
                                n_none += k < 0
                        if k >= 0:
                            hit = q[cands[k]]
                            del q[cands[k]]
                if hit >= 0:
                    partner[hit] = i
                else:
                    egress_only.append(i)
        return egress_only, amb, n_amb, n_later, n_none

    egress_only, amb, n_amb, _, _ = pair(order, None)
    if amb:
        # transactions where an egress copy could forward several copies: paired again, with the
        # evidence of the certain pairs (every other transaction) -- see choose() and resolver()
        in_amb = pd.Series(group).isin(amb).to_numpy()
        sure = ingress & (partner >= 0) & ~in_amb
        res = resolver(ts[sure], ts[partner[sure]])
        partner[in_amb] = -1
        egress_only = [i for i in egress_only if not in_amb[i]]
        eo2, _, n_amb, n_later, n_none = pair(order[in_amb[order]], res)
        pos = np.empty(len(order), np.int64)
        pos[order] = np.arange(len(order))
        egress_only = sorted(egress_only + eo2, key=lambda i: pos[i])
        amb_note = res.note(n_amb, n_later, n_none)
    else:
        amb_note = None

    frame = p["frame"].to_numpy(np.int64)
    egress_only, inverted = _pair_inverted(egress_only, ingress & (partner < 0) & ~hbh, partner, keys, src_ep,
                                           dst_ep, frame, ts)
    ins = np.flatnonzero(ingress)
    outs = partner[ins]
    paired = outs >= 0
    eo = np.asarray(egress_only, dtype=np.int64)

    def col(name, idx):
        return p[name].to_numpy(object)[idx] if len(idx) else np.array([], dtype=object)

    safe_out = np.where(paired, outs, ins)  # placeholder index where unpaired (masked below)
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
        "via_branch": col("via_branch", rows),
        "transport": col("transport", rows),
        "proxy": proxy,
        "frame_in": frame_in,
        "frame_out": frame_out,
        "size_out": size_out,
    })
    t0 = int(ts.min())  # instants relative to the first packet: float64 keeps every ns
    t_in = (ts[rows] - t0).astype(np.float64)
    t_in[n_in:] = np.nan
    t_out = np.where(np.concatenate([paired, np.ones(n_eo, bool)]),
                     (ts[np.concatenate([safe_out, eo])] - t0).astype(np.float64), np.nan)
    inv = np.concatenate([inverted[ins], np.zeros(n_eo, bool)])
    if inv.any():
        # an egress copy stamped before its ingress copy: relayed, its sojourn unknown (the
        # classification sees it as relayed at once; the egress instant is then left out)
        t_out = np.where(inv, t_in, t_out)
    clock = np.where(inv, INVERTED, None).astype(object)
    unk = np.zeros(len(tl), bool)
    if "clock_flags" in p.columns:
        # a copy's stamp repaired, or a clock step undone between the two copies: the time in the
        # proxy is unknown (ingest/clock.py); the message is counted as what it was
        from sipperf.ingest.clock import unknown_sojourn
        fl = p["clock_flags"].to_numpy(np.int64)
        f_in = np.concatenate([fl[ins], fl[eo]])
        f_out = np.concatenate([np.where(paired, fl[safe_out], fl[ins]), fl[eo]])
        unk = unknown_sojourn(f_in, f_out) & ~inv
    longest = None
    if unk.any():  # the drop rule's longest sojourn: from the pairs whose time is known
        ok = ~np.isnan(t_in) & ~np.isnan(t_out) & ~unk & ~inv
        longest = float(np.max(t_out[ok] - t_in[ok])) if ok.any() else np.nan
    # concurrency from the pairs whose time in the proxy is known (an inverted pair's egress
    # instant is its ingress one, which would look like overtaking)
    known = ~unk & ~inv
    disp = hop.classify(tl, t_in, t_out, float(int(capture_end) - t0), longest=longest,
                        concurrent=concurrent(t_in[known], t_out[known]))
    # the order of the rows: by their first instant as captured (before any is left out below)
    first = tl["t_arr"].fillna(tl["t_dep"]).to_numpy(dtype=np.int64)
    if unk.any():
        clock[unk] = STAMP_UNKNOWN
        # an arrival whose stamp was repaired: no instant at all (the row still counts)
        tl.loc[unk & ((f_in & 1) == 1) & (np.arange(len(tl)) < n_in), "t_arr"] = pd.NA
        tl.loc[unk, "t_dep"] = pd.NA
        rep.notes.append(f"{int(unk.sum())} messages had a copy with a repaired stamp, or a clock step between "
                         "their copies: counted as what they were, their time in the proxy left out")
    if inv.any():
        tl.loc[inv, "t_dep"] = pd.NA
        rep.notes.append(inverted_note(int(inv.sum())))
    if (clock != None).any():  # noqa: E711
        tl["clock"] = pd.array(clock, dtype="string")

    dropped = disp == hop.DROPPED
    tl["dropped"] = pd.array(dropped, dtype="boolean")
    tl["drop_reason"] = pd.array(np.where(dropped, "no egress", None), dtype="string")
    tl["disposition"] = pd.array(disp, dtype="string")
    if run_id is not None:
        tl["run_id"] = run_id
    tl = tl.iloc[np.lexsort((tl["frame_in"].fillna(tl["frame_out"]).to_numpy(np.int64), first))]
    tl = make_timeline(tl.reset_index(drop=True))
    rep.messages = len(tl)
    rep.notes.append(f"{int(paired.sum())} paired, {int((~paired).sum())} without egress, "
                     f"{n_eo} egress only (proxy-originated or retransmitted by the proxy)")
    if amb_note:
        rep.notes.append(amb_note)
    rep.notes.append("dispositions: " + ", ".join(f"{k} {v}" for k, v in hop.counts(tl["disposition"]).items()))
    rep.check()
    return tl, rep
