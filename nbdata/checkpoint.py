"""Iterator checkpoints: a data-only encoding of iterator state, and ``nd.Checkpoint``.

An iterator's state is plain data: dicts, lists, numbers, strings, bytes, NumPy arrays
and the chunks of rows an op holds (a partial batch, a shuffle buffer). ``encode``
writes it as one JSON document plus raw buffers, ``decode`` reads it back; nothing in
it is executed when read (no pickle).

Layout (format version 2): the magic ``NBSTATE`` and the version digit ``2``; the
payload length (8 bytes, little-endian); the CRC32C of those 16 bytes and the CRC32C of
the payload (4 bytes each); then the payload: the JSON document's length and text, the
buffer table's length and text (``[[offset, size], ...]``), and the buffers. ``decode``
checks all of it before reading anything: a state that is cut short, altered, or of
another format version raises DataLossError saying which.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

import numpy as np

from nbdata.chunks import Chunk, PackedRows, RowList, StringColumn
from nbdata.errors import (DataLossError, InvalidArgumentError, NotFoundError, OpError,
                           UnimplementedError)
from nbdata.spec import is_dataset


def _crc(b) -> int:
    """CRC32C of ``b`` (the kernel module is imported by the first checkpoint)."""
    from nbdata.kernels.crc32c import crc32c_bytes
    return crc32c_bytes(b)


MAGIC = b"NBSTATE"
VERSION = b"2"
_LEN = struct.Struct("<Q")
_CRCS = struct.Struct("<II")
HEADER_BYTES = len(MAGIC) + len(VERSION) + _LEN.size + _CRCS.size


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
        if isinstance(v, PackedRows):       # one buffer, offsets and shapes, not rows
            return {"packed": [walk(x) for x in v.packed]}
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
    payload = b"".join([_LEN.pack(len(doc)), doc, _LEN.pack(len(head)), head] + blobs)
    start = MAGIC + VERSION + _LEN.pack(len(payload))
    return start + _CRCS.pack(_crc(start), _crc(payload)) + payload


def _checked_payload(data) -> memoryview:
    """The payload of a saved state, after checking its magic, format version, length
    and checksums (DataLossError saying what is wrong)."""
    view = memoryview(data).cast("B")
    size = len(view)
    if bytes(view[:len(MAGIC)]) != MAGIC[:min(size, len(MAGIC))]:
        raise DataLossError("corrupt iterator state: not an nbdata iterator state (bad magic)")
    if size <= len(MAGIC):
        raise DataLossError(f"truncated iterator state: {size} bytes, the header alone "
                            f"has {HEADER_BYTES}")
    version = bytes(view[len(MAGIC):len(MAGIC) + 1])
    if version != VERSION:
        why = (" (saved by an older nbdata, without a checksum: save it again)"
               if version == b"1" else "")
        raise DataLossError(f"corrupt iterator state: unknown format version {version!r}, "
                            f"this nbdata reads version {VERSION.decode()}{why}")
    if size < HEADER_BYTES:
        raise DataLossError(f"truncated iterator state: {size} bytes, the header alone "
                            f"has {HEADER_BYTES}")
    lead = HEADER_BYTES - _CRCS.size
    head_crc, payload_crc = _CRCS.unpack_from(view, lead)
    if _crc(view[:lead]) != head_crc:
        raise DataLossError("corrupt iterator state: bad header checksum")
    (length,) = _LEN.unpack_from(view, lead - _LEN.size)
    payload = view[HEADER_BYTES:]
    if len(payload) < length:
        raise DataLossError(f"truncated iterator state: {len(payload)} of its {length} "
                            "payload bytes are there")
    if len(payload) > length:
        raise DataLossError(f"corrupt iterator state: {len(payload) - length} unexpected "
                            "bytes after its end")
    found = _crc(payload)
    if found != payload_crc:
        raise DataLossError(f"corrupt iterator state: bad checksum (stored {payload_crc:#010x}, "
                            f"computed {found:#010x})")
    return payload


def decode(data) -> Any:
    """The state value of :func:`encode`'s bytes; DataLossError if they are not such:
    a wrong magic or format version, a cut, or bytes that changed (checksums).

    >>> state = encode({"pos": 3})
    >>> decode(state[:-1])
    Traceback (most recent call last):
    ...
    nbdata.errors.DataLossError: truncated iterator state: 42 of its 43 payload bytes are there
    """
    payload = _checked_payload(data)
    try:
        (n,) = _LEN.unpack_from(payload, 0)
        doc = json.loads(bytes(payload[8:8 + n]))
        p = 8 + n
        (m,) = _LEN.unpack_from(payload, p)
        offsets = json.loads(bytes(payload[p + 8:p + 8 + m]))
        base = p + 8 + m
        blobs = []
        for start, size in offsets:
            if start < 0 or size < 0 or base + start + size > len(payload):
                raise ValueError("a buffer runs past the end")
            blobs.append(bytes(payload[base + start:base + start + size]))
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
        if "packed" in v:
            parts = [walk(x) for x in v["packed"]]
            if len(parts) != 3 or not all(isinstance(x, np.ndarray) for x in parts):
                raise DataLossError("corrupt iterator state: packed rows of another layout")
            return PackedRows(*parts)      # checked against the op by nbdata.state_check
        if "rows" in v:
            return RowList(walk(x) for x in v["rows"])
        if "chunk" in v:
            return Chunk([walk(c) for c in v["chunk"]], int(v["n"]))
        if "t" in v:
            return tuple(walk(x) for x in v["t"])
        if "d" in v:
            return {walk(k): walk(x) for k, x in v["d"]}
        raise DataLossError(f"corrupt iterator state: unknown entry {sorted(v)}")

    try:
        return walk(doc)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError) as e:
        raise DataLossError(f"corrupt iterator state: {type(e).__name__}: {e}") from None


def write_atomically(path: str, data: bytes) -> None:
    """Write ``data`` to a temporary file, sync it, and rename it to ``path``: a reader
    sees the old file or the whole new one, never part of it."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    try:
        fsync_path(os.path.dirname(os.path.abspath(path)))   # the rename, on disk
    except OSError:
        pass


