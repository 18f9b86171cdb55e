"""``decode_png``, ``decode_gif``, ``decode_bmp`` and ``decode_image``: TensorFlow's image
decoders for the lossless formats, with its pixels, shapes, dtypes and errors.

TensorFlow has one image kernel behind all its decode ops: it reads the format from the
first bytes and decodes what it finds, so ``decode_jpeg``, ``decode_png`` and
``decode_gif`` each also read JPEG, PNG and (non-animated) GIF data; only ``decode_bmp``
and ``decode_image`` read BMP. :func:`decode` is that kernel, named by the op it runs
for (``DecodePng`` ...) so that shapes and messages follow the op, as TensorFlow's do.

nbdata decodes no compressed format itself. PNG and GIF data are inflated by Pillow
(the optional ``[image]`` extra); what libpng and TensorFlow then do to the samples is
done here on NumPy arrays, so the pixels equal TensorFlow's:

- PNG (libpng's transformations as TensorFlow asks for them): palette entries and
  ``tRNS`` transparency become RGB(A); a requested alpha channel that the image lacks
  is filled with ``2**bit_depth - 1`` (so a 1-bit image gets alpha 1, libpng's
  filler); 16-bit samples become 8-bit by dropping the low byte and 8-bit samples
  become 16-bit as ``v * 257``; color becomes gray with libpng's fixed-point weights
  (0.299, 0.587 and the rest), through libpng's gamma tables when the file declares
  a gamma (``gAMA`` or ``sRGB``) far from 1 (for 16-bit color images with such a
  gamma this conversion raises UnimplementedError).
- GIF (TensorFlow's compositing): the canvas is as large as the largest frame, each
  frame starts as a copy of the one before (the first as black), and a frame's pixels
  replace the canvas inside its rectangle except where they hold the frame's
  transparent index. Disposal methods are ignored, as TensorFlow ignores them. Pillow
  only expands each frame's LZW data to palette indices (the file's blocks are read
  here), so Pillow's own compositing plays no part.
- BMP is TensorFlow's reader of uncompressed 8, 24 and 32-bit BMPs (its header
  fields and size checks), in NumPy.

WebP and JPEG XL data, which TensorFlow also decodes, raise UnimplementedError.

>>> import numpy as np
>>> image = np.arange(24, dtype=np.uint8).reshape(2, 4, 3)
>>> bmp = (b"BM" + (54 + 24).to_bytes(4, "little") + bytes(4) + (54).to_bytes(4, "little")
...        + (40).to_bytes(4, "little") + (4).to_bytes(4, "little")
...        + (-2).to_bytes(4, "little", signed=True) + (1).to_bytes(2, "little")
...        + (24).to_bytes(2, "little") + bytes(24) + image[..., ::-1].tobytes())
>>> np.array_equal(decode_bmp(bmp), image)
True
>>> decode_image(bmp, dtype=np.float32)[0, 1]
array([0.01176471, 0.01568628, 0.01960784], dtype=float32)
"""

from __future__ import annotations

import io
import struct

import numpy as np

from nbdata.chunks import PackedRows, RowList, StringColumn
from nbdata.errors import InvalidArgumentError, UnimplementedError
from nbdata.plugins import provided
from nbdata.primitives.decoder import Decoder, RowError, for_records
from nbdata.primitives.table import define
from nbdata.spec import TensorSpec

EXTRA = "pip install 'nbdata[image]'"

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_JXL_CONTAINER = b"\x00\x00\x00\x0cJXL \r\n\x87\n"


def classify(data: bytes) -> str | None:
    """The format TensorFlow reads ``data`` as, from its first bytes (in TensorFlow's
    order): "jpeg", "png", "gif", "bmp", "webp", "jxl", or None."""
    if data[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if data[:8] == _PNG_MAGIC:
        return "png"
    if data[:4] == b"GIF8":
        return "gif"
    if data[:2] == b"BM":
        return "bmp"
    if data[:4] == b"RIFF" and len(data) > 12 and data[8:12] == b"WEBP":
        return "webp"
    if data[:2] == b"\xff\x0a" or data[:12] == _JXL_CONTAINER:
        return "jxl"
    return None


def _pillow(op: str):
    try:
        from PIL import Image
    except ImportError:
        raise UnimplementedError(
            f"PNG and GIF support needs the optional Pillow package: {EXTRA}", op) from None
    return Image


def available() -> bool:
    """Whether PNG and GIF decoding works (Pillow, of the ``[image]`` extra, is
    installed)."""
    try:
        _pillow("DecodePng")
        return True
    except UnimplementedError:
        return False


# ------------------------------------------------------------------ dtypes

_UINT8, _UINT16, _FLOAT32 = np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.float32)


