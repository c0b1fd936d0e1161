"""Field arithmetic, FIFO pairing and row assembly for thesis-format log blocks (numba).

Used by :mod:`sipperf.ingest.thesis_logs.read` after :func:`~sipperf.ingest.thesis_logs.scan.scan_block`
has tokenized a block.  One compiled pass per block:

1. checks every receive / send line (bad number, negative interval), rebuilds the absolute
   instants of a receive line (null kernel stamps before ``NO_STAMP_BEFORE_NS``);
2. pairs send lines with receive lines: per key (hash of Call-ID, CSeq number, ``request``
   value) the k-th send line of the block goes with the k-th receive line of the block
   (receive lines carried over from the previous block first), through an open-addressing
   hash table whose entries hold a FIFO chain of the receive lines still waiting;
3. writes the rows (paired, dropped, egress-only), ordered by the line they come from,
   straight into the final columns (preallocated by the caller) and returns the receive
   lines of the last ``CARRY_LINES`` lines that are still unpaired (the carry).

The semantics are those documented in :mod:`.read` (formerly numpy over parsed fields).
"""
from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

#: a rebuilt kernel stamp before this (ns since epoch, = 1000 s) means "ioctl found no stamp"
NO_STAMP_BEFORE_NS = 1_000_000_000_000
N_METHODS = 14  # len(read.METHOD_NAMES); code N_METHODS = OTHER
_I64_MIN = np.iinfo(np.int64).min

# stats vector layout (int64)
ST_BAD_R, ST_NEG_R, ST_BAD_S, ST_NEG_S, ST_BAD_T = 0, 1, 2, 3, 4
ST_MISS0 = 5  # 5, 6, 7: t_arr, t_stack, t_sockq missing (ENOENT)
ST_FIRST_BAD_R, ST_FIRST_NEG_R, ST_FIRST_BAD_S, ST_FIRST_NEG_S, ST_FIRST_BAD_T = 8, 9, 10, 11, 12
ST_PAIRED, ST_DROPPED, ST_SONLY, ST_ROWS, ST_BYTES, ST_NFIX = 13, 14, 15, 16, 17, 18
ST_LEN = 19

# carry record layout: int64 columns of ``c_i64``
C_LINE, C_CSEQ, C_REQ, C_MID, C_SRC, C_T0 = 0, 1, 2, 3, 4, 5  # C_T0..C_T0+4: five instants
C_NCOL = 10


@njit(cache=True, inline="always")
def _method_code(v):
    """OpenSIPS method bit value -> index into METHOD_NAMES, or N_METHODS (OTHER)."""
    if v > 0 and v <= 8192 and (v & (v - 1)) == 0:
        return np.int64(trailing_zeros(np.uint64(v)))
    return N_METHODS


@njit(cache=True, inline="always")
def _msg_type(req, rcode, mcode):
    """Index into MSG_TYPES (INVITE, 180, 200-INVITE, ACK, BYE, 200-BYE, OTHER)."""
    if req < 100:
        if rcode == 0:
            return 0
        if rcode == 2:
            return 3
        if rcode == 3:
            return 4
        return 6
    if req == 180 and mcode == 0:
        return 1
    if req == 200 and mcode == 0:
        return 2
    if req == 200 and mcode == 3:
        return 5
    return 6


@njit(cache=True, inline="always")
def _hash_key(w, s, e, cseq, req):
    """64-bit key of (Call-ID bytes s..e, CSeq number, request value); ``w[p]`` is the
    little-endian word of the 8 bytes at ``p`` (an unaligned view of the padded block).

    The Call-ID is hashed word by word (zero padded); the hash depends on the content only
    (the former numpy version also mixed in the block's padding width, so equal Call-IDs could
    get different keys in blocks of different maximum Call-ID length)."""
    h = np.uint64(1469598103934665603)
    prime = np.uint64(1099511628211)
    p = s
    while p < e:
        x = w[p]
        if e - p < 8:
            x &= (np.uint64(1) << np.uint64(8 * (e - p))) - np.uint64(1)
        if x != 0:
            h = (h ^ x) * prime
        h ^= h >> np.uint64(29)
        p += 8
    k = h ^ (np.uint64(cseq) * np.uint64(0x9E3779B97F4A7C15))
    k = k ^ (np.uint64(req) * np.uint64(0xC2B2AE3D27D4EB4F))
    k ^= k >> np.uint64(31)
    return k


