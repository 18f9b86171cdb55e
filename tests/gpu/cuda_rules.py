"""A test double of the GPU that enforces CUDA's rules, for machines without one.

``runtime.CudaBackend`` runs unchanged against a stand-in of what it calls: cuda.core
(``Device``, ``DeviceMemoryResource``, ``LegacyPinnedMemoryResource``, ``Buffer``,
``Stream``, ``Event``, ``utils.StridedMemoryView``), the driver calls of cuda-bindings
(copies, raw events and waits) and nvImageCodec's decoder; kernels are numba-cuda's
simulator kernels, launched on the stand-in's streams. Unlike the simulator, which runs
everything at once, the double behaves as a GPU does, in the spirit of PyTorch's CUDA
Sanitizer:

- A call made on a thread where the device was not made current fails
  (CUDA_ERROR_INVALID_CONTEXT), as the driver's do.
- Work is asynchronous. Copies, kernels, decodes, event records, waits and
  stream-ordered frees are queued on their stream and run later, when the host waits
  for them (``Event.sync``, ``Stream.sync``, a copy to pageable memory, a free of pinned
  memory), and some of the rest at random moments. Which queued work runs first is
  chosen by a seeded generator among what the streams' order, the events waited on
  and the legacy default stream's implicit synchronization allow, and by nothing
  else: a missing wait shows up as wrong data, and the same seed gives the same
  schedule for the same calls.
- Freed device memory and freed pinned memory are poisoned (0xDB), memory from the
  pool before its first write holds 0xA5. Work that touches memory after its release
  (or a block reused by a later allocation), and two pieces of work on different
  streams that touch the same bytes (one of them writing) in the opposite order to the
  order they were queued in, are violations: ``CudaRulesError`` naming the buffer and
  both streams, raised where the host waited and kept in ``Machine.violations`` (the
  test fixture fails the test on any). Work on different streams is ordered only by
  events and waits, so such a pair had nothing ordering it.
- Pageable host memory behaves as the driver's: a copy from it reads the bytes when it
  is queued, a copy into it returns when it is done; pinned memory is read and written
  when the copy runs.
- DLPack exports are real capsules ("dltensor", or "dltensor_versioned" for a DLPack 1.0
  consumer) of a DLTensor in CUDA memory (device type 2), as cuda.core's are: NumPy
  refuses them, a consumer renames the capsule as it takes it and calls its deleter when
  it is done, and one dropped untaken is deleted by its destructor.
- :class:`Consumer` plays a framework taking batches (PyTorch's pattern): it takes an
  array through DLPack on its own stream (or through the CUDA array interface on the
  legacy default stream), queues "kernels" that read it, drops the tensor and looks at
  what its kernels read when it synchronizes.

It models one device. Timings (``end - start`` of timing events, both recorded with
timing enabled, else CUDA_ERROR_INVALID_HANDLE as the driver) are WORK_MS per copy,
kernel or decode run between the events on their stream: events on a stream that did
not run the work time nothing.
"""

from __future__ import annotations

import bisect
import contextlib
import ctypes
import gc
import itertools
import random
import threading
import types
from typing import Any, Callable

import numpy as np

POISON_FREED = 0xDB
POISON_FRESH = 0xA5
_CONTEXT = 201        # CUDA_ERROR_INVALID_CONTEXT
_INVALID_VALUE = 1
_INVALID_HANDLE = 400
_NOT_READY = 600
WORK_MS = 0.25        # what the double says each copy, kernel or decode took
WORK_KINDS = ("copy to device", "copy to host", "copy on the device", "kernel", "decode")


class CudaRulesError(AssertionError):
    """Work on the double broke one of CUDA's rules."""


