"""What TensorFlow's ``tf.compat.v1`` ops give (values, dtypes, or the error class) for
the cases of tests/compat/test_v1_ops.py, recorded in graph mode:

    /root/.venvs/nbdata-perf/bin/python tests/data/make_tf_v1_ops.py > tests/data/tf_v1_ops.json

(TensorFlow 2.21; nbdata is not needed). The tests compare with the live TensorFlow
instead when it is importable (``tf_result`` is what they call).

A case is ``[id, op, args, kwargs]`` (``feed``: where the test puts a placeholder in
place of a value, a path into ``args``). Arguments are JSON: ``{"dtype": "int32"}`` is
that dtype, ``{"np": [...], "dtype": "int64"}`` a NumPy array, anything else a Python
value. A result is ``{dtype, shape, value}`` (bytes as latin-1 strings), a sparse
``{sparse, indices, values, dense_shape}``, or ``{error: <exception class>}``.
"""

from __future__ import annotations

import json
import sys

import numpy as np

I32 = {"dtype": "int32"}
I64 = {"dtype": "int64"}
F32 = {"dtype": "float32"}
F64 = {"dtype": "float64"}
U8 = {"dtype": "uint8"}
BOOL = {"dtype": "bool"}


def npa(values, dtype):
    return {"np": values, "dtype": dtype}


