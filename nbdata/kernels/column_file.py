"""A data-only file of element columns (the format of ``cache(filename)``): nothing in it
is executed when read, unlike a pickle.

Layout: the 8-byte magic, then records. A record is an 8-byte little-endian header
length, a UTF-8 JSON header (padded to 8 bytes), and raw buffers (each padded to 8
bytes). The first record describes the leaves (``{"version", "leaves": [dtype names]}``),
each chunk record holds ``rows`` rows of every leaf, and the last record is
``{"end": true, "rows": total}``; a file without it is incomplete. A leaf of a chunk is
one of:

- ``dense``: one array of shape ``[rows, *row_shape]`` (numbers, all rows alike);
- ``ragged``: numbers whose row shapes differ: ranks, dims and the concatenated data;
- ``strings``: ranks, dims, then int64 offsets and the bytes of every string (a scalar
  ``bytes`` row has rank 0).

Dense buffers are read as views of a memory map: re-reading a cache copies nothing.
"""

from __future__ import annotations

import json
import mmap
import os
import struct

import numpy as np

from nbdata.chunks import RowList, StringColumn
from nbdata.errors import DataLossError
from nbdata.kernels.batching import object_rows

MAGIC = b"NBCOLS\x00\x01"
VERSION = 1
_LEN = struct.Struct("<Q")


def _pad(n: int) -> int:
    return (-n) % 8


def _leaf_name(column) -> str:
    if isinstance(column, StringColumn) or (isinstance(column, np.ndarray) and column.dtype == object):
        return "string"
    if isinstance(column, np.ndarray):
        return column.dtype.str
    first = column[0] if len(column) else None
    if isinstance(first, bytes) or (isinstance(first, np.ndarray) and first.dtype == object):
        return "string"
    return np.asarray(first).dtype.str


def _shapes(arrays: list) -> list:
    """The ranks and dims buffers of the rows ``arrays``."""
    return [np.array([a.ndim for a in arrays], np.int64).tobytes(),
            np.array([d for a in arrays for d in a.shape], np.int64).tobytes()]


def _strings(arrays: list) -> tuple[dict, list]:
    strings = [s for a in arrays for s in a.reshape(-1)]
    offsets = np.zeros(len(strings) + 1, np.int64)
    if strings:
        np.cumsum([len(s) for s in strings], out=offsets[1:])
    return {"kind": "strings"}, _shapes(arrays) + [offsets.tobytes(), b"".join(strings)]


def _encode_column(column) -> tuple[dict, list]:
    """The header entry and buffers of one column of a chunk."""
    if isinstance(column, StringColumn):
        offsets = column.offsets - column.offsets[0]
        data = column.data[column.offsets[0]:column.offsets[-1]]
        return {"kind": "strings"}, [np.zeros(len(column), np.int64).tobytes(), b"",
                                     offsets.tobytes(), np.ascontiguousarray(data).tobytes()]
    if isinstance(column, np.ndarray):
        if column.dtype == object:
            return _strings([np.asarray(column[j], dtype=object) for j in range(len(column))])
        dense = np.ascontiguousarray(column)
        return {"kind": "dense", "dtype": dense.dtype.str, "shape": list(dense.shape)}, [dense.tobytes()]
    values = list(column)
    if values and (isinstance(values[0], bytes) or
                   (isinstance(values[0], np.ndarray) and values[0].dtype == object)):
        return _strings([np.asarray(v, dtype=object) for v in values])
    arrays = [np.asarray(v) for v in values]
    data = b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)
    return ({"kind": "ragged", "dtype": arrays[0].dtype.str if arrays else "<f8"},
            _shapes(arrays) + [data])


class ColumnFileWriter:
    """Writes chunks of rows (columns in the kinds of ``nbdata.chunks``) to ``path``;
    ``close()`` writes the end record. The caller decides where ``path`` is (a
    temporary name)."""

    def __init__(self, path: str):
        self.path = path
        self.file = open(path, "wb")
        self.file.write(MAGIC)
        self.total = 0
        self.names: list[str] | None = None

    def _record(self, header: dict, buffers: list[bytes]) -> None:
        header = dict(header, buffers=[len(b) for b in buffers])
        text = json.dumps(header, separators=(",", ":")).encode()
        self.file.write(_LEN.pack(len(text)) + text + b"\0" * _pad(len(text)))
        for b in buffers:
            self.file.write(b)
            self.file.write(b"\0" * _pad(len(b)))

    def write(self, columns: list, rows: int) -> None:
        if rows == 0:
            return
        if self.names is None:
            self.names = [_leaf_name(c) for c in columns]
            self._record({"version": VERSION, "leaves": self.names}, [])
        entries, buffers = [], []
        for column in columns:
            entry, bufs = _encode_column(column)
            entry["nbuffers"] = len(bufs)
            entries.append(entry)
            buffers += bufs
        self._record({"rows": rows, "leaves": entries}, buffers)
        self.total += rows

    def close(self) -> None:
        """Write the end record and sync the file to disk."""
        if self.names is None:
            self._record({"version": VERSION, "leaves": []}, [])
        self._record({"end": True, "rows": self.total}, [])
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()

    def abandon(self) -> None:
        self.file.close()


