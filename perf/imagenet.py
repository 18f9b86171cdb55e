"""imagenet: TFRecord shards of JPEG Examples -> decode -> random resized crop 224 -> flip
-> normalize -> CHW -> batch(64), the ImageNet training input, end to end.

The data is a synthetic ImageNet-like set written once with nbdata's own JPEG encoder
(quality 90) and TFRecord writer: ``tf.train.Example`` records of
``{"image/encoded": jpeg bytes, "image/class/label": int64}`` whose images are mostly
500x375 or 375x500 with some 300-500 px sides, and whose content (smooth gradients,
blobs and sensor-like noise) compresses like photos (about 110 KB at 500x375). The
rows, each in a fresh process (``python -m perf.imagenet INDEX THREADS REPEATS``):

- nbdata GPU: parse on the host, ``prefetch_to_device``, then ``nd.gpu.decode_jpeg``
  and the fused augment on the device (``num_parallel_calls=AUTOTUNE``: batches decoded
  and launched on several threads at once); and the same with decode + resize only
  (the decoder's share of the GPU row);
- nbdata CPU: ``enumerate().map(parse -> decode_jpeg -> random_resized_crop -> flip ->
  normalize -> CHW, num_parallel_calls=AUTOTUNE).batch(64).prefetch(2)``;
- tf.data CPU: the same steps with ``tf.io.decode_jpeg`` and ``tf.image`` ops;
- torchvision: a DataLoader over the records, PIL decode and ``transforms.v2``;
- NVIDIA DALI: ``fn.readers.tfrecord``, the mixed (GPU) decoder,
  ``fn.random_resized_crop`` and ``fn.crop_mirror_normalize``.

The GPU and DALI rows need a CUDA GPU (the check of ``perf/gpu_pipeline.py``); without
one they say ``no GPU``.
"""

from __future__ import annotations

import atexit
import dataclasses
import io
import json
import os
import struct
import sys
import tempfile
from typing import Optional

import numpy as np

from perf.measure import Implementation, Workload

BATCH = 64
SIZE = 224
QUALITY = 90
FULL_IMAGES, FULL_SHARDS = 20_000, 16
QUICK_IMAGES, QUICK_SHARDS = 512, 4
CLASSES = 1000
SEED = 11
# Data version: bump when the generator changes, so a stale cache is not reused.
DATA_VERSION = 1
# ImageNet's per-channel statistics in pixel units (module constants: Numba freezes them).
MEAN = np.array([123.675, 116.28, 103.53], np.float32)
STD = np.array([58.395, 57.12, 57.375], np.float32)
# Every normalized value lies in [(0 - max mean) / min std, (255 - min mean) / min std].
VALUE_RANGE = (-123.675 / 57.12 - 1e-3, (255 - 103.53) / 57.12 + 1e-3)
# A row whose result takes longer than this is killed (the full set's slow rows take
# a few minutes on 2 cores: a warm-up and up to 120 s of timed epochs).
ROW_TIMEOUT_S = 900

ROW_NAMES = (
    "nbdata GPU: decode + crop/flip/normalize/CHW on device",
    "nbdata GPU decode only (decode + resize 224)",
    "nbdata CPU (parse/decode/crop/flip/normalize/CHW map)",
    "tf.data CPU (decode_jpeg + tf.image, AUTOTUNE)",
    "torchvision DataLoader (PIL + transforms.v2)",
    "NVIDIA DALI (tfrecord reader, mixed decoder)",
    "tf.data CPU, ResNet preprocessing (extract_jpeg_shape -> sample_distorted_bounding_box"
    " -> decode_and_crop_jpeg -> resize -> flip, AUTOTUNE)",
    "decode-only bound (libjpeg-turbo via simplejpeg, all cores, bytes in memory) [bound]",
)
GPU_ROWS = (0, 1)
DALI_ROW = 5


# --------------------------------------------------------------------------- data

def _image_shape(rng) -> tuple:
    """(height, width): ImageNet's common 500x375 / 375x500, and some other sizes."""
    u = rng.random()
    if u < 0.55:
        return 375, 500
    if u < 0.80:
        return 500, 375
    if u < 0.90:
        return 333, 500
    return tuple(int(v) for v in rng.integers(300, 501, 2))


