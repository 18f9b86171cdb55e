"""``decode_jpeg`` and ``encode_jpeg`` on libjpeg-turbo (the optional ``[image]`` extra).

nbdata does not decode JPEG itself: it calls ``simplejpeg``, a small maintained binding
of libjpeg-turbo that decodes straight into a NumPy array and releases the GIL while it
decodes, so a batch of images is decoded by several threads at once. It was measured
against Pillow and OpenCV on 256x256 JPEGs (2 cores): simplejpeg decoded fastest on
one thread and scaled best on two (Pillow's decode-and-convert path holds the GIL
longer), and it exposes every libjpeg setting that ``tf.io.decode_jpeg`` has, so its
pixels equal TensorFlow's bit for bit for each ``dct_method``, ``fancy_upscaling`` and
``ratio``. It decodes strictly first (libjpeg-turbo's stop-on-warning mode, the fast
path); data it refuses is decoded again leniently when libjpeg, as TensorFlow drives it,
only warns about it (see ``JpegOptions._decode_damaged``). PNG and GIF data, which
TensorFlow's ``decode_jpeg`` also reads, go to ``nbdata/primitives/codecs.py``.

>>> import numpy as np
>>> image = np.zeros((4, 6, 3), np.uint8)
>>> decode_jpeg(encode_jpeg(image)).shape
(4, 6, 3)
"""

from __future__ import annotations

import math
import threading

import numba
import numpy as np

from nbdata.chunks import PackedRows, RowList, StringColumn
from nbdata.primitives import codecs
from nbdata.primitives.decoder import Decoder, RowError, for_records
from nbdata.primitives.gpu import Step
from nbdata.errors import InvalidArgumentError, UnimplementedError
from nbdata.spec import TensorSpec
from nbdata.primitives.table import define

EXTRA = "pip install 'nbdata[image]'"
_DCT_METHODS = ("", "INTEGER_FAST", "INTEGER_ACCURATE")
_CMYK = ("CMYK", "YCCK")


def _library():
    try:
        import simplejpeg
    except ImportError:
        raise UnimplementedError(
            "JPEG support needs the optional simplejpeg package (libjpeg-turbo): "
            f"{EXTRA}", "DecodeJpeg") from None
    return simplejpeg


def available() -> bool:
    """Whether the ``[image]`` extra is installed (JPEG decode and encode work)."""
    try:
        _library()
        return True
    except UnimplementedError:
        return False


