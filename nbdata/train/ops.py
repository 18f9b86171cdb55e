"""``nd.train.py_func``: a Python function as a graph op, the escape hatch for what NumPy
functions on tensors cannot express."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from nbdata.errors import (InvalidArgumentError, OpError, OutOfRangeError, ResourceExhaustedError,
                           UnimplementedError, UnknownError)
from nbdata.spec import TensorSpec, as_dtype, string, to_leaf
from nbdata.trace.graph import (Operation, as_tensor, executing_eagerly, get_default_graph,
                                is_symbolic)

# The nd.errors class a Python exception raised by the function becomes (as TF1 maps
# them); any other exception, an nd.errors one included, becomes UnknownError.
_ERRORS = ((StopIteration, OutOfRangeError), (ValueError, InvalidArgumentError),
           (TypeError, InvalidArgumentError), (NotImplementedError, UnimplementedError),
           (MemoryError, ResourceExhaustedError))


def _convert(value: Any, dtype, k: int, name: str) -> Any:
    if dtype is string:
        return to_leaf(value, f"{name}: output {k}")
    # a copy, as TF converts the returned array to a tensor: a function that refills
    # one buffer and returns it would otherwise change the values it returned before
    arr = np.array(value)
    if arr.dtype != dtype:
        if arr.dtype.kind in "OSU" or not np.can_cast(arr.dtype, dtype, "same_kind") and arr.size:
            raise InvalidArgumentError(
                f"{name}: output {k} should be {dtype}, the function returned {arr.dtype}", name)
        arr = arr.astype(dtype)
    return arr[()] if arr.ndim == 0 else arr


def py_func(func: Callable, inp, Tout, stateful: bool = True, name: str | None = None):
    """An op calling ``func`` on the NumPy values of ``inp`` in each run
    (``tf.py_func``); in eager code on values (no tensor of a graph among ``inp``) it
    calls ``func`` at once and returns its values, as TF does. ``Tout`` is a dtype (one output, returned as a tensor) or a list of
    dtypes (returned as a list); output shapes are unknown. A stateful function (the
    default) keeps a queue pipeline using it from being lowered onto the compiled
    engine (it runs record by record); with ``stateful=False`` it is a pure function
    of its inputs, and a lowered pipeline calls it per element in Python.

    >>> import numpy as np, nbdata as nd
    >>> x = nd.placeholder(np.int64, shape=[])
    >>> y = nd.train.py_func(lambda v: v * 3, [x], np.int64)
    >>> int(nd.Session().run(y, feed_dict={x: 2}))
    6
    """
    if not callable(func):
        raise TypeError(f"py_func: func must be callable, got {type(func).__name__}")
    single = not isinstance(Tout, (list, tuple))
    touts = [as_dtype(Tout)] if single else [as_dtype(t) for t in Tout]
    label = name or "PyFunc"

    def call(*values):
        try:
            out = func(*values)
        except Exception as e:  # noqa: BLE001 - mapped to nd.errors like TF1
            cls = next((c for t, c in _ERRORS if isinstance(e, t) and not isinstance(e, OpError)),
                       UnknownError)
            raise cls(f"{type(e).__name__}: {e}", label) from e
        outs = [out] if single else list(out) if isinstance(out, (list, tuple)) else [out]
        if len(outs) != len(touts):
            raise InvalidArgumentError(f"{label}: the function returned {len(outs)} values, "
                                       f"Tout lists {len(touts)}", label)
        converted = [_convert(v, dt, k, label) for k, (v, dt) in enumerate(zip(outs, touts))]
        return converted[0] if single else converted
    if executing_eagerly() and not is_symbolic(list(inp)):
        # Eager code on values: TF calls the function now and returns its values.
        return call(*[x if isinstance(x, (np.ndarray, np.generic, bytes)) else np.asarray(x)
                      for x in inp])
    graph = get_default_graph()
    tensors = [as_tensor(x, graph) for x in inp]
    specs = [TensorSpec(None, dt) for dt in touts]
    if stateful:
        op = Operation(graph, "PyFunc", name, tensors,
                       lambda run, values: [call(*values)] if single else call(*values),
                       specs, kind="stateful")
    else:
        op = Operation(graph, "PyFuncStateless", name, tensors, call, specs)
    return op.outputs[0] if single else list(op.outputs)


__all__ = ["py_func"]
