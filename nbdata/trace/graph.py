"""The one recorder: symbolic values, the operations recorded on them, and graphs.

A :class:`Tensor` (``nd.Tensor``) stands for what an operation will compute. NumPy's own
vocabulary records on it: Python operators, indexing, ``astype`` and ndarray methods,
ufuncs and array functions (through ``__array_ufunc__`` / ``__array_function__``), and
every nbdata primitive (``nbdata/primitives``) given a value records itself. A recorded
:class:`Operation` (``nd.Operation``) keeps what was called with which arguments (``call``),
a function of its input values (``fn``) and its output specs, learnt when it is
recorded: from the primitive's own rule where it has one, else by running the call on
sample inputs of its input specs, so a mistake is reported where the op is built.

Every consumer reads the same graphs: the TF1 ``Session`` runs them
(``nbdata/train``), and the compiler's passes and backends read the graph of a user
function recorded by :func:`nbdata.trace.function.record_function` (elementwise
lifting, Numba twins, decode lifting, column selection, GPU chains).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Mapping
from typing import Any, Callable

import numpy as np

from nbdata.errors import InvalidArgumentError, OpError
from nbdata.plugins import provided
from nbdata.spec import (SparseTensorSpec, TensorSpec, as_dtype, dtype_name, flatten, pack_as,
                         spec_of_value, string, to_leaf)
from nbdata.trace.abstract import FunctionOutputError, TracedFunction
from nbdata.spec import TensorShape


class TraceError(TypeError):
    """A symbolic value was used in a way that cannot be recorded (as a Python bool, a
    length, an index, converted to a NumPy array...). A TypeError, as in TF1."""

    refusal = True   # not an internal error (nbdata.trace.function.recording_failed)


# ------------------------------------------------------------------ graphs

class Graph:
    """Recorded operations, with name scoping and collections (``tf.Graph``).

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

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_scope")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()
        self._scope = threading.local()

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

    def input(self, spec, name: str) -> "Tensor":
        """A value standing for an argument of a recorded function."""
        return Operation(self, "Input", name, [], None, [spec], kind="input").outputs[0]

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

    def placeholder_tensors(self) -> list:
        """The graph values made so far for ``nd.placeholder`` objects."""
        with self._lock:
            return list(self._placeholders.values())

    def placeholder_tensor(self, placeholder) -> "Tensor":
        """The graph value standing for an ``nd.placeholder`` (made on first use)."""
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


_eager = [True]


def executing_eagerly() -> bool:
    """Whether Dataset iterators and ops run eagerly here (``get_next()`` gives values):
    not inside ``with graph.as_default():`` and not after ``disable_eager_execution()``,
    or between :func:`enter_eager_calls` and :func:`leave_eager_calls` (a pipeline
    calling a user function on real elements: it computes values, a
    ``tf.random_uniform`` in it draws one, even while a session of a graph runs the
    pipeline). In graph mode they are graph operations run by ``Session.run``."""
    if getattr(_local, "eager_calls", 0):
        return True
    return _eager[0] and not _default_stack()


def in_eager_calls() -> bool:
    """Whether this thread is between :func:`enter_eager_calls` and
    :func:`leave_eager_calls` (a pipeline calling a user function on real elements)."""
    return bool(getattr(_local, "eager_calls", 0))


def enter_eager_calls() -> int:
    """This thread runs ops eagerly until :func:`leave_eager_calls` (a pair of calls, not a
    context manager: per element, a context manager cost ten times as much); returns
    what :func:`leave_eager_calls` takes."""
    depth = getattr(_local, "eager_calls", 0)
    _local.eager_calls = depth + 1
    return depth


def leave_eager_calls(depth: int) -> None:
    _local.eager_calls = depth


def disable_eager_execution() -> None:
    """Graph mode for the process (``tf.compat.v1.disable_eager_execution``)."""
    _eager[0] = False


def enable_eager_execution() -> None:
    """Undo :func:`disable_eager_execution`."""
    _eager[0] = True


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


def _session_for(session, graph: Graph):
    """The session running ``graph``: sessions live in the TF1 layer above."""
    return provided("session_finder")(session, graph)


# --------------------------------------------------------------- operations

