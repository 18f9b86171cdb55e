"""nd.gpu.decode_jpeg: ragged device batches decoded by nvImageCodec (its CPU backend, or
libjpeg-turbo with the same settings, under the CUDA simulator), made one size by the
next op in the same kernel; the whole ImageNet-style chain against the CPU ops.

The CUDA simulator runs each CUDA thread as a Python thread (a block of 256 per image
and launch): output sizes and batches are kept small (a few dozen values per image, a
handful of images per pipeline); the sizes that matter (a crop larger than one image of
the batch) are kept."""

import threading

import numpy as np
import pytest

import nbdata as nd
from nbdata.errors import InvalidArgumentError
from nbdata.gpu import jpeg

pytestmark = pytest.mark.skipif(not nd.gpu.available(), reason="no GPU and no CUDA simulator")
pytest.importorskip("simplejpeg")

SIZES = [(20, 30), (24, 18), (16, 16), (31, 22)]
MEAN = [120.0, 110.0, 100.0]
STD = [60.0, 55.0, 50.0]
ON_DEVICE = nd.gpu.available() and not nd.gpu.runtime.simulated()


def _image(h, w, seed, c=3):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = (x * 180 / w + y * 60 / h)[..., None] + np.arange(c) * 25
    return np.clip(base + rng.normal(0, 12, (h, w, c)), 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def blobs():
    return [nd.image.encode_jpeg(_image(h, w, k), quality=90) for k, (h, w) in enumerate(SIZES)]


@pytest.fixture(params=["codec", "library"])
def decoder(request, monkeypatch, gpu_backend):
    """Both decoders of the simulator: nvImageCodec's CPU backend and the fallback (on the
    CUDA-rules double, its stand-in of nvImageCodec's GPU decoder)."""
    if request.param == "codec":
        if jpeg._codec() is None:
            pytest.skip("nvImageCodec is not installed")
    elif ON_DEVICE or gpu_backend is not None:
        pytest.skip("a GPU always decodes with nvImageCodec")
    else:
        monkeypatch.setattr(jpeg, "_codec", lambda: None)
    return request.param


def _cpu(blob, channels=3):
    return nd.image.decode_jpeg(blob, channels=channels, dct_method="INTEGER_ACCURATE")


def _close(got, want):
    """Equal under the simulator (same decoder, same float32 operations); on a GPU, nvJPEG
    decodes within a few levels of libjpeg-turbo."""
    if ON_DEVICE:
        assert np.abs(got.astype(np.float32) - want.astype(np.float32)).mean() < 2.0
    else:
        np.testing.assert_array_equal(got, want)


def test_a_batch_decodes_into_one_ragged_device_buffer(blobs, decoder):
    batch = nd.gpu.decode_jpeg(blobs)
    assert isinstance(batch, nd.gpu.RaggedBatch) and len(batch) == 4
    assert batch.shape == (4, None, None, 3) and batch.dtype == np.uint8
    assert batch.shapes.tolist() == [[h, w, 3] for h, w in SIZES]
    assert batch.offsets.tolist() == [0] + np.cumsum([h * w * 3 for h, w in SIZES]).tolist()
    for j, image in enumerate(batch.copy_to_host()):
        _close(image, _cpu(blobs[j]))
    _close(batch[2].copy_to_host(), _cpu(blobs[2]))


def test_grayscale_and_channels_as_stored(blobs, decoder):
    gray = nd.image.encode_jpeg(_image(10, 12, 9, c=1), quality=90)
    batch = nd.gpu.decode_jpeg([blobs[0], gray], channels=1)
    assert batch.shapes.tolist() == [[20, 30, 1], [10, 12, 1]]
    for j, blob in enumerate([blobs[0], gray]):
        _close(batch.copy_to_host()[j], _cpu(blob, channels=1))
    stored = nd.gpu.decode_jpeg([gray, blobs[1]], channels=0)
    assert stored.shapes.tolist() == [[10, 12, 1], [24, 18, 3]]


def test_the_next_op_makes_the_images_one_size_in_one_launch(blobs, decoder):
    batch = nd.gpu.decode_jpeg(blobs)
    crops = nd.gpu.random_resized_crop(batch, (5, 4), seed=(5, 10)).copy_to_host()
    resized = nd.gpu.resize(batch, (4, 5)).copy_to_host()
    cropped = nd.gpu.random_crop(batch, (5, 6), seed=3).copy_to_host()
    assert crops.shape == (4, 5, 4, 3) and crops.dtype == np.float32
    assert resized.shape == (4, 4, 5, 3) and cropped.shape == (4, 5, 6, 3)
    for j, blob in enumerate(blobs):
        image = _cpu(blob)
        np.testing.assert_allclose(
            crops[j], nd.image.random_resized_crop(image, (5, 4), seed=(5, 10 + j)),
            rtol=1e-5, atol=1e-3 if ON_DEVICE else 0)
        np.testing.assert_allclose(resized[j], nd.image.resize(image, (4, 5)),
                                   rtol=1e-5, atol=1e-3 if ON_DEVICE else 0)
        np.testing.assert_array_equal(cropped[j],
                                      nd.image.random_crop(image, (5, 6, 3), (3, j)))
    with pytest.raises(InvalidArgumentError, match=r"does not fit in image 2 of the batch"):
        nd.gpu.random_crop(batch, (17, 17), seed=1)
    with pytest.raises(ValueError, match="differ in size; make them one size first"):
        nd.gpu.random_flip_left_right(batch, seed=1)


def test_a_corrupt_image_names_its_index(blobs, decoder):
    with pytest.raises(InvalidArgumentError, match="image 1 of the batch is not a JPEG"):
        nd.gpu.decode_jpeg([blobs[0], b"GIF89a...", blobs[1]])
    broken = blobs[1][:2] + b"\x00" * 40
    with pytest.raises(InvalidArgumentError, match="image 2 of the batch"):
        nd.gpu.decode_jpeg([blobs[0], blobs[1], broken])
    with pytest.raises(TypeError, match="wrap a single image in a list"):
        nd.gpu.decode_jpeg(blobs[0])
    with pytest.raises(InvalidArgumentError, match="channels must be 0, 1 or 3"):
        nd.gpu.decode_jpeg(blobs, channels=4)


def _records(tmp_path, n, bad=()):
    path = str(tmp_path / "images.tfrecord")
    with nd.io.TFRecordWriter(path) as writer:
        for i in range(n):
            h, w = SIZES[i % 4]
            blob = b"\xff\xd8\xff broken" if i in bad else nd.image.encode_jpeg(
                _image(h, w, i), quality=90)
            writer.write(nd.io.encode_example({"image": blob, "label": i}))
    return path


FEATURES = {"image": nd.io.FixedLenFeature([], nd.string),
            "label": nd.io.FixedLenFeature([], np.int64)}


def _parse(record):
    example = nd.io.parse_single_example(record, FEATURES)
    return example["image"], example["label"]


CROP = (6, 5)   # the pipelines' crop: not square, so a transposed index would show


def _gpu_prep(images, labels):
    x = nd.gpu.decode_jpeg(images, channels=3)
    x = nd.gpu.random_resized_crop(x, CROP, seed=7)
    x = nd.gpu.random_flip_left_right(x, seed=3)
    return nd.gpu.hwc_to_chw(nd.gpu.normalize(x, MEAN, STD)), labels


def _cpu_prep(blob, k):
    x = nd.image.random_resized_crop(_cpu(blob), CROP, seed=(7, k))
    x = nd.image.random_flip_left_right(x, (3, k))
    return nd.image.hwc_to_chw(nd.image.normalize(x, MEAN, STD))


def test_tfrecord_to_augmented_device_batches_equals_the_cpu_ops(tmp_path, decoder):
    # 5 records in batches of 2: ragged batches (4 image sizes) and a partial last one
    path = _records(tmp_path, 5)
    ds = (nd.TFRecordDataset(path).map(_parse).batch(2)
          .prefetch_to_device("cuda:0").map(_gpu_prep))
    plan = ds.compile().explain()
    assert "nvImageCodec decodes the batch's JPEGs" in plan
    assert f"random_resized_crop({CROP}" in plan and "(one launch per batch)" in plan
    blobs = [_parse(r)[0] for r in nd.TFRecordDataset(path)]
    k = 0
    sizes = []
    for images, labels in ds:
        assert isinstance(images, nd.gpu.DeviceArray)
        host, labels = images.copy_to_host(), labels.copy_to_host()
        sizes.append(len(host))
        for j in range(len(host)):
            np.testing.assert_allclose(host[j], _cpu_prep(blobs[k], k), rtol=1e-5,
                                       atol=2e-3 if ON_DEVICE else 0)
            assert int(labels[j]) == k
            k += 1
    assert sizes == [2, 2, 1]


def test_a_corrupt_image_fails_its_batch_and_ignore_errors_skips_the_batch(tmp_path, decoder):
    # record 3 is image 1 of batch 1; the batches before and after it go through
    path = _records(tmp_path, 5, bad={3})
    ds = (nd.TFRecordDataset(path).map(_parse).batch(2)
          .prefetch_to_device("cuda:0").map(_gpu_prep))
    with pytest.raises(InvalidArgumentError, match=r"image 1 of the batch .*\(batch 1\)"):
        list(ds)
    labels = [np.asarray(y).tolist() for _, y in ds.ignore_errors()]
    assert labels == [[0, 1], [4]]


def test_decode_must_come_first_and_needs_a_channel_count(tmp_path):
    path = _records(tmp_path, 4)
    ds = nd.TFRecordDataset(path).map(_parse).batch(2).prefetch_to_device("cuda:0")
    with pytest.raises(ValueError, match="pass channels=3 or 1"):
        ds.map(lambda x, y: (nd.gpu.resize(nd.gpu.decode_jpeg(x, channels=0), (4, 4)), y))
    with pytest.raises(ValueError, match="make them one size first"):
        ds.map(lambda x, y: (nd.gpu.normalize(nd.gpu.decode_jpeg(x), 0.0, 1.0), y))
    with pytest.raises(TypeError, match="takes the encoded images"):
        ds.map(lambda x, y: (x, nd.gpu.decode_jpeg(y)))


def test_region_decode_of_the_crop_windows_equals_the_whole_decode(tmp_path, gpu_backend,
                                                                   monkeypatch):
    # NBDATA_GPU_JPEG_ROI=1: a decode followed by random_resized_crop decodes each image's
    # window only (nvImageCodec sub code streams) and resizes it: the same batches.
    if gpu_backend is None:
        pytest.skip("region decode needs nvImageCodec's regions: the CUDA-rules double's")
    path = _records(tmp_path, 4)
    ds = (nd.TFRecordDataset(path).map(_parse).batch(2)
          .prefetch_to_device("cuda:0").map(_gpu_prep))
    whole = [x.copy_to_host() for x, _ in ds]
    monkeypatch.setenv("NBDATA_GPU_JPEG_ROI", "1")
    calls = len(gpu_backend.decode_calls)
    regions = [x.copy_to_host() for x, _ in ds]
    assert len(gpu_backend.decode_calls) > calls
    for a, b in zip(whole, regions):
        np.testing.assert_array_equal(a, b)
    # eager: decode then crop, and the region decode's batch holds the windows
    from nbdata.primitives.jpeg import decode_jpeg
    from nbdata.compiler.backend_gpu import run_steps
    blobs = [_parse(r)[0] for r in nd.TFRecordDataset(path)][:3]
    crop = nd.image.random_resized_crop.primitive.gpu(CROP, seed=7)
    batch = decode_jpeg.primitive.gpu(3).decode(np.array(blobs, object),
                                                 windows=crop.windows(0))
    assert batch.windowed and batch.shapes[:, :2].tolist() == \
        np.stack(crop.params(None, 0, 3, np.array([[h, w, 3] for h, w in SIZES[:3]])))[2:].T.tolist()
    got = run_steps([decode_jpeg.primitive.gpu(3), crop], np.array(blobs, object)).copy_to_host()
    monkeypatch.setenv("NBDATA_GPU_JPEG_ROI", "0")
    want = run_steps([decode_jpeg.primitive.gpu(3), crop], np.array(blobs, object)).copy_to_host()
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------------- batches in flight at once
def _host_batches(ds):
    return [(images.copy_to_host(), labels.copy_to_host()) for images, labels in ds]


def _assert_same(got, want):
    assert len(got) == len(want)
    for (a, b), (c, d) in zip(got, want):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)