def _from_uint8(image: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A uint8 image (JPEG, GIF, BMP) as ``dtype``, as TensorFlow's kernel converts it:
    uint16 as ``v * 256``, float32 as ``v * float32(1 / 255)``."""
    if dtype == _UINT8:
        return image
    if dtype == _UINT16:
        return image.astype(np.uint16) * np.uint16(256)
    return image.astype(np.float32) * np.float32(1.0 / 255)


def convert_image_dtype(image: np.ndarray, dtype) -> np.ndarray:
    """``tf.image.convert_image_dtype`` from an unsigned integer image (what
    ``decode_image`` does for dtypes its kernel has not: it decodes to uint16 first)."""
    dtype = np.dtype(dtype)
    if image.dtype == dtype:
        return image
    in_max = np.iinfo(image.dtype).max
    if dtype.kind == "f":
        return image.astype(dtype) * dtype.type(1.0 / in_max)
    if dtype.kind not in "iu":
        raise InvalidArgumentError(f"dtype {dtype} is not an image dtype", "DecodeImage")
    out_max = np.iinfo(dtype).max
    if out_max > in_max:
        return image.astype(dtype) * dtype.type((out_max + 1) // (in_max + 1))
    return (image // ((in_max + 1) // (out_max + 1))).astype(dtype)


# ------------------------------------------------------------------ PNG

def _png_header(data: bytes) -> tuple:
    """(width, height, bit_depth, color_type) from the IHDR chunk."""
    if len(data) < 33 or data[12:16] != b"IHDR":
        raise ValueError("no IHDR chunk")
    width, height, depth, color = struct.unpack(">IIBB", data[16:26])
    if depth not in (1, 2, 4, 8, 16) or color not in (0, 2, 3, 4, 6) or not width or not height:
        raise ValueError("bad IHDR")
    return width, height, depth, color


#: libpng's default limit on a PNG's width and height (``png_set_user_limits``), which
#: TensorFlow's decoder keeps: larger images fail as libpng's initialization fails.
PNG_USER_MAX = 1_000_000


def _png_size_check(width: int, height: int) -> None:
    """TensorFlow's limits on a PNG's size, with its errors: libpng's own, then the
    decode op's (a pixel count below 2**29). Pillow's "decompression bomb" limit does not
    apply: TensorFlow decodes such images (a 14000x14000 PNG)."""
    if width > PNG_USER_MAX or height > PNG_USER_MAX:
        raise InvalidArgumentError("Invalid PNG. Failed to initialize decoder.", "DecodePng")
    if width * height >= 1 << 29:
        raise InvalidArgumentError(f"PNG size too large for int: {width} by {height}",
                                   "DecodePng")


def _png_open(data: bytes, rawmode: str | None = None):
    _pillow("DecodePng")
    from PIL import PngImagePlugin
    # The PNG plugin itself, not Image.open: open() refuses images over Pillow's
    # MAX_IMAGE_PIXELS (DecompressionBombError); the size was checked as TF checks it.
    image = PngImagePlugin.PngImageFile(io.BytesIO(data))
    if rawmode is not None:
        image.tile = [image.tile[0]._replace(args=rawmode)]
    image.load()
    return image


def _png_samples(data: bytes, depth: int, color: int):
    """The samples of a PNG at their own bit depth (uint16 for 16-bit images; sub-byte
    gray already scaled to 8 bits, as libpng expands it), its Pillow image (for info
    and palette)."""
    image = _png_open(data)
    if depth == 16 and color in (2, 6):
        hi = np.asarray(image).astype(np.uint16)
        lo = np.asarray(_png_open(data, "RGB;16L" if color == 2 else "RGBA;16L"))
        return (hi << 8) | lo, image
    if depth == 16 and color == 4:
        raw = np.asarray(_png_open(data, "RGBA")).astype(np.uint16)
        return np.stack([(raw[..., 0] << 8) | raw[..., 1], (raw[..., 2] << 8) | raw[..., 3]],
                        -1), image
    samples = np.asarray(image)
    if image.mode == "1":
        samples = samples.astype(np.uint8) * np.uint8(255)
    if samples.ndim == 2:
        samples = samples[..., None]
    if depth == 16:
        samples = samples.astype(np.uint16)
    return samples, image


def _gamma_8bit_table(gamma: int) -> np.ndarray:
    """libpng's 8-bit gamma table for an exponent in units of 1e-5."""
    v = np.arange(256, dtype=np.float64)
    table = np.floor(255 * np.power(v / 255, gamma * 1e-5) + 0.5)
    table[0], table[255] = 0, 255
    return table.astype(np.int64)


def _significant(gamma: int) -> bool:
    return gamma < 95000 or gamma > 105000


def _reciprocal(value: int) -> int:
    return int(np.floor(1e10 / value + 0.5))


def _file_gamma(image) -> int:
    """The file's gamma (1e-5 units) as libpng reads it, 100000 when none is declared."""
    if "srgb" in image.info:
        return 45455
    gamma = image.info.get("gamma")
    if gamma:
        return int(round(gamma * 100000))
    return 100000


def _rgb_to_gray(rgb: np.ndarray, depth: int, gamma: int) -> np.ndarray:
    """libpng's rgb_to_gray with weights (0.299, 0.587) in 1/32768 fixed point."""
    rc, gc = 29900 * 32768 // 100000, 58700 * 32768 // 100000
    bc = 32768 - rc - gc
    r, g, b = (rgb[..., i].astype(np.int64) for i in range(3))
    same = (r == g) & (r == b)
    if depth == 16:
        if _significant(gamma):
            raise UnimplementedError(
                "decode_png: a 16-bit color PNG that declares a gamma (gAMA or sRGB) "
                "cannot be converted to gray as libpng converts it; decode it with 3 or 4 "
                "channels", "DecodePng")
        gray = (rc * r + gc * g + bc * b + 16384) >> 15
    elif _significant(gamma):
        to_1 = _gamma_8bit_table(_reciprocal(gamma))
        from_1 = _gamma_8bit_table(_reciprocal(_reciprocal(gamma)))
        gray = from_1[(rc * to_1[r] + gc * to_1[g] + bc * to_1[b] + 16384) >> 15]
    else:
        gray = (rc * r + gc * g + bc * b) >> 15
    return np.where(same, r, gray).astype(rgb.dtype)[..., None]


def _decode_png(data: bytes, channels: int, bits: int) -> np.ndarray:
    """A PNG as TensorFlow's libpng settings decode it: ``channels`` (0: the image's own)
    samples of ``bits`` (8 or 16) bits."""
    try:
        width, height, depth, color = _png_header(data)
    except ValueError:
        raise InvalidArgumentError("Invalid PNG. Failed to initialize decoder.",
                                   "DecodePng") from None
    _png_size_check(width, height)
    try:
        samples, image = _png_samples(data, depth, color)
    except (OSError, SyntaxError, ValueError, EOFError, struct.error, IndexError):
        raise InvalidArgumentError(f"Invalid PNG data, size {len(data)}", "DecodePng") from None
    trns = image.info.get("transparency")
    has_alpha = color in (4, 6)
    if color == 3:
        has_trns = trns is not None
    else:
        has_trns = trns is not None and not has_alpha
    if channels == 0:
        channels = (4 if has_trns else 3) if color == 3 else {0: 1, 2: 3, 4: 2, 6: 4}[color]
    want_alpha = channels % 2 == 0
    top = 65535 if depth == 16 else 255

    # expand: palette to RGB(A), tRNS to alpha (only when alpha is wanted)
    alpha = None
    if color == 3:
        palette = np.zeros((256, 3), np.uint8)
        entries = np.asarray(image.getpalette() or [], np.uint8).reshape(-1, 3)[:256]
        palette[:len(entries)] = entries
        index = samples[..., 0]
        samples = palette[index]
        if want_alpha and has_trns:
            table = np.full(256, 255, np.uint8)
            if isinstance(trns, int):
                table[trns] = 0
            else:
                values = np.frombuffer(bytes(trns), np.uint8)[:256]
                table[:len(values)] = values
            alpha = table[index]
    elif has_alpha:
        alpha = samples[..., -1]
        samples = samples[..., :-1]
    elif want_alpha and has_trns:
        key = np.asarray(trns if isinstance(trns, tuple) else (trns,), np.int64)
        raw = samples.astype(np.int64)
        if depth < 8:
            raw = raw // (255 // ((1 << depth) - 1))
        alpha = np.where((raw == key).all(-1), 0, top).astype(samples.dtype)
    gray = samples.shape[-1] == 1
    if channels < 3 and not gray:
        samples = _rgb_to_gray(samples, depth, _file_gamma(image))
    elif channels >= 3 and gray:
        samples = np.repeat(samples, 3, axis=-1)
    if want_alpha:
        if alpha is None:
            filler = (1 << depth) - 1
            alpha = np.full(samples.shape[:2], filler if depth == 16 else filler & 0xFF,
                            samples.dtype)
        samples = np.concatenate([samples, alpha[..., None]], -1)
    if depth == 16 and bits == 8:
        return (samples >> 8).astype(np.uint8)
    if depth <= 8 and bits == 16:
        return samples.astype(np.uint16) * np.uint16(257)
    return np.ascontiguousarray(samples)


# ------------------------------------------------------------------ GIF

_GIF_ERRORS = {
    102: "Failed to read from given file",
    104: "No screen descriptor detected",
    105: "No Image Descriptor detected",
    107: "Wrong record type detected",
    109: "Failed to allocate required memory",
    112: "Image is defective, decoding aborted",
}


class _GifError(Exception):
    def __init__(self, code: int, opening: bool = False):
        super().__init__(code)
        self.code, self.opening = code, opening


class _GifFrame:
    __slots__ = ("left", "top", "width", "height", "interlaced", "colors", "lzw",
                 "transparent")


def _gif_blocks(data: bytes, pos: int) -> tuple:
    """The data sub-blocks starting at ``pos`` joined (with their length bytes kept) and
    the position after the terminator; _GifError when the data ends first."""
    start = pos
    while True:
        if pos >= len(data):
            raise _GifError(102)
        size = data[pos]
        if pos + 1 + size > len(data):
            raise _GifError(102)
        pos += 1 + size
        if size == 0:
            return data[start:pos], pos


def _gif_parse(data: bytes) -> tuple:
    """(global colors, frames) of a GIF, its blocks read as giflib reads them. As in
    TensorFlow, an error after at least one whole frame (a missing trailer, a frame cut
    short) ends the file before it; one before that raises _GifError."""
    if len(data) < 13:
        raise _GifError(102 if len(data) < 6 else 104, opening=True)
    flags = data[10]
    pos = 13
    colors = None
    if flags & 0x80:
        n = 2 << (flags & 7)
        if pos + 3 * n > len(data):
            raise _GifError(102, opening=True)
        colors = np.frombuffer(data, np.uint8, 3 * n, pos).reshape(n, 3)
        pos += 3 * n
    frames: list = []
    transparent = -1
    while True:
        try:
            if pos >= len(data):
                raise _GifError(102)
            kind = data[pos]
            pos += 1
            if kind == 0x3B:          # trailer
                break
            if kind == 0x21:          # extension: a graphic control block sets transparency
                if pos >= len(data):
                    raise _GifError(102)
                label = data[pos]
                body, pos = _gif_blocks(data, pos + 1)
                if label == 0xF9 and len(body) >= 5 and body[0] == 4:
                    transparent = body[4] if body[1] & 1 else -1
                continue
            if kind != 0x2C:
                raise _GifError(107)
            frame, pos = _gif_frame(data, pos)
        except _GifError:
            if frames:                # giflib keeps the whole frames read before
                break
            raise
        frame.transparent = transparent
        transparent = -1
        frames.append(frame)
    return colors, frames


def _gif_frame(data: bytes, pos: int) -> tuple:
    """The frame whose image descriptor starts at ``pos`` and the position after it."""
    if pos + 9 > len(data):
        raise _GifError(102)
    frame = _GifFrame()
    frame.left, frame.top, frame.width, frame.height, flags = struct.unpack_from(
        "<HHHHB", data, pos)
    pos += 9
    frame.interlaced = bool(flags & 0x40)
    frame.colors = None
    if flags & 0x80:
        n = 2 << (flags & 7)
        if pos + 3 * n > len(data):
            raise _GifError(102)
        frame.colors = np.frombuffer(data, np.uint8, 3 * n, pos).reshape(n, 3)
        pos += 3 * n
    if pos >= len(data) or data[pos] > 8:
        raise _GifError(102)
    if frame.width == 0 or frame.height == 0:
        raise _GifError(109)
    _, end = _gif_blocks(data, pos + 1)
    frame.lzw = data[pos:end]
    return frame, end


def _gif_indices(frame: _GifFrame) -> np.ndarray:
    """The frame's palette indices (height, width), its LZW data expanded by Pillow."""
    _pillow("DecodeGif")
    from PIL import GifImagePlugin
    header = (b"GIF89a" + struct.pack("<HHBBB", frame.width, frame.height, 0xF7, 0, 0)
              + bytes(range(256)) * 3)
    descriptor = b"," + struct.pack("<HHHHB", 0, 0, frame.width, frame.height,
                                    0x40 if frame.interlaced else 0)
    blob = header + descriptor + frame.lzw + b";"
    try:
        # The GIF plugin itself, not Image.open, which refuses frames over Pillow's
        # MAX_IMAGE_PIXELS (DecompressionBombError): TensorFlow decodes them.
        image = GifImagePlugin.GifImageFile(io.BytesIO(blob))
        image.load()
    except (OSError, SyntaxError, ValueError, EOFError) as e:
        raise _GifError(112) from e
    indices = np.asarray(image)
    if indices.shape != (frame.height, frame.width):
        raise _GifError(112)
    return indices


def _decode_gif(data: bytes, op: str, expand_animations: bool) -> np.ndarray:
    """A GIF's frames (num_frames, height, width, 3) composited as TensorFlow does;
    with ``expand_animations`` False only the first frame is composited."""
    def failure(message: str) -> InvalidArgumentError:
        return InvalidArgumentError(f"Invalid GIF data (size {len(data)}), {message}", op)

    try:
        colors, frames = _gif_parse(data)
    except _GifError as e:
        what = "failed to open gif file: " if e.opening else "failed to slurp gif file: "
        raise failure(what + _GIF_ERRORS.get(e.code, "Unknown error")) from None
    if not frames:
        raise failure("failed to slurp gif file: " + _GIF_ERRORS[105])
    indices = []
    for k, frame in enumerate(frames):
        try:
            indices.append(_gif_indices(frame))
        except _GifError as e:
            if k == 0:
                raise failure("failed to slurp gif file: " + _GIF_ERRORS[e.code]) from None
            frames = frames[:k]       # as a frame cut short: the frames before it
            break
    height = max(f.height for f in frames)
    width = max(f.width for f in frames)
    count = len(frames) if expand_animations else 1
    out = np.zeros((count, height, width, 3), np.uint8)
    for k in range(count):
        frame = frames[k]
        if k > 0:
            out[k] = out[k - 1]
        table = frame.colors if frame.colors is not None else colors
        if table is None:
            raise failure(f"missing color map for frame {k}")
        top, left = frame.top, frame.left
        bottom, right = min(top + frame.height, height), min(left + frame.width, width)
        if top >= bottom or left >= right:
            continue
        region = indices[k][:bottom - top, :right - left]
        opaque = region != frame.transparent
        bad = opaque & (region >= len(table))
        if bad.any():
            index = int(region[bad][0])
            raise failure(f"found color index {index} outside of color map range {len(table)}")
        canvas = out[k, top:bottom, left:right]
        canvas[opaque] = table[region[opaque]]
    return out


# ------------------------------------------------------------------ BMP

def _decode_bmp(data: bytes, channels: int) -> np.ndarray:
    """TensorFlow's BMP reader: uncompressed rows of 1, 3 or 4 bytes per pixel (BGR(A),
    bottom-up unless the height is negative) after a header of ``bfOffBits`` bytes."""
    op = "DecodeBmp"
    if len(data) < 32:
        raise InvalidArgumentError(
            "Incomplete bmp content, requires at least 32 bytes to find the header size, "
            f"width, height, and bpp, got {len(data)} bytes", op)
    header, width, height = struct.unpack_from("<iii", data, 10)[0], *struct.unpack_from(
        "<ii", data, 18)
    bpp = struct.unpack_from("<h", data, 28)[0]
    depth = int(bpp / 8)
    if depth not in (1, 3, 4):
        raise InvalidArgumentError(
            f"Number of channels inherent in the image must be 1, 3 or 4, was {depth}", op)
    wanted = channels or depth
    if width <= 0:
        raise InvalidArgumentError("Width must be positive", op)
    if height == 0:
        raise InvalidArgumentError("Height must be nonzero", op)
    if header < 0:
        raise InvalidArgumentError("header size must be nonnegative", op)
    rows = abs(height)
    if width * rows >= (2**31 - 1) // 8:
        raise InvalidArgumentError("Total possible pixel bytes must be less than 2^30", op)
    row_size = (depth * width + 3) // 4 * 4
    diff = len(data) - header - row_size * rows
    if diff != 0:
        raise InvalidArgumentError("Input size should match (header_size + row_size * "
                                   f"abs_height) but they differ by {diff}", op)
    pixels = np.frombuffer(data, np.uint8, row_size * rows, header).reshape(rows, row_size)
    pixels = pixels[:, :width * depth].reshape(rows, width, depth)
    if height > 0:
        pixels = pixels[::-1]
    out = np.empty((rows, width, wanted), np.uint8)
    if depth == 1:
        out[..., :min(wanted, 3)] = pixels
    else:
        out[..., :3] = pixels[..., 2::-1]
    if wanted == 4:
        out[..., 3] = pixels[..., 3] if depth == 4 else 255
    return out


# ------------------------------------------------------------------ the kernel

def decode(data: bytes, op: str, channels: int = 0, dtype=np.uint8,
           expand_animations: bool = True, jpeg=None) -> np.ndarray:
    """TensorFlow's image kernel run as ``op`` ("DecodeJpeg", "DecodePng", "DecodeGif",
    "DecodeBmp" or "DecodeImage") on one encoded image: the decoded array of TensorFlow's
    shape and ``dtype``; InvalidArgumentError with its messages. ``jpeg`` (a
    ``JpegOptions``) decodes JPEG data; without it TensorFlow's defaults do."""
    if not data:
        raise InvalidArgumentError("Input is empty.", op)
    dtype = np.dtype(dtype)
    fmt = classify(data)
    if fmt is None:
        raise InvalidArgumentError(
            "Unknown image file format. One of JPEG, JPEG XL, PNG, GIF, BMP, WebP required.", op)
    if fmt in ("webp", "jxl"):
        name = "WebP" if fmt == "webp" else "JPEG XL"
        raise UnimplementedError(f"{name} images are not supported by nbdata", op)
    if fmt == "jpeg":
        if channels == 4:
            raise InvalidArgumentError("JPEG does not support 4 channels", op)
        if op == "DecodeBmp":
            raise InvalidArgumentError("Trying to decode JPEG format using DecodeBmp op. Use "
                                       "`decode_jpeg` or `decode_image` instead.", op)
        options = jpeg if jpeg is not None else provided("jpeg_options")(channels)
        try:
            image = options.decode(data)
        except InvalidArgumentError as e:
            raise InvalidArgumentError(e.message, op) from None
        image = _from_uint8(image, dtype)
        return image[None] if op == "DecodeGif" else image
    if fmt == "png":
        image = _decode_png(data, channels, 8 if dtype == _UINT8 else 16)
        if op == "DecodeBmp":
            raise InvalidArgumentError("Trying to decode PNG format using DecodeBmp op. Use "
                                       "`decode_png` or `decode_image` instead.", op)
        if dtype == _FLOAT32:
            image = image.astype(np.float32) * np.float32(1.0 / 65535)
        return image[None] if op == "DecodeGif" else image
    if fmt == "gif":
        if channels not in (0, 3):
            raise InvalidArgumentError(f"channels must be 0 or 3 for GIF, got {channels}", op)
        if op == "DecodeBmp":
            raise InvalidArgumentError("Trying to decode GIF format using DecodeBmp op. Use "
                                       "`decode_gif` or `decode_image` instead.", op)
        frames = _decode_gif(data, op, expand_animations or op != "DecodeImage")
        if op in ("DecodePng", "DecodeJpeg"):
            if len(frames) != 1:
                raise InvalidArgumentError(
                    f"Got {len(frames)} frames, but animated gifs can only be decoded by "
                    "tf.io.decode_gif or tf.io.decode_image", op)
            frames = frames[0]
        elif op == "DecodeImage" and not expand_animations:
            frames = frames[0]
        return _from_uint8(frames, dtype)
    if channels == 1:
        raise InvalidArgumentError(f"`channels` must be 0, 3 or 4 for BMP, but got {channels}",
                                   op)
    if op not in ("DecodeBmp", "DecodeImage"):
        raise InvalidArgumentError("Trying to decode BMP format using a wrong op. Use "
                                   f"`decode_bmp` or `decode_image` instead. Op used: {op}", op)
    try:
        image = _decode_bmp(data, channels)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(e.message, op) from None
    return _from_uint8(image, dtype)


def as_bytes(value, op: str) -> bytes:
    """One encoded image as ``bytes``; TypeError for anything else."""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, (bytes, bytearray, memoryview, np.bytes_)):
        return bytes(value)
    raise TypeError(f"{op}: contents must be bytes or a string, got {type(value).__name__}")


