"""Reading record files in large blocks: one file's (decompressed) byte stream, and the
record formats that cut it into chunks of records (a :class:`StringColumn` each).

A format reader is a chunk iterator over one file: ``next(want)`` gives up to ``want``
records, ``save()`` its position as the offset of the next record in the decompressed
stream, and a reader opened with that state seeks (or, for compressed files,
decompresses and discards) up to it. Nothing here touches the file system before the
first ``next``: constructing datasets stays lazy.
"""

from __future__ import annotations

import os
import queue
import re
import threading
import weakref
import zlib
from contextlib import nullcontext

import numpy as np

from nbdata.chunks import MAX_CHUNK_BYTES, StringColumn
from nbdata.errors import (DataLossError, FailedPreconditionError, InvalidArgumentError,
                           NotFoundError, OpError)

# The record scanners (nbdata.kernels.records, with the CRC32C kernels) and isal are
# imported by the first read, not with the package.

COMPRESSIONS = {None: "", "": "", "GZIP": "GZIP", "ZLIB": "ZLIB"}
# Bytes read from the file at a time when the dataset gives no buffer_size.
DEFAULT_BLOCK = 1 << 20
MIN_BLOCK = 1 << 12
# TensorFlow's zlib input stream reads a compressed file this many bytes at a time and
# inflates into an output buffer as large (TFRecord files always; text and fixed-length
# files use the dataset's buffer_size). The reader here cuts the stream the same way, so
# a corrupt stream gives the same records before its error (see _Inflater).
ZLIB_BUFFER = 256 << 10


def _inflate_module():
    """isal's zlib (Intel ISA-L, ~2x zlib's inflate speed; the optional ``[gzip]``
    extra) when installed, else the standard library's zlib. Both read the same
    GZIP/ZLIB streams; ``NBDATA_INFLATE=zlib`` forces the standard one."""
    if os.environ.get("NBDATA_INFLATE", "") != "zlib":
        try:
            from isal import isal_zlib
            return isal_zlib
        except ImportError:
            pass
    return zlib


def __getattr__(name: str):
    """``INFLATE`` (the inflate module) and ``INFLATE_ERRORS`` (its exceptions), chosen at
    their first use."""
    if name in ("INFLATE", "INFLATE_ERRORS"):
        global INFLATE, INFLATE_ERRORS
        INFLATE = _inflate_module()
        INFLATE_ERRORS = (zlib.error,) if INFLATE is zlib else (zlib.error, INFLATE.error)
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _inflater():
    """``(INFLATE, INFLATE_ERRORS)``, as set on this module (tests replace them)."""
    if "INFLATE" not in globals():
        __getattr__("INFLATE")
    return INFLATE, INFLATE_ERRORS


class RecordSizeError(InvalidArgumentError, DataLossError):
    """A fixed-length record file whose body is not a whole number of records.

    TensorFlow raises InvalidArgumentError here; it is a DataLossError too, so code
    catching either class sees it."""


def compression_name(value, op: str) -> str:
    """``""``, ``"GZIP"`` or ``"ZLIB"`` for a ``compression_type`` argument."""
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    if value not in COMPRESSIONS:
        raise InvalidArgumentError(
            f"{op}: unsupported compression_type {value!r}; use None, \"\", \"GZIP\" or \"ZLIB\"", op)
    return COMPRESSIONS[value]


def path_of(name) -> str:
    if isinstance(name, (bytes, np.bytes_)):
        return bytes(name).decode("utf-8", "surrogateescape")
    if isinstance(name, np.ndarray) and name.ndim == 0:
        return path_of(name.item())
    return os.fspath(name)


