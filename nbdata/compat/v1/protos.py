"""``tf.train.Example`` and its parts, as input code builds them to write TFRecord files:
``Example(features=Features(feature={"x": Feature(float_list=FloatList(value=[...]))}))``
and ``SerializeToString()``, which gives TensorFlow's bytes (nbdata.io.encode_example).

>>> import nbdata.compat.v1 as tf
>>> ex = tf.train.Example(features=tf.train.Features(feature={
...     "a": tf.train.Feature(int64_list=tf.train.Int64List(value=[1])),
...     "b": tf.train.Feature(float_list=tf.train.FloatList(value=[0.5]))}))
>>> import nbdata as nd
>>> ex.SerializeToString() == nd.io.encode_example({"a": 1, "b": [0.5]})
True
"""

from __future__ import annotations

from nbdata.primitives.example import encode_example


class _List:
    kind = ""

    def __init__(self, value=()):
        self.value = list(value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(value={self.value!r})"


class Int64List(_List):
    kind = "int64_list"


class FloatList(_List):
    kind = "float_list"


class BytesList(_List):
    kind = "bytes_list"


class Feature:
    """One feature: exactly one of ``int64_list``, ``float_list``, ``bytes_list``."""

    def __init__(self, int64_list: Int64List | None = None, float_list: FloatList | None = None,
                 bytes_list: BytesList | None = None):
        given = [v for v in (int64_list, float_list, bytes_list) if v is not None]
        if len(given) > 1:
            raise ValueError("a Feature holds one of int64_list, float_list and bytes_list")
        self.int64_list, self.float_list, self.bytes_list = int64_list, float_list, bytes_list
        self.kind = given[0] if given else None


class Features:
    def __init__(self, feature: dict | None = None):
        self.feature = dict(feature or {})


class Example:
    """A ``tf.train.Example``; ``SerializeToString()`` gives the record's bytes."""

    def __init__(self, features: Features | None = None):
        self.features = features if features is not None else Features()

    def SerializeToString(self, deterministic: bool | None = None) -> bytes:  # noqa: N802 - TF's name
        values = {}
        for key, feature in self.features.feature.items():
            if not isinstance(feature, Feature):
                raise TypeError(f"Example: feature {key!r} must be a tf.train.Feature, got "
                                f"{type(feature).__name__}")
            if feature.kind is None:   # an empty Feature: an empty list of no kind
                values[key] = {"kind": "bytes_list", "value": []}
            else:
                values[key] = {"kind": feature.kind.kind, "value": feature.kind.value}
        return encode_example(values)


__all__ = ["BytesList", "Example", "Feature", "Features", "FloatList", "Int64List"]
