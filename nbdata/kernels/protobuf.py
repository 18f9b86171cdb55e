"""Numba kernels that decode serialized ``tf.train.Example`` protos, TensorFlow-exact.

The wire format (``tensorflow/core/example/{example,feature}.proto``)::

    Example  { Features features = 1; }
    Features { map<string, Feature> feature = 1; }     // entry: {key = 1; value = 2}
    Feature  { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
                            Int64List int64_list = 3; } }
    BytesList { repeated bytes value = 1; }
    FloatList { repeated float value = 1 [packed = true]; }
    Int64List { repeated int64 value = 1 [packed = true]; }

The decoder reproduces what TensorFlow's fast parser (``example_proto_fast_parsing.cc``,
used by ``tf.io.parse_example`` and ``tf.io.parse_single_example``) accepts, rejects and
returns, including where that differs from generic protobuf parsing:

- unknown fields are skipped only at the ``Example`` level (wire types 0, 1, 2, 5; a
  length-delimited field running past the end skips to the end); an unknown field
  inside ``Features``, a map entry or a list is an error;
- a map entry holds exactly two fields, key and value in either order;
- several ``features`` fields (concatenated Examples) merge, and for a repeated key the
  last entry wins; an empty ``Feature`` (no kind) counts as absent for ``FixedLen``
  features, and (batch only, as in TF) as an empty list for ``VarLen`` ones;
- only the first byte of a ``Feature`` selects its kind, bytes after its list are
  ignored; a list is packed or unpacked according to its first tag: a packed list holds
  one packed run (anything after it is ignored), an unpacked list must not mix in a
  packed run; a packed float run of ``n`` bytes holds ``n // 4`` floats;
- a length that runs past its enclosing message is clipped to it for messages
  (Features, map entries, lists) and packed int64 runs, and is an error for strings
  and packed float runs;
- varints are at most 10 bytes; 32-bit fields (lengths, tags) keep the low 32 bits.

Every read is checked against the bounds of the enclosing message, so no input can make
a kernel read or write out of bounds.

Layout of a parse (built by :mod:`nbdata.primitives.example`): ``F`` features sorted by key,
described by an :class:`ExampleLayout`; results go to an :class:`ExampleOutputs` for
``N`` records. A ``FixedLen`` feature ``f`` of ``count[f]`` values per record owns the
region ``[N * col[f], N * (col[f] + count[f]))`` of the output of its kind (``u32``:
float32 bits, ``i64``, or ``spos``/``slen``: string start in ``data`` and length), record
``i`` at ``N * col[f] + i * count[f]``. A missing string value taken from the default
is written as ``spos = -1 - j`` (``j`` indexes the flattened defaults). A ``VarLen``
feature ``f`` uses slot ``v = col[f]``: pass 1 stores each record's list position and
value count in ``var_pos``/``var_end``/``var_cnt[v, i]``; pass 2
(:func:`fill_varlen_range`) writes the values at ``vstart[v, i]`` of ``vu32``/``vi64``/
``vspos``+``vslen``.

Status codes (:data:`OK` ... :data:`E_MISSING`) come back with the failing feature and
an extra number; for a batch, the lowest failing record is reported, as TF does.

Calling from other kernels: build the layout and outputs with
:class:`nbdata.primitives.example.ExamplePlan` (``plan.layout``, ``plan.outputs(n)``), then in
any njit function call ``parse_record(data, lo, hi, i, n, layout, out, single, act_s,
act_e, act_i)`` per record (three int64 scratch arrays of ``F`` entries per thread), or
:func:`parse_range` for a run of records. On a failure turn ``(row, code, feature,
extra)`` into TF's exception with ``plan.error(...)``; once every record is parsed,
``plan.results(data, offsets, out)`` runs pass 2 and builds the values. The per-record
functions are compiled without Numba's reference counting (``_nrt=False``): they
allocate nothing, and array arguments then cost no atomic increments per call (with
them the parse ran 3-4x slower outside parallel loops). :mod:`nbdata.primitives.example` passes
``data`` (uint8) and ``offsets`` (int64) as read-only C-contiguous arrays; other array
types compile the kernels once more.

>>> from nbdata.primitives.example import ExamplePlan, FixedLenFeature, encode_example
>>> plan = ExamplePlan({"x": FixedLenFeature([2], "float32")})
>>> rec = np.frombuffer(encode_example({"x": [1.5, 2.0]}), np.uint8)
>>> offsets = np.array([0, len(rec)])
>>> offsets.flags.writeable = False        # as nbdata.primitives.example passes them
>>> out = plan.outputs(1)
>>> parse_range(rec, offsets, 0, 1, plan.layout, out, False)
(-1, 0, -1, 0)
>>> out.u32.view(np.float32).tolist()
[1.5, 2.0]
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numba import prange

from nbdata.kernels import HELPER
from nbdata.kernels.python_tier import ColdStart
from nbdata.kernels.tiers import tiered

# Feature kinds (the number in ``Feature.kind``'s oneof, minus one).
KIND_BYTES = 0
KIND_FLOAT = 1
KIND_INT64 = 2

OK = 0
E_PARSE = 1      # not a well-formed Example ("Could not parse example input")
E_DTYPE = 2      # a wanted Feature's first byte is no known list ("Unsupported datatype.")
E_TYPE = 3       # list kind differs from the feature's dtype; extra = the list's kind
E_LIST = 4       # malformed list (or more strings than a FixedLen feature holds)
E_COUNT = 5      # FixedLen value count differs; extra = the number of values
E_MISSING = 6    # required FixedLen feature absent

_U7 = np.uint64(0x7F)
_U32 = np.uint64(0xFFFFFFFF)
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


class ExampleLayout(NamedTuple):
    """What to extract: ``F`` features (sorted by key) and where their values go.

    Attributes:
        key_data: uint8, the keys' UTF-8 bytes one after the other.
        key_off: int64 ``[F + 1]``, key ``f`` is ``key_data[key_off[f]:key_off[f + 1]]``.
        table: int64 ``[2**k]``, open-addressing hash table of feature numbers (-1: empty)
            indexed by :func:`key_hash` (linear probing).
        kind: int64 ``[F]``, KIND_BYTES, KIND_FLOAT or KIND_INT64.
        count: int64 ``[F]``, values per record of a FixedLen feature, -1 for VarLen.
        col: int64 ``[F]``, FixedLen: region offset (in values per record) in its kind's
            output; VarLen: the slot ``v``.
        default: int64 ``[F]``, FixedLen: offset of the default in ``def_u32``/``def_i64``
            (strings: index ``j`` of its first value), -1 when required.
        def_u32: uint32, float32 defaults as bits.
        def_i64: int64, int64 defaults.
    """

    key_data: np.ndarray
    key_off: np.ndarray
    table: np.ndarray
    kind: np.ndarray
    count: np.ndarray
    col: np.ndarray
    default: np.ndarray
    def_u32: np.ndarray
    def_i64: np.ndarray


class ExampleOutputs(NamedTuple):
    """Pass-1 outputs for ``N`` records (see the module docstring for the layout).

    Attributes:
        u32: uint32 ``[N * sum(count of FixedLen floats)]`` (float32 bits).
        i64: int64 ``[N * sum(count of FixedLen int64s)]``.
        spos, slen: int64 ``[N * sum(count of FixedLen strings)]``.
        var_pos, var_end: int64 ``[V, N]``: a VarLen feature's list (after its kind
            byte) in ``data``, both 0 when the feature is absent.
        var_cnt: int64 ``[V, N]``: its number of values.
    """

    u32: np.ndarray
    i64: np.ndarray
    spos: np.ndarray
    slen: np.ndarray
    var_pos: np.ndarray
    var_end: np.ndarray
    var_cnt: np.ndarray


@numba.njit(**HELPER, _nrt=False)
def key_hash(data, lo, hi):
    """FNV-1a hash of ``data[lo:hi]`` (uint64)."""
    h = _FNV_OFFSET
    for p in range(lo, hi):
        h = (h ^ np.uint64(data[p])) * _FNV_PRIME
    return h


def key_hash_bytes(key: bytes) -> int:
    """:func:`key_hash` of ``key``, in Python (building a layout compiles nothing).

    >>> key_hash_bytes(b"a") == 0xAF63DC4C8601EC8C
    True
    """
    h = int(_FNV_OFFSET)
    for b in key:
        h = ((h ^ b) * int(_FNV_PRIME)) & 0xFFFFFFFFFFFFFFFF
    return h


@numba.njit(**HELPER, _nrt=False)
def _varint(data, p, lim):
    """The varint at ``data[p:lim]``: ``(value as uint64, next position)``, or
    ``(0, -1)`` when it is truncated or longer than 10 bytes."""
    result = np.uint64(0)
    shift = np.uint64(0)
    for _ in range(10):
        if p >= lim:
            return np.uint64(0), -1
        b = data[p]
        p += 1
        result |= (np.uint64(b) & _U7) << shift
        if b < 128:
            return result, p
        shift += np.uint64(7)
    return np.uint64(0), -1


@numba.njit(**HELPER, _nrt=False)
def _varint32(data, p, lim):
    """A varint's low 32 bits as int64 (protobuf ``ReadVarint32``), or ``(0, -1)``."""
    v, p = _varint(data, p, lim)
    return np.int64(v & _U32), p


