"""The ``nd.gpu`` batch ops. Each takes a batch — a :class:`DeviceArray` of
``(n, ...)`` elements — and returns a new one (one kernel launch); inside a
``Dataset.map`` after ``prefetch_to_device`` it records a step instead, and the
steps of consecutive maps become one fused kernel (``nbdata/gpu/ops.py``).

Random ops take ``seed`` as an int or ``(seed, counter)``: element ``j`` of the batch
draws with counter ``counter + j`` (in a pipeline: ``counter`` plus the element's index
since the start of the iteration), exactly as ``nd.image``'s op given
``seed=(seed, counter + j)`` does on the CPU.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from nbdata.gpu import ops


class GpuValue:
    """A batch leaf while a map function after ``prefetch_to_device`` is traced: the
    ``nd.gpu`` ops called on it are recorded as steps of a chain."""

    def __init__(self, leaf: int, chain: "ops.Chain", decode: tuple | None = None):
        self.leaf = leaf
        self.chain = chain
        self.decode = decode     # (dtype, shape) of a decode_raw before the steps

    @property
    def shape(self) -> tuple:
        return (None,) + tuple(self.chain.out_shape)

    @property
    def dtype(self) -> np.dtype:
        return self.chain.out_dtype

    def then(self, step: "ops.Step") -> "GpuValue":
        return GpuValue(self.leaf, self.chain.then(step), self.decode)

    def _refuse(self, *args, **kwargs):
        raise TypeError("after prefetch_to_device, map functions apply nd.gpu ops to device "
                        "batches (nd.gpu.normalize, ...); other operations on them run nowhere")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _refuse
    __getitem__ = __iter__ = __array__ = __array_ufunc__ = __array_function__ = __bool__ = _refuse
    __hash__ = None


def _apply(x, step: "ops.Step"):
    if isinstance(x, GpuValue):
        return x.then(step)
    from nbdata.gpu.array import DeviceArray
    from nbdata.gpu.jpeg import RaggedBatch
    if isinstance(x, RaggedBatch):
        chain = ops.Chain([step], (None, None, x.shape[3]), x.dtype)
        return ops.run_chain(chain, x)
    if not isinstance(x, DeviceArray):
        raise TypeError(f"nd.gpu.{step.name}: expects a DeviceArray batch (from "
                        f"prefetch_to_device or nd.gpu.DeviceArray.from_host), got "
                        f"{type(x).__name__}")
    if x.ndim < 1:
        raise ValueError(f"nd.gpu.{step.name}: expects a batch, got a 0-d array")
    chain = ops.Chain([step], x.shape[1:], x.dtype)
    return ops.run_chain(chain, x)


def cast(x, dtype):
    """The batch converted to ``dtype`` (NumPy's ``astype`` for in-range values).

    >>> import numpy as np, nbdata as nd
    >>> x = nd.gpu.DeviceArray.from_host(np.arange(6, dtype=np.uint8).reshape(2, 3))
    >>> nd.gpu.cast(x, np.float32).copy_to_host()
    array([[0., 1., 2.],
           [3., 4., 5.]], dtype=float32)
    """
    return _apply(x, ops.Cast(dtype))


def normalize(x, mean, std):
    """``(float32(x) - mean[c]) / std[c]`` for channel ``c`` (the last dim; of the (H, W, C)
    images in a chain that moves pixels), in float32 — ``nd.image.normalize``'s values."""
    return _apply(x, ops.Normalize(mean, std))


def random_crop(x, size, seed):
    """A random ``(h, w)`` window of each (H, W, C) image (``size`` is ``(h, w)`` or
    ``(h, w, c)``), as ``nd.image.random_crop`` picks it."""
    return _apply(x, ops.RandomCrop(size, seed))


def random_flip_left_right(x, seed):
    """Each image mirrored left-right with probability 1/2, as
    ``nd.image.random_flip_left_right`` decides."""
    return _apply(x, ops.Flip(seed))


def flip_left_right(x):
    """Every image mirrored left-right."""
    return _apply(x, ops.Flip(None, always=True))


def resize(x, size, method: str = "bilinear"):
    """Each image resized to ``size`` ``(h, w)``, float32, with ``tf.image.resize``'s
    bilinear (half-pixel) semantics, as ``nd.image.resize``."""
    return _apply(x, ops.Resize(size, method))


def random_resized_crop(x, size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), seed=None):
    """A random window of each image (``nd.image.random_resized_crop``'s) resized
    bilinearly to ``size``; only the window is read."""
    return _apply(x, ops.RandomResizedCrop(size, scale, ratio, seed))


