"""``prefetch_to_device``: batches copied into GPU memory ahead of the consumer.

A background thread (the runtime's BackgroundChunks, ``buffer_size`` batches ahead)
takes each batch the CPU stages made, writes its arrays into pinned host buffers (a
ring of them, each reused once its previous copy has finished), and copies them to
the device on a stream of its own; each DeviceArray carries the event after its copy,
so consumers (nd.gpu ops, PyTorch, JAX, CuPy) order their work after it without
blocking the host. Strings and other non-numeric leaves stay on the host. Its state
is the input's, so save/restore works across it (batches copied ahead are read again).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from nbdata.chunks import Chunk, RowList, col_row
from nbdata.ops.node import Node, arg_field, input_field
from nbdata.ops.runtime import BackgroundChunks, ChunkIter, RowReader
from nbdata.spec import TensorSpec, flatten, pack_as, string


def device_leaves(spec: Any) -> tuple:
    """The leaves of an element spec that live on the device: numeric dense tensors."""
    return tuple(k for k, s in enumerate(flatten(spec))
                 if isinstance(s, TensorSpec) and s.dtype is not string and s.dtype.kind in "biuf")


@dataclasses.dataclass(frozen=True, eq=False)
class PrefetchToDevice(Node):
    input: Node = input_field()
    device: int = arg_field()
    buffer_size: int = arg_field()
    op = "prefetch_to_device"

    @property
    def spec(self):
        return self.input.spec

    @property
    def device_leaves(self) -> tuple:
        return device_leaves(self.spec)

    def cardinality(self) -> int:
        return self.input.cardinality()

    def describe(self) -> str:
        return f"{self.label}(device='cuda:{self.device}', buffer_size={self.buffer_size})"

    def kernel_note(self) -> str | None:
        return (f"copies the numeric arrays of each batch through pinned host buffers to GPU "
                f"{self.device} on a stream of its own, {self.buffer_size} batch(es) ahead")

    def open(self, ctx):
        stager = Stager(self.device, self.buffer_size + 2)
        leaves = set(self.device_leaves)
        for element in ctx.open(self.input):
            values = flatten(element)
            yield pack_as(self.spec, [stager.to_device(v) if k in leaves else v
                                      for k, v in enumerate(values)])

    def open_chunks(self, ctx, state=None):
        return BackgroundChunks(ctx, lambda s: ToDeviceChunks(self, ctx, s), self.spec, state,
                                self.buffer_size, ctx.stats(self), self.label)


class ToDeviceChunks(ChunkIter):
    """The input's batches, their device leaves copied to the GPU (one row, one batch).
    State: the input's (a RowReader's)."""

    def __init__(self, node: PrefetchToDevice, ctx, state):
        self.leaves = set(node.device_leaves)
        self.reader = RowReader(ctx, node.input, None if state is None else state["input"], 1)
        self.stager = Stager(node.device, node.buffer_size + 2)

    def next(self, want: int):
        chunk = self.reader.next_rows(max(1, want))
        if chunk is None:
            return None
        columns = []
        for k, column in enumerate(chunk.columns):
            if k in self.leaves:
                columns.append(RowList(self.stager.to_device(np.asarray(col_row(column, j)))
                                       for j in range(chunk.n)))
            else:
                columns.append(column)
        return Chunk(columns, chunk.n)

    def save(self) -> dict:
        return {"input": self.reader.save()}

    def close(self) -> None:
        self.reader.close()


class Stager:
    """Host -> device copies through a ring of pinned buffers on one stream."""

    def __init__(self, device: int, slots: int):
        from nbdata.gpu import runtime
        self.backend = runtime.backend()
        if device != self.backend.device_id:
            from nbdata.errors import InvalidArgumentError
            raise InvalidArgumentError(f"prefetch_to_device: GPU {device} is not the current "
                                       f"device ({self.backend.device_id})")
        self.stream = self.backend.stream()
        self.slots = [[None, None, None] for _ in range(max(2, slots))]   # owner, view, event
        self.next_slot = 0

    def to_device(self, array: np.ndarray):
        from nbdata.gpu.array import DeviceArray
        be = self.backend
        array = np.ascontiguousarray(array)
        slot = self.slots[self.next_slot]
        self.next_slot = (self.next_slot + 1) % len(self.slots)
        if slot[2] is not None:
            be.sync(slot[2])   # the copy that last read this buffer is done
        if slot[1] is None or slot[1].size < array.nbytes:
            slot[0], slot[1] = be.pinned(max(array.nbytes, 1))
        staged = slot[1][:array.nbytes]
        staged[:] = array.reshape(-1).view(np.uint8)
        out = DeviceArray.empty(array.shape, array.dtype, self.stream)
        if array.nbytes:
            be.copy_h2d(out.buffer, staged, self.stream)
        slot[2] = out.ready = be.event(self.stream)
        out.stream = self.stream
        return out


__all__ = ["PrefetchToDevice", "Stager", "device_leaves"]
