"""The consumer side of ``distribute``: the chunk iterator that reads finished chunks from
the job, its state (a position of the global stream, which resumes on any number of
workers and consumers) and per-worker statistics."""

from __future__ import annotations

import threading
import uuid

from nbdata.compiler.executor import StageStats
from nbdata.distribute import cluster
from nbdata.distribute.host import JobHandle, pool
from nbdata.distribute.job import job_class
from nbdata.distribute.splits import Pools, forever_repeat, splittable_source
from nbdata.errors import InvalidArgumentError, UnavailableError, UnimplementedError
from nbdata.ops.runtime import ChunkIter, RowQueue

STATE_FORMAT = 2
_NAMED_JOBS: dict = {}     # job name -> the handle that keeps the named job up
_NAMED_LOCK = threading.Lock()


class DistributedStats(StageStats):
    """A distribute stage's statistics: what arrived at the driver, and per worker the
    rows it produced, its busy time (its rows/s) and the rows its fused kernels ran."""

    def __init__(self, title: str, node=None):
        super().__init__(title, node)
        self.workers: dict[int, dict] = {}

    def worker(self, index: int, note: dict) -> None:
        with self._lock:
            w = self.workers.setdefault(index, {"rows": 0, "chunks": 0, "seconds": 0.0,
                                                "bytes": 0, "kernel_rows": 0})
            w["chunks"] += 1
            for key in ("rows", "seconds", "bytes", "kernel_rows"):
                w[key] += note[key]
            if note["kernel_rows"]:
                self.kernel_chunks += 1
                self.kernel_rows += note["kernel_rows"]

    def line(self) -> str:
        text = super().line()
        for i in sorted(self.workers):
            w = self.workers[i]
            rate = w["rows"] / w["seconds"] if w["seconds"] else 0.0
            text += (f"\n    worker {i}: {w['rows']:,} rows in {w['chunks']:,} chunks, "
                     f"{w['seconds']:.3f} s busy ({rate:,.0f} rows/s), "
                     f"{w['bytes'] / 1e6:.1f} MB sent, {w['kernel_rows']:,} rows in fused kernels")
        return text


