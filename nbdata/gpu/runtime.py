"""The GPU runtime: which backend runs, device and pinned memory, streams and events.

Two backends, chosen when first needed:

- ``cuda``: a real GPU. Memory, streams and events come from cuda-python's
  ``cuda.core`` (a stream-ordered device memory pool, pinned host buffers); kernels
  are numba-cuda's, launched on ``cuda.core`` streams. numba-cuda's host-side array
  API (``cuda.to_device``, ``DeviceNDArray``, its pinned allocators) is not used.
- ``sim``: numba-cuda's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1`` set before Numba
  is imported): "device" memory is host memory, copies are NumPy copies, kernels run
  as Python in the simulator. For tests of the kernels and the staging logic on
  machines without a GPU; it is slow, so only tiny shapes.

Nothing here is imported by ``import nbdata``; without numba-cuda or a GPU every
call raises :class:`nbdata.errors.UnavailableError` saying what is missing.
"""

from __future__ import annotations

import ctypes
import functools
import threading
import weakref
from typing import Any

import numpy as np

from nbdata.errors import UnavailableError

_INSTALL = "pip install 'nbdata[cuda]'"


def simulated() -> bool:
    """Whether Numba's CUDA simulator is on (``NUMBA_ENABLE_CUDASIM=1`` at import)."""
    import numba
    return bool(numba.config.ENABLE_CUDASIM)


def backend() -> "Backend":
    """The backend of this process (made once), with its device current on the calling
    thread; raises UnavailableError when neither a GPU nor the simulator can be used."""
    be = _backend()
    be.bind()
    return be


@functools.lru_cache(maxsize=None)
def _backend() -> "Backend":
    _numpy_names_for_numba_cuda()
    try:
        from numba import cuda
    except ImportError as e:   # pragma: no cover - numba always ships numba.cuda
        raise UnavailableError(f"nbdata.gpu needs numba-cuda ({_INSTALL}): {e}") from None
    if simulated():
        return SimBackend(cuda)
    try:
        import cuda.core as core
        import cuda.core.utils  # noqa: F401 - StridedMemoryView for DLPack exports
        from cuda.bindings import driver
    except ImportError as e:
        raise UnavailableError(f"nbdata.gpu needs cuda-python's cuda.core ({_INSTALL}): {e}") from None
    try:
        device = core.Device(0)
        device.set_current()
    except Exception as e:  # noqa: BLE001 - no driver, no GPU: cuda.core raises several types
        raise UnavailableError(f"nbdata.gpu: no usable CUDA GPU ({type(e).__name__}: {e})") from None
    return CudaBackend(cuda, core, device, driver)


def _numpy_names_for_numba_cuda() -> None:
    """numba-cuda (0.30.4 and before) registers an overload of ``np.row_stack`` when its
    array typing first loads, at the first kernel compile; NumPy 2.5 removed that alias
    of ``np.vstack``, so every compile raised AttributeError there. Restore the alias
    (only where it is missing) before numba-cuda needs it."""
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack


def available() -> bool:
    """Whether GPU calls can run here (a CUDA GPU, or the simulator)."""
    try:
        backend()
    except UnavailableError:
        return False
    return True


def device_index(device: Any) -> int:
    """The GPU index of ``"cuda"``, ``"cuda:1"``, ``"gpu:0"``, ``"/gpu:0"`` or an int."""
    if isinstance(device, (int, np.integer)):
        return int(device)
    text = str(device).strip().lower().lstrip("/").removeprefix("device:")
    name, _, index = text.partition(":")
    if name not in ("cuda", "gpu") or (index and not index.isdigit()):
        raise ValueError(f"not a GPU device: {device!r} (use 'cuda:0', 'gpu:0' or an index)")
    return int(index or 0)


class Backend:
    """What the GPU code needs from a backend."""

    name = "backend"

    def alloc(self, nbytes: int, stream=None) -> Any:
        """Device memory of ``nbytes`` (freed when the returned object is dropped)."""
        raise NotImplementedError

    def pinned(self, nbytes: int) -> tuple[Any, np.ndarray]:
        """Pinned host memory: (owner, uint8 NumPy view of it)."""
        raise NotImplementedError

    def bind(self) -> None:
        """Make the device current on the calling thread (kernels and decodes may run on
        a pipeline's background threads)."""

    def stream(self) -> Any:
        raise NotImplementedError

    def event(self, stream, timing: bool = False) -> Any:
        """An event recorded now on ``stream`` (``timing``: one elapsed time is read from)."""
        raise NotImplementedError


