"""The worker: runs the compiled pipeline above ``distribute`` (fused kernels included)
in a worker host (a long-lived Ray actor process serving many jobs, see host.py) and
hands out its output a chunk of rows at a time, each with the worker's position after
it.

A worker's position is a list of *positions*, run one after the other: a pipeline
state (None: from the start), the splits that position took (its log, replayed when
it resumes), the epoch its first epoch stands for (``base``) and whether it only
drains what it holds (``drain``: a position adopted from a saved run of more workers
finishes its splits in flight and buffered rows but takes no new split)."""

from __future__ import annotations

import queue
import threading
import time

import numpy as np

from nbdata.distribute.splits import (SplitSource, key_path, live_splits, reseed, replace_node,
                                      shift_key)
from nbdata.errors import InternalError
from nbdata.random import derive_seed

# A reply holds about this much data (or this much work): big enough that Ray's cost per
# call is small next to it, small enough that the consumer does not wait long.
TARGET_BYTES = 8 << 20
TARGET_SECONDS = 0.05


def fresh_position(base: int = 0) -> dict:
    """A position that starts the pipeline from the beginning (at epoch ``base`` of a
    forever-repeat above the split source) and takes new splits."""
    return {"state": None, "log": {}, "base": int(base), "drain": False}


class SplitLog:
    """The splits a position took, per epoch key: ``{key: [first, [split, ...]]}``, its
    takes number ``first`` on of that epoch. The ``k``-th take of an epoch replays the
    log when it holds it (a position resumed from an earlier state gets the splits it
    took after that state again), else a draining position gets None and a continuing
    one a new split from the job. Every take is also appended to ``taken``, which the
    next reply reports (the consumer's record of the rows assigned)."""

    def __init__(self, job, index: int, log: dict | None, drain: bool, taken: list,
                 position: str | None = None):
        self.job, self.index, self.drain, self.taken = job, index, bool(drain), taken
        self.position = position
        self.log = {str(k): [int(v[0]), [(int(a), int(b)) for a, b in v[1]]]
                    for k, v in (log or {}).items()}
        self.lock = threading.Lock()

    def take(self, key: str, k: int, run_id: int):
        import ray
        with self.lock:
            entry = self.log.get(key)
            first = k if entry is None else entry[0]
            held = 0 if entry is None else len(entry[1])
            if k < first or k > first + held:
                raise InternalError(
                    f"distribute: take {k} of epoch {key} does not follow the position's "
                    f"split log (takes {first}..{first + held - 1})", "distribute")
            if k < first + held:
                split = entry[1][k - first]
            elif self.drain or self.job is None:
                return None
            else:
                split = ray.get(self.job.take_split.remote(self.index, key, k, run_id, self.position))
                if split is None:
                    return None
                split = (int(split[0]), int(split[1]))
                self.log.setdefault(key, [k, []])[1].append(split)
            self.taken.append([key, list(split)])
            return split

    def prune(self, live: dict) -> None:
        """Drops what no take asks for again (``live``: per epoch key, the first take
        the saved state makes): epochs before the oldest one the state reads, and within
        an epoch the splits before that take. The log stays a few splits long however
        far the run has gone."""
        if not live:
            return
        with self.lock:
            oldest = min(key_path(k) for k in live)
            for key in list(self.log):
                if key in live:
                    first, splits = self.log[key]
                    drop = max(0, min(len(splits), live[key] - first))
                    if drop:
                        self.log[key] = [first + drop, splits[drop:]]
                elif key_path(key) < oldest:
                    del self.log[key]

    def snapshot(self) -> dict:
        with self.lock:
            return {k: [v[0], [list(s) for s in v[1]]] for k, v in self.log.items()}


