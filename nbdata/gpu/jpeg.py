"""``nd.gpu.decode_jpeg``: a batch of JPEG images decoded into device memory by NVIDIA
nvImageCodec, as a :class:`RaggedBatch` (images of their own sizes in one buffer).

nbdata does not decode JPEG itself. On a GPU the images go to nvImageCodec's batched
decoder (the hardware JPEG decoder where the GPU has one, else nvJPEG's CUDA decoder),
writing each image straight into its place in one buffer from nbdata's device memory
pool. The next op of the chain (``resize``, ``random_resized_crop`` or
``random_crop``) reads the images at their own sizes and makes them one size in the
same launch (``nbdata/compiler/backend_gpu.py``), so the ragged batch is never copied.

Under the CUDA simulator (tests, CI) the "device" memory is host memory: images are
decoded by nvImageCodec's CPU backend (libjpeg-turbo) when nvImageCodec is installed,
else by ``nd.image.decode_jpeg`` with the same settings (libjpeg-turbo, accurate
integer DCT, fancy upsampling), so both give the same pixels. nvJPEG on a GPU
decodes the same images within a few levels of libjpeg-turbo (its IDCT and chroma
upsampling differ); the crop and resize after it equal ``nd.image``'s for the same
decoded pixels.
"""

from __future__ import annotations

import contextlib
import os
import threading

import numpy as np

from nbdata.chunks import packed_offsets
from nbdata.errors import InvalidArgumentError, UnavailableError
from nbdata.gpu import runtime
from nbdata.gpu.array import DeviceArray

EXTRA = "pip install 'nbdata[cuda]'"


class RaggedBatch:
    """``n`` (H_j, W_j, C) uint8 images of their own sizes in one device buffer.

    Attributes:
        data: the flat DeviceArray of all images' bytes, image after image.
        offsets: int64 host array (n + 1): image ``j`` is ``data[offsets[j]:offsets[j+1]]``.
        shapes: int64 host array (n, 3): each image's (H, W, C).

    ``batch[j]`` is image ``j`` as a DeviceArray view; ``copy_to_host()`` gives the
    images as NumPy arrays. GPU ops that make images one size (``nd.gpu.resize``,
    ``random_resized_crop``, ``random_crop``) take a RaggedBatch directly.
    """

    def __init__(self, data: DeviceArray, offsets: np.ndarray, shapes: np.ndarray):
        self.data = data
        self.offsets = np.asarray(offsets, np.int64)
        self.shapes = np.asarray(shapes, np.int64).reshape(-1, 3)

    @property
    def shape(self) -> tuple:
        channels = {int(c) for c in self.shapes[:, 2]}
        return (len(self.shapes), None, None, channels.pop() if len(channels) == 1 else None)

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def stream(self):
        return self.data.stream

    @property
    def ready(self):
        return self.data.ready

    def __len__(self) -> int:
        return len(self.shapes)

    def __repr__(self) -> str:
        return f"RaggedBatch(n={len(self)}, channels={self.shape[3]}, device={self.data.device})"

    def __getitem__(self, j: int) -> DeviceArray:
        j = int(j) + (len(self) if j < 0 else 0)
        if not 0 <= j < len(self):
            raise IndexError(f"image {j} of a batch of {len(self)}")
        return DeviceArray(self.data.buffer, tuple(self.shapes[j]), self.data.dtype,
                           self.data.offset + int(self.offsets[j]), self.data.ready,
                           self.data.stream)

    def copy_to_host(self) -> list:
        flat = self.data.copy_to_host()
        return [flat[self.offsets[j]:self.offsets[j + 1]].reshape(tuple(self.shapes[j]))
                for j in range(len(self))]


def _codec():
    try:
        from nvidia import nvimgcodec
    except ImportError:
        return None
    return nvimgcodec


_decoders: dict = {}
_lock = threading.Lock()


