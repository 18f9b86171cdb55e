"""The GPU backend: a chain of steps (``nbdata/primitives/gpu.py``) written as numba-cuda
kernels through the one emitter (``nbdata/compiler/emit.py``) and launched on a batch.

A chain is one kernel, one thread per output value: the value is read from the source
batch through every step's sampler. A reduction (contrast's channel means) cuts the
chain: the part before it writes a buffer, a kernel computes each image's channel means
(TF's order of additions, as the CPU does) and the part from the reduction on reads the
buffer. Kernels are cached by their source and the objects it names (a user function a
step applies included), the most recent ``_MAX_KERNELS`` of them.
"""

from __future__ import annotations

import collections
import math
import threading

import numba
import numpy as np

from nbdata.compiler.emit import Source, jitted, materialize
from nbdata.primitives import gpu
from nbdata.primitives.gpu import Chain

_THREADS = 128
_MAX_KERNELS = 64


class _KernelSource:
    """What steps write kernel code through: statements (``emit``), fresh names, kernel
    parameters, and device functions (a Python function compiled for the GPU, named by
    a global)."""

    def __init__(self):
        self.src = Source()
        self.src.globals.update({"numba": numba, "math": math})
        self.params: list[str] = []

    def emit(self, text: str) -> None:
        self.src.emit(1, text)

    def fresh(self, prefix: str) -> str:
        return self.src.fresh(prefix)

    def param(self) -> str:
        name = f"p{len(self.params)}"
        self.params.append(name)
        return name

    def device_function(self, fn) -> str:
        from numba import cuda
        return self.src.global_name("dev", jitted(fn, "cuda-device",
                                                  lambda f: cuda.jit(device=True)(f)))


def kernel_source(chain: Chain) -> tuple[str, dict]:
    """One kernel for a chain without reductions inside: thread ``i`` computes output
    value ``i`` of the batch. Parameters: ``src, out, n``, then for images of their own
    sizes each one's offset, height and width, then each step's parameters (a
    reduction's channel means first) and constants."""
    g = _KernelSource()
    ragged = (g.param(), g.param(), g.param()) if chain.ragged else None
    names = []
    for s in chain.steps:
        count = s.param_count + s.constant_count + (1 if s.kind == "reduce" else 0)
        names.append([g.param() for _ in range(count)])
    out_shape = chain.out_shape
    out_size = int(np.prod(out_shape, dtype=np.int64))
    g.emit("i = cuda.grid(1)")
    g.emit(f"if i >= n * {out_size}:")
    g.emit("    return")
    g.emit(f"b = i // {out_size}")
    g.emit(f"r = i - b * {out_size}")
    if chain.image:
        h, w, c_in = chain.shape

        def source(y, x, c):
            var = g.fresh("s")
            if chain.ragged:
                base, _, width = ragged
                g.emit(f"{var} = src[{base}[b] + ({y} * {width}[b] + {x}) * {c_in} + {c}]")
            else:
                g.emit(f"{var} = src[((b * {h} + {y}) * {w} + {x}) * {c_in} + {c}]")
            return var, chain.dtype

        layout = next((s for s in chain.steps if s.kind == "layout"), None)
        img_shape = chain.shapes[chain.steps.index(layout)] if layout else out_shape
        perm = layout.perm if layout else (0, 1, 2)
        # Output position -> logical (y, x, c) of the (H, W, C) image before the layout.
        dims = [img_shape[p] for p in perm]
        g.emit(f"q0 = r // {dims[1] * dims[2]}")
        g.emit(f"q1 = (r // {dims[2]}) % {dims[1]}")
        g.emit(f"q2 = r % {dims[2]}")
        logical = [None, None, None]
        for k, p in enumerate(perm):
            logical[p] = f"q{k}"
        coords = tuple(logical)
    else:
        size = int(np.prod(chain.shape, dtype=np.int64))
        channels = int(chain.shape[-1]) if chain.shape else 1
        g.emit(f"c = r % {channels}")

        def source(y, x, c):
            var = g.fresh("s")
            g.emit(f"{var} = src[b * {size} + {x}]")
            return var, chain.dtype
        coords = (None, "r", "c")
    sample = source
    for k, (s, in_shape) in enumerate(zip(chain.steps, chain.shapes)):
        if k == 0 and chain.ragged:   # the image's own size, per element
            _, height, width = ragged
            in_shape = (f"{height}[b]", f"{width}[b]", in_shape[2])
        sample = s.sampler(g, names[k], in_shape, sample)
    value, _ = sample(*coords)
    g.emit(f"out[i] = numba.{'bool_' if chain.out_dtype == np.bool_ else chain.out_dtype.name}"
           f"({value})")
    g.src.lines.insert(0, f"def kernel({', '.join(['src', 'out', 'n'] + g.params)}):")
    return g.src.text(), g.src.globals


