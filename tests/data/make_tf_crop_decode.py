"""What TensorFlow 2.21 gives for the cases of tests/test_image_crop_decode.py:
``tf.io.extract_jpeg_shape``, ``tf.io.decode_and_crop_jpeg`` (pixels of windows chosen
to hit libjpeg-turbo's partial-decode edges, and errors) and
``tf.image.stateless_sample_distorted_bounding_box`` (its deterministic cases and its
errors), written to tests/data/tf_crop_decode.npz:

    /root/.venvs/nbdata-perf/bin/python tests/data/make_tf_crop_decode.py

(TensorFlow, simplejpeg and Pillow installed; nbdata is not needed). The JPEGs are
stored in the file, so the tests do not depend on an encoder; ``cases()`` and
``SDBB_CASES`` are what the tests read (the ``cases`` JSON in the file), and they run
the same cases against the live TensorFlow when it is importable.
"""

from __future__ import annotations

import io
import json
import pathlib
import sys

import numpy as np

OUT = pathlib.Path(__file__).with_name("tf_crop_decode.npz")


def _image(h, w, c=3, seed=0):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = (x * 255 / max(w - 1, 1) * 0.6 + y * 255 / max(h - 1, 1) * 0.4)[..., None]
    return np.clip(base + rng.normal(0, 40, (h, w, c)) + np.arange(c) * 20, 0, 255).astype(
        np.uint8)


def _markers(data: bytes, rename_jfif=False, adobe_transform=None, drop_adobe=False) -> bytes:
    """``data`` with its JFIF marker renamed and its Adobe marker's transform set (one
    inserted after SOI when there is none) or renamed."""
    out = bytearray(data)
    pos, adobe = 2, False
    while out[pos] == 0xFF and out[pos + 1] not in (0xDA, 0xD9):
        length = (out[pos + 2] << 8) | out[pos + 3]
        body = pos + 4
        if out[pos + 1] == 0xE0 and rename_jfif and out[body:body + 5] == b"JFIF\0":
            out[body] = ord("X")
        if out[pos + 1] == 0xEE and out[body:body + 5] == b"Adobe":
            adobe = True
            if drop_adobe:
                out[body] = ord("X")
            elif adobe_transform is not None:
                out[body + 11] = adobe_transform
        pos += 2 + length
    if adobe_transform is not None and not adobe:
        out[2:2] = b"\xff\xee\x00\x0eAdobe\x00\x64\x00\x00\x00\x00" + bytes([adobe_transform])
    return bytes(out)


def jpegs() -> dict:
    import simplejpeg
    import tensorflow as tf
    from PIL import Image

    def tf_jpeg(image, **kwargs):
        return tf.io.encode_jpeg(image, quality=90, **kwargs).numpy()

    c420 = tf_jpeg(_image(37, 53))
    cmyk = io.BytesIO()
    Image.fromarray(_image(17, 22, 4, seed=3), "CMYK").save(cmyk, format="JPEG", quality=90)
    return {
        "c420": c420,
        "c422": simplejpeg.encode_jpeg(_image(37, 53, seed=1), quality=90,
                                       colorsubsampling="422"),
        "c444": tf_jpeg(_image(19, 23, seed=2), chroma_downsampling=False),
        "gray": tf_jpeg(_image(21, 30, 1, seed=4)),
        "p420": tf_jpeg(_image(32, 45, seed=5), progressive=True),
        # c420 as an RGB JPEG (Adobe transform 0): subsampled components, no conversion.
        "rgb420": _markers(c420, rename_jfif=True, adobe_transform=0),
        "cmyk": cmyk.getvalue(),
        # The same CMYK data without its Adobe marker: TF's other CMYK formula.
        "cmyk_plain": _markers(cmyk.getvalue(), drop_adobe=True),
    }


def _windows(h, w, seed, count):
    """Windows at libjpeg-turbo's edge cases (an iMCU-aligned left column, an odd or even
    width ending inside, one or two columns wide, the right edge), then random ones."""
    rng = np.random.default_rng(seed)
    out = [[0, 0, h, w], [1, 16, h - 2, w - 17], [3, 16, min(9, h - 3), 1],
           [2, 16, 5, 2], [0, 17, 4, 3], [h - 4, 5, 4, w - 5], [4, 8, 6, 8], [5, 9, 6, 8],
           [1, 16, 6, 7]]
    out = [win for win in out if win[0] + win[2] <= h and win[1] + win[3] <= w
           and win[2] > 0 and win[3] > 0]
    while len(out) < count:
        y, x = int(rng.integers(0, h)), int(rng.integers(0, w))
        out.append([y, x, int(rng.integers(1, min(h - y, 12) + 1)),
                    int(rng.integers(1, min(w - x, 16) + 1))])
    return out[:count]


