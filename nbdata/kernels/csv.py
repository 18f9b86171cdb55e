"""The CSV kernel of ``nd.io.decode_csv``: splits records into fields (RFC 4180 quoting,
as TensorFlow's DecodeCSV) and parses numbers, one row per iteration of a parallel
loop, with a status per row so that the lowest failing row is reported whatever the
thread count.

Per output column ``j`` the kernel writes ``ints[j, r]`` (int32/int64), ``floats[j, r]``
(float64), ``floats32[j, r]``, or for strings the field's ``starts[j, r]``/``ends[j, r]``
in ``data`` and ``escaped[j, r]`` (a quoted field with doubled quotes to undo).
``state[j, r]`` is 0 (parsed), 1 (take the default: empty or ``na_value``) or 2 (a
number the fast parser left to Python: long mantissas, huge exponents, hex, inf/nan).
"""

from __future__ import annotations

import numba
import numpy as np

from nbdata.kernels.tiers import tiered

KIND_INT32, KIND_INT64, KIND_FLOAT32, KIND_FLOAT64, KIND_STRING = 0, 1, 2, 3, 4

OK = 0
E_COUNT = 1          # wrong number of fields (extra = fields found)
E_REQUIRED = 2       # an empty required field
E_NUMBER = 3         # not a number of the column's type
E_UNQUOTED = 4       # a quote or CR/LF inside an unquoted field
E_QUOTE_ESCAPE = 5   # a quote inside a quoted field not doubled
E_QUOTE_END = 6      # a quoted field without its closing quote

# The number helpers are compiled once each and called from the kernel's two tiers, where
# LLVM inlines them (forceinline); they need no Python or C entry point. (Numba's own
# inlining, inline="always", copies their IR into every caller instead: a serial kernel
# then took twice as long to compile, the parallel one four times.)
_helper = numba.njit(nogil=True, cache=True, forceinline=True, no_cpython_wrapper=True,
                     no_cfunc_wrapper=True)

_POW10 = np.array([10.0 ** k for k in range(23)], np.float64)
_POW10_32 = np.array([10.0 ** k for k in range(11)], np.float32)


@_helper
def _is_space(c):
    return c == 32 or c == 9 or c == 11 or c == 12


@_helper
def _parse_int(data, lo, hi, kind):
    """(ok, value) of a decimal integer with optional sign and surrounding blanks."""
    while lo < hi and _is_space(data[lo]):
        lo += 1
    while hi > lo and _is_space(data[hi - 1]):
        hi -= 1
    if lo >= hi:
        return False, 0
    neg = False
    if data[lo] == 45 or data[lo] == 43:
        neg = data[lo] == 45
        lo += 1
    if lo >= hi:
        return False, 0
    limit = np.uint64(2147483648) if kind == KIND_INT32 else np.uint64(9223372036854775808)
    if not neg:
        limit -= np.uint64(1)
    value = np.uint64(0)
    for i in range(lo, hi):
        c = data[i]
        if c < 48 or c > 57:
            return False, 0
        d = np.uint64(c - 48)
        if value > (limit - d) // np.uint64(10):
            return False, 0
        value = value * np.uint64(10) + d
    if neg:
        return True, -np.int64(value - np.uint64(1)) - 1 if value > np.uint64(0) else 0
    return True, np.int64(value)


