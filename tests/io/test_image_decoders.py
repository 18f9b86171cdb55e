"""decode_png, decode_gif, decode_bmp, decode_image, and decode_jpeg on damaged and
non-JPEG data: TensorFlow's pixels, shapes, dtypes and errors, eagerly and inside map.

``tests/data/tf_image_decoders.npz`` holds the encoded inputs and what TensorFlow 2.21
returns (or the message it raises) for each case of :func:`cases`;
``python tests/io/test_image_decoders.py OUT.npz`` writes it again (TensorFlow and
Pillow installed). With TensorFlow importable the tests also compare against it live.
"""

import io
import pathlib
import struct
import sys
import zlib

import numpy as np
import pytest

import nbdata as nd
from nbdata.errors import InvalidArgumentError, UnimplementedError

FIXTURE = pathlib.Path(__file__).parent.parent / "data" / "tf_image_decoders.npz"

U8, U16, F32 = np.uint8, np.uint16, np.float32


def cases():
    """(case id, input name, op name, kwargs) of every recorded output."""
    out = []
    pngs = ["rgba8", "rgb8", "g8", "ga8", "rgba16", "rgb16", "g16", "ga16", "pal", "pal_trns",
            "pal_alpha", "pal4", "g1", "g8_trns", "rgb8_trns", "rgb8_srgb", "rgba8_gama",
            "interlaced"]
    for name in pngs:
        for ch in (0, 1, 3, 4):
            for dt in (U8, U16):
                out.append((f"{name}/png/{ch}/{np.dtype(dt).name}", name, "decode_png",
                            {"channels": ch, "dtype": dt}))
            out.append((f"{name}/jpeg/{ch}", name, "decode_jpeg", {"channels": ch}))
        out.append((f"{name}/image/f32", name, "decode_image", {"dtype": F32}))
        out.append((f"{name}/gif", name, "decode_gif", {}))
        out.append((f"{name}/bmp", name, "decode_bmp", {}))
    for name in ["anim", "anim_trans", "single", "single_trans", "no_trailer", "cut_frame",
                 "cut_first", "short_header", "garbage_after"]:
        out.append((f"{name}/gif", name, "decode_gif", {}))
        for ch in (0, 1):
            out.append((f"{name}/jpeg/{ch}", name, "decode_jpeg", {"channels": ch}))
            out.append((f"{name}/png/{ch}", name, "decode_png", {"channels": ch}))
        for ea in (True, False):
            out.append((f"{name}/image/{ea}", name, "decode_image", {"expand_animations": ea}))
        out.append((f"{name}/image/f32", name, "decode_image", {"dtype": F32}))
        out.append((f"{name}/bmp", name, "decode_bmp", {}))
    for name in ["bmp24", "bmp32", "bmp8", "bmp_odd", "bmp_short", "bmp_tiny"]:
        for ch in (0, 1, 3, 4):
            out.append((f"{name}/bmp/{ch}", name, "decode_bmp", {"channels": ch}))
        for dt in (U8, U16, F32):
            out.append((f"{name}/image/{np.dtype(dt).name}", name, "decode_image",
                        {"dtype": dt}))
        out.append((f"{name}/jpeg", name, "decode_jpeg", {}))
    for dt in (U16, F32, np.float16, np.int32):
        out.append((f"jpeg_small/image/{np.dtype(dt).name}", "jpeg_small", "decode_image",
                    {"dtype": dt}))
        out.append((f"rgba16/image/{np.dtype(dt).name}", "rgba16", "decode_image",
                    {"dtype": dt}))
    out.append(("jpeg_small/gif", "jpeg_small", "decode_gif", {}))
    out.append(("jpeg_small/bmp", "jpeg_small", "decode_bmp", {}))
    out.append(("jpeg_small/png/u16", "jpeg_small", "decode_png", {"dtype": U16}))
    out.append(("junk/png", "junk", "decode_png", {}))
    out.append(("empty/image", "empty", "decode_image", {}))
    for name in ["jpeg_zeroed", "jpeg_flipped", "jpeg"]:
        for kwargs in ({}, {"dct_method": "INTEGER_ACCURATE"}, {"fancy_upscaling": False}):
            key = "/".join(f"{k}={v}" for k, v in kwargs.items())
            out.append((f"{name}/jpeg/{key}", name, "decode_jpeg", kwargs))
    for name in ["jpeg_cut_sos", "jpeg_cut_header", "jpeg_cut_scan", "jpeg_no_eoi"]:
        for rec in (False, True):
            out.append((f"{name}/jpeg/{rec}", name, "decode_jpeg",
                        {"try_recover_truncated": rec}))
    return out


