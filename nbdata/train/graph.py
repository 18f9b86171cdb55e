"""The TF1 graph: symbolic tensors and operations, the default graph, collections.

Ops are recorded, not run: a :class:`Tensor` stands for the value an operation will
give when a :class:`nbdata.train.session.Session` runs it. NumPy's own vocabulary
builds the graph: Python operators, indexing, ``astype``, ufuncs and array
functions on tensors record themselves through ``__array_ufunc__`` and
``__array_function__``, and nbdata's decoders and image ops accept tensors. Each
recorded op learns its output dtypes and static shapes when it is recorded, by
calling the real function on sample inputs of its input specs (the same tracing
that ``Dataset.map`` does), so a mistake is reported where the op is built, as TF1
reports graph-construction errors.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import threading
from collections.abc import Mapping
from typing import Any, Callable

import numpy as np

from nbdata.errors import InvalidArgumentError, OpError
from nbdata.spec import TensorSpec, as_dtype, dtype_name, flatten, pack_as, string


class GraphKeys:
    """Names of the standard graph collections (``tf.GraphKeys``)."""

    QUEUE_RUNNERS = "queue_runners"
    LOCAL_VARIABLES = "local_variables"
    GLOBAL_VARIABLES = "variables"


class TensorShape:
    """A static shape: a tuple of dims (``None`` unknown), or an unknown rank.

    >>> TensorShape([None, 4])
    TensorShape([None, 4])
    >>> TensorShape([2, 3]).as_list(), TensorShape([2, None]).is_fully_defined()
    ([2, 3], False)
    """

    def __init__(self, dims):
        if isinstance(dims, TensorShape):
            dims = dims.dims
        self.dims = None if dims is None else tuple(None if d is None else int(d) for d in dims)

    @property
    def ndims(self) -> int | None:
        return None if self.dims is None else len(self.dims)

    rank = ndims

    def as_list(self) -> list:
        if self.dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape.")
        return list(self.dims)

    def is_fully_defined(self) -> bool:
        return self.dims is not None and all(d is not None for d in self.dims)

    def is_compatible_with(self, other) -> bool:
        other = TensorShape(other)
        if self.dims is None or other.dims is None:
            return True
        return len(self.dims) == len(other.dims) and all(
            a is None or b is None or a == b for a, b in zip(self.dims, other.dims))

    def merge_with(self, other) -> "TensorShape":
        other = TensorShape(other)
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {other} are not compatible")
        if self.dims is None:
            return other
        if other.dims is None:
            return self
        return TensorShape([a if a is not None else b for a, b in zip(self.dims, other.dims)])

    def __iter__(self):
        if self.dims is None:
            raise ValueError("Cannot iterate over a shape with unknown rank.")
        return iter(self.dims)

    def __len__(self) -> int:
        if self.dims is None:
            raise ValueError("Cannot take the length of shape with unknown rank.")
        return len(self.dims)

    def __getitem__(self, key):
        if self.dims is None:
            return None if isinstance(key, int) else TensorShape(None)
        if isinstance(key, slice):
            return TensorShape(self.dims[key])
        return self.dims[key]

    def __eq__(self, other) -> bool:
        try:
            other = TensorShape(other)
        except TypeError:
            return NotImplemented
        return self.dims == other.dims

    def __hash__(self) -> int:
        return hash(self.dims)

    def __repr__(self) -> str:
        return "TensorShape(None)" if self.dims is None else f"TensorShape({list(self.dims)})"

    def __str__(self) -> str:
        if self.dims is None:
            return "<unknown>"
        inner = ", ".join("?" if d is None else str(d) for d in self.dims)
        return f"({inner},)" if len(self.dims) == 1 else f"({inner})"


# ------------------------------------------------------------------ graphs

class Graph:
    """A TF1 graph: the operations recorded while it is the default graph, with name
    scoping and collections (``tf.Graph``).

    >>> import numpy as np, nbdata as nd
    >>> g = nd.Graph()
    >>> with g.as_default():
    ...     c = nd.constant([1, 2]) * 3
    >>> c.graph is g, nd.Session(graph=g).run(c).tolist()
    (True, [3, 6])
    """

    def __init__(self):
        self._ops: list[Operation] = []
        self._by_name: dict[str, Operation] = {}
        self._names: dict[str, int] = {}
        self._collections: dict[str, list] = {}
        self._placeholders: dict[int, Tensor] = {}
        self._lock = threading.RLock()
        self._scope = threading.local()
        self._finalized = False

    # ------------------------------------------------------------ default
    @contextlib.contextmanager
    def as_default(self):
        """Make this the default graph of the current thread within a ``with`` block."""
        stack = _default_stack()
        stack.append(self)
        try:
            yield self
        finally:
            stack.remove(self)

    # ------------------------------------------------------------- names
    @contextlib.contextmanager
    def name_scope(self, name: str | None):
        """Prefix the names of ops built inside with ``name/``."""
        old = getattr(self._scope, "prefix", "")
        if name and name.endswith("/"):   # re-entering a scope by its full name
            self._scope.prefix = name
        elif name:
            self._scope.prefix = self.unique_name(f"{old}{name}", mark=True) + "/"
        try:
            yield self._scope.prefix if name else old
        finally:
            self._scope.prefix = old

    def unique_name(self, name: str, mark: bool = True) -> str:
        """``name`` made unique in this graph (``name_1``, ``name_2``, ... after the first)."""
        with self._lock:
            count = self._names.get(name, 0)
            unique = name if count == 0 else f"{name}_{count}"
            while unique in self._names and unique != name:
                count += 1
                unique = f"{name}_{count}"
            if mark:
                self._names[name] = count + 1
                self._names.setdefault(unique, 1)
            return unique

    def _op_name(self, name: str) -> str:
        if name.endswith("/"):   # a name scope's own name, taken as it is (as TF1 does)
            return name[:-1]
        prefix = getattr(self._scope, "prefix", "")
        return self.unique_name(prefix + name)

    # -------------------------------------------------------- operations
    def _add(self, op: "Operation") -> None:
        with self._lock:
            if self._finalized:
                raise RuntimeError("Graph is finalized and cannot be modified.")
            self._ops.append(op)
            self._by_name[op.name] = op

    def get_operations(self) -> list:
        """The operations of the graph, in the order they were built."""
        with self._lock:
            return list(self._ops)

    def get_operation_by_name(self, name: str) -> "Operation":
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"The name {name!r} refers to an Operation not in the graph.") from None

    def get_tensor_by_name(self, name: str) -> "Tensor":
        op_name, _, index = name.rpartition(":")
        if not op_name or not index.isdigit():
            raise ValueError(f"The name {name!r} looks like an Operation name, not a Tensor name "
                             "(a Tensor name is '<op name>:<output index>').")
        return self.get_operation_by_name(op_name).outputs[int(index)]

    def finalize(self) -> None:
        """Make the graph read-only: building another op raises RuntimeError."""
        self._finalized = True

    @property
    def finalized(self) -> bool:
        return self._finalized

    # ------------------------------------------------------- collections
    def add_to_collection(self, name: str, value: Any) -> None:
        with self._lock:
            self._collections.setdefault(name, []).append(value)

    def get_collection(self, name: str, scope: str | None = None) -> list:
        """A copy of the collection ``name`` (items whose ``name`` starts with ``scope``
        when given)."""
        with self._lock:
            items = list(self._collections.get(name, ()))
        if scope is None:
            return items
        return [v for v in items if str(getattr(v, "name", "")).startswith(scope)]

    def get_collection_ref(self, name: str) -> list:
        with self._lock:
            return self._collections.setdefault(name, [])

    def placeholder_tensor(self, placeholder) -> "Tensor":
        """The graph tensor standing for an ``nd.placeholder`` (made on first use)."""
        with self._lock:
            tensor = self._placeholders.get(id(placeholder))
            if tensor is None:
                op = Operation(self, "Placeholder", placeholder.name, [], None,
                               [placeholder.spec], kind="placeholder")
                op.placeholder = placeholder
                tensor = op.outputs[0]
                self._placeholders[id(placeholder)] = tensor
            return tensor


_global_graph = Graph()
_local = threading.local()


def _default_stack() -> list:
    stack = getattr(_local, "graphs", None)
    if stack is None:
        stack = _local.graphs = []
    return stack


def get_default_graph() -> Graph:
    """The innermost graph made default by ``as_default()`` in this thread, else the
    global default graph (``tf.get_default_graph``)."""
    stack = _default_stack()
    return stack[-1] if stack else _global_graph


def reset_default_graph() -> None:
    """Replace the global default graph with a new, empty one
    (``tf.reset_default_graph``)."""
    global _global_graph
    if _default_stack():
        raise AssertionError("Do not use tf.reset_default_graph() to clear nested graphs. "
                             "If you need a cleared graph, exit the nesting and create a new graph.")
    _global_graph = Graph()


def name_scope(name: str | None):
    """``with nd.name_scope("input"):`` prefixes the names of ops built inside."""
    return get_default_graph().name_scope(name)


# --------------------------------------------------------------- operations

class Operation:
    """A node of the graph (``tf.Operation``).

    ``kind`` says how a session runs it: ``"pure"`` ops compute their outputs from
    their inputs with ``fn`` (a plain function of the input values, the same one the
    lowering to datasets replays); ``"stateful"`` ops call ``fn(run, values)`` with the
    run's context (queues, readers, variables); ``"placeholder"`` outputs are fed.
    """

    def __init__(self, graph: Graph, type: str, name: str | None, inputs: list,
                 fn: Callable | None, output_specs: list, kind: str = "pure",
                 control_inputs: tuple = ()):
        self.graph = graph
        self.type = type
        self.name = graph._op_name(name or type)
        self.inputs = list(inputs)
        self.fn = fn
        self.kind = kind
        self.control_inputs = list(control_inputs)
        self.outputs = [Tensor(self, k, spec) for k, spec in enumerate(output_specs)]
        # Filled by recording: the user-visible function and its traced form.
        self.checked = None
        graph._add(self)

    def __repr__(self) -> str:
        return f"<nd.Operation {self.name!r} type={self.type}>"

    @property
    def stateful(self) -> bool:
        return self.kind != "pure"

    def run(self, feed_dict=None, session=None) -> None:
        """Run this op in ``session`` (default: the default session)."""
        from nbdata.train.session import _session_for
        _session_for(session, self.graph).run(self, feed_dict=feed_dict)


# ------------------------------------------------------------------ tensors

def _record_ufunc(ufunc, method, *inputs, **kwargs):
    if method == "__call__":
        return record(ufunc, inputs, kwargs, ufunc.__name__)
    return record(getattr(ufunc, method), inputs, kwargs, f"{ufunc.__name__}.{method}")


class SymbolicOps:
    """NumPy's operator vocabulary, recording graph ops; ``_symbol()`` is the tensor."""

    __array_priority__ = 1000

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _record_ufunc(ufunc, method, *inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return record(func, args, kwargs, func.__name__)

    def __getitem__(self, item):
        return record(_getitem, (self, item), {}, "strided_slice")

    def astype(self, dtype, *args, **kwargs):
        return record(_astype, (self, dtype) + args, kwargs, "Cast")

    def reshape(self, *shape, **kwargs):
        return record(np.reshape, (self, shape[0] if len(shape) == 1 else shape), kwargs, "Reshape")

    def __bool__(self):
        raise TypeError("Using a `nd.Tensor` as a Python `bool` is not allowed. Use "
                        "`if t is not None:` instead of `if t:` to test if a tensor is defined, "
                        "and use np.where or a py_func to execute subgraphs conditioned on the "
                        "value of a tensor.")

    def __len__(self):
        raise TypeError(f"len is not well defined for symbolic Tensors ({self._symbol().name}). "
                        "Please call `x.shape` rather than `len(x)` for shape information.")

    def __iter__(self):
        shape = self._symbol().shape
        if shape.dims is None or not shape.dims or shape.dims[0] is None:
            raise TypeError(f"Tensor {self._symbol().name} is not iterable: its first "
                            f"dimension is not known (shape {shape}).")
        return (self[i] for i in range(shape.dims[0]))

    def __array__(self, *args, **kwargs):
        raise TypeError(f"Cannot convert a symbolic nd.Tensor ({self._symbol().name}) to a NumPy "
                        "array: evaluate it with sess.run(...), or build the computation from "
                        "NumPy functions that accept tensors")

    __hash__ = object.__hash__


def _getitem(x, item):
    return x[item]


def _astype(x, dtype, *args, **kwargs):
    if as_dtype(dtype) is string:
        raise TypeError("astype to a string dtype is not supported on tensors")
    return np.asarray(x).astype(dtype, *args, **kwargs)


_BINARY_OPS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
    "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power,
    "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
    "lshift": np.left_shift, "rshift": np.right_shift, "matmul": np.matmul,
}
_COMPARISONS = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
                "eq": np.equal, "ne": np.not_equal}