class Worker:
    """One worker of a job (hosted by a Host actor). ``payload`` is (the plan above
    ``distribute``, its options, the split source or None); the pipeline is compiled
    once and run once per ``start``. Calls of a run: ``start`` then ``next`` until it
    reports the end."""

    def __init__(self, payload, index: int, job, threads: int):
        from nbdata.dataset import Dataset
        node, options, source = payload
        self.index, self.job = index, job
        self.splits = source is not None
        node = reseed(node, index)
        if source is not None:
            node = replace_node(node, source, SplitSource(source, self._take_split))
        options = _worker_options(threads).merge(options)
        self.pipeline = Dataset(node, options).compile()
        self.run_id = None
        self.active = False
        self.it = None          # the chunk iterator of the position running (queue[0])
        self.position = None    # its SplitLog, base and drain
        self.queue: list = []   # the positions not finished, in the order they run
        self.taken: list = []   # the takes since the last reply
        self.want = 1
        self.closing = threading.Lock()   # a host may drop the worker during a call

    def _take_split(self, key: str, k: int):
        log, base, _ = self.position
        return log.take(shift_key(key, base), k, self.run_id)

    def ready(self) -> int:
        return self.index

    def start(self, run_id: int, seed: int, iteration: int, positions: list,
              single: bool) -> None:
        """Open a run: the pipeline seed and iteration number of the consumer's run
        (for random ops), and the positions to run one after the other (see the module
        docstring; none: the run ends at once); ``single``: one element per reply
        (coordinated reads). A thread of the worker produces the replies one ahead, so
        the pipeline runs while Ray sends the last reply."""
        self.close()
        self.pipeline.state.seed = derive_seed(seed, self.index)
        self.epochs = {str(i): iteration for i in range(len(self.pipeline.op_index))}
        self.queue = [dict(p) for p in positions]
        self.taken = []
        self.run_id = run_id  # ``want`` stays as the last run learned it
        self.active = True
        self.replies = queue.Queue(maxsize=1)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._produce, args=(single, self.replies,
                                                                   self.stop),
                                       name="nbdata-distribute-worker", daemon=True)
        self.thread.start()

    def next(self, run_id: int):
        """(chunks, reply): the next chunks of rows, together about ``TARGET_BYTES`` or
        ``TARGET_SECONDS`` of work (one element in a ``single`` run), the worker's
        positions after them and the splits taken for them; no chunks at the end. An
        error of the pipeline travels in the reply."""
        if run_id != self.run_id or not self.active:
            return [], {"end": True, "stale": True}
        replies, stop = self.replies, self.stop
        while True:
            try:
                item = replies.get(timeout=0.1)
                break
            except queue.Empty:
                if stop.is_set():     # closed meanwhile (its host dropped it)
                    return [], {"end": True, "stale": True}
        if item[1]["end"]:
            self.close()
        return item

    def _produce(self, single: bool, replies: queue.Queue, stop: threading.Event) -> None:
        while not stop.is_set():
            item = self._reply(single)
            while not stop.is_set():
                try:
                    replies.put(item, timeout=0.1)
                    break
                except queue.Full:
                    continue
            if item[1]["end"]:
                return

    def _open(self) -> None:
        pos = self.queue[0]
        log = None
        if self.splits:
            log = SplitLog(self.job, self.index, pos.get("log"), pos.get("drain"), self.taken,
                           pos.get("id"))
        self.position = (log, int(pos.get("base") or 0), bool(pos.get("drain")))
        self.it = self.pipeline.open_chunks(state=pos.get("state"), epochs=self.epochs)

    def _finish_position(self) -> None:
        self.it.close()
        self.it = self.position = None
        self.queue.pop(0)

    def _reply(self, single: bool):
        started = time.perf_counter()
        stats_before = self.pipeline.stats().kernel_rows
        chunks, rows, size = [], 0, 0
        try:
            while True:
                if self.it is None:
                    if not self.queue:
                        break
                    self._open()
                t = time.perf_counter()
                chunk = self.it.next(1 if single else self.want)
                if chunk is None:
                    # This position is done: the rows sent so far end it.
                    self._finish_position()
                    if chunks:
                        break
                    continue
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
            if not chunks:
                return [], {"end": True}
            # The positions after these chunks; a reply for the end follows them.
            positions = self._positions()
        except Exception as e:  # noqa: BLE001 - raised again by the consumer
            return [], {"end": True, "error": e}
        taken = self.taken[:]
        del self.taken[:]
        return chunks, {"end": False, "rows": rows, "bytes": size,
                        "seconds": time.perf_counter() - started,
                        "kernel_rows": self.pipeline.stats().kernel_rows - stats_before,
                        "state": positions, "taken": taken}

    def _positions(self) -> list:
        """The worker's positions now: the running one's state and (pruned) log, then
        those not started."""
        rest = self.queue
        out = []
        if self.it is not None:
            state = self.it.save()
            log, base, drain = self.position
            snapshot = None
            if log is not None:
                log.prune({shift_key(k, base): t for k, t in live_splits(state).items()})
                snapshot = log.snapshot()
            out.append({"state": state, "log": snapshot, "base": base, "drain": drain,
                        "id": self.queue[0].get("id")})
            rest = self.queue[1:]
        return out + [dict(p) for p in rest]

    def close(self) -> None:
        """End the current run: its thread stops, its replies not taken are dropped."""
        with self.closing:
            if not self.active:
                return
            self.active = False
            self.stop.set()
            self.thread.join()
            if self.it is not None:
                self.it.close()
            self.it = self.position = None


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
