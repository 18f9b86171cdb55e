"""``ParquetDataset``: the rows of Parquet files, read a row group at a time (the
optional ``[arrow]`` extra: pyarrow)."""

from __future__ import annotations

import numbers
import os
from typing import Any

from nbdata.dataset import Dataset
from nbdata.errors import InvalidArgumentError, NotFoundError
from nbdata.ops.arrow_source import FragmentRows, ParquetSource, pyarrow, source_node

OP = "ParquetDataset"


def _paths(files: Any) -> list:
    if isinstance(files, (str, bytes)) or hasattr(files, "__fspath__"):
        files = [files]
    if not isinstance(files, (list, tuple)):
        raise TypeError(f"{OP}: files must be a path or a list of paths, got {type(files).__name__}")
    out = []
    for f in files:
        if hasattr(f, "__fspath__"):
            f = os.fspath(f)
        if isinstance(f, bytes):
            f = os.fsdecode(f)
        if not isinstance(f, str):
            raise TypeError(f"{OP}: files must be paths, got {type(f).__name__} {f!r:.40}")
        if not os.path.exists(f):
            raise NotFoundError(f"{OP}: {f}: No such file or directory", OP)
        out.append(f)
    if not out:
        raise InvalidArgumentError(f"{OP}: files must name at least one file", OP)
    return out


def _filter(filters: Any):
    """A ``pyarrow.compute.Expression`` from an expression or pyarrow's list-of-tuples
    form (``[("year", ">=", 2020)]``, or a list of such lists: their union)."""
    if filters is None:
        return None
    import pyarrow.compute as pc
    if isinstance(filters, pc.Expression):
        return filters
    if isinstance(filters, (list, tuple)):
        import pyarrow.parquet as pq
        try:
            return pq.filters_to_expression(list(filters))
        except (TypeError, ValueError) as e:
            raise InvalidArgumentError(f"{OP}: filters: {e}", OP) from None
    raise TypeError(f"{OP}: filters must be a pyarrow.compute.Expression or a list of "
                    f"(column, op, value) tuples, got {type(filters).__name__}")


class ParquetDataset(Dataset):
    """The rows of one or more Parquet files, as dicts ``{column name: value}``.

    Files are read lazily, one row group at a time (never a whole file), in order:
    file after file, row group after row group. Building the dataset reads only the
    files' metadata (schema, row groups). Columns map onto leaves as in
    ``Dataset.from_arrow``: numbers as zero-copy views of the decoded buffers, strings
    and binaries as string columns over Arrow's data and offsets, fixed-size lists as
    leaves of a fixed shape; a null raises InvalidArgumentError naming the column,
    the row (counted over all the files) and its file and row group, unless
    ``null_values`` gives the column a fill value.

    The row groups are the splits of ``distribute("distributed_epoch")``. An
    iterator's saved state is a row position (row group and row within it).
    ``shuffle`` reads the files in order and mixes rows in its buffer;
    ``nd.experimental.global_shuffle`` reads rows at random, decoding the row groups
    they fall in (the last ones decoded are kept, up to 64 MiB): cheap for files
    that fit that, slow for larger ones.

    Args:
        files: a path or a list of paths (a directory: the Parquet files in it).
        columns: the columns to read (default: all), names in a list; only those
            are decoded.
        batch_rows: rows decoded at a time (default 65,536), which bounds the
            memory a read takes whatever the files' row group size.
        filters: rows to keep, a ``pyarrow.compute.Expression`` or pyarrow's
            ``[(column, op, value), ...]`` form; row groups whose statistics rule
            them out are not read. With filters, the number of rows is known only
            once read (``cardinality()`` is UNKNOWN; no random access).
        num_parallel_reads: read this many row groups at once on threads, ahead of
            use (the order stays the same); ``nd.AUTOTUNE``: one per core; None
            reads them one after the other.
        null_values: ``{column: fill}``: the value a null of that column becomes.
        name: an optional name for the op.

    >>> import os, tempfile, pyarrow as pa, pyarrow.parquet as pq, nbdata as nd
    >>> path = os.path.join(tempfile.mkdtemp(), "a.parquet")
    >>> pq.write_table(pa.table({"x": [1, 2, 3], "s": ["a", "b", "c"]}), path, row_group_size=2)
    >>> [(int(e["x"]), e["s"]) for e in nd.io.ParquetDataset(path)]
    [(1, b'a'), (2, b'b'), (3, b'c')]
    """

    def __init__(self, files: Any, columns: Any = None, batch_rows: Any = None, filters: Any = None,
                 num_parallel_reads: Any = None, null_values: Any = None, name: str | None = None):
        pyarrow(OP)
        import pyarrow.dataset as pads
        paths = _paths(files)
        if batch_rows is not None:
            if isinstance(batch_rows, bool) or not isinstance(batch_rows, numbers.Integral):
                raise TypeError(f"{OP}: batch_rows must be an integer, got {type(batch_rows).__name__}")
            if int(batch_rows) < 1:
                raise InvalidArgumentError(f"{OP}: batch_rows must be >= 1, got {batch_rows}", OP)
            batch_rows = int(batch_rows)
        expression = _filter(filters)
        try:
            data = pads.dataset(paths, format="parquet")
        except FileNotFoundError as e:
            raise NotFoundError(f"{OP}: {e}", OP) from None
        except (OSError, ValueError) as e:
            raise InvalidArgumentError(f"{OP}: cannot read {paths}: {e}", OP) from None
        try:
            rows = FragmentRows.of(data, OP, expression, batch_rows)
        except (TypeError, ValueError) as e:   # a filter naming no column, or of a wrong type
            raise InvalidArgumentError(f"{OP}: filters {expression}: {e}", OP) from None
        node = source_node(rows, columns, null_values, num_parallel_reads, OP, name, ParquetSource)
        Dataset.__init__(self, node)