class JpegOptions:
    """The checked arguments of one ``decode_jpeg`` call."""

    def __init__(self, channels=0, ratio=1, fancy_upscaling=True, try_recover_truncated=False,
                 acceptable_fraction=1.0, dct_method=""):
        channels, ratio = int(channels), int(ratio)
        if channels not in (0, 1, 3, 4):   # 4: PNG data only (see codecs.decode)
            raise InvalidArgumentError(f"`channels` must be 0, 1, 3 or 4 but got {channels}",
                                       "DecodeJpeg")
        if ratio not in (1, 2, 4, 8):
            raise InvalidArgumentError(f"ratio must be 1, 2, 4, or 8, got {ratio}", "DecodeJpeg")
        dct = dct_method.decode() if isinstance(dct_method, bytes) else str(dct_method)
        if dct not in _DCT_METHODS:
            raise InvalidArgumentError(
                "dct_method must be one of {'', 'INTEGER_FAST', 'INTEGER_ACCURATE'}",
                "DecodeJpeg")
        fraction = float(acceptable_fraction)
        if not 0.0 <= fraction <= 1.0:
            raise InvalidArgumentError(
                f"acceptable_fraction must be in [0, 1], got {acceptable_fraction}",
                "DecodeJpeg")
        self.channels, self.ratio = channels, ratio
        self.fancy_upscaling = bool(fancy_upscaling)
        self.try_recover_truncated = bool(try_recover_truncated)
        self.acceptable_fraction = fraction
        # TensorFlow's default ("") is libjpeg's fast integer DCT.
        self.fastdct = dct != "INTEGER_ACCURATE"

    def _fail(self, error: Exception) -> InvalidArgumentError:
        if isinstance(error, KeyError):
            error = "unreadable JPEG header"
        return InvalidArgumentError(
            f"jpeg::Uncompress failed. Invalid JPEG data or crop window ({error}).", "DecodeJpeg")

    def plan(self, data: bytes) -> tuple:
        """``(shape, colorspace, min_height, min_width)`` of the decoded image, from the
        JPEG header; InvalidArgumentError for data that is not a JPEG. PNG and GIF data
        (which TensorFlow's ``decode_jpeg`` also reads) are decoded here already:
        ``(shape, image, None, None)``."""
        lib = _library()
        if not data:
            raise InvalidArgumentError("Input is empty.", "DecodeJpeg")
        if data[:3] != b"\xff\xd8\xff":
            image = codecs.decode(data, "DecodeJpeg", self.channels)
            return image.shape, image, None, None
        if self.channels == 4:
            raise InvalidArgumentError("JPEG does not support 4 channels", "DecodeJpeg")
        try:
            # simplejpeg's lenient header reader raises a bare KeyError on some truncated
            # headers: every failure here is bad data.
            height, width, space, _ = lib.decode_jpeg_header(data, strict=False)
        except (ValueError, RuntimeError, OverflowError, KeyError) as e:
            raise self._fail(e) from None
        out_h, out_w = math.ceil(height / self.ratio), math.ceil(width / self.ratio)
        if space in _CMYK:
            if self.channels == 1:   # libjpeg converts CMYK to no grayscale: TF fails too
                raise self._fail("a CMYK image cannot be decoded to 1 channel")
            mode = "CMYK"
        elif self.channels == 1 or (self.channels == 0 and space == "Gray"):
            mode = "GRAY"
        else:
            mode = "RGB"
        channels = 1 if mode == "GRAY" else 3
        return (out_h, out_w, channels), mode, out_h, out_w

    def decode(self, data: bytes, plan: tuple | None = None, out: np.ndarray | None = None):
        """One image as an (H, W, C) uint8 array, decoded into ``out`` when given (of the
        planned shape); InvalidArgumentError for data this decoder cannot read."""
        if plan is None:
            plan = self.plan(data)
        shape, mode, min_h, min_w = plan
        if isinstance(mode, np.ndarray):    # PNG or GIF data, decoded by plan()
            if out is None:
                return mode
            out[...] = mode
            return out
        try:
            image = self._decompress(data, shape, mode, min_h, min_w, True, out)
        except (ValueError, RuntimeError, OverflowError, KeyError) as e:
            image = self._decode_damaged(data, shape, mode, min_h, min_w, out, e)
        if image.ndim == 2:
            image = image[:, :, None]
        if out is not None and not np.shares_memory(image, out):
            out[...] = image
            return out
        return image

    def _decode_damaged(self, data, shape, mode, min_h, min_w, out, error):
        """What libjpeg (as TensorFlow drives it) makes of data that libjpeg-turbo's strict
        mode refused. Complete data (its scans end in an EOI marker) that libjpeg only
        warns about (corrupt entropy data, extraneous bytes) decodes as libjpeg decodes
        it. Truncated data fails unless ``try_recover_truncated``: then libjpeg ends it
        with a fake EOI marker and decodes what is there (see ``decode_jpeg``)."""
        complete, multi_scan = jpeg_layout(data)
        if not complete and not self.try_recover_truncated:
            if self.acceptable_fraction < 1 and not multi_scan:
                raise UnimplementedError(
                    "decode_jpeg: acceptable_fraction < 1 (keeping the rows read before a "
                    "truncated JPEG ends) is not supported; pass try_recover_truncated=True "
                    "to decode truncated images", "DecodeJpeg")
            raise self._fail(error)
        try:
            return self._decompress(data, shape, mode, min_h, min_w, False, out)
        except (ValueError, RuntimeError, OverflowError, KeyError) as e:
            raise self._fail(e) from None

    def _decompress(self, data, shape, mode, min_h, min_w, strict, out):
        lib = _library()
        if mode != "CMYK":
            return lib.decode_jpeg(data, colorspace=mode, fastdct=self.fastdct,
                                   fastupsample=not self.fancy_upscaling, min_height=min_h,
                                   min_width=min_w, strict=strict,
                                   buffer=out)
        image = _cmyk_to_rgb(lib.decode_jpeg(
            data, colorspace="CMYK", fastdct=self.fastdct, fastupsample=not self.fancy_upscaling,
            min_height=min_h, min_width=min_w, strict=strict))
        return image


_STANDALONE = frozenset([0x01, 0xD8, *range(0xD0, 0xD8)])
_PROGRESSIVE_SOF = frozenset([0xC2, 0xC6, 0xCA, 0xCE])


