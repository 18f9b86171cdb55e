"""Kernels that cut a block of file bytes into records (TFRecord frames, text lines).

Each scanner reads ``buf[lo:hi]``, copies whole records' payloads one after the other
into ``out`` and their end offsets into ``out_offsets[1:]`` (``out_offsets[0]`` is 0), and
stops at the first record that does not fit in the block, at ``max_rows`` records or at
``max_bytes`` payload bytes. Every length read from the file is checked against the
block before it is used, so a corrupt file can make a scanner report an error but never
read or write out of bounds.
"""

from __future__ import annotations

import numba
import numpy as np

from nbdata.kernels import HELPER
from nbdata.kernels.crc32c import (HARDWARE, masked_crc32c_bytes, masked_crc32c_copy,
                                   masked_crc32c_u64)
from nbdata.kernels.protobuf import _le32
from nbdata.kernels.python_tier import ColdStart

# Unaligned 8-byte loads and stores (x86-64) let scan_lines copy a word at a time.
WORDS = HARDWARE
if WORDS:
    from nbdata.kernels.crc32c import _load_u64, _store_u64
else:
    def _load_u64(data, index):  # never called: WORDS is a compile-time False
        return np.uint64(0)
    _store_u64 = _load_u64
_ONES = np.uint64(0x0101010101010101)
_HIGHS = np.uint64(0x8080808080808080)
_NEWLINES = np.uint64(0x0A0A0A0A0A0A0A0A)
_RETURNS = np.uint64(0x0D0D0D0D0D0D0D0D)

# TFRecord frame: uint64 length, uint32 masked CRC32C of the length, data, uint32 masked
# CRC32C of the data (all little-endian).
FRAME_HEADER = 12
FRAME_FOOTER = 4

OK = 0
BAD_LENGTH_CRC = 1
BAD_DATA_CRC = 2


@numba.njit(**HELPER)
def _u64(buf, i):
    value = np.uint64(0)
    for k in range(8):
        value |= np.uint64(buf[i + k]) << np.uint64(8 * k)
    return value


@numba.njit(nogil=True, cache=True, no_cfunc_wrapper=True)
def scan_tfrecords(buf, lo, hi, max_rows, max_bytes, out, out_offsets, verify):
    """TFRecord frames of ``buf[lo:hi]``.

    Returns ``(n, pos, status, need)``: ``n`` records copied; ``pos`` the offset of the
    first frame not consumed (or of the bad frame); ``status`` OK, BAD_LENGTH_CRC or
    BAD_DATA_CRC; ``need`` the size of the frame at ``pos`` when its header is complete
    (-1 otherwise), so the reader knows how much to read before scanning again.
    ``out`` must hold ``hi - lo`` bytes and ``out_offsets`` ``max_rows + 1`` entries.
    """
    pos = lo
    n = 0
    used = 0
    out_offsets[0] = 0
    while n < max_rows:
        if hi - pos < FRAME_HEADER:
            return n, pos, OK, -1
        if verify and _le32(buf, pos + 8) != masked_crc32c_u64(buf, pos):
            return n, pos, BAD_LENGTH_CRC, -1
        length = _u64(buf, pos)
        # Frames longer than the rest of the block: report the size needed (capped so
        # that a huge length from an unverified header cannot overflow).
        if length > np.uint64(hi - pos):
            if length > np.uint64(1 << 62):
                return n, pos, OK, 1 << 62
            return n, pos, OK, FRAME_HEADER + np.int64(length) + FRAME_FOOTER
        size = np.int64(length)
        if hi - pos - FRAME_HEADER - FRAME_FOOTER < size:
            return n, pos, OK, FRAME_HEADER + size + FRAME_FOOTER
        if n > 0 and used + size > max_bytes:
            return n, pos, OK, -1
        start = pos + FRAME_HEADER
        if verify:
            if _le32(buf, start + size) != masked_crc32c_copy(buf, start, start + size, out, used):
                return n, pos, BAD_DATA_CRC, -1
        else:
            # A loop, not a slice assignment: the same copy, without compiling Numba's
            # shape-mismatch error path (about a second of the first compile).
            for k in range(size):
                out[used + k] = buf[start + k]
        used += size
        n += 1
        out_offsets[n] = used
        pos = start + size + FRAME_FOOTER
    return n, pos, OK, -1


