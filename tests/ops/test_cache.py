"""Tests for Dataset.cache: memory and file caches, reuse across epochs and datasets, no truncation."""

import gc
import os

import numpy as np
import pytest

import nbdata as nd

from equivalence import values


class Counter:
    """Counts how often upstream Python code runs (a side effect Numba cannot compile).

    ``int(x)`` cannot be recorded symbolically, so the map's output spec comes from
    calling the function on the first input element when the spec is first needed;
    reset(ds) asks for the spec, then forgets the calls so far: the tests count only
    what iteration runs.
    """

    def __init__(self):
        self.calls = {}

    def reset(self, ds=None):
        if ds is not None:
            ds.element_spec  # noqa: B018 - the first-element call happens here
        self.calls = {}

    def __call__(self, x):
        key = int(x)
        self.calls[key] = self.calls.get(key, 0) + 1
        return x

    @property
    def total(self):
        return sum(self.calls.values())


def counting_generator(n, log):
    def gen():
        log.append("start")
        yield from range(n)
    return gen


def gen_dataset(n, log):
    return nd.Dataset.from_generator(counting_generator(n, log), output_types=np.int64, output_shapes=())


# ---------------------------------------------------------------- memory cache

def test_doc_example_memory():
    ds = nd.Dataset.range(5).map(lambda x: x ** 2).cache()
    assert values(ds) == [0, 1, 4, 9, 16]
    assert values(ds) == [0, 1, 4, 9, 16]


def test_memory_cache_runs_upstream_once_over_repeat():
    counter = Counter()
    ds = nd.Dataset.range(6).map(counter).cache().repeat(2)
    counter.reset(ds)
    assert values(ds) == list(range(6)) * 2
    assert counter.total == 6 and all(c == 1 for c in counter.calls.values())


def test_memory_cache_runs_upstream_once_over_python_epochs():
    counter = Counter()
    ds = nd.Dataset.range(6).map(counter).cache()
    counter.reset(ds)
    assert values(ds) == list(range(6))
    assert values(ds) == list(range(6))
    for _ in ds:
        pass
    assert counter.total == 6


def test_memory_cache_generator_invoked_once():
    log = []
    ds = gen_dataset(4, log).cache()
    assert values(ds.repeat(3)) == [0, 1, 2, 3] * 3
    assert log == ["start"]


def test_memory_cache_then_shuffle_reshuffles_without_recomputing():
    counter = Counter()
    ds = nd.Dataset.range(30).map(counter).cache().shuffle(30, seed=1).repeat(2)
    counter.reset(ds)
    out = values(ds)
    assert sorted(out[:30]) == sorted(out[30:]) == list(range(30))
    assert out[:30] != out[30:]
    assert counter.total == 30


def test_memory_cache_partial_iteration_not_truncated():
    log = []
    ds = gen_dataset(10, log).cache()
    it = iter(ds)
    assert [int(next(it)) for _ in range(3)] == [0, 1, 2]
    del it
    gc.collect()
    assert values(ds) == list(range(10))
    assert values(ds) == list(range(10))


def test_memory_cache_take_then_repeat_not_truncated():
    # A first epoch that stops early must not leave a truncated cache behind.
    ds = nd.Dataset.range(10).cache()
    assert values(ds.take(4)) == [0, 1, 2, 3]
    assert values(ds) == list(range(10))


def test_memory_cache_keeps_types():
    data = (np.arange(6, dtype=np.int32).reshape(3, 2), np.array([b"a", b"", b"c\x00"], dtype=object),
            np.array([0.5, 1.5, 2.5], np.float32))
    ds = nd.Dataset.from_tensor_slices(data).cache()
    for _ in range(2):
        out = values(ds)
        assert len(out) == 3
        a, s, f = out[2]
        assert isinstance(a, np.ndarray) and a.dtype == np.int32 and a.tolist() == [4, 5]
        assert type(s) is bytes and s == b"c\x00"
        assert isinstance(f, np.float32) and f == 2.5


def test_memory_cache_empty_dataset():
    ds = nd.Dataset.range(0).cache()
    assert values(ds) == [] and values(ds.repeat(3)) == []


def test_cache_cardinality_and_spec():
    ds = nd.Dataset.from_tensor_slices(np.zeros((7, 2), np.float32))
    assert ds.cache().cardinality() == 7
    assert ds.cache().element_spec == ds.element_spec
    assert nd.Dataset.range(3).filter(lambda x: x > 0).cache().cardinality() == nd.UNKNOWN


def test_cache_with_fusion_off():
    counter = Counter()
    opts = nd.Options()
    opts.fusion = False
    ds = nd.Dataset.range(5).map(counter).cache().repeat(3).with_options(opts)
    counter.reset(ds)
    assert values(ds) == list(range(5)) * 3
    assert counter.total == 5


# ---------------------------------------------------------------- file cache

def cache_files(tmp_path, name):
    return [p for p in os.listdir(tmp_path) if p.startswith(name)]


