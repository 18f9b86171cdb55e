"""examples/imagenet_train.py runs end to end with tiny inputs: on the GPU path (in the
CUDA simulator) and on the CPU fallback, which give the same augmented batches."""

import importlib.util
import math
import os

import numpy as np
import pytest

import nbdata as nd

pytest.importorskip("simplejpeg")
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
    return example.synthetic_images(str(tmp_path_factory.mktemp("imagenet")), 24)


def _host(x):
    return x.copy_to_host() if hasattr(x, "copy_to_host") else np.asarray(x)


def test_cpu_fallback_trains(example, files):
    result = example.run(files, steps=4, batch=4, size=16, device="cpu")
    assert result["path"] == "cpu" and result["images"] == 16
    assert "fused_stage" in result["plan"] and "decode_jpeg" in result["plan"]
    for losses in result["losses"].values():
        assert len(losses) == 4 and all(math.isfinite(v) for v in losses)
    assert result["waited"] >= 0


@pytest.mark.skipif(not nd.gpu.available(), reason="no GPU and no CUDA simulator")
def test_gpu_path_trains_and_equals_the_cpu_path(example, files):
    result = example.run(files, steps=3, batch=4, size=16, device="gpu")
    assert result["path"] == "gpu" and result["images"] == 12
    assert "nvImageCodec decodes the batch's JPEGs" in result["plan"]
    assert all(len(v) == 3 for v in result["losses"].values())
    gpu = [(_host(x), _host(y)) for x, y in example.gpu_pipeline(files, 4, 16)]
    cpu = [(_host(x), _host(y)) for x, y in example.cpu_pipeline(files, 4, 16)]
    assert len(gpu) == len(cpu) == 6
    for (gx, gy), (cx, cy) in zip(gpu, cpu):
        np.testing.assert_array_equal(gy, cy)
        assert gx.shape == cx.shape == (4, 3, 16, 16)
        tolerance = 0 if nd.gpu.runtime.simulated() else 2.0
        np.testing.assert_allclose(gx, cx, rtol=1e-5, atol=tolerance)


def test_main_prints_the_rate_and_the_wait(example, capsys):
    assert example.main(["--images", "12", "--steps", "2", "--batch", "4", "--size", "16",
                         "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "cpu path: 8 images" in out and "waited" in out and "step: loss" in out
