"""nbdata's CUDA backend (``runtime.CudaBackend``, DeviceArray transfers and protocols,
prefetch_to_device staging, kernel launches, nvImageCodec decodes) against the
CUDA-rules double (cuda_rules.py): work runs later, per stream, in a seeded order that
only events and waits constrain; freed memory is poisoned; a call without a current
context fails; unordered access is a violation naming the buffer and the streams.

The first tests check the double itself; then each defect a review of the GPU code found
before it met a GPU has a test that fails without its fix (defect numbers of issue 21).
The whole tests/gpu and tests/examples suite also runs on the double (the "rules"
variant of each test, conftest.py)."""

import threading
import tomllib
from pathlib import Path

import numpy as np
import pytest

import nbdata as nd
from nbdata.gpu import runtime
from nbdata.gpu.array import DeviceArray

cuda_rules = pytest.importorskip("cuda_rules")
pytest.importorskip("simplejpeg")
pytestmark = pytest.mark.skipif(not nd.gpu.available() or not runtime.simulated(),
                                reason="the double runs kernels in Numba's CUDA simulator")


@pytest.fixture
def machine():
    """The double with no progress of its own: work runs only when the host waits."""
    with cuda_rules.installed(seed=0, progress=0.0) as m:
        yield m


def _expect_violation(m, pattern):
    with pytest.raises(cuda_rules.CudaRulesError, match=pattern):
        m.synchronize()
    m.violations.clear()


# ------------------------------------------------------------------ the double
def test_work_runs_when_the_host_waits_for_it(machine):
    be = runtime.backend()
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    d = DeviceArray.from_host(x)
    assert not any(op.kind == "copy to device" for op in machine.ran)   # queued, not run
    assert d.__cuda_array_interface__["stream"] == d.stream.handle == be.default.handle
    np.testing.assert_array_equal(d.copy_to_host(), x)          # waits for the copy
    assert [op.kind for op in machine.ran].count("copy to device") == 1
    np.testing.assert_array_equal(d[1].copy_to_host(), x[1])    # an offset view
    np.testing.assert_array_equal(d.view(np.uint8).copy_to_host(), x.view(np.uint8))
    assert d.__cuda_array_interface__["stream"] is None         # its copy is done


def test_a_read_on_another_stream_without_a_wait_reads_garbage_and_fails(machine):
    be = runtime.backend()
    writer, reader = be.stream(), be.stream()
    d = DeviceArray.empty((16,), np.uint8, writer)
    writer.sync()
    be.copy_h2d(d.buffer, np.full(16, 7, np.uint8), writer)
    out = np.empty(16, np.uint8)
    be.copy_d2h(out, d.buffer, 16, reader)   # no wait for the copy: runs first
    assert (out == cuda_rules.POISON_FRESH).all()
    _expect_violation(machine, rf"on {reader.name} \(queued #\d+\) read device buffer #\d+ .* "
                               rf"before copy .* on {writer.name}, queued earlier, wrote it")


def test_a_read_before_the_allocation_ran_fails(machine):
    be = runtime.backend()
    writer, reader = be.stream(), be.stream()
    d = DeviceArray.from_host(np.full(16, 7, np.uint8), writer)
    out = np.empty(16, np.uint8)
    with pytest.raises(cuda_rules.CudaRulesError,   # where the host waited for the copy
                       match=rf"on {reader.name} touched device buffer #\d+ .* before its "
                             rf"allocation ran \(allocated on {writer.name}"):
        be.copy_d2h(out, d.buffer, 16, reader)
    machine.violations.clear()


def test_freed_memory_is_poisoned_and_reading_it_names_buffer_and_streams(machine):
    be = runtime.backend()
    d = DeviceArray.from_host(np.arange(8, dtype=np.float32))
    consumer = cuda_rules.Consumer(machine)
    consumer.read(consumer.take(d))
    d.buffer.buffer.close(be.default)   # a release not ordered after the consumer
    be.default.sync()
    with pytest.raises(cuda_rules.CudaRulesError,
                       match=r"consumer's kernel .* on a consumer's stream touched device "
                             r"buffer #\d+ .* after its release .*released on stream"):
        consumer.results()
    assert consumer.read_back[0].view(np.uint8).tolist() == [cuda_rules.POISON_FREED] * 32
    machine.violations.clear()


