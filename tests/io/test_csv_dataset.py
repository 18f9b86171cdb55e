"""nd.experimental.CsvDataset and make_csv_dataset: tf.data's record rules, errors and
type inference (recorded values)."""

import gzip
import os

import numpy as np
import pytest

import nbdata as nd


def files(tmp_path, inputs, linebreak="\n", gz=False):
    out = []
    for i, rows in enumerate(inputs):
        path = str(tmp_path / f"f{i}.csv")
        data = linebreak.join(rows).encode()
        if gz:
            with gzip.open(path, "wb") as f:
                f.write(data)
        else:
            open(path, "wb").write(data)
        out.append(path)
    return out


def read(tmp_path, inputs, linebreak="\n", gz=False, **kw):
    ds = nd.experimental.CsvDataset(files(tmp_path, inputs, linebreak, gz), **kw)
    return [tuple(v if isinstance(v, bytes) else v.item() for v in e) for e in ds]


def test_values_dtypes_and_spec(tmp_path):
    defaults = [np.array([], np.int32), np.array([], np.float32), np.array([], object), [0.0]]
    ds = nd.experimental.CsvDataset(files(tmp_path, [["1,2.1,3.2,4.3", "5,6.5,7.6,8.7"]]),
                                    defaults)
    assert [s.dtype for s in ds.element_spec] == [np.int32, np.float32, nd.string, np.float64]
    out = list(ds)
    assert out[1][2] == b"7.6" and out[0][0].dtype == np.int32


def test_empty_fields_defaults_and_types(tmp_path):
    assert read(tmp_path, [[",,,", "1,1,1,", ",2,2,2"]], record_defaults=[[0]] * 4) == \
        [(0, 0, 0, 0), (1, 1, 1, 0), (0, 2, 2, 2)]
    assert read(tmp_path, [["1.0,2.0", "3.0,4.0"]], record_defaults=[np.float32, [0.0]]) == \
        [(1.0, 2.0), (3.0, 4.0)]
    assert read(tmp_path, [["0, 1, 2, 3"]], record_defaults=[[0.0]] * 4) == [(0.0, 1.0, 2.0, 3.0)]
    assert read(tmp_path, [["1,NA,3,4"]], record_defaults=[[0]] * 4, na_value="NA") == [(1, 0, 3, 4)]
    assert read(tmp_path, [["1:2"]], record_defaults=[[0]] * 2, field_delim=":") == [(1, 2)]


def test_quotes_and_newlines(tmp_path):
    assert read(tmp_path, [['a,b,"""c""\n0","d\ne"', "f,g,h,i"]], record_defaults=[[""]] * 4) == \
        [(b"a", b"b", b'"c"\n0', b"d\ne"), (b"f", b"g", b"h", b"i")]
    assert read(tmp_path, [['1,"2\n3",4', "5,6,7"]], record_defaults=[[""]], select_cols=[0]) == \
        [(b"1",), (b"5",)]
    assert read(tmp_path, [['1,2,"3,4"']], record_defaults=[[""]] * 4, use_quote_delim=False) == \
        [(b"1", b"2", b'"3', b'4"')]
    assert read(tmp_path, [['"0"', '"1"']], record_defaults=[[""]]) == [(b"0",), (b"1",)]


def test_header_files_and_line_breaks(tmp_path):
    assert read(tmp_path, [["col1,col2", "1,2"], ["c1,c2", "3,4"]], record_defaults=[[0]] * 2,
                header=True) == [(1, 2), (3, 4)]
    assert read(tmp_path, [["col1,col2"]], record_defaults=[[0]] * 2, header=True) == []
    assert read(tmp_path, [["1,2", "3,4"]], "\r\n", record_defaults=[[0]] * 2) == [(1, 2), (3, 4)]
    assert read(tmp_path, [["1,2", "3,4"]], gz=True, compression_type="GZIP",
                record_defaults=[[0]] * 2) == [(1, 2), (3, 4)]
    assert read(tmp_path, [[""]], record_defaults=[[""]] * 2) == []
    assert read(tmp_path, [["0", "", "2"]], record_defaults=[["NA"]]) == [(b"0",), (b"NA",), (b"2",)]


def test_select_and_exclude(tmp_path):
    assert read(tmp_path, [["1,2,3,4", '"5","6","7","8"']], record_defaults=[[""]] * 2,
                select_cols=[1, 2]) == [(b"2", b"3"), (b"6", b"7")]
    assert read(tmp_path, [["1,2,3", "5,6,7"]], record_defaults=[[""]], exclude_cols=[1, 2]) == \
        [(b"1",), (b"5",)]
    with pytest.raises(nd.errors.InvalidArgumentError, match="Either select_cols or exclude_cols"):
        read(tmp_path, [["1,2,3"]], record_defaults=[[""]], select_cols=[0], exclude_cols=[1])


