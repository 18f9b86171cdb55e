"""``nd.image.sample_distorted_bounding_box``."""

import operator

import numba
import numpy as np
from numba.core import types
from numba.core.errors import TypingError
from numba.np.numpy_support import as_dtype

from nbdata import random
from nbdata.errors import InvalidArgumentError
from nbdata.primitives.image.arguments import pair_length, seed_counter, typing_pair
from nbdata.primitives.table import define
from nbdata.spec import TensorSpec
from nbdata.trace.graph import is_symbolic


# ------------------------------------------------ sample_distorted_bounding_box
#
# TensorFlow's algorithm (sample_distorted_bounding_box_op.cc) in its float32
# arithmetic, with nbdata's counter-based draws in place of TF's Philox stream.

_SDBB_OP = "StatelessSampleDistortedBoundingBox"
_SDBB_STREAM = 0x736462625F626F78  # b"sdbb_box": sample_distorted_bounding_box's draws
_SDBB_DTYPES = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.int16, np.int32, np.int64))
_TWO_POW_MINUS_24 = np.float32(2.0 ** -24)
_SHIFT40 = np.uint64(40)
_TF_EPS = np.float64(np.float32(1e-7))   # TF's kEps (a float, widened to double)
_INT32_MAX = 2147483647


@numba.njit(nogil=True, cache=True)
def _unit_float32(key, draw):
    """TF's RandFloat with nbdata's draws: float32 in [0, 1) from 24 random bits."""
    return np.float32(random.bits(key, draw) >> _SHIFT40) * _TWO_POW_MINUS_24


@numba.njit(nogil=True, cache=True)
def _lrint(x):
    return np.int64(np.rint(x))


@numba.njit(nogil=True, cache=True)
def _generate_crop(width, height, min_rel, max_rel, aspect, key, draw):
    """TF's GenerateRandomCrop: ``(ok, x, y, w, h, draw)``, each of its Uniform(n)
    draws being ``random.randint(key, draw, 0, n)`` at the next ``draw``."""
    f32 = np.float32
    if max_rel <= 0.0 or aspect <= 0.0 or width <= 0 or height <= 0 or min_rel > max_rel:
        return False, 0, 0, 0, 0, draw
    min_area = min_rel * f32(width) * f32(height)
    max_area = max_rel * f32(width) * f32(height)
    h = _lrint(np.sqrt(min_area / aspect))
    max_h = _lrint(np.sqrt(max_area / aspect))
    if _lrint(f32(max_h) * aspect) > width:
        # The smallest max_h with round(max_h * aspect) <= width.
        max_h = np.int64((np.float64(width) + 0.5 - _TF_EPS) / np.float64(aspect))
        if _lrint(f32(max_h) * aspect) > width:
            max_h -= 1
    max_h = min(max_h, height)
    h = min(h, max_h)
    if h < max_h:   # uniform in [h, max_h]
        h += random.randint(key, draw, 0, max_h - h + 1)
        draw += 1
    w = _lrint(f32(h) * aspect)
    area = f32(w * h)
    if area < min_area:   # rounding left it too small: one row more
        h += 1
        w = _lrint(f32(h) * aspect)
        area = f32(w * h)
    if area > max_area:   # ... or too large: one row less
        h -= 1
        w = _lrint(f32(h) * aspect)
        area = f32(w * h)
    if area < min_area or area > max_area or w > width or h > height or w <= 0 or h <= 0:
        return False, 0, 0, 0, 0, draw
    y = 0
    if h < height:   # TF's Uniform(height - h): the last offset is never drawn
        y = random.randint(key, draw, 0, height - h)
        draw += 1
    x = 0
    if w < width:
        x = random.randint(key, draw, 0, width - w)
        draw += 1
    return True, x, y, w, h, draw


@numba.njit(nogil=True, cache=True)
def _covers(x, y, w, h, rects, min_covered):
    """TF's SatisfiesOverlapConstraints: the crop covers ``min_covered`` of some box."""
    f32 = np.float32
    if f32(w * h) < 1.0:
        return False
    for b in range(rects.shape[0]):
        x0, y0, x1, y1 = rects[b, 0], rects[b, 1], rects[b, 2], rects[b, 3]
        area = f32((x1 - x0) * (y1 - y0))
        if area < 1.0:
            continue
        ix0, iy0 = max(x, x0), max(y, y0)
        ix1, iy1 = min(x + w, x1), min(y + h, y1)
        inter = f32(0.0) if ix0 > ix1 or iy0 > iy1 else f32((ix1 - ix0) * (iy1 - iy0))
        if inter / area >= min_covered:
            return True
    return False


