"""Arrow data as a source (``Dataset.from_arrow``, ``nd.io.ParquetDataset``): the mapping
of Arrow columns onto column leaves, the row sources (an in-memory table, a stream of
record batches, the row groups of Parquet files and other ``pyarrow.dataset`` data),
the source node and its chunk iterator.

Each element is a dict ``{column name: value}``. Columns map onto leaves without a copy
per row: numbers (integers, floats, bools) are NumPy views of the Arrow data buffer
(bools, which Arrow packs in bits, are unpacked); strings and binaries are string
columns over Arrow's own data and offsets buffers (32-bit offsets are widened); fixed
size lists (nested ones, and fixed-shape tensors) are leaves of a fixed shape over the
child buffer; variable-length lists of numbers (``list``, ``large_list``) are leaves of
shape (None,) held as packed rows (``nbdata.chunks.PackedRows``: the values buffer and
the offsets, widened to int64). Other Arrow types raise UnimplementedError naming the
column.

Nulls: a null in a column the pipeline reads raises InvalidArgumentError naming the
column and the row, when iteration reaches that row (the rows before it are handed out
first; the next row follows, so ``ignore_errors()`` skips it), unless ``null_values`` gives the column
a fill value, which then stands for each null (numbers: a value of the column's dtype;
strings: bytes or str; fixed-size lists: a value broadcast to the row's shape, which
also fills null items inside a list). A column the pipeline never reads (the
first map's function, and the filters before it, do not use it: ``narrow_reads``) has
its nulls filled with zeros instead, as no value of it is seen.
"""

from __future__ import annotations

import collections
import collections.abc
import concurrent.futures
import dataclasses
import functools
import threading
from typing import Any

import numpy as np

from numba import types

from nbdata import state_check
from nbdata.chunks import Chunk, PackedRows, StringColumn, col_concat, col_slice, col_take
from nbdata.errors import (DataLossError, FailedPreconditionError, InvalidArgumentError, NotFoundError,
                           UnimplementedError)
from nbdata.kernels.compact import gather_units, group_by_unit
from nbdata.kernels.threads import shared_pool
from nbdata.ops.fusion import ChunkSource, OpaqueLeaf, SourceReader, numba_dtype
from nbdata.ops.from_tensor_slices import ColumnLeaf
from nbdata.ops.node import AUTOTUNE, UNKNOWN, Node, NotFusable, arg_field
from nbdata.ops.runtime import ChunkIter
from nbdata.spec import TensorSpec, string

EXTRA = "install it with: pip install 'nbdata[arrow]'"

# Rows decoded at a time from a file (``batch_rows``'s default, pyarrow's own): blocks
# that stay in cache through the fused kernel, whatever the files' row group size.
BATCH_ROWS = 1 << 16

# Decoded row groups kept for random access (global_shuffle, distribute splits): at
# most this many bytes of them, and always the last one read.
UNIT_CACHE_BYTES = 64 << 20


def pyarrow(op: str):
    """The pyarrow module, or UnimplementedError naming the extra that installs it."""
    try:
        import pyarrow as pa
    except ImportError:
        raise UnimplementedError(f"{op}: Arrow and Parquet sources need the optional pyarrow "
                                 f"package; {EXTRA}", op) from None
    return pa


# ------------------------------------------------------------------- columns

@dataclasses.dataclass(frozen=True)
class ColumnRule:
    """How one Arrow column becomes a leaf: ``kind`` "number", "string", "tensor"
    (a fixed-size list) or "list" (a variable-length list of numbers), the leaf's ``dtype`` and row ``shape``, the Arrow type's name,
    and the ``fill`` standing for nulls (None: a null is an error)."""

    name: str
    kind: str
    dtype: Any
    shape: tuple
    arrow_type: str
    fill: Any = None

    @property
    def spec(self) -> TensorSpec:
        return TensorSpec(self.shape, string if self.kind == "string" else self.dtype)


def _unsupported(name: str, typ, op: str, why: str = "") -> UnimplementedError:
    return UnimplementedError(
        f"{op}: column {name!r} has Arrow type {typ}{why}, which nbdata does not read (it "
        "reads numbers, bools, strings, binaries and lists of numbers); cast it "
        "or leave it out with columns=", op)


def column_rule(field, fill: Any, op: str) -> ColumnRule:
    """The rule of an Arrow field (UnimplementedError for types nbdata does not read)."""
    pa = pyarrow(op)
    typ = field.type
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    shape: list = []
    inner = typ
    if isinstance(inner, pa.FixedShapeTensorType):
        if inner.permutation is not None and list(inner.permutation) != sorted(inner.permutation):
            raise _unsupported(field.name, field.type, op, " (a permuted layout)")
        shape = [int(d) for d in inner.shape]
        inner = inner.value_type
    elif pa.types.is_list(inner) or pa.types.is_large_list(inner):
        # A variable-length list of numbers: a ragged leaf (None,) whose rows are views
        # of one values buffer cut at Arrow's offsets (see _lists).
        inner = inner.value_type
        if not (pa.types.is_integer(inner) or pa.types.is_floating(inner)
                or pa.types.is_boolean(inner)):
            raise _unsupported(field.name, field.type, op, " (a list of non-numbers)")
        rule = ColumnRule(field.name, "list", np.dtype(inner.to_pandas_dtype()), (None,),
                          str(field.type))
        return rule if fill is None else dataclasses.replace(rule, fill=_checked_fill(rule, fill, op))
    else:
        while pa.types.is_fixed_size_list(inner):
            shape.append(int(inner.list_size))
            inner = inner.value_type
    if pa.types.is_integer(inner) or pa.types.is_floating(inner) or pa.types.is_boolean(inner):
        dtype = np.dtype(inner.to_pandas_dtype())
        kind = "tensor" if shape else "number"
    elif not shape and (pa.types.is_string(inner) or pa.types.is_large_string(inner)
                        or pa.types.is_binary(inner) or pa.types.is_large_binary(inner)
                        or pa.types.is_fixed_size_binary(inner)
                        or str(inner) in ("string_view", "binary_view")):
        dtype, kind = None, "string"
    else:
        raise _unsupported(field.name, field.type, op)
    rule = ColumnRule(field.name, kind, dtype, tuple(shape), str(field.type))
    if fill is None:
        return rule
    return dataclasses.replace(rule, fill=_checked_fill(rule, fill, op))