@_helper
def _parse_float(data, lo, hi, single):
    """(status, value): status 0 parsed exactly, 2 leave to Python, 3 not a number.
    Decimal numbers with at most 19 significant digits and a small exponent are
    computed exactly (one correctly rounded multiply or divide, in float32 for
    float32 columns); everything else is left to Python's correctly rounded parser."""
    while lo < hi and _is_space(data[lo]):
        lo += 1
    while hi > lo and _is_space(data[hi - 1]):
        hi -= 1
    if lo >= hi:
        return 3, 0.0
    i = lo
    neg = False
    if data[i] == 45 or data[i] == 43:
        neg = data[i] == 45
        i += 1
    mant = np.uint64(0)
    digits = 0
    exp10 = 0
    seen = 0
    while i < hi and 48 <= data[i] <= 57:
        if digits < 19:
            if mant != 0 or data[i] != 48:
                mant = mant * np.uint64(10) + np.uint64(data[i] - 48)
                digits += 1
        else:
            exp10 += 1
        seen += 1
        i += 1
    if i < hi and data[i] == 46:
        i += 1
        while i < hi and 48 <= data[i] <= 57:
            if digits < 19:
                if mant != 0 or data[i] != 48:
                    mant = mant * np.uint64(10) + np.uint64(data[i] - 48)
                    digits += 1
                exp10 -= 1
            seen += 1
            i += 1
    if seen == 0:
        return 2, 0.0     # inf, nan, hex or garbage: Python decides
    if i < hi and (data[i] == 101 or data[i] == 69):
        i += 1
        eneg = False
        if i < hi and (data[i] == 45 or data[i] == 43):
            eneg = data[i] == 45
            i += 1
        if i >= hi:
            return 3, 0.0
        e = 0
        while i < hi and 48 <= data[i] <= 57:
            if e < 100000:
                e = e * 10 + (data[i] - 48)
            i += 1
        exp10 += -e if eneg else e
    if i != hi:
        return 2, 0.0     # trailing characters (hex floats, "1.5x"): Python decides
    return _float_value(mant, exp10, neg, single)


@_helper
def _float_value(mant, exp10, neg, single):
    """(status, value) of ``±mant * 10**exp10``: status 0 exact, 2 leave to Python."""
    if mant == 0:
        return 0, -0.0 if neg else 0.0
    if single:
        if mant < np.uint64(1 << 24) and -10 <= exp10 <= 10:
            m = np.float32(mant)
            v = m * _POW10_32[exp10] if exp10 >= 0 else m / _POW10_32[-exp10]
            return 0, np.float64(-v if neg else v)
        if mant < np.uint64(1 << 53) and -22 <= exp10 <= 22:
            # Correctly rounded in float64, then to float32: the same as rounding the
            # decimal straight to float32 unless the float64 value sits exactly halfway
            # between two float32s (then the first rounding may have made the tie).
            m = np.float64(mant)
            v = m * _POW10[exp10] if exp10 >= 0 else m / _POW10[-exp10]
            g = np.float64(np.float32(v))
            if g != v:
                # A tie has the other float32 neighbour at the mirror image of g; that
                # sum is exact whenever it is a float32, so no tie goes unnoticed.
                mirror = v + (v - g)
                if np.float64(np.float32(mirror)) == mirror:
                    return 2, 0.0
            return 0, -v if neg else v
        return 2, 0.0
    if mant < np.uint64(1 << 53) and -22 <= exp10 <= 22:
        m = np.float64(mant)
        v = m * _POW10[exp10] if exp10 >= 0 else m / _POW10[-exp10]
        return 0, -v if neg else v
    return 2, 0.0


def _fast_row(data, lo, hi, r, delim, kinds, ints, floats, floats32):
    """Row ``r`` in one pass when it is plain numbers, one per column, between single
    delimiters: optional sign, digits, for float columns an optional fraction, and
    nothing else (no blanks, quotes, exponents or empty fields). Writes the values and
    returns True; returns False, having written nothing the general path does not
    overwrite, for any other row. Only for :func:`fast_rows_apply` configurations."""
    nout = len(kinds)
    i = lo
    for j in range(nout):
        neg = False
        if i < hi and (data[i] == 45 or data[i] == 43):
            neg = data[i] == 45
            i += 1
        kind = kinds[j]
        mant = np.uint64(0)
        digits = 0     # significant digits (leading zeros skipped), as _parse_float
        exp10 = 0
        seen = 0
        while i < hi:
            d = np.uint64(data[i]) - np.uint64(48)   # wraps for bytes below '0'
            if d > np.uint64(9):
                break
            if digits < 19:
                mant = mant * np.uint64(10) + d
                digits += mant != 0
            else:
                exp10 += 1
            seen += 1
            i += 1
        if kind == KIND_INT32 or kind == KIND_INT64:
            if seen == 0 or digits >= 19:
                return False
            if kind == KIND_INT32 and mant > (np.uint64(2147483648) if neg else
                                              np.uint64(2147483647)):
                return False
            ints[j, r] = -np.int64(mant) if neg else np.int64(mant)
        else:
            if i < hi and data[i] == 46:
                i += 1
                while i < hi:
                    d = np.uint64(data[i]) - np.uint64(48)
                    if d > np.uint64(9):
                        break
                    if digits < 19:
                        mant = mant * np.uint64(10) + d
                        digits += mant != 0
                        exp10 -= 1
                    seen += 1
                    i += 1
            if seen == 0:
                return False
            st, v = _float_value(mant, exp10, neg, kind == KIND_FLOAT32)
            if st != 0:
                return False
            if kind == KIND_FLOAT32:
                floats32[j, r] = np.float32(v)
            else:
                floats[j, r] = v
        if j + 1 < nout:
            if i >= hi or data[i] != delim:
                return False
            i += 1
        elif i != hi:
            return False
    return True


