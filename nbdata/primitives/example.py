"""``tf.train.Example`` protos without a protobuf dependency: :func:`encode_example`,
:func:`parse_single_example` and :func:`parse_example`, with ``tf.io``'s feature configs
:class:`FixedLenFeature` and :class:`VarLenFeature`.

Decoding runs in the Numba kernels of :mod:`nbdata.kernels.protobuf` and follows
TensorFlow's parser exactly: what it accepts, the values it returns, which error it
reports (lowest failing record of a batch; within a record the last map entry at fault,
then the first missing feature by key) and the text of its messages. Every error is an
:class:`~nbdata.errors.InvalidArgumentError`.

Results follow nbdata's leaf conventions: float32 / int64 arrays, object arrays of
``bytes`` for strings, NumPy scalars (or ``bytes``) for 0-d values, and
:class:`~nbdata.spec.SparseTensor` for :class:`VarLenFeature`.

>>> rec = encode_example({"x": [1.5, 2.0], "label": 3, "id": b"a"})
>>> out = parse_example([rec, rec], {"x": FixedLenFeature([2], "float32"),
...                                   "label": FixedLenFeature([], "int64"),
...                                   "id": VarLenFeature(bytes)})
>>> out["x"].tolist(), out["label"].tolist(), out["id"].dense_shape.tolist()
([[1.5, 2.0], [1.5, 2.0]], [3, 3], [2, 1])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numba
import numpy as np

from nbdata.chunks import RowList, StringColumn, read_only, string_column_of
from nbdata.kernels.threads import kernel_section
from nbdata.errors import InvalidArgumentError
from nbdata.kernels import protobuf as pb
from nbdata.spec import SparseTensor, SparseTensorSpec, TensorSpec, as_dtype, string
from nbdata.primitives.decoder import Decoder, RowError, for_records
from nbdata.primitives.table import define

__all__ = ["ExamplePlan", "FixedLenFeature", "VarLenFeature", "encode_example",
           "parse_example", "parse_single_example"]

_FLOAT32 = np.dtype(np.float32)
_INT64 = np.dtype(np.int64)
# Batches at least this large are parsed by the parallel kernels.
PARALLEL_MIN_ROWS = 4096
_ROWS_PER_CHUNK = 1024


# ------------------------------------------------------------------ configs

def _feature_dtype(dtype):
    """float32, int64 or string; a ``tf.DType`` is accepted through its name."""
    if hasattr(dtype, "as_numpy_dtype") and isinstance(getattr(dtype, "name", None), str):
        dtype = dtype.name
    if isinstance(dtype, str) and dtype in ("string", "bytes", "str"):
        return string
    try:
        return as_dtype(dtype)
    except TypeError:
        return dtype


class FixedLenFeature(NamedTuple("FixedLenFeature", [("shape", Any), ("dtype", Any),
                                                    ("default_value", Any)])):
    """A feature with a fixed number of values per Example (``tf.io.FixedLenFeature``).

    Args:
        shape: the value's shape (list or tuple of ints; ``[]`` for a scalar).
        dtype: float32, int64 or a string dtype (``nd.string``, ``bytes``, ``str``,
            ``object``, ``"string"``).
        default_value: used when the feature is absent; reshaped (not broadcast) to
            ``shape`` as TF does. ``None`` makes the feature required. A feature that
            is present with the wrong number of values is an error even with a default.

    >>> FixedLenFeature([], "int64", default_value=-1)
    FixedLenFeature(shape=[], dtype=dtype('int64'), default_value=-1)
    """

    __slots__ = ()

    def __new__(cls, shape, dtype, default_value=None):
        return super().__new__(cls, shape, _feature_dtype(dtype), default_value)


class VarLenFeature(NamedTuple("VarLenFeature", [("dtype", Any)])):
    """A feature with any number of values, parsed to a :class:`~nbdata.SparseTensor`
    (``tf.io.VarLenFeature``).

    >>> VarLenFeature(bytes)
    VarLenFeature(dtype=string)
    """

    __slots__ = ()

    def __new__(cls, dtype):
        return super().__new__(cls, _feature_dtype(dtype))


_KIND_OF = {_FLOAT32: pb.KIND_FLOAT, _INT64: pb.KIND_INT64}
_TF_NAME = {pb.KIND_BYTES: "string", pb.KIND_FLOAT: "float", pb.KIND_INT64: "int64"}
_LIST_NAME = {pb.KIND_BYTES: "bytes", pb.KIND_FLOAT: "float", pb.KIND_INT64: "int64"}


def _kind(dtype, attr: str) -> int:
    if dtype is string:
        return pb.KIND_BYTES
    try:
        return _KIND_OF[np.dtype(dtype)]
    except (TypeError, KeyError):
        name = getattr(dtype, "name", dtype)
        raise InvalidArgumentError(f"Value for attr '{attr}' of {name} is not in the list of "
                                   "allowed values: float, int64, string") from None


def _shape_of(key: str, feature) -> tuple:
    shape = feature.shape
    if shape is None:
        raise ValueError(f"Missing shape for feature {key}. Received feature={feature}.")
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    dims = tuple(shape)
    if dims and dims[0] is None:
        raise ValueError(f"First dimension of shape for feature {key} unknown. Consider using "
                         f"FixedLenSequenceFeature. Received feature={feature}.")
    if any(d is None for d in dims):
        raise ValueError(f"All dimensions of shape for feature {key} need to be known. "
                         f"Received feature={feature}.")
    dims = tuple(int(d) for d in dims)
    if any(d < 0 for d in dims):
        raise ValueError(f"Dimensions of shape for feature {key} must be >= 0, got {dims}.")
    return dims


def _default_array(key: str, value, kind: int, shape: tuple) -> np.ndarray:
    """``default_value`` converted to the feature's dtype and reshaped to ``shape``."""
    tf_name = _TF_NAME[kind]
    if kind == pb.KIND_BYTES:
        arr = np.asarray(value, dtype=object) if not isinstance(value, np.ndarray) else value
        if arr.dtype.kind not in "OSU":
            raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {tf_name}")
        flat = []
        for v in np.asarray(arr, dtype=object).reshape(-1):
            if isinstance(v, (bytes, np.bytes_)):
                flat.append(bytes(v))
            elif isinstance(v, str):
                flat.append(v.encode("utf-8"))
            else:
                raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {tf_name}")
        out = np.empty(len(flat), object)
        out[:] = flat
    else:
        arr = np.asarray(value)
        bad = arr.size and (arr.dtype.kind not in "biuf" or (
            kind == pb.KIND_INT64 and arr.dtype.kind == "f" and not isinstance(value, np.ndarray)
            and not isinstance(value, np.generic)))
        if bad:
            raise TypeError(f"Cannot convert {value!r} to EagerTensor of dtype {tf_name}")
        if kind == pb.KIND_INT64 and arr.dtype.kind == "u" and arr.size and arr.max() > 2**63 - 1:
            raise ValueError("Can't convert Python sequence with out-of-range integer to Tensor.")
        with np.errstate(over="ignore", invalid="ignore"):
            out = arr.astype(np.float32 if kind == pb.KIND_FLOAT else np.int64).reshape(-1)
    want = int(np.prod(shape, dtype=np.int64))
    if out.size != want:
        raise InvalidArgumentError(f"Input to reshape is a tensor with {out.size} values, but the "
                                   f"requested shape has {want}", "Reshape")
    return out