class ImageOptions:
    """The checked arguments of one call of a decode op (all but ``decode_jpeg``)."""

    def __init__(self, op: str, channels=0, dtype=np.uint8, expand_animations=True):
        channels = 3 if op == "DecodeGif" else int(channels)
        if channels not in (0, 1, 3, 4):
            raise InvalidArgumentError(f"`channels` must be 0, 1, 3 or 4 but got {channels}", op)
        dtype = np.dtype(dtype)
        if op == "DecodePng" and dtype not in (_UINT8, _UINT16):
            raise InvalidArgumentError(
                f"`dtype` for `DecodePng` must be unit8, unit16 but got: {dtype}", op)
        if op == "DecodeImage" and dtype.kind not in "fiu":
            raise InvalidArgumentError(f"`dtype` for `DecodeImage` must be an image dtype "
                                       f"(uint8, uint16, float32, ...) but got: {dtype}", op)
        self.op, self.channels, self.dtype = op, channels, dtype
        self.expand_animations = bool(expand_animations)
        _pillow(op)

    @property
    def spec(self) -> TensorSpec:
        """The element spec of one decoded image."""
        c = 3 if self.op == "DecodeGif" else (self.channels or None)
        if self.op == "DecodeGif":
            return TensorSpec((None, None, None, 3), self.dtype)
        if self.op == "DecodeImage" and self.expand_animations:
            return TensorSpec(None, self.dtype)
        return TensorSpec((None, None, c), self.dtype)

    def decode(self, data: bytes) -> np.ndarray:
        if self.op == "DecodeImage" and self.dtype not in (_UINT8, _UINT16, _FLOAT32):
            image = decode(data, self.op, self.channels, np.uint16, self.expand_animations)
            return convert_image_dtype(image, self.dtype)
        return decode(data, self.op, self.channels, self.dtype, self.expand_animations)

    def describe(self) -> str:
        name = _NAMES[self.op]
        if self.op == "DecodeGif":
            return f"{name}()"
        return f"{name}(channels={self.channels}, dtype={self.dtype.name})"


