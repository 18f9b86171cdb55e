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

import types as _types

from nbdata.compat.v1 import data
from nbdata.compat.v1 import ops as _ops
from nbdata.compat.v1.ops import *  # noqa: F401,F403 - the TF1 op vocabulary

# TF 1.x's tf.contrib.data (the guide's make_saveable_from_iterator).
contrib = _types.SimpleNamespace(data=data.contrib_data)


def __getattr__(name: str):
    raise _ops.missing(name)


__all__ = ["contrib", "data", *_ops.__all__]