class Operation:
    """A recorded operation (``tf.Operation``).

    ``kind`` says how it runs: ``"pure"`` ops compute their outputs from their inputs
    with ``fn`` (a plain function of the input values); ``"stateful"`` ops call
    ``fn(run, values)`` with a session run's context (queues, readers, variables);
    ``"placeholder"`` outputs are fed; ``"input"`` outputs are a recorded function's
    arguments. A recorded call keeps ``call = (callable, args, kwargs)`` (values at
    their places in the arguments) and ``out_spec``, the structure it returns.
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
        self.call: tuple | None = None
        self.out_spec: Any = None
        # The output check of a recorded call (a TracedFunction), None otherwise.
        self.checked = None
        graph._add(self)

    def __repr__(self) -> str:
        return f"<nd.Operation {self.name!r} type={self.type}>"

    @property
    def stateful(self) -> bool:
        return self.kind != "pure"

    def run(self, feed_dict=None, session=None) -> None:
        """Run this op in ``session`` (default: the default session)."""
        _session_for(session, self.graph).run(self, feed_dict=feed_dict)


# ------------------------------------------------------------------ values

def getitem(x, item):
    """``x[item]`` (what indexing a value records)."""
    return x[item]


def _sliced(x, bounds, kinds):
    """``x[...]`` with the slices given as (start, stop, step) triples."""
    return x[tuple(slice(*b) if k else b for b, k in zip(bounds, kinds))]


def _sliced_spec(x, bounds, kinds):
    """The rank, each dim unknown (a dim an integer index takes away)."""
    ndims = x.shape.ndims
    if ndims is None or any(b is None or b is Ellipsis for b, k in zip(bounds, kinds) if not k):
        return TensorSpec(None, x.dtype)
    dims = [None] * sum(kinds) + list(x.shape.dims[len(kinds):])
    return TensorSpec(tuple(dims), x.dtype)


_sliced.primitive = type("Rule", (), {"abstract": staticmethod(_sliced_spec)})()


def astype(x, dtype, *args, **kwargs):
    """``x.astype(dtype)`` (what ``astype`` on a value records)."""
    if as_dtype(dtype) is string:
        raise TypeError("astype to a string dtype is not supported on tensors")
    return np.asarray(x).astype(dtype, *args, **kwargs)


class Symbolic:
    """NumPy's operator vocabulary, recording operations; ``_symbol(graph)`` is the
    value in ``graph`` (default: the default graph) that stands for this object."""

    __array_priority__ = 1000

    def _symbol(self, graph: Graph | None = None) -> "Tensor":
        raise NotImplementedError

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method == "__call__":
            return record(ufunc, inputs, kwargs, ufunc.__name__)
        return record(getattr(ufunc, method), inputs, kwargs, f"{ufunc.__name__}.{method}")

    def __array_function__(self, func, types, args, kwargs):
        return record(func, args, kwargs, func.__name__)

    def __getitem__(self, item):
        parts = item if isinstance(item, tuple) else (item,)
        if any(isinstance(p, slice) and is_symbolic(p.start, p.stop, p.step) for p in parts):
            # slice bounds that are tensors (x[0:n * k]): known when the graph runs
            bounds = tuple((p.start, p.stop, p.step) if isinstance(p, slice) else p for p in parts)
            kinds = tuple(isinstance(p, slice) for p in parts)
            return record(_sliced, (self, bounds, kinds), {}, "strided_slice")
        return record(getitem, (self, item), {}, "strided_slice")

    def astype(self, dtype, *args, **kwargs):
        return record(astype, (self, dtype) + args, kwargs, "Cast")

    def reshape(self, *shape, **kwargs):
        return record(np.reshape, (self, shape[0] if len(shape) == 1 else shape), kwargs, "Reshape")

    def __bool__(self):
        raise TraceError("Using a `nd.Tensor` as a Python `bool` is not allowed. Use "
                         "`if t is not None:` instead of `if t:` to test if a tensor is defined, "
                         "and use np.where or a py_func to execute subgraphs conditioned on the "
                         "value of a tensor.")

    def __len__(self):
        raise TraceError(f"len is not well defined for symbolic Tensors ({self._symbol().name}). "
                         "Please call `x.shape` rather than `len(x)` for shape information.")

    def __iter__(self):
        shape = self._symbol().shape
        if shape.dims is None or not shape.dims or shape.dims[0] is None:
            raise TraceError(f"Tensor {self._symbol().name} is not iterable: its first "
                             f"dimension is not known (shape {shape}).")
        return (self[i] for i in range(shape.dims[0]))

    def __array__(self, *args, **kwargs):
        raise TraceError(f"Cannot convert a symbolic nd.Tensor ({self._symbol().name}) to a "
                         "NumPy array: evaluate it with sess.run(...), or build the computation "
                         "from NumPy functions that accept tensors")

    def _scalar(self, *args):
        raise TraceError(f"Cannot convert a symbolic nd.Tensor ({self._symbol().name}) to a "
                         "Python number: its value exists only when the graph runs")

    __int__ = __float__ = __index__ = __complex__ = _scalar
    __hash__ = object.__hash__


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
    setattr(Symbolic, f"__{_name}__", _binary_method(_ufunc))
    setattr(Symbolic, f"__r{_name}__", _binary_method(_ufunc, reflected=True))
for _name, _ufunc in _COMPARISONS.items():
    setattr(Symbolic, f"__{_name}__", _binary_method(_ufunc))
for _name, _ufunc in _UNARY_OPS.items():
    setattr(Symbolic, f"__{_name}__", _unary_method(_ufunc))


def _array_method(name: str):
    function = getattr(np, name)

    def method(self, *args, **kwargs):
        return record(function, (self,) + args, kwargs, name)
    method.__name__ = name
    method.__doc__ = f"``np.{name}`` of the tensor, recorded as an op."
    return method


# ndarray methods that are NumPy functions of the array (``t.sum(axis=0)``, ``t.T``).
for _name in ("sum", "mean", "max", "min", "prod", "std", "var", "any", "all", "argmax",
              "argmin", "cumsum", "cumprod", "transpose", "ravel", "squeeze", "clip", "round",
              "copy"):
    setattr(Symbolic, _name, _array_method(_name))
Symbolic.T = property(_array_method("transpose"))
Symbolic.flatten = _array_method("ravel")


class Tensor(Symbolic):
    """A symbolic value: output ``value_index`` of ``op`` (``tf.Tensor`` in a graph).

    ``dtype`` and the static ``shape`` are known when the op is recorded; its value
    exists only when the graph runs.

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

    def _symbol(self, graph: Graph | None = None) -> "Tensor":
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
        merged = self.shape.merge_with(TensorShape(shape))
        kind = SparseTensorSpec if isinstance(self.spec, SparseTensorSpec) else TensorSpec
        self.spec = kind(merged.dims, self.spec.dtype)

    def eval(self, feed_dict=None, session=None):
        """The tensor's value in ``session`` (default: the default session)."""
        return _session_for(session, self.graph).run(self, feed_dict=feed_dict)

    def consumers(self) -> list:
        """The ops that take this tensor as an input."""
        return [op for op in self.graph.get_operations() if any(t is self for t in op.inputs)]

    def __repr__(self) -> str:
        return (f"<nd.Tensor '{self.name}' shape={self.shape} "
                f"dtype={dtype_name(self.dtype)}>")


