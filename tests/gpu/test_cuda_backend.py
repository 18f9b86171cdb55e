"""The cuda backend's memory, copy, stream and event code (``runtime.CudaBackend``,
DeviceArray transfers, prefetch_to_device staging) run against a stand-in of cuda.core
and of the driver's copy calls that works on host memory: no GPU is needed, so CI
checks the calls the GPU path makes (the API of cuda-core 1.2 / cuda-bindings 13:
``DeviceMemoryResource.allocate(size, stream=)``, ``LegacyPinnedMemoryResource``,
``Stream.record(options=)``, ``Event.sync/is_done``, ``cuMemcpyHtoDAsync(dst, src, n,
stream)``). As the driver does, every call that needs a CUDA context fails on a thread
where the device was not made current (``Device.set_current`` is per thread): pipelines
call CUDA on their background threads. Kernels are not launched here (the simulator
cannot take device pointers)."""

import ctypes
import threading
import types

import numpy as np
import pytest

from nbdata.gpu import runtime

driver = pytest.importorskip("cuda.bindings.driver")


_current = threading.local()


def _needs_context(what: str) -> None:
    if not getattr(_current, "device", None):
        raise RuntimeError(f"{what}: CUDA_ERROR_INVALID_CONTEXT (no CUDA context is current on "
                           f"thread {threading.current_thread().name})")


class FakeBuffer:
    def __init__(self, size: int, memory: np.ndarray | None = None, ptr: int | None = None):
        self.memory = memory if memory is not None else np.zeros(max(1, size), np.uint8)
        self.size = size
        self.handle = ptr if ptr is not None else int(self.memory.ctypes.data)
        self.closed = False

    def __dlpack__(self, **kwargs):
        return self.memory.__dlpack__()

    def __dlpack_device__(self):
        return (1, 0)

    @classmethod
    def from_handle(cls, ptr, size, mr=None, owner=None, stream=None):
        out = cls(size, memory=np.zeros(1, np.uint8), ptr=int(ptr))
        out.owner = owner
        return out


class FakeEvent:
    count = 0

    def __init__(self, timing: bool = False):
        FakeEvent.count += 1
        self.handle = 1000 + FakeEvent.count
        self.is_done = True
        self.timing = timing

    def sync(self):
        pass

    def __sub__(self, other):
        # As cuEventElapsedTime: both events must have been made with timing enabled.
        if not (self.timing and other.timing):
            raise RuntimeError("CUDA_ERROR_INVALID_HANDLE: elapsed time of a non-timing event")
        return 0.25


class FakeStream:
    made = 0

    def __init__(self):
        FakeStream.made += 1
        self.handle = 76 + FakeStream.made   # each stream its own handle
        self.waited = []

    def record(self, event=None, options=None):
        _needs_context("Stream.record")
        return event or FakeEvent(bool(options is not None and options.timing_enabled))

    def wait(self, event):
        _needs_context("Stream.wait")
        self.waited.append(event)

    def sync(self):
        pass


class FakeDevice:
    device_id = 0
    streams_made = 0

    def set_current(self):
        _current.device = self

    def create_stream(self, obj=None, options=None):
        _needs_context("Device.create_stream")
        FakeDevice.streams_made += 1
        return FakeStream()


class FakePool:
    def __init__(self, device):
        self.allocated = 0

    def allocate(self, size, *, stream):
        _needs_context("DeviceMemoryResource.allocate")
        assert isinstance(stream, FakeStream), "allocations are stream-ordered"
        self.allocated += size
        return FakeBuffer(size)


class FakePinned:
    def allocate(self, size, *, stream=None):
        _needs_context("LegacyPinnedMemoryResource.allocate")   # records a default stream
        return FakeBuffer(size)


def _options(**kw):
    return types.SimpleNamespace(**kw)


fake_core = types.SimpleNamespace(
    DeviceMemoryResource=FakePool, LegacyPinnedMemoryResource=FakePinned, Buffer=FakeBuffer,
    StreamOptions=lambda **kw: _options(**kw), EventOptions=lambda **kw: _options(**kw))


def _copy(dst, src, n, stream):
    if not getattr(_current, "device", None):
        return (201,)   # CUDA_ERROR_INVALID_CONTEXT
    ctypes.memmove(int(dst), int(src), int(n))
    return (0,)


