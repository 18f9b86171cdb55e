"""gpu: staging, the fused augment kernel and JPEG decode on the device, each measured on
its own (``python -m perf --workload gpu``; one part: ``python -m perf.gpu_pipeline
--parts staging`` or ``NBDATA_PERF_GPU_PARTS=augment python -m perf --workload gpu``).

- **staging**: 256 x 256 x 256 x 3 uint8 batches (50 MB) copied to the device by
  ``prefetch_to_device``, in bytes/s, against a loop of pinned host -> device copies of
  the same batch measured in the same process. Two nbdata pipelines: the batch repeated
  (``from_tensors(images).repeat(R)``) and batches made by a fused CPU stage
  (``from_tensor_slices(images).repeat().batch(256)``, written straight into pinned
  memory). The notes say how many copies were direct (from pinned memory) or staged
  (through a host copy), and the share of the wall time the copies kept the copy
  engine busy.
- **augment**: random crop 224 + flip + normalize + HWC->CHW of the batch as ONE fused
  nd.gpu kernel. Every row of this part counts **bytes read + bytes written** per
  second: the kernel reads the crop (1 byte per output value) and writes float32
  (4 bytes), 5 bytes per output value; the base, a device-to-device copy of M bytes,
  moves 2 M (read + write). Rows: the kernel alone (its parameters on the device, one
  launch after another), ``run_chain`` as a pipeline calls it (per-batch parameters
  drawn on the host and copied, output allocated), the float16 output, CuPy
  (the same ops separately) and torchvision.transforms.v2.
- **decode**: synthetic ImageNet-like JPEGs (perf/imagenet.py's images) decoded in
  batches of 64: nvImageCodec alone (its default backends, and the hardware decoder
  alone where the GPU has one), nbdata's ``decode_jpeg`` (into one pooled buffer), and
  decode + random_resized_crop 224 + flip + normalize + CHW as nbdata's GPU map runs it,
  in images/s (target: >= 0.95x of decode alone).

Device times are read from timing events recorded on the stream the measured work is
queued on (the compute stream of this thread for nbdata's kernels), best of
``repeats``; wall times (host + device, the staging pipelines and decode) end with the
device synchronized. Without a GPU (or under the CUDA simulator) every row says
"no GPU"; ``measure(..., allow_simulated=True)`` runs the whole harness on the
simulator or the CUDA-rules double (tests/gpu/test_perf_harness.py) at tiny sizes.
"""

from __future__ import annotations

import os
import time
import traceback

import numpy as np

BATCH, SIDE, CROP = 256, 256, 224
QUICK_BATCH = 32
PARTS = ("staging", "augment", "decode")
MEAN, STD = (123.7, 116.3, 103.5), (58.4, 57.1, 57.4)


class Sizes:
    """The shapes one run uses (full, --quick, or the tests' tiny ones)."""

    def __init__(self, batch=BATCH, side=SIDE, crop=CROP, batches=32, images=512,
                 decode_batch=64, decode_side=None, peers=True):
        self.batch, self.side, self.crop, self.batches = batch, side, crop, batches
        self.peers = peers   # the CuPy and torchvision rows
        self.images, self.decode_batch, self.decode_side = images, decode_batch, decode_side


def sizes_for(quick: bool) -> Sizes:
    return Sizes(batch=QUICK_BATCH, batches=8, images=128) if quick else Sizes()


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


def time_on(be, stream, fn, repeats: int, inner: int = 1) -> float:
    """Best device seconds of one ``fn()``: ``inner`` calls between two timing events
    recorded on ``stream``, which must be the stream ``fn`` queues its work on (events
    on another stream would time nothing). One warm-up call first."""
    fn()
    be.sync(stream)
    best = float("inf")
    for _ in range(max(1, repeats)):
        start = be.event(stream, timing=True)
        for _ in range(inner):
            fn()
        end = be.event(stream, timing=True)
        be.sync(end)
        elapsed = be.elapsed_ms(start, end)
        if elapsed is None:   # the simulator's backend keeps no time
            elapsed = 0.0
        best = min(best, elapsed / 1e3 / inner)
    return best


