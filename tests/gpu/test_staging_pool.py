"""Staging to the GPU (issue 33): one pinned pool per process kept across iterators, host
copies on several threads, batches written straight into pinned memory."""

import numpy as np
import pytest

import nbdata as nd
from nbdata.gpu import runtime


def _staging(pipe) -> dict:
    (stage,) = [s for s in pipe.stats().stages if s.title.startswith("prefetch_to_device")]
    return stage.chosen


def test_pinned_blocks_are_kept_across_iterators(monkeypatch):
    from nbdata.compiler import executor
    from nbdata.ops import prefetch_to_device as ptd
    # Every iterator pulls the same chunks (later ones would otherwise start at a demand
    # timed on the one before, executor.Pace, and their kernels write other block sizes).
    monkeypatch.setattr(executor.Pace, "first_demand", lambda self, limit: 1)
    # (and their demands grow alike: next_demand grows faster after a quicker pull, so
    # under load two iterators' chunks could differ)
    monkeypatch.setattr(executor, "next_demand", lambda want, took, limit: min(2 * want, limit))
    images = np.random.default_rng(1).integers(0, 256, (32, 16, 16, 3), dtype=np.uint8)
    opts = nd.Options()
    opts.fusion_min_rows = 0
    ds = nd.Dataset.from_tensor_slices(images).batch(8).with_options(opts).prefetch_to_device()
    pipe = ds.compile()
    blocks = ptd.shared_blocks(runtime.backend())
    with blocks.lock:
        blocks.free.clear()   # blocks earlier tests gave back: this test's first iterator allocates
    before = blocks.allocations
    first = [b.copy_to_host() for b in pipe]
    made = blocks.allocations
    assert made > before   # the first iterator's batches came from this process's blocks
    for _ in range(2):   # later iterators take the blocks the first gave back
        again = [b.copy_to_host() for b in pipe]
        assert blocks.allocations == made
    np.testing.assert_array_equal(np.concatenate(first), images)
    np.testing.assert_array_equal(np.concatenate(again), images)
    assert _staging(pipe)["direct copies"] >= 4   # the batches were written into pinned memory


def test_host_copy_in_parts_on_several_threads(monkeypatch):
    from nbdata.ops import prefetch_to_device as ptd
    monkeypatch.setattr(ptd, "_COPY_PARTS", 3)
    monkeypatch.setattr(ptd, "_COPY_MIN_BYTES", 1 << 12)
    src = np.random.default_rng(0).integers(0, 256, 100_003, dtype=np.uint8)
    dst = np.zeros(100_003, np.uint8)
    assert ptd.host_copy(dst, src) == 3
    np.testing.assert_array_equal(dst, src)
    small = np.zeros(10, np.uint8)
    assert ptd.host_copy(small, src[:10]) == 1
    np.testing.assert_array_equal(small, src[:10])


def test_staging_buffers_go_back_to_the_process_pool(gpu_backend):
    if gpu_backend is None:
        pytest.skip("needs the CUDA-rules double's events")
    from nbdata.ops import prefetch_to_device as ptd
    blocks = ptd.shared_blocks(runtime.backend())
    with blocks.lock:
        blocks.free.clear()
    before = blocks.allocations
    stager = ptd.Stager(0, 2)
    outs = [stager.to_device(np.full((64, 64), k, np.float32)) for k in range(3)]
    made = blocks.allocations
    assert made > before
    stager.close()
    again = ptd.Stager(0, 2)
    outs += [again.to_device(np.full((64, 64), k, np.float32)) for k in range(3, 6)]
    assert blocks.allocations == made   # the second stager reused the first one's buffers
    for k, out in enumerate(outs):
        np.testing.assert_array_equal(out.copy_to_host(), np.full((64, 64), k, np.float32))


class _Event:
    def __init__(self, done: bool):
        self.is_done, self.synced = done, False

    def sync(self):
        self.synced = self.is_done = True


class _Backend:
    """What PinnedBlocks asks of a backend: pinned memory, and syncs on events."""

    def __init__(self):
        self.made = 0

    def pinned(self, size: int):
        self.made += 1
        return (f"new {self.made}", np.empty(size, np.uint8))

    def sync(self, event):
        event.sync()

    def bind(self):
        pass


@pytest.mark.host_only
def test_pinned_blocks_given_back_are_taken_newest_done_first():
    """A block whose copy is done is taken newest first (still in the caches); a block
    whose copy is still queued is not taken while fewer than WAIT_AFTER wait (a new one
    is made), then the oldest is taken once its copy ran: the host never waits for the
    newest copy, the one queued behind the latest kernel."""
    from nbdata.ops.prefetch_to_device import PinnedBlocks
    be = _Backend()
    blocks = PinnedBlocks(be)
    a, b = (("a", np.empty(64, np.uint8)), ("b", np.empty(64, np.uint8)))
    blocks.give(a)
    blocks.give(b)
    assert blocks.take(64) is b and blocks.take(64) is a   # no copies: newest first
    first, second = _Event(False), _Event(True)
    blocks.give(a, first)    # its copy still queued
    blocks.give(b, second)   # its copy done
    assert blocks.take(64) is b and not first.synced
    assert blocks.take(64)[0] == "new 1" and not first.synced   # one waiting: a new block
    blocks.give(b, _Event(False))
    assert blocks.take(64) is a and first.synced   # two waiting: the oldest, after its copy
    assert blocks.allocations == 1
