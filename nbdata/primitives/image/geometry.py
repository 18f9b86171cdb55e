"""``nd.image``'s crops, flips and layout changes: random_crop, flip_left_right,
random_flip_left_right, flip_up_down, random_flip_up_down, transpose, hwc_to_chw."""


import numba
import numpy as np
from numba.core import types
from numba.core.errors import TypingError

from nbdata import random
from nbdata.errors import FormattedValueError, InvalidArgumentError
from nbdata.primitives import expr
from nbdata.primitives.expr import NotElementwise
from nbdata.primitives.gpu import Step, check_image, seed_pair
from nbdata.primitives.image.arguments import int_pair
from nbdata.primitives.table import define
from nbdata.spec import TensorSpec
from nbdata.trace.graph import is_symbolic


# Stream ids of the random draws (the ASCII of their names), so that each op
# draws independent values even when given the same (seed, counter).
_CROP_TOP_STREAM = 0x63726F705F746F70  # b"crop_top"
_CROP_LEFT_STREAM = 0x63726F705F6C6674  # b"crop_lft"
_FLIP_STREAM = 0x666C69705F6C5F72  # b"flip_l_r"
_FLIP_UD_STREAM = 0x666C69705F755F64  # b"flip_u_d"


@numba.njit(nogil=True, cache=True)
def _random_crop(image, size, seed):
    height, width, channels = image.shape
    crop_height, crop_width, crop_channels = size
    if crop_channels != channels:
        raise FormattedValueError(
            "random_crop: size has {} channels but the image has {}", crop_channels, channels)
    if (crop_height < 0 or crop_width < 0
            or crop_height > height or crop_width > width):
        raise FormattedValueError(
            "random_crop: crop size {}x{} does not fit in the image of size {}x{}",
            crop_height, crop_width, height, width)
    top = random.randint(
        random.key(seed[0], _CROP_TOP_STREAM, 0), seed[1],
        0, height - crop_height + 1,
    )
    left = random.randint(
        random.key(seed[0], _CROP_LEFT_STREAM, 0), seed[1],
        0, width - crop_width + 1,
    )
    return image[top:top + crop_height, left:left + crop_width]


@numba.njit(nogil=True, cache=True)
def _flip_left_right(image):
    return image[:, ::-1].copy()


@numba.njit(nogil=True, cache=True)
def _random_flip_left_right(image, seed):
    step = -1 if random.uniform(random.key(seed[0], _FLIP_STREAM, 0), seed[1]) < 0.5 else 1
    return image[:, ::step]


@numba.njit(nogil=True, cache=True)
def _flip_up_down(image):
    return image[::-1].copy()


@numba.njit(nogil=True, cache=True)
def _flip_batch_up_down(images):
    return images[:, ::-1].copy()


@numba.njit(nogil=True, cache=True)
def _random_flip_up_down(image, seed):
    step = -1 if random.uniform(random.key(seed[0], _FLIP_UD_STREAM, 0), seed[1]) < 0.5 else 1
    return image[::step]


@numba.njit(nogil=True, cache=True)
def _check_perm(perm, ndim):
    if len(perm) != ndim:
        raise FormattedValueError("transpose: perm has {} axes but the array has {}",
                                  len(perm), ndim)
    seen = np.zeros(ndim, dtype=np.bool_)
    for axis in perm:
        if axis < 0 or axis >= ndim or seen[axis]:
            raise FormattedValueError(
                "transpose: perm is not a permutation of the axes 0..{}", ndim - 1)
        seen[axis] = True


@numba.njit(nogil=True, cache=True)
def _transpose(image, perm):
    _check_perm(perm, image.ndim)
    return image.transpose(perm).copy()   # a C-contiguous copy


# ------------------------------------------------------------------ GPU steps
#
# How each op applies to every element of a device batch in a fused GPU kernel
# (``nbdata/primitives/gpu.py``); the ``nd.gpu`` functions are these ops batched. Random
# draws are made on the host with this module's kernels, element ``j`` of a batch at
# counter ``counter + j``, so the GPU's crops and flips are the CPU's.