# ------------------------------------------------------------------ inputs

def _chunk(kind: bytes, payload: bytes) -> bytes:
    return (struct.pack(">I", len(payload)) + kind + payload
            + struct.pack(">I", zlib.crc32(kind + payload)))


def _with_chunk(png: bytes, kind: bytes, payload: bytes) -> bytes:
    return png[:33] + _chunk(kind, payload) + png[33:]


def _interlaced_png(image: np.ndarray) -> bytes:
    """An 8-bit Adam7-interlaced PNG (neither encoder used here writes one)."""
    h, w, c = image.shape
    raw = b""
    for y0, x0, dy, dx in [(0, 0, 8, 8), (0, 4, 8, 8), (4, 0, 8, 4), (0, 2, 4, 4),
                           (2, 0, 4, 2), (0, 1, 2, 2), (1, 0, 2, 1)]:
        for row in image[y0::dy, x0::dx]:
            if row.size:
                raw += b"\x00" + row.tobytes()
    header = struct.pack(">IIBBBBB", w, h, 8, {1: 0, 2: 4, 3: 2, 4: 6}[c], 0, 0, 1)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(raw))
            + _chunk(b"IEND", b""))


def _png(array: np.ndarray, **kwargs) -> bytes:
    """PNG of an (H, W, C) uint8/uint16 array or a Pillow image, by Pillow's encoder or
    (for 16-bit color) a minimal writer."""
    from PIL import Image
    if isinstance(array, np.ndarray) and array.dtype == np.uint16:
        h, w, c = array.shape
        rows = b"".join(b"\x00" + row.astype(">u2").tobytes() for row in array)
        header = struct.pack(">IIBBBBB", w, h, 16, {1: 0, 2: 4, 3: 2, 4: 6}[c], 0, 0, 0)
        return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header)
                + _chunk(b"IDAT", zlib.compress(rows)) + _chunk(b"IEND", b""))
    image = array if not isinstance(array, np.ndarray) else Image.fromarray(
        array[..., 0] if array.shape[-1] == 1 else array,
        mode={1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}[array.shape[-1]])
    out = io.BytesIO()
    image.save(out, "PNG", **kwargs)
    return out.getvalue()


def _bmp(array: np.ndarray) -> bytes:
    from PIL import Image
    out = io.BytesIO()
    Image.fromarray(array).save(out, "BMP")
    return out.getvalue()