def jpeg_layout(data: bytes) -> tuple:
    """``(complete, multi_scan)`` of a JPEG from its markers: whether libjpeg reaches an
    EOI marker inside ``data`` (else it runs out of data: a truncated image), and whether
    the image has several scans (progressive, or one scan per component), which libjpeg
    buffers whole before it returns any row."""
    n = len(data)
    pos, components, multi_scan, scans = 2, 0, False, 0
    while pos + 1 < n:
        if data[pos] != 0xFF:                 # stray bytes: libjpeg skips them
            pos = data.find(b"\xff", pos)
            if pos < 0:
                break
            continue
        marker = data[pos + 1]
        if marker == 0xFF:
            pos += 1
            continue
        if marker == 0xD9:
            return True, multi_scan
        if marker in _STANDALONE:
            pos += 2
            continue
        if pos + 4 > n:
            break
        end = pos + 2 + int.from_bytes(data[pos + 2:pos + 4], "big")
        if end > n:
            break
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC) and pos + 10 <= n:
            components = data[pos + 9]
            multi_scan = multi_scan or marker in _PROGRESSIVE_SOF
        if marker == 0xDA:
            scans += 1
            multi_scan = multi_scan or scans > 1 or (pos + 4 < n and data[pos + 4] < components)
            pos = end                          # entropy-coded data up to the next marker
            while True:
                pos = data.find(b"\xff", pos)
                if pos < 0 or pos + 1 >= n:
                    return False, multi_scan
                if data[pos + 1] == 0 or 0xD0 <= data[pos + 1] <= 0xD7:
                    pos += 2
                    continue
                break
            continue
        pos = end
    return False, multi_scan


codecs.jpeg_options = JpegOptions


def _cmyk_to_rgb(cmyk: np.ndarray) -> np.ndarray:
    """Adobe's inverted CMYK (what JPEG files hold) to RGB: R = C * K / 255."""
    c = cmyk.astype(np.uint16)
    k = c[..., 3:4]
    return (c[..., :3] * k // 255).astype(np.uint8)   # truncated, as TensorFlow does


def _as_bytes(value) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, (bytes, bytearray, memoryview, np.bytes_)):
        return bytes(value)
    raise TypeError(f"decode_jpeg: contents must be bytes or a string, got "
                    f"{type(value).__name__}")


