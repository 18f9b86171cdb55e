"""save / load / snapshot: nbdata's checksummed column format (cache's), read back."""

import os

import numpy as np
import pytest

import nbdata as nd


def _elements(ds):
    return [(int(a), s, b.tolist()) for a, s, b in ds]


def make():
    return nd.Dataset.range(12).map(lambda x: (x, str(int(x)).encode(), np.full(2, x * 0.5)))


def test_save_load_roundtrip(tmp_path):
    path = str(tmp_path / "saved")
    make().save(path)
    loaded = nd.Dataset.load(path)
    assert loaded.element_spec == make().element_spec
    assert loaded.cardinality() == 12
    assert _elements(loaded) == _elements(make())
    again = nd.experimental.load(path, element_spec=make().element_spec)
    assert _elements(again.map(lambda a, s, b: (a, s, b)).batch(5).unbatch()) == _elements(make())


def test_save_dicts_and_experimental_names(tmp_path):
    path = str(tmp_path / "d")
    ds = nd.Dataset.from_tensor_slices({"a": np.arange(4), "b": np.arange(4.0)})
    nd.experimental.save(ds, path)
    out = list(nd.experimental.load(path))
    assert [int(e["a"]) for e in out] == [0, 1, 2, 3]


def test_save_shard_func_and_reader_func(tmp_path):
    path = str(tmp_path / "sharded")
    nd.Dataset.range(10).save(path, shard_func=lambda x: x % 2)
    (run,) = [d for d in os.listdir(path) if os.path.isdir(os.path.join(path, d))]
    assert sorted(os.listdir(os.path.join(path, run))) == ["00000000.shard", "00000001.shard"]
    assert "snapshot.metadata" in os.listdir(path)
    assert [int(x) for x in nd.Dataset.load(path)] == list(range(10))   # round robin
    one_after_other = nd.Dataset.load(path, reader_func=lambda ds: ds.flat_map(lambda d: d))
    assert [int(x) for x in one_after_other] == [0, 2, 4, 6, 8, 1, 3, 5, 7, 9]
    nd.Dataset.range(3).save(path)                                    # replaces it
    assert [int(x) for x in nd.Dataset.load(path)] == [0, 1, 2]


def test_load_errors(tmp_path):
    with pytest.raises(nd.errors.NotFoundError):
        nd.Dataset.load(str(tmp_path / "nothing"))
    path = str(tmp_path / "s")
    nd.Dataset.range(3).save(path)
    with pytest.raises(nd.errors.InvalidArgumentError):
        nd.Dataset.load(path, element_spec=nd.TensorSpec((), np.float32))


