"""tf.train.Example encoding and parsing (nbdata.primitives.example, nbdata.kernels.protobuf).

Checks, in order: the conformance files written by TensorFlow (tests/data, values in
MANIFEST.json); encode_example against TF's bytes; round trips; error messages; a
differential test of the Numba kernels against ``ref_parse``, a slow pure-Python model
of TensorFlow's fast Example parser (example_proto_fast_parsing.cc, transcribed function
by function, with protobuf's CodedInputStream rules); a fuzz test (NBDATA_FUZZ_CASES
mutations, default 2000; ``python tests/io/test_example.py 100000`` runs more); and,
where TensorFlow is installed, the same comparisons against TF itself.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import struct
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbdata as nd
from nbdata.chunks import StringColumn
from nbdata.chunks import read_only
from nbdata.primitives.example import (FixedLenFeature, VarLenFeature, encode_example, parse_example,
                               parse_single_example)

DATA = Path(__file__).resolve().parent.parent / "data"
FUZZ_CASES = int(os.environ.get("NBDATA_FUZZ_CASES", "2000"))


# ============================================================== conformance files

def read_tfrecords(name: str) -> list[bytes]:
    """The records of a TFRecord file: 8-byte length, 4-byte CRC, data, 4-byte CRC."""
    raw = (DATA / name).read_bytes()
    if name.endswith(".gz"):
        raw = gzip.decompress(raw)
    elif name.endswith(".zlib"):
        raw = zlib.decompress(raw)
    out, pos = [], 0
    while pos < len(raw):
        (length,) = struct.unpack_from("<Q", raw, pos)
        out.append(raw[pos + 12:pos + 12 + length])
        pos += 12 + length + 4
    assert pos == len(raw)
    return out


def manifest() -> dict:
    return json.loads((DATA / "MANIFEST.json").read_text())


EXAMPLE_FILES = ["examples.tfrecord", "examples_b.tfrecord", "examples.tfrecord.gz",
                 "examples.tfrecord.zlib"]


def feature_config(texts: dict) -> dict:
    """MANIFEST feature strings such as ``FixedLenFeature([], int64, default_value=-100)``."""
    names = {"FixedLenFeature": FixedLenFeature, "VarLenFeature": VarLenFeature,
             "int64": "int64", "float32": "float32", "string": nd.string}
    return {k: eval(v, {"__builtins__": {}}, names) for k, v in texts.items()}


def latin1(x):
    return x.encode("latin-1") if isinstance(x, str) else [latin1(v) for v in x]


def check_tensor(got, want: dict, key: str):
    if want.get("sparse"):
        assert isinstance(got, nd.SparseTensor), key
        assert got.indices.dtype == np.int64 and got.dense_shape.dtype == np.int64
        assert got.indices.tolist() == want["indices"] or (not want["indices"]
                                                           and got.indices.size == 0), key
        assert got.indices.shape[1] == len(want["dense_shape"]), key
        assert got.dense_shape.tolist() == want["dense_shape"], key
        check_values(got.values, want["dtype"], want["values"], key)
        return
    shape = tuple(want["shape"])
    arr = np.asarray(got, dtype=object if want["dtype"] == "string" else None)
    assert arr.shape == shape, key
    if shape == ():
        if want["dtype"] == "string":
            assert type(got) is bytes, key
        else:
            assert isinstance(got, np.generic), key
    check_values(arr, want["dtype"], want["value"], key)


def check_values(arr, dtype: str, value, key: str):
    arr = np.asarray(arr, dtype=object) if dtype == "string" else np.asarray(arr)
    if dtype == "string":
        assert arr.dtype == object, key
        assert arr.tolist() == latin1(value), key
    elif dtype == "float32":
        assert arr.dtype == np.float32, key
        np.testing.assert_array_equal(arr, np.asarray(value, np.float64).astype(np.float32), key)
    else:
        assert arr.dtype == np.int64, key
        assert arr.tolist() == value, key


@pytest.mark.parametrize("name", EXAMPLE_FILES)
def test_conformance_records(name):
    info = manifest()["files"][name]
    records = read_tfrecords(name)
    assert len(records) == info["num_records"]
    assert records == [latin1(r) for r in info["records_latin1"]]

    case = info["parse_single_example"]
    features = feature_config(case["features"])
    for record, want in zip(records, case["results"]):
        got = parse_single_example(record, features)
        assert sorted(got) == sorted(want)
        for key in want:
            check_tensor(got[key], want[key], key)

    case = info["parse_example_all_records"]
    features = feature_config(case["features"])
    for batch in (records, np.array(records, dtype=object), StringColumn.from_values(records)):
        got = parse_example(batch, features)
        assert sorted(got) == sorted(case["result"])
        for key, want in case["result"].items():
            check_tensor(got[key], want, key)

    for case_name in ("parse_single_example_opt_required",
                      "parse_single_example_weights_fixed_with_default"):
        case = info[case_name]
        features = feature_config(case["features"])
        for record, want in zip(records, case["results"]):
            if "error" in want:
                assert want["error"] == "InvalidArgumentError"
                with pytest.raises(nd.errors.InvalidArgumentError) as e:
                    parse_single_example(record, features)
                assert want["message_contains"] in str(e.value)
            else:
                got = parse_single_example(record, features)
                for key in want:
                    check_tensor(got[key], want[key], key)


@pytest.mark.parametrize("name", EXAMPLE_FILES)
def test_conformance_encode(name):
    info = manifest()["files"][name]
    for written, record in zip(info["features_written"], info["records_latin1"]):
        features = {k: {"kind": v["kind"],
                        "value": latin1(v["value"]) if v["kind"] == "bytes_list" else v["value"]}
                    for k, v in written.items()}
        assert encode_example(features) == latin1(record)


def test_conformance_batch_errors_name_the_record():
    records = read_tfrecords("examples.tfrecord")
    with pytest.raises(nd.errors.InvalidArgumentError) as e:
        parse_example(records, {"opt": FixedLenFeature([], "int64")})
    assert "Feature: opt (data type: int64) is required but could not be found" in str(e.value)
    assert "Index: 1" in str(e.value)
    with pytest.raises(nd.errors.InvalidArgumentError) as e:
        parse_example(records, {"weights": FixedLenFeature([], "float32", default_value=0.0)})
    assert "Key: weights, Index: 0." in str(e.value)
    assert ("Number of float values != expected.  Values size: 0 but output shape: []"
            in str(e.value))


# ============================================================== encoding

def test_encode_matches_tensorflow_bytes():
    # Bytes printed by TF 2.21's tf.train.Example(...).SerializeToString(deterministic=True).
    assert encode_example({}) == b"\n\x00"
    assert encode_example({"": {"kind": "int64_list", "value": []}}) == (
        b"\n\x08\n\x06\n\x00\x12\x02\x1a\x00")
    assert encode_example({"k": {"kind": "bytes_list", "value": []}}) == (
        b"\n\t\n\x07\n\x01k\x12\x02\n\x00")
    assert encode_example({"k": [0, 127, 128, 2**63 - 1, -2**63]}) == (
        b'\n"\n \n\x01k\x12\x1b\x1a\x19\n\x17\x00\x7f\x80\x01\xff\xff\xff\xff\xff\xff\xff\xff\x7f'
        b'\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01')
    assert encode_example({"a": [1, -1]}) == (
        b"\n\x16\n\x14\n\x01a\x12\x0f\x1a\r\n\x0b\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")
    nan = float("nan")
    assert encode_example({"é": np.array([1e39, nan, -0.0]), "z": [b"", "é"]}) == (
        b"\n'\n\r\n\x01z\x12\x08\n\x06\n\x00\n\x02\xc3\xa9\n\x16\n\x02\xc3\xa9\x12\x10\x12\x0e"
        b"\n\x0c\x00\x00\x80\x7f\x00\x00\xc0\x7f\x00\x00\x00\x80")
    keys = ["a", "ab", "b", "", "abc", "aa", "ba", "é", "z", "ids_var", "id", "idz", "ida"]
    rec = encode_example({k: 1 for k in keys})
    order = ["aa", "abc", "ab", "a", "ba", "b", "ida", "ids_var", "idz", "id", "z", "é", ""]
    assert rec == example(*[entry(k.encode(), int64_list(1)) for k in order])
    assert encode_example({"b": 0.1, "a": b"x" * 200}) == (
        b"\n\xe6\x01\n\xd4\x01\n\x01a\x12\xce\x01\n\xcb\x01\n\xc8\x01" + b"x" * 200
        + b"\n\r\n\x01b\x12\x08\x12\x06\n\x04\xcd\xcc\xcc=")


def test_encode_kinds():
    assert encode_example({"f": True}) == encode_example({"f": 1})
    assert encode_example({"f": np.array([[1, 2], [3, 4]], np.int32)}) == encode_example(
        {"f": [1, 2, 3, 4]})
    assert encode_example({"f": np.array([1.5], np.float64)}) == encode_example({"f": 1.5})
    assert encode_example({"f": np.array([b"a", b"b"])}) == encode_example({"f": ["a", b"b"]})
    assert encode_example({"f": np.zeros(0, np.float32)}) == encode_example(
        {"f": {"kind": "float_list", "value": []}})
    assert encode_example({"f": [[1, 2], [3]]}) == encode_example({"f": [1, 2, 3]})
    assert encode_example({"f": [1, 2.5]}) == encode_example({"f": np.array([1, 2.5], np.float32)})
    assert encode_example({"f": {"kind": "float_list", "value": [1, 2]}}) == encode_example(
        {"f": [1.0, 2.0]})
    assert encode_example({b"k": 1}) == encode_example({"k": 1})
    with pytest.raises(ValueError, match="empty list"):
        encode_example({"f": []})
    with pytest.raises(ValueError, match="int64 range"):
        encode_example({"f": 2**63})
    with pytest.raises(ValueError, match="int64 range"):
        encode_example({"f": np.array([2**63], np.uint64)})
    with pytest.raises(TypeError):
        encode_example({"f": [1, b"x", None]})
    with pytest.raises(TypeError):
        encode_example({"f": {"kind": "int64_list", "value": [1.5]}})
    with pytest.raises(TypeError):
        encode_example({"f": None})
    with pytest.raises(ValueError):
        encode_example({"f": {"kind": "double_list", "value": [1.5]}})


@st.composite
def feature_dicts(draw):
    keys = draw(st.lists(st.text(max_size=4), max_size=5, unique=True))
    out = {}
    for k in keys:
        kind = draw(st.sampled_from(["int64", "float32", "string"]))
        n = draw(st.integers(0, 6))
        if kind == "int64":
            out[k] = draw(st.lists(st.integers(-2**63, 2**63 - 1), min_size=n, max_size=n))
        elif kind == "float32":
            out[k] = draw(st.lists(st.floats(width=32), min_size=n, max_size=n))
        else:
            out[k] = draw(st.lists(st.binary(max_size=6), min_size=n, max_size=n))
        out[k] = (kind, out[k])
    return out


@given(feature_dicts(), st.integers(1, 3))
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
def test_round_trip(values, batch):
    kinds = {"int64": "int64_list", "float32": "float_list", "string": "bytes_list"}
    rec = encode_example({k: {"kind": kinds[t], "value": v} for k, (t, v) in values.items()})
    if not values:
        assert rec == b"\n\x00"
        return
    var = {k: VarLenFeature(t) for k, (t, _) in values.items()}
    fixed = {k: FixedLenFeature([len(v)], t) for k, (t, v) in values.items()}
    single = parse_single_example(rec, var)
    dense = parse_single_example(rec, fixed)
    batched = parse_example([rec] * batch, fixed)
    sparse = parse_example([rec] * batch, var)
    for k, (t, v) in values.items():
        want = np.array(v, dtype=object if t == "string" else t)
        outs = (single[k].values, dense[k], batched[k][batch - 1], sparse[k].values[:len(v)])
        if t == "float32":
            for got in outs:
                assert got.dtype == np.float32
                np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
        else:
            for got in outs:
                assert np.asarray(got).tolist() == want.tolist()
        assert single[k].dense_shape.tolist() == [len(v)]
        assert sparse[k].dense_shape.tolist() == [batch, len(v)]
        assert sparse[k].indices.tolist() == [[b, j] for b in range(batch) for j in range(len(v))]


@st.composite
def record_files(draw):
    """A feature layout (kind per key) and 1-12 records of it with random lengths."""
    keys = draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=4,
                         unique=True))
    kinds = {k: draw(st.sampled_from(["int64", "float32", "string"])) for k in keys}
    values = {"int64": st.integers(-2**63, 2**63 - 1), "float32": st.floats(width=32),
              "string": st.binary(max_size=40)}
    records = [{k: draw(st.lists(values[t], max_size=draw(st.sampled_from([0, 3, 50]))))
                for k, t in kinds.items()} for _ in range(draw(st.integers(1, 12)))]
    return kinds, records


@given(record_files(), st.sampled_from(["", "GZIP", "ZLIB"]), st.integers(1, 5))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
def test_encode_write_read_parse_round_trip(tmp_path, layout, compression, batch):
    """encode_example -> TFRecordWriter (each compression) -> TFRecordDataset -> parse
    (per record, and batched through the parse_example rewrite) gives back the input."""
    kinds, records = layout
    names = {"int64": "int64_list", "float32": "float_list", "string": "bytes_list"}
    path = str(tmp_path / f"rt-{compression}-{batch}.tfrecord")
    with nd.io.TFRecordWriter(path, compression) as writer:
        for r in records:
            writer.write(encode_example({k: {"kind": names[kinds[k]], "value": v}
                                         for k, v in r.items()}))
    spec = {k: VarLenFeature(t) for k, t in kinds.items()}
    ds = nd.TFRecordDataset(path, compression_type=compression)
    singles = list(ds.map(lambda rec: parse_single_example(rec, spec)))
    batches = list(ds.map(lambda rec: parse_single_example(rec, spec)).batch(batch).compile())
    assert len(singles) == len(records)
    assert sum(len(b[next(iter(kinds))].dense_shape[:1]) and b[next(iter(kinds))].dense_shape[0]
               for b in batches) == len(records)
    for i, r in enumerate(records):
        b, row = divmod(i, batch)
        for k, t in kinds.items():
            want = np.array(r[k], dtype=object if t == "string" else t)
            sparse = batches[b][k]
            in_row = sparse.indices[:, 0] == row
            for got in (singles[i][k].values, sparse.values[in_row]):
                if t == "float32":
                    np.testing.assert_array_equal(np.asarray(got, np.float32).view(np.uint32),
                                                  want.view(np.uint32))
                else:
                    assert np.asarray(got).tolist() == want.tolist()


# ============================================================== API details

def test_inputs_and_outputs():
    rec = encode_example({"s": [b"a", b"b"], "x": [1.0, 2.0, 3.0, 4.0], "i": 5})
    feats = {"s": FixedLenFeature((2,), bytes), "x": FixedLenFeature([2, 2], np.float32),
             "i": FixedLenFeature([], np.int64), "m": FixedLenFeature([], str, default_value="d"),
             "n": FixedLenFeature([1], "float32", default_value=[7])}
    for ser in (rec, bytearray(rec), np.array(rec, dtype=object), np.frombuffer(rec, np.uint8),
                np.bytes_(rec)):
        out = parse_single_example(ser, feats)
        assert out["s"].dtype == object and out["s"].tolist() == [b"a", b"b"]
        assert out["x"].dtype == np.float32 and out["x"].tolist() == [[1, 2], [3, 4]]
        assert out["i"] == 5 and isinstance(out["i"], np.int64)
        assert out["m"] == b"d" and type(out["m"]) is bytes
        assert out["n"].tolist() == [7.0] and out["n"].dtype == np.float32
    # a scalar given to parse_example parses as one Example
    assert parse_example(rec, feats)["i"] == 5
    out = parse_example([rec, encode_example({"i": 6})],
                        {"i": FixedLenFeature([], "int64"), "m": FixedLenFeature([], bytes, b"d"),
                         "s": VarLenFeature(nd.string)})
    assert out["i"].tolist() == [5, 6] and out["m"].tolist() == [b"d", b"d"]
    assert out["s"].values.tolist() == [b"a", b"b"] and out["s"].dense_shape.tolist() == [2, 2]
    # an empty batch
    out = parse_example([], {"a": FixedLenFeature([], "int64"), "v": VarLenFeature("float32"),
                             "s": FixedLenFeature([2], "string")})
    assert out["a"].shape == (0,) and out["s"].shape == (0, 2)
    assert out["v"].indices.shape == (0, 2) and out["v"].dense_shape.tolist() == [0, 0]
    assert out["v"].values.dtype == np.float32


def test_plan_api_for_fused_kernels():
    from nbdata.primitives.example import ExamplePlan
    from nbdata.kernels import protobuf as pb
    features = {"x": FixedLenFeature([2], "float32"), "t": VarLenFeature("string"),
                "n": FixedLenFeature([], "int64", default_value=-1)}
    records = [encode_example({"x": [1.0, 2.0], "t": [b"a"], "n": 3}),
               encode_example({"x": [3.0, 4.0], "t": {"kind": "bytes_list", "value": []}})]
    column = StringColumn.from_values(records)
    plan = ExamplePlan(features)
    out = plan.outputs(2)
    act = [np.empty(len(plan.keys), np.int64) for _ in range(3)]
    for i in range(2):
        status = pb.parse_record(column.data, column.offsets[i], column.offsets[i + 1], i, 2,
                                 plan.layout, out, False, *act)
        assert status == (pb.OK, -1, 0)
    got = plan.results(column.data, column.offsets, out)
    want = parse_example(records, features)
    assert got["x"].tolist() == want["x"].tolist() == [[1, 2], [3, 4]]
    assert got["n"].tolist() == want["n"].tolist() == [3, -1]
    assert got["t"] == want["t"]
    assert plan.parse(column.data, column.offsets)["n"].tolist() == [3, -1]
    bad = StringColumn.from_values([records[0], encode_example({"x": [1.0]})])
    # read-only, as nbdata.primitives.example passes them (one kernel signature)
    row, code, f, extra = pb.parse_range(read_only(bad.data), read_only(bad.offsets), 0, 2,
                                         plan.layout, plan.outputs(2), False)
    assert (row, code, plan.keys[f], extra) == (1, pb.E_COUNT, "x", 1)
    err = plan.error(bad.data, bad.offsets, False, row, code, f, extra)
    assert str(err) == message(parse_example, bad, features)
    assert err.record_index == 1


def test_config_errors():
    rec = encode_example({"a": 1})
    with pytest.raises(ValueError, match="features cannot be empty"):
        parse_single_example(rec, {})
    with pytest.raises(nd.errors.InvalidArgumentError, match="not in the list of allowed values"):
        parse_single_example(rec, {"a": FixedLenFeature([], np.int32)})
    with pytest.raises(nd.errors.InvalidArgumentError, match="not in the list of allowed values"):
        parse_single_example(rec, {"a": VarLenFeature(np.float64)})
    with pytest.raises(ValueError, match="Missing shape"):
        parse_single_example(rec, {"a": FixedLenFeature(None, "int64")})
    with pytest.raises(ValueError, match="First dimension"):
        parse_single_example(rec, {"a": FixedLenFeature([None], "int64")})
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match="Input to reshape is a tensor with 1 values, but the requested "
                             "shape has 3"):
        parse_single_example(rec, {"b": FixedLenFeature([3], "int64", default_value=7)})
    with pytest.raises(TypeError, match="Cannot convert 0.5"):
        parse_single_example(rec, {"b": FixedLenFeature([], "int64", default_value=0.5)})
    with pytest.raises(TypeError):
        parse_single_example(rec, {"b": FixedLenFeature([], "string", default_value=1)})
    with pytest.raises(nd.errors.InvalidArgumentError, match="scalar or vector"):
        parse_example(np.array([[rec]], dtype=object), {"a": FixedLenFeature([], "int64")})
    out = parse_single_example(rec, {"b": FixedLenFeature([2, 2], "int64", [[1, 2], [3, 4]]),
                                     "c": FixedLenFeature([], "float32", default_value=True)})
    assert out["b"].tolist() == [[1, 2], [3, 4]] and out["c"] == 1.0
    # configs are cached: equal configs share a plan, different defaults do not
    empty = encode_example({})
    for d in (1, 2, True, np.int64(3), 1):
        f = {"a": FixedLenFeature([], "int64", default_value=d)}
        assert parse_single_example(empty, f)["a"] == int(d)
    for d in ([1, 2], np.array([3, 4]), (5, 6)):
        f = {"a": FixedLenFeature([2], "int64", default_value=d)}
        assert parse_single_example(empty, f)["a"].tolist() == list(np.asarray(d))
    f = {"a": FixedLenFeature([1], "float32", default_value=[float("nan")])}
    assert np.isnan(parse_single_example(empty, f)["a"][0])
    with pytest.raises(ValueError, match="twice"):
        parse_single_example(rec, {"a": VarLenFeature("int64"), b"a": VarLenFeature("int64")})
    # TF: an empty default does not count, shape [0] features are then required.
    with pytest.raises(nd.errors.InvalidArgumentError, match="required"):
        parse_single_example(rec, {"b": FixedLenFeature([0], "int64", default_value=[])})


# ---------------------------------------------------------------- a wire-format writer

def varint(n: int) -> bytes:
    n &= 2**64 - 1
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def ld(field: int, payload: bytes) -> bytes:
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def entry(key: bytes, feature: bytes) -> bytes:
    return ld(1, ld(1, key) + ld(2, feature))


def example(*entries: bytes) -> bytes:
    return ld(1, b"".join(entries))


def int64_list(*v) -> bytes:
    return ld(3, ld(1, b"".join(varint(x) for x in v)))


def float_list(*v) -> bytes:
    return ld(2, ld(1, np.array(v, "<f4").tobytes()))


def bytes_list(*v) -> bytes:
    return ld(1, b"".join(ld(1, x) for x in v))


def message(fn, *args, **kw) -> str:
    with pytest.raises(nd.errors.InvalidArgumentError) as e:
        fn(*args, **kw)
    return str(e.value)


def test_error_messages():
    fi = {"a": FixedLenFeature([], "int64")}
    va = {"a": VarLenFeature("int64")}
    good = example(entry(b"a", int64_list(1)))
    # TensorFlow 2.21's messages (ParseExampleV2), record index where TF has none.
    assert message(parse_single_example, example(entry(b"a", float_list(1.0))), fi) == (
        "Key: a.  Data types don't match. Data type: float but expected type: int64")
    assert message(parse_example, [good, example(entry(b"a", float_list(1.0)))], fi) == (
        "Name: <unknown>, Key: a, Index: 1.  Data types don't match. Data type: float but "
        "expected type: int64")
    assert message(parse_example, [good, example(entry(b"a", float_list(1.0)))], va) == (
        "Name: <unknown>, Key: a, Index: 1.  Data types don't match. Expected type: int64, "
        "Actual type: float")
    assert message(parse_single_example, example(entry(b"a", float_list(1.0))), va) == (
        "Key: a.  Data types don't match. Expected type: int64, Actual type: float")
    assert message(parse_example, [example(entry(b"a", int64_list(1, 2)))], fi) == (
        "Name: <unknown>, Key: a, Index: 0.  Number of int64 values != expected.  Values size: 2 "
        "but output shape: []")
    assert message(parse_single_example, example(entry(b"a", int64_list(1, 2))), fi).startswith(
        "Key: a.  Can't parse serialized Example: Some int64_list slice was not parsed.")
    assert message(parse_example, [good, example()], fi) == (
        "Name: <unknown>, Feature: a (data type: int64) is required but could not be found. "
        "(Index: 1)")
    assert message(parse_example, [good, example()], fi, example_names=["x", "y"]).startswith(
        "Name: y, Feature: a")
    assert message(parse_single_example, example(), fi) == (
        "Feature: a (data type: int64) is required but could not be found.")
    assert message(parse_example, [example(entry(b"a", bytes_list(b"x", b"y")))],
                   {"a": FixedLenFeature([], bytes)}) == (
        "Name: <unknown>, Key: a, Index: 0.  Can't parse serialized Example.")
    assert message(parse_single_example, example(entry(b"a", bytes_list(b"x", b"y"))),
                   {"a": FixedLenFeature([], bytes)}) == (
        "Key: a.  Can't parse serialized Example: Parsing bytes_list failed.")
    assert message(parse_single_example, example(entry(b"a", ld(3, varint(16) + varint(1)))),
                   fi) == "Key: a.  Can't parse serialized Example: Parsing int64_list failed."
    assert message(parse_example, [good, good, b"\n\x05ab"], fi) == (
        "Name: <unknown>, Index: 2.  Could not parse example input, value: '\\n\\x05ab'")
    assert "Unsupported datatype." in message(parse_single_example,
                                              example(entry(b"a", ld(4, b""))), fi)
    # the lowest bad record is reported, as in TF, also from the parallel kernel
    recs = [good] * 20000
    recs[15000] = example(entry(b"a", int64_list(1, 2)))
    recs[17000] = b"\xff"
    recs[9000] = example()
    assert "(Index: 9000)" in message(parse_example, recs, fi)
    with pytest.raises(nd.errors.InvalidArgumentError) as e:
        parse_example(recs, fi)
    assert e.value.record_index == 9000 and e.value.op == "parse_example"
    recs[9000] = good
    assert "Index: 15000." in message(parse_example, recs, fi)


def test_tensorflow_quirks():
    fi = {"a": FixedLenFeature([], "int64")}
    fd = {"a": FixedLenFeature([], "int64", default_value=4)}
    va = {"a": VarLenFeature("int64")}
    one = lambda rec, f=fi: parse_single_example(rec, f)["a"]  # noqa: E731
    # the last of repeated keys wins, across concatenated Examples too
    assert one(example(entry(b"a", int64_list(5)), entry(b"a", int64_list(7)))) == 7
    assert one(example(entry(b"a", int64_list(5))) + example(entry(b"b", int64_list(7)))) == 5
    # an empty Feature is absent (FixedLen), and in a batch an empty list (VarLen)
    assert one(example(entry(b"a", int64_list(9)), entry(b"a", b""))) == 9
    assert one(example(entry(b"a", b"")), fd) == 4
    rec = example(entry(b"a", int64_list(9)), entry(b"a", b""))
    assert parse_single_example(rec, va)["a"].values.tolist() == [9]
    assert parse_example([rec], va)["a"].values.tolist() == []
    # a present but empty list does not take the default
    with pytest.raises(nd.errors.InvalidArgumentError):
        one(example(entry(b"a", int64_list())), fd)
    # unknown fields: skipped at the top level only
    assert one(varint(2 << 3) + varint(300) + example(entry(b"a", int64_list(5)))) == 5
    assert one(b"\x00\x00" + example(entry(b"a", int64_list(5)))) == 5
    assert one(example(entry(b"a", int64_list(5))) + b"\x12\x7f") == 5
    assert one(b"\x12\xff\xff\xff\xff\x0f" + example(entry(b"a", int64_list(5)))) == 5
    for bad in (ld(1, varint(2 << 3) + varint(3) + entry(b"a", int64_list(5))),
                ld(1, ld(1, ld(1, b"a") + ld(2, int64_list(5)) + varint(3 << 3) + varint(1))),
                b"\x0b\x0c" + example(entry(b"a", int64_list(5))),
                example(entry(b"a", int64_list(5))) + b"\x0a"):
        assert "Could not parse example input" in message(parse_single_example, bad, fi)
    # map entries: value before key is fine, two keys leave the value empty
    assert one(ld(1, ld(1, ld(2, int64_list(5)) + ld(1, b"a")))) == 5
    assert one(ld(1, ld(1, ld(1, b"a") + ld(1, b"a"))), fd) == 4
    # only the first byte of a Feature counts; the rest after its list is ignored
    assert one(example(entry(b"a", int64_list(5) + float_list(1.0)))) == 5
    assert one(example(entry(b"a", int64_list(5) + varint(4 << 3) + varint(1)))) == 5
    # packed or unpacked by the first tag; one packed run; no mixing after unpacked
    assert one(example(entry(b"a", ld(3, varint(8) + varint(5))))) == 5
    assert parse_single_example(example(entry(b"a", ld(3, ld(1, varint(1)) + ld(1, varint(2))))),
                                va)["a"].values.tolist() == [1]
    with pytest.raises(nd.errors.InvalidArgumentError):
        parse_single_example(example(entry(b"a", ld(3, varint(8) + varint(5) + ld(1, varint(6))))),
                             va)
    fv = {"a": VarLenFeature("float32")}
    five = example(entry(b"a", ld(2, ld(1, np.float32(2.5).tobytes() + b"\x00"))))
    assert parse_single_example(five, fv)["a"].values.tolist() == [2.5]
    unpacked = example(entry(b"a", ld(2, b"\x0d" + np.float32(1.5).tobytes() * 1)))
    assert parse_single_example(unpacked, fv)["a"].values.tolist() == [1.5]
    # lengths past the end: clipped for messages and int64 runs, errors for float runs
    assert one(b"\x0a\x7f" + example(entry(b"a", int64_list(5)))[2:]) == 5
    assert one(example(entry(b"a", b"\x1a\x09\x0a\x01\x05"))) == 5
    assert one(example(entry(b"a", b"\x1a\x03\x0a\x09\x05"))) == 5
    with pytest.raises(nd.errors.InvalidArgumentError):
        parse_single_example(example(entry(b"a", b"\x12\x06\x0a\x09" + bytes(4))), fv)
    # varints: 10 bytes at most, lengths keep their low 32 bits
    assert parse_single_example(example(entry(b"a", ld(3, ld(1, b"\xff" * 9 + b"\x7f")))),
                                va)["a"].values.tolist() == [-1]
    with pytest.raises(nd.errors.InvalidArgumentError):
        parse_single_example(example(entry(b"a", ld(3, ld(1, b"\xff" * 10 + b"\x01")))), va)
    assert one(b"\x0a" + b"\x80" * 9 + b"\x00", fd) == 4
    assert one(b"\x0a\x80\x80\x80\x80\x10" + example(entry(b"a", int64_list(5))), fd) == 5
    # the latest map entry's error is reported
    two = {"a": FixedLenFeature([], "int64"), "b": FixedLenFeature([], "int64")}
    rec = example(entry(b"a", float_list(1.0)), entry(b"b", int64_list(1, 2)))
    assert "Key: b," in message(parse_example, [rec], two)
    rec = example(entry(b"b", int64_list(1, 2)), entry(b"a", float_list(1.0)))
    assert "Key: a," in message(parse_example, [rec], two)
    # a shadowed entry with a wrong list kind is fine, with an unknown kind byte it is not
    assert one(example(entry(b"a", float_list(1.0)), entry(b"a", int64_list(9)))) == 9
    assert "Unsupported datatype." in message(
        parse_single_example, example(entry(b"a", b"\x22\x00"), entry(b"a", int64_list(9))), fi)
    # keys that are not wanted are never looked into
    assert one(example(entry(b"b", ld(4, b"")), entry(b"a", int64_list(1)))) == 1
    assert parse_single_example(example(entry(b"", int64_list(3))),
                                {"": FixedLenFeature([], "int64")})[""] == 3


# ============================================================== reference parser

class Stream:
    """protobuf's CodedInputStream over a byte string, the calls TF's parser makes."""

    def __init__(self, buf: bytes):
        self.buf, self.pos, self.limit = buf, 0, len(buf)

    def at_end(self) -> bool:                            # ExpectAtEnd
        return self.pos == self.limit

    def expect_tag(self, byte: int) -> bool:             # ExpectTag (one-byte tags)
        if self.pos < self.limit and self.buf[self.pos] == byte:
            self.pos += 1
            return True
        return False

    def peek(self) -> int:
        return self.buf[self.pos] if self.pos < self.limit else 0

    def varint64(self):                                  # ReadVarint64
        result = shift = 0
        for _ in range(10):
            if self.pos >= self.limit:
                return None
            b = self.buf[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return result & (2**64 - 1)
        return None

    def varint32(self):                                  # ReadVarint32
        v = self.varint64()
        return None if v is None else v & 0xFFFFFFFF

    def read_tag(self) -> int:                           # ReadTag: 0 at the end or on error
        v = self.varint32() if self.pos < self.limit else None
        return 0 if v is None else v

    def push_limit(self, n: int) -> int:                 # PushLimit(int)
        old = self.limit
        n = n - 2**32 if n >= 2**31 else n
        if 0 <= n < self.limit - self.pos:
            self.limit = self.pos + n
        return old

    def pop_limit(self, old: int):
        self.limit = old

    def skip(self, n: int) -> bool:                      # Skip(int)
        n = n - 2**32 if n >= 2**31 else n
        if n < 0:
            return False
        if n <= self.limit - self.pos:
            self.pos += n
            return True
        self.pos = self.limit
        return False

    def read_raw(self, n: int):                          # ReadRaw
        if n > self.limit - self.pos:
            return None
        self.pos += n
        return self.buf[self.pos - n:self.pos]


def skip_extraneous_tag(s: Stream) -> bool:
    wire = s.read_tag() & 7
    if wire == 0:
        return s.varint32() is not None
    if wire == 1:
        return s.read_raw(8) is not None
    if wire == 2:
        n = s.varint32()
        if n is None:
            return False
        s.skip(n)
        return True
    if wire == 5:
        return s.read_raw(4) is not None
    return False


def parse_string(s: Stream):
    n = s.varint32()
    if n is None:
        return None
    if n == 0:
        return b""
    if s.pos == s.limit or s.limit - s.pos < n:
        return None
    out = s.buf[s.pos:s.pos + n]
    s.skip(n)
    return out


def parse_map_entry(s: Stream):
    n = s.varint32()
    if n is None:
        return None
    limit = s.push_limit(n)
    key, feature = b"", b""
    for _ in range(2):
        tag = s.read_tag()
        if tag not in (10, 18):
            return None
        value = parse_string(s)
        if value is None:
            return None
        if tag == 10:
            key = value
        else:
            feature = value
    if not s.at_end():
        return None
    s.pop_limit(limit)
    return key, feature


def parse_features(s: Stream, out: list) -> bool:
    n = s.varint32()
    if n is None:
        return False
    limit = s.push_limit(n)
    while not s.at_end():
        if not s.expect_tag(0x0A):
            return False
        e = parse_map_entry(s)
        if e is None:
            return False
        out.append(e)
    s.pop_limit(limit)
    return True


def ref_entries(record: bytes):
    """The (key, Feature bytes) map entries of a record, or None (ParseExample)."""
    s, out = Stream(record), []
    while not s.at_end():
        if not s.expect_tag(0x0A):
            if not skip_extraneous_tag(s):
                return None
        elif not parse_features(s, out):
            return None
    return out


class Slice:
    """TF's LimitedArraySlice (FixedLen outputs) or, with ``cap=None``, a vector."""

    def __init__(self, cap):
        self.cap, self.cur, self.data = cap, 0, {}

    def end_distance(self):
        return self.cap - self.cur

    def size(self):
        return self.cur if self.cap is None else min(self.cur, self.cap)

    def push_back(self, v):
        if self.cap is None or self.cur < self.cap:
            self.data[self.cur] = v
        self.cur += 1

    def construct_at_end(self) -> bool:
        if self.cap is not None and self.cur >= self.cap:
            return False
        self.cur += 1
        return True

    def values(self):
        return [self.data[i] for i in range(self.size())]