def test_a_call_without_a_current_context_fails(machine):
    errors = []

    def work():
        try:
            machine.device.create_stream()
        except RuntimeError as e:
            errors.append(str(e))
        errors.append(machine.driver.cuMemcpyHtoDAsync(0, 0, 1, 1))
    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert "CUDA_ERROR_INVALID_CONTEXT" in errors[0] and errors[1] == (201,)


def test_the_same_seed_gives_the_same_schedule():
    def schedule(seed):
        with cuda_rules.installed(seed=seed, progress=0.5) as m:
            be = runtime.backend()
            streams = [be.stream() for _ in range(3)]
            arrays = [DeviceArray.from_host(np.arange(4) + k, s) for k, s in enumerate(streams)]
            for a in arrays:
                a.copy_to_host()
            return [(op.seq, op.kind, op.stream.name) for op in m.ran]
    assert schedule(1) == schedule(1)
    assert len({tuple(schedule(s)) for s in range(6)}) > 1


# ------------------------------------------------------------------ defect 1
def test_every_thread_that_calls_cuda_makes_the_device_current(machine):
    # Prefetch producers and the staging thread allocate pinned memory, record events
    # and copy on threads of their own: the backend binds the device on each.
    results, errors = [], []

    def work():
        try:
            d = DeviceArray.from_host(np.arange(6, dtype=np.int16))
            results.append(d.copy_to_host())
            results.append(runtime.backend().pinned(16)[1].size)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert not errors, errors
    np.testing.assert_array_equal(results[0], np.arange(6, dtype=np.int16))
    assert results[1] == 16


def test_prefetch_to_device_pipeline_on_the_double(machine):
    images = np.random.default_rng(3).integers(0, 256, (64, 32, 32, 3)).astype(np.uint8)
    opts = nd.Options()
    opts.fusion_min_rows = 0
    ds = (nd.Dataset.from_tensor_slices((images, np.arange(64))).map(lambda x, y: (x, y + 1))
          .batch(16).with_options(opts).prefetch_to_device("cuda:0"))
    out = [(a.copy_to_host(), b.copy_to_host()) for a, b in ds]
    np.testing.assert_array_equal(np.concatenate([a for a, _ in out]), images)
    np.testing.assert_array_equal(np.concatenate([b for _, b in out]), np.arange(64) + 1)
    (stage,) = [s for s in ds.compile().stats().stages if s.title.startswith("prefetch_to_device")]
    assert stage.chosen["direct copies"] == 4


# ------------------------------------------------------------------ defect 2
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("protocol", ["dlpack", "cai"])
def test_a_framework_s_late_kernels_read_the_batches_it_was_given(seed, protocol):
    # PyTorch's pattern: take the batch (DLPack on its stream, or the CUDA array interface
    # on the legacy stream), queue kernels that read it, drop the tensor and go on. The
    # kernels run late; the pool may not hand the batch's memory to a later batch first.
    rows = np.arange(48 * 64, dtype=np.float32).reshape(48, 64)
    with cuda_rules.installed(seed=seed, progress=0.0) as m:
        consumer = cuda_rules.Consumer(m, protocol)
        ds = nd.Dataset.from_tensor_slices(rows).batch(2).prefetch_to_device("cuda:0", 1)
        for batch in ds:
            tensor = consumer.take(batch)
            consumer.read(tensor)
            del tensor, batch
        np.testing.assert_array_equal(np.concatenate(consumer.results()), rows)
        assert sum(kind == "free" for _, kind in m.kinds) >= 12   # memory was reused


def test_memory_goes_back_only_after_the_last_view(machine):
    d = DeviceArray.from_host(np.arange(4, dtype=np.float32))
    view = d[1:]
    del d
    import gc
    gc.collect()
    assert not any(kind == "free" for _, kind in machine.kinds)
    del view
    gc.collect()
    assert any(kind == "free" for _, kind in machine.kinds)


