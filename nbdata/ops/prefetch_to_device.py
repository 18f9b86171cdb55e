"""``prefetch_to_device``: batches copied into GPU memory ahead of the consumer.

A background thread (the runtime's BackgroundChunks, ``buffer_size`` batches ahead)
copies each batch's arrays to the device on a stream of its own. The fused CPU stages
below it write their outputs straight into pinned host memory (a pool of pinned
blocks, lent out as arrays and taken back when the last view of one is gone), so
their batches are copied to the GPU as they are, with no host copy; arrays from
elsewhere (an unfused batch, a compacting stage) are first written into a ring of
pinned staging buffers. Each DeviceArray carries the event after its copy, so
consumers (nd.gpu ops, PyTorch, JAX, CuPy) order their work after it without
blocking the host. Strings and other non-numeric leaves stay on the host. Its state
is the input's, so save/restore works across it (batches copied ahead are read again).
``pipe.stats()`` counts the direct and the staged copies and, on a GPU, the device time
the copies took (events), for the share of the wall time they overlapped.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import weakref
from typing import Any

import numpy as np

from nbdata import profiler
from nbdata.chunks import Chunk, RowList, col_row
from nbdata.ops.node import UnaryNode, arg_field
from nbdata.ops.runtime import BackgroundChunks, ChunkIter, RowReader
from nbdata.spec import TensorSpec, flatten, string


def device_leaves(spec: Any) -> tuple:
    """The leaves of an element spec that live on the device: numeric dense tensors."""
    return tuple(k for k, s in enumerate(flatten(spec))
                 if isinstance(s, TensorSpec) and s.dtype is not string and s.dtype.kind in "biuf")


@dataclasses.dataclass(frozen=True, eq=False)
class PrefetchToDevice(UnaryNode):
    device: int = arg_field()
    buffer_size: int = arg_field()
    op = "prefetch_to_device"

    @property
    def device_leaves(self) -> tuple:
        return device_leaves(self.spec)

    def describe(self) -> str:
        return f"{self.label}(device='cuda:{self.device}', buffer_size={self.buffer_size})"

    def kernel_note(self) -> str | None:
        return (f"copies the numeric arrays of each batch through pinned host buffers to GPU "
                f"{self.device} on a stream of its own, {self.buffer_size} batch(es) ahead")

    def open_chunks(self, ctx, state=None):
        from nbdata.gpu import runtime
        pool = PinnedPool.for_process(runtime.backend(), ctx.memory, ctx.stats(self))
        inner = ctx.with_host_allocator(pool.empty)
        return BackgroundChunks(ctx, lambda s: ToDeviceChunks(self, inner, s, ctx.stats(self)),
                                self.spec, state, self.buffer_size, ctx.stats(self), self.label)


class ToDeviceChunks(ChunkIter):
    """The input's batches, their device leaves copied to the GPU (one row, one batch).
    State: the input's (a RowReader's)."""

    def __init__(self, node: PrefetchToDevice, ctx, state, stats=None):
        self.leaves = set(node.device_leaves)
        self.reader = RowReader(ctx, node.input, None if state is None else state["input"], 1)
        self.stager = Stager(node.device, node.buffer_size + 2, stats)

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
        self.stager.close()


class Stager:
    """Host -> device copies on one stream: straight from pinned arrays (kept alive until
    their copy is done), else through a ring of pinned staging buffers."""

    def __init__(self, device: int, slots: int, stats=None):
        from nbdata.gpu import runtime
        self.backend = runtime.backend()
        if device != self.backend.device_id:
            from nbdata.errors import InvalidArgumentError
            raise InvalidArgumentError(f"prefetch_to_device: GPU {device} is not the current "
                                       f"device ({self.backend.device_id})")
        self.stream = self.backend.stream()
        self.blocks = shared_blocks(self.backend)
        self.slots = [[None, None, None] for _ in range(max(2, slots))]   # block, view, event
        self.next_slot = 0
        self.in_flight: list = []   # (event, host array) of direct copies not known done
        self.stats = stats
        self.counts = {"direct copies": 0, "staged copies": 0}
        self.timings: list = []      # (start, end) events of copies not yet summed
        self.copy_ms = 0.0

    def _count(self, kind: str, start, end) -> None:
        """Count a copy and add up the device time of the finished ones (events)."""
        self.counts[kind] += 1
        if start is not None:
            self.timings.append((start, end))
            pending = []
            for a, b in self.timings:
                if _done(self.backend, b):
                    self.copy_ms += self.backend.elapsed_ms(a, b) or 0.0
                else:
                    pending.append((a, b))
            self.timings = pending
        if self.stats is not None:
            self.stats.chosen.update(self.counts)
            if start is not None:
                self.stats.chosen["copy ms"] = round(self.copy_ms, 3)

    def to_device(self, array: np.ndarray):
        began = time.perf_counter()
        out = self._to_device(array)
        profiler.slice_("copy to device", "copy", began, time.perf_counter(),
                        {"bytes": int(array.nbytes)})
        return out

    def _to_device(self, array: np.ndarray):
        from nbdata.gpu.array import DeviceArray
        be = self.backend
        out = DeviceArray.empty(array.shape, array.dtype, self.stream)
        start = be.event(self.stream, timing=True)   # copy times are in stats()
        if _pinned(array) and array.flags.c_contiguous:
            if array.nbytes:
                be.copy_h2d(out.buffer, array, self.stream)
            out.ready = be.event(self.stream, timing=True)
            # The host array (and so its pinned block) lives until its copy is done.
            self.in_flight = [(e, a) for e, a in self.in_flight if not _done(be, e)]
            self.in_flight.append((out.ready, array))
            self._count("direct copies", start, out.ready)
        else:
            array = np.ascontiguousarray(array)
            slot = self.slots[self.next_slot]
            self.next_slot = (self.next_slot + 1) % len(self.slots)
            if slot[2] is not None:
                be.sync(slot[2])   # the copy that last read this buffer is done
            if slot[1] is None or slot[1].size < array.nbytes:
                if slot[0] is not None:
                    self.blocks.give(slot[0], None)
                slot[0] = self.blocks.take(_size_class(array.nbytes))
                slot[1], slot[2] = slot[0][1], None
            staged = slot[1][:array.nbytes]
            host_copy(staged, array.reshape(-1).view(np.uint8))
            start = be.event(self.stream, timing=True)
            if array.nbytes:
                be.copy_h2d(out.buffer, staged, self.stream)
            slot[2] = out.ready = be.event(self.stream, timing=True)
            self._count("staged copies", start, out.ready)
        out.stream = self.stream
        return out


    def close(self) -> None:
        """The staging buffers go back to the process's pinned blocks (after the copies
        that read them), and the pinned arrays of direct copies are let go only after
        their copies ran: their blocks go back with no event, as free at once."""
        for event, _ in self.in_flight:
            if not _done(self.backend, event):
                self.backend.sync(event)
        self.in_flight = []
        for slot in self.slots:
            if slot[0] is not None:
                self.blocks.give(slot[0], slot[2])
            slot[:] = [None, None, None]


_COPY_PARTS = None
_COPY_MIN_BYTES = 8 << 20


def _copy_pool():
    """Threads for large host copies (NumPy releases the GIL while it copies): nbdata's
    shared pool (made anew in a fork()ed child), at most 4 parts, half the cores."""
    from nbdata.kernels.threads import core_count, shared_pool
    global _COPY_PARTS
    if _COPY_PARTS is None:
        _COPY_PARTS = max(1, min(4, core_count() // 2))
    return shared_pool()


def host_copy(dst: np.ndarray, src: np.ndarray) -> int:
    """``dst[:] = src`` for flat uint8 arrays, in parts on several threads from 8 MB (one
    thread's memcpy is far below what the copy engine takes). Returns the parts used."""
    n = src.size
    if n < _COPY_MIN_BYTES:
        dst[:n] = src
        return 1
    pool = _copy_pool()
    parts = max(1, min(_COPY_PARTS, n // (_COPY_MIN_BYTES // 2)))
    step = (-(-n // parts) + 63) & ~63   # parts of whole cache lines
    futures = [pool.submit(np.copyto, dst[a:a + step], src[a:a + step])
               for a in range(0, n, step)]
    for f in futures:
        f.result()
    return len(futures)


def _done(be, event) -> bool:
    return event is None or getattr(event, "is_done", True)


class _Lease:
    """Pinned memory lent out as an array (``np.asarray(lease)``): NumPy arrays made from
    it and every view of them hold it, so it is collected, and its block returned to the
    pool, when the last of them is gone."""

    def __init__(self, block, shape: tuple, dtype: np.dtype):
        self.block = block
        self.__array_interface__ = {"shape": shape, "typestr": dtype.str, "version": 3,
                                    "data": (int(block[1].ctypes.data), False)}


def _pinned(array: np.ndarray) -> bool:
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    return isinstance(base, _Lease)


def _size_class(nbytes: int) -> int:
    return max(PinnedPool.MIN_BYTES, 1 << (max(1, nbytes) - 1).bit_length())


class PinnedBlocks:
    """The pinned host blocks of one backend, kept by size class for the whole process:
    every pipeline's iterators take theirs from here and give them back, so a second
    iterator (the next epoch's, a re-opened pipeline's) allocates no pinned memory
    (``cuMemAllocHost`` costs milliseconds, and freeing pinned memory synchronizes the
    device). At most ``KEEP`` free blocks of a size class are kept; more are freed."""

    KEEP = 8
    # Free blocks whose copies are all still queued before ``take`` waits for the
    # oldest one instead of allocating another.
    WAIT_AFTER = 2

    def __init__(self, backend):
        self._backend = weakref.ref(backend)   # the process-wide table is keyed on it
        self.free: dict[int, list] = {}
        self.lock = threading.Lock()
        self.allocations = 0      # pinned allocations made (for tests and stats)

    def take(self, size: int):
        """A free block of ``size`` bytes: the newest one whose last copy is done (given
        back without one, or whose event says so), else a new one; with ``WAIT_AFTER``
        blocks or more waiting for their copies, the oldest once its copy is done. Taking
        the newest block whatever its copy (the previous batch's parameters, queued
        behind the previous kernel) made the host wait for the device on every batch."""
        be = self._backend()
        be.bind()   # events are queried below, maybe on a thread that has not bound
        while True:
            with self.lock:
                candidates = list(self.free.get(size) or ())
            # the newest block whose copy is done (still in the CPU's caches where it is
            # small); events are asked outside the lock (a query may run finalizers)
            done = next((e for e in reversed(candidates) if _done(be, e[1])), None)
            with self.lock:
                blocks = self.free.setdefault(size, [])
                if done is not None:
                    at = next((k for k, e in enumerate(blocks) if e is done), None)
                    if at is None:
                        continue   # another thread took it: look again
                    entry = blocks.pop(at)
                elif len(blocks) >= self.WAIT_AFTER:
                    entry = blocks.pop(0)
                else:
                    entry = None
                    self.allocations += 1
            break
        if entry is not None:
            block, event = entry
            if event is not None:
                be.sync(event)   # the copy that last read it is done
            return block
        return be.pinned(size)

    def give(self, block, event=None) -> None:
        """``block`` is free once ``event`` (a copy reading it) is done."""
        size = block[1].size
        with self.lock:
            blocks = self.free.setdefault(size, [])
            if len(blocks) < self.KEEP:
                blocks.append((block, event))
                return
        if event is not None and self._backend() is not None:
            self._backend().sync(event)
        # dropped here: freed when its owner goes


_BLOCKS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_BLOCKS_LOCK = threading.Lock()


def shared_blocks(backend) -> PinnedBlocks:
    """This process's pinned blocks of ``backend``."""
    with _BLOCKS_LOCK:
        blocks = _BLOCKS.get(backend)
        if blocks is None:
            blocks = _BLOCKS[backend] = PinnedBlocks(backend)
        return blocks


class PinnedPool:
    """Pinned host memory lent as arrays, for the arrays fused stages write their outputs
    into (powers of two from 4 KiB; small arrays are ordinary host memory). A pool made
    with :meth:`for_process` draws on the process's :class:`PinnedBlocks`; one made
    directly has blocks of its own. The memory budget counts the bytes lent out."""

    MIN_BYTES = 1 << 12

    def __init__(self, backend, memory=None, stats=None, blocks: PinnedBlocks | None = None):
        self.backend = backend
        self.blocks = blocks if blocks is not None else PinnedBlocks(backend)
        self.memory, self.stats = memory, stats   # pinned blocks count in the memory budget

    @classmethod
    def for_process(cls, backend, memory=None, stats=None) -> "PinnedPool":
        return cls(backend, memory, stats, shared_blocks(backend))

    @property
    def free(self) -> dict:
        return {size: [b for b, _ in blocks] for size, blocks in self.blocks.free.items() if blocks}

    def empty(self, shape: tuple, dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        shape = tuple(int(d) for d in shape)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes < self.MIN_BYTES:
            return np.empty(shape, dtype)
        size = _size_class(nbytes)
        block = self.blocks.take(size)
        if self.memory is not None:
            self.memory.hold(self.stats, size)
        lease = _Lease(block, shape, dtype)
        weakref.finalize(lease, self._release, size, block)
        return np.asarray(lease)

    def _release(self, size: int, block) -> None:
        self.blocks.give(block)
        if self.memory is not None:
            self.memory.release(self.stats, size)


__all__ = ["PinnedBlocks", "PinnedPool", "PrefetchToDevice", "Stager", "device_leaves", "host_copy",
           "shared_blocks"]
