"""A data-only file of element columns (the format of ``cache(filename)``): nothing in it
is executed when read, unlike a pickle.

Layout (version 2): the 8-byte magic, then records. A record is an 8-byte
little-endian header length, the CRC32C of those 8 bytes and the CRC32C of the header
(4 bytes each), a UTF-8 JSON header (padded to 8 bytes), and raw buffers (each padded
to 8 bytes) whose sizes and CRC32Cs the header lists (``buffers``, ``crcs``). The first
record describes the leaves (``{"version", "leaves": [dtype names]}``), each chunk
record holds ``rows`` rows of every leaf, and the last record is ``{"end": true,
"rows": total}``; a file without it is incomplete. Every checksum is verified as the
record is read: a byte that changed is a DataLossError, never a wrong element.

Compressed files (``save`` / ``snapshot`` with ``compression="GZIP"`` or ``"SNAPPY"``)
have the same layout; their first record says ``"version": 3`` and ``"compression"``,
and each chunk record's header names its ``codec`` (``"zlib"``: a zlib stream, read
and written by isal when installed, else the standard library; ``"snappy"``: raw
snappy blocks, through pyarrow or python-snappy) and lists the ``raw`` (uncompressed)
size of each buffer. Its ``buffers`` / ``crcs`` are the sizes and CRC32Cs of the
stored (compressed) bytes, so a changed byte is still a DataLossError naming the
offset, found before anything is decompressed. Uncompressed files are written as
before (version 2: older nbdata reads them); a reader takes both, and an older one
refuses a compressed file ("unsupported version 3") instead of misreading it. A leaf
of a chunk is one of:

- ``dense``: one array of shape ``[rows, *row_shape]`` (numbers, all rows alike);
- ``ragged``: numbers whose row shapes differ: ranks, dims and the concatenated data;
- ``strings``: ranks, dims, then int64 offsets and the bytes of every string (a scalar
  ``bytes`` row has rank 0).

Dense buffers of an uncompressed file are read as views of a memory map: re-reading a
cache copies nothing (the checksums read every byte once).
"""

from __future__ import annotations

import json
import mmap
import os
import struct

import numpy as np

from nbdata.chunks import RowList, StringColumn
from nbdata.errors import DataLossError, InvalidArgumentError, NotFoundError, UnimplementedError
from nbdata.kernels.batching import object_rows
from nbdata.spec import TensorSpec, dtype_name, shapes_compatible, string


def crc32c_bytes(b) -> int:
    """CRC32C of ``b`` (the kernel module is imported by the first cache file)."""
    from nbdata.kernels.crc32c import crc32c_bytes as crc
    return crc(b)


MAGIC = b"NBCOLS\x00\x02"
VERSION = 2              # the first record's version of an uncompressed file
COMPRESSED_VERSION = 3   # ... of a file with compressed records
READ_VERSIONS = (VERSION, COMPRESSED_VERSION)
_LEN = struct.Struct("<Q")
_CRCS = struct.Struct("<II")
_PREFIX = _LEN.size + _CRCS.size


def _pad(n: int) -> int:
    return (-n) % 8


# ------------------------------------------------------------------ compression

SNAPPY_EXTRA = ("pip install pyarrow (nbdata's [arrow] extra) or python-snappy; "
                "compression='GZIP' needs nothing extra")


def compression_name(value, op: str) -> str:
    """``""`` (uncompressed), ``"GZIP"`` or ``"SNAPPY"`` for a ``compression`` argument of
    ``save`` / ``snapshot`` / ``load``: None, ``""``, ``"NONE"`` and ``"AUTO"`` are
    uncompressed (tf.data's ``"AUTO"`` picks snappy; nbdata's picks no compression, as
    snappy is an optional package here and an uncompressed file is read in place, from a
    memory map); anything else is a ValueError."""
    if value is None or value in ("", "NONE", "AUTO"):
        return ""
    if value in ("GZIP", "SNAPPY"):
        return value
    raise ValueError(f"{op}: compression must be None, 'AUTO', 'GZIP' or 'SNAPPY', got {value!r}")