_UNARY_OPS = {"neg": np.negative, "pos": np.positive, "abs": np.absolute, "invert": np.invert}


def _binary_method(ufunc, reflected=False):
    def method(self, other):
        args = (other, self) if reflected else (self, other)
        return record(ufunc, args, {}, ufunc.__name__)
    return method


def _unary_method(ufunc):
    def method(self):
        return record(ufunc, (self,), {}, ufunc.__name__)
    return method


for _name, _ufunc in _BINARY_OPS.items():
    setattr(SymbolicOps, f"__{_name}__", _binary_method(_ufunc))
    setattr(SymbolicOps, f"__r{_name}__", _binary_method(_ufunc, reflected=True))
for _name, _ufunc in _COMPARISONS.items():
    setattr(SymbolicOps, f"__{_name}__", _binary_method(_ufunc))
for _name, _ufunc in _UNARY_OPS.items():
    setattr(SymbolicOps, f"__{_name}__", _unary_method(_ufunc))


def _array_method(name: str):
    function = getattr(np, name)

    def method(self, *args, **kwargs):
        return record(function, (self,) + args, kwargs, name)
    method.__name__ = name
    method.__doc__ = f"``np.{name}`` of the tensor, recorded as an op."
    return method


# ndarray methods that are NumPy functions of the array (``t.sum(axis=0)``, ``t.T``).
for _name in ("sum", "mean", "max", "min", "prod", "std", "var", "any", "all", "argmax",
              "argmin", "cumsum", "cumprod", "transpose", "ravel", "squeeze", "clip", "round"):
    setattr(SymbolicOps, _name, _array_method(_name))