def _noise_bank(rng, sigma: float = 18.0, side: int = 1024) -> np.ndarray:
    """Sensor-like noise: per-pixel luma, a slightly correlated texture and some chroma."""
    luma = rng.normal(0, sigma, (side, side, 1)).astype(np.float32)
    texture = rng.normal(0, 1, (side, side)).astype(np.float32)
    texture = (texture + np.roll(texture, 1, 0) + np.roll(texture, 1, 1)
               + np.roll(texture, (1, 1), (0, 1))) * np.float32(sigma * 0.8)
    chroma = rng.normal(0, sigma / 3, (side, side, 3)).astype(np.float32)
    return luma + texture[..., None] + chroma


def synthetic_image(index: int, noise: np.ndarray) -> np.ndarray:
    """Image `index` of the set: a smooth colour field (a coarse random grid interpolated),
    a few shaded ellipses, and a window of the noise bank, as (H, W, 3) uint8."""
    rng = np.random.default_rng([SEED, index])
    h, w = _image_shape(rng)
    gh, gw = (int(v) for v in rng.integers(3, 9, 2))
    grid = rng.uniform(0, 255, (gh, gw, 3)).astype(np.float32)
    ys = np.linspace(0, gh - 1, h, dtype=np.float32)
    xs = np.linspace(0, gw - 1, w, dtype=np.float32)
    y0 = np.minimum(ys.astype(np.int64), gh - 2)
    x0 = np.minimum(xs.astype(np.int64), gw - 2)
    fy = (ys - y0)[:, None, None]
    fx = (xs - x0)[None, :, None]
    rows = grid[y0] * (1 - fy) + grid[y0 + 1] * fy
    image = rows[:, x0] * (1 - fx) + rows[:, x0 + 1] * fx
    for _ in range(int(rng.integers(4, 10))):
        ry, rx = rng.uniform(10, h / 4), rng.uniform(10, w / 4)
        cy, cx = rng.uniform(0, h), rng.uniform(0, w)
        top, bottom = int(max(cy - ry, 0)), int(min(cy + ry + 1, h))
        left, right = int(max(cx - rx, 0)), int(min(cx + rx + 1, w))
        dy = ((np.arange(top, bottom, dtype=np.float32) - cy) / ry)[:, None]
        dx = ((np.arange(left, right, dtype=np.float32) - cx) / rx)[None, :]
        d = (dy * dy + dx * dx)[..., None]
        color = rng.uniform(0, 255, 3).astype(np.float32)
        patch = image[top:bottom, left:right]
        image[top:bottom, left:right] = np.where(d < 1, color * (1 - 0.4 * d) + 0.2 * patch, patch)
    scale = np.float32(rng.uniform(0.75, 1.25))  # some images noisier (larger) than others
    ny = int(rng.integers(0, noise.shape[0] - h + 1))
    nx = int(rng.integers(0, noise.shape[1] - w + 1))
    image += noise[ny:ny + h, nx:nx + w] * scale
    return np.clip(image, 0, 255).astype(np.uint8)


def label_of(index: int) -> int:
    return index % CLASSES


def _write_shard(path: str, start: int, stop: int) -> None:
    import nbdata as nd
    noise = _noise_bank(np.random.default_rng([SEED, start, stop]))
    with nd.io.TFRecordWriter(path) as writer:
        for index in range(start, stop):
            jpeg = nd.image.encode_jpeg(synthetic_image(index, noise), quality=QUALITY)
            writer.write(nd.io.encode_example({"image/encoded": jpeg,
                                               "image/class/label": label_of(index)}))


def _shard_task(name: str, start: int, stop: int) -> str:
    from perf.files import cached_file
    return cached_file(name, lambda path: _write_shard(path, start, stop))


def _folder(n_images: int, n_shards: int) -> str:
    """Cache folder of one parameter set, relative to perf.files' folder."""
    return f"imagenet-{n_images}x{n_shards}-q{QUALITY}-v{DATA_VERSION}"