def as_tensor(value: Any, graph: Graph | None = None) -> Tensor:
    """A value of the graph for ``value``: a value itself, the graph value of a symbolic
    object (an ``nd.placeholder``), or a constant holding it."""
    if isinstance(value, Symbolic):
        return value._symbol(graph)
    return constant(value)


def constant(value: Any, dtype=None, shape=None, name: str | None = None) -> Tensor:
    """A tensor holding ``value`` (``tf.constant``); dtype as NumPy converts it unless
    given.

    >>> import numpy as np, nbdata as nd
    >>> c = nd.constant([1.5, 2.5], dtype=np.float32)
    >>> c.dtype, c.shape
    (dtype('float32'), TensorShape([2]))
    """
    if dtype is not None and as_dtype(dtype) is string:
        leaf = to_leaf(value, "constant")
    else:
        # a copy, as TF1 puts the value in the graph: the user may change their array
        leaf = to_leaf(np.array(value, dtype=dtype), "constant")
    if shape is not None:
        leaf = to_leaf(np.broadcast_to(np.asarray(leaf, dtype=object if isinstance(leaf, bytes)
                                                  else None), tuple(shape)).copy(), "constant")
    spec = spec_of_value(leaf)
    op = Operation(get_default_graph(), "Const", name, [], lambda: leaf, [spec])
    return op.outputs[0]


# ---------------------------------------------------------------- recording

def symbolic_leaves(structure: Any) -> list:
    """The symbolic objects in a nested structure of arguments (lists, tuples, dicts)."""
    return leaves_where(structure, lambda x: isinstance(x, Symbolic))


