"""TF1 readers: ``TFRecordReader``, ``TextLineReader``, ``FixedLengthRecordReader``,
``WholeFileReader``, ``IdentityReader``.

A reader takes work items (file names) from a queue and hands out ``(key, value)``
records: ``read`` one at a time, ``read_up_to`` up to ``n`` from one file. Keys are
TF1's: ``b"<file>:<n>"`` with the byte offset of the record (TFRecord), the 1-based
line number (text, header lines counted) or the 0-based record index (fixed
length); the file name itself for whole files, the work string for the identity
reader. Each session holds a :class:`ReaderState` per reader: the file being read,
read in large blocks by nbdata's file readers, and the counters.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from nbdata.chunks import StringColumn
from nbdata.errors import InvalidArgumentError, OpError, OutOfRangeError, UnimplementedError
from nbdata.kernels import files
from nbdata.spec import TensorSpec, string
from nbdata.trace.graph import Operation, Tensor, get_default_graph
from nbdata.train.queues import QueueBase, _objects

_CHUNK = 1024   # records read from a file at a time


class ReaderBase:
    """What every reader shares: the ops ``read``, ``read_up_to``, the counters and
    ``reset`` (``tf.ReaderBase``)."""

    kind = "Reader"
    supports_serialize = False
    # A work item that cannot be opened: given up (the next read goes on), or, for the
    # whole-file reader, failing on every read as TF1's does.
    open_errors_stick = False

    def __init__(self, name: str | None = None):
        self.graph = get_default_graph()
        self.name = self.graph._op_name(name or self.default_name)
        self._short = self.name.rsplit("/", 1)[-1]   # default op names (scoped anyway)

    default_name = "Reader"

    def _state(self, run) -> "ReaderState":
        return run.session.resource(self, lambda: ReaderState(self))

    # ------------------------------------------------------------- ops
    def read(self, queue: QueueBase, name: str | None = None):
        """``(key, value)`` string tensors of the next record, taking a new work item
        from ``queue`` when the current one is done. At the end (the queue closed and
        empty) running it raises OutOfRangeError."""
        _check_queue(queue)

        def fn(run, values):
            return list(self._state(run).read(run, queue._state(run), run.uses(op.outputs[0])))
        op = Operation(self.graph, "ReaderReadV2", name or f"{self._short}_ReaderReadV2", [], fn,
                       [TensorSpec((), string), TensorSpec((), string)], kind="stateful")
        op.reader, op.queue = self, queue
        return tuple(op.outputs)

    def read_up_to(self, queue: QueueBase, num_records, name: str | None = None):
        """``(keys, values)`` vectors of up to ``num_records`` records, all from one work
        item (fewer at the end of a file)."""
        _check_queue(queue)
        inputs = [num_records] if isinstance(num_records, Tensor) else []
        static = None if inputs else int(num_records)

        def fn(run, values):
            n = int(values[0]) if inputs else static
            if n <= 0:
                raise InvalidArgumentError(f"{self.name}: num_records must be positive, got {n}")
            keys, vals = self._state(run).read_chunk(run, queue._state(run), n,
                                                     run.uses(op.outputs[0]))
            return [_objects(keys if keys is not None else [b""] * len(vals)), vals.to_records()]
        op = Operation(self.graph, "ReaderReadUpToV2", name or f"{self._short}_ReaderReadUpToV2",
                       inputs, fn, [TensorSpec((None,), string)] * 2, kind="stateful")
        op.reader, op.queue = self, queue
        return tuple(op.outputs)

    def num_records_produced(self, name: str | None = None) -> Tensor:
        return self._counter("produced", name or f"{self._short}_NumRecordsProduced")

    def num_work_units_completed(self, name: str | None = None) -> Tensor:
        return self._counter("completed", name or f"{self._short}_NumWorkUnitsCompleted")

    def _counter(self, field: str, name: str) -> Tensor:
        def fn(run, values):
            return [np.int64(getattr(self._state(run), field))]
        return Operation(self.graph, "ReaderCounter", name, [], fn, [TensorSpec((), np.int64)],
                         kind="stateful").outputs[0]

    def reset(self, name: str | None = None) -> Operation:
        """An op returning the reader to its initial state (no current file, counters 0)."""
        def fn(run, values):
            self._state(run).reset()
        return Operation(self.graph, "ReaderResetV2", name or f"{self._short}_ReaderResetV2", [], fn,
                         [], kind="stateful")

    def serialize_state(self, name: str | None = None):
        raise UnimplementedError(f"{type(self).__name__} does not support serializing its state "
                                 "(save input position with nd.train.Saver over datasets instead)")

    restore_state = serialize_state

    # ----------------------------------------------------------- records
    def open_work(self, work: bytes) -> "WorkRecords":
        """The records of one work item."""
        raise NotImplementedError


def _check_queue(queue) -> None:
    if not isinstance(queue, QueueBase):
        raise TypeError(f"a reader reads work items from a queue (nd.FIFOQueue, or what "
                        f"string_input_producer returns), got {type(queue).__name__}")


class WorkRecords:
    """The records of one work item, chunk after chunk: ``next(want)`` gives
    ``(values, numbers)`` — a StringColumn and the int64 key numbers of its rows — or
    None at the end (``exhausted`` when that is known without reading)."""

    exhausted = False

    def __init__(self, work: bytes):
        self.work = work

    def keys(self, numbers: np.ndarray) -> list:
        prefix = self.work + b":"
        return [prefix + str(k).encode() for k in numbers.tolist()]

    def close(self) -> None:
        pass


class _FormatRecords(WorkRecords):
    """Records cut by one of nbdata's file readers (``nbdata.kernels.files``)."""

    def __init__(self, work: bytes, reader):
        super().__init__(work)
        self.reader = reader

    def close(self) -> None:
        self.reader.close()


