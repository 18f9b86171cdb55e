"""Iterator checkpoints: a data-only encoding of iterator state, and ``nd.Checkpoint``.

An iterator's state is plain data: dicts, lists, numbers, strings, bytes, NumPy arrays
and the chunks of rows an op holds (a partial batch, a shuffle buffer). ``encode``
writes it as one JSON document plus raw buffers, ``decode`` reads it back; nothing in
it is executed when read (no pickle).
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

import numpy as np

from nbdata.chunks import Chunk, RowList, StringColumn
from nbdata.errors import DataLossError, InvalidArgumentError, UnimplementedError
from nbdata.spec import is_dataset

MAGIC = b"NBSTATE1"
_LEN = struct.Struct("<Q")


def encode(value: Any) -> bytes:
    """The bytes of a state value (see the module docstring for what it may hold).

    >>> decode(encode({"pos": 3, "buf": np.arange(3), "s": [b"x", None, (1.5, "a")]}))
    {'pos': 3, 'buf': array([0, 1, 2]), 's': [b'x', None, (1.5, 'a')]}
    """
    blobs: list[bytes] = []

    def blob(data: bytes) -> int:
        blobs.append(data)
        return len(blobs) - 1

    def walk(v):
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, (int, np.integer)) and not isinstance(v, np.bool_):
            return {"i": str(int(v))}
        if isinstance(v, float):
            return {"f": v.hex()}
        if isinstance(v, bytes):
            return {"b": blob(v)}
        if isinstance(v, np.generic):
            return {"s": walk(np.asarray(v))}
        if isinstance(v, np.ndarray):
            if v.dtype == object:
                return {"o": [walk(x) for x in v.reshape(-1)], "shape": list(v.shape)}
            return {"a": blob(np.ascontiguousarray(v).tobytes()), "dtype": v.dtype.str,
                    "shape": list(v.shape)}
        if isinstance(v, StringColumn):
            return {"str": [walk(v.data), walk(v.offsets)]}
        if isinstance(v, RowList):
            return {"rows": [walk(x) for x in v]}
        if isinstance(v, Chunk):
            return {"chunk": [walk(c) for c in v.columns], "n": v.n}
        if isinstance(v, tuple):
            return {"t": [walk(x) for x in v]}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {"d": [[walk(k), walk(x)] for k, x in v.items()]}
        if is_dataset(v):
            raise UnimplementedError("cannot save an iterator whose state holds a dataset "
                                     "(an element of window() kept by an op)")
        raise UnimplementedError(f"cannot save iterator state holding a {type(v).__name__}")

    doc = json.dumps(walk(value), separators=(",", ":")).encode()
    offsets, pos = [], 0
    for b in blobs:
        offsets.append([pos, len(b)])
        pos += len(b)
    head = json.dumps(offsets, separators=(",", ":")).encode()
    return MAGIC + _LEN.pack(len(doc)) + doc + _LEN.pack(len(head)) + head + b"".join(blobs)


def decode(data: bytes) -> Any:
    """The state value of :func:`encode`'s bytes; DataLossError if they are not such."""
    try:
        if not data.startswith(MAGIC):
            raise ValueError("not an nbdata iterator state (bad magic)")
        p = len(MAGIC)
        (n,) = _LEN.unpack_from(data, p)
        doc = json.loads(data[p + 8:p + 8 + n])
        p += 8 + n
        (m,) = _LEN.unpack_from(data, p)
        offsets = json.loads(data[p + 8:p + 8 + m])
        base = p + 8 + m
        blobs = []
        for start, size in offsets:
            if base + start + size > len(data):
                raise ValueError("a buffer runs past the end")
            blobs.append(data[base + start:base + start + size])
    except (ValueError, struct.error, TypeError) as e:
        raise DataLossError(f"corrupt iterator state: {e}") from None

    def walk(v):
        if isinstance(v, list):
            return [walk(x) for x in v]
        if not isinstance(v, dict):
            return v
        if "i" in v:
            return int(v["i"])
        if "f" in v:
            return float.fromhex(v["f"])
        if "b" in v:
            return blobs[v["b"]]
        if "s" in v:
            return walk(v["s"])[()]
        if "a" in v:
            return np.frombuffer(blobs[v["a"]], np.dtype(v["dtype"])).reshape(v["shape"]).copy()
        if "o" in v:
            out = np.empty(len(v["o"]), dtype=object)
            for j, x in enumerate(v["o"]):
                out[j] = walk(x)
            return out.reshape(v["shape"])
        if "str" in v:
            return StringColumn(*[walk(x) for x in v["str"]])
        if "rows" in v:
            return RowList(walk(x) for x in v["rows"])
        if "chunk" in v:
            return Chunk([walk(c) for c in v["chunk"]], int(v["n"]))
        if "t" in v:
            return tuple(walk(x) for x in v["t"])
        if "d" in v:
            return {walk(k): walk(x) for k, x in v["d"]}
        raise DataLossError(f"corrupt iterator state: unknown entry {sorted(v)}")

    return walk(doc)


def write_atomically(path: str, data: bytes) -> None:
    """Write ``data`` to a temporary file, sync it, and rename it to ``path``: a reader
    sees the old file or the whole new one, never part of it."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class Checkpoint:
    """Saves and restores the state of named iterators, like ``tf.train.Checkpoint``.

    ``write(path)`` writes every iterator's state to one file atomically (temporary
    file, fsync, rename) and returns the path; ``read(path)`` restores each iterator.
    ``save(prefix)`` writes ``prefix-N`` with a counter; ``restore`` is ``read``.

    >>> import nbdata as nd, os, tempfile
    >>> it = iter(nd.Dataset.range(5))
    >>> _ = next(it)
    >>> path = nd.Checkpoint(iterator=it).write(os.path.join(tempfile.mkdtemp(), "ckpt"))
    >>> _ = next(it)
    >>> _ = nd.Checkpoint(iterator=it).read(path)
    >>> [int(x) for x in it]
    [1, 2, 3, 4]
    """

    def __init__(self, **iterators):
        from nbdata.iterator import Iterator
        for name, it in iterators.items():
            if not isinstance(it, Iterator):
                raise TypeError(f"Checkpoint: {name} must be an nd.Iterator, got {type(it).__name__}")
        self.iterators = iterators
        self.save_counter = 0

    def write(self, path: str) -> str:
        data = encode({name: it.save() for name, it in self.iterators.items()})
        write_atomically(os.fspath(path), data)
        return os.fspath(path)

    def read(self, path: str) -> "Checkpoint":
        with open(os.fspath(path), "rb") as f:
            states = decode(f.read())
        missing = sorted(set(self.iterators) - set(states))
        if missing:
            raise InvalidArgumentError(f"Checkpoint.read: {path} has no state for {missing}")
        for name, it in self.iterators.items():
            it.restore(states[name])
        return self

    def save(self, file_prefix: str) -> str:
        self.save_counter += 1
        return self.write(f"{os.fspath(file_prefix)}-{self.save_counter}")

    restore = read
