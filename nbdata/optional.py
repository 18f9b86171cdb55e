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
        """An Optional holding ``value`` (a nest of tensors; an Optional may be a leaf)."""
        value = map_nest(lambda v: v if isinstance(v, Optional) else to_leaf(v, "Optional"),
                         value)
        return Optional(value, True, pack_as(value, [
            OptionalSpec(v.element_spec) if isinstance(v, Optional) else spec_of_value(v)
            for v in flatten(value)]))

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


class OptionalSpec:
    """The type of an :class:`Optional` (``tf.OptionalSpec``): the spec of the value it
    may hold.

    >>> import numpy as np
    >>> spec = OptionalSpec.from_value(Optional.from_value(np.float32(1)))
    >>> spec.element_spec
    TensorSpec(shape=(), dtype=float32, name=None)
    >>> spec.is_compatible_with(OptionalSpec(spec.element_spec)), spec.value_type.__name__
    (True, 'Optional')
    """

    value_type = Optional

    def __init__(self, element_spec):
        self._element_spec = element_spec

    @property
    def element_spec(self):
        return self._element_spec

    @staticmethod
    def from_value(value: Optional) -> "OptionalSpec":
        if not isinstance(value, Optional):
            raise TypeError(f"OptionalSpec.from_value: expected an Optional, got "
                            f"{type(value).__name__}")
        return OptionalSpec(value.element_spec)

    def is_compatible_with(self, other) -> bool:
        """Whether ``other`` (an OptionalSpec or an Optional) holds compatible values."""
        if isinstance(other, Optional):
            other = OptionalSpec(other.element_spec)
        if not isinstance(other, OptionalSpec):
            return False
        from nbdata.spec import same_structure
        a, b = self._element_spec, other._element_spec
        if not same_structure(a, b):
            return False
        return all(x.is_compatible_with(y) for x, y in zip(flatten(a), flatten(b)))

    def __eq__(self, other):
        return isinstance(other, OptionalSpec) and self._element_spec == other._element_spec

    def __hash__(self):
        return hash(("OptionalSpec", repr(self._element_spec)))

    def __repr__(self):
        return f"OptionalSpec({self._element_spec!r})"
