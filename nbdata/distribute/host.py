"""Worker hosts: long-lived Ray actor processes that run the workers of any number of
jobs, as tf.data service workers are long-running servers that serve many jobs; and
the pool that keeps them and the jobs (the service's dispatcher).

A Ray actor process costs seconds of CPU to start (a Python process that imports
nbdata and Numba) before it compiles anything; a process per worker and one per job
would pay that for every job. Instead each process that distributes keeps a
:class:`Pool` actor (made on first use, owned by that process: not detached, so it and
its hosts end with the driver or ``ray.shutdown``). The pool hosts the jobs without a
``job_name`` as objects on its event loop (a :class:`JobHandle` calls one as an actor
is called; the job ends when the handle the driver made goes) and keeps one
:class:`Host` actor per worker slot (worker index), made when a job first asks for
that slot. A host holds the :class:`~nbdata.distribute.worker.Worker` objects of
every job that runs a worker of that index, keyed by ``"<job id>/<index>/<generation>"``; the job calls them through
``host.call(key, seq, method, ...)``. A host is a threaded actor (``HOST_THREADS``
threads): a call may block (``next`` waits for the worker's next reply), so each
worker's calls run one at a time, in the order the job numbered them (``seq``).

Threads: a host's Numba pool is sized for its node (its cores); each worker's kernels
take at most the job's share of the cores through the worker's
``Options.threading.private_threadpool_size`` (nbdata sets Numba's thread count per
kernel call, per calling thread).

Lifetimes: a job drops its hosted workers when it ends (a pool's job: its driver
handle went, ``end``; a named job actor: its last handle went, ``__ray_shutdown__``);
a host also drops the workers of jobs that died any other way (``ray.kill``), asking
each job it serves whether it is alive every ``PING_S`` (:meth:`Host.reap`). Hosts
hold only weak handles of jobs (the one a job has of itself), so hosting a job's
workers does not keep the job up. A job kept idle keeps
its workers, compiled pipelines included. A killed host takes the workers of every
job on it: each job sees its calls fail, asks the pool for the slot's host (the pool
makes a new one in place of the dead one, once) and restarts its worker there from
its position; a job kept idle does so when it next runs.
"""

from __future__ import annotations

import functools
import os
import threading

HOST_THREADS = 256   # concurrent calls a host serves (about 2 per running worker)
POOL_CALLS = 1000    # concurrent calls of the pool's jobs (a consumer's wait is one)
PING_S = 1.0         # how often a host looks for the dead jobs among those it serves


def _stale(method: str):
    """What a call of a worker that is gone returns (as a worker's stale reply)."""
    if method == "next":
        return [], {"end": True, "stale": True}
    return None


class _Hosted:
    def __init__(self, worker, job_id: str, job):
        self.worker, self.job_id, self.job = worker, job_id, job
        self.seq = 0
        self.dropped = False
        self.turn = threading.Condition()


class Host:
    """One worker process (a threaded Ray actor) hosting the workers of many jobs."""

    def __init__(self, slot: int):
        # Ray gives an actor without CPUs OMP_NUM_THREADS=1: the host's kernels share
        # the node's cores (Numba's pool has one thread per core; each worker's kernels
        # take its private_threadpool_size). Set before Numba starts its threads.
        from nbdata.kernels.threads import core_count
        os.environ["OMP_NUM_THREADS"] = str(core_count())
        self.slot = slot
        self.workers: dict = {}
        self.lock = threading.Lock()
        self.reaper = threading.Thread(target=self._reap, name="nbdata-host-reaper",
                                       daemon=True)
        self.reaper.start()

    def ready(self) -> int:
        return self.slot

    def create(self, key: str, job_id: str, payload, index: int, job, threads: int) -> int:
        """Compile a worker of job ``job_id`` (see Worker) under ``key``."""
        from nbdata.distribute.worker import Worker
        worker = Worker(payload, index, job, threads)
        with self.lock:
            self.workers[key] = _Hosted(worker, job_id, job)
        return index

    def call(self, key: str, seq: int, method: str, *args):
        """``worker.method(*args)`` of the worker under ``key``, after its calls numbered
        below ``seq`` (a worker dropped meanwhile answers as a stale one)."""
        hosted = self.workers.get(key)
        if hosted is None:
            return _stale(method)
        with hosted.turn:
            while hosted.seq != seq and not hosted.dropped:
                hosted.turn.wait()
            if hosted.dropped:
                return _stale(method)
        try:
            return getattr(hosted.worker, method)(*args)
        finally:
            with hosted.turn:
                hosted.seq += 1
                hosted.turn.notify_all()
            if hosted.dropped:     # dropped during the call (a run it started ends)
                hosted.worker.close()

    def drop(self, keys: list) -> int:
        """Close and forget the workers under ``keys`` (those of a job: a key prefix
        ending in "/")."""
        with self.lock:
            gone = [k for k in self.workers
                    if k in keys or any(p.endswith("/") and k.startswith(p) for p in keys)]
            hosted = [self.workers.pop(k) for k in gone]
        for h in hosted:
            with h.turn:
                h.dropped = True
                h.turn.notify_all()
            try:
                h.worker.close()
            except Exception:  # noqa: BLE001 - a broken worker is gone all the same
                pass
        return len(hosted)

    def hosted(self) -> list:
        """The keys of the workers hosted here."""
        with self.lock:
            return sorted(self.workers)

    def reap(self, timeout: float = 10.0) -> int:
        """Drop the workers of the jobs that are gone (a job that does not answer in
        ``timeout`` is taken as alive); how many were dropped."""
        import ray
        from ray.exceptions import RayActorError
        with self.lock:
            jobs = {h.job_id: h.job for h in self.workers.values() if h.job is not None}
        if not jobs:
            return 0
        pings = {job_id: job.alive.remote() for job_id, job in jobs.items()}
        ready, _ = ray.wait(list(pings.values()), num_returns=len(pings), timeout=timeout)
        ready = set(ready)
        dead = []
        for job_id, ref in pings.items():
            if ref in ready:
                try:
                    if ray.get(ref) is False:     # a pool that no longer hosts it
                        dead.append(job_id + "/")
                except RayActorError:
                    dead.append(job_id + "/")
                except Exception:  # noqa: BLE001 - alive, but answered oddly
                    pass
        return self.drop(dead) if dead else 0

    def _reap(self) -> None:
        import time
        while True:
            time.sleep(PING_S)
            try:
                self.reap()
            except Exception:  # noqa: BLE001 - Ray going down with the driver
                continue


