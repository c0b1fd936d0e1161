"""One packet, from its link layer down to SIP: :func:`_packet`.

The walk is a loop over layers (at most 8), with ``kind`` the header that starts at ``off``:

* link: Ethernet (802.1Q/802.1ad/QinQ tags, LLC/SNAP, PPPoE session, MPLS), Linux cooked SLL
  and SLL2, BSD null/loopback, raw IPv4/IPv6;
* IP: IPv4 (options; a total length of 0, as TSO captures have, means "to the end of the
  captured bytes") and IPv6 (hop-by-hop, routing, destination, mobility, HIP, shim6 and AH
  extension headers); a fragment goes to :mod:`.ipfrag` and the reassembled datagram
  continues the walk;
* tunnels: IP-in-IP, GRE (and ERSPAN II/III), VXLAN (UDP port 4789) and Geneve (UDP port 6081)
  send the walk round again with the inner header;
* transport: UDP carries one SIP message per datagram (payload bounded by the UDP length,
  :func:`.sip._emit`; further messages after the first one's body are read too,
  :func:`_more_in_datagram`), or a HEP packet from a capture agent on any port (:mod:`.hep`); a UDP
  payload that is neither is named when it can be (:func:`_udp_other`: SigComp, DTLS, ESP in
  UDP); TCP goes to the flow's byte stream (:func:`.tcp._tcp`); SCTP and ESP are refused by
  name, their bytes counted (``st[XB + code]``); IPv4 AH is skipped (it encrypts nothing).

Every outcome is one counter of ``cnt``, weighted by ``w`` (the packets a reassembled datagram
stands for).

:func:`_packet` is compiled without Numba's reference counting (``_nrt=False``, which its
callees inherit): with some thirty array arguments and a return on every malformed case, the
counting cost about 60 calls per packet, an eighth of the plain-UDP path's time.  Nothing it
calls may therefore allocate; the TCP layer does (it reorders segments), so a TCP segment is
handed back to the record walk (``seg``; :func:`_segment` takes it from there).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .hep import _hep, hep2_len, is_hep3
from .ipfrag import _frag
from .layout import (C_PARSED, DEDUP_CHECK, DEDUP_REMEMBER, I_SIZE, R_DTLS, R_ESP, R_LINK,
                     R_NESTED_FRAG, R_NOT_IP, R_NOT_L4, R_SCTP, R_SHORT, R_SIGCOMP, R_SNAPPED,
                     R_UDP_NOT_SIP, SEG_DGRAM, SEG_DPORT, SEG_DST_HI, SEG_DST_LO, SEG_FAM, SEG_FLAGS,
                     SEG_PE, SEG_PS, SEG_SEQ, SEG_SPORT, SEG_SRC_HI, SEG_SRC_LO, SEG_W, SEG_WIN,
                     ST_BADLINK, ST_NR, X_DEDUP, X_GENEVE, X_IPID, X_UDP_EXTRA, X_UDP_EXTRA_BAD,
                     X_UDP_MULTI, XB, XZ, XZ_OVER, NZW, NZWC, ZW_ID, ZW_N, ZW_PORT, ZW_RST, ZW_T0,
                     ZW_T1)
from .messages import _emit_span, _line_start_sip
from .primitives import _be16, _be32, _be64, _u32
from .sip import _emit_udp
from .tables import _addr_id, _flow_id
from .tcp import _tcp


K_ETH, K_IP4, K_IP6, K_NONE = 0, 1, 2, 3
#: what :func:`_packet` returns: the packet is done (counted), or a TCP segment waits in ``seg``
DONE_PACKET, TCP_SEGMENT = 0, 1


@njit(cache=True, _nrt=False)
def _packet(a, p0, n0, link, frame, ts, st, cnt, I, O, V, D, dl, scr, hs, he, ak, av, alist, frs, frl,
            farena, dgram, seg):
    """Decode one packet a[p0:p0+n0] down to SIP; every outcome is counted in cnt.

    Returns DONE_PACKET, or TCP_SEGMENT with the segment in ``seg`` (for :func:`_segment`)."""
    e = p0 + n0
    off = p0
    w = 1
    # ---- link layer
    if link == 1:
        kind = K_ETH
    elif link == 113:
        if n0 < 16:
            cnt[R_SHORT] += 1
            return DONE_PACKET
        et = _be16(a, p0 + 14)
        off = p0 + 16
        kind = K_IP4 if et == 0x0800 else K_IP6 if et == 0x86DD else K_NONE
        if et == 0x8100 or et == 0x88A8:
            kind = K_ETH  # a VLAN tag after the cooked header: parsed as Ethernet from the
            off = p0 + 2  # protocol field on (off + 12 = the protocol field)
    elif link == 276:
        if n0 < 20:
            cnt[R_SHORT] += 1
            return DONE_PACKET
        et = _be16(a, p0)
        off = p0 + 20
        kind = K_IP4 if et == 0x0800 else K_IP6 if et == 0x86DD else K_NONE
    elif link == 0 or link == 108:
        if n0 < 4:
            cnt[R_SHORT] += 1
            return DONE_PACKET
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
        return DONE_PACKET
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
                return DONE_PACKET
            et = _be16(a, off + 12)
            off += 14
            while True:
                if et == 0x8100 or et == 0x88A8 or et == 0x9100:
                    if off + 4 > e:
                        cnt[R_SHORT] += w
                        return DONE_PACKET
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
                        return DONE_PACKET
                    pp = _be16(a, off + 6)
                    off += 8
                    et = 0x0800 if pp == 0x21 else 0x86DD if pp == 0x57 else 0
                    break
                elif et == 0x8847 or et == 0x8848:  # MPLS label stack
                    while True:
                        if off + 4 > e:
                            cnt[R_SHORT] += w
                            return DONE_PACKET
                        bos = a[off + 2] & 1
                        off += 4
                        if bos:
                            break
                    if off >= e:
                        cnt[R_SHORT] += w
                        return DONE_PACKET
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
                return DONE_PACKET
            continue
        if kind == K_NONE:
            cnt[R_NOT_IP] += w
            return DONE_PACKET
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
                return DONE_PACKET
            if a[off] >> 4 != 4:
                cnt[R_SHORT] += w
                return DONE_PACKET
            ihl = (a[off] & 15) * 4
            total = _be16(a, off + 2)
            if ihl < 20 or off + ihl > e:
                cnt[R_SHORT] += w
                return DONE_PACKET
            if total == 0:
                end = e
            else:
                if total < ihl:
                    cnt[R_SHORT] += w
                    return DONE_PACKET
                end = off + total
                if end > e:
                    cnt[R_SNAPPED] += w
                    return DONE_PACKET
            proto = a[off + 9]
            st[X_IPID] = _be16(a, off + 4)
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
                return DONE_PACKET
            if a[off] >> 4 != 6:
                cnt[R_SHORT] += w
                return DONE_PACKET
            plen = _be16(a, off + 4)
            st[X_IPID] = -1
            end = e if plen == 0 else off + 40 + plen
            if end > e:
                cnt[R_SNAPPED] += w
                return DONE_PACKET
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
                        return DONE_PACKET
                    nn = a[q]
                    q += (np.int64(a[q + 1]) + 1) * 8
                    nxt = nn
                elif nxt == 51:
                    if q + 2 > end:
                        cnt[R_SHORT] += w
                        return DONE_PACKET
                    nn = a[q]
                    q += (np.int64(a[q + 1]) + 2) * 4
                    nxt = nn
                elif nxt == 44:
                    if q + 8 > end:
                        cnt[R_SHORT] += w
                        return DONE_PACKET
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
                return DONE_PACKET
            proto = nxt
            ps = q
            pe = end
        if is_frag:
            if reassembled:
                cnt[R_NESTED_FRAG] += w
                return DONE_PACKET
            dl_, frames = _frag(frs, frl, farena, st, cnt, src_hi, src_lo, dst_hi, dst_lo,
                                proto | (fam << 8), fid, foff, fmore, a, ps, pe, w, dgram)
            if dl_ < 0:
                return DONE_PACKET  # waiting for more (counted when complete or at the end)
            a = dgram
            ps = 0
            pe = dl_
            e = dl_
            w = frames
            reassembled = True
        # ---- transport
        if proto == 51 and kind == K_IP4:  # IPv4 AH: authenticated, not encrypted: skip it
            if ps + 8 > pe:
                cnt[R_SHORT] += w
                return DONE_PACKET
            nn = a[ps]
            ps += (np.int64(a[ps + 1]) + 2) * 4
            proto = nn
            if ps > pe:
                cnt[R_SHORT] += w
                return DONE_PACKET
        if proto == 4 or proto == 41:  # IP in IP
            off = ps
            e = pe
            kind = K_IP4 if proto == 4 else K_IP6
            continue
        if proto == 47:  # GRE
            if ps + 4 > pe:
                cnt[R_SHORT] += w
                return DONE_PACKET
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
                return DONE_PACKET
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
                return DONE_PACKET
            continue
        if proto == 17:
            if ps + 8 > pe:
                cnt[R_SHORT] += w
                return DONE_PACKET
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
            if (dport == 6081 or sport == 6081) and ue - ps >= 16 and (a[ps + 8] >> 6) == 0:
                # Geneve (RFC 8926): 8 bytes, the options, then the inner frame by protocol type
                gq = ps + 16 + np.int64(a[ps + 8] & 0x3F) * 4
                gp = _be16(a, ps + 10)
                if gq <= ue and (gp == 0x6558 or gp == 0x0800 or gp == 0x86DD):
                    st[X_GENEVE] += 1
                    off = gq
                    e = ue
                    kind = K_ETH if gp == 0x6558 else K_IP4 if gp == 0x0800 else K_IP6
                    continue
            p = ps + 8
            if is_hep3(a, p, ue):  # HEPv3 from a capture agent, any port
                cnt[_hep(a, p, ue, frame, ts, st, I, O, V, D, dl, scr, hs, he, ak, av, alist)] += w
                return DONE_PACKET
            sid = _addr_id(ak, av, alist, st, src_hi, src_lo, fam)
            did = _addr_id(ak, av, alist, st, dst_hi, dst_lo, fam)
            st[X_DEDUP] = DEDUP_CHECK
            code, _h, _c = _emit_udp(a, p, ue, False, sid, did, sport, dport, 0, frame, ts,
                                 ue - ps - 8, st, I, O, V, D, dl, scr, hs, he)
            st[X_DEDUP] = DEDUP_REMEMBER
            if code == 1 and _c >= 0 and p + _h + _c < ue:
                _more_in_datagram(a, p + _h + _c, ue, sid, did, sport, dport, frame, ts, _h + _c,
                                  st, I, O, V, D, dl, scr, hs, he)
            if code == 1:
                cnt[C_PARSED] += w
            elif code == 0:
                r = _udp_other(a, p, ue, sport, dport)
                if r == C_PARSED:  # HEPv1/v2
                    r = _hep(a, p, ue, frame, ts, st, I, O, V, D, dl, scr, hs, he, ak, av, alist)
                elif r != R_UDP_NOT_SIP:
                    st[XB + r] += ue - p
                cnt[r] += w
            else:
                cnt[code] += w
            return DONE_PACKET
        if proto == 6:
            if ps + 20 > pe:
                cnt[R_SHORT] += w
                return DONE_PACKET
            sport = _be16(a, ps)
            dport = _be16(a, ps + 2)
            seq = _be32(a, ps + 4)
            thl = (a[ps + 12] >> 4) * 4
            flags = np.int64(a[ps + 13])
            if thl < 20 or ps + thl > pe:
                cnt[R_SHORT] += w
                return DONE_PACKET
            seg[SEG_PS] = ps + thl
            seg[SEG_PE] = pe
            seg[SEG_SEQ] = seq
            seg[SEG_FLAGS] = flags
            seg[SEG_W] = w
            seg[SEG_SPORT] = sport
            seg[SEG_DPORT] = dport
            seg[SEG_SRC_HI] = src_hi
            seg[SEG_SRC_LO] = src_lo
            seg[SEG_DST_HI] = dst_hi
            seg[SEG_DST_LO] = dst_lo
            seg[SEG_FAM] = fam
            seg[SEG_DGRAM] = 1 if reassembled else 0
            seg[SEG_WIN] = _be16(a, ps + 14)
            return TCP_SEGMENT
        if proto == 132:  # SCTP
            cnt[R_SCTP] += w
            st[XB + R_SCTP] += pe - ps
            return DONE_PACKET
        if proto == 50:  # ESP
            cnt[R_ESP] += w
            st[XB + R_ESP] += pe - ps
            return DONE_PACKET
        cnt[R_NOT_L4] += w
        return DONE_PACKET
    cnt[R_SHORT] += w
    return DONE_PACKET


@njit(cache=True)
def _tcp_signal(st, sid, sport, reset, ts, w):
    """Count a reset, or a zero-window advertisement (window 0, no SYN/FIN/RST), against its
    sender (address id ``sid``, port ``sport``) in the table at ``st[XZ]``: the receiver whose
    buffer is full tells the other side to stop -- TCP's own sign of a peer that cannot keep up."""
    n = st[XZ]
    k = -1
    for i in range(n):
        b = XZ + 1 + i * NZWC
        if st[b + ZW_ID] == sid and st[b + ZW_PORT] == sport:
            k = i
            break
    if k < 0:
        if n >= NZW:
            st[XZ_OVER] += w
            return
        k = n
        st[XZ] = n + 1
        b = XZ + 1 + k * NZWC
        st[b + ZW_ID] = sid
        st[b + ZW_PORT] = sport
    b = XZ + 1 + k * NZWC
    if reset:
        st[b + ZW_RST] += w
        return
    if st[b + ZW_N] == 0:
        st[b + ZW_T0] = ts
    st[b + ZW_N] += w
    st[b + ZW_T1] = ts