def leaves_where(structure: Any, test: Callable[[Any], bool]) -> list:
    """The objects ``test`` accepts in a nested structure of lists, tuples and dicts."""
    found = []

    def walk(x):
        if test(x):
            found.append(x)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
        elif isinstance(x, Mapping):
            for v in x.values():
                walk(v)
    walk(structure)
    return found


def template(structure: Any) -> Callable[[dict], Any]:
    """A function rebuilding ``structure`` with each symbolic object replaced by its value
    in a dict keyed on ``id``. Parts without symbols are returned as they are (the same
    objects), so a call per record rebuilds only the path to its values."""
    if isinstance(structure, Symbolic):
        key = id(structure)
        return lambda values: values[key]
    if not symbolic_leaves(structure):
        return lambda values: structure
    if isinstance(structure, list):
        parts = [template(v) for v in structure]
        return lambda values: [p(values) for p in parts]
    if isinstance(structure, tuple):
        parts = [template(v) for v in structure]
        if hasattr(structure, "_fields"):
            cls = type(structure)
            return lambda values: cls(*[p(values) for p in parts])
        return lambda values: tuple(p(values) for p in parts)
    cls = type(structure) if isinstance(structure, dict) else dict
    parts = {k: template(v) for k, v in structure.items()}
    return lambda values: cls((k, p(values)) for k, p in parts.items())


def is_symbolic(*args, **kwargs) -> bool:
    """Whether any argument (nested in lists, tuples, dicts) is symbolic: a recorded value
    or an ``nd.placeholder`` used as one."""
    for x in itertools.chain(args, kwargs.values()):
        if isinstance(x, Symbolic):
            return True
        if isinstance(x, (list, tuple, Mapping)) and symbolic_leaves(x):
            return True
    return False


def record(fn: Callable, args: tuple, kwargs: dict, op_type: str, name: str | None = None):
    """Record ``fn(*args, **kwargs)`` as a pure op of the graph of its symbolic arguments.

    The output spec comes from ``fn``'s primitive rule (``fn.primitive.abstract``, see
    ``nbdata/primitives/table.py``) when it has one, else from calling ``fn`` on sample
    values of the inputs' specs; what ``fn`` raises for every sample (a shape or dtype
    mismatch) is raised here. Returns the output structure with a :class:`Tensor` at
    each leaf."""
    leaves, seen = [], set()
    for x in symbolic_leaves((args, kwargs)):
        if id(x) not in seen:
            seen.add(id(x))
            leaves.append(x)
    default = get_default_graph()
    if any(isinstance(x, Tensor) and x.graph is not default for x in leaves):
        # A function recorded in a graph of its own may use constants of the outer graph
        # (TF1's captured tf.constant): their values, when nothing else feeds them.
        folded = {id(x): constant_value(x) if isinstance(x, Tensor) and x.graph is not default
                  else x for x in leaves}
        if not any(v is None for v in folded.values()):
            args, kwargs = template(args)(folded), template(kwargs)(folded)
            leaves = [x for x in leaves if isinstance(folded[id(x)], Symbolic)]
    graph = _graph_of(leaves)
    values = [x._symbol(graph) for x in leaves]
    keys = [id(x) for x in leaves]
    build_args, build_kwargs = template(args), template(kwargs)

    def call(*inputs):
        bound = dict(zip(keys, inputs))
        return fn(*build_args(bound), **build_kwargs(bound))
    call.__qualname__ = getattr(fn, "__name__", op_type)
    specs = [v.spec for v in values]
    known = _known_spec(fn, args, kwargs, values)
    if known is None:
        rule = getattr(getattr(fn, "primitive", None), "abstract", None)
        known = rule(*args, **kwargs) if rule is not None else None
    returned = []

    def probe(*inputs):   # notes what kind of structure the function returns
        out = call(*inputs)
        returned.append(type(out))
        return out
    probe.__qualname__ = call.__qualname__
    if known is not None:   # a list (decode_csv's columns) is a tuple of outputs
        returned.append(type(known))
        out_spec = tuple(known) if isinstance(known, list) else known
        traced = TracedFunction(call, op_type, tuple(specs), output_spec=out_spec)
    else:
        out_spec, traced = _trace_op(probe, specs, op_type)
    traced.fn = call
    op = Operation(graph, op_type, name, values, call, flatten(out_spec))
    op.checked = traced
    op.call, op.out_spec = (fn, args, kwargs), out_spec
    outputs = pack_as(out_spec, op.outputs)
    # A list returned at the top (decode_csv's columns) stays a list, as in TF1.
    return list(outputs) if returned and returned[0] is list else outputs


