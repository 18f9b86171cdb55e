"""File datasets against the files TensorFlow wrote (tests/data/MANIFEST.json), writer round
trips, corruption, laziness, parallel reads and save/restore."""

from __future__ import annotations

import gzip
import json
import os
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nbdata as nd

import inflaters

inflater = inflaters.inflater   # the fixture (tests/io/inflaters.py)
from nbdata.kernels.records import frame_tfrecord

DATA = Path(__file__).resolve().parent.parent / "data"
MANIFEST = json.loads((DATA / "MANIFEST.json").read_text())["files"]


def latin1(values):
    return [v.encode("latin-1") for v in values]


def read_all(ds):
    return [bytes(x) for x in ds]


def records_of(name):
    return latin1(MANIFEST[name]["records_latin1"])


# ------------------------------------------------------------ conformance

@pytest.mark.parametrize("name", ["examples.tfrecord", "examples.tfrecord.gz",
                                  "examples.tfrecord.zlib", "examples_b.tfrecord"])
def test_tfrecord_conformance(name):
    entry = MANIFEST[name]
    ds = nd.TFRecordDataset(str(DATA / name), compression_type=entry["compression_type"] or "")
    got = read_all(ds)
    assert len(got) == entry["num_records"]
    assert got == records_of(name)


def test_raw_records_offsets_and_values():
    entry = MANIFEST["raw_records.tfrecord"]
    got = read_all(nd.TFRecordDataset(str(DATA / "raw_records.tfrecord")))
    offsets = entry["record_offsets"]
    assert len(got) == len(offsets)
    # Each frame takes 16 bytes plus its data: the offsets follow from the lengths.
    sizes = [16 + len(r) for r in got]
    assert list(np.cumsum([0] + sizes[:-1])) == offsets
    assert offsets[-1] + sizes[-1] == entry["file_size"]
    assert b"" in got and bytes(range(256)) in got


@pytest.mark.parametrize("name", ["corrupt_data_crc.tfrecord", "corrupt_length_crc.tfrecord",
                                  "truncated.tfrecord"])
def test_corrupt_files_raise_data_loss_with_offset(name):
    entry = MANIFEST[name]
    it = iter(nd.TFRecordDataset(str(DATA / name)))
    before = latin1(entry["records_before_error_latin1"])
    for want in before:
        assert next(it) == want
    with pytest.raises(nd.errors.DataLossError) as e:
        next(it)
    message = str(e.value)
    assert entry["then"]["message_contains"] in message
    assert f"at {entry['offset_in_message']}" in message
    assert name in message


@pytest.mark.parametrize("name", ["corrupt_data_crc.tfrecord", "corrupt_length_crc.tfrecord",
                                  "truncated.tfrecord"])
def test_ignore_errors_keeps_records_before_the_corruption(name):
    entry = MANIFEST[name]
    before = latin1(entry["records_before_error_latin1"])
    path = str(DATA / name)
    assert read_all(nd.TFRecordDataset(path).ignore_errors()) == before
    # Each file is given up at its corruption; the next file is read (tf.data's order).
    good = str(DATA / "examples_b.tfrecord")
    got = read_all(nd.TFRecordDataset([path, good, path]).ignore_errors())
    assert got == before + records_of("examples_b.tfrecord") + before


@pytest.mark.parametrize("name", [k for k, v in MANIFEST.items() if v["kind"] in ("text", "csv")])
def test_text_line_conformance(name):
    entry = MANIFEST[name]
    ds = nd.TextLineDataset(str(DATA / name), compression_type=entry.get("compression_type"))
    if ".skip(" in entry["read_with"]:  # csv files: the header line is skipped
        ds = ds.skip(int(entry["read_with"].split(".skip(")[1].split(")")[0]))
    assert read_all(ds) == latin1(entry["lines_latin1"])


