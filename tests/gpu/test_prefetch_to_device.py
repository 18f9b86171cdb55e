"""prefetch_to_device and GPU maps in pipelines: staging, fusion of consecutive maps into
one kernel, equality with the CPU ops, save/restore (CUDA simulator unless
NBDATA_GPU_TESTS=device)."""

import numpy as np
import pytest

import nbdata as nd
from nbdata.gpu.array import DeviceArray
from nbdata.ops.gpu_map import GpuMap

pytestmark = pytest.mark.skipif(not nd.gpu.available(), reason="no GPU and no CUDA simulator")

MEAN = np.array([10.0, 20.0, 30.0])
STD = np.array([2.0, 4.0, 8.0])


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(1)
    return rng.integers(0, 256, (5, 6, 7, 3)).astype(np.uint8), np.arange(5, dtype=np.int64) * 10


def augment(ds):
    return (ds.map(lambda im, lab: (nd.gpu.random_crop(im, (4, 5), seed=3), lab))
              .map(lambda im, lab: (nd.gpu.random_flip_left_right(im, seed=5), lab))
              .map(lambda im, lab: (nd.gpu.hwc_to_chw(nd.gpu.normalize(im, MEAN, STD)), lab)))


def cpu_augment(images):
    return np.stack([nd.image.normalize(nd.image.random_flip_left_right(
        nd.image.random_crop(images[j], (4, 5, 3), (3, j)), (5, j)), MEAN, STD).transpose(2, 0, 1)
        for j in range(len(images))])


def gpu_maps(pipe):
    found, stack = [], [pipe.optimized]
    while stack:
        node = stack.pop()
        if isinstance(node, GpuMap):
            found.append(node)
        stack.extend(node.inputs)
    return found


def collect(pipe):
    out = []
    for images, labels in pipe:
        assert isinstance(images, DeviceArray) and isinstance(labels, DeviceArray)
        out.append((images.copy_to_host(), labels.copy_to_host()))
    return out


def test_consecutive_gpu_maps_run_as_one_kernel_and_equal_the_cpu_ops(data):
    images, labels = data
    ds = augment(nd.Dataset.from_tensor_slices((images, labels)).batch(2).prefetch_to_device("cuda:0"))
    assert ds.element_spec[0] == nd.TensorSpec((None, 3, 4, 5), np.float32)
    pipe = ds.compile()
    assert len(gpu_maps(pipe)) == 1 and "gpu_map_fusion" in pipe.applied_passes
    text = pipe.explain()
    assert text.count("def kernel(") == 1 and "random_crop((4, 5)" in text and "hwc_to_chw" in text
    out = collect(pipe)
    assert [len(b) for _, b in out] == [2, 2, 1]
    np.testing.assert_array_equal(np.concatenate([a for a, _ in out]), cpu_augment(images))
    np.testing.assert_array_equal(np.concatenate([b for _, b in out]), labels)


def test_without_gpu_map_fusion_each_map_is_its_own_kernel_with_the_same_values(data):
    # 3 images (a full batch and a partial one): each of the 3 kernels launches one
    # 256-thread block per image, run thread by thread in the CUDA simulator
    images, labels = data[0][:3], data[1][:3]
    opts = nd.Options()
    opts.optimization.gpu_map_fusion = False
    ds = augment(nd.Dataset.from_tensor_slices((images, labels)).batch(2).prefetch_to_device())
    pipe = ds.with_options(opts).compile()
    assert len(gpu_maps(pipe)) == 3 and pipe.explain().count("def kernel(") == 3
    out = collect(pipe)
    np.testing.assert_array_equal(np.concatenate([a for a, _ in out]), cpu_augment(images))


def test_counters_continue_across_batches_and_epochs_restart(data):
    images = data[0][:3]   # batches of 2 and 1: the second batch's counter starts at 2
    ds = (nd.Dataset.from_tensor_slices(images).batch(2).prefetch_to_device()
          .map(lambda im: nd.gpu.random_crop(im, (2, 3), seed=11)))
    first = [b.copy_to_host() for b in ds]
    second = [b.copy_to_host() for b in ds]
    assert [len(b) for b in first] == [len(b) for b in second] == [2, 1]
    want = np.stack([nd.image.random_crop(images[j], (2, 3, 3), (11, j)) for j in range(3)])
    np.testing.assert_array_equal(np.concatenate(first), want)
    np.testing.assert_array_equal(np.concatenate(second), want)


def test_save_and_restore_across_prefetch_to_device(data):
    images, labels = data
    pipe = augment(nd.Dataset.from_tensor_slices((images, labels)).batch(2)
                   .prefetch_to_device(buffer_size=2)).compile()
    it = iter(pipe)
    next(it)
    state = it.save()
    rest = [(a.copy_to_host(), b.copy_to_host()) for a, b in it]
    again = iter(pipe)
    again.restore(state)
    restored = [(a.copy_to_host(), b.copy_to_host()) for a, b in again]
    assert len(restored) == len(rest) == 2
    for (a, b), (c, d) in zip(rest, restored):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)


