"""Lowering of TF1 queue pipelines onto nbdata's compiled Dataset engine.

A queue runner's enqueue op that is a per-record function of a reader's ``read()``
(reader -> decode -> NumPy preprocessing -> enqueue into a batching queue) runs as
a compiled pipeline moving chunks of records, unless the session is made with
``nd.ConfigProto(lower_queue_pipelines=False)`` (the reference path, record by
record). These tests check that

* guide-style pipelines ARE lowered (``nd.train.explain`` says so, and the reader
  is read in chunks at run time), and that py_func / read_up_to pipelines are not;
* the lowered and reference paths give identical batches in identical order
  (num_threads=1, no shuffling), equal multisets with shuffle_batch / several
  threads, the same end of input, and the same errors (the rows before a bad
  record are delivered).
"""

from __future__ import annotations

import collections
import contextlib
import re
from pathlib import Path

import numpy as np
import pytest

import nbdata as nd
from queue_helpers import started, without_counts
from nbdata.train.readers import ReaderState

DATA = Path(__file__).resolve().parent.parent / "data"

LOWERED = "lowered onto a compiled pipeline"
PER_RECORD = "per record, op by op:"


def _message(e: BaseException) -> str:
    return without_counts(getattr(e, "message", str(e)))


def _plain(value):
    """A batch as plain Python values with dtypes (for exact comparison)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return (value.dtype.str, value.shape, value.tolist())


@contextlib.contextmanager
def reader_calls():
    """Counts the calls of a reader's per-record ``read`` and chunked ``read_chunk``
    (what the reference and the lowered paths use) while inside."""
    calls = collections.Counter()
    read, read_chunk = ReaderState.read, ReaderState.read_chunk

    def spy_read(self, *a, **k):
        calls["read"] += 1
        return read(self, *a, **k)

    def spy_chunk(self, *a, **k):
        calls["read_chunk"] += 1
        return read_chunk(self, *a, **k)
    ReaderState.read, ReaderState.read_chunk = spy_read, spy_chunk
    try:
        yield calls
    finally:
        ReaderState.read, ReaderState.read_chunk = read, read_chunk


def run(build, lower: bool, expect_error: bool = False, limit: int = 2000):
    """Build a pipeline in a new graph and drain its batches in a session with
    lower_queue_pipelines=lower: (batches, (end class, end message), join error).
    Checks that the reader was read the way the path should: in chunks when lowered,
    record by record when not."""
    with reader_calls() as calls:
        result = _run(build, lower, expect_error, limit)
    if lower:
        assert calls["read"] == 0 and calls["read_chunk"] > 0, calls
    else:
        assert calls["read"] > 0 and calls["read_chunk"] == 0, calls
    return result


def _run(build, lower: bool, expect_error: bool, limit: int):
    with nd.Graph().as_default() as g:
        out = build()
        config = nd.ConfigProto(lower_queue_pipelines=lower)
        with nd.Session(graph=g, config=config) as sess, started(sess) as state:
            state.expect_join_error = expect_error
            batches, end = [], None
            for _ in range(limit):
                try:
                    batches.append(_plain(sess.run(out)))
                except nd.errors.OutOfRangeError as e:
                    end = (type(e).__name__, _message(e))
                    break
            assert end is not None, "no end of input"
    if expect_error:
        assert state.join_error is not None, "the runner did not fail"
    return batches, end, state.join_error


def enqueue_lines(text: str) -> list:
    """The lines of ``explain`` about the enqueue ops of the batching queue (the
    queue of the fetched tensor, the first indentation level)."""
    return [line for line in text.splitlines() if re.match(r"^  \S", line)]


def assert_lowered(out, threads: int = 1) -> str:
    text = nd.train.explain(out)
    first = text.splitlines()[0]
    assert f"<- QueueRunner with {threads} thread(s)" in first, text
    lines = enqueue_lines(text)
    assert lines, text
    for line in lines:
        assert LOWERED in line and PER_RECORD not in line, text
    return text


# ------------------------------------------------------------------- data

@pytest.fixture(scope="module")
def csv_files(tmp_path_factory):
    """Three CSV files (a header line, 150 rows each: 4 floats and an int label)."""
    root = tmp_path_factory.mktemp("csv")
    rng = np.random.default_rng(0)
    files = []
    for f in range(3):
        rows = ["a,b,c,d,label"]
        for i in range(150):
            x = rng.random(4)
            rows.append(",".join(f"{v:.4f}" for v in x) + f",{f * 1000 + i}")
        path = root / f"part{f}.csv"
        path.write_text("\n".join(rows) + "\n")
        files.append(str(path))
    return files


def csv_guide(files, batcher="batch", num_epochs=2, shuffle_files=False, with_key=True,
              keep=False, num_threads=1, asfb=True):
    """The "Reading data" guide's CSV pipeline, with NumPy preprocessing."""
    fq = nd.train.string_input_producer(files, num_epochs=num_epochs, shuffle=shuffle_files,
                                        seed=3)
    key, value = nd.TextLineReader(skip_header_lines=1).read(fq)
    cols = nd.io.decode_csv(value, record_defaults=[[0.0], [0.0], [0.0], [0.0], [0]])
    features = np.stack(cols[:4])
    features = (features - 0.5) * np.float64(2.0)
    label = cols[4]
    tensors = [features, label] + ([key] if with_key else [])
    if keep:
        return nd.train.maybe_batch(tensors, label % 3 != 0, 16, num_threads=num_threads,
                                    capacity=64, allow_smaller_final_batch=asfb)
    if batcher == "batch":
        return nd.train.batch(tensors, 16, num_threads=num_threads, capacity=64,
                              allow_smaller_final_batch=asfb)
    return nd.train.shuffle_batch(tensors, 16, capacity=200, min_after_dequeue=50,
                                  num_threads=num_threads, seed=11, allow_smaller_final_batch=asfb)


