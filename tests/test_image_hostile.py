"""Hostile images end as TensorFlow ends them (issue 31 §3): what TF decodes is decoded,
what TF refuses is refused with TF's error class, never a raw library exception.

The expected JPEG pixels are those of ``tf.io.decode_jpeg`` (TensorFlow 2, libjpeg-turbo)
on the same bytes, recorded as SHA-256 digests; with tensorflow installed they are also
compared against it directly.
"""

from __future__ import annotations

import base64
import hashlib
import struct
import zlib

import numpy as np
import pytest

import nbdata as nd
from nbdata.primitives.jpeg import without_extraneous

pytest.importorskip("PIL")
pytest.importorskip("simplejpeg")

# A 32x24 RGB JPEG (Pillow, quality 90) of a smooth pattern.
JPEG_32x24 = base64.b64decode(
    "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAMCAgMCAgMDAwMEAwMEBQgFBQQEBQoHBwYIDAoMDAsKCwsNDhIQDQ4R"
    "DgsLEBYQERMUFRUVDA8XGBYUGBIUFRT/2wBDAQMEBAUEBQkFBQkUDQsNFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQU"
    "FBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBT/wAARCAAYACADASIAAhEBAxEB/8QAHwAAAQUBAQEBAQEAAAAAAAAA"
    "AAECAwQFBgcICQoL/8QAtRAAAgEDAwIEAwUFBAQAAAF9AQIDAAQRBRIhMUEGE1FhByJxFDKBkaEII0KxwRVS0fAk"
    "M2JyggkKFhcYGRolJicoKSo0NTY3ODk6Q0RFRkdISUpTVFVWV1hZWmNkZWZnaGlqc3R1dnd4eXqDhIWGh4iJipKT"
    "lJWWl5iZmqKjpKWmp6ipqrKztLW2t7i5usLDxMXGx8jJytLT1NXW19jZ2uHi4+Tl5ufo6erx8vP09fb3+Pn6/8QA"
    "HwEAAwEBAQEBAQEBAQAAAAAAAAECAwQFBgcICQoL/8QAtREAAgECBAQDBAcFBAQAAQJ3AAECAxEEBSExBhJBUQdh"
    "cRMiMoEIFEKRobHBCSMzUvAVYnLRChYkNOEl8RcYGRomJygpKjU2Nzg5OkNERUZHSElKU1RVVldYWVpjZGVmZ2hp"
    "anN0dXZ3eHl6goOEhYaHiImKkpOUlZaXmJmaoqOkpaanqKmqsrO0tba3uLm6wsPExcbHyMnK0tPU1dbX2Nna4uPk"
    "5ebn6Onq8vP09fb3+Pn6/9oADAMBAAIRAxEAPwD8+tF8Db9v7v8ASu80b4e7tv7r9K9K8O+Bt+393+len+Hfh9u2"
    "/uv0rzcpp/2rbrc8/IOLOS3vHkWjfDXdt/dfpXd6N8Ld239z+leu2fhaDTWWPyDNPgHYvAH1Pauo0jwdf3pXkxLk"
    "ELENuPx6/rXdj45FgKrwsoutWWjjBJ8r/vSdkvNK7T3SP6f4a4rqyUZc1l5nJ+FfA2/Z+7/SvTrbwo2m2kXlxjz5"
    "ThcjoO5/l+dFFfn+V5jicBwzXxmHly1EopPquacYtrs7N2fR6n+X2QY+vKtCLeh1Hhf4cKFDNGFUDJJ4AFdrpfhe"
    "W5fyrOPy4enmbfmb/AfrxRRXh42rUwFPBYLCScI1VJycdJO1lZPotdba+drp/wBTcNZhiJvmk72sf//Z")

# tf.io.decode_jpeg of JPEG_32x24 with bytes 200..250 zeroed (inside its Huffman tables:
# libjpeg warns "Corrupt JPEG data: 183 extraneous bytes before marker 0xc4" and decodes).
TF_DAMAGED_DIGEST = {
    "": "3eb1f620ba3a090d353932786e4f76d6d24271f2e37e8b404a7f3a5b76cb2207",
    "INTEGER_FAST": "3eb1f620ba3a090d353932786e4f76d6d24271f2e37e8b404a7f3a5b76cb2207",
    "INTEGER_ACCURATE": "aae09832ce44b23ed52b714d577b798134d7770149afb2b69b1a05f0787de130",
}


def _digest(image: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(image).tobytes()).hexdigest()


