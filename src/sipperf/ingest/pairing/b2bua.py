"""A back-to-back user agent (B2BUA: Asterisk, FreeSWITCH, an SBC, Sippy): correlate its legs.

A B2BUA ends the caller's dialog (leg A) and starts a new one towards the callee (leg B) with
its own Call-ID, tags, CSeq numbers and branches, so no message is *forwarded* as such and the
proxy pairing finds nothing.  Its legs are correlated here:

1. **initial INVITEs**: the first INVITE of each Call-ID (no To tag);
2. a socket X is a B2BUA candidate when it receives initial INVITEs and sends initial INVITEs
   of other Call-IDs to someone else than their caller;
3. each received INVITE (leg A, arrival t) is matched to a sent INVITE (leg B) of X sent within
   :data:`WINDOW_S` after t, scored by the correlation evidence the capture holds: a
   correlation header (Session-ID, X-Call-ID, ... see ``sipmsg.CORRELATION_HEADERS``) on leg B
   holding leg A's Call-ID or the same value as on leg A (3 points), the same From user (1),
   the same To user (1), the same Contact user (1).  The best score wins, then the
   earliest; each leg B is used once.  When the capture has header columns, a pair needs at
   least one point; timing alone is used only when it has none;
4. X is a B2BUA when at least half of its received initial INVITEs found a leg B.

Then, per leg pair, the messages are paired like a proxy's (:mod:`.pairing`) across the legs:
the k-th original (not retransmitted) request of a method arriving on one leg with the k-th
sent on the other leg, the k-th response of a status arriving on one leg with the k-th sent
on the other (each later in time).  Each row describes the message as the **caller's leg**
carries it (``call_id``, ``cseq`` of leg A), so the RFC 6076 metrics read the caller side, and
``t_dep - t_arr`` is the B2BUA's own delay for that message.  Extra columns: ``leg`` ("A" or
"B": where the message arrived, or left for originated rows), ``leg_call_id`` (the Call-ID of
the copy on the other leg).

Disposition (:mod:`.hop`) at a B2BUA: matched pairs are ``relayed``, copies only sent are
``originated`` (its own 100 Trying, the ACK it sends the callee, retransmissions), received
retransmissions are ``absorbed: retransmission``; other received messages that start nothing
on the other leg are ``terminated at B2BUA`` (a B2BUA ends each dialog: a 100 Trying, an ACK,
a BYE it answers itself), except an initial INVITE that got neither a leg B nor a final
response, which is ``dropped``.
"""
from __future__ import annotations

from collections import defaultdict, deque
from typing import Any

import numpy as np
import pandas as pd

from sipperf.ingest.pairing import hop

WINDOW_S = 2.0
TERMINATED = "terminated at B2BUA"
HEADER_COLS = ("from_uri", "to_uri", "contact_uri", "corr_id")


def _user(uri: pd.Series) -> pd.Series:
    """The user part of a SIP URI ('' when none)."""
    u = uri.astype("string").fillna("").str.replace(r"^[a-zA-Z]+:", "", regex=True)
    return u.where(u.str.contains("@", regex=False), "").str.split("@").str[0].fillna("")


class _Rec:
    """A row as attributes (column names like ``call_id``; no clash with pandas methods)."""

    def __init__(self, d: dict):
        self.__dict__.update({k: ("" if v is None or v is pd.NA or (isinstance(v, float) and v != v) else v)
                              for k, v in d.items()})


def _initial_invites(p: pd.DataFrame) -> pd.DataFrame:
    inv = p[(p["method"].astype("string") == "INVITE").fillna(False)]
    if "to_tag" in inv.columns:
        inv = inv[inv["to_tag"].isna() | (inv["to_tag"].astype("string") == "")]
    inv = inv.sort_values(["ts_ns", "frame"], kind="stable")
    return inv.drop_duplicates("call_id", keep="first")


