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
import functools
import math
import re
import threading

import numba
import numpy as np

from nbdata.compiler.emit import Source, jitted, materialize
from nbdata.primitives import gpu
from nbdata.primitives.gpu import Chain

# Threads per block: 256 on a GPU. Numba's CUDA simulator runs each thread of a block
# as a Python thread, started and joined per launch, so a block of 256 for a test's
# 90-value image started 256 threads; under the simulator blocks are 32 threads (one
# warp). Kernels index by ``blockIdx.x * _THREADS + threadIdx.x`` and use no shared
# memory, so any block size computes the same values.
_THREADS = 32 if numba.config.ENABLE_CUDASIM else 256
_MAX_KERNELS = 64
_GRID_Y = 65535          # CUDA's limit of gridDim.y: larger batches loop over images
_INT32 = 2 ** 31 - 1


class _KernelSource:
    """What steps write kernel code through: statements (``emit``, at the current
    depth), fresh names, kernel parameters, and device functions (a Python function
    compiled for the GPU, named by a global)."""

    def __init__(self):
        self.src = Source()
        self.src.globals.update({"numba": numba, "math": math})
        self.params: list[str] = []
        self.depth = 1

    def emit(self, text: str) -> None:
        self.src.emit(self.depth, text)

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

    def to_bits(self, kind: str) -> str:
        """The name of a function taking a float32 to the uint16 bits of ``kind``
        ("float16": round to nearest even, as the GPU's conversion; "bfloat16")."""
        from nbdata.gpu import runtime
        if runtime.simulated():
            fn = {"float16": _float16_bits_host, "bfloat16": _bfloat16_bits_host}[kind]
            return self.src.global_name(f"bits_{kind}", fn)
        return self.device_function(_gpu_bits()[kind])


# The GPU's float32 -> 16-bit conversions, as device functions over libdevice (written
# with libdevice as a global: a jitted function cannot import).
_BITS_SOURCE = """
def float16_bits(v):
    return libdevice.float2half_rn(v)


def bfloat16_bits(v):
    if v != v:
        return numba.uint16(0x7FC0)
    bits = numba.int64(libdevice.float_as_int(v)) & 0xFFFFFFFF
    return numba.uint16((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16)
"""


@functools.lru_cache(maxsize=None)
def _gpu_bits() -> dict:
    from numba.cuda import libdevice
    glb = {"libdevice": libdevice, "numba": numba}
    exec(compile(_BITS_SOURCE, "<nbdata gpu bits>", "exec"), glb)  # noqa: S102 - fixed source
    return {"float16": glb["float16_bits"], "bfloat16": glb["bfloat16_bits"]}


def _float16_bits_host(v):
    """The simulator's float16 conversion (NumPy's: round to nearest even)."""
    return np.float32(v).astype(np.float16).view(np.uint16)


