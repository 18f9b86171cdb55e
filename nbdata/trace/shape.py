"""``TensorShape``: a static shape whose dims may be unknown (``tf.TensorShape``)."""

from __future__ import annotations


class TensorShape:
    """A static shape: a tuple of dims (``None`` unknown), or an unknown rank.

    >>> TensorShape([None, 4])
    TensorShape([None, 4])
    >>> TensorShape([2, 3]).as_list(), TensorShape([2, None]).is_fully_defined()
    ([2, 3], False)
    """

    def __init__(self, dims):
        if isinstance(dims, TensorShape):
            dims = dims.dims
        self.dims = None if dims is None else tuple(None if d is None else int(d) for d in dims)

    @property
    def ndims(self) -> int | None:
        return None if self.dims is None else len(self.dims)

    rank = ndims

    def as_list(self) -> list:
        if self.dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape.")
        return list(self.dims)

    def is_fully_defined(self) -> bool:
        return self.dims is not None and all(d is not None for d in self.dims)

    def is_compatible_with(self, other) -> bool:
        other = TensorShape(other)
        if self.dims is None or other.dims is None:
            return True
        return len(self.dims) == len(other.dims) and all(
            a is None or b is None or a == b for a, b in zip(self.dims, other.dims))

    def merge_with(self, other) -> "TensorShape":
        other = TensorShape(other)
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {other} are not compatible")
        if self.dims is None:
            return other
        if other.dims is None:
            return self
        return TensorShape([a if a is not None else b for a, b in zip(self.dims, other.dims)])

    def __iter__(self):
        if self.dims is None:
            raise ValueError("Cannot iterate over a shape with unknown rank.")
        return iter(self.dims)

    def __len__(self) -> int:
        if self.dims is None:
            raise ValueError("Cannot take the length of shape with unknown rank.")
        return len(self.dims)

    def __getitem__(self, key):
        if self.dims is None:
            return None if isinstance(key, int) else TensorShape(None)
        if isinstance(key, slice):
            return TensorShape(self.dims[key])
        return self.dims[key]

    def __eq__(self, other) -> bool:
        try:
            other = TensorShape(other)
        except TypeError:
            return NotImplemented
        return self.dims == other.dims

    def __hash__(self) -> int:
        return hash(self.dims)

    def __repr__(self) -> str:
        return "TensorShape(None)" if self.dims is None else f"TensorShape({list(self.dims)})"

    def __str__(self) -> str:
        if self.dims is None:
            return "<unknown>"
        inner = ", ".join("?" if d is None else str(d) for d in self.dims)
        return f"({inner},)" if len(self.dims) == 1 else f"({inner})"


__all__ = ["TensorShape"]
