"""extract_jpeg_shape, decode_and_crop_jpeg and sample_distorted_bounding_box: TensorFlow's
shapes, pixels and errors, and the TF-ResNet crop chain (extract_jpeg_shape ->
sample_distorted_bounding_box -> decode_and_crop_jpeg -> resize -> flip) as a record
kernel plus one fused kernel, with the eager values.

``tests/data/tf_crop_decode.npz`` holds the JPEGs and what TensorFlow 2.21 returns for
them (``tests/data/make_tf_crop_decode.py`` writes it); with TensorFlow importable the
tests compare against it live as well.
"""

import json
import os
import pathlib
import sys

import numpy as np
import pytest

import nbdata as nd
from nbdata.errors import InvalidArgumentError, UnimplementedError
from nbdata.primitives import jpeg

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "data"))
import make_tf_crop_decode as recorder
from equivalence import fusing, reference

pytest.importorskip("simplejpeg")

FIXTURE = pathlib.Path(__file__).parent / "data" / "tf_crop_decode.npz"
DATA = np.load(FIXTURE)
RECORD = json.loads(str(DATA["cases"]))
JPEGS = {k[5:]: DATA[k].tobytes() for k in DATA.files if k.startswith("jpeg_")}

try:
    import tensorflow as tf
except ImportError:
    tf = None


def _crops():
    out, offset = [], 0
    values = DATA["crop_values"]
    for case_id, name, window, kwargs, shape in RECORD["crops"]:
        size = int(np.prod(shape))
        out.append((case_id, name, window, kwargs,
                    values[offset:offset + size].reshape(shape)))
        offset += size
    return out


CROPS = _crops()


def _data(name):
    return name[6:].encode("latin-1") if name.startswith("bytes:") else JPEGS[name]


def _tf_error(expected, error):
    assert type(error).__name__ == expected["error"]
    first_line = expected["message"].split("\n")[0]
    assert str(error).startswith(first_line.rstrip(".")), (str(error), first_line)


# ------------------------------------------------------------------ extract_jpeg_shape

@pytest.mark.parametrize("name, output_type, want", RECORD["shapes"],
                         ids=[f"{n[:12]}-{t}" for n, t, _ in RECORD["shapes"]])
def test_extract_jpeg_shape_matches_tensorflow(name, output_type, want):
    data = _data(name)
    if tf is not None:
        live = recorder.tf_shape(tf, data, getattr(tf, output_type))
        assert (live if isinstance(live, dict) else [str(live.dtype), live.tolist()]) == want
    if isinstance(want, dict):
        with pytest.raises(InvalidArgumentError) as e:
            nd.image.extract_jpeg_shape(data, output_type=np.dtype(output_type))
        _tf_error(want, e.value)
        assert e.value.message == want["message"]   # "Invalid JPEG data, size N"
        return
    got = nd.image.extract_jpeg_shape(data, output_type=np.dtype(output_type))
    assert str(got.dtype) == want[0] and got.tolist() == want[1]


def test_extract_jpeg_shape_reads_the_header_only():
    data = JPEGS["c420"]
    sos = data.find(b"\xff\xda")
    end = sos + 2 + int.from_bytes(data[sos + 2:sos + 4], "big")
    # Cut after the scan header: a shape (TF's libjpeg reads no further)...
    assert nd.image.extract_jpeg_shape(data[:end]).tolist() == [37, 53, 3]
    # ... cut inside it or before: libjpeg's header read fails.
    for cut in (end - 1, sos, 20):
        with pytest.raises(InvalidArgumentError, match=f"^Invalid JPEG data, size {cut}$"):
            nd.image.extract_jpeg_shape(data[:cut])
    assert nd.image.extract_jpeg_shape(data, np.int64).dtype == np.int64
    with pytest.raises(InvalidArgumentError, match="'output_type' of float is not in the list"):
        nd.image.extract_jpeg_shape(data, np.float32)
    with pytest.raises(InvalidArgumentError, match=r"contents must be scalar, got shape \[2\]"):
        nd.image.extract_jpeg_shape([data, data])


# ------------------------------------------------------------------ decode_and_crop_jpeg

@pytest.mark.parametrize("case_id, name, window, kwargs, want", CROPS,
                         ids=[c[0] for c in CROPS])