class ByteStream:
    """The bytes of one file, decompressed when ``compression`` is GZIP or ZLIB.

    ``read(n)`` returns up to ``n`` bytes (fewer only at the end); ``offset`` is the
    position in the decompressed stream. A compressed stream is read as TensorFlow's
    zlib input stream reads it: a stream that stops early (a cut file, a writer that
    only flushed) simply ends where its bytes stop inflating, a ZLIB stream ignores what
    follows it, concatenated GZIP members continue the stream. A corrupt stream gives
    what inflated before the damage first (see :class:`_Inflater`); ``readinto`` raises
    its DataLossError, naming the file and the compressed offsets, once that is read.
    ``segment`` is the size of TensorFlow's zlib buffers for the reading op."""

    def __init__(self, path: str, compression: str, block: int, op: str, budget=None,
                 segment: int = ZLIB_BUFFER):
        self.path, self.compression, self.block, self.op = path, compression, block, op
        # The pipeline's thread budget: the read-ahead inflater counts as a busy thread
        # in it while it inflates, so kernels meanwhile leave it a core.
        self.budget = budget
        self.segment = max(1, int(segment))
        try:
            self.file = open(path, "rb", buffering=0)
        except FileNotFoundError:
            raise NotFoundError(f"{path}; No such file or directory", op) from None
        except IsADirectoryError:
            # TensorFlow's file system reports EISDIR as FailedPrecondition.
            raise FailedPreconditionError(f"{path}; Is a directory", op) from None
        except OSError as e:
            raise NotFoundError(f"{path}: cannot open: {e.strerror}", op) from None
        self.offset = 0
        self.size = os.fstat(self.file.fileno()).st_size
        if compression:
            # The read-ahead thread's batches of decompressed segments, and the one
            # being copied out.
            self.batch: list = []
            self.batch_pos = 0
            self.pending, self.pending_pos, self.finished = b"", 0, False
            self.error: OpError | None = None
        self.inflating: _Inflating | None = None

    def read(self, n: int) -> bytes:
        if not self.compression:
            data = self.file.read(n)
            self.offset += len(data)
            return data
        out = np.empty(n, np.uint8)
        return out[:self.readinto(out)].tobytes()

    def readinto(self, out: np.ndarray) -> int:
        """Reads up to ``len(out)`` bytes into the uint8 array ``out``; returns the count
        (fewer only at the end of the stream). Decompressed segments are copied straight
        from the read-ahead thread's output. A corrupt stream's error is raised by the
        first call that finds nothing before it."""
        n = len(out)
        got = 0
        if not self.compression:
            view = memoryview(out)
            while got < n:
                k = self.file.readinto(view[got:])
                if not k:
                    break
                got += k
            self.offset += got
            return got
        if self.inflating is None and not self.finished:
            self.inflating = _Inflating(self)
        while got < n:
            if self.pending_pos >= len(self.pending):
                if self.batch_pos < len(self.batch):
                    self.pending, self.pending_pos = self.batch[self.batch_pos], 0
                    self.batch_pos += 1
                    continue
                if self.finished:
                    break
                try:
                    batch = self.inflating.next()
                except OpError as e:
                    self.error, self.finished = e, True
                    break
                if batch is None:
                    self.finished = True
                    break
                self.batch, self.batch_pos = batch, 0
                continue
            take = min(n - got, len(self.pending) - self.pending_pos)
            out[got:got + take] = np.frombuffer(self.pending, np.uint8, take, self.pending_pos)
            self.pending_pos += take
            got += take
        self.offset += got
        if not got and self.error is not None:
            raise self.error
        return got

    def skip(self, n: int) -> None:
        if not self.compression:
            self.file.seek(self.offset + n)
            self.offset += n
            return
        while n > 0:
            got = len(self.read(min(n, 1 << 22)))
            if got == 0:
                return
            n -= got

    def remaining(self) -> int | None:
        """Bytes left in an uncompressed file (None when compressed)."""
        return None if self.compression else self.size - self.offset

    def close(self) -> None:
        if self.inflating is not None:
            self.inflating.stop()
            self.inflating = None
        self.file.close()