def _checked_fill(rule: ColumnRule, fill: Any, op: str) -> Any:
    """A fill value in the column's form: bytes for strings, a NumPy scalar or array of
    the row's shape otherwise."""
    where = f"{op}: null_values[{rule.name!r}]"
    if rule.kind == "string":
        if isinstance(fill, str):
            return fill.encode("utf-8")
        if isinstance(fill, (bytes, np.bytes_)):
            return bytes(fill)
        raise TypeError(f"{where} must be bytes or str for the string column, got "
                        f"{type(fill).__name__}")
    value = np.asarray(fill)
    if value.dtype.kind not in "biuf":
        raise TypeError(f"{where} must be a number, got {type(fill).__name__} {fill!r:.40}")
    if rule.kind == "list" and value.ndim != 1:
        raise InvalidArgumentError(f"{where} must be a 1-D list of numbers for the list "
                                   f"column, got shape {list(value.shape)}", op)
    converted = value.astype(rule.dtype)
    if not np.array_equal(converted, value, equal_nan=value.dtype.kind == "f"
                          and rule.dtype.kind == "f"):
        raise InvalidArgumentError(f"{where} = {fill!r:.40} does not fit the column's dtype "
                                   f"{rule.dtype}", op)
    if rule.kind == "list":
        return np.ascontiguousarray(converted)
    try:
        converted = np.broadcast_to(converted, rule.shape)
    except ValueError:
        raise InvalidArgumentError(f"{where} has shape {list(value.shape)}, which does not "
                                   f"broadcast to the rows' shape {list(rule.shape)}", op) from None
    return converted[()] if rule.shape == () else np.ascontiguousarray(converted)


class NullRows:
    """Rows of a block holding a null where no fill stands for it: per column, the
    sorted row numbers."""

    def __init__(self):
        self.rows: list[tuple[str, np.ndarray]] = []

    def add(self, name: str, rows: np.ndarray) -> None:
        if len(rows):
            self.rows.append((name, rows))

    def first(self, a: int, b: int) -> tuple[int, str] | None:
        """(row, column) of the first null in rows ``a .. b``, or None."""
        best = None
        for name, rows in self.rows:
            i = int(np.searchsorted(rows, a))
            if i < len(rows) and rows[i] < b and (best is None or rows[i] < best[0]):
                best = (int(rows[i]), name)
        return best

    def among(self, picked: np.ndarray) -> tuple[int, str] | None:
        """(position in ``picked``, column) of the first picked row that is null."""
        best = None
        for name, rows in self.rows:
            hit = np.flatnonzero(np.isin(picked, rows))
            if len(hit) and (best is None or hit[0] < best[0]):
                best = (int(hit[0]), name)
        return best


def _null_rows(pa, arr) -> np.ndarray:
    return np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))


def _numbers(pa, arr, rule: ColumnRule, nulls: NullRows) -> np.ndarray:
    if arr.null_count:
        if rule.fill is None:
            nulls.add(rule.name, _null_rows(pa, arr))
            arr = arr.fill_null(pa.scalar(0 if rule.dtype.kind != "b" else False, arr.type))
        else:
            arr = arr.fill_null(pa.scalar(rule.fill.item(), arr.type))
    if rule.dtype.kind == "b":
        return arr.to_numpy(zero_copy_only=False)
    return arr.to_numpy(zero_copy_only=True)


def _strings(pa, arr, rule: ColumnRule, nulls: NullRows) -> StringColumn:
    typ = arr.type
    if not (pa.types.is_string(typ) or pa.types.is_binary(typ) or pa.types.is_large_string(typ)
            or pa.types.is_large_binary(typ)):
        arr = arr.cast(pa.large_binary())
        typ = arr.type
    if arr.null_count:
        if rule.fill is None:
            nulls.add(rule.name, _null_rows(pa, arr))
        else:
            value = rule.fill
            if pa.types.is_string(typ) or pa.types.is_large_string(typ):
                try:
                    value = value.decode("utf-8")
                except UnicodeDecodeError:
                    arr = arr.cast(pa.large_binary())
                    typ = arr.type
            arr = arr.fill_null(pa.scalar(value, typ))
    large = pa.types.is_large_string(typ) or pa.types.is_large_binary(typ)
    _, offsets_buf, data_buf = arr.buffers()
    n = len(arr)
    offsets = np.frombuffer(offsets_buf, np.int64 if large else np.int32, count=n + 1,
                            offset=arr.offset * (8 if large else 4))
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return StringColumn(data, offsets.astype(np.int64, copy=False))


def _items(pa, arr):
    """The innermost values of the fixed-size lists of ``arr``, one run per row."""
    while pa.types.is_fixed_size_list(arr.type):
        k = arr.type.list_size
        arr = arr.values.slice(arr.offset * k, len(arr) * k)
    return arr


