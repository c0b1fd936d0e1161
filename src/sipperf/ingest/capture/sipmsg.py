"""SIP message parsing: the reference rules for the packet table (RFC 3261 §7, §20, §25).

This is the readable definition of what every column of the packet table means; the compiled
reader (:mod:`.scan`) implements the same rules byte by byte and a test checks that both
agree on real and mutated messages, and the pyshark path applies these rules to the header
lines Wireshark delimits.

Message structure
    The start line is a status line (``SIP/2.0 NNN ...``) or a request line
    (``METHOD SP Request-URI SP SIP/2.0``, method alphabetic); anything else is not SIP.
    Lines end with LF (an optional CR before it); the header block ends at the first empty
    line.  A line that starts with SP or HT continues the previous header: the line break and
    the whitespace around it become one SP (§7.3.1, LWS in §25.1).  A header line is
    ``name *WSP ":" value``; names are case-insensitive; values are stripped of SP/HT.
    The first occurrence of each header wins; compact forms (§7.3.3, §20) count as their
    long names: ``i`` Call-ID, ``v`` Via, ``f`` From, ``t`` To, ``m`` Contact,
    ``l`` Content-Length.

Fields
    ``call_id``      Call-ID value (UTF-8; invalid bytes become U+FFFD, as everywhere).
    ``cseq``, ``cseq_method``  the two tokens of CSeq.
    ``method``/``status``  from the start line.

    A message is malformed (a counted skip, never a row), checked in this order, when its
    status is outside 100-699 (§7.2), when it has no Call-ID or an empty one (mandatory,
    §8.1.1.4), or when its CSeq is missing or its number is not 1*DIGIT ≤ 2^32-1 (§8.1.1.5).
    ``via_branch``   ``branch`` parameter of the top Via value (first value of the first Via).
    ``via_count``    number of Via values in all Via headers (comma-separated ones counted).
    ``from_uri``, ``from_tag``, ``to_uri``, ``to_tag``  the URI (inside ``<>`` of a name-addr,
                     else the addr-spec up to the first ``;``) and the ``tag`` parameter
                     (parameter names case-insensitive, §7.3.1).
    ``contact_uri``  URI of the first Contact value; ``Contact: *`` has none.
    ``corr_id``      raw value of the first present of :data:`CORRELATION_HEADERS`.
    ``ua``           User-Agent, else Server.
    ``max_forwards`` Max-Forwards if 1*DIGIT ≤ 2^32-1, else null.
    ``retry_after``  the delta-seconds of Retry-After (§20.33: ``120 (comment);duration=..``)
                     if ≤ 2^32-1, else null.
    ``content_length``  Content-Length if 1*DIGIT ≤ 2^31-1, else None (frames TCP messages).
"""
from __future__ import annotations

from typing import Iterable, NamedTuple

#: B2BUA/SBC correlation headers, highest priority first: Session-ID (RFC 7989) is the
#: standard end-to-end session identifier; X-Call-ID / X-Orig-Call-ID are what many SBCs and
#: Kamailio/OpenSIPS scripts copy the other leg's Call-ID into; X-CID is Homer/HEP's
#: correlation header; Ms-Correlation-Id is Microsoft's ([MS-SIPRE] 2.2.12); Cisco-Guid is the
#: call GUID Cisco IOS gateways and CUBE carry on both legs.
CORRELATION_HEADERS: tuple[str, ...] = (
    "session-id", "x-call-id", "x-orig-call-id", "x-cid", "ms-correlation-id", "cisco-guid",
)
COMPACT: dict[str, str] = {"i": "call-id", "v": "via", "f": "from", "t": "to", "m": "contact",
                           "l": "content-length"}
U32_MAX = 2**32 - 1
I31_MAX = 2**31 - 1
_WSP = b" \t"

#: the reasons a SIP message is malformed (a counted skip); same texts in the compiled reader
MALFORMED_STATUS = "malformed SIP: status code outside 100-699"
MALFORMED_CALLID = "malformed SIP: no Call-ID"
MALFORMED_CSEQ = "malformed SIP: CSeq missing or its number not a 32-bit unsigned integer"


class SipFields(NamedTuple):
    """The per-message fields of the packet table (``None`` where absent)."""

    method: str | None
    status: int | None
    call_id: str | None
    cseq: int | None
    cseq_method: str | None
    via_branch: str | None
    content_length: int | None
    header_len: int  # bytes up to and including the blank line (whole message if none)
    from_uri: str | None = None
    from_tag: str | None = None
    to_uri: str | None = None
    to_tag: str | None = None
    contact_uri: str | None = None
    corr_id: str | None = None
    ua: str | None = None
    via_count: int = 0
    max_forwards: int | None = None
    retry_after: int | None = None
    error: str | None = None  # a malformed message: the reason (MALFORMED_*); fields partial


# --- message structure ------------------------------------------------------------------------