@numba.njit(nogil=True, cache=True, error_model="numpy")
def _sample_distorted_box(height, width, boxes, seed, counter, min_covered, aspect_low,
                          aspect_high, area_low, area_high, max_attempts, use_image):
    """``(y, x, h, w, bbox)``: the box TF's algorithm picks (see
    ``sample_distorted_bounding_box``); ValueError for boxes TF rejects."""
    f32 = np.float32
    n = boxes.shape[0]
    rects = np.empty((max(n, 1), 4), np.int64)
    for b in range(n):
        for i in range(4):
            v = boxes[b, i]
            if not (v >= 0.0 and v <= 1.0):
                raise ValueError("All bounding box coordinates must be in [0.0, 1.0]")
        rects[b, 0] = np.int64(boxes[b, 1] * f32(width))
        rects[b, 1] = np.int64(boxes[b, 0] * f32(height))
        rects[b, 2] = np.int64(boxes[b, 3] * f32(width))
        rects[b, 3] = np.int64(boxes[b, 2] * f32(height))
    if n == 0:
        if not use_image:
            raise ValueError("No bounding boxes provided as input. One must enable "
                             "use_image_if_no_bounding_boxes if you wish to not provide "
                             "any bounding boxes.")
        rects[0, 0], rects[0, 1], rects[0, 2], rects[0, 3] = 0, 0, width, height
    key = random.key(seed, _SDBB_STREAM, counter)
    draw = 0
    x, y, w, h = 0, 0, width, height   # the whole image when every attempt fails
    for _ in range(max_attempts):
        aspect = _unit_float32(key, draw) * (aspect_high - aspect_low) + aspect_low
        draw += 1
        ok, cx, cy, cw, ch, draw = _generate_crop(width, height, area_low, area_high, aspect,
                                                  key, draw)
        if ok and _covers(cx, cy, cw, ch, rects, min_covered):
            x, y, w, h = cx, cy, cw, ch
            break
    bbox = np.empty((1, 1, 4), np.float32)
    bbox[0, 0, 0] = f32(y) / f32(height)
    bbox[0, 0, 1] = f32(x) / f32(width)
    bbox[0, 0, 2] = f32(y + h) / f32(height)
    bbox[0, 0, 3] = f32(x + w) / f32(width)
    return y, x, h, w, bbox


@numba.njit(nogil=True, cache=True)
def _sdbb_outputs(image_size, boxes, seed, counter, min_covered, aspect_low, aspect_high,
                  area_low, area_high, max_attempts, use_image):
    if image_size.shape[0] != 3:
        raise ValueError("image_size must contain 3 elements")
    height, width = np.int64(image_size[0]), np.int64(image_size[1])
    if height < 0 or height >= _INT32_MAX:
        raise ValueError("image height cannot be >= int32 max")
    if width < 0 or width >= _INT32_MAX:
        raise ValueError("image width cannot be >= int32 max")
    y, x, h, w, bbox = _sample_distorted_box(height, width, boxes, seed, counter, min_covered,
                                             aspect_low, aspect_high, area_low, area_high,
                                             max_attempts, use_image)
    begin = np.empty(3, image_size.dtype)
    size = np.empty(3, image_size.dtype)
    begin[0], begin[1], begin[2] = y, x, 0
    size[0], size[1], size[2] = h, w, -1
    return begin, size, bbox


def _f32_text(value) -> str:
    """A float as TensorFlow's error messages print it (C++'s default: %g)."""
    return f"{float(np.float32(value)):g}"


