"""User functions are called only on symbolic values (the recorder) or on real elements,
never on made-up inputs: a function with side effects runs them only for data that
exists, and a function that cannot be recorded takes its spec from the first real
elements, when the spec is first needed."""

import os

import numpy as np
import pytest

import nbdata as nd


def _marker_fn(folder):
    def process(s):
        name = s.decode()   # a symbolic string has no decode(): not recordable
        with open(os.path.join(folder, f"processed_{name}.marker"), "w"):
            pass
        return np.int64(len(name))
    return process


def test_a_never_iterated_dataset_calls_nothing_made_up(tmp_path):
    # The function writes a file per input (not recordable: a symbolic string has no
    # decode()). Building the map creates no file; a filter after it needs the map's
    # spec, which comes from the first real elements: files of real elements only.
    src = nd.Dataset.from_tensor_slices(np.array([b"x", b"yz", b"abc", b"d", b"ef"], object))
    ds = src.map(_marker_fn(tmp_path))
    assert os.listdir(tmp_path) == []
    ds = ds.filter(lambda n: n > 0).batch(2)
    assert set(os.listdir(tmp_path)) <= {f"processed_{n}.marker" for n in ["x", "yz", "abc"]}
    del ds


def test_asking_the_spec_calls_the_function_on_real_elements_only(tmp_path):
    ds = nd.Dataset.from_tensor_slices(np.array([b"x", b"yz", b"abc", b"d"], object))
    ds = ds.map(_marker_fn(tmp_path))
    assert ds.element_spec == nd.TensorSpec((), np.int64)
    # the first elements (up to three), and nothing made up
    assert sorted(os.listdir(tmp_path)) == ["processed_abc.marker", "processed_x.marker",
                                           "processed_yz.marker"]
    assert [int(v) for v in ds] == [1, 2, 3, 1]
    assert sorted(os.listdir(tmp_path)) == sorted(
        f"processed_{n}.marker" for n in ["x", "yz", "abc", "d"])


def test_a_filter_predicate_that_cannot_be_recorded_is_not_called_at_build(tmp_path):
    calls = []

    def keep(x):
        calls.append(int(x))
        return int(x) % 2 == 0

    ds = nd.Dataset.range(5).filter(keep)
    assert ds.element_spec == nd.TensorSpec((), np.int64) and calls == []
    assert [int(v) for v in ds] == [0, 2, 4] and calls == [0, 1, 2, 3, 4]


def test_list_files_then_np_load(tmp_path):
    # np.load cannot take a symbolic file name: the spec comes from the first files.
    arrays = [np.arange(n * 3, dtype=np.float32).reshape(n, 3) for n in (2, 5, 1)]
    for k, a in enumerate(arrays):
        np.save(tmp_path / f"part{k}.npy", a)
    ds = nd.Dataset.list_files(str(tmp_path / "*.npy"), shuffle=False).map(np.load)
    assert ds.element_spec == nd.TensorSpec((None, 3), np.float32)   # 2, 5, 1 rows
    got = list(ds)
    assert len(got) == 3
    for g, a in zip(got, arrays):
        np.testing.assert_array_equal(g, a)
    rows = ds.unbatch().batch(4)
    assert [b.shape for b in rows] == [(4, 3), (4, 3)]


def test_dims_are_static_where_the_first_elements_agree():
    ds = nd.Dataset.range(10).map(lambda x: np.zeros(3 + int(x) // 5))   # int(): not recorded
    assert ds.element_spec == nd.TensorSpec((3,), np.float64)
    single = nd.Dataset.range(1).map(lambda x: np.zeros(3 + int(x) // 5))
    assert single.element_spec == nd.TensorSpec((None,), np.float64)


def test_an_empty_input_asks_for_a_signature():
    ds = nd.Dataset.range(0).map(lambda x: np.zeros(int(x)))
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match="first input elements, but the input has none; pass output_signature"):
        ds.element_spec  # noqa: B018
    ok = nd.Dataset.range(0).map(lambda x: np.zeros(int(x)),
                                 output_signature=nd.TensorSpec((None,), np.float64))
    assert list(ok) == [] and ok.element_spec == nd.TensorSpec((None,), np.float64)


def test_a_dataset_function_that_ignores_its_input_is_recorded_on_an_empty_input():
    ds = nd.Dataset.range(0).interleave(lambda x: nd.Dataset.range(3), cycle_length=2)
    assert ds.element_spec == nd.TensorSpec((), np.int64) and list(ds) == []


def test_the_spec_read_does_not_advance_the_dataset():
    ds = nd.Dataset.range(6).shuffle(6, seed=1).map(lambda x: np.int64(int(x) * 10))
    first = [int(v) for v in ds]
    ds2 = nd.Dataset.range(6).shuffle(6, seed=1).map(lambda x: np.int64(int(x) * 10))
    ds2.element_spec  # noqa: B018
    assert [int(v) for v in ds2] == first
