"""The chunk-iterator protocol every op implements, and helpers shared by op modules.

A node's ``open_chunks(ctx, state)`` returns a :class:`ChunkIter`:

- ``next(want)`` returns a :class:`nbdata.chunks.Chunk` of at most ``want`` rows (it
  may have none, when a filter dropped them all), or None at the end. ``want`` is the consumer's demand: sources slice exactly that much, so a
  ``take(5)`` after a Python map calls the function five times, not a chunk's worth.
- ``save()`` returns the iterator's state as plain data (ints, arrays, chunks of rows
  an op holds): opening the node again with that state resumes at the next row. It is
  called often (before every pull of a consumer that may stop mid-chunk), so it is
  cheap: positions and references to immutable chunks, copied only when serialised.
- ``close()`` stops background threads and releases files; it is idempotent.

``ctx.open_chunks(node, state)`` opens an input (with statistics); ``state`` is None
for a fresh start.
"""

from __future__ import annotations

import collections
import contextlib
import concurrent.futures
import threading
import time
from typing import Any

import numpy as np

from nbdata import profiler
from nbdata.chunks import Chunk, chunk_from_elements, col_row, concat_chunks, row_bytes
from nbdata.errors import CancelledError, OpError
from nbdata import state_check
from nbdata.spec import packer
from nbdata.trace.abstract import at_element

FIRST_WANT = 1


class ChunkIter:
    """Base class of chunk iterators (see the module docstring)."""

    def next(self, want: int) -> Chunk | None:
        raise NotImplementedError

    def save(self) -> dict:
        raise NotImplementedError

    def close(self) -> None:
        pass


class InputChunks(ChunkIter):
    """A chunk iterator reading the chunk iterator of its input, ``self.it`` (closed with it)."""

    def close(self) -> None:
        self.it.close()


class PositionChunks(ChunkIter):
    """Rows ``pos .. n`` in order: ``rows(lo, hi)`` (each subclass's) makes the chunk of
    rows ``lo .. hi``. State: the next position."""

    def __init__(self, n: int, pos: int):
        # A restored position lies within the rows (n: their count, negative when
        # infinite or unknown).
        self.n, self.pos = n, state_check.check_int(pos, "pos", 0, state_check.bound(n))

    def next(self, want: int) -> Chunk | None:
        lo = self.pos
        if lo >= self.n:
            return None
        self.pos = hi = min(self.n, lo + want)
        return self.rows(lo, hi)

    def save(self) -> dict:
        return {"pos": self.pos}


class EmptyChunks(ChunkIter):
    """An iterator with no rows."""

    def next(self, want: int) -> None:
        return None

    def save(self) -> dict:
        return {}


def grow(want: int, limit: int) -> int:
    """The next demand of a consumer that reads ahead: double, up to ``limit``."""
    return min(max(1, want * 2), limit)


def skip_rows(it, count: int):
    """Drop ``count`` rows of ``it``; returns (the rest of the last chunk read or None,
    the rows dropped)."""
    dropped = 0
    while dropped < count:
        chunk = it.next(count - dropped)
        if chunk is None:
            return None, dropped
        if chunk.n > count - dropped:
            rest = chunk.slice(count - dropped, chunk.n)
            return rest, count
        dropped += chunk.n
    return None, dropped


class RowQueue:
    """Rows read but not handed out yet, as a list of chunks (views of what was read)."""

    def __init__(self, pieces=()):
        if not pieces:   # (most: a fresh iteration's)
            self.pieces, self.n = [], 0
            return
        self.pieces = [p for p in pieces if p.n]
        self.n = sum(p.n for p in self.pieces)

    def add(self, chunk: Chunk) -> None:
        if chunk.n:
            self.pieces.append(chunk)
            self.n += chunk.n

    def clear(self) -> None:
        self.pieces, self.n = [], 0

    def take(self, n: int) -> Chunk:
        """The next ``n`` rows: a view when they lie in one chunk, else joined."""
        first = self.pieces[0]
        if first.n >= n:
            head = first.slice(0, n) if first.n > n else first
            if first.n > n:
                self.pieces[0] = first.slice(n, first.n)
            else:
                self.pieces.pop(0)
        else:
            parts, got = [], 0
            while got < n:
                piece = self.pieces.pop(0)
                use = min(piece.n, n - got)
                parts.append(piece.slice(0, use) if use < piece.n else piece)
                if use < piece.n:
                    self.pieces.insert(0, piece.slice(use, piece.n))
                got += use
            head = concat_chunks(parts)
        self.n -= n
        return head

    def whole_groups(self, size: int, most: int) -> int:
        """How many groups of ``size`` rows to take next (at most ``most``): as many as
        the first chunk holds, so they are views; one (joined) when it holds none."""
        if self.n < size or most < 1:
            return 0
        inside = self.pieces[0].n // size
        return min(most, inside) if inside else 1


