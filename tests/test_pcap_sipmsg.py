"""SIP message rules (RFC 3261 §7.3.1 unfolding, §7.3.3 compact forms, §20 names, §8.1.1
mandatory headers): hand-written expectations read off the RFC for the Python reference
(:mod:`sipperf.ingest.capture.sipmsg`), then a differential test: the compiled reader
(:mod:`sipperf.ingest.capture.scan`) gives the same row, or the same skip reason, on every real
fixture message and on thousands of seeded mutations of them (folding, compact names, case,
whitespace, quotes, commas, non-ASCII and invalid UTF-8, bit flips, truncation)."""
from __future__ import annotations

import random
from pathlib import Path

import pandas as pd
import pytest

from capgen import eth, ipv4_udp, records, write_pcap
from sipperf.ingest.capture import fast as pcapfast
from sipperf.ingest.capture import sipmsg
from sipperf.ingest.capture.sipmsg import looks_like_sip, parse_message

FIX = Path(__file__).parent / "fixtures"

# RFC 4475 §3.1.1.1 "A Short Tortuous INVITE"-style compact-form message (abridged, not copied)
COMPACT = (b"INVITE sip:bob@example.net SIP/2.0\r\n"
           b"v: SIP/2.0/UDP 192.0.2.1:5061;branch=z9hG4bKfirst, SIP/2.0/UDP 192.0.2.9;branch=z9hG4bKsecond\r\n"
           b"VIA: SIP/2.0/UDP 192.0.2.2;branch=z9hG4bKthird\r\n"
           b"i: abc-123@192.0.2.1\r\n"
           b"f: <sip:alice@example.net>;tag=1\r\nt: <sip:bob@example.net>\r\n"
           b"cseq:  8   INVITE\r\n"
           b"m: \"Al <ice>, A\" <sip:alice@192.0.2.1>;expires=60, <sip:other@x>\r\n"
           b"l: 4\r\n\r\nv=0\n")


def test_compact_forms():
    f = parse_message(COMPACT)
    assert f.method == "INVITE" and f.status is None and f.error is None
    assert f.call_id == "abc-123@192.0.2.1"
    assert (f.cseq, f.cseq_method) == (8, "INVITE")
    assert f.via_branch == "z9hG4bKfirst"  # the top Via is the first value of the first Via header
    assert f.via_count == 3  # two values in the first Via header, one in the second
    assert (f.from_uri, f.from_tag, f.to_uri, f.to_tag) == ("sip:alice@example.net", "1", "sip:bob@example.net", None)
    assert f.contact_uri == "sip:alice@192.0.2.1"  # quoted display name with <, > and a comma
    assert f.content_length == 4
    assert f.header_len + f.content_length == len(COMPACT)


def test_status_line_and_case():
    msg = (b"SIP/2.0 180 Ringing\r\nvia: SIP/2.0/TCP h;received=1.2.3.4;BRANCH=z9hG4bK.x\r\n"
           b"Call-Id: q\r\nCSeq: 1 INVITE\r\nFrom: sip:a@b;TAG=up\r\nTo: <sip:c@d>;Tag=down\r\n"
           b"Content-Length: 0\r\n\r\n")
    f = parse_message(msg)
    assert f.status == 180 and f.method is None
    assert f.call_id == "q" and f.via_branch == "z9hG4bK.x" and f.content_length == 0
    # parameter names are case-insensitive (§7.3.1); without <> the params belong to the header
    assert (f.from_uri, f.from_tag, f.to_uri, f.to_tag) == ("sip:a@b", "up", "sip:c@d", "down")


def test_folded_headers_unfold_to_one_space():
    """§7.3.1: a line break plus the whitespace around it is one SP."""
    msg = (b"INVITE sip:x SIP/2.0\r\nVia: SIP/2.0/UDP h  \r\n ;branch=z9hG4bKfold\r\n"
           b"i: fold\r\n  ed@host\r\nCSeq: 2\r\n\tINVITE\r\nf: <sip:a@b>\r\n  ;tag=t7\r\n"
           b"Max-Forwards:\r\n 69\r\nUser-Agent: My\r\n\t \tPhone  1.0\r\nContent-Length: 0\r\n\r\n")
    f = parse_message(msg)
    assert f.call_id == "fold ed@host"
    assert (f.cseq, f.cseq_method) == (2, "INVITE")
    assert f.via_branch == "z9hG4bKfold" and f.from_tag == "t7" and f.max_forwards == 69
    assert f.ua == "My Phone  1.0"  # inner spaces of a line stay; only the fold becomes one SP


