"""TF1's op vocabulary for input pipelines: the names ``import nbdata.compat.v1 as tf``
gives besides ``tf.data``.

Every op takes TF1's arguments (``name=`` included) and follows TF1's dtype rules:
Python numbers convert as TF converts them (int to int32, or int64 when it does not
fit; float to float32), NumPy values keep their dtype, and the second operand of a
binary op converts to the dtype of the first (a tensor of another dtype is a
TypeError, as in TF). Given a graph tensor (a placeholder, an iterator's
``get_next()``, a map function's argument), an op records a graph operation that
``Session.run`` evaluates; given NumPy values, it computes the NumPy value TF would
give. Random ops draw anew on every ``Session.run`` in graph mode (and per element in a
``map`` function); on NumPy arguments in eager mode they draw once, when called.

>>> import numpy as np
>>> from nbdata.compat.v1 import ops as tf
>>> x = tf.placeholder(tf.int32, shape=[None])
>>> y = tf.reduce_mean(tf.divide(x, 2))
>>> with tf.Session() as sess:
...     float(sess.run(y, feed_dict={x: [1, 2, 3]}))
1.0
>>> tf.Session().run(tf.one_hot([0, 2], 3)).tolist()   # graph mode: a tensor
[[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
"""

from __future__ import annotations

import builtins
import operator
import threading
import types
from typing import Any, Callable

import numpy as np

import nbdata as _nd
from nbdata import errors, image, io  # noqa: F401 - tf.errors, tf.image, tf.io
from nbdata.errors import InvalidArgumentError, UnimplementedError
from nbdata import random as _random_module
from nbdata.random import op_seed as _op_seed
from nbdata.random import set_seed as _set_seed
from nbdata.spec import SparseTensor, SparseTensorSpec, TensorShape, TensorSpec, as_dtype, string, to_leaf
from nbdata.primitives import draws as _stateless
from nbdata.primitives.table import namespace
from nbdata.trace import graph as _graph
from nbdata.trace.function import DRAWS_PER_ELEMENT as _DRAWS_PER_ELEMENT
from nbdata.trace.function import element_key as _element_key
from nbdata.trace.graph import (Graph, Operation, Symbolic, Tensor, as_tensor,  # noqa: F401
                                get_default_graph, is_symbolic, record, reset_default_graph)
from nbdata.trace.graph import constant as _nd_constant

Session = _nd.Session
InteractiveSession = _nd.InteractiveSession
ConfigProto = _nd.ConfigProto
RunOptions = _nd.RunOptions
get_default_session = _nd.get_default_session
GraphKeys = _nd.GraphKeys
Variable = _nd.train.Variable
global_variables_initializer = _nd.global_variables_initializer
local_variables_initializer = _nd.local_variables_initializer
initialize_all_variables = _nd.global_variables_initializer
initialize_local_variables = _nd.local_variables_initializer
placeholder = _nd.placeholder
SparseTensorValue = SparseTensor
FIFOQueue = _nd.FIFOQueue
PaddingFIFOQueue = _nd.PaddingFIFOQueue
RandomShuffleQueue = _nd.RandomShuffleQueue
QueueBase = _nd.QueueBase
ReaderBase = _nd.ReaderBase
TextLineReader = _nd.TextLineReader
TFRecordReader = _nd.TFRecordReader
FixedLengthRecordReader = _nd.FixedLengthRecordReader
WholeFileReader = _nd.WholeFileReader
IdentityReader = _nd.IdentityReader
globals().update(namespace("tf"))   # TF1's top-level op-table entries (decoders: tf.io's too)
FixedLenFeature = io.FixedLenFeature
VarLenFeature = io.VarLenFeature
python_io = types.SimpleNamespace(TFRecordWriter=io.TFRecordWriter, TFRecordOptions=io.TFRecordOptions)

# ------------------------------------------------------------------ dtypes

int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16 = np.dtype(np.uint8), np.dtype(np.uint16)
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
half, double = float16, float64
bool = np.dtype(np.bool_)   # noqa: A001 - TF1's tf.bool
DType = np.dtype
_ = string   # tf.string is nd.string

_FLOATS = (float16, float32, float64)


def _dtype_name(dt) -> str:
    return "string" if dt is string else dt.name


# ------------------------------------------------------------- conversion

def _python_values(value: Any) -> list:
    out = []

    def walk(v):
        if isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        else:
            out.append(v)
    walk(value)
    return out


def convert(value: Any, dtype=None, what: str = "value") -> Any:
    """``value`` as TF converts it to a tensor (``tf.convert_to_tensor``): a graph value
    as it is (TypeError when its dtype is not ``dtype``), NumPy values keeping their
    dtype (cast to ``dtype`` when given), Python values with TF's dtypes.

    >>> convert(3).dtype, convert([1.5]).dtype, convert(2**40).dtype
    (dtype('int32'), dtype('float32'), dtype('int64'))
    >>> convert(np.arange(2), int32).dtype
    dtype('int32')
    """
    dt = None if dtype is None else as_dtype(dtype)
    if isinstance(value, Symbolic):
        have = as_dtype(value.dtype)
        if dt is not None and have is not dt and have != dt:
            raise TypeError(f"{what} has type {_dtype_name(have)} that does not match "
                            f"type {_dtype_name(dt)}")
        return value
    if isinstance(value, SparseTensor):
        return value
    if isinstance(value, (np.ndarray, np.generic)):
        leaf = to_leaf(value, what)
        if dt is None or as_dtype(np.asarray(leaf).dtype if not isinstance(leaf, bytes)
                                  else object) == dt:
            return leaf
        if dt is string or isinstance(leaf, bytes) or np.asarray(leaf).dtype == object:
            raise TypeError(f"{what}: expected {_dtype_name(dt)}, got a value of dtype "
                            f"{_dtype_name(as_dtype(np.asarray(leaf).dtype))}")
        with np.errstate(all="ignore"):
            return to_leaf(np.asarray(leaf).astype(dt), what)
    items = _python_values(value)
    if any(isinstance(v, (str, bytes)) for v in items):
        if dt is not None and dt is not string:
            raise TypeError(f"{what}: expected {_dtype_name(dt)}, got {value!r:.60} of type "
                            f"'{type(value).__name__}'")
        return to_leaf(value if isinstance(value, (str, bytes)) else list(value), what)
    try:
        arr = np.asarray(value)
    except ValueError as e:
        raise InvalidArgumentError(f"{what}: cannot convert {value!r:.60} to a tensor: {e}") from None
    if arr.dtype == object:
        raise TypeError(f"{what}: cannot convert {value!r:.60} to a tensor")
    if arr.dtype.kind == "b":
        natural = bool
    elif arr.dtype.kind in "iu":
        natural = int32 if arr.size == 0 or (arr.min() >= -2**31 and arr.max() < 2**31) else int64
    elif arr.dtype.kind == "f":
        natural = float32
    else:
        natural = as_dtype(arr.dtype)
    if dt is None:
        dt = natural
    elif dt is string or (dt.kind in "iu" and natural.kind not in "iu") or (
            dt.kind == "b") != (natural.kind == "b"):
        bad = next((v for v in items if not isinstance(v, builtins.bool) or dt.kind != "b"), value)
        raise TypeError(f"{what}: expected {_dtype_name(dt)}, but got {bad!r:.60} of type "
                        f"'{type(bad).__name__}'")
    elif dt.kind in "iu" and arr.size and (arr.min() < np.iinfo(dt).min or arr.max() > np.iinfo(dt).max):
        raise TypeError(f"{what}: {value!r:.60} is out of range for {_dtype_name(dt)}")
    return to_leaf(arr.astype(dt), what)


def _static(value: Symbolic) -> TensorShape:
    """The static shape of a graph value (a tensor or a placeholder)."""
    return TensorShape(value.spec.shape)


def _dtype_of(value: Any):
    if isinstance(value, (Symbolic, SparseTensor)):
        return as_dtype(value.dtype)
    if isinstance(value, bytes):
        return string
    return as_dtype(np.asarray(value).dtype)


def _same_dtype(values: list, op: str) -> list:
    """Operands converted as TF converts the inputs of one type attribute: the first as
    it is, the others to its dtype."""
    first = convert(values[0], what=f"Input 0 of '{op}' Op")
    dt = _dtype_of(first)
    out = [first]
    for k, v in enumerate(values[1:], 1):
        if isinstance(v, Symbolic) and _dtype_of(v) != dt:
            raise TypeError(f"Input {k} of '{op}' Op has type {_dtype_name(_dtype_of(v))} that "
                            f"does not match type {_dtype_name(dt)} of argument 0.")
        try:
            out.append(convert(v, dt, what=f"Input {k} of '{op}' Op"))
        except TypeError as e:
            raise TypeError(f"Expected {_dtype_name(dt)} passed to input {k} of op '{op}', "
                            f"got {v!r:.60} of type '{type(v).__name__}' instead. Error: {e}") from None
    return out


def _check_dtype(x: Any, allowed, op: str, arg: str = "x") -> Any:
    dt = _dtype_of(x)
    if not any(dt is a or (dt is not string and a is not string and dt == a) for a in allowed):
        names = ", ".join(_dtype_name(a) for a in allowed)
        raise TypeError(f"Value passed to parameter '{arg}' of op '{op}' has DataType "
                        f"{_dtype_name(dt)} not in list of allowed values: {names}")
    return x


_NUMBERS = (int8, int16, int32, int64, uint8, uint16, float16, float32, float64)


def _eager(fn: Callable, args: tuple, kwargs: dict, op: str) -> Any:
    try:
        with np.errstate(all="ignore"):
            out = fn(*args, **kwargs)
    except (errors.OpError, TypeError):
        raise
    except (ValueError, IndexError) as e:
        raise InvalidArgumentError(f"{op}: {e}", op) from e
    if isinstance(out, np.ndarray) and out.ndim == 0 and out.dtype != object:
        return out[()]
    return out


def _apply(fn: Callable, args: tuple, op: str, name: str | None, **kwargs) -> Any:
    """``fn(*args, **kwargs)``: recorded as a graph op when an argument is a graph
    value, else computed."""
    if is_symbolic(args, kwargs):
        return _with_control(record(fn, args, kwargs, op, name=name))
    value = _eager(fn, args, kwargs, op)
    if executing_eagerly() or _recording(get_default_graph()):
        return value   # in a function's graph: a constant its ops take as it is
    return _as_constants(value, name or op)   # graph mode: tensors, as in TF1


