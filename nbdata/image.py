"""``nd.image``: TensorFlow's image ops on (H, W, C) NumPy images, the op-table entries
tagged ``"image"`` (``nbdata/primitives/image/``; JPEG coding in
``nbdata/primitives/jpeg.py``; PNG, GIF and BMP decoding in ``nbdata/primitives/codecs.py``)."""

from nbdata.primitives.table import namespace

globals().update(namespace("image"))
__all__ = sorted(namespace("image"))
