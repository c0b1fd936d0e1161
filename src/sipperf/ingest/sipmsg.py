"""SIP message parsing helpers for the byte-level capture reader (RFC 3261 §7, §20).

Only what the timeline needs: the start line (request method or response status), Call-ID
(long form or compact ``i:``), CSeq number and method, the top Via's ``branch`` (``Via`` or
compact ``v:``), and the message length as framed by Content-Length (compact ``l:``).
Header names are case-insensitive; values are stripped of surrounding whitespace.
"""
from __future__ import annotations

import re
from typing import NamedTuple

# every header we need in one pass (names case-insensitive); used by content_length()
_HDR = re.compile(
    rb"^(call-id|i|cseq|via|v|content-length|l)[ \t]*:[ \t]*([^\r\n]*)",
    re.IGNORECASE | re.MULTILINE,
)
_BRANCH = re.compile(rb";[ \t]*branch[ \t]*=[ \t]*([^;, \t\r\n]+)", re.IGNORECASE)
_REQ_LINE = re.compile(rb"^([A-Za-z]+) [^ \r\n]+ SIP/2\.0\r?$")
_STATUS_LINE = re.compile(rb"^SIP/2\.0 ([1-6][0-9][0-9])(?: |\r?$)")


class SipFields(NamedTuple):
    """The per-message fields of the packet table (``None`` where absent)."""

    method: str | None
    status: int | None
    call_id: str | None
    cseq: int | None
    cseq_method: str | None
    via_branch: str | None
    content_length: int | None
    header_len: int  # bytes up to and including the blank line


def looks_like_sip(payload: bytes) -> bool:
    """True when ``payload`` starts with a SIP request line or a SIP/2.0 status line."""
    eol = payload.find(b"\n", 0, 512)
    line = payload[:eol] if eol >= 0 else payload[:512]
    return bool(_STATUS_LINE.match(line) or _REQ_LINE.match(line))


def header_end(buf: bytes | bytearray, start: int = 0) -> int:
    """Index just past the blank line ending the header block, or -1 if not yet complete."""
    i = buf.find(b"\r\n\r\n", start)
    if i >= 0:
        return i + 4
    i = buf.find(b"\n\n", start)
    return i + 2 if i >= 0 else -1


_CALL_ID = re.compile(rb"\n(?:call-id|i)[ \t]*:[ \t]*([^\r\n]*)", re.IGNORECASE)
_CSEQ_ANY = re.compile(rb"\ncseq[ \t]*:[ \t]*([^\r\n]*)", re.IGNORECASE)
_VIA = re.compile(rb"\n(?:via|v)[ \t]*:[ \t]*([^\r\n]*)", re.IGNORECASE)
_CLEN = re.compile(rb"\n(?:content-length|l)[ \t]*:[ \t]*([^\r\n]*)", re.IGNORECASE)


def _first(low: bytes, long: bytes, short: bytes) -> int:
    """Offset just past the first ``long`` or ``short`` header name (lower-case), or -1."""
    i = low.find(long)
    j = low.find(short, 0, i if i >= 0 else len(low))
    if j >= 0:
        return j + len(short)
    return i + len(long) if i >= 0 else -1


def parse_message(msg: bytes, framing: bool = True) -> SipFields | None:
    """Parse one SIP message (start line, headers, optional body); ``None`` if not SIP.

    ``framing=False`` skips Content-Length (a UDP datagram is framed by its length)."""
    hend = msg.find(b"\r\n\r\n")
    if hend >= 0:
        hend += 4
    else:
        hend = header_end(msg)
    head = msg if hend < 0 else msg[:hend]
    if head[:8] == b"SIP/2.0 ":
        if not (head[8:11].isdigit() and head[11:12] in (b" ", b"\r", b"\n")):
            return None
        method, status = None, int(head[8:11])
    else:
        if not start_line_ok(head):
            return None
        method, status = head[:head.find(b" ")].decode("ascii"), None
    low = head.lower()
    # Call-ID (compact i)
    i = low.find(b"\ncall-id:")
    j = low.find(b"\ni:", 0, i if i >= 0 else len(low))
    p = j + 3 if j >= 0 else i + 9 if i >= 0 else -1
    if p >= 0:
        call_id = head[p:head.find(b"\n", p)].strip().decode("utf-8", "replace")
    else:
        m = _CALL_ID.search(head)
        call_id = m.group(1).strip().decode("utf-8", "replace") if m else None
    # CSeq
    p = low.find(b"\ncseq:")
    if p >= 0:
        v = head[p + 6:head.find(b"\n", p + 6)]
    else:
        m = _CSEQ_ANY.search(head)
        v = m.group(1) if m else None
    cseq = cseq_method = None
    if v is not None:
        parts = v.split()
        if parts and parts[0].isdigit():
            cseq = int(parts[0])
        if len(parts) > 1:
            cseq_method = parts[1].decode("ascii", "replace")
    # top Via (compact v)
    i = low.find(b"\nvia:")
    j = low.find(b"\nv:", 0, i if i >= 0 else len(low))
    p = j + 3 if j >= 0 else i + 5 if i >= 0 else -1
    if p >= 0:
        v = head[p:head.find(b"\n", p)]
    else:
        m = _VIA.search(head)
        v = m.group(1) if m else None
    branch = None
    if v is not None:
        b = _BRANCH.search(v.split(b",", 1)[0])
        if b:
            branch = b.group(1).decode("ascii", "replace")
    # Content-Length (compact l)
    if not framing:
        return SipFields(method, status, call_id, cseq, cseq_method, branch, None, len(msg))
    p = _first(low, b"\ncontent-length:", b"\nl:")
    if p >= 0:
        v = head[p:head.find(b"\n", p)].strip()
    else:
        m = _CLEN.search(head)
        v = m.group(1).strip() if m else None
    clen = int(v) if v is not None and v.isdigit() else None
    return SipFields(method, status, call_id, cseq, cseq_method, branch, clen,
                     hend if hend >= 0 else len(msg))


def start_line_ok(msg: bytes) -> bool:
    """Cheap check that ``msg`` starts with a SIP status line or request line."""
    if msg[:8] == b"SIP/2.0 ":
        return msg[8:11].isdigit() and msg[11:12] in (b" ", b"\r", b"\n")
    eol = msg.find(b"\n", 0, 4096)
    if eol < 0:
        return False
    line = msg[:eol - 1] if msg[eol - 1:eol] == b"\r" else msg[:eol]
    if not line.endswith(b" SIP/2.0") or line.count(b" ") != 2:
        return False
    return line[:line.find(b" ")].isalpha()


def content_length(head: bytes) -> int | None:
    """Content-Length (or ``l:``) of a header block, ``None`` when absent or malformed."""
    for name, value in _HDR.findall(head):
        if name.lower() in (b"l", b"content-length"):
            v = value.strip()
            return int(v) if v.isdigit() else None
    return None

