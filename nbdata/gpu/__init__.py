"""``nd.gpu``: batches in GPU memory and fused GPU batch transformations.

Nothing here imports CUDA until it is used: ``import nbdata`` and the CPU pipeline
work without a GPU and without numba-cuda; GPU calls then raise
``nd.errors.UnavailableError`` saying what is missing.
"""

import importlib

_NAMES = {
    "DeviceArray": "nbdata.gpu.array",
    "RaggedBatch": "nbdata.gpu.jpeg",
    "decode_jpeg": "nbdata.gpu.functions",
    "available": "nbdata.gpu.runtime",
    "apply": "nbdata.gpu.functions",
    "cast": "nbdata.gpu.functions",
    "decode_raw": "nbdata.gpu.functions",
    "flip_left_right": "nbdata.gpu.functions",
    "hwc_to_chw": "nbdata.gpu.functions",
    "normalize": "nbdata.gpu.functions",
    "random_crop": "nbdata.gpu.functions",
    "random_flip_left_right": "nbdata.gpu.functions",
    "random_resized_crop": "nbdata.gpu.functions",
    "resize": "nbdata.gpu.functions",
    "transpose": "nbdata.gpu.functions",
}

__all__ = sorted(_NAMES)


def __getattr__(name):
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'nbdata.gpu' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_NAMES))
