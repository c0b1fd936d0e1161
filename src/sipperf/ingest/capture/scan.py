"""Compiled single pass over a capture: records -> link -> IP -> UDP/TCP -> SIP fields (numba).

:func:`scan` walks the pcap/pcapng records of a byte buffer (the mapped file, or a
decompressed piece of a ``.gz``) and writes one output row per SIP message straight into
column arrays; :mod:`.pcapfast` drives it and turns the columns into the packet table.
Everything a record goes through is here, in one loop, with no Python object per packet:

* records: pcap (µs/ns, either byte order, Kuznetzov's 24-byte record headers) and pcapng
  (SHB per section and byte order, IDB with ``if_tsresol``/``if_tsoffset``, EPB, obsolete PB;
  an SPB has no timestamp and is a counted skip);
* link: Ethernet (802.1Q/802.1ad/QinQ tags, LLC/SNAP, PPPoE session, MPLS), Linux cooked
  SLL and SLL2, BSD null/loopback, raw IPv4/IPv6;
* IP: IPv4 (options; a total length of 0, as TSO captures have, means "to the end of the
  captured bytes") and IPv6 (hop-by-hop, routing, destination, mobility, HIP, shim6 and AH
  extension headers); IP-in-IP, GRE and VXLAN tunnels are opened; fragments of either are
  reassembled (later data at the same offset replaces earlier, as in :mod:`.sipmsg`'s twin);
* UDP: one SIP message per datagram (payload bounded by the UDP length);
* TCP: a byte stream per flow (sequence numbers; retransmitted/overlapping bytes dropped;
  a gap discards the partial message), messages framed by Content-Length; bytes that do not
  start with a SIP start line (a capture that begins mid-message) are discarded up to the
  next start line and counted;
* SIP: the rules of :mod:`.sipmsg` (start line, unfolding, compact names, first occurrence,
  the URI/tag/branch/correlation fields, malformed CSeq/status), byte for byte.

Accounting: every packet record ends up in exactly one counter of ``cnt`` (parsed or a skip
reason, :data:`REASONS`); a packet that completes or contributes to a SIP message is parsed.
Strings are written as raw bytes; rows with a byte >= 0x80 are flagged so the caller can
decode them with U+FFFD replacement exactly as Python does.

State that lives across calls (pcapng interfaces, address interning, TCP flows and their
buffered bytes, pending IP fragments) is held in numpy arrays owned by the caller; arrays
that may grow inside a call are returned.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic

# ---------------------------------------------------------------------------- output layout
I_FRAME, I_TS, I_SPORT, I_DPORT, I_SIZE, I_CSEQ, I_STATUS, I_VIACNT, I_MAXFWD, I_RETRY = range(10)
I_SRC, I_DST, I_TRANSPORT, I_NONASCII = 10, 11, 12, 13
NI = 14
S_CALLID, S_CSEQM, S_METHOD, S_BRANCH, S_FROMURI, S_FROMTAG, S_TOURI, S_TOTAG = range(8)
S_CONTACT, S_CORR, S_UA = 8, 9, 10
NS = 11
NULL = -1  # in the nullable int columns

# ------------------------------------------------------------------------------- counters
(C_PARSED, R_NOT_IP, R_LINK, R_SHORT, R_SNAPPED, R_NOT_L4, R_UDP_NOT_SIP, R_TCP_EMPTY,
 R_TCP_RETRANS, R_TCP_GAP, R_TCP_NOT_SIP, R_TCP_KEEPALIVE, R_MAL_CSEQ, R_MAL_STATUS,
 R_INCOMPLETE, R_TCP_TOO_BIG, R_FRAG_LIMIT, R_UNDEF_IF, R_NO_TS, R_NESTED_FRAG,
 R_MAL_CALLID) = range(21)
NCNT = 21
REASONS: dict[int, str] = {
    R_NOT_IP: "not IP",
    R_LINK: "link type unsupported",
    R_SHORT: "malformed packet (headers cut short)",
    R_SNAPPED: "snapped (caplen < IP length)",
    R_NOT_L4: "not UDP/TCP",
    R_UDP_NOT_SIP: "UDP payload not SIP",
    R_TCP_EMPTY: "TCP without payload",
    R_TCP_RETRANS: "TCP retransmission",
    R_TCP_GAP: "TCP gap (bytes lost before this segment)",
    R_TCP_NOT_SIP: "TCP bytes not SIP (partial message at capture start, or after a gap)",
    R_TCP_KEEPALIVE: "TCP keep-alive (CRLF only)",
    R_MAL_CSEQ: "malformed SIP: CSeq missing or its number not a 32-bit unsigned integer",
    R_MAL_STATUS: "malformed SIP: status code outside 100-699",
    R_MAL_CALLID: "malformed SIP: no Call-ID",
    R_INCOMPLETE: "fragment/segment of an incomplete message",
    R_TCP_TOO_BIG: "TCP message too large (header block > 256 KiB or Content-Length > 16 MiB)",
    R_FRAG_LIMIT: "IP fragment dropped (more than 64 fragments or 1024 datagrams pending)",
    R_UNDEF_IF: "pcapng packet names an undefined interface",
    R_NO_TS: "pcapng simple packet block (no timestamp)",
    R_NESTED_FRAG: "IP fragment inside a reassembled datagram (unsupported)",
}

# ------------------------------------------------------------------------- scalar state (st)
(ST_FMT, ST_BIG, ST_LINK, ST_TSMUL, ST_RECHDR, ST_FRAME, ST_NIF, ST_ERR, ST_ERR_POS,
 ST_ERR_FRAME, ST_BADLINK, ST_UNDEF_POS, ST_NADDR, ST_NFLOW, ST_ARENA, ST_NFRAG, ST_FARENA,
 ST_MIDSTREAM, ST_DISCARD_BYTES, ST_TS_ZERO, ST_TS_NONZERO, ST_SECTIONS, ST_MAXPEND) = range(23)
NST = 24
FMT_PCAP, FMT_PCAPNG = 0, 1
ERR_NONE, ERR_TRUNC, ERR_CORRUPT = 0, 1, 2
# scan() status
DONE, MORE_RECORDS, NEED_DATA = 0, 1, 2

MAX_PCAP_RECORD = 262144            # tshark's maximum packet size for standard link types
MAX_PCAPNG_BLOCK = 16 * 1024 * 1024  # tshark refuses larger blocks
MAX_HDR = 256 * 1024                # TCP: a header block longer than this is not SIP
MAX_BODY = 16 * 1024 * 1024         # TCP: a Content-Length beyond this is not believed
U32_MAX = 4294967295
I31_MAX = 2147483647

# interface table columns (ifs): link type, ts numerator, ts denominator, offset ns
IF_LINK, IF_NUM, IF_DEN, IF_OFF = 0, 1, 2, 3
MAX_IF = 4096

# TCP flow state columns (fs)
F_NEXT, F_OFF, F_CAP, F_HEAD, F_LEN, F_PEND, F_SEEN = range(7)
NF = 8
# fragment slots (frs): key (6), total, nfrags, nframes, used, last frame ; fragments (frl)
FR_KEY, FR_TOTAL, FR_NFRAG, FR_NFRAMES, FR_USED = 0, 6, 7, 8, 9
NFR = 10
MAX_FRAG_SLOTS = 1024
MAX_FRAGS = 64

# header ids
(H_CALLID, H_CSEQ, H_VIA, H_FROM, H_TO, H_CONTACT, H_CLEN, H_UA, H_SERVER, H_MAXFWD,
 H_RETRY) = range(11)
H_CORR0 = 11  # correlation headers, in priority order (sipmsg.CORRELATION_HEADERS)
_NAMES = [("call-id", H_CALLID), ("i", H_CALLID), ("cseq", H_CSEQ), ("via", H_VIA), ("v", H_VIA),
          ("from", H_FROM), ("f", H_FROM), ("to", H_TO), ("t", H_TO), ("contact", H_CONTACT),
          ("m", H_CONTACT), ("content-length", H_CLEN), ("l", H_CLEN), ("user-agent", H_UA),
          ("server", H_SERVER), ("max-forwards", H_MAXFWD), ("retry-after", H_RETRY)]
_CORR = ("session-id", "x-call-id", "x-orig-call-id", "x-cid", "ms-correlation-id", "cisco-guid")
_NAMES += [(n, H_CORR0 + i) for i, n in enumerate(_CORR)]
NH = H_CORR0 + len(_CORR)
NAME_LEN = np.array([len(n) for n, _ in _NAMES], np.int64)
NAME_ID = np.array([i for _, i in _NAMES], np.int64)
NAME_TAB = np.zeros((len(_NAMES), 24), np.uint8)
for _k, (_n, _i) in enumerate(_NAMES):
    NAME_TAB[_k, :len(_n)] = np.frombuffer(_n.encode(), np.uint8)


# ============================================================================ small helpers
@intrinsic
def _ld64(typingctx, arr, i):
    """The 8 bytes arr[i:i+8] as one little-endian uint64 (unaligned load; i+8 <= len)."""
    sig = types.uint64(arr, types.int64)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, value=args[0])
        ptr = builder.gep(ary.data, [args[1]])
        return builder.load(ptr, typ=ir.IntType(64), align=1)

    return sig, codegen


@intrinsic
def _copy(typingctx, dst, doff, src, soff, n):
    """memcpy(dst.data + doff, src.data + soff, n) for uint8 arrays (flat byte offsets)."""
    sig = types.void(dst, types.int64, src, types.int64, types.int64)

    def codegen(context, builder, signature, args):
        d = context.make_array(signature.args[0])(context, builder, value=args[0])
        sa = context.make_array(signature.args[2])(context, builder, value=args[2])
        cgutils.raw_memcpy(builder, builder.gep(d.data, [args[1]]), builder.gep(sa.data, [args[3]]),
                           args[4], 1)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _at(typingctx, arr, i):
    """arr[i] without the negative-index wrap-around (i is always in range here)."""
    sig = arr.dtype(arr, types.int64)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, value=args[0])
        return builder.load(builder.gep(ary.data, [args[1]]))

    return sig, codegen


_ONES = np.uint64(0x0101010101010101)
_HIGH = np.uint64(0x8080808080808080)
_LF8 = np.uint64(0x0A0A0A0A0A0A0A0A)


@njit(cache=True, inline="always")
def _find_lf(a, p, e):
    """Index of the first LF in a[p:e], or e (8 bytes at a time)."""
    while p + 8 <= e:
        x = _ld64(a, p) ^ _LF8
        t = (x - _ONES) & ~x & _HIGH
        if t:
            return p + np.int64(trailing_zeros(t) >> 3)
        p += 8
    while p < e and a[p] != 10:
        p += 1
    return p


@njit(cache=True, inline="always")
def _any_high(a, s, e):
    """True if a byte of a[s:e] is >= 0x80."""
    acc = np.uint64(0)
    p = s
    while p + 8 <= e:
        acc |= _ld64(a, p)
        p += 8
    while p < e:
        acc |= np.uint64(a[p])
        p += 1
    return (acc & _HIGH) != 0


@intrinsic
def _borrow(typingctx, arr):
    """The same array without its reference count (meminfo NULL): passing it down the per-packet
    call chain costs no atomic increment/decrement per array per call (which made the pass
    4x slower).  Only for arrays the caller keeps alive for the duration of the call."""
    sig = arr(arr)

    def codegen(context, builder, signature, args):
        src = context.make_array(arr)(context, builder, value=args[0])
        out = context.make_array(arr)(context, builder)
        out.meminfo = cgutils.get_null_value(out.meminfo.type)
        out.parent = cgutils.get_null_value(out.parent.type)
        out.nitems = src.nitems
        out.itemsize = src.itemsize
        out.data = src.data
        out.shape = src.shape
        out.strides = src.strides
        return out._getvalue()

    return sig, codegen


@njit(cache=True, inline="always")
def _u16(a, p, big):
    if big:
        return (np.int64(a[p]) << 8) | np.int64(a[p + 1])
    return (np.int64(a[p + 1]) << 8) | np.int64(a[p])


@njit(cache=True, inline="always")
def _u32(a, p, big):
    if big:
        return ((np.int64(a[p]) << 24) | (np.int64(a[p + 1]) << 16) | (np.int64(a[p + 2]) << 8)
                | np.int64(a[p + 3]))
    return ((np.int64(a[p + 3]) << 24) | (np.int64(a[p + 2]) << 16) | (np.int64(a[p + 1]) << 8)
            | np.int64(a[p]))


@njit(cache=True, inline="always")
def _be16(a, p):
    return (np.int64(a[p]) << 8) | np.int64(a[p + 1])


@njit(cache=True, inline="always")
def _be32(a, p):
    return ((np.int64(a[p]) << 24) | (np.int64(a[p + 1]) << 16) | (np.int64(a[p + 2]) << 8)
            | np.int64(a[p + 3]))


@njit(cache=True, inline="always")
def _be64(a, p):
    v = np.int64(0)
    for i in range(8):
        v = (v << 8) | np.int64(a[p + i])
    return v


@njit(cache=True, inline="always")
def _ws(c):
    return c == 32 or c == 9


@njit(cache=True, inline="always")
def _lower(c):
    if c >= 65 and c <= 90:
        return c + 32
    return c


@njit(cache=True)
def _ts_ns(raw_hi, raw_lo, num, den):
    """(hi << 32 | lo) ticks * num / den, exactly when it fits in int64."""
    raw = (np.uint64(raw_hi) << np.uint64(32)) | np.uint64(raw_lo)
    if den == 1:
        return np.int64(raw) * num
    q = raw // np.uint64(den)
    r = raw % np.uint64(den)
    if num == 1:
        return np.int64(q)
    if r < np.uint64(1 << 34):
        return np.int64(q) * num + np.int64((r * np.uint64(num)) // np.uint64(den))
    return np.int64(q) * num + np.int64(float(r) * num / den)


# ============================================================================== SIP parsing
@njit(cache=True, inline="always")
def _start_line(a, s, e):
    """(kind, x): kind 1 request (x = end of the method), 2 response (x = status), 0 not SIP."""
    n = e - s
    if n >= 8 and _at(a, s) == 83 and _at(a, s + 1) == 73 and _at(a, s + 2) == 80 and _at(a, s + 3) == 47 \
            and _at(a, s + 4) == 50 and _at(a, s + 5) == 46 and _at(a, s + 6) == 48 and _at(a, s + 7) == 32:
        if n < 11:
            return 0, 0
        st = 0
        for i in range(8, 11):
            c = _at(a, s + i)
            if c < 48 or c > 57:
                return 0, 0
            st = st * 10 + (c - 48)
        if n > 11:
            c = _at(a, s + 11)
            if not (c == 32 or c == 13 or c == 10):
                return 0, 0
        return 2, st
    # request line: up to the first LF (within 4096 bytes), or the whole message if shorter
    lim = min(e, s + 4096)
    eol = -1
    for i in range(s, lim):
        if _at(a, i) == 10:
            eol = i
            break
    if eol < 0:
        if n < 4096:
            eol = e
        else:
            return 0, 0
    le = eol
    if le > s and _at(a, le - 1) == 13:
        le -= 1
    # ends with " SIP/2.0", exactly two spaces, alphabetic method
    if le - s < 8:
        return 0, 0
    t = le - 8
    if not (_at(a, t) == 32 and _at(a, t + 1) == 83 and _at(a, t + 2) == 73 and _at(a, t + 3) == 80 and _at(a, t + 4) == 47
            and _at(a, t + 5) == 50 and _at(a, t + 6) == 46 and _at(a, t + 7) == 48):
        return 0, 0
    spaces = 0
    first = -1
    for i in range(s, le):
        if _at(a, i) == 32:
            spaces += 1
            if first < 0:
                first = i
    if spaces != 2 or first <= s:
        return 0, 0
    for i in range(s, first):
        c = _at(a, i) | 32
        if c < 97 or c > 122:
            return 0, 0
    return 1, first


@njit(cache=True)
def header_end(a, s, e):
    """Index just past the empty line ending the header block of a[s:e], or -1 (see sipmsg)."""
    i = s
    while i < e and a[i] != 10:
        i += 1
    while i < e:
        j = i + 1
        if j < e and a[j] == 13:
            j += 1
        if j < e and a[j] == 10:
            return j + 1
        if j >= e:
            return -1
        i = j
        while i < e and a[i] != 10:
            i += 1
    return -1


@njit(cache=True)
def _unfold_into(a, vs, ve, scr, sp):
    """Copy a raw header value _at(a, vs:ve) to scr[sp:], unfolded and stripped; returns (s, e)."""
    o = sp
    i = vs
    while i < ve:
        c = _at(a, i)
        if c == 10:
            while o > sp and (scr[o - 1] == 32 or scr[o - 1] == 9 or scr[o - 1] == 13):
                o -= 1
            i += 1
            while i < ve and (_at(a, i) == 32 or _at(a, i) == 9):
                i += 1
            scr[o] = 32
            o += 1
        else:
            scr[o] = c
            o += 1
            i += 1
    s = sp
    while s < o and (scr[s] == 32 or scr[s] == 9 or scr[s] == 13):
        s += 1
    while o > s and (scr[o - 1] == 32 or scr[o - 1] == 9 or scr[o - 1] == 13):
        o -= 1
    return s, o


@njit(cache=True, inline="always")
def _next_top(a, s, e, sep):
    """End of the first element of a[s:e] split at ``sep`` outside quotes and <> (or e)."""
    # fast path: no quote or angle bracket before the separator
    for i in range(s, e):
        c = _at(a, i)
        if c == sep:
            return i
        if c == 34 or c == 60 or c == 62:
            break
    else:
        return e
    quoted = False
    angle = False
    esc = False
    for i in range(s, e):
        c = _at(a, i)
        if quoted:
            if esc:
                esc = False
            elif c == 92:
                esc = True
            elif c == 34:
                quoted = False
        elif c == 34:
            quoted = True
        elif c == 60:
            angle = True
        elif c == 62:
            angle = False
        elif c == sep and not angle:
            return i
    return e


@njit(cache=True, inline="always")
def _blank(a, s, e):
    for i in range(s, e):
        if not _ws(_at(a, i)):
            return False
    return True


@njit(cache=True, inline="always")
def _strip(a, s, e):
    while s < e and _ws(_at(a, s)):
        s += 1
    while e > s and _ws(_at(a, e - 1)):
        e -= 1
    return s, e


@njit(cache=True, inline="always")
def _param(a, s, e, name, nlen):
    """Span of the value of ``;name=value`` in _at(a, s:e) (first piece skipped), or (-1, -1)."""
    p = _next_top(a, s, e, 59)
    while p < e:
        q = _next_top(a, p + 1, e, 59)
        # piece _at(a, p+1:q): key [= value]
        eq = -1
        for i in range(p + 1, q):
            if _at(a, i) == 61:
                eq = i
                break
        ke = q if eq < 0 else eq
        ks, ke = _strip(a, p + 1, ke)
        if ke - ks == nlen:
            ok = True
            for i in range(nlen):
                if _lower(_at(a, ks + i)) != name[i]:
                    ok = False
                    break
            if ok:
                if eq < 0:
                    return -1, -1
                vs, ve = _strip(a, eq + 1, q)
                if ve == vs:
                    return -1, -1
                return vs, ve
        p = q
    return -1, -1


@njit(cache=True, inline="always")
def _name_addr(a, s, e):
    """(uri_s, uri_e, params_s, params_e) of a From/To/Contact value; uri_s = -1 if empty."""
    quoted = False
    esc = False
    for i in range(s, e):
        c = _at(a, i)
        if quoted:
            if esc:
                esc = False
            elif c == 92:
                esc = True
            elif c == 34:
                quoted = False
        elif c == 34:
            quoted = True
        elif c == 60:
            j = -1
            for k in range(i + 1, e):
                if _at(a, k) == 62:
                    j = k
                    break
            if j < 0:
                us, ue = _strip(a, i + 1, e)
                return (us if ue > us else -1), ue, e, e
            us, ue = _strip(a, i + 1, j)
            return (us if ue > us else -1), ue, j + 1, e
    k = -1
    for i in range(s, e):
        if _at(a, i) == 59:
            k = i
            break
    if k < 0:
        us, ue = _strip(a, s, e)
        return (us if ue > us else -1), ue, e, e
    us, ue = _strip(a, s, k)
    return (us if ue > us else -1), ue, k, e


@njit(cache=True, inline="always")
def _u32v(a, s, e, limit):
    """1*DIGIT not above limit, else -1."""
    if e <= s:
        return -1
    v = np.int64(0)
    over = False
    for i in range(s, e):
        c = _at(a, i)
        if c < 48 or c > 57:
            return -1
        if not over:
            v = v * 10 + (c - 48)
            if v > limit:
                over = True
    return -1 if over else v


_TAG = np.frombuffer(b"tag", np.uint8).copy()
_CLEN_NAME = np.frombuffer(b"content-length", np.uint8).copy()
_BRANCH = np.frombuffer(b"branch", np.uint8).copy()


@njit(cache=True, inline="always")
def _put(D, O, V, dl, c, r, src, s, e):
    """Write src[s:e] as row r of string column c."""
    n = e - s
    base = dl[c]
    _copy(D, c * D.shape[1] + base, src, s, n)
    dl[c] = base + n
    O[c, r + 1] = base + n
    V[c, r] = 1


@njit(cache=True, inline="always")
def _null(O, V, dl, c, r):
    O[c, r + 1] = dl[c]
    V[c, r] = 0


@njit(cache=True, inline="always")
def _src(a, scr, hsrc, k):
    return scr if hsrc[k] else a


@njit(cache=True, inline="always")
def _finish_value(a, cvs, cve, folded, scr, sp):
    """A raw header value a[cvs:cve] -> stripped span: in place, or unfolded into scr[sp:]."""
    if folded:
        vs, ve = _unfold_into(a, cvs, cve, scr, sp)
        return vs, ve, 1
    vs = cvs
    ve = cve
    while vs < ve and (a[vs] == 32 or a[vs] == 9 or a[vs] == 13):
        vs += 1
    while ve > vs and (a[ve - 1] == 32 or a[ve - 1] == 9 or a[ve - 1] == 13):
        ve -= 1
    return vs, ve, 0


@njit(cache=True, inline="always")
def _via_elements(v, vs, ve, hs, he, hsrc, src_flag, first):
    """Count the non-blank comma-separated values of a Via value v[vs:ve]; the first one of
    the top Via header becomes hs/he[H_VIA].  Returns the count."""
    simple = True
    for q in range(vs, ve):
        c = v[q]
        if c == 44 or c == 34 or c == 60:
            simple = False
            break
    if simple:
        if _blank(v, vs, ve):
            if first:
                hs[H_VIA] = -2
            return 0
        if first:
            hs[H_VIA] = vs
            he[H_VIA] = ve
            hsrc[H_VIA] = src_flag
        return 1
    n = 0
    q = vs
    while q <= ve:
        qe = _next_top(v, q, ve, 44)
        if not _blank(v, q, qe):
            n += 1
            if first:
                hs[H_VIA] = q
                he[H_VIA] = qe
                hsrc[H_VIA] = src_flag
                first = False
        q = qe + 1
    if first:
        hs[H_VIA] = -2  # the top Via header has no value: no branch
    return n


@njit(cache=True, inline="always")
def _write_row(a, s, kind, x, r, I, O, V, D, dl, scr, hs, he, hsrc, hlen, cseq, status, via_count,
               cv, cm_s, cm_e):
    """The row's columns from the header spans found by :func:`parse_sip` (kept apart for
    reading; inlined, like the small helpers above, at Numba IR level: a call with a dozen
    array arguments costs more than the work of most of these functions)."""
    I[I_CSEQ, r] = cseq
    I[I_STATUS, r] = status
    I[I_VIACNT, r] = via_count
    mf = -1
    if hs[H_MAXFWD] >= 0:
        mf = _u32v(_src(a, scr, hsrc, H_MAXFWD), hs[H_MAXFWD], he[H_MAXFWD], U32_MAX)
    I[I_MAXFWD, r] = mf
    ra = -1
    if hs[H_RETRY] >= 0:
        v = _src(a, scr, hsrc, H_RETRY)
        q = hs[H_RETRY]
        qe = he[H_RETRY]
        while q < qe and v[q] >= 48 and v[q] <= 57:
            q += 1
        if q > hs[H_RETRY]:
            c = v[q] if q < qe else 32
            if c == 32 or c == 9 or c == 40 or c == 59:
                ra = _u32v(v, hs[H_RETRY], q, U32_MAX)
    I[I_RETRY, r] = ra
    hi = _any_high(a, s, s + hlen)
    if hs[H_CALLID] >= 0:
        _put(D, O, V, dl, S_CALLID, r, _src(a, scr, hsrc, H_CALLID), hs[H_CALLID], he[H_CALLID])
    else:
        _null(O, V, dl, S_CALLID, r)
    if cm_s >= 0:
        _put(D, O, V, dl, S_CSEQM, r, cv, cm_s, cm_e)
    else:
        _null(O, V, dl, S_CSEQM, r)
    if kind == 1:
        _put(D, O, V, dl, S_METHOD, r, a, s, x)
    else:
        _null(O, V, dl, S_METHOD, r)
    bs = -1
    be = -1
    if hs[H_VIA] >= 0:
        v = _src(a, scr, hsrc, H_VIA)
        bs, be = _param(v, hs[H_VIA], he[H_VIA], _BRANCH, 6)
        if bs >= 0:
            q = bs
            while q < be and not (v[q] == 44 or v[q] == 32 or v[q] == 9 or v[q] == 59):
                q += 1
            be = q
            if be == bs:
                bs = -1
        if bs >= 0:
            _put(D, O, V, dl, S_BRANCH, r, v, bs, be)
    if bs < 0:
        _null(O, V, dl, S_BRANCH, r)
    for hid, cu, ct in ((H_FROM, S_FROMURI, S_FROMTAG), (H_TO, S_TOURI, S_TOTAG)):
        us = -1
        ts = -1
        if hs[hid] >= 0:
            v = _src(a, scr, hsrc, hid)
            us, ue, ps, pe = _name_addr(v, hs[hid], he[hid])
            ts, te = _param(v, ps, pe, _TAG, 3)
            if us >= 0:
                _put(D, O, V, dl, cu, r, v, us, ue)
            if ts >= 0:
                _put(D, O, V, dl, ct, r, v, ts, te)
        if us < 0:
            _null(O, V, dl, cu, r)
        if ts < 0:
            _null(O, V, dl, ct, r)
    us = -1
    if hs[H_CONTACT] >= 0:
        v = _src(a, scr, hsrc, H_CONTACT)
        q = hs[H_CONTACT]
        qe = he[H_CONTACT]
        if not (qe - q == 1 and v[q] == 42):
            fe = _next_top(v, q, qe, 44)
            us, ue, ps, pe = _name_addr(v, q, fe)
            if us >= 0:
                _put(D, O, V, dl, S_CONTACT, r, v, us, ue)
    if us < 0:
        _null(O, V, dl, S_CONTACT, r)
    done = False
    for k in range(H_CORR0, NH):
        if hs[k] >= 0 and he[k] > hs[k]:
            _put(D, O, V, dl, S_CORR, r, _src(a, scr, hsrc, k), hs[k], he[k])
            done = True
            break
    if not done:
        _null(O, V, dl, S_CORR, r)
    if hs[H_UA] >= 0 and he[H_UA] > hs[H_UA]:
        _put(D, O, V, dl, S_UA, r, _src(a, scr, hsrc, H_UA), hs[H_UA], he[H_UA])
    elif hs[H_SERVER] >= 0 and he[H_SERVER] > hs[H_SERVER]:
        _put(D, O, V, dl, S_UA, r, _src(a, scr, hsrc, H_SERVER), hs[H_SERVER], he[H_SERVER])
    else:
        _null(O, V, dl, S_UA, r)
    I[I_NONASCII, r] = 1 if hi else 0


@njit(cache=True)
def parse_sip(a, s, e, r, I, O, V, D, dl, scr, hs, he, name_tab, name_len, name_id, framing):
    """Parse the SIP message _at(a, s:e) into row r (one pass over the start line and headers).

    Returns (code, header_len, content_length): code 1 = a row was written, 0 = not SIP,
    R_MAL_* = malformed (nothing written).  header_len as in sipmsg (e - s without a blank
    line); content_length -1 when absent or invalid.  ``hs``/``he`` hold NH starts, then NH
    ends... (scratch of 3*NH: start, end, in-scratch flag per header id)."""
    kind, x = _start_line(a, s, e)
    if kind == 0:
        return 0, 0, -1
    hsrc = he[NH:]
    for k in range(NH):
        hs[k] = -1
        hsrc[k] = 0
    via_count = 0
    sp = 0  # scratch fill
    hend = -1
    p = s
    while p < e and _at(a, p) != 10:
        p += 1
    p += 1
    cur = -1          # header id of the current header; -2 valid but not needed; -1 none
    cvs = 0
    cve = 0
    folded = False
    while True:
        # p: the start of a line (or >= e)
        end_hdr = False
        if p >= e:
            end_hdr = True
        else:
            c0 = _at(a, p)
            if c0 == 10:
                hend = p + 1
                end_hdr = True
            elif c0 == 13 and p + 1 < e and _at(a, p + 1) == 10:
                hend = p + 2
                end_hdr = True
            elif (c0 == 32 or c0 == 9) and cur != -1:
                lf = _find_lf(a, p, e)
                cve = lf
                folded = True
                p = lf + 1
                continue
        # finish the current header
        if cur >= 0:
            if cur == H_VIA:
                vs, ve, fl = _finish_value(a, cvs, cve, folded, scr, sp)
                if fl:
                    sp = ve
                via_count += _via_elements(scr if fl else a, vs, ve, hs, he, hsrc, fl, hs[H_VIA] == -1)
            elif hs[cur] == -1:
                vs, ve, fl = _finish_value(a, cvs, cve, folded, scr, sp)
                if fl:
                    sp = ve
                hs[cur] = vs
                he[cur] = ve
                hsrc[cur] = fl
        cur = -1
        folded = False
        if end_hdr:
            break
        # a header line: name, colon
        q = p
        ws_in = False
        ne = -1
        while q < e:
            c = _at(a, q)
            if c == 58 or c == 10:
                break
            if c == 32 or c == 9:
                if ne < 0:
                    ne = q
            elif ne >= 0:
                ws_in = True
            q += 1
        lf = q
        if q < e and _at(a, q) == 58:
            colon = q
            if ne < 0:
                ne = colon
            n = ne - p
            if n > 0 and not ws_in:
                cur = -2
                if n <= 24:
                    c1 = _lower(_at(a, p))
                    for k in range(name_len.shape[0]):
                        if name_len[k] != n or name_tab[k, 0] != c1:
                            continue
                        same = True
                        for t in range(1, n):
                            if _lower(_at(a, p + t)) != name_tab[k, t]:
                                same = False
                                break
                        if same:
                            cur = name_id[k]
                            break
                cvs = colon + 1
            lf = _find_lf(a, colon, e)
            cve = lf
        p = lf + 1
    # ---- fields
    status = -1
    if kind == 2:
        status = x
    err = 0
    if kind == 2 and (status < 100 or status > 699):
        err = R_MAL_STATUS
    if err == 0 and not (hs[H_CALLID] >= 0 and he[H_CALLID] > hs[H_CALLID]):
        err = R_MAL_CALLID
    cseq = -1
    cm_s = -1
    cm_e = -1
    cv = a
    if hs[H_CSEQ] < 0:
        if err == 0:
            err = R_MAL_CSEQ
    else:
        cv = _src(a, scr, hsrc, H_CSEQ)
        # bytes.split(): ASCII whitespace
        q = hs[H_CSEQ]
        qe = he[H_CSEQ]
        while q < qe and (cv[q] == 32 or (cv[q] >= 9 and cv[q] <= 13)):
            q += 1
        t0 = q
        while q < qe and not (cv[q] == 32 or (cv[q] >= 9 and cv[q] <= 13)):
            q += 1
        t1 = q
        cseq = _u32v(cv, t0, t1, U32_MAX) if t1 > t0 else -1
        if cseq < 0 and err == 0:
            err = R_MAL_CSEQ
        while q < qe and (cv[q] == 32 or (cv[q] >= 9 and cv[q] <= 13)):
            q += 1
        if q < qe:
            cm_s = q
            while q < qe and not (cv[q] == 32 or (cv[q] >= 9 and cv[q] <= 13)):
                q += 1
            cm_e = q
    if err != 0:
        return err, 0, -1
    clen = -1
    if hs[H_CLEN] >= 0:
        clen = _u32v(_src(a, scr, hsrc, H_CLEN), hs[H_CLEN], he[H_CLEN], I31_MAX)
    hlen = (hend - s) if hend >= 0 else (e - s)
    _write_row(a, s, kind, x, r, I, O, V, D, dl, scr, hs, he, hsrc, hlen, cseq, status, via_count,
               cv, cm_s, cm_e)
    return 1, hlen, clen


# ======================================================================== hash tables
@njit(cache=True, inline="always")
def _mix(h, v):
    h ^= v + np.int64(0x9E3779B97F4A7C15) + (h << 6) + (h >> 2)
    return h


@njit(cache=True)
def _addr_id(ak, av, alist, st, hi, lo, fam):
    """Id of an address (hi, lo, family) in the interning table; new ones are appended."""
    m = ak.shape[0] - 1
    h = _mix(_mix(_mix(np.int64(fam), hi), lo), np.int64(0)) & m
    while True:
        v = av[h]
        if v < 0:
            n = st[ST_NADDR]
            av[h] = n
            ak[h, 0] = hi
            ak[h, 1] = lo
            ak[h, 2] = fam
            alist[n, 0] = hi
            alist[n, 1] = lo
            alist[n, 2] = fam
            st[ST_NADDR] = n + 1
            return n
        if ak[h, 0] == hi and ak[h, 1] == lo and ak[h, 2] == fam:
            return v
        h = (h + 1) & m


@njit(cache=True)
def rehash_addr(ak, av, nak, nav):
    m = nak.shape[0] - 1
    for i in range(ak.shape[0]):
        v = av[i]
        if v >= 0:
            h = _mix(_mix(_mix(ak[i, 2], ak[i, 0]), ak[i, 1]), np.int64(0)) & m
            while nav[h] >= 0:
                h = (h + 1) & m
            nav[h] = v
            nak[h, 0] = ak[i, 0]
            nak[h, 1] = ak[i, 1]
            nak[h, 2] = ak[i, 2]


@njit(cache=True)
def _flow_id(tk, tv, fs, st, k0, k1, k2, k3, k4):
    m = tk.shape[0] - 1
    h = _mix(_mix(_mix(_mix(_mix(np.int64(0), k0), k1), k2), k3), k4) & m
    while True:
        v = tv[h]
        if v < 0:
            n = st[ST_NFLOW]
            tv[h] = n
            tk[h, 0] = k0
            tk[h, 1] = k1
            tk[h, 2] = k2
            tk[h, 3] = k3
            tk[h, 4] = k4
            for j in range(NF):
                fs[n, j] = 0
            st[ST_NFLOW] = n + 1
            return n
        if tk[h, 0] == k0 and tk[h, 1] == k1 and tk[h, 2] == k2 and tk[h, 3] == k3 and tk[h, 4] == k4:
            return v
        h = (h + 1) & m


@njit(cache=True)
def rehash_flows(tk, tv, ntk, ntv):
    m = ntk.shape[0] - 1
    for i in range(tk.shape[0]):
        v = tv[i]
        if v >= 0:
            h = _mix(_mix(_mix(_mix(_mix(np.int64(0), tk[i, 0]), tk[i, 1]), tk[i, 2]), tk[i, 3]),
                     tk[i, 4]) & m
            while ntv[h] >= 0:
                h = (h + 1) & m
            ntv[h] = v
            for j in range(5):
                ntk[h, j] = tk[i, j]


@njit(cache=True)
def compact_arena(fs, nflow, arena, extra):
    """A new arena holding every flow's pending bytes (each region sized to a power of two),
    with at least ``extra`` bytes free."""
    need = extra
    for f in range(nflow):
        if fs[f, F_LEN] > 0:
            c = 256
            while c < fs[f, F_LEN] * 2:
                c *= 2
            need += c
    size = 1 << 16
    while size < 2 * need:
        size *= 2
    na = np.empty(size, np.uint8)
    o = 0
    mx = 0
    for f in range(nflow):
        n = fs[f, F_LEN]
        if n > mx:
            mx = n
        if n > 0:
            c = 256
            while c < n * 2:
                c *= 2
            src = fs[f, F_OFF] + fs[f, F_HEAD]
            na[o:o + n] = arena[src:src + n]
            fs[f, F_OFF] = o
            fs[f, F_CAP] = c
            fs[f, F_HEAD] = 0
            o += c
        else:
            fs[f, F_OFF] = 0
            fs[f, F_CAP] = 0
            fs[f, F_HEAD] = 0
    return na, o, mx


# ======================================================================== the row writer
@njit(cache=True)
def _emit(a, s, e, framing, src_id, dst_id, sport, dport, transport, frame, ts, size_udp,
          st, nr, I, O, V, D, dl, scr, hs, he, name_tab, name_len, name_id):
    """Parse a[s:e] and, if SIP and well formed, write row nr[0]; returns (code, hlen, clen)."""
    r = nr[0]
    code, hlen, clen = parse_sip(a, s, e, r, I, O, V, D, dl, scr, hs, he, name_tab, name_len,
                                 name_id, framing)
    if code == 1:
        I[I_FRAME, r] = frame
        I[I_TS, r] = ts
        I[I_SPORT, r] = sport
        I[I_DPORT, r] = dport
        I[I_SRC, r] = src_id
        I[I_DST, r] = dst_id
        I[I_TRANSPORT, r] = transport
        if size_udp >= 0:
            I[I_SIZE, r] = size_udp
        else:
            I[I_SIZE, r] = hlen + (clen if clen > 0 else 0)
        nr[0] = r + 1
    return code, hlen, clen


# ============================================================================ TCP streams
@njit(cache=True)
def _line_start_sip(a, s, e):
    """True if a[s:e] begins with a complete SIP start line (a LF present) -> 1, could still
    become one (no LF yet, short) -> 2, cannot -> 0."""
    eol = -1
    for i in range(s, min(e, s + 4096)):
        if a[i] == 10:
            eol = i
            break
    if eol < 0:
        return 2 if e - s < 4096 else 0
    k, _x = _start_line(a, s, eol + 1)
    return 1 if k != 0 else 0


@njit(cache=True)
def _tcp(fs, f, arena, a, ps, pe, seq, syn, w, src_id, dst_id, sport, dport, frame, ts,
         st, cnt, nr, I, O, V, D, dl, scr, hs, he, name_tab, name_len, name_id):
    """One TCP segment (payload a[ps:pe]) of flow f."""
    n = pe - ps
    if fs[f, F_SEEN] == 0 or syn:
        if fs[f, F_SEEN] == 0 and not syn:
            st[ST_MIDSTREAM] += 1
        fs[f, F_SEEN] = 1
        fs[f, F_NEXT] = (seq + 1) & 0xFFFFFFFF if syn else seq
        fs[f, F_LEN] = 0
        fs[f, F_HEAD] = 0
        if fs[f, F_PEND] > 0:
            cnt[R_INCOMPLETE] += fs[f, F_PEND]
            fs[f, F_PEND] = 0
    if n <= 0:
        cnt[R_TCP_EMPTY] += w
        return
    nxt = fs[f, F_NEXT]
    delta = (seq - nxt) & 0xFFFFFFFF
    if delta >= 0x80000000:
        skip = (nxt - seq) & 0xFFFFFFFF
        if skip >= n:
            cnt[R_TCP_RETRANS] += w
            return
        ps += skip
        n -= skip
        seq = nxt
    elif delta != 0:
        if fs[f, F_LEN] > 0 or fs[f, F_PEND] > 0:
            cnt[R_TCP_GAP] += fs[f, F_PEND]
            st[ST_DISCARD_BYTES] += fs[f, F_LEN]
            fs[f, F_PEND] = 0
            fs[f, F_LEN] = 0
            fs[f, F_HEAD] = 0
    fs[f, F_NEXT] = (seq + n) & 0xFFFFFFFF
    # append to the flow's region (the caller guaranteed room at the arena's end)
    ln = fs[f, F_LEN]
    if ln == 0:
        fs[f, F_HEAD] = 0
    if fs[f, F_HEAD] + ln + n > fs[f, F_CAP]:
        c = 256
        while c < 2 * (ln + n):
            c *= 2
        o = st[ST_ARENA]
        src = fs[f, F_OFF] + fs[f, F_HEAD]
        arena[o:o + ln] = arena[src:src + ln]
        fs[f, F_OFF] = o
        fs[f, F_CAP] = c
        fs[f, F_HEAD] = 0
        st[ST_ARENA] = o + c
    b0 = fs[f, F_OFF] + fs[f, F_HEAD]
    arena[b0 + ln:b0 + ln + n] = a[ps:ps + n]
    ln += n
    if ln > st[ST_MAXPEND]:
        st[ST_MAXPEND] = ln
    cur_good = False
    cur_bad = 0
    crlf_only = True
    for i in range(ps, ps + n):
        if a[i] != 13 and a[i] != 10:
            crlf_only = False
            break
    # extract complete messages from arena[b0 : b0+ln]
    h = b0
    end = b0 + ln
    while True:
        while h < end and (arena[h] == 13 or arena[h] == 10):
            h += 1
        if h >= end:
            break
        ok = _line_start_sip(arena, h, end)
        if ok == 2:
            break
        if ok == 0:
            # not a start line: discard up to the next line that starts one
            j = h
            found = -1
            last_lf = -1
            while j < end:
                if arena[j] == 10:
                    last_lf = j
                    k = _line_start_sip(arena, j + 1, end)
                    if k == 1:
                        found = j + 1
                        break
                    if k == 2 and j + 1 < end:
                        found = j + 1
                        break
                j += 1
            cut = found
            if cut < 0:
                cut = (last_lf + 1) if last_lf >= 0 else end
                if end - cut >= 4096:
                    cut = end
            st[ST_DISCARD_BYTES] += cut - h
            h = cut
            if fs[f, F_PEND] > 0 and h - b0 >= ln - n:
                cnt[R_TCP_NOT_SIP] += fs[f, F_PEND]
                fs[f, F_PEND] = 0
            continue
        hend = header_end(arena, h, end)
        if hend < 0:
            if end - h > MAX_HDR:
                cnt[R_TCP_TOO_BIG] += fs[f, F_PEND]
                fs[f, F_PEND] = 0
                cur_bad = R_TCP_TOO_BIG
                st[ST_DISCARD_BYTES] += end - h
                h = end
            break
        # Content-Length of this header block
        clen = _clen(arena, h, hend, name_tab, name_len, name_id)
        if clen > MAX_BODY:
            cnt[R_TCP_TOO_BIG] += fs[f, F_PEND]
            fs[f, F_PEND] = 0
            cur_bad = R_TCP_TOO_BIG
            st[ST_DISCARD_BYTES] += hend - h
            h = hend
            continue
        mlen = hend - h + (clen if clen > 0 else 0)
        if end - h < mlen:
            break
        code, _hl, _cl = _emit(arena, h, h + mlen, True, src_id, dst_id, sport, dport, 1, frame,
                               ts, -1, st, nr, I, O, V, D, dl, scr, hs, he, name_tab, name_len,
                               name_id)
        if code == 1:
            cnt[C_PARSED] += fs[f, F_PEND]
            fs[f, F_PEND] = 0
            cur_good = True
        else:
            r = code if code > 1 else R_TCP_NOT_SIP
            cnt[r] += fs[f, F_PEND]
            fs[f, F_PEND] = 0
            if cur_bad == 0:
                cur_bad = r
        h += mlen
    fs[f, F_HEAD] += h - b0
    fs[f, F_LEN] = end - h
    if fs[f, F_LEN] == 0:
        fs[f, F_HEAD] = 0
    if cur_good:
        cnt[C_PARSED] += w
    elif cur_bad != 0:
        cnt[cur_bad] += w
    elif fs[f, F_LEN] > 0:
        fs[f, F_PEND] += w
    elif crlf_only:
        cnt[R_TCP_KEEPALIVE] += w
    else:
        cnt[R_TCP_NOT_SIP] += w


@njit(cache=True)
def _clen(a, s, hend, name_tab, name_len, name_id):
    """Content-Length of the header block a[s:hend] per sipmsg.content_length, -1 if none."""
    p = s
    while p < hend and a[p] != 10:
        p += 1
    p += 1
    cvs = -1
    cve = -1
    cur = False
    while p < hend:
        lf = hend
        for q in range(p, hend):
            if a[q] == 10:
                lf = q
                break
        if lf > p and (a[p] == 32 or a[p] == 9) and cur:
            cve = lf
            p = lf + 1
            continue
        if cur:
            break
        le = lf
        if le > p and a[le - 1] == 13:
            le -= 1
        if le == p:
            break
        colon = -1
        for q in range(p, le):
            if a[q] == 58:
                colon = q
                break
        if colon > p:
            ne = colon
            while ne > p and _ws(a[ne - 1]):
                ne -= 1
            n = ne - p
            if (n == 1 and _lower(a[p]) == 108) or n == 14:
                okk = True
                if n == 14:
                    for q in range(14):
                        if _lower(a[p + q]) != _CLEN_NAME[q]:
                            okk = False
                            break
                if okk:
                    cur = True
                    cvs = colon + 1
                    cve = lf
        p = lf + 1
    if not cur:
        return -1
    # value: unfold-free digits check (folded Content-Length: strip and join like sipmsg)
    digits = np.int64(0)
    seen = False
    state = 0  # 0 leading ws, 1 digits, 2 trailing ws
    for q in range(cvs, cve):
        c = a[q]
        if c == 32 or c == 9 or c == 13 or c == 10:
            if state == 1:
                state = 2
            continue
        if c < 48 or c > 57 or state == 2:
            return -1
        state = 1
        seen = True
        if digits <= I31_MAX:
            digits = digits * 10 + (c - 48)
    if not seen or digits > I31_MAX:
        return -1
    return digits


# ====================================================================== IP fragments
@njit(cache=True)
def _frag(frs, frl, farena, st, cnt, k0, k1, k2, k3, k4, k5, off, more, a, ps, pe, w, dgram):
    """Add one fragment; returns (datagram length, frames) when complete, else (-1, 0)."""
    nslots = st[ST_NFRAG]
    slot = -1
    free = -1
    for i in range(nslots):
        if frs[i, FR_USED] == 0:
            if free < 0:
                free = i
            continue
        if frs[i, 0] == k0 and frs[i, 1] == k1 and frs[i, 2] == k2 and frs[i, 3] == k3 \
                and frs[i, 4] == k4 and frs[i, 5] == k5:
            slot = i
            break
    if slot < 0:
        if free < 0:
            if nslots >= MAX_FRAG_SLOTS:
                cnt[R_FRAG_LIMIT] += w
                return -1, 0
            free = nslots
            st[ST_NFRAG] = nslots + 1
        slot = free
        frs[slot, 0] = k0
        frs[slot, 1] = k1
        frs[slot, 2] = k2
        frs[slot, 3] = k3
        frs[slot, 4] = k4
        frs[slot, 5] = k5
        frs[slot, FR_TOTAL] = -1
        frs[slot, FR_NFRAG] = 0
        frs[slot, FR_NFRAMES] = 0
        frs[slot, FR_USED] = 1
    n = pe - ps
    nf = frs[slot, FR_NFRAG]
    j = -1
    for i in range(nf):
        if frl[slot, i, 0] == off:
            j = i
            break
    if j < 0:
        if nf >= MAX_FRAGS:
            cnt[R_FRAG_LIMIT] += w
            return -1, 0
        j = nf
        frs[slot, FR_NFRAG] = nf + 1
    o = st[ST_FARENA]
    farena[o:o + n] = a[ps:pe]
    st[ST_FARENA] = o + n
    frl[slot, j, 0] = off
    frl[slot, j, 1] = n
    frl[slot, j, 2] = o
    frs[slot, FR_NFRAMES] += w
    if not more:
        frs[slot, FR_TOTAL] = off + n
    total = frs[slot, FR_TOTAL]
    if total < 0:
        return -1, 0
    # complete? (sorted by offset, no hole)
    nf = frs[slot, FR_NFRAG]
    order = np.argsort(frl[slot, :nf, 0], kind="mergesort")
    have = 0
    for t in range(nf):
        i = order[t]
        fo = frl[slot, i, 0]
        if fo > have:
            return -1, 0
        if fo + frl[slot, i, 1] > have:
            have = fo + frl[slot, i, 1]
    if have < total or have > dgram.shape[0]:
        return -1, 0
    for t in range(nf):
        i = order[t]
        fo = frl[slot, i, 0]
        ln = frl[slot, i, 1]
        src = frl[slot, i, 2]
        dgram[fo:fo + ln] = farena[src:src + ln]
    frames = frs[slot, FR_NFRAMES]
    frs[slot, FR_USED] = 0
    live = 0
    for i in range(st[ST_NFRAG]):
        live += frs[i, FR_USED]
    if live == 0:
        st[ST_FARENA] = 0
        st[ST_NFRAG] = 0
    return have, frames


# ========================================================================== one packet
K_ETH, K_IP4, K_IP6, K_NONE = 0, 1, 2, 3


@njit(cache=True)
def _packet(a, p0, n0, link, frame, ts, st, cnt, nr, I, O, V, D, dl, scr, hs, he, name_tab,
            name_len, name_id, ak, av, alist, tk, tv, fs, arena, frs, frl, farena, dgram):
    """Decode one packet a[p0:p0+n0] down to SIP; every outcome is counted in cnt."""
    e = p0 + n0
    off = p0
    w = 1
    # ---- link layer
    if link == 1:
        kind = K_ETH
    elif link == 113:
        if n0 < 16:
            cnt[R_SHORT] += 1
            return
        et = _be16(a, p0 + 14)
        off = p0 + 16
        kind = K_IP4 if et == 0x0800 else K_IP6 if et == 0x86DD else K_NONE
        if et == 0x8100 or et == 0x88A8:
            kind = K_ETH  # a VLAN tag after the cooked header: parsed as Ethernet from the
            off = p0 + 2  # protocol field on (off + 12 = the protocol field)
    elif link == 276:
        if n0 < 20:
            cnt[R_SHORT] += 1
            return
        et = _be16(a, p0)
        off = p0 + 20
        kind = K_IP4 if et == 0x0800 else K_IP6 if et == 0x86DD else K_NONE
    elif link == 0 or link == 108:
        if n0 < 4:
            cnt[R_SHORT] += 1
            return
        fam = _u32(a, p0, link == 108)
        if link == 0 and fam > 0xFFFF:
            fam = _u32(a, p0, True)
        off = p0 + 4
        kind = K_IP4 if fam == 2 else K_IP6 if (fam == 10 or fam == 24 or fam == 28 or fam == 30) else K_NONE
    elif link == 101 or link == 228 or link == 229 or link == 12 or link == 14:
        kind = K_NONE
        if n0 >= 1:
            v = a[p0] >> 4
            kind = K_IP4 if v == 4 else K_IP6 if v == 6 else K_NONE
    else:
        cnt[R_LINK] += 1
        st[ST_BADLINK] = link
        return
    src_hi = np.int64(0)
    src_lo = np.int64(0)
    dst_hi = np.int64(0)
    dst_lo = np.int64(0)
    fam = 4
    reassembled = False
    for _depth in range(8):
        if kind == K_ETH:
            if off + 14 > e:
                cnt[R_SHORT] += w
                return
            et = _be16(a, off + 12)
            off += 14
            while True:
                if et == 0x8100 or et == 0x88A8 or et == 0x9100:
                    if off + 4 > e:
                        cnt[R_SHORT] += w
                        return
                    et = _be16(a, off + 2)
                    off += 4
                elif et < 0x0600:  # 802.3 length: LLC, SNAP
                    if off + 8 <= e and a[off] == 0xAA and a[off + 1] == 0xAA and a[off + 2] == 3:
                        et = _be16(a, off + 6)
                        off += 8
                    else:
                        et = 0
                        break
                elif et == 0x8864:  # PPPoE session
                    if off + 8 > e:
                        cnt[R_SHORT] += w
                        return
                    pp = _be16(a, off + 6)
                    off += 8
                    et = 0x0800 if pp == 0x21 else 0x86DD if pp == 0x57 else 0
                    break
                elif et == 0x8847 or et == 0x8848:  # MPLS label stack
                    while True:
                        if off + 4 > e:
                            cnt[R_SHORT] += w
                            return
                        bos = a[off + 2] & 1
                        off += 4
                        if bos:
                            break
                    if off >= e:
                        cnt[R_SHORT] += w
                        return
                    v = a[off] >> 4
                    et = 0x0800 if v == 4 else 0x86DD if v == 6 else 0
                    break
                else:
                    break
            if et == 0x0800:
                kind = K_IP4
            elif et == 0x86DD:
                kind = K_IP6
            else:
                cnt[R_NOT_IP] += w
                return
            continue
        if kind == K_NONE:
            cnt[R_NOT_IP] += w
            return
        # ---- IP
        proto = -1
        ps = 0
        pe = 0
        is_frag = False
        foff = 0
        fmore = False
        fid = np.int64(0)
        if kind == K_IP4:
            if off + 20 > e:
                cnt[R_SHORT] += w
                return
            if a[off] >> 4 != 4:
                cnt[R_SHORT] += w
                return
            ihl = (a[off] & 15) * 4
            total = _be16(a, off + 2)
            if ihl < 20 or off + ihl > e:
                cnt[R_SHORT] += w
                return
            if total == 0:
                end = e
            else:
                if total < ihl:
                    cnt[R_SHORT] += w
                    return
                end = off + total
                if end > e:
                    cnt[R_SNAPPED] += w
                    return
            proto = a[off + 9]
            src_hi = np.int64(0)
            src_lo = _be32(a, off + 12)
            dst_hi = np.int64(0)
            dst_lo = _be32(a, off + 16)
            fam = 4
            ff = _be16(a, off + 6)
            ps = off + ihl
            pe = end
            if ff & 0x3FFF:
                is_frag = True
                foff = (ff & 0x1FFF) * 8
                fmore = (ff & 0x2000) != 0
                fid = _be16(a, off + 4)
        else:
            if off + 40 > e:
                cnt[R_SHORT] += w
                return
            if a[off] >> 4 != 6:
                cnt[R_SHORT] += w
                return
            plen = _be16(a, off + 4)
            end = e if plen == 0 else off + 40 + plen
            if end > e:
                cnt[R_SNAPPED] += w
                return
            src_hi = _be64(a, off + 8)
            src_lo = _be64(a, off + 16)
            dst_hi = _be64(a, off + 24)
            dst_lo = _be64(a, off + 32)
            fam = 6
            nxt = a[off + 6]
            q = off + 40
            for _x in range(16):
                if nxt == 0 or nxt == 43 or nxt == 60 or nxt == 135 or nxt == 139 or nxt == 140:
                    if q + 2 > end:
                        cnt[R_SHORT] += w
                        return
                    nn = a[q]
                    q += (np.int64(a[q + 1]) + 1) * 8
                    nxt = nn
                elif nxt == 51:
                    if q + 2 > end:
                        cnt[R_SHORT] += w
                        return
                    nn = a[q]
                    q += (np.int64(a[q + 1]) + 2) * 4
                    nxt = nn
                elif nxt == 44:
                    if q + 8 > end:
                        cnt[R_SHORT] += w
                        return
                    nn = a[q]
                    fo = _be16(a, q + 2)
                    foff = fo & 0xFFF8
                    fmore = (fo & 1) != 0
                    fid = _be32(a, q + 4)
                    q += 8
                    nxt = nn
                    if foff != 0 or fmore:
                        is_frag = True
                    break
                else:
                    break
            if q > end:
                cnt[R_SHORT] += w
                return
            proto = nxt
            ps = q
            pe = end
        if is_frag:
            if reassembled:
                cnt[R_NESTED_FRAG] += w
                return
            dl_, frames = _frag(frs, frl, farena, st, cnt, src_hi, src_lo, dst_hi, dst_lo,
                                proto | (fam << 8), fid, foff, fmore, a, ps, pe, w, dgram)
            if dl_ < 0:
                return  # waiting for more (counted when complete or at the end)
            a = dgram
            ps = 0
            pe = dl_
            e = dl_
            w = frames
            reassembled = True
        # ---- transport
        if proto == 4 or proto == 41:  # IP in IP
            off = ps
            e = pe
            kind = K_IP4 if proto == 4 else K_IP6
            continue
        if proto == 47:  # GRE
            if ps + 4 > pe:
                cnt[R_SHORT] += w
                return
            fl = a[ps]
            gp = _be16(a, ps + 2)
            q = ps + 4
            if fl & 0x80:
                q += 4
            if fl & 0x20:
                q += 4
            if fl & 0x10:
                q += 4
            if gp == 0x88BE:  # ERSPAN type II
                q += 8
                gp = 0x6558
            elif gp == 0x22EB:  # ERSPAN type III
                q += 12
                if q <= pe and (a[q - 1] & 1):
                    q += 8
                gp = 0x6558
            if q > pe:
                cnt[R_SHORT] += w
                return
            off = q
            e = pe
            if gp == 0x0800:
                kind = K_IP4
            elif gp == 0x86DD:
                kind = K_IP6
            elif gp == 0x6558:
                kind = K_ETH
            else:
                cnt[R_NOT_IP] += w
                return
            continue
        if proto == 17:
            if ps + 8 > pe:
                cnt[R_SHORT] += w
                return
            sport = _be16(a, ps)
            dport = _be16(a, ps + 2)
            ulen = _be16(a, ps + 4)
            ue = pe
            if ulen >= 8 and ps + ulen < pe:
                ue = ps + ulen
            if (dport == 4789 or sport == 4789) and ue - ps >= 16 and (a[ps + 8] & 0x08):
                off = ps + 16
                e = ue
                kind = K_ETH
                continue
            sid = _addr_id(ak, av, alist, st, src_hi, src_lo, fam)
            did = _addr_id(ak, av, alist, st, dst_hi, dst_lo, fam)
            code, _h, _c = _emit(a, ps + 8, ue, False, sid, did, sport, dport, 0, frame, ts,
                                 ue - ps - 8, st, nr, I, O, V, D, dl, scr, hs, he, name_tab,
                                 name_len, name_id)
            if code == 1:
                cnt[C_PARSED] += w
            elif code == 0:
                cnt[R_UDP_NOT_SIP] += w
            else:
                cnt[code] += w
            return
        if proto == 6:
            if ps + 20 > pe:
                cnt[R_SHORT] += w
                return
            sport = _be16(a, ps)
            dport = _be16(a, ps + 2)
            seq = _be32(a, ps + 4)
            thl = (a[ps + 12] >> 4) * 4
            flags = a[ps + 13]
            if thl < 20 or ps + thl > pe:
                cnt[R_SHORT] += w
                return
            f = _flow_id(tk, tv, fs, st, src_hi ^ (np.int64(fam) << 60), src_lo, dst_hi, dst_lo,
                         (sport << 16) | dport)
            sid = _addr_id(ak, av, alist, st, src_hi, src_lo, fam)
            did = _addr_id(ak, av, alist, st, dst_hi, dst_lo, fam)
            _tcp(fs, f, arena, a, ps + thl, pe, seq, (flags & 2) != 0, w, sid, did, sport, dport,
                 frame, ts, st, cnt, nr, I, O, V, D, dl, scr, hs, he, name_tab, name_len, name_id)
            return
        cnt[R_NOT_L4] += w
        return
    cnt[R_SHORT] += w


# ============================================================================ record walk
@njit(cache=True)
def scan(buf, pos, end, eof, max_records, max_rows, st, cnt, ifs, ak, av, alist, tk, tv, fs,
         arena, frs, frl, farena, scr, hs, he, dgram, name_tab, name_len, name_id, I, O, V, D):
    """Walk the records of buf[pos:end] (the file's bytes from some record boundary).

    Stops after ``max_records`` records or ``max_rows`` rows (MORE_RECORDS), at a record that
    is not complete in the buffer (NEED_DATA; at ``eof`` a truncation error instead), or at
    the end (DONE).  The rows go to I, O, V, D (reused between calls; grown when needed).
    Returns (pos, status, nrows, I, O, V, D, arena, farena)."""
    cap = I.shape[1]
    for c in range(NS):
        O[c, 0] = 0
    dl = np.zeros(NS, np.int64)
    nr = np.zeros(1, np.int64)
    recs = 0
    status = DONE
    fmt = st[ST_FMT]
    while True:
        if recs >= max_records or nr[0] >= max_rows:
            status = MORE_RECORDS
            break
        if fmt == FMT_PCAP:
            hl = st[ST_RECHDR]
            big = st[ST_BIG] != 0
            if pos >= end:
                status = DONE if eof else NEED_DATA
                break
            if pos + hl > end:
                if eof:
                    st[ST_ERR] = ERR_TRUNC
                    st[ST_ERR_POS] = pos
                    st[ST_ERR_FRAME] = st[ST_FRAME] + 1
                    status = DONE
                else:
                    status = NEED_DATA
                break
            sec = _u32(buf, pos, big)
            frac = _u32(buf, pos + 4, big)
            incl = _u32(buf, pos + 8, big)
            if incl > MAX_PCAP_RECORD:
                st[ST_ERR] = ERR_CORRUPT
                st[ST_ERR_POS] = pos
                st[ST_ERR_FRAME] = st[ST_FRAME] + 1
                status = DONE
                break
            if pos + hl + incl > end:
                if eof:
                    st[ST_ERR] = ERR_TRUNC
                    st[ST_ERR_POS] = pos
                    st[ST_ERR_FRAME] = st[ST_FRAME] + 1
                    status = DONE
                else:
                    status = NEED_DATA
                break
            data = pos + hl
            caplen = incl
            ts = sec * 1_000_000_000 + frac * st[ST_TSMUL]
            link = st[ST_LINK]
            pos += hl + incl
            has_pkt = True
            no_ts = False
            undef = False
        else:
            if pos >= end:
                status = DONE if eof else NEED_DATA
                break
            if pos + 12 > end:
                if eof:
                    st[ST_ERR] = ERR_TRUNC
                    st[ST_ERR_POS] = pos
                    st[ST_ERR_FRAME] = st[ST_FRAME] + 1
                    status = DONE
                else:
                    status = NEED_DATA
                break
            if buf[pos] == 0x0A and buf[pos + 1] == 0x0D and buf[pos + 2] == 0x0D and buf[pos + 3] == 0x0A:
                b8 = buf[pos + 8]
                if b8 == 0x4D and buf[pos + 9] == 0x3C:
                    st[ST_BIG] = 0
                elif b8 == 0x1A and buf[pos + 9] == 0x2B:
                    st[ST_BIG] = 1
                else:
                    st[ST_ERR] = ERR_CORRUPT
                    st[ST_ERR_POS] = pos
                    st[ST_ERR_FRAME] = st[ST_FRAME] + 1
                    status = DONE
                    break
            big = st[ST_BIG] != 0
            btype = _u32(buf, pos, big)
            blen = _u32(buf, pos + 4, big)
            if blen < 12 or (blen & 3) != 0 or blen > MAX_PCAPNG_BLOCK:
                st[ST_ERR] = ERR_CORRUPT
                st[ST_ERR_POS] = pos
                st[ST_ERR_FRAME] = st[ST_FRAME] + 1
                status = DONE
                break
            if pos + blen > end:
                if eof:
                    st[ST_ERR] = ERR_TRUNC
                    st[ST_ERR_POS] = pos
                    st[ST_ERR_FRAME] = st[ST_FRAME] + 1
                    status = DONE
                else:
                    status = NEED_DATA
                break
            if _u32(buf, pos + blen - 4, big) != blen:
                st[ST_ERR] = ERR_CORRUPT
                st[ST_ERR_POS] = pos
                st[ST_ERR_FRAME] = st[ST_FRAME] + 1
                status = DONE
                break
            has_pkt = False
            no_ts = False
            undef = False
            data = 0
            caplen = 0
            ts = np.int64(0)
            link = 0
            if btype == 0x0A0D0D0A:
                st[ST_NIF] = 0
                st[ST_SECTIONS] += 1
            elif btype == 1:
                if blen < 20:
                    st[ST_ERR] = ERR_CORRUPT
                    st[ST_ERR_POS] = pos
                    st[ST_ERR_FRAME] = st[ST_FRAME] + 1
                    status = DONE
                    break
                lk = _u16(buf, pos + 8, big)
                if lk == 12 or lk == 14:
                    lk = 101
                res = 6
                tsoff = np.int64(0)
                o = pos + 16
                while o + 4 <= pos + blen - 4:
                    code = _u16(buf, o, big)
                    olen = _u16(buf, o + 2, big)
                    if code == 0:
                        break
                    if o + 4 + olen > pos + blen - 4:
                        break
                    if code == 9 and olen >= 1:
                        res = buf[o + 4]
                    elif code == 14 and olen >= 8:
                        lo = _u32(buf, o + 4, big)
                        hi = _u32(buf, o + 8, big)
                        if big:
                            lo, hi = hi, lo
                        tsoff = np.int64((np.uint64(hi) << np.uint64(32)) | np.uint64(lo))
                    o += 4 + ((olen + 3) & ~3)
                if res & 0x80:
                    num = np.int64(1_000_000_000)
                    k = res & 0x7F
                    den = np.int64(1) << np.int64(min(k, 62))
                elif res <= 9:
                    num = np.int64(10) ** (9 - res)
                    den = np.int64(1)
                else:
                    num = np.int64(1)
                    den = np.int64(10) ** min(res - 9, 18)
                k = st[ST_NIF]
                if k < MAX_IF:
                    ifs[k, IF_LINK] = lk
                    ifs[k, IF_NUM] = num
                    ifs[k, IF_DEN] = den
                    ifs[k, IF_OFF] = tsoff * 1_000_000_000
                st[ST_NIF] = k + 1
            elif btype == 6 or btype == 2:   # enhanced / obsolete packet block
                if blen < 32:
                    st[ST_ERR] = ERR_CORRUPT
                    st[ST_ERR_POS] = pos
                    st[ST_ERR_FRAME] = st[ST_FRAME] + 1
                    status = DONE
                    break
                iface = _u32(buf, pos + 8, big) if btype == 6 else _u16(buf, pos + 8, big)
                caplen = _u32(buf, pos + 20, big)
                if caplen > blen - 32:
                    st[ST_ERR] = ERR_CORRUPT
                    st[ST_ERR_POS] = pos
                    st[ST_ERR_FRAME] = st[ST_FRAME] + 1
                    status = DONE
                    break
                has_pkt = True
                data = pos + 28
                if iface >= st[ST_NIF] or iface >= MAX_IF:
                    undef = True
                else:
                    link = ifs[iface, IF_LINK]
                    ts = _ts_ns(_u32(buf, pos + 12, big), _u32(buf, pos + 16, big),
                                ifs[iface, IF_NUM], ifs[iface, IF_DEN]) + ifs[iface, IF_OFF]
            elif btype == 3:
                has_pkt = True
                no_ts = True
            pos += blen
        if not has_pkt:
            continue
        recs += 1
        st[ST_FRAME] += 1
        frame = st[ST_FRAME]
        if no_ts:
            cnt[R_NO_TS] += 1
            continue
        if undef:
            cnt[R_UNDEF_IF] += 1
            if st[ST_UNDEF_POS] < 0:
                st[ST_UNDEF_POS] = pos - _u32(buf, pos - 4, st[ST_BIG] != 0)
            continue
        if ts == 0:
            st[ST_TS_ZERO] += 1
        else:
            st[ST_TS_NONZERO] += 1
        # room for whatever this packet can produce (a reassembled datagram may exceed caplen)
        cl = max(caplen, 131072)
        r = nr[0]
        if r + cl // 8 + 16 > cap:
            cap2 = max(2 * cap, r + cl // 8 + 16)
            I2 = np.empty((NI, cap2), np.int64)
            O2 = np.empty((NS, cap2 + 1), np.int64)
            V2 = np.empty((NS, cap2), np.uint8)
            I2[:, :r] = I[:, :r]
            O2[:, :r + 1] = O[:, :r + 1]
            V2[:, :r] = V[:, :r]
            I = I2
            O = O2
            V = V2
            cap = cap2
        need = cl + MAX_HDR + 65536
        dmax = 0
        for c in range(NS):
            if dl[c] > dmax:
                dmax = dl[c]
        if dmax + need > D.shape[1]:
            D2 = np.empty((NS, 2 * D.shape[1] + need), np.uint8)
            for c in range(NS):
                D2[c, :dl[c]] = D[c, :dl[c]]
            D = D2
        room = 4 * (st[ST_MAXPEND] + cl) + 512
        if st[ST_ARENA] + room > arena.shape[0]:
            arena, used, mx = compact_arena(fs, st[ST_NFLOW], arena, 2 * room)
            st[ST_ARENA] = used
            st[ST_MAXPEND] = mx
        if st[ST_FARENA] + cl > farena.shape[0]:
            fa2 = np.empty(2 * farena.shape[0] + cl, np.uint8)
            fa2[:st[ST_FARENA]] = farena[:st[ST_FARENA]]
            farena = fa2
        _packet(_borrow(buf), data, caplen, link, frame, ts, _borrow(st), _borrow(cnt), _borrow(nr),
                _borrow(I), _borrow(O), _borrow(V), _borrow(D), _borrow(dl), _borrow(scr),
                _borrow(hs), _borrow(he), _borrow(name_tab), _borrow(name_len), _borrow(name_id),
                _borrow(ak), _borrow(av), _borrow(alist), _borrow(tk), _borrow(tv), _borrow(fs),
                _borrow(arena), _borrow(frs), _borrow(frl), _borrow(farena), _borrow(dgram))
    return pos, status, nr[0], I, O, V, D, arena, farena


@njit(cache=True)
def pending_frames(fs, nflow, frs, nfrag):
    """Packets still waiting in TCP buffers or fragment tables (for the final account)."""
    n = 0
    for f in range(nflow):
        n += fs[f, F_PEND]
    for i in range(nfrag):
        if frs[i, FR_USED]:
            n += frs[i, FR_NFRAMES]
    return n
