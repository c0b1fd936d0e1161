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
