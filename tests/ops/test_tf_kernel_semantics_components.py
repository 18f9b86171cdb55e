"""Components as TensorFlow's kernel tests use them: datasets as elements (one, or a
batch of them), None, range objects, and objects of TF's __tf_flatten__ protocol."""

import collections
import dataclasses

import numpy as np
import pytest

import nbdata as nd


def ints(ds):
    return [int(x) for x in ds]


def test_from_tensors_of_a_dataset_is_a_dataset_element():
    ds = nd.Dataset.from_tensors(nd.Dataset.range(10))
    assert ds.element_spec == nd.DatasetSpec(nd.TensorSpec((), np.int64))
    assert ints(ds.flat_map(lambda d: d)) == list(range(10))
    inner = nd.experimental.at(ds, 0)
    assert [int(nd.experimental.at(inner, i)) for i in range(10)] == list(range(10))
    pair = nd.Dataset.from_tensors((np.int64(7), nd.Dataset.range(3)))
    assert [(int(a), ints(d)) for a, d in pair] == [(7, [0, 1, 2])]
    assert [ints(d) for d in nd.Dataset.from_tensors(nd.Dataset.range(2)).repeat(3)] == [[0, 1]] * 3


def test_from_tensor_slices_of_a_list_of_datasets_yields_each_dataset():
    ds = nd.Dataset.from_tensor_slices([nd.Dataset.range(10) for _ in range(10)])
    assert ds.cardinality() == 10
    assert ints(ds.flat_map(lambda d: d)) == list(range(10)) * 10
    dicts = [nd.Dataset.range(4).map(lambda x: collections.OrderedDict([("x", x)]))
             for _ in range(3)]
    out = list(nd.Dataset.from_tensor_slices(dicts).flat_map(lambda d: d))
    assert [int(e["x"]) for e in out] == list(range(4)) * 3
    mixed = nd.Dataset.from_tensor_slices([nd.Dataset.range(2), nd.Dataset.range(5, 7)])
    assert ints(mixed.interleave(lambda d: d, cycle_length=2)) == [0, 5, 1, 6]


def test_a_list_of_datasets_is_a_batch_of_datasets_that_unbatches():
    ds = nd.Dataset.from_tensors([nd.Dataset.range(3) for _ in range(4)])
    spec = ds.element_spec
    assert isinstance(spec, nd.DatasetSpec) and spec.shape == (4,)
    assert ints(ds.unbatch().flat_map(lambda d: d)) == [0, 1, 2] * 4


def test_batching_dataset_elements_keeps_them_datasets():
    ds = nd.Dataset.range(10).map(lambda i: nd.Dataset.from_tensors(i)).batch(5)
    assert ds.element_spec == nd.DatasetSpec(nd.TensorSpec((), np.int64), (None,))
    batches = list(ds)
    assert len(batches) == 2 and all(b.shape == (5,) for b in batches)
    assert ints(ds.map(lambda x: x).unbatch().flat_map(lambda d: d)) == list(range(10))
    zipped = nd.Dataset.zip((nd.Dataset.range(4), nd.Dataset.range(8).window(2))).batch(2)
    assert [(a.tolist(), [ints(w) for w in ws]) for a, ws in zipped] == [
        ([0, 1], [[0, 1], [2, 3]]), ([2, 3], [[4, 5], [6, 7]])]


def test_windows_of_zipped_datasets_are_pairs_of_datasets():
    ds = nd.Dataset.zip((nd.Dataset.range(40), nd.Dataset.range(40))).window(10)
    for i, (x, y) in enumerate(ds):
        assert ints(x) == ints(y) == list(range(i * 10, (i + 1) * 10))
    batched = nd.Dataset.range(100).window(30, drop_remainder=True).flat_map(
        lambda w: w.batch(30)).batch(4)
    assert [b.tolist() for b in batched] == [[[y + 30 * x for y in range(30)] for x in range(3)]]


