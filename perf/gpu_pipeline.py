"""gpu: batches staged to the device and augmented there, on a real GPU only.

Two tables' worth of rows, measured in one process:
- staging: 256 x 224 x 224 x 3 uint8 batches through ``prefetch_to_device``, against
  the pinned host -> device bandwidth of a plain copy loop measured in the same run,
  with the fraction of the copies that overlapped other work (event timings);
- augment: random crop 224 + flip + normalize + HWC->CHW of 256 x 3 x 224 x 224 as one
  fused nd.gpu kernel, against the bytes it must move at the device's memory
  bandwidth (a device-to-device copy measured in the same run), the same chain as
  separate CuPy ops, and torchvision.transforms.v2 on GPU tensors.
Without a GPU (or under the CUDA simulator) every row says "no GPU".
"""

from __future__ import annotations

import time

import numpy as np

BATCH, SIDE, CROP = 256, 256, 224
QUICK_BATCH = 32
ROWS = ("staging: pinned host->device copy loop [base]", "staging: nbdata prefetch_to_device",
        "augment: device-to-device copy of the bytes moved [base]",
        "augment: nbdata fused crop+flip+normalize+CHW (one kernel)",
        "augment: CuPy, the same ops separately", "augment: torchvision.transforms.v2 on GPU")


def _gpu_reason() -> str | None:
    try:
        import numba
        if numba.config.ENABLE_CUDASIM:
            return "no GPU (the CUDA simulator is on)"
        from nbdata.gpu import runtime
        runtime.backend()
    except Exception as e:  # noqa: BLE001 - anything that stops a real GPU run
        return f"no GPU ({type(e).__name__}: {str(e).splitlines()[0][:80]})"
    return None


def _time_events(be, stream, fn, repeats: int) -> float:
    """Best seconds of ``fn()`` queued on ``stream``, by events."""
    fn()
    be.sync(stream)
    best = float("inf")
    for _ in range(repeats):
        start = be.event(stream)
        fn()
        end = be.event(stream)
        end.sync()
        best = min(best, be.elapsed_ms(start, end) / 1e3)
    return best


def _measure(quick: bool, repeats: int) -> list:
    import nbdata as nd
    from nbdata.gpu import runtime
    from nbdata.gpu.array import DeviceArray
    be = runtime.backend()
    batch = QUICK_BATCH if quick else BATCH
    images = np.random.default_rng(0).integers(0, 256, (batch, SIDE, SIDE, 3), dtype=np.uint8)
    nbytes = images.nbytes
    rows = []
    # Staging: the plain pinned copy loop, then the pipeline.
    stream = be.stream()
    _, pinned = be.pinned(nbytes)
    pinned[:] = images.reshape(-1).view(np.uint8)
    dst = be.alloc(nbytes, stream)
    copy = _time_events(be, stream, lambda: be.copy_h2d(dst, pinned, stream), repeats)
    rows.append((ROWS[0], nbytes / copy, "1.00x", ""))
    ds = nd.Dataset.from_tensors(images).repeat(8 if quick else 32).prefetch_to_device("cuda:0", 2)
    for b in ds.take(2):     # warm-up
        b.copy_to_host()
    start = time.perf_counter()
    count = 0
    last = None
    for b in ds:
        count += 1
        last = b
    be.sync(last.ready)
    wall = time.perf_counter() - start
    staged = count * nbytes / wall
    (stage,) = [s for s in ds.compile().stats().stages if s.title.startswith("prefetch")] or [None]
    busy = stage.chosen.get("copy ms", 0.0) / 1e3 / wall if stage is not None else 0.0
    rows.append((ROWS[1], staged, f"{staged / (nbytes / copy):.2f}x",
                 f"copies busy {busy:.0%} of the wall time (events); target >= 0.80x"))
    # Augment: bytes moved = read the crop (uint8) + write float32 output.
    d = DeviceArray.from_host(images, stream)
    moved = batch * CROP * CROP * 3 * (1 + 4)
    scratch = be.alloc(moved, stream)
    from cuda.bindings import driver

    def d2d():
        driver.cuMemcpyDtoDAsync(int(scratch.handle), int(d.buffer.handle), min(moved, nbytes),
                                 int(stream.handle))
    bandwidth = min(moved, nbytes) / _time_events(be, stream, d2d, repeats)
    rows.append((ROWS[2], bandwidth, "1.00x", "device memory bandwidth, same run"))
    mean, std = np.array([123.7, 116.3, 103.5]), np.array([58.4, 57.1, 57.4])
    from nbdata import image
    from nbdata.compiler.backend_gpu import run_chain
    from nbdata.primitives.gpu import Chain
    chain = Chain([image.random_crop.primitive.gpu((CROP, CROP), 1),
                   image.random_flip_left_right.primitive.gpu(2),
                   image.normalize.primitive.gpu(mean, std), image.hwc_to_chw.primitive.gpu()],
                  images.shape[1:], images.dtype)
    seconds = _time_events(be, stream, lambda: run_chain(chain, d), repeats)
    rows.append((ROWS[3], moved / seconds, f"{moved / seconds / bandwidth:.2f}x",
                 "target >= 0.50x of the bandwidth, faster than CuPy and torchvision"))
    rows.extend(_peer_rows(images, mean, std, moved, bandwidth, repeats))
    return rows