@numba.njit(**HELPER, _nrt=False)
def _le32(data, p):
    return (np.uint32(data[p]) | (np.uint32(data[p + 1]) << np.uint32(8))
            | (np.uint32(data[p + 2]) << np.uint32(16)) | (np.uint32(data[p + 3]) << np.uint32(24)))


@numba.njit(**HELPER, _nrt=False)
def parse_list(data, p, e, kind, cap, write, u32, i64, spos, slen, base):
    """Decode the list of a Feature whose kind byte was at ``p - 1`` and that ends at ``e``.

    Counts every value; with ``write`` stores the first ``cap`` values (all when
    ``cap < 0``) at ``base`` of ``u32`` (floats as bits), ``i64`` or ``spos``/``slen``
    (string start in ``data``, length). A string list holding more than ``cap >= 0``
    values is an error, as in TF. Returns the number of values, or -1 when malformed.
    """
    ln, p = _varint32(data, p, e)
    if p < 0:
        return -1
    lim = p + ln if ln < e - p else e
    n = 0
    if kind == KIND_BYTES:
        while p < lim:
            if data[p] != 0x0A:
                return -1
            bl, p = _varint32(data, p + 1, lim)
            if p < 0 or (cap >= 0 and n >= cap) or bl > lim - p:
                return -1
            if write:
                spos[base + n] = p
                slen[base + n] = bl
            p += bl
            n += 1
        return n
    if p == lim:
        return 0
    tag = data[p]
    if kind == KIND_FLOAT:
        if tag == 0x0A:                                  # packed: one run
            pl, p = _varint32(data, p + 1, lim)
            if p < 0:
                return -1
            plim = p + pl if pl < lim - p else lim
            n = pl // 4
            take = n if cap < 0 or n < cap else cap
            if take * 4 > plim - p:
                return -1
            if write:
                for j in range(take):
                    u32[base + j] = _le32(data, p + 4 * j)
            return n
        if tag == 0x0D:                                  # unpacked
            while p < lim:
                if data[p] != 0x0D or lim - p < 5:
                    return -1
                if write and (cap < 0 or n < cap):
                    u32[base + n] = _le32(data, p + 1)
                p += 5
                n += 1
            return n
        return -1
    if tag == 0x0A:                                      # packed int64: one run
        pl, p = _varint32(data, p + 1, lim)
        if p < 0:
            return -1
        plim = p + pl if pl < lim - p else lim
        while p < plim:
            v, p = _varint(data, p, plim)
            if p < 0:
                return -1
            if write and (cap < 0 or n < cap):
                i64[base + n] = np.int64(v)
            n += 1
        return n
    if tag == 0x08:                                      # unpacked int64
        while p < lim:
            if data[p] != 0x08:
                return -1
            v, p = _varint(data, p + 1, lim)
            if p < 0:
                return -1
            if write and (cap < 0 or n < cap):
                i64[base + n] = np.int64(v)
            n += 1
        return n
    return -1


