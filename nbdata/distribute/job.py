"""The job: a Ray actor that owns a distributed dataset's workers, hands out splits,
brokers finished chunks to consumers (first come, first served, or in coordinated
rounds) and restarts a dead worker from the state after its last finished chunk.

Chunks never pass through the job: a worker's reply is two Ray objects, the chunk and
a small note (rows, time, the worker's iterator state after the chunk, the splits it
took); the job waits on the note and hands the consumer the chunk's object reference,
which the consumer reads from Ray's object store.
"""

from __future__ import annotations

import asyncio
import collections
import functools
from typing import Any

from nbdata.distribute.worker import SplitLog, worker_class
from nbdata.errors import InvalidArgumentError, UnavailableError

DEPTH = 2                 # requests in flight per worker
START_TIMEOUT_S = 120.0   # a worker that does not start in this time fails the job


class _Run:
    """One pass of the job over its dataset (an iteration of its consumers)."""

    def __init__(self, run_id: int, config: dict, num_workers: int):
        self.id = run_id
        self.seed = int(config["seed"])
        self.iteration = int(config["iteration"])
        self.num_consumers = config["num_consumers"]
        self.stopped = False
        self.queue: asyncio.Queue = asyncio.Queue(maxsize=2 * num_workers + 2)
        self.live = 0
        self.tasks: list = []
        slots = {i: (config.get("slots") or {}).get(i) or {} for i in range(num_workers)}
        # The state after each worker's last finished chunk, and the splits it took.
        self.acked = {i: slot.get("state") for i, slot in slots.items()}
        self.logs = {i: SplitLog(None, i, slot.get("log")) for i, slot in slots.items()}
        self.assigned = collections.defaultdict(set)
        for log in self.logs.values():
            for key, splits in log.log.items():
                self.assigned[key].update(splits)
        self.pending: dict = {}
        # Coordinated reads: each worker's elements by number, and each consumer's round.
        self.items = {i: {} for i in range(num_workers)}
        self.produced = {i: 0 for i in range(num_workers)}
        self.ended = {i: False for i in range(num_workers)}
        self.rounds: dict = collections.defaultdict(int)
        self.changed = asyncio.Condition()
        self.error = None