@pytest.mark.parametrize("calls", [3, nd.AUTOTUNE])
def test_batches_in_flight_give_the_values_of_one_at_a_time(tmp_path, decoder, monkeypatch,
                                                             calls):
    path = _records(tmp_path, 9)   # 5 batches of 2, the last partial
    staged = nd.TFRecordDataset(path).map(_parse).batch(2).prefetch_to_device("cuda:0")
    want = _host_batches(staged.map(_gpu_prep))
    ds = staged.map(_gpu_prep, num_parallel_calls=calls)
    shown = "AUTOTUNE" if calls == nd.AUTOTUNE else calls
    assert f"num_parallel_calls={shown}" in ds.compile().explain()
    if calls == 3:
        # two batches are decoded at once: the first two decodes wait for each other
        together = threading.Barrier(2, timeout=20)
        decode, seen = jpeg.decode_values, []

        def decode_values(*args, **kwargs):
            if len(seen) < 2:
                seen.append(threading.current_thread().name)
                together.wait()
            return decode(*args, **kwargs)
        monkeypatch.setattr(jpeg, "decode_values", decode_values)
        got = _host_batches(ds)
        assert len(set(seen)) == 2 and all(n.startswith("nbdata-gpu-map") for n in seen)
    else:
        got = _host_batches(ds)
    _assert_same(got, want)
    assert [len(b) for _, b in got] == [2, 2, 2, 2, 1]
    # and the values are those of the CPU ops, element by element
    blobs = [_parse(r)[0] for r in nd.TFRecordDataset(path)]
    host = np.concatenate([a for a, _ in got])
    for k in range(9):
        np.testing.assert_allclose(host[k], _cpu_prep(blobs[k], k), rtol=1e-5,
                                   atol=2e-3 if ON_DEVICE else 0)