class _Codec:
    """A buffer codec: ``compress(bytes) -> bytes``, ``decompress(bytes, raw_size)``."""

    def __init__(self, tag: str, compress, decompress, errors: tuple):
        self.tag, self.compress, self.decompress, self.errors = tag, compress, decompress, errors


def _zlib_codec() -> _Codec:
    from nbdata.kernels.files import _inflater
    module, errors = _inflater()    # isal's zlib when installed, else the standard one
    return _Codec("zlib", module.compress,
                  lambda b, n: module.decompress(b, bufsize=max(1, n)), tuple(errors))


def _snappy_codec(op: str, path: str = "") -> _Codec:
    """Snappy through pyarrow, else python-snappy; UnimplementedError naming what to
    install when neither is there."""
    try:
        import pyarrow as pa
        if pa.Codec.is_available("snappy"):
            return _Codec("snappy",
                          lambda b: pa.compress(b, codec="snappy", asbytes=True),
                          lambda b, n: pa.decompress(b, decompressed_size=n, codec="snappy",
                                                     asbytes=True),
                          (OSError, ValueError, pa.ArrowException))
    except ImportError:
        pass
    try:
        import snappy
        return _Codec("snappy", snappy.compress, lambda b, n: snappy.uncompress(bytes(b)),
                      (Exception,))
    except ImportError:
        pass
    where = f" ({path} holds snappy-compressed records)" if path else ""
    raise UnimplementedError(f"{op}: compression='SNAPPY' needs a snappy codec{where}: "
                             f"{SNAPPY_EXTRA}", op)


def codec(compression: str, op: str = "save", path: str = "") -> _Codec | None:
    """The codec of a ``compression_name`` (None: uncompressed)."""
    if not compression:
        return None
    if compression == "GZIP":
        return _zlib_codec()
    return _snappy_codec(op, path)