@pytest.mark.parametrize("content, lines", [
    (b"\r", []), (b"a\n\r", [b"a"]), (b"a\r", [b"a"]), (b"a\n\r\r\n", [b"a", b""]),
    (b"", []), (b"\n", [b""]), (b"x\r\ny", [b"x", b"y"]), (b"a\rb\n", [b"ab"]),
])
@pytest.mark.parametrize("compression", ["", "GZIP"])
def test_text_lines_drop_carriage_returns_like_tensorflow(tmp_path, content, lines, compression):
    """Every \r is dropped; a last line of only \r bytes is no line (TF's reader)."""
    path = tmp_path / "t.txt"
    path.write_bytes(gzip.compress(content) if compression else content)
    assert read_all(nd.TextLineDataset(str(path), compression_type=compression)) == lines


@pytest.mark.parametrize("compression", ["GZIP", "ZLIB"])
def test_fixed_length_compressed_remainder_after_the_whole_records(tmp_path, compression):
    """Compressed: the whole records come out, then DataLossError for the remainder;
    a stream ending inside the header fails at once."""
    body = bytes(range(52))                    # 6 records of 8, then 4 bytes
    path = tmp_path / "r.bin"
    pack = gzip.compress if compression == "GZIP" else zlib.compress
    path.write_bytes(pack(body))
    it = iter(nd.FixedLengthRecordDataset(str(path), 8, compression_type=compression,
                                          buffer_size=7))
    assert [bytes(next(it)) for _ in range(6)] == [body[i:i + 8] for i in range(0, 48, 8)]
    with pytest.raises(nd.errors.DataLossError, match="body length 52 bytes"):
        next(it)
    path.write_bytes(pack(b"abc"))
    with pytest.raises(nd.errors.DataLossError, match="r.bin"):
        list(nd.FixedLengthRecordDataset(str(path), 2, header_bytes=5,
                                         compression_type=compression))


def test_fixed_length_conformance():
    entry = MANIFEST["fixed_header_footer.bin"]
    ds = nd.FixedLengthRecordDataset(str(DATA / "fixed_header_footer.bin"), entry["record_bytes"],
                                     header_bytes=entry["header_bytes"],
                                     footer_bytes=entry["footer_bytes"])
    want = [bytes(v["value"]) for v in entry["decode_raw"]["uint8"]]
    assert read_all(ds) == want
    entry = MANIFEST["fixed_float32.bin"]
    got = read_all(nd.FixedLengthRecordDataset(str(DATA / "fixed_float32.bin"), 12))
    want = [np.array(v["value"], np.float32).tobytes() for v in entry["decode_raw"]["float32"]]
    assert got == want


def test_fixed_length_body_not_a_multiple():
    entry = MANIFEST["fixed_header_footer.bin"]
    ds = nd.FixedLengthRecordDataset(str(DATA / "fixed_header_footer.bin"), 7,
                                     header_bytes=entry["header_bytes"],
                                     footer_bytes=entry["footer_bytes"])
    it = iter(ds)
    with pytest.raises(nd.errors.InvalidArgumentError) as e:
        next(it)
    assert entry["with_record_bytes_7"]["message_contains"] in str(e.value)
    assert isinstance(e.value, nd.errors.DataLossError)


@pytest.mark.parametrize("compression", ["GZIP", "ZLIB"])
def test_fixed_length_compressed(tmp_path, compression):
    body = b"HD" + bytes(range(30)) + b"FT"
    packed = gzip.compress(body) if compression == "GZIP" else zlib.compress(body)
    path = tmp_path / "f.bin"
    path.write_bytes(packed)
    ds = nd.FixedLengthRecordDataset(str(path), 5, header_bytes=2, footer_bytes=2,
                                     compression_type=compression)
    assert read_all(ds) == [bytes(range(i, i + 5)) for i in range(0, 30, 5)]
    bad = nd.FixedLengthRecordDataset(str(path), 7, header_bytes=2, footer_bytes=2,
                                      compression_type=compression)
    with pytest.raises(nd.errors.InvalidArgumentError, match="not an exact multiple"):
        read_all(bad)


# ------------------------------------------------------------ laziness, names, errors