_NAMES = {"DecodePng": "decode_png", "DecodeGif": "decode_gif", "DecodeBmp": "decode_bmp",
          "DecodeImage": "decode_image"}


def _stack(images: list, op: str) -> np.ndarray:
    for i, image in enumerate(images):
        if image.shape != images[0].shape:
            raise RowError(i, InvalidArgumentError(
                f"{_NAMES.get(op, op)}: images of a batch must share one shape to be stacked: "
                f"image {i} is {'x'.join(map(str, image.shape))}, image 0 is "
                f"{'x'.join(map(str, images[0].shape))}", op))
    return np.stack(images)


def _decode_all(options: ImageOptions, values: list, batch: int | None = None) -> list:
    """Each value decoded; RowError naming the first that fails."""
    out = []
    for i, data in enumerate(values):
        try:
            out.append(options.decode(data))
        except InvalidArgumentError as e:
            if batch is not None:
                e = InvalidArgumentError(f"{e.message} (image {i % batch} of the batch)",
                                         options.op)
            raise RowError(i, e) from None
    return out


def _decode_call(options: ImageOptions, contents):
    """An op's eager call: one image, or a batch stacked (nbdata's extension)."""
    if isinstance(contents, (bytes, bytearray, memoryview, np.bytes_, str)) or (
            isinstance(contents, np.ndarray) and contents.ndim == 0):
        return options.decode(as_bytes(contents, _NAMES[options.op]))
    if isinstance(contents, StringColumn):
        values = contents.values()
    else:
        arr = np.asarray(contents, dtype=object) if isinstance(contents, (list, tuple)) \
            else contents
        if arr.ndim != 1:
            raise InvalidArgumentError(
                f"`contents` must be one image or a vector of images but got shape "
                f"{list(arr.shape)}", options.op)
        values = [as_bytes(v, _NAMES[options.op]) for v in arr]
    try:
        images = _decode_all(options, values, batch=len(values))
        if not images:
            return np.zeros((0, 0, 0, 0), options.dtype)
        return _stack(images, options.op)
    except RowError as e:
        raise e.error from None