# The decoder's backends on a GPU, in nvImageCodec's order of preference: the hardware
# JPEG decoder (A100, H100, H200...) takes HW_LOAD of each batch, nvJPEG's CUDA decoder
# the rest (as DALI's hw_decoder_load), and the hybrid CPU/GPU decoder what neither
# takes. NBDATA_GPU_JPEG_HW_LOAD overrides the hardware decoder's share (0 leaves it out).
HW_LOAD = 0.75


def _hw_load() -> float:
    import os
    try:
        return min(1.0, max(0.0, float(os.environ.get("NBDATA_GPU_JPEG_HW_LOAD", HW_LOAD))))
    except ValueError:
        return HW_LOAD


def gpu_backends(nvimgcodec, hw_load: float | None = None) -> list:
    """The backends nbdata asks nvImageCodec for on a GPU (see HW_LOAD)."""
    kind = nvimgcodec.BackendKind
    load = _hw_load() if hw_load is None else hw_load
    backends = []
    if load > 0 and hasattr(kind, "HW_GPU_ONLY"):
        backends.append(nvimgcodec.Backend(kind.HW_GPU_ONLY, load_hint=load))
    backends.append(nvimgcodec.Backend(kind.GPU_ONLY, load_hint=1.0))
    if hasattr(kind, "HYBRID_CPU_GPU"):
        backends.append(nvimgcodec.Backend(kind.HYBRID_CPU_GPU, load_hint=1.0))
    return backends


def backend_choices(nvimgcodec, be) -> list:
    """(name, backends) of the decoder configurations perf/ compares (None: the library's
    defaults)."""
    kind = nvimgcodec.BackendKind
    if be.name == "sim":
        return [("CPU only", [nvimgcodec.Backend(kind.CPU_ONLY)])]
    out = [("default backends", None), ("nbdata's backends", gpu_backends(nvimgcodec))]
    for name in ("HW_GPU_ONLY", "GPU_ONLY", "HYBRID_CPU_GPU"):
        if hasattr(kind, name):
            out.append((f"{name} only", [nvimgcodec.Backend(getattr(kind, name))]))
    return out


_chosen: dict = {}


def backend_description(be) -> str:
    """What the decoder of ``be`` was made with (for perf/ and explain)."""
    return _chosen.get(id(be), "no decoder made yet")


@contextlib.contextmanager
def _leased(key: tuple, make):
    """A decoder of kind ``key`` for one call (``make()`` makes one). Not all of
    nvImageCodec's types are thread safe, so a decoder serves one call at a time: a GPU
    map with several batches in flight decodes them on as many decoders, made when first
    needed and kept for later calls (as many as were ever in flight at once)."""
    with _lock:
        idle = _decoders.setdefault(key, [])
        decoder = idle.pop() if idle else None
    if decoder is None:
        decoder = make()
    try:
        yield decoder
    finally:
        with _lock:
            _decoders[key].append(decoder)


def _default_decoder(nvimgcodec, be):
    """A decoder with the library's default backends (the fallback of nbdata's own)."""
    return _leased(("default", id(nvimgcodec), id(be)),
                   lambda: nvimgcodec.Decoder(device_id=be.device_id))


def _decoder(nvimgcodec, be):
    """One nvImageCodec decoder per backend and call in flight (the CPU backend under the
    simulator), leased for the call (:func:`_leased`). On a GPU the library's defaults,
    or with NBDATA_GPU_JPEG_HW_LOAD set, explicit backends (:func:`gpu_backends`) where
    this version and this GPU take them."""
    return _leased((id(nvimgcodec), id(be)), lambda: _make_decoder(nvimgcodec, be))