def make_inputs() -> dict:
    """The encoded inputs (Pillow, zlib and simplejpeg; stored in the fixture)."""
    from PIL import Image
    import simplejpeg
    rng = np.random.default_rng(7)
    a = rng.integers(0, 256, (5, 7, 4), dtype=np.uint8)
    b = rng.integers(0, 65536, (5, 7, 4), dtype=np.uint16)
    pal = Image.fromarray(a[..., :3]).quantize(colors=16)
    inputs = {
        "rgba8": _png(a), "rgb8": _png(a[..., :3]), "g8": _png(a[..., :1]),
        "ga8": _png(a[..., :2]), "rgba16": _png(b), "rgb16": _png(b[..., :3]),
        "g16": _png(b[..., :1]), "ga16": _png(b[..., :2]), "pal": _png(pal),
        "pal_trns": _png(pal, transparency=3),
        "pal_alpha": _png(pal, transparency=bytes([0, 128, 255, 7])),
        "pal4": _png(pal, bits=4), "g1": _png(Image.fromarray(a[..., 0] > 128)),
        "g8_trns": _png(a[..., :1], transparency=int(a[0, 0, 0])),
        "rgb8_trns": _png(a[..., :3], transparency=tuple(int(v) for v in a[1, 1, :3])),
        "interlaced": _interlaced_png(a[..., :3]),
    }
    inputs["rgb8_srgb"] = _with_chunk(inputs["rgb8"], b"sRGB", b"\x00")
    inputs["rgba8_gama"] = _with_chunk(inputs["rgba8"], b"gAMA", struct.pack(">I", 45455))
    base = rng.integers(0, 256, (10, 12, 3), dtype=np.uint8)
    f1 = base.copy()
    f1[2:6, 3:8] = [255, 0, 0]
    f2 = f1.copy()
    f2[0:3, 0:3] = [0, 255, 0]
    frames = [Image.fromarray(x) for x in (base, f1, f2)]

    def gif(first, rest=(), **kwargs):
        out = io.BytesIO()
        first.save(out, "GIF", save_all=bool(rest), append_images=list(rest), **kwargs)
        return out.getvalue()

    anim = gif(frames[0], frames[1:])             # later frames cropped to what changed
    inputs.update({
        "anim": anim,
        "anim_trans": gif(frames[0], frames[1:], transparency=0, disposal=[0, 1, 2]),
        "single": gif(frames[0].quantize(colors=32)),
        "single_trans": gif(frames[0].quantize(colors=32), transparency=5),
        "no_trailer": anim[:-1], "garbage_after": anim[:-1] + b"\x99junk",
        "cut_frame": anim[:len(anim) - 30], "cut_first": anim[:600], "short_header": anim[:8],
    })
    c = rng.integers(0, 256, (5, 7, 4), dtype=np.uint8)
    inputs.update({"bmp24": _bmp(c[..., :3]), "bmp32": _bmp(c), "bmp8": _bmp(c[..., 0]),
                   "bmp_odd": _bmp(c[:3, :5, :3])})
    inputs["bmp_short"] = inputs["bmp24"][:-3]
    inputs["bmp_tiny"] = inputs["bmp24"][:20]
    y, x = np.mgrid[0:24, 0:40]
    smooth = np.clip((x * 3 + y * 4)[..., None] + rng.normal(0, 12, (24, 40, 3))
                     + np.arange(3) * 20, 0, 255).astype(np.uint8)
    jpeg = simplejpeg.encode_jpeg(smooth, quality=90, colorsubsampling="420")
    sos = jpeg.find(b"\xff\xda")
    scan = sos + 14
    zeroed = bytearray(jpeg)
    zeroed[scan + 100:scan + 150] = bytes(50)
    flipped = bytearray(jpeg)
    flipped[scan + 120] ^= 0x5A
    inputs.update({
        "jpeg": jpeg, "jpeg_zeroed": bytes(zeroed), "jpeg_flipped": bytes(flipped),
        "jpeg_cut_header": jpeg[:20], "jpeg_cut_sos": jpeg[:sos + 5],
        "jpeg_cut_scan": jpeg[:len(jpeg) - 60], "jpeg_no_eoi": jpeg[:-2],
        "jpeg_small": simplejpeg.encode_jpeg(smooth[:8, :8], quality=90),
        "junk": b"RIFF1234WEBPxxxx", "empty": b"",
    })
    return inputs


# ------------------------------------------------------------------ running a case

def _nd_call(op: str, data: bytes, kwargs: dict):
    return getattr(nd.image, op)(data, **kwargs)


def _tf_call(tf, op: str, data: bytes, kwargs: dict):
    kwargs = dict(kwargs)
    if "dtype" in kwargs:
        kwargs["dtype"] = tf.as_dtype(kwargs["dtype"])
    return getattr(tf.io, op)(data, **kwargs).numpy()


def _tf_message(error) -> str:
    return str(error).split("}}")[-1].split(" [Op:")[0].strip()


def _outcome(call):
    """The array a call returns, or ("error", message)."""
    try:
        return call()
    except Exception as e:  # noqa: BLE001 - the message is the outcome
        return ("error", _tf_message(getattr(e, "message", None) or e))


# Outcomes nbdata knowingly does not reproduce (see nbdata/primitives/codecs.py and
# decode_jpeg's docstring): WebP data, and pixels of truncated JPEG scans that
# TensorFlow's libjpeg source re-reads.
_DIFFERENT = {"junk/png", "jpeg_cut_scan/jpeg/True"}


@pytest.fixture(scope="module")
def recorded():
    return load_fixture(FIXTURE)


