"""``decode_csv``: CSV records to columns, as ``tf.io.decode_csv``, on the kernel of
``nbdata/kernels/csv.py`` (one call for a whole batch or chunk of lines).

Column dtypes come from ``record_defaults``: a typed array or NumPy scalar keeps its
dtype (float32, float64, int32, int64 or string); Python numbers follow NumPy, as
everywhere in nbdata (``[0.0]`` is float64 and ``[0]`` int64, where TensorFlow makes
float32 and int32); an empty list (``[]``, float32 as in TF) or an empty typed array
marks a required column, and a dtype alone (``np.int32``, ``nd.string``) a required
column of that dtype. Values, quoting rules, ``na_value`` and ``select_cols`` follow
TensorFlow, and so do the errors (InvalidArgumentError naming the field and record).

>>> cols = decode_csv([b'1,"a,b",2.5', b'2,,'], [[0], [""], [-1.0]])
>>> [c.tolist() for c in cols]
[[1, 2], [b'a,b', b''], [2.5, -1.0]]
"""

from __future__ import annotations

import numbers
from typing import Any

import numba
import numpy as np

from nbdata.chunks import StringColumn, read_only, string_column_of
from nbdata.primitives.decoder import Decoder, RowError, for_records
from nbdata.errors import InvalidArgumentError
from nbdata.kernels import csv as k
from nbdata.kernels.python_tier import cold_start
from nbdata.spec import TensorSpec, as_dtype, string
from nbdata.primitives.table import define

_KINDS = {np.dtype(np.int32): k.KIND_INT32, np.dtype(np.int64): k.KIND_INT64,
          np.dtype(np.float32): k.KIND_FLOAT32, np.dtype(np.float64): k.KIND_FLOAT64}
_TYPE_NAMES = {k.KIND_INT32: "int32", k.KIND_INT64: "int64", k.KIND_FLOAT32: "float",
               k.KIND_FLOAT64: "double", k.KIND_STRING: "string"}

# Bytes of lines the CSV decoder's Python source may take at a first call (tier 0).
CSV_FIRST_WORK = 64 << 10


def _column_default(value: Any, i: int):
    """(dtype, default or None) of one record default."""
    if value is string or isinstance(value, (type, np.dtype)):
        dtype = as_dtype(value)
        if dtype is not string and dtype not in _KINDS:
            raise TypeError(f"decode_csv: record_defaults[{i}] has dtype {dtype}; use float32, "
                            "float64, int32, int64 or string")
        return dtype, None
    if isinstance(value, (bytes, str)):
        return string, value.encode("utf-8") if isinstance(value, str) else value
    if isinstance(value, np.ndarray):
        arr = value
    elif isinstance(value, (list, tuple)):
        if len(value) == 0:
            return np.dtype(np.float32), None
        if len(value) != 1:
            raise InvalidArgumentError(f"decode_csv: record_defaults[{i}] must have at most one "
                                       f"value, got {len(value)}", "DecodeCSV")
        return _column_default(value[0], i)
    elif isinstance(value, (numbers.Number, np.generic)) and not isinstance(value, bool):
        arr = np.asarray(value)
    else:
        raise TypeError(f"decode_csv: record_defaults[{i}] must be a value, a one-value list or "
                        f"array, an empty list (required) or a dtype, got {value!r:.60}")
    dtype = as_dtype(arr.dtype)
    if arr.size > 1:
        raise InvalidArgumentError(f"decode_csv: record_defaults[{i}] must have at most one "
                                   f"value, got {arr.size}", "DecodeCSV")
    if dtype is not string and dtype not in _KINDS:
        raise TypeError(f"decode_csv: record_defaults[{i}] has dtype {dtype}; use float32, "
                        "float64, int32, int64 or string")
    if arr.size == 0:
        return dtype, None
    v = arr.reshape(-1)[0]
    if dtype is string:
        return string, v.encode("utf-8") if isinstance(v, str) else bytes(v)
    return dtype, dtype.type(v)