# [id, op, args, kwargs, feed]  (feed: path of the value a placeholder stands for, or None)
CASES = [
    ["add_i32", "add", [[1, 2], 3], {}, [0]],
    ["add_f32_np64", "add", [[1.5, 2.5], npa([1.5, 2.5], "float64")], {}, [0]],
    ["add_i32_np_f64", "add", [[1, 2], npa([1.5, 2.5], "float64")], {}, [0]],
    ["add_np_np", "add", [npa([1, 2], "int64"), npa([1, 2], "int64")], {}, [0]],
    ["add_py_py", "add", [1, 2], {}, [0]],
    ["add_big", "add", [2 ** 40, 1], {}, [0]],
    ["add_i32_float", "add", [[1, 2], 1.5], {}, [0]],
    ["add_int_ftensor", "add", [1, [1.5]], {}, None],
    ["add_strings", "add", [["a", "b"], "c"], {}, [0]],
    ["subtract", "subtract", [[5, 2], [1, 3]], {}, [0]],
    ["multiply_f", "multiply", [[1.5, 2.0], 2.0], {}, [0]],
    ["divide_i32", "divide", [[1, 2], 2], {}, [0]],
    ["divide_np_i64", "divide", [npa([1, 2], "int64"), 2], {}, [0]],
    ["divide_f32", "divide", [[1.0, 2.0], 2], {}, [0]],
    ["divide_f16", "divide", [npa([1, 3], "float16"), 2], {}, [0]],
    ["truediv_i8", "truediv", [npa([1, 7], "int8"), npa([2, 3], "int8")], {}, [0]],
    ["truediv_u8", "truediv", [npa([1, 7], "uint8"), npa([2, 3], "uint8")], {}, [0]],
    ["floordiv_i", "floordiv", [[-3, 7], 2], {}, [0]],
    ["floordiv_f", "floordiv", [[-3.5], 2.0], {}, [0]],
    ["floordiv_zero", "floordiv", [[7], 0], {}, [0]],
    ["mod_i", "mod", [[-3, 7], 2], {}, [0]],
    ["mod_neg_divisor", "mod", [[7], -2], {}, [0]],
    ["mod_f", "mod", [[-3.5, 7.0], 2.0], {}, [0]],
    ["minimum", "minimum", [[1, 5], 3], {}, [0]],
    ["maximum_nan", "maximum", [[1.0], [float("nan")]], {}, [0]],
    ["abs_i", "abs", [[-1, 5]], {}, [0]],
    ["abs_f", "abs", [[-1.5]], {}, [0]],
    ["sqrt_f", "sqrt", [[4.0, 2.0]], {}, [0]],
    ["sqrt_int", "sqrt", [[4]], {}, [0]],
    ["square_i", "square", [[3, -2]], {}, [0]],
    ["exp_f", "exp", [[1.0, 0.0]], {}, [0]],
    ["exp_int", "exp", [[1]], {}, [0]],
    ["log_f", "log", [[1.0, 0.0]], {}, [0]],
    ["clip_i", "clip_by_value", [[1, 5, 9], 2, 6], {}, [0]],
    ["clip_f", "clip_by_value", [[1.0, 5.0], 2, 4], {}, [0]],
    ["equal", "equal", [[1, 2], 2], {}, [0]],
    ["equal_float_mismatch", "equal", [[1], 1.5], {}, [0]],
    ["not_equal", "not_equal", [[1, 2], [1, 3]], {}, [0]],
    ["less", "less", [[1, 2], 2], {}, [0]],
    ["greater", "greater", [[1, 2], 1], {}, [0]],
    ["less_equal", "less_equal", [[1, 2], 1], {}, [0]],
    ["greater_equal", "greater_equal", [[1, 2], 2], {}, [0]],
    ["logical_and", "logical_and", [[True, True], [False, True]], {}, [0]],
    ["logical_or", "logical_or", [[True, False], [False, False]], {}, [0]],
    ["logical_or_int", "logical_or", [[1], [0]], {}, None],
    ["logical_not", "logical_not", [[True, False]], {}, [0]],
    ["cast_f_i32", "cast", [[1.7, -1.7, 3e10], I32], {}, [0]],
    ["cast_i_u8", "cast", [[-1, 300], U8], {}, [0]],
    ["cast_f_u8", "cast", [[-1.5, 300.0], U8], {}, [0]],
    ["cast_bool", "cast", [[0.5, 0.0], BOOL], {}, [0]],
    ["cast_i_f64", "cast", [[1, 2], F64], {}, [0]],
    ["cast_str", "cast", [["1"], I32], {}, [0]],
    ["to_float", "to_float", [[1, 2]], {}, [0]],
    ["to_int32", "to_int32", [[1.7, -1.7]], {}, [0]],
    ["to_int64", "to_int64", [[1.9]], {}, [0]],
    ["reshape", "reshape", [[0, 1, 2, 3, 4, 5], [2, -1]], {}, [0]],
    ["reshape_bad", "reshape", [[0, 1, 2, 3, 4, 5], [4, -1]], {}, [0]],
    ["stack", "stack", [[[1, 2], [3, 4]]], {}, [0, 0]],
    ["stack_axis1", "stack", [[[1, 2], [3, 4]]], {"axis": 1}, [0, 0]],
    ["stack_scalars", "stack", [[1, 2]], {}, [0, 0]],
    ["concat", "concat", [[[1], [2, 3]], 0], {}, [0, 0]],
    ["concat_neg", "concat", [[[[1]], [[2]]], -1], {}, [0, 0]],
    ["expand_dims", "expand_dims", [[1, 2], -1], {}, [0]],
    ["expand_dims_0", "expand_dims", [[1, 2], 0], {}, [0]],
    ["squeeze", "squeeze", [[[1], [2]]], {}, [0]],
    ["squeeze_axis", "squeeze", [[[[1]], [[2]]]], {"axis": [2]}, [0]],
    ["squeeze_bad", "squeeze", [[[1, 3], [2, 4]], [1]], {}, [0]],
    ["where_1", "where", [[True, False, True]], {}, [0]],
    ["where_2d", "where", [[[True, False], [False, True]]], {}, [0]],
    ["where_3", "where", [[True, False], [1, 2], [3, 4]], {}, [1]],
    ["where_rows", "where", [[True, False], [[1, 2], [5, 6]], [[3, 4], [7, 8]]], {}, [1]],
    ["one_hot", "one_hot", [[0, 2], 3], {}, [0]],
    ["one_hot_axis0", "one_hot", [[0, 2, -1], 3], {"axis": 0}, [0]],
    ["one_hot_int", "one_hot", [[0, 5], 3], {"on_value": 5, "off_value": -1}, [0]],
    ["one_hot_f64", "one_hot", [[0], 2], {"on_value": npa(2.0, "float64")}, [0]],
    ["one_hot_dtype", "one_hot", [[[1, 0]], 2], {"dtype": I64}, [0]],
    ["fill", "fill", [[2], 3], {}, [0]],
    ["fill_f", "fill", [[2, 1], 1.5], {}, [0]],
    ["zeros", "zeros", [[2]], {}, [0]],
    ["zeros_i64", "zeros", [[2, 1]], {"dtype": I64}, [0]],
    ["ones", "ones", [[2]], {"dtype": I64}, [0]],
    ["zeros_like", "zeros_like", [[1.5]], {}, [0]],
    ["ones_like_i", "ones_like", [[[1, 2]]], {}, [0]],
    ["ones_like_dtype", "ones_like", [[1, 2]], {"dtype": F32}, [0]],
    ["range", "range", [5], {}, [0]],
    ["range_3", "range", [1, 10, 3], {}, [0]],
    ["range_neg", "range", [10, 1, -3], {}, [0]],
    ["range_f", "range", [1, 5, 0.5], {}, None],
    ["range_mixed", "range", [1, 5.5], {}, None],
    ["range_dtype", "range", [5], {"dtype": F64}, None],
    ["range_i64", "range", [npa(5, "int64")], {}, [0]],
    ["range_empty", "range", [3, 3], {}, [0]],
    ["range_bad", "range", [5, 1], {}, [0]],
    ["shape", "shape", [[[1, 2]]], {}, [0]],
    ["shape_i64", "shape", [[[1]]], {"out_type": I64}, [0]],
    ["size", "size", [[[1, 2], [3, 4]]], {}, [0]],
    ["size_i64", "size", [[1, 2]], {"out_type": I64}, [0]],
    ["rank", "rank", [[[1, 2]]], {}, [0]],
    ["rank_scalar", "rank", [3], {}, [0]],
    ["reduce_sum", "reduce_sum", [[[1, 2], [3, 4]]], {}, [0]],
    ["reduce_sum_axis", "reduce_sum", [[[1, 2], [3, 4]]], {"axis": 1}, [0]],
    ["reduce_sum_ri", "reduce_sum", [[[1, 2]]], {"reduction_indices": 1}, [0]],
    ["reduce_sum_axes", "reduce_sum", [[[[1.0], [2.0]], [[3.0], [4.0]]]], {"axis": [0, 2]}, [0]],
    ["reduce_sum_bool", "reduce_sum", [[True, True]], {}, [0]],
    ["reduce_sum_wrap", "reduce_sum", [npa([100, 100], "int8")], {}, [0]],
    ["reduce_mean_int", "reduce_mean", [[-1, -2]], {}, [0]],
    ["reduce_mean_int_axis", "reduce_mean", [[[1, 2], [4, 7]]], {"axis": 0}, [0]],
    ["reduce_mean_keep", "reduce_mean", [[[1.0, 2.0]]], {"keep_dims": True}, [0]],
    ["reduce_mean_keepdims", "reduce_mean", [[[1.0, 2.0], [3.0, 5.0]]], {"axis": -1, "keepdims": True}, [0]],
    ["reduce_prod", "reduce_prod", [[[1, 2], [3, 4]], 0], {}, [0]],
    ["reduce_max", "reduce_max", [[[1, 9], [3, 4]]], {"axis": 1}, [0]],
    ["reduce_max_empty", "reduce_max", [npa([], "float32")], {}, [0]],
    ["reduce_min", "reduce_min", [[[1, 9], [3, 4]]], {}, [0]],
    ["reduce_min_empty_int", "reduce_min", [npa([], "int32")], {}, [0]],
    ["argmax", "argmax", [[[1, 3], [4, 2]], 1], {}, [0]],
    ["argmax_default_axis", "argmax", [[[1, 3], [4, 2]]], {}, [0]],
    ["argmax_out32", "argmax", [[3.0, 1.0, 5.0]], {"output_type": I32}, [0]],
    ["argmin", "argmin", [[3.0, 1.0, 1.0]], {}, [0]],
    ["identity", "identity", [[1, 2]], {}, [0]],
    ["transpose", "transpose", [[[1, 2, 3]]], {}, [0]],
    ["transpose_perm", "transpose", [npa([[[0, 1], [2, 3], [4, 5]]], "float32"), [2, 0, 1]], {}, [0]],
    ["tile", "tile", [[1, 2], [2]], {}, [0]],
    ["tile_2d", "tile", [[[1, 2]], [2, 1]], {}, [0]],
    ["tile_bad", "tile", [[1, 2], [2, 2]], {}, [0]],
    ["gather", "gather", [[1, 2, 3], [2, 0]], {}, [0]],
    ["gather_axis", "gather", [[[1, 2], [3, 4]], [1]], {"axis": 1}, [0]],
    ["gather_oob", "gather", [[1, 2], [5]], {}, [0]],
    ["slice", "slice", [[1, 2, 3], [1], [-1]], {}, [0]],
    ["slice_2d", "slice", [[[1, 2, 3], [4, 5, 6]], [0, 1], [2, -1]], {}, [0]],
    ["string_split", "string_split", [["a b", "c"]], {}, [0]],
    ["string_split_delim", "string_split", [["a,b,,c", ""]], {"delimiter": ","}, [0]],
    ["string_split_chars", "string_split", [["a b.c"]], {"delimiter": " ."}, [0]],
    ["string_split_keep_empty", "string_split", [["a,,b"]], {"delimiter": ",", "skip_empty": False}, [0]],
    ["string_split_empty_delim", "string_split", [["abc", "d"]], {"delimiter": ""}, [0]],
    ["strings_split", "strings.split", [["a b", " c  d "]], {}, [0]],
    ["strings_split_sep", "strings.split", [["a,,b", "c"]], {"sep": ","}, [0]],
    ["strings_split_max", "strings.split", [["a b c"]], {"maxsplit": 1}, [0]],
    ["constant_int", "constant", [[1, 2]], {}, None],
    ["constant_float", "constant", [1.5], {}, None],
    ["constant_shape", "constant", [[1, 2]], {"shape": [4]}, None],
    ["constant_scalar_shape", "constant", [7], {"shape": [2, 2]}, None],
    ["constant_dtype", "constant", [[1, 2]], {"dtype": F64}, None],
    ["constant_dtype_bad", "constant", [1.5], {"dtype": I32}, None],
    ["constant_np", "constant", [npa([1, 2], "int64")], {}, None],
]


