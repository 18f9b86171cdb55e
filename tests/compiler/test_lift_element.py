"""One element of a row at constant indices (``row[0]``, ``img[1, 2, 0]``, ``row[-1]``)
lifts: a filter or map that reads it is inlined into the fused kernel as a scalar read,
not called per row as a compiled function, with the values of the plain path."""

import numpy as np
import pytest

import nbdata as nd
from nbdata.compiler.lifting import lift_function
from nbdata.primitives.expr import NotElementwise
from nbdata.trace.graph import TraceError

X = ((np.arange(3_000 * 12, dtype=np.int64).reshape(3_000, 12) * 7919) % 1000) - 300


def images():
    return (np.arange(600 * 4 * 5 * 3).reshape(600, 4, 5, 3) * 31 % 251).astype(np.uint8)


CASES = {
    "filter on an element": (X, lambda d: d.filter(lambda v: v[0] % 3 != 0).batch(64)),
    "two elements, one from the end": (X, lambda d: d.filter(lambda v: v[-1] > v[3]).batch(64)),
    "an element in a row's arithmetic": (X, lambda d: d.map(lambda v: v * 2 - v[1]).batch(64)),
    "an element of a computed row": (X, lambda d: d.map(lambda v: (v * 3)[2] + v[0])),
    "after a map in the same kernel": (
        X, lambda d: d.map(lambda v: v.astype(np.float32) / 7).filter(lambda v: v[5] > 10)
        .batch(64)),
    "a pixel of a flipped image": (
        images(), lambda d: d.map(nd.image.flip_left_right).filter(lambda im: im[0, 0, 1] > 100)
        .batch(32)),
    "a pixel of an image": (images(), lambda d: d.map(
        lambda im: im[1, 2, 0].astype(np.int32) * 2 + im[3, 4, 2])),
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_element_read_is_inlined_with_the_plain_values(case):
    data, build = CASES[case]
    fused, plain = nd.Options(), nd.Options()
    fused.fusion_min_rows = 0
    plain.fusion = False
    pipe = build(nd.Dataset.from_tensor_slices(data)).with_options(fused).compile()
    plan = pipe.explain()
    assert "Numba-compiled call" not in plan and "elementwise, inlined" in plan, plan
    want = list(build(nd.Dataset.from_tensor_slices(data)).with_options(plain))
    got = list(pipe)
    assert len(got) == len(want) > 0
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def test_element_lifting_rules():
    spec = nd.TensorSpec((2, 3), np.int32)
    e = lift_function(lambda m: m[1, -1], spec)
    assert e.kind == "element" and e.value == 5 and e.dtype == np.int32 and not e.is_array
    # a row, an index out of range (refused as it is recorded), a bool, a slice
    for fn in (lambda m: m[1], lambda m: m[2, 0], lambda m: m[0, True], lambda m: m[:, 0]):
        with pytest.raises((NotElementwise, TraceError, nd.errors.InvalidArgumentError)):
            lift_function(fn, spec)


def test_an_index_out_of_range_raises_as_the_plain_path_does():
    o = nd.Options()
    o.fusion_min_rows = 0
    ds = nd.Dataset.from_tensor_slices(X).filter(lambda v: v[12] > 0).with_options(o)
    with pytest.raises(nd.errors.InvalidArgumentError, match="IndexError: index 12 is out of bounds"):
        list(ds)
