"""Arrays ``from_tensor_slices`` reads a block of rows at a time instead of loading them
whole: ``np.memmap`` (and ``np.load(..., mmap_mode=...)``), ``h5py.Dataset`` and
``zarr.Array``.

A :class:`LazyArray` stands for such an array in the plan: its identity (what a saved
iterator state is checked against) is its kind, where it lives, its shape and dtype,
never its contents. Each run reads it through a :class:`BlockReader`, which holds at
most one block of rows (a whole number of the array's storage chunks, about
``budget`` rows) and, for a memory map, hands out views and gives the pages of rows
already read back to the operating system, so a pass over the array never holds more
than a block of it in memory.
"""

from __future__ import annotations

import dataclasses
import mmap
from typing import Any

import numpy as np

from nbdata.chunks import read_only
from nbdata.spec import TensorSpec, native_order

# Rows read by a take() are read as the one span from the first to the last when the
# span holds at most this many budgets of rows (one large read), else row by row.
SPAN_BUDGETS = 4


def lazy_kind(value: Any) -> str | None:
    """"memmap", "hdf5" or "zarr" when ``value`` is an array of numbers (or bools) of
    rank >= 1 read as it goes, else None (the value is converted as any other)."""
    if isinstance(value, np.memmap):
        kind = "memmap" if getattr(value, "_mmap", None) is not None else None
    else:
        module, name = type(value).__module__, type(value).__name__
        kind = ("hdf5" if module.startswith("h5py") and name == "Dataset" else
                "zarr" if module.split(".")[0] == "zarr" and name == "Array" else None)
    if kind is None:
        return None
    dtype = getattr(value, "dtype", None)
    if not isinstance(dtype, np.dtype) or dtype.kind not in "biuf" or len(value.shape) == 0:
        return None
    return kind


def _where(value: Any, kind: str) -> str:
    """Where the array lives: a memory map's file and byte offset, an HDF5 file and
    dataset name, a Zarr store path."""
    if kind == "memmap":
        mm = value._mmap
        base = np.frombuffer(mm, np.uint8).ctypes.data
        start = value.offset - value.offset % mmap.ALLOCATIONGRANULARITY
        return f"{value.filename}@{start + value.ctypes.data - base}{list(value.strides)}"
    if kind == "hdf5":
        return f"{value.file.filename}:{value.name}"
    return str(getattr(value, "store_path", "") or getattr(value, "store", ""))


@dataclasses.dataclass(frozen=True, eq=False)
class LazyArray:
    """A leaf of ``from_tensor_slices`` read a block of rows at a time (see the module
    docstring). Fields are its identity; the array itself is ``array``."""

    kind: str
    where: str
    shape: tuple
    dtype: np.dtype
    storage_rows: int      # rows of one storage chunk (1 for a memory map)
    source: dataclasses.InitVar[Any] = None

    def __post_init__(self, source: Any) -> None:
        object.__setattr__(self, "array", source)

    @classmethod
    def of(cls, value: Any) -> "LazyArray | None":
        """The LazyArray of ``value`` when it is one of the arrays read as it goes."""
        kind = lazy_kind(value)
        if kind is None:
            return None
        chunks = getattr(value, "chunks", None) if kind != "memmap" else None
        storage = int(chunks[0]) if chunks else 1
        return cls(kind, _where(value, kind), tuple(int(d) for d in value.shape),
                   np.dtype(value.dtype), max(1, storage), value)

    @property
    def spec(self) -> TensorSpec:
        return TensorSpec(self.shape, self.dtype)

    @property
    def label(self) -> str:
        """The array in plan listings: its kind and file (and dataset name, for HDF5)."""
        where = self.where.split("@")[0] if self.kind == "memmap" else self.where
        return f"{self.kind} {where}"

    @property
    def row_bytes(self) -> int:
        return max(1, int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize)

    def reader(self, budget: int) -> "BlockReader":
        return BlockReader(self, budget)


class BlockReader:
    """Reads rows of a :class:`LazyArray` for one run: ``rows(lo, hi)`` gives rows
    ``lo .. hi`` (callers ask for at most ``limit`` at a time), ``take(rows)`` the rows
    at given positions."""

    def __init__(self, lazy: LazyArray, budget: int):
        self.lazy = lazy
        self.array = lazy.array
        self.n = lazy.shape[0]
        c = lazy.storage_rows
        # A block is a whole number of storage chunks: a chunk is decoded once per pass.
        self.block = min(max(self.n, 1), -(-max(1, budget) // c) * c)
        self.limit = max(1, min(budget, self.block))
        self.lo = self.hi = 0
        self.data: np.ndarray | None = None
        self.mapped = lazy.kind == "memmap"
        self.released = 0
        self.mm = None
        if self.mapped and self.array.mode != "c" and self.array.flags.c_contiguous \
                and hasattr(self.array._mmap, "madvise"):
            # Pages of rows already read go back to the system (MADV_DONTNEED): they are
            # read from the file again if touched. Not for a copy-on-write map ("c"),
            # whose changed pages would be lost.
            self.mm = self.array._mmap
            self.base = np.frombuffer(self.mm, np.uint8).ctypes.data

    def __len__(self) -> int:
        return self.n

    def rows(self, lo: int, hi: int) -> np.ndarray:
        if self.mapped:
            self._release(lo)
            # read-only: an edit of an element must not write to the user's file
            return native_order(read_only(self.array[lo:hi].view(np.ndarray)))
        if self.data is None or lo < self.lo or hi > self.hi:
            c = self.lazy.storage_rows
            start = lo // c * c
            stop = min(self.n, max(hi, start + self.block))
            stop = min(self.n, -(-stop // c) * c)
            self.data = None   # the old block goes before the new one is read
            self.data = native_order(np.ascontiguousarray(self.array[start:stop]))
            self.lo, self.hi = start, stop
        return self.data[lo - self.lo:hi - self.lo]

    def _release(self, lo: int) -> None:
        """Give back the whole pages of rows ``released .. lo`` (a forward read)."""
        if self.mm is None or lo <= self.released:
            self.released = min(self.released, lo)
            return
        page = mmap.PAGESIZE
        first = self.array.ctypes.data - self.base
        a = first + self.released * self.lazy.row_bytes
        b = first + lo * self.lazy.row_bytes
        a = -(-a // page) * page
        b = b // page * page
        if b > a:
            self.mm.madvise(mmap.MADV_DONTNEED, a, b - a)
        self.released = lo

    def take(self, rows: np.ndarray) -> np.ndarray:
        """Rows at ``rows`` (any order, repeats allowed): one read of their span when it
        is small, else one read of the distinct rows, in increasing order."""
        return native_order(self._take(rows))   # (a big-endian file's rows)

    def _take(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, np.int64)
        if len(rows) == 0:
            return np.empty((0,) + self.lazy.shape[1:], self.lazy.dtype)
        lo, hi = int(rows.min()), int(rows.max()) + 1
        if self.data is not None and lo >= self.lo and hi <= self.hi:
            return self.data[rows - self.lo]
        if self.mapped:
            return np.asarray(self.array[rows])
        if hi - lo <= SPAN_BUDGETS * self.limit:
            return np.asarray(self.array[lo:hi])[rows - lo]
        unique, inverse = np.unique(rows, return_inverse=True)
        if self.lazy.kind == "zarr":
            got = np.asarray(self.array.oindex[unique])
        else:
            got = np.asarray(self.array[unique])
        return got[inverse]


__all__ = ["BlockReader", "LazyArray", "lazy_kind"]