def shard_files(n_images: int, n_shards: int) -> list:
    """The shards' paths, written once (in parallel processes) and reused by every run."""
    from perf.environment import core_count
    root = os.path.join(tempfile.gettempdir(), "nbdata-perf")
    folder = _folder(n_images, n_shards)
    os.makedirs(os.path.join(root, folder), exist_ok=True)
    bounds = [n_images * s // n_shards for s in range(n_shards + 1)]
    tasks = [(os.path.join(folder, f"shard-{s:03d}-of-{n_shards:03d}.tfrecord"),
              bounds[s], bounds[s + 1]) for s in range(n_shards)]
    paths = [os.path.join(root, name) for name, _, _ in tasks]
    todo = [t for t, p in zip(tasks, paths) if not os.path.exists(p)]
    if todo:
        import concurrent.futures
        import multiprocessing
        print(f"  imagenet: writing {sum(b - a for _, a, b in todo):,} JPEGs into {len(todo)} "
              f"shard(s) under {os.path.join(root, folder)} (once) ...", file=sys.stderr, flush=True)
        workers = max(1, min(core_count(), len(todo)))
        with concurrent.futures.ProcessPoolExecutor(
                workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            list(pool.map(_shard_task, *zip(*todo)))
    return paths


def record_spans(path: str) -> list:
    """(frame offset, frame size, payload offset, payload size) of every record of a
    TFRecord file, read from the length headers (CRCs not checked)."""
    spans = []
    with open(path, "rb") as f:
        offset = 0
        while True:
            header = f.read(8)
            if len(header) < 8:
                break
            (length,) = struct.unpack("<Q", header)
            spans.append((offset, 8 + 4 + length + 4, offset + 12, length))
            offset += 8 + 4 + length + 4
            f.seek(offset)
    return spans


def dali_index(path: str) -> str:
    """DALI's TFRecord index of `path` (one "offset size" line per record), made once."""
    index = path + ".idx"
    if not os.path.exists(index):
        partial = f"{index}.{os.getpid()}.partial"
        with open(partial, "w") as out:
            out.writelines(f"{frame} {size}\n" for frame, size, _, _ in record_spans(path))
        os.replace(partial, index)
    return index


# A tiny tf.train.Example reader for the torch row (which should not lean on nbdata).

def _varint(buf, pos: int) -> tuple:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _fields(buf):
    """(field number, wire type, value) of a protobuf message: an int for varints, a
    memoryview slice for length-delimited fields."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        wire = key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + length], pos + length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, pos = buf[pos:pos + size], pos + size
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield key >> 3, wire, value


def parse_example(record) -> dict:
    """{key: bytes or int or list} of the bytes_list and int64_list features of one
    serialized tf.train.Example (Example.features=1 -> Features.feature=1 map entries ->
    Feature.bytes_list=1 / int64_list=3, each with repeated value=1)."""
    out = {}
    for field, _, features in _fields(memoryview(record)):
        if field != 1:
            continue
        for _, _, entry in _fields(features):
            key, feature = None, b""
            for number, _, value in _fields(entry):
                if number == 1:
                    key = bytes(value).decode()
                elif number == 2:
                    feature = value
            values = []
            for kind, _, listed in _fields(feature):
                for number, wire, value in _fields(listed):
                    if kind == 1:
                        values.append(bytes(value))
                    elif kind == 3 and wire == 2:  # packed varints
                        pos = 0
                        while pos < len(value):
                            v, pos = _varint(value, pos)
                            values.append(v - (1 << 64) if v >= 1 << 63 else v)
                    elif kind == 3:
                        values.append(value - (1 << 64) if value >= 1 << 63 else value)
            out[key] = values[0] if len(values) == 1 else values
    return out


class RecordImages:
    """Map-style dataset over TFRecord records: item i is (transform(PIL image), label).

    Records are read with ``os.pread`` on one descriptor per file and process, so the
    DataLoader's forked workers share nothing."""

    def __init__(self, files: list, transform):
        self.spans = [(path, offset, length) for path in files
                      for _, _, offset, length in record_spans(path)]
        self.transform = transform
        self._fds: dict = {}

    def __len__(self) -> int:
        return len(self.spans)

    def __getitem__(self, i: int):
        from PIL import Image
        path, offset, length = self.spans[i]
        key = (os.getpid(), path)
        fd = self._fds.get(key)
        if fd is None:
            fd = self._fds[key] = os.open(path, os.O_RDONLY)
        example = parse_example(os.pread(fd, length, offset))
        image = Image.open(io.BytesIO(example["image/encoded"])).convert("RGB")
        return self.transform(image), example["image/class/label"]


# ----------------------------------------------------------------- checks

def _host(x) -> np.ndarray:
    """A batch component as a NumPy array: nd.gpu DeviceArray, torch tensor, DALI
    TensorList, tf/NumPy array."""
    if hasattr(x, "copy_to_host"):
        return np.asarray(x.copy_to_host())
    if hasattr(x, "as_cpu"):  # DALI TensorListGPU
        x = x.as_cpu()
    if hasattr(x, "as_array"):  # DALI TensorListCPU
        return np.asarray(x.as_array())
    if hasattr(x, "numpy"):
        return x.numpy()
    return np.asarray(x)


@dataclasses.dataclass
class Digest:
    """What the check needs of a batch of images, so the warm-up epoch need not hold
    20,000 float32 images (12 GB): shape, dtype and, for the first batches, value stats."""

    shape: tuple
    dtype: str
    stats: Optional[tuple] = None  # (min, max, std) of the batch


def _digested(batches, spot_batches: int = 4):
    for k, (images, labels) in enumerate(batches):
        stats = None
        if k < spot_batches:
            host = _host(images).astype(np.float64, copy=False)
            stats = (float(host.min()), float(host.max()), float(host.std()))
        shape = tuple(int(v) for v in images.shape)
        yield Digest(shape, str(getattr(images, "dtype", "?")), stats), _host(labels).reshape(-1)


def _warm_up_digested(epoch):
    """The epoch factory, whose first call (the harness's warm-up) yields digests."""
    calls = []

    def factory():
        calls.append(None)
        return _digested(epoch()) if len(calls) == 1 else epoch()
    return factory


CHW, HWC = (3, SIZE, SIZE), (SIZE, SIZE, 3)


def _check(batches: list, n: int, full_batches: bool) -> Optional[str]:
    sizes = [len(labels) for _, labels in batches]
    if full_batches and any(s != BATCH for s in sizes[:-1]):
        return "a batch before the last is not full"
    labels = np.sort(np.concatenate([labels for _, labels in batches]).astype(np.int64))
    expected = np.sort(np.arange(n, dtype=np.int64) % CLASSES)
    if not np.array_equal(labels, expected):
        return f"{len(labels):,} labels delivered, not each image's once"
    for digest, labels in batches:
        if "float32" not in digest.dtype or digest.shape[1:] not in (CHW, HWC):
            return f"images {digest.dtype} {digest.shape}, want float32 (B, 3, {SIZE}, {SIZE})"
        if digest.shape[0] != len(labels):
            return f"{digest.shape[0]} images with {len(labels)} labels"
        # CHW: normalized pixels; HWC (the decode-only row): resized pixels, 0..255.
        low_bound, high_bound = VALUE_RANGE if digest.shape[1:] == CHW else (0.0, 255.0)
        if digest.stats is not None:
            low, high, std = digest.stats
            if low < low_bound or high > high_bound or not std > 0.05:
                return f"values [{low:.3g}, {high:.3g}] std {std:.3g}: not image pixels"
    return None


# ------------------------------------------------------------------- rows

def _nbdata_cpu(files):
    def prepare(n):
        import nbdata as nd
        from perf.measure import nbdata_options
        features = {"image/encoded": nd.io.FixedLenFeature([], nd.string),
                    "image/class/label": nd.io.FixedLenFeature([], np.int64)}

        def prep(i, record):
            example = nd.io.parse_single_example(record, features)
            image = nd.image.decode_jpeg(example["image/encoded"], channels=3)
            image = nd.image.random_resized_crop(image, (SIZE, SIZE), seed=(1, i))
            image = nd.image.random_flip_left_right(image, (2, i))
            image = nd.image.normalize(image, MEAN, STD)
            return nd.image.hwc_to_chw(image), example["image/class/label"]

        ds = (nd.TFRecordDataset(files).enumerate()
              .map(prep, num_parallel_calls=nd.AUTOTUNE)
              .batch(BATCH).prefetch(2)
              .with_options(nbdata_options(nd)))
        pipe = ds.compile()
        return _warm_up_digested(lambda: pipe)
    return prepare


def _nbdata_gpu(files, decode_only: bool):
    def prepare(n):
        import nbdata as nd
        from perf.measure import nbdata_options
        features = {"image/encoded": nd.io.FixedLenFeature([], nd.string),
                    "image/class/label": nd.io.FixedLenFeature([], np.int64)}

        def split(record):
            example = nd.io.parse_single_example(record, features)
            return example["image/encoded"], example["image/class/label"]

        def gpu_prep(images, labels):
            images = nd.gpu.decode_jpeg(images, channels=3)
            if decode_only:
                return nd.gpu.resize(images, (SIZE, SIZE)), labels
            images = nd.gpu.random_resized_crop(images, (SIZE, SIZE), seed=1)
            images = nd.gpu.random_flip_left_right(images, seed=2)
            return nd.gpu.hwc_to_chw(nd.gpu.normalize(images, MEAN, STD)), labels

        ds = (nd.TFRecordDataset(files).map(split).batch(BATCH)
              .prefetch_to_device("cuda:0").map(gpu_prep, num_parallel_calls=nd.AUTOTUNE)
              .prefetch(2)   # decode and augment of batch k+1 overlap the consumer
              .with_options(nbdata_options(nd)))
        pipe = ds.compile()
        # where the row's time went (the bounding stage, waits, threads), on stderr when
        # the row's process ends: the device check keeps it beside the row
        atexit.register(lambda: print(f"{ROW_NAMES[1 if decode_only else 0]}: stats\n"
                                      f"{pipe.stats().summary()}", file=sys.stderr))

        def epoch():
            last = None
            for last in pipe:
                yield last
            if last is not None:  # the device work of the epoch is done
                _host(last[1])
                last[0].copy_to_host()
        return _warm_up_digested(epoch)
    return prepare


def _tf_cpu(files):
    def prepare(n):
        import tensorflow as tf
        features = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
                    "image/class/label": tf.io.FixedLenFeature([], tf.int64)}
        mean, std = tf.constant(MEAN), tf.constant(STD)
        no_boxes = tf.zeros([1, 0, 4], tf.float32)

        def prep(record):
            example = tf.io.parse_single_example(record, features)
            image = tf.io.decode_jpeg(example["image/encoded"], channels=3)
            begin, size, _ = tf.image.sample_distorted_bounding_box(
                tf.shape(image), bounding_boxes=no_boxes, area_range=(0.08, 1.0),
                aspect_ratio_range=(3 / 4, 4 / 3), max_attempts=10,
                use_image_if_no_bounding_boxes=True)
            image = tf.slice(image, begin, size)
            image = tf.image.resize(image, (SIZE, SIZE))
            image = tf.image.random_flip_left_right(image)
            image = (image - mean) / std
            return tf.transpose(image, (2, 0, 1)), example["image/class/label"]

        ds = (tf.data.TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE)
              .map(prep, num_parallel_calls=tf.data.AUTOTUNE)
              .batch(BATCH)
              .prefetch(tf.data.AUTOTUNE))
        return _warm_up_digested(ds.as_numpy_iterator)
    return prepare