def tfrecord_guide(num_epochs=3):
    files = [str(DATA / "examples.tfrecord"), str(DATA / "examples_b.tfrecord")]
    fq = nd.train.string_input_producer(files, num_epochs=num_epochs, shuffle=False)
    key, value = nd.TFRecordReader().read(fq)
    ex = nd.io.parse_single_example(value, {
        "id": nd.io.FixedLenFeature([], np.int64),
        "score": nd.io.FixedLenFeature([], np.float32),
        "vec": nd.io.FixedLenFeature([3], np.float32),
        "label": nd.io.FixedLenFeature([], nd.string),
        "opt": nd.io.FixedLenFeature([], np.int64, default_value=-1),
    })
    scaled = ex["vec"] * ex["score"] + np.float32(1.0)
    return nd.train.batch({"key": key, "id": ex["id"] + ex["opt"], "vec": scaled,
                           "label": ex["label"]}, 3, allow_smaller_final_batch=True)


def fixed_guide(num_epochs=2):
    files = [str(DATA / "fixed_header_footer.bin")]
    fq = nd.train.string_input_producer(files, num_epochs=num_epochs, shuffle=False)
    key, value = nd.FixedLengthRecordReader(8, header_bytes=5, footer_bytes=3).read(fq)
    record = nd.io.decode_raw(value, np.int16)
    record.set_shape([4])
    features = record[:3].astype(np.float32) / np.float32(1000.0)
    label = record[3].astype(np.int32)
    return nd.train.batch([key, features, label], 4, allow_smaller_final_batch=True)


# ------------------------------------------------- lowering must happen

def test_csv_guide_pipeline_is_lowered(csv_files):
    with nd.Graph().as_default():
        text = assert_lowered(csv_guide(csv_files))
    assert "TextLineReader" in text and "decode_csv" in text


def test_csv_guide_pipeline_without_keys_is_lowered(csv_files):
    with nd.Graph().as_default():
        assert_lowered(csv_guide(csv_files, with_key=False))


def test_tfrecord_parse_single_example_pipeline_is_lowered():
    with nd.Graph().as_default():
        text = assert_lowered(tfrecord_guide())
    assert "TFRecordReader" in text


def test_fixed_length_decode_raw_pipeline_is_lowered():
    with nd.Graph().as_default():
        text = assert_lowered(fixed_guide())
    assert "FixedLengthRecordReader" in text


def test_maybe_batch_scalar_keep_input_is_lowered(csv_files):
    with nd.Graph().as_default():
        assert_lowered(csv_guide(csv_files, keep=True))


def test_shuffle_batch_with_threads_is_lowered(csv_files):
    with nd.Graph().as_default():
        assert_lowered(csv_guide(csv_files, batcher="shuffle", num_threads=3), threads=3)


def test_fixed_length_decode_raw_reshape_builds_and_is_lowered():
    # tf.reshape(tf.decode_raw(value, tf.int16), [4]) is the TF1 guide's idiom (the
    # record length is known from record_bytes); np.reshape is its NumPy form.
    with nd.Graph().as_default():
        fq = nd.train.string_input_producer([str(DATA / "fixed_header_footer.bin")])
        _, value = nd.FixedLengthRecordReader(8, header_bytes=5, footer_bytes=3).read(fq)
        record = np.reshape(nd.io.decode_raw(value, np.int16), (4,))
        assert record.shape == nd.TensorShape([4])
        assert_lowered(nd.train.batch([record], 2))