# hash table slot (one 32-byte row): t64[i, 0] key; t32[i, 2..6] receive count, send count,
# chain head, chain tail, generation (the slot is used in this block iff it equals ``gen``)
T_NRECV, T_NSEND, T_HEAD, T_TAIL, T_GEN = 2, 3, 4, 5, 6


@njit(cache=True, inline="always")
def _lookup(key, t64, t32, gen):
    """Slot of ``key`` in the open-addressing table (claimed for this block if new)."""
    mask = t64.shape[0] - 1
    i = np.int64((key ^ (key >> np.uint64(33))) & np.uint64(mask))
    while True:
        if t32[i, T_GEN] != gen:
            t32[i, T_GEN] = gen
            t64[i, 0] = key
            t32[i, T_NRECV] = 0
            t32[i, T_NSEND] = 0
            t32[i, T_HEAD] = -1
            t32[i, T_TAIL] = -1
            return i
        if t64[i, 0] == key:
            return i
        i = (i + 1) & mask


@njit(cache=True, inline="always")
def _recv_instants(iv, li):
    """(t_arr, t_stack, t_sockq, t_sip_in, t_sip_c, m_arr, m_stack, m_sockq, negative)."""
    parse = iv[li, 0]
    tc = iv[li, 4] * 1000
    tin = tc - parse
    a = tin - iv[li, 1]
    s = a + iv[li, 2]
    q = s + iv[li, 3]
    m0 = a < NO_STAMP_BEFORE_NS
    m1 = s < NO_STAMP_BEFORE_NS
    m2 = q < NO_STAMP_BEFORE_NS
    neg = parse < 0
    last = _I64_MIN
    if not m0:
        last = a
    if not m1:
        neg |= s < last
        last = s
    if not m2:
        neg |= q < last
        last = q
    neg |= tin < last
    neg |= tc < tin
    return a, s, q, tin, tc, m0, m1, m2, neg


@njit(cache=True, inline="always")
def _copy_cid(src, s, e, dst, pos):
    """Copy src[s:e] to dst[pos:] up to the first NUL byte (as Arrow reads a NUL-padded
    fixed-width byte string); returns the new end position."""
    for p in range(s, e):
        c = src[p]
        if c == 0:
            break
        dst[pos] = c
        pos += 1
    return pos