def _tf_resnet(files):
    """tf.data written as TensorFlow's own ResNet preprocessing: the crop window is drawn
    from the JPEG header, and only the window is decoded (libjpeg-turbo's crop API)."""
    def prepare(n):
        import tensorflow as tf
        features = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
                    "image/class/label": tf.io.FixedLenFeature([], tf.int64)}
        mean, std = tf.constant(MEAN), tf.constant(STD)
        no_boxes = tf.constant([0.0, 0.0, 1.0, 1.0], tf.float32, [1, 1, 4])

        def prep(record):
            example = tf.io.parse_single_example(record, features)
            contents = example["image/encoded"]
            shape = tf.io.extract_jpeg_shape(contents)
            begin, size, _ = tf.image.sample_distorted_bounding_box(
                shape, bounding_boxes=no_boxes, min_object_covered=0.1,
                area_range=(0.08, 1.0), aspect_ratio_range=(3 / 4, 4 / 3), max_attempts=10,
                use_image_if_no_bounding_boxes=True)
            offset_y, offset_x, _ = tf.unstack(begin)
            height, width, _ = tf.unstack(size)
            window = tf.stack([offset_y, offset_x, height, width])
            image = tf.io.decode_and_crop_jpeg(contents, window, channels=3)
            image = tf.image.resize(image, (SIZE, SIZE))
            image = tf.image.random_flip_left_right(image)
            image = (image - mean) / std
            return tf.transpose(image, (2, 0, 1)), example["image/class/label"]

        ds = (tf.data.TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE)
              .map(prep, num_parallel_calls=tf.data.AUTOTUNE)
              .batch(BATCH)
              .prefetch(tf.data.AUTOTUNE))
        return _warm_up_digested(ds.as_numpy_iterator)
    return prepare