def test_doc_example_file(tmp_path):
    path = str(tmp_path / "cache")
    ds = nd.Dataset.range(5).cache(path)
    assert values(ds) == [0, 1, 2, 3, 4]
    assert cache_files(tmp_path, "cache"), "no cache file written"
    # Same file: the new pipeline's upstream is not run.
    ds = nd.Dataset.range(10).cache(path)
    assert values(ds) == [0, 1, 2, 3, 4]


def test_file_cache_second_iteration_reads_file(tmp_path):
    counter = Counter()
    ds = nd.Dataset.range(8).map(counter).cache(str(tmp_path / "c"))
    counter.reset(ds)
    assert values(ds) == list(range(8))
    assert counter.total == 8
    assert values(ds) == list(range(8))
    assert values(ds.repeat(2)) == list(range(8)) * 2
    assert counter.total == 8


def test_file_cache_new_dataset_does_not_run_upstream(tmp_path):
    path = str(tmp_path / "c")
    log1 = []
    assert values(gen_dataset(6, log1).cache(path)) == list(range(6))
    assert log1 == ["start"]

    log2 = []
    ds2 = gen_dataset(100, log2).cache(path)
    assert values(ds2) == list(range(6))
    assert values(ds2) == list(range(6))
    assert log2 == []


def test_file_cache_partial_iteration_not_truncated(tmp_path):
    path = str(tmp_path / "c")
    ds = nd.Dataset.range(10).cache(path)
    it = iter(ds)
    assert [int(next(it)) for _ in range(2)] == [0, 1]
    del it
    gc.collect()
    # The partial cache must be discarded: a new pipeline with the same file
    # recomputes instead of reading a truncated [0, 1].
    ds2 = nd.Dataset.range(10).map(lambda x: x + 100).cache(path)
    assert values(ds2) == list(range(100, 110))


def test_file_cache_completed_after_partial_iteration(tmp_path):
    path = str(tmp_path / "c")
    ds = nd.Dataset.range(10).cache(path)
    it = iter(ds)
    next(it)
    del it
    gc.collect()
    assert values(ds) == list(range(10))
    assert values(nd.Dataset.range(3).cache(path)) == list(range(10))


def test_file_cache_roundtrips_types(tmp_path):
    data = {
        "img": np.arange(12, dtype=np.uint8).reshape(3, 2, 2),
        "name": np.array([b"x", b"yy\x00", b""], dtype=object),
        "score": np.array([1.25, -2.5, 3.0], np.float32),
        "id": np.array([1, 2, 3], np.int64),
    }
    path = str(tmp_path / "typed")
    first = values(nd.Dataset.from_tensor_slices(data).cache(path))
    # Read back by a pipeline whose upstream would give different data.
    other = {k: v[:1] for k, v in data.items()}
    second = values(nd.Dataset.from_tensor_slices(other).cache(path))
    assert len(first) == len(second) == 3
    for a, b in zip(first, second):
        assert set(a) == set(b) == set(data)
        assert b["img"].dtype == np.uint8 and b["img"].shape == (2, 2)
        np.testing.assert_array_equal(a["img"], b["img"])
        assert type(b["name"]) is bytes and a["name"] == b["name"]
        assert isinstance(b["score"], np.float32) and a["score"] == b["score"]
        assert isinstance(b["id"], np.int64) and a["id"] == b["id"]
    assert second[1]["name"] == b"yy\x00"


def test_file_cache_variable_shapes(tmp_path):
    def gen():
        for i in range(5):
            yield np.arange(i, dtype=np.float64)

    path = str(tmp_path / "var")
    ds = nd.Dataset.from_generator(gen, output_types=np.float64, output_shapes=(None,)).cache(path)
    for _ in range(2):
        out = values(ds)
        assert [o.tolist() for o in out] == [list(map(float, range(i))) for i in range(5)]


def test_file_cache_empty_dataset(tmp_path):
    path = str(tmp_path / "empty")
    assert values(nd.Dataset.range(0).cache(path)) == []
    assert values(nd.Dataset.range(0).cache(path)) == []


def test_different_filenames_are_independent(tmp_path):
    a = values(nd.Dataset.range(3).cache(str(tmp_path / "a")))
    b = values(nd.Dataset.range(5).cache(str(tmp_path / "b")))
    assert a == [0, 1, 2] and b == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("filename", [5, 1.5, [b"x"]])
def test_bad_filename_rejected(filename):
    with pytest.raises((TypeError, ValueError)):
        nd.Dataset.range(3).cache(filename)


def test_cache_freezes_order_of_upstream_shuffle():
    # tf.data: a cache replays exactly the elements of its first full pass, so a
    # shuffle *before* the cache gives the same order every epoch.
    ds = nd.Dataset.range(40).shuffle(40, seed=3).cache()
    e1, e2 = values(ds), values(ds)
    assert sorted(e1) == list(range(40))
    assert e1 == e2
    out = values(ds.repeat(2))
    assert out[:40] == out[40:] == e1