def fast_rows_apply(delim: int, ncols: int, kinds, use_na: bool) -> bool:
    """Whether :func:`_fast_row` may take rows first: every column a number, fields and
    columns one to one (no ``select_cols``/``exclude_cols``), no ``na_value`` (a field
    equal to it is a default, not a number) and a delimiter no number contains."""
    return (not use_na and ncols == len(kinds) and ncols > 0
            and all(int(kd) != KIND_STRING for kd in kinds)
            and bytes([delim]) not in b"0123456789+-.eE \t\v\f\r\n\"")


@_helper
def _keep_field(select, field, r, s, e, esc, fstart, fend, escaped):
    """Records field ``field`` of row ``r`` (content ``s:e``) when a column selects it;
    returns 1 if it did."""
    j = select[field] if field < len(select) else -1
    if j < 0:
        return 0
    fstart[j] = s
    fend[j] = e
    escaped[j, r] = esc
    return 1


def _row(data, lo, hi, r, delim, quote, ncols, select, kinds, has_default, na, use_na,
         ints, floats, floats32, starts, ends, escaped, state, fstart, fend):
    """Splits and parses row ``r``; returns (code, column, extra)."""
    # Pass 1: field boundaries (content without quotes) of the columns wanted.
    nfields = np.int64(0)        # np.int64(): no literal-typed specializations
    nsel = np.int64(0)
    pos = lo
    if hi > lo:
        while True:
            esc = False
            if quote and pos < hi and data[pos] == 34:
                s = pos + 1
                p = s
                closed = False
                while p < hi:
                    if data[p] == 34:
                        if p + 1 < hi and data[p + 1] == 34:
                            esc = True
                            p += 2
                            continue
                        closed = True
                        break
                    p += 1
                if not closed:
                    return E_QUOTE_END, nfields, 0
                e = p
                p += 1
                if p < hi and data[p] != delim:
                    return E_QUOTE_ESCAPE, nfields, 0
            else:
                s = pos
                p = pos
                while p < hi and data[p] != delim:
                    c = data[p]
                    if (quote and c == 34) or c == 13 or c == 10:
                        return E_UNQUOTED, nfields, 0
                    p += 1
                e = p
            nsel += _keep_field(select, nfields, r, s, e, esc, fstart, fend, escaped)
            nfields += 1
            if p >= hi:
                break
            pos = p + 1  # past the delimiter; a trailing delimiter makes an empty field
            if pos == hi:
                nsel += _keep_field(select, nfields, r, hi, hi, np.bool_(False), fstart, fend,
                                    escaped)
                nfields += 1
                break
    nout = len(kinds)
    if ncols >= 0:
        if nfields != ncols:
            return E_COUNT, 0, nfields
    elif ncols < -1 and nfields > -2 - ncols:
        # (exclude_cols: a record may not reach field -2 - ncols, the first one after the
        # selected fields that is not excluded)
        return E_COUNT, 0, nfields
    elif nsel < nout:
        return E_COUNT, 0, nsel
    # Pass 2: values.
    for j in range(nout):
        s = fstart[j]
        e = fend[j]
        empty = s == e
        if not empty and use_na and e - s == len(na):
            same = True
            for k in range(e - s):
                if data[s + k] != na[k]:
                    same = False
                    break
            empty = same
        if empty:
            if not has_default[j]:
                return E_REQUIRED, j, 0
            state[j, r] = 1
            continue
        state[j, r] = 0
        kind = kinds[j]
        if kind == KIND_STRING:
            starts[j, r] = s
            ends[j, r] = e
        elif kind == KIND_INT32 or kind == KIND_INT64:
            ok, v = _parse_int(data, s, e, kind)
            if not ok:
                starts[j, r] = s
                ends[j, r] = e
                return E_NUMBER, j, 0
            ints[j, r] = v
        else:
            st, v = _parse_float(data, s, e, kind == KIND_FLOAT32)
            if st == 3:
                starts[j, r] = s
                ends[j, r] = e
                return E_NUMBER, j, 0
            if st == 2:
                starts[j, r] = s
                ends[j, r] = e
                state[j, r] = 2
            elif kind == KIND_FLOAT32:
                floats32[j, r] = np.float32(v)
            else:
                floats[j, r] = v
    return OK, 0, 0


