"""``nd.gpu``: batches in GPU memory and fused GPU batch transformations.

Nothing here imports CUDA until it is used: ``import nbdata`` and the CPU pipeline
work without a GPU and without numba-cuda; GPU calls then raise
``nd.errors.UnavailableError`` saying what is missing.
"""

import importlib

from nbdata.plugins import provided

_NAMES = {"DeviceArray": "nbdata.gpu.array", "RaggedBatch": "nbdata.gpu.jpeg",
          "available": "nbdata.gpu.runtime"}


def __getattr__(name):
    """The runtime's names, and the batch ops: one per op-table entry with a GPU rule
    (``nbdata/primitives/devices.py``, above this layer)."""
    if name == "__all__":
        return sorted(set(_NAMES) | set(provided("device_ops")()))
    if name in _NAMES:
        value = getattr(importlib.import_module(_NAMES[name]), name)
    elif name in provided("device_ops")():
        value = provided("device_ops")()[name]
    else:
        raise AttributeError(f"module 'nbdata.gpu' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_NAMES) | set(provided("device_ops")()))