def _sdbb_attrs(min_object_covered, aspect_ratio_range, area_range, max_attempts,
                use_image_if_no_bounding_boxes) -> tuple:
    """The checked attributes, as float32 and ints, with TensorFlow's errors."""
    def pair(value, default, what):
        value = default if value is None else value
        try:
            values = [np.float32(v) for v in np.asarray(value, dtype=np.float64).reshape(-1)]
        except (TypeError, ValueError):
            raise TypeError(f"sample_distorted_bounding_box: {what} must be two numbers, got "
                            f"{value!r}") from None
        return values

    aspect = pair(aspect_ratio_range, (0.75, 1.33), "aspect_ratio_range")
    if len(aspect) != 2:
        raise InvalidArgumentError("Aspect ratio range field must specify 2 dimensions",
                                   _SDBB_OP)
    if not (aspect[0] > 0 and aspect[1] > 0):
        raise InvalidArgumentError("Aspect ratio range must be non-negative: "
                                   f"[{_f32_text(aspect[0])}, {_f32_text(aspect[1])}]",
                                   _SDBB_OP)
    area = pair(area_range, (0.05, 1.0), "area_range")
    if len(area) != 2:
        raise InvalidArgumentError("Area range field must specify 2 dimensions", _SDBB_OP)
    text = f"[{_f32_text(area[0])}, {_f32_text(area[1])}]"
    if not (area[0] > 0 and area[1] > 0):
        raise InvalidArgumentError(f"Area range must be non-negative: {text}", _SDBB_OP)
    if not (area[0] <= 1 and area[1] <= 1):
        raise InvalidArgumentError(f"Area range must be less then or equal to 1.0: {text}",
                                   _SDBB_OP)
    attempts = 100 if max_attempts is None else operator.index(max_attempts)
    if attempts <= 0:
        raise InvalidArgumentError(f"Max attempts must be non-negative: {attempts}", _SDBB_OP)
    covered = np.asarray(0.1 if min_object_covered is None else min_object_covered)
    return covered, aspect, area, attempts, bool(use_image_if_no_bounding_boxes)


def _sdbb_spec(image_size, bounding_boxes, seed=None, *args, **kwargs):
    spec = getattr(image_size, "spec", None)
    dtype = spec.dtype if spec is not None else np.asarray(image_size).dtype
    return (TensorSpec((3,), dtype), TensorSpec((3,), dtype), TensorSpec((1, 1, 4), np.float32))


def _sdbb_nopython(image_size, bounding_boxes, seed=None, min_object_covered=0.1,
                   aspect_ratio_range=(0.75, 1.33), area_range=(0.05, 1.0), max_attempts=100,
                   use_image_if_no_bounding_boxes=False, name=None):
    op = "sample_distorted_bounding_box"
    if not (isinstance(image_size, types.Array) and image_size.ndim == 1
            and as_dtype(image_size.dtype) in _SDBB_DTYPES):
        raise TypingError(f"{op}: image_size must be a 1-D array of uint8, int8, int16, "
                          f"int32 or int64, got {image_size}")
    if not (isinstance(bounding_boxes, types.Array) and bounding_boxes.ndim == 3
            and isinstance(bounding_boxes.dtype, types.Float)):
        raise TypingError(f"{op}: bounding_boxes must be a 3-D float array, got "
                          f"{bounding_boxes}")
    typing_pair(op, "seed", seed, types.Integer)
    typing_pair(op, "aspect_ratio_range", aspect_ratio_range, (types.Integer, types.Float),
                 required=False)
    typing_pair(op, "area_range", area_range, (types.Integer, types.Float), required=False)

    def impl(image_size, bounding_boxes, seed=None, min_object_covered=0.1,
             aspect_ratio_range=(0.75, 1.33), area_range=(0.05, 1.0), max_attempts=100,
             use_image_if_no_bounding_boxes=False, name=None):
        pair_length(op, "seed", seed)
        pair_length(op, "aspect_ratio_range", aspect_ratio_range)
        pair_length(op, "area_range", area_range)
        aspect_low = np.float32(aspect_ratio_range[0])
        aspect_high = np.float32(aspect_ratio_range[1])
        area_low, area_high = np.float32(area_range[0]), np.float32(area_range[1])
        covered = np.float32(min_object_covered)
        if not (aspect_low > 0 and aspect_high > 0):
            raise ValueError("Aspect ratio range must be non-negative")
        if not (area_low > 0 and area_high > 0 and area_low <= 1 and area_high <= 1):
            raise ValueError("Area range must be in (0, 1]")
        if max_attempts <= 0:
            raise ValueError("Max attempts must be non-negative")
        if not covered >= 0:
            raise ValueError("Min object covered must be non-negative")
        if bounding_boxes.shape[2] != 4:
            raise ValueError("bounding boxes must have shape [4] or [*, 4]")
        boxes = bounding_boxes.reshape(-1, 4).astype(np.float32)
        return _sdbb_outputs(image_size, boxes, np.int64(seed[0]), np.int64(seed[1]), covered,
                             aspect_low, aspect_high, area_low, area_high,
                             np.int64(max_attempts), bool(use_image_if_no_bounding_boxes))
    return impl


