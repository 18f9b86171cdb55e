"""Big-endian arrays (a file's bytes, ``np.dtype(">f8")``) are sources like any other: their
elements have the native dtype their spec says, and every path takes them (the kernels
take native arrays only: a shuffle after a cache raised Numba's TypingError)."""

import numpy as np
import pytest

import nbdata as nd


def _no_fusion():
    o = nd.Options()
    o.fusion = False
    return o


@pytest.mark.parametrize("chain", ["plain", "shuffle", "cache", "no fusion", "map"])
def test_a_big_endian_source_gives_native_elements(chain):
    x = np.arange(72.0).reshape(12, 6)
    ds = nd.Dataset.from_tensor_slices(x.astype(">f8"))
    ref = nd.Dataset.from_tensor_slices(x)
    make = {"plain": lambda d: d.batch(5),
            "shuffle": lambda d: d.shuffle(6, seed=2).batch(5),
            "cache": lambda d: d.cache().shuffle(6, seed=2).batch(5),
            "no fusion": lambda d: d.shuffle(6, seed=2).batch(5).with_options(_no_fusion()),
            "map": lambda d: d.map(lambda v: v * 2.0).batch(5)}[chain]
    assert make(ds).element_spec == make(ref).element_spec
    got, want = list(make(ds)), list(make(ref))
    assert [g.dtype for g in got] == [np.dtype(np.float64)] * 3
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_a_big_endian_memory_map_gives_native_rows(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.arange(12.0).reshape(6, 2).astype(">f8"))
    mapped = np.load(path, mmap_mode="r")
    for ds in (nd.Dataset.from_tensor_slices(mapped),
               nd.Dataset.from_tensor_slices(mapped).shuffle(6, seed=1).batch(3)
               .with_options(_no_fusion())):
        got = list(ds)
        assert {g.dtype for g in got} == {np.dtype(np.float64)}
    assert sorted(np.concatenate(got).ravel().tolist()) == list(np.arange(12.0))


def test_a_big_endian_tensor_and_scalar():
    x = np.arange(4, dtype=">i4")
    (element,) = list(nd.Dataset.from_tensors(x))
    assert element.dtype == np.dtype(np.int32) and element.tolist() == [0, 1, 2, 3]
    assert next(iter(nd.Dataset.from_tensors(np.array(7, ">i8")))).dtype == np.dtype(np.int64)
