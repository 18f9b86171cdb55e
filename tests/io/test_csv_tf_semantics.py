"""CsvDataset's record split and column rules as tf.data's CsvDataset (values checked
against TensorFlow 2.21): records end at \\n, \\r or \\r\\n outside quoted fields,
quoted fields keep raw line breaks, a file ending inside a quoted field and
exclude_cols with too few record defaults are errors."""

import numpy as np
import pytest

import nbdata as nd
from nbdata.errors import InvalidArgumentError


def _rows(tmp_path, content: bytes, defaults, **kw):
    path = tmp_path / "a.csv"
    path.write_bytes(content)
    return [tuple(v) for v in nd.experimental.CsvDataset(str(path), defaults, **kw)]


@pytest.mark.parametrize("linebreak", [b"\n", b"\r", b"\r\n"])
@pytest.mark.parametrize("buffer_size", [None, 1, 3])
def test_quoted_line_breaks_and_record_ends(tmp_path, linebreak, buffer_size):
    content = linebreak.join([b'"\n\n\n","\r\r\r","abc"', b'"0","1","2"', b'"","",""'])
    assert _rows(tmp_path, content, [["NA"]] * 3, buffer_size=buffer_size) == [
        (b"\n\n\n", b"\r\r\r", b"abc"), (b"0", b"1", b"2"), (b"NA", b"NA", b"NA")]


@pytest.mark.parametrize("content,expected", [
    (b'"a\r\nx",b\r\nc,d\r\n', [(b"a\r\nx", b"b"), (b"c", b"d")]),
    (b"a,b\rc,d\r", [(b"a", b"b"), (b"c", b"d")]),
    (b"a,b\r\n", [(b"a", b"b")]),
])
def test_record_ends(tmp_path, content, expected):
    assert _rows(tmp_path, content, [["N"]] * 2) == expected


def test_cr_alone_is_an_empty_record(tmp_path):
    # \r\n is one record end; a \r after it starts an empty record (the default)
    assert _rows(tmp_path, b"x\r\n\ry\r", [["N"]]) == [(b"x",), (b"N",), (b"y",)]
    with pytest.raises(InvalidArgumentError, match="Expect 2 fields but have 1 in record"):
        _rows(tmp_path, b"a,b\r\rc,d", [["N"]] * 2)
    with pytest.raises(InvalidArgumentError, match="Expect 2 fields but have 1 in record"):
        _rows(tmp_path, b"a\rb,c\nd,e", [["N"]] * 2)


def test_file_ending_inside_quoted_field(tmp_path):
    with pytest.raises(InvalidArgumentError,
                       match="^Reached end of file without closing quoted field in record$"):
        _rows(tmp_path, b'a,b,c,"a', [[""]] * 4)


def test_exclude_cols_with_too_few_defaults(tmp_path):
    with pytest.raises(InvalidArgumentError, match="Expect 1 fields but have more in record"):
        _rows(tmp_path, b"1,2,3\n5,6,7", [[""]], exclude_cols=[0])
    with pytest.raises(InvalidArgumentError, match="Expect 1 fields but have more in record"):
        _rows(tmp_path, b"1,2\n5,6", [[""]], exclude_cols=[5])
    # fields after the kept ones are fine when they are all excluded
    assert _rows(tmp_path, b"1,2,3\n5,6", [[""]] * 2, exclude_cols=[2]) == [
        (b"1", b"2"), (b"5", b"6")]
    with pytest.raises(InvalidArgumentError, match="Expect 3 fields but have 2 in record"):
        _rows(tmp_path, b"1,2,3", [[""]] * 3, exclude_cols=[0])


def test_exclude_cols_batched_decode_agrees(tmp_path):
    # the per-record decode and a map after batch (whole-column decode) agree
    path = tmp_path / "a.csv"
    path.write_bytes(b"1,x,2\n3,y,4\n")
    ds = nd.experimental.CsvDataset(str(path), [np.int32(0), np.int32(0)], exclude_cols=[1])
    assert [(int(a), int(b)) for a, b in ds] == [(1, 2), (3, 4)]
    a, b = next(iter(ds.batch(2)))
    assert a.tolist() == [1, 3] and b.tolist() == [2, 4] and a.dtype == np.int32


def test_buffer_size_must_be_positive(tmp_path):
    with pytest.raises(InvalidArgumentError, match="buffer_size should be positive"):
        _rows(tmp_path, b"a,b", [[""]] * 2, buffer_size=0)