@pytest.mark.parametrize("rows, kw, message", [
    (['1,2"3,4'], dict(record_defaults=[[""]] * 3), "Unquoted fields cannot have quotes"),
    (['"a"b","c","d"'], dict(record_defaults=[[""]] * 3), "Quote inside a string has to be escaped"),
    (["1,2,3,4"], dict(record_defaults=[[0]] * 2, select_cols=[3, 4]), "Expect 2 fields but have 1"),
    (["0,"], dict(record_defaults=[[]] * 2), "Field 1 is required but missing in record"),
    (["0,1,2,3"], dict(record_defaults=[[0.0]] * 5), "Expect 5 fields but have 4 in record"),
    (["", "1,2"], dict(record_defaults=[[""]] * 2), "Expect 2 fields but have 1 in record"),
])
def test_errors(tmp_path, rows, kw, message):
    with pytest.raises(nd.errors.InvalidArgumentError, match=message):
        read(tmp_path, [rows], **kw)


def test_missing_header(tmp_path):
    with pytest.raises(nd.errors.InvalidArgumentError, match="Can't read header of file"):
        read(tmp_path, [[]], record_defaults=[[0]] * 2, header=True)


def test_ignore_errors_skips_bad_records(tmp_path):
    paths = files(tmp_path, [["1,2\"3,4", "a,b,c\"d", "e,f,g"]])
    ds = nd.experimental.CsvDataset(paths, [[""]] * 3).ignore_errors()
    assert (b"e", b"f", b"g") in [tuple(e) for e in ds]


def test_checkpoint(tmp_path):
    # (files end with a newline: restoring at the end of a file without one is refused
    # by file_records' state check, a separate matter)
    paths = files(tmp_path, [["h", "1", '"2\n2"', "3", ""], ["h", "4", "5", ""]])

    def make():
        return nd.experimental.CsvDataset(paths, [[""]], header=True)
    full = [e[0] for e in make()]
    assert full == [b"1", b"2\n2", b"3", b"4", b"5"]
    for k in range(len(full) + 1):
        it = iter(make())
        head = [next(it)[0] for _ in range(k)]
        again = iter(make())
        again.restore(it.save())
        assert head + [e[0] for e in again] == full


def test_make_csv_dataset_inference_and_labels(tmp_path):
    path = str(tmp_path / "m.csv")
    open(path, "w").write("i,big,f,d,s,empty\n1,3000000000,1.5,1e300,x,\n2,1,2.5,1,y,\n")
    ds = nd.experimental.make_csv_dataset(path, 2, num_epochs=1, shuffle=False, label_name="s")
    features, label = next(iter(ds))
    assert features["i"].dtype == np.int32 and features["big"].dtype == np.int64
    assert features["f"].dtype == np.float32 and features["d"].dtype == np.float64
    assert features["empty"].tolist() == [b"", b""] and label.tolist() == [b"x", b"y"]


def test_make_csv_dataset_select_repeat_and_errors(tmp_path):
    path = str(tmp_path / "m.csv")
    open(path, "w").write("a,b,c\n1,2,3\n4,5,6\n7,8,9\n")
    ds = nd.experimental.make_csv_dataset(path, 2, select_columns=["c", "a"], shuffle=False)
    batch = next(iter(ds))
    assert sorted(batch) == ["a", "c"] and batch["c"].tolist() == [3, 6]
    assert ds.element_spec["a"].shape == (2,)          # num_epochs None: full batches
    shuffled = nd.experimental.make_csv_dataset(path, 3, num_epochs=2, shuffle_seed=1)
    assert sorted(v for b in shuffled for v in b["a"].tolist()) == [1, 1, 4, 4, 7, 7]
    with pytest.raises(ValueError):
        nd.experimental.make_csv_dataset(path, 2, label_name="zz")
    with pytest.raises(ValueError):
        nd.experimental.make_csv_dataset(path, 2, header=False)
    with pytest.raises(ValueError):
        nd.experimental.make_csv_dataset(path, 2, select_columns=["q"])


def test_make_csv_dataset_inference_as_tensorflow(tmp_path):
    """Checked against TF 2.21: "nan"/"inf" are not floats to TF's inference (they are
    not < inf), "-inf" is; an int beyond int32 is int64."""
    path = str(tmp_path / "t.csv")
    open(path, "w").write("f,d,g\n1.5,1e300,1.0\nnan,inf,-inf\n")
    ds = nd.experimental.make_csv_dataset(path, 2, num_epochs=1, shuffle=False)
    spec = ds.element_spec
    assert spec["f"].dtype is nd.string and spec["d"].dtype is nd.string
    assert spec["g"].dtype == np.float32
