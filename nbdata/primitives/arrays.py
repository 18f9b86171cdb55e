"""NumPy's own vocabulary as op-table entries: the ufuncs, array functions and methods
that elementwise lifting inlines (their eager and Numba implementations are NumPy's and
Numba's), and the recorder's indexing and ``astype``."""

from __future__ import annotations

import numpy as np

from nbdata.primitives import expr
from nbdata.primitives.expr import NotElementwise
from nbdata.primitives.table import register
from nbdata.trace.graph import astype, getitem


def _ufunc_rule(ufunc):
    def lift(*operands, **kwargs):
        if kwargs:
            raise NotElementwise(f"{ufunc.__name__} with keyword arguments")
        return expr.apply_ufunc(ufunc, *operands)
    return lift


for _ufunc in (*expr.BINARY, *expr.UNARY):
    register(_ufunc, lift=_ufunc_rule(_ufunc))


def _lift_power(x, exponent, **kwargs):
    """``x ** 2`` (the square); other powers are not exactly rounded as a product."""
    if kwargs or not (type(exponent) is int and exponent == 2):
        raise NotElementwise("power other than ** 2")
    return expr.apply_ufunc(np.square, x)


def _lift_invert(x, **kwargs):
    """``~x`` of a bool (logical not); bitwise not of integers does not lift."""
    if kwargs or not isinstance(x, expr.Expr) or x.dtype != np.bool_:
        raise NotElementwise("~ on integers")
    return expr.apply_ufunc(np.logical_not, x)


def _lift_where(*args, **kwargs):
    if len(args) != 3 or kwargs:
        raise NotElementwise("np.where with other than three arguments")
    return expr.where(*args)


def _lift_stack(values, axis=0, **kwargs):
    if kwargs or axis not in (0, -1):   # of scalars: axis 0 and -1 are the same
        raise NotElementwise("np.stack with options")
    return expr.stack(values)


def _lift_astype(x, dtype, *args, **kwargs):
    if args or kwargs:
        raise NotElementwise("astype options")
    return expr.cast(x, dtype)


def _lift_copy(x, **kwargs):
    if kwargs:
        raise NotElementwise("np.copy with options")
    return expr.as_expr(x)


register(np.power, lift=_lift_power)
register(np.copy, lift=_lift_copy)
register(np.invert, lift=_lift_invert)
register(np.where, lift=_lift_where)
register(np.stack, lift=_lift_stack)
register(astype, "astype", lift=_lift_astype)
def _lift_getitem(x, key, **kwargs):
    """``row[0]``, ``row[1, 2]``: one element of an array at constant indices."""
    if kwargs:
        raise NotElementwise("indexing with options")
    return expr.element(x, key)


register(getitem, "getitem", lift=_lift_getitem)

__all__: list = []
