"""Checks of the fields of a restored iterator state, against the pipeline.

A state that passed its checksums (``nbdata/checkpoint.py``) and the pipeline's
identity was still written by someone: a forged position, count or buffer would make
an op loop forever, read outside its rows or hand out values that are not the
dataset's. So every op reads its saved fields through these helpers, which check the
kind and the range of each (positions within the rows there are, counters within the
op's count, buffers holding rows of the op's element) and raise
:class:`StateFieldError` naming the field. ``ExecContext.open_chunks`` turns that into
``InvalidArgumentError`` naming the op: "restore: the state of take does not fit this
pipeline: its field 'left' is -5, outside [0, 3]".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nbdata.chunks import Chunk, PackedRows, RowList, StringColumn
from nbdata.errors import InvalidArgumentError

#: The largest position or counter a state may hold where the pipeline gives no bound.
MAX_POSITION = 1 << 62
#: The most rows a state may say were already taken from one chunk (a chunk never holds
#: more): skipping them again on restore must stay cheap.
MAX_CHUNK_SKIP = 1 << 26
#: Iteration numbers and the epochs random ops key their draws on are 64-bit words.
MAX_EPOCH = (1 << 64) - 1

_MISSING = object()


class StateFieldError(InvalidArgumentError):
    """A field of a saved state that does not fit the op restoring it (the op is named
    by whoever opens the op: ``ExecContext.open_chunks``)."""

    def __init__(self, field: str, value: Any, why: str):
        self.field = field
        super().__init__(f"its field {field!r} {_show(value)}: {why}")


def _show(value: Any) -> str:
    if value is _MISSING:
        return "is missing"
    text = repr(value) if not isinstance(value, (dict, list, tuple, Chunk)) else type(value).__name__
    return f"is {text if len(text) <= 40 else text[:37] + '...'}"


def record(state: Any, *keys: str, field: str = "state") -> dict:
    """``state`` as a dict holding ``keys``."""
    if not isinstance(state, dict):
        raise StateFieldError(field, state, "expected a record of fields")
    for key in keys:
        if key not in state:
            raise StateFieldError(key, _MISSING, "a restore reads it")
    return state


def _get(state, key, default):
    record(state)
    value = state.get(key, default)
    if value is _MISSING:
        raise StateFieldError(key, _MISSING, "a restore reads it")
    return value


def is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def integer(state: Any, key: str, lo: int | None = 0, hi: int | None = MAX_POSITION,
            default: Any = _MISSING) -> int:
    """The integer field ``key``, within ``[lo, hi]`` (a bound of None: none)."""
    value = _get(state, key, default)
    return check_int(value, key, lo, hi)


def check_int(value: Any, field: str, lo: int | None = 0, hi: int | None = MAX_POSITION) -> int:
    if not is_int(value):
        raise StateFieldError(field, value, "expected an integer")
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise StateFieldError(field, value, f"outside [{lo}, {hi}]")
    return value


def bound(n: int) -> int:
    """The highest position of rows whose count is ``n`` (a cardinality: negative when
    infinite or unknown, then no bound but :data:`MAX_POSITION`)."""
    return n if n >= 0 else MAX_POSITION


#: Ops that yield at most as many rows as their one input.
_AT_MOST_INPUT = frozenset(["filter", "map", "random_map", "take", "take_while", "skip",
                            "shard", "prefetch", "cache", "ignore_errors", "select", "shuffle",
                            "global_shuffle", "enumerate", "unique", "assert_cardinality"])


def most_rows(node) -> int:
    """The most rows ``node`` can yield (:data:`MAX_POSITION` where nothing bounds
    them): its cardinality when known, else, for an op that yields at most as many rows
    as its input (a filter, a take of ``count``), its input's bound."""
    n = node.cardinality()
    if n >= 0:
        return n
    inputs = getattr(node, "inputs", ())
    if n != -2 or len(inputs) != 1 or getattr(node, "op", None) not in _AT_MOST_INPUT:
        return MAX_POSITION   # infinite (-1), or unknown without a bound
    most = most_rows(inputs[0])
    count = getattr(node, "count", None)
    if node.op == "take" and is_int(count) and count >= 0:
        most = min(most, int(count))
    return most


def flag(state: Any, key: str, default: Any = _MISSING) -> bool:
    value = _get(state, key, default)
    if not isinstance(value, (bool, np.bool_)):
        raise StateFieldError(key, value, "expected True or False")
    return bool(value)


def nested(state: Any, key: str, none: bool = True, default: Any = _MISSING) -> dict | None:
    """The state of an input (a record, or None when ``none``)."""
    value = _get(state, key, default)
    if value is None and none:
        return None
    if not isinstance(value, dict):
        raise StateFieldError(key, value, "expected the state of an input")
    return value


def choice(state: Any, key: str, options: tuple, default: Any = _MISSING):
    value = _get(state, key, default)
    if not any(value is o or (type(value) is type(o) and value == o) for o in options):
        raise StateFieldError(key, value, f"expected one of {list(options)}")
    return value