def _bfloat16_bits_host(v):
    """float32 -> bfloat16 bits, rounding to nearest even (NaN: the quiet NaN)."""
    v = np.float32(v)
    if v != v:
        return np.uint16(0x7FC0)
    bits = int(v.view(np.uint32))
    return np.uint16((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16)


def _u32(value: int) -> str:
    return f"numba.uint32({int(value)})"


def check_index_range(chain: Chain) -> None:
    """The kernel indexes within an image in int32 (one image's input and output values
    below 2**31) and across the batch in int64: ValueError for images too large."""
    sizes = [int(np.prod(s, dtype=np.int64)) for s in chain.shapes if None not in s]
    if any(size > _INT32 for size in sizes):
        raise ValueError(f"nd.gpu: an element of {max(sizes):,} values is too large for one "
                         f"kernel (at most {_INT32:,} per element)")


def param_dtypes(chain: Chain) -> list:
    """The dtype of each of the chain kernel's parameter arrays, in order (see
    kernel_source), as _params makes them for a batch; None for a device array (a
    reduction's channel means). Found by asking each step for a one-image batch's."""
    dtypes = [np.dtype(np.int64), np.dtype(np.int32), np.dtype(np.int32)] if chain.ragged else []
    for k, (s, shape) in enumerate(zip(chain.steps, chain.shapes)):
        if s.kind == "reduce":
            dtypes.append(None)
        sizes = None
        if k == 0 and chain.ragged:
            sizes = np.array([[1 << 14, 1 << 14, shape[2] or 1]], np.int64)   # any crop fits
        dtypes += [_int32(p).dtype for p in s.params(shape, 0, 1, sizes)]
        dtypes += [np.ascontiguousarray(c).dtype
                   for c in s.constants(int(shape[-1]) if shape else 1)]
    return dtypes


def kernel_signature(chain: Chain) -> tuple:
    """The numba types of the chain kernel's arguments (see kernel_source)."""
    from numba import types
    dtypes = param_dtypes(chain)
    out = types.uint16 if chain.out_dtype == np.float16 else numba.from_dtype(chain.out_dtype)
    head = (types.Array(numba.from_dtype(chain.dtype), 1, "C"), types.Array(out, 1, "C"),
            types.int64)
    packed = [d for d in dtypes if d is not None]
    return head + ((types.Array(types.uint8, 1, "C"),) if packed else ()) + \
        tuple(types.Array(types.float32, 1, "C") for d in dtypes if d is None) + \
        (types.int64,) * len(packed)


def kernel_source(chain: Chain) -> tuple[str, dict]:
    """One kernel for a chain without reductions inside, on a 2-D grid: ``blockIdx.y``
    is the image (looping by ``gridDim.y`` past 65,535 images), ``x`` the output value
    within it. Positions within an image are 32-bit (divisions by the output's constant
    dims), the image's base offset int64, indices unsigned.

    Its parameter arrays are, in order: for images of their own sizes each one's offset
    (int64), height and width, then each step's parameters (a reduction's channel means
    first) and constants. The host ones arrive in ONE buffer, each at its offset (what
    one copy brings): the arguments are ``src, out, n``, the buffer ``params`` (if any),
    the device arrays (the means), then each host array's byte offset in the buffer.
    One array argument costs a launch far more host time than an integer, so a chain
    of ten parameter arrays passes three."""
    check_index_range(chain)
    g = _KernelSource()
    g.src.globals["np"] = np
    ragged = (g.param(), g.param(), g.param()) if chain.ragged else None
    names = []
    for s in chain.steps:
        count = s.param_count + s.constant_count + (1 if s.kind == "reduce" else 0)
        names.append([g.param() for _ in range(count)])
    dtypes = param_dtypes(chain)
    if len(dtypes) != len(g.params):
        raise AssertionError(f"nd.gpu: {len(g.params)} kernel parameters, {len(dtypes)} made")
    out_shape = chain.out_shape
    out_size = int(np.prod(out_shape, dtype=np.int64))
    vec = values_per_thread(chain)
    planes = channel_planes(chain)
    # Positions are computed unsigned in 32 bits (the divisions by the output's constant
    # dims then narrow to 32-bit multiplies) and used as int64; array indices are cast to
    # uint64, so no negative-index wraparound is emitted for them.
    g.emit(f"ru = numba.uint32(numba.uint32(cuda.blockIdx.x) * {_u32(_THREADS)} + "
           "numba.uint32(cuda.threadIdx.x))")
    g.emit(f"if ru >= {_u32(threads_per_image(chain))}:")
    g.emit("    return")
    for name, dtype in zip(g.params, dtypes):   # the host arrays' views of the buffer
        if dtype is not None:
            g.emit(f"{name} = params[o{name[1:]}:].view(np.{dtype.name})")
    if chain.image:
        h, w, c_in = chain.shape

        def source(y, x, c):
            var = g.fresh("s")
            if chain.ragged:
                base, _, width = ragged
                g.emit(f"{var} = src[numba.uint64({base}[b] + numba.int32(({y} * {width}[b] + "
                       f"{x}) * {c_in} + {c}))]")
            else:
                g.emit(f"{var} = src[numba.uint64(numba.int64(b) * {h * w * c_in} + "
                       f"numba.int32(({y} * {w} + {x}) * {c_in} + {c}))]")
            return var, chain.dtype

        layout = next((s for s in chain.steps if s.kind == "layout"), None)
        img_shape = chain.shapes[chain.steps.index(layout)] if layout else out_shape
        perm = layout.perm if layout else (0, 1, 2)
        # Output position -> logical (y, x, c) of the (H, W, C) image before the layout.
        dims = [img_shape[p] for p in perm]
        # thread ru computes `vec` values of the last output dim (of every channel plane,
        # where the output is planar: see channel_planes), `per_row` apart: the threads of
        # a row are `per_row` consecutive ones, so each load and store instruction of a
        # warp reads and writes adjacent bytes (coalesced), not every vec-th value
        row = dims[1] * dims[2] // vec
        per_row = dims[2] // vec
        if planes:
            g.emit("t0 = ru")
        else:
            g.emit(f"u0 = numba.uint32(ru // {_u32(row)})")
            g.emit(f"t0 = numba.uint32(ru - u0 * {_u32(row)})")
            g.emit("q0 = numba.int64(u0)")
        g.emit(f"u1 = numba.uint32(t0 // {_u32(per_row)})")
        g.emit("q1 = numba.int64(u1)")
        g.emit(f"q2 = numba.int64(numba.uint32(t0 - u1 * {_u32(per_row)}))")
        # the output offset of the thread's first value (in its plane)
        g.emit(f"r = (numba.int64(ru) - q2) * {vec} + q2")
        logical = [None, None, None]
        for k, p in enumerate(perm):
            logical[p] = f"q{k}"
        coords = tuple(logical)
    else:
        size = int(np.prod(chain.shape, dtype=np.int64))
        channels = int(chain.shape[-1]) if chain.shape else 1
        g.emit("r = numba.int64(ru)")   # one value per thread (values_per_thread)
        g.emit(f"c = numba.int64(numba.uint32(ru % {_u32(channels)}))")

        def source(y, x, c):
            var = g.fresh("s")
            g.emit(f"{var} = src[numba.uint64(numba.int64(b) * {size} + {x})]")
            return var, chain.dtype
        coords = (None, "r", "c")
    g.emit("b = numba.int64(cuda.blockIdx.y)")
    g.emit("while b < n:")
    loop_at = len(g.src.lines)
    g.depth = 2
    if vec > 1:   # the values next to each other: the index math above and the
        # per-image parameter loads serve all of them
        g.emit(f"for kv in range({vec}):")
        g.depth = 3
        coords = tuple("qk" if q == "q2" else q for q in coords)
        g.emit(f"qk = q2 + kv * {per_row}")
    sample = source
    for k, (s, in_shape) in enumerate(zip(chain.steps, chain.shapes)):
        if k == 0 and chain.ragged:   # the image's own size, per element
            _, height, width = ragged
            in_shape = (f"{height}[b]", f"{width}[b]", in_shape[2])
        sample = s.sampler(g, names[k], in_shape, sample)
    at = f"r + kv * {per_row}" if vec > 1 else "r"   # per_row: of an image chain
    plane = out_size // max(planes, 1)
    for c in range(planes) if planes else (None,):
        # planar output: the chain is written out once per channel with the channel a
        # constant, so one thread reads a pixel's channels together (one load of adjacent
        # bytes, not one per plane) and writes a run of each plane
        where = coords if c is None else tuple(f"numba.int64({c})" if q == "q0" else q
                                               for q in coords)
        value, _ = sample(*where)
        offset = "" if c is None else f" + {c * plane}"
        g.emit(f"out[numba.uint64(numba.int64(b) * {out_size}{offset} + {at})] = "
               f"{_out_type(chain.out_dtype)}({value})")
    g.depth = 2
    g.emit("b += numba.int64(cuda.gridDim.y)")
    _hoist_parameter_loads(g, loop_at)
    packed = [name for name, dtype in zip(g.params, dtypes) if dtype is not None]
    args = ["src", "out", "n"] + (["params"] if packed else []) + \
        [name for name, dtype in zip(g.params, dtypes) if dtype is None] + \
        [f"o{name[1:]}" for name in packed]
    g.src.lines.insert(0, f"def kernel({', '.join(args)}):")
    return g.src.text(), g.src.globals


_PARAM_LOAD = re.compile(r"\b(p\d+)\[(b|q0|numba\.int64\((\d+)\))\]")


def _local(m) -> str:
    return f"{m.group(1)}_{m.group(2) if m.group(3) is None else 'k' + m.group(3)}"


def _hoist_parameter_loads(g: _KernelSource, start: int) -> None:
    """Each parameter read as ``p<k>[b]`` (per image), ``p<k>[q0]`` (per channel of a
    CHW output row, fixed per thread) or at a constant index (a planar chain's per-channel
    constants) inside the image loop is loaded once at the top of the loop: the compiler
    cannot, since the output stores might alias them."""
    lines = g.src.lines
    found: dict = {}
    for j in range(start, len(lines)):
        for m in _PARAM_LOAD.finditer(lines[j]):
            found.setdefault(_local(m), (m.group(1), m.group(2)))
        lines[j] = _PARAM_LOAD.sub(_local, lines[j])
    loads = [f"        {local} = {name}[numba.uint64({index})]"
             for local, (name, index) in sorted(found.items())]
    lines[start:start] = loads


VALUES_PER_THREAD = 4


def values_per_thread(chain: Chain) -> int:
    """How many output values of a row one thread of the chain's kernel computes: 4 (or
    2) where the image's last output dim is a multiple of it, else 1. They are the row's
    thread count apart (see kernel_source), not adjacent."""
    if not chain.image:
        return 1
    last = int(chain.out_shape[-1])
    for width in (VALUES_PER_THREAD, 2):
        if width <= VALUES_PER_THREAD and last % width == 0:
            return width
    return 1


PLANES_PER_THREAD = 4


def channel_planes(chain: Chain) -> int:
    """The channel count where one thread writes every channel plane of its pixels (an
    image chain whose layout step puts the channels first, CHW, with at most
    ``PLANES_PER_THREAD`` of them), else 0 (a thread writes one run of one plane)."""
    if not chain.image:
        return 0
    layout = next((s for s in chain.steps if s.kind == "layout"), None)
    if layout is None or layout.perm != (2, 0, 1):
        return 0
    channels = int(chain.out_shape[0])
    return channels if channels <= PLANES_PER_THREAD else 0


def threads_per_image(chain: Chain) -> int:
    """The threads of a chain's kernel per image."""
    per_image = math.prod(int(d) for d in chain.out_shape) // values_per_thread(chain)
    return per_image // max(channel_planes(chain), 1)


def _out_type(dtype) -> str:
    dtype = np.dtype(dtype)
    if dtype == np.float16:   # the kernel writes float16 as its bits (nd.gpu.cast's)
        return "numba.uint16"
    return f"numba.{'bool_' if dtype == np.bool_ else dtype.name}"


def _out_arg(out):
    """The output as the kernel writes it: float16 through a uint16 view of its bits."""
    return out.view(np.uint16) if out.dtype == np.float16 else out


_kernels: "collections.OrderedDict[tuple, object]" = collections.OrderedDict()
_by_chain: "collections.OrderedDict[tuple, object]" = collections.OrderedDict()
_lock = threading.Lock()
# Numba's CUDA simulator swaps module globals for the length of a launch: launches from
# two threads (a GPU map with batches in flight) take turns under it.
_SIM_LAUNCH = threading.Lock()
stats = {"sources written": 0}


def chain_key(chain: Chain) -> tuple:
    """What makes a chain's kernel: its step objects (their identity: a step's source is
    fixed when it is made), the element shape and dtype."""
    return (tuple(chain.steps), chain.shape, chain.dtype.str)


def compiled(chain: Chain):
    """The chain's kernel. Kept per chain (the same steps over the same element type: no
    source written again) and per source over the same objects (chains written alike
    share a kernel); the most recent ``_MAX_KERNELS`` of each."""
    return _compiled(chain)[0]


def _compiled(chain: Chain) -> tuple:
    """(the chain's kernel, the dtypes it reads its parameter arrays as: param_dtypes)."""
    key = chain_key(chain)
    with _lock:
        entry = _by_chain.get(key)
        if entry is not None:
            _by_chain.move_to_end(key)
            return entry
    from numba import cuda
    text, glb = kernel_source(chain)
    dtypes = param_dtypes(chain)   # (as kernel_source wrote the source for)
    stats["sources written"] += 1
    glb = dict(glb, cuda=cuda)
    fn = materialize("kernel", text, glb, "gpu-chain")
    source_key = (text, tuple(sorted((k, id(v)) for k, v in glb.items())))
    with _lock:
        kernel = _kernels.get(source_key)
        if kernel is None:
            kernel = _kernels[source_key] = cuda.jit(fn)
        _kernels.move_to_end(source_key)
        entry = _by_chain[key] = (kernel, dtypes)
        for cache in (_kernels, _by_chain):
            while len(cache) > _MAX_KERNELS:
                cache.popitem(last=False)
    return entry


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
    total = n * math.prod(int(d) for d in chain.out_shape)
    if total == 0:
        return out
    params, sizes, x = _params(chain, x, seed_base, n)
    _launch(compiled(chain), _grid(chain, n), x, out, n, params)
    return out


def _check_dtypes(chain: Chain, params: list) -> None:
    """The parameters' dtypes are the ones the kernel reads the packed buffer as
    (param_dtypes, fixed when its source was written): else the kernel would read
    their bytes as another type."""
    from nbdata.gpu.array import DeviceArray
    expected = _compiled(chain)[1]
    got = [None if isinstance(p, DeviceArray) else p.dtype for p in params]
    if got != expected:
        from nbdata.errors import InternalError
        raise InternalError(f"nd.gpu: {chain.describe()}: parameters of dtypes {got}, "
                            f"the kernel reads {expected}")


def _params(chain: Chain, x, seed_base: int, n: int) -> tuple:
    """The chain's kernel parameters for a batch of ``n`` (host arrays, a reduction's
    device means), the images' sizes (a ragged batch) and the source data."""
    params = []
    sizes = None
    if chain.ragged:
        sizes = x.shapes
        params += [np.ascontiguousarray(x.offsets[:n]), _int32(sizes[:, 0]), _int32(sizes[:, 1])]
        x = x.data
    for k, (s, shape) in enumerate(zip(chain.steps, chain.shapes)):
        if s.kind == "reduce":
            params.append(_means(x, n, shape, chain.dtype, s.mean_scale(chain.dtype)))
        params += [_int32(p) for p in s.params(shape, seed_base, n, sizes if k == 0 else None)]
        params += [np.ascontiguousarray(c) for c in s.constants(int(shape[-1]) if shape else 1)]
    _check_dtypes(chain, params)
    return params, sizes, x


def _int32(p):
    """Per-element integer parameters (offsets, windows, flags, sizes: each within an
    image) as int32, what the kernel's int32 index arithmetic takes."""
    p = np.asarray(p)
    if p.dtype.kind in "iu" and p.dtype.itemsize > 4:
        if p.size and (int(p.max()) > _INT32 or int(p.min()) < -_INT32 - 1):
            raise ValueError("nd.gpu: a per-element parameter does not fit in int32")
        return np.ascontiguousarray(p, np.int32)
    return np.ascontiguousarray(p)


def _means(x, n: int, shape: tuple, dtype, scale: float):
    """Each image's channel means of a batch (a device array of n * C float32)."""
    from nbdata.gpu import runtime
    from nbdata.gpu.array import DeviceArray
    h, w, c = shape
    stream = runtime.backend().compute_stream()
    means = DeviceArray.empty((n * c,), np.float32, stream)
    scratch = DeviceArray.empty((n * c * h * w,), np.float32, stream)
    _launch(_means_kernel(float(np.float32(scale))), _grid(None, n, n * c), x, means, n,
            [scratch, np.int64(h * w), np.int64(c)], scalars=2)
    return means


def _grid(chain: Chain | None, n: int, total: int = 0):
    """(blocks, threads): a chain's kernel runs on (values per image, images) blocks,
    others (``chain`` None) on a 1-D grid of ``total`` threads."""
    if chain is None:
        return (total + _THREADS - 1) // _THREADS, _THREADS
    per_image = threads_per_image(chain)
    return ((per_image + _THREADS - 1) // _THREADS, max(1, min(n, _GRID_Y))), _THREADS


# What each launch copied to the device (parameter uploads), for tests and stats.
launches = {"kernels": 0, "parameter copies": 0}


def _layout(arrays: list) -> tuple[list, int]:
    """Byte offsets of ``arrays`` one after another, each 16-byte aligned, and the
    total (a multiple of 16, so each array's view of the buffer from its offset on
    divides into its items)."""
    layout, total = [], 0
    for a in arrays:
        layout.append(total)
        total += (a.nbytes + 15) // 16 * 16
    return layout, total


def _fill(buffer: np.ndarray, arrays: list, layout: list) -> None:
    for a, at in zip(arrays, layout):
        buffer[at:at + a.nbytes] = a.reshape(-1).view(np.uint8)


def pack(arrays: list, be, stream) -> tuple:
    """Host parameter arrays packed into ONE pinned buffer and copied to the device in
    ONE copy on ``stream``: (the device buffer, each array's byte offset in it). The
    pinned buffer is the process's (prefetch_to_device's pinned blocks), given back with
    the copy's event so it is not written again before the copy ran."""
    from nbdata.gpu.array import DeviceArray
    from nbdata.ops.prefetch_to_device import _size_class, shared_blocks
    if not arrays:
        return None, []
    layout, total = _layout(arrays)
    blocks = shared_blocks(be)
    block = blocks.take(_size_class(total))
    _fill(block[1], arrays, layout)
    device = DeviceArray.empty((max(total, 16),), np.uint8, stream)
    be.copy_h2d(device.buffer, block[1][:total], stream)
    launches["parameter copies"] += 1
    blocks.give(block, be.event(stream))
    return device, layout


def host_arguments(params: list) -> list:
    """The parameter arguments of a kernel (kernel_source's order) as the simulator
    takes them: the host arrays packed into one NumPy buffer, the device arrays as host
    views, then each host array's byte offset."""
    from nbdata.gpu.array import DeviceArray
    host = [np.ascontiguousarray(p) for p in params if not isinstance(p, DeviceArray)]
    device = [p.host_view().reshape(-1) for p in params if isinstance(p, DeviceArray)]
    layout, total = _layout(host)
    buffer = np.zeros(max(total, 16), np.uint8)
    _fill(buffer, host, layout)
    return ([buffer] if host else []) + device + [np.int64(at) for at in layout]


def _device_arguments(params: list, be, stream) -> tuple:
    """The parameter arguments of a kernel on a GPU (kernel_source's order): the host
    arrays in one packed copy (``keep``: its device buffer, to be dropped after the
    launch), the device arrays, then each host array's byte offset."""
    from nbdata.gpu.array import DeviceArray
    host = [np.ascontiguousarray(p) for p in params if not isinstance(p, DeviceArray)]
    device = [_Raw(p) for p in params if isinstance(p, DeviceArray)]
    keep, layout = pack(host, be, stream)
    return ([_Raw(keep)] if host else []) + device + [np.int64(at) for at in layout], keep


def _launch(kernel, config: tuple, x, out, n: int, params: list, scalars: int = 0) -> None:
    """``kernel[grid, threads](src, out, n, *arguments)`` (``config``: (grid, threads)) on
    this thread's compute stream, after the batch's data is ready (its event, not its
    whole stream); the host arrays among ``params`` reach the device in one packed copy,
    passed as one buffer and their offsets (kernel_source); the last ``scalars`` are
    passed as they are. The batch's memory is freed on the compute stream, after the
    kernel (Memory.read_on), not on the stream that wrote it, so the next batch's
    decode or copy there does not wait for this kernel."""
    from nbdata.gpu import runtime
    be = runtime.backend()
    grid, threads = config
    arrays, rest = (params[:-scalars], params[-scalars:]) if scalars else (params, [])
    launches["kernels"] += 1
    if be.name == "sim":
        with _SIM_LAUNCH:
            kernel[grid, threads](x.host_view().reshape(-1), _out_arg(out).host_view().reshape(-1),
                                  n, *host_arguments(arrays), *rest)
        return
    stream = be.compute_stream()
    be.wait(stream, x.ready)
    x._read_by_kernel_on(stream)
    args, keep = _device_arguments(arrays, be, stream)
    kernel[grid, threads, stream](_Raw(x), _Raw(_out_arg(out)), n, *args, *rest)
    out.ready, out.stream = be.event(stream), stream
    del keep   # the parameters' memory goes back in stream order, after the kernel


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
        params, _, self.x = _params(chain, x, seed_base, n)
        self.count = len(params)
        if be.name == "sim":
            self.args, self.keep = host_arguments(params), None
        else:
            be.wait(self.stream, x.ready)
            self.x._read_by_kernel_on(self.stream)   # freed after the launches queued here
            self.args, self.keep = _device_arguments(params, be, self.stream)
        self.kernel, self.n = compiled(chain), n
        self.grid, self.threads = _grid(chain, n)

    def launch(self) -> None:
        if self.backend.name == "sim":
            with _SIM_LAUNCH:
                self.kernel[self.grid, self.threads](self.x.host_view().reshape(-1),
                                                     _out_arg(self.out).host_view().reshape(-1),
                                                     self.n, *self.args)
            return
        self.kernel[self.grid, self.threads, self.stream](
            _Raw(self.x), _Raw(_out_arg(self.out)), self.n, *self.args)

    def describe(self) -> str:
        return (f"grid {self.grid} x {self.threads} threads, {self.count} parameter "
                "arrays in one buffer")


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
        x, steps = gpu.decode_first(steps[0], steps[1:], x, seed_base)
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


__all__ = ["Prepared", "check_index_range", "compiled", "host_arguments", "kernel_signature",
           "kernel_source", "launches", "pack", "param_dtypes", "prepared", "run_chain", "run_steps"]