def transpose(x, perm):
    """Each element's dims permuted (``perm`` over the element dims, not the batch)."""
    return _apply(x, ops.Transpose(perm))


def hwc_to_chw(x):
    """(H, W, C) images to (C, H, W)."""
    return _apply(x, ops.Transpose((2, 0, 1)))


def apply(x, fn: Callable):
    """``fn`` applied to every value, compiled as a numba-cuda device function."""
    return _apply(x, ops.Apply(fn))


def decode_raw(x, out_type, shape: Any = None):
    """The bytes of each row of a uint8 batch ``(n, k)`` read as ``out_type`` values (the
    GPU's ``decode_raw`` of fixed-length records), shaped ``shape`` per element (default
    ``(k / itemsize,)``). No kernel: the same memory, viewed."""
    dtype = np.dtype(out_type)
    if isinstance(x, GpuValue):
        if x.chain.steps or x.decode is not None:
            raise ValueError("nd.gpu.decode_raw must come first in a chain of GPU ops")
        if x.chain.dtype != np.uint8 or len(x.chain.shape) != 1:
            raise TypeError(f"nd.gpu.decode_raw: expects (n, k) uint8 batches, got {x.chain.dtype} "
                            f"elements of shape {x.chain.shape}")
        elem = _decoded_shape(x.chain.shape[0], dtype, shape)
        return GpuValue(x.leaf, ops.Chain([], elem, dtype), (dtype, elem))
    if x.dtype != np.uint8 or x.ndim != 2:
        raise TypeError(f"nd.gpu.decode_raw: expects an (n, k) uint8 batch, got {x.dtype} {x.shape}")
    return x.view(dtype, (x.shape[0],) + _decoded_shape(x.shape[1], dtype, shape))


class JpegDecode:
    """A chain's first step decoding JPEG bytes (a host leaf) into images of their own
    sizes; ``channels`` as ``nd.gpu.decode_jpeg`` takes it."""

    def __init__(self, channels: int):
        self.channels = channels

    def __eq__(self, other) -> bool:
        return isinstance(other, JpegDecode) and other.channels == self.channels

    def __hash__(self) -> int:
        return hash(("jpeg", self.channels))

    def __repr__(self) -> str:
        return f"decode_jpeg(channels={self.channels})"


def decode_jpeg(contents, channels: int = 3):
    """A batch of JPEG images (``bytes``) decoded on the GPU by NVIDIA nvImageCodec into
    one buffer of nbdata's device memory: a :class:`nbdata.gpu.jpeg.RaggedBatch` of
    uint8 (H, W, channels) images of their own sizes. ``channels``: 3 (RGB), 1 (gray)
    or 0 (as stored).

    Inside a ``map`` after ``prefetch_to_device`` (where the encoded images are a host
    component of the batch) it is the first step of a chain whose next op makes the
    images one size in the same kernel: ``resize``, ``random_resized_crop`` (only the
    window is read) or ``random_crop``. See ``nbdata/gpu/jpeg.py``.
    """
    from nbdata.gpu import jpeg
    from nbdata.gpu.map import _Host
    if isinstance(contents, _Host):
        channels = jpeg._check_channels(channels)
        if channels == 0:
            raise ValueError("nd.gpu.decode_jpeg: inside a map, pass channels=3 or 1 (the ops "
                             "after it need one channel count)")
        return GpuValue(contents.index, ops.Chain([], (None, None, channels), np.uint8),
                        JpegDecode(channels))
    if isinstance(contents, GpuValue):
        raise TypeError("nd.gpu.decode_jpeg: takes the encoded images (a host component of "
                        "the batch: strings stay on the host), not a device array")
    return jpeg.decode_jpeg(contents, channels)


def _decoded_shape(nbytes: int, dtype: np.dtype, shape) -> tuple:
    if nbytes % dtype.itemsize:
        raise ValueError(f"nd.gpu.decode_raw: {nbytes} bytes is not a multiple of the size of "
                         f"{dtype} ({dtype.itemsize})")
    count = nbytes // dtype.itemsize
    if shape is None:
        return (count,)
    shape = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    if int(np.prod(shape, dtype=np.int64)) != count:
        raise ValueError(f"nd.gpu.decode_raw: {count} values do not fill shape {shape}")
    return shape


__all__ = ["GpuValue", "JpegDecode", "apply", "cast", "decode_jpeg", "decode_raw", "flip_left_right", "hwc_to_chw",
           "normalize", "random_crop", "random_flip_left_right", "random_resized_crop", "resize",
           "transpose"]