@numba.njit(**HELPER, _nrt=False)
def _lookup(data, ks, ke, table, key_data, key_off):
    """The feature number of key ``data[ks:ke]`` (the layout's hash table and keys), or
    -1. (It takes the three arrays, not the layout: a shorter compile.)"""
    mask = np.uint64(len(table) - 1)
    slot = key_hash(data, ks, ke) & mask
    n = ke - ks
    while True:
        f = table[np.int64(slot)]
        if f < 0:
            return -1
        a = key_off[f]
        if key_off[f + 1] - a == n:
            same = True
            for q in range(n):
                if key_data[a + q] != data[ks + q]:
                    same = False
                    break
            if same:
                return f
        slot = (slot + np.uint64(1)) & mask


@numba.njit(nogil=True, cache=True, _nrt=False, no_cfunc_wrapper=True)
def parse_record(data, lo, hi, row, nrows, layout, out, single, act_s, act_e, act_i):
    """Parse the Example ``data[lo:hi]`` as record ``row`` of ``nrows``.

    FixedLen values (or defaults) go to ``out``'s regions, VarLen list positions and
    counts to ``out.var_*[:, row]``. ``act_s``, ``act_e``, ``act_i`` are int64 scratch
    arrays of ``F`` entries. ``single`` selects ``parse_single_example``'s rules (an empty
    Feature is absent for VarLen features too). Returns ``(code, feature, extra)``;
    ``code`` is OK or one of the ``E_*`` errors (TF's precedence: a malformed Example
    first, then the error of the latest map entry, then the first missing feature).
    """
    kinds = layout.kind
    counts = layout.count
    nf = len(kinds)
    for f in range(nf):
        act_i[f] = -1
    bad_entry = -1            # latest entry whose Feature has an unknown kind byte
    bad_f = -1
    entry = 0
    pos = lo
    while pos < hi:
        if data[pos] == 0x0A:                            # Example.features
            ln, pos = _varint32(data, pos + 1, hi)
            if pos < 0:
                return E_PARSE, -1, 0
            flim = pos + ln if ln < hi - pos else hi
            while pos < flim:
                if data[pos] != 0x0A:                    # Features.feature (map entry)
                    return E_PARSE, -1, 0
                ln, pos = _varint32(data, pos + 1, flim)
                if pos < 0:
                    return E_PARSE, -1, 0
                elim = pos + ln if ln < flim - pos else flim
                ks = np.int64(0)         # np.int64(): no literal-typed specializations
                ke = np.int64(0)
                fs = np.int64(0)
                fe = np.int64(0)
                for _ in range(2):                       # exactly two fields
                    if pos >= elim:
                        return E_PARSE, -1, 0
                    tag = np.int64(data[pos])
                    if tag < 128:
                        pos += 1
                    else:
                        tag, pos = _varint32(data, pos, elim)
                        if pos < 0:
                            return E_PARSE, -1, 0
                    if tag != 10 and tag != 18:
                        return E_PARSE, -1, 0
                    sl, pos = _varint32(data, pos, elim)
                    if pos < 0 or sl > elim - pos:
                        return E_PARSE, -1, 0
                    if tag == 10:
                        ks = pos
                        ke = pos + sl
                    else:
                        fs = pos
                        fe = pos + sl
                    pos += sl
                if pos != elim:
                    return E_PARSE, -1, 0
                f = _lookup(data, ks, ke, layout.table, layout.key_data, layout.key_off)
                if f >= 0:
                    if fe > fs:
                        b = data[fs]
                        if b == 0x0A or b == 0x12 or b == 0x1A:
                            act_s[f] = fs
                            act_e[f] = fe
                            act_i[f] = entry
                        else:
                            bad_entry = entry
                            bad_f = f
                    elif counts[f] < 0 and not single:
                        act_s[f] = fs
                        act_e[f] = fs
                        act_i[f] = entry
                entry += 1
            pos = flim
        else:                                            # unknown field: skip it
            tag = np.int64(data[pos])
            if tag < 128:
                pos += 1
            else:
                tag, pos = _varint32(data, pos, hi)
                if pos < 0:
                    return E_PARSE, -1, 0
            wire = tag & 7
            if wire == 0:
                _, pos = _varint32(data, pos, hi)
                if pos < 0:
                    return E_PARSE, -1, 0
            elif wire == 1:
                if hi - pos < 8:
                    return E_PARSE, -1, 0
                pos += 8
            elif wire == 2:
                ln, pos = _varint32(data, pos, hi)
                if pos < 0:
                    return E_PARSE, -1, 0
                if ln < 0x80000000:      # protobuf's Skip(int) ignores negative counts
                    pos = pos + ln if ln < hi - pos else hi
            elif wire == 5:
                if hi - pos < 4:
                    return E_PARSE, -1, 0
                pos += 4
            else:
                return E_PARSE, -1, 0

    # The latest map entry's error wins (TF walks the entries backwards).
    err_entry = bad_entry
    err_code = E_DTYPE if bad_entry >= 0 else OK
    err_f = bad_f
    err_x = 0
    u32 = out.u32
    i64 = out.i64
    spos = out.spos
    slen = out.slen
    for f in range(nf):
        if act_i[f] < 0:
            continue
        fs = act_s[f]
        fe = act_e[f]
        cnt = counts[f]
        if fe == fs:                                     # batch VarLen, empty Feature
            v = layout.col[f]
            out.var_pos[v, row] = fs
            out.var_end[v, row] = fs
            out.var_cnt[v, row] = 0
            continue
        k = kinds[f]
        actual = (np.int64(data[fs]) - 10) >> 3
        if actual != k:
            if act_i[f] > err_entry:
                err_entry = act_i[f]
                err_code = E_TYPE
                err_f = f
                err_x = actual
            continue
        if cnt < 0:
            n = parse_list(data, fs + 1, fe, k, np.int64(-1), np.bool_(False), u32, i64, spos,
                           slen, np.int64(0))
            v = layout.col[f]
            out.var_pos[v, row] = fs + 1
            out.var_end[v, row] = fe
            out.var_cnt[v, row] = n
            if n < 0 and act_i[f] > err_entry:
                err_entry = act_i[f]
                err_code = E_LIST
                err_f = f
        else:
            base = nrows * layout.col[f] + row * cnt
            n = parse_list(data, fs + 1, fe, k, cnt, np.bool_(True), u32, i64, spos, slen, base)
            if n != cnt and act_i[f] > err_entry:
                err_entry = act_i[f]
                err_code = E_LIST if n < 0 else E_COUNT
                err_f = f
                err_x = n
    if err_code != OK:
        return err_code, err_f, err_x

    for f in range(nf):                                  # absent features
        if act_i[f] >= 0:
            continue
        cnt = counts[f]
        if cnt < 0:
            v = layout.col[f]
            out.var_pos[v, row] = 0
            out.var_end[v, row] = 0
            out.var_cnt[v, row] = 0
            continue
        d = layout.default[f]
        if d < 0:
            return E_MISSING, f, 0
        base = nrows * layout.col[f] + row * cnt
        k = kinds[f]
        for q in range(cnt):
            if k == KIND_FLOAT:
                u32[base + q] = layout.def_u32[d + q]
            elif k == KIND_INT64:
                i64[base + q] = layout.def_i64[d + q]
            else:
                spos[base + q] = -1 - (d + q)
                slen[base + q] = 0
    return OK, -1, 0


