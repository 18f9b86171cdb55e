"""The fused augment kernel's launch (issue 33): one packed parameter copy and one kernel
per batch, kernels kept per chain, a 2-D grid with int32 indexing within an image."""

import numpy as np
import pytest

import nbdata as nd
from nbdata import image
from nbdata.compiler import backend_gpu
from nbdata.gpu import runtime
from nbdata.gpu.array import DeviceArray
from nbdata.primitives.gpu import Chain

pytestmark = pytest.mark.skipif(not nd.gpu.available(), reason="no GPU and no CUDA simulator")

MEAN, STD = np.array([10.0, 20.0, 30.0]), np.array([2.0, 4.0, 8.0])


def _chain(shape=(6, 7, 3)):
    steps = [image.random_crop.primitive.gpu((4, 5), 3),
             image.random_flip_left_right.primitive.gpu(5),
             image.normalize.primitive.gpu(MEAN, STD), image.hwc_to_chw.primitive.gpu()]
    return steps, Chain(steps, shape, np.uint8)


def _reference(images, base=0):
    out = []
    for j, img in enumerate(images):
        x = image.random_crop(img, (4, 5, 3), seed=(3, base + j))
        x = image.random_flip_left_right(x, seed=(5, base + j))
        out.append(image.hwc_to_chw(image.normalize(x, MEAN, STD)))
    return np.stack(out)


def test_one_parameter_copy_and_one_kernel_per_batch(gpu_backend):
    images = np.random.default_rng(0).integers(0, 256, (3, 6, 7, 3), dtype=np.uint8)
    _, chain = _chain()
    x = DeviceArray.from_host(images)
    machine = gpu_backend
    if machine is not None:
        compute = runtime.backend().compute_stream()
        before = len(machine.kinds)
    got = backend_gpu.run_chain(chain, x, 4)
    if machine is not None:
        kinds = [k for s, k in machine.kinds[before:] if s == compute.name]
        assert kinds.count("copy to device") == 1   # crop offsets, flags, mean, std: one copy
        assert kinds.count("kernel") == 1
    np.testing.assert_allclose(got.copy_to_host(), _reference(images, 4), rtol=1e-6)
    if machine is not None:
        # the kernel's array arguments: the batch, the output and ONE buffer of the five
        # parameter arrays (the rest of its arguments are their offsets in it)
        kernel = [op for op in machine.ran if op.kind == "kernel"][-1]
        assert len(kernel.accesses) == 3


def test_parameters_of_another_dtype_than_the_kernel_reads_are_refused(monkeypatch):
    """The kernel reads each parameter's bytes in the packed buffer as the dtype its
    source was written for: a step whose parameters come out as another dtype is an
    internal error, not values read as the wrong type."""
    from nbdata.errors import InternalError
    images = np.random.default_rng(0).integers(0, 256, (2, 6, 7, 3), dtype=np.uint8)
    steps, chain = _chain()
    x = DeviceArray.from_host(images)
    backend_gpu.run_chain(chain, x, 0)   # the kernel, written for float32 constants
    normalize = steps[2]
    real = type(normalize).constants
    monkeypatch.setattr(type(normalize), "constants",
                        lambda self, c: [a.astype(np.float64) for a in real(self, c)])
    with pytest.raises(InternalError, match="the kernel reads"):
        backend_gpu.run_chain(chain, x, 0)


def test_kernel_kept_per_chain(monkeypatch):
    steps, chain = _chain()
    backend_gpu.compiled(chain)
    written = backend_gpu.stats["sources written"]
    calls = []
    real = backend_gpu.kernel_source
    monkeypatch.setattr(backend_gpu, "kernel_source", lambda c: calls.append(c) or real(c))
    again = Chain(steps, (6, 7, 3), np.uint8)   # a new Chain of the same steps: each batch's
    assert backend_gpu.compiled(again) is backend_gpu.compiled(chain)
    assert not calls and backend_gpu.stats["sources written"] == written
    backend_gpu.compiled(Chain(steps, (8, 7, 3), np.uint8))   # another element shape
    assert len(calls) == 1


def test_batches_past_the_grid_limit_loop_over_images(monkeypatch):
    monkeypatch.setattr(backend_gpu, "_GRID_Y", 2)   # 5 images on 2 rows of blocks
    images = np.random.default_rng(1).integers(0, 256, (5, 6, 7, 3), dtype=np.uint8)
    _, chain = _chain()
    got = backend_gpu.run_chain(chain, DeviceArray.from_host(images), 0)
    np.testing.assert_allclose(got.copy_to_host(), _reference(images), rtol=1e-6)


def test_elements_past_int32_indexing_are_refused():
    steps = [image.normalize.primitive.gpu(MEAN, STD)]
    with pytest.raises(ValueError, match="too large for one kernel"):
        backend_gpu.kernel_source(Chain(steps, (30000, 30000, 3), np.uint8))
    with pytest.raises(ValueError, match="int32"):
        backend_gpu._int32(np.array([2 ** 31], np.int64))
    assert backend_gpu._int32(np.array([5, -3], np.int64)).dtype == np.int32