class IndexQueue:
    """Row positions not handed out yet (int64 arrays), taken from the front: a view
    when they lie in one array, else joined (8 bytes a row; :class:`RowQueue`'s general
    joins cost tens of microseconds a call)."""

    def __init__(self, pieces=()):
        if not len(pieces):   # (most: a fresh iteration's)
            self.pieces, self.n = [], 0
            return
        self.pieces = [p for p in pieces if len(p)]
        self.n = sum(len(p) for p in self.pieces)

    def add(self, positions: np.ndarray) -> None:
        if len(positions):
            self.pieces.append(positions)
            self.n += len(positions)

    def clear(self) -> None:
        self.pieces, self.n = [], 0

    def take(self, n: int) -> np.ndarray:
        """The next ``n`` positions."""
        pieces = self.pieces
        first = pieces[0]
        if len(first) >= n:
            if len(first) > n:
                pieces[0] = first[n:]
            else:
                pieces.pop(0)
            self.n -= n
            return first[:n]
        parts, got = [], 0
        while got < n:
            piece = pieces.pop(0)
            use = min(len(piece), n - got)
            parts.append(piece[:use])
            if use < len(piece):
                pieces.insert(0, piece[use:])
            got += use
        self.n -= n
        return np.concatenate(parts)

    def first(self) -> int:
        """Positions in the first piece."""
        return len(self.pieces[0]) if self.pieces else 0


class RowReader:
    """Reads an input chunk stream one row at a time (for per-element consumers:
    flat_map, interleave, window, Python functions), pulling small chunks first and
    larger ones as reading goes on. Its state is the input's state before the chunk
    being read plus the rows already taken from it."""

    def __init__(self, ctx, node, state: dict | None, limit: int):
        self.ctx = ctx
        self.spec = node.spec
        self.pack = packer(node.spec)
        self.limit = limit
        self.before = None if state is None else state_check.nested(state, "input")
        skip = 0 if state is None else state_check.integer(
            state, "skip", 0, min(state_check.MAX_CHUNK_SKIP, state_check.most_rows(node)))
        self.it = ctx.open_chunks(node, self.before)
        self.chunk: Chunk | None = None
        self.pos = 0
        self.base = 0
        self.want = FIRST_WANT
        self.ended = False
        if skip:
            self.chunk, self.base = skip_rows(self.it, skip)

    def _pull(self, want: int | None = None) -> bool:
        """Reads the next chunk: ``want`` rows when given, else the growing demand."""
        self.before = self.it.save()
        self.base = 0
        self.chunk = self.it.next(self.want if want is None else want)
        self.pos = 0
        self.want = grow(self.want, self.limit)
        if self.chunk is None:
            self.ended = True
            return False
        return True

    def next_element(self) -> tuple[bool, Any]:
        """(True, element) or (False, None) at the end."""
        while self.chunk is None or self.pos >= self.chunk.n:
            if self.ended or not self._pull():
                return False, None
        chunk, j = self.chunk, self.pos
        self.pos = j + 1
        return True, self.pack([col_row(c, j) for c in chunk.columns])

    def next_rows(self, want: int) -> Chunk | None:
        """Up to ``want`` rows as a chunk (what is left of the current chunk first; a new
        chunk is read with that demand)."""
        while self.chunk is None or self.pos >= self.chunk.n:
            if self.ended or not self._pull(want):
                return None
        a = self.pos
        b = min(self.chunk.n, a + want)
        self.pos = b
        return self.chunk if (a == 0 and b == self.chunk.n) else self.chunk.slice(a, b)

    def unread(self, rows: int) -> None:
        """Gives back the last ``rows`` rows that ``next_rows`` handed out."""
        self.pos -= rows

    def save(self) -> dict:
        if self.chunk is None or self.pos >= self.chunk.n:
            return {"input": self.it.save(), "skip": 0}
        return {"input": self.before, "skip": self.base + self.pos}

    def close(self) -> None:
        self.it.close()


