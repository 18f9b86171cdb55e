"""``tf.image`` of ``nbdata.compat.v1``: nd.image's ops (``nbdata/primitives``) under
TF1's names and arguments, plus TF1's own (the v1 resize, per-image standardization,
crops and pads, dtype conversion, box drawing).

The random ops take TF1's optional ``seed`` and follow its graph/op seed rules
(``tf.set_random_seed``): each draws its parameter with :func:`random_uniform` (anew at
every ``Session.run``), then applies the deterministic op, as TF1 builds them
(``random_brightness`` is ``adjust_brightness`` by a uniform ``delta``). Inside a
``Dataset.map`` function they are nd.image's stateless random ops (the same entries,
with their lift rules and compiled forms), drawn from the element's key and the op's
place among the function's random ops (``nbdata/ops/keyed_map.py``): counter-based per
element and per epoch, so such a map fuses.

Resizing follows TF1 (``tf.compat.v1.image.resize_images``): no half-pixel centers,
source coordinate ``y * in / out`` (``(in - 1) / (out - 1)`` with ``align_corners``),
float32 lerps as TF's kernel computes them; bilinear gives float32, nearest neighbor
keeps the dtype, and an image already of the size is returned as it is.
"""

from __future__ import annotations

import types

import numpy as np

from nbdata import image as _nd_image
from nbdata.compat.v1 import ops as _ops
from nbdata.compat.v1.ops import _apply, _static, convert, random_uniform
from nbdata.errors import InvalidArgumentError, UnimplementedError
from nbdata.primitives.image.color import check_factor_range as _factor_range
from nbdata.primitives.image.color import check_max_delta as _max_delta
from nbdata.spec import TensorSpec
from nbdata.trace.graph import Symbolic


class ResizeMethod:
    """TF1's ``tf.image.ResizeMethod``."""
    BILINEAR = 0
    NEAREST_NEIGHBOR = 1
    BICUBIC = 2
    AREA = 3


_METHODS = {0: "bilinear", 1: "nearest", "bilinear": "bilinear", "nearest": "nearest"}


def _rank(x) -> int | None:
    return _static(x).ndims if isinstance(x, Symbolic) else np.ndim(x)


def _size_pair(size):
    if isinstance(size, Symbolic):
        return size
    h, w = (int(v) for v in np.asarray(size).reshape(-1))
    return h, w


# ------------------------------------------------------------------ resize

def _scale(n_in: int, n_out: int, align_corners: bool) -> np.float32:
    if align_corners and n_out > 1:
        return np.float32(n_in - 1) / np.float32(n_out - 1)
    return np.float32(n_in) / np.float32(n_out)


def _source(n_in, n_out, align_corners, nearest):
    pos = np.arange(n_out, dtype=np.float32) * _scale(n_in, n_out, align_corners)
    if nearest:
        near = np.floor(pos + np.float32(0.5)) if align_corners else np.floor(pos)   # roundf
        return np.minimum(near.astype(np.int64), n_in - 1)
    low = np.floor(pos)
    lower = np.maximum(low.astype(np.int64), 0)
    upper = np.minimum(np.ceil(pos).astype(np.int64), n_in - 1)
    return lower, upper, (pos - low).astype(np.float32)


def _resize_v1(images, size, method, align_corners, preserve_aspect_ratio=False):
    images = np.asarray(images)
    if images.ndim not in (3, 4):
        raise ValueError(f"'images' must have either 3 or 4 dimensions, got {images.ndim}")
    batch = images if images.ndim == 4 else images[None]
    h_out, w_out = (int(v) for v in np.asarray(size).reshape(-1))
    if h_out <= 0 or w_out <= 0:
        raise InvalidArgumentError(f"output dimensions must be positive, got {[h_out, w_out]}")
    h_in, w_in = batch.shape[1:3]
    if preserve_aspect_ratio:   # the largest size within `size` of the image's aspect
        factor = min(np.float32(h_out) / np.float32(h_in), np.float32(w_out) / np.float32(w_in))
        h_out = int(np.round(np.float32(factor) * np.float32(h_in)))
        w_out = int(np.round(np.float32(factor) * np.float32(w_in)))
    if (h_in, w_in) == (h_out, w_out):
        return images
    if method == "nearest":
        ys = _source(h_in, h_out, align_corners, True)
        xs = _source(w_in, w_out, align_corners, True)
        out = batch[:, ys][:, :, xs]
    else:
        y0, y1, ly = _source(h_in, h_out, align_corners, False)
        x0, x1, lx = _source(w_in, w_out, align_corners, False)
        f = batch.astype(np.float32)
        lx = lx[None, None, :, None]
        top = f[:, y0][:, :, x0] + (f[:, y0][:, :, x1] - f[:, y0][:, :, x0]) * lx
        bottom = f[:, y1][:, :, x0] + (f[:, y1][:, :, x1] - f[:, y1][:, :, x0]) * lx
        out = top + (bottom - top) * ly[None, :, None, None]
    return out if images.ndim == 4 else out[0]


