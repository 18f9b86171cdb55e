"""Dataset.zip: elements combined in the structure of the datasets given."""

import collections

import numpy as np
import pytest

import nbdata as nd

from equivalence import assert_reference_matches, assert_same

Pair = collections.namedtuple("Pair", ["a", "b"])


def _ints(structure):
    if isinstance(structure, dict):
        return {k: _ints(v) for k, v in structure.items()}
    if isinstance(structure, tuple):
        return type(structure)(*(_ints(v) for v in structure)) if hasattr(structure, "_fields") \
            else tuple(_ints(v) for v in structure)
    return int(structure)


def test_tuple_of_datasets():
    a = nd.Dataset.range(1, 4)
    b = nd.Dataset.range(4, 7)
    ds = nd.Dataset.zip((a, b))
    got = list(ds)
    assert all(type(e) is tuple and len(e) == 2 for e in got)
    assert [_ints(e) for e in got] == [(1, 4), (2, 5), (3, 6)]
    assert all(type(v) is np.int64 for e in got for v in e)
    assert ds.element_spec == (nd.TensorSpec((), np.int64), nd.TensorSpec((), np.int64))


def test_positional_datasets_equal_tuple_form():
    a = nd.Dataset.range(3)
    b = nd.Dataset.from_tensor_slices(np.array([[1, 2], [3, 4], [5, 6]], np.float32))
    pos = list(nd.Dataset.zip(a, b))
    tup = list(nd.Dataset.zip((a, b)))
    assert len(pos) == len(tup) == 3
    for x, y in zip(pos, tup):
        assert_same(x, y)
    assert nd.Dataset.zip(a, b).element_spec == nd.Dataset.zip((a, b)).element_spec


def test_three_datasets():
    ds = nd.Dataset.zip((nd.Dataset.range(2), nd.Dataset.range(2), nd.Dataset.range(2)))
    assert [_ints(e) for e in ds] == [(0, 0, 0), (1, 1, 1)]


def test_single_dataset_tuple():
    ds = nd.Dataset.zip((nd.Dataset.range(2),))
    got = list(ds)
    assert [_ints(e) for e in got] == [(0,), (1,)]


def test_dict_of_datasets():
    ds = nd.Dataset.zip({"x": nd.Dataset.range(3), "y": nd.Dataset.from_tensor_slices([b"a", b"b", b"c"])})
    got = list(ds)
    assert [type(e) for e in got] == [dict] * 3
    assert [int(e["x"]) for e in got] == [0, 1, 2]
    assert [e["y"] for e in got] == [b"a", b"b", b"c"]
    assert ds.element_spec == {"x": nd.TensorSpec((), np.int64), "y": nd.TensorSpec((), nd.string)}


def test_nested_structure():
    a, b, c = nd.Dataset.range(3), nd.Dataset.range(10, 13), nd.Dataset.range(20, 23)
    ds = nd.Dataset.zip((a, (b, {"c": c})))
    got = list(ds)
    assert _ints(got[1]) == (1, (11, {"c": 21}))
    spec = ds.element_spec
    assert spec[1][1]["c"] == nd.TensorSpec((), np.int64)


def test_namedtuple_of_datasets():
    ds = nd.Dataset.zip(Pair(nd.Dataset.range(2), nd.Dataset.range(5, 7)))
    got = list(ds)
    assert [type(e) for e in got] == [Pair, Pair]
    assert [(int(e.a), int(e.b)) for e in got] == [(0, 5), (1, 6)]


def test_datasets_with_tuple_elements_nest():
    ab = nd.Dataset.from_tensor_slices((np.arange(3), np.arange(3) * 2))
    c = nd.Dataset.range(3)
    got = list(nd.Dataset.zip((ab, c)))
    assert _ints(got[2]) == ((2, 4), 2)


def test_stops_at_shortest():
    ds = nd.Dataset.zip((nd.Dataset.range(5), nd.Dataset.range(2), nd.Dataset.range(9)))
    assert [_ints(e) for e in ds] == [(0, 0, 0), (1, 1, 1)]
    assert ds.cardinality() == 2


def test_with_empty_dataset():
    ds = nd.Dataset.zip((nd.Dataset.range(5), nd.Dataset.range(0)))
    assert list(ds) == []
    assert ds.cardinality() == 0