@njit(cache=True)
def _segment(a, seg, frame, ts, st, cnt, I, O, V, D, dl, scr, hs, he, ak, av, alist, tk, tv, fs,
             arena, op, ob):
    """The TCP segment :func:`_packet` left in ``seg`` (its payload in ``a``): its connection, its
    addresses, then the byte stream (:func:`.tcp._tcp`)."""
    fam = seg[SEG_FAM]
    src_hi = seg[SEG_SRC_HI]
    src_lo = seg[SEG_SRC_LO]
    dst_hi = seg[SEG_DST_HI]
    dst_lo = seg[SEG_DST_LO]
    sport = seg[SEG_SPORT]
    dport = seg[SEG_DPORT]
    f = _flow_id(tk, tv, fs, st, src_hi ^ (fam << 60), src_lo, dst_hi, dst_lo, (sport << 16) | dport)
    sid = _addr_id(ak, av, alist, st, src_hi, src_lo, fam)
    did = _addr_id(ak, av, alist, st, dst_hi, dst_lo, fam)
    flags = seg[SEG_FLAGS]
    if (flags & 4) != 0 or (seg[SEG_WIN] == 0 and (flags & 7) == 0):
        _tcp_signal(st, sid, sport, (flags & 4) != 0, ts, seg[SEG_W])
    _tcp(fs, f, arena, a, seg[SEG_PS], seg[SEG_PE], seg[SEG_SEQ], seg[SEG_FLAGS], seg[SEG_W], sid,
         did, sport, dport, frame, ts, st, cnt, I, O, V, D, dl, scr, hs, he, ak, av, alist, op, ob)