# ---------------------------------------------------------------- the machine
class Machine:
    """One simulated device: its streams, events, memory and queued work.

    Args:
        seed: picks the order of queued work that nothing orders, and when the device
            makes progress on its own.
        progress: the chance that a host call lets the device run some work it was
            not asked to wait for (0: only what the host waits for ever runs).
    """

    def __init__(self, seed: int = 0, progress: float = 0.3):
        self.rng = random.Random(seed)
        self.progress = progress
        self.lock = threading.RLock()
        self.local = threading.local()
        self.seq = itertools.count(1)
        self.handles = itertools.count(0x1000, 0x10)
        self.streams: dict[int, Stream] = {}
        self.events: dict[int, Event] = {}
        self.blocks: list[Block] = []          # sorted by address
        self.starts: list[int] = []
        self.violations: list[str] = []
        self.free_blocks: list[Block] = []     # device blocks whose free ran, newest last
        self.kinds: list[tuple[str, str]] = []  # (stream name, op kind) of every op queued
        self.ran: list[Op] = []                 # what ran, in order
        self.legacy = Stream(self, 1, blocking=True, name="the legacy default stream")
        self.device = Device(self)
        self.core = _core(self)
        self.driver = Driver(self)
        self.hw_decoder = True     # the GPU has a hardware JPEG decoder (as an H100)
        self.decoders: list = []
        self.decode_calls: list = []   # (images, backends) of each Decoder.decode
        self.nvimgcodec = _nvimgcodec(self)
        self._raised = 0
        self.busy = 0          # > 0 while work runs (calls made meanwhile only queue)
        self.last_on: dict = {}   # id(stream) -> the last op queued on it
        self.deferred: list = []

    # --------------------------------------------------------- context rule
    def need_context(self, what: str) -> None:
        if not getattr(self.local, "current", False):
            raise RuntimeError(f"{what}: CUDA_ERROR_INVALID_CONTEXT (no CUDA context is current "
                               f"on thread {threading.current_thread().name})")

    def has_context(self) -> bool:
        return bool(getattr(self.local, "current", False))

    # ------------------------------------------------------------- streams
    def new_stream(self, name: str | None = None, blocking: bool = False) -> "Stream":
        handle = next(self.handles)
        stream = Stream(self, handle, blocking, name or f"stream {handle:#x}")
        return stream

    def stream_of(self, handle) -> "Stream | None":
        """A driver stream handle: 0 and 1 the legacy default stream, 2 this thread's
        per-thread default stream, else a stream made here."""
        if isinstance(handle, Stream):
            return handle
        handle = int(handle)
        if handle in (0, 1):
            return self.legacy
        if handle == 2:
            stream = getattr(self.local, "per_thread", None)
            if stream is None:
                stream = self.local.per_thread = self.new_stream(
                    f"the per-thread default stream of {threading.current_thread().name}",
                    blocking=True)
            return stream
        return self.streams.get(handle)

    # -------------------------------------------------------------- memory
    def add_block(self, block: "Block") -> None:
        k = bisect.bisect(self.starts, block.start)
        self.starts.insert(k, block.start)
        self.blocks.insert(k, block)

    def block_at(self, pointer: int, nbytes: int) -> "Block | None":
        k = bisect.bisect(self.starts, pointer) - 1
        if k < 0:
            return None
        block = self.blocks[k]
        if pointer + max(nbytes, 1) > block.start + block.capacity:
            return None
        return block

    def access(self, pointer: int, nbytes: int, mode: str, what: str) -> "Access | None":
        """What a queued op touches at ``pointer`` (None: pageable host memory)."""
        block = self.block_at(int(pointer), int(nbytes))
        if block is None:
            return None
        if block.host_owner is None:
            self.violate(f"{what} was queued on {block.name} after its release "
                         f"({block.history()})")
        offset = int(pointer) - block.start
        return Access(block, block.host_owner, offset, offset + int(nbytes), mode)

    # ----------------------------------------------------------- scheduling
    @contextlib.contextmanager
    def running(self):
        """Held while the machine runs work. Calls made meanwhile (a finalizer releasing
        memory when a finished op drops the last reference to an array) only queue
        work; what must wait for the device is done when the outermost call ends."""
        with self.lock:
            self.busy += 1
            try:
                yield
            finally:
                self.busy -= 1
                while not self.busy and self.deferred:
                    self.deferred.pop(0)()

    def when_idle(self, fn: Callable[[], None]) -> None:
        """Runs ``fn`` now, or after the work running on this thread (see running)."""
        with self.lock:
            if self.busy:
                self.deferred.append(fn)
            else:
                fn()

    def enqueue(self, stream: "Stream", kind: str, run: Callable[[], None] | None = None,
                accesses=(), deps=(), name: str = "") -> "Op":
        with self.lock:
            deps = [d for d in deps if d]
            if stream is self.legacy:   # the legacy stream waits for blocking streams, and
                deps += [s.tail() for s in self.streams.values()   # they for it
                         if s.blocking and s is not stream and s.tail()]
            elif stream.blocking and self.legacy.tail():
                deps.append(self.legacy.tail())
            op = Op(next(self.seq), stream, kind, name or kind, run,
                    [a for a in accesses if a is not None], [d for d in deps if not d.done])
            op.waits_for = deps   # also those that had run (for ordered_after)
            previous = self.last_on.get(id(stream))
            op.previous = previous
            self.last_on[id(stream)] = op
            stream.queue.append(op)
            self.kinds.append((stream.name, kind))
            self.maybe_progress()
            return op

    def ordered_after(self, op: "Op", earlier: "Op") -> bool:
        """Whether CUDA's rules make ``op`` run after ``earlier`` in every schedule: it is
        later on the same stream, or waits (through events, or the legacy stream's implicit
        synchronization) for something that is, transitively."""
        seen, stack = set(), [op]
        while stack:
            o = stack.pop()
            if o is earlier:
                return True
            if id(o) in seen or o.seq < earlier.seq:
                continue   # queued before it: cannot wait for it
            seen.add(id(o))
            if o.previous is not None:
                stack.append(o.previous)
            stack.extend(o.waits_for)
        return False

    def maybe_progress(self) -> None:
        """Now and then the device runs queued work the host did not wait for."""
        if self.busy or not self.progress or self.rng.random() >= self.progress:
            return
        with self.running():
            for _ in range(self.rng.randint(1, 3)):
                ready = self.runnable(None)
                if not ready:
                    break
                self.execute(self.rng.choice(sorted(ready, key=lambda o: o.seq)))

    def runnable(self, among: set | None) -> list:
        ready = []
        for stream in list(self.streams.values()) + [self.legacy]:
            head = stream.queue[0] if stream.queue else None
            if head is not None and (among is None or head in among) and \
                    all(d.done for d in head.deps):
                ready.append(head)
        return ready

    def force(self, target: "Op | None") -> None:
        """Run queued work until ``target`` has run, in a seeded order of what is ready
        among the work it depends on (on its stream before it, events it waits for)."""
        if target is None or target.done:
            return
        with self.lock:
            if self.busy:   # a call made while work runs: the outer call goes on
                return
            self._force(target)
            self.maybe_progress()
            self.raise_new()

    def _force(self, target: "Op") -> None:
        with self.running():
            needed, stack = set(), [target]
            while stack:
                op = stack.pop()
                if op.done or op in needed:
                    continue
                queue = list(op.stream.queue)
                for earlier in queue[:queue.index(op) + 1]:
                    if not earlier.done and earlier not in needed:
                        needed.add(earlier)
                        stack.extend(d for d in earlier.deps if not d.done)
            while not target.done:
                ready = self.runnable(needed)
                assert ready, "the double found no runnable work (a cycle)"
                self.execute(self.rng.choice(sorted(ready, key=lambda o: o.seq)))

    def synchronize(self) -> None:
        """Run everything queued (a device-wide synchronization)."""
        with self.lock:
            if self.busy:
                return
            with self.running():
                self._drain()
            self.raise_new()

    def _drain(self) -> None:
        while True:
            ready = self.runnable(None)
            if not ready:
                break
            self.execute(self.rng.choice(sorted(ready, key=lambda o: o.seq)))
        left = [op for s in list(self.streams.values()) + [self.legacy] for op in s.queue]
        assert not left, f"work left that can never run: {left}"

    def execute(self, op: "Op") -> None:
        assert op.stream.queue[0] is op
        op.stream.queue.popleft()
        op.ran_at = len(self.ran)
        self.ran.append(op)
        enabled = gc.isenabled()
        gc.disable()   # no finalizer may run on a simulated kernel's threads meanwhile
        try:
            for acc in op.accesses:
                if acc.block.owner != acc.owner:
                    when = "after its release" if acc.owner in acc.block.born else \
                        "before its allocation ran"
                    self.violate(f"{op.describe()} touched {acc.block.name} {when} "
                                 f"({acc.block.history()})")
            before = [(a, a.block.memory[a.start:a.stop].copy()) for a in op.accesses if a.mode == "r?"]
            if op.run is not None:
                try:
                    op.run()
                except CudaRulesError as e:
                    self.violate(str(e))
            for acc, old in before:
                acc.mode = "w" if not np.array_equal(acc.block.memory[acc.start:acc.stop], old) else "r"
            for acc in op.accesses:
                self.check_order(op, acc)
        finally:
            op.done, op.run = True, None   # what it held (arrays, kernels) can go
            if enabled:
                gc.enable()

    def check_order(self, op: "Op", acc: "Access") -> None:
        block = acc.block
        if block.owner != acc.owner:
            return
        for seq, stream, start, stop, mode, what in block.log:
            if stream is op.stream or stop <= acc.start or acc.stop <= start:
                continue
            if "w" not in mode + acc.mode or seq < op.seq:
                continue
            if mode == "w" and acc.mode != "w":
                problem = (f"{op.describe()} read {block.name} after {what} on {stream.name}, "
                           f"queued later (#{seq}), had overwritten it")
            elif acc.mode == "w" and mode != "w":
                problem = (f"{what} on {stream.name} (queued #{seq}) read {block.name} before "
                           f"{op.describe()}, queued earlier, wrote it: no event orders it "
                           f"after the work that produces the data")
            else:
                problem = (f"{op.describe()} and {what} on {stream.name} (queued #{seq}) wrote "
                           f"{block.name} in the opposite order to their queueing")
            self.violate(problem)
        block.log.append((op.seq, op.stream, acc.start, acc.stop, acc.mode, op.describe(False)))
        del block.log[:-64]

    def violate(self, message: str) -> None:
        self.violations.append(message)

    def raise_new(self) -> None:
        if len(self.violations) > self._raised:
            new = self.violations[self._raised:]
            self._raised = len(self.violations)
            raise CudaRulesError("; ".join(new))

    def check(self) -> None:
        """Run what is queued and fail on any violation seen (the end of a test)."""
        gc.collect()
        with contextlib.suppress(CudaRulesError):
            self.synchronize()
        if self.violations:
            raise CudaRulesError("CUDA rules broken:\n- " + "\n- ".join(self.violations))

    def elapsed(self, start: "Event", end: "Event") -> float:
        """Milliseconds between two done timing events: WORK_MS for each copy, kernel or
        decode that ran between them (on their stream when both are on one, as a GPU
        times a stream's work; else on any), plus 1 us. Events on a stream that ran
        none of the work measured give about nothing, as on hardware."""
        if start.op is None or end.op is None:
            return 0.001
        lo, hi = start.op.ran_at, end.op.ran_at
        same = start.op.stream is end.op.stream
        work = sum(1 for op in self.ran[lo + 1:hi] if op.kind in WORK_KINDS and
                   (not same or op.stream is start.op.stream))
        return WORK_MS * work + 0.001

    def ops_on(self, stream: "Stream") -> list[str]:
        return [kind for name, kind in self.kinds if name == stream.name]


