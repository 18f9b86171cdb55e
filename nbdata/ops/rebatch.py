"""``rebatch`` with several batch sizes: the input's rows (its batches unbatched) put
into batches whose sizes cycle through ``batch_sizes`` (tf.data's ``rebatch`` with a
list). One size is ``unbatch().batch(size)``, which the API builds (fused).

Not fused: rows are gathered into batches one at a time in Python.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from nbdata.ops.node import INFINITE, UNKNOWN, arg_field
from nbdata.ops.stateful import ElementOp
from nbdata.spec import TensorSpec, batched_spec, flatten, pack_as, string


def stack_elements(elements: list, spec):
    """One batch element of ``elements`` (each of ``spec``)."""
    out = []
    for k, s in enumerate(flatten(spec)):
        values = [flatten(e)[k] for e in elements]
        if s.dtype is string:
            arr = np.empty((len(values),) + np.shape(values[0]) if values else (0,), dtype=object)
            for j, v in enumerate(values):
                arr[j] = v
            out.append(arr)
        else:
            out.append(np.stack([np.asarray(v, s.dtype) for v in values]) if values
                       else np.zeros((0,) + tuple(d or 0 for d in (s.shape or ())), s.dtype))
    return pack_as(spec, out)


@dataclasses.dataclass(frozen=True, eq=False)
class Rebatch(ElementOp):
    """Over the unbatched rows (its input is an ``unbatch``)."""

    batch_sizes: tuple = arg_field()
    drop_remainder: bool = arg_field(False)
    static_dim: object = None     # the batch dim when every batch is known to be full
    op = "rebatch"

    @property
    def spec(self):
        return batched_spec(self.input.spec, self.static_dim, "rebatch")

    def cardinality(self) -> int:
        n = self.input.cardinality()
        return INFINITE if n == INFINITE else UNKNOWN

    def start(self, ctx):
        return {"rows": [], "k": 0}

    def step(self, ctx, state, element):
        # A size of 0 is an empty batch, made without reading a row (tf.data's rule).
        state["rows"].append(element)
        out = []
        while True:
            size = self.batch_sizes[state["k"] % len(self.batch_sizes)]
            if len(state["rows"]) < size:
                break
            rows, state["rows"] = state["rows"][:size], state["rows"][size:]
            state["k"] = (state["k"] + 1) % len(self.batch_sizes)
            out.append(stack_elements(rows, self.input.spec))
        return out, state, False

    def finish(self, ctx, state):
        rows, state["rows"] = state["rows"], []
        if rows and not self.drop_remainder:
            return [stack_elements(rows, self.input.spec)]
        return []


@dataclasses.dataclass(frozen=True, eq=False)
class BuildBatch(ElementOp):
    """Batches of ``batch_size`` elements made by ``build(elements)`` (of spec
    ``out_spec``): ``sparse_batch``'s sparse tensors."""

    batch_size: int = arg_field(1)
    drop_remainder: bool = arg_field(False)
    build: object = None
    out_spec: object = None
    op = "sparse_batch"

    @property
    def spec(self):
        return self.out_spec

    def cardinality(self) -> int:
        n = self.input.cardinality()
        if n < 0:
            return n
        return n // self.batch_size if self.drop_remainder else -(-n // self.batch_size)

    def start(self, ctx):
        return []

    def step(self, ctx, state, element):
        state.append(element)
        if len(state) >= self.batch_size:
            return [self.build(state)], [], False
        return [], state, False

    def finish(self, ctx, state):
        if state and not self.drop_remainder:
            return [self.build(state)]
        return []


@dataclasses.dataclass(frozen=True, eq=False)
class RaggedBatch(BuildBatch):
    """``ragged_batch``: batches whose components with unknown dims are RaggedTensors.

    When every component is numeric, of a known shape or 1-D of varying length, batches
    are made a chunk at a time (``BatchChunks``): a ragged component's rows held packed
    (Arrow list columns) become the batch's values and row splits as they are, with no
    Python per row."""

    op = "ragged_batch"

    def open_chunks(self, ctx, state=None):
        leaves = flatten(self.input.spec)
        if not all(isinstance(s, TensorSpec) and s.dtype is not string and s.shape is not None
                   and (s.shape == (None,) or None not in s.shape) for s in leaves):
            return super().open_chunks(ctx, state)
        from nbdata.ops.batch import BatchChunks
        return BatchChunks(self, ctx, state, self._leaf, pads=True)

    def _leaf(self, values, component: int):
        """One component of one batch: a RaggedTensor of 1-D rows, a stack of others."""
        spec = flatten(self.input.spec)[component]
        if spec.shape != (None,):
            return np.stack([np.asarray(v, spec.dtype) for v in values])
        from nbdata.ragged import RaggedTensor, ragged_batch_of
        splits_dtype = flatten(self.out_spec)[component].row_splits_dtype
        packed = getattr(values, "packed", None)
        if packed is None or packed[2].shape[1] != 1:
            return ragged_batch_of(list(values), 0, splits_dtype)
        data, offsets, _ = packed
        lo = int(offsets[0])
        return RaggedTensor(data[lo:int(offsets[-1])], ((offsets - lo).astype(splits_dtype),))