@njit(cache=True)
def _more_in_datagram(a, q, e, sid, did, sport, dport, frame, ts, first_len, st, I, O, V, D, dl,
                      scr, hs, he):
    """More SIP messages after the first one's body in a UDP datagram (RFC 3261 §18.3 says the
    extra bytes are discarded, but senders that pack several messages into one datagram exist):
    when the bytes after it begin with a SIP start line, each one is a row of its own (framed
    by Content-Length, as on a stream) and the first message's size is its own length."""
    while q < e and (a[q] == 13 or a[q] == 10):
        q += 1
    if q >= e or _line_start_sip(a, q, e) != 1:
        return
    I[I_SIZE, st[ST_NR] - 1] = first_len
    good, bad = _emit_span(a, q, e, sid, did, sport, dport, 0, frame, ts, st, I, O, V, D, dl,
                           scr, hs, he)
    st[X_UDP_MULTI] += 1
    st[X_UDP_EXTRA] += good
    if bad != 0:
        st[X_UDP_EXTRA_BAD] += 1


@njit(cache=True)
def _udp_other(a, p, e, sport, dport):
    """What a UDP payload that is not SIP in clear is: C_PARSED for a HEPv1/v2 packet (to be
    decoded), else the reason it is skipped."""
    if e - p < 1:
        return R_UDP_NOT_SIP
    c0 = a[p]
    if (c0 == 1 or c0 == 2) and hep2_len(a, p, e) > 0:
        return C_PARSED
    if c0 >= 0xF8:
        return R_SIGCOMP
    if (c0 >= 0x14 and c0 <= 0x17) and e - p >= 13 and a[p + 1] == 0xFE and a[p + 2] >= 0xFC:
        return R_DTLS
    if (sport == 4500 or dport == 4500) and e - p >= 8 and not (a[p] == 0 and a[p + 1] == 0
                                                                and a[p + 2] == 0 and a[p + 3] == 0):
        return R_ESP
    return R_UDP_NOT_SIP