def test_lowered_pipeline_reads_the_reader_in_chunks(csv_files):
    with reader_calls() as calls:
        batches, _, _ = _run(lambda: csv_guide(csv_files, num_epochs=1), True, False, 2000)
    assert sum(len(b[1][2]) for b in batches) == 450
    # 450 records from 3 files: a few chunks per file, never one record per call.
    assert calls["read"] == 0 and 3 <= calls["read_chunk"] <= 60, calls
    with reader_calls() as calls:
        batches, _, _ = _run(lambda: csv_guide(csv_files, num_epochs=1), False, False, 2000)
    assert sum(len(b[1][2]) for b in batches) == 450
    assert calls["read"] >= 450 and calls["read_chunk"] == 0, calls


# --------------------------------------------- not lowered, with reasons

def test_py_func_pipeline_is_not_lowered(csv_files):
    with nd.Graph().as_default():
        fq = nd.train.string_input_producer(csv_files)
        _, value = nd.TextLineReader(skip_header_lines=1).read(fq)
        length = nd.train.py_func(lambda v: np.int64(len(v)), [value], np.int64)
        length.set_shape([])
        out = nd.train.batch([length], 4)
        lines = enqueue_lines(nd.train.explain(out))
    assert len(lines) == 1
    assert PER_RECORD in lines[0] and LOWERED not in lines[0]
    assert "PyFunc" in lines[0]


def stateless_py_func_guide(files):
    fq = nd.train.string_input_producer(files, num_epochs=1, shuffle=False)
    _, value = nd.TextLineReader(skip_header_lines=1).read(fq)
    cols = nd.io.decode_csv(value, record_defaults=[[0.0], [0.0], [0.0], [0.0], [0]])
    mixed = nd.train.py_func(lambda a, label: a * 10 + label, [cols[0], cols[4]], np.float64,
                             stateful=False)
    mixed.set_shape([])
    return nd.train.batch([mixed, cols[4]], 16, allow_smaller_final_batch=True)


def test_stateless_py_func_pipeline_is_lowered_and_matches(csv_files):
    # stateful=False declares the function pure: the pipeline is still lowered (the
    # function runs per element inside it) and gives the reference path's batches.
    with nd.Graph().as_default():
        assert_lowered(stateless_py_func_guide(csv_files))
    lowered = run(lambda: stateless_py_func_guide(csv_files), lower=True)
    reference = run(lambda: stateless_py_func_guide(csv_files), lower=False)
    assert lowered[:2] == reference[:2]
    assert sum(len(b[1][2]) for b in reference[0]) == 450


def ragged_guide(path):
    fq = nd.train.string_input_producer([path], num_epochs=1, shuffle=False)
    _, value = nd.TextLineReader().read(fq)
    return nd.train.batch([nd.io.decode_raw(value, np.uint8)], 3, dynamic_pad=True,
                          allow_smaller_final_batch=True)


def test_dynamic_pad_of_records_of_different_lengths_lowered_and_not(tmp_path):
    # Decoded records of different lengths reach the PaddingFIFOQueue from the lowered
    # pipeline as ragged columns: they are enqueued in runs of equal shapes.
    path = tmp_path / "ragged.txt"
    path.write_text("".join("x" * ((i * 7) % 5) + "\n" for i in range(11)))
    with nd.Graph().as_default():
        assert_lowered(ragged_guide(str(path)))
    lowered = run(lambda: ragged_guide(str(path)), lower=True)
    reference = run(lambda: ragged_guide(str(path)), lower=False)
    assert lowered[:2] == reference[:2]
    assert len(reference[0]) == 4


def test_read_up_to_pipeline_is_not_lowered(csv_files):
    with nd.Graph().as_default():
        fq = nd.train.string_input_producer(csv_files)
        _, values = nd.TextLineReader(skip_header_lines=1).read_up_to(fq, 100)
        cols = nd.io.decode_csv(values, record_defaults=[[0.0], [0.0], [0.0], [0.0], [0]])
        out = nd.train.batch([np.stack(cols[:4], axis=1), cols[4]], 16, enqueue_many=True)
        lines = enqueue_lines(nd.train.explain(out))
    assert len(lines) == 1
    assert PER_RECORD in lines[0] and LOWERED not in lines[0]
    assert "enqueue_many" in lines[0]