def _known_spec(fn: Callable, args: tuple, kwargs: dict, values: list):
    """The output spec of calls whose result shape sample values cannot show: a reshape
    of a tensor with unknown dims to a given shape (``np.reshape(decode_raw(r), (4,))``)
    has that shape, a -1 dim unknown; None for everything else."""
    if fn is not np.reshape or not args or not isinstance(args[0], Tensor) or len(values) != 1:
        return None
    x = args[0]
    if x.shape.is_fully_defined() or not isinstance(x.spec, TensorSpec):
        return None
    shape = args[1] if len(args) > 1 else kwargs.get("newshape", kwargs.get("shape"))
    if is_symbolic(shape) or shape is None:
        return None
    dims = (int(shape),) if np.ndim(shape) == 0 else tuple(int(d) for d in shape)
    if sum(d == -1 for d in dims) > 1 or any(d < -1 for d in dims):
        return None
    return TensorSpec(tuple(None if d == -1 else d for d in dims), x.dtype)


def constant_value(tensor: Tensor) -> Any:
    """The value of a tensor computed from constants alone (pure ops, no placeholder),
    None for any other."""
    ops, halted = upstream([tensor], halt=lambda op: op.kind != "pure")
    if halted:
        return None
    values: dict = {}
    for op in ops:
        out = op.fn(*[values[id(t)] for t in op.inputs])
        leaves = output_leaves(out)
        values.update(zip((id(t) for t in op.outputs),
                          leaves if len(leaves) == len(op.outputs) else [out]))
    return values[id(tensor)]


def upstream(targets: list, stop: set | frozenset = frozenset(), control: bool = False,
             halt: Callable | None = None) -> tuple[list, list]:
    """The ops computing ``targets`` (tensors or ops), dependencies first: the walk up
    the graph does not cross a tensor whose id is in ``stop`` (nor run an op all of
    whose outputs are), follows control inputs when ``control``, and stops at the ops
    for which ``halt(op)`` is true, returned second (what a session runs, what a
    recorded function computes, what a TF1 enqueue op reads)."""
    order, done, halted = [], set(), []
    stack = [(t.op if isinstance(t, Tensor) else t, False) for t in reversed(targets)
             if not isinstance(t, Tensor) or id(t) not in stop]
    while stack:
        op, expanded = stack.pop()
        if id(op) in done:
            continue
        if expanded or halt is not None and halt(op):
            done.add(id(op))
            (order if expanded else halted).append(op)
            continue
        if op.outputs and all(id(t) in stop for t in op.outputs):
            continue
        stack.append((op, True))
        for dep in reversed(op.control_inputs if control else ()):
            if id(dep) not in done:
                stack.append((dep, False))
        for t in reversed(op.inputs):
            if id(t) not in stop and id(t.op) not in done:
                stack.append((t.op, False))
    return order, halted


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
        error = ValueError("Tensors of an op must be from the same graph.")
        error.refusal = True   # a user's mix (or a captured outer tensor): not nbdata's bug
        raise error
    return next(iter(graphs.values())) if graphs else get_default_graph()


def _trace_op(call: Callable, specs: list, op_type: str):
    """The output spec of ``call(*values)`` for inputs of ``specs`` (and the traced
    function that checks each run's values against it). An error every sample input
    gives is raised as it is: ValueError and TypeError as TF1 raises them when a graph
    is built (nd.errors.InvalidArgumentError is a ValueError)."""
    try:
        traced = TracedFunction(call, op_type, tuple(specs))
    except FunctionOutputError as e:   # returns nothing a value can be made of
        e.refusal = True
        raise
    except InvalidArgumentError as e:
        cause = e.__cause__
        error = cause if isinstance(cause, (OpError, TypeError, ValueError)) else e
        error.refusal = True   # the op refuses inputs of these specs: the user's mistake
        raise error from None
    return traced.output_spec, traced


__all__ = ["Graph", "Operation", "Symbolic", "TraceError", "Tensor", "as_tensor", "astype", "constant",
           "constant_value",
           "disable_eager_execution", "enable_eager_execution", "enter_eager_calls",
           "executing_eagerly", "in_eager_calls", "leave_eager_calls",
           "get_default_graph", "getitem", "is_symbolic", "name_scope", "output_leaves", "record",
           "upstream",
           "leaves_where", "reset_default_graph", "symbolic_leaves", "template"]