class ImageDecoder(Decoder):
    """A decode op (``decode_png``, ``decode_gif``, ``decode_bmp``, ``decode_image``) on
    each record of a column."""

    def __init__(self, options: ImageOptions):
        self.options = options
        self.name = self.batched_name = _NAMES[options.op]

    @property
    def spec(self):
        return self.options.spec

    def describe(self) -> str:
        return self.options.describe()

    def decode_rows(self, column, rows: int, batch: int | None = None) -> list:
        values = StringColumn(column.data, column.offsets[:rows + 1]).values()
        images = _decode_all(self.options, values, batch)
        if images and all(i.shape == images[0].shape for i in images):
            return [np.stack(images)]
        if images and len({i.ndim for i in images}) == 1:
            packed = PackedRows.empty([i.shape for i in images], self.options.dtype,
                                      images[0].ndim)
            for target, image in zip(packed, images):
                target[...] = image
            return [packed]
        return [RowList(images)]

    def batch_columns(self, columns, count, size):
        column = columns[0]
        if isinstance(column, np.ndarray):
            return [column.reshape((count, size) + column.shape[1:])]
        out = []
        for b in range(count):
            try:
                out.append(_stack(list(column[b * size:(b + 1) * size]), self.options.op))
            except RowError as e:
                raise RowError(b * size + e.row, e.error) from None
        return [RowList(out)] if count > 1 and len({o.shape for o in out}) > 1 else [np.stack(out)]