SymbolicOps.T = property(_array_method("transpose"))
SymbolicOps.flatten = _array_method("ravel")


class Tensor(SymbolicOps):
    """A symbolic value: output ``value_index`` of ``op`` (``tf.Tensor`` in a graph).

    ``dtype`` and the static ``shape`` are known when the op is recorded; its value
    exists only inside ``Session.run``.

    >>> import numpy as np, nbdata as nd
    >>> x = nd.placeholder(np.float32, shape=[None, 3])
    >>> y = np.sum(x * 2, axis=1)
    >>> y.dtype, y.shape
    (dtype('float32'), TensorShape([None]))
    >>> nd.Session().run(y, feed_dict={x: np.ones((2, 3))}).tolist()
    [6.0, 6.0]
    """

    def __init__(self, op: Operation, value_index: int, spec):
        self.op = op
        self.value_index = value_index
        self.spec = spec

    def _symbol(self) -> "Tensor":
        return self

    @property
    def name(self) -> str:
        return f"{self.op.name}:{self.value_index}"

    @property
    def graph(self) -> Graph:
        return self.op.graph

    @property
    def dtype(self):
        return self.spec.dtype

    @property
    def shape(self) -> TensorShape:
        return TensorShape(self.spec.shape)

    def get_shape(self) -> TensorShape:
        return self.shape

    @property
    def ndim(self) -> int | None:
        return self.shape.ndims

    def set_shape(self, shape) -> None:
        """Refine the static shape (``tf.Tensor.set_shape``); the value is checked
        against it when it is computed."""
        from nbdata.sparse import SparseTensorSpec
        merged = self.shape.merge_with(TensorShape(shape))
        kind = SparseTensorSpec if isinstance(self.spec, SparseTensorSpec) else TensorSpec
        self.spec = kind(merged.dims, self.spec.dtype)

    def eval(self, feed_dict=None, session=None):
        """The tensor's value in ``session`` (default: the default session)."""
        from nbdata.train.session import _session_for
        return _session_for(session, self.graph).run(self, feed_dict=feed_dict)

    def consumers(self) -> list:
        """The ops that take this tensor as an input."""
        return [op for op in self.graph.get_operations() if any(t is self for t in op.inputs)]

    def __repr__(self) -> str:
        return (f"<nd.Tensor '{self.name}' shape={self.shape} "
                f"dtype={dtype_name(self.dtype)}>")


