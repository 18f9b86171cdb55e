"""``cache``: keep the elements of the first complete iteration in memory or in a file.

A cache counts only once an iteration reached the end: a partial iteration leaves
none. A file cache is written to a temporary name, synced and renamed into place when
complete, by one writer at a time (an ``flock`` that a crashed writer releases), in
the data-only column format of ``nbdata/kernels/column_file.py``; re-reads are chunked and
memory-mapped.
"""

from __future__ import annotations

import dataclasses
import fcntl
import glob
import os
import threading
import uuid

from nbdata import state_check
from nbdata.chunks import Chunk, concat_chunks, read_only_chunk
from nbdata.errors import AlreadyExistsError, NotFoundError
from nbdata.kernels.column_file import ColumnFileReader, ColumnFileWriter
from nbdata.ops.node import UnaryNode, arg_field, new_resource_key
from nbdata.ops.runtime import ChunkIter
from nbdata.spec import DatasetSpec, flatten, is_dataset

FILE_SUFFIX = ".nbcache"
LOCK_SUFFIX = ".nbcache.lock"
ELEMENT_CHUNK = 1024


class MemoryStore:
    """The cached chunks, complete only after one iteration reached the end, and the
    state the input was opened with for that iteration (to rebuild the cache in
    another process from a saved iterator state)."""

    def __init__(self):
        self.chunks: list | None = None
        self.start: dict | None = None
        self.lock = threading.Lock()

    def complete(self, chunks: list, start) -> None:
        with self.lock:
            if self.chunks is None:
                self.chunks, self.start = chunks, start


@dataclasses.dataclass(frozen=True, eq=False)
class Cache(UnaryNode):
    filename: str = arg_field()
    resource_key: int = dataclasses.field(default_factory=new_resource_key, compare=False)
    op = "cache"

    def reads_ahead_freely(self) -> bool:
        return not self.filename   # a file cache writes the rows it reads

    def random_access(self) -> str | None:
        # The cached elements are the input's: row i is the input's row i.
        return self.input.random_access()

    def gather(self, ctx, rows):
        return self.input.gather(ctx, rows)

    def _store(self, ctx) -> MemoryStore:
        return ctx.resource(self.resource_key, MemoryStore)

    def open_chunks(self, ctx, state=None):
        mode = None if state is None else state_check.choice(state, "mode", ("read", "write"))
        if state is not None:   # rows read (or written), at most the input's
            most = state_check.most_rows(self.input)
            state_check.integer(state, "pos" if mode == "read" else "rows", 0, most)
            state_check.nested(state, "start", default=None)
        if self.filename:
            path = self.filename + FILE_SUFFIX
            pos = int(state["pos"]) if mode == "read" else 0
            if mode != "write" and os.path.exists(path):
                return FileChunks(path, self.spec, pos)
            if mode == "read":
                if state.get("start") is None:
                    raise NotFoundError(
                        f"restore: the state reads the cache file {path} at row {pos}, and "
                        "the file is gone", self.op)
                # Saved by the iteration that wrote the file: write it again, then go on.
                state = {"mode": "write", "start": state["start"], "rows": pos}
            if state is None:   # the writer's lock is taken at the first element, as in tf.data
                _check_cacheable(self.spec, self.filename)
                return CacheWriterChunks(ctx, self, None, None,
                                         open_sink=lambda: FileWriter(self.filename, self.spec),
                                         written=path)
            writer = FileWriter(self.filename, self.spec)
            if mode != "write" and os.path.exists(path):
                writer.abandon()
                return FileChunks(path, self.spec, pos)
            return CacheWriterChunks(ctx, self, writer, state)
        store = self._store(ctx)
        with store.lock:
            chunks, start = store.chunks, store.start
        if chunks is not None and mode != "write":
            return MemoryChunks(chunks, start, 0 if state is None else int(state["pos"]))
        if mode == "read":  # a complete cache of another process: rebuild it, then go on
            state = {"mode": "write", "start": state["start"], "rows": state["pos"]}
        return CacheWriterChunks(ctx, self, MemoryWriterSink(store, ctx.memory, ctx.stats(self),
                                                             self.label), state)