def decode(x):
    """A case argument as the ops take it (NumPy dtypes; TF dtypes given ``tf``)."""
    if isinstance(x, dict) and set(x) == {"dtype"}:
        return np.dtype(x["dtype"])
    if isinstance(x, dict) and "np" in x:
        return np.asarray(x["np"], dtype=x["dtype"])
    if isinstance(x, dict):
        return {k: decode(v) for k, v in x.items()}
    if isinstance(x, list):
        return [decode(v) for v in x]
    return x


def encode_value(v) -> dict:
    """A fetched value as JSON (a SparseTensor duck-typed: indices, values, dense_shape)."""
    if hasattr(v, "indices") and hasattr(v, "dense_shape"):
        return {"sparse": True, "indices": np.asarray(v.indices).tolist(),
                "values": [_text(x) for x in np.asarray(v.values, dtype=object).tolist()],
                "dense_shape": np.asarray(v.dense_shape).tolist()}
    if isinstance(v, bytes):
        return {"dtype": "string", "shape": [], "value": _text(v)}
    arr = np.asarray(v)
    if arr.dtype == object:
        return {"dtype": "string", "shape": list(arr.shape),
                "value": np.vectorize(_text, otypes=[object])(arr).tolist() if arr.size else []}
    return {"dtype": arr.dtype.name, "shape": list(arr.shape), "value": arr.tolist()}


