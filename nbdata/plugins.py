"""The one registry through which an upper layer plugs into a lower one.

Each slot names the function or class above that fills it (``module:attribute``); a
lower layer asks :func:`provided` when it needs it and the provider is imported then,
so nothing depends on which module was imported first. ``tests/test_layers.py`` checks
that every provider resolves and sits above (or beside, where importing it would close
a cycle) every module that asks for its slot.
"""

import importlib
from typing import Any

PROVIDERS = {
    # eager nd.gpu ops (primitives/gpu.py) run their steps through the GPU backend
    "gpu_runner": "nbdata.compiler.backend_gpu:run_steps",
    # Tensor.eval and Operation.run (trace/graph.py) find their session in the TF1 layer
    "session_finder": "nbdata.train.session:session_for",
    # the graph-mode iterators the Dataset API makes (iterator.py, dataset.py)
    "graph_iterator": "nbdata.train.iterators:GraphIterator",
    # ds.distribute's plan node (dataset.py), from the Ray layer
    "distribute_node": "nbdata.distribute.node:distribute_node",
    # nd.gpu's batch ops (gpu/__init__.py), made from the op table
    "device_ops": "nbdata.primitives.devices:device_ops",
    # decode_image's JPEG decoder (primitives/codecs.py; jpeg.py imports codecs)
    "jpeg_options": "nbdata.primitives.jpeg:JpegOptions",
}

_resolved: dict = {}


def provided(slot: str) -> Any:
    """The function or class filling ``slot`` (imported on first use)."""
    found = _resolved.get(slot)
    if found is None:
        module, _, attribute = PROVIDERS[slot].partition(":")
        found = _resolved[slot] = getattr(importlib.import_module(module), attribute)
    return found


__all__ = ["PROVIDERS", "provided"]
