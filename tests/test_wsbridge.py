"""The lab's WebSocket bridge (``tests/lab2/wsbridge.py``) in small pieces: SIP messages cut from
SIPp's byte stream, and client frames as RFC 6455 §5 defines them."""
from __future__ import annotations

import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lab2.wsbridge import frame, mask, sip_messages  # noqa: E402

INVITE = (b"INVITE sip:callee@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/WS 127.0.0.1:5061;branch=z9hG4bK1\r\n"
          b"Call-ID: 1\r\nContent-Length: 5\r\n\r\nv=0\r\n")
ACK = b"ACK sip:callee@127.0.0.1 SIP/2.0\r\nCall-ID: 1\r\nl: 0\r\n\r\n"


def test_messages_are_cut_at_their_content_length_and_a_partial_one_waits():
    buf = bytearray(b"\r\n" + INVITE + ACK + INVITE[:30])
    assert sip_messages(buf) == [INVITE, ACK]
    assert bytes(buf) == INVITE[:30]
    buf += INVITE[30:]
    assert sip_messages(buf) == [INVITE] and not buf


def test_a_body_not_yet_complete_is_not_cut():
    buf = bytearray(INVITE[:-2])
    assert sip_messages(buf) == [] and bytes(buf) == INVITE[:-2]


def _unframe(f: bytes) -> tuple[int, bytes]:
    assert f[0] & 0x80 and f[1] & 0x80            # final, masked (a client's frame)
    n, i = f[1] & 0x7F, 2
    if n == 126:
        (n,), i = struct.unpack(">H", f[2:4]), 4
    elif n == 127:
        (n,), i = struct.unpack(">Q", f[2:10]), 10
    key, data = f[i:i + 4], f[i + 4:]
    assert len(data) == n
    return f[0] & 0x0F, mask(data, key)


def test_frames_carry_the_message_masked_with_each_length_form():
    for size in (5, 125, 126, 65535, 65536):
        msg = (INVITE * (size // len(INVITE) + 1))[:size]
        f = frame(msg)
        op, data = _unframe(f)
        assert op == 1 and data == msg
        assert f[-size:] != msg or size < 8          # the payload on the wire is masked
    assert _unframe(frame(b"x", 10))[0] == 10           # a pong


def test_masking_twice_gives_the_payload_back():
    assert mask(mask(INVITE, b"\x01\x02\x03\x04"), b"\x01\x02\x03\x04") == INVITE
    assert mask(b"\x00\x00\x00\x00\x00", b"abcd") == b"abcda"