def parse_bytes_list(ser: bytes, out: Slice) -> bool:
    s = Stream(ser)
    n = s.varint32()
    if n is None:
        return False
    limit = s.push_limit(n)
    while not s.at_end():
        if not s.expect_tag(0x0A):
            return False
        size = s.varint32()
        if size is None or not out.construct_at_end():
            return False
        raw = s.read_raw(size)
        if raw is None:
            return False
        out.data[out.cur - 1] = raw
    s.pop_limit(limit)
    return True


def parse_float_list(ser: bytes, out: Slice) -> bool:
    s = Stream(ser)
    n = s.varint32()
    if n is None:
        return False
    limit = s.push_limit(n)
    if not s.at_end():
        peek = s.peek()
        if peek not in (0x0A, 0x0D):
            return False
        if peek == 0x0A:
            s.expect_tag(0x0A)
            packed = s.varint32()
            if packed is None:
                return False
            packed_limit = s.push_limit(packed)
            initial = out.size()
            count = packed // 4
            fit = count if out.cap is None else min(count, out.cap - initial)
            raw = s.read_raw(min(fit * 4, packed))
            if raw is None:
                return False
            out.cur = initial + count                  # resize
            for j in range(fit):
                out.data[initial + j] = raw[4 * j:4 * j + 4]
            s.pop_limit(packed_limit)
        else:
            index = initial = out.size()
            out.cur = initial + (s.limit - s.pos) // 5   # resize(BytesUntilLimit / 5)
            if out.cap is not None and out.cur > out.cap:
                TF_UNSAFE.append(ser)   # TF 2.21 writes past its output tensor here
            while not s.at_end():
                if not s.expect_tag(0x0D):
                    return False
                raw = s.read_raw(4)
                if raw is None:
                    return False
                if out.cap is None or index < out.cap:
                    out.data[index] = raw
                index += 1
    s.pop_limit(limit)
    return True


