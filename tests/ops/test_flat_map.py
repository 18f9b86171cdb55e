"""Dataset.flat_map: each element maps to a dataset; results are concatenated in order."""

import numpy as np
import pytest

import nbdata as nd

from equivalence import assert_same, fusing, reference


def test_doc_example_unbatches_rows():
    # From the tf.data docs: flat_map over a dataset of rows.
    ds = nd.Dataset.from_tensor_slices([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    ds = ds.flat_map(lambda x: nd.Dataset.from_tensor_slices(x))
    got = list(ds)
    assert [int(v) for v in got] == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert all(type(v) is np.int64 for v in got)


def test_inner_datasets_of_different_lengths():
    ds = nd.Dataset.range(5).flat_map(lambda n: nd.Dataset.range(n))
    assert [int(v) for v in ds] == [0, 0, 1, 0, 1, 2, 0, 1, 2, 3]


def test_empty_inner_datasets_are_skipped():
    ds = nd.Dataset.from_tensor_slices(np.array([0, 2, 0, 0, 1])).flat_map(
        lambda n: nd.Dataset.range(10 * n, 10 * n + n)
    )
    assert [int(v) for v in ds] == [20, 21, 10]


def test_repeat_inner():
    ds = nd.Dataset.range(3).flat_map(lambda x: nd.Dataset.from_tensors(x).repeat(2))
    assert [int(v) for v in ds] == [0, 0, 1, 1, 2, 2]


def test_element_spec_comes_from_inner_dataset():
    ds = nd.Dataset.range(3).flat_map(
        lambda x: nd.Dataset.from_tensors((np.zeros(4, np.float32), x))
    )
    assert ds.element_spec == (nd.TensorSpec((4,), np.float32), nd.TensorSpec((), np.int64))
    got = list(ds)
    assert len(got) == 3
    assert got[1][0].dtype == np.float32 and int(got[1][1]) == 1


def test_cardinality_is_unknown():
    ds = nd.Dataset.range(3).flat_map(lambda x: nd.Dataset.range(2))
    assert ds.cardinality() == nd.UNKNOWN


def test_tuple_elements_are_unpacked():
    src = nd.Dataset.from_tensor_slices((np.array([1, 2]), np.array([10, 20])))
    ds = src.flat_map(lambda n, base: nd.Dataset.range(n).map(lambda i: i + base))
    assert [int(v) for v in ds] == [10, 20, 21]


def test_dict_element_is_one_argument():
    src = nd.Dataset.from_tensor_slices({"n": np.array([2, 1]), "v": np.array([7, 8])})
    ds = src.flat_map(lambda d: nd.Dataset.from_tensors(d["v"]).repeat(d["n"]))
    assert [int(v) for v in ds] == [7, 7, 8]


def test_inner_pipeline_with_map_and_batch():
    ds = nd.Dataset.range(1, 4).flat_map(
        lambda n: nd.Dataset.range(n * 10, n * 10 + 3).map(lambda v: v * 2).batch(2)
    )
    got = list(ds)
    assert [list(map(int, b)) for b in got] == [[20, 22], [24], [40, 42], [44], [60, 62], [64]]


def test_strings():
    src = nd.Dataset.from_tensor_slices(["a b", "c"])
    ds = src.flat_map(lambda s: nd.Dataset.from_tensor_slices(s.split(b" ")))
    assert list(ds) == [b"a", b"b", b"c"]


def test_laziness_with_infinite_inner_dataset():
    ds = nd.Dataset.range(3).flat_map(lambda x: nd.Dataset.from_tensors(x).repeat()).take(4)
    assert [int(v) for v in ds] == [0, 0, 0, 0]


def test_reiteration_and_reference_path():
    ds = nd.Dataset.range(4).flat_map(lambda n: nd.Dataset.range(n).map(lambda v: (v, n)))
    fds = fusing(ds)
    got, ref, again = list(fds), list(reference(ds)), list(fds)
    assert len(got) == len(ref) == 6
    assert_same(got, ref)
    assert_same(got, again)
    assert [(int(a), int(b)) for a, b in got] == [(0, 1), (0, 2), (1, 2), (0, 3), (1, 3), (2, 3)]


def test_function_not_returning_dataset_is_type_error():
    with pytest.raises(TypeError, match="flat_map"):
        list(nd.Dataset.range(3).flat_map(lambda x: x))
    with pytest.raises(TypeError, match="flat_map"):
        list(nd.Dataset.range(3).flat_map(lambda x: [x, x]))


def test_inconsistent_inner_structure_is_an_error():
    def f(x):
        if int(x) < 2:
            return nd.Dataset.from_tensors(x)
        return nd.Dataset.from_tensors((x, x))

    with pytest.raises((TypeError, ValueError, nd.errors.OpError)):
        list(nd.Dataset.range(4).flat_map(f))


def test_inconsistent_inner_dtype_is_an_error():
    def f(x):
        if int(x) < 2:
            return nd.Dataset.from_tensors(x)
        return nd.Dataset.from_tensors(np.float32(x))

    with pytest.raises((TypeError, ValueError, nd.errors.OpError)):
        list(nd.Dataset.range(4).flat_map(f))


def test_not_callable_is_type_error():
    with pytest.raises(TypeError):
        nd.Dataset.range(3).flat_map(nd.Dataset.range(2))


def test_exception_in_function_is_chained():
    boom = ValueError("no dataset for you")

    def f(x):
        if int(x) == 1:
            raise boom
        return nd.Dataset.from_tensors(x)

    with pytest.raises(nd.errors.OpError, match="flat_map") as info:
        list(nd.Dataset.range(3).flat_map(f))
    assert info.value.__cause__ is boom