def header_end(buf: bytes | bytearray, start: int = 0) -> int:
    """Index just past the empty line that ends the header block, or -1 if there is none yet.

    Lines end with LF, optionally preceded by CR; the start line is never the empty line."""
    i = buf.find(b"\n", start)
    while i >= 0:
        j = i + 1
        if buf[j:j + 1] == b"\r":
            j += 1
        if buf[j:j + 1] == b"\n":
            return j + 1
        if j >= len(buf):
            return -1
        i = buf.find(b"\n", j)
    return -1


def start_line(msg: bytes) -> tuple[str | None, int | None] | None:
    """``(method, None)`` for a request line, ``(None, status)`` for a status line, else None."""
    if msg[:8] == b"SIP/2.0 ":
        if msg[8:11].isdigit() and len(msg[8:11]) == 3 and msg[11:12] in (b" ", b"\r", b"\n", b""):
            return None, int(msg[8:11])
        return None
    eol = msg.find(b"\n", 0, 4096)
    if eol < 0:
        return None
    line = msg[:eol - 1] if msg[eol - 1:eol] == b"\r" else msg[:eol]
    if not line.endswith(b" SIP/2.0") or line.count(b" ") != 2:
        return None
    method = line[:line.find(b" ")]
    if not method.isalpha():
        return None
    return method.decode("ascii"), None


def start_line_ok(msg: bytes) -> bool:
    """Cheap check that ``msg`` starts with a SIP status line or request line."""
    return start_line(msg) is not None


def looks_like_sip(payload: bytes) -> bool:
    """True when ``payload`` starts with a SIP request line or a SIP/2.0 status line."""
    head = payload[:4096]
    return start_line(head if b"\n" in head else head + b"\n") is not None


def unfold(value: bytes) -> bytes:
    """Replace every linear white space containing a line break by one SP (RFC 3261 §7.3.1)."""
    if b"\n" not in value:
        return value
    out = bytearray()
    i, n = 0, len(value)
    while i < n:
        c = value[i]
        if c in (13, 10):
            # drop the whitespace before the break, the break, and the whitespace after it
            while out and out[-1] in (32, 9):
                out.pop()
            if c == 13 and i + 1 < n and value[i + 1] == 10:
                i += 1
            i += 1
            while i < n and value[i] in (32, 9):
                i += 1
            out.append(32)
            continue
        out.append(c)
        i += 1
    return bytes(out)


def header_lines(head: bytes) -> Iterable[tuple[bytes, bytes]]:
    """``(lower-case name, raw value)`` of every header line of a header block (after the start
    line, before the empty line); continuation lines stay inside the raw value."""
    lines = head.split(b"\n")
    cur_name = None
    cur_val = b""
    for line in lines[1:]:
        if line[:1] in (b" ", b"\t") and cur_name is not None:
            cur_val += b"\n" + line
            continue
        if cur_name is not None:
            yield cur_name, cur_val
            cur_name = None
        s = line[:-1] if line.endswith(b"\r") else line
        if not s:
            break  # the empty line
        hl = split_header_line(s)
        if hl is not None:
            cur_name, cur_val = hl
    if cur_name is not None:
        yield cur_name, cur_val


def split_header_line(line: bytes) -> tuple[bytes, bytes] | None:
    """``(lower-case name, raw value)`` of one header line (continuation lines included), or
    None when it is not ``name *WSP ":" value``."""
    c = line.find(b":")
    if c <= 0:
        return None
    name = line[:c].rstrip(_WSP)
    if not name or b" " in name or b"\t" in name or b"\n" in name:
        return None
    return name.lower(), line[c + 1:]


def header_value(raw: bytes) -> bytes:
    """The value of a header: unfolded, stripped of SP/HT (and of a trailing CR)."""
    v = unfold(raw.rstrip(b"\r\n"))
    return v.strip(b" \t\r")


def _text(v: bytes | None) -> str | None:
    return None if v is None else v.decode("utf-8", "replace")


# --- values -----------------------------------------------------------------------------------

def _split_top(value: bytes, sep: int) -> list[bytes]:
    """Split at ``sep`` outside double quotes and angle brackets."""
    out, cur = [], bytearray()
    quoted = angle = False
    esc = False
    for c in value:
        if quoted:
            if esc:
                esc = False
            elif c == 92:  # backslash
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
            out.append(bytes(cur))
            cur = bytearray()
            continue
        cur.append(c)
    out.append(bytes(cur))
    return out


def _param(params: bytes, name: bytes) -> bytes | None:
    """Value of ``;name=value`` in a parameter list (names case-insensitive), or None."""
    for p in _split_top(params, 59)[1:]:  # ';'
        k, eq, v = p.partition(b"=")
        if k.strip(_WSP).lower() == name:
            v = v.strip(_WSP)
            return v if eq and v else None
    return None


def name_addr(value: bytes) -> tuple[bytes | None, bytes]:
    """(URI, header parameters) of a From/To/Contact value (RFC 3261 §20.10, §25.1)."""
    quoted = esc = False
    for i, c in enumerate(value):
        if quoted:
            if esc:
                esc = False
            elif c == 92:
                esc = True
            elif c == 34:
                quoted = False
        elif c == 34:
            quoted = True
        elif c == 60:  # '<': name-addr
            j = value.find(b">", i + 1)
            if j < 0:
                return value[i + 1:].strip(_WSP) or None, b""
            return value[i + 1:j].strip(_WSP) or None, value[j + 1:]
    k = value.find(b";")
    if k < 0:
        return value.strip(_WSP) or None, b""
    return value[:k].strip(_WSP) or None, value[k:]


