"""Element specs (TensorSpec, SparseTensorSpec, DatasetSpec), the string dtype, sparse
tensors, and nested-structure helpers.

An element is a nested structure of tuples, namedtuples and dicts whose leaves
are NumPy arrays, NumPy scalars, ``bytes`` or datasets. Dicts flatten in
sorted-key order, as in tf.data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Callable

import numpy as np

from nbdata.errors import InvalidArgumentError


class StringDType:
    """The dtype of string (``bytes``) tensors, spelled ``nd.string``.

    ``bytes``, ``str``, ``np.bytes_``, ``np.str_`` and ``object`` all normalise
    to it through :func:`as_dtype`.

    >>> import nbdata as nd
    >>> nd.string
    string
    >>> nd.TensorSpec((), bytes).dtype is nd.string
    True
    """

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    name = "string"
    kind = "O"

    def __repr__(self) -> str:
        return "string"

    def __reduce__(self):
        return (StringDType, ())


string = StringDType()
_OBJECT = np.dtype(object)


def as_dtype(dtype: Any):
    """Normalise a dtype-like value to a ``np.dtype`` or :data:`string`.

    >>> as_dtype(int)
    dtype('int64')
    >>> as_dtype(str)
    string
    """
    if dtype is string or isinstance(dtype, StringDType):
        return string
    if dtype in (bytes, str, object, np.bytes_, np.str_, np.object_):
        return string
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"{dtype!r} is not a valid dtype") from e
    if dt.kind in "OSU":
        return string
    return dt


def dtype_name(dtype) -> str:
    return "string" if dtype is string else np.dtype(dtype).name


# ---------------------------------------------------------------- structures

def is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def flatten(x: Any) -> list:
    """Leaves of a nested structure in canonical order (dict keys sorted).

    >>> flatten({"b": 1, "a": (2, 3)})
    [2, 3, 1]
    """
    out: list = []
    _flatten_into(x, out)
    return out


_LEAF_TYPES = (np.ndarray, np.generic, bytes, int, float)


def _flatten_into(x, out):
    if isinstance(x, _LEAF_TYPES):
        out.append(x)
    elif type(x) is tuple:
        for v in x:
            if isinstance(v, _LEAF_TYPES):
                out.append(v)
            else:
                _flatten_into(v, out)
    elif isinstance(x, Mapping):
        for k in sorted(x):
            _flatten_into(x[k], out)
    elif isinstance(x, tuple):
        for v in x:
            _flatten_into(v, out)
    elif is_custom_nest(x):
        _flatten_into(nest_components(x), out)
    elif x is not None:   # None is a component without values (TF's NoneTensor)
        out.append(x)


def is_custom_nest(x: Any) -> bool:
    """Whether ``x`` is a structure as tf.nest sees it beyond tuples and dicts: by TF's
    protocol (``x.__tf_flatten__()`` gives ``(metadata, components)`` and
    ``x.__tf_unflatten__(metadata, components)`` rebuilds one: called on the instance,
    so it may be a classmethod or a plain method), or an ``attrs``
    class instance (its attributes in order); plain dataclasses are leaves, as in TF."""
    t = type(x)
    return (hasattr(t, "__tf_flatten__") and hasattr(t, "__tf_unflatten__")) or \
        hasattr(t, "__attrs_attrs__")


def nest_components(x: Any) -> tuple:
    """The components of a :func:`is_custom_nest` structure."""
    if hasattr(type(x), "__tf_flatten__"):
        return tuple(x.__tf_flatten__()[1])
    return tuple(getattr(x, a.name) for a in type(x).__attrs_attrs__)


def nest_rebuild(x: Any, components: tuple) -> Any:
    """A structure like ``x`` (:func:`is_custom_nest`) holding ``components``."""
    if hasattr(type(x), "__tf_flatten__"):
        return x.__tf_unflatten__(x.__tf_flatten__()[0], tuple(components))
    return type(x)(*components)


def pack_as(structure: Any, leaves: list) -> Any:
    """Rebuild ``structure``'s nesting with ``leaves`` (inverse of :func:`flatten`).

    >>> pack_as({"b": 0, "a": (0, 0)}, [2, 3, 1])
    {'a': (2, 3), 'b': 1}
    """
    it = iter(leaves)
    result = _pack(structure, it)
    return result


def packer(structure: Any):
    """A fast ``leaves -> element`` function for one fixed structure (hot loops).

    >>> packer((0, 0))([1, 2]), packer(0)([5])
    ((1, 2), 5)
    """
    if structure is None:
        return lambda leaves: None
    if is_custom_nest(structure):
        return lambda leaves: pack_as(structure, leaves)
    if not isinstance(structure, (tuple, Mapping)):
        return lambda leaves: leaves[0]
    if type(structure) is tuple and not any(isinstance(v, (tuple, Mapping)) or v is None
                                            or is_custom_nest(v) for v in structure):
        return tuple
    if type(structure) is dict and not any(isinstance(v, (tuple, Mapping)) or v is None
                                           or is_custom_nest(v) for v in structure.values()):
        keys = sorted(structure)
        return lambda leaves: dict(zip(keys, leaves))
    build = _builder(structure)
    return lambda leaves: build(iter(leaves))


def _builder(s):
    """``it -> element`` for the fixed structure ``s`` (what :func:`_pack` does, with
    the structure's kinds decided once)."""
    if isinstance(s, Mapping):
        keys = sorted(s)
        subs = [_builder(s[k]) for k in keys]
        if type(s) is dict:
            return lambda it: {k: f(it) for k, f in zip(keys, subs)}
        kind = type(s)
        return lambda it: kind({k: f(it) for k, f in zip(keys, subs)})
    if is_namedtuple(s):
        subs, kind = [_builder(v) for v in s], type(s)
        return lambda it: kind(*[f(it) for f in subs])
    if isinstance(s, tuple):
        subs = [_builder(v) for v in s]
        return lambda it: tuple([f(it) for f in subs])
    if s is None:
        return lambda it: None
    if is_custom_nest(s):
        return lambda it: _pack(s, it)
    return next


def _pack(s, it):
    if isinstance(s, Mapping):
        packed = {k: _pack(s[k], it) for k in sorted(s)}
        return type(s)(packed) if type(s) is not dict else packed
    if is_namedtuple(s):
        return type(s)(*[_pack(v, it) for v in s])
    if isinstance(s, tuple):
        return tuple(_pack(v, it) for v in s)
    if s is None:
        return None
    if is_custom_nest(s):
        return nest_rebuild(s, tuple(_pack(v, it) for v in nest_components(s)))
    return next(it)


def map_structure(fn: Callable, *structures: Any) -> Any:
    """Apply ``fn`` leaf-wise over structures of identical nesting.

    >>> map_structure(lambda a, b: a + b, (1, {"x": 2}), (10, {"x": 20}))
    (11, {'x': 22})
    """
    first = structures[0]
    for other in structures[1:]:
        assert_same_structure(first, other)
    leaves = [fn(*vals) for vals in zip(*(flatten(s) for s in structures))]
    return pack_as(first, leaves)


def map_nest(fn: Callable, x: Any, lists: bool = False) -> Any:
    """Rebuild the nesting of ``x`` (tuples, namedtuples, dicts in their own key order;
    lists too, as tuples, when ``lists``) with ``fn`` applied to every leaf.

    >>> map_nest(lambda v: v * 2, {"b": [1, 2], "a": (3,)}, lists=True)
    {'b': (2, 4), 'a': (6,)}
    """
    if isinstance(x, Mapping):
        return {k: map_nest(fn, v, lists) for k, v in x.items()}
    if is_namedtuple(x):
        return type(x)(*[map_nest(fn, v, lists) for v in x])
    if isinstance(x, tuple) or (lists and isinstance(x, list)):
        return tuple(map_nest(fn, v, lists) for v in x)
    if x is None:
        return None
    if is_custom_nest(x):
        return nest_rebuild(x, tuple(map_nest(fn, v, lists) for v in nest_components(x)))
    return fn(x)


def flatten_up_to(structure: Any, values: Any, what: str, none_fills: bool = False) -> list:
    """Flatten ``values`` along ``structure``'s nesting, stopping at its leaves (where
    ``values`` may hold anything: a shape, a padding value). Lists in ``values`` stand
    for tuples. With ``none_fills``, a None in ``values`` where ``structure`` nests
    further stands for None at each of its leaves.

    >>> flatten_up_to({"b": 0, "a": (0, 0)}, {"a": ([1], [2, 3]), "b": None}, "shapes")
    [[1], [2, 3], None]
    >>> flatten_up_to((0, {"x": 0, "y": 0}), (5, None), "values", none_fills=True)
    [5, None, None]
    """
    if values is None and none_fills and isinstance(structure, (tuple, Mapping)):
        return [None] * len(flatten(structure))
    if isinstance(structure, Mapping):
        if not isinstance(values, Mapping) or sorted(values) != sorted(structure):
            raise TypeError(f"{what} {values!r} does not match the element structure "
                            f"{structure_repr(structure)}")
        return [v for k in sorted(structure)
                for v in flatten_up_to(structure[k], values[k], what, none_fills)]
    if isinstance(structure, tuple):
        if not isinstance(values, (tuple, list)) or len(values) != len(structure):
            raise TypeError(f"{what} {values!r} does not match the element structure "
                            f"{structure_repr(structure)}")
        return [v for s, x in zip(structure, values) for v in flatten_up_to(s, x, what, none_fills)]
    return [values]


def substructures(x: Any):
    """Every container (tuple, namedtuple, dict) in a nesting, outermost first.

    >>> [type(s).__name__ for s in substructures((1, {"a": (2,)}))]
    ['tuple', 'dict', 'tuple']
    """
    if isinstance(x, (tuple, Mapping)):
        yield x
        for v in (x.values() if isinstance(x, Mapping) else x):
            yield from substructures(v)


def structure_repr(x: Any) -> str:
    """A short description of a nesting, for error messages."""
    if isinstance(x, Mapping):
        return "{" + ", ".join(f"{k!r}: {structure_repr(x[k])}" for k in sorted(x)) + "}"
    if is_namedtuple(x):
        return type(x).__name__ + "(" + ", ".join(structure_repr(v) for v in x) + ")"
    if isinstance(x, tuple):
        inner = ", ".join(structure_repr(v) for v in x)
        return "(" + inner + ("," if len(x) == 1 else "") + ")"
    return "."


def same_structure(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if is_custom_nest(a) or is_custom_nest(b):
        return (type(a) is type(b)
                and same_structure(nest_components(a), nest_components(b)))
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        return (isinstance(a, Mapping) and isinstance(b, Mapping)
                and sorted(a) == sorted(b)
                and all(same_structure(a[k], b[k]) for k in a))
    if isinstance(a, tuple) or isinstance(b, tuple):
        return (isinstance(a, tuple) and isinstance(b, tuple)
                and is_namedtuple(a) == is_namedtuple(b)
                and (not is_namedtuple(a) or type(a)._fields == type(b)._fields)
                and len(a) == len(b)
                and all(same_structure(x, y) for x, y in zip(a, b)))
    return True


def assert_same_structure(a: Any, b: Any, what: str = "structures") -> None:
    if not same_structure(a, b):
        raise TypeError(f"{what} differ: {structure_repr(a)} vs {structure_repr(b)}")


# ---------------------------------------------------------------------- specs

def _norm_shape(shape) -> tuple | None:
    if shape is None:
        return None
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    out = []
    for d in shape:
        if d is None or (isinstance(d, (int, np.integer)) and d == -1):
            out.append(None)
        elif isinstance(d, (int, np.integer)) and d >= 0:
            out.append(int(d))
        elif isinstance(d, (int, np.integer)):
            raise ValueError(f"invalid dimension {d!r} in shape {shape!r}")
        else:
            raise TypeError(f"Dimension value must be integer or None, got {d!r} in shape "
                            f"{shape!r}")
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """Describes one dense leaf of an element: its shape and dtype.

    ``shape`` is a tuple whose unknown dims are ``None``; ``shape=None`` means
    even the rank is unknown. ``dtype`` is a ``np.dtype`` or ``nd.string``.

    >>> import numpy as np, nbdata as nd
    >>> nd.TensorSpec((None, 3), np.float32)
    TensorSpec(shape=(None, 3), dtype=float32, name=None)
    >>> nd.TensorSpec((2, 3), np.float32).is_compatible_with(nd.TensorSpec((None, 3), np.float32))
    True
    """

    shape: tuple | None
    dtype: Any
    name: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "shape", _norm_shape(self.shape))
        object.__setattr__(self, "dtype", as_dtype(self.dtype))

    def __repr__(self) -> str:
        return f"TensorSpec(shape={self.shape}, dtype={dtype_name(self.dtype)}, name={self.name!r})"

    def __eq__(self, other) -> bool:
        return (isinstance(other, TensorSpec) and self.shape == other.shape
                and self.dtype == other.dtype)

    def __hash__(self) -> int:
        return hash((self.shape, repr(self.dtype)))

    @property
    def ndim(self) -> int | None:
        """The rank, or None when unknown.

        >>> TensorSpec((None, 3), np.float32).ndim
        2
        """
        return None if self.shape is None else len(self.shape)

    def shape_compatible(self, shape) -> bool:
        """True when a concrete or partial ``shape`` fits this spec's shape.

        >>> TensorSpec((None, 3), np.float32).shape_compatible((7, 3))
        True
        """
        return shapes_compatible(self.shape, _norm_shape(shape))

    def is_compatible_with(self, other) -> bool:
        """True if ``other`` (a spec or a value) could be described by this spec.

        >>> TensorSpec((2,), np.int64).is_compatible_with(np.array([1, 2]))
        True
        """
        if not isinstance(other, TensorSpec):
            other = spec_of_value(other)
            if not isinstance(other, TensorSpec):
                return False
        return self.dtype == other.dtype and shapes_compatible(self.shape, other.shape)

    def most_specific_compatible(self, other: "TensorSpec") -> "TensorSpec":
        """The spec describing values of both specs (dims that differ become None).

        >>> TensorSpec((2, 3), np.int64).most_specific_compatible(TensorSpec((4, 3), np.int64))
        TensorSpec(shape=(None, 3), dtype=int64, name=None)
        """
        if self.dtype != other.dtype:
            raise TypeError(f"incompatible dtypes {dtype_name(self.dtype)} and {dtype_name(other.dtype)}")
        return TensorSpec(merge_shapes(self.shape, other.shape), self.dtype)


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """The spec of a leaf that is itself a dataset (e.g. the windows of ``window``).

    >>> import nbdata as nd
    >>> ds = nd.Dataset.range(5).window(2)
    >>> ds.element_spec
    DatasetSpec(TensorSpec(shape=(), dtype=int64, name=None))
    """

    element_spec: Any
    # TF's dataset_shape: () for one dataset, (n,) for a batch of n datasets (an object
    # array of datasets: ``from_tensors([ds1, ds2])``, ``batch`` of dataset elements).
    shape: tuple = ()

    def __repr__(self) -> str:
        if self.shape:
            return f"DatasetSpec({self.element_spec!r}, shape={self.shape})"
        return f"DatasetSpec({self.element_spec!r})"

    def is_compatible_with(self, other) -> bool:
        """True for a DatasetSpec whose element spec fits this one's.

        >>> a = DatasetSpec(TensorSpec((None,), np.int64))
        >>> a.is_compatible_with(DatasetSpec(TensorSpec((3,), np.int64)))
        True
        """
        return (isinstance(other, DatasetSpec) and shapes_compatible(self.shape, other.shape)
                and specs_compatible(self.element_spec, other.element_spec))

    def most_specific_compatible(self, other: "DatasetSpec") -> "DatasetSpec":
        """The DatasetSpec describing both (element specs merged leaf by leaf).

        >>> DatasetSpec(TensorSpec((2,), np.int64)).most_specific_compatible(
        ...     DatasetSpec(TensorSpec((3,), np.int64)))
        DatasetSpec(TensorSpec(shape=(None,), dtype=int64, name=None))
        """
        return DatasetSpec(merge_specs(self.element_spec, other.element_spec),
                           merge_shapes(self.shape, other.shape) or ())


def shapes_compatible(a, b) -> bool:
    if a is None or b is None:
        return True
    if len(a) != len(b):
        return False
    return all(x is None or y is None or x == y for x, y in zip(a, b))


def merge_shapes(a, b):
    """Most specific shape compatible with both: equal dims kept, others None."""
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else None for x, y in zip(a, b))