class SimBackend(Backend):
    """The simulator: device buffers are NumPy arrays, streams and events are trivial
    (everything is synchronous)."""

    name = "sim"

    def __init__(self, cuda):
        self.cuda = cuda
        self.device_id = 0

    def alloc(self, nbytes: int, stream=None) -> np.ndarray:
        return np.empty(nbytes, np.uint8)

    def pinned(self, nbytes: int):
        buf = np.empty(nbytes, np.uint8)
        return buf, buf

    def copy_h2d(self, dst, src: np.ndarray, stream) -> None:
        dst[:src.nbytes] = src.reshape(-1).view(np.uint8)

    def copy_d2h(self, dst: np.ndarray, src, nbytes: int, stream) -> None:
        dst.reshape(-1).view(np.uint8)[:nbytes] = src[:nbytes]

    def stream(self):
        return None

    def event(self, stream, timing: bool = False):
        return None

    def transfer_stream(self):
        return None

    def compute_stream(self):
        return None

    def decode_stream(self):
        return None

    def wait(self, stream, event) -> None:
        pass

    def sync(self, event_or_stream) -> None:
        pass

    def elapsed_ms(self, start, end) -> float | None:
        return None

    def host_view(self, buf, nbytes: int) -> np.ndarray:
        """The memory of a device buffer as a uint8 array kernels take (simulator only)."""
        return buf[:nbytes]

    def pointer(self, buf) -> int:
        return int(buf.ctypes.data)


class CudaBackend(Backend):
    """A real GPU through cuda.core (memory, streams, events), the driver's calls of
    cuda-bindings (``driver``: copies, raw events and waits) and numba-cuda (kernels).
    The three are passed in, so tests can run the same code against a stand-in that
    enforces CUDA's rules (tests/gpu/cuda_rules.py)."""

    name = "cuda"

    def __init__(self, cuda, core, device, driver):
        self.cuda, self.core, self.device, self.driver = cuda, core, device, driver
        self.device_id = int(device.device_id)
        self.local = threading.local()
        self.pool = core.DeviceMemoryResource(device)
        self.pinned_pool = core.LegacyPinnedMemoryResource()
        self.default = device.create_stream()

    def bind(self) -> None:
        """The device's primary context current on the calling thread, once per thread:
        CUDA's current context is per thread, and pipelines allocate, copy, decode and
        launch on their background threads (prefetch producers, the staging thread,
        parallel maps). Every method below that calls CUDA binds first."""
        if not getattr(self.local, "bound", False):
            self.device.set_current()
            self.local.bound = True

    def alloc(self, nbytes: int, stream=None) -> "Memory":
        self.bind()
        stream = stream or self.default
        return Memory(self, self.pool.allocate(max(1, nbytes), stream=stream), stream)

    def pinned(self, nbytes: int):
        self.bind()
        buf = self.pinned_pool.allocate(max(1, nbytes))
        # A writable view of the pinned bytes (arrays from DLPack may be read-only).
        memory = (ctypes.c_uint8 * max(1, nbytes)).from_address(int(buf.handle))
        return buf, np.ctypeslib.as_array(memory)[:nbytes]

    def copy_h2d(self, dst, src: np.ndarray, stream) -> None:
        self.bind()
        self.call("cuMemcpyHtoDAsync", int(dst.handle), int(src.ctypes.data), src.nbytes,
                int(stream.handle))

    def copy_d2h(self, dst: np.ndarray, src, nbytes: int, stream) -> None:
        self.bind()
        self.call("cuMemcpyDtoHAsync", int(dst.ctypes.data), int(src.handle), nbytes,
                int(stream.handle))

    def stream(self):
        self.bind()
        return self.device.create_stream(options=self.core.StreamOptions(nonblocking=True))

    def event(self, stream, timing: bool = False):
        """An event recorded now on ``stream``; ``timing`` only where elapsed time is
        reported (a timing event is slower to record and wait on)."""
        self.bind()
        return stream.record(options=self.core.EventOptions(timing_enabled=bool(timing)))

    def transfer_stream(self):
        """This thread's stream for synchronous copies (``copy_to_host``), made once per
        thread instead of once per copy."""
        return self._thread_stream("transfer")

    def compute_stream(self):
        """This thread's stream for nbdata's kernels: not the staging stream, whose queue
        holds the next batches' copies, so kernels and copies overlap (a kernel waits
        only for its own batch's event)."""
        return self._thread_stream("compute")

    def decode_stream(self):
        """This thread's stream for decoding into device memory (nd.gpu.decode_jpeg): not
        the compute stream, so one batch's decode overlaps the kernel of the batch before
        it, and one per thread, so batches decoded on several threads at once overlap."""
        return self._thread_stream("decode")

    def _thread_stream(self, role: str):
        self.bind()
        stream = getattr(self.local, role, None)
        if stream is None:
            stream = self.stream()
            setattr(self.local, role, stream)
        return stream

    def wait(self, stream, event) -> None:
        if event is not None:
            self.bind()
            stream.wait(event)

    def sync(self, event_or_stream) -> None:
        if event_or_stream is not None:
            self.bind()
            event_or_stream.sync()

    def elapsed_ms(self, start, end) -> float | None:
        return float(end - start)

    def pointer(self, buf) -> int:
        return int(buf.handle)

    def call(self, name: str, *args) -> None:
        """Calls the CUDA driver's function ``name``; InternalError when it fails."""
        (err,) = getattr(self.driver, name)(*args)
        if int(err) != 0:
            from nbdata.errors import InternalError
            raise InternalError(f"{name} failed: CUresult {int(err)}")