@define(tags=("image",),
        name="sample_distorted_bounding_box", abstract=_sdbb_spec, numba=_sdbb_nopython)
def _sample_distorted_bounding_box(image_size, bounding_boxes, seed=None,
                                   min_object_covered=0.1, aspect_ratio_range=(0.75, 1.33),
                                   area_range=(0.05, 1.0), max_attempts=100,
                                   use_image_if_no_bounding_boxes=False, name=None):
    op = "sample_distorted_bounding_box"
    covered, aspect, area, attempts, use_image = _sdbb_attrs(
        min_object_covered, aspect_ratio_range, area_range, max_attempts,
        use_image_if_no_bounding_boxes)
    seed, counter = seed_counter(op, seed)
    size = np.asarray(image_size)
    if size.dtype not in _SDBB_DTYPES:
        name = {"float32": "float", "float64": "double", "float16": "half"}.get(
            size.dtype.name, size.dtype.name)
        raise InvalidArgumentError(
            f"Value for attr 'T' of {name} is not in the list of allowed values: "
            "uint8, int8, int16, int32, int64", _SDBB_OP)
    shape = ",".join(map(str, size.shape))
    if size.ndim != 1:
        raise InvalidArgumentError(f"image_size must be 1-dimensional[{shape}]", _SDBB_OP)
    if size.shape[0] != 3:
        raise InvalidArgumentError(f"image_size must contain 3 elements[{shape}]", _SDBB_OP)
    # TF reads the sizes as uint64: a negative one is too large.
    for value, what in ((int(size[0]), "height"), (int(size[1]), "width")):
        if not 0 <= value < _INT32_MAX:
            raise InvalidArgumentError(f"image {what} cannot be >= int32 max", _SDBB_OP)
    boxes = np.asarray(bounding_boxes)
    if boxes.dtype.kind not in "iuf":
        raise TypeError(f"{op}: bounding_boxes must be float32, got {boxes.dtype}")
    boxes = boxes.astype(np.float32)
    shape = ",".join(map(str, boxes.shape))
    if boxes.ndim != 3:
        raise InvalidArgumentError(
            f"input boxes must be 3-dimensional [batch, num_boxes, coords]: [{shape}]", _SDBB_OP)
    if boxes.shape[2] != 4:
        raise InvalidArgumentError(f"bounding boxes must have shape [4] or [*, 4], got "
                                   f"[{shape}]", _SDBB_OP)
    if covered.ndim != 0:
        raise InvalidArgumentError(f"min_object_covered must be 0-D, got shape "
                                   f"[{','.join(map(str, covered.shape))}]", _SDBB_OP)
    covered = np.float32(covered)
    if not covered >= 0:
        raise InvalidArgumentError(f"Min object covered must be non-negative: "
                                   f"{_f32_text(covered)}", _SDBB_OP)
    flat = boxes.reshape(-1, 4)
    bad = flat[~((flat >= 0) & (flat <= 1))]
    if bad.size:
        raise InvalidArgumentError(f"All bounding box coordinates must be in [0.0, 1.0]: "
                                   f"{_f32_text(bad[0])}", _SDBB_OP)
    if not flat.size and not use_image:
        raise InvalidArgumentError(
            "No bounding boxes provided as input. One must enable "
            "use_image_if_no_bounding_boxes if you wish to not provide any bounding boxes.",
            _SDBB_OP)
    return _sdbb_outputs(size, np.ascontiguousarray(flat), seed, counter, covered,
                         aspect[0], aspect[1], area[0], area[1], np.int64(attempts), use_image)