def parse_int64_list(ser: bytes, out: Slice) -> bool:
    s = Stream(ser)
    n = s.varint32()
    if n is None:
        return False
    limit = s.push_limit(n)
    if not s.at_end():
        peek = s.peek()
        if peek not in (0x0A, 0x08):
            return False
        if peek == 0x0A:
            s.expect_tag(0x0A)
            packed = s.varint32()
            if packed is None:
                return False
            packed_limit = s.push_limit(packed)
            while not s.at_end():
                v = s.varint64()
                if v is None:
                    return False
                out.push_back(v - 2**64 if v >= 2**63 else v)
            s.pop_limit(packed_limit)
        else:
            while not s.at_end():
                if not s.expect_tag(0x08):
                    return False
                v = s.varint64()
                if v is None:
                    return False
                out.push_back(v - 2**64 if v >= 2**63 else v)
    s.pop_limit(limit)
    return True


KIND = {0x0A: "string", 0x12: "float32", 0x1A: "int64"}
# Lists that make TensorFlow's parser write out of bounds (an unpacked float list longer
# than its FixedLen feature): TF may crash on them, so they are not sent to TF.
TF_UNSAFE: list = []
PARSERS = {"string": parse_bytes_list, "float32": parse_float_list, "int64": parse_int64_list}


