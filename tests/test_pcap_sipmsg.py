"""SIP header helpers (RFC 3261 §7.3.3 compact forms, §20 case-insensitive names)."""
from sipperf.ingest.sipmsg import looks_like_sip, parse_message

# RFC 4475 §3.1.1.1 "A Short Tortuous INVITE"-style compact-form message (abridged, not copied)
COMPACT = (b"INVITE sip:bob@example.net SIP/2.0\r\n"
           b"v: SIP/2.0/UDP 192.0.2.1:5061;branch=z9hG4bKfirst, SIP/2.0/UDP 192.0.2.9;branch=z9hG4bKsecond\r\n"
           b"VIA: SIP/2.0/UDP 192.0.2.2;branch=z9hG4bKthird\r\n"
           b"i: abc-123@192.0.2.1\r\n"
           b"f: <sip:alice@example.net>;tag=1\r\nt: <sip:bob@example.net>\r\n"
           b"cseq:  8   INVITE\r\n"
           b"l: 4\r\n\r\nv=0\n")


def test_compact_forms():
    f = parse_message(COMPACT)
    assert f.method == "INVITE" and f.status is None
    assert f.call_id == "abc-123@192.0.2.1"
    assert (f.cseq, f.cseq_method) == (8, "INVITE")
    assert f.via_branch == "z9hG4bKfirst"  # the top Via is the first value of the first Via header
    assert f.content_length == 4
    assert f.header_len + f.content_length == len(COMPACT)


def test_status_line_and_case():
    msg = (b"SIP/2.0 180 Ringing\r\nvia: SIP/2.0/TCP h;received=1.2.3.4;BRANCH=z9hG4bK.x\r\n"
           b"Call-Id: q\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n")
    f = parse_message(msg)
    assert f.status == 180 and f.method is None
    assert f.call_id == "q" and f.via_branch == "z9hG4bK.x" and f.content_length == 0


def test_not_sip():
    assert parse_message(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") is None
    assert not looks_like_sip(b"\x00\x01garbage")
    assert looks_like_sip(b"OPTIONS sip:x SIP/2.0\r\n")