def _bfloat16_reference(x):
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def test_float16_and_bfloat16_outputs():
    images = np.random.default_rng(2).integers(0, 256, (2, 6, 7, 3), dtype=np.uint8)
    d = DeviceArray.from_host(images)
    normalized = nd.gpu.normalize(d, MEAN, STD)
    ref = normalized.copy_to_host()
    half = nd.gpu.cast(normalized, np.float16)
    assert half.dtype == np.float16
    np.testing.assert_array_equal(half.copy_to_host(), ref.astype(np.float16))
    bf = nd.gpu.cast(normalized, "bfloat16")
    assert bf.dtype == np.uint16   # bfloat16 bit patterns
    np.testing.assert_array_equal(bf.copy_to_host(), _bfloat16_reference(ref))
    assert _bfloat16_reference(np.float32([1.0]))[0] == 0x3F80
    # fused: crop + flip + normalize + cast + CHW, one kernel, float16 out
    steps = [image.random_crop.primitive.gpu((4, 5), 3),
             image.random_flip_left_right.primitive.gpu(5),
             image.normalize.primitive.gpu(MEAN, STD), image.cast.primitive.gpu(np.float16),
             image.hwc_to_chw.primitive.gpu()]
    got = backend_gpu.run_chain(Chain(steps, (6, 7, 3), np.uint8), d, 0).copy_to_host()
    np.testing.assert_array_equal(got, _reference(images).astype(np.float16))
    with pytest.raises(ValueError, match="cast to float16 or bfloat16 last"):
        Chain([image.cast.primitive.gpu(np.float16), image.normalize.primitive.gpu(MEAN, STD)],
              (6, 7, 3), np.uint8)


def test_batch_windows_equal_the_per_image_draws():
    step = image.random_resized_crop.primitive.gpu((8, 8), seed=(7, 3))
    sizes = np.array([(40, 60, 3), (17, 5, 3), (100, 30, 3), (9, 9, 3)], np.int64)
    got = np.stack(step.params((None, None, 3), 11, 4, sizes))
    for j, (h, w, _) in enumerate(sizes):
        assert tuple(got[:, j]) == image.random_resized_crop_window(
            int(h), int(w), seed=(7, 3 + 11 + j))
    uniform = np.stack(step.params((50, 70, 3), 0, 3))
    for j in range(3):
        assert tuple(uniform[:, j]) == image.random_resized_crop_window(50, 70, seed=(7, 3 + j))


class _Stores:
    """An output array that records which index each store wrote, in order."""

    def __init__(self, size):
        self.values = np.full(size, np.nan, np.float32)
        self.order: list = []

    def __setitem__(self, index, value):
        self.order.append(int(index))
        self.values[int(index)] = value


def _run_threads(chain, images, params, threads):
    """The chain's kernel source run as plain Python for the given threads (x index),
    image 0: {thread: [output index of each store, in order]} and the output."""
    import types

    from nbdata.compiler.emit import materialize
    text, glb = backend_gpu.kernel_source(chain)
    stores = _Stores(int(np.prod(chain.out_shape)) * len(images))
    written = {}
    for t in threads:
        cuda = types.SimpleNamespace(blockIdx=types.SimpleNamespace(x=t // backend_gpu._THREADS, y=0),
                                     threadIdx=types.SimpleNamespace(x=t % backend_gpu._THREADS),
                                     gridDim=types.SimpleNamespace(y=len(images)))
        fn = materialize("kernel", text, dict(glb, cuda=cuda), "gpu-chain-test")
        before = len(stores.order)
        fn(images.reshape(-1), stores, len(images), *backend_gpu.host_arguments(params))
        written[t] = stores.order[before:]
    return written, stores.values


@pytest.mark.host_only
def test_a_warp_stores_adjacent_values_and_every_value_once():
    """Thread t writes values per_row apart, so one store instruction of 32 consecutive
    threads writes 32 adjacent values of a plane (a coalesced store), and the threads of
    an image write each output value exactly once."""
    images = np.random.default_rng(3).integers(0, 256, (2, 10, 12, 3), dtype=np.uint8)
    steps = [image.random_crop.primitive.gpu((8, 8), 3),
             image.random_flip_left_right.primitive.gpu(5),
             image.normalize.primitive.gpu(MEAN, STD), image.hwc_to_chw.primitive.gpu()]
    chain = Chain(steps, (10, 12, 3), np.uint8)
    vec, planes = backend_gpu.values_per_thread(chain), backend_gpu.channel_planes(chain)
    assert (vec, planes) == (4, 3)
    params, _, _ = backend_gpu._params(chain, DeviceArray.from_host(images), 0, 2)
    threads = backend_gpu.threads_per_image(chain)   # 8 x 8 / 4 = 16
    written, values = _run_threads(chain, images, params, range(threads))
    # store k of every thread: adjacent values of one plane, runs of a row's threads
    per_row = 8 // vec
    for k in range(vec * planes):
        for row in range(8):
            run = [written[t][k] for t in range(row * per_row, (row + 1) * per_row)]
            assert run == list(range(run[0], run[0] + per_row)), (k, row, run)
    image0 = [i for t in range(threads) for i in written[t] if i < 3 * 64]
    assert sorted(image0) == list(range(3 * 64))   # each value of image 0 once
    got = values[:3 * 64].reshape(3, 8, 8)
    x = image.random_crop(images[0], (8, 8, 3), seed=(3, 0))
    x = image.random_flip_left_right(x, seed=(5, 0))
    np.testing.assert_allclose(got, image.hwc_to_chw(image.normalize(x, MEAN, STD)), rtol=1e-6)
