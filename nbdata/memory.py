"""The memory budget of a pipeline: one bound on the bytes its buffers hold together.

``Options().memory_budget`` (bytes; 0, the default, is half of the machine's physical
memory) bounds what shuffle buffers, prefetch queues (``prefetch``, the read-ahead of
parallel ``interleave`` slots and of image decoders, ``prefetch_to_device``), in-memory
caches and pinned staging hold at once, across every iteration of one compiled
pipeline. Buffers that only run ahead (prefetch queues) stay within what is left:
their producers wait, and pull smaller chunks, instead of growing; AUTOTUNE grows them
only within it. A buffer whose size is part of the result (a shuffle's ``buffer_size``
rows, a memory cache of the whole input) and cannot fit raises
``ResourceExhaustedError`` naming the op and the bytes it needs: at the start when its
rows have a fixed size, else when it crosses the budget. ``pipe.stats()`` reports the
bytes each stage holds and its peak, and the pipeline's peak.
"""

from __future__ import annotations

import os
import threading

from nbdata.errors import ResourceExhaustedError


def physical_memory() -> int:
    """The machine's physical memory in bytes (8 GiB when it cannot be read)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return 8 << 30


def default_budget() -> int:
    """The default ``Options().memory_budget``: half of the physical memory."""
    return physical_memory() // 2


class MemoryBudget:
    """Bytes held by a pipeline's buffers, by stage (their StageStats), against a limit."""

    def __init__(self, limit: int):
        self.limit = int(limit) if limit else default_budget()
        self.held = 0
        self.peak = 0
        self._lock = threading.Lock()

    @property
    def free(self) -> int:
        return max(0, self.limit - self.held)

    def fits(self, nbytes: int) -> bool:
        return self.held + nbytes <= self.limit

    def hold(self, stats, nbytes: int) -> None:
        """``nbytes`` more held by the stage of ``stats`` (None: no stage to report)."""
        if nbytes <= 0:
            return
        with self._lock:
            self.held += nbytes
            self.peak = max(self.peak, self.held)
            if stats is not None:
                stats.bytes_held += nbytes
                stats.peak_bytes = max(stats.peak_bytes, stats.bytes_held)

    def release(self, stats, nbytes: int) -> None:
        if nbytes <= 0:
            return
        with self._lock:
            self.held = max(0, self.held - nbytes)
            if stats is not None:
                stats.bytes_held = max(0, stats.bytes_held - nbytes)

    def need(self, op: str, label: str, nbytes: int, what: str) -> None:
        """A buffer whose size is part of the result needs ``nbytes``: raise
        ResourceExhaustedError when that cannot fit beside what is held."""
        if self.held + nbytes > self.limit:
            raise ResourceExhaustedError(
                f"{label}: {what} needs {nbytes:,} bytes, more than the memory budget allows "
                f"({self.limit:,} bytes, {self.held:,} held by other buffers); raise "
                f"Options().memory_budget or make the buffer smaller", op)


__all__ = ["MemoryBudget", "default_budget", "physical_memory"]
