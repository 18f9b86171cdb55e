"""examples/imagenet_train.py runs end to end with tiny inputs: on the GPU path (in the
CUDA simulator) and on the CPU fallback, which give the same augmented batches.

The CUDA simulator runs every CUDA thread of a kernel as a Python thread (one block of
256 per image here), so the inputs are as small as the behaviour allows: 12 images
(3 batches of 4) cropped to 8 x 8. All tests use the same size, so the CPU path's
kernel (the size is a constant of the augment closure) is compiled once."""

import importlib.util
import math
import os

import numpy as np
import pytest

import nbdata as nd

pytest.importorskip("simplejpeg")
FILES = 12   # synthetic images: 3 batches of BATCH
BATCH = 4
SIZE = 8     # the crop: 64 threads of an image's 256-thread block do work in the simulator
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location(
        "imagenet_train", os.path.join(ROOT, "examples", "imagenet_train.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def files(example, tmp_path_factory):
    return example.synthetic_images(str(tmp_path_factory.mktemp("imagenet")), FILES)


def _host(x):
    return x.copy_to_host() if hasattr(x, "copy_to_host") else np.asarray(x)


@pytest.mark.host_only
def test_cpu_fallback_trains(example, files):
    result = example.run(files, steps=4, batch=BATCH, size=SIZE, device="cpu")
    assert result["path"] == "cpu" and result["images"] == 16
    assert "fused_stage" in result["plan"] and "decode_jpeg" in result["plan"]
    for losses in result["losses"].values():
        assert len(losses) == 4 and all(math.isfinite(v) for v in losses)
    assert result["waited"] >= 0


@pytest.mark.skipif(not nd.gpu.available(), reason="no GPU and no CUDA simulator")
def test_gpu_path_trains_and_equals_the_cpu_path(example, files):
    result = example.run(files, steps=3, batch=BATCH, size=SIZE, device="gpu")
    assert result["path"] == "gpu" and result["images"] == 12
    assert "nvImageCodec decodes the batch's JPEGs" in result["plan"]
    assert all(len(v) == 3 for v in result["losses"].values())
    gpu = [(_host(x), _host(y)) for x, y in example.gpu_pipeline(files, BATCH, SIZE)]
    cpu = [(_host(x), _host(y)) for x, y in example.cpu_pipeline(files, BATCH, SIZE)]
    assert len(gpu) == len(cpu) == FILES // BATCH
    for (gx, gy), (cx, cy) in zip(gpu, cpu):
        np.testing.assert_array_equal(gy, cy)
        assert gx.shape == cx.shape == (BATCH, 3, SIZE, SIZE)
        tolerance = 0 if nd.gpu.runtime.simulated() else 2.0
        np.testing.assert_allclose(gx, cx, rtol=1e-5, atol=tolerance)


@pytest.mark.host_only
def test_main_prints_the_rate_and_the_wait(example, capsys):
    assert example.main(["--images", "12", "--steps", "2", "--batch", "4", "--size", str(SIZE),
                         "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "cpu path: 8 images" in out and "waited" in out and "step: loss" in out
