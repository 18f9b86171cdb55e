"""``nd.experimental.Optional`` (``tf.experimental.Optional``): a value or nothing, what
``iterator.get_next_as_optional()`` returns."""

from __future__ import annotations

import numpy as np

from nbdata.errors import InvalidArgumentError
from nbdata.spec import flatten, map_nest, pack_as, spec_of_value, to_leaf


class Optional:
    """``tf.experimental.Optional``: a value or nothing.

    >>> o = Optional.from_value(3)
    >>> bool(o.has_value()), int(o.get_value())
    (True, 3)
    """

    def __init__(self, value=None, has_value=False, element_spec=None):
        self._value, self._has, self.element_spec = value, bool(has_value), element_spec

    @staticmethod
    def from_value(value) -> "Optional":
        value = map_nest(lambda v: to_leaf(v, "Optional"), value)
        return Optional(value, True, pack_as(value, [spec_of_value(v) for v in flatten(value)]))

    @staticmethod
    def empty(element_spec) -> "Optional":
        return Optional(None, False, element_spec)

    def has_value(self):
        return np.bool_(self._has)

    def get_value(self):
        if not self._has:
            raise InvalidArgumentError("The optional does not have a value", "Optional")
        return self._value

    def __repr__(self):
        return f"Optional({self._value!r})" if self._has else "Optional(empty)"
