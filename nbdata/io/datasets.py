"""File datasets: ``TFRecordDataset``, ``TextLineDataset``, ``FixedLengthRecordDataset``.

Each is a :class:`FileRecords` node over a dataset of file names: it reads the files
one after the other, in large blocks, and hands out records as chunks (uint8 data +
int64 offsets), so the ops after it work on whole columns. ``num_parallel_reads=n``
interleaves ``n`` files (block 1, as tf.data does), each read on its own thread.
Building a file dataset never touches the file system: a missing file raises
NotFoundError when iteration reaches it, a directory FailedPreconditionError.

GZIP and ZLIB files are read as TensorFlow reads them: a stream that stops early (a cut
file, a writer that only flushed) ends where its bytes stop inflating, and the format
then decides (a TFRecord cut inside a record's data is DataLossError, a cut text line
is a shorter last line); concatenated GZIP members are one stream, what follows a ZLIB
stream is ignored; a corrupt stream gives every record that inflated before the damage
(in the steps TensorFlow inflates it: 256 KB, or a text or fixed-length dataset's
buffer_size), then DataLossError naming the compressed offsets.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any

import numpy as np

from nbdata import state_check
from nbdata.chunks import Chunk, StringColumn
from nbdata.dataset import Dataset
from nbdata.errors import InvalidArgumentError
from nbdata.kernels.files import compression_name, open_reader, path_of
from nbdata.ops.node import AUTOTUNE, UNKNOWN, UnaryNode, arg_field
from nbdata.ops.runtime import ChunkIter, RowReader
from nbdata.spec import TensorSpec, is_dataset, string


@dataclasses.dataclass(frozen=True, eq=False)
class FileRecords(UnaryNode):
    """The records of each file named by ``input`` (scalar strings), file after file.

    ``fmt`` describes the format: ``kind`` ("tfrecord", "text" or "fixed"),
    ``compression``, ``buffer_size`` and, for fixed-length records, ``record_bytes``,
    ``header_bytes`` and ``footer_bytes``.
    """

    fmt: Any = arg_field()
    op = "file_records"

    @property
    def spec(self):
        return TensorSpec((), string)

    def cardinality(self) -> int:
        return UNKNOWN

    def describe(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.fmt.items()
                         if k not in ("kind", "op") and v not in (None, "", 0))
        return f"{self.fmt['op']}({args})"

    def open_chunks(self, ctx, state=None):
        return FileRecordChunks(self, ctx, state)


class FileRecordChunks(ChunkIter):
    """Chunks of records, file after file. After a read error the file is given up
    (its reader is closed) and the next call goes on with the next file, as tf.data's
    readers do under ``ignore_errors``.

    State: the file-name input's state before the current file, the file's name and
    its reader's state (the offset of the next record)."""

    def __init__(self, node: FileRecords, ctx, state):
        self.node, self.ctx = node, ctx
        if state is not None:   # the names' state, and the file's reader's while one is open
            state_check.record(state, "names", "current", "reader")
            state_check.nested(state, "names", False)
            state_check.nested(state, "reader", state["current"] is None)
        self.names = RowReader(ctx, node.input, None if state is None else state["names"], 64)
        self.reader = None
        self.before = None
        self.current = None
        if state is not None and state["current"] is not None:
            self.before = state["names"]
            ok, name = self.names.next_element()
            if ok:
                self.current = path_of(name)
                self.reader = open_reader(node.fmt, self.current, state["reader"],
                                          getattr(ctx, "budget", None))

    def next(self, want: int):
        while True:
            if self.reader is None:
                self.before = self.names.save()
                ok, name = self.names.next_element()
                if not ok:
                    return None
                self.current = path_of(name)
                self.reader = open_reader(self.node.fmt, self.current, None,
                                          getattr(self.ctx, "budget", None))
            try:
                column = self.reader.next(want)
            except Exception:
                self._drop()
                raise
            if column is not None:
                return Chunk([column], len(column))
            self._drop()

    def _drop(self) -> None:
        if self.reader is not None:
            self.reader.close()
        self.reader = None
        self.current = None

    def save(self) -> dict:
        if self.reader is None:
            return {"names": self.names.save(), "current": None, "reader": None}
        return {"names": self.before, "current": self.current, "reader": self.reader.save()}

    def close(self) -> None:
        self._drop()
        self.names.close()


# ------------------------------------------------------------------ user API