def fsync_path(path: str) -> None:
    """Sync a file or a directory (its entries) to disk by path; OSError when it cannot
    be opened (a file system that cannot sync is not an error)."""
    fd = os.open(path, os.O_RDONLY)
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
        """Restore every iterator from the file ``path``; none is changed when the file is
        corrupt (DataLossError), lacks one of them (InvalidArgumentError), or holds a
        state that does not fit its iterator's pipeline."""
        path = os.fspath(path)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise NotFoundError(f"Checkpoint.read: no checkpoint at {path!r}") from None
        try:
            states = decode(data)
        except DataLossError as e:
            raise DataLossError(f"Checkpoint.read: {path}: {e.message}") from None
        if not isinstance(states, dict) or not all(
                isinstance(k, str) and isinstance(v, bytes) for k, v in states.items()):
            raise DataLossError(f"Checkpoint.read: {path} is not a checkpoint of iterators")
        missing = sorted(set(self.iterators) - set(states))
        if missing:
            raise InvalidArgumentError(f"Checkpoint.read: {path} has no state for {missing}")
        for name, it in self.iterators.items():   # all checked before any is restored
            if it._pipeline is not None:
                try:
                    it._pipeline.read_state(states[name])
                except OpError as e:
                    raise type(e)(f"Checkpoint.read: {path}, iterator {name!r}: {e.message}",
                                  e.op) from None
        for name, it in self.iterators.items():
            it.restore(states[name])
        return self

    def save(self, file_prefix: str) -> str:
        self.save_counter += 1
        return self.write(f"{os.fspath(file_prefix)}-{self.save_counter}")

    restore = read