class Memory:
    """Device memory from the pool, released in stream order after every consumer.

    The pool frees a block in order on one stream; a consumer that took the memory (a
    DLPack tensor on its own stream, a CUDA array interface user) may still have
    kernels queued that read it when it drops it. So each consumer's stream is noted
    (:meth:`used_on`) and the release records an event on each of them that the
    release stream waits on before the free (what torch's ``record_stream`` does): the
    next allocation of the block cannot overwrite data a consumer still reads.

    The release stream is the allocation stream until one of nbdata's kernels reads
    the memory (:meth:`read_on`): then the free goes on the kernel's stream, after it.
    Freed on the allocation stream instead, the free would make that stream wait for
    the kernel, and so would everything queued there after it: the next batch's decode
    or copy would wait for this batch's kernel instead of overlapping it."""

    def __init__(self, backend: "CudaBackend", buffer, stream):
        self.buffer = buffer
        self.handle = buffer.handle
        self.size = getattr(buffer, "size", None)
        self.consumers: set = set()
        # the stream the free goes on; whether it moved off the allocation stream; the
        # streams it moved off since (kept alive, so their handles stay valid until then)
        self.release = [stream, False, []]
        weakref.finalize(self, _release, backend, buffer, self.release, self.consumers)

    def used_on(self, stream_handle: int) -> None:
        """Order the release after the work queued on ``stream_handle`` (a driver handle:
        1 the legacy default stream, 2 the per-thread one, else a ``CUstream``)."""
        self.consumers.add(int(stream_handle))

    def read_on(self, stream) -> None:
        """One of nbdata's kernels reads the memory on ``stream``, queued after every
        write to it (it waited for the array's ready event): the free goes on
        ``stream``, after that kernel. A stream that had this role before becomes a
        consumer (its kernel may still run); the allocation stream does not, as its
        writes come before the ready event the kernel waited for."""
        with _RELEASE_LOCK:   # (kernels on several threads may read one batch)
            current, moved, earlier = self.release
            if current is stream:
                return
            if moved:
                earlier.append(current)
                self.consumers.add(int(current.handle))
            self.release[:2] = [stream, True]


_RELEASE_LOCK = threading.Lock()


def _release(backend: "CudaBackend", buffer, release: list, consumers: set) -> None:
    """Free ``buffer`` on its release stream after the work queued so far on each
    consumer stream (runs when the last reference goes, on whichever thread that is)."""
    try:
        backend.bind()
        stream = release[0]
        own = int(stream.handle)
        if consumers:
            driver = backend.driver
            for handle in consumers:
                if handle == own:
                    continue   # in stream order already
                err, event = driver.cuEventCreate(0x2)   # CU_EVENT_DISABLE_TIMING
                if int(err) != 0:
                    stream.sync()   # no event: wait for everything before reusing the block
                    continue
                driver.cuEventRecord(event, handle)
                driver.cuStreamWaitEvent(own, event, 0)
                driver.cuEventDestroy(event)
        buffer.close(stream)
    except Exception:  # noqa: BLE001 - at interpreter exit the driver may be gone
        pass


__all__ = ["Backend", "available", "backend", "device_index", "simulated"]