def find_b2bua(p: pd.DataFrame) -> dict[str, Any] | None:
    """The B2BUA of a prepped packet table (:func:`.vantage.prep`) and its leg pairs, or None."""
    inv = _initial_invites(p)
    if inv.empty:
        return None
    have_hdr = all(c in inv.columns for c in HEADER_COLS)
    if have_hdr:
        inv = inv.assign(fu=_user(inv["from_uri"]).to_numpy(), tu=_user(inv["to_uri"]).to_numpy(),
                         cu=_user(inv["contact_uri"]).to_numpy(),
                         corr=inv["corr_id"].astype("string").fillna("").str.strip().to_numpy(object))
    best = None
    for x in sorted(set(inv["dst_ep"]) & set(inv["src_ep"])):
        rin = inv[inv["dst_ep"] == x]
        sout = inv[inv["src_ep"] == x]
        used: set = set()
        pairs = []
        s_ts = sout["ts_ns"].to_numpy(np.int64)
        for r in rin.to_dict("records"):
            r = _Rec(r)
            ok = (s_ts >= r.ts_ns) & (s_ts - r.ts_ns <= WINDOW_S * 1e9)
            ok &= (sout["call_id"] != r.call_id).fillna(True).to_numpy(bool)
            ok &= (sout["dst_ep"] != r.src_ep).fillna(True).to_numpy(bool)
            cand = np.flatnonzero(ok)
            cand = [c for c in cand if c not in used]
            if not cand:
                continue
            if have_hdr:
                sc = []
                for c in cand:
                    s = _Rec(sout.iloc[c].to_dict())
                    score = 0
                    if s.corr and (s.corr == r.corr or r.call_id in s.corr):
                        score += 3
                    score += sum(1 for a, b in ((r.fu, s.fu), (r.tu, s.tu), (r.cu, s.cu)) if a and a == b)
                    sc.append(score)
                k = int(np.argmax(sc))  # first maximum = earliest
                if sc[k] < 1:
                    continue
                c = cand[k]
            else:
                c = cand[0]
            used.add(c)
            pairs.append((str(r.call_id), str(sout.iloc[c]["call_id"]),
                          int(sout.iloc[c]["ts_ns"]) - int(r.ts_ns)))
        if pairs and len(pairs) >= 0.5 * len(rin) and (best is None or len(pairs) > len(best[1])):
            best = (x, pairs, len(rin))
    if best is None:
        return None
    x, pairs, n_in = best
    return {"socket": x, "sockets": [x], "legs": len(pairs), "initial_invites_in": n_in,
            "by": "timing + From/To/Contact/correlation headers" if have_hdr else "timing only",
            "pairs": pairs}