class Op:
    def __init__(self, seq, stream, kind, name, run, accesses, deps):
        self.seq, self.stream, self.kind, self.name = seq, stream, kind, name
        self.run, self.accesses, self.deps = run, accesses, deps
        self.waits_for: list = []
        self.previous: "Op | None" = None   # the op queued before it on its stream
        self.done = False
        self.ran_at = -1

    def describe(self, where: bool = True) -> str:
        text = f"{self.name} (queued #{self.seq})"
        return f"{text} on {self.stream.name}" if where else text

    def __repr__(self) -> str:
        return f"<{self.describe()}>"


class Access:
    def __init__(self, block, owner, start, stop, mode):
        self.block, self.owner, self.start, self.stop, self.mode = block, owner, start, stop, mode


class Block:
    """Memory the double hands out: device memory (from the pool) or pinned host memory.
    Never given back to the system, so stale pointers read poison, not unmapped pages."""

    counter = itertools.count(1)

    def __init__(self, machine: Machine, kind: str, capacity: int):
        self.memory = np.full(max(1, capacity), POISON_FRESH, np.uint8)
        self.start = int(self.memory.ctypes.data)
        self.capacity = capacity
        self.kind = kind
        self.number = next(Block.counter)
        self.owner: int | None = None        # allocation id that the device sees now
        self.host_owner: int | None = None   # the allocation the host holds it for
        self.log: list = []
        self.events: list[str] = []
        self.born: set = set()                # allocations that have begun on the device
        machine.add_block(self)

    @property
    def name(self) -> str:
        return f"{self.kind} buffer #{self.number} ({self.capacity} B at {self.start:#x})"

    def history(self) -> str:
        return "; ".join(self.events[-4:])


# ------------------------------------------------------------- cuda.core
class Device:
    def __init__(self, machine: Machine):
        self.machine = machine
        self.device_id = 0
        self.streams_made = 0

    def set_current(self):
        self.machine.local.current = True

    def create_stream(self, obj=None, options=None):
        self.machine.need_context("Device.create_stream")
        self.streams_made += 1
        nonblocking = getattr(options, "nonblocking", True) if options is not None else True
        return self.machine.new_stream(blocking=not nonblocking)

    def sync(self):
        self.machine.need_context("Device.sync")
        self.machine.synchronize()


