"""decode_raw against the fixed-length files TensorFlow wrote and TF's errors (TF 2.21)."""

import json
from pathlib import Path

import numpy as np
import pytest

import nbdata as nd
from nbdata.primitives.raw import decode_raw

DATA = Path(__file__).resolve().parent.parent / "data"
MANIFEST = json.loads((DATA / "MANIFEST.json").read_text())["files"]


@pytest.mark.parametrize("name", ["fixed_header_footer.bin", "fixed_float32.bin"])
@pytest.mark.parametrize("lifted", [True, False])
def test_fixed_length_files_decode(name, lifted):
    entry = MANIFEST[name]
    for key, want in entry["decode_raw"].items():
        dtype = np.dtype(key.replace("_big_endian", ""))
        little = not key.endswith("_big_endian")
        ds = nd.FixedLengthRecordDataset(str(DATA / name), entry["record_bytes"],
                                         header_bytes=entry["header_bytes"],
                                         footer_bytes=entry["footer_bytes"])
        ds = ds.map(lambda r: decode_raw(r, dtype, little_endian=little))
        if not lifted:
            options = nd.Options()
            options.fusion = False
            ds = ds.with_options(options)
        got = list(ds)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == np.dtype(w["dtype"]) and g.shape == tuple(w["shape"])
            assert g.tolist() == w["value"]


def test_batched_and_fixed_length():
    assert decode_raw([b"abcd", b"ab"], np.int16, fixed_length=4).tolist() == [[25185, 25699], [25185, 0]]
    assert decode_raw(b"", np.int32).shape == (0,)
    assert decode_raw([b"", b""], np.int32).shape == (2, 0)
    assert decode_raw(b"\x01\x00", np.int16, little_endian=False).tolist() == [256]
    assert decode_raw(b"\x01\x02", np.bool_).tolist() == [True, True]


@pytest.mark.parametrize("call, message", [
    (lambda: decode_raw(b"abcdefg", np.float32),
     "Input to DecodeRaw has length 7 that is not a multiple of 4, the size of float"),
    (lambda: decode_raw([b"abcd", b"abcde"], np.uint8),
     "DecodeRaw requires input strings to all be the same size, but element 1 has size 4 != 5"),
    (lambda: decode_raw([b"abc"], np.int16, fixed_length=3),
     "fixed_length (3) must be a multiple of the size of out_type (2)"),
])
def test_errors(call, message):
    with pytest.raises(nd.errors.InvalidArgumentError) as e:
        call()
    assert message in str(e.value)


def test_pipeline_batch_then_decode_with_unequal_records_fails_that_batch():
    ds = nd.Dataset.from_tensor_slices(np.array([b"aaaa", b"bbbb", b"cc", b"dddd"], object))
    ds = ds.batch(2).map(lambda b: decode_raw(b, np.uint8))
    got = list(ds.ignore_errors())
    assert [g.tolist() for g in got] == [[[97] * 4, [98] * 4]]


@pytest.mark.parametrize("out_type, kwargs, message", [
    (np.uint32, {}, "Value for attr 'out_type' of uint32 is not in the list"),
    (nd.string, {}, "Value for attr 'out_type' of string is not in the list"),
    (np.bool_, {"fixed_length": 4}, "Value for attr 'out_type' of bool is not in the list"),
    (np.complex64, {"fixed_length": 8}, "of complex64 is not in the list"),
    (np.int16, {"fixed_length": 0}, r"fixed_length \(0\) must be greater than zero"),
])
def test_out_types_and_lengths_tensorflow_refuses(out_type, kwargs, message):
    with pytest.raises(nd.errors.InvalidArgumentError, match=message):
        decode_raw([b"abcd"], out_type, **kwargs)


def test_empty_batch_with_fixed_length_keeps_its_width():
    out = decode_raw(np.array([], dtype=object), np.int16, fixed_length=8)
    assert out.shape == (0, 4) and out.dtype == np.int16
