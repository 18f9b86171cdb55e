"""GPU batch transformations and the generator of their fused kernels.

Each ``nd.gpu`` op (``cast``, ``normalize``, ``random_crop``,
``random_flip_left_right``, ``resize``, ``random_resized_crop``, ``transpose`` /
``hwc_to_chw``, ``decode_raw``, ``apply``) is a step of a :class:`Chain` over one
batch. A chain becomes ONE generated numba-cuda kernel: one thread per output value,
reading its value straight from the source batch through every step (a crop shifts
the coordinates, a flip mirrors them, a resize blends four source pixels, normalize
and cast transform the value), so consecutive ops cost one launch and one write.

Randomness is the CPU's: each random op draws its per-element parameters (crop
offsets, flips, crop windows) on the host with the same counter-based functions as
``nd.image`` (``seed=(seed, counter)``, the counter being the element's index), and
the kernel reads them from small per-batch arrays. So the GPU equals ``nd.image`` for
the same seed: exactly for crops, flips, casts and normalize; resizes compute the same
float32 operations in the same order (a GPU may contract a multiply-add: within 1e-5
relative then).
"""

from __future__ import annotations

import math
from typing import Callable

import numba
import numpy as np

from nbdata import image as nd_image
from nbdata.errors import InvalidArgumentError
from nbdata import random as nd_random

_THREADS = 128


# ------------------------------------------------------------------ steps

class Step:
    """One op of a chain. ``spatial`` steps move pixels of an (H, W, C) element."""

    name = "step"
    spatial = False

    def out_shape(self, shape: tuple) -> tuple:
        return shape

    def out_dtype(self, dtype: np.dtype) -> np.dtype:
        return dtype

    def params(self, shape: tuple, seed_base: int, n: int) -> list:
        """Per-element parameter arrays for ``n`` elements whose first has counter
        ``seed_base``."""
        return []

    def describe(self) -> str:
        return self.name


def _check_image(name: str, shape: tuple) -> tuple:
    if len(shape) != 3:
        raise ValueError(f"nd.gpu.{name}: expects a batch of (H, W, C) images, got elements of "
                         f"shape {shape}")
    return shape


class Cast(Step):
    name = "cast"

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)
        if self.dtype.kind not in "biuf":
            raise TypeError(f"nd.gpu.cast: cannot cast to {self.dtype}")

    def out_dtype(self, dtype):
        return self.dtype


    def describe(self):
        return f"cast({self.dtype})"


class Normalize(Step):
    name = "normalize"

    def __init__(self, mean, std):
        self.mean = np.atleast_1d(np.asarray(mean, np.float32))
        self.std = np.atleast_1d(np.asarray(std, np.float32))
        if self.mean.ndim != 1 or self.std.ndim != 1:
            raise ValueError("nd.gpu.normalize: mean and std are scalars or one value per channel")

    def channels(self, c: int) -> tuple[np.ndarray, np.ndarray]:
        mean = np.broadcast_to(self.mean, (c,)) if self.mean.size == 1 else self.mean
        std = np.broadcast_to(self.std, (c,)) if self.std.size == 1 else self.std
        if mean.size != c or std.size != c:
            raise ValueError(f"nd.gpu.normalize: {self.mean.size} means / {self.std.size} stds for "
                             f"{c} channels")
        return np.ascontiguousarray(mean), np.ascontiguousarray(std)

    def out_dtype(self, dtype):
        return np.dtype(np.float32)


    def describe(self):
        return f"normalize(mean={self.mean.tolist()}, std={self.std.tolist()})"


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