@numba.njit(nogil=True, cache=True)
def _crop_offsets(seed, base, n, top_range, left_range):
    tops = np.empty(n, np.int64)
    lefts = np.empty(n, np.int64)
    top_key = random.key(seed, _CROP_TOP_STREAM, 0)
    left_key = random.key(seed, _CROP_LEFT_STREAM, 0)
    for j in range(n):
        tops[j] = random.randint(top_key, base + j, 0, top_range)
        lefts[j] = random.randint(left_key, base + j, 0, left_range)
    return tops, lefts


@numba.njit(nogil=True, cache=True)
def _flip_flags(seed, base, n):
    flags = np.empty(n, np.int64)
    k = random.key(seed, _FLIP_STREAM, 0)
    for j in range(n):
        flags[j] = 1 if random.uniform(k, base + j) < 0.5 else 0
    return flags


class _RandomCrop(Step):
    name = "random_crop"
    kind = "spatial"
    uniforming = True
    param_count = 2

    def __init__(self, size, seed):
        self.size = tuple(int(v) for v in size)
        if len(self.size) not in (2, 3):
            raise ValueError("nd.gpu.random_crop: size is (h, w) or (h, w, c)")
        self.seed, self.offset = seed_pair(self.name, seed)

    def out_shape(self, shape):
        h, w, c = check_image(self.name, shape)
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

    def sampler(self, g, names, in_shape, inner):
        top, left = names

        def crop(y, x, c):
            yy, xx = g.fresh("y"), g.fresh("x")
            g.emit(f"{yy} = {y} + {top}[b]")
            g.emit(f"{xx} = {x} + {left}[b]")
            return inner(yy, xx, c)
        return crop

    def describe(self):
        return f"random_crop({self.size[:2]}, seed=({self.seed}, {self.offset}))"


class _Flip(Step):
    name = "random_flip_left_right"
    kind = "spatial"
    param_count = 1

    def __init__(self, seed, always: bool = False):
        self.seed, self.offset = (0, 0) if always else seed_pair(self.name, seed)
        self.always = always

    def out_shape(self, shape):
        return check_image(self.name, shape)

    def params(self, shape, seed_base, n, sizes=None):
        if self.always:
            return [np.ones(n, np.int64)]
        return [_flip_flags(np.int64(self.seed), np.int64(seed_base + self.offset), n)]

    def sampler(self, g, names, in_shape, inner):
        (flags,) = names
        width = in_shape[1]

        def flip(y, x, c):
            xx = g.fresh("x")
            g.emit(f"{xx} = ({width} - 1 - {x}) if {flags}[b] != 0 else {x}")
            return inner(y, xx, c)
        return flip

    def describe(self):
        return "flip_left_right" if self.always else f"random_flip_left_right(seed={self.seed})"


class _Transpose(Step):
    """Each element's dims permuted (the kernel maps its output position back)."""

    name = "transpose"
    kind = "layout"

    def __init__(self, perm):
        self.perm = tuple(int(p) for p in perm)

    def out_shape(self, shape):
        if sorted(self.perm) != list(range(len(shape))):
            raise ValueError(f"nd.gpu.transpose: perm {self.perm} is not a permutation of the "
                             f"{len(shape)} element dims")
        return tuple(shape[p] for p in self.perm)

    def sampler(self, g, names, in_shape, inner):
        return inner

    def describe(self):
        return "hwc_to_chw" if self.perm == (2, 0, 1) else f"transpose({self.perm})"


# ------------------------------------------------------------------ crops and flips