def test_strings_stay_on_the_host(data):
    images, _ = data
    names = np.array([b"a", b"b", b"c", b"d", b"e"], dtype=object)
    ds = (nd.Dataset.from_tensor_slices((images, names)).batch(5).prefetch_to_device()
          .map(lambda im, n: (nd.gpu.cast(im, np.float32), n)))
    (x, n), = list(ds)
    assert isinstance(x, DeviceArray) and isinstance(n, np.ndarray)
    assert n.tolist() == names.tolist()
    np.testing.assert_array_equal(x.copy_to_host(), images.astype(np.float32))


def test_map_with_device_cuda_applies_a_function_to_every_value(data):
    images, _ = data
    small = images[:2, :2, :2].astype(np.float32)
    ds = (nd.Dataset.from_tensor_slices(small).batch(2).prefetch_to_device()
          .map(lambda v: v * 0.5 - 1.0, device="cuda")
          .map(lambda x: nd.gpu.normalize(x, 1.0, 2.0)))
    pipe = ds.compile()
    assert pipe.explain().count("def kernel(") == 1
    (out,) = [b.copy_to_host() for b in pipe]
    np.testing.assert_allclose(out, ((small * 0.5 - 1.0).astype(np.float32) - 1) / 2, rtol=1e-6)


def test_experimental_transformations(data):
    images, _ = data
    for transform in (nd.experimental.copy_to_device("/gpu:0"),
                      nd.experimental.prefetch_to_device("gpu:0")):
        (x,) = list(nd.Dataset.from_tensor_slices(images).batch(5).apply(transform))
        np.testing.assert_array_equal(x.copy_to_host(), images)


def test_errors():
    ds = nd.Dataset.from_tensor_slices(np.zeros((4, 2, 2, 3), np.uint8)).batch(2)
    with pytest.raises(ValueError, match="prefetch_to_device"):
        ds.map(lambda x: x, device="cuda")
    staged = ds.prefetch_to_device()
    with pytest.raises(TypeError, match="nd.gpu ops"):
        staged.map(lambda x: x * 2)
    with pytest.raises(ValueError, match="not a GPU device"):
        ds.prefetch_to_device("tpu:0")
    with pytest.raises(ValueError, match="source device must be the CPU"):
        nd.experimental.copy_to_device("/gpu:0", source_device="/gpu:1")
    with pytest.raises(ValueError, match="known element shape"):
        nd.Dataset.range(4).map(lambda i: np.zeros(i, np.float32)).batch(2).prefetch_to_device() \
            .map(lambda x: nd.gpu.cast(x, np.int32))


def staging_counts(pipe) -> dict:
    (stage,) = [s for s in pipe.stats().stages if s.title.startswith("prefetch_to_device")]
    return {k: v for k, v in stage.chosen.items() if k.endswith("copies")}


def test_fused_batches_are_written_into_pinned_memory_and_copied_as_they_are():
    # 64 x 32x32x3 uint8 through a fused map + batch: the stage's output buffers come from
    # the pinned pool, so every image batch goes to the device without a staging copy
    # (the small label batches are staged).
    rng = np.random.default_rng(2)
    images = rng.integers(0, 256, (64, 32, 32, 3)).astype(np.uint8)
    opts = nd.Options()
    opts.fusion_min_rows = 0
    ds = (nd.Dataset.from_tensor_slices((images, np.arange(64))).map(lambda x, y: (x, y * 2))
          .batch(16).with_options(opts).prefetch_to_device())
    pipe = ds.compile()
    assert pipe.fused_stages()
    out = [(a.copy_to_host(), b.copy_to_host()) for a, b in pipe]
    np.testing.assert_array_equal(np.concatenate([a for a, _ in out]), images)
    np.testing.assert_array_equal(np.concatenate([b for _, b in out]), np.arange(64) * 2)
    assert staging_counts(pipe) == {"direct copies": 4, "staged copies": 4}


def test_pinned_blocks_return_to_the_pool_when_their_arrays_are_gone():
    import gc
    from nbdata.gpu import runtime
    from nbdata.ops.prefetch_to_device import PinnedPool, _pinned
    pool = PinnedPool(runtime.backend())
    a = pool.empty((256, 1024), np.float32)
    view = a[10:20]
    assert _pinned(view) and not _pinned(np.zeros(3))
    del a
    gc.collect()
    assert not pool.free          # the view still holds the block
    del view
    gc.collect()
    assert sum(len(v) for v in pool.free.values()) == 1
    b = pool.empty((256, 1024), np.float32)   # reused, not allocated again
    assert not any(pool.free.values()) and _pinned(b)
    assert not _pinned(pool.empty((4,), np.float32))   # small arrays are ordinary memory
