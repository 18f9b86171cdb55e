"""``cache``: keep the elements of the first full iteration in memory or in a file."""

from __future__ import annotations

import dataclasses
import fcntl
import glob
import os
import threading
import uuid

from nbdata.errors import AlreadyExistsError, DataLossError
from nbdata.io.column_file import ColumnFileReader, ColumnFileWriter
from nbdata.ops.node import Node, arg_field, input_field, new_resource_key
from nbdata.spec import flatten, is_dataset, pack_as

FILE_SUFFIX = ".nbcache"
LOCK_SUFFIX = ".nbcache.lock"


class MemoryStore:
    """The cached elements, complete only after one iteration reached the end."""

    def __init__(self):
        self.elements: list | None = None
        self.lock = threading.Lock()


@dataclasses.dataclass(frozen=True, eq=False)
class Cache(Node):
    input: Node = input_field()
    filename: str = arg_field()
    resource_key: int = dataclasses.field(default_factory=new_resource_key, compare=False)
    op = "cache"

    @property
    def spec(self):
        return self.input.spec

    def cardinality(self) -> int:
        return self.input.cardinality()

    def open(self, ctx):
        if self.filename:
            path = self.filename + FILE_SUFFIX
            if os.path.exists(path):
                return FileReader(path, self.spec)
            writer = FileWriter(self.filename, ctx.open(self.input))
            if os.path.exists(path):  # another writer finished while this one waited
                writer._abandon()
                return FileReader(path, self.spec)
            return writer
        store = ctx.resource(self.resource_key, MemoryStore)
        with store.lock:
            elements = store.elements
        if elements is not None:
            return iter(elements)
        return MemoryWriter(store, ctx.open(self.input))


class MemoryWriter:
    def __init__(self, store, source):
        self.store, self.source = store, source
        self.elements: list = []

    def __iter__(self):
        return self

    def __next__(self):
        try:
            value = next(self.source)
        except StopIteration:
            with self.store.lock:
                if self.store.elements is None:
                    self.store.elements = self.elements
            raise
        self.elements.append(value)
        return value


def _check_cacheable(value, filename):
    if any(is_dataset(v) for v in flatten(value)):
        raise TypeError(f"cache: cannot write elements that contain datasets to {filename!r}")


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


class FileWriter:
    """Streams elements to a temporary file, renamed into place when the input ends.

    The writer holds :class:`WriterLock`; a second concurrent writer gets
    AlreadyExistsError. An iteration abandoned before the end leaves no cache, and
    temporary files of crashed writers are removed by the next writer.
    """

    def __init__(self, filename: str, source):
        self.filename = filename
        self.final = filename + FILE_SUFFIX
        self.lock = WriterLock(filename)
        for stale in glob.glob(glob.escape(self.final) + ".*.tmp"):
            try:
                os.unlink(stale)
            except OSError:
                pass
        self.tmp = f"{self.final}.{uuid.uuid4().hex}.tmp"
        self.source = source
        self.writer = ColumnFileWriter(self.tmp)
        self.done = False

    def __iter__(self):
        return self

    def __next__(self):
        if self.done:
            raise StopIteration
        try:
            value = next(self.source)
        except StopIteration:
            self._finish()
            raise
        except BaseException:
            self._abandon()
            raise
        _check_cacheable(value, self.filename)
        self.writer.write(flatten(value))
        return value

    def _finish(self):
        self.done = True
        self.writer.close()
        os.replace(self.tmp, self.final)
        self.lock.release()

    def _abandon(self):
        if self.done:
            return
        self.done = True
        self.writer.abandon()
        try:
            os.unlink(self.tmp)
        except FileNotFoundError:
            pass
        self.lock.release()

    def __del__(self):
        if hasattr(self, "writer"):
            self._abandon()


class FileReader:
    """The elements of a complete cache file, rebuilt along the node's spec."""

    def __init__(self, path: str, spec):
        self.reader = ColumnFileReader(path)
        self.spec = spec
        if len(self.reader.names) != len(flatten(spec)) and self.reader.names:
            raise DataLossError(
                f"cache: {path} holds elements with {len(self.reader.names)} components, but "
                f"this dataset's elements have {len(flatten(spec))}; delete the file to "
                f"rebuild the cache", "cache")
        self.chunks = self.reader.chunks()
        self.rows: list = []
        self.index = 0

    def __iter__(self):
        return self

    def __next__(self):
        while self.index >= len(self.rows):
            columns = next(self.chunks)
            self.rows = [pack_as(self.spec, list(leaves)) for leaves in zip(*columns)]
            self.index = 0
        row = self.rows[self.index]
        self.index += 1
        return row
