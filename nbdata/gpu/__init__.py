"""``nd.gpu``: batches in GPU memory and fused GPU batch transformations.

Nothing here imports CUDA until it is used: ``import nbdata`` and the CPU pipeline
work without a GPU and without numba-cuda; GPU calls then raise
``nd.errors.UnavailableError`` saying what is missing.
"""

import importlib

_OPS = ("adjust_brightness", "adjust_contrast", "adjust_saturation", "apply", "cast",
        "decode_jpeg", "decode_raw", "flip_left_right", "hwc_to_chw", "normalize",
        "random_brightness", "random_contrast", "random_crop", "random_flip_left_right",
        "random_resized_crop", "resize", "rgb_to_grayscale", "transpose")
_NAMES = {"DeviceArray": "nbdata.gpu.array", "RaggedBatch": "nbdata.gpu.jpeg",
          "available": "nbdata.gpu.runtime", **{name: "nbdata.primitives.devices" for name in _OPS}}

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