def test_one_reader_read_by_two_ops_is_not_lowered(csv_files):
    with nd.Graph().as_default():
        fq = nd.train.string_input_producer(csv_files)
        reader = nd.TextLineReader(skip_header_lines=1)
        lists = [[reader.read(fq)[1]] for _ in range(2)]
        out = nd.train.batch_join(lists, 4)
        lines = enqueue_lines(nd.train.explain(out))
    assert len(lines) == 2
    assert all(PER_RECORD in line and "read by several ops" in line for line in lines)


# ------------------------------------------ lowered == reference (order)

@pytest.mark.parametrize("asfb", [True, False])
@pytest.mark.parametrize("with_key", [True, False])
def test_csv_guide_same_batches_lowered_and_not(csv_files, asfb, with_key):
    build = lambda: csv_guide(csv_files, asfb=asfb, with_key=with_key)  # noqa: E731
    lowered = run(build, lower=True)
    reference = run(build, lower=False)
    assert lowered[0] == reference[0]
    assert lowered[1] == reference[1]
    rows = sum(len(b[1][2]) for b in reference[0])
    assert rows == (900 if asfb else 896)
    if with_key:
        # Batches hold the rows in file order: keys file:2, file:3, ...
        keys = [k for b in reference[0] for k in b[2][2]]
        assert keys[:3] == [f"{csv_files[0]}:{i}".encode() for i in (2, 3, 4)]
    assert reference[0][0][0][0] == "<f8" and reference[0][0][1][0] == "<i8"


def test_csv_guide_shuffled_filenames_same_batches_lowered_and_not(csv_files):
    build = lambda: csv_guide(csv_files, shuffle_files=True)  # noqa: E731
    lowered = run(build, lower=True)
    reference = run(build, lower=False)
    assert lowered[:2] == reference[:2]


def test_tfrecord_guide_same_batches_lowered_and_not():
    lowered = run(tfrecord_guide, lower=True)
    reference = run(tfrecord_guide, lower=False)
    assert lowered[:2] == reference[:2]
    ids = [i for b in reference[0] for i in b["id"][2]]
    # ids 10..14 (opt 42 on the first record, -1 where absent) then examples_b.
    assert len(ids) == 24 and ids[0] == 10 + 42


def test_fixed_length_guide_same_batches_lowered_and_not():
    lowered = run(fixed_guide, lower=True)
    reference = run(fixed_guide, lower=False)
    assert lowered[:2] == reference[:2]
    labels = [x for b in reference[0] for x in b[2][2]]
    features = [x for b in reference[0] for x in b[1][2]]
    assert labels == [7] * 12
    expected = np.array([[i, -i, 1000 * i] for i in range(6)], np.int16)
    assert features == ((expected.astype(np.float32) / np.float32(1000.0)).tolist()) * 2


def test_maybe_batch_scalar_keep_input_same_batches_lowered_and_not(csv_files):
    build = lambda: csv_guide(csv_files, keep=True)  # noqa: E731
    lowered = run(build, lower=True)
    reference = run(build, lower=False)
    assert lowered[:2] == reference[:2]
    labels = [x for b in reference[0] for x in b[1][2]]
    assert labels and all(x % 3 != 0 for x in labels)
    assert len(labels) == 2 * sum(1 for f in range(3) for i in range(150) if (f * 1000 + i) % 3)


# --------------------------------------- lowered == reference (multisets)

def _rows(batches, with_key=True):
    out = []
    for b in batches:
        feats, labels = b[0][2], b[1][2]
        keys = b[2][2] if with_key else [None] * len(labels)
        out.extend((k, tuple(f), lab) for k, f, lab in zip(keys, feats, labels))
    return collections.Counter(out)


def test_shuffle_batch_same_multiset_lowered_and_not(csv_files):
    build = lambda: csv_guide(csv_files, batcher="shuffle")  # noqa: E731
    lowered = run(build, lower=True)
    reference = run(build, lower=False)
    assert _rows(lowered[0]) == _rows(reference[0])
    assert sum(_rows(lowered[0]).values()) == 900
    assert lowered[1] == reference[1]


@pytest.mark.parametrize("lower", [True, False])
def test_num_threads_deliver_every_record_exactly_once(csv_files, lower):
    batches, _, _ = run(lambda: csv_guide(csv_files, num_epochs=1, num_threads=4), lower=lower)
    rows = _rows(batches)
    assert len(rows) == 450 and set(rows.values()) == {1}
    keys = {k for k, _, _ in rows}
    assert keys == {f"{f}:{i}".encode() for f in csv_files for i in range(2, 152)}