def _wall(fn, repeats: int, sync) -> float:
    """Best wall seconds of ``fn()`` followed by ``sync()`` (one warm-up call first)."""
    fn()
    sync()
    best = float("inf")
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - start)
    return best


def _rate(amount: float, seconds: float) -> float | None:
    return amount / seconds if seconds and seconds > 0 and np.isfinite(seconds) else None


def _ratio(rate, base) -> str:
    return f"{rate / base:.2f}x" if rate and base else "-"


def _device_sync(be):
    device = getattr(be, "device", None)
    return (lambda: device.sync()) if device is not None else (lambda: None)


# ------------------------------------------------------------------------- staging
def staging_rows(be, sz: Sizes, repeats: int) -> list:
    import nbdata as nd
    images = np.random.default_rng(0).integers(0, 256, (sz.batch, sz.side, sz.side, 3),
                                               dtype=np.uint8)
    nbytes = images.nbytes
    rows = []
    stream = be.stream()
    owner, pinned = be.pinned(nbytes)   # owner: the pinned memory lives while it does
    pinned[:] = images.reshape(-1)
    dst = be.alloc(nbytes, stream)
    copy = time_on(be, stream, lambda: be.copy_h2d(dst, pinned, stream), repeats, inner=4)
    base = _rate(nbytes, copy)
    rows.append(("staging: pinned host->device copy loop [base]", base, "1.00x",
                 "events on the copy stream, 4 copies between them"))
    pageable = images.reshape(-1)
    page = time_on(be, stream, lambda: be.copy_h2d(dst, pageable, stream), max(1, repeats // 2))
    rows.append(("staging: pageable host->device copy (for reference)", _rate(nbytes, page),
                 _ratio(_rate(nbytes, page), base), "the driver stages it"))
    host = np.empty_like(pageable)
    memcpy = _wall(lambda: np.copyto(host, pageable), repeats, lambda: None)
    rows.append(("staging: host memcpy, one thread (for reference)", _rate(nbytes, memcpy),
                 _ratio(_rate(nbytes, memcpy), base), "what a staged copy adds per batch"))
    del dst, pinned, owner
    pipelines = [
        ("staging: nbdata from_tensors(batch).repeat(R).prefetch_to_device",
         lambda: nd.Dataset.from_tensors(images).repeat(sz.batches).prefetch_to_device("cuda:0", 2)),
        ("staging: nbdata from_tensor_slices.repeat.batch (fused, pinned)",
         lambda: nd.Dataset.from_tensor_slices(images).repeat(sz.batches)
         .batch(sz.batch, drop_remainder=True).prefetch_to_device("cuda:0", 2)),
    ]
    for name, make in pipelines:
        try:
            rate, note = _staged_rate(be, make(), nbytes, repeats)
            rows.append((name, rate, _ratio(rate, base), note + "; target >= 0.80x"))
        except Exception as e:  # noqa: BLE001 - one row failing keeps the others
            rows.append((name, None, "-", f"failed: {type(e).__name__}: {str(e)[:200]}"))
            traceback.print_exc()
    return rows


def _staged_rate(be, ds, nbytes: int, repeats: int) -> tuple:
    """Bytes/s of the batches of ``ds`` arriving on the device (a compiled pipeline,
    one warm-up epoch, then the best of ``repeats`` timed epochs, each ending when its
    last batch is on the device)."""
    pipe = ds.compile()
    best, count, chosen = float("inf"), 0, {}
    for epoch in range(1 + max(1, min(repeats, 3))):
        start = time.perf_counter()
        count, last = 0, None
        for last in pipe:
            count += 1
        if last is not None:
            be.sync(last.ready)
        wall = time.perf_counter() - start
        del last
        if epoch:
            best = min(best, wall)
    stage = [s for s in pipe.stats().stages if s.title.startswith("prefetch")]
    chosen = dict(stage[0].chosen) if stage else {}
    busy = chosen.get("copy ms", 0.0) / 1e3 / best if best > 0 else 0.0
    note = (f"{count} batches/epoch; last epoch: direct {chosen.get('direct copies', '?')}, "
            f"staged {chosen.get('staged copies', '?')} copies, copy engine busy {busy:.0%} of "
            f"the best epoch's wall time")
    return _rate(count * nbytes, best), note


# ------------------------------------------------------------------------- augment
def augment_chain(shape, crop: int, out_dtype=None):
    """random_crop + random flip + normalize (+ cast) + HWC->CHW as one Chain."""
    from nbdata import image
    from nbdata.primitives.gpu import Chain
    steps = [image.random_crop.primitive.gpu((crop, crop), 1),
             image.random_flip_left_right.primitive.gpu(2),
             image.normalize.primitive.gpu(np.array(MEAN), np.array(STD))]
    if out_dtype is not None:
        steps.append(image.cast.primitive.gpu(out_dtype))
    steps.append(image.hwc_to_chw.primitive.gpu())
    return Chain(steps, shape, np.uint8)


def augment_rows(be, sz: Sizes, repeats: int) -> list:
    from nbdata.compiler import backend_gpu
    from nbdata.gpu.array import DeviceArray
    images = np.random.default_rng(0).integers(0, 256, (sz.batch, sz.side, sz.side, 3),
                                               dtype=np.uint8)
    values = sz.batch * sz.crop * sz.crop * 3
    moved = values * (1 + 4)          # read the crop as uint8 + write float32
    rows = []
    cs = be.compute_stream()
    d = DeviceArray.from_host(images, cs)
    be.sync(d.ready)
    # The base: a device-to-device copy of M bytes moves 2 M (read + write).
    half = moved // 2
    src, dst = be.alloc(half, cs), be.alloc(half, cs)

    def d2d():
        be.call("cuMemcpyDtoDAsync", int(dst.handle), int(src.handle), half, int(cs.handle))
    base = _rate(2 * half, time_on(be, cs, d2d, repeats, inner=4))
    rows.append(("augment: device-to-device copy [base]", base, "1.00x",
                 "bytes read + written, events on the stream"))
    del src, dst
    chain = augment_chain(images.shape[1:], sz.crop)
    launch = backend_gpu.prepared(chain, d)
    kernel = _rate(moved, time_on(be, launch.stream, launch.launch, repeats, inner=4))
    rows.append(("augment: nbdata fused kernel alone (crop+flip+normalize+CHW)", kernel,
                 _ratio(kernel, base), f"{launch.describe()}; target >= 0.50x"))
    rows.append(("augment: the kernel's PTX (instruction counts)", None, "-",
                 _ptx_counts(launch.kernel)))
    chained = _rate(moved, time_on(be, cs, lambda: backend_gpu.run_chain(chain, d), repeats))
    rows.append(("augment: nbdata run_chain (params drawn + copied per batch)", chained,
                 _ratio(chained, base), "device time on the compute stream"))
    host = _wall(lambda: backend_gpu.run_chain(chain, d), repeats, lambda: None)
    rows.append(("augment: nbdata run_chain, host time per call (not a rate)", None, "-",
                 f"{host * 1e3:.3f} ms to draw, copy and launch"))
    try:
        half_chain = augment_chain(images.shape[1:], sz.crop, np.float16)
        fp16 = _rate(values * (1 + 2), time_on(be, cs, lambda: backend_gpu.run_chain(half_chain, d),
                                               repeats))
        rows.append(("augment: nbdata run_chain, float16 out", fp16, _ratio(fp16, base),
                     "bytes: 1 read + 2 written per value"))
    except (TypeError, ValueError) as e:
        rows.append(("augment: nbdata run_chain, float16 out", None, "-", f"unsupported: {e}"))
    if sz.peers:
        rows.extend(_peer_rows(images, moved, base, repeats, sz.crop))
    return rows


_PTX = ("div.s64", "rem.s64", "div.u64", "rem.u64", "mul.hi.s64", "mul.hi.u64", "mul.lo.s64",
        "div.s32", "rem.s32", "mul.hi.s32", "mul.hi.u32", "mul.wide.s32", "mul.wide.u32",
        "ld.global.u8", "ld.global.nc.u8", "ld.global.f32", "ld.global.nc.f32", "ld.global.s32",
        "ld.global.nc.s32", "ld.global.u32", "st.global.f32", "st.global.u16", "st.global.b16")


def _ptx_counts(kernel) -> str:
    """How often the kernel's PTX uses the 64-bit and 32-bit index arithmetic and each
    load/store width (how the int32 indexing and the loads came out)."""
    try:
        asm = kernel.inspect_asm()
        text = "\n".join(asm.values()) if isinstance(asm, dict) else str(asm)
    except Exception as e:  # noqa: BLE001 - the simulator has no PTX
        return f"no PTX ({type(e).__name__})"
    counts = [f"{k} {text.count(k + ' ') + text.count(k + chr(9))}" for k in _PTX]
    return "; ".join(c for c in counts if not c.endswith(" 0")) or "none of the counted"


def _peer_rows(images, moved, base, repeats, crop) -> list:
    rows = []
    mean, std = np.array(MEAN), np.array(STD)
    try:
        import cupy as cp
        x = cp.asarray(images)
        m, s = cp.asarray(mean, cp.float32), cp.asarray(std, cp.float32)

        def cupy_chain():
            top, left = 11, 17
            c = x[:, top:top + crop, left:left + crop, :][:, :, ::-1, :]
            return cp.ascontiguousarray(((c.astype(cp.float32) - m) / s).transpose(0, 3, 1, 2))
        seconds = _events_cupy(cp, cupy_chain, repeats)
        rate = _rate(moved, seconds)
        rows.append(("augment: CuPy, the same ops separately", rate, _ratio(rate, base),
                     "bytes of the fused op (read crop + write float32), CuPy events"))
    except Exception as e:  # noqa: BLE001 - a peer that cannot run is a note
        rows.append(("augment: CuPy, the same ops separately", None, "-",
                     f"skipped: {type(e).__name__}: {str(e)[:80]}"))
    try:
        import torch
        from torchvision.transforms import v2
        t = torch.from_numpy(images).cuda().permute(0, 3, 1, 2)
        pipeline = v2.Compose([v2.RandomCrop(crop), v2.RandomHorizontalFlip(),
                               v2.ToDtype(torch.float32), v2.Normalize(mean.tolist(), std.tolist())])
        seconds = _events_torch(torch, lambda: pipeline(t), repeats)
        rate = _rate(moved, seconds)
        rows.append(("augment: torchvision.transforms.v2 on GPU", rate, _ratio(rate, base),
                     "bytes of the fused op, torch events"))
    except Exception as e:  # noqa: BLE001
        rows.append(("augment: torchvision.transforms.v2 on GPU", None, "-",
                     f"skipped: {type(e).__name__}: {str(e)[:80]}"))
    return rows


def _events_cupy(cp, fn, repeats):
    fn()
    cp.cuda.runtime.deviceSynchronize()
    best = float("inf")
    for _ in range(repeats):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(a, b) / 1e3)
    return best


def _events_torch(torch, fn, repeats):
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        best = min(best, a.elapsed_time(b) / 1e3)
    return best


# -------------------------------------------------------------------------- decode
def jpeg_set(count: int, side: int | None = None) -> list:
    """``count`` synthetic ImageNet-like JPEGs (perf/imagenet.py's images; ``side``:
    small square ones instead, for the tests)."""
    import nbdata as nd
    rng = np.random.default_rng(5)
    if side is not None:
        return [bytes(nd.image.encode_jpeg(rng.integers(0, 256, (side + j % 3, side, 3), np.uint8),
                                           quality=90)) for j in range(count)]
    from perf.imagenet import _noise_bank, synthetic_image
    noise = _noise_bank(rng)
    return [bytes(nd.image.encode_jpeg(synthetic_image(j, noise), quality=90)) for j in range(count)]


def decode_rows(be, sz: Sizes, repeats: int) -> list:
    from nbdata import image
    from nbdata.compiler import backend_gpu
    from nbdata.gpu import jpeg
    from nbdata.primitives.jpeg import JpegOptions, decode_jpeg
    jpegs = jpeg_set(sz.images, sz.decode_side)
    batch = sz.decode_batch
    batches = [jpegs[k:k + batch] for k in range(0, len(jpegs) - batch + 1, batch)]
    count = batch * len(batches)
    sync = _device_sync(be)
    rows = [("decode: images (mean KB)", None, "-",
             f"{count} images in batches of {batch}, {np.mean([len(j) for j in jpegs]) / 1024:.1f} KB")]
    codec = jpeg._codec()
    base = None
    if codec is not None:
        for name, backends in jpeg.backend_choices(codec, be):
            try:
                dec = codec.Decoder(device_id=be.device_id, backends=backends) \
                    if backends is not None else codec.Decoder(device_id=be.device_id)
                streams = [[codec.CodeStream(j) for j in b] for b in batches]
                params = codec.DecodeParams(apply_exif_orientation=False,
                                            color_spec=codec.ColorSpec.SRGB)

                def run(dec=dec, streams=streams, params=params):
                    for s in streams:
                        out = dec.decode(s, params=params)
                        if any(r is None for r in out):
                            raise RuntimeError("an image failed to decode")
                rate = _rate(count, _wall(run, repeats, sync))
                rows.append((f"decode: nvImageCodec alone, {name}", rate, _ratio(rate, base),
                             "its own output buffers, code streams parsed before timing"))
                if backends is None:
                    # what a pipeline from bytes does: each image's header parsed
                    # (CodeStream) in the timed loop, as nbdata's rows below do
                    def from_bytes(dec=dec, params=params):
                        for b in batches:
                            out = dec.decode([codec.CodeStream(j) for j in b], params=params)
                            if any(r is None for r in out):
                                raise RuntimeError("an image failed to decode")
                    rate = _rate(count, _wall(from_bytes, repeats, sync))
                    base = base or rate
                    rows.append(("decode: nvImageCodec alone from bytes, default backends",
                                 rate, _ratio(rate, base), "CodeStream per image in the loop "
                                 "[base]"))
                    rate = _rate(count, _wall(lambda dec=dec, params=params: _into_one_buffer(
                        codec, be, dec, batches, params), repeats, sync))
                    rows.append(("decode: nvImageCodec alone into one pooled buffer per batch",
                                 rate, _ratio(rate, base), "the base decoding into nbdata's "
                                 "targets (no nbdata checks): the targets' own cost"))
            except Exception as e:  # noqa: BLE001 - a backend this GPU lacks is a note
                rows.append((f"decode: nvImageCodec alone, {name}", None, "-",
                             f"unavailable: {type(e).__name__}: {str(e)[:120]}"))
    else:
        rows.append(("decode: nvImageCodec alone", None, "-", "nvImageCodec not installed"))
    host = JpegOptions(3, dct_method="INTEGER_ACCURATE")
    last = []

    def ours():
        for b in batches:
            last[:] = [jpeg.decode_values(b, 3, host)]
    rate = _rate(count, _wall(ours, repeats, sync))
    rows.append(("decode: nbdata decode_jpeg (one pooled buffer per batch)", rate,
                 _ratio(rate, base), f"backends: {jpeg.backend_description(be)}"))
    steps = [decode_jpeg.primitive.gpu(3),
             image.random_resized_crop.primitive.gpu((sz.crop, sz.crop), seed=3),
             image.random_flip_left_right.primitive.gpu(4),
             image.normalize.primitive.gpu(np.array(MEAN), np.array(STD)),
             image.hwc_to_chw.primitive.gpu()]
    arrays = [np.array(b, dtype=object) for b in batches]

    def full():
        for k, b in enumerate(arrays):
            last[:] = [backend_gpu.run_steps(steps, b, k * batch)]
    saved = os.environ.get("NBDATA_GPU_JPEG_ROI")
    try:
        os.environ["NBDATA_GPU_JPEG_ROI"] = "0"
        rate = _rate(count, _wall(full, repeats, sync))
        rows.append(("decode: nbdata decode + random_resized_crop/flip/normalize/CHW", rate,
                     _ratio(rate, base), "as a GPU map runs it, one batch at a time; target "
                     ">= 0.95x and >= 10k images/s"))
        for calls, label in ((None, "1 batch"), (4, "4 batches"), (-1, "AUTOTUNE")):
            rate = _rate(count, _wall(_as_map(jpegs[:count], batch, sz.crop, calls, last),
                                      repeats, sync))
            rows.append((f"decode: the same as a pipeline's GPU map, {label} in flight", rate,
                         _ratio(rate, base), "from_tensor_slices(jpegs).batch.prefetch_to_device"
                         f".map(num_parallel_calls={'AUTOTUNE' if calls == -1 else calls})"))
        if jpeg.roi_supported(codec):
            os.environ["NBDATA_GPU_JPEG_ROI"] = "1"
            rate = _rate(count, _wall(full, repeats, sync))
            rows.append(("decode: the same, region decode of the crop windows", rate,
                         _ratio(rate, base), "NBDATA_GPU_JPEG_ROI=1"))
    finally:
        if saved is None:
            os.environ.pop("NBDATA_GPU_JPEG_ROI", None)
        else:
            os.environ["NBDATA_GPU_JPEG_ROI"] = saved
    return rows


def _as_map(jpegs: list, batch: int, crop: int, calls, last: list):
    """One epoch of ``from_tensor_slices((jpegs, labels)).batch(batch)
    .prefetch_to_device().map(decode + random_resized_crop/flip/normalize/CHW,
    num_parallel_calls=calls)`` (-1: AUTOTUNE), compiled once."""
    import nbdata as nd
    calls = nd.AUTOTUNE if calls == -1 else calls

    def prep(images, labels):
        x = nd.gpu.decode_jpeg(images, channels=3)
        x = nd.gpu.random_resized_crop(x, (crop, crop), seed=3)
        x = nd.gpu.random_flip_left_right(x, seed=4)
        return nd.gpu.hwc_to_chw(nd.gpu.normalize(x, MEAN, STD)), labels
    encoded = np.empty(len(jpegs), dtype=object)
    encoded[:] = jpegs
    pipe = (nd.Dataset.from_tensor_slices((encoded, np.arange(len(jpegs))))
            .batch(batch).prefetch_to_device("cuda:0")
            .map(prep, num_parallel_calls=calls)).compile()

    def epoch():
        for out in pipe:
            last[:] = [out]
    return epoch


def _into_one_buffer(codec, be, dec, batches: list, params) -> None:
    """The base's decode from bytes, each batch into one buffer from nbdata's pool through
    the targets nbdata gives nvImageCodec: what nbdata's decode does, less its checks."""
    from nbdata.chunks import packed_offsets
    from nbdata.gpu import jpeg
    from nbdata.gpu.array import DeviceArray
    stream = getattr(be, "default", None)
    handle = 0 if stream is None else int(stream.handle)
    for b in batches:
        streams = [codec.CodeStream(j) for j in b]
        shapes = np.array([(s.height, s.width, 3) for s in streams], np.int64)
        offsets = packed_offsets(shapes)
        batch = jpeg.RaggedBatch(DeviceArray.empty((int(offsets[-1]),), np.uint8, stream),
                                 offsets, shapes)
        targets = [codec.as_image(t, handle) for t in jpeg._targets(be, batch)]
        out = dec.decode(streams, images=targets, params=params, cuda_stream=handle)
        if any(r is None for r in out):
            raise RuntimeError("an image failed to decode")


# -------------------------------------------------------------------------- report
_MEASURE = {"staging": staging_rows, "augment": augment_rows, "decode": decode_rows}


def measure(parts=PARTS, sizes: Sizes | None = None, repeats: int = 5,
            allow_simulated: bool = False) -> list:
    """The rows of ``parts``: (name, rate or None, ratio text, note). A part that fails
    gives one row saying why (the other parts still run)."""
    from nbdata.gpu import runtime
    reason = None if allow_simulated else _gpu_reason()
    rows = []
    for part in parts:
        if reason is not None:
            rows.append((f"{part}: -", None, "-", reason))
            continue
        try:
            be = runtime.backend()
            rows.extend(_MEASURE[part](be, sizes or Sizes(), repeats))
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            rows.append((f"{part}: failed", None, "-", f"{type(e).__name__}: {str(e)[:300]}"))
    return rows


def _parts_from_env() -> tuple:
    text = os.environ.get("NBDATA_PERF_GPU_PARTS", "")
    parts = tuple(p.strip() for p in text.split(",") if p.strip()) or PARTS
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        raise SystemExit(f"NBDATA_PERF_GPU_PARTS: unknown part(s) {unknown}; use {PARTS}")
    return parts


def render(rows: list, title: str, header: str) -> str:
    def unit(name):
        return "images/s" if name.startswith("decode") else "GB/s"
    cols = ("implementation", "rate", "vs [base]", "note")
    body = [(name, "-" if rate is None else
             (f"{rate:,.0f} images/s" if unit(name) == "images/s" else f"{rate / 1e9:.1f} GB/s"),
             ratio, note) for name, rate, ratio, note in rows]
    widths = [max(len(c), *(len(r[i]) for r in body)) for i, c in enumerate(cols)]

    def line(row):
        return "  ".join(f"{v:{'<' if i in (0, 3) else '>'}{w}}"
                         for i, (v, w) in enumerate(zip(row, widths))).rstrip()
    return "\n".join([title, header, line(cols), "  ".join("-" * w for w in widths)]
                     + [line(r) for r in body])


def report(header: str, quick: bool, load, repeats: int = 5, parts=None) -> str:
    parts = parts or _parts_from_env()
    sz = sizes_for(quick)
    rows = measure(parts, sz, repeats)
    title = (f"== gpu ({', '.join(parts)}): {sz.batch} x {sz.side}x{sz.side}x3 uint8 batches; "
             f"crop {sz.crop} + flip + normalize + CHW; {sz.images} JPEGs in batches of "
             f"{sz.decode_batch} ==")
    return render(rows, title, f"{header}; {load.describe()}")


def main(argv=None) -> int:
    import argparse
    import sys
    parser = argparse.ArgumentParser(prog="python -m perf.gpu_pipeline")
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--images", type=int, default=None, help="JPEGs in the decode part")
    parser.add_argument("--batch", type=int, default=None, help="images per staging/augment batch")
    args = parser.parse_args(argv)
    parts = tuple(p for p in args.parts.split(",") if p)
    sz = sizes_for(args.quick)
    if args.images:
        sz.images = args.images
    if args.batch:
        sz.batch = args.batch
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    rows = measure(parts, sz, args.repeats)
    print(render(rows, f"== gpu parts {','.join(parts)} ==", f"repeats {args.repeats}"), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