def _as_constants(value, name):
    if isinstance(value, (np.ndarray, np.generic, bytes)):
        return _nd_constant(value, name=name)
    if type(value) in (tuple, list):
        return type(value)(_as_constants(v, name) for v in value)
    return value


# ------------------------------------------------------------ graph basics

# The namespace is in graph mode, as TF1 is, until tf.enable_eager_execution().
_eager_mode = [False]


def executing_eagerly() -> builtins.bool:
    """TF1's ``tf.executing_eagerly``: False (graph mode) unless
    :func:`enable_eager_execution` was called, except inside a user function a pipeline
    calls on real elements (it computes values, as nbdata runs it).

    >>> import nbdata.compat.v1 as tf
    >>> tf.executing_eagerly()
    False
    """
    if _graph.in_eager_calls():
        return True
    return _eager_mode[0] and _graph.executing_eagerly()


def py_func(func, inp, Tout, stateful: builtins.bool = True, name: str | None = None):   # noqa: N803
    """``tf.py_func``: in graph mode (the namespace's) an op calling ``func`` at every
    ``Session.run``, also on constant inputs (a function drawing random numbers draws
    per run, as in TF1); in eager code, ``func``'s values at once."""
    if executing_eagerly():
        return _nd.py_func(func, inp, Tout, stateful, name)
    with get_default_graph().as_default():
        return _nd.py_func(func, inp, Tout, stateful, name)


def name_scope(name, default_name=None, values=None):
    """TF1's ``tf.name_scope(name, default_name=None, values=None)``: ops built inside
    are named ``name/...`` (``default_name`` when ``name`` is None); yields the scope.

    >>> with Graph().as_default():
    ...     with name_scope(None, "input", []) as scope:
    ...         c = constant(1)
    >>> scope, c.op.name
    ('input/', 'input/Const')
    """
    graph = _graph_of_values(values)
    return graph.name_scope(default_name if name is None else name)


def _graph_of_values(values):
    for v in _python_values(values if isinstance(values, (list, tuple)) else [values]):
        if isinstance(v, Tensor):
            return v.graph
    return get_default_graph()


def enable_eager_execution(config=None, device_policy=None, execution_mode=None) -> None:
    """``tf.enable_eager_execution``: ops on values compute (random ops draw once, when
    called), for this namespace and for ``nd``."""
    _eager_mode[0] = True
    _graph.enable_eager_execution()


def disable_eager_execution() -> None:
    """``tf.disable_eager_execution``: graph mode (the namespace's default) for this
    namespace and for ``nd``'s datasets."""
    _eager_mode[0] = False
    _graph.disable_eager_execution()


def disable_v2_behavior() -> None:
    """TF 2's ``tf.compat.v1.disable_v2_behavior``: graph mode for the process."""
    disable_eager_execution()


def enable_v2_behavior() -> None:
    """``tf.compat.v1.enable_v2_behavior``: eager mode."""
    enable_eager_execution()

def constant(value, dtype=None, shape=None, name: str = "Const", verify_shape: builtins.bool = False):
    """``tf.constant``: a graph tensor holding ``value`` with TF's dtypes (Python ints
    int32, floats float32). With ``shape``, a scalar is broadcast and a shorter list is
    padded with its last value, as in TF1.

    >>> constant([1, 2], shape=[4]).dtype
    dtype('int32')
    """
    leaf = convert(value, dtype, what="constant")
    if shape is not None:
        shape = tuple(int(d) for d in np.atleast_1d(np.asarray(shape, dtype=np.int64))) \
            if np.ndim(shape) else (int(shape),)
        arr = np.asarray(leaf, dtype=object if _dtype_of(leaf) is string else None)
        n = int(np.prod(shape))
        if arr.size == n:
            arr = arr.reshape(shape)
        elif arr.size == 1 or (not verify_shape and 0 < arr.size < n):
            flat = arr.reshape(-1)
            arr = np.concatenate([flat, np.repeat(flat[-1:], n - flat.size)]).reshape(shape)
        else:
            raise TypeError(f"Expected Tensor's shape: {shape}, got {arr.shape}.")
        leaf = to_leaf(arr, "constant")
    return _nd_constant(leaf, name=name)


def placeholder_with_default(input, shape, name: str | None = None) -> Tensor:   # noqa: A002
    """``tf.placeholder_with_default``: ``input`` unless a value is fed for the tensor.

    >>> with Graph().as_default():
    ...     p = placeholder_with_default([1, 2], shape=[None])
    ...     s = Session()
    ...     s.run(p).tolist(), s.run(p, feed_dict={p: [7]}).tolist()
    ([1, 2], [7])
    """
    leaf = convert(input, what="placeholder_with_default")
    spec = TensorSpec(shape, _dtype_of(leaf))
    if not TensorShape(spec.shape).is_compatible_with(np.shape(leaf)):
        raise ValueError(f"placeholder_with_default: the default's shape {np.shape(leaf)} is "
                         f"not compatible with shape {TensorShape(spec.shape)}")
    return Operation(get_default_graph(), "PlaceholderWithDefault", name, [],
                     lambda: leaf, [spec]).outputs[0]


def add_to_collection(name, value) -> None:
    """``tf.add_to_collection``: ``value`` added to the default graph's collection(s)."""
    for key in (name if isinstance(name, (list, tuple)) else [name]):
        get_default_graph().add_to_collection(key, value)


add_to_collections = add_to_collection


def get_collection(key, scope: str | None = None) -> list:
    """``tf.get_collection`` of the default graph."""
    return get_default_graph().get_collection(key, scope)


def get_collection_ref(key) -> list:
    """``tf.get_collection_ref`` of the default graph."""
    return get_default_graph().get_collection_ref(key)


def set_random_seed(seed) -> None:
    """``tf.set_random_seed``: the graph-level seed random ops derive theirs from."""
    _set_seed(seed)


def no_op(name: str | None = None) -> Operation:
    """``tf.no_op``: an operation that does nothing."""
    return Operation(get_default_graph(), "NoOp", name, [], None, [], kind="stateful")


def group(*inputs, name: str | None = None) -> Operation:
    """``tf.group``: one operation that runs all of ``inputs`` (ops or tensors)."""
    ops = []

    def walk(x):
        if isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, Tensor):
            ops.append(x.op)
        elif isinstance(x, Operation):
            ops.append(x)
        elif x is not None:
            raise TypeError(f"group: expected operations or tensors, got {type(x).__name__}")
    walk(inputs)
    return Operation(get_default_graph(), "NoOp", name or "group_deps", [], None, [],
                     kind="stateful", control_inputs=tuple(ops))


def identity(input, name: str | None = None):   # noqa: A002
    """``tf.identity``: the same value (in a graph, a new tensor)."""
    return _apply(_identity, (convert(input, what="identity"),), "Identity", name)


def _identity(x):
    return x


# ---------------------------------------------------------- arithmetic

def _binary(ufunc, op: str, x, y, name):
    x, y = _same_dtype([x, y], op)
    return _apply(ufunc, (x, y), op, name)


def add(x, y, name: str | None = None):
    """``tf.add`` (TF's dtype rules; string tensors concatenate)."""
    return _binary(np.add, "AddV2", x, y, name)


def subtract(x, y, name: str | None = None):
    """``tf.subtract``."""
    return _binary(np.subtract, "Sub", x, y, name)


def multiply(x, y, name: str | None = None):
    """``tf.multiply``."""
    return _binary(np.multiply, "Mul", x, y, name)


def _truediv(x, y):
    x, y = np.asarray(x), np.asarray(y)
    if x.dtype.kind in "iu":
        target = float32 if x.dtype.itemsize <= 2 else float64
        x, y = x.astype(target), y.astype(target)
    return np.true_divide(x, y)


def truediv(x, y, name: str | None = None):
    """``tf.truediv``: int8/16 and uint8/16 divide as float32, int32/64 as float64.

    >>> run = Session().run
    >>> run(truediv([1, 2], 2)).tolist(), truediv(np.int8(1), np.int8(2)).dtype
    ([0.5, 1.0], dtype('float32'))
    """
    x, y = _same_dtype([x, y], "RealDiv")
    _check_dtype(x, _NUMBERS, "truediv")
    if is_symbolic(x, y):   # as NumPy functions the op table fuses
        dt = _dtype_of(x)
        if dt.kind in "iu":
            target = float32 if dt.itemsize <= 2 else float64
            x, y = (v.astype(target) if is_symbolic(v) else np.asarray(v).astype(target)
                    for v in (x, y))
        return _apply(np.true_divide, (x, y), "truediv", name)
    return _apply(_truediv, (x, y), "truediv", name)


def divide(x, y, name: str | None = None):
    """``tf.divide``: true division (``x / y``), as :func:`truediv`."""
    return truediv(x, y, name=name)


def _int_div_check(y):
    if np.asarray(y).dtype.kind in "iu" and np.any(np.asarray(y) == 0):
        raise InvalidArgumentError("Integer division by zero")


def _floordiv(x, y):
    _int_div_check(y)
    return np.floor_divide(x, y)


def _floormod(x, y):
    _int_div_check(y)
    return np.remainder(x, y)


def floordiv(x, y, name: str | None = None):
    """``tf.floordiv``: division rounded down; an integer division by zero raises
    InvalidArgumentError."""
    x, y = _same_dtype([x, y], "FloorDiv")
    return _apply(_floordiv, (x, y), "floordiv", name)


def mod(x, y, name: str | None = None):
    """``tf.mod`` (``floormod``): the remainder has the divisor's sign."""
    x, y = _same_dtype([x, y], "FloorMod")
    return _apply(_floormod, (x, y), "FloorMod", name)


floormod = mod


def minimum(x, y, name: str | None = None):
    """``tf.minimum``."""
    return _binary(np.minimum, "Minimum", x, y, name)


def maximum(x, y, name: str | None = None):
    """``tf.maximum``."""
    return _binary(np.maximum, "Maximum", x, y, name)


def pow(x, y, name: str | None = None):   # noqa: A001
    """``tf.pow``."""
    return _binary(np.power, "Pow", x, y, name)


def _unary(ufunc, op: str, x, name, allowed=None):
    x = convert(x, what=f"Input of '{op}' Op")
    if allowed is not None:
        _check_dtype(x, allowed, op)
    return _apply(ufunc, (x,), op, name)


def abs(x, name: str | None = None):   # noqa: A001
    """``tf.abs``."""
    return _unary(np.absolute, "Abs", x, name, _NUMBERS)