def via_values(value: bytes) -> list[bytes]:
    """The comma-separated Via values of one Via header (empty ones dropped)."""
    return [v for v in _split_top(value, 44) if v.strip(_WSP)]


def via_branch(value: bytes) -> bytes | None:
    """``branch`` of the first Via value: the token after ``;branch=`` up to ``;``, ``,`` or WSP."""
    vals = via_values(value)
    if not vals:
        return None
    b = _param(vals[0], b"branch")
    if b is None:
        return None
    for stop in (b",", b" ", b"\t", b";"):
        b = b.split(stop, 1)[0]
    return b or None


def u32(v: bytes, limit: int = U32_MAX) -> int | None:
    """Integer of 1*DIGIT not above ``limit``, else None."""
    if not v or not v.isdigit() or not v.isascii():
        return None
    n = int(v)
    return n if n <= limit else None


def leading_u32(v: bytes) -> int | None:
    """delta-seconds at the start of a Retry-After value (then WSP, ``(`` or ``;``), or None."""
    i = 0
    while i < len(v) and 48 <= v[i] <= 57:
        i += 1
    if i == 0 or (i < len(v) and v[i] not in b" \t(;"):
        return None
    return u32(v[:i])


# --- one message ------------------------------------------------------------------------------

def fields_from_headers(method: str | None, status: int | None,
                        headers: Iterable[tuple[bytes, bytes]], header_len: int) -> SipFields:
    """Apply the rules above to ``(lower-case name, raw value)`` header pairs in message order."""
    first: dict[str, bytes] = {}
    via_count = 0
    top_via = None
    for name, raw in headers:
        key = COMPACT.get(name.decode("latin-1"), name.decode("latin-1"))
        if key == "via":
            v = header_value(raw)
            via_count += len(via_values(v))
            if top_via is None:
                top_via = v
            continue
        if key not in first:
            first[key] = raw
    val = {k: header_value(r) for k, r in first.items()}
    error = None
    if status is not None and not 100 <= status <= 699:
        error = MALFORMED_STATUS
    if not val.get("call-id"):
        error = error or MALFORMED_CALLID
    cseq = cseq_method = None
    parts = val["cseq"].split() if "cseq" in val else []
    cseq = u32(parts[0]) if parts else None
    if cseq is None:
        error = error or MALFORMED_CSEQ
    if len(parts) > 1:
        cseq_method = _text(parts[1])
    from_uri = from_tag = to_uri = to_tag = contact_uri = None
    if "from" in val:
        u, p = name_addr(val["from"])
        from_uri, from_tag = _text(u), _text(_param(p, b"tag"))
    if "to" in val:
        u, p = name_addr(val["to"])
        to_uri, to_tag = _text(u), _text(_param(p, b"tag"))
    if "contact" in val and val["contact"] != b"*":
        contact_uri = _text(name_addr(_split_top(val["contact"], 44)[0])[0])
    corr = next((val[h] for h in CORRELATION_HEADERS if val.get(h)), None)
    ua = val.get("user-agent") or val.get("server") or None
    return SipFields(
        method=method, status=status, call_id=_text(val.get("call-id")),
        cseq=cseq, cseq_method=cseq_method,
        via_branch=_text(via_branch(top_via)) if top_via is not None else None,
        content_length=u32(val["content-length"], I31_MAX) if "content-length" in val else None,
        header_len=header_len, from_uri=from_uri, from_tag=from_tag, to_uri=to_uri, to_tag=to_tag,
        contact_uri=contact_uri, corr_id=_text(corr), ua=_text(ua), via_count=via_count,
        max_forwards=u32(val["max-forwards"]) if "max-forwards" in val else None,
        retry_after=leading_u32(val["retry-after"]) if "retry-after" in val else None,
        error=error)


def parse_message(msg: bytes, framing: bool = True) -> SipFields | None:
    """Parse one SIP message (start line, headers, optional body); ``None`` if not SIP.

    A malformed message (see the module docstring) comes back with ``error`` set.
    ``framing=False`` leaves ``content_length`` as parsed but ``header_len`` is the whole
    message (a UDP datagram is framed by its length)."""
    sl = start_line(msg if b"\n" in msg[:4096] else msg + b"\n")
    if sl is None:
        return None
    hend = header_end(msg)
    head = msg if hend < 0 else msg[:hend]
    f = fields_from_headers(sl[0], sl[1], header_lines(head), hend if hend >= 0 else len(msg))
    if not framing:
        f = f._replace(content_length=None, header_len=len(msg))
    return f


def content_length(head: bytes) -> int | None:
    """Content-Length (or ``l:``) of a header block, ``None`` when absent or malformed."""
    for name, raw in header_lines(head):
        if name in (b"l", b"content-length"):
            return u32(header_value(raw), I31_MAX)
    return None
