"""Numba CPU kernels shared by ops and the fusion compiler."""

# Numba options of a helper, a function that only other kernels call: it gets neither a
# Python nor a C entry point, which shortens the first compile of each kernel using it
# (its machine code is cached inside theirs). Kernels called from Python skip only the C
# entry point (``no_cfunc_wrapper``: nothing takes them as first-class functions).
HELPER = {"nogil": True, "cache": True, "no_cpython_wrapper": True, "no_cfunc_wrapper": True}