def test_a_corrupt_image_with_batches_in_flight_fails_its_batch_alone(tmp_path, decoder):
    path = _records(tmp_path, 9, bad={3})   # image 1 of batch 1
    ds = (nd.TFRecordDataset(path).map(_parse).batch(2)
          .prefetch_to_device("cuda:0").map(_gpu_prep, num_parallel_calls=3))
    it = iter(ds)
    assert np.asarray(next(it)[1].copy_to_host()).tolist() == [0, 1]
    with pytest.raises(InvalidArgumentError, match=r"image 1 of the batch .*\(batch 1\)"):
        next(it)
    # the batches after it went on, with the draws of their own places
    rest = [(a.copy_to_host(), b.copy_to_host()) for a, b in it]
    assert [b.tolist() for _, b in rest] == [[4, 5], [6, 7], [8]]
    blobs = [_parse(r)[0] for r in nd.TFRecordDataset(path)]
    for images, labels in rest:
        for j, k in enumerate(labels.tolist()):
            np.testing.assert_allclose(images[j], _cpu_prep(blobs[k], k), rtol=1e-5,
                                       atol=2e-3 if ON_DEVICE else 0)
    labels = [np.asarray(y).tolist() for _, y in ds.ignore_errors()]
    assert labels == [[0, 1], [4, 5], [6, 7], [8]]