def _text(b) -> str:
    return b.decode("latin-1") if isinstance(b, bytes) else b


def tf_result(case) -> dict:
    """What TensorFlow's tf.compat.v1 gives for ``case`` in graph mode."""
    import tensorflow as tf_all
    tf = tf_all.compat.v1
    _, op, args, kwargs = case[:4]

    def to_tf(x):
        if isinstance(x, np.dtype):
            return tf.as_dtype(x)
        if isinstance(x, list):
            return [to_tf(v) for v in x]
        if isinstance(x, dict):
            return {k: to_tf(v) for k, v in x.items()}
        return x
    fn = tf
    for part in op.split("."):
        fn = getattr(fn, part)
    with tf.Graph().as_default():
        try:
            out = fn(*to_tf(decode(args)), **{k: to_tf(decode(v)) for k, v in kwargs.items()})
            with tf.Session() as sess:
                value = sess.run(out)
        except Exception as e:  # noqa: BLE001 - the class is what is recorded
            return {"error": type(e).__name__}
    return encode_value(value)


def main() -> None:
    import tensorflow as tf_all
    out = {"about": f"tf.compat.v1 ops in graph mode, TensorFlow {tf_all.__version__}; "
                    "written by tests/data/make_tf_v1_ops.py",
           "cases": {c[0]: tf_result(c) for c in CASES}}
    json.dump(out, sys.stdout, indent=0, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