@numba.njit(nogil=True, cache=True, no_cfunc_wrapper=True)
def parse_range(data, offsets, lo, hi, layout, out, single):
    """Parse records ``lo..hi-1`` (record ``i`` is ``data[offsets[i]:offsets[i + 1]]``)
    into ``out`` (sized for ``len(offsets) - 1`` records). Stops at the first failing
    record: returns ``(row, code, feature, extra)``, ``row = -1`` when all parsed."""
    nrows = len(offsets) - 1
    nf = len(layout.kind)
    act_s = np.empty(nf, np.int64)
    act_e = np.empty(nf, np.int64)
    act_i = np.empty(nf, np.int64)
    for i in range(lo, hi):
        code, f, x = parse_record(data, offsets[i], offsets[i + 1], i, nrows, layout, out,
                                  single, act_s, act_e, act_i)
        if code != OK:
            return i, code, f, x
    return -1, OK, -1, 0


@tiered(nogil=True, cache=True, no_cfunc_wrapper=True)
def parse_parallel(data, offsets, layout, out, single, nchunks):
    """:func:`parse_range` over all records in ``nchunks`` parallel chunks; reports the
    lowest failing record, as a serial parse would."""
    nrows = len(offsets) - 1
    rows = np.full(nchunks, -1, np.int64)
    codes = np.zeros(nchunks, np.int64)
    feats = np.zeros(nchunks, np.int64)
    extras = np.zeros(nchunks, np.int64)
    for c in prange(nchunks):
        r, code, f, x = parse_range(data, offsets, c * nrows // nchunks,
                                    (c + 1) * nrows // nchunks, layout, out, single)
        rows[c] = r
        codes[c] = code
        feats[c] = f
        extras[c] = x
    for c in range(nchunks):
        if rows[c] >= 0:
            return rows[c], codes[c], feats[c], extras[c]
    return -1, OK, -1, 0


@numba.njit(nogil=True, cache=True, _nrt=False, no_cfunc_wrapper=True)
def fill_varlen_range(data, lo, hi, layout, out, vstart, vu32, vi64, vspos, vslen):
    """Pass 2: write the VarLen values of records ``lo..hi-1``; feature slot ``v`` of
    record ``i`` starts at ``vstart[v, i]`` of its kind's value array."""
    kinds = layout.kind
    for f in range(len(kinds)):
        if layout.count[f] >= 0:
            continue
        v = layout.col[f]
        k = kinds[f]
        for i in range(lo, hi):
            if out.var_cnt[v, i] > 0:
                parse_list(data, out.var_pos[v, i], out.var_end[v, i], k, np.int64(-1),
                           np.bool_(True), vu32, vi64, vspos, vslen, vstart[v, i])


@tiered(nogil=True, cache=True, no_cfunc_wrapper=True)
def fill_varlen_parallel(data, layout, out, vstart, vu32, vi64, vspos, vslen, nchunks):
    """:func:`fill_varlen_range` over all records in ``nchunks`` parallel chunks."""
    nrows = out.var_cnt.shape[1]
    for c in prange(nchunks):
        fill_varlen_range(data, c * nrows // nchunks, (c + 1) * nrows // nchunks, layout,
                          out, vstart, vu32, vi64, vspos, vslen)


# Tier 0 (nbdata/kernels/python_tier.py): a first pipeline's first records are parsed by
# the Python source while Numba compiles the parser. Work: bytes of the records.
parse_range_cold = ColdStart(parse_range, first_work=64 << 10)
fill_varlen_range_cold = ColdStart(fill_varlen_range, first_work=64 << 10)
