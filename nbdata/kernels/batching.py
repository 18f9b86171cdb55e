"""Batching rows of columns: stacking one component of several rows, TF's batching of
sparse tensors, and whole batches cut from chunk columns (views where the rows are
contiguous)."""

from __future__ import annotations

import numpy as np

from nbdata.chunks import RowList, StringColumn
from nbdata.errors import InvalidArgumentError
from nbdata.kernels.compact import compact
from nbdata.spec import SparseTensor, is_dataset, is_dataset_array


def stack_leaves(values: list, component: int, op: str) -> np.ndarray:
    """Stack one component of several elements; shapes must agree (sparse tensors of
    one rank batch into a sparse tensor whose dense shape is the largest of each dim)."""
    first = values[0]
    if isinstance(first, SparseTensor):
        return batch_sparse(values, component, op)
    if is_dataset(first) or is_dataset_array(first):   # a batch of datasets: an object array
        shape0 = np.shape(first) if isinstance(first, np.ndarray) else ()
        for j, v in enumerate(values):
            if (np.shape(v) if isinstance(v, np.ndarray) else ()) != shape0:
                raise_shape_mismatch(op, component, shape0, j, np.shape(v))
        return object_rows(values)
    strings = isinstance(first, bytes) or (isinstance(first, np.ndarray) and first.dtype == object)
    shape_of = _string_shape if strings else np.shape
    shape0 = shape_of(first)
    for j, v in enumerate(values):
        if shape_of(v) != shape0:
            raise_shape_mismatch(op, component, shape0, j, shape_of(v))
    return object_rows(values) if strings else np.stack(values)


def _string_shape(value) -> tuple:
    return np.shape(value) if isinstance(value, np.ndarray) else ()


def object_rows(values: list) -> np.ndarray:
    """An object array of rows ``values`` (strings, or arrays of the first one's shape)."""
    shape = np.shape(values[0]) if values else ()
    out = np.empty((len(values),) + shape, dtype=object)
    for j, v in enumerate(values):
        out[j] = v
    return out


def batch_sparse(values: list, component: int, op: str) -> SparseTensor:
    """``tf.sparse`` batching: row ``j``'s indices get ``j`` in front."""
    rank = len(values[0].dense_shape)
    for j, v in enumerate(values):
        if not isinstance(v, SparseTensor) or len(v.dense_shape) != rank:
            raise InvalidArgumentError(
                f"{op}: cannot batch component {component}: element {j} is not a sparse tensor "
                f"of rank {rank}", op)
    counts = [len(v.values) for v in values]
    rows = np.repeat(np.arange(len(values), dtype=np.int64), counts)
    indices = np.concatenate([rows[:, None], np.concatenate([v.indices for v in values])], axis=1) \
        if rows.size else np.zeros((0, rank + 1), np.int64)
    dense = np.max(np.stack([v.dense_shape for v in values]), axis=0) if rank else np.zeros(0, np.int64)
    vals = np.concatenate([v.values for v in values]) if values else values[0].values
    return SparseTensor(indices, vals, np.concatenate([[len(values)], dense]).astype(np.int64))


def raise_shape_mismatch(op, component, shape0, j, shape):
    raise InvalidArgumentError(
        f"{op}: Cannot batch tensors with different shapes in component {component}. First "
        f"element had shape {list(shape0)} and element {j} had shape {list(shape)}. Use "
        f"padded_batch to pad them to a common shape", op)


def batch_columns(columns: list, count: int, size: int, leaf=None, copy: bool = True) -> list:
    """``count`` batches of ``size`` rows from columns of ``count * size`` rows: dense
    columns are reshaped (copied, by a parallel kernel, unless ``copy`` is False, so
    that batches never alias the user's arrays), string columns become object arrays,
    columns of ragged rows are stacked batch by batch with ``leaf(values, component)``."""
    out = []
    for i, c in enumerate(columns):
        if isinstance(c, StringColumn):
            c = c.to_objects()
        if isinstance(c, np.ndarray):
            if copy:
                c = compact(c, np.arange(len(c), dtype=np.int64))
            out.append(c.reshape((count, size) + c.shape[1:]))
            continue
        values = list(c)
        batches = [leaf(values[j * size:(j + 1) * size], i) for j in range(count)]
        if batches and isinstance(batches[0], SparseTensor):
            out.append(RowList(batches))
            continue
        shapes = {np.shape(b) for b in batches}
        out.append(np.stack(batches) if len(shapes) == 1 else RowList(batches))
    return out


__all__ = ["batch_columns", "batch_sparse", "object_rows", "raise_shape_mismatch", "stack_leaves"]
