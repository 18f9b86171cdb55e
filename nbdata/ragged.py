"""``nd.RaggedTensor``: a batch whose rows differ in length (what ``ragged_batch`` makes),
as tf.RaggedTensor stores one: ``flat_values`` and one int64 ``row_splits`` vector per
ragged dimension (``nested_row_splits``, outermost first); and its spec
:class:`RaggedTensorSpec`."""

from __future__ import annotations

import numpy as np

from nbdata.spec import SparseTensor


class RaggedTensor:
    """Rows of varying length: row ``i`` of the outermost dimension is
    ``values[row_splits[i]:row_splits[i + 1]]`` (``values`` itself ragged when there are
    more splits).

    >>> rt = RaggedTensor.from_row_splits(np.array([1, 2, 3]), np.array([0, 1, 3]))
    >>> rt.to_list(), rt.shape, rt.ragged_rank
    ([[1], [2, 3]], (2, None), 1)
    """

    __slots__ = ("flat_values", "nested_row_splits")

    def __init__(self, flat_values, nested_row_splits):
        self.flat_values = np.asarray(flat_values) if not isinstance(flat_values, np.ndarray) \
            else flat_values
        self.nested_row_splits = tuple(np.asarray(s, np.int64) for s in nested_row_splits)

    @classmethod
    def from_row_splits(cls, values, row_splits) -> "RaggedTensor":
        if isinstance(values, RaggedTensor):
            return cls(values.flat_values, (row_splits,) + values.nested_row_splits)
        return cls(values, (row_splits,))

    @classmethod
    def from_row_lengths(cls, values, row_lengths) -> "RaggedTensor":
        """Rows of ``row_lengths[i]`` consecutive values each.

        >>> RaggedTensor.from_row_lengths(np.array([1, 2, 3]), [2, 0, 1]).to_list()
        [[1, 2], [], [3]]
        """
        lengths = np.asarray(row_lengths, np.int64).reshape(-1)
        if (lengths < 0).any():
            raise ValueError(f"RaggedTensor.from_row_lengths: negative row length in {lengths}")
        splits = np.concatenate([np.zeros(1, np.int64), np.cumsum(lengths)])
        have = values.nrows() if isinstance(values, RaggedTensor) else len(values)
        if splits[-1] != have:
            raise ValueError(f"RaggedTensor.from_row_lengths: the row lengths add up to "
                             f"{splits[-1]}, but there are {have} values")
        return cls.from_row_splits(values, splits)

    def to_sparse(self) -> SparseTensor:
        """The :class:`nd.SparseTensor` of the same values: each value at (row, position
        in its row, ...), the dense shape the longest row at each ragged dimension.

        >>> st = RaggedTensor.from_row_lengths(np.array([7, 8, 9]), [2, 0, 1]).to_sparse()
        >>> st.indices.tolist(), st.values.tolist(), st.dense_shape.tolist()
        ([[0, 0], [0, 1], [2, 0]], [7, 8, 9], [3, 2])
        """
        flat = self.flat_values
        pos = np.arange(len(flat), dtype=np.int64)
        columns, widths = [], []
        for splits in reversed(self.nested_row_splits):   # innermost ragged dimension first
            row = np.searchsorted(splits, pos, side="right") - 1
            columns.append(pos - splits[row])
            widths.append(int(np.diff(splits).max(initial=0)))
            pos = row
        columns.append(pos)
        outer = [int(self.nrows())] + widths[::-1]
        index = np.stack(columns[::-1], axis=1) if len(flat) else np.zeros((0, len(columns)), np.int64)
        inner = tuple(flat.shape[1:])
        if inner:   # uniform inner dimensions: one index per cell
            cells = np.array(list(np.ndindex(*inner)), np.int64).reshape(-1, len(inner))
            index = np.concatenate([np.repeat(index, len(cells), axis=0),
                                    np.tile(cells, (len(flat), 1))], axis=1)
            flat = flat.reshape(-1)
        return SparseTensor(index, flat, outer + list(inner))

    @property
    def row_splits(self) -> np.ndarray:
        return self.nested_row_splits[0]

    @property
    def values(self):
        if len(self.nested_row_splits) == 1:
            return self.flat_values
        return RaggedTensor(self.flat_values, self.nested_row_splits[1:])

    @property
    def ragged_rank(self) -> int:
        return len(self.nested_row_splits)

    @property
    def dtype(self):
        return self.flat_values.dtype

    @property
    def shape(self) -> tuple:
        return (self.nrows(),) + (None,) * self.ragged_rank + tuple(self.flat_values.shape[1:])

    def nrows(self) -> int:
        return len(self.row_splits) - 1

    def row_lengths(self) -> np.ndarray:
        return np.diff(self.row_splits)

    def to_list(self) -> list:
        def rows(level: int, lo: int, hi: int) -> list:
            if level == len(self.nested_row_splits):
                return self.flat_values[lo:hi].tolist()
            splits = self.nested_row_splits[level]
            return [rows(level + 1, int(splits[i]), int(splits[i + 1])) for i in range(lo, hi)]
        return rows(0, 0, self.nrows())

    def to_tensor(self, default_value=0) -> np.ndarray:
        """The dense tensor, short rows padded with ``default_value``."""
        data = self.to_list()

        def dims(x, level):
            if level == self.ragged_rank + 1 or not isinstance(x, list):
                return []
            inner = [dims(v, level + 1) for v in x]
            widths = [len(x)] + [max((d[k] for d in inner if len(d) > k), default=0)
                                 for k in range(max((len(d) for d in inner), default=0))]
            return widths
        shape = tuple(dims(data, 0)) + tuple(self.flat_values.shape[1:])
        out = np.full(shape, default_value, dtype=self.dtype)

        def fill(x, index):
            if len(index) == self.ragged_rank + 1 or not isinstance(x, list):
                out[index] = x
                return
            for i, v in enumerate(x):
                fill(v, index + (i,))
        fill(data, ())
        return out

    def __repr__(self) -> str:
        return f"<nd.RaggedTensor {self.to_list()!r:.200}>"

    def __eq__(self, other):
        return isinstance(other, RaggedTensor) and self.to_list() == other.to_list()

    __hash__ = None