class Stream:
    def __init__(self, machine: Machine, handle: int, blocking: bool, name: str):
        from collections import deque
        self.machine, self.handle, self.blocking, self.name = machine, handle, blocking, name
        self.queue: deque = deque()
        self.last: Op | None = None
        self.waited: list = []
        if handle != 1:
            machine.streams[handle] = self

    def tail(self) -> "Op | None":
        return self.queue[-1] if self.queue else None

    def __cuda_stream__(self):
        return (0, self.handle)

    def record(self, event=None, options=None):
        self.machine.need_context("Stream.record")
        timing = bool(options is not None and getattr(options, "timing_enabled", False))
        event = event or Event(self.machine, timing)
        event.record_on(self)
        return event

    def wait(self, event):
        self.machine.need_context("Stream.wait")
        self.waited.append(event)
        target = event if isinstance(event, Event) else self.machine.events[int(event.handle)]
        self.machine.enqueue(self, "wait", deps=[target.op], name=f"wait for {target.name}")

    def sync(self):
        self.machine.need_context("Stream.sync")
        self.machine.force(self.tail())

    def __repr__(self) -> str:
        return f"<{self.name}>"


class Event:
    def __init__(self, machine: Machine, timing: bool = False):
        self.machine = machine
        self.handle = next(machine.handles)
        self.timing = timing
        self.op: Op | None = None
        self.name = f"event {self.handle:#x}"
        machine.events[self.handle] = self

    def record_on(self, stream: Stream) -> None:
        self.op = self.machine.enqueue(stream, "record", name=f"record {self.name}")

    @property
    def is_done(self) -> bool:
        m = self.machine
        m.need_context("Event.is_done")
        with m.lock:
            if self.op is not None and not self.op.done and m.progress and \
                    m.rng.random() < max(m.progress, 0.5):
                m.force(self.op)
            return self.op is None or self.op.done

    def sync(self):
        self.machine.need_context("Event.sync")
        self.machine.force(self.op)

    def __sub__(self, other):
        # As cuEventElapsedTime: both timing events, both done.
        if not (self.timing and other.timing):
            raise RuntimeError("CUDA_ERROR_INVALID_HANDLE: elapsed time of a non-timing event")
        if not (self.op is None or self.op.done) or not (other.op is None or other.op.done):
            raise RuntimeError("CUDA_ERROR_NOT_READY: elapsed time of an event not yet done")
        return self.machine.elapsed(other, self)


class Buffer:
    """cuda.core's Buffer: owned pool or pinned memory, or a view of a pointer."""

    def __init__(self, machine, block, owner, size, stream=None, kind="device"):
        self.machine, self.block, self.owner, self.size = machine, block, owner, size
        self.stream, self.kind = stream, kind
        self.handle = block.start if block is not None else 0
        self.closed = block is None

    @classmethod
    def _from_handle(cls, machine, ptr, size, mr=None, owner=None, stream=None):
        out = cls(machine, None, None, size)
        out.handle, out.keep = int(ptr), owner
        return out

    def close(self, stream=None):
        if self.closed:
            return
        self.closed = True
        m = self.machine
        m.need_context("Buffer.close")
        block = self.block
        if self.kind == "pinned":
            # cuMemFreeHost synchronizes the device before the memory goes.
            def free_host():
                m.synchronize()
                block.memory[:] = POISON_FREED
                block.owner = block.host_owner = None
                block.log.clear()
                block.events.append(f"freed (pinned) by the host, #{next(m.seq)}")
            m.when_idle(free_host)
            return
        stream = stream if stream is not None else self.stream
        stream = m.stream_of(stream.handle) if not isinstance(stream, Stream) else stream

        release = object()

        def free():
            block.memory[:] = POISON_FREED
            block.owner = None
            block.log.clear()
            # Free for any stream only once its LAST release has run: the block may have
            # been taken again on this stream (stream order) and released again since.
            if block.host_owner is None and block.release is release:
                m.free_blocks.append(block)

        with m.lock:
            block.host_owner = None
            block.pending_free = stream
            block.release = release
            op = m.enqueue(stream, "free", free, name=f"free of {block.name}")
            block.events.append(f"released on {stream.name} (queued #{op.seq})")

    def __del__(self):
        if not getattr(self, "closed", True):
            with contextlib.suppress(Exception):
                self.machine.local.current = True   # cuda.core frees with its own context
                self.close()


class DeviceMemoryResource:
    def __init__(self, machine: Machine, device):
        self.machine = machine
        self.allocated = 0
        self.ids = itertools.count(1)

    def allocate(self, size, *, stream):
        m = self.machine
        m.need_context("DeviceMemoryResource.allocate")
        if not isinstance(stream, Stream):
            raise TypeError("allocations are stream-ordered: pass a Stream")
        size = max(1, int(size))
        with m.lock:
            block = None
            # The pool reuses a block whose free has run, or one whose free is queued on
            # this same stream (stream order makes that safe), newest first.
            candidates = [b for b in reversed(m.blocks) if b.kind == "device" and b.host_owner is None
                          and b.capacity >= size and b.capacity <= 4 * size + 256 and
                          (b in m.free_blocks or getattr(b, "pending_free", None) is stream)]
            if candidates:
                block = candidates[0]
                if block in m.free_blocks:
                    m.free_blocks.remove(block)
            else:
                block = Block(m, "device", (size + 255) // 256 * 256)
            owner = next(self.ids) + 1000 * block.number
            block.host_owner = owner
            block.pending_free = None

            def born():
                block.owner = owner
                block.born.add(owner)
                block.memory[:] = POISON_FRESH
                block.log.clear()

            op = m.enqueue(stream, "alloc", born, name=f"allocation of {block.name}")
            block.events.append(f"allocated on {stream.name} (queued #{op.seq})")
            self.allocated += size
            return Buffer(m, block, owner, size, stream)


class LegacyPinnedMemoryResource:
    def __init__(self, machine: Machine):
        self.machine = machine
        self.ids = itertools.count(1)

    def allocate(self, size, *, stream=None):
        m = self.machine
        m.need_context("LegacyPinnedMemoryResource.allocate")   # records a default stream
        size = max(1, int(size))
        with m.lock:
            block = Block(m, "pinned", size)
            block.owner = block.host_owner = next(self.ids)
            block.born.add(block.owner)
            block.events.append(f"allocated (pinned) by the host, #{next(m.seq)}")
            return Buffer(m, block, block.owner, size, kind="pinned")


class StridedMemoryView:
    """cuda.core.utils.StridedMemoryView of a buffer: its DLPack export is a real
    PyCapsule (see :func:`dlpack_capsule`), as cuda.core's is."""

    def __init__(self, buffer, shape, dtype):
        self.buffer, self.shape, self.dtype = buffer, tuple(shape), np.dtype(dtype)

    @classmethod
    def from_buffer(cls, buffer, shape, strides=None, *, dtype=None):
        return cls(buffer, shape, dtype)

    def __dlpack__(self, *, stream=None, max_version=None):
        versioned = max_version is not None and tuple(max_version) >= (1, 0)
        return dlpack_capsule(int(self.buffer.handle), self.shape, self.dtype, self.buffer,
                              versioned)


# ----------------------------------------------------------------- DLPack
# The structures of dlpack.h (v1.0): a DLManagedTensor (capsule "dltensor") or a
# DLManagedTensorVersioned ("dltensor_versioned"); a consumer renames the capsule
# ("used_...") and calls the deleter when it is done; a capsule never consumed calls it
# from its destructor.
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", _DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


KDL_CUDA = 2
_DL_CODES = {0: "i", 1: "u", 2: "f", 6: "b"}
_NAMES = {False: b"dltensor", True: b"dltensor_versioned"}
# (PyCapsule_SetName keeps the pointer: the names must live as long as the capsules)
_USED_NAMES = {False: b"used_dltensor", True: b"used_dltensor_versioned"}
# a deleter is called with the GIL held (NumPy's drops a reference)
_DELETER = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)


