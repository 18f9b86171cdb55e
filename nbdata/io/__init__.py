"""File sources, decoders and writers (``nd.io`` mirrors ``tf.io``): the datasets,
writers and feature classes below, and the op-table entries tagged ``"io"`` (the
decoders, ``nbdata/primitives``).

Names resolve on first use, so that importing a submodule (the cache's column file,
say) does not import every reader.
"""

import importlib

_NAMES = {
    "TFRecordDataset": "nbdata.io.datasets",
    "TextLineDataset": "nbdata.io.datasets",
    "FixedLengthRecordDataset": "nbdata.io.datasets",
    "ParquetDataset": "nbdata.io.arrow",
    "TFRecordWriter": "nbdata.io.writer",
    "TFRecordOptions": "nbdata.io.writer",
    "FixedLenFeature": "nbdata.primitives.example",
    "VarLenFeature": "nbdata.primitives.example",
    "encode_example": "nbdata.primitives.example",
}


def _entries() -> dict:
    from nbdata.primitives.table import namespace
    return namespace("io")


def __getattr__(name):
    if name == "__all__":
        return sorted(set(_NAMES) | set(_entries()))
    if name in _NAMES:
        value = getattr(importlib.import_module(_NAMES[name]), name)
    elif name in _entries():
        value = _entries()[name]
    else:
        raise AttributeError(f"module 'nbdata.io' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_NAMES) | set(_entries()))