def test_decode_and_crop_jpeg_pixels_equal_tensorflow(case_id, name, window, kwargs, want):
    data = JPEGS[name]
    if tf is not None:
        np.testing.assert_array_equal(recorder.tf_crop(tf, data, window, kwargs), want)
    got = nd.image.decode_and_crop_jpeg(data, window, **kwargs)
    assert got.dtype == np.uint8 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    # The record kernel's path, which decodes before it knows the window: the image's
    # components when it is 4:2:0 or 4:2:2, upsampled and converted for the window.
    request = jpeg._JpegRequest()
    request.options = jpeg.JpegOptions(op="DecodeAndCropJpeg", **kwargs)
    _, planes, info = jpeg._jpeg_parts(data, request)
    np.testing.assert_array_equal(
        jpeg._crop_decoded(planes, info, np.array(window, np.int32), kwargs["channels"]), want)


def test_partial_decode_differs_from_a_crop_of_the_full_decode_where_tf_does():
    # TF's partial decode upsamples the window's chroma on its own: its last column
    # (an odd column inside the image) differs from decode_jpeg's by a few levels.
    data = JPEGS["c420"]
    recorded = {c[0]: c[4] for c in CROPS}
    full = nd.image.decode_jpeg(data)
    want = recorded["c420/r1/c0/default/True/6"]   # window [4, 8, 6, 8]: last column
    crop = full[4:10, 8:16]
    assert not np.array_equal(crop[:, -1], want[:, -1])
    np.testing.assert_array_equal(crop[:, :-1], want[:, :-1])
    want = recorded["c420/r1/c0/default/True/8"]   # window [1, 16, 6, 7]: first column
    crop = full[1:7, 16:23]
    assert not np.array_equal(crop[:, 0], want[:, 0])
    np.testing.assert_array_equal(crop[:, 1:], want[:, 1:])
    want = recorded["c420/r1/c0/default/True/7"]   # window [5, 9, 6, 8]: neither
    np.testing.assert_array_equal(full[5:11, 9:17], want)


@pytest.mark.parametrize("name", ["c420", "c422", "p420", "gray", "rgb420", "cmyk"])
@pytest.mark.parametrize("kwargs", [{}, {"ratio": 2, "channels": 3},
                                    {"dct_method": "INTEGER_ACCURATE", "fancy_upscaling": False},
                                    {"ratio": 4}])
def test_the_whole_image_as_window_is_decode_jpeg(name, kwargs):
    data = JPEGS[name]
    full = nd.image.decode_jpeg(data, **kwargs)
    h, w = full.shape[:2]
    np.testing.assert_array_equal(nd.image.decode_and_crop_jpeg(data, [0, 0, h, w], **kwargs),
                                  full)
    request = jpeg._JpegRequest()
    request.options = jpeg.JpegOptions(op="DecodeAndCropJpeg", **kwargs)
    _, planes, info = jpeg._jpeg_parts(data, request)
    np.testing.assert_array_equal(jpeg._crop(planes, info, 0, 0, h, w), full)


