"""What the compiled scanner reads and writes, as numbers: the output columns, the counters and
their reasons, the slots of the scalar state, the limits and the SIP header-name table.

Every array the caller (:mod:`sipperf.ingest.capture.fast`) hands to :func:`.records.scan` is
indexed by these constants; they are frozen into the compiled code (a change here is a change
of the whole scanner, see the package docstring on the cache).
"""
from __future__ import annotations

import numpy as np


# ---------------------------------------------------------------------------- output layout
I_FRAME, I_TS, I_SPORT, I_DPORT, I_SIZE, I_CSEQ, I_STATUS, I_VIACNT, I_MAXFWD, I_RETRY = range(10)
I_SRC, I_DST, I_TRANSPORT, I_NONASCII = 10, 11, 12, 13
I_IFACE = 14  # the capture interface of the packet that completed the message (as tshark numbers
             # them: the IDBs of every section in turn; 0 in a pcap)
NI = 15
S_CALLID, S_CSEQM, S_METHOD, S_BRANCH, S_FROMURI, S_FROMTAG, S_TOURI, S_TOTAG = range(8)
S_CONTACT, S_CORR, S_UA = 8, 9, 10
NS = 11
NULL = -1  # in the nullable int columns

# ------------------------------------------------------------------------------- counters
(C_PARSED, R_NOT_IP, R_LINK, R_SHORT, R_SNAPPED, R_NOT_L4, R_UDP_NOT_SIP, R_TCP_EMPTY,
 R_TCP_RETRANS, R_TCP_GAP, R_TCP_NOT_SIP, R_TCP_KEEPALIVE, R_MAL_CSEQ, R_MAL_STATUS,
 R_INCOMPLETE, R_TCP_TOO_BIG, R_FRAG_LIMIT, R_UNDEF_IF, R_NO_TS, R_NESTED_FRAG,
 R_MAL_CALLID) = range(21)
# what a capture may carry besides SIP in clear, each named (issue 23)
(R_TCP_WINDOW, R_WS_HANDSHAKE, R_WS_CONTROL, R_WS_NOT_SIP, R_HTTP, R_HEP_NOT_SIP,
 R_HEP_COMPRESSED, R_HEP_BAD, R_TLS, R_WSS, R_DTLS, R_SCTP, R_ESP, R_SIGCOMP) = range(21, 35)
# captures that lie (issue 36): a packet seen twice
R_DUPLICATE = 35
NCNT = 36
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
    R_TCP_WINDOW: "TCP gap declared: out-of-order data beyond the reassembly window "
                  "(64 KiB or 64 segments waiting on one connection)",
    R_WS_HANDSHAKE: "WebSocket handshake (HTTP Upgrade)",
    R_WS_CONTROL: "WebSocket control frame (ping/pong/close)",
    R_WS_NOT_SIP: "WebSocket data not SIP",
    R_HTTP: "HTTP, not a WebSocket upgrade",
    R_HEP_NOT_SIP: "HEP packet carrying no SIP (another payload type)",
    R_HEP_COMPRESSED: "HEP compressed payload (chunk 0x0010): not read",
    R_HEP_BAD: "HEP packet malformed",
    R_TLS: "TLS: encrypted SIP cannot be read — give its TLS key log (SSLKEYLOGFILE) as an input beside "
           "the capture, or capture before TLS",
    R_WSS: "WebSocket over TLS (wss://): encrypted SIP cannot be read — give its TLS key log "
           "(SSLKEYLOGFILE) as an input beside the capture, or capture before TLS",
    R_DTLS: "DTLS: encrypted, cannot be read",
    R_SCTP: "SCTP: SIP over SCTP is not read",
    R_ESP: "ESP (IPsec): encrypted, cannot be read",
    R_SIGCOMP: "compressed SigComp (RFC 3320): not read",
    R_DUPLICATE: "duplicate copy of a packet already read (same bytes and addresses within the "
                 "duplicate window: a SPAN/mirror port, two taps, or a HEP copy beside the packet)",
}
#: the classes refused by name (their packets and bytes are in the account, xs[XB + code])
REFUSED = (R_TLS, R_WSS, R_DTLS, R_SCTP, R_ESP, R_SIGCOMP, R_HEP_COMPRESSED)