def test_save_and_restore_with_batches_in_flight(tmp_path, decoder):
    path = _records(tmp_path, 11)   # 6 batches
    pipe = (nd.TFRecordDataset(path).map(_parse).batch(2).prefetch_to_device("cuda:0")
            .map(_gpu_prep, num_parallel_calls=3)).compile()
    it = iter(pipe)
    first = [next(it), next(it)]
    state = it.save()   # batches 2.. taken and in flight: computed again after a restore
    rest = [(a.copy_to_host(), b.copy_to_host()) for a, b in it]
    assert [b.tolist() for _, b in rest] == [[4, 5], [6, 7], [8, 9], [10]]
    again = iter(pipe)
    again.restore(state)
    _assert_same(_host_batches(again), rest)
    serial = _host_batches(nd.TFRecordDataset(path).map(_parse).batch(2)
                           .prefetch_to_device("cuda:0").map(_gpu_prep))
    _assert_same([(a.copy_to_host(), b.copy_to_host()) for a, b in first] + rest, serial)


def test_a_gpu_map_checks_num_parallel_calls_as_map_does(tmp_path):
    path = _records(tmp_path, 2)
    staged = nd.TFRecordDataset(path).map(_parse).batch(2).prefetch_to_device("cuda:0")
    for bad in (0, -2):
        with pytest.raises(ValueError, match="num_parallel_calls"):
            staged.map(_gpu_prep, num_parallel_calls=bad)
    with pytest.raises(ValueError, match="synchronous=True"):
        staged.map(_gpu_prep, num_parallel_calls=2, synchronous=True)
    with pytest.raises(TypeError, match="deterministic"):
        staged.map(_gpu_prep, deterministic="yes")
    # fused GPU maps keep the larger parallelism, AUTOTUNE over any number
    two = staged.map(_gpu_prep, num_parallel_calls=2).map(
        lambda x, y: (nd.gpu.cast(x, "float16"), y), num_parallel_calls=nd.AUTOTUNE)
    assert "num_parallel_calls=AUTOTUNE" in two.compile().explain()
    assert "num_parallel_calls" not in staged.map(_gpu_prep).compile().explain()


def test_decoders_are_leased_one_call_at_a_time():
    made = []
    key = ("test", object())
    make = lambda: made.append(object()) or made[-1]   # noqa: E731
    with jpeg._leased(key, make) as a, jpeg._leased(key, make) as b:
        assert a is not b and made == [a, b]
    with jpeg._leased(key, make) as c:
        assert c in (a, b)
    assert len(made) == 2
    jpeg._decoders.pop(key)