def _make_decoder(nvimgcodec, be):
    if be.name == "sim":
        _chosen[id(be)] = "CPU only (the simulator)"
        return nvimgcodec.Decoder(device_id=nvimgcodec.NVIMGCODEC_DEVICE_CPU_ONLY,
                                  backends=[nvimgcodec.Backend(nvimgcodec.BackendKind.CPU_ONLY)])
    if "NBDATA_GPU_JPEG_HW_LOAD" not in os.environ:
        # Measured on an H200 (perf gpu decode, 512 images of 112 KB): the library's
        # defaults 22,945 images/s, the explicit list below 17,173, the hardware decoder
        # alone 18,355. The defaults unless asked.
        _chosen[id(be)] = ("library defaults (set NBDATA_GPU_JPEG_HW_LOAD for an explicit "
                           "hardware-decoder share)")
        return nvimgcodec.Decoder(device_id=be.device_id)
    try:
        decoder = nvimgcodec.Decoder(device_id=be.device_id, backends=gpu_backends(nvimgcodec))
        _chosen[id(be)] = f"hardware decoder (load {_hw_load():.2f}), CUDA, hybrid CPU/GPU"
    except Exception as e:  # noqa: BLE001 - older versions, unknown kinds
        decoder = nvimgcodec.Decoder(device_id=be.device_id)
        _chosen[id(be)] = f"library defaults ({type(e).__name__}: {e})"
    return decoder


def _as_bytes(value, j: int) -> bytes:
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview, np.bytes_)):
        return bytes(value)
    raise TypeError(f"nd.gpu.decode_jpeg: image {j} of the batch is a {type(value).__name__}, "
                    "not bytes")


def _values(contents) -> list:
    from nbdata.chunks import StringColumn
    if isinstance(contents, StringColumn):
        return contents.values()
    if isinstance(contents, (bytes, str)):
        raise TypeError("nd.gpu.decode_jpeg: expects a batch (a list or 1-D array) of encoded "
                        "images; wrap a single image in a list")
    arr = np.asarray(contents, dtype=object) if isinstance(contents, (list, tuple)) else contents
    if not isinstance(arr, np.ndarray) or arr.ndim != 1:
        raise InvalidArgumentError(
            f"nd.gpu.decode_jpeg: `contents` must be a vector of encoded images, got "
            f"{type(contents).__name__} of shape {getattr(arr, 'shape', None)}", "DecodeJpeg")
    return [_as_bytes(v, j) for j, v in enumerate(arr)]


def _bad(j: int, what: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"nd.gpu.decode_jpeg: image {j} of the batch {what}", "DecodeJpeg")


def _plan(nvimgcodec, values: list, channels: int, host) -> tuple[list, np.ndarray]:
    """Code streams (None without nvImageCodec) and (n, 3) output shapes, from the
    headers; InvalidArgumentError naming the first image that is not a JPEG."""
    shapes = np.empty((len(values), 3), np.int64)
    streams = []
    for j, data in enumerate(values):
        if data[:2] != b"\xff\xd8":
            raise _bad(j, "is not a JPEG (Unknown image file format. One of JPEG required.)")
    if nvimgcodec is None:
        for j, data in enumerate(values):
            try:
                shapes[j] = host.plan(data)[0]
            except InvalidArgumentError as e:
                raise _bad(j, f"cannot be decoded: {e.message}") from None
        return [None] * len(values), shapes
    for j, data in enumerate(values):
        try:
            stream = nvimgcodec.CodeStream(data)
            height, width, stored = int(stream.height), int(stream.width), int(stream.num_channels)
        except Exception as e:  # noqa: BLE001 - nvImageCodec reports bad headers as RuntimeError
            raise _bad(j, f"has an unreadable JPEG header ({e})") from None
        if height <= 0 or width <= 0:
            raise _bad(j, "has an unreadable JPEG header")
        shapes[j] = (height, width, channels or (1 if stored == 1 else 3))
        streams.append(stream)
    return streams, shapes


def roi_supported(nvimgcodec) -> bool:
    """Whether this nvImageCodec decodes a region of an image (0.9's sub code streams)."""
    return nvimgcodec is not None and hasattr(nvimgcodec, "Region") and \
        hasattr(getattr(nvimgcodec, "CodeStream", None), "get_sub_code_stream")


def roi_enabled() -> bool:
    """Whether a decode followed by random_resized_crop decodes only each image's crop
    window (``NBDATA_GPU_JPEG_ROI=1``; off by default: nvJPEG may decode a window's edge
    pixels a level apart from the whole image's, so the results are not bit-identical
    to decoding the whole image on every GPU)."""
    import os
    return os.environ.get("NBDATA_GPU_JPEG_ROI", "0") == "1"


