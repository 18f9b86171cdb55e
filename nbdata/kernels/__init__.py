"""Numba CPU kernels shared by ops and the fusion compiler."""

# Numba options of a helper, a function that only other kernels call: it gets neither a
# Python nor a C entry point, which shortens the first compile of each kernel using it
# (its machine code is cached inside theirs). Kernels called from Python skip only the C
# entry point (``no_cfunc_wrapper``: nothing takes them as first-class functions).
HELPER = {"nogil": True, "cache": True, "no_cpython_wrapper": True, "no_cfunc_wrapper": True}


def read_only(a):
    """``a`` as a read-only view (not a copy) when it is a writable NumPy array, else ``a``.

    Numba types a read-only array apart from a writable one, so a kernel called with both
    compiles twice (2-3 s each for the CSV decoder and the Example parser, on a cold
    cache). Kernels that only read an input take it through this: one signature whether
    the bytes come from a memory map or a decompressed block, a NumPy array or an Arrow
    buffer."""
    import numpy as np
    if isinstance(a, np.ndarray) and a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a