def load_fixture(path) -> dict:
    """The fixture's arrays by name ("in/NAME", "out/CASE", "err/CASE"): they are
    stored packed into one byte buffer with a JSON index (one zip member per array
    would double the file)."""
    import json
    with np.load(path) as f:
        blob, index = f["blob"], json.loads(str(f["index"]))
    out = {}
    for key, (dtype, shape, start, stop) in index.items():
        if key.startswith("err/"):
            out[key] = np.array(dtype)
        else:
            out[key] = blob[start:stop].view(dtype).reshape(shape)
    return out


def _same(got, want, case):
    if isinstance(want, tuple):
        assert isinstance(got, tuple), f"{case}: TensorFlow raised {want[1]!r}, nbdata returned"
        # nbdata adds libjpeg's reason to TensorFlow's JPEG message, in parentheses
        assert got[1] == want[1] or got[1].startswith(want[1].rstrip(".") + " ("), \
            (case, got[1], want[1])
        return
    assert not isinstance(got, tuple), f"{case}: nbdata raised {got[1]!r}"
    assert got.shape == want.shape and got.dtype == want.dtype, \
        (case, got.shape, got.dtype, want.shape, want.dtype)
    assert np.array_equal(got, want), case


def _recorded_outcome(recorded, case):
    if f"out/{case}" in recorded:
        return recorded[f"out/{case}"]
    return ("error", str(recorded[f"err/{case}"]))


@pytest.mark.parametrize("case, name, op, kwargs", cases(), ids=[c[0] for c in cases()])
def test_outputs_equal_recorded_tensorflow(recorded, case, name, op, kwargs):
    pytest.importorskip("PIL")
    pytest.importorskip("simplejpeg")
    if case in _DIFFERENT:
        pytest.skip("a known difference, tested on its own")
    data = recorded[f"in/{name}"].tobytes()
    _same(_outcome(lambda: _nd_call(op, data, kwargs)), _recorded_outcome(recorded, case), case)


def test_outputs_equal_live_tensorflow(recorded):
    tf = pytest.importorskip("tensorflow")
    for case, name, op, kwargs in cases():
        if case in _DIFFERENT:
            continue
        data = recorded[f"in/{name}"].tobytes()
        _same(_outcome(lambda: _nd_call(op, data, kwargs)),
              _outcome(lambda: _tf_call(tf, op, data, kwargs)), case)


# ------------------------------------------------------------------ the items of the issue

def _input(recorded, name):
    return recorded[f"in/{name}"].tobytes()


def test_truncated_jpeg_errors_are_tf_errors(recorded):
    """A JPEG cut before its scan failed with a bare KeyError(-1) from the codec when
    try_recover_truncated was set; TensorFlow raises InvalidArgumentError either way."""
    pytest.importorskip("simplejpeg")
    for name in ("jpeg_cut_header", "jpeg_cut_sos"):
        for rec in (False, True):
            with pytest.raises(InvalidArgumentError, match="Invalid JPEG data") as info:
                nd.image.decode_jpeg(_input(recorded, name), try_recover_truncated=rec)
            assert info.value.op == "DecodeJpeg"
    cut = _input(recorded, "jpeg_cut_scan")
    with pytest.raises(InvalidArgumentError, match="Invalid JPEG data"):
        nd.image.decode_jpeg(cut)
    # TensorFlow keeps the rows read before the data ends; nbdata says it cannot
    with pytest.raises(UnimplementedError, match="acceptable_fraction"):
        nd.image.decode_jpeg(cut, acceptable_fraction=0.5)


def test_recovered_jpeg_keeps_the_rows_before_the_damage(recorded):
    """With try_recover_truncated, the rows of the whole MCU rows before the cut equal
    TensorFlow's (the damaged band after them does not: see decode_jpeg)."""
    pytest.importorskip("simplejpeg")
    got = nd.image.decode_jpeg(_input(recorded, "jpeg_cut_scan"), try_recover_truncated=True)
    want = recorded["out/jpeg_cut_scan/jpeg/True"]
    assert got.shape == want.shape == (24, 40, 3)
    assert np.array_equal(got[:15], want[:15])


