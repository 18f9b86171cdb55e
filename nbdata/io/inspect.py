"""``python -m nbdata inspect FILE``: what a record file holds, without a schema.

Counts the records of a TFRecord or text file and prints the first tf.train.Example
records' features (their kinds, lengths and first values) and a feature spec to
parse them with. Unless given, the compression and format are found by validating
the file: GZIP (magic bytes) or ZLIB (header check) when its first bytes inflate, a
TFRecord file when the masked CRC32C of the first record's length holds, else a text
file when its first bytes hold no control bytes; anything else is an error. An error
(also one met while counting) is raised as an ``nbdata.errors`` exception naming the
file and the offset; the command prints it as one line on stderr and exits with 1.
"""

from __future__ import annotations

import os
import zlib
from typing import Any

import numpy as np

from nbdata.errors import DataLossError, FailedPreconditionError, NotFoundError, OpError
from nbdata.kernels.crc32c import masked_crc32c

_KINDS = {1: "bytes_list", 2: "float_list", 3: "int64_list"}
# Bytes of the (decompressed) file the format is told from.
_HEAD = 1 << 16
# Control bytes that plain text holds: tab, newline, vertical tab, form feed, return, escape.
_TEXT_CONTROLS = frozenset(b"\t\n\v\f\r\x1b")


def _read_head(path: str, n: int = _HEAD) -> bytes:
    """The first ``n`` bytes of ``path``; a missing file or a directory raises
    NotFoundError / FailedPreconditionError as the file datasets do."""
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except FileNotFoundError:
        raise NotFoundError(f"{path}; No such file or directory", "inspect") from None
    except IsADirectoryError:
        raise FailedPreconditionError(f"{path}; Is a directory", "inspect") from None
    except OSError as e:
        raise NotFoundError(f"{path}: cannot open: {e.strerror}", "inspect") from None


def _inflate_head(raw: bytes, compression: str, n: int = _HEAD) -> bytes:
    """The first bytes ``raw`` inflates to; raises zlib.error when it does not."""
    wbits = 16 + zlib.MAX_WBITS if compression == "GZIP" else zlib.MAX_WBITS
    return zlib.decompressobj(wbits).decompress(raw, n)


def guess_compression(path: str) -> str:
    """"GZIP" or "ZLIB" when ``path`` starts as such a stream and its first byte
    inflates (damage further on is for the reading to report), else "". A file with
    GZIP's magic bytes that does not start inflating raises DataLossError."""
    raw = _read_head(path)
    if raw[:2] == b"\x1f\x8b":
        try:
            _inflate_head(raw, "GZIP", 1)
        except zlib.error as e:
            raise DataLossError(f"{path}: starts with GZIP's magic bytes but is no GZIP stream: "
                                f"inflating from offset 0 fails ({_why(e)})", "inspect") from None
        return "GZIP"
    if len(raw) >= 2 and raw[0] & 0x0F == 8 and (raw[0] << 8 | raw[1]) % 31 == 0:
        try:
            _inflate_head(raw, "ZLIB", 1)
            return "ZLIB"
        except zlib.error:
            pass   # a two-byte coincidence: not compressed
    return ""


def _why(e: Exception) -> str:
    return str(e).split(": ", 1)[-1]


def _head_bytes(path: str, compression: str, n: int = _HEAD) -> bytes:
    """Up to ``n`` first bytes of the (decompressed) file: for a damaged stream, what
    inflates before the damage."""
    raw = _read_head(path)
    if not compression:
        return raw[:n]
    wbits = 16 + zlib.MAX_WBITS if compression == "GZIP" else zlib.MAX_WBITS
    d = zlib.decompressobj(wbits)
    out = b""
    try:
        for i in range(0, len(raw), 32):   # small pieces: a failing one loses little
            out += d.decompress(raw[i:i + 32], n - len(out))
            if len(out) >= n or d.eof:
                break
    except zlib.error:
        pass
    return out


def _control_byte(head: bytes) -> int:
    """The offset of the first byte plain text does not hold, or -1."""
    arr = np.frombuffer(head, np.uint8)
    bad = (arr < 0x20) | (arr == 0x7F)
    for c in _TEXT_CONTROLS:
        bad &= arr != c
    hits = np.flatnonzero(bad)
    return int(hits[0]) if len(hits) else -1


def guess_format(path: str, compression: str) -> str:
    """"tfrecord" when the file starts with a TFRecord header whose length checksum
    holds, "text" when its first bytes are text; else DataLossError (a TFRecord file
    whose first length checksum is wrong is one such file)."""
    head = _head_bytes(path, compression)
    if len(head) >= 12:
        arr = np.frombuffer(head, np.uint8)
        if int(masked_crc32c(arr, 0, 8)) == int.from_bytes(head[8:12], "little"):
            return "tfrecord"
    bad = _control_byte(head)
    if bad < 0:
        return "text"
    where = "in the decompressed stream" if compression else "of the file"
    if len(head) >= 12:
        raise DataLossError(
            f"{path}: corrupted record at 0: not a TFRecord file (the masked CRC32C at offset 8 "
            f"does not match the first record's length) and not a text file (control byte "
            f"0x{head[bad]:02x} at offset {bad} {where}); give --format to read it anyway",
            "inspect")
    raise DataLossError(f"{path}: not a text file (control byte 0x{head[bad]:02x} at offset "
                        f"{bad} {where}) and too short for a TFRecord; give --format to read "
                        "it anyway", "inspect")


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
    """Prints the summary of ``path``; returns the number of records. An error that
    stops the reading (an ``nbdata.errors`` exception naming the file and the offset)
    is raised after the summary of the records before it."""
    from nbdata.io.datasets import TextLineDataset, TFRecordDataset
    compression = guess_compression(path) if compression is None else compression
    fmt = fmt or guess_format(path, compression)
    ds = (TFRecordDataset(path, compression_type=compression) if fmt == "tfrecord"
          else TextLineDataset(path, compression_type=compression))
    count, first = 0, []
    error = None
    from nbdata.progress import Progress
    with Progress(f"{os.path.basename(path)}", unit="records") as progress:
        try:
            for record in ds:
                if len(first) < show:
                    first.append(record)
                count += 1
                if not count & 1023:
                    progress.update(1024)
        except OpError as e:
            error = e
        progress.update(count & 1023)
    out(f"{path}: {fmt} file{', ' + compression if compression else ''}, {count:,} records"
        + (f" before a {type(error).__name__}" if error is not None else ""))
    if fmt != "tfrecord":
        for i, line in enumerate(first):
            out(f"  line {i}: {line[:200]!r}")
        if error is not None:
            raise error
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
    if error is not None:
        raise error
    return count


def error_line(path: str, error: Exception) -> str:
    """One line for an error met on ``path``: the file, the error class, the message
    (which names the offset where there is one)."""
    message = getattr(error, "message", None) or getattr(error, "strerror", None) or str(error)
    message = " ".join(str(message).split())
    if message.startswith(f"{path}: ") or message.startswith(f"{path}; "):
        message = message[len(path) + 2:]
    return f"{path}: {type(error).__name__}: {message}"