def decode_many(options: JpegOptions, values: list):
    """Decodes ``values`` in parallel threads (libjpeg-turbo runs without the GIL): one
    (N, H, W, C) array, decoded in place, when every image has one shape, else a list of
    arrays. Raises RowError for the first image that fails."""
    n = len(values)
    plans = []
    for i, data in enumerate(values):
        try:
            plans.append(options.plan(data))
        except InvalidArgumentError as e:
            raise RowError(i, e) from None
    same = n > 0 and all(p[0] == plans[0][0] for p in plans)
    # Images of different sizes are decoded into one packed buffer (see PackedRows).
    out = np.empty((n,) + plans[0][0], np.uint8) if same else \
        PackedRows.empty([p[0] for p in plans], np.uint8, 3)

    def run(span):
        for i in range(*span):
            try:
                options.decode(values[i], plans[i], out[i])
            except InvalidArgumentError as e:
                return i, e
        return None

    # Within a pipeline the calling stage's kernel thread count (its share of the
    # thread budget); outside one, every core.
    workers = min(numba.get_num_threads(), n)
    if workers <= 1 or n < 4:
        failures = [run((0, n))]
    else:
        # Threads of this call only (no pool outlives it); the caller takes the first span.
        step = -(-n // workers)
        spans = [(s, min(n, s + step)) for s in range(0, n, step)]
        failures = [None] * len(spans)

        def work(k):
            try:
                failures[k] = run(spans[k])
            except BaseException as e:  # re-raised by the caller below
                failures[k] = e

        threads = [threading.Thread(target=work, args=(k,), name="nbdata-jpeg")
                   for k in range(1, len(spans))]
        for t in threads:
            t.start()
        work(0)
        for t in threads:
            t.join()
    for failure in failures:
        if isinstance(failure, BaseException):
            raise failure
        if failure is not None:
            raise RowError(failure[0], failure[1])
    return out


def _in_batch(e: RowError, index: int) -> RowError:
    """``e`` with its message naming the image's index in its batch."""
    error = InvalidArgumentError(f"{e.error.message} (image {index} of the batch)",
                                 "DecodeJpeg")
    return RowError(e.row, error)


def stack_images(images: list) -> np.ndarray:
    """The images as one (N, H, W, C) array; InvalidArgumentError naming the first image
    whose shape differs from image 0's."""
    for i, image in enumerate(images):
        if image.shape != images[0].shape:
            raise RowError(i, InvalidArgumentError(
                f"decode_jpeg: images of a batch must share one shape to be stacked: image "
                f"{i} is {'x'.join(map(str, image.shape))}, image 0 is "
                f"{'x'.join(map(str, images[0].shape))}", "DecodeJpeg"))
    if not images:
        return np.zeros((0, 0, 0, 0), np.uint8)
    return np.stack(images)


def _jpeg_decoder(contents, channels=0, ratio=1, fancy_upscaling=True,
                  try_recover_truncated=False, acceptable_fraction=1, dct_method="", name=None):
    """The column decoder of a ``decode_jpeg`` call."""
    options = JpegOptions(channels, ratio, fancy_upscaling, try_recover_truncated,
                          acceptable_fraction, dct_method)
    _library()
    return for_records(JpegDecoder(options), contents)


class _DeviceDecode(Step):
    """``nd.gpu.decode_jpeg``: a host batch of JPEG bytes decoded by NVIDIA nvImageCodec
    into one device buffer (``nbdata/gpu/jpeg.py``), images at their own sizes; first in
    a chain, whose next op makes them one size in the same kernel."""

    name = "decode_jpeg"
    kind = "decode"

    def __init__(self, channels: int = 3):
        from nbdata.gpu import jpeg
        self.channels = jpeg.check_channels(channels)

    def out_shape(self, shape):
        if self.channels == 0:
            raise ValueError("nd.gpu.decode_jpeg: inside a map, pass channels=3 or 1 (the ops "
                             "after it need one channel count)")
        return (None, None, self.channels)

    def out_dtype(self, dtype):
        return np.dtype(np.uint8)

    def decode(self, contents):
        from nbdata.gpu import jpeg
        return jpeg.decode_jpeg(contents, self.channels,
                                JpegOptions(self.channels, dct_method="INTEGER_ACCURATE"))

    def describe(self):
        return (f"decode_jpeg(channels={self.channels}): nvImageCodec decodes the batch's JPEGs "
                "into one device buffer, images at their own sizes")


@define(abstract=lambda *args, **kwargs: _jpeg_decoder(*args, **kwargs).output_spec,
        decoder=_jpeg_decoder, gpu=_DeviceDecode)
def decode_jpeg(contents, channels=0, ratio=1, fancy_upscaling=True, try_recover_truncated=False,
                acceptable_fraction=1, dct_method="", name=None):
    """Decodes JPEG images to uint8 arrays (``tf.io.decode_jpeg``, same pixels).

    Like TensorFlow's, it also decodes PNG data (``channels`` 0 keeps a PNG's own
    channels, alpha included; 4 is allowed for PNG only) and single-frame GIFs, as
    ``decode_png`` and ``decode_gif`` do; BMP data is refused.

    Args:
        contents: one encoded image (``bytes``), or a list or 1-D array of them (a
            batch, decoded by parallel threads: nbdata's extension; all images of a
            batch must decode to one shape).
        channels: 0 (the number in the image: 1 for grayscale, 3 for color), 1
            (grayscale), 3 (RGB) or 4 (PNG data only).
        ratio: downscale by 1, 2, 4 or 8 while decoding (each side rounded up).
        fancy_upscaling: smooth chroma upsampling (libjpeg's fancy upsampling).
        try_recover_truncated: decode a truncated image instead of failing: the data
            is ended with a fake EOI marker, as TensorFlow ends it, and what is missing
            decodes as libjpeg's gray. The rows of the MCU rows read whole equal
            TensorFlow's; TensorFlow's band of damaged rows after them does not (its
            source manager re-reads bytes there). A cut before the scan data fails.
        acceptable_fraction: in [0, 1]. Below 1 TensorFlow keeps the rows libjpeg
            read before a truncated image ends (zeros after them) when
            ``try_recover_truncated`` is False; nbdata cannot count those rows and
            raises UnimplementedError for such an image (a complete image, or one
            TensorFlow rejects anyway, is unaffected).
        dct_method: ``""`` (TensorFlow's default, the fast integer DCT),
            ``"INTEGER_FAST"`` or ``"INTEGER_ACCURATE"``.
        name: ignored (TensorFlow's op name).

    Returns:
        An (H, W, C) uint8 array, or (N, H, W, C) for a batch.

    Raises:
        InvalidArgumentError: data that is not a readable image (naming the image of
            a batch), bad arguments, or batch images of different shapes.
        UnimplementedError: the ``[image]`` extra is not installed; see
            ``acceptable_fraction``; WebP and JPEG XL data.

    Inside ``Dataset.map`` on file records, the call becomes a record kernel that
    decodes each chunk of records in parallel threads.
    """
    options = JpegOptions(channels, ratio, fancy_upscaling, try_recover_truncated,
                          acceptable_fraction, dct_method)
    _library()
    if isinstance(contents, (bytes, bytearray, memoryview, np.bytes_, str)) or (
            isinstance(contents, np.ndarray) and contents.ndim == 0):
        return options.decode(_as_bytes(contents))
    if isinstance(contents, StringColumn):
        values = contents.values()
    else:
        arr = np.asarray(contents, dtype=object) if isinstance(contents, (list, tuple)) \
            else contents
        if arr.ndim != 1:
            raise InvalidArgumentError(
                f"`contents` must be one image or a vector of images but got shape "
                f"{list(arr.shape)}", "DecodeJpeg")
        values = [_as_bytes(v) for v in arr]
    try:
        images = decode_many(options, values)
    except RowError as e:
        raise _in_batch(e, e.row).error from None
    if isinstance(images, np.ndarray):
        return images
    try:
        return stack_images(images)
    except RowError as e:
        raise e.error from None


@define
def encode_jpeg(image, format="", quality=95, chroma_downsampling=True, name=None) -> bytes:
    """Encodes an (H, W, C) uint8 image (C = 1 or 3) as baseline JPEG bytes
    (``tf.io.encode_jpeg``'s ``format`` "" / "grayscale" / "rgb", ``quality`` 0-100 and
    ``chroma_downsampling``; TensorFlow's progressive and density options are not
    offered by libjpeg-turbo's binding)."""
    lib = _library()
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] not in (1, 3):
        raise InvalidArgumentError(
            f"image must be a 3-D uint8 tensor with 1 or 3 channels, got {image.dtype} "
            f"{list(image.shape)}", "EncodeJpeg")
    if format not in ("", "grayscale", "rgb"):
        raise InvalidArgumentError(f"format must be '', 'grayscale' or 'rgb', got {format!r}",
                                   "EncodeJpeg")
    if not 0 <= int(quality) <= 100:
        raise InvalidArgumentError(f"quality must be in [0,100], got {quality}", "EncodeJpeg")
    if format == "grayscale" and image.shape[2] != 1 or format == "rgb" and image.shape[2] != 3:
        raise InvalidArgumentError(f"format {format!r} does not match {image.shape[2]} "
                                   "channels", "EncodeJpeg")
    gray = image.shape[2] == 1
    return lib.encode_jpeg(np.ascontiguousarray(image), quality=int(quality),
                           colorspace="GRAY" if gray else "RGB",
                           colorsubsampling="Gray" if gray else
                           ("420" if chroma_downsampling else "444"), fastdct=False)


class JpegDecoder(Decoder):
    """``decode_jpeg`` on each record of a column, several threads at once."""

    name = "decode_jpeg"
    batched_name = "decode_jpeg"

    def __init__(self, options: JpegOptions):
        self.options = options

    @property
    def spec(self):
        return TensorSpec((None, None, self.options.channels or None), np.uint8)

    def describe(self) -> str:
        return f"decode_jpeg(channels={self.options.channels}, ratio={self.options.ratio})"

    def decode_rows(self, column, rows: int, batch: int | None = None) -> list:
        values = StringColumn(column.data, column.offsets[:rows + 1]).values()
        try:
            images = decode_many(self.options, values)
        except RowError as e:
            raise (e if batch is None else _in_batch(e, e.row % batch)) from None
        return [images]

    def batch_columns(self, columns, count, size):
        column = columns[0]
        if isinstance(column, np.ndarray):
            return [column.reshape((count, size) + column.shape[1:])]
        out = []
        for b in range(count):
            try:
                out.append(stack_images(column[b * size:(b + 1) * size]))
            except RowError as e:
                raise RowError(b * size + e.row, e.error) from None
        return [RowList(out)] if count > 1 and len({o.shape for o in out}) > 1 else [np.stack(out)]