def test_truncated_jpeg_inside_map_names_the_op(recorded):
    pytest.importorskip("simplejpeg")
    blobs = [_input(recorded, "jpeg"), _input(recorded, "jpeg_cut_sos")]
    ds = nd.Dataset.from_tensor_slices(np.array(blobs, dtype=object)).map(
        lambda r: nd.image.decode_jpeg(r, try_recover_truncated=True))
    for compiled in (True, False):
        it = iter(ds.compile()) if compiled else iter(ds)
        assert next(it).shape == (24, 40, 3)
        with pytest.raises(InvalidArgumentError, match="Invalid JPEG data") as info:
            next(it)
        assert "decode_jpeg" in str(info.value) or info.value.op == "DecodeJpeg"


@pytest.mark.parametrize("name", ["jpeg_zeroed", "jpeg_flipped"])
def test_jpeg_that_libjpeg_only_warns_about_decodes(recorded, name):
    """50 zeroed scan bytes or one flipped scan byte: TensorFlow decodes with a libjpeg
    warning; nbdata refused them (libjpeg-turbo's strict mode)."""
    pytest.importorskip("simplejpeg")
    data = _input(recorded, name)
    got = nd.image.decode_jpeg(data)
    assert np.array_equal(got, recorded[f"out/{name}/jpeg/"])
    assert not np.array_equal(got, nd.image.decode_jpeg(_input(recorded, "jpeg")))


def test_decode_jpeg_reads_png_and_gif_as_tensorflow_does(recorded):
    pytest.importorskip("PIL")
    rgba = nd.image.decode_jpeg(_input(recorded, "rgba8"))
    assert rgba.shape == (5, 7, 4) and rgba.dtype == np.uint8     # alpha kept, channels=0
    assert np.array_equal(rgba, recorded["out/rgba8/jpeg/0"])
    gif = nd.image.decode_jpeg(_input(recorded, "single"))
    assert gif.shape == (10, 12, 3)
    with pytest.raises(InvalidArgumentError, match="Got 3 frames, but animated gifs"):
        nd.image.decode_jpeg(_input(recorded, "anim"))
    with pytest.raises(InvalidArgumentError, match="JPEG does not support 4 channels"):
        nd.image.decode_jpeg(_input(recorded, "jpeg"), channels=4)
    with pytest.raises(InvalidArgumentError, match="Op used: DecodeJpeg"):
        nd.image.decode_jpeg(_input(recorded, "bmp24"))


def test_gif_frames_composite_as_tensorflow_does(recorded):
    pytest.importorskip("PIL")
    frames = nd.image.decode_gif(_input(recorded, "anim_trans"))
    assert frames.shape == (3, 10, 12, 3) and frames.dtype == np.uint8
    assert np.array_equal(frames, recorded["out/anim_trans/gif"])
    # a frame cut short: the whole frames before it, as TensorFlow returns them
    cut = nd.image.decode_gif(_input(recorded, "cut_frame"))
    assert cut.shape == (2, 10, 12, 3)
    assert np.array_equal(cut, recorded["out/cut_frame/gif"])
    assert nd.image.decode_image(_input(recorded, "anim"), expand_animations=False).shape == \
        (10, 12, 3)


def test_sixteen_bit_color_with_gamma_to_gray_is_refused(recorded):
    """libpng's 16-bit gamma tables are not reproduced: refused, not approximated."""
    pytest.importorskip("PIL")
    png = _with_chunk(_input(recorded, "rgb16"), b"sRGB", b"\x00")
    with pytest.raises(UnimplementedError, match="declares a gamma"):
        nd.image.decode_png(png, channels=1)
    assert nd.image.decode_png(png, channels=3, dtype=np.uint16).shape == (5, 7, 3)


def test_argument_errors():
    with pytest.raises(InvalidArgumentError, match="`channels` must be 0, 1, 3 or 4 but got 2"):
        nd.image.decode_png(b"x", channels=2)
    with pytest.raises(InvalidArgumentError, match="`dtype` for `DecodePng` must be"):
        nd.image.decode_png(b"x", dtype=np.float32)
    with pytest.raises(InvalidArgumentError, match="Input is empty"):
        nd.image.decode_bmp(b"")
    with pytest.raises(TypeError, match="contents must be bytes"):
        nd.image.decode_png([b"x", 3])


def _run(ds, fusion):
    if not fusion:
        options = nd.Options()
        options.fusion = False
        return list(ds.with_options(options))
    return list(ds.compile())