def negative(x, name: str | None = None):
    """``tf.negative``."""
    return _unary(np.negative, "Neg", x, name, _NUMBERS)


def square(x, name: str | None = None):
    """``tf.square``."""
    return _unary(np.square, "Square", x, name, _NUMBERS)


def sqrt(x, name: str | None = None):
    """``tf.sqrt`` (float tensors only, as in TF)."""
    return _unary(np.sqrt, "Sqrt", x, name, _FLOATS)


def exp(x, name: str | None = None):
    """``tf.exp`` (float tensors only)."""
    return _unary(np.exp, "Exp", x, name, _FLOATS)


def log(x, name: str | None = None):
    """``tf.log`` (float tensors only)."""
    return _unary(np.log, "Log", x, name, _FLOATS)


def round(x, name: str | None = None):   # noqa: A001
    """``tf.round``: halves to even, as TF and NumPy round."""
    return _unary(np.round, "Round", x, name, _NUMBERS)


def floor(x, name: str | None = None):
    """``tf.floor``."""
    return _unary(np.floor, "Floor", x, name, _FLOATS)


def ceil(x, name: str | None = None):
    """``tf.ceil``."""
    return _unary(np.ceil, "Ceil", x, name, _FLOATS)


def clip_by_value(t, clip_value_min, clip_value_max, name: str | None = None):
    """``tf.clip_by_value``: the bounds convert to ``t``'s dtype."""
    t, lo, hi = _same_dtype([t, clip_value_min, clip_value_max], "clip_by_value")
    if is_symbolic(t, lo, hi):
        return _apply(np.minimum, (_apply(np.maximum, (t, lo), "Maximum", None), hi),
                      "clip_by_value", name)
    return _apply(_clip, (t, lo, hi), "clip_by_value", name)


def _clip(t, lo, hi):
    return np.minimum(np.maximum(t, lo), hi)


# ---------------------------------------------------------- comparisons

def _bytes_compare(ufunc):
    def compare(x, y):
        """String tensors compared as bytes (a scalar pair as Python bytes)."""
        if isinstance(x, bytes) and isinstance(y, bytes):
            return np.bool_(ufunc(bytes(x), bytes(y)))
        return ufunc(np.asarray(x, dtype=object), np.asarray(y, dtype=object)).astype(np.bool_)
    compare.__name__ = ufunc.__name__
    return compare


_equal_bytes, _not_equal_bytes = _bytes_compare(np.equal), _bytes_compare(np.not_equal)


def equal(x, y, name: str | None = None):
    """``tf.equal``."""
    if _dtype_of(convert(x)) is string:
        x, y = _same_dtype([x, y], "Equal")
        return _apply(_equal_bytes, (x, y), "Equal", name)
    return _binary(np.equal, "Equal", x, y, name)


def not_equal(x, y, name: str | None = None):
    """``tf.not_equal``."""
    if _dtype_of(convert(x)) is string:
        x, y = _same_dtype([x, y], "NotEqual")
        return _apply(_not_equal_bytes, (x, y), "NotEqual", name)
    return _binary(np.not_equal, "NotEqual", x, y, name)


def less(x, y, name: str | None = None):
    """``tf.less``."""
    return _binary(np.less, "Less", x, y, name)


def less_equal(x, y, name: str | None = None):
    """``tf.less_equal``."""
    return _binary(np.less_equal, "LessEqual", x, y, name)


def greater(x, y, name: str | None = None):
    """``tf.greater``."""
    return _binary(np.greater, "Greater", x, y, name)


def greater_equal(x, y, name: str | None = None):
    """``tf.greater_equal``."""
    return _binary(np.greater_equal, "GreaterEqual", x, y, name)


def _logical(ufunc, op: str, values: list, name):
    values = [_check_dtype(convert(v, bool, what=f"Input of '{op}' Op"), (bool,), op)
              for v in values]
    return _apply(ufunc, tuple(values), op, name)


def logical_and(x, y, name: str | None = None):
    """``tf.logical_and`` (bool tensors only)."""
    return _logical(np.logical_and, "LogicalAnd", [x, y], name)


def logical_or(x, y, name: str | None = None):
    """``tf.logical_or`` (bool tensors only)."""
    return _logical(np.logical_or, "LogicalOr", [x, y], name)


def logical_xor(x, y, name: str | None = None):
    """``tf.logical_xor`` (bool tensors only)."""
    return _logical(np.logical_xor, "LogicalXor", [x, y], name)


def logical_not(x, name: str | None = None):
    """``tf.logical_not`` (bool tensors only)."""
    return _logical(np.logical_not, "LogicalNot", [x], name)


# ------------------------------------------------------------------ cast

def _cast(x, dtype):
    x = x if isinstance(x, bytes) else np.asarray(x)
    src = _dtype_of(x)
    if src is string or dtype is string:
        if src is dtype:
            return x
        raise UnimplementedError(f"Cast {_dtype_name(src)} to {_dtype_name(dtype)} is not supported")
    if dtype.kind == "b":
        return x != 0
    if src.kind == "f" and dtype.kind in "iu" and dtype.itemsize < 4:
        # Truncated toward zero, then wrapped (TF's static_cast through int).
        return np.trunc(x).astype(np.int64).astype(dtype)
    with np.errstate(invalid="ignore"):   # out of range: the C cast's value, as TF
        return x.astype(dtype)


def cast(x, dtype, name: str | None = None):
    """``tf.cast``: floats to integers truncate toward zero; to bool, nonzero is True;
    strings do not cast (UnimplementedError, as in TF).

    >>> run = Session().run
    >>> run(cast([1.7, -1.7], int32)).tolist(), run(cast([-1, 300], uint8)).tolist()
    ([1, -1], [255, 44])
    """
    dt = as_dtype(dtype)
    x = convert(x, what="cast")
    if not is_symbolic(x):
        return _apply(_cast, (x, dt), "Cast", name)
    if _dtype_of(x) is string and dt is not string or dt is string and _dtype_of(x) is not string:
        raise UnimplementedError(f"Cast {_dtype_name(_dtype_of(x))} to {_dtype_name(dt)} is not "
                                 "supported")
    src = _dtype_of(x)
    if src is not string and not (src.kind == "f" and dt.kind in "iu" and dt.itemsize < 4):
        # NumPy's astype is TF's cast here: the op table's cast entry, which fuses.
        return record(_graph.astype, (x, dt), {}, "Cast", name=name)
    return record(_cast, (x, dt), {}, "Cast", name=name)


def to_float(x, name: str = "ToFloat"):
    """``tf.to_float``: ``cast(x, float32)``."""
    return cast(x, float32, name=name)


def to_double(x, name: str = "ToDouble"):
    """``tf.to_double``: ``cast(x, float64)``."""
    return cast(x, float64, name=name)


def to_int32(x, name: str = "ToInt32"):
    """``tf.to_int32``: ``cast(x, int32)``."""
    return cast(x, int32, name=name)


def to_int64(x, name: str = "ToInt64"):
    """``tf.to_int64``: ``cast(x, int64)``."""
    return cast(x, int64, name=name)


# ---------------------------------------------------------- array ops

def _int_list(value, what: str):
    if is_symbolic(value):
        return value
    arr = np.asarray(value)
    if arr.dtype.kind not in "iu" and arr.size:
        raise TypeError(f"{what} must be integers, got {value!r:.60}")
    return tuple(int(d) for d in arr.reshape(-1))


def reshape(tensor, shape, name: str | None = None):
    """``tf.reshape`` (one dim may be -1)."""
    tensor = convert(tensor, what="reshape")
    shape = _int_list(shape, "reshape: shape")
    if is_symbolic(shape):
        return _apply(_reshape, (tensor, shape), "Reshape", name)
    return _apply(np.reshape, (tensor, shape), "Reshape", name)


def _reshape(x, shape):
    return np.reshape(x, tuple(int(d) for d in np.asarray(shape).reshape(-1)))


def _reshape_spec(x, shape):
    """A shape known when the graph runs: its given ints static, the rest unknown."""
    dtype = x.dtype if isinstance(x, Symbolic) else _dtype_of(x)
    if isinstance(shape, (list, tuple)):
        return TensorSpec(tuple(None if isinstance(d, Symbolic) or int(d) == -1 else int(d)
                                for d in shape), dtype)
    dims = _static(shape).dims
    return TensorSpec(None if not dims or dims[0] is None else (None,) * dims[0], dtype)


_reshape.primitive = types.SimpleNamespace(abstract=_reshape_spec)


def _stack(values, axis):
    return np.stack(values, axis=axis)


def stack(values, axis: int = 0, name: str = "stack"):
    """``tf.stack``: the values (converted to the first one's dtype) along a new axis."""
    values = _same_dtype(list(values), "Pack")
    if is_symbolic(values):   # NumPy's stack, which the op table fuses
        return _apply(np.stack, (tuple(values),), "Pack", name, axis=int(axis))
    return _apply(_stack, (values, int(axis)), "Pack", name)


def unstack(value, num=None, axis: int = 0, name: str = "unstack"):
    """``tf.unstack``: the slices along ``axis`` (its size must be known)."""
    value = convert(value, what="unstack")
    dims = _static(value).dims if isinstance(value, Symbolic) else np.shape(value)
    if dims is None:
        raise ValueError("Cannot infer num from an unknown shape")
    n = dims[axis]
    if n is None:
        n = num
    if n is None:
        raise ValueError(f"Cannot infer num from shape {TensorShape(dims)}")
    return [_apply(_take_one, (value, k, int(axis)), "Unpack", name) for k in range(n)]


def _take_one(x, k, axis):
    return np.take(x, k, axis=axis)


def _concat(values, axis):
    return np.concatenate(values, axis=axis)


def concat(values, axis, name: str = "concat"):
    """``tf.concat(values, axis)`` (TF 1.0's argument order).

    >>> Session().run(concat([[1], [2]], 0)).tolist()
    [1, 2]
    """
    if not isinstance(values, (list, tuple)) and isinstance(axis, (list, tuple)):
        raise TypeError("tf.concat takes (values, axis): concat(values, axis); the "
                        "concat(axis, values) order is from before TF 1.0")
    if not isinstance(values, (list, tuple)):
        values = [values]
    values = _same_dtype(list(values), "ConcatV2")
    if is_symbolic(values) and not is_symbolic(axis):
        return _apply(np.concatenate, (tuple(values),), "ConcatV2", name, axis=int(axis))
    return _apply(_concat, (values, axis), "ConcatV2", name)


