"""CsvDataset record_defaults: dtype objects that name a NumPy dtype (as tf.int32 does)
are required columns of that dtype; defaults of rank 2 are refused; make_csv_dataset
names an unsupported compression for probing."""
import numpy as np
import pytest

import nbdata as nd
from nbdata.errors import InvalidArgumentError
from nbdata.io.csv_dataset import CsvDataset


class _DType:
    """A dtype object like tf.float32: it carries its NumPy dtype as ``.dtype``."""

    def __init__(self, d):
        self.dtype = np.dtype(d)


def test_dtype_objects_are_required_columns(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("1.0,2\n3.5,4\n")
    rows = [(a, b) for a, b in CsvDataset(str(path), [_DType(np.float32), _DType(np.int32)])]
    assert [(float(a), int(b)) for a, b in rows] == [(1.0, 2), (3.5, 4)]
    assert rows[0][0].dtype == np.float32 and rows[0][1].dtype == np.int32
    path.write_text("1.0,\n")
    with pytest.raises(InvalidArgumentError, match="required"):
        list(CsvDataset(str(path), [_DType(np.float32), _DType(np.int32)]))


def test_rank_2_defaults_are_refused(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("1,2\n")
    with pytest.raises(InvalidArgumentError, match="at most rank 1"):
        list(CsvDataset(str(path), [np.array([[0]], np.int64)] * 2))


def test_unsupported_probe_compression(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="`compression_type` ZLIB is not supported"):
        nd.experimental.make_csv_dataset(str(path), 1, compression_type="ZLIB")


def test_record_errors_in_csv_dataset_wording(tmp_path):
    path = tmp_path / "e.csv"
    cases = [("0,1,2,3", [[0.0]] * 2, "Expect 2 fields but have more in record"),
             ("1,2", [[0.0]] * 3, "Expect 3 fields but have 2 in record"),
             ("1,", [[0], []], r"Field 1 is required but missing in record!"),
             ('1,2"3,4', [[""]] * 3, "Unquoted fields cannot have quotes inside")]
    for text, defaults, message in cases:
        path.write_text(text)
        with pytest.raises(InvalidArgumentError, match=message):
            list(CsvDataset(str(path), defaults))
    # decode_csv keeps its own wording (it names the record)
    with pytest.raises(InvalidArgumentError, match="Expect 2 fields but have 4 in record 0"):
        nd.io.decode_csv("0,1,2,3", [[0.0]] * 2)


def test_a_quote_inside_an_unquoted_field_opens_nothing(tmp_path):
    # each bad line is its own record (an error); the good one after them is read
    path = tmp_path / "q.csv"
    path.write_text('1,2"3,4\na,b,c"d\n9,8"7,6,5\ne,f,g')
    ds = CsvDataset(str(path), [[""]] * 3).ignore_errors()
    assert [tuple(bytes(v) for v in e) for e in ds] == [(b"e", b"f", b"g")]
    # a quote at a field's start still spans lines, with ";" as the delimiter too
    path.write_text('1;"a\nb";2\n3;x;4')
    rows = [tuple(bytes(v) for v in e) for e in CsvDataset(str(path), [[""]] * 3,
                                                            field_delim=";")]
    assert rows == [(b"1", b"a\nb", b"2"), (b"3", b"x", b"4")]