def _tensors(pa, arr, rule: ColumnRule, nulls: NullRows) -> np.ndarray:
    if isinstance(arr.type, pa.FixedShapeTensorType):
        arr = arr.storage
    n = len(arr)
    size = max(1, int(np.prod(rule.shape, dtype=np.int64)))
    items = _items(pa, arr)
    item_mask = None
    if items.null_count:
        item_mask = items.is_null().to_numpy(zero_copy_only=False)
        items = items.fill_null(pa.scalar(False if rule.dtype.kind == "b" else 0, items.type))
    out = items.to_numpy(zero_copy_only=rule.dtype.kind != "b").reshape((n,) + rule.shape)
    list_rows = _null_rows(pa, arr) if arr.null_count else np.zeros(0, np.int64)
    if item_mask is None and not len(list_rows):
        return out
    if rule.fill is None:
        item_rows = np.zeros(0, np.int64) if item_mask is None else \
            np.flatnonzero(item_mask.reshape(n, size).any(axis=1))
        nulls.add(rule.name, np.union1d(list_rows, item_rows))
        return out
    out = out.copy()
    if item_mask is not None:
        mask = item_mask.reshape(out.shape)
        out[mask] = np.broadcast_to(rule.fill, out.shape)[mask]
    out[list_rows] = rule.fill
    return out


def _lists(pa, arr, rule: ColumnRule, nulls: NullRows) -> PackedRows:
    """A (large) list column as packed rows over Arrow's own values buffer and offsets
    (32-bit offsets widened): no copy per row. A null list is an error row, or the fill
    list; a null item inside a list makes its row an error row."""
    if arr.null_count:
        if rule.fill is None:
            nulls.add(rule.name, _null_rows(pa, arr))
        else:
            fill = pa.scalar(rule.fill.tolist(), arr.type)
            arr = arr.fill_null(fill)
    n = len(arr)
    offsets = arr.offsets.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    values = arr.values     # the child array whole; offsets index into it
    if values.null_count:
        bad = np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))
        row = np.searchsorted(offsets, bad, side="right") - 1
        keep = (row >= 0) & (row < n)
        nulls.add(rule.name, np.unique(row[keep]))
        values = values.fill_null(pa.scalar(False if rule.dtype.kind == "b" else 0, values.type))
    data = values.to_numpy(zero_copy_only=rule.dtype.kind != "b")
    lo, hi = int(offsets[0]), int(offsets[-1])
    if lo:
        offsets = offsets - lo
    return PackedRows(data[lo:hi], offsets, np.diff(offsets).reshape(n, 1))


_CONVERT = {"number": _numbers, "string": _strings, "tensor": _tensors, "list": _lists}


class Block:
    """A record batch as columns (in the element's leaf order), with its null rows."""

    __slots__ = ("columns", "n", "nulls")

    def __init__(self, columns: list, n: int, nulls: NullRows):
        self.columns, self.n, self.nulls = columns, n, nulls

    @property
    def nbytes(self) -> int:
        return sum(int(c.nbytes) for c in self.columns)

    def slice(self, a: int, b: int) -> Chunk:
        return Chunk([col_slice(c, a, b) for c in self.columns], b - a)


def to_block(batch, rules: tuple, order: tuple, op: str) -> Block:
    """The columns of a record batch for the leaves ``order`` (indices into ``rules``)."""
    pa = pyarrow(op)
    nulls = NullRows()
    columns = []
    for i in order:
        rule = rules[i]
        arr = batch.column(rule.name)
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        if pa.types.is_dictionary(arr.type):
            arr = arr.dictionary_decode()
        columns.append(_CONVERT[rule.kind](pa, arr, rule, nulls))
    return Block(columns, batch.num_rows, nulls)


def join_blocks(blocks: list) -> Block:
    """One block of several blocks' rows (a unit read as several record batches)."""
    if len(blocks) == 1:
        return blocks[0]
    nulls = NullRows()
    base, found = 0, collections.defaultdict(list)
    for b in blocks:
        for name, rows in b.nulls.rows:
            found[name].append(rows + base)
        base += b.n
    for name, parts in found.items():
        nulls.add(name, np.concatenate(parts))
    width = len(blocks[0].columns) if blocks else 0
    return Block([col_concat([b.columns[k] for b in blocks]) for k in range(width)],
                 sum(b.n for b in blocks), nulls)


# --------------------------------------------------------------- row sources