def _draw_window(image, size, seed):
    """The lift of random_crop: a window of the image at drawn offsets."""
    if not isinstance(image, expr.Expr) or not isinstance(seed, (tuple, list)) or len(seed) != 2:
        raise NotElementwise("random_crop of a computed or non-image value")
    if len(image.shape) != 3 or not isinstance(size, (tuple, list)) or len(size) != 3:
        raise NotElementwise("random_crop needs an (H, W, C) image and a constant size")
    height, width, channels = image.shape
    crop_height, crop_width, crop_channels = (int(v) for v in size)
    if crop_channels != channels or crop_height > height or crop_width > width:
        raise NotElementwise("a crop that does not fit")
    top = expr.draw("randint", seed[0], seed[1], _CROP_TOP_STREAM, 0, height - crop_height + 1)
    left = expr.draw("randint", seed[0], seed[1], _CROP_LEFT_STREAM, 0, width - crop_width + 1)
    return expr.window(image, (crop_height, crop_width, channels), top, left, False)


def _lift_flip(image):
    return expr.flipped(image, True)


def _lift_random_flip(image, seed):
    if not isinstance(seed, (tuple, list)) or len(seed) != 2:
        raise NotElementwise("random_flip_left_right with a seed that is not a pair")
    draw = expr.draw("uniform", seed[0], seed[1], _FLIP_STREAM)
    return expr.flipped(image, expr.apply_ufunc(np.less, draw, 0.5))


def _crop_spec(image, size, seed=None):
    """The window's spec: ``size`` of the image's dtype (known before the image's own
    dims are: a decoded image's sample has other dims than its records give)."""
    spec = getattr(image, "spec", None)
    shape = spec.shape if spec is not None else np.shape(image)
    dtype = spec.dtype if spec is not None else np.asarray(image).dtype
    if is_symbolic(size):
        return TensorSpec((None, None, shape[2] if shape is not None and len(shape) == 3
                           else None), dtype)
    height, width, channels = int_pair("random_crop", "size", size, 3)
    if shape is not None and len(shape) != 3:
        raise ValueError(f"random_crop: expected an (H, W, C) image, got shape {tuple(shape)}")
    if shape is not None:
        if shape[2] is not None and channels != shape[2]:
            raise ValueError(f"random_crop: size has {channels} channels but the image has "
                             f"{shape[2]}")
        if (shape[0] is not None and height > shape[0]) or (shape[1] is not None
                                                             and width > shape[1]) \
                or height < 0 or width < 0:
            raise ValueError(f"random_crop: crop size {height}x{width} does not fit in the "
                             f"image of size {shape[0]}x{shape[1]}")
    return TensorSpec((height, width, channels), dtype)


@define(tags=("image",), lift=_draw_window, gpu=_RandomCrop, abstract=_crop_spec, view=True,
        numba=lambda image, size, seed: lambda image, size, seed: _random_crop(image, size, seed))
def random_crop(image, size, seed):
    """Crops a random (h, w) window out of an HWC image.

    Stateless, like ``tf.image.stateless_random_crop``: the window depends
    only on ``seed``. The top offset is uniform in [0, H - h] and the left
    offset uniform in [0, W - w], drawn independently as
    ``random.randint(random.key(seed[0], stream, 0), seed[1], 0, H - h + 1)``
    (and likewise for W) with a distinct stream id for each.

    Args:
        image: An (H, W, C) array of any numeric dtype.
        size: The crop size ``(h, w, c)``; ``c`` must equal C.
        seed: ``(seed, counter)``, two int64 values (a tuple or array); pass
            e.g. the element index from ``Dataset.enumerate`` as the counter
            to crop each element differently.

    Returns:
        The (h, w, C) window as a view of ``image`` (no copy, so a fused map
        allocates nothing for it; ``.copy()`` it before writing into it).

    Raises:
        ValueError: If the crop does not fit in the image or ``c != C``.

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> img = np.arange(5 * 6 * 3, dtype=np.uint8).reshape(5, 6, 3)
        >>> crop = image.random_crop(img, (3, 4, 3), seed=(7, 0))
        >>> crop.shape, crop.dtype
        ((3, 4, 3), dtype('uint8'))
        >>> again = image.random_crop(img, (3, 4, 3), seed=(7, 0))
        >>> np.array_equal(again, crop)
        True
    """
    return _random_crop(image, size, seed)