class RaggedTensorSpec:
    """The spec of a :class:`RaggedTensor` leaf: ``shape`` (None where rows vary),
    ``dtype``, ``ragged_rank`` and ``row_splits_dtype``."""

    def __init__(self, shape=None, dtype=np.float32, ragged_rank=None, row_splits_dtype=np.int64):
        self.shape = None if shape is None else tuple(None if d is None else int(d) for d in shape)
        self.dtype = np.dtype(dtype) if not isinstance(dtype, np.dtype) else dtype
        if ragged_rank is None:
            ragged_rank = 1 if self.shape is None else len(self.shape) - 1
        self.ragged_rank = int(ragged_rank)
        self.row_splits_dtype = np.dtype(row_splits_dtype)

    def __eq__(self, other):
        return (isinstance(other, RaggedTensorSpec) and self.shape == other.shape
                and self.dtype == other.dtype and self.ragged_rank == other.ragged_rank
                and self.row_splits_dtype == other.row_splits_dtype)

    def __hash__(self):
        return hash((self.shape, str(self.dtype), self.ragged_rank))

    def is_compatible_with(self, other) -> bool:
        if not isinstance(other, RaggedTensorSpec) or other.dtype != self.dtype:
            return False
        if self.shape is None or other.shape is None:
            return True
        return len(self.shape) == len(other.shape) and all(
            a is None or b is None or a == b for a, b in zip(self.shape, other.shape))

    def most_specific_compatible(self, other) -> "RaggedTensorSpec":
        if self.shape is None or other.shape is None or len(self.shape) != len(other.shape):
            shape = None
        else:
            shape = tuple(a if a == b else None for a, b in zip(self.shape, other.shape))
        return RaggedTensorSpec(shape, self.dtype, self.ragged_rank, self.row_splits_dtype)

    def __repr__(self) -> str:
        return (f"RaggedTensorSpec(TensorShape({list(self.shape) if self.shape is not None else None}), "
                f"{self.dtype.name}, {self.ragged_rank}, {self.row_splits_dtype.name})")


def ragged_batch_of(arrays: list, ragged_rank: int, row_splits_dtype=np.int64) -> RaggedTensor:
    """The batch of ``arrays`` (one element each, ranks equal) with the dims up to
    ``ragged_rank`` (the element's last unknown dim) ragged: tf.data's ``ragged_batch``.

    >>> ragged_batch_of([np.array([1]), np.array([2, 3])], 0).to_list()
    [[1], [2, 3]]
    """
    arrays = [np.asarray(a) for a in arrays]
    levels = []
    lengths = [a.shape[0] for a in arrays]
    levels.append(np.concatenate([[0], np.cumsum(lengths)]).astype(row_splits_dtype))
    for axis in range(1, ragged_rank + 1):
        lengths = [np.full(int(np.prod(a.shape[:axis])), a.shape[axis], np.int64) for a in arrays]
        flat = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
        levels.append(np.concatenate([[0], np.cumsum(flat)]).astype(row_splits_dtype))
    inner = arrays[0].shape[ragged_rank + 1:] if arrays else ()
    values = (np.concatenate([a.reshape((-1,) + a.shape[ragged_rank + 1:]) for a in arrays])
              if arrays else np.zeros((0,) + inner))
    return RaggedTensor(values, levels)
