"""decode_csv against the values TensorFlow decoded (tests/data/MANIFEST.json) and against
TensorFlow's behaviour on edge cases (checked with TF 2.21), on one record, on batches,
inside pipelines (lifted into the record kernel or not), and against a slow reference."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nbdata as nd
from nbdata.primitives.csv import decode_csv

DATA = Path(__file__).resolve().parent.parent / "data"
MANIFEST = json.loads((DATA / "MANIFEST.json").read_text())["files"]


def _defaults(spec):
    out = []
    for d in spec:
        dtype = nd.string if d["dtype"] == "string" else np.dtype(d["dtype"])
        if d["default"] is None:
            out.append(np.array([], dtype=object if dtype is nd.string else dtype))
        elif dtype is nd.string:
            out.append([d["default"]])
        else:
            out.append(np.array([d["default"]], dtype))
    return out


def _value(v):
    if v["dtype"] == "string":
        return v["value"].encode("latin-1")
    return np.asarray(v["value"], np.dtype(v["dtype"]))


SCENARIOS = [(name, k) for name, e in MANIFEST.items() if e["kind"] == "csv"
             for k in range(len(e["decode_csv"]))]


@pytest.mark.parametrize("name, k", SCENARIOS)
@pytest.mark.parametrize("how", ["per line", "pipeline map", "pipeline batch"])
def test_manifest_scenarios(name, k, how):
    entry = MANIFEST[name]
    case = entry["decode_csv"][k]
    lines = [s.encode("latin-1") for s in entry["lines_latin1"]]
    kwargs = {key: case[key] for key in ("field_delim", "na_value", "select_cols") if key in case}
    defaults = _defaults(case["record_defaults"])
    if how == "per line":
        for line, want in zip(lines, case["per_line"]):
            if isinstance(want, dict):
                with pytest.raises(nd.errors.InvalidArgumentError) as e:
                    decode_csv(line, defaults, **kwargs)
                assert want["message"] in str(e.value)
                continue
            got = decode_csv(line, defaults, **kwargs)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                w = _value(w)
                if isinstance(w, bytes):
                    assert g == w
                else:
                    assert np.asarray(g).dtype == w.dtype and np.asarray(g) == w
        return
    ds = nd.Dataset.from_tensor_slices(np.array(lines, dtype=object))
    if how == "pipeline map":
        ds = ds.map(lambda line: decode_csv(line, defaults, **kwargs)).ignore_errors()
        got = [tuple(e) for e in ds]
        want = [tuple(_value(v) for v in w) for w in case["per_line"] if not isinstance(w, dict)]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            for a, b in zip(g, w):
                assert (a == b) if isinstance(b, bytes) else (np.asarray(a).dtype == b.dtype and a == b)
    else:
        good = [line for line, w in zip(lines, case["per_line"]) if not isinstance(w, dict)]
        want = [w for w in case["per_line"] if not isinstance(w, dict)]
        ds = nd.Dataset.from_tensor_slices(np.array(good, dtype=object)).batch(2).map(
            lambda b: decode_csv(b, defaults, **kwargs))
        rows = []
        for batch in ds:
            rows += list(zip(*[list(c) for c in batch]))
        assert len(rows) == len(want)
        for g, w in zip(rows, want):
            assert [bytes(x) if isinstance(x, bytes) else x.item() for x in g] == \
                   [_value(v) if v["dtype"] == "string" else _value(v).item() for v in w]


# Checked against tf.io.decode_csv in TensorFlow 2.21 (typed defaults as TF infers them).
I32, I64, F32, F64 = (np.array([0], np.int32), np.array([0], np.int64),
                      np.array([0], np.float32), np.array([0], np.float64))


@pytest.mark.parametrize("record, defaults, kwargs, want", [
    (" 1 , 2 ", [I32, F32], {}, [1, 2.0]),
    ("1e3", [F32], {}, [1000.0]),
    ("+5", [I32], {}, [5]),
    ("0012", [I32], {}, [12]),
    ("-9223372036854775808", [I64], {}, [-9223372036854775808]),
    ('"a,b",c', [[""], [""]], {}, [b"a,b", b"c"]),
    ('"a""b"', [[""]], {}, [b'a"b']),
    ('"a""b"', [[""]], {"use_quote_delim": False}, [b'"a""b"']),
    ('a"b', [[""]], {"use_quote_delim": False}, [b'a"b']),
    (",", [np.array([1], np.int32), np.array([2], np.int32)], {}, [1, 2]),
    ("a,", [[""], ["z"]], {}, [b"a", b"z"]),
    ('""', [["d"]], {}, [b"d"]),
    ('"a\rb"', [[""]], {}, [b"a\rb"]),
    ("a,b,c", [[""], [""]], {"select_cols": [0, 2]}, [b"a", b"c"]),
    ("a,b,c,d", [[""], [""]], {"select_cols": [0, 2]}, [b"a", b"c"]),
    ("NA,1", [np.array([5], np.int32), I32], {"na_value": "NA"}, [5, 1]),
    ('"NA"', [["q"]], {"na_value": "NA"}, [b"q"]),
    ("1;2", [I32, I32], {"field_delim": ";"}, [1, 2]),
    (".5,5.", [F32, F32], {}, [0.5, 5.0]),
    ("1e400", [F64], {}, [np.inf]),
    ("3.4028236e38", [F32], {}, [np.inf]),
    ("1e-50", [F32], {}, [0.0]),
    ("0x1p3", [F64], {}, [8.0]),
    ("inFinity", [F64], {}, [np.inf]),
    ("4.9e-324", [F64], {}, [5e-324]),
    ('"7"', [I64], {}, [7]),
    ("\t7", [I64], {}, [7]),
    ("0.1", [F64], {}, [0.1]),
])
def test_tensorflow_edge_cases(record, defaults, kwargs, want):
    got = decode_csv(record, defaults, **kwargs)
    assert len(got) == len(want)
    for g, w, d in zip(got, want, defaults):
        if isinstance(w, bytes):
            assert g == w
        else:
            dtype = np.asarray(d).dtype
            assert np.asarray(g).dtype == dtype
            assert np.asarray(g) == np.asarray(w, dtype)


@pytest.mark.parametrize("record, defaults, kwargs, message", [
    ("1.5", [I32], {}, "Field 0 in record 0 is not a valid int32: 1.5"),
    ("0x10", [I32], {}, "not a valid int32: 0x10"),
    ("2147483648", [I32], {}, "not a valid int32: 2147483648"),
    ("9223372036854775808", [I64], {}, "not a valid int64: 9223372036854775808"),
    ("1_000", [I32], {}, "not a valid int32: 1_000"),
    ("1.5f", [F32], {}, "Field 0 in record 0 is not a valid float: 1.5f"),
    ("1e", [F64], {}, "not a valid double: 1e"),
    (".", [F64], {}, "not a valid double: ."),
    ("- 1", [I32], {}, "not a valid int32: - 1"),
    ("a\"b,c", [[""], [""]], {}, "Unquoted fields cannot have quotes/CRLFs inside"),
    ('"a"b,c', [[""], [""]], {}, "Quote inside a string has to be escaped by another quote"),
    ('"ab', [[""]], {}, "Quoted field has to end with quote followed by delim or end"),
    ("a\rb", [[""]], {}, "Unquoted fields cannot have quotes/CRLFs inside"),
    ("", [I32], {}, "Expect 1 fields but have 0 in record 0"),
    ("a,b", [[""], [""]], {"select_cols": [0, 2]}, "Expect 2 fields but have 1 in record 0"),
    ('x,"a,b"', [[""], [""]], {"use_quote_delim": False}, "Expect 2 fields but have 3 in record 0"),
    (",", [np.array([], np.int32), I32], {}, "Field 0 is required but missing in record 0!"),
    ("1,2", [I32, I32], {"field_delim": "ab"}, "field_delim should be only 1 char"),
    ("a,b", [[""], [""]], {"select_cols": [1, 0]}, "select_cols is not strictly increasing"),
    ("1,2,3", [[""], [""]], {"select_cols": [0]}, "Length of select_cols and record_defaults"),
])
def test_tensorflow_errors(record, defaults, kwargs, message):
    with pytest.raises(nd.errors.InvalidArgumentError) as e:
        decode_csv(record, defaults, **kwargs)
    assert message in str(e.value)


def test_batch_error_names_the_record():
    with pytest.raises(nd.errors.InvalidArgumentError, match="Field 1 in record 1 is not a valid int32: x"):
        decode_csv(["1,2", "3,x"], [I32, I32])


def test_shapes_and_python_defaults():
    cols = decode_csv(np.array([[b"1,2.5"], [b"3,4"]], dtype=object), [[0], [0.0]])
    assert cols[0].shape == (2, 1) and cols[0].dtype == np.int64
    assert cols[1].dtype == np.float64 and cols[1].ravel().tolist() == [2.5, 4.0]
    required = decode_csv("1,x", [np.int32, nd.string])
    assert required[0].dtype == np.int32 and required[1] == b"x"


# ---------------------------------------------------------------- reference

def _reference(line: bytes, kinds):
    """A slow split + parse for simple unquoted numeric rows."""
    parts = line.split(b",")
    out = []
    for p, kind in zip(parts, kinds):
        out.append(int(p) if kind == "i" else float(p))
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-2**62, 2**62), st.floats(allow_nan=False, allow_infinity=False,
                                                                  width=64),
                          st.integers(0, 10**6), st.integers(-30, 30)), min_size=1, max_size=40))
def test_random_rows_match_python(rows):
    lines = [f"{a},{b!r},{c}e{e}".encode() for a, b, c, e in rows]
    cols = decode_csv(lines, [I64, F64, F64])
    for j, line in enumerate(lines):
        want = _reference(line, "iff")
        assert cols[0][j] == want[0]
        assert cols[1][j] == want[1]
        assert cols[2][j] == want[2]


def test_large_batch_uses_parallel_kernel_and_reports_lowest_bad_row():
    lines = [b"%d,%d.5" % (i, i) for i in range(20000)]
    cols = decode_csv(lines, [I64, F32])
    assert cols[0][-1] == 19999 and cols[1][123] == np.float32(123.5)
    lines[15000] = b"x,1"
    lines[17000] = b"y,1"
    with pytest.raises(nd.errors.InvalidArgumentError, match="record 15000 is not a valid int64: x"):
        decode_csv(lines, [I64, F32])


def test_text_file_pipeline_is_lifted(tmp_path):
    path = tmp_path / "x.csv"
    path.write_bytes(b"".join(b"%d,%d.25,abc\n" % (i, i) for i in range(5000)))
    ds = nd.TextLineDataset(str(path)).batch(256).map(lambda b: decode_csv(b, [I64, F64, [""]]))
    text = ds.compile().explain()
    assert "decode_csv(3 columns) kernel over columns of records" in text
    batches = list(ds)
    assert batches[0][0].shape == (256,) and batches[-1][0][-1] == 4999
    assert batches[3][1][2] == 3 * 256 + 2 + 0.25
    options = nd.Options()
    options.fusion = False
    ref = list(ds.with_options(options))
    assert all(np.array_equal(a, b) for x, y in zip(batches, ref) for a, b in zip(x, y))


def _nearest_float32(text: str) -> np.float32:
    """The float32 nearest the decimal ``text``, ties to even (exact arithmetic)."""
    from fractions import Fraction
    exact = Fraction(text)
    f = np.float32(float(text))
    candidates = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    return min(candidates, key=lambda c: (abs(Fraction(float(c)) - exact),
                                          int(c.view(np.uint32)) % 2))


def test_float32_columns_round_the_decimal_once():
    """Long mantissas, the float64 fast path and exact float32 midpoints all give the
    float32 nearest the decimal (TensorFlow parses straight to float32)."""
    from decimal import Decimal
    rng = np.random.default_rng(11)
    texts = [f"{m}e{e}" for m, e in zip(rng.integers(1, 10**15, 300).tolist(),
                                         rng.integers(-20, 20, 300).tolist())]
    texts += [repr(x) for x in np.round(rng.normal(0, 100, 300), 6).tolist()]
    f = np.float32(rng.random(200)).astype(np.float64)
    ulp = np.spacing(f.astype(np.float32)).astype(np.float64)
    ties = [str(Decimal(a) + Decimal(u) / 2) for a, u in zip(f.tolist(), ulp.tolist())]
    texts += ties + [t + "1" for t in ties[:50]]        # just above a midpoint
    got = decode_csv(np.array([t.encode() for t in texts], dtype=object), [np.float32(0)])[0]
    want = np.array([_nearest_float32(t) for t in texts], np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_writable_and_read_only_bytes_share_one_compiled_decoder(tmp_path):
    """Lines in memory (writable arrays) and lines read from a file reach the CSV kernel
    as read-only arrays: one compiled decoder (2-3 s a signature on a cold cache), not one
    for each."""
    from nbdata.kernels import csv as k, tiers
    path = tmp_path / "rows.csv"
    path.write_bytes(b"1,2.5\n3,4.5\n")
    got = [decode_csv([b"1,2.5", b"3,4.5"], [[0], [0.0]]),
           decode_csv(np.array([b"1,2.5", b"3,4.5"]), [[0], [0.0]]),
           next(iter(nd.TextLineDataset(str(path)).batch(2).map(
               lambda line: nd.io.decode_csv(line, [[0], [0.0]]))))]
    for ints, floats in got:
        assert ints.tolist() == [1, 3] and floats.tolist() == [2.5, 4.5]
    tiers.finish_compiles()   # (a first call may run tier 0 while the twin compiles)
    sigs = k.decode_rows_parallel.serial.signatures + k.decode_rows_parallel.parallel.signatures
    assert sigs and not any(sig[0].mutable or sig[1].mutable for sig in sigs), sigs