# ------------------------------------------------------------------------- scalar state (st)
(ST_FMT, ST_BIG, ST_LINK, ST_TSMUL, ST_RECHDR, ST_FRAME, ST_NIF, ST_ERR, ST_ERR_POS,
 ST_ERR_FRAME, ST_BADLINK, ST_UNDEF_POS, ST_NADDR, ST_NFLOW, ST_ARENA, ST_NFRAG, ST_FARENA,
 ST_MIDSTREAM, ST_DISCARD_BYTES, ST_TS_ZERO, ST_TS_NONZERO, ST_SECTIONS, ST_MAXPEND,
 ST_OOO_ACTIVE, ST_OOO_T0MIN, ST_NR) = range(26)  # NST: below, with the slots after XS0
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

# interface table columns (ifs): link type, ts numerator, ts denominator, offset ns; then what the
# stamps show: packets, first stamp, the greatest common divisor of (stamp - first stamp), the
# last stamp, steps back from one packet to the next (count, largest), stamps of zero or less
IF_LINK, IF_NUM, IF_DEN, IF_OFF = 0, 1, 2, 3
IF_NPKT, IF_T0, IF_GCD, IF_LAST, IF_NBACK, IF_MAXBACK, IF_NZERO = 4, 5, 6, 7, 8, 9, 10
NIFC = 11
MAX_IF = 4096

# TCP flow state columns (fs): stream region in the arena, pending packets, the framing mode,
# the out-of-order slot (+1; 0 = none), the WebSocket message being assembled
# and, for emitting rows outside the flow's own packets (a gap declared later), its address
# ids and ports
F_NEXT, F_OFF, F_CAP, F_HEAD, F_LEN, F_PEND, F_SEEN = range(7)
(F_MODE, F_SLOT, F_WS_ASM, F_WS_POS, F_WS_OP, F_SID, F_DID, F_SPORT, F_DPORT) = range(7, 16)
# the flow's last data segment (sequence number, length, time, IPv4 id): a copy of it seen again
# within the duplicate window is a duplicate, not a retransmission
F_LSEQ, F_LLEN, F_LTS, F_LIPID = range(16, 20)
NF = 20
# framing modes of a TCP flow (decided from the first bytes of its stream)
(M_UNKNOWN, M_SIP, M_HTTP, M_WS, M_HEP, M_TLS, M_WSS, M_SIGCOMP) = range(8)
# transports in the packet table (I_TRANSPORT)
TR_UDP, TR_TCP, TR_WS = 0, 1, 2
TRANSPORTS = ("udp", "tcp", "ws")

# out-of-order TCP data: a pool of slots, one per connection waiting for missing bytes
OOO_WINDOW = 65536          # bytes beyond the next expected one a connection may hold
OOO_PIECES = 64             # stored segments (pieces) per connection
OOO_MAX_SLOTS = 1024        # connections waiting at once (the pool grows up to this)
OOO_HOLD_NS = 10_000_000_000  # a hole not filled within this capture time is a gap
# slot meta row op[s, 0, :]: flow, pieces, fill, oldest ts, used; pieces op[s, 1 + k, :]
OS_FLOW, OS_N, OS_FILL, OS_T0, OS_USED = 0, 1, 2, 3, 4

# a TCP segment the packet walk hands back to the record walk (seg, :func:`.packet._packet`)
(SEG_PS, SEG_PE, SEG_SEQ, SEG_FLAGS, SEG_W, SEG_SPORT, SEG_DPORT, SEG_SRC_HI, SEG_SRC_LO,
 SEG_DST_HI, SEG_DST_LO, SEG_FAM, SEG_DGRAM, SEG_WIN) = range(14)