class CsvConfig:
    """decode_csv's arguments, checked once: per output column its dtype, kind and
    default, and the kernel's constant arrays."""

    def __init__(self, record_defaults, field_delim=",", use_quote_delim=True, na_value="",
                 select_cols=None, exclude_cols=None):
        if not isinstance(record_defaults, (list, tuple)):
            raise TypeError("decode_csv: record_defaults must be a list")
        if isinstance(field_delim, str):
            field_delim = field_delim.encode("utf-8")
        if len(field_delim) != 1:
            raise InvalidArgumentError("field_delim should be only 1 char", "DecodeCSV")
        self.delim = field_delim[0]
        self.quote = bool(use_quote_delim)
        na = na_value.encode("utf-8") if isinstance(na_value, str) else bytes(na_value)
        self.na = np.frombuffer(na, np.uint8).copy()
        self.use_na = len(na) > 0
        self.args = (tuple(repr(v) for v in record_defaults), field_delim, self.quote, na,
                     None if select_cols is None else tuple(int(c) for c in select_cols))
        columns = [_column_default(v, i) for i, v in enumerate(record_defaults)]
        self.dtypes = [d for d, _ in columns]
        self.defaults = [v for _, v in columns]
        self.kinds = np.array([k.KIND_STRING if d is string else _KINDS[d] for d in self.dtypes],
                              np.int64)
        self.has_default = np.array([v is not None for v in self.defaults], np.bool_)
        self.fast = False   # (set below, once ncols is known)
        n = len(columns)
        self.max_fields = None
        if exclude_cols is not None:
            # CsvDataset's exclude_cols: every other field is a column, so a record has the
            # first n fields not excluded and no field after them but excluded ones.
            excluded = {int(c) for c in exclude_cols}
            kept = [c for c in range(n + len(excluded) + 1) if c not in excluded][:n + 1]
            select_cols, self.max_fields = kept[:n], kept[n]
        if select_cols is None:
            self.ncols = n
            self.select = np.arange(n, dtype=np.int64)
        else:
            cols = [int(c) for c in select_cols]
            if any(b <= a for a, b in zip(cols, cols[1:])):
                raise InvalidArgumentError("select_cols is not strictly increasing.", "DecodeCSV")
            if cols and cols[0] < 0:
                raise InvalidArgumentError("select_cols contains negative values.", "DecodeCSV")
            if len(cols) != n:
                raise InvalidArgumentError("Length of select_cols and record_defaults do not "
                                           "match.", "DecodeCSV")
            self.ncols = -1 if self.max_fields is None else -2 - self.max_fields
            self.select = np.full((cols[-1] + 1) if cols else 0, -1, np.int64)
            for j, c in enumerate(cols):
                self.select[c] = j
        self.fast = k.fast_rows_apply(self.delim, self.ncols, self.kinds, self.use_na)

    @property
    def spec(self) -> tuple:
        return tuple(TensorSpec((), d) for d in self.dtypes)

    def run(self, data: np.ndarray, offsets: np.ndarray, n: int):
        """Kernel outputs for ``n`` records; raises RowError for the first bad one."""
        data, offsets = read_only(data), read_only(offsets)   # one kernel signature
        nout = len(self.kinds)
        shape = (nout, n)
        ints = np.empty(shape, np.int64)
        floats = np.empty(shape, np.float64)
        floats32 = np.empty(shape, np.float32)
        # Field bounds are written where they are read (string columns, numbers left to
        # Python, the failing field), so they need no zeroing: 16 bytes a field.
        starts = np.empty(shape, np.int64)
        ends = np.empty(shape, np.int64)
        escaped = np.zeros(shape, np.bool_)
        state = np.zeros(shape, np.int8)
        args = (data, offsets, n, self.delim, self.quote, self.ncols, self.select, self.kinds,
                self.has_default, self.na, self.use_na, ints, floats, floats32, starts, ends,
                escaped, state)
        threads = numba.get_num_threads()
        # One kernel for every size (one block below 2,048 rows): a first pipeline compiles
        # it once, where a separate kernel for short calls cost its cold first epoch
        # another 3 s of compiling. Its loop also compiles faster code than a plain one
        # (Numba marks a parallel loop's arrays as not aliasing each other).
        codes = np.empty(n, np.int8)
        cols = np.empty(n, np.int64)
        extras = np.empty(n, np.int64)
        blocks = max(1, min(4 * threads, n // 2048))
        full = args + (codes, cols, extras, blocks)
        # Plain numeric records: the one-pass parser's parallel kernel, with the general
        # kernel's serial twin until it takes over (nbdata/kernels/csv.py).
        kernel = k.decode_plain_rows_parallel if self.fast else k.decode_rows_parallel
        serial = k.decode_rows_parallel.serial
        # One block (a short call) gains nothing from the parallel kernel: its time does
        # not count toward compiling it (PARALLEL_AFTER, nbdata/kernels/tiers.py).
        # (tier 0: the serial twin's Python source while Numba compiles the twin, for
        # the first lines of a first pipeline; work in bytes)
        cold = cold_start(serial, CSV_FIRST_WORK)
        work = int(offsets[n] - offsets[0]) if n else 0
        kernel.call_or(full, lambda: cold.call(full, work), serial, counts=blocks > 1)
        bad = np.flatnonzero(codes)
        if len(bad):
            r = int(bad[0])
            raise RowError(r, (int(codes[r]), int(cols[r]), int(extras[r]), starts, ends))
        return ints, floats, floats32, starts, ends, escaped, state

    def columns(self, data, offsets, n) -> list:
        """The decoded columns of ``n`` records (raises RowError)."""
        ints, floats, floats32, starts, ends, escaped, state = self.run(data, offsets, n)
        blob = None
        out = []
        # Which columns need defaults or the Python float parser (checked once for all:
        # a decode per record pays for every array operation).
        defaulted = (state == 1).any(axis=1).tolist()
        parsed = (state == 2).any(axis=1).tolist()
        for j, (dtype, default) in enumerate(zip(self.dtypes, self.defaults)):
            kind = int(self.kinds[j])
            if kind == k.KIND_STRING:
                if blob is None:
                    blob = data.tobytes()
                col = np.empty(n, object)
                s, e = starts[j].tolist(), ends[j].tolist()
                col[:] = [blob[a:b] for a, b in zip(s, e)]
                if escaped[j].any():
                    for r in np.flatnonzero(escaped[j] & (state[j] != 1)):
                        col[r] = col[r].replace(b'""', b'"')
                if defaulted[j]:
                    col[state[j] == 1] = default
                out.append(col)
                continue
            if kind in (k.KIND_INT32, k.KIND_INT64):
                col = ints[j].astype(dtype)
            elif kind == k.KIND_FLOAT32:
                col = floats32[j]
            else:
                col = floats[j]
            if defaulted[j]:
                col[state[j] == 1] = default
            slow = np.flatnonzero(state[j] == 2) if parsed[j] else ()
            if len(slow):
                if blob is None:
                    blob = data.tobytes()
                for r in slow:
                    text = blob[starts[j, r]:ends[j, r]]
                    value = _python_float(text)
                    if value is None:
                        raise RowError(int(r), (k.E_NUMBER, j, 0, starts, ends))
                    with np.errstate(over="ignore"):
                        col[r] = value if kind != k.KIND_FLOAT32 else _to_float32(value, text)
            out.append(col)
        return out

    dataset_wording = False     # CsvDataset's decode sets it (see _config)

    def _dataset_message(self, code: int, col: int, extra: int) -> str:
        """CsvDataset's wording of a record error (it names no record number)."""
        want = len(self.kinds)
        if code == k.E_COUNT:
            return (f"Expect {want} fields but have more in record" if extra > want else
                    f"Expect {want} fields but have {extra} in record")
        if code == k.E_REQUIRED:
            return f"Field {col} is required but missing in record!"
        if code == k.E_QUOTE_END:
            # (records join lines while a quote is open: only the file's end leaves one open)
            return "Reached end of file without closing quoted field in record"
        return "Unquoted fields cannot have quotes inside"

    def error(self, data: np.ndarray, row: int, info, shown_row: int) -> InvalidArgumentError:
        code, col, extra, starts, ends = info
        if self.dataset_wording and code in (k.E_COUNT, k.E_REQUIRED, k.E_UNQUOTED,
                                             k.E_QUOTE_END):
            return InvalidArgumentError(self._dataset_message(code, col, extra), "CsvDataset")
        if code == k.E_COUNT:
            want = len(self.kinds)
            msg = f"Expect {want} fields but have {extra} in record {shown_row}"
        elif code == k.E_REQUIRED:
            msg = f"Field {col} is required but missing in record {shown_row}!"
        elif code == k.E_NUMBER:
            text = data[starts[col, row]:ends[col, row]].tobytes().decode("utf-8", "replace")
            msg = (f"Field {col} in record {shown_row} is not a valid "
                   f"{_TYPE_NAMES[int(self.kinds[col])]}: {text}")
        elif code == k.E_UNQUOTED:
            msg = "Unquoted fields cannot have quotes/CRLFs inside"
        elif code == k.E_QUOTE_ESCAPE:
            msg = "Quote inside a string has to be escaped by another quote"
        else:
            msg = "Quoted field has to end with quote followed by delim or end"
        return InvalidArgumentError(msg, "DecodeCSV")


def _python_float(text: bytes):
    """Python's correctly rounded parse of what the fast parser left: inf/nan, hex
    floats, long mantissas, huge exponents; None when it is not a number (underscores,
    which Python allows, are not)."""
    if b"_" in text:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        hex_text = text.decode("ascii").strip()
    except UnicodeDecodeError:
        return None
    if not hex_text.lstrip("+-").lower().startswith("0x"):
        return None
    try:
        return float.fromhex(hex_text)
    except ValueError:
        return None


def _to_float32(value: float, text: bytes) -> np.float32:
    """The float32 nearest the decimal ``text`` (ties to even), given ``value``, its
    nearest float64: rounding ``value`` again is right unless it lies exactly halfway
    between two float32s, where the exact decimal decides."""
    f = np.float32(value)
    if not np.isfinite(f) or float(f) == value:
        return f
    other = np.nextafter(f, np.float32(np.inf) if value > float(f) else np.float32(-np.inf))
    mid = (float(f) + float(other)) / 2       # exact: float32s are float64s with room
    if value != mid:
        return f
    from decimal import Decimal, InvalidOperation
    try:
        exact = Decimal(text.decode("ascii").strip())
    except (InvalidOperation, UnicodeDecodeError):
        return f
    lo, hi = sorted((f, other), key=float)
    if exact == Decimal(mid):
        return lo if int(lo.view(np.uint32)) % 2 == 0 else hi
    return hi if exact > Decimal(mid) else lo


def _records(records):
    """(data, offsets, shape) of a record or a batch (any shape) of records."""
    column = records if isinstance(records, StringColumn) else string_column_of(records)
    if column is not None:
        return column.data, column.offsets, (len(column),)
    if isinstance(records, (bytes, str, np.bytes_)):
        values, shape = [records], ()
    elif isinstance(records, np.ndarray):
        if records.dtype.kind not in "OSU":
            raise TypeError(f"decode_csv: records must be strings, got {records.dtype}")
        values, shape = records.reshape(-1).tolist(), records.shape
    elif isinstance(records, (list, tuple)):
        arr = np.empty(len(records), object)
        arr[:] = list(records)
        values, shape = list(records), (len(records),)
    else:
        raise TypeError(f"decode_csv: records must be strings, got {type(records).__name__}")
    values = [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in values]
    column = StringColumn.from_values(values)
    return column.data, column.offsets, shape


def _csv_decoder(records, record_defaults, field_delim=",", use_quote_delim=True, na_value="",
                 select_cols=None, name=None, _exclude_cols=None):
    """The column decoder of a ``decode_csv`` call."""
    config = _config(record_defaults, field_delim, use_quote_delim, na_value, select_cols,
                     name == "CsvDataset", _exclude_cols)
    return for_records(CsvDecoder(config), records)


@define(tags=("io",),
        abstract=lambda *args, **kwargs: list(_csv_decoder(*args, **kwargs).output_spec),
        decoder=_csv_decoder)
def decode_csv(records, record_defaults, field_delim=",", use_quote_delim=True, na_value="",
               select_cols=None, name=None, _exclude_cols=None):
    """Convert CSV records to tensors, one per column (``tf.io.decode_csv``).

    Args:
        records: a record (``bytes``/``str``) or an array/list of records of any shape.
        record_defaults: one entry per output column: a value (its dtype is the column's),
            a one-value list or array, or an empty list / typed empty array / dtype for a
            required column.
        field_delim: the one-character field delimiter.
        use_quote_delim: whether double quotes delimit fields (RFC 4180).
        na_value: a field equal to this takes the column's default.
        select_cols: sorted indices of the columns to return (default: all).
        name: ignored (TensorFlow's op name), but "CsvDataset" words the errors as
            tf.data's CsvDataset does.
        _exclude_cols: CsvDataset's ``exclude_cols`` (instead of ``select_cols``): every
            field not excluded is a column, and a record with more is an error.

    Returns:
        A list of arrays (or scalars for one record), one per column, of the records' shape.

    Raises:
        InvalidArgumentError: a record with the wrong number of fields, an empty
            required field, a value that does not parse, or bad quoting, naming the
            field and the record.

    >>> decode_csv("7,x", [np.int32(0), ""])
    [np.int32(7), b'x']
    """
    config = _config(record_defaults, field_delim, use_quote_delim, na_value, select_cols,
                     name == "CsvDataset", _exclude_cols)
    data, offsets, shape = _records(records)
    n = len(offsets) - 1
    try:
        columns = config.columns(data, offsets, n)
    except RowError as e:
        raise config.error(data, e.row, e.error, e.row) from None
    if shape == ():
        return [c[0] if isinstance(c[0], bytes) else c[0] for c in columns]
    return [c.reshape(shape) for c in columns]


_configs: dict = {}


def _config(record_defaults, field_delim, use_quote_delim, na_value, select_cols,
            dataset_wording: bool = False, exclude_cols=None) -> CsvConfig:
    """The CsvConfig of these arguments, made once for calls that repeat them (a decode
    per record, as TF1 graphs run it); keyed on their reprs, which name dtypes too."""
    try:
        key = (tuple(repr(v) for v in record_defaults), repr(field_delim), bool(use_quote_delim),
               repr(na_value), None if select_cols is None else tuple(int(c) for c in select_cols),
               bool(dataset_wording),
               None if exclude_cols is None else tuple(int(c) for c in exclude_cols))
    except TypeError:
        key = None
    config = _configs.get(key) if key is not None else None
    if config is None:
        config = CsvConfig(record_defaults, field_delim, use_quote_delim, na_value, select_cols,
                           exclude_cols)
        # CsvDataset's decode (name="CsvDataset") words its errors as tf.data's CsvDataset
        config.dataset_wording = bool(dataset_wording)
        if key is not None:
            if len(_configs) >= 256:
                _configs.clear()
            _configs[key] = config
    return config


class CsvDecoder(Decoder):
    """``decode_csv`` on each record of a column (see ``nbdata/primitives/decoder.py``)."""

    name = "decode_csv"
    batched_name = "decode_csv"

    def __init__(self, config: CsvConfig):
        self.config = config

    @property
    def spec(self):
        return self.config.spec

    def describe(self) -> str:
        return f"decode_csv({len(self.config.kinds)} columns)"

    def decode_rows(self, column, rows: int, batch: int | None = None) -> list:
        offsets = column.offsets[:rows + 1]
        try:
            return self.config.columns(column.data, offsets, rows)
        except RowError as e:
            shown = 0 if batch is None else e.row % batch
            raise RowError(e.row, self.config.error(column.data, e.row, e.error, shown)) from None