def as_tensor(value: Any, graph: Graph | None = None) -> "Tensor":
    """A tensor of the graph for ``value``: a tensor itself, an ``nd.placeholder``'s
    graph tensor, or a constant holding the value."""
    from nbdata.placeholder import Placeholder
    if isinstance(value, Tensor):
        return value
    if isinstance(value, Placeholder):
        return (graph or get_default_graph()).placeholder_tensor(value)
    return constant(value)


def constant(value: Any, dtype=None, shape=None, name: str | None = None) -> Tensor:
    """A tensor holding ``value`` (``tf.constant``); dtype as NumPy converts it unless
    given.

    >>> import numpy as np, nbdata as nd
    >>> c = nd.constant([1.5, 2.5], dtype=np.float32)
    >>> c.dtype, c.shape
    (dtype('float32'), TensorShape([2]))
    """
    from nbdata.spec import spec_of_value, to_leaf
    if dtype is not None and as_dtype(dtype) is string:
        leaf = to_leaf(value, "constant")
    else:
        leaf = to_leaf(np.asarray(value, dtype=dtype), "constant")
    if shape is not None:
        leaf = to_leaf(np.broadcast_to(np.asarray(leaf, dtype=object if isinstance(leaf, bytes)
                                                  else None), tuple(shape)).copy(), "constant")
    spec = spec_of_value(leaf)
    op = Operation(get_default_graph(), "Const", name, [], lambda: leaf, [spec])
    return op.outputs[0]