def _tf_dtype_name(value: Any) -> str:
    """The dtype TF would give ``value`` as a tensor: Python ints and floats are 32-bit."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int32"
    if isinstance(value, float):
        return "float32"
    try:
        return np.asarray(value).dtype.name
    except Exception:
        return type(value).__name__


def _filenames(filenames: Any, op: str) -> Dataset:
    """A dataset of scalar file names from str, bytes, os.PathLike, a list or array of
    those, or a Dataset of scalar strings."""
    if is_dataset(filenames):
        spec = filenames.element_spec
        if isinstance(spec, TensorSpec) and spec.dtype is not string:
            dtype = getattr(spec.dtype, "name", spec.dtype)
            raise TypeError(f"{op}: The `filenames` argument must contain `tf.string` elements. "
                            f"Got a dataset of `tf.{dtype}` elements. (a dataset of filenames "
                            f"must have scalar string elements, got {spec})")
        if isinstance(spec, TensorSpec) and spec.shape not in ((), None):
            raise TypeError(f"{op}: The `filenames` argument must contain `tf.string` elements "
                            f"of shape [] (i.e. scalars). (a dataset of filenames must have "
                            f"scalar string elements, got {spec})")
        if not isinstance(spec, TensorSpec):
            raise TypeError(f"{op}: a dataset of filenames must have scalar string elements, "
                            f"got {spec}")
        return filenames
    if isinstance(filenames, (str, bytes)) or hasattr(filenames, "__fspath__"):
        names = [filenames]
    elif isinstance(filenames, np.ndarray):
        if filenames.dtype.kind not in "OSU":
            raise TypeError(f"{op}: The `filenames` argument must contain `tf.string` elements. "
                            f"Got `tf.{filenames.dtype.name}` elements. (filenames must be "
                            f"strings, got an array of {filenames.dtype})")
        names = filenames.reshape(-1).tolist()
    elif isinstance(filenames, (list, tuple)):
        names = list(filenames)
    else:
        raise TypeError(f"{op}: The `filenames` argument must contain `tf.string` elements. "
                        f"Got `tf.{_tf_dtype_name(filenames)}` elements. (filenames must be a "
                        f"string, a list or array of strings, or a Dataset of strings, got "
                        f"{type(filenames).__name__})")
    out = np.empty(len(names), dtype=object)
    for i, n in enumerate(names):
        if isinstance(n, np.ndarray) and n.ndim == 0:
            n = n.item()
        if hasattr(n, "__fspath__"):
            n = n.__fspath__()
        if isinstance(n, str):
            n = n.encode("utf-8", "surrogateescape")
        if not isinstance(n, (bytes, np.bytes_)):
            raise TypeError(f"{op}: The `filenames` argument must contain `tf.string` elements. "
                            f"Got `tf.{_tf_dtype_name(n)}` elements. (filenames must be "
                            f"strings, got {type(n).__name__} {n!r:.40})")
        out[i] = bytes(n)
    return Dataset.from_tensor_slices(out)


def _size_arg(value: Any, op: str, name: str, minimum: int = 0, allow_none: bool = True):
    if value is None and allow_none:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        raise TypeError(f"{op}: {name} must be an integer, got {type(value).__name__} {value!r:.40}")
    value = int(value)
    if value < minimum:
        raise InvalidArgumentError(f"{op}: {name} must be >= {minimum}, got {value}", op)
    return value


def _parallel_reads(value: Any, op: str):
    if value is None:
        return None
    if isinstance(value, numbers.Integral) and int(value) == AUTOTUNE:
        return AUTOTUNE
    return _size_arg(value, op, "num_parallel_reads", minimum=1)


class _FileDataset(Dataset):
    """Base of the file datasets: records of each file, files read in order (or
    interleaved ``num_parallel_reads`` at a time)."""

    def _build(self, filenames: Any, fmt: dict, num_parallel_reads: Any, name: str | None):
        op = fmt["op"]
        reads = _parallel_reads(num_parallel_reads, op)
        names = _filenames(filenames, op)
        if reads is None:
            node = FileRecords(names._node, fmt, name=name)
            Dataset.__init__(self, node, names._options, names._state)
            return
        # One file per interleave slot, a record at a time from each (tf.data's order).
        one_file = lambda f: Dataset(FileRecords(Dataset.from_tensors(f)._node, fmt))  # noqa: E731
        ds = names.interleave(one_file, cycle_length=reads, block_length=1, num_parallel_calls=reads)
        Dataset.__init__(self, ds._node, ds._options, ds._state)


class TFRecordDataset(_FileDataset):
    """The records of one or more TFRecord files (``tf.data.TFRecordDataset``).

    Every record's length and data are checked against their masked CRC32C; a
    mismatch or a file that ends inside a record raises DataLossError naming the
    file and the byte offset (in the decompressed stream), and that file's reading
    ends there (``ignore_errors()`` goes on with the next file).

    Args:
        filenames: a path, a list or array of paths, or a Dataset of scalar strings.
        compression_type: None or "" (plain), "GZIP" or "ZLIB".
        buffer_size: bytes read from a file at a time (default 1 MiB).
        num_parallel_reads: read this many files at once, interleaving their records
            one at a time (``nd.AUTOTUNE``: one per core); None reads files in order.
        name: an optional name for the op.

    >>> import os, tempfile, nbdata as nd
    >>> path = os.path.join(tempfile.mkdtemp(), "a.tfrecord")
    >>> with nd.io.TFRecordWriter(path) as w:
    ...     w.write(b"first"); w.write(b"second")
    >>> list(nd.TFRecordDataset(path))
    [b'first', b'second']
    """

    def __init__(self, filenames: Any, compression_type: Any = None, buffer_size: Any = None,
                 num_parallel_reads: Any = None, name: str | None = None):
        fmt = _format("tfrecord", "TFRecordDataset", compression_type, buffer_size)
        self._build(filenames, fmt, num_parallel_reads, name)


def _format(kind: str, op: str, compression_type: Any, buffer_size: Any) -> dict:
    """The format description every file dataset has (see ``FileRecords.fmt``)."""
    return {"kind": kind, "op": op, "compression": compression_name(compression_type, op),
            "buffer_size": _size_arg(buffer_size, op, "buffer_size")}


class TextLineDataset(_FileDataset):
    """The lines of one or more text files (``tf.data.TextLineDataset``), without their
    line endings: lines end at ``\\n`` and every ``\\r`` byte is dropped, as in
    TensorFlow; a last line without a newline is still a line.

    Args:
        filenames: a path, a list or array of paths, or a Dataset of scalar strings.
        compression_type: None or "" (plain), "GZIP" or "ZLIB".
        buffer_size: bytes read from a file at a time (default 1 MiB).
        num_parallel_reads: read this many files at once, interleaving their lines.
        name: an optional name for the op.

    >>> import os, tempfile, nbdata as nd
    >>> path = os.path.join(tempfile.mkdtemp(), "a.txt")
    >>> _ = open(path, "wb").write(b"one\\r\\ntwo\\nthree")
    >>> list(nd.TextLineDataset(path))
    [b'one', b'two', b'three']
    """

    def __init__(self, filenames: Any, compression_type: Any = None, buffer_size: Any = None,
                 num_parallel_reads: Any = None, name: str | None = None):
        fmt = _format("text", "TextLineDataset", compression_type, buffer_size)
        self._build(filenames, fmt, num_parallel_reads, name)


class FixedLengthRecordDataset(_FileDataset):
    """Records of ``record_bytes`` bytes from one or more files
    (``tf.data.FixedLengthRecordDataset``), after ``header_bytes`` and before
    ``footer_bytes``. A body that is not a whole number of records raises
    InvalidArgumentError (also a DataLossError) naming the file, before any record of
    it; for compressed files (size unknown until the end) after its whole records, as
    TensorFlow does. A file shorter than its header and footer raises the same error
    (TensorFlow's unsigned size arithmetic makes that case read nothing or fail
    with an internal error). A compressed file that fails to inflate gives its whole
    records before the damage, then DataLossError (TensorFlow ends it quietly there).

    Args:
        filenames: a path, a list or array of paths, or a Dataset of scalar strings.
        record_bytes: the size of each record (> 0).
        header_bytes: bytes to skip at the start of each file (default 0).
        footer_bytes: bytes to ignore at the end of each file (default 0).
        buffer_size: bytes read from a file at a time (default 1 MiB).
        compression_type: None or "" (plain), "GZIP" or "ZLIB".
        num_parallel_reads: read this many files at once, interleaving their records.
        name: an optional name for the op.

    >>> import os, tempfile, nbdata as nd
    >>> path = os.path.join(tempfile.mkdtemp(), "a.bin")
    >>> _ = open(path, "wb").write(b"HDaabbccF")
    >>> list(nd.FixedLengthRecordDataset(path, 2, header_bytes=2, footer_bytes=1))
    [b'aa', b'bb', b'cc']
    """

    def __init__(self, filenames: Any, record_bytes: Any, header_bytes: Any = None,
                 footer_bytes: Any = None, buffer_size: Any = None, compression_type: Any = None,
                 num_parallel_reads: Any = None, name: str | None = None):
        op = "FixedLengthRecordDataset"
        fmt = _format("fixed", op, compression_type, buffer_size) | {
               "record_bytes": _size_arg(record_bytes, op, "record_bytes", 1, allow_none=False),
               "header_bytes": _size_arg(header_bytes, op, "header_bytes") or 0,
               "footer_bytes": _size_arg(footer_bytes, op, "footer_bytes") or 0}
        self._build(filenames, fmt, num_parallel_reads, name)


__all__ = ["FileRecords", "FixedLengthRecordDataset", "StringColumn", "TFRecordDataset",
           "TextLineDataset"]
