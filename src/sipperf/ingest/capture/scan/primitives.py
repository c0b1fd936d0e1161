"""Byte-level primitives of the compiled scanner: four intrinsics written in LLVM IR (an
unaligned 8-byte load, memcpy, an index without the negative wrap-around, an array view without
reference counting) and the tiny readers every layer uses (LF search 8 bytes at a time, high-bit
test, 16/32/64-bit integers in either byte order, whitespace, ASCII lower case).

All of them end up inside their callers' code: the intrinsics by construction, the rest with
``inline="always"`` (at Numba IR level, across modules).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic


@intrinsic
def _ld64(typingctx, arr, i):
    """The 8 bytes arr[i:i+8] as one little-endian uint64 (unaligned load; i+8 <= len)."""
    sig = types.uint64(arr, types.int64)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, value=args[0])
        ptr = builder.gep(ary.data, [args[1]])
        return builder.load(ptr, typ=ir.IntType(64), align=1)

    return sig, codegen


@intrinsic
def _copy(typingctx, dst, doff, src, soff, n):
    """memcpy(dst.data + doff, src.data + soff, n) for uint8 arrays (flat byte offsets)."""
    sig = types.void(dst, types.int64, src, types.int64, types.int64)

    def codegen(context, builder, signature, args):
        d = context.make_array(signature.args[0])(context, builder, value=args[0])
        sa = context.make_array(signature.args[2])(context, builder, value=args[2])
        cgutils.raw_memcpy(builder, builder.gep(d.data, [args[1]]), builder.gep(sa.data, [args[3]]),
                           args[4], 1)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _at(typingctx, arr, i):
    """arr[i] without the negative-index wrap-around (i is always in range here)."""
    sig = arr.dtype(arr, types.int64)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, value=args[0])
        return builder.load(builder.gep(ary.data, [args[1]]))

    return sig, codegen


@intrinsic
def _borrow(typingctx, arr):
    """The same array without its reference count (meminfo NULL): passing it down the per-packet
    call chain costs no atomic increment/decrement per array per call (which made the pass
    4x slower).  Only for arrays the caller keeps alive for the duration of the call."""
    sig = arr(arr)

    def codegen(context, builder, signature, args):
        src = context.make_array(arr)(context, builder, value=args[0])
        out = context.make_array(arr)(context, builder)
        out.meminfo = cgutils.get_null_value(out.meminfo.type)
        out.parent = cgutils.get_null_value(out.parent.type)
        out.nitems = src.nitems
        out.itemsize = src.itemsize
        out.data = src.data
        out.shape = src.shape
        out.strides = src.strides
        return out._getvalue()

    return sig, codegen


_ONES = np.uint64(0x0101010101010101)
_HIGH = np.uint64(0x8080808080808080)
_LF8 = np.uint64(0x0A0A0A0A0A0A0A0A)


@njit(cache=True, inline="always")
def _find_lf(a, p, e):
    """Index of the first LF in a[p:e], or e (8 bytes at a time)."""
    while p + 8 <= e:
        x = _ld64(a, p) ^ _LF8
        t = (x - _ONES) & ~x & _HIGH
        if t:
            return p + np.int64(trailing_zeros(t) >> 3)
        p += 8
    while p < e and a[p] != 10:
        p += 1
    return p


@njit(cache=True, inline="always")
def _any_high(a, s, e):
    """True if a byte of a[s:e] is >= 0x80."""
    acc = np.uint64(0)
    p = s
    while p + 8 <= e:
        acc |= _ld64(a, p)
        p += 8
    while p < e:
        acc |= np.uint64(a[p])
        p += 1
    return (acc & _HIGH) != 0


@njit(cache=True, inline="always")
def _u16(a, p, big):
    if big:
        return (np.int64(a[p]) << 8) | np.int64(a[p + 1])
    return (np.int64(a[p + 1]) << 8) | np.int64(a[p])


@njit(cache=True, inline="always")
def _u32(a, p, big):
    if big:
        return ((np.int64(a[p]) << 24) | (np.int64(a[p + 1]) << 16) | (np.int64(a[p + 2]) << 8)
                | np.int64(a[p + 3]))
    return ((np.int64(a[p + 3]) << 24) | (np.int64(a[p + 2]) << 16) | (np.int64(a[p + 1]) << 8)
            | np.int64(a[p]))


@njit(cache=True, inline="always")
def _be16(a, p):
    return (np.int64(a[p]) << 8) | np.int64(a[p + 1])


@njit(cache=True, inline="always")
def _be32(a, p):
    return ((np.int64(a[p]) << 24) | (np.int64(a[p + 1]) << 16) | (np.int64(a[p + 2]) << 8)
            | np.int64(a[p + 3]))


@njit(cache=True, inline="always")
def _be64(a, p):
    v = np.int64(0)
    for i in range(8):
        v = (v << 8) | np.int64(a[p + i])
    return v


@njit(cache=True, inline="always")
def _ws(c):
    return c == 32 or c == 9


@njit(cache=True, inline="always")
def _lower(c):
    if c >= 65 and c <= 90:
        return c + 32
    return c