# ---------------------------------------------------------------- recording

def _symbolic_leaves(structure: Any) -> list:
    """The tensors (and placeholders) in a nested structure of arguments."""
    from nbdata.placeholder import Placeholder
    found = []

    def walk(x):
        if isinstance(x, (Tensor, Placeholder)):
            found.append(x)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
        elif isinstance(x, Mapping):
            for v in x.values():
                walk(v)
    walk(structure)
    return found


def _template(structure: Any) -> Callable[[dict], Any]:
    """A function rebuilding ``structure`` with each tensor (or placeholder) replaced by
    its value in a dict keyed on ``id``. Parts without tensors are returned as they are
    (the same objects), so a call per record rebuilds only the path to its tensors."""
    from nbdata.placeholder import Placeholder
    if isinstance(structure, (Tensor, Placeholder)):
        key = id(structure)
        return lambda values: values[key]
    if not _symbolic_leaves(structure):
        return lambda values: structure
    if isinstance(structure, list):
        parts = [_template(v) for v in structure]
        return lambda values: [p(values) for p in parts]
    if isinstance(structure, tuple):
        parts = [_template(v) for v in structure]
        if hasattr(structure, "_fields"):
            cls = type(structure)
            return lambda values: cls(*[p(values) for p in parts])
        return lambda values: tuple(p(values) for p in parts)
    cls = type(structure) if isinstance(structure, dict) else dict
    parts = {k: _template(v) for k, v in structure.items()}
    return lambda values: cls((k, p(values)) for k, p in parts.items())


def is_symbolic(*args, **kwargs) -> bool:
    """Whether any argument (nested in lists, tuples, dicts) is a graph tensor or an
    ``nd.placeholder`` used as one."""
    from nbdata.placeholder import Placeholder
    for x in itertools.chain(args, kwargs.values()):
        if isinstance(x, (Tensor, Placeholder)):
            return True
        if isinstance(x, (list, tuple, Mapping)) and _symbolic_leaves(x):
            return True
    return False