def test_a_changed_byte_is_data_loss(tmp_path):
    path = str(tmp_path / "s")
    nd.Dataset.range(1000).save(path)
    (run,) = [d for d in os.listdir(path) if os.path.isdir(os.path.join(path, d))]
    data = os.path.join(path, run, "00000000.shard")
    raw = bytearray(open(data, "rb").read())
    raw[len(raw) // 2] ^= 0x40
    open(data, "wb").write(bytes(raw))
    with pytest.raises(nd.errors.DataLossError):
        list(nd.Dataset.load(path))


def test_load_restores(tmp_path):
    path = str(tmp_path / "s")
    nd.Dataset.range(50).save(path)
    it = iter(nd.Dataset.load(path))
    head = [int(next(it)) for _ in range(17)]
    again = iter(nd.Dataset.load(path))
    again.restore(it.save())
    assert head + [int(x) for x in again] == list(range(50))


def _layout(path):
    """{fingerprint dir: (entries, {run dir: shard files})} of a snapshot directory."""
    out = {}
    for fp in sorted(os.listdir(path)):
        entries = sorted(os.listdir(os.path.join(path, fp)))
        runs = {r: sorted(os.listdir(os.path.join(path, fp, r))) for r in entries
                if os.path.isdir(os.path.join(path, fp, r))}
        out[fp] = (entries, runs)
    return out


def test_snapshot_writes_once_and_reads_after(tmp_path):
    calls = []

    def f(x):
        calls.append(1)
        return x * 3

    ds = nd.Dataset.range(6).map(f).apply(nd.experimental.snapshot(str(tmp_path)))
    del calls[:]
    assert [int(x) for x in ds] == [0, 3, 6, 9, 12, 15]
    assert len(calls) == 6
    assert [int(x) for x in ds] == [0, 3, 6, 9, 12, 15]
    assert len(calls) == 6            # the second iteration reads the snapshot
    (entries, runs), = _layout(tmp_path).values()
    assert entries[-1] == "snapshot.metadata" and len(runs) == 1
    shards = list(runs.values())[0]
    assert shards == ["%08d.shard" % i for i in range(min(6, os.cpu_count()))]

    def build():   # the same pipeline built again (in another process too): same files
        return nd.Dataset.range(6).map(lambda x: x * 3).snapshot(str(tmp_path / "p"))
    assert [int(x) for x in build()] == [0, 3, 6, 9, 12, 15]
    assert [int(x) for x in build()] == [0, 3, 6, 9, 12, 15]
    assert len(_layout(tmp_path / "p")) == 1
    other = nd.Dataset.range(6).map(lambda x: x + 1).snapshot(str(tmp_path / "p"))
    assert [int(x) for x in other] == [1, 2, 3, 4, 5, 6]   # another pipeline, its own files
    assert len(_layout(tmp_path / "p")) == 2


def test_snapshot_reads_without_its_input(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("".join(f"line {i}\n" for i in range(50)))
    out = str(tmp_path / "snap")
    first = [x for x in nd.TextLineDataset(str(src)).snapshot(out)]
    os.unlink(src)
    assert [x for x in nd.TextLineDataset(str(src)).snapshot(out)] == first


def test_snapshot_shard_func_and_restore(tmp_path):
    def make():
        return nd.Dataset.range(20).snapshot(str(tmp_path), shard_func=lambda x: x % 3)
    assert sorted(int(x) for x in make()) == list(range(20))
    (entries, runs), = _layout(tmp_path).values()
    assert list(runs.values())[0] == ["00000000.shard", "00000001.shard", "00000002.shard"]
    full = [int(x) for x in make()]        # read back: round robin over the 3 shards
    assert full == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
    for k in (0, 7, 20):
        it = iter(make())
        head = [int(next(it)) for _ in range(k)]
        again = iter(make())
        again.restore(it.save())
        assert head + [int(x) for x in again] == full


def test_partial_iteration_leaves_no_snapshot(tmp_path):
    it = iter(nd.Dataset.range(10).snapshot(str(tmp_path)))
    next(it)
    del it
    for entries, runs in _layout(tmp_path).values():
        assert "snapshot.metadata" not in entries and not runs


def test_fingerprint():
    assert nd.Dataset.range(3).fingerprint() == nd.Dataset.range(3).fingerprint()
    assert nd.Dataset.range(3).fingerprint() != nd.Dataset.range(4).fingerprint()


def test_load_with_wait_waits_for_a_save_in_progress(tmp_path):
    import threading
    import time
    path = str(tmp_path / "saved")
    with pytest.raises(nd.errors.NotFoundError):
        nd.Dataset.load(path)                      # nothing there yet, no wait
    writer = threading.Thread(target=lambda: (time.sleep(0.3),
                                              nd.Dataset.range(5).map(lambda x: x * 3).save(path)))
    writer.start()
    started = time.perf_counter()
    loaded = nd.Dataset.load(path, wait=True)      # returns once the save is complete
    assert time.perf_counter() - started >= 0.3
    assert [int(x) for x in loaded] == [0, 3, 6, 9, 12]
    writer.join()
    with pytest.raises(TypeError, match="wait must be a bool"):
        nd.Dataset.load(path, wait="yes")


def test_snapshot_reader_func_reads_a_complete_snapshot(tmp_path):
    """The first iteration writes (reader_func not involved); a complete snapshot is read
    through reader_func's dataset: here the shards one after the other instead of round
    robin, and that reading resumes from a saved state."""
    def shards_in_turn(datasets):
        return datasets.flat_map(lambda d: d)
    ds = nd.Dataset.range(10).map(lambda x: x * 2).enumerate().snapshot(
        str(tmp_path), shard_func=lambda i, x: i % 2, reader_func=shards_in_turn)
    assert [int(x) for _, x in ds] == [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]   # writes
    # read back: shard 0 (rows 0, 2, 4, ...), then shard 1
    want = [0, 4, 8, 12, 16, 2, 6, 10, 14, 18]
    assert [int(x) for _, x in ds] == want
    it = iter(ds)
    head = [int(next(it)[1]) for _ in range(4)]
    again = iter(ds)
    again.restore(it.save())
    assert head + [int(x) for _, x in again] == want


def test_snapshot_reader_func_on_a_file_dataset(tmp_path):
    """reader_func's datasets are plain datasets whatever the snapshotted dataset's
    class (a TFRecordDataset's snapshot read back through an interleave)."""
    path = str(tmp_path / "r.tfrecord")
    with nd.io.TFRecordWriter(path) as w:
        for k in range(20):
            w.write(b"record %d" % k)
    ds = nd.TFRecordDataset(path).snapshot(
        str(tmp_path / "snap"), reader_func=lambda d: d.interleave(lambda x: x, cycle_length=2))
    first = [bytes(x) for x in ds]
    assert first == [b"record %d" % k for k in range(20)]
    assert sorted(bytes(x) for x in ds) == sorted(first)