class RefError(Exception):
    def __init__(self, code: str, key=None):
        super().__init__(code, key)
        self.code, self.key = code, key


def config_of(features: dict) -> dict:
    out = {}
    for key, spec in features.items():
        dtype = "string" if spec.dtype is nd.string else np.dtype(spec.dtype).name
        if isinstance(spec, VarLenFeature):
            out[key] = (dtype, None, None)
        else:
            count = int(np.prod(spec.shape, dtype=np.int64))
            default = None
            if spec.default_value is not None:
                d = np.asarray(spec.default_value, dtype=object if dtype == "string" else dtype)
                default = [x.encode() if isinstance(x, str) else x for x in d.reshape(-1).tolist()]
                if dtype == "float32":
                    default = [np.float32(x).tobytes() for x in default]
                default = default or None
            out[key] = (dtype, count, default)
    return out


def ref_parse(record: bytes, config: dict, single: bool) -> dict:
    """TF's FastParseSingleExample (``single``) or FastParseSerializedExample for one
    record: key -> list of values (floats as 4 raw bytes), or raises RefError."""
    entries = ref_entries(record)
    if entries is None:
        raise RefError("parse")
    seen, result = set(), {}
    for key_bytes, ser in reversed(entries):
        key = key_bytes.decode("utf-8", "surrogateescape")
        if key not in config:
            continue
        dtype, count, _ = config[key]
        if not ser:
            kind = None
        elif ser[0] in KIND:
            kind, ser = KIND[ser[0]], ser[1:]
        else:
            raise RefError("dtype", key)
        if kind is None and (single or count is not None):
            continue
        if key in seen:
            continue
        seen.add(key)
        if kind is not None and kind != dtype:
            raise RefError("type", key)
        out = Slice(count)
        if kind is not None and not PARSERS[dtype](ser, out):
            raise RefError("list", key)
        if count is not None and out.end_distance() != 0:
            raise RefError("count", key)
        result[key] = out.values()
    for key in sorted(config):
        dtype, count, default = config[key]
        if key in seen:
            continue
        if count is None:
            result[key] = []
        elif default is None:
            raise RefError("missing", key)
        else:
            result[key] = list(default)
    return result