def record(fn: Callable, args: tuple, kwargs: dict, op_type: str, name: str | None = None):
    """Record ``fn(*args, **kwargs)`` as a pure op of the graph of its tensor arguments.

    The output spec comes from calling ``fn`` on sample values of the inputs' specs;
    what ``fn`` raises for every sample (a shape or dtype mismatch) is raised here.
    Returns the output structure with a :class:`Tensor` at each leaf."""
    from nbdata.placeholder import Placeholder
    leaves = []
    seen = set()
    for x in _symbolic_leaves((args, kwargs)):
        if id(x) not in seen:
            seen.add(id(x))
            leaves.append(x)
    graph = _graph_of(leaves)
    tensors = [as_tensor(x, graph) if isinstance(x, Placeholder) else x for x in leaves]
    keys = [id(x) for x in leaves]

    build_args, build_kwargs = _template(args), _template(kwargs)

    def call(*values):
        bound = dict(zip(keys, values))
        return fn(*build_args(bound), **build_kwargs(bound))
    call.__qualname__ = getattr(fn, "__name__", op_type)
    specs = [t.spec for t in tensors]
    returned = []

    def probe(*values):   # notes what kind of structure the function returns
        out = call(*values)
        returned.append(type(out))
        return out
    probe.__qualname__ = call.__qualname__
    known = _known_spec(fn, args, kwargs, tensors)
    if known is not None:
        from nbdata.ops.function import UserFunction
        out_spec, traced = known, UserFunction(call, op_type, tuple(specs), output_spec=known)
    else:
        out_spec, traced = trace_op(probe, specs, op_type)
    traced.fn = call
    op = Operation(graph, op_type, name, tensors, call, flatten(out_spec))
    op.checked = traced
    # What was called, for code that writes the graph out as source (compiler/twin.py).
    op.source, op.out_spec = (fn, args, kwargs), out_spec
    outputs = pack_as(out_spec, op.outputs)
    # A list returned at the top (decode_csv's columns) stays a list, as in TF1.
    return list(outputs) if returned and returned[0] is list else outputs


def _known_spec(fn: Callable, args: tuple, kwargs: dict, tensors: list):
    """The output spec of calls whose result shape sample values cannot show: a reshape
    of a tensor with unknown dims to a given shape (``np.reshape(decode_raw(r), (4,))``)
    has that shape, a -1 dim unknown; None for everything else (traced)."""
    if fn is not np.reshape or not args or not isinstance(args[0], Tensor) or len(tensors) != 1:
        return None
    x = args[0]
    if x.shape.is_fully_defined() or isinstance(x.spec, TensorSpec) is False:
        return None
    shape = args[1] if len(args) > 1 else kwargs.get("newshape", kwargs.get("shape"))
    if is_symbolic(shape) or shape is None:
        return None
    dims = (int(shape),) if np.ndim(shape) == 0 else tuple(int(d) for d in shape)
    if sum(d == -1 for d in dims) > 1 or any(d < -1 for d in dims):
        return None
    return TensorSpec(tuple(None if d == -1 else d for d in dims), x.dtype)


def output_leaves(value: Any) -> list:
    """Leaves of what an op's function returned, in ``flatten`` order: a top-level list
    counts as a tuple, as for a recorded op's outputs; dicts in sorted key order."""
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in output_leaves(v)]
    if isinstance(value, dict):
        return [leaf for k in sorted(value) for leaf in output_leaves(value[k])]
    return [value]


def _graph_of(leaves: list) -> Graph:
    graphs = {id(x.graph): x.graph for x in leaves if isinstance(x, Tensor)}
    if len(graphs) > 1:
        raise ValueError("Tensors of an op must be from the same graph.")
    return next(iter(graphs.values())) if graphs else get_default_graph()


def trace_op(call: Callable, specs: list, op_type: str):
    """The output spec of ``call(*values)`` for inputs of ``specs`` (and the traced
    user function that checks each run's values against it). An error every sample
    input gives is raised as it is: ValueError and TypeError as TF1 raises them when a
    graph is built (nd.errors.InvalidArgumentError is a ValueError)."""
    from nbdata.ops.function import UserFunction
    try:
        traced = UserFunction(call, op_type, tuple(specs))
    except InvalidArgumentError as e:
        cause = e.__cause__
        if isinstance(cause, (OpError, TypeError, ValueError)):
            raise cause from None
        raise
    return traced.output_spec, traced


def graph_function(fn: Callable, op_type: str | None = None):
    """Decorate a NumPy-level function (a decoder, an image op) so that called with
    graph tensors it records an op instead of running."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if is_symbolic(*args, **kwargs):
            return record(fn, args, kwargs, op_type or fn.__name__, kwargs.get("name"))
        return fn(*args, **kwargs)
    return wrapper


__all__ = ["Graph", "GraphKeys", "Operation", "Tensor", "TensorShape", "as_tensor", "constant",
           "get_default_graph", "graph_function", "is_symbolic", "name_scope", "output_leaves", "record",
           "reset_default_graph", "trace_op"]
