"""The TF1 op vocabulary of ``nbdata.compat.v1`` (``nbdata/compat/v1/ops.py``) against
TensorFlow's ``tf.compat.v1``: every case of tests/data/make_tf_v1_ops.py runs on NumPy
values and inside a graph (a placeholder fed with the value), and its value and dtype
(or its error class) must be TensorFlow's. TensorFlow is run live when it is importable;
otherwise its recorded results (tests/data/tf_v1_ops.json) are the reference."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import nbdata as nd
from nbdata.compat.v1 import ops
from nbdata.spec import as_dtype

DATA = Path(__file__).resolve().parent.parent / "data"


def _load_generator():
    spec = importlib.util.spec_from_file_location("make_tf_v1_ops", DATA / "make_tf_v1_ops.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _load_generator()
RECORDED = json.loads((DATA / "tf_v1_ops.json").read_text())["cases"]
try:
    import tensorflow  # noqa: F401
    LIVE = True
except ImportError:
    LIVE = False


def expected(case) -> dict:
    return GEN.tf_result(case) if LIVE else RECORDED[case[0]]


def _op(name: str):
    fn = ops
    for part in name.split("."):
        fn = getattr(fn, part)
    return fn


# TensorFlow's float32 exp and log (Eigen's polynomials) are not correctly rounded;
# NumPy's are: the two may differ in the last bit.
ULPS = {"exp_f": 1, "log_f": 1}


def _check(result, want: dict, ulps: int = 0) -> None:
    got = GEN.encode_value(result)
    if want.get("sparse"):
        assert isinstance(result, nd.SparseTensor)
        assert result.indices.dtype == np.int64 and result.dense_shape.dtype == np.int64
        assert got == want
        return
    assert got["dtype"] == want["dtype"], (got, want)
    assert got["shape"] == want["shape"], (got, want)
    if want["dtype"] == "string":
        assert got["value"] == want["value"]
    elif ulps:
        np.testing.assert_array_max_ulp(np.asarray(got["value"], dtype=want["dtype"]),
                                        np.asarray(want["value"], dtype=want["dtype"]), ulps)
    else:
        np.testing.assert_array_equal(np.asarray(got["value"], dtype=want["dtype"]),
                                      np.asarray(want["value"], dtype=want["dtype"]))


def _error_class(name: str):
    return {"TypeError": TypeError, "ValueError": ValueError,
            "InvalidArgumentError": nd.errors.InvalidArgumentError,
            "UnimplementedError": nd.errors.UnimplementedError}[name]


def _call(case, args, kwargs):
    return _op(case[1])(*args, **kwargs)


@pytest.mark.parametrize("case", GEN.CASES, ids=[c[0] for c in GEN.CASES])
def test_numpy_values_as_tensorflow(case):
    want = expected(case)
    args = GEN.decode(case[2])
    kwargs = {k: GEN.decode(v) for k, v in case[3].items()}
    if "error" in want:
        with pytest.raises(_error_class(want["error"])):
            result = _call(case, args, kwargs)
            if isinstance(result, nd.Tensor):
                nd.Session(graph=result.graph).run(result)
        return
    result = _call(case, args, kwargs)
    if isinstance(result, nd.Tensor):   # constant() is a graph tensor, as in TF1
        result = nd.Session(graph=result.graph).run(result)
    _check(result, want, ULPS.get(case[0], 0))


GRAPH_CASES = [c for c in GEN.CASES if c[4] is not None]


@pytest.mark.parametrize("case", GRAPH_CASES, ids=[c[0] for c in GRAPH_CASES])
def test_graph_tensors_as_tensorflow(case):
    """The same op given a placeholder where the case has a value, run by a session."""
    want = expected(case)
    args = GEN.decode(case[2])
    kwargs = {k: GEN.decode(v) for k, v in case[3].items()}
    path = case[4]
    holder = args
    for k in path[:-1]:
        holder = holder[k]
    value = ops.convert(holder[path[-1]])
    with nd.Graph().as_default() as g:
        x = ops.placeholder(as_dtype(value.dtype) if not isinstance(value, bytes) else nd.string,
                            shape=np.shape(value))
        holder[path[-1]] = x
        if "error" in want:
            with pytest.raises(_error_class(want["error"])):
                out = _call(case, args, kwargs)
                nd.Session(graph=g).run(out, feed_dict={x: value})
            return
        out = _call(case, args, kwargs)
        assert isinstance(out, nd.Tensor)
        result = nd.Session(graph=g).run(out, feed_dict={x: value})
    _check(result, want, ULPS.get(case[0], 0))


def test_recorded_cases_cover_every_case():
    assert sorted(RECORDED) == sorted(c[0] for c in GEN.CASES)


# ------------------------------------------------------------------ dtypes

def test_dtypes_are_numpy_dtypes_nbdata_accepts():
    for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "float16", "float32",
                 "float64", "bool"):
        dt = getattr(ops, name)
        assert dt == np.dtype(name) and as_dtype(dt) == np.dtype(name)
    assert ops.string is nd.string and as_dtype(ops.string) is nd.string
    assert ops.as_dtype("float32") == ops.float32
    from nbdata.compat.v1 import data
    spec = data.Dataset.from_tensor_slices(ops.zeros([3], ops.float16)).element_spec
    assert spec.dtype == np.float16


def test_placeholder_and_names():
    with nd.Graph().as_default() as g:
        x = ops.placeholder(ops.float32, [None], name="x")
        y = ops.multiply(x, 2.0, name="double")
        with ops.name_scope("prep"):
            z = ops.cast(y, ops.int32, name="to_int")
        assert y.name == "double:0" and z.name == "prep/to_int:0"
        assert g.get_tensor_by_name("prep/to_int:0") is z
        assert ops.reshape(x, [-1, 1]).shape.as_list() == [None, 1]
        with ops.Session() as sess:
            assert sess.run(z, {x: [1.5, -2.5]}).tolist() == [3, -5]


def test_binary_dtype_mismatch_of_tensors_is_a_type_error_naming_the_op():
    with nd.Graph().as_default():
        x = ops.placeholder(ops.int32, [2])
        f = ops.placeholder(ops.float32, [2])
        with pytest.raises(TypeError, match="AddV2.*float32.*int32"):
            ops.add(x, f)
        with pytest.raises(TypeError, match="Expected int32.*Mul"):
            ops.multiply(x, 1.5)


def test_placeholder_with_default():
    with nd.Graph().as_default():
        p = ops.placeholder_with_default([1, 2], shape=[None])
        q = ops.add(p, 1)
        with ops.Session() as sess:
            assert sess.run(q).tolist() == [2, 3]
            assert sess.run(q, {p: [10, 20, 30]}).tolist() == [11, 21, 31]
        with pytest.raises(ValueError, match="not compatible"):
            ops.placeholder_with_default([1, 2], shape=[3])


def test_collections_group_and_no_op():
    with nd.Graph().as_default() as g:
        ops.add_to_collection("mine", 1)
        ops.add_to_collection(["mine", "other"], 2)
        assert ops.get_collection("mine") == [1, 2] and ops.get_collection("other") == [2]
        assert ops.get_collection_ref("mine") is g.get_collection_ref("mine")
        v = ops.Variable(np.int64(4), name="v")
        init = ops.initialize_all_variables()
        both = ops.group(init, ops.no_op())
        with ops.Session() as sess:
            assert sess.run(both) is None
            assert int(sess.run(v.value())) == 4


def test_concat_old_argument_order_is_refused():
    with pytest.raises(TypeError, match="concat\\(values, axis\\)"):
        ops.concat(0, [[1], [2]])


def test_ops_inside_a_dataset_map_function():
    ds = nd.Dataset.from_tensor_slices(np.array([0, 2, 1], np.int32)).map(
        lambda i: (ops.one_hot(i, 3), ops.cast(ops.equal(i, 2), ops.int64)))
    spec = ds.element_spec
    assert spec[0].dtype == np.float32 and spec[0].shape == (3,)
    got = [(a.tolist(), int(b)) for a, b in ds]
    assert got == [([1, 0, 0], 0), ([0, 0, 1], 1), ([0, 1, 0], 0)]


def test_string_split_of_a_fed_batch_of_lines():
    with nd.Graph().as_default():
        lines = ops.placeholder(ops.string, [None])
        st = ops.string_split(lines)
        with ops.Session() as sess:
            out = sess.run(st, {lines: [b"a b c", b"d"]})
    assert out.values.tolist() == [b"a", b"b", b"c", b"d"]
    assert out.dense_shape.tolist() == [2, 3]


# ------------------------------------------------------------------ random

@pytest.fixture
def eager_v1():
    ops.enable_eager_execution()
    try:
        yield
    finally:
        ops._eager_mode[0] = False


def test_random_uniform_eager_dtype_shape_and_range(eager_v1):
    v = ops.random_uniform([4, 10])
    assert v.dtype == np.float32 and v.shape == (4, 10)
    assert ((v >= 0) & (v < 1)).all()
    i = ops.random_uniform([1000], minval=3, maxval=7, dtype=ops.int32)
    assert i.dtype == np.int32 and set(i.tolist()) == {3, 4, 5, 6}
    n = ops.random_normal([2000], mean=5.0, stddev=0.5, dtype=ops.float64)
    assert n.dtype == np.float64 and abs(float(n.mean()) - 5.0) < 0.1
    t = ops.truncated_normal([2000])
    assert t.dtype == np.float32 and float(np.abs(t).max()) <= 2.0
    with pytest.raises(ValueError, match="maxval"):
        ops.random_uniform([2], dtype=ops.int32)
    with pytest.raises(nd.errors.InvalidArgumentError, match="minval < maxval"):
        ops.random_uniform([2], minval=5, maxval=5, dtype=ops.int64)


def test_random_ops_draw_per_session_run_in_graph_mode():
    with nd.Graph().as_default():
        u = ops.random_uniform([8], seed=3)
        x = ops.placeholder(ops.int32, [None])
        s = ops.random_shuffle(x)
        noise = ops.random_normal(ops.shape(x))
        with ops.Session() as sess:
            a, b = sess.run(u), sess.run(u)
            assert a.dtype == np.float32 and not np.array_equal(a, b)
            assert sorted(sess.run(s, {x: list(range(50))}).tolist()) == list(range(50))
            assert sess.run(noise, {x: [1, 2, 3]}).shape == (3,)
        with ops.Session() as sess2:   # an op seed: each session repeats the sequence
            assert np.array_equal(sess2.run(u), a)


def test_random_op_in_a_map_function_draws_per_element():
    ds = nd.Dataset.range(64).map(lambda i: ops.random_uniform([]))
    values = [float(v) for v in ds]
    assert len(set(values)) == 64 and all(0 <= v < 1 for v in values)


# ------------------------------------------------------------ outside the scope

@pytest.mark.parametrize("name", ["layers", "nn", "losses", "keras", "estimator",
                                  "get_variable", "variable_scope", "optimizers"])
def test_model_names_say_how_to_hand_batches_to_a_model(name):
    error = ops.missing(name)
    assert isinstance(error, AttributeError)
    text = str(error)
    assert f"has no attribute {name!r}" in text
    assert "nbdata is the input pipeline" in text and "not a model library" in text
    assert "torch.from_numpy" in text and "jax.numpy.asarray" in text and "feed_dict" in text


def test_namespace_getattr_and_train_optimizers_raise_the_message():
    import nbdata.compat.v1 as tf
    with pytest.raises(AttributeError, match="nbdata is the input pipeline"):
        tf.layers  # noqa: B018
    with pytest.raises(AttributeError, match="'nbdata.compat.v1.train' has no attribute "
                                             "'AdamOptimizer'.*not a model library"):
        tf.train.AdamOptimizer  # noqa: B018
    with pytest.raises(AttributeError, match="encode_example"):
        tf.train.SequenceExample  # noqa: B018
    ex = tf.train.Example(features=tf.train.Features(feature={
        "b": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"x"])),
        "f": tf.train.Feature(float_list=tf.train.FloatList(value=[])),
        "i": tf.train.Feature(int64_list=tf.train.Int64List(value=[1, 2]))}))
    assert ex.SerializeToString() == nd.io.encode_example(
        {"b": [b"x"], "f": {"kind": "float_list", "value": []}, "i": [1, 2]})
    assert tf.train.shuffle_batch is nd.train.shuffle_batch
    assert tf.add is ops.add and tf.io.decode_raw is nd.io.decode_raw
    assert tf.image.decode_jpeg is nd.image.decode_jpeg and tf.image.resize is tf.image.resize_images
    with pytest.raises(AttributeError, match="tf.strings.to_number is not part"):
        tf.strings.to_number  # noqa: B018


def test_all_names_exist_and_are_tf1_spellings():
    for name in ops.__all__:
        assert hasattr(ops, name), name
    for name in ("decode_csv", "decode_raw", "parse_single_example", "parse_example",
                 "FixedLenFeature", "VarLenFeature", "TextLineReader", "TFRecordReader",
                 "FixedLengthRecordReader", "SparseTensor", "TensorShape", "Tensor", "Operation",
                 "ConfigProto", "RunOptions", "GraphKeys", "py_func", "errors", "io", "image",
                 "train", "Graph", "Session", "InteractiveSession", "reset_default_graph",
                 "get_default_graph", "global_variables_initializer",
                 "local_variables_initializer", "initialize_all_variables", "python_io"):
        assert name in ops.__all__, name
    assert "missing" not in ops.__all__ and "convert" not in ops.__all__


def test_static_random_op_is_a_graph_tensor_after_disable_eager_execution():
    from nbdata.trace.graph import disable_eager_execution, enable_eager_execution
    disable_eager_execution()
    try:
        u = ops.random_uniform([3], dtype=ops.float64)
        assert isinstance(u, nd.Tensor) and u.dtype == np.float64
        with ops.Session(graph=u.graph) as sess:
            assert not np.array_equal(sess.run(u), sess.run(u))
    finally:
        enable_eager_execution()
    # The namespace stays in graph mode (TF1's) until its enable_eager_execution()
    assert isinstance(ops.random_uniform([3]), nd.Tensor)
    ops.enable_eager_execution()
    try:
        assert isinstance(ops.random_uniform([3]), np.ndarray)
    finally:
        ops._eager_mode[0] = False