def ref_parse_batch(records: list, config: dict):
    """``(index of the first bad record, RefError)`` or ``(None, per-record results)``."""
    out = []
    for i, rec in enumerate(records):
        try:
            out.append(ref_parse(rec, config, single=False))
        except RefError as e:
            return i, e
    return None, out


def error_code(message: str) -> str:
    for text, code in (("Could not parse example input", "parse"),
                       ("Unsupported datatype", "dtype"), ("Data types don't match", "type"),
                       ("values != expected", "count"), ("slice was not parsed", "count"),
                       ("Can't parse serialized Example", "list"), ("is required", "missing")):
        if text in message:
            return code
    raise AssertionError(f"unclassified message {message!r}")


def flat_values(value, dtype: str) -> list:
    """Our output as the reference's lists (floats as raw bytes)."""
    if isinstance(value, nd.SparseTensor):
        value = value.values
    arr = np.asarray(value, dtype=object if dtype == "string" else None).reshape(-1)
    if dtype == "float32":
        return [x.tobytes() for x in arr.astype("<f4")]
    return arr.tolist()


def compare_single(record: bytes, features: dict, config: dict):
    try:
        want = ref_parse(record, config, single=True)
    except RefError as e:
        want = e
    try:
        got = parse_single_example(record, features)
    except nd.errors.InvalidArgumentError as e:
        assert isinstance(want, RefError), (record, str(e))
        assert error_code(str(e)) == want.code, (record, str(e), want.code)
        if want.key is not None:
            assert f"Key: {want.key}." in str(e) or f"Feature: {want.key} " in str(e), str(e)
        return
    assert not isinstance(want, RefError), (record, want.code, want.key)
    for key, (dtype, count, _) in config.items():
        assert flat_values(got[key], dtype) == want[key], (record, key)
        if count is None:
            assert got[key].dense_shape.tolist() == [len(want[key])]