class RandomCrop(Step):
    name = "random_crop"
    spatial = True

    def __init__(self, size, seed):
        self.size = tuple(int(v) for v in size)
        if len(self.size) not in (2, 3):
            raise ValueError("nd.gpu.random_crop: size is (h, w) or (h, w, c)")
        self.seed, self.offset = seed_pair(self.name, seed)

    def out_shape(self, shape):
        h, w, c = _check_image(self.name, shape)
        ch, cw = self.size[:2]
        if len(self.size) == 3 and c is not None and self.size[2] != c:
            raise ValueError(f"nd.gpu.random_crop: size has {self.size[2]} channels, the images {c}")
        if ch <= 0 or cw <= 0 or (h is not None and (ch > h or cw > w)):
            raise ValueError(f"nd.gpu.random_crop: crop size {ch}x{cw} does not fit in the images "
                             f"of size {h}x{w}")
        return (ch, cw, c)

    def params(self, shape, seed_base, n, sizes=None):
        ch, cw = self.size[:2]
        if sizes is None:
            h, w, _ = shape
            return list(_crop_offsets(np.int64(self.seed), np.int64(seed_base + self.offset), n,
                                      h - ch + 1, w - cw + 1))
        offsets = np.empty((2, n), np.int64)   # images of their own sizes: one range each
        for j, (h, w, _) in enumerate(sizes):
            if ch > h or cw > w:
                raise InvalidArgumentError(
                    f"nd.gpu.random_crop: crop size {ch}x{cw} does not fit in image {j} of the "
                    f"batch ({h}x{w})", "RandomCrop")
            top, left = _crop_offsets(np.int64(self.seed), np.int64(seed_base + self.offset + j),
                                      1, h - ch + 1, w - cw + 1)
            offsets[:, j] = top[0], left[0]
        return list(offsets)


    def describe(self):
        return f"random_crop({self.size[:2]}, seed=({self.seed}, {self.offset}))"


class Flip(Step):
    name = "random_flip_left_right"
    spatial = True

    def __init__(self, seed, always: bool = False):
        self.seed, self.offset = (0, 0) if always else seed_pair(self.name, seed)
        self.always = always

    def out_shape(self, shape):
        return _check_image(self.name, shape)

    def params(self, shape, seed_base, n):
        if self.always:
            return [np.ones(n, np.int64)]
        return [_flip_flags(np.int64(self.seed), np.int64(seed_base + self.offset), n)]

    def describe(self):
        return "flip_left_right" if self.always else f"random_flip_left_right(seed={self.seed})"


class Resize(Step):
    name = "resize"
    spatial = True

    def __init__(self, size, method: str = "bilinear"):
        self.size = tuple(int(v) for v in size)
        if len(self.size) != 2 or min(self.size) <= 0:
            raise ValueError("nd.gpu.resize: size is a positive (h, w)")
        if method != "bilinear":
            raise ValueError(f"nd.gpu.resize: method {method!r} is not supported; use 'bilinear'")

    def out_shape(self, shape):
        _, _, c = _check_image(self.name, shape)
        return self.size + (c,)

    def out_dtype(self, dtype):
        return np.dtype(np.float32)


    def describe(self):
        return f"resize({self.size}, bilinear)"


class RandomResizedCrop(Step):
    name = "random_resized_crop"
    spatial = True

    def __init__(self, size, scale, ratio, seed):
        self.size = tuple(int(v) for v in size)
        if len(self.size) != 2 or min(self.size) <= 0:
            raise ValueError("nd.gpu.random_resized_crop: size is a positive (h, w)")
        self.scale = tuple(float(v) for v in scale)
        self.ratio = tuple(float(v) for v in ratio)
        self.seed, self.offset = seed_pair(self.name, seed)

    def out_shape(self, shape):
        _, _, c = _check_image(self.name, shape)
        return self.size + (c,)

    def out_dtype(self, dtype):
        return np.dtype(np.float32)

    def params(self, shape, seed_base, n, sizes=None):
        windows = np.empty((4, n), np.int64)
        for j in range(n):
            h, w = shape[:2] if sizes is None else sizes[j][:2]
            windows[:, j] = nd_image.random_resized_crop_window(
                int(h), int(w), self.scale, self.ratio, (self.seed, int(seed_base) + self.offset + j))
        return list(windows)


    def describe(self):
        return f"random_resized_crop({self.size}, scale={self.scale}, ratio={self.ratio}, seed={self.seed})"


class Transpose(Step):
    name = "transpose"

    def __init__(self, perm):
        self.perm = tuple(int(p) for p in perm)

    def out_shape(self, shape):
        if sorted(self.perm) != list(range(len(shape))):
            raise ValueError(f"nd.gpu.transpose: perm {self.perm} is not a permutation of the "
                             f"{len(shape)} element dims")
        return tuple(shape[p] for p in self.perm)


    def describe(self):
        return "hwc_to_chw" if self.perm == (2, 0, 1) else f"transpose({self.perm})"