def _api(name: str, restype, *argtypes):
    """A function of Python's C API with its own signature (not pythonapi's shared one)."""
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_capsule_pointer = _api("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)
_capsule_valid = _api("PyCapsule_IsValid", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)
_capsule_rename = _api("PyCapsule_SetName", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)


def _managed(capsule, versioned: bool):
    address = _capsule_pointer(capsule, _NAMES[versioned])
    cls = _DLManagedTensorVersioned if versioned else _DLManagedTensor
    return address, cls.from_address(address)


def dlpack_capsule(pointer: int, shape, dtype, owner, versioned: bool):
    """A DLPack capsule of the double's CUDA memory at ``pointer`` (which is the host
    address of the block's bytes): NumPy's capsule of a host view of those bytes, its
    DLTensor's device made CUDA's. NumPy's own destructor and deleter (C) free it; the
    view's base holds ``owner`` until then."""
    dtype = np.dtype(dtype)
    nbytes = max(1, int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
    holder = (ctypes.c_uint8 * nbytes).from_address(pointer)
    holder.owner = owner
    view = np.frombuffer(holder, dtype, count=int(np.prod(shape, dtype=np.int64))).reshape(shape)
    capsule = view.__dlpack__(max_version=(1, 0)) if versioned else view.__dlpack__()
    _, managed = _managed(capsule, versioned)
    managed.dl_tensor.device = _DLDevice(KDL_CUDA, 0)
    return capsule


class Capsule:
    """What a consumer read from a DLPack capsule it took (renamed "used_..."): the
    tensor's pointer, shape and dtype; dropping it calls the producer's deleter."""

    def __init__(self, capsule):
        versioned = bool(_capsule_valid(capsule, _NAMES[True]))
        if not versioned and not _capsule_valid(capsule, _NAMES[False]):
            raise CudaRulesError(f"not an unconsumed DLPack capsule: {capsule!r}")
        self.address, self.managed = _managed(capsule, versioned)
        if versioned and self.managed.version.major != 1:
            raise CudaRulesError(f"DLPack version {self.managed.version.major} (1 expected)")
        t = self.managed.dl_tensor
        if t.device.device_type != KDL_CUDA:
            raise CudaRulesError(f"a DLPack tensor on device type {t.device.device_type}, "
                                 "not CUDA memory")
        self.dtype = np.dtype(bool) if t.dtype.code == 6 else \
            np.dtype(f"{_DL_CODES[t.dtype.code]}{t.dtype.bits // 8}")
        self.shape = tuple(int(t.shape[k]) for k in range(t.ndim))
        if t.strides:
            strides = tuple(int(t.strides[k]) for k in range(t.ndim))
            compact, step = [], 1
            for d in reversed(self.shape):
                compact.append(step)
                step *= d
            if any(s != c for s, c, d in zip(strides, reversed(compact), self.shape) if d > 1):
                raise CudaRulesError("the double's consumer takes C-contiguous tensors only")
        self.pointer = int(t.data or 0) + int(t.byte_offset)
        _capsule_rename(capsule, _USED_NAMES[versioned])   # its destructor lets it be
        self.deleter = _DELETER(self.managed.deleter) if self.managed.deleter else None

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def __del__(self):
        deleter = getattr(self, "deleter", None)   # (none where the capsule was refused)
        if deleter is not None:
            deleter(self.address)


def _core(machine: Machine):
    core = types.SimpleNamespace(
        DeviceMemoryResource=lambda device: DeviceMemoryResource(machine, device),
        LegacyPinnedMemoryResource=lambda: LegacyPinnedMemoryResource(machine),
        StreamOptions=lambda **kw: types.SimpleNamespace(**kw),
        EventOptions=lambda **kw: types.SimpleNamespace(**kw),
        utils=types.SimpleNamespace(StridedMemoryView=StridedMemoryView))
    core.Buffer = types.SimpleNamespace(
        from_handle=lambda ptr, size, mr=None, owner=None, stream=None:
        Buffer._from_handle(machine, ptr, size, mr, owner, stream))
    return core


# ------------------------------------------------------------- the driver
class DriverEvent:
    def __init__(self, event: Event):
        self.event = event

    def __int__(self):
        return self.event.handle


class Driver:
    """The cuda-bindings driver calls nbdata makes, with their return conventions."""

    def __init__(self, machine: Machine):
        self.machine = machine
        self.calls: list[tuple[str, Any]] = []   # (function, the stream handle it was given)

    def _event(self, event) -> Event | None:
        if isinstance(event, DriverEvent):
            return event.event
        if isinstance(event, Event):
            return event
        return self.machine.events.get(int(event))

    def cuEventCreate(self, flags):
        if not self.machine.has_context():
            return (_CONTEXT, None)
        return (0, DriverEvent(Event(self.machine, timing=not flags & 0x2)))

    def cuEventRecord(self, event, stream):
        m = self.machine
        ev, st = self._event(event), m.stream_of(stream)
        self.calls.append(("cuEventRecord", stream))
        if not m.has_context():
            return (_CONTEXT,)
        if ev is None or st is None:
            return (_INVALID_HANDLE,)
        ev.record_on(st)
        return (0,)

    def cuStreamWaitEvent(self, stream, event, flags):
        m = self.machine
        ev, st = self._event(event), m.stream_of(stream)
        self.calls.append(("cuStreamWaitEvent", stream))
        if not m.has_context():
            return (_CONTEXT,)
        if ev is None or st is None:
            return (_INVALID_HANDLE,)
        st.waited.append(ev)
        m.enqueue(st, "wait", deps=[ev.op], name=f"wait for {ev.name}")
        return (0,)

    def cuEventDestroy(self, event):
        return (0,) if self.machine.has_context() else (_CONTEXT,)

    def cuStreamSynchronize(self, stream):
        m = self.machine
        st = m.stream_of(stream)
        if not m.has_context():
            return (_CONTEXT,)
        m.force(st.tail())
        return (0,)

    def cuMemcpyHtoDAsync(self, dst, src, nbytes, stream):
        m = self.machine
        if not m.has_context():
            return (_CONTEXT,)
        st, n = m.stream_of(stream), int(nbytes)
        if st is None:
            return (_INVALID_HANDLE,)
        with m.lock:
            target = m.access(dst, n, "w", "a copy to the device")
            if target is None or target.block.kind != "device":
                return (_INVALID_VALUE,)
            source = m.access(src, n, "r", "a copy from pinned memory")
            host = np.ctypeslib.as_array((ctypes.c_uint8 * max(n, 1)).from_address(int(src)))[:n]
            # Pageable memory: the driver reads it before the call returns. Pinned: the
            # copy reads it when it runs, and the host must not write it before then.
            data = host.copy()
            queued = f"#{next(m.seq)}"

            def run():
                into = target.block.memory[target.start:target.stop]
                if source is None:
                    into[:] = data
                    return
                now = source.block.memory[source.start:source.stop]
                if source.block.owner == source.owner and not np.array_equal(now, data):
                    raise CudaRulesError(
                        f"the host wrote {source.block.name} after a copy from it was queued "
                        f"on {st.name} ({queued}) and before the copy ran")
                into[:] = now

            m.enqueue(st, "copy to device", run, [target, source],
                      name=f"copy of {n} B to {target.block.name}")
        return (0,)

    def cuMemcpyDtoDAsync(self, dst, src, nbytes, stream):
        m = self.machine
        if not m.has_context():
            return (_CONTEXT,)
        st, n = m.stream_of(stream), int(nbytes)
        if st is None:
            return (_INVALID_HANDLE,)
        with m.lock:
            source = m.access(src, n, "r", "a device-to-device copy")
            target = m.access(dst, n, "w", "a device-to-device copy")
            if source is None or target is None or "device" not in (source.block.kind,
                                                                    target.block.kind):
                return (_INVALID_VALUE,)

            def run():
                target.block.memory[target.start:target.stop] = \
                    source.block.memory[source.start:source.stop]
            m.enqueue(st, "copy on the device", run, [source, target],
                      name=f"copy of {n} B to {target.block.name}")
        return (0,)

    def cuMemcpyDtoHAsync(self, dst, src, nbytes, stream):
        m = self.machine
        if not m.has_context():
            return (_CONTEXT,)
        st, n = m.stream_of(stream), int(nbytes)
        if st is None:
            return (_INVALID_HANDLE,)
        with m.lock:
            source = m.access(src, n, "r", "a copy to the host")
            if source is None or source.block.kind != "device":
                return (_INVALID_VALUE,)
            target = m.access(dst, n, "w", "a copy into pinned memory")

            def run():
                data = source.block.memory[source.start:source.stop]
                if target is not None:
                    target.block.memory[target.start:target.stop] = data
                else:
                    ctypes.memmove(int(dst), data.ctypes.data, n)

            op = m.enqueue(st, "copy to host", run, [source, target],
                           name=f"copy of {n} B from {source.block.name}")
            if target is None:   # pageable memory: done when the call returns
                m.force(op)
        return (0,)


# ---------------------------------------------------------------- kernels
class Launch:
    """A simulator kernel configured with one of the double's streams: queued on it, run
    (in the simulator, on the memory its arguments point at) when the stream gets there."""

    def __init__(self, machine: Machine, kernel, config: tuple, stream: Stream):
        self.machine, self.kernel, self.config, self.stream = machine, kernel, config, stream

    def __call__(self, *args):
        m = self.machine
        m.need_context("cuLaunchKernel")
        with m.lock:
            accesses, makers = [], []
            for arg in args:
                cai = getattr(arg, "__cuda_array_interface__", None)
                if cai is None:
                    makers.append(lambda a=arg: a)
                    continue
                shape, dtype = tuple(cai["shape"]), np.dtype(cai["typestr"])
                nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                acc = m.access(cai["data"][0], nbytes, "r?", "a kernel launch")
                if acc is None or acc.block.kind != "device":
                    raise CudaRulesError(f"a kernel argument at {cai['data'][0]:#x} is not "
                                         f"device memory")
                accesses.append(acc)
                makers.append(lambda a=acc, s=shape, d=dtype:
                              a.block.memory[a.start:a.stop].view(d).reshape(s))
            kernel, config = self.kernel, self.config

            def run():
                values = [make() for make in makers]
                _ORIGINAL_GETITEM(kernel, config[:2])
                kernel(*values)

            name = getattr(kernel, "__name__", "kernel")
            m.enqueue(self.stream, "kernel", run, accesses, name=f"kernel {name}")


_ORIGINAL_GETITEM = None


def _launch_on_streams(machine: Machine):
    """numba-cuda's simulator kernel, made to queue launches given one of the double's
    streams (it ignores streams and runs at once otherwise)."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel
    global _ORIGINAL_GETITEM
    if _ORIGINAL_GETITEM is None:
        _ORIGINAL_GETITEM = FakeCUDAKernel.__getitem__

    def getitem(kernel, configuration):
        if len(configuration) >= 3 and isinstance(configuration[2], Stream):
            return Launch(configuration[2].machine, kernel, tuple(configuration), configuration[2])
        return _ORIGINAL_GETITEM(kernel, configuration)
    return FakeCUDAKernel, getitem


# ------------------------------------------------------------ nvImageCodec
def _orientation(data: bytes) -> int:
    """The EXIF Orientation tag of a JPEG (1 when it has none)."""
    k = 2
    while k + 4 <= len(data) and data[k] == 0xFF:
        marker, length = data[k + 1], int.from_bytes(data[k + 2:k + 4], "big")
        if marker == 0xE1 and data[k + 4:k + 10] == b"Exif\x00\x00":
            tiff = data[k + 10:k + 2 + length]
            order = "little" if tiff[:2] == b"II" else "big"
            ifd = int.from_bytes(tiff[4:8], order)
            for j in range(int.from_bytes(tiff[ifd:ifd + 2], order)):
                entry = tiff[ifd + 2 + 12 * j: ifd + 14 + 12 * j]
                if int.from_bytes(entry[:2], order) == 0x0112:
                    return int.from_bytes(entry[8:10], order)
        if marker in (0xDA, 0xD9):
            break
        k += 2 + length
    return 1


def _oriented(image: np.ndarray, orientation: int) -> np.ndarray:
    turn = {3: 2, 6: 3, 8: 1}.get(orientation)   # np.rot90 turns counterclockwise
    return np.ascontiguousarray(np.rot90(image, turn) if turn else image)


def _nvimgcodec(machine: Machine):
    """nvImageCodec 0.9's decoding calls: decodes (libjpeg-turbo through nd.image, the
    pixels the simulator path gives) are queued on the decode's CUDA stream and write
    their targets when they run; EXIF orientation is applied unless the params say not
    to, as nvImageCodec's default does."""
    import simplejpeg

    class CodeStream:
        def __init__(self, data):
            self.data = bytes(data)
            try:
                height, width, colorspace, _ = simplejpeg.decode_jpeg_header(self.data)
            except Exception as e:  # noqa: BLE001 - as nvImageCodec: a RuntimeError
                raise RuntimeError(f"nvImageCodec: cannot parse the code stream ({e})") from None
            self.height, self.width = height, width
            self.num_channels = 1 if colorspace.lower() == "gray" else 3
            self.region = None

        def get_sub_code_stream(self, image_idx=0, region=None, bitstream_offset=None):
            """A view of a region of the image (nvImageCodec 0.9's ROI decode)."""
            out = CodeStream(self.data)
            if region is not None:
                (y0, x0), (y1, x1) = region.start, region.end
                if not (0 <= y0 < y1 <= self.height and 0 <= x0 < x1 <= self.width):
                    raise RuntimeError(f"nvImageCodec: region {region.start}-{region.end} "
                                       f"outside the {self.height}x{self.width} image")
                out.region = ((y0, x0), (y1, x1))
                out.height, out.width = y1 - y0, x1 - x0
            return out

    class Region:
        def __init__(self, start_y, start_x, end_y, end_x, out_of_bounds_sample=0):
            self.start, self.end = (int(start_y), int(start_x)), (int(end_y), int(end_x))

    class Image:
        def __init__(self, target, stream):
            self.cai = target.__cuda_array_interface__
            self.keep = target
            self.stream = stream

    def as_image(target, cuda_stream=0):
        return Image(target, cuda_stream)

    def DecodeParams(apply_exif_orientation=True, color_spec=None, sample_format=None):
        return types.SimpleNamespace(apply_exif_orientation=apply_exif_orientation,
                                     color_spec=color_spec, sample_format=sample_format)

    kinds = ("CPU_ONLY", "GPU_ONLY", "HW_GPU_ONLY", "HYBRID_CPU_GPU")

    class Backend:
        def __init__(self, backend_kind="GPU_ONLY", load_hint=1.0, load_hint_policy=None):
            if backend_kind not in kinds:
                raise TypeError(f"Backend: not a BackendKind: {backend_kind!r}")
            self.backend_kind, self.load_hint = backend_kind, float(load_hint)

    class Decoded:
        """An image nvImageCodec allocated (decode without targets)."""

        def __init__(self, block, shape):
            self.block, self.shape = block, shape
            self.__cuda_array_interface__ = {"shape": shape, "typestr": "|u1", "version": 3,
                                             "data": (block.start, False), "strides": None,
                                             "stream": None}

        def cpu(self):
            machine.synchronize()
            return self.block.memory[:int(np.prod(self.shape))].reshape(self.shape).copy()

    class Decoder:
        """Decodes on the machine's hardware decoder only where ``machine.hw_decoder``
        (a GPU without one fails every image a HW_GPU_ONLY-only decoder gets); a target
        smaller than the image fails that image (nvImageCodec does not truncate)."""

        def __init__(self, device_id=0, max_num_cpu_threads=0, backends=None, options=""):
            self.device_id = device_id
            self.backends = [b.backend_kind for b in backends] if backends else list(kinds)
            machine.decoders.append(self)
            self.failures: list = []

        def usable(self) -> bool:
            if self.device_id == -99:
                return "CPU_ONLY" in self.backends
            return any(k in self.backends for k in ("GPU_ONLY", "HYBRID_CPU_GPU", "CPU_ONLY")) or \
                ("HW_GPU_ONLY" in self.backends and machine.hw_decoder)

        def decode(self, streams, image=None, images=None, params=None, cuda_stream=0):
            one = not isinstance(streams, (list, tuple))
            streams = [streams] if one else list(streams)
            if one:
                images = [image]
            elif images is None:
                images = [None] * len(streams)
            else:
                images = list(images)
            params = params or DecodeParams()
            machine.need_context("Decoder.decode")
            stream = machine.stream_of(cuda_stream)
            machine.decode_calls.append((len(streams), tuple(self.backends)))
            results = []
            for code, target in zip(streams, images):
                results.append(self._queue(code, target, params, stream))
            return results[0] if one else results

        def _queue(self, code, target, params, stream):
            import nbdata as nd
            if not self.usable():
                self.failures.append("no backend of this decoder can decode on this device")
                return None
            channels = 1 if params.sample_format == "I_Y" else 3
            try:
                pixels = np.asarray(nd.image.decode_jpeg(code.data, channels=channels,
                                                         dct_method="INTEGER_ACCURATE"))
            except Exception:  # noqa: BLE001 - nvImageCodec reports a failed decode as None
                return None
            region = getattr(code, "region", None)
            if region is not None:
                (y0, x0), (y1, x1) = region
                pixels = np.ascontiguousarray(pixels[y0:y1, x0:x1])
            if params.apply_exif_orientation:
                pixels = _oriented(pixels, _orientation(code.data))
            if target is None:   # nvImageCodec allocates the output
                block = Block(machine, "device", max(1, pixels.nbytes))
                block.owner = block.host_owner = -block.number
                target = Image(Decoded(block, pixels.shape), stream)
            cai = target.cai
            shape, dtype = tuple(cai["shape"]), np.dtype(cai["typestr"])
            nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            if nbytes < pixels.nbytes or shape[:2] != pixels.shape[:2]:
                self.failures.append(f"the output buffer is too small or of another shape "
                                     f"({shape} for a {pixels.shape} image)")
                return None
            acc = machine.access(cai["data"][0], nbytes, "w", "a decode")

            def run():
                flat = pixels.reshape(-1)
                acc.block.memory[acc.start:acc.start + flat.size] = flat

            machine.enqueue(stream, "decode", run, [acc], name=f"decode into {acc.block.name}")
            return target.keep if isinstance(target.keep, Decoded) else target

    return types.SimpleNamespace(
        CodeStream=CodeStream, as_image=as_image, Decoder=Decoder, DecodeParams=DecodeParams,
        ColorSpec=types.SimpleNamespace(GRAY="GRAY", SRGB="SRGB"),
        SampleFormat=types.SimpleNamespace(I_Y="I_Y", I_RGB="I_RGB"),
        Backend=Backend, BackendKind=types.SimpleNamespace(**{k: k for k in kinds}),
        Region=Region, NVIMGCODEC_DEVICE_CPU_ONLY=-99)


# --------------------------------------------------------------- consumers
class Tensor:
    """What a framework holds after taking a DeviceArray."""

    def __init__(self, capsule, pointer: int, shape, dtype):
        self.capsule, self.pointer, self.shape, self.dtype = capsule, pointer, shape, dtype


class Consumer:
    """A framework taking batches, PyTorch's way: ``take`` through DLPack on its own
    stream (``protocol="cai"``: the CUDA array interface, work on the legacy default
    stream), ``read`` queues a "kernel" that reads the tensor, the caller drops the
    tensor, and ``results`` synchronizes and gives what the kernels read."""

    def __init__(self, machine: Machine, protocol: str = "dlpack"):
        machine.device.set_current()
        self.machine, self.protocol = machine, protocol
        self.stream = machine.legacy if protocol == "cai" else machine.new_stream("a consumer's stream")
        self.read_back: list = []

    def take(self, array) -> Tensor:
        if self.protocol == "cai":
            cai = array.__cuda_array_interface__
            if cai["stream"] is not None:   # the protocol: order after the producer
                producer = self.machine.stream_of(cai["stream"])
                event = producer.record()
                self.stream.wait(event)
            return Tensor(array, cai["data"][0], tuple(cai["shape"]), np.dtype(cai["typestr"]))
        taken = Capsule(array.__dlpack__(stream=self.stream.handle, max_version=(1, 0)))
        return Tensor(taken, taken.pointer, taken.shape, taken.dtype)

    def read(self, tensor: Tensor) -> None:
        m = self.machine
        nbytes = int(np.prod(tensor.shape, dtype=np.int64)) * tensor.dtype.itemsize
        acc = m.access(tensor.pointer, nbytes, "r", "a consumer's kernel")
        slot = len(self.read_back)
        self.read_back.append(None)
        shape, dtype = tensor.shape, tensor.dtype   # not the tensor: the caller drops it

        def run():
            self.read_back[slot] = acc.block.memory[acc.start:acc.stop].copy() \
                .view(dtype).reshape(shape)
        m.enqueue(self.stream, "consumer kernel", run, [acc], name="a consumer's kernel")

    def results(self) -> list:
        self.machine.force(self.stream.tail())
        return self.read_back


# ----------------------------------------------------------------- install
@contextlib.contextmanager
def installed(seed: int = 0, progress: float = 0.3, check: bool = True):
    """The double as nbdata's GPU for the duration: ``runtime.backend()`` is a
    ``CudaBackend`` over the double, nvImageCodec is the double's, simulator kernels
    launched on its streams are queued there. Yields the Machine; at the end runs what
    is queued and raises CudaRulesError on any violation (``check``)."""
    from numba import cuda

    from nbdata.gpu import jpeg, runtime
    machine = Machine(seed, progress)
    machine.device.set_current()
    backend = runtime.CudaBackend(cuda, machine.core, machine.device, machine.driver)
    machine.backend = backend
    kernel_class, getitem = _launch_on_streams(machine)
    saved = (runtime._backend, jpeg._codec, kernel_class.__getitem__)
    runtime._backend = lambda: backend
    jpeg._codec = lambda: machine.nvimgcodec
    kernel_class.__getitem__ = getitem
    try:
        yield machine
        if check:
            machine.check()
    finally:
        runtime._backend, jpeg._codec, kernel_class.__getitem__ = saved
        machine.local.current = True


__all__ = ["Consumer", "CudaRulesError", "Machine", "installed"]