def test_kernels_of_nbdata_do_not_count_as_consumers(machine):
    from nbdata.compiler.backend_gpu import _Raw
    d = DeviceArray.from_host(np.arange(4, dtype=np.float32))
    _Raw(d)
    assert d.buffer.consumers == set()


# ------------------------------------------------------------------ defect 3
def _with_orientation(blob: bytes, orientation: int) -> bytes:
    """The JPEG with an EXIF APP1 segment whose Orientation tag is ``orientation``."""
    ifd = (b"\x01\x00" + b"\x12\x01" + b"\x03\x00" + b"\x01\x00\x00\x00"
           + orientation.to_bytes(2, "little") + b"\x00\x00" + b"\x00\x00\x00\x00")
    body = b"Exif\x00\x00" + b"II*\x00\x08\x00\x00\x00" + ifd
    return blob[:2] + b"\xff\xe1" + (len(body) + 2).to_bytes(2, "big") + body + blob[2:]


def test_exif_orientation_is_not_applied(machine):
    image = np.random.default_rng(0).integers(0, 256, (12, 20, 3)).astype(np.uint8)
    blob = _with_orientation(nd.image.encode_jpeg(image, quality=95), 6)
    batch = nd.gpu.decode_jpeg([blob], channels=3)
    want = nd.image.decode_jpeg(blob, channels=3, dct_method="INTEGER_ACCURATE")
    assert want.shape == (12, 20, 3)   # nd.image and TensorFlow keep the stored layout
    (got,) = batch.copy_to_host()
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------ defect 4
def test_decodes_run_on_nbdata_s_stream_not_the_legacy_default_stream(machine):
    be = runtime.backend()
    blobs = [nd.image.encode_jpeg(np.full((8, 8, 3), k * 40, np.uint8)) for k in range(3)]
    batch = nd.gpu.decode_jpeg(blobs, channels=3)
    stream = be.decode_stream()   # this thread's, made once
    assert stream is be.decode_stream() and stream is not be.compute_stream()
    assert machine.ops_on(stream).count("decode") == 3
    assert machine.ops_on(machine.legacy) == []
    assert batch.data.stream is stream and not batch.ready.timing
    assert [int(im.mean()) for im in batch.copy_to_host()] == [0, 40, 80]


def test_a_decoded_batch_is_released_without_waiting_for_the_legacy_stream(machine):
    """nvImageCodec writes the batch on nbdata's stream, so its memory goes back to the
    pool after nbdata's work only: the decode targets note no consumer (the legacy default
    stream, where a training loop's kernels queue, would hold the block until they ran)."""
    be = runtime.backend()
    blobs = [nd.image.encode_jpeg(np.full((8, 6 + k, 3), k * 40, np.uint8)) for k in range(3)]
    batch = nd.gpu.decode_jpeg(blobs, channels=3)
    assert batch.data.buffer.consumers == set()
    # each image's target is its own bytes of the one buffer, of its own shape
    decoded = machine.decoders[-1]
    assert not decoded.failures
    assert [im.shape for im in batch.copy_to_host()] == [(8, 6, 3), (8, 7, 3), (8, 8, 3)]
    assert [int(im.mean()) for im in batch.copy_to_host()] == [0, 40, 80]
    # a consumer that takes an image through the interface still counts
    batch[1].__cuda_array_interface__
    assert batch.data.buffer.consumers == {1}
    assert be.decode_stream() is batch.data.stream


# ------------------------------------------------------------------ defect 5
def test_the_cuda_extra_asks_for_the_versions_whose_api_the_code_calls():
    from packaging.requirements import Requirement
    from packaging.version import Version
    meta = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    floors = {}
    for text in meta["project"]["optional-dependencies"]["cuda"]:
        req = Requirement(text)
        floors[req.name] = min((Version(s.version) for s in req.specifier if s.operator == ">="),
                               default=None)
    assert floors["cuda-core"] >= Version("1.2")                  # stream/event contexts
    assert floors["nvidia-nvimgcodec-cu12"] >= Version("0.9")     # sample_format=, image=


