"""``nd.image``: TensorFlow's image ops on (H, W, C) NumPy images, the op-table entries
tagged ``"image"`` (``nbdata/primitives/image/``; JPEG coding in
``nbdata/primitives/jpeg.py``; PNG, GIF and BMP decoding in ``nbdata/primitives/codecs.py``).

Only those modules are searched: ``import nbdata`` must not import the rest of the op
table (the CSV and record kernels load when a pipeline first uses them)."""

import importlib
import pkgutil

from nbdata.primitives import codecs, image as _family, jpeg
from nbdata.primitives.table import namespace

_MODULES = [codecs, jpeg] + [importlib.import_module(info.name) for info in
                             pkgutil.iter_modules(_family.__path__, _family.__name__ + ".")]
globals().update(namespace("image", *_MODULES))
__all__ = sorted(namespace("image", *_MODULES))
