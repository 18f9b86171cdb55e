"""Mutation fuzzing of the readers and decoders: ``python -m nbdata fuzz --cases N``.

Each case takes a valid input (a TFRecord file, a serialized Example, a batch of CSV
lines, a JPEG), flips, inserts, deletes or truncates random bytes and runs it
through the reader or decoder. Anything but a result or an ``nd.errors`` exception
is a finding: another exception type is reported with the input that caused it, and
a crash or hang would stop the command itself (run it under ``timeout``). The tests
run a bounded number of cases (``NBDATA_FUZZ_CASES``); the command runs the full
count.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
import traceback
from typing import Callable

import numpy as np

from nbdata.errors import OpError


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to four random edits of ``data``: byte flips, overwrites, inserts, deletes,
    truncation, duplicated spans, extreme varint bytes."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(7)
        at = rng.randrange(len(buf) + 1)
        if op == 0 and buf:
            buf[min(at, len(buf) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1 and buf:
            buf[min(at, len(buf) - 1)] = rng.choice([0, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        elif op == 2:
            buf[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op == 3 and buf:
            del buf[at:at + rng.randint(1, 8)]
        elif op == 4:
            del buf[at:]
        elif op == 5 and buf:
            span = buf[at:at + rng.randint(1, 16)]
            buf[at:at] = span
        else:
            buf[at:at] = b"\xff" * rng.randint(1, 11)
    return bytes(buf)


class Target:
    """A named valid input and the function that consumes (a mutation of) it."""

    def __init__(self, name: str, seed: bytes, run: Callable[[bytes], object]):
        self.name, self.seed, self.run = name, seed, run


def _targets(workdir: str) -> list[Target]:
    from nbdata.io.datasets import TextLineDataset, TFRecordDataset
    from nbdata.io.writer import TFRecordWriter
    from nbdata.primitives import example as ex
    from nbdata.primitives.jpeg import available as jpeg_available
    from nbdata.spec import string

    features = {"x": ex.FixedLenFeature([4], np.float32), "label": ex.FixedLenFeature([], np.int64),
                "id": ex.FixedLenFeature([], string), "tags": ex.VarLenFeature(np.int64),
                "words": ex.VarLenFeature(string)}
    records = [ex.encode_example({"x": np.arange(4, dtype=np.float32) + i, "label": i,
                                  "id": f"r{i}".encode(), "tags": np.arange(i % 3, dtype=np.int64),
                                  "words": {"kind": "bytes_list", "value": [b"a", b"bc"][: i % 3]}})
               for i in range(6)]
    path = os.path.join(workdir, "fuzz.tfrecord")
    with TFRecordWriter(path) as w:
        for r in records:
            w.write(r)
    tfrecord = open(path, "rb").read()
    gz_path = os.path.join(workdir, "fuzz.tfrecord.gz")
    with TFRecordWriter(gz_path, "GZIP") as w:
        for r in records:
            w.write(r)
    gzipped = open(gz_path, "rb").read()

    def read_file(compression):
        def run(data: bytes):
            target = os.path.join(workdir, "case.bin")
            with open(target, "wb") as f:
                f.write(data)
            ds = TFRecordDataset(target, compression_type=compression, buffer_size=4096)
            return [ex.parse_single_example(r, features) for r in ds]
        return run

    def parse_batch(data: bytes):
        return ex.parse_example([records[0], data, records[1]], features)

    targets = [Target("tfrecord file", tfrecord, read_file("")),
               Target("gzip tfrecord file", gzipped, read_file("GZIP")),
               Target("tf.train.Example", records[2], parse_batch)]

    lines_path = os.path.join(workdir, "fuzz.csv")

    def csv(data: bytes):
        from nbdata.primitives.csv import decode_csv
        with open(lines_path, "wb") as f:
            f.write(data)
        ds = TextLineDataset(lines_path).batch(3).map(
            lambda b: decode_csv(b, [[0.0], [0], [""], [""]]))
        return list(ds)
    targets.append(Target("csv lines", b'1.5,2,"a,b",x\n-3e2,7,"",y\n4,5,c,d\n', csv))

    jpeg = _jpeg_seed()
    if jpeg is not None and jpeg_available():
        from nbdata.image import decode_jpeg
        targets.append(Target("jpeg", jpeg, lambda data: decode_jpeg(data)))
    return targets


def _jpeg_seed() -> bytes | None:
    """A small JPEG, when an encoder of the [image] extra is installed."""
    image = (np.arange(24 * 32 * 3) % 251).astype(np.uint8).reshape(24, 32, 3)
    try:
        import simplejpeg
        return simplejpeg.encode_jpeg(image, quality=90)
    except ImportError:
        pass
    try:
        import io

        from PIL import Image
        out = io.BytesIO()
        Image.fromarray(image).save(out, format="JPEG", quality=90)
        return out.getvalue()
    except ImportError:
        return None


def fuzz(cases: int, seed: int = 0, out=print) -> list[str]:
    """Runs ``cases`` mutations spread over every target; returns the findings."""
    rng = random.Random(seed)
    findings: list[str] = []
    with tempfile.TemporaryDirectory() as workdir:
        targets = _targets(workdir)
        started = time.perf_counter()
        from nbdata.progress import Progress
        progress = Progress("fuzz", cases, "cases")
        for k in range(cases):
            progress.update()
            target = targets[k % len(targets)]
            data = mutate(target.seed, rng)
            try:
                target.run(data)
            except OpError:
                pass
            except Exception as e:  # noqa: BLE001 - a finding
                findings.append(f"{target.name}: {type(e).__name__}: {e} for input {data!r:.300}\n"
                                + "".join(traceback.format_exception(e)[-3:]))
                if len(findings) >= 20:
                    break
        progress.close()
        spent = time.perf_counter() - started
    out(f"fuzz: {cases:,} cases over {len(targets)} targets in {spent:.1f} s: "
        f"{len(findings)} findings")
    for f in findings:
        out(f)
    return findings