def pair_legs(p: pd.DataFrame, b: dict[str, Any], capture_end: float) -> pd.DataFrame:
    """The B2BUA's timeline rows (see the module doc) from a prepped packet table."""
    socks = set(b["sockets"])
    a_of = {}
    for a, bb, _ in b["pairs"]:
        a_of[a] = (a, "A")
        a_of[bb] = (a, "B")
    other = {a: bb for a, bb, _ in b["pairs"]}
    other.update({bb: a for a, bb, _ in b["pairs"]})
    p = p[p["call_id"].isin(list(a_of)) & (p["src_ep"].isin(socks) ^ p["dst_ep"].isin(socks))]
    p = p.sort_values(["ts_ns", "frame"], kind="stable").reset_index(drop=True)
    n = len(p)
    cid = p["call_id"].astype(str).to_numpy()
    grp = np.array([a_of[c][0] for c in cid], dtype=object)
    leg = np.array([a_of[c][1] for c in cid], dtype=object)
    ingress = p["dst_ep"].isin(socks).to_numpy()
    is_req = p["method"].notna().to_numpy()
    meth = p["method"].astype("string").fillna("").to_numpy(object)
    st = p["status"].astype("Int64").astype("string").fillna("").to_numpy(object)
    cm = p["cseq_method"].astype("string").fillna("").to_numpy(object)
    br = p["via_branch"].astype("string").fillna("").to_numpy(object)
    src, dst = p["src_ep"].to_numpy(object), p["dst_ep"].to_numpy(object)
    cseq = p["cseq"].astype("string").fillna("").to_numpy(object)
    ts = p["ts_ns"].to_numpy(np.int64)
    # retransmissions: later identical copies (same leg message, sender, receiver, branch)
    seen: set = set()
    retrans = np.zeros(n, bool)
    for i in range(n):
        k = (cid[i], cseq[i], meth[i] or st[i], cm[i], src[i], dst[i], br[i])
        retrans[i] = k in seen and meth[i] != "ACK"
        seen.add(k)
    queues: dict[tuple, deque] = defaultdict(deque)
    partner = np.full(n, -1, np.int64)
    used_out = np.zeros(n, bool)
    for i in range(n):
        if retrans[i]:
            continue
        what = meth[i] if is_req[i] else f"{st[i]}/{cm[i]}"
        if ingress[i]:
            queues[(grp[i], leg[i], what)].append(i)
        else:
            q = queues.get((grp[i], "A" if leg[i] == "B" else "B", what))
            if q:
                j = q.popleft()
                partner[j] = i
                used_out[i] = True
    rows = []
    ins = np.flatnonzero(ingress)
    final_a = set()
    for i in np.flatnonzero(~ingress & ~is_req):
        if leg[i] == "A" and st[i] and int(st[i]) >= 200:
            final_a.add((grp[i], cm[i]))
    longest = max((ts[partner[i]] - ts[i] for i in ins if partner[i] >= 0), default=None)
    horizon = capture_end - longest if longest is not None else np.inf
    for i in ins:
        j = partner[i]
        ident = i if leg[i] == "A" or j < 0 else j
        if j >= 0:
            disp = hop.RELAYED
        elif retrans[i]:
            disp = hop.ABSORBED_RETRANS
        elif is_req[i] and meth[i] == "INVITE" and leg[i] == "A" and (grp[i], "INVITE") not in final_a:
            disp = hop.IN_FLIGHT if ts[i] > horizon else hop.DROPPED
        else:
            disp = TERMINATED
        rows.append((ident, i, j, disp, leg[i]))
    for i in np.flatnonzero(~ingress & ~used_out):
        rows.append((i, -1, i, hop.ORIGINATED, leg[i]))
    idx = np.array([r[0] for r in rows], dtype=np.int64)
    t_in = np.array([ts[r[1]] if r[1] >= 0 else -1 for r in rows], dtype=np.int64)
    t_out = np.array([ts[r[2]] if r[2] >= 0 else -1 for r in rows], dtype=np.int64)
    disp = np.array([r[3] for r in rows], dtype=object)
    out_leg = np.array([r[4] for r in rows], dtype=object)
    frame = p["frame"].to_numpy(np.int64)
    sub = p.iloc[idx]
    t_arr = pd.array(t_in, dtype="Int64")
    t_arr[t_in < 0] = pd.NA
    t_dep = pd.array(t_out, dtype="Int64")
    t_dep[t_out < 0] = pd.NA
    fin = pd.array(np.array([frame[r[1]] if r[1] >= 0 else 0 for r in rows], dtype=np.int64), dtype="Int64")
    fin[t_in < 0] = pd.NA
    fout = pd.array(np.array([frame[r[2]] if r[2] >= 0 else 0 for r in rows], dtype=np.int64), dtype="Int64")
    fout[t_out < 0] = pd.NA
    dropped = disp == hop.DROPPED
    tl = pd.DataFrame({
        "call_id": sub["call_id"].to_numpy(object), "cseq": sub["cseq"].to_numpy(object),
        "cseq_method": sub["cseq_method"].to_numpy(object),
        "kind": np.where(sub["method"].isna().to_numpy(), "response", "request"),
        "method": sub["method"].to_numpy(object), "status": sub["status"].to_numpy(object),
        "src": np.array([src[r[1]] if r[1] >= 0 else src[r[2]] for r in rows], dtype=object),
        "dst": np.array([dst[r[2]] if r[2] >= 0 else None for r in rows], dtype=object),
        "size": pd.array(sub["size"].to_numpy(), dtype="Int64"),
        "t_arr": t_arr, "t_dep": t_dep,
        "dropped": pd.array(dropped, dtype="boolean"),
        "drop_reason": np.where(dropped, "no leg B and no answer", None),
        "disposition": disp, "leg": out_leg,
        "leg_call_id": [other.get(c) for c in sub["call_id"].astype(str)],
        "via_branch": sub["via_branch"].to_numpy(object), "transport": sub["transport"].to_numpy(object),
        "proxy": b["socket"], "frame_in": fin, "frame_out": fout,
    })
    first = tl["t_arr"].fillna(tl["t_dep"]).to_numpy(dtype=np.int64)
    return tl.iloc[np.argsort(first, kind="stable")].reset_index(drop=True)
