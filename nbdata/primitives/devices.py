"""The ``nd.gpu`` batch ops: each is an op-table primitive (an ``nd.image`` op, an
``nd.io`` decoder) applied to every element of a batch in GPU memory.

Each takes a batch — a :class:`DeviceArray` of ``(n, ...)`` elements, or for the ops
that make images one size a :class:`RaggedBatch` — and returns a new one (one kernel
launch, through the GPU backend ``nbdata/compiler/backend_gpu.py``); inside a
``Dataset.map`` after ``prefetch_to_device`` it is recorded instead, and the ops of
consecutive maps become one fused kernel (``nbdata/ops/gpu_map.py``).

Random ops take ``seed`` as an int or ``(seed, counter)``: element ``j`` of the batch
draws with counter ``counter + j`` (in a pipeline: ``counter`` plus the element's index
since the start of the iteration), exactly as ``nd.image``'s op given
``seed=(seed, counter + j)`` does on the CPU.
"""

from __future__ import annotations

from typing import Callable

from nbdata.primitives import image
from nbdata.primitives import jpeg as io_jpeg
from nbdata.primitives import raw as io_raw
from nbdata.primitives.gpu import Apply, Chain, run_steps
from nbdata.primitives.table import define
from nbdata.spec import TensorSpec


def _batch_spec(step, x) -> TensorSpec:
    """The spec of a step applied to a batch tensor (a decoding step takes any batch;
    the others the elements of a device batch)."""
    spec = x.spec
    shape, dtype = tuple(spec.shape[1:]), spec.dtype
    if step.kind == "decode":
        return TensorSpec((spec.shape[0],) + step.out_shape(shape), step.out_dtype(dtype))
    chain = Chain([step], shape, dtype)
    return TensorSpec((spec.shape[0],) + tuple(chain.out_shape), chain.out_dtype)


def _batched(op: Callable, doc: str):
    """``nd.gpu.<name>``: the primitive ``op`` (its public function) on every element of
    a device batch, through its GPU step."""
    return _device_op(op.primitive.name, op.primitive.gpu, doc)


def _device_op(name: str, rule: Callable, doc: str):
    def run(x, *args, **kwargs):
        return run_steps([rule(*args, **kwargs)], x)

    run.__name__ = run.__qualname__ = name
    run.__doc__ = doc
    return define(run, name=f"gpu.{run.__name__}", gpu=rule, device=True,
                  abstract=lambda x, *args, **kwargs: _batch_spec(rule(*args, **kwargs), x))


cast = _batched(image.cast, """The batch converted to ``dtype`` (NumPy's ``astype`` for in-range values).

    >>> import numpy as np, nbdata as nd
    >>> x = nd.gpu.DeviceArray.from_host(np.arange(6, dtype=np.uint8).reshape(2, 3))
    >>> nd.gpu.cast(x, np.float32).copy_to_host()
    array([[0., 1., 2.],
           [3., 4., 5.]], dtype=float32)
    """)
normalize = _batched(image.normalize, """``(float32(x) - mean[c]) / std[c]`` for channel ``c`` (the last dim; of the
    (H, W, C) images in a chain that moves pixels), in float32: ``nd.image.normalize``'s
    values.""")
random_crop = _batched(image.random_crop, """A random ``(h, w)`` window of each (H, W, C) image (``size`` is ``(h, w)`` or
    ``(h, w, c)``), as ``nd.image.random_crop`` picks it.""")
random_flip_left_right = _batched(image.random_flip_left_right, """Each image mirrored left-right with probability 1/2, as
    ``nd.image.random_flip_left_right`` decides.""")
flip_left_right = _batched(image.flip_left_right, "Every image mirrored left-right.")
resize = _batched(image.resize, """Each image resized to ``size`` ``(h, w)``, float32, with ``tf.image.resize``'s
    bilinear (half-pixel) semantics, as ``nd.image.resize``.""")
random_resized_crop = _batched(image.random_resized_crop, """A random window of each image (``nd.image.random_resized_crop``'s) resized
    bilinearly to ``size``; only the window is read.""")
transpose = _batched(image.transpose, """Each element's dims permuted (``perm`` over the element dims, not the batch).""")
hwc_to_chw = _batched(image.hwc_to_chw, "(H, W, C) images to (C, H, W).")
adjust_brightness = _batched(image.adjust_brightness, """``nd.image.adjust_brightness`` of each image (``tf.image.adjust_brightness``).""")
random_brightness = _batched(image.random_brightness, """``nd.image.random_brightness`` of each image, element ``j`` drawing at counter
    ``counter + j``.""")
adjust_contrast = _batched(image.adjust_contrast, """``nd.image.adjust_contrast`` of each image: each image's channel means are
    computed first (TF's order of additions), then one kernel applies the contrast.""")
random_contrast = _batched(image.random_contrast, """``nd.image.random_contrast`` of each image, element ``j`` drawing at counter
    ``counter + j``.""")
adjust_saturation = _batched(image.adjust_saturation, """``nd.image.adjust_saturation`` of each RGB image.""")
rgb_to_grayscale = _batched(image.rgb_to_grayscale, """``nd.image.rgb_to_grayscale`` of each RGB image: (H, W, 1) images.""")
decode_raw = _batched(io_raw.decode_raw, """The bytes of each row of a uint8 batch ``(n, k)`` read as ``out_type`` values
    (the GPU's ``decode_raw`` of fixed-length records), shaped ``shape`` per element
    (default ``(k / itemsize,)``). No kernel: the same memory, viewed.""")
decode_jpeg = _batched(io_jpeg.decode_jpeg, """A batch of JPEG images (``bytes``) decoded on the GPU by NVIDIA nvImageCodec into
    one buffer of nbdata's device memory: a :class:`nbdata.gpu.jpeg.RaggedBatch` of
    uint8 (H, W, channels) images of their own sizes. ``channels``: 3 (RGB), 1 (gray)
    or 0 (as stored).

    Inside a ``map`` after ``prefetch_to_device`` (where the encoded images are a host
    component of the batch) it is the first step of a chain whose next op makes the
    images one size in the same kernel: ``resize``, ``random_resized_crop`` (only the
    window is read) or ``random_crop``. See ``nbdata/gpu/jpeg.py``.""")
apply = _device_op("apply", Apply, """``fn`` applied to every value, compiled as a numba-cuda device function.""")


__all__ = ["adjust_brightness", "adjust_contrast", "adjust_saturation", "apply", "cast",
           "decode_jpeg", "decode_raw", "flip_left_right", "hwc_to_chw", "normalize",
           "random_brightness", "random_contrast", "random_crop", "random_flip_left_right",
           "random_resized_crop", "resize", "rgb_to_grayscale", "transpose"]