def test_batch_join_two_readers_lowered_same_multiset(csv_files):
    def build():
        fq = nd.train.string_input_producer(csv_files, num_epochs=1, shuffle=False)
        lists = []
        for _ in range(2):
            key, value = nd.TextLineReader(skip_header_lines=1).read(fq)
            cols = nd.io.decode_csv(value, record_defaults=[[0.0], [0.0], [0.0], [0.0], [0]])
            lists.append([np.stack(cols[:4]), cols[4], key])
        out = nd.train.batch_join(lists, 16, allow_smaller_final_batch=True)
        assert len(enqueue_lines(assert_lowered(out, threads=2))) == 2
        return out
    lowered = run(build, lower=True)
    reference = run(build, lower=False)
    assert _rows(lowered[0]) == _rows(reference[0])
    assert len(_rows(lowered[0])) == 450 and set(_rows(lowered[0]).values()) == {1}


# ------------------------------------------------ errors in the lowered path

@pytest.fixture(scope="module")
def bad_csv(tmp_path_factory):
    """300 good rows, a row that is not an int, then 50 more good rows."""
    path = tmp_path_factory.mktemp("bad") / "bad.csv"
    rows = [f"{i},{i * 2}" for i in range(300)] + ["x,1"] + [f"{i},0" for i in range(50)]
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def _int_pipeline(files, batch_size=10):
    fq = nd.train.string_input_producer(files, num_epochs=1, shuffle=False)
    _, value = nd.TextLineReader().read(fq)
    a, b = nd.io.decode_csv(value, record_defaults=[[0], [0]])
    return nd.train.batch([a, b + a], batch_size)


@pytest.mark.parametrize("lower", [True, False])
def test_bad_csv_row_error_reaches_join_after_the_rows_before_it(bad_csv, lower):
    with nd.Graph().as_default():
        assert_lowered(_int_pipeline([bad_csv]))
    batches, end, error = run(lambda: _int_pipeline([bad_csv]), lower=lower, expect_error=True)
    firsts = [x for b in batches for x in b[0][2]]
    assert firsts == list(range(300))
    assert [x for b in batches for x in b[1][2]] == [3 * i for i in range(300)]
    assert end[0] == "OutOfRangeError"
    assert type(error) is nd.errors.InvalidArgumentError


def test_bad_csv_row_same_error_lowered_and_not(bad_csv):
    lowered = run(lambda: _int_pipeline([bad_csv]), lower=True, expect_error=True)
    reference = run(lambda: _int_pipeline([bad_csv]), lower=False, expect_error=True)
    assert lowered[0] == reference[0]
    assert _message(lowered[2]) == _message(reference[2])


def test_tf_written_bad_rows_csv_lowered():
    # bad_rows.csv: row 1 is good, row 2 has 3 fields.
    path = str(DATA / "bad_rows.csv")

    def build():
        fq = nd.train.string_input_producer([path], num_epochs=1, shuffle=False)
        _, value = nd.TextLineReader().read(fq)
        a, b = nd.io.decode_csv(value, record_defaults=[[np.int32(0)], [""]])
        return nd.train.batch([a, b], 1)
    for lower in (True, False):
        batches, _, error = run(build, lower=lower, expect_error=True)
        assert batches == [[("<i4", (1,), [1]), ("|O", (1,), [b"a"])]]
        assert type(error) is nd.errors.InvalidArgumentError


def _raw_records_pipeline(files):
    fq = nd.train.string_input_producer(files, num_epochs=1, shuffle=False)
    key, value = nd.TFRecordReader().read(fq)
    return nd.train.batch([key, value], 1)


@pytest.mark.parametrize("case", ["missing", "truncated"])
def test_reader_errors_same_lowered_and_not(tmp_path, case):
    good = str(DATA / "raw_records.tfrecord")
    if case == "missing":
        files, error_class, delivered = [str(tmp_path / "nope.tfrecord"), good], \
            nd.errors.NotFoundError, 0
    else:
        files, error_class, delivered = [good, str(DATA / "truncated.tfrecord")], \
            nd.errors.DataLossError, 8
    with nd.Graph().as_default():
        assert_lowered(_raw_records_pipeline(files))
    lowered = run(lambda: _raw_records_pipeline(files), lower=True, expect_error=True)
    reference = run(lambda: _raw_records_pipeline(files), lower=False, expect_error=True)
    assert lowered[0] == reference[0]
    assert len(reference[0]) == delivered
    assert type(lowered[2]) is type(reference[2]) is error_class
    assert _message(lowered[2]) == _message(reference[2])