class Pool:
    """The worker hosts of one driver process, by slot, and the jobs of its datasets
    that have no ``job_name`` (an async Ray actor owned by that process: the service's
    dispatcher). A job is an object here, not a process of its own; a named job, which
    other processes find by its name, is an actor of its own."""

    def __init__(self):
        self.hosts: dict = {}
        self.jobs: dict = {}

    async def host(self, slot: int, dead: str | None = None):
        """The host of ``slot``, made now if there is none or it is the dead one
        (``dead``: its actor id, as a job that lost it saw it)."""
        host = self.hosts.get(slot)
        if host is None or (dead is not None and host._actor_id.hex() == dead):
            host = self.hosts[slot] = host_class().options(
                num_cpus=0, scheduling_strategy="SPREAD",
                max_concurrency=HOST_THREADS).remote(slot)
        return host

    async def hosts_now(self) -> list:
        return [self.hosts[s] for s in sorted(self.hosts)]

    async def job_ids(self) -> list:
        """The jobs hosted here (those not ended)."""
        return sorted(self.jobs)

    async def create_job(self, job_id: str, payload: list, config: dict) -> str:
        """Host a new job (see Job) under ``job_id``."""
        import ray

        from nbdata.distribute.job import Job
        me = ray.get_runtime_context().current_actor
        self.jobs[job_id] = Job([payload[0], me], config, JobHandle(me, job_id), job_id)
        return job_id

    async def job_call(self, job_id: str, method: str, *args):
        """``await job.method(*args)`` of the job ``job_id``; ``end`` ends it (its run
        stops, its hosts drop its workers). A job that ended answers ``alive`` with
        False and anything else with UnavailableError."""
        job = self.jobs.get(job_id)
        if method == "end":
            job = self.jobs.pop(job_id, None)
            if job is not None:
                await job.end()
            return None
        if job is None:
            if method == "alive":
                return False
            from nbdata.errors import UnavailableError
            raise UnavailableError(f"distribute: the job {job_id} has ended", "distribute")
        return await getattr(job, method)(*args)


class JobHandle:
    """A job hosted by a pool, called as an actor is (``job.info.remote()``). The handle
    the driver made owns the job: the job ends when it goes (as an actor ends with its
    last handle); copies sent elsewhere (to the job's workers) do not."""

    def __init__(self, pool, job_id: str, owner: bool = False):
        self._pool, self._id, self._owner = pool, job_id, owner

    @classmethod
    def create(cls, pool, payload, config: dict) -> "JobHandle":
        import uuid

        import ray
        job_id = uuid.uuid4().hex
        ray.get(pool.create_job.remote(job_id, [payload], config))
        return cls(pool, job_id, owner=True)

    @property
    def job_id(self) -> str:
        return self._id

    def __getattr__(self, method: str):
        if method.startswith("_"):
            raise AttributeError(method)
        return _JobMethod(self._pool, self._id, method)

    def __reduce__(self):
        return JobHandle, (self._pool, self._id)

    def __del__(self):
        if self._owner:
            try:
                self._pool.job_call.remote(self._id, "end")
            except Exception:  # noqa: BLE001 - Ray (or the interpreter) going down
                pass


class _JobMethod:
    def __init__(self, pool, job_id: str, method: str):
        self.pool, self.job_id, self.method = pool, job_id, method

    def remote(self, *args):
        return self.pool.job_call.remote(self.job_id, self.method, *args)


@functools.lru_cache(maxsize=None)
def host_class():
    """The Ray actor class of :class:`Host` (no restarts: a job restarts its workers)."""
    from nbdata.distribute.cluster import ray_module
    return ray_module().remote(max_restarts=0)(Host)


@functools.lru_cache(maxsize=None)
def _pool_class():
    from nbdata.distribute.cluster import ray_module
    return ray_module().remote(num_cpus=0, max_concurrency=POOL_CALLS)(Pool)


_POOL: dict = {}     # (Ray job id, node id) of this driver's connection -> its pool's handle
_POOL_LOCK = threading.Lock()


def pool():
    """This process's pool of worker hosts on the Ray it is connected to (made now on
    first use; kept by this process, so it ends with it or with ``ray.shutdown``)."""
    from nbdata.distribute.cluster import ray_module
    ray = ray_module()
    # The job id alone repeats when this process connects to a new Ray (its first job is
    # numbered as the last one's was): the driver's node tells the two apart.
    context = ray.get_runtime_context()
    key = (context.get_job_id(), context.get_node_id())
    with _POOL_LOCK:
        found = _POOL.get(key)
        if found is None:
            _POOL.clear()          # a pool of an earlier connection is gone with it
            found = _POOL[key] = _pool_class().remote()
        return found