def resize_images(images, size, method=ResizeMethod.BILINEAR, align_corners=False,
                  preserve_aspect_ratio=False, name=None):
    """TF1's ``tf.image.resize_images`` (also ``tf.image.resize`` in TF1): a 3-D image or
    a 4-D batch resized to ``size = [height, width]``.

    >>> img = np.arange(4, dtype=np.uint8).reshape(2, 2, 1)
    >>> from nbdata.compat.v1.ops import Session
    >>> np.round(Session().run(resize_images(img, [3, 3]))[..., 0], 3).tolist()
    [[0.0, 0.667, 1.0], [1.333, 2.0, 2.333], [2.0, 2.667, 3.0]]
    """
    if method not in _METHODS:
        raise UnimplementedError(f"resize_images: method {method!r} is not supported "
                                 "(bilinear and nearest neighbor are)")
    images = convert(images, what="resize_images")
    return _apply(_resize_v1, (images, _size_pair(size), _METHODS[method], bool(align_corners),
                               bool(preserve_aspect_ratio)), "ResizeImages", name)


resize = resize_images


def resize_bilinear(images, size, align_corners=False, half_pixel_centers=False, name=None):
    """TF1's ``tf.image.resize_bilinear``: a 4-D batch, float32 out."""
    if half_pixel_centers:
        return _nd_image.resize(images, size)
    if _rank(images) not in (4, None):
        raise ValueError("resize_bilinear: input must be 4-dimensional")
    return resize_images(images, size, ResizeMethod.BILINEAR, align_corners, name=name) \
        if _needs_resize(images, size) else _apply(_as_float32, (images,), "ResizeBilinear", name)


def resize_nearest_neighbor(images, size, align_corners=False, half_pixel_centers=False,
                            name=None):
    """TF1's ``tf.image.resize_nearest_neighbor``: a 4-D batch, its dtype kept."""
    if half_pixel_centers:
        raise UnimplementedError("resize_nearest_neighbor: half_pixel_centers is not supported")
    return resize_images(images, size, ResizeMethod.NEAREST_NEIGHBOR, align_corners, name=name)


def _as_float32(x):
    return np.asarray(x, np.float32)


def _needs_resize(images, size) -> bool:
    dims = _static(images).dims if isinstance(images, Symbolic) else np.shape(images)
    if dims is None or isinstance(size, Symbolic):
        return True
    return tuple(dims[-3:-1]) != _size_pair(size)


# ----------------------------------------------------------- crops and pads

def _crop(image, top, left, height, width):
    image = np.asarray(image)
    h, w = image.shape[-3:-1]
    if top < 0 or left < 0 or height <= 0 or width <= 0 or top + height > h or left + width > w:
        raise InvalidArgumentError(f"crop_to_bounding_box: the box ({top}, {left}, {height}, "
                                   f"{width}) does not fit an image of {h}x{w}")
    return image[..., top:top + height, left:left + width, :]


def _pad(image, top, left, height, width):
    image = np.asarray(image)
    h, w = image.shape[-3:-1]
    if top < 0 or left < 0 or height < top + h or width < left + w:
        raise InvalidArgumentError(f"pad_to_bounding_box: an image of {h}x{w} at ({top}, {left}) "
                                   f"does not fit {height}x{width}")
    pads = [(0, 0)] * (image.ndim - 3) + [(top, height - top - h), (left, width - left - w), (0, 0)]
    return np.pad(image, pads)


def crop_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """``tf.image.crop_to_bounding_box``."""
    return _apply(_crop, (convert(image), int(offset_height), int(offset_width),
                          int(target_height), int(target_width)), "crop_to_bounding_box", None)


def pad_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """``tf.image.pad_to_bounding_box``: zeros around the image."""
    return _apply(_pad, (convert(image), int(offset_height), int(offset_width),
                         int(target_height), int(target_width)), "pad_to_bounding_box", None)