def decode_jpeg(contents, channels: int, host, windows=None) -> RaggedBatch:
    """Decodes a batch of JPEG images into device memory (a :class:`RaggedBatch`): what
    ``nd.gpu.decode_jpeg`` runs.

    Args:
        contents: the encoded images: a list or 1-D array of ``bytes`` (a batch of an
            Example's image feature after ``prefetch_to_device``: strings stay on the
            host until they are decoded).
        channels: 3 (RGB), 1 (grayscale) or 0 (as stored: 1 for grayscale JPEGs, else 3).
        host: the CPU decoder with the same settings (``nd.image.decode_jpeg``'s
            options: libjpeg-turbo, accurate integer DCT, fancy upsampling), used under
            the simulator when nvImageCodec is not installed: the same pixels.

    Returns:
        A RaggedBatch of uint8 (H, W, channels) images. Inside a ``map`` after
        ``prefetch_to_device``, the call is recorded as the first step of the chain and
        the op after it must make the images one size (``resize``,
        ``random_resized_crop`` or ``random_crop``), in the same kernel.

    Raises:
        InvalidArgumentError: an image that is not a decodable JPEG (naming its index
            in the batch) or bad arguments. Under ``ignore_errors()`` the batch holding
            it is skipped (the map's element is the batch).
        UnavailableError: no GPU (and no simulator), or nvImageCodec not installed on a
            GPU machine.
    """
    return decode_values(_values(contents), check_channels(channels), host, windows=windows)


def check_channels(channels) -> int:
    channels = int(channels)
    if channels not in (0, 1, 3):
        raise InvalidArgumentError(f"nd.gpu.decode_jpeg: channels must be 0, 1 or 3, got "
                                   f"{channels}", "DecodeJpeg")
    return channels


def decode_values(values: list, channels: int, host, stream=None, windows=None) -> RaggedBatch:
    """The decode of a list of ``bytes`` on ``stream`` (if None, this thread's decode
    stream: ``backend().decode_stream()``).

    ``windows``: a function of the images' (n, 3) shapes giving (top, left, height,
    width) arrays: where nvImageCodec decodes regions (:func:`roi_supported`), only
    those windows are decoded and the batch holds them (``batch.windowed``); else the
    whole images (the caller crops)."""
    be = runtime.backend()
    nvimgcodec = _codec()
    if nvimgcodec is None and be.name != "sim":
        raise UnavailableError(f"nd.gpu.decode_jpeg needs NVIDIA nvImageCodec: {EXTRA}")
    streams, shapes = _plan(nvimgcodec, values, channels, host)
    windowed = windows is not None and roi_supported(nvimgcodec) and len(values) > 0
    if windowed:
        top, left, height, width = (np.asarray(a, np.int64) for a in windows(shapes))
        streams = [s.get_sub_code_stream(region=nvimgcodec.Region(
            int(top[j]), int(left[j]), int(top[j] + height[j]), int(left[j] + width[j])))
            for j, s in enumerate(streams)]
        shapes = np.stack([height, width, shapes[:, 2]], axis=1)
    offsets = packed_offsets(shapes)
    # this thread's decode stream: batches decoded on several threads at once (a GPU map
    # with batches in flight) do not queue behind one another on the device
    stream = stream if stream is not None else be.decode_stream()
    data = DeviceArray.empty((int(offsets[-1]),), np.uint8, stream)
    batch = RaggedBatch(data, offsets, shapes)
    batch.windowed = windowed
    if not values:
        return batch
    if nvimgcodec is None:   # the simulator without nvImageCodec: libjpeg-turbo, same settings
        _decode_with_library(batch, values, host)
    else:
        _decode_with_codec(nvimgcodec, be, batch, streams, channels, stream)
    return batch


def _decode_with_library(batch: RaggedBatch, values: list, host) -> None:
    for j, data in enumerate(values):
        try:
            host.decode(data, out=_host_image(batch, j))
        except InvalidArgumentError as e:
            raise _bad(j, f"cannot be decoded: {e.message}") from None