_kernels: "collections.OrderedDict[tuple, object]" = collections.OrderedDict()
_lock = threading.Lock()


def compiled(chain: Chain):
    """The chain's kernel: the same source over the same objects is the same kernel
    (the most recent ``_MAX_KERNELS`` are kept, with what they name)."""
    from numba import cuda
    text, glb = kernel_source(chain)
    glb = dict(glb, cuda=cuda)
    fn = materialize("kernel", text, glb, "gpu-chain")
    key = (text, tuple(sorted((k, id(v)) for k, v in glb.items())))
    with _lock:
        kernel = _kernels.get(key)
        if kernel is None:
            kernel = _kernels[key] = cuda.jit(fn)
        _kernels.move_to_end(key)
        while len(_kernels) > _MAX_KERNELS:
            _kernels.popitem(last=False)
    return kernel


def _means_kernel(scale: float):
    """The kernel of each image's channel means: thread ``(b, c)`` folds the image's
    pixels in halves in a scratch row (TF's order), as ``nd.image.adjust_contrast``."""
    from numba import cuda
    text = (
        "def means(src, out, n, scratch, pixels, channels):\n"
        "    t = cuda.grid(1)\n"
        "    if t >= n * channels:\n"
        "        return\n"
        "    b = t // channels\n"
        "    c = t - b * channels\n"
        "    base = b * pixels * channels\n"
        "    for j in range(pixels):\n"
        f"        scratch[t * pixels + j] = numba.float32(src[base + j * channels + c]) * {scale!r}\n"
        "    remaining = pixels\n"
        "    while True:\n"
        "        right = remaining // 2\n"
        "        left = remaining - right\n"
        "        for j in range(right):\n"
        "            scratch[t * pixels + j] = scratch[t * pixels + j] + "
        "scratch[t * pixels + left + j]\n"
        "        remaining = left\n"
        "        if remaining <= 1:\n"
        "            break\n"
        "    out[t] = scratch[t * pixels] * (numba.float32(1.0) / numba.float32(pixels))\n")
    glb = {"numba": numba, "cuda": cuda}
    fn = materialize("means", text, glb, "gpu-means")
    return jitted(fn, "cuda", lambda f: cuda.jit(f))


def run_chain(chain: Chain, x, seed_base: int = 0):
    """Apply ``chain`` to a batch (a DeviceArray of ``(n,) + chain.shape``, or a
    RaggedBatch of images of their own sizes): one launch per segment (one for a chain
    without reductions)."""
    for segment in chain.segments():
        x = _run_segment(segment, x, seed_base)
    return x


def _run_segment(chain: Chain, x, seed_base: int):
    from nbdata.gpu import runtime
    from nbdata.gpu.array import DeviceArray
    be = runtime.backend()
    be.bind()
    n = x.shape[0]
    # Kernels run on this thread's compute stream (not the batch's staging stream, where
    # the next batches' copies are queued); their outputs are allocated there too.
    out = DeviceArray.empty((n,) + chain.out_shape, chain.out_dtype, be.compute_stream())
    total = n * int(np.prod(chain.out_shape, dtype=np.int64))
    if total == 0:
        return out
    params = []
    sizes = None
    if chain.ragged:
        sizes = x.shapes
        params += [np.ascontiguousarray(x.offsets[:n]), np.ascontiguousarray(sizes[:, 0]),
                   np.ascontiguousarray(sizes[:, 1])]
        x = x.data
    for k, (s, shape) in enumerate(zip(chain.steps, chain.shapes)):
        if s.kind == "reduce":
            params.append(_means(x, n, shape, chain.dtype, s.mean_scale(chain.dtype)))
        params += s.params(shape, seed_base, n, sizes if k == 0 else None)
        params += s.constants(int(shape[-1]) if shape else 1)
    _launch(compiled(chain), total, x, out, n, params)
    return out


def _means(x, n: int, shape: tuple, dtype, scale: float):
    """Each image's channel means of a batch (a device array of n * C float32)."""
    from nbdata.gpu import runtime
    from nbdata.gpu.array import DeviceArray
    h, w, c = shape
    stream = runtime.backend().compute_stream()
    means = DeviceArray.empty((n * c,), np.float32, stream)
    scratch = DeviceArray.empty((n * c * h * w,), np.float32, stream)
    _launch(_means_kernel(float(np.float32(scale))), n * c, x, means, n,
            [scratch, np.int64(h * w), np.int64(c)], scalars=2)
    return means


