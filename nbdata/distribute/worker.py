"""The worker: runs the compiled pipeline above ``distribute`` (fused kernels included)
in a Ray actor and hands out its output a chunk of rows at a time, each with the
iterator state after it."""

from __future__ import annotations

import functools
import queue
import threading
import time
from typing import Any

import numpy as np

from nbdata.distribute.splits import SplitSource, reseed, replace_node
from nbdata.random import derive_seed

# A reply holds about this much data (or this much work): big enough that Ray's cost per
# call is small next to it, small enough that the consumer does not wait long.
TARGET_BYTES = 8 << 20
TARGET_SECONDS = 0.05


class SplitLog:
    """The splits a worker took, per epoch, in order; the ``k``-th take of an epoch
    replays the log when it holds one (a worker restarted from an earlier state gets
    the splits its predecessor took), else asks the job for a new split."""

    def __init__(self, job, index: int, log: dict | None):
        self.job, self.index = job, index
        self.log = {k: [tuple(s) for s in v] for k, v in (log or {}).items()}

    def take(self, key: str, k: int, run_id: int):
        import ray
        taken = self.log.setdefault(key, [])
        if k < len(taken):
            return taken[k]
        split = ray.get(self.job.take_split.remote(self.index, key, run_id))
        if split is not None:
            taken.append(tuple(split))
        return split

    def snapshot(self) -> dict:
        return {k: [list(s) for s in v] for k, v in self.log.items()}


class Worker:
    """One worker (a Ray actor). ``payload`` is (the plan above ``distribute``, its
    options, the split source or None); the pipeline is compiled once and run once per
    ``start``. Calls of a run: ``start`` then ``next`` until it reports the end."""

    def __init__(self, payload, index: int, job, threads: int):
        from nbdata.dataset import Dataset
        node, options, source = payload
        self.index = index
        self.log = None
        node = reseed(node, index)
        if source is not None:
            self.log = SplitLog(job, index, None)
            node = replace_node(node, source, SplitSource(source, self._take_split))
        options = _worker_options(threads).merge(options)
        self.pipeline = Dataset(node, options).compile()
        self.run = self.run_id = None
        self.want = 1

    def _take_split(self, key: str, k: int):
        return self.log.take(key, k, self.run_id)

    def ready(self) -> int:
        return self.index

    def start(self, run_id: int, seed: int, iteration: int, state: Any, log: dict | None,
              single: bool) -> None:
        """Open a run: the pipeline seed and iteration number of the consumer's run
        (for random ops), resumed from ``state`` (and the split log it was saved with);
        ``single``: one element per reply (coordinated reads). A thread of the worker
        produces the replies one ahead, so the pipeline runs while Ray sends the last
        reply."""
        self.close()
        self.pipeline.state.seed = derive_seed(seed, self.index)
        epochs = {str(i): iteration for i in range(len(self.pipeline.op_index))}
        if self.log is not None:
            self.log.log = SplitLog(None, self.index, log).log
        self.run = self.pipeline.open_chunks(state=state, epochs=epochs)
        self.run_id = run_id  # ``want`` stays as the last run learned it
        self.replies = queue.Queue(maxsize=1)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._produce, args=(self.run, single, self.replies,
                                                                   self.stop),
                                       name="nbdata-distribute-worker", daemon=True)
        self.thread.start()

    def next(self, run_id: int):
        """(chunks, reply): the next chunks of rows, together about ``TARGET_BYTES`` or
        ``TARGET_SECONDS`` of work (one element in a ``single`` run), and the state after
        them; no chunks at the end. An error of the pipeline travels in the reply."""
        if run_id != self.run_id or self.run is None:
            return [], {"end": True, "stale": True}
        item = self.replies.get()
        if item[1]["end"]:
            self.close()
        return item

    def _produce(self, run, single: bool, replies: queue.Queue, stop: threading.Event) -> None:
        while not stop.is_set():
            item = self._reply(run, single)
            while not stop.is_set():
                try:
                    replies.put(item, timeout=0.1)
                    break
                except queue.Full:
                    continue
            if item[1]["end"]:
                return

    def _reply(self, run, single: bool):
        started = time.perf_counter()
        stats_before = self.pipeline.stats().kernel_rows
        chunks, rows, size = [], 0, 0
        try:
            while True:
                t = time.perf_counter()
                chunk = run.next(1 if single else self.want)
                if chunk is None:
                    break
                if not chunk.n:
                    continue
                chunks.append(_own_columns(chunk))
                rows, size = rows + chunk.n, size + chunk.nbytes
                if single:
                    break
                if chunk.nbytes < TARGET_BYTES and time.perf_counter() - t < TARGET_SECONDS:
                    self.want = min(self.want * 2, 1 << 20)
                if size >= TARGET_BYTES or time.perf_counter() - started >= TARGET_SECONDS:
                    break
        except Exception as e:  # noqa: BLE001 - raised again by the consumer
            return [], {"end": True, "error": e}
        if not chunks:
            return [], {"end": True}
        # The state after these chunks; a reply for the end follows them.
        return chunks, {"end": False, "rows": rows, "bytes": size,
                        "seconds": time.perf_counter() - started,
                        "kernel_rows": self.pipeline.stats().kernel_rows - stats_before,
                        "state": run.save(),
                        "log": None if self.log is None else self.log.snapshot()}

    def close(self) -> None:
        """End the current run: its thread stops, its replies not taken are dropped."""
        if self.run is None:
            return
        self.stop.set()
        self.thread.join()
        self.run.close()
        self.run = None


def _worker_options(threads: int):
    """Defaults a worker's options start from (the dataset's own set values win): its
    share of the cores, and fused stages compiled from the first row: a worker reads
    splits as a stream of unknown length, which would otherwise run its first
    ``fusion_min_rows`` rows of every run on the reference path."""
    from nbdata.options import Options
    o = Options()
    o.threading.private_threadpool_size = max(1, int(threads))
    o.fusion_min_rows = 0
    return o


def _own_columns(chunk):
    """The chunk with array columns that own their memory, so Ray stores only the rows
    sent (a view would take the whole array it looks into along)."""
    from nbdata.chunks import Chunk
    cols = [c.copy() if isinstance(c, np.ndarray) and c.base is not None
            and c.base.nbytes > 2 * c.nbytes else c for c in chunk.columns]
    return Chunk(cols, chunk.n)


@functools.lru_cache(maxsize=None)
def worker_class():
    """The Ray actor class of :class:`Worker`."""
    from nbdata.distribute.cluster import ray_module
    return ray_module().remote(max_restarts=0)(Worker)