class Service:
    """A distributed dataset's Ray side, kept across iterations: its plan in the object
    store and the idle jobs (whose workers keep their compiled pipelines)."""

    def __init__(self, node):
        self.node = node
        self.payload = None
        self.idle: list = []
        self.lock = threading.Lock()

    def job_config(self) -> dict:
        """The job this dataset asks for: its worker count (None: one per CPU of the
        cluster), their threads, and the source's rows and split size (distributed_epoch)."""
        from nbdata.distribute.splits import split_size
        node = self.node
        cpus = cluster.cluster_cpus()
        workers = node.num_workers or max(1, int(cpus))
        rows = None if node.source is None else int(node.source.cardinality())
        natural = getattr(node.source, "split_boundaries", None)
        boundaries = natural() if natural is not None else None
        # A source with natural units (a Parquet file's row groups) is split at them,
        # one unit a split; others in about SPLITS_PER_WORKER pieces per worker.
        size = None if rows is None else (max(1, rows) if boundaries else split_size(rows, workers))
        return {"fingerprint": node.fingerprint(), "num_workers": workers,
                "threads": max(1, int(cpus // workers)), "job_name": node.job_name,
                "rows": rows, "split_size": size, "boundaries": boundaries}

    def acquire(self):
        """A job for one iteration: the named one (shared), else an idle one of ours."""
        ray = cluster.connect(self.node.address)
        with self.lock:
            if self.payload is None:
                self.payload = ray.put((self.node.input, self.node.options, self.node.source))
            if self.node.job_name is None and self.idle:
                return self.idle.pop()
            # The job runs its workers on this process's worker hosts; one of its own
            # is kept by them too (no process to start).
            if self.node.job_name is None:
                return JobHandle.create(pool(), self.payload, self.job_config())
            name = f"nbdata-job-{self.node.job_name}"
            job = job_class().options(name=name, get_if_exists=True,
                                      namespace=cluster.NAMESPACE).remote(
                [self.payload, pool()], self.job_config())
        # A Ray actor ends when the handle that made it goes (a handle found by name
        # does not keep it up): a named job stays up as long as this process, as a
        # tf.data service job does while its dispatcher runs, whichever consumer of
        # this process made it and whichever of them is gone.
        with _NAMED_LOCK:
            kept = _NAMED_JOBS.get(name)
            if kept is None or kept._actor_id != job._actor_id:
                _NAMED_JOBS[name] = job
        return job

    def release(self, job) -> None:
        if self.node.job_name is None:
            with self.lock:
                self.idle.append(job)


class DistributedChunks(ChunkIter):
    """Chunks from the job, in the order they arrive (coordinated reads: this consumer's
    element of each round). State: a position of the global stream, the same whatever
    the number of workers (and, read in coordinated rounds, of consumers): the positions
    in flight (each a worker pipeline's state after the last chunk received from it,
    with the splits it took), per epoch the source's rows no position holds, and the
    rows received and not handed out yet."""

    def __init__(self, node, ctx, state: dict | None, stage):
        self.node = node
        self.ray = cluster.connect(node.address)
        self.stats = ctx.stats(stage, DistributedStats)
        self.service = ctx.resource(node.service_key, lambda: Service(node))
        self.consumer = uuid.uuid4().hex
        self.coordinated = node.num_consumers is not None
        self.shared = node.job_name is not None
        rows = None if node.source is None else int(node.source.cardinality())
        self.pools = None if rows is None else Pools(rows)
        self.slots: dict = {}
        self.rows = RowQueue()
        self.received = 0
        self.ended = False
        self.closed = False
        self.error: BaseException | None = None
        self.request = None
        self.job = self.run_id = None
        self.joined = False
        if self.shared:
            # A shared job is named now: another dataset under its name is refused here.
            self.job = self.service.acquire()
            self._call(self.job.check.remote(node.fingerprint(), node.num_consumers))
        restore = None
        if state is not None:
            restore = self._restore(state, rows)
        self.config = {"seed": ctx.op_seed(node), "iteration": ctx.epoch(node, True),
                       "num_consumers": node.num_consumers, "restore": restore,
                       "fresh_base": 0, "forever": False}
        if self.pools is not None and forever_repeat(node.input, node.source):
            # A fresh position of a resumed run starts at the oldest epoch with rows left.
            self.config["forever"] = True
            self.config["fresh_base"] = self.pools.floor if restore is not None else 0
        if restore is not None or (self.shared and not self.coordinated):
            # Joined now: a position the job cannot resume is refused by restore, and a
            # consumer of a shared job read first come, first served is one of its
            # consumers from the start (the job's run goes on while any is).
            self._join()

    def _join(self) -> None:
        """Join the job (a fresh iterator of its own job or of coordinated rounds joins
        at its first pull: one restored right after it was made never starts a run from
        the beginning, and the consumers of a shared job restored from a saved position
        all find the run of that position)."""
        if self.joined or self.closed:
            return
        node = self.node
        if self.job is None:
            self.job = self.service.acquire()
        self.joined = True
        config = dict(self.config, job=self.service.job_config(),
                      resplit=_resplit_reason(node))
        reply = self._call(self.job.join.remote(self.consumer, node.fingerprint(), config))
        self.run_id = reply["run"]
        self.slots = {int(k): list(v) for k, v in reply["slots"].items()}

    def _restore(self, state: dict, rows) -> dict:
        """The position to resume from, checked against this iterator's kind."""
        node = self.node
        if state.get("shared"):
            raise UnimplementedError(
                f"restore: the iterator read the shared job {node.job_name!r}, whose "
                "position other consumers move too; only an iterator with a job of its "
                "own (no job_name), or one reading in coordinated rounds (num_consumers), "
                "can be restored", node.op)
        if state.get("format") != STATE_FORMAT or "positions" not in state:
            raise InvalidArgumentError(
                "restore: the state of distribute was saved by an earlier version of "
                "nbdata, which kept positions per worker; it cannot be resumed here",
                node.op)
        if self.shared and not self.coordinated:
            raise UnimplementedError(
                f"restore: this iterator reads the shared job {node.job_name!r} first come, "
                "first served, whose position other consumers move too; restore into an "
                "iterator with a job of its own, or read in coordinated rounds "
                "(consumer_index, num_consumers)", node.op)
        if bool(state.get("coordinated")) != self.coordinated:
            raise InvalidArgumentError(
                "restore: the state of distribute was saved by an iterator "
                f"{'reading' if state.get('coordinated') else 'not reading'} in coordinated "
                "rounds (num_consumers), this one "
                f"{'does' if self.coordinated else 'does not'}", node.op)
        if (state["pools"] is None) != (rows is None):
            raise InvalidArgumentError("restore: the state of distribute was saved in "
                                       "another processing_mode", node.op)
        if rows is not None:
            self.pools = Pools(rows, state["pools"])
        if not self.coordinated:
            self.rows = RowQueue(state["rows"])
            self.ended = bool(state["ended"])
        return {"positions": list(state["positions"]), "workers": state.get("workers"),
                "pools": state["pools"], "id": state.get("id")}

    def _call(self, ref):
        """A reply of the job; the job's own errors come out as raised, a lost job as
        UnavailableError."""
        from ray.exceptions import RayActorError, RayTaskError
        try:
            return self.ray.get(ref)
        except RayTaskError as e:
            cause = getattr(e, "cause", None)
            raise (cause if isinstance(cause, BaseException) else e) from None
        except RayActorError as e:
            raise UnavailableError(f"distribute: the job actor is gone ({e})", "distribute") from None

    def _fetch(self) -> None:
        """Receive the next chunk from the job into an empty ``rows`` (or mark the end)."""
        if self.closed:
            return
        if not self.rows.n and not self.ended and self.error is None:
            self._join()
        while not self.rows.n and not self.ended and self.error is None:
            request, self.request = self.request or self._ask(), None
            kind, index, refs, note = self._call(request)
            if kind == "chunk" and self.node.job_name is None:
                # Ask for the one after it now: the job's reply comes while this chunk
                # is consumed. (Not in a shared job, where a chunk asked for and never
                # read would be lost to the other consumers.)
                self.request = self._ask()
            if kind == "end":
                self.ended = True
            elif kind == "error":
                error = note["error"]
                cause = getattr(error, "cause", None)  # a Ray task error wraps the pipeline's
                self.error = cause if isinstance(cause, BaseException) else error
            else:
                for chunk in self.ray.get(refs[0]):
                    self.rows.add(chunk)
                self.received += 1
                if "state" in note:
                    self.slots[index] = note["state"]
                    if self.pools is not None:
                        for key, split in note["taken"]:
                            self.pools.assign(key, split)
                self.stats.worker(index, note)

    def _ask(self):
        return self.job.next.remote(self.consumer, self.node.consumer_index)

    def next(self, want: int):
        self._fetch()
        if self.rows.n:
            # Within one received chunk: a view of the object store, never a join.
            return self.rows.take(min(want, self.rows.pieces[0].n))
        if self.error is not None:
            error, self.error = self.error, None
            self.ended = True
            raise error
        return None

    def save(self) -> dict:
        if self.shared and not self.coordinated:
            return {"shared": True}
        self._join()
        if self.coordinated:
            # The global position after the rounds whose element was handed out: every
            # consumer saving after as many elements saves the same one.
            done = self.received - (1 if self.rows.n else 0)
            found = self._call(self.job.position.remote(self.run_id, done))
            return {"format": STATE_FORMAT, "coordinated": True, "id": found["id"],
                    "positions": found["positions"], "workers": found["workers"],
                    "pools": found["pools"],
                    "rows": [], "ended": False}
        # The chunk that the next pull hands out is received first and kept in the
        # state: the order chunks arrive in is not reproducible, so a consumer that
        # restores "this state, then skip k rows" must find the same rows first.
        self._fetch()
        positions = [p for w in sorted(self.slots) for p in self.slots[w]]
        # Per worker too: a parallel_epochs position is a worker's own (one that ended
        # holds none), resumed only on as many workers.
        workers = [self.slots[w] for w in sorted(self.slots)]
        return {"format": STATE_FORMAT, "coordinated": False, "positions": positions,
                "workers": workers,
                "pools": None if self.pools is None else self.pools.save(),
                "rows": list(self.rows.pieces), "ended": self.ended}

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if not self.joined:
            return
        try:
            self.ray.get(self.job.leave.remote(self.consumer))
        except Exception:  # noqa: BLE001 - the job may be gone with its cluster
            return
        self.service.release(self.job)

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass


def _resplit_reason(node) -> tuple:
    """Why a parallel_epochs position cannot move to another number of workers, and the
    op that prevents it: (message, op)."""
    if node.source is not None:
        return ("", node.op)
    try:
        splittable_source(node.input)
    except UnimplementedError as e:
        return ("processing_mode='parallel_epochs' runs the whole dataset on every worker, "
                "so each worker's position is its own, and the dataset cannot be re-split "
                f"({e.message})", e.op or node.op)
    return ("processing_mode='parallel_epochs' runs the whole dataset on every worker, so "
            "each worker's position is its own (processing_mode='distributed_epoch' "
            "positions re-split among any number of workers)", node.op)