def _expand_dims(x, axis):
    return np.expand_dims(x, int(axis))


def expand_dims(input, axis=None, name: str | None = None, dim=None):   # noqa: A002
    """``tf.expand_dims`` (``dim`` is TF1's older name of ``axis``)."""
    axis = dim if axis is None else axis
    if axis is None:
        raise ValueError("Must specify an axis argument to tf.expand_dims()")
    if not is_symbolic(axis):
        return _apply(np.expand_dims, (convert(input, what="expand_dims"), int(axis)),
                      "ExpandDims", name)
    return _apply(_expand_dims, (convert(input, what="expand_dims"), axis), "ExpandDims", name)


def _squeeze(x, axis):
    x = np.asarray(x)
    if axis is None:
        return np.squeeze(x)
    axes = tuple(int(a) for a in np.atleast_1d(axis))
    for a in axes:
        if not -x.ndim <= a < x.ndim:
            raise InvalidArgumentError(f"Tried to squeeze dim index {a} for tensor with "
                                       f"{x.ndim} dimensions.")
        if x.shape[a] != 1:
            raise InvalidArgumentError(f"Can not squeeze dim[{a}], expected a dimension of 1, "
                                       f"got {x.shape[a]}")
    return np.squeeze(x, axis=tuple(a % x.ndim for a in axes))


def squeeze(input, axis=None, name: str | None = None, squeeze_dims=None):   # noqa: A002
    """``tf.squeeze``: size-1 dims removed (those of ``axis``, which must be 1)."""
    axis = squeeze_dims if axis is None else axis
    if axis is not None:
        axis = _int_list(axis, "squeeze: axis")
    return _apply(_squeeze, (convert(input, what="squeeze"), axis), "Squeeze", name)


def _where(condition, x=None, y=None):
    condition = np.asarray(condition)
    if x is None:
        return np.argwhere(condition).astype(np.int64)
    x, y = np.asarray(x), np.asarray(y)
    if condition.shape != x.shape:
        if condition.ndim == 1 and x.ndim >= 1 and condition.shape[0] == x.shape[0]:
            condition = condition.reshape((-1,) + (1,) * (x.ndim - 1))
        else:
            raise InvalidArgumentError(
                f"condition must be a scalar, a vector of size of x's first dimension or of "
                f"x's shape: condition {condition.shape}, x {x.shape}")
    if x.shape != y.shape:
        raise InvalidArgumentError(f"x and y must have the same shape: {x.shape} vs {y.shape}")
    return np.where(condition, x, y)


def where(condition, x=None, y=None, name: str | None = None):
    """TF1's ``tf.where``: with only ``condition``, the int64 ``[N, rank]`` coordinates
    of its True values; with ``x`` and ``y``, elements of ``x`` where ``condition``
    (of ``x``'s shape, or a vector over its first dimension) and of ``y`` elsewhere.

    >>> Session().run(where([True, False, True])).tolist()
    [[0], [2]]
    """
    if (x is None) != (y is None):
        raise ValueError("x and y must both be non-None or both be None.")
    condition = _check_dtype(convert(condition, bool, what="where: condition"), (bool,), "Where",
                             "condition")
    if x is None:
        return _apply(_where, (condition,), "Where", name)
    x, y = _same_dtype([x, y], "Select")
    return _apply(_where, (condition, x, y), "Select", name)


def _one_hot(indices, depth, on_value, off_value, axis, dtype):
    indices = np.asarray(indices)
    hot = indices[..., None] == np.arange(int(depth))
    out = np.where(hot, np.asarray(on_value, dtype), np.asarray(off_value, dtype)).astype(dtype)
    if axis not in (-1, indices.ndim):
        out = np.moveaxis(out, -1, axis)
    return out


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None,
            name: str | None = None):
    """``tf.one_hot``: ``on_value`` where the index is the position along the new axis,
    ``off_value`` elsewhere (indices out of ``[0, depth)`` give a row of ``off_value``).
    The dtype is ``dtype``, else that of ``on_value``/``off_value``, else float32.

    >>> Session().run(one_hot([0, 2, -1], 3, axis=0)).tolist()
    [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    """
    indices = _check_dtype(convert(indices, what="one_hot: indices"), (uint8, int32, int64),
                           "OneHot", "indices")
    if dtype is not None:
        dt = as_dtype(dtype)
    elif on_value is not None:
        dt = _dtype_of(convert(on_value))
    elif off_value is not None:
        dt = _dtype_of(convert(off_value))
    else:
        dt = float32
    on = convert(1 if on_value is None else on_value, dt, what="one_hot: on_value")
    off = convert(0 if off_value is None else off_value, dt, what="one_hot: off_value")
    rank = np.ndim(indices) if not isinstance(indices, Symbolic) else _static(indices).ndims
    axis = -1 if axis is None else int(axis)
    if axis < -1 or rank is not None and axis > rank:
        raise ValueError(f"Expected axis to be -1 or between [0, {rank}).  But received: {axis}")
    return _apply(_one_hot, (indices, depth, on, off, axis, dt), "OneHot", name)


def _fill(dims, value):
    dims = tuple(int(d) for d in np.asarray(dims).reshape(-1))
    if any(d < 0 for d in dims):
        raise InvalidArgumentError(f"dims must be non-negative, got {list(dims)}")
    value = np.asarray(value)
    return np.full(dims, value, dtype=object if value.dtype == object else value.dtype)


def fill(dims, value, name: str | None = None):
    """``tf.fill``: a tensor of shape ``dims`` holding ``value`` (of its TF dtype)."""
    value = convert(value, what="fill: value")
    dims = dims if is_symbolic(dims) else convert(dims, what="fill: dims")
    return _apply(_fill, (dims, value), "Fill", name)


def zeros(shape, dtype=float32, name: str | None = None):
    """``tf.zeros`` (float32 by default)."""
    return fill(shape, _typed(0, dtype), name=name or "zeros")


def ones(shape, dtype=float32, name: str | None = None):
    """``tf.ones`` (float32 by default)."""
    return fill(shape, _typed(1, dtype), name=name or "ones")


def _typed(value, dtype):
    dt = as_dtype(dtype)
    return b"" if dt is string else np.asarray(value).astype(dt)[()]


def _full_like(x, value, dtype):
    x = np.asarray(x)
    return np.full(x.shape, value, dtype=dtype if dtype is not None else x.dtype)


def zeros_like(tensor, dtype=None, name: str | None = None, optimize: builtins.bool = True):
    """``tf.zeros_like``: zeros of ``tensor``'s shape (and dtype unless given)."""
    tensor = convert(tensor, what="zeros_like")
    dt = None if dtype is None else as_dtype(dtype)
    return _apply(_full_like, (tensor, 0, dt), "ZerosLike", name)


def ones_like(tensor, dtype=None, name: str | None = None, optimize: builtins.bool = True):
    """``tf.ones_like``: ones of ``tensor``'s shape (and dtype unless given)."""
    tensor = convert(tensor, what="ones_like")
    dt = None if dtype is None else as_dtype(dtype)
    return _apply(_full_like, (tensor, 1, dt), "OnesLike", name)


_RANGE_ORDER = (int32, int64, float32, float64)


def _range(start, limit, delta, dtype):
    start, limit, delta = (np.asarray(v).astype(dtype)[()] for v in (start, limit, delta))
    if delta == 0:
        raise InvalidArgumentError(f"Requires delta != 0: {delta}")
    if delta > 0 and start > limit:
        raise InvalidArgumentError(f"Requires start <= limit when delta > 0: {start}/{limit}")
    if delta < 0 and start < limit:
        raise InvalidArgumentError(f"Requires start >= limit when delta < 0: {start}/{limit}")
    if dtype.kind in "iu":
        size = (builtins.abs(int(limit) - int(start)) + builtins.abs(int(delta)) - 1) // builtins.abs(int(delta))
    else:
        size = int(np.ceil(np.abs((limit - start) / delta)))
    return (start + np.arange(size).astype(dtype) * delta).astype(dtype)


def range(start, limit=None, delta=1, dtype=None, name: str = "range"):   # noqa: A001
    """``tf.range``: ``[start, limit)`` by ``delta``; the dtype is the widest of the
    arguments' (Python ints int32, floats float32) unless given.

    >>> range(5).dtype, Session().run(range(1, 5.5)).tolist()
    (dtype('int32'), [1.0, 2.0, 3.0, 4.0, 5.0])
    """
    if limit is None:
        start, limit = 0, start
    args = [start, limit, delta]
    if dtype is None:
        kinds = [_dtype_of(a if is_symbolic(a) else convert(a, what="range")) for a in args]
        ranked = [_RANGE_ORDER.index(k) for k in kinds if k in _RANGE_ORDER]
        if len(ranked) != 3:
            raise TypeError(f"range: arguments of dtypes {kinds} are not numbers")
        dt = _RANGE_ORDER[max(ranked)]
    else:
        dt = as_dtype(dtype)
    args = [a if is_symbolic(a) else convert(a, what="range") for a in args]
    return _apply(_range, (*args, dt), "Range", name)


def _shape(x, out_type):
    return np.asarray(x.shape if isinstance(x, SparseTensor) else np.shape(x), dtype=out_type)


def shape(input, name: str | None = None, out_type=int32):   # noqa: A002
    """``tf.shape``: the dynamic shape, int32 by default."""
    return _apply(_shape, (convert(input, what="shape"), as_dtype(out_type)), "Shape", name)


def _size(x, out_type):
    return np.asarray(np.size(x), dtype=out_type)[()]


def size(input, name: str | None = None, out_type=int32):   # noqa: A002
    """``tf.size``: the number of elements, int32 by default."""
    return _apply(_size, (convert(input, what="size"), as_dtype(out_type)), "Size", name)


def _rank(x):
    return np.int32(np.ndim(x))


def rank(input, name: str | None = None):   # noqa: A002
    """``tf.rank``: the number of dimensions (int32)."""
    return _apply(_rank, (convert(input, what="rank"),), "Rank", name)


def _transpose(a, perm):
    return np.transpose(a, None if perm is None else tuple(int(p) for p in np.asarray(perm).reshape(-1)))


def transpose(a, perm=None, name: str = "transpose", conjugate: builtins.bool = False):
    """``tf.transpose``: dims reversed, or permuted by ``perm``."""
    if perm is not None and not is_symbolic(perm):
        perm = tuple(int(p) for p in np.asarray(perm).reshape(-1))
        return _apply(np.transpose, (convert(a, what="transpose"), perm), "Transpose", name)
    return _apply(_transpose, (convert(a, what="transpose"), perm), "Transpose", name)