def test_none_components_pass_through_maps_batches_and_filters():
    ds = nd.Dataset.range(10).map(lambda x: (x, None))
    assert ds.element_spec == (nd.TensorSpec((), np.int64), None)
    assert [b.tolist() for b in ds.batch(10).map(lambda x, y: x)] == [list(range(10))]
    assert [(int(a), b) for a, b in ds.filter(lambda a, b: a > 7)] == [(8, None), (9, None)]
    assert [(a.tolist(), b) for a, b in ds.batch(5)] == [([0, 1, 2, 3, 4], None),
                                                        ([5, 6, 7, 8, 9], None)]
    with pytest.raises(nd.errors.InvalidArgumentError):   # no component at all
        nd.Dataset.from_tensors(None)
    with pytest.raises(ValueError, match="should not be empty"):
        nd.Dataset.from_tensor_slices(None)
    assert list(nd.Dataset.from_tensors({"a": 1, "b": None})) == [{"a": 1, "b": None}]
    sliced = nd.Dataset.from_tensor_slices((np.arange(3), None))
    assert [(int(a), b) for a, b in sliced] == [(0, None), (1, None), (2, None)]
    opts = nd.Options()
    opts.fusion_min_rows = 0
    fused = nd.Dataset.range(6000).map(lambda x: (x * 2, None)).map(lambda a, b: a + 1)
    assert np.concatenate(list(fused.batch(1000).with_options(opts))).tolist() == \
        [2 * i + 1 for i in range(6000)]
    with pytest.raises(TypeError, match="returned None"):   # at the top it is no element
        nd.Dataset.range(2).map(lambda x: None)


def test_range_objects_are_tensors_of_their_values():
    assert [x.tolist() for x in nd.Dataset.from_tensors(range(4))] == [[0, 1, 2, 3]]
    assert ints(nd.Dataset.from_tensor_slices(range(2, 8, 2))) == [2, 4, 6]
    assert nd.experimental.at(nd.Dataset.from_tensors(range(4)), 0).tolist() == [0, 1, 2, 3]


@dataclasses.dataclass
class MaskedValue:
    mask: bool
    value: object

    def __tf_flatten__(self):
        return (self.mask,), (self.value,)

    @classmethod
    def __tf_unflatten__(cls, metadata, components):
        return cls(mask=metadata[0], value=components[0])


@dataclasses.dataclass
class PlainRecord:
    a: int


def test_objects_of_tfs_flatten_protocol_are_structures():
    ds = nd.Dataset.from_tensors(MaskedValue(True, np.array([1, 2])))
    assert ds.element_spec == MaskedValue(True, nd.TensorSpec((2,), np.int64))
    (only,) = list(ds)
    assert only.mask is True and only.value.tolist() == [1, 2]
    sliced = list(nd.Dataset.from_tensor_slices(MaskedValue(False, np.array([3, 4]))))
    assert [(m.mask, int(m.value)) for m in sliced] == [(False, 3), (False, 4)]
    mapped = nd.Dataset.range(4).map(lambda x: MaskedValue(True, x * 2))
    assert [int(m.value) for m in mapped] == [0, 2, 4, 6]
    assert ints(mapped.map(lambda m: m.value + 1)) == [1, 3, 5, 7]
    assert [(m.mask, m.value.tolist()) for m in mapped.batch(2)] == [(True, [0, 2]), (True, [4, 6])]
    with pytest.raises(TypeError):
        nd.Dataset.from_tensors(PlainRecord(1))


def test_slices_of_datasets_and_sparse_tensors_resume_from_a_saved_state():
    sparse = nd.SparseTensor(indices=np.array([[0, 0], [1, 1], [2, 0], [3, 2]]),
                             values=np.array([1, 2, 3, 4]), dense_shape=np.array([4, 3]))
    for ds, norm, left in (
            (nd.Dataset.from_tensor_slices([nd.Dataset.range(k) for k in range(5)]), ints, 3),
            (nd.Dataset.from_tensor_slices(sparse), lambda s: s.values.tolist(), 2)):
        pipe = ds.compile()
        it = iter(pipe)
        next(it), next(it)
        state = it.save()
        rest = [norm(x) for x in it]
        again = iter(pipe)
        again.restore(state)
        assert [norm(x) for x in again] == rest and len(rest) == left


def test_attrs_classes_are_structures_as_in_tf_nest():
    attr = pytest.importorskip("attr")

    @attr.s
    class Pair:
        x = attr.ib()
        y = attr.ib()

    ds = nd.Dataset.from_tensors(Pair(x=1, y=2))
    assert ds.element_spec == Pair(nd.TensorSpec((), np.int64), nd.TensorSpec((), np.int64))
    assert [(int(p.x), int(p.y)) for p in ds] == [(1, 2)]
    sliced = nd.Dataset.from_tensor_slices(Pair(x=np.arange(3), y=np.arange(3) * 10))
    assert [(int(p.x), int(p.y)) for p in sliced] == [(0, 0), (1, 10), (2, 20)]
    assert ints(nd.Dataset.range(3).map(lambda v: Pair(v, v + 1)).map(lambda p: p.x + p.y)) == [1, 3, 5]
