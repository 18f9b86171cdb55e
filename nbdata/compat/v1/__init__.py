"""``import nbdata.compat.v1 as tf``: TF1 input-pipeline programs run with only their
import line changed.

The namespace is in graph mode by default, as TF1 is: the iterators of its
``tf.data`` datasets are graph objects (``get_next()`` gives tensors that
``tf.Session.run`` evaluates, ``initializer`` is an operation fed with
``feed_dict``, ``string_handle()`` and ``Iterator.from_string_handle`` switch
iterators, ``tf.contrib.data.make_saveable_from_iterator`` with ``tf.train.Saver``
saves the position), NumPy-style array ops on those tensors record graph operations,
and ``tf.train`` holds TF1's queue-based input API. Datasets made through ``nd``
itself keep eager iterators unless a graph is made default or
``disable_eager_execution()`` is called.

nbdata is the input pipeline only: model-building names (``tf.layers``, ``tf.nn``,
optimizers, ``tf.keras``, ``tf.estimator``) raise AttributeError saying how to hand
the batches to a model.

>>> import nbdata.compat.v1 as tf
>>> max_value = tf.placeholder(tf.int64, shape=[])
>>> iterator = tf.data.Dataset.range(max_value).make_initializable_iterator()
>>> next_element = iterator.get_next()
>>> with tf.Session() as sess:
...     sess.run(iterator.initializer, feed_dict={max_value: 3})
...     print([int(sess.run(next_element)) for _ in range(3)])
[0, 1, 2]
"""

from __future__ import annotations

import sys as _sys
import types as _types

from nbdata.compat.v1 import data
from nbdata.compat.v1 import ops as _ops
from nbdata.compat.v1.ops import *  # noqa: F401,F403 - the TF1 op vocabulary
from nbdata.compat.v1 import image  # noqa: E402 - TF1's tf.image over nd.image
from nbdata.compat.v1 import platform as _platform
from nbdata.compat.v1.image import random_crop  # noqa: F401 - tf.random_crop
from nbdata.compat.v1.platform import gfile, logging, summary  # noqa: F401

# TF 1.x's tf.contrib.data (the guide's make_saveable_from_iterator).
contrib = _types.SimpleNamespace(data=data.contrib_data)


class _IoModule(_types.ModuleType):
    """``tf.io``: nd.io with TF1's ``decode_csv`` and ``tf.io.gfile``."""

    def __getattr__(self, name: str):
        try:
            return getattr(_ops.io, name)
        except AttributeError:
            raise _ops.missing(f"io.{name}") from None


io = _IoModule("nbdata.compat.v1.io", _IoModule.__doc__)
io.gfile, io.decode_csv = _platform.io_gfile, _ops.decode_csv


# tf.compat: the text helpers, and v1 (this namespace)
compat = _types.SimpleNamespace(v1=_sys.modules[__name__], **_platform.compat_names)


def __getattr__(name: str):
    raise _ops.missing(name)


__all__ = sorted({"compat", "contrib", "data", "gfile", "image", "io", "logging", "random_crop", "summary",
                  *_ops.__all__})
