"""decode_csv's one-pass row parser (``nbdata.kernels.csv._fast_row``) against the
general two-pass one on the same records: every value bit for bit (``-0.0``, float32
rounding, int32 limits) and every error, for rows it takes and rows it leaves."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbdata as nd
import nbdata.kernels.csv as kernels
from nbdata.errors import InvalidArgumentError
import nbdata.primitives.csv as csv_primitives
from nbdata.primitives.csv import CsvConfig

INTS = st.one_of(
    st.integers(-2**63, 2**63 - 1).map(str),
    st.integers(-2**31 - 2, 2**31 + 2).map(str),
    st.integers(0, 10**6).map(lambda i: "+%d" % i),
    st.integers(0, 999).map(lambda i: "000%d" % i),
    st.sampled_from(["-2147483649", "-2147483648", "2147483647", "2147483648", "-0", "+0",
                     "9223372036854775807", "-9223372036854775808", "9223372036854775808",
                     "-9223372036854775809", "99999999999999999999", "0000000000000000000001"]),
)
FLOATS = st.one_of(
    INTS,
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(repr),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.tuples(st.integers(-10**9, 10**9), st.integers(0, 10**8)).map(lambda t: "%d.%d" % t),
    st.integers(0, 10**25).map(lambda i: "0.%025d" % i),
    st.integers(0, 10**30).map(str),
    st.sampled_from(["-0.0", "0.", ".5", "-.25", "5.", "1.0000000000000000000001", "0.05",
                     "-0.000125", "16777217", "0.1", "3.4028235e38", "1e-46",
                     "340282356779733661637539395458142568448", "4.9406564584124654e-324"]),
)
ODD = st.sampled_from(["", " 1", "1 ", "1e5", "2E-3", '"3"', '"4', "+", "-", ".", "1.2.3",
                       "0x10", "nan", "inf", "-inf", "1_0", "12a", "--1", "+-1", "\t7",
                       '""', '"1,5"', "NA", "1.5"])
# NBDATA_HYPOTHESIS_EXAMPLES=2000 runs more (150 here: about 3 s).
EXAMPLES = max(150, int(os.environ.get("NBDATA_HYPOTHESIS_EXAMPLES", "150")))
KIND = st.sampled_from([np.int32, np.int64, np.float32, np.float64])


class _SerialTwin:
    """The one-pass kernel run by its serial twin (the same code, ``prange`` a ``range``)
    from the first call: the parallel kernel takes over only after a second of work
    (nbdata/kernels/tiers.py), and compiling it would cost the suite seconds."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.calls = 0

    def call_or(self, args, run_serial, compiled_by, counts=True):
        self.calls += 1
        return self.kernel.serial(*args)


def _decode(lines, defaults, fast: bool, monkeypatch, **kw):
    with monkeypatch.context() as m:
        m.setattr(csv_primitives, "_configs", {})   # configs made for the other way
        if fast:
            m.setattr(kernels, "decode_plain_rows_parallel",
                      _SerialTwin(kernels.decode_plain_rows_parallel))
        else:
            m.setattr(kernels, "fast_rows_apply", lambda *a: False)
        try:
            cols = nd.io.decode_csv(lines, defaults, **kw)
        except InvalidArgumentError as e:
            return ("error", str(e))
    return [np.asarray(c).view(np.uint8).tobytes() if np.asarray(c).dtype != object
            else list(c) for c in cols]


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.data())
def test_one_pass_rows_match_the_general_parser(data):
    kinds = data.draw(st.lists(KIND, min_size=1, max_size=5))
    required = data.draw(st.lists(st.booleans(), min_size=len(kinds), max_size=len(kinds)))
    defaults = [[] if req else [np.dtype(t).type(7)] for t, req in zip(kinds, required)]
    rows = []
    for _ in range(data.draw(st.integers(1, 30))):
        row = [data.draw(st.one_of(*[INTS if np.dtype(t).kind == "i" else FLOATS] * 8, ODD))
               for t in kinds]
        extra = data.draw(st.sampled_from([0] * 8 + [-1, 1]))   # mostly the right count
        rows.append(row[:-1] if extra < 0 else row + ["1"] * extra)
    lines = [",".join(r).encode() for r in rows]
    mp = pytest.MonkeyPatch()
    try:
        assert _decode(lines, defaults, True, mp) == _decode(lines, defaults, False, mp)
        for line in lines:   # each alone too: an error in one row hides the rows after it
            assert _decode([line], defaults, True, mp) == _decode([line], defaults, False, mp)
    finally:
        mp.undo()


def test_plain_rows_take_the_one_pass_kernel(monkeypatch):
    lines = [b"%d,%d.%06d,-%d.5,%d" % (i, i, i * 7 % 10**6, i, -i) for i in range(5000)]
    assert CsvConfig([np.int64, np.float32, np.float64, np.int32]).fast
    twin = _SerialTwin(kernels.decode_plain_rows_parallel)
    monkeypatch.setattr(kernels, "decode_plain_rows_parallel", twin)
    monkeypatch.setattr(csv_primitives, "_configs", {})
    cols = nd.io.decode_csv(lines, [np.int64, np.float32, np.float64, np.int32])
    assert twin.calls == 1
    assert cols[0].tolist() == list(range(5000))
    assert cols[1][123] == np.float32("123.%06d" % (123 * 7 % 10**6))
    assert cols[2][9] == -9.5 and cols[3][4999] == -4999


@pytest.mark.parametrize("kw,fast", [
    ({}, True),
    ({"na_value": "0"}, False),            # a field "0" is then a default
    ({"select_cols": [0, 1]}, False),
    ({"field_delim": "."}, False),
    ({"field_delim": "-"}, False),
    ({"field_delim": "\t"}, False),
    ({"field_delim": ";"}, True),
])
def test_where_the_one_pass_parser_applies(kw, fast):
    config = CsvConfig([np.int64, np.float32], **kw)
    assert config.fast is fast
    strings = CsvConfig([np.int64, b""])
    assert not strings.fast


def test_na_value_zero_is_a_default_not_a_number():
    cols = nd.io.decode_csv([b"0,1", b"2,0"], [[-1], [-2.0]], na_value="0")
    assert cols[0].tolist() == [-1, 2] and cols[1].tolist() == [1.0, -2.0]


@pytest.mark.parametrize("line,message", [
    (b"1,2,3", "Expect 2 fields but have 3 in record 1"),
    (b"1", "Expect 2 fields but have 1 in record 1"),
    (b"2147483648,1", "is not a valid int32: 2147483648"),
    (b"1,1.5x", "is not a valid float: 1.5x"),
    (b'1,2"', "Unquoted fields cannot have quotes/CRLFs inside"),
])
def test_rows_it_leaves_give_the_general_errors(line, message):
    with pytest.raises(InvalidArgumentError, match=message):
        nd.io.decode_csv([b"5,6.25", line], [np.int32, np.float32])


def test_int32_limits_and_signed_zero():
    cols = nd.io.decode_csv([b"-2147483648,-0.0", b"2147483647,0.0", b"+12,-0"],
                            [np.int32, np.float64])
    assert cols[0].tolist() == [-2**31, 2**31 - 1, 12]
    assert [np.signbit(v) for v in cols[1]] == [True, False, True]
