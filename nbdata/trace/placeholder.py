"""``nd.placeholder``: a value bound when an initializable iterator is initialized."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from nbdata.spec import TensorSpec, cast_leaf, to_leaf
from nbdata.trace.graph import Graph, Symbolic, get_default_graph

_ids = itertools.count()


class Placeholder(Symbolic):
    """Stands for a tensor fed through ``it.initialize(feed_dict={ph: value})``.

    Usable as source data (``from_tensors``, ``from_tensor_slices``) and as the
    scalar arguments of ``range``, ``take``, ``skip``, ``repeat``, ``batch`` and
    ``shuffle``; in a TF1 graph it is a tensor fed through
    ``sess.run(..., feed_dict={ph: value})``, and NumPy operations on it record graph
    ops.

    >>> import numpy as np, nbdata as nd
    >>> n = nd.placeholder(np.int64, shape=[])
    >>> it = nd.Dataset.range(n).make_initializable_iterator()
    >>> it.initialize(feed_dict={n: 3})
    >>> [int(it.get_next()) for _ in range(3)]
    [0, 1, 2]
    """

    def __init__(self, dtype, shape=None, name: str | None = None):
        self.spec = TensorSpec(shape, dtype)
        self.name = name or f"Placeholder_{next(_ids)}"

    @property
    def dtype(self):
        """The placeholder's dtype.

        >>> import numpy as np
        >>> Placeholder(np.float32, [None]).dtype
        dtype('float32')
        """
        return self.spec.dtype

    @property
    def shape(self):
        """The placeholder's shape (None for unknown dims).

        >>> import numpy as np
        >>> Placeholder(np.float32, [None, 2]).shape
        (None, 2)
        """
        return self.spec.shape

    def _symbol(self, graph: Graph | None = None):
        """The tensor standing for this placeholder in ``graph`` (default: the default
        graph)."""
        return (graph or get_default_graph()).placeholder_tensor(self)

    def __repr__(self) -> str:
        return f"<nd.placeholder {self.name!r} shape={self.spec.shape} dtype={self.spec.dtype!r}>"

    def bind(self, value: Any) -> Any:
        """Check and convert a fed value against this placeholder's spec.

        >>> import numpy as np
        >>> Placeholder(np.float32, [2]).bind([1, 2])
        array([1., 2.], dtype=float32)
        """
        leaf = to_leaf(value, f"feed for {self.name}")
        if self.spec.dtype is not None and not isinstance(leaf, bytes) and not (
                isinstance(leaf, np.ndarray) and leaf.dtype == object):
            if np.asarray(leaf).dtype != self.spec.dtype and np.can_cast(
                    np.asarray(leaf).dtype, self.spec.dtype, "same_kind"):
                arr = np.asarray(leaf).astype(self.spec.dtype)
                leaf = arr[()] if arr.ndim == 0 else arr
        leaf = cast_leaf(leaf, self.spec, f"feed for placeholder {self.name}")
        if isinstance(leaf, np.ndarray) and isinstance(value, np.ndarray) and \
                np.may_share_memory(leaf, value):
            leaf = leaf.copy()   # as TF1 takes a feed: the user may refill their array
        return leaf


def placeholder(dtype, shape=None, name: str | None = None) -> Placeholder:
    """Create a :class:`Placeholder` (the TF1 ``tf.placeholder``).

    >>> import numpy as np, nbdata as nd
    >>> x = nd.placeholder(np.float64, shape=[None])
    >>> it = nd.Dataset.from_tensor_slices(x).map(lambda v: v * 2).make_initializable_iterator()
    >>> it.initialize(feed_dict={x: [1.5, 2.5]})
    >>> [float(v) for v in it]
    [3.0, 5.0]
    """
    return Placeholder(dtype, shape, name)