def test_header_name_rules():
    msg = (b"OPTIONS sip:x SIP/2.0\r\nCall-ID  :  c6  \r\nCSeq:7 OPTIONS\r\nX Bad: no\r\n"
           b"Server: srv\r\nSession-ID: ab12;remote=00\r\nX-Call-ID: leg-b\r\n"
           b"Retry-After: 120 (I'm in a meeting);duration=3600\r\nMax-Forwards: 4294967296\r\n\r\n")
    f = parse_message(msg)
    assert f.call_id == "c6" and f.cseq == 7  # whitespace before the colon is allowed (HCOLON)
    assert f.ua == "srv"  # no User-Agent: Server
    assert f.corr_id == "ab12;remote=00"  # Session-ID (RFC 7989) before X-Call-ID
    assert f.retry_after == 120  # delta-seconds, comment and parameters ignored (§20.33)
    assert f.max_forwards is None  # above 2^32-1


@pytest.mark.parametrize("line,reason", [
    (b"SIP/2.0 200 OK\r\nCall-ID: a\r\nCSeq: 4294967296 BYE\r\n\r\n", sipmsg.MALFORMED_CSEQ),
    (b"SIP/2.0 200 OK\r\nCall-ID: a\r\nCSeq: 99999999999999999999999 BYE\r\n\r\n", sipmsg.MALFORMED_CSEQ),
    (b"SIP/2.0 200 OK\r\nCall-ID: a\r\nCSeq: abc BYE\r\n\r\n", sipmsg.MALFORMED_CSEQ),
    (b"SIP/2.0 200 OK\r\nCall-ID: a\r\n\r\n", sipmsg.MALFORMED_CSEQ),
    (b"SIP/2.0 200 OK\r\nCSeq: 1 BYE\r\n\r\n", sipmsg.MALFORMED_CALLID),
    (b"SIP/2.0 700 Odd\r\nCall-ID: a\r\nCSeq: 1 BYE\r\n\r\n", sipmsg.MALFORMED_STATUS),
    (b"SIP/2.0 099 Odd\r\nCall-ID: a\r\nCSeq: 1 BYE\r\n\r\n", sipmsg.MALFORMED_STATUS),
])
def test_malformed(line, reason):
    assert parse_message(line).error == reason


def test_cseq_at_the_limit_is_fine():
    f = parse_message(b"SIP/2.0 200 OK\r\nCall-ID: a\r\nCSeq: 4294967295 BYE\r\n\r\n")
    assert f.error is None and f.cseq == 2**32 - 1