def _read_full(file, n: int) -> bytes:
    """``n`` bytes of ``file`` (fewer only at its end)."""
    data = file.read(n)
    if not data or len(data) == n:
        return data or b""
    parts = [data]
    got = len(data)
    while got < n:
        more = file.read(n - got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


class _Inflater:
    """The decompressed bytes of one GZIP or ZLIB file, as TensorFlow's zlib input stream
    gives them.

    TensorFlow reads the file ``segment`` bytes at a time (pieces that end at multiples
    of ``segment``) and each inflate call gives at most ``segment`` bytes; a call that
    fails loses its output. So a corrupt stream delivers every segment before the
    failing one, then the error. The file ending before its stream does is not an
    error: the stream just ends where its bytes stop inflating (the format reader then
    decides whether a record was cut).

    A first, fast pass inflates in large calls (fewer hand-overs between threads). When
    it fails, the member is inflated once more, from its first byte, the exact way
    above, with the standard zlib, giving what that pass would have given past what the
    fast one did. The same happens when isal's inflater (which may hold back the last
    few bytes of a cut stream, and words its errors differently) meets the end of a cut
    member: both inflaters deliver the same bytes and errors."""

    # The fast pass reads about this much at a time and hands out at most FAST_OUTPUT
    # bytes per inflate call.
    FAST_READ = 1 << 20
    FAST_OUTPUT = 1 << 20

    def __init__(self, file, path: str, compression: str, op: str, segment: int):
        self.file, self.path, self.compression, self.op = file, path, compression, op
        self.segment = segment
        self.wbits = 16 + zlib.MAX_WBITS if compression == "GZIP" else zlib.MAX_WBITS

    def _pieces(self, start: int, size: int):
        """``(offset, bytes)`` of the file from ``start``, in pieces that end at the
        multiples of ``size``."""
        self.file.seek(start)
        pos = start
        while True:
            want = size - pos % size
            raw = _read_full(self.file, want)
            if raw:
                yield pos, raw
                pos += len(raw)
            if len(raw) < want:
                return

    def segments(self, stopped, module=None, start: int = 0, skip: int = 0, ended: int = 0,
                 exact: bool = False):
        """Yields the decompressed bytes (after the first ``skip``) of the members from
        the one at file offset ``start`` on (``ended`` members came before it); raises
        DataLossError where inflating fails. ``exact``: TensorFlow's reads and inflate
        calls (else the fast pass). ``stopped()`` true ends it early."""
        default, default_errors = _inflater()
        module = default if module is None else module
        failures = (zlib.error,) if module is zlib else default_errors
        gzip_ = self.compression == "GZIP"
        if exact:
            read = cap = self.segment
        else:
            read = self.segment * -(-self.FAST_READ // self.segment)
            cap = self.FAST_OUTPUT
        d = None
        member, given = start, 0
        for pos, raw in self._pieces(start, read):
            if stopped():
                return
            tail, at = raw, pos
            while tail:
                if d is None:
                    if ended and not gzip_:
                        return          # what follows a ZLIB stream is not read
                    d = module.decompressobj(self.wbits)
                    member, given = at, 0
                try:
                    out = d.decompress(tail, cap)
                except failures as e:
                    if not exact:
                        yield from self.segments(stopped, zlib, member, given, ended, True)
                        return
                    raise self._corrupt(e, member, at, at + len(tail), ended) from None
                if d.eof:
                    rest = d.unused_data
                    d = None
                    ended += 1
                else:
                    rest = d.unconsumed_tail
                    if not out and len(rest) == len(tail):
                        break           # no progress: wants more input
                at += len(tail) - len(rest)
                tail = rest
                if out:
                    given += len(out)
                    if skip:
                        if skip >= len(out):
                            skip -= len(out)
                            continue
                        out, skip = out[skip:], 0
                    yield out
        if d is not None and not exact and module is not zlib:
            # Cut inside a member: the standard zlib gives every byte that inflates.
            yield from self.segments(stopped, zlib, member, given, ended, True)

    def _corrupt(self, e: Exception, member: int, lo: int, hi: int, ended: int) -> DataLossError:
        text = str(e)
        m = re.match(r"Error (-?\d+) while decompressing data:? ?(.*)", text)
        why = f"inflate() failed with error {m.group(1)}: {m.group(2) or 'unknown'}" if m else text
        name = self.compression
        self.file.seek(member)
        head = self.file.read(2)
        if name == "GZIP":
            member_like = head[:2] == b"\x1f\x8b"[:len(head)]
        else:
            member_like = (len(head) == 2 and head[0] & 0x0F == 8
                           and (head[0] << 8 | head[1]) % 31 == 0)
        size = os.fstat(self.file.fileno()).st_size
        if not member_like and ended:
            what = (f"{size - member} trailing bytes at offset {member}, after the end of the "
                    f"GZIP stream, are not a GZIP member")
        elif not member_like and member == 0:
            what = f"not a {name} stream (bad header at offset 0)"
        else:
            what = f"corrupt {name} stream in the compressed bytes at offsets {lo}..{hi}"
        return DataLossError(f"{self.path}: {what}: {why}", self.op)


class _Inflating:
    """Decompresses a stream on a thread of its own (zlib runs without the GIL), so that
    inflating overlaps the parsing of what was inflated before. Segments are handed over
    in batches of at least the stream's block size; at most ``AHEAD`` batches wait.
    ``next`` gives every batch in order, then None at the end or raises the stream's
    error: what was inflated before an error is never dropped."""

    AHEAD = 8

    def __init__(self, stream: ByteStream):
        self.queue: queue.Queue = queue.Queue(self.AHEAD)
        self.stopping = threading.Event()
        self.done = False
        source = _Inflater(stream.file, stream.path, stream.compression, stream.op,
                           stream.segment)
        # The thread holds the stream weakly: a reader dropped without close() is
        # collected, and the thread then ends instead of waiting forever.
        self.thread = threading.Thread(
            target=self._run, args=(weakref.ref(stream), source, stream.budget, stream.block),
            daemon=True, name="nbdata-inflate")
        self.thread.start()

    def _put(self, stream_ref, item) -> bool:
        while not self.stopping.is_set() and stream_ref() is not None:
            try:
                self.queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, stream_ref, source: _Inflater, budget, batch_bytes: int) -> None:
        segments = source.segments(self.stopping.is_set)
        batch: list = []
        size = 0
        try:
            while not self.stopping.is_set() and stream_ref() is not None:
                try:
                    with budget.worker() if budget is not None else nullcontext():
                        piece = next(segments, None)
                except BaseException as e:  # handed to the reader, raised after the batch
                    if not batch or self._put(stream_ref, batch):
                        self._put(stream_ref, e)
                    return
                if piece is None:
                    if not batch or self._put(stream_ref, batch):
                        self._put(stream_ref, None)
                    return
                batch.append(piece)
                size += len(piece)
                if size >= batch_bytes:
                    if not self._put(stream_ref, batch):
                        return
                    batch, size = [], 0
        finally:
            segments.close()

    def next(self) -> list | None:
        if self.done:
            return None
        item = self.queue.get()
        self.done = item is None or isinstance(item, BaseException)
        if isinstance(item, BaseException):
            raise item
        return item

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()


class Blocks:
    """A growable window ``buf[lo:hi]`` over a stream; ``base`` is the stream offset of
    ``buf[0]``. A stream that fails (a corrupt compressed file) ends the window like the
    end of the file, with ``error`` set: the reader cuts the records before it, then
    raises it where it would have met the end."""

    def __init__(self, stream: ByteStream, block: int):
        self.stream, self.block = stream, block
        self.buf = np.empty(block, np.uint8)
        self.lo = self.hi = 0
        self.base = stream.offset
        self.eof = False
        self.error: OpError | None = None

    def fail(self) -> OpError:
        """The stream's error, the window dropped (the file is read no further)."""
        self.lo = self.hi
        return self.error

    @property
    def offset(self) -> int:
        return self.base + self.lo

    def fill(self, need: int) -> None:
        """Read until at least ``need`` bytes are in the window or the stream ends."""
        if self.lo:
            keep = self.hi - self.lo
            self.buf[:keep] = self.buf[self.lo:self.hi]
            self.base += self.lo
            self.lo, self.hi = 0, keep
        while not self.eof and self.hi < need:
            # At most 64 MB per read, so that a length read from a corrupt file makes the
            # window grow only as far as the file really goes.
            want = min(max(self.block, need - self.hi), 1 << 26)
            if self.hi + want > len(self.buf):
                grown = np.empty(max(2 * len(self.buf), self.hi + want), np.uint8)
                grown[:self.hi] = self.buf[:self.hi]
                self.buf = grown
            try:
                got = self.stream.readinto(self.buf[self.hi:self.hi + want])
            except OpError as e:
                self.error, got = e, 0
            if not got:
                self.eof = True
                break
            self.hi += got


class FormatReader:
    """A chunk iterator over the records of one file (subclasses cut the records)."""

    op = "file"

    def __init__(self, path: str, compression: str, block: int, state: dict | None,
                 budget=None, segment: int = ZLIB_BUFFER):
        self.path = path
        self.stream = ByteStream(path, compression, block, self.op, budget, segment)
        self.block = block
        self.start(state)

    def start(self, state: dict | None) -> None:
        if state is not None:
            self.stream.skip(self.saved_offset(state))
        self.window = Blocks(self.stream, self.block)

    def saved_offset(self, state: dict) -> int:
        """The offset of a restored state: within the file (when its size is known)."""
        from nbdata import state_check
        most = state_check.MAX_POSITION if self.stream.compression else self.stream.size
        return state_check.integer(state, "offset", 0, most)

    def save(self) -> dict:
        return {"offset": self.window.offset}

    def close(self) -> None:
        self.stream.close()


class TFRecordReader(FormatReader):
    """TFRecord frames; the masked CRC32C of each length and payload is checked."""

    op = "TFRecordDataset"

    def next(self, want: int):
        from nbdata.kernels.records import (BAD_DATA_CRC, BAD_LENGTH_CRC, FRAME_HEADER,
                                            scan_tfrecords_call)
        w = self.window
        need = FRAME_HEADER
        while True:
            if w.hi - w.lo >= need:
                out = np.empty(w.hi - w.lo, np.uint8)
                offsets = np.empty(want + 1, np.int64)
                n, pos, status, need = scan_tfrecords_call(w.buf, w.lo, w.hi, want,
                                                           MAX_CHUNK_BYTES, out, offsets, True)
                if n:
                    # Before a bad frame, the good records first; the next call meets it again.
                    w.lo = pos
                    return StringColumn(out[:offsets[n]], offsets[:n + 1])
                if status == BAD_LENGTH_CRC:
                    at = w.base + pos
                    why = ("Is this even a TFRecord file?" if at == 0   # TensorFlow's words
                           else "the length's CRC32C does not match")
                    raise self._lost(f"corrupted record at {at} ({why})")
                if status == BAD_DATA_CRC:
                    raise self._lost(f"corrupted record at {w.base + pos + FRAME_HEADER} (the "
                                     "data's CRC32C does not match)")
                need = max(need, FRAME_HEADER)
            if w.eof:
                if w.error is not None:
                    # What inflated before the damage is read; the rest is lost.
                    raise w.fail()
                if w.hi - w.lo < FRAME_HEADER:
                    # Nothing, or part of a length header, is left: the end of the file
                    # (TensorFlow's reader ends there without an error too).
                    w.lo = w.hi
                    return None
                raise self._lost(f"truncated record at {w.offset} (the file ends inside the "
                                 "record)")
            left = self.stream.remaining()
            if left == 0 or (left is not None and w.hi - w.lo + left < FRAME_HEADER):
                w.eof = True   # nothing, or less than a header, is left
                continue
            if left is not None and need > w.hi - w.lo + left:
                w.eof = True
                raise self._lost(f"truncated record at {w.offset} (the record needs {need} "
                                 f"bytes, {left} are left)")
            w.fill(need)

    def _lost(self, what: str) -> DataLossError:
        """The error for a defect at the window; the rest of the file cannot be framed
        and is dropped."""
        self.window.lo = self.window.hi
        return DataLossError(f"{self.path}: {what}", self.op)


class TextLineReader(FormatReader):
    """Lines split at ``\\n``; every ``\\r`` byte is dropped (TextLineDataset's rule), or
    with ``one_cr`` only one ``\\r`` ending a line (TF1's TextLineReader)."""

    op = "TextLineDataset"
    one_cr = False

    def start(self, state: dict | None) -> None:
        if state is None or not self.saved_offset(state):
            return super().start(state)
        # A restored offset is the start of a line: the byte before it ends one.
        offset = self.saved_offset(state)
        self.stream.skip(offset - 1)
        # (or the end of a file whose last line has no newline: nothing is left there)
        if bytes(self.stream.read(1)) != b"\n" and len(bytes(self.stream.read(1))) != 0:
            from nbdata import state_check
            raise state_check.StateFieldError("offset", offset, "not where a line starts")
        self.window = Blocks(self.stream, self.block)

    def next(self, want: int):
        from nbdata.kernels.records import scan_lines_call
        w = self.window
        while True:
            if w.hi > w.lo or w.eof:
                out = np.empty(w.hi - w.lo, np.uint8)
                offsets = np.empty(want + 1, np.int64)
                # Before a stream error the last, unfinished line is no line (as in TF).
                n, pos = scan_lines_call(w.buf, w.lo, w.hi, w.eof and w.error is None, want,
                                         MAX_CHUNK_BYTES, out, offsets, self.one_cr)
                if n:
                    w.lo = pos
                    return StringColumn(out[:offsets[n]], offsets[:n + 1])
                if w.eof:
                    if w.error is not None:
                        raise w.fail()
                    return None
            w.fill(w.hi - w.lo + self.block)


class CsvLineReader(TextLineReader):
    """Lines split at ``\\n`` with every other byte kept (``\\r`` too): CsvDataset's
    input, whose record split (``nbdata/ops/csv_records.py``) ends records at ``\\r``
    as well, outside quoted fields only. NumPy finds the newlines; no kernel."""

    op = "CsvDataset"

    def next(self, want: int):
        w = self.window
        while True:
            if w.hi > w.lo or w.eof:
                seg = w.buf[w.lo:w.hi]
                nl = np.flatnonzero(seg == 10)
                if len(nl) > want:
                    nl = nl[:want]
                if len(nl) > 1 and nl[-1] >= MAX_CHUNK_BYTES:
                    nl = nl[:max(1, int(np.searchsorted(nl, MAX_CHUNK_BYTES)))]
                # Before a stream error the last, unfinished line is no line (as in TF).
                last = (len(nl) < want and w.eof and w.error is None
                        and (int(nl[-1]) + 1 if len(nl) else 0) < len(seg))
                if len(nl) or last:
                    size = len(seg) if last else int(nl[-1]) + 1
                    keep = np.ones(size, np.bool_)
                    keep[nl] = False
                    data = seg[:size][keep]
                    ends = nl - np.arange(len(nl))
                    offsets = np.concatenate([[0], ends, [len(data)] if last else []])
                    w.lo += size
                    return StringColumn(data, offsets.astype(np.int64))
                if w.eof:
                    if w.error is not None:
                        raise w.fail()
                    return None
            w.fill(w.hi - w.lo + self.block)


class FixedLengthReader(FormatReader):
    """Records of ``record_bytes`` after a ``header_bytes`` header and before a
    ``footer_bytes`` footer."""

    op = "FixedLengthRecordDataset"

    def __init__(self, path, compression, block, state, record_bytes, header_bytes, footer_bytes,
                 budget=None, segment: int = ZLIB_BUFFER):
        self.record_bytes, self.header_bytes = record_bytes, header_bytes
        self.footer_bytes = footer_bytes
        super().__init__(path, compression, max(block, record_bytes), state, budget, segment)

    def _size_error(self, body: int):
        return RecordSizeError(
            f"Excluding the header ({self.header_bytes} bytes) and footer ({self.footer_bytes} "
            f"bytes), input file \"{self.path}\" has body length {body} bytes, which is not an "
            f"exact multiple of the record length ({self.record_bytes} bytes).", self.op)

    def saved_offset(self, state: dict) -> int:
        """A restored offset is the start of a record (or the body's end)."""
        from nbdata import state_check
        offset = super().saved_offset(state)
        if offset < self.header_bytes or (offset - self.header_bytes) % self.record_bytes:
            raise state_check.StateFieldError("offset", offset, "not where a record starts")
        return offset

    def start(self, state):
        if not self.stream.compression:
            body = self.stream.size - self.header_bytes - self.footer_bytes
            if body < 0 or body % self.record_bytes:
                raise self._size_error(body)
        if state is None:
            self.stream.skip(self.header_bytes)
        super().start(state)
        # A compressed stream that ends inside the header (its size is known only now).
        self.short = self.stream.offset < self.header_bytes

    def next(self, want: int):
        w, rb = self.window, self.record_bytes
        want = max(1, min(want, MAX_CHUNK_BYTES // rb))
        if self.short:
            self.short = False
            w.lo, w.hi, w.eof = 0, 0, True
            raise self._size_error(self.stream.offset - self.header_bytes - self.footer_bytes)
        while True:
            if w.eof:
                # The whole records left come out first; a remainder that is not the
                # footer is then an error (a compressed file's size is known only now).
                body = w.hi - w.lo - self.footer_bytes
                if body < rb:
                    if w.error is not None:
                        # TensorFlow ends such a file quietly; its damage is reported here.
                        raise w.fail()
                    if body == 0:
                        return None
                    total = w.offset - self.header_bytes + body
                    w.lo = w.hi
                    raise self._size_error(total)
            k = min(want, max(0, (w.hi - w.lo - self.footer_bytes)) // rb)
            if k and (w.eof or k == want or w.hi - w.lo - self.footer_bytes - k * rb < rb):
                data = w.buf[w.lo:w.lo + k * rb].copy()
                w.lo += k * rb
                return StringColumn(data, np.arange(k + 1, dtype=np.int64) * rb)
            w.fill(w.hi - w.lo + max(self.block, want * rb) + self.footer_bytes)


def open_reader(fmt: dict, path: str, state: dict | None, budget=None):
    """The reader of one file for a format description (see ``FileRecords.fmt``);
    ``budget`` is the pipeline's ThreadBudget (its inflater thread counts in it)."""
    kind = fmt["kind"]
    block = max(MIN_BLOCK, int(fmt.get("buffer_size") or DEFAULT_BLOCK))
    # TensorFlow's zlib buffers: fixed for TFRecord files, the buffer_size for the others
    # (taken as at least MIN_BLOCK here).
    segment = (ZLIB_BUFFER if kind == "tfrecord" or not fmt.get("buffer_size")
               else max(MIN_BLOCK, int(fmt["buffer_size"])))
    if kind in ("tfrecord", "text", "csv"):
        cls = {"tfrecord": TFRecordReader, "text": TextLineReader, "csv": CsvLineReader}[kind]
        return cls(path, fmt["compression"], block, state, budget, segment)
    if kind == "fixed":
        return FixedLengthReader(path, fmt["compression"], block, state, int(fmt["record_bytes"]),
                                 int(fmt["header_bytes"]), int(fmt["footer_bytes"]), budget,
                                 segment)
    raise ValueError(f"unknown record format {kind!r}")


__all__ = ["ByteStream", "Blocks", "FixedLengthReader", "OpError", "RecordSizeError",
           "CsvLineReader", "TFRecordReader", "TextLineReader",
           "compression_name", "open_reader", "path_of"]
