"""The CUDA-rules double's nvImageCodec keeps nvImageCodec's rules (issue 33): a decoder
uses only the backends it was made with, and a target smaller than the image fails
that image instead of being written in part."""

import numpy as np
import pytest

cuda_rules = pytest.importorskip("cuda_rules")
pytest.importorskip("simplejpeg")

import nbdata as nd  # noqa: E402
from nbdata.gpu import jpeg, runtime  # noqa: E402


def _once(gpu_backend):
    if gpu_backend is not None or not runtime.simulated():
        pytest.skip("installs the CUDA-rules double itself: runs once, on the simulator")


def test_backends_and_buffer_size_are_honoured(gpu_backend):
    _once(gpu_backend)
    blob = bytes(nd.image.encode_jpeg(np.full((12, 10, 3), 90, np.uint8), quality=90))
    with cuda_rules.installed(5) as machine:
        codec, be = machine.nvimgcodec, machine.backend
        machine.hw_decoder = False   # a GPU without the hardware JPEG decoder
        hw_only = codec.Decoder(device_id=0, backends=[codec.Backend(codec.BackendKind.HW_GPU_ONLY)])
        assert hw_only.decode([codec.CodeStream(blob)]) == [None]
        anyone = codec.Decoder(device_id=0, backends=jpeg.gpu_backends(codec))
        (img,) = anyone.decode([codec.CodeStream(blob)])
        assert img.cpu().shape == (12, 10, 3)
        # nbdata's decoder (hardware first, then CUDA and hybrid) still decodes there
        batch = jpeg.decode_values([blob, blob], 3, None)
        assert [i.shape for i in batch.copy_to_host()] == [(12, 10, 3)] * 2
        # a target smaller than the image: that image fails, nothing is written
        small = be.alloc(12 * 9 * 3)
        from nbdata.gpu.array import DeviceArray
        target = DeviceArray(small, (12, 9, 3), np.uint8)
        out = anyone.decode([codec.CodeStream(blob)], images=[codec.as_image(target)])
        assert out == [None] and "too small" in anyone.failures[-1]