class _TFRecords(_FormatRecords):
    def next(self, want: int):
        start = self.reader.window.offset
        column = self.reader.next(want)
        if column is None:
            return None
        offs = column.offsets
        # Each frame is 12 header bytes, the payload and a 4-byte CRC.
        numbers = start + (offs[:-1] - offs[0]) + 16 * np.arange(len(column), dtype=np.int64)
        return column, numbers


class _Lines(_FormatRecords):
    def __init__(self, work, reader, skip: int):
        super().__init__(work, reader)
        self.skip = skip
        self.line = 0

    def next(self, want: int):
        while self.skip:
            column = self.reader.next(self.skip)
            if column is None:
                return None
            self.skip -= len(column)
            self.line += len(column)
        column = self.reader.next(want)
        if column is None:
            return None
        numbers = self.line + 1 + np.arange(len(column), dtype=np.int64)
        self.line += len(column)
        return column, numbers


class _ReaderLines(files.TextLineReader):
    op = "TextLineReader"
    one_cr = True


class _Fixed(WorkRecords):
    """Fixed-length records starting every ``hop`` bytes after the header, while a whole
    record fits before the footer (a partial last record is dropped, as TF1 does)."""

    def __init__(self, work, path, compression, record_bytes, header_bytes, footer_bytes, hop):
        super().__init__(work)
        stream = files.ByteStream(path, compression, files.DEFAULT_BLOCK, "FixedLengthRecordReader")
        # A damaged compressed file: the records whose bytes (and the footer's lookahead)
        # inflated before the damage are read first, then its error (as TF1 reads them).
        self.error: OpError | None = None
        parts = []
        try:
            while True:
                part = stream.read(files.DEFAULT_BLOCK)
                if not part:
                    break
                parts.append(part)
        except OpError as e:
            self.error = e
        finally:
            stream.close()
        data = np.frombuffer(b"".join(parts), np.uint8)
        body_end = len(data) - footer_bytes
        if header_bytes + footer_bytes > len(data):
            if self.error is not None:
                raise self.error
            raise OutOfRangeError("reached end of file", "FixedLengthRecordReader")
        hop = hop or record_bytes
        count = max(0, (body_end - header_bytes - record_bytes) // hop + 1)
        starts = header_bytes + hop * np.arange(count, dtype=np.int64)
        if hop == record_bytes:
            values = data[header_bytes:header_bytes + count * record_bytes]
        else:
            values = data[(starts[:, None] + np.arange(record_bytes)).reshape(-1)]
        self.column = StringColumn(np.ascontiguousarray(values),
                                   np.arange(count + 1, dtype=np.int64) * record_bytes)
        self.pos = 0

    def next(self, want: int):
        n = len(self.column)
        if self.pos >= n:
            if self.error is not None:
                raise self.error
            return None
        stop = min(n, self.pos + want)
        out = self.column.slice(self.pos, stop), np.arange(self.pos, stop, dtype=np.int64)
        self.pos = stop
        return out


class _Single(WorkRecords):
    """One record per work item, ``(key, value)``."""

    def __init__(self, work: bytes, key: bytes, value: bytes):
        super().__init__(work)
        self.key, self.value = key, value

    def next(self, want: int):
        if self.exhausted:
            return None
        self.exhausted = True
        return StringColumn.from_values([self.value]), None

    def keys(self, numbers) -> list:
        return [self.key]


class TFRecordReader(ReaderBase):
    """Records of TFRecord files (``tf.TFRecordReader``); ``options`` is None, "",
    "GZIP", "ZLIB" or an ``nd.io.TFRecordOptions``. Keys hold the byte offset of each
    record (in the decompressed stream)."""

    default_name = "TFRecordReaderV2"

    def __init__(self, name: str | None = None, options: Any = None):
        super().__init__(name)
        from nbdata.io.writer import TFRecordOptions
        if isinstance(options, TFRecordOptions):
            options = options.compression_type
        self.compression = files.compression_name(options, "TFRecordReader")

    def open_work(self, work: bytes) -> WorkRecords:
        return _TFRecords(work, files.TFRecordReader(files.path_of(work), self.compression,
                                                     files.DEFAULT_BLOCK, None))

    def format(self) -> dict:
        return {"kind": "tfrecord", "op": "TFRecordReader", "compression": self.compression,
                "buffer_size": None}


class TextLineReader(ReaderBase):
    """Lines of text files (``tf.TextLineReader``): split at ``\\n``, one ``\\r`` before
    it dropped; ``skip_header_lines`` lines skipped at the start of each file. Keys
    hold the 1-based line number (skipped lines counted)."""

    default_name = "TextLineReaderV2"

    def __init__(self, skip_header_lines: int | None = None, name: str | None = None):
        super().__init__(name)
        self.skip_header_lines = int(skip_header_lines or 0)
        if self.skip_header_lines < 0:
            raise ValueError(f"skip_header_lines must be >= 0, got {skip_header_lines}")

    def open_work(self, work: bytes) -> WorkRecords:
        reader = _ReaderLines(files.path_of(work), "", files.DEFAULT_BLOCK, None)
        return _Lines(work, reader, self.skip_header_lines)


class FixedLengthRecordReader(ReaderBase):
    """Fixed-length records (``tf.FixedLengthRecordReader``): one every ``hop_bytes``
    (default ``record_bytes``) after ``header_bytes``, up to ``footer_bytes`` before the
    end; ``encoding`` None, "", "GZIP" or "ZLIB". Keys hold the 0-based record index."""

    default_name = "FixedLengthRecordReaderV2"

    def __init__(self, record_bytes: int, header_bytes: int | None = None,
                 footer_bytes: int | None = None, hop_bytes: int | None = None,
                 name: str | None = None, encoding: str | None = None):
        super().__init__(name)
        self.record_bytes = int(record_bytes)
        if self.record_bytes <= 0:
            raise ValueError(f"record_bytes must be positive, got {record_bytes}")
        self.header_bytes = int(header_bytes or 0)
        self.footer_bytes = int(footer_bytes or 0)
        self.hop_bytes = int(hop_bytes or 0)
        if min(self.header_bytes, self.footer_bytes, self.hop_bytes) < 0:
            raise ValueError("header_bytes, footer_bytes and hop_bytes must be >= 0")
        self.compression = files.compression_name(encoding, "FixedLengthRecordReader")

    def open_work(self, work: bytes) -> WorkRecords:
        return _Fixed(work, files.path_of(work), self.compression, self.record_bytes,
                      self.header_bytes, self.footer_bytes, self.hop_bytes)


class WholeFileReader(ReaderBase):
    """One record per file (``tf.WholeFileReader``): the key is the file name as it was
    enqueued, the value the file's bytes."""

    default_name = "WholeFileReaderV2"
    supports_serialize = True
    open_errors_stick = True

    def open_work(self, work: bytes) -> WorkRecords:
        path = files.path_of(work)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            from nbdata.errors import NotFoundError
            raise NotFoundError(f"{path}; No such file or directory", "WholeFileReader") from None
        return _Single(work, work, data)


class IdentityReader(ReaderBase):
    """Outputs each work item as both key and value (``tf.IdentityReader``)."""

    default_name = "IdentityReaderV2"
    supports_serialize = True

    def open_work(self, work: bytes) -> WorkRecords:
        return _Single(work, work, work)


# ------------------------------------------------------------------ runtime

class ReaderState:
    """A reader in one session: the current work item's records and the counters. A
    work item whose records fail to read keeps failing (as TF1's readers stay on the
    file) until ``reset``; one that cannot be opened is given up."""

    def __init__(self, reader: ReaderBase):
        self.reader = reader
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        if getattr(self, "records", None) is not None:
            self.records.close()
        self.records: WorkRecords | None = None
        self.values: StringColumn | None = None
        self.numbers = None
        self.pos = 0
        self.failed: OpError | None = None
        self.produced = 0
        self.completed = 0

    def _start(self, run, queue) -> None:
        work = queue.dequeue_many(run, 1, False)[0][0]
        if not isinstance(work, bytes):
            work = bytes(work) if isinstance(work, (bytearray, memoryview)) else str(work).encode()
        try:
            self.records = self.reader.open_work(work)
        except OpError as e:
            if self.reader.open_errors_stick:
                self.failed = e
            raise

    def _fill(self, run, queue, want: int, same_work: bool) -> bool:
        """Read the next chunk into the buffer; False at the end of the current work item
        when ``same_work`` (the item is then complete)."""
        while True:
            if self.failed is not None:
                raise self.failed
            if self.records is None:
                if same_work:
                    return False
                self._start(run, queue)
            try:
                got = self.records.next(want)
            except OpError as e:
                if isinstance(e, OutOfRangeError):   # a fixed-length file shorter than its header
                    self.records = None
                else:
                    self.failed = e
                raise
            if got is not None:
                self.values, self.numbers = got
                self.pos = 0
                return True
            self._complete()
            if same_work:
                return False

    def _take(self, n: int, with_keys: bool = True):
        """Up to ``n`` buffered rows: (values column, keys or None)."""
        stop = min(len(self.values), self.pos + n)
        values = self.values.slice(self.pos, stop)
        numbers = None if self.numbers is None else self.numbers[self.pos:stop]
        keys = self.records.keys(numbers) if with_keys else None
        self.pos = stop
        self.produced += len(values)
        if stop == len(self.values) and self.records.exhausted:
            self._complete()   # one-record work items are done at once, as in TF1
        return values, keys

    def _complete(self) -> None:
        self.records.close()
        self.records = None
        self.completed += 1

    def _buffered(self) -> int:
        return 0 if self.values is None else len(self.values) - self.pos

    def read(self, run, queue, with_key: bool = True) -> tuple:
        with self.lock:
            if not self._buffered():
                self._fill(run, queue, _CHUNK, False)
            values, keys = self._take(1, with_key)
            return (keys[0] if with_key else b""), values.row(0)

    def read_chunk(self, run, queue, n: int, with_keys: bool = True, partial: bool = False) -> tuple:
        """Up to ``n`` records of one work item: (key list, or None without
        ``with_keys``; values StringColumn). A read error after some records drops them
        (TF1's ``read_up_to``), or with ``partial`` returns them first (what ``read``
        one record at a time would have given); the error comes on the next call."""
        with self.lock:
            if not self._buffered():
                self._fill(run, queue, n, False)
            parts, keys = [], []
            need = n
            while need:
                try:
                    if not self._buffered() and not self._fill(run, queue, need, True):
                        break
                except OpError:
                    if not (partial and parts):
                        raise
                    break
                values, k = self._take(need, with_keys)
                parts.append(values)
                keys.extend(k or ())
                need -= len(values)
            values = parts[0] if len(parts) == 1 else StringColumn.from_values(
                [v for p in parts for v in p.values()])
            return (keys if with_keys else None), values


__all__ = ["FixedLengthRecordReader", "IdentityReader", "ReaderBase", "ReaderState",
           "TFRecordReader", "TextLineReader", "WholeFileReader"]