class CollectedChunks(ChunkIter):
    """Chunks made of elements produced one at a time by ``produce()`` (which returns
    (True, element) or (False, None) at the end); at most ``want`` per chunk. An error
    while producing is raised after the elements produced before it were handed out."""

    def __init__(self, spec, produce):
        self.spec = spec
        self.produce = produce
        self.ended = False
        self.error: BaseException | None = None

    def collect(self, want: int) -> Chunk | None:
        if self.error is not None:
            err, self.error = self.error, None
            raise err
        elements = []
        while len(elements) < want and not self.ended:
            try:
                ok, element = self.produce()
            except OpError as e:
                if not elements:
                    raise
                self.error = e
                break
            if not ok:
                self.ended = True
                break
            elements.append(element)
        return chunk_from_elements(elements, self.spec) if elements else None

    next = collect


class Tuner:
    """Chooses a parallelism for ``AUTOTUNE`` from measured rates: it starts at one,
    adds a thread while that raises the rows/s by more than 10%, and stops at the
    thread budget or at the first addition that does not pay."""

    def __init__(self, limit: int):
        self.limit = max(1, limit)
        self.value = 1
        self.best = 0.0
        self.settled = self.limit == 1
        self.why = ("the thread budget is one thread" if self.settled else
                    "measuring one thread")
        self._rows = 0
        self._seconds = 0.0

    def report(self, rows: int, seconds: float) -> None:
        if self.settled:
            return
        self._rows += rows
        self._seconds += seconds
        if self._rows < 64 or self._seconds < 0.02:
            return
        rate = self._rows / self._seconds
        self._rows, self._seconds = 0, 0.0
        if rate > self.best * 1.1:
            self.best = rate
            if self.value < self.limit:
                self.value += 1
                self.why = f"measuring {self.value} threads ({rate:,.0f} rows/s with one fewer)"
            else:
                self.settled = True
                self.why = f"the most threads it may use ({self.limit}), {rate:,.0f} rows/s"
        else:
            self.value = max(1, self.value - 1)
            self.settled = True
            self.why = (f"one more thread did not add 10% ({rate:,.0f} rows/s against "
                        f"{self.best:,.0f})")