def _damaged() -> bytes:
    data = bytearray(JPEG_32x24)
    data[200:251] = bytes(51)
    return bytes(data)


def _tf():
    try:
        import tensorflow as tf
    except Exception:  # noqa: BLE001 - not installed (or not importable here)
        return None
    return tf


@pytest.mark.parametrize("dct", ["", "INTEGER_FAST", "INTEGER_ACCURATE"])
def test_a_jpeg_libjpeg_only_warns_about_decodes_as_tensorflow(dct):
    data = _damaged()
    image = nd.image.decode_jpeg(data, dct_method=dct)
    assert image.shape == (24, 32, 3) and image.dtype == np.uint8
    assert _digest(image) == TF_DAMAGED_DIGEST[dct]
    if dct == "":
        assert _digest(nd.image.decode_image(data)) == TF_DAMAGED_DIGEST[""]
    tf = _tf()
    if tf is not None:
        np.testing.assert_array_equal(image, tf.io.decode_jpeg(data, dct_method=dct).numpy())


def test_bytes_between_marker_segments_are_skipped_as_libjpeg_skips_them():
    clean = nd.image.decode_jpeg(JPEG_32x24)
    assert without_extraneous(JPEG_32x24) == JPEG_32x24
    sof = JPEG_32x24.index(b"\xff\xc0")
    sos = JPEG_32x24.index(b"\xff\xda")
    for at in (sof, sos):   # junk (with a stuffed FF 00) where a marker is expected
        data = JPEG_32x24[:at] + b"junk\xff\x00more" + JPEG_32x24[at:]
        assert without_extraneous(data) == JPEG_32x24
        np.testing.assert_array_equal(nd.image.decode_jpeg(data), clean)
        np.testing.assert_array_equal(nd.image.decode_image(data), clean)


def test_a_truncated_jpeg_is_still_refused():
    with pytest.raises(nd.errors.InvalidArgumentError):
        nd.image.decode_jpeg(JPEG_32x24[:400])


def _chunk(kind: bytes, body: bytes) -> bytes:
    return (struct.pack(">I", len(body)) + kind + body
            + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))


def _png(width: int, height: int, rows=None) -> bytes:
    """An 8-bit grayscale PNG; ``rows(y)`` gives row y's bytes (zeros when None), the
    rest of the pixel data compressed line by line (no whole image in memory)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    if rows is None:
        idat = zlib.compress(b"")
    else:
        z = zlib.compressobj(6)
        zero = b"\0" * (width + 1)
        idat = b"".join(z.compress(b"\0" + rows(y) if rows(y) is not None else zero)
                        for y in range(height)) + z.flush()
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", idat)
            + _chunk(b"IEND", b""))


def test_a_png_over_pillows_bomb_limit_decodes_as_in_tensorflow():
    """14000x14000 (196 M pixels, over Pillow's 179 M "decompression bomb" limit):
    TensorFlow decodes it. Grayscale, so the decoded image is 196 MB."""
    side = 14000
    marks = {0: (np.arange(side) % 251).astype(np.uint8).tobytes(),
             7000: bytes([7]) * side, side - 1: bytes([255]) * side}
    data = _png(side, side, marks.get)
    assert len(data) < 1 << 20
    for decode in (nd.image.decode_png, nd.image.decode_image):
        image = decode(data)
        assert image.shape == (side, side, 1) and image.dtype == np.uint8
        for y, row in marks.items():
            assert image[y, :, 0].tobytes() == row
        assert not image[1:7000].any()
        del image


@pytest.mark.parametrize("width,height,message", [
    (30000, 30000, "PNG size too large for int: 30000 by 30000"),
    (23171, 23171, "PNG size too large for int: 23171 by 23171"),   # 2**29 pixels and more
    (1000001, 1, "Invalid PNG. Failed to initialize decoder."),    # libpng's width limit
    (1, 1000001, "Invalid PNG. Failed to initialize decoder."),
    (23170, 23170, "Invalid PNG data, size 65"),   # within the limits: its data is bad
])
def test_png_sizes_tensorflow_refuses_are_refused_with_its_error(width, height, message):
    data = _png(width, height)
    for decode in (nd.image.decode_png, nd.image.decode_image):
        with pytest.raises(nd.errors.InvalidArgumentError, match=message.replace(".", r"\.")):
            decode(data)
    tf = _tf()
    if tf is not None:
        with pytest.raises(tf.errors.InvalidArgumentError, match=message.replace(".", r"\.")):
            tf.io.decode_png(data)