class MemoryWriterSink:
    """Where a memory cache being filled keeps its chunks; their bytes count in the
    pipeline's memory budget (a cache that cannot fit raises ResourceExhaustedError
    naming the cache, which ``cache(filename)`` avoids)."""

    def __init__(self, store: MemoryStore, memory=None, stats=None, label: str = "cache"):
        self.store = store
        self.chunks: list = []
        self.memory, self.stats, self.label = memory, stats, label
        self.held = 0

    def write(self, chunk: Chunk) -> Chunk:
        """Keeps ``chunk``; returns it as kept and handed out: its arrays read-only."""
        chunk = read_only_chunk(chunk)
        if self.memory is not None:
            nbytes = chunk.nbytes
            self.memory.need("cache", self.label, nbytes,
                             f"the in-memory cache, at {self.held + nbytes:,} bytes so far,")
            self.memory.hold(self.stats, nbytes)
            self.held += nbytes
        self.chunks.append(chunk)
        return chunk

    def finish(self, start) -> None:
        self.store.complete(self.chunks, start)

    def abandon(self) -> None:
        self.chunks = []
        if self.memory is not None:
            self.memory.release(self.stats, self.held)
            self.held = 0


class WriterLock:
    """An exclusive lock on ``<filename>.nbcache.lock`` held while a cache file is written.

    It is an ``flock``: the system releases it when its process ends, so a lock file
    left behind by a writer that crashed never blocks a later writer.
    """

    def __init__(self, filename: str):
        self.path = filename + LOCK_SUFFIX
        self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self.fd)
            self.fd = None
            raise AlreadyExistsError(
                f"cache: another iterator is writing the cache {filename!r} right now "
                f"(it holds {self.path}); iterate again when it has finished", "cache") from None

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


def _check_cacheable(spec, filename: str) -> None:
    if any(isinstance(s, DatasetSpec) for s in flatten(spec)):
        raise TypeError(f"cache: cannot write elements that contain datasets to {filename!r}")


class FileWriter:
    """Writes a cache file: chunks go to a temporary file, renamed into place when the
    input ends; an iteration abandoned before the end leaves no cache. The writer
    holds :class:`WriterLock` (a second concurrent writer gets AlreadyExistsError);
    temporary files of crashed writers are removed by the next writer."""

    def __init__(self, filename: str, spec):
        _check_cacheable(spec, filename)
        self.filename = filename
        self.final = filename + FILE_SUFFIX
        self.lock = WriterLock(filename)
        for stale in glob.glob(glob.escape(self.final) + ".*.tmp"):
            try:
                os.unlink(stale)
            except OSError:
                pass
        self.tmp = f"{self.final}.{uuid.uuid4().hex}.tmp"
        self.spec = spec
        self.file = ColumnFileWriter(self.tmp)
        self.done = False

    def write(self, chunk: Chunk) -> Chunk:
        for c in chunk.columns:
            if any(is_dataset(v) for v in (c if isinstance(c, list) else ())):
                raise TypeError(f"cache: cannot write elements that contain datasets to "
                                f"{self.filename!r}")
        self.file.write(chunk.columns, chunk.n)
        return chunk

    def finish(self, start=None) -> None:
        if self.done:
            return
        self.done = True
        self.file.close()
        os.replace(self.tmp, self.final)
        self.lock.release()

    def abandon(self) -> None:
        if self.done:
            return
        self.done = True
        self.file.abandon()
        try:
            os.unlink(self.tmp)
        except FileNotFoundError:
            pass
        self.lock.release()

    def __del__(self):
        if hasattr(self, "file"):
            self.abandon()


def _open_file(path: str, spec) -> ColumnFileReader:
    """The reader of a complete cache file, checked against the dataset's element spec
    (InvalidArgumentError for a file of another element, as tf.data)."""
    return ColumnFileReader(path, flatten(spec))


