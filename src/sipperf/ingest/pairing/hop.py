"""The drop rule: what a message that reached a proxy and never left it was.

A stateful proxy (RFC 3261 §16) does not forward every message it receives.  Some messages
are *hop-by-hop*: they end at the proxy by design.  Counting them as drops is wrong (a one-call
capture through Kamailio would report a 20 % packet drop rate), so every message copy that
arrived at the proxy and has no egress copy is classified here, in this order (the first rule
that applies wins):

=====================================  ========================================================
``disposition``                        rule (RFC 3261 section)
=====================================  ========================================================
``dropped`` (overtaken)                a copy that arrived before another copy of the same
                                       message (the identity of the retransmission rule below)
                                       that the proxy relayed: a proxy reads its socket in
                                       arrival order, so had it read this copy it would have
                                       forwarded this one; the kernel dropped it (socket
                                       buffer full) and the sender's retransmission got through
``absorbed: 100 Trying``               a 100 response: hop-by-hop, never forwarded by a
                                       stateful proxy (§16.7 step 5)
``absorbed: ACK of non-2xx``           an ACK whose INVITE (same Call-ID and CSeq number) got a
                                       3xx-6xx final response from the proxy: that ACK belongs
                                       to the proxy's INVITE server transaction (§17.2.1,
                                       §17.1.1.3)
``absorbed: CANCEL response``          a response to CANCEL: CANCEL is hop-by-hop, the proxy
                                       answers the upstream CANCEL itself (§16.10, §9.2)
``absorbed: retransmission``           a copy of a request (same Call-ID, CSeq, method, sender
                                       and top-Via branch) or of a response (same Call-ID, CSeq,
                                       status, sender) the proxy received before; the server
                                       transaction absorbs a request retransmission (§17.2.1,
                                       §17.2.2), the client transaction a response
                                       retransmission (§17.1.1.2).  Not for ACK and not for a
                                       2xx to INVITE: those are forwarded every time (§16.7
                                       step 5, §13.3.1.4)
``absorbed: after final``              a provisional response, or a final response other than
                                       a 2xx to INVITE, of a transaction for which the proxy
                                       had already sent a final response when it arrived, or
                                       relayed a final response that arrived before it (read
                                       first), or another branch's final response as the best
                                       one: "a stateful proxy MUST NOT immediately forward any
                                       other responses" (§16.7 steps 5-6).  Also, when the
                                       capture shows the proxy processing concurrently (a
                                       relayed message overtook another), a provisional
                                       response that arrived before a final of the same sender
                                       that the proxy relayed, no longer before it than the
                                       longest sojourn of a relayed message (so it could still
                                       have been inside when the final arrived): several workers
                                       reading one socket process the two at once and the final
                                       can win the race (the transaction then discards the
                                       provisional, however long the final itself took).  Any
                                       other response that arrived before the proxy's *own*
                                       final (e.g. its 408 on timer C), or before a final of the
                                       same sender that the proxy relayed, was lost: a drop
``absorbed: response to own request``  a response to a request the proxy originated (it sent
                                       the request and never received it)
``answered by proxy``                  a request the proxy answered itself with a final
                                       response to its sender (e.g. 407, 483, 404, 503, a
                                       REGISTER 200, 481 to a CANCEL) after it arrived, instead
                                       of forwarding it
``in flight at capture end``           arrived later than the capture's last instant minus the
                                       longest sojourn of a relayed message: its egress copy
                                       may simply be after the end of the capture
``dropped``                            everything else: a message the proxy should have
                                       forwarded and did not (``dropped=True``)
=====================================  ========================================================

Messages that arrived and left are ``relayed``; messages that only left are ``originated``
(the proxy's own 100 Trying, its retransmissions, its locally generated responses, ACKs and
CANCELs).  The packet drop rate counts only the last class: PDR = dropped / (relayed +
dropped) (see :func:`sipperf.calls.pdr`).

The rule needs only the identity columns (``call_id``, ``cseq``, ``cseq_method``, ``kind``,
``method``, ``status``) and the arrival / departure instants; ``src``/``dst`` (the sender of
the arriving copy, the receiver of the leaving copy) and ``via_branch`` sharpen it when
present (a thesis log has neither ports nor Via, so it matches without them).
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import pandas as pd

RELAYED = "relayed"
ORIGINATED = "originated"
DROPPED = "dropped"
IN_FLIGHT = "in flight at capture end"
ANSWERED = "answered by proxy"
ABSORBED_100 = "absorbed: 100 Trying"
ABSORBED_ACK = "absorbed: ACK of non-2xx"
ABSORBED_CANCEL = "absorbed: CANCEL response"
ABSORBED_RETRANS = "absorbed: retransmission"
ABSORBED_AFTER_FINAL = "absorbed: after final"
ABSORBED_OWN = "absorbed: response to own request"
#: every class, in the order of the rule
DISPOSITIONS: tuple[str, ...] = (
    RELAYED, ORIGINATED, ABSORBED_100, ABSORBED_ACK, ABSORBED_CANCEL, ABSORBED_RETRANS,
    ABSORBED_AFTER_FINAL, ABSORBED_OWN, ANSWERED, IN_FLIGHT, DROPPED,
)
#: classes that are neither relayed, originated nor dropped: the message ended at the proxy by design
NOT_DROPS: tuple[str, ...] = DISPOSITIONS[2:9]


def _col(tl: pd.DataFrame, name: str) -> np.ndarray:
    """A column as an object array of str ('' where absent or null; methods upper case)."""
    if name not in tl.columns:
        return np.full(len(tl), "", dtype=object)
    s = tl[name].astype("string").fillna("")
    return (s.str.upper() if name in ("method", "cseq_method") else s).to_numpy(object)


def classify(tl: pd.DataFrame, t_in: np.ndarray, t_out: np.ndarray,
             capture_end: float | None = None, longest: float | None = None,
             concurrent: bool = False) -> np.ndarray:
    """Disposition of every row (see the module doc).

    ``t_in`` / ``t_out``: float ns (NaN if absent) of the copy arriving at / leaving the proxy.
    ``capture_end``: last instant the capture or log covers (float ns); None: no
    "in flight" class.  ``longest``: the longest sojourn of a relayed message (default: from
    these rows).  ``concurrent``: the proxy reads its socket with several workers at once (a
    relayed message overtook another in the capture,
    :func:`sipperf.ingest.pairing.proxy.concurrent`); only then can a
    provisional response lose the race to its transaction's final (the rule above).  Pass
    instants relative to a reference near them (float64 holds epoch ns only to 256 ns).
    Returns an object array of :data:`DISPOSITIONS` values.
    """
    n = len(tl)
    t_in = np.asarray(t_in, dtype=np.float64)
    t_out = np.asarray(t_out, dtype=np.float64)
    has_in, has_out = ~np.isnan(t_in), ~np.isnan(t_out)
    out = np.full(n, DROPPED, dtype=object)
    out[has_in & has_out] = RELAYED
    out[~has_in & has_out] = ORIGINATED
    todo = np.flatnonzero(has_in & ~has_out)
    if not len(todo):
        return out
    both = has_in & has_out
    if longest is None:
        longest = np.nanmax(t_out[both] - t_in[both]) if both.any() else np.nan
    horizon = capture_end - longest if capture_end is not None and np.isfinite(longest) else np.inf
    # only the Call-IDs of unforwarded rows matter: restrict the look-ups to them
    rel = tl["call_id"].isin(pd.unique(tl["call_id"].to_numpy(object)[todo])).to_numpy(bool)
    tl = tl[rel]
    idx = np.flatnonzero(rel)
    pos = np.full(n, -1, np.int64)
    pos[idx] = np.arange(len(idx))
    todo_all, todo = todo, pos[todo]
    t_in, t_out, has_in, has_out = t_in[idx], t_out[idx], has_in[idx], has_out[idx]
    call = tl["call_id"].astype("string").fillna("").to_numpy(object)
    cseq = tl["cseq"].astype("Int64").astype("string").fillna("").to_numpy(object)
    cm = _col(tl, "cseq_method")
    meth = _col(tl, "method")
    is_req = (tl["kind"].astype("string") == "request").fillna(False).to_numpy(bool)
    status = pd.to_numeric(tl["status"], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    src = _col(tl, "src")
    dst = _col(tl, "dst")
    branch = _col(tl, "via_branch")

    # what the proxy sent: final responses per transaction, originated requests
    finals_sent: dict[tuple, list] = defaultdict(list)     # (call, cseq, cmeth) -> [(t, status, dst)]
    own_req: set = set()
    in_req: set = set()
    for i in np.flatnonzero(has_out):
        if is_req[i]:
            if not has_in[i]:
                own_req.add((call[i], cseq[i], meth[i]))
        elif status[i] >= 200:
            finals_sent[(call[i], cseq[i], cm[i])].append((t_out[i], status[i], dst[i], has_in[i], i))
    for i in np.flatnonzero(has_in & is_req):
        in_req.add((call[i], cseq[i], meth[i]))
    # earliest arrival of each identical copy (retransmission detection), latest relayed one
    first_in: dict[tuple, float] = {}
    last_relayed: dict[tuple, float] = {}
    ident = {}
    for i in np.flatnonzero(has_in):
        k = ((call[i], cseq[i], meth[i], src[i], branch[i]) if is_req[i]
             else (call[i], cseq[i], cm[i], status[i], src[i]))
        ident[i] = k
        t = t_in[i]
        if k not in first_in or t < first_in[k]:
            first_in[k] = t
        if has_out[i] and (k not in last_relayed or t > last_relayed[k]):
            last_relayed[k] = t
    res = np.full(len(tl), DROPPED, dtype=object)
    for i in todo:
        c, q = call[i], cseq[i]
        if last_relayed.get(ident[i], -np.inf) > t_in[i]:
            continue  # overtaken by a later copy of itself that the proxy relayed: dropped
        if is_req[i]:
            m = meth[i]
            if m == "ACK" and any(s >= 300 for _, s, *_ in finals_sent.get((c, q, "INVITE"), ())):
                res[i] = ABSORBED_ACK
            elif m != "ACK" and first_in.get((c, q, m, src[i], branch[i]), t_in[i]) < t_in[i]:
                res[i] = ABSORBED_RETRANS
            elif any(not hi and t >= t_in[i] and (not d or not src[i] or d == src[i])
                     for t, _, d, hi, _ in finals_sent.get((c, q, m), ())):
                res[i] = ANSWERED
            elif t_in[i] > horizon:
                res[i] = IN_FLIGHT
        else:
            s, k = status[i], cm[i]
            ok2xx_invite = k == "INVITE" and 200 <= s < 300
            if s == 100:
                res[i] = ABSORBED_100
            elif k == "CANCEL":
                res[i] = ABSORBED_CANCEL
            elif not ok2xx_invite and first_in.get((c, q, k, s, src[i]), t_in[i]) < t_in[i]:
                res[i] = ABSORBED_RETRANS
            elif not ok2xx_invite and any(t <= t_in[i] or (hi and (t_in[f] < t_in[i] or src[f] != src[i]
                                                                   or (concurrent and 100 < s < 200
                                                                       and t_in[f] > t_in[i]
                                                                       and t_in[f] - t_in[i] <= longest)))
                                          for t, _, _, hi, f in finals_sent.get((c, q, k), ())):
                res[i] = ABSORBED_AFTER_FINAL
            elif (c, q, k) in own_req and (c, q, k) not in in_req:
                res[i] = ABSORBED_OWN
            elif t_in[i] > horizon:
                res[i] = IN_FLIGHT
    out[todo_all] = res[todo]
    return out


def counts(disposition) -> dict[str, int]:
    """Rows per disposition, in the rule's order (other classes after them)."""
    vc = pd.Series(np.asarray(disposition, dtype=object)).value_counts()
    return {**{k: int(vc[k]) for k in DISPOSITIONS if k in vc.index},
            **{str(k): int(v) for k, v in vc.items() if k not in DISPOSITIONS}}


def column(values) -> pd.Categorical:
    """A disposition column (categorical: cheap for millions of rows)."""
    return pd.Categorical(np.asarray(values, dtype=object))