def _decode_bound(files):
    """Only decoding every image (full images: the decoder nbdata uses cannot skip
    scanlines), on a thread per core, from bytes already in memory: the rate the CPU
    rows could reach if everything else hid behind decoding. Its batches are the
    decoded images resized to 224 by nearest-neighbour slicing (for the check)."""
    def prepare(n):
        import concurrent.futures
        import simplejpeg
        from perf.environment import thread_budget
        blobs, labels = [], []
        for path in files:
            with open(path, "rb") as f:
                data = f.read()
            for _, _, offset, length in record_spans(path):
                example = parse_example(data[offset:offset + length])
                blobs.append(example["image/encoded"])
                labels.append(example["image/class/label"])
        blobs, labels = blobs[:n], np.asarray(labels[:n], np.int64)
        pool = concurrent.futures.ThreadPoolExecutor(thread_budget())
        rows = np.linspace(0, 1, SIZE, endpoint=False)

        def decode(blob):
            image = simplejpeg.decode_jpeg(blob, colorspace="RGB")
            h, w = image.shape[:2]
            return image[(rows * h).astype(int)][:, (rows * w).astype(int)]

        def epoch():
            for s in range(0, len(blobs), BATCH):
                images = list(pool.map(decode, blobs[s:s + BATCH]))
                yield np.stack(images).astype(np.float32), labels[s:s + BATCH]
        return _warm_up_digested(epoch)
    return prepare