def _decode_with_codec(nvimgcodec, be, batch: RaggedBatch, streams: list, channels: int,
                       stream) -> None:
    handle = 0 if be.name == "sim" or stream is None else int(stream.handle)
    # The targets carry nbdata's stream: without one nvImageCodec orders each image after
    # the legacy default stream (the training loop's) and serialises decode with it.
    targets = [nvimgcodec.as_image(t, handle) for t in _targets(be, batch)]
    with _decoder(nvimgcodec, be) as decoder:
        if channels:
            results = decoder.decode(streams, images=targets,
                                     params=_params_for(nvimgcodec, channels), cuda_stream=handle)
        else:   # as stored: each image with its own channel count
            results = [decoder.decode(s, image=t, params=_params_for(nvimgcodec, int(shape[2])),
                                      cuda_stream=handle)
                       for s, t, shape in zip(streams, targets, batch.shapes)]
    failed = [j for j, result in enumerate(results) if result is None]
    if failed and be.name != "sim" and _chosen.get(id(be), "").startswith("hardware"):
        # nbdata's explicit backends refused an image: the library's defaults try it again
        with _default_decoder(nvimgcodec, be) as retry:
            again = [retry.decode(streams[j], image=targets[j],
                                  params=_params_for(nvimgcodec, int(batch.shapes[j][2])),
                                  cuda_stream=handle) for j in failed]
        failed = [j for j, result in zip(failed, again) if result is None]
    for j in failed[:1]:
        raise _bad(j, "cannot be decoded (nvImageCodec: Invalid JPEG data)")
    if be.name != "sim":
        batch.data.ready, batch.data.stream = be.event(stream), stream


def _params_for(nvimgcodec, channels: int):
    gray = channels == 1
    # EXIF orientation is not applied (nd.image.decode_jpeg and TF do not): applied, an
    # Orientation=6 image would decode transposed into a buffer shaped for the stored one.
    return nvimgcodec.DecodeParams(
        apply_exif_orientation=False,
        color_spec=nvimgcodec.ColorSpec.GRAY if gray else nvimgcodec.ColorSpec.SRGB,
        sample_format=nvimgcodec.SampleFormat.I_Y if gray else nvimgcodec.SampleFormat.I_RGB)


def _host_image(batch: RaggedBatch, j: int) -> np.ndarray:
    """Simulator only: image ``j`` of the batch as a writable host array."""
    flat = batch.data.host_view()
    return flat[batch.offsets[j]:batch.offsets[j + 1]].reshape(tuple(batch.shapes[j]))


class _Target:
    """An image's place in a batch's buffer as nvImageCodec takes an output: the CUDA
    array interface of its bytes. No stream (nothing has written them yet), and no
    consumer noted: nvImageCodec writes on nbdata's stream, the one the batch's memory is
    released on. (A DeviceArray view would note the legacy default stream, where an
    interface consumer's work goes, and the batch's release would wait for the training
    loop's queued work.) ``owner`` keeps the batch's memory alive with the target."""

    __slots__ = ("__cuda_array_interface__", "owner")

    def __init__(self, pointer: int, shape: tuple, owner):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "|u1",
                                         "data": (pointer, False), "version": 3,
                                         "strides": None, "stream": None}
        self.owner = owner


def _targets(be, batch: RaggedBatch) -> list:
    """Each image's place in the batch's buffer, as nvImageCodec takes outputs (host
    arrays under the simulator)."""
    if be.name == "sim":
        return [_host_image(batch, j) for j in range(len(batch))]
    base, owner = batch.data.pointer, batch.data.buffer
    return [_Target(base + start, tuple(shape), owner)
            for start, shape in zip(batch.offsets[:-1].tolist(), batch.shapes.tolist())]


__all__ = ["RaggedBatch", "backend_choices", "check_channels", "decode_jpeg", "decode_values",
           "gpu_backends", "roi_enabled", "roi_supported"]
