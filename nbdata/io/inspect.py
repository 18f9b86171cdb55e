"""``python -m nbdata inspect FILE``: what a record file holds, without a schema.

Counts the records of a TFRecord or text file and prints the first tf.train.Example
records' features (their kinds, lengths and first values) and a feature spec to
parse them with. The format and compression are guessed from the file (gzip's magic
bytes, a valid TFRecord length checksum) unless given.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from nbdata.errors import OpError
from nbdata.kernels.crc32c import masked_crc32c

_KINDS = {1: "bytes_list", 2: "float_list", 3: "int64_list"}


def guess_compression(path: str) -> str:
    with open(path, "rb") as f:
        head = f.read(2)
    if head == b"\x1f\x8b":
        return "GZIP"
    if len(head) == 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0:
        return "ZLIB"
    return ""


def _head_bytes(path: str, compression: str, n: int = 12) -> bytes:
    with open(path, "rb") as f:
        raw = f.read(1 << 16)
    if not compression:
        return raw[:n]
    try:
        wbits = 16 + zlib.MAX_WBITS if compression == "GZIP" else zlib.MAX_WBITS
        return zlib.decompressobj(wbits).decompress(raw, n)
    except zlib.error:
        return b""


def guess_format(path: str, compression: str) -> str:
    """"tfrecord" when the file starts with a TFRecord header whose checksum holds."""
    head = _head_bytes(path, compression)
    if len(head) == 12:
        arr = np.frombuffer(head, np.uint8)
        if int(masked_crc32c(arr, 0, 8)) == int.from_bytes(head[8:12], "little"):
            return "tfrecord"
    return "text"


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("bad varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _fields(buf: bytes):
    """(field number, wire type, value) of a protobuf message; value is an int or bytes."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        else:
            raise ValueError(f"unsupported wire type {wire}")
        if pos > len(buf):
            raise ValueError("field past the end")
        yield field, wire, value


def example_features(record: bytes) -> dict:
    """``{key: (kind, values)}`` of a serialized tf.train.Example (last entry wins);
    raises ValueError when the record is not one."""
    out: dict[str, tuple[str, list]] = {}
    for f, w, features in _fields(record):
        if f != 1 or w != 2:
            continue
        for f2, w2, entry in _fields(features):
            if f2 != 1 or w2 != 2:
                continue
            key, feature = b"", b""
            for f3, w3, v in _fields(entry):
                if f3 == 1 and w3 == 2:
                    key = v
                elif f3 == 2 and w3 == 2:
                    feature = v
            kind, values = "empty", []
            for f4, w4, lst in _fields(feature):
                if f4 not in _KINDS or w4 != 2:
                    continue
                kind = _KINDS[f4]
                values = []
                for f5, w5, v in _fields(lst):
                    if f5 != 1:
                        continue
                    if f4 == 1:
                        values.append(bytes(v))
                    elif f4 == 2:
                        values.extend(np.frombuffer(bytes(v), "<f4").tolist())
                    elif w5 == 2:
                        p = 0
                        while p < len(v):
                            x, p = _varint(v, p)
                            values.append(x - (1 << 64) if x >= 1 << 63 else x)
                    else:
                        values.append(v - (1 << 64) if v >= 1 << 63 else v)
            out[key.decode("utf-8", "replace")] = (kind, values)
    if not out and record:
        raise ValueError("no features")
    return out


def _shown(values: list, limit: int = 6) -> str:
    shown = ", ".join(repr(v) if isinstance(v, bytes) else f"{v:g}" if isinstance(v, float)
                      else str(v) for v in values[:limit])
    return f"[{shown}{', ...' if len(values) > limit else ''}]"


def inspect_file(path: str, compression: str | None = None, fmt: str | None = None,
                 show: int = 3, out=print) -> int:
    """Prints the summary of ``path``; returns the number of records."""
    from nbdata.io.datasets import TextLineDataset, TFRecordDataset
    compression = guess_compression(path) if compression is None else compression
    fmt = fmt or guess_format(path, compression)
    ds = (TFRecordDataset(path, compression_type=compression) if fmt == "tfrecord"
          else TextLineDataset(path, compression_type=compression))
    count, first = 0, []
    try:
        for record in ds:
            if len(first) < show:
                first.append(record)
            count += 1
    except OpError as e:
        out(f"{path}: {type(e).__name__} after {count} records: {e}")
    out(f"{path}: {fmt} file{', ' + compression if compression else ''}, {count:,} records")
    if fmt != "tfrecord":
        for i, line in enumerate(first):
            out(f"  line {i}: {line[:200]!r}")
        return count
    spec: dict[str, Any] = {}
    parsed = 0
    for i, record in enumerate(first):
        try:
            features = example_features(record)
        except ValueError:
            out(f"  record {i}: {len(record)} bytes, not a tf.train.Example: {record[:80]!r}")
            continue
        parsed += 1
        out(f"  record {i}: tf.train.Example with {len(features)} features")
        for key in sorted(features):
            kind, values = features[key]
            out(f"    {key!r}: {kind} of {len(values)} {_shown(values)}")
            dtype = {"bytes_list": "nd.string", "float_list": "np.float32",
                     "int64_list": "np.int64"}.get(kind)
            if dtype is None:
                continue
            entry = spec.setdefault(key, [dtype, set(), 0])
            entry[1].add(len(values))
            entry[2] += 1
    if spec:
        out("  features to parse them with:")
        for key in sorted(spec):
            dtype, lengths, present = spec[key]
            if len(lengths) == 1 and present == parsed:
                n = lengths.pop()
                shape = "[]" if n == 1 else f"[{n}]"
                out(f"    {key!r}: nd.io.FixedLenFeature({shape}, {dtype}),")
            else:
                out(f"    {key!r}: nd.io.VarLenFeature({dtype}),")
    return count
