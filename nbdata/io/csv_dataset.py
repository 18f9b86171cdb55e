"""``CsvDataset`` and ``make_csv_dataset`` (``tf.data.experimental``): CSV files read with
TextLineDataset's file reader, split into records (a double-quoted field may hold
newlines, ``nbdata/ops/csv_records.py``) and decoded by ``decode_csv``'s record kernel
(decode lifting runs it over whole record columns), so a ``map``/``batch`` after it
fuses as after any decoder.
"""

from __future__ import annotations

import collections
import csv
import gzip
import io
from typing import Any

import numpy as np

from nbdata.dataset import Dataset
from nbdata.errors import InvalidArgumentError
from nbdata.io.datasets import FileRecords, _filenames, _format
from nbdata.ops.csv_records import CsvRecords
from nbdata.ops.node import AUTOTUNE
from nbdata.primitives.csv import decode_csv
from nbdata.spec import string

_CSV_TYPES = (np.float32, np.float64, np.int32, np.int64)


def _defaults(record_defaults) -> list:
    """TF's rule: a dtype (or ``nd.string``) is a required column of that dtype."""
    if not isinstance(record_defaults, (list, tuple)):
        raise TypeError("CsvDataset: record_defaults must be a list")
    out = []
    for v in record_defaults:
        if not isinstance(v, (np.ndarray, np.generic, list, tuple, bytes, str, int, float)) \
                and isinstance(getattr(v, "dtype", None), np.dtype):
            v = v.dtype          # a dtype object that names its NumPy dtype (tf.int32's kind)
        if v is string or v is str or v is bytes:
            out.append(np.array([], dtype=object))
        elif isinstance(v, type) and issubclass(v, np.generic) or isinstance(v, np.dtype):
            dt = np.dtype(v)
            out.append(np.array([], dtype=object) if dt.kind in "OSU" else np.array([], dt))
        else:
            if np.ndim(v) > 1:
                raise InvalidArgumentError(
                    f"CsvDataset: Each record default should be at most rank 1, got a value "
                    f"of shape {np.shape(v)}", "CsvDataset")
            out.append(v)
    return out


class CsvDataset(Dataset):
    """The records of CSV files as tuples, one component per column
    (``tf.data.experimental.CsvDataset``): ``record_defaults`` gives each column's dtype
    and default (a dtype or an empty list: required); ``header`` skips each file's first
    record; ``select_cols`` / ``exclude_cols`` pick columns. A quoted field may span
    lines. Errors (a wrong field count, a bad number, bad quoting) are
    InvalidArgumentErrors with tf.data's messages.

    >>> import os, tempfile, numpy as np, nbdata as nd
    >>> path = os.path.join(tempfile.mkdtemp(), "a.csv")
    >>> _ = open(path, "w").write('a,b\\n1,"x\\ny"\\n2,z\\n')
    >>> [(int(a), b) for a, b in nd.experimental.CsvDataset(path, [np.int32(0), ""], header=True)]
    [(1, b'x\\ny'), (2, b'z')]
    """

    def __init__(self, filenames: Any, record_defaults: Any, compression_type: Any = None,
                 buffer_size: Any = None, header: bool = False, field_delim: str = ",",
                 use_quote_delim: bool = True, na_value: str = "", select_cols: Any = None,
                 exclude_cols: Any = None, name: str | None = None):
        op = "CsvDataset"
        defaults = _defaults(record_defaults)
        if select_cols is not None and exclude_cols is not None and len(select_cols) and \
                len(exclude_cols):
            raise InvalidArgumentError("Either select_cols or exclude_cols should be empty", op)
        exclude = None
        if exclude_cols is not None and len(exclude_cols):
            # (decode_csv takes every field not excluded; more than the defaults: an error)
            exclude = sorted(int(c) for c in exclude_cols)
            select_cols = None
        fields = len(defaults) if select_cols is None and exclude is None else 0
        names = _filenames(filenames, op)
        if isinstance(buffer_size, (int, np.integer)) and not isinstance(buffer_size, bool) \
                and buffer_size <= 0:
            raise InvalidArgumentError("buffer_size should be positive", op)
        fmt = _format("csv", op, compression_type, buffer_size)
        quote = bool(use_quote_delim)

        def one_file(f):
            lines = FileRecords(Dataset.from_tensors(f)._node, fmt)
            path = f.decode("utf-8", "replace") if isinstance(f, bytes) else str(f)
            delim = field_delim.encode() if isinstance(field_delim, str) else field_delim
            return Dataset(CsvRecords(lines, bool(header), quote, path, fields,
                                      bytes(delim)[0] if len(delim) == 1 else ord(",")))

        def decode(record):
            return tuple(decode_csv(record, defaults, field_delim, quote, na_value, select_cols,
                                    name="CsvDataset", _exclude_cols=exclude))

        records = names.flat_map(one_file)
        ds = records.map(decode, name=name)
        Dataset.__init__(self, ds._node, ds._options, ds._state)