def compare_batch(records: list, features: dict, config: dict):
    bad, want = ref_parse_batch(records, config)
    try:
        got = parse_example(records, features)
    except nd.errors.InvalidArgumentError as e:
        assert bad is not None, (records, str(e))
        assert error_code(str(e)) == want.code, (str(e), want.code)
        assert f"Index: {bad}" in str(e), (str(e), bad)
        if want.key is not None:
            assert f"Key: {want.key}," in str(e) or f"Feature: {want.key} " in str(e), str(e)
        return
    assert bad is None, (records, bad, want.code)
    for key, (dtype, count, _) in config.items():
        rows = [w[key] for w in want]
        if count is None:
            st_ = got[key]
            assert flat_values(st_, dtype) == [v for r in rows for v in r], key
            lengths = [len(r) for r in rows]
            assert st_.indices.tolist() == [[i, j] for i, n in enumerate(lengths) for j in range(n)]
            assert st_.dense_shape.tolist() == [len(rows), max(lengths, default=0)]
        else:
            assert got[key].shape[0] == len(records)
            assert flat_values(got[key], dtype) == [v for r in rows for v in r], key


# ---------------------------------------------------------------- random Examples

KEYS = ["a", "b", "ab", "é", ""]
DTYPES = ["int64", "float32", "string"]