class Job:
    """The job actor (async). ``config``: ``fingerprint``, ``num_workers``, ``threads``
    (per worker), ``splits`` (the split list of one epoch, or None in
    parallel_epochs)."""

    def __init__(self, payload: list, config: dict):
        self.payload = payload[0]
        self.config = config
        self.workers: dict = {}
        self.consumers: set = set()
        self.run: _Run | None = None
        self.runs = 0
        self.restarts = 0

    # ------------------------------------------------------------ workers
    def _new_worker(self, index: int):
        import ray
        me = ray.get_runtime_context().current_actor
        # No CPUs reserved: jobs kept idle between iterations (their workers keep the
        # compiled pipeline) must not starve the next job; SPREAD puts workers on
        # different nodes of a cluster.
        # Ray caps an actor's OpenMP threads at its CPUs (0 here): give the worker's
        # kernels its share of the cores.
        threads = str(self.config["threads"])
        env = {"OMP_NUM_THREADS": threads, "NUMBA_NUM_THREADS": threads}
        return worker_class().options(num_cpus=0, scheduling_strategy="SPREAD",
                                      runtime_env={"env_vars": env}).remote(
            self.payload, index, me, self.config["threads"])

    async def _ensure_workers(self) -> None:
        missing = [i for i in range(self.config["num_workers"]) if i not in self.workers]
        for i in missing:
            self.workers[i] = self._new_worker(i)
        try:
            await asyncio.wait_for(asyncio.gather(*[_wait(self.workers[i].ready.remote())
                                                    for i in missing]), START_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise UnavailableError(
                f"distribute: {len(missing)} Ray worker(s) did not start within "
                f"{START_TIMEOUT_S:.0f} s (does the cluster have free CPUs?)") from None

    async def _restart(self, run: _Run, index: int) -> None:
        """A new worker in place of a dead one, resumed from the state after the last
        chunk the dead one finished, replaying the splits it took after that."""
        import ray
        old = self.workers.pop(index, None)
        if old is not None:
            ray.kill(old, no_restart=True)
        self.restarts += 1
        await self._ensure_workers()
        await self._start(run, index)

    def _start(self, run: _Run, index: int):
        """Worker ``index`` opens ``run`` from the state after its last finished chunk."""
        return _wait(self.workers[index].start.remote(
            run.id, run.seed, run.iteration, run.acked[index], run.logs[index].snapshot(),
            run.num_consumers is not None))

    # ---------------------------------------------------------- consumers
    async def join(self, consumer: str, fingerprint: str, config: dict) -> dict:
        """Register a consumer; the first one of a run starts it with ``config``
        (``seed``, ``iteration``, ``num_consumers`` and per-worker ``slots`` states)."""
        if fingerprint != self.config["fingerprint"]:
            raise InvalidArgumentError(
                f"distribute: job {self.config.get('job_name')!r} already runs a different "
                f"dataset (plan fingerprint {self.config['fingerprint']}, this one's is "
                f"{fingerprint}); use another job_name for another dataset")
        if self.run is not None and config["num_consumers"] != self.run.num_consumers:
            raise InvalidArgumentError(
                f"distribute: job {self.config.get('job_name')!r} is read with "
                f"num_consumers={self.run.num_consumers}, got {config['num_consumers']}")
        extra = [i for i in (config.get("slots") or {}) if int(i) >= self.config["num_workers"]]
        if extra:
            raise InvalidArgumentError(
                f"restore: the state holds the positions of {max(extra) + 1} workers, this "
                f"job has {self.config['num_workers']}; restore with the same num_workers")
        self.consumers.add(consumer)
        if self.run is None:
            await self._ensure_workers()
            self.runs += 1
            run = self.run = _Run(self.runs, config, self.config["num_workers"])
            await asyncio.gather(*[self._start(run, i) for i in self.workers])
            run.live = len(self.workers)
            run.tasks = [asyncio.ensure_future(self._produce(run, i)) for i in self.workers]
        return {"run": self.run.id, "consumers": len(self.consumers)}

    async def leave(self, consumer: str) -> None:
        """Unregister a consumer; the last one stops the run (workers close theirs)."""
        self.consumers.discard(consumer)
        if self.consumers or self.run is None:
            return
        run, self.run = self.run, None
        run.stopped = True
        for task in run.tasks:
            task.cancel()
        for w in self.workers.values():
            w.close.remote()
        # Wake the requests still waiting on the run (a consumer asks one chunk ahead).
        while not run.queue.empty():
            run.queue.get_nowait()
        run.queue.put_nowait(("end", None, None, None))
        async with run.changed:
            run.changed.notify_all()

    async def next(self, consumer: str, index: int | None):
        """The next chunk for a consumer: ("chunk", worker, [chunk ref], note),
        ("error", worker, None, note) or ("end", ...)."""
        run = self.run
        if run is None:
            return ("end", None, None, None)
        if run.num_consumers is None:
            item = await run.queue.get()
            if item[0] == "end":
                run.queue.put_nowait(item)  # for the other consumers
            return item
        return await self._coordinated(run, int(index))

    async def _coordinated(self, run: _Run, index: int):
        """Round ``r`` of a consumer comes from worker ``r % num_workers``: the element
        ``(r // num_workers) * num_consumers + index`` of that worker. A round that a
        worker cannot fill ends the job for every consumer (in step)."""
        workers = self.config["num_workers"]
        r = run.rounds[index]
        w = r % workers
        first = (r // workers) * run.num_consumers
        async with run.changed:
            while True:
                if run.error is not None:
                    return run.error
                if run.stopped:
                    return ("end", None, None, None)
                if run.produced[w] >= first + run.num_consumers:
                    break
                if run.ended[w]:
                    return ("end", None, None, None)
                await run.changed.wait()
            item = run.items[w].pop(first + index)
            run.rounds[index] = r + 1
            run.changed.notify_all()
        return item

    # ------------------------------------------------------------ producing
    async def _produce(self, run: _Run, index: int) -> None:
        from ray.exceptions import RayActorError
        inflight: collections.deque = collections.deque()
        try:
            while not run.stopped:
                worker = self.workers[index]
                while len(inflight) < DEPTH:
                    inflight.append(worker.next.options(num_returns=2).remote(run.id))
                chunk_ref, note_ref = inflight.popleft()
                try:
                    note = await note_ref
                except RayActorError:
                    inflight.clear()
                    await self._restart(run, index)
                    continue
                except Exception as e:  # noqa: BLE001 - the consumer raises it
                    note = {"end": True, "error": e}
                if note.get("stale"):
                    continue
                if "error" in note:
                    await self._deliver(run, index, ("error", index, None, note))
                    break
                if note["end"]:
                    break
                run.acked[index] = note["state"]
                await self._deliver(run, index, ("chunk", index, [chunk_ref], note))
        except asyncio.CancelledError:
            return
        await self._finish(run, index)

    async def _deliver(self, run: _Run, index: int, item) -> None:
        if run.num_consumers is None:
            await run.queue.put(item)
            return
        async with run.changed:
            if item[0] == "error":
                run.error = item
            else:
                while len(run.items[index]) >= 2 * run.num_consumers and not run.stopped:
                    await run.changed.wait()
                run.items[index][run.produced[index]] = item
                run.produced[index] += 1
            run.changed.notify_all()

    async def _finish(self, run: _Run, index: int) -> None:
        run.live -= 1
        if run.num_consumers is None:
            if run.live == 0:
                await run.queue.put(("end", None, None, None))
            return
        async with run.changed:
            run.ended[index] = True
            run.changed.notify_all()

    # --------------------------------------------------------------- splits
    async def take_split(self, index: int, key: str, run_id: int):
        """The next unassigned split of epoch ``key`` for worker ``index`` (None when
        every split of that epoch is assigned), logged as that worker's. A worker still
        finishing a chunk of an earlier run gets None: a split given to it would be
        logged in this run but lost with that chunk."""
        run = self.run
        if run is None or run.id != run_id or self.config["splits"] is None:
            return None
        pending = run.pending.get(key)
        if pending is None:
            taken = run.assigned[key]
            pending = run.pending[key] = collections.deque(
                s for s in map(tuple, self.config["splits"]) if s not in taken)
        if not pending:
            return None
        split = pending.popleft()
        run.assigned[key].add(split)
        run.logs[index].log.setdefault(key, []).append(split)
        return split

    # -------------------------------------------------------------- reports
    async def worker_handles(self) -> list:
        await self._ensure_workers()
        return [self.workers[i] for i in sorted(self.workers)]

    async def info(self) -> dict:
        return {"workers": len(self.workers), "restarts": self.restarts, "runs": self.runs,
                "consumers": len(self.consumers)}


async def _wait(ref) -> Any:
    return await ref


@functools.lru_cache(maxsize=None)
def job_class():
    """The Ray actor class of :class:`Job`."""
    from nbdata.distribute.cluster import ray_module
    return ray_module().remote(num_cpus=0, max_concurrency=1000)(Job)