# The kernel has the row function's IR inlined into its parallel loop, where Numba marks
# the arrays as not aliasing each other (a quarter faster than a call there).
_row_inlined = numba.njit(nogil=True, inline="always")(_row)
_fast_row_inlined = numba.njit(nogil=True, inline="always")(_fast_row)


@tiered(nogil=True, cache=True, no_cfunc_wrapper=True)
def decode_rows_parallel(data, offsets, n, delim, quote, ncols, select, kinds, has_default, na,
                         use_na, ints, floats, floats32, starts, ends, escaped, state, codes,
                         cols, extras, blocks):
    """Every row of ``data``/``offsets`` (``n`` rows) in ``blocks`` parallel blocks; per row
    its code, column and extra in ``codes``/``cols``/``extras``."""
    nout = len(kinds)
    size = (n + blocks - 1) // blocks
    for b in numba.prange(blocks):
        fstart = np.empty(nout, np.int64)
        fend = np.empty(nout, np.int64)
        for r in range(b * size, min(n, (b + 1) * size)):
            code, col, extra = _row_inlined(data, offsets[r], offsets[r + 1], r, delim, quote,
                                            ncols, select, kinds, has_default, na, use_na, ints,
                                            floats, floats32, starts, ends, escaped, state,
                                            fstart, fend)
            codes[r] = code
            cols[r] = col
            extras[r] = extra


@tiered(nogil=True, cache=True, no_cfunc_wrapper=True)
def decode_plain_rows_parallel(data, offsets, n, delim, quote, ncols, select, kinds,
                               has_default, na, use_na, ints, floats, floats32, starts, ends,
                               escaped, state, codes, cols, extras, blocks):
    """:func:`decode_rows_parallel` with each row tried by the one-pass parser first, for
    the configurations :func:`fast_rows_apply` accepts (``state`` and ``escaped`` start
    zeroed, which its rows keep): 1.8x the speed on plain numeric records. Its serial
    twin is never compiled: until this kernel takes over, ``decode_rows_parallel``'s
    twin runs the calls (``TieredKernel.call_or``), so a process's first CSV pipeline
    compiles no more than without it."""
    nout = len(kinds)
    size = (n + blocks - 1) // blocks
    for b in numba.prange(blocks):
        fstart = np.empty(nout, np.int64)
        fend = np.empty(nout, np.int64)
        for r in range(b * size, min(n, (b + 1) * size)):
            if _fast_row_inlined(data, offsets[r], offsets[r + 1], r, delim, kinds, ints,
                                 floats, floats32):
                codes[r] = OK
                continue
            code, col, extra = _row_inlined(data, offsets[r], offsets[r + 1], r, delim, quote,
                                            ncols, select, kinds, has_default, na, use_na, ints,
                                            floats, floats32, starts, ends, escaped, state,
                                            fstart, fend)
            codes[r] = code
            cols[r] = col
            extras[r] = extra