class Apply(Step):
    """A user function applied to each value (``ds.map(fn, device="cuda")``), compiled
    as a numba-cuda device function."""

    name = "apply"

    def __init__(self, fn: Callable):
        self.fn = fn
        self._dtypes: dict = {}

    def out_dtype(self, dtype):
        if dtype not in self._dtypes:
            out = self.fn(dtype.type(1))
            self._dtypes[dtype] = np.asarray(out).dtype
        return self._dtypes[dtype]


    def describe(self):
        return f"apply({getattr(self.fn, '__qualname__', self.fn)})"


@numba.njit(nogil=True, cache=True)
def _crop_offsets(seed, base, n, top_range, left_range):
    tops = np.empty(n, np.int64)
    lefts = np.empty(n, np.int64)
    top_key = nd_random.key(seed, nd_image._CROP_TOP_STREAM, 0)
    left_key = nd_random.key(seed, nd_image._CROP_LEFT_STREAM, 0)
    for j in range(n):
        tops[j] = nd_random.randint(top_key, base + j, 0, top_range)
        lefts[j] = nd_random.randint(left_key, base + j, 0, left_range)
    return tops, lefts


@numba.njit(nogil=True, cache=True)
def _flip_flags(seed, base, n):
    flags = np.empty(n, np.int64)
    k = nd_random.key(seed, nd_image._FLIP_STREAM, 0)
    for j in range(n):
        flags[j] = 1 if nd_random.uniform(k, base + j) < 0.5 else 0
    return flags


_UNIFORMING = (Resize, RandomResizedCrop, RandomCrop)


# ------------------------------------------------------------------ chains

