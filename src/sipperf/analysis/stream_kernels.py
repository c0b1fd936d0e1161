"""Compiled per-transaction passes of the streaming engine (:mod:`.stream`).

Every function walks a batch of packet (or timeline) rows sorted by transaction group --
(Call-ID, CSeq number) -- and, inside a group, in the order the in-memory path uses.  Each
replicates, on integer codes, one step of the in-memory path; the docstring names it.  Groups
are small (a transaction has a handful of messages), so the rules are written as plain loops
over the group, in the same order of tests as the original.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from sipperf.ingest.pairing import hop
from sipperf.ingest.pairing.proxy import INVERTED_MAX_NS, choose

#: disposition codes: the index in :data:`sipperf.ingest.pairing.hop.DISPOSITIONS`; PROVISIONAL is a
#: row that is "in flight at capture end" or "dropped", decided when the capture has ended
D_RELAYED, D_ORIGINATED, D_100, D_ACK, D_CANCEL, D_RETRANS, D_AFTER_FINAL, D_OWN, D_ANSWERED, D_IN_FLIGHT, \
    D_DROPPED = range(len(hop.DISPOSITIONS))
D_PROVISIONAL = len(hop.DISPOSITIONS)
D_SEEN = D_PROVISIONAL + 1  # the endpoint view
DISPOSITION_NAMES = (*hop.DISPOSITIONS, "provisional", "seen")
assert hop.DISPOSITIONS[D_DROPPED] == hop.DROPPED and hop.DISPOSITIONS[D_ANSWERED] == hop.ANSWERED

ROLE_NONE, ROLE_IN, ROLE_OUT, ROLE_SELF = 0, 1, 2, 3


@njit(cache=True, nogil=True)
def hop_pass(gstart, ts, frame, src, dst, meth, what, cm, cm_up, meth_up, status, branch, ack_raw, sock,
             c_invite, c_ack, c_cancel, stateful, resolve, ref_a, ref_d, t_max, soj_max,
             role, partner, eo, disp, gamb, amb_stats, race_soj, inv):
    """One hop: :func:`sipperf.ingest.pairing.proxy.pair_at_proxy` (hop-by-hop keys, FIFO pairing by
    message key with the direction constraint, the stateful proxy's own retransmissions) and
    :func:`sipperf.ingest.pairing.hop.classify` (the drop rule) for every group.

    Rows of a group in (ts, frame, row) order.  Writes ``role`` (ROLE_*), ``partner`` (the
    egress row of a paired ingress row, else -1), ``eo`` (egress only) and ``disp`` (code of
    each timeline row: ingress rows and egress-only rows; -1 for other rows).  An egress copy
    with several candidate ingress copies marks its group in ``gamb`` and counts in
    ``amb_stats[0]`` (so does a 2xx to INVITE sent again to the same receiver); it takes the
    first candidate (FIFO), or, with ``resolve``, the one
    :func:`sipperf.ingest.pairing.proxy.choose` picks from the certain pairs ``ref_a``/``ref_d``
    (``amb_stats[1]`` counts those paired with a later copy than the first, ``amb_stats[2]``
    those paired with none).  ``race_soj`` (ns, -1: none) is, for an undecided row (``D_PROVISIONAL``) that is a
    provisional response arriving before a relayed final of its sender, how long before that
    final it arrived: a concurrent proxy absorbs it when that is within the longest sojourn (it
    could still have been inside when the final arrived) (:func:`sipperf.ingest.pairing.hop.classify`).  ``inv`` marks the ingress rows
    paired with an egress copy stamped before them (:func:`sipperf.ingest.pairing.proxy._pair_inverted`)."""
    n_groups = gstart.shape[0] - 1
    big = 0
    for g in range(n_groups):
        k = gstart[g + 1] - gstart[g]
        if k > big:
            big = k
    hbh = np.zeros(big, np.bool_)
    kid = np.zeros(big, np.int64)
    has_in = np.zeros(big, np.bool_)
    has_out = np.zeros(big, np.bool_)
    t_out = np.zeros(big, np.int64)
    d_tl = np.zeros(big, np.int64)
    c_row = np.zeros(big, np.int64)
    c_ts = np.zeros(big, np.int64)
    for g in range(n_groups):
        s = gstart[g]
        e = gstart[g + 1]
        k = e - s
        gamb[g] = False
        # ---- roles and hop-by-hop rows (pairing.hop_by_hop) -------------------------------
        fin_inv = False
        ok_inv = False
        for i in range(s, e):
            si = sock[src[i]]
            di = sock[dst[i]]
            if di and not si:
                role[i] = ROLE_IN
            elif si and not di:
                role[i] = ROLE_OUT
            elif si and di:
                role[i] = ROLE_SELF
            else:
                role[i] = ROLE_NONE
            partner[i] = -1
            eo[i] = False
            disp[i] = -1
            if meth[i] < 0 and cm_up[i] == c_invite and status[i] >= 200:
                fin_inv = True
                if status[i] < 300:
                    ok_inv = True
        non2xx = fin_inv and not ok_inv
        for a in range(k):
            i = s + a
            resp = meth[i] < 0
            hbh[a] = (resp and (status[i] == 100 or cm_up[i] == c_cancel)) or (meth_up[i] == c_ack and non2xx)
            kid[a] = a
            if not hbh[a]:
                for b in range(a):
                    j = s + b
                    if not hbh[b] and cm[j] == cm[i] and what[j] == what[i]:
                        kid[a] = b
                        break
        # ---- FIFO pairing in time order ----------------------------------------------------
        for a in range(k):
            i = s + a
            if role[i] != ROLE_OUT:
                continue
            if stateful and meth[i] >= 0 and not ack_raw[i]:
                own = False
                for b in range(a):
                    j = s + b
                    if role[j] == ROLE_OUT and meth[j] >= 0 and not ack_raw[j] and kid[b] == kid[a] \
                            and branch[j] == branch[i]:
                        own = True
                        break
                if own:
                    eo[i] = True
                    continue
            if stateful and meth[i] < 0 and status[i] >= 200 and not (cm_up[i] == c_invite and status[i] < 300):
                own = False
                for b in range(a):
                    j = s + b
                    if role[j] == ROLE_OUT and meth[j] < 0 and kid[b] == kid[a] and dst[j] == dst[i]:
                        own = True
                        break
                if own:
                    eo[i] = True
                    continue
            again = False  # a 2xx to INVITE sent again to the same receiver (ambiguous)
            if stateful and meth[i] < 0 and cm_up[i] == c_invite and status[i] >= 200 and status[i] < 300:
                for b in range(a):
                    j = s + b
                    if role[j] == ROLE_OUT and meth[j] < 0 and kid[b] == kid[a] and dst[j] == dst[i]:
                        again = True
                        break
            nc = 0
            for b in range(a):
                j = s + b
                if role[j] == ROLE_IN and partner[j] < 0 and kid[b] == kid[a] and src[j] != dst[i]:
                    c_row[nc] = j
                    c_ts[nc] = ts[j]
                    nc += 1
            hit = -1
            if nc > 0:
                pick = 0
                if nc > 1 or again:
                    gamb[g] = True
                    amb_stats[0] += 1
                    if resolve:
                        pick = choose(c_ts[:nc], ts[i], ref_a, ref_d, t_max, soj_max)
                        if pick > 0:
                            amb_stats[1] += 1
                        elif pick < 0:
                            amb_stats[2] += 1
                if pick >= 0:
                    hit = c_row[pick]
            if hit >= 0:
                partner[hit] = i
            else:
                eo[i] = True
        # ---- egress copies stamped before their ingress copy (proxy._pair_inverted) -----------
        for a in range(k):
            i = s + a
            inv[i] = False
        for a in range(k):
            i = s + a
            if not eo[i]:
                continue
            for b in range(k):
                j = s + b
                if role[j] == ROLE_IN and partner[j] < 0 and kid[b] == kid[a] and src[j] != dst[i] \
                        and frame[i] > frame[j] and ts[j] > ts[i] and ts[j] - ts[i] <= INVERTED_MAX_NS:
                    partner[j] = i
                    eo[i] = False
                    inv[j] = True
                    break
        # ---- the drop rule for ingress copies that never left (hop.classify) ---------------
        for a in range(k):
            i = s + a
            has_in[a] = role[i] == ROLE_IN
            has_out[a] = (has_in[a] and partner[i] >= 0) or eo[i]
            if has_in[a] and partner[i] >= 0:
                t_out[a] = ts[i] if inv[i] else ts[partner[i]]
                d_tl[a] = dst[partner[i]]
            elif eo[i]:
                t_out[a] = ts[i]
                d_tl[a] = dst[i]
            else:
                d_tl[a] = -1
        for a in range(k):
            i = s + a
            if has_in[a] and has_out[a]:
                disp[i] = D_RELAYED
                continue
            if eo[i]:
                disp[i] = D_ORIGINATED
                continue
            if not has_in[a]:
                continue
            t_in = ts[i]
            race_soj[i] = -1
            res = D_PROVISIONAL
            overtaken = False  # a later copy of the same message was relayed: dropped
            for b in range(k):
                j = s + b
                if has_in[b] and has_out[b] and ts[j] > t_in and src[j] == src[i]:
                    if meth[i] >= 0:
                        if meth[j] >= 0 and meth_up[j] == meth_up[i] and branch[j] == branch[i]:
                            overtaken = True
                            break
                    elif meth[j] < 0 and cm_up[j] == cm_up[i] and status[j] == status[i]:
                        overtaken = True
                        break
            if overtaken:
                disp[i] = D_DROPPED
                continue
            if meth[i] >= 0:  # a request
                m = meth_up[i]
                done = False
                if m == c_ack:
                    for b in range(k):
                        f = s + b
                        if has_out[b] and meth[f] < 0 and status[f] >= 200 and cm_up[f] == c_invite \
                                and status[f] >= 300:
                            res = D_ACK
                            done = True
                            break
                if not done and m != c_ack:
                    for b in range(k):
                        j = s + b
                        if has_in[b] and meth[j] >= 0 and meth_up[j] == m and src[j] == src[i] \
                                and branch[j] == branch[i] and ts[j] < t_in:
                            res = D_RETRANS
                            done = True
                            break
                if not done:
                    for b in range(k):
                        f = s + b
                        if has_out[b] and meth[f] < 0 and status[f] >= 200 and cm_up[f] == m \
                                and not has_in[b] and t_out[b] >= t_in \
                                and (d_tl[b] < 0 or src[i] < 0 or d_tl[b] == src[i]):
                            res = D_ANSWERED
                            break
            else:  # a response
                st = status[i]
                kk = cm_up[i]
                ok2xx = kk == c_invite and st >= 200 and st < 300
                if st == 100:
                    res = D_100
                elif kk == c_cancel:
                    res = D_CANCEL
                else:
                    done = False
                    if not ok2xx:
                        for b in range(k):
                            j = s + b
                            if has_in[b] and meth[j] < 0 and cm_up[j] == kk and status[j] == st \
                                    and src[j] == src[i] and ts[j] < t_in:
                                res = D_RETRANS
                                done = True
                                break
                    if not done and not ok2xx:
                        for b in range(k):
                            f = s + b
                            if has_out[b] and meth[f] < 0 and status[f] >= 200 and cm_up[f] == kk \
                                    and (t_out[b] <= t_in or (has_in[b] and (ts[f] < t_in or src[f] != src[i]))):
                                res = D_AFTER_FINAL
                                done = True
                                break
                            # a provisional that may have lost the race to a relayed final of its
                            # sender (hop.classify, ``concurrent``): how long before that final it
                            # arrived; settled at the end, when the whole capture shows whether the
                            # proxy is concurrent and its longest sojourn
                            if has_out[b] and has_in[b] and meth[f] < 0 and status[f] >= 200 and cm_up[f] == kk \
                                    and st > 100 and st < 200 and src[f] == src[i] and ts[f] > t_in:
                                w = ts[f] - t_in
                                if race_soj[i] < 0 or w < race_soj[i]:
                                    race_soj[i] = w
                    if not done:
                        own_req = False
                        in_req = False
                        for b in range(k):
                            j = s + b
                            if meth[j] >= 0 and meth_up[j] == kk:
                                if has_in[b]:
                                    in_req = True
                                elif has_out[b]:
                                    own_req = True
                        if own_req and not in_req:
                            res = D_OWN
            disp[i] = res


@njit(cache=True, nogil=True)
def endpoint_pass(gstart, cm, what, src, dst, branch, meth, retrans):
    """:func:`sipperf.ingest.pairing.endpoint.retransmissions`: a row is a retransmission when an
    earlier row of its group (time order) has the same CSeq method, method-or-status, sender,
    receiver and, for a request, top-Via branch."""
    for g in range(gstart.shape[0] - 1):
        s = gstart[g]
        e = gstart[g + 1]
        for i in range(s, e):
            retrans[i] = False
            bi = branch[i] if meth[i] >= 0 else np.uint64(0)
            for j in range(s, i):
                bj = branch[j] if meth[j] >= 0 else np.uint64(0)
                if cm[j] == cm[i] and what[j] == what[i] and src[j] == src[i] and dst[j] == dst[i] and bj == bi:
                    retrans[i] = True
                    break


NA = np.iinfo(np.int64).min


@njit(cache=True, nogil=True)
def call_records(gstart, is_req, meth_up, cm_up, status, req_t, resp_t, notdeliv, own, mcodes,
                 c_grp, c_m, c_treq, c_tany, c_tind, c_sind, c_tfin, c_sfin,
                 x_grp, x_m, x_copies, x_treq, x_tfirst, x_tfin):
    """Per group (timeline rows in timeline order), the per-transaction records of
    :func:`sipperf.calls._transactions` for the methods ``mcodes`` (INVITE, BYE, REGISTER: the
    ``c_*`` arrays) and of :func:`sipperf.calls.transactions` for every request method (the
    ``x_*`` arrays).  Instants int64 ns, :data:`NA` when absent; returns (n_c, n_x)."""
    nc = 0
    nx = 0
    for g in range(gstart.shape[0] - 1):
        s = gstart[g]
        e = gstart[g + 1]
        # ---- calls._transactions: one record per method in mcodes with a request ----------
        for mi in range(mcodes.shape[0]):
            m = mcodes[mi]
            have = False
            treq = NA
            for i in range(s, e):
                if is_req[i] and meth_up[i] == m:
                    have = True
                    if req_t[i] != NA and (treq == NA or req_t[i] < treq):
                        treq = req_t[i]
            if not have:
                continue
            tany = NA
            bi = -1  # first status-indicative response: least (resp_t, position)
            bf = -1  # first final response
            for i in range(s, e):
                if is_req[i] or cm_up[i] != m or notdeliv[i]:
                    continue
                r = resp_t[i]
                if r != NA and (tany == NA or r < tany):
                    tany = r
                st = status[i]
                if st != 100 and st != 401 and st != 402 and st != 407:
                    if bi < 0 or (r != NA and (resp_t[bi] == NA or r < resp_t[bi])):
                        bi = i
                if st >= 200:
                    if bf < 0 or (r != NA and (resp_t[bf] == NA or r < resp_t[bf])):
                        bf = i
            c_grp[nc] = g
            c_m[nc] = mi
            c_treq[nc] = treq
            c_tany[nc] = tany
            c_tind[nc] = resp_t[bi] if bi >= 0 else NA
            c_sind[nc] = status[bi] if bi >= 0 else -1
            c_tfin[nc] = resp_t[bf] if bf >= 0 else NA
            c_sfin[nc] = status[bf] if bf >= 0 else -1
            nc += 1
        # ---- calls.transactions: one record per request method ----------------------------
        for i in range(s, e):
            if not is_req[i] or own[i] or req_t[i] == NA:
                continue
            m = meth_up[i]
            seen = False
            for j in range(s, i):
                if is_req[j] and not own[j] and req_t[j] != NA and meth_up[j] == m:
                    seen = True
                    break
            if seen:
                continue
            treq = req_t[i]
            copies = 0
            for j in range(i, e):
                if is_req[j] and not own[j] and req_t[j] != NA and meth_up[j] == m:
                    copies += 1
                    if req_t[j] < treq:
                        treq = req_t[j]
            tf = NA
            tfin = NA
            for j in range(s, e):
                if is_req[j] or notdeliv[j] or cm_up[j] != m or resp_t[j] == NA:
                    continue
                if tf == NA or resp_t[j] < tf:
                    tf = resp_t[j]
                if status[j] >= 200 and (tfin == NA or resp_t[j] < tfin):
                    tfin = resp_t[j]
            x_grp[nx] = g
            x_m[nx] = m
            x_copies[nx] = copies
            x_treq[nx] = treq
            x_tfirst[nx] = tf
            x_tfin[nx] = tfin
            nx += 1
    return nc, nx


@njit(cache=True, nogil=True)
def _before(k1, k2, k3, k4, a, b) -> bool:
    """Row ``a`` sorts before row ``b`` by (k1, k2, k3, k4)."""
    if k1[a] != k1[b]:
        return k1[a] < k1[b]
    if k2[a] != k2[b]:
        return k2[a] < k2[b]
    if k3[a] != k3[b]:
        return k3[a] < k3[b]
    return k4[a] < k4[b]


#: groups up to this many rows are sorted by insertion; larger ones by stable sorts, key by key
SMALL_GROUP = 48


@njit(cache=True, nogil=True)
def sort_within_groups(order, gstart, k1, k2, k3, k4):
    """Sort ``order`` (row indices, each group's rows contiguous between ``gstart[g]`` and
    ``gstart[g+1]``) inside every group by (k1, k2, k3, k4) of the rows, stably, in place:
    with ``order`` a stable sort by group, the order of ``np.lexsort((k4, k3, k2, k1, group))``.
    Groups are a transaction's handful of messages: an insertion sort, unless a group is large."""
    for g in range(gstart.shape[0] - 1):
        s = gstart[g]
        e = gstart[g + 1]
        if e - s <= SMALL_GROUP:
            for i in range(s + 1, e):
                r = order[i]
                j = i - 1
                while j >= s and _before(k1, k2, k3, k4, r, order[j]):
                    order[j + 1] = order[j]
                    j -= 1
                order[j + 1] = r
        else:
            idx = order[s:e].copy()
            idx = idx[np.argsort(k4[idx], kind="mergesort")]
            idx = idx[np.argsort(k3[idx], kind="mergesort")]
            idx = idx[np.argsort(k2[idx], kind="mergesort")]
            idx = idx[np.argsort(k1[idx], kind="mergesort")]
            order[s:e] = idx
