"""Scalar arithmetic helpers that give NumPy's results where LLVM's instructions do not."""

from __future__ import annotations

import numba


@numba.njit(nogil=True, inline="always", cache=True, error_model="numpy")
def floordiv_int64(a, b):
    """``a // b`` on int64 as NumPy computes it: ``int64.min // -1`` wraps to int64.min
    (LLVM's signed division would overflow), and division by zero gives 0.

    >>> import numpy as np
    >>> int(floordiv_int64(np.int64(-2**63), np.int64(-1)))
    -9223372036854775808
    """
    if b == -1:
        return -a
    return a // b