NSEG = 14
P_SEQ, P_LEN, P_OFF, P_W, P_FRAME, P_TS = range(6)

# more state at the end of st (not an array of its own: every array argument of the per-packet
# calls costs time): bytes per refused class, ports seen, HEP agents, reassembly figures
XS0 = 32
XB = XS0                     # st[XB + code]: payload bytes of the packets counted under code
XP_TLS, XP_WSS, XP_WS = XS0 + 64, XS0 + 80, XS0 + 96   # [n, port1..port8] each
NPORTS = 8
(X_OOO_STORED, X_OOO_FILLED, X_GAP_WINDOW, X_GAP_HOLD, X_GAP_END, X_OOO_DUP, X_WS_MSGS,
 X_WS_FRAGMENTED, X_WS_CTRL, X_WS_MULTI, X_HEP_MSGS, X_HEP_V1, X_HEP_V2, X_HEP_V3,
 X_HEP_NOTIME, X_OOO_MAXPIECES) = range(XS0 + 112, XS0 + 128)
XA = XS0 + 128               # HEP agents: st[XA] = n, then NAGENT rows of AG_* columns
NAGENT = 32
AG_ID, AG_N, AG_DSUM, AG_DMIN, AG_DMAX = range(5)
NAG = 5
# duplicates (issue 36): the window, the current packet's IPv4 identification and interface, the
# mode of the next _emit (check and remember, or remember only), what was found; then the table of
# recent datagrams, DUP_SLOTS rows of (content hash, time, IPv4 id), open addressing
XD0 = XA + 1 + NAGENT * NAG + 8
(X_DUP_WINDOW, X_IPID, X_IFACE, X_DEDUP, X_DUP_N, X_DUP_DTMAX, X_DUP_DTSUM, X_DUP_HEP,
 X_UDP_MULTI, X_UDP_EXTRA, X_UDP_EXTRA_BAD, X_GENEVE, X_IFBASE, X_DUP_TCP) = range(XD0, XD0 + 14)
DEDUP_CHECK, DEDUP_REMEMBER = 1, 2
DUP_SLOTS = 1 << 16
DUP_PROBES = 8
XDT = XD0 + 16
# TCP's own overload signals (issue 39): per sender (address id, port), the zero-window
# advertisements (window 0 on a segment without SYN, FIN or RST, as tshark's
# tcp.analysis.zero_window) and the resets it sent, with the first and last zero window's time;
# st[XZ] = rows used, then NZW rows of ZW_* columns, then the segments of senders beyond NZW
XZ = XDT + 3 * DUP_SLOTS
NZW = 64
ZW_ID, ZW_PORT, ZW_N, ZW_RST, ZW_T0, ZW_T1 = range(6)
NZWC = 6
XZ_OVER = XZ + 1 + NZW * NZWC
NST = XZ_OVER + 1
#: the default duplicate window: a tenth of RFC 3261's T1 (500 ms), the shortest interval at which
#: a sender retransmits with the default timers, and far longer than the microseconds between
#: two copies of one packet on a mirror port
DUP_WINDOW_NS = 50_000_000

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
# header-name lookup by (length, first letter): NAME_FIRST[n, c] is the first entry of NAME_TAB
# with that length and first letter, NAME_NEXT the next one (-1: none) -- one or two
# comparisons per header line instead of a walk through the whole table
NAME_FIRST = np.full((25, 128), -1, np.int64)
NAME_NEXT = np.full(len(_NAMES), -1, np.int64)
for _k, (_n, _i) in enumerate(_NAMES):
    _c = ord(_n[0])
    if NAME_FIRST[len(_n), _c] < 0:
        NAME_FIRST[len(_n), _c] = _k
    else:
        _j = NAME_FIRST[len(_n), _c]
        while NAME_NEXT[_j] >= 0:
            _j = NAME_NEXT[_j]
        NAME_NEXT[_j] = _k