@numba.njit(nogil=True, cache=True, no_cfunc_wrapper=True)
def scan_lines(buf, lo, hi, final, max_rows, max_bytes, out, out_offsets, one_cr=False):
    """Lines of ``buf[lo:hi]``, split at ``\n``, with every ``\r`` dropped (as
    TextLineDataset does), or with ``one_cr`` only one ``\r`` at the end of each line
    (TF1's TextLineReader). With ``final`` the bytes after the last newline are a line
    too, unless they are only ``\r`` bytes (under ``one_cr``: unless there are none).
    Stops after ``max_rows`` lines or once ``max_bytes`` are copied. Returns ``(n, pos)``:
    lines copied and the offset after the last one. One pass: each byte is copied, newlines end a line instead."""
    n = 0
    used = 0
    out_offsets[0] = 0
    pos = lo
    k = lo
    if max_rows <= 0:
        return 0, lo
    while k < hi:
        if WORDS and k + 8 <= hi:
            # Eight bytes without \n or \r are copied as one word (the zero-byte test
            # on the word xor each byte value); ``out`` is as long as ``buf[lo:hi]``
            # and ``used <= k - lo``, so the store stays inside it.
            w = _load_u64(buf, k)
            a = w ^ _NEWLINES
            b = w ^ _RETURNS
            if (((a - _ONES) & ~a) | ((b - _ONES) & ~b)) & _HIGHS == np.uint64(0):
                _store_u64(out, used, w)
                used += 8
                k += 8
                continue
        c = buf[k]
        k += 1
        if c == 10:
            if one_cr and used > out_offsets[n] and out[used - 1] == 13:
                used -= 1
            n += 1
            out_offsets[n] = used
            pos = k
            if n >= max_rows or used >= max_bytes:
                return n, pos
        elif c != 13 or one_cr:
            out[used] = c
            used += 1
    if final and pos < hi and one_cr:
        if used > out_offsets[n] and out[used - 1] == 13:
            used -= 1
        n += 1
        out_offsets[n] = used
        pos = hi
    elif final and pos < hi:
        # The bytes after the last newline are a line unless they were all \r (dropped):
        # TensorFlow's reader gives no empty last line.
        if used > out_offsets[n]:
            n += 1
            out_offsets[n] = used
        pos = hi
    return n, pos


def frame_tfrecord(payload: bytes) -> bytes:
    """One record framed as TFRecord stores it.

    >>> frame_tfrecord(b"")
    b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00)\\x03\\x98\\x07\\xd8\\xea\\x82\\xa2'
    """
    header = len(payload).to_bytes(8, "little")
    return b"".join((header, masked_crc32c_bytes(header).to_bytes(4, "little"), payload,
                     masked_crc32c_bytes(payload).to_bytes(4, "little")))


# Tier 0 (nbdata/kernels/python_tier.py): a first reader's first records are framed by
# the scanners' Python source while Numba compiles them (about 2 us a byte in Python: the
# CRC). Work: bytes the call may scan. A TFRecord call in Python stops after
# PYTHON_SCAN_BYTES of records (and the one it is in): the same records in more calls.
PYTHON_SCAN_BYTES = 64 << 10
scan_tfrecords_cold = ColdStart(scan_tfrecords, first_work=96 << 10)
scan_lines_cold = ColdStart(scan_lines, first_work=96 << 10)


def scan_lines_call(buf, lo, hi, final, max_rows, max_bytes, out, out_offsets, one_cr=False):
    """:func:`scan_lines` through its tier 0: in Python (while it compiles) only up to
    the first newline PYTHON_SCAN_BYTES in (the scan stops there once it has copied that
    many bytes; with a ``\r`` before it, which it may drop, the whole window counts)."""
    args = (buf, lo, hi, final, max_rows, max_bytes, out, out_offsets, one_cr)
    small = min(max_bytes, PYTHON_SCAN_BYTES)
    work = hi - lo
    if work > small:
        after = np.flatnonzero(np.asarray(buf[lo + small:hi]) == 10)
        if len(after) and not np.any(np.asarray(buf[lo:lo + small + int(after[0])]) == 13):
            work = small + int(after[0]) + 1
    return scan_lines_cold.call(args, work, args[:5] + (small,) + args[6:])


def scan_tfrecords_call(buf, lo, hi, max_rows, max_bytes, out, out_offsets, verify):
    """:func:`scan_tfrecords` through its tier 0: in Python (while it compiles) only for
    at most PYTHON_SCAN_BYTES of records past the first, whose length is read here."""
    args = (buf, lo, hi, max_rows, max_bytes, out, out_offsets, verify)
    first = int.from_bytes(bytes(buf[lo:lo + 8]), "little") if hi - lo >= 8 else 0
    small = min(max_bytes, PYTHON_SCAN_BYTES)
    work = min(hi - lo, small + FRAME_HEADER + first + FRAME_FOOTER)
    return scan_tfrecords_cold.call(args, work, args[:4] + (small,) + args[5:])