@pytest.fixture
def cuda_backend(monkeypatch):
    device = FakeDevice()
    device.set_current()   # as runtime.backend() does on the thread that first asks
    be = runtime.CudaBackend(None, fake_core, device)
    monkeypatch.setattr(runtime, "backend", lambda: be)
    monkeypatch.setattr(driver, "cuMemcpyHtoDAsync", _copy)
    monkeypatch.setattr(driver, "cuMemcpyDtoHAsync", _copy)
    return be


def test_round_trip_through_device_memory(cuda_backend):
    from nbdata.gpu.array import DeviceArray
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    d = DeviceArray.from_host(x)
    assert d.device == 0 and d.shape == x.shape and cuda_backend.pool.allocated >= x.nbytes
    np.testing.assert_array_equal(d.copy_to_host(), x)
    np.testing.assert_array_equal(d[1].copy_to_host(), x[1])      # an offset view
    np.testing.assert_array_equal(d.view(np.uint8).copy_to_host(), x.view(np.uint8))
    cai = d.__cuda_array_interface__
    assert cai["data"][0] == d.pointer and cai["stream"] is None   # its copy is done


def test_array_interface_names_the_stream_while_the_copy_runs(cuda_backend):
    from nbdata.gpu.array import DeviceArray
    d = DeviceArray.from_host(np.ones(4, np.int32))
    d.ready.is_done = False
    assert d.__cuda_array_interface__["stream"] == d.stream.handle == cuda_backend.default.handle


def test_staging_copies_direct_and_through_pinned_buffers(cuda_backend):
    from nbdata.ops.prefetch_to_device import PinnedPool, Stager
    pool = PinnedPool(cuda_backend)
    stager = Stager(0, 3)
    pinned = pool.empty((64, 1024), np.float32)
    pinned[:] = np.arange(64 * 1024, dtype=np.float32).reshape(64, 1024)
    plain = np.arange(10, dtype=np.int64)
    a = stager.to_device(pinned[16:32])
    b = stager.to_device(plain)
    assert stager.counts == {"direct copies": 1, "staged copies": 1}
    np.testing.assert_array_equal(a.copy_to_host(), pinned[16:32])
    np.testing.assert_array_equal(b.copy_to_host(), plain)
    assert stager.copy_ms == pytest.approx(0.5)   # two copies' event times


def test_prefetch_to_device_pipeline_on_the_cuda_backend(cuda_backend):
    import nbdata as nd
    images = np.random.default_rng(3).integers(0, 256, (64, 32, 32, 3)).astype(np.uint8)
    opts = nd.Options()
    opts.fusion_min_rows = 0
    ds = (nd.Dataset.from_tensor_slices((images, np.arange(64))).map(lambda x, y: (x, y + 1))
          .batch(16).with_options(opts).prefetch_to_device("cuda:0"))
    out = [(a.copy_to_host(), b.copy_to_host()) for a, b in ds]
    np.testing.assert_array_equal(np.concatenate([a for a, _ in out]), images)
    np.testing.assert_array_equal(np.concatenate([b for _, b in out]), np.arange(64) + 1)
    (stage,) = [s for s in ds.compile().stats().stages if s.title.startswith("prefetch_to_device")]
    assert stage.chosen["direct copies"] == 4 and stage.chosen["copy ms"] == pytest.approx(2.0)


def test_every_thread_that_calls_cuda_makes_the_device_current(cuda_backend):
    # The fake driver refuses calls on a thread with no current context; the backend's
    # methods bind the device on each thread (prefetch producers, the staging thread).
    from nbdata.gpu.array import DeviceArray
    errors, results = [], []

    def work():
        try:
            d = DeviceArray.from_host(np.arange(6, dtype=np.int16))
            results.append(d.copy_to_host())
            _, view = cuda_backend.pinned(16)
            results.append(view.size)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert not errors, errors
    np.testing.assert_array_equal(results[0], np.arange(6, dtype=np.int16))
    assert results[1] == 16
    probe = []
    t = threading.Thread(target=lambda: probe.append(getattr(_current, "device", None)))
    t.start()
    t.join()
    assert probe == [None]   # the fake's rule holds: a fresh thread has no context


def test_ready_events_do_not_time_and_copy_times_do(cuda_backend):
    # Timing events are slower to record and wait on: only the staging copies that
    # stats() reports are timed.
    from nbdata.gpu.array import DeviceArray
    from nbdata.ops.prefetch_to_device import Stager
    d = DeviceArray.from_host(np.arange(5, dtype=np.int32))
    assert d.ready is not None and not d.ready.timing
    staged = Stager(0, 2).to_device(np.arange(5, dtype=np.int32))
    assert staged.ready.timing


