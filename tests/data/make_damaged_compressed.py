"""Damaged GZIP/ZLIB record files and what TensorFlow reads from them, for
tests/io/test_damaged_compressed.py.

The two base files were written once by ``python tests/data/make_damaged_compressed.py
--base`` (the standard library's gzip, level 9, mtime 0) and are kept as they are:
``damaged_records.tfrecord.gz`` (3000 TFRecord records, ~600 KB decompressed, so that a
damaged stream spans several of TensorFlow's 256 KB zlib buffers) and
``damaged_lines.txt.gz`` (12000 text lines, ~340 KB). Their ZLIB twins are the same
deflate data in a ZLIB wrapper (``zlib_twin``), made at test time. Each case damages a
file (``apply``: cut it, flip or overwrite bytes, append bytes or a second member) and
reads it with one dataset; the result is what TensorFlow gave:

    python tests/data/make_damaged_compressed.py > tests/data/damaged_compressed.json

(with TensorFlow installed; nbdata is not needed). The tests compare with the live
TensorFlow instead when it is importable (``outcome`` is what they call).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import struct
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDS = "damaged_records.tfrecord.gz"
LINES = "damaged_lines.txt.gz"
FIXED_BYTES = 16
# Bytes that overwrite part of a stream ("garbage"): a fixed, irregular pattern.
GARBAGE = bytes((i * 151 + 7) % 256 for i in range(300))


def _frame(payload: bytes) -> bytes:
    def masked(data: bytes) -> int:
        crc = 0xFFFFFFFF
        for b in data:   # CRC32C, bit by bit (only run when the base file is made)
            crc ^= b
            for _ in range(8):
                crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        crc ^= 0xFFFFFFFF
        return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    header = struct.pack("<Q", len(payload))
    return (header + struct.pack("<I", masked(header)) + payload
            + struct.pack("<I", masked(payload)))


def make_base() -> None:
    records = [b"%d:" % i + b"x" * (150 + i % 100) + b"|" + b"ab" * (i % 7)
               for i in range(3000)]
    with open(os.path.join(HERE, RECORDS), "wb") as f:
        f.write(gzip.compress(b"".join(_frame(r) for r in records), 9, mtime=0))
    lines = b"".join(b"line %d %s\n" % (i, b"x" * (i % 37)) for i in range(12000))
    with open(os.path.join(HERE, LINES), "wb") as f:
        f.write(gzip.compress(lines, 9, mtime=0))


def zlib_twin(gz: bytes) -> bytes:
    """The deflate data of a one-member GZIP file (10-byte header, no options) in a
    ZLIB wrapper."""
    raw = zlib.decompress(gz, 16 + zlib.MAX_WBITS)
    return b"\x78\xda" + gz[10:-8] + struct.pack(">I", zlib.adler32(raw))


def base_bytes(name: str, container: str) -> bytes:
    with open(os.path.join(HERE, name), "rb") as f:
        data = f.read()
    return data if container == "GZIP" else zlib_twin(data)


def apply(data: bytes, ops: list) -> bytes:
    """``data`` damaged by ``ops``: ["cut", n] keeps the first n bytes (n < 0: drops
    -n); ["xor", at, n, v] xors n bytes; ["put", at, hex] overwrites; ["append", hex];
    ["append_prefix", n] appends the first n bytes of the undamaged data (n = 0: all);
    ["bytes", hex] is the whole file."""
    out = bytearray(data)
    for op in ops:
        kind = op[0]
        if kind == "cut":
            del out[op[1]:]
        elif kind == "xor":
            for i in range(op[1], op[1] + op[2]):
                out[i] ^= op[3]
        elif kind == "put":
            patch = bytes.fromhex(op[2])
            out[op[1]:op[1] + len(patch)] = patch
        elif kind == "append":
            out += bytes.fromhex(op[1])
        elif kind == "append_prefix":
            out += data[:op[1] or len(data)]
        elif kind == "bytes":
            out = bytearray(bytes.fromhex(op[1]))
        else:
            raise ValueError(op)
    return bytes(out)


def damages(size: int, container: str) -> dict:
    """Named damages of a compressed file of ``size`` bytes."""
    trailer = 8 if container == "GZIP" else 4
    out = {"trailer_removed": [["cut", -trailer]],
           "half_trailer": [["cut", -(trailer // 2)]],
           "checksum_wrong": [["xor", size - trailer, 2, 0x55]]}
    for f in (0.1, 0.37, 0.5, 0.9, 0.97):
        out[f"cut_{f}"] = [["cut", int(size * f)]]
    out["flipped_0.5"] = [["xor", int(size * 0.5), 64, 0xFF]]
    out["garbage_0.9"] = [["put", int(size * 0.9), GARBAGE.hex()]]
    out["trailing_00"] = [["append", "00"]]
    out["trailing_0000"] = [["append", "0000"]]
    out["trailing_text"] = [["append", b"garbage!".hex()]]
    if container == "GZIP":
        out["trailing_magic"] = [["append", "1f8b08"]]
        out["two_members"] = [["append_prefix", 0]]
        out["member_then_cut_member"] = [["append_prefix", size // 3]]
    else:
        out["two_streams"] = [["append_prefix", 0]]
    return out


def short_files() -> dict:
    """Tiny files: what TensorFlow reads silently and what it rejects."""
    payload = _frame(b"ab")
    gz = gzip.compress(payload, 9, mtime=0)
    zl = zlib_twin(gz)
    files = {"GZIP": {"empty": b"", "one_byte_1f": b"\x1f", "magic_only": b"\x1f\x8b",
                      "header_3": gz[:3], "header_10": gz[:10], "one_byte_00": b"\x00",
                      "two_zero_bytes": b"\x00\x00", "hello": b"hello", "twenty_zeros": bytes(20),
                      "cut_15": gz[:15], "cut_20": gz[:20], "whole": gz},
             "ZLIB": {"empty": b"", "one_byte_78": b"\x78", "header_2": zl[:2],
                      "one_byte_00": b"\x00", "two_zero_bytes": b"\x00\x00", "hello": b"hello",
                      "twenty_zeros": bytes(20), "cut_10": zl[:10], "whole": zl}}
    return {c: {k: v.hex() for k, v in d.items()} for c, d in files.items()}


def cases() -> list:
    """Every case: ``id``, ``file`` (a base file, or None for ``ops`` = ["bytes", ...]),
    ``container``, ``ops``, ``dataset`` ("tfrecord", "text" or "fixed") and
    ``buffer_size``."""
    out = []
    for name, readers in ((RECORDS, [("tfrecord", None)]),
                          (LINES, [("text", None), ("text", 4096), ("fixed", None),
                                   ("fixed", 4096)])):
        for container in ("GZIP", "ZLIB"):
            size = len(base_bytes(name, container))
            for damage, ops in damages(size, container).items():
                for dataset, buffer_size in readers:
                    out.append({"id": f"{name.split('.')[0]}-{container}-{damage}-{dataset}"
                                      f"-{buffer_size or 'default'}",
                                "file": name, "container": container, "ops": ops,
                                "dataset": dataset, "buffer_size": buffer_size})
    for container, files in short_files().items():
        for short, data in files.items():
            for dataset in ("tfrecord", "text", "fixed"):
                out.append({"id": f"short-{container}-{short}-{dataset}", "file": None,
                            "container": container, "ops": [["bytes", data]],
                            "dataset": dataset, "buffer_size": None})
    return out


def case_bytes(case: dict) -> bytes:
    base = b"" if case["file"] is None else base_bytes(case["file"], case["container"])
    return apply(base, case["ops"])


def key_of(message: str) -> str:
    """The part of an error message both libraries word alike."""
    for pattern in (r"truncated record at \d+", r"corrupted record at \d+",
                    r"inflate\(\) failed with error -?\d+: [a-z ]+[a-z]",
                    r"has body length \d+ bytes"):
        m = re.search(pattern, message)
        if m:
            return m.group(0)
    return ""


def outcome(tf, case: dict, folder: str) -> dict:
    """What TensorFlow reads from the case's file: the count, the last element (as a
    latin-1 string), the error class and the key of its message; ``ignore_errors``:
    the count with the damaged file followed by an undamaged copy, under
    ``ignore_errors()`` (only where that cannot loop forever in TensorFlow: TFRecord)."""
    path = os.path.join(folder, "damaged")
    with open(path, "wb") as f:
        f.write(case_bytes(case))
    comp, bs = case["container"], case["buffer_size"]

    def dataset(paths):
        if case["dataset"] == "tfrecord":
            return tf.data.TFRecordDataset(paths, comp)
        if case["dataset"] == "text":
            return tf.data.TextLineDataset(paths, comp, buffer_size=bs)
        return tf.data.FixedLengthRecordDataset(paths, FIXED_BYTES, compression_type=comp,
                                                buffer_size=bs)
    got, error, key = 0, None, ""
    last = None
    try:
        for x in dataset(path):
            got += 1
            last = x.numpy()
    except Exception as e:  # noqa: BLE001 - the class is what is recorded
        error, key = type(e).__name__, key_of(str(e))
    result = {"count": got, "last": None if last is None else last.decode("latin-1"),
              "error": error, "message_key": key}
    if case["dataset"] == "tfrecord" and case["file"] is not None:
        good = os.path.join(folder, "good")
        with open(good, "wb") as f:
            f.write(base_bytes(case["file"], comp))
        result["ignore_errors_count"] = sum(1 for _ in dataset([path, good]).ignore_errors())
    return result


def inflate_fails(data: bytes, container: str) -> bool:
    """Whether inflating ``data`` fails (TensorFlow's rules: a cut stream does not; GZIP
    members follow one another; what follows a ZLIB stream is not read)."""
    wbits = 16 + zlib.MAX_WBITS if container == "GZIP" else zlib.MAX_WBITS
    rest = data
    try:
        while rest:
            d = zlib.decompressobj(wbits)
            d.decompress(rest)
            if not d.eof or container == "ZLIB":
                return False
            rest = d.unused_data
    except zlib.error:
        return True
    return False


def main() -> None:
    if "--base" in sys.argv:
        make_base()
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    out = {"about": f"recorded with TensorFlow {tf.__version__} by "
                    "tests/data/make_damaged_compressed.py", "cases": []}
    with tempfile.TemporaryDirectory() as folder:
        for case in cases():
            result = outcome(tf, case, folder)
            result["inflate_fails"] = inflate_fails(case_bytes(case), case["container"])
            out["cases"].append({"id": case["id"], **result})
    json.dump(out, sys.stdout, indent=0)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
