"""``cast_to``: convert a value to a NumPy dtype inside compiled code, free when it already has it.

Generated fused stages call it on map outputs that a later op reads, so that the
later op sees NumPy's dtype (e.g. float32) rather than Numba's promotion (float64).
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload, overload_method
from numba.np.numpy_support import as_dtype


def cast_to(value, dtype):
    """Python form: ``value`` as ``dtype`` (arrays via ``astype``, scalars via the dtype's type).

    >>> cast_to(np.arange(3), np.dtype(np.float32)).dtype
    dtype('float32')
    """
    if isinstance(value, np.ndarray):
        return value if value.dtype == dtype else value.astype(dtype)
    return np.dtype(dtype).type(value)


@overload(cast_to, jit_options={"nogil": True})
def _cast_to_nopython(value, dtype):
    if not isinstance(dtype, types.DTypeSpec):
        return None
    if (value.dtype if isinstance(value, types.Array) else value) == dtype.dtype:
        return lambda value, dtype: value
    if isinstance(value, types.Array):
        return lambda value, dtype: value.astype(dtype)
    if isinstance(value, (types.Number, types.Boolean)):
        return lambda value, dtype: dtype(value)
    return None


@overload_method(types.Number, "astype", jit_options={"nogil": True})
@overload_method(types.Boolean, "astype", jit_options={"nogil": True})
def _scalar_astype(value, dtype):
    """``np.int64(5).astype(np.int32)`` in compiled functions, as NumPy scalars allow."""
    if not isinstance(dtype, types.DTypeSpec):   # a dtype, or a class like np.int32
        return None
    target = dtype.dtype
    if isinstance(target, types.Boolean):
        return lambda value, dtype: value != 0
    scalar = as_dtype(target).type
    return lambda value, dtype: scalar(value)
