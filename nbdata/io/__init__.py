"""File sources, decoders and writers (``nd.io`` mirrors ``tf.io``).

Names resolve on first use, so that importing a submodule (the cache's column file,
say) does not import every reader and decoder.
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
    "parse_single_example": "nbdata.primitives.example",
    "parse_example": "nbdata.primitives.example",
    "decode_csv": "nbdata.primitives.csv",
    "decode_raw": "nbdata.primitives.raw",
    "decode_jpeg": "nbdata.primitives.jpeg",
    "decode_and_crop_jpeg": "nbdata.primitives.jpeg",
    "extract_jpeg_shape": "nbdata.primitives.jpeg",
    "decode_png": "nbdata.primitives.codecs",
    "decode_gif": "nbdata.primitives.codecs",
    "decode_bmp": "nbdata.primitives.codecs",
    "decode_image": "nbdata.primitives.codecs",
    "encode_jpeg": "nbdata.primitives.jpeg",
}

__all__ = sorted(_NAMES)


def __getattr__(name):
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'nbdata.io' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_NAMES))