def _peer_rows(images, mean, std, moved, bandwidth, repeats) -> list:
    rows = []
    try:
        import cupy as cp
        x = cp.asarray(images)
        m, s = cp.asarray(mean, cp.float32), cp.asarray(std, cp.float32)

        def cupy_chain():
            top, left = 11, 17
            crop = x[:, top:top + CROP, left:left + CROP, :]
            flipped = crop[:, :, ::-1, :]
            return cp.ascontiguousarray(((flipped.astype(cp.float32) - m) / s).transpose(0, 3, 1, 2))
        cupy_chain()
        cp.cuda.runtime.deviceSynchronize()
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            cupy_chain()
            cp.cuda.runtime.deviceSynchronize()
            best = min(best, time.perf_counter() - start)
        rows.append((ROWS[4], moved / best, f"{moved / best / bandwidth:.2f}x", ""))
    except ImportError:
        rows.append((ROWS[4], None, "-", "skipped: cupy not installed"))
    try:
        import torch
        from torchvision.transforms import v2
        t = torch.from_numpy(images).cuda().permute(0, 3, 1, 2)
        pipeline = v2.Compose([v2.RandomCrop(CROP), v2.RandomHorizontalFlip(),
                               v2.ToDtype(torch.float32), v2.Normalize(mean.tolist(), std.tolist())])
        pipeline(t)
        torch.cuda.synchronize()
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            pipeline(t)
            torch.cuda.synchronize()
            best = min(best, time.perf_counter() - start)
        rows.append((ROWS[5], moved / best, f"{moved / best / bandwidth:.2f}x", ""))
    except ImportError:
        rows.append((ROWS[5], None, "-", "skipped: torch/torchvision not installed"))
    return rows


def report(header: str, quick: bool, load, repeats: int = 5) -> str:
    reason = _gpu_reason()
    if reason is not None:
        rows = [(name, None, "-", "no GPU") for name in ROWS]
    else:
        rows = _measure(quick, repeats)
    cols = ("implementation", "GB/s", "vs [base]", "note")
    body = [(name, "-" if rate is None else f"{rate / 1e9:.1f}", ratio, note)
            for name, rate, ratio, note in rows]
    widths = [max(len(c), *(len(r[i]) for r in body)) for i, c in enumerate(cols)]

    def render(row):
        return "  ".join(f"{v:{'<' if i in (0, 3) else '>'}{w}}"
                         for i, (v, w) in enumerate(zip(row, widths))).rstrip()
    batch = QUICK_BATCH if quick else BATCH
    lines = [f"== gpu: {batch} x {SIDE}x{SIDE}x3 uint8 batches staged, then crop {CROP} + flip + "
             f"normalize + CHW on the device ==",
             f"{header}; {load.describe()}", render(cols), "  ".join("-" * w for w in widths)]
    lines.extend(render(r) for r in body)
    if reason is not None:
        lines.append(f"unmeasured: {reason}")
    return "\n".join(lines)