def test_copy_to_host_reuses_one_stream_per_thread(cuda_backend):
    from nbdata.gpu.array import DeviceArray
    d = DeviceArray.from_host(np.arange(8, dtype=np.int64))
    d.copy_to_host()
    before = FakeDevice.streams_made
    for _ in range(3):
        np.testing.assert_array_equal(d.copy_to_host(), np.arange(8))
    assert FakeDevice.streams_made == before


def test_dlpack_stream_numbers_map_to_the_driver_s_default_streams(cuda_backend, monkeypatch):
    # DLPack: None and 1 are the legacy default stream (CU_STREAM_LEGACY = 1), 2 the
    # per-thread one (CU_STREAM_PER_THREAD = 2), others a cudaStream_t.
    from nbdata.gpu import array
    waits = []
    monkeypatch.setattr(driver, "cuStreamWaitEvent",
                        lambda handle, event, flags: waits.append(int(handle)) or (0,))
    event = FakeEvent()
    for stream in (None, 1, 2, 12345):
        array._order_after(cuda_backend, stream, event)
    assert waits == [1, 1, 2, 12345]


def test_memory_is_freed_after_the_work_its_consumers_queued(cuda_backend, monkeypatch):
    # A consumer (a DLPack tensor on its stream, a CUDA array interface user on the legacy
    # stream) may still have kernels queued that read a batch when it drops it: the
    # free waits for an event recorded on each consumer stream (record_stream style),
    # and only the last view's release frees.
    import gc
    from nbdata.gpu.array import DeviceArray
    log = []
    monkeypatch.setattr(driver, "cuEventCreate", lambda flags: (0, "event"))
    monkeypatch.setattr(driver, "cuEventRecord", lambda ev, h: log.append(("record", int(h))) or (0,))
    monkeypatch.setattr(driver, "cuStreamWaitEvent",
                        lambda h, ev, flags: log.append(("wait", int(h))) or (0,))
    monkeypatch.setattr(driver, "cuEventDestroy", lambda ev: (0,))
    d = DeviceArray.from_host(np.arange(4, dtype=np.float32))
    d.buffer.buffer.close = lambda stream: log.append(("free", stream.handle))
    d._consumed_on(555)              # what __dlpack__(stream=555) notes
    d.__cuda_array_interface__       # noqa: B018 - a CUDA array interface consumer
    view = d[1:]
    del d
    gc.collect()
    assert log == []                 # the view still holds the memory
    del view
    gc.collect()
    alloc = cuda_backend.default.handle   # from_host allocates on the default stream
    assert log[-1] == ("free", alloc)
    pairs = [(log[k], log[k + 1]) for k in range(0, len(log) - 1, 2)]
    assert sorted(pairs) == [(("record", 1), ("wait", alloc)), (("record", 555), ("wait", alloc))]


def test_kernels_of_nbdata_do_not_count_as_consumers(cuda_backend):
    from nbdata.compiler.backend_gpu import _Raw
    from nbdata.gpu.array import DeviceArray
    d = DeviceArray.from_host(np.arange(4, dtype=np.float32))
    _Raw(d)
    assert d.buffer.consumers == set()


def test_kernels_run_on_a_compute_stream_after_their_batch_s_event(cuda_backend):
    # Not on the batch's staging stream, where the next batches' copies are queued: the
    # compute stream waits for this batch's event only, and the batch's memory is
    # released after the kernel.
    from nbdata.compiler import backend_gpu
    from nbdata.ops.prefetch_to_device import Stager
    x = Stager(0, 2).to_device(np.arange(6, dtype=np.float32))
    staging = x.stream
    launched = []

    class Kernel:
        def __getitem__(self, config):
            def launch(*args):
                launched.append(config[2])
            return launch
    compute = cuda_backend.compute_stream()
    from nbdata.gpu.array import DeviceArray
    out = DeviceArray.empty((6,), np.float32, compute)
    backend_gpu._launch(Kernel(), 6, x, out, 6, [])
    assert launched == [compute] and compute is not staging
    assert x.ready in compute.waited and out.stream is compute
    assert compute.handle in x.buffer.consumers
    assert cuda_backend.compute_stream() is compute   # one per thread
