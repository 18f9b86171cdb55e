"""ImageNet-style training input, end to end: a TFRecord of JPEG Examples → parse →
shuffle → batch → prefetch_to_device → decode on the GPU → random resized crop 224 →
flip → normalize → CHW → a PyTorch training step (and a JAX one when jax is
installed), with ``pipe.stats()`` showing whether the training loop waited for data.

    python examples/imagenet_train.py                     # a small synthetic set
    python examples/imagenet_train.py --data DIR --steps 200 --batch 128

Without a GPU (and outside the CUDA simulator) the same augmentation runs on the CPU:
decode_jpeg and the image ops in one fused, parallel kernel per chunk of images.
``--device cpu`` forces that path. With neither torch nor jax installed, the step is a
NumPy softmax-regression step, so the example still runs end to end.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
import time

import numpy as np

import nbdata as nd

FEATURES = {"image/encoded": nd.io.FixedLenFeature([], nd.string),
            "image/class/label": nd.io.FixedLenFeature([], np.int64)}
MEAN = [123.675, 116.28, 103.53]
STD = [58.395, 57.12, 57.375]
CLASSES = 10


# ------------------------------------------------------------------ data

def synthetic_images(directory: str, count: int, shards: int = 2, seed: int = 0) -> list:
    """Writes ``count`` JPEG Examples of ImageNet-like sizes into TFRecord shards."""
    rng = np.random.default_rng(seed)
    paths = [os.path.join(directory, f"train-{k:05d}-of-{shards:05d}") for k in range(shards)]
    writers = [nd.io.TFRecordWriter(p) for p in paths]
    for i in range(count):
        h, w = (int(rng.integers(300, 500)), int(rng.integers(300, 500))) if count > 64 else \
            (int(rng.integers(40, 90)), int(rng.integers(40, 90)))
        y, x = np.mgrid[0:h, 0:w]
        label = i % CLASSES
        base = (x * (label + 1) * 20 / w + y * 80 / h)[..., None] + rng.uniform(0, 120, 3)
        image = np.clip(base + rng.normal(0, 8, (h, w, 3)), 0, 255).astype(np.uint8)
        writers[i % shards].write(nd.io.encode_example({
            "image/encoded": nd.image.encode_jpeg(image, quality=90),
            "image/class/label": label}))
    for w in writers:
        w.close()
    return paths


def parse(record):
    example = nd.io.parse_single_example(record, FEATURES)
    return example["image/encoded"], example["image/class/label"]


# -------------------------------------------------------------- pipelines

def gpu_pipeline(files, batch: int, size: int, seed: int = 1) -> nd.Dataset:
    """Records are parsed and shuffled on the CPU; the encoded images go to the GPU,
    which decodes them (nvImageCodec) and augments them in one kernel per batch."""
    def augment(images, labels):
        x = nd.gpu.decode_jpeg(images, channels=3)
        x = nd.gpu.random_resized_crop(x, (size, size), seed=seed)
        x = nd.gpu.random_flip_left_right(x, seed=seed + 1)
        x = nd.gpu.hwc_to_chw(nd.gpu.normalize(x, MEAN, STD))
        return x, labels

    return (nd.TFRecordDataset(files).map(parse)
            .shuffle(1024, seed=seed)
            .batch(batch, drop_remainder=True)
            .prefetch_to_device("cuda:0")
            .map(augment)
            .prefetch(2))


def cpu_pipeline(files, batch: int, size: int, seed: int = 1) -> nd.Dataset:
    """The same augmentation on the CPU, element ``i`` drawing with counter ``i`` as on
    the GPU (so both paths give the same crops and flips for the same seed)."""
    def augment(i, example):
        image, label = example
        x = nd.image.decode_jpeg(image, channels=3, dct_method="INTEGER_ACCURATE")
        x = nd.image.random_resized_crop(x, (size, size), seed=(seed, i))
        x = nd.image.random_flip_left_right(x, (seed + 1, i))
        return nd.image.hwc_to_chw(nd.image.normalize(x, MEAN, STD)), label

    return (nd.TFRecordDataset(files).map(parse)
            .shuffle(1024, seed=seed)
            .enumerate()
            .map(augment, num_parallel_calls=nd.AUTOTUNE)
            .batch(batch, drop_remainder=True)
            .prefetch(2))


# ------------------------------------------------------------- training

class TorchStep:
    name = "torch"

    def __init__(self, size: int):
        import torch
        self.torch = torch
        self.device = "cuda" if torch.cuda.is_available() and nd.gpu.available() \
            and not nd.gpu.runtime.simulated() else "cpu"
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 5, stride=4), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, CLASSES),
        ).to(self.device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05)

    def __call__(self, images, labels) -> float:
        torch = self.torch
        if self.device == "cpu":   # device batches reach a CPU-only torch through the host
            images, labels = (v.copy_to_host() if hasattr(v, "copy_to_host") else v
                              for v in (images, labels))
        x = torch.from_dlpack(images) if not isinstance(images, np.ndarray) else \
            torch.from_numpy(images)
        y = torch.from_dlpack(labels) if not isinstance(labels, np.ndarray) else \
            torch.from_numpy(labels)
        x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
        loss = torch.nn.functional.cross_entropy(self.model(x), y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return float(loss.detach())


class JaxStep:
    name = "jax"

    def __init__(self, size: int):
        import jax
        import jax.numpy as jnp
        self.jnp = jnp
        key = jax.random.PRNGKey(0)
        self.w = jax.random.normal(key, (3, CLASSES)) * 0.01

        def loss_fn(w, x, y):
            logits = x.mean(axis=(2, 3)) @ w
            return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(y.shape[0]), y])

        @jax.jit
        def step(w, x, y):
            loss, grad = jax.value_and_grad(loss_fn)(w, x, y)
            return w - 0.05 * grad, loss

        self.step = step

    def __call__(self, images, labels) -> float:
        x = self.jnp.asarray(np.asarray(images))
        y = self.jnp.asarray(np.asarray(labels))
        self.w, loss = self.step(self.w, x, y)
        return float(loss)


class NumpyStep:
    """Softmax regression on channel means: the step when neither torch nor jax is
    installed."""

    name = "numpy"

    def __init__(self, size: int):
        self.w = np.zeros((3, CLASSES), np.float32)

    def __call__(self, images, labels) -> float:
        x = np.asarray(images).mean(axis=(2, 3))
        y = np.asarray(labels)
        logits = x @ self.w
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        loss = -np.log(p[np.arange(len(y)), y] + 1e-12).mean()
        p[np.arange(len(y)), y] -= 1
        self.w -= 0.05 * x.T @ p / len(y)
        return float(loss)


def train_steps(size: int) -> list:
    """The training steps this machine can run: torch, jax (each when installed), else
    the NumPy one."""
    steps = []
    for cls in (TorchStep, JaxStep):
        try:
            steps.append(cls(size))
        except ImportError:
            pass
    return steps or [NumpyStep(size)]


# ------------------------------------------------------------------ main

def use_gpu(device: str) -> bool:
    if device == "cpu":
        return False
    available = nd.gpu.available()
    if device == "gpu" and not available:
        raise SystemExit("--device gpu: no GPU (and NUMBA_ENABLE_CUDASIM is not set)")
    return available


def run(files, steps: int, batch: int, size: int, device: str = "auto") -> dict:
    gpu = use_gpu(device)
    ds = (gpu_pipeline if gpu else cpu_pipeline)(files, batch, size)
    pipe = ds.repeat().take(steps).compile()
    trainers = train_steps(size)
    losses = {t.name: [] for t in trainers}
    started = time.perf_counter()
    images = 0
    for x, y in pipe:
        for t in trainers:
            losses[t.name].append(t(x, y))
        images += len(y)
    seconds = time.perf_counter() - started
    stats = pipe.stats()
    return {"path": "gpu" if gpu else "cpu", "images": images, "seconds": seconds,
            "losses": losses, "stats": stats, "plan": pipe.explain(),
            "waited": _consumer_wait(stats)}


def _consumer_wait(stats) -> float:
    """Seconds the training loop waited on the last prefetch (from ``pipe.stats()``)."""
    import re
    match = re.search(r"consumer waited ([\d.]+) s", str(stats))
    return float(match.group(1)) if match else float("nan")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="directory of TFRecord shards (default: synthetic)")
    parser.add_argument("--images", type=int, default=256, help="synthetic images to make")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        files = sorted(glob.glob(os.path.join(args.data, "*"))) if args.data else \
            synthetic_images(tmp, args.images)
        result = run(files, args.steps, args.batch, args.size, args.device)
    print(result["plan"])
    print(result["stats"])
    rate = result["images"] / result["seconds"]
    print(f"{result['path']} path: {result['images']} images in {result['seconds']:.2f} s "
          f"({rate:,.0f} images/s); the training loop waited {result['waited']:.3f} s for data")
    for name, losses in result["losses"].items():
        print(f"{name} step: loss {losses[0]:.3f} -> {losses[-1]:.3f} over {len(losses)} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