def values_of(draw, dtype: str, n: int) -> list:
    if dtype == "int64":
        return draw(st.lists(st.integers(-2**63, 2**63 - 1), min_size=n, max_size=n))
    if dtype == "float32":
        return draw(st.lists(st.floats(width=32), min_size=n, max_size=n))
    return draw(st.lists(st.binary(max_size=4), min_size=n, max_size=n))


def feature_bytes(draw, dtype: str, values: list) -> bytes:
    """One Feature, written in a random (valid or subtly odd) way."""
    style = draw(st.sampled_from(["packed"] * 6 + ["unpacked"] * 3 + [
        "two_runs", "mixed", "empty_feature", "bad_kind", "trailing", "long_length"]))
    if style == "empty_feature":
        return b""
    if style == "bad_kind":
        return ld(draw(st.sampled_from([4, 5, 15])), b"")
    if dtype == "string":
        body = b"".join(ld(1, v) for v in values)
        tag = 1
    else:
        tag = 2 if dtype == "float32" else 3
        enc = ((lambda v: np.float32(v).tobytes()) if dtype == "float32" else varint)
        unpacked_tag = varint(1 << 3 | (5 if dtype == "float32" else 0))
        half = len(values) // 2
        if style in ("unpacked", "mixed"):
            body = b"".join(unpacked_tag + enc(v) for v in values)
            if style == "mixed":
                body += ld(1, b"".join(enc(v) for v in values[:1]))
        elif style == "two_runs":
            body = (ld(1, b"".join(enc(v) for v in values[:half]))
                    + ld(1, b"".join(enc(v) for v in values[half:])))
        else:
            body = ld(1, b"".join(enc(v) for v in values)) if values else b""
    out = ld(tag, body)
    if style == "trailing":
        out += ld(draw(st.integers(1, 4)), b"\x01")
    if style == "long_length":                        # list length past the Feature's end
        out = varint(tag << 3 | 2) + varint(len(body) + draw(st.integers(1, 3))) + body
    return out


@st.composite
def configs(draw):
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=4, unique=True))
    features = {}
    for key in keys:
        dtype = draw(st.sampled_from(DTYPES))
        if draw(st.booleans()):
            features[key] = VarLenFeature(dtype)
        else:
            shape = draw(st.sampled_from([[], [1], [2], [0], [2, 2]]))
            default = None
            if draw(st.booleans()):
                default = values_of(draw, dtype, int(np.prod(shape, dtype=np.int64)))
                default = np.array(default, dtype=object if dtype == "string" else dtype)
                default = default.reshape(shape) if shape else default.reshape(-1)[0] if \
                    default.size else None
            features[key] = FixedLenFeature(shape, dtype, default)
    return features


@st.composite
def records_for(draw, features: dict) -> bytes:
    config = config_of(features)
    entries = []
    for _ in range(draw(st.integers(0, 5))):
        key = draw(st.sampled_from(list(features) + ["zz"]))
        want, count, _ = config.get(key, ("int64", None, None))
        dtype = draw(st.sampled_from([want] * 8 + DTYPES))
        n = count if count is not None and draw(st.integers(0, 3)) else draw(st.integers(0, 4))
        ser = feature_bytes(draw, dtype, values_of(draw, dtype, n))
        kb = key.encode()
        if draw(st.integers(0, 9)) == 0:
            entries.append(ld(1, ld(2, ser) + ld(1, kb)))
        else:
            entries.append(entry(kb, ser))
    cut = draw(st.integers(0, len(entries)))
    parts = [example(*entries[:cut])]
    if cut < len(entries) or draw(st.booleans()):
        parts.append(example(*entries[cut:]))
    for _ in range(draw(st.integers(0, 2))):
        junk = draw(st.sampled_from([varint(2 << 3) + varint(300), ld(7, b"xyz"),
                                     varint(3 << 3 | 1) + bytes(8), varint(4 << 3 | 5) + bytes(4)]))
        parts.insert(draw(st.integers(0, len(parts))), junk)
    return b"".join(parts)


@st.composite
def cases(draw):
    features = draw(configs())
    records = draw(st.lists(records_for(features), min_size=1, max_size=4))
    return features, records


@given(cases())
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow,
                                                   HealthCheck.data_too_large])
def test_kernel_matches_reference(case):
    features, records = case
    config = config_of(features)
    for rec in records:
        compare_single(rec, features, config)
    compare_batch(records, features, config)


def test_reference_parses_conformance_files():
    info = manifest()["files"]["examples.tfrecord"]
    config = config_of(feature_config(info["parse_example_all_records"]["features"]))
    bad, rows = ref_parse_batch(read_tfrecords("examples.tfrecord"), config)
    assert bad is None
    assert [r["id"] for r in rows] == [[10], [11], [12], [13], [14]]
    assert [r["opt"] for r in rows] == [[42], [-100], [-100], [-1], [-100]]


# ============================================================== fuzzing

def mutate(rng: random.Random, rec: bytes) -> bytes:
    b = bytearray(rec)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(6)
        pos = rng.randrange(len(b) + 1)
        if op == 0 and b:                                # flip bits
            b[min(pos, len(b) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1 and b:                              # random byte
            b[min(pos, len(b) - 1)] = rng.choice([0, 0x08, 0x0A, 0x12, 0x1A, 0x7F, 0x80, 0xFF,
                                                  rng.randrange(256)])
        elif op == 2:                                    # truncate
            del b[pos:]
        elif op == 3:                                    # insert
            b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 3)))
        elif op == 4:                                    # delete
            del b[pos:pos + rng.randint(1, 3)]
        else:                                            # duplicate a slice
            end = min(len(b), pos + rng.randint(1, 12))
            b[pos:pos] = b[pos:end]
    return bytes(b)


