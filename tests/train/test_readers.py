"""TF1 readers (``nd.TFRecordReader``, ``TextLineReader``, ``FixedLengthRecordReader``,
``WholeFileReader``, ``IdentityReader``) against TF1's measured behaviour:
keys, values, file boundaries, counters, errors.

Each test fills a filename FIFOQueue from the program, closes it, and runs the
reader's ``read`` / ``read_up_to`` op directly (no queue runners), as the facts were
measured. The last tests compare the (key, value) sequences with real
``tensorflow.compat.v1`` readers on the same files.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest

import nbdata as nd

DATA = Path(__file__).resolve().parent.parent / "data"
MANIFEST = json.loads((DATA / "MANIFEST.json").read_text())["files"]


def _latin1(values):
    return [v.encode("latin-1") for v in values]


def _path(name: str) -> str:
    return str(DATA / name)


def _end_message(queue: str = "_0_fifo_queue") -> str:
    return (f"FIFOQueue '{queue}' is closed and has insufficient elements "
            "(requested 1, current size 0)")


def _message(e: BaseException) -> str:
    return getattr(e, "message", str(e))


class Reading:
    """A filename FIFOQueue filled with ``files`` (and closed unless ``close=False``),
    a reader over it, and a session running its ops."""

    def __init__(self, make_reader, files, up_to=None, close=True):
        self.graph = nd.Graph()
        with self.graph.as_default():
            self.queue = nd.FIFOQueue(100, [nd.string], shapes=[[]])
            works = [f if isinstance(f, bytes) else os.fsencode(f) for f in files]
            self.enqueue = self.queue.enqueue_many([works]) if works else None
            self.close_op = self.queue.close()
            self.reader = make_reader()
            if up_to is None:
                self.key, self.value = self.reader.read(self.queue)
            else:
                self.key, self.value = self.reader.read_up_to(self.queue, up_to)
            self.produced = self.reader.num_records_produced()
            self.completed = self.reader.num_work_units_completed()
            self.reset_op = self.reader.reset()
        self.sess = nd.Session(graph=self.graph)
        if self.enqueue is not None:
            self.sess.run(self.enqueue)
        if close:
            self.sess.run(self.close_op)

    def next(self, **kwargs):
        return tuple(self.sess.run([self.key, self.value], **kwargs))

    def counters(self) -> tuple:
        produced, completed = self.sess.run([self.produced, self.completed])
        return produced, completed

    def drain(self, limit: int = 100):
        """Every result until the first error: ([(key, value), ...], the error)."""
        out = []
        for _ in range(limit):
            try:
                out.append(self.next())
            except nd.errors.OpError as e:
                return out, e
        raise AssertionError(f"no error after {limit} reads")


@pytest.fixture
def reading():
    made = []

    def make(make_reader, files, up_to=None, close=True) -> Reading:
        r = Reading(make_reader, files, up_to, close)
        made.append(r)
        return r
    yield make
    for r in made:
        r.sess.close()


def _keys(prefix: str, numbers) -> list:
    return [f"{prefix}:{n}".encode() for n in numbers]


def _tfrecord_offsets(records: list) -> list:
    offsets, at = [], 0
    for r in records:
        offsets.append(at)
        at += 12 + len(r) + 4
    return offsets


# ------------------------------------------------------------------- common

@pytest.mark.parametrize("make_reader", [
    nd.TFRecordReader, nd.TextLineReader, lambda: nd.FixedLengthRecordReader(4),
    nd.WholeFileReader, nd.IdentityReader], ids=["tfrecord", "text", "fixed", "whole", "identity"])
def test_read_ops_static_shapes_dtypes_and_counter_types(reading, make_reader):
    r = reading(make_reader, [_path("lines_lf.txt")])
    assert r.key.dtype is nd.string and r.value.dtype is nd.string
    assert r.key.shape == nd.TensorShape([]) and r.value.shape == nd.TensorShape([])
    with r.graph.as_default():
        k, v = r.reader.read_up_to(r.queue, 3)
    assert k.shape == nd.TensorShape([None]) and v.shape == nd.TensorShape([None])
    produced, completed = r.counters()
    assert type(produced) is np.int64 and type(completed) is np.int64
    assert (produced, completed) == (0, 0)


@pytest.mark.parametrize("make_reader, expected", [
    (nd.TFRecordReader, False), (nd.TextLineReader, False),
    (lambda: nd.FixedLengthRecordReader(4), False),
    (nd.WholeFileReader, True), (nd.IdentityReader, True)])
def test_supports_serialize(make_reader, expected):
    with nd.Graph().as_default():
        assert make_reader().supports_serialize is expected


def test_end_of_input_is_the_filename_queues_out_of_range(reading):
    r = reading(nd.TextLineReader, [_path("only_newline.txt")])
    records, end = r.drain()
    assert records == [(_path("only_newline.txt").encode() + b":1", b"")]
    assert type(end) is nd.errors.OutOfRangeError
    assert _message(end) == _end_message()
    # The end repeats.
    with pytest.raises(nd.errors.OutOfRangeError):
        r.next()


def test_read_up_to_end_of_input_has_no_partial_result(reading):
    r = reading(nd.TextLineReader, [_path("lines_no_trailing_newline.txt")], up_to=10)
    k, v = r.next()
    assert v.dtype == object and k.dtype == object
    assert v.tolist() == [b"first", b"second", b"third"]
    assert all(type(x) is bytes for x in k.tolist() + v.tolist())
    with pytest.raises(nd.errors.OutOfRangeError) as info:
        r.next()
    assert _message(info.value) == _end_message()


def test_read_blocks_on_an_open_empty_filename_queue(reading):
    r = reading(nd.TextLineReader, [], close=False)
    with pytest.raises(nd.errors.DeadlineExceededError):
        r.next(options=nd.RunOptions(timeout_in_ms=200))


def test_reset_clears_counters_and_drops_the_current_file(reading):
    a, b = _path("lines_lf.txt"), _path("lines_no_trailing_newline.txt")
    r = reading(nd.TextLineReader, [a, b])
    assert r.next() == (a.encode() + b":1", b"alpha")
    assert r.next() == (a.encode() + b":2", b"beta")
    assert r.counters() == (2, 0)
    r.sess.run(r.reset_op)
    assert r.counters() == (0, 0)
    # The rest of a is dropped: the next read starts the next work item.
    assert r.next() == (b.encode() + b":1", b"first")
    assert r.counters() == (1, 0)


def test_read_moves_to_the_next_file_within_one_call(reading):
    a, b = _path("only_newline.txt"), _path("lines_no_trailing_newline.txt")
    r = reading(nd.TextLineReader, [a, b])
    records, end = r.drain()
    assert records == [(a.encode() + b":1", b""), (b.encode() + b":1", b"first"),
                       (b.encode() + b":2", b"second"), (b.encode() + b":3", b"third")]
    assert type(end) is nd.errors.OutOfRangeError


# ----------------------------------------------------------------- TFRecord

def test_tfrecord_keys_are_byte_offsets_and_values_raw_records(reading):
    info = MANIFEST["raw_records.tfrecord"]
    path = _path("raw_records.tfrecord")
    r = reading(nd.TFRecordReader, [path])
    records, end = r.drain()
    assert [k for k, _ in records] == _keys(path, info["record_offsets"])
    assert [v for _, v in records] == _latin1(info["records_latin1"])
    assert all(type(k) is bytes and type(v) is bytes for k, v in records)
    assert type(end) is nd.errors.OutOfRangeError


@pytest.mark.parametrize("name, options", [
    ("examples.tfrecord.gz", "GZIP"),
    ("examples.tfrecord.gz", "tfrecord_options_gzip"),
    ("examples.tfrecord.zlib", "ZLIB"),
])
def test_tfrecord_compressed_keys_are_offsets_in_the_uncompressed_stream(reading, name, options):
    if options == "tfrecord_options_gzip":
        options = nd.io.TFRecordOptions(compression_type="GZIP")
    path = _path(name)
    expected = _latin1(MANIFEST["examples.tfrecord"]["records_latin1"])
    r = reading(lambda: nd.TFRecordReader(options=options), [path])
    records, end = r.drain()
    assert [k for k, _ in records] == _keys(path, _tfrecord_offsets(expected))
    assert [v for _, v in records] == expected
    assert type(end) is nd.errors.OutOfRangeError


def test_tfrecord_files_with_an_empty_file_and_lazy_work_unit_counting(reading, tmp_path):
    a, b = _path("examples.tfrecord"), _path("examples_b.tfrecord")
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    ra = _latin1(MANIFEST["examples.tfrecord"]["records_latin1"])
    rb = _latin1(MANIFEST["examples_b.tfrecord"]["records_latin1"])
    r = reading(nd.TFRecordReader, [a, str(empty), b])
    seen = []
    for _ in range(8):
        k, v = r.next()
        seen.append((k, v, *r.counters()))
    expected_keys = _keys(a, _tfrecord_offsets(ra)) + _keys(b, _tfrecord_offsets(rb))
    assert [s[0] for s in seen] == expected_keys
    assert [s[1] for s in seen] == ra + rb
    assert [s[2] for s in seen] == list(range(1, 9))
    # A file counts as complete when its EOF is met: on the read after its last record.
    assert [s[3] for s in seen] == [0] * 5 + [2] * 3
    with pytest.raises(nd.errors.OutOfRangeError):
        r.next()
    assert r.counters() == (8, 3)


def test_tfrecord_read_up_to_never_mixes_files(reading, tmp_path):
    a, b = _path("examples.tfrecord"), _path("examples_b.tfrecord")
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    ka = _keys(a, _tfrecord_offsets(_latin1(MANIFEST["examples.tfrecord"]["records_latin1"])))
    kb = _keys(b, _tfrecord_offsets(_latin1(MANIFEST["examples_b.tfrecord"]["records_latin1"])))
    r = reading(nd.TFRecordReader, [a, str(empty), b], up_to=2)
    got = []
    for _ in range(5):
        keys, values = r.next()
        assert len(keys) == len(values)
        got.append((keys.tolist(), int(r.counters()[1])))
    assert got == [(ka[0:2], 0), (ka[2:4], 0), (ka[4:5], 1), (kb[0:2], 2), (kb[2:3], 3)]
    with pytest.raises(nd.errors.OutOfRangeError) as info:
        r.next()
    assert _message(info.value) == _end_message()


def test_tfrecord_read_up_to_exactly_n_finds_eof_on_the_next_call(reading):
    a, b = _path("examples_b.tfrecord"), _path("examples.tfrecord")
    kb = _keys(a, _tfrecord_offsets(_latin1(MANIFEST["examples_b.tfrecord"]["records_latin1"])))
    ka = _keys(b, _tfrecord_offsets(_latin1(MANIFEST["examples.tfrecord"]["records_latin1"])))
    r = reading(nd.TFRecordReader, [a, b], up_to=3)
    assert r.next()[0].tolist() == kb
    assert r.counters() == (3, 0)
    assert r.next()[0].tolist() == ka[:3]
    assert r.counters() == (6, 1)
    assert r.next()[0].tolist() == ka[3:]
    with pytest.raises(nd.errors.OutOfRangeError):
        r.next()
    assert r.counters() == (8, 2)


@pytest.mark.parametrize("name", ["corrupt_data_crc.tfrecord", "corrupt_length_crc.tfrecord",
                                  "truncated.tfrecord"])
def test_tfrecord_data_loss_repeats_and_never_reaches_the_next_file(reading, name):
    info = MANIFEST[name]
    path = _path(name)
    r = reading(nd.TFRecordReader, [path, _path("raw_records.tfrecord")])
    records, err = r.drain()
    assert [v for _, v in records] == _latin1(info["records_before_error_latin1"])
    assert type(err) is nd.errors.DataLossError
    expected = f"{info['then']['message_contains']} {info['offset_in_message']}"
    assert expected in _message(err)
    for _ in range(3):
        with pytest.raises(nd.errors.DataLossError) as again:
            r.next()
        assert expected in _message(again.value)


def test_tfrecord_reader_on_a_text_file_is_data_loss_at_0(reading):
    r = reading(nd.TFRecordReader, [_path("lines_lf.txt"), _path("raw_records.tfrecord")])
    for _ in range(3):
        with pytest.raises(nd.errors.DataLossError) as info:
            r.next()
        assert "corrupted record at 0" in _message(info.value)


def test_tfrecord_data_loss_at_0_says_is_this_even_a_tfrecord_file(reading):
    # TF1's message for a record that is bad at offset 0 (facts §1).
    r = reading(nd.TFRecordReader, [_path("lines_lf.txt")])
    with pytest.raises(nd.errors.DataLossError) as info:
        r.next()
    assert "corrupted record at 0 (Is this even a TFRecord file?)" in _message(info.value)


def test_tfrecord_plain_reader_on_a_gzip_file_is_data_loss(reading):
    r = reading(nd.TFRecordReader, [_path("examples.tfrecord.gz")])
    for _ in range(2):
        with pytest.raises(nd.errors.DataLossError) as info:
            r.next()
        assert "corrupted record at 0" in _message(info.value)


def test_tfrecord_gzip_reader_on_a_plain_file_is_data_loss(reading):
    r = reading(lambda: nd.TFRecordReader(options="GZIP"), [_path("examples.tfrecord")])
    for _ in range(2):
        with pytest.raises(nd.errors.DataLossError):
            r.next()


# ---------------------------------------------------------- missing files

@pytest.mark.parametrize("make_reader, nxt, first", [
    (nd.TFRecordReader, "raw_records.tfrecord", (0, b"")),
    (nd.TextLineReader, "lines_lf.txt", (1, b"alpha")),
    (lambda: nd.FixedLengthRecordReader(12), "fixed_float32.bin",
     (0, b"\x00\x00\x00?\x00\x00\x00\x00\x00\x00\x80?")),
], ids=["tfrecord", "text", "fixed"])
def test_missing_file_not_found_then_continues_with_the_next_file(reading, tmp_path, make_reader,
                                                                  nxt, first):
    missing = str(tmp_path / "nope.bin")
    r = reading(make_reader, [missing, _path(nxt)])
    with pytest.raises(nd.errors.NotFoundError) as info:
        r.next()
    assert _message(info.value) == f"{missing}; No such file or directory"
    assert r.counters() == (0, 0)
    assert r.next() == (f"{_path(nxt)}:{first[0]}".encode(), first[1])
    records, end = r.drain()
    assert type(end) is nd.errors.OutOfRangeError
    # Only the file that was read counts as a completed work unit.
    assert r.counters()[1] == 1


def test_whole_file_missing_file_not_found_repeats(reading, tmp_path):
    missing = str(tmp_path / "nope.bin")
    r = reading(nd.WholeFileReader, [missing, _path("lines_lf.txt")])
    for _ in range(3):
        with pytest.raises(nd.errors.NotFoundError) as info:
            r.next()
        assert _message(info.value) == f"{missing}; No such file or directory"


# ------------------------------------------------------------------- text

def test_text_keys_are_1_based_line_numbers(reading):
    path = _path("lines_lf.txt")
    r = reading(nd.TextLineReader, [path])
    records, end = r.drain()
    assert records == list(zip(_keys(path, range(1, 6)),
                               _latin1(MANIFEST["lines_lf.txt"]["lines_latin1"])))
    assert records[2][1] == b""   # a blank line in the middle is a record
    assert type(end) is nd.errors.OutOfRangeError


def test_text_strips_exactly_one_trailing_cr(reading, tmp_path):
    f = tmp_path / "cr.txt"
    f.write_bytes(b"c1\r\nc\r\r\na\rb\nd\r")
    r = reading(nd.TextLineReader, [str(f), _path("lines_mixed_endings.txt")])
    records, _ = r.drain()
    assert [v for _, v in records] == [b"c1", b"c\r", b"a\rb", b"d",
                                       b"a", b"b", b"c\rd", b"e"]
    assert [k for k, _ in records][:4] == _keys(str(f), range(1, 5))


def test_text_skip_header_lines_applies_to_each_file_and_counts_in_keys(reading):
    crlf, empty, nt = (_path("lines_crlf.txt"), _path("empty.txt"),
                       _path("lines_no_trailing_newline.txt"))
    r = reading(lambda: nd.TextLineReader(skip_header_lines=1), [crlf, empty, nt])
    records, end = r.drain()
    assert records == [(f"{crlf}:2".encode(), b"two"), (f"{crlf}:3".encode(), b""),
                       (f"{crlf}:4".encode(), b"three"),
                       (f"{nt}:2".encode(), b"second"), (f"{nt}:3".encode(), b"third")]
    assert type(end) is nd.errors.OutOfRangeError
    assert r.counters() == (5, 3)


def test_text_skip_more_lines_than_the_file_has_yields_nothing(reading, tmp_path):
    t1 = tmp_path / "t1.txt"
    t1.write_bytes(b"l1\nl2\nl3\nl4\n")
    nt = _path("lines_no_trailing_newline.txt")
    r = reading(lambda: nd.TextLineReader(skip_header_lines=2), [str(t1), nt])
    records, _ = r.drain()
    assert records == [(f"{t1}:3".encode(), b"l3"), (f"{t1}:4".encode(), b"l4"),
                       (f"{nt}:3".encode(), b"third")]
    r2 = reading(lambda: nd.TextLineReader(skip_header_lines=5), [str(t1), nt])
    records, end = r2.drain()
    assert records == [] and type(end) is nd.errors.OutOfRangeError


def test_text_only_newline_and_utf8_bytes(reading):
    one, utf = _path("only_newline.txt"), _path("lines_utf8.txt")
    r = reading(nd.TextLineReader, [one, utf])
    records, _ = r.drain()
    assert records == [(f"{one}:1".encode(), b"")] + list(zip(
        _keys(utf, range(1, 4)), _latin1(MANIFEST["lines_utf8.txt"]["lines_latin1"])))


def test_text_read_up_to_never_mixes_files(reading, tmp_path):
    t1, t2, empty = tmp_path / "t1.txt", tmp_path / "t2.txt", tmp_path / "e.txt"
    t1.write_bytes(b"a1\na2\na3\na4\n")
    t2.write_bytes(b"x1\nx2\nx3")
    empty.write_bytes(b"")
    r = reading(nd.TextLineReader, [str(t1), str(t2)], up_to=3)
    got = [r.next()[1].tolist() for _ in range(3)]
    assert got == [[b"a1", b"a2", b"a3"], [b"a4"], [b"x1", b"x2", b"x3"]]
    with pytest.raises(nd.errors.OutOfRangeError):
        r.next()
    r = reading(nd.TextLineReader, [str(t1), str(empty), str(t2)], up_to=10)
    k1, v1 = r.next()
    k2, v2 = r.next()
    assert v1.tolist() == [b"a1", b"a2", b"a3", b"a4"]
    assert k1.tolist() == _keys(str(t1), range(1, 5))
    assert v2.tolist() == [b"x1", b"x2", b"x3"]
    assert k2.tolist() == _keys(str(t2), range(1, 4))
    with pytest.raises(nd.errors.OutOfRangeError):
        r.next()
    assert r.counters() == (7, 3)


# ------------------------------------------------------------ fixed length

@pytest.mark.parametrize("record_bytes, hop, expected", [
    (4, None, [b"ABCD", b"EFGH"]),
    (4, 2, [b"ABCD", b"CDEF", b"EFGH", b"GHIJ"]),
    (4, 3, [b"ABCD", b"DEFG", b"GHIJ"]),
    (3, 5, [b"ABC", b"FGH"]),
    (20, None, []),
])
def test_fixed_length_keys_are_record_indices_with_hop_bytes(reading, tmp_path, record_bytes, hop,
                                                             expected):
    f = tmp_path / "ten.bin"
    f.write_bytes(b"ABCDEFGHIJ")
    r = reading(lambda: nd.FixedLengthRecordReader(record_bytes, hop_bytes=hop), [str(f)])
    records, end = r.drain()
    assert records == list(zip(_keys(str(f), range(len(expected))), expected))
    assert type(end) is nd.errors.OutOfRangeError
    assert r.counters() == (len(expected), 1)


@pytest.mark.parametrize("content, record_bytes, hop, expected", [
    (b"HH0123456789FFF", 4, None, [b"0123", b"4567"]),
    (b"HH0123456789FFF", 2, 3, [b"01", b"34", b"67"]),
    (b"HHabcdefgFFF", 4, None, [b"abcd"]),
])
def test_fixed_length_header_footer_and_dropped_partial_record(reading, tmp_path, content,
                                                               record_bytes, hop, expected):
    f = tmp_path / "hf.bin"
    f.write_bytes(content)
    r = reading(lambda: nd.FixedLengthRecordReader(record_bytes, header_bytes=2, footer_bytes=3,
                                                   hop_bytes=hop), [str(f)])
    records, end = r.drain()
    assert records == list(zip(_keys(str(f), range(len(expected))), expected))
    assert type(end) is nd.errors.OutOfRangeError


def test_fixed_length_tf_written_file_with_decode_raw(reading):
    info = MANIFEST["fixed_header_footer.bin"]
    path = _path("fixed_header_footer.bin")
    r = reading(lambda: nd.FixedLengthRecordReader(8, header_bytes=5, footer_bytes=3), [path])
    with r.graph.as_default():
        decoded = nd.io.decode_raw(r.value, np.int16)
    # As in TF1, the length of a decoded string is not static.
    assert decoded.shape == nd.TensorShape([None]) and decoded.dtype == np.int16
    got = []
    for i in range(6):
        k, v, d = r.sess.run([r.key, r.value, decoded])
        assert k == f"{path}:{i}".encode()
        assert list(v) == info["decode_raw"]["uint8"][i]["value"]
        got.append(d.tolist())
    assert got == [[i, -i, 1000 * i, 7] for i in range(6)]
    with pytest.raises(nd.errors.OutOfRangeError):
        r.sess.run(r.key)


def test_fixed_length_header_larger_than_file_is_out_of_range_then_next_file(reading, tmp_path):
    tiny, ok = tmp_path / "tiny.bin", tmp_path / "ok.bin"
    tiny.write_bytes(b"abc")
    ok.write_bytes(b"HHHHH0123")
    r = reading(lambda: nd.FixedLengthRecordReader(2, header_bytes=5), [str(tiny), str(ok)])
    with pytest.raises(nd.errors.OutOfRangeError) as info:
        r.next()
    assert _message(info.value) == "reached end of file"
    assert r.next() == (f"{ok}:0".encode(), b"01")
    assert r.next() == (f"{ok}:1".encode(), b"23")
    with pytest.raises(nd.errors.OutOfRangeError) as info:
        r.next()
    assert _message(info.value) == _end_message()


def test_fixed_length_gzip_encoding(reading, tmp_path):
    f = tmp_path / "ten.bin.gz"
    f.write_bytes(gzip.compress(b"ABCDEFGHIJ"))
    r = reading(lambda: nd.FixedLengthRecordReader(4, hop_bytes=3, encoding="GZIP"), [str(f)])
    records, end = r.drain()
    assert records == list(zip(_keys(str(f), range(3)), [b"ABCD", b"DEFG", b"GHIJ"]))
    assert type(end) is nd.errors.OutOfRangeError
    plain = tmp_path / "plain.bin"
    plain.write_bytes(b"ABCDEFGHIJ")
    r = reading(lambda: nd.FixedLengthRecordReader(4, encoding="GZIP"), [str(plain)])
    with pytest.raises(nd.errors.DataLossError):
        r.next()


def test_fixed_length_read_up_to_skips_empty_files(reading, tmp_path):
    f, empty = tmp_path / "ten.bin", tmp_path / "empty.bin"
    f.write_bytes(b"ABCDEFGHIJ")
    empty.write_bytes(b"")
    r = reading(lambda: nd.FixedLengthRecordReader(4), [str(f), str(empty), str(f)], up_to=3)
    for _ in range(2):
        k, v = r.next()
        assert k.tolist() == _keys(str(f), [0, 1])
        assert v.tolist() == [b"ABCD", b"EFGH"]
    with pytest.raises(nd.errors.OutOfRangeError):
        r.next()


# ---------------------------------------------------------- whole / identity

def test_whole_file_reader_keys_values_and_empty_file(reading, tmp_path):
    a, empty = tmp_path / "a.bin", tmp_path / "empty.bin"
    a.write_bytes(b"\x00whole\nfile\r\n")
    empty.write_bytes(b"")
    r = reading(nd.WholeFileReader, [str(a), str(empty)])
    records, end = r.drain()
    assert records == [(str(a).encode(), b"\x00whole\nfile\r\n"), (str(empty).encode(), b"")]
    assert type(end) is nd.errors.OutOfRangeError
    assert r.counters() == (2, 2)


def test_whole_file_and_identity_count_work_units_immediately(reading, tmp_path):
    a = tmp_path / "a.bin"
    a.write_bytes(b"x")
    r = reading(nd.WholeFileReader, [str(a), str(a)])
    r.next()
    assert r.counters() == (1, 1)
    r = reading(nd.IdentityReader, [b"w1", b"w2"])
    r.next()
    assert r.counters() == (1, 1)


def test_whole_file_read_up_to_one_record_per_call(reading):
    a, b = _path("lines_lf.txt"), _path("only_newline.txt")
    r = reading(nd.WholeFileReader, [a, b], up_to=5)
    k, v = r.next()
    assert k.tolist() == [a.encode()] and v.tolist() == [Path(a).read_bytes()]
    k, v = r.next()
    assert k.tolist() == [b.encode()] and v.tolist() == [b"\n"]
    with pytest.raises(nd.errors.OutOfRangeError):
        r.next()


def test_identity_reader(reading):
    r = reading(nd.IdentityReader, [b"w1", b"", b"w3"])
    records, end = r.drain()
    assert records == [(b"w1", b"w1"), (b"", b""), (b"w3", b"w3")]
    assert type(end) is nd.errors.OutOfRangeError
    assert _message(end) == _end_message()
    r = reading(nd.IdentityReader, [b"w1", b"w2", b"w3"], up_to=2)
    assert [r.next()[1].tolist() for _ in range(3)] == [[b"w1"], [b"w2"], [b"w3"]]
    with pytest.raises(nd.errors.OutOfRangeError):
        r.next()


# ------------------------------------------------------- TF1 differential

def _tf_reads(tf, make_reader, files, up_to):
    out = []
    with tf.Graph().as_default() as g:
        q = tf.FIFOQueue(100, tf.string, shapes=[])
        enq = q.enqueue_many([[os.fsencode(f) if isinstance(f, str) else f for f in files]])
        close = q.close()
        reader = make_reader(tf)
        k, v = reader.read(q) if up_to is None else reader.read_up_to(q, up_to)
        with tf.Session(graph=g) as sess:
            sess.run(enq)
            sess.run(close)
            for _ in range(100):
                try:
                    kk, vv = sess.run([k, v])
                except tf.errors.OpError as e:
                    out.append(type(e).__name__)
                    break
                out.append((kk, vv) if up_to is None else (kk.tolist(), vv.tolist()))
    return out


def _nd_reads(make_reader, files, up_to):
    r = Reading(lambda: make_reader(nd), files, up_to)
    out = []
    try:
        for _ in range(100):
            try:
                kk, vv = r.next()
            except nd.errors.OpError as e:
                out.append(type(e).__name__)
                break
            out.append((kk, vv) if up_to is None else (kk.tolist(), vv.tolist()))
    finally:
        r.sess.close()
    return out


def _tfrecord_gzip(m):
    if m is nd:
        return nd.TFRecordReader(options="GZIP")
    return m.TFRecordReader(options=m.io.TFRecordOptions(compression_type="GZIP"))


_DIFFERENTIAL = {
    "tfrecord": (lambda m: m.TFRecordReader(),
                 ["raw_records.tfrecord", "examples.tfrecord", "examples_b.tfrecord"], None),
    "tfrecord-gzip-up-to-2": (_tfrecord_gzip, ["examples.tfrecord.gz"], 2),
    "tfrecord-corrupt": (lambda m: m.TFRecordReader(), ["truncated.tfrecord"], None),
    # read_up_to drops the good records read before the error in the same call.
    "tfrecord-corrupt-up-to-10": (lambda m: m.TFRecordReader(), ["truncated.tfrecord"], 10),
    "text-skip-1": (lambda m: m.TextLineReader(skip_header_lines=1),
                    ["people.csv", "lines_crlf.txt", "empty.txt", "lines_mixed_endings.txt",
                     "crlf_no_trailing.csv", "only_newline.txt"], None),
    "text-up-to-3": (lambda m: m.TextLineReader(),
                     ["lines_lf.txt", "empty.txt", "only_newline.txt",
                      "lines_no_trailing_newline.txt"], 3),
    "fixed-header-footer-hop": (lambda m: m.FixedLengthRecordReader(8, header_bytes=5,
                                                                    footer_bytes=3, hop_bytes=6),
                                ["fixed_header_footer.bin"], None),
    "fixed-up-to-3": (lambda m: m.FixedLengthRecordReader(12),
                      ["fixed_float32.bin", "fixed_float32.bin"], 3),
    "whole-file": (lambda m: m.WholeFileReader(), ["lines_lf.txt", "empty.txt"], None),
}


@pytest.mark.parametrize("case", sorted(_DIFFERENTIAL))
def test_same_key_value_sequence_as_tf1(tf1, case):
    make_reader, names, up_to = _DIFFERENTIAL[case]
    files = [_path(n) for n in names]
    expected = _tf_reads(tf1, make_reader, files, up_to)
    got = _nd_reads(make_reader, files, up_to)
    assert got == expected
    assert expected


def test_identity_reader_same_as_tf1(tf1):
    works = [b"w1", b"", b"w3"]
    expected = _tf_reads(tf1, lambda m: m.IdentityReader(), works, None)
    assert _nd_reads(lambda m: m.IdentityReader(), works, None) == expected