@njit(cache=True, nogil=True)
def pair_block(b, w, starts, ends, kind, iv, ok, line0, final, carry_lines,
               c_i64, c_miss, c_key, c_off, c_cid,
               t64, t32, gen, meth_lit, meth_len,
               o_line, o_cseq, o_req, o_rcode, o_mcode, o_mt, o_src, o_srcnull, o_dropped,
               o_inst, o_miss, o_off, o_cid, n_out, fix_row, fix_st, fix_en, fix_req, stats):
    """Check, pair and emit one tokenized block (see the module docstring); ``w`` is the
    unaligned uint64 view of the padded block ``b`` (``w[p]`` = bytes p..p+7).

    ``c_*`` is the carry of the previous block (line order); ``t64``/``t32`` two views of the
    scratch hash table (power of two >= 1.25 x (lines + carried) rows, ``gen`` new for every
    call); ``o_*`` the output columns, filled from row
    ``n_out`` on (the caller makes room for every line and carried record, and for the block's
    bytes of Call-ID).  Egress-only rows whose CSeq method text is not one of the exact method
    names get mcode -1 and are listed in ``fix_*`` for the caller.  Returns the new carry.
    """
    n_lines = kind.shape[0]
    n_carry = c_key.shape[0]
    n_nodes = n_carry + n_lines
    nd_next = np.empty(n_nodes, np.int32)
    nd_tc = np.empty(n_nodes, np.int64)
    nd_paired = np.zeros(n_nodes, np.bool_)
    nd_out = np.empty(n_nodes, np.int64)
    nd_dep = np.empty(n_nodes, np.int64)
    lstat = np.zeros(n_lines, np.int8)  # 1 kept receive, 2 kept send (egress-only unless paired)
    for k in range(ST_LEN):
        stats[k] = 0
    for k in range(ST_FIRST_BAD_R, ST_FIRST_BAD_T + 1):
        stats[k] = -1

    # ---- carried receive lines: ranks 0.. of their keys, in line order
    for c in range(n_carry):
        e = _lookup(c_key[c], t64, t32, gen)
        t32[e, T_NRECV] += 1
        nd_tc[c] = c_i64[c, C_T0 + 4]
        nd_next[c] = -1
        if t32[e, T_TAIL] < 0:
            t32[e, T_HEAD] = c
        else:
            nd_next[t32[e, T_TAIL]] = c
        t32[e, T_TAIL] = c

    # ---- pass 1: check lines, rebuild instants, pair
    for li in range(n_lines):
        kd = kind[li]
        if kd == 1:
            okr = iv[li, 10] > iv[li, 9]
            for k in range(8):
                okr = okr and ok[li, k]
            if not okr:
                stats[ST_BAD_R] += 1
                if stats[ST_FIRST_BAD_R] < 0:
                    stats[ST_FIRST_BAD_R] = li
                continue
            a, s, q, tin, tc, m0, m1, m2, neg = _recv_instants(iv, li)
            if m0:
                stats[ST_MISS0] += 1
            if m1:
                stats[ST_MISS0 + 1] += 1
            if m2:
                stats[ST_MISS0 + 2] += 1
            if neg:
                stats[ST_NEG_R] += 1
                if stats[ST_FIRST_NEG_R] < 0:
                    stats[ST_FIRST_NEG_R] = li
                continue
            lstat[li] = 1
            key = _hash_key(w, iv[li, 9], iv[li, 10], iv[li, 5], iv[li, 7])
            e = _lookup(key, t64, t32, gen)
            j = t32[e, T_NRECV]
            t32[e, T_NRECV] = j + 1
            nd = n_carry + li
            nd_tc[nd] = tc
            if j >= t32[e, T_NSEND]:  # its send line (rank j) is still to come: wait in the chain
                nd_next[nd] = -1
                if t32[e, T_TAIL] < 0:
                    t32[e, T_HEAD] = nd
                else:
                    nd_next[t32[e, T_TAIL]] = nd
                t32[e, T_TAIL] = nd
        elif kd == 2:
            oks = iv[li, 4] > iv[li, 3]
            for k in range(5):
                oks = oks and ok[li, k]
            if not oks:
                stats[ST_BAD_S] += 1
                if stats[ST_FIRST_BAD_S] < 0:
                    stats[ST_FIRST_BAD_S] = li
                continue
            if iv[li, 1] < 0:
                stats[ST_NEG_S] += 1
                if stats[ST_FIRST_NEG_S] < 0:
                    stats[ST_FIRST_NEG_S] = li
                continue
            lstat[li] = 2
            key = _hash_key(w, iv[li, 3], iv[li, 4], iv[li, 5], iv[li, 2])
            e = _lookup(key, t64, t32, gen)
            kk = t32[e, T_NSEND]
            t32[e, T_NSEND] = kk + 1
            if kk < t32[e, T_NRECV]:  # the receive line of the same rank is the chain's head
                r = t32[e, T_HEAD]
                t32[e, T_HEAD] = nd_next[r]
                if t32[e, T_HEAD] < 0:
                    t32[e, T_TAIL] = -1
                out = iv[li, 0] * 1000
                if out >= nd_tc[r]:
                    nd_paired[r] = True
                    nd_out[r] = out
                    nd_dep[r] = (iv[li, 0] + iv[li, 1]) * 1000
                    lstat[li] = 0
                    stats[ST_PAIRED] += 1
                else:  # sent before its receive line's t_sip_c: the send line is skipped
                    stats[ST_BAD_T] += 1
                    if stats[ST_FIRST_BAD_T] < 0:
                        stats[ST_FIRST_BAD_T] = li
                    lstat[li] = 0

    # ---- pass 2: emit rows in line order (carried lines are older than the block's)
    last_line = line0 + n_lines - 1
    keep_after = last_line - carry_lines
    n = n_out
    nb = o_off[n_out]
    n_fix = 0
    new_carry = np.empty(n_nodes, np.int64)
    n_new = 0
    for nd in range(n_nodes):
        if nd < n_carry:
            line = c_i64[nd, C_LINE]
        else:
            li = nd - n_carry
            if lstat[li] == 0:
                continue
            line = line0 + li
            if lstat[li] == 2:  # egress-only row
                o_line[n] = line + 1
                o_cseq[n] = iv[li, 5]
                req = iv[li, 2]
                o_req[n] = np.int32(req)
                rcode = _method_code(req)
                o_rcode[n] = rcode
                ms = iv[li, 6] + 1
                me = min(ends[li], ms + 16)
                mcode = -1
                if me >= ms:
                    for m in range(N_METHODS):
                        ln = meth_len[m]
                        if ln == me - ms:
                            same = True
                            for k in range(ln):
                                if b[ms + k] != meth_lit[m, k]:
                                    same = False
                                    break
                            if same:
                                mcode = m
                                break
                if mcode < 0:
                    fix_row[n_fix] = n
                    fix_st[n_fix] = ms
                    fix_en[n_fix] = ends[li]
                    fix_req[n_fix] = req
                    n_fix += 1
                    o_mcode[n] = -1
                    o_mt[n] = _msg_type(req, rcode, -1)  # final for requests; responses: caller
                else:
                    o_mcode[n] = mcode
                    o_mt[n] = _msg_type(req, rcode, mcode)
                o_src[n] = 0
                o_srcnull[n] = True
                o_dropped[n] = False
                for k in range(5):
                    o_inst[k, n] = 0
                    o_miss[k, n] = True
                o_inst[5, n] = iv[li, 0] * 1000
                o_inst[6, n] = (iv[li, 0] + iv[li, 1]) * 1000
                o_miss[5, n] = False
                o_miss[6, n] = False
                nb = _copy_cid(b, iv[li, 3], iv[li, 4], o_cid, nb)
                n += 1
                o_off[n] = nb
                stats[ST_SONLY] += 1
                continue
        paired = nd_paired[nd]
        if not paired and not final and line > keep_after:
            new_carry[n_new] = nd
            n_new += 1
            continue
        # a receive row: paired, or dropped ("not forwarded")
        o_line[n] = line + 1
        if nd < n_carry:
            cseq = c_i64[nd, C_CSEQ]
            req = c_i64[nd, C_REQ]
            mid = c_i64[nd, C_MID]
            src = c_i64[nd, C_SRC]
            for k in range(5):
                o_inst[k, n] = c_i64[nd, C_T0 + k]
            for k in range(3):
                o_miss[k, n] = c_miss[nd, k]
            nb = _copy_cid(c_cid, c_off[nd], c_off[nd + 1], o_cid, nb)
        else:
            cseq = iv[li, 5]
            req = iv[li, 7]
            mid = iv[li, 6]
            src = iv[li, 8]
            a, s, q, tin, tc, m0, m1, m2, neg = _recv_instants(iv, li)
            o_inst[0, n] = 0 if m0 else a
            o_inst[1, n] = 0 if m1 else s
            o_inst[2, n] = 0 if m2 else q
            o_inst[3, n] = tin
            o_inst[4, n] = tc
            o_miss[0, n] = m0
            o_miss[1, n] = m1
            o_miss[2, n] = m2
            nb = _copy_cid(b, iv[li, 9], iv[li, 10], o_cid, nb)
        o_miss[3, n] = False
        o_miss[4, n] = False
        o_cseq[n] = cseq
        o_req[n] = np.int32(req)
        rcode = _method_code(req)
        mcode = _method_code(mid)
        o_rcode[n] = rcode
        o_mcode[n] = mcode
        o_mt[n] = _msg_type(req, rcode, mcode)
        o_src[n] = np.uint32(src & 0xFFFFFFFF)
        o_srcnull[n] = False
        if paired:
            o_inst[5, n] = nd_out[nd]
            o_inst[6, n] = nd_dep[nd]
            o_miss[5, n] = False
            o_miss[6, n] = False
            o_dropped[n] = False
        else:
            o_inst[5, n] = 0
            o_inst[6, n] = 0
            o_miss[5, n] = True
            o_miss[6, n] = True
            o_dropped[n] = True
            stats[ST_DROPPED] += 1
        n += 1
        o_off[n] = nb
    stats[ST_ROWS] = n - n_out
    stats[ST_BYTES] = nb - o_off[n_out]
    stats[ST_NFIX] = n_fix

    # ---- the new carry (line order)
    k_i64 = np.empty((n_new, C_NCOL), np.int64)
    k_miss = np.empty((n_new, 3), np.bool_)
    k_key = np.empty(n_new, np.uint64)
    k_off = np.empty(n_new + 1, np.int64)
    k_off[0] = 0
    nbytes = 0
    for i in range(n_new):
        nd = new_carry[i]
        if nd < n_carry:
            nbytes += c_off[nd + 1] - c_off[nd]
        else:
            li = nd - n_carry
            nbytes += iv[li, 10] - iv[li, 9]
    k_cid = np.empty(nbytes, np.uint8)
    pos = 0
    for i in range(n_new):
        nd = new_carry[i]
        if nd < n_carry:
            for k in range(C_NCOL):
                k_i64[i, k] = c_i64[nd, k]
            for k in range(3):
                k_miss[i, k] = c_miss[nd, k]
            k_key[i] = c_key[nd]
            for p in range(c_off[nd], c_off[nd + 1]):
                k_cid[pos] = c_cid[p]
                pos += 1
        else:
            li = nd - n_carry
            a, s, q, tin, tc, m0, m1, m2, neg = _recv_instants(iv, li)
            k_i64[i, C_LINE] = line0 + li
            k_i64[i, C_CSEQ] = iv[li, 5]
            k_i64[i, C_REQ] = iv[li, 7]
            k_i64[i, C_MID] = iv[li, 6]
            k_i64[i, C_SRC] = iv[li, 8]
            k_i64[i, C_T0] = 0 if m0 else a
            k_i64[i, C_T0 + 1] = 0 if m1 else s
            k_i64[i, C_T0 + 2] = 0 if m2 else q
            k_i64[i, C_T0 + 3] = tin
            k_i64[i, C_T0 + 4] = tc
            k_miss[i, 0] = m0
            k_miss[i, 1] = m1
            k_miss[i, 2] = m2
            k_key[i] = _hash_key(w, iv[li, 9], iv[li, 10], iv[li, 5], iv[li, 7])
            for p in range(iv[li, 9], iv[li, 10]):
                k_cid[pos] = b[p]
                pos += 1
        k_off[i + 1] = pos
    return k_i64, k_miss, k_key, k_off, k_cid