class PerElement(ChunkIter):
    """Applies a Python function to each row of the input's chunks (map and filter
    with functions Numba cannot compile), on a thread pool when ``threads`` > 1 (or
    AUTOTUNE), in input order unless ``deterministic`` is False (then in the order the
    calls finish).

    ``call(element)`` returns the row's result; ``emit(chunk, rows, results)`` makes
    the output chunk from the input rows and their results. An error in one row is
    raised after the rows before it went out; the next call continues after it.
    State: the input's state before its current chunk and the rows of that chunk
    already handled (restoring re-reads that chunk and skips them).
    """

    def __init__(self, ctx, node, state, call, emit, threads, deterministic: bool, stats,
                 indexed: bool = False, in_budget: bool = True, tune_limit: int | None = None,
                 call_chunk=None):
        self.ctx = ctx
        # call_chunk(chunk, a, b): the results of rows a..b at once (an array; compiled
        # code over the chunk's columns), or None to call the rows one by one
        self.call_chunk = call_chunk
        self.indexed = indexed   # call(element, index): the row's position in the input
        self.index = 0 if state is None else state_check.integer(state, "index", default=0)
        self.spec = node.input.spec
        self.pack = packer(self.spec)
        self.call = call
        self.emit = emit
        self.cancelled = ctx.cancelled
        self.deterministic = deterministic
        self.stats = stats
        self.autotune = threads is None
        self.in_budget = in_budget   # calls' threads count as busy in the thread budget
        self.tuner = Tuner(ctx.budget.total if tune_limit is None else tune_limit) \
            if self.autotune else None
        self.threads = threads if threads is not None else 1
        self.pool = None
        self.before = None if state is None else state_check.nested(state, "input")
        self.skip = 0 if state is None else state_check.integer(
            state, "done", 0, min(state_check.MAX_CHUNK_SKIP,
                                  state_check.most_rows(node.input)))
        self.it = ctx.open_chunks(node.input, self.before)
        self.chunk: Chunk | None = None
        self.done = 0           # rows of self.chunk handled
        self.ready: list = []   # results computed ahead for rows from self.done on

    def _workers(self) -> int:
        return self.tuner.value if self.autotune else self.threads

    def _cancel_check(self) -> None:
        if self.cancelled.is_set():
            raise CancelledError("the run was interrupted: its iterator was closed",
                                 "PerElement")

    def _run(self, args):
        self._cancel_check()
        if not self.in_budget:
            return self.call(*args)
        with self.ctx.budget.worker():
            return self.call(*args)

    def _compute(self, rows: list) -> list:
        """(ok, value or error) per row, in output order."""
        workers = self._workers()
        if workers <= 1 or len(rows) == 1:
            out = []
            for args in rows:
                self._cancel_check()
                try:
                    out.append((True, self.call(*args)))
                except OpError as err:
                    out.append((False, err))
                    break  # the rows after it are computed when the consumer gets there
            return out
        if self.pool is None or self.pool._max_workers != workers:
            if self.pool is not None:
                self.pool.shutdown(wait=False)
            self.pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="nbdata-map")
        futures = [self.pool.submit(self._run, args) for args in rows]
        order = futures if self.deterministic else list(concurrent.futures.as_completed(futures))
        out = []
        for f in order:
            err = f.exception()
            if err is not None and not isinstance(err, OpError):
                raise err
            out.append((err is None, f.result() if err is None else err))
        return out

    def next(self, want: int) -> Chunk | None:
        while True:
            if not self.ready and (self.chunk is None or self.done >= self.chunk.n):
                self.before = self.it.save()
                if self.chunk is not None:
                    # counted once: the input's next() may raise, and the next call
                    # comes back here (it counted the chunk again: a row's index, and
                    # so random_map's draws, moved past an input error)
                    self.index += self.chunk.n
                    self.chunk = None
                self.done = 0
                self.chunk = self.it.next(want)
                if self.chunk is None:
                    return None
                if self.skip:
                    self.done = min(self.skip, self.chunk.n)
                    self.skip -= self.done
                continue
            chunk = self.chunk
            a = self.done
            if self.ready:
                results, self.ready = self.ready, []
            else:
                b = min(chunk.n, a + want)
                whole = self.call_chunk(chunk, a, b) if self.call_chunk is not None else None
                if whole is not None:
                    self.done = b
                    return self.emit(chunk.slice(a, b), whole)
                rows = [(self.pack([col_row(c, j) for c in chunk.columns]),) + (
                    (self.index + j,) if self.indexed else ()) for j in range(a, b)]
                started = time.perf_counter()
                results = self._compute(rows)
                if self.tuner is not None:
                    self.tuner.report(len(results), time.perf_counter() - started)
                    self.stats.chosen["parallelism"] = self.tuner.value
                    self.stats.why["parallelism"] = self.tuner.why
            good = 0
            while good < len(results) and results[good][0]:
                good += 1
            if good == 0:
                self.done = a + 1
                self.ready = results[1:]
                raise at_element(results[0][1], self.index + a)
            self.done = a + good
            self.ready = results[good:]
            return self.emit(chunk.slice(a, a + good), [v for _, v in results[:good]])

    def save(self) -> dict:
        if self.chunk is None or self.done >= self.chunk.n:
            index = self.index + (self.chunk.n if self.chunk is not None else 0)
            return {"input": self.it.save(), "done": self.skip, "index": index}
        return {"input": self.before, "done": self.done, "index": self.index}

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = None
        self.it.close()


