"""Batch→map fusion: ``batch(B).map(f)`` with ``f`` position-wise per row fuses into the
batch's kernel (as ``map(f).batch(B)``); a function mixing rows stays after the batch."""

import re

import numpy as np
import pytest

import nbdata as nd
from nbdata.compiler.passes import run_passes
from nbdata.compiler.plan import list_ops

N = 4097   # over fusion_min_rows; the last batch of 128 holds one row


def reference_options():
    o = nd.Options()
    o.fusion = False
    return o


def planned(ds):
    plan, runs = run_passes(ds._node, ds.options())
    return list_ops(plan), [r.name for r in runs if r.changed]


def assert_same_batches(ds):
    fused = list(ds)
    ref = list(ds.with_options(reference_options()))
    assert len(fused) == len(ref)
    for a, b in zip(fused, ref):
        la = a if isinstance(a, tuple) else (a,)
        lb = b if isinstance(b, tuple) else (b,)
        for x, y in zip(la, lb):
            assert x.dtype == y.dtype and x.shape == y.shape
            np.testing.assert_array_equal(x, y)
    return fused


def test_normalize_after_batch_fuses_into_the_batch_kernel():
    X = np.random.default_rng(0).integers(0, 256, (N, 12), dtype=np.uint8)
    f = lambda x: x.astype(np.float32) * np.float32(1 / 255)   # noqa: E731
    ds = nd.Dataset.from_tensor_slices(X).batch(128).map(f)
    assert planned(ds) == (["from_tensor_slices", "map", "batch"], ["batch_map_fusion"])
    text = ds.compile().explain()
    assert "batch_map_fusion: changed the plan" in text
    assert re.search(r"fused_stage\[from_tensor_slices\(\) -> map\([^)]*<lambda>\) "
                     r"\[elementwise, inlined\] -> batch\(batch_size=128", text)
    assert "per element" not in text
    out = assert_same_batches(ds)
    assert out[-1].shape == (1, 12) and out[-1].dtype == np.float32
    np.testing.assert_array_equal(np.concatenate(out), f(X))
    assert ds.element_spec == nd.TensorSpec((None, 12), np.float32)


def test_tuple_elements_and_drop_remainder():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((N, 3)).astype(np.float32)
    y = rng.integers(0, 10, N)
    ds = (nd.Dataset.from_tensor_slices((X, y)).batch(100, drop_remainder=True)
          .map(lambda x, l: (np.where(x > 0, x, 0.5 * x), (l + 1) % 3 == 0)))
    assert planned(ds)[1] == ["batch_map_fusion"]
    assert ds.element_spec == (nd.TensorSpec((100, 3), np.float32), nd.TensorSpec((100,), np.bool_))
    out = assert_same_batches(ds)
    assert len(out) == N // 100


@pytest.mark.parametrize("fn", [
    lambda x: x - x.mean(axis=0),            # a reduction over the batch
    lambda x: x - np.sum(x),                 # over everything
    lambda x: x[::-1] + 1,                   # reverses the rows
    lambda x: x * np.arange(4.0)[:, None],   # a constant spanning rows
    lambda x: (x + 1, 7),                    # a constant per batch, not per row
    lambda x: x.T * 2,                       # transposes the batch
], ids=["mean0", "sum", "reverse", "constant", "scalar-output", "transpose"])
def test_functions_mixing_rows_stay_after_the_batch(fn):
    X = np.arange(48, dtype=np.float64).reshape(12, 4)
    ds = nd.Dataset.from_tensor_slices(X).batch(4).map(fn)
    assert planned(ds) == (["from_tensor_slices", "batch", "map"], [])
    expected = [fn(X[i:i + 4]) for i in range(0, 12, 4)]
    got = list(ds)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        for u, v in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
            np.testing.assert_array_equal(u, v)


def test_tf_reduce_mean_over_the_batch_stays_correct():
    tf = pytest.importorskip("nbdata.compat.v1")
    X = np.arange(30, dtype=np.float32).reshape(10, 3)
    ds = nd.Dataset.from_tensor_slices(X).batch(4).map(lambda x: x - tf.reduce_mean(x))
    assert planned(ds)[1] == []
    got = list(ds)
    np.testing.assert_allclose(got[-1], X[8:] - X[8:].mean())
    np.testing.assert_allclose(got[0], X[:4] - X[:4].mean())


def test_switched_off():
    o = nd.Options()
    o.optimization.batch_map_fusion = False
    ds = nd.Dataset.range(10).batch(3).map(lambda x: x * 2).with_options(o)
    assert planned(ds) == (["range", "batch", "map"], [])
    assert [v.tolist() for v in ds] == [[0, 2, 4], [6, 8, 10], [12, 14, 16], [18]]