def test_construction_never_touches_the_file_system(tmp_path):
    missing = str(tmp_path / "nope.tfrecord")
    ds = nd.TFRecordDataset(missing).map(lambda x: x)
    assert ds.element_spec == nd.TensorSpec((), nd.string)
    with pytest.raises(nd.errors.NotFoundError, match="nope.tfrecord"):
        next(iter(ds))
    with pytest.raises(nd.errors.NotFoundError):
        list(nd.TextLineDataset(missing))
    with pytest.raises(nd.errors.NotFoundError):
        list(nd.FixedLengthRecordDataset(missing, 4))


def test_filenames_forms(tmp_path):
    paths = []
    for k in range(3):
        p = tmp_path / f"{k}.txt"
        p.write_bytes(f"a{k}\nb{k}\n".encode())
        paths.append(str(p))
    want = [f"{c}{k}".encode() for k in range(3) for c in "ab"]
    assert read_all(nd.TextLineDataset(paths)) == want
    assert read_all(nd.TextLineDataset(np.array(paths))) == want
    assert read_all(nd.TextLineDataset(tuple(Path(p) for p in paths))) == want
    assert read_all(nd.TextLineDataset(nd.Dataset.from_tensor_slices(paths))) == want
    assert read_all(nd.TextLineDataset(nd.Dataset.list_files(str(tmp_path / "*.txt"),
                                                             shuffle=False))) == want
    with pytest.raises(TypeError):
        nd.TextLineDataset(nd.Dataset.range(3))
    with pytest.raises(TypeError):
        nd.TextLineDataset(3)


def test_bad_arguments():
    with pytest.raises(nd.errors.InvalidArgumentError, match="compression_type"):
        nd.TFRecordDataset("x", compression_type="BZ2")
    with pytest.raises(nd.errors.InvalidArgumentError, match="record_bytes"):
        nd.FixedLengthRecordDataset("x", 0)
    with pytest.raises(nd.errors.InvalidArgumentError, match="num_parallel_reads"):
        nd.TFRecordDataset("x", num_parallel_reads=0)
    with pytest.raises(TypeError, match="buffer_size"):
        nd.TFRecordDataset("x", buffer_size="big")


@pytest.mark.parametrize("compression", ["", "GZIP"])
def test_partial_length_header_at_the_end_is_the_end(tmp_path, compression):
    """As TensorFlow's reader: fewer than 12 bytes after the last record end the file
    quietly; a cut inside a record's length CRC or data is DataLossError."""
    full = frame_tfrecord(b"hello") + frame_tfrecord(b"worldwide")
    path = tmp_path / "cut.tfrecord"
    for cut, error in [(21, False), (22, False), (32, False), (33, True), (45, True)]:
        data = full[:cut]
        path.write_bytes(gzip.compress(data) if compression else data)
        ds = nd.TFRecordDataset(str(path), compression_type=compression)
        if error:
            with pytest.raises(nd.errors.DataLossError, match="truncated record at 21"):
                read_all(ds)
        else:
            assert read_all(ds) == [b"hello"]


def test_cut_gzip_stream_ends_where_it_stops_inflating(tmp_path):
    """As TensorFlow's zlib stream: a cut stream is no error of its own; the TFRecord
    reader then finds its last record cut, the text reader a shorter last line.
    tests/io/test_damaged_compressed.py compares many cuts with TensorFlow."""
    packed = (DATA / "examples.tfrecord.gz").read_bytes()
    path = tmp_path / "cut.gz"
    path.write_bytes(packed[:300])
    with pytest.raises(nd.errors.DataLossError, match=r"cut.gz: truncated record at \d+"):
        read_all(nd.TFRecordDataset(str(path), compression_type="GZIP"))
    data = zlib.decompressobj(31).decompress(packed[:300])
    want = [line.replace(b"\r", b"") for line in data.split(b"\n")]
    assert read_all(nd.TextLineDataset(str(path), compression_type="GZIP")) == [
        w for i, w in enumerate(want) if w or i < len(want) - 1]
    path.write_bytes(b"not a gzip stream at all")
    with pytest.raises(nd.errors.DataLossError, match="not a GZIP stream"):
        read_all(nd.TFRecordDataset(str(path), compression_type="GZIP"))


