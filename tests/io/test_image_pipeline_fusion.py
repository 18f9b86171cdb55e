"""The ImageNet-style CPU pipeline compiles: TFRecord → parse → decode_jpeg → random
resized crop → flip → normalize → CHW → batch. Both decoders become record kernels,
the decoded images (of their own sizes) travel packed in one buffer, and the rest of
the function — written with nd.io calls Numba cannot compile — runs as a Numba twin
inside ONE fused kernel. Each test compares with the reference path (fusion off) and
checks the plan, so it fails when any of those steps silently stops happening."""

import numpy as np
import pytest

import nbdata as nd
from nbdata.chunks import PackedRows, RowList, col_slice
from nbdata.errors import InvalidArgumentError
from nbdata.ops.fusion import pack_ragged

pytest.importorskip("simplejpeg")

FEATURES = {"image": nd.io.FixedLenFeature([], nd.string),
            "label": nd.io.FixedLenFeature([], np.int64)}
MEAN = np.array([123.7, 116.3, 103.5])
STD = np.array([58.4, 57.1, 57.4])


def _image(h, w, seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = (x * 200 / w + y * 50 / h)[..., None] + np.array([0, 30, 60])
    return np.clip(base + rng.normal(0, 10, (h, w, 3)), 0, 255).astype(np.uint8)


def _write(path, n, bad=()):
    sizes = [(40, 56), (56, 40), (33, 47), (48, 48)]
    with nd.io.TFRecordWriter(path) as writer:
        for i in range(n):
            blob = b"\xff\xd8 not a jpeg" if i in bad else nd.image.encode_jpeg(
                _image(*sizes[i % 4], seed=i), quality=90)
            writer.write(nd.io.encode_example({"image": blob, "label": i}))


def _prep(i, record):
    example = nd.io.parse_single_example(record, FEATURES)
    image = nd.image.decode_jpeg(example["image"], channels=3)
    image = nd.image.random_resized_crop(image, (24, 24), seed=(1, i))
    image = nd.image.random_flip_left_right(image, (2, i))
    image = nd.image.hwc_to_chw(nd.image.normalize(image, MEAN, STD))
    return image, example["label"]


def _options(fusion=True):
    options = nd.Options()
    options.fusion = fusion
    options.fusion_min_rows = 1   # compile even for a short file of unknown length
    return options


def _pipeline(path, fusion=True, batch=5):
    return nd.TFRecordDataset(path).enumerate().map(_prep).batch(batch).with_options(
        _options(fusion))


def test_parse_decode_crop_normalize_fuse_and_equal_the_reference(tmp_path):
    path = str(tmp_path / "images.tfrecord")
    _write(path, 23)
    pipe = _pipeline(path).compile()
    plan = pipe.explain()
    assert "decode(decode_jpeg(channels=3, ratio=1) of component 1)" in plan
    assert "decode(parse_single_example(image, label) of component 1)" in plan
    assert "fused_stage[the chunks of decode(decode_jpeg" in plan
    assert "[Numba-compiled call]" in plan and "calls _prep" not in plan
    got = list(pipe)
    want = list(_pipeline(path, fusion=False))
    assert [len(y) for _, y in got] == [5, 5, 5, 5, 3]
    for (gx, gy), (wx, wy) in zip(got, want):
        assert gx.shape == wx.shape and gx.dtype == wx.dtype == np.float32
        np.testing.assert_array_equal(gx, wx)
        np.testing.assert_array_equal(gy, wy)
    # The fused kernel really ran (no row went back to the reference path).
    import re
    stats = str(pipe.stats())
    kernel_rows = int(re.search(r"kernel: ([\d,]+) input rows", stats).group(1).replace(",", ""))
    assert kernel_rows >= 15 and "0 rows in 0 chunks re-run" in stats


def test_each_element_equals_the_cpu_ops_one_by_one(tmp_path):
    path = str(tmp_path / "images.tfrecord")
    _write(path, 9)
    images = np.concatenate([x for x, _ in _pipeline(path, batch=4).compile()])
    for i, record in enumerate(nd.TFRecordDataset(path)):
        blob = nd.io.parse_single_example(record, FEATURES)["image"]
        want = nd.image.random_resized_crop(nd.image.decode_jpeg(blob, channels=3), (24, 24),
                                            seed=(1, i))
        want = nd.image.hwc_to_chw(nd.image.normalize(
            nd.image.random_flip_left_right(want, (2, i)), MEAN, STD))
        np.testing.assert_array_equal(images[i], want)


def test_a_corrupt_image_fails_naming_it_and_ignore_errors_skips_it(tmp_path):
    path = str(tmp_path / "images.tfrecord")
    _write(path, 12, bad={5})
    for fusion in (True, False):
        ds = nd.TFRecordDataset(path).enumerate().map(_prep).with_options(_options(fusion))
        with pytest.raises(InvalidArgumentError, match="Unknown image file format"):
            list(ds.compile() if fusion else ds)
        kept = [int(y) for _, y in ds.ignore_errors()]
        assert kept == [0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11]


def test_save_and_restore_inside_the_fused_image_pipeline(tmp_path):
    path = str(tmp_path / "images.tfrecord")
    _write(path, 14)
    ds = _pipeline(path, batch=3)
    it = iter(ds.compile())
    next(it), next(it)
    state = it.save()
    rest = [x for x, _ in it]
    again = iter(ds.compile())
    again.restore(state)
    for a, b in zip(rest, [x for x, _ in again]):
        np.testing.assert_array_equal(a, b)


def test_a_function_with_python_control_flow_falls_back_with_a_note(tmp_path):
    """A function the graph recording cannot follow (an `if` on a value) runs per
    element, and the plan says why."""
    path = str(tmp_path / "images.tfrecord")
    _write(path, 6)

    def prep(i, record):
        example = nd.io.parse_single_example(record, FEATURES)
        image = nd.image.decode_jpeg(example["image"], channels=3)
        image = nd.image.resize(image, (8, 8))
        if example["label"] > 2:
            image = image * 2
        return image, example["label"]

    ds = nd.TFRecordDataset(path).enumerate().map(prep).with_options(_options())
    plan = ds.compile().explain()
    assert "prep in Python for each element (it has no compiled form: its graph could not " \
           "be recorded: TraceError: Using a `nd.Tensor` as a Python `bool`" in plan
    got = list(ds.compile())
    want = list(ds.with_options(_options(False)))
    for (gx, gy), (wx, wy) in zip(got, want):
        np.testing.assert_array_equal(gx, wx)
    assert len(got) == 6


def test_ragged_images_from_a_python_map_fuse_into_a_resize():
    """Not only decoders: any stream of images of different sizes reaches a fused map as
    ragged rows (packed at the stage's input)."""
    sizes = [(5, 7), (9, 4), (6, 6), (3, 8)] * 3
    ds = nd.Dataset.from_generator(
        lambda: (np.full(s + (3,), k, np.uint8) + np.arange(3, dtype=np.uint8)
                 for k, s in enumerate(sizes)),
        output_signature=nd.TensorSpec((None, None, 3), np.uint8))
    ds = ds.map(lambda im: nd.image.resize(im, (4, 4))).with_options(_options())
    plan = ds.compile().explain()
    assert "fused_stage[the chunks of from_generator" in plan
    got = list(ds.compile())
    want = list(ds.with_options(_options(False)))
    assert len(got) == 12
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_packed_rows_slice_and_pack_without_copies():
    rows = PackedRows.empty([(2, 3, 1), (1, 2, 1), (3, 1, 1)], np.uint8, 3)
    for j, r in enumerate(rows):
        r[...] = j + 1
    data, offsets, shapes = rows.packed
    assert offsets.tolist() == [0, 6, 8, 11] and np.shares_memory(rows[1], data)
    part = col_slice(rows, 1, 3)
    assert isinstance(part, PackedRows) and [r.shape for r in part] == [(1, 2, 1), (3, 1, 1)]
    assert part.packed[1].tolist() == [0, 2, 5] and np.shares_memory(part.packed[0], data)
    spec = nd.TensorSpec((None, None, 1), np.uint8)
    packed = pack_ragged(part, spec)
    assert packed[0] is part.packed[0]                       # already packed: no copy
    plain = pack_ragged(RowList(list(part)), spec)            # a plain list is packed
    np.testing.assert_array_equal(plain[0], packed[0])
    np.testing.assert_array_equal(plain[2], [[1, 2, 1], [3, 1, 1]])
    uniform = pack_ragged(np.zeros((2, 2, 3, 1), np.uint8), spec)
    assert uniform[1].tolist() == [0, 6, 12] and uniform[2].tolist() == [[2, 3, 1]] * 2


def test_images_are_decoded_ahead_on_a_thread_of_their_own(tmp_path):
    # Decoding the next chunk overlaps the kernel that crops this one: the decode runs on
    # its own thread (seen in a trace), the fused kernel on the consumer's.
    import json

    from nbdata import profiler
    path = str(tmp_path / "images.tfrecord")
    _write(path, 40)
    pipe = _pipeline(path, batch=4).compile()
    trace = str(tmp_path / "trace.json")
    with profiler.profile(trace):
        got = [y for _, y in pipe]
    np.testing.assert_array_equal(np.concatenate(got), np.arange(40))
    doc = json.loads(open(trace).read())["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in doc if e["ph"] == "M" and e["name"] == "thread_name"}
    decodes = {names[e["tid"]] for e in doc if e["ph"] == "X" and e["cat"] == "decode"
               and e["name"].startswith("decode_jpeg")}
    kernels = {names[e["tid"]] for e in doc if e["ph"] == "X" and e["cat"] == "kernel"}
    assert decodes == {"nbdata-decode-ahead"} and kernels and "nbdata-decode-ahead" not in kernels


def test_a_short_stream_compiles_once_its_iterations_together_pass_the_threshold(tmp_path):
    # A stream of unknown length runs on the reference path until fusion_min_rows rows
    # went through, counted over every iteration of the pipeline: a file shorter than the
    # threshold, iterated again and again, is compiled once they add up (it was re-run in
    # Python every epoch), and every later epoch runs all its rows in the kernel.
    path = str(tmp_path / "images.tfrecord")
    _write(path, 12)
    options = _options()
    options.fusion_min_rows = 20
    pipe = nd.TFRecordDataset(path).enumerate().map(_prep).batch(4).with_options(options).compile()
    reference = [y.tolist() for _, y in _pipeline(path, fusion=False, batch=4)]

    def kernel_rows():
        return sum(s.kernel_rows for s in pipe.stats().stages)
    epochs = []
    for _ in range(3):
        before = kernel_rows()
        assert [y.tolist() for _, y in pipe] == reference
        epochs.append(kernel_rows() - before)
    assert epochs == [0, 4, 12]   # 12 + 8 rows on the reference path, then the kernel