def _tile(x, multiples):
    x = np.asarray(x)
    multiples = tuple(int(m) for m in np.asarray(multiples).reshape(-1))
    if len(multiples) != x.ndim:
        raise InvalidArgumentError(f"Expected multiples argument to be a vector of length "
                                   f"{x.ndim} but got length {len(multiples)}")
    if any(m < 0 for m in multiples):
        raise InvalidArgumentError(f"Expected multiples to be non-negative, got {list(multiples)}")
    return np.tile(x, multiples)


def tile(input, multiples, name: str | None = None):   # noqa: A002
    """``tf.tile``: ``multiples`` has one entry per dimension of ``input``."""
    return _apply(_tile, (convert(input, what="tile"), multiples), "Tile", name)


def _gather(params, indices, axis):
    params, indices = np.asarray(params), np.asarray(indices)
    axis = int(axis)
    if not -params.ndim <= axis < params.ndim:
        raise InvalidArgumentError(f"Expected axis in the range [{-params.ndim}, {params.ndim}), "
                                   f"but got {axis}")
    n = params.shape[axis]
    bad = np.argwhere((indices < 0) | (indices >= n))
    if bad.size:
        where = ",".join(str(int(i)) for i in bad[0])
        raise InvalidArgumentError(f"indices[{where}] = {int(indices[tuple(bad[0])])} is not in "
                                   f"[0, {n})")
    return np.take(params, indices, axis=axis)


def gather(params, indices, validate_indices=None, name: str | None = None, axis=None,
           batch_dims: int = 0):
    """``tf.gather``: slices of ``params`` along ``axis`` (0) at ``indices``; an index
    out of range raises InvalidArgumentError, as TF on CPU."""
    if batch_dims:
        raise UnimplementedError("gather: batch_dims is not supported")
    indices = _check_dtype(convert(indices, what="gather: indices"), (int32, int64), "GatherV2",
                           "indices")
    return _apply(_gather, (convert(params, what="gather"), indices, 0 if axis is None else axis),
                  "GatherV2", name)


def _slice(x, begin, size):
    x = np.asarray(x)
    begin = [int(b) for b in np.asarray(begin).reshape(-1)]
    size = [int(s) for s in np.asarray(size).reshape(-1)]
    if len(begin) != x.ndim or len(size) != x.ndim:
        raise InvalidArgumentError(f"Expected begin and size arguments to be 1-D tensors of size "
                                   f"{x.ndim}, but got shapes [{len(begin)}] and [{len(size)}] "
                                   "instead.")
    index = []
    for k, (b, s) in enumerate(zip(begin, size)):
        s = x.shape[k] - b if s == -1 else s
        if b < 0 or s < 0 or b + s > x.shape[k]:
            raise InvalidArgumentError(f"Expected size[{k}] in [0, {x.shape[k] - b}], but got {s}")
        index.append(builtins.slice(b, b + s))
    return x[tuple(index)]


def _slice_spec(x, begin, size):
    """The spec of a slice with static ``begin``/``size``: ``size`` (a -1 the rest of a
    known dim), checked against the dims known (a sample input cannot show the size of
    an unknown dim: decode_raw's bytes)."""
    if is_symbolic(begin) or is_symbolic(size) or not isinstance(x, Symbolic):
        return None
    dims = _static(x).dims
    begin = [int(b) for b in np.asarray(begin).reshape(-1)]
    size = [int(v) for v in np.asarray(size).reshape(-1)]
    if dims is None or len(begin) != len(dims) or len(size) != len(dims):
        return None
    out = []
    for k, (d, b, n) in enumerate(zip(dims, begin, size)):
        if d is not None and (b < 0 or (n != -1 and (n < 0 or b + n > d))):
            raise InvalidArgumentError(f"Expected size[{k}] in [0, {d - b}], but got {n}")
        out.append(n if n != -1 else (None if d is None else d - b))
    return TensorSpec(tuple(out), x.dtype)


_slice.primitive = types.SimpleNamespace(abstract=_slice_spec)


def slice(input_, begin, size, name: str | None = None):   # noqa: A001
    """``tf.slice``: ``size[k]`` elements from ``begin[k]`` in each dim (-1: the rest)."""
    return _apply(_slice, (convert(input_, what="slice"), begin, size), "Slice", name)


# ------------------------------------------------------------ reductions

def _axes(axis, reduction_indices):
    axis = reduction_indices if axis is None else axis
    if axis is None or is_symbolic(axis):
        return axis
    return tuple(int(a) for a in np.atleast_1d(np.asarray(axis)))


def _check_axes(x, axis):
    if axis is None:
        return None
    axis = tuple(int(a) for a in np.atleast_1d(np.asarray(axis)))
    for a in axis:
        if not -x.ndim <= a < builtins.max(x.ndim, 1):
            raise InvalidArgumentError(f"Invalid reduction dimension {a} for input with "
                                       f"{x.ndim} dimensions.")
    return tuple(a % x.ndim for a in axis) if x.ndim else ()


def _sum(x, axis, keepdims):
    x = np.asarray(x)
    return np.sum(x, axis=_check_axes(x, axis), keepdims=keepdims, dtype=x.dtype)


def _prod(x, axis, keepdims):
    x = np.asarray(x)
    return np.prod(x, axis=_check_axes(x, axis), keepdims=keepdims, dtype=x.dtype)