@njit(cache=True, nogil=True)
def dict_strings(codes, d_data, d_off, d_null, run):
    """Arrow ``large_string`` buffers (offsets int64, data, validity bitmap) of
    ``dictionary[codes]``: entry ``c`` is ``d_data[d_off[c]:d_off[c + 1]]``, null where
    ``d_null[c]``; codes outside the dictionary are null.  With ``run`` > 0 only ``codes[0]``
    is read and repeated ``run`` times.  Returns (offsets, data, validity, null_count)."""
    n = run if run > 0 else codes.shape[0]
    nd = d_null.shape[0]
    off = np.empty(n + 1, np.int64)
    off[0] = 0
    nulls = 0
    for i in range(n):
        c = codes[0] if run > 0 else codes[i]
        if c < 0 or c >= nd or d_null[c]:
            nulls += 1
            off[i + 1] = off[i]
        else:
            off[i + 1] = off[i] + d_off[c + 1] - d_off[c]
    data = np.empty(off[n], np.uint8)
    valid = np.zeros((n + 7) // 8 if nulls else 0, np.uint8)
    for i in range(n):
        c = codes[0] if run > 0 else codes[i]
        if c < 0 or c >= nd or d_null[c]:
            continue
        p = off[i]
        for k in range(d_off[c], d_off[c + 1]):
            data[p] = d_data[k]
            p += 1
        if nulls:
            valid[i >> 3] |= np.uint8(1 << (i & 7))
    return off, data, valid, nulls