def fuzz(n: int, seed: int = 0) -> int:
    """Parse ``n`` mutated records (one at a time and in batches); only
    InvalidArgumentError may come out, and the kernel must agree with ``ref_parse``.
    Returns the number of mutants that parsed."""
    rng = random.Random(seed)
    base = read_tfrecords("examples.tfrecord") + read_tfrecords("examples_b.tfrecord")
    info = manifest()["files"]["examples.tfrecord"]
    configs_ = [feature_config(info["parse_example_all_records"]["features"]),
                {"id": FixedLenFeature([], "int64"), "vec": VarLenFeature("float32"),
                 "tokens": VarLenFeature("string")},
                {"vec": FixedLenFeature([3], "float32"), "label": VarLenFeature("string"),
                 "ids_var": VarLenFeature("int64")}]
    parsed = 0
    batch: list = []
    for i in range(n):
        features = configs_[i % len(configs_)]
        config = config_of(features)
        rec = mutate(rng, rng.choice(base))
        compare_single(rec, features, config)
        try:
            parse_example([rec], features)
            parsed += 1
        except nd.errors.InvalidArgumentError:
            pass
        batch.append(rec)
        if len(batch) == 64:
            compare_batch(batch, configs_[0], config_of(configs_[0]))
            batch = []
    return parsed


@pytest.mark.parametrize("bad_rate", [0.0, 0.001, 0.02])
def test_parallel_batches_match_reference(monkeypatch, bad_rate):
    import nbdata.primitives.example as module
    monkeypatch.setattr(module, "PARALLEL_MIN_ROWS", 64)
    monkeypatch.setattr(module, "_ROWS_PER_CHUNK", 16)
    rng = random.Random(int(bad_rate * 1000))
    base = read_tfrecords("examples.tfrecord") + read_tfrecords("examples_b.tfrecord")
    records = [mutate(rng, r) if rng.random() < bad_rate else r
               for r in (rng.choice(base) for _ in range(3000))]
    info = manifest()["files"]["examples.tfrecord"]
    for features in (feature_config(info["parse_example_all_records"]["features"]),
                     {"tokens": VarLenFeature("string"), "vec": FixedLenFeature([3], "float32"),
                      "ids_var": VarLenFeature("int64")}):
        compare_batch(records, features, config_of(features))
        column = StringColumn.from_values([b"pad"] + records)
        a = parse_example(column.slice(1, len(records) + 1), features) if bad_rate == 0 else None
        if a is not None:
            b = parse_example(records, features)
            for key in features:
                if isinstance(a[key], nd.SparseTensor):
                    assert a[key] == b[key]
                else:
                    assert np.array_equal(a[key], b[key])


def test_bad_string_column():
    column = StringColumn(np.frombuffer(b"abc", np.uint8), np.array([0, 5]))
    with pytest.raises(nd.errors.InvalidArgumentError, match="offsets"):
        parse_example(column, {"a": VarLenFeature("int64")})


def test_fuzz():
    parsed = fuzz(FUZZ_CASES)
    assert 0 < parsed < FUZZ_CASES


# ============================================================== against TensorFlow

def _tf_features(tf, features: dict) -> dict:
    def dt(d):
        return tf.string if d is nd.string else tf.as_dtype(np.dtype(d).name)
    return {k: (tf.io.VarLenFeature(dt(v.dtype)) if isinstance(v, VarLenFeature) else
                tf.io.FixedLenFeature(v.shape, dt(v.dtype), v.default_value))
            for k, v in features.items()}


def _tf_outcome(fn):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - TF's own Python sometimes fails on its message
        return e


@given(cases())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.data_too_large])
def test_matches_tensorflow(case):
    compare_with_tensorflow(pytest.importorskip("tensorflow"), *case)


def compare_with_tensorflow(tf, features: dict, records: list):
    """Parse ``records`` and a mutant of each with TF and with nbdata; same outcome."""
    tff = _tf_features(tf, features)
    config = config_of(features)
    records = records + [mutate(random.Random(rec), rec) for rec in records]
    TF_UNSAFE.clear()
    for rec in records:
        for single in (True, False):
            try:
                ref_parse(rec, config, single)
            except RefError:
                pass
    if TF_UNSAFE:
        return
    for rec in records:
        want = _tf_outcome(lambda: tf.io.parse_single_example(tf.constant(rec), tff))
        try:
            got = parse_single_example(rec, features)
        except nd.errors.InvalidArgumentError as e:
            assert isinstance(want, Exception), (rec, str(e))
            if isinstance(want, tf.errors.InvalidArgumentError):
                assert error_code(str(e)) == error_code(want.message), (str(e), want.message)
            continue
        assert not isinstance(want, Exception), (rec, want)
        for key, (dtype, _, _) in config.items():
            w = want[key].values if isinstance(want[key], tf.SparseTensor) else want[key]
            assert flat_values(got[key], dtype) == flat_values(w.numpy(), dtype), (rec, key)
    want = _tf_outcome(lambda: tf.io.parse_example(tf.constant(records), tff))
    try:
        got = parse_example(records, features)
    except nd.errors.InvalidArgumentError as e:
        assert isinstance(want, Exception), (records, str(e))
        if isinstance(want, tf.errors.InvalidArgumentError):
            assert error_code(str(e)) == error_code(want.message), (str(e), want.message)
        return
    assert not isinstance(want, Exception), (records, want)
    for key, (dtype, _, _) in config.items():
        if isinstance(want[key], tf.SparseTensor):
            assert got[key].indices.tolist() == want[key].indices.numpy().tolist()
            assert got[key].dense_shape.tolist() == want[key].dense_shape.numpy().tolist()
            assert flat_values(got[key], dtype) == flat_values(want[key].values.numpy(), dtype)
        else:
            assert got[key].shape == tuple(want[key].shape)
            assert flat_values(got[key], dtype) == flat_values(want[key].numpy(), dtype)


if __name__ == "__main__":
    cases_ = int(sys.argv[1]) if len(sys.argv) > 1 else FUZZ_CASES
    print(f"{fuzz(cases_)} of {cases_} mutated records parsed; every other one raised "
          "InvalidArgumentError, all as the reference parser says")


@pytest.mark.parametrize("first, second", [(-0.0, 0.0), (0.0, -0.0)])
def test_defaults_equal_as_numbers_but_not_as_bits_get_their_own_plans(first, second):
    """Plans are cached by feature config: 0.0 == -0.0, yet each default comes back with
    its own sign bit (a cache keyed by == handed the second config the first's default)."""
    for default in (first, second):
        features = {"b": FixedLenFeature([2], np.float32, default_value=[default, 1.0])}
        for got in (parse_single_example(b"", features)["b"],
                    parse_example([b""], features)["b"][0]):
            assert np.asarray(got).tobytes() == np.array([default, 1.0], np.float32).tobytes()