def _decoder(op: str):
    def make(contents, *args, **kwargs):
        kwargs.pop("name", None)
        return for_records(ImageDecoder(ImageOptions(op, *args, **kwargs)), contents)
    return make


def _abstract(op: str):
    make = _decoder(op)
    return lambda *args, **kwargs: make(*args, **kwargs).output_spec


@define(tags=("image", "io"), abstract=_abstract("DecodePng"), decoder=_decoder("DecodePng"))
def decode_png(contents, channels=0, dtype=np.uint8, name=None):
    """Decodes PNG images (``tf.io.decode_png``, same samples).

    Like TensorFlow's, it also decodes JPEG data and single-frame GIFs (as
    ``decode_jpeg`` and ``decode_gif`` would, but 3-D); BMP data is refused.

    Args:
        contents: one encoded image (``bytes``), or a list or 1-D array of them (a
            batch: nbdata's extension; all images must decode to one shape).
        channels: 0 (the image's own: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA; a palette
            image is RGB, or RGBA when it has transparency), 1, 2, 3 or 4.
        dtype: ``np.uint8`` (16-bit samples keep their high byte) or ``np.uint16``
            (8-bit samples ``v`` become ``v * 257``).
        name: ignored (TensorFlow's op name).

    Returns:
        An (H, W, C) array, or (N, H, W, C) for a batch.

    Raises:
        InvalidArgumentError: unreadable data, bad arguments, an animated GIF.
        UnimplementedError: the ``[image]`` extra (Pillow) is not installed.
    """
    return _decode_call(ImageOptions("DecodePng", channels, dtype), contents)