def _launch(kernel, total: int, x, out, n: int, params: list, scalars: int = 0) -> None:
    """``kernel[blocks, threads](src, out, n, *params)`` on this thread's compute stream,
    after the batch's data is ready (its event, not its whole stream); host arrays among
    ``params`` are copied to the device first (the last ``scalars`` are passed as they
    are). The batch's memory is released only after the kernel (a consumer stream)."""
    from nbdata.gpu import runtime
    from nbdata.gpu.array import DeviceArray
    be = runtime.backend()
    blocks = (total + _THREADS - 1) // _THREADS
    arrays, rest = (params[:-scalars], params[-scalars:]) if scalars else (params, [])
    if be.name == "sim":
        views = [p.host_view().reshape(-1) if isinstance(p, DeviceArray) else p for p in arrays]
        kernel[blocks, _THREADS](x.host_view().reshape(-1), out.host_view().reshape(-1), n,
                                 *views, *rest)
        return
    stream = be.compute_stream()
    be.wait(stream, x.ready)
    x._consumed_on(int(stream.handle))
    device = [p if isinstance(p, DeviceArray) else
              DeviceArray.from_host(np.ascontiguousarray(p), stream) for p in arrays]
    kernel[blocks, _THREADS, stream](_Raw(x), _Raw(out), n, *[_Raw(p) for p in device], *rest)
    out.ready, out.stream = be.event(stream), stream


class Prepared:
    """A chain's kernel with its parameters already on the device and its output
    allocated: ``launch()`` queues the kernel alone on ``stream`` (this thread's compute
    stream), for timing the kernel apart from the per-batch host work (perf/)."""

    def __init__(self, chain: Chain, x, seed_base: int = 0):
        from nbdata.gpu import runtime
        from nbdata.gpu.array import DeviceArray
        if len(chain.segments()) != 1:
            raise ValueError("prepared: a chain with a reduction runs as several kernels")
        be = self.backend = runtime.backend()
        self.stream = be.compute_stream()
        n = x.shape[0]
        self.out = DeviceArray.empty((n,) + chain.out_shape, chain.out_dtype, self.stream)
        self.total = n * int(np.prod(chain.out_shape, dtype=np.int64))
        params = []
        for s, shape in zip(chain.steps, chain.shapes):
            params += s.params(shape, seed_base, n) + s.constants(int(shape[-1]) if shape else 1)
        self.params = [DeviceArray.from_host(np.ascontiguousarray(p), self.stream) for p in params]
        self.kernel, self.x, self.n = compiled(chain), x, n
        be.wait(self.stream, x.ready)
        self.blocks = (self.total + _THREADS - 1) // _THREADS

    def launch(self) -> None:
        if self.backend.name == "sim":
            views = [p.host_view().reshape(-1) for p in self.params]
            self.kernel[self.blocks, _THREADS](self.x.host_view().reshape(-1),
                                               self.out.host_view().reshape(-1), self.n, *views)
            return
        self.kernel[self.blocks, _THREADS, self.stream](
            _Raw(self.x), _Raw(self.out), self.n, *[_Raw(p) for p in self.params])

    def describe(self) -> str:
        return f"{self.blocks} blocks x {_THREADS} threads, {len(self.params)} parameter arrays"


def prepared(chain: Chain, x, seed_base: int = 0) -> Prepared:
    """The chain's kernel ready to launch on ``x`` again and again (see Prepared)."""
    return Prepared(chain, x, seed_base)


class _Raw:
    """A device array handed to a kernel, ordered by the caller (no stream to sync)."""

    def __init__(self, array):
        self.array = array
        self.__cuda_array_interface__ = dict(array.interface(), stream=None,
                                             shape=(array.size,))


def run_steps(steps: list, x, seed_base: int = 0):
    """Apply steps to a batch: a decoding step first makes the chain's source (a view of
    its bytes, or images decoded from a host batch), then the rest runs as one chain."""
    if steps and steps[0].kind == "decode":
        x = steps[0].decode(x)
        steps = steps[1:]
    if hasattr(x, "offsets"):   # a RaggedBatch: images of their own sizes
        shape, dtype = (None, None, x.shape[3]), x.dtype
    else:
        _check_batch(steps, x)
        shape, dtype = x.shape[1:], x.dtype
    if not steps:
        return x
    return run_chain(Chain(steps, shape, dtype), x, seed_base)


def _check_batch(steps: list, x) -> None:
    from nbdata.gpu.array import DeviceArray
    name = steps[0].name if steps else "op"
    if not isinstance(x, DeviceArray):
        raise TypeError(f"nd.gpu.{name}: expects a DeviceArray batch (from prefetch_to_device or "
                        f"nd.gpu.DeviceArray.from_host), got {type(x).__name__}")
    if x.ndim < 1:
        raise ValueError(f"nd.gpu.{name}: expects a batch, got a 0-d array")


gpu.RUNNER[:] = [run_steps]   # eager nd.gpu ops run here

__all__ = ["Prepared", "compiled", "kernel_source", "prepared", "run_chain", "run_steps"]
