"""``decode_jpeg``, ``encode_jpeg``, ``extract_jpeg_shape`` and ``decode_and_crop_jpeg`` on
libjpeg-turbo (the optional ``[image]`` extra).

nbdata does not decode JPEG itself: it calls ``simplejpeg``, a small maintained binding
of libjpeg-turbo that decodes straight into a NumPy array and releases the GIL while it
decodes, so a batch of images is decoded by several threads at once. It was measured
against Pillow and OpenCV on 256x256 JPEGs (2 cores): simplejpeg decoded fastest on
one thread and scaled best on two (Pillow's decode-and-convert path holds the GIL
longer), and it exposes every libjpeg setting that ``tf.io.decode_jpeg`` has, so its
pixels equal TensorFlow's bit for bit for each ``dct_method``, ``fancy_upscaling`` and
``ratio`` (but for images of at most 5 pixels on a side at ratio 2, 4 or 8: simplejpeg
picks its scale from the output size, and there another of libjpeg-turbo's scales gives
the same size). It decodes strictly first (libjpeg-turbo's stop-on-warning mode, the fast
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
from nbdata.errors import InvalidArgumentError, OpError, UnimplementedError
from nbdata.spec import TensorSpec, string
from nbdata.primitives.table import define
from nbdata.trace.graph import Tensor, is_symbolic

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
                 acceptable_fraction=1.0, dct_method="", op="DecodeJpeg"):
        channels, ratio = int(channels), int(ratio)
        if channels not in (0, 1, 3, 4):   # 4: PNG data only (see codecs.decode)
            raise InvalidArgumentError(f"`channels` must be 0, 1, 3 or 4 but got {channels}", op)
        if ratio not in (1, 2, 4, 8):
            raise InvalidArgumentError(f"ratio must be 1, 2, 4, or 8, got {ratio}", op)
        dct = dct_method.decode() if isinstance(dct_method, bytes) else str(dct_method)
        if dct not in _DCT_METHODS:
            raise InvalidArgumentError(
                "dct_method must be one of {'', 'INTEGER_FAST', 'INTEGER_ACCURATE'}", op)
        fraction = float(acceptable_fraction)
        if not 0.0 <= fraction <= 1.0:
            raise InvalidArgumentError(
                f"acceptable_fraction must be in [0, 1], got {acceptable_fraction}", op)
        self.op = op
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
            f"jpeg::Uncompress failed. Invalid JPEG data or crop window ({error}).", self.op)

    def plan(self, data: bytes) -> tuple:
        """``(shape, colorspace, min_height, min_width)`` of the decoded image, from the
        JPEG header; InvalidArgumentError for data that is not a JPEG. PNG and GIF data
        (which TensorFlow's ``decode_jpeg`` also reads) are decoded here already:
        ``(shape, image, None, None)``."""
        lib = _library()
        if not data:
            raise InvalidArgumentError("Input is empty.", self.op)
        if data[:3] != b"\xff\xd8\xff":
            image = codecs.decode(data, self.op, self.channels)
            return image.shape, image, None, None
        if self.channels == 4:
            raise InvalidArgumentError("JPEG does not support 4 channels", self.op)
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

    def decode(self, data: bytes, plan: tuple | None = None, out: np.ndarray | None = None,
               raw: bool = False):
        """One image as an (H, W, C) uint8 array, decoded into ``out`` when given (of the
        planned shape); InvalidArgumentError for data this decoder cannot read. ``raw``:
        the planned mode ("RGB" or "CMYK") is the image's own components, decoded with
        replicating upsampling and no color conversion (``decode_and_crop_jpeg``)."""
        if plan is None:
            plan = self.plan(data)
        shape, mode, min_h, min_w = plan
        if isinstance(mode, np.ndarray):    # PNG or GIF data, decoded by plan()
            if out is None:
                return mode
            out[...] = mode
            return out
        try:
            image = self._decompress(data, shape, mode, min_h, min_w, True, out, raw)
        except (ValueError, RuntimeError, OverflowError, KeyError) as e:
            image = self._decode_damaged(data, shape, mode, min_h, min_w, out, e, raw)
        if image.ndim == 2:
            image = image[:, :, None]
        if out is not None and not np.shares_memory(image, out):
            out[...] = image
            return out
        return image

    def _decode_damaged(self, data, shape, mode, min_h, min_w, out, error, raw=False):
        """What libjpeg (as TensorFlow drives it) makes of data that libjpeg-turbo's strict
        mode refused. Complete data (its scans end in an EOI marker) that libjpeg only
        warns about (corrupt entropy data, extraneous bytes) decodes as libjpeg decodes
        it. Truncated data fails unless ``try_recover_truncated``: then libjpeg ends it
        with a fake EOI marker and decodes what is there (see ``decode_jpeg``)."""
        # Bytes between marker segments, which libjpeg skips with a warning
        # ("extraneous bytes before marker"), are dropped first: simplejpeg refuses
        # them even when lenient, and without them libjpeg reads the same stream.
        data = without_extraneous(data)
        complete, multi_scan = jpeg_layout(data)
        if not complete and not self.try_recover_truncated:
            if self.op == "DecodeAndCropJpeg" and not multi_scan:
                raise UnimplementedError(
                    "decode_and_crop_jpeg: the JPEG data is truncated; TensorFlow decodes a "
                    "window whose rows come before the cut (and fails for one after it), "
                    "which nbdata cannot tell apart; pass try_recover_truncated=True to "
                    "decode truncated images", self.op)
            if self.acceptable_fraction < 1 and not multi_scan:
                raise UnimplementedError(
                    "decode_jpeg: acceptable_fraction < 1 (keeping the rows read before a "
                    "truncated JPEG ends) is not supported; pass try_recover_truncated=True "
                    "to decode truncated images", "DecodeJpeg")
            raise self._fail(error)
        try:
            return self._decompress(data, shape, mode, min_h, min_w, False, out, raw)
        except (ValueError, RuntimeError, OverflowError, KeyError) as e:
            raise self._fail(e) from None

    def _decompress(self, data, shape, mode, min_h, min_w, strict, out, raw=False):
        lib = _library()
        if raw:
            return lib.decode_jpeg(data, colorspace=mode, fastdct=self.fastdct,
                                   fastupsample=True, min_height=min_h, min_width=min_w,
                                   strict=strict, buffer=out)
        if mode != "CMYK":
            return lib.decode_jpeg(data, colorspace=mode, fastdct=self.fastdct,
                                   fastupsample=not self.fancy_upscaling, min_height=min_h,
                                   min_width=min_w, strict=strict,
                                   buffer=out)
        header = read_header(data)
        image = _cmyk_to_rgb(lib.decode_jpeg(
            data, colorspace="CMYK", fastdct=self.fastdct, fastupsample=not self.fancy_upscaling,
            min_height=min_h, min_width=min_w, strict=strict),
            header is None or bool(header.adobe))
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


def without_extraneous(data: bytes) -> bytes:
    r"""``data`` without the bytes libjpeg discards where it expects a marker (between
    marker segments, or after a scan's entropy-coded data): its ``next_marker`` skips
    everything up to the next 0xFF followed by a byte that is neither 0x00 (a stuffed
    zero, skipped too) nor 0xFF (fill), and warns "Corrupt JPEG data: N extraneous bytes
    before marker". The data itself when there are none, or when its markers cannot be
    followed to the end.

    >>> without_extraneous(b"\xff\xd8" + b"junk" + b"\xff\xd9")
    b'\xff\xd8\xff\xd9'
    """
    n = len(data)
    if data[:2] != b"\xff\xd8":
        return data
    parts, pos, keep = [], 2, 0
    while pos < n:
        start = pos                      # a marker is expected here
        while True:
            ff = data.find(b"\xff", pos)
            if ff < 0:
                return data
            q = ff + 1
            while q < n and data[q] == 0xFF:
                q += 1
            if q >= n:
                return data
            if data[q] == 0:             # FF 00: discarded as well
                pos = q + 1
                continue
            break
        if ff > start:
            parts.append(data[keep:start])
            keep = ff
        marker = data[q]
        pos = q + 1
        if marker == 0xD9:
            break
        if marker in _STANDALONE:
            continue
        if pos + 2 > n:
            break
        pos += int.from_bytes(data[pos:pos + 2], "big")
        if marker == 0xDA:               # entropy-coded data, up to the next marker
            while True:
                ff = data.find(b"\xff", pos)
                if ff < 0 or ff + 1 >= n:
                    pos = n
                    break
                if data[ff + 1] == 0xFF:
                    pos = ff + 1
                    continue
                if data[ff + 1] == 0 or 0xD0 <= data[ff + 1] <= 0xD7:
                    pos = ff + 2
                    continue
                pos = ff
                break
    if not parts:
        return data
    parts.append(data[keep:])
    return b"".join(parts)



def _cmyk_to_rgb(cmyk: np.ndarray, adobe: bool = True) -> np.ndarray:
    """CMYK samples to RGB as TensorFlow converts them: Adobe's inverted CMYK (a JPEG
    with an Adobe marker) R = C * K / 255, else R = (255 - K) * (255 - C) / 255."""
    c = cmyk.astype(np.uint16)
    if not adobe:
        c = 255 - c
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

    _parallel(n, run)
    return out


def _parallel(n: int, run) -> None:
    """``run((lo, hi))`` over spans of ``range(n)`` in parallel threads; ``run`` returns
    None or ``(row, error)`` for the first row of its span that failed, raised here as
    RowError (the first span's first)."""
    # Within a pipeline the calling stage's kernel thread count (its share of the
    # thread budget); outside one, every core.
    workers = min(numba.get_num_threads(), n)
    if workers <= 1 or n < 4:
        failures = [run((0, n))]
    else:
        # Spans on nbdata's shared pool (kernels.threads.shared_pool); the caller takes
        # the first span.
        step = -(-n // workers)
        spans = [(s, min(n, s + step)) for s in range(0, n, step)]
        failures = [None] * len(spans)

        def work(k):
            try:
                failures[k] = run(spans[k])
            except BaseException as e:  # re-raised by the caller below
                failures[k] = e

        from nbdata.kernels.threads import shared_pool
        pool = shared_pool()
        futures = [pool.submit(work, k) for k in range(1, len(spans))]
        work(0)
        for f in futures:
            f.result()
    for failure in failures:
        if isinstance(failure, BaseException):
            raise failure
        if failure is not None:
            raise RowError(failure[0], failure[1])


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

    def decode(self, contents, windows=None):
        """The batch decoded; ``windows`` (see ``nbdata.gpu.jpeg.decode_values``): only
        those windows where nvImageCodec decodes regions (``batch.windowed``)."""
        from nbdata.gpu import jpeg
        return jpeg.decode_jpeg(contents, self.channels,
                                JpegOptions(self.channels, dct_method="INTEGER_ACCURATE"),
                                windows=windows)

    def describe(self):
        return (f"decode_jpeg(channels={self.channels}): nvImageCodec decodes the batch's JPEGs "
                "into one device buffer, images at their own sizes")


@define(tags=("image", "io"),
        abstract=lambda *args, **kwargs: _jpeg_decoder(*args, **kwargs).output_spec,
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


@define(tags=("image", "io"))
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



# ------------------------------------------------------------------ crop-aware decoding
#
# ``extract_jpeg_shape`` reads the header only. ``decode_and_crop_jpeg`` is TensorFlow's
# DecodeAndCropJpeg, which decodes its window with libjpeg-turbo's partial decoding
# (``jpeg_crop_scanline`` / ``jpeg_skip_scanlines``). simplejpeg reaches neither, so
# nbdata decodes the whole image (into a reused per-thread buffer, or the record kernel's
# packed column) and copies out the window. A partial decode is not plain crop-of-a-full-
# decode: libjpeg-turbo upsamples the chroma of the window as if the window were the
# image, so where a component is upsampled by libjpeg's fancy 2:1 horizontal filter
# (h2v1 or h2v2: 4:2:2 and 4:2:0 JPEGs at ratio 1, 4:2:2 also at 2 and 4) the window's
# first column (when it starts on an iMCU boundary) and last column (when it ends on an
# odd pixel inside the image) differ from the full image's by a few levels. For those
# JPEGs (eagerly: for those windows of them; in a record kernel, whose windows come after
# the decode: always) nbdata decodes the component planes instead (libjpeg's samples before color
# conversion, replicated, no fancy upsampling: the JPEG's JFIF/Adobe markers rewritten
# so that libjpeg sees no color transform) and ``_crop_raw`` upsamples and converts the
# window exactly as the partial decode does (libjpeg-turbo's jdsample.c, jdcolor.c and
# jpeg_crop_scanline's alignment, replicated in integer arithmetic), so the pixels equal
# TensorFlow's for every window.

_CROP_OP = "DecodeAndCropJpeg"
_SHAPE_OP = "ExtractJpegShape"
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_FORMAT_NAMES = {"png": "PNG", "gif": "GIF", "bmp": "BMP"}

# The info array that travels with each decoded image (``_layout``).
_INFO_LEN = 40
(_I_MODE, _I_HEIGHT, _I_WIDTH, _I_CHANNELS, _I_COLOR, _I_NCOMP, _I_ALIGN,
 _I_FANCY) = range(8)
_C_BASE, _C_STRIDE = 8, 8                    # component ci's fields at 8 + 8 * ci
_F_METHOD, _F_KIND, _F_HF, _F_VF, _F_HIN, _F_HOUT, _F_DW, _F_DH = range(8)
# libjpeg-turbo's upsampling methods (jdsample.c): not needed, full size, replication
# (int_upsample and the plain h2v1/h2v2), and the fancy (triangle) filters.
_M_NONE, _M_FULL, _M_BOX, _M_H2V1, _M_H2V2, _M_H1V2 = range(6)
_K_OTHER, _K_H2V1, _K_H2V2 = range(3)        # the sampling class, for re-selection
# Color conversions (jdcolor.c; CMYK to RGB as TensorFlow converts it).
_X_RGB, _X_YCC, _X_Y, _X_RGB_GRAY, _X_CMYK_ADOBE, _X_CMYK, _X_YCCK = range(7)


def _fix(x: float) -> int:
    return int(x * 65536 + 0.5)


# jdcolor.c build_ycc_rgb_table: R = Y + (FIX(1.402) * Cr' + 1/2) >> 16, and so on.
_FIX_CR_R, _FIX_CB_B = np.int32(_fix(1.40200)), np.int32(_fix(1.77200))
_FIX_CR_G, _FIX_CB_G = np.int32(-_fix(0.71414)), np.int32(-_fix(0.34414))
_R_Y = _fix(0.29900) * np.arange(256, dtype=np.int64)    # jdcolor.c rgb_gray_convert
_G_Y = _fix(0.58700) * np.arange(256, dtype=np.int64)
_B_Y = _fix(0.11400) * np.arange(256, dtype=np.int64) + 32768


class JpegHeader:
    """What libjpeg's ``jpeg_read_header`` reads of a JPEG: its frame (image size and
    components ``(id, h, v)``) and where its JFIF and Adobe markers are."""

    __slots__ = ("adobe", "adobe_transform", "components", "height", "jfif", "width")

    def color_space(self) -> str:
        """libjpeg's guess of the JPEG's color space (jdapimin.c default_decompress_parms)."""
        n = len(self.components)
        if n == 1:
            return "Gray"
        if n == 3:
            if self.jfif:
                return "YCbCr"
            if self.adobe_transform is not None:
                return "RGB" if self.adobe_transform == 0 else "YCbCr"
            ids = tuple(c[0] for c in self.components)
            return "RGB" if ids == (82, 71, 66) else "YCbCr"
        if n == 4:
            if self.adobe_transform is not None and self.adobe_transform != 0:
                return "YCCK"
            return "CMYK"
        return "Unknown"


def read_header(data: bytes) -> JpegHeader | None:
    """The header of a JPEG, read as libjpeg reads it (markers up to the first SOS); None
    when the data has no frame or ends before the SOS segment does."""
    n = len(data)
    if n < 4 or data[0] != 0xFF or data[1] != 0xD8:
        return None
    pos, jfif, adobe, transform, frame = 2, [], [], None, None
    while True:
        while pos < n and data[pos] != 0xFF:   # stray bytes: libjpeg skips them
            pos += 1
        while pos < n and data[pos] == 0xFF:   # fill bytes
            pos += 1
        if pos >= n:
            return None
        marker = data[pos]
        pos += 1
        if marker in (0xD8, 0xD9):
            return None
        if marker in _STANDALONE:
            continue
        if pos + 2 > n:
            return None
        end = pos + ((data[pos] << 8) | data[pos + 1])
        body = pos + 2
        if end < body or end > n:
            return None
        if marker == 0xE0 and end - body >= 14 and data[body:body + 5] == b"JFIF\0":
            jfif.append(body)
        elif marker == 0xEE and end - body >= 12 and data[body:body + 5] == b"Adobe":
            adobe.append(body + 11)
            transform = data[body + 11]
        elif marker in _SOF:
            count = data[body + 5] if end - body >= 6 else 0
            if count == 0 or end - body < 6 + 3 * count:
                return None
            frame = ((data[body + 1] << 8) | data[body + 2], (data[body + 3] << 8) | data[body + 4],
                     [(data[c], data[c + 1] >> 4, data[c + 1] & 15)
                      for c in range(body + 6, body + 6 + 3 * count, 3)])
        elif marker == 0xDA:
            break
        pos = end
    if frame is None:
        return None
    header = JpegHeader()
    header.height, header.width, header.components = frame
    header.jfif, header.adobe, header.adobe_transform = jfif, adobe, transform
    return header


def _header_shape(data: bytes) -> np.ndarray:
    """``extract_jpeg_shape`` of one record: ``[height, width, components]`` as int32."""
    lib = _library()
    header = read_header(data) if data[:2] == b"\xff\xd8" else None
    if header is not None:
        try:
            lib.decode_jpeg_header(data, strict=False)
        except (ValueError, RuntimeError, OverflowError, KeyError):
            header = None
    if header is None:
        raise InvalidArgumentError(f"Invalid JPEG data, size {len(data)}", _SHAPE_OP)
    return np.array([header.height, header.width, len(header.components)], np.int32)


def _layout(header: JpegHeader | None, options: JpegOptions, shape: tuple) -> tuple:
    """``(info, raw)`` of one JPEG decoded for ``decode_and_crop_jpeg``: ``raw`` when a
    component it needs is upsampled by libjpeg's fancy h2v1/h2v2 filter (the window is
    then computed from the component planes), with ``info`` saying how libjpeg-turbo
    upsamples and converts each component (jdmaster.c's IDCT scaling choice, jdsample.c's
    method choice)."""
    info = np.zeros(_INFO_LEN, np.int64)
    info[_I_HEIGHT], info[_I_WIDTH], info[_I_CHANNELS] = shape
    comps = header.components if header is not None else ()
    if len(comps) not in (3, 4) or any(h < 1 or v < 1 for _, h, v in comps):
        return info, False
    space = header.color_space()
    if len(comps) == 3 and shape[2] == 1:
        color, needed = (_X_RGB_GRAY, 3) if space == "RGB" else (_X_Y, 1)
    elif len(comps) == 3:
        color, needed = (_X_RGB if space == "RGB" else _X_YCC), 3
    else:
        color = _X_YCCK if space == "YCCK" else (
            _X_CMYK_ADOBE if header.adobe_transform is not None else _X_CMYK)
        needed = 4
    min_size = 8 // options.ratio
    max_h = max(h for _, h, _ in comps)
    max_v = max(v for _, _, v in comps)
    # jdsample.c: no fancy upsampling at 1/8 scale (jdmainct.c has no context rows there).
    fancy = options.fancy_upscaling and min_size > 1
    raw = False
    for ci, (_, h, v) in enumerate(comps):
        size = min_size   # the component's IDCT scaling (chroma scaled up by the IDCT)
        while (size < 8 and (max_h * min_size) % (h * size * 2) == 0
               and (max_v * min_size) % (v * size * 2) == 0):
            size *= 2
        h_in, v_in = h * size // min_size, v * size // min_size
        dw = -(-header.width * h * size // (max_h * 8))
        dh = -(-header.height * v * size // (max_v * 8))
        kind = _K_OTHER
        if ci >= needed:
            method = _M_NONE
        elif h_in == max_h and v_in == max_v:
            method = _M_FULL
        elif h_in * 2 == max_h and v_in == max_v:
            kind, method = _K_H2V1, (_M_H2V1 if fancy and dw > 2 else _M_BOX)
        elif h_in == max_h and v_in * 2 == max_v and fancy:
            method = _M_H1V2
        elif h_in * 2 == max_h and v_in * 2 == max_v:
            kind, method = _K_H2V2, (_M_H2V2 if fancy and dw > 2 else _M_BOX)
        elif max_h % h_in == 0 and max_v % v_in == 0:
            method = _M_BOX
        else:
            return info, False   # sampling libjpeg refuses: the decode fails
        raw = raw or method in (_M_H2V1, _M_H2V2)
        info[_C_BASE + _C_STRIDE * ci:_C_BASE + _C_STRIDE * (ci + 1)] = (
            method, kind, max_h // h_in, max_v // v_in, h_in, max_h, dw, dh)
    if raw:
        info[_I_MODE], info[_I_COLOR], info[_I_NCOMP] = 1, color, len(comps)
        info[_I_ALIGN], info[_I_FANCY] = min_size * max_h, fancy
    return info, raw


# An Adobe APP14 segment with transform 0: libjpeg takes the components as they are.
_ADOBE_AS_IS = b"\xff\xee\x00\x0eAdobe\x00\x64\x00\x00\x00\x00\x00"


def _as_stored(data: bytes, header: JpegHeader) -> bytes:
    """``data`` with its color transform hidden from libjpeg: JFIF markers renamed
    ("XFIF"), Adobe transforms set to 0, or an Adobe marker added after SOI. The scans
    are untouched, so libjpeg decodes the same samples and only skips the conversion."""
    out = bytearray(data)
    for p in header.jfif:
        out[p] = 0x58
    for p in header.adobe:
        out[p] = 0
    if not header.adobe:
        out[2:2] = _ADOBE_AS_IS
    return bytes(out)


def _edges_differ(info: np.ndarray, window: tuple) -> bool:
    """Whether libjpeg-turbo's partial decode of ``window`` differs from the full decode
    cropped, for a JPEG ``_layout`` found upsampled by a fancy h2 filter: the window's
    first column is the decoded region's (iMCU-aligned) first, or its last column is an
    odd region column inside the image, or a component of the region is one sample wide
    (libjpeg-turbo then chooses its upsampling again)."""
    _, left, _, width = window
    if width == info[_I_WIDTH]:
        return False   # jpeg_crop_scanline leaves a full-width window alone
    start = left // int(info[_I_ALIGN]) * int(info[_I_ALIGN])
    region = width + left - start
    for ci in range(int(info[_I_NCOMP])):
        base = _C_BASE + _C_STRIDE * ci
        if -(-region * int(info[base + _F_HIN]) // int(info[base + _F_HOUT])) < 2 <= info[
                base + _F_DW]:
            return True
    return (left == start > 0) or (region % 2 == 0 and left + width < info[_I_WIDTH])


def _plan_parts(options: JpegOptions, data: bytes, window: tuple | None = None) -> tuple:
    """``(plan, info, source, raw)``: how ``decode_and_crop_jpeg`` decodes one JPEG
    (``options.decode(source, plan, out, raw)``) and the info its crop reads. Given the
    ``window``, the planes are decoded only when its pixels need them."""
    plan = options.plan(data)
    header = read_header(data)
    info, raw = _layout(header, options, plan[0])
    if raw and window is not None and not _edges_differ(info, window):
        info[_I_MODE], raw = 0, False
    if not raw:
        return plan, info, data, False
    n = len(header.components)
    shape = plan[0][:2] + (n,)
    return (shape, "RGB" if n == 3 else "CMYK", plan[2], plan[3]), info, \
        _as_stored(data, header), True


_scratch = threading.local()
_SCRATCH_MAX = 1 << 26   # larger images get a buffer of their own


def _scratch_image(shape: tuple) -> np.ndarray:
    """A per-thread buffer of ``shape`` (uint8), reused by the next eager decode."""
    size = shape[0] * shape[1] * shape[2]
    if size > _SCRATCH_MAX:
        return np.empty(shape, np.uint8)
    buffer = getattr(_scratch, "buffer", None)
    if buffer is None or buffer.size < size:
        buffer = _scratch.buffer = np.empty(max(size, 1 << 18), np.uint8)
    return buffer[:size].reshape(shape)


def _check_crop_data(data: bytes, options: JpegOptions) -> None:
    """TensorFlow's checks of DecodeAndCropJpeg's data, before it decodes."""
    if not data:
        raise InvalidArgumentError("Input is empty.", _CROP_OP)
    fmt = codecs.classify(data)
    if fmt is None:
        raise InvalidArgumentError(
            "Unknown image file format. One of JPEG, JPEG XL, PNG, GIF, BMP, WebP required.",
            _CROP_OP)
    if fmt in ("webp", "jxl"):
        name = "WebP" if fmt == "webp" else "JPEG XL"
        raise UnimplementedError(f"{name} images are not supported by nbdata", _CROP_OP)
    if fmt != "jpeg":
        raise InvalidArgumentError(f"DecodeAndCropJpeg operation can run on JPEG only, but "
                                   f"detected {_FORMAT_NAMES.get(fmt, fmt)}.", _CROP_OP)
    if options.channels == 4:
        raise InvalidArgumentError("JPEG does not support 4 channels", _CROP_OP)


def _crop_window(window) -> tuple:
    """``crop_window`` as four ints ``(y, x, height, width)``, with TensorFlow's errors."""
    arr = np.asarray(window)
    if arr.size and (arr.dtype.kind not in "iu"):
        raise TypeError(f"decode_and_crop_jpeg: crop_window must hold integers (int32), "
                        f"got {arr.dtype}")
    if arr.ndim != 1:
        raise InvalidArgumentError(f"crop_window must be 1-D, got shape "
                                   f"[{','.join(map(str, arr.shape))}]", _CROP_OP)
    if arr.shape[0] != 4:
        raise InvalidArgumentError(f"crop_size must have four elements [{arr.shape[0]}]",
                                   _CROP_OP)
    return tuple(int(v) for v in arr)


def _check_window(height: int, width: int, window: tuple) -> None:
    y, x, h, w = window
    if not (w > 0 and h > 0 and x >= 0 and y >= 0 and y + h <= height and x + w <= width):
        raise InvalidArgumentError(
            f"jpeg::Uncompress failed. Invalid JPEG data or crop window (the window y={y}, "
            f"x={x}, height={h}, width={w} is not inside the {height}x{width} image).",
            _CROP_OP)


def _one_record(contents, op: str, message: str) -> bytes:
    if isinstance(contents, (bytes, bytearray, memoryview, np.bytes_, str)) or (
            isinstance(contents, np.ndarray) and contents.ndim == 0):
        return codecs.as_bytes(contents, op)
    shape = np.shape(np.asarray(contents, dtype=object))
    raise InvalidArgumentError(message.format(','.join(map(str, shape))), op)


@numba.njit(nogil=True, cache=True)
def _neighbor_row(i, odd, rows):
    """The other input row of libjpeg's vertical triangle filter: the row above for an
    even output row, below for an odd one, the image's first/last row repeated."""
    j = i + 1 if odd else i - 1
    return max(min(j, rows - 1), 0)


_I3 = np.int32(3)
_I1 = np.int32(1)
_I2 = np.int32(2)


@numba.njit(nogil=True, cache=True)
def _upsample_row(planes, ci, method, row, dh, left, width, start, last, samples, values):
    """Component ``ci`` of output row ``row`` at the window's columns, into ``values``,
    as libjpeg-turbo upsamples it in a region starting at column ``start`` whose last
    sample is ``last`` (jdsample.c). The fancy filters' first and last columns use the
    sample itself for its missing neighbor, so the row's samples are read with their
    ends repeated."""
    if method == _M_FULL or method == _M_BOX:   # the planes hold these already
        line = planes[row, left:left + width, ci]
        for c in range(width):
            values[c] = line[c]
        return
    odd = row % 2 == 1
    if method == _M_H1V2:   # 3/4 nearer row + 1/4 the other, bias 1 above, 2 below
        here = 2 * (row // 2)
        near = 2 * _neighbor_row(row // 2, odd, dh)
        bias = _I2 if odd else _I1
        line0 = planes[here, left:left + width, ci]
        line1 = planes[near, left:left + width, ci]
        for c in range(width):
            values[c] = (_I3 * np.int32(line0[c]) + np.int32(line1[c]) + bias) >> _I2
        return
    # h2v1 / h2v2 triangle filters (h2v2 on column sums 3 * nearer row + other row).
    first = start // 2
    lo = (left - start) // 2          # the region's sample under the window's first column
    hi = (left - start + width - 1) // 2
    if method == _M_H2V2:
        here = 2 * (row // 2)
        near = 2 * _neighbor_row(row // 2, odd, dh)
    else:
        here = row
        near = row
    line0 = planes[here, :, ci]
    line1 = planes[near, :, ci]
    # samples[j] is sample lo - 1 + j for j <= hi - lo + 2, the region's first and last
    # repeated beyond its ends (lo >= 0 and hi <= last: only the two outer ones clamp).
    count = hi - lo + 3
    x0 = 2 * (first + lo)
    if method == _M_H2V2:
        for j in range(1, count - 1):
            x = x0 + 2 * (j - 1)
            samples[j] = _I3 * np.int32(line0[x]) + np.int32(line1[x])
    else:
        for j in range(1, count - 1):
            samples[j] = line0[x0 + 2 * (j - 1)]
    samples[0] = samples[1]
    if lo > 0:
        x = x0 - 2
        samples[0] = (_I3 * np.int32(line0[x]) + np.int32(line1[x]) if method == _M_H2V2
                      else np.int32(line0[x]))
    samples[count - 1] = samples[count - 2]
    if hi < last:
        x = x0 + 2 * (count - 2)
        samples[count - 1] = (_I3 * np.int32(line0[x]) + np.int32(line1[x])
                              if method == _M_H2V2 else np.int32(line0[x]))
    if method == _M_H2V2:
        even_bias, odd_bias, shift = np.int32(8), np.int32(7), np.int32(4)
    else:
        even_bias, odd_bias, shift = _I1, _I2, _I2
    # Region column 2k is 3/4 sample k + 1/4 sample k-1, column 2k+1 the same with k+1;
    # window column c is region column c + left - start.
    a = left - start
    c = 2 * lo - a                    # -1 or 0
    if c >= 0:
        values[c] = (_I3 * samples[1] + samples[0] + even_bias) >> shift
    if 0 <= c + 1 < width:
        values[c + 1] = (_I3 * samples[1] + samples[2] + odd_bias) >> shift
    for j in range(2, hi - lo + 1):   # samples k = lo + 1 .. hi - 1: both columns inside
        c = 2 * (lo + j - 1) - a
        nearer = _I3 * samples[j]
        values[c] = (nearer + samples[j - 1] + even_bias) >> shift
        values[c + 1] = (nearer + samples[j + 1] + odd_bias) >> shift
    if hi > lo:
        j = hi - lo + 1
        c = 2 * hi - a
        values[c] = (_I3 * samples[j] + samples[j - 1] + even_bias) >> shift
        if c + 1 < width:
            values[c + 1] = (_I3 * samples[j] + samples[j + 1] + odd_bias) >> shift


_Z = np.int32(0)
_MAX = np.int32(255)
_CENTER = np.int32(128)
_HALF16 = np.int32(32768)
_S16 = np.int32(16)


@numba.njit(nogil=True, cache=True)
def _convert_row(color, values, rgb, width):
    """One row of component values (int32, planar) to TensorFlow's output channels
    (planar, in ``rgb``): libjpeg-turbo's jdcolor.c conversions, its tables written as
    the arithmetic that builds them, and TensorFlow's CMYK to RGB."""
    if color == _X_YCC:   # ycc_rgb_convert
        for c in range(width):
            y = values[0, c]
            cb = values[1, c] - _CENTER
            cr = values[2, c] - _CENTER
            rgb[0, c] = min(max(y + ((_FIX_CR_R * cr + _HALF16) >> _S16), _Z), _MAX)
            rgb[1, c] = min(max(y + ((_FIX_CB_G * cb + _FIX_CR_G * cr + _HALF16) >> _S16),
                                _Z), _MAX)
            rgb[2, c] = min(max(y + ((_FIX_CB_B * cb + _HALF16) >> _S16), _Z), _MAX)
    elif color == _X_RGB:
        for k in range(3):
            for c in range(width):
                rgb[k, c] = values[k, c]
    elif color == _X_Y:
        for c in range(width):
            rgb[0, c] = values[0, c]
    elif color == _X_RGB_GRAY:   # rgb_gray_convert
        for c in range(width):
            rgb[0, c] = (_R_Y[values[0, c]] + _G_Y[values[1, c]] + _B_Y[values[2, c]]) >> 16
    else:
        for c in range(width):
            cyan, magenta, yellow, black = values[0, c], values[1, c], values[2, c], values[
                3, c]
            if color == _X_YCCK:   # ycck_cmyk_convert
                y = cyan
                cb = magenta - _CENTER
                cr = yellow - _CENTER
                cyan = min(max(_MAX - (y + ((_FIX_CR_R * cr + _HALF16) >> _S16)), _Z), _MAX)
                magenta = min(max(_MAX - (y + ((_FIX_CB_G * cb + _FIX_CR_G * cr + _HALF16)
                                               >> _S16)), _Z), _MAX)
                yellow = min(max(_MAX - (y + ((_FIX_CB_B * cb + _HALF16) >> _S16)), _Z), _MAX)
            if color == _X_CMYK:   # TensorFlow's conversion without an Adobe marker
                black = _MAX - black
                cyan = _MAX - cyan
                magenta = _MAX - magenta
                yellow = _MAX - yellow
            rgb[0, c] = black * cyan // _MAX
            rgb[1, c] = black * magenta // _MAX
            rgb[2, c] = black * yellow // _MAX


@numba.njit(nogil=True, cache=True)
def _crop_raw(planes, info, top, left, height, width):
    """The window of a JPEG from its component planes, as libjpeg-turbo decodes it with
    ``jpeg_crop_scanline(left, width)`` and ``jpeg_skip_scanlines(top)``."""
    n = info[_I_NCOMP]
    align = info[_I_ALIGN]
    fancy = info[_I_FANCY] != 0
    color = info[_I_COLOR]
    channels = info[_I_CHANNELS]
    # jpeg_crop_scanline: the decoded region starts on the iMCU column at or before
    # `left`; libjpeg-turbo upsamples it as an image of its own width.
    start = (left // align) * align
    region = width + left - start
    methods = np.empty(n, np.int64)
    widths = np.empty(n, np.int64)
    reinit = False
    for ci in range(n):
        base = _C_BASE + _C_STRIDE * ci
        widths[ci] = (region * info[base + _F_HIN] + info[base + _F_HOUT] - 1) // info[
            base + _F_HOUT]
        methods[ci] = info[base + _F_METHOD]
        if widths[ci] < 2 and info[base + _F_DW] >= 2:
            reinit = True
    if reinit:   # a component one sample wide: jinit_upsampler chooses again
        for ci in range(n):
            base = _C_BASE + _C_STRIDE * ci
            kind = info[base + _F_KIND]
            if methods[ci] != _M_NONE and kind != _K_OTHER:
                if fancy and widths[ci] > 2:
                    methods[ci] = _M_H2V1 if kind == _K_H2V1 else _M_H2V2
                else:
                    methods[ci] = _M_BOX
    out = np.empty((height, width, channels), np.uint8)
    values = np.zeros((4, width), np.int32)
    rgb = np.empty((3, width), np.int32)
    samples = np.empty(width // 2 + 4, np.int32)
    for r in range(height):
        row = top + r
        for ci in range(n):
            if methods[ci] != _M_NONE:
                base = _C_BASE + _C_STRIDE * ci
                _upsample_row(planes, ci, methods[ci], row, info[base + _F_DH], left, width,
                              start, widths[ci] - 1, samples, values[ci])
        _convert_row(color, values, rgb, width)
        line = out[r]
        if channels == 3:
            for c in range(width):
                line[c, 0] = rgb[0, c]
                line[c, 1] = rgb[1, c]
                line[c, 2] = rgb[2, c]
        else:
            for c in range(width):
                line[c, 0] = rgb[0, c]
    return out


@numba.njit(nogil=True, cache=True)
def _crop(planes, info, top, left, height, width):
    """The window of a decoded JPEG (``_plan_parts``'s info), a new array; ValueError
    for a window outside it."""
    if not (width > 0 and height > 0 and left >= 0 and top >= 0
            and top + height <= info[_I_HEIGHT] and left + width <= info[_I_WIDTH]):
        raise ValueError("jpeg::Uncompress failed. Invalid JPEG data or crop window.")
    if info[_I_MODE] == 1:
        return _crop_raw(planes, info, top, left, height, width)
    channels = planes.shape[2]
    out = np.empty((height, width, channels), np.uint8)
    for r in range(height):
        source = planes[top + r]
        line = out[r]
        if channels == 3:   # spelled out: a loop over channels does not vectorize
            for c in range(width):
                line[c, 0] = source[left + c, 0]
                line[c, 1] = source[left + c, 1]
                line[c, 2] = source[left + c, 2]
        else:
            for c in range(width):
                for k in range(channels):
                    line[c, k] = source[left + c, k]
    return out


def _decode_parts(options: JpegOptions, data: bytes, window: tuple | None = None,
                  out: np.ndarray | None = None) -> tuple:
    """``(planes, info)``: one JPEG decoded for ``decode_and_crop_jpeg`` (into ``out``,
    else into the thread's reused buffer). ``window`` is checked against the image
    before it is decoded."""
    plan, info, source, raw = _plan_parts(options, data, window)
    if window is not None:
        _check_window(int(info[_I_HEIGHT]), int(info[_I_WIDTH]), window)
    planes = options.decode(source, plan, _scratch_image(plan[0]) if out is None else out, raw)
    return planes, info


# ---- the op-table entries

class _JpegRequest:
    """What one recorded function asks of one JPEG record: its ``extract_jpeg_shape``
    (``shape``) and the options of its ``decode_and_crop_jpeg`` calls (``options``).
    The calls on one record share one ``jpeg_parts`` op, filled in as they are
    recorded, so that the record has one consumer and decode lifting makes that op a
    record kernel: it reads each header and decodes each image over whole chunks, and
    the rest of the function (the window, the crop, what follows) compiles."""

    def __init__(self):
        self.shape = False
        self.options = None

    def describe(self) -> str:
        parts = ["extract_jpeg_shape"] if self.shape else []
        if self.options is not None:
            parts.append(f"decode_and_crop_jpeg(channels={self.options.channels}, "
                         f"ratio={self.options.ratio})")
        return " + ".join(parts) or "extract_jpeg_shape"


_PARTS_SPEC = [TensorSpec((3,), np.int32), TensorSpec((None, None, None), np.uint8),
               TensorSpec((_INFO_LEN,), np.int64)]


def _same_decode(a: JpegOptions, b: JpegOptions) -> bool:
    return (a.channels, a.ratio, a.fancy_upscaling, a.try_recover_truncated,
            a.acceptable_fraction, a.fastdct) == (b.channels, b.ratio, b.fancy_upscaling,
                                                  b.try_recover_truncated,
                                                  b.acceptable_fraction, b.fastdct)


def _record_parts(contents, request: _JpegRequest) -> tuple:
    """``(shape, planes, info)`` of a symbolic record: its ``jpeg_parts`` op."""
    _library()
    parts = _jpeg_parts(contents, request)
    return tuple(parts)


def _source(contents, options: JpegOptions | None = None) -> tuple:
    """The ``jpeg_parts`` outputs of symbolic record ``contents`` that serve a call with
    ``options`` (None: ``extract_jpeg_shape``), recorded on its first use."""
    spec = contents.spec
    if spec.shape is not None and len(spec.shape) != 0:
        op = _CROP_OP if options is not None else _SHAPE_OP
        shape = ",".join("?" if d is None else str(d) for d in spec.shape)
        raise InvalidArgumentError(
            f"`contents` must be scalar but got shape[{shape}]" if options is not None
            else f"contents must be scalar, got shape [{shape}]", op)
    found = getattr(contents, "_nbdata_jpeg_source", None)
    if found is None:
        request = _JpegRequest()
        found = (request, _record_parts(contents, request))
        contents._nbdata_jpeg_source = found
    request, parts = found
    if options is None:
        request.shape = True
    elif request.options is None:
        request.options = options
    elif not _same_decode(request.options, options):
        # Another decode of the same record: an op of its own (the record then has two
        # consumers, and the function runs per element).
        request = _JpegRequest()
        request.options = options
        parts = _record_parts(contents, request)
    return parts


def _parts_decoder(contents, request):
    return for_records(JpegPartsDecoder(request), contents)


@define(name="jpeg_parts", abstract=lambda contents, request: list(_PARTS_SPEC),
        decoder=_parts_decoder)
def _jpeg_parts(contents, request):
    """``[shape, planes, info]`` of one JPEG record (see ``_JpegRequest``)."""
    data = codecs.as_bytes(contents, "jpeg_parts")
    shape = _header_shape(data) if request.shape else np.zeros(3, np.int32)
    if request.options is None:
        return [shape, np.zeros((0, 0, 0), np.uint8), np.zeros(_INFO_LEN, np.int64)]
    _check_crop_data(data, request.options)
    plan, info, source, raw = _plan_parts(request.options, data)
    return [shape, request.options.decode(source, plan, None, raw), info]


class JpegPartsDecoder(Decoder):
    """``jpeg_parts`` on each record of a column: headers read, images decoded by
    several threads into one packed buffer."""

    name = "jpeg_parts"
    batched_name = "jpeg_parts"

    def __init__(self, request: _JpegRequest):
        self.request = request

    @property
    def spec(self):
        return tuple(_PARTS_SPEC)

    def describe(self) -> str:
        return self.request.describe()

    def decode_rows(self, column, rows: int, batch: int | None = None) -> list:
        values = StringColumn(column.data, column.offsets[:rows + 1]).values()
        n = len(values)
        options, want_shape = self.request.options, self.request.shape
        shapes = np.zeros((n, 3), np.int32)
        infos = np.zeros((n, _INFO_LEN), np.int64)
        plans, failed = [], None
        for i, data in enumerate(values):
            try:
                if want_shape:
                    shapes[i] = _header_shape(data)
                if options is not None:
                    _check_crop_data(data, options)
                    plans.append(_plan_parts(options, data))
                    infos[i] = plans[-1][1]
            except OpError as e:
                failed = RowError(i, e)
                break
        ok = len(plans) if options is not None else (n if failed is None else failed.row)
        if options is None:
            planes = PackedRows.empty([(0, 0, 0)] * ok, np.uint8, 3)
        else:
            planes = PackedRows.empty([p[0][0] for p in plans], np.uint8, 3)

            def run(span):
                for i in range(*span):
                    plan, _, source, raw = plans[i]
                    try:
                        options.decode(source, plan, planes[i], raw)
                    except OpError as e:
                        return i, e
                return None

            _parallel(ok, run)   # raises the first image that fails
        if failed is not None:
            raise failed
        return [shapes, planes, infos]


def _shape_dtype(output_type) -> np.dtype:
    try:
        dtype = np.dtype(output_type)
    except TypeError:
        dtype = None
    if dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        name = output_type if dtype is None else {
            "float32": "float", "float64": "double", "float16": "half"}.get(dtype.name,
                                                                           dtype.name)
        raise InvalidArgumentError(
            f"Value for attr 'output_type' of {name} is not in the list of allowed "
            "values: int32, int64", _SHAPE_OP)
    return dtype


@define(tags=("image", "io"), name="extract_jpeg_shape",
        abstract=lambda contents, output_type=np.int32, name=None: TensorSpec(
            (3,), _shape_dtype(output_type)))
def _extract_jpeg_shape(contents, output_type=np.int32, name=None):
    dtype = _shape_dtype(output_type)
    data = _one_record(contents, _SHAPE_OP, "contents must be scalar, got shape [{}]")
    return _header_shape(data).astype(dtype)


def extract_jpeg_shape(contents, output_type=np.int32, name=None):
    """The shape of a JPEG image from its header (``tf.io.extract_jpeg_shape``).

    Only the header is read (up to the first scan), so a truncated image has a shape.

    Args:
        contents: one JPEG image (``bytes``).
        output_type: ``np.int32`` (TensorFlow's default) or ``np.int64``.
        name: ignored (TensorFlow's op name).

    Returns:
        A 1-D array ``[height, width, channels]`` of ``output_type``: channels as
        stored, 1 for grayscale, 3 for YCbCr or RGB, 4 for CMYK or YCCK.

    Raises:
        InvalidArgumentError: ``Invalid JPEG data, size N`` for data whose header
            libjpeg cannot read (not a JPEG, cut before its first scan), a non-scalar
            ``contents``, or an ``output_type`` other than int32/int64.
        UnimplementedError: the ``[image]`` extra is not installed.

    Inside ``Dataset.map`` on records, the header reads are a record kernel (shared
    with ``decode_and_crop_jpeg`` of the same record).

    >>> import numpy as np
    >>> jpeg = encode_jpeg(np.zeros((4, 6, 3), np.uint8))
    >>> extract_jpeg_shape(jpeg)
    array([4, 6, 3], dtype=int32)
    """
    dtype = _shape_dtype(output_type)
    if isinstance(contents, Tensor):
        shape = _source(contents)[0]
        return shape if dtype == np.int32 else shape.astype(np.int64)
    return _extract_jpeg_shape(contents, dtype, name)


def _crop_decoded_nopython(planes, info, crop_window, channels):
    if not (isinstance(planes, numba.types.Array) and planes.ndim == 3
            and planes.dtype == numba.types.uint8):
        raise numba.core.errors.TypingError("decode_and_crop_jpeg: expected decoded planes")
    if isinstance(crop_window, numba.types.Array):
        if crop_window.ndim != 1 or not isinstance(crop_window.dtype, numba.types.Integer):
            raise numba.core.errors.TypingError("crop_window must be a 1-D integer array")
    elif not (isinstance(crop_window, numba.types.BaseTuple) and len(crop_window) == 4
              and all(isinstance(t, numba.types.Integer) for t in crop_window)):
        raise numba.core.errors.TypingError(
            f"crop_window must be four integers, got {crop_window}")

    def impl(planes, info, crop_window, channels):
        if len(crop_window) != 4:
            raise ValueError("crop_size must have four elements")
        return _crop(planes, info, np.int64(crop_window[0]), np.int64(crop_window[1]),
                     np.int64(crop_window[2]), np.int64(crop_window[3]))
    return impl


@define(name="crop_decoded_jpeg",
        abstract=lambda planes, info, crop_window, channels: TensorSpec(
            (None, None, channels or None), np.uint8),
        numba=_crop_decoded_nopython)
def _crop_decoded(planes, info, crop_window, channels):
    """The window of an image ``jpeg_parts`` decoded (``decode_and_crop_jpeg`` in a
    recorded function)."""
    window = _crop_window(crop_window)
    _check_window(int(info[_I_HEIGHT]), int(info[_I_WIDTH]), window)
    return _crop(planes, info, *window)


@define(tags=("image", "io"), name="decode_and_crop_jpeg",
        abstract=lambda contents, crop_window, channels=0, *args, **kwargs: TensorSpec(
            (None, None, int(channels) or None), np.uint8))
def _decode_and_crop_jpeg(contents, crop_window, channels=0, ratio=1, fancy_upscaling=True,
                          try_recover_truncated=False, acceptable_fraction=1, dct_method="",
                          name=None):
    options = JpegOptions(channels, ratio, fancy_upscaling, try_recover_truncated,
                          acceptable_fraction, dct_method, op=_CROP_OP)
    _library()
    data = _one_record(contents, _CROP_OP, "`contents` must be scalar but got shape[{}]")
    _check_crop_data(data, options)
    window = _crop_window(crop_window)
    planes, info = _decode_parts(options, data, window)
    if info[_I_MODE] == 0:   # decoded pixels: NumPy's copy of the window is a memcpy
        y, x, h, w = window
        return planes[y:y + h, x:x + w].copy()
    return _crop(planes, info, *window)


def decode_and_crop_jpeg(contents, crop_window, channels=0, ratio=1, fancy_upscaling=True,
                         try_recover_truncated=False, acceptable_fraction=1, dct_method="",
                         name=None):
    """Decodes a window of a JPEG image (``tf.io.decode_and_crop_jpeg``, same pixels).

    TensorFlow decodes only the window, with libjpeg-turbo's partial decoding
    (``jpeg_crop_scanline`` / ``jpeg_skip_scanlines``), which the simplejpeg binding
    does not expose (nor any way to stop a decode early): nbdata decodes the whole
    image into a per-thread buffer it reuses (inside ``Dataset.map``, into the record
    kernel's packed column) and copies the window out, so it costs a full decode, never
    less. The pixels are the partial decode's, not a crop of ``decode_jpeg``'s:
    libjpeg-turbo upsamples the chroma of a window as if it were the whole image, which
    changes the window's first column (when it starts on an iMCU boundary) and last
    column (when it ends on an odd column inside the image) of 4:2:0 and 4:2:2 images by
    a few levels. For those images and windows nbdata decodes the image's components
    instead and upsamples and converts the window itself, as libjpeg-turbo does, which
    adds about 40% to the decode of a 500x375 4:2:0 image with a window of 60% of its
    area (inside ``Dataset.map``, where the window is drawn after the decode, for every
    4:2:0 and 4:2:2 image).

    Args:
        contents: one JPEG image (``bytes``).
        crop_window: ``[crop_y, crop_x, crop_height, crop_width]``, four integers (1-D),
            in the coordinates of the image decoded at ``ratio``. Inside a map, give
            it as a list of values (``[begin[0], begin[1], size[0], size[1]]`` of
            ``sample_distorted_bounding_box``) or a 1-D array, so that the crop
            compiles.
        channels, ratio, fancy_upscaling, try_recover_truncated, acceptable_fraction,
            dct_method: as in :func:`decode_jpeg` (``channels`` 0, 1 or 3).
        name: ignored (TensorFlow's op name).

    Returns:
        A ``(crop_height, crop_width, C)`` uint8 array.

    Raises:
        InvalidArgumentError: "jpeg::Uncompress failed. Invalid JPEG data or crop
            window" for unreadable data or a window not inside the image; a
            ``crop_window`` that is not 1-D or not four values; PNG, GIF or BMP data
            ("DecodeAndCropJpeg operation can run on JPEG only"); bad arguments.
        UnimplementedError: the ``[image]`` extra is not installed; a truncated
            single-scan JPEG without ``try_recover_truncated`` (TensorFlow decodes a
            window above the cut and fails below it; nbdata cannot tell them apart).
        TypeError: a ``crop_window`` of non-integers.

    Inside ``Dataset.map`` on records the decode is a record kernel (shared with
    ``extract_jpeg_shape`` of the same record), and the crop a compiled call of the
    fused kernel, so a window drawn from the header (``sample_distorted_bounding_box``)
    and what follows (resize, flips) fuse.

    >>> import numpy as np
    >>> jpeg = encode_jpeg(np.full((8, 10, 3), 128, np.uint8))
    >>> decode_and_crop_jpeg(jpeg, [2, 3, 4, 5]).shape
    (4, 5, 3)
    """
    if isinstance(contents, Tensor) and contents.spec.dtype is string:
        options = JpegOptions(channels, ratio, fancy_upscaling, try_recover_truncated,
                              acceptable_fraction, dct_method, op=_CROP_OP)
        if not is_symbolic(crop_window):
            _crop_window(crop_window)
        elif isinstance(crop_window, Tensor) and crop_window.spec.shape is not None:
            shape = tuple(crop_window.spec.shape)
            if len(shape) != 1:
                raise InvalidArgumentError(
                    f"crop_window must be 1-D, got shape "
                    f"[{','.join('?' if d is None else str(d) for d in shape)}]", _CROP_OP)
            if shape[0] is not None and shape[0] != 4:
                raise InvalidArgumentError(f"crop_size must have four elements [{shape[0]}]",
                                           _CROP_OP)
        parts = _source(contents, options)
        return _crop_decoded(parts[1], parts[2], crop_window, options.channels)
    return _decode_and_crop_jpeg(contents, crop_window, channels, ratio, fancy_upscaling,
                                 try_recover_truncated, acceptable_fraction, dct_method, name)
