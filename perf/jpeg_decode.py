"""jpeg: 1,000 encoded 256x256 RGB JPEGs (quality 90) in memory -> decode -> batch(32)."""

from __future__ import annotations

import functools
from typing import Optional

import numpy as np

from perf.measure import Implementation, Workload, nbdata_rows

BATCH = 32
SIDE = 256
FULL_ROWS = 1_000
QUICK_ROWS = 128


@functools.lru_cache(maxsize=2)
def images(n: int) -> tuple:
    """n photo-like JPEGs: smooth gradients, a few shapes and sensor-like noise."""
    import simplejpeg
    rng = np.random.default_rng(5)
    y, x = np.mgrid[0:SIDE, 0:SIDE].astype(np.float32)
    out = []
    for i in range(n):
        a, b, c = rng.random(3) * 2 - 1
        base = 128 + 60 * np.sin(x / (20 + 30 * abs(a)) + i) + 50 * np.cos(y / (15 + 25 * abs(b)))
        image = base[..., None] + np.array([0, 25 * c, -25 * c])
        cy, cx, r = rng.integers(40, 216, 2).tolist() + [int(rng.integers(10, 40))]
        image[(y - cy) ** 2 + (x - cx) ** 2 < r * r] = rng.integers(0, 255, 3)
        image += rng.normal(0, 6, image.shape)
        out.append(simplejpeg.encode_jpeg(np.clip(image, 0, 255).astype(np.uint8), quality=90,
                                          colorsubsampling="420"))
    return tuple(out)


def blob_array(n: int) -> np.ndarray:
    arr = np.empty(n, dtype=object)
    arr[:] = images(n)
    return arr


def nbdata_batch_then_decode(nd, blobs):
    return nd.Dataset.from_tensor_slices(blobs).batch(BATCH).map(nd.image.decode_jpeg)


def nbdata_decode_then_batch(nd, blobs):
    return nd.Dataset.from_tensor_slices(blobs).map(nd.image.decode_jpeg).batch(BATCH)


def build(quick: bool) -> Workload:
    n_rows = QUICK_ROWS if quick else FULL_ROWS

    def head(n):
        return (blob_array(n),)

    batch_first, batch_first_reference = nbdata_rows(nbdata_batch_then_decode, head)
    decode_first, _ = nbdata_rows(nbdata_decode_then_batch, head)

    def one_thread_loop(n):
        import simplejpeg
        blobs = images(n)

        def epoch():
            for s in range(0, n, BATCH):
                yield np.stack([simplejpeg.decode_jpeg(b, fastdct=True)
                                for b in blobs[s:s + BATCH]])
        return epoch

    def tf_rows(parallel: bool):
        def prepare(n):
            import tensorflow as tf
            ds = tf.data.Dataset.from_tensor_slices(list(images(n)))
            if parallel:
                ds = ds.map(tf.io.decode_jpeg, num_parallel_calls=tf.data.AUTOTUNE)
                ds = ds.batch(BATCH).prefetch(tf.data.AUTOTUNE)
            else:
                ds = ds.map(tf.io.decode_jpeg).batch(BATCH)
            return ds.as_numpy_iterator
        return prepare

    impls = [
        Implementation("nbdata batch(32).map(decode_jpeg) (ds.compile())", "nbdata",
                       batch_first, "simplejpeg"),
        Implementation("nbdata map(decode_jpeg).batch(32) (ds.compile())", "nbdata",
                       decode_first, "simplejpeg"),
        Implementation("nbdata reference (fusion=False)", "nbdata", batch_first_reference,
                       "simplejpeg"),
        Implementation("simplejpeg loop, one thread [1t]", "kernel", one_thread_loop,
                       "simplejpeg"),
        Implementation("tf.data map(decode_jpeg).batch(32)", "tf.data", tf_rows(False),
                       "tensorflow"),
        Implementation("tf.data map(decode_jpeg, AUTOTUNE).batch(32).prefetch [best]",
                       "tf.data", tf_rows(True), "tensorflow"),
    ]
    return Workload(f"jpeg: {n_rows:,} JPEGs {SIDE}x{SIDE} RGB q90 in memory -> decode -> "
                    f"batch({BATCH})", "images", n_rows, impls, check,
                    baseline_label="vs 1-thread loop",
                    notes="[1t] libjpeg-turbo (simplejpeg) called image by image on one "
                          "thread: the decoder's own speed; [best] tf.data's parallel form. "
                          "Every row decodes with libjpeg-turbo's fast integer DCT (TF's "
                          "default), so all rows deliver the same pixels.")


def check(batches: list, n: int, full_batches: bool) -> Optional[str]:
    if not batches:
        return "no batches"
    got = np.concatenate([np.asarray(b) for b in batches])
    if got.shape != (n, SIDE, SIDE, 3) or got.dtype != np.uint8:
        return f"shape {got.shape} {got.dtype}, want ({n}, {SIDE}, {SIDE}, 3) uint8"
    import simplejpeg
    blobs = images(n)
    for i in range(0, n, max(1, n // 50)):
        if not np.array_equal(got[i], simplejpeg.decode_jpeg(blobs[i], fastdct=True)):
            return f"image {i} differs from libjpeg-turbo's decode"
    return None