# ------------------------------------------------------------------ defect 6
def test_kernels_run_on_a_compute_stream_and_copies_overlap_them(machine):
    # 2 batches of 2 (each image a 256-thread block in the simulator): copies and kernels
    images = np.random.default_rng(1).integers(0, 256, (4, 6, 7, 3)).astype(np.uint8)
    ds = (nd.Dataset.from_tensor_slices(images).batch(2).prefetch_to_device("cuda:0")
          .map(lambda im: nd.gpu.normalize(im, [1.0, 2.0, 3.0], [2.0, 2.0, 2.0])))
    out = [x.copy_to_host() for x in ds]
    want = (images.astype(np.float32) - np.float32([1, 2, 3])) / np.float32(2)
    np.testing.assert_allclose(np.concatenate(out), want, rtol=1e-6)
    kernels = {op.stream for op in machine.ran if op.kind == "kernel"}
    batch_bytes = f" {2 * 6 * 7 * 3} B"   # a batch's staging copy
    staging = {op.stream for op in machine.ran
               if op.kind == "copy to device" and batch_bytes in op.name}
    assert kernels and staging and not kernels & staging   # not behind the staging copies


def _ops(machine, stream, kind: str) -> list:
    """The ops of ``kind`` queued on ``stream`` so far (run or not), in order."""
    return [o for o in _queued(machine) if o.stream is stream and o.kind == kind]


def test_the_next_batch_s_decode_does_not_wait_for_this_batch_s_kernel(machine):
    """Batch k's decoded images are freed on the kernel's stream, after its kernel: on
    the decode stream, the free would have made batch k+1's decode wait for that kernel
    (no overlap of decode and augment on the device)."""
    from nbdata import image
    from nbdata.compiler import backend_gpu
    from nbdata.primitives.jpeg import decode_jpeg
    be = runtime.backend()
    rng = np.random.default_rng(4)
    pixels = [rng.integers(0, 256, (12 + k, 10, 3)).astype(np.uint8) for k in range(4)]
    blobs = np.array([nd.image.encode_jpeg(p, quality=95) for p in pixels], dtype=object)
    steps = [decode_jpeg.primitive.gpu(3), image.resize.primitive.gpu((6, 6)),
             image.random_flip_left_right.primitive.gpu(4), image.hwc_to_chw.primitive.gpu()]
    first = backend_gpu.run_steps(steps, blobs[:2], 0)   # its decoded batch is gone now
    (kernel,) = _ops(machine, be.compute_stream(), "kernel")
    decoded = len(_ops(machine, be.decode_stream(), "decode"))
    second = backend_gpu.run_steps(steps, blobs[2:], 2)
    decodes = _ops(machine, be.decode_stream(), "decode")[decoded:]
    assert len(decodes) == 2
    assert not any(machine.ordered_after(d, kernel) for d in decodes)
    (_, kernel2) = _ops(machine, be.compute_stream(), "kernel")
    assert machine.ordered_after(kernel2, decodes[-1])   # the kernel waits for its decode
    for got, k in ((first, 0), (second, 2)):
        want = [image.hwc_to_chw(image.random_flip_left_right(image.resize(
            nd.image.decode_jpeg(blobs[k + j], channels=3, dct_method="INTEGER_ACCURATE"),
            (6, 6)), seed=(4, k + j))) for j in range(2)]
        np.testing.assert_allclose(got.copy_to_host(), np.stack(want), rtol=1e-5, atol=1e-4)


