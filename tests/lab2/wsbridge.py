"""SIP over WebSocket for SIPp, which speaks only UDP and TCP: a bridge beside the caller.

    python wsbridge.py --listen PORT --connect HOST:PORT [--clients N]

Each TCP connection SIPp opens to ``--listen`` is carried to the proxy over ``N`` WebSocket
connections (RFC 6455, subprotocol ``sip``, RFC 7118), opened at once with an HTTP Upgrade each:
SIPp's one connection for all calls (``-t t1``) becomes ``N`` browser-like clients that each keep
a connection open, a call's messages going over the one its Call-ID hashes to; with ``N = 1`` and
SIPp's ``-t tn`` every call opens its own WebSocket, upgrade included, and closes it at its end.

Each SIP message from SIPp (its header block and ``Content-Length`` body) goes in one masked text
frame, as a browser sends; each frame from the proxy (unmasked) is handed to SIPp as it came.
Ping frames are answered; a close frame closes the SIPp connection.  The bridge writes nothing
but ``--log``; it stops on SIGTERM.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import os
import re
import signal
import struct
import sys
import zlib

_CL = re.compile(rb"\r\n(?:content-length|l)[ \t]*:[ \t]*(\d+)", re.I)


def mask(payload: bytes, key: bytes) -> bytes:
    """RFC 6455 §5.3: the payload XORed with the 4-byte key repeated."""
    n = len(payload)
    k = int.from_bytes((key * (n // 4 + 1))[:n], "big")
    return (int.from_bytes(payload, "big") ^ k).to_bytes(n, "big")


def frame(payload: bytes, opcode: int = 1) -> bytes:
    """One final, masked client frame."""
    n, key = len(payload), os.urandom(4)
    head = bytes([0x80 | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + struct.pack(">H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack(">Q", n)
    return head + key + mask(payload, key)


def sip_messages(buf: bytearray) -> list[bytes]:
    """Take the complete SIP messages off the front of ``buf`` (CRLF keep-alives dropped)."""
    out = []
    while True:
        while buf[:2] == b"\r\n":
            del buf[:2]
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            return out
        m = _CL.search(bytes(buf[:end + 2]))
        total = end + 4 + (int(m.group(1)) if m else 0)
        if len(buf) < total:
            return out
        out.append(bytes(buf[:total]))
        del buf[:total]


async def read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One frame from the proxy (a server's frames are not masked): (opcode, payload)."""
    b0, b1 = await reader.readexactly(2)
    n = b1 & 0x7F
    if n == 126:
        (n,) = struct.unpack(">H", await reader.readexactly(2))
    elif n == 127:
        (n,) = struct.unpack(">Q", await reader.readexactly(8))
    key = await reader.readexactly(4) if b1 & 0x80 else b""
    data = await reader.readexactly(n)
    return b0 & 0x0F, (mask(data, key) if key else data)


async def open_ws(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection(host, port)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write((f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: sip\r\n"
                  f"Origin: http://{host}\r\n\r\n").encode())
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 101"):
        raise ConnectionError(f"the proxy refused the WebSocket upgrade: {head[:80]!r}")
    return reader, writer


class Bridge:
    def __init__(self, host: str, port: int, clients: int, log):
        self.host, self.port, self.clients, self.log = host, port, clients, log
        self.opened = self.refused = 0

    async def serve(self, sipp_r: asyncio.StreamReader, sipp_w: asyncio.StreamWriter) -> None:
        try:
            ws = [await open_ws(self.host, self.port) for _ in range(self.clients)]
        except (OSError, ConnectionError, asyncio.IncompleteReadError) as e:
            self.refused += 1
            print(f"upgrade failed: {e}", file=self.log, flush=True)
            sipp_w.close()
            return
        self.opened += len(ws)
        back = [asyncio.create_task(self.to_sipp(r, w, sipp_w)) for r, w in ws]
        buf = bytearray()
        try:
            while True:
                data = await sipp_r.read(65536)
                if not data:
                    break
                buf += data
                for msg in sip_messages(buf):
                    i = 0
                    if len(ws) > 1:
                        m = re.search(rb"\r\n(?:call-id|i)[ \t]*:[ \t]*([^\r\n]+)", msg, re.I)
                        i = zlib.crc32(m.group(1).strip()) % len(ws) if m else 0
                    ws[i][1].write(frame(msg))
        except (ConnectionError, OSError):
            pass
        finally:
            for _r, w in ws:
                try:
                    w.write(bytes([0x88, 0x82]) + b"\0\0\0\0" + struct.pack(">H", 1000))   # close, status 1000
                    w.close()
                except (ConnectionError, OSError, RuntimeError):
                    pass
            for t in back:
                t.cancel()
            sipp_w.close()

    async def to_sipp(self, r, w, sipp_w) -> None:
        try:
            while True:
                op, data = await read_frame(r)
                if op in (1, 2, 0):
                    sipp_w.write(data)
                elif op == 9:                   # ping: pong with its data
                    w.write(frame(data, 10))
                elif op == 8:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass


async def main_async(a) -> None:
    host, _, port = a.connect.rpartition(":")
    log = open(a.log, "a") if a.log else open(os.devnull, "w")
    bridge = Bridge(host, int(port), a.clients, log)
    server = await asyncio.start_server(bridge.serve, "127.0.0.1", a.listen, backlog=4096)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    async with server:
        await stop.wait()
    print(f"websocket connections opened {bridge.opened}, upgrades failed {bridge.refused}", file=log, flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", type=int, required=True)
    ap.add_argument("--connect", required=True, help="the proxy's WebSocket listener, HOST:PORT")
    ap.add_argument("--clients", type=int, default=1, help="WebSocket connections per SIPp connection")
    ap.add_argument("--log", default=None)
    asyncio.run(main_async(ap.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