def test_not_sip():
    assert parse_message(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") is None
    assert not looks_like_sip(b"\x00\x01garbage")
    assert looks_like_sip(b"OPTIONS sip:x SIP/2.0\r\n")


# ------------------------------------------------------------------------ differential test
def _fixture_messages() -> list[bytes]:
    """The UDP payload / TCP segment payload of every packet of the real fixtures that starts
    with a SIP start line (IPv4 and IPv6, every link type of the fixtures)."""
    out = []
    for cap in sorted(FIX.glob("*.pcapng")):
        for _, _, data in records(cap):
            for mark in (b"SIP/2.0 ", b"INVITE ", b"ACK ", b"BYE ", b"CANCEL ", b"PRACK ", b"OPTIONS ",
                         b"REGISTER ", b"UPDATE "):
                i = data.find(mark)
                if i >= 0 and looks_like_sip(data[i:]):
                    out.append(bytes(data[i:]))
                    break
    return out


EDGE = [
    COMPACT,
    b"INVITE sip:x SIP/2.0\r\nVia: SIP/2.0/UDP h  \r\n ;branch=z9hG4bKfold\r\ni: fold\r\n  ed@host\r\nCSeq: 2\r\n\tINVITE\r\n\r\n",
    b"SIP/2.0 180 Ringing\r\nvia: SIP/2.0/TCP h;received=1.2.3.4;BRANCH=z9hG4bK.x\r\nCall-Id: q\r\nCSeq: 1 INVITE\r\n\r\n",
    b"SIP/2.0 503 X\r\ni:a\r\nCSeq:1 INVITE\r\nRetry-After:  18000;duration=3600\r\nContact: *\r\n\r\n",
    b"SIP/2.0 200\r\ni:a\r\nCSeq:1 X\r\n\r\n",
    b"SIP/2.0 200",
    b"INVITE sip:x SIP/2.0",
    b"INVITE sip:x SIP/2.0\nCall-ID: lf-only\nCSeq: 1 INVITE\nVia: ,\nVia: SIP/2.0/UDP h;branch=z\n\nbody",
    b"INVITE sip:x SIP/2.0\r\n\r\n",
    b"INVITE sip:x SIP/2.0\r\n call-id: cont-without-header\r\nCall-ID: real\r\nCSeq: 1 INVITE\r\n\r\n",
    b"BYE sip:x SIP/2.0\r\nCall-ID: \xe2\x82\xac-euro\r\nCSeq: 1 BYE\r\nFrom: \"\xff\xfe\" <sip:\xc3\xa9@x>;tag=\x80\r\n\r\n",
    b"BYE sip:x SIP/2.0\r\nCall-ID: a\r\nCSeq: 1 BYE\r\nFrom: \"x\\\" <y\" <sip:q@r>;tag=1\r\nTo: sip:a@b;tag\r\n\r\n",
    b"BYE sip:x SIP/2.0\r\nCall-ID: a\r\nCSeq: 1 BYE\r\nFrom: <sip:unterminated;tag=9\r\nTo: <>;tag=z\r\nContact: ,<sip:s@t>\r\n\r\n",
    b"BYE sip:x SIP/2.0\r\nCall-ID: a\r\nCSeq: 1 BYE\r\nVia: SIP/2.0/UDP \"a,b\";branch=q, SIP/2.0/UDP c\r\nVia:  \r\n\r\n",
    b"BYE sip:x SIP/2.0\r\nCall-ID: a\r\nCSeq: 1 BYE\r\nVia: SIP/2.0/UDP h;branch= ;x\r\nX-CID: c1\r\nCisco-Guid: g\r\n\r\n",
    b"BYE sip:x SIP/2.0\r\nCall-ID: a\r\nCSeq: 1 BYE\r\nVia: SIP/2.0/UDP h; BRANCH = b1 x\r\nMs-Correlation-Id: m\r\nX-Orig-Call-ID: o\r\n\r\n",
    b"SIP/2.0 486 Busy\r\nCall-ID: a\r\nCSeq: 0000000000000000000000001 INVITE extra\r\nMax-Forwards: 00070\r\n\r\n",
    b"SIP/2.0 486 Busy\r\nCall-ID: a\r\nCSeq: 1\x0bINVITE\r\nRetry-After: 12x\r\nUser-Agent:\r\nServer: s\r\n\r\n",
    b"REGISTER sip:x SIP/2.0\r\nCall-ID: a\r\nCSeq: 1 REGISTER\r\nContact: sip:a@b;expires=3, sip:c@d\r\n\r\n",
    b"REGISTER sip:x SIP/2.0\r\nCall-ID: a\r\nCSeq: 1 REGISTER\r\nm: \"D\" sip:x;q=1\r\n\r\n",
]


def _mutate(rng: random.Random, msg: bytes) -> bytes:
    m = bytearray(msg)
    k = rng.randrange(12)
    hend = m.find(b"\r\n\r\n")
    hend = len(m) if hend < 0 else hend
    lines = [i + 2 for i in range(len(m)) if m[i:i + 2] == b"\r\n" and i + 2 < hend]
    if k == 0 and lines:  # fold a header line at a space
        sp = [i for i in range(lines[0], hend) if m[i] == 32]
        if sp:
            i = rng.choice(sp)
            m[i:i + 1] = rng.choice([b"\r\n ", b"\r\n\t", b" \r\n  ", b"\n "])
    elif k == 1:  # compact or odd-case names
        for long, short in ((b"Call-ID:", b"i:"), (b"Via:", b"v:"), (b"From:", b"f:"), (b"To:", b"t:"),
                            (b"Contact:", b"m:"), (b"Content-Length:", b"l:")):
            if rng.random() < 0.5:
                m = bytearray(bytes(m).replace(b"\r\n" + long, b"\r\n" + rng.choice([short, long.upper(), long.lower()])))
    elif k == 2:  # whitespace before/after colons
        m = bytearray(bytes(m).replace(b": ", rng.choice([b" : ", b":", b"\t:\t", b":   "]), rng.randrange(1, 6)))
    elif k == 3 and lines:  # delete CRs (LF-only lines)
        m = bytearray(bytes(m).replace(b"\r\n", b"\n", rng.randrange(1, 20)))
    elif k == 4:  # non-ASCII / invalid UTF-8 somewhere in the headers
        i = rng.randrange(max(1, hend))
        m[i:i] = rng.choice([b"\xc3\xa9", b"\xff", b"\xe2\x82", b"\x80\x80", b"\xf0\x9f\x98\x80"])
    elif k == 5:  # byte flips in the headers
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(max(1, hend))
            m[i] ^= 1 << rng.randrange(8)
    elif k == 6:  # truncation
        m = m[:rng.randrange(len(m) + 1)]
    elif k == 7 and lines:  # duplicate or drop a header line
        i = rng.choice(lines)
        j = m.find(b"\r\n", i) + 2
        if rng.random() < 0.5:
            m[j:j] = m[i:j]
        else:
            del m[i:j]
    elif k == 8:  # quotes, brackets, commas, semicolons inside values
        i = rng.randrange(max(1, hend))
        m[i:i] = rng.choice([b'"', b"<", b">", b",", b";", b"\\", b";tag=", b";branch=x,y"])
    elif k == 9:  # numbers at the edges
        m = bytearray(bytes(m).replace(b"CSeq: ", b"CSeq: " + rng.choice(
            [b"4294967295", b"4294967296", b"0", b"-1", b"00000000000000000007", b"1e3", b""]) + b" ", 1))
        if m.startswith(b"SIP/2.0 "):
            m[8:11] = rng.choice([b"099", b"100", b"699", b"700", b"1a0", b"999"])
    elif k == 10:  # extra headers the table reads
        extra = rng.choice([b"Session-ID: 0123;remote=4567\r\n", b"X-Call-ID: other@leg\r\n", b"User-Agent: \r\n",
                            b"Retry-After: 5 (x)\r\n", b"Max-Forwards: 4294967295\r\n", b"Server: s1\r\n",
                            b"x-cid:  xc \r\n", b"Contact: *\r\n"])
        i = rng.choice(lines) if lines else len(m)
        m[i:i] = extra
    else:  # bare CR, tabs, empty values
        i = rng.randrange(max(1, hend))
        m[i:i] = rng.choice([b"\r", b"\t", b"\r\n", b"\r\n\r\n"])
    return bytes(m)


def _expected(msgs: list[bytes]):
    rows, skips = [], {}
    for i, msg in enumerate(msgs, start=1):
        f = parse_message(msg, framing=False)
        if f is None:
            skips["UDP payload not SIP"] = skips.get("UDP payload not SIP", 0) + 1
        elif f.error:
            skips[f.error] = skips.get(f.error, 0) + 1
        else:
            rows.append({"frame": i, "size": len(msg), **{c: getattr(f, c) for c in pcapfast.COLUMNS
                                                         if c in sipmsg.SipFields._fields}})
    return rows, skips


def test_compiled_reader_equals_reference(tmp_path):
    rng = random.Random(3261)
    base = _fixture_messages()
    assert len(base) > 1500
    sample = rng.sample(base, 400) + EDGE
    msgs = list(sample)
    for m in sample:
        for _ in range(6):
            msgs.append(_mutate(rng, m))
    msgs = [m for m in msgs if len(m) <= 65000]
    cap = write_pcap(tmp_path / "corpus.pcap", [eth(ipv4_udp(m, ident=i & 0xFFFF)) for i, m in enumerate(msgs)])
    df, rep = pcapfast.read_packets(cap)
    rows, skips = _expected(msgs)
    assert rep.read == len(msgs) and rep.parsed == len(rows) and dict(rep.skipped) == skips
    exp = pd.DataFrame(rows, dtype=object)
    cols = [c for c in exp.columns]
    got = df[cols].astype(object).where(df[cols].notna(), None)
    assert got["frame"].tolist() == exp["frame"].tolist()
    for c in cols:
        g, e = got[c].tolist(), exp[c].tolist()
        bad = [(i, g[i], e[i]) for i in range(len(g)) if g[i] != e[i]]
        assert not bad, (c, bad[:3], [msgs[exp["frame"][i] - 1][:300] for i, _, _ in bad[:1]])
    # the mutations reached every rule
    assert skips.get(sipmsg.MALFORMED_CSEQ) and skips.get(sipmsg.MALFORMED_STATUS) and skips.get(sipmsg.MALFORMED_CALLID)
    assert df["corr_id"].notna().any() and df["retry_after"].notna().any() and (df["via_count"] > 2).any()
    assert (df["call_id"] == "fold ed@host").any()  # a folded Call-ID
    assert df["call_id"].str.contains("\ufffd", regex=False).any()  # invalid UTF-8 replaced