@define(tags=("image",), lift=_lift_flip, gpu=lambda: _Flip(None, always=True),
        numba=lambda image: lambda image: _flip_left_right(image))
def flip_left_right(image):
    """Mirrors an HWC image along its width axis.

    Args:
        image: An (H, W, C) array of any numeric dtype.

    Returns:
        A new C-contiguous array equal to ``image[:, ::-1]``.

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> img = np.arange(6, dtype=np.uint8).reshape(1, 3, 2)
        >>> image.flip_left_right(img)[0].tolist()
        [[4, 5], [2, 3], [0, 1]]
    """
    return _flip_left_right(image)


@define(tags=("image",), lift=_lift_random_flip, gpu=_Flip, view=True,
        numba=lambda image, seed: lambda image, seed: _random_flip_left_right(image, seed))
def random_flip_left_right(image, seed):
    """Mirrors an HWC image along its width axis with probability 1/2.

    Stateless, like ``tf.image.stateless_random_flip_left_right``: whether
    it flips depends only on ``seed``, through
    ``random.uniform(random.key(seed[0], stream, 0), seed[1]) < 0.5``.

    Args:
        image: An (H, W, C) array of any numeric dtype.
        seed: ``(seed, counter)``, two int64 values (a tuple or array); pass
            e.g. the element index as the counter.

    Returns:
        A view of ``image``, mirrored or not (no copy; ``.copy()`` it before
        writing into it).

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> img = np.arange(6, dtype=np.uint8).reshape(1, 3, 2)
        >>> outs = [image.random_flip_left_right(img, (1, i)) for i in range(1000)]
        >>> 400 < sum(int(out[0, 0, 0]) == 4 for out in outs) < 600
        True
    """
    return _random_flip_left_right(image, seed)


def _flip_up_down_nopython(image):
    if not (isinstance(image, types.Array) and image.ndim in (3, 4)):
        raise TypingError(f"flip_up_down: expected an (H, W, C) image or a batch of them, got {image}")
    if image.ndim == 3:
        return lambda image: _flip_up_down(image)
    return lambda image: _flip_batch_up_down(image)


@define(tags=("image",), numba=_flip_up_down_nopython)
def flip_up_down(image):
    """Mirrors an HWC image (or each image of an NHWC batch) along its height axis
    (``tf.image.flip_up_down``).

    Args:
        image: An (H, W, C) or (N, H, W, C) array of any numeric dtype.

    Returns:
        A new C-contiguous array equal to ``image[..., ::-1, :, :]``.

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> img = np.arange(6, dtype=np.uint8).reshape(3, 1, 2)
        >>> image.flip_up_down(img)[:, 0].tolist()
        [[4, 5], [2, 3], [0, 1]]
    """
    image = np.asarray(image)
    if image.ndim not in (3, 4):
        raise ValueError(f"flip_up_down: 'image' must have either 3 or 4 dimensions, got "
                         f"shape {image.shape}")
    return _flip_up_down(image) if image.ndim == 3 else _flip_batch_up_down(image)


@define(tags=("image",), view=True,
        numba=lambda image, seed: lambda image, seed: _random_flip_up_down(image, seed))
def random_flip_up_down(image, seed):
    """Mirrors an HWC image along its height axis with probability 1/2.

    Stateless, like ``tf.image.stateless_random_flip_up_down``: whether it flips
    depends only on ``seed``, through
    ``random.uniform(random.key(seed[0], stream, 0), seed[1]) < 0.5`` on the stream
    ``b"flip_u_d"``.

    Args:
        image: An (H, W, C) array of any numeric dtype.
        seed: ``(seed, counter)``, two int64 values (a tuple or array); pass
            e.g. the element index as the counter.

    Returns:
        A view of ``image``, mirrored or not (no copy; ``.copy()`` it before
        writing into it).

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> img = np.arange(6, dtype=np.uint8).reshape(3, 1, 2)
        >>> outs = [image.random_flip_up_down(img, (1, i)) for i in range(1000)]
        >>> 400 < sum(int(out[0, 0, 0]) == 4 for out in outs) < 600
        True
    """
    if np.ndim(image) != 3:
        raise ValueError(f"random_flip_up_down: expected an (H, W, C) image, got an array of "
                         f"shape {np.shape(image)}")
    return _random_flip_up_down(image, seed)


