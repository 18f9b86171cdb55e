"""GPU steps: how a primitive applies to every element of a device batch inside one fused
GPU kernel.

A primitive's ``gpu`` rule (``nbdata/primitives/table.py``) makes a :class:`Step` from
the call's arguments after the batch. A :class:`Chain` is the steps one output leaf of
a map after ``prefetch_to_device`` applies to one input leaf; the GPU backend
(``nbdata/compiler/backend_gpu.py``) writes it as ONE numba-cuda kernel with one thread
per output value: the value is read from the source batch through every step, each
step wrapping the *sampler* of its input, ``(y, x, c) -> value expression``, with its
own code (a crop shifts the coordinates, a flip mirrors them, a resize blends four
source pixels, a color op reads the channels of its pixel, a value op transforms the
value). A step that needs a whole image (a reduction: contrast's channel means) cuts
the chain: what comes before it is written to a buffer, the reduction runs, and a second
kernel goes on from the buffer.

Randomness is the CPU's: each random step draws its per-element parameters on the host
with the same counter-based functions as ``nd.image`` (``seed=(seed, counter)``, the
counter being the element's index), and the kernel reads them from small per-batch
arrays. So a chain equals the ``nd.image`` ops for the same seeds: exactly for crops,
flips, casts and normalize; float arithmetic is the same float32 operations in the same
order (a GPU may contract a multiply-add: within 1e-5 relative then).
"""

from __future__ import annotations

import numpy as np

from nbdata.plugins import provided


class Step:
    """One op of a chain. ``kind``: ``"value"`` (the value at the same position),
    ``"spatial"`` (reads other pixels of (H, W, C) images), ``"pixel"`` (reads every
    channel of its pixel), ``"layout"`` (permutes dims), ``"reduce"`` (needs the
    per-image channel means of its input: cuts the chain) or ``"decode"`` (makes the
    chain's source from another value: first only). ``uniforming`` steps make images
    of their own sizes one size. ``param_count`` per-element arrays (:meth:`params`)
    and ``constant_count`` per-channel arrays (:meth:`constants`) reach the kernel."""

    name = "step"
    kind = "value"
    uniforming = False
    param_count = 0
    constant_count = 0

    def mean_scale(self, dtype: np.dtype) -> float:
        """A reduction's scale of its input values (the channel means the kernel gets, as
        its first parameter, are of ``float32(x) * mean_scale``)."""
        raise NotImplementedError

    def out_shape(self, shape: tuple) -> tuple:
        return shape

    def out_dtype(self, dtype: np.dtype) -> np.dtype:
        return dtype

    def params(self, shape: tuple, seed_base: int, n: int, sizes=None) -> list:
        """Per-element parameter arrays for ``n`` elements whose first has counter
        ``seed_base`` (``sizes``: each image's (H, W, C) when they differ)."""
        return []

    def constants(self, channels: int) -> list:
        return []

    def sampler(self, g, names: list, in_shape: tuple, inner):
        """This step's sampler over its input's: ``g`` is the kernel emitter (``emit``,
        ``fresh``, ``device_function``), ``names`` the kernel parameters of this step
        (params, then constants), ``in_shape`` the input element's shape (an image's
        dims may be expressions, for images of their own sizes)."""
        raise NotImplementedError

    def describe(self) -> str:
        return self.name


def check_image(name: str, shape: tuple) -> tuple:
    if len(shape) != 3:
        raise ValueError(f"nd.gpu.{name}: expects a batch of (H, W, C) images, got elements of "
                         f"shape {shape}")
    return shape


def seed_pair(op: str, seed) -> tuple[int, int]:
    """``(seed, counter)`` of a GPU random op: an int seed counts from 0; the counter of
    an element is this first counter plus its index since the start of the iteration
    (or in the batch, for a direct call)."""
    if isinstance(seed, (tuple, list, np.ndarray)):
        if len(seed) != 2:
            raise ValueError(f"nd.gpu.{op}: seed is an int or (seed, counter)")
        return int(seed[0]), int(seed[1])
    if seed is None:
        raise ValueError(f"nd.gpu.{op}: a seed is required (an int or (seed, counter))")
    return int(seed), 0


def f32(value: float) -> str:
    """A float32 constant in kernel source."""
    value = float(np.float32(value))
    if not np.isfinite(value):
        return "numba.float32(math.nan)" if np.isnan(value) else \
            f"numba.float32({'' if value > 0 else '-'}math.inf)"
    return f"numba.float32({value!r})"


def type_name(dtype) -> str:
    """The numba scalar type of a dtype in kernel source (``numba.float32``)."""
    dtype = np.dtype(dtype)
    return f"numba.{'bool_' if dtype == np.bool_ else dtype.name}"