class ColumnFileReader:
    """Reads the rows of a complete column file; every defect (a bad magic, a header
    that does not parse, a buffer past the end, no end record) is a DataLossError
    naming the file and the offset."""

    def __init__(self, path: str):
        self.path = path
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < len(MAGIC):
                raise self._error(0, "the file is too short to be an nbdata column file")
            self.map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        if self.map[:len(MAGIC)] != MAGIC:
            raise self._error(0, "it is not an nbdata column file (bad magic)")
        self.offset = len(MAGIC)
        first, _ = self._read_record()
        if first.get("version") != VERSION:
            raise self._error(len(MAGIC), f"unsupported version {first.get('version')!r}")
        self.names = first.get("leaves", [])

    def _error(self, offset: int, what: str) -> DataLossError:
        return DataLossError(f"cache: {self.path} is corrupt at offset {offset}: {what}", "cache")

    def _read_record(self) -> tuple[dict, list[memoryview]]:
        start = self.offset
        end = len(self.map)
        if start + 8 > end:
            raise self._error(start, "the file ends before its end record (incomplete write)")
        (n,) = _LEN.unpack_from(self.map, start)
        pos = start + 8
        if n > end - pos:
            raise self._error(start, f"header length {n} runs past the end of the file")
        try:
            header = json.loads(bytes(self.map[pos:pos + n]))
            sizes = [int(b) for b in header.get("buffers", [])]
        except (ValueError, TypeError, AttributeError) as e:
            raise self._error(start, f"unreadable record header ({e})") from None
        pos += n + _pad(n)
        buffers = []
        for size in sizes:
            if size < 0 or size > end - pos:
                raise self._error(pos, f"a buffer of {size} bytes runs past the end of the file")
            buffers.append(memoryview(self.map)[pos:pos + size])
            pos += size + _pad(size)
        self.offset = pos
        return header, buffers

    def chunks(self):
        """Yields each chunk of rows as (columns, rows)."""
        while True:
            start = self.offset
            header, buffers = self._read_record()
            if header.get("end"):
                return
            try:
                yield self._decode(header, buffers), int(header["rows"])
            except (KeyError, ValueError, TypeError, IndexError) as e:
                raise self._error(start, f"inconsistent chunk record ({e})") from None

    def _decode(self, header: dict, buffers: list) -> list:
        rows = int(header["rows"])
        columns = []
        it = iter(buffers)
        for entry in header["leaves"]:
            bufs = [next(it) for _ in range(int(entry["nbuffers"]))]
            kind = entry["kind"]
            if kind == "dense":
                shape = tuple(int(d) for d in entry["shape"])
                column = np.frombuffer(bufs[0], dtype=np.dtype(entry["dtype"])).reshape(shape)
                if len(column) != rows:
                    raise ValueError(f"{len(column)} rows where the record says {rows}")
                columns.append(column)
                continue
            ranks = np.frombuffer(bufs[0], np.int64)
            dims = np.frombuffer(bufs[1], np.int64)
            if len(ranks) != rows or int(ranks.sum()) != len(dims) or (ranks < 0).any() or (dims < 0).any():
                raise ValueError("row shapes do not match the record")
            if kind == "strings":
                offsets = np.frombuffer(bufs[2], np.int64)
                data = np.frombuffer(bufs[3], np.uint8)
                if len(offsets) == 0 or offsets[-1] > len(data) or (np.diff(offsets) < 0).any():
                    raise ValueError("string offsets do not match the data")
                if not ranks.any():
                    if len(offsets) != rows + 1:
                        raise ValueError("fewer strings than rows")
                    columns.append(StringColumn(data, offsets))
                    continue
            ends = np.cumsum(ranks)
            shapes = [tuple(int(x) for x in dims[e - r:e]) for r, e in zip(ranks, ends)]
            if kind == "ragged":
                data = np.frombuffer(bufs[2], dtype=np.dtype(entry["dtype"]))
                values, p = [], 0
                for shape in shapes:
                    size = int(np.prod(shape))
                    if p + size > len(data):
                        raise ValueError("ragged data shorter than its shapes")
                    v = data[p:p + size].reshape(shape)
                    values.append(v[()] if v.ndim == 0 else v)
                    p += size
                columns.append(RowList(values))
            elif kind == "strings":
                raw = data.tobytes()
                values, s = [], 0
                for shape in shapes:
                    count = int(np.prod(shape))
                    if s + count + 1 > len(offsets):
                        raise ValueError("fewer strings than the shapes need")
                    items = [raw[offsets[s + j]:offsets[s + j + 1]] for j in range(count)]
                    s += count
                    values.append(items[0] if shape == () else object_rows(items).reshape(shape))
                columns.append(RowList(values) if len({np.shape(v) for v in values}) > 1
                               else object_rows(values))
            else:
                raise ValueError(f"unknown leaf kind {kind!r}")
        return columns
