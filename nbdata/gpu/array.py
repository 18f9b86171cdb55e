"""``nd.gpu.DeviceArray``: an array in GPU memory that PyTorch, JAX and CuPy take without
a copy (``__cuda_array_interface__`` v3 and DLPack), with its readiness event."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nbdata.gpu import runtime


class DeviceArray:
    """A C-contiguous array in device memory.

    Attributes:
        shape, dtype, strides (bytes), size, ndim, nbytes: as for NumPy arrays.
        device: the GPU index.

    The memory comes from the device's stream-ordered pool and goes back to it when
    the last reference (this object, or a view of it, or a consumer's DLPack tensor)
    is dropped. Work that produced the array may still be running on ``stream``;
    ``__cuda_array_interface__`` and ``__dlpack__`` order consumers after it (an
    event, waited on by the consumer's stream), and ``copy_to_host()`` waits for it.

    Under the CUDA simulator the memory is host memory: ``__dlpack_device__`` then
    says CPU, and ``__cuda_array_interface__`` is only for nbdata's own kernels.
    """

    def __init__(self, buffer: Any, shape: tuple, dtype, offset: int = 0, ready=None,
                 stream=None):
        self.buffer = buffer
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.offset = int(offset)
        self.ready = ready        # event after which the data is complete (None: now)
        self.stream = stream      # the stream that wrote it
        self._backend = runtime.backend()

    @classmethod
    def empty(cls, shape: tuple, dtype, stream=None) -> "DeviceArray":
        """Uninitialized device memory for ``shape`` and ``dtype``."""
        nbytes = math.prod(int(d) for d in shape) * np.dtype(dtype).itemsize
        return cls(runtime.backend().alloc(nbytes, stream), shape, dtype, stream=stream)

    @classmethod
    def from_host(cls, array: np.ndarray, stream=None) -> "DeviceArray":
        """A copy of a host array (synchronous unless ``array`` is pinned memory)."""
        array = np.ascontiguousarray(array)
        out = cls.empty(array.shape, array.dtype, stream)
        be = out._backend
        stream = stream if stream is not None else getattr(be, "default", None)
        be.copy_h2d(out.buffer, array, stream)
        out.ready, out.stream = be.event(stream), stream
        return out

    # ------------------------------------------------------------ properties
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def strides(self) -> tuple:
        strides, step = [], self.dtype.itemsize
        for d in reversed(self.shape):
            strides.append(step)
            step *= d
        return tuple(reversed(strides))

    @property
    def device(self) -> int:
        return self._backend.device_id

    @property
    def pointer(self) -> int:
        return self._backend.pointer(self.buffer) + self.offset

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d DeviceArray")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, device={self.device})"

    # ------------------------------------------------------------- views
    def view(self, dtype=None, shape=None) -> "DeviceArray":
        """The same bytes as another dtype and/or shape (no copy); the byte size must
        match."""
        dtype = self.dtype if dtype is None else np.dtype(dtype)
        if shape is None:   # the last dimension's bytes (a 0-d array's) as ``dtype``
            last = self.shape[-1] * self.dtype.itemsize if self.shape else self.nbytes
            if last % dtype.itemsize:
                raise ValueError(f"cannot view {self.dtype} {self.shape} as {dtype}")
            shape = self.shape[:-1] + (last // dtype.itemsize,)
        shape = tuple(int(d) for d in shape)
        if math.prod(shape) * dtype.itemsize != self.nbytes:
            raise ValueError(f"cannot view {self.nbytes} bytes as {dtype} {shape}")
        return DeviceArray(self.buffer, shape, dtype, self.offset, self.ready, self.stream)

    def reshape(self, *shape) -> "DeviceArray":
        shape = list(shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape)
        if shape.count(-1) == 1:
            known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
            shape[shape.index(-1)] = self.size // max(known, 1)
        return self.view(self.dtype, tuple(shape))

    def __getitem__(self, index) -> "DeviceArray":
        """Rows of the leading dimension: an int or a step-1 slice (no copy)."""
        if isinstance(index, (int, np.integer)):
            i = int(index) + (self.shape[0] if index < 0 else 0)
            if not 0 <= i < self.shape[0]:
                raise IndexError(f"index {index} is out of bounds for axis 0 with size {self.shape[0]}")
            return DeviceArray(self.buffer, self.shape[1:], self.dtype,
                               self.offset + i * self.strides[0], self.ready, self.stream)
        if isinstance(index, slice):
            start, stop, step = index.indices(self.shape[0])
            if step != 1:
                raise IndexError("DeviceArray rows can be sliced with step 1 only")
            stop = max(stop, start)
            return DeviceArray(self.buffer, (stop - start,) + self.shape[1:], self.dtype,
                               self.offset + start * self.strides[0], self.ready, self.stream)
        raise IndexError("DeviceArray supports an int or a slice of its first dimension")

    # ---------------------------------------------------------- transfer
    def copy_to_host(self) -> np.ndarray:
        """A NumPy copy of the array (after the work that produces it)."""
        out = np.empty(self.shape, self.dtype)
        be = self._backend
        stream = be.transfer_stream()
        be.wait(stream, self.ready)
        if self.nbytes:
            be.copy_d2h(out, self._region(), self.nbytes, stream)
        be.sync(stream)
        return out

    def _region(self):
        """The buffer from this array's first byte (what copies read)."""
        if self._backend.name == "sim":
            return self.buffer[self.offset:]
        if not self.offset:
            return self.buffer
        return self._backend.core.Buffer.from_handle(self.pointer, self.nbytes, owner=self.buffer)

    def host_view(self) -> np.ndarray:
        """Simulator only: the memory as a NumPy array of this shape and dtype (what
        simulated kernels are given)."""
        if self._backend.name != "sim":
            raise TypeError("host_view() is for the CUDA simulator; use copy_to_host()")
        return self.buffer[self.offset:self.offset + self.nbytes].view(self.dtype).reshape(self.shape)

    # ---------------------------------------------------------- protocols
    @property
    def __cuda_array_interface__(self) -> dict:
        """CUDA Array Interface v3. ``stream`` is the stream that wrote the array (its
        consumers synchronize on it or queue their work after it), or None when the data
        is complete. A consumer of the interface does not say its own stream, so the
        memory's release waits for the legacy default stream (where PyTorch and CuPy
        queue work unless told otherwise)."""
        self._consumed_on(_CU_STREAM_LEGACY)
        return self.interface()

    def interface(self) -> dict:
        """The CUDA Array Interface for nbdata's own kernels (ordered by nbdata: no
        consumer stream to wait for at release)."""
        stream = None
        if self.ready is not None and self._backend.name == "cuda" and not self.ready.is_done:
            stream = int(self.stream.handle)
        return {"shape": self.shape, "typestr": self.dtype.str,
                "data": (self.pointer if self.nbytes else 0, False), "version": 3,
                "strides": None, "stream": stream}

    def __dlpack_device__(self) -> tuple[int, int]:
        if self._backend.name == "sim":
            return (1, 0)   # kDLCPU: simulated device memory is host memory
        return (2, self.device)   # kDLCUDA

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule of the memory (no copy). ``stream`` is the consumer's stream
        (an int: 1 the legacy default stream, 2 the per-thread default, else a
        ``cudaStream_t``; -1 no ordering): it is made to wait for the work that
        produced the array, as the protocol asks."""
        if copy:
            raise BufferError("DeviceArray.__dlpack__ does not copy")
        be = self._backend
        if be.name == "sim":
            return self.host_view().__dlpack__(max_version=max_version) if max_version \
                else self.host_view().__dlpack__()
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"DeviceArray lives on {self.__dlpack_device__()}, not {dl_device}")
        if stream != -1 and self.ready is not None:
            _order_after(be, stream, self.ready)
        self._consumed_on(_DLPACK_STREAMS.get(stream, stream))
        buf = be.core.Buffer.from_handle(self.pointer, max(1, self.nbytes), owner=self)
        view = be.core.utils.StridedMemoryView.from_buffer(buf, self.shape, None, dtype=self.dtype)
        if max_version is None or tuple(max_version) < (1, 0):
            return view.__dlpack__()
        return view.__dlpack__(max_version=(1, 0))

    def _read_by_kernel_on(self, stream) -> None:
        """One of nbdata's kernels reads the array on ``stream`` after its ready event:
        the memory is freed on that stream, after the kernel (Memory.read_on)."""
        read_on = getattr(self.buffer, "read_on", None)
        if read_on is not None:
            read_on(stream)

    def _consumed_on(self, stream_handle) -> None:
        """Note that a consumer's stream uses the memory (its release waits for it)."""
        used_on = getattr(self.buffer, "used_on", None)
        if used_on is not None and stream_handle not in (None, -1):
            used_on(stream_handle)

    def __array__(self, dtype=None, copy=None):
        if copy is False:
            raise ValueError("a DeviceArray cannot be viewed as a NumPy array without a copy")
        out = self.copy_to_host()
        return out if dtype is None else out.astype(dtype)


_CU_STREAM_LEGACY = 1
_CU_STREAM_PER_THREAD = 2
_DLPACK_STREAMS = {None: _CU_STREAM_LEGACY, 1: _CU_STREAM_LEGACY, 2: _CU_STREAM_PER_THREAD}


def _order_after(be, stream, event) -> None:
    """Make the consumer's stream (a DLPack stream number) wait for ``event``."""
    be.bind()
    # DLPack's stream numbers: None and 1 are the legacy default stream, 2 the per-thread
    # default stream; the driver's handles for them are CU_STREAM_LEGACY (1) and
    # CU_STREAM_PER_THREAD (2). (Handle 0 would be the default stream as the calling
    # thread's compilation mode picks it, not necessarily the consumer's.)
    handle = _DLPACK_STREAMS.get(stream, stream)
    (err,) = be.driver.cuStreamWaitEvent(handle, int(event.handle), 0)
    if int(err) != 0:
        event.sync()


__all__ = ["DeviceArray"]