def specs_compatible(a, b) -> bool:
    """True when structures match and each leaf spec of ``b`` fits ``a``."""
    if not same_structure(a, b):
        return False
    return all(x.is_compatible_with(y) for x, y in zip(flatten(a), flatten(b)))


def merge_specs(a, b):
    """Leaf-wise most specific compatible spec; TypeError when dtypes or nesting differ."""
    assert_same_structure(a, b, "element structures")
    out = []
    for x, y in zip(flatten(a), flatten(b)):
        if type(x) is not type(y):
            raise TypeError(f"incompatible element specs {x!r} and {y!r}")
        out.append(x.most_specific_compatible(y))
    return pack_as(a, out)


# ------------------------------------------------------------ sparse tensors

class SparseTensor:
    """A sparse tensor in COO form (``tf.SparseTensor``'s fields and order): what
    ``nd.io.VarLenFeature`` decodes to. :class:`SparseTensorSpec` describes one in an
    ``element_spec``; its shape has ``None`` where the dense size varies.

    >>> st = SparseTensor(np.array([[0], [2]]), np.array([5, 7]), np.array([4]))
    >>> st.to_dense().tolist()
    [5, 0, 7, 0]
    >>> SparseTensorSpec((None,), np.int64)
    SparseTensorSpec(shape=(None,), dtype=int64)

    Args:
        indices: ``[N, rank]`` int64 coordinates of the values, in row-major order.
        values: ``[N]`` values.
        dense_shape: ``[rank]`` int64 shape of the dense tensor.
    """

    __slots__ = ("indices", "values", "dense_shape")

    def __init__(self, indices, values, dense_shape):
        self.indices = np.asarray(indices, np.int64).reshape(-1, len(np.atleast_1d(dense_shape)))
        if isinstance(values, np.ndarray) and values.dtype == object:
            self.values = values
        elif isinstance(values, (list, tuple)) and values and isinstance(values[0], bytes):
            self.values = np.empty(len(values), object)
            self.values[:] = list(values)
        else:
            self.values = np.asarray(values)
        self.dense_shape = np.asarray(dense_shape, np.int64).reshape(-1)

    @property
    def dtype(self):
        return as_dtype(self.values.dtype)

    @property
    def shape(self) -> tuple:
        return tuple(int(d) for d in self.dense_shape)

    def to_dense(self, default_value: Any = None) -> np.ndarray:
        """The dense array (``tf.sparse.to_dense``); missing cells get
        ``default_value`` (0, or ``b""`` for strings)."""
        if self.values.dtype == object:
            out = np.empty(self.shape, object)
            out[...] = b"" if default_value is None else default_value
        else:
            out = np.full(self.shape, 0 if default_value is None else default_value,
                          self.values.dtype)
        if len(self.values):
            out[tuple(self.indices.T)] = self.values
        return out

    def __eq__(self, other) -> bool:
        return (isinstance(other, SparseTensor)
                and np.array_equal(self.indices, other.indices)
                and np.array_equal(self.dense_shape, other.dense_shape)
                and self.values.dtype == other.values.dtype
                and np.array_equal(self.values, other.values))

    __hash__ = None

    def __repr__(self) -> str:
        return (f"SparseTensor(indices={self.indices.tolist()}, values={self.values.tolist()}, "
                f"dense_shape={self.dense_shape.tolist()})")


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


