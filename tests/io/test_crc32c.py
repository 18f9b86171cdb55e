"""CRC32C kernels: known values, the instruction path against the table path, masking."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from nbdata.kernels import crc32c as c


@pytest.mark.parametrize("data, want", [
    (b"", 0), (b"123456789", 0xE3069283), (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43), (bytes(range(32)), 0x46DD794E)])
def test_known_values(data, want):
    assert c.crc32c_bytes(data) == want
    arr = np.frombuffer(data, np.uint8)
    table = c.crc32c_update_table(np.uint32(0xFFFFFFFF), arr, 0, len(arr)) ^ np.uint32(0xFFFFFFFF)
    assert int(table) == want


def test_mask_of_a_tensorflow_frame():
    # The frame of an empty record as TensorFlow writes it (tests/data/raw_records.tfrecord
    # starts with one): length 0, masked CRC of the length, no data, masked CRC of b"".
    frame = (__import__("pathlib").Path(__file__).parent.parent / "data" / "raw_records.tfrecord").read_bytes()[:16]
    assert frame[:8] == bytes(8)
    assert int.from_bytes(frame[8:12], "little") == c.masked_crc32c_bytes(bytes(8))
    assert int.from_bytes(frame[12:16], "little") == c.masked_crc32c_bytes(b"")


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=0, max_size=70_000), st.integers(0, 9), st.integers(0, 9))
def test_instruction_path_equals_table_path(data, head, tail):
    arr = np.frombuffer(bytes(head) + data + bytes(tail), np.uint8)
    start, end = head, head + len(data)
    want = c.crc32c_update_table(np.uint32(0xFFFFFFFF), arr, start, end)
    assert c.crc32c_update(np.uint32(0xFFFFFFFF), arr, start, end) == want


def test_agrees_with_the_crc32c_package():
    pkg = pytest.importorskip("crc32c")
    data = np.random.default_rng(1).integers(0, 256, 200_001, dtype=np.uint8)
    assert int(c.crc32c(data, 0, len(data))) == pkg.crc32c(data.tobytes())


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=5000), st.integers(0, 9), st.integers(0, 9))
def test_copy_with_crc_copies_and_checksums(data, head, at):
    src = np.frombuffer(bytes(head) + data, np.uint8)
    dst = np.zeros(at + len(data) + 3, np.uint8)
    got = c.masked_crc32c_copy(src, head, head + len(data), dst, at)
    assert int(got) == c.masked_crc32c_bytes(data)
    assert dst[at:at + len(data)].tobytes() == data
    assert not dst[:at].any() and not dst[at + len(data):].any()