def _chunks(n: int) -> int:
    threads = numba.get_num_threads()
    if n < PARALLEL_MIN_ROWS or threads < 2:
        return 1
    return max(2, min(4 * threads, n // _ROWS_PER_CHUNK))


class _Source:
    """The records to parse: uint8 ``data``, int64 ``offsets`` and, lazily, ``data`` as
    ``bytes`` for slicing strings out."""

    def __init__(self, data: np.ndarray, offsets: np.ndarray, blob: bytes | None = None):
        # Read-only views: one type, so one compilation, whatever the caller passes.
        self.data = read_only(np.ascontiguousarray(data, dtype=np.uint8).reshape(-1))
        self.offsets = read_only(np.ascontiguousarray(offsets, dtype=np.int64).reshape(-1))
        self._blob = blob
        off = self.offsets
        if len(off) == 0 or (len(off) > 1 and (
                off[0] < 0 or off[-1] > len(self.data) or np.any(off[1:] < off[:-1]))):
            raise InvalidArgumentError("serialized: a string column's offsets must be "
                                       "non-decreasing and within its data", "parse_example")

    @property
    def blob(self) -> bytes:
        if self._blob is None:
            self._blob = self.data.tobytes()
        return self._blob


def _strings(blob: bytes, spos: np.ndarray, slen: np.ndarray, defaults: list) -> np.ndarray:
    n = len(spos)
    if n and 0 < int(slen[0]) <= 64 and (slen == slen[0]).all() and spos.min() >= 0:
        # Strings of one length (ids, keys): gathered as one fixed-width array and
        # turned into bytes objects by NumPy, unless one ends in a NUL byte (which a
        # fixed-width string drops).
        size = int(slen[0])
        rows = np.frombuffer(blob, np.uint8)[spos[:, None] + np.arange(size)]
        if (rows[:, -1] != 0).all():
            return rows.view(f"S{size}").reshape(n).astype(object)
    out = np.empty(n, object)
    if n:
        starts, lens = spos.tolist(), slen.tolist()
        if defaults and spos.min() < 0:
            out[:] = [blob[s:s + n] if s >= 0 else defaults[-1 - s] for s, n in zip(starts, lens)]
        else:
            out[:] = [blob[s:s + n] for s, n in zip(starts, lens)]
    return out


def _shown(record: bytes, limit: int = 64) -> str:
    text = repr(record[:limit])[2:-1]
    return text + ("..." if len(record) > limit else "")


class ExamplePlan:
    """A features dict compiled for the kernels of :mod:`nbdata.kernels.protobuf`.

    For fusing the parse into other kernels: :attr:`layout` and :meth:`outputs` are
    what ``parse_record``/``parse_range`` take; a failure they report becomes TF's
    exception through :meth:`error`; :meth:`results` turns the filled outputs into
    the values :func:`parse_example` returns. :meth:`parse` does all of it.

    Attributes:
        keys: the feature keys, sorted (feature ``f`` of the kernels is ``keys[f]``).
        specs: their FixedLenFeature / VarLenFeature, in the same order.
        shapes: FixedLen shapes (tuples), None for VarLen features.
        layout: the :class:`~nbdata.kernels.protobuf.ExampleLayout`.

    >>> plan = ExamplePlan({"b": VarLenFeature("int64"), "a": FixedLenFeature([], "int64")})
    >>> plan.keys, plan.layout.count.tolist()
    (['a', 'b'], [1, -1])
    """

    def __init__(self, features: Mapping):
        if not isinstance(features, Mapping):
            raise TypeError(f"features must be a dict, got {type(features).__name__}")
        if not features:
            raise ValueError("Invalid argument: features cannot be empty.")
        keys = []
        for k in features:
            if isinstance(k, bytes):
                k = k.decode("utf-8")
            if not isinstance(k, str):
                raise TypeError(f"feature keys must be str, got {type(k).__name__}")
            if k in keys:
                raise ValueError(f"feature key {k!r} appears twice")
            keys.append(k)
        order = sorted(range(len(keys)), key=lambda j: keys[j])
        specs = list(features.values())
        self.keys = [keys[j] for j in order]
        self.specs = [specs[j] for j in order]
        nf = len(self.keys)
        kind = np.zeros(nf, np.int64)
        count = np.zeros(nf, np.int64)
        col = np.zeros(nf, np.int64)
        default = np.full(nf, -1, np.int64)
        self.shapes: list = []
        per_kind = [0, 0, 0]                # values per record, by kind (FixedLen)
        def_lists: list = [[], [], []]      # defaults, by kind
        def_sizes = [0, 0, 0]
        nvar = 0
        for f, (key, spec) in enumerate(zip(self.keys, self.specs)):
            if isinstance(spec, FixedLenFeature):
                k = _kind(spec.dtype, "Tdense")
                shape = _shape_of(key, spec)
                n = int(np.prod(shape, dtype=np.int64))
                kind[f], count[f], col[f] = k, n, per_kind[k]
                per_kind[k] += n
                if spec.default_value is not None:
                    d = _default_array(key, spec.default_value, k, shape)
                    if d.size:                  # TF: an empty default means "required"
                        default[f] = def_sizes[k]
                        def_lists[k].append(d)
                        def_sizes[k] += d.size
                self.shapes.append(shape)
            elif isinstance(spec, VarLenFeature):
                kind[f], count[f], col[f] = _kind(spec.dtype, "sparse_types"), -1, nvar
                nvar += 1
                self.shapes.append(None)
            else:
                raise ValueError(f"Unsupported feature type for key {key!r}: "
                                 f"{type(spec).__name__} (use FixedLenFeature or VarLenFeature)")
        self.per_kind = per_kind
        self.nvar = nvar
        self.str_defaults = [v for d in def_lists[pb.KIND_BYTES] for v in d]
        key_bytes = [k.encode("utf-8") for k in self.keys]
        key_off = np.zeros(nf + 1, np.int64)
        np.cumsum([len(b) for b in key_bytes], out=key_off[1:])
        key_data = np.frombuffer(b"".join(key_bytes), np.uint8).copy()
        size = 2
        while size < 2 * nf:
            size *= 2
        table = np.full(size, -1, np.int64)
        for f in range(nf):
            slot = pb.key_hash_bytes(key_bytes[f]) & (size - 1)
            while table[slot] >= 0:
                slot = (slot + 1) & (size - 1)
            table[slot] = f
        f32_defaults = def_lists[pb.KIND_FLOAT] or [np.zeros(0, np.float32)]
        i64_defaults = def_lists[pb.KIND_INT64] or [np.zeros(0, np.int64)]
        self.layout = pb.ExampleLayout(
            key_data, key_off, table, kind, count, col, default,
            np.concatenate(f32_defaults).view(np.uint32), np.concatenate(i64_defaults))

    def outputs(self, n: int) -> pb.ExampleOutputs:
        """Fresh pass-1 output arrays for ``n`` records."""
        pk = self.per_kind
        spos_size = n * pk[pb.KIND_BYTES]
        return pb.ExampleOutputs(
            np.empty(n * pk[pb.KIND_FLOAT], np.uint32), np.empty(n * pk[pb.KIND_INT64], np.int64),
            np.empty(spos_size, np.int64), np.empty(spos_size, np.int64),
            np.zeros((self.nvar, n), np.int64), np.zeros((self.nvar, n), np.int64),
            np.zeros((self.nvar, n), np.int64))

    def parse(self, data: np.ndarray, offsets: np.ndarray, single: bool = False,
              names=None, blob: bytes | None = None) -> dict:
        """Parse records ``data[offsets[i]:offsets[i + 1]]`` (in parallel when there are
        many); ``single`` gives ``parse_single_example``'s rules and result (one record).
        ``blob``, when given, is ``data`` as ``bytes``. Raises TF's error for the first
        bad record (``names``: record names for the message)."""
        return self._parse(_Source(data, offsets, blob), single, names)

    def _parse(self, src: "_Source", single: bool, names) -> dict:
        n = len(src.offsets) - 1
        out = self.outputs(n)
        nchunks = _chunks(n)
        # (tier 0: the parser's Python source, while Numba compiles it; work in bytes)
        serial = (src.data, src.offsets, 0, n, self.layout, out, single)
        work = int(src.offsets[-1] - src.offsets[0]) if n else 0
        if nchunks > 1:
            # Until the parallel kernel takes over, one parse_range call does the work its
            # chunks would (a first pipeline compiles no serial twin of parse_parallel).
            with kernel_section(numba.get_num_threads()):
                row, code, f, extra = pb.parse_parallel.call_or(
                    (src.data, src.offsets, self.layout, out, single, nchunks),
                    lambda: pb.parse_range_cold.call(serial, work), pb.parse_range)
        else:
            row, code, f, extra = pb.parse_range_cold.call(serial, work)
        if row >= 0:
            raise self.error(src.data, src.offsets, single, int(row), int(code), int(f),
                             int(extra), names)
        return self._results(src, out, single, nchunks)

    def results(self, data: np.ndarray, offsets: np.ndarray, out: pb.ExampleOutputs,
                single: bool = False, blob: bytes | None = None) -> dict:
        """The parse results from ``out``, filled by the kernels for every record
        (pass 2, the VarLen values, runs here)."""
        src = _Source(data, offsets, blob)
        return self._results(src, out, single, _chunks(len(src.offsets) - 1))

    def _results(self, src: "_Source", out: pb.ExampleOutputs, single: bool,
                 nchunks: int) -> dict:
        layout = self.layout
        n = len(src.offsets) - 1
        result = {}
        # VarLen pass 2: values of every record, feature after feature, kind by kind.
        var_values = {}
        if self.nvar:
            cnt = out.var_cnt
            totals = cnt.sum(axis=1)
            vstart = np.zeros_like(cnt)
            base = [0, 0, 0]
            slots = {}
            for f in range(len(self.keys)):
                if layout.count[f] < 0:
                    v, k = int(layout.col[f]), int(layout.kind[f])
                    if n:
                        np.cumsum(cnt[v, :-1], out=vstart[v, 1:])
                    vstart[v] += base[k]
                    slots[f] = (v, k, base[k], int(totals[v]))
                    base[k] += int(totals[v])
            vu32 = np.empty(base[pb.KIND_FLOAT], np.uint32)
            vi64 = np.empty(base[pb.KIND_INT64], np.int64)
            vspos = np.empty(base[pb.KIND_BYTES], np.int64)
            vslen = np.empty(base[pb.KIND_BYTES], np.int64)
            serial = (src.data, 0, n, layout, out, vstart, vu32, vi64, vspos, vslen)
            work = len(src.data)
            if nchunks > 1:
                with kernel_section(numba.get_num_threads()):
                    pb.fill_varlen_parallel.call_or(
                        (src.data, layout, out, vstart, vu32, vi64, vspos, vslen, nchunks),
                        lambda: pb.fill_varlen_range_cold.call(serial, work),
                        pb.fill_varlen_range)
            else:
                pb.fill_varlen_range_cold.call(serial, work)
            vf32 = vu32.view(np.float32)
            for f, (v, k, b, total) in slots.items():
                if k == pb.KIND_FLOAT:
                    values = vf32[b:b + total]
                elif k == pb.KIND_INT64:
                    values = vi64[b:b + total]
                else:
                    values = _strings(src.blob, vspos[b:b + total], vslen[b:b + total], [])
                var_values[f] = (values, cnt[v], vstart[v] - b, total)

        f32 = out.u32.view(np.float32)
        for f, key in enumerate(self.keys):
            cnt_f = int(layout.count[f])
            if cnt_f < 0:
                values, counts, starts, total = var_values[f]
                if single:
                    indices = np.arange(total, dtype=np.int64).reshape(-1, 1)
                    dense_shape = np.array([total], np.int64)
                else:
                    rows = np.repeat(np.arange(n, dtype=np.int64), counts)
                    cols = np.arange(total, dtype=np.int64) - np.repeat(starts, counts)
                    indices = np.stack([rows, cols], axis=1)
                    dense_shape = np.array([n, int(counts.max()) if n else 0], np.int64)
                result[key] = SparseTensor(indices, values, dense_shape)
                continue
            k = int(layout.kind[f])
            lo = n * int(layout.col[f])
            hi = lo + n * cnt_f
            if k == pb.KIND_FLOAT:
                arr = f32[lo:hi]
            elif k == pb.KIND_INT64:
                arr = out.i64[lo:hi]
            else:
                arr = _strings(src.blob, out.spos[lo:hi], out.slen[lo:hi], self.str_defaults)
            shape = self.shapes[f]
            if single:
                result[key] = arr.reshape(shape) if shape else arr[0]
            else:
                result[key] = arr.reshape((n,) + shape)
        return result

    def error(self, data: np.ndarray, offsets: np.ndarray, single: bool, row: int, code: int,
              f: int, extra: int, names=None) -> InvalidArgumentError:
        """TF's exception for a failure ``(row, code, f, extra)`` reported by the kernels
        (TF's message; the record index added where TF's batch message lacks it)."""
        name = "<unknown>" if names is None else names[row]
        if isinstance(name, (bytes, np.bytes_)):
            name = bytes(name).decode("utf-8", "replace")
        key = self.keys[f] if f >= 0 else ""
        kind = int(self.layout.kind[f]) if f >= 0 else 0
        varlen = f >= 0 and self.layout.count[f] < 0
        where = f"Key: {key}.  " if single else f"Name: {name}, Key: {key}, Index: {row}.  "
        cant = where + "Can't parse serialized Example"
        if code == pb.E_PARSE:
            record = data[offsets[row]:offsets[row + 1]].tobytes()
            msg = f"Could not parse example input, value: '{_shown(record)}'"
            if not single:
                msg = f"Name: {name}, Index: {row}.  {msg}"
        elif code == pb.E_DTYPE:
            msg = where + "Unsupported datatype."
        elif code == pb.E_TYPE:
            actual, want = _TF_NAME[extra], _TF_NAME[kind]
            msg = where + "Data types don't match. " + (
                f"Expected type: {want}, Actual type: {actual}" if varlen
                else f"Data type: {actual} but expected type: {want}")
        elif code == pb.E_LIST:
            if not single:
                msg = cant + "."
            elif varlen and kind == pb.KIND_BYTES:
                msg = cant + ": Could not get num elements in bytes_list."
            else:
                msg = cant + f": Parsing {_LIST_NAME[kind]}_list failed."
        elif code == pb.E_COUNT:
            shape = "[" + ",".join(str(d) for d in self.shapes[f]) + "]"
            if single:
                msg = (cant + f": Some {_LIST_NAME[kind]}_list slice was not parsed. (expected "
                       f"{int(self.layout.count[f])} values, got {extra})")
            else:
                msg = (where + f"Number of {_LIST_NAME[kind]} values != expected.  Values size: "
                       f"{extra} but output shape: {shape}")
        else:
            msg = (f"Feature: {key} (data type: {_TF_NAME[kind]}) is required but could not "
                   "be found.")
            if not single:
                msg = f"Name: {name}, {msg} (Index: {row})"
        err = InvalidArgumentError(msg, "parse_single_example" if single else "parse_example")
        err.record_index = row
        return err



_PLANS: dict = {}
_MAX_PLANS = 64


def _frozen(v):
    """A hashable stand-in for a default value (or None when there is none)."""
    if isinstance(v, np.ndarray):
        if v.dtype == object:
            return ("O", v.shape, tuple(_frozen(x) for x in v.reshape(-1).tolist()))
        return (v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, (list, tuple)):
        return (type(v).__name__,) + tuple(_frozen(x) for x in v)
    if isinstance(v, (float, complex, np.floating, np.complexfloating)):
        # by bits: 0.0 == -0.0 (and NaN != NaN) would hand one default another's plan
        a = np.asarray(v)
        return (type(v).__name__, a.dtype.str, a.tobytes())
    hash(v)
    return (type(v).__name__, v)


def _plan(features: Mapping) -> ExamplePlan:
    """The plan of ``features``, from a small cache when the same config comes again."""
    try:
        key = tuple((k, type(spec).__name__, spec.dtype,
                     _frozen(getattr(spec, "shape", None)),
                     _frozen(getattr(spec, "default_value", None)))
                    for k, spec in features.items())
        hash(key)
    except (TypeError, AttributeError):
        return ExamplePlan(features)
    plan = _PLANS.get(key)
    if plan is None:
        plan = ExamplePlan(features)
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


# ------------------------------------------------------------------ inputs

def _record_bytes(x) -> bytes:
    if isinstance(x, bytes):
        return x
    if isinstance(x, (bytearray, memoryview, np.bytes_)):
        return bytes(x)
    if isinstance(x, str):
        return x.encode("utf-8")
    if isinstance(x, np.ndarray):
        if x.dtype == np.uint8 and x.ndim == 1:
            return x.tobytes()
        if x.ndim == 0:
            return _record_bytes(x[()])
        raise ValueError("Input serialized must be a scalar")
    if isinstance(x, np.generic) and x.dtype == object:
        return _record_bytes(x.item())
    raise TypeError(f"serialized Example must be bytes, got {type(x).__name__}")


def _batch_source(serialized) -> _Source | None:
    """The records of a batch, or None when ``serialized`` is a single record."""
    column = serialized if isinstance(serialized, StringColumn) else string_column_of(serialized)
    if column is not None:
        return _Source(column.data, column.offsets)
    if isinstance(serialized, np.ndarray):
        if serialized.ndim == 0:
            return None
        if serialized.dtype.kind not in "OSU":
            raise TypeError(f"serialized must hold strings, got an array of {serialized.dtype}")
        if serialized.ndim != 1:
            dims = ",".join(str(d) for d in serialized.shape)
            raise InvalidArgumentError("Expected serialized to be a scalar or vector, got shape: "
                                       f"[{dims}]", "parse_example")
        records = [_record_bytes(x) for x in serialized.tolist()]
    elif isinstance(serialized, (bytes, bytearray, memoryview, str, np.bytes_, np.generic)):
        return None
    else:
        records = [_record_bytes(x) for x in serialized]
    offsets = np.zeros(len(records) + 1, np.int64)
    if records:
        np.cumsum([len(r) for r in records], out=offsets[1:])
    blob = b"".join(records)
    return _Source(np.frombuffer(blob, np.uint8), offsets, blob)


# ------------------------------------------------------------------ public API

def _single_decoder(serialized, features: Mapping, name=None) -> "ExampleDecoder":
    return ExampleDecoder(features)


def _batch_decoder(serialized, features: Mapping, example_names=None, name=None):
    """parse_example's column decoder: batched for a vector of records, per record for
    one record."""
    return for_records(ExampleDecoder(features), serialized)


@define(tags=("io", "tf"),
        abstract=lambda *args, **kwargs: _single_decoder(*args, **kwargs).output_spec,
        decoder=_single_decoder)
def parse_single_example(serialized, features: Mapping, name=None) -> dict:
    """Parse one serialized ``tf.train.Example`` (``tf.io.parse_single_example``).

    Args:
        serialized: the record: ``bytes``, a 0-d object/bytes array, or a 1-D uint8 array.
        features: dict of key → :class:`FixedLenFeature` or :class:`VarLenFeature`.

    Returns:
        dict of key → value: an array of the feature's shape (a NumPy scalar, or
        ``bytes``, for shape ``[]``), or a 1-D :class:`~nbdata.SparseTensor`.

    Raises:
        InvalidArgumentError: malformed record, wrong type or number of values, or a
            required feature missing.

    >>> rec = encode_example({"id": 7, "tags": [b"a", b"b"]})
    >>> out = parse_single_example(rec, {"id": FixedLenFeature([], "int64"),
    ...                                  "tags": VarLenFeature("string"),
    ...                                  "w": FixedLenFeature([2], "float32", [0.5, 1])})
    >>> out["id"], out["tags"].values.tolist(), out["w"].tolist()
    (np.int64(7), [b'a', b'b'], [0.5, 1.0])
    """
    plan = _plan(features)
    record = _record_bytes(serialized)
    src = _Source(np.frombuffer(record, np.uint8), np.array([0, len(record)], np.int64), record)
    return plan._parse(src, True, None)


@define(tags=("io", "tf"),
        abstract=lambda *args, **kwargs: _batch_decoder(*args, **kwargs).output_spec,
        decoder=_batch_decoder)
def parse_example(serialized, features: Mapping, example_names=None, name=None) -> dict:
    """Parse a batch of serialized ``tf.train.Example`` protos (``tf.io.parse_example``).

    Args:
        serialized: the records: a list or 1-D object array of ``bytes``, or a
            :class:`~nbdata.chunks.StringColumn`. A single record (``bytes``, 0-d array)
            is parsed like :func:`parse_single_example`.
        features: dict of key → :class:`FixedLenFeature` or :class:`VarLenFeature`.
        example_names: optional names of the records, used in error messages.

    Returns:
        dict of key → value: ``[B, *shape]`` arrays for FixedLen features, and for
        VarLen ones a :class:`~nbdata.SparseTensor` with ``indices`` ``[N, 2]`` (record,
        position) and ``dense_shape`` ``[B, longest list]``.

    Raises:
        InvalidArgumentError: for the lowest-numbered bad record, naming it (``Index``);
            its ``record_index`` attribute holds that number.

    >>> recs = [encode_example({"v": [1, 2]}), encode_example({"v": [3]})]
    >>> st = parse_example(recs, {"v": VarLenFeature("int64")})["v"]
    >>> st.indices.tolist(), st.values.tolist(), st.dense_shape.tolist()
    ([[0, 0], [0, 1], [1, 0]], [1, 2, 3], [2, 2])
    """
    plan = _plan(features)
    src = _batch_source(serialized)
    if src is None:
        return parse_single_example(serialized, features)
    return plan._parse(src, False, example_names)


# ------------------------------------------------------------- column decoder

class ExampleDecoder(Decoder):
    """``parse_single_example(record, features)`` on each record of a column."""

    name = "parse_single_example"
    batched_name = "parse_example"

    def __init__(self, features: Mapping):
        self.features = dict(features)
        self.plan = ExamplePlan(features)

    @property
    def spec(self):
        out = {}
        for key, feature, shape in zip(self.plan.keys, self.plan.specs, self.plan.shapes):
            if isinstance(feature, VarLenFeature):
                out[key] = SparseTensorSpec((None,), as_dtype(feature.dtype))
            else:
                out[key] = TensorSpec(tuple(shape), as_dtype(feature.dtype))
        return out

    def describe(self) -> str:
        return f"{self.name}({', '.join(self.plan.keys)})"

    def decode_rows(self, column, rows: int, batch: int | None = None) -> list:
        src = _Source(column.data, column.offsets[:rows + 1])
        try:
            result = self.plan._parse(src, False, None)
        except InvalidArgumentError as e:
            row = getattr(e, "record_index", 0)
            raise RowError(row, self._error(column, row, batch, e)) from None
        columns = []
        for key in self.plan.keys:
            value = result[key]
            if isinstance(value, SparseTensor):
                columns.append(split_sparse(value, rows))
            else:
                columns.append(value)
        return columns

    def _error(self, column, row: int, batch: int | None, batched_error):
        """The error TensorFlow reports for ``row``: parse_single_example's for one
        record, parse_example's (its index within the batch) for a batch."""
        if batch is None:
            try:
                parse_single_example(column.row(row), self.features)
            except InvalidArgumentError as e:
                return e
            return batched_error
        first = row // batch * batch
        records = [column.row(j) for j in range(first, min(first + batch, len(column)))]
        try:
            parse_example(records, self.features)
        except InvalidArgumentError as e:
            return e
        return batched_error


def split_sparse(value: SparseTensor, rows: int) -> RowList:
    """The per-row 1-D sparse tensors of a ``[rows, n]`` sparse tensor (row-major)."""
    counts = np.bincount(value.indices[:, 0], minlength=rows) if len(value.values) else \
        np.zeros(rows, np.int64)
    ends = np.cumsum(counts)
    out = RowList()
    start = 0
    for r in range(rows):
        end = int(ends[r])
        n = end - start
        out.append(SparseTensor(np.arange(n, dtype=np.int64).reshape(-1, 1), value.values[start:end],
                                np.array([n], np.int64)))
        start = end
    return out


# ------------------------------------------------------------------ encoding

def _varint(n: int) -> bytes:
    n &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _varints(values: np.ndarray) -> bytes:
    """Packed varints of int64 ``values`` (negative ones take 10 bytes)."""
    u = values.astype(np.int64).view(np.uint64)
    size = np.ones(len(u), np.int64)
    for k in range(1, 10):
        size += u >= np.uint64(1 << (7 * k))
    ends = np.cumsum(size)
    starts = ends - size
    out = np.zeros(int(ends[-1]) if len(u) else 0, np.uint8)
    for k in range(10):
        sel = size > k
        if not sel.any():
            break
        septet = ((u[sel] >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        more = (size[sel] > k + 1).astype(np.uint8) << np.uint8(7)
        out[starts[sel] + k] = septet | more
    return out.tobytes()


_KIND_NAMES = {"bytes_list": pb.KIND_BYTES, "float_list": pb.KIND_FLOAT,
               "int64_list": pb.KIND_INT64}


def _as_bytes(v, key: str) -> bytes:
    if isinstance(v, (bytes, bytearray, memoryview, np.bytes_)):
        return bytes(v)
    if isinstance(v, str):
        return v.encode("utf-8")
    raise TypeError(f"feature {key!r}: expected bytes or str in a bytes_list, got "
                    f"{type(v).__name__} {v!r:.60}")


def _is_text(v) -> bool:
    return isinstance(v, (bytes, bytearray, memoryview, str, np.bytes_, np.str_))


def _flat(value) -> list:
    out = []
    stack = [iter([value])]
    while stack:
        for v in stack[-1]:
            if isinstance(v, (list, tuple)):
                stack.append(iter(v))
                break
            if isinstance(v, np.ndarray):
                out.extend(v.reshape(-1).tolist())
            else:
                out.append(v)
        else:
            stack.pop()
    return out


def _int_array(items: list, key: str) -> np.ndarray:
    vals = [int(x) for x in items]
    if vals and (min(vals) < -2**63 or max(vals) > 2**63 - 1):
        raise ValueError(f"feature {key!r}: value out of int64 range")
    return np.array(vals, np.int64)


def _number_array(items: list, kind: int | None, key: str) -> np.ndarray:
    """Python numbers as an int64 (all integral, ``kind`` not float) or float32 array."""
    ints = all(isinstance(x, (bool, int, np.bool_, np.integer)) for x in items)
    if not ints and not all(isinstance(x, (bool, int, float, np.bool_, np.integer, np.floating))
                            for x in items):
        raise TypeError(f"feature {key!r}: values must be all numbers or all bytes/str")
    if kind is None:
        kind = pb.KIND_INT64 if ints else pb.KIND_FLOAT
    if kind == pb.KIND_INT64:
        if not ints:
            raise TypeError(f"feature {key!r}: non-integer values in an int64_list")
        return _int_array(items, key)
    with np.errstate(over="ignore"):
        return np.array([float(x) for x in items], np.float64).astype("<f4")


def _array_numbers(arr: np.ndarray, kind: int, key: str) -> np.ndarray:
    """A numeric array, flattened, as float32 or int64 for ``kind``."""
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"feature {key!r}: cannot encode an array of {arr.dtype}")
    arr = arr.reshape(-1)
    if kind == pb.KIND_FLOAT:
        with np.errstate(over="ignore"):
            return arr.astype("<f4")
    if arr.dtype.kind == "f":
        if not np.array_equal(arr, np.trunc(arr)):
            raise TypeError(f"feature {key!r}: non-integer values in an int64_list")
    elif arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
        raise ValueError(f"feature {key!r}: value out of int64 range")
    return arr.astype(np.int64)


def _feature_values(key: str, value):
    """``(kind, values)`` of one feature: a list of bytes, or a 1-D float32/int64 array."""
    kind = None
    if isinstance(value, Mapping):
        if set(value) != {"kind", "value"} or value["kind"] not in _KIND_NAMES:
            raise ValueError(f"feature {key!r}: an explicit feature is {{'kind': 'bytes_list' | "
                             f"'float_list' | 'int64_list', 'value': [...]}}, got {value!r:.80}")
        kind = _KIND_NAMES[value["kind"]]
        value = value["value"]
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "OSU":
            items = value.reshape(-1).tolist()
            if kind not in (None, pb.KIND_BYTES) and not items:
                return kind, np.zeros(0, np.float32 if kind == pb.KIND_FLOAT else np.int64)
            if kind in (None, pb.KIND_BYTES):
                return pb.KIND_BYTES, [_as_bytes(x, key) for x in items]
            return kind, _number_array(items, kind, key)
        if kind == pb.KIND_BYTES:
            if value.size:
                raise TypeError(f"feature {key!r}: cannot store {value.dtype} values in a "
                                "bytes_list")
            return kind, []
        if kind is None:
            kind = pb.KIND_FLOAT if value.dtype.kind == "f" else pb.KIND_INT64
        return kind, _array_numbers(value, kind, key)
    items = _flat(value) if isinstance(value, (list, tuple)) else [value]
    if not items:
        if kind is None:
            raise ValueError(f"feature {key!r}: cannot tell the kind of an empty list; pass "
                             "{'kind': 'float_list', 'value': []} (or bytes_list, int64_list) "
                             "or a typed NumPy array")
        return kind, ([] if kind == pb.KIND_BYTES
                      else np.zeros(0, np.float32 if kind == pb.KIND_FLOAT else np.int64))
    if kind == pb.KIND_BYTES or (kind is None and any(_is_text(x) for x in items)):
        return pb.KIND_BYTES, [_as_bytes(x, key) for x in items]
    if kind is None and not all(isinstance(x, (bool, int, float, np.bool_, np.integer, np.floating))
                                for x in items):
        raise TypeError(f"feature {key!r}: cannot encode {type(items[0]).__name__} values")
    arr = _number_array(items, kind, key)
    return (pb.KIND_INT64 if arr.dtype == np.int64 else pb.KIND_FLOAT), arr


def _encode_feature(key: str, value) -> bytes:
    kind, values = _feature_values(key, value)
    if kind == pb.KIND_BYTES:
        inner = b"".join(b"\n" + _varint(len(v)) + v for v in values)
        return b"\n" + _varint(len(inner)) + inner
    if len(values) == 0:
        inner = b""
    elif kind == pb.KIND_FLOAT:
        inner = b"\n" + _varint(4 * len(values)) + values.tobytes()
    else:
        payload = _varints(values)
        inner = b"\n" + _varint(len(payload)) + payload
    tag = b"\x12" if kind == pb.KIND_FLOAT else b"\x1a"
    return tag + _varint(len(inner)) + inner


def encode_example(features: Mapping) -> bytes:
    """Serialize a ``tf.train.Example``, byte-for-byte as TensorFlow's deterministic
    serialization (``SerializeToString(deterministic=True)``: keys sorted bytewise, a
    key before its prefixes, as the upb protobuf runtime of TF's Python does).

    Each value becomes one Feature, its kind inferred: ``bytes``/``str`` (UTF-8) and
    sequences or string arrays of them → ``bytes_list``; floats and float arrays →
    ``float_list`` (as float32, packed); ints, bools and integer/bool arrays →
    ``int64_list`` (packed). Arrays and nested lists are flattened. To choose the kind
    (an empty list has none), pass ``{"kind": "float_list", "value": [...]}`` (or
    ``"bytes_list"``, ``"int64_list"``).

    Args:
        features: dict of str key → value.

    Returns:
        The serialized Example.

    >>> encode_example({"a": 1, "b": [0.5]}) == (   # TF's bytes for this Example
    ...     b"\\n\\x1b\\n\\n\\n\\x01a\\x12\\x05\\x1a\\x03\\n\\x01\\x01"
    ...     b"\\n\\r\\n\\x01b\\x12\\x08\\x12\\x06\\n\\x04\\x00\\x00\\x00?")
    True
    """
    if not isinstance(features, Mapping):
        raise TypeError(f"features must be a dict, got {type(features).__name__}")
    items = []
    for key, value in features.items():
        if isinstance(key, bytes):
            key = key.decode("utf-8")
        if not isinstance(key, str):
            raise TypeError(f"feature keys must be str, got {type(key).__name__}")
        kb = key.encode("utf-8")
        fb = _encode_feature(key, value)
        entry = b"\n" + _varint(len(kb)) + kb + b"\x12" + _varint(len(fb)) + fb
        items.append((kb, b"\n" + _varint(len(entry)) + entry))
    # upb's deterministic map order (TF's Python protobuf): bytewise, but a key sorts
    # before its own prefixes ("ids_var" before "id", "" last).
    items.sort(key=lambda kv: (*kv[0], 256))
    body = b"".join(e for _, e in items)
    return b"\n" + _varint(len(body)) + body
