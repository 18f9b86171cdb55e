"""CRC32C (Castagnoli), the checksum of TFRecord frames, as Numba kernels.

On x86-64 machines with SSE4.2 the kernel uses the CPU's ``crc32`` instruction
(emitted through an LLVM intrinsic), eight bytes at a time; elsewhere a
slicing-by-8 table kernel computes the same values. ``HARDWARE`` says which one
:func:`crc32c` uses.

>>> hex(crc32c_bytes(b"123456789"))
'0xe3069283'
>>> masked_crc32c_bytes(b"") == 0xA282EAD8
True
"""

from __future__ import annotations

import platform

import llvmlite.binding as llvm
import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from nbdata.kernels import HELPER
from nbdata.kernels.python_tier import python_equivalent

_POLY = 0x82F63B78
_MASK_DELTA = 0xA282EAD8


def _tables() -> np.ndarray:
    t = np.zeros((8, 256), np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        t[0, i] = c
    for k in range(1, 8):
        for i in range(256):
            prev = int(t[k - 1, i])
            t[k, i] = (prev >> 8) ^ int(t[0, prev & 0xFF])
    return t


_T = _tables()


def _has_sse42() -> bool:
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        return bool(llvm.get_host_cpu_features().get("sse4.2", False))
    except Exception:  # noqa: BLE001 - feature detection unavailable: use the tables
        return False


HARDWARE = _has_sse42()


@numba.njit(nogil=True, cache=True, no_cfunc_wrapper=True)
def crc32c_update_table(crc, data, start, end):
    """The raw CRC register after ``data[start:end]`` (slicing-by-8 tables); ``crc`` is
    the register before (``0xFFFFFFFF`` to begin)."""
    t = _T
    c = np.uint32(crc)
    i = start
    while i + 8 <= end:
        lo = c ^ (np.uint32(data[i]) | (np.uint32(data[i + 1]) << np.uint32(8))
                  | (np.uint32(data[i + 2]) << np.uint32(16)) | (np.uint32(data[i + 3]) << np.uint32(24)))
        c = np.uint32(t[7, lo & np.uint32(0xFF)] ^ t[6, (lo >> np.uint32(8)) & np.uint32(0xFF)]
                      ^ t[5, (lo >> np.uint32(16)) & np.uint32(0xFF)] ^ t[4, lo >> np.uint32(24)]
                      ^ t[3, data[i + 4]] ^ t[2, data[i + 5]] ^ t[1, data[i + 6]] ^ t[0, data[i + 7]])
        i += 8
    while i < end:
        c = np.uint32(t[0, (c ^ np.uint32(data[i])) & np.uint32(0xFF)] ^ (c >> np.uint32(8)))
        i += 1
    return c


@numba.njit(**HELPER)
def mask(crc):
    """TFRecord's masking of a CRC: rotate right by 15 bits, add a constant."""
    c = np.uint64(crc)
    rotated = ((c >> np.uint64(15)) | (c << np.uint64(17))) & np.uint64(0xFFFFFFFF)
    return np.uint32((rotated + np.uint64(_MASK_DELTA)) & np.uint64(0xFFFFFFFF))


if HARDWARE:
    def _crc32_instruction(crc_type, value_type):
        """The SSE4.2 ``crc32`` instruction on a ``value_type`` value, the register as
        ``crc_type`` (an intrinsic of ``(crc, value)``)."""
        crc_ir, value_ir = ir.IntType(crc_type.bitwidth), ir.IntType(value_type.bitwidth)
        name = f"llvm.x86.sse42.crc32.{crc_type.bitwidth}.{value_type.bitwidth}"

        def crc32(typingctx, crc, value):
            def codegen(context, builder, signature, args):
                fn = cgutils.get_or_insert_function(
                    builder.module, ir.FunctionType(crc_ir, [crc_ir, value_ir]), name)
                return builder.call(fn, args)
            return crc_type(crc_type, value_type), codegen
        return intrinsic(crc32)

    _crc32_u64 = _crc32_instruction(types.uint64, types.uint64)   # on 8 bytes
    _crc32_u8 = _crc32_instruction(types.uint32, types.uint8)     # on one byte

    def _word_pointer(context, builder, signature, args):
        """A uint64 pointer to element ``args[1]`` of the uint8 array ``args[0]``."""
        arr = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.bitcast(builder.gep(arr.data, [args[1]]), ir.IntType(64).as_pointer())

    @intrinsic
    def _load_u64(typingctx, data, index):
        """Eight bytes of a uint8 array at ``index`` as a little-endian uint64 (an
        unaligned load; the caller checks the bounds)."""
        sig = types.uint64(data, types.intp)

        def codegen(context, builder, signature, args):
            return builder.load(_word_pointer(context, builder, signature, args), align=1)
        return sig, codegen

    @intrinsic
    def _store_u64(typingctx, data, index, value):
        """Stores a uint64 as eight little-endian bytes of a uint8 array at ``index``
        (unaligned; the caller checks the bounds)."""
        sig = types.void(data, types.intp, types.uint64)

        def codegen(context, builder, signature, args):
            builder.store(args[2], _word_pointer(context, builder, signature, args), align=1)
            return context.get_dummy_value()
        return sig, codegen

    @numba.njit(nogil=True, cache=True, no_cfunc_wrapper=True)
    def masked_crc32c_copy(src, start, end, dst, at):
        """Copies ``src[start:end]`` to ``dst[at:]`` and returns the masked CRC32C of
        the bytes, in one pass over them."""
        c = np.uint64(0xFFFFFFFF)
        i = start
        j = at
        while i + 8 <= end:
            word = _load_u64(src, i)
            c = _crc32_u64(c, word)
            _store_u64(dst, j, word)
            i += 8
            j += 8
        c32 = np.uint32(c)
        while i < end:
            b = src[i]
            c32 = _crc32_u8(c32, b)
            dst[j] = b
            i += 1
            j += 1
        return mask(c32 ^ np.uint32(0xFFFFFFFF))

    # Three lanes of LANE bytes are run side by side (the instruction has a latency of
    # three cycles and a throughput of one), then joined: a register shifted over LANE
    # zero bytes is a linear map of it, tabulated per byte in _SHIFT.
    LANE = 8192

    def _apply(linear: np.ndarray, values: np.ndarray) -> np.ndarray:
        """A linear map of CRC registers (``linear[i]``: the image of bit ``i``) applied
        to each register of ``values``."""
        bits = (values[:, None] >> np.arange(32, dtype=np.uint32)) & np.uint32(1)
        return np.bitwise_xor.reduce(np.where(bits != 0, linear, np.uint32(0)), axis=1)

    def _shift_tables() -> np.ndarray:
        """``_SHIFT[k, b]``: the register ``b << 8k`` after LANE zero bytes. Computed with
        NumPy (no kernel runs at import): one zero byte is a linear map of the register,
        raised to the power LANE by squaring."""
        basis = np.uint32(1) << np.arange(32, dtype=np.uint32)
        step = _T[0, basis & np.uint32(0xFF)] ^ (basis >> np.uint32(8))
        shift = basis
        n = LANE
        while n:
            if n & 1:
                shift = _apply(step, shift)
            step = _apply(step, step)
            n >>= 1
        registers = (np.arange(256, dtype=np.uint32)[None, :]
                     << (np.uint32(8) * np.arange(4, dtype=np.uint32))[:, None])
        return _apply(shift, registers.reshape(-1)).reshape(4, 256)

    _SHIFT = _shift_tables()

    @numba.njit(**HELPER)
    def _shift(c):
        s = _SHIFT
        return np.uint64(s[0, c & np.uint64(0xFF)] ^ s[1, (c >> np.uint64(8)) & np.uint64(0xFF)]
                         ^ s[2, (c >> np.uint64(16)) & np.uint64(0xFF)]
                         ^ s[3, (c >> np.uint64(24)) & np.uint64(0xFF)])

    @numba.njit(nogil=True, cache=True, no_cfunc_wrapper=True)
    def crc32c_update_hw(crc, data, start, end):
        """The raw CRC register after ``data[start:end]`` (the ``crc32`` instruction)."""
        c = np.uint64(crc)
        i = start
        while end - i >= 3 * LANE:
            a = c
            b = np.uint64(0)
            d = np.uint64(0)
            for k in range(0, LANE, 8):
                a = _crc32_u64(a, _load_u64(data, i + k))
                b = _crc32_u64(b, _load_u64(data, i + LANE + k))
                d = _crc32_u64(d, _load_u64(data, i + 2 * LANE + k))
            c = _shift(_shift(a) ^ b) ^ d
            i += 3 * LANE
        while i + 8 <= end:
            c = _crc32_u64(c, _load_u64(data, i))
            i += 8
        c32 = np.uint32(c)
        while i < end:
            c32 = _crc32_u8(c32, data[i])
            i += 1
        return c32

    crc32c_update = crc32c_update_hw

    @numba.njit(**HELPER)
    def masked_crc32c_u64(data, start):
        """:func:`masked_crc32c` of the eight bytes at ``data[start]`` (a TFRecord
        length): one ``crc32`` instruction, for the record scanner."""
        c = _crc32_u64(np.uint64(0xFFFFFFFF), _load_u64(data, start))
        return mask(np.uint32(c) ^ np.uint32(0xFFFFFFFF))

    # What the intrinsics do, for the kernels' Python source (nbdata/kernels/python_tier.py):
    # the instruction is the table's byte step, its register the operand's low 32 bits.
    def _crc32_bytes(c: int, value: int, nbytes: int) -> int:
        table = _T[0]
        for k in range(nbytes):
            c = int(table[(c ^ (value >> (8 * k))) & 0xFF]) ^ (c >> 8)
        return c

    python_equivalent(_crc32_u64, lambda crc, value: np.uint64(
        _crc32_bytes(int(crc) & 0xFFFFFFFF, int(value), 8)))
    python_equivalent(_crc32_u8, lambda crc, value: np.uint32(
        _crc32_bytes(int(crc), int(value), 1)))
    python_equivalent(_load_u64, lambda data, index: np.uint64(
        int.from_bytes(bytes(data[index:index + 8]), "little")))

    def _store_u64_python(data, index, value) -> None:
        data[index:index + 8] = int(value).to_bytes(8, "little")

    python_equivalent(_store_u64, _store_u64_python)
else:
    crc32c_update = crc32c_update_table

    @numba.njit(nogil=True, cache=True, no_cfunc_wrapper=True)
    def masked_crc32c_copy(src, start, end, dst, at):
        """Copies ``src[start:end]`` to ``dst[at:]`` and returns the masked CRC32C of
        the bytes."""
        for k in range(end - start):     # (a loop compiles faster than a slice copy)
            dst[at + k] = src[start + k]
        c = crc32c_update_table(np.uint32(0xFFFFFFFF), src, start, end)
        return mask(c ^ np.uint32(0xFFFFFFFF))

    @numba.njit(**HELPER)
    def masked_crc32c_u64(data, start):
        """:func:`masked_crc32c` of the eight bytes at ``data[start]`` (a TFRecord
        length), for the record scanner."""
        c = crc32c_update_table(np.uint32(0xFFFFFFFF), data, start, start + 8)
        return mask(c ^ np.uint32(0xFFFFFFFF))


@numba.njit(nogil=True, cache=True, no_cfunc_wrapper=True)
def crc32c(data, start, end):
    """The CRC32C of ``data[start:end]`` (a uint8 array), as TensorFlow computes it."""
    return crc32c_update(np.uint32(0xFFFFFFFF), data, start, end) ^ np.uint32(0xFFFFFFFF)


@numba.njit(nogil=True, cache=True, no_cfunc_wrapper=True)
def masked_crc32c(data, start, end):
    """The masked CRC32C that TFRecord stores for ``data[start:end]``."""
    return mask(crc32c(data, start, end))


def _read_only(b) -> np.ndarray:
    """The bytes of a bytes-like object as a read-only uint8 array (not a copy: one
    kernel signature for bytes, bytearrays, memoryviews and memory maps)."""
    return np.frombuffer(memoryview(b).toreadonly().cast("B"), np.uint8)


def crc32c_bytes(b: bytes) -> int:
    """The CRC32C of the bytes-like object ``b`` (read in place)."""
    arr = _read_only(b)
    return int(crc32c(arr, 0, len(arr)))


def masked_crc32c_bytes(b: bytes) -> int:
    """The masked CRC32C of ``b`` (what a TFRecord frame holds)."""
    arr = _read_only(b)
    return int(masked_crc32c(arr, 0, len(arr)))
