"""TF1 ops that TensorFlow's kernel tests call in eager code: ``py_func`` on values
computes them, ``as_string`` and ``check_numerics`` as TF defines them."""

import numpy as np
import pytest

import nbdata as nd
import nbdata.compat.v1 as tf


@pytest.fixture(autouse=True)
def eager_v1():
    """TF's kernel tests call these in eager code: the namespace's eager mode (it starts
    in graph mode, as TF1)."""
    tf.enable_eager_execution()
    try:
        yield
    finally:
        tf._ops._eager_mode[0] = False


def test_py_func_on_values_in_eager_code_returns_values():
    out = tf.py_func(lambda v: v * 3, [np.int64(2)], tf.int64)
    assert not isinstance(out, nd.Tensor) and int(out) == 6 and out.dtype == np.int64
    a, b = tf.py_func(lambda x, y: (x + y, x * y), [np.array([1, 2]), np.array([3, 4])],
                      [tf.int64, tf.int64])
    assert a.tolist() == [4, 6] and b.tolist() == [3, 8]
    with pytest.raises(nd.errors.InvalidArgumentError):
        tf.py_func(lambda v: "text", [np.int64(1)], tf.int64)


def test_py_func_in_maps_and_graphs_stays_an_op():
    ds = nd.Dataset.range(4).map(lambda x: tf.py_func(lambda v: v * 2, [x], tf.int64))
    assert [int(v) for v in ds] == [0, 2, 4, 6]
    with nd.Graph().as_default():
        x = nd.placeholder(np.int64, shape=[])
        y = tf.py_func(lambda v: v + 1, [x], tf.int64)
        assert isinstance(y, nd.Tensor)
        assert int(nd.Session().run(y, feed_dict={x: 4})) == 5


def test_as_string_formats_as_tf():
    assert tf.as_string(np.array([1, -2], np.int64)).tolist() == [b"1", b"-2"]
    assert tf.as_string(np.float32(3.14)) == b"3.140000"
    assert tf.as_string(np.float64(3.5), precision=2) == b"3.50"
    assert tf.as_string(np.float64(1e10), scientific=True) == b"1.000000e+10"
    assert tf.as_string(np.float64(0.1), shortest=True) == b"0.1"
    assert tf.as_string(np.array([7, 12], np.int32), width=4, fill="0").tolist() == [b"0007", b"0012"]
    assert tf.as_string(np.array([True, False])).tolist() == [b"true", b"false"]
    with pytest.raises(nd.errors.InvalidArgumentError):
        tf.as_string(np.int64(1), precision=2)
    with pytest.raises(TypeError):
        tf.as_string(np.array([b"a"], dtype=object))
    ds = nd.Dataset.range(3).map(tf.as_string)
    assert ds.element_spec == nd.TensorSpec((), nd.string)
    assert list(ds) == [b"0", b"1", b"2"]


def test_check_numerics_passes_finite_values_and_names_nan_and_inf():
    assert tf.check_numerics(np.array([1.0, 2.0]), "m").tolist() == [1.0, 2.0]
    for value, what in ((np.array([1.0, np.nan]), "NaN"), (np.array([np.inf]), "Inf"),
                        (np.array([np.inf, np.nan]), "Inf and NaN")):
        with pytest.raises(nd.errors.InvalidArgumentError, match=f"oops : Tensor had {what} values"):
            tf.check_numerics(value, "oops")
    with pytest.raises(TypeError):
        tf.check_numerics(np.array([1, 2]), "ints")
    ds = nd.Dataset.from_tensor_slices(np.array([1.0, np.inf])).map(
        lambda x: tf.check_numerics(x, "bad"))
    it = iter(ds)
    assert float(next(it)) == 1.0
    with pytest.raises(nd.errors.InvalidArgumentError, match="bad : Tensor had Inf values"):
        next(it)