# ------------------------------------------------------------ make_csv_dataset

def _is_int(text: str, bits: int) -> bool:
    """TF's test: the value parses as that NumPy integer (int32: and equals its int64)."""
    try:
        if bits == 32:
            return np.int32(text) == np.int64(text)
        np.int64(text)
        return True
    except (ValueError, OverflowError):
        return False


def _is_float(text: str, dtype) -> bool:
    """TF's test: the value parses as ``dtype`` and is below inf (so "nan", "inf" and
    values too large for the type are not that type)."""
    try:
        with np.errstate(over="ignore"):
            return bool(dtype(text) < np.inf)
    except (ValueError, OverflowError):
        return False


_TYPES = [np.int32, np.int64, np.float32, np.float64, string]
_CHECKS = [lambda s: _is_int(s, 32), lambda s: _is_int(s, 64),
           lambda s: _is_float(s, np.float32), lambda s: _is_float(s, np.float64),
           lambda s: True]


def _infer_type(text: str, na_value: str, previous):
    """The least permissive type that fits ``text`` and every value seen before."""
    if text in ("", na_value):
        return previous
    start = 0 if previous is None else _TYPES.index(previous)
    for i in range(start, len(_TYPES)):
        if _CHECKS[i](text):
            return _TYPES[i]
    return string


def _open_text(path: str, compression_type, encoding: str = "utf-8"):
    if compression_type == "GZIP":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding=encoding, newline="")
    if compression_type not in (None, ""):
        raise ValueError(f"make_csv_dataset: `compression_type` {compression_type} is not "
                         "supported for probing columns")
    return open(path, "r", encoding=encoding, newline="")


def _reader(f, field_delim: str, use_quote_delim: bool):
    return csv.reader(f, delimiter=field_delim,
                      quoting=csv.QUOTE_MINIMAL if use_quote_delim else csv.QUOTE_NONE)


def _column_names(paths: list, field_delim, use_quote_delim, compression_type,
                  encoding: str = "utf-8") -> list:
    names = None
    for path in paths:
        with _open_text(path, compression_type, encoding) as f:
            try:
                row = next(_reader(f, field_delim, use_quote_delim))
            except StopIteration:
                raise ValueError(f"make_csv_dataset: Received StopIteration when reading the "
                                 f"header line of {paths[0]}.  Empty file?") from None
        if names is None:
            names = row
        elif row != names:
            raise ValueError("make_csv_dataset: Files have different column names in the "
                             "header row.")
    return names


def _infer_defaults(paths, ncols, field_delim, use_quote_delim, na_value, header, rows,
                    select, compression_type, encoding: str = "utf-8") -> list:
    select = list(range(ncols)) if select is None else select
    types = [None] * len(select)
    seen = 0
    for path in paths:
        with _open_text(path, compression_type, encoding) as f:
            reader = _reader(f, field_delim, use_quote_delim)
            if header:
                next(reader, None)
            for row in reader:
                if rows is not None and seen >= rows:
                    break
                if len(row) != ncols:
                    raise ValueError("make_csv_dataset: Problem inferring types: CSV row has "
                                     "different number of fields than expected.")
                for j, c in enumerate(select):
                    types[j] = _infer_type(row[c], na_value, types[j])
                seen += 1
        if rows is not None and seen >= rows:
            break
    return [b"" if t is string or t is None else t(0) for t in types]


def _select_indices(select_columns, names: list) -> list:
    index = {n: i for i, n in enumerate(names)}
    out = []
    for v in select_columns:
        if isinstance(v, (int, np.integer)):
            if v < 0 or v >= len(names):
                raise ValueError(f"make_csv_dataset: Column index {v} specified in "
                                 "select_columns out of valid range.")
            out.append(int(v))
        elif v not in index:
            raise ValueError(f"make_csv_dataset: Value '{v}' specified in select_columns not a "
                             "valid column index or name.")
        else:
            out.append(index[v])
    result = sorted(set(out))
    if len(result) != len(select_columns):
        raise ValueError("make_csv_dataset: select_columns contains duplicate columns")
    return result