def _crop_or_pad(image, target_height, target_width):
    image = np.asarray(image)
    h, w = image.shape[-3:-1]
    dh, dw = target_height - h, target_width - w
    cropped = _crop(image, max(-dh // 2, 0), max(-dw // 2, 0), min(target_height, h),
                    min(target_width, w))
    return _pad(cropped, max(dh // 2, 0), max(dw // 2, 0), target_height, target_width)


def resize_image_with_crop_or_pad(image, target_height, target_width):
    """``tf.image.resize_image_with_crop_or_pad``: centered crop and/or zero pad to the
    target size."""
    return _apply(_crop_or_pad, (convert(image), int(target_height), int(target_width)),
                  "resize_image_with_crop_or_pad", None)


resize_with_crop_or_pad = resize_image_with_crop_or_pad


def _central_crop(image, fraction):
    image = np.asarray(image)
    h, w = image.shape[-3:-1]
    top, left = int((h - h * fraction) / 2), int((w - w * fraction) / 2)
    return image[..., top:h - top, left:w - left, :]


def central_crop(image, central_fraction):
    """``tf.image.central_crop``: the central ``central_fraction`` of each side."""
    if not 0.0 < central_fraction <= 1.0:
        raise ValueError("central_fraction must be within (0, 1]")
    if central_fraction == 1.0:
        return image
    return _apply(_central_crop, (convert(image), float(central_fraction)), "central_crop", None)


def _crop_at(value, draws, size):
    value = np.asarray(value)
    size = np.asarray(size).reshape(-1).astype(np.int64)
    limit = np.asarray(value.shape, np.int64) - size + 1
    if size.size != value.ndim or (limit < 1).any():
        raise InvalidArgumentError(f"Need value.shape >= size, got {list(value.shape)} and "
                                   f"{size.tolist()}")
    offset = np.asarray(draws, np.int64) % limit
    return value[tuple(slice(o, o + s) for o, s in zip(offset, size))]


def _crop_at_spec(value, draws, size):
    """``size`` of ``value``'s dtype: known before the value's dims are (a decoded
    image's sample has other dims than its records give)."""
    spec = value.spec if isinstance(value, Symbolic) else None
    dtype = spec.dtype if spec is not None else np.asarray(value).dtype
    if isinstance(size, Symbolic):
        n = _static(size).dims
        return TensorSpec((None,) * n[0] if n and n[0] is not None else None, dtype)
    dims = tuple(int(v) for v in np.asarray(size).reshape(-1))
    have = spec.shape if spec is not None else np.shape(value)
    if have is not None and (len(have) != len(dims) or any(
            h is not None and d > h for h, d in zip(have, dims))):
        raise InvalidArgumentError(f"Need value.shape >= size, got {list(have)} and {list(dims)}")
    return TensorSpec(dims, dtype)


# The recorder takes an op's output spec from ``fn.primitive.abstract`` when it has one.
_crop_at.primitive = types.SimpleNamespace(abstract=_crop_at_spec)


def random_crop(value, size, seed=None, name=None):
    """TF1's ``tf.random_crop`` / ``tf.image.random_crop``: a window of ``size`` at
    offsets ``uniform int32 % (shape - size + 1)``, drawn per run."""
    value = convert(value, what="random_crop")
    rank = _rank(value)
    if rank is None:
        raise ValueError("random_crop: the rank of value must be known")
    window = _crop_size(value, size) if rank == 3 else None
    pair = _ops._element_seed() if window is not None else None
    if pair is not None:   # in a map function: nd.image's crop, drawn per element
        return _nd_image.random_crop(value, window, pair)
    draws = random_uniform([rank], 0, np.iinfo(np.int32).max, _ops.int32, seed=seed)
    return _apply(_crop_at, (value, draws, size), "random_crop", name)


def _crop_size(value, size):
    """``size`` as a tuple when nd.image's ``random_crop`` crops ``value`` as TF1 would
    (an (H, W, C) image, a constant size keeping its C channels), else None."""
    if isinstance(size, Symbolic) or not isinstance(value, Symbolic):
        return None
    try:
        window = tuple(int(v) for v in np.asarray(size).reshape(-1))
    except (TypeError, ValueError):
        return None
    dims = _static(value).dims
    if len(window) != 3 or dims is None or dims[2] is None or window[2] != dims[2]:
        return None
    return window


# -------------------------------------------------------------- conversion

def _convert_dtype(image, dtype, saturate):
    image = np.asarray(image)
    src = image.dtype
    if src == dtype:
        return image
    with np.errstate(all="ignore"):
        if src.kind in "iu" and dtype.kind in "iu":
            scale_in, scale_out = np.iinfo(src).max, np.iinfo(dtype).max
            if scale_in > scale_out:
                return (image // ((scale_in + 1) // (scale_out + 1))).astype(dtype)
            return image.astype(dtype) * dtype.type((scale_out + 1) // (scale_in + 1))
        if src.kind == "f" and dtype.kind == "f":
            return image.astype(dtype)
        if src.kind in "iu":
            return image.astype(dtype) * dtype.type(1.0 / np.iinfo(src).max)
        scaled = image * src.type(np.iinfo(dtype).max + 0.5)
        if saturate:
            info = np.iinfo(dtype)
            scaled = np.clip(scaled, info.min, info.max)
        return _ops._cast(scaled, dtype)


def convert_image_dtype(image, dtype, saturate=False, name=None):
    """``tf.image.convert_image_dtype``: integers scale to [0, 1] floats (times
    ``1 / MAX``), floats to integers times ``MAX + 0.5`` (truncated; clipped first with
    ``saturate``), integers to integers by powers of two."""
    dt = np.dtype(dtype)
    return _apply(_convert_dtype, (convert(image, what="convert_image_dtype"), dt, bool(saturate)),
                  "convert_image_dtype", name)


def _standardize(image):
    image = np.asarray(image, dtype=np.float32)
    axes = (-1, -2, -3)
    n = np.prod(image.shape[-3:])
    mean = np.mean(image, axis=axes, keepdims=True, dtype=np.float32)
    std = np.sqrt(np.mean(np.square(image - mean), axis=axes, keepdims=True, dtype=np.float32))
    return (image - mean) / np.maximum(std, np.float32(1.0) / np.sqrt(np.float32(n)))


def per_image_standardization(image):
    """``tf.image.per_image_standardization``: ``(x - mean) / max(stddev, 1/sqrt(N))``
    per image, float32."""
    return _apply(_standardize, (convert(image, what="per_image_standardization"),),
                  "per_image_standardization", None)


def adjust_hue(image, delta, name=None):
    """``tf.image.adjust_hue``: nd.image's entry, a graph op in graph mode."""
    return _apply(_nd_image.adjust_hue, (convert(image, what="adjust_hue"), delta), "AdjustHue", name)


def _flip_if(image, u, axis):
    image = np.asarray(image)
    u = np.asarray(u)
    if u.ndim == 0:
        return np.flip(image, axis) if u < 0.5 else image
    return np.where((u < 0.5).reshape((-1,) + (1,) * (image.ndim - 1)), np.flip(image, axis), image)


def _random_flip(image, seed, axis, op, entry=None):
    image = convert(image, what=op)
    rank = _rank(image)
    if rank not in (3, 4):
        raise ValueError(f"{op}: 'image' must have either 3 or 4 dimensions")
    pair = _ops._element_seed() if rank == 3 and entry is not None else None
    if pair is not None:   # in a map function: nd.image's flip, drawn per element
        return entry(image, pair)
    u = random_uniform([] if rank == 3 else [_static_batch(image)], 0, 1.0, seed=seed)
    return _apply(_flip_if, (image, u, axis - 3 if rank == 3 else axis - 3), op, None)


def _static_batch(image):
    n = _static(image).dims[0] if isinstance(image, Symbolic) else np.shape(image)[0]
    if n is None:
        raise ValueError("a batch of images needs a known batch size here")
    return n


def random_flip_left_right(image, seed=None):
    """``tf.image.random_flip_left_right``: mirrored with probability 1/2 (each image of
    a 4-D batch on its own)."""
    return _random_flip(image, seed, 2, "random_flip_left_right", _nd_image.random_flip_left_right)


def random_flip_up_down(image, seed=None):
    """``tf.image.random_flip_up_down``."""
    return _random_flip(image, seed, 1, "random_flip_up_down", _nd_image.random_flip_up_down)


def flip_up_down(image):
    """``tf.image.flip_up_down``: nd.image's entry, a graph op in graph mode."""
    return _apply(_nd_image.flip_up_down, (convert(image),), "flip_up_down", None)


def random_brightness(image, max_delta, seed=None):
    """``tf.image.random_brightness``: ``adjust_brightness`` by a delta uniform in
    ``[-max_delta, max_delta)``."""
    _max_delta(max_delta)
    pair = _ops._element_seed()
    if pair is not None:   # in a map function: nd.image's op, drawn per element
        return _nd_image.random_brightness(image, max_delta, pair)
    return _nd_image.adjust_brightness(image, random_uniform([], -max_delta, max_delta, seed=seed))


def random_contrast(image, lower, upper, seed=None):
    """``tf.image.random_contrast``: ``adjust_contrast`` by a factor uniform in
    ``[lower, upper)``."""
    _factor_range(lower, upper)
    pair = _ops._element_seed()
    if pair is not None:
        return _nd_image.random_contrast(image, lower, upper, pair)
    return _nd_image.adjust_contrast(image, random_uniform([], lower, upper, seed=seed))


def random_saturation(image, lower, upper, seed=None):
    """``tf.image.random_saturation``: ``adjust_saturation`` by a factor uniform in
    ``[lower, upper)``."""
    _factor_range(lower, upper)
    pair = _ops._element_seed()
    if pair is not None:
        return _nd_image.random_saturation(image, lower, upper, pair)
    return _nd_image.adjust_saturation(image, random_uniform([], lower, upper, seed=seed))


def random_hue(image, max_delta, seed=None):
    """``tf.image.random_hue``: ``adjust_hue`` by a delta uniform in
    ``[-max_delta, max_delta)``, ``max_delta <= 0.5``."""
    _max_delta(max_delta, 0.5)
    pair = _ops._element_seed()
    if pair is not None:
        return _nd_image.random_hue(image, max_delta, pair)
    return adjust_hue(image, random_uniform([], -max_delta, max_delta, seed=seed))


def sample_distorted_bounding_box(image_size, bounding_boxes, seed=None, seed2=None,
                                  min_object_covered=0.1, aspect_ratio_range=None,
                                  area_range=None, max_attempts=None,
                                  use_image_if_no_bounding_boxes=None, name=None):
    """TF1's ``tf.image.sample_distorted_bounding_box`` (optional seeds): nd.image's
    stateless box op with a key drawn per run."""
    key = _ops._element_seed()   # in a map function: the element's (key, slot)
    if key is None:
        key = random_uniform([2], 0, np.iinfo(np.int64).max, _ops.int64, seed=seed)
    return _nd_image.sample_distorted_bounding_box(
        image_size, bounding_boxes, seed=key, min_object_covered=min_object_covered,
        aspect_ratio_range=aspect_ratio_range or (0.75, 1.33),
        area_range=area_range or (0.05, 1.0), max_attempts=max_attempts or 100,
        use_image_if_no_bounding_boxes=bool(use_image_if_no_bounding_boxes))


_COLORS = np.array([[1, 1, 0, 1], [0, 0, 1, 1], [1, 0, 0, 1], [0, 1, 0, 1], [0.5, 0, 0.5, 1],
                    [0.5, 0.5, 0, 1], [0.5, 0, 0, 1], [0, 0, 0.5, 1], [0, 1, 1, 1],
                    [1, 0, 1, 1]], np.float32)


def _draw_boxes(images, boxes, colors):
    canvas = np.array(images, copy=True)
    boxes = np.asarray(boxes, np.float32)
    table = _COLORS if colors is None else np.asarray(colors, np.float32)
    n, h, w, depth = canvas.shape
    for b in range(n):
        for k, box in enumerate(boxes[b]):
            color = table[k % len(table)][:depth].astype(canvas.dtype)
            y0, x0 = int(box[0] * np.float32(h - 1)), int(box[1] * np.float32(w - 1))
            y1, x1 = int(box[2] * np.float32(h - 1)), int(box[3] * np.float32(w - 1))
            if y0 > y1 or x0 > x1 or y0 >= h or y1 < 0 or x0 >= w or x1 < 0:
                continue
            r0, r1, c0, c1 = max(y0, 0), min(y1, h - 1), max(x0, 0), min(x1, w - 1)
            if y0 >= 0:
                canvas[b, y0, c0:c1 + 1] = color
            if y1 < h:
                canvas[b, y1, c0:c1 + 1] = color
            if x0 >= 0:
                canvas[b, r0:r1 + 1, x0] = color
            if x1 < w:
                canvas[b, r0:r1 + 1, x1] = color
    return canvas


def draw_bounding_boxes(images, boxes, name=None, colors=None):
    """``tf.image.draw_bounding_boxes``: one-pixel box outlines on a 4-D batch,
    ``boxes`` ``[batch, N, 4]`` normalized ``[ymin, xmin, ymax, xmax]``."""
    return _apply(_draw_boxes, (convert(images), convert(boxes, _ops.float32), colors),
                  "DrawBoundingBoxes", name)


def __getattr__(name: str):
    """nd.image's other ops (decoders, adjust_*, ...) under the same names."""
    try:
        return getattr(_nd_image, name)
    except AttributeError:
        raise _ops.missing(f"image.{name}") from None