def test_each_inflater_reads_and_rejects_alike(tmp_path, inflater):
    """The standard zlib and isal's (the [gzip] extra) give the same records and the
    same errors, concatenated gzip members included."""
    for name in ("examples.tfrecord.gz", "examples.tfrecord.zlib"):
        entry = MANIFEST[name]
        ds = nd.TFRecordDataset(str(DATA / name), compression_type=entry["compression_type"])
        assert read_all(ds) == records_of(name)
    lines = [b"line %d" % i for i in range(5000)]
    twice = tmp_path / "twice.gz"
    twice.write_bytes(gzip.compress(b"\n".join(lines[:2500]) + b"\n")
                      + gzip.compress(b"\n".join(lines[2500:])))
    assert read_all(nd.TextLineDataset(str(twice), compression_type="GZIP",
                                       buffer_size=4096)) == lines
    packed = (DATA / "examples.tfrecord.gz").read_bytes()
    cut = tmp_path / "cut.gz"
    cut.write_bytes(packed[:300])
    with pytest.raises(nd.errors.DataLossError, match="truncated record at"):
        read_all(nd.TFRecordDataset(str(cut), compression_type="GZIP"))
    cut.write_bytes(packed[:20] + bytes(b ^ 0x5A for b in packed[20:60]) + packed[60:])
    with pytest.raises(nd.errors.DataLossError, match="corrupt GZIP"):
        read_all(nd.TFRecordDataset(str(cut), compression_type="GZIP"))