def _transpose_nopython(image, perm):
    if not (isinstance(image, types.Array) and isinstance(image.dtype, (
            types.Boolean, types.Integer, types.Float))):
        raise TypingError(f"transpose: expected a numeric array, got {image}")
    if not (isinstance(perm, types.BaseTuple) and all(
            isinstance(t, types.Integer) for t in perm)):
        raise TypingError(f"transpose: perm must be a tuple of integers, got {perm}")
    if len(perm) != image.ndim:
        raise ValueError(f"transpose: perm has {len(perm)} axes but the array has "
                         f"{image.ndim}")
    return lambda image, perm: _transpose(image, perm)


@define(tags=("image",), gpu=_Transpose, numba=_transpose_nopython)
def transpose(image, perm):
    """Permutes the axes of an array into a new C-contiguous array.

    ``np.transpose(image, perm).copy()``: the CPU twin of a GPU layout
    change, so the result is always a fresh C-contiguous copy.

    Args:
        image: An array of any numeric or bool dtype and any rank.
        perm: The permutation of ``range(image.ndim)``: output axis ``i``
            is input axis ``perm[i]``.

    Returns:
        A new C-contiguous array of the same dtype.

    Raises:
        ValueError: If ``perm`` is not a permutation of the array's axes.
        TypeError: If ``perm`` does not hold integers.

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> img = np.arange(12).reshape(2, 3, 2)
        >>> out = image.transpose(img, (2, 0, 1))
        >>> out.shape, out.flags.c_contiguous, out[1].tolist()
        ((2, 2, 3), True, [[1, 3, 5], [7, 9, 11]])
    """
    image = np.asarray(image)
    if image.dtype.kind not in "biuf" or image.dtype == np.float16:
        raise TypeError(f"transpose: unsupported dtype {image.dtype}")
    perm = int_pair("transpose", "perm", perm, count=image.ndim)
    return _transpose(image, perm)


def _hwc_to_chw_nopython(image):
    if not (isinstance(image, types.Array) and image.ndim in (3, 4)):
        raise TypingError(f"hwc_to_chw: expected an (H, W, C) or (N, H, W, C) array, "
                          f"got {image}")
    if image.ndim == 3:
        return lambda image: transpose(image, (2, 0, 1))
    return lambda image: transpose(image, (0, 3, 1, 2))


@define(tags=("image",), gpu=lambda: _Transpose((2, 0, 1)), numba=_hwc_to_chw_nopython)
def hwc_to_chw(image):
    """Moves the channel axis first: (H, W, C) -> (C, H, W), (N, H, W, C) -> (N, C, H, W).

    A new C-contiguous array (see :func:`transpose`).

    Args:
        image: A 3-D (H, W, C) or 4-D (N, H, W, C) array.

    Returns:
        The (C, H, W) or (N, C, H, W) array, of the same dtype.

    Raises:
        ValueError: If the array is not 3-D or 4-D.

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> img = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
        >>> image.hwc_to_chw(img)[0].tolist()
        [[0, 3], [6, 9]]
    """
    image = np.asarray(image)
    if image.ndim not in (3, 4):
        raise ValueError(f"hwc_to_chw: expected an (H, W, C) or (N, H, W, C) array, "
                         f"got shape {image.shape}")
    return transpose(image, (2, 0, 1) if image.ndim == 3 else (0, 3, 1, 2))