def sample_distorted_bounding_box(image_size, bounding_boxes, seed=None, min_object_covered=0.1,
                                  aspect_ratio_range=(0.75, 1.33), area_range=(0.05, 1.0),
                                  max_attempts=100, use_image_if_no_bounding_boxes=False,
                                  name=None):
    """A random crop box of an image covering part of its bounding boxes
    (``tf.image.stateless_sample_distorted_bounding_box``; TF's Inception crop).

    TensorFlow's algorithm and float32 arithmetic: each attempt ``a < max_attempts``
    draws an aspect ratio uniformly in ``aspect_ratio_range``; the crop height is
    ``round(sqrt(area_range[0] * H * W / aspect))`` plus a uniform draw up to the
    largest height whose area stays within ``area_range[1]`` and whose width
    ``round(height * aspect)`` fits (one row more or less where rounding leaves the
    area outside ``area_range``); the offsets are uniform in ``[0, H - h)`` and
    ``[0, W - w)`` (TF never draws the last offset; 0 when the crop fills the side).
    The first crop covering at least ``min_object_covered`` of one of the boxes
    (boxes of less than a pixel skipped; no boxes: the image, with
    ``use_image_if_no_bounding_boxes``) is taken; if no attempt succeeds, the whole
    image.

    Stateless, like nbdata's other random ops: TensorFlow's draws come from its Philox
    stream, nbdata's from ``nbdata.random`` (so the boxes follow TF's distribution,
    not its exact values): with ``seed = (s, c)`` and ``k = random.key(s, stream, c)``
    (stream the ASCII of ``b"sdbb_box"``), draw ``j`` of the element is
    ``random.bits(k, j)``: an aspect draw takes its top 24 bits as a float32 in [0, 1),
    each uniform integer below ``n`` is ``random.randint(k, j, 0, n)``, in TF's order.

    Args:
        image_size: ``[height, width, channels]``, a 1-D array of uint8, int8, int16,
            int32 or int64 (``extract_jpeg_shape``'s output, say).
        bounding_boxes: float ``[batch, N, 4]`` boxes ``[ymin, xmin, ymax, xmax]`` in
            [0, 1] (all batches' boxes are used, as in TF).
        seed: ``(seed, counter)``, two integers (required); pass e.g. the element index
            from ``Dataset.enumerate`` as the counter.
        min_object_covered: the fraction of a box the crop must cover (>= 0).
        aspect_ratio_range: ``(low, high)`` of the crop's width / height (> 0).
        area_range: ``(low, high)`` of the crop's area as a fraction of the image's,
            in (0, 1].
        max_attempts: attempts before the whole image is taken (> 0).
        use_image_if_no_bounding_boxes: with no boxes, take the whole image as the box
            (else InvalidArgumentError).
        name: ignored (TensorFlow's op name).

    Returns:
        ``(begin, size, bboxes)``: ``begin = [y, x, 0]`` and ``size = [h, w, -1]`` of
        ``image_size``'s dtype (``-1`` wraps for uint8, as in TF), for ``np`` slicing or
        ``decode_and_crop_jpeg``'s window ``[y, x, h, w]``, and the crop as a
        ``(1, 1, 4)`` float32 box ``[y/H, x/W, (y+h)/H, (x+w)/W]``.

    Raises:
        InvalidArgumentError: TensorFlow's errors for bad shapes, dtypes, ranges, box
            coordinates outside [0, 1], no boxes without
            ``use_image_if_no_bounding_boxes``.
        TypeError: ``seed`` missing or not two integers.

    Inside ``Dataset.map`` it compiles into the fused kernel (with the header shape
    from ``extract_jpeg_shape`` and the crop of ``decode_and_crop_jpeg``).

    Example:
        >>> import numpy as np
        >>> from nbdata import image
        >>> boxes = np.array([[[0.1, 0.2, 0.8, 0.9]]], np.float32)
        >>> begin, size, box = image.sample_distorted_bounding_box(
        ...     np.array([100, 200, 3], np.int32), boxes, seed=(1, 0))
        >>> begin.dtype, size[2], box.shape
        (dtype('int32'), np.int32(-1), (1, 1, 4))
        >>> image.sample_distorted_bounding_box(   # only the whole image fits
        ...     np.array([100, 200, 3]), boxes, seed=(1, 0), area_range=(1.0, 1.0),
        ...     aspect_ratio_range=(2.0, 2.0))[:2]
        (array([0, 0, 0]), array([100, 200,  -1]))
    """
    if is_symbolic(image_size, bounding_boxes, seed, min_object_covered):
        # Constants as arrays and tuples, so that a compiled twin reads them as such.
        if not is_symbolic(bounding_boxes):
            bounding_boxes = np.asarray(bounding_boxes, np.float32)
        if not is_symbolic(aspect_ratio_range) and aspect_ratio_range is not None:
            aspect_ratio_range = tuple(float(v) for v in aspect_ratio_range)
        if not is_symbolic(area_range) and area_range is not None:
            area_range = tuple(float(v) for v in area_range)
    return _sample_distorted_bounding_box(
        image_size, bounding_boxes, seed, min_object_covered, aspect_ratio_range, area_range,
        max_attempts, use_image_if_no_bounding_boxes, name)
