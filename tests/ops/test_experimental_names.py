"""The rest of issue 35's names: map_and_batch, parallel_interleave, shuffle_and_repeat,
enumerate_dataset, index_shuffle, pad_to_cardinality, Optional, tables, TFRecordWriter,
parse_example_dataset, make_batched_features_dataset, options and constants."""

import os

import numpy as np
import pytest

import nbdata as nd

E = nd.experimental


def ints(ds):
    return [int(x) for x in ds]


def test_map_and_batch():
    ds = nd.Dataset.range(7).apply(E.map_and_batch(lambda x: x * 2, 3, drop_remainder=True))
    assert [b.tolist() for b in ds] == [[0, 2, 4], [6, 8, 10]]
    assert ds.element_spec.shape == (3,)
    ds = nd.Dataset.range(5).apply(E.map_and_batch(lambda x: x, 2, num_parallel_batches=2))
    assert [b.tolist() for b in ds] == [[0, 1], [2, 3], [4]]
    with pytest.raises(ValueError):
        E.map_and_batch(lambda x: x, 2, num_parallel_batches=1, num_parallel_calls=1)


def test_parallel_interleave_and_shuffle_and_repeat():
    ds = nd.Dataset.range(1, 4).apply(E.parallel_interleave(
        lambda x: nd.Dataset.from_tensors(x).repeat(x), cycle_length=2))
    assert ints(ds) == [1, 2, 2, 3, 3, 3]
    sloppy = nd.Dataset.range(1, 4).apply(E.parallel_interleave(
        lambda x: nd.Dataset.from_tensors(x).repeat(x), cycle_length=2, sloppy=True))
    assert sorted(ints(sloppy)) == [1, 2, 2, 3, 3, 3]
    ds = nd.Dataset.range(5).apply(E.shuffle_and_repeat(5, count=2, seed=1))
    out = ints(ds)
    assert sorted(out[:5]) == sorted(out[5:]) == list(range(5)) and out[:5] != out[5:]
    assert ints(nd.Dataset.range(3).apply(E.enumerate_dataset(4)).map(lambda i, x: i)) == [4, 5, 6]


def test_index_shuffle():
    infos = [{"path": "a", "num_elements": 10, "skip": 2, "take": 5},
             {"path": "b", "num_elements": 10, "skip": -1},
             {"path": "c", "num_elements": 10, "take": -1}]
    ds = E.index_shuffle(infos, lambda paths: nd.Dataset.range(10 * len(paths)), seed=4)
    out = ints(ds)
    assert sorted(out) == [2, 3, 4, 5, 6] + list(range(20, 30))
    assert out == ints(E.index_shuffle(infos, lambda p: nd.Dataset.range(30), seed=4))
    again = ints(E.index_shuffle(infos, lambda p: nd.Dataset.range(30), seed=5))
    assert again != out
    re = E.index_shuffle(infos, lambda p: nd.Dataset.range(30), seed=4,
                         reshuffle_each_iteration=True)
    assert ints(re) != ints(re)


def test_pad_to_cardinality():
    ds = nd.Dataset.from_tensor_slices({"a": np.arange(2), "s": np.array([b"x", b"y"])})
    out = list(ds.apply(E.pad_to_cardinality(4)))
    assert [bool(e["valid"]) for e in out] == [True, True, False, False]
    assert [int(e["a"]) for e in out] == [0, 1, 0, 0] and out[3]["s"] == b""
    with pytest.raises(ValueError):
        ds.apply(E.pad_to_cardinality(1))
    with pytest.raises(ValueError):
        ds.filter(lambda e: True).apply(E.pad_to_cardinality(4))
    with pytest.raises(ValueError, match="requires its input dataset to be a dictionary"):
        nd.Dataset.range(2).apply(E.pad_to_cardinality(4))     # TF's class for it


def test_optional():
    it = iter(nd.Dataset.range(1))
    first, second = E.get_next_as_optional(it), E.get_next_as_optional(it)
    assert bool(first.has_value()) and int(first.get_value()) == 0
    assert not bool(second.has_value())
    with pytest.raises(nd.errors.InvalidArgumentError):
        second.get_value()
    assert int(E.Optional.from_value(np.int32(3)).get_value()) == 3
    assert not E.Optional.empty(nd.TensorSpec((), np.int64)).has_value()


def test_tables():
    t = E.table_from_dataset(nd.Dataset.from_list([("a", 1), ("b", 2)]), default_value=-1)
    assert t.lookup(["b", "x"]).tolist() == [2, -1] and int(t.size()) == 2
    idx = E.index_table_from_dataset(nd.Dataset.from_list(["x", "y"]))
    assert idx.lookup(np.array([b"y", b"z"], dtype=object)).tolist() == [1, -1]
    with pytest.raises(nd.errors.InvalidArgumentError):
        E.table_from_dataset(nd.Dataset.from_list([("a", 1), ("a", 2)]))