@dataclasses.dataclass(frozen=True, eq=False)
class ArrowRows:
    """Where a source's rows come from. The fields are its identity (what a saved
    iterator state is checked against); ``source`` is the Arrow object itself.

    Rows are read in units (a table's record batches, a Parquet file's row groups);
    ``unit_rows`` gives the rows of each when known before reading (None: a stream, or
    rows a filter removes). ``read(u, names)`` yields unit ``u``'s record batches with
    the columns ``names``.
    """

    kind: str
    where: str
    schema: str
    data: dataclasses.InitVar[Any] = None

    def __post_init__(self, data: Any) -> None:
        object.__setattr__(self, "source", data)
        object.__setattr__(self, "_lock", threading.Lock())
        object.__setattr__(self, "_cache", collections.OrderedDict())

    in_memory = False
    one_shot = False

    @property
    def unit_rows(self) -> list | None:
        raise NotImplementedError

    @property
    def unit_count(self) -> int:
        raise NotImplementedError

    def read(self, u: int, names: list, op: str):
        raise NotImplementedError

    def unit_starts(self) -> np.ndarray:
        rows = self.unit_rows
        starts = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(rows, out=starts[1:])
        return starts

    def unit_block(self, u: int, rules: tuple, order: tuple, op: str,
                   cache_bytes: int = UNIT_CACHE_BYTES) -> Block:
        """Unit ``u`` decoded whole, for random access. A table's units are kept (views
        of memory the table holds); others while they fit ``cache_bytes``, the last
        one read always."""
        key = (u, order, tuple((r.name, r.kind, None if r.fill is None else
                                np.asarray(r.fill).tobytes()) for r in rules))
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
        names = [rules[i].name for i in order]
        block = join_blocks([to_block(b, rules, order, op) for b in self.read(u, names, op)]
                            or [to_block(self.empty(names, op), rules, order, op)])
        with self._lock:
            self._cache[key] = block
            if not self.in_memory:
                total = sum(b.nbytes for b in self._cache.values())
                while len(self._cache) > 1 and total > cache_bytes:
                    _, old = self._cache.popitem(last=False)
                    total -= old.nbytes
        return block

    def empty(self, names: list, op: str):
        """A record batch of no rows with the columns ``names``."""
        pa = pyarrow(op)
        schema = self.arrow_schema
        return pa.RecordBatch.from_pylist([], schema=pa.schema([schema.field(n) for n in names]))


class TableRows(ArrowRows):
    """A ``pyarrow.Table`` (or RecordBatch) in memory; its units are its record batches."""

    in_memory = True

    @classmethod
    def of(cls, table) -> "TableRows":
        batches = table.to_batches() if hasattr(table, "to_batches") else [table]
        out = cls("table", f"table of {table.num_rows} rows in {len(batches)} record batches",
                  str(table.schema), data=table)
        object.__setattr__(out, "batches", [b for b in batches if b.num_rows] or batches[:1])
        object.__setattr__(out, "arrow_schema", table.schema)
        return out

    @property
    def unit_rows(self) -> list:
        return [b.num_rows for b in self.batches]

    @property
    def unit_count(self) -> int:
        return len(self.batches)

    def read(self, u: int, names: list, op: str):
        yield self.batches[u].select(names)


class StreamRows(ArrowRows):
    """A ``pyarrow.RecordBatchReader``: read once, in order. Its first batch is kept, so
    that a run that stopped within it (the first element read to type a function) does
    not use the stream up; a second run after that raises FailedPreconditionError."""

    one_shot = True

    @classmethod
    def of(cls, reader) -> "StreamRows":
        out = cls("record_batch_reader", f"record batch reader {id(reader):#x}",
                  str(reader.schema), data=reader)
        object.__setattr__(out, "arrow_schema", reader.schema)
        object.__setattr__(out, "first", None)
        object.__setattr__(out, "pulled", 0)
        return out

    @property
    def unit_rows(self) -> None:
        return None

    @property
    def unit_count(self) -> int:
        return 1

    def _pull(self):
        with self._lock:
            try:
                batch = self.source.read_next_batch()
            except StopIteration:
                return None
            object.__setattr__(self, "pulled", self.pulled + 1)
            if self.pulled == 1:
                object.__setattr__(self, "first", batch)
            return batch

    def read(self, u: int, names: list, op: str):
        if self.pulled > 1:
            raise FailedPreconditionError(
                f"{op}: a RecordBatchReader is read once, and an earlier iteration read it; "
                "pass a pyarrow.Table or a pyarrow.dataset.Dataset to iterate again", op)
        if self.pulled == 1:
            yield self.first.select(names)
        while True:
            batch = self._pull()
            if batch is None:
                return
            yield batch.select(names)


class FragmentRows(ArrowRows):
    """A ``pyarrow.dataset.Dataset`` (``ParquetDataset``'s files): Parquet files read a
    row group at a time (their units), other formats a file at a time. ``expression``
    (a ``pyarrow.compute.Expression``) skips row groups by their statistics and rows by
    value (then rows are known only once read); ``batch_rows`` is the rows of a record
    batch read."""

    @classmethod
    def of(cls, dataset, op: str, expression=None, batch_rows: int | None = None) -> "FragmentRows":
        units, rows, names = [], [], []
        try:
            for frag in dataset.get_fragments(filter=expression):
                path = getattr(frag, "path", "")
                if not hasattr(frag, "split_by_row_group"):
                    units.append(frag)
                    rows.append(None)
                    names.append(path)
                    continue
                for part in frag.split_by_row_group(filter=expression):
                    units.append(part)
                    rows.append(int(part.row_groups[0].num_rows))
                    names.append(f"{path} row group {part.row_groups[0].id}")
        except FileNotFoundError as e:
            raise NotFoundError(f"{op}: {e}", op) from None
        except OSError as e:
            raise DataLossError(f"{op}: cannot read the files' metadata: {e}", op) from None
        files = sorted({getattr(f, "path", "") for f in units})
        groups = sum(r is not None for r in rows)
        where = f"{files}, {groups} row groups" if groups == len(rows) else f"{files}"
        if expression is not None:
            where += f", filter {expression}"
        if batch_rows is not None:
            where += f", batch_rows={batch_rows}"
        out = cls("dataset", where, str(dataset.schema), data=dataset)
        fields = {"arrow_schema": dataset.schema, "units": units, "group_rows": rows,
                  "unit_names": names, "known": expression is None and groups == len(rows),
                  "expression": expression, "batch_rows": batch_rows}
        for name, value in fields.items():
            object.__setattr__(out, name, value)
        return out

    @property
    def unit_rows(self) -> list | None:
        return self.group_rows if self.known else None

    @property
    def unit_count(self) -> int:
        return len(self.units)

    def read(self, u: int, names: list, op: str):
        try:
            yield from self.units[u].to_batches(
                schema=self.arrow_schema, columns=names, filter=self.expression,
                batch_size=self.batch_rows or BATCH_ROWS, use_threads=True)
        except FileNotFoundError as e:
            raise NotFoundError(f"{op}: {self.unit_names[u]}: {e}", op) from None
        except (OSError, ValueError) as e:   # pyarrow's ArrowInvalid is a ValueError
            raise DataLossError(f"{op}: {self.unit_names[u]}: {e}", op) from None