def test_with_infinite_dataset():
    ds = nd.Dataset.zip((nd.Dataset.range(3).repeat(), nd.Dataset.range(4)))
    assert [_ints(e) for e in ds] == [(0, 0), (1, 1), (2, 2), (0, 3)]
    assert ds.cardinality() == 4
    both_infinite = nd.Dataset.zip((nd.Dataset.range(3).repeat(), nd.Dataset.range(2).repeat()))
    assert both_infinite.cardinality() == nd.INFINITE


def test_unknown_cardinality_propagates():
    unknown = nd.Dataset.range(10).filter(lambda x: x % 2 == 0)
    ds = nd.Dataset.zip((unknown, nd.Dataset.range(3)))
    assert ds.cardinality() == nd.UNKNOWN
    assert [_ints(e) for e in ds] == [(0, 0), (2, 1), (4, 2)]


def test_array_components_keep_shapes():
    imgs = nd.Dataset.from_tensor_slices(np.arange(24, dtype=np.uint8).reshape(4, 2, 3))
    labels = nd.Dataset.range(4)
    ds = nd.Dataset.zip((imgs, labels))
    img, lab = list(ds)[3]
    assert img.dtype == np.uint8 and img.shape == (2, 3)
    np.testing.assert_array_equal(img, np.arange(18, 24).reshape(2, 3))
    assert int(lab) == 3
    assert ds.element_spec == (nd.TensorSpec((2, 3), np.uint8), nd.TensorSpec((), np.int64))


def test_map_after_zip_unpacks():
    ds = nd.Dataset.zip((nd.Dataset.range(3), nd.Dataset.range(10, 13))).map(lambda x, y: x + y)
    assert [int(v) for v in ds] == [10, 12, 14]


def test_zip_of_mapped_and_reference_path():
    a = nd.Dataset.range(6).map(lambda x: x * 2)
    b = nd.Dataset.from_tensor_slices(np.linspace(0, 1, 6, dtype=np.float32)).map(lambda v: v + 1)
    ds = nd.Dataset.zip((a, {"b": b})).batch(4)
    assert len(assert_reference_matches(ds)) == 2


def test_same_dataset_twice():
    a = nd.Dataset.range(3)
    assert [_ints(e) for e in nd.Dataset.zip((a, a))] == [(0, 0), (1, 1), (2, 2)]


def test_reiteration():
    ds = nd.Dataset.zip((nd.Dataset.range(2), nd.Dataset.range(2)))
    assert [_ints(e) for e in ds] == [_ints(e) for e in ds]


def test_non_dataset_is_type_error():
    with pytest.raises(TypeError, match="zip"):
        nd.Dataset.zip((nd.Dataset.range(3), [1, 2, 3]))
    with pytest.raises(TypeError):
        nd.Dataset.zip((nd.Dataset.range(3), np.arange(3)))
    with pytest.raises(TypeError):
        nd.Dataset.zip({"a": nd.Dataset.range(3), "b": 1})
    with pytest.raises(TypeError):
        nd.Dataset.zip(5)


@pytest.mark.parametrize("fused", [False, True])
def test_a_shuffled_input_keeps_its_order_when_zip_fuses(fused):
    """zip over a shuffle read at its row numbers: the fused stage read the shuffled
    input in place (its rows unshuffled, silently) — found by the fused-vs-reference
    property test (shuffle(3, seed=2) then zip with a range)."""
    def build():
        x = np.arange(300, dtype=np.int64) * 7 % 23
        ds = nd.Dataset.from_tensor_slices(x).shuffle(50, seed=2)
        return nd.Dataset.zip((ds, nd.Dataset.range(1000))).map(lambda e, r: e + r * 100)

    o = nd.Options()
    if fused:
        o.fusion_min_rows = 0
    else:
        o.fusion = False
    got = [int(v) for v in build().with_options(o)]
    shuffled = [int(v) for v in nd.Dataset.from_tensor_slices(
        np.arange(300, dtype=np.int64) * 7 % 23).shuffle(50, seed=2)]
    assert got == [e + r * 100 for r, e in enumerate(shuffled)]
    assert shuffled != sorted(shuffled)
