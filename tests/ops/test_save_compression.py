"""save / snapshot compression: "GZIP" (zlib) and "SNAPPY" (pyarrow or python-snappy)
really compress the shards' buffers; the column files record the codec (so load and
snapshot reads need no argument), checksums cover the stored bytes (a flipped byte is
a DataLossError naming file and offset), and load(compression=) must match what was
written, as in tf.data."""

import glob
import os
import sys

import numpy as np
import pytest

import nbdata as nd
from nbdata.kernels.column_file import ColumnFileReader, ColumnFileWriter

COMPRESSIONS = [None, "GZIP", "SNAPPY"]


def mixed():
    """int64 scalars, float32 rows of varying length, strings, string rows of varying
    length, a fixed uint8 matrix: dense, ragged and string leaves."""
    def gen():
        for i in range(300):
            yield (np.int64(i), np.arange(i % 7, dtype=np.float32) * 0.5,
                   (b"s%d" % i) * (i % 4),
                   np.array([b"w" * j for j in range(i % 3)], dtype=object),
                   np.full((2, 3), i % 256, np.uint8))
    return nd.Dataset.from_generator(gen, output_signature=(
        nd.TensorSpec((), np.int64), nd.TensorSpec((None,), np.float32),
        nd.TensorSpec((), nd.string), nd.TensorSpec((None,), nd.string),
        nd.TensorSpec((2, 3), np.uint8)))


def plain(elements):
    return [(int(a), b.tolist(), bytes(c), [bytes(x) for x in d], e.tolist())
            for a, b, c, d, e in elements]


def shard_files(path):
    return sorted(glob.glob(os.path.join(str(path), "**", "*.shard"), recursive=True))


def stored_bytes(path):
    return sum(os.path.getsize(f) for f in shard_files(path))


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_save_load_round_trip(tmp_path, compression):
    expected = plain(mixed())
    path = str(tmp_path / "s")
    mixed().save(path, compression=compression, shard_func=lambda a, *rest: a % 3)
    loaded = nd.Dataset.load(path)
    assert loaded.element_spec == mixed().element_spec
    assert plain(loaded) == expected     # round robin over shards a % 3: the order saved
    assert plain(nd.Dataset.load(path, compression=compression)) == expected


@pytest.mark.parametrize("compression", COMPRESSIONS + ["AUTO", "NONE", ""])
def test_snapshot_round_trip(tmp_path, compression):
    expected = plain(mixed())
    ds = mixed().snapshot(str(tmp_path), compression=compression)
    assert plain(ds) == expected          # writes
    assert shard_files(tmp_path)
    assert plain(ds) == expected          # reads the shards
    # another compression argument reads the same snapshot (the files say theirs)
    other = mixed().snapshot(str(tmp_path), compression="GZIP" if compression is None else None)
    assert plain(other) == expected


def test_compressed_shards_are_smaller(tmp_path):
    words = np.array([str(i % 10).encode() for i in range(4000)], dtype=object)

    def ds():
        return nd.Dataset.from_tensor_slices((np.ones((4000, 64)), words))
    sizes = {}
    for c in COMPRESSIONS:
        ds().save(str(tmp_path / str(c)), compression=c)
        sizes[c] = stored_bytes(tmp_path / str(c))
        got = [(a.tolist(), bytes(b)) for a, b in nd.Dataset.load(str(tmp_path / str(c)))]
        assert got == [([1.0] * 64, str(i % 10).encode()) for i in range(4000)]
    assert sizes["GZIP"] * 10 < sizes[None]
    assert sizes["SNAPPY"] * 4 < sizes[None]


def test_format_versions(tmp_path):
    """Uncompressed files are written as before (first record version 2, no codec:
    older nbdata reads them); compressed ones say version 3 and name their codec."""
    for c, version in [(None, b'"version":2'), ("GZIP", b'"version":3'),
                       ("SNAPPY", b'"version":3')]:
        path = tmp_path / str(c)
        nd.Dataset.range(10).save(str(path), compression=c)
        (shard,) = shard_files(path)
        raw = open(shard, "rb").read()
        assert version in raw
        assert (b'"codec"' in raw) == (c is not None)
        assert (b'"compression":"%s"' % (c or "").encode() in raw) == (c is not None)


def test_column_file_codecs(tmp_path):
    from nbdata.chunks import RowList, StringColumn
    cols = [np.arange(1000, dtype=np.int32).reshape(500, 2),
            RowList([np.arange(i % 5, dtype=np.float64) for i in range(500)]),
            StringColumn(np.frombuffer(b"ab" * 500, np.uint8),
                         np.arange(0, 1001, 2, dtype=np.int64))]
    for c in ["", "GZIP", "SNAPPY"]:
        p = str(tmp_path / f"f{c}")
        w = ColumnFileWriter(p, c)
        w.write(cols, 500)
        w.write(cols, 500)
        w.close()
        assert w.size == os.path.getsize(p)
        r = ColumnFileReader(p)
        chunks = list(r.chunks())
        assert [n for _, n in chunks] == [500, 500]
        for columns, _ in chunks:
            assert np.array_equal(columns[0], cols[0])
            assert [v.tolist() for v in columns[1]] == [v.tolist() for v in cols[1]]
            assert columns[2].values() == [b"ab"] * 500


