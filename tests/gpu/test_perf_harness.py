"""The GPU perf harness (perf/gpu_pipeline.py) end to end on the CUDA-rules double (and on
a real GPU at tiny sizes), and the double's timing rules that the harness relies on."""

import numpy as np
import pytest

from nbdata.gpu import runtime

cuda_rules = pytest.importorskip("cuda_rules")
pytest.importorskip("simplejpeg")
gp = pytest.importorskip("perf.gpu_pipeline")

TINY = dict(batch=1, side=40, crop=4, batches=2, images=2, decode_batch=2, decode_side=16,
            peers=False)
MEASURED = ("staging: pinned host->device copy loop [base]",
            "staging: nbdata from_tensors(batch).repeat(R).prefetch_to_device",
            "staging: nbdata from_tensor_slices.repeat.batch (fused, pinned)",
            "augment: device-to-device copy [base]",
            "augment: nbdata fused kernel alone (crop+flip+normalize+CHW)",
            "augment: nbdata run_chain (params drawn + copied per batch)",
            "decode: nbdata decode_jpeg (one pooled buffer per batch)",
            "decode: nbdata decode + random_resized_crop/flip/normalize/CHW",
            "augment: nbdata run_chain, float16 out",
            "decode: the same as a pipeline's GPU map, 1 batch in flight",
            "decode: the same as a pipeline's GPU map, 4 batches in flight",
            "decode: the same as a pipeline's GPU map, AUTOTUNE in flight")


def _double_only(gpu_backend):
    """Tests that install the double themselves run once (with the simulator's kernels)."""
    if gpu_backend is not None or not runtime.simulated():
        pytest.skip("installs the CUDA-rules double itself: runs once, on the simulator")


def test_harness_runs_every_part(gpu_backend):
    machine = gpu_backend
    if machine is None and runtime.simulated():
        pytest.skip("the harness times streams and events: it runs on the CUDA-rules double")
    rows = {name: (rate, ratio, note)
            for name, rate, ratio, note in gp.measure(gp.PARTS, gp.Sizes(**TINY), repeats=1,
                                                      allow_simulated=True)}
    failed = {k: v for k, v in rows.items() if "failed" in k or "failed" in v[2]}
    assert not failed
    for name in MEASURED:
        assert rows[name][0] is not None and rows[name][0] > 0, name
    if machine is None:
        return
    assert rows["decode: the same, region decode of the crop windows"][0] > 0
    assert rows["decode: nvImageCodec alone into one pooled buffer per batch"][0] > 0
    # On the double each copy or kernel takes WORK_MS between timing events on the stream
    # that ran it: the kernel alone (4 launches between the events) is one WORK_MS each,
    # counted in bytes read + written, as is the copy base (half the bytes each way).
    b, c = TINY["batch"], TINY["crop"]
    moved = b * c * c * 3 * 5
    seconds = cuda_rules.WORK_MS / 1e3
    assert rows[MEASURED[4]][0] == pytest.approx(moved / seconds, rel=0.02)
    assert rows[MEASURED[3]][0] == pytest.approx(2 * (moved // 2) / seconds, rel=0.02)
    assert rows[MEASURED[4]][1] == "1.00x"


def test_double_refuses_elapsed_time_of_non_timing_events(gpu_backend):
    """The harness's old bug: events made by be.event(stream) (no timing) read with
    elapsed_ms, which the driver refuses."""
    _double_only(gpu_backend)
    with cuda_rules.installed(3) as machine:
        be = machine.backend
        stream = be.stream()
        a, b = be.event(stream), be.event(stream)
        be.sync(b)
        with pytest.raises(RuntimeError, match="INVALID_HANDLE"):
            be.elapsed_ms(a, b)
        a, b = be.event(stream, timing=True), be.event(stream, timing=True)
        be.sync(b)
        assert be.elapsed_ms(a, b) == pytest.approx(0.001)


def test_events_on_another_stream_time_nothing(gpu_backend):
    """Timing events on a stream that did not run the work measure ~nothing on the double,
    as on a GPU (the harness's other old bug: its events sat on its own stream while the
    kernel ran on the compute stream)."""
    _double_only(gpu_backend)
    from nbdata.compiler import backend_gpu
    from nbdata.gpu.array import DeviceArray
    with cuda_rules.installed(4) as machine:
        be = machine.backend
        images = np.arange(2 * 8 * 8 * 3, dtype=np.uint8).reshape(2, 8, 8, 3)
        chain = gp.augment_chain(images.shape[1:], 6)
        other = be.stream()
        x = DeviceArray.from_host(images, be.compute_stream())
        wrong = gp.time_on(be, other, lambda: backend_gpu.run_chain(chain, x), repeats=2)
        right = gp.time_on(be, be.compute_stream(), lambda: backend_gpu.run_chain(chain, x),
                           repeats=2)
        assert wrong < 1e-5
        assert right >= cuda_rules.WORK_MS / 1e3