@pytest.mark.parametrize("op, names, kwargs, spec", [
    ("decode_png", ["rgba8", "pal_trns", "rgba16"], {"channels": 4, "dtype": np.uint16},
     nd.TensorSpec((None, None, 4), np.uint16)),
    ("decode_gif", ["anim", "single", "anim_trans"], {},
     nd.TensorSpec((None, None, None, 3), np.uint8)),
    ("decode_bmp", ["bmp24", "bmp32", "bmp_odd"], {"channels": 3},
     nd.TensorSpec((None, None, 3), np.uint8)),
    ("decode_image", ["bmp24", "anim", "rgb8", "jpeg"],
     {"dtype": np.float32, "expand_animations": False},
     nd.TensorSpec((None, None, None), np.float32)),
    ("decode_jpeg", ["jpeg", "rgb8", "single"], {"channels": 3},
     nd.TensorSpec((None, None, 3), np.uint8)),
])
def test_decoders_inside_map_are_record_kernels(recorded, op, names, kwargs, spec):
    pytest.importorskip("PIL")
    pytest.importorskip("simplejpeg")
    blobs = [_input(recorded, n) for n in names]
    fn = getattr(nd.image, op)
    ds = nd.Dataset.from_tensor_slices(np.array(blobs, dtype=object)).map(
        lambda r: fn(r, **kwargs))
    assert ds.element_spec == spec
    assert op in ds.compile().explain().split("== record kernels ==")[1]
    want = [fn(b, **kwargs) for b in blobs]
    for fusion in (True, False):
        got = _run(ds, fusion)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and np.array_equal(g, w)


def test_bad_image_inside_map_names_the_op_and_ignore_errors_skips_it(recorded):
    pytest.importorskip("PIL")
    blobs = [_input(recorded, "rgb8"), _input(recorded, "bmp24"), _input(recorded, "g8")]
    ds = nd.Dataset.from_tensor_slices(np.array(blobs, dtype=object)).map(nd.image.decode_png)
    for fusion in (True, False):
        with pytest.raises(InvalidArgumentError, match="Op used: DecodePng"):
            _run(ds, fusion)
        kept = _run(ds.ignore_errors(), fusion)
        assert [k.shape for k in kept] == [(5, 7, 3), (5, 7, 1)]


def test_batch_then_decode(recorded):
    pytest.importorskip("PIL")
    blobs = [_input(recorded, n) for n in ("rgb8", "rgba8", "pal", "rgb8_trns")]
    ds = nd.Dataset.from_tensor_slices(np.array(blobs, dtype=object)).batch(2).map(
        lambda r: nd.image.decode_png(r, channels=3))
    for fusion in (True, False):
        got = _run(ds, fusion)
        assert [g.shape for g in got] == [(2, 5, 7, 3), (2, 5, 7, 3)]
        assert np.array_equal(got[1][0], nd.image.decode_png(blobs[2], channels=3))


def test_without_pillow_the_error_names_the_extra(monkeypatch, recorded):
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(UnimplementedError, match=r"nbdata\[image\]"):
        nd.image.decode_png(_input(recorded, "rgb8"))
    from nbdata.primitives import codecs
    assert not codecs.available()


def write_fixture(path) -> None:
    """Runs every case on TensorFlow and writes inputs and outcomes to ``path`` (see
    :func:`load_fixture`; equal outputs are stored once)."""
    import json
    import tensorflow as tf
    inputs = make_inputs()
    parts, index, seen, size = [], {}, {}, 0

    def put(key, array):
        nonlocal size
        raw = np.ascontiguousarray(array).tobytes()
        ident = (array.dtype.str, raw)
        if ident not in seen:
            seen[ident] = (size, size + len(raw))
            parts.append(raw)
            size += len(raw)
        index[key] = (array.dtype.str, list(array.shape), *seen[ident])

    for name, data in inputs.items():
        put(f"in/{name}", np.frombuffer(data, np.uint8))
    for case, name, op, kwargs in cases():
        result = _outcome(lambda: _tf_call(tf, op, inputs[name], kwargs))
        if isinstance(result, tuple):
            index[f"err/{case}"] = (result[1], [], 0, 0)
        else:
            put(f"out/{case}", result)
    np.savez_compressed(path, blob=np.frombuffer(b"".join(parts), np.uint8),
                        index=np.array(json.dumps(index)))


if __name__ == "__main__":
    write_fixture(sys.argv[1])