def _torchvision(files):
    def prepare(n):
        import torch
        from torch.utils.data import DataLoader
        from torchvision.transforms import v2
        from perf.environment import thread_budget
        transform = v2.Compose([
            v2.RandomResizedCrop(SIZE, antialias=True),
            v2.RandomHorizontalFlip(),
            v2.ToImage(),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize((MEAN / 255).tolist(), (STD / 255).tolist()),
        ])
        workers = thread_budget()
        loader = DataLoader(RecordImages(files, transform), batch_size=BATCH,
                            num_workers=workers, persistent_workers=workers > 0)
        return _warm_up_digested(lambda: loader)
    return prepare


def _dali(files):
    def prepare(n):
        import nvidia.dali.fn as fn
        import nvidia.dali.tfrecord as tfrec
        import nvidia.dali.types as types
        from nvidia.dali import pipeline_def
        from perf.environment import thread_budget
        indexes = [dali_index(path) for path in files]

        @pipeline_def(batch_size=BATCH, num_threads=thread_budget(), device_id=0)
        def pipeline():
            inputs = fn.readers.tfrecord(
                path=files, index_path=indexes, name="Reader", pad_last_batch=True,
                features={"image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
                          "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1)})
            images = fn.decoders.image(inputs["image/encoded"], device="mixed",
                                       output_type=types.RGB)
            images = fn.random_resized_crop(images, size=(SIZE, SIZE),
                                            random_area=(0.08, 1.0),
                                            random_aspect_ratio=(3 / 4, 4 / 3))
            images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                              mean=MEAN.tolist(), std=STD.tolist(),
                                              mirror=fn.random.coin_flip())
            return images, inputs["image/class/label"]

        pipe = pipeline()
        pipe.build()
        steps = -(-n // BATCH)

        def epoch():
            images = None
            for step in range(steps):
                images, labels = pipe.run()
                rows = min(BATCH, n - step * BATCH)  # the padded last batch counts its own rows
                yield _DaliBatch(images, rows), labels.as_array().reshape(-1)[:rows]
            if images is not None:  # the device work of the epoch is done
                images.as_cpu()
        return _warm_up_digested(epoch)
    return prepare


class _DaliBatch:
    """A DALI output batch with its real row count (the reader pads the last batch)."""

    def __init__(self, images, rows: int):
        self.images, self.rows = images, rows

    @property
    def shape(self):
        return (self.rows, *self.images.shape()[0])  # shape(): each sample's shape

    @property
    def dtype(self):
        return "float32" if "FLOAT" in str(self.images.dtype) else str(self.images.dtype)

    def copy_to_host(self):
        return np.asarray(self.images.as_cpu().as_array())[:self.rows]


def build(quick: bool) -> Workload:
    """The imagenet table; writes the shards on first use (not inside a row's timeout)."""
    n_images, n_shards = (QUICK_IMAGES, QUICK_SHARDS) if quick else (FULL_IMAGES, FULL_SHARDS)
    files = shard_files(n_images, n_shards)
    impls = [
        Implementation(ROW_NAMES[0], "nbdata", _nbdata_gpu(files, False), "nbdata"),
        Implementation(ROW_NAMES[1], "nbdata", _nbdata_gpu(files, True), "nbdata"),
        Implementation(ROW_NAMES[2], "nbdata", _nbdata_cpu(files), "nbdata"),
        Implementation(ROW_NAMES[3], "tf.data", _tf_cpu(files), "tensorflow"),
        Implementation(ROW_NAMES[4], "torch", _torchvision(files), "torchvision"),
        Implementation(ROW_NAMES[5], "dali", _dali(files), None),
        Implementation(ROW_NAMES[6], "tf.data", _tf_resnet(files), "tensorflow"),
        Implementation(ROW_NAMES[7], "bound", _decode_bound(files), "simplejpeg"),
    ]
    return Workload(
        f"imagenet: {n_images:,} JPEGs (~500x375, q{QUALITY}) in {n_shards} TFRecord shards -> "
        f"decode -> random resized crop {SIZE} -> flip -> normalize -> CHW, batch({BATCH})",
        "images", n_images, impls, _check,
        notes="targets (real GPU, one run): nbdata GPU >= 1.0x DALI (>= 10x tf.data CPU "
              "without DALI); nbdata CPU >= 1.5x the best tf.data row and >= 0.85x the "
              "decode-only bound. [bound] only decoding (its ratio column).",
        baseline_group="bound", baseline_label="vs decode-only bound", report_cpu=True)


# --------------------------------------------------------- running the rows

def _dali_missing() -> Optional[str]:
    import importlib.util
    try:
        found = importlib.util.find_spec("nvidia.dali") is not None
    except (ImportError, ValueError):
        found = False
    return None if found else "DALI not installed (nvidia-dali-cuda120, see perf/README.md)"


def _skip_reason(index: int, impl: Implementation, gpu_reason: Optional[str]) -> Optional[str]:
    from perf.environment import missing
    if index == DALI_ROW:
        return _dali_missing() or ("no GPU" if gpu_reason else None)
    if index in GPU_ROWS and gpu_reason:
        return "no GPU"
    return missing(impl.requires)


def _run_row(index: int, threads: int, repeats: int, quick: bool):
    from perf.row_process import measure_in_child
    impl = build(quick).impls[index]
    command = [sys.executable, "-m", "perf.imagenet", str(index), str(threads), str(repeats)]
    command += ["--quick"] if quick else []
    return measure_in_child(command, impl, ROW_TIMEOUT_S)


def report(header: str, quick: bool, load, threads: int, repeats: int) -> str:
    """Measure every row (each in a fresh process) and render the table."""
    from perf.gpu_pipeline import _gpu_reason
    from perf.measure import format_table, skipped
    workload = build(quick)  # writes the shards now, outside every row's timeout
    gpu_reason = _gpu_reason()
    results = []
    for index, impl in enumerate(workload.impls):
        why = _skip_reason(index, impl, gpu_reason)
        if why:
            results.append(skipped(impl, why))
            continue
        print(f"  imagenet: {impl.name} ...", file=sys.stderr, flush=True)
        results.append(_run_row(index, threads, repeats, quick))
    table = format_table(workload, f"{header}; {load.describe()}", results)
    if gpu_reason:
        table += f"\nunmeasured: {gpu_reason}"
    return table


def _child(index: int, threads: int, repeats: int, quick: bool) -> dict:
    from perf.environment import configure_peer, set_thread_env
    set_thread_env(threads)
    from perf.measure import StageError, measure, skipped
    table = build(quick)
    impl = table.impls[index]
    configure_peer("torch" if impl.requires == "torchvision" else impl.requires, threads)
    try:
        result = measure(impl, table, repeats)
    except Exception as exc:  # reported in the row's note, the table goes on
        text = str(exc) if isinstance(exc, StageError) else f"{type(exc).__name__}: {exc}"
        result = skipped(impl, f"failed: {(text.splitlines() or [''])[0][:120]}")
    return dataclasses.asdict(result)


if __name__ == "__main__":
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, root)
    args = [a for a in sys.argv[1:] if a != "--quick"]
    if len(args) != 3:
        sys.exit("usage: python -m perf.imagenet INDEX THREADS REPEATS [--quick]")
    from perf import imagenet  # the module's own name, so classes are perf.imagenet's
    print(json.dumps(imagenet._child(int(args[0]), int(args[1]), int(args[2]),
                                     "--quick" in sys.argv[1:])))
