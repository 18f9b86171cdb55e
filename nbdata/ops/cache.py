"""``cache``: keep the elements of the first full iteration in memory or in a file."""

from __future__ import annotations

import dataclasses
import os
import pickle
import threading
import uuid

from nbdata.errors import AlreadyExistsError, DataLossError
from nbdata.ops.node import Node, arg_field, input_field, new_resource_key
from nbdata.spec import flatten, is_dataset

FILE_SUFFIX = ".nbcache"
LOCK_SUFFIX = ".nbcache.lock"
MAGIC = b"NBDATA-CACHE-1\n"


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
                return FileReader(path)
            return FileWriter(self.filename, ctx.open(self.input))
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


def _check_picklable(value, filename):
    if any(is_dataset(v) for v in flatten(value)):
        raise TypeError(f"cache: cannot write elements that contain datasets to {filename!r}")


class FileWriter:
    """Streams elements to a temporary file, renamed into place when the input ends.

    A lock file marks the write in progress; a second concurrent writer gets
    AlreadyExistsError. An iteration abandoned before the end leaves no cache.
    """

    def __init__(self, filename: str, source):
        self.filename = filename
        self.final = filename + FILE_SUFFIX
        self.lock_path = filename + LOCK_SUFFIX
        self.tmp = f"{filename}{FILE_SUFFIX}.{uuid.uuid4().hex}.tmp"
        try:
            fd = os.open(self.lock_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            raise AlreadyExistsError(
                f"cache: another iterator is writing the cache {filename!r} (lock file "
                f"{self.lock_path} exists); if no other iterator is running, delete the lock file",
                "cache") from None
        os.close(fd)
        self.source = source
        self.file = open(self.tmp, "wb")
        self.file.write(MAGIC)
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
        _check_picklable(value, self.filename)
        pickle.dump(value, self.file, protocol=pickle.HIGHEST_PROTOCOL)
        return value

    def _finish(self):
        self.done = True
        self.file.close()
        os.replace(self.tmp, self.final)
        os.unlink(self.lock_path)

    def _abandon(self):
        if self.done:
            return
        self.done = True
        self.file.close()
        for p in (self.tmp, self.lock_path):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass

    def __del__(self):
        if hasattr(self, "file"):
            self._abandon()


class FileReader:
    def __init__(self, path: str):
        self.path = path
        self.file = open(path, "rb")
        if self.file.read(len(MAGIC)) != MAGIC:
            self.file.close()
            raise DataLossError(f"cache: {path} is not an nbdata cache file", "cache")

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return pickle.load(self.file)
        except EOFError:
            self.file.close()
            raise StopIteration from None
        except (pickle.UnpicklingError, ValueError) as e:
            self.file.close()
            raise DataLossError(f"cache: {self.path} is corrupt at offset {self.file.tell()}: {e}",
                                "cache") from e