def cases() -> list:
    """``[id, jpeg, window, kwargs]`` of every recorded decode_and_crop_jpeg output; the
    sizes are those the decoded image has at each ratio (TensorFlow's)."""
    sizes = {"c420": (37, 53), "c422": (37, 53), "c444": (19, 23), "gray": (21, 30),
             "p420": (32, 45), "rgb420": (37, 53), "cmyk": (17, 22), "cmyk_plain": (17, 22)}
    plan = [("c420", 1, 0, "", True, 9), ("c420", 1, 3, "INTEGER_ACCURATE", True, 6),
            ("c420", 1, 1, "", True, 3), ("c420", 1, 0, "", False, 3),
            ("c420", 2, 0, "", True, 3), ("c420", 4, 3, "", True, 2),
            ("c422", 1, 0, "", True, 6), ("c422", 2, 0, "", True, 6),
            ("c422", 4, 0, "INTEGER_ACCURATE", True, 4), ("c422", 1, 1, "", False, 2),
            ("c444", 1, 0, "", True, 3), ("gray", 1, 0, "", True, 2),
            ("gray", 2, 3, "", True, 2), ("p420", 1, 0, "", True, 5),
            ("rgb420", 1, 0, "", True, 5), ("rgb420", 1, 1, "", True, 3),
            ("cmyk", 1, 0, "", True, 2), ("cmyk_plain", 1, 3, "", True, 2)]
    out = []
    for k, (name, ratio, channels, dct, fancy, count) in enumerate(plan):
        h, w = sizes[name]
        h, w = -(-h // ratio), -(-w // ratio)
        kwargs = {"channels": channels, "ratio": ratio, "dct_method": dct,
                  "fancy_upscaling": fancy}
        for j, window in enumerate(_windows(h, w, k, count)):
            out.append([f"{name}/r{ratio}/c{channels}/{dct or 'default'}/{fancy}/{j}", name,
                        window, kwargs])
    return out


# decode_and_crop_jpeg errors: [id, jpeg name (or a literal "bytes:..."), window, kwargs]
CROP_ERRORS = [
    ["below", "c420", [0, 0, 38, 53], {}],
    ["right", "c420", [0, 1, 37, 53], {}],
    ["negative_y", "c420", [-1, 0, 5, 5], {}],
    ["negative_x", "c420", [0, -1, 5, 5], {}],
    ["zero_height", "c420", [0, 0, 0, 5], {}],
    ["zero_width", "c420", [0, 0, 5, 0], {}],
    ["scaled_outside", "c420", [0, 0, 19, 28], {"ratio": 2}],
    ["three_values", "c420", [0, 0, 5], {}],
    ["five_values", "c420", [0, 0, 5, 5, 1], {}],
    ["two_dims", "c420", [[0, 0, 5, 5]], {}],
    ["garbage", "bytes:garbage", [0, 0, 1, 1], {}],
    ["empty", "bytes:", [0, 0, 1, 1], {}],
    ["four_channels", "c420", [0, 0, 1, 1], {"channels": 4}],
    ["two_channels", "c420", [0, 0, 1, 1], {"channels": 2}],
    ["ratio_three", "c420", [0, 0, 1, 1], {"ratio": 3}],
    ["cmyk_gray", "cmyk", [0, 0, 1, 1], {"channels": 1}],
    ["progressive_cut", "p420_cut", [0, 0, 2, 2], {}],
]

# stateless_sample_distorted_bounding_box: [id, image_size, dtype, boxes, kwargs], boxes
# as ``[values, shape]``.
BOX = [[0.1, 0.2, 0.8, 0.9], [1, 1, 4]]
NO_BOXES = [[], [1, 0, 4]]
SDBB_CASES = [
    ["whole_image", [100, 200, 3], "int32", BOX, {"area_range": [1.0, 1.0],
                                                  "aspect_ratio_range": [2.0, 2.0]}],
    ["whole_uint8", [100, 200, 3], "uint8", BOX, {"area_range": [1.0, 1.0],
                                                  "aspect_ratio_range": [2.0, 2.0]}],
    ["whole_int64", [60, 45, 1], "int64", BOX, {"area_range": [1.0, 1.0],
                                                "aspect_ratio_range": [0.75, 0.75]}],
    ["nothing_covers", [100, 200, 3], "int32", BOX, {"min_object_covered": 1.0,
                                                     "area_range": [0.05, 0.1]}],
    ["area_reversed", [100, 200, 3], "int16", BOX, {"area_range": [0.9, 0.5]}],
    ["no_boxes_image", [50, 80, 3], "int32", NO_BOXES,
     {"use_image_if_no_bounding_boxes": True, "area_range": [1.0, 1.0],
      "aspect_ratio_range": [1.6, 1.6]}],
    ["two_batches", [40, 40, 3], "int32", [[0.0, 0.0, 0.2, 0.2, 0.5, 0.5, 1.0, 1.0],
                                           [2, 1, 4]],
     {"area_range": [1.0, 1.0], "aspect_ratio_range": [1.0, 1.0]}],
    ["zero_height", [0, 200, 3], "int32", BOX, {}],
    ["one_attempt_too_wide", [10, 10, 3], "int8", BOX, {"max_attempts": 1,
                                                        "aspect_ratio_range": [20.0, 30.0]}],
    # errors
    ["covered_negative", [100, 200, 3], "int32", BOX, {"min_object_covered": -0.1}],
    ["aspect_zero", [100, 200, 3], "int32", BOX, {"aspect_ratio_range": [0.0, 1.0]}],
    ["aspect_one_value", [100, 200, 3], "int32", BOX, {"aspect_ratio_range": [1.0]}],
    ["area_zero", [100, 200, 3], "int32", BOX, {"area_range": [0.0, 1.0]}],
    ["area_above_one", [100, 200, 3], "int32", BOX, {"area_range": [0.5, 1.5]}],
    ["area_one_value", [100, 200, 3], "int32", BOX, {"area_range": [0.5]}],
    ["attempts_zero", [100, 200, 3], "int32", BOX, {"max_attempts": 0}],
    ["size_two", [100, 200], "int32", BOX, {}],
    ["size_2d", [[100, 200, 3]], "int32", BOX, {}],
    ["boxes_2d", [100, 200, 3], "int32", [[0.1, 0.2, 0.8, 0.9], [1, 4]], {}],
    ["boxes_three", [100, 200, 3], "int32", [[0.1, 0.2, 0.8], [1, 1, 3]], {}],
    ["no_boxes", [100, 200, 3], "int32", NO_BOXES, {}],
    ["box_outside", [100, 200, 3], "int32", [[0.1, 0.2, 1.8, 0.9], [1, 1, 4]], {}],
    ["negative_height", [-1, 200, 3], "int32", BOX, {}],
    ["float_size", [100.0, 200.0, 3.0], "float32", BOX, {}],
]


def boxes_of(boxes) -> np.ndarray:
    return np.array(boxes[0], np.float32).reshape(boxes[1])


def _message(error: Exception) -> str:
    text = str(error)
    if "}} " in text:
        text = text.split("}} ", 1)[1]
    return text.split(" [Op:")[0]


def tf_crop(tf, data, window, kwargs):
    try:
        return tf.io.decode_and_crop_jpeg(data, window, **kwargs).numpy()
    except Exception as e:  # noqa: BLE001 - recorded
        return {"error": type(e).__name__, "message": _message(e)}


def tf_sdbb(tf, size, dtype, boxes, kwargs):
    try:
        out = tf.image.stateless_sample_distorted_bounding_box(
            np.array(size, dtype), boxes_of(boxes), seed=[1, 2], **kwargs)
        return [x.numpy() for x in out]
    except Exception as e:  # noqa: BLE001 - recorded
        return {"error": type(e).__name__, "message": _message(e)}


def tf_shape(tf, data, output_type):
    try:
        return tf.io.extract_jpeg_shape(data, output_type=output_type).numpy()
    except Exception as e:  # noqa: BLE001 - recorded
        return {"error": type(e).__name__, "message": _message(e)}


def main(path=OUT) -> None:
    import tensorflow as tf

    images = jpegs()
    images["p420_cut"] = images["p420"][:len(images["p420"]) // 2]
    arrays = {f"jpeg_{k}": np.frombuffer(v, np.uint8) for k, v in images.items()}
    record = {"crops": [], "crop_errors": [], "shapes": [], "sdbb": []}
    values = []
    for case_id, name, window, kwargs in cases():
        out = tf_crop(tf, images[name], window, kwargs)
        assert isinstance(out, np.ndarray), (case_id, out)
        record["crops"].append([case_id, name, window, kwargs, list(out.shape)])
        values.append(out.reshape(-1))
    arrays["crop_values"] = np.concatenate(values)

    def data_of(name):
        return name[6:].encode("latin-1") if name.startswith("bytes:") else images[name]

    for case_id, name, window, kwargs in CROP_ERRORS:
        out = tf_crop(tf, data_of(name), window, kwargs)
        assert isinstance(out, dict), (case_id, out)
        record["crop_errors"].append([case_id, name, window, kwargs, out])
    for name in list(images) + ["bytes:garbage", "bytes:", "bytes:\xff\xd8\xff"]:
        for output_type in ("int32", "int64"):
            out = tf_shape(tf, data_of(name), getattr(tf, output_type))
            record["shapes"].append([name, output_type, out if isinstance(out, dict) else
                                     [str(out.dtype), out.tolist()]])
    for case_id, size, dtype, boxes, kwargs in SDBB_CASES:
        out = tf_sdbb(tf, size, dtype, boxes, kwargs)
        if not isinstance(out, dict):
            out = {"begin": [str(out[0].dtype), out[0].tolist()],
                   "size": [str(out[1].dtype), out[1].tolist()],
                   "bboxes": [str(out[2].dtype), [float(v) for v in out[2].reshape(-1)]]}
        record["sdbb"].append([case_id, size, dtype, boxes, kwargs, out])
    # decode_jpeg of the CMYK JPEG without an Adobe marker (TF's (255-K)(255-C) formula).
    arrays["cmyk_plain_decoded"] = tf.io.decode_jpeg(images["cmyk_plain"]).numpy()
    arrays["cases"] = np.array(json.dumps(record, default=float))
    np.savez_compressed(path, **arrays)


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
