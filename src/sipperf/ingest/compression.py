"""Compressed inputs: gzip, xz, bzip2 and zstd are read as the stream they hold (judged by content,
never by name); archives and other compressors are refused by name.

What a capture appliance, ``dumpcap``/``tcpdump`` piped through a compressor, or a log rotation
writes: ``.gz`` (several members allowed, as ``cat a.gz b.gz`` makes), ``.xz`` (several streams
allowed), ``.bz2`` (several streams allowed) and ``.zst`` (several frames allowed).  A stream cut
short is read up to the cut, like a capture cut short (:class:`Decoder` says so in ``problem``):
the reader counts the incomplete last record and names the file (an error with ``--strict``).
"""
from __future__ import annotations

import bz2
import io
import lzma
import zlib
from pathlib import Path

#: first bytes -> the compressed format read
MAGICS: dict[str, bytes] = {
    "gzip": b"\x1f\x8b",
    "xz": b"\xfd7zXZ\x00",
    "bzip2": b"BZh",
    "zstd": b"\x28\xb5\x2f\xfd",
}
#: first bytes -> what is refused, and what to do instead
REFUSED: dict[bytes, str] = {
    b"PK\x03\x04": "a zip archive: unpack it and give the files inside",
    b"7z\xbc\xaf\x27\x1c": "a 7-Zip archive: unpack it and give the files inside",
    b"Rar!\x1a\x07": "a RAR archive: unpack it and give the files inside",
    b"\x04\x22\x4d\x18": "lz4-compressed: decompress it first (lz4 -d)",
    b"LZIP": "lzip-compressed: decompress it first (lzip -d)",
    b"\x1f\x9d": "compress(1) (.Z) data: decompress it first (uncompress)",
}
#: file name endings of compressed files (for run names: x.pcapng.zst -> x)
SUFFIXES = (".gz", ".xz", ".bz2", ".zst", ".zstd")


class DecodeError(ValueError):
    """Compressed data that cannot be decompressed (corrupt)."""


def kind(head: bytes) -> str | None:
    """The compressed format the bytes begin with, or None."""
    for name, magic in MAGICS.items():
        if head.startswith(magic):
            return name
    return None


def refused(head: bytes) -> str | None:
    """Why a file beginning with these bytes is not read (an archive, another compressor), or None."""
    for magic, why in REFUSED.items():
        if head.startswith(magic):
            return why
    return None


def _new(name: str):
    if name == "gzip":
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if name == "xz":
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    if name == "bzip2":
        return bz2.BZ2Decompressor()
    if name == "zstd":
        import zstandard
        return zstandard.ZstdDecompressor().decompressobj()
    raise ValueError(f"not a compressed format: {name!r}")


class Decoder:
    """Incremental decompression of one compressed file, member after member (gzip), stream
    after stream (xz, bzip2) or frame after frame (zstd).  :meth:`decompress` takes the next
    compressed bytes; :meth:`finish` says, once the input is exhausted, whether it ended inside
    a member (then ``problem`` names it)."""

    def __init__(self, name: str):
        self.name = name
        self.d = _new(name)
        self.problem: str | None = None
        self._started = False  # bytes of the current member fed

    def decompress(self, data: bytes) -> bytes:
        out = []
        while data:
            try:
                out.append(self.d.decompress(data))
            except Exception as e:  # zlib.error, LZMAError, OSError (bz2), EOFError, zstandard.ZstdError
                raise DecodeError(f"corrupt {self.name} data ({e})") from None
            self._started = True
            if not self._eof():
                break
            rest = self._unused()
            self.d = _new(self.name)
            self._started = False
            data = rest
            # bytes after the last member that are all zero (padding a tape block) end the data
            if data and not data.strip(b"\0"):
                break
        return b"".join(out)

    def _eof(self) -> bool:
        return bool(getattr(self.d, "eof", False))

    def _unused(self) -> bytes:
        return bytes(getattr(self.d, "unused_data", b"") or b"")

    def finish(self) -> bool:
        """True when the data ended between members; else ``problem`` says it was cut short."""
        if self._started and not self._eof():
            self.problem = f"compressed data cut short (truncated {self.name} stream)"
            return False
        return True

    def copy(self):
        """A copy of the decoder's state (gzip only: zlib can; None for the others)."""
        if self.name != "gzip":
            return None
        c = Decoder.__new__(Decoder)
        c.name, c.d, c.problem, c._started = self.name, self.d.copy(), self.problem, self._started
        return c


def read_head(path: str | Path, n: int) -> tuple[bytes, str | None]:
    """(the first ``n`` decompressed bytes -- fewer if the stream is cut short or corrupt --, the
    compressed format or None) of a file; plain files give their first bytes."""
    with open(path, "rb") as fh:
        raw = fh.read(max(n, 64))
        name = kind(raw)
        if name is None:
            return raw[:n], None
        dec = Decoder(name)
        out = b""
        data = raw
        while len(out) < n:
            try:
                out += dec.decompress(data)
            except DecodeError:
                break
            data = fh.read(1 << 16)
            if not data:
                break
        return out[:n], name


def open_stream(path: str | Path):
    """A binary file object of the decompressed content (the file itself when it is plain)."""
    fh = open(path, "rb")
    name = kind(fh.read(8))
    fh.seek(0)
    if name is None:
        return fh
    if name == "gzip":
        import gzip
        return gzip.GzipFile(fileobj=fh, mode="rb")
    if name == "xz":
        return lzma.LZMAFile(fh, "rb")
    if name == "bzip2":
        return bz2.BZ2File(fh, "rb")
    return _ZstdFile(fh)


class _ZstdFile(io.RawIOBase):
    """zstandard's stream reader with its errors as OSError (what the readers catch)."""

    def __init__(self, fh):
        import zstandard
        self._err = zstandard.ZstdError
        self.r = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True, closefd=True)

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        try:
            return self.r.readinto(b)
        except self._err as e:
            raise OSError(f"corrupt zstd data ({e})") from None

    def close(self) -> None:
        self.r.close()
        super().close()