_TAGS = {"zlib": "GZIP", "snappy": "SNAPPY"}


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
    temporary name). ``compression`` (``compression_name``'s ``"GZIP"`` / ``"SNAPPY"``)
    compresses each chunk record's buffers. ``size`` is the bytes written so far (all
    of them in the file after ``flush()``); :meth:`reopen` continues a file at such a
    size."""

    def __init__(self, path: str, compression: str = "", _resume: dict | None = None):
        self.path = path
        self.compression = compression
        self.codec = codec(compression, "save")
        if _resume is None:
            self.file = open(path, "wb")
            self.file.write(MAGIC)
            self.size = len(MAGIC)
            self.total = 0
            self.names: list[str] | None = None
        else:
            self.file = open(path, "r+b")
            self.file.truncate(_resume["size"])
            self.file.seek(_resume["size"])
            self.size, self.total, self.names = _resume["size"], _resume["rows"], _resume["names"]

    @classmethod
    def reopen(cls, path: str, size: int, rows: int, names, compression: str = ""):
        """The writer of ``path`` as it was when it had written ``size`` bytes (the file
        is cut there: records written after it go) holding ``rows`` rows of leaves
        ``names`` (None: no chunk written yet). DataLossError when the file is shorter
        (it lost bytes it had written)."""
        try:
            have = os.path.getsize(path)
        except FileNotFoundError:
            raise DataLossError(f"save: cannot resume writing {path}: the file is gone",
                                "save") from None
        if have < size or size < len(MAGIC):
            raise DataLossError(f"save: cannot resume writing {path}: it holds {have} bytes, "
                                f"the checkpoint counts {size}", "save")
        return cls(path, compression, {"size": int(size), "rows": int(rows),
                                       "names": None if names is None else list(names)})

    def _record(self, header: dict, buffers: list[bytes]) -> None:
        if self.codec is not None and buffers:
            raw = [len(b) for b in buffers]
            buffers = [self.codec.compress(b) for b in buffers]
            header = dict(header, codec=self.codec.tag, raw=raw)
        header = dict(header, buffers=[len(b) for b in buffers],
                      crcs=[crc32c_bytes(b) for b in buffers])
        text = json.dumps(header, separators=(",", ":")).encode()
        length = _LEN.pack(len(text))
        self.file.write(length + _CRCS.pack(crc32c_bytes(length), crc32c_bytes(text)) + text
                        + b"\0" * _pad(len(text)))
        self.size += _PREFIX + len(text) + _pad(len(text))
        for b in buffers:
            self.file.write(b)
            self.file.write(b"\0" * _pad(len(b)))
            self.size += len(b) + _pad(len(b))

    def _first_record(self, names: list) -> None:
        if self.compression:
            self._record({"version": COMPRESSED_VERSION, "leaves": names,
                          "compression": self.compression}, [])
        else:
            self._record({"version": VERSION, "leaves": names}, [])

    def flush(self) -> None:
        """Hand the bytes written so far to the system (``size`` of them in the file)."""
        self.file.flush()

    def write(self, columns: list, rows: int) -> None:
        if rows == 0:
            return
        if self.names is None:
            self.names = [_leaf_name(c) for c in columns]
            self._first_record(self.names)
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
            self._first_record([])
        self._record({"end": True, "rows": self.total}, [])
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()

    def abandon(self) -> None:
        self.file.close()


class ColumnFileReader:
    """Reads the rows of a complete column file; every defect (a bad magic, a checksum
    that does not match, a header that does not parse, a buffer past the end, no end
    record, rows that do not add up to the end record's count, bytes after it) is a
    DataLossError naming the file and the offset.

    ``specs``, when given, are what each leaf must be (``TensorSpec`` or None for no
    check): a file whose leaves have another count, dtype or shape is an
    InvalidArgumentError, as tf.data's "Data type mismatch at component k" /
    "Incompatible shapes at component k" (raised when the file is opened, and for
    shapes, when the chunk holding the row is read).
    """

    def __init__(self, path: str, specs: list | None = None):
        self.path = path
        self._codec = None
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < len(MAGIC):
                    raise self._error(0, "the file is too short to be an nbdata column file")
                self.map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except FileNotFoundError:
            raise NotFoundError(f"cache: {path} does not exist", "cache") from None
        magic = self.map[:len(MAGIC)]
        if magic != MAGIC:
            if magic[:-1] == MAGIC[:-1]:
                raise self._error(0, f"unknown format version {magic[-1]} (this nbdata reads "
                                     f"version {VERSION}); delete the file to rebuild the cache")
            raise self._error(0, "it is not an nbdata column file (bad magic)")
        self.offset = len(MAGIC)
        first, _ = self._read_record()
        if first.get("version") not in READ_VERSIONS:
            raise self._error(len(MAGIC), f"unsupported version {first.get('version')!r} (this "
                                          f"nbdata reads versions {VERSION} and "
                                          f"{COMPRESSED_VERSION}; a newer nbdata wrote it?)")
        self.compression = first.get("compression", "")
        self.names = first.get("leaves", [])
        self.specs = specs
        if specs is not None:
            self._check_leaves(specs)

    def _error(self, offset: int, what: str) -> DataLossError:
        return DataLossError(f"cache: {self.path} is corrupt at offset {offset}: {what}", "cache")

    def _mismatch(self, what: str) -> InvalidArgumentError:
        return InvalidArgumentError(
            f"cache: {self.path}: {what}; the cache was written by a different pipeline "
            "(delete the file to rebuild it)", "cache")

    def _check_leaves(self, specs: list) -> None:
        if not self.names:
            return                        # an empty dataset's file
        if not isinstance(self.names, list) or len(self.names) != len(specs):
            raise self._mismatch(f"it holds elements of {len(self.names)} components, this "
                                 f"dataset's elements have {len(specs)}")
        for k, (name, spec) in enumerate(zip(self.names, specs)):
            if isinstance(spec, TensorSpec):
                self._check_dtype(k, name, spec)

    def _check_dtype(self, k: int, name: str, spec: TensorSpec) -> None:
        try:
            stored = string if name == "string" else np.dtype(name)
        except TypeError:
            raise self._error(len(MAGIC), f"unknown dtype {name!r} of component {k}") from None
        if stored != spec.dtype:
            raise self._mismatch(f"Data type mismatch at component {k}: expected "
                                 f"{dtype_name(spec.dtype)} but got {dtype_name(stored)}")

    def _want(self, k: int):
        spec = self.specs[k] if self.specs is not None else None
        return spec.shape if isinstance(spec, TensorSpec) else None

    def _check_shape(self, k: int, shape: tuple) -> None:
        """Every row of leaf ``k`` has ``shape``: it must fit the leaf's spec."""
        want = self._want(k)
        if want is not None and not shapes_compatible(want, shape):
            raise self._mismatch(f"Incompatible shapes at component {k}: expected "
                                 f"{_shape_text(want)} but got {_shape_text(shape)}")

    def _check_row_shapes(self, k: int, ranks: np.ndarray, dims: np.ndarray) -> None:
        """Rows of leaf ``k`` of shapes ``ranks`` / ``dims`` (concatenated) fit its spec."""
        want = self._want(k)
        if want is None or not len(ranks):
            return
        ends = np.cumsum(ranks)
        wrong = np.flatnonzero(ranks != len(want))
        if not len(wrong) and want:
            known = [j for j, d in enumerate(want) if d is not None]
            table = dims.reshape(len(ranks), len(want))[:, known]
            wrong = np.flatnonzero((table != np.array([want[j] for j in known], np.int64)).any(axis=1))
        if len(wrong):
            j = int(wrong[0])
            self._check_shape(k, tuple(dims[ends[j] - ranks[j]:ends[j]]))

    def _read_record(self) -> tuple[dict, list[memoryview]]:
        start = self.offset
        end = len(self.map)
        if start + _PREFIX > end:
            raise self._error(start, "the file ends before its end record (incomplete write)")
        length = self.map[start:start + _LEN.size]
        (n,) = _LEN.unpack(length)
        length_crc, header_crc = _CRCS.unpack_from(self.map, start + _LEN.size)
        if crc32c_bytes(length) != length_crc:
            raise self._error(start, "the checksum of a record's length does not match")
        pos = start + _PREFIX
        if n > end - pos:
            raise self._error(start, f"header length {n} runs past the end of the file")
        text = memoryview(self.map)[pos:pos + n]
        found = crc32c_bytes(text)
        if found != header_crc:
            raise self._error(pos, f"the checksum of a record header does not match (stored "
                                   f"{header_crc:#010x}, computed {found:#010x})")
        try:
            header = json.loads(bytes(text))
            sizes = [int(b) for b in header.get("buffers", [])]
            crcs = [int(c) for c in header.get("crcs", [])]
            if len(crcs) != len(sizes):
                raise ValueError(f"{len(sizes)} buffers but {len(crcs)} checksums")
        except (ValueError, TypeError, AttributeError) as e:
            raise self._error(start, f"unreadable record header ({e})") from None
        pos += n + _pad(n)
        buffers = []
        for size, crc in zip(sizes, crcs):
            if size < 0 or size > end - pos:
                raise self._error(pos, f"a buffer of {size} bytes runs past the end of the file")
            buffer = memoryview(self.map)[pos:pos + size]
            found = crc32c_bytes(buffer)
            if found != crc:
                raise self._error(pos, f"checksum does not match for a buffer of {size} bytes "
                                       f"(stored {crc:#010x}, computed {found:#010x})")
            buffers.append(buffer)
            pos += size + _pad(size)
        self.offset = pos
        if "codec" in header:
            buffers = self._decompress(start, header, buffers)
        return header, buffers

    def _decompress(self, start: int, header: dict, buffers: list) -> list:
        """The raw buffers of a record with compressed ones (checksums already verified
        over the stored bytes)."""
        tag = header["codec"]
        if tag not in _TAGS:
            raise self._error(start, f"unknown compression codec {tag!r} (a newer nbdata "
                                     "wrote it?)")
        try:
            raw = [int(n) for n in header["raw"]]
            if len(raw) != len(buffers):
                raise ValueError(f"{len(buffers)} buffers but {len(raw)} raw sizes")
        except (KeyError, ValueError, TypeError) as e:
            raise self._error(start, f"unreadable record header ({e})") from None
        if self._codec is None or self._codec.tag != tag:
            self._codec = codec(_TAGS[tag], "load", self.path)
        out = []
        for b, n in zip(buffers, raw):
            try:
                data = self._codec.decompress(b, n)
            except self._codec.errors as e:
                raise self._error(start, f"a {tag} buffer does not decompress ({e})") from None
            if len(data) != n:
                raise self._error(start, f"a {tag} buffer decompresses to {len(data)} bytes, "
                                         f"the record says {n}")
            out.append(data)
        return out

    def chunks(self):
        """Yields each chunk of rows as (columns, rows)."""
        total = 0
        while True:
            start = self.offset
            header, buffers = self._read_record()
            if header.get("end"):
                if header.get("rows") != total:
                    raise self._error(start, f"the end record counts {header.get('rows')!r} "
                                             f"rows, the file holds {total}")
                if self.offset != len(self.map):
                    raise self._error(self.offset, f"{len(self.map) - self.offset} bytes after "
                                                   "the end record")
                return
            try:
                rows = int(header["rows"])
                columns = self._decode(header, buffers)
            except (KeyError, ValueError, TypeError, IndexError) as e:
                if isinstance(e, InvalidArgumentError):
                    raise
                raise self._error(start, f"inconsistent chunk record ({e})") from None
            total += rows
            yield columns, rows

    def _decode(self, header: dict, buffers: list) -> list:
        rows = int(header["rows"])
        columns = []
        it = iter(buffers)
        if self.names and len(header["leaves"]) != len(self.names):
            raise ValueError(f"{len(header['leaves'])} leaves where the file has {len(self.names)}")
        for k, entry in enumerate(header["leaves"]):
            bufs = [next(it) for _ in range(int(entry["nbuffers"]))]
            kind = entry["kind"]
            if kind in ("dense", "ragged"):
                if self.names and self.names[k] != np.dtype(entry["dtype"]).str:
                    raise ValueError(f"component {k} holds {entry['dtype']}, the file's first "
                                     f"record says {self.names[k]}")
            elif self.names and self.names[k] != "string":
                raise ValueError(f"component {k} holds strings, the file's first record says "
                                 f"{self.names[k]}")
            if kind == "dense":
                shape = tuple(int(d) for d in entry["shape"])
                column = np.frombuffer(bufs[0], dtype=np.dtype(entry["dtype"])).reshape(shape)
                if len(column) != rows:
                    raise ValueError(f"{len(column)} rows where the record says {rows}")
                if rows:
                    self._check_shape(k, shape[1:])
                columns.append(column)
                continue
            ranks = np.frombuffer(bufs[0], np.int64)
            dims = np.frombuffer(bufs[1], np.int64)
            if len(ranks) != rows or int(ranks.sum()) != len(dims) or (ranks < 0).any() or (dims < 0).any():
                raise ValueError("row shapes do not match the record")
            self._check_row_shapes(k, ranks, dims)
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


def _shape_text(shape) -> str:
    """A shape as tf.data's errors write it: ``[?,3]``."""
    return "[" + ",".join("?" if d is None else str(int(d)) for d in shape) + "]"