class CacheWriterChunks(ChunkIter):
    """Passes the input's chunks through, writing them to the cache (memory or file);
    the cache is complete when the input ends, or, in memory, as soon as it holds as
    many rows as the input's known cardinality (tf.data's rule: an iteration that read
    every element without reaching the end still fills the cache).

    State: the input's state when this iteration opened it, and the rows passed so
    far; restoring re-reads those rows into a new cache before going on.

    With ``open_sink``, the sink (a file writer and its lock: AlreadyExistsError while
    another iterator writes the file) is made at the first ``next``; if the file
    ``written`` is complete by then, the rows come from it instead.
    """

    def __init__(self, ctx, node: Cache, sink, state, open_sink=None, written: str | None = None):
        self.sink = sink
        self.open_sink, self.written, self.spec = open_sink, written, node.spec
        self.reader: FileChunks | None = None
        self.finished = False   # (a state refused below leaves a writer to abandon)
        start = None if state is None else state["start"]
        self.it = ctx.open_chunks(node.input, start)
        self.start = self.it.save() if start is None else start
        self.rows = 0
        n = node.input.cardinality()
        self.complete_at = n if isinstance(sink, MemoryWriterSink) and n >= 0 else None
        self.completed = False   # the memory cache is complete (its rows stay held)
        replay = 0 if state is None else int(state["rows"])
        while self.rows < replay:
            chunk = self.it.next(min(replay - self.rows, ctx.max_rows(node.spec)))
            if chunk is None:
                break
            sink.write(chunk)
            self.rows += chunk.n
        self.finished = False

    def _open_sink(self) -> None:
        self.sink = self.open_sink()   # raises while another iterator writes the file
        self.open_sink = None
        if os.path.exists(self.written):   # completed since this iterator was made
            self.sink.abandon()
            self.finished = True
            self.it.close()
            self.reader = FileChunks(self.written, self.spec, 0)

    def next(self, want: int):
        if self.open_sink is not None:
            self._open_sink()
        if self.reader is not None:
            return self.reader.next(want)
        if self.finished:
            return None
        chunk = self.it.next(want)
        if chunk is None:
            self.finished = True
            self.sink.finish(self.start)
            return None
        chunk = self.sink.write(chunk)   # as kept: a memory cache's rows read-only
        self.rows += chunk.n
        if self.rows == self.complete_at and not self.completed:
            self.completed = True
            self.sink.finish(self.start)
        return chunk

    def save(self) -> dict:
        if self.reader is not None:
            return self.reader.save()
        if self.finished:
            return {"mode": "read", "pos": self.rows, "start": self.start}
        return {"mode": "write", "start": self.start, "rows": self.rows}

    def close(self) -> None:
        if not self.finished and not self.completed and self.sink is not None:
            self.sink.abandon()
        self.it.close()

    def __del__(self):
        if not getattr(self, "finished", True) and not getattr(self, "completed", False) \
                and getattr(self, "sink", None) is not None:
            self.sink.abandon()


class MemoryChunks(ChunkIter):
    """Chunks of a complete memory cache. State: rows read (and how the cache was made)."""

    def __init__(self, chunks: list, start, pos: int):
        self.chunks = chunks
        self.start = start
        self.pos = pos
        self.index, self.offset = 0, pos
        while self.index < len(chunks) and self.offset >= chunks[self.index].n:
            self.offset -= chunks[self.index].n
            self.index += 1

    def next(self, want: int):
        while self.index < len(self.chunks):
            chunk = self.chunks[self.index]
            if self.offset < chunk.n:
                b = min(chunk.n, self.offset + want)
                out = chunk.slice(self.offset, b) if (self.offset, b) != (0, chunk.n) else chunk
                self.pos += b - self.offset
                self.offset = b
                return out
            self.index += 1
            self.offset = 0
        return None

    def save(self) -> dict:
        return {"mode": "read", "pos": self.pos, "start": self.start}


class FileChunks(ChunkIter):
    """Chunks of a complete cache file, memory-mapped; the file is opened (and checked
    against the element spec) at the first read, as tf.data reads it at the first
    element. State: rows read."""

    def __init__(self, path: str, spec, pos: int):
        self.path, self.spec = path, spec
        self.records = None
        self.pos = pos            # rows read, or to pass when the file is opened
        self.current: Chunk | None = None
        self.offset = 0

    def _open(self) -> None:
        self.records = _open_file(self.path, self.spec).chunks()
        skip, self.pos = self.pos, 0
        while self.pos < skip:
            if not self._load():
                break
            take = min(skip - self.pos, self.current.n)
            self.offset = take
            self.pos += take

    def _load(self) -> bool:
        try:
            columns, rows = next(self.records)
        except StopIteration:
            self.current = None
            return False
        self.current, self.offset = Chunk(columns, rows), 0
        return True

    def next(self, want: int):
        if self.records is None:
            self._open()
        while self.current is None or self.offset >= self.current.n:
            if not self._load():
                return None
        a, b = self.offset, min(self.current.n, self.offset + want)
        self.offset = b
        self.pos += b - a
        return self.current.slice(a, b) if (a, b) != (0, self.current.n) else self.current

    def save(self) -> dict:
        return {"mode": "read", "pos": self.pos}


__all__ = ["Cache", "FileWriter", "MemoryStore", "concat_chunks"]