class Chain:
    """Steps applied in order to elements of ``shape`` and ``dtype`` (one batch leaf)."""

    def __init__(self, steps: list, shape: tuple, dtype):
        self.steps = list(steps)
        self.shape = tuple(None if d is None else int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        # Images of their own sizes (decode_jpeg's RaggedBatch): the first step must make
        # them one size, reading each at its size.
        self.ragged = any(d is None for d in self.shape[:2])
        if self.ragged and self.steps and not isinstance(self.steps[0], _UNIFORMING):
            raise ValueError(
                f"nd.gpu.{self.steps[0].name}: the images of a batch from decode_jpeg differ in "
                "size; make them one size first (nd.gpu.resize, random_resized_crop or "
                "random_crop)")
        shapes, dtypes = [self.shape], [self.dtype]
        transposed = False
        for s in self.steps:
            if s.spatial and transposed:
                raise ValueError(f"nd.gpu.{s.name} after transpose: spatial ops take (H, W, C) "
                                 "images; transpose last")
            transposed = transposed or isinstance(s, Transpose)
            shapes.append(s.out_shape(shapes[-1]))
            dtypes.append(s.out_dtype(dtypes[-1]))
        self.shapes, self.dtypes = shapes, dtypes

    @property
    def out_shape(self) -> tuple:
        return self.shapes[-1]

    @property
    def out_dtype(self) -> np.dtype:
        return self.dtypes[-1]

    def then(self, step: Step) -> "Chain":
        return Chain(self.steps + [step], self.shape, self.dtype)

    def describe(self) -> str:
        return " -> ".join(s.describe() for s in self.steps) or "identity"

    def params(self, seed_base: int, n: int, ragged: tuple | None = None) -> list:
        """The kernel's parameter arrays: for images of their own sizes (``ragged``:
        their offsets and (n, 3) shapes), each image's offset, height and width; each
        random step's per-element draws (the first step drawing for each image's size);
        then each normalize's per-channel means and stds (the generator's order)."""
        out = []
        sizes = None
        if self.ragged:
            offsets, sizes = ragged
            out += [np.ascontiguousarray(offsets[:n]), np.ascontiguousarray(sizes[:, 0]),
                    np.ascontiguousarray(sizes[:, 1])]
        for k, (s, shape) in enumerate(zip(self.steps, self.shapes)):
            if k == 0 and sizes is not None and isinstance(s, (RandomCrop, RandomResizedCrop)):
                out.extend(s.params(shape, seed_base, n, sizes))
            else:
                out.extend(s.params(shape, seed_base, n))
        for s in self.steps:
            if isinstance(s, Normalize):
                out.extend(s.channels(self.channels))
        return out

    @property
    def image(self) -> bool:
        """Whether the chain works on (H, W, C) images (it moves pixels)."""
        return any(s.spatial or isinstance(s, Transpose) for s in self.steps)

    @property
    def channels(self) -> int:
        """The channel count normalize sees: C of the (H, W, C) images, else the last dim."""
        shape = self.shape
        return int(shape[-1]) if shape else 1

    # ------------------------------------------------------------- source
    def source(self) -> tuple[str, dict]:
        """The kernel's Python source and the globals it needs."""
        return _generate(self)


class _Gen:
    """Source being generated: statements, fresh names, parameter names."""

    def __init__(self):
        self.lines: list[str] = []
        self.count = 0
        self.params: list[str] = []
        self.globals: dict = {"numba": numba, "math": math}

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def emit(self, text: str) -> None:
        self.lines.append("        " + text)

    def param(self, prefix: str) -> str:
        name = f"{prefix}{len(self.params)}"
        self.params.append(name)
        return name


def _f32(value: float) -> str:
    return f"numba.float32({float(np.float32(value))!r})"


def _tname(dtype: np.dtype) -> str:
    return "bool_" if dtype == np.bool_ else dtype.name


def _generate(chain: Chain) -> tuple[str, dict]:
    """One kernel for the chain: thread i computes output value i of the batch."""
    g = _Gen()
    spatial_in = chain.image
    # Per-element parameter arrays, in the order Chain.params gives them.
    names: dict = {}
    if chain.ragged:   # each image's offset, height and width in the packed source
        names["ragged"] = [g.param("p") for _ in range(3)]
    for s in chain.steps:
        count = {RandomCrop: 2, Flip: 1, RandomResizedCrop: 4}.get(type(s), 0)
        names[id(s)] = [g.param("p") for _ in range(count)]
    for s in chain.steps:
        if isinstance(s, Normalize):
            names[(id(s), "norm")] = [g.param("p"), g.param("p")]
    out_shape = chain.out_shape
    out_size = int(np.prod(out_shape, dtype=np.int64))

    g.emit("i = cuda.grid(1)")
    g.emit(f"if i >= n * {out_size}:")
    g.emit("    return")
    g.emit(f"b = i // {out_size}")
    g.emit(f"r = i - b * {out_size}")
    if not spatial_in:
        if any(isinstance(s, Normalize) for s in chain.steps):
            g.emit(f"c = r % {chain.channels}")
        value, dtype = _values(g, chain, names, f"src[b * {int(np.prod(chain.shape))} + r]",
                               chain.dtype, 0, "c")
    else:
        _check_image("kernel", chain.shape)
        transpose = next((s for s in chain.steps if isinstance(s, Transpose)), None)
        img_shape = chain.shapes[chain.steps.index(transpose)] if transpose else out_shape
        perm = transpose.perm if transpose else (0, 1, 2)
        # Output position -> logical (y, x, c) of the (H, W, C) image before transpose.
        dims = [img_shape[p] for p in perm]
        coords = ["q0", "q1", "q2"]
        g.emit(f"q0 = r // {dims[1] * dims[2]}")
        g.emit(f"q1 = (r // {dims[2]}) % {dims[1]}")
        g.emit(f"q2 = r % {dims[2]}")
        logical = [None, None, None]
        for k, p in enumerate(perm):
            logical[p] = coords[k]
        y, x, c = logical
        spatial = [s for s in chain.steps if s.spatial]
        sampler = _sampler(g, chain, names, spatial)
        value, dtype = sampler(y, x, c)
        first_value = chain.steps.index(spatial[-1]) + 1 if spatial else 0
        value, dtype = _values(g, chain, names, value, dtype, first_value, c)
    g.emit(f"out[i] = numba.{_tname(chain.out_dtype)}({value})")
    params = ", ".join(["src", "out", "n"] + g.params)
    source = "def kernel(" + params + "):\n" + "\n".join(line[4:] for line in g.lines) + "\n"
    return source, g.globals


def _sampler(g: _Gen, chain: Chain, names: dict, spatial: list):
    """A function (y, x, c) -> (value expression, dtype) reading the source through the
    spatial steps (innermost first)."""
    h, w, c_in = chain.shape

    def source(y, x, c):
        var = g.fresh("s")
        if chain.ragged:
            base, _, width = names["ragged"]
            g.emit(f"{var} = src[{base}[b] + ({y} * {width}[b] + {x}) * {c_in} + {c}]")
        else:
            g.emit(f"{var} = src[((b * {h} + {y}) * {w} + {x}) * {c_in} + {c}]")
        return var, chain.dtype

    sample = source
    for s in spatial:
        index = chain.steps.index(s)
        in_shape = chain.shapes[index]
        if index == 0 and chain.ragged:   # the image's own size, per element
            _, height, width = names["ragged"]
            in_shape = (f"{height}[b]", f"{width}[b]", in_shape[2])
        sample = _wrap(g, s, names.get(id(s), []), in_shape, sample)
    return sample


def _wrap(g: _Gen, step: Step, p: list, in_shape: tuple, inner):
    ih, iw, _ = in_shape
    if isinstance(step, RandomCrop):
        def crop(y, x, c):
            yy, xx = g.fresh("y"), g.fresh("x")
            g.emit(f"{yy} = {y} + {p[0]}[b]")
            g.emit(f"{xx} = {x} + {p[1]}[b]")
            return inner(yy, xx, c)
        return crop
    if isinstance(step, Flip):
        def flip(y, x, c):
            xx = g.fresh("x")
            g.emit(f"{xx} = ({iw - 1} - {x}) if {p[0]}[b] != 0 else {x}")
            return inner(y, xx, c)
        return flip
    if isinstance(step, (Resize, RandomResizedCrop)):
        oh, ow = step.size
        windowed = isinstance(step, RandomResizedCrop)

        def resize(y, x, c):
            if windowed or isinstance(ih, str):   # a window, or an image of its own size
                row0, col0, wh, ww = (f"{q}[b]" for q in p) if windowed else ("0", "0", ih, iw)
                hs, ws = g.fresh("hs"), g.fresh("ws")
                g.emit(f"{hs} = numba.float32({wh}) / numba.float32({oh})")
                g.emit(f"{ws} = numba.float32({ww}) / numba.float32({ow})")
            else:
                row0, col0, wh, ww = "0", "0", str(ih), str(iw)
                hs, ws = _f32(np.float32(ih) / np.float32(oh)), _f32(np.float32(iw) / np.float32(ow))
            y0, y1, ly = _source_index(g, y, hs, wh)
            x0, x1, lx = _source_index(g, x, ws, ww)
            taps = []
            for yy, xx in ((y0, x0), (y0, x1), (y1, x0), (y1, x1)):
                ry, rx = g.fresh("y"), g.fresh("x")
                g.emit(f"{ry} = {row0} + {yy}")
                g.emit(f"{rx} = {col0} + {xx}")
                v, _ = inner(ry, rx, c)
                t = g.fresh("t")
                g.emit(f"{t} = numba.float32({v})")
                taps.append(t)
            tl, tr, bl, br = taps
            top, bottom, out = g.fresh("top"), g.fresh("bot"), g.fresh("v")
            g.emit(f"{top} = {tl} + ({tr} - {tl}) * {lx}")
            g.emit(f"{bottom} = {bl} + ({br} - {bl}) * {lx}")
            g.emit(f"{out} = {top} + ({bottom} - {top}) * {ly}")
            return out, np.dtype(np.float32)
        return resize
    raise TypeError(f"not a spatial step: {step.name}")


def _source_index(g: _Gen, index: str, scale: str, size: str):
    """TF's half-pixel bilinear source: (lower, upper, float32 weight of upper), the
    float32 operations of ``nd.image``'s resize in its order."""
    src, fl = g.fresh("src"), g.fresh("fl")
    lo, hi, lerp = g.fresh("lo"), g.fresh("hi"), g.fresh("lerp")
    g.emit(f"{src} = (numba.float32({index}) + numba.float32(0.5)) * {scale} - numba.float32(0.5)")
    g.emit(f"{fl} = numba.float32(math.floor({src}))")
    g.emit(f"{hi} = min(int(math.ceil({src})), {size} - 1)")
    g.emit(f"{lo} = min(max(int({fl}), 0), {hi})")
    g.emit(f"{lerp} = {src} - {fl}")
    return lo, hi, lerp


def _values(g: _Gen, chain: Chain, names: dict, value: str, dtype: np.dtype, start: int,
            channel: str) -> tuple[str, np.dtype]:
    """The value steps (cast, normalize, apply) from step ``start`` on."""
    for s in chain.steps[start:]:
        if isinstance(s, Cast):
            v = g.fresh("v")
            g.emit(f"{v} = numba.{_tname(s.dtype)}({value})")
            value, dtype = v, s.dtype
        elif isinstance(s, Normalize):
            mean, std = names[(id(s), "norm")]
            v = g.fresh("v")
            g.emit(f"{v} = (numba.float32({value}) - {mean}[{channel}]) / {std}[{channel}]")
            value, dtype = v, np.dtype(np.float32)
        elif isinstance(s, Apply):
            fname = g.fresh("fn")
            g.globals[fname] = _device_function(s.fn)
            v = g.fresh("v")
            g.emit(f"{v} = {fname}({value})")
            value, dtype = v, s.out_dtype(dtype)
        elif s.spatial or isinstance(s, Transpose):
            continue
    return value, dtype


_device_functions: dict = {}


def _device_function(fn: Callable):
    compiled = _device_functions.get(id(fn))
    if compiled is None:
        from numba import cuda
        compiled = _device_functions[id(fn)] = (fn, cuda.jit(device=True)(fn))
    return compiled[1]


# ------------------------------------------------------------------ launches

_kernels: dict = {}


def compiled(chain: Chain):
    """The chain's kernel (compiled once per source text)."""
    source, env = chain.source()
    kernel = _kernels.get(source)
    if kernel is None:
        from numba import cuda
        namespace = dict(env, cuda=cuda)
        exec(compile(source, "<nbdata.gpu kernel>", "exec"), namespace)  # noqa: S102
        kernel = _kernels[source] = cuda.jit(namespace["kernel"])
    return kernel


def run_chain(chain: Chain, x, seed_base: int = 0):
    """Apply ``chain`` to a batch (a DeviceArray of ``(n,) + chain.shape``, or a
    RaggedBatch of images of their own sizes for a chain over them): one launch."""
    from nbdata.gpu import runtime
    from nbdata.gpu.array import DeviceArray
    be = runtime.backend()
    n = x.shape[0]
    out = DeviceArray.empty((n,) + chain.out_shape, chain.out_dtype, x.stream)
    total = n * int(np.prod(chain.out_shape, dtype=np.int64))
    if total == 0:
        return out
    ragged = None
    if chain.ragged:
        ragged = (x.offsets, x.shapes)
        x = x.data
    params = chain.params(seed_base, n, ragged)
    kernel = compiled(chain)
    blocks = (total + _THREADS - 1) // _THREADS
    if be.name == "sim":
        kernel[blocks, _THREADS](x.host_view().reshape(-1), out.host_view().reshape(-1), n, *params)
        return out
    stream = x.stream if x.stream is not None else be.default
    be.wait(stream, x.ready)
    args = [_Raw(p) for p in _device_params(params, stream)]
    kernel[blocks, _THREADS, stream](_Raw(x), _Raw(out), n, *args)
    out.ready, out.stream = be.event(stream), stream
    return out


def _device_params(params: list, stream) -> list:
    from nbdata.gpu.array import DeviceArray
    return [DeviceArray.from_host(np.ascontiguousarray(p), stream) for p in params]


class _Raw:
    """A device array handed to a kernel, ordered by the caller (no stream to sync)."""

    def __init__(self, array):
        self.array = array
        self.__cuda_array_interface__ = dict(array.__cuda_array_interface__, stream=None,
                                             shape=(array.size,))


__all__ = ["Apply", "Cast", "Chain", "Flip", "Normalize", "RandomCrop", "RandomResizedCrop",
           "Resize", "Step", "Transpose", "compiled", "run_chain"]