@pytest.mark.parametrize("compression", ["GZIP", "SNAPPY"])
def test_a_flipped_byte_is_data_loss(tmp_path, compression):
    path = str(tmp_path / "s")
    words = np.array([b"%d" % i for i in range(2000)], dtype=object)
    nd.Dataset.from_tensor_slices((np.arange(2000), words)).save(path, compression=compression)
    (shard,) = shard_files(path)
    raw = bytearray(open(shard, "rb").read())
    expected = list(range(2000))
    outcomes = {"lost": 0, "same": 0}
    for where in range(8, len(raw), max(1, len(raw) // 150)):
        damaged = bytearray(raw)
        damaged[where] ^= 0x10
        with open(shard, "wb") as f:
            f.write(damaged)
        try:
            got = [int(a) for a, _ in nd.Dataset.load(path)]
        except nd.errors.DataLossError as e:
            assert "00000000.shard is corrupt at offset" in str(e)
            outcomes["lost"] += 1
        else:   # a padding byte (no checksum covers it): the elements are unchanged
            assert got == expected
            outcomes["same"] += 1
    assert outcomes["lost"] > 10 * outcomes["same"], outcomes
    with open(shard, "wb") as f:
        f.write(raw)
    assert [int(a) for a, _ in nd.Dataset.load(path)] == list(range(2000))


@pytest.mark.parametrize("compression", ["GZIP", "SNAPPY"])
def test_restore_mid_read(tmp_path, compression):
    path = str(tmp_path / "s")
    mixed().save(path, compression=compression, shard_func=lambda a, *rest: a % 2)
    expected = plain(mixed())
    it = iter(nd.Dataset.load(path))
    first = plain([next(it) for _ in range(123)])
    state = it.save()
    rest = plain(it)
    again = iter(nd.Dataset.load(path))
    again.restore(state)
    assert plain(again) == rest
    assert first + rest == expected
    snap = mixed().snapshot(str(tmp_path / "snap"), compression=compression)
    list(snap)                                    # written
    it = iter(snap)
    first = plain([next(it) for _ in range(77)])
    state = it.save()
    again = iter(snap)
    again.restore(state)
    assert first + plain(again) == expected


def test_load_compression_must_match(tmp_path):
    gz, none = str(tmp_path / "gz"), str(tmp_path / "none")
    nd.Dataset.range(5).save(gz, compression="GZIP")
    nd.Dataset.range(5).save(none)
    for wrong in ("SNAPPY", "NONE", "", "AUTO"):
        with pytest.raises(nd.errors.DataLossError, match="saved with compression='GZIP'"):
            nd.Dataset.load(gz, compression=wrong)
    with pytest.raises(nd.errors.DataLossError, match="saved with compression=None"):
        nd.Dataset.load(none, compression="GZIP")
    for right in ("NONE", "", "AUTO", None):
        assert [int(x) for x in nd.Dataset.load(none, compression=right)] == list(range(5))
    with pytest.raises(ValueError, match="compression must be"):
        nd.Dataset.load(gz, compression="ZSTD")
    with pytest.raises(ValueError, match="compression must be"):
        nd.Dataset.range(3).save(str(tmp_path / "x"), compression="gzip")
    with pytest.raises(ValueError, match="compression must be"):
        nd.Dataset.range(3).snapshot(str(tmp_path / "y"), compression="LZ4")


def test_snappy_without_a_codec(tmp_path, monkeypatch):
    path = str(tmp_path / "s")
    nd.Dataset.range(5).save(path, compression="SNAPPY")
    monkeypatch.setitem(sys.modules, "pyarrow", None)    # import pyarrow: ImportError
    monkeypatch.setitem(sys.modules, "snappy", None)
    with pytest.raises(nd.errors.UnimplementedError, match="pip install pyarrow"):
        nd.Dataset.range(3).save(str(tmp_path / "t"), compression="SNAPPY")
    with pytest.raises(nd.errors.UnimplementedError, match="pip install pyarrow"):
        nd.Dataset.range(3).snapshot(str(tmp_path / "u"), compression="SNAPPY")
    with pytest.raises(nd.errors.UnimplementedError, match=r"\.shard holds snappy"):
        list(nd.Dataset.load(path))
    # GZIP and uncompressed files need neither
    nd.Dataset.range(3).save(str(tmp_path / "g"), compression="GZIP")
    assert [int(x) for x in nd.Dataset.load(str(tmp_path / "g"))] == [0, 1, 2]