def test_the_next_batch_s_copy_does_not_wait_for_this_batch_s_kernel(machine):
    """The same for staged batches: freed after the kernel that read them, on its stream,
    so the staging stream's next copies are not queued behind that kernel."""
    be = runtime.backend()
    staging = be.stream()
    images = np.random.default_rng(5).integers(0, 256, (4, 5, 6, 3)).astype(np.uint8)
    x = DeviceArray.from_host(images[:2], staging)
    first = nd.gpu.normalize(x, [1.0, 2.0, 3.0], [2.0, 2.0, 2.0])
    del x
    (kernel,) = _ops(machine, be.compute_stream(), "kernel")
    y = DeviceArray.from_host(images[2:], staging)
    (_, copy) = _ops(machine, staging, "copy to device")
    assert not machine.ordered_after(copy, kernel)
    second = nd.gpu.normalize(y, [1.0, 2.0, 3.0], [2.0, 2.0, 2.0])
    want = (images.astype(np.float32) - np.float32([1, 2, 3])) / np.float32(2)
    np.testing.assert_allclose(np.concatenate([first.copy_to_host(), second.copy_to_host()]),
                               want, rtol=1e-6)


def test_memory_read_by_kernels_on_two_streams_is_freed_after_both(machine):
    """A batch read by nbdata kernels on two threads' compute streams is freed on the
    last one's after the first one's kernel too (the first stream became a consumer)."""
    be = runtime.backend()
    images = np.random.default_rng(6).integers(0, 256, (2, 4, 4, 3)).astype(np.uint8)
    x = DeviceArray.from_host(images)
    out = {}

    def normalize_on_a_thread():
        out["other"] = nd.gpu.normalize(x, [0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    t = threading.Thread(target=normalize_on_a_thread)
    t.start()
    t.join()
    mine = nd.gpu.normalize(x, [0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    memory = x.buffer
    release_stream = memory.release[0]
    assert release_stream is be.compute_stream()
    assert memory.consumers and int(release_stream.handle) not in memory.consumers
    (other_kernel,) = [o for o in _queued(machine)
                       if o.kind == "kernel" and o.stream is not release_stream]
    block = memory.buffer.block.name
    del x, memory
    import gc
    gc.collect()
    (free,) = [o for o in _ops(machine, release_stream, "free") if block in o.name]
    assert machine.ordered_after(free, other_kernel)
    for got in (out["other"], mine):
        np.testing.assert_array_equal(got.copy_to_host(), images.astype(np.float32))


def test_preparing_a_batch_does_not_wait_for_the_kernels_before_it(machine):
    """Each launch packs its parameters into a pinned block, given back with its copy's
    event: the next launches take a block whose copy is done, or a new one, or wait only
    for the oldest copy, never for the newest (queued behind the previous kernel)."""
    from nbdata.ops.prefetch_to_device import shared_blocks
    be = runtime.backend()
    images = np.random.default_rng(7).integers(0, 256, (3, 2, 4, 4, 3)).astype(np.uint8)
    batches = [DeviceArray.from_host(b) for b in images]
    be.default.sync()
    outs = [nd.gpu.random_flip_left_right(b, seed=3) for b in batches]
    kernels = _ops(machine, be.compute_stream(), "kernel")
    assert len(kernels) == 3 and not any(k.done for k in kernels)   # the host ran ahead
    assert shared_blocks(be).allocations >= 2
    for k, out in enumerate(outs):
        want = [nd.image.random_flip_left_right(images[k][j], seed=(3, j)) for j in range(2)]
        np.testing.assert_array_equal(out.copy_to_host(), np.stack(want))


def test_ready_events_do_not_time_and_copy_times_do(machine):
    from nbdata.ops.prefetch_to_device import Stager
    d = DeviceArray.from_host(np.arange(5, dtype=np.int32))
    assert d.ready is not None and not d.ready.timing
    staged = Stager(0, 2).to_device(np.arange(5, dtype=np.int32))
    assert staged.ready.timing
    with pytest.raises(RuntimeError, match="non-timing"):
        d.ready - staged.ready


def test_copy_to_host_reuses_one_stream_per_thread(machine):
    d = DeviceArray.from_host(np.arange(8, dtype=np.int64))
    d.copy_to_host()
    before = machine.device.streams_made
    for _ in range(3):
        np.testing.assert_array_equal(d.copy_to_host(), np.arange(8))
    assert machine.device.streams_made == before


def test_staging_copies_direct_and_through_pinned_buffers(machine):
    from nbdata.ops.prefetch_to_device import PinnedPool, Stager
    be = runtime.backend()
    pool = PinnedPool(be)
    stager = Stager(0, 3)
    pinned = pool.empty((64, 1024), np.float32)
    pinned[:] = np.arange(64 * 1024, dtype=np.float32).reshape(64, 1024)
    plain = np.arange(10, dtype=np.int64)
    a = stager.to_device(pinned[16:32])
    b = stager.to_device(plain)
    assert stager.counts == {"direct copies": 1, "staged copies": 1}
    np.testing.assert_array_equal(a.copy_to_host(), pinned[16:32])
    np.testing.assert_array_equal(b.copy_to_host(), plain)
    stager.to_device(plain)   # sums the device time of the copies done by now
    assert round(stager.copy_ms, 2) in (0.5, 0.75)   # the first two, and the third if done


# ------------------------------------------------------------------ defect 7
def test_dlpack_stream_numbers_map_to_the_driver_s_default_streams(machine):
    # DLPack: None and 1 are the legacy default stream (CU_STREAM_LEGACY = 1), 2 the
    # per-thread one (CU_STREAM_PER_THREAD = 2), others a cudaStream_t.
    from nbdata.gpu import array
    be = runtime.backend()
    mine = be.stream()
    event = be.event(be.default)
    for stream in (None, 1, 2, mine.handle):
        array._order_after(be, stream, event)
    assert machine.driver.calls == [("cuStreamWaitEvent", h) for h in (1, 1, 2, mine.handle)]
    assert machine.legacy.waited == [event, event]
    assert machine.stream_of(2).waited == [event] and mine.waited == [event]


def _capsule_name(capsule) -> bytes:
    import ctypes
    get = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(
        ("PyCapsule_GetName", ctypes.pythonapi))
    return get(capsule)


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_dlpack_exports_are_capsules_of_cuda_memory(machine, max_version):
    """The double's DLPack export is a real capsule ("dltensor", or "dltensor_versioned"
    where the consumer takes DLPack 1.0) of a DLTensor in CUDA memory, as cuda.core's:
    NumPy refuses it as it does on a GPU; a consumer renames it as it takes it and
    deletes it when its tensor goes; one dropped untaken is deleted by its destructor,
    and the memory goes back only after that."""
    import gc
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    d = DeviceArray.from_host(x)
    capsule = d.__dlpack__(stream=None, max_version=max_version)
    assert type(capsule).__name__ == "PyCapsule"
    name = b"dltensor" if max_version is None else b"dltensor_versioned"
    assert _capsule_name(capsule) == name
    with pytest.raises((BufferError, RuntimeError), match="(?i)device"):
        np.from_dlpack(d)   # CUDA memory, as on a GPU (not the simulator's host memory)
    taken = cuda_rules.Capsule(capsule)
    assert _capsule_name(capsule) == b"used_" + name
    assert (taken.pointer, taken.shape, taken.dtype) == (d.pointer, (3, 4), np.float32)
    with pytest.raises(cuda_rules.CudaRulesError, match="not an unconsumed"):
        cuda_rules.Capsule(capsule)   # a capsule is taken once
    untaken = d[1].__dlpack__(stream=None, max_version=max_version)
    del d, capsule
    gc.collect()
    assert not any(kind == "free" for _, kind in machine.kinds)   # both exports hold it
    del taken
    gc.collect()
    assert not any(kind == "free" for _, kind in machine.kinds)   # the untaken one does
    del untaken
    gc.collect()
    assert any(kind == "free" for _, kind in machine.kinds)


# ------------------------------------------------------------------ staging
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("path", ["direct", "staged"])
def test_host_buffers_are_not_rewritten_before_their_copies_ran(seed, path):
    # Batches staged faster than their copies run: a pinned block a fused stage wrote
    # (a direct copy; the stage's array is dropped and its block reused) and the ring of
    # staging buffers (arrays made elsewhere) may be written again only after the copy
    # that reads them has run.
    from nbdata.ops.prefetch_to_device import PinnedPool, Stager
    with cuda_rules.installed(seed=seed, progress=0.0):
        pool, stager = PinnedPool(runtime.backend()), Stager(0, 3)
        batches = []
        for k in range(12):
            host = pool.empty((32, 32), np.float32) if path == "direct" else np.empty((32, 32), np.float32)
            host[:] = k
            batches.append(stager.to_device(host))
            del host
        assert stager.counts[f"{path} copies"] == 12
        for k, batch in enumerate(batches):
            np.testing.assert_array_equal(batch.copy_to_host(), np.full((32, 32), k, np.float32))


def test_a_closed_stager_lets_its_pinned_arrays_go_only_after_their_copies(machine):
    """An iterator closed with direct copies still queued (stopped early): the pinned
    arrays those copies read go back to the pool (as free at once) only after the copies
    ran, so the next batch a fused stage writes into a reused block cannot change what
    an earlier copy sends."""
    from nbdata.ops.prefetch_to_device import PinnedPool, Stager
    pool, stager = PinnedPool(runtime.backend()), Stager(0, 2)
    host = pool.empty((64, 64), np.float32)
    host[:] = 7
    batch = stager.to_device(host)
    del host
    (copy,) = [op for op in _queued(machine) if op.kind == "copy to device"]
    assert not copy.done
    stager.close()
    assert copy.done
    again = pool.empty((64, 64), np.float32)   # the block the copy read, reused
    again[:] = -1
    np.testing.assert_array_equal(batch.copy_to_host(), np.full((64, 64), 7, np.float32))


def test_pinned_blocks_are_taken_on_threads_that_never_called_cuda(machine):
    """Taking a pinned block asks the events of the blocks given back whether their
    copies ran: a fused stage's thread that made no CUDA call before does so with the
    device made current (the double refuses event queries without a context)."""
    from nbdata.ops.prefetch_to_device import PinnedBlocks
    be = runtime.backend()
    blocks = PinnedBlocks(be)
    block = blocks.take(4096)
    d = DeviceArray.empty((4096,), np.uint8, be.default)
    be.copy_h2d(d.buffer, block[1], be.default)
    blocks.give(block, be.event(be.default))   # its copy still queued (no progress)
    got, failed = [], []

    def stage_thread():
        try:
            got.append(blocks.take(4096))
        except Exception as e:  # noqa: BLE001 - reported below
            failed.append(e)
    t = threading.Thread(target=stage_thread)
    t.start()
    t.join()
    assert not failed and got and got[0] is not block   # a new block: the copy is queued
    machine.synchronize()


def _queued(machine) -> list:
    """Every op queued so far (run or not)."""
    ops = []
    for last in machine.last_on.values():
        while last is not None:
            ops.append(last)
            last = last.previous
    return sorted(ops, key=lambda o: o.seq)


def test_a_block_taken_again_on_its_stream_is_free_elsewhere_only_after_its_last_release(machine):
    """The pool model: a block released on s1 and taken again on s1 before that free ran
    (stream order) and released again is not free for s2 when the FIRST free runs, only
    after the second (as CUDA's stream-ordered pool): else work on s2 would be handed
    memory whose pending free on s1 later poisons it."""
    be = runtime.backend()
    s1, s2 = be.stream(), be.stream()
    a = DeviceArray.empty((64,), np.uint8, s1)
    where = a.pointer
    del a                                     # free #1 queued on s1
    b = DeviceArray.empty((64,), np.uint8, s1)
    assert b.pointer == where                 # reused in s1's order
    del b                                     # free #2 queued on s1
    frees = [op for op in machine.stream_of(s1.handle).queue if op.kind == "free"]
    assert len(frees) == 2
    machine.force(frees[0])
    c = DeviceArray.empty((64,), np.uint8, s2)
    assert c.pointer != where
    machine.force(frees[1])
    d = DeviceArray.empty((64,), np.uint8, s2)
    assert d.pointer == where
    machine.synchronize()
