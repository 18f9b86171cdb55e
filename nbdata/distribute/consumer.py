"""The consumer side of ``distribute``: the chunk iterator that reads finished chunks from
the job, its state (each worker's iterator state after the last chunk this consumer
received, and the splits the worker had taken), and per-worker statistics."""

from __future__ import annotations

import threading
import uuid

from nbdata.compiler.executor import StageStats
from nbdata.distribute import cluster
from nbdata.distribute.job import job_class
from nbdata.errors import UnavailableError, UnimplementedError
from nbdata.ops.runtime import ChunkIter, RowQueue


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

    def _config(self, ray) -> dict:
        from nbdata.distribute.splits import plan_splits
        node = self.node
        cpus = cluster.cluster_cpus()
        workers = node.num_workers or max(1, int(cpus))
        return {"fingerprint": node.fingerprint(), "num_workers": workers,
                "threads": max(1, int(cpus // workers)), "job_name": node.job_name,
                "splits": None if node.source is None else plan_splits(node.source, workers)}

    def acquire(self):
        """A job for one iteration: the named one (shared), else an idle one of ours."""
        ray = cluster.connect(self.node.address)
        with self.lock:
            if self.payload is None:
                self.payload = ray.put((self.node.input, self.node.options, self.node.source))
            if self.node.job_name is None and self.idle:
                return self.idle.pop()
            options = {} if self.node.job_name is None else {
                "name": f"nbdata-job-{self.node.job_name}", "get_if_exists": True,
                "namespace": cluster.NAMESPACE}
            return job_class().options(**options).remote([self.payload], self._config(ray))

    def release(self, job) -> None:
        if self.node.job_name is None:
            with self.lock:
                self.idle.append(job)


class DistributedChunks(ChunkIter):
    """Chunks from the job, in the order they arrive. State: per worker, its iterator
    state after the last chunk received here and the splits it had taken; the rows
    received and not handed out yet."""

    def __init__(self, node, ctx, state: dict | None, stage):
        self.node = node
        self.ray = cluster.connect(node.address)
        self.stats = ctx.stats(stage, DistributedStats)
        self.service = ctx.resource(node.service_key, lambda: Service(node))
        self.consumer = uuid.uuid4().hex
        self.slots: dict = {}
        self.rows = RowQueue()
        self.ended = False
        self.closed = False
        self.error: BaseException | None = None
        self.request = None
        if state is not None:
            if state.get("shared"):
                raise UnimplementedError(
                    f"restore: the iterator read the shared job {node.job_name!r}, whose "
                    "position other consumers move too; only an iterator with a job of its "
                    "own (no job_name) can be restored", node.op)
            self.slots = {int(k): v for k, v in state["slots"].items()}
            self.rows = RowQueue(state["rows"])
            self.ended = bool(state["ended"])
        self.job = self.service.acquire()
        config = {"seed": ctx.op_seed(node), "iteration": ctx.epoch(node, True),
                  "num_consumers": node.num_consumers, "slots": self.slots}
        self._call(self.job.join.remote(self.consumer, node.fingerprint(), config))

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
                self.slots[index] = {"state": note["state"], "log": note["log"]}
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
        # The chunk that the next pull hands out is received first and kept in the
        # state: the order chunks arrive in is not reproducible, so a consumer that
        # restores "this state, then skip k rows" must find the same rows first.
        if self.node.job_name is not None:
            return {"shared": True}
        self._fetch()
        return {"slots": {str(k): v for k, v in self.slots.items()}, "rows": list(self.rows.pieces),
                "ended": self.ended}

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
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
