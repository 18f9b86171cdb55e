"""``padded_batch``: batch elements of different shapes, padding each to a common shape."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from nbdata.errors import DataLossError, InvalidArgumentError
from nbdata.ops.batch import BatchChunks, batch_cardinality
from nbdata.ops.fusion import Terminal, check_structure
from nbdata.ops.node import UnaryNode, arg_field
from nbdata.spec import TensorSpec, flatten, pack_as, string


def default_padding(spec: TensorSpec):
    return b"" if spec.dtype is string else spec.dtype.type(0)


def padded_spec(spec, padded_shapes, batch_dim):
    return pack_as(spec, [TensorSpec((batch_dim,) + tuple(p), s.dtype)
                          for s, p in zip(flatten(spec), padded_shapes)])


def _pad_packed(values, padded_shape: tuple, pad_value, component: int, op: str):
    """Packed 1-D rows (``PackedRows``: one buffer, row ``j`` its values from
    ``offsets[j]``) padded with one masked assignment, no Python per row; None for
    other columns."""
    packed = getattr(values, "packed", None)
    if packed is None or len(padded_shape) != 1 or packed[2].shape[1] != 1:
        return None
    data, offsets, shapes = packed
    lengths = shapes[:, 0]
    biggest = int(lengths.max()) if len(lengths) else 0
    want = padded_shape[0]
    if want is not None and biggest > want:
        j = int(np.argmax(lengths > want))
        raise DataLossError(
            f"{op}: Attempted to pad to a smaller size than the input element: component "
            f"{component} of element {j} has shape {[int(lengths[j])]}, larger than padded "
            f"shape {list(padded_shape)} in dimension 0", op)
    width = biggest if want is None else want
    out = np.full((len(lengths), width), pad_value, dtype=data.dtype)
    out[np.arange(width) < lengths[:, None]] = data[offsets[0]:offsets[-1]]
    return out


def pad_component(values: list, padded_shape: tuple, pad_value, component: int, op: str) -> np.ndarray:
    """Stack ``values`` into one array of ``padded_shape`` (None dims → batch maximum)."""
    fast = _pad_packed(values, padded_shape, pad_value, component, op)
    if fast is not None:
        return fast
    is_string = isinstance(values[0], bytes) or (isinstance(values[0], np.ndarray)
                                                 and values[0].dtype == object)
    shapes = [np.shape(v) if isinstance(v, np.ndarray) else () for v in values]
    rank = len(padded_shape)
    for j, s in enumerate(shapes):
        if len(s) != rank:
            raise InvalidArgumentError(
                f"{op}: component {component} of element {j} has rank {len(s)} but its padded "
                f"shape {list(padded_shape)} has rank {rank}", op)
    target = []
    for d in range(rank):
        biggest = max((s[d] for s in shapes), default=0)
        want = padded_shape[d]
        if want is None:
            target.append(biggest)
            continue
        if biggest > want:
            j = next(k for k, s in enumerate(shapes) if s[d] > want)
            raise DataLossError(   # TF's class for this
                f"{op}: Attempted to pad to a smaller size than the input element: component "
                f"{component} of element {j} has shape {list(shapes[j])}, larger than padded shape "
                f"{list(padded_shape)} in dimension {d}", op)
        target.append(want)
    if is_string:
        out = np.empty((len(values),) + tuple(target), dtype=object)
        out.fill(pad_value)
    else:
        out = np.full((len(values),) + tuple(target), pad_value, dtype=np.asarray(values[0]).dtype)
    for j, v in enumerate(values):
        out[(j,) + tuple(slice(0, n) for n in shapes[j])] = v
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class PaddedBatch(UnaryNode):
    """``padded_shapes`` and ``padding_values`` are flat tuples, one entry per component."""

    batch_size: Any = arg_field()
    padded_shapes: tuple = arg_field()
    padding_values: tuple = arg_field()
    drop_remainder: bool = arg_field()
    op = "padded_batch"
    fusion_role = "terminal"

    @property
    def spec(self):
        dim = self.batch_size if self.drop_remainder and isinstance(self.batch_size, int) else None
        return padded_spec(self.input.spec, self.padded_shapes, dim)

    def cardinality(self) -> int:
        return batch_cardinality(self.input.cardinality(), self.batch_size, self.drop_remainder)

    def combine(self, elements: list):
        columns = list(zip(*(flatten(e) for e in elements)))
        leaves = [pad_component(list(col), self.padded_shapes[k], self.padding_values[k], k, self.op)
                  for k, col in enumerate(columns)]
        return pack_as(elements[0], leaves)

    def open_chunks(self, ctx, state=None):
        return BatchChunks(self, ctx, state, self.pad_leaf, pads=True)

    def pad_leaf(self, values: list, component: int):
        """One component of one batch, padded to its padded shape."""
        return pad_component(values, self.padded_shapes[component], self.padding_values[component],
                             component, self.label)

    def fusion_terminal(self, planner, structure) -> Terminal:
        check_structure(structure, f"{self.op} input")
        return PaddedTerminal(self, self.batch_size, self.drop_remainder)


@dataclasses.dataclass
class PaddedTerminal(Terminal):
    """Batches of a fused chain, each component padded to its padded shape."""

    pads = True

    def assemble(self, columns: list) -> list:
        node = self.node
        return [pad_component(list(c), node.padded_shapes[i], node.padding_values[i], i, node.label)
                if c.shape[1:] != tuple(node.padded_shapes[i]) else c
                for i, c in enumerate(columns)]