@pytest.mark.parametrize("case", RECORD["crop_errors"], ids=[c[0] for c in RECORD["crop_errors"]])
def test_decode_and_crop_jpeg_errors_match_tensorflow(case):
    _, name, window, kwargs, want = case
    data = JPEGS["p420"][:len(JPEGS["p420"]) // 2] if name == "p420_cut" else _data(name)
    if tf is not None:
        assert recorder.tf_crop(tf, data, window, kwargs) == want
    with pytest.raises(InvalidArgumentError) as e:
        nd.image.decode_and_crop_jpeg(data, window, **kwargs)
    _tf_error(want, e.value)


def test_decode_and_crop_jpeg_argument_errors():
    data = JPEGS["c420"]
    with pytest.raises(TypeError, match="crop_window must hold integers"):
        nd.image.decode_and_crop_jpeg(data, [0.5, 0, 2, 2])
    with pytest.raises(InvalidArgumentError,
                       match=r"^`contents` must be scalar but got shape\[2\]"):
        nd.image.decode_and_crop_jpeg([data, data], [0, 0, 1, 1])
    with pytest.raises(InvalidArgumentError, match="Unknown image file format"):
        nd.image.decode_and_crop_jpeg(nd.io.encode_example({"x": 1}), [0, 0, 1, 1])
    import zlib
    png = (b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00\x00\x00\x01" * 2
           + b"\x08\x00\x00\x00\x00" + zlib.crc32(b"IHDR").to_bytes(4, "big"))
    with pytest.raises(InvalidArgumentError,
                       match="^DecodeAndCropJpeg operation can run on JPEG only, but detected PNG"):
        nd.image.decode_and_crop_jpeg(png, [0, 0, 1, 1])
    window_error = "Invalid JPEG data or crop window"
    with pytest.raises(InvalidArgumentError, match=window_error) as e:
        nd.image.decode_and_crop_jpeg(data, np.array([30, 40, 8, 14], np.int64))
    assert "y=30, x=40, height=8, width=14" in e.value.message and "37x53" in e.value.message


def test_truncated_jpegs():
    base = JPEGS["c420"]
    cut = base[:len(base) * 2 // 3]
    # TF decodes a window above the cut and fails below it; nbdata cannot tell which.
    with pytest.raises(UnimplementedError, match="try_recover_truncated=True"):
        nd.image.decode_and_crop_jpeg(cut, [0, 0, 2, 2])
    recovered = nd.image.decode_and_crop_jpeg(cut, [0, 0, 37, 53], try_recover_truncated=True)
    np.testing.assert_array_equal(recovered, nd.image.decode_jpeg(cut, try_recover_truncated=True))


def test_decode_jpeg_of_a_cmyk_jpeg_without_adobe_marker_equals_tensorflow():
    # TF converts CMYK without an Adobe marker as R = (255 - K) * (255 - C) / 255.
    data = JPEGS["cmyk_plain"]
    want = DATA["cmyk_plain_decoded"]
    if tf is not None:
        np.testing.assert_array_equal(tf.io.decode_jpeg(data).numpy(), want)
    np.testing.assert_array_equal(nd.image.decode_jpeg(data), want)
    assert not np.array_equal(nd.image.decode_jpeg(JPEGS["cmyk"]), want)


# ------------------------------------------------------------ sample_distorted_bounding_box

def _sdbb(size, dtype, boxes, kwargs, seed=(7, 3)):
    return nd.image.sample_distorted_bounding_box(np.array(size, dtype),
                                                  recorder.boxes_of(boxes), seed=seed, **kwargs)


@pytest.mark.parametrize("case", RECORD["sdbb"], ids=[c[0] for c in RECORD["sdbb"]])
def test_sample_distorted_bounding_box_matches_tensorflow(case):
    _, size, dtype, boxes, kwargs, want = case
    if tf is not None:
        live = recorder.tf_sdbb(tf, size, dtype, boxes, kwargs)
        if "error" in want:
            assert live == want
        else:
            np.testing.assert_array_equal(live[1], np.array(want["size"][1], live[1].dtype))
    if "error" in want:
        with pytest.raises(InvalidArgumentError) as e:
            _sdbb(size, dtype, boxes, kwargs)
        _tf_error(want, e.value)
        return
    # Deterministic cases: every seed gives TF's box.
    for seed in [(7, 3), (0, 0), (123, 99)]:
        begin, size_out, bboxes = _sdbb(size, dtype, boxes, kwargs, seed)
        for got, key in ((begin, "begin"), (size_out, "size"), (bboxes, "bboxes")):
            assert str(got.dtype) == want[key][0]
            np.testing.assert_array_equal(got.reshape(-1), np.array(want[key][1], got.dtype))
        assert bboxes.shape == (1, 1, 4)


def test_sample_distorted_bounding_box_keeps_tensorflows_constraints():
    height, width = 120, 173
    boxes = np.array([[[0.1, 0.2, 0.5, 0.6], [0.4, 0.05, 0.95, 0.3]]], np.float32)
    rects = [(int(np.float32(b[1]) * np.float32(width)), int(np.float32(b[0]) * np.float32(height)),
              int(np.float32(b[3]) * np.float32(width)), int(np.float32(b[2]) * np.float32(height)))
             for b in boxes[0]]
    offsets, whole = set(), 0
    for counter in range(400):
        begin, size, bbox = nd.image.sample_distorted_bounding_box(
            np.array([height, width, 3], np.int32), boxes, seed=(11, counter),
            min_object_covered=0.3, aspect_ratio_range=(0.5, 2.0), area_range=(0.1, 0.9))
        y, x, h, w = int(begin[0]), int(begin[1]), int(size[0]), int(size[1])
        assert begin[2] == 0 and size[2] == -1
        np.testing.assert_array_equal(bbox[0, 0], np.array(
            [np.float32(y) / np.float32(height), np.float32(x) / np.float32(width),
             np.float32(y + h) / np.float32(height), np.float32(x + w) / np.float32(width)],
            np.float32))
        if (y, x, h, w) == (0, 0, height, width):
            whole += 1
            continue
        area = np.float32(w * h)
        assert np.float32(0.1) * np.float32(width) * np.float32(height) <= area
        assert area <= np.float32(0.9) * np.float32(width) * np.float32(height)
        assert (w - 0.5) / h <= 2.0 and (w + 0.5) / h >= 0.5     # w = round(h * aspect)
        assert 0 <= y < height - h or (y == 0 and h == height)    # TF's Uniform(H - h)
        assert 0 <= x < width - w or (x == 0 and w == width)
        covered = [max(0, min(x + w, r[2]) - max(x, r[0])) * max(0, min(y + h, r[3]) - max(y, r[1]))
                   / ((r[2] - r[0]) * (r[3] - r[1])) for r in rects]
        assert max(covered) >= 0.3 - 1e-6
        offsets.add((y, x))
    assert len(offsets) > 300 and whole < 40
    again = nd.image.sample_distorted_bounding_box(
        np.array([height, width, 3], np.int32), boxes, seed=(11, 5), min_object_covered=0.3,
        aspect_ratio_range=(0.5, 2.0), area_range=(0.1, 0.9))
    first = nd.image.sample_distorted_bounding_box(
        np.array([height, width, 3], np.int32), boxes, seed=(11, 5), min_object_covered=0.3,
        aspect_ratio_range=(0.5, 2.0), area_range=(0.1, 0.9))
    for a, b in zip(again, first):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(TypeError, match=r"seed=\(seed, counter\) is required"):
        nd.image.sample_distorted_bounding_box(np.array([10, 10, 3]), boxes)


def test_fallback_after_max_attempts_is_the_whole_image():
    # One attempt whose aspect ratio cannot fit: the whole image, whatever the seed.
    for counter in range(20):
        begin, size, bbox = nd.image.sample_distorted_bounding_box(
            np.array([30, 40, 3], np.int64), np.zeros((1, 0, 4)), seed=(1, counter),
            aspect_ratio_range=(50.0, 60.0), max_attempts=3,
            use_image_if_no_bounding_boxes=True)
        assert begin.tolist() == [0, 0, 0] and size.tolist() == [30, 40, -1]
        assert bbox.tolist() == [[[0.0, 0.0, 1.0, 1.0]]]


# ------------------------------------------------------------------ inside Dataset.map

FEATURES = {"image": nd.io.FixedLenFeature([], nd.string),
            "label": nd.io.FixedLenFeature([], np.int64)}
BOXES = np.array([[[0.05, 0.1, 0.9, 0.95]]], np.float32)


def _resnet_crop(i, record):
    example = nd.io.parse_single_example(record, FEATURES)
    image_buffer = example["image"]
    shape = nd.image.extract_jpeg_shape(image_buffer)
    begin, size, _ = nd.image.sample_distorted_bounding_box(
        shape, BOXES, seed=(5, i), min_object_covered=0.1, aspect_ratio_range=(0.75, 1.33),
        area_range=(0.05, 1.0), max_attempts=100, use_image_if_no_bounding_boxes=True)
    offset_y, offset_x, _ = begin
    target_height, target_width, _ = size
    image = nd.image.decode_and_crop_jpeg(image_buffer,
                                          [offset_y, offset_x, target_height, target_width],
                                          channels=3)
    image = nd.image.resize(image, (16, 16))
    image = nd.image.random_flip_left_right(image, (6, i))
    return image, example["label"]


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """Two files of JPEG Examples (4:2:0, 4:2:2, progressive, RGB, 4:4:4; sizes apart):
    nine good ones, and the same with a sixth record that is not a JPEG."""
    folder = tmp_path_factory.mktemp("crop")
    blobs = [JPEGS["c420"], JPEGS["c422"], JPEGS["p420"], JPEGS["rgb420"], JPEGS["c444"]] * 2
    blobs[5] = b"\xff\xd8 not a jpeg"
    paths = []
    for name, rows in (("good", [i for i in range(10) if i != 5]), ("bad", range(10))):
        path = str(folder / f"{name}.tfrecord")
        with nd.io.TFRecordWriter(path) as writer:
            for i in rows:
                writer.write(nd.io.encode_example({"image": blobs[i], "label": i}))
        paths.append(path)
    return paths, blobs


def test_the_resnet_crop_chain_fuses_with_the_eager_values(records):
    (good, bad), blobs = records
    ds = nd.TFRecordDataset(good).enumerate().map(_resnet_crop).batch(3)
    pipe = fusing(ds).compile()
    plan = pipe.explain()
    assert ("decode(extract_jpeg_shape + decode_and_crop_jpeg(channels=3, ratio=1) of "
            "component 1)") in plan
    assert "[Numba-compiled call]" in plan and "calls _resnet_crop" not in plan
    assert pipe.fused_stages()
    got = list(pipe)
    assert pipe.stats().fallback_rows == 0
    want = list(reference(ds))
    assert [y.tolist() for _, y in got] == [[0, 1, 2], [3, 4, 6], [7, 8, 9]]
    for (gx, gy), (wx, wy) in zip(got, want):
        assert gx.dtype == wx.dtype == np.float32 and gx.shape == wx.shape == (3, 16, 16, 3)
        np.testing.assert_array_equal(gx, wx)
    # Each element is the eager ops' result (the element index is the seed counter).
    images = np.concatenate([x for x, _ in got])
    for j, i in enumerate([0, 1, 2, 3, 4, 6, 7, 8, 9]):
        data = blobs[i]
        begin, size, _ = nd.image.sample_distorted_bounding_box(
            nd.image.extract_jpeg_shape(data), BOXES, seed=(5, j), min_object_covered=0.1,
            use_image_if_no_bounding_boxes=True)
        image = nd.image.decode_and_crop_jpeg(data, [begin[0], begin[1], size[0], size[1]],
                                              channels=3)
        image = nd.image.random_flip_left_right(nd.image.resize(image, (16, 16)), (6, j))
        np.testing.assert_array_equal(images[j], image)
    # A record that is not a JPEG fails as extract_jpeg_shape fails on it, after the
    # batch before it (the same compiled kernel).
    it = iter(fusing(nd.TFRecordDataset(bad).enumerate().map(_resnet_crop).batch(3)).compile())
    assert next(it)[1].tolist() == [0, 1, 2]
    with pytest.raises(InvalidArgumentError, match="^Invalid JPEG data, size 13$"):
        next(it)
    kept = reference(nd.TFRecordDataset(bad).enumerate().map(_resnet_crop).ignore_errors())
    assert [int(y) for _, y in kept] == [0, 1, 2, 3, 4, 6, 7, 8, 9]


def test_a_window_map_is_a_record_kernel_with_the_eager_values():
    blobs = [JPEGS[k] for k in ("c420", "c422", "gray", "cmyk", "p420")]

    def crop(i, b):
        begin, size, _ = nd.image.sample_distorted_bounding_box(
            nd.image.extract_jpeg_shape(b), BOXES, seed=(9, i))
        return nd.image.decode_and_crop_jpeg(b, [begin[0], begin[1], size[0], size[1]])

    ds = nd.Dataset.from_tensor_slices(np.array(blobs, dtype=object)).enumerate().map(crop)
    plan = ds.compile().explain()
    assert "decode(extract_jpeg_shape + decode_and_crop_jpeg(channels=0, ratio=1)" in plan
    got = list(ds.compile())
    assert [g.shape[2] for g in got] == [3, 3, 1, 3, 3]
    for i, (g, b) in enumerate(zip(got, blobs)):
        begin, size, _ = nd.image.sample_distorted_bounding_box(
            nd.image.extract_jpeg_shape(b), BOXES, seed=(9, i))
        np.testing.assert_array_equal(
            g, nd.image.decode_and_crop_jpeg(b, [begin[0], begin[1], size[0], size[1]]))


def test_two_decodes_of_one_record_and_a_batch_of_records():
    blobs = np.array([JPEGS["c420"], JPEGS["c422"]], dtype=object)

    def two(b):   # two decodes with different options: each has its own decode op
        shape = nd.image.extract_jpeg_shape(b)
        window = [shape[0] // 4, shape[1] // 4, shape[0] // 2, shape[1] // 2]
        return (nd.image.decode_and_crop_jpeg(b, window, channels=1),
                nd.image.decode_and_crop_jpeg(b, [2, 3, 8, 10], ratio=2))

    for (gray, small), b in zip(nd.Dataset.from_tensor_slices(blobs).map(two), blobs):
        np.testing.assert_array_equal(gray, nd.image.decode_and_crop_jpeg(b, [9, 13, 18, 26],
                                                                          channels=1))
        np.testing.assert_array_equal(small, nd.image.decode_and_crop_jpeg(b, [2, 3, 8, 10],
                                                                           ratio=2))
    batched = nd.Dataset.from_tensor_slices(blobs).batch(2)
    # The batch's size is unknown when the function is recorded.
    with pytest.raises(InvalidArgumentError, match=r"contents must be scalar, got shape \[\?\]"):
        list(batched.map(nd.image.extract_jpeg_shape))