@define(tags=("image", "io"), abstract=_abstract("DecodeGif"), decoder=_decoder("DecodeGif"))
def decode_gif(contents, name=None):
    """Decodes GIF images to (num_frames, H, W, 3) uint8 arrays (``tf.io.decode_gif``,
    same pixels: frames composited as TensorFlow composites them, see the module
    docstring). Like TensorFlow's, JPEG and PNG data decode to one frame.

    A batch (a list or 1-D array of images, nbdata's extension) stacks to
    (N, num_frames, H, W, 3) when the shapes agree.
    """
    return _decode_call(ImageOptions("DecodeGif"), contents)


@define(tags=("image", "io"), abstract=_abstract("DecodeBmp"), decoder=_decoder("DecodeBmp"))
def decode_bmp(contents, channels=0, name=None):
    """Decodes uncompressed BMP images to (H, W, C) uint8 arrays (``tf.io.decode_bmp``:
    ``channels`` 0, 3 (RGB) or 4 (RGBA, opaque when the image has no alpha); 8-bit
    images are read as one gray channel). Other formats are refused, as TensorFlow
    refuses them."""
    return _decode_call(ImageOptions("DecodeBmp", channels), contents)


@define(tags=("image", "io"), abstract=_abstract("DecodeImage"), decoder=_decoder("DecodeImage"))
def decode_image(contents, channels=None, dtype=np.uint8, name=None, expand_animations=True):
    """Decodes a BMP, GIF, JPEG or PNG image (``tf.io.decode_image``).

    Args:
        contents: one encoded image, or a list or 1-D array of them (nbdata's batch).
        channels: None or 0 (the image's own), 1, 3 or 4 (see the format's decoder).
        dtype: the output dtype. uint8, uint16 and float32 are converted as
            TensorFlow's kernel converts them (8-bit formats: ``v * 256`` and
            ``v / 255``; PNG: decoded at 16 bits, then ``v / 65535`` for float32);
            other dtypes through uint16 and ``convert_image_dtype``.
        name: ignored (TensorFlow's op name).
        expand_animations: GIFs are (num_frames, H, W, 3), other images 3-D; False:
            every image is 3-D (a GIF's first frame).

    Returns:
        The decoded array; its element spec inside ``map`` has unknown rank unless
        ``expand_animations`` is False.
    """
    return _decode_call(ImageOptions("DecodeImage", channels or 0, dtype, expand_animations),
                        contents)


__all__ = ["available", "classify", "convert_image_dtype", "decode", "decode_bmp",
           "decode_gif", "decode_image", "decode_png"]