def bilinear_source(g, index: str, scale: str, size: str):
    """TF's half-pixel bilinear source of an output row or column: (lower, upper,
    float32 weight of upper), the float32 operations of ``nd.image``'s resize in its
    order."""
    src, fl = g.fresh("src"), g.fresh("fl")
    lo, hi, lerp = g.fresh("lo"), g.fresh("hi"), g.fresh("lerp")
    g.emit(f"{src} = (numba.float32({index}) + numba.float32(0.5)) * {scale} - numba.float32(0.5)")
    g.emit(f"{fl} = numba.float32(math.floor({src}))")
    g.emit(f"{hi} = min(int(math.ceil({src})), {size} - 1)")
    g.emit(f"{lo} = min(max(int({fl}), 0), {hi})")
    g.emit(f"{lerp} = {src} - {fl}")
    return lo, hi, lerp


def run_steps(steps: list, batch, seed_base: int = 0):
    """``steps`` applied to a device batch by the GPU backend (one kernel per chain;
    ``nbdata/compiler/backend_gpu.py``, above the op table)."""
    return provided("gpu_runner")(steps, batch, seed_base)


def decode_first(decode, steps: list, x, seed_base: int) -> tuple:
    """A decoding step's batch and the steps left to run on it: where the next step is a
    random_resized_crop and region decode is on (``NBDATA_GPU_JPEG_ROI=1``, nvImageCodec
    with regions), only each image's crop window is decoded and the crop becomes a
    resize of it (the same float32 operations over the same window)."""
    first = steps[0] if steps else None
    if first is not None and hasattr(first, "windows") and hasattr(decode, "channels"):
        from nbdata.gpu import jpeg
        if jpeg.roi_enabled():
            batch = decode.decode(x, windows=first.windows(seed_base))
            if getattr(batch, "windowed", False):
                return batch, [first.resized()] + list(steps[1:])
            return batch, list(steps)
    return decode.decode(x), list(steps)


class Chain:
    """Steps applied in order to the elements (of ``shape`` and ``dtype``) of one batch
    leaf. Images of their own sizes (``shape`` (None, None, C), decode_jpeg's batches)
    must be made one size by the first step."""

    def __init__(self, steps: list, shape: tuple, dtype):
        self.steps = list(steps)
        self.shape = tuple(None if d is None else int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.ragged = any(d is None for d in self.shape[:2])
        if self.ragged and self.steps and not self.steps[0].uniforming:
            raise ValueError(
                f"nd.gpu.{self.steps[0].name}: the images of a batch from decode_jpeg differ in "
                "size; make them one size first (nd.gpu.resize, random_resized_crop or "
                "random_crop)")
        shapes, dtypes = [self.shape], [self.dtype]
        transposed = False
        halved = None
        for s in self.steps:
            if halved is not None and s.kind != "layout":
                raise ValueError(f"nd.gpu.{s.name} after a cast to {halved}: cast to float16 or "
                                 "bfloat16 last (a transpose may follow)")
            halved = halved or getattr(s, "bits", None)
            if s.kind in ("spatial", "pixel", "reduce") and transposed:
                raise ValueError(f"nd.gpu.{s.name} after transpose: spatial ops take (H, W, C) "
                                 "images; transpose last")
            transposed = transposed or s.kind == "layout"
            shapes.append(s.out_shape(shapes[-1]))
            dtypes.append(s.out_dtype(dtypes[-1]))
        self.shapes, self.dtypes = shapes, dtypes

    @property
    def out_shape(self) -> tuple:
        return self.shapes[-1]

    @property
    def out_dtype(self) -> np.dtype:
        return self.dtypes[-1]

    @property
    def image(self) -> bool:
        """Whether the kernel works on (H, W, C) images (else on flat values)."""
        return len(self.shape) == 3

    def describe(self) -> str:
        return " -> ".join(s.describe() for s in self.steps) or "identity"

    def segments(self) -> list["Chain"]:
        """The chain cut before each reduction: one kernel each (a reduction step is the
        first step of its segment, over the buffer the segment before it wrote)."""
        cuts = [k for k, s in enumerate(self.steps) if s.kind == "reduce" and k > 0]
        out, start = [], 0
        for k in cuts + [len(self.steps)]:
            out.append(Chain(self.steps[start:k], self.shapes[start], self.dtypes[start]))
            start = k
        return out




class Apply(Step):
    """A user function applied to each value (``nd.gpu.apply``, ``ds.map(fn,
    device="cuda")``), compiled as a numba-cuda device function; its output dtype is
    NumPy's for the function on one value."""

    name = "apply"

    def __init__(self, fn):
        if not callable(fn):
            raise TypeError(f"nd.gpu.apply: expects a function, got {type(fn).__name__}")
        self.fn = fn
        self._dtypes: dict = {}

    def out_dtype(self, dtype):
        if dtype not in self._dtypes:
            self._dtypes[dtype] = np.asarray(self.fn(dtype.type(1))).dtype
        return self._dtypes[dtype]

    def sampler(self, g, names, in_shape, inner):
        def apply(y, x, c):
            value, dtype = inner(y, x, c)
            v = g.fresh("v")
            g.emit(f"{v} = {g.device_function(self.fn)}({value})")
            return v, self.out_dtype(dtype)
        return apply

    def describe(self):
        return f"apply({getattr(self.fn, '__qualname__', self.fn)})"


__all__ = ["Apply", "Chain", "Step", "bilinear_source", "check_image", "decode_first", "f32",
           "run_steps", "seed_pair", "type_name"]