# ---------------------------------------------------------------------- node

def parallel_reads(value: Any, op: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{op}: num_parallel_reads must be an integer, got {type(value).__name__}")
    value = int(value)
    if value != AUTOTUNE and value < 1:
        raise InvalidArgumentError(f"{op}: num_parallel_reads must be >= 1 or AUTOTUNE, got {value}", op)
    return value


@dataclasses.dataclass(frozen=True, eq=False)
class ArrowSource(Node):
    """The rows of Arrow data as dicts ``{column: value}`` (see the module docstring)."""

    rows_from: Any                 # ArrowRows
    rules: tuple                   # ColumnRule per column, in the user's column order
    num_parallel_reads: Any = arg_field(None)
    op = "from_arrow"
    fusion_role = "source"

    @property
    def order(self) -> tuple:
        """The rules in the element's leaf order (dict keys sorted)."""
        return tuple(sorted(range(len(self.rules)), key=lambda i: self.rules[i].name))

    @property
    def spec(self):
        return {r.name: r.spec for r in self.rules}

    def cardinality(self) -> int:
        rows = self.rows_from.unit_rows
        return UNKNOWN if rows is None else int(sum(rows))

    def describe(self) -> str:
        reads = "" if self.num_parallel_reads is None else f", num_parallel_reads={self.num_parallel_reads}"
        return (f"{self.label}({self.rows_from.where}, "
                f"columns={[r.name for r in self.rules]}{reads})")

    def open_chunks(self, ctx, state=None):
        return ArrowChunks(self, ctx, state)

    # ------------------------------------------------------- random access
    def random_access(self) -> str | None:
        if self.rows_from.one_shot:
            return "a RecordBatchReader is read once, in order"
        if self.rows_from.unit_rows is None:
            return "rows are known only once read (a filter, or files without row groups)"
        return None

    def cheap_gather(self) -> bool:
        # Rows of a table in memory are taken where they are; a Parquet file's are
        # decoded a row group at a time, so a shuffle keeps its buffer of rows and
        # reads the file in order.
        return self.rows_from.in_memory

    def gather(self, ctx, rows: np.ndarray) -> Chunk:
        """The rows at ``rows``: each unit they fall in is decoded and the rows taken
        from it. Decoded units are kept for the next gathers up to a quarter of the
        run's memory budget (``Options().memory_budget``; at least UNIT_CACHE_BYTES):
        a global shuffle over files whose chosen columns fit that decodes each row
        group once, as reading the whole table would, instead of once per chunk."""
        rows = np.ascontiguousarray(rows, np.int64)
        starts = self.rows_from.unit_starts()
        # one compiled pass: each row's unit, and the rows grouped by unit (in order)
        bad, offsets, order, local = group_by_unit(rows, starts)
        if bad >= 0:
            raise InvalidArgumentError(f"{self.label}: row {int(rows[bad])} is outside its "
                                       f"{int(starts[-1])} rows", self.op)
        memory = getattr(ctx, "memory", None)
        keep = max(UNIT_CACHE_BYTES, memory.limit // 4 if memory is not None else 0)
        n = len(rows)
        present = np.flatnonzero(np.diff(offsets))
        if len(present) == 0:
            return Chunk([c[:0] for c in self._empty_columns()], 0)
        # (chunk positions, rows within the unit) of each present unit's rows
        picked = [order[offsets[u]:offsets[u + 1]] for u in present]
        locals_ = [local[offsets[u]:offsets[u + 1]] for u in present]
        blocks = []
        for u, p, r in zip(present, picked, locals_):
            block = self.rows_from.unit_block(int(u), self.rules, self.order, self.op, keep)
            if block.nulls.rows:
                bad = block.nulls.among(r)
                if bad is not None:
                    raise self.null_error(int(rows[p[bad[0]]]), bad[1])
            blocks.append(block)
        if len(blocks) == 1:   # its rows, taken directly (one unit: already in order)
            whole = blocks[0].columns
            local = locals_[0]

            def array_of(k):
                return np.take(whole[k], local, 0)

            def taker(k):
                return functools.partial(col_take, whole[k], local)
        else:                  # each block's rows, then put in the chunk's order
            def array_of(k):
                return gather_units([b.columns[k] for b in blocks], picked, locals_)

            def taker(k):
                return functools.partial(_take_in_order, [b.columns[k] for b in blocks],
                                         locals_, picked)
        width = len(blocks[0].columns)
        arrays = [k for k in range(width) if all(isinstance(b.columns[k], np.ndarray) for b in blocks)]
        columns: list = [None] * width
        if len(arrays) > 1 and n >= 1 << 15:   # the columns on nbdata's threads (nogil)
            pool = shared_pool()
            futures = {k: pool.submit(array_of, k) for k in arrays}
            for k, f in futures.items():
                columns[k] = f.result()
        else:
            for k in arrays:
                columns[k] = array_of(k)
        # Strings are gathered when first read (decoded units never change): a fused
        # kernel that does not read a string column leaves it ungathered.
        for k in range(width):
            if columns[k] is None:   # strings, lists, arrays gather_units left to us
                take = taker(k)
                columns[k] = (StringColumn.deferred(n, functools.partial(_taken_parts, take))
                              if all(isinstance(b.columns[k], StringColumn) for b in blocks)
                              else take())
        return Chunk(columns, n)

    def _empty_columns(self) -> list:
        out = []
        for i in self.order:
            r = self.rules[i]
            if r.kind == "list":
                out.append(PackedRows(np.zeros(0, r.dtype), np.zeros(1, np.int64),
                                      np.zeros((0, 1), np.int64)))
                continue
            out.append(StringColumn(np.zeros(0, np.uint8), np.zeros(1, np.int64))
                       if r.kind == "string" else np.empty((0,) + r.shape, r.dtype))
        return out

    def null_error(self, row: int, column: str, where: str = "") -> InvalidArgumentError:
        return InvalidArgumentError(
            f"{self.label}: column {column!r} is null at row {row}{where}; give the column a "
            f"fill value with null_values={{{column!r}: ...}}, or skip such rows with "
            "ignore_errors()", self.op)

    # -------------------------------------------------------------- fusion
    def fusion_source(self, planner) -> ChunkSource:
        """A table in memory held in one record batch, with no null that is not filled:
        read in place (a shuffle over row numbers reads it at the shuffled rows). Other
        sources reach a fused stage as chunks."""
        data = self.rows_from
        if not data.in_memory or data.unit_count != 1:
            raise NotFusable(f"{self.op} reads its rows as they come, in chunks")
        batch = data.batches[0]
        for r in self.rules:
            if r.kind == "list":
                raise NotFusable(f"column {r.name!r} holds lists of varying length")
            if r.fill is None and batch.column(r.name).null_count:
                raise NotFusable(f"column {r.name!r} has nulls")
        leaves = []
        for i in self.order:
            r = self.rules[i]
            if r.kind == "string":
                leaves.append(OpaqueLeaf(r.spec))
                continue
            dt = numba_dtype(r.dtype, f"column {r.name!r}")
            leaves.append(ColumnLeaf(r.spec, dt if not r.shape else
                                     types.Array(dt, len(r.shape), "C")))
        return ChunkSource(self, leaves, self.cardinality(), self._in_place_reader)

    def _in_place_reader(self, ctx) -> SourceReader:
        block = self.rows_from.unit_block(0, self.rules, self.order, self.op)
        cols = block.columns
        kinds = [self.rules[i].kind for i in self.order]

        def args_of(c, kind):
            if kind == "string":
                return []
            return [c] if c.ndim == 1 else [c, c.reshape(len(c), -1)]

        args = [a for c, k in zip(cols, kinds) for a in args_of(c, k)]
        return SourceReader(block.n, args,
                            lambda lo, k: [a for c, kd in zip(cols, kinds)
                                           for a in args_of(col_slice(c, lo, lo + k), kd)],
                            lambda r: [c.row(r) if isinstance(c, StringColumn) else c[r]
                                       for c in cols])


def _take_in_order(parts: list, locals_: list, picked: list):
    """Rows ``locals_[b]`` of each block's column ``parts[b]``, which are the chunk's
    rows ``picked[b]``, in the chunk's order."""
    order = np.argsort(np.concatenate(picked), kind="stable")
    return col_take(col_concat([col_take(c, r) for c, r in zip(parts, locals_)]), order)


def _taken_parts(take) -> tuple:
    """(data, offsets) of the StringColumn ``take()`` returns."""
    column = take()
    return column.data, column.offsets


@dataclasses.dataclass(frozen=True, eq=False)
class ParquetSource(ArrowSource):
    """``nd.io.ParquetDataset``'s node: the rows of Parquet files, row group by row group."""

    op = "ParquetDataset"

    def split_boundaries(self) -> list | None:
        """The first row of each row group: ``distribute("distributed_epoch")`` makes
        each row group one split (a worker decodes only its own row groups)."""
        if self.rows_from.unit_rows is None:
            return None
        return [int(v) for v in self.rows_from.unit_starts()[:len(self.rows_from.unit_rows)]]


# ---------------------------------------------------------------- iteration

class UnitFeed:
    """The record batches of units ``u, u + 1, ...`` in order. With ``parallel`` > 1, up
    to that many units are read at once on threads (each read whole), ahead of use."""

    def __init__(self, node: ArrowSource, ctx, first: int, parallel: int):
        self.node, self.ctx = node, ctx
        self.data = node.rows_from
        self.names = [node.rules[i].name for i in node.order]
        self.next_unit = first
        self.parallel = parallel
        self.pool = None
        self.ahead: collections.deque = collections.deque()
        if parallel > 1 and self.data.unit_count > first + 1:
            self.pool = concurrent.futures.ThreadPoolExecutor(parallel, "nbdata-arrow")

    def _read_whole(self, u: int) -> list:
        with self.ctx.budget.worker():
            return list(self.data.read(u, self.names, self.node.op))

    def _fill(self) -> None:
        while len(self.ahead) < self.parallel and self.next_unit < self.data.unit_count:
            u = self.next_unit
            self.next_unit += 1
            self.ahead.append((u, self.pool.submit(self._read_whole, u)))

    def open_next(self):
        """(unit, iterator of its record batches), or None after the last unit."""
        if self.pool is None:
            if self.next_unit >= self.data.unit_count:
                return None
            u = self.next_unit
            self.next_unit += 1
            return u, iter(self.data.read(u, self.names, self.node.op))
        self._fill()
        if not self.ahead:
            return None
        u, future = self.ahead.popleft()
        batches = future.result()
        self._fill()
        return u, iter(batches)

    def close(self) -> None:
        if self.pool is not None:
            for _, f in self.ahead:
                f.cancel()
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = None
            self.ahead.clear()


class ArrowChunks(ChunkIter):
    """Rows in order, unit after unit, as views of the decoded record batches (a chunk
    never spans two batches). A null without a fill raises once the rows before it went
    out; the next call goes on after it.

    State: the unit being read, the rows of it handed out (or skipped), and the rows
    handed out in all (which the error messages count in)."""

    def __init__(self, node: ArrowSource, ctx, state):
        self.node, self.ctx = node, ctx
        reads = node.num_parallel_reads
        parallel = 1 if reads is None else (ctx.budget.total if reads == AUTOTUNE else int(reads))
        # A restored unit is one of the source's (or its count, at the end), the rows
        # skipped in it and handed out in all at most the source's.
        most = state_check.most_rows(node)
        self.unit = 0 if state is None else state_check.integer(
            state, "unit", 0, node.rows_from.unit_count)
        skip = 0 if state is None else state_check.integer(state, "offset", 0, most)
        self.pos = 0 if state is None else state_check.integer(state, "pos", 0, most)
        self.feed = UnitFeed(node, ctx, self.unit, parallel)
        self.batches = None
        self.offset = 0            # rows of the unit before the current block
        self.block: Block | None = None
        self.at = 0                # next row in the block
        self.ended = False
        opened = self.feed.open_next()
        if opened is None:
            self.ended = True
        else:
            self.unit, self.batches = opened
            self._skip(skip)

    def _skip(self, count: int) -> None:
        while count > 0:
            if not self._load():
                if count:
                    raise InvalidArgumentError(
                        f"restore: the state of {self.node.label} points past the end of its "
                        f"unit {self.unit}", self.node.op)
                return
            take = min(count, self.block.n - self.at)
            self.at += take
            count -= take

    def _load(self) -> bool:
        """Makes ``block`` hold an unread row, opening the next units as needed."""
        while self.block is None or self.at >= self.block.n:
            if self.block is not None:
                self.offset += self.block.n
                self.block = None
            if self.batches is None:
                return False
            batch = next(self.batches, None)
            if batch is None:
                opened = self.feed.open_next()
                if opened is None:
                    self.batches = None
                    self.ended = True
                    return False
                self.unit, self.batches = opened
                self.offset = 0
                continue
            self.block = to_block(batch, self.node.rules, self.node.order, self.node.op)
            self.at = 0
        return True

    def next(self, want: int) -> Chunk | None:
        if self.ended or not self._load():
            return None
        a = self.at
        b = min(self.block.n, a + max(1, want))
        bad = self.block.nulls.first(a, b)
        if bad is not None:
            if bad[0] == a:
                error = self._null_error(a, bad[1])
                self.at = a + 1
                self.pos += 1
                raise error
            b = bad[0]
        self.at = b
        self.pos += b - a
        block = self.block
        return block.slice(a, b) if (a, b) != (0, block.n) else Chunk(list(block.columns), block.n)

    def _null_error(self, j: int, column: str) -> InvalidArgumentError:
        """The error of a null at row ``j`` of the block: the row counted in the whole
        source where units' rows are known (else in the rows read), and its unit."""
        data = self.node.rows_from
        local = self.offset + j
        if data.unit_rows is not None:
            row = int(data.unit_starts()[self.unit]) + local
        else:
            row = self.pos
        names = getattr(data, "unit_names", None)
        where = f" ({names[self.unit]}, its row {local})" if names else ""
        return self.node.null_error(row, column, where)

    def save(self) -> dict:
        if self.ended:
            return {"unit": self.node.rows_from.unit_count, "offset": 0, "pos": self.pos}
        return {"unit": self.unit, "offset": self.offset + (self.at if self.block is not None else 0),
                "pos": self.pos}

    def close(self) -> None:
        self.feed.close()




# ------------------------------------------------------------------ building

def arrow_rows(data: Any, op: str) -> ArrowRows:
    """The row source of a Table, RecordBatch, RecordBatchReader or pyarrow Dataset."""
    pa = pyarrow(op)
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        return TableRows.of(data)
    if isinstance(data, pa.RecordBatchReader):
        return StreamRows.of(data)
    import pyarrow.dataset as pads
    if isinstance(data, pads.Dataset):
        return FragmentRows.of(data, op)
    raise TypeError(f"{op}: expected a pyarrow.Table, RecordBatch, RecordBatchReader or "
                    f"pyarrow.dataset.Dataset, got {type(data).__name__}")


def source_node(rows: ArrowRows, columns: Any, null_values: Any, num_parallel_reads: Any,
                op: str, name: str | None, node_class: type = ArrowSource) -> ArrowSource:
    """The source node over ``rows`` with its arguments checked against the schema."""
    names = list(rows.arrow_schema.names)
    if columns is None:
        chosen = names
    else:
        if isinstance(columns, (str, bytes)) or not hasattr(columns, "__iter__"):
            raise TypeError(f"{op}: columns must be a list of column names, got "
                            f"{type(columns).__name__} {columns!r:.60}")
        chosen = list(columns)
        for c in chosen:
            if not isinstance(c, str):
                raise TypeError(f"{op}: columns must be names (str), got {type(c).__name__} {c!r:.40}")
            if c not in names:
                raise InvalidArgumentError(f"{op}: no column {c!r}; the columns are {names}", op)
        if not chosen:
            raise InvalidArgumentError(f"{op}: columns must name at least one column", op)
    seen = [c for c in set(chosen) if chosen.count(c) > 1 or names.count(c) > 1]
    if seen:
        raise InvalidArgumentError(f"{op}: column names must be unique, {sorted(seen)} "
                                   "occur more than once", op)
    fills = {} if null_values is None else null_values
    if not isinstance(fills, collections.abc.Mapping):
        raise TypeError(f"{op}: null_values must be a dict {{column: fill value}}, got "
                        f"{type(null_values).__name__}")
    for c in fills:
        if c not in chosen:
            raise InvalidArgumentError(f"{op}: null_values names {c!r}, which is not one of "
                                       f"the columns read {chosen}", op)
    schema = rows.arrow_schema
    rules = tuple(column_rule(schema.field(c), fills.get(c), op) for c in chosen)
    return node_class(rows, rules, parallel_reads(num_parallel_reads, op), name=name)


__all__ = ["ArrowRows", "ArrowSource", "ColumnRule", "FragmentRows", "ParquetSource", "StreamRows",
           "TableRows", "arrow_rows", "column_rule", "narrow_reads", "pyarrow", "source_node"]


# ------------------------------------------------------- columns not read

# Ops that hand on their input's rows unchanged (or skip some): what their consumer
# reads of a row is what they read of it.
_ROWS_AS_THEY_ARE = frozenset(["shuffle", "global_shuffle", "prefetch", "take", "skip", "repeat",
                               "shard", "ignore_errors", "cache"])


def _columns_used(fn, spec) -> set | None:
    """The columns (keys of the dict ``spec``) whose values ``fn`` reads: from its
    recorded graph; None (all) where it has none."""
    if not isinstance(spec, dict) or not hasattr(fn, "recorded"):
        return None
    try:
        graph = fn.recorded()
        ops = graph.operations()
    except Exception:   # noqa: BLE001 - not recorded: ask the function itself
        return _keys_asked(getattr(fn, "fn", None), spec)
    names = sorted(spec)
    if len(graph.inputs) != len(names):
        return None
    read = {id(t) for op in ops for t in op.inputs}
    read |= {id(t) for t in graph.output_leaves}
    return {n for n, t in zip(names, graph.inputs) if id(t) in read}


class _KeyProbe(dict):
    """A sample element noting the keys a function asks for (``every``: it looked at
    the dict as a whole)."""

    def __init__(self, values):
        super().__init__(values)
        self.asked, self.every = set(), False

    def __getitem__(self, key):
        self.asked.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.asked.add(key)
        return super().get(key, default)

    def __contains__(self, key):
        self.asked.add(key)
        return super().__contains__(key)

    def _whole(name):
        def whole(self, *args, **kwargs):
            self.every = True
            return getattr(dict, name)(self, *args, **kwargs)
        return whole

    for _name in ("keys", "values", "items", "__iter__", "__len__", "copy", "__eq__", "__repr__",
                  "__reduce__", "__reduce_ex__", "__or__", "__ror__", "pop", "popitem", "setdefault"):
        locals()[_name] = _whole(_name)
    del _name, _whole


def _keys_asked(fn, spec) -> set | None:
    """The keys a Python function that cannot be recorded asks of a sample element
    (None: it failed on the sample, or looked at the whole dict)."""
    if fn is None:
        return None
    from nbdata.trace.abstract import sample_value
    import warnings
    probe = _KeyProbe(sample_value(spec, 1))
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            fn(probe)
    except Exception:   # noqa: BLE001 - then it may read anything
        return None
    return None if probe.every else probe.asked & set(spec)


def unread_fill(rule: ColumnRule) -> Any:
    """What stands for a null of a column the pipeline never reads (its value is not
    seen: zeros, an empty string or list)."""
    if rule.kind == "string":
        return b""
    if rule.kind == "list":
        return np.zeros(0, rule.dtype)
    zero = np.zeros(rule.shape, rule.dtype)
    return zero[()] if rule.shape == () else zero


def narrow_reads(plan: Node) -> Node:
    """The plan with each Arrow source's nulls checked only in the columns the pipeline
    reads: where a map (through filters and ops that pass rows on as they are) is the
    first to look at the rows, the columns its function (and the filters') never read
    get a fill for their nulls instead of an error. Everything else reads every column."""
    from nbdata.ops.filter import Filter
    from nbdata.ops.map import Map

    def visit(node: Node, used: set | None) -> Node:
        if isinstance(node, ArrowSource):
            if used is None:
                return node
            rules = tuple(r if r.name in used or r.fill is not None else
                          dataclasses.replace(r, fill=unread_fill(r)) for r in node.rules)
            same = all(a is b for a, b in zip(rules, node.rules))
            return node if same else dataclasses.replace(node, rules=rules)
        inputs = node.inputs
        if isinstance(node, Map):
            below = [_columns_used(node.fn, node.input.spec)]
        elif isinstance(node, Filter):
            mine = _columns_used(node.predicate, node.input.spec)
            below = [None if used is None or mine is None else used | mine]
        elif getattr(node, "op", None) in _ROWS_AS_THEY_ARE and len(inputs) == 1:
            below = [used]
        else:
            below = [None] * len(inputs)
        new = tuple(visit(c, u) for c, u in zip(inputs, below))
        if any(a is not b for a, b in zip(new, inputs)):
            return node.with_inputs(*new)
        return node

    return visit(plan, None)