def test_tfrecord_writer_and_example_datasets(tmp_path):
    path = str(tmp_path / "r.tfrecord")
    records = nd.Dataset.range(5).map(
        lambda i: nd.io.encode_example({"x": [int(i)], "y": [float(i) * 2]}))
    E.TFRecordWriter(path).write(records)
    features = {"x": nd.io.FixedLenFeature([], np.int64), "y": nd.io.FixedLenFeature([], np.float32)}
    parsed = nd.TFRecordDataset(path).batch(2).apply(E.parse_example_dataset(features))
    assert [b["x"].tolist() for b in parsed] == [[0, 1], [2, 3], [4]]
    ds = E.make_batched_features_dataset(path, 2, features, label_key="y", num_epochs=1,
                                         shuffle=False)
    got = [(f["x"].tolist(), y.tolist()) for f, y in ds]
    assert got == [([0, 1], [0.0, 2.0]), ([2, 3], [4.0, 6.0]), ([4], [8.0])]
    forever = E.make_batched_features_dataset(path, 2, features, shuffle_seed=1)
    assert forever.element_spec["x"].shape == (2,)
    assert len(list(forever.take(6))) == 6
    with pytest.raises(TypeError):
        E.TFRecordWriter(path).write(nd.Dataset.range(2))


def test_options_constants_and_structure():
    assert E.INFINITE_CARDINALITY == nd.INFINITE and E.UNKNOWN_CARDINALITY == nd.UNKNOWN
    assert E.cardinality(nd.Dataset.range(3)) == 3
    assert E.get_structure(nd.Dataset.range(3)) == nd.TensorSpec((), np.int64)
    assert E.OptimizationOptions is nd.OptimizationOptions
    assert E.ThreadingOptions is nd.ThreadingOptions and E.AutotuneOptions is nd.AutotuneOptions
    o = nd.Options()
    o.experimental_deterministic = False
    o.experimental_optimization.map_parallelization = True
    o.experimental_optimization.apply_default_optimizations = False
    o.experimental_threading.private_threadpool_size = 2
    o.experimental_slack = True
    o.experimental_distribute.auto_shard_policy = E.AutoShardPolicy.DATA
    assert o.deterministic is False and o.threading.private_threadpool_size == 2
    assert o.experimental_deterministic is False and o.experimental_slack is True
    assert isinstance(o.experimental_distribute, E.DistributeOptions)
    ds = nd.Dataset.range(4).with_options(o)
    assert ints(ds) == [0, 1, 2, 3]
    assert ints(nd.Dataset.range(3).prefetch(None)) == [0, 1, 2]


def test_every_issue_35_name_exists():
    for name in ["from_list", "counter", "random", "sample_from_datasets",
                 "choose_from_datasets", "scan", "take_while", "unique", "group_by_window",
                 "bucket_by_sequence_length", "ragged_batch", "sparse_batch",
                 "rejection_resample", "rebatch", "snapshot", "save", "load",
                 "get_single_element", "fingerprint", "group_by_reducer"]:
        assert hasattr(nd.Dataset, name), name
    for name in ["CsvDataset", "make_csv_dataset", "make_batched_features_dataset",
                 "parse_example_dataset", "sample_from_datasets", "choose_from_datasets",
                 "scan", "take_while", "unique", "group_by_window", "group_by_reducer",
                 "Reducer", "bucket_by_sequence_length", "dense_to_sparse_batch",
                 "dense_to_ragged_batch", "rejection_resample", "pad_to_cardinality",
                 "get_single_element", "get_next_as_optional", "Optional", "from_list",
                 "Counter", "RandomDataset", "snapshot", "save", "load", "enumerate_dataset",
                 "map_and_batch", "parallel_interleave", "shuffle_and_repeat",
                 "index_table_from_dataset", "table_from_dataset", "get_structure",
                 "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY", "OptimizationOptions",
                 "ThreadingOptions", "AutotuneOptions", "DistributeOptions", "AutoShardPolicy",
                 "index_shuffle", "TFRecordWriter"]:
        assert getattr(nd.experimental, name) is not None, name


def test_compat_v1_experimental_names(tmp_path):
    import nbdata.compat.v1 as tf
    path = str(tmp_path / "w.tfrecord")
    tf.data.experimental.TFRecordWriter(path).write(nd.Dataset.from_list([b"x", b"yz"]))
    assert list(nd.TFRecordDataset(path)) == [b"x", b"yz"]
    assert tf.data.experimental.map_and_batch is E.map_and_batch
    assert tf.data.experimental.CsvDataset is E.CsvDataset


def test_parallel_interleave_buffering_hints_read_ahead_without_changing_the_elements():
    ds = nd.Dataset.range(6)

    def make(x):
        return nd.Dataset.from_tensors(x).repeat(3)
    plain = [int(v) for v in ds.apply(nd.experimental.parallel_interleave(make, 2))]
    hinted = ds.apply(nd.experimental.parallel_interleave(
        make, 2, buffer_output_elements=2, prefetch_input_elements=4))
    assert [int(v) for v in hinted] == plain == [0, 1] * 3 + [2, 3] * 3 + [4, 5] * 3
    assert "prefetch(buffer_size=4)" in hinted.compile().explain()   # the input read ahead
    none_ahead = ds.apply(nd.experimental.parallel_interleave(make, 2, prefetch_input_elements=0))
    assert [int(v) for v in none_ahead] == plain   # 0 is allowed (as TF): no read-ahead
    for bad in (0, -1, 1.5, True):
        with pytest.raises(nd.errors.InvalidArgumentError, match="must be an integer >= 1"):
            ds.apply(nd.experimental.parallel_interleave(make, 2, buffer_output_elements=bad))
    for bad in (-1, 1.5, True):
        with pytest.raises(nd.errors.InvalidArgumentError, match="must be an integer >= 0"):
            ds.apply(nd.experimental.parallel_interleave(make, 2, prefetch_input_elements=bad))