class SparseTensorSpec:
    """The spec of a :class:`SparseTensor` leaf: dense shape (``None`` where it varies)
    and value dtype."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = tuple(None if d is None else int(d) for d in shape)
        self.dtype = as_dtype(dtype)

    def __eq__(self, other) -> bool:
        return (isinstance(other, SparseTensorSpec) and self.shape == other.shape
                and self.dtype == other.dtype)

    def __hash__(self) -> int:
        return hash(("SparseTensorSpec", self.shape, str(self.dtype)))

    def __repr__(self) -> str:
        return f"SparseTensorSpec(shape={self.shape}, dtype={dtype_name(self.dtype)})"

    @property
    def value_type(self):
        return SparseTensor

    def is_compatible_with(self, value) -> bool:
        if isinstance(value, SparseTensorSpec):
            other_shape, other_dtype = value.shape, value.dtype
        elif isinstance(value, SparseTensor):
            other_shape, other_dtype = value.shape, value.dtype
        else:
            return False
        return (len(other_shape) == len(self.shape)
                and all(a is None or b is None or a == b for a, b in zip(self.shape, other_shape))
                and (other_dtype == self.dtype
                     or (other_dtype is string) == (self.dtype is string) and other_dtype is string))

    def most_specific_compatible(self, other: "SparseTensorSpec") -> "SparseTensorSpec":
        """The spec describing values of both (dense dims that differ become None).

        >>> SparseTensorSpec((2,), np.int64).most_specific_compatible(
        ...     SparseTensorSpec((3,), np.int64))
        SparseTensorSpec(shape=(None,), dtype=int64)
        """
        if not isinstance(other, SparseTensorSpec) or self.dtype != other.dtype or \
                len(self.shape) != len(other.shape):
            raise TypeError(f"incompatible specs {self!r} and {other!r}")
        return SparseTensorSpec(merge_shapes(self.shape, other.shape), self.dtype)


def batched_spec(spec: Any, batch_dim: int | None, op: str) -> Any:
    """The spec of batches of elements of ``spec`` (leading dim ``batch_dim``)."""
    def leaf(s):
        if isinstance(s, DatasetSpec):   # a batch of datasets, as TF batches them
            return DatasetSpec(s.element_spec, (batch_dim,) + tuple(s.shape))
        if isinstance(s, SparseTensorSpec):
            return SparseTensorSpec((batch_dim,) + s.shape, s.dtype)
        return TensorSpec(None if s.shape is None else (batch_dim,) + s.shape, s.dtype)
    return pack_as(spec, [leaf(s) for s in flatten(spec)])


class DatasetBase:
    """The base class of ``nd.Dataset``, defined at this layer so that specs and ops can
    recognise datasets (window elements, flat_map results) without importing
    ``nbdata.dataset``, which sits above them."""

    __slots__ = ()


def is_dataset(x: Any) -> bool:
    return isinstance(x, DatasetBase)


def is_dataset_array(x: Any) -> bool:
    """Whether ``x`` is a batch of datasets: an object array of datasets."""
    return (isinstance(x, np.ndarray) and x.dtype == object and x.size > 0
            and all(is_dataset(v) for v in x.flat))


def dataset_array(values: list) -> np.ndarray:
    """An object array of datasets (nested lists give its dims)."""
    def shape_of(v):
        return (len(v),) + shape_of(v[0]) if isinstance(v, list) and v else ()
    shape = shape_of(values)
    out = np.empty(shape, dtype=object)
    for index in np.ndindex(*shape):
        item = values
        for k in index:
            item = item[k]
        if not is_dataset(item):
            raise TypeError(f"expected a dataset, got {type(item).__name__}")
        out[index] = item
    return out


def spec_of_value(value: Any):
    """The spec describing one canonical leaf value.

    >>> spec_of_value(np.zeros((2, 3), np.float32))
    TensorSpec(shape=(2, 3), dtype=float32, name=None)
    >>> spec_of_value(b"abc")
    TensorSpec(shape=(), dtype=string, name=None)
    """
    if is_dataset(value):
        return DatasetSpec(value.element_spec)
    if is_dataset_array(value):
        specs = [v.element_spec for v in value.flat]
        merged = specs[0]
        for other in specs[1:]:
            merged = merge_specs(merged, other)
        return DatasetSpec(merged, value.shape)
    if isinstance(value, bytes):
        return TensorSpec((), string)
    if isinstance(value, SparseTensor):
        return SparseTensorSpec(value.shape, value.dtype)
    if isinstance(value, np.ndarray):
        return TensorSpec(value.shape, as_dtype(value.dtype))
    if isinstance(value, np.generic):
        return TensorSpec((), as_dtype(value.dtype))
    raise TypeError(f"not an element leaf: {type(value).__name__}")


# ------------------------------------------------------------ value handling

def native_order(a: np.ndarray) -> np.ndarray:
    """``a`` in native byte order: big-endian data (a file's bytes) converted to the
    native dtype a spec says (kernels take native arrays only)."""
    return a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))


def to_leaf(value: Any, what: str = "value") -> Any:
    """Convert one user leaf to its canonical form.

    Python scalars become NumPy scalars (int → int64, float → float64),
    ``str`` becomes UTF-8 ``bytes``, lists become arrays, string arrays become
    object arrays of ``bytes``, 0-d arrays become NumPy scalars.

    >>> to_leaf(3), to_leaf("é"), to_leaf([1.5, 2])
    (np.int64(3), b'\\xc3\\xa9', array([1.5, 2. ]))
    """
    if isinstance(value, np.ndarray):
        if is_dataset_array(value):
            return value
        if value.dtype.kind in "OSU":
            return _string_array(value) if value.ndim else _string_scalar(value[()])
        value = native_order(value)
        return value[()] if value.ndim == 0 else value
    if isinstance(value, np.generic):
        if value.dtype.kind in "SU":
            return _string_scalar(value)
        if value.dtype.kind == "O":
            return to_leaf(value.item(), what)
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bool):
        return np.bool_(value)
    if isinstance(value, int):
        try:
            return np.int64(value)
        except OverflowError:
            raise ValueError(f"{what}: integer {value} does not fit in int64") from None
    if isinstance(value, float):
        return np.float64(value)
    if isinstance(value, complex):
        return np.complex128(value)
    if isinstance(value, range):   # TF converts a range to a tensor of its values
        return np.arange(value.start, value.stop, value.step, dtype=np.int64)
    if isinstance(value, list):
        if value and any(is_dataset(v) for v in flatten_list(value)):
            return dataset_array(value)
        if any(isinstance(v, (str, bytes)) for v in flatten_list(value)):
            return _string_array(np.array(value, dtype=object))
        try:
            arr = np.asarray(value)
        except ValueError as e:
            raise InvalidArgumentError(f"{what}: cannot convert the list to a tensor "
                                       f"(ragged or mixed values?): {e}") from None
        return to_leaf(arr, what)
    if is_dataset(value):
        return value
    if isinstance(value, SparseTensor):
        return value
    if hasattr(value, "__array__"):
        return to_leaf(np.asarray(value), what)
    raise TypeError(f"{what}: cannot convert {type(value).__name__} {value!r:.80} to a tensor")


def flatten_list(x):
    for v in x:
        if isinstance(v, list):
            yield from flatten_list(v)
        else:
            yield v


def _string_scalar(v) -> bytes:
    if type(v) is bytes:
        return v
    if isinstance(v, bytes):  # np.bytes_ and other subclasses become plain bytes
        return bytes(v)
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, np.bytes_):
        return bytes(v)
    raise TypeError(f"expected bytes or str, got {type(v).__name__}")


def _string_array(arr: np.ndarray) -> np.ndarray:
    out = np.empty(arr.shape, dtype=object)
    flat_in, flat_out = arr.reshape(-1), out.reshape(-1)
    for i in range(flat_in.size):
        flat_out[i] = _string_scalar(flat_in[i])
    return out


def to_element(value: Any, what: str = "value") -> Any:
    """Canonicalise a whole user value (structures of leaves)."""
    return map_nest(lambda leaf: to_leaf(leaf, what), value)


def cast_leaf(value: Any, spec, what: str) -> Any:
    """Check a canonical leaf against ``spec``; cast safely or raise InvalidArgumentError."""
    if isinstance(spec, DatasetSpec):
        if spec.shape and is_dataset_array(value):   # a batch of datasets
            if not shapes_compatible(spec.shape, value.shape):
                raise InvalidArgumentError(
                    f"{what}: expected datasets of shape {list(spec.shape)}, got "
                    f"{list(value.shape)}")
            for v in value.flat:
                cast_leaf(v, DatasetSpec(spec.element_spec), what)
            return value
        if not is_dataset(value):
            raise InvalidArgumentError(f"{what}: expected a dataset, got {type(value).__name__}")
        inner = value.element_spec
        if not same_structure(inner, spec.element_spec) or not all(
                type(a) is type(b) and a.is_compatible_with(TensorSpec(None, b.dtype) if
                                                            isinstance(b, TensorSpec) else b)
                for a, b in zip(flatten(spec.element_spec), flatten(inner))):
            raise InvalidArgumentError(
                f"{what}: returned a dataset with element spec {inner}, but it returned "
                f"{spec.element_spec} when traced; every dataset must have the same structure "
                f"and dtypes")
        return value
    if isinstance(spec, SparseTensorSpec) or isinstance(value, SparseTensor):
        if not (isinstance(spec, SparseTensorSpec) and isinstance(value, SparseTensor)
                and spec.is_compatible_with(value)):
            raise InvalidArgumentError(f"{what}: expected {spec}, got {type(value).__name__} "
                                       f"{getattr(value, 'shape', '')}")
        return value
    if spec.dtype is string:
        if isinstance(value, bytes):
            shape = ()
        elif isinstance(value, np.ndarray) and value.dtype == _OBJECT:
            shape = value.shape
        else:
            raise InvalidArgumentError(
                f"{what}: expected a string value, got {type(value).__name__} of dtype "
                f"{getattr(value, 'dtype', '?')}")
    else:
        if isinstance(value, bytes) or (isinstance(value, np.ndarray) and value.dtype == _OBJECT):
            raise InvalidArgumentError(f"{what}: expected dtype {dtype_name(spec.dtype)}, got a string value")
        if is_dataset(value):
            raise InvalidArgumentError(f"{what}: expected a tensor of dtype {dtype_name(spec.dtype)}, got a dataset")
        shape = np.shape(value)
        if value.dtype != spec.dtype:
            if not np.can_cast(value.dtype, spec.dtype, "same_kind"):
                raise InvalidArgumentError(
                    f"{what}: expected dtype {dtype_name(spec.dtype)}, got {value.dtype.name}")
            value = np.asarray(value).astype(spec.dtype)
            value = value[()] if value.ndim == 0 else value
    if not shapes_compatible(spec.shape, shape):
        raise InvalidArgumentError(
            f"{what}: expected shape {spec.shape}, got shape {tuple(shape)}; if the shape "
            f"varies between elements, make the spec say so (None dims) and batch them with "
            f"padded_batch")
    return value


def dummy_leaf(spec, variant: int, make_dataset: Callable | None = None):
    """A synthetic value fitting ``spec``, used to trace user functions.

    ``variant`` picks different unknown-dim sizes and values so that a dim that
    depends on data shows up as differing between probes.
    """
    if isinstance(spec, DatasetSpec):
        if make_dataset is None:
            raise TypeError("cannot build a sample dataset")
        one = make_dataset(pack_as(spec.element_spec,
                                   [dummy_leaf(s, variant, make_dataset) for s in flatten(spec.element_spec)]))
        if not spec.shape:
            return one
        out = np.empty(tuple((8, 9, 3)[variant % 3] if d is None else d for d in spec.shape), object)
        for index in np.ndindex(*out.shape):
            out[index] = one
        return out
    unknown = (8, 9, 3)[variant % 3]
    if spec.shape is None and not isinstance(spec, SparseTensorSpec):
        # Unknown rank: probes of different ranks, so that what a function returns
        # from it has an unknown rank too (TF's shape inference), not a made-up one.
        shape = ((8,), (), (3, 2))[variant % 3]
    else:
        shape = (unknown,) if spec.shape is None else tuple(unknown if d is None else d
                                                             for d in spec.shape)
    if isinstance(spec, SparseTensorSpec):
        values = dummy_leaf(TensorSpec((1,), spec.dtype), variant)
        return SparseTensor(np.zeros((1, len(shape)), np.int64), values, shape)
    if spec.dtype is string:
        s = (b"", b"a", b"bc")[variant % 3]
        if shape == ():
            return s
        arr = np.empty(shape, dtype=object)
        arr.fill(s)
        return arr
    fill = (0, 1, 2)[variant % 3]
    arr = np.full(shape, fill, dtype=spec.dtype)
    return arr[()] if arr.ndim == 0 else arr


def legacy_types(spec: Any) -> Any:
    """TF1's ``output_types`` of an element spec: each leaf's dtype (a sparse leaf's
    value dtype; a dataset leaf's own spec), as ``tf.compat.v1.data.get_output_types``.

    >>> legacy_types((TensorSpec((), np.int32), SparseTensorSpec((None,), np.float32)))
    (dtype('int32'), dtype('float32'))
    """
    return map_structure(lambda s: s if isinstance(s, DatasetSpec) else s.dtype, spec)


def legacy_shapes(spec: Any) -> Any:
    """TF1's ``output_shapes`` of an element spec: each leaf's :class:`TensorShape` (a
    sparse leaf's dense shape; a dataset leaf's own spec), as
    ``tf.compat.v1.data.get_output_shapes``.

    >>> legacy_shapes((TensorSpec((None, 3), np.int32), SparseTensorSpec((None,), np.float32)))
    (TensorShape([None, 3]), TensorShape([None]))
    """
    return map_structure(lambda s: s if isinstance(s, DatasetSpec) else TensorShape(s.shape),
                         spec)


def legacy_classes(spec: Any) -> Any:
    """TF1's ``output_classes`` of an element spec: ``np.ndarray`` for a dense leaf,
    :class:`SparseTensor` for a sparse one, a dataset leaf's own spec (as
    ``tf.compat.v1.data.get_output_classes``)."""
    return map_structure(lambda s: np.ndarray if isinstance(s, TensorSpec) else
                         SparseTensor if isinstance(s, SparseTensorSpec) else s, spec)
