"""Sparse tensors: what ``nd.io.VarLenFeature`` decodes to, as ``tf.SparseTensor``.

A :class:`SparseTensor` holds ``indices`` (int64, ``[N, rank]``, row-major order),
``values`` (``[N]``, int64, float32 or an object array of ``bytes``) and
``dense_shape`` (int64, ``[rank]``). :class:`SparseTensorSpec` describes one in an
``element_spec``; its shape has ``None`` where the dense size varies.

>>> import numpy as np
>>> st = SparseTensor(np.array([[0], [2]]), np.array([5, 7]), np.array([4]))
>>> st.to_dense().tolist()
[5, 0, 7, 0]
>>> SparseTensorSpec((None,), np.int64)
SparseTensorSpec(shape=(None,), dtype=int64)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nbdata.spec import as_dtype, dtype_name, string


class SparseTensor:
    """A sparse tensor in COO form (``tf.SparseTensor``'s fields and order).

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