def make_csv_dataset(file_pattern: Any, batch_size: int, column_names: Any = None,
                     column_defaults: Any = None, label_name: Any = None,
                     select_columns: Any = None, field_delim: str = ",",
                     use_quote_delim: bool = True, na_value: str = "", header: bool = True,
                     num_epochs: Any = None, shuffle: bool = True,
                     shuffle_buffer_size: int = 10000, shuffle_seed: Any = None,
                     prefetch_buffer_size: Any = None, num_parallel_reads: Any = None,
                     sloppy: bool = False, num_rows_for_inference: Any = 100,
                     compression_type: Any = None, ignore_errors: bool = False,
                     encoding: str = "utf-8") -> Dataset:
    """Batches of CSV rows as ``{column name: batch}`` dicts (with ``label_name``:
    ``(features, label)`` pairs), tf.data's ``make_csv_dataset``: column names from the
    files' header when not given, column types inferred from the first
    ``num_rows_for_inference`` rows when ``column_defaults`` is not given (int32, int64,
    float32, float64, then string; defaults 0 / ""), files (and, with ``shuffle``, rows)
    shuffled, repeated ``num_epochs`` times (None: forever, and then full batches only),
    prefetched. ``encoding`` is the files' text encoding, used to read the header and
    the rows for type inference; string values stay the files' bytes.

    >>> import os, tempfile, nbdata as nd
    >>> path = os.path.join(tempfile.mkdtemp(), "a.csv")
    >>> _ = open(path, "w").write("x,name\\n1,a\\n2,b\\n3,c\\n")
    >>> ds = nd.experimental.make_csv_dataset(path, 2, num_epochs=1, shuffle=False)
    >>> b = next(iter(ds))
    >>> b["x"].tolist(), b["x"].dtype.name, b["name"].tolist()
    ([1, 2], 'int32', [b'a', b'b'])
    """
    from nbdata.ops.list_files import match_files
    paths = sorted({bytes(p).decode("utf-8", "surrogateescape") for p in match_files(
        file_pattern if isinstance(file_pattern, (str, bytes)) else list(file_pattern))})
    if num_parallel_reads is None:
        num_parallel_reads = 1
    if prefetch_buffer_size is None:
        prefetch_buffer_size = AUTOTUNE
    if column_names is None:
        if not header:
            raise ValueError("make_csv_dataset: Cannot infer column names without a header line.")
        column_names = _column_names(paths, field_delim, use_quote_delim, compression_type,
                                     encoding)
    column_names = list(column_names)
    if len(column_names) != len(set(column_names)):
        raise ValueError("make_csv_dataset: Cannot have duplicate column names.")
    if select_columns is not None:
        select_columns = _select_indices(select_columns, column_names)
    if column_defaults is not None:
        column_defaults = _defaults(list(column_defaults))
    else:
        column_defaults = _infer_defaults(paths, len(column_names), field_delim,
                                          use_quote_delim, na_value, header,
                                          num_rows_for_inference, select_columns,
                                          compression_type, encoding)
    if select_columns is not None and len(column_defaults) != len(select_columns):
        raise ValueError("make_csv_dataset: If specified, column_defaults and select_columns "
                         "must have same length.")
    if select_columns is not None and len(column_names) > len(select_columns):
        column_names = [column_names[i] for i in select_columns]
    if label_name is not None and label_name not in column_names:
        raise ValueError("make_csv_dataset: `label_name` provided must be one of the columns.")

    files = Dataset.from_tensor_slices(np.array([p.encode() for p in paths], dtype=object))
    if shuffle:
        files = files.shuffle(len(paths), shuffle_seed)

    def one_file(f):
        ds = CsvDataset(f, column_defaults, compression_type=compression_type, header=header,
                        field_delim=field_delim, use_quote_delim=use_quote_delim,
                        na_value=na_value, select_cols=select_columns)
        return ds.ignore_errors() if ignore_errors else ds

    ds = files.interleave(one_file, cycle_length=int(num_parallel_reads) if
                          num_parallel_reads != AUTOTUNE else None, block_length=1,
                          num_parallel_calls=None if int(num_parallel_reads) == 1
                          else num_parallel_reads,
                          deterministic=False if sloppy else None)
    if shuffle:
        ds = ds.shuffle(shuffle_buffer_size, shuffle_seed)
    if num_epochs != 1:
        ds = ds.repeat(num_epochs)
    ds = ds.batch(batch_size, drop_remainder=num_epochs is None)
    names = list(column_names)

    def to_dict(*columns):
        features = collections.OrderedDict(zip(names, columns))
        if label_name is not None:
            label = features.pop(label_name)
            return dict(features), label
        return dict(features)

    ds = ds.map(to_dict)
    return ds.prefetch(prefetch_buffer_size) if prefetch_buffer_size != 0 else ds