def test_abandoned_compressed_reader_lets_its_thread_end(tmp_path):
    """A GZIP file read half-way and dropped without close(): the read-ahead thread
    ends once the reader is collected."""
    import gc
    import threading
    import time
    path = tmp_path / "lines.gz"
    # 22 MB of lines: more than the read-ahead queue holds, so the thread is still busy.
    path.write_bytes(gzip.compress(b"".join(b"line %d %s\n" % (i, b"x" * 100)
                                            for i in range(200_000)), 1))
    it = iter(nd.TextLineDataset(str(path), compression_type="GZIP", buffer_size=4096))
    next(it)
    assert any(t.name == "nbdata-inflate" for t in threading.enumerate())
    del it
    gc.collect()
    deadline = time.monotonic() + 5
    while any(t.name == "nbdata-inflate" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "read-ahead thread still running"
        time.sleep(0.02)


# ------------------------------------------------------------ writer round trips

@pytest.mark.parametrize("compression", [None, "", "GZIP", "ZLIB"])
def test_writer_round_trip(tmp_path, compression):
    records = [b"", b"x", bytes(range(256)) * 5, b"\n\r\n"]
    path = str(tmp_path / "w.tfrecord")
    with nd.io.TFRecordWriter(path, compression) as w:
        for r in records:
            w.write(r)
    assert read_all(nd.TFRecordDataset(path, compression_type=compression)) == records
    options = nd.io.TFRecordOptions(compression_type=compression)
    with nd.io.TFRecordWriter(path, options) as w:
        w.write("é")
    assert read_all(nd.TFRecordDataset(path, compression_type=compression)) == ["é".encode()]


def test_writer_bytes_match_tensorflow_file():
    # examples.tfrecord was written by TensorFlow: writing its records again gives the same bytes.
    records = records_of("examples.tfrecord")
    assert b"".join(frame_tfrecord(r) for r in records) == (DATA / "examples.tfrecord").read_bytes()


@settings(max_examples=25, deadline=None)
@given(st.lists(st.binary(max_size=3000), max_size=30), st.sampled_from(["", "GZIP", "ZLIB"]),
       st.integers(4096, 20000))
def test_round_trip_random_records(tmp_path_factory, records, compression, buffer_size):
    path = str(tmp_path_factory.mktemp("rt") / "r.tfrecord")
    with nd.io.TFRecordWriter(path, compression) as w:
        for r in records:
            w.write(r)
    ds = nd.TFRecordDataset(path, compression_type=compression, buffer_size=buffer_size)
    assert read_all(ds) == records


def test_tensorflow_reads_what_nbdata_writes(tmp_path):
    tf = pytest.importorskip("tensorflow")
    path = str(tmp_path / "tf.tfrecord.gz")
    records = [b"a", b"", bytes(range(200))]
    with nd.io.TFRecordWriter(path, "GZIP") as w:
        for r in records:
            w.write(r)
    got = [x.numpy() for x in tf.data.TFRecordDataset(path, compression_type="GZIP")]
    assert got == records


# ------------------------------------------------------------ big files, parallel reads, state

def _write_lines(path, n, tag):
    lines = [f"{tag}-{i}-{'x' * (i % 37)}".encode() for i in range(n)]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return lines


def test_records_larger_than_the_buffer(tmp_path):
    path = str(tmp_path / "big.tfrecord")
    records = [os.urandom(70_000), b"s", os.urandom(200_000)]
    with nd.io.TFRecordWriter(path) as w:
        for r in records:
            w.write(r)
    assert read_all(nd.TFRecordDataset(path, buffer_size=4096)) == records
    text = tmp_path / "long.txt"
    long_line = b"y" * 100_000
    text.write_bytes(b"a\n" + long_line + b"\nb")
    assert read_all(nd.TextLineDataset(str(text), buffer_size=4096)) == [b"a", long_line, b"b"]


def test_num_parallel_reads_gives_interleave_order(tmp_path):
    files = []
    contents = []
    for k in range(3):
        p = tmp_path / f"p{k}.txt"
        contents.append(_write_lines(p, 5 + 3 * k, f"f{k}"))
        files.append(str(p))
    want = read_all(nd.Dataset.from_tensor_slices(files).interleave(
        lambda f: nd.TextLineDataset(f), cycle_length=2, block_length=1))
    got = read_all(nd.TextLineDataset(files, num_parallel_reads=2))
    assert got == want
    # tf.data's order: one line from each of the two open files in turn.
    assert got[:4] == [contents[0][0], contents[1][0], contents[0][1], contents[1][1]]
    assert sorted(got) == sorted(sum(contents, []))


def test_file_dataset_made_inside_interleave_function(tmp_path):
    paths = []
    for k in range(2):
        p = tmp_path / f"t{k}.tfrecord"
        with nd.io.TFRecordWriter(str(p)) as w:
            for i in range(4):
                w.write(f"{k}:{i}".encode())
        paths.append(str(p))
    ds = nd.Dataset.from_tensor_slices(paths).interleave(
        lambda f: nd.TFRecordDataset(f).map(lambda r: r), cycle_length=2,
        num_parallel_calls=2)
    assert read_all(ds) == [f"{k}:{i}".encode() for i in range(4) for k in range(2)]


@pytest.mark.parametrize("compression", ["", "GZIP"])
@pytest.mark.parametrize("stop", [0, 1, 7, 40, 120])
def test_save_restore_mid_file(tmp_path, compression, stop):
    paths = []
    for k in range(3):
        p = str(tmp_path / f"s{k}.tfrecord")
        with nd.io.TFRecordWriter(p, compression) as w:
            for i in range(40):
                w.write(f"{k}/{i}".encode() * (1 + i % 5))
        paths.append(p)
    ds = nd.TFRecordDataset(paths, compression_type=compression, buffer_size=4096)
    full = read_all(ds)
    it = iter(ds)
    head = [next(it) for _ in range(stop)]
    state = it.save()
    rest = iter(ds)
    rest.restore(state)
    assert head + read_all(rest) == full


def test_save_restore_parallel_reads(tmp_path):
    paths = []
    for k in range(4):
        p = tmp_path / f"q{k}.txt"
        _write_lines(p, 50 + k, f"q{k}")
        paths.append(str(p))
    ds = nd.TextLineDataset(paths, num_parallel_reads=3).batch(7)
    full = [b.tolist() for b in ds]
    it = iter(ds)
    head = [next(it).tolist() for _ in range(9)]
    state = it.save()
    it2 = iter(ds)
    it2.restore(state)
    assert head + [b.tolist() for b in it2] == full


def test_explain_names_the_reader(tmp_path):
    p = tmp_path / "x.tfrecord"
    with nd.io.TFRecordWriter(str(p)) as w:
        w.write(b"a")
    text = nd.TFRecordDataset(str(p), compression_type="GZIP").compile().explain()
    assert "TFRecordDataset(" in text and "compression='GZIP'" in text