class _Producer:
    """The background half of :class:`BackgroundChunks` (the thread holds only this,
    so the consumer side can be garbage collected, which stops the thread).

    Its demand follows its consumer's: the first pull asks for what the consumer
    asked (one element, when it reads element by element), and each pull after that
    asks for twice as much, up to ``pull_rows``, while a pull takes less than
    ``FAST_PULL`` seconds (halving when one takes over ``SLOW_PULL``), and never less
    than the consumer's last demand. So a slow Python function under ``prefetch``
    delivers its first element after one call, and a stop waits for a short pull.
    """

    FAST_PULL = 0.02
    SLOW_PULL = 0.2

    def __init__(self, it, capacity: int, pull_rows: int, budget, label: str, skip: int, before,
                 cancelled: threading.Event | None = None, memory=None, stats=None,
                 row_bytes: int = 1, worker: bool = True):
        self.it = it
        self.worker = worker         # counts as a busy executor thread in the thread budget
        self.memory = memory         # the pipeline's MemoryBudget (None: unbounded)
        self.stats = stats
        self.row_bytes = max(1, row_bytes)
        self.held = 0                # bytes of the queued chunks, held in the budget
        self.capacity = capacity
        self.pull_rows = pull_rows
        self.want = FIRST_WANT     # the next pull's size, grown by how fast pulls are
        self.demand = 0            # the consumer's last demand
        self.budget = budget
        self.label = label
        self.skip = skip
        self.items: collections.deque = collections.deque()   # [before, offset, chunk, error]
        self.rows = 0
        self.cond = threading.Condition()
        self.stopped = False
        self.finished = False
        self.cancelled = cancelled   # the run's cancellation (set when it is interrupted)
        self.after = before      # the input's state after the last queued chunk
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self.run, name=f"nbdata-{self.label}", daemon=True)
        self.thread.start()

    def _fits(self) -> bool:
        """Whether the next pull (about ``want`` rows) fits in the memory budget."""
        if self.memory is None:
            return True
        return self.memory.fits(self.row_bytes * max(1, min(self.want, self.pull_rows)))

    def handed_out(self, item: list, rows: int) -> None:
        """``rows`` of ``item``'s chunk went to the consumer: their bytes leave the
        budget (the consumer holds them now). Called with ``cond`` held."""
        chunk, nbytes = item[2], item[4]
        if not nbytes:
            return
        part = nbytes if chunk is None or rows >= chunk.n else nbytes * rows // max(1, chunk.n)
        item[4] = nbytes - part
        self.held -= part
        self.memory.release(self.stats, part)

    def release_all(self) -> None:
        """The queue dropped (stop): its bytes leave the budget."""
        with self.cond:
            if self.held and self.memory is not None:
                self.memory.release(self.stats, self.held)
            self.held = 0
            for item in self.items:
                item[4] = 0

    def _size(self, seconds: float) -> None:
        """Grows or shrinks the next pull from how long the last one took."""
        if seconds < self.FAST_PULL:
            self.want = grow(self.want, self.pull_rows)
        elif seconds > self.SLOW_PULL:
            self.want = max(1, self.want // 2)

    def run(self) -> None:
        try:
            while True:
                with self.cond:
                    while not self.stopped and self.items and (
                            self.rows >= self.capacity or not self._fits()):
                        self.cond.wait()
                    if self.stopped:
                        return
                    before = self.after
                    want = min(self.pull_rows, max(self.want, self.demand))
                    if self.memory is not None:   # a pull that fits what the budget has left
                        want = max(1, min(want, self.memory.free // self.row_bytes))
                offset, error, chunk = 0, None, None
                started = time.perf_counter()
                try:
                    with self.budget.worker() if self.worker else contextlib.nullcontext():
                        chunk = self.it.next(want)
                        while chunk is not None and self.skip:
                            drop = min(self.skip, chunk.n)
                            self.skip -= drop
                            offset += drop
                            chunk = chunk.slice(drop, chunk.n) if drop < chunk.n else None
                            if chunk is None:  # the skipped rows went on past this chunk
                                chunk = self.it.next(want)
                        after = self.it.save()
                except BaseException as e:  # noqa: BLE001 - handed to the consumer, in order
                    if not isinstance(e, OpError):
                        e.add_note(f"(raised in the background thread of {self.label})")
                    error, after = e, self.it.save()
                self._size(time.perf_counter() - started)
                with self.cond:
                    if self.stopped:
                        return
                    nbytes = chunk.nbytes if chunk is not None and self.memory is not None else 0
                    if nbytes:
                        self.memory.hold(self.stats, nbytes)
                        self.held += nbytes
                    self.items.append([before, offset, chunk, error, nbytes])
                    self.rows += chunk.n if chunk is not None else 0
                    self.after = after
                    if chunk is None and error is None:
                        self.finished = True
                    self.cond.notify_all()
                    if self.finished:
                        return
                # Not held while waiting: a raised error's traceback reaches the consumer's
                # frames, which would keep the consumer (and so this thread) alive.
                chunk = error = None
        finally:
            self.it.close()

    def stop(self) -> None:
        """Stops the thread: it ends after the pull in progress (at once, when the run
        was cancelled: the pull's user functions see that and stop), and is waited for
        unless the run was cancelled (an interrupt surfaces without waiting)."""
        with self.cond:
            self.stopped = True
            self.cond.notify_all()
        thread = self.thread
        if thread is not None and thread is not threading.current_thread():
            cancelled = self.cancelled is not None and self.cancelled.is_set()
            thread.join(timeout=0.05 if cancelled else 5)
        elif thread is None:
            self.it.close()


class BackgroundChunks(ChunkIter):
    """An input run ahead on a background thread (prefetch, parallel interleave): up to
    ``capacity`` rows wait in a queue (at least one chunk). Errors in the thread reach
    the consumer in order. With ``autotune``, the capacity grows (within
    ``ram_budget`` bytes) while the consumer finds the queue empty.

    State: the input's state before the first row not yet handed out (the producer
    records the state before each chunk it queues), so what was read ahead is read
    again after a restore instead of being saved.
    """

    def __init__(self, ctx, open_input, spec, state, capacity: int, stats, label: str,
                 autotune: bool = False, ram_budget: int = 0, start: bool = False,
                 worker: bool = True):
        before = None if state is None else state_check.nested(state, "input")
        skip = 0 if state is None else state_check.integer(state, "skip", 0,
                                                           state_check.MAX_CHUNK_SKIP)
        it = open_input(before)
        self.pull_rows = ctx.max_rows(spec)
        self.stats = stats
        self.autotune = autotune
        self.row_bytes = max(1, row_bytes(spec))
        self.ram_budget = ram_budget or (256 << 20)
        self.producer = _Producer(it, max(1, capacity), self.pull_rows, ctx.budget, label,
                                  skip, before,
                                  ctx.cancelled, ctx.memory, stats, self.row_bytes, worker)
        if autotune:
            stats.chosen["buffer rows"] = self.producer.capacity
        if start:
            self._start()

    def _start(self) -> None:
        p = self.producer
        if p.thread is None:
            if p.after is None:
                p.after = p.it.save()
            p.start()

    def next(self, want: int):
        p = self.producer
        with p.cond:
            p.demand = want
        self._start()
        with p.cond:
            if not p.items:
                started = time.perf_counter()
                while not p.items and not p.stopped:
                    p.cond.wait()
                ended = time.perf_counter()
                self.stats.waited(ended - started, ended)
                profiler.slice_(f"wait for {self.stats.title}", "wait", started, ended,
                                {"want": want})
                if self.autotune and p.capacity * self.row_bytes * 2 <= self.ram_budget:
                    p.capacity *= 2
                    self.stats.chosen["buffer rows"] = p.capacity
                    self.stats.why["buffer rows"] = "doubled each time its consumer waited"
                elif self.autotune:
                    self.stats.why["buffer rows"] = (
                        f"held: twice as many rows would pass the cap of one autotuned "
                        f"prefetch buffer, Options().autotune.ram_budget "
                        f"({self.ram_budget / 2**20:,.0f} MiB)")
            if not p.items:
                return None
            item = p.items[0]
            chunk, error = item[2], item[3]
            if error is not None:
                p.items.popleft()
                p.cond.notify_all()
                raise error
            if chunk is None:
                return None
            if chunk.n <= want:
                p.items.popleft()
                p.handed_out(item, chunk.n)
                p.rows -= chunk.n
                p.cond.notify_all()
                return chunk
            p.handed_out(item, want)
            item[2] = chunk.slice(want, chunk.n)
            item[1] += want
            p.rows -= want
            p.cond.notify_all()
            return chunk.slice(0, want)

    def ready(self) -> bool:
        """True when a chunk (or the end) is waiting, so ``next`` would not block."""
        p = self.producer
        return p.thread is None or bool(p.items)

    def save(self) -> dict:
        p = self.producer
        with p.cond:
            if p.items:
                before, offset = p.items[0][0], p.items[0][1]
                return {"input": before, "skip": offset}
            if p.thread is None:
                return {"input": p.it.save(), "skip": p.skip}
            return {"input": p.after, "skip": 0}

    def close(self) -> None:
        self.producer.stop()
        self.producer.release_all()

    def __del__(self):
        try:
            self.producer.stop()
            self.producer.release_all()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