def int_array(value: Any, field: str, lo: int, hi: int, none: bool = False):
    """A 1-d integer array (row numbers, counters) with every entry in ``[lo, hi]``."""
    if value is None and none:
        return None
    if not isinstance(value, np.ndarray) or value.ndim != 1 or value.dtype.kind not in "iu":
        raise StateFieldError(field, value, "expected a 1-d array of integers")
    if len(value) and (int(value.min()) < lo or int(value.max()) > hi):
        raise StateFieldError(field, value, f"holds entries outside [{lo}, {hi}]")
    return value.astype(np.int64, copy=False)


# ----------------------------------------------------------------- rows
def _leaves(spec) -> list:
    from nbdata.spec import flatten
    return flatten(spec)


def _column_fits(col: Any, n: int, leaf) -> str | None:
    """Why ``col`` cannot be a column of ``n`` rows of ``leaf`` (None: it can)."""
    from nbdata.spec import TensorSpec, string
    if isinstance(col, StringColumn):
        if isinstance(leaf, TensorSpec) and leaf.dtype is not string:
            return "strings"
        offsets, data = col.offsets, col.data
        if (not isinstance(offsets, np.ndarray) or not isinstance(data, np.ndarray)
                or offsets.ndim != 1 or offsets.dtype.kind not in "iu" or len(offsets) != n + 1
                or data.ndim != 1 or data.dtype != np.uint8):
            return "a string column of another layout"
        if n and (int(offsets[0]) < 0 or int(offsets[-1]) > len(data)
                  or bool(np.any(np.diff(offsets.astype(np.int64)) < 0))):
            return "a string column whose offsets run outside its bytes"
        return None
    if isinstance(col, PackedRows):
        return _packed_fits(col, n, leaf)
    if isinstance(col, RowList):
        return None if len(col) == n else f"{len(col)} rows"
    if not isinstance(col, np.ndarray):
        return f"a {type(col).__name__}"
    if col.ndim < 1 or len(col) != n:
        return f"{col.shape[0] if col.ndim else 0} rows"
    if isinstance(leaf, TensorSpec) and leaf.dtype is string and col.dtype.kind not in "OSU":
        return f"rows of dtype {col.dtype}"
    if isinstance(leaf, TensorSpec) and leaf.dtype is not string and col.dtype != object:
        if col.dtype != leaf.dtype:
            return f"rows of dtype {col.dtype}"
        shape = leaf.shape
        if shape is not None and (col.ndim - 1 != len(shape) or any(
                d is not None and d != e for d, e in zip(shape, col.shape[1:]))):
            return f"rows of shape {list(col.shape[1:])}"
    return None


def _packed_fits(col, n: int, leaf) -> str | None:
    """Why packed rows cannot be ``n`` rows of ``leaf``: kernels read their buffer at
    the offsets without bounds checks, so offsets and shapes must agree with it."""
    from nbdata.spec import TensorSpec
    packed = getattr(col, "packed", None)
    if not isinstance(packed, tuple) or len(packed) != 3 or \
            not all(isinstance(a, np.ndarray) for a in packed):
        return "packed rows of another layout"
    data, offsets, shapes = packed
    if data.ndim != 1 or offsets.ndim != 1 or offsets.dtype != np.int64 or len(offsets) != n + 1 \
            or shapes.ndim != 2 or shapes.dtype != np.int64 or len(shapes) != n:
        return "packed rows of another layout"
    if isinstance(leaf, TensorSpec) and leaf.shape is not None and (
            shapes.shape[1] != len(leaf.shape) or data.dtype != leaf.dtype):
        return f"packed rows of dtype {data.dtype} and rank {shapes.shape[1]}"
    if n and (int(offsets[0]) < 0 or int(offsets[-1]) > len(data) or (shapes < 0).any()
              or not np.array_equal(np.diff(offsets), np.prod(shapes, axis=1))):
        return "packed rows whose offsets do not match their shapes and buffer"
    return None


def rows(value: Any, spec, field: str, none: bool = False) -> Chunk | None:
    """A chunk of rows of elements of ``spec`` (a partial batch, rows held back)."""
    if value is None and none:
        return None
    if not isinstance(value, Chunk) or not is_int(value.n) or not isinstance(value.columns, list):
        raise StateFieldError(field, value, "expected rows of this op's elements")
    leaves = _leaves(spec)
    if value.n < 0 or value.n > MAX_POSITION or len(value.columns) != len(leaves):
        raise StateFieldError(field, value, f"expected rows of {len(leaves)} components")
    for k, (col, leaf) in enumerate(zip(value.columns, leaves)):
        why = _column_fits(col, int(value.n), leaf)
        if why is not None:
            raise StateFieldError(field, value, f"its component {k} holds {why}, this "
                                                f"op's hold {value.n} rows of {leaf}")
    return value


def row_pieces(value: Any, spec, field: str) -> list:
    """A list of chunks of rows of ``spec``."""
    if not isinstance(value, list):
        raise StateFieldError(field, value, "expected a list of rows")
    return [rows(v, spec, f"{field}[{j}]") for j, v in enumerate(value)]


def int_pieces(value: Any, field: str, lo: int, hi: int) -> list:
    """A list of 1-d integer arrays (row positions) with every entry in ``[lo, hi]``."""
    if not isinstance(value, list):
        raise StateFieldError(field, value, "expected a list of row positions")
    return [int_array(v, f"{field}[{j}]", lo, hi) for j, v in enumerate(value)]