def _mean(x, axis, keepdims):
    x = np.asarray(x)
    axes = _check_axes(x, axis)
    if x.dtype.kind in "iu":
        total = np.sum(x, axis=axes, keepdims=keepdims, dtype=x.dtype)
        count = x.size // builtins.max(np.size(total), 1) if x.size else 0
        if count == 0:
            return np.zeros_like(total)
        # C++ integer division: truncated toward zero.
        return (np.sign(total) * (np.abs(total) // count)).astype(x.dtype)
    return np.mean(x, axis=axes, keepdims=keepdims, dtype=x.dtype)


def _extreme(x, axis, keepdims, fn, initial):
    x = np.asarray(x)
    start = initial(x.dtype)
    return fn(x, axis=_check_axes(x, axis), keepdims=keepdims, initial=start)


def _max(x, axis, keepdims):
    return _extreme(x, axis, keepdims, np.max,
                    lambda dt: -np.inf if dt.kind == "f" else np.iinfo(dt).min)


def _min(x, axis, keepdims):
    return _extreme(x, axis, keepdims, np.min,
                    lambda dt: np.inf if dt.kind == "f" else np.iinfo(dt).max)


def _any(x, axis, keepdims):
    x = np.asarray(x)
    return np.any(x, axis=_check_axes(x, axis), keepdims=keepdims)


def _all(x, axis, keepdims):
    x = np.asarray(x)
    return np.all(x, axis=_check_axes(x, axis), keepdims=keepdims)


def _reduction(fn, op, allowed, input_tensor, axis, keepdims, name, reduction_indices, keep_dims):
    x = _check_dtype(convert(input_tensor, what=op), allowed, op, "input")
    keep = builtins.bool(keep_dims if keepdims is None and keep_dims is not None else keepdims)
    return _apply(fn, (x, _axes(axis, reduction_indices), keep), op, name)


def reduce_sum(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
    """``tf.reduce_sum``: in the input's dtype (integers wrap, as in TF)."""
    return _reduction(_sum, "Sum", _NUMBERS, input_tensor, axis, keepdims, name,
                      reduction_indices, keep_dims)


def reduce_mean(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
                keep_dims=None):
    """``tf.reduce_mean``: in the input's dtype; an integer mean is truncated toward zero.

    >>> run = Session().run
    >>> int(run(reduce_mean([-1, -2]))), run(reduce_mean([[1.0, 2.0]], keep_dims=True)).tolist()
    (-1, [[1.5]])
    """
    return _reduction(_mean, "Mean", _NUMBERS, input_tensor, axis, keepdims, name,
                      reduction_indices, keep_dims)


def reduce_prod(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
                keep_dims=None):
    """``tf.reduce_prod``."""
    return _reduction(_prod, "Prod", _NUMBERS, input_tensor, axis, keepdims, name,
                      reduction_indices, keep_dims)


def reduce_max(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
    """``tf.reduce_max``: an empty reduction gives the dtype's lowest value (-inf)."""
    return _reduction(_max, "Max", _NUMBERS, input_tensor, axis, keepdims, name,
                      reduction_indices, keep_dims)


def reduce_min(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
    """``tf.reduce_min``: an empty reduction gives the dtype's highest value (inf)."""
    return _reduction(_min, "Min", _NUMBERS, input_tensor, axis, keepdims, name,
                      reduction_indices, keep_dims)


def reduce_any(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
    """``tf.reduce_any`` (bool tensors only)."""
    return _reduction(_any, "Any", (bool,), input_tensor, axis, keepdims, name,
                      reduction_indices, keep_dims)


def reduce_all(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
    """``tf.reduce_all`` (bool tensors only)."""
    return _reduction(_all, "All", (bool,), input_tensor, axis, keepdims, name,
                      reduction_indices, keep_dims)


def _arg(fn, x, axis, output_type):
    x = np.asarray(x)
    axis = int(axis)
    if not -x.ndim <= axis < x.ndim:
        raise InvalidArgumentError(f"Expected dimension in the range [{-x.ndim}, {x.ndim}), but "
                                   f"got {axis}")
    if x.shape[axis] == 0:
        raise InvalidArgumentError(f"Reduction axis {axis} is empty in shape {list(x.shape)}")
    return fn(x, axis=axis).astype(output_type)


def _argmax(x, axis, output_type):
    return _arg(np.argmax, x, axis, output_type)


def _argmin(x, axis, output_type):
    return _arg(np.argmin, x, axis, output_type)


def argmax(input, axis=None, name=None, dimension=None, output_type=int64):   # noqa: A002
    """``tf.argmax``: along ``axis`` (0 when not given, as in TF1), int64 by default."""
    axis = dimension if axis is None else axis
    x = _check_dtype(convert(input, what="argmax"), _NUMBERS, "ArgMax", "input")
    return _apply(_argmax, (x, 0 if axis is None else axis, as_dtype(output_type)), "ArgMax", name)


def argmin(input, axis=None, name=None, dimension=None, output_type=int64):   # noqa: A002
    """``tf.argmin``: along ``axis`` (0 when not given, as in TF1), int64 by default."""
    axis = dimension if axis is None else axis
    x = _check_dtype(convert(input, what="argmin"), _NUMBERS, "ArgMin", "input")
    return _apply(_argmin, (x, 0 if axis is None else axis, as_dtype(output_type)), "ArgMin", name)


# ----------------------------------------------------- more TF1 array ops

def rint(x, name: str | None = None):
    """``tf.rint``: nearest integer, halves to even (float tensors only)."""
    return _unary(np.rint, "Rint", x, name, _FLOATS)


def _broadcast_to(x, shape):
    return np.broadcast_to(x, tuple(int(d) for d in np.asarray(shape).reshape(-1))).copy()


def broadcast_to(input, shape, name: str | None = None):   # noqa: A002
    """``tf.broadcast_to``."""
    return _apply(_broadcast_to, (convert(input, what="broadcast_to"), shape), "BroadcastTo", name)


def convert_to_tensor(value, dtype=None, name: str | None = None, preferred_dtype=None,
                      dtype_hint=None):
    """``tf.convert_to_tensor``: a tensor as it is (TypeError for another ``dtype``);
    a value converted with TF's dtypes, a graph constant in graph mode.

    >>> with Graph().as_default():
    ...     convert_to_tensor([1, 2]).dtype
    dtype('int32')
    """
    if isinstance(value, Symbolic):
        return convert(value, dtype, what="convert_to_tensor")
    hint = preferred_dtype if preferred_dtype is not None else dtype_hint
    if dtype is None and hint is not None:
        try:
            leaf = convert(value, hint, what="convert_to_tensor")
        except (TypeError, ValueError):
            leaf = convert(value, what="convert_to_tensor")
    else:
        leaf = convert(value, dtype, what="convert_to_tensor")
    return leaf if executing_eagerly() else _nd_constant(leaf, name=name)


def _strided_index(begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                   shrink_axis_mask):
    begin = [int(b) for b in np.asarray(begin).reshape(-1)]
    end = [int(e) for e in np.asarray(end).reshape(-1)]
    strides = [1] * len(begin) if strides is None else [int(s) for s in np.asarray(strides).reshape(-1)]
    index = []
    for k, (b, e, s) in enumerate(zip(begin, end, strides)):
        bit = 1 << k
        if ellipsis_mask & bit:
            index.append(Ellipsis)
        elif new_axis_mask & bit:
            index.append(None)
        elif shrink_axis_mask & bit:
            index.append(b)
        else:
            index.append(builtins.slice(None if begin_mask & bit else b,
                                        None if end_mask & bit else e, s))
    return tuple(index)


def strided_slice(input_, begin, end, strides=None, begin_mask=0, end_mask=0, ellipsis_mask=0,
                  new_axis_mask=0, shrink_axis_mask=0, var=None, name=None):
    """``tf.strided_slice`` with static ``begin``/``end``/``strides``: NumPy's basic
    indexing with TF's masks.

    >>> Session().run(strided_slice(np.arange(10), [1], [8], [3])).tolist()
    [1, 4, 7]
    """
    x = convert(input_, what="strided_slice")
    masks = (begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask)
    if is_symbolic(begin, end, strides):   # bounds known when the graph runs
        return _apply(_strided, (x, begin, end, strides, masks), "StridedSlice", name)
    index = _strided_index(begin, end, strides, *masks)
    return _apply(_graph.getitem, (x, index), "StridedSlice", name)


def _strided(x, begin, end, strides, masks):
    return np.asarray(x)[_strided_index(begin, end, strides, *masks)]


def _strided_spec(x, begin, end, strides, masks):
    """Bounds known only when the graph runs: the rank, each dim unknown."""
    ndims = _static(x).ndims if isinstance(x, Symbolic) else np.ndim(x)
    if ndims is None or masks[2]:
        return TensorSpec(None, x.dtype)
    return TensorSpec((None,) * (ndims - bin(masks[4]).count("1") + bin(masks[3]).count("1")),
                      x.dtype)


_strided.primitive = types.SimpleNamespace(abstract=_strided_spec)


def _split_parts(value, splits, axis):
    value = np.asarray(value)
    if isinstance(splits, int):
        if value.shape[axis] % splits:
            raise InvalidArgumentError(f"Number of ways to split should evenly divide the split "
                                       f"dimension, but got split_dim {axis} (size = "
                                       f"{value.shape[axis]}) and num_split {splits}")
        return tuple(np.split(value, splits, axis=axis))
    sizes = [int(s) for s in splits]
    if -1 in sizes:
        sizes[sizes.index(-1)] = value.shape[axis] - (builtins.sum(sizes) + 1)
    if builtins.sum(sizes) != value.shape[axis]:
        raise InvalidArgumentError(f"Determined shape must either match input shape along "
                                   f"split_dim exactly if fully specified, or be less than the "
                                   f"size of the input along split_dim if not fully specified."
                                   f"  Got: {builtins.sum(sizes)}")
    return tuple(np.split(value, np.cumsum(sizes)[:-1], axis=axis))


def split(value, num_or_size_splits, axis=0, num=None, name: str = "split"):
    """``tf.split``: ``num_or_size_splits`` equal parts, or parts of the given sizes
    (one may be -1), along ``axis``; a list of tensors."""
    value = convert(value, what="split")
    if np.ndim(num_or_size_splits) == 0 and not is_symbolic(num_or_size_splits):
        splits, n = int(num_or_size_splits), int(num_or_size_splits)
    else:
        splits = tuple(int(s) for s in np.asarray(num_or_size_splits).reshape(-1))
        n = len(splits)
    parts = _apply(_split_parts, (value, splits, int(axis)), "Split", name)
    return list(parts) if n > 1 or isinstance(parts, tuple) else [parts]


def cond(pred, true_fn=None, false_fn=None, strict: builtins.bool = False, name=None,
         fn1=None, fn2=None):
    """``tf.cond``: ``true_fn()`` if ``pred`` else ``false_fn()``. On a graph ``pred``
    both branches are built (as in TF1) and the op selects one branch's values at run
    time, so both branches are computed (a branch that fails on the data fails the run);
    a Python or NumPy ``pred`` calls only its branch."""
    true_fn = fn1 if true_fn is None else true_fn
    false_fn = fn2 if false_fn is None else false_fn
    if not callable(true_fn) or not callable(false_fn):
        raise TypeError("cond: true_fn and false_fn must be callable")
    if not is_symbolic(pred):
        return true_fn() if builtins.bool(np.asarray(pred)) else false_fn()
    pred = _check_dtype(convert(pred, bool, what="cond: pred"), (bool,), "cond", "pred")
    a, b = true_fn(), false_fn()
    return _apply(_select, (pred, a, b), "cond", name)


def _select(pred, a, b):
    return a if pred else b


def _select_spec(pred, a, b):
    """Where both branches give tensors of one dtype, the spec of a value either could be."""
    if not (isinstance(a, Symbolic) and isinstance(b, Symbolic)) or a.dtype != b.dtype:
        return None
    merged = [x if x == y else None for x, y in zip(_static(a).dims or (), _static(b).dims or ())]
    if _static(a).ndims is None or _static(a).ndims != _static(b).ndims:
        return TensorSpec(None, a.dtype)
    return TensorSpec(tuple(merged), a.dtype)


_select.primitive = types.SimpleNamespace(abstract=_select_spec)


def _assert(condition, *data, summarize=None, message=""):
    if not np.all(condition):
        shown = ", ".join(str(np.asarray(d).reshape(-1)[:summarize or 3].tolist())
                          if not isinstance(d, (str, bytes)) else str(d) for d in data)
        raise InvalidArgumentError(f"assertion failed: [{shown}]", "Assert")
    return []


def Assert(condition, data, summarize=None, name=None):   # noqa: N802 - TF's name
    """``tf.Assert``: an operation raising InvalidArgumentError (with ``data``) when it
    runs and ``condition`` is False; on values, checked now (None returned)."""
    if not is_symbolic(condition, list(data)):
        _assert(condition, *data, summarize=summarize)
        return None
    graph = get_default_graph()
    leaves = [as_tensor(v, graph) if isinstance(v, Symbolic) else v for v in [condition, *data]]
    tensors = [v for v in leaves if isinstance(v, Tensor)]
    slots = [k for k, v in enumerate(leaves) if isinstance(v, Tensor)]

    def run(run_context, values):
        full = list(leaves)
        for k, v in zip(slots, values):
            full[k] = v
        return _assert(*full, summarize=summarize)
    return Operation(graph, "Assert", name, tensors, run, [], kind="stateful")


_control = threading.local()


class control_dependencies:   # noqa: N801 - TF's name
    """``tf.control_dependencies(ops)``: a graph op built inside (a ``tf.identity`` of
    the value, typically) runs ``ops`` first in every ``Session.run`` that runs it.
    Inside a map function's graph the dependencies are not run (its ops are pure)."""

    def __init__(self, control_inputs):
        ops = []
        for x in control_inputs or ():
            if isinstance(x, Tensor):
                ops.append(x.op)
            elif isinstance(x, Operation):
                ops.append(x)
            elif x is not None:
                raise TypeError(f"control_dependencies: expected operations or tensors, got "
                                f"{type(x).__name__}")
        self._ops = ops

    def __enter__(self):
        stack = getattr(_control, "stack", None)
        if stack is None:
            stack = _control.stack = []
        stack.append(self._ops)
        return self

    def __exit__(self, *exc):
        _control.stack.pop()


def _with_control(out):
    """Attach the enclosing control dependencies to the op that made ``out``."""
    stack = getattr(_control, "stack", None)
    if stack and isinstance(out, Tensor):
        deps = [op for ops in stack for op in ops if op.graph is out.graph]
        out.op.control_inputs.extend(d for d in deps if d not in out.op.control_inputs)
    return out


def assert_positive(x, data=None, summarize=None, message=None, name=None):
    """``tf.assert_positive``: an Assert op that ``x > 0`` everywhere (on values:
    checked now, None returned)."""
    x = convert(x, what="assert_positive")
    text = [message or "", "Condition x > 0 did not hold element-wise: x ="]
    return Assert(reduce_all(less(zeros_like(x), x)), data or text + [x], summarize, name)


def _read_file(filename):
    path = filename.decode() if isinstance(filename, bytes) else str(np.asarray(filename).item())
    path = path.decode() if isinstance(path, bytes) else path
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise errors.NotFoundError(f"{path}; No such file or directory") from None


def read_file(filename, name: str | None = None):
    """``tf.read_file`` (``tf.io.read_file``): the bytes of a file."""
    filename = _check_dtype(convert(filename, what="read_file"), (string,), "ReadFile", "filename")
    return _apply(_read_file, (filename,), "ReadFile", name)


_read_file.primitive = types.SimpleNamespace(abstract=lambda filename: TensorSpec((), string))


def decode_csv(records, record_defaults, field_delim=",", use_quote_delim=True, name=None,
               na_value="", select_cols=None):
    """TF1's ``tf.decode_csv`` (``name`` its fifth argument): record defaults convert as
    TF converts them (a Python int is int32, or int64 when it does not fit; a float
    float32; ``[]`` a required float32 column).

    >>> [c.dtype for c in decode_csv(["1,2.5"], [[1], [0.0]])]
    [dtype('int32'), dtype('float32')]
    """
    defaults = [_csv_default(d) for d in record_defaults]
    out = io.decode_csv(records, defaults, field_delim=field_delim,
                        use_quote_delim=use_quote_delim, na_value=na_value,
                        select_cols=select_cols)
    if is_symbolic(records) or executing_eagerly() or _recording(get_default_graph()):
        return out
    return _as_constants(out, name or "DecodeCSV")


def _csv_default(default):
    if isinstance(default, Tensor) and default.op.type == "Const" and not default.op.inputs:
        return default.op.fn()
    if isinstance(default, (np.ndarray, np.generic, np.dtype, type, Symbolic)):
        return default
    return convert(default, what="decode_csv: record_defaults")


# ------------------------------------------------------------------ strings

def _tokens(source, split):
    source = np.asarray(source, dtype=object) if not isinstance(source, bytes) else source
    if np.ndim(source) != 1:
        raise InvalidArgumentError(f"input must be a vector, got shape: {list(np.shape(source))}")
    rows = [split(bytes(s)) for s in source]
    indices = [(r, c) for r, row in enumerate(rows) for c in builtins.range(len(row))]
    values = np.empty(len(indices), dtype=object)
    values[:] = [tok for row in rows for tok in row]
    width = builtins.max((len(row) for row in rows), default=0)
    return SparseTensor(np.asarray(indices, np.int64).reshape(-1, 2), values,
                        np.asarray([len(rows), width], np.int64))


def _split_chars(delimiter: bytes, skip_empty: builtins.bool):
    def split(s: bytes) -> list:
        if not delimiter:
            return [s[k:k + 1] for k in builtins.range(len(s))]
        out, start = [], 0
        for k, c in enumerate(s):
            if c in delimiter:
                out.append(s[start:k])
                start = k + 1
        out.append(s[start:])
        return [t for t in out if t] if skip_empty else out
    return split


def _string_split(source, delimiter, skip_empty):
    return _tokens(source, _split_chars(delimiter, skip_empty))


def string_split(source, sep=None, skip_empty: builtins.bool = True, delimiter=None,
                 result_type: str = "SparseTensor", name: str | None = None):
    """TF1's ``tf.string_split``: each string of the 1-D ``source`` split at any byte of
    ``delimiter`` (default ``" "``; empty: into bytes), empty tokens skipped unless
    ``skip_empty=False``; a SparseTensor of the tokens (int64 ``[N, 2]`` indices,
    ``dense_shape`` ``[rows, most tokens]``).

    >>> st = string_split(["a b", "c"])
    >>> st.indices.tolist(), st.values.tolist(), st.dense_shape.tolist()
    ([[0, 0], [0, 1], [1, 0]], [b'a', b'b', b'c'], [2, 2])
    """
    if result_type != "SparseTensor":
        raise UnimplementedError("string_split: only result_type='SparseTensor' is supported")
    delimiter = sep if delimiter is None else delimiter
    delimiter = b" " if delimiter is None else delimiter
    delimiter = delimiter.encode() if isinstance(delimiter, str) else bytes(delimiter)
    source = _check_dtype(convert(source, what="string_split"), (string,), "StringSplit", "input")
    return _apply(_string_split, (source, delimiter, builtins.bool(skip_empty)), "StringSplit", name)


def _strings_split(source, sep, maxsplit):
    if sep is None:
        return _tokens(source, lambda s: s.split(None, maxsplit))
    return _tokens(source, lambda s: s.split(sep, maxsplit))


def _tokens_spec(source, *args):
    """The spec of split tokens: one row per string, the width known only at run time
    (sample strings cannot show it)."""
    dims = _static(source).dims if isinstance(source, Symbolic) else (len(source),)
    return SparseTensorSpec((dims[0] if dims else None, None), string)


# The recorder takes an op's output spec from ``fn.primitive.abstract`` when it has one.
_string_split.primitive = _strings_split.primitive = types.SimpleNamespace(abstract=_tokens_spec)


def _strings_split_op(input=None, sep=None, maxsplit: int = -1, result_type: str = "SparseTensor",   # noqa: A002
                      source=None, name: str | None = None):
    """TF1's ``tf.strings.split``: each string of the 1-D input split at whitespace
    runs (``sep=None``) or at each occurrence of the string ``sep`` (empty tokens kept),
    at most ``maxsplit`` times; a SparseTensor of the tokens."""
    if result_type != "SparseTensor":
        raise UnimplementedError("strings.split: only result_type='SparseTensor' is supported")
    input = source if input is None else input   # noqa: A001
    if isinstance(sep, str):
        sep = sep.encode()
    if sep is not None and not sep:
        raise ValueError("strings.split: sep must not be empty (use sep=None to split at "
                         "whitespace)")
    input = _check_dtype(convert(input, what="strings.split"), (string,), "StringSplitV2", "input")   # noqa: A001
    return _apply(_strings_split, (input, sep, int(maxsplit)), "StringSplitV2", name)


class _Namespace(types.SimpleNamespace):
    def __getattr__(self, name: str):
        raise AttributeError(f"tf.{self._label}.{name} is not part of nbdata's TF1 namespace; "
                             "compute it with NumPy functions on the tensors, or with tf.py_func")


strings = _Namespace(split=_strings_split_op, _label="strings")


# ------------------------------------------------------------------- random

_eager_rngs: dict = {}
_eager_lock = threading.Lock()


def _recording(graph: Graph) -> builtins.bool:
    """Whether ``graph`` is a function being recorded (its first op is an input)."""
    ops = graph._ops
    return builtins.bool(ops) and ops[0].kind == "input"


def _element_seed():
    """``(element key, slot)`` for the next random op when a ``Dataset.map`` function is
    being recorded with its element's key (``nbdata/ops/keyed_map.py``), else None: the
    op then draws with nbdata's stateless ops (``nbdata/primitives/draws.py``, the
    ``nd.image`` random ops) from that key, per element."""
    found = _element_key(get_default_graph())
    return None if found is None else found.seed()


def _keyed_draw(draw: Callable, seed, *args):
    """``draw(rng, *args)`` with a NumPy generator seeded by ``seed = (element key,
    slot)``: what a random op without a stateless entry (``random_shuffle``, a shape
    known only per element) draws inside a map function, a function of the element's
    key."""
    key, slot = seed
    return draw(np.random.default_rng([int(key) & ((1 << 64) - 1), int(slot)]), *args)


def _random_op(draw: Callable, args: tuple, spec: TensorSpec, seed, op: str, name,
               keyed: Callable | None = None):
    """A random op: a NumPy draw ``draw(rng, *args)`` now (eager), a draw per
    ``Session.run`` (graph mode), or per call of a recorded function. TF1's seed rules:
    an op seed with a graph seed (``set_random_seed``) both decide the draws, either
    alone too (the op seed alone, or the graph seed and the op's place among the random
    ops built after it), neither: fresh randomness.

    In a map function recorded with its element's key, the op is ``keyed(seed)`` (a
    stateless op-table entry) with ``seed = (element key, slot)``, or else ``draw`` with
    a generator seeded by that pair: the map's seed decides (``nbdata/ops/keyed_map.py``)."""
    pair = _element_seed()
    if pair is not None:
        if keyed is not None:
            return keyed(pair)
        return _apply(_keyed_draw, (draw, pair) + tuple(args), op, name)
    graph_seed = _random_module._global_seed
    seed = _op_seed(None) if seed is None else (
        _random_module.derive_seed(graph_seed, (1 << 40) + operator.index(seed))
        if graph_seed is not None else operator.index(seed))
    graph = get_default_graph()
    symbolic = is_symbolic(args)
    if not symbolic and executing_eagerly():
        key = seed if seed is not None else object()
        with _eager_lock:
            rng = _eager_rngs.get(key) if seed is not None else None
            if rng is None:
                rng = np.random.default_rng(seed)
                if seed is not None:
                    _eager_rngs[key] = rng
        return _eager(draw, (rng,) + args, {}, op)
    if _recording(graph):
        # A map function's graph: a fresh draw each time the function is evaluated. The
        # marks tell Dataset.map to record it again with its element's key.
        rng = np.random.default_rng(seed)
        lock = threading.Lock()

        def fresh(*values):
            with lock:
                return draw(rng, *values)
        fresh.__name__ = fresh.__qualname__ = op
        setattr(fresh, _DRAWS_PER_ELEMENT, True)
        fresh.seed = seed
        return record(fresh, args, {}, op, name=name)
    leaves = [x for x in args if isinstance(x, Symbolic)]
    tensors = [as_tensor(x, graph) for x in leaves]
    positions = [k for k, x in enumerate(args) if isinstance(x, Symbolic)]
    operation = None

    def run(run_context, values):
        rng = run_context.session.resource(operation, lambda: np.random.default_rng(seed))
        full = list(args)
        for k, v in zip(positions, values):
            full[k] = v
        with run_context.session._lock:
            out = draw(rng, *full)
        return [to_leaf(np.asarray(out, dtype=spec.dtype), op)]
    operation = Operation(graph, op, name, tensors, run, [spec], kind="stateful")
    return operation.outputs[0]


def _shape_arg(shape) -> tuple:
    """(shape argument, static shape for the spec)."""
    if is_symbolic(shape):
        dims = _static(shape).dims if isinstance(shape, Symbolic) else None
        n = dims[0] if dims else None
        return shape, (None,) * n if n is not None else None
    dims = tuple(int(d) for d in np.asarray(shape, dtype=np.int64).reshape(-1))
    if any(d < 0 for d in dims):
        raise InvalidArgumentError(f"shape must be non-negative, got {list(dims)}")
    return dims, dims


def _dims(shape):
    return tuple(int(d) for d in np.asarray(shape).reshape(-1))


def _draw_uniform(rng, shape, low, high, dtype):
    if dtype.kind in "iu":
        if not low < high:
            raise InvalidArgumentError(f"Need minval < maxval: {low} >= {high}")
        return rng.integers(low, high, size=_dims(shape), dtype=dtype)
    out = rng.random(size=_dims(shape), dtype=np.float64)
    return (low + (high - low) * out).astype(dtype)


def random_uniform(shape, minval=0, maxval=None, dtype=float32, seed=None, name=None):
    """``tf.random_uniform``: values in ``[minval, maxval)`` (floats: ``maxval`` 1 by
    default; integers need ``maxval``)."""
    dt = as_dtype(dtype)
    if dt not in (float16, float32, float64, int32, int64):
        raise ValueError(f"Invalid dtype {_dtype_name(dt)} for random_uniform")
    if maxval is None:
        if dt.kind in "iu":
            raise ValueError(f"Must specify maxval for integer dtype {_dtype_name(dt)}")
        maxval = 1
    shape_arg, static = _shape_arg(shape)
    low = convert(minval, dt, what="random_uniform: minval")
    high = convert(maxval, dt, what="random_uniform: maxval")
    keyed = None if static is None or is_symbolic(shape_arg) else (
        lambda pair: _stateless.stateless_uniform(shape_arg, pair, low, high, dt))
    return _random_op(_draw_uniform_args, (shape_arg, low, high, dt), TensorSpec(static, dt),
                      seed, "RandomUniform", name, keyed)


def _draw_uniform_args(rng, shape, low, high, dtype):
    return _draw_uniform(rng, shape, low, high, dtype)


def _draw_normal(rng, shape, mean, stddev, dtype):
    return (mean + stddev * rng.standard_normal(size=_dims(shape))).astype(dtype)


def _draw_truncated(rng, shape, mean, stddev, dtype):
    z = rng.standard_normal(size=_dims(shape))
    bad = np.abs(z) > 2
    while bad.any():
        z[bad] = rng.standard_normal(size=int(bad.sum()))
        bad = np.abs(z) > 2
    return (mean + stddev * z).astype(dtype)


def _normal_like(draw, op, shape, mean, stddev, dtype, seed, name):
    dt = as_dtype(dtype)
    if dt not in _FLOATS:
        raise ValueError(f"Invalid dtype {_dtype_name(dt)} for {op}")
    shape_arg, static = _shape_arg(shape)
    mean = convert(mean, dt, what=f"{op}: mean")
    stddev = convert(stddev, dt, what=f"{op}: stddev")
    keyed = None
    if static is not None and not is_symbolic(shape_arg):
        entry = (_stateless.stateless_truncated_normal if draw is _draw_truncated
                 else _stateless.stateless_normal)
        keyed = lambda pair: entry(shape_arg, pair, mean, stddev, dt)   # noqa: E731
    return _random_op(draw, (shape_arg, mean, stddev, dt), TensorSpec(static, dt), seed, op, name,
                      keyed)


def random_normal(shape, mean=0.0, stddev=1.0, dtype=float32, seed=None, name=None):
    """``tf.random_normal``: normally distributed values."""
    return _normal_like(_draw_normal, "RandomStandardNormal", shape, mean, stddev, dtype, seed, name)


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=float32, seed=None, name=None):
    """``tf.truncated_normal``: normal values, those beyond two standard deviations
    drawn again."""
    return _normal_like(_draw_truncated, "TruncatedNormal", shape, mean, stddev, dtype, seed, name)


def _draw_shuffle(rng, value):
    value = np.asarray(value) if not isinstance(value, bytes) else value
    if np.ndim(value) == 0:
        return value
    return value[rng.permutation(len(value))]


def random_shuffle(value, seed=None, name=None):
    """``tf.random_shuffle``: ``value`` shuffled along its first dimension."""
    value = convert(value, what="random_shuffle")
    spec = value.spec if isinstance(value, Symbolic) else TensorSpec(np.shape(value), _dtype_of(value))
    return _random_op(_draw_shuffle, (value,), spec, seed, "RandomShuffle", name)


# ------------------------------------------------------------ outside the scope

_MODEL_NAMES = {
    "layers", "nn", "losses", "metrics", "keras", "estimator", "optimizers", "get_variable",
    "variable_scope", "get_variable_scope", "trainable_variables", "gradients",
    "contrib", "initializers", "glorot_uniform_initializer", "random_normal_initializer",
    "truncated_normal_initializer", "zeros_initializer", "ones_initializer", "AUTO_REUSE",
    "matmul", "tensordot", "einsum", "saved_model", "lite", "distributions", "Module",
    "GradientTape", "stop_gradient", "softmax", "sigmoid", "tanh", "relu", "app", "flags",
    "Print", "print", "assign", "assign_add", "while_loop", "case",
    "map_fn", "scan", "tpu", "xla", "function",
}


_PROTOS = {"Example", "SequenceExample", "Features", "Feature", "FeatureList", "FeatureLists",
           "BytesList", "FloatList", "Int64List"}


def missing(name: str) -> AttributeError:
    """The AttributeError for a name the TF1 namespace does not have: nbdata builds
    input pipelines, and says how to hand its batches to a model.

    >>> print(missing("layers"))  # doctest: +ELLIPSIS
    module 'nbdata.compat.v1' has no attribute 'layers': nbdata is the input pipeline...
    """
    module, _, last = name.rpartition(".")
    module = "nbdata.compat.v1" + (f".{module}" if module else "")
    model = last in _MODEL_NAMES or last.endswith("Optimizer") or last.endswith("_initializer")
    if last in _PROTOS:
        what = ("nbdata writes Example records with nbdata.io.encode_example(features) and "
                "tf.python_io.TFRecordWriter")
    elif model:
        what = "it builds models, which nbdata does not"
    else:
        what = "it is outside the TF1 input-pipeline vocabulary nbdata provides"
    return AttributeError(
        f"module {module!r} has no attribute {last!r}: nbdata is the input pipeline "
        f"(tf.data, readers, queues, decoders and the array ops that preprocess records), not "
        f"a model library, and tf.{name} is not provided ({what}). Hand the batches to your "
        "model instead: iterate the dataset, or sess.run(next_batch), and pass the NumPy "
        "arrays to your framework (torch.from_numpy(batch), jax.numpy.asarray(batch)), or "
        "keep TensorFlow for the model and feed the arrays to it with feed_dict={...}.")


def _as_string(x, precision, scientific, shortest, width, fill):
    arr = np.asarray(x)
    if arr.dtype.kind == "b":
        out = [b"true" if v else b"false" for v in arr.reshape(-1)]
    else:
        spec = "%" + fill + (str(width) if width > -1 else "")
        if arr.dtype.kind in "fc":
            spec += (f".{precision}" if precision > -1 else "") + (
                "e" if scientific else "g" if shortest else "f")
        else:
            spec += "d"
        if arr.dtype.kind == "c":
            out = [f"({spec % v.real},{spec % v.imag})".encode() for v in arr.reshape(-1)]
        else:
            out = [(spec % v).encode() for v in arr.reshape(-1).tolist()]
    result = np.empty(len(out), dtype=object)
    result[:] = out
    return result.reshape(arr.shape) if arr.ndim else out[0]


def as_string(input, precision: int = -1, scientific: builtins.bool = False,   # noqa: A002
              shortest: builtins.bool = False, width: int = -1, fill: str = "",
              name: str | None = None):
    """``tf.as_string``: each number as text, formatted as TF formats it (floats ``%f``
    unless ``scientific`` (``%e``) or ``shortest`` (``%g``); booleans ``true``/``false``)."""
    x = convert(input, what="as_string")
    _check_dtype(x, (*_NUMBERS, np.dtype(np.uint32), np.dtype(np.uint64), bool,
                     np.dtype(np.complex64), np.dtype(np.complex128)), "AsString", "input")
    if scientific and shortest:
        raise InvalidArgumentError("Cannot select both scientific and shortest notation")
    if len(fill) > 1:
        raise InvalidArgumentError(f"Fill string must be one or fewer characters: {fill}")
    if fill and fill not in " 0":
        raise InvalidArgumentError(f"Fill argument not supported: \"{fill}\"")
    if precision > -1 and _dtype_of(x).kind not in "fc":
        raise InvalidArgumentError(f"precision not supported for datatype {_dtype_name(_dtype_of(x))}")
    return _apply(_as_string, (x, precision, scientific, shortest, width, fill), "AsString", name)


def _check_numerics(x, message):
    arr = np.asarray(x)
    nan, inf = builtins.bool(np.isnan(arr).any()), builtins.bool(np.isinf(arr).any())
    if nan or inf:
        what = "Inf and NaN" if nan and inf else "NaN" if nan else "Inf"
        raise InvalidArgumentError(f"{message} : Tensor had {what} values")
    return x


def check_numerics(tensor, message: str, name: str | None = None):
    """``tf.debugging.check_numerics``: ``tensor`` itself, or InvalidArgumentError
    ``"<message> : Tensor had NaN values"`` (or Inf) when it holds any."""
    x = convert(tensor, what="check_numerics")
    _check_dtype(x, (float16, float32, float64), "CheckNumerics", "tensor")
    return _apply(_check_numerics, (x, message), "CheckNumerics", name)


class _TrainModule(types.ModuleType):
    """``tf.train``: nbdata's ``nd.train`` (queues, batching, Coordinator, Saver); the
    model-training names of TF1's ``tf.train`` (optimizers) raise :func:`missing`'s
    AttributeError."""

    def __getattr__(self, name: str):
        if name in ("Example", "Features", "Feature", "BytesList", "FloatList", "Int64List"):
            from nbdata.compat.v1 import protos
            return getattr(protos, name)
        try:
            return getattr(_nd.train, name)
        except AttributeError:
            raise missing(f"train.{name}") from None

    def __dir__(self):
        return sorted(set(dir(_nd.train)))


train = _TrainModule("nbdata.compat.v1.train", _TrainModule.__doc__)


__all__ = sorted(n for n in dir() if not n.startswith("_") and n not in {
    "annotations", "builtins", "operator", "threading", "types", "np", "Any", "Callable",
    "InvalidArgumentError", "UnimplementedError", "Symbolic", "as_tensor",
    "is_symbolic", "record", "to_leaf", "convert", "missing", "namespace"})
